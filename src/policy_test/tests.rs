//! Unit tests of the test file format, the comparison and the reports.

use super::report::{classname, xml_escape};
use super::*;
use std::path::Path;

fn parse(yaml: &str) -> Result<TestFile, String> {
    TestFile::parse(yaml.as_bytes(), Path::new("dir/t.test.yaml")).map_err(|e| e.to_string())
}

const IDS: &str = "pack_id: custom.ids.v1\nversion: 1\nrules:\n  - {id: ticket_id, type: regex, pattern: '\\bTCK-\\d{6}\\b', action: redact}\n  - {id: code, type: regex, pattern: 'PROJ-\\d+', action: block}\n";

fn subject(playbook: &str) -> Arc<Subject> {
    let c = compiler::compile_in_memory(playbook.as_bytes(), "p.yaml", Entitlement::PolicyTest)
        .unwrap();
    Arc::new(Subject {
        path: PathBuf::from("p.yaml"),
        kind: "playbook",
        rules: all_rules(c.rules.iter().map(|r| r.id.clone()), &c.program),
        evaluator: Arc::new(
            build_evaluator(&c.pack_id, &c.version, &c.rules, &c.program, "p.yaml").unwrap(),
        ),
        pack_id: c.pack_id,
    })
}

#[test]
fn a_file_resolves_paths_against_its_directory() {
    let f = parse("playbook: ids.yaml\ncases:\n  - name: a\n    text: '123'\n    expect: {action: permit_clean_payload}\n").unwrap();
    assert_eq!(f.target, Target::Playbook(PathBuf::from("dir/ids.yaml")));
    assert_eq!(f.cases[0].text, "123");
    let f = parse("pack: p.hxpack\nlicense: ../l.hxlic\ncases:\n  - {name: a, text: x, expect: {severity: null, reason: null}}\n").unwrap();
    assert_eq!(
        f.target,
        Target::Pack {
            pack: PathBuf::from("dir/p.hxpack"),
            license: Some(PathBuf::from("dir/../l.hxlic")),
            issuer_keys: None
        }
    );
    assert_eq!(f.cases[0].expect.severity, Some(None));
    assert_eq!(f.cases[0].expect.reason, Some(None));
    assert_eq!(f.cases[0].expect.action, None);
}

#[test]
fn broken_files_name_the_file_the_field_and_the_line() {
    let cases: [(&str, &[&str]); 9] = [
        (
            "playbook: p\ncases:\n  - name: a\n    text: b\n    expect:\n      acton: x\n",
            &["dir/t.test.yaml", "line 6", "cases[0].expect", "unknown field `acton`"],
        ),
        ("playbook: p\n", &["missing field `cases`"]),
        ("playbook: p\ncases: []\n", &["`cases` is empty"]),
        (
            "playbook: p\ncases:\n  - {name: a, text: b, expect: {action: x}}\n  - name: c\n    text: d\n    expect: {}\n",
            &["line 4", "cases[1]", "`expect` checks nothing"],
        ),
        (
            "playbook: p\ncases:\n  - {name: a, text: [b], expect: {action: x}}\n",
            &["line 3", "cases[0].text", "invalid type"],
        ),
        ("playbook: p\ncases:\n  - name: a\n    text: b: c\n", &["line 4", "mapping values"]),
        (
            "playbook: p\npack: q\ncases:\n  - {name: a, text: b, expect: {action: x}}\n",
            &["both `playbook:` and `pack:`"],
        ),
        (
            "playbook: p\nlicense: l\ncases:\n  - {name: a, text: b, expect: {action: x}}\n",
            &["`license` goes with `pack:`"],
        ),
        (
            "playbook: p\ncases:\n  - {name: a, text: b, expect: {action: x}}\n  - {name: a, text: c, expect: {action: x}}\n",
            &["cases[1]", "`a`", "cases[0]"],
        ),
    ];
    for (yaml, needles) in cases {
        let e = parse(yaml).unwrap_err();
        for n in needles {
            assert!(e.contains(n), "{yaml:?}: {e:?} lacks {n:?}");
        }
        assert!(e.starts_with("test file dir/t.test.yaml: "), "{e}");
    }
    assert!(parse("# only a comment\n").unwrap_err().contains("empty"));
    let e = parse(IDS).unwrap_err();
    assert!(e.contains("looks like a playbook"), "{e}");
}

#[test]
fn compare_reports_each_differing_field() {
    let s = subject(IDS);
    let d = s.evaluator.evaluate("See TCK-004211, mail a@b.co");
    let mut spans = std::collections::BTreeMap::new();
    spans.insert("ticket_id".to_string(), vec![[4, 14]]);
    spans.insert("code".to_string(), vec![]);
    let ok = Expect {
        action: Some("redact_ticket_id".into()),
        severity: Some(Some(ExpectedSeverity::Warning)),
        reason: Some(Some("Custom rule ticket_id matched".into())),
        clean_text: Some("See [REDACTED_TICKET_ID], mail [REDACTED_EMAIL]".into()),
        triggers: Some(vec!["ticket_id".into(), "RULE-GDPR-CONTACT-REDACT".into()]),
        spans: Some(spans),
    };
    assert_eq!(compare(&ok, &d), vec![]);
    let mut spans = std::collections::BTreeMap::new();
    spans.insert("code".to_string(), vec![[0, 1]]);
    let bad = Expect {
        action: Some("permit_clean_payload".into()),
        severity: Some(None),
        triggers: Some(vec!["ticket_id".into()]),
        spans: Some(spans),
        ..Expect::default()
    };
    let diffs = compare(&bad, &d);
    let fields: Vec<&str> = diffs.iter().map(|d| d.field).collect();
    assert_eq!(fields, ["action", "severity", "triggers", "spans"]);
    assert_eq!(diffs[1].got, json!("WARNING"));
    assert_eq!(diffs[3].rule.as_deref(), Some("code"));
    assert_eq!(diffs[3].got, json!([]));
    assert_eq!(
        report::difference_line(&diffs[3]),
        "spans of code: expected [[0, 1]], got [] (it did not trigger)"
    );
    assert_eq!(
        report::difference_line(&diffs[2]),
        "triggers: expected [ticket_id], got [ticket_id, RULE-GDPR-CONTACT-REDACT]"
    );
    assert_eq!(
        report::difference_line(&diffs[1]),
        "severity: expected null, got \"WARNING\""
    );
}

#[test]
fn coverage_lists_exactly_the_rules_no_case_triggered() {
    let s = subject(IDS);
    let file = parse("playbook: p\ncases:\n  - {name: t, text: 'TCK-123456 and 123-45-6789', expect: {action: block_glba_ssn_leakage}}\n  - {name: m, text: 'x@y.org', expect: {action: redact_and_permit_contact_pii}}\n").unwrap();
    let r = run_file(&file, Arc::clone(&s));
    assert_eq!(r.passed(), 2);
    let cov = coverage(&[r]);
    assert_eq!((cov.rules, cov.subjects), (6, 1));
    let left: Vec<(&str, RuleSource)> = cov
        .uncovered
        .iter()
        .map(|u| (u.rule_id.as_str(), u.source))
        .collect();
    assert_eq!(
        left,
        [
            ("code", RuleSource::Rule),
            ("RULE-PCI-DSS-PAN-BLOCK", RuleSource::Builtin),
            ("RULE-HIPAA-PHI-BLOCK", RuleSource::Builtin),
        ]
    );
}

#[test]
fn xml_escaping_and_class_names() {
    assert_eq!(
        xml_escape("a<b>&\"c\"'d'\n\t\u{1}", true),
        "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos;&#10;&#9;\\u{1}"
    );
    assert_eq!(xml_escape("a<b>\n\"", false), "a&lt;b&gt;\n\"");
    assert_eq!(
        classname(Path::new("config/demo/playbooks/internal_ids.test.yaml")),
        "config.demo.playbooks.internal_ids"
    );
    assert_eq!(classname(Path::new("./t.test.yaml")), "t");
}

#[test]
fn rule_ids_a_case_names_must_be_rules_of_its_subject() {
    let s = subject(IDS);
    let ok = parse("playbook: p\ncases:\n  - {name: a, text: b, expect: {triggers: [ticket_id, RULE-GLBA-SSN-BLOCK], spans: {code: []}}}\n").unwrap();
    assert_eq!(check_rule_ids(&ok, &s), Ok(()));
    let typo =
        parse("playbook: p\ncases:\n  - {name: a, text: b, expect: {spans: {tiket_id: []}}}\n")
            .unwrap();
    let e = check_rule_ids(&typo, &s).unwrap_err().to_string();
    assert!(
        e.contains("cases[0] (`a`): `spans` names `tiket_id`, which is not a rule of p.yaml (its rules: ticket_id, code, RULE-GLBA-SSN-BLOCK"),
        "{e}"
    );
    let typo =
        parse("playbook: p\ncases:\n  - {name: a, text: b, expect: {triggers: [RULE-SSN]}}\n")
            .unwrap();
    assert!(check_rule_ids(&typo, &s)
        .unwrap_err()
        .to_string()
        .contains("`triggers` names `RULE-SSN`"));
}
