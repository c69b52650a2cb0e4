use super::*;
use crate::playbook::parse_document;
use crate::rules::check_declarations;
use regex_automata::Anchored;

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
    use super::super::find_iter_with;
    use super::run_guided;
    use crate::pattern::compile;
    use proptest::prelude::*;

    const PATTERNS: [&str; 11] = [
        r"\b\d{3}-\d{2}-\d{4}\b",
        r"\b\d{3}\b",
        r"\bx\d{2}",
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
            // A stretch of ASCII long enough for the DFA to run on it.
            Just("so the quick brown fox, 123-45-6789 and a@b.co, jumps over ing ".to_string()),
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
                let want: Vec<(usize, usize)> = c.exact.find_iter(&text).map(|m| (m.start(), m.end())).collect();
                for with_guide in [true, false] {
                    let got = run_guided(c, &text, with_guide);
                    prop_assert_eq!(&got, &want, "pattern {}", p);
                }
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
        assert_eq!(run_guided(&c, &text, true), want);
        assert_eq!(run_guided(&c, &text, false), want);
    }
}

#[test]
fn more_than_sixty_four_rules_are_all_scanned() {
    let mut yaml = String::from("pack_id: t\nrules:\n");
    // Letters, not digits: on a run of digits the example pack's codons
    // report an end at every byte, and the pack check then prices every
    // one of 70 candidates searched whole (SPEC §11.4).
    let code = |i: u8| {
        format!(
            "Q{}{}Z",
            char::from(b'a' + i / 26),
            char::from(b'a' + i % 26)
        )
    };
    for i in 0..70 {
        yaml.push_str(&format!(
            "  - {{id: r{i}, type: regex, pattern: '{}', action: redact}}\n",
            code(i)
        ));
    }
    let e = evaluator(&yaml);
    let d = e.evaluate(&format!("x {} y {}", code(69), code(3)));
    let ids: Vec<_> = d.triggers.iter().map(|t| t.rule_id).collect();
    assert_eq!(ids, ["r3", "r69"]);
    assert_eq!(d.clean_text, "x [REDACTED_R69] y [REDACTED_R3]");
    assert_eq!(e.evaluate("nothing here").action, PERMIT_ACTION);
}

/// The guided search of `p` on `text`, with its guide (range bounds,
/// boundary skips, backward candidates) or without (unbounded confirmations).
fn run_guided(p: &CompiledPattern, text: &str, with_guide: bool) -> Vec<(usize, usize)> {
    run_guided_from(p, text, 0, Want::All, with_guide)
}

/// [`run_guided`] from `from`, for every match or only the first.
pub(super) fn run_guided_from(
    p: &CompiledPattern,
    text: &str,
    from: usize,
    want: Want,
    with_guide: bool,
) -> Vec<(usize, usize)> {
    let filter = p.filter_regex.as_ref().unwrap_or(&p.exact);
    let guide = Guide::new(p).filter(|_| with_guide);
    let mut exact_cache = p.exact.create_cache();
    let mut filter_cache = filter.create_cache();
    let mut guide_caches = guide.as_ref().map(Guide::caches);
    let caches = GuidedCaches {
        exact: &mut exact_cache,
        filter: &mut filter_cache,
        guide: guide_caches.as_mut(),
    };
    guided_search(&p.exact, filter, guide.as_ref(), caches, text, from, want)
}

/// The first match of `p`'s exact regex from `from`, as one plain search
/// reports it: what [`Want::First`] must return.
pub(super) fn plain_first(p: &CompiledPattern, text: &str, from: usize) -> Vec<(usize, usize)> {
    p.exact
        .search(&Input::new(text).range(from..))
        .map(|m| (m.start(), m.end()))
        .into_iter()
        .collect()
}

/// [`run_guided`] next to `exact.find_iter`, the contract it must meet
/// byte for byte.
fn guided_vs_find_iter(p: &CompiledPattern, text: &str, with_guide: bool) {
    let want: Vec<(usize, usize)> = p
        .exact
        .find_iter(text)
        .map(|m| (m.start(), m.end()))
        .collect();
    let got = run_guided(p, text, with_guide);
    // Empty matches are dropped before anything sees them; the non-empty
    // ones must be exactly those of `find_iter`.
    let non_empty = |v: &[(usize, usize)]| -> Vec<(usize, usize)> {
        v.iter().copied().filter(|(s, e)| s < e).collect()
    };
    assert_eq!(
        non_empty(&got),
        non_empty(&want),
        "{} on {:?} (guide: {with_guide})",
        p.exact_src,
        text
    );
}

/// Patterns with word boundaries in every place: leading, trailing, inside,
/// `\B`, alternatives that differ only by a boundary, empty matches.
const GUIDED_PATTERNS: &[&str] = &[
    r"\w+ing\b",
    r"(?i)\bsecret\w*",
    r"\b[a-zA-Z0-9_.+-]+@[a-zA-Z0-9-]+\.[a-zA-Z0-9\-.]+\b",
    r"(?:\+?1[-.\s]?)?(?:\([2-9]\d{2}\)|[2-9]\d{2})[-.\s]?\d{3}[-.\s]?\d{4}\b",
    r"\b\d{3}-\d{2}-\d{4}\b",
    r"a\b|ab",
    r"\bé|é\b|éa",
    r"\w\b\w*|ß",
    r"\B\w{2}\b",
    r"\b",
    r"x?\b",
    r"[^ ]+\b",
    r"会\b|\b会",
    r"\b\w+\b",
    r"\w{1,3}\b\s?",
    r"(?m)^\w+\b|\bé$",
    // `\b X \b?` with a fixed-length `X`: confirmed by boundaries alone.
    r"\b\d{3}\b",
    r"\b(?:ab|né)\b",
    r"\bx\d{2}",
    r"\bé",
    // A rejected start inside a word, and a match at the boundary after it.
    r"\b[a-][x-]",
];

#[test]
fn guided_search_matches_find_iter_on_edge_cases() {
    let texts = [
        "",
        "é",
        "ab",
        "aé",
        "éa",
        "éab",
        "a b",
        "aéb ab a",
        "singing éing ßing 会ing",
        "éaingéaingéaing",
        "éaing",
        "aing é",
        "ésEcretsEcret secret",
        "x secret sEcrEtéé",
        "éaa@a.aéaa@a.a a@b.c",
        "mail ops@example.com, é@x.y é a@éb.c",
        "call (212) 555-0199 é 415.555.0123é 555-867-5309",
        "123-45-6789é 123-45-6789 é123-45-6789",
        "会会 会a a会 ",
        "ééé ééé\néé",
        "a\u{301}b a\u{301}",
        "ß ßß ß1 1ß",
        "ba-x éba-x",
    ];
    for src in GUIDED_PATTERNS {
        let p = crate::pattern::compile(src, &[]).unwrap();
        for t in texts {
            guided_vs_find_iter(&p, t, true);
            guided_vs_find_iter(&p, t, false);
        }
    }
}

#[test]
fn range_bound_keeps_look_around_outside_the_range() {
    // A `\b` right at the range's end sees the byte after it: `a\b` must not
    // match in `ab` even when the search stops after `a`.
    let re = crate::pattern::build(r"a\b").unwrap();
    let mut cache = re.create_cache();
    for (text, want) in [
        ("ab", None),
        ("a b", Some((0, 1))),
        ("aé", None),
        ("a", Some((0, 1))),
    ] {
        let got = re
            .search_with(
                &mut cache,
                &Input::new(text).range(0..1).anchored(Anchored::Yes),
            )
            .map(|m| (m.start(), m.end()));
        assert_eq!(got, want, "{text:?}");
    }
    // And before the range's start: `\bb` at 1 in `ab` sees the `a`.
    let re = crate::pattern::build(r"\bb").unwrap();
    let mut cache = re.create_cache();
    let got = re.search_with(
        &mut cache,
        &Input::new("ab").range(1..2).anchored(Anchored::Yes),
    );
    assert!(got.is_none());
    let got = re.search_with(
        &mut cache,
        &Input::new("éb").range(2..3).anchored(Anchored::Yes),
    );
    assert!(got.is_none());
    let got = re.search_with(
        &mut cache,
        &Input::new(" b").range(1..2).anchored(Anchored::Yes),
    );
    assert_eq!(got.map(|m| (m.start(), m.end())), Some((1, 2)));
    // `$` and `\z` see the haystack's end, not the range's.
    let re = crate::pattern::build(r"é$").unwrap();
    let mut cache = re.create_cache();
    let got = re.search_with(
        &mut cache,
        &Input::new("ééx").range(0..4).anchored(Anchored::Yes),
    );
    assert!(got.is_none());
}

#[test]
fn guided_search_matches_find_iter_on_adversarial_texts() {
    // The texts of BENCHMARKS.md's "with `é`" column, shortened, and texts
    // long enough to exhaust the work budget (the plain search then
    // finishes: the results must not change where it takes over).
    let long = |unit: &str, n: usize| unit.repeat(n);
    let cases = [
        (r"\w+ing\b", long("éaing", 3000)),
        (r"\w+ing\b", format!("{} aing", long("aingé", 3000))),
        (r"(?i)\bsecret\w*", long("ésEcret", 3000)),
        (r"(?i)\bsecret\w*", long("é secret sEcret", 500)),
        (
            r"\b[a-zA-Z0-9_.+-]+@[a-zA-Z0-9-]+\.[a-zA-Z0-9\-.]+\b",
            long("éaa@a.a", 3000),
        ),
        (r"a\b|ab", long("éab a ", 2000)),
        (r"[^ ]+\b", long("éaé", 3000)),
        (r"\w+\b", long("éa", 30000)),
        // Past the base budget: a confirmation over most of the rest, and
        // forward proposals that each re-read the rest, hand over to the
        // plain search.
        (r"\w+\b", long("éa", 100_000)),
        (r"\w+ing\b|zz", long("aingé", 40_000)),
        (r"\w+ing\b|zz", format!("{} aing zz", long("aingé", 40_000))),
        (r"\w+ing\b", format!("{} aing", long("aingé", 40_000))),
    ];
    for (src, text) in &cases {
        let p = crate::pattern::compile(src, &[]).unwrap();
        guided_vs_find_iter(&p, text, true);
        guided_vs_find_iter(&p, text, false);
    }
}

#[test]
fn guided_search_on_ascii_stretches_between_non_ascii_characters() {
    // Stretches of 0 to 120 ASCII characters (where the DFA runs) between
    // single non-ASCII ones (where it gives up, and the guided steps take
    // over): matches before, across and after each hand-over.
    const ASCII: [&str; 12] = ["a", "b", "i", "n", "g", "x", "1", "-", " ", ".", "@", "s"];
    const OTHER: [&str; 4] = ["é", "ß", "会", "\u{301}"];
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = || {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 33) as usize
    };
    let patterns: Vec<CompiledPattern> = GUIDED_PATTERNS
        .iter()
        .chain(&[r"\w+ing\b|zz", r"\b\d{3}\b", r"\bsecret\w*"])
        .map(|p| crate::pattern::compile(p, &[]).unwrap())
        .collect();
    for _ in 0..24 {
        let mut text = String::new();
        for _ in 0..(next() % 6) {
            for _ in 0..(next() % 121) {
                text.push_str(ASCII[next() % ASCII.len()]);
            }
            text.push_str(OTHER[next() % OTHER.len()]);
        }
        for _ in 0..(next() % 121) {
            text.push_str(ASCII[next() % ASCII.len()]);
        }
        for p in &patterns {
            guided_vs_find_iter(p, &text, true);
            for from in (0..=text.len())
                .step_by(11)
                .filter(|&f| text.is_char_boundary(f))
            {
                let want = plain_first(p, &text, from);
                let got = run_guided_from(p, &text, from, Want::First, true);
                assert_eq!(got, want, "{} on {text:?} from {from}", p.exact_src);
            }
        }
    }
}

#[test]
fn guided_search_on_deterministic_random_texts() {
    const ALPHABET: [&str; 12] = ["a", "b", "i", "n", "g", "é", "ß", "会", "1", " ", ".", "@"];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for src in GUIDED_PATTERNS {
        let p = crate::pattern::compile(src, &[]).unwrap();
        for len in [1usize, 7, 40, 300, 3000] {
            let mut text = String::new();
            for _ in 0..len {
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                let r = (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize;
                text.push_str(ALPHABET[r % ALPHABET.len()]);
            }
            guided_vs_find_iter(&p, &text, true);
            guided_vs_find_iter(&p, &text, false);
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// Guided search and `find_iter` agree on random texts mixing ASCII,
    /// `é`, `ß`, CJK, digits and spaces.
    #[test]
    fn guided_search_is_find_iter(text in "[a-gin-sxAB0-9 .@\\-éß会\u{301}]{0,80}") {
        static PATTERNS: OnceLock<Vec<CompiledPattern>> = OnceLock::new();
        let patterns = PATTERNS.get_or_init(|| {
            GUIDED_PATTERNS
                .iter()
                .map(|p| crate::pattern::compile(p, &[]).unwrap())
                .chain([crate::pattern::compile(r"\bsecret\w*", &[crate::pattern::Flag::IgnoreCase]).unwrap()])
                .collect()
        });
        for p in patterns {
            guided_vs_find_iter(p, &text, true);
        }
    }
}

/// Bounded patterns (all but the last), more of them than
/// `SET_THRESHOLD`: the combined pass runs, and each search is confined to
/// the stretches before its pattern's match ends.
const WINDOWED_PATTERNS: &[&str] = &[
    r"\b\d{3}-\d{2}-\d{4}\b",
    r"\b\d{3}\b",
    r"\bx\d{2}",
    r"(?i)\b(?:MRN|EHR|RX)[-:]?\s*\d{6,10}\b",
    r"\b(?:a|ab)\b",
    r"é\b",
    r"a\b|ab",
    r"\bé|é\b|éa",
    r"\w{1,3}\b\s?",
    r"(?m)^\w{1,4}\b|\bé$",
    r"\b(?:ab|né)\b",
    r"\d{2,5}",
    r"[ab]{1,3}x?",
    r"会\b|\b会",
    // Found from their heads on ASCII text: a group repeated a varying
    // number of times, and an open-ended pattern.
    r"\b[a-c]{2}\d{2}(?: ?[a-c0-9]{2}){1,3}(?:-\d)?\b",
    r"(?i)\b(?:ab|xn|a)\s*[:.]\s*([^\s:]{2,4})",
    r"\bx\w+",
];

/// The evaluator built from [`WINDOWED_PATTERNS`] without the pack check.
fn windowed_pack() -> (Evaluator, Vec<CompiledPattern>) {
    let compiled: Vec<CompiledPattern> = WINDOWED_PATTERNS
        .iter()
        .map(|p| crate::pattern::compile(p, &[]).unwrap())
        .collect();
    // Built without the pack cost check: some are dense on purpose.
    let rules = redact_rules(&compiled);
    (Evaluator::new("t.p.v1", "1", &rules).unwrap(), compiled)
}

/// A redacting rule `r<i>` for each pattern.
fn redact_rules(patterns: &[CompiledPattern]) -> Vec<CustomRule> {
    patterns
        .iter()
        .enumerate()
        .map(|(i, p)| CustomRule {
            id: format!("r{i}"),
            rule_type: RuleType::Regex,
            action: RuleAction::Redact,
            description: None,
            pattern: p.clone(),
        })
        .collect()
}

/// The plumbing the property test below cannot see: the pass reads each
/// matcher's own bound, and a bounded pattern is confined to the stretch
/// before its one match (here the SSN's 11 bytes), an unbounded one is not.
#[test]
fn a_bounded_pattern_is_searched_only_before_its_match_ends() {
    let (e, _) = windowed_pack();
    let text = format!("x12 {} 123-45-6789", "q".repeat(300));
    let n = text.len();
    let mut caches = e.ends.create_caches();
    let pass = e.ends.run(
        &mut caches,
        &text,
        &e.max_lens,
        pattern::ends::ENDS_BASE,
        false,
    );
    assert!(pass.known.iter().all(|&k| k), "the pass gave up");
    assert_eq!(pass.passes, 1);
    assert_eq!(pass.stretches[0], vec![(n - 11, n)]);
    assert_eq!(
        e.stretches(0, &text, &pass.stretches[0], true).as_deref(),
        Some(&[(n - 11, n)][..])
    );
    // `\bx\w+` (the last) is unbounded: seen, searched whole.
    let last = WINDOWED_PATTERNS.len() - 1;
    assert!(pass.seen[last] && pass.stretches[last].is_empty());
    assert_eq!(e.stretches(last, &text, &pass.stretches[last], true), None);
    assert_eq!(e.matches(&text)[0], vec![(n - 11, n)]);
}

/// A pack whose pass over all patterns gives up on a non-ASCII text, while
/// the pass over the half with the literals does not: the literals are
/// searched only near their ends, and every matcher finds what a search of
/// the whole text finds.
#[test]
fn where_the_pass_over_all_gives_up_the_halves_narrow_the_same_matches() {
    let (srcs, text) = pattern::ends::tests::explosive_and_plain();
    let compiled: Vec<CompiledPattern> = srcs
        .iter()
        .map(|p| crate::pattern::compile(p, &[]).unwrap())
        .collect();
    let rules = redact_rules(&compiled);
    let e = Evaluator::new("t.p.v1", "1", &rules).unwrap();
    let mut caches = e.ends.create_caches();
    let found = e.ends.run(
        &mut caches,
        &text,
        &e.max_lens,
        pattern::ends::ENDS_BASE,
        true,
    );
    // The built-in codons follow the rules: the second half of the 38
    // matchers holds most literals.
    assert!(found.passes > 1 && !found.known[0]);
    assert!(found.known[19..32].iter().all(|&k| k));
    let matches = e.matches(&text);
    for (i, r) in rules.iter().enumerate() {
        let want: Vec<(usize, usize)> = r
            .pattern
            .exact
            .find_iter(&text)
            .map(|m| (m.start(), m.end()))
            .collect();
        assert_eq!(
            matches.get(i).cloned().unwrap_or_default(),
            want,
            "{}",
            srcs[i]
        );
    }
    assert!(matches.iter().flatten().count() > 1000);
}

/// Every rule's spans in `text` are what `find_iter` over the whole text
/// gives.
fn windowed_finds_what_whole_searches_find(
    text: &str,
) -> Result<(), proptest::test_runner::TestCaseError> {
    static PACK: OnceLock<(Evaluator, Vec<CompiledPattern>)> = OnceLock::new();
    let (e, compiled) = PACK.get_or_init(windowed_pack);
    let found = e.matches(text);
    for (i, c) in compiled.iter().enumerate() {
        let want: Vec<(usize, usize)> = c
            .exact
            .find_iter(text)
            .filter(|m| !m.is_empty())
            .map(|m| (m.start(), m.end()))
            .collect();
        let got = found.get(i).cloned().unwrap_or_default();
        proptest::prop_assert_eq!(got, want, "pattern {}", WINDOWED_PATTERNS[i]);
    }
    Ok(())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// Whatever the combined pass confines, every rule's spans are what
    /// `find_iter` over the whole text gives, on random texts mixing ASCII,
    /// `é`, CJK, digits and spaces (long enough for the DFAs to run).
    #[test]
    fn confined_searches_find_what_whole_searches_find(
        text in "[a-cinxAB0-9 .:\\-éß会\u{301}\n]{0,300}"
    ) {
        windowed_finds_what_whole_searches_find(&text)?;
    }

    /// The same on ASCII text, where the pass runs the exact patterns, or
    /// their heads, and dense text (values every few bytes).
    #[test]
    fn confined_searches_find_what_whole_searches_find_on_ascii(
        text in "(?:[a-cinxAB0-9 .:\\-\n]|ab12 |ab12 c3|xn: ){0,120}"
    ) {
        windowed_finds_what_whole_searches_find(&text)?;
    }
}

/// Required literals and context words rule out only what cannot match:
/// under Unicode case folding (`ſ` for `(?i)s`, the Kelvin sign for `k`)
/// and for codons gated by their context words, the values still count.
#[test]
fn literal_gates_keep_every_value() {
    let yaml = r#"
schema_version: 2
pack_id: t.literals.v1
version: 1.0.0
codons:
  - code: TOKEN_ID
    codon_type: extract_pattern
    params: {"pattern": "\\b[0-9]{9}\\b"}
    context: {words: [tokenid], before: 16}
    binds_to: has_token_id
    remedy_template: "[TOKEN_ID]"
  - code: SECRET
    codon_type: extract_pattern
    params: {"pattern": "secret=[a-z]{4}", "flags": ["IGNORECASE"]}
    binds_to: has_secret
    remedy_template: "[SECRET]"
  - code: GHP
    codon_type: extract_pattern
    params: {"pattern": "\\bghp_[a-z]{4}\\b"}
    binds_to: has_ghp
    remedy_template: "[GHP]"
hard_rules:
  - id: REDACT
    condition: state.has_token_id or state.has_secret or state.has_ghp
    action: redact_found
    severity: warning
"#;
    let e = crate::testing::compiled_evaluator(yaml.as_bytes(), "t.yaml").unwrap();
    for (text, clean) in [
        ("tokenid 123456789", "tokenid [TOKEN_ID]"),
        ("to\u{212A}enid 123456789", "to\u{212A}enid [TOKEN_ID]"),
        ("id 123456789", "id 123456789"),
        ("\u{17F}ECRET=abcd", "[SECRET]"),
        ("SeCrEt=abcd", "[SECRET]"),
        ("ghp_abcd", "[GHP]"),
        ("GHP_abcd", "GHP_abcd"),
    ] {
        let d = e.evaluate(text);
        assert_eq!(d.clean_text, clean, "{text:?}");
        assert_eq!(
            d.action,
            if clean == text {
                PERMIT_ACTION
            } else {
                "redact_found"
            },
            "{text:?}"
        );
    }
}

/// More codons than `SET_THRESHOLD` (the combined pass runs), some with
/// context words before or after their values, two sharing one list of
/// words, one with a group and one with a checksum.
const CONTEXT_PACK: &str = r#"
schema_version: 2
pack_id: t.context.v1
version: 1.0.0
codons:
  - {code: C0, codon_type: extract_pattern, params: {"pattern": "\\b[0-9]{3}\\b"}, context: {words: [ab, "x y"], before: 6}, binds_to: c0, remedy_template: "[C0]"}
  - {code: C1, codon_type: extract_pattern, params: {"pattern": "\\b[0-9]{4}\\b"}, context: {words: [ab], after: 5}, binds_to: c1, remedy_template: "[C1]"}
  - {code: C2, codon_type: extract_pattern, params: {"pattern": "[0-9]{2}-[0-9]{2}"}, context: {words: [cd, ab], before: 4, after: 4}, binds_to: c2, remedy_template: "[C2]"}
  - {code: C3, codon_type: extract_pattern, params: {"pattern": "\\b[a-c]{2,3}[0-9]\\b"}, context: {words: [ab, "x y"], before: 3}, binds_to: c3, remedy_template: "[C3]"}
  - {code: C4, codon_type: extract_pattern, params: {"pattern": "([0-9]{3})x", "group": 1}, context: {words: [cd], before: 5}, binds_to: c4, remedy_template: "[C4]"}
  - {code: C5, codon_type: extract_pattern, params: {"pattern": "\\b[0-9]{4}-[0-9]\\b"}, checksum: luhn, context: {words: [d], before: 2, after: 2}, binds_to: c5, remedy_template: "[C5]"}
  - {code: C6, codon_type: extract_pattern, params: {"pattern": "\\bq[0-9]{2}\\b"}, binds_to: c6, remedy_template: "[C6]"}
  - {code: C7, codon_type: extract_pattern, params: {"pattern": "\\bzz[a-d]\\b"}, binds_to: c7, remedy_template: "[C7]"}
  - {code: C8, codon_type: extract_pattern, params: {"pattern": "[0-9]{5}"}, binds_to: c8, remedy_template: "[C8]"}
  - {code: C9, codon_type: extract_pattern, params: {"pattern": "b[0-9]"}, binds_to: c9, remedy_template: "[C9]"}
hard_rules:
  - id: REDACT
    condition: state.c0 or state.c1 or state.c2 or state.c3 or state.c4 or state.c5 or state.c6 or state.c7 or state.c8 or state.c9
    action: redact_found
    severity: warning
"#;

/// Tokens of [`CONTEXT_PACK`]'s texts: its context words, values of its
/// codons, near misses and filler.
fn context_token() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::strategy::Strategy;
    proptest::prop_oneof![
        proptest::sample::select(vec![
            "ab", "x y", "cd", "d", "AB", "xab", "cdx", "q12", "zza", "123", "1234", "12-34",
            "4111-1", "4111-2", "123x", "ab1", "b5", "12345", "9", "zz",
        ])
        .prop_map(str::to_string),
        "[a-dxyz0-9]{1,6}",
    ]
}

/// Each codon's values by the definition: every leftmost-first match of
/// its pattern over the whole text, its group, through its checks with the
/// value's own windows scanned.
fn values_by_definition(e: &Evaluator, text: &str) -> Vec<Vec<(usize, usize)>> {
    e.program
        .codons
        .iter()
        .map(|c| {
            let mut caps = c.pattern.exact.create_captures();
            let mut out = Vec::new();
            for m in c.pattern.exact.find_iter(text).filter(|m| !m.is_empty()) {
                let (s, e) = match c.group {
                    Some(g) => {
                        c.pattern.exact.captures(
                            Input::new(text)
                                .range(m.start()..m.end())
                                .anchored(Anchored::Yes),
                            &mut caps,
                        );
                        let Some(span) = caps.get_group(g) else {
                            continue;
                        };
                        (span.start, span.end)
                    }
                    None => (m.start(), m.end()),
                };
                if s < e && c.accepts(text, s, e) {
                    out.push((s, e));
                }
            }
            out
        })
        .collect()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

    /// Candidates dropped before their search (no context word within
    /// reach of where they end) and context words indexed once for the
    /// codons that share them leave every codon's values as the
    /// definition gives them: on short texts (the whole text indexed at
    /// once) and long ones (each value's windows scanned alone).
    #[test]
    fn context_gates_and_shared_indexes_keep_every_value(
        parts in proptest::collection::vec((context_token(), "[ -]{0,3}"), 0..40),
        pad in proptest::prelude::any::<bool>(),
    ) {
        let text: String = parts.iter().map(|(t, sep)| format!("{t}{sep}")).collect();
        static PACK: OnceLock<Evaluator> = OnceLock::new();
        // Built without the pack cost check: some patterns are dense.
        let e = PACK.get_or_init(|| {
            let d = parse_document(CONTEXT_PACK.as_bytes(), "t").unwrap();
            let mut problems = Vec::new();
            let program = crate::program::check_v2(&d.doc, &[], &mut problems).unwrap();
            assert!(problems.is_empty(), "{problems:?}");
            Evaluator::with_program("t.context.v1", "1", &[], Arc::new(program)).unwrap()
        });
        let text = if pad { format!("{text}{}", " ".repeat(20_000)) } else { text };
        let want = values_by_definition(e, &text);
        let got = e.matches(&text);
        for (c, want) in want.iter().enumerate() {
            let got = got.get(c).cloned().unwrap_or_default();
            proptest::prop_assert_eq!(&got, want, "codon C{}", c);
        }
    }
}

/// The scan of required bytes stops once the combined pass is sure to run
/// (more than eight candidates without literals): every matcher is then a
/// candidate, and where no finished pass covers them, the scan is finished
/// and leaves only the matchers whose bytes occur.
#[test]
fn the_required_bytes_scan_stops_once_the_pass_must_run() {
    let (e, _) = windowed_pack();
    // The rules and the example pack's codons.
    let all: Vec<usize> = (0..e.matchers.len()).collect();
    // Digits and letters in the first block: most patterns are candidates
    // there, but not those that need `é` or `会`.
    let text = format!("ab12 c3 x12 123-45-6789 xn: a. {}", "q".repeat(600));
    let (whole, scanned) = e.mask(text.as_bytes(), false);
    assert!(scanned);
    let exact: Vec<usize> = all
        .iter()
        .copied()
        .filter(|&i| whole[i / 64] & (1 << (i % 64)) != 0)
        .collect();
    assert!(exact.len() > SET_THRESHOLD && exact.len() < all.len());
    assert_eq!(e.candidates(&text), (all.clone(), false));
    // Finished for what no pass covered: the exact candidates.
    let mut more = all.clone();
    e.rescan(&text, &mut more, None);
    assert_eq!(more, exact);
    // What a finished pass covered stays, to be judged by the pass.
    let mut more = all.clone();
    let known = vec![true; all.len()];
    e.rescan(&text, &mut more, Some(&known));
    assert_eq!(more, all);
    // A short text is read whole: the same candidates as the whole scan.
    let short = "ab12 c3 x12";
    let (mask, _) = e.mask(short.as_bytes(), false);
    let want: Vec<usize> = all
        .iter()
        .copied()
        .filter(|&i| mask[i / 64] & (1 << (i % 64)) != 0)
        .collect();
    assert_eq!(e.candidates(short).0, want);
}
