//! The committed matches in code points, for the session's decision
//! ([`SpanLog`]). Records what the core commits and must not change what a
//! session releases.

use super::threads::char_count;
use crate::engine::decision::{Source, Trigger};
use crate::engine::normalize::ViewMap;
use crate::engine::Evaluator;

/// One committed match for the decision: its span in the text the rules
/// ran on (bytes; the view with normalization), which orders a hard rule's
/// spans as the whole-text evaluation orders them (the derived order
/// compares the fields in turn), and its span in code points of the
/// original text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct MatchSpan {
    /// Start in the text the rules ran on (bytes): first in the order.
    view_start: usize,
    /// End in the text the rules ran on (bytes).
    view_end: usize,
    /// Start in code points of the original text.
    cp_start: usize,
    /// End in code points of the original text.
    cp_end: usize,
}

/// The matches a session committed, per matcher, in code points: what its
/// decision's triggers are made of. Each matcher keeps the byte offset and
/// code point of its last match, and counts only the text between two of
/// its matches: the total work is linear in the text for each matcher
/// that matches at all (nothing on ASCII text, whose bytes are its code
/// points).
pub(super) struct SpanLog {
    spans: Vec<Vec<MatchSpan>>,
    /// Per matcher: absolute byte offset and code point of its last start.
    cursor: Vec<(usize, usize)>,
    /// With normalization: committed spans of the view (matcher, start,
    /// end), waiting for [`NormStream`] to map them to the original text.
    ///
    /// [`NormStream`]: super::normalized::NormStream
    unmapped: Option<Vec<(usize, usize, usize)>>,
}

impl SpanLog {
    pub(super) fn new(matchers: usize, mapped: bool) -> Self {
        Self {
            spans: vec![Vec::new(); matchers],
            cursor: vec![(0, 0); matchers],
            unmapped: mapped.then(Vec::new),
        }
    }

    /// Records matcher `i`'s match `view` (absolute bytes of the core's
    /// text, `buf` holding it from `base`, ASCII from `ascii_from` on);
    /// `floor` is the release point and its code point (no match starts
    /// before it).
    #[inline]
    pub(super) fn commit(
        &mut self,
        i: usize,
        view: (usize, usize),
        (buf, base, ascii_from): (&str, usize, usize),
        floor: (usize, usize),
    ) {
        match self.unmapped.as_mut() {
            Some(u) => u.push((i, view.0, view.1)),
            None => self.record(i, view, view, (buf, base, ascii_from), floor),
        }
    }

    /// Maps the view spans committed since the last call through `map`
    /// and records them, `orig` holding the original text from `base`.
    #[inline]
    pub(super) fn map_unmapped(
        &mut self,
        map: &ViewMap,
        orig: &str,
        base: usize,
        floor: (usize, usize),
    ) {
        let Some(mut u) = self.unmapped.take() else {
            return;
        };
        for &(i, s, e) in &u {
            self.record(i, (s, e), map.span(s, e), (orig, base, usize::MAX), floor);
        }
        u.clear();
        self.unmapped = Some(u);
    }

    /// Records matcher `i`'s match: `view` in the text the rules ran on,
    /// `orig` in the original text (absolute bytes; `text` holds it from
    /// `base`, at least from `floor`, the release point and its code point,
    /// and is ASCII from `ascii_from` on: there bytes are code points).
    fn record(
        &mut self,
        i: usize,
        view: (usize, usize),
        orig: (usize, usize),
        (text, base, ascii_from): (&str, usize, usize),
        floor: (usize, usize),
    ) {
        let (Some(cursor), Some(spans)) = (self.cursor.get_mut(i), self.spans.get_mut(i)) else {
            return;
        };
        // A matcher's starts only move forward (its matches do not overlap,
        // and the view's map keeps their order); text before the release
        // point may be gone, but no match starts there.
        if cursor.0 < floor.0 || cursor.0 > orig.0 {
            *cursor = floor;
        }
        let count = |a: usize, b: usize| {
            if a >= ascii_from {
                return b.saturating_sub(a);
            }
            text.get(a.saturating_sub(base)..b.saturating_sub(base))
                .map_or(0, char_count)
        };
        let start = cursor.1 + count(cursor.0, orig.0);
        let end = start + count(orig.0, orig.1);
        *cursor = (orig.0, start);
        spans.push(MatchSpan {
            view_start: view.0,
            view_end: view.1,
            cp_start: start,
            cp_end: end,
        });
    }

    /// The triggers of the committed matches, as [`Evaluator::evaluate`]
    /// lists them: custom rules in file order, then the hard rules, each
    /// with its spans sorted by start then end.
    pub(super) fn triggers<'e>(&self, ev: &'e Evaluator) -> Vec<Trigger<'e>> {
        let cps = |m: &[MatchSpan]| m.iter().map(|s| [s.cp_start, s.cp_end]).collect::<Vec<_>>();
        let mut triggers = Vec::new();
        for (info, spans) in ev.rules.iter().zip(&self.spans) {
            if spans.is_empty() {
                continue;
            }
            triggers.push(Trigger {
                rule_id: &info.id,
                source: Source::Rule,
                severity: info.severity,
                action: &info.action,
                codons: None,
                match_count: spans.len(),
                spans: cps(spans),
            });
        }
        let base = ev.rules.len();
        for hr in &ev.program.hard_rules {
            let mut spans: Vec<MatchSpan> = Vec::new();
            let mut codes = Vec::new();
            for &c in &hr.reads {
                let Some(m) = self.spans.get(base + c).filter(|m| !m.is_empty()) else {
                    continue;
                };
                codes.push(ev.program.codons[c].code.as_str());
                spans.extend_from_slice(m);
            }
            // A natively streamed hard rule holds exactly when one of the
            // codons it reads matched (a disjunction of positive tests).
            if spans.is_empty() {
                continue;
            }
            // The whole-text evaluation sorts the view's spans, then maps them.
            spans.sort_unstable();
            triggers.push(Trigger::of_hard_rule(hr, codes, cps(&spans)));
        }
        triggers
    }
}
