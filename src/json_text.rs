//! Every string value of a body, found once ([§12.4](docs/gateways.md#s12-4)): the one walker
//! that the gateway routes (ext_authz, ext_proc, LiteLLM) judge bodies
//! with, and that rewrites a body in place. It reads and writes bytes only:
//! it never evaluates, logs or keeps a payload.
//!
//! # How a body is read
//!
//! A body must be UTF-8 (else [`BodyError::NotUtf8`]). A body whose first
//! significant character is `{`, `[` or `"` is JSON: it must parse as
//! strict JSON, with no object holding a key twice, or it is refused
//! ([`BodyError::Malformed`], [`BodyError::DuplicateKey`]). Refusing is the
//! only safe answer: an upstream parser that reads such a body anyway
//! (Python's `json` takes `NaN` and unpaired `\ud800` escapes, and keeps
//! the last of two keys) would see strings that were never judged. Any other
//! body is one text ([`Body::Text`]).
//!
//! In a JSON body every string *value* is found, in document order, with
//! the byte span of its literal and its unescaped text (`\u002d` is `-`);
//! keys are not values ([§12.4](docs/gateways.md#s12-4): keys are not judged), numbers, `true`,
//! `false` and `null` are not text. Validation is serde_json's
//! (no tree is built: only each object's keys are kept, to find a key
//! twice); a second pass over the bytes, known valid by then, finds the
//! literals. Both passes are linear, and the count of strings is capped
//! before anything is judged ([`BodyError::TooManyStrings`]).
//!
//! # Rewriting
//!
//! [`rewrite`] replaces the literals of some strings and copies every other
//! byte as it was: key order, numbers (`1e400`, 20-digit integers),
//! whitespace and the escapes of untouched strings stay exactly what the
//! client sent, so the upstream reads the same document with only the
//! redacted strings changed.

use crate::redacted::Redacted;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;
use std::ops::Range;

/// Why a body cannot be judged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// The bytes are not UTF-8 (binary, or compressed without a header).
    #[error("the body is not UTF-8 text (invalid byte at offset {valid_up_to})")]
    NotUtf8 {
        /// Bytes before the first invalid one.
        valid_up_to: usize,
    },
    /// An object has the same key twice: the upstream's parser might read
    /// the other value than the one judged.
    #[error("the JSON body has an object with the same key twice")]
    DuplicateKey,
    /// It starts like JSON but is not strict JSON.
    #[error("the body starts like JSON but is not valid JSON ({what} at line {line}, column {column}): an upstream parser might read strings this one cannot see")]
    Malformed {
        /// What is wrong, in serde_json's category words.
        what: &'static str,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
    },
    /// More strings than `limits.max_texts`.
    #[error("the body holds more than {limit} strings (limits.max_texts)")]
    TooManyStrings {
        /// The limit.
        limit: usize,
    },
}

/// One string value of a JSON body. Its `Debug` shows where it is and its
/// size, never the payload's text or keys.
#[derive(Clone, PartialEq, Eq)]
pub struct StrValue<'a> {
    /// The literal's bytes in the body, quotes included.
    pub span: Range<usize>,
    /// The unescaped text (borrowed from the body when it has no escape).
    pub text: Cow<'a, str>,
    /// Containers around it: 0 for a body that is one string, 1 for an
    /// element of the top-level array or a field of the top-level object.
    pub depth: usize,
    /// The top-level object's key this value sits under (`None` when the
    /// body is not an object).
    pub root_key: Option<Cow<'a, str>>,
}

impl std::fmt::Debug for StrValue<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StrValue")
            .field("span", &self.span)
            .field("text", &Redacted::of(self.text.as_bytes()))
            .field("depth", &self.depth)
            .field(
                "root_key",
                &self.root_key.as_ref().map(|k| Redacted::of(k.as_bytes())),
            )
            .finish()
    }
}

/// A body, read. Its `Debug` never shows the payload.
#[derive(Clone, PartialEq, Eq)]
pub enum Body<'a> {
    /// A JSON body's string values, in document order.
    Json(Vec<StrValue<'a>>),
    /// A body that is not JSON: one text.
    Text(&'a str),
}

impl std::fmt::Debug for Body<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Json(values) => f.debug_tuple("Json").field(values).finish(),
            Self::Text(t) => f.debug_tuple("Text").field(&Redacted::of(t)).finish(),
        }
    }
}

/// Reads `bytes` as [§12.4](docs/gateways.md#s12-4) says (see the module doc); at most
/// `max_strings` string values (a text body counts as one).
pub fn read(bytes: &[u8], max_strings: usize) -> Result<Body<'_>, BodyError> {
    read_where(bytes, max_strings, |_| true)
}

/// [`read`], keeping (and counting) only the string values that `keep`
/// takes by their top-level key (`None` when the body is not an object).
pub fn read_where(
    bytes: &[u8],
    max_strings: usize,
    keep: impl Fn(Option<&str>) -> bool,
) -> Result<Body<'_>, BodyError> {
    let text = std::str::from_utf8(bytes).map_err(|e| BodyError::NotUtf8 {
        valid_up_to: e.valid_up_to(),
    })?;
    if !looks_like_json(text) {
        if max_strings == 0 {
            return Err(BodyError::TooManyStrings { limit: max_strings });
        }
        return Ok(Body::Text(text));
    }
    validate(bytes)?;
    scan(text, max_strings, keep).map(Body::Json)
}

/// Whether the first significant character (after JSON whitespace and a
/// byte order mark) opens a JSON object, array or string.
pub fn looks_like_json(text: &str) -> bool {
    let t = text.trim_start_matches(['\u{feff}', ' ', '\t', '\n', '\r']);
    t.starts_with(['{', '[', '"'])
}

/// Strict JSON, with no key twice in an object; no tree is built.
fn validate(bytes: &[u8]) -> Result<(), BodyError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let checked = Strict.deserialize(&mut de).and_then(|()| de.end());
    match checked {
        Ok(()) => Ok(()),
        Err(e) if e.to_string().starts_with(DUPLICATE) => Err(BodyError::DuplicateKey),
        Err(e) => Err(BodyError::Malformed {
            what: match e.classify() {
                serde_json::error::Category::Eof => "unexpected end",
                serde_json::error::Category::Syntax => "syntax error",
                serde_json::error::Category::Data => "unreadable value",
                serde_json::error::Category::Io => "read error",
            },
            line: e.line(),
            column: e.column(),
        }),
    }
}

/// The custom error text that marks a key twice (never seen by a client).
const DUPLICATE: &str = "helixor: duplicate key";

/// Objects with more keys than this switch from a list to a hash set, so a
/// body of one object with 100,000 keys costs linear time, not quadratic.
const KEYS_IN_A_LIST: usize = 16;

/// Visits any JSON value, refusing an object with a key twice.
struct Strict;

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Strict)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut list: Vec<Cow<'de, str>> = Vec::new();
        let mut set: HashSet<Cow<'de, str>> = HashSet::new();
        while let Some(Key(key)) = map.next_key()? {
            let seen = if set.is_empty() {
                let seen = list.contains(&key);
                list.push(key);
                if list.len() > KEYS_IN_A_LIST {
                    set.extend(list.drain(..));
                }
                seen
            } else {
                !set.insert(key)
            };
            if seen {
                return Err(de::Error::custom(DUPLICATE));
            }
            map.next_value_seed(Strict)?;
        }
        Ok(())
    }
}

/// An object key, borrowed from the body when it has no escape.
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

/// JSON whitespace.
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The end of the string literal opening at `start` (the byte after its
/// closing quote), and whether it holds an escape; `text` is valid JSON.
fn literal_end(b: &[u8], start: usize) -> Option<(usize, bool)> {
    let mut i = start + 1;
    let mut escaped = false;
    loop {
        i += memchr::memchr2(b'"', b'\\', b.get(i..)?)?;
        if b[i] == b'"' {
            return Some((i + 1, escaped));
        }
        escaped = true;
        // A backslash and the character it escapes (`\"` included); the
        // rest of a `\uXXXX` escape holds neither a quote nor a backslash.
        i += 2;
    }
}

/// The string values of `text` (valid strict JSON), in document order.
fn scan(
    text: &str,
    max: usize,
    keep: impl Fn(Option<&str>) -> bool,
) -> Result<Vec<StrValue<'_>>, BodyError> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut root_is_object = false;
    let mut root_key: Option<Cow<'_, str>> = None;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'{' => {
                root_is_object |= depth == 0;
                depth += 1;
            }
            b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' => {
                let unreadable = BodyError::Malformed {
                    what: "unreadable string",
                    line: 0,
                    column: 0,
                };
                let (end, escaped) = literal_end(b, i).ok_or(unreadable.clone())?;
                let literal = &text[i..end];
                let decoded = if escaped {
                    Cow::Owned(serde_json::from_str::<String>(literal).map_err(|_| unreadable)?)
                } else {
                    Cow::Borrowed(&literal[1..literal.len() - 1])
                };
                let next = b[end..].iter().position(|&c| !is_ws(c)).map(|p| b[end + p]);
                if next == Some(b':') {
                    // A key: not judged ([§12.4](docs/gateways.md#s12-4)), but it names the
                    // top-level field its value sits under.
                    if depth == 1 && root_is_object {
                        root_key = Some(decoded);
                    }
                } else {
                    let root = if root_is_object && depth >= 1 {
                        root_key.as_ref()
                    } else {
                        None
                    };
                    if keep(root.map(|k| &**k)) {
                        if out.len() >= max {
                            return Err(BodyError::TooManyStrings { limit: max });
                        }
                        out.push(StrValue {
                            span: i..end,
                            text: decoded,
                            depth,
                            root_key: root.cloned(),
                        });
                    }
                }
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    Ok(out)
}

/// `body` with the literals at the given spans replaced by the JSON of the
/// given texts; every other byte is copied as it was. Spans must be those
/// of [`read`], in ascending order.
pub fn rewrite<'t>(
    body: &[u8],
    edits: impl IntoIterator<Item = (Range<usize>, &'t str)>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len());
    let mut at = 0;
    for (span, text) in edits {
        out.extend_from_slice(&body[at..span.start]);
        write_json_string(&mut out, text);
        at = span.end;
    }
    out.extend_from_slice(&body[at..]);
    out
}

/// Appends `s` as a JSON string literal (serde_json's escaping: quotes,
/// backslashes and control characters).
pub fn write_json_string(out: &mut Vec<u8>, s: &str) {
    // Writing a string to a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Every string value inside `v` (keys are not values), depth first, in
/// the map's order: for a JSON value already parsed, such as one event of a
/// stream.
pub fn strings_mut(v: &mut Value) -> Vec<&mut String> {
    let mut out = Vec::new();
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) => out.push(s),
            Value::Array(items) => stack.extend(items.iter_mut().rev()),
            Value::Object(map) => stack.extend(map.values_mut().rev()),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn strings(body: &str) -> Vec<String> {
        match read(body.as_bytes(), usize::MAX) {
            Ok(Body::Json(v)) => v.into_iter().map(|s| s.text.into_owned()).collect(),
            other => panic!("not a JSON body: {other:?}"),
        }
    }

    #[test]
    fn every_string_value_unescaped_in_document_order_and_no_key() {
        let body = r#"{"model":"m","messages":[{"role":"user","content":"123\u002d45\u002d6789"}],
            "n":12345678901234567890123,"tools":[{"function":{"description":"d\"q\\"}}],"ok":true,"x":null,
            "by":{"jane\u0040example.com":1}}"#;
        assert_eq!(strings(body), ["m", "user", "123-45-6789", "d\"q\\"]);
        assert_eq!(strings(r#""top \u0041""#), ["top A"]);
        assert_eq!(strings("[]"), Vec::<String>::new());
    }

    #[test]
    fn spans_depth_and_root_key() {
        let body = r#" {"a": ["x", {"b": "y"}], "c": "z"} "#;
        let Ok(Body::Json(v)) = read(body.as_bytes(), 10) else {
            panic!("not JSON")
        };
        let got: Vec<(&str, usize, Option<&str>)> = v
            .iter()
            .map(|s| (&body[s.span.clone()], s.depth, s.root_key.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                ("\"x\"", 2, Some("a")),
                ("\"y\"", 3, Some("a")),
                ("\"z\"", 1, Some("c"))
            ]
        );
        let Ok(Body::Json(v)) = read(br#"["p", ["q"]]"#, 10) else {
            panic!("not JSON")
        };
        assert_eq!(v[1].depth, 2);
        assert_eq!(v[1].root_key, None);
    }

    #[test]
    fn bodies_that_are_refused() {
        let err = |b: &[u8]| read(b, 100).err();
        assert_eq!(
            err(b"{\"a\":\"\xff\"}"),
            Some(BodyError::NotUtf8 { valid_up_to: 6 })
        );
        assert_eq!(
            err(b"\x1f\x8b\x08\x00"),
            Some(BodyError::NotUtf8 { valid_up_to: 1 })
        );
        assert_eq!(
            err(br#"{"a":1,"b":{"c":1,"c":2}}"#),
            Some(BodyError::DuplicateKey)
        );
        let many: String = (0..40).map(|i| format!("\"k{i}\":1,")).collect();
        assert_eq!(
            err(format!("{{{many}\"k39\":2}}").as_bytes()),
            Some(BodyError::DuplicateKey)
        );
        assert!(read(format!("{{{many}\"k40\":2}}").as_bytes(), 1).is_ok());
        for bad in [
            &br#"{"a": NaN}"#[..],
            br#"{"a": "\ud800"}"#,
            br#"{"a": 1} x"#,
            br#"["a""#,
            br#"  "open"#,
            b"\xef\xbb\xbf{\"a\":1}",
        ] {
            assert!(
                matches!(err(bad), Some(BodyError::Malformed { .. })),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(
            err(br#"["a","b",{"c":""}]"#),
            None,
            "three strings are within 100"
        );
        assert_eq!(
            read(br#"["a","b",{"c":""}]"#, 2).err(),
            Some(BodyError::TooManyStrings { limit: 2 })
        );
        assert_eq!(
            read(b"plain", 0).err(),
            Some(BodyError::TooManyStrings { limit: 0 })
        );
    }

    #[test]
    fn the_message_of_a_malformed_body_says_where_not_what() {
        let e = read(br#"{"text": "123-45-6789", NaN}"#, 10).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("syntax error at line 1, column 25"), "{m}");
        assert!(!m.contains("6789"), "{m}");
    }

    #[test]
    fn a_body_that_does_not_start_like_json_is_one_text() {
        for t in ["hello {\"a\":1}", "", "12345", "  true", "SSN 123-45-6789"] {
            assert_eq!(read(t.as_bytes(), 1), Ok(Body::Text(t)));
        }
    }

    #[test]
    fn rewrite_changes_only_the_given_literals() {
        let body = br#"{"z":1e5,  "s":"a\u0062c", "n":123456789012345678901234, "t":"keep\u002d"}"#;
        let Ok(Body::Json(v)) = read(body, 10) else {
            panic!("not JSON")
        };
        let out = rewrite(body, [(v[0].span.clone(), "new \"q\"\n\u{1}é")]);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"z":1e5,  "s":"new \"q\"\n\u0001é", "n":123456789012345678901234, "t":"keep\u002d"}"#
        );
    }

    /// Any JSON value: strings with escapes, control characters and
    /// non-ASCII, nested containers.
    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            "[a-c\"\\\\\u{0}-\u{1f}é€😀:{}\\[\\], ]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map("[a-c\"\\\\:]{0,3}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Every string value of `v`, in the order serde_json writes them.
    fn all_strings(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Array(a) => a.iter().for_each(|e| all_strings(e, out)),
            Value::Object(m) => m.values().for_each(|e| all_strings(e, out)),
            _ => {}
        }
    }

    /// `v` with every string value `s` written `<s>`.
    fn marked(v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(format!("<{s}>")),
            Value::Array(a) => Value::Array(a.iter().map(marked).collect()),
            Value::Object(m) => {
                Value::Object(m.iter().map(|(k, e)| (k.clone(), marked(e))).collect())
            }
            other => other.clone(),
        }
    }

    proptest! {
        /// The walker finds exactly the string values serde_json reads, in
        /// document order, and a rewrite of them reads back as the same
        /// document with those strings changed.
        #[test]
        fn walker_agrees_with_serde_json(v in json(), pretty in any::<bool>()) {
            // A bare scalar is not JSON to the walker (it is one text).
            let v = if v.is_object() || v.is_array() || v.is_string() { v } else { Value::Array(vec![v]) };
            let body = if pretty {
                serde_json::to_string_pretty(&v).unwrap()
            } else {
                serde_json::to_string(&v).unwrap()
            };
            let found = match read(body.as_bytes(), usize::MAX) {
                Ok(Body::Json(found)) => found,
                other => return Err(TestCaseError::fail(format!("{other:?}"))),
            };
            let mut want = Vec::new();
            all_strings(&v, &mut want);
            let got: Vec<String> = found.iter().map(|s| s.text.to_string()).collect();
            prop_assert_eq!(&got, &want);
            let expected = marked(&v);
            let new: Vec<String> = found.iter().map(|s| format!("<{}>", s.text)).collect();
            let out = rewrite(body.as_bytes(), found.iter().zip(&new).map(|(s, n)| (s.span.clone(), n.as_str())));
            let back: Value = serde_json::from_slice(&out).unwrap();
            prop_assert_eq!(back, expected);
        }
    }
}
