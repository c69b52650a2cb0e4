//! A codon's group read off its match without a capture search, for the
//! patterns shaped `(?:^|[^0-9])([0-9]{9})(?:$|[^0-9])` that the curated
//! packs use to keep a value from being cut out of a longer run
//! ([§16.1](docs/codons.md#s16-1)): at most one character before the
//! group and one after it, from sets that no first (or last) character
//! of the group can be. Syntax analysis only: it never sees a text's
//! matches but the one it is handed, and never prints a pattern.

use super::NEST_LIMIT;
use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind};

/// The characters that may sit before and after the group in a match: a
/// match's first character is the one before the group exactly when it is
/// in `before` (no group starts with one), its last the one after exactly
/// when it is in `after` (no group ends with one).
#[derive(Clone)]
pub struct Affixes {
    before: ClassUnicode,
    after: ClassUnicode,
}

impl std::fmt::Debug for Affixes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The classes come from a pattern, which is policy: never printed.
        f.debug_struct("Affixes").finish_non_exhaustive()
    }
}

impl Affixes {
    /// The affixes of group `group` of the pattern source `src` (as
    /// compiled), or `None` when the pattern is not of that shape: its
    /// top level the group, with at most one part before it and one after,
    /// each an empty assertion or one character of a class; the group
    /// never empty; and neither affix's characters among the group's first
    /// (or last) ones.
    pub fn of(src: &str, group: usize) -> Option<Self> {
        let hir = regex_syntax::ParserBuilder::new()
            .nest_limit(NEST_LIMIT)
            .build()
            .parse(src)
            .ok()?;
        let parts: &[Hir] = match hir.kind() {
            HirKind::Concat(parts) => parts,
            _ => std::slice::from_ref(&hir),
        };
        let at = parts
            .iter()
            .position(|p| matches!(p.kind(), HirKind::Capture(c) if c.index as usize == group))?;
        let HirKind::Capture(cap) = parts[at].kind() else {
            return None;
        };
        let (before, after) = match (&parts[..at], &parts[at + 1..]) {
            ([], []) => (None, None),
            ([b], []) => (Some(b), None),
            ([], [a]) => (None, Some(a)),
            ([b], [a]) => (Some(b), Some(a)),
            _ => return None,
        };
        let before = before.map_or_else(|| Some(ClassUnicode::empty()), affix)?;
        let after = after.map_or_else(|| Some(ClassUnicode::empty()), affix)?;
        let mut first = ends(&cap.sub, End::First)?;
        let mut last = ends(&cap.sub, End::Last)?;
        first.intersect(&before);
        last.intersect(&after);
        if first.iter().next().is_some() || last.iter().next().is_some() {
            return None;
        }
        Some(Self { before, after })
    }

    /// The group's span in the match `text[s..e]`.
    pub fn group_of(&self, text: &str, s: usize, e: usize) -> (usize, usize) {
        let Some(m) = text.get(s..e) else {
            return (s, e);
        };
        let mut vs = s;
        if let Some(c) = m.chars().next().filter(|&c| holds(&self.before, c)) {
            vs += c.len_utf8();
        }
        let mut ve = e;
        if let Some(c) = text
            .get(vs..e)
            .and_then(|g| g.chars().next_back())
            .filter(|&c| holds(&self.after, c))
        {
            ve -= c.len_utf8();
        }
        (vs, ve)
    }
}

/// Whether `class` holds `c`.
fn holds(class: &ClassUnicode, c: char) -> bool {
    class
        .ranges()
        .binary_search_by(|r| {
            if r.end() < c {
                std::cmp::Ordering::Less
            } else if r.start() > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// The characters one affix may consume: none for an assertion, one of a
/// class or a one-character literal, or the alternatives of those; `None`
/// for anything else.
fn affix(hir: &Hir) -> Option<ClassUnicode> {
    match hir.kind() {
        HirKind::Look(_) | HirKind::Empty => Some(ClassUnicode::empty()),
        HirKind::Class(Class::Unicode(c)) => Some(c.clone()),
        HirKind::Literal(_) => one_char(hir),
        HirKind::Alternation(alts) => alts.iter().try_fold(ClassUnicode::empty(), |mut acc, a| {
            acc.union(&affix(a)?);
            Some(acc)
        }),
        _ => None,
    }
}

/// The literal's one character as a class.
fn one_char(hir: &Hir) -> Option<ClassUnicode> {
    let HirKind::Literal(lit) = hir.kind() else {
        return None;
    };
    let s = std::str::from_utf8(&lit.0).ok()?;
    let mut chars = s.chars();
    let c = chars.next()?;
    chars
        .next()
        .is_none()
        .then(|| ClassUnicode::new([ClassUnicodeRange::new(c, c)]))
}

/// Which end of a match [`ends`] looks at.
#[derive(Clone, Copy)]
enum End {
    First,
    Last,
}

/// Every character a match of `hir` may begin (or end) with, when every
/// match is non-empty and that set can be read off the syntax; `None`
/// otherwise (the caller then keeps the capture search).
fn ends(hir: &Hir, end: End) -> Option<ClassUnicode> {
    match hir.kind() {
        HirKind::Class(Class::Unicode(c)) => Some(c.clone()),
        HirKind::Literal(lit) => {
            let s = std::str::from_utf8(&lit.0).ok()?;
            let c = match end {
                End::First => s.chars().next()?,
                End::Last => s.chars().next_back()?,
            };
            Some(ClassUnicode::new([ClassUnicodeRange::new(c, c)]))
        }
        HirKind::Repetition(r) if r.min >= 1 => ends(&r.sub, end),
        HirKind::Capture(c) => ends(&c.sub, end),
        HirKind::Concat(parts) => {
            // The outer part must not be empty-able; assertions are not
            // allowed (they consume nothing and would hide the next part).
            let outer = match end {
                End::First => parts.first()?,
                End::Last => parts.last()?,
            };
            ends(outer, end)
        }
        HirKind::Alternation(alts) => alts.iter().try_fold(ClassUnicode::empty(), |mut acc, a| {
            acc.union(&ends(a, end)?);
            Some(acc)
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use regex_automata::meta::Regex;
    use regex_automata::{Anchored, Input};

    /// Patterns of the shape, and others that are not.
    const SHAPED: [&str; 6] = [
        r"(?:^|[^0-9])([0-9]{9})(?:$|[^0-9])",
        r"(?:^|[^0-9])([12][0-9]{9})(?:$|[^0-9])",
        r"(?:^|[^0-9])([0-9]{3} [0-9]{3} [0-9]{3})(?:$|[^0-9])",
        r"(?:^|[^A-Z0-9])([A-Z]{2}[0-9]{2}(?: ?[0-9]{4}){2})",
        r"(?m)(?:^|[\s,;])(é[a-z]{2,4}[0-9])(?:$|[\s.])",
        r"x([0-9]+)",
    ];

    #[test]
    fn the_shape_is_recognized_and_the_rest_refused() {
        for src in SHAPED {
            assert!(Affixes::of(src, 1).is_some(), "{src}");
        }
        for (src, g) in [
            // A group that may start with an affix's character.
            (r"(?:^|[^0-9])([0-9a-z]+)(?:$|[a-z])", 1),
            (r"(?:^|[^0-9])([0-9]{3}|[a-f])(?:$|[^0-9])", 1),
            // Two parts before the group, a group that may be empty, not group 1.
            (r"a(?:^|[^0-9])([0-9]{9})", 1),
            (r"(?:^|[^0-9])([0-9]*)(?:$|[^0-9])", 1),
            (r"([0-9])([0-9])", 2),
            (r"(?:^|ab)([0-9]{9})", 1),
            (r"(?:^|[^0-9])(\b[0-9]{9})", 1),
        ] {
            assert!(Affixes::of(src, g).is_none(), "{src}");
        }
        let a = Affixes::of(SHAPED[0], 1).unwrap();
        assert_eq!(a.group_of("x123456789y", 0, 11), (1, 10));
        assert_eq!(a.group_of("123456789", 0, 9), (0, 9));
        assert_eq!(a.group_of("é123456789", 0, 11), (2, 11));
    }

    /// Matches the property test compared (it must compare some).
    static MATCHED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    #[test]
    fn the_property_test_compares_matches() {
        the_group_is_the_captured_one();
        let n = MATCHED.load(std::sync::atomic::Ordering::Relaxed);
        assert!(n > 50, "{n}");
    }

    proptest! {
        /// The span read off the affixes is the span a capture search of
        /// every match gives.
        #[test]
        fn the_group_is_the_captured_one(
            k in 0usize..SHAPED.len(),
            text in "([0-9]{9}|[12][0-9]{9}|[0-9]{3} [0-9]{3} [0-9]{3}|[A-Z]{2}[0-9]{2} ?[0-9]{4} ?[0-9]{4}|é[a-z]{2,4}[0-9]|x[0-9]{1,3}|[0-9]{1,3}|[a-zA-Z]{1,3}|[ ,.;\n]){0,8}",
        ) {
            let src = SHAPED[k];
            let re = Regex::new(src).unwrap();
            let a = Affixes::of(src, 1).unwrap();
            let mut caps = re.create_captures();
            let mut seen = 0;
            for m in re.find_iter(&text) {
                seen += 1;
                let input = Input::new(&text).range(m.start()..m.end()).anchored(Anchored::Yes);
                re.search_captures(&input, &mut caps);
                let want = caps.get_group(1).map(|g| (g.start, g.end));
                prop_assert_eq!(Some(a.group_of(&text, m.start(), m.end())), want, "{}", src);
            }
            MATCHED.fetch_add(seen, std::sync::atomic::Ordering::Relaxed);
        }
    }
}
