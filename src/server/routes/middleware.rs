//! The middleware of serve mode ([§9.1](docs/configuration.md#s9-1), [§9.4](docs/http-api.md#s9-4)): request ids, metrics and
//! the request log line, JSON bodies for layers' errors, bearer-token auth
//! and the concurrency limit. Which routes are exempt, probes or gateways,
//! and their metrics labels, come from the route table ([`super::ROUTES`]);
//! no list of paths lives here. It must not evaluate, read a body's content
//! or log a payload, a token or a raw path.

use super::{route_at, ROUTES, UNMATCHED_ROUTE};
use crate::error::ErrorName;
use crate::server::auth::API_KEY_HEADER;
use crate::server::http::{
    answer_too_large, declared_length, declares_over, is_length_limit, layer_error_json,
    method_label, too_large, ApiError, LayerMessages, Route, REQUEST_ID_HEADER,
};
use crate::server::state::AppStateRef;
use crate::server::work::{EvalNote, Held, Slot, INLINE_BYTES, QUEUE_WAIT, SLOT};
use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, TRANSFER_ENCODING};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Serve mode's [`LayerMessages`].
const SERVE_MESSAGES: LayerMessages = LayerMessages {
    not_found: super::NOT_FOUND_MESSAGE,
    too_large: "the request body is over limits.max_body_bytes",
    timeout: "the request did not complete within limits.request_timeout_ms",
};

/// Turns the bodies of errors produced by layers (413 from the body limit,
/// 503 from the timeout) into the JSON error body.
pub(super) async fn json_errors(resp: Response) -> Response {
    layer_error_json(resp, &SERVE_MESSAGES)
}

/// The `route` label of a request: its entry's label, never the raw path.
fn route_label(req: &Request) -> &'static str {
    req.extensions()
        .get::<MatchedPath>()
        .and_then(|m| ROUTES.iter().find(|r| r.path == m.as_str()))
        .map_or(UNMATCHED_ROUTE, |r| r.label)
}

/// Metrics and the per-request debug line (route template, never the raw path).
pub(super) async fn observe(
    State(state): State<AppStateRef>,
    req: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    // Only routes of the table are labels: the fallback's raw path is not.
    let route = route_label(&req);
    let method = method_label(req.method());
    let request_id = tracing::enabled!(tracing::Level::DEBUG)
        .then(|| req.headers().get(REQUEST_ID_HEADER).cloned())
        .flatten();
    let resp = next.run(req).await;
    let elapsed = started.elapsed();
    state
        .metrics
        .observe_request(route, method, resp.status().as_str(), elapsed.as_secs_f64());
    if tracing::enabled!(tracing::Level::DEBUG) {
        let note = resp.extensions().get::<EvalNote>();
        tracing::debug!(
            route,
            method,
            status = resp.status().as_u16(),
            latency_us = elapsed.as_secs_f64() * 1e6,
            pack_id = note.map(|n| n.pack_id.as_str()),
            action = note.map(|n| n.action.as_str()),
            request_id = request_id
                .as_ref()
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default(),
            "request"
        );
    }
    resp
}

/// Bearer-token check ([§9.1](docs/configuration.md#s9-1) `auth`), fail closed when tokens are
/// configured but not loaded. Gateway routes also take `x-api-key` ([§12](docs/gateways.md#s12)).
pub(super) async fn auth(State(state): State<AppStateRef>, req: Request, next: Next) -> Response {
    let route = route_at(req.uri().path());
    if state.config.tokens_file.is_some() && !route.is_some_and(|r| r.auth_exempt) {
        let gateway = route.is_some_and(|r| r.gateway);
        let ok = {
            let generation = state.current.load();
            generation
                .as_ref()
                .and_then(|g| g.tokens.as_ref())
                .is_some_and(|t| {
                    t.accepts_header(req.headers().get(AUTHORIZATION).map(HeaderValue::as_bytes))
                        || (gateway
                            && req
                                .headers()
                                .get(API_KEY_HEADER)
                                .and_then(|v| v.to_str().ok())
                                .is_some_and(|k| t.accepts(k.trim())))
                })
        };
        if !ok {
            return ApiError::new(
                ErrorName::UnauthorizedError,
                "a valid `Authorization: Bearer <token>` header is needed",
            )
            .into_response();
        }
    }
    next.run(req).await
}

/// `limits.max_concurrency`: once its body has arrived, a request waits up
/// to [`QUEUE_WAIT`] for a slot, then gets 503. Probes are not limited. A
/// body over 64 KiB is read only once memory is reserved for it (the
/// server's body budget, waited for as long as a slot), and the reservation
/// is held as long as the slot.
pub(super) async fn concurrency(
    State(state): State<AppStateRef>,
    req: Request,
    next: Next,
) -> Response {
    if route_at(req.uri().path()).is_some_and(|r: &Route<AppStateRef>| r.probe) {
        return next.run(req).await;
    }
    // The slot is taken once the whole body has arrived ([§9.1](docs/configuration.md#s9-1)): a
    // client that trickles its upload holds a connection, never a slot.
    // The upload is bounded by the body limit and request_timeout_ms.
    let limits = &state.config.limits;
    let (parts, body) = req.into_parts();
    if declares_over(&parts.headers, limits.max_body_bytes) {
        return too_large(limits.max_body_bytes).into_response();
    }
    // A large body is read only once memory for it is reserved: a flood of
    // large uploads waits in the sockets (the kernel's buffers), not in the
    // server's memory ([§9.1](docs/configuration.md#s9-1); issue 27 row 5). Small bodies, probes'
    // and most requests', need no reservation.
    let reserve = match declared_length(&parts.headers) {
        Some(n) if n <= INLINE_BYTES as u64 => 0,
        Some(n) => n,
        // A chunked body may be as large as allowed; with neither header
        // there is no body (HTTP/1.1).
        None if parts.headers.contains_key(TRANSFER_ENCODING) => limits.max_body_bytes as u64,
        None => 0,
    };
    let reserved = if reserve == 0 {
        None
    } else {
        let kib = u32::try_from(reserve.div_ceil(1024)).unwrap_or(u32::MAX);
        let budget = Arc::clone(&state.body_budget);
        // As long as for a slot: a client told 503 at once can go elsewhere.
        match tokio::time::timeout(QUEUE_WAIT, budget.acquire_many_owned(kib)).await {
            Ok(Ok(p)) => Some(p),
            _ => {
                return ApiError::unavailable(
                    "the server holds as many large request bodies as it may; retry later",
                )
                .into_response()
            }
        }
    };
    let upload = axum::body::to_bytes(body, limits.max_body_bytes);
    let bytes = match tokio::time::timeout(Duration::from_millis(limits.request_timeout_ms), upload)
        .await
    {
        Ok(Ok(b)) => b,
        Ok(Err(e)) if is_length_limit(&e) => {
            return too_large(limits.max_body_bytes).into_response()
        }
        Ok(Err(_)) => {
            return ApiError::bad_request("the request body could not be read").into_response()
        }
        Err(_) => {
            return ApiError::unavailable(
                "the request body did not arrive within limits.request_timeout_ms",
            )
            .into_response()
        }
    };
    let req = Request::from_parts(parts, Body::from(bytes));
    let slots = Arc::clone(&state.slots);
    let permit = match Arc::clone(&slots).try_acquire_owned() {
        Ok(p) => p,
        Err(_) => match tokio::time::timeout(QUEUE_WAIT, slots.acquire_owned()).await {
            Ok(Ok(p)) => p,
            _ => {
                return ApiError::unavailable(
                    "the server is at limits.max_concurrency; retry later",
                )
                .into_response()
            }
        },
    };
    // Shared with work sent off the async workers, which keeps it while it
    // runs, even past a 503 (`off_workers`): the slot and the body's memory.
    // A handler whose work outlives its response (a stream session) takes
    // the slot along ([`Slot`]) and frees it when that work ends.
    let held = Arc::new(Held {
        slot: std::sync::Mutex::new(Some(permit)),
        _body: reserved,
    });
    let mut req = req;
    req.extensions_mut().insert(Slot(Arc::clone(&held)));
    let resp = SLOT.scope(Arc::clone(&held), next.run(req)).await;
    // Every route's answer is held to the limit; the evaluation routes
    // already stop serialising at it, this catches any other.
    let max = limits.max_response_bytes;
    if axum::body::HttpBody::size_hint(resp.body())
        .exact()
        .is_some_and(|n| n > max as u64)
    {
        return answer_too_large(max).into_response();
    }
    let streaming = resp
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if streaming && held.holds_slot() {
        // A stream's work goes on while its body is sent: the slot is held
        // until the body ends (or the client goes away).
        let (parts, body) = resp.into_parts();
        let body = http_body_util::BodyExt::map_frame(body, move |frame| {
            let _held = &held;
            frame
        });
        return Response::from_parts(parts, Body::new(body));
    }
    drop(held);
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;
    use http_body_util::BodyExt;
    use serde_json::Value;

    #[tokio::test]
    async fn layer_errors_get_the_json_body() {
        for (status, name) in [
            (StatusCode::PAYLOAD_TOO_LARGE, "PayloadTooLargeError"),
            (StatusCode::REQUEST_TIMEOUT, "ServiceUnavailableError"),
            (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailableError"),
        ] {
            let resp = json_errors((status, "plain text").into_response()).await;
            let code = resp.status();
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            let v: Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(v["error"], name);
            assert!(code == status || code == StatusCode::SERVICE_UNAVAILABLE);
        }
        let ok = json_errors((StatusCode::OK, "fine").into_response()).await;
        assert_eq!(ok.status(), StatusCode::OK);
    }
}
