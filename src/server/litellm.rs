//! `POST /beta/litellm_basic_guardrail_api` (SPEC §12.1): LiteLLM's generic
//! guardrail API as LiteLLM 1.108.7 calls it. Judges every entry of `texts`
//! with one generation and answers `BLOCKED`, `GUARDRAIL_INTERVENED` or
//! `NONE`; for replies it adds `stream_holdback_chars` from §11's release
//! rule, so that a streamed reply never shows a fragment of a redacted value.
//! Never puts any part of a payload in a `blocked_reason`, a log or a metric.
//!
//! LiteLLM's `incremental_diff` streaming sends the whole raw reply so far on
//! every sampled chunk, then the same text once more at the end, with nothing
//! that marks the last call. So every answer must be right if it is the last:
//! `texts` is W(T), the whole redacted text, and `stream_holdback_chars` the
//! code points of W(T) after the prefix that no continuation can change
//! (what a §11 session releases after one push of T). LiteLLM sends
//! `W(T)[..len − holdback]` and, on the last call, all of W(T). A FATAL
//! decision of the text so far is `BLOCKED` at once: waiting for it to be
//! final is not possible when the last call cannot be recognised.

use super::generation::Generation;
use super::routes::{
    choose, json_response, noted, off_workers, serving, ApiError, AppStateRef, JsonBody,
};
use super::AppState;
use crate::engine::{Decision, Evaluator, Severity, StreamOptions};
use crate::request::{as_object, type_name};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Serialize;
use serde_json::Value;

/// The route, as LiteLLM appends it to the guardrail's `api_base`.
pub const LITELLM_ROUTE: &str = "/beta/litellm_basic_guardrail_api";
/// The request header that names a pack on the gateway routes (SPEC §12).
pub const PACK_HEADER: &str = "x-helixor-pack";

/// `input_type` of a call: a prompt (pre_call, during_call) or a reply (post_call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InputType {
    Request,
    Response,
}

/// A call's fields that the service reads; every other field is ignored.
#[derive(Debug)]
struct Call {
    input_type: InputType,
    texts: Vec<String>,
    pack_id: Option<String>,
}

fn parse_call(body: &Value) -> Result<Call, String> {
    let obj = as_object(body, "the body")?;
    let input_type = match obj.get("input_type") {
        Some(Value::String(s)) if s == "request" => InputType::Request,
        Some(Value::String(s)) if s == "response" => InputType::Response,
        Some(Value::String(_)) => {
            return Err("`input_type` must be \"request\" or \"response\"".into())
        }
        Some(other) => {
            return Err(format!(
                "`input_type` must be a string, not {}",
                type_name(other)
            ))
        }
        None => return Err("`input_type` is missing".into()),
    };
    let texts = match obj.get("texts") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(s.clone()),
                other => Err(format!(
                    "`texts[{i}]` must be a string, not {}",
                    type_name(other)
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(format!(
                "`texts` must be an array of strings, not {}",
                type_name(other)
            ))
        }
    };
    let pack_id = match obj.get("additional_provider_specific_params") {
        None | Some(Value::Null) => None,
        Some(Value::Object(params)) => match params.get("pack_id") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                return Err(format!(
                    "`additional_provider_specific_params.pack_id` must be a string, not {}",
                    type_name(other)
                ))
            }
        },
        Some(other) => {
            return Err(format!(
                "`additional_provider_specific_params` must be an object, not {}",
                type_name(other)
            ))
        }
    };
    Ok(Call {
        input_type,
        texts,
        pack_id,
    })
}

/// The pack named by the `x-helixor-pack` header, if any (SPEC §12).
pub(super) fn pack_header(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    match headers.get(PACK_HEADER) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .map(|s| Some(s.trim().to_string()))
            .map_err(|_| ApiError::bad_request(format!("the {PACK_HEADER} header is not text"))),
    }
}

/// The `x-helixor-pack` header as an extractor: a header that is not text
/// is a 400 before the body is read.
pub(super) struct PackHeader(pub Option<String>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for PackHeader {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, ApiError> {
        pack_header(&parts.headers).map(PackHeader)
    }
}

/// The answer LiteLLM reads (`GenericGuardrailAPIResponse`).
#[derive(Debug, Serialize, PartialEq, Eq)]
struct Answer {
    action: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    blocked_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    texts: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_holdback_chars: Option<Vec<usize>>,
}

/// The `action` values of LiteLLM's generic guardrail API.
pub const BLOCKED: &str = "BLOCKED";
/// A text was redacted: `texts` holds the clean texts.
pub const INTERVENED: &str = "GUARDRAIL_INTERVENED";
/// Nothing to change.
pub const NONE: &str = "NONE";

/// `<reason> (<rule ids>)` of the first FATAL decision, with the ids of every
/// FATAL trigger of the call, each once, in order: no part of the payload.
fn blocked_reason(decisions: &[Decision<'_>]) -> Option<String> {
    let first = decisions
        .iter()
        .find(|d| d.severity == Some(Severity::Fatal))?;
    let mut ids: Vec<&str> = Vec::new();
    for t in decisions.iter().flat_map(|d| &d.triggers) {
        if t.severity == Severity::Fatal && !ids.contains(&t.rule_id) {
            ids.push(t.rule_id);
        }
    }
    Some(format!(
        "{} ({})",
        first.reason.unwrap_or(first.action),
        ids.join(", ")
    ))
}

/// Code points at the end of `clean` (= W(T)) that a continuation of `text`
/// could still change: what a §11 session holds back after one push of `text`.
/// `Err` with the session's reason when it fails closed (hold-back limit).
fn holdback(ev: &Evaluator, text: &str, clean: &str, opts: StreamOptions) -> Result<usize, String> {
    let mut session = ev.stream(StreamOptions {
        block_on_fatal: false,
        lookahead_chars: 0,
        ..opts
    });
    let released = session.push(text);
    if let Some(b) = session.blocked() {
        return Err(b.reason.clone());
    }
    // The release is a prefix of W(T) by §11.1; if it ever were not, hold
    // everything back rather than let LiteLLM send a wrong prefix.
    Ok(clean
        .strip_prefix(released.text.as_str())
        .unwrap_or(clean)
        .chars()
        .count())
}

/// Judges a call with one pack: the answer and every text's decision.
fn judge<'e>(ev: &'e Evaluator, call: &Call, opts: StreamOptions) -> (Answer, Vec<Decision<'e>>) {
    let decisions: Vec<Decision<'e>> = call
        .texts
        .iter()
        .map(|t| ev.evaluate_with(t, opts.normalize))
        .collect();
    if let Some(reason) = blocked_reason(&decisions) {
        return (blocked(reason), decisions);
    }
    let mut holdbacks = Vec::new();
    if call.input_type == InputType::Response {
        for (text, d) in call.texts.iter().zip(&decisions) {
            match holdback(ev, text, &d.clean_text, opts) {
                Ok(h) => holdbacks.push(h),
                Err(reason) => return (blocked(reason), decisions),
            }
        }
    }
    let changed = call
        .texts
        .iter()
        .zip(&decisions)
        .any(|(t, d)| *t != d.clean_text);
    let answer = Answer {
        action: if changed { INTERVENED } else { NONE },
        blocked_reason: None,
        texts: changed.then(|| decisions.iter().map(|d| d.clean_text.clone()).collect()),
        stream_holdback_chars: (call.input_type == InputType::Response).then_some(holdbacks),
    };
    (answer, decisions)
}

fn blocked(reason: String) -> Answer {
    Answer {
        action: BLOCKED,
        blocked_reason: Some(reason),
        texts: None,
        stream_holdback_chars: None,
    }
}

/// The handler of `POST /beta/litellm_basic_guardrail_api`.
pub(super) async fn guardrail(
    State(state): State<AppStateRef>,
    PackHeader(header_pack): PackHeader,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let mut call = parse_call(&body).map_err(ApiError::bad_request)?;
    call.pack_id = call.pack_id.or(header_pack);
    let generation = serving(&state)?;
    let bytes: usize = call.texts.iter().map(String::len).sum();
    off_workers(bytes, move || respond(&state, &generation, &call)).await
}

fn respond(state: &AppState, generation: &Generation, call: &Call) -> Result<Response, ApiError> {
    let pack = choose(
        generation,
        call.pack_id.as_deref(),
        state.config.default_pack.as_deref(),
    )?;
    let opts = StreamOptions {
        max_holdback_chars: state.config.max_holdback_chars,
        normalize: state.config.normalize,
        ..StreamOptions::default()
    };
    let (answer, decisions) = judge(&pack.evaluator, call, opts);
    for d in &decisions {
        state.metrics.observe_decision(d);
    }
    state.metrics.observe_gateway(LITELLM_ROUTE, answer.action);
    let resp = json_response(StatusCode::OK, &answer);
    Ok(match super::envoy::deciding(&decisions) {
        Some(d) => noted(resp, d),
        None => resp,
    })
}

#[cfg(test)]
mod tests;
