//! The HTTP error ([§9.4](docs/http-api.md#s9-4)): [`ApiError`], built from a [§4.3](docs/errors.md#s4-3) name and a
//! client-safe message, its status following from the name, and the JSON
//! body `{"error": NAME, "message": …}` that every error answer carries
//! (handlers', extractors', layers' and panics'). It must not read a request
//! or the shared state, and a message never quotes a payload.

use crate::error::{ErrorName, Named};
use crate::Error;
use axum::body::Body;
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::json;

/// The error name of a 500 (a bug: a handler panicked): not a [§4.3](docs/errors.md#s4-3) name.
pub const INTERNAL_ERROR: &str = "InternalError";

/// An HTTP error: a [§4.3](docs/errors.md#s4-3) name (or [`INTERNAL_ERROR`]), a message that never
/// quotes the payload, and the status that follows from the name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// `None`: [`INTERNAL_ERROR`].
    name: Option<ErrorName>,
    status: StatusCode,
    message: String,
}

/// The HTTP status of a named error ([§9.4](docs/http-api.md#s9-4)). Every name has its arm:
/// a new name must be given a status here, it cannot become a 500 unseen.
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
        // The deployment itself is broken (a reload keeps the old one; at
        // start-up there is no server): the client can do nothing about it.
        ErrorName::CompilerError
        | ErrorName::PlaybookParseError
        | ErrorName::UnsupportedPackDeclarationError
        | ErrorName::LicenseNotFoundError
        | ErrorName::LicenseError
        | ErrorName::LicenseSignatureError
        | ErrorName::LicenseEntitlementError
        | ErrorName::PackFormatError
        | ErrorName::PackUnsealError
        | ErrorName::PackIntegrityError
        | ErrorName::PackSignatureError
        | ErrorName::ConfigError
        | ErrorName::IoError
        | ErrorName::DecisionLogError => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl ApiError {
    /// An error named `name`, with the status [`status_of`] gives it.
    pub fn new(name: ErrorName, message: impl Into<String>) -> Self {
        Self::with_statuses(name, message, status_of)
    }

    /// An error whose status follows from its name through another
    /// server's table (the catalog answers 403 for every `License*` name).
    pub(crate) fn with_statuses(
        name: ErrorName,
        message: impl Into<String>,
        statuses: fn(ErrorName) -> StatusCode,
    ) -> Self {
        Self {
            name: Some(name),
            status: statuses(name),
            message: message.into(),
        }
    }

    /// A 500 [`INTERNAL_ERROR`]: a bug, never the client's doing.
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self {
            name: None,
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: message.into(),
        }
    }

    /// The same error found in the upstream's reply rather than in the
    /// client's request (ext_proc, [§12.3](docs/gateways.md#s12-3)): a 502, whatever the name.
    pub(crate) fn in_reply(mut self) -> Self {
        self.status = StatusCode::BAD_GATEWAY;
        self
    }

    /// A 400 `InvalidRequestError`.
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorName::InvalidRequestError, message)
    }

    /// A 503 `ServiceUnavailableError`.
    pub(crate) fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorName::ServiceUnavailableError, message)
    }

    /// The name as the body prints it.
    pub fn name(&self) -> &'static str {
        self.name.map_or(INTERNAL_ERROR, ErrorName::as_str)
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The message (never quotes a payload).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Name and message, moved out (a batch item's error).
    pub(crate) fn into_parts(self) -> (&'static str, String) {
        (self.name(), self.message)
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        Self::new(e.name(), e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = json_response(
            self.status,
            &json!({"error": self.name(), "message": self.message}),
        );
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

/// The message of the 413 for an answer over `limits.max_response_bytes`.
pub(crate) fn answer_too_large(max: usize) -> ApiError {
    ApiError::new(
        crate::ErrorName::PayloadTooLargeError,
        format!("the answer would be over the {max}-byte limit (limits.max_response_bytes)"),
    )
}

/// A `Vec` that refuses to grow past its cap.
struct Capped {
    bytes: Vec<u8>,
    max: usize,
}

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len().saturating_add(buf.len()) > self.max {
            return Err(std::io::Error::new(
                std::io::ErrorKind::FileTooLarge,
                "over limits.max_response_bytes",
            ));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A JSON answer of at most `max` bytes, or the 413 `PayloadTooLargeError`
/// naming `limits.max_response_bytes` ([§9.1](docs/configuration.md#s9-1)). Serialising stops at
/// the limit: a larger answer is never held whole.
pub(crate) fn json_response_capped(
    status: StatusCode,
    value: &impl Serialize,
    max: usize,
) -> Result<Response, ApiError> {
    let mut out = Capped {
        bytes: Vec::new(),
        max,
    };
    match serde_json::to_writer(&mut out, value) {
        Ok(()) => Ok((
            status,
            [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
            out.bytes,
        )
            .into_response()),
        Err(e) if e.io_error_kind() == Some(std::io::ErrorKind::FileTooLarge) => {
            Err(answer_too_large(max))
        }
        Err(_) => Err(ApiError::internal(
            "internal error (a bug): the response could not be serialised",
        )),
    }
}

/// The answer of a handler that panicked.
pub(crate) fn panic_response(_panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    // The panic's message is not returned: it could quote anything.
    ApiError::internal("internal error (a bug): the request was not completed").into_response()
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

/// Gives an error that a layer or an extractor produced without a JSON
/// body the [§9.4](docs/http-api.md#s9-4) body `{"error": NAME, "message": ...}`; other
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
    // Keyed on the status a layer chose, not on a name: this is the one
    // place a status picks the name, and any status it does not know is a bug.
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

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use axum::Router;
    use http_body_util::BodyExt;
    use serde_json::Value;
    use tower::ServiceExt;
    use tower_http::catch_panic::CatchPanicLayer;

    #[tokio::test]
    async fn a_panicking_handler_is_a_500_json_without_the_panic_message() {
        async fn boom() -> Response {
            panic!("secret payload in a panic message")
        }
        let app: Router = Router::new()
            .route("/boom", get(boom))
            .layer(CatchPanicLayer::custom(panic_response));
        let resp = app
            .oneshot(
                axum::extract::Request::get("/boom")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["error"], INTERNAL_ERROR);
        assert!(!String::from_utf8_lossy(&body).contains("secret"));
    }

    #[test]
    fn the_status_follows_from_the_name() {
        for n in ErrorName::ALL {
            let e = ApiError::new(n, "m");
            assert_eq!(e.status(), status_of(n), "{n}");
            assert_eq!(e.name(), n.as_str());
        }
        assert_eq!(
            ApiError::internal("m").status(),
            StatusCode::INTERNAL_SERVER_ERROR
        );
        assert_eq!(
            ApiError::bad_request("m").in_reply().status(),
            StatusCode::BAD_GATEWAY
        );
    }
}
