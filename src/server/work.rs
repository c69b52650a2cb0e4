//! A request's work in serve mode ([§9.1](docs/configuration.md#s9-1), [§9.4](docs/http-api.md#s9-4)): what it holds (its
//! `limits.max_concurrency` slot and body memory), running a large
//! evaluation off the async workers and learning when it was abandoned, the
//! serving generation and the choice of pack, and the note of a decision for
//! the request log. Every handler (the evaluation routes, streams, the
//! gateways) uses it; it never reads a body, knows no route and puts no
//! part of a payload in a message.

use crate::engine::Decision;
use crate::error::ErrorName;
use crate::pack::LoadedPack;
use crate::server::generation::Generation;
use crate::server::http::ApiError;
use crate::server::state::AppState;
use axum::response::Response;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use time::OffsetDateTime;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long a request waits for a slot when `max_concurrency` are in flight.
pub const QUEUE_WAIT: Duration = Duration::from_millis(250);

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
/// stops at the next one, its answer would be dropped anyway ([§9.1](docs/configuration.md#s9-1)).
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

pub(crate) fn now_unix_nanos() -> i128 {
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

/// Pack choice ([§9.4](docs/http-api.md#s9-4)): the request's, else `default_pack`, else the only one.
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

/// What the evaluation handlers tell the request log line (debug level only).
#[derive(Debug, Clone)]
pub(crate) struct EvalNote {
    pub(crate) pack_id: String,
    pub(crate) action: String,
}

/// `resp` with the deciding decision noted for the request log line.
pub(crate) fn noted(mut resp: Response, d: &Decision<'_>) -> Response {
    if tracing::enabled!(tracing::Level::DEBUG) {
        resp.extensions_mut().insert(EvalNote {
            pack_id: d.pack_id.to_string(),
            action: d.action.to_string(),
        });
    }
    resp
}

/// The concurrency slot of a request, in its extensions: a handler may take
/// it ([`Slot::take`]) to hold it for work that goes on after its response.
#[derive(Debug, Clone)]
pub(crate) struct Slot(pub(crate) Arc<Held>);

impl Slot {
    /// The permit, if no one took it yet.
    pub(crate) fn take(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.0.take_slot()
    }
}
