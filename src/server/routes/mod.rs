//! The HTTP API of serve mode (SPEC §9.4): the one route table
//! ([`ROUTES`]) and the router built from it with the middleware stack.
//! Everything that depends on a route — the handler, auth exemption, probe
//! routes outside the concurrency limit, gateway routes that take
//! `x-api-key`, the metrics label, being documented in `openapi.yaml` — is
//! a field of its entry, and nothing keeps a second list. This module
//! wires; it does not handle requests itself.
//!
//! - [`error`](mod@error): [`ApiError`] and the JSON error bodies;
//! - `extract`: body extractors (content type, size cap, strict JSON);
//! - `middleware`: request ids, metrics, auth, concurrency;
//! - `evaluate`: the evaluation handlers and pack choice;
//! - `ops`: probes, status, metrics, reload.

pub mod error;
mod evaluate;
mod extract;
mod middleware;
mod ops;

pub use error::{json_response, status_of, ApiError, INTERNAL_ERROR};
pub use middleware::{API_KEY_HEADER, MAX_REQUEST_ID_LEN, QUEUE_WAIT, REQUEST_ID_HEADER};

pub(crate) use error::{json_response_capped, layer_error_json, panic_response, LayerMessages};
pub(crate) use evaluate::{abandoned, choose, off_workers, serving, INLINE_BYTES};
pub(crate) use extract::{
    check_content_type, compressed_reply, compressed_request, content_coding, EvaluateBody,
    JsonBytes, RawBody,
};
pub(crate) use middleware::{drop_unusable_request_id, method_label, noted, Slot};

use super::AppState;
use crate::error::ErrorName;
use axum::extract::Request;
use axum::http::header::ALLOW;
use axum::http::{HeaderValue, StatusCode};
use axum::middleware as mw;
use axum::response::{IntoResponse, Response};
use axum::routing::{on, MethodFilter, MethodRouter};
use axum::Router;
use std::sync::Arc;
use std::time::Duration;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

pub(crate) type AppStateRef = Arc<AppState>;

/// One entry of a route table: a method on a path, its handler and what
/// the middleware and the OpenAPI test must know of it.
#[derive(Debug, Clone, Copy)]
pub struct Route<S: 'static = AppStateRef> {
    /// The method, upper case (`GET`, `POST`, …).
    pub method: &'static str,
    /// The path template as the router matches it (`{*path}`: the rest).
    pub path: &'static str,
    /// Builds the handler for a method filter.
    pub handler: fn(MethodFilter) -> MethodRouter<S>,
    /// Answers without a bearer token (probes and scraping, SPEC §9.1).
    pub auth_exempt: bool,
    /// Outside the concurrency limit: a probe must answer under load.
    pub probe: bool,
    /// Also takes the token as `x-api-key` (gateway routes, SPEC §12).
    pub gateway: bool,
    /// The `route` label of its metrics (never a raw path).
    pub label: &'static str,
    /// Documented in the server's OpenAPI document.
    pub documented: bool,
}

impl<S> Route<S> {
    /// Whether a request path is this route's (a `{*path}` template
    /// matches every path under its prefix).
    pub fn matches(&self, path: &str) -> bool {
        match self.path.strip_suffix("{*path}") {
            Some(prefix) => path.starts_with(prefix),
            None => self.path == path,
        }
    }
}

/// An evaluating or gateway route: needs a token, is limited, is labelled
/// by its template.
const fn api(
    method: &'static str,
    path: &'static str,
    handler: fn(MethodFilter) -> MethodRouter<AppStateRef>,
) -> Route {
    Route {
        method,
        path,
        handler,
        auth_exempt: false,
        probe: false,
        gateway: false,
        label: path,
        documented: true,
    }
}

/// A gateway route (SPEC §12): an [`api`] route that also takes `x-api-key`.
const fn gateway(
    method: &'static str,
    path: &'static str,
    handler: fn(MethodFilter) -> MethodRouter<AppStateRef>,
) -> Route {
    Route {
        gateway: true,
        ..api(method, path, handler)
    }
}

/// A probe (SPEC §9.1): no token, not limited.
const fn probe(
    method: &'static str,
    path: &'static str,
    handler: fn(MethodFilter) -> MethodRouter<AppStateRef>,
) -> Route {
    Route {
        auth_exempt: true,
        probe: true,
        ..api(method, path, handler)
    }
}

/// ext_authz answers every method Envoy forwards (SPEC §12.2).
fn ext_authz(f: MethodFilter) -> MethodRouter<AppStateRef> {
    on(f, super::envoy::ext_authz)
}

/// Every route of serve mode. The router, the auth exemptions, the probe
/// routes, the gateway routes, the metrics labels and the OpenAPI test are
/// all derived from this one table.
pub static ROUTES: &[Route] = &[
    api("POST", "/evaluate", |f| on(f, evaluate::evaluate)),
    api("POST", "/v1/evaluate", |f| on(f, evaluate::evaluate_v1)),
    api("POST", "/evaluate/batch", |f| {
        on(f, evaluate::evaluate_batch)
    }),
    api("POST", "/v1/evaluate/stream", |f| {
        on(f, super::stream::evaluate_stream)
    }),
    gateway("POST", "/beta/litellm_basic_guardrail_api", |f| {
        on(f, super::litellm::guardrail)
    }),
    gateway("GET", "/envoy/ext_authz/{*path}", ext_authz),
    gateway("POST", "/envoy/ext_authz/{*path}", ext_authz),
    gateway("PUT", "/envoy/ext_authz/{*path}", ext_authz),
    gateway("PATCH", "/envoy/ext_authz/{*path}", ext_authz),
    gateway("DELETE", "/envoy/ext_authz/{*path}", ext_authz),
    gateway("OPTIONS", "/envoy/ext_authz/{*path}", ext_authz),
    probe("GET", "/healthz", |f| on(f, ops::healthz)),
    probe("GET", "/readyz", |f| on(f, ops::readyz)),
    probe("GET", "/v1/health", |f| on(f, ops::v1_health)),
    api("GET", "/v1/status", |f| on(f, ops::status)),
    api("GET", "/v1/packs", |f| on(f, ops::packs)),
    probe("GET", "/metrics", |f| on(f, ops::metrics_text)),
    api("POST", "/admin/reload", |f| on(f, ops::admin_reload)),
];

/// The entry a request path falls under, if any (its flags are the same
/// for every method of a path).
pub(crate) fn route_at(path: &str) -> Option<&'static Route> {
    ROUTES.iter().find(|r| r.matches(path))
}

/// The `route` label of a request that matched no route.
pub const UNMATCHED_ROUTE: &str = "unmatched";

/// The message of a 404 for a path of no route.
const NOT_FOUND_MESSAGE: &str = "no such route (see openapi.yaml)";

/// The filter of an upper-case method name.
fn method_filter(method: &str) -> Option<MethodFilter> {
    Some(match method {
        "GET" => MethodFilter::GET,
        "POST" => MethodFilter::POST,
        "PUT" => MethodFilter::PUT,
        "PATCH" => MethodFilter::PATCH,
        "DELETE" => MethodFilter::DELETE,
        "OPTIONS" => MethodFilter::OPTIONS,
        _ => return None,
    })
}

/// The methods `path` answers in `routes`, as the `Allow` header lists them.
fn allowed<S>(routes: &[Route<S>], path: &str) -> String {
    let mut methods: Vec<&str> = Vec::new();
    for r in routes.iter().filter(|r| r.path == path) {
        methods.push(r.method);
        if r.method == "GET" {
            methods.push("HEAD");
        }
    }
    methods.join(", ")
}

fn method_not_allowed(allow: &str) -> Response {
    let mut resp = ApiError::new(
        ErrorName::MethodNotAllowedError,
        format!("this route answers {allow}"),
    )
    .into_response();
    if let Ok(v) = HeaderValue::from_str(allow) {
        resp.headers_mut().insert(ALLOW, v);
    }
    resp
}

/// A router of every entry of `routes`; another method on a known path is
/// a 405 `MethodNotAllowedError` with `Allow`. (Serve mode and the catalog
/// both build theirs with it, from their route tables.)
pub(crate) fn route_table<S: Clone + Send + Sync + 'static>(
    routes: &'static [Route<S>],
) -> Router<S> {
    let mut app: Router<S> = Router::new();
    let mut paths: Vec<&str> = Vec::new();
    for r in routes {
        if !paths.contains(&r.path) {
            paths.push(r.path);
        }
    }
    for path in paths {
        let mut methods: Option<MethodRouter<S>> = None;
        for r in routes.iter().filter(|r| r.path == path) {
            if let Some(filter) = method_filter(r.method) {
                let e = (r.handler)(filter);
                methods = Some(match methods {
                    Some(mr) => mr.merge(e),
                    None => e,
                });
            }
        }
        if let Some(mr) = methods {
            let allow = allowed(routes, path);
            app = app.route(
                path,
                mr.fallback(move || {
                    let allow = allow.clone();
                    async move { method_not_allowed(&allow) }
                }),
            );
        }
    }
    app
}

async fn not_found() -> ApiError {
    ApiError::new(ErrorName::NotFoundError, NOT_FOUND_MESSAGE)
}

/// The application: every route of [`ROUTES`] with the middleware stack.
pub fn router(state: Arc<AppState>) -> Router {
    let limits = &state.config.limits;
    let app: Router<AppStateRef> = route_table(ROUTES);
    app.fallback(not_found)
        .with_state(Arc::clone(&state))
        // Innermost first: each layer below wraps those above it.
        .layer(RequestBodyLimitLayer::new(limits.max_body_bytes))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            Duration::from_millis(limits.request_timeout_ms),
        ))
        .layer(mw::from_fn_with_state(
            Arc::clone(&state),
            middleware::concurrency,
        ))
        .layer(mw::from_fn_with_state(Arc::clone(&state), middleware::auth))
        .layer(mw::map_response(middleware::json_errors))
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(mw::from_fn_with_state(
            Arc::clone(&state),
            middleware::observe,
        ))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(|req: &Request| {
                    tracing::debug_span!(
                        "request",
                        method = %req.method(),
                        request_id = req
                            .headers()
                            .get(REQUEST_ID_HEADER)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default(),
                    )
                })
                .on_request(())
                .on_response(())
                .on_body_chunk(())
                .on_eos(())
                .on_failure(()),
        )
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .layer(mw::map_request(drop_unusable_request_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_of_a_path_has_the_same_flags() {
        for a in ROUTES {
            assert!(method_filter(a.method).is_some(), "{}", a.method);
            for b in ROUTES.iter().filter(|b| b.path == a.path) {
                assert_eq!(
                    (a.auth_exempt, a.probe, a.gateway, a.label, a.documented),
                    (b.auth_exempt, b.probe, b.gateway, b.label, b.documented),
                    "{}",
                    a.path
                );
            }
        }
    }

    #[test]
    fn lookups_follow_the_table() {
        assert!(route_at("/healthz").is_some_and(|r| r.probe && r.auth_exempt));
        assert!(route_at("/envoy/ext_authz/v1/chat").is_some_and(|r| r.gateway));
        assert!(route_at("/healthz/").is_none());
        assert!(route_at("/evaluate").is_some_and(|r| !r.auth_exempt && !r.probe));
    }
}
