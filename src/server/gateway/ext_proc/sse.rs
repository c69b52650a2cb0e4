//! A streamed LLM reply (`text/event-stream`) rewritten as it passes through
//! Envoy ([§12.3](docs/gateways.md#s12-3)): every text field that arrives in pieces (OpenAI
//! `choices[].delta.content`, tool call arguments and completions `text`;
//! Anthropic `content_block_delta`; OpenAI responses `output_text` deltas)
//! goes through its own [§11](docs/streaming.md#s11) session, and an event carries only what that
//! session released. Events without such a field are judged whole. A FATAL
//! match (or a limit) ends the stream with `data: {"error": …}` and nothing
//! after it. Memory is bounded: one partial event of at most the body limit,
//! at most [`MAX_FIELDS`] sessions, each bounded by its hold-back limit.
//! It never logs, and an event never holds text no session released.

use crate::engine::{
    Evaluator, OwnedStreamSession, Severity, StreamOptions, HOLDBACK_ACTION, HOLDBACK_REASON,
};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// Most streamed text fields (choices, tool calls, content blocks) one reply
/// may have; beyond it the stream is refused (fail closed).
pub const MAX_FIELDS: usize = 256;

/// Longest string, in bytes, remembered as clean.
const CLEAN_CACHE_BYTES: usize = 128;
/// Most strings remembered as clean per stream.
const CLEAN_CACHE_ENTRIES: usize = 256;

/// Why a stream stopped: the refusing action and its reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The deciding action (`block_<id>`, a hard rule's, or the hold-back limit's).
    pub action: String,
    /// Its reason.
    pub reason: String,
}

/// The action of a streamed reply that is not UTF-8 text.
pub const UNREADABLE_ACTION: &str = "block_stream_unreadable";
/// Its reason.
pub const UNREADABLE_REASON: &str = "Streamed reply is not UTF-8 text";

impl Refusal {
    fn limit() -> Self {
        Self {
            action: HOLDBACK_ACTION.into(),
            reason: HOLDBACK_REASON.into(),
        }
    }

    fn unreadable() -> Self {
        Self {
            action: UNREADABLE_ACTION.into(),
            reason: UNREADABLE_REASON.into(),
        }
    }
}

/// One step of a path into an event's JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Key(&'static str),
    /// A key read from the event itself.
    Name(String),
    Idx(usize),
}

fn at<'v>(v: &'v mut Value, path: &[Seg]) -> Option<&'v mut Value> {
    path.iter().try_fold(v, |v, seg| match seg {
        Seg::Key(k) => v.get_mut(*k),
        Seg::Name(k) => v.get_mut(k.as_str()),
        Seg::Idx(i) => v.get_mut(*i),
    })
}

/// A streamed text field of an event: its session key and where it is.
struct Field {
    key: String,
    path: Vec<Seg>,
}

/// What an event asks of the sessions, found before any text is pushed.
#[derive(Default)]
struct Plan {
    fields: Vec<Field>,
    /// Sessions that end with this event, after its own text (OpenAI
    /// `finish_reason`): their rest joins the event's own field, or comes
    /// in an event of its own just before it.
    end_after: Vec<String>,
    /// Sessions that end before this event (Anthropic `content_block_stop`,
    /// responses `.done`, or all at `message_stop`).
    end_before: Before,
    /// The event names a field that had a delta template of its own kind
    /// (Anthropic's start block: later pieces come as deltas).
    template: Option<(Vec<String>, Value, Vec<Seg>)>,
}

fn string_at(v: &Value, path: &[Seg]) -> bool {
    let mut v = v;
    for seg in path {
        let next = match seg {
            Seg::Key(k) => v.get(*k),
            Seg::Name(k) => v.get(k.as_str()),
            Seg::Idx(i) => v.get(*i),
        };
        match next {
            Some(n) => v = n,
            None => return false,
        }
    }
    v.is_string()
}

fn index_of(v: &Value, key: &str, default: usize) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(default as u64)
}

/// Which sessions end before an event.
#[derive(Default)]
enum Before {
    #[default]
    Nothing,
    Some(Vec<String>),
    All,
}

/// Whether the session `key` is `k` or one of its fields (`c0` holds
/// `c0.content`, `c0.t1`, …; `a2` holds `a2.text`).
fn ends(k: &str, key: &str) -> bool {
    key.strip_prefix(k)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// The streamed text fields of an event, by format ([§12.3](docs/gateways.md#s12-3), [§12.4](docs/gateways.md#s12-4)).
/// Every string an event carries outside them is judged whole with the
/// event, so an event of a kind not named here never passes unjudged text.
///
/// - OpenAI chat: every string field of `choices[].delta` (`content`,
///   `refusal`, `reasoning_content`, …, but `role`), `delta.function_call.
///   arguments`, `delta.tool_calls[].function.arguments` and `delta.audio.
///   transcript`; completions `choices[].text`. `finish_reason` ends the
///   choice's sessions.
/// - Anthropic: every string field of a `content_block_delta`'s `delta`
///   (`text`, `partial_json`, `thinking`, `signature`, …, but `type`) and a
///   `content_block_start`'s `text` or `thinking`; `content_block_stop` ends
///   the block's sessions, `message_stop` all of them.
/// - OpenAI responses: every `response.*.delta` event's string `delta`
///   (output and refusal text, function, custom tool and MCP call arguments,
///   reasoning and summaries, code, transcripts, and kinds to come); the
///   matching `.done` event ends its session, `response.completed`,
///   `.incomplete` and `.failed` all of them.
fn plan(v: &Value) -> Plan {
    let mut p = Plan::default();
    let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
    if let Some(choices) = v.get("choices").and_then(Value::as_array) {
        for (pos, c) in choices.iter().enumerate() {
            let idx = index_of(c, "index", pos);
            let base = [Seg::Key("choices"), Seg::Idx(pos)];
            let mut push = |key: String, tail: &[Seg]| {
                let path: Vec<Seg> = base.iter().cloned().chain(tail.iter().cloned()).collect();
                if string_at(v, &path) {
                    p.fields.push(Field { key, path });
                }
            };
            push(format!("c{idx}.text"), &[Seg::Key("text")]);
            if let Some(delta) = c.get("delta").and_then(Value::as_object) {
                for (name, field) in delta {
                    if field.is_string() && name != "role" {
                        push(
                            format!("c{idx}.{name}"),
                            &[Seg::Key("delta"), Seg::Name(name.clone())],
                        );
                    }
                }
                push(
                    format!("c{idx}.function_call"),
                    &[
                        Seg::Key("delta"),
                        Seg::Key("function_call"),
                        Seg::Key("arguments"),
                    ],
                );
                push(
                    format!("c{idx}.audio"),
                    &[Seg::Key("delta"), Seg::Key("audio"), Seg::Key("transcript")],
                );
                let calls = delta.get("tool_calls").and_then(Value::as_array);
                for (j, call) in calls.into_iter().flatten().enumerate() {
                    let t = index_of(call, "index", j);
                    push(
                        format!("c{idx}.t{t}"),
                        &[
                            Seg::Key("delta"),
                            Seg::Key("tool_calls"),
                            Seg::Idx(j),
                            Seg::Key("function"),
                            Seg::Key("arguments"),
                        ],
                    );
                }
            }
            if c.get("finish_reason").is_some_and(|f| !f.is_null()) {
                p.end_after.push(format!("c{idx}"));
            }
        }
        return p;
    }
    let block = || format!("a{}", index_of(v, "index", 0));
    match kind {
        "content_block_delta" => {
            if let Some(delta) = v.get("delta").and_then(Value::as_object) {
                for (name, field) in delta {
                    if field.is_string() && name != "type" {
                        p.fields.push(Field {
                            key: format!("{}.{name}", block()),
                            path: vec![Seg::Key("delta"), Seg::Name(name.clone())],
                        });
                    }
                }
            }
        }
        "content_block_start" => {
            for (name, delta_type) in [("text", "text_delta"), ("thinking", "thinking_delta")] {
                let path = vec![Seg::Key("content_block"), Seg::Name(name.into())];
                if string_at(v, &path) {
                    p.fields.push(Field {
                        key: format!("{}.{name}", block()),
                        path,
                    });
                    let delta = json!({"type": "content_block_delta", "index": index_of(v, "index", 0),
                        "delta": {"type": delta_type, name: ""}});
                    p.template = Some((
                        vec!["event: content_block_delta".into()],
                        delta,
                        vec![Seg::Key("delta"), Seg::Name(name.into())],
                    ));
                }
            }
        }
        "content_block_stop" => p.end_before = Before::Some(vec![block()]),
        "message_stop" | "response.completed" | "response.incomplete" | "response.failed" => {
            p.end_before = Before::All;
        }
        _ if kind.starts_with("response.") => {
            let key = |base: &str| {
                format!(
                    "{base}#{}.{}.{}",
                    index_of(v, "output_index", 0),
                    index_of(v, "content_index", 0),
                    index_of(v, "summary_index", 0)
                )
            };
            if let Some(base) = kind.strip_suffix(".delta") {
                if string_at(v, &[Seg::Key("delta")]) {
                    p.fields.push(Field {
                        key: key(base),
                        path: vec![Seg::Key("delta")],
                    });
                }
            } else if let Some(base) = kind.strip_suffix(".done") {
                p.end_before = Before::Some(vec![key(base)]);
            }
        }
        _ => {}
    }
    p
}

/// The session of one streamed field, and how to send its rest on its own.
struct Stream {
    session: OwnedStreamSession,
    /// The non-data lines, the JSON and the field's path of an event that
    /// carries this field alone (empty text), for the rest at the end.
    lines: Vec<String>,
    template: Value,
    path: Vec<Seg>,
    ended: bool,
}

/// Rewrites one streamed reply (one HTTP response through Envoy).
pub struct SseRewriter {
    ev: Arc<Evaluator>,
    opts: StreamOptions,
    max_event_bytes: usize,
    /// Bytes of the event being received.
    buf: Vec<u8>,
    /// Where the first line not yet looked at starts in `buf`.
    line_start: usize,
    streams: BTreeMap<String, Stream>,
    refused: Option<Refusal>,
    /// Sessions that ended, and whether each blocked (for the metrics).
    ended_sessions: Vec<bool>,
    redacted: bool,
    /// Short strings already judged clean (see [`SseRewriter::judge_whole`]).
    clean: HashSet<String>,
}

impl std::fmt::Debug for SseRewriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Held text is payload: never print it.
        f.debug_struct("SseRewriter")
            .field("pack_id", &self.ev.pack_id())
            .field("fields", &self.streams.len())
            .field("refused", &self.refused.is_some())
            .finish()
    }
}

/// The event that ends a refused stream ([§12.3](docs/gateways.md#s12-3)): no part of the payload.
pub fn error_event(r: &Refusal) -> Vec<u8> {
    let body = json!({"error": {
        "message": r.reason,
        "type": super::super::POLICY_VIOLATION,
        "code": r.action,
    }});
    format!("data: {body}\n\n").into_bytes()
}

impl SseRewriter {
    /// A rewriter whose sessions use `ev` (one pack of one generation).
    pub fn new(ev: Arc<Evaluator>, opts: StreamOptions, max_event_bytes: usize) -> Self {
        Self {
            ev,
            opts,
            max_event_bytes,
            buf: Vec::new(),
            line_start: 0,
            streams: BTreeMap::new(),
            refused: None,
            ended_sessions: Vec::new(),
            redacted: false,
            clean: HashSet::new(),
        }
    }

    /// Why the stream was refused, once it has been.
    pub fn refused(&self) -> Option<&Refusal> {
        self.refused.as_ref()
    }

    /// Whether anything sent held a placeholder.
    pub fn redacted(&self) -> bool {
        self.redacted
    }

    /// The sessions that ended so far, each `true` if it blocked; drains them.
    pub fn take_ended_sessions(&mut self) -> Vec<bool> {
        std::mem::take(&mut self.ended_sessions)
    }

    /// Takes the next bytes of the reply and returns what may go to the
    /// client now.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        if self.refused.is_some() {
            return out;
        }
        self.buf.extend_from_slice(bytes);
        while let Some((end, next)) = self.next_event() {
            let raw: Vec<u8> = self.buf.drain(..next).take(end).collect();
            self.line_start = 0;
            self.event(&raw, &mut out);
            if self.refused.is_some() {
                self.buf.clear();
                return out;
            }
        }
        if self.buf.len() > self.max_event_bytes {
            self.refuse(Refusal::limit(), &mut out);
        }
        out
    }

    /// Ends the reply: a last event without its blank line, then the rest
    /// of every session.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.refused.is_some() {
            return out;
        }
        let rest = std::mem::take(&mut self.buf);
        self.line_start = 0;
        if rest.iter().any(|b| !b.is_ascii_whitespace()) {
            self.event(&rest, &mut out);
        }
        if self.refused.is_none() {
            self.end_all(&mut out);
        }
        out
    }

    /// The end of the first complete event in `buf` (before its blank line)
    /// and where the next one starts. Lines end with LF or CRLF.
    fn next_event(&mut self) -> Option<(usize, usize)> {
        loop {
            let nl = self.buf[self.line_start..]
                .iter()
                .position(|&b| b == b'\n')?
                + self.line_start;
            let line = &self.buf[self.line_start..nl];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() {
                return Some((self.line_start, nl + 1));
            }
            self.line_start = nl + 1;
        }
    }

    fn refuse(&mut self, r: Refusal, out: &mut Vec<u8>) {
        out.extend_from_slice(&error_event(&r));
        self.refused = Some(r);
        for (_, s) in std::mem::take(&mut self.streams) {
            if !s.ended {
                self.ended_sessions.push(true);
            }
        }
    }

    fn event(&mut self, raw: &[u8], out: &mut Vec<u8>) {
        let Ok(text) = std::str::from_utf8(raw) else {
            // Not text: nothing can be judged, so nothing goes out.
            self.refuse(Refusal::unreadable(), out);
            return;
        };
        let mut lines = Vec::new();
        let mut data: Option<String> = None;
        for line in text.split('\n') {
            let line = line.strip_suffix('\r').unwrap_or(line);
            if let Some(d) = line.strip_prefix("data:") {
                let d = d.strip_prefix(' ').unwrap_or(d);
                match &mut data {
                    Some(acc) => {
                        acc.push('\n');
                        acc.push_str(d);
                    }
                    None => data = Some(d.to_string()),
                }
            } else if !line.is_empty() {
                lines.push(line.to_string());
            }
        }
        let Some(data) = data else {
            // A comment, a ping or a bare `event:`: no text.
            passthrough(raw, out);
            return;
        };
        if data.trim() == "[DONE]" {
            self.end_all(out);
            if self.refused.is_none() {
                passthrough(raw, out);
            }
            return;
        }
        match crate::request::parse_strict(data.as_bytes()) {
            Ok(Value::Object(obj)) => self.json_event(lines, obj, raw, out),
            // Plain text data: one stream of text of its own.
            _ => self.text_event(lines, &data, out),
        }
    }

    fn text_event(&mut self, lines: Vec<String>, data: &str, out: &mut Vec<u8>) {
        let key = "raw".to_string();
        let Some(released) = self.push_field(&key, data, || (lines.clone(), Value::Null, vec![]))
        else {
            return self.refuse_blocked(&key, out);
        };
        write_text_event(&lines, &released, out);
    }

    fn json_event(
        &mut self,
        lines: Vec<String>,
        obj: Map<String, Value>,
        raw: &[u8],
        out: &mut Vec<u8>,
    ) {
        let mut v = Value::Object(obj);
        let p = plan(&v);
        match &p.end_before {
            Before::Nothing => {}
            Before::All => self.end_all(out),
            Before::Some(keys) => {
                for k in keys {
                    let under: Vec<String> = self
                        .streams
                        .keys()
                        .filter(|key| ends(k, key))
                        .cloned()
                        .collect();
                    for key in under {
                        self.end_stream(&key, out);
                    }
                }
            }
        }
        if self.refused.is_some() {
            return;
        }
        // The streamed pieces go through their sessions; every other string
        // of the event is judged whole, each on its own.
        let pieces: Vec<Option<String>> = p
            .fields
            .iter()
            .map(|f| match at(&mut v, &f.path) {
                Some(Value::String(s)) => Some(std::mem::take(s)),
                _ => None,
            })
            .collect();
        let changed = match self.judge_whole(&mut v) {
            Err(r) => return self.refuse(r, out),
            Ok(changed) => changed,
        };
        if p.fields.is_empty() && p.end_after.is_empty() {
            if changed {
                write_json_event(&lines, &v, out);
            } else {
                passthrough(raw, out);
            }
            return;
        }
        // The template of a field seen for the first time: this event with
        // every streamed field empty (they are, now) and no finish.
        let fresh = p.fields.iter().any(|f| !self.streams.contains_key(&f.key));
        let template = fresh.then(|| {
            let mut t = v.clone();
            if let Some(choices) = t.get_mut("choices").and_then(Value::as_array_mut) {
                for c in choices {
                    if let Some(f) = c.get_mut("finish_reason") {
                        *f = Value::Null;
                    }
                    // A message's role is said once, in its first chunk.
                    if let Some(d) = c.get_mut("delta").and_then(Value::as_object_mut) {
                        d.remove("role");
                    }
                }
            }
            if let Some(o) = t.as_object_mut() {
                o.remove("usage");
            }
            t
        });
        let mut written: Vec<(Vec<Seg>, String)> = Vec::new();
        for (f, piece) in p.fields.iter().zip(pieces) {
            let Some(piece) = piece else { continue };
            let make = || match &p.template {
                Some((l, t, path)) => (l.clone(), t.clone(), path.clone()),
                None => (
                    lines.clone(),
                    template.clone().unwrap_or(Value::Null),
                    f.path.clone(),
                ),
            };
            let Some(mut released) = self.push_field(&f.key, &piece, make) else {
                return self.refuse_blocked(&f.key, out);
            };
            if p.end_after.iter().any(|k| ends(k, &f.key)) {
                match self.end_session(&f.key) {
                    Ok(rest) => released.push_str(&rest),
                    Err(()) => return self.refuse_blocked(&f.key, out),
                }
            }
            written.push((f.path.clone(), released));
        }
        // Sessions that end here without a field of their own in this event.
        let mut before = Vec::new();
        for k in &p.end_after {
            let prefixed: Vec<String> = self
                .streams
                .iter()
                .filter(|(key, s)| !s.ended && ends(k, key))
                .map(|(key, _)| key.clone())
                .collect();
            for key in prefixed {
                self.end_stream_into(&key, &mut before);
                if self.refused.is_some() {
                    out.extend_from_slice(&before);
                    return;
                }
            }
        }
        out.extend_from_slice(&before);
        for (path, text) in written {
            if let Some(s) = at(&mut v, &path) {
                *s = Value::String(text);
            }
        }
        write_json_event(&lines, &v, out);
    }

    /// Pushes `piece` to the field's session (made on first sight) and
    /// returns the release; `None` when the session blocked.
    fn push_field(
        &mut self,
        key: &str,
        piece: &str,
        make: impl FnOnce() -> (Vec<String>, Value, Vec<Seg>),
    ) -> Option<String> {
        if !self.streams.contains_key(key) {
            if self.streams.len() >= MAX_FIELDS {
                return None;
            }
            let (lines, template, path) = make();
            self.streams.insert(
                key.to_string(),
                Stream {
                    session: self.ev.stream_owned(self.opts),
                    lines,
                    template,
                    path,
                    ended: false,
                },
            );
        }
        let s = self.streams.get_mut(key)?;
        if s.ended {
            // A field that comes back after its end starts a new session.
            s.session = self.ev.stream_owned(self.opts);
            s.ended = false;
        }
        let r = s.session.push(piece);
        if s.session.blocked().is_some() {
            return None;
        }
        self.redacted |= r.redacted;
        Some(r.text)
    }

    /// Ends a session; its rest, or `Err` when it blocked.
    fn end_session(&mut self, key: &str) -> Result<String, ()> {
        let Some(s) = self.streams.get_mut(key) else {
            return Ok(String::new());
        };
        if s.ended {
            return Ok(String::new());
        }
        let r = s.session.finish();
        s.ended = true;
        let blocked = s.session.blocked().is_some();
        self.ended_sessions.push(blocked);
        if blocked {
            return Err(());
        }
        self.redacted |= r.redacted;
        Ok(r.text)
    }

    /// Ends a session and writes its rest as an event of its own.
    fn end_stream_into(&mut self, key: &str, out: &mut Vec<u8>) {
        match self.end_session(key) {
            Err(()) => self.refuse_blocked(key, out),
            Ok(rest) if rest.is_empty() => {}
            Ok(rest) => {
                if let Some(s) = self.streams.get(key) {
                    if s.template.is_null() {
                        write_text_event(&s.lines, &rest, out);
                    } else {
                        let mut t = s.template.clone();
                        if let Some(slot) = at(&mut t, &s.path) {
                            *slot = Value::String(rest);
                        }
                        write_json_event(&s.lines, &t, out);
                    }
                }
            }
        }
    }

    fn end_stream(&mut self, key: &str, out: &mut Vec<u8>) {
        if self.refused.is_none() {
            self.end_stream_into(key, out);
        }
    }

    fn end_all(&mut self, out: &mut Vec<u8>) {
        let keys: Vec<String> = self.streams.keys().cloned().collect();
        for k in keys {
            self.end_stream(&k, out);
        }
    }

    /// Refuses with the blocked session's reason (or the limit's).
    fn refuse_blocked(&mut self, key: &str, out: &mut Vec<u8>) {
        let r = self
            .streams
            .get(key)
            .and_then(|s| s.session.blocked())
            .map_or_else(Refusal::limit, |b| Refusal {
                action: b.action.clone(),
                reason: b.reason.clone(),
            });
        if let Some(s) = self.streams.get_mut(key) {
            if !s.ended {
                s.ended = true;
                self.ended_sessions.push(true);
            }
        }
        self.refuse(r, out);
    }

    /// Judges every string of an event on its own; whether one changed, or
    /// the refusal of a FATAL one (with `block_on_fatal`). Short strings
    /// found clean are remembered: ids, model names and event kinds repeat
    /// in every event of a stream.
    fn judge_whole(&mut self, v: &mut Value) -> Result<bool, Refusal> {
        let mut changed = false;
        for s in crate::json_text::strings_mut(v) {
            if self.clean.contains(s.as_str()) {
                continue;
            }
            let d = self.ev.evaluate_with(s, self.opts.normalize);
            match d.severity {
                None => {
                    if s.len() <= CLEAN_CACHE_BYTES && self.clean.len() < CLEAN_CACHE_ENTRIES {
                        self.clean.insert(s.clone());
                    }
                }
                Some(Severity::Fatal) if self.opts.block_on_fatal => {
                    return Err(Refusal {
                        action: d.action.to_string(),
                        reason: d.reason.unwrap_or(d.action).to_string(),
                    })
                }
                Some(Severity::Fatal) => {
                    *s = self.ev.redacted_text_with(s, self.opts.normalize);
                    changed = true;
                }
                Some(_) => {
                    *s = d.clean_text;
                    changed = true;
                }
            }
        }
        self.redacted |= changed;
        Ok(changed)
    }
}

fn passthrough(raw: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(raw);
    if !raw.ends_with(b"\n") {
        out.push(b'\n');
    }
    out.push(b'\n');
}

fn write_lines(lines: &[String], out: &mut Vec<u8>) {
    for l in lines {
        out.extend_from_slice(l.as_bytes());
        out.push(b'\n');
    }
}

fn write_json_event(lines: &[String], v: &Value, out: &mut Vec<u8>) {
    write_lines(lines, out);
    out.extend_from_slice(b"data: ");
    // Serialising a Value cannot fail (its keys are strings).
    out.extend_from_slice(v.to_string().as_bytes());
    out.extend_from_slice(b"\n\n");
}

/// A plain-text event: each line of the text is a `data:` line.
fn write_text_event(lines: &[String], text: &str, out: &mut Vec<u8>) {
    write_lines(lines, out);
    for l in text.split('\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(l.as_bytes());
        out.push(b'\n');
    }
    out.push(b'\n');
}

#[cfg(test)]
mod tests;
