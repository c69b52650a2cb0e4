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
//! every end. Here a step is `table[id + class]`, match states included,
//! and their patterns sit in their row.
//!
//! The copy holds only while the lazy DFA's cache does: its state ids name
//! other states once it clears. [`Steps::id`] empties the table after a
//! clear, and a step that clears it reports so ([`Slow::Cleared`]).

use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::hybrid::LazyStateID;
use std::collections::HashMap;

/// A transition the table has not taken yet.
pub const UNKNOWN: u32 = u32::MAX;
/// Flag of a state where patterns end (a match state).
pub const MATCH: u32 = 1 << 31;
/// Flag of a state the pass stops in (dead, or quit on a byte it cannot
/// read).
pub const STOP: u32 = 1 << 30;
/// Both flags: what is left of an id is its row's place in the table.
pub const FLAGS: u32 = MATCH | STOP;
/// A row's first entries: where its patterns start and end in
/// `patterns`; its transitions follow, one per byte class.
const META: usize = 2;
/// Most entries of the table (512 KiB): past it, it empties and starts
/// again (the lazy DFA's own cache gives up well before on text that
/// keeps building states).
pub const CAPACITY: usize = 128 << 10;

/// Why a step left the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slow {
    /// The table emptied (the lazy DFA cleared its cache, or the table was
    /// full): every id but this one, the step's next state, is gone.
    Cleared(u32),
    /// The lazy DFA gave up.
    GaveUp,
}

/// The table, for one automaton and its cache.
#[derive(Debug, Clone)]
pub struct Steps {
    /// Each byte's place in a row: its class, after the row's meta.
    places: [u16; 256],
    /// Entries per row.
    row: usize,
    /// Rows, one per state met: meta, then transitions (ids, or
    /// [`UNKNOWN`]).
    table: Vec<u32>,
    /// Each row's state in the lazy DFA, by row number.
    lazy: Vec<LazyStateID>,
    /// Row of each lazy state met.
    ids: HashMap<LazyStateID, u32>,
    /// The patterns of every match state met, row after row.
    patterns: Vec<u32>,
    /// The cache's clear count the table holds for.
    clears: usize,
}

impl Steps {
    /// An empty table for `dfa`.
    pub fn new(dfa: &DFA) -> Self {
        let classes = dfa.byte_classes();
        let mut places = [0u16; 256];
        for (b, place) in (0..=255u8).zip(places.iter_mut()) {
            *place = u16::from(classes.get(b)) + META as u16;
        }
        Self {
            places,
            row: META + classes.alphabet_len(),
            table: Vec::new(),
            lazy: Vec::new(),
            ids: HashMap::new(),
            patterns: Vec::new(),
            clears: 0,
        }
    }

    /// Empties the table.
    pub fn flush(&mut self) {
        self.table.clear();
        self.lazy.clear();
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
    pub fn id(&mut self, dfa: &DFA, cache: &Cache, sid: LazyStateID) -> (u32, bool) {
        let mut flushed = self.sync(cache);
        if let Some(&id) = self.ids.get(&sid) {
            return (id, flushed);
        }
        if self.table.len() + self.row > CAPACITY {
            self.flush();
            flushed = true;
        }
        let at = self.table.len();
        let start = self.patterns.len();
        if sid.is_match() {
            for k in 0..dfa.match_len(cache, sid) {
                self.patterns
                    .push(dfa.match_pattern(cache, sid, k).as_u32());
            }
        }
        // Both fit: the table holds fewer than 2³⁰ entries, and each
        // state's patterns are the automaton's (at most 2³¹ of them).
        let meta = [start, self.patterns.len()].map(|p| u32::try_from(p).unwrap_or(0));
        self.table.extend_from_slice(&meta);
        self.table.resize(at + self.row, UNKNOWN);
        self.lazy.push(sid);
        let mut id = u32::try_from(at).unwrap_or(0);
        if sid.is_match() {
            id |= MATCH;
        } else if sid.is_dead() || sid.is_quit() {
            id |= STOP;
        }
        self.ids.insert(sid, id);
        (id, flushed)
    }

    /// The next state's id after `byte` from state `id` (an id of this
    /// table), or [`UNKNOWN`] when the table has not taken that step.
    #[inline]
    pub fn next(&self, id: u32, byte: u8) -> u32 {
        let at = (id & !FLAGS) as usize + usize::from(self.places[usize::from(byte)]);
        self.table.get(at).copied().unwrap_or(UNKNOWN)
    }

    /// The next state's id after `byte` from state `id`: from the table,
    /// or else taken by the lazy DFA and written into the table.
    pub fn next_or_step(
        &mut self,
        dfa: &DFA,
        cache: &mut Cache,
        id: u32,
        byte: u8,
    ) -> Result<u32, Slow> {
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
        let at = (id & !FLAGS) as usize + usize::from(self.places[usize::from(byte)]);
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
        one: &mut u32,
        two: &mut u32,
        ones: &mut Vec<(usize, u32)>,
        twos: &mut Vec<(usize, u32)>,
    ) -> usize {
        // Locals, so that the states stay in registers.
        let (table, places) = (self.table.as_slice(), &self.places);
        let (mut a, mut b) = (*one, *two);
        while k < end {
            let (Some(&b1), Some(&b2)) = (bytes.get(k), bytes.get(from + k)) else {
                break;
            };
            let i1 = (a & !FLAGS) as usize + usize::from(places[usize::from(b1)]);
            let i2 = (b & !FLAGS) as usize + usize::from(places[usize::from(b2)]);
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

    /// The lazy state of id `id`.
    pub fn lazy_of(&self, id: u32) -> Option<LazyStateID> {
        self.lazy.get((id & !FLAGS) as usize / self.row).copied()
    }

    /// The patterns that end in state `id` (none unless it has [`MATCH`]).
    #[inline]
    pub fn patterns(&self, id: u32) -> &[u32] {
        let at = (id & !FLAGS) as usize;
        match self.table.get(at..at + META) {
            Some(&[start, end]) => self
                .patterns
                .get(start as usize..end as usize)
                .unwrap_or_default(),
            _ => &[],
        }
    }

    /// Whether state `id` (with [`STOP`]) is the dead state: no pattern
    /// can match from it (else it is the quit state: the pass gives up).
    pub fn is_dead(&self, id: u32) -> bool {
        self.lazy_of(id).is_some_and(|s| s.is_dead())
    }
}
