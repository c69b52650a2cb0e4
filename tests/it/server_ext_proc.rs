//! Envoy external processing ([§12.3](docs/gateways.md#s12-3)) over a real gRPC socket: the
//! answers Envoy gets for request bodies, JSON replies and streamed replies
//! in each body mode, the refusals, auth, and the metrics. The real Envoy
//! runs in `scripts/envoy-e2e.sh`.

use crate::support::server::{Fixture, TEST_PACK};
use envoy_types::pb::envoy::config::core::v3::{HeaderMap, HeaderValue};
use envoy_types::pb::envoy::extensions::filters::http::ext_proc::v3::processing_mode::BodySendMode;
use envoy_types::pb::envoy::service::ext_proc::v3::{
    body_mutation::Mutation, external_processor_client::ExternalProcessorClient,
    processing_request::Request as Msg, processing_response::Response as Answer, BodyResponse,
    CommonResponse, HttpBody, HttpHeaders, ProcessingRequest, ProcessingResponse,
    ProtocolConfiguration,
};
use helixor::server::{ext_proc, AppState, Config};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

const SSN_REASON: &str = "Statutory violation: Social Security Number (GLBA / FCRA) detected";

struct Setup {
    _fx: Fixture,
    state: Arc<AppState>,
    addr: std::net::SocketAddr,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn setup_with(tweak: impl FnOnce(&Fixture, &mut Config)) -> Setup {
    let fx = Fixture::new();
    let state = crate::support::server::pii_state(&fx, |c| tweak(&fx, c));
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let (addr, _task) = ext_proc::spawn(
        Arc::clone(&state),
        "127.0.0.1:0".parse().unwrap(),
        async move {
            let _ = rx.await;
        },
    )
    .await
    .unwrap();
    Setup {
        _fx: fx,
        state,
        addr,
        _stop: tx,
    }
}

async fn setup() -> Setup {
    setup_with(|_, _| {}).await
}

fn headers(pairs: &[(&str, &str)], end_of_stream: bool) -> HttpHeaders {
    HttpHeaders {
        headers: Some(HeaderMap {
            headers: pairs
                .iter()
                .map(|(k, v)| HeaderValue {
                    key: (*k).into(),
                    raw_value: v.as_bytes().to_vec(),
                    ..HeaderValue::default()
                })
                .collect(),
        }),
        end_of_stream,
        ..HttpHeaders::default()
    }
}

fn msg(m: Msg) -> ProcessingRequest {
    ProcessingRequest {
        request: Some(m),
        ..ProcessingRequest::default()
    }
}

fn body(bytes: &[u8], end_of_stream: bool) -> HttpBody {
    HttpBody {
        body: bytes.to_vec(),
        end_of_stream,
        ..HttpBody::default()
    }
}

/// The first message of a stream, with the body modes Envoy announces.
fn first(request: BodySendMode, response: BodySendMode, m: Msg) -> ProcessingRequest {
    ProcessingRequest {
        protocol_config: Some(ProtocolConfiguration {
            request_body_mode: request as i32,
            response_body_mode: response as i32,
            ..ProtocolConfiguration::default()
        }),
        ..msg(m)
    }
}

/// The two messages of a JSON request in buffered mode (Envoy's defaults here).
fn buffered_request(b: &[u8]) -> Vec<ProcessingRequest> {
    vec![
        first(
            BodySendMode::Buffered,
            BodySendMode::Streamed,
            Msg::RequestHeaders(headers(JSON_HEADERS, false)),
        ),
        msg(Msg::RequestBody(body(b, true))),
    ]
}

/// Sends `msgs` on one stream, one at a time, reading the answers each
/// gets before the next is sent (as Envoy does); returns them per message.
async fn exchange(
    addr: std::net::SocketAddr,
    token: Option<&str>,
    msgs: Vec<ProcessingRequest>,
) -> Result<Vec<Vec<ProcessingResponse>>, tonic::Status> {
    let mut client = ExternalProcessorClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let mut req = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(rx));
    if let Some(t) = token {
        req.metadata_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    let expected: Vec<usize> = msgs.iter().map(answers_expected).collect();
    let first = msgs.first().cloned();
    if let Some(f) = first {
        tx.send(f).await.unwrap();
    }
    let mut inbound = client.process(req).await?.into_inner();
    let mut all = Vec::new();
    for (i, want) in expected.iter().enumerate() {
        if i > 0 && tx.send(msgs[i].clone()).await.is_err() {
            break;
        }
        let mut got = Vec::new();
        for _ in 0..*want {
            match tokio::time::timeout(Duration::from_secs(10), inbound.message()).await {
                Ok(Ok(Some(a))) => got.push(a),
                Ok(Ok(None)) => break,
                Ok(Err(e)) => return Err(e),
                Err(_) => panic!("no answer to message {i} in 10 s"),
            }
        }
        let closed = got
            .iter()
            .any(|a| matches!(a.response, Some(Answer::ImmediateResponse(_))));
        all.push(got);
        if closed {
            break;
        }
    }
    drop(tx);
    Ok(all)
}

/// Every message gets one answer here (trailers included).
fn answers_expected(_: &ProcessingRequest) -> usize {
    1
}

fn common(a: &ProcessingResponse) -> &CommonResponse {
    match &a.response {
        Some(Answer::RequestHeaders(h) | Answer::ResponseHeaders(h)) => {
            h.response.as_ref().unwrap()
        }
        Some(Answer::RequestBody(BodyResponse { response: Some(c) }))
        | Some(Answer::ResponseBody(BodyResponse { response: Some(c) })) => c,
        other => panic!("not a headers or body answer: {other:?}"),
    }
}

fn replaced_body(a: &ProcessingResponse) -> Option<Vec<u8>> {
    match common(a).body_mutation.as_ref()?.mutation.as_ref()? {
        Mutation::Body(b) => Some(b.clone()),
        Mutation::ClearBody(true) => Some(Vec::new()),
        Mutation::StreamedResponse(s) => Some(s.body.clone()),
        Mutation::ClearBody(false) => None,
    }
}

fn set_headers(a: &ProcessingResponse) -> Vec<(String, String)> {
    common(a)
        .header_mutation
        .iter()
        .flat_map(|m| m.set_headers.iter())
        .filter_map(|h| h.header.as_ref())
        .map(|h| {
            (
                h.key.clone(),
                String::from_utf8(h.raw_value.clone()).unwrap(),
            )
        })
        .collect()
}

fn removed_headers(a: &ProcessingResponse) -> Vec<String> {
    common(a)
        .header_mutation
        .iter()
        .flat_map(|m| m.remove_headers.iter().cloned())
        .collect()
}

fn immediate(a: &ProcessingResponse) -> (i32, Value) {
    match &a.response {
        Some(Answer::ImmediateResponse(i)) => (
            i.status.as_ref().unwrap().code,
            serde_json::from_slice(&i.body).unwrap(),
        ),
        other => panic!("not an immediate response: {other:?}"),
    }
}

fn chat(text: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"model": "m", "messages": [{"role": "user", "content": text}]}))
        .unwrap()
}

const JSON_HEADERS: &[(&str, &str)] = &[
    (":method", "POST"),
    (":path", "/v1/chat/completions"),
    ("content-type", "application/json"),
    ("content-length", "99"),
    ("accept-encoding", "gzip"),
];

#[tokio::test]
async fn buffered_request_is_redacted_in_place_with_its_length() {
    let s = setup().await;
    let b = chat("Mail jane.doe@example.com today");
    let answers = exchange(s.addr, None, buffered_request(&b)).await.unwrap();
    assert_eq!(removed_headers(&answers[0][0]), ["accept-encoding"]);
    let new = replaced_body(&answers[1][0]).unwrap();
    let v: Value = serde_json::from_slice(&new).unwrap();
    assert_eq!(v["messages"][0]["content"], "Mail [REDACTED_EMAIL] today");
    assert_eq!(v["model"], "m");
    let set = set_headers(&answers[1][0]);
    assert_eq!(
        set[0],
        ("content-length".to_string(), new.len().to_string())
    );
    assert_eq!(set[1].0, "x-helixor-action");
    assert_eq!(set[1].1, "redact_and_permit_contact_pii");
    assert_eq!(set[2].0, "x-helixor-receipt");
    assert!(set[2].1.starts_with("hx_proof_"), "{}", set[2].1);
    let m = String::from_utf8(s.state.metrics.render().unwrap()).unwrap();
    assert!(
        m.contains("helixor_gateway_answers_total{answer=\"redact\",route=\"ext_proc:request\"} 1"),
        "{m}"
    );
}

#[tokio::test]
async fn clean_request_passes_untouched_and_fatal_request_is_refused() {
    let s = setup().await;
    let answers = exchange(s.addr, None, buffered_request(&chat("Lunch at noon?")))
        .await
        .unwrap();
    assert_eq!(replaced_body(&answers[1][0]), None);
    let set = set_headers(&answers[1][0]);
    assert_eq!(
        set[0],
        ("x-helixor-action".into(), "permit_clean_payload".into())
    );

    let mut msgs = buffered_request(&chat("SSN 123-45-6789"));
    msgs.push(msg(Msg::ResponseHeaders(headers(
        &[(":status", "200")],
        true,
    ))));
    let answers = exchange(s.addr, None, msgs).await.unwrap();
    assert_eq!(answers.len(), 2, "nothing after the refusal");
    let (status, body) = immediate(&answers[1][0]);
    assert_eq!(status, 403);
    assert_eq!(
        body,
        json!({"error": {"message": SSN_REASON, "type": "helixor_policy_violation", "code": "block_glba_ssn_leakage"}})
    );
}

#[tokio::test]
async fn streamed_request_chunks_are_held_and_sent_whole() {
    let s = setup().await;
    let b = chat("Mail jane.doe@example.com today");
    let (a, rest) = b.split_at(30);
    let answers = exchange(
        s.addr,
        None,
        vec![
            first(
                BodySendMode::Streamed,
                BodySendMode::Streamed,
                Msg::RequestHeaders(headers(JSON_HEADERS, false)),
            ),
            msg(Msg::RequestBody(body(a, false))),
            msg(Msg::RequestBody(body(rest, true))),
        ],
    )
    .await
    .unwrap();
    // The length is unknown until the end: it goes, and Envoy sends chunked.
    assert_eq!(
        removed_headers(&answers[0][0]),
        ["accept-encoding", "content-length"]
    );
    assert_eq!(replaced_body(&answers[1][0]), Some(Vec::new()));
    let v: Value = serde_json::from_slice(&replaced_body(&answers[2][0]).unwrap()).unwrap();
    assert_eq!(v["messages"][0]["content"], "Mail [REDACTED_EMAIL] today");
}

#[tokio::test]
async fn json_reply_is_switched_to_buffered_and_redacted() {
    let s = setup().await;
    let reply = serde_json::to_vec(&json!({"id": "x", "choices": [{"index": 0,
        "message": {"role": "assistant", "content": "Reach me at jane.doe@example.com"},
        "finish_reason": "stop"}]}))
    .unwrap();
    let answers = exchange(
        s.addr,
        None,
        vec![
            first(
                BodySendMode::Buffered,
                BodySendMode::Streamed,
                Msg::ResponseHeaders(headers(
                    &[(":status", "200"), ("content-type", "application/json")],
                    false,
                )),
            ),
            msg(Msg::ResponseBody(body(&reply, true))),
        ],
    )
    .await
    .unwrap();
    let over = answers[0][0].mode_override.as_ref().unwrap();
    assert_eq!(over.response_body_mode, BodySendMode::Buffered as i32);
    assert_eq!(removed_headers(&answers[0][0]), ["content-length"]);
    let new = replaced_body(&answers[1][0]).unwrap();
    let v: Value = serde_json::from_slice(&new).unwrap();
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "Reach me at [REDACTED_EMAIL]"
    );
    assert_eq!(
        set_headers(&answers[1][0]),
        [("content-length".to_string(), new.len().to_string())]
    );
}

/// An OpenAI SSE reply of `text` in pieces of `n` code points.
fn sse_reply(text: &str, n: usize) -> Vec<u8> {
    let chars: Vec<char> = text.chars().collect();
    let mut s = String::new();
    for p in chars.chunks(n) {
        let p: String = p.iter().collect();
        let c = json!({"id": "c", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": null}]});
        s.push_str(&format!("data: {c}\n\n"));
    }
    s.push_str("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    s.into_bytes()
}

fn sse_text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec())
        .unwrap()
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

async fn streamed_reply(mode: BodySendMode, text: &str, cut: usize) -> Vec<ProcessingResponse> {
    let s = setup().await;
    let reply = sse_reply(text, 3);
    let mut msgs = vec![first(
        BodySendMode::Buffered,
        mode,
        Msg::ResponseHeaders(headers(
            &[(":status", "200"), ("content-type", "text/event-stream")],
            false,
        )),
    )];
    let chunks: Vec<&[u8]> = reply.chunks(cut).collect();
    for (i, c) in chunks.iter().enumerate() {
        msgs.push(msg(Msg::ResponseBody(body(c, i + 1 == chunks.len()))));
    }
    let answers = exchange(s.addr, None, msgs).await.unwrap();
    answers.into_iter().skip(1).flatten().collect()
}

#[tokio::test]
async fn streamed_reply_never_carries_a_fragment_in_either_streaming_mode() {
    let text = "Sure: write to jane.doe@example.com or call, then wait.";
    for mode in [BodySendMode::Streamed, BodySendMode::FullDuplexStreamed] {
        for cut in [1, 7, 64] {
            let answers = streamed_reply(mode, text, cut).await;
            let mut client = Vec::new();
            for a in &answers {
                let chunk = replaced_body(a).unwrap();
                let seen = String::from_utf8_lossy(&chunk);
                for frag in ["jane", ".doe", "@exa", "ple.c"] {
                    assert!(!seen.contains(frag), "{mode:?}/{cut}: {frag} in {seen}");
                }
                client.extend(chunk);
            }
            assert_eq!(
                sse_text(&client),
                "Sure: write to [REDACTED_EMAIL] or call, then wait.",
                "{mode:?}/{cut}"
            );
            if mode == BodySendMode::FullDuplexStreamed {
                let ends: Vec<bool> = answers
                    .iter()
                    .map(
                        |a| match &common(a).body_mutation.as_ref().unwrap().mutation {
                            Some(Mutation::StreamedResponse(s)) => s.end_of_stream,
                            other => panic!("{other:?}"),
                        },
                    )
                    .collect();
                assert_eq!(ends.iter().filter(|e| **e).count(), 1);
                assert_eq!(ends.last(), Some(&true));
            }
        }
    }
}

#[tokio::test]
async fn fatal_value_mid_stream_ends_the_reply_with_an_error_event() {
    let answers = streamed_reply(
        BodySendMode::Streamed,
        "Your number is 123-45-6789 and more words follow.",
        5,
    )
    .await;
    let client: Vec<u8> = answers
        .iter()
        .flat_map(|a| replaced_body(a).unwrap())
        .collect();
    let text = String::from_utf8(client).unwrap();
    for frag in ["123", "45-6", "6789"] {
        assert!(!text.contains(frag), "{frag} in {text}");
    }
    let last = text.trim_end().rsplit("\n\n").next().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(last.strip_prefix("data: ").unwrap()).unwrap(),
        json!({"error": {"message": SSN_REASON, "type": "helixor_policy_violation", "code": "block_glba_ssn_leakage"}})
    );
}

#[tokio::test]
async fn refusals_before_any_body() {
    let s = setup().await;
    // An unknown pack: the [§9.4](docs/http-api.md#s9-4) error, as a local reply.
    let answers = exchange(
        s.addr,
        None,
        vec![first(
            BodySendMode::Buffered,
            BodySendMode::Streamed,
            Msg::RequestHeaders(headers(&[("x-helixor-pack", "no.such.v1")], false)),
        )],
    )
    .await
    .unwrap();
    let (status, err) = immediate(&answers[0][0]);
    assert_eq!(status, 404);
    assert_eq!(err["error"], "PackNotFoundError");
    // A compressed reply cannot be read: refused, not passed.
    let answers = exchange(
        s.addr,
        None,
        vec![first(
            BodySendMode::Buffered,
            BodySendMode::Streamed,
            Msg::ResponseHeaders(headers(
                &[(":status", "200"), ("content-encoding", "gzip")],
                false,
            )),
        )],
    )
    .await
    .unwrap();
    let (status, err) = immediate(&answers[0][0]);
    assert_eq!(status, 502);
    assert_eq!(err["error"], "UnsupportedMediaTypeError");
    // The pack header picks the pack: the test pack redacts tickets only.
    let answers = exchange(
        s.addr,
        None,
        vec![
            first(
                BodySendMode::Buffered,
                BodySendMode::Streamed,
                Msg::RequestHeaders(headers(&[("x-helixor-pack", TEST_PACK)], false)),
            ),
            msg(Msg::RequestBody(body(&chat("see TCK-004211"), true))),
        ],
    )
    .await
    .unwrap();
    let v: Value = serde_json::from_slice(&replaced_body(&answers[1][0]).unwrap()).unwrap();
    assert_eq!(v["messages"][0]["content"], "see [REDACTED_TICKET_ID]");
}

#[tokio::test]
async fn tokens_are_required_when_configured() {
    let s = setup_with(|fx, c| {
        let f = fx.path().join("tokens");
        std::fs::write(&f, "tok-1\n").unwrap();
        c.tokens_file = Some(f);
    })
    .await;
    let m = || {
        vec![first(
            BodySendMode::Buffered,
            BodySendMode::Streamed,
            Msg::RequestHeaders(headers(JSON_HEADERS, true)),
        )]
    };
    let e = exchange(s.addr, None, m()).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated);
    let e = exchange(s.addr, Some("wrong"), m()).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated);
    let ok = exchange(s.addr, Some("tok-1"), m()).await.unwrap();
    assert_eq!(ok.len(), 1);
}

/// The messages of a JSON request with `b` as its body, in buffered mode.
fn buffered_json(b: &[u8]) -> Vec<ProcessingRequest> {
    buffered_request(b)
}

/// [§12.4](docs/gateways.md#s12-4) on ext_proc: every string of a request is judged wherever an
/// agent exchange carries it; a redaction rewrites that string in place and
/// copies every other byte (each row was allowed before, issue 28).
#[tokio::test]
async fn every_string_of_an_agent_request_is_judged_and_redacted_in_place() {
    let s = setup().await;
    for (row, body) in crate::support::server::agent_bodies("123-45-6789") {
        let answers = exchange(s.addr, None, buffered_json(body.as_bytes()))
            .await
            .unwrap();
        let (status, v) = immediate(&answers[1][0]);
        assert_eq!(status, 403, "{row}");
        assert_eq!(v["error"]["code"], "block_glba_ssn_leakage", "{row}");
    }
    let clean = crate::support::server::agent_bodies("[REDACTED_EMAIL]");
    for ((row, body), (_, want)) in crate::support::server::agent_bodies("jane.doe@example.com")
        .into_iter()
        .zip(clean)
    {
        let answers = exchange(s.addr, None, buffered_json(body.as_bytes()))
            .await
            .unwrap();
        let new = replaced_body(&answers[1][0]).unwrap_or_else(|| panic!("{row}: not rewritten"));
        assert_eq!(String::from_utf8(new).unwrap(), want, "{row}");
    }
}

/// [§12.4](docs/gateways.md#s12-4): a JSON reply is judged string by string too (a tool call the
/// model asks for, with its arguments).
#[tokio::test]
async fn a_json_reply_with_a_tool_call_is_judged_in_its_arguments() {
    let s = setup().await;
    let reply = |to: &str| {
        json!({"id": "r", "object": "chat.completion", "choices": [{"index": 0, "message": {
            "role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "mail", "arguments": format!("{{\"to\":\"{to}\"}}")}}]},
            "finish_reason": "tool_calls"}]})
        .to_string()
    };
    let msgs = |body: String| {
        vec![
            first(
                BodySendMode::Buffered,
                BodySendMode::Buffered,
                Msg::ResponseHeaders(headers(
                    &[(":status", "200"), ("content-type", "application/json")],
                    false,
                )),
            ),
            msg(Msg::ResponseBody(self::body(body.as_bytes(), true))),
        ]
    };
    let answers = exchange(s.addr, None, msgs(reply("jane\\u002ddoe@example.com")))
        .await
        .unwrap();
    let new = replaced_body(&answers[1][0]).unwrap();
    assert_eq!(String::from_utf8(new).unwrap(), reply("[REDACTED_EMAIL]"));
    let answers = exchange(s.addr, None, msgs(reply("123-45-6789")))
        .await
        .unwrap();
    let (status, v) = immediate(&answers[1][0]);
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (403, Some("block_glba_ssn_leakage"))
    );
}

/// [§12.4](docs/gateways.md#s12-4): a compressed body is refused whatever the header lines say
/// (a second `content-encoding` line counts), a request as the client's
/// error, a reply as the upstream's.
#[tokio::test]
async fn compressed_bodies_are_refused_whatever_the_header_lines() {
    let s = setup().await;
    for lines in [&["gzip"][..], &["identity", "gzip"], &["identity, gzip"]] {
        let mut pairs: Vec<(&str, &str)> = JSON_HEADERS.to_vec();
        pairs.extend(lines.iter().map(|l| ("content-encoding", *l)));
        let answers = exchange(
            s.addr,
            None,
            vec![first(
                BodySendMode::Buffered,
                BodySendMode::Buffered,
                Msg::RequestHeaders(headers(&pairs, false)),
            )],
        )
        .await
        .unwrap();
        assert_eq!(
            immediate(&answers[0][0]),
            (
                415,
                json!({"error": "UnsupportedMediaTypeError", "message": "the request body is compressed (content-encoding: gzip); compressed bodies are not inspected: send it uncompressed"})
            ),
            "{lines:?}"
        );
        let answers = exchange(
            s.addr,
            None,
            vec![first(
                BodySendMode::Buffered,
                BodySendMode::Buffered,
                Msg::ResponseHeaders(headers(
                    &[
                        &[(":status", "200"), ("content-type", "application/json")][..],
                        &lines
                            .iter()
                            .map(|l| ("content-encoding", *l))
                            .collect::<Vec<_>>(),
                    ]
                    .concat(),
                    false,
                )),
            )],
        )
        .await
        .unwrap();
        let (status, v) = immediate(&answers[0][0]);
        assert_eq!(status, 502, "{lines:?}");
        assert_eq!(v["error"], "UnsupportedMediaTypeError", "{lines:?}");
    }
    // A body that is not UTF-8, sent without a header: an accurate 400.
    let answers = exchange(s.addr, None, buffered_json(b"\x1f\x8b\x08\x00SSN"))
        .await
        .unwrap();
    assert_eq!(
        immediate(&answers[1][0]),
        (
            400,
            json!({"error": "InvalidRequestError", "message": "the body is not UTF-8 text (invalid byte at offset 1)"})
        )
    );
}

/// Raw bytes as gRPC messages, to send what no protobuf encoder writes.
#[derive(Clone, Copy)]
struct RawCodec;

impl tonic::codec::Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawCodec;
    type Decoder = RawCodec;
    fn encoder(&mut self) -> RawCodec {
        RawCodec
    }
    fn decoder(&mut self) -> RawCodec {
        RawCodec
    }
}

impl tonic::codec::Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(
        &mut self,
        item: Vec<u8>,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        bytes::BufMut::put_slice(dst, &item);
        Ok(())
    }
}

impl tonic::codec::Decoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<Vec<u8>>, tonic::Status> {
        let mut v = vec![0; bytes::Buf::remaining(src)];
        bytes::Buf::copy_to_slice(src, &mut v);
        Ok(Some(v))
    }
}

/// A message that is not a `ProcessingRequest` ends the stream with
/// `INVALID_ARGUMENT`, never `OK` (Envoy would take OK as a clean end).
#[tokio::test]
async fn a_malformed_message_ends_the_stream_with_invalid_argument() {
    let s = setup().await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", s.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    // Field 2 (request_headers), length-delimited, its length cut short.
    let bad = vec![0x12u8, 0xff];
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(
        "/envoy.service.ext_proc.v3.ExternalProcessor/Process",
    );
    let resp = grpc
        .streaming(
            tonic::Request::new(tokio_stream::iter([bad])),
            path,
            RawCodec,
        )
        .await;
    let status = match resp {
        Err(status) => status,
        Ok(r) => {
            let mut inbound = r.into_inner();
            match tokio::time::timeout(Duration::from_secs(10), inbound.message())
                .await
                .unwrap()
            {
                Err(status) => status,
                Ok(m) => panic!("not refused: {m:?}"),
            }
        }
    };
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert!(
        status
            .message()
            .starts_with("the message could not be read"),
        "{status:?}"
    );
}

/// Monitor mode ([§19](docs/guides/auditing.md#s19)): a pack in `monitor_packs` decides
/// (its decisions and stream sessions counted) but lets every body through
/// as it came, a FATAL request and a FATAL streamed reply included.
#[tokio::test]
async fn a_monitored_pack_lets_every_body_through_and_counts_what_it_decided() {
    let s = setup_with(|_, c| c.monitor_packs = vec!["compliance.regulatory_pii_guard.v1".into()])
        .await;
    let mut msgs = buffered_request(&chat("SSN 123-45-6789"));
    msgs.push(msg(Msg::ResponseHeaders(headers(
        &[(":status", "200")],
        true,
    ))));
    let answers = exchange(s.addr, None, msgs).await.unwrap();
    assert_eq!(answers.len(), 3, "no refusal: the exchange goes on");
    assert_eq!(
        replaced_body(&answers[1][0]),
        None,
        "the request goes on as sent"
    );

    let reply = sse_reply("Your number is 123-45-6789 and more words follow.", 3);
    let mut msgs = vec![first(
        BodySendMode::Buffered,
        BodySendMode::Streamed,
        Msg::ResponseHeaders(headers(
            &[(":status", "200"), ("content-type", "text/event-stream")],
            false,
        )),
    )];
    let chunks: Vec<&[u8]> = reply.chunks(7).collect();
    for (i, c) in chunks.iter().enumerate() {
        msgs.push(msg(Msg::ResponseBody(body(c, i + 1 == chunks.len()))));
    }
    let answers = exchange(s.addr, None, msgs).await.unwrap();
    for a in answers.iter().skip(1).flatten() {
        assert_eq!(replaced_body(a), None, "every chunk goes on as it came");
    }
    let metrics = String::from_utf8(s.state.metrics.render().unwrap()).unwrap();
    assert!(
        metrics.contains("helixor_monitored_decisions_total{action=\"block_glba_ssn_leakage\",pack_id=\"compliance.regulatory_pii_guard.v1\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("helixor_stream_sessions_total{outcome=\"blocked\",pack_id=\"compliance.regulatory_pii_guard.v1\"} 1"),
        "{metrics}"
    );
}
