//! Version-2 benchmarks (issue 22, [§16](docs/codons.md#s16)): the example pack as a
//! version-1 playbook against the same pack written as version 2 (its six
//! codons and four hard rules declared by name) on the same payloads, and
//! a version-2 pack of forty codons with checksums and context
//! (`tests/fixtures/forty_codons.yaml`) on 1 KiB payloads. Run with
//! `cargo bench --bench codons`; results go to BENCHMARKS.md.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::{fill, ENGLISH, MIXED, PII};
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use helixor::{Evaluator, EXAMPLE_PLAYBOOK_YAML};
use std::path::Path;

/// A line with a value (or a near miss) for many of the forty codons.
const FORTY_PII: &str = "Employee IAX-79927398713 ref; routing 021000021; NPI 1234567893; \
card 4111 1111 1111 1111; IBAN DE89 3704 0044 0532 0130 00; NIF 12345678Z; \
password=S3cr3t!Passw0rd; key AKIAIOSFODNN7EXAMPLE; NHS 943 476 5919; Aadhaar 2341 2341 2346; \
passport 123456789; near miss DE88 3704 0044 0532 0130 00. ";

fn compiled(yaml: &[u8], name: &str) -> Evaluator {
    helixor::testing::compiled_evaluator(yaml, name).unwrap()
}

fn fixture(name: &str) -> Evaluator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    compiled(&std::fs::read(&path).unwrap(), name)
}

fn bench(c: &mut Criterion) {
    let v1 = compiled(EXAMPLE_PLAYBOOK_YAML.as_bytes(), "example");
    let v2 = fixture("regulatory_pii_guard_v2.yaml");
    let forty = fixture("forty_codons.yaml");
    let cases = [
        ("clean_ascii_1k", fill(ENGLISH, 1024)),
        ("mixed_script_1k", fill(MIXED, 1024)),
        ("pii_dense_1k", fill(PII, 1024)),
        ("clean_ascii_64k", fill(ENGLISH, 64 * 1024)),
    ];
    // Sanity: the two forms decide alike (tests/v2_differential.rs checks
    // it thoroughly), and the forty codons find their values.
    for (_, text) in &cases {
        let (a, b) = (v1.evaluate(text), v2.evaluate(text));
        assert_eq!((a.action, a.receipt_hash), (b.action, b.receipt_hash));
    }
    let forty_pii = fill(FORTY_PII, 1024);
    assert_eq!(forty.evaluate(&forty_pii).action, "block_credential");
    assert_eq!(forty.evaluate(&cases[0].1).action, "permit_clean_payload");

    let mut g = c.benchmark_group("example_v1_v2");
    for (name, text) in &cases {
        g.throughput(Throughput::Bytes(text.len() as u64));
        for (form, e) in [("v1", &v1), ("v2", &v2)] {
            g.bench_function(format!("{name}/{form}"), |b| {
                b.iter(|| e.evaluate(black_box(text)))
            });
        }
    }
    g.finish();

    let mut g = c.benchmark_group("forty_codons");
    for (name, text) in [
        ("clean_ascii_1k", &cases[0].1),
        ("mixed_script_1k", &cases[1].1),
        ("example_pii_1k", &cases[2].1),
        ("forty_pii_1k", &forty_pii),
    ] {
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_function(name, |b| b.iter(|| forty.evaluate(black_box(text))));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
