//! One line of the decision log ([§19](docs/guides/auditing.md#s19)): what was decided, on which
//! route, under which pack and generation. It holds no payload, match, span
//! text or pattern; the payload enters only as its keyed HMAC, when a key
//! is configured. It never writes files.

use crate::engine::{Decision, Severity};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use zeroize::Zeroizing;

/// Shortest `decision_log.hmac_key_file` key, in bytes.
pub const MIN_HMAC_KEY_BYTES: usize = 16;
/// Longest `decision_log.hmac_key_file` key, in bytes.
pub const MAX_HMAC_KEY_BYTES: usize = 4096;

/// One decision, as its log line says it. Field order is the line's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// Position in the log, from 0, with no gap (the writer assigns it).
    pub seq: u64,
    /// When the decision was made (RFC 3339, UTC, microseconds).
    pub time: String,
    /// The request's `x-request-id`; `null` where a route has none.
    pub request_id: Option<String>,
    /// The route that decided: `/evaluate`, `/evaluate/batch`,
    /// `/v1/evaluate/stream`, `litellm`, `ext_authz`, `ext_proc`, ...
    pub route: String,
    /// The pack that decided.
    pub pack_id: String,
    /// Its version.
    pub pack_version: String,
    /// Hex SHA-256 of the `.hxpack` file (as [§17](docs/guides/signing.md#s17)).
    pub pack_sha256: String,
    /// The serving generation.
    pub generation: u64,
    /// The deciding action.
    pub action: String,
    /// `FATAL`, `WARNING` or `null` (permit).
    pub severity: Option<String>,
    /// The rules that fired, in trigger order.
    pub rule_ids: Vec<String>,
    /// Each trigger's match count, in the same order.
    pub match_counts: Vec<u64>,
    /// The decision's receipt.
    pub receipt_hash: String,
    /// Engine time in microseconds.
    pub latency_us: f64,
    /// Hex HMAC-SHA256 of the payload under the configured key; absent
    /// without a key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_hmac: Option<String>,
    /// `true` when the decision was made in monitor mode (answered as a
    /// permit); absent otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub monitored: bool,
}

impl Record {
    /// The line of `decision` (its `seq` still 0: the writer sets it).
    pub fn of(decision: &Decision<'_>, at: Decided<'_>, payload_hmac: Option<String>) -> Self {
        Self {
            seq: 0,
            time: at.time,
            request_id: at.request_id.map(str::to_string),
            route: at.route.to_string(),
            pack_id: decision.pack_id.to_string(),
            pack_version: decision.pack_version.to_string(),
            pack_sha256: at.pack_sha256.to_string(),
            generation: at.generation,
            action: decision.action.to_string(),
            severity: decision.severity.map(|s| s.as_str().to_string()),
            rule_ids: decision
                .triggers
                .iter()
                .map(|t| t.rule_id.to_string())
                .collect(),
            match_counts: decision
                .triggers
                .iter()
                .map(|t| t.match_count as u64)
                .collect(),
            receipt_hash: decision.receipt_hash.clone(),
            latency_us: decision.latency_us,
            payload_hmac,
            monitored: at.monitored,
        }
    }

    /// Whether the decision blocked (its line is flushed before the answer).
    pub fn is_fatal(&self) -> bool {
        self.severity.as_deref() == Some(Severity::Fatal.as_str())
    }
}

/// Where and when a decision was made: what a log line says beside the
/// decision itself.
#[derive(Debug, Clone)]
pub struct Decided<'a> {
    /// The route.
    pub route: &'a str,
    /// The request's id, if the route has one.
    pub request_id: Option<&'a str>,
    /// The serving generation.
    pub generation: u64,
    /// Hex SHA-256 of the deciding pack's file.
    pub pack_sha256: &'a str,
    /// RFC 3339 UTC time of the decision.
    pub time: String,
    /// Made in monitor mode.
    pub monitored: bool,
}

/// The current time as a log line writes it.
pub fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc();
    let micros = now.microsecond();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{micros:06}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    )
}

/// The key of `payload_hmac`, wiped from memory when dropped.
pub struct HmacKey(Zeroizing<Vec<u8>>);

impl std::fmt::Debug for HmacKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HmacKey(..)")
    }
}

impl HmacKey {
    /// A key from a key file's bytes (a trailing newline is not part of
    /// it); `Err` names what is wrong, never quoting the bytes.
    pub fn from_file_bytes(bytes: Zeroizing<Vec<u8>>) -> Result<Self, String> {
        let mut key = bytes;
        while key.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            key.pop();
        }
        if key.len() < MIN_HMAC_KEY_BYTES {
            return Err(format!(
                "the key has {} bytes; at least {MIN_HMAC_KEY_BYTES} are needed",
                key.len()
            ));
        }
        if key.len() > MAX_HMAC_KEY_BYTES {
            return Err(format!("the key is over {MAX_HMAC_KEY_BYTES} bytes"));
        }
        Ok(Self(key))
    }

    /// Hex HMAC-SHA256 of `payload` (a text, or a gateway's body).
    pub fn digest(&self, payload: &[u8]) -> Option<String> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).ok()?;
        mac.update(payload);
        Some(hex::encode(mac.finalize().into_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231_case_2_shape() {
        // RFC 4231 test case 2 has a 4-byte key (under our minimum), so the
        // check uses case 6's construction with a 20-byte key instead:
        // key 0x0b * 20, data "Hi There" (RFC 4231 test case 1).
        let key = HmacKey::from_file_bytes(Zeroizing::new(vec![0x0b; 20])).unwrap();
        assert_eq!(
            key.digest(b"Hi There").unwrap(),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
    }

    #[test]
    fn short_and_long_keys_are_refused_without_their_bytes() {
        let e = HmacKey::from_file_bytes(Zeroizing::new(b"secret\n".to_vec())).unwrap_err();
        assert_eq!(e, "the key has 6 bytes; at least 16 are needed");
        assert!(HmacKey::from_file_bytes(Zeroizing::new(vec![b'k'; 5000])).is_err());
        assert_eq!(
            format!(
                "{:?}",
                HmacKey::from_file_bytes(Zeroizing::new(vec![b'k'; 32])).unwrap()
            ),
            "HmacKey(..)"
        );
    }

    #[test]
    fn time_is_rfc3339_utc_with_microseconds() {
        let t = now_rfc3339();
        assert_eq!(t.len(), "2026-12-03T12:00:00.000000Z".len());
        assert!(
            time::OffsetDateTime::parse(&t, &time::format_description::well_known::Rfc3339).is_ok()
        );
    }
}
