//! The evaluation engine ([§6](docs/evaluation.md#s6)): built once per pack load, shared
//! read-only by every request. One pass over the payload's bytes rules out
//! every rule whose required bytes are absent; above a few candidates, one
//! pass of their combined automaton leaves those that match and where their
//! matches end, and a pattern of bounded length is searched only just
//! before those ends ([`windowed`]). Never logs, stores or returns a
//! matched value.

mod decision;
mod guided;
mod headed;
mod normalize;
mod receipt;
mod stream;
mod windowed;

pub use decision::{Decision, Severity, Source, Trigger, BLOCKED_TEXT, PERMIT_ACTION};
pub use normalize::{warm as warm_normalize, Normalize};
pub use stream::{
    Blocked, OwnedStreamSession, Released, Releases, Session, StreamOptions, StreamSession,
    COST_ACTION, COST_REASON, DEFAULT_MAX_HOLDBACK_CHARS, DEFAULT_MAX_SESSION_MS, HOLDBACK_ACTION,
    HOLDBACK_REASON,
};

use crate::builtins::Validator;
use crate::crypto::sha256;
use crate::pattern::{self, CompiledPattern, SET_THRESHOLD};
use crate::program::{ContextScan, FieldRef, Program};
use crate::rules::{CustomRule, RuleAction, RuleType};
use guided::{guided_search, Guide, GuideCaches, GuidedCaches, Want};
use regex_automata::meta::{Cache, Regex};
use regex_automata::util::iter::Searcher;
use regex_automata::{Anchored, Input, Match, MatchError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

struct Matcher {
    regex: Regex,
    /// Boundary-free form (when it differs). On non-ASCII text, where Unicode
    /// `\b` makes the exact regex's DFAs give up, it proposes where matches
    /// may start and the exact regex only confirms each, anchored.
    filter: Option<Regex>,
    /// What bounds the guided search's confirmations (with `filter` only).
    guide: Option<Guide>,
    /// Bytes of which every match holds one; `None` when there is no such set.
    required: Option<Vec<u8>>,
    /// The longest run of ASCII digits every match holds, at least.
    digit_run: usize,
    /// For a pattern of bounded length, its reverse lazy DFA: a stretch
    /// with one reported end left is searched backward from it alone.
    rev: Option<regex_automata::hybrid::dfa::DFA>,
    /// For a pattern with a head, its forward lazy DFA: each start the
    /// head proposes is confirmed with it ([`headed`]).
    fwd: Option<regex_automata::hybrid::dfa::DFA>,
    /// The length of every match, when they all have one.
    fixed_len: Option<usize>,
    /// On ASCII text, the length of every match away from the text's
    /// edges, when they all have one.
    interior_len: Option<usize>,
    /// The shortest and longest match of its head ([`pattern::heads`]),
    /// which the combined pass over ASCII text runs in its place.
    head: Option<(usize, usize)>,
    validator: Validator,
    /// Sources of the exact and boundary-free forms, for the streaming
    /// liveness automata (built only when a pack is first streamed).
    exact_src: String,
    filter_src: Option<String>,
}

impl Matcher {
    fn new(p: &CompiledPattern, validator: Validator) -> Self {
        Self {
            regex: p.exact.clone(),
            filter: p.filter_regex.clone(),
            guide: p.filter_regex.as_ref().and_then(|_| Guide::new(p)),
            required: p.required.clone(),
            digit_run: p.digit_run,
            rev: p.max_len.and_then(|_| pattern::build_reverse(&p.exact_src)),
            fwd: p
                .head
                .as_ref()
                .and_then(|_| pattern::build_forward(&p.exact_src)),
            fixed_len: p.fixed_len,
            interior_len: p.interior_len,
            head: p.head.as_ref().map(|h| (h.min, h.max)),
            validator,
            exact_src: p.exact_src.clone(),
            filter_src: p.filter_regex.as_ref().map(|_| p.filter.clone()),
        }
    }
}

/// For each byte value, a bit per matcher whose required set holds it: one
/// pass of loads and ORs over the payload yields every candidate matcher.
struct RequiredBytes {
    /// 64-bit words per byte value.
    words: usize,
    /// `table[b * words + w]`: bit `i % 64` of word `i / 64` set when byte
    /// `b` is in matcher `i`'s required set.
    table: Vec<u64>,
    /// Matchers with no required set: always candidates.
    always: Vec<u64>,
    /// Every matcher's bit: the scan stops once all are candidates.
    all: Vec<u64>,
}

impl RequiredBytes {
    fn new<'a>(sets: impl ExactSizeIterator<Item = Option<&'a [u8]>>) -> Self {
        let n = sets.len();
        let words = n.div_ceil(64).max(1);
        let mut table = vec![0u64; 256 * words];
        let mut always = vec![0u64; words];
        let mut all = vec![0u64; words];
        for (i, set) in sets.enumerate() {
            let (w, bit) = (i / 64, 1u64 << (i % 64));
            all[w] |= bit;
            match set {
                Some(bytes) => bytes
                    .iter()
                    .for_each(|&b| table[usize::from(b) * words + w] |= bit),
                None => always[w] |= bit,
            }
        }
        Self {
            words,
            table,
            always,
            all,
        }
    }

    /// The candidate bits for `bytes`, and whether the scan read them all.
    /// With `stop` (a bit per matcher that does not count), the scan of
    /// one word's matchers stops after a block of 256 bytes, not the last,
    /// that leaves more than [`SET_THRESHOLD`] counted candidates, and every
    /// matcher is a candidate: the combined pass, which runs then whatever the rest of
    /// the text holds, rules them out (see [`Evaluator::search`]).
    fn scan(&self, bytes: &[u8], stop: Option<&[u64]>) -> (Vec<u64>, bool) {
        let mut mask = self.always.clone();
        // One word a byte value: a table of 256, read by a byte without a
        // bounds check (about a third of the loop's instructions went to it).
        let single = (self.words == 1)
            .then(|| self.table.get(..256))
            .flatten()
            .and_then(|t| <&[u64; 256]>::try_from(t).ok());
        if let Some(t) = single {
            // Four accumulators keep the loads independent of each other.
            let mut acc = [mask[0], 0, 0, 0];
            let blocks = bytes.len().div_ceil(256);
            for (k, block) in bytes.chunks(256).enumerate() {
                let mut quads = block.chunks_exact(4);
                for q in &mut quads {
                    acc[0] |= t[usize::from(q[0])];
                    acc[1] |= t[usize::from(q[1])];
                    acc[2] |= t[usize::from(q[2])];
                    acc[3] |= t[usize::from(q[3])];
                }
                for &b in quads.remainder() {
                    acc[0] |= t[usize::from(b)];
                }
                let seen = acc[0] | acc[1] | acc[2] | acc[3];
                if seen == self.all[0] {
                    break;
                }
                let counted = seen & !stop.and_then(|s| s.first()).copied().unwrap_or(0);
                let more = k + 1 < blocks;
                if more && stop.is_some() && counted.count_ones() as usize > SET_THRESHOLD {
                    return (self.all.clone(), false);
                }
            }
            mask[0] = acc[0] | acc[1] | acc[2] | acc[3];
        } else {
            for &b in bytes {
                let row = &self.table[usize::from(b) * self.words..][..self.words];
                mask.iter_mut().zip(row).for_each(|(m, r)| *m |= r);
            }
        }
        (mask, true)
    }
}

/// Search caches for every regex of one evaluator, used by one evaluation at
/// a time. Lazy DFAs build their states into these, so a warmed set answers
/// in microseconds where a new one first spends 50–200 µs building states.
struct Caches {
    exact: Vec<Cache>,
    filter: Vec<Option<Cache>>,
    /// The guides' lazy DFAs.
    guide: Vec<Option<GuideCaches>>,
    /// The combined passes' lazy DFAs ([`pattern::ends::Tree`]).
    ends: pattern::ends::TreeCaches,
    /// The lazy DFA of the pass over ASCII text.
    ascii_ends: pattern::ends::TreeCaches,
    /// The matchers' reverse lazy DFAs.
    rev: Vec<Option<regex_automata::hybrid::dfa::Cache>>,
    /// Per matcher with a forward lazy DFA: its cache.
    fwd: Vec<Option<regex_automata::hybrid::dfa::Cache>>,
    /// What the last combined pass learnt, kept for its lists' memory.
    found: pattern::ends::Found,
    /// The codons' captures, made at their first value.
    captures: Vec<Option<regex_automata::util::captures::Captures>>,
    /// The memory of the last context scan's lists.
    context: crate::program::ContextBuffers,
    /// The memory of the last text's spans, a list per matcher
    /// ([`Matched`]).
    spans: Vec<Vec<(usize, usize)>>,
}

/// Longest list of spans a cache set keeps the memory of ([`Matched`]).
const KEEP_SPANS: usize = 256;

/// Every matcher's spans in a text, with the cache set that found them:
/// dropped, it hands the set back to the idle ones, and with it the
/// spans' lists for their memory (positions only; the next search empties
/// them).
struct Matched<'e> {
    evaluator: &'e Evaluator,
    found: Vec<Vec<(usize, usize)>>,
    caches: Option<Caches>,
}

impl std::ops::Deref for Matched<'_> {
    type Target = [Vec<(usize, usize)>];
    fn deref(&self) -> &Self::Target {
        &self.found
    }
}

impl Drop for Matched<'_> {
    fn drop(&mut self) {
        if let Some(mut caches) = self.caches.take() {
            // Emptied by the next search, which reads them all anyway.
            caches.spans = std::mem::take(&mut self.found);
            self.evaluator.idle_caches().push(caches);
        }
    }
}

/// Cache sets warmed at load: one per core (at most 8), so the first
/// requests after a start or a reload do not pay for building DFA states.
fn warm_sets() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().min(8))
}

/// Payloads run through each cache set at load: prose, digits in the
/// built-in formats, and non-ASCII text (the boundary-free filters' path).
const WARM_UP: [&str; 4] = [
    "The meeting moved to Tuesday at 10:30; call (212) 555-0199 or +1 415.555.0123, mail jane.doe@example.com, host 10.0.0.1.",
    "SSN 123-45-6789, card 4111 1111 1111 1111, MRN: 12345678, rx 1234567, ticket TCK-004211, PROJ-ZEUS-9, id 000-12-3456.",
    "Die Überprüfung läuft; café crème. 会議は午後三時に始まります。 Écrivez à ops@example.com ou 555-867-5309 — nº 123-45-6789.",
    "Señor Núñez enviará el informe mañana 2026-11-30. Ещё раз спасибо. 我们下周讨论预算 192.168.0.1 e\u{301} 9.255.255.255",
];

struct RuleInfo {
    id: String,
    severity: Severity,
    action: String,
    reason: String,
    placeholder: String,
}

/// A pack's compiled evaluator.
pub struct Evaluator {
    pack_id: String,
    pack_version: String,
    /// The pack's receipts ([§6.4](docs/evaluation.md#s6-4)), with the prefixes of a clean payload's
    /// and of each rule's trigger alone hashed at load.
    receipts: receipt::Receipts,
    /// Custom rules in file order, then the program's codons.
    matchers: Vec<Matcher>,
    /// The codons and hard rules the pack runs ([§6.1](docs/evaluation.md#s6-1), [§16](docs/codons.md#s16)).
    program: Arc<Program>,
    /// Whether the stream engine runs `program` incrementally
    /// (`Program::streams_natively`); a stream of any other program is
    /// judged whole at its end (see [`Session`]).
    native: bool,
    /// Automata over every matcher's boundary-free form (and over halves of
    /// them), which report where each one's matches end
    /// ([`pattern::ends::Tree`]); a matcher no finished pass covers runs on
    /// the whole payload.
    ends: pattern::ends::Tree,
    /// On ASCII text, one automaton over every matcher's form with ASCII
    /// word boundaries (exact there: [`CompiledPattern::ascii_words`]),
    /// which reports only the ends of real matches.
    ascii_ends: pattern::ends::Tree,
    /// Per codon: where its group can be read off its match without a
    /// capture search ([`pattern::affixes::Affixes`]).
    affixes: Vec<Option<pattern::affixes::Affixes>>,
    rules: Vec<RuleInfo>,
    /// Which matchers each byte value can start to satisfy.
    required: RequiredBytes,
    /// The matchers' required literals ([`pattern::literals::Scanner`];
    /// `None` when no matcher has any): scanned after the required bytes,
    /// it rules out those whose literals a text lacks.
    literals: Option<pattern::literals::Scanner>,
    /// For codons without literals whose values count only near a context
    /// word, the words' literals: scanned only where the
    /// candidates are searched one by one (see [`Evaluator::search`]).
    words: Option<pattern::literals::Scanner>,
    /// Each matcher's longest match, when its matches are bounded (for the
    /// combined pass and [`windowed`]).
    max_lens: Vec<Option<usize>>,
    /// As `max_lens`, for the pass over ASCII text: a matcher with a head
    /// has its head's longest match there.
    ascii_lens: Vec<Option<usize>>,
    /// Which codons share their context words (and one index of a text).
    context_groups: crate::program::ContextGroups,
    /// Idle cache sets; an evaluation that finds none makes a new one.
    caches: Mutex<Vec<Caches>>,
    /// Streaming liveness automata, built by the first stream session
    /// (shared: every session keeps a handle, so it needs no borrow).
    live: OnceLock<Arc<stream::LivePlan>>,
    /// Idle lazy-DFA caches of stream sessions.
    live_caches: Mutex<Vec<stream::LiveCaches>>,
    /// Idle text buffers of stream sessions (a few, of bounded size).
    stream_bufs: Mutex<Vec<String>>,
}

impl std::fmt::Debug for Evaluator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Patterns are policy secrets: never print them.
        f.debug_struct("Evaluator")
            .field("pack_id", &self.pack_id)
            .field("rules", &self.rules.len())
            .field("ends", &!self.ends.is_empty())
            .finish()
    }
}

impl Evaluator {
    /// Builds the evaluator of a version-1 pack from its validated custom
    /// rules: they run beside the example pack's codons and hard rules.
    pub fn new(pack_id: &str, pack_version: &str, rules: &[CustomRule]) -> Result<Self, String> {
        Self::with_program(pack_id, pack_version, rules, Program::builtin()?)
    }

    /// Builds the evaluator of a pack from its validated custom rules and
    /// the codons and hard rules it runs ([§16](docs/codons.md#s16)).
    pub fn with_program(
        pack_id: &str,
        pack_version: &str,
        rules: &[CustomRule],
        program: Arc<Program>,
    ) -> Result<Self, String> {
        let n = rules.len() + program.codons.len();
        let mut matchers = Vec::with_capacity(n);
        let mut filters = Vec::with_capacity(n);
        let mut ascii_forms = Vec::with_capacity(n);
        let mut infos = Vec::with_capacity(rules.len());
        for r in rules {
            matchers.push(Matcher::new(
                &r.pattern,
                match r.rule_type {
                    RuleType::Regex => Validator::None,
                    RuleType::LuhnChecksum => Validator::Luhn,
                },
            ));
            filters.push(r.pattern.filter.as_str());
            ascii_forms.push(ascii_form(&r.pattern));
            infos.push(RuleInfo {
                id: r.id.clone(),
                severity: match r.action {
                    RuleAction::Block => Severity::Fatal,
                    RuleAction::Redact => Severity::Warning,
                },
                action: r.action_name(),
                reason: r
                    .description
                    .clone()
                    .unwrap_or_else(|| format!("Custom rule {} matched", r.id)),
                placeholder: format!("[REDACTED_{}]", r.id.to_uppercase()),
            });
        }
        for c in &program.codons {
            matchers.push(Matcher::new(&c.pattern, c.validator));
            filters.push(c.pattern.filter.as_str());
            ascii_forms.push(ascii_form(&c.pattern));
        }
        let ends = pattern::ends::Tree::build(&filters);
        let ascii_ends = pattern::ends::Tree::root(&ascii_forms);
        let required = RequiredBytes::new(matchers.iter().map(|m| m.required.as_deref()));
        // A codon whose pattern has no literals but whose values count only
        // near a context word is gated by the words.
        let codon_words: Vec<Option<pattern::literals::Literals>> = program
            .codons
            .iter()
            .map(|c| match (&c.pattern.literals, &c.context) {
                (None, Some(ctx)) => ctx.required_literals(),
                _ => None,
            })
            .collect();
        let literals = pattern::literals::Scanner::new(
            rules
                .iter()
                .map(|r| r.pattern.literals.as_ref())
                .chain(program.codons.iter().map(|c| c.pattern.literals.as_ref()))
                .collect::<Vec<_>>()
                .into_iter(),
        );
        let words = pattern::literals::Scanner::new(
            rules
                .iter()
                .map(|_| None)
                .chain(codon_words.iter().map(Option::as_ref))
                .collect::<Vec<_>>()
                .into_iter(),
        );
        let affixes = program
            .codons
            .iter()
            .map(|c| {
                c.group
                    .and_then(|g| pattern::affixes::Affixes::of(&c.pattern.exact_src, g))
            })
            .collect();
        let evaluator = Self {
            required,
            literals,
            words,
            context_groups: crate::program::ContextGroups::new(
                program.codons.iter().map(|c| c.context.as_ref()),
            ),
            max_lens: rules
                .iter()
                .map(|r| r.pattern.max_len)
                .chain(program.codons.iter().map(|c| c.pattern.max_len))
                .collect(),
            ascii_lens: rules
                .iter()
                .map(|r| ascii_len(&r.pattern))
                .chain(program.codons.iter().map(|c| ascii_len(&c.pattern)))
                .collect(),
            pack_id: pack_id.to_string(),
            pack_version: pack_version.to_string(),
            receipts: receipt::Receipts::with_rules(
                pack_id,
                pack_version,
                infos
                    .iter()
                    .map(|r| (r.id.as_str(), r.action.as_str()))
                    .chain(
                        program
                            .hard_rules
                            .iter()
                            .map(|h| (h.id.as_str(), h.action.as_str())),
                    ),
            ),
            matchers,
            native: program.streams_natively(),
            program,
            ends,
            ascii_ends,
            affixes,
            rules: infos,
            caches: Mutex::new(Vec::new()),
            live: OnceLock::new(),
            live_caches: Mutex::new(Vec::new()),
            stream_bufs: Mutex::new(Vec::new()),
        };
        evaluator.warm(warm_sets());
        evaluator.warm_stream();
        Ok(evaluator)
    }

    fn new_caches(&self) -> Caches {
        Caches {
            exact: self
                .matchers
                .iter()
                .map(|m| m.regex.create_cache())
                .collect(),
            filter: self
                .matchers
                .iter()
                .map(|m| m.filter.as_ref().map(Regex::create_cache))
                .collect(),
            guide: self
                .matchers
                .iter()
                .map(|m| m.guide.as_ref().map(Guide::caches))
                .collect(),
            ends: self.ends.create_caches(),
            ascii_ends: self.ascii_ends.create_caches(),
            rev: self
                .matchers
                .iter()
                .map(|m| {
                    m.rev
                        .as_ref()
                        .map(regex_automata::hybrid::dfa::DFA::create_cache)
                })
                .collect(),
            fwd: self
                .matchers
                .iter()
                .map(|m| {
                    m.fwd
                        .as_ref()
                        .map(regex_automata::hybrid::dfa::DFA::create_cache)
                })
                .collect(),
            found: pattern::ends::Found::default(),
            captures: self.matchers.iter().map(|_| None).collect(),
            context: crate::program::ContextBuffers::default(),
            spans: Vec::new(),
        }
    }

    /// Builds `n` cache sets and runs the warm-up payloads through each.
    fn warm(&self, n: usize) {
        let mut sets = Vec::with_capacity(n);
        for _ in 0..n {
            let mut caches = self.new_caches();
            for text in WARM_UP {
                let all: Vec<usize> = (0..self.matchers.len()).collect();
                let _ = self.search(text, all, true, &mut caches);
            }
            sets.push(caches);
        }
        self.idle_caches().extend(sets);
    }

    fn idle_caches(&self) -> std::sync::MutexGuard<'_, Vec<Caches>> {
        // A poisoned lock only means a panic elsewhere; the caches stay valid.
        self.caches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Spans of every candidate matcher that matches, with the given caches.
    /// `scanned`: the candidates are those of a whole scan of the required
    /// bytes; else they may be more ([`RequiredBytes::scan`] stopped early),
    /// and the scan is finished for those no finished pass covers.
    fn search(
        &self,
        text: &str,
        mut candidates: Vec<usize>,
        scanned: bool,
        caches: &mut Caches,
    ) -> Vec<Vec<(usize, usize)>> {
        if !scanned && candidates.len() <= SET_THRESHOLD {
            self.rescan(text, &mut candidates, None);
        }
        let ascii = text.is_ascii();
        let mut ends = None;
        if candidates.len() > SET_THRESHOLD {
            let base = pattern::ends::ENDS_BASE;
            let mut found = std::mem::take(&mut caches.found);
            if ascii {
                let (caches, lens) = (&mut caches.ascii_ends, &self.ascii_lens);
                self.ascii_ends
                    .run_into(caches, text, lens, base, false, &mut found);
            } else {
                let (caches, lens) = (&mut caches.ends, &self.max_lens);
                self.ends
                    .run_into(caches, text, lens, base, true, &mut found);
            }
            if !scanned && candidates.iter().any(|&i| !found.known[i]) {
                self.rescan(text, &mut candidates, Some(&found.known));
            }
            // A matcher no finished pass covered is searched whole.
            candidates.retain(|&i| !found.known[i] || found.seen[i]);
            ends = Some(found);
        } else {
            // Searched one by one: not those whose every match holds a longer
            // run of digits than the text has, nor codons whose context
            // words it lacks. (Above the threshold the combined pass rules
            // them out with the rest. These must not move a text below it,
            // where whole searches replace the pass: those of patterns
            // without literals cost as much as the pass, each.)
            if candidates.iter().any(|&i| self.matchers[i].digit_run > 1) {
                let longest = pattern::digits::longest_run(text.as_bytes());
                candidates.retain(|&i| self.matchers[i].digit_run <= longest);
            }
            if let Some(words) = &self.words {
                let mut mask =
                    pattern::literals::mask_of(self.matchers.len(), candidates.iter().copied());
                if words.gates(&mask) {
                    let bytes = text.as_bytes();
                    words.narrow(bytes, &mut mask, Self::literal_budget(bytes));
                    candidates.retain(|&i| mask[i / 64] & (1 << (i % 64)) != 0);
                }
            }
        }
        // The lists of an earlier text, for their memory (a long text's
        // are dropped: they stay in no idle cache set).
        let mut found = std::mem::take(&mut caches.spans);
        for list in &mut found {
            if list.capacity() > KEEP_SPANS {
                *list = Vec::new();
            } else {
                list.clear();
            }
        }
        // The context words of the text, looked for once for all values.
        let mut scan = ContextScan::of(Some(&self.context_groups), ascii)
            .with_buffers(std::mem::take(&mut caches.context));
        if !candidates.is_empty() {
            found.resize_with(self.matchers.len(), Vec::new);
            for i in candidates {
                let known = ends.as_ref().filter(|e| e.known.get(i) == Some(&true));
                let spare = std::mem::take(&mut found[i]);
                let place = match (known, self.matchers[i].head) {
                    // The pass over ASCII text ran the head: its ends
                    // propose the starts.
                    (Some(e), Some(head)) if ascii => match e.ends.get(i) {
                        Some(ends) => Place::Starts(ends, head),
                        None => Place::Whole(text.len()),
                    },
                    _ => match known.and_then(|e| {
                        Some(windowed::Near {
                            stretches: self.stretches(i, text, e.stretches.get(i)?, ascii)?,
                            ends: e.ends.get(i)?,
                            len: self.max_lens.get(i).copied().flatten()?,
                            // Only the pass over ASCII text reports the
                            // ends of exact matches.
                            fixed: self.matchers[i].fixed_len.filter(|_| ascii),
                            interior: self.matchers[i].interior_len.filter(|_| ascii),
                        })
                    }) {
                        Some(near) => Place::Near(near),
                        // Searched whole, a matcher the pass covered need
                        // not be searched past its last end.
                        None => Place::Whole(
                            known
                                .and_then(|e| e.ends.get(i)?.last().copied())
                                .unwrap_or(text.len()),
                        ),
                    },
                };
                found[i] = self.find_all(i, text, ascii, caches, place, &mut scan, spare);
            }
        }
        caches.context = scan.into_buffers();
        if let Some(mut kept) = ends {
            kept.shed();
            caches.found = kept;
        }
        found
    }

    /// Keeps of `candidates` those a whole scan of `text`'s required bytes
    /// leaves, and those `known` to a finished pass.
    fn rescan(&self, text: &str, candidates: &mut Vec<usize>, known: Option<&[bool]>) {
        let (full, _) = self.required.scan(text.as_bytes(), None);
        candidates.retain(|&i| {
            known.is_some_and(|k| k.get(i) == Some(&true))
                || full.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
        });
    }

    /// The pack id.
    pub fn pack_id(&self) -> &str {
        &self.pack_id
    }

    /// The pack version as text.
    pub fn pack_version(&self) -> &str {
        &self.pack_version
    }

    /// Number of custom rules.
    pub fn rule_count(&self) -> usize {
        self.rules.len()
    }

    /// Evaluates `text` ([§6](docs/evaluation.md#s6)) and times the engine call.
    pub fn evaluate(&self, text: &str) -> Decision<'_> {
        self.evaluate_with(text, Normalize::None)
    }

    /// Evaluates `text` with the given matching ([§6](docs/evaluation.md#s6), [§15](docs/evasion.md#s15)) and times
    /// the engine call. With [`Normalize::Evasion`], rules run on the
    /// normalized view when it differs from the text; spans, redactions and
    /// `clean_text` refer to the original text, and the receipt hashes it.
    pub fn evaluate_with(&self, text: &str, normalize: Normalize) -> Decision<'_> {
        let started = Instant::now();
        let view = match normalize {
            Normalize::None => None,
            Normalize::Evasion => normalize::View::of(text),
        };
        let mut decision = self.decide(text, view.as_ref());
        decision.latency_us = started.elapsed().as_secs_f64() * 1e6;
        decision
    }

    /// Whether some rule could match `text` (through the [§15](docs/evasion.md#s15) view with
    /// [`Normalize::Evasion`]): `false` means [`Evaluator::evaluate_with`]
    /// decides it clean, which a caller judging many short strings (a
    /// gateway body's keys-like values: roles, model names) learns from one
    /// pass over the bytes, without building a decision.
    pub fn may_match(&self, text: &str, normalize: Normalize) -> bool {
        let view = match normalize {
            Normalize::None => None,
            Normalize::Evasion => normalize::View::of(text),
        };
        let bytes = view.as_ref().map_or(text, |v| v.text.as_str()).as_bytes();
        let (mut mask, _) = self.mask(bytes, false);
        if let Some(words) = &self.words {
            words.narrow(bytes, &mut mask, Self::literal_budget(bytes));
        }
        mask.iter().any(|&w| w != 0)
    }

    /// A bit per matcher that may match `bytes`: its required bytes occur,
    /// and so does one of its required literals, if it has any. The
    /// literals are looked for only where that can spare the combined pass
    /// ([`Evaluator::search`]): when the candidates without literals are
    /// at most [`SET_THRESHOLD`]; otherwise the pass rules the others out.
    ///
    /// With `early`, the scan of the required bytes may stop once the pass
    /// is sure to run (more than [`SET_THRESHOLD`] candidates without
    /// literals): every matcher is then a candidate, and the second value
    /// is `false`.
    fn mask(&self, bytes: &[u8], early: bool) -> (Vec<u64>, bool) {
        let stop = early.then(|| self.literals.as_ref().map_or(&[][..], |l| l.gated()));
        let (mut mask, scanned) = self.required.scan(bytes, stop);
        if let Some(literals) = &self.literals {
            let count = |m: &[u64]| m.iter().map(|w| w.count_ones() as usize).sum::<usize>();
            if count(&mask) - literals.gated_in(&mask) <= SET_THRESHOLD {
                literals.narrow(bytes, &mut mask, Self::literal_budget(bytes));
            }
        }
        (mask, scanned)
    }

    /// Occurrences a literal scan of `bytes` reads at most (as many as the
    /// combined pass reads ends); past them it rules nothing out.
    fn literal_budget(bytes: &[u8]) -> usize {
        pattern::ends::ENDS_BASE + bytes.len() / pattern::ends::BYTES_PER_END
    }

    /// The redacted text `W(T)` of [§11.1](docs/streaming.md#s11-1): `text` with the matches of
    /// every rule, FATAL ones included, replaced by the [§6.3](docs/evaluation.md#s6-3) sweep (what a
    /// stream session releases in all when it is not blocked).
    pub fn redacted_text(&self, text: &str) -> String {
        self.redacted_text_with(text, Normalize::None)
    }

    /// [`Evaluator::redacted_text`] with the given matching ([§15](docs/evasion.md#s15)).
    pub fn redacted_text_with(&self, text: &str, normalize: Normalize) -> String {
        let view = match normalize {
            Normalize::None => None,
            Normalize::Evasion => normalize::View::of(text),
        };
        let found = self.matches(view.as_ref().map_or(text, |v| v.text.as_str()));
        if found.is_empty() {
            return text.to_string();
        }
        if !self.native {
            // A codon's values count only in the triggers of the hard rules
            // whose conditions hold ([§16.3](docs/codons.md#s16-3)): W(T) replaces those.
            let (_, all) = self.triggers_of(&found, |_| Vec::new(), true);
            return redact(text, view.as_ref(), &all);
        }
        let sources: Vec<Spans<'_, '_>> = found
            .iter()
            .enumerate()
            .filter(|(_, spans)| !spans.is_empty())
            .map(|(i, spans)| {
                let (key, placeholder) = self.redaction_key(i);
                (spans.as_slice(), key, placeholder)
            })
            .collect();
        redact(text, view.as_ref(), &sources)
    }

    /// Matcher `i`'s sort key in the sweep (its trigger's place among all
    /// triggers, then its codon) and its placeholder: a codon's trigger is
    /// that of the first hard rule that reads it.
    fn redaction_key(&self, i: usize) -> ((usize, usize), &str) {
        let base = self.rules.len();
        match self.rules.get(i) {
            Some(info) => ((i, 0), info.placeholder.as_str()),
            None => {
                let c = i - base;
                let hard = &self.program.hard_rules;
                let h = hard
                    .iter()
                    .position(|h| h.reads.contains(&c))
                    .unwrap_or(hard.len());
                let placeholder = self
                    .program
                    .codons
                    .get(c)
                    .map_or("", |c| c.remedy_template.as_str());
                ((base + h, c), placeholder)
            }
        }
    }

    /// Indices of the matchers that may match `text` ([`Evaluator::mask`]:
    /// one pass over the bytes settles most clean payloads).
    /// The second value says whether they are exactly those (else the
    /// scan stopped early and they may be more: [`Evaluator::mask`]).
    fn candidates(&self, text: &str) -> (Vec<usize>, bool) {
        let (mask, scanned) = self.mask(text.as_bytes(), true);
        let mut candidates = Vec::with_capacity(mask.iter().map(|w| w.count_ones() as usize).sum());
        candidates
            .extend((0..self.matchers.len()).filter(|&i| mask[i / 64] & (1 << (i % 64)) != 0));
        (candidates, scanned)
    }

    /// Every matcher's spans in `text` (empty when no matcher can match),
    /// searched with an idle cache set.
    fn matches(&self, text: &str) -> Matched<'_> {
        let (candidates, scanned) = self.candidates(text);
        if candidates.is_empty() {
            return Matched {
                evaluator: self,
                found: Vec::new(),
                caches: None,
            };
        }
        let mut caches = self
            .idle_caches()
            .pop()
            .unwrap_or_else(|| self.new_caches());
        let found = self.search(text, candidates, scanned, &mut caches);
        Matched {
            evaluator: self,
            found,
            caches: Some(caches),
        }
    }

    /// Decides on `text`; with a `view`, rules run on the view and its
    /// spans are mapped back to `text` (byte spans of the view become
    /// original spans before any code point is counted).
    fn decide(&self, text: &str, view: Option<&normalize::View>) -> Decision<'_> {
        self.decide_with_redacted(text, view, false).0
    }

    /// [`Evaluator::evaluate_with`] and, when it has a FATAL trigger and
    /// `want_redacted`, the redacted text W(T) ([§11.1](docs/streaming.md#s11-1)) from the same
    /// search: what a whole-mode stream session needs at its end, judging
    /// the text once. (Without a FATAL trigger W(T) is the `clean_text`.)
    pub(super) fn judge_whole(
        &self,
        text: &str,
        normalize: Normalize,
    ) -> (Decision<'_>, Option<String>) {
        let started = Instant::now();
        let view = match normalize {
            Normalize::None => None,
            Normalize::Evasion => normalize::View::of(text),
        };
        let (mut decision, redacted) = self.decide_with_redacted(text, view.as_ref(), true);
        decision.latency_us = started.elapsed().as_secs_f64() * 1e6;
        (decision, redacted)
    }

    /// [`Self::decide`], and W(T) when asked for and the decision has a
    /// FATAL trigger.
    fn decide_with_redacted(
        &self,
        text: &str,
        view: Option<&normalize::View>,
        want_redacted: bool,
    ) -> (Decision<'_>, Option<String>) {
        let found = self.matches(view.map_or(text, |v| v.text.as_str()));
        let normalized = view.is_some();
        if found.iter().all(Vec::is_empty) {
            let d = self.finish(
                &sha256(text.as_bytes()),
                Vec::new(),
                text.to_string(),
                normalized,
            );
            return (d, None);
        }
        let ascii = text.is_ascii();
        let original = |spans: &[(usize, usize)]| -> Vec<[usize; 2]> {
            match view {
                None => code_point_spans(text, spans, ascii),
                Some(v) => {
                    let mapped: Vec<(usize, usize)> =
                        spans.iter().map(|&(s, e)| v.map.span(s, e)).collect();
                    code_point_spans(text, &mapped, ascii)
                }
            }
        };

        let (triggers, spans) = self.triggers_of(&found, original, want_redacted);
        let fatal = deciding(&triggers).map(|i| triggers[i].severity) == Some(Severity::Fatal);
        let redacted = (want_redacted && fatal).then(|| redact(text, view, &spans));
        let clean = match deciding(&triggers).map(|i| triggers[i].severity) {
            Some(Severity::Fatal) => BLOCKED_TEXT.to_string(),
            Some(Severity::Warning) if want_redacted => {
                // Every trigger's spans were collected: the sweep key's
                // first part is the trigger's place, which says its severity.
                let warnings: Vec<Spans<'_, '_>> = spans
                    .into_iter()
                    .filter(|s| triggers[s.1 .0].severity == Severity::Warning)
                    .collect();
                redact(text, view, &warnings)
            }
            Some(Severity::Warning) => redact(text, view, &spans),
            None => text.to_string(),
        };
        let d = self.finish(&sha256(text.as_bytes()), triggers, clean, normalized);
        (d, redacted)
    }

    /// The triggers of the matches `found` (custom rules in file order,
    /// then hard rules whose conditions hold, [§6.1](docs/evaluation.md#s6-1), [§16.3](docs/codons.md#s16-3)), their spans
    /// converted by `original`, and the byte spans of the WARNING triggers
    /// (of every trigger with `all`: W(T)) for the [§6.3](docs/evaluation.md#s6-3) sweep.
    fn triggers_of<'e, 'f>(
        &'e self,
        found: &'f [Vec<(usize, usize)>],
        original: impl Fn(&[(usize, usize)]) -> Vec<[usize; 2]>,
        all: bool,
    ) -> (Vec<Trigger<'e>>, Vec<Spans<'f, 'e>>) {
        let mut triggers: Vec<Trigger<'_>> = Vec::new();
        // Byte spans to redact, one sorted list per matcher, with its sweep
        // key (trigger order, codon) and placeholder.
        let mut redactions: Vec<Spans<'_, '_>> = Vec::new();
        for (r, info) in self.rules.iter().enumerate() {
            let spans = &found[r];
            if spans.is_empty() {
                continue;
            }
            if all || info.severity == Severity::Warning {
                let t = triggers.len();
                redactions.push((spans, (t, 0), info.placeholder.as_str()));
            }
            triggers.push(Trigger {
                rule_id: &info.id,
                source: Source::Rule,
                severity: info.severity,
                action: &info.action,
                codons: None,
                match_count: spans.len(),
                spans: original(spans),
            });
        }
        let base = self.rules.len();
        let program = &*self.program;
        let values = |c: usize| found.get(base + c).map_or(&[][..], Vec::as_slice);
        let field = |f: &FieldRef| match *f {
            FieldRef::Bool(k) => program.bool_fields[k]
                .1
                .iter()
                .any(|&c| !values(c).is_empty()),
            FieldRef::Count(_) => false,
        };
        let count = |f: &FieldRef| match *f {
            FieldRef::Count(k) => program.count_fields[k]
                .1
                .iter()
                .map(|&c| values(c).len() as u64)
                .sum(),
            FieldRef::Bool(_) => 0,
        };
        for hr in &program.hard_rules {
            if !hr.condition.eval(&field, &count) {
                continue;
            }
            // Sized at once: a rule reading many codons would otherwise
            // grow them a codon at a time.
            let total = hr.reads.iter().map(|&c| values(c).len()).sum();
            let mut spans: Vec<(usize, usize)> = Vec::with_capacity(total);
            let mut codes = Vec::with_capacity(hr.reads.len());
            for &c in &hr.reads {
                let m = values(c);
                if m.is_empty() {
                    continue;
                }
                let codon = &program.codons[c];
                codes.push(codon.code.as_str());
                spans.extend_from_slice(m);
                if all || !hr.fatal {
                    redactions.push((m, (triggers.len(), c), codon.remedy_template.as_str()));
                }
            }
            spans.sort_unstable();
            triggers.push(Trigger::of_hard_rule(hr, codes, original(&spans)));
        }
        (triggers, redactions)
    }

    /// The decision of a text from its triggers (in trigger order), its
    /// `clean_text` and its SHA-256 (the receipt's `sha256_payload`).
    fn finish<'e>(
        &'e self,
        payload_sha256: &[u8; 32],
        triggers: Vec<Trigger<'e>>,
        clean_text: String,
        normalized: bool,
    ) -> Decision<'e> {
        let deciding = deciding(&triggers);
        let (action, severity, reason) = match deciding {
            Some(i) => {
                let t = &triggers[i];
                (t.action, Some(t.severity), Some(self.reason_of(t)))
            }
            None => (PERMIT_ACTION, None, None),
        };
        let invariants_passed = deciding.is_none();
        let receipt_hash = self.receipts.hash_of(
            action,
            invariants_passed,
            triggers.iter().map(|t| t.rule_id),
            payload_sha256,
        );
        Decision {
            action,
            severity,
            reason,
            clean_text,
            triggers,
            invariants_passed,
            pack_id: &self.pack_id,
            pack_version: &self.pack_version,
            receipt_hash,
            latency_us: 0.0,
            normalized,
        }
    }

    fn reason_of(&self, t: &Trigger<'_>) -> &str {
        match t.source {
            Source::Rule => self
                .rules
                .iter()
                .find(|r| r.id == t.rule_id)
                .map_or("", |r| r.reason.as_str()),
            Source::Builtin | Source::HardRule => self
                .program
                .hard_rules
                .iter()
                .find(|h| h.id == t.rule_id)
                .map_or("", |h| h.reason.as_str()),
        }
    }

    /// The value of matcher `i`'s match `text[s..e]` if it counts (what a
    /// stream session commits): the match itself for a custom rule that
    /// passes its validator, a codon's value (its group, through its
    /// checks, [§16.1](docs/codons.md#s16-1)) for a codon. `text` holds, before `s`, at least
    /// [`Evaluator::context_chars`] code points or the start of the text.
    fn value_of(
        &self,
        i: usize,
        text: &str,
        s: usize,
        e: usize,
        caches: &mut Caches,
    ) -> Option<(usize, usize)> {
        let m = &self.matchers[i];
        if !validate(m.validator, text.get(s..e)?) {
            return None;
        }
        match i
            .checked_sub(self.rules.len())
            .and_then(|c| self.program.codons.get(c))
        {
            Some(codon) if codon.filters() => {
                let affixes = self.affixes_of(i);
                let mut caps = codon
                    .group
                    .filter(|_| !affixes.is_some_and(pattern::affixes::Affixes::always))
                    .map(|_| m.regex.create_captures());
                value_span(
                    codon,
                    affixes,
                    &m.regex,
                    &mut caches.exact[i],
                    caps.as_mut(),
                    text,
                    (s, e),
                    None,
                )
            }
            _ => Some((s, e)),
        }
    }

    /// Where matcher `i`'s group can be read off its match, if it is a
    /// codon whose pattern allows it.
    fn affixes_of(&self, i: usize) -> Option<&pattern::affixes::Affixes> {
        i.checked_sub(self.rules.len())
            .and_then(|c| self.affixes.get(c))
            .and_then(Option::as_ref)
    }

    /// Code points after matcher `i`'s match that decide whether its value
    /// counts: a codon's `context.after` window and the character after it
    /// (a context word must not touch a word character); 0 for any other
    /// matcher, whose value is settled with its match.
    fn settles_after(&self, i: usize) -> usize {
        i.checked_sub(self.rules.len())
            .and_then(|c| self.program.codons.get(c))
            .and_then(|c| c.context.as_ref())
            .map_or(0, |x| if x.after == 0 { 0 } else { x.after + 1 })
    }

    /// Code points of text a stream session keeps before its held text:
    /// the widest `context.before` of the codons, and one more for the
    /// word-character test at a context word's start.
    fn context_chars(&self) -> usize {
        self.program
            .codons
            .iter()
            .filter_map(|c| c.context.as_ref().map(|x| x.before + 1))
            .max()
            .unwrap_or(0)
    }

    /// Every non-empty, validated match of matcher `i`, left to right,
    /// non-overlapping; a dropped candidate does not let an overlapping one through.
    /// With `near` (stretches and the pass's ends), only the stretches are
    /// searched, and only as far as ends remain ([`windowed`]); without,
    /// the text up to `to`, past which no match ends. `spare` is an
    /// earlier text's list of the matcher, for its memory.
    #[allow(clippy::too_many_arguments)]
    fn find_all(
        &self,
        i: usize,
        text: &str,
        ascii: bool,
        caches: &mut Caches,
        place: Place<'_>,
        scan: &mut ContextScan<'_>,
        spare: Vec<(usize, usize)>,
    ) -> Vec<(usize, usize)> {
        let m = &self.matchers[i];
        let codon = i
            .checked_sub(self.rules.len())
            .and_then(|c| Some((c, self.program.codons.get(c)?)));
        let mut spans = match place {
            Place::Near(near) => {
                let rev = m.rev.as_ref().zip(caches.rev[i].as_mut());
                // A candidate whose values could have no context word near
                // them is dropped before it is searched for.
                let context = codon.and_then(|(c, codon)| Some((c, codon.context.as_ref()?)));
                let mut gate = |a: usize, b: usize| {
                    context.is_none_or(|(c, ctx)| scan.may_hold(c, ctx, text, a, b))
                };
                let exact = &mut caches.exact[i];
                windowed::search(&m.regex, exact, rev, text, &near, &mut gate, spare)
            }
            Place::Starts(ends, head) => {
                let mut spans = spare;
                let mut confirm = headed::Confirm {
                    re: &m.regex,
                    cache: &mut caches.exact[i],
                    fwd: m.fwd.as_ref().zip(caches.fwd[i].as_mut()),
                };
                if let Err(headed::Unfinished(from)) =
                    headed::search(&mut confirm, text, ends, head, &mut spans)
                {
                    let range = from..text.len();
                    spans.extend(self.search_matcher(i, text, range, ascii, caches, Want::All));
                }
                spans
            }
            Place::Whole(to) => self.search_matcher(i, text, 0..to, ascii, caches, Want::All),
        };
        spans.retain(|&(s, e)| s < e && validate(m.validator, &text[s..e]));
        match codon {
            Some((c, codon)) if codon.filters() && !spans.is_empty() => {
                let (exact, caps) = (&mut caches.exact[i], &mut caches.captures[i]);
                let affixes = self.affixes_of(i);
                values(
                    codon,
                    affixes,
                    &m.regex,
                    exact,
                    caps,
                    text,
                    (scan, c),
                    spans,
                )
            }
            _ => spans,
        }
    }

    /// The stretches of `text` that hold every match of matcher `i`, from
    /// the combined pass ([`windowed::confined`]); `None` when it must be
    /// searched whole. On non-ASCII text a pattern with `\b` is confined
    /// only to ASCII stretches (with the characters either side): elsewhere
    /// its exact regex's DFAs give up, and the guided search of the whole
    /// text is the fast one.
    fn stretches<'s>(
        &self,
        i: usize,
        text: &str,
        stretches: &'s [(usize, usize)],
        ascii: bool,
    ) -> Option<std::borrow::Cow<'s, [(usize, usize)]>> {
        self.max_lens.get(i).copied().flatten()?;
        let stretches = windowed::confined(text, stretches)?;
        let bytes = text.as_bytes();
        let plain = ascii
            || self.matchers[i].filter.is_none()
            || stretches
                .iter()
                .all(|&(s, e)| bytes[s.saturating_sub(1)..(e + 1).min(bytes.len())].is_ascii());
        plain.then_some(stretches)
    }

    /// The leftmost-first match of matcher `i` starting at or after `from`
    /// in `text` (empty or not, unvalidated), found as [`Self::evaluate`]
    /// finds its matches: what a stream session commits, one at a time.
    /// `ascii` says whether `text` is ASCII from the character before
    /// `from` on (look-behind sees it): the caller knows it without a scan,
    /// which would cost the whole rest of the text at every match.
    fn find_first(
        &self,
        i: usize,
        text: &str,
        from: usize,
        ascii: bool,
        caches: &mut Caches,
    ) -> Option<(usize, usize)> {
        if ascii || self.matchers[i].filter.is_none() {
            // The exact regex, as `search_matcher` would run it, without a
            // list: a session commits a match or two at a time.
            return first_with(&self.matchers[i].regex, &mut caches.exact[i], text, from);
        }
        self.search_matcher(i, text, from..text.len(), ascii, caches, Want::First)
            .first()
            .copied()
    }

    /// Matcher `i`'s matches in `text[from..to]`: the exact regex on ASCII
    /// text, the guided search (same matches) on other text, which reads
    /// on to the text's end (`to` is then only where no match ends past).
    fn search_matcher(
        &self,
        i: usize,
        text: &str,
        std::ops::Range {
            start: from,
            end: to,
        }: std::ops::Range<usize>,
        ascii: bool,
        caches: &mut Caches,
        want: Want,
    ) -> Vec<(usize, usize)> {
        let m = &self.matchers[i];
        let exact_cache = &mut caches.exact[i];
        match (&m.filter, &mut caches.filter[i]) {
            (Some(filter), Some(filter_cache)) if !ascii => {
                let caches = GuidedCaches {
                    exact: exact_cache,
                    filter: filter_cache,
                    guide: caches.guide[i].as_mut(),
                };
                guided_search(&m.regex, filter, m.guide.as_ref(), caches, text, from, want)
            }
            _ => match want {
                Want::All => {
                    find_iter_with(&m.regex, exact_cache, Input::new(text).range(from..to))
                }
                Want::First => first_with(&m.regex, exact_cache, text, from)
                    .into_iter()
                    .collect(),
            },
        }
    }
}

/// What the combined pass over ASCII text runs for pattern `p`: its head
/// when it has one ([`pattern::heads`]), else its form with ASCII word
/// boundaries.
fn ascii_form(p: &CompiledPattern) -> &str {
    match &p.head {
        Some(head) => &head.src,
        None => &p.ascii_words,
    }
}

/// The longest match of [`ascii_form`]`(p)`, when it is bounded.
fn ascii_len(p: &CompiledPattern) -> Option<usize> {
    match &p.head {
        Some(head) => Some(head.max),
        None => p.max_len,
    }
}

/// Where the combined pass says a matcher's matches are.
enum Place<'a> {
    /// In the stretches before the ends it reported ([`windowed`]).
    Near(windowed::Near<'a>),
    /// Starting where the ends of its head (these, with the head's
    /// shortest and longest match) propose ([`headed`]).
    Starts(&'a [usize], (usize, usize)),
    /// Anywhere before this point: searched whole.
    Whole(usize),
}

/// A codon's values among its pattern's matches `spans` ([§16.1](docs/codons.md#s16-1)): the
/// group's span, when it took part, if the value passes the codon's
/// checks. A dropped match lets no overlapping later one through: the
/// matches were found before any was judged. `scan` is the text's
/// context scan, with the codon's place in its program.
#[allow(clippy::too_many_arguments)]
fn values(
    codon: &crate::program::Codon,
    affixes: Option<&pattern::affixes::Affixes>,
    re: &Regex,
    cache: &mut Cache,
    caps: &mut Option<regex_automata::util::captures::Captures>,
    text: &str,
    (scan, index): (&mut ContextScan<'_>, usize),
    mut spans: Vec<(usize, usize)>,
) -> Vec<(usize, usize)> {
    let mut caps = codon
        .group
        .filter(|_| !affixes.is_some_and(pattern::affixes::Affixes::always))
        .map(|_| caps.get_or_insert_with(|| re.create_captures()));
    // The values overwrite the matches they come from, in order.
    let mut kept = 0;
    for k in 0..spans.len() {
        let found = value_span(
            codon,
            affixes,
            re,
            cache,
            caps.as_deref_mut(),
            text,
            spans[k],
            Some((&mut *scan, index)),
        );
        if let Some(v) = found {
            spans[kept] = v;
            kept += 1;
        }
    }
    spans.truncate(kept);
    spans
}

/// The value of the codon's match `text[s..e]`, if it counts: its group's
/// span (read off the match with `affixes` when its pattern has them,
/// else with `caps`, the codon's captures) or the whole match, through
/// the codon's checks.
#[allow(clippy::too_many_arguments)]
fn value_span(
    codon: &crate::program::Codon,
    affixes: Option<&pattern::affixes::Affixes>,
    re: &Regex,
    cache: &mut Cache,
    caps: Option<&mut regex_automata::util::captures::Captures>,
    text: &str,
    (s, e): (usize, usize),
    scan: Option<(&mut ContextScan<'_>, usize)>,
) -> Option<(usize, usize)> {
    let read = affixes.and_then(|a| a.group_of(text, s, e));
    let (vs, ve) = match (codon.group, read, caps) {
        (Some(_), Some(span), _) => span,
        (Some(g), None, Some(caps)) => {
            // The leftmost-first match that starts at `s` and ends by `e`
            // is the one found; look-around still sees the whole text.
            let input = Input::new(text).range(s..e).anchored(Anchored::Yes);
            re.search_captures_with(cache, &input, caps);
            let span = caps.get_group(g)?;
            (span.start, span.end)
        }
        _ => (s, e),
    };
    let counts = match scan {
        Some(scan) => codon.accepts_scanned(text, vs, ve, scan),
        None => codon.accepts(text, vs, ve),
    };
    (vs < ve && counts).then_some((vs, ve))
}

/// The deciding trigger: the first FATAL one, else the first WARNING one.
fn deciding(triggers: &[Trigger<'_>]) -> Option<usize> {
    triggers
        .iter()
        .position(|t| t.severity == Severity::Fatal)
        .or_else(|| {
            triggers
                .iter()
                .position(|t| t.severity == Severity::Warning)
        })
}

/// `re`'s leftmost-first match in `text[from..]` (the text before `from`
/// is look-behind context), with an explicit cache.
fn first_with(re: &Regex, cache: &mut Cache, text: &str, from: usize) -> Option<(usize, usize)> {
    re.search_with(cache, &Input::new(text).range(from..))
        .map(|m| (m.start(), m.end()))
}

/// `re.find_iter(input)` with an explicit cache: leftmost-first,
/// non-overlapping, empty matches handled as the `regex` crate does.
fn find_iter_with(re: &Regex, cache: &mut Cache, input: Input<'_>) -> Vec<(usize, usize)> {
    let mut searcher = Searcher::new(input);
    let mut out = Vec::new();
    while let Some(m) =
        searcher.advance(|i| Ok::<Option<Match>, MatchError>(re.search_with(cache, i)))
    {
        out.push((m.start(), m.end()));
    }
    out
}

fn validate(v: Validator, s: &str) -> bool {
    match v {
        Validator::None => true,
        Validator::Luhn => luhn(s),
        Validator::Ssn => ssn_ok(s),
    }
}

/// Luhn over the ASCII digits of `s` (others ignored); needs two digits.
pub fn luhn(s: &str) -> bool {
    let mut sum = 0u32;
    let mut count = 0usize;
    for b in s.bytes().rev().filter(u8::is_ascii_digit) {
        let d = u32::from(b - b'0');
        sum += if count % 2 == 1 {
            let x = d * 2;
            if x > 9 {
                x - 9
            } else {
                x
            }
        } else {
            d
        };
        count += 1;
    }
    count >= 2 && sum.is_multiple_of(10)
}

/// The reference SSN look-aheads: area not 000, 666 or 9xx; group not 00;
/// serial not 0000. `s` is a `ddd-dd-dddd` match.
fn ssn_ok(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 11 {
        return false;
    }
    let area = &b[0..3];
    area != b"000" && area != b"666" && area[0] != b'9' && &b[4..6] != b"00" && &b[7..11] != b"0000"
}

/// Converts sorted byte spans to code-point spans.
fn code_point_spans(text: &str, spans: &[(usize, usize)], ascii: bool) -> Vec<[usize; 2]> {
    if ascii {
        return spans.iter().map(|&(s, e)| [s, e]).collect();
    }
    let mut out = Vec::with_capacity(spans.len());
    let (mut byte_pos, mut cp_pos) = (0usize, 0usize);
    for &(s, e) in spans {
        // Starts are sorted, so the running count only moves forward.
        cp_pos += text[byte_pos..s].chars().count();
        byte_pos = s;
        out.push([cp_pos, cp_pos + text[s..e].chars().count()]);
    }
    out
}

/// A redaction item: byte span, sort key (trigger order, codon), placeholder.
type Item<'a> = (usize, usize, (usize, usize), &'a str);

/// The [§6.3](docs/evaluation.md#s6-3) sweep: sorts `items` by start, then end descending, then key, and
/// merges overlapping ones into regions `(start, end, placeholder)`, the
/// placeholder being that of the region's first item.
fn sweep<'a>(items: &mut [Item<'a>]) -> Vec<(usize, usize, &'a str)> {
    items.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
    let mut regions: Vec<(usize, usize, &'a str)> = Vec::new();
    for &(s, e, _, placeholder) in items.iter() {
        match regions.last_mut() {
            Some(last) if s < last.1 => last.1 = last.1.max(e),
            _ => regions.push((s, e, placeholder)),
        }
    }
    regions
}

/// A region of a text that a placeholder replaces ([§6.3](docs/evaluation.md#s6-3)): bytes
/// `start..end`. The placeholder is borrowed (`&str`) where the region is
/// written at once, owned (`String`) where it waits (a stream's regions
/// mapped to the original text).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Region<P> {
    start: usize,
    end: usize,
    placeholder: P,
}

/// Writes `text[from..to]` with every region inside it replaced by its placeholder.
fn write_regions(out: &mut String, text: &str, from: usize, to: usize, regions: &[Region<&str>]) {
    let mut pos = from;
    for r in regions {
        out.push_str(&text[pos..r.start]);
        out.push_str(r.placeholder);
        pos = r.end;
    }
    out.push_str(&text[pos..to]);
}

/// One matcher's redaction spans (sorted by start, non-overlapping, as
/// [`find_iter_with`] yields them), its sweep key and its placeholder.
type Spans<'s, 'a> = (&'s [(usize, usize)], (usize, usize), &'a str);

/// Above this many sources, [`merge_regions`] sorts items instead of
/// merging lists (a merge step scans every list's head).
const MERGE_SOURCES: usize = 8;

/// The [§6.3](docs/evaluation.md#s6-3) sweep of [`sweep`] over `sources` without building its items:
/// each source is already sorted, and no two sources share a key, so merging
/// them by (start, end descending, key) gives the order the sort gives, and
/// the same regions, each passed to `emit` as (start, end, placeholder).
/// With many sources, this is [`sweep`] itself.
fn merge_regions<'a>(sources: &[Spans<'_, 'a>], mut emit: impl FnMut(usize, usize, &'a str)) {
    if sources.len() > MERGE_SOURCES {
        let mut items: Vec<Item<'a>> = sources
            .iter()
            .flat_map(|&(spans, key, p)| spans.iter().map(move |&(s, e)| (s, e, key, p)))
            .collect();
        for (s, e, p) in sweep(&mut items) {
            emit(s, e, p);
        }
        return;
    }
    if let [(spans, _, placeholder)] = sources {
        // One source's spans never overlap: each is its own region.
        for &(s, e) in *spans {
            emit(s, e, placeholder);
        }
        return;
    }
    let mut heads = vec![0usize; sources.len()];
    let mut current: Option<(usize, usize, &'a str)> = None;
    loop {
        // The next item in sweep order: (start, end descending, key).
        let mut best: Option<(usize, usize, usize)> = None;
        for (i, &(spans, key, _)) in sources.iter().enumerate() {
            let Some(&(s, e)) = spans.get(heads[i]) else {
                continue;
            };
            let better = best.is_none_or(|(b, bs, be)| {
                (s, std::cmp::Reverse(e), key) < (bs, std::cmp::Reverse(be), sources[b].1)
            });
            if better {
                best = Some((i, s, e));
            }
        }
        let Some((i, s, e)) = best else {
            break;
        };
        heads[i] += 1;
        match current.as_mut() {
            Some(last) if s < last.1 => last.1 = last.1.max(e),
            _ => {
                if let Some((s0, e0, p0)) = current.replace((s, e, sources[i].2)) {
                    emit(s0, e0, p0);
                }
            }
        }
    }
    if let Some((s, e, p)) = current {
        emit(s, e, p);
    }
}

/// Replaces WARNING matches by placeholders, merging overlaps ([§6.3](docs/evaluation.md#s6-3)).
/// With a `view`, the sources are spans of the view: the regions are swept
/// there, then mapped to `text` and merged again where they meet.
fn redact(text: &str, view: Option<&normalize::View>, sources: &[Spans<'_, '_>]) -> String {
    match view {
        Some(v) => {
            let mut mapped = Vec::new();
            merge_regions(sources, |s, e, p| {
                let (s, e) = v.map.span(s, e);
                normalize::push_region(&mut mapped, s, e, p);
            });
            let mut out = String::with_capacity(text.len());
            write_regions(&mut out, text, 0, text.len(), &mapped);
            out
        }
        None => {
            // Room for every placeholder: the text is written once, never
            // moved by a reallocation.
            let room: usize = sources
                .iter()
                .map(|(spans, _, p)| spans.len().saturating_mul(p.len()))
                .fold(text.len(), usize::saturating_add);
            let mut out = String::with_capacity(room);
            let mut pos = 0;
            merge_regions(sources, |s, e, placeholder| {
                if pos < s {
                    out.push_str(&text[pos..s]);
                }
                out.push_str(placeholder);
                pos = e;
            });
            out.push_str(&text[pos..]);
            out
        }
    }
}

#[cfg(test)]
mod tests;
