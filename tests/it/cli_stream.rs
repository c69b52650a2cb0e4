//! Black-box tests of `helixor-pack run --stream` ([§11.3](docs/streaming.md#s11-3)): a pipe
//! filter that writes each release of a stream session ([§11.1](docs/streaming.md#s11-1)) to stdout as
//! soon as it is read, keeps the text as it is (no newline dropped), and on a
//! block writes nothing more, prints `Blocked: <reason>` on stderr and exits
//! 6 ([§4.3](docs/errors.md#s4-3)) — never printing a held or matched value.
//!
//! The pipe tests drive the binary through real pipes and bound every wait
//! in time, so a filter that waits for a full buffer or for end of input
//! fails instead of hanging.

use crate::support::cli::*;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// The example pack: SSN, card and health ids are FATAL, e-mails redacted.
const PACK: &str = "regulatory_pii_guard.yaml";
/// Longest wait for any output, exit or end of output of a piped child.
const WAIT: Duration = Duration::from_secs(10);
const SSN_REASON: &str = "Statutory violation: Social Security Number (GLBA / FCRA) detected";

/// `run --pack P --license L --issuer-keys K --stream` plus `extra`.
fn stream_args(env: &Env, pack: &Path, extra: &[&str]) -> Vec<OsString> {
    let mut a = args!["run", "--pack", pack];
    a.extend(env.lic_args(&env.lic));
    a.push("--stream".into());
    a.extend(extra.iter().map(OsString::from));
    a
}

/// Runs `args` with `stdin` written at once; returns (exit code, stdout, stderr).
fn run_with(env: &Env, args: &[OsString], stdin: &[u8]) -> (Option<i32>, String, String) {
    let out = env.output_with(args, &[], Some(stdin));
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// The binary spawned with piped stdin, stdout and stderr, in the sandbox
/// (its HOME and working directory, no `HELIXOR_*` variable inherited).
/// Stdout is read by a thread and handed over through a channel, so every
/// wait has a deadline; the child is killed if a test fails midway.
struct Piped {
    child: Child,
    stdin: Option<ChildStdin>,
    chunks: Receiver<Vec<u8>>,
    stderr: Option<std::thread::JoinHandle<String>>,
    /// Everything read from stdout so far.
    seen: Vec<u8>,
    /// Whether stdout reached end of file.
    eof: bool,
}

impl Piped {
    fn spawn(env: &Env, args: &[OsString]) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_helixor-pack"));
        crate::support::scrubbed(&mut cmd)
            .args(args)
            .current_dir(&env.work)
            .env("HOME", &env.home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take();
        let mut stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let (tx, chunks) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                match stdout.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if tx.send(buf[..n].to_vec()).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        Self {
            child,
            stdin,
            chunks,
            stderr: Some(stderr),
            seen: Vec::new(),
            eof: false,
        }
    }

    /// Writes `bytes` to the child's stdin, flushed, leaving it open.
    fn write(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// Waits (at most [`WAIT`]) until stdout holds at least `len` bytes, or
    /// ends; returns what it holds.
    fn read_at_least(&mut self, len: usize) -> String {
        let deadline = Instant::now() + WAIT;
        while self.seen.len() < len && !self.eof {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.chunks.recv_timeout(left) {
                Ok(c) => self.seen.extend_from_slice(&c),
                Err(RecvTimeoutError::Disconnected) => self.eof = true,
                Err(RecvTimeoutError::Timeout) => panic!(
                    "no more output within {WAIT:?}: got {:?}, wanted {len} bytes",
                    String::from_utf8_lossy(&self.seen)
                ),
            }
        }
        String::from_utf8(self.seen.clone()).unwrap()
    }

    /// Closes stdin and waits (at most [`WAIT`] each) for the end of
    /// stdout and the exit; returns (exit code, all stdout, stderr).
    fn finish(mut self) -> (Option<i32>, String, String) {
        drop(self.stdin.take());
        self.read_at_least(usize::MAX);
        let deadline = Instant::now() + WAIT;
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "no exit within {WAIT:?}");
            std::thread::sleep(Duration::from_millis(10));
        };
        let stderr = self.stderr.take().unwrap().join().unwrap();
        assert!(
            !stderr.contains("panicked"),
            "the command panicked:\n{stderr}"
        );
        (
            status.code(),
            String::from_utf8(std::mem::take(&mut self.seen)).unwrap(),
            stderr,
        )
    }
}

impl Drop for Piped {
    fn drop(&mut self) {
        // A test that failed midway: do not leave the child running.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn setup() -> (Env, PathBuf) {
    let env = Env::new();
    let pack = env.pack(PACK);
    (env, pack)
}

#[test]
fn stream_redacts_emails_and_keeps_the_trailing_newline() {
    let (env, pack) = setup();
    let (code, out, err) = run_with(
        &env,
        &stream_args(&env, &pack, &[]),
        b"Reach support at support@corp.com or security@corp.com.\n",
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        "Reach support at [REDACTED_EMAIL] or [REDACTED_EMAIL].\n"
    );
    assert_eq!(err, "");
}

#[test]
fn stream_blocked_on_an_ssn_exits_6_and_leaks_nothing() {
    let (env, pack) = setup();
    let (code, out, err) = run_with(
        &env,
        &stream_args(&env, &pack, &[]),
        b"ok so far\nSSN 123-45-6789 and more",
    );
    assert_eq!(code, Some(6), "{err}");
    assert!(err.contains(&format!("Blocked: {SSN_REASON}")), "{err}");
    // Written at once, the whole text is usually one read, whose push blocks
    // and releases nothing; if the pipe splits it, only a release before the
    // number can come out.
    assert!("ok so far\nSSN ".starts_with(&out), "{out:?}");
    assert!(
        !out.contains("123-45") && !err.contains("123-45"),
        "{out:?} {err:?}"
    );
}

#[test]
fn stream_blocked_after_a_release_keeps_exactly_what_was_released() {
    let (env, pack) = setup();
    let mut p = Piped::spawn(&env, &stream_args(&env, &pack, &[]));
    p.write(b"ok so far\nSSN 12");
    // "12" may begin an SSN: everything before it is released at once.
    assert_eq!(p.read_at_least("ok so far\nSSN ".len()), "ok so far\nSSN ");
    p.write(b"3-45-6789 and more");
    let (code, out, err) = p.finish();
    assert_eq!(code, Some(6), "{err}");
    assert_eq!(out, "ok so far\nSSN ");
    assert_eq!(err, format!("Blocked: {SSN_REASON}\n"));
}

#[test]
fn stream_no_block_on_fatal_redacts_the_ssn() {
    let (env, pack) = setup();
    let (code, out, err) = run_with(
        &env,
        &stream_args(&env, &pack, &["--no-block-on-fatal"]),
        b"ok so far\nSSN 123-45-6789 and more",
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "ok so far\nSSN [REDACTED_SSN] and more");
    assert_eq!(err, "");
}

#[test]
fn stream_releases_through_a_pipe_before_end_of_input() {
    let (env, pack) = setup();
    let mut p = Piped::spawn(&env, &stream_args(&env, &pack, &[]));
    p.write(b"hello world, mail jane");
    // "jane" may begin an e-mail address; the rest is out while stdin is open.
    assert_eq!(
        p.read_at_least("hello world, mail ".len()),
        "hello world, mail "
    );
    p.write(b".doe@example.com bye");
    let (code, out, err) = p.finish();
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out.strip_prefix("hello world, mail "),
        Some("[REDACTED_EMAIL] bye"),
        "{out:?}"
    );
    assert_eq!(err, "");
}

#[test]
fn stream_decodes_a_character_cut_between_reads() {
    let (env, pack) = setup();
    let mut p = Piped::spawn(&env, &stream_args(&env, &pack, &[]));
    // The first write ends inside "é" (0xC3 0xA9): the decoder must carry it.
    p.write(b"caf\xc3");
    std::thread::sleep(Duration::from_millis(200));
    p.write(b"\xa9 ouvert, \xe2\x82");
    std::thread::sleep(Duration::from_millis(200));
    p.write(b"\xac 5\n");
    let (code, out, err) = p.finish();
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "café ouvert, € 5\n");
}

#[test]
fn stream_reads_input_file_as_it_is() {
    let (env, pack) = setup();
    let input = env.write("in.txt", "Mail a.b@corp.io now\r\n\n");
    for extra in [&[][..], &["--lookahead-chars", "4"][..]] {
        let mut a = stream_args(&env, &pack, extra);
        a.extend(args!["--input", &input]);
        let (code, out, err) = run_with(&env, &a, b"ignored");
        assert_eq!(code, Some(0), "{extra:?}: {err}");
        assert_eq!(out, "Mail [REDACTED_EMAIL] now\r\n\n", "{extra:?}");
    }
}

#[test]
fn stream_hold_back_over_the_limit_blocks_fail_closed() {
    let (env, pack) = setup();
    // A run of letters may all be the local part of an e-mail address.
    let (code, out, err) = run_with(
        &env,
        &stream_args(&env, &pack, &["--max-holdback-chars", "5"]),
        b"abcdefghij",
    );
    assert_eq!(code, Some(6), "{err}");
    assert_eq!(out, "");
    assert_eq!(err, "Blocked: Stream hold-back limit exceeded\n");
}

#[test]
fn stream_invalid_utf8_is_an_invalid_request_error() {
    let (env, pack) = setup();
    let f = env.fails_with(
        &stream_args(&env, &pack, &[]),
        &[],
        Some(b"ok \xff then"),
        "InvalidRequestError",
        1,
    );
    assert_eq!(f.message, "standard input is not valid UTF-8");
    // Cut inside a character at the end: what came before was released.
    let (code, out, err) = run_with(
        &env,
        &stream_args(&env, &pack, &[]),
        b"cut at the end \xe2\x82",
    );
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(out, "cut at the end ");
    assert_eq!(
        err,
        "InvalidRequestError: standard input is not valid UTF-8\n"
    );
    let bad = env.write("bad.txt", b"ok \xff then");
    let mut a = stream_args(&env, &pack, &[]);
    a.extend(args!["--input", &bad]);
    let f = env.fails(a, "InvalidRequestError", 1);
    assert_eq!(
        f.message,
        format!("input {} is not valid UTF-8", bad.display())
    );
}

#[test]
fn stream_flag_misuse_is_a_usage_error() {
    let env = Env::new();
    let run = args!["run", "--pack", "x.hxpack"];
    let cases: Vec<Vec<&str>> = vec![
        vec!["--stream", "--text", "x"],
        vec!["--stream", "--jsonl"],
        vec!["--lookahead-chars", "5"],
        vec!["--no-block-on-fatal"],
        vec!["--max-holdback-chars", "9"],
        vec!["--lookahead-chars", "5", "--text", "x"],
        vec!["--no-block-on-fatal", "--jsonl"],
        vec!["--stream", "--max-holdback-chars", "0"],
        vec!["--stream", "--lookahead-chars", "-1"],
    ];
    for c in cases {
        let mut a = run.clone();
        a.extend(c.iter().map(OsString::from));
        let f = env.fails(a, "UsageError", 2);
        assert!(!f.message.is_empty(), "{c:?}");
    }
}

#[test]
fn stream_normalize_evasion_sees_through_evasive_values_and_writes_the_original() {
    let (env, pack) = setup();
    let evasive =
        "mail jane\u{200B}@example.com, ｊｏｅ＠ｅｘａｍｐｌｅ．ｃｏｍ or 9\u{301}: café\n";
    // As written, neither address is one.
    let (code, out, err) = run_with(&env, &stream_args(&env, &pack, &[]), evasive.as_bytes());
    assert_eq!((code, out.as_str(), err.as_str()), (Some(0), evasive, ""));
    let (code, out, err) = run_with(
        &env,
        &stream_args(&env, &pack, &["--normalize", "evasion"]),
        evasive.as_bytes(),
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        "mail [REDACTED_EMAIL], [REDACTED_EMAIL] or 9\u{301}: café\n"
    );
    // Full-width digits: blocked, and no digit of the value written.
    let mut p = Piped::spawn(&env, &stream_args(&env, &pack, &["--normalize", "evasion"]));
    p.write("ok so far\nSSN １２".as_bytes());
    assert_eq!(p.read_at_least("ok so far\nSSN ".len()), "ok so far\nSSN ");
    p.write("３-４５-６７８９ and more".as_bytes());
    let (code, out, err) = p.finish();
    assert_eq!(code, Some(6), "{err}");
    assert_eq!(out, "ok so far\nSSN ");
    assert_eq!(err, format!("Blocked: {SSN_REASON}\n"));
}

#[test]
fn run_normalize_evasion_marks_the_decision_and_spans_the_original() {
    let (env, pack) = setup();
    let mut a = args!["run", "--pack", &pack];
    a.extend(env.lic_args(&env.lic));
    a.extend(args![
        "--normalize",
        "evasion",
        "--text",
        "call (２１２) ５５５-０１９９ now"
    ]);
    let out = env.output_with(&a, &[], None);
    assert_eq!(out.status.code(), Some(0));
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["action"], "redact_and_permit_contact_pii");
    assert_eq!(d["clean_text"], "call [REDACTED_PHONE] now");
    assert_eq!(d["triggers"][0]["spans"], serde_json::json!([[5, 19]]));
    assert_eq!(d["normalized"], true);
    // An unknown mode is a usage error (exit 2).
    let mut a = args!["run", "--pack", &pack];
    a.extend(env.lic_args(&env.lic));
    a.extend(args!["--normalize", "nfkc", "--text", "x"]);
    assert_eq!(env.output_with(&a, &[], None).status.code(), Some(2));
}
