//! Checking a decision log offline ([§19](docs/guides/auditing.md#s19)): `log verify`
//! recomputes the tree from the files and checks a signed checkpoint
//! against it; `log prove` writes an inclusion proof (C2SP `tlog-proof`);
//! `log consistency` checks that one checkpoint's tree extends another's.
//! Reads files only; errors name the file, line or signature.

use super::files::{log_files, scan, Scan};
use super::merkle::{
    consistency_proof, inclusion_proof, root, verify_consistency, verify_inclusion, Hash,
};
use super::note::{Checkpoint, NoteVerifier, TlogProof, MAX_NOTE_BYTES};
use super::LogError;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use std::path::Path;

/// What `log verify` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// Lines in the log.
    pub entries: u64,
    /// Base64 root of the whole log.
    pub root: String,
    /// The checkpoint checked, if one was: its origin and tree size.
    pub checkpoint: Option<(String, u64)>,
}

/// Every line of the log at `log`, which must exist (a server starts a
/// missing log empty; a verifier given a wrong path must not say "0
/// entries, verified").
fn scan_existing(log: &Path) -> Result<Scan, LogError> {
    if log_files(log)?.is_empty() {
        return Err(LogError::Io(format!(
            "{}: no such decision log (and no rotated files beside it)",
            log.display()
        )));
    }
    scan(log)
}

/// Reads a checkpoint note file (capped before it is parsed).
pub fn read_note(path: &Path) -> Result<String, LogError> {
    let name = path.display();
    let bytes = crate::capped::read_regular_file_capped(path, MAX_NOTE_BYTES as u64)
        .map_err(|e| LogError::Io(format!("{name}: cannot read: {e}")))?;
    String::from_utf8(bytes).map_err(|_| LogError::Verify(format!("{name}: not UTF-8 text")))
}

/// Reads a `.pub` key file (`license keygen`'s) as a note verifier named
/// by its key id (the file's stem).
pub fn read_verifier(path: &Path) -> Result<NoteVerifier, LogError> {
    let name = path.display();
    let key_id = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let bytes = crate::capped::read_regular_file_capped(path, 4096)
        .map_err(|e| LogError::Io(format!("{name}: cannot read: {e}")))?;
    let key = std::str::from_utf8(&bytes)
        .ok()
        .and_then(|t| crate::license::parse_public_key(t.trim()))
        .ok_or_else(|| {
            LogError::Config(format!("{name}: not a base64 32-byte Ed25519 public key"))
        })?;
    NoteVerifier::new(&key_id, key).map_err(|e| LogError::Config(format!("{name}: {e}")))
}

/// The checkpoint of a signed note, its signature checked by `verifier`.
fn open_checkpoint(
    note: &str,
    verifier: &NoteVerifier,
    what: &str,
) -> Result<Checkpoint, LogError> {
    let text = verifier
        .open(note)
        .map_err(|e| LogError::Verify(format!("{what}: {e}")))?;
    let cp = Checkpoint::parse(&text).map_err(|e| LogError::Verify(format!("{what}: {e}")))?;
    if cp.origin != verifier.name() {
        return Err(LogError::Verify(format!(
            "{what}: the origin `{}` is not the key's `{}`",
            cp.origin,
            verifier.name()
        )));
    }
    Ok(cp)
}

/// The checkpoint of a note, its signature not checked (for `log prove`,
/// whose proof carries the note for the verifier to check).
fn unchecked_checkpoint(note: &str, what: &str) -> Result<Checkpoint, LogError> {
    let text = note
        .rfind("\n\n")
        .map(|i| &note[..=i])
        .ok_or_else(|| LogError::Verify(format!("{what}: not a signed note")))?;
    Checkpoint::parse(text).map_err(|e| LogError::Verify(format!("{what}: {e}")))
}

/// The log's first `cp.size` leaves, checked against the checkpoint's
/// root (the log may have grown since).
fn covered<'a>(leaves: &'a [Hash], cp: &Checkpoint, what: &str) -> Result<&'a [Hash], LogError> {
    let n = usize::try_from(cp.size).unwrap_or(usize::MAX);
    let part = leaves.get(..n).ok_or_else(|| {
        LogError::Verify(format!(
            "{what}: the checkpoint covers {} entries but the log has {} (lines were removed)",
            cp.size,
            leaves.len()
        ))
    })?;
    if root(part) != cp.root {
        return Err(LogError::Verify(format!(
            "{what}: the root of the log's first {} entries differs from the checkpoint's: the log was changed",
            cp.size
        )));
    }
    Ok(part)
}

/// `log verify`: every line checked and the tree recomputed; with a
/// checkpoint, its signature and its root over the entries it covers.
pub fn verify(
    log: &Path,
    checkpoint: Option<(&Path, &NoteVerifier)>,
) -> Result<Verified, LogError> {
    let found = scan_existing(log)?;
    if found.torn_tail > 0 {
        return Err(LogError::Corrupt(format!(
            "{}: the last line has no newline ({} bytes): a write cut short",
            log.display(),
            found.torn_tail
        )));
    }
    let whole = root(&found.leaves);
    let checked = match checkpoint {
        Some((path, verifier)) => {
            let what = path.display().to_string();
            let cp = open_checkpoint(&read_note(path)?, verifier, &what)?;
            covered(&found.leaves, &cp, &what)?;
            Some((cp.origin, cp.size))
        }
        None => None,
    };
    Ok(Verified {
        entries: found.leaves.len() as u64,
        root: B64.encode(whole),
        checkpoint: checked,
    })
}

/// `log prove`: the C2SP `tlog-proof` of entry `seq` in the tree of the
/// checkpoint note at `checkpoint`.
pub fn prove(log: &Path, seq: u64, checkpoint: &Path) -> Result<String, LogError> {
    let found = scan_existing(log)?;
    let what = checkpoint.display().to_string();
    let note = read_note(checkpoint)?;
    let cp = unchecked_checkpoint(&note, &what)?;
    if seq >= cp.size {
        return Err(LogError::Verify(format!(
            "entry {seq} is not in the checkpoint's tree of {} entries",
            cp.size
        )));
    }
    let leaves = covered(&found.leaves, &cp, &what)?;
    let path =
        inclusion_proof(leaves, seq).ok_or_else(|| LogError::Verify(format!("no entry {seq}")))?;
    // The proof checks before it is handed out.
    let leaf = leaves
        .get(usize::try_from(seq).unwrap_or(usize::MAX))
        .ok_or_else(|| LogError::Verify(format!("no entry {seq}")))?;
    if !verify_inclusion(leaf, seq, cp.size, &path, &cp.root) {
        return Err(LogError::Verify(format!(
            "the proof of entry {seq} does not verify (a bug)"
        )));
    }
    Ok(TlogProof {
        index: seq,
        path,
        checkpoint_note: note,
    }
    .to_text())
}

/// `log consistency`: both checkpoints signed by `verifier`, each root the
/// log's over its size, and a consistency proof from the log from the old
/// tree to the new one. Returns the proof's hashes (base64).
pub fn consistency(
    log: &Path,
    old: &Path,
    new: &Path,
    verifier: &NoteVerifier,
) -> Result<(u64, u64, Vec<String>), LogError> {
    let found = scan_existing(log)?;
    let old_what = old.display().to_string();
    let new_what = new.display().to_string();
    let a = open_checkpoint(&read_note(old)?, verifier, &old_what)?;
    let b = open_checkpoint(&read_note(new)?, verifier, &new_what)?;
    if a.size > b.size {
        return Err(LogError::Verify(format!(
            "{new_what}: its tree ({} entries) is smaller than {old_what}'s ({}): the log was cut",
            b.size, a.size
        )));
    }
    let leaves = covered(&found.leaves, &b, &new_what)?;
    let proof = consistency_proof(leaves, a.size)
        .ok_or_else(|| LogError::Verify(format!("{old_what}: no tree of {} entries", a.size)))?;
    if !verify_consistency(a.size, b.size, &a.root, &b.root, &proof) {
        return Err(LogError::Verify(format!(
            "{new_what}'s tree does not extend {old_what}'s: entries before {} were changed",
            a.size
        )));
    }
    Ok((
        a.size,
        b.size,
        proof.iter().map(|h| B64.encode(h)).collect(),
    ))
}
