//! The `.hxpack` container ([§3](docs/formats.md#s3)): byte layout, sealing, opening and the
//! atomic write. Knows keys and bytes, never licenses' rules or playbooks;
//! the plaintext exists only in zeroizing memory and is never written.

use crate::crypto::{sha256, PackKey};
use crate::error::{ErrorName, Named};
use std::path::Path;
use zeroize::Zeroizing;

/// The four magic bytes at offset 0.
pub const MAGIC: &[u8; 4] = b"HXPK";
/// The only format version this runtime reads and writes.
pub const FORMAT_VERSION: u16 = 1;
/// Smallest file the loader considers ([§5](docs/formats.md#s5) step 2).
pub const MIN_PACK_BYTES: usize = 56;
/// Largest pack file read ([§3](docs/formats.md#s3)).
pub const MAX_PACK_BYTES: u64 = 16 * 1024 * 1024;
const NONCE_LEN: usize = 12;
const DIGEST_LEN: usize = 32;
const TAG_LEN: usize = 16;
/// The exact message of every decryption failure ([§4.3](docs/errors.md#s4-3)).
pub const UNSEAL_MESSAGE: &str =
    "Decryption failed: content key mismatch or corrupted pack envelope";

/// Pack-layer errors: the `Pack*` names of [§4.3](docs/errors.md#s4-3).
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum PackError {
    /// Not a well-formed container.
    #[error("{0}")]
    Format(String),
    /// Authentication failed (wrong license or altered bytes).
    #[error("{UNSEAL_MESSAGE}")]
    Unseal,
    /// The plaintext does not match the header or is not a playbook.
    #[error("{0}")]
    Integrity(String),
    /// No such pack loaded, or none at all.
    #[error("{0}")]
    NotFound(String),
    /// A pack file that cannot be read for want of a resource (file
    /// descriptors, memory): the machine's problem, not the pack's.
    #[error("{0}")]
    Io(String, #[source] Option<crate::error::Cause>),
    /// [`PackError::Unseal`] of a named file, at a reload (the CLI keeps the
    /// exact message of [§4.3](docs/errors.md#s4-3)).
    #[error("{0}: {UNSEAL_MESSAGE}")]
    UnsealIn(String),
    /// A pack signature check failed ([§17](docs/guides/signing.md#s17)): which, and the message.
    #[error("{1}")]
    Signature(SignatureFailure, String),
}

/// Which check of a signature failed: the `reason` label of
/// `helixor_pack_signature_failures_total` and the start of the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SignatureFailure {
    /// Signers are configured and the pack has no `.sig`.
    Missing,
    /// The `.sig` cannot be read, is too large, or is not a signature.
    Unparseable,
    /// The signature names a key that is not a trusted pack signer.
    Untrusted,
    /// The Ed25519 signature does not verify.
    BadSignature,
    /// The signature is for another pack id.
    PackIdMismatch,
    /// The signature is for other bytes (`pack_sha256`).
    DigestMismatch,
    /// A lower `sequence` than the one already loaded for the pack id.
    Rollback,
}

impl SignatureFailure {
    /// Every reason, in check order.
    pub const ALL: [Self; 7] = [
        Self::Missing,
        Self::Unparseable,
        Self::Untrusted,
        Self::BadSignature,
        Self::PackIdMismatch,
        Self::DigestMismatch,
        Self::Rollback,
    ];

    /// The metric label and message prefix.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Unparseable => "unparseable",
            Self::Untrusted => "untrusted_key",
            Self::BadSignature => "bad_signature",
            Self::PackIdMismatch => "pack_id_mismatch",
            Self::DigestMismatch => "digest_mismatch",
            Self::Rollback => "rollback",
        }
    }
}

impl std::fmt::Display for SignatureFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

crate::error::io_constructor!(PackError);

impl Named for PackError {
    fn name(&self) -> ErrorName {
        match self {
            Self::Format(_) => ErrorName::PackFormatError,
            Self::Unseal => ErrorName::PackUnsealError,
            Self::Integrity(_) => ErrorName::PackIntegrityError,
            Self::NotFound(_) => ErrorName::PackNotFoundError,
            Self::Io(..) => ErrorName::IoError,
            Self::UnsealIn(_) => ErrorName::PackUnsealError,
            Self::Signature(..) => ErrorName::PackSignatureError,
        }
    }
}

/// A parsed, not yet decrypted, pack.
#[derive(Debug, Clone, Copy)]
pub struct SealedPack<'a> {
    /// The clear-text pack id of the header.
    pub pack_id: &'a str,
    /// The header's format version (always 1 once parsed).
    pub format_version: u16,
    /// The AES-GCM nonce.
    pub nonce: [u8; NONCE_LEN],
    /// SHA-256 of the plaintext, as the header claims it.
    pub sha256: [u8; DIGEST_LEN],
    /// Ciphertext with its tag.
    pub ciphertext: &'a [u8],
}

impl<'a> SealedPack<'a> {
    /// Parses the header of `bytes` ([§5](docs/formats.md#s5) step 2); `name` is used in messages.
    pub fn parse(bytes: &'a [u8], name: &str) -> Result<Self, PackError> {
        let fmt = |detail: String| PackError::Format(format!("{name}: {detail}"));
        if bytes.len() as u64 > MAX_PACK_BYTES {
            return Err(fmt(format!(
                "pack is {} bytes, over the {MAX_PACK_BYTES}-byte limit",
                bytes.len()
            )));
        }
        if bytes.len() < MIN_PACK_BYTES {
            return Err(fmt(format!(
                "pack is {} bytes, under the {MIN_PACK_BYTES}-byte minimum",
                bytes.len()
            )));
        }
        if &bytes[0..4] != MAGIC {
            return Err(fmt("bad magic: not an HXPK pack".to_string()));
        }
        let version = u16::from_be_bytes([bytes[4], bytes[5]]);
        if version != FORMAT_VERSION {
            return Err(fmt(format!("unsupported format version {version} (this runtime reads version {FORMAT_VERSION})")));
        }
        let id_len = usize::from(u16::from_be_bytes([bytes[6], bytes[7]]));
        let ct_start = 8 + id_len + NONCE_LEN + DIGEST_LEN;
        if ct_start + TAG_LEN > bytes.len() {
            return Err(fmt(format!(
                "truncated header: pack id length {id_len} leaves no room for nonce, digest and tag in {} bytes",
                bytes.len()
            )));
        }
        if id_len == 0 {
            return Err(fmt("header pack_id is empty".to_string()));
        }
        let pack_id = std::str::from_utf8(&bytes[8..8 + id_len])
            .map_err(|_| fmt("header pack_id is not valid UTF-8".to_string()))?;
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&bytes[8 + id_len..8 + id_len + NONCE_LEN]);
        let mut digest = [0u8; DIGEST_LEN];
        digest.copy_from_slice(&bytes[8 + id_len + NONCE_LEN..ct_start]);
        Ok(Self {
            pack_id,
            format_version: version,
            nonce,
            sha256: digest,
            ciphertext: &bytes[ct_start..],
        })
    }

    /// Decrypts with `key` and `<pack_id>:<license_id>` as associated data,
    /// then checks the plaintext digest ([§5](docs/formats.md#s5) steps 4 and 5).
    pub(crate) fn open(
        &self,
        key: &PackKey,
        license_id: &str,
        name: &str,
    ) -> Result<Zeroizing<Vec<u8>>, PackError> {
        let aad = associated_data(self.pack_id, license_id);
        let plain = key
            .open(&self.nonce, aad.as_bytes(), self.ciphertext)
            .map_err(|_| PackError::Unseal)?;
        if sha256(&plain) != self.sha256 {
            return Err(PackError::Integrity(format!(
                "{name}: SHA-256 of the decrypted playbook differs from the header digest"
            )));
        }
        Ok(plain)
    }
}

/// `"<pack_id>:<license_id>"`, the associated data of [§3](docs/formats.md#s3).
pub(crate) fn associated_data(pack_id: &str, license_id: &str) -> String {
    format!("{pack_id}:{license_id}")
}

/// Builds the bytes of a pack around `plaintext` with a fresh random nonce.
pub(crate) fn seal(
    pack_id: &str,
    license_id: &str,
    key: &PackKey,
    plaintext: &[u8],
) -> Result<Vec<u8>, PackError> {
    let nonce = crate::crypto::random_bytes::<NONCE_LEN>()
        .map_err(|e| PackError::Format(format!("no randomness for the pack nonce: {e}")))?;
    seal_with_nonce(pack_id, license_id, key, plaintext, nonce)
}

/// As [`seal`], with a given nonce: a nonce must never be used twice under
/// one key, so only [`seal`] and the fixed-key fixtures of `fuzzing` and
/// `testing` call it.
pub(crate) fn seal_with_nonce(
    pack_id: &str,
    license_id: &str,
    key: &PackKey,
    plaintext: &[u8],
    nonce: [u8; NONCE_LEN],
) -> Result<Vec<u8>, PackError> {
    let id_len = u16::try_from(pack_id.len()).map_err(|_| {
        PackError::Format(format!(
            "pack_id is {} bytes, over the 65535-byte header limit",
            pack_id.len()
        ))
    })?;
    let aad = associated_data(pack_id, license_id);
    let ct = key
        .seal(&nonce, aad.as_bytes(), plaintext)
        .map_err(|_| PackError::Unseal)?;
    let mut out = Vec::with_capacity(8 + pack_id.len() + NONCE_LEN + DIGEST_LEN + ct.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_be_bytes());
    out.extend_from_slice(&id_len.to_be_bytes());
    out.extend_from_slice(pack_id.as_bytes());
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&sha256(plaintext));
    out.extend_from_slice(&ct);
    if out.len() as u64 > MAX_PACK_BYTES {
        return Err(PackError::Format(format!(
            "sealed pack would be {} bytes, over the {MAX_PACK_BYTES}-byte limit",
            out.len()
        )));
    }
    Ok(out)
}

/// Reads a pack file, refusing one over [`MAX_PACK_BYTES`] before reading it whole.
pub(crate) fn read_pack_file(path: &Path) -> Result<Vec<u8>, PackError> {
    let name = path.display();
    crate::capped::read_regular_file_capped(path, MAX_PACK_BYTES).map_err(|e| match e {
        crate::capped::CappedError::Io(e) if crate::capped::is_exhaustion(&e) => {
            PackError::io(format_args!("{name}: cannot read pack"), e)
        }
        crate::capped::CappedError::Io(e) => {
            PackError::Format(format!("{name}: cannot read pack: {e}"))
        }
        crate::capped::CappedError::TooLarge => PackError::Format(format!(
            "{name}: pack is over the {MAX_PACK_BYTES}-byte limit"
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::ContentKey;

    fn key() -> PackKey {
        ContentKey::from_bytes([9u8; 32]).pack_key()
    }

    #[test]
    fn layout_is_exact() {
        let bytes = seal_with_nonce("p.x.v1", "lic", &key(), b"{}", [3u8; 12]).unwrap();
        assert_eq!(&bytes[0..4], b"HXPK");
        assert_eq!(&bytes[4..6], &[0, 1]);
        assert_eq!(&bytes[6..8], &[0, 6]);
        assert_eq!(&bytes[8..14], b"p.x.v1");
        assert_eq!(&bytes[14..26], &[3u8; 12]);
        assert_eq!(&bytes[26..58], &sha256(b"{}"));
        assert_eq!(bytes.len(), 58 + 2 + 16);
        let p = SealedPack::parse(&bytes, "t").unwrap();
        assert_eq!(p.open(&key(), "lic", "t").unwrap().as_slice(), b"{}");
        assert_eq!(p.open(&key(), "other", "t").unwrap_err(), PackError::Unseal);
    }

    #[test]
    fn header_errors() {
        let good = seal_with_nonce("p", "lic", &key(), b"{\"pack_id\":\"p\"}", [0u8; 12]).unwrap();
        assert!(
            matches!(SealedPack::parse(&good[..55], "t"), Err(PackError::Format(m)) if m.contains("under the 56-byte"))
        );
        let mut bad = good.clone();
        bad[0] = b'X';
        assert!(
            matches!(SealedPack::parse(&bad, "t"), Err(PackError::Format(m)) if m.contains("magic"))
        );
        let mut bad = good.clone();
        bad[5] = 2;
        assert!(
            matches!(SealedPack::parse(&bad, "t"), Err(PackError::Format(m)) if m.contains("version 2"))
        );
        let mut bad = good.clone();
        bad[6] = 0xff;
        assert!(
            matches!(SealedPack::parse(&bad, "t"), Err(PackError::Format(m)) if m.contains("truncated"))
        );
    }
}
