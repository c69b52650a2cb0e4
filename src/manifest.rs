//! `embedded-pack-manifest.json` ([§7](docs/formats.md#s7)) with the next release's fixes:
//! derived from a compiled playbook's data only, never its patterns.

use crate::builtins::{CODONS, EXAMPLE_PACK_ID, HARD_RULES};
use crate::canonical;
use crate::condition::Operator;
use crate::crypto::sha256_hex;
use crate::engine::PERMIT_ACTION;
use crate::playbook::str_field;
use crate::program::{Program, Schema};
use serde_json::{json, Map, Value};

/// The middle segment of a pack id ([§7](docs/formats.md#s7)): between the first and last `.`
/// for three or more segments (inner `.` → `_`), the second of two, else all.
pub fn middle_segment(pack_id: &str) -> String {
    let parts: Vec<&str> = pack_id.split('.').collect();
    match parts.len() {
        0 | 1 => pack_id.to_string(),
        2 => parts[1].to_string(),
        n => parts[1..n - 1].join("_"),
    }
}

/// PascalCase: split on `_` and `-`, upper-case each part's first letter.
pub fn pascal_case(s: &str) -> String {
    s.split(['_', '-'])
        .map(|part| {
            let mut c = part.chars();
            match c.next() {
                Some(first) => first.to_uppercase().chain(c).collect::<String>(),
                None => String::new(),
            }
        })
        .collect()
}

fn present<'a>(doc: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    doc.get(key).filter(|v| !v.is_null())
}

/// One pack entry of the manifest.
/// `rule_actions` are the custom rules' action names in file order.
/// `program` is what the pack runs: a version-2 pack's manifest derives
/// its state schema and hard rules from its declarations ([§16.4](docs/codons.md#s16-4)).
pub fn pack_entry(
    doc: &Map<String, Value>,
    rule_actions: &[String],
    solvers: &[String],
    program: &Program,
) -> Value {
    let pack_id = str_field(doc, "pack_id").unwrap_or_default();
    let middle = middle_segment(pack_id);
    let goal_id = match present(doc, "goal_id") {
        Some(g) => g.clone(),
        None if pack_id == EXAMPLE_PACK_ID => json!("evaluate_pii_compliance"),
        None => json!(format!("evaluate_{middle}")),
    };
    let actions = match present(doc, "actions") {
        Some(a) => a.clone(),
        None => {
            let mut out: Vec<String> = vec![PERMIT_ACTION.to_string()];
            for a in rule_actions
                .iter()
                .cloned()
                .chain(program.hard_rules.iter().map(|h| h.action.clone()))
            {
                if !out.contains(&a) {
                    out.push(a);
                }
            }
            json!(out)
        }
    };
    let budget = present(doc, "budget")
        .and_then(|b| b.get("max_latency_ms"))
        .filter(|v| !v.is_null());
    let (state_schema, hard_rules, codons) = match program.schema {
        Schema::V1 => v1_program(),
        Schema::V2 => v2_program(program),
    };
    let raw_sha = canonical::to_string(&Value::Object(doc.clone()))
        .map(|s| sha256_hex(s.as_bytes()))
        .unwrap_or_default();
    json!({
        "pack_id": pack_id,
        "schema_version": "helixor.pack_manifest.v1",
        "domain_name": pascal_case(&middle),
        "goal_id": goal_id,
        "actions": actions,
        "floor": present(doc, "floor").cloned().unwrap_or(json!(0.85)),
        "budget_max_latency_ms": budget.cloned().unwrap_or(json!(1.0)),
        "state_schema": state_schema,
        "hard_rules": hard_rules,
        "has_decision_head": false,
        "decision_head": null,
        "merkle_root": "",
        "sealed_at": null,
        "raw_pack_sha256": raw_sha,
        "is_sealed": false,
        "solvers": solvers,
        "codons": codons,
        "metadata": present(doc, "metadata").cloned().unwrap_or(json!({})),
    })
}

/// A version-2 pack's state schema, hard rules and codon codes ([§16.4](docs/codons.md#s16-4)).
fn v2_program(program: &Program) -> (Map<String, Value>, Vec<Value>, Vec<String>) {
    let mut state_schema = Map::new();
    for c in &program.codons {
        if state_schema.contains_key(&c.binds_to) {
            continue;
        }
        state_schema.insert(
            c.binds_to.clone(),
            json!({"name": c.binds_to, "property_type": "boolean", "description": c.description,
                   "required": true, "min_value": null, "max_value": null, "default": null}),
        );
    }
    for m in program.count_fields_read() {
        state_schema.insert(
            m.to_string(),
            json!({"name": m, "property_type": "integer", "description": format!("Number of values in {m}"),
                   "required": true, "min_value": 0, "max_value": null, "default": null}),
        );
    }
    let hard_rules = program
        .hard_rules
        .iter()
        .map(|h| {
            let (factor, factors) = match h.factors.as_slice() {
                [one] => (json!(one), Vec::new()),
                many => (Value::Null, many.to_vec()),
            };
            let threshold = match h.operator {
                Operator::CountGte(k) => json!(k),
                _ => Value::Null,
            };
            let is_boolean = matches!(
                h.operator,
                Operator::IsTrue | Operator::AnyTrue | Operator::AllTrue
            );
            json!({"id": h.id, "condition": h.condition_text, "verdict": if h.fatal { "refuse" } else { "redact" },
                   "factor": factor, "operator": h.operator.as_str(), "threshold": threshold, "threshold_str": null,
                   "is_boolean": is_boolean, "factors": factors})
        })
        .collect();
    let codons = program.codons.iter().map(|c| c.code.clone()).collect();
    (state_schema, hard_rules, codons)
}

/// The example pack's state schema, hard rules and codon codes, as every
/// version-1 manifest has shipped them ([§7](docs/formats.md#s7)).
fn v1_program() -> (Map<String, Value>, Vec<Value>, Vec<String>) {
    let mut state_schema = Map::new();
    for c in &CODONS {
        state_schema.insert(
            c.binds.to_string(),
            json!({"name": c.binds, "property_type": "boolean", "description": c.description,
                   "required": true, "min_value": null, "max_value": null, "default": null}),
        );
    }
    let hard_rules: Vec<Value> = HARD_RULES
        .iter()
        .map(|h| {
            let fields: Vec<&str> = h.codons.iter().map(|&c| CODONS[c].binds).collect();
            let (factor, operator, factors) = if fields.len() == 1 {
                (json!(fields[0]), "is_true", Vec::new())
            } else {
                (Value::Null, "any_true", fields)
            };
            json!({"id": h.id, "condition": h.condition, "verdict": if h.fatal { "refuse" } else { "redact" },
                   "factor": factor, "operator": operator, "threshold": null, "threshold_str": null,
                   "is_boolean": true, "factors": factors})
        })
        .collect();
    let codons = CODONS.iter().map(|c| c.code.to_string()).collect();
    (state_schema, hard_rules, codons)
}

/// The whole manifest around its pack entries.
pub fn manifest(packs: Vec<Value>) -> Value {
    json!({"generator": "helixor-sdk-gen", "generation_mode": "embedded_decision", "packs": packs})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(
            middle_segment("compliance.regulatory_pii_guard.v1"),
            "regulatory_pii_guard"
        );
        assert_eq!(middle_segment("a.b.c.d"), "b_c");
        assert_eq!(middle_segment("a.b"), "b");
        assert_eq!(middle_segment("solo"), "solo");
        assert_eq!(pascal_case("regulatory_pii_guard"), "RegulatoryPiiGuard");
        assert_eq!(pascal_case("order-notes_x"), "OrderNotesX");
        assert_eq!(pascal_case("iPhone_guard"), "IPhoneGuard");
    }
}
