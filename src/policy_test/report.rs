//! Reports of a policy test run: text for people (one line per failing
//! case, then `N passed, M failed` alone on the last line), one JSON
//! document for tools, and JUnit XML for CI. Each holds only the test
//! author's own texts (file and case names, payloads, expectations) and the
//! decision fields compared; never a pattern.

use super::diff;
use super::{Coverage, Difference, FileResult, RuleSource};
use serde_json::{json, Value};
use std::path::{Component, Path};

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A list of rule ids or spans as a person reads it: `[ticket_id, RULE-X]`.
fn compact(v: &Value) -> String {
    match v {
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(compact).collect::<Vec<_>>().join(", ")
        ),
        Value::String(s) if !s.is_empty() && s.chars().all(|c| !c.is_whitespace() && c != ',') => {
            s.clone()
        }
        other => other.to_string(),
    }
}

/// One difference on one line: the field, what was expected and what the
/// decision holds; `clean_text` as a word diff.
pub fn difference_line(d: &Difference) -> String {
    match (d.field, &d.expected, &d.got) {
        ("clean_text", Value::String(want), Value::String(got)) => format!(
            "clean_text differs ([-expected-]{{+got+}}): {}",
            diff::inline(want, got)
        ),
        ("triggers", want, got) => {
            format!("triggers: expected {}, got {}", compact(want), compact(got))
        }
        ("spans", want, got) => {
            let rule = d.rule.as_deref().unwrap_or_default();
            let none = got.as_array().is_some_and(Vec::is_empty);
            format!(
                "spans of {rule}: expected {}, got {}{}",
                compact(want),
                compact(got),
                if none { " (it did not trigger)" } else { "" }
            )
        }
        (field, want, got) => format!("{field}: expected {want}, got {got}"),
    }
}

/// The failure summary of a case: every difference, `; `-separated.
pub fn failure_message(differences: &[Difference]) -> String {
    differences
        .iter()
        .map(difference_line)
        .collect::<Vec<_>>()
        .join("; ")
}

fn coverage_text(cov: &Coverage) -> String {
    let mut s = String::new();
    let where_ = plural(cov.subjects, "playbook or pack", "playbooks and packs");
    if cov.uncovered.is_empty() {
        s.push_str(&format!(
            "coverage: every rule was triggered by a case ({} in {where_})\n",
            plural(cov.rules, "rule", "rules")
        ));
        return s;
    }
    s.push_str(&format!(
        "coverage: {} of {} rules in {where_} triggered by no case:\n",
        cov.uncovered.len(),
        cov.rules
    ));
    for u in &cov.uncovered {
        s.push_str(&format!(
            "  {}: {} ({})\n",
            u.subject.display(),
            u.rule_id,
            match u.source {
                RuleSource::Rule => "custom rule",
                RuleSource::Builtin => "built-in hard rule",
                RuleSource::HardRule => "hard rule",
            }
        ));
    }
    s
}

/// Totals of passed and failed cases.
pub fn totals(results: &[FileResult]) -> (usize, usize) {
    results
        .iter()
        .fold((0, 0), |(p, f), r| (p + r.passed(), f + r.failed()))
}

/// The text report: per file an `ok` line, or a `FAIL` line per failing
/// case; the coverage when asked; then `N passed, M failed`.
pub fn text(results: &[FileResult], coverage: Option<&Coverage>) -> String {
    let mut s = String::new();
    for r in results {
        let file = r.file.display();
        if r.failed() == 0 {
            s.push_str(&format!(
                "ok   {file} ({})\n",
                plural(r.cases.len(), "case", "cases")
            ));
            continue;
        }
        for c in r.cases.iter().filter(|c| !c.passed()) {
            s.push_str(&format!(
                "FAIL {file}: {}: {}\n",
                diff::escape(&c.name),
                failure_message(&c.differences)
            ));
        }
    }
    if let Some(cov) = coverage {
        s.push_str(&coverage_text(cov));
    }
    let (passed, failed) = totals(results);
    s.push_str(&format!("{passed} passed, {failed} failed\n"));
    s
}

/// The JSON report: totals, and per file its subject and every case with
/// its differences; `coverage` when asked.
pub fn json(results: &[FileResult], coverage: Option<&Coverage>) -> Value {
    let (passed, failed) = totals(results);
    let files: Vec<Value> = results
        .iter()
        .map(|r| {
            let cases: Vec<Value> = r
                .cases
                .iter()
                .map(|c| {
                    let differences: Vec<Value> = c
                        .differences
                        .iter()
                        .map(|d| {
                            let mut v = json!({
                                "field": d.field,
                                "expected": d.expected,
                                "got": d.got,
                                "message": difference_line(d),
                            });
                            if let Some(rule) = &d.rule {
                                v["rule_id"] = json!(rule);
                            }
                            v
                        })
                        .collect();
                    json!({
                        "name": c.name,
                        "passed": c.passed(),
                        "triggers": c.triggered,
                        "latency_us": c.latency_us,
                        "differences": differences,
                    })
                })
                .collect();
            json!({
                "file": r.file.display().to_string(),
                r.subject.kind: r.subject.path.display().to_string(),
                "pack_id": r.subject.pack_id,
                "passed": r.passed(),
                "failed": r.failed(),
                "cases": cases,
            })
        })
        .collect();
    let mut v = json!({"passed": passed, "failed": failed, "files": files});
    if let Some(cov) = coverage {
        v["coverage"] = json!({
            "rules": cov.rules,
            "subjects": cov.subjects,
            "untriggered": cov.uncovered.iter().map(|u| json!({
                "subject": u.subject.display().to_string(),
                "pack_id": u.pack_id,
                "rule_id": u.rule_id,
                "source": u.source.as_str(),
            })).collect::<Vec<_>>(),
        });
    }
    v
}

/// Whether XML 1.0 can hold `c` at all (even as a character reference).
fn xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// Escapes text for XML content or (with `attr`) a quoted attribute value;
/// characters XML cannot hold are written as `\u{…}`.
pub fn xml_escape(s: &str, attr: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if attr => out.push_str("&quot;"),
            '\'' if attr => out.push_str("&apos;"),
            // Attribute values are whitespace-normalised: keep these as written.
            '\n' if attr => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' if attr => out.push_str("&#9;"),
            c if !xml_char(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

/// A JUnit class name from a test file path: its directories and stem,
/// dot-separated (`config/demo/playbooks/internal_ids.test.yaml` →
/// `config.demo.playbooks.internal_ids`), as CI systems group cases.
pub fn classname(file: &Path) -> String {
    let mut parts: Vec<String> = file
        .components()
        .filter_map(|c| match c {
            Component::Normal(p) => Some(p.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    if let Some(last) = parts.last_mut() {
        for suffix in [super::TEST_FILE_SUFFIX, ".yaml", ".yml"] {
            if let Some(stem) = last.strip_suffix(suffix) {
                *last = stem.to_string();
                break;
            }
        }
    }
    parts.join(".")
}

fn seconds(us: f64) -> String {
    format!("{:.6}", us / 1e6)
}

/// The JUnit XML report: `<testsuites>`, one `<testsuite>` per test file,
/// one `<testcase>` per case, a `<failure>` for each failing case.
pub fn junit(results: &[FileResult]) -> String {
    let (passed, failed) = totals(results);
    let total_us: f64 = results
        .iter()
        .flat_map(|r| &r.cases)
        .map(|c| c.latency_us)
        .sum();
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    s.push_str(&format!(
        "<testsuites name=\"helixor-pack test\" tests=\"{}\" failures=\"{failed}\" errors=\"0\" time=\"{}\">\n",
        passed + failed,
        seconds(total_us)
    ));
    for r in results {
        let file = r.file.display().to_string();
        let class = classname(&r.file);
        let suite_us: f64 = r.cases.iter().map(|c| c.latency_us).sum();
        s.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"0\" time=\"{}\">\n",
            xml_escape(&file, true),
            r.cases.len(),
            r.failed(),
            seconds(suite_us)
        ));
        for c in &r.cases {
            let open = format!(
                "    <testcase name=\"{}\" classname=\"{}\" time=\"{}\"",
                xml_escape(&c.name, true),
                xml_escape(&class, true),
                seconds(c.latency_us)
            );
            if c.passed() {
                s.push_str(&open);
                s.push_str("/>\n");
                continue;
            }
            let mut body = format!("text: {}\n", json!(c.text));
            for d in &c.differences {
                match &d.rule {
                    Some(rule) => body.push_str(&format!("{} of {rule}\n", d.field)),
                    None => body.push_str(&format!("{}\n", d.field)),
                }
                body.push_str(&format!(
                    "  expected: {}\n  got:      {}\n",
                    d.expected, d.got
                ));
            }
            s.push_str(&open);
            s.push_str(&format!(
                ">\n      <failure message=\"{}\" type=\"mismatch\">{}</failure>\n    </testcase>\n",
                xml_escape(&failure_message(&c.differences), true),
                xml_escape(&body, false)
            ));
        }
        s.push_str("  </testsuite>\n");
    }
    s.push_str("</testsuites>\n");
    s
}
