//! Golden decisions ([§6](docs/evaluation.md#s6)): every `tests/cases/*.yaml` file names a
//! playbook in `tests/fixtures/` and lists payloads with the exact decision
//! fields expected. One test runs them all and reports every mismatch. A
//! case with `normalize: evasion` is evaluated through the [§15](docs/evasion.md#s15) view.

use crate::support::{compiled_evaluator_file, repo_path};
use helixor::Normalize;
use serde_json::Value;

const COMPARED: [&str; 9] = [
    "action",
    "severity",
    "reason",
    "clean_text",
    "triggers",
    "invariants_passed",
    "pack_version",
    "receipt_hash",
    // Absent (null) unless the evasion view differed from the text.
    "normalized",
];

#[test]
fn golden_cases() {
    let mut files: Vec<_> = std::fs::read_dir(repo_path("tests/cases"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "golden case files are missing");
    let mut failures = Vec::new();
    let mut count = 0;
    for file in &files {
        let spec: Value = serde_yaml::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        // The compiler's own path: version-2 playbooks run their declarations.
        let e = compiled_evaluator_file(&format!(
            "tests/fixtures/{}",
            spec["playbook"].as_str().unwrap()
        ));
        for case in spec["cases"].as_array().unwrap() {
            count += 1;
            let text = case["text"].as_str().unwrap();
            let normalize: Normalize = case["normalize"]
                .as_str()
                .unwrap_or("none")
                .parse()
                .unwrap();
            let got = serde_json::to_value(e.evaluate_with(text, normalize)).unwrap();
            assert_eq!(got["pack_id"], Value::String(e.pack_id().to_string()));
            assert!(got["latency_us"].as_f64().unwrap() >= 0.0);
            for field in COMPARED {
                if got[field] != case[field] {
                    failures.push(format!(
                        "{} / {}: `{field}`\n  expected {}\n  got      {}",
                        file.file_name().unwrap().to_string_lossy(),
                        case["name"].as_str().unwrap_or("?"),
                        case[field],
                        got[field]
                    ));
                }
            }
        }
    }
    assert!(count >= 50, "only {count} golden cases ran");
    assert!(
        failures.is_empty(),
        "{} golden mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
