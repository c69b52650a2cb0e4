//! `POST /v1/evaluate/stream` ([§11.2](docs/streaming.md#s11-2)): cuts the request's text into
//! pieces, runs them through one stream session of one generation, and
//! sends its releases as server-sent events. Errors found before the stream
//! starts are the usual JSON errors; an event never holds text the session
//! did not release.
//!
//! The session runs on a blocking thread, holding the request's
//! concurrency slot: it pushes the pieces in batches and hands their
//! events, in chunks, to a channel of four that the response body drains
//! as the connection writes. When the channel stays full for a moment (the
//! reader is behind), the session stops: it gives its caches and its slot
//! back and waits, off every thread, for the reader to take half the
//! channel; it resumes with a slot taken again. So a reader that does not
//! read costs no slot, no thread and no growing buffer: a few chunks, the
//! rest of its text and the session's own state. Such a reader loses its
//! stream (and its connection) after `stream.write_timeout_ms` without
//! taking a chunk, and the streams in flight hold [`STREAM_BODIES`] request
//! bodies' worth of memory at most: a new stream makes room by cutting the
//! ones that have waited longest for their readers, or gets a 503 when the
//! streams at work leave none. The slot is free as soon as the session
//! ends (its last events wait for the reader without it), and
//! `max_session_ms` bounds the CPU time of the session itself. The last
//! event is the session's own decision, with its engine time as
//! `latency_us`.

pub(crate) mod registry;

use crate::engine::{Decision, Normalize, OwnedStreamSession, Releases, Severity, StreamOptions};
use crate::request::type_name;
use crate::server::audit::{settle, At};
use crate::server::http::{ApiError, CloseConnection, EvaluateBody};
use crate::server::monitor::{is_monitored, permit_view, Monitored};
use crate::server::state::{AppState, AppStateRef};
use crate::server::work::{choose, off_workers, serving, Slot};
use axum::body::{Body, Bytes};
use axum::extract::{Extension, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Handle;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, Notify, OwnedSemaphorePermit};
use tokio::time::Instant;

/// Default piece size, in code points.
pub const DEFAULT_CHUNK_SIZE: usize = 16;
/// Chunks of events buffered between the session and the connection:
/// what a reader that does not read makes the server hold, beyond its text.
const EVENT_BUFFER: usize = 4;
/// Events go to the connection in chunks of about this many bytes (or one
/// larger event): one wake-up of the connection's task for dozens of
/// events, where one each cost the server more in task switches than its
/// sessions spent (512 KiB in pieces of 16 code points: 32k events).
const CHUNK_BYTES: usize = 16 * 1024;
/// Room a waiting stream waits for in the channel before it goes on (so
/// that a slow reader does not wake it for each chunk).
const ROOM: usize = EVENT_BUFFER / 2;
/// How long a stream whose reader is behind waits with its slot and caches
/// before it parks: a reader that keeps up makes room in far less.
const KEEP_UP: Duration = Duration::from_millis(10);
/// Pieces pushed at once ([`OwnedStreamSession::push_many`]: one
/// engine-time measurement for them all), and at most this much text. The
/// events are built after the batch, so the engine's caches stay warm
/// through it (512 KiB in pieces of 16 code points, with events sent one by
/// one: 14.6 ms of engine time in batches of 32, 7.9 ms in batches of 256).
/// Their events wait in the job until the channel takes them.
const BATCH: usize = 256;
const BATCH_BYTES: usize = 4096;
/// The streams in flight hold at most this many `limits.max_body_bytes` in
/// all (texts still to push, held text, sessions, events): a new stream
/// cuts those that wait longest for their readers to make room, and gets a
/// 503 when the streams at work leave none.
pub const STREAM_BODIES: usize = 32;
/// What the HTTP/1 connection buffers of a response its socket does not
/// take (hyper's default `max_buf_size`, 8 KiB + 400 KiB): counted for a
/// stream whose reader is behind, as its memory is the stream's.
const WRITE_BUFFER: usize = 8192 + 4096 * 100;
/// What a waiting session holds besides its text and events: its
/// liveness caches and state (measured: 11–64 KiB for the example pack).
const SESSION_BYTES: usize = 64 * 1024;

/// The stream options of a request body, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StreamRequest {
    chunk_size: usize,
    opts: StreamOptions,
}

/// Largest `chunk_size` and `lookahead_chars` (a body holds at most 1 MiB).
pub const MAX_STREAM_OPTION: u64 = 1 << 20;

fn uint_field(obj: &Map<String, Value>, key: &str, min: u64) -> Result<Option<usize>, String> {
    let max = MAX_STREAM_OPTION;
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        // JSON has one number type: 16.0 is the integer 16 (as JSON Schema says).
        Some(Value::Number(n)) => match n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 2f64.powi(53))
                .map(|f| f as u64)
        }) {
            Some(v) if (min..=max).contains(&v) => {
                Ok(Some(usize::try_from(v).unwrap_or(usize::MAX)))
            }
            _ => Err(format!("`{key}` must be an integer from {min} to {max}")),
        },
        Some(other) => Err(format!(
            "`{key}` must be an integer from {min} to {max}, not {}",
            type_name(other)
        )),
    }
}

fn stream_request(
    obj: &Map<String, Value>,
    max_holdback_chars: usize,
    normalize: Normalize,
) -> Result<StreamRequest, String> {
    let chunk_size = uint_field(obj, "chunk_size", 1)?.unwrap_or(DEFAULT_CHUNK_SIZE);
    let lookahead_chars = uint_field(obj, "lookahead_chars", 0)?.unwrap_or(0);
    let block_on_fatal = match obj.get("block_on_fatal") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(format!(
                "`block_on_fatal` must be a boolean, not {}",
                type_name(other)
            ))
        }
    };
    Ok(StreamRequest {
        chunk_size,
        opts: StreamOptions {
            block_on_fatal,
            lookahead_chars,
            max_holdback_chars,
            normalize,
            ..StreamOptions::default()
        },
    })
}

/// The handler of `POST /v1/evaluate/stream`.
pub(crate) async fn evaluate_stream(
    State(state): State<AppStateRef>,
    slot: Option<Extension<Slot>>,
    closer: Option<Extension<CloseConnection>>,
    headers: axum::http::HeaderMap,
    body: EvaluateBody,
) -> Result<Response, ApiError> {
    let normalize = body.request.normalize.unwrap_or(state.config.normalize);
    let mut request = stream_request(&body.rest, state.config.max_holdback_chars, normalize)
        .map_err(ApiError::bad_request)?;
    request.opts.max_session_ms = state.config.max_session_ms;
    let text = body.request.text;
    let generation = serving(&state)?;
    let pack = choose(
        &generation,
        body.request.pack_id.as_deref(),
        state.config.default_pack.as_deref(),
    )?;
    if is_monitored(&state, &pack.pack_id, body.request.monitor) {
        let monitored = Monitoring {
            pack_id: pack.pack_id.clone(),
            text,
            chunk_size: request.chunk_size,
            normalize,
            request_id: crate::server::api::evaluate::request_id(&headers),
        };
        return monitored_stream(state, generation, monitored).await;
    }
    // The streams in flight hold a bounded memory: room is made by cutting
    // those that wait longest for their readers, else this one waits for
    // another time.
    let budget = STREAM_BODIES.saturating_mul(state.config.limits.max_body_bytes);
    let Some((id, cut)) = state
        .streams
        .admit(text.len().saturating_add(SESSION_BYTES), budget)
    else {
        return Err(ApiError::unavailable(
            "the streams in flight hold all the memory they may; retry later",
        ));
    };
    let ticket = Ticket {
        state: Arc::clone(&state),
        id,
    };
    // The session belongs to the generation it started with, whatever
    // reloads happen meanwhile (it holds its pack's engine).
    let job = Job {
        session: Some(pack.evaluator.stream_owned(request.opts)),
        pack_id: pack.pack_id.clone(),
        generation: generation.number,
        logged: LogContext {
            request_id: crate::server::api::evaluate::request_id(&headers),
            pack_sha256: pack.file_sha256.clone(),
            payload_hmac: state.payload_hmac(text.as_bytes()),
        },
        text,
        at: 0,
        consumed: 0,
        chunk_size: request.chunk_size,
        cuts: Vec::new(),
        released: Releases::default(),
        scratch: Vec::new(),
        index: 0,
        events: VecDeque::new(),
        state: Arc::clone(&state),
    };
    let (tx, rx) = mpsc::channel::<Event>(EVENT_BUFFER);
    let reader = Arc::new(Reader::default());
    let permit = slot.and_then(|Extension(s)| s.take());
    tokio::spawn(drive(
        job,
        permit,
        tx,
        Arc::clone(&reader),
        closer.map(|Extension(c)| c),
        (ticket, cut),
    ));
    // The reader that takes the last event ends the stream's hold on the
    // streams' memory at once: its driver may run only later, and a client
    // that sends its next stream right away must find the room it left.
    let taken = (rx, reader, state, id, false);
    let events =
        futures_util::stream::unfold(taken, |(mut rx, reader, state, id, ended)| async move {
            if ended {
                return None;
            }
            let (bytes, last) = rx.recv().await?;
            reader.took(bytes.len());
            if last {
                reader.finished.store(true, Ordering::Release);
                state.streams.remove(id);
            }
            Some((
                Ok::<Bytes, std::convert::Infallible>(bytes),
                (rx, reader, state, id, last),
            ))
        });
    Ok(event_stream(Body::from_stream(events)))
}

/// A 200 answer of server-sent events.
fn event_stream(body: Body) -> Response {
    let mut resp = body.into_response();
    *resp.status_mut() = StatusCode::OK;
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Proxies such as nginx would otherwise buffer the whole stream.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

/// A stream in monitor mode: what it needs once its pack is chosen.
struct Monitoring {
    pack_id: String,
    text: String,
    chunk_size: usize,
    normalize: Normalize,
    request_id: Option<String>,
}

/// A stream in monitor mode ([§19](docs/guides/auditing.md#s19)): the whole text is
/// decided at once (a session decides the same, [§11.1](docs/streaming.md#s11-1)), counted and
/// logged; the events release it unchanged in pieces of `chunk_size`
/// code points, and `done` is a permit carrying `monitored`. Its events
/// are as large as the text: they are written as one body, with the
/// evaluation, off the async workers.
async fn monitored_stream(
    state: AppStateRef,
    generation: Arc<crate::server::generation::Generation>,
    m: Monitoring,
) -> Result<Response, ApiError> {
    let bytes = m.text.len();
    let resp = off_workers(bytes, move || {
        let pack = choose(&generation, Some(&m.pack_id), None)?;
        let d = pack.evaluator.evaluate_with(&m.text, m.normalize);
        state.metrics.observe_decision(&d);
        state.metrics.observe_monitored(&d);
        let at = At::new(
            "/v1/evaluate/stream",
            m.request_id.as_deref(),
            generation.number,
            pack,
        )
        .monitored(true);
        let logged = state.log_decision(&d, &at, m.text.as_bytes());
        let mut body = Vec::with_capacity(bytes.saturating_mul(2) + 256);
        let (mut rest, mut index, mut consumed) = (m.text.as_str(), 0, 0);
        while !rest.is_empty() {
            let (cut, n) = match rest.char_indices().nth(m.chunk_size) {
                Some((i, _)) => (i, m.chunk_size),
                None => (rest.len(), rest.chars().count()),
            };
            consumed += n;
            body.extend_from_slice(&release_event(index, consumed, &rest[..cut], false));
            index += 1;
            rest = &rest[cut..];
        }
        let (view, monitored) = permit_view(&d, "");
        body.extend_from_slice(&done_event_of(&view, generation.number, Some(monitored)));
        Ok(logged.attach(event_stream(Body::from(body))))
    })
    .await?;
    settle(resp).await
}

/// One event for the connection, and whether it is the last.
type Event = (Bytes, bool);

/// What the response body tells the session's driver: bytes of events
/// queued and not yet taken, and a wake-up each time it takes one.
#[derive(Debug, Default)]
struct Reader {
    queued: AtomicUsize,
    /// Bytes of events taken so far.
    taken: AtomicUsize,
    took: Notify,
    /// Set once the reader took the last event: the stream is over for it.
    finished: AtomicBool,
}

impl Reader {
    fn queue(&self, bytes: usize) {
        self.queued.fetch_add(bytes, Ordering::AcqRel);
    }

    fn took(&self, bytes: usize) {
        self.taken.fetch_add(bytes, Ordering::AcqRel);
        let _ = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| {
                Some(q.saturating_sub(bytes))
            });
        self.took.notify_one();
    }
}

/// Takes a stream out of [`registry::Streams`] when its driver ends, however it ends.
struct Ticket {
    state: Arc<AppState>,
    id: u64,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.state.streams.remove(self.id);
    }
}

/// A stream's decision log context, taken when it starts (its text is
/// gone by the time it decides).
struct LogContext {
    request_id: Option<String>,
    pack_sha256: String,
    payload_hmac: Option<String>,
}

/// One stream's session and what it still has to push, between the
/// bursts of work of [`Job::burst`].
struct Job {
    /// `None` once it has ended (its caches went back to the engine).
    session: Option<OwnedStreamSession>,
    pack_id: String,
    generation: u64,
    /// What the decision's log line says beside the decision.
    logged: LogContext,
    text: String,
    /// Byte offset of the next piece in `text`.
    at: usize,
    /// Code points pushed so far.
    consumed: usize,
    chunk_size: usize,
    /// Reused by each batch: the pieces' ends (in the rest of the text)
    /// and code points pushed after each, and their releases.
    cuts: Vec<(usize, usize)>,
    released: Releases,
    /// One event as it is written, before it joins its chunk (reused: an
    /// event a push costs no allocation).
    scratch: Vec<u8>,
    /// `chunk_index` of the next event.
    index: usize,
    /// Events the channel had no room for yet (the finish's release and
    /// the last event can come together).
    events: VecDeque<Event>,
    state: Arc<AppState>,
}

/// Why a burst of work stopped.
#[derive(Debug, PartialEq, Eq)]
enum Burst {
    /// The channel is full: the reader is behind.
    Full,
    /// The session ended and every event was queued.
    Done,
    /// The response body is gone (the client left).
    Gone,
}

impl Job {
    /// Pushes pieces and queues their events until the channel stays full
    /// for [`KEEP_UP`] or the session has ended (runs on a blocking thread:
    /// a reader that keeps up is waited for here, on a thread whose caches
    /// are warm, rather than in a new burst).
    fn burst(&mut self, tx: &mpsc::Sender<Event>, reader: &Reader, rt: &Handle) -> Burst {
        loop {
            while !self.events.is_empty() {
                match tx.try_reserve() {
                    Ok(room) => {
                        let chunk = self.chunk();
                        reader.queue(chunk.0.len());
                        room.send(chunk);
                    }
                    Err(TrySendError::Full(())) => {
                        let soon = Instant::now() + KEEP_UP;
                        if !rt.block_on(wait_for_room(reader, tx, soon, None)) {
                            return Burst::Full;
                        }
                    }
                    Err(TrySendError::Closed(())) => return Burst::Gone,
                }
            }
            let Some(mut session) = self.session.take() else {
                return Burst::Done;
            };
            if self.at == self.text.len() {
                let was_blocked = session.blocked().is_some();
                let released = session.finish();
                if session.blocked().is_some() && !was_blocked {
                    let event = blocked_event(&session, self.index, self.consumed);
                    self.events.push_back((event, false));
                } else if !released.text.is_empty() {
                    let event =
                        release_event(self.index, self.consumed, &released.text, released.redacted);
                    self.events.push_back((event, false));
                }
                let last = self.done(session);
                self.events.extend(last);
            } else {
                self.step(&mut session);
                self.session = Some(session);
            }
        }
    }

    /// The next events, about [`CHUNK_BYTES`] of them (at least one), as
    /// one chunk; whether it holds the last.
    fn chunk(&mut self) -> Event {
        let mut take = 0;
        let mut bytes = 0;
        for (e, _) in &self.events {
            if take > 0 && bytes + e.len() > CHUNK_BYTES {
                break;
            }
            bytes += e.len();
            take += 1;
        }
        if take == 1 {
            return self.events.pop_front().unwrap_or_default();
        }
        let mut out = Vec::with_capacity(bytes);
        let mut last = false;
        for (e, l) in self.events.drain(..take) {
            out.extend_from_slice(&e);
            last |= l;
        }
        (Bytes::from(out), last)
    }

    /// Up to [`BATCH`] pushes, and their events.
    fn step(&mut self, session: &mut OwnedStreamSession) {
        let rest = &self.text[self.at..];
        if session.blocked().is_some() {
            // A blocked session releases nothing more, but judges the rest
            // of the text for the decision: in one piece, the cheapest
            // (through `push_many`, whose engine time is exact).
            self.at = self.text.len();
            self.released.clear();
            session.push_many([rest], &mut self.released);
            return;
        }
        // The pieces' ends and code points; `consumed` counts code points
        // pushed when each event is produced.
        self.cuts.clear();
        let (mut end, mut chars) = (0, self.consumed);
        while end < rest.len() && end < BATCH_BYTES && self.cuts.len() < BATCH {
            let piece = &rest[end..];
            let (cut, n) = match piece.char_indices().nth(self.chunk_size) {
                Some((i, _)) => (i, self.chunk_size),
                None => (piece.len(), piece.chars().count()),
            };
            end += cut;
            chars += n;
            self.cuts.push((end, chars));
        }
        let mut start = 0;
        let pieces = self.cuts.iter().map(|&(end, _)| {
            let piece = &rest[start..end];
            start = end;
            piece
        });
        self.released.clear();
        let pushed = session.push_many(pieces, &mut self.released);
        let Some(&(last, _)) = pushed.checked_sub(1).and_then(|k| self.cuts.get(k)) else {
            return;
        };
        self.at += last;
        let blocked_at = session.blocked().map(|_| pushed - 1);
        // The batch's events are gathered into chunks of about
        // [`CHUNK_BYTES`] (the connection's unit) as they are written, each
        // written into one reused buffer first: built one by one, each in
        // its own allocation, then copied into chunks and freed (32k of
        // them for 512 KiB in pieces of 16 code points), they churned the
        // allocator and the caches the next batch runs on.
        let mut out: Vec<u8> = Vec::new();
        for (k, (text, redacted)) in self.released.iter().enumerate() {
            let consumed = self.cuts[k].1;
            self.scratch.clear();
            if blocked_at == Some(k) {
                let event = blocked_event(session, self.index, consumed);
                self.scratch.extend_from_slice(&event);
            } else if text.is_empty() {
                continue;
            } else {
                write_release_event(&mut self.scratch, self.index, consumed, text, redacted);
            }
            self.index += 1;
            if !out.is_empty() && out.len() + self.scratch.len() > CHUNK_BYTES {
                self.events
                    .push_back((Bytes::from(std::mem::take(&mut out)), false));
            }
            if self.scratch.len() >= CHUNK_BYTES {
                // A chunk of its own (a large piece's release): handed over,
                // not copied.
                let mut big = std::mem::take(&mut self.scratch);
                big.shrink_to_fit();
                self.events.push_back((Bytes::from(big), false));
                continue;
            }
            if out.is_empty() {
                out.reserve_exact(CHUNK_BYTES);
            }
            out.extend_from_slice(&self.scratch);
        }
        if !out.is_empty() {
            // A chunk holds what it counts for (a waiting stream's memory
            // is its chunks' lengths), not the room it was given.
            out.shrink_to_fit();
            self.events.push_back((Bytes::from(out), false));
        }
        self.consumed = self.cuts[pushed - 1].1;
    }

    /// Ends the session: its decision as the last event, the metrics, and
    /// the session and text dropped (the caches go back to the engine).
    fn done(&mut self, session: OwnedStreamSession) -> Option<Event> {
        self.text = String::new();
        self.at = 0;
        let decision = session.decision()?;
        self.state.metrics.observe_decision(&decision);
        let at = At {
            route: "/v1/evaluate/stream",
            request_id: self.logged.request_id.as_deref(),
            generation: self.generation,
            pack_sha256: &self.logged.pack_sha256,
            monitored: false,
        };
        self.state
            .log_decision_after(&decision, &at, self.logged.payload_hmac.take());
        self.state
            .metrics
            .observe_stream_session(&self.pack_id, session.blocked().is_some());
        Some((done_event(&decision, self.generation), true))
    }

    /// Bytes this stream holds while it waits: the text still to push, the
    /// session's held text and state, the events not yet taken, and those
    /// taken that the connection's write buffer may still hold.
    fn held_bytes(&self, reader: &Reader) -> usize {
        let session = self
            .session
            .as_ref()
            .map_or(0, |s| s.held_chars().saturating_mul(4) + SESSION_BYTES);
        (self.text.capacity() - self.at)
            .saturating_add(session)
            .saturating_add(reader.queued.load(Ordering::Acquire))
            .saturating_add(reader.taken.load(Ordering::Acquire).min(WRITE_BUFFER))
            .saturating_add(self.events.iter().map(|e| e.0.len()).sum::<usize>())
    }

    /// Before a wait: the session gives its caches back, and the text
    /// already pushed is dropped once it is most of the text.
    fn park(&mut self) {
        if let Some(s) = self.session.as_mut() {
            s.park();
        }
        if self.at > 0 && self.at >= self.text.len() / 2 {
            self.text.drain(..self.at);
            self.text.shrink_to_fit();
            self.at = 0;
        }
    }
}

/// A release event (fields in the order of [§11.2](docs/streaming.md#s11-2)).
#[derive(Serialize)]
struct ReleaseEvent<'a> {
    chunk_index: usize,
    consumed: usize,
    text: &'a str,
    redacted: bool,
    blocked: bool,
    reason: Option<&'a str>,
}

/// The blocked event.
#[derive(Serialize)]
struct BlockedEvent<'a> {
    chunk_index: usize,
    consumed: usize,
    text: &'a str,
    redacted: bool,
    blocked: bool,
    reason: &'a str,
    action: &'a str,
    triggers: Vec<EventTrigger<'a>>,
}

#[derive(Serialize)]
struct EventTrigger<'a> {
    rule_id: &'a str,
    severity: &'a str,
}

/// The last event: the decision of the whole text.
#[derive(Serialize)]
struct DoneEvent<'a> {
    done: bool,
    action: &'a str,
    severity: Option<&'a str>,
    reason: Option<&'a str>,
    receipt_hash: &'a str,
    pack_id: &'a str,
    generation: u64,
    latency_us: f64,
    /// [§15](docs/evasion.md#s15): present (true) when the evasion view differed from the text.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    normalized: bool,
    /// Monitor mode ([§19](docs/guides/auditing.md#s19)): what was decided.
    #[serde(skip_serializing_if = "Option::is_none")]
    monitored: Option<Monitored<'a>>,
}

fn event(value: &impl Serialize) -> Bytes {
    let mut out = Vec::new();
    write_event(&mut out, value);
    Bytes::from(out)
}

/// Appends `value`'s event to `out`.
fn write_event(out: &mut Vec<u8>, value: &impl Serialize) {
    let at = out.len();
    out.extend_from_slice(b"data: ");
    // These structs of strings and numbers always serialise into a vector;
    // were one not to, its event is left out whole rather than cut.
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.truncate(at);
        return;
    }
    out.extend_from_slice(b"\n\n");
}

/// The event of a push or finish that released text.
fn release_event(index: usize, consumed: usize, text: &str, redacted: bool) -> Bytes {
    let mut out = Vec::new();
    write_release_event(&mut out, index, consumed, text, redacted);
    Bytes::from(out)
}

/// Appends [`release_event`]'s event to `out`.
fn write_release_event(
    out: &mut Vec<u8>,
    index: usize,
    consumed: usize,
    text: &str,
    redacted: bool,
) {
    write_event(
        out,
        &ReleaseEvent {
            chunk_index: index,
            consumed,
            text,
            redacted,
            blocked: false,
            reason: None,
        },
    );
}

/// The event of the push or finish at which the session blocked.
fn blocked_event(session: &OwnedStreamSession, index: usize, consumed: usize) -> Bytes {
    let (reason, action, triggers) = match session.blocked() {
        Some(b) => (b.reason.as_str(), b.action.as_str(), b.triggers.as_slice()),
        None => ("", "", &[][..]),
    };
    event(&BlockedEvent {
        chunk_index: index,
        consumed,
        text: "",
        redacted: false,
        blocked: true,
        reason,
        action,
        triggers: triggers
            .iter()
            .map(|(rule_id, severity)| EventTrigger {
                rule_id,
                severity: severity.as_str(),
            })
            .collect(),
    })
}

/// The last event: the session's decision of the whole text.
fn done_event(d: &Decision<'_>, generation: u64) -> Bytes {
    done_event_of(d, generation, None)
}

/// The last event, with what a monitored decision decided.
fn done_event_of(d: &Decision<'_>, generation: u64, monitored: Option<Monitored<'_>>) -> Bytes {
    event(&DoneEvent {
        done: true,
        action: d.action,
        severity: d.severity.map(Severity::as_str),
        reason: d.reason,
        receipt_hash: &d.receipt_hash,
        pack_id: d.pack_id,
        generation,
        latency_us: d.latency_us,
        normalized: d.normalized,
        monitored,
    })
}

/// How a wait for the reader ended.
enum Waited {
    /// It took an event: there is room.
    Took,
    /// It took none for `stream.write_timeout_ms`, or the stream was cut
    /// to make room for others.
    Cut,
}

/// Waits for the reader to take an event, at most until `deadline`, or
/// until `cut` says the stream must go.
async fn wait_for_reader(reader: &Reader, deadline: Instant, cut: Option<&Notify>) -> Waited {
    let cut = async {
        match cut {
            Some(c) => c.notified().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = reader.took.notified() => Waited::Took,
        () = tokio::time::sleep_until(deadline) => Waited::Cut,
        () = cut => Waited::Cut,
    }
}

/// Waits until the channel has room for half its events (a wake-up a
/// taken event), or until the reader takes nothing up to `deadline` (pushed
/// back by each event taken) or `cut` says the stream must go; whether
/// there is room.
async fn wait_for_room(
    reader: &Reader,
    tx: &mpsc::Sender<Event>,
    mut deadline: Instant,
    cut: Option<&Notify>,
) -> bool {
    let patience = deadline.saturating_duration_since(Instant::now());
    while tx.capacity() < ROOM {
        match wait_for_reader(reader, deadline, cut).await {
            Waited::Took => deadline = Instant::now() + patience,
            Waited::Cut => return false,
        }
    }
    true
}

/// Runs a stream to its end: bursts of session work on a blocking thread,
/// each with a concurrency slot, and waits for the reader in between
/// without one. Cuts the stream (closing its connection) when the reader
/// takes nothing for `stream.write_timeout_ms`, when another stream needs
/// its room while it waits, or when no slot frees up within
/// `request_timeout_ms`.
async fn drive(
    mut job: Job,
    mut permit: Option<OwnedSemaphorePermit>,
    tx: mpsc::Sender<Event>,
    reader: Arc<Reader>,
    closer: Option<CloseConnection>,
    (ticket, cut_me): (Ticket, Arc<Notify>),
) {
    let state = Arc::clone(&job.state);
    let streams = &state.streams;
    let id = ticket.id;
    let write_timeout = Duration::from_millis(state.config.stream_write_timeout_ms);
    let budget = STREAM_BODIES.saturating_mul(state.config.limits.max_body_bytes);
    let cut = |closer: Option<CloseConnection>| {
        // A reader that took the last event keeps its connection.
        if reader.finished.load(Ordering::Acquire) {
            return;
        }
        if let Some(c) = closer {
            c.close();
        }
    };
    loop {
        if job.session.is_some() && permit.is_none() {
            let patience = Duration::from_millis(state.config.limits.request_timeout_ms);
            match tokio::time::timeout(patience, Arc::clone(&state.slots).acquire_owned()).await {
                Ok(Ok(p)) => permit = Some(p),
                _ => return cut(closer),
            }
        }
        let (tx2, reader2) = (tx.clone(), Arc::clone(&reader));
        let rt = Handle::current();
        let worked = tokio::task::spawn_blocking(move || {
            let burst = job.burst(&tx2, &reader2, &rt);
            (job, burst)
        })
        .await;
        let Ok((j, burst)) = worked else {
            // The session panicked (a bug): end the stream, fail closed.
            return cut(closer);
        };
        job = j;
        if job.session.is_none() {
            // The session has ended: its slot is free, whatever the reader does.
            permit = None;
        }
        match burst {
            Burst::Gone => return,
            Burst::Done => break,
            Burst::Full => {}
        }
        // The reader is behind (the burst waited for it a moment): wait
        // without the slot, the caches or a thread, and be the first to go
        // if another stream needs room.
        permit = None;
        job.park();
        if !streams.set(id, job.held_bytes(&reader), true, budget) {
            return cut(closer);
        }
        let room = wait_for_room(&reader, &tx, Instant::now() + write_timeout, Some(&cut_me)).await;
        if !room || !streams.set(id, job.held_bytes(&reader), false, budget) {
            return cut(closer);
        }
    }
    // Every event is queued: the reader has `stream.write_timeout_ms` to
    // take each of the last ones, and the stream holds only them.
    drop(permit);
    if !streams.set(id, job.held_bytes(&reader), true, budget) {
        return cut(closer);
    }
    let mut deadline = Instant::now() + write_timeout;
    loop {
        tokio::select! {
            () = tx.closed() => return,
            w = wait_for_reader(&reader, deadline, Some(&cut_me)) => match w {
                Waited::Took => deadline = Instant::now() + write_timeout,
                Waited::Cut => return cut(closer),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::registry::Streams;
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn options_default_and_validate() {
        let r = stream_request(&obj(json!({"text": "x"})), 9, Normalize::None).unwrap();
        assert_eq!(r.chunk_size, 16);
        assert_eq!(
            r.opts,
            StreamOptions {
                block_on_fatal: true,
                lookahead_chars: 0,
                max_holdback_chars: 9,
                ..StreamOptions::default()
            }
        );
        let r = stream_request(
            &obj(json!({"chunk_size": 4, "block_on_fatal": false, "lookahead_chars": 28})),
            9,
            Normalize::None,
        )
        .unwrap();
        assert_eq!(
            (r.chunk_size, r.opts.block_on_fatal, r.opts.lookahead_chars),
            (4, false, 28)
        );
        let r = stream_request(
            &obj(json!({"chunk_size": 4.0, "block_on_fatal": null, "lookahead_chars": null})),
            9,
            Normalize::None,
        )
        .unwrap();
        assert_eq!(
            (r.chunk_size, r.opts.block_on_fatal, r.opts.lookahead_chars),
            (4, true, 0)
        );
        let r = stream_request(&obj(json!({})), 9, Normalize::Evasion).unwrap();
        assert_eq!(r.opts.normalize, Normalize::Evasion);
        for (body, msg) in [
            (
                json!({"chunk_size": 0}),
                "`chunk_size` must be an integer from 1 to 1048576",
            ),
            (
                json!({"chunk_size": -3}),
                "`chunk_size` must be an integer from 1 to 1048576",
            ),
            (
                json!({"chunk_size": 1.5}),
                "`chunk_size` must be an integer from 1 to 1048576",
            ),
            (
                json!({"lookahead_chars": 36_893_488_147_419_103_233.0_f64}),
                "`lookahead_chars` must be an integer from 0 to 1048576",
            ),
            (
                json!({"chunk_size": 1_048_577}),
                "`chunk_size` must be an integer from 1 to 1048576",
            ),
            (
                json!({"chunk_size": 0.0}),
                "`chunk_size` must be an integer from 1 to 1048576",
            ),
            (
                json!({"chunk_size": "4"}),
                "`chunk_size` must be an integer from 1 to 1048576, not a string",
            ),
            (
                json!({"lookahead_chars": -1}),
                "`lookahead_chars` must be an integer from 0 to 1048576",
            ),
            (
                json!({"block_on_fatal": "yes"}),
                "`block_on_fatal` must be a boolean, not a string",
            ),
        ] {
            assert_eq!(
                stream_request(&obj(body), 9, Normalize::None).unwrap_err(),
                msg
            );
        }
    }
    #[test]
    fn the_stream_that_waited_longest_is_cut_first_to_make_room() {
        let r = Streams::default();
        let notified = |n: &Notify| futures_util::FutureExt::now_or_never(n.notified()).is_some();
        let (a, cut_a) = r.admit(30, 100).unwrap();
        let (b, cut_b) = r.admit(30, 100).unwrap();
        let (c, cut_c) = r.admit(30, 100).unwrap();
        assert_eq!(r.total(), 90);
        // Streams at work are never cut: no room for 20 more.
        assert!(r.admit(20, 100).is_none());
        // b then a wait for their readers: a new stream cuts b, which
        // waited longest, and only b.
        assert!(r.set(b, 30, true, 100));
        assert!(r.set(a, 30, true, 100));
        let (d, cut_d) = r.admit(20, 100).unwrap();
        assert!(notified(&cut_b));
        assert!(!notified(&cut_a) && !notified(&cut_c) && !notified(&cut_d));
        assert_eq!(r.total(), 80);
        // A cut stream is gone: it cannot wait or work again.
        assert!(!r.set(b, 10, false, 100));
        // A stream that works again is not cut; growing while it waits
        // past the budget cuts the longest-waiting, itself if need be.
        assert!(r.set(a, 30, false, 100));
        assert!(!r.set(c, 60, true, 100));
        assert!(notified(&cut_c));
        assert_eq!(r.total(), 50);
        r.remove(a);
        r.remove(c);
        r.remove(d);
        assert_eq!(r.total(), 0);
    }
}
