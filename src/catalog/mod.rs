//! Catalog packs (SPEC §14): a vendor serves its curated playbooks, and a
//! customer downloads each one sealed for the customer's own license.
//!
//! - [`Catalog`]: the playbooks of a directory, **compiled once** at start-up
//!   with every check of SPEC §4.2 that does not depend on a license
//!   ([`crate::compiler::compile_in_memory`] with
//!   [`Entitlement::PerLicense`]); a broken playbook stops start-up
//!   with its own error. Per request, [`Catalog::seal_for`] runs the license
//!   halves of §4.2 (the pack id against `licensed_packs`, the solvers against
//!   `licensed_solvers`) and **seals** the compiled plaintext with the key
//!   derived from that license's content key, bound to its `license_id`
//!   ([`crate::compiler::CompiledPlaybook::seal`]).
//! - [`server`]: `helixor-pack catalog serve`, the HTTP API (axum).
//! - [`client`]: `helixor-pack download-pack`, which runs every load-time
//!   check of SPEC §5 on the answer before writing it.
//!
//! The catalog never needs the vendor's signing key: it verifies licenses
//! with the issuer **public** keys, and a pack is sealed with the content key
//! the license itself carries. Verifying the signature is what keeps a forged
//! license (with `licensed_packs: ["*"]` and a content key of its author's
//! choosing) from unsealing the vendor's playbooks.

pub mod client;
pub mod server;

use crate::compiler::{self, CompiledPlaybook, Entitlement};
use crate::container::PackError;
use crate::license::{IssuerKeys, License};
use crate::playbook::PlaybookError;
use crate::Error;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use time::OffsetDateTime;

/// Environment variable naming the catalog of `download-pack`.
pub const CATALOG_URL_ENV: &str = "HELIXOR_CATALOG_URL";
/// Default address of `catalog serve`.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8090";
/// How a license sent to the catalog is named in messages.
pub const REQUEST_LICENSE_NAME: &str = "sent to the catalog";

/// One pack of the catalog as `GET /v1/catalog` lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CatalogItem {
    /// The pack id.
    pub pack_id: String,
    /// `version` as text (empty if absent).
    pub version: String,
    /// `name`, if the playbook has one.
    pub name: Option<String>,
}

/// The playbooks of a catalog, compiled, with the issuer keys that verify
/// the licenses of its customers.
#[derive(Debug)]
pub struct Catalog {
    packs: BTreeMap<String, CompiledPlaybook>,
    keys: IssuerKeys,
    /// Where the playbooks came from.
    pub source: PathBuf,
}

/// Whether a directory entry is a playbook of the catalog: `*.yaml` or
/// `*.yml`, not hidden.
fn is_playbook_name(name: &str) -> bool {
    !name.starts_with('.') && (name.ends_with(".yaml") || name.ends_with(".yml"))
}

impl Catalog {
    /// Compiles every playbook of `dir` (SPEC §4.2 without the license's
    /// steps). The first broken playbook is the error; two playbooks with
    /// one pack id are a `CompilerError` naming both; a missing directory or
    /// one with no playbook is a `PackNotFoundError` (a catalog of nothing).
    /// Returns the catalog and the compiler's warnings.
    pub fn load(dir: &Path, keys: IssuerKeys) -> Result<(Self, Vec<String>), Error> {
        if keys.is_empty() {
            return Err(Error::Config(format!(
                "the catalog has no issuer keys ({}): it could verify no license",
                keys.source()
            )));
        }
        let name = dir.display();
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(PackError::NotFound(format!(
                    "the playbook directory {name} does not exist"
                ))
                .into())
            }
            Err(e) => {
                return Err(PlaybookError::Compiler(format!(
                    "cannot list the playbook directory {name}: {e}"
                ))
                .into())
            }
        };
        let mut files: Vec<PathBuf> = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| {
                PlaybookError::Compiler(format!("cannot list the playbook directory {name}: {e}"))
            })?;
            if is_playbook_name(&entry.file_name().to_string_lossy()) {
                files.push(entry.path());
            }
        }
        files.sort();
        let mut playbooks = Vec::with_capacity(files.len());
        for file in &files {
            let bytes = compiler::read_playbook(file)?;
            playbooks.push(compiler::compile_in_memory(
                &bytes,
                &file.display().to_string(),
                Entitlement::PerLicense,
            )?);
        }
        let catalog = Self::from_compiled(playbooks, &files, keys, dir)?;
        let warnings = catalog
            .packs
            .values()
            .flat_map(|p| p.warnings.iter().cloned())
            .collect();
        Ok((catalog, warnings))
    }

    /// A catalog of compiled playbooks; `files[i]` names `playbooks[i]` in messages.
    fn from_compiled(
        playbooks: Vec<CompiledPlaybook>,
        files: &[PathBuf],
        keys: IssuerKeys,
        dir: &Path,
    ) -> Result<Self, Error> {
        if playbooks.is_empty() {
            return Err(PackError::NotFound(format!(
                "the playbook directory {} holds no playbook (*.yaml, *.yml)",
                dir.display()
            ))
            .into());
        }
        let mut packs: BTreeMap<String, CompiledPlaybook> = BTreeMap::new();
        let mut origin: BTreeMap<String, &Path> = BTreeMap::new();
        for (i, p) in playbooks.into_iter().enumerate() {
            let file = files.get(i).map_or(dir, PathBuf::as_path);
            if let Some(first) = origin.get(&p.pack_id) {
                return Err(PlaybookError::Compiler(format!(
                    "{} and {} both declare pack_id `{}`; pack ids must be unique in a catalog",
                    first.display(),
                    file.display(),
                    p.pack_id
                ))
                .into());
            }
            origin.insert(p.pack_id.clone(), file);
            packs.insert(p.pack_id.clone(), p);
        }
        Ok(Self {
            packs,
            keys,
            source: dir.to_path_buf(),
        })
    }

    /// The packs, sorted by id.
    pub fn items(&self) -> Vec<CatalogItem> {
        self.packs
            .values()
            .map(|p| CatalogItem {
                pack_id: p.pack_id.clone(),
                version: p.version.clone(),
                name: p.name.clone(),
            })
            .collect()
    }

    /// Whether the catalog holds `pack_id`.
    pub fn contains(&self, pack_id: &str) -> bool {
        self.packs.contains_key(pack_id)
    }

    /// How many packs the catalog holds.
    pub fn len(&self) -> usize {
        self.packs.len()
    }

    /// Whether the catalog holds no pack (never true for a loaded one).
    pub fn is_empty(&self) -> bool {
        self.packs.is_empty()
    }

    /// Parses a license sent in a request and checks it as SPEC §5 step 1
    /// does: its signature against the catalog's issuer keys, then its
    /// validity window at `now`.
    pub fn verify_license(&self, bytes: &[u8], now: OffsetDateTime) -> Result<License, Error> {
        let license = License::parse(bytes, REQUEST_LICENSE_NAME)?;
        license.verify(&self.keys)?;
        license.check_window(now)?;
        Ok(license)
    }

    /// The pack `pack_id` sealed for `license` (already verified): a
    /// `PackNotFoundError` for an id the catalog does not hold, a
    /// `LicenseEntitlementError` when `licensed_packs` do not allow the pack
    /// or `licensed_solvers` one of its solvers (SPEC §4.2 steps 4 and 5).
    pub fn seal_for(&self, pack_id: &str, license: &License) -> Result<Vec<u8>, Error> {
        let playbook = self
            .packs
            .get(pack_id)
            .ok_or_else(|| PackError::NotFound(format!("the catalog holds no pack `{pack_id}`")))?;
        license.check_catalog_pack(pack_id)?;
        license.check_solvers(&playbook.solvers)?;
        Ok(playbook.seal(license)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn playbook_names() {
        assert!(is_playbook_name("a.yaml"));
        assert!(is_playbook_name("a.yml"));
        assert!(!is_playbook_name(".a.yaml"));
        assert!(!is_playbook_name("a.yaml.bak"));
        assert!(!is_playbook_name("a.hxpack"));
    }
}
