//! Stream sessions (SPEC §11.1): evaluate a text that arrives in pieces and
//! release its redacted form as soon as no continuation could change it.
//! Never releases a character that a later piece could turn into part of a
//! match, never logs or stores a matched value, and never rescans released
//! text.
//!
//! A [`Session`] holds its evaluator through a handle: a borrow
//! ([`StreamSession`], from [`Evaluator::stream`]) for a stream that runs
//! within one call, or an `Arc` ([`OwnedStreamSession`], from
//! [`Evaluator::stream_owned`]) for one that must outlive any borrow, e.g. a
//! session kept in a task across the messages of a streamed reply. Both run
//! the same code and release the same text.
//!
//! # Design
//!
//! The engine reports, per rule, the matches of a leftmost-first,
//! non-overlapping search (then drops candidates that fail a checksum). For
//! every rule the session keeps a position `p`: every match starting before
//! `p` has been *committed* (it is the same whatever arrives next), and no
//! other match can start before `p`. Between pushes the session answers one
//! question per rule: which is the earliest start `s ≥ p` still **live**,
//! that is, from which a continuation could still produce a match (or change
//! one that ends at the current end)?
//!
//! Liveness comes from a lazy DFA (`regex_automata::hybrid`), run
//! **anchored** from every start position at once:
//!
//! - each *thread* is a start position and the DFA state reached from it;
//!   a thread whose state is dead can never match from its start, and two
//!   threads in the same state have the same future, so only the earlier
//!   start is kept (a later start dies when the earlier one does). Each
//!   byte costs one transition per live thread: the work is linear in the
//!   text and independent of how it was cut;
//! - a state that every byte and the end of input lead to the dead state is
//!   as good as dead (a match that ended one character ago and that nothing
//!   can extend, e.g. after a trailing `\b` was settled);
//! - rules with a Unicode word boundary (`\b`), which the DFAs cannot
//!   evaluate on non-ASCII text, use their boundary-free form with
//!   `MatchKind::All`: it accepts a superset of the matches and keeps every
//!   thread that could match, so it only ever holds back more, never less. A
//!   leading word boundary is checked exactly when a thread starts (the
//!   characters on both sides are known by then), so words do not each open
//!   a thread at every letter. Rules without word boundaries use their exact
//!   pattern with leftmost-first semantics, which dies as soon as a
//!   higher-priority alternative is ruled out;
//! - a per-rule table of the bytes that can begin a match lets the scan skip
//!   most bytes without a transition;
//! - a rule's *inner* bytes are those some partial match can consume and
//!   stay undecided (found at load by exploring the DFA). A thread that
//!   consumes any other byte dies or settles, so every match that starts
//!   before the last such byte of a piece (a space, for the e-mail codon)
//!   also ends before it, and only the text after it is simulated. One
//!   forward pass over a piece of up to 64 bytes (two, one backward, over
//!   a longer one) finds that byte for every rule at once. Every byte of
//!   a match is inner, so a match also needs a run of inner bytes as long
//!   as the rule's shortest match (regex-syntax's `minimum_len`): short
//!   skipped text without one (a piece of prose with a date in it, for the
//!   card codon's 16 digits) needs no look at all;
//! - a rule's *keep* bytes (ASCII, found at load) are those that keep every
//!   fresh partial match live and undecided, whatever their order: from any
//!   start, any run of them leads to a state that is not dead, not a match
//!   and not terminal (the e-mail codon's local-part characters). A thread
//!   that would open at the start of such a run at the end of a piece, with
//!   no other thread live, is certainly live and the earliest live start, so
//!   it is *deferred*: recorded by its start and not simulated. The next
//!   piece either extends the run (still deferred), ends it at a byte no
//!   partial match can consume (then settled like skipped text: the exact
//!   search looks only if a required byte occurred since its start), or
//!   brings another byte (then simulated from its start). A word of prose
//!   cut across pieces thus costs the e-mail codon no transition at all, and
//!   deferral releases exactly what simulation would (a unit property test
//!   compares them piece by piece).
//!
//! Every start before the earliest live start is settled, so the exact
//! regex (the same search as [`Evaluator::evaluate`], through the same
//! boundary-free guide on non-ASCII text) finds the committed matches there,
//! validates them (Luhn, SSN), and moves `p` past them. It runs only where a
//! match may be: from the start of a thread that reached a match state, or
//! over skipped text that holds both a byte that can begin a match and one
//! of the rule's required bytes (short skipped text is simulated instead,
//! which is cheaper than a search). The matches of all
//! rules merge into regions by the §6.3 sweep; the session releases the
//! text before the earliest live start of any rule, cut before any region
//! that a later match could still extend. A committed FATAL match blocks the
//! session at once (with `block_on_fatal`); the end of input settles
//! everything.
//!
//! A push looks only at the rules it can concern: those with threads,
//! unsearched starts or no automaton (a bitmask kept across pushes) and
//! those that one of its bytes can start, where the rule's leading word
//! assertion can hold (one table per class of the byte before: in prose,
//! `\b(?:MRN|EHR|RX)` wakes only at words that begin with `m`, `e` or
//! `r`). Of those, a rule without threads whose skipped text may hold no
//! match and whose bytes after its last non-inner byte start nothing is
//! not visited either. Every other rule is idle, settled up to the end of
//! the text scanned so far, and costs nothing.
//!
//! The total work is linear in the text: each byte is fed to each rule's
//! threads at most once (a rare replay after a committed match that live
//! threads began inside, or after a lazy-DFA cache clear, is bounded by the
//! held text), and released text is dropped from the buffer, keeping one
//! character as look-behind context. Nothing else a push does grows with
//! the text held back: the committed matches wait in sweep order and a
//! release visits only those that start before its cut; the required-bytes
//! scan starts where the exact search does; `lookahead_chars` keeps its
//! whitespace scan across pushes; and whether the text after a commit is
//! ASCII is known from the last non-ASCII byte pushed (a held run of
//! 60,000 characters once cost each of its pushes all of these).
//!
//! # The decision
//!
//! A session yields the decision of the whole text itself
//! ([`Session::decision`]), equal to [`Evaluator::evaluate_with`] but for
//! `clean_text` (what it released) and `latency_us` (its own engine time):
//! it records each committed match in code points (mapped back through the
//! view with normalization), hashes the text as it arrives for the
//! receipt, and, once blocked, keeps judging what is pushed without
//! releasing any of it, so that the triggers after the block are counted.
//! `max_session_ms` bounds the engine time of the pushes and the finish:
//! past it the session stops all work (it only hashes what is pushed) and
//! decides [`COST_ACTION`], fail closed. [`Session::push_many`] pushes a
//! batch with one measurement of the thread's CPU time, and
//! [`Session::park`] gives the caches back while a session waits.

use super::decision::{Decision, Source, Trigger, BLOCKED_TEXT};
use super::normalize::{self, Normalize, Normalizer, ViewMap};
use super::receipt::receipt_hash_of;
use super::{write_regions, Caches, Evaluator, Severity};

mod whole;
use crate::pattern::{NEST_LIMIT, PATTERN_SIZE_LIMIT};
use regex_automata::hybrid::dfa::{Cache as LazyCache, DFA};
use regex_automata::hybrid::LazyStateID;
use regex_automata::nfa::thompson;
use regex_automata::util::look::{Look, LookMatcher};
use regex_automata::util::{start, syntax};
use regex_automata::{Anchored, MatchKind};
use sha2::{Digest, Sha256};
use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::ops::Deref;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Default of `stream.max_holdback_chars`.
pub const DEFAULT_MAX_HOLDBACK_CHARS: usize = 65_536;
/// Reason of a session blocked for holding back too much (fail closed).
pub const HOLDBACK_REASON: &str = "Stream hold-back limit exceeded";
/// Action of a session blocked for holding back too much.
pub const HOLDBACK_ACTION: &str = "block_stream_holdback_limit";
/// Default of `stream.max_session_ms`.
pub const DEFAULT_MAX_SESSION_MS: u64 = 5000;
/// Reason of a session stopped for spending more than `max_session_ms`
/// (fail closed).
pub const COST_REASON: &str = "Stream cost limit exceeded";
/// Action of a session stopped for spending more than `max_session_ms`.
pub const COST_ACTION: &str = "block_stream_cost_limit";

/// Lazy-DFA cache of one rule's liveness automaton in one session.
const LIVE_CACHE_BYTES: usize = 1 << 20;
/// Skipped text that may hold a match is simulated below this many bytes
/// (a few transitions a byte) and left to one exact search above it.
const SIMULATE_BELOW: usize = 64;
/// Pieces up to this many bytes take one pass in [`Core::advance_all`]
/// (16 code points are at most 64 bytes; `Core::scratch` holds 65 entries).
const ONE_PASS_MAX: usize = 64;
/// Idle session buffers an evaluator keeps, and the largest kept.
const MAX_IDLE_BUFS: usize = 4;
const MAX_IDLE_BUF_BYTES: usize = 2 << 20;
/// States whose terminal check a session remembers, per rule.
const MAX_TERMINAL_MEMO: usize = 256;

/// Options of a session (SPEC §11.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamOptions {
    /// Block as soon as a FATAL match is final (default); otherwise redact it.
    pub block_on_fatal: bool,
    /// Python-runtime compatibility: hold back at least this many code
    /// points and end releases after a whitespace character (default 0: off).
    pub lookahead_chars: usize,
    /// Fail closed when more than this many code points are held back.
    pub max_holdback_chars: usize,
    /// Match through the evasion view (SPEC §15): releases are the original
    /// text, redacted where the view matched.
    pub normalize: Normalize,
    /// Engine time the session may spend, in milliseconds, over all its
    /// pushes and its finish: past it the session stops working and fails
    /// closed ([`COST_ACTION`]), whatever the text does to the engine.
    pub max_session_ms: u64,
}

impl Default for StreamOptions {
    fn default() -> Self {
        Self {
            block_on_fatal: true,
            lookahead_chars: 0,
            max_holdback_chars: DEFAULT_MAX_HOLDBACK_CHARS,
            normalize: Normalize::None,
            max_session_ms: DEFAULT_MAX_SESSION_MS,
        }
    }
}

/// Text released by one push or by the finish.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Released {
    /// The released redacted text (possibly empty).
    pub text: String,
    /// Whether it holds a placeholder.
    pub redacted: bool,
}

/// What the pushes of [`Session::push_many`] released, one after another
/// in one buffer (reused from call to call: no allocation a piece).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Releases {
    text: String,
    /// Per piece: where its text ends in `text`, and whether it holds a
    /// placeholder.
    ends: Vec<(usize, bool)>,
}

impl Releases {
    /// Empties it, keeping its buffers.
    pub fn clear(&mut self) {
        self.text.clear();
        self.ends.clear();
    }

    /// The number of pieces.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether it holds no piece.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Piece `k`'s release: its text (possibly empty) and whether it holds
    /// a placeholder.
    pub fn get(&self, k: usize) -> Option<(&str, bool)> {
        let &(end, redacted) = self.ends.get(k)?;
        let start = k.checked_sub(1).map_or(0, |j| self.ends[j].0);
        Some((&self.text[start..end], redacted))
    }

    /// Every piece's release, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, bool)> + '_ {
        (0..self.len()).filter_map(|k| self.get(k))
    }
}

/// Why a session stopped releasing (owned: built once, when it blocks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// The deciding action (`block_<id>`, a hard rule's, [`HOLDBACK_ACTION`]
    /// or [`COST_ACTION`]).
    pub action: String,
    /// Its reason.
    pub reason: String,
    /// The rules with committed matches when it blocked, in trigger order.
    pub triggers: Vec<(String, Severity)>,
}

impl Blocked {
    /// Blocked for holding back more than `stream.max_holdback_chars`.
    fn holdback() -> Self {
        Self {
            action: HOLDBACK_ACTION.to_string(),
            reason: HOLDBACK_REASON.to_string(),
            triggers: Vec::new(),
        }
    }
}

/// The liveness automata of one evaluator, built once.
pub(super) struct LivePlan {
    rules: Vec<LiveRule>,
    /// For matcher `i`: its trigger slot (custom rules, then hard rules).
    slot: Vec<usize>,
    /// Severity, rule id, action and reason of each trigger slot.
    slots: Vec<SlotInfo>,
    /// For matcher `i`: its placeholder (a copy of the evaluator's, so that
    /// a release needs nothing but the plan).
    placeholders: Vec<String>,
    /// For each class of the byte before (see [`class_of`]) and each byte,
    /// the rules a match of which can begin there (bit `i` for rule `i`;
    /// rules past the 64th share bit 63). A rule whose matches begin with
    /// a word assertion is left out where the assertion fails between
    /// ASCII characters: in prose, the health-id codon (`\b` then `M`,
    /// `E` or `R`) starts only at the words that begin with those letters.
    first_mask: [[u64; 256]; 3],
    /// For each byte, the rules for which it is inner (see [`LiveRule`]).
    inner_mask: [u64; 256],
    /// For each byte, the rules that require it (or require nothing).
    required_mask: [u64; 256],
}

struct SlotInfo {
    severity: Severity,
}

struct LiveRule {
    /// `None` when the automaton could not be built: the rule then holds
    /// back from its first possible start (fail closed).
    dfa: Option<DFA>,
    /// A word assertion every match starts with, checked exactly at a start.
    lead: Option<Look>,
    /// `lead` between ASCII characters, by whether the one before and the
    /// one after are word characters: a start then needs no Unicode table.
    lead_ascii: Option<[[bool; 2]; 2]>,
    /// Bytes that can begin a match (from any start context), never a
    /// byte inside a character: one load decides at every byte.
    first: [bool; 256],
    /// Bytes that a partial match can consume and stay undecided: a thread
    /// that consumes any other byte dies or is settled, so only the text
    /// after the last such byte can hold a live start.
    inner: [bool; 256],
    /// Bytes of which every match holds one (all bytes when there is no
    /// such set).
    required: [bool; 256],
    /// Bytes that keep a fresh partial match live and undecided: from any
    /// anchored start, every non-empty run of them leads to a state that is
    /// not dead, not a match and not terminal (see [`keep_bytes`]). A
    /// thread that opens at the start of such a run at the end of a piece
    /// is live whatever its bytes, so it is not simulated at all until the
    /// run ends (see [`RuleState::deferred`]).
    keep: [bool; 256],
    /// Whether `keep` holds any byte.
    defers: bool,
    /// The length in bytes of the shortest match of the exact pattern
    /// (0 when unknown).
    min_len: usize,
}

/// Lazy-DFA caches of one session, one per rule (`None` for a rule without an automaton).
pub(super) struct LiveCaches(Vec<Option<LazyCache>>);

impl LivePlan {
    /// No rules: the plan of a whole-mode session, which never steps.
    fn empty() -> Self {
        Self {
            rules: Vec::new(),
            slot: Vec::new(),
            slots: Vec::new(),
            placeholders: Vec::new(),
            first_mask: [[0; 256]; 3],
            inner_mask: [0; 256],
            required_mask: [0; 256],
        }
    }

    fn new(ev: &Evaluator) -> Self {
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
        let mut first_mask = [[0u64; 256]; 3];
        let mut inner_mask = [0u64; 256];
        let mut required_mask = [0u64; 256];
        for (i, r) in rules.iter().enumerate() {
            for b in 0..=255u8 {
                let k = usize::from(b);
                for (class, mask) in first_mask.iter_mut().enumerate() {
                    if r.can_start_after(class, b) {
                        mask[k] |= rule_bit(i);
                    }
                }
                if r.inner[k] {
                    inner_mask[k] |= rule_bit(i);
                }
                if r.required[k] {
                    required_mask[k] |= rule_bit(i);
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

    fn caches(&self) -> LiveCaches {
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
    fn can_start(&self, b: u8) -> bool {
        self.first[usize::from(b)]
    }

    /// Whether a match can begin with byte `b` after a byte of `class`
    /// (see [`class_of`]): [`Self::can_start`], and the leading word
    /// assertion, where the characters on both sides are ASCII.
    fn can_start_after(&self, class: usize, b: u8) -> bool {
        let lead = match self.lead_ascii {
            Some(t) if class < 2 && b.is_ascii() => t[class][usize::from(is_word_byte(b))],
            _ => true,
        };
        self.can_start(b) && lead
    }

    fn new(m: &super::Matcher) -> Self {
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
    fn has_room(&self, bytes: &[u8]) -> bool {
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

/// One rule's progress in a session.
struct RuleState {
    /// Every match starting before `p` is committed; none other starts before it.
    p: usize,
    /// Live starts and their DFA states, by increasing start, states distinct.
    threads: Vec<Thread>,
    /// A thread not simulated (then `threads` is empty): it opens at the
    /// start given, and every byte from there to the end of the text
    /// scanned is one of the rule's [`LiveRule::keep`] bytes, so it is live
    /// and is the earliest live start. The flag says whether one of those
    /// bytes is a required one. The next piece either ends the run (the
    /// thread is then settled like the skipped text, or simulated from its
    /// start) or extends it.
    deferred: Option<(usize, bool)>,
    /// Start states by look-behind byte (index 256: start of the stream).
    starts: Vec<Option<LazyStateID>>,
    /// The cache's clear count the state ids above belong to.
    clears: usize,
    /// Whether a terminal check was made for a state (every byte and the
    /// end lead to dead), for the few states threads end a push in; sorted
    /// by state.
    terminal: Vec<(LazyStateID, bool)>,
    /// Where matches may start that no search has looked for yet (lowest
    /// and highest such start): a thread that reached a match state and
    /// then ended, or the rest of the text at the end of input.
    dirty: Option<(usize, usize)>,
}

/// A committed match not yet released, in the order of the §6.3 sweep:
/// absolute start, end descending, sort key; then the matcher that found
/// it (its placeholder is looked up in the plan when the text is written).
/// Offsets are absolute, so dropping released text moves none of them.
type Pending = (usize, Reverse<usize>, (usize, usize), usize);

/// A stream session over one evaluator (one pack of one generation), held
/// through `E`: a borrow ([`StreamSession`]) or a shared handle
/// ([`OwnedStreamSession`]). Both kinds run the same code and release the
/// same text.
pub struct Session<E: Deref<Target = Evaluator>> {
    ev: E,
    core: Core,
    /// With [`Normalize::Evasion`]: the core runs on the view, and this
    /// writes the original text.
    norm: Option<Box<NormStream>>,
    /// The text pushed so far, hashed as it arrives (the receipt's
    /// `sha256_payload`: the session never holds the whole text).
    hasher: Hasher,
    /// Engine time spent in pushes and the finish, and the most it may be.
    spent: Duration,
    budget: Duration,
    /// Which small pieces [`Session::push`] times (xorshift state, seeded
    /// from the standard library's random hasher keys).
    dice: u64,
}

/// [`Session::push`] times every piece of this many bytes or more (two
/// clock reads are then a few percent of its work)...
const TIME_EVERY_PIECE_FROM: usize = 1024;
/// ...and one smaller piece in this many.
const SAMPLE_ONE_IN: u64 = 32;

/// A session that borrows its evaluator ([`Evaluator::stream`]).
pub type StreamSession<'e> = Session<&'e Evaluator>;

/// A session that holds a shared handle to its evaluator
/// ([`Evaluator::stream_owned`]): `Send + 'static`, so it can outlive any
/// borrow, e.g. in a task across the messages of one streamed reply.
pub type OwnedStreamSession = Session<Arc<Evaluator>>;

// An owned session can move to another task or thread.
const _: () = {
    const fn send_static<T: Send + 'static>() {}
    send_static::<OwnedStreamSession>();
};

/// A session's state, whatever holds its evaluator: the evaluator is passed
/// to each call, so one copy of the code serves both handle kinds.
struct Core {
    plan: Arc<LivePlan>,
    opts: StreamOptions,
    /// Held text, after `head` bytes already released (at least the last
    /// released character is kept as look-behind context).
    buf: String,
    head: usize,
    /// Whether `buf[0]` is the first byte of the stream.
    origin: bool,
    /// Absolute offset of the last byte of a non-ASCII character pushed so
    /// far: the text after it is ASCII.
    last_non_ascii: Option<usize>,
    /// Bytes of `buf` the threads have consumed.
    scanned: usize,
    /// Bytes dropped from the front of `buf` so far (absolute offset of `buf[0]`).
    dropped: usize,
    /// With normalization: the regions each release wrote, in absolute
    /// offsets of the view, for [`NormStream`] to map (the core then builds
    /// no text of its own).
    tap: Option<Vec<(usize, usize, String)>>,
    rules: Vec<RuleState>,
    /// Committed matches not yet released, kept in sweep order: a release
    /// visits only those that start before its cut, however many wait
    /// after it (a long held run full of matches costs each push nothing).
    pending: BTreeSet<Pending>,
    /// Reused between pushes: (non-inner byte, rules it is the last one
    /// of) entries, room for 65 (see [`Core::advance_all`]).
    scratch: Vec<(usize, u64)>,
    /// Reused between pushes: for rule `i` (below 64) with a non-inner byte
    /// in the piece, the last one's offset.
    last_outer: Vec<usize>,
    /// Rules (bits as in [`LivePlan::first_mask`]) with threads, unsearched
    /// starts or no automaton: only they and the rules that a piece can
    /// start are looked at in a push. Every other rule is settled up to
    /// `scanned` (its `p` is not kept up to date).
    busy: u64,
    /// Rules with threads (a subset of `busy`).
    threaded: u64,
    /// Trigger slots with committed matches.
    fired: Vec<bool>,
    pushed_chars: usize,
    released_chars: usize,
    /// The first reason to stop releasing; a blocked core goes on judging
    /// (its releases are dropped) unless it is `stopped`.
    blocked: Option<Blocked>,
    /// Out of engine time: does no more work at all.
    stopped: bool,
    finished: bool,
    /// The committed matches, for the decision.
    spans: SpanLog,
    /// Tests add this to the engine time of every call.
    #[cfg(test)]
    extra_time: Duration,
    /// Boxed: a search cache set is large, and it moves out and back at
    /// every push.
    caches: Option<Box<Caches>>,
    live: Option<Box<LiveCaches>>,
    /// `lookahead_chars`' scan state (see [`Core::whitespace_cut`]).
    ws: WhitespaceScan,
    /// Tests turn deferral off to check that it changes no release.
    #[cfg(test)]
    defer: bool,
    /// Whole mode (see `whole.rs`): the evaluator's program is not the
    /// example pack's, which the liveness tables are built for, so the text
    /// is held and judged once at the end.
    whole: bool,
    /// Whole mode: blocked for holding more than the limit (the decision
    /// is the limit's).
    held_out: bool,
    /// Whole mode: the decision of the text, judged once at the end.
    judged: Option<Box<whole::Judged>>,
    /// Code points kept before the held text beyond the look-behind
    /// character, for codons' `context.before` windows.
    context_chars: usize,
}

/// Where [`Core::whitespace_cut`] stands, in absolute offsets: the last L − 1
/// code points begin at `limit` (code point `limit_chars` of the stream),
/// the text from the release point to `upto` has been looked at, and the
/// last whitespace there outside every region ends at `last`.
#[derive(Debug, Default)]
struct WhitespaceScan {
    limit: usize,
    limit_chars: usize,
    upto: usize,
    last: Option<usize>,
}

impl<E: Deref<Target = Evaluator>> std::fmt::Debug for Session<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Held text is payload: never print it.
        f.debug_struct("StreamSession")
            .field("pack_id", &self.ev.pack_id())
            .field("pushed_chars", &self.core.pushed_chars)
            .field("released_chars", &self.core.released_chars)
            .field("blocked", &self.core.blocked.is_some())
            .finish()
    }
}

impl Evaluator {
    /// Builds the liveness automata at load and runs the warm-up payloads
    /// through one session, so the first stream after a start or a reload
    /// does not pay for them (about 1.5 ms for the example pack).
    pub(super) fn warm_stream(&self) {
        if !self.native {
            // Whole-mode sessions build nothing to warm.
            return;
        }
        let mut session = self.stream(StreamOptions {
            block_on_fatal: false,
            ..StreamOptions::default()
        });
        for text in super::WARM_UP {
            let mut at = 0;
            while at < text.len() {
                let mut end = (at + 8).min(text.len());
                while !text.is_char_boundary(end) {
                    end += 1;
                }
                session.push(&text[at..end]);
                at = end;
            }
        }
        session.finish();
    }

    /// Starts a stream session (SPEC §11.1) on this pack, borrowing it.
    pub fn stream(&self, opts: StreamOptions) -> StreamSession<'_> {
        Session::new(self, opts)
    }

    /// Starts a stream session (SPEC §11.1) on this pack that keeps a clone
    /// of the `Arc` instead of a borrow, so it can be held for as long as the
    /// stream lasts (moved into a task or a thread, kept across messages).
    pub fn stream_owned(self: &Arc<Self>, opts: StreamOptions) -> OwnedStreamSession {
        Session::new(Arc::clone(self), opts)
    }
}

impl<E: Deref<Target = Evaluator>> Session<E> {
    fn new(ev: E, opts: StreamOptions) -> Self {
        let core = Core::new(&ev, opts);
        let norm = (opts.normalize == Normalize::Evasion && !core.whole).then(Box::default);
        Self {
            ev,
            core,
            norm,
            hasher: Hasher::default(),
            spent: Duration::ZERO,
            budget: Duration::from_millis(opts.max_session_ms),
            // Never 0 (xorshift would stay there).
            dice: std::hash::BuildHasher::hash_one(
                &std::collections::hash_map::RandomState::new(),
                0u8,
            ) | 1,
        }
    }

    /// Appends `piece` and returns what can be released now (SPEC §11.1).
    /// Nothing is released once the session is blocked or finished.
    ///
    /// A blocked session still judges what is pushed (releasing nothing),
    /// so that [`Self::decision`] is the decision of the whole text; one
    /// that spent its `max_session_ms` only hashes it.
    pub fn push(&mut self, piece: &str) -> Released {
        if self.core.finished {
            return Released::default();
        }
        if self.core.stopped {
            self.hasher.update(piece);
            return Released::default();
        }
        // Two clock reads cost a quarter of a 16-byte push: a small piece is
        // timed one time in 32, at random (a text cannot hide its cost in
        // the pieces that are not), and counts 32 times its time.
        self.dice ^= self.dice << 13;
        self.dice ^= self.dice >> 7;
        self.dice ^= self.dice << 17;
        let weight = if piece.len() >= TIME_EVERY_PIECE_FROM {
            1
        } else if self.dice.is_multiple_of(SAMPLE_ONE_IN) {
            SAMPLE_ONE_IN as u32
        } else {
            let out = self.push_untimed(piece);
            #[cfg(test)]
            let out = self.charge(Duration::ZERO, out);
            if self.core.blocked.is_some() {
                return Released::default();
            }
            return out;
        };
        let started = Instant::now();
        let out = self.push_untimed(piece);
        self.charge(started.elapsed() * weight, out)
    }

    /// Pushes `pieces` in order, as [`Self::push`] would one at a time, and
    /// appends what each releases to `out`, up to and including the piece at
    /// which the session blocks (a session blocked before the call judges
    /// them all, releasing nothing); returns how many pieces it pushed. The
    /// engine time is measured once for the call, not once a piece (two
    /// clock reads cost about a quarter of a 16-byte push), and the
    /// releases share one buffer: a caller that holds many small pieces at
    /// once (a server cutting a request's text) pushes them with this. The
    /// budget is checked after the call (give it a bounded number of
    /// pieces): a call that spends it releases nothing.
    pub fn push_many<'p>(
        &mut self,
        pieces: impl IntoIterator<Item = &'p str>,
        out: &mut Releases,
    ) -> usize {
        let started = EngineClock::start();
        let first = out.ends.len();
        let was_blocked = self.core.blocked.is_some();
        for piece in pieces {
            if self.core.finished || self.core.stopped {
                break;
            }
            let redacted = self.push_untimed_into(piece, &mut out.text);
            out.ends.push((out.text.len(), redacted));
            if !was_blocked && self.core.blocked.is_some() {
                break;
            }
        }
        let pushed = out.ends.len() - first;
        let blocked = self.core.blocked.is_some();
        let _ = self.charge(started.elapsed(), Released::default());
        if !blocked && self.core.blocked.is_some() {
            // Past the budget: nothing of this call goes out.
            let start = first.checked_sub(1).map_or(0, |k| out.ends[k].0);
            out.text.truncate(start);
            out.ends[first..].fill((start, false));
        }
        pushed
    }

    /// A push without the engine-time bookkeeping.
    fn push_untimed(&mut self, piece: &str) -> Released {
        let mut text = String::new();
        let redacted = self.push_untimed_into(piece, &mut text);
        Released { text, redacted }
    }

    /// [`Self::push_untimed`] writing the release at the end of `out`
    /// (nothing once blocked); whether it holds a placeholder.
    fn push_untimed_into(&mut self, piece: &str, out: &mut String) -> bool {
        self.hasher.update(piece);
        let redacted = match self.norm.as_deref_mut() {
            Some(norm) => {
                let r = norm.push(&mut self.core, &self.ev, piece);
                out.push_str(&r.text);
                r.redacted
            }
            None if self.core.whole => {
                self.core.hold_whole(piece);
                false
            }
            // Appending needs no evaluator: it is handed over for the step
            // only, so the hot path carries no extra argument across the copy.
            None if self.core.append(piece) => self.core.step_into(&self.ev, false, out),
            None => false,
        };
        redacted && self.core.blocked.is_none()
    }

    /// Ends the stream and returns the rest (empty when blocked).
    pub fn finish(&mut self) -> Released {
        if self.core.finished || self.core.stopped {
            self.core.finished = true;
            return Released::default();
        }
        let started = EngineClock::start();
        let out = match self.norm.as_deref_mut() {
            Some(norm) => norm.finish(&mut self.core, &self.ev),
            None if self.core.whole => self.core.finish_whole(&self.ev),
            None => self.core.finish(&self.ev),
        };
        self.charge(started.elapsed(), out)
    }

    /// Counts the engine time of a call and returns its release, or
    /// nothing once the session is blocked or has spent its budget (it then
    /// stops, failing closed).
    fn charge(&mut self, took: Duration, out: Released) -> Released {
        self.spent += took;
        #[cfg(test)]
        {
            self.spent += self.core.extra_time;
        }
        if self.spent > self.budget {
            self.core.stop();
        }
        if self.core.blocked.is_some() {
            return Released::default();
        }
        out
    }

    /// Gives the session's search caches back to its evaluator until the
    /// next push: a session that waits (for its reader, for its next piece)
    /// then holds only its own state, and the caches serve other work.
    pub fn park(&mut self) {
        if let Some(c) = self.core.caches.take() {
            self.ev.idle_caches().push(*c);
        }
        // The liveness caches hold the states of live threads: they go back
        // only when no thread is under way (a deferred one has no state).
        if self.core.rules.iter().all(|r| r.threads.is_empty()) {
            if let Some(l) = self.core.live.take() {
                self.ev
                    .live_caches
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(*l);
                // Start states of those caches: rebuilt with the next set.
                for r in &mut self.core.rules {
                    r.starts = Vec::new();
                    r.terminal = Vec::new();
                }
            }
        }
    }

    /// Engine time spent so far in pushes and the finish (what a stream's
    /// `latency_us` reports, and what `max_session_ms` limits): the
    /// thread's CPU time in [`Self::push_many`] and [`Self::finish`] where
    /// the platform gives it (Linux), the monotonic clock's time otherwise
    /// and in [`Self::push`] (one CPU-time read costs about 0.4 µs, two
    /// small pushes), which counts time the thread waited for a CPU too.
    /// [`Self::push`] times pieces of 1 KiB or more, and estimates the
    /// others from one in 32 timed at random: a caller that needs the
    /// time of many small pieces exactly pushes them with
    /// [`Self::push_many`].
    pub fn engine_time(&self) -> Duration {
        self.spent
    }

    /// The decision of the whole text (SPEC §6.4), once [`Self::finish`] has
    /// been called: the session's own, from the matches it committed, equal
    /// to [`Evaluator::evaluate_with`] on everything pushed (blocked or not)
    /// but for `clean_text` and `latency_us`. `clean_text` is
    /// [`BLOCKED_TEXT`] when the decision blocks, and empty otherwise: what
    /// may leave is what the session released (W(T) when it did not block).
    /// `latency_us` is the session's engine time. A session that spent its
    /// `max_session_ms` decides [`COST_ACTION`] (FATAL, no trigger: it did
    /// not judge the whole text).
    pub fn decision(&self) -> Option<Decision<'_>> {
        if !self.core.finished {
            return None;
        }
        let digest = self.hasher.digest();
        let ev = &*self.ev;
        let normalized = self.normalized();
        let (stop_action, stop_reason) = if self.core.held_out {
            (HOLDBACK_ACTION, HOLDBACK_REASON)
        } else {
            (COST_ACTION, COST_REASON)
        };
        let mut d = if self.core.stopped {
            Decision {
                action: stop_action,
                severity: Some(Severity::Fatal),
                reason: Some(stop_reason),
                clean_text: BLOCKED_TEXT.to_string(),
                triggers: Vec::new(),
                invariants_passed: false,
                pack_id: &ev.pack_id,
                pack_version: &ev.pack_version,
                receipt_hash: receipt_hash_of(
                    &ev.pack_id,
                    &ev.pack_version,
                    stop_action,
                    false,
                    std::iter::empty(),
                    &digest,
                ),
                latency_us: 0.0,
                normalized,
            }
        } else if let Some(judged) = self.core.judged.as_deref() {
            // Whole mode: the decision the finish judged, not a second one.
            let triggers = judged.triggers(ev);
            let fatal = triggers.iter().any(|t| t.severity == Severity::Fatal);
            let clean = if fatal { BLOCKED_TEXT } else { "" };
            ev.finish(&digest, triggers, clean.to_string(), normalized)
        } else {
            let triggers = self.core.spans.triggers(ev);
            let fatal = triggers.iter().any(|t| t.severity == Severity::Fatal);
            let clean = if fatal { BLOCKED_TEXT } else { "" };
            ev.finish(&digest, triggers, clean.to_string(), normalized)
        };
        d.latency_us = self.spent.as_secs_f64() * 1e6;
        Some(d)
    }

    /// Why the session blocked, once it has.
    pub fn blocked(&self) -> Option<&Blocked> {
        self.core.blocked.as_ref()
    }

    /// Code points pushed so far.
    pub fn pushed_chars(&self) -> usize {
        match &self.norm {
            Some(n) => n.pushed_chars,
            None => self.core.pushed_chars,
        }
    }

    /// Code points pushed but not yet released.
    pub fn held_chars(&self) -> usize {
        match &self.norm {
            Some(n) => n.pushed_chars - n.released_chars,
            None => self.core.held_chars(),
        }
    }

    /// Whether the session matched through a view that differed from the
    /// text so far (SPEC §15).
    pub fn normalized(&self) -> bool {
        if self.core.whole {
            return self.core.judged.as_ref().is_some_and(|j| j.normalized);
        }
        self.norm.as_ref().is_some_and(|n| n.changed)
    }
}

/// Appends `text` to `out`; into an empty `out`, as one allocation of its
/// size (a release a push returns on its own).
fn write_into(out: &mut String, text: &str) {
    if out.capacity() == 0 {
        *out = text.to_owned();
    } else {
        out.push_str(text);
    }
}

/// SHA-256 of a text that arrives in pieces: small pieces are gathered and
/// hashed a few kilobytes at a time (the hasher's own bookkeeping for each
/// 16-byte piece cost more than the hashing of its bytes).
#[derive(Clone, Default)]
struct Hasher {
    sha: Sha256,
    pending: Vec<u8>,
}

/// [`Hasher`] hashes this many gathered bytes at once.
const HASH_BLOCK: usize = 4096;

impl Hasher {
    fn update(&mut self, piece: &str) {
        let bytes = piece.as_bytes();
        if self.pending.len() + bytes.len() > HASH_BLOCK {
            self.sha.update(&self.pending);
            self.pending.clear();
        }
        if bytes.len() >= HASH_BLOCK {
            self.sha.update(bytes);
        } else {
            if self.pending.capacity() == 0 {
                self.pending.reserve_exact(HASH_BLOCK);
            }
            self.pending.extend_from_slice(bytes);
        }
    }

    /// The digest of everything so far.
    fn digest(&self) -> [u8; 32] {
        let mut sha = self.sha.clone();
        sha.update(&self.pending);
        sha.finalize().into()
    }
}

/// Measures the engine time of a call: the calling thread's CPU time where
/// the platform gives it, so that a session on a busy machine is not charged
/// for the time other threads held its CPU; the monotonic clock otherwise.
enum EngineClock {
    Cpu(Duration),
    Wall(Instant),
}

impl EngineClock {
    fn start() -> Self {
        match thread_cpu_time() {
            Some(t) => Self::Cpu(t),
            None => Self::Wall(Instant::now()),
        }
    }

    fn elapsed(&self) -> Duration {
        match self {
            Self::Cpu(t) => thread_cpu_time().map_or(Duration::ZERO, |now| now.saturating_sub(*t)),
            Self::Wall(t) => t.elapsed(),
        }
    }
}

/// The calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`).
#[cfg(target_os = "linux")]
fn thread_cpu_time() -> Option<Duration> {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    let secs = u64::try_from(t.tv_sec).ok()?;
    let nanos = u32::try_from(t.tv_nsec).ok()?;
    Some(Duration::new(secs, nanos))
}

/// The calling thread's CPU time: not available here.
#[cfg(not(target_os = "linux"))]
fn thread_cpu_time() -> Option<Duration> {
    None
}

/// The original-text side of a normalized session (SPEC §15 with §11): the
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
struct NormStream {
    normalizer: Normalizer,
    map: ViewMap,
    /// Original text from absolute byte `base`; released up to `head`.
    orig: String,
    base: usize,
    head: usize,
    /// Mapped regions not yet written (sorted, disjoint): one can end past
    /// what the core released when two view characters share a segment.
    held: Vec<(usize, usize, String)>,
    /// Reused: the view of the last piece.
    view: String,
    pushed_chars: usize,
    released_chars: usize,
    /// Whether the view has differed from the text.
    changed: bool,
}

impl NormStream {
    fn push(&mut self, core: &mut Core, ev: &Evaluator, piece: &str) -> Released {
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

    fn finish(&mut self, core: &mut Core, ev: &Evaluator) -> Released {
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
            for (s, e, p) in tap.drain(..) {
                let (s, e) = self.map.span(s, e);
                normalize::push_region(&mut self.held, s, e, p);
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
        if let Some(k) = self.held.iter().position(|r| r.1 > cut) {
            cut = cut.min(self.held[k].0);
            closed = k;
        }
        self.map.forget_before(released_view);
        if cut <= self.head {
            return Released::default();
        }
        let regions: Vec<(usize, usize, &str)> = self.held[..closed]
            .iter()
            .map(|(s, e, p)| (s - self.base, e - self.base, p.as_str()))
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

impl<E: Deref<Target = Evaluator>> Drop for Session<E> {
    fn drop(&mut self) {
        self.core.give_back(&self.ev);
    }
}

impl Core {
    fn new(ev: &Evaluator, opts: StreamOptions) -> Self {
        let whole = !ev.native;
        let plan = if whole {
            Arc::new(LivePlan::empty())
        } else {
            Arc::clone(ev.live.get_or_init(|| Arc::new(LivePlan::new(ev))))
        };
        let pooled = if whole {
            None
        } else {
            ev.live_caches
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .pop()
        };
        let live = pooled.unwrap_or_else(|| plan.caches());
        let caches = ev.idle_caches().pop().unwrap_or_else(|| ev.new_caches());
        let clears: Vec<usize> = live
            .0
            .iter()
            .map(|c| c.as_ref().map_or(0, LazyCache::clear_count))
            .collect();
        let fired = vec![false; plan.slots.len()];
        let count = clears.len();
        // A rule without an automaton holds back from its first unsettled
        // start: it is always looked at.
        let busy = plan
            .rules
            .iter()
            .enumerate()
            .filter(|(_, r)| r.dfa.is_none())
            .fold(0, |m, (i, _)| m | rule_bit(i));
        Self {
            plan,
            opts,
            buf: ev
                .stream_bufs
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .pop()
                .unwrap_or_default(),
            head: 0,
            origin: true,
            last_non_ascii: None,
            scanned: 0,
            dropped: 0,
            tap: (opts.normalize == Normalize::Evasion).then(Vec::new),
            rules: clears
                .into_iter()
                .map(|clears| RuleState {
                    p: 0,
                    threads: Vec::new(),
                    deferred: None,
                    starts: vec![None; 257],
                    clears,
                    terminal: Vec::new(),
                    dirty: None,
                })
                .collect(),
            pending: BTreeSet::new(),
            scratch: vec![(0, 0); 65],
            last_outer: vec![0; count.min(64)],
            busy,
            threaded: 0,
            fired,
            pushed_chars: 0,
            released_chars: 0,
            blocked: None,
            stopped: false,
            finished: false,
            spans: SpanLog::new(count, opts.normalize == Normalize::Evasion),
            #[cfg(test)]
            extra_time: Duration::ZERO,
            caches: Some(Box::new(caches)),
            live: Some(Box::new(live)),
            ws: WhitespaceScan::default(),
            #[cfg(test)]
            defer: true,
            whole,
            held_out: false,
            judged: None,
            context_chars: ev.context_chars(),
        }
    }

    /// Returns the session's caches to `ev`'s idle pools.
    fn give_back(&mut self, ev: &Evaluator) {
        if let Some(c) = self.caches.take() {
            ev.idle_caches().push(*c);
        }
        // A few buffers are kept: a new session then writes into memory
        // already mapped (a fresh one of 512 KiB cost a single-piece push
        // a fifth of its time in page faults).
        if self.buf.capacity() <= MAX_IDLE_BUF_BYTES {
            let mut bufs = ev
                .stream_bufs
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if bufs.len() < MAX_IDLE_BUFS {
                self.buf.clear();
                bufs.push(std::mem::take(&mut self.buf));
            }
        }
        if let Some(l) = self.live.take() {
            ev.live_caches
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(*l);
        }
    }

    /// Appends `piece` unless the session is finished or out of engine
    /// time; returns whether it did (and a step is due).
    fn append(&mut self, piece: &str) -> bool {
        if self.finished || self.stopped {
            return false;
        }
        if piece.is_ascii() {
            self.pushed_chars += piece.len();
        } else {
            self.pushed_chars += piece.chars().count();
            let k = piece.bytes().rposition(|b| !b.is_ascii()).unwrap_or(0);
            self.last_non_ascii = Some(self.dropped + self.buf.len() + k);
        }
        self.buf.push_str(piece);
        true
    }

    /// Stops all work, failing closed: the session spent its engine time.
    fn stop(&mut self) {
        self.stopped = true;
        self.blocked.get_or_insert_with(|| Blocked {
            action: COST_ACTION.to_string(),
            reason: COST_REASON.to_string(),
            triggers: Vec::new(),
        });
    }

    fn finish(&mut self, ev: &Evaluator) -> Released {
        if self.finished || self.stopped {
            self.finished = true;
            return Released::default();
        }
        let out = self.step(ev, true);
        self.finished = true;
        out
    }

    fn held_chars(&self) -> usize {
        self.pushed_chars - self.released_chars
    }

    fn step(&mut self, ev: &Evaluator, eoi: bool) -> Released {
        let mut text = String::new();
        let redacted = self.step_into(ev, eoi, &mut text);
        Released { text, redacted }
    }

    /// [`Self::step`] writing its release at the end of `out` (nothing when
    /// the session blocks); whether it holds a placeholder.
    fn step_into(&mut self, ev: &Evaluator, eoi: bool, out: &mut String) -> bool {
        let n = self.buf.len();
        let mark = out.len();
        let was_blocked = self.blocked.is_some();
        // A parked session gave its search caches back: take a set again.
        let mut caches = self.caches.take().or_else(|| {
            Some(Box::new(
                ev.idle_caches().pop().unwrap_or_else(|| ev.new_caches()),
            ))
        });
        let mut live = self.live.take().or_else(|| {
            let l = ev
                .live_caches
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .pop()
                .unwrap_or_else(|| self.plan.caches());
            // Another set of caches: the state ids kept per rule are not its.
            for (r, c) in self.rules.iter_mut().zip(&l.0) {
                r.starts.clear();
                r.starts.resize(257, None);
                r.terminal.clear();
                r.clears = c.as_ref().map_or(0, LazyCache::clear_count);
            }
            Some(Box::new(l))
        });
        let redacted = match (&mut caches, &mut live) {
            (Some(c), Some(l)) => self.settle_and_release(ev, n, eoi, c, l, out),
            _ => false,
        };
        self.caches = caches;
        self.live = live;
        if self.blocked.is_some() && !was_blocked {
            out.truncate(mark);
            return false;
        }
        redacted
    }

    fn settle_and_release(
        &mut self,
        ev: &Evaluator,
        n: usize,
        eoi: bool,
        caches: &mut Caches,
        live: &mut LiveCaches,
        out: &mut String,
    ) -> bool {
        let from = self.scanned;
        self.scanned = n;
        let count = self.rules.len();
        let mut fatal = false;
        let was_busy = self.busy;
        let touched = if eoi {
            for i in rules_in(self.threaded, count) {
                // The end of input may complete what is still live.
                let r = &mut self.rules[i];
                if !r.threads.is_empty() || r.deferred.is_some() {
                    mark(&mut r.dirty, r.p);
                    mark(&mut r.dirty, n);
                }
                r.threads.clear();
                r.deferred = None;
            }
            was_busy
        } else {
            self.advance_all(from, n, live) | was_busy
        };
        // Rules with live threads or unsearched starts; the others are
        // settled up to `n` at once. Threads that nothing can change any
        // more are dropped. A rule with nothing to search (the common case)
        // is settled here, in the same pass: up to its earliest live start.
        // Only the rules left with a match to look for go through the exact
        // search below.
        let (mut still, mut threaded, mut searching) = (0u64, 0u64, 0u64);
        let (mut q, mut min_p) = (n, n);
        for i in rules_in(touched, count) {
            let has_dfa = self.plan.rules[i].dfa.is_some();
            let st = &mut self.rules[i];
            if was_busy & rule_bit(i) == 0 {
                // Idle until now: settled up to the previous end.
                st.p = from;
            }
            if st.threads.is_empty() && st.deferred.is_none() && st.dirty.is_none() && has_dfa {
                st.p = st.p.max(n);
                continue;
            }
            if !eoi && !st.threads.is_empty() {
                self.drop_terminal(i, live.0[i].as_mut());
            }
            let st = &mut self.rules[i];
            if st.dirty.is_some() || !has_dfa {
                // The exact search looks from here: only this text needs
                // the required bytes (not the text a live thread holds
                // back, which would be scanned again at every push).
                let from = match st.dirty {
                    Some((lo, _)) if has_dfa => st.p.max(lo),
                    _ => st.p,
                };
                min_p = min_p.min(from);
                searching |= rule_bit(i);
                continue;
            }
            match st.threads.first().map(|t| t.0).or(st.deferred.map(|d| d.0)) {
                Some(live) => {
                    st.p = st.p.max(live);
                    threaded |= rule_bit(i);
                    still |= rule_bit(i);
                    if !eoi {
                        q = q.min(live);
                    }
                }
                None => st.p = st.p.max(n),
            }
        }
        if searching != 0 {
            // Candidate rules for the exact search: their required bytes
            // occur in the unsettled text (a match lies inside it).
            let mask = ev.required.scan(&self.buf.as_bytes()[min_p..n]);
            for i in rules_in(searching, count) {
                let candidate = mask[i / 64] & (1 << (i % 64)) != 0;
                fatal |= self.commit(ev, i, n, eoi, candidate, caches, live.0[i].as_mut());
                let st = &self.rules[i];
                let live = !st.threads.is_empty() || st.deferred.is_some();
                if live {
                    threaded |= rule_bit(i);
                }
                if live || st.dirty.is_some() || self.plan.rules[i].dfa.is_none() {
                    still |= rule_bit(i);
                }
                if !eoi {
                    q = q.min(self.earliest_live(i, n));
                }
            }
        }
        self.busy = still;
        self.threaded = threaded;
        if fatal && self.opts.block_on_fatal && self.blocked.is_none() {
            self.block_on_fired(ev);
            return false;
        }
        let redacted = self.release(q, n, eoi, out);
        if !eoi && self.blocked.is_none() && self.held_chars() > self.opts.max_holdback_chars {
            // The caller drops what this step wrote.
            self.blocked = Some(Blocked::holdback());
        }
        redacted
    }

    /// Feeds `buf[from..to]` to rule `i`'s threads, opening one at every
    /// character that can begin a match.
    fn advance(&mut self, i: usize, from: usize, to: usize, cache: Option<&mut LazyCache>) {
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
    fn defers(&self) -> bool {
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
    fn advance_all(&mut self, from: usize, to: usize, live: &mut LiveCaches) -> u64 {
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
        let (starts, needs, outer, tail, may) = if one_pass {
            // Per byte: the rules it can start (`f`, with the word
            // assertion) and those for which it is not inner (`o`). `tail`
            // keeps the rules started after their last non-inner byte so
            // far; `may` gathers those with a starting and a required byte
            // up to one of their non-inner bytes (both grow with the text,
            // so up to the last one). A rule without a non-inner byte that
            // the piece can start is in `tail`, so `outer` is left to the
            // lookup (all rules may have one).
            let (mut starts, mut needs, mut tail, mut may, mut c) =
                (0u64, 0u64, 0u64, 0u64, before);
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
            (starts, needs, u64::MAX, tail, may)
        } else {
            self.two_passes(from, to, before)
        };
        let active = self.threaded | starts;
        if active == 0 {
            return 0;
        }
        // Past 64 rules, the last bit stands for every rule from the 64th
        // on: those are advanced one by one.
        let (exact, shared) = if count > 64 {
            (active & !rule_bit(63), active & rule_bit(63) != 0)
        } else {
            (active, false)
        };
        let outer = outer & exact;
        // A rule without threads, with no match possible before its last
        // non-inner byte and no start after it, has nothing to simulate.
        let idle = exact & !self.threaded & outer & !may & !tail;
        let mut rest = exact & !idle;
        while rest != 0 {
            let i = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            let bit = rule_bit(i);
            let last = if outer & bit == 0 {
                None
            } else if one_pass {
                self.scratch[..to - from]
                    .iter()
                    .rposition(|&(_, o)| o & bit != 0)
            } else {
                Some(self.last_outer[i])
            };
            let skip = last.map(|k| (from + k, may & bit != 0));
            let needed = needs & bit != 0;
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
    /// Returns the rules the piece can start, those it has required bytes
    /// for, those with a non-inner byte, those started after their last
    /// one, and those that may have a match before it.
    fn two_passes(&mut self, from: usize, to: usize, before: usize) -> (u64, u64, u64, u64, u64) {
        let plan = &*self.plan;
        let count = self.rules.len();
        let bytes = &self.buf.as_bytes()[from..to];
        let class_before = |k: usize| k.checked_sub(1).map_or(before, |k| class_of(bytes[k]));
        // Every rule's bit: a long piece stops being looked at once each
        // rule can start in it and has its required bytes there.
        let all = if count >= 64 {
            u64::MAX
        } else {
            (1u64 << count) - 1
        };
        let (mut starts, mut needs, mut c) = (0u64, 0u64, before);
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
        if active == 0 {
            return (0, needs, 0, 0, 0);
        }
        let exact = if count > 64 {
            active & !rule_bit(63)
        } else {
            active
        };
        // Backwards: each rule's last non-inner byte, and the rules that a
        // byte after it can start. Every byte writes its (position, rules)
        // entry and only one that ends some rule's search is kept: no
        // branch depends on the bytes but the loop's end (a rule ends at
        // most once, so at most 64 entries are kept).
        let found = &mut self.scratch;
        let mut kept = 0usize;
        let mut pending = exact;
        let mut tail = 0u64;
        for (k, &b) in bytes.iter().enumerate().rev() {
            if pending == 0 {
                break;
            }
            let hit = !plan.inner_mask[usize::from(b)] & pending;
            pending &= !hit;
            tail |= plan.first_mask[class_before(k)][usize::from(b)] & pending;
            found[kept] = (k, hit);
            kept += usize::from(hit != 0);
        }
        let outer = exact & !pending;
        let found = &found[..kept];
        for &(k, mut hit) in found {
            while hit != 0 {
                self.last_outer[hit.trailing_zeros() as usize] = k;
                hit &= hit - 1;
            }
        }
        // Forwards, by increasing position: the starting and required
        // bytes seen up to each rule's last non-inner byte, for the rules
        // that the whole piece has both for (for the others no match can
        // lie in the skipped text).
        let mut may = 0u64;
        let candidates = starts & needs & outer;
        if candidates != 0 {
            let (mut first, mut required, mut at) = (0u64, 0u64, 0usize);
            for &(k, hit) in found.iter().rev() {
                if hit & candidates == 0 {
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
        (starts, needs, outer, tail, may)
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
    fn reopen_word(&mut self, i: usize, last: usize, to: usize, cache: Option<&LazyCache>) -> bool {
        let defer = self.defers();
        let rule = &self.plan.rules[i];
        let st = &mut self.rules[i];
        let bytes = self.buf.as_bytes();
        if !(rule.defers && defer)
            || rule.dfa.is_none()
            || cache.is_none_or(|c| c.clear_count() != st.clears)
            || !st.threads.is_empty()
            || st.deferred.is_some_and(|(_, required)| required)
            || !bytes[last + 1..to]
                .iter()
                .all(|&b| rule.keep[usize::from(b)])
        {
            return false;
        }
        let looks = LookMatcher::new();
        st.deferred = (last + 1..to)
            .find(|&j| {
                rule.can_start(bytes[j])
                    && rule
                        .lead
                        .is_none_or(|l| lead_holds(&looks, l, rule.lead_ascii.as_ref(), bytes, j))
            })
            .map(|j| (j, false));
        true
    }

    /// The earliest start from which rule `i` could still match.
    fn earliest_live(&self, i: usize, n: usize) -> usize {
        let st = &self.rules[i];
        if self.plan.rules[i].dfa.is_none() {
            // No automaton: hold back from the first unsettled start.
            return st.p;
        }
        match (st.threads.first(), st.deferred) {
            (Some(t), _) => t.0,
            (None, Some((at, _))) => at,
            (None, None) => n,
        }
    }

    /// Commits rule `i`'s settled matches; returns whether one is FATAL.
    #[allow(clippy::too_many_arguments)]
    fn commit(
        &mut self,
        ev: &Evaluator,
        i: usize,
        n: usize,
        eoi: bool,
        candidate: bool,
        caches: &mut Caches,
        mut cache: Option<&mut LazyCache>,
    ) -> bool {
        let mut fatal = false;
        loop {
            let limit = if eoi { n } else { self.earliest_live(i, n) };
            let st = &self.rules[i];
            let from = match (self.plan.rules[i].dfa.is_some(), st.dirty) {
                (false, _) => Some(st.p),
                (true, Some((lo, _))) => Some(st.p.max(lo)),
                (true, None) => None,
            };
            let Some(from) = from.filter(|&f| candidate && f < limit) else {
                self.settled(i, limit);
                return fatal;
            };
            // Look-behind sees the character before `from`: four bytes at most.
            let ascii = self
                .last_non_ascii
                .is_none_or(|k| k + 4 < self.dropped + from);
            let found = ev.find_first(i, &self.buf[..n], from, ascii, caches);
            let Some((s, e)) = found.filter(|&(s, _)| s < limit) else {
                self.settled(i, limit);
                return fatal;
            };
            if s == e {
                let st = &mut self.rules[i];
                st.p = next_char(&self.buf, s);
                mark(&mut st.dirty, st.p);
                continue;
            }
            if let Some((vs, ve)) = ev.value_of(i, &self.buf[..n], s, e, caches) {
                let slot = self.plan.slot[i];
                let (key, _) = ev.redaction_key(i);
                let at = self.dropped;
                self.pending.insert((at + vs, Reverse(at + ve), key, i));
                let floor = (at + self.head, self.released_chars);
                let ascii_from = self.last_non_ascii.map_or(0, |k| k + 1);
                self.spans
                    .commit(i, (at + vs, at + ve), (&self.buf, at, ascii_from), floor);
                self.fired[slot] = true;
                fatal |= self.plan.slots[slot].severity == Severity::Fatal;
            }
            self.rules[i].p = e;
            if e > limit && !eoi {
                // Threads that began inside the match are moot; replay the
                // starts after it.
                self.rules[i].threads.clear();
                self.rules[i].deferred = None;
                self.advance(i, e, n, cache.as_deref_mut());
                self.drop_terminal(i, cache.as_deref_mut());
            }
        }
    }

    /// Every start of rule `i` before `limit` is searched: `p` moves there
    /// and only what may start after it stays to be searched.
    fn settled(&mut self, i: usize, limit: usize) {
        let st = &mut self.rules[i];
        st.p = st.p.max(limit);
        st.dirty = match st.dirty {
            Some((_, hi)) if hi >= st.p => Some((st.p, hi)),
            _ => None,
        };
    }

    /// Drops rule `i`'s threads whose state nothing can change any more.
    fn drop_terminal(&mut self, i: usize, cache: Option<&mut LazyCache>) {
        let (Some(dfa), Some(cache)) = (&self.plan.rules[i].dfa, cache) else {
            return;
        };
        let st = &mut self.rules[i];
        if st.threads.is_empty() || cache.clear_count() != st.clears {
            return;
        }
        // Bit `k`: thread `k` is terminal (threads past the 64th are
        // rare; their flags go to a vector).
        let mut flags = 0u64;
        let mut more: Vec<bool> = Vec::new();
        for (k, &(s, sid, matched)) in st.threads.iter().enumerate() {
            // Sorted by state: a lookup at every push with threads costs a
            // binary search, not a scan of up to MAX_TERMINAL_MEMO entries.
            let t = match st.terminal.binary_search_by_key(&sid, |e| e.0) {
                Ok(at) => st.terminal[at].1,
                Err(at) => {
                    let t = is_terminal(dfa, cache, sid);
                    if cache.clear_count() != st.clears {
                        // Ids changed under us: keep everything (conservative).
                        return;
                    }
                    if st.terminal.len() < MAX_TERMINAL_MEMO {
                        st.terminal.insert(at, (sid, t));
                    }
                    t
                }
            };
            if t && matched {
                mark(&mut st.dirty, s);
            }
            if k < 64 {
                flags |= u64::from(t) << k;
            } else {
                more.push(t);
            }
        }
        if flags == 0 && !more.contains(&true) {
            return;
        }
        let mut k = 0;
        st.threads.retain(|_| {
            let t = if k < 64 {
                flags >> k & 1 != 0
            } else {
                more[k - 64]
            };
            k += 1;
            !t
        });
    }

    /// Blocks on the first fired FATAL trigger.
    fn block_on_fired(&mut self, ev: &Evaluator) {
        let slots = &self.plan.slots;
        let triggers: Vec<(String, Severity)> = self
            .fired
            .iter()
            .enumerate()
            .filter(|(_, f)| **f)
            .map(|(s, _)| (self.slot_id(ev, s).to_string(), slots[s].severity))
            .collect();
        let deciding = self
            .fired
            .iter()
            .enumerate()
            .find(|(s, f)| **f && slots[*s].severity == Severity::Fatal)
            .map(|(s, _)| s);
        if let Some(s) = deciding {
            let (action, reason) = slot_action(ev, s);
            self.blocked = Some(Blocked {
                action: action.to_string(),
                reason: reason.to_string(),
                triggers,
            });
        }
    }

    fn slot_id<'a>(&self, ev: &'a Evaluator, s: usize) -> &'a str {
        match ev.rules.get(s) {
            Some(r) => r.id.as_str(),
            None => ev
                .program
                .hard_rules
                .get(s - ev.rules.len())
                .map_or("", |h| h.id.as_str()),
        }
    }

    /// Releases the settled text before `q` (and after the last release),
    /// writing it at the end of `out`; whether it holds a placeholder.
    fn release(&mut self, q: usize, n: usize, eoi: bool, out: &mut String) -> bool {
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
        // The §6.3 sweep over the matches that start before `q`, in order:
        // a match starting at `q` or after cannot join a region that ends
        // by `q`, and one that ends after it stops the release anyway.
        let at = self.dropped;
        let plan = Arc::clone(&self.plan);
        let mut regions: Vec<(usize, usize, &str)> = Vec::new();
        for &(s, Reverse(e), _, matcher) in self
            .pending
            .range(..(at + q, Reverse(usize::MAX), (0, 0), 0))
        {
            let (s, e) = (s - at, e - at);
            match regions.last_mut() {
                Some(last) if s < last.1 => last.1 = last.1.max(e),
                _ => regions.push((s, e, plan.placeholders[matcher].as_str())),
            }
        }
        // A region that a later match (starting at `q` or after) could still
        // extend is not released, nor anything after it.
        let mut cut = q;
        let mut closed = regions.len();
        if let Some(k) = regions.iter().position(|&(s, e, _)| e > q || s >= q) {
            cut = cut.min(regions[k].0);
            closed = k;
        }
        if self.opts.lookahead_chars > 0 && !eoi {
            cut = self.whitespace_cut(cut, n, &regions[..closed]);
        }
        let regions = &regions[..regions[..closed].iter().take_while(|r| r.1 <= cut).count()];
        if cut <= self.head {
            return false;
        }
        match self.tap.as_mut() {
            // A blocked session writes nothing (its releases are dropped).
            _ if self.blocked.is_some() => {}
            Some(tap) => tap.extend(
                regions
                    .iter()
                    .map(|&(s, e, p)| (self.dropped + s, self.dropped + e, p.to_string())),
            ),
            None => {
                // One allocation for a new release, of its exact size.
                let removed: usize = regions.iter().map(|&(s, e, _)| e - s).sum();
                let added: usize = regions.iter().map(|r| r.2.len()).sum();
                out.reserve((cut - self.head).saturating_sub(removed) + added);
                write_regions(out, &self.buf, self.head, cut, regions);
            }
        }
        let redacted = !regions.is_empty();
        self.released_chars += char_count(&self.buf[self.head..cut]);
        // Every match that starts before the cut ends by it.
        while self.pending.first().is_some_and(|p| p.0 < at + cut) {
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
    fn whitespace_cut(&mut self, cut: usize, n: usize, regions: &[(usize, usize, &str)]) -> usize {
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
                if c.is_whitespace() && !regions.iter().any(|r| r.0 <= w && w < r.1) {
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
            while regions.get(k).is_some_and(|r| r.1 <= w) {
                k += 1;
            }
            if regions.get(k).is_none_or(|r| w < r.0) {
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
        for i in rules_in(self.busy, self.rules.len()) {
            let r = &mut self.rules[i];
            r.p -= shift;
            r.threads.iter_mut().for_each(|t| t.0 -= shift);
            r.deferred = r.deferred.map(|(at, req)| (at - shift, req));
            r.dirty = r
                .dirty
                .map(|(lo, hi)| (lo.max(shift) - shift, hi.max(shift) - shift));
        }
    }
}

/// One committed match for the decision: its span in the text the rules
/// ran on (bytes; the view with normalization), which orders a hard rule's
/// spans as the whole-text evaluation orders them, and its span in code
/// points of the original text.
type MatchSpan = (usize, usize, usize, usize);

/// The matches a session committed, per matcher, in code points: what its
/// decision's triggers are made of. Each matcher keeps the byte offset and
/// code point of its last match, and counts only the text between two of
/// its matches: the total work is linear in the text for each matcher
/// that matches at all (nothing on ASCII text, whose bytes are its code
/// points).
struct SpanLog {
    spans: Vec<Vec<MatchSpan>>,
    /// Per matcher: absolute byte offset and code point of its last start.
    cursor: Vec<(usize, usize)>,
    /// With normalization: committed spans of the view (matcher, start,
    /// end), waiting for [`NormStream`] to map them to the original text.
    unmapped: Option<Vec<(usize, usize, usize)>>,
}

impl SpanLog {
    fn new(matchers: usize, mapped: bool) -> Self {
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
    fn commit(
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
    fn map_unmapped(&mut self, map: &ViewMap, orig: &str, base: usize, floor: (usize, usize)) {
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
        spans.push((view.0, view.1, start, end));
    }

    /// The triggers of the committed matches, as [`Evaluator::evaluate`]
    /// lists them: custom rules in file order, then the hard rules, each
    /// with its spans sorted by start then end.
    fn triggers<'e>(&self, ev: &'e Evaluator) -> Vec<Trigger<'e>> {
        let cps = |m: &[MatchSpan]| m.iter().map(|&(_, _, s, e)| [s, e]).collect::<Vec<_>>();
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
            triggers.push(Trigger {
                rule_id: &hr.id,
                source: if hr.builtin {
                    Source::Builtin
                } else {
                    Source::HardRule
                },
                severity: if hr.fatal {
                    Severity::Fatal
                } else {
                    Severity::Warning
                },
                action: &hr.action,
                codons: Some(codes),
                match_count: spans.len(),
                spans: cps(&spans),
            });
        }
        triggers
    }
}

/// The action and reason of trigger slot `s`.
fn slot_action(ev: &Evaluator, s: usize) -> (&str, &str) {
    match ev.rules.get(s) {
        Some(r) => (r.action.as_str(), r.reason.as_str()),
        None => ev
            .program
            .hard_rules
            .get(s - ev.rules.len())
            .map_or(("", ""), |h| (h.action.as_str(), h.reason.as_str())),
    }
}

/// Runs a rule's threads (no new ones) over `bytes`, at the end of which
/// they all die or settle, and marks the starts of those that saw a match.
fn run_out(dfa: &DFA, st: &mut RuleState, cache: &mut LazyCache, bytes: &[u8]) {
    // One thread is the common case (a word that began in the last piece):
    // no loops over threads, no retain, one exit at its death.
    if let [t] = st.threads.as_slice() {
        let (start, mut sid, mut matched) = *t;
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
            match dfa.next_state(cache, t.1, b) {
                Ok(next) => {
                    t.1 = next;
                    t.2 |= next.is_match();
                    died |= next.is_dead();
                }
                // Cannot happen without a clear limit: let the exact
                // search look.
                Err(_) => t.2 = true,
            }
        }
        if died {
            for t in st.threads.iter().filter(|t| t.1.is_dead() && t.2) {
                mark(&mut st.dirty, t.0);
            }
            st.threads.retain(|t| !t.1.is_dead());
        }
    }
    for t in st.threads.iter().filter(|t| t.2) {
        mark(&mut st.dirty, t.0);
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
    for &(s, _, matched) in &st.threads {
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
            threads.push((s, sid, matched));
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
        if let Ok(next) = dfa.next_state(cache, t.1, b) {
            t.1 = next;
            t.2 |= next.is_match();
            if next.is_dead() {
                if t.2 {
                    mark(&mut st.dirty, t.0);
                }
                st.threads.clear();
            }
        }
    } else {
        for t in st.threads.iter_mut() {
            // Without a clear limit a transition cannot fail; if it did, the
            // thread stays as it was (live: holds back, never leaks).
            if let Ok(next) = dfa.next_state(cache, t.1, b) {
                t.1 = next;
                t.2 |= next.is_match();
                died |= next.is_dead();
            }
        }
    }
    if died {
        // A thread that saw a match leaves it to the exact search.
        for t in st.threads.iter().filter(|t| t.1.is_dead() && t.2) {
            mark(&mut st.dirty, t.0);
        }
        st.threads.retain(|t| !t.1.is_dead());
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
                    st.threads.push((j, next, next.is_match()));
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

/// Whether the word assertion `look` holds at `j` (the characters on both
/// sides are known); ASCII neighbours are settled by `ascii` (the rule's
/// table from [`ascii_lead`]) without Unicode tables.
///
/// Inlined: it runs at most starts of a word rule (once a piece for the
/// e-mail codon), where a call cost more than the table lookup.
#[inline]
fn lead_holds(
    looks: &LookMatcher,
    look: Look,
    ascii: Option<&[[bool; 2]; 2]>,
    bytes: &[u8],
    j: usize,
) -> bool {
    let prev = j.checked_sub(1).map(|k| bytes[k]);
    let next = bytes[j];
    match ascii {
        Some(t) if next.is_ascii() && prev.is_none_or(|p| p.is_ascii()) => {
            t[usize::from(prev.is_some_and(is_word_byte))][usize::from(is_word_byte(next))]
        }
        _ => lead_unicode(looks, look, bytes, j),
    }
}

/// [`lead_holds`] next to a non-ASCII character (or for an assertion
/// without an ASCII table): out of line, so that the common case stays small.
#[inline(never)]
fn lead_unicode(looks: &LookMatcher, look: Look, bytes: &[u8], j: usize) -> bool {
    looks.matches(look, bytes, j)
}

/// The class of a byte as the byte before a start, for
/// [`LivePlan::first_mask`]: 0 for an ASCII non-word character (or no
/// character: the start of the text), 1 for an ASCII word character, 2 for
/// a byte of another character (the assertion is then left to the start).
#[inline]
fn class_of(b: u8) -> usize {
    usize::from(CLASSES[usize::from(b)])
}

const CLASSES: [u8; 256] = {
    let mut t = [2u8; 256];
    let mut b = 0;
    while b < 128 {
        t[b] = WORD_BYTES[b] as u8;
        b += 1;
    }
    t
};

/// Whether an ASCII word character (`\w` in ASCII).
#[inline]
fn is_word_byte(b: u8) -> bool {
    WORD_BYTES[usize::from(b)]
}

const WORD_BYTES: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || c == b'_';
        b += 1;
    }
    t
};

/// The word assertion `look` between two ASCII characters, by whether each
/// is a word character; `None` for an assertion it does not know.
fn ascii_lead(look: Look, before: bool, after: bool) -> Option<bool> {
    Some(match look {
        Look::WordAscii | Look::WordUnicode => before != after,
        Look::WordAsciiNegate | Look::WordUnicodeNegate => before == after,
        Look::WordStartAscii | Look::WordStartUnicode => !before && after,
        Look::WordEndAscii | Look::WordEndUnicode => before && !after,
        Look::WordStartHalfAscii | Look::WordStartHalfUnicode => !before,
        Look::WordEndHalfAscii | Look::WordEndHalfUnicode => !after,
        _ => return None,
    })
}

/// A thread: its start, its DFA state, and whether it has reached a match
/// state (the exact search then has a match to find from its start).
type Thread = (usize, LazyStateID, bool);

/// Rule `i`'s bit in [`LivePlan::first_mask`].
fn rule_bit(i: usize) -> u64 {
    1 << i.min(63)
}

/// The rules of `mask` (bits as [`rule_bit`] sets them) among `count`.
fn rules_in(mask: u64, count: usize) -> RuleIter {
    let shared = rule_bit(63);
    if count > 64 && mask & shared != 0 {
        RuleIter {
            bits: mask & !shared,
            tail: 63..count,
        }
    } else {
        RuleIter {
            bits: mask,
            tail: 0..0,
        }
    }
}

/// Iterator of [`rules_in`]: the rules with a bit of their own, then those
/// sharing the last one.
struct RuleIter {
    bits: u64,
    tail: std::ops::Range<usize>,
}

impl Iterator for RuleIter {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.bits != 0 {
            let i = self.bits.trailing_zeros() as usize;
            self.bits &= self.bits - 1;
            return Some(i);
        }
        self.tail.next()
    }
}

/// The code points of `s`: its length when it is ASCII, which a scan a
/// word at a time tells (cheaper than counting on short pieces).
fn char_count(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.chars().count()
    }
}

fn is_continuation(b: u8) -> bool {
    (0x80..0xC0).contains(&b)
}

fn next_char(text: &str, at: usize) -> usize {
    at + text[at..].chars().next().map_or(1, char::len_utf8)
}

fn start_state(
    dfa: &DFA,
    cache: &mut LazyCache,
    starts: &mut [Option<LazyStateID>],
    lb: Option<u8>,
) -> Option<LazyStateID> {
    let k = lb.map_or(256, usize::from);
    if let Some(sid) = starts[k] {
        return Some(sid);
    }
    let cfg = start::Config::new().anchored(Anchored::Yes).look_behind(lb);
    let sid = dfa.start_state(cache, &cfg).ok()?;
    starts[k] = Some(sid);
    Some(sid)
}

/// Keeps the earliest start of threads in equal states (same future); a
/// dropped thread that saw a match passes that on to the one kept.
fn dedup(threads: &mut Vec<Thread>) {
    let mut k = 1;
    while k < threads.len() {
        match threads[..k].iter().position(|t| t.1 == threads[k].1) {
            Some(first) => {
                let matched = threads[k].2;
                threads[first].2 |= matched;
                threads.remove(k);
            }
            None => k += 1,
        }
    }
}

/// Widens a rule's unsearched range to include start `s`.
fn mark(dirty: &mut Option<(usize, usize)>, s: usize) {
    *dirty = Some(match *dirty {
        Some((lo, hi)) => (lo.min(s), hi.max(s)),
        None => (s, s),
    });
}

/// Whether every byte and the end of input lead `sid` to no match and no
/// further state: nothing that arrives can change its outcome.
fn is_terminal(dfa: &DFA, cache: &mut LazyCache, sid: LazyStateID) -> bool {
    if sid.is_dead() {
        return true;
    }
    let reps: Vec<u8> = dfa
        .byte_classes()
        .representatives(0..=255)
        .filter_map(|u| u.as_u8())
        .collect();
    // A transition may clear the cache, and `sid` is then no state of it:
    // stop at once (not terminal: the thread is kept, which only holds back).
    let clears = cache.clear_count();
    for b in reps {
        match dfa.next_state(cache, sid, b) {
            Ok(next) if next.is_dead() && cache.clear_count() == clears => {}
            _ => return false,
        }
    }
    matches!(dfa.next_eoi_state(cache, sid), Ok(next) if !next.is_match())
        && cache.clear_count() == clears
}

#[cfg(test)]
mod tests;
