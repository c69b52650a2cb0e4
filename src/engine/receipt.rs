//! The `helixor.decision_receipt.v1` fingerprint ([§6.4](docs/evaluation.md#s6-4)), byte-compatible
//! with Python's `json.dumps(..., sort_keys=True, separators=(",", ":"))`.

use crate::canonical::{write_str, Escaping};
use crate::crypto::sha256;

/// The receipt schema name.
pub const RECEIPT_SCHEMA: &str = "helixor.decision_receipt.v1";

/// `hx_proof_` + the first 24 hex digits of SHA-256 over the receipt JSON,
/// from the payload's SHA-256: a stream session hashes its text as it
/// arrives and no longer holds it whole when it decides.
pub(crate) fn receipt_hash_of<'a>(
    pack_id: &str,
    pack_version: &str,
    action: &str,
    invariants_passed: bool,
    rule_ids: impl Iterator<Item = &'a str>,
    payload_sha256: &[u8; 32],
) -> String {
    let mut payload_hex = [0u8; 64];
    // Encoding 32 bytes into 64 always fits; the hex crate's `encode`
    // collects chars one by one, which shows in the per-request profile.
    let _ = hex::encode_to_slice(payload_sha256, &mut payload_hex);
    // Keys written in sorted order by hand: the object's shape is fixed.
    let mut json = String::with_capacity(256);
    json.push_str("{\"action\":");
    write_str(&mut json, action, Escaping::Ascii);
    json.push_str(",\"invariants_passed\":");
    json.push_str(if invariants_passed { "true" } else { "false" });
    json.push_str(",\"pack_id\":");
    write_str(&mut json, pack_id, Escaping::Ascii);
    json.push_str(",\"pack_version\":");
    write_str(&mut json, pack_version, Escaping::Ascii);
    json.push_str(",\"rule_ids\":[");
    for (i, id) in rule_ids.enumerate() {
        if i > 0 {
            json.push(',');
        }
        write_str(&mut json, id, Escaping::Ascii);
    }
    json.push_str("],\"schema\":\"");
    json.push_str(RECEIPT_SCHEMA);
    json.push_str("\",\"sha256_payload\":\"");
    json.push_str(std::str::from_utf8(&payload_hex).unwrap_or_default());
    json.push_str("\"}");
    let mut digest = [0u8; 24];
    let _ = hex::encode_to_slice(&sha256(json.as_bytes())[..12], &mut digest);
    let mut out = String::with_capacity(9 + 24);
    out.push_str("hx_proof_");
    out.push_str(std::str::from_utf8(&digest).unwrap_or_default());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_python_recipe() {
        // python3 -c 'import json,hashlib; p="Release PROJ-ZEUS-9 today";
        //   d={"schema":"helixor.decision_receipt.v1","pack_id":"custom.internal_code_guard.v1",
        //   "pack_version":"1.0.0","action":"block_project_code","invariants_passed":False,
        //   "rule_ids":["project_code"],"sha256_payload":hashlib.sha256(p.encode()).hexdigest()};
        //   print("hx_proof_"+hashlib.sha256(json.dumps(d,sort_keys=True,separators=(",",":")).encode()).hexdigest()[:24])'
        let got = receipt_hash_of(
            "custom.internal_code_guard.v1",
            "1.0.0",
            "block_project_code",
            false,
            ["project_code"].into_iter(),
            &crate::crypto::sha256(b"Release PROJ-ZEUS-9 today"),
        );
        assert_eq!(got, "hx_proof_11d7a1d30558198a38b9c520");
    }
}
