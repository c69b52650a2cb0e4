//! Issuing ([§2](docs/formats.md#s2), [§8](docs/cli.md#s8) `license keygen|issue`): Ed25519 issuer key pairs and
//! signed licenses for self-hosted deployments, tests and the demo. The
//! secret seed is held in zeroizing memory and only ever written to `.key`.

use super::{format_time, LicenseError, LICENSE_FORMAT};
use crate::atomic::{write_atomic, write_atomic_as, Access};
use crate::canonical;
use crate::crypto::{random_bytes, ContentKey};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ed25519_dalek::{Signer, SigningKey};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use time::OffsetDateTime;
use zeroize::Zeroizing;

/// What `keygen` wrote.
#[derive(Debug, Clone)]
pub struct KeygenOutput {
    /// `DIR/ID.key`, the secret seed (mode 0600).
    pub secret_path: PathBuf,
    /// `DIR/ID.pub`, the base64 public key.
    pub public_path: PathBuf,
    /// The base64 public key.
    pub public_key: String,
}

fn io_err(path: &Path, e: impl std::error::Error + Send + Sync + 'static) -> LicenseError {
    LicenseError::io(format_args!("cannot write {}", path.display()), e)
}

/// Writes `bytes` to `path` with mode 0600, atomically (key material).
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), LicenseError> {
    write_atomic_as(path, bytes, Access::Private).map_err(|e| io_err(path, e))
}

/// Generates an issuer key pair into `dir` as `ID.key` and `ID.pub`.
pub fn keygen(key_id: &str, dir: &Path) -> Result<KeygenOutput, LicenseError> {
    if key_id.is_empty() || key_id.contains(['/', '\\']) || key_id.starts_with('.') {
        return Err(LicenseError::Invalid(format!(
            "key id `{key_id}` is not usable as a file name"
        )));
    }
    std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
    let seed = Zeroizing::new(random_bytes::<32>().map_err(|e| io_err(dir, e))?);
    let signing = SigningKey::from_bytes(&seed);
    let public_key = B64.encode(signing.verifying_key().as_bytes());
    let secret_json = Zeroizing::new(
        serde_json::to_string_pretty(
            &json!({"key_id": key_id, "secret_key": B64.encode(seed.as_ref())}),
        )
        .map_err(|e| io_err(dir, e))?,
    );
    let secret_path = dir.join(format!("{key_id}.key"));
    let public_path = dir.join(format!("{key_id}.pub"));
    write_private(
        &secret_path,
        format!("{}\n", secret_json.as_str()).as_bytes(),
    )?;
    write_atomic(&public_path, format!("{public_key}\n").as_bytes())
        .map_err(|e| io_err(&public_path, e))?;
    Ok(KeygenOutput {
        secret_path,
        public_path,
        public_key,
    })
}

/// Reads an issuer secret key file written by [`keygen`].
pub fn read_signing_key(path: &Path) -> Result<(String, SigningKey), LicenseError> {
    let name = path.display();
    let text =
        Zeroizing::new(std::fs::read_to_string(path).map_err(|e| {
            LicenseError::Invalid(format!("issuer key file {name}: cannot read: {e}"))
        })?);
    let v: Value = serde_json::from_str(&text).map_err(|_| {
        LicenseError::Invalid(format!("issuer key file {name}: not a JSON key file"))
    })?;
    let key_id = v
        .get("key_id")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            LicenseError::Invalid(format!("issuer key file {name}: missing field `key_id`"))
        })?
        .to_string();
    let seed = v
        .get("secret_key")
        .and_then(Value::as_str)
        .and_then(|s| B64.decode(s.trim()).ok())
        .map(Zeroizing::new)
        .and_then(|b| <[u8; 32]>::try_from(b.as_slice()).ok().map(Zeroizing::new))
        .ok_or_else(|| {
            LicenseError::Invalid(format!(
                "issuer key file {name}: field `secret_key` is not base64 of 32 bytes"
            ))
        })?;
    Ok((key_id, SigningKey::from_bytes(&seed)))
}

/// The fields of a license to issue.
#[derive(Debug, Clone)]
pub struct IssueRequest {
    /// The issuer's secret key file.
    pub issuer_key: PathBuf,
    /// `license_id`.
    pub license_id: String,
    /// `licensee`.
    pub licensee: String,
    /// `tier`.
    pub tier: String,
    /// `licensed_packs` globs.
    pub packs: Vec<String>,
    /// `licensed_solvers` globs.
    pub solvers: Vec<String>,
    /// `features`.
    pub features: Vec<String>,
    /// Start of validity.
    pub not_before: OffsetDateTime,
    /// End of validity.
    pub not_after: OffsetDateTime,
    /// Issue time.
    pub issued_at: OffsetDateTime,
    /// Where to write it.
    pub out: PathBuf,
}

/// Signs a license with a fresh random content key and writes it (mode 0600).
pub fn issue_license(req: &IssueRequest) -> Result<(), LicenseError> {
    if req.not_after <= req.not_before {
        return Err(LicenseError::Invalid(
            "not_after must be later than not_before".into(),
        ));
    }
    let (key_id, signing) = read_signing_key(&req.issuer_key)?;
    let content_key = ContentKey::generate().map_err(|e| io_err(&req.out, e))?;
    let mut obj = Map::new();
    obj.insert("format".into(), json!(LICENSE_FORMAT));
    obj.insert("license_id".into(), json!(req.license_id));
    obj.insert("licensee".into(), json!(req.licensee));
    obj.insert("tier".into(), json!(req.tier));
    obj.insert("issued_at".into(), json!(format_time(req.issued_at)));
    obj.insert("not_before".into(), json!(format_time(req.not_before)));
    obj.insert("not_after".into(), json!(format_time(req.not_after)));
    obj.insert("licensed_packs".into(), json!(req.packs));
    obj.insert("licensed_solvers".into(), json!(req.solvers));
    obj.insert("features".into(), json!(req.features));
    obj.insert(
        "content_key".into(),
        json!(B64.encode(content_key.as_bytes())),
    );
    obj.insert("issuer_key_id".into(), json!(key_id));
    let message = Zeroizing::new(
        canonical::to_string(&Value::Object(obj.clone()))
            .map_err(|e| LicenseError::Invalid(e.to_string()))?,
    );
    let sig = signing.sign(message.as_bytes());
    obj.insert("signature".into(), json!(B64.encode(sig.to_bytes())));
    let text = Zeroizing::new(
        serde_json::to_string_pretty(&Value::Object(obj)).map_err(|e| io_err(&req.out, e))?,
    );
    write_private(&req.out, format!("{}\n", text.as_str()).as_bytes())
}
