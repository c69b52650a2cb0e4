//! Signed packs ([§17](docs/guides/signing.md#s17)) through the real binary: `sign`, `compile
//! --sign-key`, and the tamper table (every field of a signature changed,
//! the pack changed, signatures swapped, a license issuer's key, a missing
//! or oversized file), each a `PackSignatureError` with exit 5 naming the
//! check, on `run` and `inspect`; with no signers, signatures are ignored.

use crate::support::cli::{args, fixture, Env, ISSUER};
use serde_json::{json, Value};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A sandbox with a pack signer `ops` (keys in `signer-keys/`, trusted
/// public key in `signers/`) and two packs compiled and signed by it.
struct Signed {
    env: Env,
    signer_key: PathBuf,
    signers: PathBuf,
    pii: PathBuf,
    ids: PathBuf,
}

fn setup() -> Signed {
    let env = Env::new();
    let keys = env.root().join("signer-keys");
    env.ok(args![
        "license", "keygen", "--key-id", "ops", "--out", &keys
    ]);
    let signers = env.root().join("signers");
    std::fs::create_dir_all(&signers).unwrap();
    std::fs::copy(keys.join("ops.pub"), signers.join("ops.pub")).unwrap();
    let signer_key = keys.join("ops.key");
    let pii = env.path("pii.hxpack");
    let mut a = env.compile_args(&fixture("regulatory_pii_guard.yaml"), &env.lic, &pii);
    a.extend(args!["--sign-key", &signer_key]);
    let out = env.ok(a);
    assert!(
        out.contains(&format!(
            "  signed: {}.sig by ops (sequence ",
            pii.display()
        )),
        "{out}"
    );
    let ids = env.pack("internal_ids.yaml");
    env.ok(args!["sign", &ids, "--key", &signer_key, "--sequence", "7"]);
    Signed {
        env,
        signer_key,
        signers,
        pii,
        ids,
    }
}

impl Signed {
    fn run_args(&self, pack: &Path) -> Vec<OsString> {
        let mut a = args!["run", "--pack", pack, "--text", "ticket 123-45-6789"];
        a.extend(self.env.lic_args(&self.env.lic));
        a.extend(args!["--pack-signers", &self.signers]);
        a
    }

    /// `run` with the signers fails with `PackSignatureError`, exit 5,
    /// naming `reason`; `inspect` with the signers too.
    fn refused(&self, pack: &Path, reason: &str) -> String {
        let f = self.env.fails(self.run_args(pack), "PackSignatureError", 5);
        assert!(
            f.message.contains(&format!(": {reason}: ")),
            "{}",
            f.message
        );
        self.env.fails(
            args!["inspect", pack, "--pack-signers", &self.signers],
            "PackSignatureError",
            5,
        );
        f.message
    }

    fn sig_json(&self, pack: &Path) -> Value {
        serde_json::from_slice(&std::fs::read(sig(pack)).unwrap()).unwrap()
    }
}

fn sig(pack: &Path) -> PathBuf {
    let mut s = pack.as_os_str().to_owned();
    s.push(".sig");
    PathBuf::from(s)
}

#[test]
fn a_signed_pack_loads_and_shows_who_signed_it() {
    let s = setup();
    let d = s.env.ok_json(s.run_args(&s.pii));
    assert_eq!(d["action"], "block_glba_ssn_leakage");
    let v = s.env.ok_json(args![
        "inspect",
        &s.ids,
        "--pack-signers",
        &s.signers,
        "--json"
    ]);
    assert_eq!(
        v["signature"],
        json!({"signed_by": "ops", "sequence": 7, "verified": true})
    );
    // Without signers: shown as it claims, unverified.
    let v = s.env.ok_json(args!["inspect", &s.ids, "--json"]);
    assert_eq!(
        v["signature"],
        json!({"signed_by": "ops", "sequence": 7, "verified": false})
    );
    let file = s.sig_json(&s.ids);
    let mut keys: Vec<&str> = file
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "format",
            "key_id",
            "pack_id",
            "pack_sha256",
            "sequence",
            "signature",
            "signed_at"
        ]
    );
    assert_eq!(file["format"], "helixor.pack_signature.v1");
    assert_eq!(file["pack_id"], "custom.internal_ids.v1");
    assert_eq!(
        file["pack_sha256"],
        crate::support::cli::sha256_hex(&std::fs::read(&s.ids).unwrap())
    );
    // The environment variable is a trust configuration too.
    let mut a = args!["run", "--pack", &s.ids, "--text", "x"];
    a.extend(s.env.lic_args(&s.env.lic));
    std::fs::remove_file(sig(&s.ids)).unwrap();
    let f = s.env.fails_with(
        &a,
        &[("HELIXOR_PACK_SIGNERS", s.signers.as_path())],
        None,
        "PackSignatureError",
        5,
    );
    assert!(f.message.contains(": missing: "), "{}", f.message);
}

#[test]
fn the_tamper_table() {
    let s = setup();
    let good = std::fs::read(sig(&s.ids)).unwrap();
    let restore = || std::fs::write(sig(&s.ids), &good).unwrap();
    // Every field of the signature changed.
    for (field, value, reason) in [
        ("format", json!("helixor.pack_signature.v2"), "unparseable"),
        ("pack_id", json!("custom.other.v1"), "bad_signature"),
        ("pack_sha256", json!("0".repeat(64)), "bad_signature"),
        ("sequence", json!(8), "bad_signature"),
        ("signed_at", json!("2026-01-01T00:00:00Z"), "bad_signature"),
        ("key_id", json!("someone-else"), "untrusted_key"),
        ("signature", json!("AAAA"), "unparseable"),
    ] {
        let mut v = s.sig_json(&s.ids);
        v[field] = value;
        std::fs::write(sig(&s.ids), serde_json::to_vec(&v).unwrap()).unwrap();
        s.refused(&s.ids, reason);
        restore();
    }
    // A valid signature's last byte changed (still 64 bytes of base64).
    let mut v = s.sig_json(&s.ids);
    let b64 = v["signature"].as_str().unwrap().to_string();
    let flipped = format!("{}{}", &b64[..2], if &b64[2..3] == "A" { "B" } else { "A" }) + &b64[3..];
    v["signature"] = json!(flipped);
    std::fs::write(sig(&s.ids), serde_json::to_vec(&v).unwrap()).unwrap();
    s.refused(&s.ids, "bad_signature");
    restore();

    // The pack changed by one byte (its last, in the ciphertext).
    let pack = std::fs::read(&s.ids).unwrap();
    let mut changed = pack.clone();
    *changed.last_mut().unwrap() ^= 1;
    std::fs::write(&s.ids, &changed).unwrap();
    let m = s.refused(&s.ids, "digest_mismatch");
    assert!(m.contains("pack's SHA-256 differs"), "{m}");
    std::fs::write(&s.ids, &pack).unwrap();

    // Signatures swapped between packs.
    let pii_sig = std::fs::read(sig(&s.pii)).unwrap();
    std::fs::write(sig(&s.ids), &pii_sig).unwrap();
    let m = s.refused(&s.ids, "pack_id_mismatch");
    assert!(
        m.contains("signs pack `compliance.regulatory_pii_guard.v1`, but the pack is `custom.internal_ids.v1`"),
        "{m}"
    );
    restore();

    // Signed by the license issuer: a separate trust root.
    s.env.ok(args!["sign", &s.ids, "--key", &s.env.key_file]);
    let m = s.refused(&s.ids, "untrusted_key");
    assert!(
        m.contains(&format!("key `{ISSUER}` is not a trusted pack signer")),
        "{m}"
    );

    // An old-looking signed_at is informational: a valid signature loads.
    let (key_id, key) = helixor::read_signing_key(&s.signer_key).unwrap();
    let old = helixor::PackSignature::sign(
        &std::fs::read(&s.ids).unwrap(),
        "ids.hxpack",
        &key_id,
        &key,
        1,
        time::macros::datetime!(2001-01-01 00:00 UTC),
    )
    .unwrap();
    std::fs::write(sig(&s.ids), old.to_file_text()).unwrap();
    assert_eq!(s.sig_json(&s.ids)["signed_at"], "2001-01-01T00:00:00Z");
    assert_eq!(
        s.env.ok_json(s.run_args(&s.ids))["action"],
        "block_glba_ssn_leakage"
    );
    restore();

    // Missing, unreadable, oversized.
    std::fs::remove_file(sig(&s.ids)).unwrap();
    s.refused(&s.ids, "missing");
    std::fs::write(sig(&s.ids), vec![b' '; 64 * 1024 + 1]).unwrap();
    let m = s.refused(&s.ids, "unparseable");
    assert!(m.contains("over the 65536-byte limit"), "{m}");
    std::fs::write(sig(&s.ids), b"not json").unwrap();
    s.refused(&s.ids, "unparseable");

    // With no signers configured, a broken signature is ignored (0.2.1).
    let mut a = args!["run", "--pack", &s.ids, "--text", "x"];
    a.extend(s.env.lic_args(&s.env.lic));
    assert_eq!(s.env.ok_json(a)["action"], "permit_clean_payload");
    let v = s.env.ok_json(args!["inspect", &s.ids, "--json"]);
    assert_eq!(v["signature"], Value::Null);
}

#[test]
fn the_manifest_of_a_signed_pack_is_sealed_at_its_signature() {
    let s = setup();
    let mut a = args![
        "manifest",
        "--pack",
        &s.ids,
        "--playbook",
        fixture("order_notes.yaml")
    ];
    a.extend(s.env.lic_args(&s.env.lic));
    let unsigned_trust = s.env.ok_json(a.clone());
    a.extend(args!["--pack-signers", &s.signers]);
    let m = s.env.ok_json(a);
    let signed_at = s.sig_json(&s.ids)["signed_at"].clone();
    assert_eq!(m["packs"][0]["is_sealed"], true);
    assert_eq!(m["packs"][0]["sealed_at"], signed_at);
    assert_eq!(m["packs"][1]["is_sealed"], false);
    assert_eq!(m["packs"][1]["sealed_at"], Value::Null);
    // Read without signers: sealed, but not at a verified time.
    assert_eq!(unsigned_trust["packs"][0]["is_sealed"], true);
    assert_eq!(unsigned_trust["packs"][0]["sealed_at"], Value::Null);
}

#[test]
fn bad_signing_input_fails_before_writing() {
    let env = Env::new();
    let pack = env.pack("internal_ids.yaml");
    let f = env.fails(
        args!["sign", &pack, "--key", env.root().join("nope.key")],
        "PackSignatureError",
        5,
    );
    assert!(f.message.contains("signing key file"), "{}", f.message);
    let junk = env.write("junk.hxpack", b"not a pack");
    env.fails(
        args!["sign", &junk, "--key", &env.key_file],
        "PackFormatError",
        5,
    );
    assert!(!sig(&junk).exists());
    assert!(!sig(&pack).exists());
}
