//! The liveness plan of an evaluator ([`LivePlan`]), built once when the
//! pack is first streamed: each rule's lazy DFA, the byte tables found by
//! exploring it at load (first, inner, required and keep bytes, the leading
//! word assertion), and the per-byte rule masks a push reads for all rules
//! at once. Read-only once built and shared by every session of the
//! evaluator: it holds no session state and never sees a session's text.
//!
//! # Design
//!
//! - Rules with a Unicode word boundary (`\b`), which the DFAs cannot
//!   evaluate on non-ASCII text, use their boundary-free form with
//!   `MatchKind::All`: it accepts a superset of the matches and keeps every
//!   thread that could match, so it only ever holds back more, never less. A
//!   leading word boundary is checked exactly when a thread starts (the
//!   characters on both sides are known by then), so words do not each open
//!   a thread at every letter. Rules without word boundaries use their exact
//!   pattern with leftmost-first semantics, which dies as soon as a
//!   higher-priority alternative is ruled out.
//! - A per-rule table of the bytes that can begin a match lets the scan skip
//!   most bytes without a transition.
//! - A rule's *inner* bytes are those some partial match can consume and
//!   stay undecided (found at load by exploring the DFA). A thread that
//!   consumes any other byte dies or settles, so every match that starts
//!   before the last such byte of a piece (a space, for the e-mail codon)
//!   also ends before it, and only the text after it is simulated. Every
//!   byte of a match is inner, so a match also needs a run of inner bytes
//!   as long as the rule's shortest match (regex-syntax's `minimum_len`):
//!   short skipped text without one (a piece of prose with a date in it, for
//!   the card codon's 16 digits) needs no look at all.
//! - A rule's *keep* bytes (ASCII, found at load) are those that keep every
//!   fresh partial match live and undecided, whatever their order: from any
//!   start, any run of them leads to a state that is not dead, not a match
//!   and not terminal (the e-mail codon's local-part characters). A thread
//!   that opens at the start of such a run is live whatever the run holds,
//!   so it need not be simulated (see `advance.rs`).
//! - The tables become per-byte rule masks ([`RuleMask`]), so that a push
//!   finds, in one pass over its bytes, the rules it concerns.

use super::mask::RuleMask;
use super::threads::{ascii_lead, is_continuation, is_terminal, is_word_byte};
use crate::engine::{Evaluator, Matcher, Severity};
use crate::pattern::{NEST_LIMIT, PATTERN_SIZE_LIMIT};
use regex_automata::hybrid::dfa::{Cache as LazyCache, DFA};
use regex_automata::hybrid::LazyStateID;
use regex_automata::nfa::thompson;
use regex_automata::util::look::Look;
use regex_automata::util::{start, syntax};
use regex_automata::{Anchored, MatchKind};
use std::collections::{HashMap, HashSet};

/// Lazy-DFA cache of one rule's liveness automaton in one session.
const LIVE_CACHE_BYTES: usize = 1 << 20;

/// The liveness automata of one evaluator, built once.
pub(in crate::engine) struct LivePlan {
    pub(super) rules: Vec<LiveRule>,
    /// For matcher `i`: its trigger slot (custom rules, then hard rules).
    pub(super) slot: Vec<usize>,
    /// Severity, rule id, action and reason of each trigger slot.
    pub(super) slots: Vec<SlotInfo>,
    /// For matcher `i`: its placeholder (a copy of the evaluator's, so that
    /// a release needs nothing but the plan).
    pub(super) placeholders: Vec<String>,
    /// For each class of the byte before (see [`class_of`]) and each byte,
    /// the rules a match of which can begin there. A rule whose matches
    /// begin with a word assertion is left out where the assertion fails
    /// between ASCII characters: in prose, the health-id codon (`\b` then
    /// `M`, `E` or `R`) starts only at the words that begin with those
    /// letters.
    ///
    /// [`class_of`]: super::threads::class_of
    pub(super) first_mask: [[RuleMask; 256]; 4],
    /// For each byte, the rules for which it is inner (see [`LiveRule`]).
    pub(super) inner_mask: [RuleMask; 256],
    /// For each byte, the rules that require it (or require nothing).
    pub(super) required_mask: [RuleMask; 256],
}

pub(super) struct SlotInfo {
    pub(super) severity: Severity,
}

pub(super) struct LiveRule {
    /// `None` when the automaton could not be built: the rule then holds
    /// back from its first possible start (fail closed).
    pub(super) dfa: Option<DFA>,
    /// A word assertion every match starts with, checked exactly at a start.
    pub(super) lead: Option<Look>,
    /// `lead` between ASCII characters, by whether the one before and the
    /// one after are word characters: a start then needs no Unicode table.
    pub(super) lead_ascii: Option<[[bool; 2]; 2]>,
    /// Bytes that can begin a match (from any start context), never a
    /// byte inside a character: one load decides at every byte.
    pub(super) first: [bool; 256],
    /// Bytes that a partial match can consume and stay undecided: a thread
    /// that consumes any other byte dies or is settled, so only the text
    /// after the last such byte can hold a live start.
    pub(super) inner: [bool; 256],
    /// Bytes of which every match holds one (all bytes when there is no
    /// such set).
    pub(super) required: [bool; 256],
    /// Bytes that keep a fresh partial match live and undecided: from any
    /// anchored start, every non-empty run of them leads to a state that is
    /// not dead, not a match and not terminal (see [`keep_bytes`]). A
    /// thread that opens at the start of such a run at the end of a piece
    /// is live whatever its bytes, so it is not simulated at all until the
    /// run ends (see [`RuleState::deferred`]).
    ///
    /// [`RuleState::deferred`]: super::core::RuleState::deferred
    pub(super) keep: [bool; 256],
    /// Whether `keep` holds any byte.
    pub(super) defers: bool,
    /// The length in bytes of the shortest match of the exact pattern
    /// (0 when unknown).
    pub(super) min_len: usize,
}

/// Lazy-DFA caches of one session, one per rule (`None` for a rule without an automaton).
pub(in crate::engine) struct LiveCaches(pub(super) Vec<Option<LazyCache>>);

impl LivePlan {
    /// No rules: the plan of a whole-mode session, which never steps.
    pub(super) fn empty() -> Self {
        Self {
            rules: Vec::new(),
            slot: Vec::new(),
            slots: Vec::new(),
            placeholders: Vec::new(),
            first_mask: [[RuleMask::EMPTY; 256]; 4],
            inner_mask: [RuleMask::EMPTY; 256],
            required_mask: [RuleMask::EMPTY; 256],
        }
    }

    pub(super) fn new(ev: &Evaluator) -> Self {
        let rules: Vec<LiveRule> = ev.matchers.iter().map(LiveRule::new).collect();
        let base = ev.rules.len();
        let hard = &ev.program.hard_rules;
        // A natively streamed program has each codon read by exactly one
        // hard rule (`Program::streams_natively`): its trigger slot.
        let slot = (0..ev.matchers.len())
            .map(|i| {
                if i < base {
                    i
                } else {
                    let c = i - base;
                    base + hard.iter().position(|h| h.reads.contains(&c)).unwrap_or(0)
                }
            })
            .collect();
        let placeholders = (0..ev.matchers.len())
            .map(|i| ev.redaction_key(i).1.to_string())
            .collect();
        let slots = ev
            .rules
            .iter()
            .map(|r| SlotInfo {
                severity: r.severity,
            })
            .chain(hard.iter().map(|h| SlotInfo {
                severity: if h.fatal {
                    Severity::Fatal
                } else {
                    Severity::Warning
                },
            }))
            .collect();
        // A fourth class, never given (see `class_of`), keeps the lookup
        // free of a bounds check.
        let mut first_mask = [[RuleMask::EMPTY; 256]; 4];
        let mut inner_mask = [RuleMask::EMPTY; 256];
        let mut required_mask = [RuleMask::EMPTY; 256];
        for (i, r) in rules.iter().enumerate() {
            for b in 0..=255u8 {
                let k = usize::from(b);
                for (class, mask) in first_mask.iter_mut().enumerate().take(3) {
                    if r.can_start_after(class, b) {
                        mask[k].insert(i);
                    }
                }
                if r.inner[k] {
                    inner_mask[k].insert(i);
                }
                if r.required[k] {
                    required_mask[k].insert(i);
                }
            }
        }
        Self {
            rules,
            slot,
            slots,
            placeholders,
            first_mask,
            inner_mask,
            required_mask,
        }
    }

    pub(super) fn caches(&self) -> LiveCaches {
        LiveCaches(
            self.rules
                .iter()
                .map(|r| r.dfa.as_ref().map(DFA::create_cache))
                .collect(),
        )
    }
}

impl LiveRule {
    /// Whether a match can begin with byte `b` (never inside a character).
    #[inline]
    pub(super) fn can_start(&self, b: u8) -> bool {
        self.first[usize::from(b)]
    }

    /// Whether a match can begin with byte `b` after a byte of `class`
    /// (see [`class_of`]): [`Self::can_start`], and the leading word
    /// assertion, where the characters on both sides are ASCII.
    ///
    /// [`class_of`]: super::threads::class_of
    fn can_start_after(&self, class: usize, b: u8) -> bool {
        let lead = match self.lead_ascii {
            Some(t) if class < 2 && b.is_ascii() => t[class][usize::from(is_word_byte(b))],
            _ => true,
        };
        self.can_start(b) && lead
    }

    fn new(m: &Matcher) -> Self {
        let (src, kind) = match &m.filter_src {
            Some(f) => (f.as_str(), MatchKind::All),
            None => (m.exact_src.as_str(), MatchKind::LeftmostFirst),
        };
        let dfa = DFA::builder()
            .configure(
                DFA::config()
                    .match_kind(kind)
                    .cache_capacity(LIVE_CACHE_BYTES)
                    .skip_cache_capacity_check(true)
                    .minimum_cache_clear_count(None),
            )
            .syntax(syntax::Config::new().nest_limit(NEST_LIMIT))
            .thompson(thompson::Config::new().nfa_size_limit(Some(PATTERN_SIZE_LIMIT)))
            .build(src)
            .ok();
        let hir = regex_syntax::ParserBuilder::new()
            .nest_limit(NEST_LIMIT)
            .build()
            .parse(&m.exact_src)
            .ok();
        let lead = hir
            .as_ref()
            .and_then(leading_look)
            .filter(|l| is_word_look(*l));
        // Unknown (no parse, no match at all): 0 rules nothing out.
        let min_len = hir
            .as_ref()
            .and_then(|h| h.properties().minimum_len())
            .unwrap_or(0);
        let (mut first, inner, keep) = match &dfa {
            Some(d) => (
                first_bytes(d).unwrap_or([true; 256]),
                inner_bytes(d).unwrap_or([true; 256]),
                keep_bytes(d).unwrap_or([false; 256]),
            ),
            None => ([true; 256], [true; 256], [false; 256]),
        };
        for b in 0..=255u8 {
            if is_continuation(b) {
                first[usize::from(b)] = false;
            }
        }
        let mut required = [m.required.is_none(); 256];
        for &b in m.required.iter().flatten() {
            required[usize::from(b)] = true;
        }
        let lead_ascii = lead.and_then(|l| {
            let mut t = [[false; 2]; 2];
            for (before, row) in t.iter_mut().enumerate() {
                for (after, cell) in row.iter_mut().enumerate() {
                    *cell = ascii_lead(l, before == 1, after == 1)?;
                }
            }
            Some(t)
        });
        Self {
            dfa,
            lead,
            lead_ascii,
            first,
            inner,
            required,
            defers: keep.contains(&true),
            keep,
            min_len,
        }
    }

    /// Whether `bytes` hold a run of inner bytes as long as the shortest
    /// match: every byte of a match but the one after it is inner (a thread
    /// that consumes another byte is dead or terminal, and then sees no
    /// match), so without such a run no match lies in `bytes` before their
    /// last byte.
    #[inline]
    pub(super) fn has_room(&self, bytes: &[u8]) -> bool {
        let mut run = 0usize;
        self.min_len == 0
            || bytes.iter().any(|&b| {
                run = if self.inner[usize::from(b)] {
                    run + 1
                } else {
                    0
                };
                run >= self.min_len
            })
    }
}

fn is_word_look(l: Look) -> bool {
    !matches!(
        l,
        Look::Start | Look::End | Look::StartLF | Look::EndLF | Look::StartCRLF | Look::EndCRLF
    )
}

/// The assertion every match of `h` begins with, if there is one.
fn leading_look(h: &regex_syntax::hir::Hir) -> Option<Look> {
    use regex_syntax::hir::HirKind;
    match h.kind() {
        HirKind::Look(l) => Look::from_repr(l.as_repr()),
        HirKind::Capture(c) => leading_look(&c.sub),
        HirKind::Repetition(r) if r.min > 0 => leading_look(&r.sub),
        HirKind::Concat(parts) => parts.first().and_then(leading_look),
        HirKind::Alternation(alts) => {
            let first = leading_look(alts.first()?)?;
            alts[1..]
                .iter()
                .all(|a| leading_look(a) == Some(first))
                .then_some(first)
        }
        _ => None,
    }
}

/// Most DFA states explored to find a rule's inner bytes; past it, every
/// byte counts as inner (the rule is then simulated over all of its text).
const MAX_EXPLORED_STATES: usize = 2048;

/// The distinct anchored start states of `dfa`, over every look-behind
/// byte and the start of the text.
fn anchored_starts(dfa: &DFA, cache: &mut LazyCache) -> Option<Vec<LazyStateID>> {
    let mut starts = Vec::new();
    for lb in std::iter::once(None).chain((0..=255u8).map(Some)) {
        let cfg = start::Config::new().anchored(Anchored::Yes).look_behind(lb);
        let sid = dfa.start_state(cache, &cfg).ok()?;
        if !starts.contains(&sid) {
            starts.push(sid);
        }
    }
    Some(starts)
}

/// [`is_terminal`] for a state explored at load, remembered in `memo`;
/// `None` when the check cleared the cache (every collected id is then
/// stale).
fn terminal_memo(
    dfa: &DFA,
    cache: &mut LazyCache,
    memo: &mut HashMap<LazyStateID, bool>,
    sid: LazyStateID,
) -> Option<bool> {
    if let Some(&t) = memo.get(&sid) {
        return Some(t);
    }
    let t = is_terminal(dfa, cache, sid);
    if cache.clear_count() > 0 {
        return None;
    }
    memo.insert(sid, t);
    Some(t)
}

/// Bytes on which some state reachable from an anchored start moves to a
/// state that is neither dead nor terminal; `None` when the automaton is
/// too large to explore.
fn inner_bytes(dfa: &DFA) -> Option<[bool; 256]> {
    let mut cache = dfa.create_cache();
    // States to explore, in order, and the set of those already queued.
    let mut queue = anchored_starts(dfa, &mut cache)?;
    let mut seen: HashSet<LazyStateID> = queue.iter().copied().collect();
    let classes = dfa.byte_classes();
    let reps: Vec<u8> = classes
        .representatives(0..=255)
        .filter_map(|u| u.as_u8())
        .collect();
    // Byte classes (at most 256) through which a partial match goes on.
    let mut inner_class = [false; 256];
    let mut terminal: HashMap<LazyStateID, bool> = HashMap::new();
    let mut k = 0;
    while k < queue.len() {
        let sid = queue[k];
        k += 1;
        for &b in &reps {
            let next = dfa.next_state(&mut cache, sid, b).ok()?;
            // A cleared cache invalidates every state id collected so far
            // (using one would index past the new cache's states).
            if cache.clear_count() > 0 {
                return None;
            }
            if next.is_dead() {
                continue;
            }
            if !terminal_memo(dfa, &mut cache, &mut terminal, next)? {
                inner_class[usize::from(classes.get(b))] = true;
            }
            if seen.insert(next) {
                if queue.len() >= MAX_EXPLORED_STATES {
                    return None;
                }
                queue.push(next);
            }
        }
        // A cleared cache invalidates the collected state ids.
        if cache.clear_count() > 0 {
            return None;
        }
    }
    let mut inner = [false; 256];
    for (b, slot) in (0..=255u8).zip(inner.iter_mut()) {
        *slot = inner_class[usize::from(classes.get(b))];
    }
    Some(inner)
}

/// Bytes on which some anchored start state does not die.
fn first_bytes(dfa: &DFA) -> Option<[bool; 256]> {
    let mut cache = dfa.create_cache();
    let starts = anchored_starts(dfa, &mut cache)?;
    let mut first = [false; 256];
    for b in 0..=255u8 {
        for &sid in &starts {
            let next = dfa.next_state(&mut cache, sid, b).ok()?;
            if cache.clear_count() > 0 {
                return None;
            }
            if !next.is_dead() {
                first[usize::from(b)] = true;
                break;
            }
        }
        // A cleared cache invalidates the collected start states.
        if cache.clear_count() > 0 {
            return None;
        }
    }
    Some(first)
}

/// Bytes that keep every fresh partial match live and undecided: a set
/// such that, from every anchored start state, each byte of it leads to a
/// state that is not dead, not a match and not terminal, and so does each of
/// them from every state reached that way. `None` when the automaton is too
/// large to explore (nothing is then deferred).
///
/// ASCII bytes only. Found by exploring the states reachable through the
/// candidate bytes, breadth first, and dropping the byte class of the first bad transition
/// met, then exploring again: the bad transition nearest to a start decides,
/// so a byte is not dropped because of states that only a byte dropped later
/// reaches (for the e-mail codon, `@` goes first, and the letters stay).
fn keep_bytes(dfa: &DFA) -> Option<[bool; 256]> {
    let mut cache = dfa.create_cache();
    let starts = anchored_starts(dfa, &mut cache)?;
    // ASCII bytes only, one per byte class: a text is valid UTF-8, and a
    // run of keep bytes never splits a character (bytes of multi-byte
    // characters would make every byte after a lead byte bad).
    let classes = dfa.byte_classes();
    let mut reps: Vec<u8> = Vec::new();
    for b in 0..=127u8 {
        if !reps.iter().any(|&r| classes.get(r) == classes.get(b)) {
            reps.push(b);
        }
    }
    let mut keep_class = [true; 256];
    let mut terminal: HashMap<LazyStateID, bool> = HashMap::new();
    // Each round drops one class or ends: at most one round per class.
    'rounds: for _ in 0..=reps.len() {
        let mut queue = starts.clone();
        let mut seen: HashSet<LazyStateID> = starts.iter().copied().collect();
        let mut k = 0;
        while k < queue.len() {
            let sid = queue[k];
            k += 1;
            for &b in &reps {
                let class = usize::from(classes.get(b));
                if !keep_class[class] {
                    continue;
                }
                let next = dfa.next_state(&mut cache, sid, b).ok()?;
                // A cleared cache invalidates every state id collected so far.
                if cache.clear_count() > 0 {
                    return None;
                }
                let bad = next.is_dead()
                    || next.is_match()
                    || terminal_memo(dfa, &mut cache, &mut terminal, next)?;
                if bad {
                    keep_class[class] = false;
                    continue 'rounds;
                }
                if seen.insert(next) {
                    if queue.len() >= MAX_EXPLORED_STATES {
                        return None;
                    }
                    queue.push(next);
                }
            }
        }
        // A whole round without a bad transition: the set holds.
        let mut keep = [false; 256];
        for (b, slot) in (0..=127u8).zip(keep.iter_mut()) {
            *slot = keep_class[usize::from(classes.get(b))];
        }
        return Some(keep);
    }
    None
}
