//! The evaluation request `{"text", "pack_id"?, "normalize"?}` ([§9.4](docs/http-api.md#s9-4) `/evaluate`,
//! `/v1/evaluate`, batch items, `/v1/evaluate/stream`; [§4](docs/formats.md#s4) `run --jsonl`
//! lines): one struct and one parser that the CLI and the server share, over
//! JSON that refuses an object with a key twice ([§9.1](docs/configuration.md#s9-1)).
//!
//! It knows nothing of HTTP, files or packs, and its messages name fields
//! and JSON types, never a value: a payload is never quoted back. A new
//! optional field is added in one place: [`EvaluateRequest`] and
//! [`EvaluateRequest::take_from`].

use crate::engine::Normalize;
use serde_json::{Map, Value};
use std::fmt;

/// A request to evaluate one text, as every route and `run --jsonl` read
/// it. Its `Debug` shows the text's size, never the text.
#[derive(Clone, PartialEq, Eq)]
pub struct EvaluateRequest {
    /// The payload to judge (required).
    pub text: String,
    /// The pack to judge it with; `None`: the caller's default ([§9.4](docs/http-api.md#s9-4)).
    pub pack_id: Option<String>,
    /// How to match ([§15](docs/evasion.md#s15)); `None`: the caller's default (`engine.normalize`).
    pub normalize: Option<Normalize>,
    /// `"mode": "monitor"` ([§19](docs/guides/auditing.md#s19)): decide and log, but permit.
    pub monitor: bool,
}

impl fmt::Debug for EvaluateRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EvaluateRequest")
            .field("text", &crate::redacted::Redacted::of(&self.text))
            .field("pack_id", &self.pack_id)
            .field("normalize", &self.normalize)
            .field("monitor", &self.monitor)
            .finish()
    }
}

impl EvaluateRequest {
    /// Takes the request's fields out of `obj`; the fields left are a
    /// route's own options (`chunk_size`, …) or ignored. Taking them moves
    /// the text out of the parsed JSON instead of copying it.
    pub fn take_from(obj: &mut Map<String, Value>) -> Result<Self, String> {
        let text = match obj.remove("text") {
            Some(Value::String(s)) => s,
            Some(other) => {
                return Err(format!(
                    "`text` must be a string, not {}",
                    type_name(&other)
                ))
            }
            None => return Err("`text` is missing".into()),
        };
        let pack_id = optional_string(obj.remove("pack_id"), "pack_id")?;
        let normalize = optional_normalize(obj.remove("normalize"))?;
        let monitor = optional_monitor(obj.remove("mode"))?.unwrap_or(false);
        Ok(Self {
            text,
            pack_id,
            normalize,
            monitor,
        })
    }
}

/// Why a body could not be read as a request.
#[derive(Debug)]
pub enum BodyError {
    /// Not JSON, or JSON with an object that has a key twice.
    Json(serde_json::Error),
    /// JSON of the wrong shape or types; the message names the field.
    Shape(String),
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The HTTP routes' wording ([§9.4](docs/http-api.md#s9-4) examples); `run --jsonl`
            // words its own from the inner error.
            Self::Json(e) => write!(f, "the body is not valid JSON: {e}"),
            Self::Shape(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for BodyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Json(e) => Some(e),
            Self::Shape(_) => None,
        }
    }
}

/// An evaluation body: a JSON object with [`EvaluateRequest`]'s fields,
/// and the object's other fields (a route's own options).
pub fn parse_evaluate_object(
    bytes: &[u8],
) -> Result<(EvaluateRequest, Map<String, Value>), BodyError> {
    let mut obj = parse_object(bytes, "the body")?;
    let request = EvaluateRequest::take_from(&mut obj).map_err(BodyError::Shape)?;
    Ok((request, obj))
}

/// An evaluation body (`POST /evaluate`, `/v1/evaluate`): a JSON object
/// with a string `text` and an optional string `pack_id`; other fields are
/// ignored. (The routes take the other fields too, through
/// [`parse_evaluate_object`]; this is the fuzz harness's and the tests'.)
#[cfg(any(test, feature = "testing"))]
pub fn parse_evaluate_body(bytes: &[u8]) -> Result<EvaluateRequest, BodyError> {
    parse_evaluate_object(bytes).map(|(request, _)| request)
}

/// A body that must be one JSON object (`what` names it in messages).
pub fn parse_object(bytes: &[u8], what: &str) -> Result<Map<String, Value>, BodyError> {
    match parse_strict(bytes).map_err(BodyError::Json)? {
        Value::Object(obj) => Ok(obj),
        other => Err(BodyError::Shape(not_an_object(&other, what))),
    }
}

/// An optional string field: absent or `null` is `None`.
pub fn optional_string(value: Option<Value>, field: &str) -> Result<Option<String>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(format!(
            "`{field}` must be a string, not {}",
            type_name(&other)
        )),
    }
}

/// An optional `normalize` field ([§15](docs/evasion.md#s15)): absent or `null` is `None`.
pub fn optional_normalize(value: Option<Value>) -> Result<Option<Normalize>, String> {
    match optional_string(value, "normalize")? {
        None => Ok(None),
        Some(n) => n
            .parse()
            .map(Some)
            .map_err(|_| "`normalize` must be \"none\" or \"evasion\"".to_string()),
    }
}

/// An optional `mode` field ([§19](docs/guides/auditing.md#s19)): `Some(true)` for
/// `"monitor"`, `Some(false)` for `"enforce"`, absent or `null` is `None`.
pub fn optional_monitor(value: Option<Value>) -> Result<Option<bool>, String> {
    match optional_string(value, "mode")?.as_deref() {
        None => Ok(None),
        Some("monitor") => Ok(Some(true)),
        Some("enforce") => Ok(Some(false)),
        Some(_) => Err("`mode` must be \"enforce\" or \"monitor\"".into()),
    }
}

/// The message for a value that should have been an object.
pub fn not_an_object(v: &Value, what: &str) -> String {
    format!("{what} must be a JSON object, not {}", type_name(v))
}

/// `v` as an object, or the message [`not_an_object`] gives.
pub fn as_object<'v>(v: &'v Value, what: &str) -> Result<&'v Map<String, Value>, String> {
    v.as_object().ok_or_else(|| not_an_object(v, what))
}

/// A JSON type as messages name it ("a string", "an array", …).
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Parses JSON, refusing an object with a key twice ([§9.1](docs/configuration.md#s9-1)): two
/// parsers must never disagree on which `text` was judged.
pub fn parse_strict(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = Strict.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// A `Value` seed whose objects refuse duplicate keys.
struct Strict;

impl<'de> serde::de::DeserializeSeed<'de> for Strict {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(Strict)
    }
}

impl<'de> serde::de::Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(Strict)? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut obj = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(Strict)?;
            if obj.contains_key(&key) {
                // The key is the client's own field name, not payload text,
                // but it is not echoed either.
                return Err(serde::de::Error::custom("an object has the same key twice"));
            }
            obj.insert(key, value);
        }
        Ok(Value::Object(obj))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(bytes: &str) -> String {
        match parse_evaluate_body(bytes.as_bytes()) {
            Err(BodyError::Shape(m)) => m,
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn a_request_and_its_errors() {
        let r = parse_evaluate_body(br#"{"text":"a","pack_id":"p","x":1}"#).ok();
        assert_eq!(
            r,
            Some(EvaluateRequest {
                text: "a".into(),
                pack_id: Some("p".into()),
                normalize: None,
                monitor: false,
            })
        );
        let r = parse_evaluate_body(br#"{"text":"a","normalize":"evasion"}"#).ok();
        assert_eq!(r.and_then(|r| r.normalize), Some(Normalize::Evasion));
        let r = parse_evaluate_body(br#"{"text":"a","normalize":null}"#).ok();
        assert_eq!(r.map(|r| r.normalize), Some(None));
        assert_eq!(
            shape(r#"{"text":"a","normalize":"nfkc"}"#),
            "`normalize` must be \"none\" or \"evasion\""
        );
        assert_eq!(
            shape(r#"{"text":"a","normalize":true}"#),
            "`normalize` must be a string, not a boolean"
        );
        let r = parse_evaluate_body(br#"{"text":"","pack_id":null}"#).ok();
        assert_eq!(r.and_then(|r| r.pack_id), None);
        assert_eq!(shape("[]"), "the body must be a JSON object, not an array");
        assert_eq!(shape("{}"), "`text` is missing");
        assert_eq!(
            shape(r#"{"text":5}"#),
            "`text` must be a string, not a number"
        );
        assert_eq!(
            shape(r#"{"text":"a","pack_id":[]}"#),
            "`pack_id` must be a string, not an array"
        );
    }

    #[test]
    fn a_key_twice_is_refused_anywhere() {
        for body in [
            r#"{"text":"a","text":"b"}"#,
            r#"{"text":"a","o":{"k":1,"k":2}}"#,
        ] {
            match parse_evaluate_body(body.as_bytes()) {
                Err(e @ BodyError::Json(_)) => {
                    let m = e.to_string();
                    assert!(m.starts_with("the body is not valid JSON: "), "{m}");
                    assert!(m.contains("the same key twice"), "{m}");
                }
                other => panic!("{body}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_other_fields_are_left_for_the_route() {
        let (r, rest) = parse_evaluate_object(br#"{"text":"a","chunk_size":4}"#).unwrap();
        assert_eq!(r.text, "a");
        assert_eq!(rest.get("chunk_size"), Some(&Value::from(4)));
        assert!(!rest.contains_key("text"));
    }
}
