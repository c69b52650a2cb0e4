//! The evasion view of SPEC §15: the text rules run on when a request asks
//! for `normalize: evasion`, and the map that takes a match in it back to
//! the original code points. A pure text transformation: it knows nothing of
//! rules, and never logs or keeps a payload beyond the call or the session
//! that owns it.
//!
//! # The view
//!
//! The text is cut into *segments*: a base character and everything that
//! attaches to it (combining marks, canonical non-starters, default-ignorable
//! code points, a character the previous one composes with), at most
//! [`MAX_SEGMENT_CHARS`] code points. Each segment is normalized on its own:
//! NFKC, then every decimal digit (General Category Nd) to its ASCII digit,
//! default-ignorable code points removed, combining marks after an ASCII
//! digit removed. A segment boundary depends only on the character before it
//! and the one after, so the view of a prefix made of whole segments is a
//! prefix of the view of every continuation: a stream session can normalize
//! as the text arrives (holding back only the open segment) and sees the same
//! view as an evaluation of the whole text.
//!
//! Per-segment NFKC equals NFKC of the whole text except where the standard
//! would compose across a boundary this cut does not see (a segment of more
//! than 32 code points; conjoining jamo written as three code points are
//! handled). Texts that are already NFKC, whatever their script, normalize to
//! themselves segment by segment.
//!
//! # The map
//!
//! The view is a list of runs: an *identity* run (segments that normalized to
//! themselves) maps each byte to the same byte shifted by a constant; a
//! *block* run is one segment that changed, and any offset inside it maps to
//! the whole segment. A match `[s, e)` of the view covers the original text
//! from the start of the segment of `s` to the end of the segment of the
//! character before `e`, so a redaction takes the joiners, soft hyphens and
//! marks inside and just after the value with it.

use unicode_normalization::char::{canonical_combining_class, compose, is_combining_mark};
use unicode_normalization::{is_nfkc_quick, IsNormalized, UnicodeNormalization};
use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

/// How a text is matched (SPEC §15): as written, or through the evasion view.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Normalize {
    /// The reference semantics (§6): rules see the text as written.
    #[default]
    None,
    /// Rules see the §15 view; spans and redactions cover the original text.
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

/// Whether `c` attaches to the segment that ends with `last` (and so does
/// not begin a segment of its own).
fn attaches(last: char, c: char) -> bool {
    if c.is_ascii() {
        return false;
    }
    is_combining_mark(c)
        || is_default_ignorable(c)
        || canonical_combining_class(c) != 0
        || compose(last, c).is_some()
        // A trailing jamo composes with the syllable a vowel jamo made.
        || (matches!(u32::from(last), 0x1161..=0x1175) && matches!(u32::from(c), 0x11A8..=0x11C2))
}

/// Whether `c` is *inert*: the view keeps it as it is whatever surrounds it
/// (a starter that NFKC leaves alone, neither a mark, nor default-ignorable,
/// nor a decimal digit). A text of ASCII and inert characters is its own
/// view.
fn is_inert_slow(c: char) -> bool {
    canonical_combining_class(c) == 0
        && !is_combining_mark(c)
        && !is_default_ignorable(c)
        && !is_decimal(c)
        && is_nfkc_quick(std::iter::once(c)) == IsNormalized::Yes
}

/// Blocks of the BMP whose every code point is inert (Lo or Co letters with
/// no decomposition): CJK Unified Ideographs, Hangul syllables, private use.
/// The table takes them whole instead of asking the slow test 38,000 times
/// (a test checks them one by one).
const INERT_BLOCKS: [(u32, u32); 3] = [(0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xE000, 0xF8FF)];

/// [`is_inert_slow`] for every code point of the Basic Multilingual Plane,
/// one bit each (8 KiB, built once, at the first non-ASCII text the view is
/// asked about, or by [`warm`]): the normalization crate's quick check costs
/// about 150 instructions a character, a bit test a few.
fn inert_bmp() -> &'static [u64] {
    static BITS: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();
    BITS.get_or_init(|| {
        let mut bits = vec![0u64; 1024];
        let mut cp = 0x80u32;
        while cp < 0x1_0000 {
            if let Some(&(_, last)) = INERT_BLOCKS.iter().find(|(first, _)| *first == cp) {
                for c in cp..=last {
                    bits[(c / 64) as usize] |= 1 << (c % 64);
                }
                cp = last + 1;
                continue;
            }
            if char::from_u32(cp).is_some_and(is_inert_slow) {
                bits[(cp / 64) as usize] |= 1 << (cp % 64);
            }
            cp += 1;
        }
        bits
    })
}

/// Builds the view's character table now (about 4 ms once per process),
/// so that no request pays for it: a server whose `engine.normalize` is
/// `evasion` calls it at start-up.
pub fn warm() {
    inert_bmp();
}

fn is_inert(c: char, bmp: &[u64]) -> bool {
    let cp = u32::from(c);
    match bmp.get((cp / 64) as usize) {
        Some(word) => word & (1 << (cp % 64)) != 0,
        None => is_inert_slow(c),
    }
}

/// Whether normalizing `text` could change it: a cheap test first, so that a
/// text with nothing to normalize never builds a view. `false` is exact (the
/// text is its own view); `true` means a view must be built to know.
pub(crate) fn may_change(text: &str) -> bool {
    if text.is_ascii() {
        return false;
    }
    let bmp = inert_bmp();
    !text.chars().all(|c| c.is_ascii() || is_inert(c, bmp))
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

/// Builds the view of a text that arrives in pieces: the view of every whole
/// segment pushed so far, the last (open) segment held until the character
/// after it shows that it is complete.
#[derive(Debug, Default)]
pub(crate) struct Normalizer {
    /// The open segment and its original offset.
    open: String,
    open_at: usize,
    open_chars: usize,
    last: Option<char>,
    /// Whether the last character written to the view is an ASCII digit.
    after_digit: bool,
    /// View bytes written so far.
    view_len: usize,
    /// Whether some segment's view differed from it.
    changed: bool,
    scratch: String,
}

impl Normalizer {
    /// Original bytes in whole segments (whose view has been written).
    pub(crate) fn complete(&self) -> usize {
        self.open_at
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
        let bytes = piece.as_bytes();
        let mut i = 0;
        while i < piece.len() {
            if bytes[i].is_ascii() {
                // An ASCII character begins a segment, so an ASCII run up to
                // its last character is whole segments of themselves.
                let run = bytes[i..].iter().take_while(|b| b.is_ascii()).count();
                self.close(view, map);
                if run > 1 {
                    let body = &piece[i..i + run - 1];
                    map.push_identity(self.view_len, base + i);
                    view.push_str(body);
                    self.view_len += body.len();
                    self.after_digit = body.as_bytes()[body.len() - 1].is_ascii_digit();
                }
                let lastc = char::from(bytes[i + run - 1]);
                self.open_at = base + i + run - 1;
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
                && self.last.is_some_and(|l| attaches(l, c));
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

    /// Ends the text: the open segment is complete.
    pub(crate) fn finish(&mut self, view: &mut String, map: &mut ViewMap) {
        self.close(view, map);
    }

    /// Writes the open segment's view and run, and empties it.
    fn close(&mut self, view: &mut String, map: &mut ViewMap) {
        if self.open.is_empty() {
            return;
        }
        let at = self.open_at;
        let seg_len = self.open.len();
        let start = view.len();
        self.scratch.clear();
        if self.open.is_ascii() || is_nfkc_quick(self.open.chars()) == IsNormalized::Yes {
            self.scratch.push_str(&self.open);
        } else {
            self.scratch.extend(self.open.nfkc());
        }
        for d in self.scratch.chars() {
            if is_default_ignorable(d) || (self.after_digit && is_combining_mark(d)) {
                continue;
            }
            let d = ascii_digit(d).unwrap_or(d);
            view.push(d);
            self.after_digit = d.is_ascii_digit();
        }
        let written = view.len() - start;
        if view[start..] == self.open[..] {
            map.push_identity(self.view_len, at);
        } else {
            self.changed = true;
            if written > 0 {
                map.runs.push(Run {
                    view: self.view_len,
                    orig: at,
                    end: Some(at + seg_len),
                });
            }
        }
        self.view_len += written;
        self.open_at = at + seg_len;
        self.open.clear();
        self.open_chars = 0;
    }
}

/// The evasion view of a whole text and its map.
#[derive(Debug)]
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
/// the last one when they overlap: the §6.3 rule, applied again once regions
/// of the view have been mapped to the original text (two view regions can
/// meet inside one segment).
pub(crate) fn push_region<P>(regions: &mut Vec<(usize, usize, P)>, s: usize, e: usize, p: P) {
    match regions.last_mut() {
        Some(last) if s < last.1 => last.1 = last.1.max(e),
        _ => regions.push((s, e, p)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(text: &str) -> String {
        View::of(text).map_or_else(|| text.to_string(), |v| v.text)
    }

    fn spans(text: &str, s: usize, e: usize) -> String {
        let v = View::of(text).map(|v| v.map).unwrap_or_default();
        let (a, b) = v.span(s, e);
        text[a..b].to_string()
    }

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
        // A mark after a letter stays (only marks after a digit go).
        assert_eq!(view("a\u{308}"), "ä");
        assert_eq!(view("5\u{308}x"), "5x");
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

    #[test]
    fn every_cut_gives_the_view_of_the_whole() {
        let texts = [
            "SSN １２３-４５-６７８９ and ١٢٣-٤٥-٦٧٨٩, 123-45\u{200D}-67\u{AD}89\u{301}!",
            "e\u{301}\u{302}a\u{FB01}\u{1100}\u{1161}\u{11A8} ＭＲＮ＠ x",
            "\u{200B}\u{200B}lead",
        ];
        for t in texts {
            let whole = View::of(t).map(|v| v.text).unwrap_or_else(|| t.to_string());
            let cuts: Vec<usize> = (0..=t.len()).filter(|&i| t.is_char_boundary(i)).collect();
            for &c in &cuts {
                let (mut v, mut map, mut n) =
                    (String::new(), ViewMap::default(), Normalizer::default());
                n.push(&t[..c], &mut v, &mut map);
                assert!(whole.starts_with(&v), "{t:?} cut at {c}");
                assert_eq!(n.view_len(), v.len());
                n.push(&t[c..], &mut v, &mut map);
                n.finish(&mut v, &mut map);
                assert_eq!(v, whole, "{t:?} cut at {c}");
            }
        }
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
    fn the_inert_table_agrees_with_the_slow_test() {
        let bmp = inert_bmp();
        for cp in (0x80u32..0x1_0000)
            .step_by(7)
            .chain([0xFF11, 0x200D, 0xAD, 0x301, 0x661, 0x4E00, 0xE9])
        {
            if let Some(c) = char::from_u32(cp) {
                assert_eq!(is_inert(c, bmp), is_inert_slow(c), "U+{cp:04X}");
            }
        }
        assert!(is_inert('会', bmp) && is_inert('é', bmp) && is_inert('Ж', bmp));
        assert!(!is_inert('１', bmp) && !is_inert('\u{200D}', bmp) && !is_inert('٣', bmp));
        assert!(!is_inert('\u{301}', bmp) && !is_inert('\u{FB01}', bmp));
        assert!(is_inert('😀', bmp) && !is_inert('𝟏', bmp));
        for &(first, last) in &INERT_BLOCKS {
            for cp in first..=last {
                let c = char::from_u32(cp).unwrap_or('\0');
                assert!(
                    is_inert_slow(c),
                    "U+{cp:04X} is in an inert block but is not inert"
                );
            }
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
            "superscripts are No, NFKC maps them"
        );
    }
}
