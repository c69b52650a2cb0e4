//! Property tests: seal/open round trips, tamper rejection, compile
//! determinism and engine invariants (issue 2).

use helixor::testing::{open, seal_with_nonce};
use helixor::{
    issue_license, keygen, Evaluator, IssueRequest, IssuerKeys, License, PackError, SealedPack,
    Severity, VerifiedLicense, BLOCKED_TEXT, PERMIT_ACTION,
};
use proptest::prelude::*;
use std::sync::OnceLock;

/// A content key (the pack key is derived from it).
fn key(seed: u8) -> [u8; 32] {
    [seed; 32]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn seal_open_round_trip(plain in proptest::collection::vec(any::<u8>(), 0..2048),
                            pack_id in "[a-z][a-z0-9_.]{0,40}", license_id in "\\PC{0,30}", nonce in any::<[u8; 12]>()) {
        let bytes = seal_with_nonce(&pack_id, &license_id, key(1), &plain, nonce).unwrap();
        let sealed = SealedPack::parse(&bytes, "p").unwrap();
        prop_assert_eq!(sealed.pack_id, pack_id.as_str());
        let opened = open(&sealed, key(1), &license_id, "p").unwrap();
        prop_assert_eq!(opened.as_slice(), plain.as_slice());
        prop_assert_eq!(open(&sealed, key(2), &license_id, "p").unwrap_err(), PackError::Unseal);
    }

    #[test]
    fn any_bit_flip_or_truncation_is_rejected(plain in proptest::collection::vec(any::<u8>(), 1..512),
                                              bit in any::<proptest::sample::Index>(), cut in any::<proptest::sample::Index>()) {
        let bytes = seal_with_nonce("custom.p.v1", "lic_1", key(3), &plain, [7; 12]).unwrap();
        let open = |b: &[u8]| -> Result<Vec<u8>, PackError> {
            let s = SealedPack::parse(b, "p")?;
            Ok(open(&s, key(3), "lic_1", "p")?.to_vec())
        };
        prop_assert!(open(&bytes).is_ok());
        let mut flipped = bytes.clone();
        let i = bit.index(bytes.len() * 8);
        flipped[i / 8] ^= 1 << (i % 8);
        prop_assert!(open(&flipped).is_err(), "bit {} accepted", i);
        let truncated = &bytes[..cut.index(bytes.len())];
        prop_assert!(open(truncated).is_err(), "truncation to {} accepted", truncated.len());
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    license: VerifiedLicense,
}

fn license() -> &'static VerifiedLicense {
    static F: OnceLock<Fixture> = OnceLock::new();
    let fixture = F.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let kg = keygen("prop", dir.path()).unwrap();
        let now = time::OffsetDateTime::now_utc();
        let out = dir.path().join("l.hxlic");
        issue_license(&IssueRequest {
            issuer_key: kg.secret_path,
            license_id: "lic_prop".into(),
            licensee: "Prop".into(),
            tier: "DEVELOPER".into(),
            packs: vec![],
            solvers: vec!["*".into()],
            features: vec!["custom_playbook_compilation".into()],
            not_before: now - time::Duration::days(1),
            not_after: now + time::Duration::days(1),
            issued_at: now,
            out: out.clone(),
        })
        .unwrap();
        let keys = IssuerKeys::from_path(dir.path()).unwrap();
        let license = License::load(&out, &keys, now).unwrap();
        Fixture { _dir: dir, license }
    });
    &fixture.license
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn compiling_twice_gives_the_same_digest(desc in "\\PC{0,40}", n in 0u32..1000, id in "[a-z][a-z0-9_]{0,12}") {
        let yaml = format!(
            "pack_id: custom.p.v1\nversion: {n}\nmetadata: {{note: {}}}\nrules:\n  - {{id: {id}, type: regex, pattern: 'X{n}Y', action: redact}}\n",
            serde_json::to_string(&desc).unwrap()
        );
        let a = helixor::compile_playbook(yaml.as_bytes(), "p", license()).unwrap();
        let b = helixor::compile_playbook(yaml.as_bytes(), "p", license()).unwrap();
        prop_assert_eq!(&a.sha256, &b.sha256);
        prop_assert_eq!(a.plaintext.as_slice(), b.plaintext.as_slice());
        prop_assert_eq!(a.sha256, hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&*a.plaintext)));
    }
}

fn engine() -> &'static Evaluator {
    static E: OnceLock<Evaluator> = OnceLock::new();
    E.get_or_init(|| {
        let yaml = "pack_id: p\nversion: 1\nrules:\n  - {id: ticket, type: regex, pattern: '\\bTCK-\\d{6}\\b', action: redact}\n  - {id: word, type: regex, pattern: '(?i)\\bsecret\\w*', action: block}\n  - {id: gift, type: luhn_checksum, pattern: '\\d{4}-\\d{4}', action: redact}\n";
        crate::support::rules_evaluator("p", "1", yaml)
    })
}

fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("hello".to_string()),
        Just("Überprüfung".to_string()),
        Just("会議".to_string()),
        Just("👩‍👩‍👧".to_string()),
        Just("e\u{301}".to_string()),
        "[a-z]{1,8}@[a-z]{1,6}\\.(com|org|co\\.uk)",
        "\\(?[2-9][0-9]{2}\\)?[-. ][0-9]{3}[-. ][0-9]{4}",
        "[1-9][0-9]?\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}",
        "[1-5][0-9]{2}-[1-9][0-9]-[1-9][0-9]{3}",
        "4111 1111 1111 1111",
        "TCK-[0-9]{6}",
        "(MRN|rx):? ?[0-9]{6,10}",
        "\\PC{0,6}",
    ]
}

fn separator() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just(" "),
        Just(", "),
        Just("\n"),
        Just(" — "),
        Just(" 。"),
        Just("\t")
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn evaluation_never_panics_on_any_text(text in "\\PC{0,200}", raw in any::<String>()) {
        engine().evaluate(&text);
        engine().evaluate(&raw);
    }

    #[test]
    fn decisions_are_consistent_and_clean_text_hides_every_match(
        parts in proptest::collection::vec((token(), separator()), 0..12)
    ) {
        let text: String = parts.iter().map(|(t, s)| format!("{t}{s}")).collect();
        let d = engine().evaluate(&text);
        let chars: Vec<char> = text.chars().collect();
        prop_assert!(d.receipt_hash.starts_with("hx_proof_") && d.receipt_hash.len() == 9 + 24);
        prop_assert_eq!(d.invariants_passed, d.action == PERMIT_ACTION);
        prop_assert_eq!(d.triggers.is_empty(), d.action == PERMIT_ACTION);
        let first_fatal = d.triggers.iter().find(|t| t.severity == Severity::Fatal);
        match first_fatal {
            Some(t) => {
                prop_assert_eq!(d.action, t.action);
                prop_assert_eq!(d.clean_text.as_str(), BLOCKED_TEXT);
            }
            None if !d.triggers.is_empty() => prop_assert_eq!(d.action, d.triggers[0].action),
            None => prop_assert_eq!(d.clean_text.as_str(), text.as_str()),
        }
        for t in &d.triggers {
            prop_assert_eq!(t.match_count, t.spans.len());
            prop_assert!(t.spans.windows(2).all(|w| w[0] <= w[1]), "spans unsorted");
            for [s, e] in &t.spans {
                prop_assert!(s < e && *e <= chars.len());
                let value: String = chars[*s..*e].iter().collect();
                if d.action != PERMIT_ACTION {
                    prop_assert!(!d.clean_text.contains(&value), "clean_text keeps a matched value");
                }
            }
        }
    }
}
