//! Extractors: how a handler gets its request body ([§9.1](docs/configuration.md#s9-1), [§9.4](docs/http-api.md#s9-4)). The
//! content type is checked, the body capped at `limits.max_body_bytes`
//! (413 over it, declared or sent) and parsed as strict JSON (a key twice is
//! a 400), each with its documented error ([§9.4](docs/http-api.md#s9-4)); evaluation bodies go through the one
//! parser of [`crate::request`]. They read the configuration's limits and
//! nothing else of the state, and never quote a body in a message.

use super::error::ApiError;
use crate::error::ErrorName;
use crate::request::{self, BodyError, EvaluateRequest};
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::header::{CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::HeaderMap;
use serde_json::{Map, Value};

/// What a server's state tells the extractors: the largest body it reads.
pub(crate) trait BodyLimit {
    /// `limits.max_body_bytes` (413 over it).
    fn max_body_bytes(&self) -> usize;
}

/// The raw body, at most `limits.max_body_bytes` (any content type: the
/// ext_authz route reads any method's body). No `Debug` on the bodies of
/// this module: they are payload.
pub(crate) struct RawBody(pub Bytes);

/// A JSON body (`Content-Type: application/json` or `…+json`), parsed
/// strictly.
pub(crate) struct JsonBody(pub Value);

/// The bytes of a JSON body (`Content-Type: application/json` or
/// `…+json`), not parsed yet: for a route that reads it with
/// [`crate::json_text`].
pub(crate) struct JsonBytes(pub Bytes);

/// An evaluation body: [`EvaluateRequest`]'s fields, and the object's other
/// fields for the route's own options.
pub(crate) struct EvaluateBody {
    /// `text`, `pack_id`.
    pub request: EvaluateRequest,
    /// Every other field of the body object.
    pub rest: Map<String, Value>,
}

impl<S: BodyLimit + Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        read_body(req, state.max_body_bytes()).await.map(RawBody)
    }
}

impl<S: BodyLimit + Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = json_bytes(req, state).await?;
        request::parse_strict(&bytes)
            .map(JsonBody)
            .map_err(|e| bad_body(BodyError::Json(e)))
    }
}

impl<S: BodyLimit + Send + Sync> FromRequest<S> for JsonBytes {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        json_bytes(req, state).await.map(JsonBytes)
    }
}

impl<S: BodyLimit + Send + Sync> FromRequest<S> for EvaluateBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = json_bytes(req, state).await?;
        let (request, rest) = request::parse_evaluate_object(&bytes).map_err(bad_body)?;
        Ok(Self { request, rest })
    }
}

/// A body that is not a request: 400 `InvalidRequestError`.
fn bad_body(e: BodyError) -> ApiError {
    ApiError::bad_request(e.to_string())
}

/// The bytes of a JSON body: content type first (415), then size (413).
async fn json_bytes(req: Request, state: &impl BodyLimit) -> Result<Bytes, ApiError> {
    check_content_type(req.headers())?;
    read_body(req, state.max_body_bytes()).await
}

/// 415 `UnsupportedMediaTypeError` unless the content type is JSON.
pub(crate) fn check_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let unsupported = |m: &str| ApiError::new(ErrorName::UnsupportedMediaTypeError, m);
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

/// 413 `PayloadTooLargeError` for a body over `limit`.
pub(crate) fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        ErrorName::PayloadTooLargeError,
        format!("the request body is over the {limit}-byte limit (limits.max_body_bytes)"),
    )
}

/// The length a `Content-Length` header declares, if any.
pub(crate) fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

/// Whether a `Content-Length` header declares more than `limit` bytes.
pub(crate) fn declares_over(headers: &HeaderMap, limit: usize) -> bool {
    declared_length(headers).is_some_and(|n| n > limit as u64)
}

/// Whether a body error is the body limit's (anywhere in its chain).
pub(crate) fn is_length_limit(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if err.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        cur = err.source();
    }
    false
}

/// A request body of at most `limit` bytes (413 `PayloadTooLargeError`
/// over it, declared or sent; 400 if it cannot be read).
async fn read_body(req: Request, limit: usize) -> Result<Bytes, ApiError> {
    // Before any other look at the body ([§12.4](docs/gateways.md#s12-4)): nothing is decoded.
    if let Some(coding) = request_coding(req.headers()) {
        return Err(compressed_request(&coding));
    }
    if declares_over(req.headers(), limit) {
        return Err(too_large(limit));
    }
    axum::body::to_bytes(req.into_body(), limit)
        .await
        .map_err(|e| {
            if is_length_limit(&e) {
                too_large(limit)
            } else {
                ApiError::bad_request("the request body could not be read")
            }
        })
}

/// The first content coding other than `identity` in `content-encoding`
/// values (each header line, each comma-separated element), as a short
/// printable name for messages; `None` when the body is not encoded.
pub(crate) fn content_coding<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Option<String> {
    for value in values {
        let Ok(value) = std::str::from_utf8(value) else {
            return Some("(unreadable)".into());
        };
        for coding in value.split(',').map(str::trim) {
            if coding.is_empty() || coding.eq_ignore_ascii_case("identity") {
                continue;
            }
            // A header value, not payload; still kept short and printable.
            let name: String = coding
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || "-_.+".contains(*c))
                .take(32)
                .collect();
            return Some(if name.is_empty() {
                "(unnamed)".into()
            } else {
                name.to_ascii_lowercase()
            });
        }
    }
    None
}

/// The coding of an HTTP request's body, from every `Content-Encoding` line.
pub(crate) fn request_coding(headers: &HeaderMap) -> Option<String> {
    content_coding(
        headers
            .get_all(CONTENT_ENCODING)
            .iter()
            .map(|v| v.as_bytes()),
    )
}

/// 415 for a compressed request body: nothing is decoded on the way
/// ([§12.4](docs/gateways.md#s12-4)), so what it holds cannot be judged.
pub(crate) fn compressed_request(coding: &str) -> ApiError {
    ApiError::new(
        ErrorName::UnsupportedMediaTypeError,
        format!("the request body is compressed (content-encoding: {coding}); compressed bodies are not inspected: send it uncompressed"),
    )
}

/// 502 for a compressed reply: the upstream, not the client, is at fault.
pub(crate) fn compressed_reply(coding: &str) -> ApiError {
    ApiError::new(
        ErrorName::UnsupportedMediaTypeError,
        format!("the reply is compressed (content-encoding: {coding}); compressed bodies are not inspected"),
    )
    .in_reply()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_coding_of_every_line_counts() {
        let c = |v: &[&str]| content_coding(v.iter().map(|s| s.as_bytes()));
        assert_eq!(c(&[]), None);
        assert_eq!(c(&["identity"]), None);
        assert_eq!(c(&["", " Identity , "]), None);
        assert_eq!(c(&["identity", "gzip"]).as_deref(), Some("gzip"));
        assert_eq!(c(&["identity, BR"]).as_deref(), Some("br"));
        assert_eq!(c(&["x\u{1b}[31m"]).as_deref(), Some("x31m"));
        assert_eq!(c(&["\u{1b}"]).as_deref(), Some("(unnamed)"));
        assert_eq!(
            content_coding([&b"\xff"[..]]).as_deref(),
            Some("(unreadable)")
        );
    }
}
