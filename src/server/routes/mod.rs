//! The HTTP API of serve mode ([§9.4](docs/http-api.md#s9-4)): the one route table
//! ([`ROUTES`]) and the router built from it with the middleware stack.
//! Everything that depends on a route — the handler, auth exemption, probe
//! routes outside the concurrency limit, gateway routes that take
//! `x-api-key`, the metrics label, being documented in `openapi.yaml` — is
//! a field of its entry, and nothing keeps a second list. This module
//! wires; it does not handle requests itself: the handlers are in
//! `server::api` and `server::gateway`, what they share in `server::http`
//! and `server::work`, none of which
//! import this module.
//!
//! - `middleware`: metrics and the request log line, auth, concurrency,
//!   JSON error bodies for the layers' own answers.

mod middleware;

pub use crate::server::auth::API_KEY_HEADER;
pub use crate::server::http::{Route, UNMATCHED_ROUTE};
pub use crate::server::work::QUEUE_WAIT;

use crate::error::ErrorName;
use crate::server::api::{evaluate, ops, stream};
use crate::server::gateway::{envoy, litellm};
use crate::server::http::{
    drop_unusable_request_id, panic_response, route_table, ApiError, REQUEST_ID_HEADER,
};
use crate::server::state::{AppState, AppStateRef};
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware as mw;
use axum::routing::{on, MethodFilter, MethodRouter};
use axum::Router;
use std::sync::Arc;
use std::time::Duration;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

/// An evaluating or gateway route: needs a token, is limited, is labelled
/// by its template.
const fn api(
    method: &'static str,
    path: &'static str,
    handler: fn(MethodFilter) -> MethodRouter<AppStateRef>,
) -> Route<AppStateRef> {
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

/// A gateway route ([§12](docs/gateways.md#s12)): an [`api`] route that also takes `x-api-key`.
const fn gateway(
    method: &'static str,
    path: &'static str,
    handler: fn(MethodFilter) -> MethodRouter<AppStateRef>,
) -> Route<AppStateRef> {
    Route {
        gateway: true,
        ..api(method, path, handler)
    }
}

/// A probe ([§9.1](docs/configuration.md#s9-1)): no token, not limited.
const fn probe(
    method: &'static str,
    path: &'static str,
    handler: fn(MethodFilter) -> MethodRouter<AppStateRef>,
) -> Route<AppStateRef> {
    Route {
        auth_exempt: true,
        probe: true,
        ..api(method, path, handler)
    }
}

/// ext_authz answers every method Envoy forwards ([§12.2](docs/gateways.md#s12-2)).
fn ext_authz(f: MethodFilter) -> MethodRouter<AppStateRef> {
    on(f, envoy::ext_authz)
}

/// Every route of serve mode. The router, the auth exemptions, the probe
/// routes, the gateway routes, the metrics labels and the OpenAPI test are
/// all derived from this one table.
pub static ROUTES: &[Route<AppStateRef>] = &[
    api("POST", "/evaluate", |f| on(f, evaluate::evaluate)),
    api("POST", "/v1/evaluate", |f| on(f, evaluate::evaluate_v1)),
    api("POST", "/evaluate/batch", |f| {
        on(f, evaluate::evaluate_batch)
    }),
    api("POST", "/v1/evaluate/stream", |f| {
        on(f, stream::evaluate_stream)
    }),
    gateway("POST", "/beta/litellm_basic_guardrail_api", |f| {
        on(f, litellm::guardrail)
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
pub(crate) fn route_at(path: &str) -> Option<&'static Route<AppStateRef>> {
    ROUTES.iter().find(|r| r.matches(path))
}

/// The message of a 404 for a path of no route.
pub(crate) const NOT_FOUND_MESSAGE: &str = "no such route (see openapi.yaml)";

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
    use crate::server::http::table::method_filter;

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
