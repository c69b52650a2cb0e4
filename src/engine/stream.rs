//! Stream sessions ([§11.1](docs/streaming.md#s11-1)): evaluate a text that arrives in pieces and
//! release its redacted form as soon as no continuation could change it.
//! Never releases a character that a later piece could turn into part of a
//! match, never logs or stores a matched value, and never rescans released
//! text.
//!
//! A [`Session`] holds its evaluator through a handle: a borrow
//! ([`StreamSession`], from [`Evaluator::stream`]) for a stream that runs
//! within one call, or an `Arc` ([`OwnedStreamSession`], from
//! [`Evaluator::stream_owned`]) for one that must outlive any borrow, e.g. a
//! session kept in a task across the messages of a streamed reply. Both run
//! the same code and release the same text.
//!
//! # Design
//!
//! The engine reports, per rule, the matches of a leftmost-first,
//! non-overlapping search (then drops candidates that fail a checksum). For
//! every rule the session keeps a position `p`: every match starting before
//! `p` has been *committed* (it is the same whatever arrives next), and no
//! other match can start before `p`. Between pushes the session answers one
//! question per rule: which is the earliest start `s ≥ p` still **live**,
//! that is, from which a continuation could still produce a match (or change
//! one that ends at the current end)?
//!
//! Liveness comes from a lazy DFA (`regex_automata::hybrid`), run
//! **anchored** from every start position at once: a *thread* is a start
//! position and the DFA state reached from it. Every start before the
//! earliest live start is settled, so the exact regex finds the committed
//! matches there and moves `p` past them; the session releases the text
//! before the earliest live start of any rule, redacted by the [§6.3](docs/evaluation.md#s6-3) sweep.
//! The total work is linear in the text, however it is cut. Each part has
//! its own module, whose doc holds that part's design:
//!
//! - [`plan`]: the liveness plan, built once per evaluator at load: each
//!   rule's automaton (the boundary-free form for Unicode word boundaries)
//!   and the bytes found by exploring it (first, inner, required and keep
//!   bytes), as per-byte rule masks;
//! - [`advance`]: a push's bytes fed to the threads: which rules a push
//!   concerns, the text skipped without a transition, deferred threads;
//! - [`threads`]: a thread, its start and terminal states, the leading word
//!   assertion at a start, byte classes;
//! - [`core`]: the session's state ([`Core`]); settling each rule
//!   and committing its matches through the exact search; the cost of a
//!   push;
//! - [`quiet`]: the common push of prose (only deferred threads move),
//!   settled without the general step's bookkeeping;
//! - [`release`]: the text released, redacted, cut before what a later
//!   match could still extend (and after a whitespace with
//!   `lookahead_chars`); released text dropped from the buffer;
//! - [`mask`]: the sets of rules that a push combines for all rules at
//!   once, and the bit that the 64th rule and those after it share;
//! - [`normalized`]: the original-text side of a session with
//!   normalization ([§15](docs/evasion.md#s15));
//! - [`spans`]: the committed matches in code points, for the decision;
//! - [`whole`]: a pack the incremental engine cannot run, held and judged
//!   once at the end;
//! - [`hash`] and [`clock`]: the receipt's hash of the pushed text, and the
//!   engine time.
//!
//! # The decision
//!
//! A session yields the decision of the whole text itself
//! ([`Session::decision`]), equal to [`Evaluator::evaluate_with`] but for
//! `clean_text` (what it released) and `latency_us` (its own engine time):
//! it records each committed match in code points (mapped back through the
//! view with normalization), hashes the text as it arrives for the
//! receipt, and, once blocked, keeps judging what is pushed without
//! releasing any of it, so that the triggers after the block are counted.
//! `max_session_ms` bounds the engine time of the pushes and the finish:
//! past it the session stops all work (it only hashes what is pushed) and
//! decides [`COST_ACTION`], fail closed. [`Session::push_many`] pushes a
//! batch with one measurement of the thread's CPU time, and
//! [`Session::park`] gives the caches back while a session waits.

use super::decision::{Decision, BLOCKED_TEXT};
use super::normalize::Normalize;
use super::{Evaluator, Severity};

mod advance;
mod clock;
mod core;
mod hash;
mod mask;
mod normalized;
mod plan;
mod quiet;
mod release;
mod spans;
mod threads;
mod whole;

use self::clock::EngineClock;
use self::core::Core;
use self::hash::Hasher;
use self::normalized::NormStream;
pub(super) use self::plan::{LiveCaches, LivePlan};
use std::ops::Deref;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Default of `stream.max_holdback_chars`.
pub const DEFAULT_MAX_HOLDBACK_CHARS: usize = 65_536;
/// Reason of a session blocked for holding back too much (fail closed).
pub const HOLDBACK_REASON: &str = "Stream hold-back limit exceeded";
/// Action of a session blocked for holding back too much.
pub const HOLDBACK_ACTION: &str = "block_stream_holdback_limit";
/// Default of `stream.max_session_ms`.
pub const DEFAULT_MAX_SESSION_MS: u64 = 5000;
/// Reason of a session stopped for spending more than `max_session_ms`
/// (fail closed).
pub const COST_REASON: &str = "Stream cost limit exceeded";
/// Action of a session stopped for spending more than `max_session_ms`.
pub const COST_ACTION: &str = "block_stream_cost_limit";

/// Options of a session ([§11.1](docs/streaming.md#s11-1)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamOptions {
    /// Block as soon as a FATAL match is final (default); otherwise redact it.
    pub block_on_fatal: bool,
    /// Python-runtime compatibility: hold back at least this many code
    /// points and end releases after a whitespace character (default 0: off).
    pub lookahead_chars: usize,
    /// Fail closed when more than this many code points are held back.
    pub max_holdback_chars: usize,
    /// Match through the evasion view ([§15](docs/evasion.md#s15)): releases are the original
    /// text, redacted where the view matched.
    pub normalize: Normalize,
    /// Engine time the session may spend, in milliseconds, over all its
    /// pushes and its finish: past it the session stops working and fails
    /// closed ([`COST_ACTION`]), whatever the text does to the engine.
    pub max_session_ms: u64,
}

impl Default for StreamOptions {
    fn default() -> Self {
        Self {
            block_on_fatal: true,
            lookahead_chars: 0,
            max_holdback_chars: DEFAULT_MAX_HOLDBACK_CHARS,
            normalize: Normalize::None,
            max_session_ms: DEFAULT_MAX_SESSION_MS,
        }
    }
}

/// Text released by one push or by the finish.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Released {
    /// The released redacted text (possibly empty).
    pub text: String,
    /// Whether it holds a placeholder.
    pub redacted: bool,
}

/// What the pushes of [`Session::push_many`] released, one after another
/// in one buffer (reused from call to call: no allocation a piece).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Releases {
    text: String,
    /// Per piece: where its text ends in `text`, and whether it holds a
    /// placeholder.
    ends: Vec<(usize, bool)>,
}

impl Releases {
    /// Empties it, keeping its buffers.
    pub fn clear(&mut self) {
        self.text.clear();
        self.ends.clear();
    }

    /// The number of pieces.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether it holds no piece.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Piece `k`'s release: its text (possibly empty) and whether it holds
    /// a placeholder.
    pub fn get(&self, k: usize) -> Option<(&str, bool)> {
        let &(end, redacted) = self.ends.get(k)?;
        let start = k.checked_sub(1).map_or(0, |j| self.ends[j].0);
        Some((&self.text[start..end], redacted))
    }

    /// Every piece's release, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, bool)> + '_ {
        (0..self.len()).filter_map(|k| self.get(k))
    }
}

/// Why a session stopped releasing (owned: built once, when it blocks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// The deciding action (`block_<id>`, a hard rule's, [`HOLDBACK_ACTION`]
    /// or [`COST_ACTION`]).
    pub action: String,
    /// Its reason.
    pub reason: String,
    /// The rules with committed matches when it blocked, in trigger order.
    pub triggers: Vec<(String, Severity)>,
}

impl Blocked {
    /// Blocked for holding back more than `stream.max_holdback_chars`.
    fn holdback() -> Self {
        Self {
            action: HOLDBACK_ACTION.to_string(),
            reason: HOLDBACK_REASON.to_string(),
            triggers: Vec::new(),
        }
    }
}

/// A stream session over one evaluator (one pack of one generation), held
/// through `E`: a borrow ([`StreamSession`]) or a shared handle
/// ([`OwnedStreamSession`]). Both kinds run the same code and release the
/// same text.
pub struct Session<E: Deref<Target = Evaluator>> {
    ev: E,
    core: Core,
    /// With [`Normalize::Evasion`]: the core runs on the view, and this
    /// writes the original text.
    norm: Option<Box<NormStream>>,
    /// The text pushed so far, hashed as it arrives (the receipt's
    /// `sha256_payload`: the session never holds the whole text).
    hasher: Hasher,
    /// Engine time spent in pushes and the finish, and the most it may be.
    spent: Duration,
    budget: Duration,
    /// Which small pieces [`Session::push`] times (xorshift state, seeded
    /// from the standard library's random hasher keys).
    dice: u64,
}

/// [`Session::push`] times every piece of this many bytes or more (two
/// clock reads are then a few percent of its work)...
const TIME_EVERY_PIECE_FROM: usize = 1024;
/// ...and one smaller piece in this many.
const SAMPLE_ONE_IN: u64 = 32;

/// A session that borrows its evaluator ([`Evaluator::stream`]).
pub type StreamSession<'e> = Session<&'e Evaluator>;

/// A session that holds a shared handle to its evaluator
/// ([`Evaluator::stream_owned`]): `Send + 'static`, so it can outlive any
/// borrow, e.g. in a task across the messages of one streamed reply.
pub type OwnedStreamSession = Session<Arc<Evaluator>>;

// An owned session can move to another task or thread.
const _: () = {
    const fn send_static<T: Send + 'static>() {}
    send_static::<OwnedStreamSession>();
};

impl<E: Deref<Target = Evaluator>> std::fmt::Debug for Session<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Held text is payload: never print it.
        f.debug_struct("StreamSession")
            .field("pack_id", &self.ev.pack_id())
            .field("pushed_chars", &self.core.pushed_chars)
            .field("released_chars", &self.core.released_chars)
            .field("blocked", &self.core.blocked.is_some())
            .finish()
    }
}

impl Evaluator {
    /// Builds the liveness automata at load and runs the warm-up payloads
    /// through one session, so the first stream after a start or a reload
    /// does not pay for them (about 1.5 ms for the example pack).
    pub(super) fn warm_stream(&self) {
        if !self.native {
            // Whole-mode sessions build nothing to warm.
            return;
        }
        let mut session = self.stream(StreamOptions {
            block_on_fatal: false,
            ..StreamOptions::default()
        });
        for text in super::WARM_UP {
            let mut at = 0;
            while at < text.len() {
                let mut end = (at + 8).min(text.len());
                while !text.is_char_boundary(end) {
                    end += 1;
                }
                session.push(&text[at..end]);
                at = end;
            }
        }
        session.finish();
    }

    /// Starts a stream session ([§11.1](docs/streaming.md#s11-1)) on this pack, borrowing it.
    pub fn stream(&self, opts: StreamOptions) -> StreamSession<'_> {
        Session::new(self, opts)
    }

    /// Starts a stream session ([§11.1](docs/streaming.md#s11-1)) on this pack that keeps a clone
    /// of the `Arc` instead of a borrow, so it can be held for as long as the
    /// stream lasts (moved into a task or a thread, kept across messages).
    pub fn stream_owned(self: &Arc<Self>, opts: StreamOptions) -> OwnedStreamSession {
        Session::new(Arc::clone(self), opts)
    }
}

impl<E: Deref<Target = Evaluator>> Session<E> {
    fn new(ev: E, opts: StreamOptions) -> Self {
        let core = Core::new(&ev, opts);
        let norm = (opts.normalize == Normalize::Evasion && !core.whole).then(Box::default);
        Self {
            ev,
            core,
            norm,
            hasher: Hasher::default(),
            spent: Duration::ZERO,
            budget: Duration::from_millis(opts.max_session_ms),
            // Never 0 (xorshift would stay there).
            dice: std::hash::BuildHasher::hash_one(
                &std::collections::hash_map::RandomState::new(),
                0u8,
            ) | 1,
        }
    }

    /// Appends `piece` and returns what can be released now ([§11.1](docs/streaming.md#s11-1)).
    /// Nothing is released once the session is blocked or finished.
    ///
    /// A blocked session still judges what is pushed (releasing nothing),
    /// so that [`Self::decision`] is the decision of the whole text; one
    /// that spent its `max_session_ms` only hashes it.
    pub fn push(&mut self, piece: &str) -> Released {
        if self.core.finished {
            return Released::default();
        }
        if self.core.stopped {
            self.hasher.update(piece);
            return Released::default();
        }
        // Two clock reads cost a quarter of a 16-byte push: a small piece is
        // timed one time in 32, at random (a text cannot hide its cost in
        // the pieces that are not), and counts 32 times its time.
        self.dice ^= self.dice << 13;
        self.dice ^= self.dice >> 7;
        self.dice ^= self.dice << 17;
        let weight = if piece.len() >= TIME_EVERY_PIECE_FROM {
            1
        } else if self.dice.is_multiple_of(SAMPLE_ONE_IN) {
            SAMPLE_ONE_IN as u32
        } else {
            let out = self.push_untimed(piece);
            #[cfg(test)]
            let out = self.charge(Duration::ZERO, out);
            if self.core.blocked.is_some() {
                return Released::default();
            }
            return out;
        };
        let started = Instant::now();
        let out = self.push_untimed(piece);
        self.charge(started.elapsed() * weight, out)
    }

    /// Pushes `pieces` in order, as [`Self::push`] would one at a time, and
    /// appends what each releases to `out`, up to and including the piece at
    /// which the session blocks (a session blocked before the call judges
    /// them all, releasing nothing); returns how many pieces it pushed. The
    /// engine time is measured once for the call, not once a piece (two
    /// clock reads cost about a quarter of a 16-byte push), and the
    /// releases share one buffer: a caller that holds many small pieces at
    /// once (a server cutting a request's text) pushes them with this. The
    /// budget is checked after the call (give it a bounded number of
    /// pieces): a call that spends it releases nothing.
    pub fn push_many<'p>(
        &mut self,
        pieces: impl IntoIterator<Item = &'p str>,
        out: &mut Releases,
    ) -> usize {
        let started = EngineClock::start();
        let first = out.ends.len();
        let was_blocked = self.core.blocked.is_some();
        for piece in pieces {
            if self.core.finished || self.core.stopped {
                break;
            }
            let redacted = self.push_untimed_into(piece, &mut out.text);
            out.ends.push((out.text.len(), redacted));
            if !was_blocked && self.core.blocked.is_some() {
                break;
            }
        }
        let pushed = out.ends.len() - first;
        let blocked = self.core.blocked.is_some();
        let _ = self.charge(started.elapsed(), Released::default());
        if !blocked && self.core.blocked.is_some() {
            // Past the budget: nothing of this call goes out.
            let start = first.checked_sub(1).map_or(0, |k| out.ends[k].0);
            out.text.truncate(start);
            out.ends[first..].fill((start, false));
        }
        pushed
    }

    /// A push without the engine-time bookkeeping.
    fn push_untimed(&mut self, piece: &str) -> Released {
        let mut text = String::new();
        let redacted = self.push_untimed_into(piece, &mut text);
        Released { text, redacted }
    }

    /// [`Self::push_untimed`] writing the release at the end of `out`
    /// (nothing once blocked); whether it holds a placeholder.
    fn push_untimed_into(&mut self, piece: &str, out: &mut String) -> bool {
        self.hasher.update(piece);
        let redacted = match self.norm.as_deref_mut() {
            Some(norm) => {
                let r = norm.push(&mut self.core, &self.ev, piece);
                out.push_str(&r.text);
                r.redacted
            }
            None if self.core.whole => {
                self.core.hold_whole(piece);
                false
            }
            // Appending needs no evaluator: it is handed over for the step
            // only, so the hot path carries no extra argument across the copy.
            None if self.core.append(piece) => self.core.step_into(&self.ev, false, out),
            None => false,
        };
        redacted && self.core.blocked.is_none()
    }

    /// Ends the stream and returns the rest (empty when blocked).
    pub fn finish(&mut self) -> Released {
        if self.core.finished || self.core.stopped {
            self.core.finished = true;
            return Released::default();
        }
        let started = EngineClock::start();
        let out = match self.norm.as_deref_mut() {
            Some(norm) => norm.finish(&mut self.core, &self.ev),
            None if self.core.whole => self.core.finish_whole(&self.ev),
            None => self.core.finish(&self.ev),
        };
        self.charge(started.elapsed(), out)
    }

    /// Counts the engine time of a call and returns its release, or
    /// nothing once the session is blocked or has spent its budget (it then
    /// stops, failing closed).
    fn charge(&mut self, took: Duration, out: Released) -> Released {
        self.spent += took;
        #[cfg(test)]
        {
            self.spent += self.core.extra_time;
        }
        if self.spent > self.budget {
            self.core.stop();
        }
        if self.core.blocked.is_some() {
            return Released::default();
        }
        out
    }

    /// Gives the session's search caches back to its evaluator until the
    /// next push: a session that waits (for its reader, for its next piece)
    /// then holds only its own state, and the caches serve other work.
    pub fn park(&mut self) {
        if let Some(c) = self.core.caches.take() {
            self.ev.idle_caches().push(*c);
        }
        // The liveness caches hold the states of live threads: they go back
        // only when no thread is under way (a deferred one has no state).
        if self.core.rules.iter().all(|r| r.threads.is_empty()) {
            if let Some(l) = self.core.live.take() {
                self.ev
                    .live_caches
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(*l);
                // Start states of those caches: rebuilt with the next set.
                for r in &mut self.core.rules {
                    r.starts = Vec::new();
                    r.terminal = Vec::new();
                }
            }
        }
    }

    /// Engine time spent so far in pushes and the finish (what a stream's
    /// `latency_us` reports, and what `max_session_ms` limits): the
    /// thread's CPU time in [`Self::push_many`] and [`Self::finish`] where
    /// the platform gives it (Linux), the monotonic clock's time otherwise
    /// and in [`Self::push`] (one CPU-time read costs about 0.4 µs, two
    /// small pushes), which counts time the thread waited for a CPU too.
    /// [`Self::push`] times pieces of 1 KiB or more, and estimates the
    /// others from one in 32 timed at random: a caller that needs the
    /// time of many small pieces exactly pushes them with
    /// [`Self::push_many`].
    pub fn engine_time(&self) -> Duration {
        self.spent
    }

    /// The decision of the whole text ([§6.4](docs/evaluation.md#s6-4)), once [`Self::finish`] has
    /// been called: the session's own, from the matches it committed, equal
    /// to [`Evaluator::evaluate_with`] on everything pushed (blocked or not)
    /// but for `clean_text` and `latency_us`. `clean_text` is
    /// [`BLOCKED_TEXT`] when the decision blocks, and empty otherwise: what
    /// may leave is what the session released (W(T) when it did not block).
    /// `latency_us` is the session's engine time. A session that spent its
    /// `max_session_ms` decides [`COST_ACTION`] (FATAL, no trigger: it did
    /// not judge the whole text).
    pub fn decision(&self) -> Option<Decision<'_>> {
        if !self.core.finished {
            return None;
        }
        let digest = self.hasher.digest();
        let ev = &*self.ev;
        let normalized = self.normalized();
        let (stop_action, stop_reason) = if self.core.held_out {
            (HOLDBACK_ACTION, HOLDBACK_REASON)
        } else {
            (COST_ACTION, COST_REASON)
        };
        let mut d = if self.core.stopped {
            Decision {
                action: stop_action,
                severity: Some(Severity::Fatal),
                reason: Some(stop_reason),
                clean_text: BLOCKED_TEXT.to_string(),
                triggers: Vec::new(),
                invariants_passed: false,
                pack_id: &ev.pack_id,
                pack_version: &ev.pack_version,
                receipt_hash: ev
                    .receipts
                    .hash_of(stop_action, false, std::iter::empty(), &digest),
                latency_us: 0.0,
                normalized,
            }
        } else if let Some(judged) = self.core.judged.as_deref() {
            // Whole mode: the decision the finish judged, not a second one.
            let triggers = judged.triggers(ev);
            let fatal = triggers.iter().any(|t| t.severity == Severity::Fatal);
            let clean = if fatal { BLOCKED_TEXT } else { "" };
            ev.finish(&digest, triggers, clean.to_string(), normalized)
        } else {
            let triggers = self.core.spans.triggers(ev);
            let fatal = triggers.iter().any(|t| t.severity == Severity::Fatal);
            let clean = if fatal { BLOCKED_TEXT } else { "" };
            ev.finish(&digest, triggers, clean.to_string(), normalized)
        };
        d.latency_us = self.spent.as_secs_f64() * 1e6;
        Some(d)
    }

    /// Why the session blocked, once it has.
    pub fn blocked(&self) -> Option<&Blocked> {
        self.core.blocked.as_ref()
    }

    /// Code points pushed so far.
    pub fn pushed_chars(&self) -> usize {
        match &self.norm {
            Some(n) => n.pushed_chars,
            None => self.core.pushed_chars,
        }
    }

    /// Code points pushed but not yet released.
    pub fn held_chars(&self) -> usize {
        match &self.norm {
            Some(n) => n.pushed_chars - n.released_chars,
            None => self.core.held_chars(),
        }
    }

    /// Whether the session matched through a view that differed from the
    /// text so far ([§15](docs/evasion.md#s15)).
    pub fn normalized(&self) -> bool {
        if self.core.whole {
            return self.core.judged.as_ref().is_some_and(|j| j.normalized);
        }
        self.norm.as_ref().is_some_and(|n| n.changed)
    }
}

impl<E: Deref<Target = Evaluator>> Drop for Session<E> {
    fn drop(&mut self) {
        self.core.give_back(&self.ev);
    }
}

#[cfg(test)]
mod tests;
