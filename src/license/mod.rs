//! Licenses ([§2](docs/formats.md#s2)): parsing, Ed25519 verification against configured
//! issuer keys, the validity window, entitlements and the lookup order.
//! Holds the content key in zeroizing memory; never prints or logs it.

mod issue;
mod keys;

pub use issue::{issue_license, keygen, read_signing_key, IssueRequest, KeygenOutput};
pub(crate) use keys::parse_public_key;
pub use keys::{IssuerKeys, ISSUER_KEYS_ENV};

use crate::canonical;
use crate::capped::CappedError;
use crate::crypto::ContentKey;
use crate::error::{ErrorName, Named};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use zeroize::{Zeroize, Zeroizing};

/// The `format` value of a version-1 license.
pub const LICENSE_FORMAT: &str = "helixor.license.v1";
/// Largest license file read ([§2](docs/formats.md#s2)).
pub const MAX_LICENSE_BYTES: u64 = 64 * 1024;
/// Environment variable naming the license file.
pub const LICENSE_ENV: &str = "HELIXOR_LICENSE_FILE";
/// The feature that allows compiling and loading any pack id.
pub const FEATURE_CUSTOM_COMPILATION: &str = "custom_playbook_compilation";

/// License-layer errors: the `License*` names of [§4.3](docs/errors.md#s4-3).
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum LicenseError {
    /// No license at any place of the lookup order, or an explicit path is missing.
    #[error("{0}")]
    NotFound(String),
    /// Unreadable, too large, malformed or missing a field.
    #[error("{0}")]
    Invalid(String),
    /// Unknown issuer key, no keys, or a signature that does not verify.
    #[error("{0}")]
    Signature(String),
    /// Before `not_before`.
    #[error("{0}")]
    NotYetValid(String),
    /// At or after `not_after`.
    #[error("{0}")]
    Expired(String),
    /// Pack id or solver not allowed.
    #[error("{0}")]
    Entitlement(String),
    /// An output file (issued license, key pair) that cannot be written, or
    /// a license that cannot be read for want of a resource (file descriptors).
    #[error("{0}")]
    Io(String, #[source] Option<crate::error::Cause>),
}

crate::error::io_constructor!(LicenseError);

impl Named for LicenseError {
    fn name(&self) -> ErrorName {
        match self {
            Self::NotFound(_) => ErrorName::LicenseNotFoundError,
            Self::Invalid(_) => ErrorName::LicenseError,
            Self::Signature(_) => ErrorName::LicenseSignatureError,
            Self::NotYetValid(_) => ErrorName::LicenseNotYetValidError,
            Self::Expired(_) => ErrorName::LicenseExpiredError,
            Self::Entitlement(_) => ErrorName::LicenseEntitlementError,
            Self::Io(..) => ErrorName::IoError,
        }
    }
}

/// A parsed license, not yet trusted: reading, entitlements and the
/// window. Only [`License::verified`] (and [`License::load`] over it), which
/// parse a license's bytes, verify its signature and check its window,
/// yield the [`VerifiedLicense`] that opens or seals a pack. Its `Debug`
/// never shows the content key (nor the signed message, which holds it).
#[derive(Clone)]
pub struct License {
    /// Where it was read from (for messages).
    pub source: String,
    /// `license_id`, part of every pack's associated data.
    pub license_id: String,
    /// Who holds it.
    pub licensee: String,
    /// Informational tier.
    pub tier: String,
    /// When it was issued.
    pub issued_at: OffsetDateTime,
    /// Start of the validity window (inclusive).
    pub not_before: OffsetDateTime,
    /// End of the validity window (exclusive).
    pub not_after: OffsetDateTime,
    /// Globs of pack ids.
    pub licensed_packs: Vec<String>,
    /// Globs of solver names.
    pub licensed_solvers: Vec<String>,
    /// Feature flags.
    pub features: Vec<String>,
    /// Which issuer key signed it.
    pub issuer_key_id: String,
    content_key: ContentKey,
    signature: Vec<u8>,
    /// Canonical JSON of the signed fields; holds the content key, so zeroized.
    signed_message: Zeroizing<String>,
}

impl std::fmt::Debug for License {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("License")
            .field("source", &self.source)
            .field("license_id", &self.license_id)
            .field("licensee", &self.licensee)
            .field("tier", &self.tier)
            .field("issued_at", &self.issued_at)
            .field("not_before", &self.not_before)
            .field("not_after", &self.not_after)
            .field("licensed_packs", &self.licensed_packs)
            .field("licensed_solvers", &self.licensed_solvers)
            .field("features", &self.features)
            .field("issuer_key_id", &self.issuer_key_id)
            .field("content_key", &self.content_key)
            .field("signature", &crate::redacted::Redacted::of(&self.signature))
            .field(
                "signed_message",
                &crate::redacted::Redacted::of(self.signed_message.as_bytes()),
            )
            .finish()
    }
}

/// Where a license is in its validity window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// Before `not_before`.
    NotYetValid,
    /// Inside the window.
    Valid,
    /// At or after `not_after`.
    Expired,
}

/// Formats a time as [§1](docs/formats.md#s1) writes it: UTC, `Z`, whole seconds.
pub fn format_time(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// Parses an RFC 3339 time with any offset and fractional seconds.
pub fn parse_time(s: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(s.trim(), &Rfc3339).ok()
}

impl License {
    /// Reads a license file with the 64 KiB cap, then parses it.
    pub fn read(path: &Path) -> Result<Self, LicenseError> {
        Self::parse(&Self::read_bytes(path)?, &path.display().to_string())
    }

    /// The bytes of a license file, refused over 64 KiB before being read
    /// whole; zeroized when dropped (they hold the content key).
    pub fn read_bytes(path: &Path) -> Result<Zeroizing<Vec<u8>>, LicenseError> {
        let name = path.display();
        crate::capped::read_regular_file_capped(path, MAX_LICENSE_BYTES)
            .map(Zeroizing::new)
            .map_err(|e| match e {
                CappedError::Io(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    LicenseError::NotFound(format!("license file {name} does not exist"))
                }
                CappedError::Io(e) if crate::capped::is_exhaustion(&e) => {
                    LicenseError::io(format_args!("cannot read license file {name}"), e)
                }
                CappedError::Io(e) => {
                    LicenseError::Invalid(format!("cannot read license file {name}: {e}"))
                }
                CappedError::TooLarge => LicenseError::Invalid(format!(
                    "license file {name} is over the {MAX_LICENSE_BYTES}-byte limit"
                )),
            })
    }

    /// Parses license JSON; `name` is used in messages. Does not verify.
    pub fn parse(bytes: &[u8], name: &str) -> Result<Self, LicenseError> {
        let invalid = |detail: String| LicenseError::Invalid(format!("license {name}: {detail}"));
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| invalid(format!("not valid JSON: {e}")))?;
        let Value::Object(mut obj) = value else {
            return Err(invalid("the root is not a JSON object".into()));
        };
        let result = Self::from_object(&mut obj, name);
        // The parsed object holds the content key in base64: wipe it on every path.
        if let Some(Value::String(k)) = obj.get_mut("content_key") {
            k.zeroize();
        }
        result
    }

    fn from_object(obj: &mut Map<String, Value>, name: &str) -> Result<Self, LicenseError> {
        let invalid = |detail: String| LicenseError::Invalid(format!("license {name}: {detail}"));
        let signature_b64 = match obj.remove("signature") {
            Some(Value::String(s)) => s,
            Some(_) => return Err(invalid("field `signature` is not a string".into())),
            None => return Err(invalid("missing field `signature`".into())),
        };
        let signature = B64
            .decode(signature_b64.trim())
            .map_err(|_| invalid("field `signature` is not valid base64".into()))?;
        let mut message = Zeroizing::new(String::new());
        canonical::write_object(&mut message, obj, canonical::Escaping::Utf8)
            .map_err(|e| invalid(format!("cannot canonicalise: {e}")))?;
        let signed_message = message;
        let obj = &*obj;

        let format = string_field(obj, "format", &invalid)?;
        if format != LICENSE_FORMAT {
            return Err(invalid(format!(
                "field `format` is `{format}`, expected `{LICENSE_FORMAT}`"
            )));
        }
        let time_field = |field: &str| -> Result<OffsetDateTime, LicenseError> {
            let s = string_field(obj, field, &invalid)?;
            parse_time(&s)
                .ok_or_else(|| invalid(format!("field `{field}` is not an RFC 3339 time")))
        };
        let key_b64 = Zeroizing::new(string_field(obj, "content_key", &invalid)?);
        let key_bytes: Zeroizing<[u8; 32]> = B64
            .decode(key_b64.trim())
            .ok()
            .map(Zeroizing::new)
            .and_then(|v| <[u8; 32]>::try_from(v.as_slice()).ok())
            .map(Zeroizing::new)
            .ok_or_else(|| invalid("field `content_key` is not base64 of 32 bytes".into()))?;
        Ok(Self {
            source: name.to_string(),
            license_id: string_field(obj, "license_id", &invalid)?,
            licensee: string_field(obj, "licensee", &invalid)?,
            tier: string_field(obj, "tier", &invalid)?,
            issued_at: time_field("issued_at")?,
            not_before: time_field("not_before")?,
            not_after: time_field("not_after")?,
            licensed_packs: string_list(obj, "licensed_packs", &invalid)?,
            licensed_solvers: string_list(obj, "licensed_solvers", &invalid)?,
            features: string_list(obj, "features", &invalid)?,
            issuer_key_id: string_field(obj, "issuer_key_id", &invalid)?,
            content_key: ContentKey::from_bytes(*key_bytes),
            signature,
            signed_message,
        })
    }

    /// Checks the Ed25519 signature against the trusted issuer keys.
    pub fn verify(&self, keys: &IssuerKeys) -> Result<(), LicenseError> {
        if keys.is_empty() {
            return Err(LicenseError::Signature(format!(
                "license {}: no issuer keys are configured (use --issuer-keys, ${ISSUER_KEYS_ENV} or ~/.helixor/issuer-keys/)",
                self.source
            )));
        }
        let Some(key) = keys.get(&self.issuer_key_id) else {
            return Err(LicenseError::Signature(format!(
                "license {}: issuer key `{}` is not among the trusted issuer keys ({})",
                self.source,
                self.issuer_key_id,
                keys.source()
            )));
        };
        let sig = ed25519_dalek::Signature::from_slice(&self.signature).map_err(|_| {
            LicenseError::Signature(format!(
                "license {}: field `signature` is not a 64-byte Ed25519 signature",
                self.source
            ))
        })?;
        key.verify_strict(self.signed_message.as_bytes(), &sig).map_err(|_| {
            LicenseError::Signature(format!(
                "license {}: signature does not verify with issuer key `{}` (the license was altered or signed by another key)",
                self.source, self.issuer_key_id
            ))
        })
    }

    /// Where `now` falls in the validity window.
    pub fn window_at(&self, now: OffsetDateTime) -> Window {
        if now < self.not_before {
            Window::NotYetValid
        } else if now >= self.not_after {
            Window::Expired
        } else {
            Window::Valid
        }
    }

    /// Fails with the window's error outside `not_before <= now < not_after`.
    pub fn check_window(&self, now: OffsetDateTime) -> Result<(), LicenseError> {
        match self.window_at(now) {
            Window::Valid => Ok(()),
            Window::NotYetValid => Err(LicenseError::NotYetValid(format!(
                "license {} ({}) is not valid before {}",
                self.source,
                self.license_id,
                format_time(self.not_before)
            ))),
            Window::Expired => Err(LicenseError::Expired(format!(
                "license {} ({}) expired at {}",
                self.source,
                self.license_id,
                format_time(self.not_after)
            ))),
        }
    }

    /// Whole seconds until `not_after`, 0 once expired.
    pub fn seconds_left(&self, now: OffsetDateTime) -> i64 {
        (self.not_after - now).whole_seconds().max(0)
    }

    /// Whether the license may compile and load `pack_id` ([§4.2](docs/formats.md#s4-2) step 4, [§5](docs/formats.md#s5) step 3).
    pub fn check_pack(&self, pack_id: &str) -> Result<(), LicenseError> {
        if self
            .features
            .iter()
            .any(|f| f == FEATURE_CUSTOM_COMPILATION)
            || crate::glob::any_matches(&self.licensed_packs, pack_id)
        {
            Ok(())
        } else {
            Err(LicenseError::Entitlement(format!(
                "license {} ({}) does not allow pack `{pack_id}`: it matches no `licensed_packs` pattern and the license lacks the `{FEATURE_CUSTOM_COMPILATION}` feature",
                self.source, self.license_id
            )))
        }
    }

    /// Whether the license may download `pack_id` from a catalog ([§14](docs/catalog.md#s14)):
    /// only a `licensed_packs` pattern grants it; the
    /// `custom_playbook_compilation` feature (compiling one's own playbooks)
    /// does not grant a vendor's catalog packs.
    pub fn check_catalog_pack(&self, pack_id: &str) -> Result<(), LicenseError> {
        if crate::glob::any_matches(&self.licensed_packs, pack_id) {
            Ok(())
        } else {
            Err(LicenseError::Entitlement(format!(
                "license {} ({}) does not allow catalog pack `{pack_id}`: it matches no `licensed_packs` pattern (the `{FEATURE_CUSTOM_COMPILATION}` feature does not grant catalog packs)",
                self.source, self.license_id
            )))
        }
    }

    /// Whether every solver in `solvers` matches a `licensed_solvers` glob.
    pub fn check_solvers<S: AsRef<str>>(&self, solvers: &[S]) -> Result<(), LicenseError> {
        for s in solvers {
            let s = s.as_ref();
            if !crate::glob::any_matches(&self.licensed_solvers, s) {
                return Err(LicenseError::Entitlement(format!(
                    "license {} ({}) does not allow solver `{s}`: it matches no `licensed_solvers` pattern",
                    self.source, self.license_id
                )));
            }
        }
        Ok(())
    }

    /// Reads, verifies and window-checks the license at `path` ([§5](docs/formats.md#s5) step 1).
    pub fn load(
        path: &Path,
        keys: &IssuerKeys,
        now: OffsetDateTime,
    ) -> Result<VerifiedLicense, LicenseError> {
        let bytes = Self::read_bytes(path)?;
        Self::verified(&bytes, &path.display().to_string(), || Ok(keys), now)
    }

    /// [§5](docs/formats.md#s5) step 1, the one path from a license's bytes to a license
    /// that may open packs, whoever read the bytes (a file, a deployment
    /// snapshot, a catalog request): parse them (`name` is used in
    /// messages), then take the issuer keys, verify the signature and check
    /// the window at `now`. The keys are taken only once the license parsed,
    /// so an unreadable license is reported before missing keys.
    pub fn verified<K, E>(
        bytes: &[u8],
        name: &str,
        keys: impl FnOnce() -> Result<K, E>,
        now: OffsetDateTime,
    ) -> Result<VerifiedLicense, E>
    where
        K: std::borrow::Borrow<IssuerKeys>,
        E: From<LicenseError>,
    {
        let lic = Self::parse(bytes, name)?;
        let keys = keys()?;
        lic.verify(keys.borrow())?;
        lic.check_window(now)?;
        Ok(VerifiedLicense(lic))
    }
}

/// A license whose signature verified against the trusted issuer keys and
/// that was inside its validity window when checked ([§5](docs/formats.md#s5) step 1): what
/// every function that opens or seals a pack takes, so that an unverified
/// license cannot reach the content key.
///
/// Built only by [`License::verified`] (and [`License::load`] and
/// [`LicenseArgs::load`] over it); it reads as the [`License`] it wraps.
/// The window was checked at the `now` passed there: a long-lived holder
/// (serve mode) still watches `not_after` itself.
///
/// A pack opens only with one:
///
/// ```
/// fn open(bytes: &[u8], license: &helixor::VerifiedLicense) -> Result<(), helixor::Error> {
///     helixor::load_pack(bytes, "p.hxpack", license).map(drop)
/// }
/// ```
///
/// and a parsed license that skipped verification does not compile there:
///
/// ```compile_fail
/// fn open(bytes: &[u8], license: &helixor::License) -> Result<(), helixor::Error> {
///     helixor::load_pack(bytes, "p.hxpack", license).map(drop)
/// }
/// ```
#[derive(Debug, Clone)]
pub struct VerifiedLicense(License);

impl std::ops::Deref for VerifiedLicense {
    type Target = License;

    fn deref(&self) -> &License {
        &self.0
    }
}

impl VerifiedLicense {
    /// The content key (crate-internal: packs are sealed and opened with it).
    pub(crate) fn content_key(&self) -> &ContentKey {
        &self.0.content_key
    }
}

fn string_field(
    obj: &Map<String, Value>,
    field: &str,
    invalid: &dyn Fn(String) -> LicenseError,
) -> Result<String, LicenseError> {
    match obj.get(field) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(invalid(format!("field `{field}` is not a string"))),
        None => Err(invalid(format!("missing field `{field}`"))),
    }
}

fn string_list(
    obj: &Map<String, Value>,
    field: &str,
    invalid: &dyn Fn(String) -> LicenseError,
) -> Result<Vec<String>, LicenseError> {
    let bad = || invalid(format!("field `{field}` is not a list of strings"));
    match obj.get(field) {
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string).ok_or_else(bad))
            .collect(),
        Some(_) => Err(bad()),
        None => Err(invalid(format!("missing field `{field}`"))),
    }
}

/// `--license` and `--issuer-keys`, shared by every command that reads a license.
#[derive(Debug, Clone, Default)]
pub struct LicenseArgs {
    /// `--license PATH`.
    pub license: Option<PathBuf>,
    /// `--issuer-keys PATH`.
    pub issuer_keys: Option<PathBuf>,
    /// `--pack-signers PATH`: the trusted pack signers of the commands
    /// that load packs ([§17](docs/guides/signing.md#s17)); `None`: `$HELIXOR_PACK_SIGNERS`, else
    /// signatures are not checked.
    pub pack_signers: Option<PathBuf>,
}

impl LicenseArgs {
    /// Finds, reads, verifies and window-checks the license ([§5](docs/formats.md#s5) step 1).
    pub fn load(&self, now: OffsetDateTime) -> Result<VerifiedLicense, LicenseError> {
        self.load_with_bytes(now).map(|(lic, _)| lic)
    }

    /// [`LicenseArgs::load`], keeping the file's bytes (to send them on) in
    /// zeroizing memory.
    pub fn load_with_bytes(
        &self,
        now: OffsetDateTime,
    ) -> Result<(VerifiedLicense, Zeroizing<Vec<u8>>), LicenseError> {
        let path = resolve_license_path(self.license.as_deref())?;
        let bytes = License::read_bytes(&path)?;
        let keys = || IssuerKeys::resolve(self.issuer_keys.as_deref());
        let lic = License::verified(&bytes, &path.display().to_string(), keys, now)?;
        Ok((lic, bytes))
    }
}

/// The user's home directory, if known.
pub(crate) fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// Finds the license file ([§2](docs/formats.md#s2) lookup order): `explicit`, then
/// `$HELIXOR_LICENSE_FILE`, then `./helixor.hxlic`, `~/.helixor/helixor.hxlic`,
/// `~/.helixor/helixor.lic`. An explicit choice never falls back.
pub fn resolve_license_path(explicit: Option<&Path>) -> Result<PathBuf, LicenseError> {
    if let Some(p) = explicit {
        return exists_or_not_found(p, "--license");
    }
    if let Some(p) = std::env::var_os(LICENSE_ENV).filter(|v| !v.is_empty()) {
        return exists_or_not_found(Path::new(&p), &format!("${LICENSE_ENV}"));
    }
    let mut candidates = vec![PathBuf::from("helixor.hxlic")];
    if let Some(home) = home_dir() {
        candidates.push(home.join(".helixor").join("helixor.hxlic"));
        candidates.push(home.join(".helixor").join("helixor.lic"));
    }
    for c in &candidates {
        if c.is_file() {
            return Ok(c.clone());
        }
    }
    Err(LicenseError::NotFound(format!(
        "no license found: pass --license, set ${LICENSE_ENV}, or place one at {}",
        candidates
            .iter()
            .map(|c| c.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

fn exists_or_not_found(p: &Path, via: &str) -> Result<PathBuf, LicenseError> {
    if p.exists() {
        Ok(p.to_path_buf())
    } else {
        Err(LicenseError::NotFound(format!(
            "license file {} (from {via}) does not exist",
            p.display()
        )))
    }
}

#[cfg(test)]
mod tests;
