//! Declarations ([§4.2](docs/formats.md#s4-2) step 6, [§5](docs/formats.md#s5) step 7): checks every custom rule,
//! codon and hard rule of a playbook and compiles the custom rules' patterns,
//! gathering every problem into one `UnsupportedPackDeclarationError`.

use crate::builtins;
use crate::declared::{compile_pattern, read_flags, same_data};
use crate::pattern::{self, cost, CompiledPattern};
use crate::playbook::{list, PlaybookError};
use crate::program::{self, Program, Schema};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// What a custom rule does when it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleAction {
    /// FATAL: the payload is blocked.
    Block,
    /// WARNING: matches are replaced by the rule's placeholder.
    Redact,
}

impl RuleAction {
    /// Every action, in the order error messages list them.
    pub const ALL: [Self; 2] = [Self::Block, Self::Redact];

    /// As written in a playbook.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Block => "block",
            Self::Redact => "redact",
        }
    }
}

/// A custom rule's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleType {
    /// Every match counts.
    Regex,
    /// A match counts only when its digits pass Luhn.
    LuhnChecksum,
}

impl RuleType {
    /// Every type, in the order error messages list them.
    pub const ALL: [Self; 2] = [Self::Regex, Self::LuhnChecksum];

    /// As written in a playbook.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Regex => "regex",
            Self::LuhnChecksum => "luhn_checksum",
        }
    }
}

/// A validated, compiled custom rule.
#[derive(Debug, Clone)]
pub struct CustomRule {
    /// The rule id.
    pub id: String,
    /// Its type.
    pub rule_type: RuleType,
    /// Its action.
    pub action: RuleAction,
    /// Its description, if any.
    pub description: Option<String>,
    /// The compiled pattern.
    pub pattern: CompiledPattern,
}

impl CustomRule {
    /// `block_<id>` or `redact_<id>` ([§6.1](docs/evaluation.md#s6-1)).
    pub fn action_name(&self) -> String {
        format!("{}_{}", self.action.as_str(), self.id)
    }
}

/// Whether `id` is lower snake case (otherwise the compiler warns).
pub fn is_snake_case(id: &str) -> bool {
    let mut chars = id.chars();
    matches!(chars.next(), Some('a'..='z'))
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_'))
}

/// What a playbook declares, checked and compiled: its custom rules and
/// the program (codons and hard rules) the engine runs beside them.
#[derive(Debug, Clone)]
pub struct Declarations {
    /// Custom rules in file order.
    pub rules: Vec<CustomRule>,
    /// The example pack's codons and hard rules (version 1), or exactly the
    /// declared ones (version 2, [§16](docs/codons.md#s16)).
    pub program: Arc<Program>,
}

/// Checks every declaration of `doc` and compiles its custom rules; on any
/// problem, one `Unsupported` error listing all of them. `name` labels the
/// file. Only the custom rules: the codons and hard rules a version-2
/// playbook declares run through [`CompiledPlaybook::evaluator`](crate::CompiledPlaybook::evaluator).
pub fn check_declarations(
    doc: &Map<String, Value>,
    name: &str,
) -> Result<Vec<CustomRule>, PlaybookError> {
    declarations(doc, name).map(|d| d.rules)
}

/// Checks every declaration of `doc` ([§4.2](docs/formats.md#s4-2) step 6, [§16](docs/codons.md#s16)): custom rules,
/// `schema_version`, codons and hard rules, and the pack's cost; on any
/// problem, one `Unsupported` error listing all of them.
pub fn declarations(doc: &Map<String, Value>, name: &str) -> Result<Declarations, PlaybookError> {
    let mut problems = Vec::new();
    let mut rules = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, entry) in list(doc, "rules").iter().enumerate() {
        if let Some(rule) = check_rule(i, entry, &mut seen, &mut problems) {
            rules.push(rule);
        }
    }
    let program = match program::schema_of(doc) {
        Err(why) => {
            problems.push(why);
            None
        }
        Ok(Schema::V1) => {
            let reference = builtins::reference();
            check_builtin_list(
                doc,
                "codons",
                "code",
                "codon",
                &reference.codons,
                &mut problems,
            );
            check_builtin_list(
                doc,
                "hard_rules",
                "id",
                "hard rule",
                &reference.hard_rules,
                &mut problems,
            );
            match Program::builtin() {
                Ok(p) => Some(p),
                Err(e) => {
                    problems.push(e);
                    None
                }
            }
        }
        Ok(Schema::V2) => {
            let ids: Vec<&str> = list(doc, "rules")
                .iter()
                .filter_map(|r| r.get("id").and_then(Value::as_str))
                .collect();
            program::check_v2(doc, &ids, &mut problems).map(Arc::new)
        }
    };
    if let (true, Some(program)) = (problems.is_empty(), &program) {
        check_pack_cost(&rules, program, &mut problems);
    }
    match program {
        Some(program) if problems.is_empty() => Ok(Declarations { rules, program }),
        _ => {
            let n = problems.len().max(1);
            Err(PlaybookError::Unsupported {
                summary: format!(
                    "{name}: {n} declaration problem{} the engine cannot execute",
                    if n == 1 { "" } else { "s" }
                ),
                problems,
            })
        }
    }
}

/// Rules listed by name in a pack's cost problem, costliest first.
const COSTLIEST_NAMED: usize = 3;

/// [§11.4](docs/limits.md#s11-4) for the pack as a whole: its custom rules and its codons
/// run over the same payload, so their costs add up. Each rule passed alone
/// ([`pattern::check_cost`]); a pack that breaks the limit together gets one
/// problem naming its costliest rules and codons.
fn check_pack_cost(rules: &[CustomRule], program: &Program, problems: &mut Vec<String>) {
    if rules.is_empty() && program.schema == Schema::V1 {
        // The built-in codons alone are within the limit (a test holds them to it).
        return;
    }
    let patterns: Vec<&CompiledPattern> = rules
        .iter()
        .map(|r| &r.pattern)
        .chain(program::patterns(program))
        .collect();
    if patterns.is_empty() {
        return;
    }
    let place = |i: usize| match rules.get(i) {
        Some(r) => format!("rules[{i}] (id `{}`)", r.id),
        None => {
            let c = i - rules.len();
            match program.schema {
                Schema::V1 => format!(
                    "codon {}",
                    program.codons.get(c).map_or("?", |c| c.code.as_str())
                ),
                Schema::V2 => format!(
                    "codons[{c}] (code `{}`)",
                    program.codons.get(c).map_or("?", |c| c.code.as_str())
                ),
            }
        }
    };
    // Version-1 packs name only their custom rules (the codons are fixed);
    // a version-2 pack's codons are its own, so they are named too.
    let named = |i: usize| i < rules.len() || program.schema == Schema::V2;
    match pattern::check_pack_cost(&patterns) {
        Ok(_) => {}
        Err(cost::PackCostError::Pattern { index, why }) => problems.push(format!(
            "{}: `pattern` {why} (on a probe text of another rule or codon of the pack)",
            place(index)
        )),
        Err(cost::PackCostError::Together(c)) => {
            let mut by_cost: Vec<(usize, usize)> = c
                .shares
                .iter()
                .copied()
                .enumerate()
                .filter(|&(i, ns)| named(i) && ns > 0)
                .collect();
            by_cost.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let named: Vec<String> = by_cost
                .iter()
                .take(COSTLIEST_NAMED)
                .map(|&(i, ns)| format!("{} ({ns} ns per byte)", place(i)))
                .collect();
            let more = by_cost.len().saturating_sub(COSTLIEST_NAMED);
            problems.push(format!(
                "the pack's rules and codons together are too costly to evaluate (SPEC §11.4): on an adversarial text the engine would spend about {} ns per byte on them (at most {}: 100 ms for 1 MiB); its costliest rules: {}{}",
                c.ns_per_byte,
                cost::MAX_NS_PER_BYTE,
                named.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            ));
        }
    }
}

fn check_rule(
    i: usize,
    entry: &Value,
    seen: &mut HashMap<String, usize>,
    problems: &mut Vec<String>,
) -> Option<CustomRule> {
    let Value::Object(rule) = entry else {
        problems.push(format!("rules[{i}]: is not a mapping"));
        return None;
    };
    let id = match rule.get("id") {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(Value::String(_)) => {
            problems.push(format!("rules[{i}]: `id` is empty"));
            None
        }
        Some(_) => {
            problems.push(format!("rules[{i}]: `id` is not a string"));
            None
        }
        None => {
            problems.push(format!("rules[{i}]: missing `id`"));
            None
        }
    };
    let place = match &id {
        Some(id) => format!("rules[{i}] (id `{id}`)"),
        None => format!("rules[{i}]"),
    };
    let before = problems.len();
    if let Some(id) = &id {
        if let Some(first) = seen.get(id) {
            problems.push(format!(
                "{place}: duplicate id, first declared at rules[{first}]"
            ));
        } else {
            seen.insert(id.clone(), i);
        }
    }
    let rule_type = choice(
        rule,
        "type",
        &RuleType::ALL,
        RuleType::as_str,
        &place,
        problems,
    );
    let action = choice(
        rule,
        "action",
        &RuleAction::ALL,
        RuleAction::as_str,
        &place,
        problems,
    );
    let description = match rule.get("description") {
        None | Some(Value::Null) => None,
        Some(Value::String(d)) => Some(d.clone()),
        Some(_) => {
            problems.push(format!("{place}: `description` is not a string"));
            None
        }
    };
    let flags = read_flags(rule.get("flags"), &place, "flags", problems);
    let pattern = compile_pattern(rule.get("pattern"), &flags, &place, "pattern", problems);
    if problems.len() != before {
        return None;
    }
    Some(CustomRule {
        id: id?,
        rule_type: rule_type?,
        action: action?,
        description,
        pattern: pattern?,
    })
}

/// Reads `key` as one of `options` (by their playbook names), recording
/// what is wrong with it otherwise.
fn choice<T: Copy>(
    rule: &Map<String, Value>,
    key: &str,
    options: &[T],
    name: fn(T) -> &'static str,
    place: &str,
    problems: &mut Vec<String>,
) -> Option<T> {
    match rule.get(key) {
        Some(Value::String(v)) => {
            let found = options.iter().copied().find(|&o| name(o) == v);
            if found.is_none() {
                let supported: Vec<&str> = options.iter().map(|&o| name(o)).collect();
                problems.push(format!(
                    "{place}: unsupported {key} `{v}` (supported: {})",
                    supported.join(", ")
                ));
            }
            found
        }
        Some(_) => {
            problems.push(format!("{place}: `{key}` is not a string"));
            None
        }
        None => {
            problems.push(format!("{place}: missing `{key}`"));
            None
        }
    }
}

fn check_builtin_list(
    doc: &Map<String, Value>,
    key: &str,
    id_field: &str,
    what: &str,
    reference: &Map<String, Value>,
    problems: &mut Vec<String>,
) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, entry) in list(doc, key).iter().enumerate() {
        let Some(id) = entry.get(id_field).and_then(Value::as_str) else {
            problems.push(format!(
                "{key}[{i}]: not a built-in {what} (no string `{id_field}`)"
            ));
            continue;
        };
        let place = format!("{key}[{i}] ({id_field} `{id}`)");
        match reference.get(id) {
            None => problems.push(format!(
                "{place}: not one of the example pack's built-in {what}s; custom {what}s are not supported in 0.2.1"
            )),
            Some(builtin) if !same_data(builtin, entry) => problems.push(format!(
                "{place}: differs from the built-in {what}; only unchanged built-in {what}s are supported"
            )),
            Some(_) => {}
        }
        if let Some(first) = seen.get(id) {
            problems.push(format!("{place}: declared twice, first at {key}[{first}]"));
        } else {
            seen.insert(id.to_string(), i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::playbook::parse_document;

    fn problems(yaml: &str) -> Vec<String> {
        let d = parse_document(yaml.as_bytes(), "p.yaml").unwrap();
        match check_declarations(&d.doc, "p.yaml") {
            Err(PlaybookError::Unsupported { problems, .. }) => problems,
            other => panic!("expected Unsupported, got {other:?}"),
        }
    }

    #[test]
    fn every_rule_problem_is_listed() {
        let p = problems(
            "pack_id: p\nrules:\n  - id: a\n    type: regex\n    pattern: 'x(?=y)'\n    action: block\n  - id: a\n    type: glob\n    pattern: x\n    action: block\n  - type: regex\n    pattern: x\n    action: block\n  - id: d\n    type: regex\n    action: allow\n  - 7\n",
        );
        assert_eq!(p.len(), 7, "{p:#?}");
        assert!(p[0].starts_with(
            "rules[0] (id `a`): `pattern` is not a valid regular expression: look-around"
        ));
        assert_eq!(
            p[1],
            "rules[1] (id `a`): duplicate id, first declared at rules[0]"
        );
        assert_eq!(
            p[2],
            "rules[1] (id `a`): unsupported type `glob` (supported: regex, luhn_checksum)"
        );
        assert_eq!(p[3], "rules[2]: missing `id`");
        assert!(p[4].starts_with("rules[3] (id `d`): unsupported action `allow`"));
        assert_eq!(p[5], "rules[3] (id `d`): missing `pattern`");
        assert_eq!(p[6], "rules[4]: is not a mapping");
    }

    #[test]
    fn costly_patterns_are_refused_by_rule_id() {
        let p = problems(
            "pack_id: p\nrules:\n  - {id: nested, type: regex, pattern: '(a{1,100}){1,100}b', action: block}\n  - {id: fine, type: regex, pattern: 'TCK-[0-9]{6}', action: block}\n  - {id: rescan, type: regex, pattern: '[a-z]+X|[a-z]{100}', action: redact}\n",
        );
        assert_eq!(p.len(), 2, "{p:#?}");
        assert!(p[0].starts_with("rules[0] (id `nested`): `pattern` is too costly to evaluate"));
        assert!(p[1].starts_with("rules[2] (id `rescan`): `pattern` is too costly to evaluate"));
        assert!(p.iter().all(|m| !m.contains("a{1") && !m.contains("[a-z]")));
    }

    #[test]
    fn builtins_only_unchanged_and_once() {
        let example = crate::builtins::EXAMPLE_PLAYBOOK_YAML;
        let d = parse_document(example.as_bytes(), "ex").unwrap();
        assert!(check_declarations(&d.doc, "ex").unwrap().is_empty());
        let changed = example.replacen("severity: fatal", "severity: warning", 1);
        let p = problems(&changed);
        assert_eq!(p, vec!["hard_rules[0] (id `RULE-GLBA-SSN-BLOCK`): differs from the built-in hard rule; only unchanged built-in hard rules are supported"]);
        let p = problems(
            "pack_id: p\nhard_rules:\n  - id: MY-RULE\n    condition: x\ncodons: [{code: PII_X}]\n",
        );
        assert_eq!(p.len(), 2);
        assert!(p[0].starts_with("codons[0] (code `PII_X`): not one of"));
        assert!(p[1].starts_with("hard_rules[0] (id `MY-RULE`): not one of"));
    }

    /// [§11.4](docs/limits.md#s11-4): ten rules that each pass alone (each matches every `x`)
    /// make one pack that would spend ten times as long on a run of `x`.
    #[test]
    fn rules_that_are_cheap_alone_are_refused_together_naming_the_costliest() {
        let mut yaml = String::from("pack_id: p\nrules:\n");
        for i in 0..10 {
            yaml.push_str(&format!(
                "  - {{id: x{i}, type: regex, pattern: 'x', action: redact}}\n"
            ));
        }
        let p = problems(&yaml);
        assert_eq!(
            p,
            vec![
                "the pack's rules and codons together are too costly to evaluate (SPEC §11.4): on an adversarial text the engine would spend about 646 ns per byte on them (at most 95: 100 ms for 1 MiB); its costliest rules: rules[0] (id `x0`) (64 ns per byte), rules[1] (id `x1`) (64 ns per byte), rules[2] (id `x2`) (64 ns per byte) and 7 more"
            ]
        );
        // One of them alone is a pack that costs what it costs alone.
        let one = "pack_id: p\nrules:\n  - {id: x0, type: regex, pattern: 'x', action: redact}\n";
        let d = parse_document(one.as_bytes(), "p.yaml").unwrap();
        assert_eq!(check_declarations(&d.doc, "p.yaml").unwrap().len(), 1);
        // So are rules on different letters: no text makes them all match.
        let xyz = "pack_id: p\nrules:\n  - {id: x, type: regex, pattern: 'x', action: redact}\n  - {id: y, type: regex, pattern: 'y', action: redact}\n  - {id: z, type: regex, pattern: 'z', action: block}\n";
        let d = parse_document(xyz.as_bytes(), "p.yaml").unwrap();
        assert_eq!(check_declarations(&d.doc, "p.yaml").unwrap().len(), 3);
    }

    /// The playbooks the project ships compile as whole packs, within the
    /// limit together with the codons.
    #[test]
    fn shipped_playbooks_are_within_the_pack_limit() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut seen = 0;
        for dir in ["config/demo/playbooks", "tests/fixtures"] {
            for entry in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
                let path = entry.path();
                let name = path.display().to_string();
                if !name.ends_with(".yaml") || name.ends_with(".test.yaml") {
                    continue;
                }
                let bytes = std::fs::read(&path).unwrap();
                let d = parse_document(&bytes, &name).unwrap();
                let rules = check_declarations(&d.doc, &name);
                assert!(rules.is_ok(), "{name}: {rules:?}");
                seen += 1;
            }
        }
        assert_eq!(seen, 13);
    }

    #[test]
    fn snake_case() {
        assert!(is_snake_case("project_code2"));
        assert!(!is_snake_case("ProjectCode"));
        assert!(!is_snake_case("_x"));
    }
}
