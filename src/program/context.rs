//! Context words of a codon ([§16.1](docs/codons.md#s16-1) `context`): whether one of the
//! words lies near a candidate value. It reads the text and the words only;
//! it knows nothing of patterns, triggers or streams, and never logs.
//!
//! # Cost
//!
//! A codon's candidates can be dense (a nine-character token codon on 1 MiB
//! of such tokens has 100,000), and each looks at up to 256 code points on
//! either side for up to 64 words: looked for one by one, that cost 0.6 s a
//! MiB, six times what [§11.4](docs/limits.md#s11-4) allows a whole pack. So the words are one
//! Aho-Corasick automaton, and a text is scanned once: [`Context::index`]
//! lists every occurrence of any word in a range, in one pass whatever the
//! number of words; a window then holds a word if the first occurrence
//! starting in it has, among it and those after it, one that ends in it
//! (a suffix minimum of ends: one binary search a window). An evaluation
//! ([`ContextScan`]) scans each value's windows alone until they cost about
//! as much as an index of the whole text, which is then built once and
//! shared by every codon with the same words ([`ContextGroups`]); on ASCII
//! text, for up to sixteen words, the index is a vectorised substring
//! search a word over the lowered text, much cheaper than the automaton: a
//! sparse value in a long text
//! costs its windows, dense values cost one pass. The engine also asks,
//! before it searches for a candidate, whether any word lies within reach
//! of where it could be ([`ContextScan::may_hold`]). A stream session,
//! which keeps only a bounded window of text, indexes the two windows of a
//! value.
//!
//! # Matching
//!
//! A word matches text code point by code point after each is mapped to its
//! simple lowercase (a code point whose lowercase is several code points,
//! `İ`, stays itself): `PASSPORT`, `Passport` and `passport` are one word,
//! the Kelvin sign `K` matches `k`. An occurrence counts only if it does
//! not touch a word character (`\w`: alphanumeric or `_`) of the whole text
//! on a side where the word itself begins or ends with one: `pass` is not
//! in `passport`, `no.` is in `no.5`.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use std::borrow::Cow;

/// `context` of a codon ([§16.1](docs/codons.md#s16-1)): a value counts only near one of the words.
#[derive(Clone)]
pub struct Context {
    /// The words, as declared (matched case-insensitively).
    pub words: Vec<String>,
    /// Code points before the value searched for a word.
    pub before: usize,
    /// Code points after the value searched for a word.
    pub after: usize,
    /// The words, lowercased, as one automaton reporting every occurrence.
    matcher: AhoCorasick,
    /// Per word: whether it begins and whether it ends with a word character.
    edges: Vec<(bool, bool)>,
    /// Per word: a substring searcher for its folded form, when that is
    /// ASCII (and so lowercase: the form an ASCII text, lowered, holds).
    ascii_finders: Vec<Option<memchr::memmem::Finder<'static>>>,
}

impl PartialEq for Context {
    fn eq(&self, other: &Self) -> bool {
        (&self.words, self.before, self.after) == (&other.words, other.before, other.after)
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The words are policy: counted, never printed.
        f.debug_struct("Context")
            .field("words", &self.words.len())
            .field("before", &self.before)
            .field("after", &self.after)
            .finish()
    }
}

/// Every occurrence of a context word in a range of a text, by start, with
/// the least end among each occurrence and those after it.
#[derive(Debug, Default)]
pub struct ContextIndex {
    starts: Vec<usize>,
    min_end: Vec<usize>,
    /// Whether the indexed range is ASCII: a window is then plain arithmetic.
    ascii: bool,
}

impl ContextIndex {
    /// The index of the occurrences `found` (in any order) of a range
    /// that is ASCII or not.
    fn of(mut found: Vec<(usize, usize)>, ascii: bool) -> Self {
        let mut index = Self::default();
        index.refill(&mut found, ascii);
        index
    }

    /// This index made the index of `found` (sorted here), in the memory
    /// it holds.
    fn refill(&mut self, found: &mut [(usize, usize)], ascii: bool) {
        found.sort_unstable();
        self.starts.clear();
        self.starts.extend(found.iter().map(|&(s, _)| s));
        self.min_end.clear();
        self.min_end.resize(found.len(), usize::MAX);
        let mut least = usize::MAX;
        for (end, &(_, e)) in self.min_end.iter_mut().zip(found.iter()).rev() {
            least = least.min(e);
            *end = least;
        }
        self.ascii = ascii;
    }

    /// Whether an occurrence lies wholly within `text[lo..hi]` (it was
    /// indexed over a range that holds `lo..hi`).
    pub fn any_within(&self, lo: usize, hi: usize) -> bool {
        let i = self.starts.partition_point(|&s| s < lo);
        self.min_end.get(i).is_some_and(|&e| e <= hi)
    }
}

/// Which codons share their context words, and so one index of a text:
/// a pack often gives many codons one list of words.
#[derive(Debug, Default)]
pub struct ContextGroups {
    /// Per codon: its group, if it has a context.
    of_codon: Vec<Option<usize>>,
    /// How many groups.
    count: usize,
}

impl ContextGroups {
    /// The groups of the codons' contexts (one entry per codon).
    pub fn new<'c>(contexts: impl IntoIterator<Item = Option<&'c Context>>) -> Self {
        let mut firsts: Vec<&Context> = Vec::new();
        let of_codon = contexts
            .into_iter()
            .map(|ctx| {
                let ctx = ctx?;
                Some(match firsts.iter().position(|f| f.words == ctx.words) {
                    Some(g) => g,
                    None => {
                        firsts.push(ctx);
                        firsts.len() - 1
                    }
                })
            })
            .collect();
        Self {
            of_codon,
            count: firsts.len(),
        }
    }
}

/// The context checks of many values of one text (one evaluation), of
/// every codon: each value's windows are scanned alone until they have
/// cost about as much as an index of the whole text, which is then built
/// once for the rest, and shared by the codons with the same words
/// ([`ContextGroups`]).
#[derive(Default)]
pub struct ContextScan<'g> {
    groups: Option<&'g ContextGroups>,
    /// Per group: the index of its words over the whole text, once built.
    whole: Vec<Option<ContextIndex>>,
    /// Per group: the bytes of the windows scanned alone so far.
    scanned: Vec<usize>,
    /// The text lowered, once a group indexes the whole of an ASCII text.
    lower: Option<String>,
    /// Whether the text is ASCII: a value's windows are then plain
    /// arithmetic, not a walk over code points, and the whole text is
    /// indexed with a substring search a word.
    ascii: bool,
    /// Indexes of an earlier text, for their memory.
    spare: Vec<ContextIndex>,
    /// Occurrences found for the index being built.
    found: Vec<(usize, usize)>,
}

/// The memory of a [`ContextScan`]'s lists, kept for the next text
/// ([`ContextScan::with_buffers`], [`ContextScan::into_buffers`]): an
/// evaluation on text dense with values indexes many groups, each index
/// three lists that were allocated afresh every time. Positions only,
/// never a byte of text.
#[derive(Debug, Default)]
pub struct ContextBuffers {
    whole: Vec<Option<ContextIndex>>,
    scanned: Vec<usize>,
    spare: Vec<ContextIndex>,
    found: Vec<(usize, usize)>,
}

/// Most entries a list of [`ContextBuffers`] keeps the memory of: a long
/// text's lists stay in no idle cache set.
const KEEP: usize = 256;

/// On ASCII text, a group of at most [`WORDS_SEARCHED_ALONE`] words
/// indexes the whole text once its windows add up to this fraction of it a
/// word. Such an index costs about one instruction a byte a word (a
/// vectorised substring search a word); a window scanned alone pays the
/// overlapping automaton's set-up and about fifteen a byte. On the
/// forty-codon bench (1 KiB dense with values), indexing at a 64th rather
/// than a 16th cut a decision by 1.3 µs (8%). A long text whose values
/// stop right after its index is built pays about four times what its
/// windows cost until then: at sixteen words, no more than the
/// automaton's index of the whole text would.
const WINDOW_TO_INDEX: usize = 64;

/// Most words a group indexes with a substring search each; a group with
/// more indexes the whole text with its automaton (whose cost does not grow
/// with the words), once its windows add up to the text.
const WORDS_SEARCHED_ALONE: usize = 16;

impl std::fmt::Debug for ContextScan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The lowered text is the payload: never printed.
        f.debug_struct("ContextScan")
            .field("indexed_groups", &self.whole.iter().flatten().count())
            .field("scanned", &self.scanned)
            .field("ascii", &self.ascii)
            .finish_non_exhaustive()
    }
}

impl<'g> ContextScan<'g> {
    /// A scan of a text the caller knows to be ASCII or not (`false` is
    /// always right: the windows are then found by walking code points),
    /// for codons grouped by `groups` (`None`: every window is scanned
    /// alone).
    pub fn of(groups: Option<&'g ContextGroups>, ascii: bool) -> Self {
        // The per-group lists wait for the first value with a context: most
        // texts have none.
        Self {
            groups,
            whole: Vec::new(),
            scanned: Vec::new(),
            lower: None,
            ascii,
            spare: Vec::new(),
            found: Vec::new(),
        }
    }

    /// This scan, with the memory of an earlier one's lists.
    pub fn with_buffers(mut self, buffers: ContextBuffers) -> Self {
        let ContextBuffers {
            mut whole,
            mut scanned,
            spare,
            found,
        } = buffers;
        whole.clear();
        scanned.clear();
        (self.whole, self.scanned, self.spare, self.found) = (whole, scanned, spare, found);
        self
    }

    /// The memory of this scan's lists, for the next text's scan; lists
    /// longer than [`KEEP`] are dropped.
    pub fn into_buffers(self) -> ContextBuffers {
        let Self {
            mut whole,
            mut scanned,
            mut spare,
            mut found,
            ..
        } = self;
        spare.extend(
            whole
                .drain(..)
                .flatten()
                .filter(|ix| ix.starts.capacity() <= KEEP && ix.min_end.capacity() <= KEEP),
        );
        spare.truncate(KEEP);
        scanned.clear();
        found.clear();
        if found.capacity() > KEEP {
            found = Vec::new();
        }
        if scanned.capacity() > KEEP {
            scanned = Vec::new();
        }
        ContextBuffers {
            whole,
            scanned,
            spare,
            found,
        }
    }

    /// The index of the whole text for codon `codon` (context `ctx`), when
    /// the windows scanned for its group, with `window` more bytes, make
    /// one worth it; `None` when the window is to be scanned alone (and
    /// was counted).
    fn whole(
        &mut self,
        codon: usize,
        ctx: &Context,
        text: &str,
        window: usize,
    ) -> Option<&ContextIndex> {
        let groups = self.groups?;
        let g = groups.of_codon.get(codon).copied().flatten()?;
        if self.whole.is_empty() {
            self.whole.resize_with(groups.count, || None);
            self.scanned.resize(groups.count, 0);
        }
        if self.whole.get(g)?.is_none() {
            let scanned = self.scanned.get_mut(g)?;
            *scanned = scanned.saturating_add(window);
            let by_word = self.ascii && ctx.words.len() <= WORDS_SEARCHED_ALONE;
            let worth = if by_word {
                scanned.saturating_mul(WINDOW_TO_INDEX)
                    >= text.len().saturating_mul(ctx.words.len())
            } else {
                *scanned >= text.len()
            };
            if !worth {
                return None;
            }
            let index = if by_word {
                let lower = self.lower.get_or_insert_with(|| text.to_ascii_lowercase());
                ctx.ascii_occurrences(text, lower, &mut self.found);
                let mut index = self.spare.pop().unwrap_or_default();
                index.refill(&mut self.found, true);
                index
            } else {
                ctx.index(text, 0, text.len())
            };
            self.whole[g] = Some(index);
        }
        self.whole.get(g)?.as_ref()
    }

    /// Whether a word of `ctx`, codon `codon`'s context, lies near
    /// `text[s..e]`; `text` is the same for every call on this scan.
    pub fn holds(&mut self, codon: usize, ctx: &Context, text: &str, s: usize, e: usize) -> bool {
        let (lo, hi) = if self.ascii {
            ctx.ascii_windows(text, s, e)
        } else {
            ctx.windows(text, s, e)
        };
        match self.whole(codon, ctx, text, hi - lo) {
            Some(ix) => ix.any_within(lo, s) || ix.any_within(e, hi),
            None => ctx.near_in_windows(text, (lo, hi), s, e),
        }
    }

    /// On ASCII text, whether a value within `text[a..b]` can have a word of
    /// `ctx` (codon `codon`'s context) near it: whether one lies within
    /// `text[a - before..b + after]`, which holds both windows of any such
    /// value. Always `true` on other text. Lets the engine drop a
    /// candidate before it searches for it.
    pub fn may_hold(
        &mut self,
        codon: usize,
        ctx: &Context,
        text: &str,
        a: usize,
        b: usize,
    ) -> bool {
        if !self.ascii {
            return true;
        }
        let lo = a.saturating_sub(ctx.before);
        let hi = b.saturating_add(ctx.after).min(text.len());
        match self.whole(codon, ctx, text, hi.saturating_sub(lo)) {
            Some(ix) => ix.any_within(lo, hi),
            None => {
                let mut any = false;
                ctx.each_occurrence(text, lo, hi, |_, _| {
                    any = true;
                    true
                });
                any
            }
        }
    }
}

/// The simple lowercase of `c`, or `c` when its lowercase is several code points.
fn key(c: char) -> char {
    let mut l = c.to_lowercase();
    match (l.next(), l.next()) {
        (Some(x), None) => x,
        _ => c,
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

impl Context {
    /// The context of `words` with its windows; `None` if the words cannot
    /// form an automaton (never for the checked limits of 64 words of 64
    /// bytes).
    pub fn new(words: Vec<String>, before: usize, after: usize) -> Option<Self> {
        let folded: Vec<String> = words.iter().map(|w| w.chars().map(key).collect()).collect();
        let matcher = AhoCorasickBuilder::new()
            .match_kind(MatchKind::Standard)
            .ascii_case_insensitive(true)
            .build(&folded)
            .ok()?;
        // Only for the few words a scan searches one by one.
        let ascii_finders = folded
            .iter()
            .filter(|_| folded.len() <= WORDS_SEARCHED_ALONE)
            .map(|w| {
                w.is_ascii()
                    .then(|| memchr::memmem::Finder::new(w.as_bytes()).into_owned())
            })
            .collect();
        let edges = words
            .iter()
            .map(|w| {
                (
                    w.chars().next().is_some_and(is_word_char),
                    w.chars().next_back().is_some_and(is_word_char),
                )
            })
            .collect();
        Some(Self {
            words,
            before,
            after,
            matcher,
            edges,
            ascii_finders,
        })
    }

    /// Strings of which a text holds one, ASCII case aside, wherever one of
    /// the words occurs ([`crate::pattern::literals`]): each word's longest
    /// run of characters that fold to ASCII other than `k` (the Kelvin sign
    /// folds to `k`; no other non-ASCII code point folds to ASCII). `None`
    /// when some word has no such run of
    /// [`crate::pattern::literals::MIN_LEN`] bytes. A codon's value counts
    /// only near a word, so a text without these yields no value.
    pub fn required_literals(&self) -> Option<crate::pattern::literals::Literals> {
        use crate::pattern::literals::{MAX_LITERALS, MIN_LEN};
        let mut out = Vec::with_capacity(self.words.len());
        for word in &self.words {
            let folded: String = word.chars().map(key).collect();
            let longest = folded
                .split(|c: char| !c.is_ascii() || c.eq_ignore_ascii_case(&'k'))
                .max_by_key(|run| run.len())?;
            if longest.len() < MIN_LEN {
                return None;
            }
            out.push(longest.to_ascii_lowercase().into_bytes());
        }
        out.sort();
        out.dedup();
        (!out.is_empty() && out.len() <= MAX_LITERALS).then_some(
            crate::pattern::literals::Literals {
                set: out,
                folded: true,
            },
        )
    }

    /// The window before `text[s..e]` (`before` code points) and after it
    /// (`after` code points), as byte offsets `(lo, hi)`.
    pub fn windows(&self, text: &str, s: usize, e: usize) -> (usize, usize) {
        let lo = text[..s]
            .char_indices()
            .rev()
            .take(self.before)
            .last()
            .map_or(s, |(i, _)| i);
        let hi = text[e..]
            .char_indices()
            .nth(self.after)
            .map_or(text.len(), |(i, _)| e + i);
        (lo, hi)
    }

    /// [`Context::windows`] on ASCII text, where a code point is a byte.
    fn ascii_windows(&self, text: &str, s: usize, e: usize) -> (usize, usize) {
        (
            s.saturating_sub(self.before),
            e.saturating_add(self.after).min(text.len()),
        )
    }

    /// Every occurrence of a word wholly within `text[a..b]` that touches
    /// no word character of `text` where it must not.
    pub fn index(&self, text: &str, a: usize, b: usize) -> ContextIndex {
        let mut found: Vec<(usize, usize)> = Vec::new();
        let ascii = self.each_occurrence(text, a, b, |s, e| {
            found.push((s, e));
            false
        });
        match ascii {
            Some(ascii) => ContextIndex::of(found, ascii),
            None => ContextIndex::default(),
        }
    }

    /// Every occurrence of a word in the whole of `text`, an ASCII text,
    /// with `lower` the same lowered, into `found` (emptied first).
    fn ascii_occurrences(&self, text: &str, lower: &str, found: &mut Vec<(usize, usize)>) {
        // Each word on its own over the lowered text: a vectorised
        // substring search costs about a byte an instruction a word, the
        // overlapping automaton more than ten. A word whose folded form is
        // not ASCII cannot occur in ASCII text.
        let bytes = text.as_bytes();
        let word_char = |i: Option<usize>| {
            i.and_then(|i| bytes.get(i))
                .is_some_and(|&b| b.is_ascii_alphanumeric() || b == b'_')
        };
        found.clear();
        for (finder, &(first, last)) in self.ascii_finders.iter().zip(&self.edges) {
            let Some(finder) = finder else { continue };
            let len = finder.needle().len();
            let mut at = 0;
            while let Some(i) = lower.get(at..).and_then(|h| finder.find(h.as_bytes())) {
                let (s, e) = (at + i, at + i + len);
                let touches =
                    (first && word_char(s.checked_sub(1))) || (last && word_char(Some(e)));
                if !touches {
                    found.push((s, e));
                }
                // Every occurrence, overlapping ones included.
                at = s + 1;
            }
        }
    }

    /// Calls `f` with every occurrence of a word wholly within
    /// `text[a..b]` that touches no word character of `text` where it must
    /// not, in the automaton's order, until `f` says `true`. `None` when
    /// `a..b` is not a range of `text`; else whether the range is ASCII.
    fn each_occurrence(
        &self,
        text: &str,
        a: usize,
        b: usize,
        mut f: impl FnMut(usize, usize) -> bool,
    ) -> Option<bool> {
        let range = text.get(a..b)?;
        // ASCII text needs no folding: the automaton ignores ASCII case, and
        // every folded word with a non-ASCII code point cannot match it.
        let ascii = range.is_ascii();
        let (hay, map): (Cow<'_, str>, Option<Vec<usize>>) = if ascii {
            (Cow::Borrowed(range), None)
        } else {
            let mut folded = String::with_capacity(range.len());
            let mut map = Vec::with_capacity(range.len() + 1);
            for (i, c) in range.char_indices() {
                let k = key(c);
                folded.push(k);
                map.resize(folded.len(), a + i);
            }
            map.push(b);
            (Cow::Owned(folded), Some(map))
        };
        let at = |f: usize| {
            map.as_ref()
                .map_or(a + f, |m| m.get(f).copied().unwrap_or(b))
        };
        for m in self.matcher.find_overlapping_iter(hay.as_ref()) {
            let (s, e) = (at(m.start()), at(m.end()));
            let Some(&(first, last)) = self.edges.get(m.pattern().as_usize()) else {
                continue;
            };
            let before_ok = !first || !text[..s].chars().next_back().is_some_and(is_word_char);
            let after_ok = !last || !text[e..].chars().next().is_some_and(is_word_char);
            if before_ok && after_ok && f(s, e) {
                break;
            }
        }
        Some(ascii)
    }

    /// Whether an occurrence lies wholly within `text[lo..s]` or
    /// `text[e..hi]`, the windows of the value `text[s..e]`: one scan of
    /// `lo..hi` that stops at the first, and builds no index (a value's
    /// windows are a few dozen bytes; sorting and listing their
    /// occurrences cost more than finding one).
    fn near_in_windows(&self, text: &str, (lo, hi): (usize, usize), s: usize, e: usize) -> bool {
        let mut near = false;
        self.each_occurrence(text, lo, hi, |os, oe| {
            near = (lo <= os && oe <= s) || (e <= os && oe <= hi);
            near
        });
        near
    }

    /// Whether a word lies near `text[s..e]`, with `index` the index of the
    /// whole `text` (built once per text by the caller), or `None`: the two
    /// windows are indexed here.
    pub fn holds(&self, text: &str, s: usize, e: usize, index: Option<&ContextIndex>) -> bool {
        match index {
            Some(ix) => {
                // Dense values in ASCII text: no walk over the windows' code points.
                let (lo, hi) = if ix.ascii {
                    self.ascii_windows(text, s, e)
                } else {
                    self.windows(text, s, e)
                };
                ix.any_within(lo, s) || ix.any_within(e, hi)
            }
            None => self.near_in_windows(text, self.windows(text, s, e), s, e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A scan that indexes the whole text at its group's first value.
    fn indexing(groups: &ContextGroups, ascii: bool) -> ContextScan<'_> {
        let mut scan = ContextScan::of(Some(groups), ascii);
        scan.scanned = vec![usize::MAX / 2; groups.count];
        scan.whole = (0..groups.count).map(|_| None).collect();
        scan
    }

    fn ctx(words: &[&str], before: usize, after: usize) -> Context {
        Context::new(words.iter().map(|w| w.to_string()).collect(), before, after).unwrap()
    }

    /// The definition, word by word and code point by code point: what the
    /// automaton must agree with.
    fn reference(c: &Context, text: &str, s: usize, e: usize) -> bool {
        let (lo, hi) = c.windows(text, s, e);
        [(lo, s), (e, hi)].iter().any(|&(a, b)| {
            c.words.iter().any(|w| {
                let wk: Vec<char> = w.chars().map(key).collect();
                text[a..b].char_indices().any(|(off, _)| {
                    let start = a + off;
                    let mut it = text[start..b].char_indices();
                    for &k in &wk {
                        match it.next() {
                            Some((_, c)) if key(c) == k => {}
                            _ => return false,
                        }
                    }
                    let end = it.next().map_or(b, |(i, _)| start + i);
                    let (first, last) = (
                        w.chars().next().is_some_and(is_word_char),
                        w.chars().next_back().is_some_and(is_word_char),
                    );
                    (!first || !text[..start].chars().next_back().is_some_and(is_word_char))
                        && (!last || !text[end..].chars().next().is_some_and(is_word_char))
                })
            })
        })
    }

    #[test]
    fn only_the_kelvin_sign_folds_to_ascii() {
        let to_ascii: Vec<char> = (0x80..=0x10FFFF)
            .filter_map(char::from_u32)
            .filter(|&c| key(c).is_ascii())
            .collect();
        assert_eq!(to_ascii, vec!['\u{212A}']);
    }

    #[test]
    fn required_literals_avoid_k_and_non_ascii() {
        let lits = |words: &[&str]| {
            ctx(words, 8, 0).required_literals().map(|l| {
                l.set
                    .into_iter()
                    .map(|w| String::from_utf8(w).unwrap())
                    .collect::<Vec<_>>()
            })
        };
        assert_eq!(
            lits(&["AWS secret key", "secretaccesskey"]),
            Some(vec!["aws secret ".into(), "secretaccess".into()])
        );
        assert_eq!(lits(&["Straße Nr"]), Some(vec!["e nr".into()]));
        assert_eq!(lits(&["passport", "no"]), None);
        assert_eq!(
            lits(&["Passport", "No."]),
            Some(vec!["no.".into(), "passport".into()])
        );
        // The Kelvin sign still matches `k`: the literal stops before it,
        // so the scan keeps the codon wherever the word holds.
        let c = ctx(&["secretaccesskey"], 64, 0);
        let scanner = crate::pattern::literals::Scanner::new(
            [c.required_literals()].iter().map(Option::as_ref),
        )
        .unwrap();
        for (text, holds) in [
            ("SecretAccess\u{212A}ey AAAA", true),
            ("secretaccesskey AAAA", true),
            ("secret access key AAAA", false),
        ] {
            assert_eq!(c.holds(text, text.len() - 4, text.len(), None), holds);
            let mut mask = vec![1];
            scanner.narrow(text.as_bytes(), &mut mask, 100);
            assert_eq!(mask, vec![u64::from(holds)], "{text:?}");
        }
    }

    #[test]
    fn words_match_whole_and_ignore_case() {
        let c = ctx(&["passport", "pass no", "no."], 16, 8);
        let t = "PASSPORT 123456789";
        assert!(c.holds(t, 9, 18, None));
        // `pass` is not a word here; `passports` is not `passport`.
        let c2 = ctx(&["pass"], 16, 0);
        assert!(!c2.holds(t, 9, 18, None));
        assert!(!c.holds("passports 123456789", 10, 19, None));
        // A word ending in punctuation may touch a word character.
        assert!(c.holds("no.123456789", 3, 12, None));
        // Kelvin sign and the ASCII k are one letter.
        let k = ctx(&["kennzahl"], 16, 0);
        assert!(k.holds("\u{212A}ENNZAHL 123", 11, 14, None));
        assert!(ctx(&["\u{212A}ennzahl"], 16, 0).holds("kennzahl 123", 9, 12, None));
        // Only within the window: 9 code points before reach `p`, 8 do not.
        assert!(ctx(&["passport"], 9, 0).holds(t, 9, 18, None));
        assert!(!ctx(&["passport"], 8, 0).holds(t, 9, 18, None));
        // After the value.
        let after = ctx(&["iban"], 0, 6);
        assert!(after.holds("X123 (IBAN)", 0, 4, None));
        assert!(!ctx(&["iban"], 0, 5).holds("X123 (IBAN)", 0, 4, None));
    }

    /// The ASCII index's own cases: an occurrence overlapping another of
    /// the same word, and words that must not touch a word character on
    /// either side, or may.
    #[test]
    fn the_ascii_index_keeps_overlapping_occurrences_and_word_edges() {
        // (word, text, before, after, the value's span)
        type Case<'a> = (&'a str, &'a str, usize, usize, (usize, usize));
        let cases: &[Case<'_>] = &[
            ("..", "...x", 2, 0, (3, 4)),
            ("ab", "xab 1", 4, 0, (4, 5)),
            ("ab", "x ab 1", 4, 0, (5, 6)),
            ("ab", "1 abx", 0, 4, (0, 1)),
            ("ab", "1 ab x", 0, 4, (0, 1)),
            ("ab.", "1 ab.x", 0, 4, (0, 1)),
            (".ab", "x.ab 1", 4, 0, (5, 6)),
        ];
        for &(word, text, before, after, (s, e)) in cases {
            let c = ctx(&[word], before, after);
            let groups = ContextGroups::new([Some(&c)]);
            let mut scan = indexing(&groups, true);
            let want = reference(&c, text, s, e);
            assert_eq!(scan.holds(0, &c, text, s, e), want, "{word:?} in {text:?}");
            assert!(scan.whole[0].is_some());
        }
    }

    /// Past sixteen words, the whole ASCII text is indexed by the automaton
    /// (its cost does not grow with the words), with the same answers.
    #[test]
    fn many_words_index_the_whole_text_with_the_automaton() {
        let mut words: Vec<String> = (0..16).map(|i| format!("filler{i}")).collect();
        words.push("ab".into());
        let c = Context::new(words, 4, 0).unwrap();
        let groups = ContextGroups::new([Some(&c)]);
        for (text, want) in [("x ab 1", true), ("xab 1", false)] {
            let mut scan = indexing(&groups, true);
            let (s, e) = (text.len() - 1, text.len());
            assert_eq!(scan.holds(0, &c, text, s, e), want, "{text:?}");
            assert_eq!(reference(&c, text, s, e), want, "{text:?}");
            assert!(scan.whole[0].is_some() && scan.lower.is_none());
        }
    }

    #[test]
    fn a_whole_text_index_answers_as_the_windows_do() {
        let c = ctx(&["passport", "nº", "ausweis"], 12, 12);
        let t = "Ausweis: 123456789 and then a long gap of text, 987654321 nº";
        let ix = c.index(t, 0, t.len());
        let groups = ContextGroups::new([Some(&c)]);
        let mut scan = ContextScan::of(Some(&groups), false);
        for (s, e) in [(9, 18), (48, 57), (9, 18), (48, 57), (9, 18)] {
            assert_eq!(c.holds(t, s, e, Some(&ix)), c.holds(t, s, e, None));
            assert_eq!(scan.holds(0, &c, t, s, e), c.holds(t, s, e, None));
        }
        assert!(
            scan.whole[0].is_some(),
            "five values' windows outgrow the text"
        );
        assert!(c.holds(t, 9, 18, Some(&ix)));
        assert!(c.holds(t, 48, 57, Some(&ix)));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn the_automaton_agrees_with_the_definition(
            text in "[aAbB \u{212A}İi_.é1]{0,40}",
            words in prop::collection::vec("[aAbk\u{212A}İi_.é ]{1,4}", 1..4),
            before in 0usize..8,
            after in 0usize..8,
            cut in any::<(prop::sample::Index, prop::sample::Index)>(),
        ) {
            let c = Context::new(words, before, after).unwrap();
            let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
            let (i, j) = (cut.0.index(bounds.len()), cut.1.index(bounds.len()));
            let (s, e) = (bounds[i.min(j)], bounds[i.max(j)]);
            let whole = c.index(&text, 0, text.len());
            let want = reference(&c, &text, s, e);
            prop_assert_eq!(c.holds(&text, s, e, None), want);
            prop_assert_eq!(c.holds(&text, s, e, Some(&whole)), want);
            let groups = ContextGroups::new([Some(&c)]);
            let ascii = text.is_ascii();
            // Windows alone (no groups: never an index), then the whole
            // text at once (by substring searches on ASCII text).
            let mut scan = ContextScan::of(None, ascii);
            prop_assert_eq!(scan.holds(0, &c, &text, s, e), want);
            prop_assert!(scan.whole.is_empty());
            let mut scan = indexing(&groups, ascii);
            prop_assert_eq!(scan.holds(0, &c, &text, s, e), want);
            prop_assert!(scan.whole[0].is_some());
        }

        /// On ASCII text the whole-text index comes from a substring
        /// search a word over the lowered text, not the automaton: the same
        /// answers, overlapping occurrences and word edges included.
        #[test]
        fn the_ascii_index_agrees_with_the_definition(
            text in "[aAbBkK_. 1]{0,40}",
            words in prop::collection::vec("[aAbk\u{212A}_. ]{1,4}", 1..4),
            before in 0usize..8,
            after in 0usize..8,
            cut in any::<(prop::sample::Index, prop::sample::Index)>(),
        ) {
            let c = Context::new(words, before, after).unwrap();
            let (i, j) = (cut.0.index(text.len() + 1), cut.1.index(text.len() + 1));
            let (s, e) = (i.min(j), i.max(j));
            let groups = ContextGroups::new([None, Some(&c)]);
            let mut scan = indexing(&groups, true);
            prop_assert_eq!(scan.holds(1, &c, &text, s, e), reference(&c, &text, s, e));
            prop_assert!(scan.whole[0].is_some());
        }
    }
}
