//! Helpers for the crate's own tests, benches and the fuzz harnesses
//! (feature `testing`, never in a shipped build): the `.hxpack` primitives
//! that the library keeps to itself, over a raw 32-byte content key, and
//! evaluators built straight from YAML.
//!
//! The library seals only for a [`VerifiedLicense`](crate::VerifiedLicense),
//! with a fresh nonce, and opens only while loading a pack. Tests need more:
//! round trips under arbitrary keys, a fixed nonce (reproducible bytes, the
//! tamper properties) and packs that the compiler would refuse (the
//! load-time checks). These helpers give that, and only with this feature.

use crate::compiler::{compile_in_memory, Entitlement};
use crate::container::{self, PackError, SealedPack};
use crate::crypto::ContentKey;
use crate::engine::Evaluator;
use crate::playbook::parse_document;
use crate::rules::check_declarations;
use zeroize::Zeroizing;

/// The engine of a playbook as the compiler's in-memory path builds it
/// (`helixor-pack test`, [§13](docs/policy-tests.md#s13)): a version-2 playbook runs exactly its
/// declarations. `name` labels the messages.
pub fn compiled_evaluator(yaml: &[u8], name: &str) -> Result<Evaluator, String> {
    compile_in_memory(yaml, name, Entitlement::PolicyTest)
        .map_err(|e| e.to_string())?
        .evaluator()
}

/// The version-1 engine of a playbook's custom rules beside the built-in
/// codons, as pack `pack_id` at `version` (whatever the YAML declares).
pub fn rules_evaluator(pack_id: &str, version: &str, yaml: &str) -> Result<Evaluator, String> {
    let doc = parse_document(yaml.as_bytes(), pack_id)
        .map_err(|e| e.to_string())?
        .doc;
    let rules = check_declarations(&doc, pack_id).map_err(|e| e.to_string())?;
    Evaluator::new(pack_id, version, &rules)
}

/// `plaintext` sealed as pack `pack_id` for `license_id` under the pack key
/// derived from `content_key` ([§3](docs/formats.md#s3)), with a fresh random nonce.
pub fn seal(
    pack_id: &str,
    license_id: &str,
    content_key: [u8; 32],
    plaintext: &[u8],
) -> Result<Vec<u8>, PackError> {
    let key = ContentKey::from_bytes(content_key).pack_key();
    container::seal(pack_id, license_id, &key, plaintext)
}

/// As [`seal`], with the given nonce (a nonce must never be reused under one
/// key: only for reproducible test bytes).
pub fn seal_with_nonce(
    pack_id: &str,
    license_id: &str,
    content_key: [u8; 32],
    plaintext: &[u8],
    nonce: [u8; 12],
) -> Result<Vec<u8>, PackError> {
    let key = ContentKey::from_bytes(content_key).pack_key();
    container::seal_with_nonce(pack_id, license_id, &key, plaintext, nonce)
}

/// Decrypts a parsed pack with the pack key derived from `content_key` and
/// `<pack_id>:<license_id>` as associated data, then checks the plaintext
/// digest ([§5](docs/formats.md#s5) steps 4 and 5); `name` is used in messages.
pub fn open(
    sealed: &SealedPack<'_>,
    content_key: [u8; 32],
    license_id: &str,
    name: &str,
) -> Result<Zeroizing<Vec<u8>>, PackError> {
    let key = ContentKey::from_bytes(content_key).pack_key();
    sealed.open(&key, license_id, name)
}
