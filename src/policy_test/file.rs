//! The test file format of [§13](docs/policy-tests.md#s13), read strictly: an unknown key, a value
//! of the wrong type, a missing `cases` or an `expect` that checks nothing is
//! an error naming the file, the field and (for what YAML locates) the line,
//! so that a typo never passes as a test. Reads files only; runs nothing.

use super::PolicyTestError;
use crate::engine::Normalize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

/// Largest test file read: test files hold payloads, so they may be larger
/// than playbooks, but the cap keeps a stray file from costing memory
/// before it is parsed.
pub const MAX_TEST_FILE_BYTES: u64 = 8 * 1024 * 1024;

/// The keys an `expect` may hold, in the order differences are reported.
pub const EXPECT_KEYS: [&str; 6] = [
    "action",
    "severity",
    "reason",
    "clean_text",
    "triggers",
    "spans",
];

/// One parsed test file.
#[derive(Debug, Clone)]
pub struct TestFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// What its cases run against.
    pub target: Target,
    /// Its cases, in file order, with unique names.
    pub cases: Vec<Case>,
}

/// What a test file tests; paths are resolved against the test file's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `playbook:`: compiled in memory, no license needed.
    Playbook(PathBuf),
    /// `pack:`: loaded with a license.
    Pack {
        /// The `.hxpack` file.
        pack: PathBuf,
        /// `license:`, else the command line's and [§2](docs/formats.md#s2)'s lookup order.
        license: Option<PathBuf>,
        /// `issuer_keys:`, else the command line's and [§2](docs/formats.md#s2)'s lookup order.
        issuer_keys: Option<PathBuf>,
    },
}

impl Target {
    /// The playbook or pack file.
    pub fn path(&self) -> &Path {
        match self {
            Self::Playbook(p) => p,
            Self::Pack { pack, .. } => pack,
        }
    }
}

/// One case: a payload and what its decision must hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// Unique within its file.
    pub name: String,
    /// The payload, taken as written.
    pub text: String,
    /// How it is matched ([§15](docs/evasion.md#s15); `normalize: evasion`), `none` by default.
    pub normalize: Normalize,
    /// What to check; at least one key.
    pub expect: Expect,
}

/// A decision's severity as a case expects it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum ExpectedSeverity {
    /// `FATAL`.
    #[serde(rename = "FATAL")]
    Fatal,
    /// `WARNING`.
    #[serde(rename = "WARNING")]
    Warning,
}

impl ExpectedSeverity {
    /// As decisions write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fatal => "FATAL",
            Self::Warning => "WARNING",
        }
    }
}

/// What a case checks: any subset of the decision's fields ([§13](docs/policy-tests.md#s13)). A
/// key that is absent is not checked; `severity: null` and `reason: null`
/// expect a permit's nulls.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The decision's action.
    #[serde(default, deserialize_with = "present")]
    pub action: Option<String>,
    /// `FATAL`, `WARNING`, or `null` (a permit).
    #[serde(default, deserialize_with = "present")]
    pub severity: Option<Option<ExpectedSeverity>>,
    /// The deciding trigger's reason, or `null` (a permit).
    #[serde(default, deserialize_with = "present")]
    pub reason: Option<Option<String>>,
    /// The text that may leave.
    #[serde(default, deserialize_with = "present")]
    pub clean_text: Option<String>,
    /// The rule ids of every trigger, in order (custom rules, then hard rules).
    #[serde(default, deserialize_with = "present")]
    pub triggers: Option<Vec<String>>,
    /// Per rule id, its `[start, end)` spans in code points; `[]` expects
    /// that the rule did not trigger. Rules not named are not checked.
    #[serde(default, deserialize_with = "present")]
    pub spans: Option<BTreeMap<String, Vec<[usize; 2]>>>,
}

impl Expect {
    /// Whether it checks nothing.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// A key that is present: `null` is a value (an error where `T` is not an
/// `Option`), unlike an absent key.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default, deserialize_with = "present")]
    playbook: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pack: Option<String>,
    #[serde(default, deserialize_with = "present")]
    license: Option<String>,
    #[serde(default, deserialize_with = "present")]
    issuer_keys: Option<String>,
    cases: Vec<RawCase>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFields {
    name: String,
    text: String,
    #[serde(default)]
    normalize: Normalize,
    expect: Expect,
}

/// A case checked as it is read, so that serde_yaml locates its errors at
/// the case (an error raised after the list is read would point at the list).
#[derive(Debug)]
struct RawCase(Case);

impl<'de> Deserialize<'de> for RawCase {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct CaseVisitor;
        impl<'de> Visitor<'de> for CaseVisitor {
            type Value = RawCase;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a case: a mapping with `name`, `text` and `expect`")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawCase, A::Error> {
                let f = CaseFields::deserialize(de::value::MapAccessDeserializer::new(map))?;
                if f.name.is_empty() {
                    return Err(de::Error::custom("`name` is empty"));
                }
                if f.expect.is_empty() {
                    return Err(de::Error::custom(format!(
                        "case `{}`: `expect` checks nothing; give at least one of {}",
                        f.name,
                        EXPECT_KEYS.join(", ")
                    )));
                }
                Ok(RawCase(Case {
                    name: f.name,
                    text: f.text,
                    normalize: f.normalize,
                    expect: f.expect,
                }))
            }
        }
        d.deserialize_map(CaseVisitor)
    }
}

impl TestFile {
    /// Reads and parses the test file at `path` under [`MAX_TEST_FILE_BYTES`].
    pub fn read(path: &Path) -> Result<Self, PolicyTestError> {
        let bytes = crate::capped::read_file_capped(path, MAX_TEST_FILE_BYTES).map_err(|e| {
            PolicyTestError::TestFile(match e {
                crate::capped::CappedError::Io(e) => {
                    format!("cannot read test file {}: {e}", path.display())
                }
                crate::capped::CappedError::TooLarge => format!(
                    "test file {} is over the {MAX_TEST_FILE_BYTES}-byte limit",
                    path.display()
                ),
            })
        })?;
        Self::parse(&bytes, path)
    }

    /// Parses test file bytes; `path` names the file in messages and
    /// anchors its relative paths.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Self, PolicyTestError> {
        let name = path.display();
        let fail =
            |detail: String| PolicyTestError::TestFile(format!("test file {name}: {detail}"));
        let text = std::str::from_utf8(bytes).map_err(|e| {
            fail(format!(
                "not valid UTF-8 (byte {} is not part of a character)",
                e.valid_up_to()
            ))
        })?;
        if text
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
        {
            return Err(fail(
                "the file is empty; it needs `playbook:` or `pack:` and `cases:`".into(),
            ));
        }
        let raw: RawFile = serde_yaml::from_str(text).map_err(|e| fail(yaml_detail(&e)))?;
        let dir = path.parent().unwrap_or_else(|| Path::new(""));
        let resolve = |key: &str, p: Option<String>| -> Result<Option<PathBuf>, PolicyTestError> {
            match p {
                Some(p) if p.is_empty() => Err(fail(format!("`{key}` is empty"))),
                Some(p) => Ok(Some(dir.join(p))),
                None => Ok(None),
            }
        };
        let playbook = resolve("playbook", raw.playbook)?;
        let pack = resolve("pack", raw.pack)?;
        let license = resolve("license", raw.license)?;
        let issuer_keys = resolve("issuer_keys", raw.issuer_keys)?;
        let target = match (playbook, pack) {
            (Some(_), Some(_)) => {
                return Err(fail(
                    "names both `playbook:` and `pack:`; a test file tests one of them".into(),
                ))
            }
            (None, None) => {
                return Err(fail(
                    "names neither `playbook:` nor `pack:`: what do its cases run against?".into(),
                ))
            }
            (Some(p), None) => {
                for (key, v) in [("license", &license), ("issuer_keys", &issuer_keys)] {
                    if v.is_some() {
                        return Err(fail(format!(
                            "`{key}` goes with `pack:`; a playbook is tested without a license"
                        )));
                    }
                }
                Target::Playbook(p)
            }
            (None, Some(pack)) => Target::Pack {
                pack,
                license,
                issuer_keys,
            },
        };
        if raw.cases.is_empty() {
            return Err(fail(
                "`cases` is empty: a test file without cases tests nothing".into(),
            ));
        }
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (i, c) in raw.cases.iter().enumerate() {
            if let Some(first) = seen.insert(c.0.name.as_str(), i) {
                return Err(fail(format!(
                    "cases[{i}]: the name `{}` is already the name of cases[{first}]; names are unique within a file (reports tell cases apart by name)",
                    c.0.name
                )));
            }
        }
        Ok(Self {
            path: path.to_path_buf(),
            target,
            cases: raw.cases.into_iter().map(|c| c.0).collect(),
        })
    }
}

/// serde_yaml's message with its location moved to the front
/// (`line 9 column 7: cases[1].expect: unknown field ...`), and a hint when
/// the file is a playbook rather than a test file.
fn yaml_detail(e: &serde_yaml::Error) -> String {
    let mut msg = e.to_string();
    if let Some(at) = msg.rfind(" at line ") {
        let tail = &msg[at + " at line ".len()..];
        let is_location = tail
            .split_once(" column ")
            .is_some_and(|(l, c)| is_number(l) && is_number(c));
        if is_location {
            msg.truncate(at);
        }
    }
    if msg.contains("unknown field `pack_id`") {
        msg.push_str(
            " (this looks like a playbook: a test file names its playbook with `playbook:`)",
        );
    }
    match e.location() {
        Some(l) => format!("line {} column {}: {msg}", l.line(), l.column()),
        None => msg,
    }
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}
