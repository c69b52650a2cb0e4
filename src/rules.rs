//! Declarations (SPEC §4.2 step 6, §5 step 7): checks every custom rule,
//! codon and hard rule of a playbook and compiles the custom rules' patterns,
//! gathering every problem into one `UnsupportedPackDeclarationError`.

use crate::builtins;
use crate::pattern::{self, CompiledPattern, Flag};
use crate::playbook::{list, PlaybookError};
use serde_json::{Map, Value};
use std::collections::HashMap;

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
    /// `block_<id>` or `redact_<id>` (SPEC §6.1).
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

/// Checks every declaration of `doc` and compiles its custom rules; on any
/// problem, one `Unsupported` error listing all of them. `name` labels the file.
pub fn check_declarations(
    doc: &Map<String, Value>,
    name: &str,
) -> Result<Vec<CustomRule>, PlaybookError> {
    let mut problems = Vec::new();
    let mut rules = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, entry) in list(doc, "rules").iter().enumerate() {
        if let Some(rule) = check_rule(i, entry, &mut seen, &mut problems) {
            rules.push(rule);
        }
    }
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
    if problems.is_empty() {
        Ok(rules)
    } else {
        let n = problems.len();
        Err(PlaybookError::Unsupported {
            summary: format!(
                "{name}: {n} declaration problem{} the engine cannot execute",
                if n == 1 { "" } else { "s" }
            ),
            problems,
        })
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
    let mut flags = Vec::new();
    match rule.get("flags") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for f in items {
                match f.as_str().map(|s| (s, Flag::parse(s))) {
                    Some((_, Some(flag))) => flags.push(flag),
                    Some((s, None)) => problems.push(format!(
                        "{place}: unknown flag `{s}` (supported: IGNORECASE, MULTILINE, DOTALL)"
                    )),
                    None => problems.push(format!("{place}: `flags` is not a list of strings")),
                }
            }
        }
        Some(_) => problems.push(format!("{place}: `flags` is not a list of strings")),
    }
    let pattern = match rule.get("pattern") {
        Some(Value::String(p)) => match pattern::compile(p, &flags).and_then(|c| {
            // SPEC §11.4: no pattern that can make an evaluation slow.
            pattern::check_cost(&c)?;
            Ok(c)
        }) {
            Ok(c) => Some(c),
            Err(why) => {
                problems.push(format!("{place}: `pattern` {why}"));
                None
            }
        },
        Some(_) => {
            problems.push(format!("{place}: `pattern` is not a string"));
            None
        }
        None => {
            problems.push(format!("{place}: missing `pattern`"));
            None
        }
    };
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

/// Equality "as parsed data": numbers compare by value, as Python's `==` does (`1 == 1.0`).
fn same_data(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_data(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_data(v, w)))
        }
        _ => a == b,
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

    #[test]
    fn snake_case() {
        assert!(is_snake_case("project_code2"));
        assert!(!is_snake_case("ProjectCode"));
        assert!(!is_snake_case("_x"));
    }
}
