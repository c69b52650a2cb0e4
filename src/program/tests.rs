use super::*;
use crate::playbook::parse_document;
use crate::rules::declarations;
use crate::PlaybookError;

fn problems(yaml: &str) -> Vec<String> {
    let d = parse_document(yaml.as_bytes(), "p.yaml").unwrap();
    match declarations(&d.doc, "p.yaml") {
        Err(PlaybookError::Unsupported { problems, .. }) => problems,
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

fn program(yaml: &str) -> Arc<Program> {
    let d = parse_document(yaml.as_bytes(), "p.yaml").unwrap();
    declarations(&d.doc, "p.yaml").unwrap().program
}

const HEAD: &str = "schema_version: 2\npack_id: custom.t.v1\n";

#[test]
fn schema_version_is_one_or_two() {
    assert_eq!(program("pack_id: p\n").schema, Schema::V1);
    assert_eq!(
        program("pack_id: p\nschema_version: 1\n").schema,
        Schema::V1
    );
    assert_eq!(program(HEAD).schema, Schema::V2);
    for bad in ["3", "'2'", "2.5", "[2]"] {
        assert_eq!(
            problems(&format!("pack_id: p\nschema_version: {bad}\n")),
            vec!["`schema_version`: unsupported value (supported: 1, the default, and 2)"],
            "{bad}"
        );
    }
}

#[test]
fn version_one_runs_the_builtins_and_version_two_only_what_it_declares() {
    let v1 = program("pack_id: p\n");
    assert!(v1.streams_natively());
    assert_eq!(v1.codons.len(), 6);
    let v2 = program(HEAD);
    assert!(v2.codons.is_empty() && v2.hard_rules.is_empty());
    assert!(v2.streams_natively());
    let named = program(&format!(
        "{HEAD}codons: [{{code: PII_SSN_EXTRACT}}]\nhard_rules: [{{id: RULE-GLBA-SSN-BLOCK}}]\n"
    ));
    assert_eq!(named.codons[0].code, "PII_SSN_EXTRACT");
    assert_eq!(named.hard_rules[0].reads, vec![0]);
    assert!(named.hard_rules[0].builtin);
}

#[test]
fn every_codon_problem_is_reported_at_once_by_place() {
    let p = problems(&format!(
        "{HEAD}codons:
  - code: API_KEY
    codon_type: extract_pattern
    params: {{pattern: 'k-[0-9]+', group: 2, flagz: [X]}}
    checksum: luhnn
    min_entropy: 0
    context: {{words: [], after: 5000, near: 3}}
    binds_to: HasKey
    remedy_template: ''
    chekcsum: luhn
  - code: api
  - code: PII_SSN_EXTRACT
    binds_to: has_ssn
  - code: DUP
    codon_type: extract_pattern
    params: {{pattern: 'x(?=y)'}}
    binds_to: x
    remedy_template: '[X]'
  - code: DUP
"
    ));
    let want = [
        "codons[0] (code `API_KEY`): unknown key `chekcsum` (keys: code, codon_type, kind, trigger, params, checksum, min_entropy, context, deny_list, binds_to, matches_field, remedy_template, description)",
        "codons[0] (code `API_KEY`): `binds_to` `HasKey` must match [a-z][a-z0-9_]*",
        "codons[0] (code `API_KEY`): `remedy_template` is not a non-empty string",
        "codons[0] (code `API_KEY`): `checksum`: unknown validator `luhnn`",
        "codons[0] (code `API_KEY`): `min_entropy` must be a number above 0",
        "codons[0] (code `API_KEY`): unknown key `context.near` (keys: words, before, after)",
        "codons[0] (code `API_KEY`): `context.words` must be a list of 1 to 64 non-empty strings of at most 64 bytes",
        "codons[0] (code `API_KEY`): `context.after` must be an integer from 0 to 256",
        "codons[0] (code `API_KEY`): unknown key `params.flagz` (keys: pattern, flags, group)",
        "codons[0] (code `API_KEY`): `params.group` 2 is not a capture group of the pattern (it has 0)",
        "codons[1]: `code` `api` must match [A-Z][A-Z0-9_]*",
        "codons[2] (code `PII_SSN_EXTRACT`): differs from the built-in codon PII_SSN_EXTRACT; declare it by `code` alone, or give your own codon another code",
        "codons[3] (code `DUP`): `params.pattern` is not a valid regular expression: look-around",
        "codons[4] (code `DUP`): declared twice, first at codons[3]",
    ];
    assert_eq!(p.len(), want.len(), "{p:#?}");
    for (got, want) in p.iter().zip(want) {
        assert!(got.starts_with(want), "got  {got}\nwant {want}");
    }
    // A problem never quotes a pattern.
    assert!(p.iter().all(|m| !m.contains("k-[0-9]")));
}

#[test]
fn hard_rule_problems_name_the_rule_and_the_part() {
    let p = problems(&format!(
        "{HEAD}rules:
  - {{id: R1, type: regex, pattern: 'zz', action: block}}
codons:
  - {{code: K, codon_type: extract_pattern, params: {{pattern: 'k[0-9]+'}}, binds_to: has_k, matches_field: k_values, remedy_template: '[K]'}}
hard_rules:
  - {{id: A, condition: state.has_x, action: block_a, severity: fatal}}
  - {{id: B, condition: not state.has_k, action: block_b, severity: fatal}}
  - {{id: C, condition: 'len(state.k_values) >= 2', action: Block, severity: high, colour: red}}
  - {{id: R1, condition: state.has_k, action: r, severity: warning}}
  - {{id: RULE-GLBA-SSN-BLOCK, condition: state.has_k}}
  - {{id: E, condition: 'len(state.has_k) > 1', action: e, severity: warning}}
  - {{id: A, condition: state.has_k, action: a, severity: warning}}
  - {{id: P, condition: state.has_k, action: permit_clean_payload, severity: fatal}}
"
    ));
    let want = [
        "hard_rules[0] (id `A`): `condition` reads `state.has_x`, which no codon binds (`binds_to`)",
        "hard_rules[1] (id `B`): `condition` ",
        "hard_rules[2] (id `C`): unknown key `colour`",
        "hard_rules[2] (id `C`): `action` `Block` must match [a-z][a-z0-9_]*",
        "hard_rules[2] (id `C`): unsupported severity `high` (supported: fatal, warning)",
        "hard_rules[3] (id `R1`): `id` is also a custom rule's id",
        "hard_rules[4] (id `RULE-GLBA-SSN-BLOCK`): differs from the built-in hard rule",
        "hard_rules[5] (id `E`): `condition` reads `len(state.has_k)`, which is no codon's `matches_field`",
        "hard_rules[6] (id `A`): declared twice, first at hard_rules[0]",
        "hard_rules[7] (id `P`): `action` `permit_clean_payload` is reserved (reserved: permit_clean_payload, block_stream_holdback_limit, block_stream_cost_limit)",
    ];
    assert_eq!(p.len(), want.len(), "{p:#?}");
    for (got, want) in p.iter().zip(want) {
        assert!(got.starts_with(want), "got  {got}\nwant {want}");
    }
}

fn codon(yaml_tail: &str) -> Codon {
    let p = program(&format!(
        "{HEAD}codons:\n  - code: C\n    codon_type: extract_pattern\n    binds_to: c\n    remedy_template: '[C]'\n{yaml_tail}"
    ));
    p.codons[0].clone()
}

#[test]
fn context_words_must_be_near_and_whole() {
    let c = codon("    params: {pattern: '[0-9]{6}'}\n    context: {words: [pin, 'access code'], before: 12, after: 8}\n");
    let judge = |text: &str| {
        let s = text.find(|ch: char| ch.is_ascii_digit()).unwrap();
        c.accepts(text, s, s + 6)
    };
    assert!(judge("my PIN is 123456"));
    assert!(judge("123456 = pin"));
    // `pin` ends past the 8 code points after the value.
    assert!(!judge("123456 is my pin"));
    // Exactly the 12 code points before the value.
    assert!(judge("Access Code 123456"));
    assert!(!judge("Access Code: 123456"));
    // Too far before (more than 12 code points), or after past 8.
    assert!(!judge("pin, as agreed, 123456"));
    assert!(!judge("123456 was never the pin"));
    // Touching a word character of the whole text.
    assert!(!judge("spinning 123456"));
    assert!(!judge("123456 pins"));
    // Whole words of the text, not of the window: `xpin` is no `pin`.
    assert!(!judge("xpin 123456"));
    // Non-ASCII text around the value: code points, not bytes.
    assert!(judge("PIN für ü 123456"));
}

/// Entropy as its definition reads, a term per distinct code point (ASCII
/// ones in code order, then the others as they first occur): what
/// [`entropy`]'s reuse of terms must equal to the bit.
fn entropy_by_definition(value: &str) -> f64 {
    let mut ascii = std::collections::BTreeMap::new();
    let mut other: Vec<(char, u32)> = Vec::new();
    for c in value.chars() {
        if c.is_ascii() {
            *ascii.entry(c).or_insert(0u32) += 1;
        } else if let Some(o) = other.iter_mut().find(|o| o.0 == c) {
            o.1 += 1;
        } else {
            other.push((c, 1));
        }
    }
    if value.is_empty() {
        return 0.0;
    }
    let total = value.chars().count() as f64;
    ascii
        .values()
        .copied()
        .chain(other.iter().map(|o| o.1))
        .map(|k| {
            let p = f64::from(k) / total;
            -p * p.log2()
        })
        .sum()
}

proptest::proptest! {
    #[test]
    fn entropy_reusing_terms_is_the_definition_to_the_bit(
        value in "([a-d]{0,12}|[!-~]{0,40}|[a-cé€😀]{0,30}|a{0,20}b{0,9})",
    ) {
        proptest::prop_assert_eq!(
            entropy(&value).to_bits(),
            entropy_by_definition(&value).to_bits()
        );
    }
}

#[test]
fn entropy_deny_list_and_checksum_drop_values() {
    assert!((entropy("aaaa") - 0.0).abs() < 1e-12);
    assert!((entropy("abcd") - 2.0).abs() < 1e-12);
    assert!((entropy("aabb") - 1.0).abs() < 1e-12);
    let c = codon(
        "    params: {pattern: '[a-z0-9]{8}'}\n    min_entropy: 2.5\n    deny_list: [abcdefgh]\n",
    );
    assert!(c.accepts("k9x2m4q7", 0, 8));
    assert!(!c.accepts("aaaabbbb", 0, 8));
    assert!(!c.accepts("abcdefgh", 0, 8));
    let c = codon("    params: {pattern: '[0-9 ]{19}'}\n    checksum: luhn\n");
    assert!(c.accepts("4111 1111 1111 1111", 0, 19));
    assert!(!c.accepts("4111 1111 1111 1112", 0, 19));
}

#[test]
fn groups_resolve_by_number_and_name() {
    let c = codon("    params: {pattern: 'key=(?P<v>[a-z]+)', group: v}\n");
    assert_eq!(c.group, Some(1));
    let c = codon("    params: {pattern: '(a)(b)', group: 2}\n");
    assert_eq!(c.group, Some(2));
}

#[test]
fn the_manifest_operator_and_reads_follow_the_condition() {
    let p = program(&format!(
        "{HEAD}codons:
  - {{code: A, codon_type: extract_pattern, params: {{pattern: 'a[0-9]'}}, binds_to: has_a, matches_field: a_values, remedy_template: '[A]'}}
  - {{code: B, codon_type: extract_pattern, params: {{pattern: 'b[0-9]'}}, binds_to: has_b, remedy_template: '[B]'}}
  - {{code: B2, codon_type: extract_pattern, params: {{pattern: 'c[0-9]'}}, binds_to: has_b, remedy_template: '[B]'}}
hard_rules:
  - {{id: H1, condition: state.has_a, action: h, severity: fatal}}
  - {{id: H2, condition: state.has_a or state.has_b, action: h, severity: fatal}}
  - {{id: H3, condition: state.has_a and state.has_b, action: h, severity: fatal}}
  - {{id: H4, condition: 'len(state.a_values) >= 2', action: h, severity: fatal}}
  - {{id: H5, condition: state.has_b and not state.has_a, action: h, severity: warning}}
"
    ));
    let ops: Vec<&str> = p.hard_rules.iter().map(|h| h.operator.as_str()).collect();
    assert_eq!(
        ops,
        ["is_true", "any_true", "all_true", "count_gte", "expression"]
    );
    let reads: Vec<Vec<usize>> = p.hard_rules.iter().map(|h| h.reads.clone()).collect();
    assert_eq!(
        reads,
        [vec![0], vec![0, 1, 2], vec![0, 1, 2], vec![0], vec![1, 2]]
    );
    assert_eq!(p.hard_rules[4].factors, ["has_b", "has_a"]);
    assert_eq!(p.count_fields_read(), ["a_values"]);
    assert_eq!(p.hard_rules[0].reason, "Hard rule H1 matched");
}

fn evaluator(yaml: &str) -> crate::Evaluator {
    crate::compile_in_memory(yaml.as_bytes(), "p.yaml", crate::Entitlement::PolicyTest)
        .unwrap()
        .evaluator()
        .unwrap()
}

#[test]
fn a_dropped_candidate_lets_no_overlapping_one_through() {
    // `1234` fails Luhn; `34`, inside it, would pass: it is no candidate.
    let e = evaluator(&format!(
        "{HEAD}codons:
  - {{code: N, codon_type: extract_pattern, params: {{pattern: '[0-9]{{2,4}}'}}, checksum: luhn, binds_to: has_n, remedy_template: '[N]'}}
hard_rules:
  - {{id: N-REDACT, condition: state.has_n, action: redact_n, severity: warning}}
"
    ));
    assert_eq!(e.evaluate("1234").action, "permit_clean_payload");
    let d = e.evaluate("ref 4242 and 1234");
    assert_eq!(d.action, "redact_n");
    assert_eq!(d.clean_text, "ref [N] and 1234");
    assert_eq!(d.triggers[0].spans, vec![[4, 8]]);
}

#[test]
fn the_group_is_the_value_and_hard_rules_read_counts() {
    let e = evaluator(&format!(
        "{HEAD}codons:
  - {{code: K, codon_type: extract_pattern, params: {{pattern: 'key=(?P<v>[a-z0-9]+)', group: v}}, binds_to: has_k, matches_field: keys, remedy_template: '[K]'}}
hard_rules:
  - {{id: MANY, condition: 'len(state.keys) >= 2', action: block_many, severity: fatal}}
  - {{id: ONE, condition: 'state.has_k and not len(state.keys) >= 2', action: redact_one, severity: warning, description: one key}}
"
    ));
    let d = e.evaluate("use key=abc123 now");
    assert_eq!((d.action, d.reason), ("redact_one", Some("one key")));
    assert_eq!(d.clean_text, "use key=[K] now");
    assert_eq!(d.triggers[0].codons, Some(vec!["K"]));
    let json = serde_json::to_value(&d).unwrap();
    assert_eq!(json["triggers"][0]["source"], "hard_rule");
    let d = e.evaluate("key=a1 key=b2");
    assert_eq!(d.action, "block_many");
    assert_eq!(d.triggers.len(), 1);
    assert_eq!(d.triggers[0].spans, vec![[4, 6], [11, 13]]);
    // W(T), what an unblocked stream releases, replaces the FATAL values too.
    assert_eq!(e.redacted_text("key=a1 key=b2"), "key=[K] key=[K]");
    // A codon no firing hard rule reads is not redacted.
    assert_eq!(e.redacted_text("nothing"), "nothing");
}

#[test]
fn codons_are_priced_together_and_named() {
    let mut yaml = format!("{HEAD}codons:\n");
    for i in 0..10 {
        yaml.push_str(&format!(
            "  - {{code: X{i}, codon_type: extract_pattern, params: {{pattern: 'x'}}, binds_to: has_x, remedy_template: '[X]'}}\n"
        ));
    }
    let p = problems(&yaml);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert!(
        p[0].starts_with(
            "the pack's rules and codons together are too costly to evaluate (SPEC §11.4)"
        ),
        "{}",
        p[0]
    );
    assert!(
        p[0].contains(
            "its costliest rules: codons[0] (code `X0`) (64 ns per byte), codons[1] (code `X1`)"
        ),
        "{}",
        p[0]
    );
}

#[test]
fn context_case_folds_beyond_ascii() {
    let c = codon("    params: {pattern: '[0-9]{6}'}\n    context: {words: [kod, 'straße']}\n");
    // U+212A KELVIN SIGN lowercases to `k`; `STRASSE` is not `straße`
    // (simple lowercase, code point by code point).
    assert!(c.accepts("\u{212A}OD 123456", 6, 12));
    assert!(c.accepts("Straße 123456", 8, 14));
    assert!(!c.accepts("STRASSE 123456", 8, 14));
}

#[test]
fn which_programs_stream_natively() {
    let codon = |code: &str, extra: &str| {
        format!("  - {{code: {code}, codon_type: extract_pattern, params: {{pattern: '{code}[0-9]+'{extra}}}, binds_to: has_{}, matches_field: {}_values, remedy_template: '[X]'}}\n", code.to_lowercase(), code.to_lowercase())
    };
    let with = |codons: &str, rules: &str| {
        program(&format!("{HEAD}codons:\n{codons}hard_rules:\n{rules}"))
    };
    let two = format!("{}{}", codon("A", ""), codon("B", ""));
    let rule = |id: &str, cond: &str| {
        format!("  - {{id: {id}, condition: '{cond}', action: x, severity: fatal}}\n")
    };
    assert!(with(&two, &rule("R", "state.has_a or state.has_b")).streams_natively());
    assert!(with(
        &two,
        &format!(
            "{}{}",
            rule("R", "state.has_a"),
            rule("S", "state.has_b == True")
        )
    )
    .streams_natively());
    // A codon no hard rule reads, or two read one codon.
    assert!(!with(&two, &rule("R", "state.has_a")).streams_natively());
    assert!(!with(
        &two,
        &format!(
            "{}{}",
            rule("R", "state.has_a or state.has_b"),
            rule("S", "state.has_b")
        )
    )
    .streams_natively());
    // Conjunctions, counts, negations.
    assert!(!with(&two, &rule("R", "state.has_a and state.has_b")).streams_natively());
    assert!(!with(
        &two,
        &format!(
            "{}{}",
            rule("R", "len(state.a_values) >= 1"),
            rule("S", "state.has_b")
        )
    )
    .streams_natively());
    // A group and a window before the value are settled with the match; a
    // window after it once its text has arrived (the session holds it).
    let grouped = format!(
        "  - {{code: A, codon_type: extract_pattern, params: {{pattern: 'A([0-9]+)', group: 1}}, context: {{words: [id], before: 8}}, binds_to: has_a, remedy_template: '[X]'}}\n{}",
        codon("B", "")
    );
    assert!(with(&grouped, &rule("R", "state.has_a or state.has_b")).streams_natively());
    let after = grouped.replace("before: 8", "before: 8, after: 4");
    assert!(with(&after, &rule("R", "state.has_a or state.has_b")).streams_natively());
}
