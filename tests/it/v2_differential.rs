//! [§16](docs/codons.md#s16): the example pack written as a version-2 playbook (its six
//! codons and four hard rules declared by name) decides every text exactly
//! as the version-1 example pack does, receipts included: on every golden
//! text of the built-in and evasion cases, and on random texts of PII
//! values, near misses and prose, with and without the evasion view.

use crate::support::{compiled_evaluator, compiled_evaluator_file, repo_path};
use helixor::{Evaluator, Normalize, EXAMPLE_PLAYBOOK_YAML};
use proptest::prelude::*;
use serde_json::Value;
use std::sync::OnceLock;

fn pair() -> &'static (Evaluator, Evaluator) {
    static P: OnceLock<(Evaluator, Evaluator)> = OnceLock::new();
    P.get_or_init(|| {
        (
            compiled_evaluator(EXAMPLE_PLAYBOOK_YAML.as_bytes(), "example"),
            compiled_evaluator_file("tests/fixtures/regulatory_pii_guard_v2.yaml"),
        )
    })
}

/// Both decisions as JSON, latency aside.
fn both(text: &str, normalize: Normalize) -> (Value, Value) {
    let (v1, v2) = pair();
    let mut a = serde_json::to_value(v1.evaluate_with(text, normalize)).unwrap();
    let mut b = serde_json::to_value(v2.evaluate_with(text, normalize)).unwrap();
    a["latency_us"] = Value::Null;
    b["latency_us"] = Value::Null;
    (a, b)
}

#[test]
fn every_golden_text_decides_alike() {
    let root = repo_path("tests/cases");
    let mut n = 0;
    let mut blocked = 0;
    for file in ["builtins.yaml", "evasion.yaml", "schema_example.yaml"] {
        let spec: Value =
            serde_yaml::from_str(&std::fs::read_to_string(root.join(file)).unwrap()).unwrap();
        for case in spec["cases"].as_array().unwrap() {
            let text = case["text"].as_str().unwrap();
            for normalize in [Normalize::None, Normalize::Evasion] {
                let (a, b) = both(text, normalize);
                assert_eq!(a, b, "{file}: {text:?}");
                blocked += usize::from(a["severity"] == "FATAL");
                n += 1;
            }
        }
    }
    assert!(n >= 60 && blocked >= 10, "{n} texts, {blocked} blocked");
}

fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("123-45-6789".to_string()),
        Just("000-12-3456".to_string()),
        Just("4111 1111 1111 1111".to_string()),
        Just("4111-1111-1111-1112".to_string()),
        Just("MRN: 12345678".to_string()),
        Just("rx1234567".to_string()),
        Just("jane.doe@example.com".to_string()),
        Just("(212) 555-0199".to_string()),
        Just("+1 415.555.0123".to_string()),
        Just("10.0.0.1".to_string()),
        Just("256.1.1.1".to_string()),
        Just("１２３-４５-６７８９".to_string()),
        Just("Überprüfung".to_string()),
        Just("会議".to_string()),
        "[a-z]{1,8}",
        "[0-9]{1,12}",
        "[0-9 .-]{1,20}",
    ]
}

fn separator() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just(" "),
        Just(", "),
        Just("\n"),
        Just(""),
        Just("-"),
        Just(".")
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_texts_decide_alike(parts in proptest::collection::vec((token(), separator()), 0..12), evasion in any::<bool>()) {
        let text: String = parts.iter().map(|(t, s)| format!("{t}{s}")).collect();
        let normalize = if evasion { Normalize::Evasion } else { Normalize::None };
        let (a, b) = both(&text, normalize);
        prop_assert_eq!(a, b);
        let (v1, v2) = pair();
        prop_assert_eq!(v1.redacted_text_with(&text, normalize), v2.redacted_text_with(&text, normalize));
    }
}
