//! Pack signatures ([§17](docs/guides/signing.md#s17)): the detached `<pack>.sig` beside a sealed
//! pack, signed with Ed25519 over canonical JSON, and the trust that decides
//! whether loading checks it. Reads no pack plaintext; never logs a key.
//!
//! Whether a signature is verified depends only on the trust configuration
//! ([`PackSigners`]), never on what a signature file says (OPA's
//! GHSA-g2pf-6v5v-qcc8): with signers configured every pack needs a valid
//! signature; with none, signature files are only read for display.

use crate::canonical;
pub use crate::container::SignatureFailure;
use crate::container::{PackError, SealedPack};
use crate::crypto::sha256_hex;
use crate::license::{format_time, IssuerKeys};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ed25519_dalek::{Signature, Signer, SigningKey};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use time::OffsetDateTime;

/// The `format` of a pack signature.
pub const SIGNATURE_FORMAT: &str = "helixor.pack_signature.v1";
/// A signature file over this many bytes is refused before it is parsed.
pub const MAX_SIGNATURE_BYTES: u64 = 64 * 1024;
/// Environment variable naming the trusted pack signers.
pub const PACK_SIGNERS_ENV: &str = "HELIXOR_PACK_SIGNERS";
/// Extension appended to a pack's file name for its signature.
pub const SIGNATURE_SUFFIX: &str = ".sig";

/// A parsed pack signature (not yet verified).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackSignature {
    /// The pack id it signs.
    pub pack_id: String,
    /// Hex SHA-256 of the whole `.hxpack` file.
    pub pack_sha256: String,
    /// Monotonic deployment counter (default: Unix time at signing).
    pub sequence: u64,
    /// When it was signed (informational: never checked against a clock).
    pub signed_at: String,
    /// The signer's key id.
    pub key_id: String,
    /// The Ed25519 signature.
    signature: [u8; 64],
}

/// The file's fields, exactly: unknown and duplicate fields are refused.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    format: String,
    pack_id: String,
    pack_sha256: String,
    sequence: u64,
    signed_at: String,
    key_id: String,
    signature: String,
}

impl PackSignature {
    /// Parses a signature file's bytes; `name` names it in messages.
    pub fn parse(bytes: &[u8], name: &str) -> Result<Self, PackError> {
        let bad = |detail: String| failure(SignatureFailure::Unparseable, name, detail);
        if bytes.len() as u64 > MAX_SIGNATURE_BYTES {
            return Err(bad(format!(
                "over the {MAX_SIGNATURE_BYTES}-byte limit of a signature file"
            )));
        }
        let w: Wire = serde_json::from_slice(bytes)
            .map_err(|e| bad(format!("not a pack signature object: {e}")))?;
        if w.format != SIGNATURE_FORMAT {
            return Err(bad(format!("field `format` is not `{SIGNATURE_FORMAT}`")));
        }
        if w.pack_id.is_empty() {
            return Err(bad("field `pack_id` is empty".into()));
        }
        if w.pack_sha256.len() != 64
            || !w
                .pack_sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(bad(
                "field `pack_sha256` is not 64 lowercase hex digits".into()
            ));
        }
        if crate::license::parse_time(&w.signed_at).is_none() {
            return Err(bad("field `signed_at` is not an RFC 3339 time".into()));
        }
        if w.key_id.is_empty() {
            return Err(bad("field `key_id` is empty".into()));
        }
        let signature = B64
            .decode(w.signature.trim())
            .ok()
            .and_then(|b| <[u8; 64]>::try_from(b.as_slice()).ok())
            .ok_or_else(|| bad("field `signature` is not base64 of 64 bytes".into()))?;
        Ok(Self {
            pack_id: w.pack_id,
            pack_sha256: w.pack_sha256,
            sequence: w.sequence,
            signed_at: w.signed_at,
            key_id: w.key_id,
            signature,
        })
    }

    /// Every field but `signature`, as JSON.
    fn signed_fields(&self) -> serde_json::Map<String, Value> {
        let mut m = serde_json::Map::new();
        m.insert("format".into(), json!(SIGNATURE_FORMAT));
        m.insert("pack_id".into(), json!(self.pack_id));
        m.insert("pack_sha256".into(), json!(self.pack_sha256));
        m.insert("sequence".into(), json!(self.sequence));
        m.insert("signed_at".into(), json!(self.signed_at));
        m.insert("key_id".into(), json!(self.key_id));
        m
    }

    /// The signed message: the canonical JSON ([§1](docs/formats.md#s1)) of every field but
    /// `signature`.
    fn message(&self) -> String {
        // Strings and an integer only: always representable.
        canonical::to_string(&Value::Object(self.signed_fields())).unwrap_or_default()
    }

    /// The file's text: canonical JSON of every field, and a newline.
    pub fn to_file_text(&self) -> String {
        let mut m = self.signed_fields();
        m.insert("signature".into(), json!(B64.encode(self.signature)));
        let mut s = canonical::to_string(&Value::Object(m)).unwrap_or_default();
        s.push('\n');
        s
    }

    /// Signs `pack` (the whole `.hxpack` file) as `key_id`: its pack id is
    /// read from the header, which must parse.
    pub fn sign(
        pack: &[u8],
        name: &str,
        key_id: &str,
        key: &SigningKey,
        sequence: u64,
        now: OffsetDateTime,
    ) -> Result<Self, PackError> {
        let sealed = SealedPack::parse(pack, name)?;
        let mut sig = Self {
            pack_id: sealed.pack_id.to_string(),
            pack_sha256: sha256_hex(pack),
            sequence,
            signed_at: format_time(now),
            key_id: key_id.to_string(),
            signature: [0; 64],
        };
        sig.signature = key.sign(sig.message().as_bytes()).to_bytes();
        Ok(sig)
    }

    /// What `inspect`, `/v1/packs` and `/v1/status` show of it.
    pub fn info(&self, verified: bool) -> SignatureInfo {
        SignatureInfo {
            signed_by: self.key_id.clone(),
            sequence: self.sequence,
            signed_at: self.signed_at.clone(),
            verified,
        }
    }
}

/// Who signed a loaded pack, as shown by `inspect` and the status routes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SignatureInfo {
    /// The signer's key id.
    pub signed_by: String,
    /// The signature's sequence.
    pub sequence: u64,
    /// When it was signed (informational; the manifest's `sealed_at`).
    #[serde(skip)]
    pub signed_at: String,
    /// Whether it was verified against the configured signers (false when
    /// none are configured: the file was only read).
    pub verified: bool,
}

/// A `PackSignatureError` of `reason` about the signature file `name`.
fn failure(reason: SignatureFailure, name: &str, detail: String) -> PackError {
    PackError::Signature(reason, format!("{name}: {reason}: {detail}"))
}

/// The signature file of the pack at `pack`: `<pack>.sig`.
pub fn signature_path(pack: &Path) -> PathBuf {
    let mut s = pack.as_os_str().to_owned();
    s.push(SIGNATURE_SUFFIX);
    PathBuf::from(s)
}

/// A signature file as read: absent, its bytes, or why it could not be
/// read (a reason only verification reports; with no signers it is shown
/// as no signature).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignatureFile {
    /// No `<pack>.sig`.
    Absent,
    /// Its bytes (at most [`MAX_SIGNATURE_BYTES`]).
    Bytes(Vec<u8>),
    /// It exists and cannot be read, or is too large.
    Unreadable(String),
}

impl SignatureFile {
    /// Reads the signature of the pack at `pack`, refusing one over
    /// [`MAX_SIGNATURE_BYTES`] before reading it, and anything but a
    /// regular file without blocking on it.
    pub fn read_for(pack: &Path) -> Self {
        let path = signature_path(pack);
        match crate::capped::read_regular_file_capped(&path, MAX_SIGNATURE_BYTES) {
            Ok(b) => Self::Bytes(b),
            Err(crate::capped::CappedError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                Self::Absent
            }
            Err(crate::capped::CappedError::Io(e)) => Self::Unreadable(format!("cannot read: {e}")),
            Err(crate::capped::CappedError::TooLarge) => Self::Unreadable(format!(
                "over the {MAX_SIGNATURE_BYTES}-byte limit of a signature file"
            )),
        }
    }

    /// The bytes' SHA-256 (for a deployment's fingerprint): a changed,
    /// added or removed signature is a new deployment.
    pub fn digest(&self) -> Option<[u8; 32]> {
        match self {
            Self::Absent => None,
            Self::Bytes(b) => Some(crate::crypto::sha256(b)),
            Self::Unreadable(m) => Some(crate::crypto::sha256(m.as_bytes())),
        }
    }

    /// What is shown with no signers configured: the signature as it
    /// claims to be, unverified, or nothing when it does not parse.
    pub fn unverified_info(&self) -> Option<SignatureInfo> {
        match self {
            Self::Bytes(b) => PackSignature::parse(b, "").ok().map(|s| s.info(false)),
            _ => None,
        }
    }
}

/// The trusted pack signers ([§17](docs/guides/signing.md#s17)): public keys in the
/// [§2](docs/formats.md#s2) issuer-keys format, a trust root separate from the license
/// issuers.
#[derive(Debug, Clone)]
pub struct PackSigners(IssuerKeys);

impl PackSigners {
    /// Keys given directly (tests and embedding).
    pub fn from_keys(
        keys: impl IntoIterator<Item = (String, ed25519_dalek::VerifyingKey)>,
        source: &str,
    ) -> Self {
        Self(IssuerKeys::from_keys(keys, source))
    }

    /// Reads the signers at `path` (a JSON file or a directory of
    /// `<key_id>.pub`); a broken or empty set is an error naming it, so a
    /// typo never turns verification off.
    pub fn from_path(path: &Path) -> Result<Self, PackError> {
        let keys = IssuerKeys::from_path(path).map_err(|e| {
            failure(
                SignatureFailure::Untrusted,
                &format!("pack signers {}", path.display()),
                e.to_string().replace("issuer key", "signer key"),
            )
        })?;
        if keys.is_empty() {
            return Err(failure(
                SignatureFailure::Untrusted,
                &format!("pack signers {}", path.display()),
                "no signer key in it".into(),
            ));
        }
        Ok(Self(keys))
    }

    /// The configured signers: `explicit` (flag or configuration), else
    /// `$HELIXOR_PACK_SIGNERS`; `None` when neither is set (signatures
    /// are then not checked).
    pub fn resolve(explicit: Option<&Path>) -> Result<Option<Self>, PackError> {
        if let Some(p) = explicit {
            return Self::from_path(p).map(Some);
        }
        match std::env::var_os(PACK_SIGNERS_ENV).filter(|v| !v.is_empty()) {
            Some(p) => Self::from_path(Path::new(&p)).map(Some),
            None => Ok(None),
        }
    }

    /// Where the signers came from.
    pub fn source(&self) -> &str {
        self.0.source()
    }

    /// The key ids and public keys, sorted (for a deployment's fingerprint).
    pub fn keys(&self) -> impl Iterator<Item = (&str, &[u8; 32])> {
        self.0
            .key_ids()
            .filter_map(|id| self.0.get(id).map(|k| (id, k.as_bytes())))
    }

    /// Checks the signature of the pack `pack` (the whole file, whose
    /// header names `pack_id`) read from `name`: present, parseable, by a
    /// trusted key, valid, and for this pack id and these bytes, in that
    /// order ([§17](docs/guides/signing.md#s17)). Rollback is the caller's check: it knows what is loaded.
    pub fn verify(
        &self,
        pack: &[u8],
        pack_id: &str,
        sig: &SignatureFile,
        name: &str,
    ) -> Result<PackSignature, PackError> {
        let sig_name = format!("{name}{SIGNATURE_SUFFIX}");
        let bytes = match sig {
            SignatureFile::Absent => {
                return Err(failure(
                    SignatureFailure::Missing,
                    name,
                    format!(
                        "no signature file {sig_name}, and pack signers are configured ({})",
                        self.source()
                    ),
                ))
            }
            SignatureFile::Unreadable(m) => {
                return Err(failure(SignatureFailure::Unparseable, &sig_name, m.clone()))
            }
            SignatureFile::Bytes(b) => b,
        };
        let s = PackSignature::parse(bytes, &sig_name)?;
        let Some(key) = self.0.get(&s.key_id) else {
            return Err(failure(
                SignatureFailure::Untrusted,
                &sig_name,
                format!(
                    "key `{}` is not a trusted pack signer ({})",
                    s.key_id,
                    self.source()
                ),
            ));
        };
        key.verify_strict(s.message().as_bytes(), &Signature::from_bytes(&s.signature))
            .map_err(|_| {
                failure(
                    SignatureFailure::BadSignature,
                    &sig_name,
                    format!("the signature by `{}` does not verify", s.key_id),
                )
            })?;
        if s.pack_id != pack_id {
            return Err(failure(
                SignatureFailure::PackIdMismatch,
                &sig_name,
                format!("signs pack `{}`, but the pack is `{pack_id}`", s.pack_id),
            ));
        }
        if s.pack_sha256 != sha256_hex(pack) {
            return Err(failure(
                SignatureFailure::DigestMismatch,
                &sig_name,
                "signs other bytes: the pack's SHA-256 differs from `pack_sha256`".into(),
            ));
        }
        Ok(s)
    }
}

/// The highest signature sequence loaded for each pack id in this process:
/// a lower one is a rollback ([§17](docs/guides/signing.md#s17)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sequences(BTreeMap<String, u64>);

impl Sequences {
    /// Refuses `sequence` for `pack_id` (read from `name`) when a higher
    /// one was loaded before.
    pub fn check(&self, pack_id: &str, sequence: u64, name: &str) -> Result<(), PackError> {
        match self.0.get(pack_id) {
            Some(&loaded) if sequence < loaded => Err(failure(
                SignatureFailure::Rollback,
                &format!("{name}{SIGNATURE_SUFFIX}"),
                format!(
                    "sequence {sequence} is lower than {loaded}, already loaded for pack `{pack_id}`"
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Records a loaded sequence (keeps the highest).
    pub fn record(&mut self, pack_id: &str, sequence: u64) {
        let e = self.0.entry(pack_id.to_string()).or_insert(sequence);
        *e = (*e).max(sequence);
    }
}

/// Reads a signing key file (`license keygen`'s `.key`).
pub fn read_signing_key(path: &Path) -> Result<(String, SigningKey), PackError> {
    crate::license::read_signing_key(path).map_err(|e| {
        PackError::Signature(
            SignatureFailure::Untrusted,
            e.to_string().replace("issuer key file", "signing key file"),
        )
    })
}

/// The JSON of a pack's signature info for the status routes and
/// `inspect --json`: `null` when there is none.
pub fn info_json(info: Option<&SignatureInfo>) -> Value {
    info.and_then(|i| serde_json::to_value(i).ok())
        .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests;
