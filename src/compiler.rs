//! The compiler ([§4.2](docs/formats.md#s4-2)): every compile-time check in order, then the
//! playbook's canonical JSON is sealed ([§3](docs/formats.md#s3)) and written atomically. The
//! plaintext is never written to disk.
//!
//! Compiling and sealing are separate steps: [`compile_in_memory`] runs the
//! checks and yields a [`CompiledPlaybook`], which [`CompiledPlaybook::seal`]
//! seals for any number of licenses (the catalog compiles once at start-up
//! and seals per request, [§14](docs/catalog.md#s14)).

use crate::atomic::write_atomic;
use crate::canonical;
use crate::container::{self, PackError};
use crate::crypto::sha256_hex;
use crate::license::{LicenseError, VerifiedLicense};
use crate::playbook::{self, PlaybookError, MAX_PLAYBOOK_BYTES};
use crate::program::Program;
use crate::rules::{declarations, is_snake_case, CustomRule};
use crate::Error;
use serde_json::Value;
use std::path::{Path, PathBuf};
use zeroize::Zeroizing;

/// A playbook that passed every check, as canonical JSON. Its `Debug`
/// shows the plaintext's length only, never its bytes.
pub struct CompiledPlaybook {
    /// The pack id.
    pub pack_id: String,
    /// `version` as text.
    pub version: String,
    /// `name`, if a string.
    pub name: Option<String>,
    /// The declared solver names (a license must allow each, [§4.2](docs/formats.md#s4-2) step 5).
    pub solvers: Vec<String>,
    /// The canonical JSON plaintext (zeroized on drop: it holds the patterns).
    pub plaintext: Zeroizing<Vec<u8>>,
    /// Hex SHA-256 of the plaintext.
    pub sha256: String,
    /// Warnings for stderr (unknown keys, rule id style).
    pub warnings: Vec<String>,
    /// The validated custom rules with their compiled patterns, in file
    /// order (what an evaluator is built from, [§6.1](docs/evaluation.md#s6-1)).
    pub rules: Vec<CustomRule>,
    /// The codons and hard rules it runs ([§6.1](docs/evaluation.md#s6-1), [§16](docs/codons.md#s16)).
    pub program: std::sync::Arc<Program>,
}

impl std::fmt::Debug for CompiledPlaybook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledPlaybook")
            .field("pack_id", &self.pack_id)
            .field("version", &self.version)
            .field("name", &self.name)
            .field("solvers", &self.solvers)
            .field("plaintext_bytes", &self.plaintext.len())
            .field("sha256", &self.sha256)
            .field("warnings", &self.warnings.len())
            .field("rules", &self.rules)
            .finish()
    }
}

/// Who may compile a playbook: the license checks of [§4.2](docs/formats.md#s4-2) (steps 4 and
/// the solver half of 5), or none at all for a playbook under test ([§13](docs/policy-tests.md#s13)).
#[derive(Debug, Clone, Copy)]
pub enum Entitlement<'a> {
    /// `compile`: the license (already through step 1) must allow the pack
    /// id and every declared solver.
    License(&'a VerifiedLicense),
    /// `helixor-pack test`: every other check runs, nothing is sealed, and
    /// no license is needed.
    PolicyTest,
    /// `catalog serve`: every other check runs once, at start-up; the
    /// license's run per request, for the license the playbook is then
    /// sealed for ([`CompiledPlaybook::seal`], [§14](docs/catalog.md#s14)).
    PerLicense,
}

/// What `compile` wrote.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CompileOutput {
    /// The pack id.
    pub pack_id: String,
    /// `version` as text.
    pub version: String,
    /// Hex SHA-256 of the plaintext (header digest, manifest `raw_pack_sha256`).
    pub sha256: String,
    /// Where the pack was written.
    pub path: PathBuf,
    /// Its size.
    pub bytes: usize,
    /// Warnings printed to stderr.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// Reads a playbook file, refusing one over the size cap before reading it whole.
pub fn read_playbook(path: &Path) -> Result<Vec<u8>, PlaybookError> {
    let name = path.display();
    crate::capped::read_file_capped(path, MAX_PLAYBOOK_BYTES as u64).map_err(|e| match e {
        crate::capped::CappedError::Io(e) => PlaybookError::Compiler(format!(
            "Failed to parse YAML playbook: cannot read {name}: {e}"
        )),
        crate::capped::CappedError::TooLarge => PlaybookError::Compiler(format!(
            "Failed to parse YAML playbook: {name} is over the {MAX_PLAYBOOK_BYTES}-byte limit"
        )),
    })
}

/// Steps 2 to 6 of [§4.2](docs/formats.md#s4-2) for a license that passed step 1.
pub fn compile_playbook(
    bytes: &[u8],
    name: &str,
    license: &VerifiedLicense,
) -> Result<CompiledPlaybook, Error> {
    compile_in_memory(bytes, name, Entitlement::License(license))
}

/// Steps 2 to 6 of [§4.2](docs/formats.md#s4-2), the license's steps as `entitlement` says,
/// to the canonical plaintext in memory (nothing is sealed or written).
pub fn compile_in_memory(
    bytes: &[u8],
    name: &str,
    entitlement: Entitlement<'_>,
) -> Result<CompiledPlaybook, Error> {
    compile_in_memory_as(bytes, name, entitlement)
}

/// [`compile_in_memory`] into any error that holds the two kinds a compile
/// raises (a policy test's subject error keeps them without the root
/// [`Error`], which holds policy test errors).
pub(crate) fn compile_in_memory_as<E>(
    bytes: &[u8],
    name: &str,
    entitlement: Entitlement<'_>,
) -> Result<CompiledPlaybook, E>
where
    E: From<PlaybookError> + From<LicenseError>,
{
    let document = playbook::parse_document(bytes, name)?;
    let doc = document.doc;
    let pack_id = playbook::pack_id(&doc, name)?.to_string();
    if let Entitlement::License(license) = entitlement {
        license.check_pack(&pack_id)?;
    }
    // Solvers are read either way: an unreadable declaration is a
    // `PlaybookParseError` with or without a license.
    let solvers = playbook::solver_names(&doc, name)?;
    if let Entitlement::License(license) = entitlement {
        license.check_solvers(&solvers)?;
    }
    let declared = declarations(&doc, name)?;
    let rules = declared.rules;

    let mut warnings = Vec::new();
    if !document.unknown_keys.is_empty() {
        warnings.push(format!(
            "{name}: unknown top-level keys ignored and not carried into the pack: {}",
            document.unknown_keys.join(", ")
        ));
    }
    for (i, r) in rules.iter().enumerate() {
        if !is_snake_case(&r.id) {
            warnings.push(format!(
                "{name}: rules[{i}] id `{}` is not lower snake case; its action will read `{}`",
                r.id,
                r.action_name()
            ));
        }
    }
    let text = Zeroizing::new(
        canonical::to_string(&Value::Object(doc.clone()))
            .map_err(|e| PlaybookError::Parse(format!("{name}: {e}")))?,
    );
    let plaintext = Zeroizing::new(text.as_bytes().to_vec());
    Ok(CompiledPlaybook {
        sha256: sha256_hex(&plaintext),
        version: playbook::pack_version(&doc),
        name: playbook::str_field(&doc, "name").map(str::to_string),
        pack_id,
        solvers,
        plaintext,
        warnings,
        rules,
        program: declared.program,
    })
}

impl CompiledPlaybook {
    /// The engine a pack of this playbook loads to ([§5](docs/formats.md#s5) step 7): its
    /// custom rules and the codons and hard rules it runs ([§16](docs/codons.md#s16)). An
    /// automaton the engine cannot build is the error.
    pub fn evaluator(&self) -> Result<crate::Evaluator, String> {
        crate::Evaluator::with_program(
            &self.pack_id,
            &self.version,
            &self.rules,
            std::sync::Arc::clone(&self.program),
        )
    }

    /// Seals the playbook for `license` ([§3](docs/formats.md#s3)): the key derived from its
    /// content key, `<pack_id>:<license_id>` as associated data, a fresh
    /// nonce. Checks nothing: the caller has verified the license and its
    /// entitlements. Only the license's content key and id are used; no
    /// issuer key is needed.
    pub fn seal(&self, license: &VerifiedLicense) -> Result<Vec<u8>, PackError> {
        let key = license.content_key().pack_key();
        container::seal(&self.pack_id, &license.license_id, &key, &self.plaintext)
    }
}

/// `helixor-pack compile`: checks, seals and writes the pack to `out`.
pub fn compile_file(
    playbook_path: &Path,
    license: &VerifiedLicense,
    out: &Path,
) -> Result<CompileOutput, Error> {
    let bytes = read_playbook(playbook_path)?;
    let compiled = compile_playbook(&bytes, &playbook_path.display().to_string(), license)?;
    let sealed = compiled.seal(license)?;
    write_atomic(out, &sealed)
        .map_err(|e| Error::io(format_args!("cannot write pack {}", out.display()), e))?;
    Ok(CompileOutput {
        pack_id: compiled.pack_id,
        version: compiled.version,
        sha256: compiled.sha256,
        path: out.to_path_buf(),
        bytes: sealed.len(),
        warnings: compiled.warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_no_plaintext_and_no_pattern() {
        let yaml = b"pack_id: custom.t.v1\nrules:\n  - {id: code, type: regex, pattern: 'PROJ-SECRET-[0-9]+', action: block}\n";
        let c = compile_in_memory(yaml, "t.yaml", Entitlement::PolicyTest).unwrap();
        let shown = format!("{c:?}");
        assert!(!shown.contains("SECRET"), "{shown}");
        assert!(shown.contains("plaintext_bytes: "), "{shown}");
        assert!(shown.contains("pack_id: \"custom.t.v1\""), "{shown}");
    }
}
