use super::*;
use crate::playbook::parse_document;
use crate::rules::check_declarations;

pub(crate) fn evaluator(yaml: &str) -> Evaluator {
    let d = parse_document(yaml.as_bytes(), "t").unwrap();
    let rules = check_declarations(&d.doc, "t").unwrap();
    Evaluator::new("t.p.v1", "1", &rules).unwrap()
}

pub(crate) fn builtin_only() -> Evaluator {
    evaluator("pack_id: t.p.v1\n")
}

#[test]
fn permit_returns_payload_unchanged() {
    let e = builtin_only();
    let d = e.evaluate("Lunch is at noon.");
    assert_eq!(d.action, PERMIT_ACTION);
    assert_eq!(d.severity, None);
    assert_eq!(d.reason, None);
    assert!(d.invariants_passed);
    assert_eq!(d.clean_text, "Lunch is at noon.");
    assert!(d.triggers.is_empty());
}

#[test]
fn ssn_exclusions() {
    let e = builtin_only();
    assert_eq!(
        e.evaluate("ssn 123-45-6789").action,
        "block_glba_ssn_leakage"
    );
    for bad in [
        "000-12-3456",
        "666-12-3456",
        "912-12-3456",
        "123-00-4567",
        "123-45-0000",
        "1234-45-6789",
    ] {
        let d = e.evaluate(&format!("id {bad} x"));
        assert!(
            d.triggers
                .iter()
                .all(|t| t.rule_id != "RULE-GLBA-SSN-BLOCK"),
            "{bad}"
        );
    }
}

#[test]
fn card_needs_luhn() {
    let e = builtin_only();
    let d = e.evaluate("card 4111 1111 1111 1111 ok");
    assert_eq!(d.action, "block_pci_dss_pan_leakage");
    assert_eq!(d.triggers[0].spans, vec![[5, 24]]);
    assert_eq!(d.clean_text, BLOCKED_TEXT);
    let d = e.evaluate("card 4111 1111 1111 1112 ok");
    assert!(d
        .triggers
        .iter()
        .all(|t| t.rule_id != "RULE-PCI-DSS-PAN-BLOCK"));
}

#[test]
fn contact_redaction_and_code_point_spans() {
    let e = builtin_only();
    let d = e.evaluate("Écrivez à ops@example.com ou 555-867-5309 — 10.0.0.1");
    assert_eq!(d.action, "redact_and_permit_contact_pii");
    assert_eq!(d.severity, Some(Severity::Warning));
    assert_eq!(d.triggers.len(), 1);
    let t = &d.triggers[0];
    assert_eq!(
        t.codons.as_deref(),
        Some(&["PII_EMAIL_EXTRACT", "PII_PHONE_EXTRACT", "PII_IPV4_EXTRACT"][..])
    );
    assert_eq!(t.spans, vec![[10, 25], [29, 41], [44, 52]]);
    assert_eq!(
        d.clean_text,
        "Écrivez à [REDACTED_EMAIL] ou [REDACTED_PHONE] — [REDACTED_IP]"
    );
    assert!(!d.invariants_passed);
}

#[test]
fn word_boundary_is_unicode() {
    let e = builtin_only();
    // "é" is a word character: no boundary between it and the digits.
    assert_eq!(e.evaluate("é123-45-6789").action, PERMIT_ACTION);
    assert_eq!(e.evaluate("«123-45-6789»").action, "block_glba_ssn_leakage");
}

#[test]
fn custom_rules_first_and_fatal_wins() {
    let e = evaluator(
        "pack_id: t\nrules:\n  - {id: ticket_id, type: regex, pattern: '\\bTCK-\\d{6}\\b', action: redact}\n  - {id: code, type: regex, pattern: 'PROJ-\\d', action: block, description: No codes}\n",
    );
    let d = e.evaluate("TCK-004211 and ops@example.com and PROJ-1");
    let ids: Vec<_> = d.triggers.iter().map(|t| t.rule_id).collect();
    assert_eq!(ids, ["ticket_id", "code", "RULE-GDPR-CONTACT-REDACT"]);
    assert_eq!(d.action, "block_code");
    assert_eq!(d.reason, Some("No codes"));
    let d = e.evaluate("See TCK-004211 for ops@example.com");
    assert_eq!(d.action, "redact_ticket_id");
    assert_eq!(d.reason, Some("Custom rule ticket_id matched"));
    assert_eq!(
        d.clean_text,
        "See [REDACTED_TICKET_ID] for [REDACTED_EMAIL]"
    );
}

#[test]
fn overlapping_redactions_merge_once() {
    let e = evaluator(
        "pack_id: t\nrules:\n  - {id: at_host, type: regex, pattern: '@example\\.com and x', action: redact}\n",
    );
    // The email [0,15) and the custom match [3,21) overlap: one region, the earlier start's placeholder.
    let d = e.evaluate("ops@example.com and x!");
    assert_eq!(d.clean_text, "[REDACTED_EMAIL]!");
}

#[test]
fn luhn_function() {
    assert!(luhn("4111-1111-1111-1111"));
    assert!(!luhn("4111-1111-1111-1112"));
    assert!(!luhn("0"));
    assert!(luhn("00"));
}

#[test]
fn receipt_is_deterministic() {
    let e = builtin_only();
    assert_eq!(e.evaluate("x").receipt_hash, e.evaluate("x").receipt_hash);
    assert_ne!(e.evaluate("x").receipt_hash, e.evaluate("y").receipt_hash);
}

mod guided {
    use super::super::{find_iter_with, guided_find_iter};
    use crate::pattern::compile;
    use proptest::prelude::*;

    const PATTERNS: [&str; 9] = [
        r"\b\d{3}-\d{2}-\d{4}\b",
        r"\b[a-zA-Z0-9_.+-]+@[a-zA-Z0-9-]+\.[a-zA-Z0-9\-.]+\b",
        r"(?i)\b(?:MRN|EHR|RX)[-:]?\s*\d{6,10}\b",
        r"\bx\w+",
        r"\b(?:a|ab)\b",
        r"\w+ing\b",
        r"é\b",
        r"\B\d+",
        r"(?:\+?1[-.\s]?)?(?:\([2-9]\d{2}\)|[2-9]\d{2})[-.\s]?\d{3}[-.\s]?\d{4}\b",
    ];

    fn piece() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("é".to_string()),
            Just("x".to_string()),
            Just("ab".to_string()),
            Just("ing".to_string()),
            Just("会議".to_string()),
            Just("e\u{301}".to_string()),
            Just("a@b.co".to_string()),
            Just("123-45-6789".to_string()),
            Just("MRN: 1234567".to_string()),
            Just("212-555-0199".to_string()),
            "[ .,\\-@0-9]{1,3}",
            "\\PC{0,3}",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn guided_search_equals_find_iter(parts in proptest::collection::vec(piece(), 0..16)) {
            static COMPILED: std::sync::OnceLock<Vec<crate::pattern::CompiledPattern>> = std::sync::OnceLock::new();
            let compiled = COMPILED.get_or_init(|| PATTERNS.iter().map(|p| compile(p, &[]).unwrap()).collect());
            let text: String = parts.concat();
            for (p, c) in PATTERNS.iter().zip(compiled) {
                let filter = c.filter_regex.as_ref().unwrap_or(&c.exact);
                let want: Vec<(usize, usize)> = c.exact.find_iter(&text).map(|m| (m.start(), m.end())).collect();
                let got = guided_find_iter(&c.exact, &mut c.exact.create_cache(), filter, &mut filter.create_cache(), &text);
                prop_assert_eq!(got, want, "pattern {}", p);
            }
        }
    }

    #[test]
    fn find_iter_with_a_cache_equals_find_iter() {
        for p in PATTERNS {
            let c = compile(p, &[]).unwrap();
            for text in [
                "",
                "x ab a ab é ing singing 123-45-6789 a@b.co",
                "e\u{301}123 é 1 2",
            ] {
                let want: Vec<(usize, usize)> = c
                    .exact
                    .find_iter(text)
                    .map(|m| (m.start(), m.end()))
                    .collect();
                let got = find_iter_with(
                    &c.exact,
                    &mut c.exact.create_cache(),
                    regex_automata::Input::new(text),
                );
                assert_eq!(got, want, "{p} on {text:?}");
            }
        }
        // Empty matches advance by one character, as the regex crate does.
        let re = regex_automata::meta::Regex::new(r"\b").unwrap();
        let got = find_iter_with(
            &re,
            &mut re.create_cache(),
            regex_automata::Input::new("ab é"),
        );
        assert_eq!(got, vec![(0, 0), (2, 2), (3, 3), (5, 5)]);
    }

    #[test]
    fn many_rejected_starts_fall_back_to_the_linear_search() {
        let c = compile(r"\bx\w+", &[]).unwrap();
        let text = format!("é{} x{}", "x".repeat(5000), "y".repeat(10));
        let want: Vec<(usize, usize)> = c
            .exact
            .find_iter(&text)
            .map(|m| (m.start(), m.end()))
            .collect();
        assert_eq!(want.len(), 1);
        let filter = c.filter_regex.as_ref().unwrap();
        let got = guided_find_iter(
            &c.exact,
            &mut c.exact.create_cache(),
            filter,
            &mut filter.create_cache(),
            &text,
        );
        assert_eq!(got, want);
    }
}

#[test]
fn more_than_sixty_four_rules_are_all_scanned() {
    let mut yaml = String::from("pack_id: t\nrules:\n");
    for i in 0..70 {
        yaml.push_str(&format!(
            "  - {{id: r{i}, type: regex, pattern: 'Q{i}Z', action: redact}}\n"
        ));
    }
    let e = evaluator(&yaml);
    let d = e.evaluate("x Q69Z y Q3Z");
    let ids: Vec<_> = d.triggers.iter().map(|t| t.rule_id).collect();
    assert_eq!(ids, ["r3", "r69"]);
    assert_eq!(d.clean_text, "x [REDACTED_R69] y [REDACTED_R3]");
    assert_eq!(e.evaluate("nothing here").action, PERMIT_ACTION);
}
