//! Extractors: how a handler gets its request body (SPEC §9.1, §9.4). The
//! content type is checked, the body capped at `limits.max_body_bytes`
//! (413 over it, declared or sent) and parsed as strict JSON (a key twice is
//! a 400), each with the SPEC's error; evaluation bodies go through the one
//! parser of [`crate::request`]. They read the configuration's limits and
//! nothing else of the state, and never quote a body in a message.

use super::error::ApiError;
use super::AppStateRef;
use crate::error::ErrorName;
use crate::request::{self, BodyError, EvaluateRequest};
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::HeaderMap;
use serde_json::{Map, Value};

/// The raw body, at most `limits.max_body_bytes` (any content type: the
/// ext_authz route reads any method's body).
#[derive(Debug)]
pub(crate) struct RawBody(pub Bytes);

/// A JSON body (`Content-Type: application/json` or `…+json`), parsed
/// strictly.
#[derive(Debug)]
pub(crate) struct JsonBody(pub Value);

/// An evaluation body: [`EvaluateRequest`]'s fields, and the object's other
/// fields for the route's own options.
#[derive(Debug)]
pub(crate) struct EvaluateBody {
    /// `text`, `pack_id`.
    pub request: EvaluateRequest,
    /// Every other field of the body object.
    pub rest: Map<String, Value>,
}

impl FromRequest<AppStateRef> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppStateRef) -> Result<Self, ApiError> {
        read_body(req, state.config.limits.max_body_bytes)
            .await
            .map(RawBody)
    }
}

impl FromRequest<AppStateRef> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppStateRef) -> Result<Self, ApiError> {
        let bytes = json_bytes(req, state).await?;
        request::parse_strict(&bytes)
            .map(JsonBody)
            .map_err(|e| bad_body(BodyError::Json(e)))
    }
}

impl FromRequest<AppStateRef> for EvaluateBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppStateRef) -> Result<Self, ApiError> {
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
async fn json_bytes(req: Request, state: &AppStateRef) -> Result<Bytes, ApiError> {
    check_content_type(req.headers())?;
    read_body(req, state.config.limits.max_body_bytes).await
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
