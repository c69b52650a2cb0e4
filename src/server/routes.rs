//! The HTTP API (SPEC §9.4): the route table, the handlers, the JSON error
//! body and the middleware stack (request ids, tracing, metrics, panics,
//! auth, concurrency, timeout, body limit). Evaluates synchronously in the
//! handler; never logs or echoes a payload, a match, a pattern or a token.

use super::auth::EXEMPT_ROUTES;
use super::generation::Generation;
use super::reload::{outcome_json, reload, Trigger};
use super::{metrics, AppState};
use crate::builtins::CODONS;
use crate::engine::{Decision, Source};
use crate::error::{ErrorName, Named};
use crate::license::{format_time, Window};
use crate::pack::LoadedPack;
use crate::Error;
use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::header::{ALLOW, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{on, MethodFilter, MethodRouter};
use axum::Router;
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use time::OffsetDateTime;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

/// Every route as `(method, path)`: the router is built from this table and
/// the OpenAPI test compares it with `openapi.yaml`.
pub const ROUTES: &[(&str, &str)] = &[
    ("POST", "/evaluate"),
    ("POST", "/v1/evaluate"),
    ("POST", "/evaluate/batch"),
    ("POST", "/v1/evaluate/stream"),
    ("POST", "/beta/litellm_basic_guardrail_api"),
    ("GET", "/envoy/ext_authz/{*path}"),
    ("POST", "/envoy/ext_authz/{*path}"),
    ("PUT", "/envoy/ext_authz/{*path}"),
    ("PATCH", "/envoy/ext_authz/{*path}"),
    ("DELETE", "/envoy/ext_authz/{*path}"),
    ("OPTIONS", "/envoy/ext_authz/{*path}"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/v1/health"),
    ("GET", "/v1/status"),
    ("GET", "/v1/packs"),
    ("GET", "/metrics"),
    ("POST", "/admin/reload"),
];

/// The `route` label of a request that matched no route.
pub const UNMATCHED_ROUTE: &str = "unmatched";
/// The request id header, taken from the request or generated.
pub const REQUEST_ID_HEADER: &str = "x-request-id";
/// The error name of a 500 (a bug: a handler panicked).
pub const INTERNAL_ERROR: &str = "InternalError";
/// How long a request waits for a slot when `max_concurrency` are in flight.
pub const QUEUE_WAIT: Duration = Duration::from_millis(250);

/// Gateway routes (SPEC §12): they also take the token as `x-api-key`.
pub const GATEWAY_ROUTES: &[&str] = &[
    "/beta/litellm_basic_guardrail_api",
    "/envoy/ext_authz/{*path}",
];

/// Whether a request path is one of [`GATEWAY_ROUTES`].
fn is_gateway(path: &str) -> bool {
    GATEWAY_ROUTES
        .iter()
        .any(|r| match r.strip_suffix("{*path}") {
            Some(prefix) => path.starts_with(prefix),
            None => *r == path,
        })
}
/// The header LiteLLM sends its guardrail `api_key` in.
pub const API_KEY_HEADER: &str = "x-api-key";

/// Routes exempt from the concurrency limit: probes must answer under load.
const PROBE_ROUTES: &[&str] = &["/healthz", "/readyz", "/v1/health", "/metrics"];

/// An HTTP error: a status and the JSON body `{"error": NAME, "message": ...}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The SPEC §4.3 name.
    pub name: &'static str,
    /// A message that never quotes the payload.
    pub message: String,
}

impl ApiError {
    /// An error with a status, a name and a message.
    pub fn new(status: StatusCode, name: ErrorName, message: impl Into<String>) -> Self {
        Self {
            status,
            name: name.as_str(),
            message: message.into(),
        }
    }

    pub(super) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            ErrorName::InvalidRequestError,
            message,
        )
    }

    fn unavailable(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorName::ServiceUnavailableError,
            message,
        )
    }

    fn body(&self) -> Value {
        json!({"error": self.name, "message": self.message})
    }
}

/// The HTTP status of a named error (SPEC §9.4).
pub fn status_of(name: ErrorName) -> StatusCode {
    match name {
        ErrorName::InvalidRequestError | ErrorName::UsageError => StatusCode::BAD_REQUEST,
        ErrorName::UnauthorizedError => StatusCode::UNAUTHORIZED,
        ErrorName::PackNotFoundError | ErrorName::NotFoundError => StatusCode::NOT_FOUND,
        ErrorName::MethodNotAllowedError => StatusCode::METHOD_NOT_ALLOWED,
        ErrorName::PayloadTooLargeError => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorName::UnsupportedMediaTypeError => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ErrorName::LicenseExpiredError
        | ErrorName::LicenseNotYetValidError
        | ErrorName::ServiceUnavailableError => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        let name = e.name();
        Self::new(status_of(name), name, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = json_response(self.status, &self.body());
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp
    }
}

/// A JSON response; a value that cannot be serialised is a 500.
pub fn json_response(status: StatusCode, value: &impl Serialize) -> Response {
    match serde_json::to_vec(value) {
        Ok(bytes) => (
            status,
            [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
            bytes,
        )
            .into_response(),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
            r#"{"error":"InternalError","message":"the response could not be serialised"}"#,
        )
            .into_response(),
    }
}

pub(super) type AppStateRef = Arc<AppState>;

fn endpoint(method: &str, path: &str) -> Option<MethodRouter<AppStateRef>> {
    let filter = match method {
        "GET" => MethodFilter::GET,
        "POST" => MethodFilter::POST,
        "PUT" => MethodFilter::PUT,
        "PATCH" => MethodFilter::PATCH,
        "DELETE" => MethodFilter::DELETE,
        "OPTIONS" => MethodFilter::OPTIONS,
        _ => return None,
    };
    Some(match path {
        "/evaluate" => on(filter, evaluate),
        "/v1/evaluate" => on(filter, evaluate_v1),
        "/evaluate/batch" => on(filter, evaluate_batch),
        "/v1/evaluate/stream" => on(filter, super::stream::evaluate_stream),
        "/beta/litellm_basic_guardrail_api" => on(filter, super::litellm::guardrail),
        "/envoy/ext_authz/{*path}" => on(filter, super::envoy::ext_authz),
        "/healthz" => on(filter, healthz),
        "/readyz" => on(filter, readyz),
        "/v1/health" => on(filter, v1_health),
        "/v1/status" => on(filter, status),
        "/v1/packs" => on(filter, packs),
        "/metrics" => on(filter, metrics_text),
        "/admin/reload" => on(filter, admin_reload),
        _ => return None,
    })
}

/// The methods `path` answers in `routes`, as the `Allow` header lists them.
fn allowed(routes: &[(&str, &str)], path: &str) -> String {
    let mut methods: Vec<&str> = Vec::new();
    for (m, p) in routes {
        if *p == path {
            methods.push(m);
            if *m == "GET" {
                methods.push("HEAD");
            }
        }
    }
    methods.join(", ")
}

fn method_not_allowed(allow: &str) -> Response {
    let mut resp = ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        ErrorName::MethodNotAllowedError,
        format!("this route answers {allow}"),
    )
    .into_response();
    if let Ok(v) = HeaderValue::from_str(allow) {
        resp.headers_mut().insert(ALLOW, v);
    }
    resp
}

/// A router of every `(method, path)` of `routes`, each handled by what
/// `endpoint` gives for it; another method on a known path is a 405
/// `MethodNotAllowedError` with `Allow`. (Serve mode and the catalog both
/// build theirs with it, from their route tables.)
pub(crate) fn route_table<S: Clone + Send + Sync + 'static>(
    routes: &'static [(&'static str, &'static str)],
    endpoint: fn(&str, &str) -> Option<MethodRouter<S>>,
) -> Router<S> {
    let mut app: Router<S> = Router::new();
    let mut paths: Vec<&str> = Vec::new();
    for (_, p) in routes {
        if !paths.contains(p) {
            paths.push(p);
        }
    }
    for path in paths {
        let mut methods: Option<MethodRouter<S>> = None;
        for (m, p) in routes {
            if *p == path {
                if let Some(e) = endpoint(m, p) {
                    methods = Some(match methods {
                        Some(mr) => mr.merge(e),
                        None => e,
                    });
                }
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

async fn not_found() -> Response {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ErrorName::NotFoundError,
        "no such route (see openapi.yaml)",
    )
    .into_response()
}

/// The application: every route of [`ROUTES`] with the middleware stack.
pub fn router(state: Arc<AppState>) -> Router {
    let limits = &state.config.limits;
    let app: Router<AppStateRef> = route_table(ROUTES, endpoint);
    app.fallback(not_found)
        .with_state(Arc::clone(&state))
        // Innermost first: each layer below wraps those above it.
        .layer(RequestBodyLimitLayer::new(limits.max_body_bytes))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            Duration::from_millis(limits.request_timeout_ms),
        ))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            concurrency,
        ))
        .layer(middleware::from_fn_with_state(Arc::clone(&state), auth))
        .layer(middleware::map_response(json_errors))
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(middleware::from_fn_with_state(Arc::clone(&state), observe))
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
        .layer(middleware::map_request(drop_unusable_request_id))
}

/// Longest client `x-request-id` kept; a longer one is replaced.
pub const MAX_REQUEST_ID_LEN: usize = 128;

/// An empty, overlong or non-printable `x-request-id` is dropped, so one is generated.
pub(crate) async fn drop_unusable_request_id(mut req: Request) -> Request {
    let unusable = req.headers().get(REQUEST_ID_HEADER).is_some_and(|v| {
        let b = v.as_bytes();
        b.is_empty() || b.len() > MAX_REQUEST_ID_LEN || !b.iter().all(|c| c.is_ascii_graphic())
    });
    if unusable {
        req.headers_mut().remove(REQUEST_ID_HEADER);
    }
    req
}

pub(crate) fn panic_response(_panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    // The panic's message is not returned: it could quote anything.
    json_response(
        StatusCode::INTERNAL_SERVER_ERROR,
        &json!({"error": INTERNAL_ERROR, "message": "internal error (a bug): the request was not completed"}),
    )
}

/// The messages of [`layer_error_json`] that differ between servers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LayerMessages {
    /// 404: an unknown route.
    pub not_found: &'static str,
    /// 413: a body over the limit.
    pub too_large: &'static str,
    /// 503: a request that did not complete in time.
    pub timeout: &'static str,
}

/// Serve mode's [`LayerMessages`].
const SERVE_MESSAGES: LayerMessages = LayerMessages {
    not_found: "no such route (see openapi.yaml)",
    too_large: "the request body is over limits.max_body_bytes",
    timeout: "the request did not complete within limits.request_timeout_ms",
};

/// Turns the bodies of errors produced by layers (413 from the body limit,
/// 503 from the timeout) into the JSON error body.
async fn json_errors(resp: Response) -> Response {
    layer_error_json(resp, &SERVE_MESSAGES)
}

/// Gives an error that a layer or an extractor produced without a JSON
/// body the SPEC §9.4 body `{"error": NAME, "message": ...}`; other
/// responses pass unchanged.
pub(crate) fn layer_error_json(resp: Response, messages: &LayerMessages) -> Response {
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let is_json = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json {
        return resp;
    }
    let (status, name, message) = match status.as_u16() {
        400 => (
            status,
            ErrorName::InvalidRequestError.as_str(),
            "the request is malformed",
        ),
        401 => (
            status,
            ErrorName::UnauthorizedError.as_str(),
            "a valid bearer token is needed",
        ),
        404 => (
            status,
            ErrorName::NotFoundError.as_str(),
            messages.not_found,
        ),
        405 => (
            status,
            ErrorName::MethodNotAllowedError.as_str(),
            "this route does not answer this method",
        ),
        413 => (
            status,
            ErrorName::PayloadTooLargeError.as_str(),
            messages.too_large,
        ),
        415 => (
            status,
            ErrorName::UnsupportedMediaTypeError.as_str(),
            "the request needs Content-Type: application/json",
        ),
        408 | 503 | 504 => (
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorName::ServiceUnavailableError.as_str(),
            messages.timeout,
        ),
        _ => (
            StatusCode::INTERNAL_SERVER_ERROR,
            INTERNAL_ERROR,
            "internal error (a bug): the request was not completed",
        ),
    };
    let (mut parts, _) = resp.into_parts();
    parts.status = status;
    parts.headers.remove(CONTENT_LENGTH);
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let body = serde_json::to_vec(&json!({"error": name, "message": message})).unwrap_or_default();
    Response::from_parts(parts, Body::from(body))
}

/// What the evaluation handlers tell the request log line (debug level only).
#[derive(Debug, Clone)]
struct EvalNote {
    pack_id: String,
    action: String,
}

fn route_label(req: &Request) -> &'static str {
    let path = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| req.uri().path(), MatchedPath::as_str);
    ROUTES
        .iter()
        .find(|(_, p)| *p == path)
        .map_or(UNMATCHED_ROUTE, |(_, p)| *p)
}

pub(crate) fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::HEAD => "HEAD",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        Method::TRACE => "TRACE",
        Method::CONNECT => "CONNECT",
        _ => "other",
    }
}

/// Metrics and the per-request debug line (route template, never the raw path).
async fn observe(State(state): State<AppStateRef>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    // Only routes of the table are labels: the fallback's raw path is not.
    let route = if req.extensions().get::<MatchedPath>().is_some() {
        route_label(&req)
    } else {
        UNMATCHED_ROUTE
    };
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

/// Bearer-token check (SPEC §9.1 `auth`), fail closed when tokens are
/// configured but not loaded. Gateway routes also take `x-api-key` (§12).
async fn auth(State(state): State<AppStateRef>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if state.config.tokens_file.is_some() && !EXEMPT_ROUTES.contains(&path) {
        let ok = {
            let generation = state.current.load();
            generation
                .as_ref()
                .and_then(|g| g.tokens.as_ref())
                .is_some_and(|t| {
                    t.accepts_header(req.headers().get(AUTHORIZATION).map(HeaderValue::as_bytes))
                        || (is_gateway(path)
                            && req
                                .headers()
                                .get(API_KEY_HEADER)
                                .and_then(|v| v.to_str().ok())
                                .is_some_and(|k| t.accepts(k.trim())))
                })
        };
        if !ok {
            return ApiError::new(
                StatusCode::UNAUTHORIZED,
                ErrorName::UnauthorizedError,
                "a valid `Authorization: Bearer <token>` header is needed",
            )
            .into_response();
        }
    }
    next.run(req).await
}

/// `limits.max_concurrency`: once its body has arrived, a request waits up
/// to [`QUEUE_WAIT`] for a slot, then gets 503. Probes are not limited.
async fn concurrency(State(state): State<AppStateRef>, req: Request, next: Next) -> Response {
    if PROBE_ROUTES.contains(&req.uri().path()) {
        return next.run(req).await;
    }
    // The slot is taken once the whole body has arrived (SPEC §9.1): a
    // client that trickles its upload holds a connection, never a slot.
    // The upload is bounded by the body limit and request_timeout_ms.
    let limits = &state.config.limits;
    let (parts, body) = req.into_parts();
    let declared = parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits.max_body_bytes as u64) {
        return too_large(limits.max_body_bytes).into_response();
    }
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
    let resp = next.run(req).await;
    let streaming = resp
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if streaming {
        // A stream's work goes on while its body is sent: the slot is held
        // until the body ends (or the client goes away).
        let (parts, body) = resp.into_parts();
        let body = http_body_util::BodyExt::map_frame(body, move |frame| {
            let _held = &permit;
            frame
        });
        return Response::from_parts(parts, Body::new(body));
    }
    drop(permit);
    resp
}

fn is_length_limit(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if err.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        cur = err.source();
    }
    false
}

pub(crate) fn check_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let unsupported = |m: &str| {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorName::UnsupportedMediaTypeError,
            m,
        )
    };
    let Some(value) = headers.get(CONTENT_TYPE) else {
        return Err(unsupported(
            "the request has no Content-Type: send application/json",
        ));
    };
    let mime = value
        .to_str()
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json")) {
        Ok(())
    } else {
        Err(unsupported("the Content-Type must be application/json"))
    }
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorName::PayloadTooLargeError,
        format!("the request body is over the {limit}-byte limit (limits.max_body_bytes)"),
    )
}

/// Above this many bytes of payload, a gateway evaluation runs off the async workers.
pub(super) const INLINE_BYTES: usize = 64 * 1024;

/// Runs `work` in place when the payload is small (`bytes` ≤ [`INLINE_BYTES`]),
/// else on a blocking thread, so that a large evaluation never stalls the
/// async workers.
pub(super) async fn off_workers<F>(bytes: usize, work: F) -> Result<Response, ApiError>
where
    F: FnOnce() -> Result<Response, ApiError> + Send + 'static,
{
    if bytes <= INLINE_BYTES {
        return work();
    }
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|_| ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            name: INTERNAL_ERROR,
            message: "internal error (a bug): the evaluation did not finish".into(),
        })?
}

/// A request body of at most `limit` bytes (413 `PayloadTooLargeError`
/// over it, declared or sent; 400 if it cannot be read).
pub(super) async fn read_body(req: Request, limit: usize) -> Result<axum::body::Bytes, ApiError> {
    let (parts, body) = req.into_parts();
    let declared = parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large(limit));
    }
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        if is_length_limit(&e) {
            too_large(limit)
        } else {
            ApiError::bad_request("the request body could not be read")
        }
    })
}

/// Content type, size and JSON syntax of a request body, with the SPEC's
/// errors; messages never quote the body.
pub(super) async fn read_json(req: Request, limit: usize) -> Result<Value, ApiError> {
    check_content_type(req.headers())?;
    let bytes = read_body(req, limit).await?;
    parse_strict(&bytes)
        .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))
}

/// Parses JSON, refusing an object with a key twice (SPEC §9.1): two
/// parsers must never disagree on which `text` was judged.
pub(crate) fn parse_strict(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = Strict.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// A `Value` seed whose objects refuse duplicate keys.
struct Strict;

impl<'de> serde::de::DeserializeSeed<'de> for Strict {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(Strict)
    }
}

impl<'de> serde::de::Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(Strict)? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut obj = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(Strict)?;
            if obj.contains_key(&key) {
                // The key is the client's own field name, not payload text,
                // but it is not echoed either.
                return Err(serde::de::Error::custom("an object has the same key twice"));
            }
            obj.insert(key, value);
        }
        Ok(Value::Object(obj))
    }
}

pub(crate) fn as_object<'v>(v: &'v Value, what: &str) -> Result<&'v Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| format!("{what} must be a JSON object, not {}", type_name(v)))
}

pub(super) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `text` (required string) and `pack_id` (optional string) of a request object.
pub(crate) fn text_and_pack(obj: &Map<String, Value>) -> Result<(&str, Option<&str>), String> {
    let text = match obj.get("text") {
        Some(Value::String(s)) => s.as_str(),
        Some(other) => return Err(format!("`text` must be a string, not {}", type_name(other))),
        None => return Err("`text` is missing".into()),
    };
    let pack_id = match obj.get("pack_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(other) => {
            return Err(format!(
                "`pack_id` must be a string, not {}",
                type_name(other)
            ))
        }
    };
    Ok((text, pack_id))
}

fn now_unix_nanos() -> i128 {
    OffsetDateTime::now_utc().unix_timestamp_nanos()
}

/// The generation an evaluation uses: loaded and with a valid license.
pub(super) fn serving(state: &AppState) -> Result<Arc<Generation>, ApiError> {
    let generation = state
        .current()
        .ok_or_else(|| ApiError::unavailable("no generation is loaded"))?;
    if generation.expired_at(now_unix_nanos()) {
        return Err(generation.expired_error().into());
    }
    Ok(generation)
}

/// Pack choice (SPEC §9.4): the request's, else `default_pack`, else the only one.
pub(super) fn choose<'g>(
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
            StatusCode::NOT_FOUND,
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

pub(super) fn noted(mut resp: Response, d: &Decision<'_>) -> Response {
    if tracing::enabled!(tracing::Level::DEBUG) {
        resp.extensions_mut().insert(EvalNote {
            pack_id: d.pack_id.to_string(),
            action: d.action.to_string(),
        });
    }
    resp
}

async fn evaluate_single(state: &AppStateRef, req: Request, with_remedy: bool) -> Response {
    let body = match read_json(req, state.config.limits.max_body_bytes).await {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let bytes = body.get("text").and_then(Value::as_str).map_or(0, str::len);
    let state = AppStateRef::clone(state);
    // A large payload is evaluated on a blocking thread: the async workers
    // (and `/healthz`) never wait for it; request_timeout_ms still bounds it.
    off_workers(bytes, move || {
        let (text, pack_id) = as_object(&body, "the body")
            .and_then(text_and_pack)
            .map_err(ApiError::bad_request)?;
        let generation = serving(&state)?;
        let pack = choose(&generation, pack_id, state.config.default_pack.as_deref())?;
        let decision = pack.evaluator.evaluate(text);
        state.metrics.observe_decision(&decision);
        let answer = SingleAnswer {
            decision: &decision,
            generation: generation.number,
            remedy: with_remedy.then(|| remedy(&decision)),
        };
        Ok(noted(json_response(StatusCode::OK, &answer), &decision))
    })
    .await
    .unwrap_or_else(IntoResponse::into_response)
}

async fn evaluate(State(state): State<AppStateRef>, req: Request) -> Response {
    evaluate_single(&state, req, false).await
}

async fn evaluate_v1(State(state): State<AppStateRef>, req: Request) -> Response {
    evaluate_single(&state, req, true).await
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

async fn evaluate_batch(State(state): State<AppStateRef>, req: Request) -> Response {
    let limits = &state.config.limits;
    let body = match read_json(req, limits.max_body_bytes).await {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let items = match as_object(&body, "the body").and_then(|o| match o.get("items") {
        Some(Value::Array(items)) => Ok(items),
        Some(other) => Err(format!(
            "`items` must be an array, not {}",
            type_name(other)
        )),
        None => Err("`items` is missing".into()),
    }) {
        Ok(items) => items,
        Err(m) => return ApiError::bad_request(m).into_response(),
    };
    if items.len() > limits.max_batch_items {
        return ApiError::bad_request(format!(
            "the batch has {} items; at most {} are allowed (limits.max_batch_items)",
            items.len(),
            limits.max_batch_items
        ))
        .into_response();
    }
    // Every item's text counts: a batch of many small texts is as heavy as one large one.
    let bytes: usize = items
        .iter()
        .filter_map(|i| i.get("text").and_then(Value::as_str))
        .map(str::len)
        .sum();
    let state = AppStateRef::clone(&state);
    off_workers(bytes, move || batch_answer(&state, &body))
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// The answer to a batch whose body was checked (items an array, not too many).
fn batch_answer(state: &AppState, body: &Value) -> Result<Response, ApiError> {
    let items = body
        .get("items")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let generation = serving(state)?;
    let default_pack = state.config.default_pack.as_deref();
    let results: Vec<BatchResult<'_>> = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let chosen = as_object(item, "the item")
                .and_then(text_and_pack)
                .map_err(|m| ApiError::bad_request(format!("items[{i}]: {m}")))
                .and_then(|(text, pack_id)| {
                    choose(&generation, pack_id, default_pack).map(|p| (p, text))
                });
            match chosen {
                Ok((pack, text)) => {
                    let d = pack.evaluator.evaluate(text);
                    state.metrics.observe_decision(&d);
                    BatchResult::Decision(d)
                }
                Err(e) => BatchResult::Error {
                    error: e.name,
                    message: e.message,
                },
            }
        })
        .collect();
    Ok(json_response(
        StatusCode::OK,
        &json!({"generation": generation.number, "results": results}),
    ))
}

async fn healthz() -> Response {
    json_response(StatusCode::OK, &json!({"status": "ok"}))
}

/// Why the server is not ready, if it is not (SPEC §9.4 `/readyz`).
fn not_ready(state: &AppState) -> Option<ApiError> {
    if state.is_draining() {
        return Some(ApiError::unavailable(
            "the server is shutting down (draining)",
        ));
    }
    match state.current() {
        None => Some(ApiError::unavailable("no generation is loaded")),
        Some(g) if g.expired_at(now_unix_nanos()) => Some(g.expired_error().into()),
        Some(_) => None,
    }
}

async fn readyz(State(state): State<AppStateRef>) -> Response {
    match not_ready(&state) {
        Some(e) => e.into_response(),
        None => json_response(
            StatusCode::OK,
            &json!({"status": "ready", "generation": state.current().map(|g| g.number)}),
        ),
    }
}

async fn v1_health(State(state): State<AppStateRef>) -> Response {
    let generation = state.current().map(|g| g.number);
    match not_ready(&state) {
        None => json_response(
            StatusCode::OK,
            &json!({"status": "healthy", "version": crate::VERSION, "generation": generation}),
        ),
        Some(e) => json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({
                "status": "unavailable",
                "version": crate::VERSION,
                "generation": generation,
                "error": e.name,
                "message": e.message,
            }),
        ),
    }
}

fn packs_json(g: &Generation) -> Vec<Value> {
    g.packs
        .values()
        .map(|p| {
            json!({
                "pack_id": p.pack_id,
                "version": p.version,
                "name": p.name,
                "sha256": p.sha256,
                "rules": p.rules.len(),
            })
        })
        .collect()
}

async fn status(State(state): State<AppStateRef>) -> Response {
    let now = OffsetDateTime::now_utc();
    let generation = state.current();
    let license = generation.as_ref().map(|g| {
        let l = &g.license;
        json!({
            "license_id": l.license_id,
            "licensee": l.licensee,
            "tier": l.tier,
            "not_before": format_time(l.not_before),
            "not_after": format_time(l.not_after),
            "seconds_left": l.seconds_left(now),
            "valid_now": l.window_at(now) == Window::Valid,
            "issuer_key_id": l.issuer_key_id,
        })
    });
    let body = json!({
        "version": crate::VERSION,
        "generation": generation.as_ref().map(|g| g.number),
        "loaded_at": generation.as_ref().map(|g| format_time(g.loaded_at)),
        "license": license,
        "packs": generation.as_deref().map(packs_json).unwrap_or_default(),
        "last_reload": state.last_reload().as_ref().map(outcome_json),
    });
    json_response(StatusCode::OK, &body)
}

async fn packs(State(state): State<AppStateRef>) -> Response {
    let packs = state
        .current()
        .as_deref()
        .map(packs_json)
        .unwrap_or_default();
    json_response(StatusCode::OK, &json!({ "packs": packs }))
}

async fn metrics_text(State(state): State<AppStateRef>) -> Response {
    match state.metrics.render() {
        Ok(text) => (
            StatusCode::OK,
            [(
                CONTENT_TYPE,
                HeaderValue::from_static(metrics::CONTENT_TYPE),
            )],
            text,
        )
            .into_response(),
        Err(_) => json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &json!({"error": INTERNAL_ERROR, "message": "the metrics could not be rendered"}),
        ),
    }
}

async fn admin_reload(State(state): State<AppStateRef>) -> Response {
    // Its own task: a client that goes away, or the request timeout, does
    // not cancel a reload halfway.
    let task = tokio::spawn(async move { reload(&state, Trigger::Admin).await });
    let o = match task.await {
        Ok(o) => o,
        Err(_) => {
            return json_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                &json!({"error": INTERNAL_ERROR, "message": "the reload task did not finish"}),
            )
        }
    };
    match o.error {
        None => json_response(
            StatusCode::OK,
            &json!({"result": o.result.as_str(), "generation": o.generation}),
        ),
        Some(name) => json_response(
            StatusCode::CONFLICT,
            &json!({
                "result": o.result.as_str(),
                "error": name,
                "message": o.message,
                "generation": o.generation,
            }),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    #[tokio::test]
    async fn a_panicking_handler_is_a_500_json_without_the_panic_message() {
        async fn boom() -> Response {
            panic!("secret payload in a panic message")
        }
        let app: Router = Router::new()
            .route("/boom", axum::routing::get(boom))
            .layer(CatchPanicLayer::custom(panic_response));
        let resp = app
            .oneshot(Request::get("/boom").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["error"], INTERNAL_ERROR);
        assert!(!String::from_utf8_lossy(&body).contains("secret"));
    }

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
