use super::*;
use crate::engine::decision::Decision;
use crate::engine::receipt::receipt_hash_of;
use crate::engine::tests::{builtin_only, evaluator};
use crate::engine::PERMIT_ACTION;

/// Pushes `text` in pieces of `size` code points; returns the releases
/// (the finish's last) and the session's blocked action.
fn run(
    e: &Evaluator,
    text: &str,
    size: usize,
    opts: StreamOptions,
) -> (Vec<String>, Option<String>) {
    let mut s = e.stream(opts);
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    for piece in chars.chunks(size) {
        let piece: String = piece.iter().collect();
        out.push(s.push(&piece).text);
    }
    out.push(s.finish().text);
    (out, s.blocked().map(|b| b.action.to_string()))
}

fn nonempty(v: Vec<String>) -> Vec<String> {
    v.into_iter().filter(|s| !s.is_empty()).collect()
}

/// Options that redact FATAL matches instead of blocking on them.
fn redacting() -> StreamOptions {
    StreamOptions {
        block_on_fatal: false,
        ..StreamOptions::default()
    }
}

#[test]
fn python_runtime_lookahead_28_in_chunks_of_4() {
    let e = builtin_only();
    let opts = StreamOptions {
        lookahead_chars: 28,
        ..StreamOptions::default()
    };
    let (out, blocked) = run(
        &e,
        "Reach support at support@corp.com or security@corp.com.",
        4,
        opts,
    );
    assert_eq!(blocked, None);
    assert_eq!(
        nonempty(out),
        [
            "Reach ",
            "support at ",
            "[REDACTED_EMAIL] or [REDACTED_EMAIL]."
        ]
    );
}

#[test]
fn exact_holdback_releases_prose_at_once_and_holds_only_the_live_word() {
    let e = builtin_only();
    let mut s = e.stream(StreamOptions::default());
    // "Hello, " : no rule can continue after the space.
    assert_eq!(s.push("Hello, ").text, "Hello, ");
    // "write to jane" : "jane" may become an e-mail.
    assert_eq!(s.push("write to jane").text, "write to ");
    assert_eq!(s.held_chars(), 4);
    assert_eq!(s.push(".doe@exam").text, "");
    let r = s.push("ple.com today");
    assert_eq!(r.text, "[REDACTED_EMAIL] ");
    assert!(r.redacted);
    assert_eq!(s.finish().text, "today");
}

#[test]
fn a_value_cut_into_single_code_points_never_leaks() {
    let e = builtin_only();
    let text = "mail ops@example.com or 212-555-0187 — done";
    let (out, blocked) = run(&e, text, 1, StreamOptions::default());
    assert_eq!(blocked, None);
    assert_eq!(out.concat(), e.redacted_text(text));
    assert_eq!(out.concat(), e.evaluate(text).clean_text);
    for r in &out {
        assert!(!r.contains('@') && !r.contains("555"), "{r:?}");
    }
}

#[test]
fn fatal_match_blocks_once_final_and_releases_nothing_after() {
    let e = builtin_only();
    let mut s = e.stream(StreamOptions::default());
    assert_eq!(s.push("SSN is ").text, "SSN is ");
    assert_eq!(s.push("123-45-678").text, "");
    // The last digit could still be followed by a digit (no \b): held.
    assert_eq!(s.push("9").text, "");
    assert!(s.blocked().is_none());
    assert_eq!(s.push(" thanks").text, "");
    let b = s.blocked().unwrap();
    assert_eq!(b.action, "block_glba_ssn_leakage");
    assert_eq!(
        b.reason,
        "Statutory violation: Social Security Number (GLBA / FCRA) detected"
    );
    assert_eq!(
        b.triggers,
        vec![("RULE-GLBA-SSN-BLOCK".to_string(), Severity::Fatal)]
    );
    assert_eq!(s.push("more").text, "");
    assert_eq!(s.finish().text, "");
}

#[test]
fn a_longer_digit_run_is_no_ssn() {
    let e = builtin_only();
    let (out, blocked) = run(&e, "id 123-45-67890 ok", 3, StreamOptions::default());
    assert_eq!(blocked, None);
    assert_eq!(out.concat(), "id 123-45-67890 ok");
}

#[test]
fn a_rule_looks_for_a_match_only_where_a_run_of_its_inner_bytes_has_room() {
    let plan = LivePlan::new(&builtin_only());
    // The codons, in order: SSN, card, health id, e-mail, phone, IPv4.
    let min: Vec<usize> = plan.rules.iter().map(|r| r.min_len).collect();
    assert_eq!(min, [11, 16, 8, 5, 10, 7]);
    let (ssn, card) = (&plan.rules[0], &plan.rules[1]);
    assert!(ssn.has_room(b"id 123-45-6789x"));
    // A space is not inner for the SSN codon: no run of 11.
    assert!(!ssn.has_room(b"id 123-45 6789x"));
    assert!(!card.has_room(b"in 2019 and 14th"));
    assert!(card.has_room(b"4111 1111 1111 1111"));
}

#[test]
fn a_value_exactly_as_long_as_the_shortest_match_fills_its_piece() {
    let e = builtin_only();
    let opts = redacting();
    // Each piece is one value of its codon's shortest length, then letters
    // that end every digit rule's partial matches: the value lies in the
    // text the rules skip, whose longest run has just room for it.
    for (text, size, want) in [
        ("123-45-6789 abc ", 16, "[REDACTED_SSN] abc "),
        ("4111111111111111 x ", 19, "[REDACTED_CARD_PAN] x "),
        ("RX123456 abcdef ", 16, "[REDACTED_HEALTH_ID] abcdef "),
        ("a@b.c xyzwvuts ", 15, "[REDACTED_EMAIL] xyzwvuts "),
        ("2125550199 abc ", 15, "[REDACTED_PHONE] abc "),
        ("1.2.3.4 abcdefg ", 16, "[REDACTED_IP] abcdefg "),
    ] {
        let (out, blocked) = run(&e, &format!("{text}{text}"), size, opts);
        assert_eq!(blocked, None, "{text}");
        assert_eq!(out.concat(), format!("{want}{want}"), "{text}");
    }
}

#[test]
fn block_on_fatal_false_redacts_fatal_matches() {
    let e = builtin_only();
    let opts = redacting();
    let text = "card 4111 1111 1111 1111 and SSN 123-45-6789.";
    let (out, blocked) = run(&e, text, 5, opts);
    assert_eq!(blocked, None);
    assert_eq!(
        out.concat(),
        "card [REDACTED_CARD_PAN] and SSN [REDACTED_SSN]."
    );
}

#[test]
fn luhn_candidate_that_may_still_grow_is_held() {
    let e = builtin_only();
    let mut s = e.stream(StreamOptions::default());
    assert_eq!(s.push("pay 4111 1111 1111 111").text, "pay ");
    assert_eq!(s.push("1").text, "");
    assert!(s.blocked().is_none());
    assert_eq!(s.push(".").text, "");
    assert_eq!(s.blocked().unwrap().action, "block_pci_dss_pan_leakage");
}

#[test]
fn holdback_limit_blocks_fail_closed() {
    let e = evaluator(
        "pack_id: t\nrules:\n  - {id: tail, type: regex, pattern: 'a+b', action: redact}\n",
    );
    let opts = StreamOptions {
        max_holdback_chars: 10,
        ..StreamOptions::default()
    };
    let mut s = e.stream(opts);
    assert_eq!(s.push("x aaaa").text, "x ");
    assert_eq!(s.push("aaaaaaa").text, "");
    let b = s.blocked().unwrap();
    assert_eq!(b.action, HOLDBACK_ACTION);
    assert_eq!(b.reason, HOLDBACK_REASON);
}

#[test]
fn higher_priority_alternative_keeps_a_shorter_match_pending() {
    // Leftmost-first: `bcd|b` on "bc" matches "b", on "bcd" matches "bcd".
    // (Not `a`: a rule that matches every `a` and the e-mail codon cost too
    // much together on e-mail-like text, [§11.4](docs/limits.md#s11-4).)
    let e = evaluator(
        "pack_id: t\nrules:\n  - {id: ab, type: regex, pattern: 'bcd|b', action: redact}\n",
    );
    let mut s = e.stream(StreamOptions::default());
    assert_eq!(s.push("x bc").text, "x ");
    assert_eq!(s.push("d!").text, "[REDACTED_AB]!");
    let (out, _) = run(&e, "x bce", 1, StreamOptions::default());
    assert_eq!(out.concat(), "x [REDACTED_AB]ce");
}

#[test]
fn every_cut_of_mixed_texts_gives_the_redacted_text() {
    let e = evaluator(
        "pack_id: t\nrules:\n  - {id: ticket, type: regex, pattern: '\\bTCK-\\d{6}\\b', action: redact}\n  - {id: gift, type: luhn_checksum, pattern: '\\b\\d{4}-\\d{4}-\\d{4}\\b', action: redact}\n",
    );
    for text in [
        "Écrivez à ops@example.com ou 555-867-5309 — 10.0.0.1",
        "TCK-004211 then 4111-1111-1111 and 4111-1111-1112 end",
        "é123-45-6789 «mrn: 1234567» rx 12 x@y.z",
        "",
        "@@@ a@b.c.d. 1.2.3.4.5 (212) 555-0187",
    ] {
        let want = e.redacted_text(text);
        for size in 1..8 {
            let opts = redacting();
            let (out, blocked) = run(&e, text, size, opts);
            assert_eq!(blocked, None);
            assert_eq!(out.concat(), want, "{text:?} in pieces of {size}");
        }
    }
    assert_eq!(e.evaluate("").action, PERMIT_ACTION);
}

#[test]
fn a_health_prefix_then_a_space_stays_held_until_the_digits_decide() {
    let e = builtin_only();
    let mut s = e.stream(StreamOptions::default());
    assert_eq!(s.push("see RX ").text, "see ");
    assert_eq!(s.push("12345").text, "");
    assert_eq!(s.push(" done").text, "RX 12345 ");
    let mut s = e.stream(StreamOptions::default());
    s.push("see RX ");
    assert_eq!(s.push("1234567 ").text, "");
    assert_eq!(s.blocked().unwrap().action, "block_hipaa_phi_leakage");
}

#[test]
fn a_pattern_with_many_dfa_states_streams_exactly() {
    // Counted repetitions make thousands of DFA states: the load-time
    // exploration gives up at its cap (every byte counts as inner) and the
    // session still releases exactly W(T). The compiler now refuses this
    // pattern as too costly ([§11.4](docs/limits.md#s11-4): its DFA keeps building states on
    // random text), so the rule is built past that check.
    let rule = past_the_cost_check("runs", "[a-z]{1,40}x[a-z]{1,40}");
    let e = Evaluator::new("t", "1", &[rule]).unwrap();
    let text = "abc and qqqqxqqq then zzz";
    let (out, _) = run(&e, text, 3, StreamOptions::default());
    assert_eq!(out.concat(), e.redacted_text(text));
    assert_eq!(out.concat(), "abc and [REDACTED_RUNS] then zzz");
}

#[test]
fn a_dfa_that_clears_its_cache_at_load_builds_and_streams() {
    // Its liveness DFA outgrows the session cache while it is explored at
    // load: the exploration stops at the first clear instead of using a
    // state id of the cleared cache (which panicked inside regex-automata).
    // The compiler refuses the pattern ([§11.4](docs/limits.md#s11-4)); this builds it past
    // that check, as an old pack could.
    let rule = past_the_cost_check("nested", "(a{1,100}){1,100}b");
    let e = Evaluator::new("t", "1", &[rule]).unwrap();
    let text = "x aaab y";
    let (out, _) = run(&e, text, 2, StreamOptions::default());
    assert_eq!(out.concat(), e.redacted_text(text));
    assert_eq!(out.concat(), "x [REDACTED_NESTED] y");
}

#[test]
fn a_giant_non_ascii_word_held_to_the_end_is_searched_exactly() {
    // One word of 200,000 characters (`é` is a word character) with no
    // hold-back limit: the session holds it all, and the end of input
    // settles it through the engine's guided search from the held start,
    // whose backward passes (the alternative that ends with `\b` from word
    // boundaries, `zz` from everywhere) find both matches after it.
    let rule = crate::rules::CustomRule {
        id: "ing".to_string(),
        rule_type: crate::rules::RuleType::Regex,
        action: crate::rules::RuleAction::Redact,
        description: None,
        pattern: crate::pattern::compile(r"\w+ing\b|zz", &[]).unwrap(),
    };
    let e = Evaluator::new("t", "1", &[rule]).unwrap();
    let word = "aingé".repeat(40_000);
    for tail in [" aing zz", " zz", "", "ing"] {
        let text = format!("{word}{tail}");
        let opts = StreamOptions {
            max_holdback_chars: usize::MAX,
            ..StreamOptions::default()
        };
        let mut s = e.stream(opts);
        let mut out = String::new();
        for p in byte_pieces(&text, 16) {
            out.push_str(&s.push(p).text);
        }
        out.push_str(&s.finish().text);
        let want = match tail {
            " aing zz" => format!("{word} [REDACTED_ING] [REDACTED_ING]"),
            " zz" => format!("{word} [REDACTED_ING]"),
            "" => word.clone(),
            _ => "[REDACTED_ING]".to_string(),
        };
        assert_eq!(out, want, "tail {tail:?}");
        assert_eq!(out, e.redacted_text(&text));
    }
}

/// A redacting rule built without the compiler's cost check ([§11.4](docs/limits.md#s11-4)),
/// as a pack sealed before it could hold; the check must refuse it.
fn past_the_cost_check(id: &str, pattern: &str) -> crate::rules::CustomRule {
    let rule = crate::rules::CustomRule {
        id: id.to_string(),
        rule_type: crate::rules::RuleType::Regex,
        action: crate::rules::RuleAction::Redact,
        description: None,
        pattern: crate::pattern::compile(pattern, &[]).unwrap(),
    };
    assert!(crate::pattern::check_cost(&rule.pattern).is_err());
    rule
}

/// Cuts `text` into pieces of `size` bytes, moved on to the next code-point
/// boundary.
fn byte_pieces(text: &str, size: usize) -> Vec<&str> {
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

/// Every release of a session over `text` in 3-byte pieces (the finish's
/// last) and how it blocked.
fn releases<E: Deref<Target = Evaluator>>(
    mut s: Session<E>,
    text: &str,
) -> (Vec<Released>, Option<Blocked>) {
    let mut out: Vec<Released> = byte_pieces(text, 3).iter().map(|p| s.push(p)).collect();
    out.push(s.finish());
    (out, s.blocked().cloned())
}

#[test]
fn an_owned_session_releases_and_blocks_as_a_borrowed_one() {
    let e = Arc::new(builtin_only());
    let idle = |e: &Evaluator| e.live_caches.lock().map_or(0, |l| l.len());
    let mut results = Vec::new();
    for text in [
        "Écrivez à jane.doe@example.com — merci, à demain",
        "my SSN is 123-45-6789, thanks",
    ] {
        let borrowed = releases(e.stream(StreamOptions::default()), text);
        let pooled = idle(&e);
        let owned = e.stream_owned(StreamOptions::default());
        assert_eq!(idle(&e) + 1, pooled);
        let owned = releases(owned, text);
        // Dropped: its caches are back in the evaluator's pools.
        assert_eq!(idle(&e), pooled);
        assert_eq!(owned, borrowed, "{text:?}");
        results.push(owned);
    }
    // Neither case is vacuous: the e-mail is redacted, the SSN blocks.
    let (email, ssn) = (&results[0], &results[1]);
    let text: String = email.0.iter().map(|r| r.text.as_str()).collect();
    assert_eq!(text, "Écrivez à [REDACTED_EMAIL] — merci, à demain");
    assert_eq!(email.1, None);
    assert!(ssn.0.iter().all(|r| !r.text.contains("6789")));
    assert_eq!(
        ssn.1,
        Some(Blocked {
            action: "block_glba_ssn_leakage".to_string(),
            reason: "Statutory violation: Social Security Number (GLBA / FCRA) detected"
                .to_string(),
            triggers: vec![("RULE-GLBA-SSN-BLOCK".to_string(), Severity::Fatal)],
        })
    );
}

#[test]
fn an_owned_session_moves_into_a_thread() {
    fn send_static<T: Send + 'static>(t: T) -> T {
        t
    }
    let e = Arc::new(builtin_only());
    let text = "write to jane.doe@example.com or call 212-555-0187 today";
    let want = e.redacted_text(text);
    let mut s = send_static(e.stream_owned(StreamOptions::default()));
    let first = s.push("write ");
    // The session alone keeps the evaluator alive from here on.
    drop(e);
    let released = std::thread::spawn(move || {
        let mut out = String::new();
        for p in byte_pieces(&text["write ".len()..], 3) {
            out.push_str(&s.push(p).text);
        }
        out.push_str(&s.finish().text);
        out
    })
    .join()
    .unwrap();
    assert_eq!(first.text + &released, want);
}

#[test]
fn past_64_rules_every_cut_gives_the_redacted_text() {
    // Rules from the 64th on share the last bit of the session's masks:
    // they are advanced one by one and must stream as exactly as the rest.
    let mut yaml = String::from("pack_id: t\nrules:\n");
    for k in 0..70 {
        yaml.push_str(&format!(
            "  - {{id: r{k}, type: regex, pattern: '\\bW{k}x\\d+\\b', action: redact}}\n"
        ));
    }
    let e = evaluator(&yaml);
    let text = "W1x12 then W63x7, W64x99 and W69x5 W69x ops@example.com W70x1 W2x3";
    let want = e.redacted_text(text);
    assert_eq!(
        want,
        "[REDACTED_R1] then [REDACTED_R63], [REDACTED_R64] and [REDACTED_R69] W69x \
         [REDACTED_EMAIL] W70x1 [REDACTED_R2]"
    );
    for size in 1..8 {
        let (out, blocked) = run(&e, text, size, StreamOptions::default());
        assert_eq!(blocked, None);
        assert_eq!(out.concat(), want, "pieces of {size}");
    }
}

#[test]
fn only_a_run_that_keeps_every_partial_match_live_is_deferred() {
    let e = builtin_only();
    let s = e.stream(StreamOptions::default());
    let keep = |i: usize| -> String {
        (0..=255u8)
            .filter(|&b| s.core.plan.rules[i].keep[usize::from(b)])
            .map(char::from)
            .collect()
    };
    // The e-mail codon (codon 3): any run of local-part characters from a
    // start stays a live, undecided partial match; `@` does not (`a@@`
    // dies), nor does a space.
    let email = keep(3);
    let mut want: String = ('0'..='9').chain('A'..='Z').chain('a'..='z').collect();
    want.push_str("+-._");
    let mut got: Vec<char> = email.chars().collect();
    got.sort_unstable();
    let mut want: Vec<char> = want.chars().collect();
    want.sort_unstable();
    assert_eq!(got, want);
    // A fixed-length value dies on a run that is too long: nothing deferred.
    assert_eq!(keep(0), "", "SSN");
    assert!(!s.core.plan.rules[0].defers);
}

#[test]
fn a_deferred_word_is_held_exactly_and_redacted_when_it_becomes_a_value() {
    let e = builtin_only();
    let mut s = e.stream(StreamOptions::default());
    // "jane" is deferred (never simulated) while it grows; its start stays
    // the earliest live one.
    assert_eq!(s.push("mail jane").text, "mail ");
    // Deferred, not simulated: no thread, the word's start recorded (the
    // e-mail codon is rule 3; no required byte seen yet).
    assert!(s.core.rules[3].threads.is_empty());
    assert_eq!(s.core.rules[3].deferred, Some((5, false)));
    assert_eq!(s.push(".doe").text, "");
    assert_eq!(s.core.rules[3].deferred, Some((5, false)));
    assert_eq!(s.held_chars(), 8);
    // A space ends the run with no `@` in it: released at once.
    assert_eq!(s.push(" or jo").text, "jane.doe or ");
    assert_eq!(s.held_chars(), 2);
    // `@` is no keep byte: the word is simulated from its start.
    assert_eq!(s.push("@ex").text, "");
    assert_eq!(s.push("ample.com").text, "");
    assert_eq!(s.finish().text, "[REDACTED_EMAIL]");
    // Ended by the end of input while deferred.
    let (out, _) = run(&e, "to a.b@c.de", 1, StreamOptions::default());
    assert_eq!(out.concat(), "to [REDACTED_EMAIL]");
    let mut s = e.stream(StreamOptions::default());
    assert_eq!(s.push("x jane").text, "x ");
    assert_eq!(s.finish().text, "jane");
}

/// `text` cut into pieces of `sizes` code points, in turn (the last
/// shorter).
fn cut(text: &str, sizes: &[usize]) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut pieces = Vec::new();
    let (mut at, mut k) = (0, 0);
    while at < chars.len() {
        let n = sizes[k % sizes.len()].min(chars.len() - at);
        pieces.push(chars[at..at + n].iter().collect::<String>());
        at += n;
        k += 1;
    }
    pieces
}

mod deferral {
    use super::*;
    use proptest::prelude::*;

    fn evaluators() -> &'static [Evaluator] {
        static E: std::sync::OnceLock<Vec<Evaluator>> = std::sync::OnceLock::new();
        E.get_or_init(|| {
            vec![
                builtin_only(),
                crate::engine::tests::evaluator(crate::fuzzing::PROBE_RULES),
            ]
        })
    }

    fn token() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("jane.doe@example.com".to_string()),
            Just("a@b".to_string()),
            Just("x@y.z.".to_string()),
            Just("@".to_string()),
            Just("support".to_string()),
            Just("ops-team_42+tag".to_string()),
            Just("123-45-6789".to_string()),
            Just("4111 1111 1111 1111".to_string()),
            Just("(212) 555-0187".to_string()),
            Just("MRN: 1234567".to_string()),
            Just("10.0.0.1".to_string()),
            Just("écrit".to_string()),
            "[a-z.@_+-]{1,12}",
            "[ ,;\n]{1,2}",
        ]
    }

    fn releases(e: &Evaluator, pieces: &[String], defer: bool) -> (Vec<Released>, Option<String>) {
        let mut s = e.stream(redacting());
        s.core.defer = defer;
        let mut out: Vec<Released> = pieces.iter().map(|p| s.push(p)).collect();
        out.push(s.finish());
        (out, s.blocked().map(|b| b.action.clone()))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// Deferring a thread changes no release, piece by piece: it only
        /// saves simulating it.
        #[test]
        fn deferral_releases_exactly_what_simulation_releases(
            tokens in proptest::collection::vec(token(), 0..12),
            sizes in proptest::collection::vec(1usize..7, 1..40),
        ) {
            let text = tokens.concat();
            let pieces = cut(&text, &sizes);
            for e in evaluators() {
                let on = releases(e, &pieces, true);
                let off = releases(e, &pieces, false);
                prop_assert_eq!(&on, &off, "{:?}", pieces);
                let whole: String = on.0.iter().map(|r| r.text.as_str()).collect();
                prop_assert_eq!(whole, e.redacted_text(&text));
            }
        }
    }
}

mod quiet {
    use super::*;
    use proptest::prelude::*;

    /// The example pack, the fuzzing probe rules, and a version-2 pack
    /// whose values wait for a `context.after` window (`busy` without a
    /// thread: the quiet case must step aside).
    fn evaluators() -> &'static [Evaluator] {
        static E: std::sync::OnceLock<Vec<Evaluator>> = std::sync::OnceLock::new();
        E.get_or_init(|| {
            let after = "schema_version: 2\npack_id: t.after.v1\nversion: 1.0.0\ncodons:\n  - {code: ACCT, codon_type: extract_pattern, params: {pattern: '\\b[0-9]{8}\\b'}, context: {words: [acct], before: 0, after: 8}, binds_to: has_acct, remedy_template: '[ACCT]'}\n  - {code: TAG, codon_type: extract_pattern, params: {pattern: '\\bref-[a-z]+'}, binds_to: has_tag, remedy_template: '[TAG]'}\nhard_rules:\n  - {id: R, condition: state.has_acct, action: redact_acct, severity: warning}\n  - {id: T, condition: state.has_tag, action: redact_tag, severity: warning}\n";
            vec![
                builtin_only(),
                crate::engine::tests::evaluator(crate::fuzzing::PROBE_RULES),
                crate::compile_in_memory(
                    after.as_bytes(),
                    "t.yaml",
                    crate::Entitlement::PolicyTest,
                )
                .unwrap()
                .evaluator()
                .unwrap(),
            ]
        })
    }

    fn token() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("jane.doe@example.com".to_string()),
            Just("a@b".to_string()),
            Just("MRN 00482913".to_string()),
            Just("Medical Record Essentials".to_string()),
            Just("123-45-6789".to_string()),
            Just("4111 1111 1111 1111".to_string()),
            Just("(415) 555-0142".to_string()),
            Just("10.42.7.19".to_string()),
            Just("12345678 acct".to_string()),
            Just("ref-abc".to_string()),
            Just("référence".to_string()),
            "[a-zA-Z]{1,14}",
            "[a-z.@_+-]{1,8}",
            "[ ,;.\n]{1,2}",
        ]
    }

    /// Every release, the blocked action and the decision (but its time).
    fn run(e: &Evaluator, pieces: &[String], quiet: bool, opts: StreamOptions) -> String {
        let mut s = e.stream(opts);
        s.core.quiet = quiet;
        let mut out: Vec<Released> = pieces.iter().map(|p| s.push(p)).collect();
        out.push(s.finish());
        let d = s
            .decision()
            .map(|d| (d.action, d.receipt_hash, format!("{:?}", d.triggers)));
        format!("{out:?} {:?} {d:?}", s.blocked().map(|b| b.action.clone()))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// The quiet case changes nothing a session does, piece by piece,
        /// blocking on FATAL values or redacting them.
        #[test]
        fn the_quiet_case_releases_exactly_what_the_general_step_releases(
            tokens in proptest::collection::vec(token(), 0..16),
            sizes in proptest::collection::vec(1usize..20, 1..40),
            block in any::<bool>(),
        ) {
            let text = tokens.concat();
            let pieces = cut(&text, &sizes);
            let opts = if block { StreamOptions::default() } else { redacting() };
            for e in evaluators() {
                prop_assert_eq!(run(e, &pieces, true, opts), run(e, &pieces, false, opts), "{:?}", pieces);
            }
        }
    }

    /// The case is taken: every push of this prose settles there, and
    /// one with digits in it does not.
    #[test]
    fn prose_takes_the_quiet_case() {
        let e = builtin_only();
        let mut s = e.stream(StreamOptions::default());
        let text = "the primary contact on file is the address our system uses for notices ";
        let released: Vec<String> = text
            .as_bytes()
            .chunks(16)
            .map(|piece| s.push(std::str::from_utf8(piece).unwrap_or_default()).text)
            .collect();
        assert_eq!(s.core.quiet_steps, text.len().div_ceil(16));
        // Each push releases up to the start of its last word.
        assert_eq!(
            released,
            [
                "the primary ",
                "contact on file is ",
                "the address our ",
                "system uses for ",
                "notices "
            ]
        );
        // Digits a phone number needs: the general step looks.
        assert_eq!(s.push("call 555-0142 or").text, "call 555-0142 ");
        assert_eq!(s.core.quiet_steps, text.len().div_ceil(16));
        assert_eq!(s.finish().text, "or");
        assert_eq!(s.decision().map(|d| d.action), Some(PERMIT_ACTION));
    }
}

/// Options that match through the evasion view ([§15](docs/evasion.md#s15)) and redact FATAL
/// matches.
fn evasion() -> StreamOptions {
    StreamOptions {
        normalize: Normalize::Evasion,
        ..redacting()
    }
}

#[test]
fn evasion_holds_a_word_only_while_it_may_still_mix_scripts() {
    let e = builtin_only();
    let mut s = e.stream(evasion());
    let mut out = String::new();
    // Words of one script are released as they end (the last character is
    // an open segment: a mark could still follow it).
    out.push_str(&s.push("Ещё раз, ").text);
    assert_eq!(out, "Ещё раз,");
    // A Cyrillic word of look-alikes waits: a Latin letter would rewrite it.
    out.push_str(&s.push("\u{430}\u{445}").text);
    assert_eq!(out, "Ещё раз, ");
    assert_eq!(s.held_chars(), 2);
    out.push_str(&s.push("12").text);
    assert_eq!(s.held_chars(), 4, "digits leave it open");
    // Its end decides it: one script, written as it is.
    out.push_str(&s.push(" then, ").text);
    assert_eq!(out, "Ещё раз, \u{430}\u{445}12 then,");
    assert_eq!(s.held_chars(), 1);
    // A Latin letter decides it too: the word mixes, and is an address.
    for piece in ["j\u{430}", "ne@ex\u{430}mple.com", " ok"] {
        let r = s.push(piece);
        assert!(!r.text.contains('@') && !r.text.contains("ne"), "{r:?}");
        out.push_str(&r.text);
    }
    out.push_str(&s.finish().text);
    assert_eq!(out, "Ещё раз, \u{430}\u{445}12 then, [REDACTED_EMAIL] ok");
}

#[test]
fn a_lookalike_address_is_redacted_whole_whatever_the_pieces() {
    let e = builtin_only();
    for text in [
        "mail jan\u{435}.doe@example.com now",
        "mail j\u{430}ne.doe@\u{435}\u{445}ample.com now",
        "mail jane.d\u{3BF}e@example.com now",
    ] {
        let whole = e.evaluate_with(text, Normalize::Evasion);
        assert_eq!(whole.clean_text, "mail [REDACTED_EMAIL] now");
        for size in 1..=9 {
            let (out, blocked) = run(&e, text, size, evasion());
            assert_eq!(blocked, None);
            assert_eq!(
                out.concat(),
                "mail [REDACTED_EMAIL] now",
                "{text:?} in {size}s"
            );
        }
    }
}

/// The session's decision with the fields only an evaluation has made equal
/// to `evaluate`'s: its `clean_text` (a session holds only what it has not
/// released) and its `latency_us`.
fn comparable<'e>(mut d: Decision<'e>, evaluated: &Decision<'e>) -> Decision<'e> {
    if d.severity != Some(Severity::Fatal) {
        assert_eq!(d.clean_text, "");
        d.clean_text = evaluated.clean_text.clone();
    }
    d.latency_us = evaluated.latency_us;
    d
}

#[test]
fn a_session_past_its_engine_time_fails_closed_and_stops_working() {
    let e = builtin_only();
    let mut s = e.stream(StreamOptions {
        max_session_ms: 1000,
        ..StreamOptions::default()
    });
    assert_eq!(s.push("Hello, ").text, "Hello, ");
    assert!(s.blocked().is_none());
    // The next call brings the session past its 1000 ms.
    s.core.extra_time = Duration::from_millis(1001);
    let r = s.push("mail ops@example.com now. ");
    assert_eq!(r, Released::default());
    assert!(s.engine_time() > Duration::from_millis(1000));
    let b = s.blocked().unwrap().clone();
    assert_eq!(
        b,
        Blocked {
            action: "block_stream_cost_limit".into(),
            reason: "Stream cost limit exceeded".into(),
            triggers: Vec::new(),
        }
    );
    // No more work: later pieces are only hashed for the receipt.
    let held = s.core.buf.len();
    assert_eq!(s.push("and more text ").text, "");
    assert_eq!(s.core.buf.len(), held);
    assert_eq!(s.finish().text, "");
    let d = s.decision().unwrap();
    let whole = "Hello, mail ops@example.com now. and more text ";
    assert_eq!(d.action, COST_ACTION);
    assert_eq!(d.severity, Some(Severity::Fatal));
    assert_eq!(d.reason, Some(COST_REASON));
    assert_eq!(d.clean_text, BLOCKED_TEXT);
    assert!(d.triggers.is_empty() && !d.invariants_passed);
    assert_eq!(
        d.receipt_hash,
        receipt_hash_of(
            "t.p.v1",
            "1",
            COST_ACTION,
            false,
            std::iter::empty(),
            &crate::crypto::sha256(whole.as_bytes())
        )
    );
    assert!(d.latency_us > 1_000_000.0);
}

#[test]
fn a_session_past_its_engine_time_in_its_finish_releases_nothing_of_it() {
    let e = builtin_only();
    let mut s = e.stream(StreamOptions {
        max_session_ms: 1000,
        ..StreamOptions::default()
    });
    assert_eq!(s.push("write to jane").text, "write to ");
    s.core.extra_time = Duration::from_millis(1001);
    assert_eq!(s.finish().text, "");
    assert_eq!(s.blocked().unwrap().action, COST_ACTION);
    assert_eq!(s.decision().unwrap().action, COST_ACTION);
}

#[test]
fn a_session_within_its_engine_time_is_not_stopped() {
    let e = builtin_only();
    let mut s = e.stream(StreamOptions {
        max_session_ms: 1000,
        ..StreamOptions::default()
    });
    s.core.extra_time = Duration::from_millis(300);
    assert_eq!(s.push("one ").text, "one ");
    assert_eq!(s.push("two ").text, "two ");
    assert_eq!(s.push("three ").text, "three ");
    assert!(s.blocked().is_none());
    // The fourth call brings it to 1200 ms.
    assert_eq!(s.push("four ").text, "");
    assert_eq!(s.blocked().unwrap().action, COST_ACTION);
}

#[test]
fn a_blocked_session_keeps_judging_the_text_for_its_decision() {
    let e = builtin_only();
    let text = "SSN 123-45-6789, then mail ops@example.com and call 212-555-0187. Done";
    let mut s = e.stream(StreamOptions::default());
    let mut released = String::new();
    for piece in byte_pieces(text, 5) {
        released.push_str(&s.push(piece).text);
    }
    released.push_str(&s.finish().text);
    assert_eq!(released, "SSN ");
    assert_eq!(s.blocked().unwrap().action, "block_glba_ssn_leakage");
    let d = s.decision().unwrap();
    let evaluated = e.evaluate(text);
    // The triggers after the block are the whole text's.
    let ids: Vec<&str> = d.triggers.iter().map(|t| t.rule_id).collect();
    assert_eq!(
        ids,
        ["RULE-GLBA-SSN-BLOCK", "RULE-GDPR-CONTACT-REDACT"],
        "{d:?}"
    );
    assert_eq!(d.clean_text, BLOCKED_TEXT);
    assert_eq!(comparable(d, &evaluated), evaluated);
}

#[test]
fn a_session_blocked_at_its_holdback_limit_decides_the_whole_text() {
    let e = evaluator(
        "pack_id: t\nrules:\n  - {id: tail, type: regex, pattern: 'a+b', action: redact}\n",
    );
    let mut s = e.stream(StreamOptions {
        max_holdback_chars: 10,
        ..StreamOptions::default()
    });
    let text = "x aaaaaaaaaaaab and ops@example.com é";
    for piece in byte_pieces(text, 3) {
        assert!(!s.push(piece).text.contains('a'));
    }
    s.finish();
    assert_eq!(s.blocked().unwrap().action, HOLDBACK_ACTION);
    let d = s.decision().unwrap();
    assert_eq!(d.action, "redact_tail");
    let evaluated = e.evaluate(text);
    assert_eq!(comparable(d, &evaluated), evaluated);
}

#[test]
fn the_decision_waits_for_the_finish() {
    let e = builtin_only();
    let mut s = e.stream(StreamOptions::default());
    s.push("mail ops@example.com");
    assert!(s.decision().is_none());
    s.finish();
    assert_eq!(
        s.decision().unwrap().action,
        "redact_and_permit_contact_pii"
    );
}

#[test]
fn the_decision_counts_code_points_and_maps_the_evasion_view() {
    let e = builtin_only();
    let text = "Café № 1: écrivez à ops@example.com, ＭＲＮ １２３４５６７ or 123-45\u{200D}-6789 — 会議 10.0.0.1";
    for normalize in [Normalize::None, Normalize::Evasion] {
        for size in [1, 2, 7, 64] {
            let mut s = e.stream(StreamOptions {
                block_on_fatal: false,
                normalize,
                ..StreamOptions::default()
            });
            for piece in byte_pieces(text, size) {
                s.push(piece);
            }
            s.finish();
            let evaluated = e.evaluate_with(text, normalize);
            let d = s.decision().unwrap();
            assert_eq!(d.normalized, normalize == Normalize::Evasion);
            assert_eq!(comparable(d, &evaluated), evaluated, "{normalize:?} {size}");
        }
    }
}

#[test]
fn evasion_holdback_limit_counts_a_word_the_view_holds() {
    let e = builtin_only();
    let opts = StreamOptions {
        max_holdback_chars: 10,
        ..evasion()
    };
    let mut s = e.stream(opts);
    assert_eq!(s.push("ok, ").text, "ok,");
    // A word of Cyrillic look-alikes that never ends: held, then fails closed.
    assert_eq!(s.push(&"\u{430}".repeat(10)).text, " ");
    assert_eq!(s.held_chars(), 10);
    assert!(s.blocked().is_none());
    assert_eq!(s.push("\u{430}").text, "");
    let b = s.blocked().unwrap();
    assert_eq!(b.action, HOLDBACK_ACTION);
    assert_eq!(b.reason, HOLDBACK_REASON);
    assert_eq!(s.finish().text, "");
}

#[test]
fn a_parked_session_releases_and_decides_as_one_that_never_parked() {
    let e = Arc::new(builtin_only());
    let text = "Hi jane.doe@exam ple.com, call 212-555-0187; SSN 123-45-6789 ok é 10.0.0.1";
    for size in [1, 3, 16] {
        let mut a = e.stream_owned(StreamOptions::default());
        let mut b = e.stream_owned(StreamOptions::default());
        for piece in byte_pieces(text, size) {
            b.park();
            assert_eq!(a.push(piece), b.push(piece), "{size}");
        }
        b.park();
        assert_eq!(a.finish(), b.finish());
        assert_eq!(a.blocked(), b.blocked());
        let (mut da, mut db) = (a.decision().unwrap(), b.decision().unwrap());
        da.latency_us = 0.0;
        db.latency_us = 0.0;
        assert_eq!(da, db);
    }
}

#[test]
fn push_many_releases_as_pushes_one_by_one_and_stops_at_a_block() {
    let e = builtin_only();
    let text = "Hi jane.doe@example.com, call 212-555-0187; SSN 123-45-6789 and more text after";
    let pieces = byte_pieces(text, 3);
    let mut one = e.stream(StreamOptions::default());
    let mut expected = Vec::new();
    for p in &pieces {
        expected.push(one.push(p));
        if one.blocked().is_some() {
            break;
        }
    }
    let blocked_at = expected.len() - 1;
    assert!(blocked_at + 1 < pieces.len());
    let mut many = e.stream(StreamOptions::default());
    let mut out = Releases::default();
    // In batches of 4, as a server pushes the pieces it cut.
    let mut at = 0;
    while at < pieces.len() && many.blocked().is_none() {
        let end = (at + 4).min(pieces.len());
        at += many.push_many(pieces[at..end].iter().copied(), &mut out);
    }
    assert_eq!(at, blocked_at + 1, "stops after the piece that blocks");
    let got: Vec<Released> = out
        .iter()
        .map(|(text, redacted)| Released {
            text: text.to_string(),
            redacted,
        })
        .collect();
    assert_eq!(got, expected[..=blocked_at]);
    assert_eq!(many.blocked(), one.blocked());
    // Once blocked, it judges what comes and releases nothing.
    let n = out.len();
    assert_eq!(many.push_many(["x", " y"], &mut out), 2);
    assert_eq!(out.get(n), Some(("", false)));
    assert_eq!(out.get(n + 1), Some(("", false)));
}

#[test]
fn a_push_many_call_that_spends_the_budget_releases_nothing() {
    let e = builtin_only();
    let mut s = e.stream(StreamOptions {
        max_session_ms: 1000,
        ..StreamOptions::default()
    });
    let mut out = Releases::default();
    assert_eq!(s.push_many(["one ", "two "], &mut out), 2);
    assert_eq!(
        out.iter().collect::<Vec<_>>(),
        [("one ", false), ("two ", false)]
    );
    s.core.extra_time = Duration::from_millis(1001);
    assert_eq!(s.push_many(["three ", "four "], &mut out), 2);
    assert_eq!(
        out.iter().collect::<Vec<_>>(),
        [("one ", false), ("two ", false), ("", false), ("", false)]
    );
    assert_eq!(s.blocked().unwrap().action, COST_ACTION);
}

/// A codon whose value is decided by a word after it (`context.after`)
/// streams incrementally: the session holds the value, and only it, until
/// the window's text (and one more code point) has arrived, then releases
/// it as it is or redacted; the end of input decides what still waits.
#[test]
fn a_context_after_window_holds_only_its_value() {
    let yaml = "schema_version: 2\npack_id: t.after.v1\nversion: 1.0.0\ncodons:\n  - {code: ACCT, codon_type: extract_pattern, params: {pattern: '\\b[0-9]{8}\\b'}, context: {words: [acct], before: 0, after: 8}, binds_to: has_acct, remedy_template: '[ACCT]'}\nhard_rules:\n  - {id: R, condition: state.has_acct, action: redact_acct, severity: warning}\n";
    let e = crate::compile_in_memory(yaml.as_bytes(), "t.yaml", crate::Entitlement::PolicyTest)
        .unwrap()
        .evaluator()
        .unwrap();
    assert!(e.native, "a context.after window streams incrementally");
    let mut s = e.stream(StreamOptions::default());
    assert_eq!(s.push("id 12345678").text, "id ");
    // Eight code points after the value are not enough: a word could still
    // end at the ninth and must not touch a word character after it.
    assert_eq!(s.push(" (acct) ").text, "");
    assert_eq!(s.push("x").text, "[ACCT] (acct) x");
    // No word in the window: the value is released as it is.
    assert_eq!(
        s.push(" 87654321 nothing here").text,
        " 87654321 nothing here"
    );
    // The end of input decides a value whose window is cut short.
    assert_eq!(s.push(" 11223344 acct").text, " ");
    assert_eq!(s.finish().text, "[ACCT] acct");
    let text = "id 12345678 (acct) x 87654321 nothing here 11223344 acct";
    let (d, whole) = (s.decision().unwrap(), e.evaluate(text));
    assert_eq!(
        whole.clean_text,
        "id [ACCT] (acct) x 87654321 nothing here [ACCT] acct"
    );
    assert_eq!(
        (d.action, d.receipt_hash),
        (whole.action, whole.receipt_hash)
    );
}
