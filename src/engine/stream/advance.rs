//! Feeding a piece to the rules' threads (`Core::advance_all` and its
//! helpers): which rules a piece concerns, which bytes need a transition,
//! and deferral of a thread over a run of keep bytes. Changes only the
//! threads' side of [`RuleState`] (threads, deferred thread, unsearched
//! range, start states and their cache's bookkeeping) and the scratch
//! buffers: it must not commit a match, move a rule's settled position or
//! release text.
//!
//! # Design
//!
//! Each byte costs one transition per live thread (see [`Thread`]): the work
//! is linear in the text and independent of how it was cut. Most bytes cost
//! less:
//!
//! - A thread opens only at a byte that can begin a match (the plan's first
//!   bytes), and where the rule's leading word assertion holds.
//! - Only the text after a rule's last non-inner byte in a piece is
//!   simulated: every match that starts before it also ends before it. One
//!   forward pass over a piece of up to 64 bytes (two, one backward, over a
//!   longer one) finds that byte for every rule at once. Skipped text that
//!   may hold a match is left to the exact search, or simulated when it is
//!   short (up to [`SIMULATE_BELOW`] bytes: cheaper than a search).
//! - A thread that would open at the start of a run of keep bytes at the end
//!   of a piece, with no other thread live, is certainly live and the
//!   earliest live start, so it is *deferred*: recorded by its start and not
//!   simulated. The next piece either extends the run (still deferred), ends
//!   it at a byte no partial match can consume (then settled like skipped
//!   text: the exact search looks only if a required byte occurred since its
//!   start), or brings another byte (then simulated from its start). A word
//!   of prose cut across pieces thus costs the e-mail codon no transition at
//!   all, and deferral releases exactly what simulation would (a unit
//!   property test compares them piece by piece).
//!
//! A push looks only at the rules it can concern: those with threads,
//! unsearched starts or no automaton (a mask kept across pushes) and those
//! that one of its bytes can start, where the rule's leading word assertion
//! can hold (one table per class of the byte before: in prose,
//! `\b(?:MRN|EHR|RX)` wakes only at words that begin with `m`, `e` or `r`).
//! Of those, a rule without threads whose skipped text may hold no match and
//! whose bytes after its last non-inner byte start nothing is not visited
//! either. Every other rule is idle, settled up to the end of the text
//! scanned so far, and costs nothing.

use super::core::{mark, Core, RuleState};
use super::mask::RuleMask;
use super::plan::{LiveCaches, LiveRule};
use super::threads::{class_of, dedup, lead_holds, start_state, Thread};
use regex_automata::hybrid::dfa::{Cache as LazyCache, DFA};
use regex_automata::util::look::LookMatcher;
use regex_automata::util::start;
use regex_automata::Anchored;

/// Skipped text that may hold a match is simulated below this many bytes
/// (a few transitions a byte) and left to one exact search above it.
const SIMULATE_BELOW: usize = 64;
/// Pieces up to this many bytes take one pass in [`Core::advance_all`]
/// (16 code points are at most 64 bytes; `Core::scratch` holds 65 entries).
const ONE_PASS_MAX: usize = 64;

/// What [`Core::advance_all`] learns of a piece in its pass (or two) over
/// the bytes, for all rules at once (only the rules with a bit of their
/// own, see [`RuleMask`]).
struct PieceScan {
    /// The rules that a byte of the piece can start.
    starts: RuleMask,
    /// The rules that a byte of the piece is a required byte of.
    needs: RuleMask,
    /// The rules with a non-inner byte in the piece ([`RuleMask::ALL`]
    /// when each rule's last one is looked up in `Core::scratch` instead).
    outer: RuleMask,
    /// The rules that a byte after their last non-inner byte can start.
    tail: RuleMask,
    /// The rules that may have a match before their last non-inner byte:
    /// the piece has a byte that can start one and a required one up to it.
    may: RuleMask,
}

impl Core {
    /// Feeds `buf[from..to]` to rule `i`'s threads, opening one at every
    /// character that can begin a match.
    pub(super) fn advance(
        &mut self,
        i: usize,
        from: usize,
        to: usize,
        cache: Option<&mut LazyCache>,
    ) {
        let rule = &self.plan.rules[i];
        let bytes = &self.buf.as_bytes()[from..to];
        let outer = bytes.iter().rposition(|&b| !rule.inner[usize::from(b)]);
        let skip = outer.map(|k| {
            let skipped = &bytes[..=k];
            let may_match = skipped.iter().any(|&b| rule.can_start(b))
                && skipped.iter().any(|&b| rule.required[usize::from(b)]);
            (from + k, may_match)
        });
        self.advance_with(i, from, to, skip, true, cache);
    }

    /// [`Self::advance`] with the rule's last non-inner byte in
    /// `buf[from..to]` (if any) already found, and whether the text up to it
    /// may hold a match (a byte that can begin one and one it needs);
    /// `needed`: whether `buf[from..to]` may hold one of the rule's required
    /// bytes (false only when a scan of the piece found none, so that the
    /// e-mail codon's pieces of prose are not scanned again for an `@`).
    fn advance_with(
        &mut self,
        i: usize,
        from: usize,
        to: usize,
        skip: Option<(usize, bool)>,
        needed: bool,
        cache: Option<&mut LazyCache>,
    ) {
        let defer = self.defers();
        let rule = &self.plan.rules[i];
        let (Some(dfa), Some(cache)) = (&rule.dfa, cache) else {
            return;
        };
        let st = &mut self.rules[i];
        let bytes = self.buf.as_bytes();
        if cache.clear_count() != st.clears {
            rederive(dfa, st, bytes, self.origin, from, cache);
        }
        let looks = LookMatcher::new();
        let mut j = from;
        // A thread deferred at the end of the last piece starts here: its
        // bytes so far are keep bytes, none was simulated.
        let deferred = st.deferred.take();
        let mut may_match_deferred = false;
        if let Some((at, required)) = deferred {
            j = at;
            match skip {
                Some((last, _)) => {
                    may_match_deferred = required
                        || needed
                            && bytes[from..=last]
                                .iter()
                                .any(|&b| rule.required[usize::from(b)]);
                }
                None if bytes[from..to].iter().all(|&b| rule.keep[usize::from(b)]) => {
                    // The run goes on: still live, still not simulated.
                    let required = required
                        || needed
                            && bytes[from..to]
                                .iter()
                                .any(|&b| rule.required[usize::from(b)]);
                    st.deferred = Some((at, required));
                    return;
                }
                // Another byte: simulate from the thread's start.
                None => {}
            }
        }
        // A thread that consumes a byte outside the rule's inner bytes dies
        // or settles, so a match that starts before the last such byte also
        // ends before it: only the text after it needs simulating. Where a
        // match may lie in the skipped text (a thread was under way, or a
        // byte that can begin one and one it needs are there), the exact
        // search looks instead.
        if let Some((last, may_match)) = skip {
            // A deferred thread opened at `j` (a byte that can begin a
            // match): whether a match may lie in the skipped text also
            // depends on its bytes before this piece.
            let short = last + 1 - j <= SIMULATE_BELOW;
            // Short skipped text is also checked for room for a match: a
            // digit rule then skips most pieces with a few digits in them.
            let may_match =
                (may_match || may_match_deferred) && (!short || rule.has_room(&bytes[j..=last]));
            if may_match && short {
                // Short: simulating it is cheaper than an exact search.
            } else {
                // Threads under way end within the skipped text: run them
                // (and only them) until they do, to learn whether they saw
                // a match; a match that may begin there is left to the
                // exact search.
                if !st.threads.is_empty() {
                    run_out(dfa, st, cache, &bytes[j..=last]);
                }
                if may_match {
                    mark(&mut st.dirty, j);
                    mark(&mut st.dirty, last);
                }
                j = last + 1;
            }
        }
        // From `keep_from` on, every byte is a keep byte: a thread that
        // opens there with no other thread live is deferred, not simulated.
        let keep_from = if rule.defers && defer {
            to - bytes[j.min(to)..to]
                .iter()
                .rev()
                .take_while(|&&b| rule.keep[usize::from(b)])
                .count()
        } else {
            to
        };
        while j < to {
            if st.threads.is_empty() {
                // Skip bytes that cannot begin a match.
                match bytes[j..to].iter().position(|&b| rule.can_start(b)) {
                    Some(k) => j += k,
                    None => break,
                }
                if j >= keep_from
                    && rule
                        .lead
                        .is_none_or(|l| lead_holds(&looks, l, rule.lead_ascii.as_ref(), bytes, j))
                {
                    // Bytes before this piece (a deferred thread replayed
                    // from its start) are not covered by `needed`.
                    let required = (needed || j < from)
                        && bytes[j..to].iter().any(|&b| rule.required[usize::from(b)]);
                    st.deferred = Some((j, required));
                    break;
                }
            }
            step(dfa, rule, st, cache, bytes, j, self.origin, &looks);
            j += 1;
        }
    }

    /// Whether threads may be deferred (always, outside tests).
    #[inline]
    pub(super) fn defers(&self) -> bool {
        #[cfg(test)]
        return self.defer;
        #[cfg(not(test))]
        true
    }

    /// [`Self::advance`] for every rule over `buf[from..to]`, with one
    /// forward pass over the bytes for the first 64 rules at once (two for
    /// a piece longer than [`ONE_PASS_MAX`], see [`Self::two_passes`]): each
    /// rule's last non-inner byte, and the bytes that can begin and that
    /// complete a match before it. Returns the rules it
    /// looked at: those with threads and those the bytes can start (no
    /// other rule has anything to simulate).
    #[inline]
    pub(super) fn advance_all(
        &mut self,
        from: usize,
        to: usize,
        live: &mut LiveCaches,
    ) -> RuleMask {
        let plan = &*self.plan;
        let count = self.rules.len();
        let buf = self.buf.as_bytes();
        let bytes = &buf[from..to];
        // The class of the byte before the piece, as `lead_holds` sees it.
        let before = from.checked_sub(1).map_or(0, |k| class_of(buf[k]));
        // A short piece (the server's 16 code points are at most 64 bytes)
        // takes one forward pass that also records each byte's non-inner
        // rules (in `scratch`): a rule's last non-inner byte is then looked
        // up only for the few rules simulated. A long one takes two passes,
        // which stop early and need no room per byte.
        let one_pass = bytes.len() <= ONE_PASS_MAX;
        let PieceScan {
            starts,
            needs,
            outer,
            tail,
            may,
        } = if one_pass {
            // Per byte: the rules it can start (`f`, with the word
            // assertion) and those for which it is not inner (`o`). `tail`
            // keeps the rules started after their last non-inner byte so
            // far; `may` gathers those with a starting and a required byte
            // up to one of their non-inner bytes (both grow with the text,
            // so up to the last one). A rule without a non-inner byte that
            // the piece can start is in `tail`, so `outer` is left to the
            // lookup (all rules may have one).
            let (mut starts, mut needs, mut tail, mut may, mut c) = (
                RuleMask::EMPTY,
                RuleMask::EMPTY,
                RuleMask::EMPTY,
                RuleMask::EMPTY,
                before,
            );
            for (slot, &b) in self.scratch.iter_mut().zip(bytes) {
                let k = usize::from(b);
                let f = plan.first_mask[c][k];
                let inner = plan.inner_mask[k];
                starts |= f;
                needs |= plan.required_mask[k];
                may |= starts & needs & !inner;
                tail = (tail | f) & inner;
                slot.1 = !inner;
                c = class_of(b);
            }
            PieceScan {
                starts,
                needs,
                outer: RuleMask::ALL,
                tail,
                may,
            }
        } else {
            self.two_passes(from, to, before)
        };
        let active = self.threaded | starts;
        if active.is_empty() {
            return RuleMask::EMPTY;
        }
        // Past 64 rules, the last bit stands for every rule from the 64th
        // on: those are advanced one by one.
        let (exact, shared) = (active.without_shared(count), active.has_shared(count));
        let outer = outer & exact;
        // A rule without threads, with no match possible before its last
        // non-inner byte and no start after it, has nothing to simulate.
        let idle = exact & !self.threaded & outer & !may & !tail;
        // No shared bit in `exact`: its bits are its rules.
        for i in (exact & !idle).bits() {
            let last = if !outer.contains(i) {
                None
            } else if one_pass {
                self.scratch[..to - from]
                    .iter()
                    .rposition(|&(_, o)| o.contains(i))
            } else {
                Some(self.last_outer[i])
            };
            let skip = last.map(|k| (from + k, may.contains(i)));
            let needed = needs.contains(i);
            let cache = live.0[i].as_mut();
            if let (Some((last, false)), false) = (skip, needed) {
                if self.reopen_word(i, last, to, cache.as_deref()) {
                    continue;
                }
            }
            self.advance_with(i, from, to, skip, needed, cache);
        }
        if shared {
            for (i, cache) in live.0.iter_mut().enumerate().skip(63) {
                self.advance(i, from, to, cache.as_mut());
            }
        }
        active & !idle
    }

    /// [`Self::advance_all`]'s look at a long piece, in two passes over
    /// the bytes for the first 64 rules at once: one forwards for the rules
    /// the piece can start and has required bytes for (it stops once every
    /// rule has both), one backwards for each rule's last non-inner byte
    /// (kept in `last_outer`) and the rules that a byte after it can start.
    #[inline]
    fn two_passes(&mut self, from: usize, to: usize, before: usize) -> PieceScan {
        let plan = &*self.plan;
        let count = self.rules.len();
        let bytes = &self.buf.as_bytes()[from..to];
        let class_before = |k: usize| k.checked_sub(1).map_or(before, |k| class_of(bytes[k]));
        // Every rule's bit: a long piece stops being looked at once each
        // rule can start in it and has its required bytes there.
        let all = RuleMask::first(count);
        let (mut starts, mut needs, mut c) = (RuleMask::EMPTY, RuleMask::EMPTY, before);
        for block in bytes.chunks(256) {
            (starts, needs, c) = block.iter().fold((starts, needs, c), |(f, r, c), &b| {
                let k = usize::from(b);
                (
                    f | plan.first_mask[c][k],
                    r | plan.required_mask[k],
                    class_of(b),
                )
            });
            if starts & needs == all {
                break;
            }
        }
        let active = self.threaded | starts;
        if active.is_empty() {
            return PieceScan {
                starts: RuleMask::EMPTY,
                needs,
                outer: RuleMask::EMPTY,
                tail: RuleMask::EMPTY,
                may: RuleMask::EMPTY,
            };
        }
        let exact = active.without_shared(count);
        // Backwards: each rule's last non-inner byte, and the rules that a
        // byte after it can start. Every byte writes its (position, rules)
        // entry and only one that ends some rule's search is kept: no
        // branch depends on the bytes but the loop's end (a rule ends at
        // most once, so at most 64 entries are kept).
        let found = &mut self.scratch;
        let mut kept = 0usize;
        let mut pending = exact;
        let mut tail = RuleMask::EMPTY;
        for (k, &b) in bytes.iter().enumerate().rev() {
            if pending.is_empty() {
                break;
            }
            let hit = !plan.inner_mask[usize::from(b)] & pending;
            pending &= !hit;
            tail |= plan.first_mask[class_before(k)][usize::from(b)] & pending;
            found[kept] = (k, hit);
            kept += usize::from(!hit.is_empty());
        }
        let outer = exact & !pending;
        let found = &found[..kept];
        for &(k, hit) in found {
            for i in hit.bits() {
                self.last_outer[i] = k;
            }
        }
        // Forwards, by increasing position: the starting and required
        // bytes seen up to each rule's last non-inner byte, for the rules
        // that the whole piece has both for (for the others no match can
        // lie in the skipped text).
        let mut may = RuleMask::EMPTY;
        let candidates = starts & needs & outer;
        if !candidates.is_empty() {
            let (mut first, mut required, mut at) = (RuleMask::EMPTY, RuleMask::EMPTY, 0usize);
            for &(k, hit) in found.iter().rev() {
                if (hit & candidates).is_empty() {
                    continue;
                }
                // Without the word assertion (a superset, one load fewer a
                // byte): this pass runs over most of a long piece, until
                // every candidate has both kinds of bytes.
                if first & required & candidates != candidates {
                    for &b in &bytes[at..=k] {
                        first |= plan.first_mask[2][usize::from(b)];
                        required |= plan.required_mask[usize::from(b)];
                    }
                }
                at = k + 1;
                may |= first & required & hit;
            }
        }
        PieceScan {
            starts,
            needs,
            outer,
            tail,
            may,
        }
    }

    /// Rule `i` in the common case of a word of prose cut across pieces
    /// (the e-mail codon at every piece): no threads, the piece has a
    /// non-inner byte at `last` with no match possible before it (no
    /// required byte in the piece, none in a deferred thread's run), and
    /// only keep bytes after it. Every thread then settles at `last`
    /// matchless, and a thread is deferred at the first start after it,
    /// all without a transition: what [`Self::advance_with`] does in this
    /// case, without its set-up. Returns false, having changed nothing,
    /// outside this case.
    #[inline]
    fn reopen_word(&mut self, i: usize, last: usize, to: usize, cache: Option<&LazyCache>) -> bool {
        if !self.can_reopen(i, last, to, cache) {
            return false;
        }
        self.reopen(i, last, to);
        true
    }

    /// Whether [`Self::reopen_word`]'s case holds for rule `i`.
    #[inline]
    pub(super) fn can_reopen(
        &self,
        i: usize,
        last: usize,
        to: usize,
        cache: Option<&LazyCache>,
    ) -> bool {
        let rule = &self.plan.rules[i];
        let st = &self.rules[i];
        rule.defers
            && self.defers()
            && rule.dfa.is_some()
            && cache.is_some_and(|c| c.clear_count() == st.clears)
            && st.threads.is_empty()
            && !st.deferred.is_some_and(|(_, required)| required)
            && self.buf.as_bytes()[last + 1..to]
                .iter()
                .all(|&b| rule.keep[usize::from(b)])
    }

    /// [`Self::reopen_word`]'s change, once [`Self::can_reopen`] said yes:
    /// the thread deferred at the first start after `last`, if any.
    #[inline]
    pub(super) fn reopen(&mut self, i: usize, last: usize, to: usize) {
        let rule = &self.plan.rules[i];
        let bytes = self.buf.as_bytes();
        let looks = LookMatcher::new();
        self.rules[i].deferred = (last + 1..to)
            .find(|&j| {
                rule.can_start(bytes[j])
                    && rule
                        .lead
                        .is_none_or(|l| lead_holds(&looks, l, rule.lead_ascii.as_ref(), bytes, j))
            })
            .map(|j| (j, false));
    }
}

/// Runs a rule's threads (no new ones) over `bytes`, at the end of which
/// they all die or settle, and marks the starts of those that saw a match.
fn run_out(dfa: &DFA, st: &mut RuleState, cache: &mut LazyCache, bytes: &[u8]) {
    // One thread is the common case (a word that began in the last piece):
    // no loops over threads, no retain, one exit at its death.
    if let [t] = st.threads.as_slice() {
        let Thread {
            start,
            state: mut sid,
            mut matched,
        } = *t;
        for &b in bytes {
            match dfa.next_state(cache, sid, b) {
                Ok(next) => {
                    sid = next;
                    matched |= next.is_match();
                    if next.is_dead() {
                        break;
                    }
                }
                Err(_) => {
                    matched = true;
                    break;
                }
            }
        }
        if matched {
            mark(&mut st.dirty, start);
        }
        st.threads.clear();
        return;
    }
    for &b in bytes {
        if st.threads.is_empty() {
            break;
        }
        let mut died = false;
        for t in st.threads.iter_mut() {
            match dfa.next_state(cache, t.state, b) {
                Ok(next) => {
                    t.state = next;
                    t.matched |= next.is_match();
                    died |= next.is_dead();
                }
                // Cannot happen without a clear limit: let the exact
                // search look.
                Err(_) => t.matched = true,
            }
        }
        if died {
            for t in st.threads.iter().filter(|t| t.state.is_dead() && t.matched) {
                mark(&mut st.dirty, t.start);
            }
            st.threads.retain(|t| !t.state.is_dead());
        }
    }
    for t in st.threads.iter().filter(|t| t.matched) {
        mark(&mut st.dirty, t.start);
    }
    st.threads.clear();
}

/// Recomputes a rule's thread states after its cache was cleared (the old
/// state ids are no longer valid) by replaying each from its start to `upto`.
fn rederive(
    dfa: &DFA,
    st: &mut RuleState,
    bytes: &[u8],
    origin: bool,
    upto: usize,
    cache: &mut LazyCache,
) {
    st.starts.iter_mut().for_each(|s| *s = None);
    st.terminal.clear();
    let before = cache.clear_count();
    let mut threads = Vec::with_capacity(st.threads.len());
    for t in &st.threads {
        let s = t.start;
        let lb = if s == 0 && origin {
            None
        } else {
            bytes.get(s.wrapping_sub(1)).copied()
        };
        let cfg = start::Config::new().anchored(Anchored::Yes).look_behind(lb);
        let Ok(mut sid) = dfa.start_state(cache, &cfg) else {
            continue;
        };
        for &b in &bytes[s..upto] {
            if let Ok(next) = dfa.next_state(cache, sid, b) {
                sid = next;
            }
        }
        if !sid.is_dead() {
            threads.push(Thread {
                start: s,
                state: sid,
                matched: t.matched,
            });
        }
    }
    dedup(&mut threads);
    st.threads = threads;
    // A clear during the replay leaves stale ids: the next check replays again.
    st.clears = if cache.clear_count() == before {
        before
    } else {
        usize::MAX
    };
}

/// Feeds byte `j` to a rule's threads and opens a thread there if a match
/// can begin at `j`; replays the threads if the cache was cleared meanwhile.
#[allow(clippy::too_many_arguments)]
#[inline]
fn step(
    dfa: &DFA,
    rule: &LiveRule,
    st: &mut RuleState,
    cache: &mut LazyCache,
    bytes: &[u8],
    j: usize,
    origin: bool,
    looks: &LookMatcher,
) {
    let b = bytes[j];
    let mut died = false;
    if let [t] = st.threads.as_mut_slice() {
        // One thread, the common case: no loop, no retain.
        if let Ok(next) = dfa.next_state(cache, t.state, b) {
            t.state = next;
            t.matched |= next.is_match();
            if next.is_dead() {
                if t.matched {
                    mark(&mut st.dirty, t.start);
                }
                st.threads.clear();
            }
        }
    } else {
        for t in st.threads.iter_mut() {
            // Without a clear limit a transition cannot fail; if it did, the
            // thread stays as it was (live: holds back, never leaks).
            if let Ok(next) = dfa.next_state(cache, t.state, b) {
                t.state = next;
                t.matched |= next.is_match();
                died |= next.is_dead();
            }
        }
    }
    if died {
        // A thread that saw a match leaves it to the exact search.
        for t in st.threads.iter().filter(|t| t.state.is_dead() && t.matched) {
            mark(&mut st.dirty, t.start);
        }
        st.threads.retain(|t| !t.state.is_dead());
    }
    if rule.can_start(b)
        && rule
            .lead
            .is_none_or(|l| lead_holds(looks, l, rule.lead_ascii.as_ref(), bytes, j))
    {
        let lb = if j == 0 && origin {
            None
        } else {
            bytes.get(j.wrapping_sub(1)).copied()
        };
        if let Some(s0) = start_state(dfa, cache, &mut st.starts, lb) {
            if let Ok(next) = dfa.next_state(cache, s0, b) {
                if !next.is_dead() {
                    st.threads.push(Thread {
                        start: j,
                        state: next,
                        matched: next.is_match(),
                    });
                }
            }
        }
    }
    if st.threads.len() > 1 {
        dedup(&mut st.threads);
    }
    if cache.clear_count() != st.clears {
        rederive(dfa, st, bytes, origin, j + 1, cache);
    }
}
