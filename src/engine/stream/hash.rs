//! The receipt's SHA-256 of a text that arrives in pieces ([`Hasher`]).
//! It keeps at most one block of pushed bytes, for the session's life only,
//! and must not be given anything but the text as pushed.

use sha2::{Digest, Sha256};

/// SHA-256 of a text that arrives in pieces: small pieces are gathered and
/// hashed a few kilobytes at a time (the hasher's own bookkeeping for each
/// 16-byte piece cost more than the hashing of its bytes).
#[derive(Clone, Default)]
pub(super) struct Hasher {
    sha: Sha256,
    pending: Vec<u8>,
}

/// [`Hasher`] hashes this many gathered bytes at once.
const HASH_BLOCK: usize = 4096;

impl Hasher {
    pub(super) fn update(&mut self, piece: &str) {
        let bytes = piece.as_bytes();
        if self.pending.len() + bytes.len() > HASH_BLOCK {
            self.sha.update(&self.pending);
            self.pending.clear();
        }
        if bytes.len() >= HASH_BLOCK {
            self.sha.update(bytes);
        } else {
            if self.pending.capacity() == 0 {
                self.pending.reserve_exact(HASH_BLOCK);
            }
            self.pending.extend_from_slice(bytes);
        }
    }

    /// The digest of everything so far.
    pub(super) fn digest(&self) -> [u8; 32] {
        let mut sha = self.sha.clone();
        sha.update(&self.pending);
        sha.finalize().into()
    }
}
