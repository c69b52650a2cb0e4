//! Serve mode end to end: the real `helixor-pack serve` on 127.0.0.1 with an
//! ephemeral port, driven over HTTP while deployments are swapped the way the
//! kubelet swaps a projected volume. Every wait is bounded.

use crate::support::server::{
    request, wait_for, write_config, Fixture, K8sVolume, Server, TEST_PACK,
};
use serde_json::Value;
use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use time::OffsetDateTime;

/// Fast reloads for tests: 100 ms debounce, 1 s rescan.
const FAST: &str = "reload:\n  debounce_ms: 100\n  rescan_interval_s: 1\nlog:\n  level: info\n";
const EVAL: &str = r#"{"text": "ticket TCK-123456", "pack_id": "custom.test_ids.v1"}"#;

/// A fixture with a Kubernetes-style volume holding `version` of the packs
/// for a one-year license, and a config file for it.
fn k8s_setup(extra: &str) -> (Fixture, K8sVolume, PathBuf) {
    k8s_setup_with(extra, Fixture::license)
}

/// [`k8s_setup`] with the license `issue` makes.
fn k8s_setup_with(
    extra: &str,
    issue: impl FnOnce(&Fixture) -> PathBuf,
) -> (Fixture, K8sVolume, PathBuf) {
    let fx = Fixture::new();
    let mut vol = K8sVolume::new(fx.path().join("deployment"));
    let lic = issue(&fx);
    let packs = fx.packs(&lic, &fx.path().join("build-1"), "1.0.0");
    vol.deploy(&lic, &packs);
    let cfg = fx.path().join("helixor.yaml");
    write_config(
        &cfg,
        &vol.license_path(),
        &vol.packs_dir(),
        &fx.issuer_dir,
        &format!("{FAST}{extra}"),
    );
    (fx, vol, cfg)
}

/// A license and its packs in a plain `packs` directory, with a config
/// file (`extra` appended): (fixture, license, packs dir, config).
fn dir_setup(extra: &str) -> (Fixture, PathBuf, PathBuf, PathBuf) {
    let fx = Fixture::new();
    let lic = fx.license();
    let packs_dir = fx.path().join("packs");
    fx.packs(&lic, &packs_dir, "1.0.0");
    let cfg = fx.path().join("helixor.yaml");
    write_config(&cfg, &lic, &packs_dir, &fx.issuer_dir, extra);
    (fx, lic, packs_dir, cfg)
}

/// A renewed license with its recompiled packs at `version`.
fn renewal(fx: &Fixture, version: &str) -> (PathBuf, Vec<PathBuf>) {
    let lic = fx.license();
    let packs = fx.packs(&lic, &fx.path().join(format!("build-{version}")), version);
    (lic, packs)
}

fn decision(server: &Server) -> Value {
    let a = server.post("/evaluate", EVAL);
    assert_eq!(a.status, 200, "{}", a.body);
    a.json()
}

#[test]
fn a_k8s_data_swap_to_a_renewed_license_and_packs_reloads() {
    let (fx, mut vol, cfg) = k8s_setup("");
    let server = Server::start(&cfg, fx.path());
    let d = decision(&server);
    assert_eq!(d["generation"], 1);
    assert_eq!(d["pack_version"], "1.0.0");
    assert_eq!(d["clean_text"], "ticket [REDACTED_TICKET_ID]");
    let old_license = server.get("/v1/status").json()["license"]["license_id"].clone();

    let (lic, packs) = renewal(&fx, "2.0.0");
    let started = Instant::now();
    vol.deploy(&lic, &packs);
    wait_for(Duration::from_secs(5), "generation 2", || {
        (server.generation() == 2).then_some(())
    });
    assert!(started.elapsed() < Duration::from_secs(5));
    let d = decision(&server);
    assert_eq!(d["generation"], 2);
    assert_eq!(d["pack_version"], "2.0.0");
    let status = server.get("/v1/status").json();
    assert_ne!(status["license"]["license_id"], old_license);
    assert_eq!(status["last_reload"]["result"], "success");
    // Nothing changes afterwards: rescans find the same digests.
    std::thread::sleep(Duration::from_millis(1300));
    assert_eq!(server.generation(), 2);
    let metrics = server.get("/metrics").body;
    assert!(
        metrics.contains("helixor_reloads_total{result=\"success\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("helixor_generation 2"));
    // The swap is published before its log line is written.
    wait_for(Duration::from_secs(2), "the reload log line", || {
        server
            .log()
            .contains("reload: generation 2 is serving")
            .then_some(())
    });
}

#[test]
fn b_a_license_alone_fails_then_its_packs_complete_the_deployment() {
    let (fx, mut vol, cfg) = k8s_setup("");
    let server = Server::start(&cfg, fx.path());
    let old_packs: Vec<PathBuf> = ["pii.hxpack", "ids.hxpack"]
        .iter()
        .map(|n| fx.path().join("build-1").join(n))
        .collect();
    let (lic, packs) = renewal(&fx, "2.0.0");

    // Half a deployment: the new license with the old packs.
    vol.deploy(&lic, &old_packs);
    let status = wait_for(Duration::from_secs(5), "a failed reload", || {
        let s = server.get("/v1/status").json();
        (s["last_reload"]["result"] == "failure").then_some(s)
    });
    assert_eq!(status["last_reload"]["error"], "PackUnsealError");
    // The failure names the pack that does not open with the new license.
    let message = status["last_reload"]["message"].as_str().unwrap();
    assert!(
        message.ends_with(
            ".hxpack: Decryption failed: content key mismatch or corrupted pack envelope"
        ),
        "{message}"
    );
    assert_eq!(status["generation"], 1);
    let d = decision(&server);
    assert_eq!(
        (d["generation"].as_u64(), d["pack_version"].as_str()),
        (Some(1), Some("1.0.0"))
    );
    assert_eq!(server.get("/readyz").status, 200);
    let metrics = server.get("/metrics").body;
    assert!(
        metrics.contains("helixor_last_reload_successful 0"),
        "{metrics}"
    );
    assert!(server.log().contains("PackUnsealError"));

    // The other half arrives.
    vol.deploy(&lic, &packs);
    wait_for(Duration::from_secs(5), "generation 2", || {
        (server.generation() == 2).then_some(())
    });
    let d = decision(&server);
    assert_eq!(d["pack_version"], "2.0.0");
    // The watcher may see one more event of the same deployment after the
    // reload that made generation 2: that reload finds nothing new.
    let last = server.get("/v1/status").json()["last_reload"]["result"].clone();
    assert!(last == "success" || last == "unchanged", "{last}");
    let metrics = server.get("/metrics").body;
    assert!(
        metrics.contains("helixor_last_reload_successful 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("helixor_reloads_total{result=\"success\"} 1"),
        "{metrics}"
    );
}

#[test]
fn c_twenty_deployments_under_traffic_lose_nothing() {
    let (fx, mut vol, cfg) = k8s_setup("");
    let server = Server::start(&cfg, fx.path());
    let addr = server.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let stop_client = Arc::clone(&stop);
    let client = std::thread::spawn(move || {
        let (mut ok, mut last) = (0u64, 0u64);
        let mut bad: Vec<String> = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !stop_client.load(Ordering::SeqCst) && Instant::now() < deadline {
            match request(addr, "POST", "/evaluate", Some(EVAL)) {
                Ok(a) if a.status == 200 => {
                    let v = a.json();
                    let g = v["generation"].as_u64().unwrap();
                    if g < last {
                        bad.push(format!("generation went from {last} to {g}"));
                    }
                    // Decisions come from the packs of their generation, never a mix.
                    if v["pack_version"] != format!("{g}.0.0").as_str() {
                        bad.push(format!(
                            "generation {g} answered with {}",
                            v["pack_version"]
                        ));
                    }
                    last = g;
                    ok += 1;
                }
                Ok(a) => bad.push(format!("{}: {}", a.status, a.body)),
                Err(e) => bad.push(e.to_string()),
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        (ok, last, bad)
    });
    for g in 2..=21u64 {
        let (lic, packs) = renewal(&fx, &format!("{g}.0.0"));
        vol.deploy(&lic, &packs);
        wait_for(Duration::from_secs(10), &format!("generation {g}"), || {
            (server.generation() == g).then_some(())
        });
    }
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::SeqCst);
    let (ok, last, bad) = client.join().unwrap();
    assert!(
        bad.is_empty(),
        "{} failures, first: {:?}",
        bad.len(),
        bad.first()
    );
    assert_eq!(last, 21);
    assert!(ok >= 40, "only {ok} requests");
}

#[test]
fn d_sighup_and_admin_reload() {
    let (fx, lic, packs_dir, cfg) = dir_setup("reload:\n  watch: false\n  rescan_interval_s: 0\n");
    let server = Server::start(&cfg, fx.path());
    let recompile = |version: &str| {
        fx.compile_text(
            &lic,
            &crate::support::server::test_playbook(version),
            &packs_dir.join("ids.hxpack"),
        )
    };
    recompile("2.0.0");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(server.generation(), 1, "no watcher, no rescan");
    server.signal("HUP");
    wait_for(Duration::from_secs(5), "generation 2 after SIGHUP", || {
        (server.generation() == 2).then_some(())
    });
    assert_eq!(decision(&server)["pack_version"], "2.0.0");
    assert_eq!(
        server.get("/v1/status").json()["last_reload"]["trigger"],
        "sighup"
    );

    let a = server.post("/admin/reload", "");
    assert_eq!(a.status, 200);
    assert_eq!(
        a.json(),
        serde_json::json!({"result": "unchanged", "generation": 2})
    );
    recompile("3.0.0");
    let a = server.post("/admin/reload", "");
    assert_eq!(
        a.json(),
        serde_json::json!({"result": "success", "generation": 3})
    );
    assert_eq!(decision(&server)["pack_version"], "3.0.0");

    // A half-written pack: 409, generation 3 keeps serving; SIGHUP too.
    std::fs::write(packs_dir.join("ids.hxpack"), b"HXPK\x00\x01").unwrap();
    let a = server.post("/admin/reload", "");
    assert_eq!(a.status, 409);
    let v = a.json();
    assert_eq!(
        (v["result"].as_str(), v["generation"].as_u64()),
        (Some("failure"), Some(3))
    );
    assert_eq!(v["error"], "PackFormatError");
    server.signal("HUP");
    wait_for(Duration::from_secs(5), "a failed SIGHUP reload", || {
        let s = server.get("/v1/status").json();
        (s["last_reload"]["trigger"] == "sighup" && s["last_reload"]["result"] == "failure")
            .then_some(())
    });
    assert_eq!(decision(&server)["generation"], 3);
    let m = server.get("/metrics").body;
    assert!(
        m.contains("helixor_reloads_total{result=\"failure\"} 2"),
        "{m}"
    );
    assert!(
        m.contains("helixor_reloads_total{result=\"success\"} 2"),
        "{m}"
    );
    assert!(
        m.contains("helixor_reloads_total{result=\"unchanged\"} 1"),
        "{m}"
    );
}

#[test]
fn e_a_license_expiring_while_serving_then_renewed_by_hot_reload() {
    let now = OffsetDateTime::now_utc().replace_nanosecond(0).unwrap();
    // Long enough to compile two packs and start on a loaded CI machine.
    let (fx, mut vol, cfg) =
        k8s_setup_with("", |fx| fx.license_until(now + time::Duration::seconds(6)));
    let server = Server::start(&cfg, fx.path());
    assert_eq!(decision(&server)["generation"], 1);
    // Logged at start-up, before the listener is announced.
    assert!(server.log().contains("the license expires in 0 days"));

    let a = wait_for(Duration::from_secs(15), "the license to expire", || {
        let a = server.post("/evaluate", EVAL);
        (a.status != 200).then_some(a)
    });
    assert_eq!(a.status, 503);
    assert_eq!(a.json()["error"], "LicenseExpiredError");
    assert!(!a.body.contains("TCK-123456"));
    let a = server.post("/evaluate/batch", &format!(r#"{{"items": [{EVAL}]}}"#));
    assert_eq!(
        (a.status, a.json()["error"].as_str()),
        (503, Some("LicenseExpiredError"))
    );
    let a = server.get("/readyz");
    assert_eq!(
        (a.status, a.json()["error"].as_str()),
        (503, Some("LicenseExpiredError"))
    );
    let s = server.get("/v1/status");
    assert_eq!(s.status, 200);
    assert_eq!(s.json()["license"]["valid_now"], false);
    assert_eq!(server.get("/metrics").status, 200);
    assert_eq!(server.get("/healthz").status, 200);
    wait_for(Duration::from_secs(5), "the expiry log line", || {
        server
            .log()
            .contains("the license has expired")
            .then_some(())
    });

    let (lic2, packs2) = renewal(&fx, "2.0.0");
    vol.deploy(&lic2, &packs2);
    wait_for(Duration::from_secs(5), "service restored", || {
        (server.post("/evaluate", EVAL).status == 200).then_some(())
    });
    let d = decision(&server);
    assert_eq!(
        (d["generation"].as_u64(), d["pack_version"].as_str()),
        (Some(2), Some("2.0.0"))
    );
    assert_eq!(server.get("/readyz").status, 200);
}

#[test]
fn f_sigterm_drains_finishes_in_flight_requests_and_exits_0() {
    let (fx, _vol, cfg) = k8s_setup("shutdown:\n  drain_delay_ms: 1500\n  grace_ms: 5000\n");
    let mut server = Server::start(&cfg, fx.path());
    let addr = server.addr;
    // A request in flight: the head and half of the body are sent.
    let body = EVAL.as_bytes();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "POST /evaluate HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(&body[..10]).unwrap();
    s.flush().unwrap();
    std::thread::sleep(Duration::from_millis(150));

    let signalled = Instant::now();
    server.signal("TERM");
    // Draining: not ready, still serving new requests.
    let a = wait_for(Duration::from_secs(2), "readiness off", || {
        let a = server.get("/readyz");
        (a.status == 503).then_some(a)
    });
    assert_eq!(a.json()["error"], "ServiceUnavailableError");
    assert_eq!(server.post("/evaluate", EVAL).status, 200);
    assert!(signalled.elapsed() < Duration::from_millis(1500));
    // After the drain delay the listener is closed.
    wait_for(Duration::from_secs(3), "the listener to close", || {
        TcpStream::connect(addr).is_err().then_some(())
    });
    // The in-flight request completes.
    s.write_all(&body[10..]).unwrap();
    let a = crate::support::server::read_answer(&mut s).unwrap();
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.json()["action"], "redact_ticket_id");
    assert_eq!(server.wait_exit(Duration::from_secs(5)), Some(0));
    let log = server.log();
    assert!(log.contains("shutting down"), "{log}");
    assert!(log.contains("stopped"), "{log}");
}

/// Runs `serve` expecting it to fail before listening: (exit code, stdout, stderr).
fn serve_fails(args: &[&str], envs: &[(&str, &Path)]) -> (i32, String, String) {
    let mut child = crate::support::server::serve_command(args, envs)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn g_start_up_failures_exit_with_the_named_error_before_listening() {
    let fx = Fixture::new();
    let lic = fx.license();
    let packs_dir = fx.path().join("packs");
    fx.packs(&lic, &packs_dir, "1.0.0");
    let s = |p: &Path| p.display().to_string();
    let (lic_s, packs_s, keys_s) = (s(&lic), s(&packs_dir), s(&fx.issuer_dir));
    let base = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = vec![
            "--license".into(),
            lic_s.clone(),
            "--issuer-keys".into(),
            keys_s.clone(),
        ];
        v.extend(extra.iter().map(|x| x.to_string()));
        v
    };
    let check = |args: Vec<String>, code: i32, name: &str, needle: &str| {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let (c, out, err) = serve_fails(&a, &[]);
        assert_eq!(c, code, "{args:?}: {err}");
        assert!(err.starts_with(&format!("{name}: ")), "{err}");
        assert!(err.contains(needle), "{needle} not in {err}");
        assert!(!out.contains("listening"), "{out}");
    };

    // Unknown key in the config file: ConfigError naming it, exit 2.
    let cfg = fx.path().join("bad.yaml");
    std::fs::write(
        &cfg,
        format!("packs_dir: {packs_s}\nreload:\n  debounce: 5\n"),
    )
    .unwrap();
    check(
        base(&["--config", &s(&cfg)]),
        2,
        "ConfigError",
        "reload.debounce",
    );
    // Wrong type: exit 2.
    std::fs::write(
        &cfg,
        format!("packs_dir: {packs_s}\nlimits:\n  max_body_bytes: big\n"),
    )
    .unwrap();
    check(
        base(&["--config", &s(&cfg)]),
        2,
        "ConfigError",
        "limits.max_body_bytes",
    );
    // A license signed by an unknown issuer: exit 4.
    let other = Fixture::new();
    check(
        vec![
            "--license".into(),
            lic_s.clone(),
            "--issuer-keys".into(),
            s(&other.issuer_dir),
            "--packs".into(),
            packs_s.clone(),
        ],
        4,
        "LicenseSignatureError",
        "test-issuer",
    );
    // A missing license: exit 4, no fallback.
    check(
        vec![
            "--license".into(),
            s(&fx.path().join("nope.hxlic")),
            "--packs".into(),
            packs_s.clone(),
        ],
        4,
        "LicenseNotFoundError",
        "nope.hxlic",
    );
    // An expired license: exit 4.
    let now = OffsetDateTime::now_utc().replace_nanosecond(0).unwrap();
    let expired = fx.license_window(
        now - time::Duration::hours(2),
        now - time::Duration::hours(1),
    );
    check(
        vec![
            "--license".into(),
            s(&expired),
            "--issuer-keys".into(),
            keys_s.clone(),
            "--packs".into(),
            packs_s.clone(),
        ],
        4,
        "LicenseExpiredError",
        "expired",
    );
    // An empty or missing packs directory: exit 5.
    let empty = fx.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    check(
        base(&["--packs", &s(&empty)]),
        5,
        "PackNotFoundError",
        "pack",
    );
    check(
        base(&["--packs", &s(&fx.path().join("missing"))]),
        5,
        "PackNotFoundError",
        "missing",
    );
    // Two files with one pack id: exit 5 naming both.
    let dup = fx.path().join("dup");
    std::fs::create_dir_all(&dup).unwrap();
    std::fs::copy(packs_dir.join("ids.hxpack"), dup.join("a.hxpack")).unwrap();
    std::fs::copy(packs_dir.join("ids.hxpack"), dup.join("b.hxpack")).unwrap();
    check(
        base(&["--packs", &s(&dup)]),
        5,
        "PackFormatError",
        "b.hxpack",
    );
    // A corrupted pack: exit 5.
    std::fs::write(dup.join("b.hxpack"), b"HXPK garbage").unwrap();
    check(
        base(&["--packs", &s(&dup)]),
        5,
        "PackFormatError",
        "b.hxpack",
    );
    // No packs_dir at all: ConfigError.
    check(base(&[]), 2, "ConfigError", "packs_dir");
    // --error-format json.
    let a: Vec<String> = base(&["--packs", &s(&empty)]);
    let mut args: Vec<&str> = vec!["--error-format", "json"];
    args.extend(a.iter().map(String::as_str));
    let (c, _, err) = serve_fails(&args, &[]);
    assert_eq!(c, 5);
    let v: Value = serde_json::from_str(err.trim()).unwrap();
    assert_eq!(v["error"], "PackNotFoundError");
}

#[test]
fn h_environment_configuration_and_the_healthcheck_command() {
    let fx = Fixture::new();
    let lic = fx.license();
    let packs_dir = fx.path().join("packs");
    fx.packs(&lic, &packs_dir, "1.0.0");
    // No config file: HELIXOR_PACKS_DIR, and the [§2](docs/formats.md#s2) lookup variables.
    let server = Server::start_with(
        &[],
        &[
            ("HELIXOR_PACKS_DIR", packs_dir.as_path()),
            ("HELIXOR_LICENSE_FILE", lic.as_path()),
            ("HELIXOR_ISSUER_KEYS", fx.issuer_dir.as_path()),
            ("HELIXOR_DEFAULT_PACK", Path::new(TEST_PACK)),
            ("HELIXOR_LOG_FORMAT", Path::new("json")),
        ],
        fx.path(),
    );
    let a = server.post("/evaluate", r#"{"text": "TCK-123456"}"#);
    assert_eq!(a.status, 200);
    assert_eq!(a.json()["pack_id"], TEST_PACK);
    // JSON logs, one object per line.
    let log = server.log();
    let first = log.lines().next().unwrap();
    let v: Value = serde_json::from_str(first).unwrap();
    assert_eq!(v["level"], "INFO");

    let probe = |url: String| {
        Command::new(env!("CARGO_BIN_EXE_helixor-pack"))
            .args(["healthcheck", "--url", &url])
            .output()
            .unwrap()
    };
    let out = probe(format!("http://{}/healthz", server.addr));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        probe(format!("http://{}/readyz", server.addr))
            .status
            .code(),
        Some(0)
    );
    let out = probe(format!("http://{}/nope", server.addr));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("404"));
    drop(server);
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = l.local_addr().unwrap();
    drop(l);
    assert_eq!(
        probe(format!("http://{closed}/healthz")).status.code(),
        Some(1)
    );
}

#[test]
fn i_packs_dir_deleted_and_recreated_and_a_burst_of_file_events() {
    // The watcher alone (no rescan), so each step shows that events arrive.
    let (fx, lic, packs_dir, cfg) =
        dir_setup("reload:\n  debounce_ms: 100\n  rescan_interval_s: 0\n");
    let spare = fx.path().join("spare");
    fx.packs(&lic, &spare, "2.0.0");
    let server = Server::start(&cfg, fx.path());

    // A thousand file events in about a second: hidden and temporary files
    // come and go, nothing to reload; the server answers throughout.
    for i in 0..500 {
        let tmp = packs_dir.join(format!(".pack.{i}.tmp"));
        std::fs::write(&tmp, b"partial").unwrap();
        std::fs::remove_file(&tmp).unwrap();
        if i % 100 == 0 {
            assert_eq!(server.post("/evaluate", EVAL).status, 200);
        }
    }
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(server.generation(), 1);
    let m = server.get("/metrics").body;
    let attempts: u64 = m
        .lines()
        .filter(|l| l.starts_with("helixor_reloads_total{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert!(attempts < 20, "{attempts} reloads for one burst:\n{m}");
    assert!(
        m.contains("helixor_reloads_total{result=\"failure\"} 0"),
        "{m}"
    );

    // The packs directory disappears: reloads fail, generation 1 serves.
    std::fs::remove_dir_all(&packs_dir).unwrap();
    let s = wait_for(Duration::from_secs(5), "a failed reload", || {
        let s = server.get("/v1/status").json();
        (s["last_reload"]["result"] == "failure").then_some(s)
    });
    assert_eq!(s["last_reload"]["error"], "PackNotFoundError");
    assert_eq!(decision(&server)["pack_version"], "1.0.0");
    // It comes back with new packs: generation 2.
    std::fs::rename(&spare, &packs_dir).unwrap();
    wait_for(Duration::from_secs(5), "generation 2", || {
        (server.generation() == 2).then_some(())
    });
    assert_eq!(decision(&server)["pack_version"], "2.0.0");
    // And the recreated directory is watched again: an edit inside it reloads.
    fx.compile_text(
        &lic,
        &crate::support::server::test_playbook("3.0.0"),
        &packs_dir.join("ids.hxpack"),
    );
    wait_for(Duration::from_secs(5), "generation 3", || {
        (server.generation() == 3).then_some(())
    });
    assert_eq!(decision(&server)["pack_version"], "3.0.0");
}

#[test]
fn j_plain_host_current_symlink_swap_is_seen_by_the_watcher() {
    // /srv/helixor/current -> releases/N, config naming current/license.hxlic
    // and current/packs: swapping `current` reloads without a rescan.
    let fx = Fixture::new();
    let base = fx.path().join("srv");
    let release = |n: u32| -> PathBuf {
        let dir = base.join("releases").join(n.to_string());
        let lic = fx.license();
        fx.packs(&lic, &dir.join("packs"), &format!("{n}.0.0"));
        std::fs::copy(&lic, dir.join("license.hxlic")).unwrap();
        dir
    };
    let swap = |n: u32| {
        let tmp = base.join("current.tmp");
        std::os::unix::fs::symlink(format!("releases/{n}"), &tmp).unwrap();
        std::fs::rename(&tmp, base.join("current")).unwrap();
    };
    release(1);
    swap(1);
    let cfg = fx.path().join("helixor.yaml");
    write_config(
        &cfg,
        &base.join("current/license.hxlic"),
        &base.join("current/packs"),
        &fx.issuer_dir,
        "reload:\n  debounce_ms: 100\n  rescan_interval_s: 0\n",
    );
    let server = Server::start(&cfg, fx.path());
    assert_eq!(decision(&server)["pack_version"], "1.0.0");
    release(2);
    swap(2);
    wait_for(Duration::from_secs(5), "generation 2", || {
        (server.generation() == 2).then_some(())
    });
    assert_eq!(decision(&server)["pack_version"], "2.0.0");
}

#[test]
fn k_clients_that_disconnect_midway_leave_the_server_serving() {
    let (fx, _vol, cfg) = k8s_setup("");
    let server = Server::start(&cfg, fx.path());
    let addr = server.addr;
    let body = EVAL.as_bytes();
    for cut in [0, 5, body.len() / 2] {
        // Head sent, then part of the body (or none), then the connection drops.
        let mut s = TcpStream::connect(addr).unwrap();
        write!(
            s,
            "POST /evaluate HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .unwrap();
        s.write_all(&body[..cut]).unwrap();
        drop(s);
    }
    // A whole request whose client closes before reading the answer.
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /evaluate HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(body).unwrap();
    drop(s);
    // Half a request line, then nothing.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"POST /evalu").unwrap();
    drop(s);
    let a = server.post("/evaluate", EVAL);
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.json()["action"], "redact_ticket_id");
    assert_eq!(server.generation(), 1);
    assert_eq!(server.get("/healthz").status, 200);
}

#[test]
fn l_a_pack_entry_that_cannot_be_resolved_fails_the_reload_naming_it() {
    let (fx, _lic, packs_dir, cfg) = dir_setup("reload:\n  watch: false\n  rescan_interval_s: 0\n");
    let server = Server::start(&cfg, fx.path());
    // A symlink loop and a dangling link: each fails the reload (never a
    // silent drop of a pack), and generation 1 keeps serving both packs.
    for (name, target) in [
        ("loop.hxpack", "loop.hxpack"),
        ("gone.hxpack", "nowhere.hxpack"),
    ] {
        std::os::unix::fs::symlink(target, packs_dir.join(name)).unwrap();
        let a = server.post("/admin/reload", "");
        assert_eq!(a.status, 409, "{name}");
        let v = a.json();
        assert_eq!(v["result"], "failure", "{v}");
        assert_eq!(v["error"], "PackFormatError", "{v}");
        assert!(v["message"].as_str().unwrap().contains(name), "{v}");
        assert_eq!(decision(&server)["generation"], 1);
        std::fs::remove_file(packs_dir.join(name)).unwrap();
    }
    let a = server.post("/admin/reload", "");
    assert_eq!(a.json()["result"], "unchanged");
}

#[test]
fn m_a_stalled_upload_never_takes_the_only_concurrency_slot() {
    let (fx, _lic, _packs, cfg) = dir_setup(
        "limits:\n  max_concurrency: 1\n  request_timeout_ms: 3000\nreload:\n  watch: false\n",
    );
    let server = Server::start(&cfg, fx.path());
    let addr = server.addr;
    // A client that sends its head and a few bytes of a 100-byte body, then stalls.
    let mut stalled = TcpStream::connect(addr).unwrap();
    write!(
        stalled,
        "POST /evaluate HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"text\""
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // The only slot is free: other requests are served meanwhile.
    for _ in 0..3 {
        let a = server.post("/evaluate", EVAL);
        assert_eq!(a.status, 200, "{}", a.body);
        assert_eq!(a.json()["action"], "redact_ticket_id");
    }
    // The stalled upload ends at request_timeout_ms with the JSON 503.
    stalled
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut answer = String::new();
    let _ = std::io::Read::read_to_string(&mut stalled, &mut answer);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.contains("\"error\":\"ServiceUnavailableError\""),
        "{answer}"
    );
}
