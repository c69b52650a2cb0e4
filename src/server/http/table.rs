//! Route tables ([§9.4](docs/http-api.md#s9-4)): one entry per method and path with what every
//! list derived from it needs (auth exemption, probe, gateway, metrics
//! label, documented), and the router built from a table, a 405 with
//! `Allow` for another method on a known path. Serve mode and the catalog
//! each keep one table; this module knows neither.

use super::error::ApiError;
use crate::error::ErrorName;
use axum::http::header::ALLOW;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter};
use axum::Router;

/// The `route` label of a request that matched no route.
pub const UNMATCHED_ROUTE: &str = "unmatched";

/// One entry of a route table: a method on a path, its handler and what
/// the middleware and the OpenAPI test must know of it.
#[derive(Debug, Clone, Copy)]
pub struct Route<S: 'static> {
    /// The method, upper case (`GET`, `POST`, …).
    pub method: &'static str,
    /// The path template as the router matches it (`{*path}`: the rest).
    pub path: &'static str,
    /// Builds the handler for a method filter.
    pub handler: fn(MethodFilter) -> MethodRouter<S>,
    /// Answers without a bearer token (probes and scraping, [§9.1](docs/configuration.md#s9-1)).
    pub auth_exempt: bool,
    /// Outside the concurrency limit: a probe must answer under load.
    pub probe: bool,
    /// Also takes the token as `x-api-key` (gateway routes, [§12](docs/gateways.md#s12)).
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

/// The filter of an upper-case method name.
pub(crate) fn method_filter(method: &str) -> Option<MethodFilter> {
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
