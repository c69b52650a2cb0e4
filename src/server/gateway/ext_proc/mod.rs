//! Envoy external processing over gRPC ([§12.3](docs/gateways.md#s12-3)):
//! `envoy.service.ext_proc.v3.ExternalProcessor/Process` on `ext_proc.listen`
//! (h2c). One gRPC stream is one HTTP exchange through Envoy, judged with one
//! pack of one generation from its first message to its last.
//!
//! - Requests: the LLM request body's texts (as [§12.2](docs/gateways.md#s12-2) finds them) are
//!   redacted in place, with the content length corrected, or the request
//!   is refused with an `ImmediateResponse` 403 and the [§12.2](docs/gateways.md#s12-2) error body.
//! - JSON replies: redacted in place, or replaced by the 403 error. A reply
//!   that Envoy would stream is switched to `BUFFERED` by `mode_override`
//!   (when the filter allows it) so that a refusal can still change the
//!   status; otherwise its chunks are held here and sent whole at its end.
//! - Streamed replies (`text/event-stream`): rewritten event by event by
//!   [`sse::SseRewriter`], one [§11](docs/streaming.md#s11) session per streamed field, so that the
//!   client never receives a fragment of a redacted value.
//!
//! Every message gets its answer (in `FULL_DUPLEX_STREAMED` mode, every body
//! chunk is answered by a streamed chunk). A body is capped at
//! `limits.max_body_bytes`, a streamed reply at one partial event of that
//! size plus its sessions' hold-back limits; large bodies are judged on a
//! blocking thread. Compressed bodies cannot be read and are refused (fail
//! closed): the request's `accept-encoding` is removed so that the model
//! answers uncompressed. Nothing here logs or returns any part of a payload.

pub mod sse;

use super::{
    abandoned_error, body_error, declared_json, judge_body, violation_body, Judge,
    Verdict as BodyVerdict, ACTION_HEADER, PACK_HEADER, RECEIPT_HEADER,
};
use crate::engine::{Evaluator, StreamOptions};
use crate::server::audit::At;
use crate::server::auth::API_KEY_HEADER;
use crate::server::generation::Generation;
use crate::server::http::{compressed_reply, compressed_request, content_coding, ApiError};
use crate::server::state::AppState;
use crate::server::work::{choose, serving};
use crate::ErrorName;
use axum::http::StatusCode;
use envoy_types::pb::envoy::config::core::v3::{
    header_value_option::HeaderAppendAction, HeaderMap, HeaderValue, HeaderValueOption,
};
use envoy_types::pb::envoy::extensions::filters::http::ext_proc::v3::{
    processing_mode::BodySendMode, ProcessingMode,
};
use envoy_types::pb::envoy::r#type::v3::HttpStatus;
use envoy_types::pb::envoy::service::ext_proc::v3::{
    body_mutation::Mutation,
    external_processor_server::{ExternalProcessor, ExternalProcessorServer},
    processing_request::Request as Msg,
    processing_response::Response as Answer,
    BodyMutation, BodyResponse, CommonResponse, HeaderMutation, HeadersResponse, HttpBody,
    HttpHeaders, ImmediateResponse, ProcessingRequest, ProcessingResponse, StreamedBodyResponse,
    TrailersResponse,
};
use serde_json::Value;
use sse::SseRewriter;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

/// Which way a body goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// A prompt on its way to the model.
    Request,
    /// The model's answer on its way to the client.
    Reply,
}

/// The gRPC method, as Envoy calls it (and as the metrics name it).
pub const METHOD: &str = "/envoy.service.ext_proc.v3.ExternalProcessor/Process";
/// `route` label of request answers in `helixor_gateway_answers_total`.
pub const ROUTE_REQUEST: &str = "ext_proc:request";
/// `route` label of reply answers in `helixor_gateway_answers_total`.
pub const ROUTE_RESPONSE: &str = "ext_proc:response";
/// Above this many bytes, a body is judged on a blocking thread.
const INLINE_BYTES: usize = crate::server::work::INLINE_BYTES;
/// Answers queued towards Envoy per stream.
const ANSWER_BUFFER: usize = 16;
/// How long a new stream waits for an `ext_proc.max_concurrency` slot: as
/// long as an HTTP request waits for one of its own.
const QUEUE_WAIT: Duration = crate::server::work::QUEUE_WAIT;

/// The ext_proc gRPC service, sharing the HTTP server's state but not its
/// concurrency slots ([§9.1](docs/configuration.md#s9-1) `ext_proc.max_concurrency`): streams that
/// Envoy (or anyone) holds open never take a slot of the HTTP routes.
#[derive(Debug, Clone)]
pub struct ExtProc {
    state: Arc<AppState>,
    /// Slots of `ext_proc.max_concurrency`: one per open stream.
    slots: Arc<tokio::sync::Semaphore>,
}

impl ExtProc {
    /// The service for `state`, with a pool of `ext_proc.max_concurrency` slots.
    pub fn new(state: Arc<AppState>) -> Self {
        let slots = Arc::new(tokio::sync::Semaphore::new(
            state.config.ext_proc.max_concurrency,
        ));
        Self { state, slots }
    }

    /// The tonic service, with messages capped a little above the body limit.
    pub fn into_server(self) -> ExternalProcessorServer<Self> {
        let max = self
            .state
            .config
            .limits
            .max_body_bytes
            .saturating_add(64 * 1024);
        ExternalProcessorServer::new(self)
            .max_decoding_message_size(max)
            .max_encoding_message_size(max.saturating_mul(8))
    }

    fn authorized<T>(&self, req: &Request<T>) -> bool {
        if self.state.config.tokens_file.is_none() {
            return true;
        }
        let generation = self.state.current();
        let Some(tokens) = generation.as_ref().and_then(|g| g.tokens.as_ref()) else {
            return false;
        };
        let md = req.metadata();
        tokens.accepts_header(md.get("authorization").map(|v| v.as_bytes()))
            || md
                .get(API_KEY_HEADER)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|k| tokens.accepts(k.trim()))
    }
}

#[tonic::async_trait]
impl ExternalProcessor for ExtProc {
    type ProcessStream = ReceiverStream<Result<ProcessingResponse, Status>>;

    async fn process(
        &self,
        request: Request<Streaming<ProcessingRequest>>,
    ) -> Result<Response<Self::ProcessStream>, Status> {
        if !self.authorized(&request) {
            return Err(Status::unauthenticated(
                "a valid `authorization: Bearer <token>` or `x-api-key` is needed",
            ));
        }
        let slots = Arc::clone(&self.slots);
        let permit = match tokio::time::timeout(QUEUE_WAIT, slots.acquire_owned()).await {
            Ok(Ok(p)) => p,
            _ => {
                return Err(Status::resource_exhausted(
                    "ext_proc.max_concurrency streams are in flight",
                ))
            }
        };
        let mut inbound = request.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel(ANSWER_BUFFER);
        let state = Arc::clone(&self.state);
        tokio::spawn(async move {
            // Held until this task ends, which is never before the work it
            // started: a slot is never free while its work still runs.
            let _permit = permit;
            let timeout = Duration::from_millis(state.config.limits.request_timeout_ms);
            let idle = Duration::from_millis(state.config.ext_proc.idle_stream_timeout_ms);
            let mut exchange = Some(Exchange::new(Arc::clone(&state)));
            let mut overran = None;
            // Envoy ends the stream (or resets it on its own timeouts): then
            // this loop ends and the sessions are dropped. A message that
            // does not parse ends it as the client's error, never as OK.
            loop {
                let msg = match tokio::time::timeout(idle, inbound.message()).await {
                    Ok(Ok(Some(msg))) => msg,
                    Ok(Ok(None)) => break,
                    Ok(Err(status)) => {
                        let refused = Status::invalid_argument(format!(
                            "the message could not be read: {}",
                            status.message()
                        ));
                        let _ = tx.send(Err(refused)).await;
                        break;
                    }
                    Err(_) => {
                        // A stream that sends nothing holds a slot for
                        // nothing: it is ended ([§9.1](docs/configuration.md#s9-1)).
                        let _ = tx
                            .send(Err(Status::deadline_exceeded(
                                "the stream sent nothing for ext_proc.idle_stream_timeout_ms",
                            )))
                            .await;
                        break;
                    }
                };
                let Some(mut ex) = exchange.take() else { break };
                let answers = if msg_bytes(&msg) <= INLINE_BYTES {
                    let a = ex.handle(msg);
                    exchange = Some(ex);
                    a
                } else {
                    let mut work = tokio::task::spawn_blocking(move || {
                        let a = ex.handle(msg);
                        (ex, a)
                    });
                    match tokio::time::timeout(timeout, &mut work).await {
                        Ok(Ok((ex, a))) => {
                            exchange = Some(ex);
                            a
                        }
                        Ok(Err(_)) => vec![immediate_error(&ApiError::internal(
                            "internal error (a bug): the evaluation did not finish",
                        ))],
                        Err(_) => {
                            overran = Some(work);
                            vec![immediate_error(&ApiError::new(
                                ErrorName::ServiceUnavailableError,
                                "the evaluation ran over limits.request_timeout_ms",
                            ))]
                        }
                    }
                };
                let mut gone = false;
                for a in answers {
                    // A peer that takes no answer for as long as a silent
                    // one may send nothing holds its slot no longer.
                    match tokio::time::timeout(idle, tx.send(Ok(a))).await {
                        Ok(Ok(())) => {}
                        _ => {
                            gone = true;
                            break;
                        }
                    }
                }
                if gone || exchange.as_ref().is_none_or(Exchange::closed) {
                    break;
                }
            }
            if let Some(ex) = exchange {
                ex.end();
            }
            // The 503 is sent; the slot waits for the work it answered for.
            if let Some(work) = overran {
                let _ = work.await;
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

fn msg_bytes(msg: &ProcessingRequest) -> usize {
    match &msg.request {
        Some(Msg::RequestBody(b) | Msg::ResponseBody(b)) => b.body.len(),
        _ => 0,
    }
}

/// Binds `ext_proc.listen` and serves until `stop` resolves (then finishes
/// the streams in flight). Returns the bound address at once.
pub async fn spawn(
    state: Arc<AppState>,
    listen: SocketAddr,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), crate::Error> {
    let listener = tokio::net::TcpListener::bind(listen).await.map_err(|e| {
        crate::Error::io(
            format_args!("cannot listen on {listen} (ext_proc.listen)"),
            e,
        )
    })?;
    let local = listener
        .local_addr()
        .map_err(|e| crate::Error::io("cannot read the ext_proc address", e))?;
    // Envoy sends one small message per body chunk and waits for its answer:
    // Nagle's delay would add tens of milliseconds to each. (The builder's
    // `tcp_nodelay` does not apply to an incoming stream given to it.)
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    let max_streams = state.config.ext_proc.max_streams_per_connection;
    let service = ExtProc::new(state).into_server();
    let task = tokio::spawn(async move {
        let served = tonic::transport::Server::builder()
            .http2_keepalive_interval(Some(Duration::from_secs(30)))
            // One connection cannot open more streams than this ([§9.1](docs/configuration.md#s9-1)).
            .max_concurrent_streams(Some(max_streams))
            .add_service(service)
            .serve_with_incoming_shutdown(incoming, stop)
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "the ext_proc server failed");
        }
    });
    Ok((local, task))
}

/// How Envoy sends a body (`processing_mode`, told in `protocol_config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    None,
    Streamed,
    Buffered,
    BufferedPartial,
    Grpc,
    FullDuplex,
}

impl Mode {
    fn of(raw: i32) -> Self {
        match BodySendMode::try_from(raw) {
            Ok(BodySendMode::None) => Self::None,
            Ok(BodySendMode::Streamed) => Self::Streamed,
            Ok(BodySendMode::Buffered) => Self::Buffered,
            Ok(BodySendMode::BufferedPartial) => Self::BufferedPartial,
            Ok(BodySendMode::FullDuplexStreamed) => Self::FullDuplex,
            Ok(BodySendMode::Grpc) | Err(_) => Self::Grpc,
        }
    }
}

/// A body being received whole (a request, or a reply that is not a
/// stream). No `Debug`: it holds the payload.
#[derive(Default)]
struct Whole {
    bytes: Vec<u8>,
    /// Chunks answered with an empty body so far (they go out at the end).
    held: bool,
}

/// What the reply is, once its headers are known (no `Debug`: payload).
enum Reply {
    /// Headers not seen yet, or a body that needs nothing (no body).
    Pending,
    Whole(Whole),
    Stream(Box<SseRewriter>),
    /// Passed on untouched: its body ended with its headers.
    Done,
}

/// One HTTP exchange: the pack it is judged with, and its bodies' state.
pub struct Exchange {
    state: Arc<AppState>,
    /// Held for the whole exchange: one generation from start to end.
    generation: Option<Arc<Generation>>,
    ev: Option<Arc<Evaluator>>,
    request_mode: Mode,
    response_mode: Mode,
    request: Whole,
    reply: Reply,
    closed: bool,
    /// Whether each body, by its `content-type`, must be strict JSON when
    /// it starts like JSON ([`declared_json`]): request, reply.
    declared_json: [bool; 2],
    /// What the decision log says of the exchange: its `x-request-id` and
    /// its pack's file digest (set with the pack).
    request_id: Option<String>,
    pack_sha256: String,
    /// The pack is in `monitor_packs`: bodies pass unchanged.
    monitored: bool,
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The bodies are payload: only their sizes and states.
        let reply = match &self.reply {
            Reply::Pending => "pending",
            Reply::Whole(_) => "whole",
            Reply::Stream(_) => "stream",
            Reply::Done => "done",
        };
        f.debug_struct("Exchange")
            .field("generation", &self.generation.as_ref().map(|g| g.number))
            .field("pack_id", &self.ev.as_ref().map(|ev| ev.pack_id()))
            .field("request_mode", &self.request_mode)
            .field("response_mode", &self.response_mode)
            .field("request_bytes", &self.request.bytes.len())
            .field("reply", &reply)
            .field("closed", &self.closed)
            .field("declared_json", &self.declared_json)
            .finish_non_exhaustive()
    }
}

/// The decision that speaks for a passed request, sent upstream as
/// `x-helixor-action` and `x-helixor-receipt` (as ext_authz does).
#[derive(Debug)]
struct Noted {
    action: String,
    receipt: String,
}

/// The verdict on a whole body.
enum Verdict {
    Pass,
    Replace(Vec<u8>),
    Refuse(Value),
    /// The body cannot be judged (not UTF-8, malformed JSON, too many strings).
    Invalid(ApiError),
}

impl Exchange {
    /// A new exchange; the pack is chosen at its first message.
    pub fn new(state: Arc<AppState>) -> Self {
        Self {
            state,
            generation: None,
            ev: None,
            // Until Envoy says (it does in its first message): the modes the
            // README's configuration sets.
            request_mode: Mode::Buffered,
            response_mode: Mode::Streamed,
            request: Whole::default(),
            reply: Reply::Pending,
            closed: false,
            declared_json: [true, true],
            request_id: None,
            pack_sha256: String::new(),
            monitored: false,
        }
    }

    /// Whether an immediate response ended the exchange.
    pub fn closed(&self) -> bool {
        self.closed
    }

    /// The answers to one message from Envoy (none for a message that needs
    /// none, such as a flow-control update).
    pub fn handle(&mut self, msg: ProcessingRequest) -> Vec<ProcessingResponse> {
        if let Some(pc) = msg.protocol_config {
            self.request_mode = Mode::of(pc.request_body_mode);
            self.response_mode = Mode::of(pc.response_body_mode);
        }
        let Some(m) = msg.request else {
            return Vec::new();
        };
        if self.closed {
            return Vec::new();
        }
        let headers = match &m {
            Msg::RequestHeaders(h) => Some(h),
            _ => None,
        };
        if let Err(e) = self.bind(headers) {
            return self.refuse_with(&e);
        }
        match m {
            Msg::RequestHeaders(h) => self.request_headers(&h),
            Msg::RequestBody(b) => self.request_body(b),
            Msg::ResponseHeaders(h) => self.response_headers(&h),
            Msg::ResponseBody(b) => self.response_body(b),
            Msg::RequestTrailers(_) => {
                vec![answer(Answer::RequestTrailers(TrailersResponse::default()))]
            }
            Msg::ResponseTrailers(_) => self.response_trailers(),
        }
    }

    /// Counts what the exchange leaves unfinished (sessions of a stream
    /// that Envoy ended early).
    pub fn end(mut self) {
        if let Reply::Stream(rw) = &mut self.reply {
            let pack = self.ev.as_ref().map(|e| e.pack_id().to_string());
            for blocked in rw.take_ended_sessions() {
                if let Some(p) = &pack {
                    self.state.metrics.observe_stream_session(p, blocked);
                }
            }
        }
    }

    /// Chooses the pack at the first message: `x-helixor-pack`, else [§9.4](docs/http-api.md#s9-4).
    fn bind(&mut self, headers: Option<&HttpHeaders>) -> Result<(), ApiError> {
        if self.ev.is_some() {
            return Ok(());
        }
        let generation = serving(&self.state)?;
        let requested = headers.and_then(|h| header(h, PACK_HEADER));
        let requested = requested
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty());
        let pack = choose(
            &generation,
            requested,
            self.state.config.default_pack.as_deref(),
        )?;
        self.ev = Some(Arc::clone(&pack.evaluator));
        self.pack_sha256.clone_from(&pack.file_sha256);
        self.monitored = crate::server::monitor::is_monitored(&self.state, &pack.pack_id, false);
        // Envoy forwards the client's id as sent: only a usable one is logged.
        self.request_id = headers
            .and_then(|h| header(h, "x-request-id"))
            .filter(|id| crate::server::http::usable_request_id(id.as_bytes()));
        self.generation = Some(generation);
        Ok(())
    }

    fn ev(&self) -> Option<&Arc<Evaluator>> {
        self.ev.as_ref()
    }

    fn refuse_with(&mut self, e: &ApiError) -> Vec<ProcessingResponse> {
        self.closed = true;
        vec![immediate_error(e)]
    }

    fn request_headers(&mut self, h: &HttpHeaders) -> Vec<ProcessingResponse> {
        self.declared_json[0] =
            declared_json(header(h, "content-type").as_deref().map(str::as_bytes));
        let mut mutation = HeaderMutation {
            // The reply must come uncompressed to be read.
            remove_headers: vec!["accept-encoding".into()],
            ..HeaderMutation::default()
        };
        if !h.end_of_stream {
            if let Some(e) = compressed(h) {
                return self.refuse_with(&compressed_request(&e));
            }
            if self.request_mode != Mode::Buffered {
                // Its length is set again only in buffered mode.
                mutation.remove_headers.push("content-length".into());
            }
        }
        vec![answer(Answer::RequestHeaders(HeadersResponse {
            response: Some(CommonResponse {
                header_mutation: Some(mutation),
                ..CommonResponse::default()
            }),
        }))]
    }

    fn request_body(&mut self, b: HttpBody) -> Vec<ProcessingResponse> {
        let mode = self.request_mode;
        let mut whole = std::mem::take(&mut self.request);
        let out = self.whole_body(&mut whole, b, mode, Direction::Request);
        self.request = whole;
        out
    }

    fn response_headers(&mut self, h: &HttpHeaders) -> Vec<ProcessingResponse> {
        self.declared_json[1] =
            declared_json(header(h, "content-type").as_deref().map(str::as_bytes));
        let mut common = CommonResponse::default();
        let mut mode_override = None;
        if h.end_of_stream {
            self.reply = Reply::Done;
        } else if let Some(e) = compressed(h) {
            return self.refuse_with(&compressed_reply(&e));
        } else {
            let sse = header(h, "content-type").is_some_and(|t| {
                t.split(';')
                    .next()
                    .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"))
            });
            let mut remove = Vec::new();
            if sse {
                let Some(ev) = self.ev() else {
                    return Vec::new();
                };
                let opts = StreamOptions {
                    max_holdback_chars: self.state.config.max_holdback_chars,
                    normalize: self.state.config.normalize,
                    ..StreamOptions::default()
                };
                self.reply = Reply::Stream(Box::new(SseRewriter::new(
                    Arc::clone(ev),
                    opts,
                    self.state.config.limits.max_body_bytes,
                )));
                if self.response_mode != Mode::Buffered {
                    remove.push("content-length".to_string());
                }
            } else {
                self.reply = Reply::Whole(Whole::default());
                if self.response_mode == Mode::Streamed {
                    // Buffered, a refusal can still be a 403; where the filter
                    // does not allow the override, the chunks are held here.
                    mode_override = Some(ProcessingMode {
                        response_body_mode: BodySendMode::Buffered as i32,
                        ..ProcessingMode::default()
                    });
                }
                if self.response_mode != Mode::Buffered {
                    remove.push("content-length".to_string());
                }
            }
            if !remove.is_empty() {
                common.header_mutation = Some(HeaderMutation {
                    remove_headers: remove,
                    ..HeaderMutation::default()
                });
            }
        }
        let mut a = answer(Answer::ResponseHeaders(HeadersResponse {
            response: Some(common),
        }));
        a.mode_override = mode_override;
        vec![a]
    }

    fn response_body(&mut self, b: HttpBody) -> Vec<ProcessingResponse> {
        // An override to buffered mode shows as one whole body.
        let mode = match (&self.reply, self.response_mode) {
            (Reply::Whole(w), Mode::Streamed) if !w.held && b.end_of_stream => Mode::Buffered,
            (_, m) => m,
        };
        match std::mem::replace(&mut self.reply, Reply::Done) {
            Reply::Whole(mut whole) => {
                let out = self.whole_body(&mut whole, b, mode, Direction::Reply);
                self.reply = Reply::Whole(whole);
                out
            }
            Reply::Stream(mut rw) if self.monitored => {
                // Monitor mode: the rewriter still decides (and its
                // sessions are counted), but the reply goes on as it came.
                let _ = rw.push(&b.body);
                if b.end_of_stream || mode == Mode::Buffered {
                    let _ = rw.finish();
                }
                self.count_sessions(&mut rw);
                self.reply = Reply::Stream(rw);
                passed_on(b, mode)
            }
            Reply::Stream(mut rw) => {
                let mut bytes = rw.push(&b.body);
                let end = b.end_of_stream || mode == Mode::Buffered;
                if end {
                    bytes.extend(rw.finish());
                }
                self.stream_metrics(&mut rw, end);
                self.reply = Reply::Stream(rw);
                vec![body_answer(
                    Direction::Reply,
                    mode,
                    Some(bytes),
                    b.end_of_stream,
                    None,
                )]
            }
            other => {
                // Nothing to judge.
                self.reply = other;
                passed_on(b, mode)
            }
        }
    }

    fn response_trailers(&mut self) -> Vec<ProcessingResponse> {
        let mut out = Vec::new();
        // Trailers end a streamed body that did not say so itself.
        if self.response_mode == Mode::FullDuplex {
            if let Reply::Stream(rw) = &mut self.reply {
                let bytes = rw.finish();
                // Monitor mode echoed every chunk as it came: nothing is held.
                let bytes = if self.monitored { Vec::new() } else { bytes };
                out.push(body_answer(
                    Direction::Reply,
                    Mode::FullDuplex,
                    Some(bytes),
                    false,
                    None,
                ));
            } else if let Reply::Whole(w) = &mut self.reply {
                if w.held {
                    let b = HttpBody {
                        end_of_stream: true,
                        ..HttpBody::default()
                    };
                    let mut whole = std::mem::take(w);
                    let mut a = self.whole_body(&mut whole, b, Mode::FullDuplex, Direction::Reply);
                    if self.closed {
                        return a;
                    }
                    for x in &mut a {
                        unset_end_of_stream(x);
                    }
                    out.extend(a);
                }
            }
        }
        out.push(answer(
            Answer::ResponseTrailers(TrailersResponse::default()),
        ));
        out
    }

    /// Counts the stream sessions `rw` ended since the last count.
    fn count_sessions(&self, rw: &mut SseRewriter) {
        let Some(ev) = self.ev() else { return };
        for blocked in rw.take_ended_sessions() {
            self.state
                .metrics
                .observe_stream_session(ev.pack_id(), blocked);
        }
    }

    fn stream_metrics(&self, rw: &mut SseRewriter, end: bool) {
        if self.ev().is_none() {
            return;
        }
        self.count_sessions(rw);
        if rw.refused().is_some() {
            self.state.metrics.observe_gateway(ROUTE_RESPONSE, "deny");
        } else if end {
            let answer = if rw.redacted() { "redact" } else { "allow" };
            self.state.metrics.observe_gateway(ROUTE_RESPONSE, answer);
        }
    }

    /// A chunk of a body judged whole: held until its end, then judged.
    fn whole_body(
        &mut self,
        whole: &mut Whole,
        b: HttpBody,
        mode: Mode,
        dir: Direction,
    ) -> Vec<ProcessingResponse> {
        let limit = self.state.config.limits.max_body_bytes;
        if whole.bytes.len().saturating_add(b.body.len()) > limit {
            return self.refuse_with(&ApiError::new(
                ErrorName::PayloadTooLargeError,
                format!("the body is over the {limit}-byte limit (limits.max_body_bytes)"),
            ));
        }
        match mode {
            Mode::BufferedPartial if !b.end_of_stream => {
                // The rest would pass unseen: fail closed.
                return self.refuse_with(&ApiError::new(ErrorName::PayloadTooLargeError, "the body is larger than Envoy's buffer (BUFFERED_PARTIAL): it cannot be inspected whole",
                ));
            }
            Mode::Grpc => {
                return self.refuse_with(&ApiError::new(
                    ErrorName::UnsupportedMediaTypeError,
                    "the GRPC body send mode is not supported: use BUFFERED or STREAMED",
                ))
            }
            _ => {}
        }
        let single = whole.bytes.is_empty() && !whole.held;
        let end = b.end_of_stream || matches!(mode, Mode::Buffered | Mode::BufferedPartial);
        if !end {
            whole.bytes.extend_from_slice(&b.body);
            whole.held = true;
            return vec![body_answer(dir, mode, Some(Vec::new()), false, None)];
        }
        let body = if single {
            b.body
        } else {
            whole.bytes.extend_from_slice(&b.body);
            std::mem::take(&mut whole.bytes)
        };
        let mut noted = None;
        let at = At {
            route: if dir == Direction::Reply {
                "ext_proc.reply"
            } else {
                "ext_proc.request"
            },
            request_id: self.request_id.as_deref(),
            generation: self.generation.as_ref().map_or(0, |g| g.number),
            pack_sha256: &self.pack_sha256,
            monitored: self.monitored,
        };
        let verdict = match self.ev() {
            Some(ev) => {
                let json = self.declared_json[usize::from(dir == Direction::Reply)];
                judge(&self.state, ev, &body, json, &mut noted, &at)
            }
            None => Verdict::Pass,
        };
        // Monitor mode: decided and logged, never enforced.
        let verdict = match verdict {
            Verdict::Replace(_) | Verdict::Refuse(_) if self.monitored => {
                noted = None;
                Verdict::Pass
            }
            other => other,
        };
        // Request headers can still change in buffered mode only.
        let note = |mut a: ProcessingResponse| {
            if let (Some(n), Direction::Request, Mode::Buffered) = (&noted, dir, mode) {
                add_headers(
                    &mut a,
                    vec![
                        set_header(ACTION_HEADER, n.action.clone()),
                        set_header(RECEIPT_HEADER, n.receipt.clone()),
                    ],
                );
            }
            a
        };
        let route = match dir {
            Direction::Request => ROUTE_REQUEST,
            Direction::Reply => ROUTE_RESPONSE,
        };
        match verdict {
            Verdict::Refuse(err) => {
                self.state.metrics.observe_gateway(route, "deny");
                self.closed = true;
                vec![immediate(
                    StatusCode::FORBIDDEN,
                    &err,
                    "helixor_policy_violation",
                )]
            }
            Verdict::Invalid(e) => {
                self.refuse_with(&match dir {
                    Direction::Request => e,
                    // The upstream's reply, not the client, is at fault.
                    Direction::Reply => e.in_reply(),
                })
            }
            Verdict::Replace(new) => {
                self.state.metrics.observe_gateway(route, "redact");
                vec![note(body_answer(dir, mode, Some(new), true, Some(true)))]
            }
            Verdict::Pass => {
                self.state.metrics.observe_gateway(route, "allow");
                // Held chunks (or a full-duplex body) must go out now.
                let resend = !single || mode == Mode::FullDuplex;
                vec![note(body_answer(
                    dir,
                    mode,
                    resend.then_some(body),
                    true,
                    Some(false),
                ))]
            }
        }
    }
}

/// The answer that lets a reply chunk go on as it came (echoed in full
/// duplex mode, where every chunk is sent back).
fn passed_on(b: HttpBody, mode: Mode) -> Vec<ProcessingResponse> {
    let echo = (mode == Mode::FullDuplex).then_some(b.body);
    vec![body_answer(
        Direction::Reply,
        mode,
        echo,
        b.end_of_stream,
        None,
    )]
}

/// Judges a whole body: every string value ([§12.4](docs/gateways.md#s12-4)), or the body as one
/// text when it is not JSON; stops at the first FATAL string.
fn judge(
    state: &AppState,
    ev: &Evaluator,
    body: &[u8],
    declared_json: bool,
    noted: &mut Option<Noted>,
    at: &At<'_>,
) -> Verdict {
    let mut judge = Judge::new(ev, state.config.normalize, Some(&state.metrics));
    let verdict = judge_body(
        &mut judge,
        body,
        state.config.limits.max_texts,
        declared_json,
    );
    if let Some(d) = judge.deciding() {
        if at.monitored {
            state.metrics.observe_monitored(d);
        }
        // A gRPC answer is not held for the line: it is written in order.
        state.log_decision_after(d, at, state.payload_hmac(body));
        *noted = Some(Noted {
            action: d.action.to_string(),
            receipt: d.receipt_hash.clone(),
        });
    }
    match verdict {
        Err(e) => Verdict::Invalid(body_error(&e)),
        Ok(BodyVerdict::Pass) => Verdict::Pass,
        Ok(BodyVerdict::Rewrite(bytes)) => Verdict::Replace(bytes),
        Ok(BodyVerdict::Abandoned) => Verdict::Invalid(abandoned_error()),
        Ok(BodyVerdict::Refuse) => match judge.deciding() {
            Some(d) => Verdict::Refuse(violation_body(d)),
            None => Verdict::Invalid(ApiError::internal(
                "internal error (a bug): a refusal without a decision",
            )),
        },
    }
}

fn answer(a: Answer) -> ProcessingResponse {
    ProcessingResponse {
        response: Some(a),
        ..ProcessingResponse::default()
    }
}

/// The answer to a body chunk in the mode Envoy sent it: `body` replaces the
/// chunk (`None`: unchanged). `length` sets the content length of a
/// replaced whole body in buffered mode (`Some(true)`: it changed).
fn body_answer(
    dir: Direction,
    mode: Mode,
    body: Option<Vec<u8>>,
    end_of_stream: bool,
    length: Option<bool>,
) -> ProcessingResponse {
    let mut common = CommonResponse::default();
    match (mode, body) {
        (Mode::FullDuplex, body) => {
            common.body_mutation = Some(BodyMutation {
                mutation: Some(Mutation::StreamedResponse(StreamedBodyResponse {
                    body: body.unwrap_or_default(),
                    end_of_stream,
                    ..StreamedBodyResponse::default()
                })),
            });
        }
        (_, None) => {}
        (_, Some(body)) => {
            if matches!(mode, Mode::Buffered | Mode::BufferedPartial) && length == Some(true) {
                common.header_mutation = Some(HeaderMutation {
                    set_headers: vec![set_header("content-length", body.len().to_string())],
                    ..HeaderMutation::default()
                });
            }
            let mutation = if body.is_empty() {
                Mutation::ClearBody(true)
            } else {
                Mutation::Body(body)
            };
            common.body_mutation = Some(BodyMutation {
                mutation: Some(mutation),
            });
        }
    }
    let r = BodyResponse {
        response: Some(common),
    };
    answer(match dir {
        Direction::Request => Answer::RequestBody(r),
        Direction::Reply => Answer::ResponseBody(r),
    })
}

/// Adds `set` to the header mutation of a headers or body answer.
fn add_headers(a: &mut ProcessingResponse, set: Vec<HeaderValueOption>) {
    let common = match &mut a.response {
        Some(
            Answer::RequestHeaders(HeadersResponse { response })
            | Answer::ResponseHeaders(HeadersResponse { response })
            | Answer::RequestBody(BodyResponse { response })
            | Answer::ResponseBody(BodyResponse { response }),
        ) => response.get_or_insert_with(CommonResponse::default),
        _ => return,
    };
    common
        .header_mutation
        .get_or_insert_with(HeaderMutation::default)
        .set_headers
        .extend(set);
}

fn unset_end_of_stream(a: &mut ProcessingResponse) {
    if let Some(Answer::ResponseBody(BodyResponse {
        response:
            Some(CommonResponse {
                body_mutation:
                    Some(BodyMutation {
                        mutation: Some(Mutation::StreamedResponse(s)),
                    }),
                ..
            }),
    })) = &mut a.response
    {
        s.end_of_stream = false;
    }
}

fn set_header(key: &str, value: String) -> HeaderValueOption {
    HeaderValueOption {
        header: Some(HeaderValue {
            key: key.into(),
            raw_value: value.into_bytes(),
            ..HeaderValue::default()
        }),
        append_action: HeaderAppendAction::OverwriteIfExistsOrAdd as i32,
        ..HeaderValueOption::default()
    }
}

/// A local reply from Envoy: `status` with a JSON body.
fn immediate(status: StatusCode, body: &Value, details: &str) -> ProcessingResponse {
    answer(Answer::ImmediateResponse(ImmediateResponse {
        status: Some(HttpStatus {
            code: i32::from(status.as_u16()),
        }),
        headers: Some(HeaderMutation {
            set_headers: vec![set_header("content-type", "application/json".into())],
            ..HeaderMutation::default()
        }),
        body: body.to_string().into_bytes(),
        details: details.into(),
        ..ImmediateResponse::default()
    }))
}

/// A local reply carrying one of the [§9.4](docs/http-api.md#s9-4) errors.
fn immediate_error(e: &ApiError) -> ProcessingResponse {
    let body = serde_json::json!({"error": e.name(), "message": e.message()});
    immediate(e.status(), &body, e.name())
}

/// A header of `h` (lower-case name), as text.
fn header(h: &HttpHeaders, name: &str) -> Option<String> {
    let map: &HeaderMap = h.headers.as_ref()?;
    map.headers
        .iter()
        .find(|v| v.key.eq_ignore_ascii_case(name))
        .map(|v| {
            if v.raw_value.is_empty() {
                v.value.clone()
            } else {
                String::from_utf8_lossy(&v.raw_value).into_owned()
            }
        })
}

/// The content coding of a body, from every `content-encoding` line,
/// unless it is `identity` ([§12.4](docs/gateways.md#s12-4)).
fn compressed(h: &HttpHeaders) -> Option<String> {
    let map: &HeaderMap = h.headers.as_ref()?;
    content_coding(
        map.headers
            .iter()
            .filter(|v| v.key.eq_ignore_ascii_case("content-encoding"))
            .map(|v| {
                if v.raw_value.is_empty() {
                    v.value.as_bytes()
                } else {
                    v.raw_value.as_slice()
                }
            }),
    )
}
