//! Regular expressions of rules and codons ([§4.2](docs/formats.md#s4-2), [§6.1](docs/evaluation.md#s6-1)): validation
//! with clear reasons, a size limit, `\d` narrowed to ASCII, and the
//! word-boundary-free "filter" form the engine scans with. Never includes a
//! pattern's text in an error message.

pub mod affixes;
pub mod cost;
pub mod digits;
pub mod ends;
pub mod heads;
pub mod literals;
pub mod steps;

use regex_automata::meta::{self, Regex};
use regex_automata::util::syntax;
use regex_syntax::ast::{self, Ast, ClassSet, ClassSetItem};

/// Compiled-program size limit of one pattern: a pathological pattern is a
/// compile error, not a runaway service.
pub const PATTERN_SIZE_LIMIT: usize = 1 << 20;
/// Lazy-DFA cache limit of one pattern.
pub const PATTERN_DFA_LIMIT: usize = 2 << 20;
/// Nesting limit of the parser (deep nesting is a stack risk).
pub const NEST_LIMIT: u32 = 64;
/// Longest pattern text accepted.
pub const MAX_PATTERN_LEN: usize = 8 * 1024;

/// A rule flag of [§4.1](docs/formats.md#s4-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flag {
    /// `IGNORECASE` → `(?i)`.
    IgnoreCase,
    /// `MULTILINE` → `(?m)`.
    Multiline,
    /// `DOTALL` → `(?s)`.
    DotAll,
}

impl Flag {
    /// Parses a flag name as written in a playbook.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "IGNORECASE" => Some(Self::IgnoreCase),
            "MULTILINE" => Some(Self::Multiline),
            "DOTALL" => Some(Self::DotAll),
            _ => None,
        }
    }

    fn inline(self) -> char {
        match self {
            Self::IgnoreCase => 'i',
            Self::Multiline => 'm',
            Self::DotAll => 's',
        }
    }
}

/// A validated pattern, ready for the engine. Its `Debug` never prints the
/// pattern: a pack's patterns are as secret as the rest of its plaintext.
#[derive(Clone)]
pub struct CompiledPattern {
    /// The exact regex: Unicode `\b`, `\w`, `\s`; ASCII `\d`.
    pub exact: Regex,
    /// Its source, as compiled (flags inline, `\d` rewritten).
    pub exact_src: String,
    /// The same pattern with every word-boundary assertion removed. It matches
    /// wherever the exact one does (assertions only restrict), and Rust's fast
    /// DFA engines run it on any text, where Unicode `\b` makes them give up
    /// on non-ASCII input.
    pub filter: String,
    /// The exact pattern with ASCII word boundaries (`(?-u:\b)`): on ASCII
    /// text it matches exactly where the exact one does (every character
    /// is a word character for both or for neither), and the lazy DFA runs
    /// it, so the combined pass over ASCII text reports the ends of exact
    /// matches only (none inside a long run of letters and digits).
    pub ascii_words: String,
    /// The filter compiled on its own; `None` when it is the exact pattern
    /// (no word boundary was removed).
    pub filter_regex: Option<Regex>,
    /// Bytes of which every match contains at least one (`None` when no
    /// such set exists): a payload holding none of them cannot match, and
    /// is settled without running the regex at all.
    pub required: Option<Vec<u8>>,
    /// Strings of which every match holds one, exactly or ASCII case aside
    /// ([`literals::required`]; `None` when no short, strong set exists): a
    /// payload holding none of them cannot match.
    pub literals: Option<literals::Literals>,
    /// The longest match in bytes, when every match is non-empty and none
    /// is longer: the engine then searches only the stretches that end
    /// where the combined pass saw this pattern's matches end.
    pub max_len: Option<usize>,
    /// The length in bytes of every match, when they all have one (and it
    /// is not zero): a match ending at a known end starts that far before.
    pub fixed_len: Option<usize>,
    /// On ASCII text, the length of every match that neither starts at
    /// the text's start nor ends at its end, when they all have one (and
    /// it is not zero): [`Self::fixed_len`] for a pattern whose only other
    /// lengths come from `^`, `$` or characters past ASCII
    /// (`(?:^|[^0-9])([0-9]{9})(?:$|[^0-9])`).
    pub interior_len: Option<usize>,
    /// The longest run of ASCII digits every match holds, at least
    /// ([`digits::min_run`]): a text without so long a run cannot match.
    pub digit_run: usize,
    /// Its head ([`heads::head`]), when the combined pass over ASCII text
    /// looks for that instead and the engine confirms each start it
    /// proposes.
    pub head: Option<heads::Head>,
}

impl std::fmt::Debug for CompiledPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledPattern")
            .field("exact_src_bytes", &self.exact_src.len())
            .field("has_filter", &self.filter_regex.is_some())
            .field("required_bytes", &self.required.as_ref().map(Vec::len))
            .finish_non_exhaustive()
    }
}

/// Validates and compiles `pattern` with `flags`; the error is a reason for
/// people that never quotes the pattern.
pub fn compile(pattern: &str, flags: &[Flag]) -> Result<CompiledPattern, String> {
    if pattern.len() > MAX_PATTERN_LEN {
        return Err(format!("is longer than {MAX_PATTERN_LEN} bytes"));
    }
    let mut full = String::with_capacity(pattern.len() + 6);
    if !flags.is_empty() {
        full.push_str("(?");
        for f in flags {
            full.push(f.inline());
        }
        full.push(')');
    }
    full.push_str(pattern);

    // Full syntax check first (AST and HIR), for the error's kind only.
    if let Err(e) = regex_syntax::ParserBuilder::new()
        .nest_limit(NEST_LIMIT)
        .build()
        .parse(&full)
    {
        let why = match e {
            regex_syntax::Error::Parse(e) => e.kind().to_string(),
            regex_syntax::Error::Translate(e) => e.kind().to_string(),
            _ => "unsupported syntax".to_string(),
        };
        return Err(format!("is not a valid regular expression: {why}"));
    }
    let mut tree = ast::parse::ParserBuilder::new()
        .nest_limit(NEST_LIMIT)
        .build()
        .parse(&full)
        .map_err(|e| format!("is not a valid regular expression: {}", e.kind()))?;
    ascii_digits(&mut tree);
    let exact_src = print(&tree);
    let mut ascii = tree.clone();
    ascii_word_boundaries(&mut ascii);
    let ascii_words = print(&ascii);
    strip_word_boundaries(&mut tree);
    let filter = print(&tree);

    let exact = build(&exact_src)?;
    if exact.is_match("") {
        return Err("matches the empty string".to_string());
    }
    let filter_regex = if filter == exact_src {
        None
    } else {
        build(&filter).ok()
    };
    let parse = |src: &str| {
        regex_syntax::ParserBuilder::new()
            .nest_limit(NEST_LIMIT)
            .build()
            .parse(src)
            .ok()
    };
    let filter_hir = parse(&filter);
    let required = filter_hir
        .as_ref()
        .and_then(required_bytes)
        .map(|set| (0..=255u8).filter(|b| set[usize::from(*b)]).collect());
    let literals = filter_hir.as_ref().and_then(literals::required);
    // Parsed once for every property of the exact form below.
    let exact_hir = parse(&exact_src);
    let lens = exact_hir.as_ref().map(|hir| {
        let props = hir.properties();
        (props.minimum_len().filter(|&n| n > 0), props.maximum_len())
    });
    let max_len = lens.and_then(|(min, max)| min.and(max));
    let fixed_len = lens.and_then(|(min, max)| min.filter(|&n| Some(n) == max));
    let interior_len = exact_hir.as_ref().and_then(|hir| match interior_lens(hir) {
        Lens::Range(min, Some(max)) if min == max && min > 0 => Some(min),
        _ => None,
    });
    let digit_run = exact_hir.as_ref().map_or(0, digits::min_run);
    let head = parse(&ascii_words).as_ref().and_then(heads::head);
    Ok(CompiledPattern {
        exact,
        exact_src,
        ascii_words,
        filter,
        filter_regex,
        required,
        literals,
        max_len,
        fixed_len,
        interior_len,
        digit_run,
        head,
    })
}

/// The cost check of [§11.4](docs/limits.md#s11-4) ([`cost::check`]) on both forms of a
/// compiled pattern: `Err` is a reason for people ("is too costly …") that
/// never quotes the pattern.
pub fn check_cost(p: &CompiledPattern) -> Result<cost::CostReport, String> {
    cost::check(
        &p.exact_src,
        p.filter_regex.as_ref().map(|_| p.filter.as_str()),
    )
}

/// The pack check of [§11.4](docs/limits.md#s11-4) ([`cost::check_pack`]): `patterns`, a
/// pack's custom rules and its codons, measured together.
pub fn check_pack_cost(
    patterns: &[&CompiledPattern],
) -> Result<cost::PackCost, cost::PackCostError> {
    let forms: Vec<cost::PackPattern<'_>> = patterns
        .iter()
        .map(|p| cost::PackPattern {
            exact: &p.exact_src,
            filter: p.filter_regex.as_ref().map(|_| p.filter.as_str()),
            ascii_words: match &p.head {
                Some(head) => Some(head.src.as_str()),
                None => (p.ascii_words != p.exact_src).then_some(p.ascii_words.as_str()),
            },
            required: p.required.as_deref(),
            literals: p.literals.as_ref(),
        })
        .collect();
    cost::check_pack(&forms)
}

type ByteSet = [bool; 256];

/// A rough frequency rank of a byte in prompts (higher is more common), used
/// only to choose which required bytes to look for.
fn byte_rank(b: u8) -> u32 {
    match b {
        b' ' => 255,
        b'e' | b't' | b'a' | b'o' | b'i' | b'n' => 240,
        b's' | b'h' | b'r' | b'd' | b'l' | b'u' | b'c' | b'm' => 215,
        b'w' | b'f' | b'g' | b'y' | b'p' | b'b' => 190,
        b'v' | b'k' => 160,
        b'j' | b'x' | b'q' | b'z' => 110,
        b'.' | b',' => 150,
        b'\n' => 140,
        0x80..=0xff => 120,
        b'T' | b'A' | b'I' | b'S' => 130,
        b'J' | b'Q' | b'X' | b'Z' => 70,
        b'A'..=b'Z' => 100,
        b'-' | b'\'' | b'"' => 105,
        b'0'..=b'9' => 90,
        b':' | b';' | b'?' | b'!' | b'(' | b')' => 85,
        b'/' => 70,
        0..=0x1f | 0x7f => 5,
        _ => 40,
    }
}

/// How likely a payload holds some byte of `set`: ranks are roughly
/// logarithmic, so a set of a few rare bytes beats one common byte.
fn set_cost(set: &ByteSet) -> u64 {
    (0..=255u8)
        .filter(|b| set[usize::from(*b)])
        .map(|b| 1u64 << (byte_rank(b) / 16))
        .sum()
}

/// A set of bytes of which every match of `hir` contains at least one, chosen
/// to be rare in ordinary text; `None` when a match may hold no fixed byte.
fn required_bytes(hir: &regex_syntax::hir::Hir) -> Option<ByteSet> {
    use regex_syntax::hir::{Class, HirKind};
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => None,
        HirKind::Literal(lit) => {
            let rarest = lit.0.iter().copied().min_by_key(|b| byte_rank(*b))?;
            let mut set = [false; 256];
            set[usize::from(rarest)] = true;
            Some(set)
        }
        HirKind::Class(Class::Bytes(c)) => {
            let mut set = [false; 256];
            for r in c.ranges() {
                for b in r.start()..=r.end() {
                    set[usize::from(b)] = true;
                }
            }
            Some(set)
        }
        HirKind::Class(Class::Unicode(c)) => {
            // UTF-8 preserves order, so the leading bytes of a code-point
            // range are the range between its ends' leading bytes.
            let mut set = [false; 256];
            for r in c.ranges() {
                let mut buf = [0u8; 4];
                let lo = r.start().encode_utf8(&mut buf).as_bytes()[0];
                let hi = r.end().encode_utf8(&mut buf).as_bytes()[0];
                for b in lo..=hi {
                    set[usize::from(b)] = true;
                }
            }
            Some(set)
        }
        HirKind::Repetition(rep) if rep.min > 0 => required_bytes(&rep.sub),
        HirKind::Repetition(_) => None,
        HirKind::Capture(cap) => required_bytes(&cap.sub),
        HirKind::Concat(parts) => parts.iter().filter_map(required_bytes).min_by_key(set_cost),
        HirKind::Alternation(alts) => {
            let mut union = [false; 256];
            for alt in alts {
                let set = required_bytes(alt)?;
                for (u, s) in union.iter_mut().zip(set) {
                    *u |= s;
                }
            }
            Some(union)
        }
    }
}

/// The lengths of a pattern's matches in ASCII text away from its edges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lens {
    /// No such match (it would need the text's start or end, or a
    /// character past ASCII).
    Never,
    /// At least the first, at most the second (`None`: unbounded) bytes.
    Range(usize, Option<usize>),
}

/// The lengths of the matches of `hir` in ASCII text that neither start
/// at the text's start nor end at its end: `^` and `$` (of the whole text)
/// match nowhere else, and no character past ASCII is there, so a branch
/// that needs one of them is left out. A class takes one byte (one ASCII
/// character), other assertions none. The parser's nest limit bounds the
/// recursion.
fn interior_lens(hir: &regex_syntax::hir::Hir) -> Lens {
    use regex_syntax::hir::{Class, HirKind, Look};
    let add = |a: Lens, b: Lens| match (a, b) {
        (Lens::Range(x, xm), Lens::Range(y, ym)) => Lens::Range(
            x.saturating_add(y),
            xm.zip(ym).and_then(|(p, q)| p.checked_add(q)),
        ),
        _ => Lens::Never,
    };
    match hir.kind() {
        HirKind::Empty => Lens::Range(0, Some(0)),
        HirKind::Look(Look::Start | Look::End) => Lens::Never,
        HirKind::Look(_) => Lens::Range(0, Some(0)),
        HirKind::Literal(lit) if lit.0.is_ascii() => Lens::Range(lit.0.len(), Some(lit.0.len())),
        HirKind::Literal(_) => Lens::Never,
        HirKind::Class(Class::Unicode(c)) if c.ranges().iter().any(|r| r.start().is_ascii()) => {
            Lens::Range(1, Some(1))
        }
        HirKind::Class(Class::Bytes(c)) if c.ranges().iter().any(|r| r.start().is_ascii()) => {
            Lens::Range(1, Some(1))
        }
        HirKind::Class(_) => Lens::Never,
        HirKind::Capture(cap) => interior_lens(&cap.sub),
        HirKind::Repetition(rep) => match interior_lens(&rep.sub) {
            Lens::Never if rep.min == 0 => Lens::Range(0, Some(0)),
            Lens::Never => Lens::Never,
            Lens::Range(min, max) => {
                let times =
                    |n: usize, k: u32| usize::try_from(k).ok().and_then(|k| n.checked_mul(k));
                Lens::Range(
                    times(min, rep.min).unwrap_or(usize::MAX),
                    // An unbounded sub repeated zero times at most is empty.
                    match (max, rep.max) {
                        (_, Some(0)) => Some(0),
                        (Some(m), Some(k)) => times(m, k),
                        _ => None,
                    },
                )
            }
        },
        HirKind::Concat(parts) => parts
            .iter()
            .map(interior_lens)
            .fold(Lens::Range(0, Some(0)), add),
        HirKind::Alternation(alts) => {
            alts.iter()
                .map(interior_lens)
                .fold(Lens::Never, |acc, l| match (acc, l) {
                    (Lens::Never, other) | (other, Lens::Never) => other,
                    (Lens::Range(a, am), Lens::Range(b, bm)) => {
                        Lens::Range(a.min(b), am.zip(bm).map(|(p, q)| p.max(q)))
                    }
                })
        }
    }
}

/// Compiles one pattern with the project's limits (the `regex` crate's
/// defaults otherwise: Unicode, UTF-8, leftmost-first).
pub fn build(src: &str) -> Result<Regex, String> {
    meta::Builder::new()
        .configure(config())
        .syntax(syntax::Config::new().nest_limit(NEST_LIMIT))
        .build(src)
        .map_err(|e| match e.size_limit() {
            Some(limit) => format!("exceeds the compiled size limit of {limit} bytes"),
            None => "is not a valid regular expression".to_string(),
        })
}

/// Cache of a pattern's reverse lazy DFA ([`build_reverse`]) or forward
/// one ([`build_forward`]), per search at a time: it runs over one match
/// at a time, so it builds few states; a pattern whose automaton needs
/// more than this has none, and is searched with its regex.
pub const REVERSE_DFA_LIMIT: usize = 256 << 10;

/// The reverse lazy DFA of `src` (`MatchKind::All`, no captures): run
/// backward from a known match end, anchored there, it finds the leftmost
/// start of a match ending at it, the second half of what a
/// [`meta::Regex`] search does. `None` when it cannot be built. Unicode
/// `\b` makes its searches give up on non-ASCII text (the caller then
/// searches forward).
pub fn build_reverse(src: &str) -> Option<regex_automata::hybrid::dfa::DFA> {
    lazy_dfa(src, regex_automata::MatchKind::All, true)
}

/// The forward lazy DFA of `src` (leftmost-first, no captures): run
/// anchored at a known start, it finds the end of the match a
/// [`meta::Regex`] search finds there, without the regex's own setup
/// around it ([`heads`]: a match a call). `None` when it cannot be built.
/// Unicode `\b` makes its searches give up on non-ASCII text (the caller
/// then asks the regex).
pub fn build_forward(src: &str) -> Option<regex_automata::hybrid::dfa::DFA> {
    lazy_dfa(src, regex_automata::MatchKind::LeftmostFirst, false)
}

/// The lazy DFA of `src` for one match at a time, forward or `reverse`,
/// without captures, with Unicode `\b` (its searches give up on
/// non-ASCII text).
fn lazy_dfa(
    src: &str,
    kind: regex_automata::MatchKind,
    reverse: bool,
) -> Option<regex_automata::hybrid::dfa::DFA> {
    use regex_automata::hybrid::dfa::{Config, DFA};
    use regex_automata::nfa::thompson::{self, WhichCaptures};
    DFA::builder()
        .configure(
            Config::new()
                .match_kind(kind)
                .unicode_word_boundary(true)
                .cache_capacity(REVERSE_DFA_LIMIT),
        )
        .syntax(syntax::Config::new().nest_limit(NEST_LIMIT))
        .thompson(
            thompson::Config::new()
                .reverse(reverse)
                .which_captures(WhichCaptures::None)
                .nfa_size_limit(Some(PATTERN_SIZE_LIMIT)),
        )
        .build(src)
        .ok()
}

fn config() -> meta::Config {
    meta::Config::new()
        .nfa_size_limit(Some(PATTERN_SIZE_LIMIT))
        .onepass_size_limit(Some(PATTERN_SIZE_LIMIT))
        .dfa_size_limit(Some(PATTERN_SIZE_LIMIT))
        .hybrid_cache_capacity(PATTERN_DFA_LIMIT)
}

/// Above this many candidate patterns, the engine runs one pass of their
/// combined automaton ([`ends::pass`]) before any per-pattern search: it
/// leaves only the patterns that match, and where each match ends. Below
/// it, per-pattern searches win: most rules have literals the regex engine
/// skips ahead with, while the pass costs about 1.7 ns a byte whatever the
/// rules, and more for every end it reports (measured: BENCHMARKS.md, "One
/// pass, then only where matches end"). The pack cost check
/// ([`cost::check_pack`]) prices it so.
pub const SET_THRESHOLD: usize = 8;

fn print(tree: &Ast) -> String {
    let mut s = String::new();
    // Printing into a String cannot fail.
    let _ = ast::print::Printer::new().print(tree, &mut s);
    s
}

fn ascii_digit_item(negated: bool, span: ast::Span) -> ClassSetItem {
    ClassSetItem::Ascii(ast::ClassAscii {
        span,
        kind: ast::ClassAsciiKind::Digit,
        negated,
    })
}

/// Rewrites every `\d`/`\D` to `[[:digit:]]`/`[[:^digit:]]` ([§6.1](docs/evaluation.md#s6-1): `\d` is ASCII).
fn ascii_digits(tree: &mut Ast) {
    match tree {
        Ast::ClassPerl(p) if p.kind == ast::ClassPerlKind::Digit => {
            let item = ascii_digit_item(p.negated, p.span);
            *tree = Ast::class_bracketed(ast::ClassBracketed {
                span: p.span,
                negated: false,
                kind: ClassSet::Item(item),
            });
        }
        Ast::ClassBracketed(b) => class_set_digits(&mut b.kind),
        Ast::Repetition(r) => ascii_digits(&mut r.ast),
        Ast::Group(g) => ascii_digits(&mut g.ast),
        Ast::Alternation(a) => a.asts.iter_mut().for_each(ascii_digits),
        Ast::Concat(c) => c.asts.iter_mut().for_each(ascii_digits),
        _ => {}
    }
}

fn class_set_digits(set: &mut ClassSet) {
    match set {
        ClassSet::Item(item) => class_item_digits(item),
        ClassSet::BinaryOp(op) => {
            class_set_digits(&mut op.lhs);
            class_set_digits(&mut op.rhs);
        }
    }
}

fn class_item_digits(item: &mut ClassSetItem) {
    match item {
        ClassSetItem::Perl(p) if p.kind == ast::ClassPerlKind::Digit => {
            *item = ascii_digit_item(p.negated, p.span);
        }
        ClassSetItem::Bracketed(b) => class_set_digits(&mut b.kind),
        ClassSetItem::Union(u) => u.items.iter_mut().for_each(class_item_digits),
        _ => {}
    }
}

/// Whether an assertion is a word-boundary one.
fn is_word_assertion(kind: &ast::AssertionKind) -> bool {
    use ast::AssertionKind as K;
    !matches!(kind, K::StartLine | K::EndLine | K::StartText | K::EndText)
}

/// Makes every word-boundary assertion ASCII: `\b` becomes `(?-u:\b)`.
fn ascii_word_boundaries(tree: &mut Ast) {
    match tree {
        Ast::Assertion(a) if is_word_assertion(&a.kind) => {
            let span = a.span;
            let item = |kind| ast::FlagsItem { span, kind };
            let assertion = std::mem::replace(tree, Ast::empty(span));
            *tree = Ast::group(ast::Group {
                span,
                kind: ast::GroupKind::NonCapturing(ast::Flags {
                    span,
                    items: vec![
                        item(ast::FlagsItemKind::Negation),
                        item(ast::FlagsItemKind::Flag(ast::Flag::Unicode)),
                    ],
                }),
                ast: Box::new(assertion),
            });
        }
        Ast::Repetition(r) => ascii_word_boundaries(&mut r.ast),
        Ast::Group(g) => ascii_word_boundaries(&mut g.ast),
        Ast::Alternation(a) => a.asts.iter_mut().for_each(ascii_word_boundaries),
        Ast::Concat(c) => c.asts.iter_mut().for_each(ascii_word_boundaries),
        _ => {}
    }
}

/// Replaces every word-boundary assertion by the empty regex.
fn strip_word_boundaries(tree: &mut Ast) {
    match tree {
        Ast::Assertion(a) if is_word_assertion(&a.kind) => *tree = Ast::empty(a.span),
        Ast::Repetition(r) => strip_word_boundaries(&mut r.ast),
        Ast::Group(g) => strip_word_boundaries(&mut g.ast),
        Ast::Alternation(a) => a.asts.iter_mut().for_each(strip_word_boundaries),
        Ast::Concat(c) => c.asts.iter_mut().for_each(strip_word_boundaries),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_prints_the_pattern() {
        let p = compile(r"\bPROJ-SECRET-\d+\b", &[]).unwrap();
        let shown = format!("{p:?}");
        assert!(!shown.contains("SECRET"), "{shown}");
        assert!(
            shown.starts_with("CompiledPattern { exact_src_bytes: "),
            "{shown}"
        );
    }

    /// The reverse automata of the curated shapes fit their cache, and
    /// find a match's start backward from its end, `\b` and look-behind
    /// included; on non-ASCII text a Unicode `\b` gives up (the engine
    /// then searches forward).
    #[test]
    fn reverse_automata_find_starts_from_ends() {
        use regex_automata::{Anchored, Input};
        let cases: &[(&str, &str, usize, usize)] = &[
            (r"\bIAX-[0-9]{6,10}\b", "ref IAX-79927398 ok", 4, 16),
            (
                r"(?:^|[^0-9])([12][0-9]{9})(?:$|[^0-9])",
                "NPI 1234567893.",
                3,
                15,
            ),
            (
                r#"(?i)\b(?:password|secret)\s*[:=]\s*"?([^\s"]{8,64})"#,
                "the PASSWORD = hunter2hunter2",
                4,
                29,
            ),
        ];
        for &(src, text, start, end) in cases {
            let exact = compile(src, &[]).unwrap().exact_src;
            let rev = build_reverse(&exact).unwrap();
            let mut cache = rev.create_cache();
            let input = Input::new(text).range(0..end).anchored(Anchored::Yes);
            let found = rev.try_search_rev(&mut cache, &input).unwrap();
            assert_eq!(found.map(|m| m.offset()), Some(start), "{src}");
        }
        let rev = build_reverse(r"\bab\b").unwrap();
        let mut cache = rev.create_cache();
        let input = Input::new("é ab").range(0..5).anchored(Anchored::Yes);
        assert!(rev.try_search_rev(&mut cache, &input).is_err());
    }

    #[test]
    fn digits_are_ascii_and_boundaries_unicode() {
        let p = compile(r"\b\d{3}\b", &[]).unwrap();
        assert!(p.exact.is_match("a 123 b"));
        assert!(!p.exact.is_match("١٢٣")); // Arabic-Indic digits are not \d here
        assert!(
            !p.exact.is_match("é123"),
            "é is a word character for Unicode \\b"
        );
        assert_eq!(p.filter, "[[:digit:]]{3}");
        assert_eq!(p.ascii_words, "(?-u:\\b)[[:digit:]]{3}(?-u:\\b)");
        // On ASCII text the ASCII form matches where the exact one does.
        let ascii = build(&p.ascii_words).unwrap();
        for text in ["a 123 b", "a123 b", "_123", "123", "1234", "x 123_"] {
            assert_eq!(ascii.is_match(text), p.exact.is_match(text), "{text}");
        }
        let q = compile(r"[\d-]+x[^\D]", &[]).unwrap();
        assert!(q.exact.is_match("1-2x3"));
        assert!(!q.exact.is_match("١x٢"));
    }

    #[test]
    fn required_bytes_are_rare_and_sound() {
        let req = |p: &str| compile(p, &[]).unwrap().required;
        let two_to_nine: Vec<u8> = (b'2'..=b'9').collect();
        assert_eq!(req(r"\b\d{3}-\d{2}-\d{4}\b"), Some(vec![b'-']));
        assert_eq!(req(r"[a-z]+@[a-z]+"), Some(vec![b'@']));
        assert_eq!(
            req(r"(?:\+?1[-.\s]?)?[2-9]\d{2}[-.\s]?\d{4}"),
            Some(two_to_nine)
        );
        assert_eq!(req(r"\bx?y+|z"), Some(vec![b'y', b'z']));
        assert_eq!(req(r"a|\b"), None);
        let alt = req(r"(?i)jab|kay").unwrap();
        assert!(alt.contains(&b'j') && alt.contains(&b'J'));
        assert!(alt.contains(&b'y') || alt.contains(&b'k'));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

        /// The prefilter is sound: a text the exact regex matches always holds
        /// one of the required bytes.
        #[test]
        fn every_match_holds_a_required_byte(text in "[a-zA-Z0-9 @.:()+\\-éß会Kſ\u{301}]{0,40}") {
            static PATTERNS: std::sync::OnceLock<Vec<CompiledPattern>> = std::sync::OnceLock::new();
            let patterns = PATTERNS.get_or_init(|| {
                [r"\b\d{3}-\d{2}-\d{4}\b", r"(?i)\b(?:MRN|EHR|RX)[-:]?\s*\d{6,10}\b", r"(?i)kß|会", r"[a-z]+@[a-z]+\.[a-z]+",
                 r"(?:\+?1[-.\s]?)?(?:\([2-9]\d{2}\)|[2-9]\d{2})[-.\s]?\d{3}[-.\s]?\d{4}\b", r"\w+ing", r"(?i)s\b", r"e\u{301}?x"]
                    .iter()
                    .map(|p| compile(p, &[]).unwrap())
                    .collect()
            });
            for p in patterns {
                if let (true, Some(req)) = (p.exact.is_match(&text), &p.required) {
                    proptest::prop_assert!(text.bytes().any(|b| req.contains(&b)), "{} on {:?}", p.exact_src, text);
                }
            }
        }
    }

    /// A match's length in ASCII text away from its edges: the branches
    /// that need `^`, `$` or a character past ASCII are left out, other
    /// assertions take nothing.
    #[test]
    fn interior_lengths_leave_out_the_text_edges() {
        let cases: &[(&str, Option<usize>, Option<usize>)] = &[
            // (pattern, fixed_len, interior_len)
            (r"(?:^|[^0-9])([0-9]{9})(?:$|[^0-9])", None, Some(11)),
            (r"\b[A-Z]{3}-[0-9]{4}\b", Some(8), Some(8)),
            (r"(?m)(?:^|,)[0-9]{2}", None, None),
            (r"^[0-9]{3}|x[0-9]{3}", None, Some(4)),
            (r"(?:^|ab)c", None, Some(3)),
            (r"[0-9]{2,3}(?:$|;)", None, None),
            (r"^abc$", Some(3), None),
            // No `é` in ASCII text; every other character one byte there.
            (r"é[a-z]|[0-9]{2}", None, Some(2)),
            (r"é[a-z]|[0-9]{3}", Some(3), Some(3)),
            (r"é[a-z]|[0-9]{4}", None, Some(4)),
            (r"[a-zé]", None, Some(1)),
            (r"(?:\Aa|b)c", Some(2), Some(2)),
        ];
        for &(src, fixed, interior) in cases {
            let p = compile(src, &[]).unwrap();
            assert_eq!((p.fixed_len, p.interior_len), (fixed, interior), "{src}");
        }
    }

    #[test]
    fn flags_map_to_inline_flags() {
        let p = compile("abc", &[Flag::IgnoreCase]).unwrap();
        assert!(p.exact.is_match("xABCx"));
        let p = compile("^b", &[Flag::Multiline]).unwrap();
        assert!(p.exact.is_match("a\nb"));
        let p = compile("a.b", &[Flag::DotAll]).unwrap();
        assert!(p.exact.is_match("a\nb"));
    }

    #[test]
    fn reasons_never_quote_the_pattern() {
        let e = compile(r"secret(?=value)", &[]).unwrap_err();
        assert!(e.contains("look-around"), "{e}");
        assert!(!e.contains("secret"));
        let e = compile(r"(a", &[]).unwrap_err();
        assert!(e.starts_with("is not a valid regular expression"), "{e}");
        let e = compile(r"\w{1000}{1000}", &[]).unwrap_err();
        assert!(e.contains("size limit"), "{e}");
        assert_eq!(compile("a*", &[]).unwrap_err(), "matches the empty string");
        assert!(
            compile(r"\b", &[]).is_ok(),
            "empty only in context is legal"
        );
    }
}
