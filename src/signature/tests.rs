use super::*;
use crate::container::seal_with_nonce;
use crate::crypto::ContentKey;
use ed25519_dalek::SigningKey;
use proptest::prelude::*;

fn pack(pack_id: &str) -> Vec<u8> {
    let key = ContentKey::from_bytes([7; 32]).pack_key();
    let plain = format!(r#"{{"pack_id":"{pack_id}"}}"#);
    seal_with_nonce(pack_id, "lic", &key, plain.as_bytes(), [1; 12]).unwrap()
}

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

fn signers() -> PackSigners {
    PackSigners::from_keys(
        [("ops".to_string(), key(1).verifying_key())],
        "test signers",
    )
}

fn at() -> OffsetDateTime {
    crate::license::parse_time("2026-12-01T00:00:00Z").unwrap()
}

fn signed(pack: &[u8], key_id: &str, seed: u8, sequence: u64) -> SignatureFile {
    let s = PackSignature::sign(pack, "p.hxpack", key_id, &key(seed), sequence, at()).unwrap();
    SignatureFile::Bytes(s.to_file_text().into_bytes())
}

fn reason(r: Result<PackSignature, PackError>) -> Option<SignatureFailure> {
    match r {
        Ok(_) => None,
        Err(PackError::Signature(reason, _)) => Some(reason),
        Err(e) => panic!("not a signature error: {e}"),
    }
}

/// The file with one field replaced by `value` (raw JSON).
fn with_field(sig: &SignatureFile, field: &str, value: Value) -> SignatureFile {
    let SignatureFile::Bytes(b) = sig else {
        panic!("no bytes")
    };
    let mut v: Value = serde_json::from_slice(b).unwrap();
    v[field] = value;
    SignatureFile::Bytes(serde_json::to_vec(&v).unwrap())
}

#[test]
fn the_file_is_canonical_json_signed_over_every_other_field() {
    let p = pack("acme.pii.v1");
    let SignatureFile::Bytes(b) = signed(&p, "ops", 1, 42) else {
        panic!()
    };
    let text = String::from_utf8(b).unwrap();
    let digest = sha256_hex(&p);
    let message = format!(
        r#"{{"format":"helixor.pack_signature.v1","key_id":"ops","pack_id":"acme.pii.v1","pack_sha256":"{digest}","sequence":42,"signed_at":"2026-12-01T00:00:00Z"}}"#
    );
    let sig = key(1).sign(message.as_bytes());
    assert_eq!(
        text,
        format!(
            r#"{{"format":"helixor.pack_signature.v1","key_id":"ops","pack_id":"acme.pii.v1","pack_sha256":"{digest}","sequence":42,"signature":"{}","signed_at":"2026-12-01T00:00:00Z"}}"#,
            B64.encode(sig.to_bytes())
        ) + "\n"
    );
    let ok = signers().verify(
        &p,
        "acme.pii.v1",
        &SignatureFile::Bytes(text.into_bytes()),
        "p",
    );
    assert_eq!(ok.unwrap().info(true).sequence, 42);
}

#[test]
fn every_check_names_what_failed_in_order() {
    let p = pack("acme.pii.v1");
    let good = signed(&p, "ops", 1, 7);
    let s = signers();
    let check = |sig: &SignatureFile| reason(s.verify(&p, "acme.pii.v1", sig, "p.hxpack"));
    assert_eq!(check(&good), None);
    assert_eq!(
        check(&SignatureFile::Absent),
        Some(SignatureFailure::Missing)
    );
    assert_eq!(
        check(&SignatureFile::Unreadable("over".into())),
        Some(SignatureFailure::Unparseable)
    );
    assert_eq!(
        check(&SignatureFile::Bytes(b"{}".to_vec())),
        Some(SignatureFailure::Unparseable)
    );
    // Every field changed: the signature covers each one.
    for (field, value) in [
        ("pack_id", json!("acme.other.v1")),
        ("pack_sha256", json!("0".repeat(64))),
        ("sequence", json!(8)),
        ("signed_at", json!("2030-01-01T00:00:00Z")),
    ] {
        assert_eq!(
            check(&with_field(&good, field, value)),
            Some(SignatureFailure::BadSignature),
            "{field}"
        );
    }
    assert_eq!(
        check(&with_field(&good, "key_id", json!("someone"))),
        Some(SignatureFailure::Untrusted)
    );
    assert_eq!(
        check(&with_field(
            &good,
            "format",
            json!("helixor.pack_signature.v2")
        )),
        Some(SignatureFailure::Unparseable)
    );
    let mut sig = B64
        .decode(
            serde_json::from_slice::<Value>(match &good {
                SignatureFile::Bytes(b) => b,
                _ => unreachable!(),
            })
            .unwrap()["signature"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
    sig[0] ^= 1;
    assert_eq!(
        check(&with_field(&good, "signature", json!(B64.encode(&sig)))),
        Some(SignatureFailure::BadSignature)
    );
    // A trusted key's valid signature, for another pack or other bytes.
    let other = pack("acme.other.v1");
    assert_eq!(
        check(&signed(&other, "ops", 1, 7)),
        Some(SignatureFailure::PackIdMismatch)
    );
    let mut changed = p.clone();
    let last = changed.len() - 1;
    changed[last] ^= 1;
    assert_eq!(
        reason(s.verify(&changed, "acme.pii.v1", &good, "p.hxpack")),
        Some(SignatureFailure::DigestMismatch)
    );
    // Signed by a key that is not a signer (a license issuer's, say).
    assert_eq!(
        check(&signed(&p, "ops", 2, 7)),
        Some(SignatureFailure::BadSignature)
    );
    assert_eq!(
        check(&signed(&p, "issuer", 2, 7)),
        Some(SignatureFailure::Untrusted)
    );
}

#[test]
fn a_strict_parser_refuses_extra_duplicate_and_oversized_input() {
    let p = pack("acme.pii.v1");
    let SignatureFile::Bytes(good) = signed(&p, "ops", 1, 7) else {
        panic!()
    };
    let text = String::from_utf8(good).unwrap();
    let extra = text.replacen('{', r#"{"verify":false,"#, 1);
    let dup = text.replacen('{', r#"{"sequence":1,"#, 1);
    let negative = text.replace("\"sequence\":7", "\"sequence\":-7");
    let padded = format!("{}{}", text.trim_end(), " ".repeat(64 * 1024));
    for (what, bytes) in [
        ("extra field", extra.into_bytes()),
        ("duplicate field", dup.into_bytes()),
        ("negative sequence", negative.into_bytes()),
        ("over 64 KiB", padded.into_bytes()),
        ("not JSON", b"\xff\xfe".to_vec()),
    ] {
        let e = PackSignature::parse(&bytes, "p.sig").unwrap_err();
        assert!(
            matches!(e, PackError::Signature(SignatureFailure::Unparseable, _)),
            "{what}: {e}"
        );
    }
    let e = PackSignature::parse(b"[]", "p.sig").unwrap_err();
    assert!(e.to_string().starts_with("p.sig: unparseable: "), "{e}");
}

#[test]
fn a_lower_sequence_is_a_rollback_an_equal_one_is_not() {
    let mut seen = Sequences::default();
    seen.record("a", 10);
    seen.record("a", 5);
    assert!(seen.check("a", 10, "p").is_ok());
    assert!(seen.check("a", 11, "p").is_ok());
    assert!(seen.check("b", 1, "p").is_ok());
    let e = seen.check("a", 9, "p.hxpack").unwrap_err();
    assert_eq!(
        e.to_string(),
        "p.hxpack.sig: rollback: sequence 9 is lower than 10, already loaded for pack `a`"
    );
}

#[test]
fn without_signers_a_signature_is_shown_unverified() {
    let p = pack("acme.pii.v1");
    let info = signed(&p, "ops", 1, 3).unverified_info().unwrap();
    assert_eq!(
        (info.signed_by.as_str(), info.sequence, info.verified),
        ("ops", 3, false)
    );
    assert_eq!(
        SignatureFile::Bytes(b"junk".to_vec()).unverified_info(),
        None
    );
    assert_eq!(
        info_json(Some(&info)),
        json!({"signed_by": "ops", "sequence": 3, "verified": false})
    );
    assert_eq!(info_json(None), Value::Null);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any one byte of the signature file or of the pack changed: refused.
    #[test]
    fn one_changed_byte_is_refused(at in any::<prop::sample::Index>(), in_pack: bool, bit in 0u8..8) {
        let p = pack("acme.pii.v1");
        let SignatureFile::Bytes(mut sig) = signed(&p, "ops", 1, 7) else { unreachable!() };
        let mut p2 = p.clone();
        if in_pack {
            let i = at.index(p2.len());
            p2[i] ^= 1 << bit;
        } else {
            // The trailing newline is whitespace either way.
            let i = at.index(sig.len() - 1);
            sig[i] ^= 1 << bit;
        }
        let r = signers().verify(&p2, "acme.pii.v1", &SignatureFile::Bytes(sig), "p");
        prop_assert!(r.is_err());
    }
}
