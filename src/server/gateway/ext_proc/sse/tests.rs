use super::*;
use crate::playbook::parse_document;
use crate::rules::check_declarations;

const SSN_REASON: &str = "Statutory violation: Social Security Number (GLBA / FCRA) detected";

fn evaluator() -> Arc<Evaluator> {
    let yaml = "pack_id: t.p.v1\nrules:\n  - {id: ticket_id, type: regex, pattern: '\\bTCK-\\d{6}\\b', action: redact}\n";
    let d = parse_document(yaml.as_bytes(), "t").unwrap();
    let rules = check_declarations(&d.doc, "t").unwrap();
    Arc::new(Evaluator::new("t.p.v1", "1", &rules).unwrap())
}

fn rewriter() -> SseRewriter {
    SseRewriter::new(evaluator(), StreamOptions::default(), 1 << 20)
}

/// An OpenAI chat stream of `pieces`: a role chunk, one chunk a piece, a
/// finish chunk, then `[DONE]`.
fn openai(pieces: &[&str]) -> String {
    let mut s = String::from(
        "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n",
    );
    for p in pieces {
        let chunk = json!({"id": "c1", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": null}]});
        s.push_str(&format!("data: {chunk}\n\n"));
    }
    s.push_str("data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n");
    s.push_str("data: [DONE]\n\n");
    s
}

/// Feeds `input` cut at `cuts` (byte offsets) and returns each output piece.
fn run(rw: &mut SseRewriter, input: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut outs = Vec::new();
    let mut at = 0;
    for &c in cuts.iter().chain(std::iter::once(&input.len())) {
        let c = c.clamp(at, input.len());
        outs.push(rw.push(&input[at..c]));
        at = c;
    }
    outs.push(rw.finish());
    outs
}

/// The `data:` payloads of an SSE byte stream, in order.
fn datas(out: &[u8]) -> Vec<String> {
    let text = std::str::from_utf8(out).unwrap();
    assert!(text.is_empty() || text.ends_with("\n\n"), "{text:?}");
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            e.lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

/// The concatenated streamed text of OpenAI chunks.
fn openai_text(datas: &[String]) -> String {
    datas
        .iter()
        .filter(|d| *d != "[DONE]")
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

/// Deterministic pseudo-random cuts (an LCG: no clock, no dependency).
fn cuts(len: usize, seed: u64, n: usize) -> Vec<usize> {
    let mut x = seed;
    let mut v: Vec<usize> = (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as usize % (len + 1)
        })
        .collect();
    v.sort_unstable();
    v
}

/// No piece the client receives holds 5 characters in a row of `value` (4
/// would match the envelope: `chat.completion` holds `mple`).
fn no_fragment(outs: &[Vec<u8>], value: &str) {
    let chars: Vec<char> = value.chars().collect();
    for out in outs {
        let s = String::from_utf8_lossy(out);
        for w in chars.windows(5) {
            let frag: String = w.iter().collect();
            assert!(
                !s.contains(&frag),
                "fragment {frag:?} of the value in {s:?}"
            );
        }
    }
}

const TEXT: &str = "Write to jane.doe@example.com about TCK-004211 today.";
const CLEAN: &str = "Write to [REDACTED_EMAIL] about [REDACTED_TICKET_ID] today.";

#[test]
fn openai_stream_releases_exactly_the_redacted_reply_for_any_cut() {
    let chars: Vec<char> = TEXT.chars().collect();
    for (trial, piece) in [(0u64, 1usize), (1, 3), (2, 5), (3, 7)] {
        let pieces: Vec<String> = chars.chunks(piece).map(|c| c.iter().collect()).collect();
        let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
        let input = openai(&refs);
        for seed in 0..8 {
            let mut rw = rewriter();
            let c = cuts(input.len(), seed * 31 + trial, 12);
            let outs = run(&mut rw, input.as_bytes(), &c);
            let all: Vec<u8> = outs.concat();
            let d = datas(&all);
            assert_eq!(openai_text(&d), CLEAN, "piece {piece}, seed {seed}");
            assert_eq!(d.last().map(String::as_str), Some("[DONE]"));
            // The finish chunk still closes the choice, after all the text.
            let finish = d
                .iter()
                .position(|x| x.contains("\"finish_reason\":\"stop\""))
                .unwrap();
            assert_eq!(finish, d.len() - 2);
            // The role is said once, in the first chunk, even when the rest
            // of the text comes in a chunk of its own.
            assert_eq!(d.iter().filter(|x| x.contains("\"role\"")).count(), 1);
            no_fragment(&outs, "jane.doe@example.com");
            no_fragment(&outs, "TCK-004211");
            assert!(rw.refused().is_none());
            assert!(rw.redacted());
        }
    }
}

#[test]
fn fatal_value_mid_stream_ends_it_with_the_error_event() {
    let text = "Your SSN is 123-45-6789, keep it safe. More text follows here.";
    let chars: Vec<char> = text.chars().collect();
    let pieces: Vec<String> = chars.chunks(2).map(|c| c.iter().collect()).collect();
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let input = openai(&refs);
    let mut rw = rewriter();
    let outs = run(&mut rw, input.as_bytes(), &cuts(input.len(), 7, 20));
    let all = outs.concat();
    let d = datas(&all);
    let last: Value = serde_json::from_str(d.last().unwrap()).unwrap();
    assert_eq!(
        last,
        json!({"error": {"message": SSN_REASON, "type": "helixor_policy_violation", "code": "block_glba_ssn_leakage"}})
    );
    assert_eq!(openai_text(&d), "Your SSN is ");
    for frag in ["123", "45-6", "6789"] {
        assert!(!String::from_utf8_lossy(&all).contains(frag), "{frag}");
    }
    assert_eq!(rw.refused().map(|r| r.reason.as_str()), Some(SSN_REASON));
    assert_eq!(rw.take_ended_sessions(), [true]);
}

#[test]
fn anthropic_stream_sends_the_rest_before_the_block_stops() {
    let mut input = String::from("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"content\":[]}}\n\n");
    input.push_str("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n");
    for p in ["Mail jane", ".doe@exa", "mple.com"] {
        let v = json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}});
        input.push_str(&format!("event: content_block_delta\ndata: {v}\n\n"));
    }
    input.push_str(
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    );
    input.push_str("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    let mut rw = rewriter();
    let outs = run(&mut rw, input.as_bytes(), &[]);
    let all = String::from_utf8(outs.concat()).unwrap();
    let events: Vec<&str> = all.split("\n\n").filter(|e| !e.is_empty()).collect();
    let texts: String = events
        .iter()
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter(|v| v["type"] == "content_block_delta")
        .filter_map(|v| v["delta"]["text"].as_str().map(str::to_string))
        .collect();
    assert_eq!(texts, "Mail [REDACTED_EMAIL]");
    // The held address comes out in a delta of its own, just before the stop.
    let stop = events
        .iter()
        .position(|e| e.contains("content_block_stop"))
        .unwrap();
    assert!(events[stop - 1].starts_with("event: content_block_delta\ndata: "));
    assert!(events[stop - 1].contains("[REDACTED_EMAIL]"));
    // Events without streamed text go on byte for byte.
    assert!(all.starts_with("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"content\":[]}}\n\n"));
    assert!(all.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
    no_fragment(&outs, "jane.doe@example.com");
}

#[test]
fn events_without_text_pass_byte_for_byte_and_crlf_is_read() {
    let input = ": keep-alive\r\n\r\nevent: ping\r\ndata: {\"type\":\"ping\"}\r\n\r\n";
    let mut rw = rewriter();
    let out = rw.push(input.as_bytes());
    assert_eq!(
        out,
        b": keep-alive\r\n\nevent: ping\r\ndata: {\"type\":\"ping\"}\r\n\n"
    );
    assert!(rw.finish().is_empty());
}

#[test]
fn plain_text_data_is_a_stream_of_its_own() {
    let input = "data: call 555\n\ndata: -0100 or mail a@b.io\n\n";
    let mut rw = rewriter();
    let outs = run(&mut rw, input.as_bytes(), &[]);
    let text: String = datas(&outs.concat()).concat();
    assert_eq!(text, rw.ev.redacted_text("call 555-0100 or mail a@b.io"));
}

#[test]
fn an_event_over_the_limit_fails_closed() {
    let mut rw = SseRewriter::new(evaluator(), StreamOptions::default(), 64);
    let out = rw.push(format!("data: {}", "x".repeat(100)).as_bytes());
    let d = datas(&out);
    assert_eq!(d.len(), 1);
    assert!(d[0].contains(HOLDBACK_ACTION), "{}", d[0]);
    assert!(rw.push(b"\n\ndata: more\n\n").is_empty());
    assert!(rw.finish().is_empty());
}

#[test]
fn whole_json_events_are_judged_whole() {
    // An OpenAI responses `.done` event carries the whole text: redacted whole.
    let input = "data: {\"type\":\"response.output_text.done\",\"output_index\":0,\"content_index\":0,\"text\":\"mail a@b.io\"}\n\n";
    let mut rw = rewriter();
    let d = datas(&rw.push(input.as_bytes()));
    let v: Value = serde_json::from_str(&d[0]).unwrap();
    assert_eq!(v["text"], "mail [REDACTED_EMAIL]");
}

#[test]
fn an_event_that_is_not_utf8_fails_closed_with_its_own_reason() {
    let mut rw = rewriter();
    let out = rw.push(b"data: caf\xe9 jane.doe@example.com\n\ndata: more\n\n");
    let d = datas(&out);
    assert_eq!(d.len(), 1);
    let v: Value = serde_json::from_str(&d[0]).unwrap();
    assert_eq!(
        v,
        json!({"error": {"message": UNREADABLE_REASON, "type": "helixor_policy_violation", "code": UNREADABLE_ACTION}})
    );
    assert!(rw.finish().is_empty());
}

/// The data payloads of `outs` as JSON values (`[DONE]` and plain text left out).
fn json_events(outs: &[Vec<u8>]) -> Vec<Value> {
    datas(&outs.concat())
        .iter()
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

/// Each event of `events` as an SSE event with a data line.
fn sse(events: &[Value]) -> String {
    events.iter().map(|e| format!("data: {e}\n\n")).collect()
}

/// Every strategy of cutting `input`: whole, byte by byte, and at random.
fn every_cut(input: &str) -> Vec<Vec<usize>> {
    let mut all = vec![Vec::new(), (1..input.len()).collect()];
    all.extend((0..4).map(|seed| cuts(input.len(), seed, 16)));
    all
}

#[test]
fn openai_tool_call_argument_deltas_go_through_a_session() {
    let args = ["{\"to\":\"jane", ".doe@exa", "mple.com\",\"n\":", "1}"];
    let mut events = Vec::new();
    for (i, a) in args.iter().enumerate() {
        let mut call = json!({"index": 0, "function": {"arguments": a}});
        if i == 0 {
            call = json!({"index": 0, "id": "c1", "type": "function", "function": {"name": "mail", "arguments": a}});
        }
        events.push(json!({"id": "c", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": null}]}));
    }
    events.push(json!({"id": "c", "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}));
    let input = sse(&events) + "data: [DONE]\n\n";
    for c in every_cut(&input) {
        let mut rw = rewriter();
        let outs = run(&mut rw, input.as_bytes(), &c);
        no_fragment(&outs, "jane.doe@example.com");
        let got: String = json_events(&outs)
            .iter()
            .filter_map(|v| {
                v["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
                    .as_str()
                    .map(str::to_string)
            })
            .collect();
        assert_eq!(got, "{\"to\":\"[REDACTED_EMAIL]\",\"n\":1}", "{c:?}");
        assert!(rw.refused().is_none());
    }
    // An SSN in the arguments ends the stream with the error event.
    let events = [
        json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0,
        "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"ssn\":\"123-45-6789\"}"}}]}}]}),
    ];
    let mut rw = rewriter();
    let outs = run(&mut rw, sse(&events).as_bytes(), &[]);
    assert!(!String::from_utf8_lossy(&outs.concat()).contains("6789"));
    assert_eq!(rw.refused().map(|r| r.reason.as_str()), Some(SSN_REASON));
}

#[test]
fn anthropic_tool_input_and_thinking_deltas_go_through_sessions() {
    let mut events = vec![json!({"type": "content_block_start", "index": 0,
        "content_block": {"type": "thinking", "thinking": ""}})];
    for p in ["Her mail is jane", ".doe@example.com, so"] {
        events.push(json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "thinking_delta", "thinking": p}}));
    }
    events.push(json!({"type": "content_block_stop", "index": 0}));
    events.push(json!({"type": "content_block_start", "index": 1,
        "content_block": {"type": "tool_use", "id": "t1", "name": "mail", "input": {}}}));
    for p in ["{\"to\": \"TCK-00", "4211\"}"] {
        events.push(json!({"type": "content_block_delta", "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": p}}));
    }
    events.push(json!({"type": "content_block_stop", "index": 1}));
    let input = sse(&events);
    for c in every_cut(&input) {
        let mut rw = rewriter();
        let outs = run(&mut rw, input.as_bytes(), &c);
        no_fragment(&outs, "jane.doe@example.com");
        let vs = json_events(&outs);
        let field = |name: &str| -> String {
            vs.iter()
                .filter_map(|v| v["delta"][name].as_str().map(str::to_string))
                .collect()
        };
        assert_eq!(
            field("thinking"),
            "Her mail is [REDACTED_EMAIL], so",
            "{c:?}"
        );
        assert_eq!(
            field("partial_json"),
            "{\"to\": \"[REDACTED_TICKET_ID]\"}",
            "{c:?}"
        );
        for frag in ["TCK-0", "4211"] {
            assert!(
                !String::from_utf8_lossy(&outs.concat()).contains(frag),
                "{c:?}"
            );
        }
    }
}

#[test]
fn responses_deltas_of_any_kind_go_through_sessions() {
    let mut events = Vec::new();
    for p in ["{\"q\":\"jane.d", "oe@example.com\"}"] {
        events.push(json!({"type": "response.function_call_arguments.delta",
            "output_index": 1, "item_id": "fc1", "delta": p}));
    }
    events.push(
        json!({"type": "response.function_call_arguments.done", "output_index": 1,
        "item_id": "fc1", "arguments": "{\"q\":\"jane.doe@example.com\"}"}),
    );
    for p in ["Call TCK-0", "04211 now"] {
        events.push(
            json!({"type": "response.output_text.delta", "output_index": 0,
            "content_index": 0, "delta": p}),
        );
    }
    events.push(
        json!({"type": "response.output_text.done", "output_index": 0,
        "content_index": 0, "text": "Call TCK-004211 now"}),
    );
    let input = sse(&events);
    for c in every_cut(&input) {
        let mut rw = rewriter();
        let outs = run(&mut rw, input.as_bytes(), &c);
        no_fragment(&outs, "jane.doe@example.com");
        let vs = json_events(&outs);
        let of = |kind: &str| -> String {
            vs.iter()
                .filter(|v| v["type"] == kind)
                .filter_map(|v| v["delta"].as_str().map(str::to_string))
                .collect()
        };
        assert_eq!(
            of("response.function_call_arguments.delta"),
            "{\"q\":\"[REDACTED_EMAIL]\"}",
            "{c:?}"
        );
        assert_eq!(
            of("response.output_text.delta"),
            "Call [REDACTED_TICKET_ID] now",
            "{c:?}"
        );
        let done = vs
            .iter()
            .find(|v| v["type"] == "response.function_call_arguments.done")
            .unwrap();
        assert_eq!(done["arguments"], "{\"q\":\"[REDACTED_EMAIL]\"}");
        let done = vs
            .iter()
            .find(|v| v["type"] == "response.output_text.done")
            .unwrap();
        assert_eq!(done["text"], "Call [REDACTED_TICKET_ID] now");
    }
}

#[test]
fn strings_outside_the_streamed_fields_are_judged_whole() {
    // An event of a kind no provider documents, and a known chunk with text
    // in a field that is not a delta (log probabilities): never passed as is.
    for event in [
        json!({"type": "vendor.custom", "payload": {"note": "mail jane.doe@example.com"}}),
        json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0,
            "delta": {"content": "ok"}, "logprobs": {"content": [{"token": "jane.doe@example.com"}]}}]}),
    ] {
        let mut rw = rewriter();
        let outs = run(&mut rw, sse(std::slice::from_ref(&event)).as_bytes(), &[]);
        let all = String::from_utf8(outs.concat()).unwrap();
        assert!(!all.contains("jane.doe"), "{all}");
        assert!(all.contains("[REDACTED_EMAIL]"), "{all}");
    }
    let mut rw = rewriter();
    let event = json!({"type": "vendor.custom", "payload": {"ids": ["123-45-6789"]}});
    let outs = run(&mut rw, sse(&[event]).as_bytes(), &[]);
    assert!(!String::from_utf8_lossy(&outs.concat()).contains("6789"));
    assert_eq!(rw.refused().map(|r| r.reason.as_str()), Some(SSN_REASON));
}
