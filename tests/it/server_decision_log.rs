//! The decision log of [§19](docs/guides/auditing.md#s19) against the real binary on 127.0.0.1:
//! one line per decision (single and batch), never the payload; a FATAL
//! line on disk before its answer; `log verify`, `log prove` and `log
//! consistency` on what the server wrote, and every tampering caught; a
//! restart resumes the tree after a torn line; `required` fails closed.

use crate::support::server::{deployment, wait_for, Server};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const PII: &str = "compliance.regulatory_pii_guard.v1";
const SSN_TEXT: &str = "My SSN is 123-45-6789, file it";
const HMAC_KEY: &str = "an hmac key of thirty-two bytes!";

struct LogSetup {
    _fx: crate::support::server::Fixture,
    cfg: PathBuf,
    log: PathBuf,
    public: PathBuf,
    dir: PathBuf,
}

fn setup(extra: &str) -> LogSetup {
    let (fx, _lic, _packs, cfg) = deployment("reload:\n  watch: false\n");
    let dir = fx.path().join("audit");
    let keys = fx.path().join("log-keys");
    let signer = helixor::keygen("audit-log", &keys).unwrap();
    let hmac = fx.path().join("hmac.key");
    std::fs::write(&hmac, HMAC_KEY).unwrap();
    let log = dir.join("decisions.jsonl");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str(&format!(
        "decision_log:\n  path: {}\n  signing_key: {}\n  hmac_key_file: {}\n{extra}",
        log.display(),
        signer.secret_path.display(),
        hmac.display()
    ));
    std::fs::write(&cfg, text).unwrap();
    LogSetup {
        cfg,
        log,
        public: signer.public_path,
        dir,
        _fx: fx,
    }
}

fn lines(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn helixor(args: &[&dyn AsRef<std::ffi::OsStr>]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_helixor-pack"));
    for a in args {
        cmd.arg(a);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn verify(s: &LogSetup) -> (i32, String, String) {
    let cp = checkpoint_of(&s.log);
    helixor(&[
        &"log",
        &"verify",
        &s.log,
        &"--checkpoint",
        &cp,
        &"--key",
        &s.public,
    ])
}

fn checkpoint_of(log: &Path) -> PathBuf {
    PathBuf::from(format!("{}.checkpoint", log.display()))
}

fn hmac_hex(payload: &str) -> String {
    use hmac::Mac;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(HMAC_KEY.as_bytes()).unwrap();
    mac.update(payload.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// The line a decision answer must have become.
fn expect_line(line: &Value, seq: u64, route: &str, answer: &Value, payload: &str) {
    let triggers = answer["triggers"].as_array().unwrap();
    assert_eq!(line["seq"], seq);
    assert_eq!(line["route"], route);
    assert_eq!(line["pack_id"], answer["pack_id"]);
    assert_eq!(line["pack_version"], answer["pack_version"]);
    assert_eq!(line["action"], answer["action"]);
    assert_eq!(line["severity"], answer["severity"]);
    assert_eq!(line["receipt_hash"], answer["receipt_hash"]);
    assert_eq!(
        line["rule_ids"],
        Value::from(
            triggers
                .iter()
                .map(|t| t["rule_id"].clone())
                .collect::<Vec<_>>()
        )
    );
    assert_eq!(
        line["match_counts"],
        Value::from(
            triggers
                .iter()
                .map(|t| t["match_count"].clone())
                .collect::<Vec<_>>()
        )
    );
    assert_eq!(line["payload_hmac"], hmac_hex(payload));
    assert_eq!(line["pack_sha256"].as_str().unwrap().len(), 64);
    assert_eq!(line.as_object().unwrap().len(), 15, "{line}");
}

#[test]
fn every_decision_is_a_line_and_the_log_verifies_proves_and_catches_tampering() {
    let s = setup("  checkpoint_every: 1\n");
    let mut server = Server::start(&s.cfg, s.dir.parent().unwrap());

    // A FATAL decision: its line is on disk when the answer arrives.
    let fatal = server.post(
        "/evaluate",
        &json!({"text": SSN_TEXT, "pack_id": PII}).to_string(),
    );
    assert_eq!(fatal.status, 200);
    assert_eq!(fatal.json()["severity"], "FATAL");
    let now = lines(&s.log);
    assert_eq!(now.len(), 1, "the FATAL line is written before the answer");
    expect_line(&now[0], 0, "/evaluate", &fatal.json(), SSN_TEXT);
    assert_eq!(
        now[0]["request_id"].as_str().unwrap(),
        fatal.header("x-request-id").unwrap()
    );

    let texts = ["Write to jane.doe@example.com", "nothing to see"];
    let single = server.post(
        "/v1/evaluate",
        &json!({"text": texts[0], "pack_id": PII}).to_string(),
    );
    let batch = server.post(
        "/evaluate/batch",
        &json!({"items": [{"text": texts[0], "pack_id": PII}, {"text": texts[1], "pack_id": PII}]})
            .to_string(),
    );
    assert_eq!(batch.status, 200);
    let results = batch.json()["results"].clone();
    let all = wait_for(Duration::from_secs(10), "four lines", || {
        let l = lines(&s.log);
        (l.len() == 4).then_some(l)
    });
    expect_line(&all[1], 1, "/v1/evaluate", &single.json(), texts[0]);
    expect_line(&all[2], 2, "/evaluate/batch", &results[0], texts[0]);
    expect_line(&all[3], 3, "/evaluate/batch", &results[1], texts[1]);
    let raw = std::fs::read_to_string(&s.log).unwrap();
    // Every member, in the line's own order.
    let order = [
        "seq",
        "time",
        "request_id",
        "route",
        "pack_id",
        "pack_version",
        "pack_sha256",
        "generation",
        "action",
        "severity",
        "rule_ids",
        "match_counts",
        "receipt_hash",
        "latency_us",
        "payload_hmac",
    ];
    let first = raw.lines().next().unwrap();
    let at: Vec<usize> = order
        .iter()
        .map(|k| first.find(&format!("\"{k}\":")).unwrap())
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{first}");
    for secret in ["123-45-6789", "jane.doe", "example.com", "nothing to see"] {
        assert!(!raw.contains(secret), "the log holds no payload");
    }

    // A checkpoint covering all four (checkpoint_every: 1).
    let cp_path = checkpoint_of(&s.log);
    wait_for(Duration::from_secs(10), "a checkpoint of 4", || {
        std::fs::read_to_string(&cp_path)
            .ok()
            .filter(|t| t.starts_with("audit-log\n4\n"))
    });
    let old_cp = s.dir.join("old.checkpoint");
    std::fs::copy(&cp_path, &old_cp).unwrap();
    let (code, out, err) = verify(&s);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(": 4 entries, root "), "{out}");
    assert!(
        out.contains("checkpoint: signed by audit-log, covers entries 0..4, verified"),
        "{out}"
    );

    // An inclusion proof as C2SP tlog-proof text, ending with the note.
    let (code, proof, err) = helixor(&[&"log", &"prove", &s.log, &"--seq", &"2"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        proof.starts_with("c2sp.org/tlog-proof@v1\nindex 2\n"),
        "{proof}"
    );
    assert!(proof.ends_with(&std::fs::read_to_string(&cp_path).unwrap()));
    let (code, _, err) = helixor(&[&"log", &"prove", &s.log, &"--seq", &"4"]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("DecisionLogError: entry 4 is not in the checkpoint's tree of 4 entries"),
        "{err}"
    );

    // More decisions: the new checkpoint extends the old one.
    server.post(
        "/evaluate",
        &json!({"text": "more", "pack_id": PII}).to_string(),
    );
    wait_for(Duration::from_secs(10), "a checkpoint of 5", || {
        std::fs::read_to_string(&cp_path)
            .ok()
            .filter(|t| t.starts_with("audit-log\n5\n"))
    });
    let (code, out, err) = helixor(&[
        &"log",
        &"consistency",
        &old_cp,
        &cp_path,
        &"--log",
        &s.log,
        &"--key",
        &s.public,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("(size 5) extends"), "{out}");
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(20)), Some(0));

    // Tampering: each caught, naming where.
    let good = std::fs::read_to_string(&s.log).unwrap();
    let good_lines: Vec<&str> = good.lines().collect();
    let edited = good.replacen("\"action\":\"block_", "\"action\":\"permit_", 1);
    let mut swapped = good_lines.clone();
    swapped.swap(1, 2);
    let mut deleted = good_lines.clone();
    deleted.remove(1);
    let truncated = good_lines[..3].join("\n") + "\n";
    let cases: [(&str, String, &str); 4] = [
        (
            "edit",
            edited,
            "the root of the log's first 5 entries differs",
        ),
        (
            "swap",
            swapped.join("\n") + "\n",
            "line 2 (entry 1): seq 2 where 1 was expected",
        ),
        (
            "delete",
            deleted.join("\n") + "\n",
            "line 2 (entry 1): seq 2 where 1 was expected",
        ),
        (
            "truncate",
            truncated,
            "the checkpoint covers 5 entries but the log has 3",
        ),
    ];
    for (what, text, message) in cases {
        std::fs::write(&s.log, text).unwrap();
        let (code, _, err) = verify(&s);
        assert_eq!(code, 1, "{what}");
        assert!(err.starts_with("DecisionLogError: "), "{what}: {err}");
        assert!(err.contains(message), "{what}: {err}");
    }
    std::fs::write(&s.log, &good).unwrap();
    let (code, _, _) = verify(&s);
    assert_eq!(code, 0);
    // A wrong path is an error, never "0 entries".
    let missing = s.dir.join("missing.jsonl");
    let (code, out, err) = helixor(&[&"log", &"verify", &missing]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(
        err.trim_end(),
        format!(
            "IoError: {}: no such decision log (and no rotated files beside it)",
            missing.display()
        )
    );
}

#[test]
fn a_restart_resumes_the_tree_after_a_torn_line() {
    let s = setup("");
    let mut server = Server::start(&s.cfg, s.dir.parent().unwrap());
    for t in ["one", "two"] {
        server.post("/evaluate", &json!({"text": t, "pack_id": PII}).to_string());
    }
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(20)), Some(0));
    assert_eq!(lines(&s.log).len(), 2);
    // A crash in the middle of a write leaves half a line.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&s.log)
        .unwrap();
    std::io::Write::write_all(&mut f, b"{\"seq\":2,\"time\":\"2026").unwrap();
    drop(f);
    let mut server = Server::start(&s.cfg, s.dir.parent().unwrap());
    assert!(
        server.log().contains("decision log: cut a torn last line"),
        "{}",
        server.log()
    );
    server.post(
        "/evaluate",
        &json!({"text": "three", "pack_id": PII}).to_string(),
    );
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(20)), Some(0));
    let l = lines(&s.log);
    assert_eq!(
        l.iter()
            .map(|v| v["seq"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [0, 1, 2]
    );
    let (code, out, err) = verify(&s);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(": 3 entries"), "{out}");
}

#[test]
fn a_line_that_cannot_be_written_fails_closed_when_required() {
    for required in [true, false] {
        // Rotation after every line; the directory removed, so the next
        // rotation (the second line) cannot rename the file.
        let s = setup(&format!("  max_bytes: 100\n  required: {required}\n"));
        let server = Server::start(&s.cfg, s.dir.parent().unwrap());
        let body = json!({"text": "hello", "pack_id": PII}).to_string();
        assert_eq!(server.post("/evaluate", &body).status, 200);
        wait_for(Duration::from_secs(10), "the first line", || {
            (lines(&s.log).len() == 1).then_some(())
        });
        // The writer may add a file (its checkpoint) while the directory
        // is being removed, which then is not empty: removed again.
        wait_for(
            Duration::from_secs(10),
            "the directory removed",
            || match std::fs::remove_dir_all(&s.dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => None,
                _ => Some(()),
            },
        );
        let a = server.post("/evaluate", &body);
        let metrics = server.get("/metrics").body;
        if required {
            assert_eq!(a.status, 503);
            assert_eq!(
                a.json(),
                json!({"error": "ServiceUnavailableError",
                    "message": "the decision could not be written to the decision log (decision_log.required)"})
            );
        } else {
            assert_eq!(a.status, 200);
            wait_for(Duration::from_secs(10), "the error counted", || {
                server
                    .get("/metrics")
                    .body
                    .contains("helixor_decision_log_errors_total{reason=\"write\"} 1")
                    .then_some(())
            });
        }
        if required {
            assert!(
                metrics.contains("helixor_decision_log_errors_total{reason=\"write\"} 1"),
                "{metrics}"
            );
        }
        server.signal("TERM");
    }
}

#[test]
fn streams_and_gateways_write_their_decisions_too() {
    let s = setup("");
    // Envoy names no pack: the default one judges.
    let cfg = std::fs::read_to_string(&s.cfg).unwrap();
    std::fs::write(&s.cfg, format!("default_pack: {PII}\n{cfg}")).unwrap();
    let mut server = Server::start(&s.cfg, s.dir.parent().unwrap());
    let stream_text = "mail jane@example.com now";
    let stream = server.post(
        "/v1/evaluate/stream",
        &json!({"text": stream_text, "pack_id": PII}).to_string(),
    );
    assert_eq!(stream.status, 200);
    let litellm_body = json!({"input_type": "request", "texts": ["SSN 123-45-6789"],
        "additional_provider_specific_params": {"pack_id": PII}})
    .to_string();
    let litellm = server.post("/beta/litellm_basic_guardrail_api", &litellm_body);
    assert_eq!(litellm.json()["action"], "BLOCKED");
    let authz_body =
        json!({"messages": [{"role": "tool", "content": "SSN 123-45-6789"}]}).to_string();
    let authz = crate::support::server::request(
        server.addr,
        "POST",
        "/envoy/ext_authz/v1/chat/completions",
        Some(&authz_body),
    )
    .unwrap();
    assert_eq!(authz.status, 403);
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(20)), Some(0));
    let l = lines(&s.log);
    let routes: Vec<&str> = l.iter().map(|v| v["route"].as_str().unwrap()).collect();
    assert_eq!(
        routes,
        [
            "/v1/evaluate/stream",
            "/beta/litellm_basic_guardrail_api",
            "/envoy/ext_authz"
        ]
    );
    assert_eq!(l[0]["action"], "redact_and_permit_contact_pii");
    assert_eq!(l[0]["payload_hmac"], hmac_hex(stream_text));
    for (line, body) in [(&l[1], &litellm_body), (&l[2], &authz_body)] {
        assert_eq!(line["severity"], "FATAL");
        assert_eq!(line["rule_ids"], json!(["RULE-GLBA-SSN-BLOCK"]));
        // A gateway's line digests the body it judged.
        assert_eq!(line["payload_hmac"], hmac_hex(body));
    }
    assert_eq!(l[2]["request_id"].as_str(), authz.header("x-request-id"));
    let (code, out, err) = verify(&s);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(": 3 entries"), "{out}");
}

#[test]
fn monitor_mode_decides_and_logs_but_permits() {
    let s = setup("");
    let ids = "custom.test_ids.v1";
    let cfg = std::fs::read_to_string(&s.cfg).unwrap();
    std::fs::write(
        &s.cfg,
        format!("default_pack: {PII}\nmonitor_packs: [{PII}]\n{cfg}"),
    )
    .unwrap();
    let mut server = Server::start(&s.cfg, s.dir.parent().unwrap());
    let permit = |text: &str, pack: &str, monitored: Value| {
        json!({"action": "permit_clean_payload", "severity": null, "reason": null,
            "clean_text": text, "triggers": [], "invariants_passed": true, "pack_id": pack,
            "pack_version": "1.0.0", "generation": 1, "monitored": monitored})
    };
    let strip = |mut v: Value| {
        let o = v.as_object_mut().unwrap();
        o.remove("latency_us");
        o.remove("receipt_hash");
        v
    };
    // A pack in monitor_packs: monitored on every route.
    let a = server.post("/evaluate", &json!({"text": SSN_TEXT}).to_string());
    assert_eq!(
        strip(a.json()),
        permit(
            SSN_TEXT,
            PII,
            json!({"action": "block_glba_ssn_leakage", "severity": "FATAL", "rule_ids": ["RULE-GLBA-SSN-BLOCK"]})
        )
    );
    let litellm = server.post(
        "/beta/litellm_basic_guardrail_api",
        &json!({"input_type": "request", "texts": [SSN_TEXT]}).to_string(),
    );
    assert_eq!(litellm.json(), json!({"action": "NONE"}));
    let authz = crate::support::server::request(
        server.addr,
        "POST",
        "/envoy/ext_authz/v1/chat/completions",
        Some(&json!({"messages": [{"role": "user", "content": SSN_TEXT}]}).to_string()),
    )
    .unwrap();
    assert_eq!(authz.status, 200);
    // Another pack: enforced, unless the request asks for monitor mode.
    let ticket = "See TCK-123456";
    let enforced = server.post(
        "/evaluate",
        &json!({"text": ticket, "pack_id": ids}).to_string(),
    );
    assert_eq!(enforced.json()["clean_text"], "See [REDACTED_TICKET_ID]");
    let asked = server.post(
        "/evaluate",
        &json!({"text": ticket, "pack_id": ids, "mode": "monitor"}).to_string(),
    );
    assert_eq!(
        strip(asked.json()),
        permit(
            ticket,
            ids,
            json!({"action": "redact_ticket_id", "severity": "WARNING", "rule_ids": ["ticket_id"]})
        )
    );
    let batch = server.post(
        "/evaluate/batch",
        &json!({"mode": "monitor", "items": [{"text": ticket, "pack_id": ids}]}).to_string(),
    );
    assert_eq!(batch.json()["results"][0]["clean_text"], ticket);
    assert_eq!(
        batch.json()["results"][0]["monitored"]["action"],
        "redact_ticket_id"
    );
    // Bad modes, and streams, which are always enforced.
    let bad = server.post(
        "/evaluate",
        &json!({"text": "x", "mode": "shadow"}).to_string(),
    );
    assert_eq!(bad.status, 400);
    assert_eq!(
        bad.json()["message"],
        "`mode` must be \"enforce\" or \"monitor\""
    );
    // A monitored stream releases the text unchanged; its done event is a
    // permit that says what was decided.
    let stream = server.post(
        "/v1/evaluate/stream",
        &json!({"text": "Fixed in TCK-123456 today", "pack_id": ids, "mode": "monitor", "chunk_size": 10})
            .to_string(),
    );
    assert_eq!(stream.status, 200);
    let events: Vec<Value> = stream
        .body
        .lines()
        .filter_map(|e| e.strip_prefix("data: "))
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let released: String = events[..events.len() - 1]
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(released, "Fixed in TCK-123456 today", "{}", stream.body);
    assert_eq!(events[0]["consumed"], 10);
    let mut done = events.last().unwrap().clone();
    done.as_object_mut().unwrap().remove("latency_us");
    done.as_object_mut().unwrap().remove("receipt_hash");
    assert_eq!(
        done,
        json!({"done": true, "action": "permit_clean_payload", "severity": null, "reason": null,
            "pack_id": ids, "generation": 1,
            "monitored": {"action": "redact_ticket_id", "severity": "WARNING", "rule_ids": ["ticket_id"]}})
    );
    let metrics = server.get("/metrics").body;
    assert!(
        metrics.contains(&format!(
        "helixor_monitored_decisions_total{{action=\"block_glba_ssn_leakage\",pack_id=\"{PII}\"}} 3"
    )),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "helixor_monitored_decisions_total{{action=\"redact_ticket_id\",pack_id=\"{ids}\"}} 3"
        )),
        "{metrics}"
    );
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(20)), Some(0));
    // The log holds what was decided, marked as monitored.
    let l = lines(&s.log);
    let got: Vec<(&str, &str, bool)> = l
        .iter()
        .map(|v| {
            (
                v["route"].as_str().unwrap(),
                v["action"].as_str().unwrap(),
                v["monitored"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("/evaluate", "block_glba_ssn_leakage", true),
            (
                "/beta/litellm_basic_guardrail_api",
                "block_glba_ssn_leakage",
                true
            ),
            ("/envoy/ext_authz", "block_glba_ssn_leakage", true),
            ("/evaluate", "redact_ticket_id", false),
            ("/evaluate", "redact_ticket_id", true),
            ("/evaluate/batch", "redact_ticket_id", true),
            ("/v1/evaluate/stream", "redact_ticket_id", true),
        ]
    );
}

#[test]
fn a_kill_9_under_traffic_loses_no_acknowledged_fatal_decision() {
    let s = setup("  checkpoint_every: 50\n");
    let mut server = Server::start(&s.cfg, s.dir.parent().unwrap());
    let addr = server.addr;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let senders: Vec<_> = (0..4)
        .map(|_| {
            let stop = std::sync::Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut acked = Vec::new();
                let mut i = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    i += 1;
                    // FATAL and not: only the FATAL answers are promised a line.
                    let text = if i % 2 == 0 { SSN_TEXT } else { "nothing here" };
                    let body = json!({"text": text, "pack_id": PII}).to_string();
                    match crate::support::server::request(addr, "POST", "/evaluate", Some(&body)) {
                        Ok(a) if a.status == 200 && a.json()["severity"] == "FATAL" => {
                            acked.push(a.header("x-request-id").unwrap().to_string());
                        }
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
                acked
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    server.signal("KILL");
    server.wait_exit(Duration::from_secs(10));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let acked: Vec<String> = senders
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert!(acked.len() > 10, "too little traffic: {}", acked.len());
    // Every acknowledged FATAL decision has its line (a torn last line
    // aside, which only an unacknowledged write can leave).
    let raw = std::fs::read_to_string(&s.log).unwrap();
    let logged: std::collections::HashSet<String> = raw
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["request_id"].as_str().map(str::to_string))
        .collect();
    for id in &acked {
        assert!(
            logged.contains(id),
            "acknowledged FATAL decision {id} is not in the log"
        );
    }
    // A restart repairs a torn tail and the log verifies.
    let mut server = Server::start(&s.cfg, s.dir.parent().unwrap());
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(20)), Some(0));
    let (code, out, err) = verify(&s);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("verified"), "{out}");
}

#[test]
fn rotated_files_form_one_tree() {
    // About two lines a file.
    let s = setup("  max_bytes: 1000\n");
    let mut server = Server::start(&s.cfg, s.dir.parent().unwrap());
    for i in 0..7 {
        let a = server.post(
            "/evaluate",
            &json!({"text": format!("text {i}"), "pack_id": PII}).to_string(),
        );
        assert_eq!(a.status, 200);
    }
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(20)), Some(0));
    let mut files: Vec<String> = std::fs::read_dir(&s.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("decisions.jsonl") && !n.ends_with(".checkpoint"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "{files:?}");
    let mut seqs = Vec::new();
    for n in 1..files.len() {
        let rotated = s.dir.join(format!("decisions.jsonl.{n}"));
        seqs.extend(lines(&rotated).iter().map(|v| v["seq"].as_u64().unwrap()));
    }
    seqs.extend(lines(&s.log).iter().map(|v| v["seq"].as_u64().unwrap()));
    assert_eq!(seqs, (0..7).collect::<Vec<u64>>());
    let (code, out, err) = verify(&s);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(": 7 entries"), "{out}");
    // A rotated file removed: the next one's first line is out of place.
    let first = lines(&s.dir.join("decisions.jsonl.2"))[0]["seq"]
        .as_u64()
        .unwrap();
    std::fs::remove_file(s.dir.join("decisions.jsonl.1")).unwrap();
    let (code, _, err) = verify(&s);
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!(
            "decisions.jsonl.2 line 1 (entry 0): seq {first} where 0 was expected"
        )),
        "{err}"
    );
}
