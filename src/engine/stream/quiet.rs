//! The common push of prose ([`Core::settle_quiet`]): a short piece in
//! which every rule it concerns only opens, extends or ends a deferred
//! thread (the e-mail codon at each word), with no thread under way, nothing
//! to search and nothing waiting for a release. It settles exactly what the
//! general step settles (a property test compares the two piece by piece),
//! with a lighter pass over the bytes and none of the general step's
//! bookkeeping. Must not simulate a thread, search, commit a match or write
//! text: a piece outside this case changes nothing here and takes the
//! general step.
//!
//! # Why
//!
//! A 16-code-point push of prose cost about 1,100 instructions through the
//! general step, of which the pass over its bytes (each byte's starting,
//! inner and required rules) was under a fifth; the rest was the step's
//! checks for threads, matches, searches and waiting values that a piece of
//! prose has none of. This case is most pushes of a reply cut by the server
//! (82% of them on the stream bench's dense text): a session of prose in
//! such pieces went from about 3.2× one evaluation to 2.6× (BENCHMARKS.md,
//! "The quiet push of prose").

use super::core::Core;
use super::mask::RuleMask;
use super::plan::LiveCaches;
use super::threads::class_of;

/// Pieces up to this many bytes are looked at (the server's 16 code points
/// are at most 64); a longer one takes the general step.
const QUIET_MAX: usize = 64;

/// In [`Core::settle_quiet`]'s list of rules to move: no non-inner byte in
/// the piece (a deferred run that goes on).
const NO_LAST: u8 = u8::MAX;

impl Core {
    /// Settles `buf[from..n]` when it is a quiet piece and returns where
    /// the release must stop (the earliest deferred start, or `n`); `None`,
    /// having changed nothing, for any other piece.
    ///
    /// The case: no committed match waits, the rules with anything under
    /// way (`busy`) are exactly those with a deferred thread and nothing
    /// else (no threads, no unsearched starts, no value waiting for its
    /// context), the piece holds no required byte of a rule it concerns
    /// (so no match can end in it), and each rule it concerns either
    /// ([`Core::advance_all`]'s two cheap cases) has a non-inner byte in
    /// the piece with only keep bytes after it (its threads settle there
    /// matchless and one may be deferred at the next start), or is
    /// deferred and the whole piece extends its run.
    pub(super) fn settle_quiet(
        &mut self,
        from: usize,
        n: usize,
        live: &LiveCaches,
    ) -> Option<usize> {
        let count = self.rules.len();
        if n - from > QUIET_MAX
            || count > 64
            || self.busy != self.threaded
            || !self.pending.is_empty()
            || self.tap.is_some()
            || self.blocked.is_some()
            || self.opts.lookahead_chars > 0
            || !self.defers()
            || !self.quiet_on()
        {
            return None;
        }
        // What is under way is deferred threads only (checked before the
        // bytes: a run of digits being simulated fails here at once).
        for i in self.threaded.bits() {
            let st = &self.rules[i];
            if !st.threads.is_empty()
                || st.dirty.is_some()
                || !st.awaiting.is_empty()
                || st.deferred.is_none_or(|(_, required)| required)
            {
                return None;
            }
        }
        let plan = &*self.plan;
        let buf = self.buf.as_bytes();
        let bytes = &buf[from..n];
        let before = from.checked_sub(1).map_or(0, |k| class_of(buf[k]));
        // Two loads a byte: the rules each byte can start (with the word
        // assertion, by the class of the byte before) and needs.
        let (mut starts, mut needs, mut c) = (RuleMask::EMPTY, RuleMask::EMPTY, before);
        for &b in bytes {
            let k = usize::from(b);
            starts |= plan.first_mask[c][k];
            needs |= plan.required_mask[k];
            c = class_of(b);
        }
        let active = self.threaded | starts;
        if !(active & needs).is_empty() {
            return None;
        }
        let class_before = |k: usize| k.checked_sub(1).map_or(before, |k| class_of(bytes[k]));
        // Every rule to move and its last non-inner byte, all checked
        // before any changes.
        let mut moved = [(0u8, NO_LAST); 64];
        let mut k = 0;
        for i in active.bits() {
            let bit = RuleMask::of(i);
            let last = bytes
                .iter()
                .rposition(|&b| (plan.inner_mask[usize::from(b)] & bit).is_empty());
            if !self.threaded.contains(i) {
                // Started in the piece: nothing to do unless a byte after
                // its last non-inner one starts it (the general step's
                // idle rule).
                let after = last.map_or(0, |l| l + 1);
                let tail = (after..bytes.len())
                    .any(|j| plan.first_mask[class_before(j)][usize::from(bytes[j])].contains(i));
                if !tail {
                    continue;
                }
            }
            let st = &self.rules[i];
            if st.dirty.is_some() || !st.awaiting.is_empty() {
                return None;
            }
            let cache = live.0[i].as_ref();
            let movable = match last {
                Some(l) => self.can_reopen(i, from + l, n, cache),
                None => {
                    let rule = &plan.rules[i];
                    rule.dfa.is_some()
                        && cache.is_some_and(|c| c.clear_count() == st.clears)
                        && st.threads.is_empty()
                        && st.deferred.is_some_and(|(_, required)| !required)
                        && bytes.iter().all(|&b| rule.keep[usize::from(b)])
                }
            };
            if !movable {
                return None;
            }
            // Both below 64: `count` and the piece's length are.
            let last = last.map_or(Some(NO_LAST), |l| u8::try_from(l).ok());
            let (Ok(i), Some(last)) = (u8::try_from(i), last) else {
                return None;
            };
            moved[k] = (i, last);
            k += 1;
        }
        // The general step's settling, for these rules only: every other
        // rule stays idle.
        let was_busy = self.busy;
        let (mut still, mut q) = (RuleMask::EMPTY, n);
        for &(i, last) in &moved[..k] {
            let i = usize::from(i);
            if last != NO_LAST {
                self.reopen(i, from + usize::from(last), n);
            }
            let st = &mut self.rules[i];
            if !was_busy.contains(i) {
                st.p = from;
            }
            match st.deferred {
                Some((s, _)) => {
                    st.p = st.p.max(s);
                    still.insert(i);
                    q = q.min(s);
                }
                None => st.p = st.p.max(n),
            }
        }
        self.busy = still;
        self.threaded = still;
        #[cfg(test)]
        {
            self.quiet_steps += 1;
        }
        Some(q)
    }

    /// Whether the quiet case is taken (always, outside tests).
    #[inline]
    fn quiet_on(&self) -> bool {
        #[cfg(test)]
        return self.quiet;
        #[cfg(not(test))]
        true
    }
}
