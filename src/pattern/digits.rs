//! Runs of ASCII digits ([§6.1](docs/evaluation.md#s6-1)): the longest run every match of a
//! pattern must hold, bounded from below from its syntax tree, and the
//! longest run in a text. A text whose runs are all shorter cannot match,
//! and the engine does not search it for that pattern: a 70-byte prompt
//! with a phone number settles the codons of 9-, 10- and 12-digit
//! identifiers without running them. Reads only a syntax tree or a text's
//! bytes; decides nothing.

use regex_syntax::hir::{Class, Hir, HirKind};

/// Copies of a repeated piece the bound looks at: a bound over fewer copies
/// is smaller, so still a bound, and the walk stays short.
const MAX_COPIES: u32 = 64;

/// What every string a piece of a pattern matches holds, as lower bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Runs {
    /// Every string is digits only (the empty string too).
    digits: bool,
    /// The shortest string's length, when `digits`.
    len: usize,
    /// The run of digits every string starts with, at least.
    first: usize,
    /// The run every string ends with, at least.
    last: usize,
    /// The longest run every string holds, at least.
    most: usize,
}

impl Runs {
    /// Digits only, `len` of them at least (0: the empty string, or an
    /// assertion, which matches no character).
    fn digits(len: usize) -> Self {
        Self {
            digits: true,
            len,
            first: len,
            last: len,
            most: len,
        }
    }

    /// Nothing known but that some string holds a non-digit.
    const OTHER: Self = Self {
        digits: false,
        len: 0,
        first: 0,
        last: 0,
        most: 0,
    };

    /// The strings of `self` followed by those of `next`: runs join across
    /// the seam.
    fn then(self, next: Self) -> Self {
        if self.digits && next.digits {
            return Self::digits(self.len.saturating_add(next.len));
        }
        Self {
            digits: false,
            len: 0,
            first: if self.digits {
                self.len.saturating_add(next.first)
            } else {
                self.first
            },
            last: if next.digits {
                next.len.saturating_add(self.last)
            } else {
                next.last
            },
            most: self
                .most
                .max(next.most)
                .max(self.last.saturating_add(next.first)),
        }
    }

    /// The strings of either.
    fn or(self, other: Self) -> Self {
        if self.digits && other.digits {
            return Self::digits(self.len.min(other.len));
        }
        Self {
            digits: false,
            len: 0,
            first: self.first.min(other.first),
            last: self.last.min(other.last),
            most: self.most.min(other.most),
        }
    }
}

/// The longest run of ASCII digits that every match of `hir` holds, at
/// least (0 when a match may hold none).
pub fn min_run(hir: &Hir) -> usize {
    runs(hir).most
}

fn runs(hir: &Hir) -> Runs {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => Runs::digits(0),
        HirKind::Literal(lit) => lit
            .0
            .iter()
            .map(|b| {
                if b.is_ascii_digit() {
                    Runs::digits(1)
                } else {
                    Runs::OTHER
                }
            })
            .fold(Runs::digits(0), Runs::then),
        HirKind::Class(class) => {
            if only_digits(class) {
                Runs::digits(1)
            } else {
                Runs::OTHER
            }
        }
        HirKind::Capture(c) => runs(&c.sub),
        HirKind::Concat(parts) => parts.iter().map(runs).fold(Runs::digits(0), Runs::then),
        HirKind::Alternation(branches) => branches
            .iter()
            .map(runs)
            .reduce(Runs::or)
            .unwrap_or(Runs::OTHER),
        HirKind::Repetition(rep) => {
            // More copies only lengthen runs: the fewest bound them all
            // (none: the empty string, or one copy of what it may hold).
            let one = runs(&rep.sub);
            if rep.min == 0 {
                return Runs::digits(0).or(one);
            }
            (0..rep.min.min(MAX_COPIES)).fold(Runs::digits(0), |acc, _| acc.then(one))
        }
    }
}

/// Whether every character of `class` is an ASCII digit (and it has one).
fn only_digits(class: &Class) -> bool {
    match class {
        Class::Unicode(c) => {
            !c.ranges().is_empty()
                && c.ranges()
                    .iter()
                    .all(|r| r.start().is_ascii_digit() && r.end().is_ascii_digit())
        }
        Class::Bytes(c) => {
            !c.ranges().is_empty()
                && c.ranges()
                    .iter()
                    .all(|r| r.start().is_ascii_digit() && r.end().is_ascii_digit())
        }
    }
}

/// The longest run of ASCII digits in `bytes`.
pub fn longest_run(bytes: &[u8]) -> usize {
    let (mut best, mut run) = (0, 0);
    for &b in bytes {
        if b.is_ascii_digit() {
            run += 1;
            best = best.max(run);
        } else {
            run = 0;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bound(src: &str) -> usize {
        min_run(&regex_syntax::parse(src).unwrap())
    }

    #[test]
    fn bounds_of_the_curated_shapes() {
        // A bare run between non-digits: the group's length.
        assert_eq!(bound(r"(?:^|[^0-9])([12][0-9]{9})(?:$|[^0-9])"), 10);
        // Groups with optional separators: the longest group.
        assert_eq!(bound(r"\b9[0-9]{2}[- ]?[0-9]{2}[- ]?[0-9]{4}\b"), 4);
        assert_eq!(bound(r"\b[0-9]{3}-[0-9]{2}-[0-9]{4}\b|\b[0-9]{9}\b"), 4);
        // A letter, then eight digits; or nine digits.
        assert_eq!(bound(r"([A-Z][0-9]{8}|[0-9]{9})"), 8);
        // Literal digits join the runs beside them.
        assert_eq!(bound(r"80840[0-9]{3}x"), 8);
        assert_eq!(bound(r"IAX-[0-9]{6,10}\b"), 6);
        // Nothing required: optional digits, classes that take letters.
        assert_eq!(bound(r"[0-9]*x"), 0);
        assert_eq!(bound(r"[A-Z0-9]{20}"), 0);
        assert_eq!(bound(r"\bghp_[A-Za-z0-9]{36}\b"), 0);
        // Unicode digits are not ASCII digits.
        assert_eq!(bound(r"\p{Nd}{5}"), 0);
    }

    #[test]
    fn longest_runs_of_texts() {
        assert_eq!(longest_run(b""), 0);
        assert_eq!(longest_run(b"call 555-0100 or 5550100123"), 10);
        assert_eq!(longest_run("٣٤٥ 12".as_bytes()), 2);
    }

    /// Pieces of patterns over digits, a letter and a dash.
    const ATOMS: &[&str] = &[
        "[0-9]",
        "[0-9a]",
        "0",
        "7",
        "a",
        "-",
        "(?:[0-9]|a)",
        "(?:[0-9]{2}|-)",
        "[0-9]?",
        "[0-9]*",
        "[0-9]+",
        "[0-9]{2,3}",
        "(?:a|)",
        r"\b",
        "(?:[0-9]-?){2}",
        "(?:[0-9]{3})?",
        "(?:^|[^0-9])",
        "(?:$|[^0-9])",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]
        /// The bound never exceeds the longest run of a match: a text the
        /// engine skips for a pattern cannot match it.
        #[test]
        fn every_match_holds_a_run_as_long_as_the_bound(
            parts in prop::collection::vec(prop::sample::select(ATOMS), 1..8),
            alternative in prop::collection::vec(prop::sample::select(ATOMS), 0..4),
            text in "[0-9a\\- ]{0,40}",
        ) {
            let mut pattern = parts.concat();
            if !alternative.is_empty() {
                pattern = format!("{pattern}|{}", alternative.concat());
            }
            let hir = regex_syntax::parse(&pattern).unwrap();
            let re = regex::Regex::new(&pattern).unwrap();
            let b = min_run(&hir);
            for m in re.find_iter(&text) {
                prop_assert!(
                    longest_run(m.as_str().as_bytes()) >= b,
                    "{} on {:?}: {:?}", pattern, text, m.as_str()
                );
            }
        }
    }
}
