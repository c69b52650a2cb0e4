//! Stream-session benchmarks (issue 7): the cost of streaming a reply in
//! pieces of 1, 16 and 256 bytes against one evaluation of the whole text
//! (1 KiB and 1 MiB), and the mean hold-back of the exact policy against
//! the Python runtime's fixed 28-character look-ahead. Run with
//! `cargo bench --bench stream`; results go to BENCHMARKS.md.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::fill;
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use helixor::{check_declarations, parse_document, Evaluator, Normalize, StreamOptions};

/// The demo's example pack plus its custom internal-ids rules.
const PLAYBOOK: &str = r#"
pack_id: bench.stream.v1
version: 1.0.0
rules:
  - {id: project_code, type: regex, pattern: '\bPROJ-[A-Z]+-\d+[A-Z]?\b', action: block}
  - {id: ticket_id, type: regex, pattern: '\bTCK-\d{6}\b', action: redact}
  - {id: gift_card, type: luhn_checksum, pattern: '\b\d{4}-\d{4}-\d{4}\b', action: redact}
"#;

/// A realistic streamed reply of an assistant: prose, a list, a few contact
/// details and ticket ids, numbers that are not PII.
const REPLY: &str =
    "Thanks for reaching out! I looked into ticket TCK-004211 and here is what I found.\n\n\
1. The invoice from March (total $1,284.50) was sent to billing@example.com on the 14th.\n\
2. Our records show the account was opened in 2019 and upgraded twice since then.\n\
3. If you need a copy, call our support line at (212) 555-0199 or reply to this message.\n\n\
The outage on the 3rd affected servers in two regions; 97.5% of requests were served normally. \
You can follow the status page for updates, and our team lead, Jane Doe (jane.doe@example.com), \
will follow up by Friday. Let me know if anything else is unclear. ";

/// The same reply in several scripts (SPEC §15 round 2 looks at it word by
/// word): Cyrillic and Greek words full of look-alikes, em dashes, an e-mail
/// with a Cyrillic letter in it.
const REPLY_MIXED: &str =
    "Спасибо за обращение! Я проверил заявку TCK-004211 — вот что я нашёл.\n\n\
1. Счёт за март (итого $1,284.50) отправлен на billing@example.com 14-го.\n\
2. Η εγγραφή δείχνει ότι ο λογαριασμός άνοιξε το 2019 — και αναβαθμίστηκε δύο φορές.\n\
3. Если нужна копия, позвоните по номеру (212) 555-0199 или ответьте на это письмо.\n\n\
Наш руководитель, Jane Doe (jan\u{435}.doe@example.com), ответит до пятницы. ";

/// Cuts `text` into pieces of about `size` bytes, at code-point boundaries.
fn pieces(text: &str, size: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < text.len() {
        let mut end = (at + size).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(&text[at..end]);
        at = end;
    }
    out
}

fn evaluator() -> Evaluator {
    let doc = parse_document(PLAYBOOK.as_bytes(), "bench").unwrap().doc;
    let rules = check_declarations(&doc, "bench").unwrap();
    Evaluator::new("bench.stream.v1", "1.0.0", &rules).unwrap()
}

fn stream(e: &Evaluator, parts: &[&str], opts: StreamOptions) -> usize {
    let mut s = e.stream(opts);
    let mut n = 0;
    for p in parts {
        n += s.push(p).text.len();
    }
    n + s.finish().text.len()
}

/// Mean code points held back after each push (what the reader waits for).
fn mean_holdback(e: &Evaluator, parts: &[&str], opts: StreamOptions) -> f64 {
    let mut s = e.stream(opts);
    let mut total = 0usize;
    for p in parts {
        s.push(p);
        total += s.held_chars();
    }
    s.finish();
    total as f64 / parts.len() as f64
}

/// `HELIXOR_BENCH_ONCE=eval|N|none`: one evaluation, or one session in
/// N-byte pieces, of the 1 MiB reply, then exit: for instruction counts
/// under `valgrind --tool=callgrind` (subtract the `none` run's count).
/// `HELIXOR_BENCH_NORMALIZE=evasion` runs both through the SPEC §15 view;
/// `HELIXOR_BENCH_REPLY=mixed` takes the reply in several scripts.
fn once() -> bool {
    let Ok(mode) = std::env::var("HELIXOR_BENCH_ONCE") else {
        return false;
    };
    let e = evaluator();
    let reply = match std::env::var("HELIXOR_BENCH_REPLY").as_deref() {
        Ok("mixed") => REPLY_MIXED,
        _ => REPLY,
    };
    let mib = fill(reply, 1024 * 1024);
    let normalize: Normalize = std::env::var("HELIXOR_BENCH_NORMALIZE")
        .map_or(Ok(Normalize::None), |n| n.parse())
        .unwrap();
    let opts = StreamOptions {
        block_on_fatal: false,
        normalize,
        ..StreamOptions::default()
    };
    // `HELIXOR_BENCH_REPEAT=N` repeats the run, for `perf record`.
    let repeat = std::env::var("HELIXOR_BENCH_REPEAT")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    match mode.as_str() {
        "eval" => {
            for _ in 0..repeat {
                black_box(e.evaluate_with(&mib, normalize));
            }
        }
        "none" => {}
        size => {
            let parts = pieces(&mib, size.parse().unwrap());
            for _ in 0..repeat {
                black_box(stream(&e, &parts, opts));
            }
        }
    }
    true
}

fn bench(c: &mut Criterion) {
    if once() {
        return;
    }
    let e = evaluator();
    let opts = StreamOptions {
        block_on_fatal: false,
        ..StreamOptions::default()
    };
    // Sanity: streaming gives the whole-text redaction.
    let kib = fill(REPLY, 1024);
    let mib = fill(REPLY, 1024 * 1024);
    for text in [&kib, &mib] {
        let mut s = e.stream(opts);
        let mut out = String::new();
        for p in pieces(text, 16) {
            out.push_str(&s.push(p).text);
        }
        out.push_str(&s.finish().text);
        assert_eq!(out, e.redacted_text(text));
    }

    // Hold-back, printed once: exact against the fixed 28-character policy,
    // on the reply streamed in LLM-token-sized pieces (4 bytes).
    let parts = pieces(&kib, 4);
    let exact = mean_holdback(&e, &parts, opts);
    let fixed = mean_holdback(
        &e,
        &parts,
        StreamOptions {
            lookahead_chars: 28,
            ..opts
        },
    );
    println!(
        "hold-back on the 1 KiB reply in 4-byte pieces: exact {exact:.1} code points, fixed 28-char policy {fixed:.1} ({:.1}x)",
        fixed / exact
    );

    for (name, text) in [("1KiB", &kib), ("1MiB", &mib)] {
        let mut g = c.benchmark_group(format!("stream_{name}"));
        g.throughput(Throughput::Bytes(text.len() as u64));
        if text.len() > 4096 {
            g.sample_size(10);
        }
        g.bench_function("evaluate_whole", |b| b.iter(|| e.evaluate(black_box(text))));
        for size in [1usize, 16, 256] {
            let parts = pieces(text, size);
            g.bench_with_input(
                BenchmarkId::new("session_pieces", size),
                &parts,
                |b, parts| b.iter(|| stream(&e, black_box(parts), opts)),
            );
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
