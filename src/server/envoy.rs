//! Envoy external authorization, HTTP service mode (SPEC §12.2): any method
//! under `/envoy/ext_authz/`, the body read as an LLM request (OpenAI chat
//! completions, completions, responses; Anthropic messages; else one text),
//! every text judged with one generation. FATAL → 403 with the OpenAI-style
//! error body; otherwise 200 with `x-helixor-action` and `x-helixor-receipt`.
//! ext_authz cannot change a body: redaction is ext_proc's (§12.3). Never
//! puts any part of a payload in an answer, a log or a metric.

use super::generation::Generation;
use super::litellm::PackHeader;
use super::llm_body::{texts_mut, Direction};
use super::routes::{
    choose, json_response, noted, off_workers, serving, ApiError, AppStateRef, RawBody,
};
use super::AppState;
use crate::engine::{Decision, Severity};
use crate::request::parse_strict;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// The route prefix Envoy's `http_service.path_prefix` names.
pub const EXT_AUTHZ_PREFIX: &str = "/envoy/ext_authz";
/// The deciding action, on an allowed request.
pub const ACTION_HEADER: &str = "x-helixor-action";
/// The deciding decision's receipt hash, on an allowed request.
pub const RECEIPT_HEADER: &str = "x-helixor-receipt";
/// `error.type` of a refused request.
pub const POLICY_VIOLATION: &str = "helixor_policy_violation";

/// The texts of an LLM request body (SPEC §12.2), in document order: OpenAI
/// chat completions (`messages[].content`, a string or `text` parts),
/// completions (`prompt`), responses (`input`), Anthropic messages
/// (`system`, `messages[].content`). Any other body is one text. A JSON
/// body with a key twice is refused: the upstream's parser might read the
/// other value than the one judged (SPEC §9.1).
pub fn llm_texts(body: &[u8]) -> Result<Vec<String>, String> {
    let whole = || Ok(vec![String::from_utf8_lossy(body).into_owned()]);
    let parsed = match parse_strict(body) {
        Ok(v) => v,
        Err(_) if serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok() => {
            return Err(DUPLICATE_KEY.into())
        }
        Err(_) => return whole(),
    };
    let Value::Object(mut obj) = parsed else {
        return whole();
    };
    match texts_mut(&mut obj, Direction::Request) {
        Some(texts) => Ok(texts.into_iter().map(std::mem::take).collect()),
        None => whole(),
    }
}

/// Why a JSON body with a key twice is refused.
pub(super) const DUPLICATE_KEY: &str = "the JSON body has an object with the same key twice";

/// The decision that speaks for a request: the first FATAL one, else the
/// first that redacted, else the first.
pub(super) fn deciding<'a, 'e>(decisions: &'a [Decision<'e>]) -> Option<&'a Decision<'e>> {
    decisions
        .iter()
        .find(|d| d.severity == Some(Severity::Fatal))
        .or_else(|| decisions.iter().find(|d| d.severity.is_some()))
        .or(decisions.first())
}

/// The 403 body of a refused request (SPEC §12.2): no part of the payload.
pub fn violation_body(d: &Decision<'_>) -> Value {
    json!({"error": {
        "message": d.reason.unwrap_or(d.action),
        "type": POLICY_VIOLATION,
        "code": d.action,
    }})
}

/// The handler of every method under `/envoy/ext_authz/`.
pub(super) async fn ext_authz(
    State(state): State<AppStateRef>,
    PackHeader(pack_id): PackHeader,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let generation = serving(&state)?;
    let bytes = body.len();
    off_workers(bytes, move || {
        judge(&state, &generation, pack_id.as_deref(), &body)
    })
    .await
}

fn judge(
    state: &AppState,
    generation: &Generation,
    pack_id: Option<&str>,
    body: &[u8],
) -> Result<Response, ApiError> {
    let pack = choose(generation, pack_id, state.config.default_pack.as_deref())?;
    let texts = llm_texts(body).map_err(ApiError::bad_request)?;
    let decisions: Vec<Decision<'_>> = texts
        .iter()
        .map(|t| pack.evaluator.evaluate_with(t, state.config.normalize))
        .collect();
    for d in &decisions {
        state.metrics.observe_decision(d);
    }
    let Some(d) = deciding(&decisions) else {
        // No text at all (an empty message list): nothing to refuse.
        state.metrics.observe_gateway(EXT_AUTHZ_PREFIX, "allow");
        return Ok(StatusCode::OK.into_response());
    };
    if d.severity == Some(Severity::Fatal) {
        state.metrics.observe_gateway(EXT_AUTHZ_PREFIX, "deny");
        return Ok(noted(
            json_response(StatusCode::FORBIDDEN, &violation_body(d)),
            d,
        ));
    }
    state.metrics.observe_gateway(EXT_AUTHZ_PREFIX, "allow");
    let mut resp = StatusCode::OK.into_response();
    for (name, value) in [(ACTION_HEADER, d.action), (RECEIPT_HEADER, &d.receipt_hash)] {
        if let Ok(v) = HeaderValue::from_str(value) {
            resp.headers_mut().insert(name, v);
        }
    }
    Ok(noted(resp, d))
}

#[cfg(test)]
mod tests;
