//! A codon's group read off its match without a capture search
//! ([§16.1](docs/codons.md#s16-1)), for two shapes of pattern:
//!
//! - `(?:^|[^0-9])([0-9]{9})(?:$|[^0-9])`, which the curated packs use to
//!   keep a value from being cut out of a longer run: at most one character
//!   before the group and one after it, from sets that no first (or last)
//!   character of the group can be; the group is the match less those
//!   characters.
//! - `\b(?:password|secret)\s*[:=]\s*([^\s"]{8,64})`: the group ends the
//!   pattern. Two anchored searches of the match (the part before the
//!   group, then the group from where that part ends) find the split a
//!   capture search finds, or say they cannot and the caller runs it.
//!
//! Syntax analysis and searches of the one match it is handed only; never
//! prints a pattern.

use super::NEST_LIMIT;
use regex_automata::meta::Regex;
use regex_automata::{Anchored, Input};
use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind};

/// How a codon's group is read off its match.
#[derive(Clone)]
pub enum Affixes {
    /// The characters that may sit before and after the group in a match:
    /// a match's first character is the one before the group exactly when
    /// it is in `before` (no group starts with one), its last the one
    /// after exactly when it is in `after` (no group ends with one).
    Classes {
        /// See above.
        before: ClassUnicode,
        /// See above.
        after: ClassUnicode,
    },
    /// The group ends the pattern: `head` is the pattern before it, `tail`
    /// the group's own pattern ([`Affixes::tail_of`]).
    Tail {
        /// The part of the pattern before the group.
        head: Regex,
        /// The group's pattern.
        tail: Regex,
    },
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
        Self::classes_of(&hir, group).or_else(|| Self::tail_of(&hir, group))
    }

    /// [`Affixes::Classes`], when the pattern has that shape.
    fn classes_of(hir: &Hir, group: usize) -> Option<Self> {
        let parts: &[Hir] = match hir.kind() {
            HirKind::Concat(parts) => parts,
            _ => std::slice::from_ref(hir),
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
        Some(Self::Classes { before, after })
    }

    /// [`Affixes::Tail`], when the pattern is a concatenation whose last
    /// part is group `group` and which has a part before it.
    ///
    /// Why the two searches find the capture search's split of a
    /// leftmost-first match `s..e`: that search takes the first way
    /// through the pattern, in order of preference, that matches; the ways
    /// through the head come first. A way through the head that ends past
    /// `e`, or before which the group cannot match, is not the one taken
    /// (a way through it would be a preferred match). So the taken way is
    /// the head's preferred match from `s` within `s..e`, if the group
    /// matches from its end; and the group's preferred match from there
    /// within `..e` then ends at `e`. When either search finds nothing (or
    /// the group's match ends elsewhere), [`Affixes::group_of`] says so
    /// and the caller runs the capture search.
    pub fn tail_of(hir: &Hir, group: usize) -> Option<Self> {
        let HirKind::Concat(parts) = hir.kind() else {
            return None;
        };
        let (last, head) = parts.split_last()?;
        let HirKind::Capture(cap) = last.kind() else {
            return None;
        };
        if cap.index as usize != group || head.is_empty() {
            return None;
        }
        let head = Hir::concat(head.to_vec());
        Some(Self::Tail {
            head: super::build(&head.to_string()).ok()?,
            tail: super::build(&cap.sub.to_string()).ok()?,
        })
    }

    /// Whether [`Affixes::group_of`] always answers.
    pub fn always(&self) -> bool {
        matches!(self, Self::Classes { .. })
    }

    /// The group's span in the match `text[s..e]`; `None` when it must be
    /// found by a capture search (only for [`Affixes::Tail`]).
    pub fn group_of(&self, text: &str, s: usize, e: usize) -> Option<(usize, usize)> {
        match self {
            Self::Classes { before, after } => Some(classes_group(before, after, text, s, e)),
            Self::Tail { head, tail } => {
                let anchored = |from, to| Input::new(text).range(from..to).anchored(Anchored::Yes);
                let h = head.search(&anchored(s, e))?;
                let g = tail.search(&anchored(h.end(), e))?;
                (h.start() == s && g.end() == e).then_some((g.start(), e))
            }
        }
    }
}

/// [`Affixes::Classes`]'s group in the match `text[s..e]`.
fn classes_group(
    before: &ClassUnicode,
    after: &ClassUnicode,
    text: &str,
    s: usize,
    e: usize,
) -> (usize, usize) {
    let Some(m) = text.get(s..e) else {
        return (s, e);
    };
    let mut vs = s;
    if let Some(c) = m.chars().next().filter(|&c| holds(before, c)) {
        vs += c.len_utf8();
    }
    let mut ve = e;
    if let Some(c) = text
        .get(vs..e)
        .and_then(|g| g.chars().next_back())
        .filter(|&c| holds(after, c))
    {
        ve -= c.len_utf8();
    }
    (vs, ve)
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
            assert!(!Affixes::of(src, g).is_some_and(|a| a.always()), "{src}");
        }
        let a = Affixes::of(SHAPED[0], 1).unwrap();
        assert_eq!(a.group_of("x123456789y", 0, 11), Some((1, 10)));
        assert_eq!(a.group_of("123456789", 0, 9), Some((0, 9)));
        assert_eq!(a.group_of("é123456789", 0, 11), Some((2, 11)));
    }

    /// Patterns whose group ends them, among them some where the head's
    /// preferred match leaves the group nothing (`x*(x{2,3})`) or is not
    /// the one the match takes (`(a|ab)(bc|c)` on `abc`).
    const TAILS: [&str; 6] = [
        r#"(?i)\b(?:password|passwd|secret)\s*[:=]\s*"?([^\s"]{2,8})"#,
        r"x*(x{2,3})",
        r"(a|ab)(bc|c)",
        r"[a-z]+=([a-z0-9]+)",
        r"(?:é|e)\s?([0-9]+|x)",
        r"(?:\b[a-z]+\b)\s+([a-z]+)",
    ];

    #[test]
    fn a_group_that_ends_the_pattern_is_read_off_two_searches() {
        for src in TAILS {
            let g = Regex::new(src).unwrap().captures_len() - 1;
            let a = Affixes::of(src, g).unwrap();
            assert!(!a.always(), "{src}");
        }
        // The group not last, or a part after it that is no affix.
        assert!(Affixes::of(r"a([0-9]+)bc", 1).is_none());
        assert!(Affixes::of(r"([0-9]+)x*", 1).is_none());
        let a = Affixes::of(TAILS[0], 1).unwrap();
        let text = "my Password: \"hunter22\" ok";
        let m = Regex::new(TAILS[0]).unwrap().find(text).unwrap();
        assert_eq!(a.group_of(text, m.start(), m.end()), Some((14, 22)));
        // The head's preferred match takes every `x`: the caller must search.
        let a = Affixes::of(TAILS[1], 1).unwrap();
        assert_eq!(a.group_of("xxxx", 0, 4), None);
    }

    /// Tail matches compared, and those read off the two searches.
    static TAIL_MATCHED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    static TAIL_READ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    #[test]
    fn the_tail_property_test_compares_and_reads_matches() {
        the_tail_group_is_the_captured_one();
        let n = TAIL_MATCHED.load(std::sync::atomic::Ordering::Relaxed);
        let read = TAIL_READ.load(std::sync::atomic::Ordering::Relaxed);
        assert!(n > 50 && read > n / 2, "{read} of {n}");
    }

    /// A span of a text, as byte offsets.
    type Span = (usize, usize);

    /// Every match of `src` in `text`, with the span a capture search of
    /// the match gives its group `g` (what a reader must agree with).
    fn captured(src: &str, g: usize, text: &str) -> Vec<(Span, Option<Span>)> {
        let re = Regex::new(src).unwrap();
        let mut caps = re.create_captures();
        re.find_iter(text)
            .map(|m| {
                let input = Input::new(text)
                    .range(m.start()..m.end())
                    .anchored(Anchored::Yes);
                re.search_captures(&input, &mut caps);
                (
                    (m.start(), m.end()),
                    caps.get_group(g).map(|s| (s.start, s.end)),
                )
            })
            .collect()
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
            let a = Affixes::of(src, 1).unwrap();
            let matches = captured(src, 1, &text);
            for &((s, e), want) in &matches {
                prop_assert_eq!(a.group_of(&text, s, e), want, "{}", src);
            }
            MATCHED.fetch_add(matches.len(), std::sync::atomic::Ordering::Relaxed);
        }

        /// A tail group, when the two searches answer, is the span a
        /// capture search of the match gives.
        #[test]
        fn the_tail_group_is_the_captured_one(
            k in 0usize..TAILS.len(),
            text in "(password|Secret|x{1,5}|abc|ab|a|c|bc|=|: ?|\"|é|e|[0-9]{1,3}|[a-z]{1,4}|[ \n\t]){0,10}",
        ) {
            let src = TAILS[k];
            let g = Regex::new(src).unwrap().captures_len() - 1;
            let a = Affixes::of(src, g).unwrap();
            let matches = captured(src, g, &text);
            let mut read = 0;
            for &((s, e), want) in &matches {
                if let Some(span) = a.group_of(&text, s, e) {
                    read += 1;
                    prop_assert_eq!(Some(span), want, "{}", src);
                }
            }
            let seen = matches.len();
            TAIL_MATCHED.fetch_add(seen, std::sync::atomic::Ordering::Relaxed);
            TAIL_READ.fetch_add(read, std::sync::atomic::Ordering::Relaxed);
        }
    }
}
