//! Whole-text sessions: how a version-2 pack (SPEC §16) that the
//! incremental engine cannot run (`Program::streams_natively`: a
//! `context.after` window, a codon read by two hard rules, a condition with
//! `and`, `not` or `len(...)`) is streamed until that engine learns them. The session
//! holds every piece, releases nothing before the end, and judges the
//! whole text once at `finish()`: it keeps §11.1's invariants (nothing is
//! released that a continuation could change; `R = W(T)` when not blocked)
//! at the price of promptness, and fails closed past
//! `stream.max_holdback_chars`. Never logs or keeps a payload past the
//! session.

use super::{Blocked, Core, Released};
use crate::engine::{Evaluator, Severity};

/// Most text a whole-mode session holds for its decision (the server's
/// body cap is lower; a pipe is not capped): past it the session stops
/// and decides the hold-back limit's action.
pub const MAX_WHOLE_BYTES: usize = 16 << 20;

impl Core {
    /// Holds `piece` (whole mode): nothing is released before the end.
    /// Past the hold-back limit the session blocks, failing closed, and
    /// goes on holding the text for the decision of the whole (as a
    /// blocked incremental session goes on judging); past
    /// [`MAX_WHOLE_BYTES`] it stops, and decides the limit's action.
    pub(super) fn hold_whole(&mut self, piece: &str) {
        if !self.append(piece) {
            return;
        }
        if self.blocked.is_none() && self.held_chars() > self.opts.max_holdback_chars {
            self.blocked = Some(Blocked::holdback());
        }
        if self.buf.len() > MAX_WHOLE_BYTES {
            self.blocked.get_or_insert_with(Blocked::holdback);
            self.held_out = true;
            self.stopped = true;
            self.buf = String::new();
        }
    }

    /// Ends a whole-mode session: judges the text once and releases W(T),
    /// or blocks on a FATAL trigger (with `block_on_fatal`).
    pub(super) fn finish_whole(&mut self, ev: &Evaluator) -> Released {
        if self.finished || self.stopped {
            self.finished = true;
            return Released::default();
        }
        self.finished = true;
        if self.blocked.is_some() {
            // Past the hold-back limit: nothing more leaves, and the
            // decision judges the text when asked.
            return Released::default();
        }
        let d = ev.evaluate_with(&self.buf, self.opts.normalize);
        self.whole_normalized = d.normalized;
        if self.opts.block_on_fatal && d.severity == Some(Severity::Fatal) {
            self.blocked = Some(Blocked {
                action: d.action.to_string(),
                reason: d.reason.unwrap_or_default().to_string(),
                triggers: d
                    .triggers
                    .iter()
                    .map(|t| (t.rule_id.to_string(), t.severity))
                    .collect(),
            });
            return Released::default();
        }
        let text = match d.severity {
            // No FATAL trigger: W(T) is the decision's clean text.
            None | Some(Severity::Warning) => d.clean_text,
            Some(Severity::Fatal) => ev.redacted_text_with(&self.buf, self.opts.normalize),
        };
        self.released_chars = self.pushed_chars;
        let redacted = !d.triggers.is_empty();
        Released { text, redacted }
    }
}
