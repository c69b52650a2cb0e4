//! The combined pass over a pack's patterns ([§6.1](docs/evaluation.md#s6-1), [§11.4](docs/limits.md#s11-4)): one
//! lazy DFA over every pattern's boundary-free form whose overlapping
//! search reports which patterns match and where each match ends. The
//! engine searches only those patterns, near those ends; the pack cost
//! check runs the same pass on its probes. Reads only the text it is given
//! and keeps nothing of it.

use super::NEST_LIMIT;
use regex_automata::hybrid::dfa::{Cache, Config, OverlappingState, DFA};
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
pub fn pass(dfa: &DFA, cache: &mut Cache, text: &str, lens: &[Option<usize>], base: usize) -> Pass {
    let input = Input::new(text);
    let mut state = OverlappingState::start();
    let patterns = lens.len();
    let mut out = Ends {
        seen: vec![false; patterns],
        stretches: vec![Vec::new(); patterns],
        count: 0,
    };
    let budget = base + text.len() / BYTES_PER_END;
    loop {
        if dfa
            .try_search_overlapping_fwd(cache, &input, &mut state)
            .is_err()
        {
            return Pass::GaveUp;
        }
        let Some(m) = state.get_match() else {
            return Pass::Known(out);
        };
        out.count += 1;
        let i = m.pattern().as_usize();
        if out.count > budget || i >= patterns {
            return Pass::Dense;
        }
        out.seen[i] = true;
        if let Some(len) = lens[i] {
            let e = m.offset();
            let s = e.saturating_sub(len);
            let list = &mut out.stretches[i];
            match list.last_mut() {
                Some(last) if s <= last.1 => last.1 = e,
                _ => list.push((s, e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
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
        let mut cache = d.create_cache();
        let text = "x1234 ab ab";
        let lens = [Some(3), Some(2), Some(2)];
        let ends = known(pass(&d, &mut cache, text, &lens, ENDS_BASE));
        assert_eq!(ends.seen, vec![true, true, false]);
        assert_eq!(
            ends.stretches,
            vec![vec![(1, 5)], vec![(6, 8), (9, 11)], vec![]]
        );
        assert_eq!(ends.count, 4);
        // An unbounded pattern is seen, with no stretches.
        let ends = known(pass(
            &d,
            &mut cache,
            text,
            &[None, Some(2), None],
            ENDS_BASE,
        ));
        assert_eq!(ends.seen, vec![true, true, false]);
        assert_eq!(ends.stretches[0], vec![]);
    }

    #[test]
    fn a_text_denser_in_ends_than_the_budget_stops_the_pass() {
        let d = dfa(&["a", "[ab]"]);
        let mut cache = d.create_cache();
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

    #[test]
    fn a_text_that_keeps_building_states_makes_the_pass_give_up() {
        // Twenty overlapping counted repetitions: random letters make
        // nearly every position a new state of the combined automaton.
        let srcs: Vec<String> = (0..20)
            .map(|i| format!("[a-{}][a-z]{{{}}}x", char::from(b'b' + i), 8 + i))
            .collect();
        let srcs: Vec<&str> = srcs.iter().map(String::as_str).collect();
        let d = build(&srcs).unwrap();
        let mut cache = d.create_cache();
        let mut x = 1u64;
        let text: String = (0..(1 << 20))
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(b'a' + (x % 26) as u8)
            })
            .collect();
        let lens = vec![None; srcs.len()];
        assert!(matches!(
            pass(&d, &mut cache, &text, &lens, ENDS_BASE),
            Pass::GaveUp
        ));
    }
}
