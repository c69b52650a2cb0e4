//! [§11.4](docs/limits.md#s11-4) validation: the pattern cost check's verdict on patterns near
//! its thresholds, and the engine's real time on 1 MiB adversarial texts
//! (the check's own probe texts, scaled up). Accepted patterns must stay
//! under 100 ms; refused ones are timed on smaller texts and extrapolated.
//! Bypasses the check to build evaluators of refused patterns.
//!
//! Run: `cargo run --release --locked --example pattern_cost` (numbers in
//! BENCHMARKS.md, "Pattern cost ([§11.4](docs/limits.md#s11-4))"); `-- --compile-only` prints
//! only what the check adds to compiling the shipped playbooks;
//! `-- --non-ascii-only` stops after the table of patterns with `\b` on
//! non-ASCII adversarial texts; `-- --per-match` prints only the cost per
//! match (`-- --per-match --once`: one evaluation, for callgrind);
//! `-- --stream-once PATTERN UNIT` streams one non-ASCII row once.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use helixor::pattern::{self, cost};
use helixor::{CustomRule, Evaluator, RuleAction, RuleType};
use regex_automata::util::iter::Searcher;
use regex_automata::{Input, MatchError};

const MIB: usize = 1 << 20;

/// Patterns near the thresholds, accepted ones first.
const PATTERNS: &[&str] = &[
    r"[a-z]{1,8}X|[a-z]",
    r"(a{1,20}){1,20}b",
    r"X{999}Y",
    r"[a-z]{999}Y",
    r"a[b-z]*X|a",
    r"[a-z]{1,8}x[a-z]{1,8}",
    r"\w+ing\b",
    r"(?i)\bsecret\w*",
    r"x",
    r"\b[a-zA-Z0-9_.+-]+@[a-zA-Z0-9-]+\.[a-zA-Z0-9\-.]+\b",
    r"(?:\+?1[-.\s]?)?(?:\([2-9]\d{2}\)|[2-9]\d{2})[-.\s]?\d{3}[-.\s]?\d{4}\b",
    r"(a{1,100}){1,100}b",
    r"(a{1,50}){1,50}b",
    r"[a-z]+X|[a-z]{100}",
    r"[a-z]+X|[a-z]",
    r"(\w+\s?)+X|\w{10}",
    r"[a-z]{1,10}X|[a-z]",
    r"a[a-z]*X|a",
    r"[a-z]{1,40}x[a-z]{1,40}",
    r"[ab]*a[ab]{12}",
    r"\b\w\b",
    r"\w",
    r"[a-z]",
    r"\d{1,2}",
    r"\b",
    r"ab[c-z]*X|ab",
];

/// Seconds since the first call (wall clock: the best of several runs is
/// reported where a run is short, the machine being shared).
fn now() -> f64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_secs_f64()
}

fn evaluator(p: &pattern::CompiledPattern) -> Evaluator {
    let rule = CustomRule {
        id: "probe".to_string(),
        rule_type: RuleType::Regex,
        action: RuleAction::Redact,
        description: None,
        pattern: p.clone(),
    };
    Evaluator::new("bench.cost.v1", "1", &[rule]).unwrap()
}

/// Seconds of the slowest text's evaluation, and its index.
fn worst(e: &Evaluator, texts: &[String]) -> (f64, usize) {
    let mut worst = (0.0, 0);
    for (i, t) in texts.iter().enumerate() {
        let started = now();
        std::hint::black_box(e.evaluate(t).action);
        let s = now() - started;
        if s > worst.0 {
            worst = (s, i);
        }
    }
    worst
}

/// The engine's search alone (`find_iter` over the exact regex, as
/// `find_iter_with` runs it on ASCII text), one fresh cache for all texts:
/// seconds of each text and its match count.
fn searches(p: &pattern::CompiledPattern, texts: &[String]) -> Vec<(f64, usize)> {
    let mut cache = p.exact.create_cache();
    texts
        .iter()
        .map(|t| {
            let started = now();
            let mut searcher = Searcher::new(Input::new(t));
            let mut n = 0usize;
            while searcher
                .advance(|i| Ok::<_, MatchError>(p.exact.search_with(&mut cache, i)))
                .is_some()
            {
                n += 1;
            }
            (now() - started, n)
        })
        .collect()
}

fn slowest(times: &[(f64, usize)]) -> usize {
    (0..times.len())
        .max_by(|&a, &b| times[a].0.total_cmp(&times[b].0))
        .unwrap_or(0)
}

fn describe(t: &str) -> String {
    let head: String = t.chars().take(12).collect();
    format!("{:?}… ({} KiB)", head, t.len() >> 10)
}

/// What the check adds to compiling the shipped playbooks: CPU time of the
/// whole in-memory compile (every [§4.2](docs/formats.md#s4-2) check, the cost check included)
/// and of the cost check of its rules alone, best of twenty.
fn compile_costs() {
    use helixor::{compile_in_memory, Entitlement};
    println!("| playbook | rules | compile (with the check) | the cost check alone |");
    println!("|---|---|---|---|");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for name in [
        "config/demo/playbooks/regulatory_pii_guard.yaml",
        "config/demo/playbooks/internal_ids.yaml",
        "tests/fixtures/mixed_rules.yaml",
        "tests/fixtures/fuzz_rules.yaml",
    ] {
        let bytes = std::fs::read(root.join(name)).unwrap();
        let mut best = (f64::INFINITY, f64::INFINITY, 0);
        for _ in 0..20 {
            let started = now();
            let compiled = compile_in_memory(&bytes, name, Entitlement::PolicyTest).unwrap();
            let total = now() - started;
            let started = now();
            for r in &compiled.rules {
                pattern::check_cost(&r.pattern).unwrap();
            }
            let check = now() - started;
            best = (best.0.min(total), best.1.min(check), compiled.rules.len());
        }
        println!(
            "| `{name}` | {} | {:.2} ms | {:.2} ms |",
            best.2,
            best.0 * 1e3,
            best.1 * 1e3
        );
    }
    println!();
}

/// Patterns with `\b` on 1 MiB of non-ASCII adversarial text (the guided
/// search's path: the exact regex's DFA cannot run Unicode `\b` there).
const NON_ASCII: &[(&str, &str)] = &[
    (r"\w+ing\b", "aingé"),
    (r"\w+ing\b", "éaing"),
    (r"\w+ing\b", "aingé "),
    (r"(?i)\bsecret\w*", "ésEcret"),
    (r"(?i)\bsecret\w*", "é sEcret "),
    (
        r"\b[a-zA-Z0-9_.+-]+@[a-zA-Z0-9-]+\.[a-zA-Z0-9\-.]+\b",
        "éaa@a.a",
    ),
    (
        r"(?:\+?1[-.\s]?)?(?:\([2-9]\d{2}\)|[2-9]\d{2})[-.\s]?\d{3}[-.\s]?\d{4}\b",
        "é(299)0000000",
    ),
    (r"\b\d{3}-\d{2}-\d{4}\b", "é123-45-6789"),
    (r"\w+\b", "éa"),
    (r"[^ ]+ing\b", "aingé"),
    (r"\w+\bing\b", "aingé"),
    (r"\w+ing\b|zz", "aingé"),
    (r"x", "éx"),
];

/// Rules that match every character of a 1 MiB payload: the engine's cost
/// per match (spans, triggers, redaction), not its search.
const PER_MATCH: &[(&str, &str)] = &[
    (r"x", "x"),
    (r"[a-z]{1,8}X|[a-z]", "a"),
    (r"x", "éx"),
    (r"a[b-z]*X|a", "a"),
    (r"[a-z]", "a"),
    (r"\w", "a"),
    (r"\d{1,2}", "9"),
    (r"\b\w\b", "a "),
    (r"\b\w\b", "é "),
    (r"\b", "a "),
    (r"\b", "é "),
    (r"kk(?:lmno)?\b|kkl", "k"),
    (r"kk(?:lmno)?\b|kkl", "ékkkkkkkkkkkkkk"),
    (r"kk(?:lmno)?\b|kkl", "ékk "),
    (r"kk(?:lmno)?\b|kkl", "ékk kk kk kk kk kk kk kk "),
    (r"\b\d{3}\b", "é123 123 123 123 123 123 "),
    (r"\b\d{4}\b", "é1234 1234 1234 1234 1234 "),
    (r"\w+ing\b", "é0ing 0ing 0ing 0ing 0ing "),
];

/// Best of five evaluations of each per-match text; with `--once`, a single
/// evaluation of the first (for `valgrind --tool=callgrind`).
fn per_match(once: bool) {
    println!("| pattern | 1 MiB of | matches | evaluation | search alone |");
    println!("|---|---|---:|---:|---:|");
    for (src, unit) in PER_MATCH {
        let p = pattern::compile(src, &[]).unwrap();
        let text = unit.repeat(MIB / unit.len());
        let e = evaluator(&p);
        if once {
            std::hint::black_box(e.evaluate(&text).clean_text.len());
            return;
        }
        let mut best = f64::INFINITY;
        let mut found = 0;
        for _ in 0..5 {
            let started = now();
            let d = e.evaluate(&text);
            best = best.min(now() - started);
            found = d.triggers.first().map_or(0, |t| t.match_count);
        }
        let search = (0..5)
            .map(|_| searches(&p, std::slice::from_ref(&text))[0].0)
            .fold(f64::INFINITY, f64::min);
        println!(
            "| `{src}` | `{unit}…` | {found} | {:.1} ms | {:.1} ms |",
            best * 1e3,
            search * 1e3
        );
    }
    println!();
}

/// Seconds of one stream session over `text` in pieces of 16 bytes (cut
/// back to a character boundary), with no hold-back limit, so that a giant
/// word is held and searched to the end; and what it released.
fn stream_16(e: &Evaluator, text: &str) -> (f64, String) {
    let opts = helixor::StreamOptions {
        max_holdback_chars: usize::MAX,
        block_on_fatal: false,
        ..helixor::StreamOptions::default()
    };
    let started = now();
    let mut session = e.stream(opts);
    let mut out = String::new();
    let mut at = 0;
    while at < text.len() {
        let mut end = (at + 16).min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        out.push_str(&session.push(&text[at..end]).text);
        at = end;
    }
    out.push_str(&session.finish().text);
    (now() - started, out)
}

/// Best of three evaluations of each non-ASCII text, and of `find_iter`
/// over the exact regex (the reference result, which runs the NFA there),
/// checking that both find the same spans.
fn non_ascii() {
    println!(
        "| pattern | 1 MiB of | evaluation | matches | exact `find_iter` alone | stream, 16 B pieces |"
    );
    println!("|---|---|---:|---:|---:|---:|");
    for (src, unit) in NON_ASCII {
        let p = pattern::compile(src, &[]).unwrap();
        let text = unit.repeat(MIB / unit.len());
        let e = evaluator(&p);
        let mut best = f64::INFINITY;
        let mut found = 0;
        for _ in 0..3 {
            let started = now();
            let d = e.evaluate(&text);
            best = best.min(now() - started);
            found = d
                .triggers
                .iter()
                .find(|t| t.rule_id == "probe")
                .map_or(0, |t| t.match_count);
        }
        let started = now();
        let want = p.exact.find_iter(&text).filter(|m| !m.is_empty()).count();
        let reference = now() - started;
        assert_eq!(found, want, "{src} on {unit:?}");
        let (streamed, released) = stream_16(&e, &text);
        assert_eq!(
            released,
            e.redacted_text(&text),
            "{src} on {unit:?}, streamed"
        );
        println!(
            "| `{src}` | `{unit}…` | {:.1} ms | {found} | {:.1} ms | {:.1} ms |",
            best * 1e3,
            reference * 1e3,
            streamed * 1e3
        );
    }
    println!();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, src, unit] = args.as_slice() {
        if flag == "--stream-once" {
            // One stream session of one non-ASCII row, for `perf stat`.
            let p = pattern::compile(src, &[]).unwrap();
            let text = unit.repeat(MIB / unit.len());
            let (s, _) = stream_16(&evaluator(&p), &text);
            println!("{:.1} ms", s * 1e3);
            return;
        }
    }
    if std::env::args().any(|a| a == "--per-match") {
        per_match(std::env::args().any(|a| a == "--once"));
        return;
    }
    compile_costs();
    if std::env::args().any(|a| a == "--compile-only") {
        return;
    }
    non_ascii();
    if std::env::args().any(|a| a == "--non-ascii-only") {
        return;
    }
    println!("| pattern | check (release) | probes | scan/byte | est. ns/byte | states | 1 MiB: slowest search | 1 MiB: its evaluation | with `é` first |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for src in PATTERNS {
        let p = pattern::compile(src, &[]).unwrap();
        let started = now();
        let verdict = pattern::check_cost(&p);
        let check_ms = (now() - started) * 1e3;
        match verdict {
            Ok(r) => {
                let texts: Vec<String> = cost::adversarial_texts(&p.exact_src, MIB)
                    .unwrap()
                    .into_iter()
                    .filter(|t| t.is_ascii())
                    .collect();
                let mut times = searches(&p, &texts);
                let i = slowest(&times);
                // The slowest again, best of three.
                for _ in 0..2 {
                    let again = searches(&p, &texts[i..=i])[0];
                    times[i].0 = times[i].0.min(again.0);
                }
                let e = evaluator(&p);
                let best = |t: &String| {
                    (0..3)
                        .map(|_| worst(&e, std::slice::from_ref(t)).0)
                        .fold(f64::INFINITY, f64::min)
                };
                let eval = best(&texts[i]);
                let eval2 = best(&format!("é{}", texts[i]));
                println!(
                    "| `{src}` | accepted, {check_ms:.1} ms | {} | {:.2} | {} | {} KiB | {:.1} ms ({} matches, {}) | {:.1} ms | {:.1} ms |",
                    r.probes,
                    r.scan_factor_centi as f64 / 100.0,
                    r.ns_per_byte,
                    r.state_bytes >> 10,
                    times[i].0 * 1e3,
                    times[i].1,
                    describe(&texts[i]),
                    eval * 1e3,
                    eval2 * 1e3,
                );
            }
            Err(why) => {
                // Small texts and 4x larger ones: the growth, extrapolated
                // to 1 MiB.
                let small = 8 << 10;
                let ascii = |len| -> Vec<String> {
                    cost::adversarial_texts(&p.exact_src, len)
                        .unwrap()
                        .into_iter()
                        .filter(|t| t.is_ascii())
                        .collect()
                };
                // The slowest text at each size (the probe sets differ a
                // little with the length: duplicates are dropped).
                let times = searches(&p, &ascii(small));
                let s1 = times[slowest(&times)].0;
                let big = ascii(4 * small);
                let big_times = searches(&p, &big);
                let i = slowest(&big_times);
                let s2 = big_times[i].0;
                let k = (s2 / s1.max(1e-9)).log(4.0).clamp(1.0, 2.0);
                let est = s2 * (MIB as f64 / (4 * small) as f64).powf(k);
                let reason = why.split(": ").nth(1).unwrap_or(&why);
                let reason: String = reason.chars().take(48).collect();
                println!(
                    "| `{src}` | refused, {check_ms:.1} ms ({reason}…) | | | | | {:.1} ms at 8 KiB, {:.1} ms at 32 KiB ({}): ≈ {:.1} s at 1 MiB (n^{k:.2}) | | |",
                    s1 * 1e3,
                    s2 * 1e3,
                    describe(&big[i]),
                    est
                );
            }
        }
    }
}
