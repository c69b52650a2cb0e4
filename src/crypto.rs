//! Cryptographic primitives: SHA-256, the HKDF pack key, AES-256-GCM and
//! randomness. Keys live in zeroizing buffers; nothing here reads files or
//! knows about licenses. Crate-internal: a key reaches the outside only as
//! a license's content key, and tests reach these through `testing`.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use hkdf::Hkdf;
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

/// HKDF `info` for the pack key ([§3](docs/formats.md#s3)).
pub(crate) const PACK_KEY_INFO: &[u8] = b"helixor.hxpack.v1";

/// SHA-256 of `data`.
pub(crate) fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// Lower-case hex SHA-256 of `data`.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    hex::encode(sha256(data))
}

/// A license's 32-byte content key; wiped from memory when dropped and
/// never printed (its `Debug` is redacted).
#[derive(Clone)]
pub(crate) struct ContentKey(Zeroizing<[u8; 32]>);

impl ContentKey {
    /// Wraps raw key bytes.
    pub(crate) fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(Zeroizing::new(bytes))
    }

    /// A fresh random key.
    pub(crate) fn generate() -> Result<Self, getrandom::Error> {
        let mut k = Zeroizing::new([0u8; 32]);
        getrandom::getrandom(k.as_mut())?;
        Ok(Self(k))
    }

    /// The raw bytes (for the license issuer only).
    pub(crate) fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The AES-256 key for packs: HKDF-SHA256, no salt, info `helixor.hxpack.v1`.
    pub(crate) fn pack_key(&self) -> PackKey {
        let hk = Hkdf::<Sha256>::new(None, self.0.as_ref());
        let mut okm = Zeroizing::new([0u8; 32]);
        // 32 bytes is far below HKDF-SHA256's 8160-byte maximum, so expand cannot fail.
        let _ = hk.expand(PACK_KEY_INFO, okm.as_mut());
        PackKey(okm)
    }
}

impl std::fmt::Debug for ContentKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ContentKey(<redacted>)")
    }
}

/// The derived AES-256-GCM key of a license's packs; zeroized on drop.
pub(crate) struct PackKey(Zeroizing<[u8; 32]>);

impl std::fmt::Debug for PackKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PackKey(<redacted>)")
    }
}

/// AEAD failure: wrong key, wrong associated data or altered bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AeadError;

impl PackKey {
    fn cipher(&self) -> Aes256Gcm {
        Aes256Gcm::new(self.0.as_ref().into())
    }

    /// Encrypts `plaintext`; returns the ciphertext with its 16-byte tag appended.
    pub(crate) fn seal(
        &self,
        nonce: &[u8; 12],
        aad: &[u8],
        plaintext: &[u8],
    ) -> Result<Vec<u8>, AeadError> {
        self.cipher()
            .encrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: plaintext,
                    aad,
                },
            )
            .map_err(|_| AeadError)
    }

    /// Decrypts and authenticates `ciphertext` (tag at its end) into a zeroizing buffer.
    pub(crate) fn open(
        &self,
        nonce: &[u8; 12],
        aad: &[u8],
        ciphertext: &[u8],
    ) -> Result<Zeroizing<Vec<u8>>, AeadError> {
        self.cipher()
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad,
                },
            )
            .map(Zeroizing::new)
            .map_err(|_| AeadError)
    }
}

/// `N` bytes from the operating system's random source.
pub(crate) fn random_bytes<const N: usize>() -> Result<[u8; N], getrandom::Error> {
    let mut b = [0u8; N];
    getrandom::getrandom(&mut b)?;
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 5869 test case 3 (SHA-256, no salt, no info): the HKDF we use
    /// derives what the RFC says, with the salt left out as our key does.
    #[test]
    fn hkdf_gives_rfc5869_test_case_3() {
        let hk = Hkdf::<Sha256>::new(None, &[0x0b; 22]);
        let mut okm = [0u8; 42];
        hk.expand(&[], &mut okm).unwrap();
        assert_eq!(
            hex::encode(okm),
            "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"
        );
    }

    /// The pack key of [§3](docs/formats.md#s3), checked against an independent HKDF
    /// (Python's hmac, RFC 5869 by hand) for one content key.
    #[test]
    fn pack_key_is_hkdf_sha256_with_the_spec_info() {
        let k = ContentKey::from_bytes([7u8; 32]);
        assert_eq!(
            hex::encode(k.pack_key().0.as_ref()),
            "f29609e329f5ed6dfd620f68f916b4124237d6f76c836e6ccf094c871ae21f7c"
        );
    }

    #[test]
    fn seal_open_round_trip_and_aad_binding() {
        let key = ContentKey::from_bytes([1u8; 32]).pack_key();
        let nonce = [2u8; 12];
        let ct = key.seal(&nonce, b"a:b", b"hello").unwrap();
        assert_eq!(ct.len(), 5 + 16);
        assert_eq!(key.open(&nonce, b"a:b", &ct).unwrap().as_slice(), b"hello");
        assert_eq!(key.open(&nonce, b"a:c", &ct), Err(AeadError));
    }

    #[test]
    fn debug_never_shows_key() {
        let k = ContentKey::from_bytes([0xAB; 32]);
        assert_eq!(format!("{k:?}"), "ContentKey(<redacted>)");
    }
}
