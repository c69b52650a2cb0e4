//! Issue 27's attacks on the real binary, at a small scale, on 127.0.0.1
//! with ephemeral ports, every wait bounded ([§9.1](docs/configuration.md#s9-1)): gRPC streams that
//! send nothing (row 1), work that outlives its 503 (row 4), answers that
//! are too large or never read (row 5), FIFOs in the deployment (row 7).
//! Connections (row 3) are in `server_connections.rs`, the catalog's
//! escape sequences (row 10) in `catalog.rs`. Times are printed, not
//! asserted beyond generous bounds.

use crate::support::server::{request, Answer, Fixture, Server};
use envoy_types::pb::envoy::service::ext_proc::v3::{
    external_processor_client::ExternalProcessorClient, ProcessingRequest, ProcessingResponse,
};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PII: &str = "compliance.regulatory_pii_guard.v1";

/// A deployment with the PII pack as default, reloads off, and `extra`:
/// (fixture, license, packs dir, config).
fn deployment(extra: &str) -> (Fixture, PathBuf, PathBuf, PathBuf) {
    crate::support::server::deployment(&format!(
        "default_pack: {PII}\nreload:\n  watch: false\n  rescan_interval_s: 0\n{extra}"
    ))
}

fn evaluate(addr: SocketAddr, text: &str) -> Answer {
    let body = json!({ "text": text }).to_string();
    request(addr, "POST", "/evaluate", Some(&body)).unwrap()
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

// ---------------------------------------------------------------- row 1

/// The server with `ext_proc.listen` on an ephemeral port: the server, its
/// ext_proc address.
fn start_with_ext_proc(cfg: &Path, log_dir: &Path) -> (Server, SocketAddr) {
    let log = log_dir.join("ext-proc-server.log");
    let mut child =
        crate::support::server::serve_command(&["--config", &cfg.display().to_string()], &[])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let (mut http, mut grpc) = (None, None);
    let deadline = Instant::now() + Duration::from_secs(20);
    while http.is_none() || grpc.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx.recv_timeout(left).unwrap_or_else(|_| {
            panic!("no addresses:\n{}", std::fs::read_to_string(&log).unwrap())
        });
        if let Some(a) = line.strip_prefix("ext_proc listening on ") {
            grpc = Some(a.trim().parse().unwrap());
        } else if let Some(a) = line.strip_prefix("listening on ") {
            http = Some(a.trim().parse().unwrap());
        }
    }
    let server = Server {
        child,
        addr: http.unwrap(),
        stderr: log,
    };
    (server, grpc.unwrap())
}

/// One HTTP/2 connection to ext_proc.
async fn grpc_connection(addr: SocketAddr) -> ExternalProcessorClient<tonic::transport::Channel> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    ExternalProcessorClient::new(channel)
}

/// A stream that sends nothing: its sender is kept (never used) so that
/// the request stays open; the answers' stream, once the server took it.
type Silent = (
    tokio::sync::mpsc::Sender<ProcessingRequest>,
    Result<tonic::Streaming<ProcessingResponse>, tonic::Status>,
);

async fn silent_stream(client: &mut ExternalProcessorClient<tonic::transport::Channel>) -> Silent {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let req = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(rx));
    let answers = client.process(req).await.map(tonic::Response::into_inner);
    (tx, answers)
}

/// Row 1: gRPC streams that send nothing take ext_proc's own slots, never
/// the HTTP routes': with twice as many streams held as the HTTP routes
/// have slots, every `/evaluate` answers 200; one stream more than
/// `ext_proc.max_concurrency` is refused; a stream that ends frees its slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r1_grpc_streams_that_send_nothing_never_take_the_http_slots() {
    let (fx, _lic, _packs, cfg) = deployment(
        "limits:\n  max_concurrency: 4\next_proc:\n  listen: 127.0.0.1:0\n  max_concurrency: 8\n  max_streams_per_connection: 64\n  idle_stream_timeout_ms: 60000\n",
    );
    let (server, grpc) = start_with_ext_proc(&cfg, fx.path());
    let mut client = grpc_connection(grpc).await;
    let mut held = Vec::new();
    for i in 0..8 {
        let s = silent_stream(&mut client).await;
        assert!(s.1.is_ok(), "stream {i}: {:?}", s.1.err());
        held.push(s);
    }
    // The HTTP routes keep all their slots.
    let addr = server.addr;
    let answers = tokio::task::spawn_blocking(move || {
        (0..6)
            .map(|_| evaluate(addr, "call 212-555-0187").status)
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    assert_eq!(answers, [200; 6]);
    // A ninth stream finds ext_proc's pool full.
    let refused = silent_stream(&mut client).await.1.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
    assert_eq!(
        refused.message(),
        "ext_proc.max_concurrency streams are in flight"
    );
    // One stream ends (Envoy's exchange is over): its slot is free again.
    drop(held.pop());
    let again = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let s = silent_stream(&mut client).await;
            if s.1.is_ok() {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the slot of an ended stream was not freed");
    held.push(again);
    drop(held);
}

/// Row 1: one connection opens at most `ext_proc.max_streams_per_connection`
/// streams at once (HTTP/2 max concurrent streams), and a stream that sends
/// nothing for `ext_proc.idle_stream_timeout_ms` is ended with
/// `DEADLINE_EXCEEDED`, which frees its slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r1_a_connection_opens_at_most_its_streams_and_silent_streams_are_ended() {
    let (fx, _lic, _packs, cfg) = deployment(
        "ext_proc:\n  listen: 127.0.0.1:0\n  max_concurrency: 100\n  max_streams_per_connection: 4\n  idle_stream_timeout_ms: 1500\n",
    );
    let (_server, grpc) = start_with_ext_proc(&cfg, fx.path());
    let mut a = grpc_connection(grpc).await;
    let opened = Instant::now();
    let mut held = Vec::new();
    for _ in 0..4 {
        let (tx, answers) = silent_stream(&mut a).await;
        held.push((tx, answers.unwrap()));
    }
    // A fifth stream on the same connection waits for one of the four.
    let mut fifth_client = a.clone();
    let fifth = tokio::spawn(async move { silent_stream(&mut fifth_client).await });
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(!fifth.is_finished(), "a fifth concurrent stream was opened");
    // Another connection is not limited by the first one's streams.
    let mut b = grpc_connection(grpc).await;
    let other = silent_stream(&mut b).await;
    assert!(other.1.is_ok(), "{:?}", other.1.err());
    // Each silent stream is ended at the idle timeout.
    for (_tx, mut answers) in held {
        let status = tokio::time::timeout(Duration::from_secs(10), answers.message())
            .await
            .expect("a silent stream was kept past 10 s")
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
        assert_eq!(
            status.message(),
            "the stream sent nothing for ext_proc.idle_stream_timeout_ms"
        );
    }
    let ended = opened.elapsed();
    eprintln!("silent streams ended after {ended:?} (idle timeout 1.5 s)");
    assert!(ended >= Duration::from_millis(1400), "{ended:?}");
    // Their places on the connection are free: the fifth stream opens.
    let (_tx, fifth) = tokio::time::timeout(Duration::from_secs(5), fifth)
        .await
        .expect("the fifth stream never opened")
        .unwrap();
    assert!(fifth.is_ok(), "{:?}", fifth.err());
}

// ---------------------------------------------------------------- row 4

/// Row 4: work that outlives its 503 keeps its slot until it ends. With one
/// slot and a request timeout far shorter than a large evaluation, the
/// request is answered 503 at the timeout while its evaluation runs on; a
/// request arriving meanwhile finds the slot taken (503 at
/// `max_concurrency`), and once the evaluation ends, the slot is free.
#[test]
fn r4_work_that_outlives_its_503_keeps_its_slot_until_it_ends() {
    let (fx, _lic, _packs, cfg) = deployment(
        "limits:\n  max_body_bytes: 8388608\n  max_response_bytes: 67108864\n  max_concurrency: 1\n  request_timeout_ms: 60000\n",
    );
    let server = Server::start(&cfg, fx.path());
    // How long the evaluation takes here (debug build, loaded machine):
    // the engine's own time, as the decision says.
    let text = "Mail a.b@example.com or call 212-555-0187, ssn 123-45-6789. ".repeat(100_000);
    let body = json!({ "text": text }).to_string();
    let a = request(server.addr, "POST", "/evaluate", Some(&body)).unwrap();
    assert_eq!(a.status, 200);
    let takes = Duration::from_secs_f64(a.json()["latency_us"].as_f64().unwrap() / 1e6);
    eprintln!(
        "one evaluation of {} bytes: {takes:?} in the engine",
        text.len()
    );
    assert!(
        takes > Duration::from_millis(800),
        "the evaluation is too fast ({takes:?}) to show its slot being kept"
    );
    drop(server);

    let (fx, _lic, _packs, cfg) = deployment(
        "limits:\n  max_body_bytes: 8388608\n  max_response_bytes: 67108864\n  max_concurrency: 1\n  request_timeout_ms: 100\n",
    );
    let server = Server::start(&cfg, fx.path());
    let started = Instant::now();
    let a = request(server.addr, "POST", "/evaluate", Some(&body)).unwrap();
    assert_eq!(a.status, 503);
    assert_eq!(
        a.json(),
        json!({"error": "ServiceUnavailableError", "message": "the request did not complete within limits.request_timeout_ms"})
    );
    // Still running: the slot is not free.
    let b = evaluate(server.addr, "call 212-555-0187");
    let checked = started.elapsed();
    assert!(
        checked < takes * 3 / 4,
        "the check came too late ({checked:?})"
    );
    assert_eq!(b.status, 503, "{}", b.body);
    assert_eq!(
        b.json(),
        json!({"error": "ServiceUnavailableError", "message": "the server is at limits.max_concurrency; retry later"})
    );
    // Once the work has ended, the slot is free again.
    let c =
        crate::support::server::wait_for(takes * 4 + Duration::from_secs(5), "the slot", || {
            let c = evaluate(server.addr, "call 212-555-0187");
            (c.status == 200).then_some(c)
        });
    assert_eq!(c.json()["action"], "redact_and_permit_contact_pii");
    eprintln!(
        "503 then the slot taken at {checked:?}, free again after {:?}",
        started.elapsed()
    );
}

/// Row 4: a batch abandoned at its 503 stops evaluating at its next item,
/// so its slot is free long before the batch would have ended.
#[test]
fn r4_a_batch_answered_503_stops_evaluating() {
    let (fx, _lic, _packs, cfg) = deployment(
        "limits:\n  max_body_bytes: 8388608\n  max_response_bytes: 67108864\n  max_batch_items: 100000\n  max_concurrency: 1\n  request_timeout_ms: 60000\n",
    );
    let server = Server::start(&cfg, fx.path());
    let item = "Mail a.b@example.com or call 212-555-0187. ".repeat(1_000);
    let items: Vec<Value> = (0..100).map(|_| json!({ "text": item })).collect();
    let body = json!({ "items": items }).to_string();
    let started = Instant::now();
    let a = request(server.addr, "POST", "/evaluate/batch", Some(&body)).unwrap();
    let takes = started.elapsed();
    assert_eq!(a.status, 200);
    eprintln!("the whole batch: {takes:?}");
    drop(server);

    let (fx, _lic, _packs, cfg) = deployment(
        "limits:\n  max_body_bytes: 8388608\n  max_batch_items: 100000\n  max_concurrency: 1\n  request_timeout_ms: 100\n",
    );
    let server = Server::start(&cfg, fx.path());
    let started = Instant::now();
    let a = request(server.addr, "POST", "/evaluate/batch", Some(&body)).unwrap();
    assert_eq!(a.status, 503);
    let c =
        crate::support::server::wait_for(takes * 2 + Duration::from_secs(5), "the slot", || {
            let c = evaluate(server.addr, "call 212-555-0187");
            (c.status == 200).then_some(c)
        });
    assert_eq!(c.json()["action"], "redact_and_permit_contact_pii");
    eprintln!(
        "the slot was free again after {:?} (the whole batch takes {takes:?})",
        started.elapsed()
    );
}

// ---------------------------------------------------------------- row 5

/// Row 5: a decision whose answer would be larger than
/// `limits.max_response_bytes` is a 413 naming the limit.
#[test]
fn r5_an_answer_over_max_response_bytes_is_413() {
    let (fx, _lic, _packs, cfg) = deployment("limits:\n  max_body_bytes: 65536\n");
    let server = Server::start(&cfg, fx.path());
    // 65 KB of addresses: the answer (clean text, triggers) is over 4 x 64 KiB.
    let text = "a@b.cc ".repeat(9_300);
    for path in ["/evaluate", "/v1/evaluate"] {
        let body = json!({ "text": text }).to_string();
        let a = server.post(path, &body);
        assert_eq!(a.status, 413, "{path}");
        assert_eq!(
            a.json(),
            json!({"error": "PayloadTooLargeError", "message": "the answer would be over the 262144-byte limit (limits.max_response_bytes)"}),
            "{path}"
        );
    }
    let items: Vec<Value> = (0..4)
        .map(|_| json!({ "text": "a@b.cc ".repeat(8_000) }))
        .collect();
    let a = server.post("/evaluate/batch", &json!({ "items": items }).to_string());
    assert_eq!(a.status, 413);
    assert_eq!(a.json()["error"], "PayloadTooLargeError");
    // Smaller answers are unchanged.
    let a = server.post(
        "/evaluate",
        &json!({ "text": "a@b.cc ".repeat(100) }).to_string(),
    );
    assert_eq!(a.status, 200);
    assert_eq!(a.json()["action"], "redact_and_permit_contact_pii");
}

/// Row 5: answers the client never reads are dropped at
/// `limits.write_timeout_ms` with their connections, so they do not pile up.
#[test]
fn r5_answers_never_read_are_dropped_at_the_write_timeout() {
    let (fx, _lic, _packs, cfg) = deployment(
        "limits:\n  max_body_bytes: 8388608\n  max_response_bytes: 67108864\n  write_timeout_ms: 1000\n  idle_timeout_ms: 60000\n  request_timeout_ms: 60000\n",
    );
    let server = Server::start(&cfg, fx.path());
    let pid = server.child.id();
    let base = open_fds(pid);
    let rss_before = rss_kib(pid);
    // A 6 MB answer (clean text as long as the text): more than the socket
    // buffers hold, and cheap to evaluate (nothing matches).
    let text = "Nothing to see in this sentence at all. ".repeat(150_000);
    let body = json!({ "text": text }).to_string();
    let mut unread = Vec::new();
    for _ in 0..6 {
        let mut s = TcpStream::connect(server.addr).unwrap();
        write!(
            s,
            "POST /evaluate HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .unwrap();
        s.write_all(body.as_bytes()).unwrap();
        unread.push(s);
    }
    let sent = Instant::now();
    let mut peak = 0;
    // The server lets go of every one of them (none is read).
    let dropped =
        crate::support::server::wait_for(Duration::from_secs(60), "the unread answers", || {
            peak = peak.max(rss_kib(pid));
            (open_fds(pid) <= base).then(|| sent.elapsed())
        });
    eprintln!(
        "6 unread answers dropped {dropped:?} after they were sent; RSS {rss_before} KiB before, peak {peak} KiB"
    );
    // What each client can still read is a prefix, then the end.
    for mut s in unread {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut got = Vec::new();
        let r = s.read_to_end(&mut got);
        assert!(
            r.is_ok()
                || r.as_ref()
                    .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
            "{r:?}"
        );
        assert!(got.len() < text.len(), "{} bytes", got.len());
    }
    assert_eq!(server.get("/healthz").status, 200);
}

// ---------------------------------------------------------------- row 7

fn mkfifo(p: &Path) {
    assert!(Command::new("mkfifo").arg(p).status().unwrap().success());
}

/// Row 7: a FIFO at the license path, among the packs or as the issuer
/// keys fails its reload at once with the error of its kind (nothing blocks
/// on it), the current generation keeps serving, reloads run again once it
/// is gone, and SIGTERM exits within the grace period while one is there.
#[test]
fn r7_fifos_in_the_deployment_fail_their_load_without_blocking() {
    let (fx, lic, packs_dir, cfg) = deployment("shutdown:\n  grace_ms: 2000\n");
    let mut server = Server::start(&cfg, fx.path());
    let reload = |what: &str| {
        let started = Instant::now();
        let a = server.post("/admin/reload", "");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{what}: {:?}",
            started.elapsed()
        );
        a
    };

    // The license.
    let kept = fx.path().join("kept.hxlic");
    std::fs::rename(&lic, &kept).unwrap();
    mkfifo(&lic);
    let a = reload("license");
    assert_eq!(a.status, 409);
    assert_eq!(
        a.json(),
        json!({
            "result": "failure",
            "error": "LicenseError",
            "message": format!("cannot read license file {}: not a regular file (a FIFO)", lic.display()),
            "generation": 1,
        })
    );
    assert_eq!(
        evaluate(server.addr, "call 212-555-0187").json()["generation"],
        1
    );
    std::fs::remove_file(&lic).unwrap();
    std::fs::rename(&kept, &lic).unwrap();

    // A pack.
    let fifo_pack = packs_dir.join("zz.hxpack");
    mkfifo(&fifo_pack);
    let a = reload("pack");
    assert_eq!(a.status, 409);
    let v = a.json();
    assert_eq!(v["error"], "PackFormatError");
    assert_eq!(
        v["message"],
        format!(
            "{}: cannot read pack: not a regular file (a FIFO)",
            fifo_pack.display()
        )
    );
    std::fs::remove_file(&fifo_pack).unwrap();

    // An issuer key.
    let fifo_key = fx.issuer_dir.join("other.pub");
    mkfifo(&fifo_key);
    let a = reload("issuer key");
    assert_eq!(a.status, 409);
    let v = a.json();
    assert_eq!(v["error"], "LicenseError");
    assert_eq!(
        v["message"],
        format!(
            "issuer key file {}: cannot read: not a regular file (a FIFO)",
            fifo_key.display()
        )
    );
    std::fs::remove_file(&fifo_key).unwrap();

    // Reloads run again.
    let a = reload("restored");
    assert_eq!(a.json(), json!({"result": "unchanged", "generation": 1}));

    // SIGTERM with a FIFO in place exits within the grace period.
    mkfifo(&fifo_pack);
    let _ = reload("pack again");
    let signalled = Instant::now();
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(10)), Some(0));
    eprintln!("exited {:?} after SIGTERM", signalled.elapsed());
}

/// Row 7: at start-up, a FIFO license or issuer keys file stops the server
/// at once with its error (exit 4), before it listens.
#[test]
fn r7_a_fifo_at_start_up_is_the_error_of_its_kind() {
    let fx = Fixture::new();
    let lic = fx.license();
    let packs_dir = fx.path().join("packs");
    fx.packs(&lic, &packs_dir, "1.0.0");
    let fifo = fx.path().join("fifo.hxlic");
    mkfifo(&fifo);
    let s = |p: &Path| p.display().to_string();
    for (license, keys, message) in [
        (
            s(&fifo),
            s(&fx.issuer_dir),
            format!(
                "LicenseError: cannot read license file {}: not a regular file (a FIFO)",
                fifo.display()
            ),
        ),
        (
            s(&lic),
            s(&fifo),
            format!(
                "LicenseError: issuer keys {}: cannot read: not a regular file (a FIFO)",
                fifo.display()
            ),
        ),
    ] {
        let started = Instant::now();
        let out = crate::support::server::serve_command(
            &[
                "--license",
                &license,
                "--issuer-keys",
                &keys,
                "--packs",
                &s(&packs_dir),
            ],
            &[],
        )
        .stdin(Stdio::null())
        .output()
        .unwrap();
        assert!(started.elapsed() < Duration::from_secs(15));
        assert_eq!(out.status.code(), Some(4));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "");
        assert_eq!(String::from_utf8_lossy(&out.stderr).trim_end(), message);
    }
}

/// Row 5: large bodies are read only while memory is reserved for them (16
/// of the largest allowed at once): past that, a large request waits unread
/// in its socket, then gets 503; small requests, requests without a body
/// and probes are not concerned.
#[test]
fn r5_large_bodies_are_read_within_a_memory_budget() {
    let (fx, _lic, _packs, cfg) =
        deployment("limits:\n  max_body_bytes: 100000\n  request_timeout_ms: 1500\n");
    let server = Server::start(&cfg, fx.path());
    // 16 uploads of 100,000 bytes declared, each stalled after its head:
    // they hold the whole budget.
    let mut stalled = Vec::new();
    for _ in 0..16 {
        let mut s = TcpStream::connect(server.addr).unwrap();
        write!(
            s,
            "POST /evaluate HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
        )
        .unwrap();
        stalled.push(s);
    }
    std::thread::sleep(Duration::from_millis(300));
    let big = json!({ "text": "x".repeat(90_000) }).to_string();
    let a = server.post("/evaluate", &big);
    assert_eq!(a.status, 503);
    assert_eq!(
        a.json(),
        json!({"error": "ServiceUnavailableError", "message": "the server holds as many large request bodies as it may; retry later"})
    );
    // Small bodies and requests without one reserve nothing.
    assert_eq!(evaluate(server.addr, "call 212-555-0187").status, 200);
    assert_eq!(server.get("/healthz").status, 200);
    assert_eq!(server.get("/v1/status").status, 200);
    // The stalled uploads end at the request timeout; the budget is back.
    drop(stalled);
    let a = crate::support::server::wait_for(Duration::from_secs(10), "the budget", || {
        let a = server.post("/evaluate", &big);
        (a.status == 200).then_some(a)
    });
    assert_eq!(a.json()["action"], "permit_clean_payload");
}
