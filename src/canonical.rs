//! Canonical JSON ([§1](docs/formats.md#s1)): byte-for-byte what Python's
//! `json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=…)`
//! writes. Pure functions over `serde_json::Value`; no I/O.

use serde_json::{Number, Value};
use std::fmt::Write as _;

/// How non-ASCII characters are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escaping {
    /// Raw UTF-8 (`ensure_ascii=False`): packs, signatures, digests.
    Utf8,
    /// `\uXXXX` escapes with surrogate pairs (`ensure_ascii=True`): receipts.
    Ascii,
}

/// Error for values canonical JSON cannot represent (NaN, infinity).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("a number that is not finite cannot be written as JSON")]
pub struct NotFinite;

/// The canonical JSON of `value`, non-ASCII written as raw UTF-8.
pub fn to_string(value: &Value) -> Result<String, NotFinite> {
    let mut out = String::new();
    write_value(&mut out, value, Escaping::Utf8)?;
    Ok(out)
}

/// Appends the canonical JSON of `value` to `out` with the chosen escaping.
pub fn write_value(out: &mut String, value: &Value, esc: Escaping) -> Result<(), NotFinite> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(out, n)?,
        Value::String(s) => write_str(out, s, esc),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item, esc)?;
            }
            out.push(']');
        }
        Value::Object(map) => write_object(out, map, esc)?,
    }
    Ok(())
}

/// Appends the canonical JSON of an object (keys sorted by code point).
pub fn write_object(
    out: &mut String,
    map: &serde_json::Map<String, Value>,
    esc: Escaping,
) -> Result<(), NotFinite> {
    // Sorted explicitly: the map's own order depends on serde_json features.
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out.push('{');
    for (i, (k, v)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_str(out, k, esc);
        out.push(':');
        write_value(out, v, esc)?;
    }
    out.push('}');
    Ok(())
}

fn write_number(out: &mut String, n: &Number) -> Result<(), NotFinite> {
    if let Some(u) = n.as_u64() {
        let _ = write!(out, "{u}");
    } else if let Some(i) = n.as_i64() {
        let _ = write!(out, "{i}");
    } else {
        let f = n.as_f64().ok_or(NotFinite)?;
        out.push_str(&python_float_repr(f).ok_or(NotFinite)?);
    }
    Ok(())
}

/// Appends `s` as a JSON string literal, escaping as Python's encoder does.
pub fn write_str(out: &mut String, s: &str, esc: Escaping) {
    let plain =
        |b: &u8| *b >= b' ' && *b != b'"' && *b != b'\\' && (esc == Escaping::Utf8 || *b <= b'~');
    if s.as_bytes().iter().all(plain) {
        out.push('"');
        out.push_str(s);
        out.push('"');
        return;
    }
    out.push('"');
    let mut run_start = 0;
    for (i, c) in s.char_indices() {
        let escape: Option<&str> = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '\n' => Some("\\n"),
            '\r' => Some("\\r"),
            '\t' => Some("\\t"),
            '\u{08}' => Some("\\b"),
            '\u{0c}' => Some("\\f"),
            _ => None,
        };
        // Python's ASCII mode escapes everything outside ' '..='~', DEL included.
        let needs_hex = c < ' ' || (esc == Escaping::Ascii && c > '~');
        if escape.is_none() && !needs_hex {
            continue;
        }
        out.push_str(&s[run_start..i]);
        run_start = i + c.len_utf8();
        if let Some(e) = escape {
            out.push_str(e);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        }
    }
    out.push_str(&s[run_start..]);
    out.push('"');
}

/// A float as Python's `repr` writes it (`1.0`, `0.85`, `1e-07`, `1e+16`);
/// `None` for NaN and infinities, which JSON cannot hold.
pub fn python_float_repr(f: f64) -> Option<String> {
    if !f.is_finite() {
        return None;
    }
    // `{:e}` gives the shortest round-trip digits, like Python's repr.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e')?;
    let exp: i32 = exp.parse().ok()?;
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let mut out = String::from(sign);
    if (-4..16).contains(&exp) {
        if exp < 0 {
            out.push_str("0.");
            for _ in 0..(-exp - 1) {
                out.push('0');
            }
            out.push_str(&digits);
        } else {
            let int_len = (exp + 1) as usize;
            if digits.len() <= int_len {
                out.push_str(&digits);
                for _ in digits.len()..int_len {
                    out.push('0');
                }
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_match_python_repr() {
        let cases = [
            (1.0, "1.0"),
            (0.85, "0.85"),
            (1e-7, "1e-07"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (123.456, "123.456"),
            (-2.5, "-2.5"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.5e300, "1.5e+300"),
            (12345678901234567.0, "1.2345678901234568e+16"),
        ];
        for (f, want) in cases {
            assert_eq!(python_float_repr(f).as_deref(), Some(want), "{f}");
        }
        assert_eq!(python_float_repr(f64::NAN), None);
    }

    #[test]
    fn objects_sorted_compact_raw_utf8() {
        let v = json!({"b": [1, 2.0, null], "a": "é\u{7f}\u{1f}\n\"", "é": true, "Z": {}});
        assert_eq!(
            to_string(&v).unwrap(),
            "{\"Z\":{},\"a\":\"é\u{7f}\\u001f\\n\\\"\",\"b\":[1,2.0,null],\"é\":true}"
        );
    }

    #[test]
    fn ascii_escaping_uses_surrogate_pairs() {
        let mut out = String::new();
        write_str(&mut out, "é😀\u{7f}", Escaping::Ascii);
        assert_eq!(out, "\"\\u00e9\\ud83d\\ude00\\u007f\"");
    }
}
