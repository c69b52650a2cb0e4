//! The connection limits of [§9.1](docs/configuration.md#s9-1) against the real binary on 127.0.0.1:
//! a slowloris head is cut at `header_read_timeout_ms`, an idle keep-alive
//! connection at `idle_timeout_ms` (and not at the header timeout), and
//! `max_connections` holds under thousands of idle sockets while `/healthz`
//! still answers. Every wait is bounded.

use crate::support::server::{Fixture, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn start(limits: &str) -> (Fixture, Server) {
    let (fx, _lic, _packs, cfg) =
        crate::support::server::deployment(&format!("reload:\n  watch: false\nlimits:\n{limits}"));
    let server = Server::start(&cfg, fx.path());
    (fx, server)
}

/// Whether the server has closed `s` (a read returns end of file or an error
/// within `wait`).
fn closed_within(s: &mut TcpStream, wait: Duration) -> bool {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 512];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false
            }
            Err(_) => return true,
        }
    }
}

/// One keep-alive `GET /healthz` on `s`, its answer read whole.
fn healthz(s: &mut TcpStream) -> String {
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 512];
    while !String::from_utf8_lossy(&got).contains("\r\n\r\n")
        || !String::from_utf8_lossy(&got).ends_with('}')
    {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed before the answer");
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8(got).unwrap()
}

#[test]
fn a_slowloris_head_is_cut_at_the_header_timeout() {
    let (_fx, server) = start("  header_read_timeout_ms: 1000\n  idle_timeout_ms: 60000\n");
    let mut s = TcpStream::connect(server.addr).unwrap();
    let started = Instant::now();
    // One byte every 150 ms: the head never ends.
    let head = b"GET /healthz HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let mut closed_at = None;
    for b in head.iter() {
        if s.write_all(&[*b]).is_err() || closed_within(&mut s, Duration::from_millis(150)) {
            closed_at = Some(started.elapsed());
            break;
        }
    }
    let at = closed_at.expect("the server kept a slowloris connection past 5 s");
    assert!(at >= Duration::from_millis(900), "closed too early: {at:?}");
    assert!(at <= Duration::from_millis(2000), "closed late: {at:?}");
    // The server still serves.
    assert_eq!(server.get("/healthz").status, 200);
}

#[test]
fn an_idle_keep_alive_connection_is_kept_until_the_idle_timeout() {
    let (_fx, server) = start("  header_read_timeout_ms: 500\n  idle_timeout_ms: 1500\n");
    let mut s = TcpStream::connect(server.addr).unwrap();
    assert!(healthz(&mut s).starts_with("HTTP/1.1 200"));
    // Idle for twice the header timeout: still open (the idle timeout rules).
    assert!(!closed_within(&mut s, Duration::from_millis(1000)));
    assert!(healthz(&mut s).starts_with("HTTP/1.1 200"));
    // Then closed once idle for the idle timeout.
    let started = Instant::now();
    assert!(closed_within(&mut s, Duration::from_millis(3000)));
    let at = started.elapsed();
    assert!(
        (Duration::from_millis(1300)..=Duration::from_millis(2600)).contains(&at),
        "closed after {at:?}"
    );
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

#[test]
fn max_connections_holds_under_thousands_of_idle_sockets() {
    let (_fx, server) =
        start("  max_connections: 200\n  header_read_timeout_ms: 1000\n  idle_timeout_ms: 1000\n");
    let pid = server.child.id();
    let base = open_fds(pid);
    let mut idle = Vec::new();
    let mut peak = 0;
    for i in 0..3000 {
        // Beyond the backlog a connect may not complete: that is the point.
        if let Ok(s) = TcpStream::connect_timeout(&server.addr, Duration::from_millis(100)) {
            idle.push(s);
        }
        if i % 500 == 0 {
            peak = peak.max(open_fds(pid));
        }
    }
    peak = peak.max(open_fds(pid));
    assert!(idle.len() > 1000, "only {} sockets connected", idle.len());
    // The server holds at most max_connections of them (and a few fds of its own).
    assert!(peak <= base + 200 + 16, "{peak} fds open (base {base})");
    // The probe still answers: idle connections are closed at their timeout
    // and the waiting ones are served in turn.
    let started = Instant::now();
    let answer = loop {
        let a = server.get("/healthz");
        if a.status == 200 || started.elapsed() > Duration::from_secs(30) {
            break a;
        }
    };
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(open_fds(pid) <= base + 200 + 16);
    drop(idle);
}

/// Sends `raw` and reads the whole answer (the server closes after it).
fn raw_answer(addr: std::net::SocketAddr, raw: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(raw);
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    String::from_utf8_lossy(&got).into_owned()
}

/// A body refused before it is read (its `Content-Length` is over
/// `max_body_bytes`) still gets its 413: the server closes with a lingering
/// close, so the client can send the whole body and then read the answer
/// (closing at once would reset the connection and lose the answer: a
/// broken pipe for every client that writes its body before it reads).
#[test]
fn a_body_refused_unread_still_gets_its_413() {
    let (_fx, server) = start("  max_body_bytes: 65536\n");
    let body = format!("{{\"text\": \"{}\"}}", "x".repeat(4 << 20));
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    let head = format!(
        "POST /evaluate HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes())
        .expect("the server reads a refused body instead of resetting the connection");
    let mut got = Vec::new();
    s.read_to_end(&mut got)
        .expect("the answer is not lost to a reset");
    let a = String::from_utf8_lossy(&got);
    let (head, body) = a.split_once("\r\n\r\n").unwrap_or((&a, ""));
    assert!(
        head.starts_with("HTTP/1.1 413 Payload Too Large\r\n"),
        "{head}"
    );
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(body).unwrap(),
        serde_json::json!({"error": "PayloadTooLargeError",
            "message": "the request body is over the 65536-byte limit (limits.max_body_bytes)"})
    );
}

#[test]
fn requests_hyper_cannot_parse_get_the_json_error_body() {
    let (_fx, server) = start("  header_read_timeout_ms: 5000\n");
    let long_uri = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(70_000));
    let big_header = format!(
        "GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
        "b".repeat(600_000)
    );
    for (raw, status, message) in [
        (
            b"GET / HTTP/1.1\r\nBad Header\r\n\r\n".to_vec(),
            "400 Bad Request",
            "the request is not valid HTTP/1.1",
        ),
        (
            long_uri.into_bytes(),
            "414 URI Too Long",
            "the request target is over the size limit",
        ),
        (
            big_header.into_bytes(),
            "431 Request Header Fields Too Large",
            "the request head is over the size limit",
        ),
    ] {
        let a = raw_answer(server.addr, &raw);
        let (head, body) = a.split_once("\r\n\r\n").unwrap_or((&a, ""));
        assert!(
            head.starts_with(&format!("HTTP/1.1 {status}\r\n")),
            "{head}"
        );
        assert!(head.contains("content-type: application/json"), "{head}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(body).unwrap(),
            serde_json::json!({"error": "InvalidRequestError", "message": message})
        );
    }
    assert_eq!(server.get("/healthz").status, 200);
}

#[test]
fn healthz_stays_fast_while_large_evaluations_run() {
    let (_fx, server) = start("  max_body_bytes: 2097152\n  request_timeout_ms: 60000\n");
    let text = "Mail jane.doe@example.com or call 212-555-0187. ".repeat(21_400);
    let body = serde_json::json!({"text": text, "pack_id": "compliance.regulatory_pii_guard.v1"})
        .to_string();
    assert!(text.len() > 1_000_000 && text.len() < 1 << 20);
    let addr = server.addr;
    // As many large evaluations as the runtime has workers (2 cores).
    let heavy: Vec<_> = (0..2)
        .map(|_| {
            let body = body.clone();
            std::thread::spawn(move || {
                let started = Instant::now();
                let a = crate::support::server::request(addr, "POST", "/evaluate", Some(&body))
                    .unwrap();
                assert_eq!(a.status, 200, "{}", &a.body[..a.body.len().min(300)]);
                (a.status, started.elapsed())
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(30));
    let mut probes = Vec::new();
    while probes.len() < 5 && !heavy.iter().all(std::thread::JoinHandle::is_finished) {
        let started = Instant::now();
        assert_eq!(server.get("/healthz").status, 200);
        probes.push(started.elapsed());
    }
    let took: Vec<(u16, Duration)> = heavy.into_iter().map(|h| h.join().unwrap()).collect();
    for (status, _) in &took {
        assert_eq!(*status, 200);
    }
    // The probes did not wait for the evaluations: each answered in a small
    // fraction of the time one evaluation took (generous: CI machines are shared).
    let slowest_eval = took.iter().map(|t| t.1).max().unwrap();
    for p in &probes {
        assert!(
            *p < Duration::from_millis(250) && *p * 4 < slowest_eval,
            "a probe took {p:?} while an evaluation took {slowest_eval:?}"
        );
    }
}

/// Sends a request on a new connection and reads its answer, all within
/// `limit`: the answer and how long it took.
fn timed(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> (crate::support::server::Answer, Duration) {
    let started = Instant::now();
    let a = crate::support::server::request(addr, method, path, body).unwrap();
    (a, started.elapsed())
}

/// Issue 27 row 3, small: at `max_connections`, sockets that hold no request
/// (never sending a byte, or idle after one request) are closed to make
/// room, oldest first, so a probe and a well-formed request get in at once
/// although the header and idle timeouts are a minute away.
#[test]
fn at_the_cap_idle_and_silent_sockets_make_room_oldest_first() {
    let (_fx, server) = start(
        "  max_connections: 100\n  header_read_timeout_ms: 60000\n  idle_timeout_ms: 60000\n",
    );
    let pid = server.child.id();
    let base = open_fds(pid);
    // 120 keep-alive connections, each after one request (as a client
    // polling every 20 s), then 200 that never send a byte.
    let mut held = Vec::new();
    for _ in 0..120 {
        let mut s = TcpStream::connect(server.addr).unwrap();
        assert!(healthz(&mut s).starts_with("HTTP/1.1 200"));
        held.push(s);
    }
    for _ in 0..200 {
        held.push(TcpStream::connect(server.addr).unwrap());
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(open_fds(pid) <= base + 100 + 2, "{} fds", open_fds(pid));
    let eval = r#"{"text": "call 212-555-0187", "pack_id": "compliance.regulatory_pii_guard.v1"}"#;
    let mut slowest = Duration::ZERO;
    for _ in 0..10 {
        let (a, took) = timed(server.addr, "GET", "/healthz", None);
        assert_eq!(a.status, 200);
        slowest = slowest.max(took);
        let (a, took) = timed(server.addr, "POST", "/evaluate", Some(eval));
        assert_eq!(a.status, 200, "{}", a.body);
        assert_eq!(a.json()["action"], "redact_and_permit_contact_pii");
        slowest = slowest.max(took);
    }
    eprintln!("slowest probe or request at the cap: {slowest:?}");
    assert!(slowest < Duration::from_secs(5), "{slowest:?}");
    // Oldest first: the first keep-alive connections were closed, the last
    // silent ones are still open.
    assert!(closed_within(&mut held[0], Duration::from_millis(500)));
    assert!(closed_within(&mut held[100], Duration::from_millis(500)));
    let last = held.len() - 1;
    assert!(!closed_within(&mut held[last], Duration::from_millis(200)));
    assert!(open_fds(pid) <= base + 100 + 2, "{} fds", open_fds(pid));
}

/// A connection with a request in progress is never closed to make room:
/// with two connections allowed, an upload in progress and an idle
/// keep-alive one, a new request takes the idle one's place, and the
/// upload completes.
#[test]
fn a_request_in_progress_is_never_closed_to_make_room() {
    let (_fx, server) = start(
        "  max_connections: 2\n  header_read_timeout_ms: 60000\n  idle_timeout_ms: 60000\n  request_timeout_ms: 30000\n",
    );
    let addr = server.addr;
    let body = r#"{"text": "call 212-555-0187", "pack_id": "compliance.regulatory_pii_guard.v1"}"#;
    let mut upload = TcpStream::connect(addr).unwrap();
    write!(
        upload,
        "POST /evaluate HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
        body.len(),
        &body[..10]
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut idle = TcpStream::connect(addr).unwrap();
    assert!(healthz(&mut idle).starts_with("HTTP/1.1 200"));
    // Older than the idle one, but busy: the idle one makes room.
    let (a, took) = timed(addr, "GET", "/healthz", None);
    assert_eq!(a.status, 200);
    eprintln!("a probe with both connections taken: {took:?}");
    assert!(closed_within(&mut idle, Duration::from_secs(2)));
    upload.write_all(&body.as_bytes()[10..]).unwrap();
    let a = crate::support::server::read_answer(&mut upload).unwrap();
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.json()["action"], "redact_and_permit_contact_pii");
}
