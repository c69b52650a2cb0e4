//! Stream-session benchmarks (issue 7): the cost of streaming a reply in
//! pieces of 1, 16 and 256 bytes against one evaluation of the whole text
//! (1 KiB and 1 MiB), and the mean hold-back of the exact policy against
//! the Python runtime's fixed 28-character look-ahead. Run with
//! `cargo bench --bench stream`; results go to BENCHMARKS.md.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::fill;
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use helixor::{Evaluator, Normalize, Releases, StreamOptions};

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

/// The same reply in several scripts ([§15](docs/evasion.md#s15) round 2 looks at it word by
/// word): Cyrillic and Greek words full of look-alikes, em dashes, an e-mail
/// with a Cyrillic letter in it.
const REPLY_MIXED: &str =
    "Спасибо за обращение! Я проверил заявку TCK-004211 — вот что я нашёл.\n\n\
1. Счёт за март (итого $1,284.50) отправлен на billing@example.com 14-го.\n\
2. Η εγγραφή δείχνει ότι ο λογαριασμός άνοιξε το 2019 — και αναβαθμίστηκε δύο φορές.\n\
3. Если нужна копия, позвоните по номеру (212) 555-0199 или ответьте на это письмо.\n\n\
Наш руководитель, Jane Doe (jan\u{435}.doe@example.com), ответит до пятницы. ";

/// A reply dense with PII: one value (e-mail, phone, IPv4, ticket id, SSN,
/// card, health record id, gift card) every ~250 bytes of prose (issue 27:
/// the 3x of [§11.1](docs/streaming.md#s11-1) must hold on such texts too, not only on `REPLY`).
const DENSE: &str = "Following up on your request from this morning, I checked the account history and the billing notes, and the primary contact on file is maria.lopez@example.org, the address our system uses for renewal notices and invoices from now on. \
When the migration finished, the escalation desk asked that any urgent question about the cut-over goes to the on-call line at (415) 555-0142 instead of the shared mailbox, which is read only twice a day by the team. \
The failing health check in last night's report came from the host at 10.42.7.19, which had been taken out of the pool for maintenance but was still listed in the load balancer's configuration file. \
I have merged the duplicate reports into ticket TCK-104233 so that the whole history stays in one place, and linked the earlier conversation with the vendor about the replacement hardware and its delivery. \
The form the applicant sent back still shows the number 123-45-6789 in the free-text field, although the instructions ask people not to write it there; the intake team has been told to correct the template. \
For the refund, the payment was made with the card ending in the number 4111 1111 1111 1111 according to the processor's log, and the reversal should appear within five to seven business days. \
The clinic's letter refers to the patient by MRN 00482913 and asks for the imaging results from the spring visit, which we cannot release without the signed authorisation form from the patient. \
The promotional voucher 4532-0151-1283 was applied twice to the same order because of a retry in the checkout service; finance will reverse the second use and the customer keeps the first discount. ";

/// `DENSE` with every value replaced by words: prose only, the case in
/// which a piece moves only deferred words (`quiet.rs` of the session).
const PROSE: &str = "Following up on your request from this morning, I checked the account history and the billing notes, and the primary contact on file is the billing desk, the address our system uses for renewal notices and invoices from now on. \
When the migration finished, the escalation desk asked that any urgent question about the cut-over goes to the on-call line at the usual number instead of the shared mailbox, which is read only twice a day by the team. \
The failing health check in last night's report came from the host at the old gateway, which had been taken out of the pool for maintenance but was still listed in the load balancer's configuration file. \
I have merged the duplicate reports into ticket the open ticket so that the whole history stays in one place, and linked the earlier conversation with the vendor about the replacement hardware and its delivery. \
The form the applicant sent back still shows the number nine digits in the free-text field, although the instructions ask people not to write it there; the intake team has been told to correct the template. \
For the refund, the payment was made with the card ending in the number on the invoice according to the processor's log, and the reversal should appear within five to seven business days. \
The clinic's letter refers to the patient by her record and asks for the imaging results from the spring visit, which we cannot release without the signed authorisation form from the patient. \
The promotional voucher for spring was applied twice to the same order because of a retry in the checkout service; finance will reverse the second use and the customer keeps the first discount. ";

/// Row 6 of issue 27: runs of `1.1.1.…` (`run` characters, held whole: an
/// e-mail's local part could go on) each ended by a space, to `bytes`.
fn held_runs(run: usize, bytes: usize) -> String {
    let mut unit = "1.".repeat(run / 2);
    unit.push(' ');
    fill(&unit, bytes)
}

/// The text of `HELIXOR_BENCH_TEXT` (`reply`, `mixed`, `dense`, `prose` or
/// `held:<run>`) at
/// `HELIXOR_BENCH_BYTES` (default 1 MiB).
fn bench_text() -> String {
    let bytes = std::env::var("HELIXOR_BENCH_BYTES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1024 * 1024);
    let reply_mixed = std::env::var("HELIXOR_BENCH_REPLY").as_deref() == Ok("mixed");
    match std::env::var("HELIXOR_BENCH_TEXT").as_deref() {
        Ok("dense") => fill(DENSE, bytes),
        Ok("prose") => fill(PROSE, bytes),
        Ok("mixed") => fill(REPLY_MIXED, bytes),
        _ if reply_mixed => fill(REPLY_MIXED, bytes),
        Ok(held) if held.starts_with("held:") => held_runs(held[5..].parse().unwrap(), bytes),
        _ => fill(REPLY, bytes),
    }
}

/// Cuts `text` into pieces of `size` code points.
fn code_point_pieces(text: &str, size: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let cut = rest.char_indices().nth(size).map_or(rest.len(), |(i, _)| i);
        out.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    out
}

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

/// The bench's pack, or with `HELIXOR_BENCH_PACK=example` the example pack
/// alone (what `POST /v1/evaluate/stream` runs in the demo deployment).
fn evaluator() -> Evaluator {
    let yaml = match std::env::var("HELIXOR_BENCH_PACK").as_deref() {
        Ok("example") => helixor::EXAMPLE_PLAYBOOK_YAML,
        _ => PLAYBOOK,
    };
    helixor::testing::rules_evaluator("bench.stream.v1", "1.0.0", yaml).unwrap()
}

fn stream(e: &Evaluator, parts: &[&str], opts: StreamOptions) -> usize {
    let mut s = e.stream(opts);
    let mut n = 0;
    for p in parts {
        n += s.push(p).text.len();
    }
    n + s.finish().text.len()
}

/// [`stream`] with the pieces pushed 256 at a time (`Session::push_many`),
/// as the server pushes them.
fn stream_many(e: &Evaluator, parts: &[&str], opts: StreamOptions) -> usize {
    let mut s = e.stream(opts);
    let mut out = Releases::default();
    let mut n = 0;
    for batch in parts.chunks(256) {
        out.clear();
        s.push_many(batch.iter().copied(), &mut out);
        n += out.iter().map(|(text, _)| text.len()).sum::<usize>();
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

/// `HELIXOR_BENCH_ONCE=eval|N|cpN|none`: one evaluation, or one session in
/// N-byte (or N-code-point) pieces, of the 1 MiB reply, then exit: for
/// instruction counts under `valgrind --tool=callgrind` (subtract the
/// `none` run's count) and CPU times (`scripts/stream-ratio.sh`).
/// `HELIXOR_BENCH_NORMALIZE=evasion` runs both through the [§15](docs/evasion.md#s15) view;
/// `HELIXOR_BENCH_TEXT` and `HELIXOR_BENCH_BYTES` choose the text
/// ([`bench_text`]); `HELIXOR_BENCH_REPLY=mixed` is `HELIXOR_BENCH_TEXT=mixed`.
fn once() -> bool {
    let Ok(mode) = std::env::var("HELIXOR_BENCH_ONCE") else {
        return false;
    };
    let e = evaluator();
    let mib = bench_text();
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
            // `m…`: pushed 256 at a time with `push_many`, as the server
            // pushes the pieces it cuts from a request's text.
            let (many, size) = match size.strip_prefix('m') {
                Some(s) => (true, s),
                None => (false, size),
            };
            let parts = match size.strip_prefix("cp") {
                Some(n) => code_point_pieces(&mib, n.parse().unwrap()),
                None => pieces(&mib, size.parse().unwrap()),
            };
            for _ in 0..repeat {
                if many {
                    black_box(stream_many(&e, &parts, opts));
                } else {
                    black_box(stream(&e, &parts, opts));
                }
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

/// Row 6 of issue 27: one session over 240,000 characters of held runs of
/// 1k, 10k and 60k characters, one code point a piece. Linear cost: the
/// time per character does not grow with the run.
fn held(c: &mut Criterion) {
    if std::env::var("HELIXOR_BENCH_ONCE").is_ok() {
        return;
    }
    let e = evaluator();
    let opts = StreamOptions {
        block_on_fatal: false,
        ..StreamOptions::default()
    };
    let mut g = c.benchmark_group("stream_held_runs");
    g.sample_size(10);
    for run in [1_000usize, 10_000, 60_000] {
        let text = held_runs(run, 240_000);
        g.throughput(Throughput::Elements(text.len() as u64));
        let parts = code_point_pieces(&text, 1);
        g.bench_with_input(BenchmarkId::new("pieces_of_1", run), &parts, |b, parts| {
            b.iter(|| stream(&e, black_box(parts), opts))
        });
    }
    g.finish();
}

criterion_group!(benches, bench, held);
criterion_main!(benches);
