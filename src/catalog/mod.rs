//! Catalog packs ([§14](docs/catalog.md#s14)): a vendor serves its curated playbooks, and a
//! customer downloads each one sealed for the customer's own license.
//!
//! - [`Catalog`]: the playbooks of a directory, **compiled once** at start-up
//!   with every check of [§4.2](docs/formats.md#s4-2) that does not depend on a license
//!   ([`crate::compile_in_memory`] with
//!   [`Entitlement::PerLicense`]); a broken playbook stops start-up
//!   with its own error. Per request, [`Catalog::seal_for`] runs the license
//!   halves of [§4.2](docs/formats.md#s4-2) (the pack id against `licensed_packs`, the solvers against
//!   `licensed_solvers`) and **seals** the compiled plaintext with the key
//!   derived from that license's content key, bound to its `license_id`
//!   ([`crate::CompiledPlaybook::seal`]).
//! - [`server`]: `helixor-pack catalog serve`, the HTTP API (axum).
//! - [`client`]: `helixor-pack download-pack`, which runs every load-time
//!   check of [§5](docs/formats.md#s5) on the answer before writing it.
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
use crate::license::{IssuerKeys, License, VerifiedLicense};
use crate::playbook::PlaybookError;
use crate::signature::PackSignature;
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

/// The response header that carries a served pack's signature file,
/// base64-encoded ([§17](docs/guides/signing.md#s17)).
pub const SIGNATURE_HEADER: &str = "x-helixor-pack-signature";

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
/// the licenses of its customers. Its `Debug` shows pack ids, never a
/// playbook.
pub struct Catalog {
    packs: BTreeMap<String, CompiledPlaybook>,
    keys: IssuerKeys,
    /// The key id and secret key it signs what it serves with
    /// ([§17](docs/guides/signing.md#s17)); zeroized on drop, never shown.
    signer: Option<(String, ed25519_dalek::SigningKey)>,
    /// Where the playbooks came from.
    pub source: PathBuf,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field("packs", &self.packs.keys().collect::<Vec<_>>())
            .field("issuer_keys", &self.keys.source())
            .field("signed_by", &self.signer.as_ref().map(|(id, _)| id))
            .field("source", &self.source)
            .finish()
    }
}

/// Whether a directory entry is a playbook of the catalog: `*.yaml` or
/// `*.yml`, not hidden, and not a policy test file (`*.test.yaml` beside
/// its playbook, [§13](docs/policy-tests.md#s13)).
fn is_playbook_name(name: &str) -> bool {
    !name.starts_with('.')
        && (name.ends_with(".yaml") || name.ends_with(".yml"))
        && !name.ends_with(crate::policy_test::TEST_FILE_SUFFIX)
        && !name.ends_with(".test.yml")
}

impl Catalog {
    /// Compiles every playbook of `dir` ([§4.2](docs/formats.md#s4-2) without the license's
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
            signer: None,
            source: dir.to_path_buf(),
        })
    }

    /// Signs every pack it serves with `key` as `key_id` ([§17](docs/guides/signing.md#s17)).
    #[must_use]
    pub fn with_signer(mut self, key_id: String, key: ed25519_dalek::SigningKey) -> Self {
        self.signer = Some((key_id, key));
        self
    }

    /// The signature of a pack it sealed, when it has a signing key: the
    /// file's text, sequence `now` in Unix seconds.
    pub fn sign(&self, pack: &[u8], now: OffsetDateTime) -> Option<Result<String, Error>> {
        let (key_id, key) = self.signer.as_ref()?;
        let sequence = u64::try_from(now.unix_timestamp()).unwrap_or_default();
        Some(
            PackSignature::sign(pack, "the sealed pack", key_id, key, sequence, now)
                .map(|s| s.to_file_text())
                .map_err(Error::from),
        )
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

    /// Parses a license sent in a request and checks it as [§5](docs/formats.md#s5) step 1
    /// does: its signature against the catalog's issuer keys, then its
    /// validity window at `now`.
    pub fn verify_license(
        &self,
        bytes: &[u8],
        now: OffsetDateTime,
    ) -> Result<VerifiedLicense, Error> {
        let keys = || Ok::<_, Error>(&self.keys);
        License::verified(bytes, REQUEST_LICENSE_NAME, keys, now)
    }

    /// The pack `pack_id` sealed for `license` (already verified): a
    /// `PackNotFoundError` for an id the catalog does not hold, a
    /// `LicenseEntitlementError` when `licensed_packs` do not allow the pack
    /// or `licensed_solvers` one of its solvers ([§4.2](docs/formats.md#s4-2) steps 4 and 5).
    pub fn seal_for(&self, pack_id: &str, license: &VerifiedLicense) -> Result<Vec<u8>, Error> {
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
    use crate::error::{ErrorName, Named};
    use crate::license::{issue_license, keygen, IssueRequest};

    /// A catalog's directory, the catalog loaded from it, and a license body.
    type Setup = (
        tempfile::TempDir,
        Result<(Catalog, Vec<String>), Error>,
        Vec<u8>,
    );

    /// A catalog of `playbooks` (file name, YAML) in a temporary directory,
    /// and a license of its issuer for `packs` and `solvers`.
    fn setup(
        playbooks: &[(&str, &str)],
        packs: &[&str],
        solvers: &[&str],
        features: &[&str],
    ) -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let keys_dir = tmp.path().join("keys");
        let kg = keygen("cat-issuer", &keys_dir).unwrap();
        let dir = tmp.path().join("playbooks");
        std::fs::create_dir_all(&dir).unwrap();
        for (name, yaml) in playbooks {
            std::fs::write(dir.join(name), yaml).unwrap();
        }
        let now = OffsetDateTime::now_utc();
        let lic = tmp.path().join("lic.hxlic");
        issue_license(&IssueRequest {
            issuer_key: kg.secret_path,
            license_id: "lic_cat_0001".into(),
            licensee: "Customer".into(),
            tier: "ENTERPRISE".into(),
            packs: packs.iter().map(|s| s.to_string()).collect(),
            solvers: solvers.iter().map(|s| s.to_string()).collect(),
            features: features.iter().map(|s| s.to_string()).collect(),
            not_before: now - time::Duration::hours(1),
            not_after: now + time::Duration::days(1),
            issued_at: now,
            out: lic.clone(),
        })
        .unwrap();
        let keys = IssuerKeys::from_path(&keys_dir).unwrap();
        let catalog = Catalog::load(&dir, keys);
        let body = std::fs::read(&lic).unwrap();
        (tmp, catalog, body)
    }

    const IDS: &str = "pack_id: custom.ids.v1\nversion: 2\nname: Ids\nrules:\n  - id: ticket\n    type: regex\n    pattern: 'TCK-\\d{6}'\n    action: redact\n";
    const SOLVING: &str = "pack_id: custom.solving.v1\nsolvers: [z3]\n";

    #[test]
    fn compiled_once_sealed_per_license() {
        let (_tmp, catalog, body) = setup(
            &[
                ("ids.yaml", IDS),
                ("solving.yml", SOLVING),
                (".hidden.yaml", "not: [yaml"),
            ],
            &["custom.*"],
            &["z3"],
            &[],
        );
        let (catalog, warnings) = catalog.unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(catalog.len(), 2);
        assert!(!format!("{catalog:?}").contains("TCK"), "{catalog:?}");
        assert_eq!(
            catalog.items()[0],
            CatalogItem {
                pack_id: "custom.ids.v1".into(),
                version: "2".into(),
                name: Some("Ids".into()),
            }
        );
        let license = catalog
            .verify_license(&body, OffsetDateTime::now_utc())
            .unwrap();
        let a = catalog.seal_for("custom.ids.v1", &license).unwrap();
        let b = catalog.seal_for("custom.ids.v1", &license).unwrap();
        // A fresh nonce each time; both open with the license ([§5](docs/formats.md#s5)).
        assert_ne!(a, b);
        for bytes in [&a, &b] {
            let pack = crate::pack::load_pack(bytes, "t", &license).unwrap();
            assert_eq!(pack.pack_id, "custom.ids.v1");
            assert_eq!(
                pack.evaluator.evaluate("see TCK-123456").action,
                "redact_ticket"
            );
        }
        assert!(catalog.seal_for("custom.solving.v1", &license).is_ok());
        let e = catalog.seal_for("custom.none.v1", &license).unwrap_err();
        assert_eq!(e.name(), ErrorName::PackNotFoundError);
    }

    #[test]
    fn entitlements_are_checked_per_request() {
        // Solvers not licensed; the feature grants no catalog pack.
        let (_tmp, catalog, body) = setup(
            &[("ids.yaml", IDS), ("solving.yaml", SOLVING)],
            &["custom.solving.*"],
            &[],
            &["custom_playbook_compilation"],
        );
        let (catalog, _) = catalog.unwrap();
        let license = catalog
            .verify_license(&body, OffsetDateTime::now_utc())
            .unwrap();
        let e = catalog.seal_for("custom.solving.v1", &license).unwrap_err();
        assert_eq!(e.name(), ErrorName::LicenseEntitlementError);
        assert!(e.to_string().contains("solver `z3`"), "{e}");
        let e = catalog.seal_for("custom.ids.v1", &license).unwrap_err();
        assert_eq!(e.name(), ErrorName::LicenseEntitlementError);
        assert!(
            e.to_string().contains("does not grant catalog packs"),
            "{e}"
        );
        // A license edited after signing does not verify; one past its window is expired.
        let mut edited: serde_json::Value = serde_json::from_slice(&body).unwrap();
        edited["licensed_packs"] = serde_json::json!(["*"]);
        let e = catalog
            .verify_license(edited.to_string().as_bytes(), OffsetDateTime::now_utc())
            .unwrap_err();
        assert_eq!(e.name(), ErrorName::LicenseSignatureError);
        let later = OffsetDateTime::now_utc() + time::Duration::days(2);
        let e = catalog.verify_license(&body, later).unwrap_err();
        assert_eq!(e.name(), ErrorName::LicenseExpiredError);
    }

    #[test]
    fn broken_or_empty_catalogs_are_refused() {
        let bad = "pack_id: custom.bad.v1\nrules:\n  - id: r\n    type: regex\n    pattern: '(?=x)'\n    action: redact\n";
        let (_t, c, _) = setup(&[("ids.yaml", IDS), ("bad.yaml", bad)], &["*"], &[], &[]);
        assert_eq!(
            c.unwrap_err().name(),
            ErrorName::UnsupportedPackDeclarationError
        );
        let (_t, c, _) = setup(&[("a.yaml", IDS), ("b.yaml", IDS)], &["*"], &[], &[]);
        let e = c.unwrap_err();
        assert_eq!(e.name(), ErrorName::CompilerError);
        assert!(
            e.to_string()
                .contains("both declare pack_id `custom.ids.v1`"),
            "{e}"
        );
        let (_t, c, _) = setup(&[("readme.txt", "x")], &["*"], &[], &[]);
        assert_eq!(c.unwrap_err().name(), ErrorName::PackNotFoundError);
        let e = Catalog::load(Path::new("/nonexistent/playbooks"), IssuerKeys::none()).unwrap_err();
        assert_eq!(e.name(), ErrorName::ConfigError);
    }

    #[test]
    fn playbook_names() {
        assert!(is_playbook_name("a.yaml"));
        assert!(is_playbook_name("a.yml"));
        assert!(!is_playbook_name(".a.yaml"));
        assert!(!is_playbook_name("a.yaml.bak"));
        // Policy tests live beside their playbooks.
        assert!(!is_playbook_name("a.test.yaml"));
        assert!(!is_playbook_name("a.test.yml"));
        assert!(!is_playbook_name("a.hxpack"));
    }
}
