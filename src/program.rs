//! The codons and hard rules a pack runs ([§6.1](docs/evaluation.md#s6-1), [§16](docs/codons.md#s16)): the example
//! pack's six and four for a version-1 playbook, exactly what a version-2
//! playbook declares otherwise. Checks every `codons` and `hard_rules`
//! entry of a version-2 playbook (every problem at once, each named by its
//! place), compiles codon patterns and conditions once, and judges a
//! codon's candidate values (group, checksum, entropy, deny list, context).
//! Touches no license, no file and no payload beyond the value it judges;
//! problems never quote a pattern.

mod context;

pub use context::{Context, ContextBuffers, ContextGroups, ContextScan};

use crate::builtins::{self, Validator};
use crate::checksum::Checksum;
use crate::condition::{self, Expr, FieldKind, Operator};
use crate::pattern::CompiledPattern;
use crate::playbook::list;
use regex_automata::PatternID;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// The `schema_version` of a playbook ([§16](docs/codons.md#s16)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schema {
    /// Absent or `1`: the example pack's codons and hard rules run, whatever
    /// the playbook declares ([§4.2](docs/formats.md#s4-2) step 6, [§6.1](docs/evaluation.md#s6-1)).
    V1,
    /// `2`: the engine runs exactly the declared codons and hard rules.
    V2,
}

/// Reads `schema_version`: absent, `1` or `2`; anything else is a problem.
pub fn schema_of(doc: &Map<String, Value>) -> Result<Schema, String> {
    match doc.get("schema_version") {
        None => Ok(Schema::V1),
        Some(Value::Number(n)) if n.as_u64() == Some(1) || n.as_f64() == Some(1.0) => {
            Ok(Schema::V1)
        }
        Some(Value::Number(n)) if n.as_u64() == Some(2) || n.as_f64() == Some(2.0) => {
            Ok(Schema::V2)
        }
        Some(_) => Err(
            "`schema_version`: unsupported value (supported: 1, the default, and 2)".to_string(),
        ),
    }
}

/// Longest `context.before`/`context.after` window, in code points: a wide
/// window costs every candidate a scan and makes a stream hold more.
pub const MAX_CONTEXT_CHARS: usize = 256;
/// Most context words of one codon, and the longest word in bytes: every
/// candidate value is looked for them in its windows, so their product
/// bounds a value's cost.
pub const MAX_CONTEXT_WORDS: usize = 64;
/// Most context words and deny-list entries of one codon.
pub const MAX_LIST_LEN: usize = 1024;

/// One codon the engine runs.
#[derive(Clone)]
pub struct Codon {
    /// `PII_SSN_EXTRACT`, `AWS_ACCESS_KEY`, …
    pub code: String,
    /// The state field it sets.
    pub binds_to: String,
    /// The state field holding its values (for `len(…)`), if any.
    pub matches_field: Option<String>,
    /// The compiled pattern.
    pub pattern: CompiledPattern,
    /// The capture group whose span is the value (`None`: the whole match).
    pub group: Option<usize>,
    /// A built-in codon's own check (Luhn, SSN exclusions); `None` otherwise.
    pub validator: Validator,
    /// The value's check digits.
    pub checksum: Option<Checksum>,
    /// Least Shannon entropy of the value, in bits per code point.
    pub min_entropy: Option<f64>,
    /// Words one of which must be near the value.
    pub context: Option<Context>,
    /// Values that do not count.
    pub deny_list: Vec<String>,
    /// The placeholder that replaces each value.
    pub remedy_template: String,
    /// The state field's description (manifest).
    pub description: String,
    /// Whether it is one of the example pack's codons.
    pub builtin: bool,
}

impl std::fmt::Debug for Codon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Patterns, words and deny lists are policy: never printed.
        f.debug_struct("Codon")
            .field("code", &self.code)
            .field("binds_to", &self.binds_to)
            .field("builtin", &self.builtin)
            .finish_non_exhaustive()
    }
}

impl Codon {
    /// Whether the codon's checks past its own pattern can drop a value: a
    /// codon without them counts every match of its pattern.
    pub fn filters(&self) -> bool {
        self.group.is_some()
            || self.checksum.is_some()
            || self.min_entropy.is_some()
            || self.context.is_some()
            || !self.deny_list.is_empty()
    }

    /// Whether the value `text[s..e]` counts ([§16.1](docs/codons.md#s16-1), in its order:
    /// checksum, entropy, deny list, context). `text` is the whole text
    /// searched, which the context looks at around the value (its two
    /// windows are indexed for this value alone).
    pub fn accepts(&self, text: &str, s: usize, e: usize) -> bool {
        self.accepts_in(text, s, e, None)
    }

    /// [`Codon::accepts`] for one of many values of the same `text`, their
    /// context checks sharing `scan` (see [`ContextScan`]); `index` is the
    /// codon's place in its program.
    pub fn accepts_scanned(
        &self,
        text: &str,
        s: usize,
        e: usize,
        (scan, index): (&mut ContextScan<'_>, usize),
    ) -> bool {
        self.accepts_in(text, s, e, Some((scan, index)))
    }

    fn accepts_in(
        &self,
        text: &str,
        s: usize,
        e: usize,
        scan: Option<(&mut ContextScan<'_>, usize)>,
    ) -> bool {
        let Some(value) = text.get(s..e) else {
            return false;
        };
        if let Some(c) = &self.checksum {
            if !c.check(value) {
                return false;
            }
        }
        if let Some(min) = self.min_entropy {
            if entropy(value) < min {
                return false;
            }
        }
        if self.deny_list.iter().any(|d| d == value) {
            return false;
        }
        match (&self.context, scan) {
            (None, _) => true,
            (Some(ctx), None) => ctx.holds(text, s, e, None),
            (Some(ctx), Some((scan, index))) => scan.holds(index, ctx, text, s, e),
        }
    }
}

/// Shannon entropy of `value` in bits per code point (0 for an empty value).
pub fn entropy(value: &str) -> f64 {
    let mut n = 0u32;
    let mut ascii = [0u32; 128];
    // Which ASCII code points occur: the terms are read for those alone,
    // in code order, not for all 128.
    let mut present = [0u64; 2];
    let mut other: Vec<(char, u32)> = Vec::new();
    for c in value.chars() {
        n += 1;
        match usize::try_from(u32::from(c)) {
            Ok(k) if k < 128 => {
                ascii[k] += 1;
                present[k / 64] |= 1 << (k % 64);
            }
            _ => match other.iter_mut().find(|(o, _)| *o == c) {
                Some((_, k)) => *k += 1,
                None => other.push((c, 1)),
            },
        }
    }
    if n == 0 {
        return 0.0;
    }
    let total = f64::from(n);
    // Most code points of a value occur once or twice: each count's term
    // is computed once (a `log2` costs tens of cycles), and the terms are
    // added in the same order, so the sum is the same to the bit.
    let mut terms = [f64::NAN; 8];
    let mut term = |k: u32| {
        let fresh = || {
            let p = f64::from(k) / total;
            -p * p.log2()
        };
        match terms.get_mut(k as usize) {
            Some(t) => {
                // A term is never NaN: 0 < p <= 1.
                if t.is_nan() {
                    *t = fresh();
                }
                *t
            }
            None => fresh(),
        }
    };
    let ascii = &ascii;
    let occurring = present.into_iter().enumerate().flat_map(|(w, mut bits)| {
        std::iter::from_fn(move || {
            let b = (bits != 0).then(|| bits.trailing_zeros() as usize)?;
            bits &= bits - 1;
            ascii.get(w * 64 + b).copied()
        })
    });
    occurring
        .chain(other.iter().map(|&(_, k)| k))
        .map(&mut term)
        .sum()
}

/// A state field a condition reads, resolved to its codons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldRef {
    /// `state.F`: index into [`Program::bool_fields`].
    Bool(usize),
    /// `len(state.M)`: index into [`Program::count_fields`].
    Count(usize),
}

/// One hard rule the engine runs.
#[derive(Debug, Clone)]
pub struct HardRule {
    /// `RULE-GLBA-SSN-BLOCK`, …
    pub id: String,
    /// Whether it is one of the example pack's hard rules (trigger `source`
    /// `builtin`; `hard_rule` otherwise).
    pub builtin: bool,
    /// FATAL (refuse) or WARNING (redact).
    pub fatal: bool,
    /// The action it decides.
    pub action: String,
    /// The decision's reason.
    pub reason: String,
    /// The condition as written (the manifest's `condition`).
    pub condition_text: String,
    /// The condition, its fields resolved.
    pub condition: Expr<FieldRef>,
    /// Codons its positive tests read, in codon order: a trigger's
    /// `codons` and `spans` are theirs that matched.
    pub reads: Vec<usize>,
    /// The manifest's `operator`.
    pub operator: Operator,
    /// Every field it reads, in order of appearance (the manifest's `factors`).
    pub factors: Vec<String>,
}

/// What a pack runs past its custom rules: codons and hard rules.
#[derive(Debug, Clone)]
pub struct Program {
    /// The playbook's schema.
    pub schema: Schema,
    /// Codons in declaration order.
    pub codons: Vec<Codon>,
    /// Hard rules in declaration order.
    pub hard_rules: Vec<HardRule>,
    /// Each boolean state field (name, the codons binding it), in codon order.
    pub bool_fields: Vec<(String, Vec<usize>)>,
    /// Each count field (name, the codons holding their values in it), in codon order.
    pub count_fields: Vec<(String, Vec<usize>)>,
}

impl Program {
    /// The example pack's six codons and four hard rules: what every
    /// version-1 pack runs.
    pub fn builtin() -> Result<Arc<Program>, String> {
        static BUILTIN: OnceLock<Result<Arc<Program>, String>> = OnceLock::new();
        BUILTIN
            .get_or_init(|| {
                let patterns = crate::declared::codon_patterns()?;
                let codons: Vec<Codon> = builtins::CODONS
                    .iter()
                    .zip(patterns)
                    .map(|(c, p)| builtin_codon(c, p))
                    .collect();
                let mut problems = Vec::new();
                let mut program = Program::with_codons(Schema::V1, codons);
                for (i, h) in builtins::HARD_RULES.iter().enumerate() {
                    let place = format!("built-in hard rule {}", h.id);
                    if let Some(rule) = program.hard_rule(
                        &place,
                        HardRuleDecl {
                            id: h.id,
                            builtin: true,
                            fatal: h.fatal,
                            action: h.action,
                            reason: h.reason,
                            condition: h.condition,
                        },
                        &mut problems,
                    ) {
                        debug_assert_eq!(program.hard_rules.len(), i);
                        program.hard_rules.push(rule);
                    }
                }
                if problems.is_empty() {
                    Ok(Arc::new(program))
                } else {
                    Err(problems.join("; "))
                }
            })
            .clone()
    }

    fn with_codons(schema: Schema, codons: Vec<Codon>) -> Self {
        let mut bool_fields: Vec<(String, Vec<usize>)> = Vec::new();
        let mut count_fields: Vec<(String, Vec<usize>)> = Vec::new();
        for (i, c) in codons.iter().enumerate() {
            add_field(&mut bool_fields, &c.binds_to, i);
            if let Some(m) = &c.matches_field {
                add_field(&mut count_fields, m, i);
            }
        }
        Program {
            schema,
            codons,
            hard_rules: Vec::new(),
            bool_fields,
            count_fields,
        }
    }

    /// Whether the incremental stream engine runs this program as it runs
    /// the example pack's ([§11.1](docs/streaming.md#s11-1)): every codon's value is settled when
    /// its match is final (a group, a checksum, an entropy floor, a deny
    /// list and a `context.before` window are) or once the `context.after`
    /// code points after it have arrived (the session holds the value until
    /// then), every codon is read by exactly one hard rule,
    /// and every hard rule is a disjunction of boolean tests (`is_true`,
    /// `any_true`), so it holds exactly when one of its codons matched and
    /// each match is redacted or blocks by that rule. Any other program is
    /// streamed whole (held, then judged at the end).
    pub fn streams_natively(&self) -> bool {
        let disjunctions = self
            .hard_rules
            .iter()
            .all(|h| matches!(h.operator, Operator::IsTrue | Operator::AnyTrue));
        let read_once = (0..self.codons.len()).all(|c| {
            self.hard_rules
                .iter()
                .filter(|h| h.reads.contains(&c))
                .count()
                == 1
        });
        disjunctions && read_once
    }

    /// Resolves and checks one hard rule's condition against the codons.
    fn hard_rule(
        &self,
        place: &str,
        d: HardRuleDecl<'_>,
        problems: &mut Vec<String>,
    ) -> Option<HardRule> {
        let parsed = match condition::parse(d.condition) {
            Ok(e) => e,
            Err(e) => {
                problems.push(format!("{place}: `condition` {e}"));
                return None;
            }
        };
        // Every problem of the condition at once: its form, then its fields.
        let positive = parsed.check_positive();
        if let Err(why) = &positive {
            problems.push(format!("{place}: `condition` {why}"));
        }
        let operator = parsed.operator();
        let factors: Vec<String> = parsed
            .fields()
            .into_iter()
            .map(|(f, _)| f.clone())
            .collect();
        let resolved = parsed.try_map(&mut |name: String, kind: FieldKind| match kind {
            FieldKind::Bool => self
                .bool_fields
                .iter()
                .position(|(f, _)| *f == name)
                .map(FieldRef::Bool)
                .ok_or_else(|| {
                    format!("{place}: `condition` reads `state.{name}`, which no codon binds (`binds_to`)")
                }),
            FieldKind::Count => self
                .count_fields
                .iter()
                .position(|(f, _)| *f == name)
                .map(FieldRef::Count)
                .ok_or_else(|| {
                    format!("{place}: `condition` reads `len(state.{name})`, which is no codon's `matches_field`")
                }),
        });
        let condition = match resolved {
            Ok(c) if positive.is_ok() => c,
            Ok(_) => return None,
            Err(errs) => {
                problems.extend(errs);
                return None;
            }
        };
        let mut reads: Vec<usize> = Vec::new();
        for f in condition.positive_fields() {
            let codons = match *f {
                FieldRef::Bool(k) => &self.bool_fields[k].1,
                FieldRef::Count(k) => &self.count_fields[k].1,
            };
            reads.extend(codons);
        }
        reads.sort_unstable();
        reads.dedup();
        Some(HardRule {
            id: d.id.to_string(),
            builtin: d.builtin,
            fatal: d.fatal,
            action: d.action.to_string(),
            reason: if d.reason.is_empty() && !d.builtin {
                default_reason(d.id)
            } else {
                d.reason.to_string()
            },
            condition_text: d.condition.to_string(),
            condition,
            reads,
            operator,
            factors,
        })
    }

    /// The count fields some hard rule reads (the manifest lists those).
    pub fn count_fields_read(&self) -> Vec<&str> {
        self.count_fields
            .iter()
            .enumerate()
            .filter(|(k, _)| {
                self.hard_rules
                    .iter()
                    .any(|h| reads_field(&h.condition, FieldRef::Count(*k)))
            })
            .map(|(_, (name, _))| name.as_str())
            .collect()
    }
}

fn reads_field(e: &Expr<FieldRef>, want: FieldRef) -> bool {
    match e {
        Expr::Or(xs) | Expr::And(xs) => xs.iter().any(|x| reads_field(x, want)),
        Expr::Not(x) => reads_field(x, want),
        Expr::Field { field, .. } | Expr::Count { field, .. } => *field == want,
    }
}

fn add_field(fields: &mut Vec<(String, Vec<usize>)>, name: &str, codon: usize) {
    match fields.iter_mut().find(|(f, _)| f == name) {
        Some((_, codons)) => codons.push(codon),
        None => fields.push((name.to_string(), vec![codon])),
    }
}

/// A hard rule's declaration, borrowed from a playbook or the built-ins.
struct HardRuleDecl<'a> {
    id: &'a str,
    builtin: bool,
    fatal: bool,
    action: &'a str,
    reason: &'a str,
    condition: &'a str,
}

fn builtin_codon(c: &builtins::Codon, p: &CompiledPattern) -> Codon {
    let matches_field = builtins::reference()
        .codons
        .get(c.code)
        .and_then(|e| e.get("matches_field"))
        .and_then(Value::as_str)
        .map(str::to_string);
    Codon {
        code: c.code.to_string(),
        binds_to: c.binds.to_string(),
        matches_field,
        pattern: p.clone(),
        group: None,
        validator: c.validator,
        checksum: None,
        min_entropy: None,
        context: None,
        deny_list: Vec::new(),
        remedy_template: c.placeholder.to_string(),
        description: c.description.to_string(),
        builtin: true,
    }
}

/// Keys a version-2 codon entry may have ([§16.1](docs/codons.md#s16-1)).
const CODON_KEYS: [&str; 13] = [
    "code",
    "codon_type",
    "kind",
    "trigger",
    "params",
    "checksum",
    "min_entropy",
    "context",
    "deny_list",
    "binds_to",
    "matches_field",
    "remedy_template",
    "description",
];
/// Keys of a codon's `params`.
const PARAM_KEYS: [&str; 3] = ["pattern", "flags", "group"];
/// Keys of a codon's `context`.
const CONTEXT_KEYS: [&str; 3] = ["words", "before", "after"];
/// Actions the runtime decides itself, which no hard rule may take.
const RESERVED_ACTIONS: [&str; 3] = [
    crate::engine::PERMIT_ACTION,
    crate::engine::HOLDBACK_ACTION,
    crate::engine::COST_ACTION,
];

/// Keys a version-2 hard rule entry may have ([§16.3](docs/codons.md#s16-3)).
const HARD_RULE_KEYS: [&str; 5] = ["id", "condition", "action", "severity", "description"];

/// Records each key of `m` that is not one of `allowed` (a typo must not
/// silently weaken a check), named with its `prefix` (`params.`).
fn unknown_keys(
    m: &Map<String, Value>,
    allowed: &[&str],
    prefix: &str,
    place: &str,
    problems: &mut Vec<String>,
) {
    for k in m.keys().filter(|k| !allowed.contains(&k.as_str())) {
        problems.push(format!(
            "{place}: unknown key `{prefix}{k}` (keys: {})",
            allowed.join(", ")
        ));
    }
}

/// The strings of a list of at most [`MAX_LIST_LEN`] strings, each
/// non-empty when `non_empty`; `None` for anything else.
fn string_list(v: &Value, non_empty: bool) -> Option<Vec<String>> {
    let items = v.as_array().filter(|a| a.len() <= MAX_LIST_LEN)?;
    items
        .iter()
        .map(|w| {
            w.as_str()
                .filter(|s| !(non_empty && s.is_empty()))
                .map(str::to_string)
        })
        .collect()
}

/// Whether `s` is `[a-z][a-z0-9_]*`.
pub fn is_field_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some('a'..='z')) && c.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_'))
}

fn is_code(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some('A'..='Z')) && c.all(|c| matches!(c, 'A'..='Z' | '0'..='9' | '_'))
}

/// Checks the `codons` and `hard_rules` of a version-2 playbook and builds
/// its program; every problem goes to `problems`, named by its place.
/// `rule_ids` are the custom rules' ids (a hard rule id must differ).
pub fn check_v2(
    doc: &Map<String, Value>,
    rule_ids: &[&str],
    problems: &mut Vec<String>,
) -> Option<Program> {
    let reference = builtins::reference();
    let before = problems.len();
    let mut codons = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, entry) in list(doc, "codons").iter().enumerate() {
        if let Some(c) = check_codon(i, entry, &reference.codons, &mut seen, problems) {
            codons.push(c);
        }
    }
    let codons_ok = problems.len() == before;
    let mut program = Program::with_codons(Schema::V2, codons);
    for (name, _) in &program.count_fields {
        if program.bool_fields.iter().any(|(b, _)| b == name) {
            problems.push(format!(
                "codons: `{name}` is both a `binds_to` and a `matches_field`; a state field is one or the other"
            ));
        }
    }
    let mut seen_rules: HashMap<String, usize> = HashMap::new();
    for (i, entry) in list(doc, "hard_rules").iter().enumerate() {
        let Value::Object(m) = entry else {
            problems.push(format!("hard_rules[{i}]: is not a mapping"));
            continue;
        };
        let id = match m.get("id") {
            Some(Value::String(s)) if !s.is_empty() => s.as_str(),
            Some(_) => {
                problems.push(format!("hard_rules[{i}]: `id` is not a non-empty string"));
                continue;
            }
            None => {
                problems.push(format!("hard_rules[{i}]: missing `id`"));
                continue;
            }
        };
        let place = format!("hard_rules[{i}] (id `{id}`)");
        if let Some(first) = seen_rules.get(id) {
            problems.push(format!(
                "{place}: declared twice, first at hard_rules[{first}]"
            ));
            continue;
        }
        seen_rules.insert(id.to_string(), i);
        if rule_ids.contains(&id) {
            problems.push(format!(
                "{place}: `id` is also a custom rule's id; ids are unique among rules and hard rules"
            ));
        }
        let decl = match reference.hard_rules.get(id) {
            Some(builtin) => {
                if m.len() > 1 && !crate::declared::same_data(builtin, entry) {
                    problems.push(format!(
                        "{place}: differs from the built-in hard rule {id}; declare it by `id` alone, or give your own hard rule another id"
                    ));
                    continue;
                }
                let Some(h) = builtins::HARD_RULES.iter().find(|h| h.id == id) else {
                    continue;
                };
                HardRuleDecl {
                    id,
                    builtin: true,
                    fatal: h.fatal,
                    action: h.action,
                    reason: h.reason,
                    // The reference entry's own text, which the manifest shows.
                    condition: builtin
                        .get("condition")
                        .and_then(Value::as_str)
                        .unwrap_or(h.condition),
                }
            }
            None => {
                let Some(d) = custom_hard_rule(&place, m, problems) else {
                    continue;
                };
                d
            }
        };
        if !codons_ok {
            // Conditions resolve against the codons: with a broken codon,
            // every field it binds would be reported missing as well.
            continue;
        }
        if let Some(rule) = program.hard_rule(&place, decl, problems) {
            program.hard_rules.push(rule);
        }
    }
    (problems.len() == before).then_some(program)
}

fn custom_hard_rule<'a>(
    place: &str,
    m: &'a Map<String, Value>,
    problems: &mut Vec<String>,
) -> Option<HardRuleDecl<'a>> {
    let before = problems.len();
    unknown_keys(m, &HARD_RULE_KEYS, "", place, problems);
    let string = |key: &str, problems: &mut Vec<String>| -> Option<&'a str> {
        match m.get(key) {
            Some(Value::String(s)) => Some(s.as_str()),
            Some(_) => {
                problems.push(format!("{place}: `{key}` is not a string"));
                None
            }
            None => {
                problems.push(format!("{place}: missing `{key}`"));
                None
            }
        }
    };
    let condition = string("condition", problems);
    let action = string("action", problems);
    if let Some(a) = action {
        if !is_field_name(a) {
            problems.push(format!(
                "{place}: `action` `{a}` must match [a-z][a-z0-9_]*"
            ));
        } else if RESERVED_ACTIONS.contains(&a) {
            // A client reading the action must never mistake a block for
            // a clean payload or for the stream's own limits.
            problems.push(format!(
                "{place}: `action` `{a}` is reserved (reserved: {})",
                RESERVED_ACTIONS.join(", ")
            ));
        }
    }
    let fatal = match string("severity", problems) {
        Some("fatal") => Some(true),
        Some("warning") => Some(false),
        Some(other) => {
            problems.push(format!(
                "{place}: unsupported severity `{other}` (supported: fatal, warning)"
            ));
            None
        }
        None => None,
    };
    let reason = match m.get("description") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => {
            problems.push(format!("{place}: `description` is not a string"));
            None
        }
    };
    if problems.len() != before {
        return None;
    }
    let id = m.get("id").and_then(Value::as_str)?;
    Some(HardRuleDecl {
        id,
        builtin: false,
        fatal: fatal?,
        action: action?,
        // Owned default reasons are built by the caller's program; an
        // absent description reads "Hard rule <id> matched".
        reason: reason.unwrap_or(""),
        condition: condition?,
    })
}

fn check_codon(
    i: usize,
    entry: &Value,
    reference: &Map<String, Value>,
    seen: &mut HashMap<String, usize>,
    problems: &mut Vec<String>,
) -> Option<Codon> {
    let Value::Object(m) = entry else {
        problems.push(format!("codons[{i}]: is not a mapping"));
        return None;
    };
    let code = match m.get("code") {
        Some(Value::String(s)) if is_code(s) => s.as_str(),
        Some(Value::String(s)) => {
            problems.push(format!(
                "codons[{i}]: `code` `{s}` must match [A-Z][A-Z0-9_]*"
            ));
            return None;
        }
        Some(_) => {
            problems.push(format!("codons[{i}]: `code` is not a string"));
            return None;
        }
        None => {
            problems.push(format!("codons[{i}]: missing `code`"));
            return None;
        }
    };
    let place = format!("codons[{i}] (code `{code}`)");
    if let Some(first) = seen.get(code) {
        problems.push(format!("{place}: declared twice, first at codons[{first}]"));
        return None;
    }
    seen.insert(code.to_string(), i);
    if let Some(builtin) = reference.get(code) {
        if m.len() > 1 && !crate::declared::same_data(builtin, entry) {
            problems.push(format!(
                "{place}: differs from the built-in codon {code}; declare it by `code` alone, or give your own codon another code"
            ));
            return None;
        }
        let k = builtins::CODONS.iter().position(|c| c.code == code)?;
        let patterns = match crate::declared::codon_patterns() {
            Ok(p) => p,
            Err(e) => {
                problems.push(e);
                return None;
            }
        };
        return Some(builtin_codon(&builtins::CODONS[k], &patterns[k]));
    }
    custom_codon(&place, m, problems)
}

fn custom_codon(place: &str, m: &Map<String, Value>, problems: &mut Vec<String>) -> Option<Codon> {
    let before = problems.len();
    let code = m.get("code").and_then(Value::as_str).unwrap_or_default();
    unknown_keys(m, &CODON_KEYS, "", place, problems);
    match m.get("codon_type") {
        Some(Value::String(s)) if s == "extract_pattern" => {}
        Some(Value::String(s)) => problems.push(format!(
            "{place}: unsupported codon_type `{s}` (supported: extract_pattern)"
        )),
        Some(_) => problems.push(format!("{place}: `codon_type` is not a string")),
        None => problems.push(format!(
            "{place}: missing `codon_type` (a codon of your own is `extract_pattern`)"
        )),
    }
    for (key, only) in [("kind", "codon"), ("trigger", "on_input")] {
        match m.get(key) {
            None => {}
            Some(Value::String(s)) if s == only => {}
            Some(_) => problems.push(format!("{place}: `{key}` must be `{only}`")),
        }
    }
    let field = |key: &str, required: bool, problems: &mut Vec<String>| -> Option<String> {
        match m.get(key) {
            Some(Value::String(s)) if is_field_name(s) => Some(s.clone()),
            Some(Value::String(s)) => {
                problems.push(format!("{place}: `{key}` `{s}` must match [a-z][a-z0-9_]*"));
                None
            }
            Some(_) => {
                problems.push(format!("{place}: `{key}` is not a string"));
                None
            }
            None if required => {
                problems.push(format!("{place}: missing `{key}`"));
                None
            }
            None => None,
        }
    };
    let binds_to = field("binds_to", true, problems);
    let matches_field = field("matches_field", false, problems);
    let remedy_template = match m.get("remedy_template") {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(_) => {
            problems.push(format!(
                "{place}: `remedy_template` is not a non-empty string"
            ));
            None
        }
        None => {
            problems.push(format!("{place}: missing `remedy_template`"));
            None
        }
    };
    let description = match m.get("description") {
        None | Some(Value::Null) => format!("{code} matched"),
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            problems.push(format!("{place}: `description` is not a string"));
            String::new()
        }
    };
    let checksum = match m.get("checksum") {
        None | Some(Value::Null) => None,
        Some(v) => match serde_yaml::to_value(v)
            .map_err(|e| e.to_string())
            .and_then(|y| Checksum::from_yaml(&y))
        {
            Ok(c) => Some(c),
            Err(why) => {
                problems.push(format!("{place}: {}", with_key("checksum", &why)));
                None
            }
        },
    };
    let min_entropy = match m.get("min_entropy") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) if n.as_f64().is_some_and(|x| x > 0.0 && x.is_finite()) => {
            n.as_f64()
        }
        Some(_) => {
            problems.push(format!("{place}: `min_entropy` must be a number above 0"));
            None
        }
    };
    let context = m
        .get("context")
        .and_then(|v| check_context(place, v, problems));
    let deny_list = match m
        .get("deny_list")
        .filter(|v| !v.is_null())
        .map(|v| string_list(v, false))
    {
        None => Vec::new(),
        Some(Some(values)) => values,
        Some(None) => {
            problems.push(format!(
                "{place}: `deny_list` must be a list of at most {MAX_LIST_LEN} strings"
            ));
            Vec::new()
        }
    };
    let (pattern, group) = match m.get("params") {
        Some(Value::Object(params)) => check_params(place, params, problems),
        Some(_) => {
            problems.push(format!("{place}: `params` is not a mapping"));
            (None, None)
        }
        None => {
            problems.push(format!("{place}: missing `params.pattern`"));
            (None, None)
        }
    };
    if problems.len() != before {
        return None;
    }
    Some(Codon {
        code: code.to_string(),
        binds_to: binds_to?,
        matches_field,
        pattern: pattern?,
        group,
        validator: Validator::None,
        checksum,
        min_entropy,
        context,
        deny_list,
        remedy_template: remedy_template?,
        description,
        builtin: false,
    })
}

/// `why` from the checksum module starts with its own key in backticks;
/// anything else gets one.
fn with_key(key: &str, why: &str) -> String {
    if why.starts_with('`') {
        why.to_string()
    } else {
        format!("`{key}`: {why}")
    }
}

fn check_context(place: &str, v: &Value, problems: &mut Vec<String>) -> Option<Context> {
    let Value::Object(m) = v else {
        problems.push(format!(
            "{place}: `context` is not a mapping ({{words: [...], before: n, after: n}})"
        ));
        return None;
    };
    let before = problems.len();
    unknown_keys(m, &CONTEXT_KEYS, "context.", place, problems);
    let words = match m.get("words").map(|v| string_list(v, true)) {
        Some(Some(words))
            if !words.is_empty()
                && words.len() <= MAX_CONTEXT_WORDS
                && words.iter().all(|w| w.len() <= MAX_CONTEXT_WORDS) =>
        {
            words
        }
        Some(_) => {
            problems.push(format!(
                "{place}: `context.words` must be a list of 1 to {MAX_CONTEXT_WORDS} non-empty strings of at most {MAX_CONTEXT_WORDS} bytes"
            ));
            Vec::new()
        }
        None => {
            problems.push(format!("{place}: missing `context.words`"));
            Vec::new()
        }
    };
    let mut window = |key: &str, default: usize| -> usize {
        match m.get(key) {
            None | Some(Value::Null) => default,
            Some(Value::Number(n)) if n.as_u64().is_some_and(|x| x <= MAX_CONTEXT_CHARS as u64) => {
                n.as_u64()
                    .and_then(|x| usize::try_from(x).ok())
                    .unwrap_or(default)
            }
            Some(_) => {
                problems.push(format!(
                    "{place}: `context.{key}` must be an integer from 0 to {MAX_CONTEXT_CHARS}"
                ));
                default
            }
        }
    };
    let (b, a) = (window("before", 32), window("after", 0));
    if problems.len() != before {
        return None;
    }
    let ctx = Context::new(words, b, a);
    if ctx.is_none() {
        problems.push(format!("{place}: `context.words` cannot be compiled"));
    }
    ctx
}

fn check_params(
    place: &str,
    params: &Map<String, Value>,
    problems: &mut Vec<String>,
) -> (Option<CompiledPattern>, Option<usize>) {
    unknown_keys(params, &PARAM_KEYS, "params.", place, problems);
    let flags = crate::declared::read_flags(params.get("flags"), place, "params.flags", problems);
    let pattern = crate::declared::compile_pattern(
        params.get("pattern"),
        &flags,
        place,
        "params.pattern",
        problems,
    );
    let Some(pattern) = pattern else {
        return (None, None);
    };
    let info = pattern.exact.group_info();
    let groups = info.group_len(PatternID::ZERO);
    let group = match params.get("group") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match n.as_u64().and_then(|g| usize::try_from(g).ok()) {
            Some(g) if g >= 1 && g < groups => Some(g),
            _ => {
                problems.push(format!(
                    "{place}: `params.group` {n} is not a capture group of the pattern (it has {})",
                    groups.saturating_sub(1)
                ));
                None
            }
        },
        Some(Value::String(name)) => match info.to_index(PatternID::ZERO, name) {
            Some(g) => Some(g),
            None => {
                problems.push(format!(
                    "{place}: `params.group` `{name}` is not a named group of the pattern"
                ));
                None
            }
        },
        Some(_) => {
            problems.push(format!(
                "{place}: `params.group` must be a group number (1 or more) or a group name"
            ));
            None
        }
    };
    (Some(pattern), group)
}

/// The default reason of a hard rule with no `description`.
pub fn default_reason(id: &str) -> String {
    format!("Hard rule {id} matched")
}

/// Patterns of every codon, for the pack's cost check ([§11.4](docs/limits.md#s11-4)).
pub fn patterns(program: &Program) -> impl Iterator<Item = &CompiledPattern> {
    program.codons.iter().map(|c| &c.pattern)
}

#[cfg(test)]
mod tests;
