//! Trusted issuer public keys ([§2](docs/formats.md#s2)): a JSON file or a directory of
//! `<key_id>.pub` files, found by the lookup order. Never reads `.key` files.

use super::{home_dir, LicenseError};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ed25519_dalek::VerifyingKey;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Environment variable naming the issuer keys.
pub const ISSUER_KEYS_ENV: &str = "HELIXOR_ISSUER_KEYS";
const MAX_KEYS_FILE_BYTES: u64 = 1024 * 1024;

/// The issuer public keys a runtime trusts, by key id.
#[derive(Debug, Clone, Default)]
pub struct IssuerKeys {
    keys: BTreeMap<String, VerifyingKey>,
    source: String,
}

impl IssuerKeys {
    /// No keys at all: every license fails verification.
    pub fn none() -> Self {
        Self {
            keys: BTreeMap::new(),
            source: "no issuer keys configured".into(),
        }
    }

    /// Keys given directly (tests and embedding).
    pub fn from_keys(keys: impl IntoIterator<Item = (String, VerifyingKey)>, source: &str) -> Self {
        Self {
            keys: keys.into_iter().collect(),
            source: source.into(),
        }
    }

    /// Whether no key is configured.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The key with this id.
    pub fn get(&self, key_id: &str) -> Option<&VerifyingKey> {
        self.keys.get(key_id)
    }

    /// Where the keys came from, for messages.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The key ids, sorted.
    pub fn key_ids(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }

    /// Resolves the keys by the lookup order: `explicit`, `$HELIXOR_ISSUER_KEYS`,
    /// then `~/.helixor/issuer-keys/` (absent there means no keys).
    pub fn resolve(explicit: Option<&Path>) -> Result<Self, LicenseError> {
        if let Some(p) = explicit {
            return Self::from_path(p);
        }
        if let Some(p) = std::env::var_os(ISSUER_KEYS_ENV).filter(|v| !v.is_empty()) {
            return Self::from_path(Path::new(&p));
        }
        if let Some(home) = home_dir() {
            let dir: PathBuf = home.join(".helixor").join("issuer-keys");
            if dir.is_dir() {
                return Self::from_path(&dir);
            }
        }
        Ok(Self::none())
    }

    /// Reads a keys JSON file or a directory of `*.pub` files.
    pub fn from_path(path: &Path) -> Result<Self, LicenseError> {
        let name = path.display().to_string();
        let meta = std::fs::metadata(path)
            .map_err(|e| LicenseError::Invalid(format!("issuer keys {name}: cannot read: {e}")))?;
        let mut keys = BTreeMap::new();
        if meta.is_dir() {
            let entries = std::fs::read_dir(path).map_err(|e| {
                LicenseError::Invalid(format!("issuer keys {name}: cannot list directory: {e}"))
            })?;
            let mut files: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                // Every `*.pub` entry is a key: one that is not a regular
                // file (a FIFO, a dangling link) fails the load naming it,
                // never silently leaves a key out.
                .filter(|p| p.extension().is_some_and(|x| x == "pub"))
                .collect();
            files.sort();
            for file in files {
                let fname = file.display().to_string();
                let key_id = file
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let text = read_capped(&file, 4096)
                    .map_err(|e| LicenseError::Invalid(format!("issuer key file {fname}: {e}")))?;
                let text = String::from_utf8(text).map_err(|_| {
                    LicenseError::Invalid(format!("issuer key file {fname}: not UTF-8 text"))
                })?;
                let key = parse_public_key(text.trim()).ok_or_else(|| {
                    LicenseError::Invalid(format!(
                        "issuer key file {fname}: not a base64 32-byte Ed25519 public key"
                    ))
                })?;
                keys.insert(key_id, key);
            }
        } else {
            let bytes = read_capped(path, MAX_KEYS_FILE_BYTES)
                .map_err(|e| LicenseError::Invalid(format!("issuer keys {name}: {e}")))?;
            let map: BTreeMap<String, serde_json::Value> =
                serde_json::from_slice(&bytes).map_err(|e| {
                    LicenseError::Invalid(format!(
                        "issuer keys {name}: not a JSON object of key id to base64 public key: {e}"
                    ))
                })?;
            for (key_id, v) in map {
                let key = v.as_str().and_then(|s| parse_public_key(s.trim())).ok_or_else(|| {
                    LicenseError::Invalid(format!("issuer keys {name}: key `{key_id}` is not a base64 32-byte Ed25519 public key"))
                })?;
                keys.insert(key_id, key);
            }
        }
        Ok(Self { keys, source: name })
    }
}

/// Decodes a base64 32-byte Ed25519 public key.
pub(crate) fn parse_public_key(b64: &str) -> Option<VerifyingKey> {
    let bytes = B64.decode(b64).ok()?;
    let arr: [u8; 32] = bytes.as_slice().try_into().ok()?;
    VerifyingKey::from_bytes(&arr).ok()
}

fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, String> {
    crate::capped::read_regular_file_capped(path, cap).map_err(|e| match e {
        crate::capped::CappedError::Io(e) => format!("cannot read: {e}"),
        crate::capped::CappedError::TooLarge => format!("over the {cap}-byte limit"),
    })
}
