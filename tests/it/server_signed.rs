//! Signed packs in serve mode ([§17](docs/guides/signing.md#s17)), against the real binary on
//! 127.0.0.1: a pack and its `.sig` are one deployment. Under traffic, a good
//! signed redeploy swaps with no failed request; a deployment whose
//! signatures are foreign, missing, or a rollback fails its reload, the old
//! generation keeps serving, and status and metrics name the check.

use crate::support::server::{
    request, wait_for, write_config, Fixture, K8sVolume, Server, TEST_PACK,
};
use helixor::{read_signing_key, signature_path, PackSignature};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use time::OffsetDateTime;

const FAST: &str = "reload:\n  debounce_ms: 100\n  rescan_interval_s: 1\n";
const EVAL: &str = r#"{"text": "ticket TCK-123456", "pack_id": "custom.test_ids.v1"}"#;

/// Writes `<pack>.sig` for each pack, signed with `key_file` at `sequence`;
/// returns the packs and their signatures (one deployment).
fn sign_all(packs: &[PathBuf], key_file: &Path, sequence: u64) -> Vec<PathBuf> {
    let (key_id, key) = read_signing_key(key_file).unwrap();
    let mut out = packs.to_vec();
    for p in packs {
        let bytes = std::fs::read(p).unwrap();
        let sig = PackSignature::sign(
            &bytes,
            &p.display().to_string(),
            &key_id,
            &key,
            sequence,
            OffsetDateTime::now_utc(),
        )
        .unwrap();
        let path = signature_path(p);
        std::fs::write(&path, sig.to_file_text()).unwrap();
        out.push(path);
    }
    out
}

fn last_reload(server: &Server) -> Value {
    server.get("/v1/status").json()["last_reload"].clone()
}

/// Deploys `files` and waits for a failed reload naming `reason` (a
/// failed deployment is retried at each rescan: the wait is for its message).
fn refused(server: &Server, vol: &mut K8sVolume, files: &[PathBuf], reason: &str, generation: u64) {
    vol.deploy(&files[0].with_file_name("license.hxlic"), files);
    let r = wait_for(
        Duration::from_secs(10),
        &format!("a failed reload ({reason})"),
        || {
            let r = last_reload(server);
            let named = r["message"]
                .as_str()
                .is_some_and(|m| m.contains(&format!(": {reason}: ")));
            (r["result"] == "failure" && named).then_some(r)
        },
    );
    assert_eq!(r["error"], "PackSignatureError", "{r}");
    assert_eq!(server.generation(), generation);
}

#[test]
fn signed_redeploys_under_traffic_and_refused_ones_keep_the_old_generation() {
    let fx = Fixture::new();
    let signer = helixor::keygen("ops", &fx.path().join("signer-keys")).unwrap();
    let signers = fx.path().join("signers");
    std::fs::create_dir_all(&signers).unwrap();
    std::fs::copy(&signer.public_path, signers.join("ops.pub")).unwrap();
    let mut vol = K8sVolume::new(fx.path().join("deployment"));
    // Each build holds its license (as `license.hxlic`), packs and signatures.
    let build = |version: &str, key: &Path, sequence: u64, sign: bool| -> Vec<PathBuf> {
        let dir = fx.path().join(format!("build-{version}-{sequence}"));
        std::fs::create_dir_all(&dir).unwrap();
        let lic = dir.join("license.hxlic");
        std::fs::copy(fx.license(), &lic).unwrap();
        let packs = fx.packs(&lic, &dir, version);
        if sign {
            sign_all(&packs, key, sequence)
        } else {
            packs
        }
    };
    let first = build("1.0.0", &signer.secret_path, 10, true);
    vol.deploy(&first[0].with_file_name("license.hxlic"), &first);
    let cfg = fx.path().join("helixor.yaml");
    write_config(
        &cfg,
        &vol.license_path(),
        &vol.packs_dir(),
        &fx.issuer_dir,
        &format!("{FAST}pack_signers: {}\n", signers.display()),
    );
    let server = Server::start(&cfg, fx.path());
    let packs = server.get("/v1/packs").json();
    let ids = packs["packs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pack_id"] == TEST_PACK)
        .unwrap()
        .clone();
    assert_eq!(
        ids["signature"],
        json!({"signed_by": "ops", "sequence": 10, "verified": true})
    );

    let addr = server.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let stop_client = Arc::clone(&stop);
    let client = std::thread::spawn(move || {
        let (mut ok, mut bad) = (0u64, Vec::<String>::new());
        let deadline = Instant::now() + Duration::from_secs(90);
        while !stop_client.load(Ordering::SeqCst) && Instant::now() < deadline {
            match request(addr, "POST", "/evaluate", Some(EVAL)) {
                Ok(a) if a.status == 200 => ok += 1,
                Ok(a) => bad.push(format!("{}: {}", a.status, a.body)),
                Err(e) => bad.push(e.to_string()),
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        (ok, bad)
    });

    // A good signed redeploy.
    let second = build("2.0.0", &signer.secret_path, 20, true);
    vol.deploy(&second[0].with_file_name("license.hxlic"), &second);
    wait_for(Duration::from_secs(10), "generation 2", || {
        (server.generation() == 2).then_some(())
    });
    // Signed by the license issuer, not a pack signer.
    refused(
        &server,
        &mut vol,
        &build("3.0.0", &fx.key_file, 30, true),
        "untrusted_key",
        2,
    );
    // No signatures at all.
    refused(
        &server,
        &mut vol,
        &build("3.0.0", &signer.secret_path, 30, false),
        "missing",
        2,
    );
    // A lower sequence than the one serving: a rollback.
    refused(
        &server,
        &mut vol,
        &build("3.0.0", &signer.secret_path, 19, true),
        "rollback",
        2,
    );
    // A signature of the previous build beside a new pack: stale.
    let mut stale = build("3.0.0", &signer.secret_path, 30, true);
    let ids_sig = stale
        .iter()
        .position(|p| p.ends_with("ids.hxpack.sig"))
        .unwrap();
    std::fs::copy(
        second
            .iter()
            .find(|p| p.ends_with("ids.hxpack.sig"))
            .unwrap(),
        &stale[ids_sig],
    )
    .unwrap();
    refused(&server, &mut vol, &stale, "digest_mismatch", 2);
    stale.clear();
    // Equal sequences are not a rollback; the next good build serves.
    let fourth = build("4.0.0", &signer.secret_path, 20, true);
    vol.deploy(&fourth[0].with_file_name("license.hxlic"), &fourth);
    wait_for(Duration::from_secs(10), "generation 3", || {
        (server.generation() == 3).then_some(())
    });
    let d = server.post("/evaluate", EVAL).json();
    assert_eq!(
        (d["generation"].as_u64(), d["pack_version"].as_str()),
        (Some(3), Some("4.0.0"))
    );

    stop.store(true, Ordering::SeqCst);
    let (ok, bad) = client.join().unwrap();
    assert!(
        bad.is_empty(),
        "{} failed requests, first: {:?}",
        bad.len(),
        bad.first()
    );
    assert!(ok >= 20, "only {ok} requests");
    let m = server.get("/metrics").body;
    // Counted per attempt (a refused deployment is retried at each rescan).
    let count = |reason: &str| -> u64 {
        let prefix = format!("helixor_pack_signature_failures_total{{reason=\"{reason}\"}} ");
        m.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {prefix}in {m}"))
    };
    for reason in ["untrusted_key", "missing", "rollback", "digest_mismatch"] {
        assert!(count(reason) >= 1, "{reason}: {m}");
    }
    assert_eq!(count("bad_signature"), 0);
}

#[test]
fn start_up_requires_valid_signatures_when_signers_are_configured() {
    let fx = Fixture::new();
    let lic = fx.license();
    let packs_dir = fx.path().join("packs");
    fx.packs(&lic, &packs_dir, "1.0.0");
    let signers = fx.path().join("signers");
    std::fs::create_dir_all(&signers).unwrap();
    helixor::keygen("ops", &signers).unwrap();
    std::fs::remove_file(signers.join("ops.key")).unwrap();
    let cfg = fx.path().join("helixor.yaml");
    write_config(
        &cfg,
        &lic,
        &packs_dir,
        &fx.issuer_dir,
        &format!("pack_signers: {}\n", signers.display()),
    );
    let out = crate::support::server::serve_command(&["--config", cfg.to_str().unwrap()], &[])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("PackSignatureError: "), "{err}");
    assert!(err.contains(": missing: no signature file"), "{err}");

    // require_pack_signatures without signers: a configuration error.
    write_config(
        &cfg,
        &lic,
        &packs_dir,
        &fx.issuer_dir,
        "require_pack_signatures: true\n",
    );
    let out = crate::support::server::serve_command(&["--config", cfg.to_str().unwrap()], &[])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "ConfigError: key `require_pack_signatures` is true but `pack_signers` is not set"
        ),
        "{err}"
    );
}
