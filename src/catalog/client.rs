//! `helixor-pack download-pack` ([§14](docs/catalog.md#s14)): sends the license to a catalog,
//! loads the answer with every check of [§5](docs/formats.md#s5) (license, header,
//! entitlement, decryption, integrity, solvers, declarations) and only then
//! writes it, atomically. On any failure nothing is written, and a file
//! already at the output path is left as it was.
//!
//! Errors, by the names of [§4.3](docs/errors.md#s4-3):
//!
//! - the catalog cannot be reached, or does not answer within the timeout:
//!   `IoError` (exit 1) naming the URL. No [§4.3](docs/errors.md#s4-3) name is about networks;
//!   `IoError` is the one for I/O that has no kind of its own, and a
//!   connection is such I/O;
//! - the catalog refuses (a license it does not accept, a pack it does not
//!   hold or does not grant): the catalog's own error name and message, with
//!   the exit code of that name (4 for `License*`, 5 for `PackNotFoundError`);
//! - an answer that does not load (altered in transit, over 16 MiB, sealed
//!   for another license, another pack than the one asked for): its `Pack*`
//!   or `License*` error, exit 5 or 4.
//!
//! The HTTP client is `ureq` with rustls (webpki roots) for `https://`;
//! redirects are not followed (a license is never sent on to an address the
//! user did not name), and the proxy variables (`HTTPS_PROXY`, …) apply.
//! The license bytes are held in zeroizing memory (what the HTTP library
//! buffers while sending them is out of reach), and the license is checked
//! before it is sent: nothing goes out for an expired or unverifiable one.
//!
//! Everything the catalog says (its error names and messages, the pack's
//! id, name and version, what the HTTP library reports of its answer) has
//! its control characters escaped (`escape_controls`) before it goes into
//! an error or the result: a hostile catalog cannot write escape sequences
//! to the user's terminal or forge lines in a log.

use super::CATALOG_URL_ENV;
use super::SIGNATURE_HEADER;
use crate::atomic::{write_atomic, write_atomic_all};
use crate::container::MAX_PACK_BYTES;
use crate::error::{escape_controls, Cause, ErrorName, Named};
use crate::license::{LicenseArgs, VerifiedLicense};
use crate::pack::load_signed_pack;
use crate::signature::{signature_path, PackSigners, SignatureFile, MAX_SIGNATURE_BYTES};
use crate::{Error, PackError};
use axum::http::Uri;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;
use time::OffsetDateTime;

/// Default of `--timeout-ms`: connecting and the whole exchange.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// Largest error body read from a catalog.
const MAX_ERROR_BODY: u64 = 64 * 1024;

/// What `download-pack` is asked to do.
#[derive(Debug, Clone)]
pub struct DownloadRequest {
    /// The pack to download.
    pub pack_id: String,
    /// `--catalog`; `None`: `$HELIXOR_CATALOG_URL`.
    pub catalog: Option<String>,
    /// `--license`; `None`: the [§2](docs/formats.md#s2) lookup order.
    pub license: Option<PathBuf>,
    /// `--issuer-keys`; `None`: the [§2](docs/formats.md#s2) lookup order.
    pub issuer_keys: Option<PathBuf>,
    /// `--pack-signers`; `None`: `$HELIXOR_PACK_SIGNERS`, else the
    /// signature the catalog sends is written unverified.
    pub pack_signers: Option<PathBuf>,
    /// Where to write the pack (and its signature, `<out>.sig`).
    pub out: PathBuf,
    /// Bound on connecting and on the whole exchange, body included.
    pub timeout: Duration,
}

/// What `download-pack` wrote.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Downloaded {
    /// The pack id.
    pub pack_id: String,
    /// `version` as text.
    pub version: String,
    /// `name`, if the playbook has one.
    pub name: Option<String>,
    /// Hex SHA-256 of the plaintext (the header digest).
    pub sha256: String,
    /// Who signed it (`signed_by`, `sequence`, `verified`, and the
    /// signature's `path`); `None` when the catalog sent no signature.
    pub signature: Option<serde_json::Value>,
    /// Where the pack was written.
    pub path: PathBuf,
    /// Its size.
    pub bytes: usize,
    /// The URL it came from.
    pub url: String,
    /// The license it is sealed for.
    pub license_id: String,
}

/// The catalog's base URL: `explicit`, else `$HELIXOR_CATALOG_URL`; an
/// `http://` or `https://` URL, without a trailing `/`.
pub fn catalog_base(
    explicit: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, Error> {
    let (raw, via) = match explicit {
        Some(u) => (u.to_string(), "--catalog"),
        None => match env(CATALOG_URL_ENV).filter(|v| !v.is_empty()) {
            Some(u) => (u, "$HELIXOR_CATALOG_URL"),
            None => {
                return Err(Error::Usage(format!(
                    "no catalog: pass --catalog URL or set ${CATALOG_URL_ENV}"
                )))
            }
        },
    };
    let base = raw.trim().trim_end_matches('/').to_string();
    let uri: Uri = base
        .parse()
        .map_err(|_| Error::Usage(format!("{via} `{raw}` is not a URL")))?;
    match uri.scheme_str() {
        Some("http" | "https") if uri.host().is_some_and(|h| !h.is_empty()) => {}
        _ => {
            return Err(Error::Usage(format!(
                "{via} `{raw}` is not an http:// or https:// URL"
            )))
        }
    }
    if uri.query().is_some() {
        return Err(Error::Usage(format!("{via} `{raw}` has a query")));
    }
    Ok(base)
}

/// `pack_id` as one path segment: every byte but RFC 3986's unreserved
/// ones percent-encoded.
pub fn encode_segment(pack_id: &str) -> String {
    let mut s = String::with_capacity(pack_id.len());
    for b in pack_id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            s.push(char::from(b));
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

/// The URL of a pack of the catalog at `base`.
pub fn pack_url(base: &str, pack_id: &str) -> String {
    format!("{base}/v1/catalog/packs/{}", encode_segment(pack_id))
}

/// Whether a plain-`http` URL stays on this machine.
fn is_loopback(base: &str) -> bool {
    let Ok(uri) = base.parse::<Uri>() else {
        return false;
    };
    let host = uri.host().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn unreachable(base: &str, timeout: Duration, e: ureq::Error) -> Error {
    let ms = timeout.as_millis();
    let message = match &e {
        ureq::Error::Timeout(t) => {
            format!("the catalog at {base} did not answer within {ms} ms (--timeout-ms; {t})")
        }
        ureq::Error::HostNotFound => {
            format!("cannot reach the catalog at {base}: its host name does not resolve")
        }
        ureq::Error::Io(e) => format!("cannot reach the catalog at {base}: {e}"),
        ureq::Error::Rustls(e) => {
            format!("cannot reach the catalog at {base}: the TLS handshake failed: {e}")
        }
        ureq::Error::Tls(e) => {
            format!("cannot reach the catalog at {base}: the TLS handshake failed: {e}")
        }
        other => format!("cannot reach the catalog at {base}: {other}"),
    };
    // The library's messages may quote the answer (a malformed header).
    Error::Io(escape_controls(&message).into_owned(), Some(Cause::new(e)))
}

/// Reads the license as [§5](docs/formats.md#s5) step 1 checks it, keeping its bytes (to
/// send them) in zeroizing memory.
fn local_license(
    req: &DownloadRequest,
) -> Result<(VerifiedLicense, zeroize::Zeroizing<Vec<u8>>), Error> {
    let args = LicenseArgs {
        license: req.license.clone(),
        issuer_keys: req.issuer_keys.clone(),
        pack_signers: None,
    };
    Ok(args.load_with_bytes(OffsetDateTime::now_utc())?)
}

/// The error of a catalog's refusal: its own name and message when the body
/// is a Helixor error, else an `IoError` with the status.
fn refusal(url: &str, status: u16, body: &[u8]) -> Error {
    let parsed: Option<(String, String)> = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            Some((
                escape_controls(v.get("error")?.as_str()?).into_owned(),
                escape_controls(v.get("message")?.as_str()?).into_owned(),
            ))
        });
    match parsed {
        Some((name, message)) => match ErrorName::from_name(&name) {
            Some(name) => Error::Remote {
                name,
                message: format!("the catalog at {url} answered {status}: {message}"),
            },
            None => Error::Io(
                format!("the catalog at {url} answered {status} {name}: {message}"),
                None,
            ),
        },
        None if (300..400).contains(&status) => Error::Io(format!(
            "the catalog at {url} answered {status}, a redirect: redirects are not followed (a license is only sent to the URL given); use the URL it names"
        ), None),
        None => Error::Io(format!(
            "the catalog at {url} answered {status} without a Helixor error body"
        ), None),
    }
}

/// An error about the catalog's answer, whose message may quote it (a
/// header's pack id, a playbook's rule ids): unchanged when there is
/// nothing to escape, else the same name and exit code with every control
/// character of its message and problems escaped.
fn remote_text(e: Error) -> Error {
    let message = e.to_string();
    let unsafe_text = |t: &str| matches!(escape_controls(t), std::borrow::Cow::Owned(_));
    if !unsafe_text(&message) && !e.problems().iter().any(|p| unsafe_text(p)) {
        return e;
    }
    let mut message = escape_controls(&message).into_owned();
    for p in e.problems() {
        message.push_str("; ");
        message.push_str(&escape_controls(p));
    }
    Error::Remote {
        name: e.name(),
        message,
    }
}

/// `download-pack`: the license is checked ([§5](docs/formats.md#s5) step 1) and sent, the
/// answer read under the 16 MiB cap and loaded with [§5](docs/formats.md#s5) steps 2 to 7,
/// and only then written to `req.out`. Warnings go to `err`.
pub fn download_pack(
    req: &DownloadRequest,
    env: &dyn Fn(&str) -> Option<String>,
    err: &mut dyn Write,
) -> Result<Downloaded, Error> {
    if req.pack_id.is_empty() {
        return Err(Error::Usage("--pack-id is empty".into()));
    }
    let base = catalog_base(req.catalog.as_deref(), env)?;
    let url = pack_url(&base, &req.pack_id);
    let (license, license_bytes) = local_license(req)?;
    if base.starts_with("http://") && !is_loopback(&base) {
        let _ = writeln!(
            err,
            "warning: the license (it holds the content key of your packs) is sent to {base} without TLS; use an https:// catalog"
        );
    }
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(req.timeout))
        .timeout_connect(Some(req.timeout))
        .max_redirects(0)
        .http_status_as_error(false)
        .user_agent(format!("helixor-pack/{}", crate::VERSION))
        .build()
        .into();
    let resp = agent
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/octet-stream")
        .send(&license_bytes[..])
        .map_err(|e| unreachable(&base, req.timeout, e))?;
    drop(license_bytes);
    let status = resp.status().as_u16();
    let (parts, body) = resp.into_parts();
    if status != 200 {
        let bytes = body
            .into_with_config()
            .limit(MAX_ERROR_BODY)
            .read_to_vec()
            .unwrap_or_default();
        return Err(refusal(&url, status, &bytes));
    }
    let name = format!("the answer of {url}");
    let too_large = || {
        PackError::Format(format!(
            "{name}: pack is over the {MAX_PACK_BYTES}-byte limit"
        ))
    };
    let declared = parts
        .headers
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_PACK_BYTES) {
        return Err(too_large().into());
    }
    let bytes = body
        .into_with_config()
        .limit(MAX_PACK_BYTES)
        .read_to_vec()
        .map_err(|e| match e {
            ureq::Error::BodyExceedsLimit(_) => Error::from(too_large()),
            other => unreachable(&base, req.timeout, other),
        })?;
    // The signature the catalog sent, if any ([§17](docs/guides/signing.md#s17)): checked
    // with the pack when signers are configured, which then require it.
    let signers = PackSigners::resolve(req.pack_signers.as_deref())?;
    let sig = match parts.headers.get(SIGNATURE_HEADER) {
        None => SignatureFile::Absent,
        Some(v) => match v.to_str().ok().and_then(|t| B64.decode(t.trim()).ok()) {
            Some(b) if b.len() as u64 <= MAX_SIGNATURE_BYTES => SignatureFile::Bytes(b),
            Some(_) => SignatureFile::Unreadable(format!(
                "over the {MAX_SIGNATURE_BYTES}-byte limit of a signature file"
            )),
            None => SignatureFile::Unreadable(format!("header {SIGNATURE_HEADER} is not base64")),
        },
    };
    let pack =
        load_signed_pack(&bytes, &sig, &name, &license, signers.as_ref()).map_err(remote_text)?;
    if pack.pack_id != req.pack_id {
        return Err(PackError::Integrity(format!(
            "{name}: the catalog answered pack `{}` to a request for `{}`",
            escape_controls(&pack.pack_id),
            req.pack_id
        ))
        .into());
    }
    // Pack and signature are written together (both or neither). Without
    // a signature that parses, none is written and a stale one is removed:
    // a `.sig` beside the pack is always the pack's.
    let sig_path = signature_path(&req.out);
    let sig_bytes = match &sig {
        SignatureFile::Bytes(b) if pack.signature.is_some() => Some(b.as_slice()),
        _ => None,
    };
    let written = match sig_bytes {
        Some(b) => write_atomic_all(&[(&req.out, &bytes), (&sig_path, b)]),
        None => {
            write_atomic(&req.out, &bytes).and_then(|()| match std::fs::remove_file(&sig_path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            })
        }
    };
    written.map_err(|e| Error::io(format_args!("cannot write pack {}", req.out.display()), e))?;
    Ok(Downloaded {
        pack_id: pack.pack_id,
        version: escape_controls(&pack.version).into_owned(),
        name: pack.name.map(|n| escape_controls(&n).into_owned()),
        sha256: pack.sha256,
        signature: pack.signature.map(|s| {
            let mut v = serde_json::to_value(&s).unwrap_or_default();
            // Unverified, it is whatever the catalog said.
            v["signed_by"] = serde_json::json!(escape_controls(&s.signed_by));
            v["path"] = serde_json::json!(sig_path.display().to_string());
            v
        }),
        path: req.out.clone(),
        bytes: bytes.len(),
        url,
        license_id: license.license_id.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Named;

    #[test]
    fn catalog_urls() {
        let none = |_: &str| None;
        assert_eq!(
            catalog_base(Some("http://127.0.0.1:8090/"), &none).unwrap(),
            "http://127.0.0.1:8090"
        );
        assert_eq!(
            catalog_base(None, &|_| Some("https://packs.example.com/helixor".into())).unwrap(),
            "https://packs.example.com/helixor"
        );
        for bad in ["ftp://x", "127.0.0.1:8090", "http://", "http://x/?a=b"] {
            assert!(
                matches!(catalog_base(Some(bad), &none), Err(Error::Usage(_))),
                "{bad}"
            );
        }
        assert!(
            matches!(catalog_base(None, &none), Err(Error::Usage(m)) if m.contains("HELIXOR_CATALOG_URL"))
        );
        assert_eq!(
            pack_url("http://h", "custom.a b/v1"),
            "http://h/v1/catalog/packs/custom.a%20b%2Fv1"
        );
    }

    #[test]
    fn a_catalog_cannot_print_control_characters() {
        let e = refusal(
            "http://c/x",
            403,
            b"{\"error\":\"LicenseEntitlementError\",\"message\":\"no\\u001b]0;pwned\\u0007\\u001b[2J\"}",
        );
        assert_eq!(e.name(), ErrorName::LicenseEntitlementError);
        assert_eq!(
            e.to_string(),
            "the catalog at http://c/x answered 403: no\\u{1b}]0;pwned\\u{7}\\u{1b}[2J"
        );
        let e = refusal(
            "http://c/x",
            500,
            b"{\"error\":\"Evil\\u001b[31m\",\"message\":\"m\\r\\nINFO forged\"}",
        );
        assert_eq!(
            e.to_string(),
            "the catalog at http://c/x answered 500 Evil\\u{1b}[31m: m\\u{d}\\u{a}INFO forged"
        );
        let e = remote_text(PackError::Integrity("pack `a\u{1b}[2J`".into()).into());
        assert_eq!(e.name(), ErrorName::PackIntegrityError);
        assert_eq!(e.to_string(), "pack `a\\u{1b}[2J`");
        let plain = remote_text(PackError::Format("short".into()).into());
        assert!(matches!(plain, Error::Pack(PackError::Format(_))));
    }

    #[test]
    fn loopback_hosts() {
        assert!(is_loopback("http://127.0.0.1:1"));
        assert!(is_loopback("http://localhost:1"));
        assert!(is_loopback("http://[::1]:1"));
        assert!(!is_loopback("http://packs.example.com"));
    }

    #[test]
    fn refusals_keep_the_catalog_name_and_message() {
        let e = refusal(
            "http://c/x",
            403,
            br#"{"error":"LicenseEntitlementError","message":"no"}"#,
        );
        assert_eq!(e.name(), ErrorName::LicenseEntitlementError);
        assert_eq!(e.name().exit_code(), 4);
        assert!(e.to_string().contains("answered 403: no"));
        let e = refusal("http://c/x", 502, b"<html>");
        assert_eq!(e.name(), ErrorName::IoError);
        let e = refusal(
            "http://c/x",
            500,
            br#"{"error":"InternalError","message":"m"}"#,
        );
        assert_eq!(e.name(), ErrorName::IoError);
    }
}
