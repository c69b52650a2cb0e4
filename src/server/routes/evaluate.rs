//! The evaluation handlers (SPEC §9.4): `POST /evaluate`, `/v1/evaluate`
//! and `/evaluate/batch`, and what every evaluating route shares: the
//! serving generation, the choice of pack, and running a large evaluation
//! off the async workers. It must not read a body itself (the extractors
//! do), touch the route table or the middleware, or put any part of a
//! payload in a log line or an error message.

use super::error::{json_response_capped, ApiError};
use super::extract::{EvaluateBody, JsonBody};
use super::middleware::noted;
use super::AppStateRef;
use crate::builtins::CODONS;
use crate::engine::{Decision, Normalize, Source};
use crate::error::ErrorName;
use crate::pack::LoadedPack;
use crate::request::{not_an_object, optional_normalize, type_name, EvaluateRequest};
use crate::server::generation::Generation;
use crate::server::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Serialize;
use serde_json::Value;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use time::OffsetDateTime;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Above this many bytes of payload, an evaluation runs off the async workers.
pub(crate) const INLINE_BYTES: usize = 64 * 1024;

/// What a request holds while it is handled: its `limits.max_concurrency`
/// slot and, for a large body, the memory reserved for it.
#[derive(Debug)]
pub(crate) struct Held {
    /// The slot, until a handler takes it for work of its own ([`Held::take_slot`]).
    pub(crate) slot: std::sync::Mutex<Option<OwnedSemaphorePermit>>,
    pub(crate) _body: Option<OwnedSemaphorePermit>,
}

impl Held {
    /// The slot's permit, if no one took it yet.
    pub(crate) fn take_slot(&self) -> Option<OwnedSemaphorePermit> {
        self.slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// Whether the slot is still held here.
    pub(crate) fn holds_slot(&self) -> bool {
        self.slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some()
    }
}

tokio::task_local! {
    /// What the request being handled holds, set by the concurrency
    /// middleware: work sent off the async workers takes a share of it along.
    pub(crate) static SLOT: Arc<Held>;
}

thread_local! {
    /// Set on a blocking thread while it runs a request's work: whether the
    /// request has already been answered without it.
    static ABANDONED: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// Whether the request whose work runs on this thread has already been
/// answered without it (it ran over `request_timeout_ms`, or its client
/// left): work made of many evaluations (a batch, a gateway body's texts)
/// stops at the next one, its answer would be dropped anyway (SPEC §9.1).
pub(crate) fn abandoned() -> bool {
    ABANDONED.with(|a| {
        a.borrow()
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Acquire))
    })
}

/// Marks the work abandoned when the request's handler is dropped before
/// the work's answer came (a 503 at `request_timeout_ms`).
struct AbandonOnDrop(Option<Arc<AtomicBool>>);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f.store(true, Ordering::Release);
        }
    }
}

/// Clears [`ABANDONED`] when the work ends, however it ends.
struct Attached;

impl Attached {
    fn to(flag: Arc<AtomicBool>) -> Self {
        ABANDONED.with(|a| *a.borrow_mut() = Some(flag));
        Self
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        ABANDONED.with(|a| a.borrow_mut().take());
    }
}

/// Large evaluations running at once: a few per core. They are CPU-bound,
/// so more at once finish no sooner, and each holds its text, its decision
/// and its answer in memory: 400 of them at once took 500 MB (issue 27).
/// The others wait (their requests' timeout still runs) holding only their
/// text.
fn heavy_gate() -> &'static Arc<Semaphore> {
    static GATE: OnceLock<Arc<Semaphore>> = OnceLock::new();
    GATE.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
        Arc::new(Semaphore::new(cores.saturating_mul(2).max(2)))
    })
}

/// Runs `work` in place when the payload is small (`bytes` ≤ [`INLINE_BYTES`]),
/// else on a blocking thread, so that a large evaluation never stalls the
/// async workers (and `/healthz`); request_timeout_ms still bounds it, the
/// wait for one of the few large evaluations that run at once included.
///
/// A blocking thread cannot be stopped from outside, so work that outlives
/// its request's 503 keeps the request's concurrency slot ([`SLOT`]) until
/// it ends: a slot is never free while its work still runs. And it learns
/// it was abandoned ([`abandoned`]), to stop between evaluations.
pub(crate) async fn off_workers<F>(bytes: usize, work: F) -> Result<Response, ApiError>
where
    F: FnOnce() -> Result<Response, ApiError> + Send + 'static,
{
    if bytes <= INLINE_BYTES {
        return work();
    }
    let slot = SLOT.try_with(Arc::clone).ok();
    let turn = Arc::clone(heavy_gate())
        .acquire_owned()
        .await
        .map_err(|_| ApiError::internal("internal error (a bug): the evaluation gate closed"))?;
    let flag = Arc::new(AtomicBool::new(false));
    let mut on_drop = AbandonOnDrop(Some(Arc::clone(&flag)));
    let done = tokio::task::spawn_blocking(move || {
        let _slot = slot;
        let _turn = turn;
        let _attached = Attached::to(flag);
        work()
    })
    .await;
    // Answered with the work's own result: nothing was abandoned.
    on_drop.0 = None;
    done.map_err(|_| ApiError::internal("internal error (a bug): the evaluation did not finish"))?
}

pub(super) fn now_unix_nanos() -> i128 {
    OffsetDateTime::now_utc().unix_timestamp_nanos()
}

/// The generation an evaluation uses: loaded and with a valid license.
pub(crate) fn serving(state: &AppState) -> Result<Arc<Generation>, ApiError> {
    let generation = state
        .current()
        .ok_or_else(|| ApiError::unavailable("no generation is loaded"))?;
    if generation.expired_at(now_unix_nanos()) {
        return Err(generation.expired_error().into());
    }
    Ok(generation)
}

/// Pack choice (SPEC §9.4): the request's, else `default_pack`, else the only one.
pub(crate) fn choose<'g>(
    generation: &'g Generation,
    requested: Option<&str>,
    default_pack: Option<&str>,
) -> Result<&'g LoadedPack, ApiError> {
    let loaded = || {
        generation
            .packs
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let not_found = |what: String| {
        ApiError::new(
            ErrorName::PackNotFoundError,
            format!("{what} (loaded: {})", loaded()),
        )
    };
    match (requested, default_pack) {
        (Some(id), _) => generation
            .packs
            .get(id)
            .ok_or_else(|| not_found("`pack_id` names no loaded pack".into())),
        (None, Some(id)) => generation
            .packs
            .get(id)
            .ok_or_else(|| not_found(format!("default_pack `{id}` is not loaded"))),
        (None, None) if generation.packs.len() == 1 => generation
            .packs
            .values()
            .next()
            .ok_or_else(|| not_found("no pack is loaded".into())),
        (None, None) => Err(ApiError::bad_request(format!(
            "{} packs are loaded: name one with `pack_id` (loaded: {})",
            generation.packs.len(),
            loaded()
        ))),
    }
}

/// `remedy` of `/v1/evaluate`: display names of what matched, in trigger order.
#[derive(Debug, Serialize)]
struct Remedy<'a> {
    clean_text: &'a str,
    redacted_categories: Vec<&'a str>,
}

fn remedy<'a>(d: &'a Decision<'a>) -> Remedy<'a> {
    let mut categories: Vec<&'a str> = Vec::new();
    let mut push = |c: &'a str| {
        if !categories.contains(&c) {
            categories.push(c);
        }
    };
    for t in &d.triggers {
        match (t.source, &t.codons) {
            (Source::Builtin, Some(codes)) => {
                for code in codes {
                    if let Some(c) = CODONS.iter().find(|c| c.code == *code) {
                        push(c.category);
                    }
                }
            }
            _ => push(t.rule_id),
        }
    }
    Remedy {
        clean_text: &d.clean_text,
        redacted_categories: categories,
    }
}

#[derive(Serialize)]
struct SingleAnswer<'a> {
    #[serde(flatten)]
    decision: &'a Decision<'a>,
    generation: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    remedy: Option<Remedy<'a>>,
}

async fn evaluate_single(
    state: AppStateRef,
    request: EvaluateRequest,
    with_remedy: bool,
) -> Result<Response, ApiError> {
    let bytes = request.text.len();
    off_workers(bytes, move || {
        let generation = serving(&state)?;
        let pack = choose(
            &generation,
            request.pack_id.as_deref(),
            state.config.default_pack.as_deref(),
        )?;
        let normalize = request.normalize.unwrap_or(state.config.normalize);
        let decision = pack.evaluator.evaluate_with(&request.text, normalize);
        state.metrics.observe_decision(&decision);
        let answer = SingleAnswer {
            decision: &decision,
            generation: generation.number,
            remedy: with_remedy.then(|| remedy(&decision)),
        };
        let max = state.config.limits.max_response_bytes;
        Ok(noted(
            json_response_capped(StatusCode::OK, &answer, max)?,
            &decision,
        ))
    })
    .await
}

/// `POST /evaluate`: the decision and the generation.
pub(super) async fn evaluate(
    State(state): State<AppStateRef>,
    body: EvaluateBody,
) -> Result<Response, ApiError> {
    evaluate_single(state, body.request, false).await
}

/// `POST /v1/evaluate`: `/evaluate`'s answer with `remedy`.
pub(super) async fn evaluate_v1(
    State(state): State<AppStateRef>,
    body: EvaluateBody,
) -> Result<Response, ApiError> {
    evaluate_single(state, body.request, true).await
}

#[derive(Serialize)]
#[serde(untagged)]
enum BatchResult<'a> {
    Decision(Decision<'a>),
    Error {
        error: &'static str,
        message: String,
    },
}

/// The answer of a batch.
#[derive(Serialize)]
struct BatchAnswer<'a> {
    generation: u64,
    results: Vec<BatchResult<'a>>,
}

/// `POST /evaluate/batch`: one result per item, a decision or that item's error.
pub(super) async fn evaluate_batch(
    State(state): State<AppStateRef>,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let limits = &state.config.limits;
    let (items, normalize) = batch_items(body).map_err(ApiError::bad_request)?;
    let normalize = normalize.unwrap_or(state.config.normalize);
    if items.len() > limits.max_batch_items {
        return Err(ApiError::bad_request(format!(
            "the batch has {} items; at most {} are allowed (limits.max_batch_items)",
            items.len(),
            limits.max_batch_items
        )));
    }
    // Every item's text counts: a batch of many small texts is as heavy as one large one.
    let bytes: usize = items
        .iter()
        .filter_map(|i| i.get("text").and_then(Value::as_str))
        .map(str::len)
        .sum();
    off_workers(bytes, move || batch_answer(&state, items, normalize)).await
}

/// `items` of a batch body (an array), and its `normalize` (every item's
/// default, SPEC §15).
fn batch_items(body: Value) -> Result<(Vec<Value>, Option<Normalize>), String> {
    let mut obj = match body {
        Value::Object(obj) => obj,
        other => return Err(not_an_object(&other, "the body")),
    };
    let normalize = optional_normalize(obj.remove("normalize"))?;
    match obj.remove("items") {
        Some(Value::Array(items)) => Ok((items, normalize)),
        Some(other) => Err(format!(
            "`items` must be an array, not {}",
            type_name(&other)
        )),
        None => Err("`items` is missing".into()),
    }
}

/// The request of item `i`, or its 400.
fn batch_item(i: usize, item: Value) -> Result<EvaluateRequest, ApiError> {
    let taken = match item {
        Value::Object(mut obj) => EvaluateRequest::take_from(&mut obj),
        other => Err(not_an_object(&other, "the item")),
    };
    taken.map_err(|m| ApiError::bad_request(format!("items[{i}]: {m}")))
}

/// The answer to a batch whose items were checked (not too many).
fn batch_answer(
    state: &AppState,
    items: Vec<Value>,
    normalize: Normalize,
) -> Result<Response, ApiError> {
    let generation = serving(state)?;
    let default_pack = state.config.default_pack.as_deref();
    let requests: Vec<Result<EvaluateRequest, ApiError>> = items
        .into_iter()
        .enumerate()
        .map(|(i, item)| batch_item(i, item))
        .collect();
    let results: Vec<BatchResult<'_>> = requests
        .iter()
        .map(|request| {
            let chosen = request.as_ref().map_err(Clone::clone).and_then(|r| {
                choose(&generation, r.pack_id.as_deref(), default_pack).map(|p| (p, r))
            });
            match chosen {
                // The request was already answered 503: the rest is not evaluated.
                Ok(_) if abandoned() => BatchResult::Error {
                    error: ErrorName::ServiceUnavailableError.as_str(),
                    message: "not evaluated: the request ran over limits.request_timeout_ms".into(),
                },
                Ok((pack, r)) => {
                    let d = pack
                        .evaluator
                        .evaluate_with(&r.text, r.normalize.unwrap_or(normalize));
                    state.metrics.observe_decision(&d);
                    BatchResult::Decision(d)
                }
                Err(e) => {
                    let (error, message) = e.into_parts();
                    BatchResult::Error { error, message }
                }
            }
        })
        .collect();
    json_response_capped(
        StatusCode::OK,
        &BatchAnswer {
            generation: generation.number,
            results,
        },
        state.config.limits.max_response_bytes,
    )
}
