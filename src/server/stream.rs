//! `POST /v1/evaluate/stream` (SPEC §11.2): cuts the request's text into
//! pieces, runs them through one stream session of one generation on a
//! blocking thread, and sends its releases as server-sent events. Errors
//! found before the stream starts are the usual JSON errors; an event never
//! holds text the session did not release.

use super::generation::Generation;
use super::routes::{choose, serving, ApiError, AppStateRef, EvaluateBody};
use super::AppState;
use crate::engine::{Normalize, Severity, StreamOptions};
use crate::pack::LoadedPack;
use crate::request::type_name;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Default piece size, in code points.
pub const DEFAULT_CHUNK_SIZE: usize = 16;
/// Events buffered between the session's thread and the connection.
const EVENT_BUFFER: usize = 32;

/// The stream options of a request body, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StreamRequest {
    chunk_size: usize,
    opts: StreamOptions,
}

/// Largest `chunk_size` and `lookahead_chars` (a body holds at most 1 MiB).
pub const MAX_STREAM_OPTION: u64 = 1 << 20;

fn uint_field(obj: &Map<String, Value>, key: &str, min: u64) -> Result<Option<usize>, String> {
    let max = MAX_STREAM_OPTION;
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        // JSON has one number type: 16.0 is the integer 16 (as JSON Schema says).
        Some(Value::Number(n)) => match n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 2f64.powi(53))
                .map(|f| f as u64)
        }) {
            Some(v) if (min..=max).contains(&v) => {
                Ok(Some(usize::try_from(v).unwrap_or(usize::MAX)))
            }
            _ => Err(format!("`{key}` must be an integer from {min} to {max}")),
        },
        Some(other) => Err(format!(
            "`{key}` must be an integer from {min} to {max}, not {}",
            type_name(other)
        )),
    }
}

fn stream_request(
    obj: &Map<String, Value>,
    max_holdback_chars: usize,
    normalize: Normalize,
) -> Result<StreamRequest, String> {
    let chunk_size = uint_field(obj, "chunk_size", 1)?.unwrap_or(DEFAULT_CHUNK_SIZE);
    let lookahead_chars = uint_field(obj, "lookahead_chars", 0)?.unwrap_or(0);
    let block_on_fatal = match obj.get("block_on_fatal") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(format!(
                "`block_on_fatal` must be a boolean, not {}",
                type_name(other)
            ))
        }
    };
    Ok(StreamRequest {
        chunk_size,
        opts: StreamOptions {
            block_on_fatal,
            lookahead_chars,
            max_holdback_chars,
            normalize,
            ..StreamOptions::default()
        },
    })
}

/// The handler of `POST /v1/evaluate/stream`.
pub(super) async fn evaluate_stream(
    State(state): State<AppStateRef>,
    body: EvaluateBody,
) -> Result<Response, ApiError> {
    let normalize = body.request.normalize.unwrap_or(state.config.normalize);
    let request = stream_request(&body.rest, state.config.max_holdback_chars, normalize)
        .map_err(ApiError::bad_request)?;
    let text = body.request.text;
    let generation = serving(&state)?;
    let pack_id = choose(
        &generation,
        body.request.pack_id.as_deref(),
        state.config.default_pack.as_deref(),
    )?
    .pack_id
    .clone();
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(EVENT_BUFFER);
    let state = Arc::clone(&state);
    let runtime = tokio::runtime::Handle::current();
    let patience = Duration::from_millis(state.config.limits.request_timeout_ms);
    // The session is CPU work: it runs off the async workers, with the one
    // generation it started with, whatever reloads happen meanwhile.
    tokio::task::spawn_blocking(move || {
        if let Some(pack) = generation.packs.get(&pack_id) {
            // A client that stops reading for `request_timeout_ms` ends its
            // stream: it cannot pin a thread and a slot.
            run_session(&state, &generation, pack, &text, request, |event| {
                runtime.block_on(tx.send_timeout(event, patience)).is_ok()
            });
        }
    });
    let events = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<Bytes, std::convert::Infallible>(b), rx))
    });
    let mut resp = Body::from_stream(events).into_response();
    *resp.status_mut() = StatusCode::OK;
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Proxies such as nginx would otherwise buffer the whole stream.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(resp)
}

/// A release event (fields in the order of SPEC §11.2).
#[derive(Serialize)]
struct ReleaseEvent<'a> {
    chunk_index: usize,
    consumed: usize,
    text: &'a str,
    redacted: bool,
    blocked: bool,
    reason: Option<&'a str>,
}

/// The blocked event.
#[derive(Serialize)]
struct BlockedEvent<'a> {
    chunk_index: usize,
    consumed: usize,
    text: &'a str,
    redacted: bool,
    blocked: bool,
    reason: &'a str,
    action: &'a str,
    triggers: Vec<EventTrigger<'a>>,
}

#[derive(Serialize)]
struct EventTrigger<'a> {
    rule_id: &'a str,
    severity: &'a str,
}

/// The last event: the decision of the whole text.
#[derive(Serialize)]
struct DoneEvent<'a> {
    done: bool,
    action: &'a str,
    severity: Option<&'a str>,
    reason: Option<&'a str>,
    receipt_hash: &'a str,
    pack_id: &'a str,
    generation: u64,
    latency_us: f64,
    /// SPEC §15: present (true) when the evasion view differed from the text.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    normalized: bool,
}

fn event(value: &impl Serialize) -> Bytes {
    let mut out = b"data: ".to_vec();
    // These structs of strings and numbers always serialise.
    out.extend(serde_json::to_vec(value).unwrap_or_default());
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// Runs one session over `text` cut into pieces and hands each event to
/// `send`; stops early when `send` reports that the client is gone.
fn run_session(
    state: &AppState,
    generation: &Generation,
    pack: &LoadedPack,
    text: &str,
    request: StreamRequest,
    mut send: impl FnMut(Bytes) -> bool,
) {
    // Engine time: the loop's time less the time spent handing events on
    // (two clock reads per event rather than per piece).
    let started = Instant::now();
    let mut sending = std::time::Duration::ZERO;
    let mut session = pack.evaluator.stream(request.opts);
    let mut index = 0usize;
    let mut rest = text;
    let mut finished = false;
    while session.blocked().is_none() && !finished {
        let released = if rest.is_empty() {
            finished = true;
            session.finish()
        } else {
            let cut = rest
                .char_indices()
                .nth(request.chunk_size)
                .map_or(rest.len(), |(i, _)| i);
            let (piece, tail) = rest.split_at(cut);
            rest = tail;
            session.push(piece)
        };
        let consumed = session.pushed_chars();
        let bytes = match session.blocked() {
            Some(b) => event(&BlockedEvent {
                chunk_index: index,
                consumed,
                text: "",
                redacted: false,
                blocked: true,
                reason: &b.reason,
                action: &b.action,
                triggers: b
                    .triggers
                    .iter()
                    .map(|(rule_id, severity)| EventTrigger {
                        rule_id,
                        severity: severity.as_str(),
                    })
                    .collect(),
            }),
            None if released.text.is_empty() => continue,
            None => event(&ReleaseEvent {
                chunk_index: index,
                consumed,
                text: &released.text,
                redacted: released.redacted,
                blocked: false,
                reason: None,
            }),
        };
        index += 1;
        let sent = Instant::now();
        let ok = send(bytes);
        sending += sent.elapsed();
        if !ok {
            return;
        }
    }
    let decision = pack.evaluator.evaluate_with(text, request.opts.normalize);
    let latency_us = started.elapsed().saturating_sub(sending).as_secs_f64() * 1e6;
    let blocked = session.blocked().is_some();
    state.metrics.observe_decision(&decision);
    state.metrics.observe_stream_session(&pack.pack_id, blocked);
    let done = event(&DoneEvent {
        done: true,
        action: decision.action,
        severity: decision.severity.map(Severity::as_str),
        reason: decision.reason,
        receipt_hash: &decision.receipt_hash,
        pack_id: decision.pack_id,
        generation: generation.number,
        latency_us,
        normalized: decision.normalized,
    });
    send(done);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn options_default_and_validate() {
        let r = stream_request(&obj(json!({"text": "x"})), 9, Normalize::None).unwrap();
        assert_eq!(r.chunk_size, 16);
        assert_eq!(
            r.opts,
            StreamOptions {
                block_on_fatal: true,
                lookahead_chars: 0,
                max_holdback_chars: 9,
                ..StreamOptions::default()
            }
        );
        let r = stream_request(
            &obj(json!({"chunk_size": 4, "block_on_fatal": false, "lookahead_chars": 28})),
            9,
            Normalize::None,
        )
        .unwrap();
        assert_eq!(
            (r.chunk_size, r.opts.block_on_fatal, r.opts.lookahead_chars),
            (4, false, 28)
        );
        let r = stream_request(
            &obj(json!({"chunk_size": 4.0, "block_on_fatal": null, "lookahead_chars": null})),
            9,
            Normalize::None,
        )
        .unwrap();
        assert_eq!(
            (r.chunk_size, r.opts.block_on_fatal, r.opts.lookahead_chars),
            (4, true, 0)
        );
        let r = stream_request(&obj(json!({})), 9, Normalize::Evasion).unwrap();
        assert_eq!(r.opts.normalize, Normalize::Evasion);
        for (body, msg) in [
            (
                json!({"chunk_size": 0}),
                "`chunk_size` must be an integer from 1 to 1048576",
            ),
            (
                json!({"chunk_size": -3}),
                "`chunk_size` must be an integer from 1 to 1048576",
            ),
            (
                json!({"chunk_size": 1.5}),
                "`chunk_size` must be an integer from 1 to 1048576",
            ),
            (
                json!({"lookahead_chars": 36_893_488_147_419_103_233.0_f64}),
                "`lookahead_chars` must be an integer from 0 to 1048576",
            ),
            (
                json!({"chunk_size": 1_048_577}),
                "`chunk_size` must be an integer from 1 to 1048576",
            ),
            (
                json!({"chunk_size": 0.0}),
                "`chunk_size` must be an integer from 1 to 1048576",
            ),
            (
                json!({"chunk_size": "4"}),
                "`chunk_size` must be an integer from 1 to 1048576, not a string",
            ),
            (
                json!({"lookahead_chars": -1}),
                "`lookahead_chars` must be an integer from 0 to 1048576",
            ),
            (
                json!({"block_on_fatal": "yes"}),
                "`block_on_fatal` must be a boolean, not a string",
            ),
        ] {
            assert_eq!(
                stream_request(&obj(body), 9, Normalize::None).unwrap_err(),
                msg
            );
        }
    }
}
