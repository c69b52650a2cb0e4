//! What the gateway routes share ([§12](docs/gateways.md#s12)): how a body is judged (every
//! string value, [§12.4](docs/gateways.md#s12-4), through [`crate::json_text`]), which decision
//! speaks for an exchange, the refusal body, the pack header, and the
//! refusal of compressed bodies. ext_authz, ext_proc and the LiteLLM route
//! all judge through here, so no two of them can read a body differently.
//! Nothing here logs or returns any part of a payload.
//!
//! - [`ext_proc`]: Envoy's external processing over gRPC ([§12.3](docs/gateways.md#s12-3));
//! - `envoy`: Envoy's external authorization, HTTP service mode ([§12.2](docs/gateways.md#s12-2));
//! - `litellm`: LiteLLM's generic guardrail API ([§12.1](docs/gateways.md#s12-1)).

pub(crate) mod envoy;
pub mod ext_proc;
pub(crate) mod litellm;

use crate::engine::{Decision, Evaluator, Normalize, Severity};
use crate::json_text::{self, Body, BodyError};
use crate::server::http::ApiError;
use crate::server::metrics::Metrics;
use crate::server::work::abandoned;
use crate::ErrorName;
use axum::http::HeaderMap;
use serde_json::{json, Value};
use std::borrow::Cow;

/// The request header that names a pack on the gateway routes ([§12](docs/gateways.md#s12)).
pub const PACK_HEADER: &str = "x-helixor-pack";
/// The deciding action, on an allowed request.
pub const ACTION_HEADER: &str = "x-helixor-action";
/// The deciding decision's receipt hash, on an allowed request.
pub const RECEIPT_HEADER: &str = "x-helixor-receipt";
/// `error.type` of a refused request.
pub const POLICY_VIOLATION: &str = "helixor_policy_violation";

/// The pack named by the `x-helixor-pack` header, if any ([§12](docs/gateways.md#s12)).
pub(crate) fn pack_header(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
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
pub(crate) struct PackHeader(pub Option<String>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for PackHeader {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, ApiError> {
        pack_header(&parts.headers).map(PackHeader)
    }
}

/// The HTTP error of a body that cannot be judged: 413 past
/// `limits.max_texts`, else 400.
pub(crate) fn body_error(e: &BodyError) -> ApiError {
    match e {
        BodyError::TooManyStrings { .. } => {
            ApiError::new(ErrorName::PayloadTooLargeError, e.to_string())
        }
        _ => ApiError::bad_request(e.to_string()),
    }
}

/// What one judged string needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Need {
    /// Nothing matched: it goes on as it is.
    Keep,
    /// It goes on as this clean text.
    Redact(String),
    /// A FATAL rule matched: the exchange is refused.
    Refuse,
}

/// Judges the strings of one exchange with one pack, and keeps the decision
/// that speaks for it ([§12.2](docs/gateways.md#s12-2)): the first FATAL one, else the first
/// that redacted, else the first.
pub(crate) struct Judge<'e, 'm> {
    ev: &'e Evaluator,
    normalize: Normalize,
    metrics: Option<&'m Metrics>,
    deciding: Option<Decision<'e>>,
    /// The FATAL rules that matched, each once, in the order met.
    fatal_ids: Vec<&'e str>,
    /// The first string, when no rule could match it: its decision is
    /// built only if it ends up speaking for the exchange.
    first_clean: Option<String>,
    /// Whether a string was judged yet.
    started: bool,
}

impl<'e, 'm> Judge<'e, 'm> {
    /// A judge for the strings of one exchange; every decision is counted in
    /// `metrics` when given.
    pub(crate) fn new(
        ev: &'e Evaluator,
        normalize: Normalize,
        metrics: Option<&'m Metrics>,
    ) -> Self {
        Self {
            ev,
            normalize,
            metrics,
            deciding: None,
            fatal_ids: Vec::new(),
            first_clean: None,
            started: false,
        }
    }

    /// Judges one string. A string no rule can match (most of a body's
    /// strings: roles, ids, model names) costs one pass over its bytes: no
    /// decision is built or counted for it, unless it is the first of a
    /// clean exchange, whose decision speaks for it ([`Judge::settle`]).
    pub(crate) fn judge(&mut self, text: &str) -> Need {
        let first = !self.started;
        self.started = true;
        if !self.ev.may_match(text, self.normalize) {
            if first {
                self.first_clean = Some(text.to_owned());
            }
            return Need::Keep;
        }
        let mut d = self.ev.evaluate_with(text, self.normalize);
        if let Some(m) = self.metrics {
            m.observe_decision(&d);
        }
        for t in &d.triggers {
            if t.severity == Severity::Fatal && !self.fatal_ids.contains(&t.rule_id) {
                self.fatal_ids.push(t.rule_id);
            }
        }
        let speaks = match (&self.deciding, d.severity) {
            // A clean first string, not yet decided, speaks before this one.
            (None, None) => self.first_clean.is_none(),
            (None, _) => true,
            (Some(cur), Some(Severity::Fatal)) => cur.severity != Some(Severity::Fatal),
            (Some(cur), Some(Severity::Warning)) => cur.severity.is_none(),
            (Some(_), None) => false,
        };
        let need = match d.severity {
            Some(Severity::Fatal) => Need::Refuse,
            None => Need::Keep,
            Some(Severity::Warning) if speaks => Need::Redact(d.clean_text.clone()),
            Some(Severity::Warning) => Need::Redact(std::mem::take(&mut d.clean_text)),
        };
        if speaks {
            self.deciding = Some(d);
        }
        need
    }

    /// Judges one string of a body, and first the strings of the JSON text
    /// it holds when that text has escapes (a tool call's arguments, a tool
    /// result its tool serialised): there `\u002d` or `\u0040` would hide
    /// what the upstream reads, and a redaction must be written back as
    /// JSON. At most `max_texts` strings in each such text.
    pub(crate) fn judge_value(&mut self, text: &str, max_texts: usize) -> Result<Need, BodyError> {
        self.judge_nested(text, max_texts, NESTED_JSON_DEPTH)
    }

    fn judge_nested(&mut self, text: &str, max: usize, depth: usize) -> Result<Need, BodyError> {
        let mut inner_clean = None;
        if depth > 0 && holds_escaped_json(text) {
            // Text that merely starts like JSON is judged as text only.
            let strings = match json_text::read(text.as_bytes(), max) {
                Ok(Body::Json(strings)) => strings,
                Err(e @ BodyError::TooManyStrings { .. }) => return Err(e),
                _ => Vec::new(),
            };
            let mut edits = Vec::new();
            for s in strings.iter().filter(|s| matches!(s.text, Cow::Owned(_))) {
                match self.judge_nested(&s.text, max, depth - 1)? {
                    Need::Keep => {}
                    Need::Redact(clean) => edits.push((s.span.clone(), clean)),
                    Need::Refuse => return Ok(Need::Refuse),
                }
            }
            if !edits.is_empty() {
                let out = json_text::rewrite(
                    text.as_bytes(),
                    edits.iter().map(|(span, c)| (span.clone(), c.as_str())),
                );
                // UTF-8 spliced into UTF-8; were it not, the lossy text
                // still carries every redaction.
                inner_clean = Some(
                    String::from_utf8(out)
                        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
                );
            }
        }
        // The text as the upstream reads it, its inner redactions made.
        Ok(match self.judge(inner_clean.as_deref().unwrap_or(text)) {
            Need::Keep => inner_clean.map_or(Need::Keep, Need::Redact),
            other => other,
        })
    }

    /// Builds the decision of a clean first string that speaks for the
    /// exchange (nothing after it matched): call it once every string is
    /// judged, before [`Judge::deciding`].
    pub(crate) fn settle(&mut self) {
        if self.deciding.is_none() {
            if let Some(text) = self.first_clean.take() {
                let d = self.ev.evaluate_with(&text, self.normalize);
                if let Some(m) = self.metrics {
                    m.observe_decision(&d);
                }
                self.deciding = Some(d);
            }
        }
    }

    /// The decision that speaks (`None` before any string; a clean first
    /// string's only once [`Judge::settle`]d).
    pub(crate) fn deciding(&self) -> Option<&Decision<'e>> {
        self.deciding.as_ref()
    }

    /// The decision that speaks, taken.
    pub(crate) fn into_deciding(mut self) -> Option<Decision<'e>> {
        self.settle();
        self.deciding
    }

    /// The FATAL rules met so far, each once, in order (empty: no refusal).
    pub(crate) fn fatal_ids(&self) -> &[&'e str] {
        &self.fatal_ids
    }
}

/// How deep JSON text inside strings is read (JSON in a string in a string
/// ...): deeper text is judged as it is written.
const NESTED_JSON_DEPTH: usize = 3;

/// Whether `text` may be JSON whose strings read differently from its bytes:
/// it opens an object or an array and holds a backslash.
fn holds_escaped_json(text: &str) -> bool {
    let t = text.trim_start_matches([' ', '\t', '\n', '\r']);
    t.starts_with(['{', '[']) && memchr::memchr(b'\\', t.as_bytes()).is_some()
}

/// The verdict on a whole body.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Nothing to change.
    Pass,
    /// The body with every redacted string rewritten in place.
    Rewrite(Vec<u8>),
    /// A FATAL string: the exchange is refused.
    Refuse,
    /// The request was answered without this work ([§9.1](docs/configuration.md#s9-1)): it stopped
    /// between two strings, and its verdict must not be used.
    Abandoned,
}

/// The error of work that stopped because its request was answered
/// without it (never sent: that request has its answer).
pub(crate) fn abandoned_error() -> ApiError {
    ApiError::unavailable("the request was answered before its body was judged")
}

/// Whether a body of this `content-type` must be strict JSON when it starts
/// like JSON: a JSON media type (`application/json`, `…+json`) or none at
/// all (Envoy may not forward it). A body declared as something else (plain
/// text, YAML) that only starts like JSON is judged as one text.
pub(crate) fn declared_json(content_type: Option<&[u8]>) -> bool {
    let Some(value) = content_type else {
        return true;
    };
    let media = value.split(|&b| b == b';').next().unwrap_or_default();
    let media = String::from_utf8_lossy(media).trim().to_ascii_lowercase();
    media.is_empty() || media == "application/json" || media.ends_with("+json")
}

/// Judges every string value of `body` ([§12.4](docs/gateways.md#s12-4)), or the body as one
/// text when it is not JSON; stops at the first FATAL string. At most
/// `max_texts` strings. A body that starts like JSON but is not strict JSON
/// is refused when it is `declared_json` ([`declared_json`]), else judged
/// as one text.
pub(crate) fn judge_body(
    judge: &mut Judge<'_, '_>,
    body: &[u8],
    max_texts: usize,
    declared_json: bool,
) -> Result<Verdict, BodyError> {
    let verdict = match judge_strings(judge, body, max_texts) {
        Err(BodyError::Malformed { .. }) if !declared_json => match std::str::from_utf8(body) {
            Ok(text) => Ok(judge_text(judge, text)),
            Err(e) => Err(BodyError::NotUtf8 {
                valid_up_to: e.valid_up_to(),
            }),
        },
        other => other,
    };
    judge.settle();
    verdict
}

/// The verdict on a body that is one text.
fn judge_text(judge: &mut Judge<'_, '_>, text: &str) -> Verdict {
    match judge.judge(text) {
        Need::Keep => Verdict::Pass,
        Need::Redact(clean) => Verdict::Rewrite(clean.into_bytes()),
        Need::Refuse => Verdict::Refuse,
    }
}

fn judge_strings(
    judge: &mut Judge<'_, '_>,
    body: &[u8],
    max_texts: usize,
) -> Result<Verdict, BodyError> {
    match json_text::read(body, max_texts)? {
        Body::Text(text) => Ok(judge_text(judge, text)),
        Body::Json(strings) => {
            let mut edits = Vec::new();
            for s in &strings {
                if abandoned() {
                    return Ok(Verdict::Abandoned);
                }
                match judge.judge_value(&s.text, max_texts)? {
                    Need::Keep => {}
                    Need::Redact(clean) => edits.push((s.span.clone(), clean)),
                    Need::Refuse => return Ok(Verdict::Refuse),
                }
            }
            if edits.is_empty() {
                return Ok(Verdict::Pass);
            }
            Ok(Verdict::Rewrite(json_text::rewrite(
                body,
                edits
                    .iter()
                    .map(|(span, clean)| (span.clone(), clean.as_str())),
            )))
        }
    }
}

/// The 403 body of a refused exchange ([§12.2](docs/gateways.md#s12-2)): no part of the payload.
pub fn violation_body(d: &Decision<'_>) -> Value {
    json!({"error": {
        "message": d.reason.unwrap_or(d.action),
        "type": POLICY_VIOLATION,
        "code": d.action,
    }})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::playbook::parse_document;
    use crate::rules::check_declarations;

    fn builtin() -> Evaluator {
        let d = parse_document(b"pack_id: t.p.v1\n", "t").unwrap();
        let rules = check_declarations(&d.doc, "t").unwrap();
        Evaluator::new("t.p.v1", "1", &rules).unwrap()
    }

    fn verdict(body: &str) -> String {
        let ev = builtin();
        let mut judge = Judge::new(&ev, Normalize::None, None);
        match judge_body(&mut judge, body.as_bytes(), 100, true) {
            Ok(Verdict::Pass) => "pass".into(),
            Ok(Verdict::Refuse) => format!("refuse {}", judge.fatal_ids().join(",")),
            Ok(Verdict::Abandoned) => "abandoned".into(),
            Ok(Verdict::Rewrite(b)) => String::from_utf8(b).unwrap(),
            Err(e) => format!("error {e}"),
        }
    }

    #[test]
    fn values_and_escaped_json_inside_strings_are_judged() {
        // A value with escapes, a tool call's arguments with escapes of
        // their own.
        assert_eq!(
            verdict(r#"{"a":"123\u002d45\u002d6789"}"#),
            "refuse RULE-GLBA-SSN-BLOCK"
        );
        // Keys are not judged ([§12.4](docs/gateways.md#s12-4)).
        assert_eq!(verdict(r#"{"by":{"123-45-6789":1}}"#), "pass");
        assert_eq!(
            verdict(r#"{"arguments":"{\"ssn\":\"123\\u002d45\\u002d6789\"}"}"#),
            "refuse RULE-GLBA-SSN-BLOCK"
        );
        // A redaction inside nested JSON is written back as JSON, the rest
        // of the string as it was.
        assert_eq!(
            verdict(
                r#"{"arguments":"{\"to\":\"\\u003cjane@example.com\\u003e\",\"n\":1}","k":"v"}"#
            ),
            r#"{"arguments":"{\"to\":\"<[REDACTED_EMAIL]>\",\"n\":1}","k":"v"}"#
        );
        // Text that only starts like JSON is judged as text.
        assert_eq!(
            verdict(r#"{"a":"[not json\\ 123-45-6789"}"#),
            "refuse RULE-GLBA-SSN-BLOCK"
        );
        assert_eq!(verdict(r#"{"a":"{\"b\":\"c\\n\"}"}"#), "pass");
        // The strings of nested JSON count against max_texts.
        let many: String = (0..101).map(|i| format!("\\\"k{i}\\\",")).collect();
        assert_eq!(
            verdict(&format!(r#"{{"a":"[{many}\"z\\n\"]"}}"#)),
            "error the body holds more than 100 strings (limits.max_texts)"
        );
    }

    #[test]
    fn a_clean_exchange_speaks_with_its_first_string_and_counts_once() {
        let ev = builtin();
        let metrics = Metrics::new().unwrap();
        let mut judge = Judge::new(&ev, Normalize::None, Some(&metrics));
        let body = br#"{"role":"user","content":"ok","n":"x"}"#;
        assert!(matches!(
            judge_body(&mut judge, body, 100, true),
            Ok(Verdict::Pass)
        ));
        let d = judge.deciding().unwrap();
        assert_eq!(d.receipt_hash, ev.evaluate("user").receipt_hash);
        let text = String::from_utf8(metrics.render().unwrap()).unwrap();
        assert!(
            text.contains(
                r#"helixor_evaluations_total{action="permit_clean_payload",pack_id="t.p.v1"} 1"#
            ),
            "{text}"
        );
        // A later string that redacts speaks instead; a later clean one
        // that had to be evaluated does not.
        let mut judge = Judge::new(&ev, Normalize::None, None);
        let body = br#"["user","call 212-555-0187","gpt-4o"]"#;
        assert!(matches!(
            judge_body(&mut judge, body, 100, true),
            Ok(Verdict::Rewrite(_))
        ));
        assert_eq!(
            judge.deciding().unwrap().action,
            "redact_and_permit_contact_pii"
        );
        let mut judge = Judge::new(&ev, Normalize::None, None);
        assert!(matches!(
            judge_body(&mut judge, br#"["user","gpt-4o"]"#, 100, true),
            Ok(Verdict::Pass)
        ));
        assert_eq!(
            judge.deciding().unwrap().receipt_hash,
            ev.evaluate("user").receipt_hash
        );
    }

    #[test]
    fn a_body_declared_as_something_else_that_only_starts_like_json_is_one_text() {
        for (ct, json) in [
            (None, true),
            (Some("application/json; charset=utf-8"), true),
            (Some("Application/Vnd.Api+JSON"), true),
            (Some(""), true),
            (Some("text/plain"), false),
            (Some("application/yaml"), false),
        ] {
            assert_eq!(declared_json(ct.map(str::as_bytes)), json, "{ct:?}");
        }
        let ev = builtin();
        let judged = |body: &str, declared: bool| {
            let mut judge = Judge::new(&ev, Normalize::None, None);
            match judge_body(&mut judge, body.as_bytes(), 100, declared) {
                Ok(Verdict::Pass) => "pass".to_string(),
                Ok(Verdict::Refuse) => "refuse".into(),
                Ok(Verdict::Rewrite(b)) => String::from_utf8(b).unwrap(),
                Ok(Verdict::Abandoned) => "abandoned".into(),
                Err(e) => format!("error {e}"),
            }
        };
        let quoted = r#""Hello" she said, SSN 123-45-6789"#;
        assert!(judged(quoted, true).starts_with("error the body starts like JSON"));
        assert_eq!(judged(quoted, false), "refuse");
        assert_eq!(
            judged(r#""Hi" mail a@b.co"#, false),
            r#""Hi" mail [REDACTED_EMAIL]"#
        );
        // Strict JSON is read as JSON whatever it is declared as; a key
        // twice is refused either way.
        assert_eq!(judged(r#"{"a":"123\u002d45\u002d6789"}"#, false), "refuse");
        assert_eq!(
            judged(r#"{"a":1,"a":2}"#, false),
            "error the JSON body has an object with the same key twice"
        );
    }
}
