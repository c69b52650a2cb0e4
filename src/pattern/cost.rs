//! The pattern cost check of [§11.4](docs/limits.md#s11-4): a deterministic measure of the
//! work a pattern makes the engine do on adversarial texts, computed at
//! compile and at load. It reads only the pattern (never a payload, never
//! the engine's caches) and its reasons never quote the pattern.
//!
//! # Why a count, not a clock
//!
//! Timing probes is noisy on a shared machine and depends on the build
//! profile (a debug build is 10–50× slower). This check instead counts the
//! work of the engine's own search algorithm, which is the same in every
//! build and under any load:
//!
//! The engine finds a rule's matches with `find_iter` over a
//! `regex_automata::meta::Regex` ([§6.1](docs/evaluation.md#s6-1)). Whatever literal shortcuts
//! the meta regex takes, its core is a lazy DFA: a forward leftmost-first
//! search reads bytes until the automaton is *dead* (no higher-priority
//! match can still come), then a reverse search reads back to the match's
//! start. This module builds that pair of lazy DFAs from the same NFA
//! (same syntax, size limit and DFA configuration as [`super::build`],
//! without prefilters, which only ever skip work) and drives `find_iter`
//! itself over small probe texts, counting with the DFA caches' own
//! counters (`search_total_len`, `memory_usage`):
//!
//! - **transitions**, bytes read forward and backward, per byte of probe:
//!   a cached DFA transition costs about the same in every search (1–3 ns
//!   in release), so this is the search's cost per payload byte. At most
//!   [`MAX_SCAN_FACTOR`]. A bounded rescan (`[a-z]{1,30}X|[a-z]`: every
//!   search reads 30 letters looking for an `X`, then reports one) shows
//!   up here;
//! - **unbounded overscan**: a search that reports a match but is still
//!   alive at the end of the probe, at least [`MAX_OVERSCAN`] bytes past
//!   that match, and then a next search that does the same. That is
//!   quadratic match iteration (`[a-z]+X|[a-z]{100}`: each search reads to
//!   the end of the run of letters, then reports 100 of them): its factor
//!   is only 22 on a 4 KiB probe but 5,000 on 1 MiB, so it is refused on
//!   sight, whatever the probe's factor. One such search alone is not
//!   (`ab[c-z]*X|ab` on `abccc…`: the next search finds no other match
//!   there);
//! - **DFA states**: the probes share one cache per automaton, as large as
//!   the engine's ([`STATE_BUDGET`]), that may never be cleared. Nested
//!   counted repetition (`(a{1,100}){1,100}b`) makes every byte a new DFA
//!   state of thousands of NFA states: the engine's cache thrashes, its lazy
//!   DFA gives up and the search falls back to an NFA simulation that costs
//!   ~100 µs a byte. Outgrowing the budget stops the check at once. Then,
//!   with the cache warm, fresh pseudo-random texts may make it build at
//!   most [`MAX_STATE_GROWTH`] bytes of states per byte: an automaton that
//!   keeps growing (`[ab]*a[ab]{16}`, `[a-z]{1,40}x[a-z]{1,40}`, 70–80 bytes
//!   a byte) thrashes on a long payload the same way;
//! - **match density**: the engine pays for every search call and every
//!   match, not only for the bytes its automata read. Each probe's counts
//!   become an estimated engine time per byte: transitions, search calls (a lazy-DFA search, or a literal
//!   search for an exact set of literals, which the meta regex finds
//!   without its automata), non-empty matches, and, for a pattern with
//!   `\b`, the guided search's confirmation of each exact match (the same
//!   runs after a non-ASCII character). At most [`MAX_NS_PER_BYTE`]
//!   (100 ms for 1 MiB): `a[b-z]*X|a` or `[a-z]` (a match at every letter,
//!   95–125 ms on 1 MiB of `a`) and `\b\w\b` (140 ms on `é é é …`) are
//!   refused, `x` (a literal, 50–60 ms) and `\b\d{4}\b` are not. The
//!   prices were measured in release builds (BENCHMARKS.md); they are the
//!   one part of the check that is a model, not a count.
//!
//! # Probes
//!
//! Built from the pattern itself, a few KiB each: runs of one byte from
//! each of the DFA's byte classes (an ASCII representative of every set of
//! bytes the pattern tells apart); sample matches derived from its syntax
//! (each alternative, repetitions at their minimum and one more) repeated
//! back to back, with their last character dropped (so a higher-priority
//! alternative stays alive without completing), with a space or an `é`
//! after each; a sample's beginning followed by a long run of one of its
//! characters; and pseudo-random texts over those alphabets. ASCII probes
//! run the exact pattern (what the engine runs on ASCII text) and every
//! probe runs the word-boundary-free filter when there is one (what
//! proposes matches on other text). The check stops at the first limit
//! broken, and costs 1–30 ms a pattern, up to ~250 ms for one it refuses
//! for its states (debug build; `regex-automata` is optimised in debug
//! builds too, see `Cargo.toml`).
//!
//! # Per pack
//!
//! The engine runs every custom rule and the six codons over the same
//! payload, so a pack costs the sum of its patterns: ten rules that each
//! match every `x` pass one by one and take ten times as long together.
//! [`check_pack`] runs every pattern of a pack over every probe text of the
//! others (and random texts over all their alphabets), prices each as above,
//! counts nothing for a pattern whose required bytes a text lacks (the
//! engine's first pass skips it) or that the engine's combined pass, run on
//! the same probe and priced by the ends it reports, leaves out, and holds
//! the sum to the same limit.
//!
//! # What it does not bound
//!
//! The thresholds keep one accepted rule's search within about 100 ms on
//! its worst 1 MiB probe, where the refused ones take from 0.2 s to over an
//! hour (BENCHMARKS.md, "Pattern cost ([§11.4](docs/limits.md#s11-4))"). A probe can only show
//! what it contains: this is a measure on chosen adversarial texts, not a
//! proof over every text. The guided search's rejected proposals are not
//! priced: that path is bounded by construction instead, for the shapes
//! that cost it most (a `\b` that begins every match, or ends some
//! alternatives), and by a work budget past which it runs the plain search
//! (`src/engine/guided.rs`).

use super::{NEST_LIMIT, PATTERN_SIZE_LIMIT};
use regex_automata::hybrid::dfa;
use regex_automata::hybrid::regex::{Cache, Regex as Lazy};
use regex_automata::nfa::thompson::{self, WhichCaptures};
use regex_automata::util::iter::Searcher;
use regex_automata::{Input, MatchErrorKind, MatchKind};
use regex_syntax::hir::{literal, Class, Hir, HirKind};

/// Most DFA transitions (forward and reverse) per probe byte.
pub const MAX_SCAN_FACTOR: usize = 8;
/// The most a probe byte may cost in the engine's estimated time, in
/// nanoseconds: 100 ms for 1 MiB ([§11.4](docs/limits.md#s11-4)).
pub const MAX_NS_PER_BYTE: usize = 95;
/// Estimated cost of one DFA transition (a cached lazy-DFA step), in ns.
const NS_PER_TRANSITION: usize = 3;
/// Estimated fixed cost of one search call of the engine's regex, in ns:
/// a lazy-DFA search forward then backward, or (for a pattern that is an
/// exact set of literals) a literal search alone.
const NS_PER_SEARCH: usize = 60;
/// [`NS_PER_SEARCH`] for an exact set of literals.
const NS_PER_LITERAL_SEARCH: usize = 20;
/// Estimated cost of a match on non-ASCII text for a pattern with `\b`, on
/// top of its proposal's search: the engine's guided search bounds the
/// start the boundary-free filter proposed and confirms it with an anchored
/// NFA search (measured 250 to 400 ns a match in all, BENCHMARKS.md).
const NS_PER_GUIDED_MATCH: usize = 250;
/// Estimated cost of what the engine does for each non-empty match (its
/// span, validation, trigger count, redaction), in ns.
const NS_PER_MATCH: usize = 40;
/// The first pass of one of a pack's patterns over a text, per byte, in ns
/// ([`check_pack`]): a plain scan that literal prefilters mostly skip.
pub const NS_PER_PASS_BYTE: usize = 1;
/// One combined pass ([`super::ends::pass`]) over a text, per byte, in ns
/// (measured 1.7 ns, [`super::SET_THRESHOLD`]).
pub const NS_PER_SET_BYTE: usize = 2;
/// Each match end the combined pass reports, in ns (measured: BENCHMARKS.md,
/// "One pass, then only where matches end").
pub const NS_PER_END: usize = 16;
/// A steady-state text may make the DFA build at most this many bytes of
/// new states per byte of text.
pub const MAX_STATE_GROWTH: usize = 16;
/// An overscan this long that reaches the end of the probe is unbounded.
pub const MAX_OVERSCAN: usize = 256;
/// Bytes of lazy-DFA states (per direction) the probes may build: the
/// engine's own cache ([`super::PATTERN_DFA_LIMIT`]), which must never have
/// to be cleared.
pub const STATE_BUDGET: usize = super::PATTERN_DFA_LIMIT;
/// Length of a probe text (longer when the pattern's samples are long).
pub const PROBE_LEN: usize = 2048;
/// Longest probe text.
const MAX_PROBE_LEN: usize = 16 << 10;
/// Samples kept per syntax node.
const MAX_SAMPLES: usize = 8;
/// Longest sample kept.
const MAX_SAMPLE_LEN: usize = 6 << 10;
/// Byte-class representatives turned into runs.
const MAX_RUNS: usize = 32;

/// What the probes measured for an accepted pattern.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CostReport {
    /// Probe texts run (each through one or two automata).
    pub probes: usize,
    /// The worst probe's transitions per byte, in hundredths.
    pub scan_factor_centi: usize,
    /// The worst probe's estimated engine time per byte, in ns
    /// (transitions, search calls and matches at their measured prices).
    pub ns_per_byte: usize,
    /// The longest overscan of any search, in bytes.
    pub overscan: usize,
    /// Bytes of lazy-DFA states built over all probes (both directions).
    pub state_bytes: usize,
    /// Most bytes of states built by one steady-state text.
    pub steady_state_bytes: usize,
}

impl CostReport {
    /// Records one probe run and its estimated engine time `ns` over the
    /// probe's `len` bytes.
    fn note(&mut self, run: &Run, ns: usize, len: usize) {
        self.scan_factor_centi = self.scan_factor_centi.max(run.transitions * 100 / len);
        self.overscan = self.overscan.max(run.overscan);
        self.ns_per_byte = self.ns_per_byte.max(ns / len);
    }
}

/// Why a pattern is too costly, for people: never quotes the pattern.
fn too_costly(why: &str) -> String {
    format!("is too costly to evaluate (SPEC §11.4): {why}")
}

/// Measures `exact` (and `filter`, its word-boundary-free form, when it
/// differs) on the probe texts; `Err` is the reason it is too costly.
pub fn check(exact: &str, filter: Option<&str>) -> Result<CostReport, String> {
    let parse = |src: &str| {
        regex_syntax::ParserBuilder::new()
            .nest_limit(NEST_LIMIT)
            .build()
            .parse(src)
            .map_err(|_| "is not a valid regular expression".to_string())
    };
    let exact_hir = parse(exact)?;
    let filter_hir = filter.map(parse).transpose()?;
    let exact_model = Model::new(&exact_hir)?;
    let filter_model = filter_hir.as_ref().map(Model::new).transpose()?;

    let probes = probe_texts(
        filter_hir.as_ref().unwrap_or(&exact_hir),
        &exact_model,
        None,
    );
    let mut report = CostReport::default();
    let mut exact_cache = exact_model.re.create_cache();
    let mut filter_cache = filter_model.as_ref().map(|m| m.re.create_cache());
    // The engine's own regex, to count the exact matches of a non-ASCII
    // probe (which the lazy DFA cannot run): built on the first one.
    let mut meta: Option<regex_automata::meta::Regex> = None;
    for text in &probes.texts {
        let len = text.len().max(1);
        // The exact pattern runs on ASCII text (or on any, when it has no
        // word boundary); the filter proposes matches on non-ASCII text,
        // which may hold the same runs as an ASCII probe.
        let mut exact_matches = None;
        if text.is_ascii() || filter_model.is_none() {
            let run = exact_model.run(&mut exact_cache, text)?;
            let ns = run.transitions * NS_PER_TRANSITION
                + run.searches * exact_model.ns_per_search
                + run.matches * NS_PER_MATCH;
            report.note(&run, ns, len);
            exact_matches = Some(run.matches);
        }
        if let (Some(model), Some(cache)) = (&filter_model, &mut filter_cache) {
            let run = model.run(cache, text)?;
            // After a non-ASCII character, every exact match of these runs
            // is a proposal the guided search confirms.
            let confirmed = match exact_matches {
                Some(m) => m,
                None => {
                    if meta.is_none() {
                        meta = Some(super::build(exact)?);
                    }
                    meta.as_ref().map_or(0, |re| {
                        re.find_iter(text.as_str())
                            .filter(|m| !m.is_empty())
                            .count()
                    })
                }
            };
            let ns = run.transitions * NS_PER_TRANSITION
                + run.searches * NS_PER_SEARCH
                + confirmed * (NS_PER_GUIDED_MATCH + NS_PER_MATCH);
            report.note(&run, ns, len);
        }
        report.probes += 1;
    }
    // Checked once every probe ran, so that a search that reads too much
    // (a sharper reason) is reported first.
    if report.ns_per_byte > MAX_NS_PER_BYTE {
        return Err(too_costly(&format!(
            "it matches so densely on an adversarial text that the engine would spend about {} ns per byte on its searches and matches (at most {MAX_NS_PER_BYTE}: 100 ms for 1 MiB)",
            report.ns_per_byte
        )));
    }
    // Steady state: fresh pseudo-random texts after the warm-up of the
    // probes above. A DFA that still builds states at this rate would
    // outgrow the engine's cache on a long payload, or spend its time
    // building states.
    let steady_len = 4 * PROBE_LEN;
    for (i, text) in steady_texts(&probes.alphabet, &probes.inner, steady_len)
        .iter()
        .enumerate()
    {
        let before =
            exact_cache.memory_usage() + filter_cache.as_ref().map_or(0, Cache::memory_usage);
        if text.is_ascii() || filter_model.is_none() {
            exact_model.run(&mut exact_cache, text)?;
        }
        if let (Some(model), Some(cache)) = (&filter_model, &mut filter_cache) {
            model.run(cache, text)?;
        }
        if i < 2 {
            continue; // the first two only warm the states up
        }
        let after =
            exact_cache.memory_usage() + filter_cache.as_ref().map_or(0, Cache::memory_usage);
        let grown = after.saturating_sub(before);
        report.steady_state_bytes = report.steady_state_bytes.max(grown);
        if grown > MAX_STATE_GROWTH * text.len() {
            return Err(too_costly(&format!(
                "its search automaton keeps building new states on an adversarial text ({grown} bytes of states for {} bytes, more than {MAX_STATE_GROWTH} per byte): on a long payload it would outgrow the engine's cache",
                text.len()
            )));
        }
    }
    report.state_bytes =
        exact_cache.memory_usage() + filter_cache.as_ref().map_or(0, Cache::memory_usage);
    Ok(report)
}

/// One pattern of a pack, as the pack check ([`check_pack`]) measures it.
/// Its `Debug` shows sizes, never the pattern.
#[derive(Clone, Copy)]
pub struct PackPattern<'a> {
    /// Its exact form (as [`super::CompiledPattern::exact_src`]).
    pub exact: &'a str,
    /// Its word-boundary-free form, when it differs.
    pub filter: Option<&'a str>,
    /// What the engine's pass over ASCII text runs for it, when that
    /// differs from its exact form: its head ([`super::heads`]), or else
    /// its form with ASCII word boundaries (as
    /// [`super::CompiledPattern::ascii_words`]).
    pub ascii_words: Option<&'a str>,
    /// Bytes of which every match holds one (the engine's first pass rules
    /// the pattern out of a payload holding none of them).
    pub required: Option<&'a [u8]>,
    /// Strings of which every match holds one ([`super::literals`]).
    pub literals: Option<&'a super::literals::Literals>,
}

impl std::fmt::Debug for PackPattern<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackPattern")
            .field("exact", &crate::redacted::Redacted::of(self.exact))
            .field("filter", &self.filter.map(crate::redacted::Redacted::of))
            .field(
                "ascii_words",
                &self.ascii_words.map(crate::redacted::Redacted::of),
            )
            .field("required", &self.required.map(<[u8]>::len))
            .field("literals", &self.literals.map(|l| l.set.len()))
            .finish()
    }
}

/// What the pack check measured on the probe text that cost the pack most.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackCost {
    /// Probe texts run through every pattern.
    pub probes: usize,
    /// The estimated engine time per byte of every pattern together, in ns.
    pub ns_per_byte: usize,
    /// Each pattern's part of it, in ns per byte, in the order given.
    pub shares: Vec<usize>,
}

/// Why a pack is too costly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PackCostError {
    /// Pattern `index` broke a limit of [`check`] on a probe text of
    /// another pattern of the pack (a reason for people, as [`check`]'s).
    Pattern {
        /// Its place in the patterns given.
        index: usize,
        /// Why.
        why: String,
    },
    /// Every pattern passes alone, but together they cost more than
    /// [`MAX_NS_PER_BYTE`] on one probe text.
    Together(PackCost),
}

/// The pack check of [§11.4](docs/limits.md#s11-4): the engine runs every rule and codon of a
/// pack over the same payload, so their costs add up. Each pattern's probe
/// texts (and pseudo-random texts over all their alphabets) are run through
/// every pattern, priced as the engine spends on a pack:
///
/// - a pattern whose required bytes a text lacks costs nothing (the
///   engine's first pass rules it out);
/// - above [`super::SET_THRESHOLD`] candidates, the engine's combined pass
///   ([`super::ends::pass`], run here on the probe: [`NS_PER_SET_BYTE`] and
///   [`NS_PER_END`] for each end it reports) leaves only the patterns that
///   match; where it reports more ends than its budget allows it leaves
///   them all (the engine's windowed searches near those ends cost less
///   than the whole-text searches priced here);
/// - a pattern's first pass over the text costs [`NS_PER_PASS_BYTE`] a
///   byte (a plain scan, which literal prefilters mostly skip: measured 30
///   rules on 1 MiB of prose in 4 ms, BENCHMARKS.md); what its searches
///   read again costs `NS_PER_TRANSITION` a byte, and its search calls and
///   matches what they cost in [`check`].
///
/// The sum is held to the limit of one pattern. Ten rules that each match
/// every `x` cost ten times one (640 ns a byte; measured: 1.5 to 2.2 s for 1 MiB).
pub fn check_pack(patterns: &[PackPattern<'_>]) -> Result<PackCost, PackCostError> {
    let mut measured = Vec::with_capacity(patterns.len());
    let mut texts: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut alphabet: Vec<char> = Vec::new();
    let mut inner: Vec<char> = Vec::new();
    for (index, p) in patterns.iter().enumerate() {
        let fail = |why: String| PackCostError::Pattern { index, why };
        let (m, hir) = Measured::new(p).map_err(fail)?;
        let probes = probe_texts(&hir, &m.exact, None);
        for t in probes.texts {
            if seen.insert(t.clone()) {
                texts.push(t);
            }
        }
        for (from, to) in [
            (&probes.alphabet, &mut alphabet),
            (&probes.inner, &mut inner),
        ] {
            for &c in from {
                if !to.contains(&c) && to.len() < 96 {
                    to.push(c);
                }
            }
        }
        measured.push(m);
    }
    // Texts no single pattern's probes hold: one pattern's characters
    // among another's.
    for t in [
        random_text(&alphabet, PROBE_LEN, 11),
        random_text(&inner, PROBE_LEN, 12),
    ] {
        if seen.insert(t.clone()) {
            texts.push(t);
        }
    }
    // The engine's combined pass, run on the same probes.
    let forms: Vec<&str> = patterns
        .iter()
        .map(|p| p.filter.unwrap_or(p.exact))
        .collect();
    let union = super::ends::Tree::build(&forms);
    let mut union_caches = union.create_caches();
    let ascii_forms: Vec<&str> = patterns
        .iter()
        .map(|p| p.ascii_words.unwrap_or(p.exact))
        .collect();
    let ascii_union = super::ends::Tree::root(&ascii_forms);
    let mut ascii_caches = ascii_union.create_caches();
    // The engine's scan for required literals ([`super::literals`]), priced
    // as a pass: it runs whenever a candidate has literals, and each
    // occurrence it reads costs as an end does. Its narrowing is not
    // credited (the prices stay an upper bound).
    let literals = super::literals::Scanner::new(patterns.iter().map(|p| p.literals));
    let mut worst = PackCost {
        probes: texts.len(),
        ns_per_byte: 0,
        shares: vec![0; patterns.len()],
    };
    for text in &texts {
        let len = text.len().max(1);
        let mut priced = Vec::with_capacity(measured.len());
        for (index, m) in measured.iter_mut().enumerate() {
            priced.push(
                m.priced_on(text)
                    .map_err(|why| PackCostError::Pattern { index, why })?,
            );
        }
        let candidates = priced.iter().filter(|p| p.is_some()).count();
        let (kept, pass_ns) = if candidates > super::SET_THRESHOLD {
            if text.is_ascii() {
                narrowed(&ascii_union, &mut ascii_caches, text, patterns.len())
            } else {
                narrowed(&union, &mut union_caches, text, patterns.len())
            }
        } else {
            (None, 0)
        };
        let shares: Vec<usize> = priced
            .iter()
            .enumerate()
            .map(|(i, p)| match p {
                Some(ns) if kept.as_ref().is_none_or(|k| k[i]) => ns / len,
                _ => 0,
            })
            .collect();
        let scan_ns = literals.as_ref().map_or(0, |scanner| {
            let candidates = priced.iter().enumerate().filter(|(_, p)| p.is_some());
            let mut mask = super::literals::mask_of(patterns.len(), candidates.map(|(i, _)| i));
            let budget = len / super::ends::BYTES_PER_END;
            if !scanner.gates(&mask) {
                return 0;
            }
            let reads = scanner.narrow(text.as_bytes(), &mut mask, budget);
            NS_PER_PASS_BYTE + reads.min(budget) * NS_PER_END / len
        });
        let total = shares.iter().sum::<usize>() + pass_ns + scan_ns;
        if total > worst.ns_per_byte {
            worst.ns_per_byte = total;
            worst.shares = shares;
        }
    }
    if worst.ns_per_byte > MAX_NS_PER_BYTE {
        return Err(PackCostError::Together(worst));
    }
    Ok(worst)
}

/// What the engine's combined passes ([`super::ends::Tree::run`]) leave
/// of a pack's `patterns` on `text` (`None`: all of them) and what they
/// cost a byte: [`NS_PER_SET_BYTE`] for each pass that runs (one that gives
/// up is priced as if it read the whole text) and [`NS_PER_END`] for each
/// end they report. They run without the engine's base budget of ends, as
/// on a text long enough for the base not to count: a text denser in ends
/// stops them at one end every [`super::ends::BYTES_PER_END`] bytes.
fn narrowed(
    union: &super::ends::Tree,
    caches: &mut super::ends::TreeCaches,
    text: &str,
    patterns: usize,
) -> (Option<Vec<bool>>, usize) {
    if union.is_empty() {
        return (None, 0);
    }
    let lens = vec![None; patterns];
    let found = union.run(caches, text, &lens, 0, !text.is_ascii());
    let ns = found.passes * NS_PER_SET_BYTE + found.count * NS_PER_END / text.len().max(1);
    let kept = found
        .known
        .iter()
        .zip(&found.seen)
        .map(|(&known, &seen)| !known || seen)
        .collect();
    (Some(kept), ns)
}

/// One pattern of a pack with its automata and their caches.
struct Measured {
    exact: Model,
    filter: Option<Model>,
    exact_src: String,
    /// The engine's own regex, for the exact matches of a non-ASCII text.
    meta: Option<regex_automata::meta::Regex>,
    exact_cache: Cache,
    filter_cache: Option<Cache>,
    required: Option<[bool; 256]>,
}

impl Measured {
    fn new(p: &PackPattern<'_>) -> Result<(Self, Hir), String> {
        let parse = |src: &str| {
            regex_syntax::ParserBuilder::new()
                .nest_limit(NEST_LIMIT)
                .build()
                .parse(src)
                .map_err(|_| "is not a valid regular expression".to_string())
        };
        let exact_hir = parse(p.exact)?;
        let filter_hir = p.filter.map(parse).transpose()?;
        let exact = Model::new(&exact_hir)?;
        let filter = filter_hir.as_ref().map(Model::new).transpose()?;
        let required = p.required.map(|bytes| {
            let mut set = [false; 256];
            for &b in bytes {
                set[usize::from(b)] = true;
            }
            set
        });
        let m = Self {
            exact_cache: exact.re.create_cache(),
            filter_cache: filter.as_ref().map(|f| f.re.create_cache()),
            exact,
            filter,
            exact_src: p.exact.to_string(),
            meta: None,
            required,
        };
        Ok((m, filter_hir.unwrap_or(exact_hir)))
    }

    /// The estimated engine time of this pattern on `text` as one of a
    /// pack's ([`check_pack`]; the dearer of its two searches), in ns;
    /// `None` when the engine would not search it at all.
    fn priced_on(&mut self, text: &str) -> Result<Option<usize>, String> {
        if let Some(set) = &self.required {
            if !text.bytes().any(|b| set[usize::from(b)]) {
                return Ok(None);
            }
        }
        let len = text.len();
        // One pass is a plain scan; what the searches read again is priced
        // as in `check`.
        let reading = |transitions: usize| {
            transitions.min(len) * NS_PER_PASS_BYTE
                + transitions.saturating_sub(len) * NS_PER_TRANSITION
        };
        // Many more texts run here than in one pattern's check: the states
        // they build are dropped before they reach the budget (the check of
        // the pattern alone bounds how fast they grow).
        if self.exact_cache.memory_usage() > STATE_BUDGET / 2 {
            self.exact_cache.reset(&self.exact.re);
        }
        let mut ns = 0;
        let mut exact_matches = None;
        if text.is_ascii() || self.filter.is_none() {
            let run = self.exact.run(&mut self.exact_cache, text)?;
            ns = reading(run.transitions)
                + run.searches * self.exact.ns_per_search
                + run.matches * NS_PER_MATCH;
            exact_matches = Some(run.matches);
        }
        if let (Some(model), Some(cache)) = (&self.filter, &mut self.filter_cache) {
            if cache.memory_usage() > STATE_BUDGET / 2 {
                cache.reset(&model.re);
            }
            let run = model.run(cache, text)?;
            let confirmed = match exact_matches {
                Some(m) => m,
                None => {
                    if self.meta.is_none() {
                        self.meta = Some(super::build(&self.exact_src)?);
                    }
                    self.meta
                        .as_ref()
                        .map_or(0, |re| re.find_iter(text).filter(|m| !m.is_empty()).count())
                }
            };
            let filter_ns = reading(run.transitions)
                + run.searches * NS_PER_SEARCH
                + confirmed * (NS_PER_GUIDED_MATCH + NS_PER_MATCH);
            ns = ns.max(filter_ns);
        }
        Ok(Some(ns))
    }
}

/// Whether the meta regex searches `hir` with literal searches alone: an
/// exact, finite set of prefixes (as it extracts them), no capture group,
/// no look-around.
fn is_literal_set(hir: &Hir) -> bool {
    let props = hir.properties();
    if props.explicit_captures_len() != 0 || !props.look_set().is_empty() {
        return false;
    }
    let mut extractor = literal::Extractor::new();
    extractor.kind(literal::ExtractKind::Prefix);
    let mut prefixes = extractor.extract(hir);
    prefixes.optimize_for_prefix_by_preference();
    prefixes.is_exact()
}

/// Fresh pseudo-random texts over the probes' alphabets: two to warm the
/// DFA states up, two more to measure how many it still builds.
fn steady_texts(alphabet: &[char], inner: &[char], len: usize) -> [String; 4] {
    [
        random_text(inner, len, 3),
        random_text(alphabet, len, 4),
        random_text(inner, len, 5),
        random_text(alphabet, len, 6),
    ]
}

/// The engine's search automata for one pattern, with the probe budget.
struct Model {
    re: Lazy,
    /// What one search call costs the engine, in ns: the meta regex skips
    /// its automata for an exact set of literals.
    ns_per_search: usize,
}

/// One probe's counts.
struct Run {
    transitions: usize,
    /// Search calls made.
    searches: usize,
    /// Non-empty matches reported.
    matches: usize,
    overscan: usize,
    /// Searches still reading at the end of the text, far past their match.
    unbounded: usize,
}

impl Model {
    fn new(hir: &Hir) -> Result<Self, String> {
        // The NFAs exactly as the meta regex compiles them ([§4.2](docs/formats.md#s4-2) limits).
        let config = thompson::Config::new()
            .nfa_size_limit(Some(PATTERN_SIZE_LIMIT))
            .shrink(false)
            .which_captures(WhichCaptures::All);
        fn too_big<E>(_: E) -> String {
            too_costly("its automaton is too large")
        }
        let nfa = thompson::Compiler::new()
            .configure(config.clone())
            .build_from_hir(hir)
            .map_err(too_big)?;
        let reverse = thompson::Compiler::new()
            .configure(config.which_captures(WhichCaptures::None).reverse(true))
            .build_from_hir(hir)
            .map_err(too_big)?;
        // The lazy DFA of the meta regex, with a small cache that may never
        // be cleared: outgrowing it ends the check (`gave up`).
        let dfa_config = dfa::Config::new()
            .match_kind(MatchKind::LeftmostFirst)
            .starts_for_each_pattern(true)
            .byte_classes(true)
            .unicode_word_boundary(true)
            .cache_capacity(STATE_BUDGET)
            .skip_cache_capacity_check(false)
            .minimum_cache_clear_count(Some(0))
            .minimum_bytes_per_state(None);
        let forward = dfa::Builder::new()
            .configure(dfa_config.clone())
            .build_from_nfa(nfa)
            .map_err(too_big)?;
        let reverse = dfa::Builder::new()
            .configure(dfa_config.match_kind(MatchKind::All))
            .build_from_nfa(reverse)
            .map_err(too_big)?;
        Ok(Self {
            re: regex_automata::hybrid::regex::Builder::new().build_from_dfas(forward, reverse),
            ns_per_search: if is_literal_set(hir) {
                NS_PER_LITERAL_SEARCH
            } else {
                NS_PER_SEARCH
            },
        })
    }

    /// `find_iter` over `text` as the engine runs it, counting; `Err` at the
    /// first limit broken.
    fn run(&self, cache: &mut Cache, text: &str) -> Result<Run, String> {
        let budget = MAX_SCAN_FACTOR.saturating_mul(text.len());
        let mut run = Run {
            transitions: 0,
            searches: 0,
            matches: 0,
            overscan: 0,
            unbounded: 0,
        };
        let mut searcher = Searcher::new(Input::new(text));
        loop {
            let mut over = None;
            let step = searcher.try_advance(|input| {
                let (f0, r0) = lengths(cache);
                let found = self.re.try_search(cache, input)?;
                run.searches += 1;
                run.matches += usize::from(found.is_some_and(|m| !m.is_empty()));
                let (f1, r1) = lengths(cache);
                let forward = f1.saturating_sub(f0);
                run.transitions += forward + r1.saturating_sub(r0);
                if let Some(m) = &found {
                    let read_to = input.start() + forward;
                    over = Some((read_to.saturating_sub(m.end()), read_to >= input.end()));
                }
                Ok(found)
            });
            match step {
                Ok(Some(_)) => {}
                Ok(None) => return Ok(run),
                Err(e) => {
                    return Err(match e.kind() {
                        MatchErrorKind::GaveUp { .. } => too_costly(&format!(
                            "its search automaton outgrows {} KiB of states on an adversarial text (the engine's lazy DFA would thrash and fall back to a slow search)",
                            STATE_BUDGET >> 10
                        )),
                        _ => too_costly("its search automaton cannot run on an adversarial text"),
                    })
                }
            }
            if let Some((over, to_end)) = over {
                run.overscan = run.overscan.max(over);
                if to_end && over >= MAX_OVERSCAN {
                    run.unbounded += 1;
                    if run.unbounded >= 2 {
                        return Err(too_costly(&format!(
                            "its searches keep reading to the end of an adversarial text, at least {MAX_OVERSCAN} bytes past each match they report, and each next search reads that again (quadratic match iteration)"
                        )));
                    }
                }
            }
            if run.transitions > budget {
                return Err(too_costly(&format!(
                    "its searches read more than {MAX_SCAN_FACTOR} bytes per byte of an adversarial text (quadratic match iteration)"
                )));
            }
        }
    }
}

/// Bytes searched so far by the forward and reverse lazy DFAs (no cache is
/// ever cleared during a check, so these only grow).
fn lengths(cache: &Cache) -> (usize, usize) {
    let (f, r) = cache.as_parts();
    (f.search_total_len(), r.search_total_len())
}

/// The probe texts of the check for `exact` (a pattern's exact form, as
/// [`super::CompiledPattern::exact_src`]), each of about `len` bytes: what
/// the benchmark of BENCHMARKS.md evaluates at 1 MiB.
pub fn adversarial_texts(exact: &str, len: usize) -> Result<Vec<String>, String> {
    let hir = regex_syntax::ParserBuilder::new()
        .nest_limit(NEST_LIMIT)
        .build()
        .parse(exact)
        .map_err(|_| "is not a valid regular expression".to_string())?;
    let model = Model::new(&hir)?;
    let probes = probe_texts(&hir, &model, Some(len));
    let mut texts = probes.texts;
    texts.extend(steady_texts(&probes.alphabet, &probes.inner, len));
    Ok(texts)
}

/// The probe texts and the alphabets they were drawn from.
struct Probes {
    texts: Vec<String>,
    /// Byte-class representatives, the samples' characters, a few others.
    alphabet: Vec<char>,
    /// The samples' characters only.
    inner: Vec<char>,
}

/// The probe texts for a pattern (`hir` for samples, `model` for its byte
/// classes), without duplicates, of about `len` bytes (by default as long
/// as the samples need).
fn probe_texts(hir: &Hir, model: &Model, len: Option<usize>) -> Probes {
    let samples: Vec<String> = samples(hir).into_iter().filter(|s| !s.is_empty()).collect();
    let longest = samples.iter().map(String::len).max().unwrap_or(0);
    let len =
        len.unwrap_or_else(|| (2 * longest + 2 * MAX_OVERSCAN).clamp(PROBE_LEN, MAX_PROBE_LEN));

    let classes = model.re.forward().byte_classes();
    let mut reps: Vec<char> = classes
        .representatives(0..=0x7f)
        .filter_map(|u| u.as_u8())
        .map(char::from)
        .collect();
    if reps.len() > MAX_RUNS {
        // Evenly spaced, so every part of the byte range keeps a run.
        let step = reps.len().div_ceil(MAX_RUNS);
        reps = reps.into_iter().step_by(step).collect();
    }

    let mut out: Vec<String> = Vec::new();
    let mut push = |text: String| {
        if !text.is_empty() && !out.contains(&text) {
            out.push(text);
        }
    };
    for s in &samples {
        push(repeat(s, len));
        let mut short = s.clone();
        short.pop();
        push(repeat(&short, len));
        push(repeat(&format!("{s} "), len));
    }
    for s in samples.iter().take(2) {
        push(repeat(&format!("{s}é"), len));
    }
    // A sample, then a long run of one of its characters: a repetition
    // that only starts after a prefix (`x(a{1,9}){1,9}`).
    let mut inner: Vec<char> = Vec::new();
    for c in samples.iter().flat_map(|s| s.chars()) {
        if !inner.contains(&c) && inner.len() < 16 {
            inner.push(c);
        }
    }
    for s in samples.iter().take(2) {
        let mut head = s.clone();
        head.pop();
        for &c in &inner {
            push(format!("{head}{}", repeat(&c.to_string(), len)));
        }
    }
    for &c in &reps {
        push(repeat(&c.to_string(), len));
    }
    let mut alphabet: Vec<char> = reps.clone();
    for c in samples
        .iter()
        .flat_map(|s| s.chars())
        .chain([' ', 'é', '会'])
    {
        if !alphabet.contains(&c) {
            alphabet.push(c);
        }
        if alphabet.len() >= 64 {
            break;
        }
    }
    push(random_text(&alphabet, len, 1));
    // Only the samples' characters: long runs inside the pattern's classes.
    push(random_text(&inner, len, 2));
    Probes {
        texts: out,
        alphabet,
        inner,
    }
}

/// `unit` repeated to about `len` bytes (whole copies, at least one).
fn repeat(unit: &str, len: usize) -> String {
    if unit.is_empty() {
        return String::new();
    }
    unit.repeat(len.div_ceil(unit.len()).max(1))
}

/// A deterministic pseudo-random text of about `len` bytes over `alphabet`.
fn random_text(alphabet: &[char], len: usize, seed: u64) -> String {
    let mut out = String::with_capacity(len + 4);
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    if alphabet.is_empty() {
        return out;
    }
    while out.len() < len {
        // xorshift64*
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33;
        let i = usize::try_from(r).unwrap_or(0) % alphabet.len();
        out.push(alphabet[i]);
    }
    out
}

/// A few strings the pattern matches or nearly matches, from its syntax:
/// each alternative, repetitions at their minimum and one more, one or two
/// characters of each class.
fn samples(hir: &Hir) -> Vec<String> {
    let mut out = match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => vec![String::new()],
        HirKind::Literal(lit) => vec![String::from_utf8_lossy(&lit.0).into_owned()],
        HirKind::Class(Class::Unicode(c)) => {
            let first = c.iter().next().map(|r| r.start());
            let last = c.iter().last().map(|r| r.end());
            // Prefer a letter, then the class's two ends.
            let letter = c
                .iter()
                .find_map(|r| ('a'..='z').find(|ch| r.start() <= *ch && *ch <= r.end()));
            let mut picks: Vec<String> = Vec::new();
            for ch in letter.into_iter().chain(first).chain(last) {
                let s = ch.to_string();
                if !picks.contains(&s) {
                    picks.push(s);
                }
            }
            picks.truncate(2);
            picks
        }
        HirKind::Class(Class::Bytes(c)) => c
            .iter()
            .flat_map(|r| [r.start(), r.end()])
            .filter(u8::is_ascii)
            .map(|b| char::from(b).to_string())
            .take(2)
            .collect(),
        HirKind::Repetition(rep) => {
            let mut v = Vec::new();
            let min = usize::try_from(rep.min).unwrap_or(usize::MAX);
            for s in samples(&rep.sub).into_iter().take(2) {
                v.push(repeat_n(&s, min));
                if rep.max != Some(rep.min) {
                    v.push(repeat_n(&s, min.saturating_add(1)));
                }
            }
            v
        }
        HirKind::Capture(cap) => samples(&cap.sub),
        HirKind::Concat(parts) => {
            let each: Vec<Vec<String>> = parts.iter().map(samples).collect();
            let first = |v: &Vec<String>| v.first().cloned().unwrap_or_default();
            let base: Vec<String> = each.iter().map(first).collect();
            let mut v = vec![base.concat()];
            // Every other sample of one part, the others at their first.
            for (i, options) in each.iter().enumerate() {
                for alt in options.iter().skip(1) {
                    let mut parts = base.clone();
                    parts[i] = alt.clone();
                    v.push(parts.concat());
                    if v.len() >= MAX_SAMPLES {
                        break;
                    }
                }
            }
            v
        }
        HirKind::Alternation(alts) => {
            let each: Vec<Vec<String>> = alts.iter().map(samples).collect();
            // Round-robin, so every alternative keeps its first sample.
            let mut v = Vec::new();
            for k in 0..MAX_SAMPLES {
                for options in &each {
                    if let Some(s) = options.get(k) {
                        v.push(s.clone());
                    }
                }
            }
            v
        }
    };
    for s in &mut out {
        truncate(s, MAX_SAMPLE_LEN);
    }
    out.dedup();
    out.truncate(MAX_SAMPLES);
    out
}

/// `s` repeated `n` times, stopping past [`MAX_SAMPLE_LEN`].
fn repeat_n(s: &str, n: usize) -> String {
    if s.is_empty() {
        return String::new();
    }
    let n = n.min(MAX_SAMPLE_LEN / s.len() + 1);
    s.repeat(n)
}

/// Cuts `s` to at most `max` bytes at a character boundary.
fn truncate(s: &mut String, max: usize) {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::{compile, Flag};

    fn cost_with(pattern: &str, flags: &[Flag]) -> Result<CostReport, String> {
        let p = compile(pattern, flags).unwrap();
        super::super::check_cost(&p)
    }

    fn cost(pattern: &str) -> Result<CostReport, String> {
        cost_with(pattern, &[])
    }

    fn refused(pattern: &str, why: &str) {
        let e = cost(pattern).expect_err(pattern);
        assert!(e.starts_with("is too costly to evaluate"), "{pattern}: {e}");
        assert!(e.contains(why), "{pattern}: {e} should say {why}");
    }

    #[test]
    fn nested_counted_repetition_is_refused() {
        // [§11.4](docs/limits.md#s11-4)'s example: the DFA builds a new state of thousands of
        // NFA states for every byte of a run of `a`.
        for p in [
            r"(a{1,100}){1,100}b",
            r"(a{1,50}){1,50}b",
            r"(?:[ab]{1,40}){1,40}c",
        ] {
            refused(p, "automaton");
        }
    }

    #[test]
    fn quadratic_match_iteration_is_refused() {
        for p in [
            r"[a-z]+X|[a-z]",
            r"[a-z]+X|[a-z]{100}",
            r"[a-z]+X|[a-z]{1000}",
            r"(\w+\s?)+X|\w{10}",
            r"(?i)\b[a-z]+X|[a-z]",
            r"foo(?:bar[a-z]*baz)?",
            r"\d+-\d+x|\d",
        ] {
            refused(p, "quadratic match iteration");
        }
        // A bounded look-ahead that still rereads 20 bytes per letter.
        refused(r"[a-z]{1,30}X|[a-z]", "bytes per byte");
        // The `regex` size limit already refuses the biggest variants.
        assert!(compile(r"(\w+\s?)+X|\w{50}", &[]).is_err());
    }

    #[test]
    fn dfa_state_blow_up_is_refused() {
        // 2^17 DFA states: a pseudo-random text over {a, b} makes a new one
        // at nearly every byte.
        refused(r"[ab]*a[ab]{16}", "automaton");
        // Forty-letter counters on both sides of an `x`: 76 bytes of new
        // states per byte of random letters.
        refused(r"[a-z]{1,40}x[a-z]{1,40}", "keeps building new states");
        refused(r"[ab]*a[ab]{12}", "keeps building new states");
    }

    #[test]
    fn limits_are_where_the_doc_says() {
        // Overscan: after the `ab` it reports, `ab[c-z]*X` stays alive to
        // the end of a run of `c`, but no other match starts there; with
        // `[a-z]` every next `a` does, and reads the run again.
        assert!(cost(r"ab[c-z]*X|ab").is_ok());
        refused(r"a[a-z]*X|a", "quadratic");
        // Scan factor: about N bytes read per two-letter match.
        let ok = cost(r"[a-z]{1,8}X|[a-z]{2}").unwrap();
        assert!(ok.scan_factor_centi <= MAX_SCAN_FACTOR * 100, "{ok:?}");
        refused(r"[a-z]{1,20}X|[a-z]{2}", "bytes per byte");
        // Density: a match at every byte costs the engine a search call and
        // a span each, over 100 ms for 1 MiB (BENCHMARKS.md: 95 to 125 ms),
        // except for a literal, which the regex finds without its automata.
        for p in [r"a[b-z]*X|a", r"[a-z]{1,8}X|[a-z]", r"[a-z]", r"\w", r"\b"] {
            refused(p, "densely");
        }
        let ok = cost(r"x").unwrap();
        assert!(ok.ns_per_byte <= MAX_NS_PER_BYTE, "{ok:?}");
        let ok = cost(r"\d{1,2}").unwrap();
        assert!(ok.ns_per_byte <= MAX_NS_PER_BYTE, "{ok:?}");
        // With `\b`, a match after a non-ASCII character costs the guided
        // search's confirmation too: one every other byte is too many.
        refused(r"\b\w\b", "densely");
        refused(r"kk(?:lmno)?\b|kkl", "densely");
        assert!(cost(r"\b\d{4}\b").is_ok());
        // States: ten nested counts of ten fit the budget, twenty of twenty too,
        // fifty of fifty do not.
        let ok = cost(r"(a{1,10}){1,10}b").unwrap();
        assert!(ok.state_bytes < STATE_BUDGET, "{ok:?}");
        assert!(cost(r"(a{1,20}){1,20}b").is_ok());
        refused(r"(a{1,50}){1,50}b", "outgrows");
    }

    #[test]
    fn built_in_codons_and_ordinary_patterns_are_accepted() {
        for c in &crate::builtins::CODONS {
            let flags: &[Flag] = if c.ignore_case {
                &[Flag::IgnoreCase]
            } else {
                &[]
            };
            let r = cost_with(c.pattern, flags);
            assert!(r.is_ok(), "codon {}: {r:?}", c.code);
        }
        for p in [
            r"x",
            r"abc|a",
            r"a+b",
            r"\w+ing\b",
            r"colou?r",
            r"(?i)\bsecret\w*",
            r"^>\s?\w+",
            r"\$\d+(?:\.\d\d)?",
            r"x\.?y+\.?z",
            r"[a-z]{1,8}x[a-z]{1,8}",
            r"\b\d{4}(?:[ -]?\d{4}){2,3}\b",
            r"\bPROJ-[A-Z]+-\d+[A-Z]?\b",
            r"\b(?:bluebird|nightjar|kestrel)\b",
            r"@example\.com and \w+",
            r"(?:alpha|beta)\s+\w+",
            r"\b\d{12,19}\b",
            r"\bAKIA[0-9A-Z]{16}\b",
            r"\brègle\b",
            r"(a{1,10}){1,10}b",
            r"X{1000}Y",
        ] {
            let r = cost(p);
            assert!(r.is_ok(), "{p}: {r:?}");
        }
        assert!(cost_with(r"SUP.+?042", &[Flag::DotAll]).is_ok());
        assert!(cost_with(r"^ticket", &[Flag::Multiline, Flag::IgnoreCase]).is_ok());
    }

    #[test]
    fn shipped_playbooks_are_accepted() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut seen = 0;
        for dir in ["config/demo/playbooks", "tests/fixtures", "tests/cases"] {
            let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let Ok(doc) = serde_yaml::from_str::<serde_yaml::Value>(&text) else {
                    continue;
                };
                let mut stack = vec![doc];
                while let Some(v) = stack.pop() {
                    match v {
                        serde_yaml::Value::Mapping(m) => {
                            if let Some(serde_yaml::Value::String(p)) = m.get("pattern") {
                                if let Ok(c) = compile(p, &[]) {
                                    seen += 1;
                                    let r = super::super::check_cost(&c);
                                    assert!(r.is_ok(), "{}: {r:?}", path.display());
                                }
                            }
                            stack.extend(m.into_iter().map(|(_, v)| v));
                        }
                        serde_yaml::Value::Sequence(s) => stack.extend(s),
                        _ => {}
                    }
                }
            }
        }
        assert!(seen > 10, "{seen} patterns");
    }

    #[test]
    fn reasons_never_quote_the_pattern() {
        for p in [r"secret[a-z]+X|[a-z]", r"secret(a{1,100}){1,100}b"] {
            let e = cost(p).unwrap_err();
            assert!(!e.contains("secret") && !e.contains("a{1"), "{e}");
        }
    }

    #[test]
    #[ignore]
    fn print_costs() {
        for p in [
            r"[a-z]+X|[a-z]",
            r"[a-z]+X|[a-z]{100}",
            r"[a-z]+X|[a-z]{1000}",
            r"(a{1,100}){1,100}b",
            r"(a{1,50}){1,50}b",
            r"(a{1,20}){1,20}b",
            r"(a{1,10}){1,10}b",
            r"(\w+\s?)+X|\w{10}",
            r"foo(?:bar[a-z]*baz)?",
            r"[ab]*a[ab]{16}",
            r"[ab]*a[ab]{12}",
            r"[a-z]{1,8}X|[a-z]",
            r"[a-z]{1,12}X|[a-z]",
            r"[a-z]{1,16}X|[a-z]",
            r"a[b-z]*X|a",
            r"a[a-z]*X|a",
            r"X{999}Y",
            r"[a-z]{999}Y",
            r"\w+ing\b",
            r"\b[a-zA-Z0-9_.+-]+@[a-zA-Z0-9-]+\.[a-zA-Z0-9\-.]+\b",
            r"(?i)\bsecret\w*",
            r"x",
            r"\d+-\d+x|\d",
            r"(?i)\b[a-z]+X|[a-z]",
            r"(?:[ab]{1,40}){1,40}c",
        ] {
            let t = std::time::Instant::now();
            let r = cost(p);
            eprintln!("{p}: {r:?} {:?}", t.elapsed());
        }
    }

    fn codons() -> Vec<crate::pattern::CompiledPattern> {
        crate::declared::codon_patterns().unwrap().to_vec()
    }

    fn pack(rules: &[&str]) -> Result<PackCost, PackCostError> {
        let mut all: Vec<crate::pattern::CompiledPattern> =
            rules.iter().map(|r| compile(r, &[]).unwrap()).collect();
        all.extend(codons());
        let refs: Vec<&crate::pattern::CompiledPattern> = all.iter().collect();
        crate::pattern::check_pack_cost(&refs)
    }

    #[test]
    fn the_codons_alone_are_within_the_pack_limit() {
        // Every evaluator runs the six codons, so a pack of no custom rule
        // is not measured again at each load: this holds them to the limit.
        let c = pack(&[]).unwrap();
        assert!(c.ns_per_byte <= MAX_NS_PER_BYTE, "{c:?}");
        // The e-mail codon's densest probe is the worst text; the others
        // cost nothing there (none of their required bytes).
        assert_eq!(c.shares, [0, 0, 0, 73, 0, 0]);
    }

    #[test]
    fn costs_add_up_on_a_text_every_rule_matches() {
        let x10 = pack(&["x"; 10]).unwrap_err();
        let PackCostError::Together(c) = x10 else {
            panic!("{x10:?}")
        };
        // Ten ends a byte stop the combined pass at its budget (6): every
        // rule is searched whole.
        assert_eq!(c.ns_per_byte, 646);
        assert_eq!(
            c.shares,
            [64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 0, 0, 0, 0, 0, 0]
        );
        // Two are already one too many; on different letters they are not.
        assert!(matches!(pack(&["x", "x"]), Err(PackCostError::Together(_))));
        assert_eq!(pack(&["x", "y", "z"]).unwrap().ns_per_byte, 73);
    }

    #[test]
    fn samples_cover_each_alternative() {
        let hir = regex_syntax::parse(r"ab|c{3}|[x-z]+").unwrap();
        let s = samples(&hir);
        for want in ["ab", "ccc", "x", "xx"] {
            assert!(s.iter().any(|x| x == want), "{s:?}");
        }
        assert_eq!(repeat("ab", 5), "ababab");
        assert_eq!(
            random_text(&['a', 'é'], 10, 1),
            random_text(&['a', 'é'], 10, 1)
        );
    }
}
