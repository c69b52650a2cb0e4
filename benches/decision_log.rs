//! Decision log benchmarks ([§19](docs/guides/auditing.md#s19)): what the writer pays per line
//! (serialising a record, its leaf hash and the frontier update), what a
//! checkpoint costs once the tree holds 1M entries (the frontier's root and
//! an Ed25519 signed note), and what a verifier pays to recompute the root
//! of 1M leaves. Run with `cargo bench --bench decision_log`; results go to
//! BENCHMARKS.md.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use ed25519_dalek::SigningKey;
use helixor::decision_log::merkle::{leaf_hash, root, Frontier, Hash};
use helixor::decision_log::note::{Checkpoint, NoteSigner};
use helixor::decision_log::record::Record;

const MILLION: usize = 1 << 20;

fn record() -> Record {
    Record {
        seq: 123_456,
        time: "2026-12-03T12:53:27.425207Z".into(),
        request_id: Some("f3fdf2af-6ae9-42f0-b51b-a89f8b7b8b47".into()),
        route: "/evaluate".into(),
        pack_id: "compliance.regulatory_pii_guard.v1".into(),
        pack_version: "1.0.0".into(),
        pack_sha256: "40566a015aec06a9ad6ebada76286c3e4531aa411e735d99293f22b5baf2cad8".into(),
        generation: 1,
        action: "block_glba_ssn_leakage".into(),
        severity: Some("FATAL".into()),
        rule_ids: vec!["RULE-GLBA-SSN-BLOCK".into()],
        match_counts: vec![1],
        receipt_hash: "hx_proof_ecd856aa4c7a2ca3bb2eba8c".into(),
        latency_us: 12.5,
        payload_hmac: Some(
            "1e4f7b562df5233dca2cc721729d4229ad2a6f0ea42f3a4d50531c854dd7151d".into(),
        ),
        monitored: false,
    }
}

fn bench(c: &mut Criterion) {
    let r = record();
    let mut tree = Frontier::new();
    c.bench_function("log/line: serialise + leaf hash + frontier push", |b| {
        b.iter(|| {
            let line = serde_json::to_vec(black_box(&r)).unwrap();
            tree.push(leaf_hash(&line));
        })
    });

    let leaves: Vec<Hash> = (0..MILLION as u64)
        .map(|i| leaf_hash(&i.to_le_bytes()))
        .collect();
    let mut big = Frontier::new();
    for l in &leaves {
        big.push(*l);
    }
    let signer = NoteSigner::new("bench-log", SigningKey::from_bytes(&[7; 32])).unwrap();
    c.bench_function("log/checkpoint at 1M entries: root + signed note", |b| {
        b.iter(|| {
            let cp = Checkpoint {
                origin: "bench-log".into(),
                size: big.size(),
                root: big.root(),
            };
            signer.sign(&cp.text()).unwrap()
        })
    });
    let mut g = c.benchmark_group("log/verify");
    g.sample_size(10);
    g.bench_function("root of 1M leaves", |b| b.iter(|| root(black_box(&leaves))));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
