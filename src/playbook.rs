//! Playbooks ([§3](docs/formats.md#s3), [§4.1](docs/formats.md#s4-1)): YAML read with the 1.2 core schema into JSON,
//! the known top-level keys, and the type checks every later step relies on.
//! Pure data handling; no license, no regex, no files.

use crate::error::{ErrorName, Named};
use serde_json::{Map, Number, Value};

/// Top-level keys carried into a pack, in [§4.1](docs/formats.md#s4-1) order.
pub const KNOWN_KEYS: [&str; 18] = [
    "schema_version",
    "pack_id",
    "version",
    "name",
    "kind",
    "description",
    "goal_id",
    "budget",
    "floor",
    "actions",
    "rules",
    "codons",
    "hard_rules",
    "default_action",
    "invariants",
    "remedies",
    "solvers",
    "metadata",
];

/// Largest playbook file read: policies are small, and the cap keeps a
/// hostile file from costing memory before it is parsed.
pub const MAX_PLAYBOOK_BYTES: usize = 1024 * 1024;

/// Compiler-layer errors ([§4.3](docs/errors.md#s4-3) names `CompilerError`,
/// `PlaybookParseError`, `UnsupportedPackDeclarationError`).
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum PlaybookError {
    /// YAML unreadable, root not a mapping, `pack_id` missing.
    #[error("{0}")]
    Compiler(String),
    /// A declaration cannot be read.
    #[error("{0}")]
    Parse(String),
    /// Declarations the engine cannot execute; every problem found.
    #[error("{summary}")]
    Unsupported {
        /// One line naming the file and the count.
        summary: String,
        /// Each problem, naming its place (`rules[2]`) and rule id.
        problems: Vec<String>,
    },
}

impl Named for PlaybookError {
    fn name(&self) -> ErrorName {
        match self {
            Self::Compiler(_) => ErrorName::CompilerError,
            Self::Parse(_) => ErrorName::PlaybookParseError,
            Self::Unsupported { .. } => ErrorName::UnsupportedPackDeclarationError,
        }
    }
    fn problems(&self) -> &[String] {
        match self {
            Self::Unsupported { problems, .. } => problems,
            _ => &[],
        }
    }
}

/// A parsed YAML document: the known keys, and the unknown ones that were
/// dropped. Its `Debug` names the keys, never their values (the rules'
/// patterns).
#[derive(Clone)]
pub struct Document {
    /// The compiled playbook: known top-level keys only, as JSON.
    pub doc: Map<String, Value>,
    /// Unknown top-level keys, sorted (for the warning).
    pub unknown_keys: Vec<String>,
}

impl std::fmt::Debug for Document {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Document")
            .field("keys", &self.doc.keys().collect::<Vec<_>>())
            .field("unknown_keys", &self.unknown_keys)
            .finish_non_exhaustive()
    }
}

/// Parses YAML text into the JSON mapping at its root ([§4.2](docs/formats.md#s4-2) step 2, minus
/// the known-key filter). `name` is used in messages.
pub fn parse_yaml(bytes: &[u8], name: &str) -> Result<Map<String, Value>, PlaybookError> {
    if bytes.len() > MAX_PLAYBOOK_BYTES {
        return Err(PlaybookError::Compiler(format!(
            "Failed to parse YAML playbook: {name} is {} bytes, over the {MAX_PLAYBOOK_BYTES}-byte limit",
            bytes.len()
        )));
    }
    let yaml: serde_yaml::Value = serde_yaml::from_slice(bytes).map_err(|e| {
        PlaybookError::Compiler(format!(
            "Failed to parse YAML playbook: {name}: {e}{}",
            error_key_hint(bytes, &e)
        ))
    })?;
    let root_kind = match &yaml {
        serde_yaml::Value::Mapping(_) => None,
        serde_yaml::Value::Null => Some("the file is empty"),
        serde_yaml::Value::Sequence(_) => Some("the root is a list, not a mapping"),
        _ => Some("the root is a scalar, not a mapping"),
    };
    if let Some(why) = root_kind {
        return Err(PlaybookError::Compiler(format!(
            "Failed to parse YAML playbook: {name}: {why}"
        )));
    }
    match to_json(yaml, "", name)? {
        Value::Object(map) => Ok(map),
        _ => Err(PlaybookError::Compiler(format!(
            "Failed to parse YAML playbook: {name}: the root is not a mapping"
        ))),
    }
}

/// Names the key on the line of a YAML error, so the message names the field:
/// ` (line 5: key `description`; quote values that contain ": ")`.
fn error_key_hint(bytes: &[u8], e: &serde_yaml::Error) -> String {
    let what = e.to_string();
    let Some(line_no) = e.location().map(|l| l.line()) else {
        return String::new();
    };
    if what.contains("duplicate entry") {
        // Already names the key; the location is the mapping's start.
        return String::new();
    }
    let key = std::str::from_utf8(bytes)
        .ok()
        .and_then(|text| text.lines().nth(line_no.checked_sub(1)?))
        .and_then(|line| {
            let mut t = line.trim_start();
            while let Some(rest) = t.strip_prefix("- ") {
                t = rest.trim_start();
            }
            let (key, _) = t.split_once(':')?;
            let key = key.trim().trim_matches(|c| c == '"' || c == '\'');
            let plain = !key.is_empty()
                && key.len() <= 64
                && !key.starts_with('#')
                && !key.contains(char::is_whitespace);
            plain.then(|| key.to_string())
        });
    match key {
        None => String::new(),
        Some(key) if what.contains("mapping values are not allowed") => {
            format!(" (line {line_no}: key `{key}`; quote values that contain \": \")")
        }
        Some(key) => format!(" (line {line_no}: key `{key}`)"),
    }
}

fn child_path(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

fn to_json(v: serde_yaml::Value, path: &str, name: &str) -> Result<Value, PlaybookError> {
    let at = |p: &str| {
        if p.is_empty() {
            "the root".to_string()
        } else {
            format!("`{p}`")
        }
    };
    Ok(match v {
        serde_yaml::Value::Null => Value::Null,
        serde_yaml::Value::Bool(b) => Value::Bool(b),
        serde_yaml::Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                Value::Number(u.into())
            } else if let Some(i) = n.as_i64() {
                Value::Number(i.into())
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                Value::Number(Number::from_f64(f).ok_or_else(|| {
                    PlaybookError::Parse(format!("{name}: the value at {} is not a finite number (NaN and infinity are not JSON)", at(path)))
                })?)
            }
        }
        serde_yaml::Value::String(s) => Value::String(s),
        serde_yaml::Value::Sequence(items) => Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| to_json(item, &format!("{path}[{i}]"), name))
                .collect::<Result<_, _>>()?,
        ),
        serde_yaml::Value::Mapping(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                let serde_yaml::Value::String(k) = k else {
                    return Err(PlaybookError::Parse(format!(
                        "{name}: a mapping key at {} is not a string",
                        at(path)
                    )));
                };
                let child = child_path(path, &k);
                let v = to_json(v, &child, name)?;
                out.insert(k, v);
            }
            Value::Object(out)
        }
        serde_yaml::Value::Tagged(t) => {
            return Err(PlaybookError::Parse(format!(
                "{name}: the value at {} has the custom tag `{}`, which JSON cannot represent",
                at(path),
                t.tag
            )))
        }
    })
}

/// Step 2 of [§4.2](docs/formats.md#s4-2): YAML, root mapping, JSON-representable values,
/// known keys kept, and the top-level type checks of [§4.1](docs/formats.md#s4-1).
pub fn parse_document(bytes: &[u8], name: &str) -> Result<Document, PlaybookError> {
    let mut all = parse_yaml(bytes, name)?;
    let mut unknown: Vec<String> = all
        .keys()
        .filter(|k| !KNOWN_KEYS.contains(&k.as_str()))
        .cloned()
        .collect();
    unknown.sort();
    for k in &unknown {
        all.remove(k);
    }
    check_types(&all, name).map_err(PlaybookError::Parse)?;
    Ok(Document {
        doc: all,
        unknown_keys: unknown,
    })
}

/// The type checks of [§4.1](docs/formats.md#s4-1) on a compiled playbook (`version`, the lists).
pub fn check_types(doc: &Map<String, Value>, name: &str) -> Result<(), String> {
    match doc.get("version") {
        None | Some(Value::Null | Value::String(_) | Value::Number(_)) => {}
        Some(_) => return Err(format!("{name}: `version` must be a string or a number")),
    }
    for key in ["rules", "codons", "hard_rules", "solvers"] {
        match doc.get(key) {
            None | Some(Value::Null | Value::Array(_)) => {}
            Some(_) => return Err(format!("{name}: `{key}` must be a list")),
        }
    }
    Ok(())
}

/// The list at `key`, empty when absent or null (after [`check_types`]).
pub fn list<'a>(doc: &'a Map<String, Value>, key: &str) -> &'a [Value] {
    match doc.get(key) {
        Some(Value::Array(items)) => items,
        _ => &[],
    }
}

/// `pack_id`: present and a non-empty string ([§4.2](docs/formats.md#s4-2) step 3).
pub fn pack_id<'a>(doc: &'a Map<String, Value>, name: &str) -> Result<&'a str, PlaybookError> {
    match doc.get("pack_id") {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(Value::String(_)) => Err(PlaybookError::Compiler(format!(
            "{name}: `pack_id` is empty"
        ))),
        Some(_) => Err(PlaybookError::Compiler(format!(
            "{name}: `pack_id` is not a string"
        ))),
        None => Err(PlaybookError::Compiler(format!(
            "{name}: missing required key `pack_id`"
        ))),
    }
}

/// The solver names declared ([§4.1](docs/formats.md#s4-1)): strings, or mappings with a string `name`.
pub fn solver_names(doc: &Map<String, Value>, name: &str) -> Result<Vec<String>, PlaybookError> {
    list(doc, "solvers")
        .iter()
        .enumerate()
        .map(|(i, s)| match s {
            Value::String(n) => Ok(n.clone()),
            Value::Object(m) => match m.get("name") {
                Some(Value::String(n)) => Ok(n.clone()),
                _ => Err(PlaybookError::Parse(format!(
                    "{name}: solvers[{i}] has no string `name`"
                ))),
            },
            _ => Err(PlaybookError::Parse(format!(
                "{name}: solvers[{i}] is neither a solver name nor a mapping with a `name`"
            ))),
        })
        .collect()
}

/// `pack_version` as [§6.4](docs/evaluation.md#s6-4) writes it: the string, a number's canonical
/// JSON text, or empty when absent.
pub fn pack_version(doc: &Map<String, Value>) -> String {
    match doc.get("version") {
        Some(Value::String(s)) => s.clone(),
        Some(v @ Value::Number(_)) => crate::canonical::to_string(v).unwrap_or_default(),
        _ => String::new(),
    }
}

/// A string field, if it is one.
pub fn str_field<'a>(doc: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    doc.get(key).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(yaml: &str) -> PlaybookError {
        parse_document(yaml.as_bytes(), "p.yaml").unwrap_err()
    }

    #[test]
    fn yaml_errors_are_compiler_errors() {
        let bad_colon = "pack_id: a.b.v1\ndescription: Blocks codes: never send\n";
        assert!(
            matches!(err(bad_colon), PlaybookError::Compiler(m) if m.starts_with("Failed to parse YAML playbook: p.yaml"))
        );
        assert!(matches!(err("- a\n- b\n"), PlaybookError::Compiler(m) if m.contains("list")));
        assert!(matches!(err(""), PlaybookError::Compiler(m) if m.contains("empty")));
        assert!(
            matches!(err("a: 1\na: 2\n"), PlaybookError::Compiler(m) if m.contains("duplicate"))
        );
    }

    #[test]
    fn non_json_values_are_parse_errors_with_path() {
        assert!(
            matches!(err("pack_id: x\nbudget: {max_latency_ms: .nan}\n"), PlaybookError::Parse(m) if m.contains("`budget.max_latency_ms`"))
        );
        assert!(
            matches!(err("pack_id: x\nmetadata: {1: a}\n"), PlaybookError::Parse(m) if m.contains("`metadata`"))
        );
        assert!(
            matches!(err("pack_id: x\nrules: [!custom 1]\n"), PlaybookError::Parse(m) if m.contains("`rules[0]`"))
        );
        assert!(
            matches!(err("pack_id: x\nrules: 3\n"), PlaybookError::Parse(m) if m.contains("`rules` must be a list"))
        );
        assert!(matches!(
            err("pack_id: x\nversion: [1]\n"),
            PlaybookError::Parse(_)
        ));
    }

    #[test]
    fn anchors_expand_merge_keys_are_plain_and_unknown_keys_drop() {
        let d = parse_document(
            b"pack_id: x\nbase: &b {a: 1}\nmetadata: {<<: *b, c: yes}\nrule: []\n",
            "p",
        )
        .unwrap();
        assert_eq!(d.unknown_keys, vec!["base", "rule"]);
        assert_eq!(
            crate::canonical::to_string(&Value::Object(d.doc)).unwrap(),
            r#"{"metadata":{"<<":{"a":1},"c":"yes"},"pack_id":"x"}"#
        );
    }

    #[test]
    fn versions_render_as_canonical_text() {
        for (yaml, want) in [
            ("version: 2", "2"),
            ("version: 1.5", "1.5"),
            ("version: 1.0.0", "1.0.0"),
            ("version: null", ""),
            ("x: 1", ""),
        ] {
            let d = parse_document(format!("pack_id: p\n{yaml}\n").as_bytes(), "p").unwrap();
            assert_eq!(pack_version(&d.doc), want, "{yaml}");
        }
    }
}
