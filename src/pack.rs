//! Loading a sealed pack ([§5](docs/formats.md#s5), steps 2–7 after the license of step 1):
//! all checks in order, then the engine is built. Nothing partial is ever
//! returned, and the plaintext never leaves memory.

use crate::container::{read_pack_file, PackError, SealedPack};
use crate::engine::Evaluator;
use crate::license::{LicenseError, VerifiedLicense};
use crate::playbook::{self, PlaybookError};
use crate::program::Program;
use crate::rules::{declarations, CustomRule};
use crate::signature::{PackSigners, SignatureFile, SignatureInfo};
use crate::Error;
use serde_json::{Map, Value};
use std::path::Path;
use std::sync::Arc;

/// A custom rule as `inspect` shows it: never its pattern.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RuleSummary {
    /// Rule id.
    pub id: String,
    /// `regex` or `luhn_checksum`.
    #[serde(rename = "type")]
    pub rule_type: &'static str,
    /// `block` or `redact`.
    pub action: &'static str,
}

/// A pack that passed every load-time check, with its engine. Its `Debug`
/// shows the header's and the rules' names, never the plaintext.
pub struct LoadedPack {
    /// The pack id (header and plaintext agree).
    pub pack_id: String,
    /// `version` as text (empty if absent).
    pub version: String,
    /// `name`, if a string.
    pub name: Option<String>,
    /// Hex SHA-256 of the plaintext (the header digest).
    pub sha256: String,
    /// Size of the pack file.
    pub bytes: usize,
    /// Hex SHA-256 of the whole pack file (what a [§17](docs/guides/signing.md#s17) signature
    /// and a decision log line name).
    pub file_sha256: String,
    /// Where it came from (for messages).
    pub source: String,
    /// The compiled playbook, in plaintext. Crate-only: it holds the
    /// patterns a sealed pack protects, so no caller outside the runtime
    /// can read or serialise it (the SDK manifest reads it here).
    pub(crate) doc: Map<String, Value>,
    /// The custom rules, without patterns.
    pub rules: Vec<RuleSummary>,
    /// Declared solver names.
    pub solvers: Vec<String>,
    /// The codons and hard rules the pack runs ([§6.1](docs/evaluation.md#s6-1), [§16](docs/codons.md#s16)).
    pub(crate) program: Arc<Program>,
    /// The compiled engine, shared so that a stream session can own a
    /// handle to it ([`Evaluator::stream_owned`]).
    pub evaluator: Arc<Evaluator>,
    /// Who signed it ([§17](docs/guides/signing.md#s17)): verified when signers are
    /// configured; read but unverified when not; `None` without a `.sig`.
    pub signature: Option<SignatureInfo>,
}

impl std::fmt::Debug for LoadedPack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPack")
            .field("pack_id", &self.pack_id)
            .field("version", &self.version)
            .field("name", &self.name)
            .field("sha256", &self.sha256)
            .field("bytes", &self.bytes)
            .field("source", &self.source)
            .field("rules", &self.rules)
            .field("solvers", &self.solvers)
            .field("codons", &self.program.codons.len())
            .field("hard_rules", &self.program.hard_rules.len())
            .field("evaluator", &self.evaluator)
            .field("signature", &self.signature)
            .finish_non_exhaustive()
    }
}

/// Reads and loads the pack at `path` for `license` (already verified),
/// with its `.sig` read for display and no signature required.
pub fn load_pack_file(path: &Path, license: &VerifiedLicense) -> Result<LoadedPack, Error> {
    load_pack_file_as(path, license, None)
}

/// Loads pack bytes for `license` (already verified and in its window):
/// [§5](docs/formats.md#s5) steps 2 to 7, no signature.
pub fn load_pack(bytes: &[u8], name: &str, license: &VerifiedLicense) -> Result<LoadedPack, Error> {
    load_pack_as(bytes, &SignatureFile::Absent, name, license, None)
}

/// Loads pack bytes and their signature file for `license`: with
/// `signers`, the signature must verify ([§17](docs/guides/signing.md#s17)), between
/// [§5](docs/formats.md#s5) steps 2 and 3; without, it is only read for display.
pub fn load_signed_pack(
    bytes: &[u8],
    sig: &SignatureFile,
    name: &str,
    license: &VerifiedLicense,
    signers: Option<&PackSigners>,
) -> Result<LoadedPack, Error> {
    load_pack_as(bytes, sig, name, license, signers)
}

/// [`load_pack_file`] into any error that holds the three kinds a load
/// raises (a policy test's subject error keeps them without the root
/// [`Error`], which holds policy test errors), checking the signature with
/// `signers`.
pub(crate) fn load_pack_file_as<E>(
    path: &Path,
    license: &VerifiedLicense,
    signers: Option<&PackSigners>,
) -> Result<LoadedPack, E>
where
    E: From<PackError> + From<LicenseError> + From<PlaybookError>,
{
    let bytes = read_pack_file(path)?;
    let sig = SignatureFile::read_for(path);
    load_pack_as(&bytes, &sig, &path.display().to_string(), license, signers)
}

/// [`load_signed_pack`] into any error that holds the three kinds a load raises.
pub(crate) fn load_pack_as<E>(
    bytes: &[u8],
    sig: &SignatureFile,
    name: &str,
    license: &VerifiedLicense,
    signers: Option<&PackSigners>,
) -> Result<LoadedPack, E>
where
    E: From<PackError> + From<LicenseError> + From<PlaybookError>,
{
    let sealed = SealedPack::parse(bytes, name)?;
    // Between steps 2 and 3: whether it runs depends only on the trust
    // configuration, never on the signature file.
    let signature = match signers {
        Some(s) => Some(s.verify(bytes, sealed.pack_id, sig, name)?.info(true)),
        None => sig.unverified_info(),
    };
    license.check_pack(sealed.pack_id)?;
    let plain = sealed.open(&license.content_key().pack_key(), &license.license_id, name)?;
    let integrity = |detail: String| PackError::Integrity(format!("{name}: {detail}"));
    let doc = match serde_json::from_slice::<Value>(&plain) {
        Ok(Value::Object(m)) => m,
        Ok(_) => {
            return Err(integrity("the decrypted plaintext is not a playbook object".into()).into())
        }
        Err(_) => return Err(integrity("the decrypted plaintext is not JSON".into()).into()),
    };
    playbook::check_types(&doc, name).map_err(|e| PackError::Integrity(e.to_string()))?;
    match doc.get("pack_id") {
        Some(Value::String(id)) if id == sealed.pack_id => {}
        _ => {
            return Err(integrity(format!(
                "the playbook's pack_id differs from the header's `{}`",
                sealed.pack_id
            ))
            .into())
        }
    }
    let solvers =
        playbook::solver_names(&doc, name).map_err(|e| PackError::Integrity(e.to_string()))?;
    license.check_solvers(&solvers)?;
    let declared = declarations(&doc, name)?;
    let version = playbook::pack_version(&doc);
    let evaluator = build_evaluator(
        sealed.pack_id,
        &version,
        &declared.rules,
        &declared.program,
        name,
    )?;
    let rules = declared.rules;
    Ok(LoadedPack {
        pack_id: sealed.pack_id.to_string(),
        name: playbook::str_field(&doc, "name").map(str::to_string),
        version,
        sha256: hex::encode(sealed.sha256),
        bytes: bytes.len(),
        file_sha256: crate::crypto::sha256_hex(bytes),
        source: name.to_string(),
        rules: rules.iter().map(summarise).collect(),
        solvers,
        doc,
        program: declared.program,
        evaluator: Arc::new(evaluator),
        signature,
    })
}

/// Builds the engine of a checked playbook: the one way a pack ([§5](docs/formats.md#s5)
/// step 7) or a playbook under test ([§13](docs/policy-tests.md#s13)) gets an evaluator. An automaton
/// the engine cannot build is an `UnsupportedPackDeclarationError`.
pub fn build_evaluator(
    pack_id: &str,
    version: &str,
    rules: &[CustomRule],
    program: &Arc<Program>,
    name: &str,
) -> Result<Evaluator, PlaybookError> {
    Evaluator::with_program(pack_id, version, rules, Arc::clone(program)).map_err(|e| {
        PlaybookError::Unsupported {
            summary: format!("{name}: {e}"),
            problems: vec![e],
        }
    })
}

impl LoadedPack {
    /// The custom rules' action names (`block_<id>`, `redact_<id>`), in file order.
    pub fn rule_actions(&self) -> Vec<String> {
        self.rules
            .iter()
            .map(|r| format!("{}_{}", r.action, r.id))
            .collect()
    }
}

fn summarise(r: &CustomRule) -> RuleSummary {
    RuleSummary {
        id: r.id.clone(),
        rule_type: r.rule_type.as_str(),
        action: r.action.as_str(),
    }
}
