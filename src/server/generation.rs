//! Generations ([§9.2](docs/serve.md#s9-2), [§9.3](docs/serve.md#s9-3)): reading a deployment (license, issuer keys,
//! every `*.hxpack` of the packs directory, the token file) with its content
//! digests, and building an immutable generation from it with every check of
//! [§5](docs/formats.md#s5). Blocking file I/O only; knows nothing of HTTP, metrics or swapping.

use super::auth::TokenSet;
use crate::crypto::sha256;
use crate::error::Named;
use crate::license::{self, IssuerKeys, License, LicenseError, VerifiedLicense};
use crate::pack::{load_signed_pack, LoadedPack};
use crate::signature::{PackSigners, Sequences, SignatureFile};
use crate::{Error, PackError};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use time::OffsetDateTime;
use zeroize::Zeroizing;

/// Extension of the pack files read from the packs directory.
pub const PACK_EXTENSION: &str = "hxpack";

/// Where a deployment's files are (from the configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sources {
    /// License path; `None`: the [§2](docs/formats.md#s2) lookup order, re-run at every load.
    pub license: Option<PathBuf>,
    /// Issuer keys path; `None`: the [§2](docs/formats.md#s2) lookup order.
    pub issuer_keys: Option<PathBuf>,
    /// Trusted pack signers ([§17](docs/guides/signing.md#s17)); `None`: signatures not checked.
    pub pack_signers: Option<PathBuf>,
    /// The packs directory (may be a symlink, as in a Kubernetes volume).
    pub packs_dir: PathBuf,
    /// `auth.tokens_file`.
    pub tokens_file: Option<PathBuf>,
}

impl Sources {
    /// The sources named by a configuration.
    pub fn from_config(c: &super::config::Config) -> Self {
        Self {
            license: c.license.clone(),
            issuer_keys: c.issuer_keys.clone(),
            pack_signers: c.pack_signers.clone(),
            packs_dir: c.packs_dir.clone(),
            tokens_file: c.tokens_file.clone(),
        }
    }

    /// The directories whose changes may change the deployment: those holding
    /// the license, the issuer keys and the token file, the packs directory and
    /// its parent (where a Kubernetes volume swaps its `..data` symlink), and
    /// the directory of every symlink on the way to the license or the packs.
    pub fn watch_dirs(&self) -> Vec<PathBuf> {
        let parent = |p: &Path| -> PathBuf {
            match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                _ => PathBuf::from("."),
            }
        };
        // Where a symlink on the way to `p` lives: swapping that symlink
        // (Kubernetes' `..data`, a `current -> releases/N` link) changes `p`.
        let symlink_parents = |p: &Path, dirs: &mut Vec<PathBuf>| {
            for a in p.ancestors() {
                if a.as_os_str().is_empty() {
                    break;
                }
                if std::fs::symlink_metadata(a).is_ok_and(|m| m.file_type().is_symlink()) {
                    dirs.push(parent(a));
                }
            }
        };
        let mut dirs = Vec::new();
        let license_path = license::resolve_license_path(self.license.as_deref())
            .ok()
            .or_else(|| self.license.clone());
        if let Some(l) = license_path {
            dirs.push(parent(&l));
            symlink_parents(&l, &mut dirs);
        }
        dirs.push(self.packs_dir.clone());
        dirs.push(parent(&self.packs_dir));
        symlink_parents(&self.packs_dir, &mut dirs);
        let keys = self
            .issuer_keys
            .clone()
            .or_else(|| std::env::var_os(license::ISSUER_KEYS_ENV).map(PathBuf::from));
        if let Some(k) = keys {
            dirs.push(if k.is_dir() { k.clone() } else { parent(&k) });
        }
        if let Some(k) = &self.pack_signers {
            dirs.push(if k.is_dir() { k.clone() } else { parent(k) });
        }
        if let Some(t) = &self.tokens_file {
            dirs.push(parent(t));
        }
        let mut out: Vec<PathBuf> = Vec::new();
        for d in dirs {
            if !out.contains(&d) {
                out.push(d);
            }
        }
        out
    }
}

/// The digests of a deployment's files: equal fingerprints, same deployment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fingerprint(Vec<(String, [u8; 32])>);

impl Fingerprint {
    /// One hex digest over every component (for logs and status).
    pub fn hex(&self) -> String {
        let mut h = Sha256::new();
        for (name, d) in &self.0 {
            h.update(name.as_bytes());
            h.update([0]);
            h.update(d);
        }
        hex::encode(&h.finalize()[..8])
    }
}

/// A deployment as read from disk, before any check: every file's bytes, or
/// the error reading it gave (reported later, in the order of [§5](docs/formats.md#s5)).
pub struct Snapshot {
    license: Result<(PathBuf, Zeroizing<Vec<u8>>), Error>,
    keys: Result<IssuerKeys, Error>,
    signers: Result<Option<PackSigners>, Error>,
    /// Each pack file with its signature file, read together.
    packs: Result<Vec<(PathBuf, Vec<u8>, SignatureFile)>, Error>,
    tokens: Result<Option<(TokenSet, [u8; 32])>, Error>,
    /// Where the license and the packs directory led before reading.
    resolved: (Option<PathBuf>, Option<PathBuf>),
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("fingerprint", &self.fingerprint().map(|f| f.hex()))
            .finish()
    }
}

/// Whether a directory entry name is a pack file: `*.hxpack`, not hidden
/// (`..data`, `..2026_…`, editors' and `write_atomic`'s `.name.tmp` files).
pub fn is_pack_name(name: &str) -> bool {
    !name.starts_with('.')
        && name
            .strip_suffix(PACK_EXTENSION)
            .is_some_and(|stem| stem.len() > 1 && stem.ends_with('.'))
}

/// The pack files of `dir`, sorted by name, symlinks followed. Every entry
/// named `*.hxpack` belongs to the deployment ([§9.3](docs/serve.md#s9-3)): one that cannot be
/// resolved or is not a file (a dangling symlink, a symlink loop, a
/// permission error, a directory) is an error naming it, never skipped, so
/// that a reload cannot silently drop a pack.
pub fn list_pack_files(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let name = dir.display();
    let entries = std::fs::read_dir(dir).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            PackError::NotFound(format!("packs directory {name} does not exist"))
        } else if crate::capped::is_exhaustion(&e) {
            PackError::io(format_args!("packs directory {name} cannot be listed"), e)
        } else {
            PackError::NotFound(format!("packs directory {name} cannot be listed: {e}"))
        }
    })?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| {
            PackError::NotFound(format!("packs directory {name} cannot be listed: {e}"))
        })?;
        if !entry.file_name().to_str().is_some_and(is_pack_name) {
            continue;
        }
        let path = entry.path();
        // `metadata` follows symlinks, as the read will.
        match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => files.push(path),
            Ok(m) => {
                return Err(PackError::Format(format!(
                    "{}: cannot read pack: not a regular file ({})",
                    path.display(),
                    crate::capped::describe_type(m.file_type())
                ))
                .into())
            }
            Err(e) if crate::capped::is_exhaustion(&e) => {
                return Err(
                    PackError::io(format_args!("{}: cannot read pack", path.display()), e).into(),
                )
            }
            Err(e) => {
                return Err(
                    PackError::Format(format!("{}: cannot read pack: {e}", path.display())).into(),
                )
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Every pack of `dir` with its `.sig`: a pack and its signature are one
/// deployment ([§17](docs/guides/signing.md#s17)).
fn read_packs(dir: &Path) -> Result<Vec<(PathBuf, Vec<u8>, SignatureFile)>, Error> {
    list_pack_files(dir)?
        .into_iter()
        .map(|p| {
            let bytes = crate::container::read_pack_file(&p)?;
            let sig = SignatureFile::read_for(&p);
            Ok((p, bytes, sig))
        })
        .collect()
}

/// Where a path leads now (symlinks resolved), to detect a swap mid-read.
fn resolved(p: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(p).ok()
}

impl Snapshot {
    /// Reads every file of the deployment once. A Kubernetes volume swap
    /// that happens while reading is detected (the resolved paths of the
    /// license and the packs directory change) and the read is repeated, so
    /// license and packs come from one side of the swap.
    pub fn read(sources: &Sources) -> Self {
        let mut snapshot = Self::read_once(sources);
        for _ in 0..3 {
            if snapshot.resolved == Self::resolve_paths(sources) {
                break;
            }
            snapshot = Self::read_once(sources);
        }
        snapshot
    }

    fn resolve_paths(sources: &Sources) -> (Option<PathBuf>, Option<PathBuf>) {
        let license = license::resolve_license_path(sources.license.as_deref())
            .ok()
            .and_then(|p| resolved(&p));
        (license, resolved(&sources.packs_dir))
    }

    fn read_once(sources: &Sources) -> Self {
        let before = Self::resolve_paths(sources);
        let license = license::resolve_license_path(sources.license.as_deref())
            .map_err(Error::from)
            .and_then(|p| License::read_bytes(&p).map(|b| (p, b)).map_err(Error::from));
        let keys = IssuerKeys::resolve(sources.issuer_keys.as_deref()).map_err(Error::from);
        // Only the configuration names signers (its environment variable
        // included): nothing in the deployment can turn verification off.
        let signers = match &sources.pack_signers {
            Some(p) => PackSigners::from_path(p).map(Some).map_err(Error::from),
            None => Ok(None),
        };
        let packs = read_packs(&sources.packs_dir);
        let tokens = match &sources.tokens_file {
            Some(t) => TokenSet::read(t).map(Some),
            None => Ok(None),
        };
        Self {
            license,
            keys,
            signers,
            packs,
            tokens,
            resolved: before,
        }
    }

    /// The digests of everything read; `None` when something could not be read.
    pub fn fingerprint(&self) -> Option<Fingerprint> {
        let (lpath, lbytes) = self.license.as_ref().ok()?;
        let keys = self.keys.as_ref().ok()?;
        let packs = self.packs.as_ref().ok()?;
        let tokens = self.tokens.as_ref().ok()?;
        let mut parts = vec![(format!("license:{}", lpath.display()), sha256(lbytes))];
        let mut kh = Sha256::new();
        kh.update(keys.source().as_bytes());
        for id in keys.key_ids() {
            kh.update([0]);
            kh.update(id.as_bytes());
            if let Some(k) = keys.get(id) {
                kh.update(k.as_bytes());
            }
        }
        parts.push(("issuer_keys".into(), kh.finalize().into()));
        if let Some(signers) = self.signers.as_ref().ok()? {
            let mut sh = Sha256::new();
            sh.update(signers.source().as_bytes());
            for (id, k) in signers.keys() {
                sh.update([0]);
                sh.update(id.as_bytes());
                sh.update(k);
            }
            parts.push(("pack_signers".into(), sh.finalize().into()));
        }
        for (p, b, sig) in packs {
            parts.push((format!("pack:{}", p.display()), sha256(b)));
            // A signature added, changed or removed is a new deployment.
            if let Some(d) = sig.digest() {
                parts.push((format!("signature:{}", p.display()), d));
            }
        }
        if let Some((_, d)) = tokens {
            parts.push(("tokens".into(), *d));
        }
        Some(Fingerprint(parts))
    }
}

/// One pack of a generation, with where it came from.
#[derive(Debug)]
pub struct GenerationPack {
    /// The loaded pack and its engine.
    pub pack: LoadedPack,
    /// The file it was read from.
    pub path: PathBuf,
}

/// An immutable loaded deployment: what one request uses from start to end.
#[derive(Debug)]
pub struct Generation {
    /// Its number: 1 at start-up, then one more per successful reload.
    pub number: u64,
    /// When it was loaded.
    pub loaded_at: OffsetDateTime,
    /// The verified license (holds the content key: never serialise it).
    pub license: VerifiedLicense,
    /// The packs by id.
    pub packs: BTreeMap<String, LoadedPack>,
    /// The digests of the files it was built from.
    pub fingerprint: Fingerprint,
    /// Accepted bearer tokens, when `auth.tokens_file` is set.
    pub tokens: Option<TokenSet>,
    /// `license.not_after` as Unix seconds (for the expiry metric).
    pub not_after_unix: i64,
    /// `license.not_after` as Unix nanoseconds: the cached instant of [§9.6](docs/serve.md#s9-6).
    pub not_after_nanos: i128,
    /// The highest signature sequence loaded for each pack id by this
    /// process, this generation's included: what the next reload may not
    /// go below ([§17](docs/guides/signing.md#s17)).
    pub sequences: Sequences,
    /// Whether pack signatures were verified (signers configured).
    pub signed: bool,
}

impl Generation {
    /// Builds generation `number` from a snapshot with every check of [§5](docs/formats.md#s5) in
    /// order (license, then each pack), ids unique, at least one pack; with
    /// signers, no pack's signature sequence below `floor`'s for its id.
    pub fn build(
        snapshot: Snapshot,
        number: u64,
        now: OffsetDateTime,
        floor: &Sequences,
    ) -> Result<Self, Error> {
        let fingerprint = snapshot.fingerprint().unwrap_or_default();
        let (lpath, lbytes) = snapshot.license?;
        let keys = || snapshot.keys;
        let license = License::verified(&lbytes, &lpath.display().to_string(), keys, now)?;
        let signers = snapshot.signers?;
        let files = snapshot.packs?;
        let mut packs: BTreeMap<String, LoadedPack> = BTreeMap::new();
        let mut sequences = floor.clone();
        for (path, bytes, sig) in files {
            let source = path.display().to_string();
            let pack = load_signed_pack(&bytes, &sig, &source, &license, signers.as_ref());
            let pack = pack.map_err(|e| match e {
                // A reload names the file that does not open with the license.
                Error::Pack(PackError::Unseal) => PackError::UnsealIn(source.clone()).into(),
                other => other,
            })?;
            if let Some(other) = packs.get(&pack.pack_id) {
                return Err(PackError::Format(format!(
                    "{} and {} both hold pack `{}`; pack ids must be unique",
                    other.source, pack.source, pack.pack_id
                ))
                .into());
            }
            if let Some(s) = pack.signature.as_ref().filter(|s| s.verified) {
                floor.check(&pack.pack_id, s.sequence, &source)?;
                sequences.record(&pack.pack_id, s.sequence);
            }
            packs.insert(pack.pack_id.clone(), pack);
        }
        let tokens = snapshot.tokens?.map(|(t, _)| t);
        // The start-up order of [§9.2](docs/serve.md#s9-2): the packs directory is read after the license.
        if packs.is_empty() {
            return Err(PackError::NotFound(
                "no *.hxpack file in the packs directory: a deployment holds at least one pack"
                    .into(),
            )
            .into());
        }
        Ok(Self {
            number,
            loaded_at: now,
            not_after_unix: license.not_after.unix_timestamp(),
            not_after_nanos: license.not_after.unix_timestamp_nanos(),
            license,
            packs,
            fingerprint,
            tokens,
            sequences,
            signed: signers.is_some(),
        })
    }

    /// Reads and builds in one step (start-up).
    pub fn load(sources: &Sources, number: u64) -> Result<Self, Error> {
        Self::build(
            Snapshot::read(sources),
            number,
            OffsetDateTime::now_utc(),
            &Sequences::default(),
        )
    }

    /// Whether the license has expired at `now_unix_nanos` (Unix nanoseconds).
    pub fn expired_at(&self, now_unix_nanos: i128) -> bool {
        now_unix_nanos >= self.not_after_nanos
    }

    /// The `LicenseExpiredError` of an expired license.
    pub fn expired_error(&self) -> Error {
        LicenseError::Expired(format!(
            "license {} expired at {}: deploy a renewed license with its recompiled packs",
            self.license.license_id,
            license::format_time(self.license.not_after)
        ))
        .into()
    }
}

/// The name and message of an error, for status and reload answers.
pub fn describe(e: &Error) -> (&'static str, String) {
    (e.name().as_str(), e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_names() {
        assert!(is_pack_name("a.hxpack"));
        assert!(is_pack_name("compliance.regulatory_pii_guard.v1.hxpack"));
        assert!(!is_pack_name(".a.hxpack"));
        assert!(!is_pack_name("..data"));
        assert!(!is_pack_name(".a.hxpack.1234.tmp"));
        assert!(!is_pack_name("a.hxpack~"));
        assert!(!is_pack_name("hxpack"));
        assert!(!is_pack_name(".hxpack"));
        assert!(!is_pack_name("ahxpack"));
    }

    #[test]
    fn missing_packs_dir_is_pack_not_found() {
        let e = list_pack_files(Path::new("/nonexistent/helixor/packs")).unwrap_err();
        assert_eq!(e.name(), crate::ErrorName::PackNotFoundError);
    }

    /// A `*.hxpack` entry that cannot be resolved fails the listing with its
    /// name: a reload must never drop a pack silently ([§9.3](docs/serve.md#s9-3)).
    #[test]
    fn unresolvable_pack_entries_fail_naming_the_file() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.hxpack"), b"x").unwrap();
        // Hidden entries and other names are not the deployment's.
        symlink("nowhere", dir.path().join(".b.hxpack")).unwrap();
        symlink("nowhere", dir.path().join("notes.txt")).unwrap();
        assert_eq!(
            list_pack_files(dir.path()).unwrap(),
            [dir.path().join("a.hxpack")]
        );
        type Make = fn(&Path);
        let cases: [(&str, Make); 3] = [
            ("dangling.hxpack", |p| symlink("gone.hxpack", p).unwrap()),
            ("loop.hxpack", |p| {
                symlink(p.file_name().unwrap(), p).unwrap()
            }),
            ("dir.hxpack", |p| std::fs::create_dir(p).unwrap()),
        ];
        for (name, make) in cases {
            let p = dir.path().join(name);
            make(&p);
            let e = list_pack_files(dir.path()).unwrap_err();
            assert_eq!(e.name(), crate::ErrorName::PackFormatError, "{name}");
            assert!(e.to_string().contains(name), "{name}: {e}");
            std::fs::remove_file(&p)
                .or_else(|_| std::fs::remove_dir(&p))
                .unwrap();
        }
    }
}
