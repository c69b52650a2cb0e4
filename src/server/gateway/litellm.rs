//! `POST /beta/litellm_basic_guardrail_api` ([§12.1](docs/gateways.md#s12-1), [§12.4](docs/gateways.md#s12-4)): LiteLLM's
//! generic guardrail API as LiteLLM 1.108.7 calls it. Judges, with one
//! generation, every string of what LiteLLM forwards to the model: `texts`,
//! `structured_messages` (the chat rows: tool results, tool call arguments,
//! message names, system prompts), `tools` (descriptions, schemas) and
//! `tool_calls`; the call's own metadata (`request_data`, `request_headers`,
//! `model`, ids) is LiteLLM's, not the model's, and is not judged. Answers
//! `BLOCKED`, `GUARDRAIL_INTERVENED` (with the redacted `texts`, and the
//! redacted `structured_messages` and `tools` where they changed) or `NONE`;
//! for replies it adds `stream_holdback_chars` from [§11](docs/streaming.md#s11)'s release rule, so
//! that a streamed reply never shows a fragment of a redacted value.
//! LiteLLM 1.108.7 takes no tool calls back from a guardrail, so a tool
//! call that would need redacting where no `structured_messages` row can
//! carry it (every reply, and requests without rows) is `BLOCKED`: fail
//! closed. Never puts any part of a payload in a `blocked_reason`, a log or
//! a metric.
//!
//! LiteLLM's `incremental_diff` streaming sends the whole raw reply so far on
//! every sampled chunk, then the same text once more at the end, with nothing
//! that marks the last call. So every answer must be right if it is the last:
//! `texts` is W(T), the whole redacted text, and `stream_holdback_chars` the
//! code points of W(T) after the prefix that no continuation can change
//! (what a [§11](docs/streaming.md#s11) session releases after one push of T). LiteLLM sends
//! `W(T)[..len − holdback]` and, on the last call, all of W(T). A FATAL
//! decision of the text so far is `BLOCKED` at once: waiting for it to be
//! final is not possible when the last call cannot be recognised.

use super::{abandoned_error, body_error, Judge, Need, PackHeader};
use crate::engine::{Decision, Evaluator, StreamOptions};
use crate::json_text::{self, Body};
use crate::request::{as_object, parse_strict, type_name};
use crate::server::audit::At;
use crate::server::generation::Generation;
use crate::server::http::{json_response_capped, ApiError, JsonBytes};
use crate::server::metrics::Metrics;
use crate::server::state::{AppState, AppStateRef};
use crate::server::work::{abandoned, choose, noted, off_workers, serving};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Serialize;
use serde_json::Value;

/// The route, as LiteLLM appends it to the guardrail's `api_base`.
pub const LITELLM_ROUTE: &str = "/beta/litellm_basic_guardrail_api";

/// The fields of a call that LiteLLM forwards to the model: every string in
/// them is judged ([§12.4](docs/gateways.md#s12-4)).
const JUDGED_FIELDS: [&str; 4] = ["texts", "structured_messages", "tools", "tool_calls"];

/// `input_type` of a call: a prompt (pre_call, during_call) or a reply (post_call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InputType {
    Request,
    Response,
}

/// A call's fields that the service reads; every other field is ignored.
/// No `Debug`: it holds the payload's texts.
struct Call {
    input_type: InputType,
    texts: Vec<String>,
    pack_id: Option<String>,
    /// Whether the call carries `structured_messages` rows (a redacted row
    /// goes back through them).
    has_rows: bool,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("input_type", &self.input_type)
            .field(
                "texts",
                &self
                    .texts
                    .iter()
                    .map(crate::redacted::Redacted::of)
                    .collect::<Vec<_>>(),
            )
            .field("pack_id", &self.pack_id)
            .field("has_rows", &self.has_rows)
            .finish()
    }
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
    let has_rows = obj
        .get("structured_messages")
        .and_then(Value::as_array)
        .is_some_and(|rows| !rows.is_empty());
    Ok(Call {
        input_type,
        texts,
        pack_id,
        has_rows,
    })
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
    #[serde(skip_serializing_if = "Option::is_none")]
    structured_messages: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Value>,
}

/// The `action` values of LiteLLM's generic guardrail API.
pub const BLOCKED: &str = "BLOCKED";
/// A text was redacted: `texts` holds the clean texts.
pub const INTERVENED: &str = "GUARDRAIL_INTERVENED";
/// Nothing to change.
pub const NONE: &str = "NONE";

/// Code points at the end of `clean` (= W(T)) that a continuation of `text`
/// could still change: what a [§11](docs/streaming.md#s11) session holds back after one push of `text`.
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
    // The release is a prefix of W(T) by [§11.1](docs/streaming.md#s11-1); if it ever were not, hold
    // everything back rather than let LiteLLM send a wrong prefix.
    Ok(clean
        .strip_prefix(released.text.as_str())
        .unwrap_or(clean)
        .chars()
        .count())
}

/// `<reason> (<rule ids>)`: no part of the payload.
fn reason_with_ids(d: &Decision<'_>, ids: &[&str]) -> String {
    format!("{} ({})", d.reason.unwrap_or(d.action), ids.join(", "))
}

/// Judges a call (`body`, read as `call`) with one pack: the answer and the
/// decision that speaks for it. Every string of the judged fields is
/// evaluated, so that a block names every FATAL rule of the call.
fn judge<'e>(
    ev: &'e Evaluator,
    metrics: Option<&Metrics>,
    body: &[u8],
    call: &Call,
    opts: StreamOptions,
    max_texts: usize,
) -> Result<(Answer, Option<Decision<'e>>), ApiError> {
    let strings = match json_text::read_where(body, max_texts, |root| {
        root.is_some_and(|k| JUDGED_FIELDS.contains(&k))
    })
    .map_err(|e| body_error(&e))?
    {
        Body::Json(strings) => strings,
        // parse_call read it as an object.
        Body::Text(_) => Vec::new(),
    };
    let mut judge = Judge::new(ev, opts.normalize, metrics);
    let mut texts = call.texts.clone();
    let mut text_at = 0;
    let mut edits = Vec::new();
    let mut redacted_tool_call = false;
    let mut rows_or_tools: [bool; 2] = [false; 2];
    for s in &strings {
        if abandoned() {
            return Err(abandoned_error());
        }
        let root = s.root_key.as_deref().unwrap_or_default();
        let need = judge
            .judge_value(&s.text, max_texts)
            .map_err(|e| body_error(&e))?;
        let in_texts = root == "texts" && s.depth == 2;
        if let Need::Redact(clean) = need {
            match root {
                "texts" => {
                    if let Some(t) = texts.get_mut(text_at).filter(|_| in_texts) {
                        *t = clean;
                    }
                }
                "tool_calls" => redacted_tool_call = true,
                _ => {
                    rows_or_tools[usize::from(root == "tools")] = true;
                    edits.push((s.span.clone(), clean));
                }
            }
        }
        text_at += usize::from(in_texts);
    }
    judge.settle();
    if let Some(first) = judge.deciding().filter(|_| !judge.fatal_ids().is_empty()) {
        let reason = reason_with_ids(first, judge.fatal_ids());
        return Ok((blocked(reason), judge.into_deciding()));
    }
    // A redacted tool call reaches the model only through its row.
    if redacted_tool_call && (call.input_type == InputType::Response || !call.has_rows) {
        let reason = judge.deciding().map_or_else(String::new, |d| {
            let ids: Vec<&str> = d.triggers.iter().map(|t| t.rule_id).collect();
            format!(
                "{}: a tool call would need redacting and LiteLLM cannot take one back",
                reason_with_ids(d, &ids)
            )
        });
        return Ok((blocked(reason), judge.into_deciding()));
    }
    let mut holdbacks = Vec::new();
    if call.input_type == InputType::Response {
        for (text, clean) in call.texts.iter().zip(&texts) {
            match holdback(ev, text, clean, opts) {
                Ok(h) => holdbacks.push(h),
                Err(reason) => return Ok((blocked(reason), judge.into_deciding())),
            }
        }
    }
    let (mut structured_messages, mut tools) = (None, None);
    if !edits.is_empty() {
        let rewritten = json_text::rewrite(
            body,
            edits
                .iter()
                .map(|(span, clean)| (span.clone(), clean.as_str())),
        );
        let mut obj = match parse_strict(&rewritten) {
            Ok(Value::Object(obj)) => obj,
            _ => {
                return Err(ApiError::internal(
                    "internal error (a bug): the redacted call does not read back",
                ))
            }
        };
        structured_messages = obj
            .remove("structured_messages")
            .filter(|_| rows_or_tools[0]);
        tools = obj.remove("tools").filter(|_| rows_or_tools[1]);
    }
    let texts_changed = call.texts != texts;
    let changed = texts_changed || !edits.is_empty() || redacted_tool_call;
    let answer = Answer {
        action: if changed { INTERVENED } else { NONE },
        blocked_reason: None,
        texts: texts_changed.then_some(texts),
        stream_holdback_chars: (call.input_type == InputType::Response).then_some(holdbacks),
        structured_messages,
        tools,
    };
    Ok((answer, judge.into_deciding()))
}

fn blocked(reason: String) -> Answer {
    Answer {
        action: BLOCKED,
        blocked_reason: Some(reason),
        texts: None,
        stream_holdback_chars: None,
        structured_messages: None,
        tools: None,
    }
}

/// The handler of `POST /beta/litellm_basic_guardrail_api`.
pub(crate) async fn guardrail(
    State(state): State<AppStateRef>,
    PackHeader(header_pack): PackHeader,
    headers: axum::http::HeaderMap,
    JsonBytes(body): JsonBytes,
) -> Result<Response, ApiError> {
    let request_id = crate::server::api::evaluate::request_id(&headers);
    let parsed = parse_strict(&body)
        .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))?;
    let mut call = parse_call(&parsed).map_err(ApiError::bad_request)?;
    drop(parsed);
    call.pack_id = call.pack_id.or(header_pack);
    let generation = serving(&state)?;
    let resp = off_workers(body.len(), move || {
        respond(&state, &generation, &call, &body, request_id.as_deref())
    })
    .await?;
    crate::server::audit::settle(resp).await
}

fn respond(
    state: &AppState,
    generation: &Generation,
    call: &Call,
    body: &[u8],
    request_id: Option<&str>,
) -> Result<Response, ApiError> {
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
    let (mut answer, deciding) = judge(
        &pack.evaluator,
        Some(&state.metrics),
        body,
        call,
        opts,
        state.config.limits.max_texts,
    )?;
    let monitor = crate::server::monitor::is_monitored(state, &pack.pack_id, false);
    if monitor {
        // Decided and logged, never enforced: the call goes on as sent.
        answer = Answer {
            action: NONE,
            blocked_reason: None,
            texts: None,
            stream_holdback_chars: None,
            structured_messages: None,
            tools: None,
        };
    }
    state.metrics.observe_gateway(LITELLM_ROUTE, answer.action);
    let resp = json_response_capped(
        StatusCode::OK,
        &answer,
        state.config.limits.max_response_bytes,
    )?;
    Ok(match &deciding {
        Some(d) => {
            if monitor {
                state.metrics.observe_monitored(d);
            }
            let at = At::new(LITELLM_ROUTE, request_id, generation.number, pack).monitored(monitor);
            state.log_decision(d, &at, body).attach(noted(resp, d))
        }
        None => resp,
    })
}

#[cfg(test)]
mod tests;
