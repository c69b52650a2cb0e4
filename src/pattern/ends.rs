//! The combined pass over a pack's patterns ([§6.1](docs/evaluation.md#s6-1), [§11.4](docs/limits.md#s11-4)): one
//! lazy DFA over every pattern's boundary-free form (and, for a text on
//! which it gives up, DFAs over halves of them: [`Tree`]) whose
//! overlapping search reports which patterns match and where each match
//! ends. The
//! engine searches only those patterns, near those ends; the pack cost
//! check runs the same pass on its probes. Reads only the text it is given
//! and keeps nothing of it.

use super::steps::{self, Slow, Steps};
use super::NEST_LIMIT;
use regex_automata::hybrid::dfa::{Cache, Config, DFA};
use regex_automata::nfa::thompson;
use regex_automata::util::syntax;
use regex_automata::{Input, MatchKind};

/// Most match ends one pass reads: a base, plus one per
/// [`BYTES_PER_END`] bytes of text. A text denser in ends than that stops
/// the pass, and every candidate is searched whole: the pass then costs at
/// most a few ns a byte whatever the patterns (each end it reports costs
/// [`super::cost::NS_PER_END`]).
pub const ENDS_BASE: usize = 256;
/// See [`ENDS_BASE`].
pub const BYTES_PER_END: usize = 4;

/// Size limit of the combined automaton.
pub const SIZE_LIMIT: usize = 64 << 20;
/// Its lazy-DFA cache, per concurrent search. Small on purpose: on text
/// that makes the overlapping automaton of many patterns build a new
/// state every few bytes (random upper-case alphanumerics against forty
/// identifier codons), filling a 16 MiB cache cost 0.5 s a MiB; filling
/// this one costs a few ms, and the pass then gives up.
pub const CACHE_CAPACITY: usize = 512 << 10;
/// The pass gives up the first time its cache fills if it read fewer
/// bytes than this per state it built since the last time: the states
/// would cost more than the searches the pass saves.
pub const MIN_BYTES_PER_STATE: usize = 64;

/// Most patterns under one automaton of a [`Tree`] that has no smaller
/// ones: a pass that gives up on a text hands its patterns to automata over
/// halves of them, down to this many.
pub const LEAF: usize = 8;

/// The combined passes of a pack: an automaton over every pattern, and
/// under it automata over each half, down to [`LEAF`] patterns. Many
/// patterns with counted repetitions make the one automaton build a state
/// every few bytes on some texts (1 MiB of the curated `secrets` pack's
/// values: its 25 patterns give up after 15 µs), while a few of them
/// together settle (8 of them: 2.5 ms for the MiB). Built at load;
/// the smaller automata run only on a text that makes a larger one give up.
pub struct Tree {
    nodes: Vec<Node>,
}

/// An automaton over `patterns[range]`, and the nodes over its halves.
struct Node {
    range: std::ops::Range<usize>,
    dfa: Option<DFA>,
    halves: Option<[usize; 2]>,
}

/// The caches of a [`Tree`]'s automata, one per node (for one search at
/// a time).
pub type TreeCaches = Vec<Option<PassCache>>;

/// Match states a lane entered, each with the position of the byte that
/// entered it.
type Entered = Vec<(usize, steps::Id)>;

/// What a pass over one automaton keeps between texts: the lazy DFA's
/// cache and the table of the steps taken ([`Steps`]).
#[derive(Debug, Clone)]
pub struct PassCache {
    lazy: Cache,
    steps: Steps,
    /// The two lanes' match states, kept for their memory ([`two_lanes`]).
    pending: Entered,
    ones: Entered,
    /// How the last pass went, for tests to see that each way is taken.
    #[cfg(test)]
    lanes: Lanes,
}

/// How a pass read its text.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Lanes {
    /// One lane from the start (short text, or the lanes stopped short).
    #[default]
    One,
    /// Two lanes that met at the middle.
    Met,
    /// Two lanes in different states at the middle: lane one read on.
    Apart,
    /// Lane two stopped (dead or quit, or the budget): lane one read on.
    Alone,
}

impl PassCache {
    /// Empty caches for `dfa`.
    pub fn new(dfa: &DFA) -> Self {
        Self {
            lazy: dfa.create_cache(),
            steps: Steps::new(dfa),
            pending: Vec::new(),
            ones: Vec::new(),
            #[cfg(test)]
            lanes: Lanes::One,
        }
    }

    /// Forgets every state built.
    fn reset(&mut self, dfa: &DFA) {
        self.lazy.reset(dfa);
        self.steps.flush();
    }
}

/// What the passes of a [`Tree`] learnt. A set of search caches keeps one
/// across decisions ([`Tree::run_into`]), so that a decision on a short
/// text allocates none of its lists.
#[derive(Debug, Default)]
pub struct Found {
    /// `known[i]`: a pass that finished covered pattern `i`, so `seen[i]`
    /// and `stretches[i]` hold; the others must be searched whole.
    pub known: Vec<bool>,
    /// `seen[i]`: pattern `i` matches somewhere (when known).
    pub seen: Vec<bool>,
    /// As [`Ends::stretches`], for the known patterns.
    pub stretches: Vec<Vec<(usize, usize)>>,
    /// As [`Ends::ends`], for the known patterns.
    pub ends: Vec<Vec<usize>>,
    /// How many ends the passes reported.
    pub count: usize,
    /// How many passes ran (to the end of the text or not).
    pub passes: usize,
}

/// Longest list of stretches or ends a kept [`Found`] keeps the memory of
/// ([`Found::shed`]).
const KEEP: usize = 256;

impl Found {
    /// Empty, for `n` patterns none of which is known; the lists keep
    /// their memory.
    fn reset(&mut self, n: usize) {
        self.known.clear();
        self.known.resize(n, false);
        self.seen.clear();
        self.seen.resize(n, false);
        empty_lists(&mut self.stretches, n);
        empty_lists(&mut self.ends, n);
        self.count = 0;
        self.passes = 0;
    }

    /// Frees the lists with room for more than 256 entries, before the cache set
    /// that keeps this goes idle: a large text's stay in no idle set.
    pub fn shed(&mut self) {
        free_long(&mut self.stretches);
        free_long(&mut self.ends);
    }
}

/// `n` empty lists in `lists`, reusing the memory of those it has.
fn empty_lists<T>(lists: &mut Vec<Vec<T>>, n: usize) {
    lists.truncate(n);
    lists.iter_mut().for_each(Vec::clear);
    lists.resize_with(n, Vec::new);
}

/// Frees the lists of `lists` that hold room for more than [`KEEP`].
fn free_long<T>(lists: &mut [Vec<T>]) {
    for l in lists.iter_mut().filter(|l| l.capacity() > KEEP) {
        *l = Vec::new();
    }
}

impl Tree {
    /// The tree over `srcs`. A node whose automaton cannot be built (see
    /// [`build`]) is a pass that gives up at once.
    pub fn build(srcs: &[&str]) -> Self {
        Self::with_leaf(srcs, LEAF)
    }

    /// The automaton over every pattern alone, without halves (for ASCII
    /// text, on which the engine runs no halves).
    pub fn root(srcs: &[&str]) -> Self {
        Self::with_leaf(srcs, usize::MAX)
    }

    fn with_leaf(srcs: &[&str], leaf: usize) -> Self {
        let mut tree = Self { nodes: Vec::new() };
        if !srcs.is_empty() {
            tree.node(srcs, 0..srcs.len(), leaf);
        }
        tree
    }

    fn node(&mut self, srcs: &[&str], range: std::ops::Range<usize>, leaf: usize) -> usize {
        let k = self.nodes.len();
        self.nodes.push(Node {
            dfa: build(&srcs[range.clone()]),
            range: range.clone(),
            halves: None,
        });
        if range.len() > leaf {
            let mid = range.start + range.len().div_ceil(2);
            let a = self.node(srcs, range.start..mid, leaf);
            let b = self.node(srcs, mid..range.end, leaf);
            self.nodes[k].halves = Some([a, b]);
        }
        k
    }

    /// Whether the tree has an automaton at all.
    pub fn is_empty(&self) -> bool {
        self.nodes.iter().all(|n| n.dfa.is_none())
    }

    /// A cache for each automaton.
    pub fn create_caches(&self) -> TreeCaches {
        self.nodes
            .iter()
            .map(|n| n.dfa.as_ref().map(PassCache::new))
            .collect()
    }

    /// Runs the automaton over every pattern on `text` and, with `halves`,
    /// where a pass gives up, those over its halves. All passes share one
    /// budget of ends (`base` plus one per [`BYTES_PER_END`] bytes): a text
    /// denser than that stops them, and the patterns no finished pass
    /// covered are unknown. `lens` as in [`pass`].
    ///
    /// The engine asks for the halves on non-ASCII text only: there a
    /// pattern with `\b` searched whole takes the guided search (about
    /// 2 ns a byte, as a pass), while on ASCII text its search mostly
    /// skips from one literal prefix to the next, and passes over halves
    /// cost more than they save (1 MiB of the curated packs' test values:
    /// `secrets` 20–26 ms with the root pass alone, 35 ms with the halves;
    /// the same text with its Japanese and Korean values, 56–68 ms against
    /// 35–43 ms).
    pub fn run(
        &self,
        caches: &mut [Option<PassCache>],
        text: &str,
        lens: &[Option<usize>],
        base: usize,
        halves: bool,
    ) -> Found {
        let mut found = Found::default();
        self.run_into(caches, text, lens, base, halves, &mut found);
        found
    }

    /// [`Tree::run`] into `found`, whose lists' memory it reuses.
    pub fn run_into(
        &self,
        caches: &mut [Option<PassCache>],
        text: &str,
        lens: &[Option<usize>],
        base: usize,
        halves: bool,
        found: &mut Found,
    ) {
        found.reset(lens.len());
        let budget = base + text.len() / BYTES_PER_END;
        // The root first: on most texts it is the only pass.
        let mut todo = Vec::new();
        let mut next = Some(0);
        while let Some(k) = next.take().or_else(|| todo.pop()) {
            match self.pass_of(k, caches, text, lens, budget, found) {
                Some(Outcome::Known) => {}
                // The budget is spent: nothing more is learnt.
                Some(Outcome::Dense) => break,
                Some(Outcome::GaveUp) if halves => todo.extend(self.halves_of(k)),
                Some(Outcome::GaveUp) | None => {}
            }
        }
    }

    /// The pass of node `k` over `text` within what is left of `budget`
    /// (counted in `found`), written into `found`'s entries of the node's
    /// patterns (left empty unless it finished); `None` when there is no
    /// such node.
    fn pass_of(
        &self,
        k: usize,
        caches: &mut [Option<PassCache>],
        text: &str,
        lens: &[Option<usize>],
        budget: usize,
        found: &mut Found,
    ) -> Option<Outcome> {
        let node = self.nodes.get(k)?;
        let range = node.range.clone();
        let lens = lens.get(range.clone())?;
        let outcome = match (&node.dfa, caches.get_mut(k).and_then(Option::as_mut)) {
            (Some(dfa), Some(cache)) => {
                found.passes += 1;
                let out = EndsMut {
                    seen: found.seen.get_mut(range.clone())?,
                    stretches: found.stretches.get_mut(range.clone())?,
                    ends: found.ends.get_mut(range.clone())?,
                };
                let outcome = pass_into(dfa, cache, text, lens, budget - found.count, out);
                if outcome.0 == Outcome::GaveUp {
                    // A full cache that gave up stays full: every later
                    // text needing a new state would give up at once (the
                    // bytes searched since its last clearing are too few),
                    // and its candidates be searched whole, until enough
                    // text went by. The next text starts afresh instead.
                    cache.reset(dfa);
                }
                outcome
            }
            _ => (Outcome::GaveUp, 0),
        };
        match outcome.0 {
            Outcome::Known => {
                found.count += outcome.1;
                found.known.get_mut(range)?.fill(true);
            }
            Outcome::Dense | Outcome::GaveUp => {
                if outcome.0 == Outcome::Dense {
                    found.count = budget;
                }
                // What the pass wrote before it stopped is not known.
                found.seen.get_mut(range.clone())?.fill(false);
                for l in found.stretches.get_mut(range.clone())? {
                    l.clear();
                }
                for l in found.ends.get_mut(range)? {
                    l.clear();
                }
            }
        }
        Some(outcome.0)
    }

    /// Node `k`'s halves, the first last (popped first).
    fn halves_of(&self, k: usize) -> impl Iterator<Item = usize> {
        let halves = self.nodes.get(k).and_then(|n| n.halves);
        halves.into_iter().flat_map(|[a, b]| [b, a])
    }
}

/// One automaton over many patterns (`MatchKind::All`); `None` if it
/// exceeds [`SIZE_LIMIT`] or cannot be built (a pattern the lazy DFA cannot
/// run). It gives up once its cache fills on text that builds states
/// faster than [`MIN_BYTES_PER_STATE`].
pub fn build(srcs: &[&str]) -> Option<DFA> {
    build_with(srcs, SIZE_LIMIT, CACHE_CAPACITY)
}

fn build_with(srcs: &[&str], size_limit: usize, cache: usize) -> Option<DFA> {
    DFA::builder()
        .configure(
            Config::new()
                .match_kind(MatchKind::All)
                .cache_capacity(cache)
                .minimum_cache_clear_count(Some(0))
                .minimum_bytes_per_state(Some(MIN_BYTES_PER_STATE)),
        )
        .syntax(syntax::Config::new().nest_limit(NEST_LIMIT))
        .thompson(thompson::Config::new().nfa_size_limit(Some(size_limit)))
        .build_many(srcs)
        .ok()
}

/// What one pass learnt.
#[derive(Debug)]
pub struct Ends {
    /// `seen[i]`: pattern `i` matches somewhere.
    pub seen: Vec<bool>,
    /// `stretches[i]`: for a pattern whose matches are at most `len` bytes
    /// long, the stretches `[end - len, end]` around its match ends,
    /// merged, ascending (see the engine's windowed search).
    pub stretches: Vec<Vec<(usize, usize)>>,
    /// `ends[i]`: for the same patterns, every end the pass reported,
    /// ascending: a search within a stretch need not look past the last.
    /// For an unbounded pattern that matches, its last end alone: no match
    /// of it ends later.
    pub ends: Vec<Vec<usize>>,
    /// How many ends the pass reported.
    pub count: usize,
}

/// What a pass found.
#[derive(Debug)]
pub enum Pass {
    /// Every pattern that matches and the stretches before its ends.
    Known(Ends),
    /// The text holds more ends than `base` plus one per [`BYTES_PER_END`]
    /// bytes: the pass stopped there, and nothing is known.
    Dense,
    /// The lazy DFA gave up (see [`MIN_BYTES_PER_STATE`]): nothing is known.
    GaveUp,
}

/// One overlapping pass of `dfa` over `text`. `lens[i]` is pattern `i`'s
/// longest match when it is bounded (its stretches are recorded).
pub fn pass(
    dfa: &DFA,
    cache: &mut PassCache,
    text: &str,
    lens: &[Option<usize>],
    base: usize,
) -> Pass {
    pass_within(dfa, cache, text, lens, base + text.len() / BYTES_PER_END)
}

/// How a pass ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// It read the whole text.
    Known,
    /// It stopped at its budget of ends.
    Dense,
    /// Its lazy DFA gave up.
    GaveUp,
}

/// Where a pass writes what it learns, one entry per pattern of its
/// automaton (empty when it starts).
struct EndsMut<'a> {
    seen: &'a mut [bool],
    stretches: &'a mut [Vec<(usize, usize)>],
    ends: &'a mut [Vec<usize>],
}

/// [`pass`] with a budget of ends: past it, [`Pass::Dense`].
fn pass_within(
    dfa: &DFA,
    cache: &mut PassCache,
    text: &str,
    lens: &[Option<usize>],
    budget: usize,
) -> Pass {
    let patterns = lens.len();
    let mut ends = Ends {
        seen: vec![false; patterns],
        stretches: vec![Vec::new(); patterns],
        ends: vec![Vec::new(); patterns],
        count: 0,
    };
    let out = EndsMut {
        seen: &mut ends.seen,
        stretches: &mut ends.stretches,
        ends: &mut ends.ends,
    };
    match pass_into(dfa, cache, text, lens, budget, out) {
        (Outcome::Known, count) => Pass::Known(Ends { count, ..ends }),
        (Outcome::Dense, _) => Pass::Dense,
        (Outcome::GaveUp, _) => Pass::GaveUp,
    }
}

/// Texts shorter than this are read by one lane ([`two_lanes`]): the
/// second lane's start and overlap cost more than it saves.
const TWO_LANES_FROM: usize = 512;
/// Most bytes lane two reads before the middle ([`two_lanes`]).
const MAX_OVERLAP: usize = 256;

/// One pass written into `out`, and how many ends it read.
///
/// The automaton is stepped byte by byte here, through the table of the
/// steps it took ([`Steps`]), rather than through the library's
/// overlapping search, which returns once per (pattern, end) and pays its
/// set-up at every return: on text dense with values (a value of one of
/// forty codons every ~25 bytes, two hundred ends a KiB) those returns
/// were most of the pass. A match state's patterns are read at once; the
/// ends and their order are the overlapping search's (each end in turn,
/// its patterns in the state's order).
fn pass_into(
    dfa: &DFA,
    cache: &mut PassCache,
    text: &str,
    lens: &[Option<usize>],
    budget: usize,
    mut out: EndsMut<'_>,
) -> (Outcome, usize) {
    let mut count = 0;
    #[cfg(test)]
    {
        cache.lanes = Lanes::One;
    }
    if let Some(outcome) = two_lanes(dfa, cache, text, lens, budget, &mut out, &mut count) {
        return (outcome, count);
    }
    // No two lanes (a short text), or they stopped short of an answer:
    // one lane reads the text afresh.
    out.clear();
    count = 0;
    let Ok(start) = dfa.start_state_forward(&mut cache.lazy, &Input::new(text)) else {
        return (Outcome::GaveUp, count);
    };
    cache.lazy.search_start(0);
    let (start, _) = cache.steps.id(dfa, &cache.lazy, start);
    let bytes = text.as_bytes();
    let outcome = lane(
        dfa,
        cache,
        bytes,
        (0, start),
        lens,
        budget,
        &mut out,
        &mut count,
    );
    (outcome, count)
}

/// Steps the automaton from state `id` at `from` to the end of `bytes`
/// and past it, recording every match state's ends into `out`.
#[allow(clippy::too_many_arguments)]
fn lane(
    dfa: &DFA,
    cache: &mut PassCache,
    bytes: &[u8],
    (from, mut id): (usize, steps::Id),
    lens: &[Option<usize>],
    budget: usize,
    out: &mut EndsMut<'_>,
    count: &mut usize,
) -> Outcome {
    let PassCache { lazy, steps, .. } = cache;
    for (at, &b) in bytes.iter().enumerate().skip(from) {
        let mut next = steps.next(id, b);
        if next == steps::UNKNOWN {
            lazy.search_update(at);
            next = match steps.next_or_step(dfa, lazy, id, b) {
                // The table emptied: only the next state's id is needed.
                Ok(next) | Err(Slow::Cleared(next)) => next,
                Err(Slow::GaveUp) => return Outcome::GaveUp,
            };
        }
        if next & steps::FLAGS != 0 {
            if next & steps::MATCH != 0 {
                // A match state is entered one byte after the match ends.
                if !out.record(steps.patterns(next), at, lens, budget, count) {
                    lazy.search_finish(at);
                    return Outcome::Dense;
                }
            } else if steps.is_dead(next) {
                lazy.search_finish(at);
                return Outcome::Known;
            } else {
                return Outcome::GaveUp;
            }
        }
        id = next;
    }
    let Some(last) = steps.lazy_of(id) else {
        return Outcome::GaveUp;
    };
    let Ok(eoi) = dfa.next_eoi_state(lazy, last) else {
        return Outcome::GaveUp;
    };
    lazy.search_finish(bytes.len());
    if eoi.is_match() {
        let (eoi, _) = steps.id(dfa, lazy, eoi);
        if !out.record(steps.patterns(eoi), bytes.len(), lens, budget, count) {
            return Outcome::Dense;
        }
    }
    Outcome::Known
}

/// The pass read by two lanes at once, each over about half the text;
/// `None` when the text is too short for it or the lanes stopped short of
/// an answer, with `out` and `count` then partly written.
///
/// Why: a step reads the next state from the current one, so one lane
/// waits on the memory's latency at every byte; two independent lanes
/// wait together.
///
/// Why it reads what one lane reads: lane one reads `[0, mid)` from the
/// start state. Lane two starts `overlap` bytes before `mid` (the longest
/// bounded pattern's length), from the start state its position's
/// look-behind gives. Where both lanes are in the same state at `mid`,
/// they step alike from there to the end (the automaton is
/// deterministic): lane two's ends from `mid` on are one lane's, as are
/// lane one's before `mid`. A match under way at `mid` that began before
/// lane two did (an unbounded pattern's) leaves them in different
/// states: lane one then reads on alone, as one lane would have. So does
/// it when lane two stops (a dead or quit state, or more ends than the
/// budget).
///
/// An id names a state only while the lazy DFA keeps its cache: if a
/// step clears it, the other lane's state is gone, and `None` has one lane
/// start afresh.
#[allow(clippy::too_many_arguments)]
fn two_lanes(
    dfa: &DFA,
    cache: &mut PassCache,
    text: &str,
    lens: &[Option<usize>],
    budget: usize,
    out: &mut EndsMut<'_>,
    count: &mut usize,
) -> Option<Outcome> {
    let bytes = text.as_bytes();
    let overlap = lens
        .iter()
        .flatten()
        .copied()
        .max()
        .unwrap_or(0)
        .min(MAX_OVERLAP);
    if bytes.len() < TWO_LANES_FROM.max(4 * overlap) {
        return None;
    }
    let mid = (bytes.len() + overlap) / 2;
    let from = mid - overlap;
    let start = dfa
        .start_state_forward(&mut cache.lazy, &Input::new(text))
        .ok()?;
    let (one, _) = cache.steps.id(dfa, &cache.lazy, start);
    let input = Input::new(text).range(from..);
    let start = dfa.start_state_forward(&mut cache.lazy, &input).ok()?;
    let (two, flushed) = cache.steps.id(dfa, &cache.lazy, start);
    if flushed {
        return None;
    }
    cache.lazy.search_start(0);
    // The lists keep their memory across passes, whichever way this one
    // ends.
    let mut pending = std::mem::take(&mut cache.pending);
    let mut ones = std::mem::take(&mut cache.ones);
    pending.clear();
    ones.clear();
    let bufs = (&mut pending, &mut ones);
    let outcome = lanes_from(
        dfa,
        cache,
        bytes,
        (one, two),
        (overlap, mid, from),
        lens,
        budget,
        out,
        count,
        bufs,
    );
    (cache.pending, cache.ones) = (pending, ones);
    outcome
}

/// [`two_lanes`] from the lanes' start states `one` and `two`, with
/// `pending` and `ones` (empty) for the match states they meet.
#[allow(clippy::too_many_arguments)]
fn lanes_from(
    dfa: &DFA,
    cache: &mut PassCache,
    bytes: &[u8],
    (mut one, mut two): (steps::Id, steps::Id),
    (overlap, mid, from): (usize, usize, usize),
    lens: &[Option<usize>],
    budget: usize,
    out: &mut EndsMut<'_>,
    count: &mut usize,
    (pending, ones): (&mut Entered, &mut Entered),
) -> Option<Outcome> {
    let PassCache { lazy, steps, .. } = &mut *cache;
    let mut two_at_mid = None;
    let mut alone = None;
    let mut k = 0;
    while k < mid {
        if k == overlap {
            two_at_mid = Some(two);
        }
        // Lane two's ends before `mid` are lane one's to report.
        let end = if k < overlap { overlap } else { mid };
        k = steps.run_two(bytes, (k, end, from), &mut one, &mut two, ones, pending);
        if pending.first().is_some_and(|&(at, _)| at < mid) {
            pending.retain(|&(at, _)| at >= mid);
        }
        for &(e, n) in ones.iter() {
            if !out.record(steps.patterns(n), e, lens, budget, count) {
                lazy.search_finish(2 * k);
                return Some(Outcome::Dense);
            }
        }
        ones.clear();
        // Each pending state holds an end at least: past the budget, lane
        // one finds the text dense alone.
        if pending.len() > budget {
            alone = Some((k, one));
            break;
        }
        if k == end {
            continue;
        }
        // A step the table does not know, or a stop: taken here. A clear
        // lost the other lane's state.
        let at = from + k;
        lazy.search_update(2 * k);
        let lost = |slow| match slow {
            Slow::Cleared(_) => None,
            Slow::GaveUp => Some(Outcome::GaveUp),
        };
        let n1 = match steps.next_or_step(dfa, lazy, one, bytes[k]) {
            Ok(next) => next,
            Err(slow) => return lost(slow),
        };
        // Lane one's step may have been this one.
        let n2 = match steps.next_or_step(dfa, lazy, two, bytes[at]) {
            Ok(next) => next,
            Err(slow) => return lost(slow),
        };
        if n1 & steps::MATCH != 0 {
            if !out.record(steps.patterns(n1), k, lens, budget, count) {
                lazy.search_finish(2 * k);
                return Some(Outcome::Dense);
            }
        } else if n1 & steps::STOP != 0 {
            if steps.is_dead(n1) {
                lazy.search_finish(2 * k);
                return Some(Outcome::Known);
            }
            return Some(Outcome::GaveUp);
        }
        if n2 & steps::MATCH != 0 && at >= mid {
            pending.push((at, n2));
        }
        if n2 & steps::STOP != 0 {
            alone = Some((k + 1, n1));
            break;
        }
        (one, two) = (n1, n2);
        k += 1;
    }
    #[cfg(test)]
    {
        cache.lanes = match alone {
            Some(_) => Lanes::Alone,
            None if two_at_mid != Some(one) => Lanes::Apart,
            None => Lanes::Met,
        };
    }
    let outcome = match alone {
        Some(lane_one) => lane(dfa, cache, bytes, lane_one, lens, budget, out, count),
        None if two_at_mid != Some(one) => {
            lane(dfa, cache, bytes, (mid, one), lens, budget, out, count)
        }
        None => {
            let replayed = pending
                .iter()
                .all(|&(at, n)| out.record(cache.steps.patterns(n), at, lens, budget, count));
            if replayed {
                lane(
                    dfa,
                    cache,
                    bytes,
                    (from + mid, two),
                    lens,
                    budget,
                    out,
                    count,
                )
            } else {
                cache.lazy.search_finish(2 * mid);
                Outcome::Dense
            }
        }
    };
    Some(outcome)
}

impl EndsMut<'_> {
    /// Forgets what a pass wrote.
    fn clear(&mut self) {
        self.seen.fill(false);
        self.stretches.iter_mut().for_each(Vec::clear);
        self.ends.iter_mut().for_each(Vec::clear);
    }

    /// Records each of `patterns` as ending at `e`; `false` once `count`
    /// passes `budget` (or on a pattern the pass does not know, which
    /// cannot happen).
    fn record(
        &mut self,
        patterns: &[u32],
        e: usize,
        lens: &[Option<usize>],
        budget: usize,
        count: &mut usize,
    ) -> bool {
        for &i in patterns {
            *count += 1;
            let i = i as usize;
            if *count > budget || i >= lens.len() {
                return false;
            }
            self.seen[i] = true;
            if let Some(len) = lens[i] {
                let s = e.saturating_sub(len);
                let list = &mut self.stretches[i];
                match list.last_mut() {
                    Some(last) if s <= last.1 => last.1 = e,
                    _ => list.push((s, e)),
                }
                self.ends[i].push(e);
            } else {
                // An unbounded pattern has no stretches; its last end
                // still bounds its whole search.
                let list = &mut self.ends[i];
                match list.last_mut() {
                    Some(last) => *last = e,
                    None => list.push(e),
                }
            }
        }
        true
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn known(p: Pass) -> Ends {
        match p {
            Pass::Known(e) => e,
            other => panic!("{other:?}"),
        }
    }

    fn dfa(srcs: &[&str]) -> DFA {
        build_with(srcs, 1 << 20, 1 << 20).unwrap()
    }

    #[test]
    fn the_pass_reports_every_pattern_and_the_stretches_before_its_ends() {
        let d = dfa(&["[0-9]{3}", "ab", "zz"]);
        let mut cache = PassCache::new(&d);
        let text = "x1234 ab ab";
        let lens = [Some(3), Some(2), Some(2)];
        let ends = known(pass(&d, &mut cache, text, &lens, ENDS_BASE));
        assert_eq!(ends.seen, vec![true, true, false]);
        assert_eq!(
            ends.stretches,
            vec![vec![(1, 5)], vec![(6, 8), (9, 11)], vec![]]
        );
        assert_eq!(ends.count, 4);
        // An unbounded pattern is seen, with no stretches, and its last
        // end alone (`123` ends at 4, `234` at 5).
        let ends = known(pass(
            &d,
            &mut cache,
            text,
            &[None, Some(2), None],
            ENDS_BASE,
        ));
        assert_eq!(ends.seen, vec![true, true, false]);
        assert_eq!(ends.stretches[0], vec![]);
        assert_eq!(ends.ends, vec![vec![5], vec![8, 11], vec![]]);
    }

    /// Every (pattern, end) the library's overlapping search reports, in
    /// its order: what the pass, stepping the automaton itself, must read.
    fn overlapping_ends(d: &DFA, text: &str) -> Vec<(usize, usize)> {
        use regex_automata::hybrid::dfa::OverlappingState;
        let mut cache = d.create_cache();
        let mut state = OverlappingState::start();
        let mut out = Vec::new();
        let input = Input::new(text);
        loop {
            d.try_search_overlapping_fwd(&mut cache, &input, &mut state)
                .unwrap();
            match state.get_match() {
                Some(m) => out.push((m.pattern().as_usize(), m.offset())),
                None => return out,
            }
        }
    }

    proptest::proptest! {
        /// The pass sees, per pattern, exactly the ends the library's
        /// overlapping search reports (look-around at both edges, several
        /// patterns ending at one byte, matches at the end of the text).
        #[test]
        fn the_pass_reads_the_ends_the_overlapping_search_reports(
            text in "[ab1 \\-]{0,40}",
        ) {
            let srcs = [r"(?-u:\b)a+(?-u:\b)", "[0-9]", "a[ab]?", r"(?:^|[^0-9])1(?:$|[^0-9])", "b$", r"^\s*a"];
            let d = dfa(&srcs);
            let mut cache = PassCache::new(&d);
            let lens = vec![Some(64); srcs.len()];
            let ends = known(pass(&d, &mut cache, &text, &lens, 1 << 20));
            let mut want = vec![Vec::new(); srcs.len()];
            let all = overlapping_ends(&d, &text);
            for &(i, e) in &all {
                want[i].push(e);
            }
            proptest::prop_assert_eq!(&ends.ends, &want);
            proptest::prop_assert_eq!(ends.count, all.len());
            let seen: Vec<bool> = want.iter().map(|w| !w.is_empty()).collect();
            proptest::prop_assert_eq!(ends.seen, seen);
        }
    }

    /// A DFA whose cache holds few states and never gives up: it clears
    /// again and again on any text that meets many states.
    fn small_cache_dfa(srcs: &[&str]) -> DFA {
        DFA::builder()
            .configure(
                Config::new()
                    .match_kind(MatchKind::All)
                    .cache_capacity(0)
                    .skip_cache_capacity_check(true)
                    .minimum_cache_clear_count(None),
            )
            .build_many(srcs)
            .unwrap()
    }

    /// Every (pattern, end) of `text`, per pattern, as the library's
    /// overlapping search reports them.
    fn ends_per_pattern(d: &DFA, text: &str, patterns: usize) -> (Vec<Vec<usize>>, usize) {
        let mut want = vec![Vec::new(); patterns];
        let all = overlapping_ends(d, text);
        for &(i, e) in &all {
            want[i].push(e);
        }
        (want, all.len())
    }

    /// Patterns for the two-lane tests: `1[ab ]*-` keeps a match under way
    /// across any run of `a`, `b` and spaces, so lane two, starting in one,
    /// is in another state than lane one at the middle.
    const LANE_PATTERNS: [&str; 6] = [
        r"(?-u:\b)a+(?-u:\b)",
        "[0-9]",
        "a[ab]?",
        r"1[ab ]*-",
        "b$",
        r"^\s*a",
    ];

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// On texts long enough for two lanes, the pass still reads exactly
        /// the overlapping search's ends, whether the lanes meet at the
        /// middle or not, and whatever the cache clears, or the table of
        /// steps empties, on the way.
        #[test]
        fn two_lanes_read_the_ends_one_lane_reads(
            head in "[ab1 \\-]{200,700}",
            run in "[ab ]{0,400}",
            tail in "[ab1 \\-]{200,700}",
            small in proptest::bool::ANY,
            table in proptest::option::of(1usize..6),
        ) {
            let text = format!("{head}{run}{tail}");
            let d = if small { small_cache_dfa(&LANE_PATTERNS) } else { dfa(&LANE_PATTERNS) };
            // A table of a few states empties again and again.
            let steps = table.map_or_else(|| Steps::new(&d), |n| Steps::with_limit(&d, n));
            let mut cache = PassCache { steps, ..PassCache::new(&d) };
            let lens = vec![Some(64); LANE_PATTERNS.len()];
            let ends = known(pass(&d, &mut cache, &text, &lens, 1 << 20));
            let (want, count) = ends_per_pattern(&d, &text, LANE_PATTERNS.len());
            proptest::prop_assert_eq!(&ends.ends, &want);
            proptest::prop_assert_eq!(ends.count, count);
        }
    }

    #[test]
    fn each_way_of_the_two_lanes_reads_the_ends_one_lane_reads() {
        let d = dfa(&LANE_PATTERNS);
        let lens = vec![Some(64); LANE_PATTERNS.len()];
        let check = |cache: &mut PassCache, text: &str, budget: usize| {
            let (want, count) = ends_per_pattern(&d, text, LANE_PATTERNS.len());
            match pass(&d, cache, text, &lens, budget) {
                Pass::Known(ends) => {
                    assert_eq!(ends.ends, want);
                    assert_eq!(ends.count, count);
                }
                Pass::Dense => assert!(count > budget + text.len() / BYTES_PER_END),
                Pass::GaveUp => panic!("gave up"),
            }
            cache.lanes
        };
        let mut cache = PassCache::new(&d);
        let plain = "ab 1 a-b ".repeat(120);
        // The table learns the states on the first pass; both meet.
        let all = 1 << 20;
        assert_eq!(check(&mut cache, &plain, all), Lanes::Met);
        assert_eq!(check(&mut cache, &plain, all), Lanes::Met);
        // A match under way from the start across the middle.
        let across = format!("1{}-", "ab ".repeat(400));
        assert_eq!(check(&mut cache, &across, all), Lanes::Apart);
        // More ends past the middle than the budget: lane two stops.
        let dense = format!("{}{}", "-".repeat(600), "a".repeat(600));
        assert_eq!(check(&mut cache, &dense, 0), Lanes::Alone);
        // A short text: one lane.
        assert_eq!(check(&mut cache, "ab 1 a-b", all), Lanes::One);
        // A cache that clears at nearly every new state: the lanes stop
        // short, and one lane reads the text afresh.
        let d = small_cache_dfa(&LANE_PATTERNS);
        let mut cache = PassCache::new(&d);
        let ends = known(pass(&d, &mut cache, &plain, &lens, all));
        assert_eq!(cache.lanes, Lanes::One);
        assert_eq!(
            ends.ends,
            ends_per_pattern(&d, &plain, LANE_PATTERNS.len()).0
        );
    }

    #[test]
    fn a_text_denser_in_ends_than_the_budget_stops_the_pass() {
        let d = dfa(&["a", "[ab]"]);
        let mut cache = PassCache::new(&d);
        let lens = [Some(1), Some(1)];
        // One end every four bytes, plus the base: within the budget.
        let b = "bccc".repeat(ENDS_BASE);
        let ends = known(pass(&d, &mut cache, &b, &lens, ENDS_BASE));
        assert_eq!((ends.count, ends.seen), (ENDS_BASE, vec![false, true]));
        // Two a byte: past it, nothing is known.
        let a = "a".repeat(4 * ENDS_BASE);
        assert!(matches!(
            pass(&d, &mut cache, &a, &lens, ENDS_BASE),
            Pass::Dense
        ));
        // The base lets a short text be denser.
        assert!(matches!(
            pass(&d, &mut cache, "aaaa", &lens, ENDS_BASE),
            Pass::Known(_)
        ));
        assert!(matches!(
            pass(&d, &mut cache, "aaaa", &lens, 0),
            Pass::Dense
        ));
    }

    /// Sixteen overlapping counted repetitions that never match (they end
    /// in a digit), then sixteen two-letter literals; and a text of random
    /// letters with an `é`, on which the first ones build a state at
    /// nearly every byte.
    pub(crate) fn explosive_and_plain() -> (Vec<String>, String) {
        let mut srcs: Vec<String> = (0..16)
            .map(|i| format!("[a-{}][a-z]{{{}}}0", char::from(b'b' + i), 8 + i))
            .collect();
        srcs.extend((0..16).map(|i| format!("q{}", char::from(b'a' + i))));
        let mut text = random_letters(7, 64 << 10);
        text.push('é');
        (srcs, text)
    }

    /// `n` pseudo-random lower-case letters (xorshift from `seed`).
    fn random_letters(seed: u64, n: usize) -> String {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(b'a' + (x % 26) as u8)
            })
            .collect()
    }

    #[test]
    fn where_the_pass_over_all_gives_up_the_halves_still_narrow() {
        let (srcs, text) = explosive_and_plain();
        let srcs: Vec<&str> = srcs.iter().map(String::as_str).collect();
        let tree = Tree::build(&srcs);
        let mut caches = tree.create_caches();
        let lens = vec![Some(2); srcs.len()];
        // Without halves, the one pass gives up: nothing is known.
        let found = tree.run(&mut caches, &text, &lens, ENDS_BASE, false);
        assert_eq!(found.passes, 1);
        assert!(found.known.iter().all(|&k| !k));
        // With them, the literals' half is known, and what it says holds.
        let found = tree.run(&mut caches, &text, &lens, ENDS_BASE, true);
        assert!(found.passes >= 3);
        assert!(found.known[16..].iter().all(|&k| k));
        for (i, src) in srcs.iter().enumerate().skip(16) {
            let at: Vec<usize> = text.match_indices(&src[..2]).map(|(s, _)| s).collect();
            assert_eq!(found.seen[i], !at.is_empty(), "{src}");
            let merged = at.iter().fold(Vec::<(usize, usize)>::new(), |mut v, &s| {
                match v.last_mut() {
                    Some(last) if s <= last.1 => last.1 = s + 2,
                    _ => v.push((s, s + 2)),
                }
                v
            });
            assert_eq!(found.stretches[i], merged, "{src}");
        }
        let occurrences: usize = srcs[16..]
            .iter()
            .map(|src| text.matches(&src[..2]).count())
            .sum();
        assert_eq!(found.count, occurrences);
    }

    /// A kept [`Found`] (an idle cache set's) answers every run as a new
    /// one does, whatever the run before it left: a pass that gave up
    /// after writing ends, a budget spent, lists it kept.
    #[test]
    fn a_kept_found_answers_as_a_new_one() {
        let (srcs, explosive) = explosive_and_plain();
        let srcs: Vec<&str> = srcs.iter().map(String::as_str).collect();
        let tree = Tree::build(&srcs);
        let mut caches = tree.create_caches();
        let lens = vec![Some(2); srcs.len()];
        let many = "qa ".repeat(400);
        let dense = "qaqb".repeat(400);
        let runs: [(&str, bool); 7] = [
            (&explosive, true),
            ("a qa and a qc", false),
            (&many, false),
            (&explosive, false),
            (&dense, false),
            ("qp", true),
            ("nothing here", false),
        ];
        let mut kept = Found::default();
        for (k, &(text, halves)) in runs.iter().enumerate() {
            kept.shed();
            tree.run_into(&mut caches, text, &lens, ENDS_BASE, halves, &mut kept);
            let new = tree.run(&mut caches, text, &lens, ENDS_BASE, halves);
            assert_eq!(kept.known, new.known, "run {k}");
            assert_eq!(kept.seen, new.seen, "run {k}");
            assert_eq!(kept.stretches, new.stretches, "run {k}");
            assert_eq!(kept.ends, new.ends, "run {k}");
            assert_eq!(
                (kept.count, kept.passes),
                (new.count, new.passes),
                "run {k}"
            );
        }
        // The runs above cover each way a pass ends. Right after a pass
        // gave up, the next text's pass finishes: the full cache was reset
        // (kept full, it would give up at once).
        let mut outcome =
            |text: &str, halves| tree.run(&mut caches, text, &lens, ENDS_BASE, halves);
        assert!(outcome(&explosive, false).known.iter().all(|&k| !k));
        let mut long = outcome(&many, false);
        assert!(long.ends[16].len() > KEEP);
        // Going idle, a kept set frees such lists and keeps the short ones.
        long.ends[17] = Vec::with_capacity(KEEP);
        long.shed();
        assert_eq!(
            (long.ends[16].capacity(), long.ends[17].capacity()),
            (0, KEEP)
        );
        let dense_run = outcome(&dense, false);
        assert!(dense_run.known.iter().all(|&k| !k) && dense_run.count > 0);
    }

    #[test]
    fn a_text_that_keeps_building_states_makes_the_pass_give_up() {
        // Twenty overlapping counted repetitions: random letters make
        // nearly every position a new state of the combined automaton.
        let srcs: Vec<String> = (0..20)
            .map(|i| format!("[a-{}][a-z]{{{}}}x", char::from(b'b' + i), 8 + i))
            .collect();
        let srcs: Vec<&str> = srcs.iter().map(String::as_str).collect();
        let d = build(&srcs).unwrap();
        let mut cache = PassCache::new(&d);
        let text = random_letters(1, 1 << 20);
        let lens = vec![None; srcs.len()];
        assert!(matches!(
            pass(&d, &mut cache, &text, &lens, ENDS_BASE),
            Pass::GaveUp
        ));
    }
}
