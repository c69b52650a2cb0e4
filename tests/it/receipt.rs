//! `receipt_hash` against the published `helixor.decision_receipt.v1` recipe
//! ([§6.4](docs/evaluation.md#s6-4)): constants computed with Python's `json.dumps(...,
//! sort_keys=True, separators=(",", ":"))`, and the recipe re-derived here
//! from its definition for ASCII and non-ASCII payloads.

use helixor::Evaluator;
use sha2::{Digest, Sha256};

fn evaluator() -> Evaluator {
    let yaml = "pack_id: custom.unicode.v1\nversion: \"1.0-β\"\nrules:\n  - {id: règle, type: regex, pattern: '\\brègle\\b', action: block}\n";
    crate::support::rules_evaluator("custom.unicode.v1", "1.0-β", yaml)
}

/// Python's default `json.dumps` string escaping (`ensure_ascii=True`).
fn py_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for u in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{u:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out + "\""
}

fn recipe(
    pack_id: &str,
    version: &str,
    action: &str,
    passed: bool,
    ids: &[&str],
    payload: &str,
) -> String {
    let ids: Vec<String> = ids.iter().map(|i| py_str(i)).collect();
    let json = format!(
        "{{\"action\":{},\"invariants_passed\":{passed},\"pack_id\":{},\"pack_version\":{},\"rule_ids\":[{}],\"schema\":\"helixor.decision_receipt.v1\",\"sha256_payload\":\"{}\"}}",
        py_str(action),
        py_str(pack_id),
        py_str(version),
        ids.join(","),
        hex::encode(Sha256::digest(payload.as_bytes()))
    );
    format!(
        "hx_proof_{}",
        &hex::encode(Sha256::digest(json.as_bytes()))[..24]
    )
}

#[test]
fn matches_python_constants() {
    let e = evaluator();
    let d = e.evaluate("Le mot clé règle 😀 et a@b.co");
    assert_eq!(d.action, "block_règle");
    assert_eq!(d.receipt_hash, "hx_proof_e2eab33d4d0ee826ded14999");
    let d = e.evaluate("日本語のテキスト");
    assert_eq!(d.receipt_hash, "hx_proof_c6db43f21bb691d45f637d48");
}

#[test]
fn matches_the_recipe_for_ascii_and_non_ascii_payloads() {
    let e = evaluator();
    for payload in [
        "plain ascii",
        "del \u{7f}",
        "",
        "règle here",
        "tab\tand \"quotes\" and \\",
        "😀 mail a@b.co",
        "e\u{301}\n",
    ] {
        let d = e.evaluate(payload);
        let ids: Vec<&str> = d.triggers.iter().map(|t| t.rule_id).collect();
        let want = recipe(
            "custom.unicode.v1",
            "1.0-β",
            d.action,
            d.invariants_passed,
            &ids,
            payload,
        );
        assert_eq!(d.receipt_hash, want, "payload {payload:?}");
    }
    // Same input, same pack version: same receipt; another payload: another.
    assert_eq!(e.evaluate("x").receipt_hash, e.evaluate("x").receipt_hash);
    assert_ne!(e.evaluate("x").receipt_hash, e.evaluate("y").receipt_hash);
}
