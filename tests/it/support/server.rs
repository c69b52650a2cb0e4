//! Shared fixtures of the serve-mode tests: issuer keys, licenses and packs
//! made with the library, a Kubernetes-style `..data` deployment directory,
//! the real binary on an ephemeral port, and a tiny blocking HTTP client.

use helixor::{issue_license, keygen, IssueRequest, IssuerKeys, License, VerifiedLicense};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use time::OffsetDateTime;

/// The id of the custom test pack.
pub const TEST_PACK: &str = "custom.test_ids.v1";

/// A playbook with one redact rule (`TCK-dddddd`) at `version`.
pub fn test_playbook(version: &str) -> String {
    format!(
        "pack_id: {TEST_PACK}\nversion: \"{version}\"\nname: Test ids\nrules:\n  - id: ticket_id\n    type: regex\n    pattern: '\\bTCK-\\d{{6}}\\b'\n    action: redact\n"
    )
}

/// Keys, licenses and packs in a temporary directory.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub key_file: PathBuf,
    pub issuer_dir: PathBuf,
    counter: AtomicU64,
}

impl Fixture {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("keys");
        let kg = keygen("test-issuer", &keys).unwrap();
        let issuer_dir = dir.path().join("issuer-keys");
        std::fs::create_dir_all(&issuer_dir).unwrap();
        std::fs::copy(&kg.public_path, issuer_dir.join("test-issuer.pub")).unwrap();
        Self {
            key_file: kg.secret_path,
            issuer_dir,
            dir,
            counter: AtomicU64::new(0),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    fn next(&self) -> u64 {
        self.counter.fetch_add(1, Ordering::SeqCst)
    }

    /// Issues a license valid from an hour ago until `not_after`.
    pub fn license_until(&self, not_after: OffsetDateTime) -> PathBuf {
        let now = OffsetDateTime::now_utc().replace_nanosecond(0).unwrap();
        self.license_window(now - time::Duration::hours(1), not_after)
    }

    /// Issues a license for `[not_before, not_after)`.
    pub fn license_window(&self, not_before: OffsetDateTime, not_after: OffsetDateTime) -> PathBuf {
        let n = self.next();
        let out = self.path().join(format!("lic-{n}.hxlic"));
        issue_license(&IssueRequest {
            issuer_key: self.key_file.clone(),
            license_id: format!("lic_test_{n}"),
            licensee: "Test".into(),
            tier: "DEVELOPER".into(),
            packs: vec!["*".into()],
            solvers: vec!["*".into()],
            features: vec![],
            not_before,
            not_after,
            issued_at: not_before,
            out: out.clone(),
        })
        .unwrap();
        out
    }

    /// Issues a license valid for a year.
    pub fn license(&self) -> PathBuf {
        self.license_until(OffsetDateTime::now_utc() + time::Duration::days(365))
    }

    /// Reads and verifies a license at its own `not_before`, so that packs
    /// can be compiled for a license that is about to expire, or has: the
    /// signature is checked as always, the window at a time inside it.
    pub fn read_license(&self, path: &Path) -> VerifiedLicense {
        let not_before = License::read(path).unwrap().not_before;
        let keys = IssuerKeys::from_path(&self.issuer_dir).unwrap();
        License::load(path, &keys, not_before).unwrap()
    }

    /// Compiles `playbook` (YAML text) for the license at `license` into `out`.
    pub fn compile_text(&self, license: &Path, playbook: &str, out: &Path) {
        let n = self.next();
        let src = self.path().join(format!("playbook-{n}.yaml"));
        std::fs::write(&src, playbook).unwrap();
        let lic = self.read_license(license);
        helixor::compile_file(&src, &lic, out).unwrap();
    }

    /// The example PII pack and the test pack at `version`, compiled for `license`, in `dir`.
    pub fn packs(&self, license: &Path, dir: &Path, version: &str) -> Vec<PathBuf> {
        std::fs::create_dir_all(dir).unwrap();
        let pii = dir.join("pii.hxpack");
        self.compile_text(license, helixor::EXAMPLE_PLAYBOOK_YAML, &pii);
        let ids = dir.join("ids.hxpack");
        self.compile_text(license, &test_playbook(version), &ids);
        vec![pii, ids]
    }
}

/// The state of a fresh deployment in `fx` (a license, both packs, the PII
/// pack as `default_pack`) after `tweak`, serving its generation 1.
pub fn pii_state(
    fx: &Fixture,
    tweak: impl FnOnce(&mut helixor::server::Config),
) -> std::sync::Arc<helixor::server::AppState> {
    use helixor::server::{AppState, Config, Generation, Sources};
    let license = fx.license();
    let packs_dir = fx.path().join("packs");
    fx.packs(&license, &packs_dir, "1.0.0");
    let mut config = Config::with_packs_dir(&packs_dir);
    config.license = Some(license);
    config.issuer_keys = Some(fx.issuer_dir.clone());
    config.default_pack = Some("compliance.regulatory_pii_guard.v1".into());
    tweak(&mut config);
    let generation = Generation::load(&Sources::from_config(&config), 1).unwrap();
    AppState::new(config, Some(generation)).unwrap()
}

/// A directory laid out as the kubelet lays out a projected volume:
/// `..data -> ..<timestamp>/`, `license.hxlic -> ..data/license.hxlic`,
/// `packs -> ..data/packs`. [`K8sVolume::deploy`] swaps `..data` atomically.
pub struct K8sVolume {
    pub root: PathBuf,
    current: Option<PathBuf>,
    n: u64,
}

impl K8sVolume {
    pub fn new(root: PathBuf) -> Self {
        std::fs::create_dir_all(&root).unwrap();
        Self {
            root,
            current: None,
            n: 0,
        }
    }

    pub fn license_path(&self) -> PathBuf {
        self.root.join("license.hxlic")
    }

    pub fn packs_dir(&self) -> PathBuf {
        self.root.join("packs")
    }

    /// Writes a new timestamped directory, swaps `..data` to it with one
    /// rename and removes the previous one, as the kubelet's atomic writer does.
    pub fn deploy(&mut self, license: &Path, packs: &[PathBuf]) {
        self.n += 1;
        let stamp = format!("..2026_01_01_00_00_{:02}.{:09}", self.n % 60, self.n);
        let dir = self.root.join(&stamp);
        std::fs::create_dir_all(dir.join("packs")).unwrap();
        std::fs::copy(license, dir.join("license.hxlic")).unwrap();
        for p in packs {
            std::fs::copy(p, dir.join("packs").join(p.file_name().unwrap())).unwrap();
        }
        let tmp = self.root.join("..data_tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&stamp, &tmp).unwrap();
        std::fs::rename(&tmp, self.root.join("..data")).unwrap();
        for name in ["license.hxlic", "packs"] {
            let link = self.root.join(name);
            if std::fs::symlink_metadata(&link).is_err() {
                std::os::unix::fs::symlink(Path::new("..data").join(name), &link).unwrap();
            }
        }
        if let Some(old) = self.current.replace(dir) {
            std::fs::remove_dir_all(old).unwrap();
        }
    }
}

/// An HTTP answer.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Sends one request on a new connection (`Connection: close`) and reads the answer.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> std::io::Result<Answer> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(15)))?;
    s.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(b) = body {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    req.push_str("\r\n");
    if let Some(b) = body {
        req.push_str(b);
    }
    s.write_all(req.as_bytes())?;
    read_answer(&mut s)
}

/// Reads an answer to the end of the connection.
pub fn read_answer(s: &mut TcpStream) -> std::io::Result<Answer> {
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no HTTP head in {text:?}")))?;
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status line"))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Ok(Answer {
        status,
        headers,
        body: body.to_string(),
    })
}

/// Polls `f` every 25 ms until it returns `Some`, or panics after `limit`.
pub fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// The real `helixor-pack serve` on `127.0.0.1:0`; killed when dropped.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    pub stderr: PathBuf,
}

/// `helixor-pack serve --listen 127.0.0.1:0 <args>` with no inherited
/// `HELIXOR_*` or proxy variable and the given ones set.
pub fn serve_command<S: AsRef<std::ffi::OsStr>>(args: &[S], envs: &[(&str, &Path)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_helixor-pack"));
    super::scrubbed(&mut cmd)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd
}

impl Server {
    /// Starts `serve --config <config>`, waits for `listening on ADDR`.
    pub fn start(config: &Path, log_dir: &Path) -> Self {
        let args = vec!["--config".to_string(), config.display().to_string()];
        Self::start_with(&args, &[], log_dir)
    }

    /// Starts `serve --listen 127.0.0.1:0 <args>` with extra environment variables.
    pub fn start_with(args: &[String], envs: &[(&str, &Path)], log_dir: &Path) -> Self {
        let (child, addr, stderr) = spawn_listening(serve_command(args, envs), log_dir, "server");
        Self {
            child,
            addr,
            stderr,
        }
    }

    pub fn get(&self, path: &str) -> Answer {
        request(self.addr, "GET", path, None).unwrap()
    }

    pub fn post(&self, path: &str, body: &str) -> Answer {
        request(self.addr, "POST", path, Some(body)).unwrap()
    }

    pub fn generation(&self) -> u64 {
        self.get("/v1/status").json()["generation"]
            .as_u64()
            .unwrap()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Sends a signal with `kill(1)`.
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig} failed");
    }

    /// Waits for the process to exit; its exit code.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "the server did not exit:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `cmd` (stdout piped, stderr to a log file in `log_dir` named after
/// `what`) and waits up to 20 s for its `listening on ADDR` line: the child,
/// the address and the log file. Panics with the log if it does not start.
pub fn spawn_listening(
    mut cmd: Command,
    log_dir: &Path,
    what: &str,
) -> (Child, SocketAddr, PathBuf) {
    let stderr = log_dir.join(format!(
        "{what}-{}.log",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        while let Some(Ok(line)) = lines.next() {
            if let Some(a) = line.strip_prefix("listening on ") {
                let _ = tx.send(a.trim().to_string());
            }
        }
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(a) => (child, a.parse().unwrap(), stderr),
        Err(_) => {
            let _ = child.kill();
            let log = std::fs::read_to_string(&stderr).unwrap_or_default();
            panic!("the {what} did not start:\n{log}");
        }
    }
}

/// Writes a config file for a server on the given deployment.
pub fn write_config(
    path: &Path,
    license: &Path,
    packs_dir: &Path,
    issuer_keys: &Path,
    extra: &str,
) {
    std::fs::write(
        path,
        format!(
            "license: {}\npacks_dir: {}\nissuer_keys: {}\n{extra}",
            license.display(),
            packs_dir.display(),
            issuer_keys.display()
        ),
    )
    .unwrap();
}

/// A deployment of its own: a license, both packs in `packs/` and
/// `helixor.yaml` naming them, the issuer keys and `extra` (YAML appended
/// as it is). Returns (fixture, license, packs dir, config file).
pub fn deployment(extra: &str) -> (Fixture, PathBuf, PathBuf, PathBuf) {
    let fx = Fixture::new();
    let lic = fx.license();
    let packs_dir = fx.path().join("packs");
    fx.packs(&lic, &packs_dir, "1.0.0");
    let cfg = fx.path().join("helixor.yaml");
    write_config(&cfg, &lic, &packs_dir, &fx.issuer_dir, extra);
    (fx, lic, packs_dir, cfg)
}

/// [§12.4](docs/gateways.md#s12-4): the places of an LLM or agent exchange where a value
/// travels, each a JSON body with `value` in one string (`value` holds no
/// quote or backslash). Every row was allowed through the gateways before
/// every string was judged (issue 28).
pub fn agent_bodies(value: &str) -> Vec<(&'static str, String)> {
    let escaped = value.replace('-', "\\u002d").replace('@', "\\u0040");
    let rows: [(&str, &str); 12] = [
        (
            "responses instructions",
            r#"{"model":"m","instructions":"Customer: {V}","input":"hi"}"#,
        ),
        (
            "responses function_call_output",
            r#"{"model":"m","input":[{"type":"function_call","call_id":"c1","name":"crm","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"found {V}"}]}"#,
        ),
        (
            "anthropic tool_result string",
            r#"{"model":"c","max_tokens":9,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"found {V}"}]}]}"#,
        ),
        (
            "anthropic tool_result blocks",
            r#"{"model":"c","max_tokens":9,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"found {V}"}]}]}]}"#,
        ),
        (
            "anthropic document",
            r#"{"model":"c","max_tokens":9,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"file: {V}"}}]}]}"#,
        ),
        (
            "chat tool_calls arguments",
            r#"{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"crm","arguments":"{\"q\":\"{V}\"}"}}]}]}"#,
        ),
        (
            "chat tool message",
            r#"{"model":"m","messages":[{"role":"tool","tool_call_id":"c1","content":"{\"found\":\"{V}\"}"}]}"#,
        ),
        (
            "tools description",
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"crm","description":"default contact {V}","parameters":{"type":"object"}}}]}"#,
        ),
        (
            "message name",
            r#"{"model":"m","messages":[{"role":"user","name":"{V}","content":"hi"}]}"#,
        ),
        (
            "gemini contents",
            r#"{"contents":[{"role":"user","parts":[{"text":"about {V}"}]}]}"#,
        ),
        (
            "unicode escapes",
            r#"{"model":"m","messages":[{"role":"user","content":"about {E}"}]}"#,
        ),
        (
            "unknown shape",
            r#"{"model":"m","metadata":{"crm":[{"notes":"{V}"}]},"messages":[{"role":"user","content":"hi"}]}"#,
        ),
    ];
    rows.iter()
        .map(|(name, t)| (*name, t.replace("{V}", value).replace("{E}", &escaped)))
        .collect()
}
