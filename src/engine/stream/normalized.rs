//! The original-text side of a session with normalization
//! ([`NormStream`]): the core runs on the view, and this maps its releases
//! back to the text pushed. It finds no match itself and must not change
//! the core's decisions, only map the regions the core hands it.

use super::core::Core;
use super::threads::char_count;
use super::{Blocked, Released};
use crate::engine::normalize::{self, Normalizer, ViewMap};
use crate::engine::{write_regions, Evaluator, Region};

/// The original-text side of a normalized session ([§15](docs/evasion.md#s15) with [§11](docs/streaming.md#s11)): the
/// pushed text goes through a [`Normalizer`], the core runs on the view, and
/// each of its releases (a view offset and the regions before it, all final)
/// is mapped back, so the session releases the original text with the same
/// regions an evaluation of the whole text writes. The normalizer writes
/// the view of a word only once the word rule is settled for it (a word of
/// look-alikes waits for a letter of another script or its end), so the core
/// never sees a view character that could still change; the text it holds
/// counts towards the hold-back limit like the core's.
// No `Debug`: it holds payload text.
#[derive(Default)]
pub(super) struct NormStream {
    normalizer: Normalizer,
    map: ViewMap,
    /// Original text from absolute byte `base`; released up to `head`.
    orig: String,
    base: usize,
    head: usize,
    /// Mapped regions not yet written (sorted, disjoint): one can end past
    /// what the core released when two view characters share a segment.
    held: Vec<Region<String>>,
    /// Reused: the view of the last piece.
    view: String,
    pub(super) pushed_chars: usize,
    pub(super) released_chars: usize,
    /// Whether the view has differed from the text.
    pub(super) changed: bool,
}

impl NormStream {
    pub(super) fn push(&mut self, core: &mut Core, ev: &Evaluator, piece: &str) -> Released {
        if core.finished || core.stopped {
            return Released::default();
        }
        self.pushed_chars += char_count(piece);
        self.orig.push_str(piece);
        self.view.clear();
        self.normalizer.push(piece, &mut self.view, &mut self.map);
        self.feed(core, ev, false);
        self.map_spans(core);
        if core.blocked.is_some() {
            return Released::default();
        }
        let out = self.release(core, false);
        // The normalizer holds text too (a word that may still mix scripts,
        // however long): the limit counts the original text held anywhere.
        if self.pushed_chars - self.released_chars > core.opts.max_holdback_chars {
            core.blocked = Some(Blocked::holdback());
            return Released::default();
        }
        out
    }

    pub(super) fn finish(&mut self, core: &mut Core, ev: &Evaluator) -> Released {
        if core.finished || core.stopped {
            core.finished = true;
            return Released::default();
        }
        self.view.clear();
        self.normalizer.finish(&mut self.view, &mut self.map);
        self.feed(core, ev, true);
        self.map_spans(core);
        if core.blocked.is_some() {
            return Released::default();
        }
        self.release(core, true)
    }

    /// Maps the matches the core committed on the view to the original
    /// text, for the decision (before released text is forgotten).
    fn map_spans(&self, core: &mut Core) {
        core.spans.map_unmapped(
            &self.map,
            &self.orig,
            self.base,
            (self.head, self.released_chars),
        );
    }

    /// Hands the new view text to the core.
    fn feed(&mut self, core: &mut Core, ev: &Evaluator, eoi: bool) {
        self.changed = self.normalizer.changed();
        if eoi {
            core.append(&self.view);
            core.finish(ev);
        } else if !self.view.is_empty() && core.append(&self.view) {
            core.step(ev, false);
        }
    }

    /// Writes the original text up to where the core's releases are final.
    fn release(&mut self, core: &mut Core, eoi: bool) -> Released {
        let released_view = core.dropped + core.head;
        if let Some(tap) = core.tap.as_mut() {
            for r in tap.drain(..) {
                let (s, e) = self.map.span(r.start, r.end);
                normalize::push_region(&mut self.held, s, e, r.placeholder);
            }
        }
        let end = self.base + self.orig.len();
        let mut cut = if eoi {
            end
        } else if released_view >= self.normalizer.view_len() {
            self.normalizer.complete()
        } else {
            self.map.start(released_view)
        };
        let mut closed = self.held.len();
        if let Some(k) = self.held.iter().position(|r| r.end > cut) {
            cut = cut.min(self.held[k].start);
            closed = k;
        }
        self.map.forget_before(released_view);
        if cut <= self.head {
            return Released::default();
        }
        let regions: Vec<Region<&str>> = self.held[..closed]
            .iter()
            .map(|r| Region {
                start: r.start - self.base,
                end: r.end - self.base,
                placeholder: r.placeholder.as_str(),
            })
            .collect();
        let (from, to) = (self.head - self.base, cut - self.base);
        let mut text = String::with_capacity(to - from);
        write_regions(&mut text, &self.orig, from, to, &regions);
        let redacted = closed > 0;
        self.released_chars += char_count(&self.orig[from..to]);
        self.held.drain(..closed);
        self.head = cut;
        if to >= 4096 && to * 2 >= self.orig.len() {
            self.orig.drain(..to);
            self.base = cut;
        }
        Released { text, redacted }
    }
}
