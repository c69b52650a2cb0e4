//! A session's state and the settling of each push ([`Core`]): per rule,
//! the position before which every match is committed, the exact search
//! over settled text, the committed matches waiting for a release, and the
//! blocking on a FATAL match. Feeding bytes to threads is in `advance.rs`,
//! writing released text in `release.rs`; this module must not build
//! liveness tables (the plan is shared and read-only) nor hold an
//! evaluator (it is passed to each call, whatever handle the session has).
//!
//! # Design
//!
//! Every start before the earliest live start is settled, so the exact
//! regex (the same search as [`Evaluator::evaluate`], through the same
//! boundary-free guide on non-ASCII text) finds the committed matches there,
//! validates them (Luhn, SSN), and moves `p` past them. It runs only where a
//! match may be: from the start of a thread that reached a match state, or
//! over skipped text that holds both a byte that can begin a match and one
//! of the rule's required bytes (short skipped text is simulated instead,
//! which is cheaper than a search). A committed FATAL match blocks the
//! session at once (with `block_on_fatal`); the end of input settles
//! everything.
//!
//! # Cost
//!
//! The total work is linear in the text: each byte is fed to each rule's
//! threads at most once (a rare replay after a committed match that live
//! threads began inside, or after a lazy-DFA cache clear, is bounded by the
//! held text), and released text is dropped from the buffer, keeping one
//! character as look-behind context. Nothing else a push does grows with
//! the text held back: the committed matches wait in sweep order and a
//! release visits only those that start before its cut; the required-bytes
//! scan starts where the exact search does; `lookahead_chars` keeps its
//! whitespace scan across pushes; and whether the text after a commit is
//! ASCII is known from the last non-ASCII byte pushed (a held run of
//! 60,000 characters once cost each of its pushes all of these).

use super::mask::RuleMask;
use super::plan::{LiveCaches, LivePlan};
use super::spans::SpanLog;
use super::threads::{is_terminal, next_char, Thread};
use super::{whole, Blocked, Released, StreamOptions, COST_ACTION, COST_REASON};
use crate::engine::normalize::Normalize;
use crate::engine::{Caches, Evaluator, Region, Severity};
use regex_automata::hybrid::dfa::Cache as LazyCache;
use regex_automata::hybrid::LazyStateID;
use std::cmp::Reverse;
use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
#[cfg(test)]
use std::time::Duration;

/// Idle session buffers an evaluator keeps, and the largest kept.
const MAX_IDLE_BUFS: usize = 4;
const MAX_IDLE_BUF_BYTES: usize = 2 << 20;
/// States whose terminal check a session remembers, per rule.
const MAX_TERMINAL_MEMO: usize = 256;

/// One rule's progress in a session.
pub(super) struct RuleState {
    /// Every match starting before `p` is committed; none other starts before it.
    pub(super) p: usize,
    /// Live starts and their DFA states, by increasing start, states distinct.
    pub(super) threads: Vec<Thread>,
    /// A thread not simulated (then `threads` is empty): it opens at the
    /// start given, and every byte from there to the end of the text
    /// scanned is one of the rule's [`LiveRule::keep`] bytes, so it is live
    /// and is the earliest live start. The flag says whether one of those
    /// bytes is a required one. The next piece either ends the run (the
    /// thread is then settled like the skipped text, or simulated from its
    /// start) or extends it.
    ///
    /// [`LiveRule::keep`]: super::plan::LiveRule::keep
    pub(super) deferred: Option<(usize, bool)>,
    /// Start states by look-behind byte (index 256: start of the stream).
    pub(super) starts: Vec<Option<LazyStateID>>,
    /// The cache's clear count the state ids above belong to.
    pub(super) clears: usize,
    /// Whether a terminal check was made for a state (every byte and the
    /// end lead to dead), for the few states threads end a push in; sorted
    /// by state.
    pub(super) terminal: Vec<(LazyStateID, bool)>,
    /// Where matches may start that no search has looked for yet (lowest
    /// and highest such start): a thread that reached a match state and
    /// then ended, or the rest of the text at the end of input.
    pub(super) dirty: Option<(usize, usize)>,
    /// Final matches (absolute start and end) of a codon with a
    /// `context.after` window whose text has not all arrived: whether each
    /// value counts is decided once it has (or at the end of input), in
    /// order, and the release waits before the first of them.
    pub(super) awaiting: VecDeque<(usize, usize)>,
    /// For the first of `awaiting`: the absolute offset its window has been
    /// counted up to and the code points counted (each byte is counted
    /// once, however small the pieces).
    pub(super) awaited: (usize, usize),
}

/// A committed match not yet released. Ordered as the [§6.3](docs/evaluation.md#s6-3) sweep takes
/// matches (the derived order compares the fields in turn): by start, the
/// longer first, then by sort key; then by the matcher that found it (its
/// placeholder is looked up in the plan when the text is written). Offsets
/// are absolute, so dropping released text moves none of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Pending {
    /// Where the match starts.
    pub(super) start: usize,
    /// Where it ends, reversed: at one start, the match that ends later
    /// comes first.
    pub(super) end: Reverse<usize>,
    /// The matcher's sort key ([`Evaluator::redaction_key`]).
    pub(super) key: (usize, usize),
    /// The matcher that found it.
    pub(super) matcher: usize,
}

impl Pending {
    /// The first match in sweep order that could start at `start`: every
    /// match that starts before it sorts before this one.
    #[inline]
    pub(super) fn first_at(start: usize) -> Self {
        Self {
            start,
            end: Reverse(usize::MAX),
            key: (0, 0),
            matcher: 0,
        }
    }
}

/// A session's state, whatever holds its evaluator: the evaluator is passed
/// to each call, so one copy of the code serves both handle kinds.
pub(super) struct Core {
    pub(super) plan: Arc<LivePlan>,
    pub(super) opts: StreamOptions,
    /// Held text, after `head` bytes already released (at least the last
    /// released character is kept as look-behind context).
    pub(super) buf: String,
    pub(super) head: usize,
    /// Whether `buf[0]` is the first byte of the stream.
    pub(super) origin: bool,
    /// Absolute offset of the last byte of a non-ASCII character pushed so
    /// far: the text after it is ASCII.
    last_non_ascii: Option<usize>,
    /// Bytes of `buf` the threads have consumed.
    pub(super) scanned: usize,
    /// Bytes dropped from the front of `buf` so far (absolute offset of `buf[0]`).
    pub(super) dropped: usize,
    /// With normalization: the regions each release wrote, in absolute
    /// offsets of the view, for [`NormStream`] to map (the core then builds
    /// no text of its own).
    ///
    /// [`NormStream`]: super::normalized::NormStream
    pub(super) tap: Option<Vec<Region<String>>>,
    pub(super) rules: Vec<RuleState>,
    /// Committed matches not yet released, kept in sweep order: a release
    /// visits only those that start before its cut, however many wait
    /// after it (a long held run full of matches costs each push nothing).
    pub(super) pending: BTreeSet<Pending>,
    /// Reused between pushes: (non-inner byte, rules it is the last one
    /// of) entries, room for 65 (see [`Core::advance_all`]).
    pub(super) scratch: Vec<(usize, RuleMask)>,
    /// Reused between pushes: for rule `i` (below 64) with a non-inner byte
    /// in the piece, the last one's offset.
    pub(super) last_outer: Vec<usize>,
    /// Rules with threads, unsearched starts or no automaton: only they and
    /// the rules that a piece can start are looked at in a push. Every other rule is settled up to
    /// `scanned` (its `p` is not kept up to date).
    pub(super) busy: RuleMask,
    /// Rules with threads (a subset of `busy`).
    pub(super) threaded: RuleMask,
    /// Trigger slots with committed matches.
    fired: Vec<bool>,
    pub(super) pushed_chars: usize,
    pub(super) released_chars: usize,
    /// The first reason to stop releasing; a blocked core goes on judging
    /// (its releases are dropped) unless it is `stopped`.
    pub(super) blocked: Option<Blocked>,
    /// Out of engine time: does no more work at all.
    pub(super) stopped: bool,
    pub(super) finished: bool,
    /// The committed matches, for the decision.
    pub(super) spans: SpanLog,
    /// Tests add this to the engine time of every call.
    #[cfg(test)]
    pub(super) extra_time: Duration,
    /// Boxed: a search cache set is large, and it moves out and back at
    /// every push.
    pub(super) caches: Option<Box<Caches>>,
    pub(super) live: Option<Box<LiveCaches>>,
    /// `lookahead_chars`' scan state (see [`Core::whitespace_cut`]).
    pub(super) ws: WhitespaceScan,
    /// Tests turn deferral off to check that it changes no release.
    #[cfg(test)]
    pub(super) defer: bool,
    /// Tests turn the quiet case (`quiet.rs`) off to check that it changes
    /// no release.
    #[cfg(test)]
    pub(super) quiet: bool,
    /// Pushes the quiet case settled (tests check that it is taken).
    #[cfg(test)]
    pub(super) quiet_steps: usize,
    /// Whole mode (see `whole.rs`): the evaluator's program is not the
    /// example pack's, which the liveness tables are built for, so the text
    /// is held and judged once at the end.
    pub(super) whole: bool,
    /// Whole mode: blocked for holding more than the limit (the decision
    /// is the limit's).
    pub(super) held_out: bool,
    /// Whole mode: the decision of the text, judged once at the end.
    pub(super) judged: Option<Box<whole::Judged>>,
    /// Code points kept before the held text beyond the look-behind
    /// character, for codons' `context.before` windows.
    pub(super) context_chars: usize,
}

impl Core {
    pub(super) fn new(ev: &Evaluator, opts: StreamOptions) -> Self {
        let whole = !ev.native;
        let plan = if whole {
            Arc::new(LivePlan::empty())
        } else {
            Arc::clone(ev.live.get_or_init(|| Arc::new(LivePlan::new(ev))))
        };
        let pooled = if whole {
            None
        } else {
            ev.live_caches
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .pop()
        };
        let live = pooled.unwrap_or_else(|| plan.caches());
        let caches = ev.idle_caches().pop().unwrap_or_else(|| ev.new_caches());
        let clears: Vec<usize> = live
            .0
            .iter()
            .map(|c| c.as_ref().map_or(0, LazyCache::clear_count))
            .collect();
        let fired = vec![false; plan.slots.len()];
        let count = clears.len();
        // A rule without an automaton holds back from its first unsettled
        // start: it is always looked at.
        let busy = plan
            .rules
            .iter()
            .enumerate()
            .filter(|(_, r)| r.dfa.is_none())
            .fold(RuleMask::EMPTY, |m, (i, _)| m | RuleMask::of(i));
        Self {
            plan,
            opts,
            buf: ev
                .stream_bufs
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .pop()
                .unwrap_or_default(),
            head: 0,
            origin: true,
            last_non_ascii: None,
            scanned: 0,
            dropped: 0,
            tap: (opts.normalize == Normalize::Evasion).then(Vec::new),
            rules: clears
                .into_iter()
                .map(|clears| RuleState {
                    p: 0,
                    threads: Vec::new(),
                    deferred: None,
                    starts: vec![None; 257],
                    clears,
                    terminal: Vec::new(),
                    dirty: None,
                    awaiting: VecDeque::new(),
                    awaited: (0, 0),
                })
                .collect(),
            pending: BTreeSet::new(),
            scratch: vec![(0, RuleMask::EMPTY); 65],
            last_outer: vec![0; count.min(64)],
            busy,
            threaded: RuleMask::EMPTY,
            fired,
            pushed_chars: 0,
            released_chars: 0,
            blocked: None,
            stopped: false,
            finished: false,
            spans: SpanLog::new(count, opts.normalize == Normalize::Evasion),
            #[cfg(test)]
            extra_time: Duration::ZERO,
            caches: Some(Box::new(caches)),
            live: Some(Box::new(live)),
            ws: WhitespaceScan::default(),
            #[cfg(test)]
            defer: true,
            #[cfg(test)]
            quiet: true,
            #[cfg(test)]
            quiet_steps: 0,
            whole,
            held_out: false,
            judged: None,
            context_chars: ev.context_chars(),
        }
    }

    /// Returns the session's caches to `ev`'s idle pools.
    pub(super) fn give_back(&mut self, ev: &Evaluator) {
        if let Some(c) = self.caches.take() {
            ev.idle_caches().push(*c);
        }
        // A few buffers are kept: a new session then writes into memory
        // already mapped (a fresh one of 512 KiB cost a single-piece push
        // a fifth of its time in page faults).
        if self.buf.capacity() <= MAX_IDLE_BUF_BYTES {
            let mut bufs = ev
                .stream_bufs
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if bufs.len() < MAX_IDLE_BUFS {
                self.buf.clear();
                bufs.push(std::mem::take(&mut self.buf));
            }
        }
        if let Some(l) = self.live.take() {
            ev.live_caches
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(*l);
        }
    }

    /// Appends `piece` unless the session is finished or out of engine
    /// time; returns whether it did (and a step is due).
    pub(super) fn append(&mut self, piece: &str) -> bool {
        if self.finished || self.stopped {
            return false;
        }
        if piece.is_ascii() {
            self.pushed_chars += piece.len();
        } else {
            self.pushed_chars += piece.chars().count();
            let k = piece.bytes().rposition(|b| !b.is_ascii()).unwrap_or(0);
            self.last_non_ascii = Some(self.dropped + self.buf.len() + k);
        }
        self.buf.push_str(piece);
        true
    }

    /// Stops all work, failing closed: the session spent its engine time.
    pub(super) fn stop(&mut self) {
        self.stopped = true;
        self.blocked.get_or_insert_with(|| Blocked {
            action: COST_ACTION.to_string(),
            reason: COST_REASON.to_string(),
            triggers: Vec::new(),
        });
    }

    #[inline]
    pub(super) fn finish(&mut self, ev: &Evaluator) -> Released {
        if self.finished || self.stopped {
            self.finished = true;
            return Released::default();
        }
        let out = self.step(ev, true);
        self.finished = true;
        out
    }

    #[inline]
    pub(super) fn held_chars(&self) -> usize {
        self.pushed_chars - self.released_chars
    }

    #[inline]
    pub(super) fn step(&mut self, ev: &Evaluator, eoi: bool) -> Released {
        let mut text = String::new();
        let redacted = self.step_into(ev, eoi, &mut text);
        Released { text, redacted }
    }

    /// [`Self::step`] writing its release at the end of `out` (nothing when
    /// the session blocks); whether it holds a placeholder.
    pub(super) fn step_into(&mut self, ev: &Evaluator, eoi: bool, out: &mut String) -> bool {
        let n = self.buf.len();
        let mark = out.len();
        let was_blocked = self.blocked.is_some();
        // A parked session gave its search caches back: take a set again.
        let mut caches = self.caches.take().or_else(|| {
            Some(Box::new(
                ev.idle_caches().pop().unwrap_or_else(|| ev.new_caches()),
            ))
        });
        let mut live = self.live.take().or_else(|| {
            let l = ev
                .live_caches
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .pop()
                .unwrap_or_else(|| self.plan.caches());
            // Another set of caches: the state ids kept per rule are not its.
            for (r, c) in self.rules.iter_mut().zip(&l.0) {
                r.starts.clear();
                r.starts.resize(257, None);
                r.terminal.clear();
                r.clears = c.as_ref().map_or(0, LazyCache::clear_count);
            }
            Some(Box::new(l))
        });
        let redacted = match (&mut caches, &mut live) {
            (Some(c), Some(l)) => self.settle_and_release(ev, n, eoi, c, l, out),
            _ => false,
        };
        self.caches = caches;
        self.live = live;
        if self.blocked.is_some() && !was_blocked {
            out.truncate(mark);
            return false;
        }
        redacted
    }

    fn settle_and_release(
        &mut self,
        ev: &Evaluator,
        n: usize,
        eoi: bool,
        caches: &mut Caches,
        live: &mut LiveCaches,
        out: &mut String,
    ) -> bool {
        let from = self.scanned;
        self.scanned = n;
        if !eoi {
            if let Some(q) = self.settle_quiet(from, n, live) {
                return self.release_held(q, n, false, out);
            }
        }
        let count = self.rules.len();
        let mut fatal = false;
        let was_busy = self.busy;
        let touched = if eoi {
            for i in self.threaded.iter(count) {
                // The end of input may complete what is still live.
                let r = &mut self.rules[i];
                if !r.threads.is_empty() || r.deferred.is_some() {
                    mark(&mut r.dirty, r.p);
                    mark(&mut r.dirty, n);
                }
                r.threads.clear();
                r.deferred = None;
            }
            was_busy
        } else {
            self.advance_all(from, n, live) | was_busy
        };
        // Rules with live threads or unsearched starts; the others are
        // settled up to `n` at once. Threads that nothing can change any
        // more are dropped. A rule with nothing to search (the common case)
        // is settled here, in the same pass: up to its earliest live start.
        // Only the rules left with a match to look for go through the exact
        // search below.
        let (mut still, mut threaded, mut searching) =
            (RuleMask::EMPTY, RuleMask::EMPTY, RuleMask::EMPTY);
        let (mut q, mut min_p) = (n, n);
        for i in touched.iter(count) {
            let has_dfa = self.plan.rules[i].dfa.is_some();
            let st = &mut self.rules[i];
            if !was_busy.contains(i) {
                // Idle until now: settled up to the previous end.
                st.p = from;
            }
            let waits = !st.awaiting.is_empty();
            if st.threads.is_empty()
                && st.deferred.is_none()
                && st.dirty.is_none()
                && has_dfa
                && !waits
            {
                st.p = st.p.max(n);
                continue;
            }
            if !eoi && !st.threads.is_empty() {
                self.drop_terminal(i, live.0[i].as_mut());
            }
            let st = &mut self.rules[i];
            if st.dirty.is_some() || !has_dfa || waits {
                // The exact search looks from here: only this text needs
                // the required bytes (not the text a live thread holds
                // back, which would be scanned again at every push).
                let from = match st.dirty {
                    Some((lo, _)) if has_dfa => st.p.max(lo),
                    _ => st.p,
                };
                min_p = min_p.min(from);
                searching.insert(i);
                continue;
            }
            match st
                .threads
                .first()
                .map(|t| t.start)
                .or(st.deferred.map(|d| d.0))
            {
                Some(live) => {
                    st.p = st.p.max(live);
                    threaded.insert(i);
                    still.insert(i);
                    if !eoi {
                        q = q.min(live);
                    }
                }
                None => st.p = st.p.max(n),
            }
        }
        if !searching.is_empty() {
            // Candidate rules for the exact search: their required bytes
            // occur in the unsettled text (a match lies inside it).
            let (mask, _) = ev.required.scan(&self.buf.as_bytes()[min_p..n], None);
            for i in searching.iter(count) {
                let candidate = mask[i / 64] & (1 << (i % 64)) != 0;
                fatal |= self.commit(ev, i, n, eoi, candidate, caches, live.0[i].as_mut());
                let st = &self.rules[i];
                let live = !st.threads.is_empty() || st.deferred.is_some();
                if live {
                    threaded.insert(i);
                }
                if live
                    || st.dirty.is_some()
                    || !st.awaiting.is_empty()
                    || self.plan.rules[i].dfa.is_none()
                {
                    still.insert(i);
                }
                if !eoi {
                    q = q.min(self.hold_from(i, n));
                }
            }
        }
        self.busy = still;
        self.threaded = threaded;
        if fatal && self.opts.block_on_fatal && self.blocked.is_none() {
            self.block_on_fired(ev);
            return false;
        }
        self.release_held(q, n, eoi, out)
    }

    /// Releases the text before `q` ([`Self::release`]) and blocks when
    /// what is still held is past the limit.
    #[inline]
    fn release_held(&mut self, q: usize, n: usize, eoi: bool, out: &mut String) -> bool {
        let redacted = self.release(q, n, eoi, out);
        if !eoi && self.blocked.is_none() && self.held_chars() > self.opts.max_holdback_chars {
            // The caller drops what this step wrote.
            self.blocked = Some(Blocked::holdback());
        }
        redacted
    }

    /// The earliest start from which rule `i` could still match.
    fn earliest_live(&self, i: usize, n: usize) -> usize {
        let st = &self.rules[i];
        if self.plan.rules[i].dfa.is_none() {
            // No automaton: hold back from the first unsettled start.
            return st.p;
        }
        match (st.threads.first(), st.deferred) {
            (Some(t), _) => t.start,
            (None, Some((at, _))) => at,
            (None, None) => n,
        }
    }

    /// Where rule `i` holds the release back from: its earliest live start,
    /// or before, the first match whose value still waits for its context.
    fn hold_from(&self, i: usize, n: usize) -> usize {
        let live = self.earliest_live(i, n);
        self.rules[i]
            .awaiting
            .front()
            .map_or(live, |&(s, _)| live.min(s - self.dropped))
    }

    /// Decides, in order, the waiting values of rule `i` whose context has
    /// arrived (all of them at the end of input); returns whether one that
    /// counts is FATAL.
    fn decide_awaiting(
        &mut self,
        ev: &Evaluator,
        i: usize,
        n: usize,
        eoi: bool,
        caches: &mut Caches,
    ) -> bool {
        let after = ev.settles_after(i);
        let mut fatal = false;
        while let Some(&(s_abs, e_abs)) = self.rules[i].awaiting.front() {
            let (s, e) = (s_abs - self.dropped, e_abs - self.dropped);
            if !eoi {
                let (from, mut seen) = match self.rules[i].awaited {
                    (at, seen) if at > e_abs => (at - self.dropped, seen),
                    _ => (e, 0),
                };
                let mut at = from;
                for c in self.buf[from..n].chars() {
                    if seen >= after {
                        break;
                    }
                    seen += 1;
                    at += c.len_utf8();
                }
                self.rules[i].awaited = (self.dropped + at, seen);
                if seen < after {
                    break;
                }
            }
            self.rules[i].awaiting.pop_front();
            self.rules[i].awaited = (0, 0);
            if let Some((vs, ve)) = ev.value_of(i, &self.buf[..n], s, e, caches) {
                fatal |= self.record(ev, i, vs, ve);
            }
        }
        fatal
    }

    /// Records a value of matcher `i` that counts (offsets in `buf`): it
    /// waits for the release, goes to the decision, fires its slot; returns
    /// whether that slot is FATAL.
    fn record(&mut self, ev: &Evaluator, i: usize, vs: usize, ve: usize) -> bool {
        let slot = self.plan.slot[i];
        let (key, _) = ev.redaction_key(i);
        let at = self.dropped;
        self.pending.insert(Pending {
            start: at + vs,
            end: Reverse(at + ve),
            key,
            matcher: i,
        });
        let floor = (at + self.head, self.released_chars);
        let ascii_from = self.last_non_ascii.map_or(0, |k| k + 1);
        self.spans
            .commit(i, (at + vs, at + ve), (&self.buf, at, ascii_from), floor);
        self.fired[slot] = true;
        self.plan.slots[slot].severity == Severity::Fatal
    }

    /// Commits rule `i`'s settled matches; returns whether one is FATAL.
    #[allow(clippy::too_many_arguments)]
    fn commit(
        &mut self,
        ev: &Evaluator,
        i: usize,
        n: usize,
        eoi: bool,
        candidate: bool,
        caches: &mut Caches,
        mut cache: Option<&mut LazyCache>,
    ) -> bool {
        let mut fatal = self.decide_awaiting(ev, i, n, eoi, caches);
        let waits = ev.settles_after(i) > 0;
        loop {
            let limit = if eoi { n } else { self.earliest_live(i, n) };
            let st = &self.rules[i];
            // `dirty`'s highest start bounds nothing: two threads in one
            // state keep only the earlier start, so a match may begin past
            // it, found only by searching on after the match before it.
            let from = match (self.plan.rules[i].dfa.is_some(), st.dirty) {
                (false, _) => Some(st.p),
                (true, Some((lo, _))) => Some(st.p.max(lo)),
                (true, None) => None,
            };
            let Some(from) = from.filter(|&f| candidate && f < limit) else {
                self.settled(i, limit);
                return fatal;
            };
            // Look-behind sees the character before `from`: four bytes at most.
            let ascii = self
                .last_non_ascii
                .is_none_or(|k| k + 4 < self.dropped + from);
            let found = ev.find_first(i, &self.buf[..n], from, ascii, caches);
            let Some((s, e)) = found.filter(|&(s, _)| s < limit) else {
                self.settled(i, limit);
                return fatal;
            };
            if s == e {
                let st = &mut self.rules[i];
                st.p = next_char(&self.buf, s);
                mark(&mut st.dirty, st.p);
                continue;
            }
            if waits {
                // Final as a match; whether its value counts waits for the
                // text of its `context.after` window.
                let at = self.dropped;
                self.rules[i].awaiting.push_back((at + s, at + e));
                fatal |= self.decide_awaiting(ev, i, n, eoi, caches);
            } else if let Some((vs, ve)) = ev.value_of(i, &self.buf[..n], s, e, caches) {
                fatal |= self.record(ev, i, vs, ve);
            }
            self.rules[i].p = e;
            if e > limit && !eoi {
                // Threads that began inside the match are moot; replay the
                // starts after it.
                self.rules[i].threads.clear();
                self.rules[i].deferred = None;
                self.advance(i, e, n, cache.as_deref_mut());
                self.drop_terminal(i, cache.as_deref_mut());
            }
        }
    }

    /// Every start of rule `i` before `limit` is searched: `p` moves there
    /// and only what may start after it stays to be searched.
    fn settled(&mut self, i: usize, limit: usize) {
        let st = &mut self.rules[i];
        st.p = st.p.max(limit);
        st.dirty = match st.dirty {
            Some((_, hi)) if hi >= st.p => Some((st.p, hi)),
            _ => None,
        };
    }

    /// Drops rule `i`'s threads whose state nothing can change any more.
    fn drop_terminal(&mut self, i: usize, cache: Option<&mut LazyCache>) {
        let (Some(dfa), Some(cache)) = (&self.plan.rules[i].dfa, cache) else {
            return;
        };
        let st = &mut self.rules[i];
        if st.threads.is_empty() || cache.clear_count() != st.clears {
            return;
        }
        // Bit `k`: thread `k` is terminal (threads past the 64th are
        // rare; their flags go to a vector).
        let mut flags = 0u64;
        let mut more: Vec<bool> = Vec::new();
        for (k, thread) in st.threads.iter().enumerate() {
            // Sorted by state: a lookup at every push with threads costs a
            // binary search, not a scan of up to MAX_TERMINAL_MEMO entries.
            let t = match st.terminal.binary_search_by_key(&thread.state, |e| e.0) {
                Ok(at) => st.terminal[at].1,
                Err(at) => {
                    let t = is_terminal(dfa, cache, thread.state);
                    if cache.clear_count() != st.clears {
                        // Ids changed under us: keep everything (conservative).
                        return;
                    }
                    if st.terminal.len() < MAX_TERMINAL_MEMO {
                        st.terminal.insert(at, (thread.state, t));
                    }
                    t
                }
            };
            if t && thread.matched {
                mark(&mut st.dirty, thread.start);
            }
            if k < 64 {
                flags |= u64::from(t) << k;
            } else {
                more.push(t);
            }
        }
        if flags == 0 && !more.contains(&true) {
            return;
        }
        let mut k = 0;
        st.threads.retain(|_| {
            let t = if k < 64 {
                flags >> k & 1 != 0
            } else {
                more[k - 64]
            };
            k += 1;
            !t
        });
    }

    /// Blocks on the first fired FATAL trigger.
    fn block_on_fired(&mut self, ev: &Evaluator) {
        let slots = &self.plan.slots;
        let triggers: Vec<(String, Severity)> = self
            .fired
            .iter()
            .enumerate()
            .filter(|(_, f)| **f)
            .map(|(s, _)| (self.slot_id(ev, s).to_string(), slots[s].severity))
            .collect();
        let deciding = self
            .fired
            .iter()
            .enumerate()
            .find(|(s, f)| **f && slots[*s].severity == Severity::Fatal)
            .map(|(s, _)| s);
        if let Some(s) = deciding {
            let (action, reason) = slot_action(ev, s);
            self.blocked = Some(Blocked {
                action: action.to_string(),
                reason: reason.to_string(),
                triggers,
            });
        }
    }

    fn slot_id<'a>(&self, ev: &'a Evaluator, s: usize) -> &'a str {
        match ev.rules.get(s) {
            Some(r) => r.id.as_str(),
            None => ev
                .program
                .hard_rules
                .get(s - ev.rules.len())
                .map_or("", |h| h.id.as_str()),
        }
    }
}

/// The action and reason of trigger slot `s`.
fn slot_action(ev: &Evaluator, s: usize) -> (&str, &str) {
    match ev.rules.get(s) {
        Some(r) => (r.action.as_str(), r.reason.as_str()),
        None => ev
            .program
            .hard_rules
            .get(s - ev.rules.len())
            .map_or(("", ""), |h| (h.action.as_str(), h.reason.as_str())),
    }
}

/// Widens a rule's unsearched range to include start `s`.
#[inline]
pub(super) fn mark(dirty: &mut Option<(usize, usize)>, s: usize) {
    *dirty = Some(match *dirty {
        Some((lo, hi)) => (lo.min(s), hi.max(s)),
        None => (s, s),
    });
}

/// Where [`Core::whitespace_cut`] stands, in absolute offsets: the last L − 1
/// code points begin at `limit` (code point `limit_chars` of the stream),
/// the text from the release point to `upto` has been looked at, and the
/// last whitespace there outside every region ends at `last`.
#[derive(Debug, Default)]
pub(super) struct WhitespaceScan {
    pub(super) limit: usize,
    pub(super) limit_chars: usize,
    pub(super) upto: usize,
    pub(super) last: Option<usize>,
}
