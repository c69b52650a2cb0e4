//! Where the matches of a long or open-ended pattern start ([§6.1](docs/evaluation.md#s6-1),
//! issue 22): a pattern that begins with a short part of nearly fixed
//! length, its head, is looked for in the combined pass over ASCII text by
//! that head alone; each end of the head proposes the few places a match
//! can start, and the engine confirms each with an anchored search. Reads
//! a pattern's syntax tree only; never a byte of text.
//!
//! Why: a pattern whose match can end at several places after one start
//! (a group repeated a varying number of times, as in an IBAN) cannot have
//! its start found backward from one end, and one without a longest match
//! (`\s*`) is searched whole. Both cost a search over much more text than
//! their matches. From the head's ends, a match costs one anchored search
//! over its own bytes.
//!
//! Why it finds what a search of the whole text finds: every match of the
//! pattern begins with a match of its head (the head is the first items of
//! its concatenation), which the pass reports wherever it ends, whatever
//! the pattern's later items do. So every start of a match is one of the
//! proposed starts; trying them in order, the first that an anchored
//! search confirms is the leftmost start, and the anchored search returns
//! the match a leftmost-first search would choose there.

use regex_syntax::hir::{Class, Hir, HirKind};

/// The head of a pattern: the first items of its top-level concatenation,
/// of which every match of the pattern begins with a match, from `min` to
/// `max` bytes long on ASCII text. Its `Debug` never prints the head: it
/// is part of a pattern.
#[derive(Clone, PartialEq, Eq)]
pub struct Head {
    /// The head as a pattern (printed from the pattern's syntax tree).
    pub src: String,
    /// Its shortest match on ASCII text, in bytes (at least one).
    pub min: usize,
    /// Its longest.
    pub max: usize,
}

impl std::fmt::Debug for Head {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Head")
            .field("src_bytes", &self.src.len())
            .field("min", &self.min)
            .field("max", &self.max)
            .finish()
    }
}

/// Most lengths a head may have beyond its shortest: each end of the head
/// proposes this many starts, and one more.
const MAX_SPREAD: usize = 3;
/// Longest head: the pass's states for it stay few.
const MAX_HEAD: usize = 32;

/// The head of the pattern whose ASCII-words form parses to `hir`, when
/// finding its matches from their starts is worth it: its later items can
/// end a match at several places after one start (a group of two bytes or
/// more repeated a varying number of times), or have no longest match. In
/// the second case, no byte a head can begin with may be read by the
/// unbounded repetitions: a start then never lies inside the open-ended
/// stretch of another candidate, and the anchored searches read each byte
/// a bounded number of times.
pub fn head(hir: &Hir) -> Option<Head> {
    let HirKind::Concat(items) = hir.kind() else {
        return None;
    };
    // The longest prefix of items whose lengths stay close together.
    let mut chosen = None;
    let (mut min, mut max) = (0usize, 0usize);
    for (k, item) in items.iter().enumerate() {
        let (lo, hi) = ascii_lens(item)?;
        let Some(hi) = hi else {
            break;
        };
        min = min.checked_add(lo)?;
        max = max.checked_add(hi)?;
        if max - min > MAX_SPREAD || max > MAX_HEAD {
            break;
        }
        if min > 0 {
            chosen = Some((k + 1, min, max));
        }
    }
    let (k, min, max) = chosen?;
    let (head, rest) = items.split_at(k);
    if rest.is_empty() {
        return None;
    }
    let unbounded = rest.iter().any(|h| h.properties().maximum_len().is_none());
    let worth = if unbounded {
        let mut starts = [false; 256];
        first_bytes(&Hir::concat(head.to_vec()), &mut starts);
        let mut read = [false; 256];
        rest.iter().for_each(|h| open_bytes(h, &mut read));
        !starts.iter().zip(read).any(|(a, b)| *a && b)
    } else {
        rest.iter().any(ends_variously)
    };
    worth.then(|| Head {
        src: Hir::concat(head.to_vec()).to_string(),
        min,
        max,
    })
}

/// The shortest and longest match of `hir` on ASCII text (a class or
/// character takes one byte there); `None` when it cannot match ASCII
/// text. The parser's nest limit bounds the recursion.
fn ascii_lens(hir: &Hir) -> Option<(usize, Option<usize>)> {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => Some((0, Some(0))),
        HirKind::Literal(lit) => lit.0.is_ascii().then_some((lit.0.len(), Some(lit.0.len()))),
        HirKind::Class(Class::Unicode(c)) => c
            .ranges()
            .iter()
            .any(|r| r.start().is_ascii())
            .then_some((1, Some(1))),
        HirKind::Class(Class::Bytes(c)) => c
            .ranges()
            .iter()
            .any(|r| r.start().is_ascii())
            .then_some((1, Some(1))),
        HirKind::Capture(cap) => ascii_lens(&cap.sub),
        HirKind::Repetition(rep) => match ascii_lens(&rep.sub) {
            None if rep.min == 0 => Some((0, Some(0))),
            None => None,
            Some((lo, hi)) => {
                let times = |n: usize, k: u32| usize::try_from(k).ok()?.checked_mul(n);
                let max = match (hi, rep.max) {
                    (_, Some(0)) => Some(0),
                    (Some(h), Some(k)) => Some(times(h, k)?),
                    _ => None,
                };
                Some((times(lo, rep.min)?, max))
            }
        },
        HirKind::Concat(parts) => parts
            .iter()
            .try_fold((0usize, Some(0usize)), |(lo, hi), p| {
                let (a, b) = ascii_lens(p)?;
                Some((
                    lo.checked_add(a)?,
                    hi.zip(b).and_then(|(x, y)| x.checked_add(y)),
                ))
            }),
        HirKind::Alternation(alts) => alts
            .iter()
            .filter_map(ascii_lens)
            .reduce(|(a, am), (b, bm)| (a.min(b), am.zip(bm).map(|(x, y)| x.max(y)))),
    }
}

/// Whether `hir` holds a group of two bytes or more repeated a varying
/// number of times (a bounded number: the caller knows the pattern has a
/// longest match): after one start, a match may then end after each
/// repetition.
fn ends_variously(hir: &Hir) -> bool {
    match hir.kind() {
        HirKind::Repetition(rep) => {
            (rep.max != Some(rep.min) && rep.sub.properties().minimum_len().unwrap_or(0) >= 2)
                || ends_variously(&rep.sub)
        }
        HirKind::Capture(cap) => ends_variously(&cap.sub),
        HirKind::Concat(parts) | HirKind::Alternation(parts) => parts.iter().any(ends_variously),
        _ => false,
    }
}

/// Marks in `set` the ASCII bytes a match of `hir` can begin with; `true`
/// when it can be empty.
fn first_bytes(hir: &Hir, set: &mut [bool; 256]) -> bool {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => true,
        HirKind::Literal(lit) => match lit.0.first() {
            Some(&b) => {
                set[usize::from(b)] = true;
                false
            }
            None => true,
        },
        HirKind::Class(_) => {
            class_bytes(hir, set);
            false
        }
        HirKind::Capture(cap) => first_bytes(&cap.sub, set),
        HirKind::Repetition(rep) => first_bytes(&rep.sub, set) || rep.min == 0,
        HirKind::Concat(parts) => parts.iter().all(|p| first_bytes(p, set)),
        HirKind::Alternation(alts) => {
            // Every branch marks its bytes: no short circuit.
            let mut empty = false;
            for a in alts {
                empty |= first_bytes(a, set);
            }
            empty
        }
    }
}

/// Marks in `set` every ASCII byte an unbounded repetition in `hir` can
/// read.
fn open_bytes(hir: &Hir, set: &mut [bool; 256]) {
    match hir.kind() {
        HirKind::Repetition(rep) if rep.max.is_none() => all_bytes(&rep.sub, set),
        HirKind::Repetition(rep) => open_bytes(&rep.sub, set),
        HirKind::Capture(cap) => open_bytes(&cap.sub, set),
        HirKind::Concat(parts) | HirKind::Alternation(parts) => {
            parts.iter().for_each(|p| open_bytes(p, set));
        }
        _ => {}
    }
}

/// Marks in `set` every ASCII byte a match of `hir` can hold.
fn all_bytes(hir: &Hir, set: &mut [bool; 256]) {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => {}
        HirKind::Literal(lit) => lit
            .0
            .iter()
            .filter(|b| b.is_ascii())
            .for_each(|&b| set[usize::from(b)] = true),
        HirKind::Class(_) => class_bytes(hir, set),
        HirKind::Capture(cap) => all_bytes(&cap.sub, set),
        HirKind::Repetition(rep) => all_bytes(&rep.sub, set),
        HirKind::Concat(parts) | HirKind::Alternation(parts) => {
            parts.iter().for_each(|p| all_bytes(p, set));
        }
    }
}

/// Marks in `set` the ASCII bytes of class `hir`: heads are looked for
/// only in ASCII text, where no other byte occurs (`(?i)s` holds `ſ`,
/// `\s` holds U+3000, and neither can be read there).
fn class_bytes(hir: &Hir, set: &mut [bool; 256]) {
    let mut mark = |lo: u32, hi: u32| {
        for b in lo..=hi.min(0x7F) {
            set[b as usize] = true;
        }
    };
    match hir.kind() {
        HirKind::Class(Class::Unicode(c)) => {
            for r in c.ranges() {
                mark(u32::from(r.start()), u32::from(r.end()));
            }
        }
        HirKind::Class(Class::Bytes(c)) => {
            for r in c.ranges() {
                mark(u32::from(r.start()), u32::from(r.end()));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head_of(src: &str) -> Option<(String, usize, usize)> {
        let compiled = crate::pattern::compile(src, &[]).ok()?;
        let hir = regex_syntax::parse(&compiled.ascii_words).ok()?;
        head(&hir).map(|h| (h.src, h.min, h.max))
    }

    #[test]
    fn a_group_repeated_a_varying_number_of_times_is_found_from_its_head() {
        let iban = r"\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b";
        let (src, min, max) = head_of(iban).unwrap();
        assert_eq!((min, max), (4, 4));
        let re = regex_automata::meta::Regex::new(&src).unwrap();
        assert!(re.is_match("DE89"));
        assert!(!re.is_match("xDE89"), "the head keeps its word boundary");
    }

    #[test]
    fn an_open_ended_pattern_has_a_head_when_its_open_part_cannot_start_one() {
        let secret = r#"(?i)\b(?:password|passwd|secret|api_key)\s*[:=]\s*"?([^\s"]{8,64})"#;
        let (src, min, max) = head_of(secret).unwrap();
        assert_eq!((min, max), (6, 8));
        let re = regex_automata::meta::Regex::new(&src).unwrap();
        assert!(re.is_match("PassWd"));
        // The open part reads what a head begins with: no head.
        assert_eq!(head_of(r"\bab[a-z ]*!"), None);
        assert!(head_of(r"\bab *!").is_some());
    }

    #[test]
    fn patterns_found_well_from_their_ends_have_no_head() {
        for src in [
            r"\b(?:[0-9]{4}[ -]?){3}[0-9]{4}\b",
            r"\bIAX-[0-9]{6,10}\b",
            r"\b[A-Z]?[0-9]{8,9}\b",
            r"(?:^|[^0-9])([0-9]{9})(?:$|[^0-9])",
            r"\w+@\w+",
            r"[0-9]{4}(?:-[0-9]{4})*",
            r"abc",
        ] {
            assert_eq!(head_of(src), None, "{src}");
        }
    }

    #[test]
    fn lengths_on_ascii_text_count_a_character_as_a_byte() {
        let hir = |s: &str| regex_syntax::parse(s).unwrap();
        assert_eq!(ascii_lens(&hir(r"\w{2}é?")), Some((2, Some(2))));
        assert_eq!(ascii_lens(&hir(r"a|bcd")), Some((1, Some(3))));
        assert_eq!(ascii_lens(&hir(r"x+")), Some((1, None)));
        assert_eq!(ascii_lens(&hir(r"é")), None);
    }
}
