//! `POST /v1/evaluate/stream` (SPEC §11.2): cuts the request's text into
//! pieces, runs them through one stream session of one generation, and
//! sends its releases as server-sent events. Errors found before the stream
//! starts are the usual JSON errors; an event never holds text the session
//! did not release.
//!
//! The session runs on a blocking thread, holding the request's
//! concurrency slot, and hands each event to a small channel that the
//! response body drains as the connection writes. When the channel is
//! full (the reader is behind), the session stops: it gives its caches and
//! its slot back and waits, off every thread, for the reader to take an
//! event; it resumes with a slot taken again. So a reader that does not
//! read costs no slot, no thread and no growing buffer: a few events, the
//! rest of its text and the session's own state. Such a reader loses its
//! stream after `stream.write_timeout_ms` without taking an event, and
//! the streams waiting for their readers hold [`PARKED_BODIES`] request
//! bodies' worth of memory at most: past it the one that has waited
//! longest loses its stream. The slot is free as soon as the session ends
//! (its last events wait for the reader without it), and `max_session_ms`
//! bounds the engine time of the session itself. The last event is the
//! session's own decision, with its engine time as `latency_us`.

use super::listener::CloseConnection;
use super::routes::{choose, serving, ApiError, AppStateRef, EvaluateBody, Slot};
use super::AppState;
use crate::engine::{Decision, Normalize, OwnedStreamSession, Released, Severity, StreamOptions};
use crate::request::type_name;
use axum::body::{Body, Bytes};
use axum::extract::{Extension, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, Notify, OwnedSemaphorePermit};
use tokio::time::Instant;

/// Default piece size, in code points.
pub const DEFAULT_CHUNK_SIZE: usize = 16;
/// Events buffered between the session and the connection: what a
/// reader that does not read makes the server hold, beyond its text.
const EVENT_BUFFER: usize = 32;
/// Pieces pushed at once ([`OwnedStreamSession::push_many`]: one engine-time
/// measurement for them all); their events wait in the job until the
/// channel takes them.
const BATCH: usize = 32;
/// The streams waiting for their readers hold at most this many
/// `limits.max_body_bytes` in all (texts still to push, held text, events).
pub const PARKED_BODIES: usize = 64;
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
pub(super) async fn evaluate_stream(
    State(state): State<AppStateRef>,
    slot: Option<Extension<Slot>>,
    closer: Option<Extension<CloseConnection>>,
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
    // The session belongs to the generation it started with, whatever
    // reloads happen meanwhile (it holds its pack's engine).
    let job = Job {
        session: Some(pack.evaluator.stream_owned(request.opts)),
        pack_id: pack.pack_id.clone(),
        generation: generation.number,
        text,
        at: 0,
        consumed: 0,
        chunk_size: request.chunk_size,
        cuts: Vec::with_capacity(BATCH),
        released: Vec::with_capacity(BATCH),
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
    ));
    let events =
        futures_util::stream::unfold((rx, reader, false), |(mut rx, reader, ended)| async move {
            if ended {
                return None;
            }
            let (bytes, last) = rx.recv().await?;
            reader.took(bytes.len());
            Some((
                Ok::<Bytes, std::convert::Infallible>(bytes),
                (rx, reader, last),
            ))
        });
    let mut resp = Body::from_stream(events).into_response();
    *resp.status_mut() = StatusCode::OK;
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Proxies such as nginx would otherwise buffer the whole stream.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(resp)
}

/// One event for the connection, and whether it is the last.
type Event = (Bytes, bool);

/// What the response body tells the session's driver: bytes of events
/// queued and not yet taken, and a wake-up each time it takes one.
#[derive(Debug, Default)]
struct Reader {
    queued: AtomicUsize,
    took: Notify,
}

impl Reader {
    fn queue(&self, bytes: usize) {
        self.queued.fetch_add(bytes, Ordering::AcqRel);
    }

    fn took(&self, bytes: usize) {
        let _ = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| {
                Some(q.saturating_sub(bytes))
            });
        self.took.notify_one();
    }
}

/// Streams waiting for their readers, by when they began to wait, and the
/// bytes they hold (see [`PARKED_BODIES`]).
#[derive(Debug, Default)]
pub(crate) struct Parked(Mutex<ParkedStreams>);

#[derive(Debug, Default)]
struct ParkedStreams {
    next: u64,
    total: usize,
    /// Wait number → (bytes held, what cuts the stream).
    waiting: BTreeMap<u64, (usize, Arc<Notify>)>,
}

impl Parked {
    /// Registers a stream that waits for its reader holding `bytes`; while
    /// the waiting streams hold more than `budget`, the one that has waited
    /// longest is cut (possibly this one). Returns its wait number and
    /// what tells it that it was cut.
    fn park(&self, bytes: usize, budget: usize) -> (u64, Arc<Notify>) {
        let mut p = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let id = p.next;
        p.next += 1;
        let cut = Arc::new(Notify::new());
        p.total += bytes;
        p.waiting.insert(id, (bytes, Arc::clone(&cut)));
        while p.total > budget {
            let Some((_, (b, oldest))) = p.waiting.pop_first() else {
                break;
            };
            p.total -= b;
            oldest.notify_one();
        }
        (id, cut)
    }

    /// The stream no longer waits (or was cut).
    fn unpark(&self, id: u64) {
        let mut p = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((b, _)) = p.waiting.remove(&id) {
            p.total -= b;
        }
    }

    /// Bytes held by the streams waiting for their readers.
    #[cfg(test)]
    fn total(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).total
    }
}

/// One stream's session and what it still has to push, between the
/// bursts of work of [`Job::burst`].
struct Job {
    /// `None` once it has ended (its caches went back to the engine).
    session: Option<OwnedStreamSession>,
    pack_id: String,
    generation: u64,
    text: String,
    /// Byte offset of the next piece in `text`.
    at: usize,
    /// Code points pushed so far.
    consumed: usize,
    chunk_size: usize,
    /// Reused by each batch: the pieces' ends (in the rest of the text)
    /// and code points pushed after each, and their releases.
    cuts: Vec<(usize, usize)>,
    released: Vec<Released>,
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
    /// Pushes pieces and queues their events until the channel is full or
    /// the session has ended (runs on a blocking thread).
    fn burst(&mut self, tx: &mpsc::Sender<Event>, reader: &Reader) -> Burst {
        loop {
            while let Some(event) = self.events.pop_front() {
                let len = event.0.len();
                match tx.try_send(event) {
                    Ok(()) => reader.queue(len),
                    Err(TrySendError::Full(event)) => {
                        self.events.push_front(event);
                        return Burst::Full;
                    }
                    Err(TrySendError::Closed(_)) => return Burst::Gone,
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
                    let event = release_event(self.index, self.consumed, &released);
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

    /// Up to [`BATCH`] pushes, and their events.
    fn step(&mut self, session: &mut OwnedStreamSession) {
        let rest = &self.text[self.at..];
        if session.blocked().is_some() {
            // A blocked session releases nothing more, but judges the rest
            // of the text for the decision: in one piece, the cheapest.
            self.at = self.text.len();
            session.push(rest);
            return;
        }
        // The pieces' ends and code points; `consumed` counts code points
        // pushed when each event is produced.
        self.cuts.clear();
        let (mut end, mut chars) = (0, self.consumed);
        while end < rest.len() && self.cuts.len() < BATCH {
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
        for (k, released) in self.released.iter().enumerate() {
            let consumed = self.cuts[k].1;
            let event = if blocked_at == Some(k) {
                blocked_event(session, self.index, consumed)
            } else if released.text.is_empty() {
                continue;
            } else {
                release_event(self.index, consumed, released)
            };
            self.index += 1;
            self.events.push_back((event, false));
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
        self.state
            .metrics
            .observe_stream_session(&self.pack_id, session.blocked().is_some());
        Some((done_event(&decision, self.generation), true))
    }

    /// Bytes this stream holds while it waits: the text still to push, the
    /// session's held text and state, and the events not yet taken.
    fn held_bytes(&self, reader: &Reader) -> usize {
        let session = self
            .session
            .as_ref()
            .map_or(0, |s| s.held_chars().saturating_mul(4) + SESSION_BYTES);
        (self.text.capacity() - self.at)
            .saturating_add(session)
            .saturating_add(reader.queued.load(Ordering::Acquire))
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

/// A release event (fields in the order of SPEC §11.2).
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
    /// SPEC §15: present (true) when the evasion view differed from the text.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    normalized: bool,
}

fn event(value: &impl Serialize) -> Bytes {
    let mut out = b"data: ".to_vec();
    // These structs of strings and numbers always serialise.
    out.extend(serde_json::to_vec(value).unwrap_or_default());
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// The event of a push or finish that released text.
fn release_event(index: usize, consumed: usize, released: &Released) -> Bytes {
    event(&ReleaseEvent {
        chunk_index: index,
        consumed,
        text: &released.text,
        redacted: released.redacted,
        blocked: false,
        reason: None,
    })
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

/// Runs a stream to its end: bursts of session work on a blocking thread,
/// each with a concurrency slot, and waits for the reader in between
/// without one. Cuts the stream (closing its connection) when the reader
/// takes nothing for `stream.write_timeout_ms`, when the waiting streams
/// hold too much, or when no slot frees up within `request_timeout_ms`.
async fn drive(
    mut job: Job,
    mut permit: Option<OwnedSemaphorePermit>,
    tx: mpsc::Sender<Event>,
    reader: Arc<Reader>,
    closer: Option<CloseConnection>,
) {
    let state = Arc::clone(&job.state);
    let write_timeout = Duration::from_millis(state.config.stream_write_timeout_ms);
    let budget = PARKED_BODIES.saturating_mul(state.config.limits.max_body_bytes);
    let cut = |closer: Option<CloseConnection>| {
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
        let worked = tokio::task::spawn_blocking(move || {
            let burst = job.burst(&tx2, &reader2);
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
        // The reader is behind: wait for it without the slot, the caches
        // or a thread.
        permit = None;
        job.park();
        let (id, cut_me) = state.parked.park(job.held_bytes(&reader), budget);
        let deadline = Instant::now() + write_timeout;
        let waited = loop {
            match wait_for_reader(&reader, deadline, Some(&cut_me)).await {
                Waited::Cut => break Waited::Cut,
                // A stale wake-up leaves the channel full: wait again.
                Waited::Took if tx.capacity() == 0 => {}
                Waited::Took => break Waited::Took,
            }
        };
        state.parked.unpark(id);
        if let Waited::Cut = waited {
            return cut(closer);
        }
    }
    // Every event is queued: the reader has `stream.write_timeout_ms` to
    // take each of the last ones.
    drop(permit);
    let mut deadline = Instant::now() + write_timeout;
    loop {
        tokio::select! {
            () = tx.closed() => return,
            w = wait_for_reader(&reader, deadline, None) => match w {
                Waited::Took => deadline = Instant::now() + write_timeout,
                Waited::Cut => return cut(closer),
            },
        }
    }
}

#[cfg(test)]
mod tests {
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
    fn the_stream_that_waited_longest_is_cut_first_past_the_budget() {
        let p = Parked::default();
        let (a, cut_a) = p.park(40, 100);
        let (b, cut_b) = p.park(40, 100);
        assert_eq!(p.total(), 80);
        // 120 > 100: the first to wait goes, the second stays.
        let (c, cut_c) = p.park(40, 100);
        assert_eq!(p.total(), 80);
        let notified = |n: &Notify| futures_util::FutureExt::now_or_never(n.notified()).is_some();
        assert!(notified(&cut_a));
        assert!(!notified(&cut_b) && !notified(&cut_c));
        // Unparking a cut stream changes nothing; the others go away.
        p.unpark(a);
        assert_eq!(p.total(), 80);
        p.unpark(b);
        p.unpark(c);
        assert_eq!(p.total(), 0);
        // A stream larger than the budget alone is cut at once.
        let (d, cut_d) = p.park(101, 100);
        assert!(notified(&cut_d));
        p.unpark(d);
        assert_eq!(p.total(), 0);
    }
}
