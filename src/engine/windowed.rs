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

/// `stretches` (merged `[end - len, end]`, ascending, from the combined
/// pass) with their starts moved back to a code-point boundary, or `None`
/// when together they cover at least half of the text: one search of the
/// whole text is then cheaper.
pub(super) fn confined(text: &str, stretches: &[(usize, usize)]) -> Option<Vec<(usize, usize)>> {
    let covered: usize = stretches.iter().map(|(s, e)| e - s).sum();
    if covered.saturating_mul(2) >= text.len() {
        return None;
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
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern;
    use regex_automata::Input;

    #[test]
    fn confined_stretches_start_on_a_code_point_and_stop_at_half_the_text() {
        let text = "a".repeat(100);
        assert_eq!(
            confined(&text, &[(5, 12), (35, 40)]),
            Some(vec![(5, 12), (35, 40)])
        );
        assert_eq!(confined(&text, &[(30, 60), (69, 99)]), None);
        // A start inside a code point moves back to its first byte, and
        // may then meet the stretch before.
        let text = format!("{}é{}", "a".repeat(50), "b".repeat(50));
        assert_eq!(confined(&text, &[(51, 55)]), Some(vec![(50, 55)]));
        assert_eq!(confined(&text, &[(45, 50), (51, 55)]), Some(vec![(45, 55)]));
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
