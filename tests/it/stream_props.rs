//! Property tests of stream sessions ([§11.1](docs/streaming.md#s11-1), issue 7) against the
//! engine's own whole-text evaluation: random texts (PII values, near
//! misses, multilingual words, probe-style custom rules with Luhn checks,
//! flags and overlaps, and the evasions of [§15](docs/evasion.md#s15), rounds 1 and 2, with
//! and without `normalize: evasion`: a word of look-alikes that may still
//! mix scripts is cut anywhere too) cut at random code points, one code
//! point a piece included; and random version-2 packs (random codons,
//! checks, context windows before and after values, hard rules of every
//! operator) on texts of their values. `HELIXOR_STREAM_CASES` sets the
//! number of cases (CI runs thousands).

use crate::support::{compiled_evaluator_file, rules_evaluator};
use helixor::{Evaluator, Normalize, Severity, StreamOptions, PERMIT_ACTION};
use proptest::prelude::*;
use std::sync::OnceLock;

// The stream fuzz target's probe rules: flags, Luhn, overlaps.
use helixor::fuzzing::PROBE_RULES;

/// The built-in codons alone, the probe rules beside them, the example
/// pack written as a version-2 playbook and a version-2 pack of codons with
/// checksums, entropy and deny lists (the incremental engine runs both),
/// and a version-2 pack with groups, context and counts (held whole and
/// judged at the end, `engine/stream/whole.rs`).
fn evaluators() -> &'static [Evaluator] {
    static E: OnceLock<Vec<Evaluator>> = OnceLock::new();
    E.get_or_init(|| {
        let mut out: Vec<Evaluator> = ["pack_id: builtin.only.v1\n", PROBE_RULES]
            .iter()
            .map(|yaml| rules_evaluator("p", "1", yaml))
            .collect();
        out.push(compiled_evaluator_file(
            "tests/fixtures/regulatory_pii_guard_v2.yaml",
        ));
        out.push(compiled_evaluator_file("tests/fixtures/native_v2.yaml"));
        out.push(compiled_evaluator_file(
            "config/demo/playbooks/credentials_guard.yaml",
        ));
        out
    })
}

/// How many of [`evaluators`] release promptly (the whole-mode one, last,
/// holds everything to the end by design).
const PROMPT: usize = 4;

fn cases() -> u32 {
    std::env::var("HELIXOR_STREAM_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400)
}

fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("hello".to_string()),
        Just("Überprüfung".to_string()),
        Just("会議".to_string()),
        Just("Ещё".to_string()),
        Just("e\u{301}".to_string()),
        Just("ſecret".to_string()),
        Just("Secretary".to_string()),
        Just("bluebirds".to_string()),
        Just("NIGHTJAR".to_string()),
        Just("kkkkl".to_string()),
        Just("kkkklmno".to_string()),
        Just("kkkklmnox".to_string()),
        Just("> quoted".to_string()),
        // Values of the version-2 demo pack: a group, a checksum, entropy,
        // a deny list and a context word.
        Just("AKIAIOSFODNN7EXAMPLE".to_string()),
        Just("DE89 3704 0044 0532 0130 00".to_string()),
        Just("DE88 3704 0044 0532 0130 00".to_string()),
        Just("password=S3cr3t!Passw0rd".to_string()),
        Just("password=changeme123".to_string()),
        Just("ghp_abcdefghijklmnopqrstuvwxyz0123456789".to_string()),
        Just("aws secret key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ3kLm9Tq2".to_string()),
        Just("key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ3kLm9Tq2".to_string()),
        Just("ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".to_string()),
        Just("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".to_string()),
        // An account number decided by a word after it (`context.after`).
        Just("12345678".to_string()),
        Just("87654321 (acct)".to_string()),
        Just("(acct)".to_string()),
        Just("acct no".to_string()),
        Just("accounts".to_string()),
        Just("x.yyy.z".to_string()),
        Just("@example.com and more".to_string()),
        "[a-z]{1,8}[.+]?[a-z]{0,4}@[a-z]{1,6}\\.(com|org|co\\.uk)\\.?",
        "[a-z]{1,4}@[a-z]{1,4}",
        "\\+?1?\\(?[2-9][0-9]{2}\\)?[-. ][0-9]{3}[-. ][0-9]{4}[0-9]?",
        "[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,4}",
        "[0-9]{3}-[0-9]{2}-[0-9]{4,5}",
        "4111[ -]?1111[ -]?1111[ -]?111[0-9]",
        "[0-9]{4}-[0-9]{4}(-[0-9]{4})?",
        "TCK-[0-9]{5,7}",
        "(MRN|rx|EHR)[:-]? ?[0-9]{5,11}",
        "\\$[0-9]{1,4}(\\.[0-9]{1,2})?",
        "[0-9]{1,6}",
        "\\PC{0,6}",
        // [§15](docs/evasion.md#s15) evasions: other digits, joiners, soft hyphens, marks,
        // full-width letters, compatibility characters.
        Just("１２３-４５-６７８９".to_string()),
        Just("١٢٣-٤٥-٦٧٨٩".to_string()),
        Just("123-45\u{200D}-6789".to_string()),
        Just("123-45-67\u{AD}89\u{301}".to_string()),
        Just("\u{301}".to_string()),
        Just("\u{200B}".to_string()),
        Just("\u{FE0F}\u{200D}".to_string()),
        Just("ＭＲＮ １２３４５６７".to_string()),
        Just("jane＠example.com".to_string()),
        Just("\u{FB01}\u{2460}\u{2469}".to_string()),
        "[0-9\u{0660}-\u{0669}\u{FF10}-\u{FF19}\u{200D}\u{AD}-]{1,12}",
        // Round 2: Unicode dashes, format and control characters, marks
        // after separators, parenthesized and dingbat digits, look-alike
        // letters in words (Cyrillic а е о х, Greek ο α) that mix scripts
        // or do not, cut anywhere.
        Just("123\u{2010}45\u{2013}6789".to_string()),
        Just("123\u{2212}45\u{2014}6789".to_string()),
        Just("⑴⑵⑶-⑷⑸-⑹⑺⑻⑼".to_string()),
        Just("❶❷❸-❹❺-❻❼❽❾".to_string()),
        Just("123-45\u{0}-6789".to_string()),
        Just("123-45-67\u{FFF9}89".to_string()),
        Just("123-\u{301}45-\u{301}6789".to_string()),
        Just("4111 \u{301}1111 1111 1111".to_string()),
        Just("j\u{430}ne.doe@\u{435}\u{445}ample.com".to_string()),
        Just("jan\u{435}.doe@example.com".to_string()),
        Just("jane.d\u{3BF}e@ex\u{430}mple.c\u{43E}m".to_string()),
        Just("δοκιμή".to_string()),
        "[0-9\u{2010}-\u{2015}\u{2212}\\x00\\x01\\x7F\\x{85}\u{FFF9}\u{600}\u{301}\u{20DD}\u{2474}-\u{247C}\u{2776}-\u{277E}\u{2460}-\u{2468} -]{1,12}",
        "[a-z\u{430}\u{435}\u{43E}\u{445}\u{3BF}\u{3B1}0-9_.]{1,10}(@[a-z\u{430}\u{435}\u{445}]{1,6}\\.(com|c\u{43E}m))?",
        "[\u{430}\u{435}\u{445}\u{3BF}]{1,6}[0-9_]{0,2}[a-zж]{0,3}",
    ]
}

/// Tokens the evasion view leaves as they are: NFC words of several
/// scripts, each word of one script (Cyrillic and Greek look-alikes
/// included), and ASCII values.
fn plain_token() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("Überprüfung".to_string()),
        Just("会議".to_string()),
        Just("Ещё".to_string()),
        Just("δοκιμή".to_string()),
        Just("\u{430}\u{445}_1".to_string()),
        Just("한국어".to_string()),
        Just("café".to_string()),
        Just("Secretary".to_string()),
        "[a-z]{1,8}@[a-z]{1,6}\\.com",
        "[0-9]{3}-[0-9]{2}-[0-9]{4,5}",
        "4111[ -]?1111[ -]?1111[ -]?111[0-9]",
        "TCK-[0-9]{5,7}",
        "(MRN|rx|EHR)[:-]? ?[0-9]{5,11}",
        "[a-zA-Zéß]{1,9}",
        "[会議は]{1,5}",
        "[Ещёахо]{1,9}",
    ]
}

/// Separators that keep the words of plain tokens apart and that the view
/// keeps as they are (no dash but `-`).
fn plain_separator() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just(" "),
        Just(", "),
        Just("\n"),
        Just("。"),
        Just("\t"),
        Just("."),
        Just("-"),
    ]
}

fn separator() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just(" "),
        Just(", "),
        Just("\n"),
        Just(" — "),
        Just("。"),
        Just("\t"),
        Just(""),
        Just("."),
        Just("-"),
        Just("\u{2014}"),
        Just("\u{0}"),
        Just("\u{301}"),
    ]
}

fn text() -> impl Strategy<Value = String> {
    proptest::collection::vec((token(), separator()), 0..10)
        .prop_map(|parts| parts.iter().map(|(t, s)| format!("{t}{s}")).collect())
}

/// Piece sizes in code points; one code point a piece is common.
fn cuts() -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(
        prop_oneof![3 => Just(1usize), 2 => 1usize..6, 1 => 6usize..40],
        1..64,
    )
}

/// Splits `text` into pieces of the given code-point sizes (cycled).
fn split(text: &str, sizes: &[usize]) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut at, mut k) = (0, 0);
    while at < chars.len() {
        let n = sizes[k % sizes.len()].min(chars.len() - at);
        out.push(chars[at..at + n].iter().collect());
        at += n;
        k += 1;
    }
    out
}

fn has_fatal(e: &Evaluator, text: &str, norm: Normalize) -> bool {
    e.evaluate_with(text, norm)
        .triggers
        .iter()
        .any(|t| t.severity == Severity::Fatal)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Invariants 1–3: every release is final for every continuation tried
    /// (the rest of this text, another continuation, and the end of input),
    /// a session blocks only when every one of them has a FATAL trigger,
    /// and an unblocked session releases exactly W(T) whatever the cuts.
    #[test]
    fn releases_are_final_complete_and_block_only_on_final_fatal(
        prefix in text(), rest in text(), other in text(), sizes in cuts(),
        which in 0usize..5, block in any::<bool>(), lookahead in prop_oneof![4 => Just(0usize), 1 => 1usize..40],
        evasion in any::<bool>(),
    ) {
        let e = &evaluators()[which];
        let whole = format!("{prefix}{rest}");
        let norm = if evasion { Normalize::Evasion } else { Normalize::None };
        let opts = StreamOptions { block_on_fatal: block, lookahead_chars: lookahead, normalize: norm, ..StreamOptions::default() };
        let mut s = e.stream(opts);
        let mut released = String::new();
        let mut pushed = String::new();
        for piece in split(&whole, &sizes) {
            released.push_str(&s.push(&piece).text);
            pushed.push_str(&piece);
            if pushed.len() > prefix.len() {
                continue;
            }
            // Continuations of what was pushed: nothing, the rest of this
            // text, and another text after the shared prefix.
            let conts = [pushed.clone(), whole.clone(), format!("{prefix}{other}")];
            if let Some(b) = s.blocked() {
                for c in &conts {
                    prop_assert!(has_fatal(e, c, norm), "blocked ({}) but {:?} has no FATAL trigger", b.action, c);
                }
            } else {
                for c in &conts {
                    let w = e.redacted_text_with(c, norm);
                    prop_assert!(w.starts_with(&released), "release {:?} is not final: W({:?}) = {:?}", released, c, w);
                }
            }
        }
        released.push_str(&s.finish().text);
        let d = e.evaluate_with(&whole, norm);
        let fatal = d.triggers.iter().any(|t| t.severity == Severity::Fatal);
        match s.blocked() {
            Some(b) => {
                prop_assert!(block && fatal, "blocked with {} on {:?}", b.action, whole);
                prop_assert!(d.triggers.iter().any(|t| t.action == b.action && t.severity == Severity::Fatal));
                prop_assert!(e.redacted_text_with(&whole, norm).starts_with(&released));
            }
            None => {
                prop_assert!(!(block && fatal), "FATAL {:?} never blocked", d.action);
                prop_assert_eq!(&released, &e.redacted_text_with(&whole, norm));
                if !fatal {
                    prop_assert_eq!(&released, &d.clean_text);
                }
            }
        }
    }

    /// [§11.2](docs/streaming.md#s11-2): the session yields the decision of the whole text itself,
    /// from the matches it committed: every field of `evaluate` (action,
    /// severity, reason, receipt hash, each trigger with its spans in code
    /// points, normalized), blocked or not, whatever the cuts. Its
    /// `clean_text` is the blocked placeholder when it blocks and otherwise
    /// empty (what leaves is what it released, checked above); its
    /// `latency_us` is its own engine time.
    #[test]
    fn the_session_decides_as_evaluate_on_the_whole_text(
        whole in text(), sizes in cuts(), which in 0usize..5, block in any::<bool>(),
        lookahead in prop_oneof![4 => Just(0usize), 1 => 1usize..40],
        evasion in any::<bool>(), holdback in prop_oneof![4 => Just(65_536usize), 1 => 1usize..12],
    ) {
        let e = &evaluators()[which];
        let norm = if evasion { Normalize::Evasion } else { Normalize::None };
        let opts = StreamOptions {
            block_on_fatal: block, lookahead_chars: lookahead, normalize: norm,
            max_holdback_chars: holdback, ..StreamOptions::default()
        };
        let mut s = e.stream(opts);
        let mut released = String::new();
        for piece in split(&whole, &sizes) {
            released.push_str(&s.push(&piece).text);
        }
        released.push_str(&s.finish().text);
        let evaluated = e.evaluate_with(&whole, norm);
        let mut d = s.decision().unwrap();
        prop_assert!(d.latency_us > 0.0);
        if evaluated.severity == Some(Severity::Fatal) {
            prop_assert_eq!(&d.clean_text, &evaluated.clean_text);
        } else {
            prop_assert_eq!(&d.clean_text, "");
            if s.blocked().is_none() {
                prop_assert_eq!(&released, &evaluated.clean_text);
            }
            d.clean_text = evaluated.clean_text.clone();
        }
        d.latency_us = evaluated.latency_us;
        prop_assert_eq!(d, evaluated);
    }

    /// [§15](docs/evasion.md#s15): on a text the evasion view leaves as it is, `evasion`
    /// decides exactly as `none` (latency aside); texts of NFC words and
    /// ASCII values are such texts.
    #[test]
    fn evasion_decides_as_none_where_the_view_is_the_text(
        any_text in text(),
        plain in proptest::collection::vec((plain_token(), plain_separator()), 0..10), which in 0usize..5,
    ) {
        let e = &evaluators()[which];
        let plain: String = plain.iter().map(|(t, s)| format!("{t}{s}")).collect();
        for (t, must_be_plain) in [(&any_text, false), (&plain, true)] {
            let mut a = e.evaluate(t);
            let mut b = e.evaluate_with(t, Normalize::Evasion);
            prop_assert!(!a.normalized);
            if must_be_plain {
                prop_assert!(!b.normalized, "{:?} has nothing to normalize", t);
            }
            if !b.normalized {
                a.latency_us = 0.0;
                b.latency_us = 0.0;
                prop_assert_eq!(a, b);
            }
        }
    }

    /// Invariant 4 (promptness): prose that no rule can continue (words
    /// and spaces, ending in a space) is released whole at once.
    #[test]
    fn prose_ending_in_a_space_is_released_at_once(
        words in proptest::collection::vec("[a-zA-Zéß会議Ещё]{1,9}", 1..20), sizes in cuts(), which in 0usize..PROMPT,
    ) {
        let e = &evaluators()[which];
        // `MRN`, `EHR` and `RX` followed by spaces can still become a health
        // record id (`\s*\d{6,10}` may follow): holding them back is right.
        prop_assume!(words.iter().all(|w| !["mrn", "ehr", "rx"].contains(&w.to_lowercase().as_str())));
        let text: String = words.iter().map(|w| format!("{w} ")).collect();
        prop_assume!(e.evaluate(&text).action == PERMIT_ACTION);
        let mut s = e.stream(StreamOptions::default());
        let mut released = String::new();
        for piece in split(&text, &sizes) {
            released.push_str(&s.push(&piece).text);
        }
        prop_assert_eq!(released, text);
        prop_assert_eq!(s.held_chars(), 0);
    }
}

/// A codon's `context.before` window looks at text a session may already
/// have released and dropped from its buffer (it drops released text past
/// 4 KiB): the session keeps the widest window, so a value after long prose
/// is judged as the whole text judges it, wherever the cuts fall.
#[test]
fn context_windows_survive_dropped_released_text() {
    let e = &evaluators()[3];
    let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ3kLm9Tq2";
    let mut checked = 0;
    for prose in [4090usize, 4100, 6000, 8180, 8200, 12_000] {
        for gap in [1usize, 20, 47, 60] {
            let text = format!(
                "{} aws secret{}key={secret} done.",
                "lorem ipsum ".repeat(prose / 12),
                " ".repeat(gap)
            );
            let want = e.redacted_text(&text);
            // The word must lie within the 48 code points before the value.
            assert_eq!(
                want.contains("key=[REDACTED_AWS_SECRET] done."),
                "aws secret".len() + gap + "key=".len() <= 48,
                "{prose} {gap}"
            );
            for size in [1usize, 7, 16, 300] {
                let mut s = e.stream(StreamOptions {
                    block_on_fatal: false,
                    ..StreamOptions::default()
                });
                let mut out = String::new();
                let chars: Vec<char> = text.chars().collect();
                for piece in chars.chunks(size) {
                    out.push_str(&s.push(&piece.iter().collect::<String>()).text);
                }
                out.push_str(&s.finish().text);
                assert_eq!(out, want, "prose {prose}, gap {gap}, pieces of {size}");
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 96);
}

/// One codon of a random version-2 pack: its declaration (code, pattern,
/// group and checks drawn at random) and its hard-rule fields.
#[derive(Debug, Clone)]
struct RandomCodon {
    code: &'static str,
    yaml: String,
}

/// A codon from a template with random checks: a context window before,
/// after or around the value (or none), a checksum, an entropy floor, a
/// deny list, a group.
fn random_codon() -> impl Strategy<Value = RandomCodon> {
    let context = prop_oneof![
        2 => Just(String::new()),
        3 => (0usize..14, 0usize..14).prop_map(|(b, a)| format!(
            ", context: {{words: [acct, id no, '(ref)'], before: {b}, after: {a}}}"
        )),
    ];
    (0usize..5, context, any::<bool>()).prop_map(|(k, context, check)| {
        let (code, body) = match k {
            0 => ("ACCT", "params: {pattern: '\\b[0-9]{8}\\b'}".to_string()),
            1 => (
                "CARD",
                format!(
                    "params: {{pattern: '\\b(?:[0-9][ -]?){{12,15}}[0-9]\\b'}}{}",
                    if check { ", checksum: luhn" } else { "" }
                ),
            ),
            2 => (
                "KEY",
                format!(
                    "params: {{pattern: 'key=([A-Za-z0-9]{{8,16}})'{}}}",
                    if check { ", group: 1" } else { "" }
                ),
            ),
            3 => (
                "TOK",
                format!(
                    "params: {{pattern: '\\btok_[a-z0-9]{{6,10}}\\b'}}{}",
                    if check {
                        ", min_entropy: 2.5, deny_list: [tok_abc123]"
                    } else {
                        ""
                    }
                ),
            ),
            _ => (
                "IBAN",
                format!(
                    "params: {{pattern: '\\b[A-Z]{{2}}[0-9]{{2}}(?: ?[0-9]{{4}}){{4}}(?: ?[0-9]{{2}})?\\b'}}{}",
                    if check { ", checksum: iban" } else { "" }
                ),
            ),
        };
        let low = code.to_lowercase();
        RandomCodon {
            code,
            yaml: format!(
                "  - {{code: {code}, codon_type: extract_pattern, {body}{context}, binds_to: has_{low}, matches_field: {low}_values, remedy_template: '[{code}]'}}\n"
            ),
        }
    })
}

/// A random version-2 pack: two to four distinct codons, then hard rules
/// over them. Mostly disjunctions that read each codon once (the
/// incremental engine runs those), sometimes a conjunction or a count
/// (held whole and judged at the end); severities at random.
fn random_pack() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(random_codon(), 2..5),
        prop::collection::vec(any::<bool>(), 4),
        0usize..5,
    )
        .prop_map(|(codons, fatal, shape)| {
            let mut seen = std::collections::HashSet::new();
            let codons: Vec<RandomCodon> =
                codons.into_iter().filter(|c| seen.insert(c.code)).collect();
            let has = |c: &RandomCodon| format!("state.has_{}", c.code.to_lowercase());
            let sev = |k: usize| if fatal[k % 4] { "fatal" } else { "warning" };
            let mut rules = String::new();
            let mut rule = |k: usize, cond: String| {
                rules.push_str(&format!(
                    "  - {{id: R{k}, condition: '{cond}', action: act_{k}, severity: {}}}\n",
                    sev(k)
                ));
            };
            match (shape, codons.len()) {
                (0, n) if n >= 2 => {
                    rule(0, format!("{} and {}", has(&codons[0]), has(&codons[1])));
                    for (k, c) in codons.iter().enumerate().skip(2) {
                        rule(k, has(c));
                    }
                }
                (1, _) => {
                    let low = codons[0].code.to_lowercase();
                    rule(0, format!("len(state.{low}_values) >= 2"));
                    for (k, c) in codons.iter().enumerate().skip(1) {
                        rule(k, has(c));
                    }
                }
                _ => {
                    // Disjunctions: codons split in two groups.
                    let half = 1 + shape % (codons.len().max(2) - 1);
                    let (a, b) = codons.split_at(half.min(codons.len()));
                    for (k, group) in [a, b].iter().enumerate().filter(|(_, g)| !g.is_empty()) {
                        rule(k, group.iter().map(has).collect::<Vec<_>>().join(" or "));
                    }
                }
            }
            let decls: String = codons.iter().map(|c| c.yaml.as_str()).collect();
            format!(
                "schema_version: 2\npack_id: random.v2.v1\nversion: 1.0.0\ncodons:\n{decls}hard_rules:\n{rules}"
            )
        })
}

/// Texts for the random packs: their values, near misses and context words.
fn v2_text() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("12345678"),
        Just("87654321"),
        Just("4111 1111 1111 1111"),
        Just("4111-1111-1111-1112"),
        Just("key=AbC123dEf456gh"),
        Just("key=zz"),
        Just("tok_abc123"),
        Just("tok_q8w7e6r5"),
        Just("DE89 3704 0044 0532 0130 00"),
        Just("DE88 3704 0044 0532 0130 00"),
        Just("acct"),
        Just("id no"),
        Just("(ref)"),
        Just("accts"),
        Just("hello"),
        Just("Überweisung"),
    ];
    let sep = prop_oneof![Just(" "), Just(", "), Just("\n"), Just(": "), Just("")];
    prop::collection::vec((token, sep), 0..14)
        .prop_map(|v| v.iter().map(|(t, s)| format!("{t}{s}")).collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases((cases() / 8).max(16)))]

    /// [§16.4](docs/codons.md#s16-4) with [§11.1](docs/streaming.md#s11-1) and [§11.2](docs/streaming.md#s11-2): for random version-2 packs (random
    /// codons, checks, context windows before and after values, hard rules
    /// of every operator), a session cut anywhere releases only final text
    /// (a prefix of W(T) for the text pushed so far and for the whole
    /// text), blocks only on a FATAL trigger of the whole text, releases
    /// exactly W(T) otherwise, and decides as `evaluate` on the whole text.
    #[test]
    fn random_version_2_packs_stream_as_they_evaluate(
        pack in random_pack(), whole in v2_text(), sizes in cuts(), block in any::<bool>(),
    ) {
        let e = helixor::testing::compiled_evaluator(pack.as_bytes(), "random.yaml")
            .map_err(|err| TestCaseError::fail(format!("{err}\n{pack}")))?;
        let mut s = e.stream(StreamOptions { block_on_fatal: block, ..StreamOptions::default() });
        let (mut released, mut pushed) = (String::new(), String::new());
        let w_whole = e.redacted_text(&whole);
        for piece in split(&whole, &sizes) {
            released.push_str(&s.push(&piece).text);
            pushed.push_str(&piece);
            if s.blocked().is_none() {
                for c in [&pushed, &whole] {
                    let w = e.redacted_text(c);
                    prop_assert!(w.starts_with(&released), "{:?} is not final: W({:?}) = {:?}\n{}", released, c, w, pack);
                }
            }
        }
        released.push_str(&s.finish().text);
        let mut d = s.decision().unwrap();
        let evaluated = e.evaluate(&whole);
        let fatal = evaluated.triggers.iter().any(|t| t.severity == Severity::Fatal);
        match s.blocked() {
            Some(b) => {
                prop_assert!(block && fatal, "blocked with {} on {:?}\n{}", b.action, whole, pack);
                prop_assert!(w_whole.starts_with(&released));
            }
            None => {
                prop_assert!(!(block && fatal), "FATAL {:?} never blocked\n{}", evaluated.action, pack);
                prop_assert_eq!(&released, &w_whole, "{}", pack);
            }
        }
        if evaluated.severity != Some(Severity::Fatal) {
            d.clean_text = evaluated.clean_text.clone();
        }
        d.latency_us = evaluated.latency_us;
        prop_assert_eq!(d, evaluated, "{}", pack);
    }
}
