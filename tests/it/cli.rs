//! Black-box tests of the `helixor-pack` binary ([§1](docs/formats.md#s1)–[§8](docs/cli.md#s8)): every command,
//! and every error case with its exact name, exit code, a message naming the
//! file and the field, no panic and no partial output file.
//!
//! Each test builds its own sandbox (`support::cli`): HOME and the working
//! directory are temporary, no `HELIXOR_*` variable is inherited, and keys,
//! licenses and packs are made with the binary itself.

use crate::support::cli::*;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The example playbook of `reference/playbook-schema-0.2.1.txt`.
const EXAMPLE: &str = "internal_code_guard.yaml";
const EXAMPLE_ID: &str = "custom.internal_code_guard.v1";

// SHA-256 of each fixture's canonical JSON, computed independently with
// Python: sha256(json.dumps(yaml.safe_load(f), sort_keys=True,
// separators=(",", ":"), ensure_ascii=False).encode()).
const EXAMPLE_SHA: &str = "56a489186cd770e06b0adb87f6f8fac99cc22631b01fef439dbf68b833dec3fc";
const INTERNAL_IDS_SHA: &str = "e57d84f9057c8628ff2fd629c725e6223fbb5118d3fd9d60564c160d6af24f10";
const ORDER_NOTES_SHA: &str = "3da25ff2ee3272fcc3984ddd23ee079eb449197152bd8c801eb0d3e067d4f89e";
const REGULATORY_SHA: &str = "d924f870db0232502ca7cdaee40f1403d99c7348cf25b40e5a90dd2b3d2555ee";

const BLOCKED: &str = "[BLOCKED: Prohibited Content]";

/// An in-place edit of a test input.
type Edit<T> = Box<dyn Fn(&mut T)>;

fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn write_json(p: &Path, v: &Value) {
    std::fs::write(p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
}

fn sorted_keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    k.sort();
    k
}

fn keys_of(list: &[&str]) -> Vec<String> {
    let mut k: Vec<String> = list.iter().map(|s| s.to_string()).collect();
    k.sort();
    k
}

/// `run` args for `packs` with the given license.
fn run_args(env: &Env, packs: &[&Path], license: &Path) -> Vec<std::ffi::OsString> {
    let mut a = args!["run"];
    for p in packs {
        a.extend(args!["--pack", p]);
    }
    a.extend(env.lic_args(license));
    a
}

fn with(mut a: Vec<std::ffi::OsString>, more: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    a.extend(more);
    a
}

// ---------------------------------------------------------------------------
// Playbooks ([§4.1](docs/formats.md#s4-1), [§4.2](docs/formats.md#s4-2))
// ---------------------------------------------------------------------------

#[test]
fn playbook_not_yaml_unquoted_colon_is_a_compiler_error_naming_file_line_and_key() {
    let env = Env::new();
    let quoted = "description: \"Blocks internal project codes: never send them outside.\"";
    let text = fixture_text(EXAMPLE);
    assert!(text.contains(quoted));
    let p = env.write(
        "unquoted.yaml",
        text.replace(
            quoted,
            "description: Blocks internal project codes: never send them outside.",
        ),
    );
    let f = env.compile_fails(&p, &env.lic, "CompilerError", 3);
    assert!(
        f.message.starts_with("Failed to parse YAML playbook"),
        "{}",
        f.message
    );
    f.names(&["unquoted.yaml", "line 5", "description"]);
    // The quoted original compiles.
    env.compile(&fixture(EXAMPLE), &env.lic, &env.path("ok.hxpack"));
}

#[test]
fn playbook_other_yaml_errors_are_compiler_errors() {
    let env = Env::new();
    for (name, body) in [
        (
            "unclosed.yaml",
            "pack_id: [custom.x.v1\nrules: []\n".as_bytes(),
        ),
        ("tabs.yaml", b"pack_id: custom.x.v1\nrules:\n\t- id: a\n"),
        ("binary.yaml", b"\xff\xfe\x00\x01pack_id"),
        (
            "dupkey.yaml",
            b"pack_id: custom.x.v1\nname: a\npack_id: custom.y.v1\n",
        ),
    ] {
        let p = env.write(name, body);
        let f = env.compile_fails(&p, &env.lic, "CompilerError", 3);
        assert!(
            f.message.starts_with("Failed to parse YAML playbook"),
            "{name}: {}",
            f.message
        );
        f.names(&[name]);
    }
    let p = env.write("scalar.yaml", "just a string\n");
    let f = env.compile_fails(&p, &env.lic, "CompilerError", 3);
    assert!(f.message.starts_with("Failed to parse YAML playbook"));
    f.names(&["scalar.yaml", "mapping"]);
}

#[test]
fn playbook_list_at_root_is_a_compiler_error() {
    let env = Env::new();
    let p = env.write("list.yaml", "- pack_id: custom.x.v1\n- rules: []\n");
    let f = env.compile_fails(&p, &env.lic, "CompilerError", 3);
    assert!(f.message.starts_with("Failed to parse YAML playbook"));
    f.names(&["list.yaml", "list", "mapping"]);
}

#[test]
fn playbook_empty_file_is_a_compiler_error() {
    let env = Env::new();
    for (name, body) in [("empty.yaml", ""), ("comment.yaml", "# nothing here\n")] {
        let p = env.write(name, body);
        let f = env.compile_fails(&p, &env.lic, "CompilerError", 3);
        assert!(f.message.starts_with("Failed to parse YAML playbook"));
        f.names(&[name, "empty"]);
    }
}

#[test]
fn playbook_of_50_mb_fails_fast() {
    let env = Env::new();
    let p = env.path("huge.yaml");
    {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&p).unwrap());
        w.write_all(b"pack_id: custom.huge.v1\ndescription: |\n")
            .unwrap();
        let line = format!("  {}\n", "lorem ipsum dolor ".repeat(6));
        let mut n = 0;
        while n < 50 * 1024 * 1024 {
            w.write_all(line.as_bytes()).unwrap();
            n += line.len();
        }
    }
    assert!(std::fs::metadata(&p).unwrap().len() >= 50 * 1024 * 1024);
    let t = Instant::now();
    let f = env.compile_fails(&p, &env.lic, "CompilerError", 3);
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t.elapsed()
    );
    assert!(f.message.starts_with("Failed to parse YAML playbook"));
    f.names(&["huge.yaml", "limit"]);
    // `manifest --playbook` reads with the same cap.
    let f = env.fails(args!["manifest", "--playbook", &p], "CompilerError", 3);
    f.names(&["huge.yaml"]);
}

#[test]
fn playbook_alias_bomb_is_refused_without_expanding_it() {
    // Nine levels of nine aliases: 9^9 strings if expanded.
    let env = Env::new();
    let mut yaml = String::from(
        "pack_id: custom.bomb.v1\na0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n",
    );
    for i in 1..10 {
        let refs = vec![format!("*a{}", i - 1); 9].join(", ");
        yaml.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    yaml.push_str("metadata: *a9\n");
    let p = env.write("bomb.yaml", &yaml);
    let t = Instant::now();
    let f = env.compile_fails(&p, &env.lic, "CompilerError", 3);
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t.elapsed()
    );
    assert!(f.message.starts_with("Failed to parse YAML playbook"));
    f.names(&["bomb.yaml", "repetition limit"]);
}

#[test]
fn playbook_missing_file_is_a_compiler_error_naming_it() {
    let env = Env::new();
    let f = env.compile_fails(&env.path("absent.yaml"), &env.lic, "CompilerError", 3);
    f.names(&["absent.yaml"]);
}

#[test]
fn playbook_without_pack_id_is_a_compiler_error() {
    let env = Env::new();
    for (name, body) in [
        ("nopid.yaml", "version: 1.0.0\nrules: []\n"),
        ("emptypid.yaml", "pack_id: ''\n"),
        ("numpid.yaml", "pack_id: 7\n"),
        ("nullpid.yaml", "pack_id: null\n"),
    ] {
        let p = env.write(name, body);
        let f = env.compile_fails(&p, &env.lic, "CompilerError", 3);
        f.names(&[name, "pack_id"]);
    }
}

#[test]
fn playbook_with_five_broken_rules_lists_all_five() {
    let env = Env::new();
    let p = env.write(
        "five.yaml",
        r#"pack_id: custom.five.v1
rules:
  - id: no_type
    pattern: 'a'
    action: block
  - id: bad_action
    type: regex
    pattern: 'b'
    action: allow
  - id: lookahead
    type: regex
    pattern: 'x(?=y)'
    action: block
  - type: regex
    pattern: 'c'
    action: redact
  - id: empty_match
    type: regex
    pattern: 'a*'
    action: redact
"#,
    );
    let f = env.compile_fails(&p, &env.lic, "UnsupportedPackDeclarationError", 3);
    f.names(&["five.yaml"]);
    assert_eq!(f.problems.len(), 5, "{:#?}", f.problems);
    let expect = [
        ("rules[0] (id `no_type`)", "`type`"),
        ("rules[1] (id `bad_action`)", "`allow`"),
        ("rules[2] (id `lookahead`)", "look-around"),
        ("rules[3]", "`id`"),
        ("rules[4] (id `empty_match`)", "empty"),
    ];
    for (p, (place, what)) in f.problems.iter().zip(expect) {
        assert!(p.starts_with(place), "{p} should start with {place}");
        assert!(p.contains(what), "{p} should name {what}");
    }
    // Every problem is also in the text form, one per line.
    assert_eq!(f.text.lines().filter(|l| l.starts_with("  - ")).count(), 5);
}

#[test]
fn playbook_with_more_rule_problems_names_each() {
    let env = Env::new();
    let p = env.write(
        "more.yaml",
        r#"pack_id: custom.more.v1
rules:
  - id: a
    type: glob
    pattern: 'x'
    action: block
  - id: a
    type: regex
    pattern: 'y'
    action: block
  - id: c
    type: regex
    action: redact
  - id: d
    type: regex
    pattern: 'z'
    action: block
    flags: [IGNORECASE, VERBOSE]
  - id: e
    type: regex
    pattern: 5
    action: block
  - 7
"#,
    );
    let f = env.compile_fails(&p, &env.lic, "UnsupportedPackDeclarationError", 3);
    let all = f.problems.join("\n");
    for needle in [
        "rules[0] (id `a`): unsupported type `glob`",
        "rules[1] (id `a`): duplicate id",
        "rules[2] (id `c`): missing `pattern`",
        "rules[3] (id `d`): unknown flag `VERBOSE`",
        "rules[4] (id `e`): `pattern` is not a string",
        "rules[5]: is not a mapping",
    ] {
        assert!(all.contains(needle), "missing {needle:?} in\n{all}");
    }
}

#[test]
fn playbook_pattern_with_look_around_is_refused_without_quoting_it() {
    let env = Env::new();
    for (i, pattern) in [r"secretword(?=X)", r"(?<!Y)secretword", r"(secretword)\1"]
        .iter()
        .enumerate()
    {
        let name = format!("look{i}.yaml");
        let p = env.write(
            &name,
            format!(
                "pack_id: custom.look.v1\nrules:\n  - id: looky\n    type: regex\n    pattern: '{pattern}'\n    action: block\n"
            ),
        );
        let f = env.compile_fails(&p, &env.lic, "UnsupportedPackDeclarationError", 3);
        assert_eq!(f.problems.len(), 1);
        let prob = &f.problems[0];
        assert!(
            prob.starts_with("rules[0] (id `looky`): `pattern`"),
            "{prob}"
        );
        assert!(prob.contains("not a valid regular expression"), "{prob}");
        if i < 2 {
            assert!(prob.contains("look-around"), "{prob}");
        }
        assert!(
            !f.text.contains("secretword"),
            "the pattern is never quoted"
        );
        f.names(&[&name]);
    }
}

#[test]
fn playbook_pattern_over_the_regex_size_limit_is_refused_fast() {
    let env = Env::new();
    let p = env.write(
        "bigre.yaml",
        "pack_id: custom.bigre.v1\nrules:\n  - id: huge\n    type: regex\n    pattern: '(?:\\w{500}){500}'\n    action: block\n",
    );
    let t = Instant::now();
    let f = env.compile_fails(&p, &env.lic, "UnsupportedPackDeclarationError", 3);
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(f.problems.len(), 1);
    assert!(f.problems[0].starts_with("rules[0] (id `huge`): `pattern`"));
    assert!(f.problems[0].contains("size limit"), "{}", f.problems[0]);
    f.names(&["bigre.yaml"]);
}

#[test]
fn playbook_pattern_too_costly_to_evaluate_is_refused_by_rule_id() {
    // [§11.4](docs/limits.md#s11-4): nested counted repetition (seconds per 100 KB) and
    // quadratic match iteration are refused, naming the rules, fast.
    let env = Env::new();
    let p = env.write(
        "costly.yaml",
        "pack_id: custom.costly.v1\nrules:\n  - id: nested_count\n    type: regex\n    pattern: '(a{1,100}){1,100}b'\n    action: block\n  - id: fine\n    type: regex\n    pattern: 'TCK-\\d{6}'\n    action: redact\n  - id: rescan\n    type: regex\n    pattern: '[a-z]+X|[a-z]{100}'\n    action: redact\n  - id: letter\n    type: regex\n    pattern: '[a-z]{1,8}X|[a-z]'\n    action: redact\n",
    );
    let t = Instant::now();
    let f = env.compile_fails(&p, &env.lic, "UnsupportedPackDeclarationError", 3);
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(f.problems.len(), 3, "{:#?}", f.problems);
    assert!(f.problems[0].starts_with("rules[0] (id `nested_count`): `pattern` is too costly"));
    assert!(f.problems[1].starts_with("rules[2] (id `rescan`): `pattern` is too costly"));
    // A match at every letter: about 120 ms for 1 MiB of letters.
    assert!(f.problems[2].starts_with("rules[3] (id `letter`): `pattern` is too costly"));
    assert!(f.problems[2].contains("densely"), "{}", f.problems[2]);
    f.names(&[
        "costly.yaml",
        "nested_count",
        "rescan",
        "letter",
        "too costly",
    ]);
    assert!(
        !f.text.contains("a{1,100}") && !f.text.contains("[a-z]+X"),
        "never quoted"
    );
    assert!(!env.path("costly.hxpack").exists());
}

#[test]
fn pack_sealed_with_a_costly_pattern_fails_to_load() {
    // A pack sealed by a compiler without the [§11.4](docs/limits.md#s11-4) check: the same check at
    // load refuses it, with the compiler's error name and exit code.
    let env = Env::new();
    let lic: Value = serde_json::from_slice(&std::fs::read(&env.lic).unwrap()).unwrap();
    let key: [u8; 32] = B64
        .decode(lic["content_key"].as_str().unwrap())
        .unwrap()
        .try_into()
        .unwrap();
    let license_id = lic["license_id"].as_str().unwrap();
    let doc = json!({
        "pack_id": "custom.old_compiler.v1",
        "version": "1",
        "rules": [{"id": "slow_rule", "type": "regex", "pattern": "[a-z]+X|[a-z]", "action": "redact"}]
    });
    let plain = helixor::canonical_json(&doc).unwrap();
    let sealed =
        helixor::testing::seal("custom.old_compiler.v1", license_id, key, plain.as_bytes())
            .unwrap();
    let pack = env.write("old.hxpack", sealed);
    for a in [
        with(run_args(&env, &[&pack], &env.lic), args!["--text", "hi"]),
        with(args!["inspect", &pack], env.lic_args(&env.lic)),
    ] {
        let f = env.fails(a, "UnsupportedPackDeclarationError", 3);
        f.names(&["old.hxpack", "slow_rule", "too costly"]);
        assert!(!f.text.contains("[a-z]+X"), "never quoted");
    }
}

#[test]
fn playbook_with_a_changed_codon_or_hard_rule_is_refused() {
    let env = Env::new();
    let reference = fixture_text("regulatory_pii_guard.yaml");
    // Unchanged, it compiles.
    env.compile(
        &fixture("regulatory_pii_guard.yaml"),
        &env.lic,
        &env.path("reg.hxpack"),
    );

    let changed = reference.replacen(
        "remedy_template: \"[REDACTED_SSN]\"",
        "remedy_template: \"[SSN]\"",
        1,
    );
    assert_ne!(changed, reference);
    let p = env.write("codon.yaml", changed);
    let f = env.compile_fails(&p, &env.lic, "UnsupportedPackDeclarationError", 3);
    assert_eq!(f.problems.len(), 1, "{:#?}", f.problems);
    assert!(f.problems[0].starts_with("codons[0] (code `PII_SSN_EXTRACT`)"));
    f.names(&["codon.yaml"]);

    let changed = reference.replacen(
        "pattern: '\\b(?:MRN|EHR|RX)",
        "pattern: '\\b(?:MRN|EHR|RX|PHI)",
        1,
    );
    assert_ne!(changed, reference);
    let p = env.write("codon2.yaml", changed);
    let f = env.compile_fails(&p, &env.lic, "UnsupportedPackDeclarationError", 3);
    assert_eq!(f.problems.len(), 1, "{:#?}", f.problems);
    assert!(f.problems[0].starts_with("codons[2] (code `PII_HEALTH_EXTRACT`)"));

    let changed = reference.replacen("severity: fatal", "severity: warning", 1);
    let p = env.write("hard.yaml", changed);
    let f = env.compile_fails(&p, &env.lic, "UnsupportedPackDeclarationError", 3);
    assert_eq!(f.problems.len(), 1, "{:#?}", f.problems);
    assert!(f.problems[0].starts_with("hard_rules[0] (id `RULE-GLBA-SSN-BLOCK`)"));
    f.names(&["hard.yaml"]);
}

#[test]
fn playbook_with_custom_hard_rules_codons_or_duplicates_is_refused() {
    let env = Env::new();
    let p = env.write(
        "custom_hr.yaml",
        r#"pack_id: custom.hr.v1
hard_rules:
  - id: MY-RULE
    condition: state.has_x == True
    action: block_x
    severity: fatal
codons:
  - code: PII_PASSPORT_EXTRACT
    kind: codon
"#,
    );
    let f = env.compile_fails(&p, &env.lic, "UnsupportedPackDeclarationError", 3);
    assert_eq!(f.problems.len(), 2, "{:#?}", f.problems);
    assert!(f.problems[0].starts_with("codons[0] (code `PII_PASSPORT_EXTRACT`)"));
    assert!(f.problems[1].starts_with("hard_rules[0] (id `MY-RULE`)"));
    f.names(&["custom_hr.yaml"]);

    // A built-in declared twice.
    let reference = fixture_text("regulatory_pii_guard.yaml");
    let start = reference.find("  - id: RULE-GLBA-SSN-BLOCK").unwrap();
    let end = reference.find("  - id: RULE-PCI-DSS-PAN-BLOCK").unwrap();
    let twice = format!(
        "{}{}{}",
        &reference[..end],
        &reference[start..end],
        &reference[end..]
    );
    let p = env.write("twice.yaml", twice);
    let f = env.compile_fails(&p, &env.lic, "UnsupportedPackDeclarationError", 3);
    assert_eq!(f.problems.len(), 1, "{:#?}", f.problems);
    assert!(f.problems[0].starts_with("hard_rules[1] (id `RULE-GLBA-SSN-BLOCK`)"));
    assert!(f.problems[0].contains("twice"));
}

#[test]
fn playbook_pack_id_not_licensed_is_an_entitlement_error() {
    let env = Env::new();
    let narrow = env.issue("lic_narrow", &["--packs", "custom.internal_*"]);
    let f = env.compile_fails(
        &fixture("order_notes.yaml"),
        &narrow,
        "LicenseEntitlementError",
        4,
    );
    f.names(&[
        "custom.order_notes.v1",
        "licensed_packs",
        "lic_narrow.hxlic",
    ]);
    // A matching glob compiles.
    env.compile(
        &fixture("internal_ids.yaml"),
        &narrow,
        &env.path("ids.hxpack"),
    );
}

#[test]
fn playbook_solver_not_licensed_is_an_entitlement_error() {
    let env = Env::new();
    let lic = env.issue(
        "lic_solvers",
        &["--packs", "custom.*", "--solvers", "z3,cvc*"],
    );
    let p = env.write(
        "solvers.yaml",
        "pack_id: custom.solvers.v1\nsolvers: [z3, {name: gurobi}]\n",
    );
    let f = env.compile_fails(&p, &lic, "LicenseEntitlementError", 4);
    f.names(&["gurobi", "licensed_solvers", "lic_solvers.hxlic"]);
    let p = env.write(
        "solvers_ok.yaml",
        "pack_id: custom.solvers.v1\nsolvers: [z3, {name: cvc5}]\n",
    );
    env.compile(&p, &lic, &env.path("solvers.hxpack"));
}

#[test]
fn playbook_unreadable_solvers_are_a_playbook_parse_error() {
    let env = Env::new();
    for (name, body, place) in [
        (
            "s1.yaml",
            "pack_id: custom.s.v1\nsolvers: [z3, {nam: gurobi}]\n",
            "solvers[1]",
        ),
        (
            "s2.yaml",
            "pack_id: custom.s.v1\nsolvers: [[a]]\n",
            "solvers[0]",
        ),
        (
            "s3.yaml",
            "pack_id: custom.s.v1\nsolvers: z3\n",
            "`solvers`",
        ),
        (
            "s4.yaml",
            "pack_id: custom.s.v1\nsolvers: [{name: 3}]\n",
            "solvers[0]",
        ),
    ] {
        let p = env.write(name, body);
        let f = env.compile_fails(&p, &env.lic, "PlaybookParseError", 3);
        f.names(&[name, place]);
    }
}

#[test]
fn playbook_values_json_cannot_hold_are_parse_errors_naming_the_path() {
    let env = Env::new();
    let p = env.write(
        "nan.yaml",
        "pack_id: custom.nan.v1\nbudget: {max_latency_ms: .nan}\n",
    );
    let f = env.compile_fails(&p, &env.lic, "PlaybookParseError", 3);
    f.names(&["nan.yaml", "budget.max_latency_ms"]);
    let p = env.write("rules.yaml", "pack_id: custom.r.v1\nrules: 3\n");
    let f = env.compile_fails(&p, &env.lic, "PlaybookParseError", 3);
    f.names(&["rules.yaml", "`rules`"]);
}

#[test]
fn reference_playbooks_compile() {
    let env = Env::new();
    for (f, id, sha) in [
        (
            "internal_ids.yaml",
            "custom.internal_ids.v1",
            INTERNAL_IDS_SHA,
        ),
        ("order_notes.yaml", "custom.order_notes.v1", ORDER_NOTES_SHA),
        (
            "regulatory_pii_guard.yaml",
            "compliance.regulatory_pii_guard.v1",
            REGULATORY_SHA,
        ),
        (EXAMPLE, EXAMPLE_ID, EXAMPLE_SHA),
    ] {
        let out = env.path(&f.replace(".yaml", ".hxpack"));
        let v = env.compile(&fixture(f), &env.lic, &out);
        assert_eq!(v["pack_id"], id);
        assert_eq!(v["sha256"], sha, "{f}");
    }
}

// ---------------------------------------------------------------------------
// Licenses ([§2](docs/formats.md#s2))
// ---------------------------------------------------------------------------

/// Asserts that every command that reads a license fails with `name`.
fn license_fails_everywhere(env: &Env, license: &Path, name: &str, needles: &[&str]) {
    let pack = env.pack(EXAMPLE);
    env.compile_fails(&fixture(EXAMPLE), license, name, 4)
        .names(needles);
    env.fails(
        with(run_args(env, &[&pack], license), args!["--text", "hi"]),
        name,
        4,
    )
    .names(needles);
    env.fails(
        with(args!["inspect", &pack], env.lic_args(license)),
        name,
        4,
    )
    .names(needles);
    env.fails(
        with(args!["manifest", "--pack", &pack], env.lic_args(license)),
        name,
        4,
    )
    .names(needles);
}

#[test]
fn license_not_json_is_a_license_error() {
    let env = Env::new();
    let bad = env.write("bad.hxlic", "not json {");
    license_fails_everywhere(&env, &bad, "LicenseError", &["bad.hxlic"]);
    env.fails(
        with(args!["inspect-license"], env.lic_args(&bad)),
        "LicenseError",
        4,
    )
    .names(&["bad.hxlic"]);
    let arr = env.write("array.hxlic", "[1, 2]");
    env.compile_fails(&fixture(EXAMPLE), &arr, "LicenseError", 4)
        .names(&["array.hxlic"]);
}

#[test]
fn license_fields_missing_or_malformed_are_license_errors_naming_the_field() {
    let env = Env::new();
    let good = read_json(&env.lic);
    let cases: Vec<(&str, Edit<Value>, &str)> = vec![
        (
            "nokey.hxlic",
            Box::new(|v: &mut Value| {
                v.as_object_mut().unwrap().remove("content_key");
            }),
            "content_key",
        ),
        (
            "shortkey.hxlic",
            Box::new(|v: &mut Value| v["content_key"] = json!(B64.encode([1u8; 16]))),
            "content_key",
        ),
        (
            "notb64.hxlic",
            Box::new(|v: &mut Value| v["content_key"] = json!("not base64!")),
            "content_key",
        ),
        (
            "time.hxlic",
            Box::new(|v: &mut Value| v["not_after"] = json!("next tuesday")),
            "not_after",
        ),
        (
            "packs.hxlic",
            Box::new(|v: &mut Value| v["licensed_packs"] = json!("custom.*")),
            "licensed_packs",
        ),
        (
            "nosig.hxlic",
            Box::new(|v: &mut Value| {
                v.as_object_mut().unwrap().remove("signature");
            }),
            "signature",
        ),
    ];
    for (name, edit, field) in cases {
        let mut v = good.clone();
        edit(&mut v);
        let p = env.path(name);
        write_json(&p, &v);
        env.compile_fails(&fixture(EXAMPLE), &p, "LicenseError", 4)
            .names(&[name, field]);
    }
    // The whole set of commands for the brief's case.
    let mut v = good.clone();
    v.as_object_mut().unwrap().remove("content_key");
    let p = env.path("nokey2.hxlic");
    write_json(&p, &v);
    license_fails_everywhere(&env, &p, "LicenseError", &["nokey2.hxlic", "content_key"]);
}

#[test]
fn license_signed_by_an_unknown_key_is_a_signature_error() {
    let env = Env::new();
    let other_keys = env.root().join("other-keys");
    env.ok(args![
        "license",
        "keygen",
        "--key-id",
        "rogue-issuer",
        "--out",
        &other_keys
    ]);
    let out = env.path("rogue.hxlic");
    env.ok(args![
        "license",
        "issue",
        "--issuer-key",
        other_keys.join("rogue-issuer.key"),
        "--license-id",
        "lic_rogue",
        "--licensee",
        "Mallory",
        "--features",
        "custom_playbook_compilation",
        "--out",
        &out
    ]);
    license_fails_everywhere(
        &env,
        &out,
        "LicenseSignatureError",
        &["rogue.hxlic", "rogue-issuer"],
    );
    // A key id we trust but a different key behind it.
    let impostor = env.root().join("impostor");
    std::fs::create_dir_all(&impostor).unwrap();
    std::fs::copy(
        other_keys.join("rogue-issuer.pub"),
        impostor.join(format!("{ISSUER}.pub")),
    )
    .unwrap();
    let mut a = env.compile_args(&fixture(EXAMPLE), &env.lic, &env.path("x.hxpack"));
    a.truncate(a.len() - 1);
    a.push(impostor.into_os_string());
    env.fails(a, "LicenseSignatureError", 4)
        .names(&["lic_main.hxlic"]);
}

#[test]
fn license_edited_after_signing_is_a_signature_error() {
    let env = Env::new();
    let good = read_json(&env.lic);
    let edits: Vec<(&str, Value)> = vec![
        ("licensee", json!("Evil Corp")),
        ("licensed_packs", json!(["*"])),
        ("not_after", json!("2099-01-01T00:00:00Z")),
        ("extra_field", json!(true)),
    ];
    for (field, value) in edits {
        let mut v = good.clone();
        v[field] = value;
        let name = format!("edited_{field}.hxlic");
        let p = env.path(&name);
        write_json(&p, &v);
        env.compile_fails(&fixture(EXAMPLE), &p, "LicenseSignatureError", 4)
            .names(&[&name]);
    }
    let mut v = good.clone();
    v["licensee"] = json!("Evil Corp");
    let p = env.path("edited.hxlic");
    write_json(&p, &v);
    license_fails_everywhere(&env, &p, "LicenseSignatureError", &["edited.hxlic"]);

    // Layout is not signed: the same data written compactly still verifies.
    let p = env.path("compact.hxlic");
    std::fs::write(&p, serde_json::to_vec(&good).unwrap()).unwrap();
    env.compile(&fixture(EXAMPLE), &p, &env.path("c.hxpack"));
}

#[test]
fn license_expired_is_refused_everywhere() {
    let env = Env::new();
    let lic = env.issue(
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
    license_fails_everywhere(
        &env,
        &lic,
        "LicenseExpiredError",
        &["lic_expired.hxlic", "2021-01-01T00:00:00Z"],
    );
}

#[test]
fn license_not_yet_valid_is_refused_everywhere() {
    let env = Env::new();
    let lic = env.issue(
        "lic_future",
        &[
            "--features",
            "custom_playbook_compilation",
            "--not-before",
            "2099-01-01T00:00:00Z",
            "--days",
            "10",
        ],
    );
    license_fails_everywhere(
        &env,
        &lic,
        "LicenseNotYetValidError",
        &["lic_future.hxlic", "2099-01-01T00:00:00Z"],
    );
}

#[test]
fn license_is_checked_before_the_playbook_and_the_pack() {
    // [§4.2](docs/formats.md#s4-2) step 1 and [§5](docs/formats.md#s5) step 1 come first.
    let env = Env::new();
    let expired = env.issue(
        "lic_old",
        &[
            "--features",
            "custom_playbook_compilation",
            "--not-before",
            "2020-01-01T00:00:00Z",
            "--days",
            "1",
        ],
    );
    let garbage = env.write("garbage.yaml", "- not: [a playbook\n");
    env.compile_fails(&garbage, &expired, "LicenseExpiredError", 4);
    let empty = env.write("empty.hxpack", "");
    env.fails(
        with(run_args(&env, &[&empty], &expired), args!["--text", "x"]),
        "LicenseExpiredError",
        4,
    );
    env.fails(
        with(args!["inspect", &empty], env.lic_args(&expired)),
        "LicenseExpiredError",
        4,
    );
}

#[test]
fn license_without_issuer_keys_is_a_signature_error_saying_so() {
    let env = Env::new();
    let out = env.path("p.hxpack");
    let f = env.fails(
        args![
            "compile",
            "--playbook",
            fixture(EXAMPLE),
            "--license",
            &env.lic,
            "--out",
            &out
        ],
        "LicenseSignatureError",
        4,
    );
    f.names(&["lic_main.hxlic", "no issuer keys"]);
    assert!(!out.exists());
    // An empty keys directory counts as none.
    let empty = env.root().join("empty-keys");
    std::fs::create_dir_all(&empty).unwrap();
    let f = env.fails(
        args![
            "compile",
            "--playbook",
            fixture(EXAMPLE),
            "--license",
            &env.lic,
            "--issuer-keys",
            &empty,
            "--out",
            &out
        ],
        "LicenseSignatureError",
        4,
    );
    f.names(&["no issuer keys"]);
    assert!(!out.exists());
}

#[test]
fn license_explicit_path_missing_is_not_found_naming_it_without_fallback() {
    let env = Env::new();
    // A license at every fallback place: an explicit choice must not use them.
    std::fs::copy(&env.lic, env.path("helixor.hxlic")).unwrap();
    std::fs::create_dir_all(env.home.join(".helixor")).unwrap();
    std::fs::copy(&env.lic, env.home.join(".helixor/helixor.hxlic")).unwrap();
    let missing = env.root().join("nowhere/missing.hxlic");
    env.compile_fails(&fixture(EXAMPLE), &missing, "LicenseNotFoundError", 4)
        .names(&["nowhere/missing.hxlic"]);
    // Same through the variable.
    let a = args!["inspect-license", "--issuer-keys", &env.keys];
    env.fails_with(
        &a,
        &[("HELIXOR_LICENSE_FILE", &missing)],
        None,
        "LicenseNotFoundError",
        4,
    )
    .names(&["nowhere/missing.hxlic", "HELIXOR_LICENSE_FILE"]);
}

#[test]
fn license_nowhere_is_not_found() {
    let env = Env::new();
    let pack = env.pack(EXAMPLE);
    let out = env.path("p.hxpack");
    env.fails(
        args![
            "compile",
            "--playbook",
            fixture(EXAMPLE),
            "--issuer-keys",
            &env.keys,
            "--out",
            &out
        ],
        "LicenseNotFoundError",
        4,
    )
    .names(&["helixor.hxlic"]);
    assert!(!out.exists());
    env.fails(
        args![
            "run",
            "--pack",
            &pack,
            "--issuer-keys",
            &env.keys,
            "--text",
            "x"
        ],
        "LicenseNotFoundError",
        4,
    );
    env.fails(args!["inspect-license"], "LicenseNotFoundError", 4);
    env.fails(
        args!["manifest", "--pack", &pack],
        "LicenseNotFoundError",
        4,
    );
}

#[test]
fn license_lookup_order() {
    let env = Env::new();
    let ids = ["lic_flag", "lic_env", "lic_cwd", "lic_home", "lic_home_lic"];
    let lics: Vec<PathBuf> = ids.iter().map(|id| env.issue(id, &[])).collect();
    let dot = env.home.join(".helixor");
    std::fs::create_dir_all(&dot).unwrap();
    std::fs::copy(&lics[2], env.path("helixor.hxlic")).unwrap();
    std::fs::copy(&lics[3], dot.join("helixor.hxlic")).unwrap();
    std::fs::copy(&lics[4], dot.join("helixor.lic")).unwrap();

    let chosen = |flag: bool, var: bool| -> String {
        let mut a = args!["inspect-license", "--json", "--issuer-keys", &env.keys];
        if flag {
            a.extend(args!["--license", &lics[0]]);
        }
        let envs: Vec<(&str, &Path)> = if var {
            vec![("HELIXOR_LICENSE_FILE", lics[1].as_path())]
        } else {
            vec![]
        };
        let out = env.ok_with(&a, &envs, None);
        let v: Value = serde_json::from_str(&out).unwrap();
        v["license_id"].as_str().unwrap().to_string()
    };
    assert_eq!(chosen(true, true), "lic_flag");
    assert_eq!(chosen(false, true), "lic_env");
    assert_eq!(chosen(false, false), "lic_cwd");
    std::fs::remove_file(env.path("helixor.hxlic")).unwrap();
    assert_eq!(chosen(false, false), "lic_home");
    std::fs::remove_file(dot.join("helixor.hxlic")).unwrap();
    assert_eq!(chosen(false, false), "lic_home_lic");
    std::fs::remove_file(dot.join("helixor.lic")).unwrap();
    env.fails(
        args!["inspect-license", "--issuer-keys", &env.keys],
        "LicenseNotFoundError",
        4,
    );

    // compile and run use the same lookup (./helixor.hxlic from the working directory).
    std::fs::copy(&env.lic, env.path("helixor.hxlic")).unwrap();
    let pack = env.path("ex.hxpack");
    env.ok(args![
        "compile",
        "--playbook",
        fixture(EXAMPLE),
        "--issuer-keys",
        &env.keys,
        "--out",
        &pack
    ]);
    let d: Value = serde_json::from_str(&env.ok(args![
        "run",
        "--pack",
        &pack,
        "--issuer-keys",
        &env.keys,
        "--text",
        "Release PROJ-ZEUS-9 today"
    ]))
    .unwrap();
    assert_eq!(d["action"], "block_project_code");
}

#[test]
fn issuer_keys_lookup_order() {
    let env = Env::new();
    let wrong = env.root().join("wrong-keys");
    env.ok(args![
        "license", "keygen", "--key-id", ISSUER, "--out", &wrong
    ]);
    let home_keys = env.home.join(".helixor/issuer-keys");

    let verified = |flag: Option<&Path>, var: Option<&Path>| -> bool {
        let mut a = args!["inspect-license", "--json", "--license", &env.lic];
        if let Some(f) = flag {
            a.extend(args!["--issuer-keys", f]);
        }
        let envs: Vec<(&str, &Path)> = var
            .map(|v| ("HELIXOR_ISSUER_KEYS", v))
            .into_iter()
            .collect();
        let out = env.output_with(&a, &envs, None);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let ok = v["signature_verified"].as_bool().unwrap();
        assert_eq!(out.status.code(), Some(if ok { 0 } else { 4 }));
        ok
    };
    // The flag beats the variable.
    assert!(!verified(Some(&wrong), Some(&env.keys)));
    assert!(verified(Some(&env.keys), Some(&wrong)));
    // The variable beats ~/.helixor/issuer-keys/, without falling back.
    std::fs::create_dir_all(&home_keys).unwrap();
    std::fs::copy(
        wrong.join(format!("{ISSUER}.pub")),
        home_keys.join(format!("{ISSUER}.pub")),
    )
    .unwrap();
    assert!(verified(None, Some(&env.keys)));
    std::fs::copy(
        env.keys.join(format!("{ISSUER}.pub")),
        home_keys.join(format!("{ISSUER}.pub")),
    )
    .unwrap();
    assert!(!verified(None, Some(&wrong)));
    // Last, the home directory.
    assert!(verified(None, None));
    std::fs::remove_dir_all(&home_keys).unwrap();
    assert!(!verified(None, None));

    // A JSON keys file works as well as a directory.
    let public = std::fs::read_to_string(env.keys.join(format!("{ISSUER}.pub"))).unwrap();
    let file = env.write(
        "keys.json",
        serde_json::to_vec(&json!({ ISSUER: public.trim() })).unwrap(),
    );
    assert!(verified(Some(&file), None));
    assert!(verified(None, Some(&file)));

    // An explicit path that is missing or malformed is a LicenseError naming it.
    let missing = env.root().join("no-such-keys");
    env.fails(
        args![
            "inspect-license",
            "--license",
            &env.lic,
            "--issuer-keys",
            &missing
        ],
        "LicenseError",
        4,
    )
    .names(&["no-such-keys"]);
    let a = args!["inspect-license", "--license", &env.lic];
    env.fails_with(
        &a,
        &[("HELIXOR_ISSUER_KEYS", &missing)],
        None,
        "LicenseError",
        4,
    )
    .names(&["no-such-keys"]);
    let bad = env.write("badkeys.json", "{\"test-issuer\": \"short\"}");
    env.fails(
        args![
            "inspect-license",
            "--license",
            &env.lic,
            "--issuer-keys",
            &bad
        ],
        "LicenseError",
        4,
    )
    .names(&["badkeys.json", "test-issuer"]);
}

#[test]
fn license_over_64_kib_is_refused_before_parsing() {
    let env = Env::new();
    let text = std::fs::read_to_string(&env.lic).unwrap();
    let text = text.trim_end();
    // Whitespace is not signed: exactly 64 KiB still verifies.
    let pad = |n: usize| format!("{text}{}", " ".repeat(n - text.len()));
    let at = env.write("at_limit.hxlic", pad(64 * 1024));
    assert_eq!(std::fs::metadata(&at).unwrap().len(), 65536);
    env.ok(with(args!["inspect-license"], env.lic_args(&at)));
    env.compile(&fixture(EXAMPLE), &at, &env.path("a.hxpack"));

    let over = env.write("over_limit.hxlic", pad(64 * 1024 + 1));
    env.compile_fails(&fixture(EXAMPLE), &over, "LicenseError", 4)
        .names(&["over_limit.hxlic", "65536"]);
    env.fails(
        with(args!["inspect-license"], env.lic_args(&over)),
        "LicenseError",
        4,
    );
    // A huge file is refused quickly, without being read whole.
    let huge = env.path("huge.hxlic");
    std::fs::write(&huge, vec![b' '; 20 * 1024 * 1024]).unwrap();
    let t = Instant::now();
    env.compile_fails(&fixture(EXAMPLE), &huge, "LicenseError", 4)
        .names(&["huge.hxlic"]);
    assert!(t.elapsed() < Duration::from_secs(10));
}

// ---------------------------------------------------------------------------
// inspect-license ([§8](docs/cli.md#s8))
// ---------------------------------------------------------------------------

const INSPECT_LICENSE_KEYS: [&str; 13] = [
    "license_id",
    "licensee",
    "tier",
    "issued_at",
    "not_before",
    "not_after",
    "seconds_left",
    "valid_now",
    "licensed_packs",
    "licensed_solvers",
    "features",
    "issuer_key_id",
    "signature_verified",
];

#[test]
fn inspect_license_reports_every_field_and_never_the_content_key() {
    let env = Env::new();
    let content_key = read_json(&env.lic)["content_key"]
        .as_str()
        .unwrap()
        .to_string();
    let out = env.output_with(
        &with(args!["inspect-license", "--json"], env.lic_args(&env.lic)),
        &[],
        None,
    );
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(sorted_keys(&v), keys_of(&INSPECT_LICENSE_KEYS));
    assert_eq!(v["license_id"], "lic_main");
    assert_eq!(v["licensee"], "Test Corp");
    assert_eq!(v["tier"], "DEVELOPER");
    assert_eq!(v["licensed_packs"], json!(["custom.*", "compliance.*"]));
    assert_eq!(v["licensed_solvers"], json!([]));
    assert_eq!(v["features"], json!(["custom_playbook_compilation"]));
    assert_eq!(v["issuer_key_id"], ISSUER);
    assert_eq!(v["signature_verified"], true);
    assert_eq!(v["valid_now"], true);
    let left = v["seconds_left"].as_i64().unwrap();
    assert!((365 * 86400 - 600..=365 * 86400).contains(&left), "{left}");
    for t in ["issued_at", "not_before", "not_after"] {
        let s = v[t].as_str().unwrap();
        assert!(s.len() == 20 && s.ends_with('Z'), "{t}: {s}");
    }
    assert!(!stdout.contains("content_key") && !stdout.contains(&content_key));
    assert!(!String::from_utf8_lossy(&out.stderr).contains(&content_key));

    // Text for people: the same facts, never the key.
    let text = env.ok(with(args!["inspect-license"], env.lic_args(&env.lic)));
    assert!(text.contains("lic_main") && text.contains("Test Corp"));
    assert!(!text.contains(&content_key) && !text.contains("content_key"));
}

#[test]
fn inspect_license_reports_bad_signature_and_expiry_with_exit_4() {
    let env = Env::new();
    let mut v = read_json(&env.lic);
    v["licensee"] = json!("Evil Corp");
    let edited = env.path("edited.hxlic");
    write_json(&edited, &v);
    let expired = env.issue(
        "lic_expired",
        &[
            "--not-before",
            "2020-01-01T00:00:00Z",
            "--not-after",
            "2021-01-01T00:00:00Z",
        ],
    );
    let future = env.issue("lic_future", &["--not-before", "2099-01-01T00:00:00Z"]);
    for (lic, sig, valid) in [
        (&edited, false, true),
        (&expired, true, false),
        (&future, true, false),
    ] {
        for json_flag in [true, false] {
            let mut a = with(args!["inspect-license"], env.lic_args(lic));
            if json_flag {
                a.push("--json".into());
            }
            let out = env.output_with(&a, &[], None);
            assert_eq!(out.status.code(), Some(4), "{lic:?}");
            let stdout = String::from_utf8(out.stdout).unwrap();
            assert!(!stdout.is_empty(), "the report is still printed");
            if json_flag {
                let r: Value = serde_json::from_str(&stdout).unwrap();
                assert_eq!(sorted_keys(&r), keys_of(&INSPECT_LICENSE_KEYS));
                assert_eq!(r["signature_verified"], sig);
                assert_eq!(r["valid_now"], valid);
                if lic == &expired {
                    assert_eq!(r["seconds_left"], 0);
                    assert_eq!(r["not_after"], "2021-01-01T00:00:00Z");
                }
                if lic == &edited {
                    assert_eq!(r["licensee"], "Evil Corp");
                }
            }
        }
    }
    // No issuer keys configured: reported as unverified.
    let a = args!["inspect-license", "--json", "--license", &env.lic];
    let out = env.output_with(&a, &[], None);
    assert_eq!(out.status.code(), Some(4));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["signature_verified"], false);
}

// ---------------------------------------------------------------------------
// license keygen / issue ([§2](docs/formats.md#s2), [§8](docs/cli.md#s8))
// ---------------------------------------------------------------------------

#[test]
fn license_keygen_writes_a_private_key_and_a_public_key() {
    let env = Env::new();
    let dir = env.root().join("new-keys");
    let out = env.ok(args![
        "license",
        "keygen",
        "--key-id",
        "acme-2026",
        "--out",
        &dir
    ]);
    assert!(out.contains("acme-2026.pub"));
    assert_eq!(entries(&dir), ["acme-2026.key", "acme-2026.pub"]);
    let secret_path = dir.join("acme-2026.key");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&secret_path)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
    let secret = read_json(&secret_path);
    assert_eq!(sorted_keys(&secret), ["key_id", "secret_key"]);
    assert_eq!(secret["key_id"], "acme-2026");
    let seed = B64.decode(secret["secret_key"].as_str().unwrap()).unwrap();
    assert_eq!(seed.len(), 32);
    let public = std::fs::read_to_string(dir.join("acme-2026.pub")).unwrap();
    assert_eq!(B64.decode(public.trim()).unwrap().len(), 32);
    assert!(!out.contains(secret["secret_key"].as_str().unwrap()));
}

#[test]
fn license_issue_defaults_and_list_flags() {
    let env = Env::new();
    let before = time::OffsetDateTime::now_utc().unix_timestamp();
    let lic = env.issue(
        "lic_lists",
        &[
            "--packs",
            "a.*,b.*",
            "--packs",
            "c.x.v1",
            "--solvers",
            "z3, cvc*",
            "--features",
            "custom_playbook_compilation,other",
        ],
    );
    let after = time::OffsetDateTime::now_utc().unix_timestamp();
    let v = read_json(&lic);
    let mut expected = INSPECT_LICENSE_KEYS
        .iter()
        .filter(|k| !["seconds_left", "valid_now", "signature_verified"].contains(k))
        .copied()
        .collect::<Vec<_>>();
    expected.extend(["format", "content_key", "signature"]);
    assert_eq!(sorted_keys(&v), keys_of(&expected));
    assert_eq!(v["format"], "helixor.license.v1");
    assert_eq!(v["tier"], "DEVELOPER");
    assert_eq!(v["licensed_packs"], json!(["a.*", "b.*", "c.x.v1"]));
    assert_eq!(v["licensed_solvers"], json!(["z3", "cvc*"]));
    assert_eq!(
        v["features"],
        json!(["custom_playbook_compilation", "other"])
    );
    assert_eq!(v["issuer_key_id"], ISSUER);
    assert_eq!(
        B64.decode(v["content_key"].as_str().unwrap())
            .unwrap()
            .len(),
        32
    );
    assert_eq!(
        B64.decode(v["signature"].as_str().unwrap()).unwrap().len(),
        64
    );
    let t = |k: &str| {
        time::OffsetDateTime::parse(
            v[k].as_str().unwrap(),
            &time::format_description::well_known::Rfc3339,
        )
        .unwrap()
        .unix_timestamp()
    };
    assert!((before - 1..=after).contains(&t("not_before")));
    assert!((before - 1..=after).contains(&t("issued_at")));
    assert_eq!(t("not_after") - t("not_before"), 365 * 86400);

    // --not-before with --days; any offset is written in UTC; --tier.
    let lic = env.issue(
        "lic_days",
        &[
            "--not-before",
            "2030-01-01T02:00:00+02:00",
            "--days",
            "10",
            "--tier",
            "ENTERPRISE",
        ],
    );
    let v = read_json(&lic);
    assert_eq!(v["not_before"], "2030-01-01T00:00:00Z");
    assert_eq!(v["not_after"], "2030-01-11T00:00:00Z");
    assert_eq!(v["tier"], "ENTERPRISE");
    assert_eq!(v["licensed_packs"], json!([]));
}

#[test]
fn license_issue_days_with_not_after_is_a_usage_error() {
    let env = Env::new();
    let out = env.path("both.hxlic");
    let f = env.fails(
        args![
            "license",
            "issue",
            "--issuer-key",
            &env.key_file,
            "--license-id",
            "x",
            "--licensee",
            "y",
            "--days",
            "3",
            "--not-after",
            "2030-01-01T00:00:00Z",
            "--out",
            &out
        ],
        "UsageError",
        2,
    );
    f.names(&["--days", "--not-after"]);
    assert!(!out.exists());
    let f = env.fails(
        args![
            "license",
            "issue",
            "--issuer-key",
            &env.key_file,
            "--license-id",
            "x",
            "--licensee",
            "y",
            "--not-before",
            "yesterday",
            "--out",
            &out
        ],
        "UsageError",
        2,
    );
    f.names(&["--not-before"]);
    assert!(!out.exists());
    let f = env.fails(
        args![
            "license",
            "issue",
            "--issuer-key",
            &env.key_file,
            "--license-id",
            "x",
            "--licensee",
            "y",
            "--not-before",
            "2030-01-02T00:00:00Z",
            "--not-after",
            "2030-01-01T00:00:00Z",
            "--out",
            &out
        ],
        "UsageError",
        2,
    );
    f.names(&["2030-01-01T00:00:00Z", "2030-01-02T00:00:00Z"]);
    assert!(!out.exists());
    let f = env.fails(
        args![
            "license",
            "keygen",
            "--key-id",
            "a/b",
            "--out",
            &env.path("k")
        ],
        "UsageError",
        2,
    );
    f.names(&["--key-id", "a/b"]);
    assert_eq!(entries(&env.work), Vec::<String>::new());
}

// ---------------------------------------------------------------------------
// Packs ([§3](docs/formats.md#s3), [§5](docs/formats.md#s5))
// ---------------------------------------------------------------------------

/// Every way a pack is loaded: run, inspect --license, manifest --pack.
fn pack_fails_everywhere(env: &Env, pack: &Path, license: &Path, name: &str) -> Failure {
    let code = if name.starts_with("License") { 4 } else { 5 };
    let f = env.fails(
        with(run_args(env, &[pack], license), args!["--text", "hi"]),
        name,
        code,
    );
    env.fails(
        with(args!["inspect", pack], env.lic_args(license)),
        name,
        code,
    );
    env.fails(
        with(args!["manifest", "--pack", pack], env.lic_args(license)),
        name,
        code,
    );
    f
}

#[test]
fn pack_format_errors() {
    let env = Env::new();
    let good = env.pack(EXAMPLE);
    let n = id_len(&std::fs::read(&good).unwrap());
    assert_eq!(n, EXAMPLE_ID.len());
    let cases: Vec<(&str, Edit<Vec<u8>>, &str)> = vec![
        (
            "empty.hxpack",
            Box::new(|b: &mut Vec<u8>| b.clear()),
            "0 bytes",
        ),
        (
            "short.hxpack",
            Box::new(|b: &mut Vec<u8>| b.truncate(55)),
            "55 bytes",
        ),
        (
            "magic.hxpack",
            Box::new(|b: &mut Vec<u8>| b[0] = b'X'),
            "magic",
        ),
        (
            "v2.hxpack",
            Box::new(|b: &mut Vec<u8>| b[5] = 2),
            "version 2",
        ),
        (
            "idlen.hxpack",
            Box::new(|b: &mut Vec<u8>| {
                b[6] = 0xff;
                b[7] = 0xff;
            }),
            "pack id length",
        ),
        (
            "idlen2.hxpack",
            // One byte too long for the file to hold nonce, digest and tag.
            Box::new(|b: &mut Vec<u8>| {
                let room = b.len() - 8 - 12 - 32 - 16 + 1;
                b[6..8].copy_from_slice(&u16::try_from(room).unwrap().to_be_bytes());
            }),
            "pack id length",
        ),
        (
            "utf8.hxpack",
            Box::new(move |b: &mut Vec<u8>| b[8..8 + n].fill(0xff)),
            "UTF-8",
        ),
    ];
    for (name, edit, needle) in cases {
        let p = mutate(&good, &env.path(name), edit);
        pack_fails_everywhere(&env, &p, &env.lic, "PackFormatError").names(&[name, needle]);
        // The header alone is read without a license as well.
        env.fails(args!["inspect", &p, "--json"], "PackFormatError", 5)
            .names(&[name]);
    }
    let missing = env.path("absent.hxpack");
    pack_fails_everywhere(&env, &missing, &env.lic, "PackFormatError").names(&["absent.hxpack"]);
}

#[test]
fn pack_over_16_mib_is_a_format_error() {
    let env = Env::new();
    let good = std::fs::read(env.pack(EXAMPLE)).unwrap();
    let mut big = good.clone();
    big.resize(16 * 1024 * 1024 + 1, 0);
    let p = env.write("big.hxpack", &big);
    pack_fails_everywhere(&env, &p, &env.lic, "PackFormatError").names(&["big.hxpack", "limit"]);
}

#[test]
fn pack_with_a_flipped_bit_in_nonce_ciphertext_or_tag_fails_to_unseal() {
    let env = Env::new();
    let good = env.pack(EXAMPLE);
    let bytes = std::fs::read(&good).unwrap();
    let n = id_len(&bytes);
    let len = bytes.len();
    for (name, at) in [
        ("nonce.hxpack", 8 + n),
        ("nonce_last.hxpack", 8 + n + 11),
        ("ciphertext.hxpack", 52 + n),
        ("ciphertext_mid.hxpack", (52 + n + len - 16) / 2),
        ("tag.hxpack", len - 16),
        ("tag_last.hxpack", len - 1),
    ] {
        let p = mutate(&good, &env.path(name), |b| b[at] ^= 0x01);
        let f = pack_fails_everywhere(&env, &p, &env.lic, "PackUnsealError");
        assert_eq!(f.message, UNSEAL_MESSAGE);
        assert_eq!(f.text, format!("PackUnsealError: {UNSEAL_MESSAGE}\n"));
    }
}

#[test]
fn pack_any_bit_flip_is_refused_without_panic() {
    let env = Env::new();
    let good = env.pack(EXAMPLE);
    let len = std::fs::read(&good).unwrap().len();
    let flipped = env.path("flip.hxpack");
    let mut at = 0;
    while at < len {
        mutate(&good, &flipped, |b| b[at] ^= 1 << (at % 8));
        let out = env.output_with(
            &with(run_args(&env, &[&flipped], &env.lic), args!["--text", "x"]),
            &[],
            None,
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        let code = out.status.code();
        assert!(
            matches!(code, Some(4 | 5)),
            "byte {at}: exit {code:?}: {stderr}"
        );
        assert!(
            stderr.starts_with("Pack") || stderr.starts_with("LicenseEntitlementError"),
            "byte {at}: {stderr}"
        );
        assert!(out.stdout.is_empty());
        at += 13;
    }
}

#[test]
fn pack_of_another_license_fails_to_unseal() {
    let env = Env::new();
    let other = env.issue("lic_other", &["--features", "custom_playbook_compilation"]);
    let theirs = env.path("theirs.hxpack");
    env.compile(&fixture(EXAMPLE), &other, &theirs);
    let f = pack_fails_everywhere(&env, &theirs, &env.lic, "PackUnsealError");
    assert_eq!(f.message, UNSEAL_MESSAGE);
    // And it opens with its own license.
    let mut a = run_args(&env, &[&theirs], &other);
    a.extend(args!["--text", "hi"]);
    env.ok(a);
}

#[test]
fn pack_with_an_edited_header_pack_id() {
    let env = Env::new();
    // Still licensed: the associated data no longer matches.
    let good = env.pack(EXAMPLE);
    let edited = mutate(&good, &env.path("edited.hxpack"), |b| {
        let i = 8 + EXAMPLE_ID.find("guard").unwrap();
        b[i] = b'G';
    });
    let f = pack_fails_everywhere(&env, &edited, &env.lic, "PackUnsealError");
    assert_eq!(f.message, UNSEAL_MESSAGE);
    // inspect without a license shows the edited id.
    let v = env.ok_json(args!["inspect", &edited, "--json"]);
    assert_eq!(v["pack_id"], "custom.internal_code_Guard.v1");

    // Not licensed any more: refused before decryption.
    let narrow = env.issue("lic_narrow", &["--packs", "custom.internal_*"]);
    let ids = env.path("ids.hxpack");
    env.compile(&fixture("internal_ids.yaml"), &narrow, &ids);
    let renamed = mutate(&ids, &env.path("renamed.hxpack"), |b| b[8] = b'k');
    pack_fails_everywhere(&env, &renamed, &narrow, "LicenseEntitlementError")
        .names(&["kustom.internal_ids.v1", "licensed_packs"]);
    let still = mutate(&ids, &env.path("still.hxpack"), |b| {
        let n = id_len(b);
        b[8 + n - 4] = b'z';
    });
    pack_fails_everywhere(&env, &still, &narrow, "PackUnsealError");
}

#[test]
fn pack_not_licensed_by_the_loading_license_is_an_entitlement_error() {
    let env = Env::new();
    let narrow = env.issue("lic_narrow", &["--packs", "custom.internal_*"]);
    let notes = env.pack("order_notes.yaml");
    let f = env.fails(
        with(run_args(&env, &[&notes], &narrow), args!["--text", "x"]),
        "LicenseEntitlementError",
        4,
    );
    f.names(&["custom.order_notes.v1", "licensed_packs"]);
}

#[test]
fn pack_with_a_wrong_digest_is_an_integrity_error() {
    let env = Env::new();
    let good = env.pack(EXAMPLE);
    let n = EXAMPLE_ID.len();
    for (name, at) in [
        ("digest.hxpack", 20 + n),
        ("digest_last.hxpack", 20 + n + 31),
    ] {
        let p = mutate(&good, &env.path(name), |b| b[at] ^= 0x80);
        pack_fails_everywhere(&env, &p, &env.lic, "PackIntegrityError").names(&[name, "SHA-256"]);
    }
}

#[test]
fn run_pack_choice() {
    let env = Env::new();
    let ex = env.pack(EXAMPLE);
    let notes = env.pack("order_notes.yaml");
    let both = run_args(&env, &[&ex, &notes], &env.lic);
    env.fails(
        with(both.clone(), args!["--text", "hi"]),
        "PackNotFoundError",
        5,
    )
    .names(&[EXAMPLE_ID, "custom.order_notes.v1", "--pack-id"]);
    env.fails(
        with(
            both.clone(),
            args!["--text", "hi", "--pack-id", "custom.nope.v1"],
        ),
        "PackNotFoundError",
        5,
    )
    .names(&["custom.nope.v1"]);
    env.fails(
        with(
            run_args(&env, &[&ex], &env.lic),
            args!["--text", "hi", "--pack-id", "custom.nope.v1"],
        ),
        "PackNotFoundError",
        5,
    )
    .names(&["custom.nope.v1"]);
    // --jsonl checks --pack-id up front too.
    env.fails_with(
        &with(
            both.clone(),
            args!["--jsonl", "--pack-id", "custom.nope.v1"],
        ),
        &[],
        Some(b"\"hi\"\n"),
        "PackNotFoundError",
        5,
    )
    .names(&["custom.nope.v1"]);
    let d: Value = serde_json::from_str(&env.ok(with(
        both.clone(),
        args![
            "--text",
            "Restock from SUP-QRV-042 next week.",
            "--pack-id",
            "custom.order_notes.v1"
        ],
    )))
    .unwrap();
    assert_eq!(d["action"], "block_supplier_reference");
    assert_eq!(d["pack_id"], "custom.order_notes.v1");
    // Two files holding one pack id.
    let copy = env.path("copy.hxpack");
    std::fs::copy(&ex, &copy).unwrap();
    env.fails(
        with(
            run_args(&env, &[&ex, &copy], &env.lic),
            args!["--text", "hi"],
        ),
        "PackFormatError",
        5,
    )
    .names(&["copy.hxpack", EXAMPLE_ID]);
}

// ---------------------------------------------------------------------------
// Payloads for `run` ([§6](docs/evaluation.md#s6), [§8](docs/cli.md#s8))
// ---------------------------------------------------------------------------

#[test]
fn run_empty_payload_permits() {
    let env = Env::new();
    let pack = env.pack(EXAMPLE);
    let base = run_args(&env, &[&pack], &env.lic);
    let check = |d: &Value| {
        assert_eq!(d["action"], "permit_clean_payload");
        assert_eq!(d["clean_text"], "");
        assert_eq!(d["triggers"], json!([]));
        assert_eq!(d["severity"], Value::Null);
        assert_eq!(d["reason"], Value::Null);
        assert_eq!(d["invariants_passed"], true);
    };
    check(&env.decide(&pack, ""));
    for stdin in [&b""[..], &b"\n"[..], &b"\r\n"[..]] {
        let out = env.ok_with(&base, &[], Some(stdin));
        check(&serde_json::from_str(&out).unwrap());
    }
    let empty = env.write("empty.txt", "");
    check(&env.ok_json(with(base.clone(), args!["--input", &empty])));
}

#[test]
fn run_ten_megabyte_payload_from_input_evaluates() {
    let env = Env::new();
    let pack = env.pack(EXAMPLE);
    let filler = "hello world ".repeat(10 * 1024 * 1024 / 12);
    let body = format!("{filler}mail a@b.co today\n");
    let input = env.write("big.txt", &body);
    assert!(body.len() > 10 * 1024 * 1024 - 100);
    let d = env.ok_json(with(
        run_args(&env, &[&pack], &env.lic),
        args!["--input", &input],
    ));
    assert_eq!(d["action"], "redact_and_permit_contact_pii");
    let start = filler.chars().count() + "mail ".len();
    assert_eq!(d["triggers"][0]["spans"], json!([[start, start + 6]]));
    let clean = d["clean_text"].as_str().unwrap();
    assert_eq!(
        clean.len(),
        filler.len() + "mail [REDACTED_EMAIL] today".len()
    );
    assert!(clean.ends_with("mail [REDACTED_EMAIL] today"));
}

#[test]
fn run_invalid_utf8_is_an_invalid_request() {
    let env = Env::new();
    let pack = env.pack(EXAMPLE);
    let base = run_args(&env, &[&pack], &env.lic);
    env.fails_with(
        &base,
        &[],
        Some(b"caf\xe9 \xff\xfe"),
        "InvalidRequestError",
        1,
    )
    .names(&["UTF-8"]);
    let input = env.write("latin1.txt", b"caf\xe9\n");
    env.fails(
        with(base.clone(), args!["--input", &input]),
        "InvalidRequestError",
        1,
    )
    .names(&["latin1.txt", "UTF-8"]);
    let missing = env.path("absent.txt");
    env.fails(with(base, args!["--input", &missing]), "IoError", 1)
        .names(&["absent.txt"]);
}

#[test]
fn run_spans_are_code_points_around_emoji_and_combining_marks() {
    let env = Env::new();
    let pack = env.pack(EXAMPLE);
    let cases: [(&str, &str, Value, &str); 5] = [
        (
            "👩‍👩‍👧 mail a@b.co",
            "redact_and_permit_contact_pii",
            json!([[11, 17]]),
            "👩‍👩‍👧 mail [REDACTED_EMAIL]",
        ),
        (
            "cafe\u{301} 192.168.1.20 ok",
            "redact_and_permit_contact_pii",
            json!([[6, 18]]),
            "cafe\u{301} [REDACTED_IP] ok",
        ),
        (
            "e\u{301}\u{301} mail a@b.co and 🚀 x@y.org",
            "redact_and_permit_contact_pii",
            json!([[9, 15], [22, 29]]),
            "e\u{301}\u{301} mail [REDACTED_EMAIL] and 🚀 [REDACTED_EMAIL]",
        ),
        (
            "🚀🚀 PROJ-ZEUS-9",
            "block_project_code",
            json!([[3, 14]]),
            BLOCKED,
        ),
        (
            "日本語 SSN 123-45-6789",
            "block_glba_ssn_leakage",
            json!([[8, 19]]),
            BLOCKED,
        ),
    ];
    for (text, action, spans, clean) in cases {
        let d = env.decide(&pack, text);
        assert_eq!(d["action"], action, "{text}");
        assert_eq!(d["triggers"][0]["spans"], spans, "{text}");
        assert_eq!(d["clean_text"], clean, "{text}");
        assert_eq!(
            d["triggers"][0]["match_count"],
            spans.as_array().unwrap().len(),
            "{text}"
        );
    }
}

#[test]
fn run_input_and_stdin_lose_exactly_one_trailing_newline() {
    let env = Env::new();
    let pack = env.pack(EXAMPLE);
    let base = run_args(&env, &[&pack], &env.lic);
    for (raw, want) in [
        ("x\n", "x"),
        ("x\r\n", "x"),
        ("x\n\n", "x\n"),
        ("x\r\n\r\n", "x\r\n"),
        ("x\n\r\n", "x\n"),
        ("x\r", "x\r"),
        ("x", "x"),
        (" x \n", " x "),
    ] {
        let via_stdin: Value =
            serde_json::from_str(&env.ok_with(&base, &[], Some(raw.as_bytes()))).unwrap();
        assert_eq!(via_stdin["clean_text"], want, "stdin {raw:?}");
        let f = env.write("in.txt", raw);
        let via_file = env.ok_json(with(base.clone(), args!["--input", &f]));
        assert_eq!(via_file["clean_text"], want, "--input {raw:?}");
        assert_eq!(via_file["receipt_hash"], via_stdin["receipt_hash"]);
    }
    // --text is taken as given.
    for raw in ["x\n", "x\r\n", "\n"] {
        assert_eq!(env.decide(&pack, raw)["clean_text"], raw);
    }
    // The stripped newline is not part of the payload: spans and receipts agree with --text.
    let d_stdin: Value =
        serde_json::from_str(&env.ok_with(&base, &[], Some(b"mail a@b.co\n"))).unwrap();
    let d_text = env.decide(&pack, "mail a@b.co");
    assert_eq!(d_stdin["receipt_hash"], d_text["receipt_hash"]);
    assert_eq!(d_stdin["clean_text"], "mail [REDACTED_EMAIL]");
}

#[test]
fn run_jsonl_batches() {
    let env = Env::new();
    let pack = env.pack(EXAMPLE);
    let base = with(run_args(&env, &[&pack], &env.lic), args!["--jsonl"]);
    let single = |t: &str| env.decide(&pack, t);

    // All good: exit 0, one line per decision, blank lines skipped.
    let stdin = b"\"mail a@b.co\"\n\n{\"text\":\"Release PROJ-ZEUS-9 today\"}\n   \n\r\n{\"text\":\"\"}\n\"no newline at end\"";
    let out = env.output_with(&base, &[], Some(stdin));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let texts = [
        "mail a@b.co",
        "Release PROJ-ZEUS-9 today",
        "",
        "no newline at end",
    ];
    assert_eq!(lines.len(), texts.len());
    for (d, t) in lines.iter().zip(texts) {
        let s = single(t);
        for k in [
            "action",
            "clean_text",
            "triggers",
            "receipt_hash",
            "pack_id",
            "severity",
        ] {
            assert_eq!(d[k], s[k], "{t}: {k}");
        }
    }

    // Bad lines get an InvalidRequestError line, the run goes on, exit 1.
    let stdin = b"not json\n\"ok\"\n{\"txt\":1}\n{\"text\":5}\n[1]\n\xff\xfe\n{\"text\":\"x\",\"pack_id\":5}\n\"a@b.co\"\n";
    let out = env.output_with(&base, &[], Some(stdin));
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"));
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 8);
    for (i, d) in lines.iter().enumerate() {
        if i == 1 || i == 7 {
            assert!(d.get("action").is_some(), "line {i}: {d}");
        } else {
            assert_eq!(d["error"], "InvalidRequestError", "line {i}: {d}");
            assert!(d["message"].is_string());
        }
    }
    assert_eq!(lines[1]["clean_text"], "ok");
    assert_eq!(lines[7]["clean_text"], "[REDACTED_EMAIL]");

    // --jsonl reads --input too; no input at all is fine.
    let f = env.write("batch.jsonl", "\"a\"\n{\"text\":\"b\"}\n");
    let out = env.ok(with(base.clone(), args!["--input", &f]));
    assert_eq!(out.lines().count(), 2);
    assert_eq!(env.ok_with(&base, &[], Some(b"")), "");
}

#[test]
fn run_jsonl_with_several_packs() {
    let env = Env::new();
    let ex = env.pack(EXAMPLE);
    let notes = env.pack("order_notes.yaml");
    let base = with(run_args(&env, &[&ex, &notes], &env.lic), args!["--jsonl"]);
    let stdin = format!(
        "{}\n{}\n{}\n{}\n",
        json!({"text": "SUP-QRV-042", "pack_id": "custom.order_notes.v1"}),
        json!({"text": "PROJ-ZEUS-9", "pack_id": EXAMPLE_ID}),
        json!({"text": "no pack named"}),
        json!({"text": "x", "pack_id": "custom.nope.v1"}),
    );
    let out = env.output_with(&base, &[], Some(stdin.as_bytes()));
    assert_eq!(out.status.code(), Some(1));
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["action"], "block_supplier_reference");
    assert_eq!(lines[1]["action"], "block_project_code");
    assert_eq!(lines[2]["error"], "InvalidRequestError");
    assert_eq!(lines[3]["error"], "PackNotFoundError");
    assert!(lines[3]["message"]
        .as_str()
        .unwrap()
        .contains("custom.nope.v1"));
    // --pack-id is the default for lines that name none.
    let out = env.ok_with(
        &with(base, args!["--pack-id", "custom.order_notes.v1"]),
        &[],
        Some(b"\"SUP-QRV-042\"\n"),
    );
    let d: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(d["action"], "block_supplier_reference");
}

// ---------------------------------------------------------------------------
// compile, inspect, manifest ([§7](docs/formats.md#s7), [§8](docs/cli.md#s8))
// ---------------------------------------------------------------------------

#[test]
fn compile_json_reports_the_digest_every_tool_agrees_on() {
    let env = Env::new();
    let out = env.path("ex.hxpack");
    let v = env.compile(&fixture(EXAMPLE), &env.lic, &out);
    assert_eq!(
        sorted_keys(&v),
        keys_of(&["pack_id", "version", "sha256", "path", "bytes"])
    );
    assert_eq!(v["pack_id"], EXAMPLE_ID);
    assert_eq!(v["version"], "1.0.0");
    assert_eq!(v["sha256"], EXAMPLE_SHA);
    assert_eq!(v["path"], out.to_str().unwrap());
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(v["bytes"], bytes.len());
    // The header: magic, version 1, the pack id, and the digest at 20+n.
    assert_eq!(&bytes[0..4], b"HXPK");
    assert_eq!(&bytes[4..6], &[0, 1]);
    assert_eq!(&bytes[8..8 + EXAMPLE_ID.len()], EXAMPLE_ID.as_bytes());
    let n = EXAMPLE_ID.len();
    assert_eq!(hex::encode(&bytes[20 + n..52 + n]), EXAMPLE_SHA);

    let inspected = env.ok_json(args!["inspect", &out, "--json"]);
    assert_eq!(inspected["sha256"], EXAMPLE_SHA);
    let m = env.ok_json(with(
        args!["manifest", "--playbook", fixture(EXAMPLE), "--pack", &out],
        env.lic_args(&env.lic),
    ));
    assert_eq!(m["packs"][0]["raw_pack_sha256"], EXAMPLE_SHA);
    assert_eq!(m["packs"][1]["raw_pack_sha256"], EXAMPLE_SHA);
    // The plaintext is not in the file.
    assert!(!String::from_utf8_lossy(&bytes).contains("PROJ"));

    // The text form for people.
    let text = env.ok(env.compile_args(&fixture(EXAMPLE), &env.lic, &env.path("t.hxpack")));
    assert!(text.contains(EXAMPLE_ID) && text.contains(EXAMPLE_SHA) && text.contains("t.hxpack"));
}

#[test]
fn compile_twice_same_digest_fresh_nonce() {
    let env = Env::new();
    let a = env.path("a.hxpack");
    let b = env.path("b.hxpack");
    let va = env.compile(&fixture("internal_ids.yaml"), &env.lic, &a);
    let vb = env.compile(&fixture("internal_ids.yaml"), &env.lic, &b);
    assert_eq!(va["sha256"], vb["sha256"]);
    assert_eq!(va["sha256"], INTERNAL_IDS_SHA);
    let (ba, bb) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    assert_eq!(ba.len(), bb.len());
    assert_ne!(ba, bb);
    let n = id_len(&ba);
    assert_eq!(ba[..8 + n], bb[..8 + n], "same header up to the nonce");
    assert_ne!(ba[8 + n..20 + n], bb[8 + n..20 + n], "a fresh nonce");
    assert_eq!(ba[20 + n..52 + n], bb[20 + n..52 + n], "same digest");
    // Recompiling over an existing pack replaces it and leaves nothing else.
    env.compile(&fixture("internal_ids.yaml"), &env.lic, &a);
    assert_eq!(entries(&env.work), ["a.hxpack", "b.hxpack"]);
}

#[test]
fn compile_to_an_unwritable_place_is_an_io_error() {
    let env = Env::new();
    let out = env.root().join("no/such/dir/p.hxpack");
    env.fails(
        env.compile_args(&fixture(EXAMPLE), &env.lic, &out),
        "IoError",
        1,
    )
    .names(&["no/such/dir/p.hxpack"]);
    let dir = env.root().join("is-a-dir");
    std::fs::create_dir_all(&dir).unwrap();
    env.fails(
        env.compile_args(&fixture(EXAMPLE), &env.lic, &dir),
        "IoError",
        1,
    )
    .names(&["is-a-dir"]);
    assert_eq!(entries(&dir), Vec::<String>::new());
}

#[test]
fn compile_warns_about_unknown_keys_and_rule_id_style() {
    let env = Env::new();
    let body = "pack_id: custom.warn.v1\nrule: []\nextra_key: 1\nrules:\n  - id: ProjectCode\n    type: regex\n    pattern: 'X-[0-9]+'\n    action: redact\n";
    let p = env.write("warn.yaml", body);
    let out = env.output_with(
        &with(
            env.compile_args(&p, &env.lic, &env.path("warn.hxpack")),
            args!["--json"],
        ),
        &[],
        None,
    );
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8(out.stderr).unwrap();
    let unknown: Vec<&str> = stderr.lines().filter(|l| l.contains("extra_key")).collect();
    assert_eq!(
        unknown.len(),
        1,
        "one warning line for all unknown keys:\n{stderr}"
    );
    assert!(unknown[0].contains("rule") && unknown[0].contains("warn.yaml"));
    assert!(stderr.contains("ProjectCode"), "{stderr}");
    assert!(stderr.lines().all(|l| l.starts_with("warning")), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    // The unknown keys are not carried into the pack.
    let clean = env.write("clean.yaml", body.replace("rule: []\nextra_key: 1\n", ""));
    let w = env.compile(&clean, &env.lic, &env.path("clean.hxpack"));
    assert_eq!(v["sha256"], w["sha256"]);
    // No warning for a clean playbook.
    let out = env.output_with(
        &env.compile_args(&fixture(EXAMPLE), &env.lic, &env.path("ex.hxpack")),
        &[],
        None,
    );
    assert!(out.stderr.is_empty());
    // The action reads as the id is written.
    let d = env.decide(&env.path("warn.hxpack"), "see X-12");
    assert_eq!(d["action"], "redact_ProjectCode");
    assert_eq!(d["clean_text"], "see [REDACTED_PROJECTCODE]");
}

#[test]
fn inspect_without_and_with_a_license() {
    let env = Env::new();
    let lic = env.issue(
        "lic_inspect",
        &["--packs", "custom.*", "--solvers", "z3,cvc*"],
    );
    let p = env.write(
        "inspect.yaml",
        r#"pack_id: custom.inspect_me.v2
version: 2
name: Inspect me
description: "Secret description: zebra"
rules:
  - id: project_code
    type: regex
    pattern: '\bPROJ-[A-Z]+-\d+\b'
    action: block
    description: "Project code zebra"
  - id: card_like
    type: luhn_checksum
    pattern: '\b\d{12,19}\b'
    action: redact
solvers: [z3, {name: cvc5}]
"#,
    );
    let pack = env.path("inspect.hxpack");
    env.compile(&p, &lic, &pack);
    let bytes = std::fs::metadata(&pack).unwrap().len();
    let secrets = ["PROJ", "[A-Z]", "\\d", "zebra"];

    let v = env.ok_json(args!["inspect", &pack, "--json"]);
    assert_eq!(
        sorted_keys(&v),
        keys_of(&[
            "pack_id",
            "format_version",
            "bytes",
            "sha256",
            "signature",
            "loaded"
        ])
    );
    // No `.sig` beside it ([§17](docs/guides/signing.md#s17)).
    assert_eq!(v["signature"], Value::Null);
    assert_eq!(v["pack_id"], "custom.inspect_me.v2");
    assert_eq!(v["format_version"], 1);
    assert_eq!(v["bytes"], bytes);
    assert_eq!(v["loaded"], false);
    let text = env.ok(args!["inspect", &pack]);
    assert!(text.contains("custom.inspect_me.v2"));
    for out in [v.to_string(), text] {
        for s in secrets {
            assert!(!out.contains(s), "{s} in {out}");
        }
    }

    let v = env.ok_json(with(args!["inspect", &pack, "--json"], env.lic_args(&lic)));
    assert_eq!(
        sorted_keys(&v),
        keys_of(&[
            "pack_id",
            "format_version",
            "bytes",
            "sha256",
            "signature",
            "loaded",
            "version",
            "name",
            "rules",
            "actions",
            "solvers"
        ])
    );
    assert_eq!(v["loaded"], true);
    assert_eq!(v["version"], "2");
    assert_eq!(v["name"], "Inspect me");
    assert_eq!(
        v["rules"],
        json!([
            {"id": "project_code", "type": "regex", "action": "block"},
            {"id": "card_like", "type": "luhn_checksum", "action": "redact"}
        ])
    );
    assert_eq!(
        v["actions"],
        json!([
            "permit_clean_payload",
            "block_project_code",
            "redact_card_like",
            "block_glba_ssn_leakage",
            "block_pci_dss_pan_leakage",
            "block_hipaa_phi_leakage",
            "redact_and_permit_contact_pii"
        ])
    );
    assert_eq!(v["solvers"], json!(["z3", "cvc5"]));
    let text = env.ok(with(args!["inspect", &pack], env.lic_args(&lic)));
    assert!(text.contains("project_code") && text.contains("card_like") && text.contains("cvc5"));
    for out in [v.to_string(), text] {
        for s in secrets {
            assert!(!out.contains(s), "{s} in {out}");
        }
    }
}

const MANIFEST_ENTRY_KEYS: [&str; 18] = [
    "pack_id",
    "schema_version",
    "domain_name",
    "goal_id",
    "actions",
    "floor",
    "budget_max_latency_ms",
    "state_schema",
    "hard_rules",
    "has_decision_head",
    "decision_head",
    "merkle_root",
    "sealed_at",
    "raw_pack_sha256",
    "is_sealed",
    "solvers",
    "codons",
    "metadata",
];

#[test]
fn manifest_of_the_example_pack() {
    let env = Env::new();
    let m = env.ok_json(args![
        "manifest",
        "--playbook",
        fixture("regulatory_pii_guard.yaml")
    ]);
    assert_eq!(sorted_keys(&m), ["generation_mode", "generator", "packs"]);
    assert_eq!(m["generator"], "helixor-sdk-gen");
    assert_eq!(m["generation_mode"], "embedded_decision");
    let e = &m["packs"][0];
    assert_eq!(sorted_keys(e), keys_of(&MANIFEST_ENTRY_KEYS));
    assert_eq!(e["pack_id"], "compliance.regulatory_pii_guard.v1");
    assert_eq!(e["schema_version"], "helixor.pack_manifest.v1");
    assert_eq!(e["domain_name"], "RegulatoryPiiGuard");
    assert_eq!(e["goal_id"], "evaluate_pii_compliance");
    assert_eq!(
        e["actions"],
        json!([
            "permit_clean_payload",
            "block_glba_ssn_leakage",
            "block_pci_dss_pan_leakage",
            "block_hipaa_phi_leakage",
            "redact_and_permit_contact_pii"
        ])
    );
    assert_eq!(e["floor"], json!(0.85));
    assert_eq!(e["budget_max_latency_ms"], json!(1.0));
    assert_eq!(e["has_decision_head"], false);
    assert_eq!(e["decision_head"], Value::Null);
    assert_eq!(e["merkle_root"], "");
    assert_eq!(e["sealed_at"], Value::Null);
    assert_eq!(e["is_sealed"], false);
    assert_eq!(e["raw_pack_sha256"], REGULATORY_SHA);
    assert_eq!(e["solvers"], json!([]));
    assert_eq!(e["metadata"], json!({}));
    assert_eq!(
        e["codons"],
        json!([
            "PII_SSN_EXTRACT",
            "PII_CARD_EXTRACT",
            "PII_HEALTH_EXTRACT",
            "PII_EMAIL_EXTRACT",
            "PII_PHONE_EXTRACT",
            "PII_IPV4_EXTRACT"
        ])
    );
    let schema = e["state_schema"].as_object().unwrap();
    for (field, description) in [
        ("has_ssn", "SSN detected (GLBA/FCRA)"),
        ("has_credit_card", "Card PAN detected (PCI-DSS)"),
        (
            "has_health_record",
            "Health record identifier detected (HIPAA)",
        ),
        ("has_email", "Email address detected (GDPR/CCPA)"),
        ("has_phone", "Telephone number detected (TCPA/CCPA)"),
        ("has_ip", "IPv4 address detected (GDPR)"),
    ] {
        assert_eq!(
            schema[field],
            json!({"name": field, "property_type": "boolean", "description": description,
                   "required": true, "min_value": null, "max_value": null, "default": null})
        );
    }
    assert_eq!(schema.len(), 6);
    let hr = e["hard_rules"].as_array().unwrap();
    assert_eq!(hr.len(), 4);
    for (rule, (id, field, verdict)) in hr.iter().zip([
        ("RULE-GLBA-SSN-BLOCK", "has_ssn", "refuse"),
        ("RULE-PCI-DSS-PAN-BLOCK", "has_credit_card", "refuse"),
        ("RULE-HIPAA-PHI-BLOCK", "has_health_record", "refuse"),
    ]) {
        assert_eq!(
            rule,
            &json!({"id": id, "condition": format!("state.{field} is True"), "verdict": verdict,
                    "factor": field, "operator": "is_true", "threshold": null,
                    "threshold_str": null, "is_boolean": true, "factors": []})
        );
    }
    assert_eq!(
        hr[3],
        json!({"id": "RULE-GDPR-CONTACT-REDACT",
               "condition": "state.has_email is True or state.has_phone is True or state.has_ip is True",
               "verdict": "redact", "factor": null, "operator": "any_true", "threshold": null,
               "threshold_str": null, "is_boolean": true,
               "factors": ["has_email", "has_phone", "has_ip"]})
    );
}

#[test]
fn manifest_derives_defaults_for_custom_playbooks() {
    let env = Env::new();
    let p = env.write(
        "acme.yaml",
        "pack_id: acme.order-notes_x.v2\nfloor: 0.9\nbudget: {max_latency_ms: null}\nmetadata: {team: a}\nsolvers: [z3]\nrules:\n  - {id: x, type: regex, pattern: 'X1', action: block}\n  - {id: y, type: regex, pattern: 'Y1', action: redact}\n  - {id: z, type: regex, pattern: 'Z1', action: block}\n",
    );
    let e = env.ok_json(args!["manifest", "--playbook", &p])["packs"][0].clone();
    assert_eq!(e["domain_name"], "OrderNotesX");
    assert_eq!(e["goal_id"], "evaluate_order-notes_x");
    assert_eq!(
        e["actions"],
        json!([
            "permit_clean_payload",
            "block_x",
            "redact_y",
            "block_z",
            "block_glba_ssn_leakage",
            "block_pci_dss_pan_leakage",
            "block_hipaa_phi_leakage",
            "redact_and_permit_contact_pii"
        ])
    );
    assert_eq!(e["floor"], json!(0.9));
    assert_eq!(e["budget_max_latency_ms"], json!(1.0));
    assert_eq!(e["metadata"], json!({"team": "a"}));
    assert_eq!(e["solvers"], json!(["z3"]));
    // A playbook the compiler refuses gets no manifest.
    let bad = env.write(
        "bad.yaml",
        "pack_id: acme.bad.v1\nrules:\n  - {id: x, type: regex, pattern: 'a(?=b)', action: block}\n",
    );
    env.fails(
        args!["manifest", "--playbook", &bad],
        "UnsupportedPackDeclarationError",
        3,
    )
    .names(&["bad.yaml", "rules[0]"]);
    let out = env.path("manifest.json");
    env.fails(
        args![
            "manifest",
            "--playbook",
            &p,
            "--playbook",
            &bad,
            "--out",
            &out
        ],
        "UnsupportedPackDeclarationError",
        3,
    );
    assert!(!out.exists(), "no partial manifest");
    env.fails(args!["manifest"], "UsageError", 2);
}

#[test]
fn manifest_keeps_command_line_order_and_writes_out() {
    let env = Env::new();
    let notes = env.pack("order_notes.yaml");
    let ex = env.pack(EXAMPLE);
    let a = with(
        args![
            "manifest",
            "--playbook",
            fixture("internal_ids.yaml"),
            "--pack",
            &notes,
            "--playbook",
            fixture("regulatory_pii_guard.yaml"),
            "--pack",
            &ex
        ],
        env.lic_args(&env.lic),
    );
    let m = env.ok_json(a.clone());
    let ids: Vec<&str> = m["packs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["pack_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "custom.internal_ids.v1",
            "custom.order_notes.v1",
            "compliance.regulatory_pii_guard.v1",
            EXAMPLE_ID
        ]
    );
    let shas: Vec<&str> = m["packs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["raw_pack_sha256"].as_str().unwrap())
        .collect();
    assert_eq!(
        shas,
        [
            INTERNAL_IDS_SHA,
            ORDER_NOTES_SHA,
            REGULATORY_SHA,
            EXAMPLE_SHA
        ]
    );
    // A pack's entry equals its playbook's, but for being sealed (with no
    // verified signature, at no known time: [§17](docs/guides/signing.md#s17)).
    let from_playbook = env.ok_json(args!["manifest", "--playbook", fixture("order_notes.yaml")]);
    let mut sealed = from_playbook["packs"][0].clone();
    assert_eq!(sealed["is_sealed"], false);
    sealed["is_sealed"] = json!(true);
    assert_eq!(m["packs"][1], sealed);
    assert_eq!(m["packs"][1]["sealed_at"], Value::Null);

    let out_file = env.root().join("manifest.json");
    let stdout = env.ok(with(a, args!["--out", &out_file]));
    assert!(stdout.is_empty(), "{stdout}");
    assert_eq!(read_json(&out_file), m);
    // An unwritable --out is an IoError.
    let bad_out = env.root().join("missing-dir/manifest.json");
    env.fails(
        args![
            "manifest",
            "--playbook",
            fixture(EXAMPLE),
            "--out",
            &bad_out
        ],
        "IoError",
        1,
    )
    .names(&["missing-dir/manifest.json"]);
}

// ---------------------------------------------------------------------------
// Usage ([§4.3](docs/errors.md#s4-3), [§8](docs/cli.md#s8))
// ---------------------------------------------------------------------------

#[test]
fn help_on_every_command_exits_zero() {
    let env = Env::new();
    for cmd in [
        vec![],
        vec!["compile"],
        vec!["run"],
        vec!["inspect"],
        vec!["inspect-license"],
        vec!["manifest"],
        vec!["serve"],
        vec!["license"],
        vec!["license", "keygen"],
        vec!["license", "issue"],
    ] {
        let mut a: Vec<std::ffi::OsString> = cmd.iter().map(std::ffi::OsString::from).collect();
        a.push("--help".into());
        let out = env.ok(a);
        assert!(out.contains("Usage"), "{cmd:?}: {out}");
    }
    for cmd in ["compile", "run", "inspect", "inspect-license", "manifest"] {
        let out = env.ok(args!["help", cmd]);
        assert!(out.contains("Usage"), "{cmd}");
    }
}

#[test]
fn unknown_flags_and_bad_arguments_are_usage_errors() {
    let env = Env::new();
    let cases: Vec<Vec<std::ffi::OsString>> = vec![
        args!["compile", "--bogus"],
        args!["run", "--pack", "x.hxpack", "--bogus"],
        args!["inspect", "x.hxpack", "--bogus"],
        args!["inspect-license", "--bogus"],
        args!["manifest", "--bogus"],
        args!["license", "keygen", "--key-id", "k", "--out", "d", "--bogus"],
        args!["license", "issue", "--bogus"],
        args!["frobnicate"],
        args!["compile", "--playbook", "p.yaml"],
        args!["run", "--pack", "x.hxpack", "--text", "a", "--input", "b"],
        args!["run", "--pack", "x.hxpack", "--text", "a", "--jsonl"],
    ];
    for a in cases {
        let f = env.fails(a.clone(), "UsageError", 2);
        assert!(!f.message.is_empty(), "{a:?}");
    }
    // No subcommand at all: usage (clap shows the help), exit 2.
    let out = env.output_with(&[], &[], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("UsageError: "));
    // --error-format json is global: before the subcommand, and with `=`.
    for a in [
        args!["--error-format", "json", "compile", "--bogus"],
        args!["--error-format=json", "compile", "--bogus"],
        args!["compile", "--bogus", "--error-format=json"],
        args!["--error-format", "json", "license", "issue", "--bogus"],
    ] {
        let out = env.output_with(&a, &[], None);
        assert_eq!(out.status.code(), Some(2), "{a:?}");
        let v: Value = serde_json::from_slice(&out.stderr)
            .unwrap_or_else(|e| panic!("{a:?}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(v["error"], "UsageError");
        assert!(v["message"].as_str().unwrap().contains("--bogus"));
        assert_eq!(v["problems"], json!([]));
    }
    // An error from a command honours the flag before the subcommand too.
    let a = args![
        "--error-format",
        "json",
        "inspect",
        env.path("absent.hxpack")
    ];
    let out = env.output_with(&a, &[], None);
    assert_eq!(out.status.code(), Some(5));
    let v: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(v["error"], "PackFormatError");
    assert_eq!(entries(&env.work), Vec::<String>::new());
}

// ---------------------------------------------------------------------------
// Golden decisions through `run` ([§6](docs/evaluation.md#s6))
// ---------------------------------------------------------------------------

/// The receipt recipe of [§6.4](docs/evaluation.md#s6-4), computed here from its definition.
fn receipt(
    pack_id: &str,
    version: &str,
    action: &str,
    passed: bool,
    rule_ids: &[&str],
    payload: &str,
) -> String {
    let ids: Vec<String> = rule_ids.iter().map(|r| format!("\"{r}\"")).collect();
    let doc = format!(
        "{{\"action\":\"{action}\",\"invariants_passed\":{passed},\"pack_id\":\"{pack_id}\",\"pack_version\":\"{version}\",\"rule_ids\":[{}],\"schema\":\"helixor.decision_receipt.v1\",\"sha256_payload\":\"{}\"}}",
        ids.join(","),
        sha256_hex(payload.as_bytes())
    );
    format!("hx_proof_{}", &sha256_hex(doc.as_bytes())[..24])
}

#[test]
fn golden_example_decision() {
    let env = Env::new();
    let pack = env.pack(EXAMPLE);
    let d = env.decide(&pack, "Release PROJ-ZEUS-9 today");
    assert_eq!(
        sorted_keys(&d),
        keys_of(&[
            "action",
            "severity",
            "reason",
            "clean_text",
            "triggers",
            "invariants_passed",
            "pack_id",
            "pack_version",
            "receipt_hash",
            "latency_us"
        ])
    );
    assert_eq!(d["action"], "block_project_code");
    assert_eq!(d["severity"], "FATAL");
    assert_eq!(d["reason"], "Custom rule project_code matched");
    assert_eq!(d["clean_text"], BLOCKED);
    assert_eq!(
        d["triggers"],
        json!([{"rule_id": "project_code", "source": "rule", "severity": "FATAL",
                "action": "block_project_code", "match_count": 1, "spans": [[8, 19]]}])
    );
    assert_eq!(d["invariants_passed"], false);
    assert_eq!(d["pack_id"], EXAMPLE_ID);
    assert_eq!(d["pack_version"], "1.0.0");
    assert_eq!(d["receipt_hash"], "hx_proof_11d7a1d30558198a38b9c520");
    assert_eq!(
        d["receipt_hash"],
        receipt(
            EXAMPLE_ID,
            "1.0.0",
            "block_project_code",
            false,
            &["project_code"],
            "Release PROJ-ZEUS-9 today"
        )
    );
    assert!(d["latency_us"].as_f64().unwrap() >= 0.0);

    // Same input, same receipt; a non-ASCII payload follows the recipe too.
    assert_eq!(
        env.decide(&pack, "Release PROJ-ZEUS-9 today")["receipt_hash"],
        d["receipt_hash"]
    );
    let text = "Grüße an a@b.co 👋";
    let d = env.decide(&pack, text);
    assert_eq!(
        d["receipt_hash"],
        receipt(
            EXAMPLE_ID,
            "1.0.0",
            "redact_and_permit_contact_pii",
            false,
            &["RULE-GDPR-CONTACT-REDACT"],
            text
        )
    );
    assert_eq!(d["triggers"][0]["codons"], json!(["PII_EMAIL_EXTRACT"]));
    assert_eq!(d["triggers"][0]["source"], "builtin");
    let d = env.decide(&pack, "Lunch is at noon.");
    assert_eq!(
        d["receipt_hash"],
        receipt(
            EXAMPLE_ID,
            "1.0.0",
            "permit_clean_payload",
            true,
            &[],
            "Lunch is at noon."
        )
    );
}

#[test]
fn golden_reference_playbooks() {
    let env = Env::new();
    let ids = env.pack("internal_ids.yaml");
    let notes = env.pack("order_notes.yaml");
    let cases = [
        (
            &ids,
            "Status for PROJ-ZEUS-9X is green.",
            "block_internal_project_code",
            BLOCKED,
        ),
        (
            &ids,
            "See TCK-004211 for the fix.",
            "redact_ticket_id",
            "See [REDACTED_TICKET_ID] for the fix.",
        ),
        (
            &ids,
            "Email ops@example.com about PROJ-ZEUS-9X.",
            "block_internal_project_code",
            BLOCKED,
        ),
        (
            &ids,
            "Lunch is at noon.",
            "permit_clean_payload",
            "Lunch is at noon.",
        ),
        (
            &notes,
            "Order ORD-20931 ships Tuesday.",
            "permit_clean_payload",
            "Order ORD-20931 ships Tuesday.",
        ),
        (
            &notes,
            "Restock from SUP-QRV-042 next week.",
            "block_supplier_reference",
            BLOCKED,
        ),
        (
            &notes,
            "Order ORD-20931 for ops@example.com ships Tuesday.",
            "redact_and_permit_contact_pii",
            "Order ORD-20931 for [REDACTED_EMAIL] ships Tuesday.",
        ),
    ];
    for (pack, text, action, clean) in cases {
        let d = env.decide(pack, text);
        assert_eq!(d["action"], action, "{text}");
        assert_eq!(d["clean_text"], clean, "{text}");
    }
    let d = env.decide(&ids, "See TCK-004211 for the fix.");
    assert_eq!(
        d["triggers"],
        json!([{"rule_id": "ticket_id", "source": "rule", "severity": "WARNING",
                "action": "redact_ticket_id", "match_count": 1, "spans": [[4, 14]]}])
    );
    assert_eq!(d["reason"], "Custom rule ticket_id matched");
    assert_eq!(d["severity"], "WARNING");
    let d = env.decide(&ids, "Email ops@example.com about PROJ-ZEUS-9X.");
    let rule_ids: Vec<&str> = d["triggers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["rule_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        rule_ids,
        ["internal_project_code", "RULE-GDPR-CONTACT-REDACT"]
    );
}

/// [§16](docs/codons.md#s16) end to end through the binary: a version-2 playbook compiles,
/// its pack runs exactly its codons and hard rules (not the built-ins),
/// `inspect` names them without a pattern, `run --stream` holds and
/// redacts, and a broken one lists every problem by place.
#[test]
fn a_version_two_playbook_compiles_runs_streams_and_is_inspected() {
    let env = Env::new();
    let lic = env.issue("lic_v2", &["--packs", "custom.*"]);
    let playbook = r#"schema_version: 2
pack_id: custom.bank.v1
version: 1.0.0
codons:
  - code: IBAN
    codon_type: extract_pattern
    params: {pattern: '\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b'}
    checksum: iban
    binds_to: has_iban
    matches_field: ibans
    remedy_template: "[REDACTED_IBAN]"
hard_rules:
  - {id: IBAN-BULK-BLOCK, condition: 'len(state.ibans) >= 2', action: block_bulk, severity: fatal}
  - {id: IBAN-REDACT, condition: 'state.has_iban and len(state.ibans) < 2', action: redact_iban, severity: warning}
"#;
    let p = env.write("bank.yaml", playbook);
    let pack = env.path("bank.hxpack");
    env.compile(&p, &lic, &pack);
    let run = |text: &str| {
        env.ok_json(with(
            args!["run", "--pack", &pack, "--text", text],
            env.lic_args(&lic),
        ))
    };
    let d = run("Refund to DE89 3704 0044 0532 0130 00 today, SSN 123-45-6789");
    assert_eq!(d["action"], "redact_iban");
    assert_eq!(d["reason"], "Hard rule IBAN-REDACT matched");
    assert_eq!(
        d["clean_text"],
        "Refund to [REDACTED_IBAN] today, SSN 123-45-6789"
    );
    assert_eq!(
        d["triggers"],
        json!([{"rule_id": "IBAN-REDACT", "source": "hard_rule", "severity": "WARNING",
                "action": "redact_iban", "codons": ["IBAN"], "match_count": 1, "spans": [[10, 37]]}])
    );
    assert_eq!(
        run("DE88 3704 0044 0532 0130 00")["action"],
        "permit_clean_payload"
    );
    assert_eq!(
        run("DE89 3704 0044 0532 0130 00 or GB82 WEST 1234 5698 7654 32")["action"],
        "block_bulk"
    );

    let v = env.ok_json(with(args!["inspect", &pack, "--json"], env.lic_args(&lic)));
    assert_eq!(v["schema_version"], 2);
    assert_eq!(v["codons"], json!(["IBAN"]));
    assert_eq!(
        v["hard_rules"],
        json!([{"id": "IBAN-BULK-BLOCK", "severity": "fatal", "action": "block_bulk"},
               {"id": "IBAN-REDACT", "severity": "warning", "action": "redact_iban"}])
    );
    assert_eq!(
        v["actions"],
        json!(["permit_clean_payload", "block_bulk", "redact_iban"])
    );
    let text = env.ok(with(args!["inspect", &pack], env.lic_args(&lic)));
    assert!(
        text.contains(
            "codons:         IBAN\nhard rules:\n  - IBAN-BULK-BLOCK (fatal, block_bulk)\n"
        ),
        "{text}"
    );
    assert!(!text.contains("A-Z") && !v.to_string().contains("A-Z"));

    // A stream of a pack with a count condition is judged whole at the end.
    let out = env.ok_with(
        &with(
            args!["run", "--pack", &pack, "--stream"],
            env.lic_args(&lic),
        ),
        &[],
        Some(b"pay DE89 3704 0044 0532 0130 00 now\n"),
    );
    assert_eq!(out, "pay [REDACTED_IBAN] now\n");

    let broken = env.write(
        "broken.yaml",
        playbook
            .replace("matches_field: ibans", "matches_field: ibanz")
            .replace("checksum: iban", "checksum: ibann"),
    );
    let f = env.fails(
        with(
            args![
                "compile",
                "--playbook",
                &broken,
                "--out",
                env.path("x.hxpack")
            ],
            env.lic_args(&lic),
        ),
        "UnsupportedPackDeclarationError",
        3,
    );
    assert_eq!(f.problems.len(), 1, "{:?}", f.problems);
    assert!(
        f.problems[0].starts_with("codons[0] (code `IBAN`): `checksum`: unknown validator `ibann`"),
        "{:?}",
        f.problems
    );
}
