//! A small word diff of an expected and an actual text, on one line for a
//! report: `"See [-[REDACTED_TICKET_ID]-]{+TCK-004211+} for the fix."`, with
//! long unchanged runs shortened. Pure text handling.

/// Characters of unchanged text kept on each side of a change.
const CONTEXT: usize = 24;

/// Above this many token pairs the diff is one change between the common
/// prefix and suffix (the exact alignment would cost too much).
const MAX_CELLS: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Same(String),
    Changed { removed: String, added: String },
}

/// Runs of whitespace and runs of anything else, in order.
fn tokens(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut prev: Option<bool> = None;
    for (i, c) in s.char_indices() {
        let ws = c.is_whitespace();
        if prev.is_some_and(|p| p != ws) {
            out.push(&s[start..i]);
            start = i;
        }
        prev = Some(ws);
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

fn push_same(out: &mut Vec<Piece>, t: &str) {
    match out.last_mut() {
        Some(Piece::Same(s)) => s.push_str(t),
        _ => out.push(Piece::Same(t.to_string())),
    }
}

fn push_change(out: &mut Vec<Piece>, removed: &str, added: &str) {
    match out.last_mut() {
        Some(Piece::Changed {
            removed: r,
            added: a,
        }) => {
            r.push_str(removed);
            a.push_str(added);
        }
        _ => out.push(Piece::Changed {
            removed: removed.to_string(),
            added: added.to_string(),
        }),
    }
}

/// The pieces of the diff: a longest common subsequence of tokens after the
/// common prefix and suffix are taken off.
fn pieces(expected: &str, got: &str) -> Vec<Piece> {
    let a = tokens(expected);
    let b = tokens(got);
    let pre = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let suf = a[pre..]
        .iter()
        .rev()
        .zip(b[pre..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[pre..a.len() - suf], &b[pre..b.len() - suf]);
    let mut out = Vec::new();
    for t in &a[..pre] {
        push_same(&mut out, t);
    }
    if ma.len().saturating_mul(mb.len()) > MAX_CELLS {
        push_change(&mut out, &ma.concat(), &mb.concat());
    } else {
        // lcs[i][j]: length of the LCS of ma[i..] and mb[j..].
        let w = mb.len() + 1;
        let mut lcs = vec![0u32; (ma.len() + 1) * w];
        for i in (0..ma.len()).rev() {
            for j in (0..mb.len()).rev() {
                lcs[i * w + j] = if ma[i] == mb[j] {
                    lcs[(i + 1) * w + j + 1] + 1
                } else {
                    lcs[(i + 1) * w + j].max(lcs[i * w + j + 1])
                };
            }
        }
        let (mut i, mut j) = (0, 0);
        while i < ma.len() || j < mb.len() {
            if i < ma.len() && j < mb.len() && ma[i] == mb[j] {
                push_same(&mut out, ma[i]);
                i += 1;
                j += 1;
            } else if j == mb.len() || (i < ma.len() && lcs[(i + 1) * w + j] >= lcs[i * w + j + 1])
            {
                push_change(&mut out, ma[i], "");
                i += 1;
            } else {
                push_change(&mut out, "", mb[j]);
                j += 1;
            }
        }
    }
    for t in &a[a.len() - suf..] {
        push_same(&mut out, t);
    }
    out
}

/// Escapes a text for a one-line report: backslash, quote and control
/// characters become escapes; everything else is kept.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

fn head(s: &str, n: usize) -> &str {
    s.char_indices().nth(n).map_or(s, |(i, _)| &s[..i])
}

fn tail(s: &str, n: usize) -> &str {
    let count = s.chars().count();
    if count <= n {
        return s;
    }
    s.char_indices().nth(count - n).map_or(s, |(i, _)| &s[i..])
}

/// The one-line diff of `expected` and `got`, quoted: removed text as
/// `[-…-]`, added text as `{+…+}`, unchanged runs beyond [`CONTEXT`]
/// characters of a change shortened to `…`.
pub fn inline(expected: &str, got: &str) -> String {
    let pieces = pieces(expected, got);
    let last = pieces.len().saturating_sub(1);
    let mut out = String::from("\"");
    for (k, p) in pieces.iter().enumerate() {
        match p {
            Piece::Same(s) => {
                let n = s.chars().count();
                let (first, end) = (k == 0, k == last);
                if first && end {
                    out.push_str(&escape(s));
                } else if first && n > CONTEXT {
                    out.push('…');
                    out.push_str(&escape(tail(s, CONTEXT)));
                } else if end && n > CONTEXT {
                    out.push_str(&escape(head(s, CONTEXT)));
                    out.push('…');
                } else if !first && !end && n > 2 * CONTEXT {
                    out.push_str(&escape(head(s, CONTEXT)));
                    out.push('…');
                    out.push_str(&escape(tail(s, CONTEXT)));
                } else {
                    out.push_str(&escape(s));
                }
            }
            Piece::Changed { removed, added } => {
                if !removed.is_empty() {
                    out.push_str("[-");
                    out.push_str(&escape(removed));
                    out.push_str("-]");
                }
                if !added.is_empty() {
                    out.push_str("{+");
                    out.push_str(&escape(added));
                    out.push_str("+}");
                }
            }
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_word_changed() {
        assert_eq!(
            inline(
                "See [REDACTED_TICKET_ID] for the fix.",
                "See TCK-004211 for the fix."
            ),
            "\"See [-[REDACTED_TICKET_ID]-]{+TCK-004211+} for the fix.\""
        );
    }

    #[test]
    fn several_changes_keep_the_words_between() {
        assert_eq!(
            inline("a X b Y c", "a x b y c"),
            "\"a [-X-]{+x+} b [-Y-]{+y+} c\""
        );
        assert_eq!(inline("a b", "a b c"), "\"a b{+ c+}\"");
        assert_eq!(inline("a b c", "a c"), "\"a [-b -]c\"");
        assert_eq!(inline("", "x"), "\"{+x+}\"");
    }

    #[test]
    fn long_unchanged_text_is_shortened_and_escapes_are_one_line() {
        let pre = "p".repeat(100);
        let post = "q".repeat(100);
        let got = inline(&format!("{pre} A {post}"), &format!("{pre} B {post}"));
        assert_eq!(
            got,
            format!(
                "\"…{} [-A-]{{+B+}} {}…\"",
                "p".repeat(CONTEXT - 1),
                "q".repeat(CONTEXT - 1)
            )
        );
        assert_eq!(inline("a\n\"b\"", "a\n'b'"), "\"a\\n[-\\\"b\\\"-]{+'b'+}\"");
    }

    #[test]
    fn huge_texts_fall_back_to_one_change() {
        let a: String = (0..3000).map(|i| format!("w{i} ")).collect();
        let b: String = (0..3000).map(|i| format!("v{i} ")).collect();
        let d = inline(&a, &b);
        assert!(d.starts_with("\"[-w0 "), "{}", &d[..40]);
        assert!(d.contains("-]{+v0 "));
    }
}
