//! The combined pass's own table of the transitions it has taken
//! ([`super::ends`], [§6.1](docs/evaluation.md#s6-1)): a copy of the lazy DFA's states that the
//! pass met, each with the patterns that end in it, so that a byte costs
//! one read of a shared table whatever the state. Keeps states and
//! pattern numbers, never a byte of text.
//!
//! Why a copy: the lazy DFA's transition needs its cache mutably (it may
//! build the next state), and a state where a pattern ends is tagged, so
//! its patterns are read back through the cache's state list at every
//! end. On text dense with values (forty codons, an end every ten bytes)
//! that made each lane of the pass wait on the cache at every byte and
//! every end. Here a step is `table[4 * (id & !FLAGS) + class]`, match states
//! included, and their patterns are a list beside the table.
//!
//! The copy holds only while the lazy DFA's cache does: its state ids name
//! other states once it clears. [`Steps::id`] empties the table after a
//! clear, and a step that clears it reports so ([`Slow::Cleared`]).

use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::hybrid::LazyStateID;
use std::collections::HashMap;

/// A state's id in the table: where its row starts, in units of four
/// entries (its number times a quarter of the row's length), with
/// [`MATCH`] or [`STOP`] in the two low bits that a row's start leaves
/// free. A step is then `table[4 * (id & !FLAGS) + class]`: one address
/// computation, where a state's number needed a shift by the row's length
/// (in a register) on the way from one state to the next.
pub type Id = u16;
/// A transition the table has not taken yet.
pub const UNKNOWN: Id = Id::MAX;
/// Flag of a state where patterns end (a match state).
pub const MATCH: Id = 1;
/// Flag of a state the pass stops in (dead, or quit on a byte it cannot
/// read).
pub const STOP: Id = 1 << 1;
/// Both flags: what is left of an id is its row's start.
pub const FLAGS: Id = MATCH | STOP;
/// Most entries of the table (512 KiB, as the lazy DFA's cache: at two
/// bytes an entry, it holds more states than that cache, which clears
/// first), and what ids can name: every row starts below 2¹⁶ × 4. Past
/// them, it empties and starts again.
pub const CAPACITY: usize = 1 << 18;

/// Why a step left the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slow {
    /// The table emptied (the lazy DFA cleared its cache, or the table was
    /// full): every id but this one, the step's next state, is gone.
    Cleared(Id),
    /// The lazy DFA gave up.
    GaveUp,
}

/// The table, for one automaton and its cache.
#[derive(Debug, Clone)]
pub struct Steps {
    /// Each byte's class: its place in a row.
    classes: [u8; 256],
    /// A row holds `1 << shift` entries (the alphabet, rounded up to a
    /// power of two, and at least 16 so that a row's start in units of
    /// four leaves the flags' bits free): an id's state number is
    /// `id >> (shift - 2)`.
    shift: u32,
    /// Rows, one per state met: its transitions (ids, or [`UNKNOWN`]). Two
    /// bytes an entry, so that the rows a text meets stay in the fastest
    /// cache (forty codons on dense values meet 177 states).
    table: Vec<Id>,
    /// Per state: its state in the lazy DFA.
    lazy: Vec<LazyStateID>,
    /// Per state: where its patterns start and end in `patterns`.
    ends: Vec<(u32, u32)>,
    /// The state of each lazy state met.
    ids: HashMap<LazyStateID, Id>,
    /// The patterns of every match state met, state after state.
    patterns: Vec<u32>,
    /// The cache's clear count the table holds for.
    clears: usize,
    /// Most states it holds: one less than [`CAPACITY`] leaves rows for,
    /// so that no id is [`UNKNOWN`].
    max_states: usize,
}

impl Steps {
    /// An empty table for `dfa`.
    pub fn new(dfa: &DFA) -> Self {
        let byte_classes = dfa.byte_classes();
        let mut classes = [0u8; 256];
        for (b, class) in (0..=255u8).zip(classes.iter_mut()) {
            *class = byte_classes.get(b);
        }
        let shift = byte_classes
            .alphabet_len()
            .next_power_of_two()
            .trailing_zeros()
            .max(4);
        Self {
            classes,
            shift,
            max_states: (CAPACITY >> shift) - 1,
            table: Vec::new(),
            lazy: Vec::new(),
            ends: Vec::new(),
            ids: HashMap::new(),
            patterns: Vec::new(),
            clears: 0,
        }
    }

    /// Empties the table.
    pub fn flush(&mut self) {
        self.table.clear();
        self.lazy.clear();
        self.ends.clear();
        self.ids.clear();
        self.patterns.clear();
    }

    /// Empties the table if the cache cleared since it was filled; `true`
    /// if it did.
    fn sync(&mut self, cache: &Cache) -> bool {
        let cleared = cache.clear_count() != self.clears;
        if cleared {
            self.flush();
            self.clears = cache.clear_count();
        }
        cleared
    }

    /// The id of lazy state `sid` (read from `cache` just now), with
    /// whether the table emptied first: the ids taken before are then
    /// gone.
    pub fn id(&mut self, dfa: &DFA, cache: &Cache, sid: LazyStateID) -> (Id, bool) {
        let mut flushed = self.sync(cache);
        if let Some(&id) = self.ids.get(&sid) {
            return (id, flushed);
        }
        if self.lazy.len() >= self.max_states {
            self.flush();
            flushed = true;
        }
        let start = self.patterns.len();
        if sid.is_match() {
            for k in 0..dfa.match_len(cache, sid) {
                self.patterns
                    .push(dfa.match_pattern(cache, sid, k).as_u32());
            }
        }
        // Both fit: a state's patterns are the automaton's (fewer than 2³¹),
        // and the table holds at most 2¹⁴ states.
        let [start, end] = [start, self.patterns.len()].map(|p| u32::try_from(p).unwrap_or(0));
        let mut id = Id::try_from(self.lazy.len() << (self.shift - 2)).unwrap_or(0);
        self.table
            .resize(self.table.len() + (1 << self.shift), UNKNOWN);
        self.lazy.push(sid);
        self.ends.push((start, end));
        if sid.is_match() {
            id |= MATCH;
        } else if sid.is_dead() || sid.is_quit() {
            id |= STOP;
        }
        self.ids.insert(sid, id);
        (id, flushed)
    }

    /// Where the step from state `id` on `byte` is in the table.
    #[inline]
    fn at(&self, id: Id, byte: u8) -> usize {
        (usize::from(id & !FLAGS) << 2) + usize::from(self.classes[usize::from(byte)])
    }

    /// The next state's id after `byte` from state `id` (an id of this
    /// table), or [`UNKNOWN`] when the table has not taken that step.
    #[inline]
    pub fn next(&self, id: Id, byte: u8) -> Id {
        self.table
            .get(self.at(id, byte))
            .copied()
            .unwrap_or(UNKNOWN)
    }

    /// The next state's id after `byte` from state `id`: from the table,
    /// or else taken by the lazy DFA and written into the table.
    pub fn next_or_step(
        &mut self,
        dfa: &DFA,
        cache: &mut Cache,
        id: Id,
        byte: u8,
    ) -> Result<Id, Slow> {
        let known = self.next(id, byte);
        if known != UNKNOWN {
            return Ok(known);
        }
        let from = self.lazy_of(id).ok_or(Slow::GaveUp)?;
        let next = dfa
            .next_state(cache, from, byte)
            .map_err(|_| Slow::GaveUp)?;
        let (next, flushed) = self.id(dfa, cache, next);
        if flushed {
            return Err(Slow::Cleared(next));
        }
        let at = self.at(id, byte);
        if let Some(entry) = self.table.get_mut(at) {
            *entry = next;
        }
        Ok(next)
    }

    /// Steps two lanes at once from `k` until `end` (or the first step
    /// either does not know, or that enters a state it stops in): lane one
    /// over `bytes[k..]`, lane two over `bytes[from + k..]`. Each match
    /// state entered is pushed, with the position of the byte that
    /// entered it, to `ones` or `twos`. Returns where it stopped: the
    /// step there is not taken.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    pub fn run_two(
        &self,
        bytes: &[u8],
        (mut k, end, from): (usize, usize, usize),
        one: &mut Id,
        two: &mut Id,
        ones: &mut Vec<(usize, Id)>,
        twos: &mut Vec<(usize, Id)>,
    ) -> usize {
        // Locals, so that the states stay in registers.
        let (table, classes) = (self.table.as_slice(), &self.classes);
        let (mut a, mut b) = (*one, *two);
        while k < end {
            let (Some(&b1), Some(&b2)) = (bytes.get(k), bytes.get(from + k)) else {
                break;
            };
            let i1 = (usize::from(a & !FLAGS) << 2) + usize::from(classes[usize::from(b1)]);
            let i2 = (usize::from(b & !FLAGS) << 2) + usize::from(classes[usize::from(b2)]);
            let n1 = table.get(i1).copied().unwrap_or(UNKNOWN);
            let n2 = table.get(i2).copied().unwrap_or(UNKNOWN);
            if (n1 | n2) & FLAGS != 0 {
                // Unknown has every flag; a stop is left to the caller.
                if (n1 | n2) & STOP != 0 {
                    break;
                }
                if n1 & MATCH != 0 {
                    ones.push((k, n1));
                }
                if n2 & MATCH != 0 {
                    twos.push((from + k, n2));
                }
            }
            (a, b) = (n1, n2);
            k += 1;
        }
        (*one, *two) = (a, b);
        k
    }

    /// A table that holds at most `states` states, for tests of how it
    /// empties when full.
    #[cfg(test)]
    pub fn with_limit(dfa: &DFA, states: usize) -> Self {
        let steps = Self::new(dfa);
        Self {
            max_states: states.min(steps.max_states),
            ..steps
        }
    }

    /// The lazy state of id `id`.
    pub fn lazy_of(&self, id: Id) -> Option<LazyStateID> {
        self.lazy.get(usize::from(id >> (self.shift - 2))).copied()
    }

    /// The patterns that end in state `id` (none unless it has [`MATCH`]).
    #[inline]
    pub fn patterns(&self, id: Id) -> &[u32] {
        match self.ends.get(usize::from(id >> (self.shift - 2))) {
            Some(&(start, end)) => self
                .patterns
                .get(start as usize..end as usize)
                .unwrap_or_default(),
            None => &[],
        }
    }

    /// Whether state `id` (with [`STOP`]) is the dead state: no pattern
    /// can match from it (else it is the quit state: the pass gives up).
    pub fn is_dead(&self, id: Id) -> bool {
        self.lazy_of(id).is_some_and(|s| s.is_dead())
    }
}
