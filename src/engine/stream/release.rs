//! Writing what a push releases (`Core::release`): the [§6.3](docs/evaluation.md#s6-3) sweep over the
//! committed matches before the earliest live start, the `lookahead_chars`
//! cut, and dropping released text from the buffer. Reads the committed
//! matches and never finds or commits one; it shifts the rules' offsets
//! only when it drops released bytes.
//!
//! # Design
//!
//! The matches of all rules merge into regions by the [§6.3](docs/evaluation.md#s6-3) sweep; the
//! session releases the text before the earliest live start of any rule,
//! cut before any region that a later match could still extend. A release
//! visits only the committed matches that start before its cut (they wait
//! in sweep order), and with `lookahead_chars` the whitespace scan keeps
//! where it stands across pushes. Released text is dropped from the buffer
//! once it is most of it, keeping the last released character as
//! look-behind context (and the code points of the widest `context.before`
//! window).

use super::core::{Core, Pending};
use super::threads::{char_count, next_char};
use crate::engine::{write_regions, Region};
use std::sync::Arc;

impl Core {
    /// Releases the settled text before `q` (and after the last release),
    /// writing it at the end of `out`; whether it holds a placeholder.
    #[inline]
    pub(super) fn release(&mut self, q: usize, n: usize, eoi: bool, out: &mut String) -> bool {
        // A blocked session, or one whose text the view's side writes,
        // writes nothing here.
        let writes = self.tap.is_none() && self.blocked.is_none();
        if self.pending.is_empty() && (self.opts.lookahead_chars == 0 || eoi) {
            // Nothing to redact: the settled text goes out as it is.
            if q <= self.head {
                return false;
            }
            if writes {
                write_into(out, &self.buf[self.head..q]);
            }
            self.released_chars += char_count(&self.buf[self.head..q]);
            self.head = q;
            self.compact();
            return false;
        }
        if q <= self.head {
            return false;
        }
        // The [§6.3](docs/evaluation.md#s6-3) sweep over the matches that start before `q`, in order:
        // a match starting at `q` or after cannot join a region that ends
        // by `q`, and one that ends after it stops the release anyway.
        let at = self.dropped;
        let plan = Arc::clone(&self.plan);
        let mut regions: Vec<Region<&str>> = Vec::new();
        for p in self.pending.range(..Pending::first_at(at + q)) {
            let (s, e) = (p.start - at, p.end.0 - at);
            match regions.last_mut() {
                Some(last) if s < last.end => last.end = last.end.max(e),
                _ => regions.push(Region {
                    start: s,
                    end: e,
                    placeholder: plan.placeholders[p.matcher].as_str(),
                }),
            }
        }
        // A region that a later match (starting at `q` or after) could still
        // extend is not released, nor anything after it.
        let mut cut = q;
        let mut closed = regions.len();
        if let Some(k) = regions.iter().position(|r| r.end > q || r.start >= q) {
            cut = cut.min(regions[k].start);
            closed = k;
        }
        if self.opts.lookahead_chars > 0 && !eoi {
            cut = self.whitespace_cut(cut, n, &regions[..closed]);
        }
        let regions = &regions[..regions[..closed]
            .iter()
            .take_while(|r| r.end <= cut)
            .count()];
        if cut <= self.head {
            return false;
        }
        match self.tap.as_mut() {
            // A blocked session writes nothing (its releases are dropped).
            _ if self.blocked.is_some() => {}
            Some(tap) => tap.extend(regions.iter().map(|r| Region {
                start: self.dropped + r.start,
                end: self.dropped + r.end,
                placeholder: r.placeholder.to_string(),
            })),
            None => {
                // One allocation for a new release, of its exact size.
                let removed: usize = regions.iter().map(|r| r.end - r.start).sum();
                let added: usize = regions.iter().map(|r| r.placeholder.len()).sum();
                out.reserve((cut - self.head).saturating_sub(removed) + added);
                write_regions(out, &self.buf, self.head, cut, regions);
            }
        }
        let redacted = !regions.is_empty();
        self.released_chars += char_count(&self.buf[self.head..cut]);
        // Every match that starts before the cut ends by it.
        while self.pending.first().is_some_and(|p| p.start < at + cut) {
            self.pending.pop_first();
        }
        self.head = cut;
        self.compact();
        redacted
    }

    /// The Python runtime's cut (`lookahead_chars` = L): just after the last
    /// whitespace character followed by at least L − 1 code points, outside
    /// every region and no later than `cut`; nothing when there is none.
    ///
    /// Incremental: where the last L − 1 code points begin and the last
    /// such whitespace found so far are kept across pushes, so a long run
    /// without whitespace is scanned once, not once a push.
    #[inline]
    fn whitespace_cut(&mut self, cut: usize, n: usize, regions: &[Region<&str>]) -> usize {
        let at = self.dropped;
        let (head, end_abs) = (at + self.head, at + n);
        let ws = &mut self.ws;
        // The absolute code-point index where the last L − 1 begin.
        let Some(target) = self
            .pushed_chars
            .checked_sub(self.opts.lookahead_chars - 1)
            .filter(|&t| t > self.released_chars)
        else {
            return self.head;
        };
        if ws.limit < head {
            ws.limit = head;
            ws.limit_chars = self.released_chars;
        }
        while ws.limit_chars < target && ws.limit < end_abs {
            ws.limit = at + next_char(&self.buf, ws.limit - at);
            ws.limit_chars += 1;
        }
        let end = cut.min(ws.limit - at);
        if ws.upto < head {
            ws.upto = head;
            ws.last = None;
        }
        if ws.last.is_some_and(|w| w <= head) {
            ws.last = None;
        }
        if at + end < ws.upto {
            // The end moved back (a region now stops the cut earlier): look
            // back from it, as the whole-text rule does.
            for (idx, c) in self.buf[self.head..end].char_indices().rev() {
                let w = self.head + idx;
                if c.is_whitespace() && !regions.iter().any(|r| r.start <= w && w < r.end) {
                    return w + c.len_utf8();
                }
            }
            return self.head;
        }
        let mut k = 0;
        for (idx, c) in self.buf[ws.upto - at..end].char_indices() {
            if !c.is_whitespace() {
                continue;
            }
            let w = ws.upto - at + idx;
            while regions.get(k).is_some_and(|r| r.end <= w) {
                k += 1;
            }
            if regions.get(k).is_none_or(|r| w < r.start) {
                ws.last = Some(at + w + c.len_utf8());
            }
        }
        ws.upto = at + end;
        ws.last.map_or(self.head, |w| w - at)
    }

    /// Drops released bytes once they are most of the buffer, keeping the
    /// last released character as look-behind context.
    ///
    /// Inlined check: it runs at every release, and drops bytes once in
    /// hundreds of them.
    #[inline]
    fn compact(&mut self) {
        if self.head < 4096 || self.head * 2 < self.buf.len() {
            return;
        }
        self.drop_released();
    }

    /// [`Self::compact`]'s work, out of line.
    #[inline(never)]
    fn drop_released(&mut self) {
        let mut keep = self.head - 1;
        while !self.buf.is_char_boundary(keep) {
            keep -= 1;
        }
        // Codons with a `context` look back at released text: keep the
        // widest window's code points too.
        if self.context_chars > 0 {
            keep = self.buf[..keep]
                .char_indices()
                .rev()
                .take(self.context_chars)
                .last()
                .map_or(keep, |(k, _)| k);
        }
        let shift = keep;
        self.buf.drain(..shift);
        self.dropped += shift;
        self.origin = false;
        self.head -= shift;
        self.scanned -= shift;
        // Idle rules hold no position that the shift concerns.
        for i in self.busy.iter(self.rules.len()) {
            let r = &mut self.rules[i];
            r.p -= shift;
            r.threads.iter_mut().for_each(|t| t.start -= shift);
            r.deferred = r.deferred.map(|(at, req)| (at - shift, req));
            r.dirty = r
                .dirty
                .map(|(lo, hi)| (lo.max(shift) - shift, hi.max(shift) - shift));
        }
    }
}

/// Appends `text` to `out`; into an empty `out`, as one allocation of its
/// size (a release a push returns on its own).
#[inline]
fn write_into(out: &mut String, text: &str) {
    if out.capacity() == 0 {
        *out = text.to_owned();
    } else {
        out.push_str(text);
    }
}
