//! Where each pattern's matches can be ([§6.1](docs/evaluation.md#s6-1), issue 22): the
//! combined pass ([`crate::pattern::ends`]) reports where each pattern's
//! matches end, and a pattern whose matches are at
//! most `len` bytes long is then searched only in the stretches
//! `[end - len, end]` around them, merged. Reads only the payload it is
//! given; decides nothing and never keeps a span past the call.
//!
//! Why the stretches find exactly the matches a search of the whole text
//! finds: every exact match is a match of the boundary-free form with the
//! same span, so it ends at a reported end `e` and starts at or after
//! `e - len`; it lies inside one merged stretch, together with every other
//! match that starts where it starts. A search confined to a stretch (its
//! look-around still sees the whole text) therefore meets the same
//! candidates, in the same order of preference, as the whole-text search,
//! and no match lies between stretches.

use regex_automata::hybrid::dfa::{Cache as RevCache, DFA};
use regex_automata::meta::{Cache, Regex};
use regex_automata::{Anchored, Input};
use std::borrow::Cow;

/// `stretches` (merged `[end - len, end]`, ascending, from the combined
/// pass) with their starts moved back to a code-point boundary, or `None`
/// when together they cover at least half of the text: one search of the
/// whole text is then cheaper. Borrowed when no start moves (always on
/// ASCII text): the pass merged them by the same rule.
pub(super) fn confined<'a>(
    text: &str,
    stretches: &'a [(usize, usize)],
) -> Option<Cow<'a, [(usize, usize)]>> {
    let covered: usize = stretches.iter().map(|(s, e)| e - s).sum();
    if covered.saturating_mul(2) >= text.len() {
        return None;
    }
    if stretches.iter().all(|&(s, _)| text.is_char_boundary(s)) {
        return Some(Cow::Borrowed(stretches));
    }
    let mut out: Vec<(usize, usize)> = Vec::with_capacity(stretches.len());
    for &(mut s, e) in stretches {
        while !text.is_char_boundary(s) {
            s -= 1;
        }
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = e,
            _ => out.push((s, e)),
        }
    }
    Some(Cow::Owned(out))
}

/// What the combined pass learnt of one pattern whose matches are at most
/// `len` bytes long: its [`confined`] stretches, and every end it reported
/// there, ascending.
pub(super) struct Near<'a> {
    pub stretches: Cow<'a, [(usize, usize)]>,
    pub ends: &'a [usize],
    pub len: usize,
    /// The length of every match, when they all have one and the ends are
    /// those of exact matches (the pass over ASCII text, which runs each
    /// pattern with ASCII word boundaries: on ASCII text, the exact
    /// pattern).
    pub fixed: Option<usize>,
    /// As `fixed`, for the matches that neither start at the text's start
    /// nor end at its end ([`crate::pattern::CompiledPattern::interior_len`]).
    pub interior: Option<usize>,
}

/// The pattern's leftmost-first matches in `text`, searched only in the
/// stretches and only while a reported end lies ahead (`re` has no empty
/// match: the pattern has a bounded length because its least is positive).
///
/// Each search from `pos` starts at `next − len` when that is later, `next`
/// being the first reported end past `pos`: a match starting before it
/// would end before `next` and past `pos`, where no end was reported, so
/// the search meets the same leftmost-first match; and with no end past
/// `pos` in the stretch, no match is left there (a whole-text search would
/// end each stretch with a search that finds nothing).
///
/// With `fixed` (every match `len` bytes long, and the ends those of exact
/// matches), a single end left in a stretch is a match's end: its start is
/// `len` bytes before, and no search is needed.
///
/// `gate(a, b)` says whether a match within `text[a..b]` can count; where
/// it says no for the last reported end of a stretch, the match ending
/// there is not searched for (nor returned): being the stretch's last, it
/// decides no later match (the next search starts past the stretch
/// whether it exists or not).
pub(super) fn search(
    re: &Regex,
    cache: &mut Cache,
    mut rev: Option<(&DFA, &mut RevCache)>,
    text: &str,
    found: &Near<'_>,
    gate: &mut dyn FnMut(usize, usize) -> bool,
    mut out: Vec<(usize, usize)>,
) -> Vec<(usize, usize)> {
    // The list of an earlier text, for its memory.
    out.clear();
    let mut k = 0;
    for &(a, b) in found.stretches.iter() {
        let mut pos = a;
        loop {
            while found.ends.get(k).is_some_and(|&e| e <= pos) {
                k += 1;
            }
            let Some(&next) = found.ends.get(k).filter(|&&e| e <= b) else {
                break;
            };
            // `pos` is a code point boundary (a stretch's start or a
            // match's end), so this stops at `pos` at the latest.
            let mut from = pos.max(next.saturating_sub(found.len));
            while !text.is_char_boundary(from) {
                from -= 1;
            }
            // One reported end left in the stretch: every match from
            // `from` ends there, so the leftmost-first one starts at the
            // leftmost start of a match that ends there, which the reverse
            // DFA finds, anchored at that end (a forward search would scan
            // to it first). On a give-up (Unicode `\b` on non-ASCII text)
            // the forward search answers.
            let single = found.ends.get(k + 1).is_none_or(|&e| e > b);
            if single && !gate(from, next) {
                break;
            }
            // Every match has `len` bytes and one ends at `next`: it is the
            // one, if it starts after the last. Away from the text's edges
            // (no match ending at `next` can start at 0, being at most
            // `found.len` long), `interior` is every match's length.
            let fixed = found.fixed.or_else(|| {
                found
                    .interior
                    .filter(|_| next > found.len && next < text.len())
            });
            if let (true, Some(len)) = (single, fixed) {
                match next.checked_sub(len).filter(|&s| s >= pos) {
                    Some(s) => {
                        out.push((s, next));
                        pos = next;
                        continue;
                    }
                    None => break,
                }
            }
            if let (true, Some((dfa, rc))) = (single, rev.as_mut()) {
                let input = Input::new(text).range(from..next).anchored(Anchored::Yes);
                match dfa.try_search_rev(rc, &input) {
                    Ok(Some(start)) if start.offset() < next => {
                        out.push((start.offset(), next));
                        pos = next;
                        continue;
                    }
                    Ok(_) => break,
                    Err(_) => {}
                }
            }
            match re.search_with(cache, &Input::new(text).range(from..b)) {
                Some(m) if m.end() > pos => {
                    out.push((m.start(), m.end()));
                    pos = m.end();
                }
                _ => break,
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern;
    use regex_automata::Input;

    #[test]
    fn confined_stretches_start_on_a_code_point_and_stop_at_half_the_text() {
        let text = "a".repeat(100);
        // On a code point already: the pass's stretches, not a copy.
        let stretches = [(5, 12), (35, 40)];
        let got = confined(&text, &stretches);
        assert!(matches!(got, Some(Cow::Borrowed(s)) if s == stretches));
        assert_eq!(confined(&text, &[(30, 60), (69, 99)]), None);
        // A start inside a code point moves back to its first byte, and
        // may then meet the stretch before.
        let text = format!("{}é{}", "a".repeat(50), "b".repeat(50));
        let owned = |v: &[(usize, usize)]| Some(Cow::Owned(v.to_vec()));
        assert_eq!(confined(&text, &[(51, 55)]), owned(&[(50, 55)]));
        assert_eq!(confined(&text, &[(45, 50), (51, 55)]), owned(&[(45, 55)]));
    }

    /// `search` over the pass's stretches and ends finds what a search of
    /// the whole text finds, where a stretch holds several ends, where the
    /// leftmost-first match ends before the last of them, and where a match
    /// starts before the previous one's end.
    #[test]
    fn searching_up_to_the_last_end_finds_every_match() {
        let cases: &[(&str, usize, &[&str])] = &[
            // Leftmost-first takes `ab` though `abcd` ends later.
            ("ab|abcd", 4, &["abcd abcd", "xxabcdab", "ab", "abcdabcd"]),
            // Overlapping candidates: the pass reports ends the matches skip.
            (
                "[0-9]{3}",
                3,
                &["12345678", "1 22 333 4444 55555", "9999999999 99"],
            ),
            (
                "a[0-9]{1,3}",
                4,
                &["a12a3 a4567", "aaaa1", "a1a1a1a1", "xa999a"],
            ),
            ("é[a-z]{2}", 4, &["éabéc éxyz", "aéééabc"]),
            // Every match four bytes long: a single end is a match's end.
            (
                r"(?-u:\b)[A-Z][0-9]{3}(?-u:\b)",
                4,
                &["A123 B4567 C890", "AA123 A12 Z999x Q000", "B1234 C123"],
            ),
            ("[0-9]{3}", 3, &["1 22 333 4444 55555 666"]),
            // Five bytes long but at the text's edges: `interior`.
            (
                "(?:^|[^0-9])([0-9]{3})(?:$|[^0-9])",
                5,
                &[
                    "123 456",
                    "a123b4567c890",
                    "12",
                    "x123",
                    "1234 567 89 012",
                    "123",
                    // Alone in their stretches, at either edge.
                    "123 abcdefgh 456 xyz",
                    "abcdefgh x456",
                ],
            ),
        ];
        for &(src, len, texts) in cases {
            let re = pattern::build(src).unwrap();
            let dfa = crate::pattern::ends::build(&[src]).unwrap();
            let mut dfa_cache = crate::pattern::ends::PassCache::new(&dfa);
            let mut cache = re.create_cache();
            let rev = crate::pattern::build_reverse(src).unwrap();
            let mut rev_cache = rev.create_cache();
            for &text in texts {
                let want: Vec<(usize, usize)> =
                    re.find_iter(text).map(|m| (m.start(), m.end())).collect();
                let crate::pattern::ends::Pass::Known(ends) =
                    crate::pattern::ends::pass(&dfa, &mut dfa_cache, text, &[Some(len)], 1000)
                else {
                    panic!("the pass gave up on {text:?}");
                };
                // Every stretch, however much of the text it covers.
                let stretches: Vec<(usize, usize)> = ends.stretches[0]
                    .iter()
                    .map(|&(mut s, e)| {
                        while !text.is_char_boundary(s) {
                            s -= 1;
                        }
                        (s, e)
                    })
                    .collect();
                let mut found = Near {
                    stretches: Cow::Owned(stretches),
                    ends: &ends.ends[0],
                    len,
                    fixed: None,
                    interior: None,
                };
                // Forward from each stretch's start, into `spare`.
                let forward = |cache: &mut Cache, found: &Near<'_>, spare| {
                    search(&re, cache, None, text, found, &mut |_, _| true, spare)
                };
                // A list of an earlier text: emptied first.
                assert_eq!(
                    forward(&mut cache, &found, vec![(7, 9), (1, 2)]),
                    want,
                    "{src} on {text:?}"
                );
                assert_eq!(
                    search(
                        &re,
                        &mut cache,
                        Some((&rev, &mut rev_cache)),
                        text,
                        &found,
                        &mut |_, _| true,
                        Vec::new()
                    ),
                    want,
                    "{src} on {text:?}, backward from single ends"
                );
                // The pass here runs the exact pattern: its ends are those
                // of exact matches.
                let compiled = pattern::compile(src, &[]).unwrap();
                let lengths = [
                    (compiled.fixed_len, None, "of fixed length"),
                    (
                        None,
                        compiled.interior_len,
                        "of fixed length inside the text",
                    ),
                ];
                for (fixed, interior, what) in lengths {
                    if fixed.or(interior).is_some() {
                        (found.fixed, found.interior) = (fixed, interior);
                        let got = forward(&mut cache, &found, Vec::new());
                        assert_eq!(got, want, "{src} on {text:?}, {what}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_confined_search_still_sees_look_around_outside_it() {
        // What the stretches rely on: `\b` and `$` at a stretch's end look
        // at the text past it.
        let re = pattern::build(r"abc\b").unwrap();
        assert!(re.find(Input::new("abcd").range(0..3)).is_none());
        assert!(re.find(Input::new("abc d").range(0..3)).is_some());
        let re = pattern::build(r"abc$").unwrap();
        assert!(re.find(Input::new("abcd").range(0..3)).is_none());
    }
}
