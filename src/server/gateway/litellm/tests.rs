use super::*;
use crate::engine::Normalize;
use crate::playbook::parse_document;
use crate::rules::check_declarations;
use serde_json::json;

fn evaluator() -> Evaluator {
    let yaml = "pack_id: t.p.v1\nrules:\n  - {id: ticket_id, type: regex, pattern: '\\bTCK-\\d{6}\\b', action: redact}\n";
    let d = parse_document(yaml.as_bytes(), "t").unwrap();
    let rules = check_declarations(&d.doc, "t").unwrap();
    Evaluator::new("t.p.v1", "1", &rules).unwrap()
}

/// A call as LiteLLM sends it: its body, and what `parse_call` reads of it.
struct TestCall {
    body: Vec<u8>,
    call: Call,
}

fn call(input_type: &str, texts: &[&str]) -> TestCall {
    call_of(json!({"input_type": input_type, "texts": texts, "model": "x"}))
}

fn call_of(body: Value) -> TestCall {
    TestCall {
        call: parse_call(&body).unwrap(),
        body: serde_json::to_vec(&body).unwrap(),
    }
}

fn judged(ev: &Evaluator, c: &TestCall, opts: StreamOptions) -> Value {
    serde_json::to_value(judge(ev, None, &c.body, &c.call, opts, 10_000).unwrap().0).unwrap()
}

fn opts(max_holdback_chars: usize, normalize: Normalize) -> StreamOptions {
    StreamOptions {
        max_holdback_chars,
        normalize,
        ..StreamOptions::default()
    }
}

fn answer_json(ev: &Evaluator, c: &TestCall) -> Value {
    judged(ev, c, opts(65536, Normalize::None))
}

#[test]
fn engine_normalize_evasion_sees_through_full_width_digits_and_joiners() {
    let ev = evaluator();
    let judged =
        |input: &str, text: &str, n: Normalize| judged(&ev, &call(input, &[text]), opts(65536, n));
    let ssn = "SSN １２３-４５-６７８９ on file";
    assert_eq!(
        judged("request", ssn, Normalize::None),
        json!({"action": "NONE"})
    );
    assert_eq!(
        judged("request", ssn, Normalize::Evasion),
        json!({"action": "BLOCKED", "blocked_reason": format!("{SSN_REASON} (RULE-GLBA-SSN-BLOCK)")})
    );
    // A streamed reply: the held-back tail (`now` may still become an
    // e-mail address) is counted on the original text.
    assert_eq!(
        judged(
            "response",
            "mail jane\u{200B}@example.com now",
            Normalize::Evasion
        ),
        json!({"action": "GUARDRAIL_INTERVENED", "texts": ["mail [REDACTED_EMAIL] now"], "stream_holdback_chars": [3]})
    );
}

const SSN_REASON: &str = "Statutory violation: Social Security Number (GLBA / FCRA) detected";

#[test]
fn prompts_are_redacted_blocked_or_left_alone() {
    let ev = evaluator();
    assert_eq!(
        answer_json(
            &ev,
            &call(
                "request",
                &["Be brief.", "Mail jane@example.com re TCK-004211"]
            )
        ),
        json!({"action": "GUARDRAIL_INTERVENED", "texts": ["Be brief.", "Mail [REDACTED_EMAIL] re [REDACTED_TICKET_ID]"]})
    );
    assert_eq!(
        answer_json(&ev, &call("request", &["Lunch at noon?"])),
        json!({"action": "NONE"})
    );
    assert_eq!(
        answer_json(&ev, &call("request", &[])),
        json!({"action": "NONE"})
    );
    // Any FATAL text blocks the call; the reason names rules, never the value.
    let a = answer_json(
        &ev,
        &call("request", &["fine", "ssn 123-45-6789 and jane@example.com"]),
    );
    assert_eq!(
        a,
        json!({"action": "BLOCKED", "blocked_reason": format!("{SSN_REASON} (RULE-GLBA-SSN-BLOCK)")})
    );
    assert!(!a.to_string().contains("6789"));
}

#[test]
fn blocked_reason_lists_every_fatal_rule_once_in_order() {
    let ev = evaluator();
    let a = answer_json(
        &ev,
        &call(
            "request",
            &[
                "card 4111 1111 1111 1111",
                "ssn 123-45-6789",
                "again 123-45-6789",
            ],
        ),
    );
    assert_eq!(
        a["blocked_reason"],
        "Statutory violation: Credit Card PAN (PCI-DSS Requirement 3) detected \
         (RULE-PCI-DSS-PAN-BLOCK, RULE-GLBA-SSN-BLOCK)"
    );
}

#[test]
fn replies_carry_the_hold_back_of_the_release_rule() {
    let ev = evaluator();
    // The address at the end could still grow ("...co" + "m"): all of its
    // placeholder is held back.
    assert_eq!(
        answer_json(&ev, &call("response", &["Write to jane@example.co"])),
        json!({"action": "GUARDRAIL_INTERVENED", "texts": ["Write to [REDACTED_EMAIL]"], "stream_holdback_chars": [16]})
    );
    // A word at the end could begin an address; a space ends every match.
    assert_eq!(
        answer_json(&ev, &call("response", &["Hello wor", "Hello world. "])),
        json!({"action": "NONE", "stream_holdback_chars": [3, 0]})
    );
    assert_eq!(
        answer_json(
            &ev,
            &call(
                "response",
                &[
                    "Mail jane@example.com today. ",
                    "Mail jane@example.com today."
                ]
            )
        ),
        // "today." could still begin an address ("today.x@y.io").
        json!({"action": "GUARDRAIL_INTERVENED", "texts": ["Mail [REDACTED_EMAIL] today. ", "Mail [REDACTED_EMAIL] today."], "stream_holdback_chars": [0, 6]})
    );
}

/// LiteLLM's `incremental_diff` emission (1.108.7, `_build_transform_chunk`):
/// from each answer it sends `texts[0][len(already) .. len − holdback]` (code
/// points), all of it on the last call, and fails a stream whose answer does
/// not extend what was sent.
fn litellm_stream(ev: &Evaluator, reply: &str, cuts: &[usize]) -> Result<Vec<String>, String> {
    let chars: Vec<char> = reply.chars().collect();
    let mut sent: Vec<char> = Vec::new();
    let mut chunks = Vec::new();
    let mut ends: Vec<usize> = cuts.to_vec();
    ends.push(chars.len());
    for (k, &end) in ends.iter().enumerate() {
        let last = k + 1 == ends.len();
        let so_far: String = chars[..end].iter().collect();
        let a = answer_json(ev, &call("response", &[so_far.as_str()]));
        if a["action"] == "BLOCKED" {
            return Err(a["blocked_reason"].as_str().unwrap().to_string());
        }
        let text: Vec<char> = a["texts"]
            .get(0)
            .and_then(Value::as_str)
            .unwrap_or(&so_far)
            .chars()
            .collect();
        if !text.starts_with(&sent) {
            return Err("stream_transform_underflow".into());
        }
        let hold = if last {
            0
        } else {
            a["stream_holdback_chars"][0].as_u64().unwrap() as usize
        };
        let stop = sent.len().max(text.len().saturating_sub(hold));
        chunks.push(text[sent.len()..stop].iter().collect());
        sent = text[..stop].to_vec();
    }
    Ok(chunks)
}

#[test]
fn streamed_replies_never_show_a_fragment_at_any_cut() {
    let ev = evaluator();
    let reply = "Reach jane.doe@example.com or TCK-004211, then bob@corp.io.";
    let want = "Reach [REDACTED_EMAIL] or [REDACTED_TICKET_ID], then [REDACTED_EMAIL].";
    let n = reply.chars().count();
    // Every single cut, every pair of cuts, and one call per code point.
    let mut plans: Vec<Vec<usize>> = vec![(1..n).collect()];
    for a in 1..n {
        plans.push(vec![a]);
        for b in (a + 1..n).step_by(3) {
            plans.push(vec![a, b]);
        }
    }
    for cuts in plans {
        let chunks = litellm_stream(&ev, reply, &cuts).unwrap();
        assert_eq!(chunks.concat(), want, "{cuts:?}");
        for c in &chunks {
            for secret in ["jane", "doe", "example", "004211", "bob", "corp"] {
                assert!(!c.contains(secret), "{cuts:?}: {c:?}");
            }
        }
    }
}

#[test]
fn an_ssn_mid_stream_blocks_before_any_digit_is_sent() {
    let ev = evaluator();
    let reply = "Your number is 123-45-6789, keep it safe.";
    for cut in 1..reply.len() {
        // The fake LiteLLM stops at the block: what it sent before must
        // hold no digit of the number.
        let chars: Vec<char> = reply.chars().collect();
        let mut sent = String::new();
        for end in [cut, chars.len()] {
            let so_far: String = chars[..end].iter().collect();
            let a = answer_json(&ev, &call("response", &[so_far.as_str()]));
            if a["action"] == "BLOCKED" {
                break;
            }
            let h = a["stream_holdback_chars"][0].as_u64().unwrap() as usize;
            let keep = so_far.chars().count() - h;
            sent = so_far.chars().take(keep).collect();
        }
        assert!(
            !sent.contains(|c: char| c.is_ascii_digit()),
            "{cut}: {sent:?}"
        );
    }
    assert_eq!(
        litellm_stream(&ev, reply, &[20, 30]).unwrap_err(),
        format!("{SSN_REASON} (RULE-GLBA-SSN-BLOCK)")
    );
}

#[test]
fn the_hold_back_limit_fails_closed() {
    let ev = evaluator();
    let long = format!("x {}", "a".repeat(100));
    let a = judged(
        &ev,
        &call("response", &[long.as_str()]),
        opts(50, Normalize::None),
    );
    assert_eq!(
        a,
        json!({"action": "BLOCKED", "blocked_reason": crate::engine::HOLDBACK_REASON})
    );
}

#[test]
fn malformed_calls_say_which_field() {
    let cases = [
        (json!([]), "the body must be a JSON object, not an array"),
        (json!({"texts": []}), "`input_type` is missing"),
        (
            json!({"input_type": "prompt"}),
            "`input_type` must be \"request\" or \"response\"",
        ),
        (
            json!({"input_type": 1}),
            "`input_type` must be a string, not a number",
        ),
        (
            json!({"input_type": "request", "texts": "x"}),
            "`texts` must be an array of strings, not a string",
        ),
        (
            json!({"input_type": "request", "texts": ["a", 2]}),
            "`texts[1]` must be a string, not a number",
        ),
        (
            json!({"input_type": "request", "additional_provider_specific_params": []}),
            "`additional_provider_specific_params` must be an object, not an array",
        ),
        (
            json!({"input_type": "request", "additional_provider_specific_params": {"pack_id": 7}}),
            "`additional_provider_specific_params.pack_id` must be a string, not a number",
        ),
    ];
    for (body, want) in cases {
        assert_eq!(parse_call(&body).unwrap_err(), want, "{body}");
    }
    let c = parse_call(&json!({
        "input_type": "response", "texts": null, "images": null, "litellm_version": "1.108.7",
        "additional_provider_specific_params": {"pack_id": "p.v1", "other": 1}
    }))
    .unwrap();
    assert_eq!(c.input_type, InputType::Response);
    assert!(c.texts.is_empty());
    assert_eq!(c.pack_id.as_deref(), Some("p.v1"));
}

/// [§12.4](docs/gateways.md#s12-4): what LiteLLM forwards besides `texts` is judged too.
#[test]
fn rows_tools_and_tool_calls_are_judged_and_metadata_is_not() {
    let ev = evaluator();
    let rows = |content: &str| {
        json!([
            {"role": "user", "content": "look her up"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "crm", "arguments": "{\"q\":\"jane\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": content}
        ])
    };
    // An SSN in a tool result: blocked, whatever `texts` says.
    let a = answer_json(
        &ev,
        &call_of(json!({"input_type": "request", "texts": ["look her up"],
            "structured_messages": rows("found: SSN 123-45-6789")})),
    );
    assert_eq!(
        a,
        json!({"action": "BLOCKED", "blocked_reason": format!("{SSN_REASON} (RULE-GLBA-SSN-BLOCK)")})
    );
    // An e-mail in a tool result: the rows come back redacted in place.
    let a = answer_json(
        &ev,
        &call_of(json!({"input_type": "request", "texts": ["look her up"],
            "structured_messages": rows("found: jane.doe@example.com")})),
    );
    assert_eq!(
        a,
        json!({"action": "GUARDRAIL_INTERVENED", "structured_messages": rows("found: [REDACTED_EMAIL]")})
    );
    // A tool's description: the tools come back redacted.
    let tools = |d: &str| json!([{"type": "function", "function": {"name": "crm", "description": d, "parameters": {"type": "object"}}}]);
    let a = answer_json(
        &ev,
        &call_of(json!({"input_type": "request", "texts": ["hi"],
            "tools": tools("escalate to TCK-004211")})),
    );
    assert_eq!(
        a,
        json!({"action": "GUARDRAIL_INTERVENED", "tools": tools("escalate to [REDACTED_TICKET_ID]")})
    );
    // The call's own metadata is LiteLLM's: not judged.
    let a = answer_json(
        &ev,
        &call_of(json!({"input_type": "request", "texts": ["hi"],
            "request_data": {"user_api_key_alias": "123-45-6789"}, "model": "jane@example.com"})),
    );
    assert_eq!(a, json!({"action": "NONE"}));
}

/// LiteLLM takes no tool call back: one that needs redacting reaches the
/// model redacted only through its row, else the call is blocked.
#[test]
fn a_tool_call_that_needs_redacting_is_blocked_where_no_row_carries_it() {
    let ev = evaluator();
    let tool_calls = json!([{"id": "c1", "type": "function",
        "function": {"name": "mail", "arguments": "{\"to\":\"jane.doe@example.com\"}"}}]);
    let blocked = json!({"action": "BLOCKED", "blocked_reason":
        "Regulatory notice: Direct online/contact identifier requires in-place redaction prior to egress (RULE-GDPR-CONTACT-REDACT): a tool call would need redacting and LiteLLM cannot take one back"});
    // A reply's tool call.
    let a = answer_json(
        &ev,
        &call_of(json!({"input_type": "response", "texts": [], "tool_calls": tool_calls})),
    );
    assert_eq!(a, blocked);
    // A request's, without rows.
    let a = answer_json(
        &ev,
        &call_of(json!({"input_type": "request", "texts": [], "tool_calls": tool_calls})),
    );
    assert_eq!(a, blocked);
    // A request's, with the row that carries it: the row is redacted.
    let row = |to: &str| {
        json!([{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "mail", "arguments": format!("{{\"to\":\"{to}\"}}")}}]}])
    };
    let a = answer_json(
        &ev,
        &call_of(
            json!({"input_type": "request", "texts": [], "tool_calls": tool_calls,
            "structured_messages": row("jane.doe@example.com")}),
        ),
    );
    assert_eq!(
        a,
        json!({"action": "GUARDRAIL_INTERVENED", "structured_messages": row("[REDACTED_EMAIL]")})
    );
    // An SSN in a reply's tool call arguments: blocked as any FATAL value.
    let a = answer_json(
        &ev,
        &call_of(
            json!({"input_type": "response", "texts": ["ok"], "tool_calls": [{"id": "c1",
            "type": "function", "function": {"name": "f", "arguments": "{\"ssn\":\"123\\u002d45-6789\"}"}}]}),
        ),
    );
    assert_eq!(
        a,
        json!({"action": "BLOCKED", "blocked_reason": format!("{SSN_REASON} (RULE-GLBA-SSN-BLOCK)")})
    );
}
