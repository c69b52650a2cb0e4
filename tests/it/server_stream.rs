//! `POST /v1/evaluate/stream` ([§11.2](docs/streaming.md#s11-2)): the exact events through
//! `Router` + `oneshot`, errors before the stream starts, the metric, and
//! one stream over a real socket from the real binary.

use crate::support::http::{json_request, post_json};
use crate::support::server::{Fixture, Server};
use axum::http::StatusCode;
use axum::Router;
use helixor::server::{router, AppState, Config};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use std::sync::Arc;
use tower::ServiceExt;

const PII_PACK: &str = "compliance.regulatory_pii_guard.v1";

struct Setup {
    _fx: Fixture,
    state: Arc<AppState>,
    app: Router,
}

fn setup() -> Setup {
    setup_with(|_| {})
}

fn setup_with(tweak: impl FnOnce(&mut Config)) -> Setup {
    let fx = Fixture::new();
    let state = crate::support::server::pii_state(&fx, tweak);
    let app = router(Arc::clone(&state));
    Setup {
        _fx: fx,
        state,
        app,
    }
}

fn metrics_text(state: &AppState) -> String {
    String::from_utf8(state.metrics.render().unwrap()).unwrap()
}

/// The `data:` events of an SSE body, parsed.
fn events(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

async fn stream(app: &Router, body: Value) -> (StatusCode, Option<String>, String) {
    let r = post_json(app, "/v1/evaluate/stream", &body.to_string()).await;
    let ctype = r.content_type();
    (r.status, ctype, r.text)
}

fn without_latency(mut done: Value) -> Value {
    assert!(done["latency_us"].as_f64().unwrap() > 0.0, "{done}");
    done.as_object_mut().unwrap().remove("latency_us");
    done
}

#[tokio::test]
async fn python_runtime_example_gives_its_three_releases_then_done() {
    let s = setup();
    let (status, ctype, body) = stream(
        &s.app,
        json!({"text": "Reach support at support@corp.com or security@corp.com.",
               "chunk_size": 4, "lookahead_chars": 28}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(ctype.as_deref(), Some("text/event-stream"));
    let ev = events(&body);
    assert_eq!(ev.len(), 4, "{body}");
    assert_eq!(
        ev[..3],
        [
            json!({"chunk_index": 0, "consumed": 36, "text": "Reach ", "redacted": false, "blocked": false, "reason": null}),
            json!({"chunk_index": 1, "consumed": 44, "text": "support at ", "redacted": false, "blocked": false, "reason": null}),
            json!({"chunk_index": 2, "consumed": 55, "text": "[REDACTED_EMAIL] or [REDACTED_EMAIL].", "redacted": true, "blocked": false, "reason": null}),
        ]
    );
    assert_eq!(
        without_latency(ev[3].clone()),
        json!({"done": true, "action": "redact_and_permit_contact_pii", "severity": "WARNING",
               "reason": "Regulatory notice: Direct online/contact identifier requires in-place redaction prior to egress",
               "receipt_hash": s.state.current().unwrap().packs[PII_PACK].evaluator.evaluate("Reach support at support@corp.com or security@corp.com.").receipt_hash,
               "pack_id": PII_PACK, "generation": 1})
    );
}

#[tokio::test]
async fn exact_holdback_releases_each_piece_as_soon_as_it_is_final() {
    let s = setup();
    let (_, _, body) = stream(
        &s.app,
        json!({"text": "Hello there, mail jane.doe@example.com now", "chunk_size": 8}),
    )
    .await;
    let ev = events(&body);
    let texts: Vec<(&str, u64)> = ev[..ev.len() - 1]
        .iter()
        .map(|e| (e["text"].as_str().unwrap(), e["consumed"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        texts,
        [
            ("Hello ", 8),
            ("there, ", 16),
            ("mail ", 24),
            ("[REDACTED_EMAIL] ", 40),
            ("now", 42)
        ]
    );
    assert_eq!(
        ev.last().unwrap()["action"],
        "redact_and_permit_contact_pii"
    );
}

#[tokio::test]
async fn a_fatal_match_sends_one_blocked_event_and_nothing_of_the_value() {
    let s = setup();
    let (_, _, body) = stream(
        &s.app,
        json!({"text": "Your SSN 123-45-6789 is on file, card 4111 1111 1111 1111.", "chunk_size": 1}),
    )
    .await;
    assert!(!body.contains("123") && !body.contains("6789"), "{body}");
    let ev = events(&body);
    let released: String = ev
        .iter()
        .filter(|e| e["blocked"] == false)
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(released, "Your SSN ");
    let blocked: Vec<&Value> = ev.iter().filter(|e| e["blocked"] == true).collect();
    assert_eq!(blocked.len(), 1);
    let b = blocked[0].as_object().unwrap();
    assert_eq!(
        b["consumed"], 21,
        "blocked once the character after the SSN arrived"
    );
    assert_eq!(b["action"], "block_glba_ssn_leakage");
    assert_eq!(b["text"], "");
    assert_eq!(b["redacted"], false);
    assert_eq!(
        b["triggers"],
        json!([{"rule_id": "RULE-GLBA-SSN-BLOCK", "severity": "FATAL"}])
    );
    let done = ev.last().unwrap();
    assert_eq!(done["done"], true);
    // The decision of the whole text: the card after the block counts (the
    // receipt names both rules), though nothing after the block was released.
    assert_eq!(done["action"], "block_glba_ssn_leakage");
    assert_eq!(done["severity"], "FATAL");
    let generation = s.state.current().unwrap();
    let whole = generation.packs[PII_PACK]
        .evaluator
        .evaluate("Your SSN 123-45-6789 is on file, card 4111 1111 1111 1111.");
    assert_eq!(whole.triggers.len(), 2);
    assert_eq!(done["receipt_hash"], whole.receipt_hash);
    assert_eq!(ev.len(), 4, "\"Your \", \"SSN \", blocked, done");
    let metrics = metrics_text(&s.state);
    assert!(
        metrics.contains(&format!(
            "helixor_stream_sessions_total{{outcome=\"blocked\",pack_id=\"{PII_PACK}\"}} 1"
        )),
        "{metrics}"
    );
}

#[tokio::test]
async fn block_on_fatal_false_redacts_and_finishes() {
    let s = setup();
    let (_, _, body) = stream(
        &s.app,
        json!({"text": "SSN 123-45-6789 ok", "block_on_fatal": false, "chunk_size": 3}),
    )
    .await;
    let ev = events(&body);
    let released: String = ev[..ev.len() - 1]
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(released, "SSN [REDACTED_SSN] ok");
    assert!(ev.iter().all(|e| e["blocked"] != true));
    assert!(metrics_text(&s.state).contains(&format!(
        "helixor_stream_sessions_total{{outcome=\"finished\",pack_id=\"{PII_PACK}\"}} 1"
    )));
}

#[tokio::test]
async fn errors_before_the_stream_starts_are_json() {
    let s = setup();
    for (body, status, name) in [
        (
            json!({"text": "x", "chunk_size": 0}),
            400,
            "InvalidRequestError",
        ),
        (
            json!({"text": "x", "lookahead_chars": "4"}),
            400,
            "InvalidRequestError",
        ),
        (json!({"text": 5}), 400, "InvalidRequestError"),
        (
            json!({"text": "x", "pack_id": "nope.v1"}),
            404,
            "PackNotFoundError",
        ),
    ] {
        let (st, ctype, text) = stream(&s.app, body).await;
        assert_eq!(st.as_u16(), status, "{text}");
        assert_eq!(ctype.as_deref(), Some("application/json"));
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["error"], name);
    }
    // Two `text`s in one body: refused before anything is streamed.
    let r = post_json(
        &s.app,
        "/v1/evaluate/stream",
        r#"{"text": "ok", "text": "SSN 123-45-6789"}"#,
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let v = r.json();
    assert_eq!(v["error"], "InvalidRequestError");
    assert!(!v["message"].as_str().unwrap().contains("123-45"), "{v}");
}

/// `/evaluate` with `{"text": "x"}` until it is not a 503 (at most 2 s);
/// its status.
async fn evaluate_status_within(app: &Router, limit: std::time::Duration) -> StatusCode {
    let started = std::time::Instant::now();
    loop {
        let status = app
            .clone()
            .oneshot(json_request("/evaluate", r#"{"text": "x"}"#))
            .await
            .unwrap()
            .status();
        if status != StatusCode::SERVICE_UNAVAILABLE || started.elapsed() > limit {
            return status;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_stream_frees_its_slot_when_its_session_ends_whatever_the_client_reads() {
    let s = setup_with(|c| c.limits.max_concurrency = 1);
    let req = |body: String| json_request("/v1/evaluate/stream", &body);
    // A short text: the session ends at once, its events wait unread.
    let short = s
        .app
        .clone()
        .oneshot(req(
            json!({"text": "mail ops@example.com now", "chunk_size": 1}).to_string(),
        ))
        .await
        .unwrap();
    assert_eq!(short.status(), StatusCode::OK);
    let within = std::time::Duration::from_secs(2);
    assert_eq!(evaluate_status_within(&s.app, within).await, StatusCode::OK);
    // A long one whose events do not fit the channel: the session waits for
    // its reader without the slot.
    let text = "word ".repeat(2000);
    let long = s
        .app
        .clone()
        .oneshot(req(json!({"text": text, "chunk_size": 1}).to_string()))
        .await
        .unwrap();
    assert_eq!(evaluate_status_within(&s.app, within).await, StatusCode::OK);
    // Both streams are whole once read.
    for (resp, text) in [
        (short, "mail [REDACTED_EMAIL] now".to_string()),
        (long, text),
    ] {
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        let ev = events(std::str::from_utf8(&body).unwrap());
        let released: String = ev[..ev.len() - 1]
            .iter()
            .map(|e| e["text"].as_str().unwrap())
            .collect();
        assert_eq!(released, text);
        assert_eq!(ev.last().unwrap()["done"], true);
    }
}

/// Events reach the connection in chunks of whole events of at most 16
/// KiB (what a waiting stream's memory is counted in), one larger event
/// alone; every push that released text has its event, in order.
#[tokio::test]
async fn events_come_in_chunks_of_whole_events_of_at_most_16_kib() {
    let s = setup();
    let text = "word, ".repeat(3000);
    for (chunk_size, big) in [(1, false), (7, false), (20000, true)] {
        let body = json!({"text": text, "chunk_size": chunk_size}).to_string();
        let resp = s
            .app
            .clone()
            .oneshot(json_request("/v1/evaluate/stream", &body))
            .await
            .unwrap();
        let mut body = resp.into_body();
        let mut frames = Vec::new();
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame.unwrap().into_data() {
                frames.push(data);
            }
        }
        let all: Vec<u8> = frames.iter().flatten().copied().collect();
        let ev = events(std::str::from_utf8(&all).unwrap());
        let released: String = ev[..ev.len() - 1]
            .iter()
            .map(|e| e["text"].as_str().unwrap())
            .collect();
        assert_eq!(released, text);
        let indexes: Vec<u64> = ev[..ev.len() - 1]
            .iter()
            .map(|e| e["chunk_index"].as_u64().unwrap())
            .collect();
        assert_eq!(indexes, (0..indexes.len() as u64).collect::<Vec<_>>());
        for f in &frames {
            assert!(
                f.starts_with(b"data: ") && f.ends_with(b"\n\n"),
                "{chunk_size}"
            );
            let events_in = f.windows(6).filter(|w| w == b"data: ").count();
            assert!(
                f.len() <= 16 * 1024 || (big && events_in == 1),
                "{chunk_size}: {} bytes",
                f.len()
            );
        }
        if chunk_size == 1 {
            // 18,000 events of about 90 bytes: full chunks, not one each.
            assert!(frames.len() < 120, "{}", frames.len());
        }
    }
}

#[tokio::test]
async fn streams_waiting_for_their_readers_hold_a_bounded_memory_the_oldest_cut_first() {
    // 32 KiB bodies: the streams in flight hold 32 of them (1 MiB) at most.
    // Each stream below fills its channel (4 chunks of 16 KiB of events)
    // and waits, holding 3 KB of text, its session (counted as 64 KiB), the
    // chunks and the rest of a batch of 256 pieces' events (23 KB): about
    // 140 KB; 7 fit, 23 of 30 are cut.
    let s = setup_with(|c| {
        c.limits.max_body_bytes = 32_768;
        // Reading them all takes a while: no stream is cut for its reader.
        c.stream_write_timeout_ms = 600_000;
    });
    let body = json!({"text": "! ".repeat(2000), "chunk_size": 1}).to_string();
    let mut waiting = Vec::new();
    for _ in 0..30 {
        let req = json_request("/v1/evaluate/stream", &body);
        let resp = s.app.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        waiting.push(resp);
        // Let it fill its events and wait, in the order they came.
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    }
    // A cut stream ends after the 4 chunks its channel held; a kept one
    // goes on once read (6 chunks are taken from it: its memory stays the
    // same, its events only move from the server to the reader).
    let mut kept = Vec::new();
    for resp in waiting {
        let mut body = resp.into_body();
        let mut taken = 0;
        while taken < 6 {
            let next = tokio::time::timeout(std::time::Duration::from_secs(5), body.frame());
            match next
                .await
                .expect("a kept stream waits for its reader, not more")
            {
                Some(Ok(_)) => taken += 1,
                _ => break,
            }
        }
        assert!(taken == 4 || taken == 6, "{taken} chunks");
        kept.push(taken == 6);
    }
    // The first ones were cut to make room, the last ones kept.
    let cut = kept.iter().take_while(|k| !**k).count();
    assert_eq!(cut, 23, "{kept:?}");
    assert!(kept[cut..].iter().all(|k| *k), "{kept:?}");
}

#[test]
fn a_real_server_streams_events_over_a_socket() {
    let fx = Fixture::new();
    let license = fx.license();
    let packs_dir = fx.path().join("packs");
    fx.packs(&license, &packs_dir, "1.0.0");
    let config = fx.path().join("helixor.yaml");
    std::fs::write(
        &config,
        format!(
            "listen: 127.0.0.1:0\nlicense: {}\npacks_dir: {}\nissuer_keys: {}\ndefault_pack: {PII_PACK}\nreload: {{watch: false}}\n",
            license.display(),
            packs_dir.display(),
            fx.issuer_dir.display()
        ),
    )
    .unwrap();
    let server = Server::start(&config, fx.path());
    let a = server.post(
        "/v1/evaluate/stream",
        r#"{"text": "Call 212-555-0187 today", "chunk_size": 5}"#,
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.header("content-type"), Some("text/event-stream"));
    let ev = events(&a.body);
    let released: String = ev[..ev.len() - 1]
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(released, "Call [REDACTED_PHONE] today");
    assert_eq!(ev.last().unwrap()["generation"], 1);
}
