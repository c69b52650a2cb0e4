//! What each codon of a version-2 pack costs a decision: the pack's
//! decision time on a text, against the same pack with one codon's
//! pattern replaced by one that never matches (`\bZQZQZQ\b`, no group),
//! codon by codon. The difference is what the codon's pass states, ends,
//! searches and checks cost on that text. Without arguments, the forty
//! codons of `tests/fixtures/forty_codons.yaml` on the bench's 1 KiB of
//! dense identifiers (issue 22; numbers in BENCHMARKS.md, "Where a dense
//! decision's time goes, codon by codon").
//!
//! Run: `cargo run --release --locked --example codon_cost [-- PLAYBOOK.yaml
//! TEXT_FILE]`. Times are the fastest of three runs of 20,000 decisions,
//! the unchanged pack timed again every five codons; each codon's cost is
//! taken against the fastest of those. On a shared machine only costs well
//! above their spread mean anything.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Instant;

/// The bench's dense line (`benches/codons.rs`), repeated to 1 KiB.
const FORTY_PII: &str = "Employee IAX-79927398713 ref; routing 021000021; NPI 1234567893; \
card 4111 1111 1111 1111; IBAN DE89 3704 0044 0532 0130 00; NIF 12345678Z; \
password=S3cr3t!Passw0rd; key AKIAIOSFODNN7EXAMPLE; NHS 943 476 5919; Aadhaar 2341 2341 2346; \
passport 123456789; near miss DE88 3704 0044 0532 0130 00. ";

const DECISIONS: usize = 20_000;

/// µs a decision of the pack `yaml` on `text`: the fastest of three runs.
fn time(yaml: &str, text: &str) -> f64 {
    let e = helixor::testing::compiled_evaluator(yaml.as_bytes(), "codon_cost.yaml").unwrap();
    (0..3)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..DECISIONS {
                std::hint::black_box(e.evaluate(std::hint::black_box(text)));
            }
            t.elapsed().as_secs_f64() * 1e6 / DECISIONS as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let yaml = match args.first() {
        Some(p) => std::fs::read_to_string(p).unwrap(),
        None => std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/forty_codons.yaml"
        ))
        .unwrap(),
    };
    let text = match args.get(1) {
        Some(p) => std::fs::read_to_string(p).unwrap(),
        None => FORTY_PII.repeat(4)[..1024].to_string(),
    };
    // Each codon with a pattern of its own, its pattern (and group)
    // replaced in the parsed playbook: every other field kept, so the
    // hard rules still read every field.
    let doc: serde_yaml::Value = serde_yaml::from_str(&yaml).unwrap();
    let codons = doc["codons"].as_sequence().cloned().unwrap_or_default();
    let variants: Vec<(String, String)> = codons
        .iter()
        .enumerate()
        .filter(|(_, c)| c["params"]["pattern"].is_string())
        .map(|(k, c)| {
            let mut changed = doc.clone();
            let params = &mut changed["codons"][k]["params"];
            params["pattern"] = r"\bZQZQZQ\b".into();
            if let Some(p) = params.as_mapping_mut() {
                p.remove("group");
            }
            let name = c["code"].as_str().unwrap_or("?").to_string();
            (name, serde_yaml::to_string(&changed).unwrap())
        })
        .collect();
    let mut unchanged = Vec::new();
    let mut rows = Vec::new();
    for (i, (name, changed)) in variants.iter().enumerate() {
        if i % 5 == 0 {
            unchanged.push(time(&yaml, &text));
        }
        rows.push((name, time(changed, &text)));
    }
    unchanged.push(time(&yaml, &text));
    let (lo, hi) = unchanged
        .iter()
        .fold((f64::INFINITY, 0f64), |(l, h), &x| (l.min(x), h.max(x)));
    // Against the fastest figure of the unchanged pack, as each row is
    // the fastest of its runs.
    println!("| codon | µs a decision without it | µs it costs |");
    println!("|---|---|---|");
    for (name, without) in rows {
        println!("| `{name}` | {without:.2} | {:.2} |", lo - without);
    }
    println!(
        "\nthe unchanged pack, timed {} times: {lo:.2}–{hi:.2} µs a decision",
        unchanged.len()
    );
}
