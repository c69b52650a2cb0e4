//! The evaluation handlers ([§9.4](docs/http-api.md#s9-4)): `POST /evaluate`, `/v1/evaluate`
//! and `/evaluate/batch`. They read bodies through the extractors and run
//! their work through [`crate::server::work`]; they must not touch the
//! route table or the middleware, or put any part of a payload in a log
//! line or an error message.

use crate::builtins::CODONS;
use crate::engine::{Decision, Normalize, Source};
use crate::error::ErrorName;
use crate::request::{
    not_an_object, optional_monitor, optional_normalize, type_name, EvaluateRequest,
};
use crate::server::audit::{settle, At, Pending};
use crate::server::http::{json_response_capped, ApiError, EvaluateBody, JsonBody};
use crate::server::monitor::{is_monitored, permit_view, Monitored};
use crate::server::state::AppStateRef;
use crate::server::work::{abandoned, choose, noted, off_workers, serving};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Serialize;
use serde_json::Value;

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
    #[serde(skip_serializing_if = "Option::is_none")]
    monitored: Option<Monitored<'a>>,
}

async fn evaluate_single(
    state: AppStateRef,
    request: EvaluateRequest,
    route: &'static str,
    request_id: Option<String>,
) -> Result<Response, ApiError> {
    let bytes = request.text.len();
    let with_remedy = route == "/v1/evaluate";
    let resp = off_workers(bytes, move || {
        let generation = serving(&state)?;
        let pack = choose(
            &generation,
            request.pack_id.as_deref(),
            state.config.default_pack.as_deref(),
        )?;
        let normalize = request.normalize.unwrap_or(state.config.normalize);
        let decision = pack.evaluator.evaluate_with(&request.text, normalize);
        state.metrics.observe_decision(&decision);
        let monitor = is_monitored(&state, &pack.pack_id, request.monitor);
        let at = At::new(route, request_id.as_deref(), generation.number, pack).monitored(monitor);
        let logged = state.log_decision(&decision, &at, request.text.as_bytes());
        let (shown, monitored) = if monitor {
            state.metrics.observe_monitored(&decision);
            let (view, m) = permit_view(&decision, &request.text);
            (view, Some(m))
        } else {
            (decision, None)
        };
        let decision = shown;
        let answer = SingleAnswer {
            decision: &decision,
            generation: generation.number,
            remedy: with_remedy.then(|| remedy(&decision)),
            monitored,
        };
        let max = state.config.limits.max_response_bytes;
        Ok(logged.attach(noted(
            json_response_capped(StatusCode::OK, &answer, max)?,
            &decision,
        )))
    })
    .await?;
    settle(resp).await
}

/// `POST /evaluate`: the decision and the generation.
pub(crate) async fn evaluate(
    State(state): State<AppStateRef>,
    headers: HeaderMap,
    body: EvaluateBody,
) -> Result<Response, ApiError> {
    evaluate_single(state, body.request, "/evaluate", request_id(&headers)).await
}

/// `POST /v1/evaluate`: `/evaluate`'s answer with `remedy`.
pub(crate) async fn evaluate_v1(
    State(state): State<AppStateRef>,
    headers: HeaderMap,
    body: EvaluateBody,
) -> Result<Response, ApiError> {
    evaluate_single(state, body.request, "/v1/evaluate", request_id(&headers)).await
}

/// The request's `x-request-id` (set by the router when the client sent
/// none).
pub(crate) fn request_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get(crate::server::http::REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

#[derive(Serialize)]
#[serde(untagged)]
enum BatchResult<'a> {
    Decision {
        #[serde(flatten)]
        decision: Decision<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        monitored: Option<Monitored<'a>>,
    },
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
pub(crate) async fn evaluate_batch(
    State(state): State<AppStateRef>,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let request_id = request_id(&headers);
    let limits = &state.config.limits;
    let (items, normalize, monitor_all) = batch_items(body).map_err(ApiError::bad_request)?;
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
    let resp = off_workers(bytes, move || {
        let opts = BatchOptions {
            normalize,
            monitor_all,
            request_id: request_id.as_deref(),
        };
        batch_answer(&state, items, &opts)
    })
    .await?;
    settle(resp).await
}

/// `items` of a batch body (an array), its `normalize` (every item's
/// default, [§15](docs/evasion.md#s15)) and whether its `mode` is `monitor` (for every item).
fn batch_items(body: Value) -> Result<(Vec<Value>, Option<Normalize>, bool), String> {
    let mut obj = match body {
        Value::Object(obj) => obj,
        other => return Err(not_an_object(&other, "the body")),
    };
    let normalize = optional_normalize(obj.remove("normalize"))?;
    let monitor = optional_monitor(obj.remove("mode"))?.unwrap_or(false);
    match obj.remove("items") {
        Some(Value::Array(items)) => Ok((items, normalize, monitor)),
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

/// What a batch says for all of its items.
struct BatchOptions<'a> {
    normalize: Normalize,
    monitor_all: bool,
    request_id: Option<&'a str>,
}

/// The answer to a batch whose items were checked (not too many).
fn batch_answer(
    state: &crate::server::state::AppState,
    items: Vec<Value>,
    opts: &BatchOptions<'_>,
) -> Result<Response, ApiError> {
    let (normalize, monitor_all, request_id) = (opts.normalize, opts.monitor_all, opts.request_id);
    let generation = serving(state)?;
    let mut logged = Pending::default();
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
                    let monitor = is_monitored(state, &pack.pack_id, r.monitor || monitor_all);
                    let at = At::new("/evaluate/batch", request_id, generation.number, pack)
                        .monitored(monitor);
                    logged.join(state.log_decision(&d, &at, r.text.as_bytes()));
                    if monitor {
                        state.metrics.observe_monitored(&d);
                        let (view, m) = permit_view(&d, &r.text);
                        BatchResult::Decision {
                            decision: view,
                            monitored: Some(m),
                        }
                    } else {
                        BatchResult::Decision {
                            decision: d,
                            monitored: None,
                        }
                    }
                }
                Err(e) => {
                    let (error, message) = e.into_parts();
                    BatchResult::Error { error, message }
                }
            }
        })
        .collect();
    let resp = json_response_capped(
        StatusCode::OK,
        &BatchAnswer {
            generation: generation.number,
            results,
        },
        state.config.limits.max_response_bytes,
    )?;
    Ok(logged.attach(resp))
}
