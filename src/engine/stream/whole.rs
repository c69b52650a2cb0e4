//! Whole-text sessions: how a version-2 pack ([§16](docs/codons.md#s16)) that the
//! incremental engine cannot run (`Program::streams_natively`: a
//! `context.after` window, a codon read by two hard rules, a condition with
//! `and`, `not` or `len(...)`) is streamed until that engine learns them. The session
//! holds every piece, releases nothing before the end, and judges the
//! whole text once at `finish()`: it keeps [§11.1](docs/streaming.md#s11-1)'s invariants (nothing is
//! released that a continuation could change; `R = W(T)` when not blocked)
//! at the price of promptness, and fails closed past
//! `stream.max_holdback_chars`. Never logs or keeps a payload past the
//! session.

use super::{Blocked, Core, Released};
use crate::engine::decision::{Decision, Source, Trigger};
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

    /// Ends a whole-mode session: judges the text once (its decision is
    /// kept for [`Session::decision`], which must not judge it again) and
    /// releases W(T), or blocks on a FATAL trigger (with `block_on_fatal`).
    /// A session already blocked by the hold-back limit releases nothing.
    pub(super) fn finish_whole(&mut self, ev: &Evaluator) -> Released {
        if self.finished || self.stopped {
            self.finished = true;
            return Released::default();
        }
        self.finished = true;
        let (d, redacted) = ev.judge_whole(&self.buf, self.opts.normalize);
        self.judged = Some(Box::new(Judged::of(ev, &d)));
        if self.blocked.is_some() {
            return Released::default();
        }
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
        self.released_chars = self.pushed_chars;
        let redacted_any = !d.triggers.is_empty();
        // Without a FATAL trigger W(T) is the decision's clean text.
        let text = redacted.unwrap_or(d.clean_text);
        Released {
            text,
            redacted: redacted_any,
        }
    }
}

/// Where a trigger of a kept decision comes from.
#[derive(Debug, Clone, Copy)]
enum Slot {
    /// Custom rule `i` of the evaluator.
    Rule(usize),
    /// Hard rule `i` of its program.
    Hard(usize),
}

/// A whole-mode session's decision, kept without borrowing the evaluator:
/// each trigger by its place, its spans and its codons' places.
#[derive(Debug)]
pub(super) struct Judged {
    triggers: Vec<(Slot, Vec<[usize; 2]>, Vec<usize>)>,
    /// Whether the text was matched through a view that differed from it.
    pub(super) normalized: bool,
}

impl Judged {
    fn of(ev: &Evaluator, d: &Decision<'_>) -> Self {
        let program = &ev.program;
        let triggers = d
            .triggers
            .iter()
            .filter_map(|t| {
                let slot = match t.source {
                    Source::Rule => Slot::Rule(ev.rules.iter().position(|r| r.id == t.rule_id)?),
                    Source::Builtin | Source::HardRule => {
                        Slot::Hard(program.hard_rules.iter().position(|h| h.id == t.rule_id)?)
                    }
                };
                let codons = t
                    .codons
                    .iter()
                    .flatten()
                    .filter_map(|code| program.codons.iter().position(|c| c.code == *code))
                    .collect();
                Some((slot, t.spans.clone(), codons))
            })
            .collect();
        Self {
            triggers,
            normalized: d.normalized,
        }
    }

    /// The kept triggers, borrowing `ev` again.
    pub(super) fn triggers<'e>(&self, ev: &'e Evaluator) -> Vec<Trigger<'e>> {
        let program = &ev.program;
        self.triggers
            .iter()
            .filter_map(|(slot, spans, codons)| {
                Some(match *slot {
                    Slot::Rule(i) => {
                        let r = ev.rules.get(i)?;
                        Trigger {
                            rule_id: &r.id,
                            source: Source::Rule,
                            severity: r.severity,
                            action: &r.action,
                            codons: None,
                            match_count: spans.len(),
                            spans: spans.clone(),
                        }
                    }
                    Slot::Hard(i) => {
                        let h = program.hard_rules.get(i)?;
                        let codes = codons
                            .iter()
                            .filter_map(|&c| program.codons.get(c))
                            .map(|c| c.code.as_str())
                            .collect();
                        Trigger::of_hard_rule(h, codes, spans.clone())
                    }
                })
            })
            .collect()
    }
}
