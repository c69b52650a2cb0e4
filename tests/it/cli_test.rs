//! Black-box tests of `helixor-pack test` ([§13](docs/policy-tests.md#s13)): passing, failing,
//! broken and missing files with their exact output and exit codes, JUnit
//! XML parsed back, `--coverage` listing exactly the rules no case
//! triggered, `--json`, and `pack:` test files with a license made by the
//! binary itself. Each test runs in its own sandbox (`support::cli`).

use crate::support::cli::*;
use serde_json::Value;
use std::path::Path;

const IDS_PLAYBOOK: &str = "internal_ids.yaml";

/// A test file for `internal_ids.yaml` with `cases` appended.
fn ids_test(cases: &str) -> String {
    format!("playbook: ids.yaml\ncases:\n{cases}")
}

const TICKET_CASE: &str = "  - name: ticket ids are redacted
    text: \"See TCK-004211 for the fix.\"
    expect:
      action: redact_ticket_id
      clean_text: \"See [REDACTED_TICKET_ID] for the fix.\"
      triggers: [ticket_id]
";

const PROSE_CASE: &str = "  - name: prose passes
    text: Nothing to see here.
    expect: {action: permit_clean_payload, severity: null, reason: null}
";

/// Writes `policies/ids.yaml` (the fixture) and `policies/ids.test.yaml`.
fn policies(env: &Env, test_yaml: &str) {
    env.write("policies/ids.yaml", fixture_text(IDS_PLAYBOOK));
    env.write("policies/ids.test.yaml", test_yaml);
}

/// Runs `test` with `args`; returns (exit code, stdout, stderr).
fn run(env: &Env, args: Vec<std::ffi::OsString>) -> (i32, String, String) {
    let out = env.output_with(&args, &[], None);
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn a_passing_file_prints_ok_and_the_totals_and_exits_0() {
    let env = Env::new();
    policies(&env, &ids_test(&format!("{TICKET_CASE}{PROSE_CASE}")));
    let (code, out, err) = run(&env, args!["test", "policies"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "ok   policies/ids.test.yaml (2 cases)\n2 passed, 0 failed\n"
    );
    assert_eq!(err, "");
    // No license anywhere: a playbook is tested without one. The default
    // path is `.`, searched recursively.
    let (code, out, _) = run(&env, args!["test"]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "ok   ./policies/ids.test.yaml (2 cases)\n2 passed, 0 failed\n"
    );
}

#[test]
fn a_failing_case_prints_one_line_with_a_clean_text_diff_and_exits_1() {
    let env = Env::new();
    let wrong = "  - name: ticket ids are kept
    text: \"See TCK-004211 for the fix.\"
    expect:
      action: permit_clean_payload
      clean_text: \"See TCK-004211 for the fix.\"
      triggers: []
      spans: {ticket_id: [[4, 15]]}
";
    policies(
        &env,
        &ids_test(&format!("{TICKET_CASE}{wrong}{PROSE_CASE}")),
    );
    let (code, out, err) = run(&env, args!["test", "policies/ids.test.yaml"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        out,
        "FAIL policies/ids.test.yaml: ticket ids are kept: \
         action: expected \"permit_clean_payload\", got \"redact_ticket_id\"; \
         clean_text differs ([-expected-]{+got+}): \"See [-TCK-004211-]{+[REDACTED_TICKET_ID]+} for the fix.\"; \
         triggers: expected [], got [ticket_id]; \
         spans of ticket_id: expected [[4, 15]], got [[4, 14]]\n\
         2 passed, 1 failed\n"
    );
    assert_eq!(err, "");
}

#[test]
fn clean_text_diffs_shorten_long_unchanged_text() {
    let env = Env::new();
    let long = "word ".repeat(20);
    let case = format!(
        "  - name: long\n    text: \"{long}mail ops@example.com {long}\"\n    expect:\n      clean_text: \"{long}mail ops@example.com {long}\"\n"
    );
    policies(&env, &ids_test(&case));
    let (code, out, _) = run(&env, args!["test", "policies"]);
    assert_eq!(code, 1);
    let line = out.lines().next().unwrap();
    assert_eq!(
        line,
        "FAIL policies/ids.test.yaml: long: clean_text differs ([-expected-]{+got+}): \
         \"…ord word word word mail [-ops@example.com-]{+[REDACTED_EMAIL]+} word word word word wor…\""
    );
}

#[test]
fn broken_test_files_are_compiler_errors_naming_file_line_and_field() {
    let env = Env::new();
    env.write("ids.yaml", fixture_text(IDS_PLAYBOOK));
    let cases: [(&str, String, &[&str]); 6] = [
        (
            "syntax.test.yaml",
            "playbook: ids.yaml\ncases:\n  - name: a\n    text: see: this\n".into(),
            &["test file syntax.test.yaml", "line 4 column 14", "mapping values"],
        ),
        (
            "typo.test.yaml",
            ids_test("  - name: a\n    text: b\n    expect:\n      acton: permit_clean_payload\n"),
            &["test file typo.test.yaml", "line 6 column 7", "cases[0].expect", "unknown field `acton`"],
        ),
        (
            "nocases.test.yaml",
            "playbook: ids.yaml\n".into(),
            &["test file nocases.test.yaml", "missing field `cases`"],
        ),
        (
            "type.test.yaml",
            ids_test("  - name: a\n    text: [b]\n    expect: {action: x}\n"),
            &["test file type.test.yaml", "line 4", "cases[0].text", "invalid type: sequence, expected a string"],
        ),
        (
            "empty-expect.test.yaml",
            ids_test("  - {name: a, text: b, expect: {action: x}}\n  - name: c\n    text: d\n    expect: {}\n"),
            &["line 4", "cases[1]", "case `c`", "`expect` checks nothing"],
        ),
        (
            "severity.test.yaml",
            ids_test("  - {name: a, text: b, expect: {severity: fatal}}\n"),
            &["line 3", "cases[0].expect.severity", "unknown variant `fatal`"],
        ),
    ];
    for (name, body, needles) in cases {
        env.write(name, body);
        env.fails(args!["test", name], "CompilerError", 3)
            .names(needles);
    }
    // Not UTF-8, and over the size cap (refused before it is read whole).
    env.write("binary.test.yaml", b"\xff\xfeplaybook");
    env.fails(args!["test", "binary.test.yaml"], "CompilerError", 3)
        .names(&["test file binary.test.yaml", "not valid UTF-8"]);
    let mut huge = ids_test(TICKET_CASE);
    huge.push_str(&format!("# {}\n", "x".repeat(9 * 1024 * 1024)));
    env.write("huge.test.yaml", huge);
    env.fails(args!["test", "huge.test.yaml"], "CompilerError", 3)
        .names(&["test file huge.test.yaml", "over the 8388608-byte limit"]);
    std::fs::remove_file(env.path("binary.test.yaml")).unwrap();
    std::fs::remove_file(env.path("huge.test.yaml")).unwrap();
    // A rule id that is no rule of the playbook (a typo would pass as "did
    // not trigger").
    env.write(
        "rule.test.yaml",
        ids_test("  - {name: a, text: b, expect: {spans: {tiket_id: []}}}\n"),
    );
    env.fails(args!["test", "rule.test.yaml"], "CompilerError", 3)
        .names(&[
            "test file rule.test.yaml",
            "cases[0] (`a`)",
            "`spans` names `tiket_id`, which is not a rule of ids.yaml",
        ]);
    std::fs::remove_file(env.path("rule.test.yaml")).unwrap();
    // A playbook given as a test file says so.
    env.fails(args!["test", "ids.yaml"], "CompilerError", 3)
        .names(&["unknown field `pack_id`", "looks like a playbook"]);
    // One broken file stops the run before any case runs: nothing on stdout
    // (checked by `fails`), even beside a passing file.
    env.write("ok.test.yaml", ids_test(TICKET_CASE));
    let f = env.fails(args!["test", "."], "CompilerError", 3);
    assert!(f.text.contains("empty-expect.test.yaml"), "{}", f.text);
}

#[test]
fn missing_paths_and_runs_that_find_nothing_are_errors() {
    let env = Env::new();
    env.fails(args!["test", "nowhere"], "UsageError", 2)
        .names(&["test path nowhere does not exist"]);
    std::fs::create_dir_all(env.path("empty/.hidden")).unwrap();
    env.write("empty/.hidden/x.test.yaml", ids_test(TICKET_CASE));
    env.write("empty/notes.yaml", "a: 1\n");
    env.fails(args!["test", "empty"], "UsageError", 2)
        .names(&["no test files (*.test.yaml) found in empty"]);
    // A test file naming a playbook that is not there: the playbook's own
    // error, with the test file as context.
    env.write(
        "gone.test.yaml",
        "playbook: gone.yaml\ncases:\n  - {name: a, text: b, expect: {action: x}}\n",
    );
    let f = env.fails(args!["test", "gone.test.yaml"], "CompilerError", 3);
    f.names(&[
        "Failed to parse YAML playbook",
        "gone.yaml",
        "in test file gone.test.yaml",
    ]);
    assert!(
        !f.message.contains("in test file"),
        "context is a text line of its own"
    );
}

#[test]
fn a_playbook_under_test_gets_every_compile_check_but_no_license() {
    let env = Env::new();
    // A pack id no license of the sandbox allows, and a solver: neither needs
    // a license under test.
    env.write(
        "p/other.yaml",
        "pack_id: acme.other.v1\nsolvers: [z3]\nrule: []\nrules:\n  - {id: Code, type: regex, pattern: 'X-\\d+', action: block}\n",
    );
    env.write(
        "p/other.test.yaml",
        "playbook: other.yaml\ncases:\n  - {name: code, text: X-12, expect: {action: block_Code}}\n",
    );
    let (code, out, err) = run(&env, args!["test", "p"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "ok   p/other.test.yaml (1 case)\n1 passed, 0 failed\n");
    // compile's warnings, on stderr.
    assert!(
        err.contains("warning: p/other.yaml: unknown top-level keys ignored"),
        "{err}"
    );
    assert!(err.contains("not lower snake case"), "{err}");
    // Every declaration problem, as compile reports them.
    env.write(
        "p/other.yaml",
        "pack_id: acme.other.v1\nrules:\n  - {id: a, type: regex, pattern: '(?=x)', action: block}\n  - {id: b, type: glob, pattern: 'x', action: block}\n",
    );
    let f = env.fails(args!["test", "p"], "UnsupportedPackDeclarationError", 3);
    assert_eq!(f.problems.len(), 2, "{:?}", f.problems);
    f.names(&["rules[0]", "rules[1]", "in test file p/other.test.yaml"]);
}

#[test]
fn junit_xml_parses_with_one_suite_per_file_and_escaped_names() {
    let env = Env::new();
    let odd = "  - name: \"odd <name> & \\\"quotes\\\"\"
    text: \"mail a@b.co\"
    expect: {clean_text: \"mail a@b.co <kept> & done\"}
";
    policies(&env, &ids_test(&format!("{TICKET_CASE}{odd}{PROSE_CASE}")));
    env.write(
        "policies/sub/pii.yaml",
        fixture_text("regulatory_pii_guard.yaml"),
    );
    env.write(
        "policies/sub/pii.test.yaml",
        "playbook: pii.yaml\ncases:\n  - {name: ssn, text: 'SSN 123-45-6789', expect: {action: block_glba_ssn_leakage}}\n",
    );
    let report = env.path("out/report.xml");
    std::fs::create_dir_all(report.parent().unwrap()).unwrap();
    let (code, out, _) = run(&env, args!["test", "policies", "--junit", &report]);
    assert_eq!(code, 1);
    assert!(out.ends_with("3 passed, 1 failed\n"), "{out}");
    let xml = std::fs::read_to_string(&report).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}\n{xml}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    assert_eq!(root.attribute("tests"), Some("4"));
    assert_eq!(root.attribute("failures"), Some("1"));
    assert_eq!(root.attribute("errors"), Some("0"));
    let suites: Vec<_> = root.children().filter(|n| n.is_element()).collect();
    assert_eq!(suites.len(), 2);
    assert!(suites.iter().all(|s| s.tag_name().name() == "testsuite"));
    assert_eq!(suites[0].attribute("name"), Some("policies/ids.test.yaml"));
    assert_eq!(suites[0].attribute("tests"), Some("3"));
    assert_eq!(suites[0].attribute("failures"), Some("1"));
    assert_eq!(
        suites[1].attribute("name"),
        Some("policies/sub/pii.test.yaml")
    );
    assert_eq!(suites[1].attribute("tests"), Some("1"));
    assert_eq!(suites[1].attribute("failures"), Some("0"));
    let cases: Vec<_> = suites[0].children().filter(|n| n.is_element()).collect();
    let names: Vec<_> = cases.iter().map(|c| c.attribute("name").unwrap()).collect();
    assert_eq!(
        names,
        [
            "ticket ids are redacted",
            "odd <name> & \"quotes\"",
            "prose passes"
        ]
    );
    for c in &cases {
        assert_eq!(c.tag_name().name(), "testcase");
        assert_eq!(c.attribute("classname"), Some("policies.ids"));
        let t: f64 = c.attribute("time").unwrap().parse().unwrap();
        assert!(t >= 0.0);
    }
    let failures: Vec<_> = cases[1].children().filter(|n| n.is_element()).collect();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].tag_name().name(), "failure");
    assert_eq!(
        failures[0].attribute("message"),
        Some("clean_text differs ([-expected-]{+got+}): \"mail [-a@b.co <kept> & done-]{+[REDACTED_EMAIL]+}\"")
    );
    let body = failures[0].text().unwrap();
    assert!(body.contains("text: \"mail a@b.co\""), "{body}");
    assert!(
        body.contains("expected: \"mail a@b.co <kept> & done\""),
        "{body}"
    );
    assert!(cases[0].children().all(|n| !n.is_element()));
    assert_eq!(
        suites[1]
            .children()
            .find(|n| n.is_element())
            .unwrap()
            .attribute("classname"),
        Some("policies.sub.pii")
    );
    // A report that cannot be written is an IoError; a passing run exits 0.
    env.write("policies/ids.test.yaml", ids_test(TICKET_CASE));
    env.fails(
        args!["test", "policies", "--junit", env.path("no/such/dir/r.xml")],
        "IoError",
        1,
    )
    .names(&["cannot write JUnit report", "no/such/dir/r.xml"]);
}

#[test]
fn coverage_lists_exactly_the_rules_no_case_triggered() {
    let env = Env::new();
    policies(&env, &ids_test(TICKET_CASE));
    env.write("policies/orders.yaml", fixture_text("order_notes.yaml"));
    env.write(
        "policies/orders.test.yaml",
        "playbook: orders.yaml\ncases:\n\
         - {name: cost code and SSN, text: 'CC-1234 and 123-45-6789', expect: {action: block_internal_cost_code}}\n\
         - {name: phone, text: 'Call 212-555-0187', expect: {action: redact_and_permit_contact_pii}}\n",
    );
    let (code, out, err) = run(&env, args!["test", "policies", "--coverage"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "ok   policies/ids.test.yaml (1 case)\n\
         ok   policies/orders.test.yaml (2 cases)\n\
         coverage: 8 of 12 rules in 2 playbooks and packs triggered by no case:\n  \
         policies/ids.yaml: internal_project_code (custom rule)\n  \
         policies/ids.yaml: RULE-GLBA-SSN-BLOCK (built-in hard rule)\n  \
         policies/ids.yaml: RULE-PCI-DSS-PAN-BLOCK (built-in hard rule)\n  \
         policies/ids.yaml: RULE-HIPAA-PHI-BLOCK (built-in hard rule)\n  \
         policies/ids.yaml: RULE-GDPR-CONTACT-REDACT (built-in hard rule)\n  \
         policies/orders.yaml: supplier_reference (custom rule)\n  \
         policies/orders.yaml: RULE-PCI-DSS-PAN-BLOCK (built-in hard rule)\n  \
         policies/orders.yaml: RULE-HIPAA-PHI-BLOCK (built-in hard rule)\n\
         3 passed, 0 failed\n"
    );
    // Two test files of one playbook add up; a failing case's triggers count.
    env.write(
        "policies/ids-more.test.yaml",
        "playbook: ids.yaml\ncases:\n\
         - {name: all of them, text: 'PROJ-X-1 123-45-6789 4111 1111 1111 1111 MRN 1234567 a@b.co', expect: {action: wrong}}\n",
    );
    let v: Value =
        serde_json::from_str(&run(&env, args!["test", "policies", "--coverage", "--json"]).1)
            .unwrap();
    let left: Vec<(String, String)> = v["coverage"]["untriggered"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            (
                u["subject"].as_str().unwrap().to_string(),
                u["rule_id"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want = [
        ("policies/orders.yaml", "supplier_reference"),
        ("policies/orders.yaml", "RULE-PCI-DSS-PAN-BLOCK"),
        ("policies/orders.yaml", "RULE-HIPAA-PHI-BLOCK"),
    ];
    assert_eq!(
        left,
        want.map(|(a, b)| (a.to_string(), b.to_string())).to_vec()
    );
    assert_eq!(v["coverage"]["rules"], 12);
    assert_eq!(v["coverage"]["subjects"], 2);
}

#[test]
fn json_reports_every_file_and_case() {
    let env = Env::new();
    let wrong = "  - name: wrong severity
    text: \"See TCK-004211\"
    expect: {severity: FATAL, reason: \"Custom rule ticket_id matched\"}
";
    policies(&env, &ids_test(&format!("{TICKET_CASE}{wrong}")));
    let a = args!["test", "policies", "--json"];
    let out = env.output_with(&a, &[], None);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["passed"], 1);
    assert_eq!(v["failed"], 1);
    assert!(v.get("coverage").is_none());
    let file = &v["files"][0];
    assert_eq!(file["file"], "policies/ids.test.yaml");
    assert_eq!(file["playbook"], "policies/ids.yaml");
    assert_eq!(file["pack_id"], "custom.internal_ids.v1");
    assert_eq!(
        (file["passed"].as_u64(), file["failed"].as_u64()),
        (Some(1), Some(1))
    );
    let cases = file["cases"].as_array().unwrap();
    assert_eq!(cases[0]["name"], "ticket ids are redacted");
    assert_eq!(cases[0]["passed"], true);
    assert_eq!(cases[0]["triggers"], serde_json::json!(["ticket_id"]));
    assert_eq!(cases[0]["differences"], serde_json::json!([]));
    assert_eq!(cases[1]["passed"], false);
    assert_eq!(
        cases[1]["differences"],
        serde_json::json!([{
            "field": "severity",
            "expected": "FATAL",
            "got": "WARNING",
            "message": "severity: expected \"FATAL\", got \"WARNING\""
        }])
    );
}

/// Compiles the fixture for `lic` into `<work>/packs/ids.hxpack`.
fn ids_pack(env: &Env, lic: &Path) {
    std::fs::create_dir_all(env.path("packs")).unwrap();
    env.compile(&fixture(IDS_PLAYBOOK), lic, &env.path("packs/ids.hxpack"));
}

const PACK_CASES: &str = "cases:
  - name: ticket ids are redacted
    text: \"See TCK-004211 for the fix.\"
    expect: {action: redact_ticket_id, clean_text: \"See [REDACTED_TICKET_ID] for the fix.\"}
  - name: an SSN blocks
    text: \"SSN 123-45-6789\"
    expect: {action: block_glba_ssn_leakage, triggers: [RULE-GLBA-SSN-BLOCK], spans: {RULE-GLBA-SSN-BLOCK: [[4, 15]]}}
";

#[test]
fn a_pack_is_tested_with_its_license_from_the_file_or_the_flags() {
    let env = Env::new();
    ids_pack(&env, &env.lic);
    // The license and issuer keys named in the test file, relative to it.
    std::fs::copy(&env.lic, env.path("packs/dev.hxlic")).unwrap();
    let keys = env.keys.to_string_lossy().to_string();
    env.write(
        "packs/ids.test.yaml",
        format!("pack: ids.hxpack\nlicense: dev.hxlic\nissuer_keys: {keys}\n{PACK_CASES}"),
    );
    let (code, out, err) = run(&env, args!["test", "packs"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "ok   packs/ids.test.yaml (2 cases)\n2 passed, 0 failed\n"
    );
    let v: Value = serde_json::from_str(&run(&env, args!["test", "packs", "--json"]).1).unwrap();
    assert_eq!(v["files"][0]["pack"], "packs/ids.hxpack");

    // No license in the file: the command line's, then the lookup order.
    env.write(
        "packs/ids.test.yaml",
        format!("pack: ids.hxpack\n{PACK_CASES}"),
    );
    let mut a = args!["test", "packs"];
    a.extend(env.lic_args(&env.lic));
    let (code, _, err) = run(&env, a);
    assert_eq!(code, 0, "{err}");
    env.fails(args!["test", "packs"], "LicenseNotFoundError", 4)
        .names(&["no license found", "in test file packs/ids.test.yaml"]);
    let a = args!["test", "packs"];
    let out = env.output_with(
        &a,
        &[
            ("HELIXOR_LICENSE_FILE", &env.lic),
            ("HELIXOR_ISSUER_KEYS", &env.keys),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0));

    // A license named in the file that is missing never falls back.
    env.write(
        "packs/ids.test.yaml",
        format!("pack: ids.hxpack\nlicense: missing.hxlic\n{PACK_CASES}"),
    );
    let mut a = args!["test", "packs"];
    a.extend(env.lic_args(&env.lic));
    env.fails(a, "LicenseNotFoundError", 4)
        .names(&["packs/missing.hxlic", "test file's `license:`"]);
}

#[test]
fn a_pack_gets_every_load_check() {
    let env = Env::new();
    ids_pack(&env, &env.lic);
    env.write(
        "packs/ids.test.yaml",
        format!("pack: ids.hxpack\n{PACK_CASES}"),
    );
    // Another license of the same issuer: another content key.
    let other = env.issue("lic_other", &["--features", "custom_playbook_compilation"]);
    let mut a = args!["test", "packs"];
    a.extend(env.lic_args(&other));
    let f = env.fails(a, "PackUnsealError", 5);
    assert_eq!(f.message, UNSEAL_MESSAGE);
    // An expired license.
    let expired = env.issue(
        "lic_expired",
        &[
            "--features",
            "custom_playbook_compilation",
            "--not-before",
            "2020-01-01T00:00:00Z",
            "--not-after",
            "2021-01-01T00:00:00Z",
        ],
    );
    let mut a = args!["test", "packs"];
    a.extend(env.lic_args(&expired));
    env.fails(a, "LicenseExpiredError", 4);
    // A license that does not allow the pack id.
    let narrow = env.issue("lic_narrow", &["--packs", "compliance.*"]);
    let mut a = args!["test", "packs"];
    a.extend(env.lic_args(&narrow));
    env.fails(a, "LicenseEntitlementError", 4);
    // A file that is not a pack.
    env.write("packs/ids.hxpack", "not a pack");
    let mut a = args!["test", "packs"];
    a.extend(env.lic_args(&env.lic));
    env.fails(a, "PackFormatError", 5);
}

#[test]
fn directories_are_searched_recursively_in_name_order() {
    let env = Env::new();
    env.write("tree/ids.yaml", fixture_text(IDS_PLAYBOOK));
    for (rel, playbook) in [
        ("tree/b.test.yaml", "ids.yaml"),
        ("tree/a/deep/c.test.yaml", "../../ids.yaml"),
        ("tree/target/skipped.test.yaml", "../ids.yaml"),
        ("tree/.git/skipped.test.yaml", "../ids.yaml"),
        ("tree/node_modules/skipped.test.yaml", "../ids.yaml"),
    ] {
        env.write(rel, format!("playbook: {playbook}\ncases:\n{TICKET_CASE}"));
    }
    env.write("tree/a/not-a-test.yaml", "this: is ignored\n");
    env.write(
        "named.yaml",
        format!("playbook: tree/ids.yaml\ncases:\n{TICKET_CASE}"),
    );
    // A file named on the command line runs whatever its name; a file
    // reached twice runs once.
    let (code, out, err) = run(
        &env,
        args!["test", "tree", "named.yaml", "tree/b.test.yaml"],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "ok   tree/a/deep/c.test.yaml (1 case)\n\
         ok   tree/b.test.yaml (1 case)\n\
         ok   named.yaml (1 case)\n\
         3 passed, 0 failed\n"
    );
}

#[test]
fn the_shipped_playbooks_and_demo_packs_pass_with_full_coverage() {
    let env = Env::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut c = env.cmd();
    c.current_dir(root)
        .args(["test", "config/demo", "tests/fixtures", "--coverage"]);
    let out = c.output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(
            "coverage: every rule was triggered by a case (77 rules in 13 playbooks and packs)\n"
        ),
        "{stdout}"
    );
    let last = stdout.lines().last().unwrap();
    let (passed, failed) = last.split_once(" passed, ").unwrap();
    assert!(passed.parse::<usize>().unwrap() >= 100, "{last}");
    assert_eq!(failed, "0 failed");
    for f in [
        "config/demo/playbooks/internal_ids.test.yaml",
        "config/demo/playbooks/regulatory_pii_guard.test.yaml",
        "config/demo/tests/internal_ids.hxpack.test.yaml",
        "tests/fixtures/fuzz_rules.test.yaml",
        "tests/fixtures/mixed_rules.test.yaml",
    ] {
        assert!(stdout.contains(&format!("ok   {f} (")), "{f}:\n{stdout}");
    }
}

#[test]
fn help_names_the_flags() {
    let env = Env::new();
    let out = env.ok(args!["test", "--help"]);
    for flag in [
        "--junit",
        "--coverage",
        "--json",
        "--license",
        "--issuer-keys",
        "*.test.yaml",
    ] {
        assert!(out.contains(flag), "{flag}:\n{out}");
    }
}
