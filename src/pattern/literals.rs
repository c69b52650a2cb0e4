//! Required literals of a pattern ([§6.1](docs/evaluation.md#s6-1)): a small set of strings of which every
//! match holds one (ASCII case aside), and one automaton over a pack's sets
//! that rules out, in a single scan, every pattern whose strings a text
//! lacks. A pure filter: it never adds a match, and reads only the text it
//! is given.
//!
//! The required bytes of a pattern settle most clean payloads, but a
//! credential codon's bytes (`g`, `h`, `p`, `_`) are in nearly any prompt
//! that holds a random token; its literal (`ghp_`) is in almost none.

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use regex_syntax::hir::{Class, Hir, HirKind};

/// Most literals in one pattern's set: more make the set weak and the
/// automaton large.
pub const MAX_LITERALS: usize = 64;
/// Shortest literal of a usable set: shorter ones occur in too many texts.
pub const MIN_LEN: usize = 3;
/// Most members of a character class taken as literals (the sixteen hex
/// digits): a larger class ends a run of literals.
const MAX_CLASS: usize = 16;
/// Longest counted repetition expanded into literals.
const MAX_REPEAT: u32 = 3;

/// A set of ASCII-lower-cased strings.
type Set = Vec<Vec<u8>>;

/// The required literals of `hir`: every match holds one of them, compared
/// without ASCII case. `None` when no usable set exists (every set has a
/// literal shorter than [`MIN_LEN`] or more than [`MAX_LITERALS`]).
pub fn required(hir: &Hir) -> Option<Vec<Vec<u8>>> {
    let set = minimal(need(hir)?);
    usable(&set).then_some(set)
}

fn usable(set: &Set) -> bool {
    !set.is_empty() && set.len() <= MAX_LITERALS && set.iter().all(|l| l.len() >= MIN_LEN)
}

/// Ranks sets by how well they filter: usable first, then longer shortest
/// literals, then fewer literals.
fn score(set: &Set) -> (bool, usize, std::cmp::Reverse<usize>) {
    let shortest = set.iter().map(Vec::len).min().unwrap_or(0);
    (usable(set), shortest.min(8), std::cmp::Reverse(set.len()))
}

fn lower(bytes: &[u8]) -> Vec<u8> {
    bytes.to_ascii_lowercase()
}

/// A set of which every match of `hir` holds one member as a substring.
fn need(hir: &Hir) -> Option<Set> {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => None,
        HirKind::Literal(_) | HirKind::Class(_) => exact(hir),
        HirKind::Repetition(rep) if rep.min > 0 => exact(hir).or_else(|| need(&rep.sub)),
        HirKind::Repetition(_) => None,
        HirKind::Capture(cap) => need(&cap.sub),
        HirKind::Concat(parts) => {
            let mut best: Option<Set> = None;
            let mut consider = |set: Set| {
                if best.as_ref().is_none_or(|b| score(&set) > score(b)) {
                    best = Some(set);
                }
            };
            // Runs of adjacent parts whose strings are all known: each
            // match holds one string of their product where the run is.
            let mut run: Option<Set> = None;
            for part in parts {
                match exact(part) {
                    Some(set) => {
                        run = Some(match run.take() {
                            Some(r) => match product(&r, &set) {
                                Some(p) => p,
                                None => {
                                    consider(r);
                                    set
                                }
                            },
                            None => set,
                        });
                    }
                    None => {
                        if let Some(r) = run.take() {
                            // The part's first piece still follows the run.
                            let head = first(part).and_then(|h| product(&r, &h));
                            consider(head.unwrap_or(r));
                        }
                        if let Some(set) = need(part) {
                            consider(set);
                        }
                    }
                }
            }
            if let Some(r) = run {
                consider(r);
            }
            best
        }
        HirKind::Alternation(alts) => {
            let mut union = Vec::new();
            for alt in alts {
                union.extend(need(alt)?);
                union = minimal(union);
                if union.len() > MAX_LITERALS {
                    return None;
                }
            }
            Some(union)
        }
    }
}

/// `set` sorted, without duplicates and without any string that holds
/// another (the shorter occurs wherever the longer does).
fn minimal(mut set: Set) -> Set {
    set.sort();
    set.dedup();
    let all = set.clone();
    set.retain(|l| {
        !all.iter().any(|o| {
            o.len() < l.len() && (o.is_empty() || l.windows(o.len()).any(|w| w == o.as_slice()))
        })
    });
    set
}

/// Every string `hir` matches (lower-cased, a superset where zero-width
/// assertions are taken as empty), when there are at most
/// [`MAX_LITERALS`] of them.
fn exact(hir: &Hir) -> Option<Set> {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => Some(vec![Vec::new()]),
        HirKind::Literal(lit) => Some(vec![lower(&lit.0)]),
        HirKind::Class(class) => class_members(class),
        HirKind::Capture(cap) => exact(&cap.sub),
        HirKind::Repetition(rep) => {
            let max = rep.max?;
            if max > MAX_REPEAT {
                return None;
            }
            let sub = exact(&rep.sub)?;
            let mut all = Vec::new();
            let mut power = vec![Vec::new()];
            for k in 0..=max {
                if k >= rep.min {
                    all.extend(power.iter().cloned());
                }
                if k < max {
                    power = product(&power, &sub)?;
                }
            }
            (all.len() <= MAX_LITERALS).then_some(all)
        }
        HirKind::Concat(parts) => {
            let mut acc = vec![Vec::new()];
            for part in parts {
                acc = product(&acc, &exact(part)?)?;
            }
            Some(acc)
        }
        HirKind::Alternation(alts) => {
            let mut union = Vec::new();
            for alt in alts {
                union.extend(exact(alt)?);
                if union.len() > MAX_LITERALS {
                    return None;
                }
            }
            Some(union)
        }
    }
}

/// The strings the first piece of a match of `hir` can be: its first
/// iteration, for a repetition that runs at least once.
fn first(hir: &Hir) -> Option<Set> {
    match hir.kind() {
        HirKind::Repetition(rep) if rep.min > 0 => exact(&rep.sub),
        HirKind::Capture(cap) => first(&cap.sub),
        HirKind::Concat(parts) => parts.first().and_then(exact),
        _ => None,
    }
}

fn product(a: &Set, b: &Set) -> Option<Set> {
    if a.len().saturating_mul(b.len()) > MAX_LITERALS {
        return None;
    }
    let mut out = Vec::with_capacity(a.len() * b.len());
    for x in a {
        for y in b {
            let mut s = x.clone();
            s.extend_from_slice(y);
            out.push(s);
        }
    }
    out.sort();
    out.dedup();
    Some(out)
}

/// A class's members as strings (ASCII lower-cased), when there are at
/// most [`MAX_CLASS`] of them once case is folded: `(?i)k` is `k` and the
/// Kelvin sign.
fn class_members(class: &Class) -> Option<Set> {
    let mut out: Set = Vec::new();
    let mut push = |member: Vec<u8>| -> Option<()> {
        let member = lower(&member);
        if !out.contains(&member) {
            out.push(member);
        }
        (out.len() <= MAX_CLASS).then_some(())
    };
    match class {
        Class::Unicode(c) => {
            for r in c.ranges() {
                if u32::from(r.end()) - u32::from(r.start()) >= 2 * MAX_CLASS as u32 {
                    return None;
                }
                for c in r.start()..=r.end() {
                    push(c.to_string().into_bytes())?;
                }
            }
        }
        Class::Bytes(c) => {
            for r in c.ranges() {
                if usize::from(r.end() - r.start()) >= 2 * MAX_CLASS {
                    return None;
                }
                for b in r.start()..=r.end() {
                    push(vec![b])?;
                }
            }
        }
    }
    Some(out)
}

/// One automaton over the required literals of a pack's patterns.
pub struct Scanner {
    ac: AhoCorasick,
    /// `owners[k]`: the mask of the patterns that literal `k` serves.
    owners: Vec<Vec<u64>>,
    /// The patterns that have a set.
    gated: Vec<u64>,
}

impl Scanner {
    /// The scanner over `sets` (pattern `i`'s required literals, or `None`);
    /// `None` when no pattern has a set or the automaton cannot be built.
    pub fn new<'a>(sets: impl ExactSizeIterator<Item = Option<&'a [Vec<u8>]>>) -> Option<Self> {
        let words = sets.len().div_ceil(64).max(1);
        let mut literals: Vec<Vec<u8>> = Vec::new();
        let mut owners: Vec<Vec<u64>> = Vec::new();
        let mut gated = vec![0u64; words];
        for (i, set) in sets.enumerate() {
            let Some(set) = set else { continue };
            let (w, bit) = (i / 64, 1u64 << (i % 64));
            gated[w] |= bit;
            for lit in set {
                let k = match literals.iter().position(|l| l == lit) {
                    Some(k) => k,
                    None => {
                        literals.push(lit.clone());
                        owners.push(vec![0u64; words]);
                        literals.len() - 1
                    }
                };
                owners[k][w] |= bit;
            }
        }
        if literals.is_empty() {
            return None;
        }
        let ac = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .ascii_case_insensitive(true)
            .kind(Some(AhoCorasickKind::DFA))
            .build(&literals)
            .ok()?;
        Some(Self { ac, owners, gated })
    }

    /// Whether some pattern of `mask` has a set (only then does
    /// [`Scanner::narrow`] scan).
    pub fn gates(&self, mask: &[u64]) -> bool {
        mask.iter().zip(&self.gated).any(|(m, g)| m & g != 0)
    }

    /// Clears from `mask` (a bit per pattern) every pattern with a set none
    /// of whose literals occurs in `bytes`. Reads at most `budget` literal
    /// occurrences: past them it leaves `mask` as it was. Returns how many
    /// it read.
    pub fn narrow(&self, bytes: &[u8], mask: &mut [u64], budget: usize) -> usize {
        let mut want: Vec<u64> = mask.iter().zip(&self.gated).map(|(m, g)| m & g).collect();
        if want.iter().all(|&w| w == 0) {
            return 0;
        }
        let mut seen = vec![0u64; want.len()];
        let mut reads = 0;
        for m in self.ac.find_overlapping_iter(bytes) {
            reads += 1;
            if reads > budget {
                return reads;
            }
            let Some(owners) = self.owners.get(m.pattern().as_usize()) else {
                return reads;
            };
            let mut left = 0;
            for ((s, o), w) in seen.iter_mut().zip(owners).zip(&mut want) {
                *s |= o;
                *w &= !o;
                left |= *w;
            }
            if left == 0 {
                // Every gated candidate was seen: nothing to clear.
                return reads;
            }
        }
        for (m, w) in mask.iter_mut().zip(&want) {
            *m &= !w;
        }
        reads
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hir(p: &str) -> Hir {
        regex_syntax::parse(p).unwrap()
    }

    fn req(p: &str) -> Option<Vec<String>> {
        required(&hir(p)).map(|s| {
            s.into_iter()
                .map(|l| String::from_utf8(l).unwrap())
                .collect()
        })
    }

    #[test]
    fn credential_shapes_have_their_prefixes() {
        assert_eq!(req(r"\bghp_[A-Za-z0-9]{36}\b"), Some(vec!["ghp_".into()]));
        assert_eq!(
            req(r"\bgh[sur]_[A-Za-z0-9]{36}\b"),
            Some(vec!["ghr_".into(), "ghs_".into(), "ghu_".into()])
        );
        assert_eq!(
            req(r"\b(?:AKIA|ASIA)[A-Z2-7]{16}\b"),
            Some(vec!["akia".into(), "asia".into()])
        );
        assert_eq!(
            req(r"secret[_-]?key"),
            Some(vec![
                "secret-key".into(),
                "secret_key".into(),
                "secretkey".into()
            ])
        );
        // Unicode case folding: `(?i)s` also matches `ſ`, and `(?i)k` the
        // Kelvin sign; the set spells both.
        let folded = req(r"(?i)secret[_-]?key").unwrap();
        assert_eq!(folded.len(), 12);
        assert!(folded.contains(&"\u{17F}ecret_\u{212A}ey".to_string()));
        assert!(folded.contains(&"secretkey".to_string()));
        assert_eq!(
            req(r"DE[0-9]{9}"),
            Some((0..10).map(|d| format!("de{d}")).collect::<Vec<_>>())
        );
        // An inner literal, when nothing better is known.
        assert_eq!(req(r"[a-z]+://[^@]+@"), Some(vec!["://".into()]));
        assert_eq!(
            req(r"(?:pwd|token)\s*="),
            Some(vec!["pwd".into(), "token".into()])
        );
    }

    #[test]
    fn weak_or_unbounded_shapes_have_none() {
        assert_eq!(req(r"\b\d{3}-\d{2}-\d{4}\b"), None);
        assert_eq!(req(r"[A-Za-z0-9/+]{40}"), None);
        assert_eq!(req(r"ab|xyz"), None);
        assert_eq!(req(r"x?abc"), Some(vec!["abc".into()]));
        assert_eq!(req(r"(?:abc)?d+"), None);
        // Only zero-width pieces: the empty string, which every text holds.
        assert_eq!(req(r"\b\B"), None);
        assert_eq!(req(r"(?:\b|abc)(?:xyz)?"), None);
        // Each `(?i)k` is `k` or the Kelvin sign: eight spellings of three;
        // a repetition longer than three is not spelt out.
        assert_eq!(req(r"(?i)kkk").map(|s| s.len()), Some(8));
        assert_eq!(req(r"(?i)k{7}"), None);
        assert_eq!(req(r"(?i)aaa"), Some(vec!["aaa".into()]));
    }

    #[test]
    fn the_scanner_clears_only_gated_patterns_whose_literals_are_absent() {
        let sets = [
            Some(vec![b"ghp_".to_vec()]),
            None,
            Some(vec![b"akia".to_vec(), b"asia".to_vec()]),
        ];
        let s = Scanner::new(sets.iter().map(|s| s.as_deref())).unwrap();
        let mut mask = vec![0b111];
        assert_eq!(s.narrow(b"key GHP_abc and more", &mut mask, 100), 1);
        assert_eq!(mask, vec![0b011]);
        let mut mask = vec![0b101];
        s.narrow(b"AsIa then ghp_", &mut mask, 100);
        assert_eq!(mask, vec![0b101]);
        let mut mask = vec![0b101];
        s.narrow(b"nothing here", &mut mask, 100);
        assert_eq!(mask, vec![0]);
        // Past its budget of occurrences, the scanner clears nothing.
        let mut mask = vec![0b101];
        s.narrow(b"ghp_ghp_ghp_", &mut mask, 2);
        assert_eq!(mask, vec![0b101]);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        /// Sound: wherever a pattern matches, the text holds one of its
        /// literals, ASCII case aside.
        #[test]
        fn every_match_holds_a_required_literal(text in "[a-dA-DkK_\\-=:/ 0-9\u{212A}é]{0,40}") {
            static PATTERNS: std::sync::OnceLock<Vec<(regex::Regex, Vec<Vec<u8>>)>> = std::sync::OnceLock::new();
            let patterns = PATTERNS.get_or_init(|| {
                [r"ab_\w{2}", r"(?i)abc", r"(?i)k[ab]c", r"a[bc]d|dd[a-c]", r"(?:ab)?cd[_-]?a", r"\bab[0-9]{2}\b",
                 r"[0-9]c{1,3}d", r"(?i)(?:a|b)(?:c|d)a\s*=", r"://[a-d]+", r"a.?bc", r"(?:aa|bb){2}"]
                    .iter()
                    .filter_map(|p| Some((regex::Regex::new(p).unwrap(), required(&hir(p))?)))
                    .collect()
            });
            proptest::prop_assert!(patterns.len() == 10);
            let folded = text.to_ascii_lowercase();
            for (re, lits) in patterns {
                if re.is_match(&text) {
                    proptest::prop_assert!(
                        lits.iter().any(|l| folded.as_bytes().windows(l.len()).any(|w| w == l.as_slice())),
                        "{} on {:?}", re.as_str(), text
                    );
                }
            }
        }
    }
}
