//! Catalog packs end to end ([§14](docs/catalog.md#s14)): the real `helixor-pack catalog
//! serve` and `helixor-pack download-pack` on 127.0.0.1 with ephemeral ports,
//! a tampering proxy, a catalog that never answers, a closed port, and the
//! downloaded pack serving decisions in `helixor-pack serve`. Every wait is
//! bounded.

use crate::support::server::{request, test_playbook, Answer, Fixture, Server, TEST_PACK};
use helixor::{issue_license, keygen, IssueRequest};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use time::OffsetDateTime;

const PII: &str = "compliance.regulatory_pii_guard.v1";
const BIN: &str = env!("CARGO_BIN_EXE_helixor-pack");
const UNSEAL: &str = "Decryption failed: content key mismatch or corrupted pack envelope";

/// A catalog deployment: keys, a playbook directory with the test pack and
/// the example PII pack, and licenses made with the library.
struct Setup {
    fx: Fixture,
    playbooks: PathBuf,
    /// A clean working directory and HOME for the CLI (no license found by accident).
    home: PathBuf,
}

impl Setup {
    fn new() -> Self {
        let fx = Fixture::new();
        let playbooks = fx.path().join("playbooks");
        std::fs::create_dir_all(&playbooks).unwrap();
        std::fs::write(playbooks.join("test_ids.yaml"), test_playbook("1.0.0")).unwrap();
        std::fs::write(
            playbooks.join("regulatory_pii_guard.yaml"),
            helixor::EXAMPLE_PLAYBOOK_YAML,
        )
        .unwrap();
        let home = fx.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        Self {
            fx,
            playbooks,
            home,
        }
    }

    fn path(&self) -> &Path {
        self.fx.path()
    }

    /// A license signed by `key_file` for `[not_before, not_after)`.
    fn issue_with(
        &self,
        key_file: &Path,
        id: &str,
        packs: &[&str],
        features: &[&str],
        window: (OffsetDateTime, OffsetDateTime),
    ) -> PathBuf {
        let out = self.path().join(format!("{id}.hxlic"));
        issue_license(&IssueRequest {
            issuer_key: key_file.to_path_buf(),
            license_id: id.into(),
            licensee: "Customer".into(),
            tier: "ENTERPRISE".into(),
            packs: packs.iter().map(|s| s.to_string()).collect(),
            solvers: vec!["*".into()],
            features: features.iter().map(|s| s.to_string()).collect(),
            not_before: window.0,
            not_after: window.1,
            issued_at: window.0,
            out: out.clone(),
        })
        .unwrap();
        out
    }

    /// A license of the catalog's issuer, valid for a year.
    fn issue(&self, id: &str, packs: &[&str], features: &[&str]) -> PathBuf {
        let now = OffsetDateTime::now_utc().replace_nanosecond(0).unwrap();
        self.issue_with(
            &self.fx.key_file,
            id,
            packs,
            features,
            (
                now - time::Duration::hours(1),
                now + time::Duration::days(365),
            ),
        )
    }

    fn catalog(&self) -> Catalog {
        Catalog::start(&self.playbooks, &self.fx.issuer_dir, self.path())
    }

    /// `helixor-pack <args>` in the clean home, bounded by `limit`.
    fn cli(&self, args: &[&std::ffi::OsStr], limit: Duration) -> Run {
        let mut cmd = Command::new(BIN);
        run_bounded(clean(&mut cmd, &self.home).args(args), limit)
    }

    /// `download-pack --pack-id ID --catalog URL --license L --issuer-keys K --out OUT <extra>`.
    fn download(
        &self,
        url: &str,
        pack_id: &str,
        license: &Path,
        out: &Path,
        extra: &[&str],
    ) -> Run {
        self.download_trusting(url, pack_id, license, &self.fx.issuer_dir, out, extra)
    }

    fn download_trusting(
        &self,
        url: &str,
        pack_id: &str,
        license: &Path,
        keys: &Path,
        out: &Path,
        extra: &[&str],
    ) -> Run {
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "download-pack".as_ref(),
            "--pack-id".as_ref(),
            pack_id.as_ref(),
            "--catalog".as_ref(),
            url.as_ref(),
            "--license".as_ref(),
            license.as_os_str(),
            "--issuer-keys".as_ref(),
            keys.as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
        ];
        args.extend(extra.iter().map(std::ffi::OsStr::new));
        self.cli(&args, Duration::from_secs(30))
    }
}

/// A command with no inherited `HELIXOR_*` or proxy variable, in `home`.
fn clean<'c>(cmd: &'c mut Command, home: &Path) -> &'c mut Command {
    crate::support::scrubbed(cmd)
        .env("HOME", home)
        .current_dir(home)
}

/// What a CLI run printed.
#[derive(Debug)]
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

impl Run {
    /// Asserts a failure with `name` (the first word of stderr) and `code`.
    fn fails(&self, name: &str, code: i32) -> &Self {
        assert_eq!(self.code, Some(code), "{self:?}");
        assert!(
            self.stderr.starts_with(&format!("{name}: ")),
            "stderr should start with {name}: {self:?}"
        );
        self
    }

    fn names(&self, needle: &str) -> &Self {
        assert!(
            self.stderr.contains(needle),
            "stderr lacks {needle:?}: {self:?}"
        );
        self
    }
}

/// Runs `cmd` to its end, killing it (and failing) after `limit`.
fn run_bounded(cmd: &mut Command, limit: Duration) -> Run {
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the command did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let elapsed = started.elapsed();
    Run {
        code: status.code(),
        stdout: t_out.join().unwrap(),
        stderr: t_err.join().unwrap(),
        elapsed,
    }
}

/// The real `helixor-pack catalog serve` on `127.0.0.1:0`; killed when dropped.
struct Catalog {
    child: Child,
    addr: SocketAddr,
    stderr: PathBuf,
}

impl Catalog {
    fn command(playbooks: &Path, keys: &Path, home: &Path) -> Command {
        let mut cmd = Command::new(BIN);
        clean(&mut cmd, home).args([
            "catalog".as_ref(),
            "serve".as_ref(),
            "--playbooks".as_ref(),
            playbooks.as_os_str(),
            "--issuer-keys".as_ref(),
            keys.as_os_str(),
            "--listen".as_ref(),
            "127.0.0.1:0".as_ref(),
        ]);
        cmd
    }

    fn start(playbooks: &Path, keys: &Path, dir: &Path) -> Self {
        Self::start_with(playbooks, keys, dir, &[])
    }

    /// [`Catalog::start`] with extra `catalog serve` arguments.
    fn start_with(playbooks: &Path, keys: &Path, dir: &Path, extra: &[&std::ffi::OsStr]) -> Self {
        let mut cmd = Self::command(playbooks, keys, dir);
        cmd.args(extra);
        let (child, addr, stderr) = crate::support::server::spawn_listening(cmd, dir, "catalog");
        Self {
            child,
            addr,
            stderr,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// `POST /v1/catalog/packs/{pack_id}` with `body` as JSON.
    fn post_license(&self, pack_id: &str, body: &str) -> Answer {
        request(
            self.addr,
            "POST",
            &format!("/v1/catalog/packs/{pack_id}"),
            Some(body),
        )
        .unwrap()
    }
}

impl Drop for Catalog {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

fn json_of(a: &Answer) -> Value {
    a.json()
}

// ---------------------------------------------------------------------------
// Downloads that succeed
// ---------------------------------------------------------------------------

#[test]
fn a_licensed_pack_downloads_loads_and_serves_decisions() {
    let s = Setup::new();
    let cat = s.catalog();
    let lic = s.issue("lic_cust_1", &["custom.*"], &[]);
    let packs = s.path().join("deployment");
    std::fs::create_dir_all(&packs).unwrap();
    let out = packs.join("test_ids.hxpack");

    let run = s.download(&cat.url(), TEST_PACK, &lic, &out, &[]);
    assert_eq!(run.code, Some(0), "{run:?}\n{}", cat.log());
    assert!(
        run.stdout.starts_with(&format!(
            "downloaded {TEST_PACK} (version 1.0.0) sealed for lic_cust_1\n"
        )),
        "{run:?}"
    );
    assert!(run.stdout.contains(&format!("wrote:  {}", out.display())));
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(&bytes[..4], b"HXPK");
    // Nothing but the pack is left in the directory (no temporary file).
    assert_eq!(std::fs::read_dir(&packs).unwrap().count(), 1);

    // The catalog's log names the pack and the license, never its body.
    let log = cat.log();
    assert!(log.contains("sealed a catalog pack"), "{log}");
    assert!(log.contains("lic_cust_1"), "{log}");
    let content_key = serde_json::from_str::<Value>(&read(&lic)).unwrap()["content_key"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!log.contains(&content_key), "{log}");
    assert!(
        !log.contains("TCK-"),
        "the playbook's pattern is logged: {log}"
    );

    // Sealed for this license: `run` opens it, another license does not.
    let keys = s.fx.issuer_dir.clone();
    let ok = s.cli(
        &[
            "run".as_ref(),
            "--pack".as_ref(),
            out.as_os_str(),
            "--license".as_ref(),
            lic.as_os_str(),
            "--issuer-keys".as_ref(),
            keys.as_os_str(),
            "--text".as_ref(),
            "ticket TCK-123456".as_ref(),
        ],
        Duration::from_secs(30),
    );
    assert_eq!(ok.code, Some(0), "{ok:?}");
    let d: Value = serde_json::from_str(&ok.stdout).unwrap();
    assert_eq!(d["action"], "redact_ticket_id");
    let other = s.issue("lic_other", &["*"], &[]);
    s.cli(
        &[
            "run".as_ref(),
            "--pack".as_ref(),
            out.as_os_str(),
            "--license".as_ref(),
            other.as_os_str(),
            "--issuer-keys".as_ref(),
            keys.as_os_str(),
            "--text".as_ref(),
            "x".as_ref(),
        ],
        Duration::from_secs(30),
    )
    .fails("PackUnsealError", 5)
    .names(UNSEAL);

    // And `serve` answers real decisions with it.
    let server = Server::start_with(
        &[
            "--license".into(),
            lic.display().to_string(),
            "--issuer-keys".into(),
            keys.display().to_string(),
            "--packs".into(),
            packs.display().to_string(),
        ],
        &[],
        s.path(),
    );
    let a = server.post(
        "/evaluate",
        r#"{"text": "Fixed in TCK-123456, mail jane.doe@example.com"}"#,
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let d = a.json();
    assert_eq!(d["pack_id"], TEST_PACK);
    assert_eq!(d["action"], "redact_ticket_id");
    assert_eq!(
        d["clean_text"],
        "Fixed in [REDACTED_TICKET_ID], mail [REDACTED_EMAIL]"
    );
}

#[test]
fn json_output_the_environment_url_and_fresh_seals() {
    let s = Setup::new();
    let cat = s.catalog();
    let lic = s.issue("lic_cust_env", &[PII], &[]);
    let out = s.path().join("pii.hxpack");
    let keys = s.fx.issuer_dir.clone();
    let mut cmd = Command::new(BIN);
    clean(&mut cmd, &s.home)
        .env("HELIXOR_CATALOG_URL", format!("{}/", cat.url()))
        .env("HELIXOR_LICENSE_FILE", &lic)
        .env("HELIXOR_ISSUER_KEYS", &keys)
        .args(["download-pack", "--pack-id", PII, "--json", "--out"])
        .arg(&out);
    let run = run_bounded(&mut cmd, Duration::from_secs(30));
    assert_eq!(run.code, Some(0), "{run:?}");
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["pack_id"], PII);
    assert_eq!(v["version"], "1.0.0");
    assert_eq!(v["license_id"], "lic_cust_env");
    assert_eq!(v["url"], format!("{}/v1/catalog/packs/{PII}", cat.url()));
    assert_eq!(v["bytes"], std::fs::metadata(&out).unwrap().len());
    let first = std::fs::read(&out).unwrap();
    // Sealed per request: a second download has a fresh nonce, the same digest.
    let again = s.path().join("pii-2.hxpack");
    let run2 = s.download(&cat.url(), PII, &lic, &again, &["--json"]);
    let v2: Value = serde_json::from_str(&run2.stdout).unwrap();
    assert_eq!(v2["sha256"], v["sha256"]);
    assert_ne!(std::fs::read(&again).unwrap(), first);
}

// ---------------------------------------------------------------------------
// Refusals
// ---------------------------------------------------------------------------

#[test]
fn a_signing_catalog_sends_signatures_and_download_pack_writes_both() {
    let s = Setup::new();
    let signer = helixor::keygen("catalog-signer", &s.path().join("signer-keys")).unwrap();
    let trusted = s.path().join("signers");
    std::fs::create_dir_all(&trusted).unwrap();
    std::fs::copy(&signer.public_path, trusted.join("catalog-signer.pub")).unwrap();
    // A key that is not trusted: the license issuer's public key.
    let foreign = s.path().join("foreign-signers");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::copy(
        s.fx.issuer_dir.join("test-issuer.pub"),
        foreign.join("test-issuer.pub"),
    )
    .unwrap();
    let signing = Catalog::start_with(
        &s.playbooks,
        &s.fx.issuer_dir,
        s.path(),
        &["--sign-key".as_ref(), signer.secret_path.as_os_str()],
    );
    let plain = s.catalog();
    let lic = s.issue("lic_cust_sig", &["custom.*"], &[]);
    let dir = s.path().join("deployment");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("test_ids.hxpack");
    let sig = dir.join("test_ids.hxpack.sig");
    let trust = ["--pack-signers", trusted.to_str().unwrap()];

    // Raw: the signature travels base64-encoded in its header.
    let a = signing.post_license(TEST_PACK, &read(&lic));
    assert_eq!(a.status, 200);
    let header = a.header("x-helixor-pack-signature").unwrap().to_string();
    let file: Value = serde_json::from_slice(
        &base64::Engine::decode(&base64::engine::general_purpose::STANDARD, header).unwrap(),
    )
    .unwrap();
    assert_eq!(file["key_id"], "catalog-signer");
    assert_eq!(file["pack_id"], TEST_PACK);

    // Verified with the signers: pack and signature written together.
    let run = s.download(&signing.url(), TEST_PACK, &lic, &out, &trust);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stdout.contains(&format!(
            "  signed: {} by catalog-signer (sequence ",
            sig.display()
        )),
        "{run:?}"
    );
    assert!(run.stdout.contains(", verified)\n"), "{run:?}");
    let written: Value = serde_json::from_slice(&std::fs::read(&sig).unwrap()).unwrap();
    assert_eq!(
        written["pack_sha256"],
        crate::support::cli::sha256_hex(&std::fs::read(&out).unwrap())
    );
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["test_ids.hxpack", "test_ids.hxpack.sig"]);
    // What was written loads with the signers.
    let mut a = vec![
        "run",
        "--pack",
        out.to_str().unwrap(),
        "--text",
        "TCK-123456",
    ];
    a.extend(["--license", lic.to_str().unwrap(), "--issuer-keys"]);
    a.push(s.fx.issuer_dir.to_str().unwrap());
    a.extend(trust);
    let args: Vec<&std::ffi::OsStr> = a.iter().map(std::ffi::OsStr::new).collect();
    assert_eq!(s.cli(&args, Duration::from_secs(30)).code, Some(0));

    // Signers that do not trust the catalog's key, or a catalog that does
    // not sign: refused, and the files already there are left untouched.
    let before = (std::fs::read(&out).unwrap(), std::fs::read(&sig).unwrap());
    let foreign_trust = ["--pack-signers", foreign.to_str().unwrap()];
    s.download(&signing.url(), TEST_PACK, &lic, &out, &foreign_trust)
        .fails("PackSignatureError", 5)
        .names("untrusted_key: key `catalog-signer` is not a trusted pack signer");
    s.download(&plain.url(), TEST_PACK, &lic, &out, &trust)
        .fails("PackSignatureError", 5)
        .names(": missing: ");
    assert_eq!(
        (std::fs::read(&out).unwrap(), std::fs::read(&sig).unwrap()),
        before
    );

    // Without signers: a signed answer is written unverified; an unsigned
    // one removes the stale signature (a .sig beside a pack is its own).
    let run = s.download(&signing.url(), TEST_PACK, &lic, &out, &["--json"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["signature"]["verified"], false);
    assert_eq!(v["signature"]["signed_by"], "catalog-signer");
    let run = s.download(&plain.url(), TEST_PACK, &lic, &out, &["--json"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(
        serde_json::from_str::<Value>(&run.stdout).unwrap()["signature"],
        Value::Null
    );
    assert!(out.exists() && !sig.exists());
}

#[test]
fn an_unlicensed_pack_is_403_entitlement_and_nothing_is_written() {
    let s = Setup::new();
    let cat = s.catalog();
    let lic = s.issue("lic_cust_2", &["custom.*"], &[]);
    // Raw: the catalog's answer.
    let a = cat.post_license(PII, &read(&lic));
    assert_eq!(a.status, 403, "{}", a.body);
    assert_eq!(json_of(&a)["error"], "LicenseEntitlementError");
    assert!(a
        .header("content-type")
        .unwrap()
        .starts_with("application/json"));

    // The CLI: the catalog's name and message, exit 4, no file; a file
    // already at --out is left untouched.
    let out = s.path().join("pii.hxpack");
    let run = s.download(&cat.url(), PII, &lic, &out, &[]);
    run.fails("LicenseEntitlementError", 4)
        .names(&format!(
            "the catalog at {}/v1/catalog/packs/{PII} answered 403",
            cat.url()
        ))
        .names("does not allow catalog pack `compliance.regulatory_pii_guard.v1`");
    assert!(!out.exists());
    std::fs::write(&out, b"previous").unwrap();
    s.download(&cat.url(), PII, &lic, &out, &[])
        .fails("LicenseEntitlementError", 4);
    assert_eq!(std::fs::read(&out).unwrap(), b"previous");
    assert_eq!(
        std::fs::read_dir(s.path())
            .unwrap()
            .filter(|e| e
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".tmp"))
            .count(),
        0
    );

    // `custom_playbook_compilation` compiles one's own playbooks; it does
    // not grant a vendor's catalog packs.
    let custom = s.issue("lic_cust_custom", &[], &["custom_playbook_compilation"]);
    let a = cat.post_license(TEST_PACK, &read(&custom));
    assert_eq!(a.status, 403, "{}", a.body);
    assert_eq!(json_of(&a)["error"], "LicenseEntitlementError");
    assert!(json_of(&a)["message"]
        .as_str()
        .unwrap()
        .contains("does not grant catalog packs"));
}

#[test]
fn expired_not_yet_valid_and_wrongly_signed_licenses_are_403_with_their_error() {
    let s = Setup::new();
    let cat = s.catalog();
    let now = OffsetDateTime::now_utc().replace_nanosecond(0).unwrap();
    let day = time::Duration::days(1);
    let key = s.fx.key_file.clone();
    let expired = s.issue_with(&key, "lic_exp", &["*"], &[], (now - day * 30, now - day));
    let future = s.issue_with(&key, "lic_fut", &["*"], &[], (now + day, now + day * 30));
    let other_keys = s.path().join("other-keys");
    let kg = keygen("other-issuer", &other_keys).unwrap();
    let foreign = s.issue_with(
        &kg.secret_path,
        "lic_foreign",
        &["*"],
        &[],
        (now - day, now + day * 30),
    );
    let good = s.issue("lic_good", &["*"], &[]);
    let mut altered: Value = serde_json::from_str(&read(&good)).unwrap();
    altered["licensed_packs"] = serde_json::json!(["*", "more.*"]);
    let altered = altered.to_string();

    for (body, name) in [
        (read(&expired), "LicenseExpiredError"),
        (read(&future), "LicenseNotYetValidError"),
        (read(&foreign), "LicenseSignatureError"),
        (altered, "LicenseSignatureError"),
        (
            r#"{"format": "helixor.license.v1"}"#.to_string(),
            "LicenseError",
        ),
    ] {
        let a = cat.post_license(TEST_PACK, &body);
        assert_eq!(a.status, 403, "{name}: {}", a.body);
        assert_eq!(json_of(&a)["error"], name, "{}", a.body);
        assert!(a
            .header("content-type")
            .unwrap()
            .starts_with("application/json"));
    }

    // Through the CLI: a customer who trusts both issuers sends the foreign
    // license; the catalog's refusal is reported with its name, exit 4.
    let both = s.path().join("both-keys");
    std::fs::create_dir_all(&both).unwrap();
    std::fs::copy(&kg.public_path, both.join("other-issuer.pub")).unwrap();
    std::fs::copy(
        s.fx.issuer_dir.join("test-issuer.pub"),
        both.join("test-issuer.pub"),
    )
    .unwrap();
    let out = s.path().join("x.hxpack");
    s.download_trusting(&cat.url(), TEST_PACK, &foreign, &both, &out, &[])
        .fails("LicenseSignatureError", 4)
        .names("answered 403")
        .names("issuer key `other-issuer` is not among the trusted issuer keys");
    assert!(!out.exists());
    // An expired license is refused before anything is sent.
    s.download(&cat.url(), TEST_PACK, &expired, &out, &[])
        .fails("LicenseExpiredError", 4)
        .names(&expired.display().to_string());
    assert!(!out.exists());
}

#[test]
fn an_unknown_pack_is_404() {
    let s = Setup::new();
    let cat = s.catalog();
    let lic = s.issue("lic_cust_3", &["*"], &[]);
    let a = cat.post_license("custom.nope.v1", &read(&lic));
    assert_eq!(a.status, 404, "{}", a.body);
    assert_eq!(json_of(&a)["error"], "PackNotFoundError");
    let out = s.path().join("nope.hxpack");
    s.download(&cat.url(), "custom.nope.v1", &lic, &out, &[])
        .fails("PackNotFoundError", 5)
        .names("the catalog holds no pack `custom.nope.v1`");
    assert!(!out.exists());
}

// ---------------------------------------------------------------------------
// A catalog that lies, stalls or is gone
// ---------------------------------------------------------------------------

/// Reads an HTTP/1.1 request (head and `Content-Length` body) from `s`.
fn read_request(s: &mut TcpStream) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).unwrap() == 0 {
            break;
        }
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().unwrap());
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).unwrap();
    buf.extend_from_slice(&body);
    buf
}

/// A proxy in front of `upstream` that passes each request on (with
/// `Connection: close`) and applies `mutate` to the response body.
fn tampering_proxy(upstream: SocketAddr, mutate: fn(&mut Vec<u8>)) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { return };
            client
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let req = read_request(&mut client);
            let split = req.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
            let head = String::from_utf8_lossy(&req[..split]).into_owned();
            let mut new_head: String = head
                .split("\r\n")
                .filter(|l| !l.to_ascii_lowercase().starts_with("connection:") && !l.is_empty())
                .map(|l| format!("{l}\r\n"))
                .collect();
            new_head.push_str("Connection: close\r\n\r\n");
            let mut up = TcpStream::connect(upstream).unwrap();
            up.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            up.write_all(new_head.as_bytes()).unwrap();
            up.write_all(&req[split..]).unwrap();
            let mut resp = Vec::new();
            up.read_to_end(&mut resp).unwrap();
            let at = resp.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
            let mut body = resp.split_off(at);
            mutate(&mut body);
            resp.extend_from_slice(&body);
            let _ = client.write_all(&resp);
            let _ = client.shutdown(std::net::Shutdown::Both);
        }
    });
    addr
}

#[test]
fn an_answer_tampered_in_transit_is_refused_and_nothing_is_written() {
    let s = Setup::new();
    let cat = s.catalog();
    let lic = s.issue("lic_cust_4", &["*"], &[]);
    let out = s.path().join("t.hxpack");

    // The proxy itself is faithful when it changes nothing.
    let faithful = tampering_proxy(cat.addr, |_| {});
    let run = s.download(&format!("http://{faithful}"), TEST_PACK, &lic, &out, &[]);
    assert_eq!(run.code, Some(0), "{run:?}");
    std::fs::remove_file(&out).unwrap();

    // One byte of the ciphertext flipped: authentication fails.
    let flip_ciphertext = tampering_proxy(cat.addr, |b| {
        let i = b.len() - 40;
        b[i] ^= 0x01;
    });
    s.download(
        &format!("http://{flip_ciphertext}"),
        TEST_PACK,
        &lic,
        &out,
        &[],
    )
    .fails("PackUnsealError", 5)
    .names(UNSEAL);
    assert!(!out.exists());

    // One byte of the header's digest flipped: decrypts, but the integrity check fails.
    // The digest starts after magic, version, id length, the id and the nonce.
    let flip_digest = tampering_proxy(cat.addr, |b| b[8 + TEST_PACK.len() + 12] ^= 0x80);
    s.download(&format!("http://{flip_digest}"), TEST_PACK, &lic, &out, &[])
        .fails("PackIntegrityError", 5)
        .names("differs from the header digest");
    assert!(!out.exists());

    // The magic flipped: not a pack at all.
    let flip_magic = tampering_proxy(cat.addr, |b| b[0] ^= 0x20);
    s.download(&format!("http://{flip_magic}"), TEST_PACK, &lic, &out, &[])
        .fails("PackFormatError", 5)
        .names("bad magic");
    assert!(!out.exists());
}

/// A fake catalog answering each connection with `answer` (after reading
/// the request), then closing it.
fn fake_catalog(answer: fn(&mut TcpStream)) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for c in listener.incoming() {
            let Ok(mut c) = c else { return };
            std::thread::spawn(move || {
                c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let _ = read_request(&mut c);
                answer(&mut c);
            });
        }
    });
    addr
}

#[test]
fn a_slow_catalog_is_a_timeout_error_not_a_hang() {
    let s = Setup::new();
    let lic = s.issue("lic_cust_5", &["*"], &[]);
    let out = s.path().join("slow.hxpack");

    // Accepts and never answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in listener.incoming().take(8) {
            held.push(c);
        }
        std::thread::sleep(Duration::from_secs(60));
    });
    let run = s.download(
        &format!("http://{silent}"),
        TEST_PACK,
        &lic,
        &out,
        &["--timeout-ms", "1000"],
    );
    run.fails("IoError", 1).names(&format!(
        "the catalog at http://{silent} did not answer within 1000 ms"
    ));
    assert!(run.elapsed >= Duration::from_millis(1000), "{run:?}");
    assert!(run.elapsed < Duration::from_secs(6), "{run:?}");
    assert!(!out.exists());

    // Answers the head, then stalls in the body.
    let stalling = fake_catalog(|c| {
        let _ = c.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 4096\r\n\r\nHXPK",
        );
        std::thread::sleep(Duration::from_secs(30));
    });
    let run = s.download(
        &format!("http://{stalling}"),
        TEST_PACK,
        &lic,
        &out,
        &["--timeout-ms", "1000"],
    );
    run.fails("IoError", 1)
        .names("did not answer within 1000 ms");
    assert!(run.elapsed < Duration::from_secs(6), "{run:?}");
    assert!(!out.exists());
}

#[test]
fn a_dead_catalog_is_a_clear_error() {
    let s = Setup::new();
    let lic = s.issue("lic_cust_6", &["*"], &[]);
    let out = s.path().join("dead.hxpack");
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let run = s.download(
        &format!("http://127.0.0.1:{port}"),
        TEST_PACK,
        &lic,
        &out,
        &[],
    );
    run.fails("IoError", 1).names(&format!(
        "cannot reach the catalog at http://127.0.0.1:{port}"
    ));
    assert!(run.elapsed < Duration::from_secs(10), "{run:?}");
    assert!(!out.exists());

    // https:// to a catalog that speaks plain HTTP: rustls refuses the
    // handshake, and the license is not sent in clear.
    let plain = s.catalog();
    let run = s.download(
        &format!("https://{}", plain.addr),
        TEST_PACK,
        &lic,
        &out,
        &["--timeout-ms", "5000"],
    );
    run.fails("IoError", 1).names(&format!(
        "cannot reach the catalog at https://{}",
        plain.addr
    ));
    assert!(!out.exists());
    assert!(
        !plain.log().contains("sealed a catalog pack"),
        "{}",
        plain.log()
    );

    // No catalog at all, or not a URL: usage errors.
    s.cli(
        &[
            "download-pack".as_ref(),
            "--pack-id".as_ref(),
            TEST_PACK.as_ref(),
            "--license".as_ref(),
            lic.as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
        ],
        Duration::from_secs(10),
    )
    .fails("UsageError", 2)
    .names("HELIXOR_CATALOG_URL");
    s.download("ftp://127.0.0.1:1", TEST_PACK, &lic, &out, &[])
        .fails("UsageError", 2);
}

#[test]
fn an_oversized_or_foreign_answer_is_refused() {
    let s = Setup::new();
    let lic = s.issue("lic_cust_7", &["*"], &[]);
    let out = s.path().join("big.hxpack");
    // Declared over 16 MiB: refused before the body is read.
    let declared = fake_catalog(|c| {
        let _ = c.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 16777217\r\n\r\nHXPK",
        );
        std::thread::sleep(Duration::from_secs(5));
    });
    s.download(&format!("http://{declared}"), TEST_PACK, &lic, &out, &[])
        .fails("PackFormatError", 5)
        .names("over the 16777216-byte limit");
    // Sent without a length, past 16 MiB: refused while reading.
    let streamed = fake_catalog(|c| {
        let _ = c.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
        );
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..17 {
            if c.write_all(&chunk).is_err() {
                return;
            }
        }
    });
    s.download(&format!("http://{streamed}"), TEST_PACK, &lic, &out, &[])
        .fails("PackFormatError", 5)
        .names("over the 16777216-byte limit");
    // An error page that is not a Helixor error.
    let proxy_error = fake_catalog(|c| {
        let _ = c.write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 5\r\n\r\noops!");
    });
    s.download(&format!("http://{proxy_error}"), TEST_PACK, &lic, &out, &[])
        .fails("IoError", 1)
        .names("answered 502 without a Helixor error body");
    // A redirect is not followed: the license goes nowhere else.
    let redirect = fake_catalog(|c| {
        let _ = c.write_all(
            b"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:9/\r\nContent-Length: 0\r\n\r\n",
        );
    });
    s.download(&format!("http://{redirect}"), TEST_PACK, &lic, &out, &[])
        .fails("IoError", 1)
        .names("redirects are not followed");
    assert!(!out.exists());

    // Another pack than the one asked for (a real pack, sealed for this license).
    let real = s.catalog();
    let pii = s.path().join("pii.hxpack");
    assert_eq!(s.download(&real.url(), PII, &lic, &pii, &[]).code, Some(0));
    let bytes = std::fs::read(&pii).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let swapped = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for c in listener.incoming().take(1) {
            let mut c = c.unwrap();
            let _ = read_request(&mut c);
            let _ = c.write_all(
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", bytes.len()).as_bytes(),
            );
            let _ = c.write_all(&bytes);
        }
    });
    s.download(&format!("http://{swapped}"), TEST_PACK, &lic, &out, &[])
        .fails("PackIntegrityError", 5)
        .names(&format!(
            "answered pack `{PII}` to a request for `{TEST_PACK}`"
        ));
    assert!(!out.exists());
}

// ---------------------------------------------------------------------------
// The catalog server
// ---------------------------------------------------------------------------

#[test]
fn the_catalog_lists_its_packs_and_keeps_serve_conventions() {
    let s = Setup::new();
    let mut cat = s.catalog();
    let a = request(cat.addr, "GET", "/v1/catalog", None).unwrap();
    assert_eq!(a.status, 200);
    assert!(a.header("x-request-id").is_some());
    assert_eq!(
        a.json(),
        serde_json::json!({"packs": [
            {"pack_id": PII, "version": "1.0.0", "name": "Regulatory PII and Sensitive Data Guard"},
            {"pack_id": TEST_PACK, "version": "1.0.0", "name": "Test ids"},
        ]})
    );
    assert_eq!(
        request(cat.addr, "GET", "/healthz", None).unwrap().status,
        200
    );

    let err = |a: &Answer| -> String {
        assert!(
            a.header("content-type")
                .unwrap()
                .starts_with("application/json"),
            "{a:?}"
        );
        a.json()["error"].as_str().unwrap().to_string()
    };
    // 415: no content type.
    let mut c = TcpStream::connect(cat.addr).unwrap();
    c.write_all(
        format!(
            "POST /v1/catalog/packs/{TEST_PACK} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{{}}"
        )
        .as_bytes(),
    )
    .unwrap();
    let a = crate::support::server::read_answer(&mut c).unwrap();
    assert_eq!(
        (a.status, err(&a).as_str()),
        (415, "UnsupportedMediaTypeError")
    );
    // 413: over 64 KiB, before parsing.
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(70 * 1024));
    let a = cat.post_license(TEST_PACK, &big);
    assert_eq!((a.status, err(&a).as_str()), (413, "PayloadTooLargeError"));
    // 400: malformed JSON, and a key twice.
    let a = cat.post_license(TEST_PACK, "{not json");
    assert_eq!((a.status, err(&a).as_str()), (400, "InvalidRequestError"));
    let a = cat.post_license(TEST_PACK, r#"{"license_id": "a", "license_id": "b"}"#);
    assert_eq!((a.status, err(&a).as_str()), (400, "InvalidRequestError"));
    // 405 with Allow, 404 for a route.
    let a = request(
        cat.addr,
        "GET",
        &format!("/v1/catalog/packs/{TEST_PACK}"),
        None,
    )
    .unwrap();
    assert_eq!((a.status, err(&a).as_str()), (405, "MethodNotAllowedError"));
    assert_eq!(a.header("allow"), Some("POST"));
    let a = request(cat.addr, "GET", "/v1/nothing", None).unwrap();
    assert_eq!((a.status, err(&a).as_str()), (404, "NotFoundError"));
    // A 200 is the pack as octet-stream, not to be cached.
    let lic = s.issue("lic_cust_8", &["*"], &[]);
    let a = cat.post_license(TEST_PACK, &read(&lic));
    assert_eq!(a.status, 200);
    assert_eq!(a.header("content-type"), Some("application/octet-stream"));
    assert_eq!(a.header("cache-control"), Some("no-store"));
    assert!(a.body.starts_with("HXPK"));

    // SIGTERM: a clean exit 0.
    let ok = Command::new("kill")
        .arg("-TERM")
        .arg(cat.child.id().to_string())
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let deadline = Instant::now() + Duration::from_secs(15);
    let code = loop {
        if let Some(st) = cat.child.try_wait().unwrap() {
            break st.code();
        }
        assert!(Instant::now() < deadline, "the catalog did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(0), "{}", cat.log());
}

#[test]
fn a_slowloris_head_is_cut_at_the_header_timeout() {
    let s = Setup::new();
    let cat = s.catalog();
    let mut c = TcpStream::connect(cat.addr).unwrap();
    let started = Instant::now();
    c.write_all(b"POST /v1/catalog/packs/x HTTP/1.1\r\nX-Slow: a")
        .unwrap();
    // The head never ends: the catalog closes the connection at 5 s.
    c.set_read_timeout(Some(Duration::from_secs(12))).unwrap();
    let mut buf = [0u8; 256];
    let closed = loop {
        match c.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
            Err(_) => break false,
        }
    };
    let at = started.elapsed();
    assert!(closed, "the catalog kept a slowloris connection for {at:?}");
    assert!(
        at >= Duration::from_millis(4500),
        "closed too early: {at:?}"
    );
    assert!(at <= Duration::from_secs(10), "closed late: {at:?}");
    assert_eq!(
        request(cat.addr, "GET", "/healthz", None).unwrap().status,
        200
    );
}

#[test]
fn a_broken_catalog_stops_start_up_with_its_error() {
    let s = Setup::new();
    let start = |dir: &Path, keys: &Path| {
        run_bounded(
            &mut Catalog::command(dir, keys, &s.home),
            Duration::from_secs(20),
        )
    };
    let keys = s.fx.issuer_dir.clone();
    // A playbook the compiler refuses: its own error, exit 3, no listener.
    let broken = s.path().join("broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("a.yaml"), test_playbook("1.0.0")).unwrap();
    std::fs::write(
        broken.join("b.yaml"),
        "pack_id: custom.bad.v1\nrules:\n  - id: x\n    type: regex\n    pattern: '(?=a)'\n    action: redact\n",
    )
    .unwrap();
    let run = start(&broken, &keys);
    run.fails("UnsupportedPackDeclarationError", 3)
        .names(&broken.join("b.yaml").display().to_string());
    assert!(!run.stdout.contains("listening on"));
    // Not YAML.
    std::fs::write(broken.join("b.yaml"), "pack_id: [\n").unwrap();
    start(&broken, &keys).fails("CompilerError", 3);
    // Two playbooks with one pack id.
    std::fs::write(broken.join("b.yml"), test_playbook("2.0.0")).unwrap();
    std::fs::remove_file(broken.join("b.yaml")).unwrap();
    start(&broken, &keys)
        .fails("CompilerError", 3)
        .names("both declare pack_id `custom.test_ids.v1`");
    // Nothing to serve.
    let empty = s.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(empty.join("notes.txt"), "not a playbook").unwrap();
    start(&empty, &keys).fails("PackNotFoundError", 5);
    start(&s.path().join("missing"), &keys).fails("PackNotFoundError", 5);
    // No issuer key: it could verify no license.
    let no_keys = s.path().join("no-keys");
    std::fs::create_dir_all(&no_keys).unwrap();
    start(&s.playbooks, &no_keys).fails("ConfigError", 2);
    start(&s.playbooks, &s.path().join("absent-keys")).fails("LicenseError", 4);
}

// ---------------------------------------------------------------------------
// openapi-catalog.yaml
// ---------------------------------------------------------------------------

fn catalog_document() -> Value {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi-catalog.yaml"))
            .expect("openapi-catalog.yaml at the repository root");
    serde_yaml::from_str(&text).expect("openapi-catalog.yaml parses")
}

#[test]
fn openapi_catalog_routes_match_the_route_table() {
    let doc = catalog_document();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    let methods = [
        "get", "put", "post", "delete", "options", "head", "patch", "trace",
    ];
    let mut documented = std::collections::BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (key, _) in item.as_object().unwrap() {
            if methods.contains(&key.as_str()) {
                documented.insert((key.to_uppercase(), path.clone()));
            }
        }
    }
    let served: std::collections::BTreeSet<(String, String)> = helixor::catalog::server::ROUTES
        .iter()
        .filter(|r| r.documented)
        .map(|r| (r.method.to_string(), r.path.to_string()))
        .collect();
    assert_eq!(documented, served);

    // Every $ref resolves, and every error name the document lists is a [§4.3](docs/errors.md#s4-3) name.
    crate::support::openapi::assert_refs_resolve(&doc);
    let names = doc
        .pointer("/components/schemas/ErrorName/enum")
        .and_then(Value::as_array)
        .expect("ErrorName lists the names");
    for n in names {
        let n = n.as_str().unwrap();
        assert!(
            helixor::ErrorName::from_name(n).is_some() || n == "InternalError",
            "{n} is not a SPEC §4.3 name"
        );
    }
    // The pack route documents every status it answers.
    let responses = doc
        .pointer("/paths/~1v1~1catalog~1packs~1{pack_id}/post/responses")
        .and_then(Value::as_object)
        .unwrap();
    for status in ["200", "400", "403", "404", "413", "415", "500", "503"] {
        assert!(responses.contains_key(status), "{status} is not documented");
    }
}

/// Sends `req` to the in-process catalog and checks the answer against the
/// document: the status and content type are documented for the route, and
/// a JSON body validates against its schema. Returns the status.
async fn check_documented(
    doc: &Value,
    app: &axum::Router,
    req: axum::http::Request<axum::body::Body>,
    seen: &mut std::collections::BTreeSet<(String, String, u16)>,
) -> u16 {
    let method = req.method().as_str().to_lowercase();
    let path = match req.uri().path().strip_prefix("/v1/catalog/packs/") {
        Some(_) => "/v1/catalog/packs/{pack_id}".to_string(),
        None => req.uri().path().to_string(),
    };
    let resp = crate::support::http::send(app, req).await;
    let status = resp.status.as_u16();
    assert!(resp.headers.contains_key("x-request-id"));
    let mime = resp.mime();
    let bytes = resp.bytes;
    let documented = doc["paths"][&path][&method]["responses"]
        .get(status.to_string())
        .unwrap_or_else(|| panic!("{method} {path}: status {status} is not documented"));
    let documented = crate::support::openapi::resolve(doc, documented);
    let schema = &documented["content"]
        .get(&mime)
        .unwrap_or_else(|| panic!("{method} {path} {status}: {mime} is not documented"))["schema"];
    if mime == "application/json" {
        let body: Value = serde_json::from_slice(&bytes).unwrap();
        if let Err(e) = crate::support::openapi::validate(doc, schema, &body, "body") {
            panic!("{method} {path} {status}: {e}");
        }
    } else {
        assert_eq!(mime, "application/octet-stream");
        assert_eq!(&bytes[..4], b"HXPK");
    }
    seen.insert((method, path, status));
    status
}

#[tokio::test]
async fn real_catalog_answers_validate_against_openapi_catalog() {
    use axum::body::Body;
    use axum::http::Request;
    let s = Setup::new();
    let keys = helixor::IssuerKeys::from_path(&s.fx.issuer_dir).unwrap();
    let (catalog, _) = helixor::catalog::Catalog::load(&s.playbooks, keys).unwrap();
    let app = helixor::catalog::server::router(std::sync::Arc::new(catalog));
    let doc = catalog_document();
    let all = read(&s.issue("lic_doc_all", &["*"], &[]));
    let custom = read(&s.issue("lic_doc_custom", &["custom.*"], &[]));
    let post = |id: &str, body: &str| {
        Request::post(format!("/v1/catalog/packs/{id}"))
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap()
    };
    let get = |path: &str| Request::get(path).body(Body::empty()).unwrap();
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(70 * 1024));
    let cases = vec![
        (get("/v1/catalog"), 200),
        (get("/healthz"), 200),
        (post(TEST_PACK, &all), 200),
        (post("custom.%74est_ids.v1", &all), 200),
        (post(PII, &custom), 403),
        (post(TEST_PACK, r#"{"format": "helixor.license.v1"}"#), 403),
        (post("custom.none.v1", &all), 404),
        (post(TEST_PACK, "{not json"), 400),
        (post(TEST_PACK, &big), 413),
        (
            Request::post(format!("/v1/catalog/packs/{TEST_PACK}"))
                .body(Body::from(all.clone()))
                .unwrap(),
            415,
        ),
        (
            Request::post(format!("/v1/catalog/packs/{TEST_PACK}"))
                .header("content-type", "text/plain")
                .body(Body::from(all.clone()))
                .unwrap(),
            415,
        ),
    ];
    let mut seen = std::collections::BTreeSet::new();
    for (req, expect) in cases {
        let what = format!("{} {}", req.method(), req.uri());
        assert_eq!(
            check_documented(&doc, &app, req, &mut seen).await,
            expect,
            "{what}"
        );
    }
    // Every documented answer but the bug (500) and the timeout (503) was seen.
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            for status in op["responses"].as_object().unwrap().keys() {
                let code: u16 = status.parse().unwrap();
                if code == 500 || code == 503 {
                    continue;
                }
                assert!(
                    seen.contains(&(method.clone(), path.clone(), code)),
                    "{method} {path} {status} documented but never answered"
                );
            }
        }
    }
}

/// Issue 27 row 10: a hostile catalog's escape sequences (a title change,
/// a screen clear, a forged log line) never reach the terminal: every
/// control character of what it says is escaped, in the refusal's name and
/// message alike; nothing is written. So is a probed server's status line.
#[test]
fn a_hostile_catalog_cannot_write_control_characters_to_the_terminal() {
    let s = Setup::new();
    let lic = s.issue("lic_cust_10", &["*"], &[]);
    let out = s.path().join("hostile.hxpack");
    let known = fake_catalog(|c| {
        let body = br#"{"error":"LicenseEntitlementError","message":"no\u001b]0;pwned\u0007\u001b[2J\r\nINFO all good"}"#;
        let _ = write!(
            c,
            "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let _ = c.write_all(body);
    });
    let run = s.download(&format!("http://{known}"), TEST_PACK, &lic, &out, &[]);
    run.fails("LicenseEntitlementError", 4);
    assert_eq!(
        run.stderr,
        format!(
            "LicenseEntitlementError: the catalog at http://{known}/v1/catalog/packs/{TEST_PACK} answered 403: no\\u{{1b}}]0;pwned\\u{{7}}\\u{{1b}}[2J\\u{{d}}\\u{{a}}INFO all good\n"
        )
    );
    assert!(!out.exists());

    let unknown = fake_catalog(|c| {
        let body = br#"{"error":"Gotcha\u009b31m","message":"\u202eevil"}"#;
        let _ = write!(
            c,
            "HTTP/1.1 500 Oops\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let _ = c.write_all(body);
    });
    let run = s.download(&format!("http://{unknown}"), TEST_PACK, &lic, &out, &[]);
    run.fails("IoError", 1);
    assert_eq!(
        run.stderr,
        format!(
            "IoError: the catalog at http://{unknown}/v1/catalog/packs/{TEST_PACK} answered 500 Gotcha\\u{{9b}}31m: \\u{{202e}}evil\n"
        )
    );
    for r in [&run.stderr, &run.stdout] {
        assert!(!r.chars().any(|c| c.is_control() && c != '\n'), "{r:?}");
    }

    let probed = fake_catalog(|c| {
        let _ = c.write_all(b"HTTP/1.1 500 \x1b[2JOK\r\nContent-Length: 0\r\n\r\n");
    });
    let run = s.cli(
        &[
            "healthcheck".as_ref(),
            "--url".as_ref(),
            format!("http://{probed}/healthz").as_ref(),
        ],
        Duration::from_secs(10),
    );
    assert_eq!(run.code, Some(1));
    assert_eq!(
        run.stderr,
        format!("healthcheck http://{probed}/healthz: answered `HTTP/1.1 500 \\u{{1b}}[2JOK`\n")
    );
}
