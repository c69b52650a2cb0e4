//! C2SP signed notes (c2sp.org/signed-note) with Ed25519 keys, and the texts
//! they carry for a transparency log: checkpoints (c2sp.org/tlog-checkpoint)
//! and inclusion proofs (c2sp.org/tlog-proof@v1); signing and parsing only,
//! never files or the network.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

use super::merkle::Hash;

/// The largest signed note [`NoteVerifier::open`] reads; a bigger one is
/// refused before any parsing.
pub const MAX_NOTE_BYTES: usize = 64 * 1024;

/// Go's note.Open stops at this many signature lines, so that a note cannot
/// make a verifier parse without end.
const MAX_SIGNATURES: usize = 100;

/// Em dash (U+2014) and space: the start of every signature line.
const SIGNATURE_PREFIX: &str = "\u{2014} ";

/// The signature type byte of Ed25519 in key ids.
const ED25519_TYPE: u8 = 0x01;

/// The first line of a tlog proof.
const PROOF_HEADER: &str = "c2sp.org/tlog-proof@v1";

/// A tree of at most 2^64 leaves has an audit path of at most 64 hashes.
const MAX_PROOF_HASHES: usize = 64;

/// The largest tlog proof [`TlogProof::parse`] reads: a full-size note and
/// room for the other lines, extra data included.
const MAX_PROOF_BYTES: usize = 2 * MAX_NOTE_BYTES;

/// Why a note, a checkpoint or a proof could not be signed, opened or parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteError {
    /// A key name that would not survive a signature line.
    #[error("the key name {0:?} is empty or contains a space, a '+' or a control character")]
    InvalidKeyName(String),
    /// A public key of small order, under which forged signatures verify.
    #[error("the public key of {0} is of small order")]
    WeakKey(String),
    /// An empty text to sign.
    #[error("the note text is empty")]
    EmptyText,
    /// A text to sign whose last line has no newline.
    #[error("the note text does not end with a newline")]
    TextUnterminated,
    /// A text to sign with an empty line, which would be read as the end of
    /// the text.
    #[error("the note text contains a blank line")]
    TextBlankLine,
    /// A text to sign with a control character other than newline.
    #[error("the note text contains a control character other than newline")]
    TextControlCharacter,
    /// A text whose signed note would be refused by [`NoteVerifier::open`].
    #[error("the signed note would be {size} bytes, over the limit of {limit} bytes", limit = MAX_NOTE_BYTES)]
    SignedTooLarge {
        /// The size of the signed note.
        size: usize,
    },
    /// A note over [`MAX_NOTE_BYTES`].
    #[error("the note is {size} bytes, over the limit of {limit} bytes", limit = MAX_NOTE_BYTES)]
    TooLarge {
        /// The size of the note.
        size: usize,
    },
    /// A note with a control character other than newline.
    #[error("the note contains a control character other than newline")]
    ControlCharacter,
    /// A note without the blank line that ends its text.
    #[error("the note has no blank line before its signatures")]
    NoSignatureBlock,
    /// A note with nothing after its blank line, or whose last signature
    /// line has no newline.
    #[error("the note's signature lines are missing or do not end with a newline")]
    SignaturesUnterminated,
    /// A signature line (counted from 1 after the blank line) that is not an
    /// em dash, a space, a key name, a space and the base64 of a key id and a
    /// signature.
    #[error("signature line {0} is malformed")]
    MalformedSignature(usize),
    /// A note with more than 100 signature lines.
    #[error("the note has more than {limit} signature lines", limit = MAX_SIGNATURES)]
    TooManySignatures,
    /// A signature line by the verifier's key that does not verify.
    #[error("signature line {line} by {name} does not verify")]
    InvalidSignature {
        /// The signature line, counted from 1 after the blank line.
        line: usize,
        /// The key name.
        name: String,
    },
    /// A well-formed note with no signature by the verifier's key.
    #[error("the note has no signature by {0}")]
    NoSignature(String),
    /// A checkpoint whose last line has no newline.
    #[error("the checkpoint does not end with a newline")]
    CheckpointUnterminated,
    /// A checkpoint without origin, tree size and root hash lines.
    #[error("the checkpoint has fewer than three lines")]
    CheckpointTooShort,
    /// A checkpoint with an empty first line.
    #[error("the checkpoint's origin is empty")]
    CheckpointOrigin,
    /// A checkpoint whose second line is not a decimal `u64` without leading
    /// zeros.
    #[error("the checkpoint's tree size is not a decimal number")]
    CheckpointSize,
    /// A checkpoint whose third line is not the base64 of 32 bytes.
    #[error("the checkpoint's root hash is not the base64 of 32 bytes")]
    CheckpointRoot,
    /// A checkpoint with an empty extension line (its line number).
    #[error("checkpoint line {0} is an empty extension line")]
    CheckpointExtension(usize),
    /// A tlog proof over its size limit.
    #[error("the proof is {size} bytes, over the limit of {limit} bytes", limit = MAX_PROOF_BYTES)]
    ProofTooLarge {
        /// The size of the proof.
        size: usize,
    },
    /// A tlog proof whose first line is not `c2sp.org/tlog-proof@v1`.
    #[error("the proof does not start with the line {PROOF_HEADER}")]
    ProofHeader,
    /// A tlog proof whose `extra` line is not base64.
    #[error("the proof's extra data is not base64")]
    ProofExtra,
    /// A tlog proof without an `index` line holding a decimal `u64` without
    /// leading zeros.
    #[error("the proof's index line is missing or not a decimal number")]
    ProofIndex,
    /// A tlog proof hash line (its line number) that is not the base64 of 32
    /// bytes.
    #[error("proof line {0} is not the base64 of a 32-byte hash")]
    ProofHash(usize),
    /// A tlog proof with more hashes than any tree has levels.
    #[error("the proof has more than {limit} hashes", limit = MAX_PROOF_HASHES)]
    ProofTooManyHashes,
    /// A tlog proof without a blank line and a checkpoint after its hashes.
    #[error("the proof has no checkpoint after a blank line")]
    ProofNoCheckpoint,
}

/// The key id of an Ed25519 key: SHA-256(name || 0x0A || 0x01 || public)[..4].
pub fn key_id(name: &str, public: &[u8; 32]) -> [u8; 4] {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([b'\n', ED25519_TYPE]);
    h.update(public);
    let digest: [u8; 32] = h.finalize().into();
    [digest[0], digest[1], digest[2], digest[3]]
}

/// Whether `name` can be a key name: non-empty, without Unicode spaces or
/// `+` (the spec), nor control characters (a note may not hold them).
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name
            .chars()
            .any(|c| c.is_whitespace() || c == '+' || c < ' ')
}

/// Signs note texts with a named Ed25519 key.
pub struct NoteSigner {
    name: String,
    key: SigningKey,
    id: [u8; 4],
}

impl std::fmt::Debug for NoteSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NoteSigner")
            .field("name", &self.name)
            .field("id", &hex::encode(self.id))
            .finish_non_exhaustive()
    }
}

impl NoteSigner {
    /// A signer named `name`; fails when the name cannot be a key name.
    pub fn new(name: &str, key: SigningKey) -> Result<Self, NoteError> {
        if !valid_name(name) {
            return Err(NoteError::InvalidKeyName(name.to_owned()));
        }
        let id = key_id(name, key.verifying_key().as_bytes());
        Ok(Self {
            name: name.to_owned(),
            key,
            id,
        })
    }

    /// The key name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The verifier of this signer's signatures.
    pub fn verifier(&self) -> NoteVerifier {
        NoteVerifier {
            name: self.name.clone(),
            key: self.key.verifying_key(),
            id: self.id,
        }
    }

    /// The signed note of `text`: the text, a blank line and one signature
    /// line, `— <name> <base64(key id || signature)>`.
    ///
    /// The text must be non-empty, end with a newline and have no blank line
    /// and no control character other than newline, so that
    /// [`NoteVerifier::open`] gives it back unchanged.
    pub fn sign(&self, text: &str) -> Result<String, NoteError> {
        if text.is_empty() {
            return Err(NoteError::EmptyText);
        }
        if !text.ends_with('\n') {
            return Err(NoteError::TextUnterminated);
        }
        if text.contains("\n\n") {
            return Err(NoteError::TextBlankLine);
        }
        if has_control_character(text) {
            return Err(NoteError::TextControlCharacter);
        }
        let signature = self.key.sign(text.as_bytes());
        let mut blob = Vec::with_capacity(4 + Signature::BYTE_SIZE);
        blob.extend_from_slice(&self.id);
        blob.extend_from_slice(&signature.to_bytes());
        let note = format!(
            "{text}\n{SIGNATURE_PREFIX}{} {}\n",
            self.name,
            STANDARD.encode(blob)
        );
        if note.len() > MAX_NOTE_BYTES {
            return Err(NoteError::SignedTooLarge { size: note.len() });
        }
        Ok(note)
    }
}

/// Any ASCII control character but newline; the bytes of a multi-byte UTF-8
/// character are all 0x80 or above, so a byte scan is a character scan.
fn has_control_character(s: &str) -> bool {
    s.bytes().any(|b| b < 0x20 && b != b'\n')
}

/// Checks the signature of one named Ed25519 key on signed notes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteVerifier {
    name: String,
    key: VerifyingKey,
    id: [u8; 4],
}

impl NoteVerifier {
    /// A verifier of `name`'s signatures; fails when the name cannot be a key
    /// name or the key is of small order.
    pub fn new(name: &str, key: VerifyingKey) -> Result<Self, NoteError> {
        if !valid_name(name) {
            return Err(NoteError::InvalidKeyName(name.to_owned()));
        }
        if key.is_weak() {
            return Err(NoteError::WeakKey(name.to_owned()));
        }
        Ok(Self {
            name: name.to_owned(),
            id: key_id(name, key.as_bytes()),
            key,
        })
    }

    /// The key name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The text of `note` once it carries a valid signature by this key.
    ///
    /// As Go's `note.Open`: the text ends at the last blank line; every
    /// signature line must be well formed, and there may be at most 100;
    /// signatures by other keys (another name or key id) are ignored. Unlike
    /// Go, which checks only the first, every signature line by this key must
    /// verify, and verification is strict Ed25519 (no small-order points).
    pub fn open(&self, note: &str) -> Result<String, NoteError> {
        if note.len() > MAX_NOTE_BYTES {
            return Err(NoteError::TooLarge { size: note.len() });
        }
        if has_control_character(note) {
            return Err(NoteError::ControlCharacter);
        }
        let split = note.rfind("\n\n").ok_or(NoteError::NoSignatureBlock)?;
        let (Some(text), Some(signatures)) = (note.get(..=split), note.get(split + 2..)) else {
            return Err(NoteError::NoSignatureBlock);
        };
        let signatures = signatures
            .strip_suffix('\n')
            .ok_or(NoteError::SignaturesUnterminated)?;
        let mut verified: Vec<&str> = Vec::new();
        for (i, line) in signatures.split('\n').enumerate() {
            let number = i + 1;
            if number > MAX_SIGNATURES {
                return Err(NoteError::TooManySignatures);
            }
            let (name, id, signature) =
                parse_signature_line(line).ok_or(NoteError::MalformedSignature(number))?;
            if name != self.name || id != self.id || verified.contains(&line) {
                continue;
            }
            let invalid = || NoteError::InvalidSignature {
                line: number,
                name: self.name.clone(),
            };
            let signature = Signature::from_slice(&signature).map_err(|_| invalid())?;
            self.key
                .verify_strict(text.as_bytes(), &signature)
                .map_err(|_| invalid())?;
            verified.push(line);
        }
        if verified.is_empty() {
            return Err(NoteError::NoSignature(self.name.clone()));
        }
        Ok(text.to_owned())
    }
}

/// The key name, key id and signature bytes of a signature line, or `None`
/// when it is malformed (the signature may still be of any length).
fn parse_signature_line(line: &str) -> Option<(&str, [u8; 4], Vec<u8>)> {
    let (name, encoded) = line.strip_prefix(SIGNATURE_PREFIX)?.split_once(' ')?;
    if !valid_name(name) {
        return None;
    }
    let blob = STANDARD.decode(encoded).ok()?;
    let (id, signature) = blob.split_first_chunk::<4>()?;
    if signature.is_empty() {
        return None;
    }
    Some((name, *id, signature.to_vec()))
}

/// A decimal `u64` without sign or leading zeros (except `0` itself).
fn parse_decimal(s: &str) -> Option<u64> {
    let canonical =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    if canonical {
        s.parse().ok()
    } else {
        None
    }
}

/// The base64 of exactly 32 bytes.
fn parse_hash(s: &str) -> Option<Hash> {
    STANDARD.decode(s).ok()?.try_into().ok()
}

/// A tlog checkpoint (c2sp.org/tlog-checkpoint): the note text naming a log
/// and the root of its tree at a size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The log's identity, conventionally a schema-less URL; one line,
    /// non-empty.
    pub origin: String,
    /// The number of leaves in the tree.
    pub size: u64,
    /// The RFC 6962 root of the tree.
    pub root: Hash,
}

impl Checkpoint {
    /// The note text: `origin`, `size` and base64 `root`, a line each.
    pub fn text(&self) -> String {
        format!(
            "{}\n{}\n{}\n",
            self.origin,
            self.size,
            STANDARD.encode(self.root)
        )
    }

    /// Reads a checkpoint note text strictly; extension lines after the
    /// third are allowed (non-empty) and ignored.
    pub fn parse(text: &str) -> Result<Self, NoteError> {
        let body = text
            .strip_suffix('\n')
            .ok_or(NoteError::CheckpointUnterminated)?;
        let mut lines = body.split('\n');
        let origin = lines.next().unwrap_or_default();
        let (Some(size), Some(root)) = (lines.next(), lines.next()) else {
            return Err(NoteError::CheckpointTooShort);
        };
        if origin.is_empty() {
            return Err(NoteError::CheckpointOrigin);
        }
        let size = parse_decimal(size).ok_or(NoteError::CheckpointSize)?;
        let root = parse_hash(root).ok_or(NoteError::CheckpointRoot)?;
        if let Some(i) = lines.position(str::is_empty) {
            return Err(NoteError::CheckpointExtension(i + 4));
        }
        Ok(Self {
            origin: origin.to_owned(),
            size,
            root,
        })
    }
}

/// A tlog proof (c2sp.org/tlog-proof@v1): an entry's index, its audit path
/// and the signed checkpoint of the tree the path leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlogProof {
    /// The entry's zero-based index in the log.
    pub index: u64,
    /// The RFC 6962 audit path, from the leaf's sibling up to the root's child.
    pub path: Vec<Hash>,
    /// The signed checkpoint note, verbatim, still to be opened.
    pub checkpoint_note: String,
}

impl TlogProof {
    /// The proof text: the header, `index N`, a base64 hash per line, a blank
    /// line and the checkpoint note; never an `extra` line.
    pub fn to_text(&self) -> String {
        let mut out = format!("{PROOF_HEADER}\nindex {}\n", self.index);
        for hash in &self.path {
            out.push_str(&STANDARD.encode(hash));
            out.push('\n');
        }
        out.push('\n');
        out.push_str(&self.checkpoint_note);
        out
    }

    /// Reads a proof text; an `extra` line is checked to be base64 and
    /// dropped. The checkpoint note is not opened here.
    pub fn parse(text: &str) -> Result<Self, NoteError> {
        if text.len() > MAX_PROOF_BYTES {
            return Err(NoteError::ProofTooLarge { size: text.len() });
        }
        let mut rest = text;
        if take_line(&mut rest) != Some(PROOF_HEADER) {
            return Err(NoteError::ProofHeader);
        }
        let mut line_number = 2;
        let mut line = take_line(&mut rest).ok_or(NoteError::ProofIndex)?;
        if let Some(extra) = line.strip_prefix("extra ") {
            STANDARD.decode(extra).map_err(|_| NoteError::ProofExtra)?;
            line_number += 1;
            line = take_line(&mut rest).ok_or(NoteError::ProofIndex)?;
        }
        let index = line
            .strip_prefix("index ")
            .and_then(parse_decimal)
            .ok_or(NoteError::ProofIndex)?;
        let mut path = Vec::new();
        loop {
            line_number += 1;
            let line = take_line(&mut rest).ok_or(NoteError::ProofNoCheckpoint)?;
            if line.is_empty() {
                break;
            }
            if path.len() == MAX_PROOF_HASHES {
                return Err(NoteError::ProofTooManyHashes);
            }
            path.push(parse_hash(line).ok_or(NoteError::ProofHash(line_number))?);
        }
        if rest.is_empty() {
            return Err(NoteError::ProofNoCheckpoint);
        }
        if rest.len() > MAX_NOTE_BYTES {
            return Err(NoteError::TooLarge { size: rest.len() });
        }
        Ok(Self {
            index,
            path,
            checkpoint_note: rest.to_owned(),
        })
    }
}

/// The line at the start of `rest` without its newline, `rest` moving past
/// it; `None` when no newline is left.
fn take_line<'a>(rest: &mut &'a str) -> Option<&'a str> {
    let (line, after) = rest.split_once('\n')?;
    *rest = after;
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision_log::merkle;
    use proptest::prelude::*;

    // The signed-note vectors of golang.org/x/mod/sumdb/note (note_test.go:
    // TestSign, TestOpen, TestVerifierList), also the example of the Rust
    // `signed_note` crate's documentation.
    const PETER_SKEY: &str =
        "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";
    const PETER_VKEY: &str = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
    const ENOCH_VKEY: &str = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop";
    const TEXT: &str = "If you think cryptography is the answer to your problem,\n\
                        then you don't know what your problem is.\n";
    const PETER_SIG: &str = "\u{2014} PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n";
    const ENOCH_SIG: &str = "\u{2014} EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n";

    /// The name, key id and 0x01-prefixed key bytes of a Go key string
    /// (`[PRIVATE+KEY+]name+hexid+base64`).
    fn go_key(key: &str) -> (String, [u8; 4], [u8; 32]) {
        let key = key.strip_prefix("PRIVATE+KEY+").unwrap_or(key);
        let mut parts = key.splitn(3, '+');
        let name = parts.next().unwrap().to_owned();
        let id: [u8; 4] = hex::decode(parts.next().unwrap())
            .unwrap()
            .try_into()
            .unwrap();
        let bytes = STANDARD.decode(parts.next().unwrap()).unwrap();
        assert_eq!(bytes[0], ED25519_TYPE);
        (name, id, bytes[1..].try_into().unwrap())
    }

    fn peter_signer() -> NoteSigner {
        let (name, _, seed) = go_key(PETER_SKEY);
        NoteSigner::new(&name, SigningKey::from_bytes(&seed)).unwrap()
    }

    fn verifier(vkey: &str) -> NoteVerifier {
        let (name, _, public) = go_key(vkey);
        NoteVerifier::new(&name, VerifyingKey::from_bytes(&public).unwrap()).unwrap()
    }

    fn peter_note() -> String {
        format!("{TEXT}\n{PETER_SIG}")
    }

    #[test]
    fn key_ids_match_the_go_keys() {
        for vkey in [PETER_VKEY, ENOCH_VKEY] {
            let (name, id, public) = go_key(vkey);
            assert_eq!(key_id(&name, &public), id, "{vkey}");
        }
        let (_, id, _) = go_key(PETER_SKEY);
        assert_eq!(hex::encode(id), "c74f20a3");
        let signer = peter_signer();
        assert_eq!(signer.name(), "PeterNeumann");
        assert_eq!(signer.id, id);
        assert_eq!(signer.verifier(), verifier(PETER_VKEY));
    }

    #[test]
    fn sign_reproduces_the_go_note() {
        assert_eq!(peter_signer().sign(TEXT).unwrap(), peter_note());
    }

    #[test]
    fn open_accepts_the_go_notes() {
        let peter = verifier(PETER_VKEY);
        let enoch = verifier(ENOCH_VKEY);
        assert_eq!(peter.name(), "PeterNeumann");
        assert_eq!(peter.open(&peter_note()).unwrap(), TEXT);
        assert_eq!(peter_signer().verifier().open(&peter_note()).unwrap(), TEXT);
        // TestOpen: each key opens the note both signed, ignoring the other.
        let both = format!("{TEXT}\n{PETER_SIG}{ENOCH_SIG}");
        assert_eq!(peter.open(&both).unwrap(), TEXT);
        assert_eq!(enoch.open(&both).unwrap(), TEXT);
        // TestOpen: repeated signatures, and a corrupt one by an unknown key.
        let enoch_abcd = format!("{}ABCD{}", &ENOCH_SIG[..60], &ENOCH_SIG[60..]);
        let repeated = format!("{TEXT}\n{PETER_SIG}{PETER_SIG}{ENOCH_SIG}{ENOCH_SIG}{enoch_abcd}");
        assert_eq!(peter.open(&repeated).unwrap(), TEXT);
        // Exactly 100 signatures are allowed.
        let hundred = format!("{TEXT}\n{}", PETER_SIG.repeat(100));
        assert_eq!(peter.open(&hundred).unwrap(), TEXT);
        // A text may hold blank lines (sign refuses them, other signers may
        // not): the signatures follow the last one.
        let signer = peter_signer();
        let text = "a\n\nb\n";
        let mut blob = signer.id.to_vec();
        blob.extend_from_slice(&signer.key.sign(text.as_bytes()).to_bytes());
        let note = format!("{text}\n\u{2014} PeterNeumann {}\n", STANDARD.encode(blob));
        assert_eq!(peter.open(&note).unwrap(), text);
    }

    #[test]
    fn open_rejects_altered_and_unsigned_notes() {
        let peter = verifier(PETER_VKEY);
        let invalid = |line| NoteError::InvalidSignature {
            line,
            name: "PeterNeumann".into(),
        };
        let no_signature = Err(NoteError::NoSignature("PeterNeumann".into()));

        let changed_text = peter_note().replace("cryptography", "cryptographY");
        assert_eq!(peter.open(&changed_text), Err(invalid(1)));

        let (prefix, encoded) = PETER_SIG.trim_end().split_at(SIGNATURE_PREFIX.len() + 13);
        let mut blob = STANDARD.decode(encoded).unwrap();
        blob[10] ^= 1;
        let changed_signature = format!("{TEXT}\n{prefix}{}\n", STANDARD.encode(&blob));
        assert_eq!(peter.open(&changed_signature), Err(invalid(1)));

        // TestOpen: a longer signature under the same key id.
        let longer = format!("{TEXT}\n{}ABCD{}", &PETER_SIG[..60], &PETER_SIG[60..]);
        assert_eq!(peter.open(&longer), Err(invalid(1)));

        // Unlike Go, a bad signature by the key after a good one fails too.
        let second_bad = format!(
            "{TEXT}\n{PETER_SIG}{}",
            &changed_signature[TEXT.len() + 1..]
        );
        assert_eq!(peter.open(&second_bad), Err(invalid(2)));

        assert_eq!(peter.open(TEXT), Err(NoteError::NoSignatureBlock));
        assert_eq!(peter.open(&format!("{TEXT}\n{ENOCH_SIG}")), no_signature);
        assert_eq!(
            verifier(ENOCH_VKEY).open(&peter_note()),
            Err(NoteError::NoSignature("EnochRoot".into()))
        );
        // TestOpen: another name or another key id is another key.
        let misnamed = peter_note().replace("PeterNeumann", "CarmenSandiego");
        assert_eq!(peter.open(&misnamed), no_signature);
        let other_id = peter_note().replace("x08g", "xxxx");
        assert_eq!(peter.open(&other_id), no_signature);

        let many = format!("{TEXT}\n{}", PETER_SIG.repeat(101));
        assert_eq!(peter.open(&many), Err(NoteError::TooManySignatures));

        let padded = format!("{}{TEXT}\n{PETER_SIG}", "x".repeat(MAX_NOTE_BYTES));
        assert_eq!(
            peter.open(&padded),
            Err(NoteError::TooLarge { size: padded.len() })
        );
    }

    #[test]
    fn open_rejects_the_go_malformed_notes() {
        // TestOpen's badMsgs (all but "\xff", which no &str can hold).
        let peter = verifier(PETER_VKEY);
        let cases = [
            (TEXT.to_owned(), NoteError::NoSignatureBlock),
            (format!("{TEXT}\n"), NoteError::SignaturesUnterminated),
            (
                format!("{TEXT}\n{}", PETER_SIG.trim_end()),
                NoteError::SignaturesUnterminated,
            ),
            (format!("\x01{TEXT}\n{PETER_SIG}"), NoteError::ControlCharacter),
            (
                format!("{TEXT}\n\u{2014} Bad Name x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM="),
                NoteError::SignaturesUnterminated,
            ),
            (
                format!("{TEXT}\n\u{2014} Bad Name x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"),
                NoteError::MalformedSignature(1),
            ),
            (
                format!("{TEXT}\n{PETER_SIG}Unexpected line.\n"),
                NoteError::MalformedSignature(2),
            ),
            // A signature of the key id alone, a dash without space, no
            // base64, a name with '+', an empty name.
            (format!("{TEXT}\n\u{2014} PeterNeumann x08gow==\n"), NoteError::MalformedSignature(1)),
            (format!("{TEXT}\n\u{2014}PeterNeumann AAAAAAA=\n"), NoteError::MalformedSignature(1)),
            (format!("{TEXT}\n\u{2014} PeterNeumann !!!!\n"), NoteError::MalformedSignature(1)),
            (format!("{TEXT}\n\u{2014} Peter+Neumann AAAAAAA=\n"), NoteError::MalformedSignature(1)),
            (format!("{TEXT}\n\u{2014}  AAAAAAA=\n"), NoteError::MalformedSignature(1)),
            (format!("{TEXT}\n\u{2014} PeterNeumann\n"), NoteError::MalformedSignature(1)),
            (format!("{TEXT}\r\n{PETER_SIG}"), NoteError::ControlCharacter),
            (String::new(), NoteError::NoSignatureBlock),
        ];
        for (note, want) in cases {
            assert_eq!(peter.open(&note), Err(want), "{note:?}");
        }
    }

    #[test]
    fn sign_refuses_texts_open_would_not_return() {
        let signer = peter_signer();
        assert_eq!(signer.sign(""), Err(NoteError::EmptyText));
        assert_eq!(signer.sign("abc"), Err(NoteError::TextUnterminated));
        assert_eq!(signer.sign("a\n\nb\n"), Err(NoteError::TextBlankLine));
        assert_eq!(signer.sign("a\tb\n"), Err(NoteError::TextControlCharacter));
        let big = format!("{}\n", "x".repeat(MAX_NOTE_BYTES - 10));
        assert!(matches!(
            signer.sign(&big),
            Err(NoteError::SignedTooLarge { .. })
        ));
    }

    #[test]
    fn key_names_and_keys_are_checked_and_the_key_never_printed() {
        let seed = go_key(PETER_SKEY).2;
        for name in [
            "",
            "a b",
            "a+b",
            "a\tb",
            "a\u{a0}b",
            "a\u{2028}b",
            "a\u{1}b",
        ] {
            let key = SigningKey::from_bytes(&seed);
            assert_eq!(
                NoteSigner::new(name, key).err(),
                Some(NoteError::InvalidKeyName(name.into()))
            );
        }
        let public = SigningKey::from_bytes(&seed).verifying_key();
        assert_eq!(
            NoteVerifier::new("a+b", public).err(),
            Some(NoteError::InvalidKeyName("a+b".into()))
        );
        let mut identity = [0u8; 32];
        identity[0] = 1;
        let weak = VerifyingKey::from_bytes(&identity).unwrap();
        assert_eq!(
            NoteVerifier::new("weak", weak).err(),
            Some(NoteError::WeakKey("weak".into()))
        );
        let printed = format!("{:?}", peter_signer());
        assert_eq!(
            printed,
            "NoteSigner { name: \"PeterNeumann\", id: \"c74f20a3\", .. }"
        );
        assert!(!printed.contains(&hex::encode(seed)));
    }

    #[test]
    fn error_messages() {
        let cases = [
            (
                NoteError::NoSignature("log.example/a".into()),
                "the note has no signature by log.example/a",
            ),
            (
                NoteError::MalformedSignature(2),
                "signature line 2 is malformed",
            ),
            (
                NoteError::CheckpointSize,
                "the checkpoint's tree size is not a decimal number",
            ),
            (
                NoteError::TooLarge { size: 70000 },
                "the note is 70000 bytes, over the limit of 65536 bytes",
            ),
            (
                NoteError::TooManySignatures,
                "the note has more than 100 signature lines",
            ),
            (
                NoteError::ProofHeader,
                "the proof does not start with the line c2sp.org/tlog-proof@v1",
            ),
            (
                NoteError::ProofTooManyHashes,
                "the proof has more than 64 hashes",
            ),
        ];
        for (error, want) in cases {
            assert_eq!(error.to_string(), want);
        }
    }

    /// The eight leaves of the RFC 6962 test vectors (see merkle_tests.rs).
    fn vector_leaves() -> Vec<Hash> {
        merkle::tests::LEAF_INPUTS
            .iter()
            .map(|x| merkle::leaf_hash(&hex::decode(x).unwrap()))
            .collect()
    }

    #[test]
    fn checkpoints_round_trip() {
        // The example of c2sp.org/tlog-checkpoint.
        let example =
            "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n";
        let checkpoint = Checkpoint::parse(example).unwrap();
        assert_eq!(checkpoint.origin, "example.com/behind-the-sofa");
        assert_eq!(checkpoint.size, 20852163);
        assert_eq!(checkpoint.text(), example);

        let leaves = vector_leaves();
        for size in [0, 1, 8] {
            let checkpoint = Checkpoint {
                origin: "log.example/decisions".into(),
                size: size as u64,
                root: merkle::root(&leaves[..size]),
            };
            assert_eq!(
                Checkpoint::parse(&checkpoint.text()),
                Ok(checkpoint.clone())
            );
        }
        let empty = Checkpoint {
            origin: "o".into(),
            size: 0,
            root: merkle::empty_root(),
        };
        assert_eq!(
            empty.text(),
            "o\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n"
        );
        let extended = format!("{}ext one\next two\n", empty.text());
        assert_eq!(Checkpoint::parse(&extended), Ok(empty));
    }

    #[test]
    fn malformed_checkpoints() {
        let root = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=";
        let cases = [
            (String::new(), NoteError::CheckpointUnterminated),
            (format!("o\n1\n{root}"), NoteError::CheckpointUnterminated),
            ("\n".into(), NoteError::CheckpointTooShort),
            ("o\n1\n".into(), NoteError::CheckpointTooShort),
            (format!("\n1\n{root}\n"), NoteError::CheckpointOrigin),
            (format!("o\n01\n{root}\n"), NoteError::CheckpointSize),
            (format!("o\n+1\n{root}\n"), NoteError::CheckpointSize),
            (format!("o\n-1\n{root}\n"), NoteError::CheckpointSize),
            (format!("o\n 1\n{root}\n"), NoteError::CheckpointSize),
            (format!("o\n\n{root}\n"), NoteError::CheckpointSize),
            (
                format!("o\n18446744073709551616\n{root}\n"),
                NoteError::CheckpointSize,
            ),
            (format!("o\n1e3\n{root}\n"), NoteError::CheckpointSize),
            ("o\n1\nAAAA\n".into(), NoteError::CheckpointRoot),
            (format!("o\n1\n{root}AAAA\n"), NoteError::CheckpointRoot),
            (
                format!("o\n1\n{}\n", root.trim_end_matches('=')),
                NoteError::CheckpointRoot,
            ),
            (
                format!("o\n1\n{root}\n\n"),
                NoteError::CheckpointExtension(4),
            ),
            (
                format!("o\n1\n{root}\next\n\n"),
                NoteError::CheckpointExtension(5),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(Checkpoint::parse(&text), Err(want), "{text:?}");
        }
        let max = format!("o\n18446744073709551615\n{root}\n");
        assert_eq!(Checkpoint::parse(&max).map(|c| c.size), Ok(u64::MAX));
    }

    /// A proof of leaf 5 of the eight-leaf vector tree, its checkpoint signed
    /// by PeterNeumann.
    fn vector_proof() -> TlogProof {
        static PROOF: std::sync::OnceLock<TlogProof> = std::sync::OnceLock::new();
        PROOF.get_or_init(build_vector_proof).clone()
    }

    fn build_vector_proof() -> TlogProof {
        let leaves = vector_leaves();
        let checkpoint = Checkpoint {
            origin: "log.example/decisions".into(),
            size: 8,
            root: merkle::root(&leaves),
        };
        TlogProof {
            index: 5,
            path: merkle::inclusion_proof(&leaves, 5).unwrap(),
            checkpoint_note: peter_signer().sign(&checkpoint.text()).unwrap(),
        }
    }

    #[test]
    fn tlog_proofs_round_trip_and_verify() {
        let proof = vector_proof();
        let text = proof.to_text();
        assert!(text.starts_with("c2sp.org/tlog-proof@v1\nindex 5\n"));
        let parsed = TlogProof::parse(&text).unwrap();
        assert_eq!(parsed, proof);

        // The whole chain: open the checkpoint, read it, check the path.
        let checkpoint_text = verifier(PETER_VKEY).open(&parsed.checkpoint_note).unwrap();
        let checkpoint = Checkpoint::parse(&checkpoint_text).unwrap();
        let leaf = vector_leaves()[5];
        assert!(merkle::verify_inclusion(
            &leaf,
            parsed.index,
            checkpoint.size,
            &parsed.path,
            &checkpoint.root
        ));

        let with_extra = text.replacen("\nindex", "\nextra AAECAw==\nindex", 1);
        assert_eq!(TlogProof::parse(&with_extra), Ok(proof.clone()));
        let empty_path = TlogProof {
            index: 0,
            path: vec![],
            checkpoint_note: proof.checkpoint_note.clone(),
        };
        assert_eq!(TlogProof::parse(&empty_path.to_text()), Ok(empty_path));
    }

    #[test]
    fn the_spec_example_proof_parses() {
        // The example of c2sp.org/tlog-proof (signatures elided there).
        let example = "c2sp.org/tlog-proof@v1\n\
            extra YWdlLXYxLjIuMS1kYXJ3aW4tYXJtNjQudGFyLmd6kYXJ3aW4tYXJ\n\
            index 73894\n\
            gSKyXoYZUgZ6jduWYrkDOARinOMGJveXjgMkBTcdPlQ=\n\
            B95lDa8R83lS8n0eG+o0buTxRKQTYFi//1U8anccXmA=\n\
            EKNzoDWG8LGC0Yp9o+sv3qllpMP9uHQ9B20KNL+Q1zs=\n\
            RoopEkOdqkYqMB4MJXrbt/hMjOxsVn0IrWjpz1ZMMes=\n\
            AHCioX9nLjsrse6YhjRRmk1WUEirVOLLRoOQ6vfO5vk=\n\
            \n\
            example.com/fancylog\n\
            109482\n\
            sFodV/vSp5O8n9a8QpW6PRY97tfOSW5bsc2Xl/EQi08=\n\
            \n\
            \u{2014} example.com/fancylog hI2DJw[...]1roloI=\n";
        let proof = TlogProof::parse(example).unwrap();
        assert_eq!(proof.index, 73894);
        assert_eq!(proof.path.len(), 5);
        assert!(proof
            .checkpoint_note
            .starts_with("example.com/fancylog\n109482\n"));
        let body = proof.checkpoint_note.split("\n\n").next().unwrap();
        assert_eq!(
            Checkpoint::parse(&format!("{body}\n")).unwrap().size,
            109482
        );
    }

    #[test]
    fn malformed_tlog_proofs() {
        let good = vector_proof().to_text();
        let hash = "gSKyXoYZUgZ6jduWYrkDOARinOMGJveXjgMkBTcdPlQ=";
        let note = vector_proof().checkpoint_note;
        let cases = [
            (String::new(), NoteError::ProofHeader),
            (good.replacen("@v1", "@v2", 1), NoteError::ProofHeader),
            (format!("\n{good}"), NoteError::ProofHeader),
            ("c2sp.org/tlog-proof@v1\n".into(), NoteError::ProofIndex),
            (
                good.replacen("index 5", "index 05", 1),
                NoteError::ProofIndex,
            ),
            (
                good.replacen("index 5", "index -5", 1),
                NoteError::ProofIndex,
            ),
            (good.replacen("index 5", "index", 1), NoteError::ProofIndex),
            (
                good.replacen("index 5", "Index 5", 1),
                NoteError::ProofIndex,
            ),
            (
                good.replacen("\nindex", "\nextra !!\nindex", 1),
                NoteError::ProofExtra,
            ),
            (
                good.replacen("\nindex", "\nextra AA\nindex", 1),
                NoteError::ProofExtra,
            ),
            (
                good.replacen("\nindex 5\n", "\nindex 5\nAAAA\n", 1),
                NoteError::ProofHash(3),
            ),
            (
                good.replacen("\nindex 5\n", "\nextra \nindex 5\nnot base64\n", 1),
                NoteError::ProofHash(4),
            ),
            (
                format!(
                    "c2sp.org/tlog-proof@v1\nindex 1\n{}\n{note}",
                    format!("{hash}\n").repeat(65)
                ),
                NoteError::ProofTooManyHashes,
            ),
            (
                format!("c2sp.org/tlog-proof@v1\nindex 1\n{hash}\n"),
                NoteError::ProofNoCheckpoint,
            ),
            (
                format!("c2sp.org/tlog-proof@v1\nindex 1\n{hash}\n\n"),
                NoteError::ProofNoCheckpoint,
            ),
            (
                format!("c2sp.org/tlog-proof@v1\nindex 1\n{hash}"),
                NoteError::ProofNoCheckpoint,
            ),
        ];
        for (text, want) in cases {
            assert_eq!(TlogProof::parse(&text), Err(want), "{text:?}");
        }
        let big_note = format!(
            "c2sp.org/tlog-proof@v1\nindex 1\n\n{}",
            "x".repeat(MAX_NOTE_BYTES + 1)
        );
        assert_eq!(
            TlogProof::parse(&big_note),
            Err(NoteError::TooLarge {
                size: MAX_NOTE_BYTES + 1
            })
        );
        let huge = "x".repeat(MAX_PROOF_BYTES + 1);
        assert_eq!(
            TlogProof::parse(&huge),
            Err(NoteError::ProofTooLarge { size: huge.len() })
        );
    }

    /// `base` with `insert` placed at the `at`-th character boundary and cut
    /// to `keep` characters.
    fn mutate(
        base: &str,
        at: prop::sample::Index,
        insert: &str,
        keep: prop::sample::Index,
    ) -> String {
        let chars: Vec<char> = base.chars().collect();
        let at = at.index(chars.len() + 1);
        let mut out: String = chars[..at].iter().collect();
        out.push_str(insert);
        out.extend(&chars[at..]);
        let count = out.chars().count();
        out.chars()
            .take(keep.index(count + 1).max(count / 2))
            .collect()
    }

    proptest! {
        #[test]
        fn parsers_never_panic_on_arbitrary_text(text in any::<String>()) {
            let _ = verifier(PETER_VKEY).open(&text);
            let _ = Checkpoint::parse(&text);
            let _ = TlogProof::parse(&text);
        }

        #[test]
        fn parsers_never_panic_on_damaged_documents(
            at in any::<prop::sample::Index>(),
            insert in "(\n|\u{2014}| |=|\\+|[A-Za-z0-9/]|\\PC){0,4}",
            keep in any::<prop::sample::Index>(),
        ) {
            let peter = verifier(PETER_VKEY);
            let note = mutate(&format!("{TEXT}\n{PETER_SIG}{ENOCH_SIG}"), at, &insert, keep);
            if let Ok(text) = peter.open(&note) {
                prop_assert!(note.starts_with(&text));
            }
            let checkpoint = "log.example\n8\nXcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=\next\n";
            let _ = Checkpoint::parse(&mutate(checkpoint, at, &insert, keep));
            let proof = vector_proof().to_text();
            let _ = TlogProof::parse(&mutate(&proof, at, &insert, keep));
        }
    }
}
