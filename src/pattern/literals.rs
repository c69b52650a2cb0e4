//! Required literals of a pattern ([§6.1](docs/evaluation.md#s6-1)): a small set of strings of which every
//! match holds one (exactly, or ASCII case aside), and automata over a
//! pack's sets that rule out, in a scan, every pattern whose strings a text
//! lacks. A pure filter: it never adds a match, and reads only the text it
//! is given.
//!
//! The required bytes of a pattern settle most clean payloads, but a
//! credential codon's bytes (`g`, `h`, `p`, `_`) are in nearly any prompt
//! that holds a random token; its literal (`ghp_`) is in almost none.

use aho_corasick::{AhoCorasick, AhoCorasickKind, Input, MatchKind};
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

/// A set of strings.
type Set = Vec<Vec<u8>>;

/// A pattern's required literals.
#[derive(Clone, PartialEq, Eq)]
pub struct Literals {
    /// The strings, sorted; none holds another.
    pub set: Vec<Vec<u8>>,
    /// Whether they are ASCII-lower-cased and to be found without ASCII
    /// case (a case-insensitive pattern, or context words); otherwise as
    /// they are.
    pub folded: bool,
}

impl std::fmt::Debug for Literals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Pieces of a pattern are policy: counted, never printed.
        f.debug_struct("Literals")
            .field("set", &self.set.len())
            .field("folded", &self.folded)
            .finish()
    }
}

/// The required literals of `hir`: every match holds one of them, exactly
/// when such a set exists, else ASCII case aside. `None` when no usable set
/// exists (every set has a literal shorter than [`MIN_LEN`] or more than
/// [`MAX_LITERALS`]).
pub fn required(hir: &Hir) -> Option<Literals> {
    let of = |folded| {
        let set = minimal(Extract { folded }.need(hir)?);
        usable(&set).then_some(Literals { set, folded })
    };
    let shortest = |l: &Literals| l.set.iter().map(Vec::len).min().unwrap_or(0);
    match (of(false), of(true)) {
        // The exact set, unless spelling out cases made it larger or its
        // strings shorter (`(?i)` patterns).
        (Some(exact), Some(folded))
            if exact.set.len() > folded.set.len() || shortest(&exact) < shortest(&folded) =>
        {
            Some(folded)
        }
        (Some(exact), _) => Some(exact),
        (None, folded) => folded,
    }
}

fn usable(set: &Set) -> bool {
    !set.is_empty() && set.len() <= MAX_LITERALS && set.iter().all(|l| l.len() >= MIN_LEN)
}

/// Ranks sets by how well they filter: usable first, then longer shortest
/// literals up to four bytes, then fewer literals, then longer ones
/// (`iax-` beats the ten `iax-0` … `iax-9`).
fn score(set: &Set) -> (bool, usize, std::cmp::Reverse<usize>, usize) {
    let shortest = set.iter().map(Vec::len).min().unwrap_or(0);
    (
        usable(set),
        shortest.min(4),
        std::cmp::Reverse(set.len()),
        shortest,
    )
}

/// The extraction, with ASCII case folded or not.
struct Extract {
    folded: bool,
}

impl Extract {
    fn lower(&self, bytes: &[u8]) -> Vec<u8> {
        if self.folded {
            bytes.to_ascii_lowercase()
        } else {
            bytes.to_vec()
        }
    }

    /// A set of which every match of `hir` holds one member as a substring.
    fn need(&self, hir: &Hir) -> Option<Set> {
        match hir.kind() {
            HirKind::Empty | HirKind::Look(_) => None,
            HirKind::Literal(_) | HirKind::Class(_) => self.exact(hir),
            HirKind::Repetition(rep) if rep.min > 0 => {
                self.exact(hir).or_else(|| self.need(&rep.sub))
            }
            HirKind::Repetition(_) => None,
            HirKind::Capture(cap) => self.need(&cap.sub),
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
                    match self.exact(part) {
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
                                let head = self.first(part).and_then(|h| product(&r, &h));
                                consider(r);
                                if let Some(h) = head {
                                    consider(h);
                                }
                            }
                            if let Some(set) = self.need(part) {
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
                    union.extend(self.need(alt)?);
                    union = minimal(union);
                    if union.len() > MAX_LITERALS {
                        return None;
                    }
                }
                Some(union)
            }
        }
    }

    /// Every string `hir` matches (lower-cased, a superset where zero-width
    /// assertions are taken as empty), when there are at most
    /// [`MAX_LITERALS`] of them.
    fn exact(&self, hir: &Hir) -> Option<Set> {
        match hir.kind() {
            HirKind::Empty | HirKind::Look(_) => Some(vec![Vec::new()]),
            HirKind::Literal(lit) => Some(vec![self.lower(&lit.0)]),
            HirKind::Class(class) => self.class_members(class),
            HirKind::Capture(cap) => self.exact(&cap.sub),
            HirKind::Repetition(rep) => {
                let max = rep.max?;
                if max > MAX_REPEAT {
                    return None;
                }
                let sub = self.exact(&rep.sub)?;
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
                    acc = product(&acc, &self.exact(part)?)?;
                }
                Some(acc)
            }
            HirKind::Alternation(alts) => {
                let mut union = Vec::new();
                for alt in alts {
                    union.extend(self.exact(alt)?);
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
    fn first(&self, hir: &Hir) -> Option<Set> {
        match hir.kind() {
            HirKind::Repetition(rep) if rep.min > 0 => self.exact(&rep.sub),
            HirKind::Capture(cap) => self.first(&cap.sub),
            HirKind::Concat(parts) => parts.first().and_then(|p| self.exact(p)),
            _ => None,
        }
    }

    /// A class's members as strings (ASCII lower-cased), when there are at
    /// most [`MAX_CLASS`] of them once case is folded: `(?i)k` is `k` and the
    /// Kelvin sign.
    fn class_members(&self, class: &Class) -> Option<Set> {
        let mut out: Set = Vec::new();
        let mut push = |member: Vec<u8>| -> Option<()> {
            let member = self.lower(&member);
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

/// A bit per pattern, over `n` patterns, set for those of `indices`.
pub fn mask_of(n: usize, indices: impl IntoIterator<Item = usize>) -> Vec<u64> {
    let mut mask = vec![0u64; n.div_ceil(64).max(1)];
    for i in indices.into_iter().filter(|&i| i < n) {
        mask[i / 64] |= 1 << (i % 64);
    }
    mask
}

/// Automata over the required literals of a pack's patterns: one over the
/// exact sets (its prefilter skips to their rare bytes), one over the
/// folded sets (found without ASCII case).
pub struct Scanner {
    parts: Vec<Part>,
    /// The patterns that have a set.
    gated: Vec<u64>,
}

/// One automaton of a [`Scanner`].
struct Part {
    ac: AhoCorasick,
    /// `owners[k]`: the mask of the patterns that an occurrence of literal
    /// `k` serves (its own, and those of the literals it begins with).
    owners: Vec<Vec<u64>>,
    /// The patterns whose sets it holds.
    gated: Vec<u64>,
}

impl Part {
    /// The automaton over the sets of `sets` that are `folded` or not.
    fn new(sets: &[Option<&Literals>], folded: bool, words: usize) -> Option<Self> {
        let mut literals: Vec<Vec<u8>> = Vec::new();
        let mut owners: Vec<Vec<u64>> = Vec::new();
        let mut gated = vec![0u64; words];
        for (i, set) in sets.iter().enumerate() {
            let Some(set) = set.filter(|s| s.folded == folded) else {
                continue;
            };
            let (w, bit) = (i / 64, 1u64 << (i % 64));
            gated[w] |= bit;
            for lit in &set.set {
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
        // The scan reports, at each start, only the longest literal there:
        // the literals that are prefixes of it occur there too, so it
        // serves their patterns as well.
        let served: Vec<Vec<u64>> = literals
            .iter()
            .map(|long| {
                let mut mask = vec![0u64; words];
                for (short, o) in literals.iter().zip(&owners) {
                    if long.starts_with(short) {
                        mask.iter_mut().zip(o).for_each(|(m, o)| *m |= o);
                    }
                }
                mask
            })
            .collect();
        let ac = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .ascii_case_insensitive(folded)
            // Without case, the only prefilters left look for start bytes,
            // common letters here: the automaton alone is faster.
            .prefilter(!folded)
            .kind(Some(AhoCorasickKind::DFA))
            .build(&literals)
            .ok()?;
        Some(Self {
            ac,
            owners: served,
            gated,
        })
    }

    /// Clears from `want` the patterns whose literals occur in `bytes`,
    /// counting occurrences into `reads`; `false` once past `budget`.
    fn scan(&self, bytes: &[u8], want: &mut [u64], reads: &mut usize, budget: usize) -> bool {
        if want.iter().zip(&self.gated).all(|(w, g)| w & g == 0) {
            return true;
        }
        let mut at = 0;
        // Leftmost-longest from each start after the last one found: every
        // start of an occurrence is reported (with its longest literal),
        // and the prefilter skips the text between them, which an
        // overlapping search cannot.
        while let Some(m) = self.ac.find(Input::new(bytes).range(at..)) {
            at = m.start() + 1;
            *reads += 1;
            let owners = match self.owners.get(m.pattern().as_usize()) {
                Some(owners) if *reads <= budget => owners,
                _ => return false,
            };
            let mut left = 0;
            for ((w, o), g) in want.iter_mut().zip(owners).zip(&self.gated) {
                *w &= !o;
                left |= *w & g;
            }
            if left == 0 {
                break;
            }
        }
        true
    }
}

impl Scanner {
    /// The scanner over `sets` (pattern `i`'s required literals, or `None`);
    /// `None` when no pattern has a set or an automaton cannot be built.
    pub fn new<'a>(sets: impl ExactSizeIterator<Item = Option<&'a Literals>>) -> Option<Self> {
        let sets: Vec<Option<&Literals>> = sets.collect();
        let words = sets.len().div_ceil(64).max(1);
        let parts: Vec<Part> = [false, true]
            .into_iter()
            .filter_map(|folded| Part::new(&sets, folded, words))
            .collect();
        if parts.is_empty() {
            return None;
        }
        let mut gated = vec![0u64; words];
        for p in &parts {
            gated.iter_mut().zip(&p.gated).for_each(|(g, p)| *g |= p);
        }
        Some(Self { parts, gated })
    }

    /// Whether some pattern of `mask` has a set (only then does
    /// [`Scanner::narrow`] scan).
    pub fn gates(&self, mask: &[u64]) -> bool {
        self.gated_in(mask) > 0
    }

    /// A bit per pattern with a set.
    pub fn gated(&self) -> &[u64] {
        &self.gated
    }

    /// How many patterns of `mask` have a set.
    pub fn gated_in(&self, mask: &[u64]) -> usize {
        mask.iter()
            .zip(&self.gated)
            .map(|(m, g)| (m & g).count_ones() as usize)
            .sum()
    }

    /// Clears from `mask` (a bit per pattern) every pattern of
    /// [`Scanner::absent`]; returns how many occurrences it read.
    pub fn narrow(&self, bytes: &[u8], mask: &mut [u64], budget: usize) -> usize {
        let (absent, reads) = self.absent(bytes, mask, budget);
        for (m, a) in mask.iter_mut().zip(&absent) {
            *m &= !a;
        }
        reads
    }

    /// The patterns of `mask` (a bit per pattern) with a set none of whose
    /// literals occurs in `bytes`, and how many occurrences it read. Each
    /// automaton stops once every pattern of `mask` it gates is seen; past
    /// `budget` occurrences in all, none is found absent.
    pub fn absent(&self, bytes: &[u8], mask: &[u64], budget: usize) -> (Vec<u64>, usize) {
        let mut want: Vec<u64> = mask.iter().zip(&self.gated).map(|(m, g)| m & g).collect();
        let mut reads = 0;
        for part in &self.parts {
            if !part.scan(bytes, &mut want, &mut reads, budget) {
                return (vec![0; want.len()], reads);
            }
        }
        (want, reads)
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
            s.set
                .into_iter()
                .map(|l| String::from_utf8(l).unwrap())
                .collect()
        })
    }

    #[test]
    fn debug_output_counts_the_literals_without_printing_them() {
        let lits = required(&hir(r"\bghp_[a-z]{4}")).unwrap();
        assert_eq!(format!("{lits:?}"), "Literals { set: 1, folded: false }");
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
            Some(vec!["AKIA".into(), "ASIA".into()])
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
        let folded = required(&hir(r"(?i)secret[_-]?key")).unwrap();
        assert!(folded.folded);
        let folded = req(r"(?i)secret[_-]?key").unwrap();
        assert_eq!(folded.len(), 12);
        assert!(folded.contains(&"\u{17F}ecret_\u{212A}ey".to_string()));
        assert!(folded.contains(&"secretkey".to_string()));
        assert_eq!(
            req(r"DE[0-9]{9}"),
            Some((0..10).map(|d| format!("DE{d}")).collect::<Vec<_>>())
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
        let lits = |set: &[&str], folded| Literals {
            set: set.iter().map(|l| l.as_bytes().to_vec()).collect(),
            folded,
        };
        let sets = [
            Some(lits(&["ghp_"], false)),
            None,
            Some(lits(&["akia", "asia"], true)),
            Some(lits(&["sk-"], false)),
            Some(lits(&["sk-ant-"], false)),
        ];
        let s = Scanner::new(sets.iter().map(Option::as_ref)).unwrap();
        // (mask, text, budget): the mask left, and the occurrences read.
        for ((mask, text, budget), want) in [
            // Pattern 1 has no set: never cleared.
            ((0b111, "key ghp_abc and more", 100), (0b011, 1)),
            // Exact sets are found as they are; folded ones without case.
            ((0b101, "AsIa then GHP_", 100), (0b100, 1)),
            ((0b101, "nothing here", 100), (0, 0)),
            // The longest literal at a start serves those it begins with.
            ((0b11000, "x sk-ant-api", 100), (0b11000, 1)),
            ((0b11000, "x sk-proj", 100), (0b01000, 1)),
            // Past its budget of occurrences, the scanner clears nothing.
            ((0b10001, "ghp_ghp_ghp_", 2), (0b10001, 3)),
            ((0b10001, "ghp_ghp_ghp_", 3), (0b00001, 3)),
        ] {
            let mut m = vec![mask];
            let reads = s.narrow(text.as_bytes(), &mut m, budget);
            assert_eq!((m[0], reads), want, "{text:?}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        /// Sound: wherever a pattern matches, the text holds one of its
        /// literals, ASCII case aside.
        #[test]
        fn every_match_holds_a_required_literal(text in "[a-dA-DkK_\\-=:/ 0-9\u{212A}é]{0,40}") {
            static PATTERNS: std::sync::OnceLock<(Vec<regex::Regex>, Vec<Literals>, Scanner)> = std::sync::OnceLock::new();
            let (res, sets, scanner) = PATTERNS.get_or_init(|| {
                let (res, sets): (Vec<_>, Vec<_>) = [r"ab_\w{2}", r"(?i)abc", r"(?i)k[ab]c", r"a[bc]d|dd[a-c]",
                 r"(?:ab)?cd[_-]?a", r"\bab[0-9]{2}\b", r"[0-9]c{1,3}d", r"(?i)(?:a|b)(?:c|d)a\s*=", r"://[a-d]+",
                 r"a.?bc", r"(?:aa|bb){2}", r"Ab[Cc]D", r"ABC|AB"]
                    .iter()
                    .filter_map(|p| Some((regex::Regex::new(p).unwrap(), required(&hir(p))?)))
                    .unzip();
                let scanner = Scanner::new(sets.iter().map(Some)).unwrap();
                (res, sets, scanner)
            });
            proptest::prop_assert_eq!(res.len(), 11);
            let lower = text.to_ascii_lowercase();
            let mut mask = vec![(1u64 << res.len()) - 1];
            scanner.narrow(text.as_bytes(), &mut mask, 1000);
            for (i, (re, lits)) in res.iter().zip(sets).enumerate() {
                if re.is_match(&text) {
                    let hay = if lits.folded { lower.as_bytes() } else { text.as_bytes() };
                    proptest::prop_assert!(
                        lits.set.iter().any(|l| hay.windows(l.len()).any(|w| w == l.as_slice())),
                        "{} on {:?}", re.as_str(), text
                    );
                    proptest::prop_assert!(mask[0] & (1 << i) != 0, "{} cleared on {:?}", re.as_str(), text);
                }
            }
        }
    }
}
