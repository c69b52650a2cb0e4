//! The `helixor.decision_receipt.v1` fingerprint ([§6.4](docs/evaluation.md#s6-4)), byte-compatible
//! with Python's `json.dumps(..., sort_keys=True, separators=(",", ":"))`.

use super::decision::PERMIT_ACTION;
use crate::canonical::{write_str, Escaping};
use sha2::{Digest, Sha256};

/// The receipt schema name.
pub const RECEIPT_SCHEMA: &str = "helixor.decision_receipt.v1";

/// [`Receipts::hash_of`] for a pack built for one receipt (tests).
#[cfg(test)]
pub(crate) fn receipt_hash_of<'a>(
    pack_id: &str,
    pack_version: &str,
    action: &str,
    invariants_passed: bool,
    rule_ids: impl Iterator<Item = &'a str> + Clone,
    payload_sha256: &[u8; 32],
) -> String {
    Receipts::new(pack_id, pack_version).hash_of(
        action,
        invariants_passed,
        rule_ids,
        payload_sha256,
    )
}

/// The receipts of one pack: the JSON between its action and its rule ids
/// (pack id and version, written once), and the SHA-256 states after the
/// whole prefix of a clean payload's receipt and of each rule's trigger
/// alone, so that such a receipt (most decisions' are) hashes only its
/// payload's digest. Built at load.
#[derive(Clone)]
pub(crate) struct Receipts {
    /// `,"pack_id":…,"pack_version":…,"rule_ids":[`.
    middle: String,
    /// The state after `{"action":"permit_clean_payload",…"sha256_payload":"`.
    clean: Sha256,
    /// For each rule (id and action, sorted by id), the state after the
    /// prefix of a decision with that rule's trigger alone, the common
    /// case of a payload that holds something.
    single: Vec<(String, String, Sha256)>,
}

impl Receipts {
    /// The receipts of pack `pack_id` at `pack_version`, whose rules
    /// (custom rules and hard rules) have `rules`' ids and actions.
    pub(crate) fn with_rules<'a>(
        pack_id: &str,
        pack_version: &str,
        rules: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> Self {
        let mut receipts = Self::new(pack_id, pack_version);
        let mut single: Vec<(String, String, Sha256)> = rules
            .map(|(id, action)| {
                let mut h = Sha256::new();
                Self::prefix(&mut h, &receipts.middle, action, false, std::iter::once(id));
                (id.to_string(), action.to_string(), h)
            })
            .collect();
        // A state depends only on its id and action, both checked at the
        // lookup: any entry found is the right one.
        single.sort_by(|a, b| a.0.cmp(&b.0));
        receipts.single = single;
        receipts
    }

    /// The receipts of pack `pack_id` at `pack_version`.
    pub(crate) fn new(pack_id: &str, pack_version: &str) -> Self {
        let mut middle = String::with_capacity(64 + pack_id.len() + pack_version.len());
        middle.push_str(",\"pack_id\":");
        write_str(&mut middle, pack_id, Escaping::Ascii);
        middle.push_str(",\"pack_version\":");
        write_str(&mut middle, pack_version, Escaping::Ascii);
        middle.push_str(",\"rule_ids\":[");
        let mut clean = Sha256::new();
        Self::prefix(&mut clean, &middle, PERMIT_ACTION, true, std::iter::empty());
        Self {
            middle,
            clean,
            single: Vec::new(),
        }
    }

    /// Feeds the receipt JSON up to the payload's digest: keys in sorted
    /// order, written by hand (the object's shape is fixed).
    fn prefix<'a>(
        h: &mut Sha256,
        middle: &str,
        action: &str,
        invariants_passed: bool,
        rule_ids: impl Iterator<Item = &'a str>,
    ) {
        h.update(b"{\"action\":");
        feed_str(h, action);
        h.update(if invariants_passed {
            &b",\"invariants_passed\":true"[..]
        } else {
            &b",\"invariants_passed\":false"[..]
        });
        h.update(middle.as_bytes());
        for (i, id) in rule_ids.enumerate() {
            if i > 0 {
                h.update(b",");
            }
            feed_str(h, id);
        }
        h.update(b"],\"schema\":\"");
        h.update(RECEIPT_SCHEMA.as_bytes());
        h.update(b"\",\"sha256_payload\":\"");
    }

    /// `hx_proof_` + the first 24 hex digits of SHA-256 over the receipt
    /// JSON of a decision, from the payload's SHA-256: a stream session
    /// hashes its text as it arrives and no longer holds it whole when it
    /// decides.
    pub(crate) fn hash_of<'a>(
        &self,
        action: &str,
        invariants_passed: bool,
        rule_ids: impl Iterator<Item = &'a str> + Clone,
        payload_sha256: &[u8; 32],
    ) -> String {
        let mut first_two = rule_ids.clone();
        let kept = match (first_two.next(), first_two.next()) {
            (None, _) if invariants_passed && action == PERMIT_ACTION => Some(&self.clean),
            (Some(id), None) if !invariants_passed => self
                .single
                .binary_search_by(|r| r.0.as_str().cmp(id))
                .ok()
                .and_then(|k| self.single.get(k))
                .filter(|r| r.1 == action)
                .map(|r| &r.2),
            _ => None,
        };
        let mut h = match kept {
            Some(state) => state.clone(),
            None => {
                let mut h = Sha256::new();
                Self::prefix(&mut h, &self.middle, action, invariants_passed, rule_ids);
                h
            }
        };
        let mut payload_hex = [0u8; 64];
        // Encoding 32 bytes into 64 always fits; the hex crate's `encode`
        // collects chars one by one, which shows in the per-request profile.
        let _ = hex::encode_to_slice(payload_sha256, &mut payload_hex);
        h.update(payload_hex);
        h.update(b"\"}");
        let digest: [u8; 32] = h.finalize().into();
        let mut hex = [0u8; 24];
        let _ = hex::encode_to_slice(&digest[..12], &mut hex);
        let mut out = String::with_capacity(9 + 24);
        out.push_str("hx_proof_");
        out.push_str(std::str::from_utf8(&hex).unwrap_or_default());
        out
    }
}

/// Feeds `s` as a JSON string (Python's ASCII escaping): as it is when
/// nothing in it needs escaping, the common case.
fn feed_str(h: &mut Sha256, s: &str) {
    if s.bytes()
        .all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\')
    {
        h.update(b"\"");
        h.update(s.as_bytes());
        h.update(b"\"");
    } else {
        let mut escaped = String::with_capacity(s.len() + 8);
        write_str(&mut escaped, s, Escaping::Ascii);
        h.update(escaped.as_bytes());
    }
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

    #[test]
    fn a_clean_receipt_from_the_kept_state_matches_python() {
        // As above, with Python's recipe for each case. The first is the
        // kept state's case (permit, invariants passed, no rule ids); the
        // next two differ from it in one field each, so they must not
        // take the kept state; the last escapes every string.
        let sha = crate::crypto::sha256;
        let r = Receipts::new("custom.internal_code_guard.v1", "1.0.0");
        let clean = r.hash_of(PERMIT_ACTION, true, std::iter::empty(), &sha(b"hello"));
        assert_eq!(clean, "hx_proof_095eac9133718f4f1a948b48");
        // The kept state is not used up by a decision.
        let again = r.hash_of(PERMIT_ACTION, true, std::iter::empty(), &sha(b"hello"));
        assert_eq!(again, clean);
        let r = Receipts::new("catalog.pii_eu.v1", "1.0.0");
        let failed = r.hash_of(PERMIT_ACTION, false, std::iter::empty(), &sha(b"hello"));
        assert_eq!(failed, "hx_proof_a571592f5b09a626d89794e5");
        let with_id = r.hash_of(PERMIT_ACTION, true, ["a"].into_iter(), &sha(b"hello"));
        assert_eq!(with_id, "hx_proof_3240371585ffb32fd5c7e3dd");
        // A rule's trigger alone takes its kept state; with another
        // action, another rule or a second id, the prefix is hashed.
        let r = Receipts::with_rules(
            "custom.internal_code_guard.v1",
            "1.0.0",
            // The id twice, with two actions: the lookup checks both.
            [
                ("project_code", "block_project_code"),
                ("other", "redact"),
                ("project_code", "redact"),
            ]
            .into_iter(),
        );
        let plain = Receipts::new("custom.internal_code_guard.v1", "1.0.0");
        let payload = sha(b"Release PROJ-ZEUS-9 today");
        let hash = |r: &Receipts, action, ids: &[&str]| {
            r.hash_of(action, false, ids.iter().copied(), &payload)
        };
        let one = |action, ids: &[&str]| hash(&r, action, ids);
        let want = |action, ids: &[&str]| hash(&plain, action, ids);
        assert_eq!(
            one("block_project_code", &["project_code"]),
            "hx_proof_11d7a1d30558198a38b9c520"
        );
        for (action, ids) in [
            ("redact", &["project_code"][..]),
            ("block_project_code", &["other"][..]),
            ("block_project_code", &["project_code", "other"][..]),
            ("block_project_code", &["unknown"][..]),
        ] {
            assert_eq!(one(action, ids), want(action, ids), "{action} {ids:?}");
        }
        assert_ne!(
            one("redact", &["project_code"]),
            one("block_project_code", &["project_code"])
        );
        let got = receipt_hash_of(
            "x.\u{e9}\"q\\\\.v1",
            "2.0.0-rc\u{2028}",
            "block_\u{e9}",
            false,
            ["RULE-1", "r\"2\u{e9}"].into_iter(),
            &sha("caf\u{e9}".as_bytes()),
        );
        assert_eq!(got, "hx_proof_c90a6b5e0ec2659e72f7848e");
    }
}
