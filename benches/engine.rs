//! Engine benchmarks (issue 2): the example pack plus ten custom rules on
//! clean ASCII, mixed-script, PII-dense and 64 KiB payloads. Run with
//! `cargo bench --bench engine`; results and ratios go to BENCHMARKS.md.
//! The `normalize_*` groups measure `normalize: evasion` ([§15](docs/evasion.md#s15)) against
//! the reference semantics on the same payloads.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::{fill, ENGLISH, MIXED, PII};
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use helixor::{check_declarations, parse_document, Evaluator, Normalize};

const PLAYBOOK: &str = r#"
pack_id: bench.ten_rules.v1
version: 1.0.0
rules:
  - {id: project_code, type: regex, pattern: '\bPROJ-[A-Z]+-\d+[A-Z]?\b', action: block}
  - {id: ticket_id, type: regex, pattern: '\bTCK-\d{6}\b', action: redact}
  - {id: cost_code, type: regex, pattern: '\bCC-\d{4}\b', action: block}
  - {id: supplier_ref, type: regex, pattern: '\bSUP-[A-Z]{3}-\d{3}\b', action: block}
  - {id: account_no, type: regex, pattern: '\bACCT-\d{8}\b', action: redact}
  - {id: codename, type: regex, pattern: '\b(?:bluebird|nightjar|kestrel)\b', action: block, flags: [IGNORECASE]}
  - {id: invoice, type: regex, pattern: '\bINV-\d{5,9}\b', action: redact}
  - {id: employee_id, type: regex, pattern: '\bEMP\d{6}\b', action: redact}
  - {id: aws_key, type: regex, pattern: '\bAKIA[0-9A-Z]{16}\b', action: block}
  - {id: gift_card, type: luhn_checksum, pattern: '\b\d{4}-\d{4}-\d{4}\b', action: redact}
"#;

/// The PII line written to slip past matching as written ([§15](docs/evasion.md#s15)).
const EVASIVE: &str = "SSN １２３-４５-６７８９, card ٤١١١ ١١١١ ١١١١ ١١١١, MRN: 1234\u{200D}5678, \
mail jane.doe＠example.com, call (212) 555-01\u{AD}99, ticket TCK-004211\u{301}. ";

/// Prose in Cyrillic and Greek: single-script words full of letters that look
/// Latin ([§15](docs/evasion.md#s15) round 2 maps them only inside a word that mixes scripts).
const CYRILLIC_GREEK: &str = "Ещё раз спасибо за помощь, встреча перенесена на пятницу. \
Παρακαλώ στείλτε το έγγραφο μέχρι την Παρασκευή. Отчёт готов, проверьте его до обеда. ";

/// English prose with the typographic dashes LLM replies are full of.
const DASHES: &str = "The release — planned for March — slipped by two weeks; pages 10–12 \
cover the details. We will meet again — same room, same time — on Friday. ";

/// The PII line written with the evasions of [§15](docs/evasion.md#s15) round 2: Unicode dashes,
/// parenthesized and dingbat digits, a NUL, a mark after a space, look-alike
/// letters inside words.
const EVASIVE2: &str = "SSN 123\u{2010}45\u{2013}6789, SSN ⑴⑵⑶-⑷⑸-⑹⑺⑻⑼, SSN ❶❷❸-❹❺-❻❼❽❾, \
id 123-45\u{0}-6789, card 4111 \u{301}1111 1111 1111, mail j\u{430}ne.doe@\u{435}\u{445}ample.com, \
mail jan\u{435}.doe@example.com. ";

fn evaluator() -> Evaluator {
    helixor::testing::rules_evaluator("bench.ten_rules.v1", "1.0.0", PLAYBOOK).unwrap()
}

/// `HELIXOR_BENCH_ONCE=CASE:MODE` (MODE `none` or `evasion`; CASE a case
/// name below, or `start` for none at all): evaluates that payload
/// `HELIXOR_BENCH_REPEAT` times (default 1000) and exits, for instruction
/// counts under `valgrind --tool=callgrind` (subtract the `start` run).
fn once(e: &Evaluator, cases: &[(&str, String)]) -> bool {
    let Ok(spec) = std::env::var("HELIXOR_BENCH_ONCE") else {
        return false;
    };
    let (case, mode) = spec.split_once(':').unwrap_or((spec.as_str(), "none"));
    let mode: Normalize = mode.parse().unwrap();
    let repeat: usize = std::env::var("HELIXOR_BENCH_REPEAT")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000);
    if let Some((_, text)) = cases.iter().find(|(n, _)| *n == case) {
        for _ in 0..repeat {
            black_box(e.evaluate_with(black_box(text), mode));
        }
    }
    true
}

fn bench(c: &mut Criterion) {
    let e = evaluator();
    let cases = [
        ("clean_ascii_1k", fill(ENGLISH, 1024)),
        ("mixed_script_1k", fill(MIXED, 1024)),
        ("pii_dense_1k", fill(PII, 1024)),
        // One typographic apostrophe, as LLM replies often have: the text
        // is no longer ASCII for the rules with `\b`.
        (
            "pii_dense_1k_one_quote",
            format!("It’s {}", fill(PII, 1020)),
        ),
        ("clean_ascii_64k", fill(ENGLISH, 64 * 1024)),
        ("mixed_script_64k_two_pii", {
            // Long multilingual context with an e-mail and a phone in the middle.
            let half = fill(MIXED, 32 * 1024);
            format!("{half} écrivez à ops@example.com ou 212-555-0199 {half}")
        }),
    ];
    let evasive = fill(EVASIVE, 1024);
    // [§15](docs/evasion.md#s15) round 2: prose the view must look at without changing it,
    // prose it changes (dashes), and the round-2 evasions.
    let round2 = [
        ("cyrillic_greek_1k", fill(CYRILLIC_GREEK, 1024)),
        ("dashes_prose_1k", fill(DASHES, 1024)),
        ("evasive2_pii_1k", fill(EVASIVE2, 1024)),
    ];
    let mut all: Vec<(&str, String)> = cases.iter().map(|(n, t)| (*n, t.clone())).collect();
    all.push(("evasive_pii_1k", evasive.clone()));
    all.extend(round2.iter().cloned());
    if once(&e, &all) {
        return;
    }
    // Sanity: the clean payloads really are clean, the dense one is not.
    assert_eq!(e.evaluate(&cases[0].1).action, "permit_clean_payload");
    assert_eq!(e.evaluate(&cases[1].1).action, "permit_clean_payload");
    assert_eq!(e.evaluate(&cases[4].1).action, "permit_clean_payload");
    assert_ne!(e.evaluate(&cases[2].1).action, "permit_clean_payload");
    assert_eq!(
        e.evaluate(&cases[5].1).action,
        "redact_and_permit_contact_pii"
    );
    let mut g = c.benchmark_group("evaluate");
    for (name, text) in &cases {
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_function(*name, |b| b.iter(|| e.evaluate(black_box(text))));
    }
    g.finish();

    // [§15](docs/evasion.md#s15): the same payloads, and PII written evasively, with and
    // without the evasion view.
    assert_eq!(e.evaluate(&evasive).action, "permit_clean_payload");
    assert_ne!(
        e.evaluate_with(&evasive, Normalize::Evasion).action,
        "permit_clean_payload"
    );
    let mut normalize_cases: Vec<(&str, &String)> = cases.iter().map(|(n, t)| (*n, t)).collect();
    normalize_cases.push(("evasive_pii_1k", &evasive));
    normalize_cases.extend(round2.iter().map(|(n, t)| (*n, t)));
    for (group, mode) in [
        ("normalize_none", Normalize::None),
        ("normalize_evasion", Normalize::Evasion),
    ] {
        let mut g = c.benchmark_group(group);
        for (name, text) in &normalize_cases {
            g.throughput(Throughput::Bytes(text.len() as u64));
            g.bench_function(*name, |b| b.iter(|| e.evaluate_with(black_box(text), mode)));
        }
        g.finish();
    }

    // Baseline for the ratios in BENCHMARKS.md: the naive design, one
    // RegexSet over the exact patterns (Unicode `\b`), asked which match.
    let doc = parse_document(PLAYBOOK.as_bytes(), "bench").unwrap().doc;
    let mut exact: Vec<String> = check_declarations(&doc, "bench")
        .unwrap()
        .iter()
        .map(|r| r.pattern.exact_src.clone())
        .collect();
    for c in helixor::CODONS {
        let flags: &[helixor::pattern::Flag] = if c.ignore_case {
            &[helixor::pattern::Flag::IgnoreCase]
        } else {
            &[]
        };
        exact.push(
            helixor::pattern::compile(c.pattern, flags)
                .unwrap()
                .exact_src,
        );
    }
    let naive = regex::RegexSet::new(&exact).unwrap();
    let mut g = c.benchmark_group("naive_regexset");
    for (name, text) in &cases[..2] {
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_function(*name, |b| {
            b.iter(|| naive.matches(black_box(text)).matched_any())
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
