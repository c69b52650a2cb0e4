//! Policy tests ([§13](docs/policy-tests.md#s13)): finds `*.test.yaml` files, reads each one, builds
//! its evaluator through the compiler's in-memory path (every check of [§4.2](docs/formats.md#s4-2)
//! but the license's) or the pack loader (every check of [§5](docs/formats.md#s5)), runs its cases
//! through that evaluator and compares each decision with what the case
//! expects. It never evaluates text by itself, never seals or writes a pack,
//! and reports only the test author's own texts and the decision's fields.

mod diff;
mod file;
pub mod report;

pub use file::{Expect, ExpectedSeverity, Target, TestFile};

use crate::compiler::{self, Entitlement};
use crate::container::PackError;
use crate::engine::{Decision, Evaluator};
use crate::error::{ErrorName, Named};
use crate::license::{LicenseArgs, LicenseError, VerifiedLicense};
use crate::pack::{build_evaluator, load_pack_file_as};
use crate::playbook::PlaybookError;
use crate::program::Program;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use time::OffsetDateTime;

/// The name every test file ends with.
pub const TEST_FILE_SUFFIX: &str = ".test.yaml";

/// Directories a search never enters: hidden ones (`.git`), and build or
/// dependency trees that hold no policy tests but can be huge.
pub const SKIPPED_DIRS: [&str; 2] = ["target", "node_modules"];

/// Errors of the test runner itself ([§4.3](docs/errors.md#s4-3) names; errors of the
/// playbooks, packs and licenses under test keep their own).
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum PolicyTestError {
    /// A test file that cannot be read or does not follow [§13](docs/policy-tests.md#s13)
    /// (`CompilerError`, exit 3).
    #[error("{0}")]
    TestFile(String),
    /// A path that does not exist, or paths that hold no test file
    /// (`UsageError`, exit 2): a run that tests nothing must not pass.
    #[error("{0}")]
    Paths(String),
    /// A directory that cannot be listed (`IoError`, exit 1).
    #[error("{0}")]
    Io(String, #[source] Option<crate::error::Cause>),
    /// The playbook, pack or license of a test file failed its checks: that
    /// error, its name, exit code and message unchanged, with the test file
    /// as context (text errors print it on a line of its own).
    #[error("{error}")]
    Subject {
        /// The test file.
        test_file: String,
        /// The error of its subject.
        error: Box<SubjectError>,
    },
}

/// The error of a test file's subject, as the layer below that raised it:
/// its license (`license:`, or the lookup order), its pack, or its
/// playbook (compiled, or the pack's). Not the root [`crate::Error`], which
/// holds [`PolicyTestError`]: the hierarchy has no cycle.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum SubjectError {
    /// The license of a `pack:` test file.
    #[error(transparent)]
    License(#[from] LicenseError),
    /// A `pack:` file that does not load.
    #[error(transparent)]
    Pack(#[from] PackError),
    /// A playbook, or a pack's playbook, that fails its checks.
    #[error(transparent)]
    Playbook(#[from] PlaybookError),
}

impl Named for SubjectError {
    fn name(&self) -> ErrorName {
        match self {
            Self::License(e) => e.name(),
            Self::Pack(e) => e.name(),
            Self::Playbook(e) => e.name(),
        }
    }

    fn problems(&self) -> &[String] {
        match self {
            Self::License(e) => e.problems(),
            Self::Pack(e) => e.problems(),
            Self::Playbook(e) => e.problems(),
        }
    }
}

crate::error::io_constructor!(PolicyTestError);

impl Named for PolicyTestError {
    fn name(&self) -> ErrorName {
        match self {
            Self::TestFile(_) => ErrorName::CompilerError,
            Self::Paths(_) => ErrorName::UsageError,
            Self::Io(..) => ErrorName::IoError,
            Self::Subject { error, .. } => error.name(),
        }
    }

    fn problems(&self) -> &[String] {
        match self {
            Self::Subject { error, .. } => error.problems(),
            _ => &[],
        }
    }

    fn context(&self) -> Option<String> {
        match self {
            Self::Subject { test_file, .. } => Some(format!("in test file {test_file}")),
            _ => None,
        }
    }
}

/// Finds the test files in `paths` ([§13](docs/policy-tests.md#s13)): a file is taken as a test
/// file whatever its name (it was named on purpose); a directory is searched
/// recursively for `*.test.yaml`, in name order, without following links to
/// directories and without entering [`SKIPPED_DIRS`] or hidden directories.
/// A file reached twice runs once. A missing path, or no test file at all,
/// is an error.
pub fn find_test_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, PolicyTestError> {
    let mut found = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                PolicyTestError::Paths(format!("test path {} does not exist", p.display()))
            } else {
                PolicyTestError::io(format_args!("cannot read test path {}", p.display()), e)
            }
        })?;
        if meta.is_dir() {
            walk(p, &mut found)?;
        } else {
            found.push(p.clone());
        }
    }
    let mut seen = HashSet::new();
    found.retain(|p| seen.insert(std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())));
    if found.is_empty() {
        return Err(PolicyTestError::Paths(format!(
            "no test files (*{TEST_FILE_SUFFIX}) found in {}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(found)
}

fn walk(dir: &Path, found: &mut Vec<PathBuf>) -> Result<(), PolicyTestError> {
    let io = |e: std::io::Error| {
        PolicyTestError::io(format_args!("cannot read directory {}", dir.display()), e)
    };
    let mut entries = std::fs::read_dir(dir)
        .map_err(io)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(io)?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let path = entry.path();
        let kind = entry.file_type().map_err(io)?;
        if kind.is_dir() {
            if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_ref()) {
                walk(&path, found)?;
            }
        } else if name.ends_with(TEST_FILE_SUFFIX) && path.is_file() {
            // A link is followed only to a file: links to directories could loop.
            found.push(path);
        }
    }
    Ok(())
}

/// What a test file's cases run against: a compiled playbook or a loaded
/// pack, with the rules coverage counts.
#[derive(Debug)]
pub struct Subject {
    /// The playbook or pack file, as the test file's directory resolves it.
    pub path: PathBuf,
    /// `playbook` or `pack`.
    pub kind: &'static str,
    /// The pack id.
    pub pack_id: String,
    /// Every rule a case can trigger: custom rule ids in file order, then
    /// the built-in hard rules (which every pack runs, [§6.1](docs/evaluation.md#s6-1)).
    pub rules: Vec<(String, RuleSource)>,
    /// The engine, shared by every test file naming the same subject.
    pub evaluator: Arc<Evaluator>,
}

/// Where a rule comes from, as decisions name it ([§6.4](docs/evaluation.md#s6-4) `source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleSource {
    /// A custom rule of the playbook.
    Rule,
    /// A built-in hard rule.
    Builtin,
    /// A hard rule of a version-2 playbook's own ([§16.3](docs/codons.md#s16-3)).
    HardRule,
}

impl RuleSource {
    /// `rule` or `builtin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rule => "rule",
            Self::Builtin => "builtin",
            Self::HardRule => "hard_rule",
        }
    }
}

fn all_rules(custom: impl Iterator<Item = String>, program: &Program) -> Vec<(String, RuleSource)> {
    custom
        .map(|id| (id, RuleSource::Rule))
        .chain(program.hard_rules.iter().map(|h| {
            let source = if h.builtin {
                RuleSource::Builtin
            } else {
                RuleSource::HardRule
            };
            (h.id.clone(), source)
        }))
        .collect()
}

/// Builds subjects once per file: test files naming the same playbook or
/// pack share its evaluator, its warnings are printed once, and coverage
/// adds up over all of them.
#[derive(Debug)]
pub struct Loader {
    license_args: LicenseArgs,
    now: OffsetDateTime,
    subjects: HashMap<PathBuf, Arc<Subject>>,
    /// Warnings of the playbooks compiled so far (for stderr).
    pub warnings: Vec<String>,
}

impl Loader {
    /// A loader whose `pack:` files use `license_args` unless the test file
    /// names its own `license:` or `issuer_keys:`.
    pub fn new(license_args: LicenseArgs, now: OffsetDateTime) -> Self {
        Self {
            license_args,
            now,
            subjects: HashMap::new(),
            warnings: Vec::new(),
        }
    }

    /// The subject of `file`: its playbook compiled in memory without a
    /// license, or its pack loaded with the license ([§13](docs/policy-tests.md#s13)). An error
    /// names the test file as its context.
    pub fn subject(&mut self, file: &TestFile) -> Result<Arc<Subject>, PolicyTestError> {
        self.build(file).map_err(|e| PolicyTestError::Subject {
            test_file: file.path.display().to_string(),
            error: Box::new(e),
        })
    }

    fn build(&mut self, file: &TestFile) -> Result<Arc<Subject>, SubjectError> {
        let path = file.target.path();
        let key = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        // A pack's license is part of what is tested: a cached pack is only
        // reused for the same license choice.
        let key = match &file.target {
            Target::Playbook(_) => key,
            Target::Pack {
                license,
                issuer_keys,
                ..
            } => {
                let mut k = key.into_os_string();
                for p in [license, issuer_keys] {
                    k.push("\0");
                    if let Some(p) = p {
                        k.push(p.as_os_str());
                    }
                }
                PathBuf::from(k)
            }
        };
        if let Some(s) = self.subjects.get(&key) {
            return Ok(Arc::clone(s));
        }
        let subject = Arc::new(match &file.target {
            Target::Playbook(p) => self.compile(p)?,
            Target::Pack {
                pack,
                license,
                issuer_keys,
            } => {
                let license = self.license(license.as_deref(), issuer_keys.as_deref())?;
                let loaded = load_pack_file_as::<SubjectError>(pack, &license, None)?;
                Subject {
                    path: pack.clone(),
                    kind: "pack",
                    pack_id: loaded.pack_id,
                    rules: all_rules(loaded.rules.into_iter().map(|r| r.id), &loaded.program),
                    evaluator: loaded.evaluator,
                }
            }
        });
        self.subjects.insert(key, Arc::clone(&subject));
        Ok(subject)
    }

    /// `compile`'s checks in memory ([§4.2](docs/formats.md#s4-2) without the license), and the
    /// evaluator a pack of it would load to.
    fn compile(&mut self, playbook: &Path) -> Result<Subject, SubjectError> {
        let name = playbook.display().to_string();
        let bytes = compiler::read_playbook(playbook)?;
        let compiled =
            compiler::compile_in_memory_as::<SubjectError>(&bytes, &name, Entitlement::PolicyTest)?;
        self.warnings.extend(compiled.warnings.iter().cloned());
        let evaluator = build_evaluator(
            &compiled.pack_id,
            &compiled.version,
            &compiled.rules,
            &compiled.program,
            &name,
        )?;
        Ok(Subject {
            path: playbook.to_path_buf(),
            kind: "playbook",
            rules: all_rules(
                compiled.rules.iter().map(|r| r.id.clone()),
                &compiled.program,
            ),
            pack_id: compiled.pack_id,
            evaluator: Arc::new(evaluator),
        })
    }

    /// The license of a `pack:` test file: its own `license:` and
    /// `issuer_keys:` where it names them, else the command line's and the
    /// lookup orders of [§2](docs/formats.md#s2); verified and in its window ([§5](docs/formats.md#s5) step 1).
    fn license(
        &self,
        license: Option<&Path>,
        issuer_keys: Option<&Path>,
    ) -> Result<VerifiedLicense, LicenseError> {
        let args = LicenseArgs {
            license: license
                .map(Path::to_path_buf)
                .or_else(|| self.license_args.license.clone()),
            issuer_keys: issuer_keys
                .map(Path::to_path_buf)
                .or_else(|| self.license_args.issuer_keys.clone()),
            pack_signers: None,
        };
        if let Some(p) = license {
            // An explicit choice never falls back, and the message names
            // where the choice was made.
            if !p.exists() {
                return Err(LicenseError::NotFound(format!(
                    "license file {} (from the test file's `license:`) does not exist",
                    p.display()
                )));
            }
        }
        args.load(self.now)
    }
}

/// Checks that every rule id a case names in `triggers` or `spans` is a
/// rule of `subject`: a misspelt id in `spans` would otherwise pass as
/// "did not trigger".
pub fn check_rule_ids(file: &TestFile, subject: &Subject) -> Result<(), PolicyTestError> {
    let known: HashSet<&str> = subject.rules.iter().map(|(id, _)| id.as_str()).collect();
    for (i, case) in file.cases.iter().enumerate() {
        let named = case
            .expect
            .triggers
            .iter()
            .flatten()
            .map(|id| ("triggers", id))
            .chain(
                case.expect
                    .spans
                    .iter()
                    .flatten()
                    .map(|(id, _)| ("spans", id)),
            );
        for (key, id) in named {
            if !known.contains(id.as_str()) {
                return Err(PolicyTestError::TestFile(format!(
                    "test file {}: cases[{i}] (`{}`): `{key}` names `{id}`, which is not a rule of {} (its rules: {})",
                    file.path.display(),
                    case.name,
                    subject.path.display(),
                    subject
                        .rules
                        .iter()
                        .map(|(id, _)| id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
    }
    Ok(())
}

/// One difference between what a case expected and what the engine decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// The `expect` key: `action`, `severity`, `reason`, `clean_text`,
    /// `triggers` or `spans`.
    pub field: &'static str,
    /// For `spans`: the rule whose spans differ.
    pub rule: Option<String>,
    /// What the case expected, as JSON.
    pub expected: Value,
    /// What the decision holds, as JSON.
    pub got: Value,
}

/// The outcome of one case.
#[derive(Debug, Clone)]
pub struct CaseResult {
    /// The case's name.
    pub name: String,
    /// The case's payload (for the JUnit failure body).
    pub text: String,
    /// Every difference; empty when the case passed.
    pub differences: Vec<Difference>,
    /// The rule ids of the decision's triggers, in order.
    pub triggered: Vec<String>,
    /// The engine's time for the case, in microseconds.
    pub latency_us: f64,
}

impl CaseResult {
    /// Whether every expectation held.
    pub fn passed(&self) -> bool {
        self.differences.is_empty()
    }
}

/// The outcome of one test file.
#[derive(Debug)]
pub struct FileResult {
    /// The test file, as found.
    pub file: PathBuf,
    /// What its cases ran against.
    pub subject: Arc<Subject>,
    /// Every case, in file order.
    pub cases: Vec<CaseResult>,
}

impl FileResult {
    /// Cases that passed.
    pub fn passed(&self) -> usize {
        self.cases.iter().filter(|c| c.passed()).count()
    }

    /// Cases that failed.
    pub fn failed(&self) -> usize {
        self.cases.len() - self.passed()
    }
}

/// Runs every case of `file` on `subject`'s evaluator.
pub fn run_file(file: &TestFile, subject: Arc<Subject>) -> FileResult {
    let cases = file
        .cases
        .iter()
        .map(|case| {
            let decision = subject.evaluator.evaluate_with(&case.text, case.normalize);
            CaseResult {
                name: case.name.clone(),
                text: case.text.clone(),
                differences: compare(&case.expect, &decision),
                triggered: decision
                    .triggers
                    .iter()
                    .map(|t| t.rule_id.to_string())
                    .collect(),
                latency_us: decision.latency_us,
            }
        })
        .collect();
    FileResult {
        file: file.path.clone(),
        subject,
        cases,
    }
}

/// Every difference between `expect` and `decision`, in `expect`'s key order.
pub fn compare(expect: &Expect, decision: &Decision<'_>) -> Vec<Difference> {
    let mut out = Vec::new();
    let mut check = |field: &'static str, expected: Value, got: Value| {
        if expected != got {
            out.push(Difference {
                field,
                rule: None,
                expected,
                got,
            });
        }
    };
    if let Some(a) = &expect.action {
        check("action", json!(a), json!(decision.action));
    }
    if let Some(s) = &expect.severity {
        check(
            "severity",
            json!(s.map(ExpectedSeverity::as_str)),
            json!(decision.severity.map(|s| s.as_str())),
        );
    }
    if let Some(r) = &expect.reason {
        check("reason", json!(r), json!(decision.reason));
    }
    if let Some(t) = &expect.clean_text {
        check("clean_text", json!(t), json!(decision.clean_text));
    }
    if let Some(t) = &expect.triggers {
        let got: Vec<&str> = decision.triggers.iter().map(|t| t.rule_id).collect();
        check("triggers", json!(t), json!(got));
    }
    if let Some(spans) = &expect.spans {
        for (rule, want) in spans {
            let mut want = want.clone();
            want.sort_unstable();
            let got: Vec<[usize; 2]> = decision
                .triggers
                .iter()
                .find(|t| t.rule_id == rule)
                .map(|t| t.spans.clone())
                .unwrap_or_default();
            if want != got {
                out.push(Difference {
                    field: "spans",
                    rule: Some(rule.clone()),
                    expected: json!(want),
                    got: json!(got),
                });
            }
        }
    }
    out
}

/// A rule of a subject that no case triggered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uncovered {
    /// The playbook or pack.
    pub subject: PathBuf,
    /// Its pack id.
    pub pack_id: String,
    /// The rule id.
    pub rule_id: String,
    /// Custom rule or built-in hard rule.
    pub source: RuleSource,
}

/// Coverage over a whole run (`--coverage`).
#[derive(Debug, Clone, Default)]
pub struct Coverage {
    /// Rules of all subjects, counted once per subject.
    pub rules: usize,
    /// Subjects (playbooks and packs) tested.
    pub subjects: usize,
    /// The rules no case triggered, by subject in first-tested order, then
    /// in rule order.
    pub uncovered: Vec<Uncovered>,
}

/// The rules (custom and built-in hard rules) that no case of any file
/// triggered, subject by subject ([§13](docs/policy-tests.md#s13) `--coverage`).
pub fn coverage(results: &[FileResult]) -> Coverage {
    let mut order: Vec<&Arc<Subject>> = Vec::new();
    let mut triggered: Vec<HashSet<&str>> = Vec::new();
    for r in results {
        let i = match order.iter().position(|s| Arc::ptr_eq(s, &r.subject)) {
            Some(i) => i,
            None => {
                order.push(&r.subject);
                triggered.push(HashSet::new());
                order.len() - 1
            }
        };
        for c in &r.cases {
            triggered[i].extend(c.triggered.iter().map(String::as_str));
        }
    }
    let mut cov = Coverage {
        subjects: order.len(),
        ..Coverage::default()
    };
    for (s, hit) in order.iter().zip(&triggered) {
        cov.rules += s.rules.len();
        for (id, source) in &s.rules {
            if !hit.contains(id.as_str()) {
                cov.uncovered.push(Uncovered {
                    subject: s.path.clone(),
                    pack_id: s.pack_id.clone(),
                    rule_id: id.clone(),
                    source: *source,
                });
            }
        }
    }
    cov
}

#[cfg(test)]
mod tests;
