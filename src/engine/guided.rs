//! The guided search: exactly the matches of a rule's exact regex that
//! `find_iter` finds, found fast on non-ASCII text, where Unicode `\b`
//! makes the regex crate's DFAs give up. Used by whole-text evaluation and
//! by stream sessions alike. Reads only the text it is given; never logs or
//! keeps a matched value.
//!
//! Every match of the exact regex is a match of its *filter* (the same
//! pattern without word-boundary assertions), so the leftmost filter match
//! from `pos` never starts after the leftmost exact match from `pos`. The
//! DFA-friendly filter proposes that start; an anchored exact search
//! confirms it (its leftmost-first match there is the one `find_iter` would
//! report) or rejects it, and the search goes on one character later.
//!
//! Where the text holds a stretch of ASCII, none of that is needed: the
//! exact regex's own lazy DFA (which gives up only on a non-ASCII byte)
//! finds the next match there at full speed, and the guided steps take over
//! only from where it gave up, until the next stretch. One typographic
//! apostrophe in a reply thus costs a few guided steps, not a guided search
//! of the whole reply.
//!
//! What keeps the guided steps from costing a search per proposed start:
//!
//! - each confirmation reads only its own span: its range ends where the
//!   longest filter match from the start ends ([`Guide`]'s `longest`), which
//!   no exact match there can pass (look-around still sees the bytes past
//!   the range, so the result is the same), and on a short range the meta
//!   regex runs its bounded backtracker instead of the PikeVM;
//! - where every match begins with `\b`, a start inside a word is skipped
//!   without a search; where the pattern is `\b X \b?` with an `X` of one
//!   length ([`Fixed`]: the SSN codon, `\bTCK-\d{6}\b`), the proposal is
//!   confirmed by checking its boundaries, with no search at all;
//! - where some alternatives end with `\b` ([`Trail`]), once a confirmation
//!   has failed and forward proposals have re-read the text, backward passes
//!   yield every start a match may have: the alternatives that end with `\b`
//!   reversed and run from every word boundary at once, the others from every
//!   position ([`trail_candidates`]). Each pass is linear whatever the text;
//! - past a work budget ([`GUIDED_WORK_FACTOR`] plain-search bytes a byte),
//!   the plain search finishes the job, in linear time whatever the input.

use super::find_iter_with;
use crate::pattern::{self, CompiledPattern};
use regex_automata::hybrid::{self, LazyStateID};
use regex_automata::meta::{Cache, Regex};
use regex_automata::nfa::thompson;
use regex_automata::util::look::LookMatcher;
use regex_automata::util::syntax;
use regex_automata::{Anchored, Input, Match, MatchErrorKind, MatchKind};
use regex_syntax::hir::{Hir, HirKind, Look};

/// The guided search counts its work in bytes read by a lazy DFA. An
/// anchored confirmation of the exact regex on non-ASCII text runs an NFA
/// engine (backtracker or PikeVM), which costs about this many DFA bytes per
/// byte of its range: the same price per byte as the plain search that
/// finishes the job when the budget runs out.
const GUIDED_NFA_COST: usize = 16;
/// What the guided search may spend, per byte of text, in plain-search
/// bytes ([`GUIDED_NFA_COST`] DFA bytes each): ordinary text stays well under
/// it, and a text past it has cost about one plain search already (measured:
/// one failed confirmation over a 1 MiB word, then the plain search, beats
/// two failed ones, then the plain search).
const GUIDED_WORK_FACTOR: usize = 1;
/// Work the guided search may always spend, whatever the text's length.
const GUIDED_WORK_BASE: usize = 64 << 10;
/// Work charged per proposed start, for the searches' fixed cost (about
/// what reading this many bytes with a DFA costs).
const GUIDED_CALL_COST: usize = 128;

/// The DFA runs a search from a position only when the next non-ASCII
/// byte is at least this far: closer, it would give up at once.
const ASCII_STRETCH: usize = 32;
/// A confirmation's range is bounded by the longest filter match only past
/// this many bytes: a shorter one costs less than the bounding search.
const BOUND_AFTER: usize = 256;
/// The backward passes run once forward proposals have cost two passes over
/// the text, and over at least this many bytes: on a shorter text their
/// fixed cost (start states, the bit set) is more than what they save.
const TRAIL_MIN_SPAN: usize = 4 * GUIDED_CALL_COST;

/// The parts of the guided search built from a matcher's boundary-free form.
pub(super) struct Guide {
    /// The boundary-free form as a forward lazy DFA reporting the longest
    /// match (`MatchKind::All`): anchored at a proposed start, its end bounds
    /// every match of the exact regex there.
    longest: hybrid::dfa::DFA,
    /// Every match of the exact regex starts where Unicode `\b` holds, so a
    /// proposed start inside a word is rejected without a search.
    starts_at_boundary: bool,
    /// The pattern is `\b X \b?` with an `X` of one length and no
    /// look-around: a proposal is confirmed by its boundaries alone.
    fixed: Option<Fixed>,
    /// When some alternatives end with `\b`: the backward passes whose
    /// candidates hold every start a match may have. Empty otherwise.
    trails: Vec<Trail>,
    /// The exact regex as a lazy DFA that gives up on non-ASCII bytes
    /// (what the meta regex runs first): on a stretch of ASCII text it
    /// finds the next match at DFA speed, and a non-ASCII byte hands the
    /// search back to the guided steps.
    ascii: Option<hybrid::regex::Regex>,
}

/// A pattern `\b X \b?`: whether its fixed-length match must end at a word
/// boundary too.
///
/// The filter of `\b X \b?` is `X`; when every match of `X` has the same
/// length, the filter's match at a start is the only match of `X` there, so
/// the exact regex matches there exactly when the boundaries it asks for
/// hold around it. The built-in SSN codon and rules such as `\bTCK-\d{6}\b`
/// have this shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fixed {
    /// Whether the match must end at one too (it always begins at one:
    /// without that, a rejected proposal could not skip to the next word).
    end: bool,
}

/// The [`Fixed`] shape of `hir`, if it has it.
fn fixed_shape(hir: &Hir) -> Option<Fixed> {
    let parts: Vec<&Hir> = match hir.kind() {
        HirKind::Capture(cap) => return fixed_shape(&cap.sub),
        HirKind::Concat(parts) => parts.iter().collect(),
        _ => vec![hir],
    };
    let is_b = |h: &&Hir| matches!(h.kind(), HirKind::Look(Look::WordUnicode));
    let start = parts.first().is_some_and(is_b);
    let end = parts.len() > usize::from(start) && parts.last().is_some_and(is_b);
    let inner = &parts[usize::from(start)..parts.len() - usize::from(end)];
    let x = Hir::concat(inner.iter().map(|&h| h.clone()).collect());
    let props = x.properties();
    let len = props.minimum_len().filter(|&n| n > 0);
    (start && props.look_set().is_empty() && len.is_some() && len == props.maximum_len())
        .then_some(Fixed { end })
}

/// One backward pass of [`trail_candidates`].
struct Trail {
    /// Some alternatives' boundary-free form, reversed (`MatchKind::All`).
    reverse: hybrid::dfa::DFA,
    /// Where the pass begins a backward search.
    from: Ends,
}

/// The positions where a [`Trail`]'s matches may end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ends {
    /// Where Unicode `\b` holds: every match of these alternatives ends
    /// with it.
    AtBoundaries,
    /// Anywhere.
    Anywhere,
}

/// The lazy-DFA caches of one [`Guide`], for one search at a time.
pub(super) struct GuideCaches {
    longest: hybrid::dfa::Cache,
    trails: Vec<hybrid::dfa::Cache>,
    ascii: Option<hybrid::regex::Cache>,
}

impl Guide {
    /// `None` when the DFA cannot be built (the guided search then runs
    /// its confirmations unbounded, within the same work budget).
    pub(super) fn new(p: &CompiledPattern) -> Option<Self> {
        let hir = parse(&p.exact_src)?;
        let longest = all_matches_dfa(&p.filter, false)?;
        let (at_end, rest) = split_at_end_boundary(&hir);
        // A pattern with no alternative that ends with `\b` gains nothing
        // from a pass started everywhere: its proposals are those starts.
        let trails = match at_end {
            Some(at_end) => {
                let mut parts = vec![(at_end, Ends::AtBoundaries)];
                parts.extend(rest.map(|r| (r, Ends::Anywhere)));
                parts
                    .into_iter()
                    .map(|(h, from)| {
                        reverse_dfa(&strip_word_looks(&h)).map(|reverse| Trail { reverse, from })
                    })
                    .collect::<Option<Vec<_>>>()
                    .unwrap_or_default()
            }
            None => Vec::new(),
        };
        Some(Self {
            longest,
            starts_at_boundary: starts_at_boundary(&hir),
            fixed: fixed_shape(&hir),
            trails,
            ascii: ascii_regex(&p.exact_src),
        })
    }

    /// Fresh caches for this guide's automata.
    pub(super) fn caches(&self) -> GuideCaches {
        GuideCaches {
            longest: hybrid::dfa::Cache::new(&self.longest),
            trails: self
                .trails
                .iter()
                .map(|t| hybrid::dfa::Cache::new(&t.reverse))
                .collect(),
            ascii: self.ascii.as_ref().map(hybrid::regex::Regex::create_cache),
        }
    }

    /// Every start a match may have in `text[from..]`, as a bit set indexed
    /// from `from`: the union of the trails' candidates. `None` without
    /// trails or past `limit` transitions in a pass.
    fn candidates(
        &self,
        caches: &mut GuideCaches,
        text: &str,
        from: usize,
        limit: usize,
    ) -> Option<Vec<u64>> {
        let mut all: Option<Vec<u64>> = None;
        for (t, cache) in self.trails.iter().zip(caches.trails.iter_mut()) {
            let set = match t.from {
                Ends::AtBoundaries => trail_candidates(&t.reverse, cache, text, from, limit)?,
                Ends::Anywhere => anywhere_candidates(&t.reverse, cache, text, from)?,
            };
            match &mut all {
                Some(all) => all.iter_mut().zip(set).for_each(|(a, s)| *a |= s),
                None => all = Some(set),
            }
        }
        all
    }
}

/// The HIR of `src`, within the engine's nesting limit.
fn parse(src: &str) -> Option<Hir> {
    regex_syntax::ParserBuilder::new()
        .nest_limit(pattern::NEST_LIMIT)
        .build()
        .parse(src)
        .ok()
}

/// `hir` as two parts whose matches together are all of its matches: one
/// whose every match ends with an assertion that implies Unicode `\b`, and
/// the rest (`None` where a part is empty). Alternatives are sorted apart,
/// through captures and into the last item of a concatenation.
fn split_at_end_boundary(hir: &Hir) -> (Option<Hir>, Option<Hir>) {
    match hir.kind() {
        HirKind::Look(look) if implies_boundary(*look) => (Some(hir.clone()), None),
        HirKind::Capture(cap) => split_at_end_boundary(&cap.sub),
        HirKind::Alternation(alts) => {
            let (mut at_end, mut rest) = (Vec::new(), Vec::new());
            for alt in alts {
                let (a, r) = split_at_end_boundary(alt);
                at_end.extend(a);
                rest.extend(r);
            }
            let join = |v: Vec<Hir>| (!v.is_empty()).then(|| Hir::alternation(v));
            (join(at_end), join(rest))
        }
        HirKind::Concat(parts) => match parts.split_last() {
            Some((last, init)) => {
                let (a, r) = split_at_end_boundary(last);
                let with = |tail: Hir| {
                    let mut v = init.to_vec();
                    v.push(tail);
                    Hir::concat(v)
                };
                (a.map(with), r.map(with))
            }
            None => (None, Some(hir.clone())),
        },
        _ => (None, Some(hir.clone())),
    }
}

/// `hir` with every word-boundary assertion replaced by the empty regex:
/// a pattern that matches wherever `hir` does, and that a DFA can run on
/// any text.
fn strip_word_looks(hir: &Hir) -> Hir {
    match hir.kind() {
        HirKind::Look(look) if is_line_or_text(*look) => hir.clone(),
        HirKind::Look(_) => Hir::empty(),
        HirKind::Capture(cap) => strip_word_looks(&cap.sub),
        HirKind::Repetition(rep) => {
            let mut rep = rep.clone();
            rep.sub = Box::new(strip_word_looks(&rep.sub));
            Hir::repetition(rep)
        }
        HirKind::Concat(parts) => Hir::concat(parts.iter().map(strip_word_looks).collect()),
        HirKind::Alternation(alts) => Hir::alternation(alts.iter().map(strip_word_looks).collect()),
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) => hir.clone(),
    }
}

/// Whether `look` is a line or text anchor (kept by the boundary-free form).
fn is_line_or_text(look: Look) -> bool {
    matches!(
        look,
        Look::Start | Look::End | Look::StartLF | Look::EndLF | Look::StartCRLF | Look::EndCRLF
    )
}

/// `src` as a lazy DFA reporting every match (`MatchKind::All`), forward
/// or reversed, within the engine's pattern limits; `None` when it cannot
/// be built.
pub(super) fn all_matches_dfa(src: &str, reverse: bool) -> Option<hybrid::dfa::DFA> {
    all_matches_builder()
        .thompson(thompson_config(reverse))
        .build(src)
        .ok()
}

/// `hir` reversed, as a lazy DFA reporting every match; `None` when it
/// cannot be built within the engine's pattern limits.
fn reverse_dfa(hir: &Hir) -> Option<hybrid::dfa::DFA> {
    let nfa = thompson::Compiler::new()
        .configure(thompson_config(true))
        .build_from_hir(hir)
        .ok()?;
    all_matches_builder().build_from_nfa(nfa).ok()
}

/// `src` (an exact pattern) as a leftmost-first lazy-DFA regex that gives
/// up on non-ASCII bytes where it has a Unicode `\b`; `None` when it cannot
/// be built within the engine's limits.
fn ascii_regex(src: &str) -> Option<hybrid::regex::Regex> {
    let dfa = hybrid::dfa::DFA::config()
        .unicode_word_boundary(true)
        .cache_capacity(pattern::PATTERN_DFA_LIMIT);
    hybrid::regex::Builder::new()
        .syntax(syntax::Config::new().nest_limit(pattern::NEST_LIMIT))
        .thompson(thompson_config(false))
        .dfa(dfa)
        .build(src)
        .ok()
}

/// A lazy-DFA builder for `MatchKind::All` within the engine's limits.
fn all_matches_builder() -> hybrid::dfa::Builder {
    let mut b = hybrid::dfa::Builder::new();
    b.configure(
        hybrid::dfa::DFA::config()
            .match_kind(MatchKind::All)
            .cache_capacity(pattern::PATTERN_DFA_LIMIT),
    )
    .syntax(syntax::Config::new().nest_limit(pattern::NEST_LIMIT));
    b
}

/// The NFA configuration of the guide's automata.
fn thompson_config(reverse: bool) -> thompson::Config {
    thompson::Config::new()
        .nfa_size_limit(Some(pattern::PATTERN_SIZE_LIMIT))
        .which_captures(thompson::WhichCaptures::None)
        .reverse(reverse)
}

/// Whether `look` implies that Unicode `\b` holds where it does.
fn implies_boundary(look: Look) -> bool {
    matches!(
        look,
        Look::WordUnicode | Look::WordStartUnicode | Look::WordEndUnicode
    )
}

/// Whether every match of `hir` begins with an assertion that implies
/// Unicode `\b` at its start.
fn starts_at_boundary(hir: &Hir) -> bool {
    match hir.kind() {
        HirKind::Look(look) => implies_boundary(*look),
        HirKind::Capture(cap) => starts_at_boundary(&cap.sub),
        HirKind::Concat(parts) => parts.first().is_some_and(starts_at_boundary),
        HirKind::Alternation(alts) => alts.iter().all(starts_at_boundary),
        _ => false,
    }
}

/// Whether Unicode `\b` holds at `at` (a char boundary of `text`); `true`
/// when it cannot be told, so that nothing is skipped.
fn is_boundary(text: &str, at: usize) -> bool {
    LookMatcher::new()
        .is_word_unicode(text.as_bytes(), at)
        .unwrap_or(true)
}

/// The first position after `at` where Unicode `\b` holds (or the end).
fn next_boundary(text: &str, at: usize) -> usize {
    let mut p = at;
    for c in text[at..].chars() {
        p += c.len_utf8();
        if is_boundary(text, p) {
            return p;
        }
    }
    text.len()
}

/// Every position of `text[from..]` where a match of `reverse`'s pattern
/// (a reversed boundary-free form) may start and end where Unicode `\b`
/// holds, as a bit set indexed from `from`; `None` when it would take more
/// than `limit` DFA transitions (or the DFA cannot run).
///
/// One backward pass keeps the set of distinct DFA states of the searches
/// begun at every end so far, so each byte costs as many transitions as
/// there are live distinct states: one giant word costs one pass, where a
/// forward search from each of its starts would read it again each time.
fn trail_candidates(
    reverse: &hybrid::dfa::DFA,
    cache: &mut hybrid::dfa::Cache,
    text: &str,
    from: usize,
    limit: usize,
) -> Option<Vec<u64>> {
    let bytes = text.as_bytes();
    let mut set = vec![0u64; (text.len() - from) / 64 + 1];
    let mut mark = |p: usize| set[(p - from) / 64] |= 1 << ((p - from) % 64);
    // An unknown word class makes every position a boundary: more
    // candidates, never fewer.
    let word = |c: Option<char>| match c {
        None => Some(false),
        Some(c) if c.is_ascii() => Some(c.is_ascii_alphanumeric() || c == '_'),
        Some(c) => regex_syntax::try_is_word_character(c).ok(),
    };
    // Start states by the byte after the end (the only context a reverse
    // start state depends on; 256 for the end of the text): prose has a
    // boundary every few characters.
    let mut starts: [Option<LazyStateID>; 257] = [None; 257];
    let clears = cache.clear_count();
    let mut live: Vec<LazyStateID> = Vec::new();
    let mut next: Vec<LazyStateID> = Vec::new();
    let mut work = 0usize;
    let mut after = word(None);
    let mut p = text.len();
    let mut chars = text[from..].chars().rev();
    loop {
        let c = chars.next();
        let before = match c {
            Some(c) => word(Some(c)),
            None => word(text[..from].chars().next_back()),
        };
        if before.zip(after).is_none_or(|(b, a)| b != a) {
            let key = bytes.get(p).map_or(256, |&b| usize::from(b));
            let sid = match starts[key] {
                Some(sid) => sid,
                None => {
                    let input = Input::new(text).range(..p).anchored(Anchored::Yes);
                    let sid = reverse.start_state_reverse(cache, &input).ok()?;
                    starts[key] = Some(sid);
                    sid
                }
            };
            // A cleared cache invalidates the state ids held across bytes.
            if cache.clear_count() != clears {
                return None;
            }
            if !live.contains(&sid) {
                live.push(sid);
            }
        }
        // The DFA reports a match one byte late: the state after the byte
        // before `p` says whether a match starts at `p`.
        let Some(c) = c else {
            for &sid in &live {
                if starts_at(reverse, cache, sid, bytes, p, clears)? {
                    mark(p);
                }
            }
            break;
        };
        let len = c.len_utf8();
        for k in (p - len..p).rev() {
            work += live.len();
            if work > limit {
                return None;
            }
            next.clear();
            for &sid in &live {
                let to = reverse.next_state(cache, sid, bytes[k]).ok()?;
                if cache.clear_count() != clears || to.is_quit() || to.is_unknown() {
                    return None;
                }
                if to.is_match() && k + 1 == p {
                    mark(p);
                }
                if !to.is_dead() && !next.contains(&to) {
                    next.push(to);
                }
            }
            std::mem::swap(&mut live, &mut next);
        }
        after = before;
        p -= len;
    }
    Some(set)
}

/// Every position of `text[from..]` where a match of `reverse`'s pattern
/// (a reversed boundary-free form) starts, wherever it ends, as a bit set
/// indexed from `from`; `None` when the DFA cannot run. One unanchored
/// backward search, one transition a byte: its state at each position
/// holds every search begun after it.
fn anywhere_candidates(
    reverse: &hybrid::dfa::DFA,
    cache: &mut hybrid::dfa::Cache,
    text: &str,
    from: usize,
) -> Option<Vec<u64>> {
    let bytes = text.as_bytes();
    let mut set = vec![0u64; (text.len() - from) / 64 + 1];
    let clears = cache.clear_count();
    let input = Input::new(text).range(from..).anchored(Anchored::No);
    let mut sid = reverse.start_state_reverse(cache, &input).ok()?;
    // The DFA reports a match one byte late: the state after the byte
    // before `p` says whether a match starts at `p`.
    let mut mark = |p: usize| set[(p - from) / 64] |= 1 << ((p - from) % 64);
    for k in (from..text.len()).rev() {
        sid = reverse.next_state(cache, sid, bytes[k]).ok()?;
        // A cleared cache invalidates the state id held across bytes.
        if cache.clear_count() != clears || sid.is_quit() || sid.is_unknown() {
            return None;
        }
        if sid.is_match() && text.is_char_boundary(k + 1) {
            mark(k + 1);
        }
    }
    if starts_at(reverse, cache, sid, bytes, from, clears)? {
        mark(from);
    }
    Some(set)
}

/// Whether a backward search in state `sid` at `p` has a match starting at
/// `p`: the state after the byte before `p` (or the start of the text)
/// says, one byte late. `None` when the DFA cannot run or its cache was
/// cleared since `clears`.
fn starts_at(
    reverse: &hybrid::dfa::DFA,
    cache: &mut hybrid::dfa::Cache,
    sid: LazyStateID,
    bytes: &[u8],
    p: usize,
    clears: usize,
) -> Option<bool> {
    let last = match p.checked_sub(1) {
        Some(k) => reverse.next_state(cache, sid, bytes[k]).ok()?,
        None => reverse.next_eoi_state(cache, sid).ok()?,
    };
    (cache.clear_count() == clears).then_some(last.is_match())
}

/// The first position at or after `at` in `set` (indexed from `from`).
fn next_candidate(set: &[u64], from: usize, at: usize) -> Option<usize> {
    let i = at.checked_sub(from)?;
    let mut w = i / 64;
    let mut bits = set.get(w)? & (u64::MAX << (i % 64));
    loop {
        if bits != 0 {
            return Some(from + w * 64 + bits.trailing_zeros() as usize);
        }
        w += 1;
        bits = *set.get(w)?;
    }
}

/// The caches of one matcher's guided search.
pub(super) struct GuidedCaches<'a> {
    /// The exact regex's.
    pub(super) exact: &'a mut Cache,
    /// The filter's.
    pub(super) filter: &'a mut Cache,
    /// The guide's, when it has one.
    pub(super) guide: Option<&'a mut GuideCaches>,
}

/// How many matches a guided search looks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Want {
    /// Every match, as `find_iter` reports them.
    All,
    /// The leftmost-first match, as one `search` reports it.
    First,
}

/// The matches `exact.find_iter(&text[from..])` yields (with `text` before
/// `from` as look-behind context), or only the first, found fast on
/// non-ASCII text. See the module doc for how.
pub(super) fn guided_search(
    exact: &Regex,
    filter: &Regex,
    guide: Option<&Guide>,
    caches: GuidedCaches<'_>,
    text: &str,
    from: usize,
    want: Want,
) -> Vec<(usize, usize)> {
    let GuidedCaches {
        exact: exact_cache,
        filter: filter_cache,
        guide: mut guide_caches,
    } = caches;
    let mut out = Vec::new();
    let mut pos = from;
    let span = text.len().saturating_sub(from);
    let budget = (GUIDED_WORK_FACTOR * GUIDED_NFA_COST)
        .saturating_mul(span)
        .saturating_add(GUIDED_WORK_BASE);
    let mut work = 0usize;
    // Candidate starts of a pattern with alternatives that end at a
    // boundary, once forward proposals have cost a pass over the text:
    // (from, bit set).
    let mut trail: Option<(usize, Vec<u64>)> = None;
    let mut trail_tried = false;
    let next_char = |at: usize| at + text[at..].chars().next().map_or(1, char::len_utf8);
    // Records match `m`; where the search goes on (`None`: it is done).
    let found = |m: Match, out: &mut Vec<(usize, usize)>| {
        out.push((m.start(), m.end()));
        match want {
            Want::First => None,
            Want::All if m.is_empty() => Some(next_char(m.end())),
            Want::All => Some(m.end()),
        }
    };
    // The plain search from `pos`, for what is left once the budget is spent.
    let plain = |cache: &mut Cache, pos: usize, out: &mut Vec<(usize, usize)>| {
        let rest = Input::new(text).range(pos..);
        match want {
            Want::All => out.extend(find_iter_with(exact, cache, rest)),
            Want::First => out.extend(
                exact
                    .search_with(cache, &rest)
                    .map(|m| (m.start(), m.end())),
            ),
        }
    };
    // The next non-ASCII byte at or after `pos` (memoised: found once per
    // byte), and where the DFA may next try: past where it last gave up.
    let mut non_ascii = 0usize;
    let mut retry_at = from;
    while pos <= text.len() {
        if let (Some(re), Some(cache)) = (
            guide.and_then(|g| g.ascii.as_ref()),
            guide_caches.as_deref_mut().and_then(|c| c.ascii.as_mut()),
        ) {
            if pos >= non_ascii {
                non_ascii = pos
                    + text.as_bytes()[pos..]
                        .iter()
                        .position(|b| !b.is_ascii())
                        .unwrap_or(text.len() - pos);
            }
            // Its start state looks at the byte before `pos`, too.
            let behind_ascii = pos == 0 || text.as_bytes()[pos - 1].is_ascii();
            if pos >= retry_at
                && behind_ascii
                && non_ascii - pos >= ASCII_STRETCH.min(text.len() - pos)
            {
                match re.try_search(cache, &Input::new(text).range(pos..)) {
                    Ok(Some(m)) => match found(m, &mut out) {
                        Some(next) => {
                            pos = next;
                            continue;
                        }
                        None => break,
                    },
                    Ok(None) => break,
                    // It met a non-ASCII byte: the guided steps go on from
                    // `pos`, and the DFA tries again past that byte.
                    Err(e) => {
                        retry_at = match e.kind() {
                            MatchErrorKind::Quit { offset, .. } => *offset.max(&non_ascii) + 1,
                            _ => text.len() + 1,
                        };
                    }
                }
            }
        }
        let start = match &trail {
            Some((from, set)) => match next_candidate(set, *from, pos) {
                Some(s) => s,
                None => break,
            },
            None => {
                let Some(proposed) =
                    filter.search_with(filter_cache, &Input::new(text).range(pos..))
                else {
                    break;
                };
                work = work
                    .saturating_add(proposed.end() - pos)
                    .saturating_add(GUIDED_CALL_COST);
                if let Some(f) = guide.and_then(|g| g.fixed) {
                    let (s, e) = (proposed.start(), proposed.end());
                    if !is_boundary(text, s) {
                        // Every match begins at a boundary: none begins
                        // before the next one.
                        pos = next_boundary(text, s);
                    } else if !f.end || is_boundary(text, e) {
                        match found(proposed, &mut out) {
                            Some(next) => pos = next,
                            None => break,
                        }
                    } else {
                        pos = next_char(s);
                    }
                    continue;
                }
                proposed.start()
            }
        };
        if guide.is_some_and(|g| g.starts_at_boundary) && !is_boundary(text, start) {
            if start >= text.len() {
                break;
            }
            if work > budget {
                plain(exact_cache, pos, &mut out);
                break;
            }
            pos = next_boundary(text, start);
            continue;
        }
        let bound = match (guide, guide_caches.as_deref_mut()) {
            (Some(g), Some(gc)) if text.len() - start > BOUND_AFTER => g
                .longest
                .try_search_fwd(
                    &mut gc.longest,
                    &Input::new(text).range(start..).anchored(Anchored::Yes),
                )
                .ok()
                .flatten()
                .map_or(text.len(), |m| m.offset()),
            _ => text.len(),
        };
        work = work
            .saturating_add(bound - start)
            .saturating_add(GUIDED_CALL_COST);
        if !trail_tried && work > 2 * span.max(TRAIL_MIN_SPAN) {
            // Forward proposals re-read the text: a pattern with
            // alternatives that end at a boundary gets every candidate
            // start from backward passes.
            trail_tried = true;
            if let (Some(g), Some(gc)) = (guide, guide_caches.as_deref_mut()) {
                if let Some(set) = g.candidates(gc, text, pos, budget) {
                    trail = Some((pos, set));
                    work = 0;
                    continue;
                }
            }
        }
        if work > budget {
            plain(exact_cache, pos, &mut out);
            break;
        }
        // Charged after it runs: a confirmation that succeeds over the whole
        // rest is the cheapest search of it there is (anchored, one pass).
        work = work.saturating_add((bound - start).saturating_mul(GUIDED_NFA_COST));
        match exact.search_with(
            exact_cache,
            &Input::new(text).range(start..bound).anchored(Anchored::Yes),
        ) {
            Some(m) => match found(m, &mut out) {
                Some(next) => pos = next,
                None => break,
            },
            None => pos = next_char(start),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::{plain_first, run_guided_from};
    use super::*;
    use crate::pattern::compile;
    use proptest::prelude::*;

    /// The two parts of `src`, printed (`-` for an empty part).
    fn split(src: &str) -> (String, String) {
        let (a, r) = split_at_end_boundary(&parse(src).unwrap());
        let show = |h: Option<Hir>| h.map_or("-".to_string(), |h| h.to_string());
        (show(a), show(r))
    }

    #[test]
    fn alternatives_are_sorted_by_whether_they_end_at_a_boundary() {
        assert_eq!(split(r"\w+ing\b").1, "-");
        assert_eq!(split(r"\bx\w+").0, "-");
        let (a, r) = split(r"\w+ing\b|zz");
        assert_ne!(a, "-");
        assert_eq!(r, "(?:zz)");
        // Into the last item of a concatenation, through a group.
        let (a, r) = split(r"x(a\b|b)");
        assert_eq!((a.as_str() != "-", r.as_str() != "-"), (true, true));
        // An ASCII `\b` does not imply Unicode `\b`.
        assert_eq!(split(r"(?-u:\b)x(?-u:\b)").0, "-");
    }

    #[test]
    fn fixed_length_shapes_are_recognised() {
        let shape = |src: &str| fixed_shape(&parse(&compile(src, &[]).unwrap().exact_src).unwrap());
        assert_eq!(shape(r"\b\d{3}-\d{2}-\d{4}\b"), Some(Fixed { end: true }));
        assert_eq!(shape(r"\bTCK-\d{6}\b"), Some(Fixed { end: true }));
        assert_eq!(shape(r"\b(?:ab|cd)\b"), Some(Fixed { end: true }));
        assert_eq!(shape(r"\bx\d{2}"), Some(Fixed { end: false }));
        // Lengths that differ, a `\b` inside, none at the start, `\b` alone,
        // a Unicode class (its characters differ in bytes).
        for src in [
            r"\b\d{3,4}\b",
            r"\b(?:a|ab)\b",
            r"\ba\bb\b",
            r"\d{3}\b",
            r"\b",
            r"\b\w{3}\b",
            r"\B\d{3}",
        ] {
            assert_eq!(shape(src), None, "{src}");
        }
    }

    #[test]
    fn trails_are_built_only_when_some_alternative_ends_at_a_boundary() {
        let froms = |src: &str| -> Vec<Ends> {
            let g = Guide::new(&compile(src, &[]).unwrap()).unwrap();
            g.trails.iter().map(|t| t.from).collect()
        };
        assert_eq!(froms(r"\w+ing\b"), [Ends::AtBoundaries]);
        assert_eq!(froms(r"\w+ing\b|zz"), [Ends::AtBoundaries, Ends::Anywhere]);
        assert_eq!(froms(r"\bx\w+"), []);
        assert_eq!(froms(r"\bx\w+|y"), []);
    }

    /// Patterns whose alternatives end with `\b` and without it, with `\b`
    /// elsewhere, and with line anchors.
    const MIXED: &[&str] = &[
        r"\w+ing\b|zz",
        r"x(?:a\b|b)",
        r"é\b|[a-c]+",
        r"\w+\b|\b",
        r"(?m)\w+ing\b|^é",
        r"a\b|ab",
        r"\w{1,3}\b\s?|é",
    ];

    /// The positions of `text` from `from` where `p`'s exact regex has an
    /// anchored match.
    fn true_starts(p: &CompiledPattern, text: &str, from: usize) -> Vec<usize> {
        (from..=text.len())
            .filter(|&s| text.is_char_boundary(s))
            .filter(|&s| {
                p.exact
                    .search(&Input::new(text).range(s..).anchored(Anchored::Yes))
                    .is_some()
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Every start of a match is a candidate (more candidates only
        /// cost confirmations; a missing one would lose a match).
        #[test]
        fn candidates_hold_every_start(
            text in "[abgiénz会 \n.]{0,40}",
            cut in 0usize..41,
        ) {
            for src in MIXED {
                let p = compile(src, &[]).unwrap();
                let g = Guide::new(&p).unwrap();
                if g.trails.is_empty() {
                    continue;
                }
                let mut from = cut.min(text.len());
                while !text.is_char_boundary(from) {
                    from -= 1;
                }
                let set = g.candidates(&mut g.caches(), &text, from, usize::MAX).unwrap();
                for s in true_starts(&p, &text, from) {
                    prop_assert_eq!(next_candidate(&set, from, s), Some(s), "{} on {:?}", src, text);
                }
            }
        }

        /// The first match from any position is the one a plain search
        /// from there reports.
        #[test]
        fn first_match_from_anywhere_is_the_plain_search(
            text in "[abgiénz会 .]{0,40}",
            cut in 0usize..41,
        ) {
            for src in MIXED.iter().chain([&r"\w+ing\b", &r"\bx\w+"]) {
                let p = compile(src, &[]).unwrap();
                let mut from = cut.min(text.len());
                while !text.is_char_boundary(from) {
                    from -= 1;
                }
                let want = plain_first(&p, &text, from);
                let got = run_guided_from(&p, &text, from, Want::First, true);
                prop_assert_eq!(got, want, "{} on {:?} from {}", src, text, from);
            }
        }
    }

    #[test]
    fn a_giant_word_gets_its_candidates_from_backward_passes() {
        // 40,000 words' worth of one word, then the only matches: the
        // forward proposals re-read the word, so the backward passes run,
        // and the one started everywhere must see `zz`.
        let p = compile(r"\w+ing\b|zz", &[]).unwrap();
        let text = format!("{} aing zz", "aingé".repeat(40_000));
        let got = run_guided_from(&p, &text, 0, Want::All, true);
        let n = text.len();
        assert_eq!(got, [(n - 7, n - 3), (n - 2, n)]);
    }
}
