//! The evasion view of [§15](docs/evasion.md#s15): the text rules run on when a request asks
//! for `normalize: evasion`, and the map that takes a match in it back to
//! the original code points. A pure text transformation: it knows nothing of
//! rules, and never logs or keeps a payload beyond the call or the session
//! that owns it.
//!
//! # The view
//!
//! The text is cut into *segments*: a base character and everything that
//! attaches to it (combining marks, canonical non-starters, format and
//! control characters, default-ignorable code points, a character the
//! previous one composes with), at most [`MAX_SEGMENT_CHARS`] code points.
//! Each segment is normalized on its own:
//!
//! 1. characters whose `Numeric_Type` is `Digit` (`①`, `⑴`, `❶`, `²`) become
//!    their ASCII digit, before NFKC, which would turn `⑴` into `(1)` (the
//!    table is generated from Unicode data: `normalize/numeric_digit.rs`);
//! 2. NFKC;
//! 3. every decimal digit (General Category Nd) becomes its ASCII digit, and
//!    every dash (Pd) and U+2212 MINUS SIGN becomes `-`;
//! 4. default-ignorable code points, format (Cf) and control characters (Cc,
//!    but tab, line feed and carriage return) and the combining marks left
//!    after NFKC (Mn, Me) are removed, and so is any mark after an ASCII
//!    digit (Mc too).
//!
//! Then the *word rule*: in a word (a maximal run of `\w` characters, as the
//! regex crate defines them) whose characters do not share a script (their
//! UTS #39 augmented script sets do not intersect: Common and Inherited
//! characters such as digits and `_` go with any script, Han with Hiragana
//! does), each non-Latin letter whose confusable skeleton (`unicode-security`)
//! is made of Latin letters becomes that skeleton: Cyrillic `а` in `jаne`
//! becomes `a`, and a look-alike no longer splits a value into a word the
//! rules see and one they do not. Latin letters stay as written (the
//! skeleton of `m` is `rn`), and a word of one script stays whole: Russian
//! is not rewritten.
//!
//! A segment boundary depends only on the character before it and the one
//! after, so the view of a prefix made of whole segments is a prefix of the
//! view of every continuation. The word rule keeps that: once a word mixes
//! scripts it stays mixed whatever follows, and a letter it can change waits
//! only while its word has not yet mixed. A stream session thus normalizes as
//! the text arrives (holding back the open segment, and from the first
//! look-alike of a word that has not mixed yet to the word's end) and sees
//! the same view as an evaluation of the whole text.
//!
//! Per-segment NFKC equals NFKC of the whole text except where the standard
//! would compose across a boundary this cut does not see (a segment of more
//! than 32 code points; conjoining jamo written as three code points are
//! handled). Texts that are already NFKC, whatever their script, and hold no
//! dash, numeric digit, format or control character, mark, or look-alike in
//! a word that mixes scripts, normalize to themselves.
//!
//! Nothing is decoded: percent-encoding, HTML entities, base64 and a
//! spelled-out `(at)` are a policy's job (a rule can match them).
//!
//! # Cost
//!
//! What the view needs to know of a character (its step, whether NFKC
//! leaves it alone, whether it is a look-alike or a word character, its
//! script class) is one table load for the Basic Multilingual Plane (a table
//! built once per process, [`warm`]). A printable ASCII text is tested 64
//! bytes at a time and builds nothing. A text whose characters the view keeps
//! builds no view unless a word holding a look-alike mixes scripts (only
//! such words have their scripts read). When a view is built, a run of kept
//! characters is written as a run; only the others are normalized segment by
//! segment. Measured costs are in `BENCHMARKS.md`.
//!
//! # The map
//!
//! The view is a list of runs: an *identity* run (segments that normalized to
//! themselves) maps each byte to the same byte shifted by a constant; a
//! *block* run is one segment that changed (a look-alike the word rule
//! replaced included), and any offset inside it maps to the whole segment. A
//! match `[s, e)` of the view covers the original text from the start of the
//! segment of `s` to the end of the segment of the character before `e`, so a
//! redaction takes the joiners, soft hyphens, controls and marks inside and
//! just after the value with it, and every look-alike letter of it.

mod numeric_digit;

use super::Region;
use std::collections::HashMap;
use unicode_normalization::char::{canonical_combining_class, compose, is_combining_mark};
use unicode_normalization::{is_nfkc_quick, IsNormalized, UnicodeNormalization};
use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};
use unicode_script::{Script, UnicodeScript};
use unicode_security::mixed_script::AugmentedScriptSet;

/// How a text is matched ([§15](docs/evasion.md#s15)): as written, or through the evasion view.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Normalize {
    /// The reference semantics ([§6](docs/evaluation.md#s6)): rules see the text as written.
    #[default]
    None,
    /// Rules see the [§15](docs/evasion.md#s15) view; spans and redactions cover the original text.
    Evasion,
}

impl Normalize {
    /// `none` or `evasion`, as written in configuration and requests.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Evasion => "evasion",
        }
    }
}

impl std::fmt::Display for Normalize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Normalize {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(Self::None),
            "evasion" => Ok(Self::Evasion),
            other => Err(format!(
                "unknown normalization {other:?} (expected none or evasion)"
            )),
        }
    }
}

/// Longest segment in code points: past it a segment ends even if more
/// marks follow (UAX #15's stream-safe format allows 30 non-starters), so
/// that a stream holds back at most this much for normalization.
pub const MAX_SEGMENT_CHARS: usize = 32;

/// Default_Ignorable_Code_Point (Unicode DerivedCoreProperties): joiners,
/// zero-width spaces, the soft hyphen, bidi controls, variation selectors,
/// tags and the Hangul fillers.
fn is_default_ignorable(c: char) -> bool {
    matches!(
        u32::from(c),
        0xAD | 0x34F
            | 0x61C
            | 0x115F..=0x1160
            | 0x17B4..=0x17B5
            | 0x180B..=0x180F
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x206F
            | 0x3164
            | 0xFE00..=0xFE0F
            | 0xFEFF
            | 0xFFA0
            | 0xFFF0..=0xFFF8
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0000..=0xE0FFF
    )
}

/// An ASCII byte the view keeps as it is: printable, tab, line feed or
/// carriage return (every other ASCII control is removed).
fn plain_byte(b: u8) -> bool {
    matches!(b, 0x20..=0x7E | b'\t' | b'\n' | b'\r')
}

/// [`plain_byte`] without branches, so that a block of bytes is tested at
/// once (vector instructions).
fn not_plain(b: u8) -> u8 {
    u8::from((b.wrapping_sub(0x20) >= 0x5F) & (b != b'\t') & (b != b'\n') & (b != b'\r'))
}

/// The length of the longest prefix of `bytes` made of [`plain_byte`]s: the
/// test every ASCII payload takes before any other work, so it tests 64
/// bytes at a time (about one instruction a byte).
fn plain_prefix(bytes: &[u8]) -> usize {
    let mut at = 0;
    for block in bytes.chunks_exact(64) {
        if block.iter().fold(0, |any, &b| any | not_plain(b)) != 0 {
            break;
        }
        at += 64;
    }
    at + bytes[at..]
        .iter()
        .take_while(|&&b| not_plain(b) == 0)
        .count()
}

/// The length of the longest prefix of `s` whose characters steps 1 to 4
/// keep: plain ASCII, and the inert characters and look-alikes of the tables.
fn kept_prefix(s: &str) -> usize {
    let bytes = s.as_bytes();
    let mut at = plain_prefix(bytes);
    while let Some(&b) = bytes.get(at) {
        if b.is_ascii() {
            let run = plain_prefix(&bytes[at..]);
            if run == 0 {
                break;
            }
            at += run;
            continue;
        }
        let Some(c) = s[at..].chars().next() else {
            break;
        };
        if tables().info(c) & (INERT | KEPT_LOOK) == 0 {
            break;
        }
        at += c.len_utf8();
    }
    at
}

/// Whether every byte of `bytes` is a [`plain_byte`].
fn all_plain(bytes: &[u8]) -> bool {
    plain_prefix(bytes) == bytes.len()
}

/// Whether the view removes `c` wherever it stands: default-ignorable code
/// points, format characters (Cf) and controls (Cc) but tab, line feed and
/// carriage return.
fn is_removed(c: char) -> bool {
    if c.is_ascii() {
        return !plain_byte(c as u8);
    }
    is_default_ignorable(c)
        || matches!(
            c.general_category(),
            GeneralCategory::Format | GeneralCategory::Control
        )
}

fn is_decimal(c: char) -> bool {
    c.general_category() == GeneralCategory::DecimalNumber
}

/// The ASCII digit of a non-ASCII decimal digit. Unicode assigns every Nd
/// digit in runs of ten consecutive code points from zero to nine, so the
/// value is the count of Nd code points just before it, modulo ten.
fn ascii_digit(c: char) -> Option<char> {
    if c.is_ascii() || !is_decimal(c) {
        return None;
    }
    let mut before = 0u32;
    let mut cp = u32::from(c);
    // The longest run (mathematical digits, five sets of ten) is 50.
    while before < 64 {
        match cp.checked_sub(1).and_then(char::from_u32) {
            Some(p) if is_decimal(p) => {
                before += 1;
                cp -= 1;
            }
            _ => break,
        }
    }
    char::from_digit(before % 10, 10)
}

/// The ASCII digit of a character whose `Numeric_Type` is `Digit` (`①`,
/// `⑴`, `❶`, superscripts): a generated table, as no crate has the property.
fn numeric_digit(c: char) -> Option<char> {
    let cp = u32::from(c);
    // The first entry is U+00B2: every ASCII and Latin-1 letter leaves here.
    if cp < 0xB2 {
        return None;
    }
    let runs = &numeric_digit::RUNS;
    let k = runs.partition_point(|&(first, _, _)| first <= cp);
    let &(first, last, zero) = runs.get(k.checked_sub(1)?)?;
    if cp > last {
        return None;
    }
    char::from_digit(u32::from(zero) + (cp - first), 10)
}

/// Whether `c` attaches to the segment that ends with `last` (and so does
/// not begin a segment of its own).
fn attaches(last: char, c: char, t: &Tables) -> bool {
    if c.is_ascii() {
        // An ASCII control goes with the character before it, as a joiner
        // does; every other ASCII character begins a segment.
        return !plain_byte(c as u8);
    }
    // A character steps 1 to 4 keep is a starter that composes with nothing
    // before it (its NFKC quick check is Yes): the common case, one load.
    if t.keeps(c) {
        return false;
    }
    is_combining_mark(c)
        || is_removed(c)
        || canonical_combining_class(c) != 0
        || compose(last, c).is_some()
        // A trailing jamo composes with the syllable a vowel jamo made.
        || (matches!(u32::from(last), 0x1161..=0x1175) && matches!(u32::from(c), 0x11A8..=0x11C2))
}

/// What steps 1, 3 and 4 do to a non-ASCII character, one byte: keep it,
/// remove it, remove it after a digit (a spacing mark), write `-`, or write
/// an ASCII digit (`DECIMAL` or `NUMERIC` plus its value).
const STEP_KEEP: u8 = 0;
const STEP_REMOVE: u8 = 1;
const STEP_MARK: u8 = 2;
const STEP_DASH: u8 = 3;
/// An Nd digit (step 3).
const STEP_DECIMAL: u8 = 0x10;
/// A `Numeric_Type=Digit` character (step 1, before NFKC).
const STEP_NUMERIC: u8 = 0x20;

/// [`STEP_KEEP`] and the others for `c`.
#[cfg(test)]
fn step_slow(c: char) -> u8 {
    step_of(c, c.general_category())
}

/// [`step_slow`] of `c`, whose General Category is `gc`.
fn step_of(c: char, gc: GeneralCategory) -> u8 {
    if is_default_ignorable(c) {
        return STEP_REMOVE;
    }
    let digit = |d: Option<char>, kind: u8| {
        d.and_then(|d| d.to_digit(10))
            .and_then(|d| u8::try_from(d).ok())
            .map_or(STEP_KEEP, |d| kind | d)
    };
    match gc {
        GeneralCategory::Format
        | GeneralCategory::Control
        | GeneralCategory::NonspacingMark
        | GeneralCategory::EnclosingMark => STEP_REMOVE,
        GeneralCategory::SpacingMark => STEP_MARK,
        GeneralCategory::DashPunctuation => STEP_DASH,
        GeneralCategory::DecimalNumber => digit(ascii_digit(c), STEP_DECIMAL),
        _ if c == '\u{2212}' => STEP_DASH,
        _ => digit(numeric_digit(c), STEP_NUMERIC),
    }
}

/// Whether NFKC leaves `c` alone whatever surrounds it: its NFKC quick
/// check is Yes and it is a starter.
fn nfkc_stable(c: char) -> bool {
    canonical_combining_class(c) == 0 && is_nfkc_quick(std::iter::once(c)) == IsNormalized::Yes
}

/// [`nfkc_stable`] for the BMP, quicker: a character with no decomposition
/// that is no mark is stable unless it can compose with the one before it,
/// which in the BMP only Hangul vowel and trailing jamo do (a test checks
/// every code point). The quick check costs a few hundred instructions.
fn nfkc_stable_bmp(c: char) -> bool {
    let mut decomposes = false;
    unicode_normalization::char::decompose_compatible(c, |d| decomposes |= d != c);
    if decomposes
        || is_combining_mark(c)
        || matches!(u32::from(c), 0x1161..=0x1175 | 0x11A8..=0x11C2)
    {
        return nfkc_stable(c);
    }
    canonical_combining_class(c) == 0
}

/// A letter: General Category L or Nl.
fn is_letter(gc: GeneralCategory) -> bool {
    matches!(
        gc,
        GeneralCategory::UppercaseLetter
            | GeneralCategory::LowercaseLetter
            | GeneralCategory::TitlecaseLetter
            | GeneralCategory::ModifierLetter
            | GeneralCategory::OtherLetter
            | GeneralCategory::LetterNumber
    )
}

/// Whether steps 1 to 4 of the view keep `c` as it is whatever surrounds it:
/// a starter that NFKC leaves alone, neither a mark, a digit of any kind, a
/// dash, nor a character the view removes.
#[cfg(test)]
fn keeps(c: char) -> bool {
    step_slow(c) == STEP_KEEP && nfkc_stable(c)
}

/// Whether `c` is a *look-alike*: a letter of another script than Latin
/// whose UTS #39 confusable skeleton is made of Latin letters (Cyrillic `а`,
/// `е`, `х`, Greek `ο`). The word rule replaces it inside a word that mixes
/// scripts.
#[cfg(test)]
fn is_lookalike_slow(c: char) -> bool {
    lookalike_of(c, c.general_category())
}

/// [`is_lookalike_slow`] of `c`, whose General Category is `gc`.
fn lookalike_of(c: char, gc: GeneralCategory) -> bool {
    if c.is_ascii() || !is_letter(gc) {
        return false;
    }
    if matches!(
        c.script(),
        Script::Latin | Script::Common | Script::Inherited
    ) {
        return false;
    }
    let mut buf = [0u8; 4];
    let mut n = 0;
    for s in unicode_security::skeleton(c.encode_utf8(&mut buf)) {
        if s == c || s.script() != Script::Latin || !is_letter(s.general_category()) {
            return false;
        }
        n += 1;
    }
    n > 0
}

/// Writes the Latin skeleton of the look-alike `c` to `out`.
fn push_skeleton(c: char, out: &mut String) {
    let mut buf = [0u8; 4];
    out.extend(unicode_security::skeleton(c.encode_utf8(&mut buf)));
}

/// Whether `c` is *inert*: the view keeps it as it is whatever surrounds it
/// (steps 1 to 4 keep it, and it is no look-alike). A text of ASCII printable
/// and inert characters is its own view.
#[cfg(test)]
fn is_inert_slow(c: char) -> bool {
    keeps(c) && !is_lookalike_slow(c)
}

/// Blocks of the BMP whose every code point steps 1 to 4 keep (Lo or Co
/// letters with no decomposition): CJK Unified Ideographs, Hangul syllables,
/// private use. Within a block every code point has the script set and the
/// word class of its first, and only CJK has look-alikes (U+4E05 looks like
/// T): a test checks every code point.
const INERT_BLOCKS: [(u32, u32, bool); 3] = [
    (0x4E00, 0x9FFF, true),
    (0xAC00, 0xD7A3, false),
    (0xE000, 0xF8FF, false),
];

/// Script classes are indexes into [`Tables::sets`]; this one means "ask
/// the script crate" (more distinct sets than a byte holds).
const COMPLEX: u8 = u8::MAX;
/// The class of Common characters (any script), reserved.
const COMMON: u8 = 0;
/// The class of the Latin letters, reserved: ASCII text needs no table.
const LATIN: u8 = 1;

/// What the view knows of a character, one word: its script class (low
/// byte), its step ([`step_slow`], second byte) and these bits.
const INERT: u32 = 1 << 16;
/// A look-alike that steps 1 to 4 keep: inert but for the word rule.
const KEPT_LOOK: u32 = 1 << 17;
/// A look-alike ([`is_lookalike_slow`]).
const LOOK: u32 = 1 << 18;
/// A word character (`\w` of the regex crate).
const WORD: u32 = 1 << 19;
/// NFKC leaves it alone ([`nfkc_stable`]).
const STABLE: u32 = 1 << 20;

/// The information word of `c` (class `class`), whose General Category is
/// `gc`; `stable` tells whether NFKC leaves it alone.
fn info_of(c: char, gc: GeneralCategory, class: u8, stable: bool) -> u32 {
    let step = step_of(c, gc);
    let look = lookalike_of(c, gc);
    let keeps = step == STEP_KEEP && stable;
    let mut info = u32::from(class) | u32::from(step) << 8;
    for (bit, on) in [
        (INERT, keeps && !look),
        (KEPT_LOOK, keeps && look),
        (LOOK, look),
        (WORD, is_word_slow(c)),
        (STABLE, stable),
    ] {
        if on {
            info |= bit;
        }
    }
    info
}

/// The information word of a code point past the BMP (no table).
fn info_slow(c: char) -> u32 {
    info_of(c, c.general_category(), COMPLEX, nfkc_stable(c))
}

/// What the view needs to know of every code point of the Basic
/// Multilingual Plane, built once (about 12 ms, at the first non-ASCII text
/// the view is asked about, or by [`warm`]): the crates' lookups cost a
/// binary search or more each, a table one load.
struct Tables {
    /// The information word of every code point of the BMP.
    info: Vec<u32>,
    /// The distinct UTS #39 augmented script sets of the BMP ([`COMMON`]
    /// and [`LATIN`] first).
    sets: Vec<AugmentedScriptSet>,
    /// For every class: whether its characters go with any script (Common,
    /// Inherited).
    any: Vec<bool>,
}

fn is_word_slow(c: char) -> bool {
    // The regex crate's own definition, so that words are what `\b` sees.
    regex_syntax::try_is_word_character(c).unwrap_or(false)
}

impl Tables {
    fn build() -> Self {
        let mut sets = vec![AugmentedScriptSet::default(), latin()];
        let mut index: HashMap<AugmentedScriptSet, u8> =
            HashMap::from([(AugmentedScriptSet::default(), COMMON), (latin(), LATIN)]);
        // Neighbours mostly share a script: the last set answers first.
        let mut previous: Option<(AugmentedScriptSet, u8)> = None;
        let mut class_of = |c: char| -> u8 {
            let set = AugmentedScriptSet::for_char(c);
            if let Some((p, k)) = previous {
                if p == set {
                    return k;
                }
            }
            let k = match index.get(&set) {
                Some(&k) => k,
                None => match u8::try_from(sets.len()) {
                    Ok(k) if k < COMPLEX => {
                        sets.push(set);
                        index.insert(set, k);
                        k
                    }
                    _ => COMPLEX,
                },
            };
            previous = Some((set, k));
            k
        };
        let mut info = vec![0u32; 0x1_0000];
        let mut cp = 0u32;
        while cp < 0x1_0000 {
            let Some(c) = char::from_u32(cp) else {
                cp += 1;
                continue;
            };
            if let Some(&(first, last, looks)) = INERT_BLOCKS.iter().find(|b| b.0 == cp) {
                let gc = c.general_category();
                let block = info_of(c, gc, class_of(c), true) & !(INERT | KEPT_LOOK | LOOK);
                for b in first..=last {
                    let look = looks && char::from_u32(b).is_some_and(|c| lookalike_of(c, gc));
                    if let Some(slot) = info.get_mut(b as usize) {
                        *slot = block | if look { KEPT_LOOK | LOOK } else { INERT };
                    }
                }
                cp = last + 1;
                continue;
            }
            let class = class_of(c);
            if let Some(slot) = info.get_mut(cp as usize) {
                *slot = info_of(c, c.general_category(), class, nfkc_stable_bmp(c));
            }
            cp += 1;
        }
        let any = sets.iter().map(AugmentedScriptSet::is_all).collect();
        Tables { info, sets, any }
    }

    /// The information word of `c`.
    #[inline]
    fn info(&self, c: char) -> u32 {
        match self.info.get(u32::from(c) as usize) {
            Some(&info) => info,
            None => info_slow(c),
        }
    }

    /// Whether steps 1 to 4 keep `c` as it is ([`keeps`]).
    fn keeps(&self, c: char) -> bool {
        self.info(c) & (INERT | KEPT_LOOK) != 0
    }

    /// [`step_slow`] of `c`.
    fn step(&self, c: char) -> u8 {
        (self.info(c) >> 8) as u8
    }

    /// Whether NFKC leaves `c` alone ([`nfkc_stable`]).
    fn stable(&self, c: char) -> bool {
        self.info(c) & STABLE != 0
    }

    /// The UTS #39 augmented script set of `c`, of class `k`.
    fn scripts(&self, k: u8, c: char) -> AugmentedScriptSet {
        match self.sets.get(usize::from(k)) {
            Some(set) => *set,
            None => AugmentedScriptSet::for_char(c),
        }
    }
}

/// The table's answers one by one, for the tests.
#[cfg(test)]
impl Tables {
    /// Whether `c` is inert ([`is_inert_slow`]).
    fn inert(&self, c: char) -> bool {
        self.info(c) & INERT != 0
    }

    /// Whether `c` is a look-alike that steps 1 to 4 keep.
    fn kept_lookalike(&self, c: char) -> bool {
        self.info(c) & KEPT_LOOK != 0
    }

    /// Whether `c` is a look-alike ([`is_lookalike_slow`]).
    fn lookalike(&self, c: char) -> bool {
        self.info(c) & LOOK != 0
    }

    /// Whether `c` is a word character (`\w`).
    fn word(&self, c: char) -> bool {
        self.info(c) & WORD != 0
    }

    /// The script class of `c` ([`COMPLEX`] past the BMP).
    fn class(&self, c: char) -> u8 {
        self.info(c) as u8
    }
}

/// The script set of the Latin letters (of `a`).
fn latin() -> AugmentedScriptSet {
    static LATIN: std::sync::OnceLock<AugmentedScriptSet> = std::sync::OnceLock::new();
    *LATIN.get_or_init(|| AugmentedScriptSet::for_char('a'))
}

fn tables() -> &'static Tables {
    static TABLES: std::sync::OnceLock<Tables> = std::sync::OnceLock::new();
    TABLES.get_or_init(Tables::build)
}

/// Builds the view's character tables now (about 41 M instructions, 12 ms,
/// once per process), so that no request pays for them: a server whose
/// `engine.normalize` is `evasion` calls it at start-up.
pub fn warm() {
    tables();
}

/// The scripts a word's characters so far share: while they are of one
/// class (and Common), that class, one byte compared per character; once a
/// second class comes, the exact intersection of their UTS #39 augmented
/// script sets (Han with kana is Japanese, not mixed).
#[derive(Debug, Clone, Copy, Default)]
struct WordScripts {
    class: Option<u8>,
    set: Option<AugmentedScriptSet>,
    mixed: bool,
}

impl WordScripts {
    fn reset(&mut self) {
        *self = Self::default();
    }

    /// Adds an ASCII letter.
    fn add_latin(&mut self) -> bool {
        if self.set.is_none() && self.class.is_none_or(|k| k == LATIN) {
            self.class = Some(LATIN);
            return false;
        }
        self.add(LATIN, 'a', tables())
    }

    /// Adds a word character `c`; returns whether the word has mixed.
    fn add_char(&mut self, c: char, t: &Tables) -> bool {
        if c.is_ascii() {
            c.is_ascii_alphabetic() && self.add_latin() || self.mixed
        } else {
            self.add(t.info(c) as u8, c, t)
        }
    }

    /// Adds a word character `c` of class `k`; returns whether the word has
    /// mixed scripts.
    #[inline]
    fn add(&mut self, k: u8, c: char, t: &Tables) -> bool {
        // Another letter of the script the word began with, or of Common.
        if (self.class == Some(k) && self.set.is_none()) || k == COMMON || self.mixed {
            return self.mixed;
        }
        self.add_other(k, c, t)
    }

    /// [`Self::add`] of a character of another class than the word's.
    fn add_other(&mut self, k: u8, c: char, t: &Tables) -> bool {
        if t.any.get(usize::from(k)).copied().unwrap_or(false) {
            return self.mixed;
        }
        if self.set.is_none() {
            match self.class {
                Some(first) if first == k => return false,
                Some(first) => self.set = Some(t.scripts(first, c)),
                None if k != COMPLEX => {
                    self.class = Some(k);
                    self.mixed = t.scripts(k, c).is_empty();
                    return self.mixed;
                }
                None => self.set = Some(AugmentedScriptSet::default()),
            }
        }
        let Some(set) = self.set.as_mut() else {
            return self.mixed;
        };
        set.intersect_with(t.scripts(k, c));
        self.mixed = set.is_empty();
        self.mixed
    }
}

/// Whether normalizing `text` could change it: a cheap test first, so that a
/// text with nothing to normalize never builds a view. `false` is exact (the
/// text is its own view); `true` means a view must be built to know.
pub(crate) fn may_change(text: &str) -> bool {
    if all_plain(text.as_bytes()) {
        return false;
    }
    let t = tables();
    let mut first_look = None;
    for (i, c) in text.char_indices() {
        if c.is_ascii() {
            if !plain_byte(c as u8) {
                return true;
            }
            continue;
        }
        let info = t.info(c);
        if info & INERT == 0 {
            if info & KEPT_LOOK == 0 {
                return true;
            }
            first_look.get_or_insert(i);
        }
    }
    // Every character is kept by steps 1 to 4: the text changes only if a
    // word with a look-alike mixes scripts.
    first_look.is_some_and(|at| mixes_with_lookalike(text, at, t))
}

/// Whether a word of `text` holding a look-alike mixes scripts, the first
/// look-alike being at byte `at`: one pass from the start of its word; a
/// word's scripts are followed from its first look-alike on (its earlier
/// characters read again then), so a word without one costs a load a
/// character.
fn mixes_with_lookalike(text: &str, at: usize, t: &Tables) -> bool {
    let is_word = |c: char| {
        if c.is_ascii() {
            regex_syntax::is_word_byte(c as u8)
        } else {
            t.info(c) & WORD != 0
        }
    };
    let start = text[..at]
        .char_indices()
        .rev()
        .find(|&(_, c)| !is_word(c))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let mut scripts = WordScripts::default();
    let mut word_start = start;
    let mut look = false;
    for (i, c) in text[start..].char_indices() {
        let info = if c.is_ascii() { 0 } else { t.info(c) };
        if !(if c.is_ascii() {
            regex_syntax::is_word_byte(c as u8)
        } else {
            info & WORD != 0
        }) {
            look = false;
            word_start = start + i + c.len_utf8();
            continue;
        }
        if !look {
            if info & KEPT_LOOK == 0 {
                continue;
            }
            look = true;
            scripts.reset();
            for w in text[word_start..start + i].chars() {
                scripts.add_char(w, t);
            }
        }
        if scripts.add_char(c, t) {
            return true;
        }
    }
    false
}

/// Where one part of the view comes from (offsets in bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    /// First view byte of the run.
    view: usize,
    /// Original byte of the run's first view byte.
    orig: usize,
    /// `None`: each view byte maps to the original byte at the same distance
    /// from the run's start. `Some(end)`: one segment, `[orig, end)`.
    end: Option<usize>,
}

/// The map from view offsets to original offsets (absolute: a stream's runs
/// keep counting from the first byte of the stream).
#[derive(Debug, Default)]
pub(crate) struct ViewMap {
    runs: Vec<Run>,
}

impl ViewMap {
    /// The run holding view byte `v` (the last one starting at or before it).
    fn run_at(&self, v: usize) -> Option<&Run> {
        let k = self.runs.partition_point(|r| r.view <= v);
        k.checked_sub(1).and_then(|k| self.runs.get(k))
    }

    /// The original offset where the view character at byte `v` begins.
    pub(crate) fn start(&self, v: usize) -> usize {
        match self.run_at(v) {
            Some(r) if r.end.is_none() => r.orig + (v - r.view),
            Some(r) => r.orig,
            None => v,
        }
    }

    /// The original offset where a match of the view ending at byte `v`
    /// (`v > 0`) ends: the end of the segment its last character came from.
    pub(crate) fn end(&self, v: usize) -> usize {
        match self.run_at(v.saturating_sub(1)) {
            Some(r) => r.end.unwrap_or(r.orig + (v - r.view)),
            None => v,
        }
    }

    /// Original span `[start, end)` of the view span `[s, e)`, `s < e`.
    pub(crate) fn span(&self, s: usize, e: usize) -> (usize, usize) {
        (self.start(s), self.end(e))
    }

    /// Forgets the runs wholly before view byte `v` (a stream's released text).
    pub(crate) fn forget_before(&mut self, v: usize) {
        let k = self.runs.partition_point(|r| r.view <= v).saturating_sub(1);
        if k > 0 {
            self.runs.drain(..k);
        }
    }

    fn push_identity(&mut self, view: usize, orig: usize) {
        if let Some(last) = self.runs.last() {
            if last.end.is_none() && last.orig + (view - last.view) == orig {
                return;
            }
        }
        self.runs.push(Run {
            view,
            orig,
            end: None,
        });
    }
}

/// A segment whose view waits for the word rule.
#[derive(Debug, Clone, Copy)]
struct HeldSegment {
    /// Original bytes `[at, at + len)`.
    at: usize,
    len: usize,
    /// End of its view in [`Held::text`].
    end: usize,
    /// Whether its view is the original text.
    same: bool,
}

/// The view from the first look-alike of a word that has not mixed scripts
/// yet: it changes if a later letter of the word is of another script, and
/// is written as it is if the word ends first.
// No `Debug`: it holds payload text.
#[derive(Default)]
struct Held {
    segments: Vec<HeldSegment>,
    text: String,
    /// Offsets in `text` of the word's look-alikes, ascending.
    pending: Vec<usize>,
    /// Whether the word rule changed the segment being added.
    changed_open: bool,
}

impl Held {
    /// The word has mixed scripts: its waiting look-alikes become their
    /// skeletons. A segment that is its own view is cut around each of them
    /// (so that a match maps to the look-alike alone); another segment's view
    /// is rewritten. Only the text from the first of them is rewritten, once
    /// (the held text is written out right after).
    fn replace_pending(&mut self) {
        let Some(&first) = self.pending.first() else {
            return;
        };
        let tail = self.text.split_off(first);
        let mut copied = first;
        // Old text up to old offset `x`, copied: the new offset of `x`.
        let copy_to = |text: &mut String, copied: &mut usize, x: usize| -> usize {
            if x <= first {
                return x;
            }
            if x > *copied {
                text.push_str(&tail[*copied - first..x - first]);
                *copied = x;
            }
            text.len()
        };
        let mut pending = std::mem::take(&mut self.pending).into_iter().peekable();
        let keep = self.segments.partition_point(|s| s.end <= first);
        let mut start = keep
            .checked_sub(1)
            .and_then(|k| self.segments.get(k))
            .map_or(0, |s| s.end);
        let old = self.segments.split_off(keep);
        for seg in old {
            let mut cursor = start;
            let mut same = seg.same;
            while let Some(p) = pending.next_if(|&p| p < seg.end) {
                let Some(c) = tail[p - first..].chars().next() else {
                    break;
                };
                let end = copy_to(&mut self.text, &mut copied, p);
                if seg.same {
                    if p > cursor {
                        self.segments.push(HeldSegment {
                            at: seg.at + (cursor - start),
                            len: p - cursor,
                            end,
                            same: true,
                        });
                    }
                    push_skeleton(c, &mut self.text);
                    self.segments.push(HeldSegment {
                        at: seg.at + (p - start),
                        len: c.len_utf8(),
                        end: self.text.len(),
                        same: false,
                    });
                } else {
                    push_skeleton(c, &mut self.text);
                    same = false;
                }
                copied = p + c.len_utf8();
                cursor = copied;
            }
            let end = copy_to(&mut self.text, &mut copied, seg.end);
            if !seg.same {
                self.segments.push(HeldSegment { end, same, ..seg });
            } else if seg.end > cursor {
                self.segments.push(HeldSegment {
                    at: seg.at + (cursor - start),
                    len: seg.end - cursor,
                    end,
                    same: true,
                });
            }
            start = seg.end;
        }
        // Look-alikes of a changed segment being added.
        for p in pending {
            let Some(c) = tail[p - first..].chars().next() else {
                break;
            };
            copy_to(&mut self.text, &mut copied, p);
            push_skeleton(c, &mut self.text);
            copied = p + c.len_utf8();
            self.changed_open = true;
        }
        self.text.push_str(&tail[copied - first..]);
    }
}

/// Builds the view of a text that arrives in pieces: the view of every whole
/// segment pushed so far, the last (open) segment held until the character
/// after it shows that it is complete, and the segments from a look-alike
/// held while its word may still mix scripts.
// No `Debug`: it holds payload text.
#[derive(Default)]
pub(crate) struct Normalizer {
    /// The open segment and its original offset.
    open: String,
    open_at: usize,
    open_chars: usize,
    last: Option<char>,
    /// Whether the last character of steps 1 to 4 is an ASCII digit.
    after_digit: bool,
    /// View bytes written so far.
    view_len: usize,
    /// Whether some segment's view differed from it.
    changed: bool,
    /// Reused: a segment after step 1, after NFKC, after step 4.
    pre: String,
    scratch: String,
    step4: String,
    /// The word the view is in.
    scripts: WordScripts,
    held: Held,
}

impl Normalizer {
    /// Original bytes whose view has been written (whole segments that no
    /// word waits for).
    pub(crate) fn complete(&self) -> usize {
        self.held.segments.first().map_or(self.open_at, |s| s.at)
    }

    /// View bytes written so far.
    pub(crate) fn view_len(&self) -> usize {
        self.view_len
    }

    /// Whether the view written so far differs from the text it came from.
    pub(crate) fn changed(&self) -> bool {
        self.changed
    }

    /// Appends `piece` (original bytes from `self.complete() + open`), writing
    /// the view of every segment it completes to `view` and its runs to `map`.
    pub(crate) fn push(&mut self, piece: &str, view: &mut String, map: &mut ViewMap) {
        let base = self.open_at + self.open.len();
        let mut i = 0;
        while i < piece.len() {
            let run = kept_prefix(&piece[i..]);
            if let Some(lastc) = piece[i..i + run].chars().next_back() {
                // A character steps 1 to 4 keep (plain ASCII included) begins
                // a segment and attaches to nothing: a run of them up to its
                // last character is whole segments of themselves.
                self.close(view, map);
                let body = run - lastc.len_utf8();
                if body > 0 {
                    self.kept(&piece[i..i + body], base + i, view, map);
                }
                self.open_at = base + i + body;
                self.open.push(lastc);
                self.open_chars = 1;
                self.last = Some(lastc);
                i += run;
                continue;
            }
            let Some(c) = piece[i..].chars().next() else {
                break;
            };
            let joins = self.open_chars > 0
                && self.open_chars < MAX_SEGMENT_CHARS
                && self.last.is_some_and(|l| attaches(l, c, tables()));
            if !joins {
                self.close(view, map);
                self.open_at = base + i;
            }
            self.open.push(c);
            self.open_chars += 1;
            self.last = Some(c);
            i += c.len_utf8();
        }
    }

    /// Ends the text: the open segment is complete, and so is the last word.
    pub(crate) fn finish(&mut self, view: &mut String, map: &mut ViewMap) {
        self.close(view, map);
        self.held.pending.clear();
        self.write_held(view, map);
    }

    /// Writes the open segment's view and run (or holds them for the word
    /// rule), and empties it.
    fn close(&mut self, view: &mut String, map: &mut ViewMap) {
        if self.open.is_empty() {
            return;
        }
        let at = self.open_at;
        let seg_len = self.open.len();
        let kept = match self.last {
            Some(c) if self.open_chars == 1 && c.is_ascii() => plain_byte(c as u8).then_some(false),
            Some(c) if self.open_chars == 1 => {
                let info = tables().info(c);
                (info & (INERT | KEPT_LOOK) != 0).then_some(info & LOOK != 0)
            }
            _ => None,
        };
        if let Some(look) = kept {
            // One character steps 1 to 4 keep (the last of a run): its own
            // view but for the word rule.
            let open = std::mem::take(&mut self.open);
            if look {
                self.add(at, seg_len, &open, true, view, map);
            } else {
                self.identity(&open, at, view, map);
            }
            self.after_digit = open.as_bytes().first().is_some_and(u8::is_ascii_digit);
            self.open = open;
            self.open_at = at + seg_len;
            self.open.clear();
            self.open_chars = 0;
            return;
        }
        let t = tables();
        // Step 1, before NFKC.
        let src = if self
            .open
            .chars()
            .any(|c| !c.is_ascii() && t.step(c) & STEP_NUMERIC != 0)
        {
            self.pre.clear();
            let open = &self.open;
            self.pre
                .extend(open.chars().map(|c| numeric_digit(c).unwrap_or(c)));
            &self.pre
        } else {
            &self.open
        };
        // Step 2.
        self.scratch.clear();
        if src.chars().all(|c| c.is_ascii() || t.stable(c))
            || is_nfkc_quick(src.chars()) == IsNormalized::Yes
        {
            self.scratch.push_str(src);
        } else {
            self.scratch.extend(src.nfkc());
        }
        // Steps 3 and 4.
        self.step4.clear();
        for d in self.scratch.chars() {
            let d = if d.is_ascii() {
                if !plain_byte(d as u8) {
                    continue;
                }
                d
            } else {
                match t.step(d) {
                    STEP_KEEP => d,
                    STEP_REMOVE => continue,
                    STEP_MARK if self.after_digit => continue,
                    STEP_MARK => d,
                    STEP_DASH => '-',
                    digit => char::from(b'0' + (digit & 0x0F)),
                }
            };
            self.step4.push(d);
            self.after_digit = d.is_ascii_digit();
        }
        let same = self.step4 == self.open;
        let step4 = std::mem::take(&mut self.step4);
        self.add(at, seg_len, &step4, same, view, map);
        self.step4 = step4;
        self.open_at = at + seg_len;
        self.open.clear();
        self.open_chars = 0;
    }

    /// The word rule over the view `text` of original bytes `[at, at + len)`
    /// (`same`: the view is those bytes, and a look-alike it replaces is cut
    /// out as a segment of its own): written out at once unless a look-alike
    /// of a word that has not mixed yet waits in it or before it.
    fn add(
        &mut self,
        at: usize,
        len: usize,
        text: &str,
        same: bool,
        view: &mut String,
        map: &mut ViewMap,
    ) {
        self.held.changed_open = false;
        // With `same`: where the part of `text` not yet a segment begins.
        let mut from = at;
        for (k, d) in text.char_indices() {
            // An ASCII text never builds the tables: its letters are Latin.
            let (word, look, class) = if d.is_ascii() {
                (regex_syntax::is_word_byte(d as u8), false, LATIN)
            } else {
                let info = tables().info(d);
                (info & WORD != 0, info & LOOK != 0, info as u8)
            };
            if !word {
                // The word ended with one script: its look-alikes stay, and
                // what was held for it is final.
                let waited = !self.held.pending.is_empty();
                self.held.pending.clear();
                self.scripts.reset();
                self.held.text.push(d);
                if waited && same {
                    let end = at + k + d.len_utf8();
                    self.held.segments.push(HeldSegment {
                        at: from,
                        len: end - from,
                        end: self.held.text.len(),
                        same: true,
                    });
                    from = end;
                    self.write_held(view, map);
                }
                continue;
            }
            let mixed = if d.is_ascii() {
                d.is_ascii_alphabetic() && self.scripts.add_latin()
            } else {
                self.scripts.add(class, d, tables())
            };
            if mixed && (look || !self.held.pending.is_empty()) && same && at + k > from {
                self.held.segments.push(HeldSegment {
                    at: from,
                    len: at + k - from,
                    end: self.held.text.len(),
                    same: true,
                });
                from = at + k;
            }
            if mixed && !self.held.pending.is_empty() {
                self.held.replace_pending();
            }
            if !look {
                self.held.text.push(d);
            } else if !mixed {
                if same && self.held.pending.is_empty() {
                    // The first look-alike of the word: what comes before it
                    // is final, the view waits from here.
                    if at + k > from {
                        self.held.segments.push(HeldSegment {
                            at: from,
                            len: at + k - from,
                            end: self.held.text.len(),
                            same: true,
                        });
                        from = at + k;
                    }
                    self.write_held(view, map);
                }
                self.held.pending.push(self.held.text.len());
                self.held.text.push(d);
            } else if same {
                push_skeleton(d, &mut self.held.text);
                self.held.segments.push(HeldSegment {
                    at: at + k,
                    len: d.len_utf8(),
                    end: self.held.text.len(),
                    same: false,
                });
                from = at + k + d.len_utf8();
            } else {
                push_skeleton(d, &mut self.held.text);
                self.held.changed_open = true;
            }
        }
        if !same {
            self.held.segments.push(HeldSegment {
                at,
                len,
                end: self.held.text.len(),
                same: false,
            });
        } else if at + len > from {
            self.held.segments.push(HeldSegment {
                at: from,
                len: at + len - from,
                end: self.held.text.len(),
                same: true,
            });
        }
        if self.held.pending.is_empty() {
            self.write_held(view, map);
        }
    }

    /// A run of characters steps 1 to 4 keep (`body`, at original offset
    /// `at`), each a segment of its own: their own view but for the word
    /// rule, which may replace a look-alike.
    fn kept(&mut self, body: &str, at: usize, view: &mut String, map: &mut ViewMap) {
        let after_digit = body.as_bytes().last().is_some_and(u8::is_ascii_digit);
        let looks = !body.is_ascii() && {
            let t = tables();
            body.chars().any(|c| !c.is_ascii() && t.info(c) & LOOK != 0)
        };
        if looks {
            self.add(at, body.len(), body, true, view, map);
        } else {
            self.identity(body, at, view, map);
        }
        self.after_digit = after_digit;
    }

    /// Characters steps 1 to 4 keep and that hold no look-alike (`chunk`, at
    /// original offset `at`): their own view.
    fn identity(&mut self, chunk: &str, at: usize, view: &mut String, map: &mut ViewMap) {
        if chunk.is_empty() {
            return;
        }
        if !self.held.pending.is_empty() {
            // A word waits: this may decide it.
            self.add(at, chunk.len(), chunk, true, view, map);
            return;
        }
        // Nothing waits: the view is written at once, and only the word the
        // chunk ends in matters to what follows.
        let is_word = |c: char| {
            if c.is_ascii() {
                regex_syntax::is_word_byte(c as u8)
            } else {
                tables().info(c) & WORD != 0
            }
        };
        let word = match chunk.char_indices().rev().find(|&(_, c)| !is_word(c)) {
            Some((k, c)) => {
                self.scripts.reset();
                &chunk[k + c.len_utf8()..]
            }
            None => chunk,
        };
        for c in word.chars() {
            if c.is_ascii_alphabetic() {
                self.scripts.add_latin();
            } else if !c.is_ascii() {
                let t = tables();
                self.scripts.add(t.info(c) as u8, c, t);
            }
        }
        map.push_identity(self.view_len, at);
        view.push_str(chunk);
        self.view_len += chunk.len();
    }

    /// Writes out every held segment.
    fn write_held(&mut self, view: &mut String, map: &mut ViewMap) {
        let mut from = 0;
        for seg in self.held.segments.drain(..) {
            let text = &self.held.text[from..seg.end];
            if seg.same {
                map.push_identity(self.view_len, seg.at);
            } else {
                self.changed = true;
                if !text.is_empty() {
                    map.runs.push(Run {
                        view: self.view_len,
                        orig: seg.at,
                        end: Some(seg.at + seg.len),
                    });
                }
            }
            view.push_str(text);
            self.view_len += text.len();
            from = seg.end;
        }
        self.held.text.clear();
    }
}

/// The evasion view of a whole text and its map (no `Debug`: payload text).
pub(crate) struct View {
    /// The normalized text rules run on.
    pub(crate) text: String,
    /// From view offsets back to the original text.
    pub(crate) map: ViewMap,
}

impl View {
    /// The view of `text`, or `None` when it is the text itself.
    pub(crate) fn of(text: &str) -> Option<Self> {
        if !may_change(text) {
            return None;
        }
        let mut view = String::with_capacity(text.len());
        let mut map = ViewMap::default();
        let mut n = Normalizer::default();
        n.push(text, &mut view, &mut map);
        n.finish(&mut view, &mut map);
        if !n.changed() {
            return None;
        }
        Some(Self { text: view, map })
    }
}

/// Adds the region `[s, e)` to `regions` (sorted, disjoint), merging it into
/// the last one when they overlap: the [§6.3](docs/evaluation.md#s6-3) rule, applied again once regions
/// of the view have been mapped to the original text (two view regions can
/// meet inside one segment).
pub(super) fn push_region<P>(regions: &mut Vec<Region<P>>, s: usize, e: usize, p: P) {
    match regions.last_mut() {
        Some(last) if s < last.end => last.end = last.end.max(e),
        _ => regions.push(Region {
            start: s,
            end: e,
            placeholder: p,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(text: &str) -> String {
        View::of(text).map_or_else(|| text.to_string(), |v| v.text)
    }

    /// The view built without the `may_change` shortcut.
    fn built(text: &str) -> (String, ViewMap, bool) {
        let (mut v, mut map, mut n) = (String::new(), ViewMap::default(), Normalizer::default());
        n.push(text, &mut v, &mut map);
        n.finish(&mut v, &mut map);
        (v, map, n.changed())
    }

    fn spans(text: &str, s: usize, e: usize) -> String {
        let v = View::of(text).map(|v| v.map).unwrap_or_default();
        let (a, b) = v.span(s, e);
        text[a..b].to_string()
    }

    /// The original text each match of `re` in the view covers.
    fn matched(text: &str, re: &regex::Regex) -> Vec<String> {
        let v = View::of(text);
        let (vt, map) = match &v {
            Some(v) => (v.text.as_str(), Some(&v.map)),
            None => (text, None),
        };
        re.find_iter(vt)
            .map(|m| {
                let (a, b) = map.map_or((m.start(), m.end()), |map| map.span(m.start(), m.end()));
                text[a..b].to_string()
            })
            .collect()
    }

    const EMAIL: &str = r"(?i)\b[a-zA-Z0-9_.+-]+@[a-zA-Z0-9-]+\.[a-zA-Z0-9-.]+\b";

    #[test]
    fn the_issue_evasions_normalize_to_the_ascii_value() {
        assert_eq!(view("１２３-４５-６７８９"), "123-45-6789");
        assert_eq!(view("١٢٣-٤٥-٦٧٨٩"), "123-45-6789");
        assert_eq!(view("۱۲۳-۴۵-۶۷۸۹"), "123-45-6789");
        assert_eq!(view("१२३-४५-६७८९"), "123-45-6789");
        assert_eq!(view("123-45\u{200D}-6789"), "123-45-6789");
        assert_eq!(view("123-45-67\u{AD}89"), "123-45-6789");
        assert_eq!(view("123-45-6789\u{301}"), "123-45-6789");
        assert_eq!(view("123-45-6789\u{301}\u{302}"), "123-45-6789");
        assert_eq!(view("ＭＲＮ: 12345678"), "MRN: 12345678");
        assert_eq!(view("jane＠example.com"), "jane@example.com");
        assert_eq!(view("𝟏𝟐𝟑"), "123");
        assert_eq!(view("a\u{200B}b\u{FEFF}c\u{2060}d\u{FE0F}"), "abcd");
    }

    #[test]
    fn dashes_become_hyphen_minus() {
        for dash in [
            '\u{2010}', '\u{2011}', '\u{2012}', '\u{2013}', '\u{2014}', '\u{2015}', '\u{2212}',
            '\u{FE58}', '\u{FE63}', '\u{FF0D}', '\u{2E3A}', '\u{301C}', '\u{58A}',
        ] {
            let t = format!("123{dash}45{dash}6789");
            assert_eq!(view(&t), "123-45-6789", "U+{:04X}", u32::from(dash));
        }
        // The value's span covers the dashes of the original.
        let t = "SSN 123\u{2014}45\u{2212}6789.";
        assert_eq!(view(t), "SSN 123-45-6789.");
        assert_eq!(spans(t, 4, 15), "123\u{2014}45\u{2212}6789");
        // Other punctuation stays.
        assert_eq!(view("a\u{2022}b\u{2026}"), "a\u{2022}b...");
    }

    #[test]
    fn numeric_type_digits_become_ascii_digits_before_nfkc() {
        assert_eq!(view("⑴⑵⑶-⑷⑸-⑹⑺⑻⑼"), "123-45-6789");
        assert_eq!(view("❶❷❸-❹❺-❻❼❽❾"), "123-45-6789");
        assert_eq!(view("①②③-④⑤-⑥⑦⑧⑨"), "123-45-6789");
        assert_eq!(view("⒈⒉⒊ ⓪ ⓿ ➀ ➊ ⓵"), "123 0 0 1 1 1");
        assert_eq!(view("x²₃¹"), "x231");
        assert_eq!(view("፩፪"), "12");
        // Numeric_Type Numeric, not Digit: NFKC's reading stays.
        assert_eq!(view("⑽⑩"), "(10)10");
        assert_eq!(numeric_digit('⑴'), Some('1'));
        assert_eq!(numeric_digit('❾'), Some('9'));
        assert_eq!(numeric_digit('\u{1F101}'), Some('0'));
        assert_eq!(numeric_digit('\u{1F10A}'), Some('9'));
        assert_eq!(numeric_digit('⑽'), None);
        assert_eq!(numeric_digit('5'), None);
        assert_eq!(numeric_digit('٣'), None, "Nd is Decimal, not Digit");
        // Spans cover the original symbols.
        let t = "id ⑴⑵⑶-⑷⑸-⑹⑺⑻⑼ ok";
        assert_eq!(spans(t, 3, 14), "⑴⑵⑶-⑷⑸-⑹⑺⑻⑼");
    }

    #[test]
    fn the_numeric_digit_table_is_sound() {
        use numeric_digit::RUNS;
        let v = unicode_normalization::UNICODE_VERSION;
        assert_eq!(
            numeric_digit::UNICODE_VERSION,
            format!("{}.{}.{}", v.0, v.1, v.2),
            "regenerate the table with scripts/gen-numeric-digit.py"
        );
        let mut count = 0;
        for (k, &(first, last, zero)) in RUNS.iter().enumerate() {
            assert!(first <= last && u32::from(zero) + (last - first) <= 9);
            if let Some(&(next, _, _)) = RUNS.get(k + 1) {
                assert!(last < next, "sorted and disjoint");
            }
            for cp in first..=last {
                let c = char::from_u32(cp).unwrap_or('\0');
                count += 1;
                assert_eq!(c.general_category(), GeneralCategory::OtherNumber);
                let d = numeric_digit(c).unwrap_or('?');
                assert_eq!(d.to_digit(10), Some(u32::from(zero) + cp - first));
                // Where NFKC reads a digit into it, it reads the same one.
                let nfkc: String = c.to_string().nfkc().collect();
                if let Some(n) = nfkc.chars().find(char::is_ascii_digit) {
                    assert_eq!(n, d, "U+{cp:04X}");
                }
            }
            if RUNS.get(k + 1).is_none_or(|r| r.0 != last + 1) {
                assert_eq!(
                    numeric_digit(char::from_u32(last + 1).unwrap_or('\0')),
                    None
                );
            }
        }
        assert_eq!(count, 128);
    }

    #[test]
    fn format_and_control_characters_are_removed() {
        assert_eq!(view("123-45\u{0}-6789"), "123-45-6789");
        assert_eq!(view("123-45-67\u{FFF9}89"), "123-45-6789");
        assert_eq!(
            view("1\u{1}2\u{1B}3\u{7F}4\u{85}5\u{600}6\u{FFFB}7"),
            "1234567"
        );
        assert_eq!(view("a\tb\nc\r\nd"), "a\tb\nc\r\nd");
        // A control goes with the character before it: a match ending at
        // that character takes it, one starting after it does not.
        let t = "x 123-45\u{0}-6789\u{0} y";
        assert_eq!(view(t), "x 123-45-6789 y");
        assert_eq!(spans(t, 2, 13), "123-45\u{0}-6789\u{0}");
        assert!(may_change("plain\u{0}ascii"));
        assert!(may_change("bell\u{7}"));
        assert!(!may_change("tab\tnewline\ncr\r"));
    }

    #[test]
    fn marks_left_after_nfkc_are_removed() {
        assert_eq!(view("123-\u{301}45-\u{301}6789"), "123-45-6789");
        assert_eq!(view("4111 \u{301}1111 1111 1111"), "4111 1111 1111 1111");
        assert_eq!(view("x\u{301}y\u{20DD}"), "xy");
        // NFKC composes first: an accent with a precomposed letter stays.
        assert_eq!(view("e\u{301}"), "é");
        assert_eq!(view("a\u{308}"), "ä");
        // Spacing marks (Mc) stay, but not after a digit; Mn goes.
        assert_eq!(view("हिन्दी"), "हिनदी");
        assert_eq!(view("5\u{93F}x"), "5x");
        let t = "card 4111 \u{301}1111 1111 1111.";
        assert_eq!(spans(t, 5, 24), "4111 \u{301}1111 1111 1111");
    }

    #[test]
    fn lookalikes_in_words_that_mix_scripts_become_latin() {
        // Cyrillic а, е, х and Greek ο inside Latin words.
        assert_eq!(
            view("j\u{430}ne.d\u{3BF}e@\u{435}\u{445}ample.com"),
            "jane.doe@example.com"
        );
        assert_eq!(view("jan\u{435}.doe@example.com"), "jane.doe@example.com");
        assert_eq!(view("\u{420}ay\u{420}al"), "PayPal");
        // Latin letters stay as written (the skeleton of m is rn).
        assert_eq!(view("m\u{430}il"), "mail");
        // Words of one script stay, whatever they look like.
        for t in [
            "Ещё раз спасибо",
            "\u{430}\u{445}",
            "δοκιμή",
            "会議は午後三時",
            "Tokyoの会議",
            "\u{430}\u{445}123 \u{430}\u{445}_1",
        ] {
            assert!(!may_change(t), "{t:?}");
            assert_eq!(built(t).0, t, "{t:?}");
        }
        // Digits and `_` do not mix a word; a Latin letter does.
        assert_eq!(view("\u{430}\u{445}1b"), "ax1b");
        assert_eq!(view("b_\u{430}"), "b_a");
        // Cyrillic with Greek mixes too: both become Latin.
        assert_eq!(view("\u{3BF}\u{445}"), "ox");
        // Only look-alikes change: other letters of a mixed word stay.
        assert_eq!(view("a\u{436}\u{430}"), "a\u{436}a");
        // A word ends at a non-word character.
        assert_eq!(view("\u{430}\u{445}.ax"), "\u{430}\u{445}.ax");
    }

    #[test]
    fn the_model_s_lookalikes_are_the_crate_s() {
        // tests/model/evasion_diff.py knows a few look-alikes by heart (it
        // has no confusables table): each must be one, with that skeleton.
        let model = include_str!("../../tests/model/evasion_diff.py");
        let table = model
            .split_once("LOOKALIKES = {")
            .and_then(|(_, rest)| rest.split_once('}'))
            .map_or("", |(table, _)| table);
        let mut count = 0;
        for entry in table.split(',').filter(|e| e.contains(':')) {
            let (key, value) = entry.split_once(':').unwrap_or_default();
            let hex = key.trim().trim_matches('"').trim_start_matches("\\u");
            let c = u32::from_str_radix(hex, 16)
                .ok()
                .and_then(char::from_u32)
                .unwrap_or_else(|| panic!("{entry:?}"));
            let skeleton = value.trim().trim_matches('"');
            assert!(is_lookalike_slow(c), "U+{hex}");
            assert_eq!(view(&format!("q{c}")), format!("q{skeleton}"), "U+{hex}");
            count += 1;
        }
        assert!(count >= 30, "only {count} look-alikes read from the model");
    }

    #[test]
    fn a_lookalike_never_splits_a_value() {
        let re = regex::Regex::new(EMAIL).unwrap_or_else(|e| panic!("{e}"));
        for (text, value) in [
            (
                "mail jan\u{435}.doe@example.com now",
                "jan\u{435}.doe@example.com",
            ),
            (
                "mail j\u{430}ne.doe@\u{435}\u{445}ample.com now",
                "j\u{430}ne.doe@\u{435}\u{445}ample.com",
            ),
            (
                "to: jane.d\u{3BF}e@example.com",
                "jane.d\u{3BF}e@example.com",
            ),
            (
                "x jane@ex\u{430}mple.c\u{43E}m",
                "jane@ex\u{430}mple.c\u{43E}m",
            ),
        ] {
            assert_eq!(matched(text, &re), [value], "{text:?}");
            // As written, the look-alike cut the value (or hid it).
            assert!(re.find_iter(text).all(|m| m.as_str() != value));
        }
    }

    #[test]
    fn normalized_texts_are_left_alone() {
        for t in [
            "",
            "plain ascii 123-45-6789",
            "Die Überprüfung läuft; café crème.",
            "会議は午後三時に始まります。",
            "Ещё раз спасибо, Señor Núñez",
            "한국어 텍스트",
            "e\u{301}", // NFKC composes it: a change
        ] {
            let changed = View::of(t).is_some();
            assert_eq!(changed, t == "e\u{301}", "{t:?}");
        }
        // A mark after a letter NFKC composes with stays in the letter.
        assert_eq!(view("a\u{308}"), "ä");
        assert_eq!(view("5\u{308}x"), "5x");
    }

    #[test]
    fn may_change_is_exact_when_it_says_no() {
        let texts = [
            "Ещё раз спасибо, Señor Núñez — 会議",
            "Überprüfung läuft 2024",
            "café ах",
            "Παρακαλώ στείλτε το έγγραφο",
            "jаne",
            "a\u{2022}b",
            "x\u{1F600}y",
            "tab\tnewline\n",
            "𝐚𝐛𝐜",
            "\u{10400}\u{10401}",
        ];
        for t in texts {
            let (v, _, changed) = built(t);
            if !may_change(t) {
                assert_eq!(v, t, "{t:?}");
                assert!(!changed, "{t:?}");
            }
            assert_eq!(View::of(t).is_some(), changed, "{t:?}");
        }
        assert!(may_change("a — b"));
        assert!(may_change("jаne"));
        assert!(!may_change("а jane"));
        // Where every character is kept but look-alikes, the answer is
        // exact both ways: it finds the one word that mixes.
        for t in [
            "\u{430}x",
            "x\u{430}",
            "\u{430} x",
            "\u{445}\u{430} \u{430}",
            "\u{430}1b",
            "b_\u{430}",
            "\u{430}\u{445} \u{430}\u{445} b",
            "\u{430}\u{445}, b\u{430}\u{445}",
            "\u{430}\u{445}, b \u{430}\u{445}é",
            "会\u{430}",
            "Ещё раз. Ещё раз, ещёx",
            "δοκιμή δοκιμήq",
            "δοκιμή\u{430}",
        ] {
            assert_eq!(may_change(t), built(t).2, "{t:?}");
        }
    }

    #[test]
    fn spans_cover_the_whole_evasive_value_in_the_original() {
        let t = "SSN １２３-４５-６７８９ ok";
        assert_eq!(view(t), "SSN 123-45-6789 ok");
        assert_eq!(spans(t, 4, 15), "１２３-４５-６７８９");
        let t = "x 123-45\u{200D}-6789\u{301} y";
        assert_eq!(view(t), "x 123-45-6789 y");
        assert_eq!(spans(t, 2, 13), "123-45\u{200D}-6789\u{301}");
        // A joiner before the value belongs to the character before it.
        let t = "x\u{200B}123";
        assert_eq!(view(t), "x123");
        assert_eq!(spans(t, 1, 4), "123");
        assert_eq!(spans(t, 0, 1), "x\u{200B}");
        // One segment that becomes several view characters maps whole.
        let t = "a\u{FB01}b";
        assert_eq!(view(t), "afib");
        assert_eq!(spans(t, 2, 3), "\u{FB01}");
    }

    /// Texts of every kind the view changes, for the cut tests.
    const CUT_TEXTS: [&str; 7] = [
        "SSN １２３-４５-６７８９ and ١٢٣-٤٥-٦٧٨٩, 123-45\u{200D}-67\u{AD}89\u{301}!",
        "e\u{301}\u{302}a\u{FB01}\u{1100}\u{1161}\u{11A8} ＭＲＮ＠ x",
        "\u{200B}\u{200B}lead",
        "123\u{2010}45\u{2212}6789 ⑴⑵⑶-❹❺-⑹⑺⑻⑼ 12\u{0}3-45-67\u{FFF9}89\u{1}",
        "j\u{430}ne.d\u{3BF}e@\u{435}\u{445}ample.com, jan\u{435} Ещё \u{430}\u{445}1b \u{430}\u{445}_1.",
        "\u{430}\u{445}\u{445}\u{430}\u{445}\u{301}\u{200D}\u{445}a \u{3BF}\u{445} x\u{430} \u{430}x",
        "4111 \u{301}1111 1111 1111 — हिन्दी ①x\u{430}⑵",
    ];

    #[test]
    fn every_cut_gives_the_view_of_the_whole() {
        for t in CUT_TEXTS {
            let (whole, whole_map, _) = built(t);
            let cuts: Vec<usize> = (0..=t.len()).filter(|&i| t.is_char_boundary(i)).collect();
            for &c in &cuts {
                let (mut v, mut map, mut n) =
                    (String::new(), ViewMap::default(), Normalizer::default());
                n.push(&t[..c], &mut v, &mut map);
                assert!(whole.starts_with(&v), "{t:?} cut at {c}");
                assert_eq!(n.view_len(), v.len());
                assert!(n.complete() <= c);
                n.push(&t[c..], &mut v, &mut map);
                n.finish(&mut v, &mut map);
                assert_eq!(v, whole, "{t:?} cut at {c}");
                assert_eq!(map.runs, whole_map.runs, "{t:?} cut at {c}");
            }
        }
    }

    #[test]
    fn one_code_point_at_a_time_gives_the_view_of_the_whole() {
        for t in CUT_TEXTS {
            let whole = built(t).0;
            let (mut v, mut map, mut n) =
                (String::new(), ViewMap::default(), Normalizer::default());
            let mut at = 0;
            for c in t.chars() {
                n.push(c.encode_utf8(&mut [0u8; 4]), &mut v, &mut map);
                at += c.len_utf8();
                assert!(whole.starts_with(&v), "{t:?} at {at}");
                assert!(n.complete() <= at);
            }
            n.finish(&mut v, &mut map);
            assert_eq!(v, whole, "{t:?}");
        }
    }

    #[test]
    fn only_a_word_that_may_still_mix_is_held() {
        let (mut v, mut map, mut n) = (String::new(), ViewMap::default(), Normalizer::default());
        // Latin so far: written (a later look-alike changes only itself).
        n.push("jane", &mut v, &mut map);
        assert_eq!(n.complete(), 3, "only the open segment");
        // A Cyrillic word: held from its first look-alike, whole, until a
        // letter of another script or its end decides it.
        n.push(" Ещё \u{430}\u{445}", &mut v, &mut map);
        assert_eq!(v, "jane Ещё ");
        assert_eq!(n.complete(), "jane Ещё ".len());
        n.push("12", &mut v, &mut map);
        assert_eq!(n.complete(), "jane Ещё ".len(), "digits leave it open");
        n.push("b ", &mut v, &mut map);
        assert_eq!(v, "jane Ещё ax12b");
        n.finish(&mut v, &mut map);
        assert_eq!(v, "jane Ещё ax12b ");
    }

    #[test]
    fn long_runs_of_marks_end_segments() {
        // Every mark after the digit goes, across the segment cap too.
        let t = format!("1{}", "\u{301}".repeat(100));
        assert_eq!(view(&t), "1");
        let t = format!("x{}", "\u{200D}".repeat(100));
        assert_eq!(view(&t), "x");
        let map = View::of(&t).map(|v| v.map).unwrap_or_default();
        // The value's segment ends at the cap; later joiners are outside it.
        assert_eq!(map.span(0, 1), (0, 1 + 3 * (MAX_SEGMENT_CHARS - 1)));
    }

    #[test]
    fn the_tables_agree_with_the_slow_tests() {
        let t = tables();
        let check = |cp: u32| {
            let Some(c) = char::from_u32(cp) else {
                return;
            };
            if cp >= 0x80 {
                assert_eq!(t.inert(c), is_inert_slow(c), "inert U+{cp:04X}");
                assert_eq!(
                    t.lookalike(c),
                    is_lookalike_slow(c),
                    "look-alike U+{cp:04X}"
                );
                assert_eq!(
                    t.kept_lookalike(c),
                    keeps(c) && is_lookalike_slow(c),
                    "kept U+{cp:04X}"
                );
                assert_eq!(t.step(c), step_slow(c), "step U+{cp:04X}");
                assert_eq!(t.stable(c), nfkc_stable(c), "stable U+{cp:04X}");
            }
            assert_eq!(t.word(c), is_word_slow(c), "word U+{cp:04X}");
            let k = t.class(c);
            assert_eq!(
                t.scripts(k, c),
                AugmentedScriptSet::for_char(c),
                "U+{cp:04X}"
            );
            if k != COMPLEX {
                assert_eq!(
                    t.any.get(usize::from(k)).copied().unwrap_or(false),
                    t.scripts(k, c).is_all(),
                    "any U+{cp:04X}"
                );
            }
        };
        // Every code point of the BMP (the table), and a sample past it.
        for cp in (0u32..0x1_0000).chain((0x1_0000..0x3_0000).step_by(13)) {
            check(cp);
        }
        assert!(t.inert('会') && t.inert('é') && t.inert('Ж') && t.inert('😀'));
        assert!(!t.inert('１') && !t.inert('\u{200D}') && !t.inert('٣'));
        assert!(!t.inert('\u{301}') && !t.inert('\u{FB01}') && !t.inert('𝟏'));
        assert!(!t.inert('\u{2014}') && !t.inert('⑴') && !t.inert('\u{FFF9}'));
        assert!(!t.inert('\u{430}') && t.kept_lookalike('\u{430}') && t.lookalike('\u{3BF}'));
        assert!(!t.lookalike('m') && !t.lookalike('é') && !t.lookalike('会'));
        assert_eq!(t.step('\u{2014}'), STEP_DASH);
        assert_eq!(t.step('\u{2212}'), STEP_DASH);
        assert_eq!(t.step('٣'), STEP_DECIMAL | 3);
        assert_eq!(t.step('⑴'), STEP_NUMERIC | 1);
        assert_eq!(t.step('❾'), STEP_NUMERIC | 9);
        assert_eq!(t.step('\u{301}'), STEP_REMOVE);
        assert_eq!(t.step('\u{20DD}'), STEP_REMOVE);
        assert_eq!(t.step('\u{FFF9}'), STEP_REMOVE);
        assert_eq!(t.step('\u{85}'), STEP_REMOVE);
        assert_eq!(t.step('\u{93F}'), STEP_MARK);
        assert_eq!(t.step('é'), STEP_KEEP);
    }

    #[test]
    fn word_scripts_agree_with_the_exact_intersection() {
        let t = tables();
        let alphabet = [
            'a',
            'Z',
            'é',
            'ᴛ',
            'ж',
            '\u{430}',
            '\u{3BF}',
            '会',
            'は',
            'カ',
            '한',
            '1',
            '_',
            '\u{640}',
            'ب',
            '\u{10400}',
            '\u{301}',
            '\u{1D7CE}',
            'ㄅ',
        ];
        let mut words = vec![String::new()];
        for _ in 0..3 {
            let longer: Vec<String> = words
                .iter()
                .flat_map(|w| alphabet.iter().map(move |c| format!("{w}{c}")))
                .collect();
            words.extend(longer);
        }
        for w in &words {
            let mut fast = WordScripts::default();
            let mut mixed = false;
            for c in w.chars() {
                mixed = if c.is_ascii_alphabetic() {
                    fast.add_latin()
                } else if c.is_ascii() {
                    mixed
                } else {
                    fast.add(t.class(c), c, t)
                };
            }
            let exact = AugmentedScriptSet::for_str(w).is_empty();
            assert_eq!(mixed, exact, "{w:?}");
        }
    }

    #[test]
    fn decimal_digits_of_every_script_map_to_their_value() {
        for zero in [
            0x660u32, 0x6F0, 0x966, 0x9E6, 0xE50, 0xFF10, 0x1D7CE, 0x1D7D8, 0x1E950,
        ] {
            for d in 0..10u32 {
                let c = char::from_u32(zero + d).unwrap_or('?');
                let v = view(&c.to_string());
                assert_eq!(v, d.to_string(), "U+{:04X}", zero + d);
            }
        }
        assert_eq!(ascii_digit('٣'), Some('3'));
        assert_eq!(ascii_digit('a'), None);
        assert_eq!(
            ascii_digit('²'),
            None,
            "superscripts are No: Numeric_Type Digit maps them"
        );
    }

    #[test]
    fn plain_ascii_is_told_apart_from_controls() {
        let mut s = "x".repeat(200);
        assert!(all_plain(s.as_bytes()));
        for b in [0u8, 1, 0x0B, 0x0C, 0x1B, 0x7F, 0x80, 0xFF] {
            s.replace_range(150..151, "");
            let mut bytes = s.clone().into_bytes();
            bytes.insert(150, b);
            assert!(!all_plain(&bytes), "{b:#x}");
        }
        assert!(all_plain(b"\t\n\r ~"));
        // Every byte at every place of a word, and after a run of controls.
        for b in 0..=255u8 {
            for at in 0..20 {
                let mut bytes = vec![b'x'; 20];
                bytes[at] = b;
                let want = if plain_byte(b) { 20 } else { at };
                assert_eq!(plain_prefix(&bytes), want, "{b:#x} at {at}");
                bytes[..at].fill(0x1F);
                let want = if at > 0 { 0 } else { want };
                assert_eq!(plain_prefix(&bytes), want, "{b:#x} after controls");
            }
        }
    }
}
