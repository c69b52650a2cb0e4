//! The `helixor-pack` subcommands ([§8](docs/cli.md#s8)) as library functions over typed
//! options: the binary parses flags and calls these. Results go to the given
//! writers: JSON or reports on `out`, warnings on `err`. Never prints a key,
//! a pattern or a payload fragment beyond the decision itself (or, with
//! `run --stream`, the text a stream session released).

use crate::compiler;
use crate::container::{read_pack_file, SealedPack};
use crate::engine::{Decision, Normalize, StreamOptions, StreamSession};
use crate::error::{ErrorName, Named};
use crate::license::{
    self, format_time, IssuerKeys, License, LicenseArgs, VerifiedLicense, Window,
};
use crate::manifest;
use crate::pack::LoadedPack;
use crate::playbook;
use crate::policy_test::{self, Loader, TestFile};
use crate::request::{self, EvaluateRequest};
use crate::rules::declarations;
use crate::signature::{
    read_signing_key, signature_path, PackSignature, PackSigners, SignatureFile,
};
use crate::{Error, PackError};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use time::OffsetDateTime;

/// Largest payload `run` reads from `--input` or stdin.
pub const MAX_RUN_INPUT_BYTES: u64 = 64 * 1024 * 1024;

/// Size of the read buffer of `run --stream` (its only input buffer: the
/// session's hold-back limit bounds the rest).
pub const STREAM_READ_BYTES: usize = 64 * 1024;

/// Exit code of `run --stream` when the session blocked ([§4.3](docs/errors.md#s4-3), [§11.3](docs/streaming.md#s11-3)).
pub const STREAM_BLOCKED_EXIT: u8 = 6;

fn write_out(out: &mut dyn Write, text: &str) -> Result<(), Error> {
    out.write_all(text.as_bytes()).map_err(stdout_error)
}

fn stdout_error(e: std::io::Error) -> Error {
    Error::io("cannot write to stdout", e)
}

fn json_line(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Pretty JSON for people, with `[start, end]` spans kept on one line. (A JSON
/// string cannot hold a raw newline, so the rewrite never touches text.)
fn json_pretty(v: &impl serde::Serialize) -> String {
    static PAIR: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    if let Some(pair) =
        PAIR.get_or_init(|| regex::Regex::new(r"\[\n\s*(\d+),\n\s*(\d+)\n\s*\]").ok())
    {
        s = pair.replace_all(&s, "[$1, $2]").into_owned();
    }
    s.push('\n');
    s
}

/// `compile`: [§4.2](docs/formats.md#s4-2) then [§3](docs/formats.md#s3); with `sign_key`, the pack's
/// signature beside it ([§17](docs/guides/signing.md#s17)).
pub fn compile(
    playbook: &Path,
    lic: &LicenseArgs,
    out_path: &Path,
    sign_key: Option<&Path>,
    as_json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), Error> {
    let license = lic.load(OffsetDateTime::now_utc())?;
    // A key that cannot be read fails before anything is written.
    let key = sign_key.map(read_signing_key).transpose()?;
    let result = compiler::compile_file(playbook, &license, out_path)?;
    for w in &result.warnings {
        let _ = writeln!(err, "warning: {w}");
    }
    let signed = match &key {
        Some((key_id, key)) => Some(sign_file(out_path, key_id, key, None, None)?),
        None => None,
    };
    if as_json {
        let mut v = serde_json::to_value(&result).unwrap_or_default();
        if let Some((sig, path)) = &signed {
            v["signature"] = json!({"signed_by": sig.key_id, "sequence": sig.sequence,
                "signed_at": sig.signed_at, "path": path.display().to_string()});
        }
        write_out(out, &format!("{}\n", json_line(&v)))
    } else {
        let signed_line = signed.as_ref().map_or(String::new(), |(sig, path)| {
            format!(
                "  signed: {} by {} (sequence {})\n",
                path.display(),
                sig.key_id,
                sig.sequence
            )
        });
        write_out(
            out,
            &format!(
                "compiled {} (version {})\n  sha256: {}\n  wrote:  {} ({} bytes)\n{signed_line}",
                result.pack_id,
                if result.version.is_empty() {
                    "none"
                } else {
                    &result.version
                },
                result.sha256,
                result.path.display(),
                result.bytes
            ),
        )
    }
}

/// Signs the pack file at `pack` as `key_id` and writes the signature to
/// `out_file` (default `<pack>.sig`), atomically; `sequence` defaults to
/// the current Unix time. Returns the signature and where it was written.
fn sign_file(
    pack: &Path,
    key_id: &str,
    key: &ed25519_dalek::SigningKey,
    sequence: Option<u64>,
    out_file: Option<&Path>,
) -> Result<(PackSignature, PathBuf), Error> {
    let bytes = read_pack_file(pack)?;
    let now = OffsetDateTime::now_utc();
    let sequence =
        sequence.unwrap_or_else(|| u64::try_from(now.unix_timestamp()).unwrap_or_default());
    let sig = PackSignature::sign(
        &bytes,
        &pack.display().to_string(),
        key_id,
        key,
        sequence,
        now,
    )?;
    let path = out_file.map_or_else(|| signature_path(pack), Path::to_path_buf);
    crate::atomic::write_atomic(&path, sig.to_file_text().as_bytes())
        .map_err(|e| Error::io(format_args!("cannot write signature {}", path.display()), e))?;
    Ok((sig, path))
}

/// `sign`: writes the detached signature of a sealed pack ([§17](docs/guides/signing.md#s17)).
pub fn sign(
    pack: &Path,
    key_file: &Path,
    sequence: Option<u64>,
    out_file: Option<&Path>,
    as_json: bool,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let (key_id, key) = read_signing_key(key_file)?;
    let (sig, path) = sign_file(pack, &key_id, &key, sequence, out_file)?;
    if as_json {
        let v = json!({"pack_id": sig.pack_id, "pack_sha256": sig.pack_sha256,
            "signed_by": sig.key_id, "sequence": sig.sequence, "signed_at": sig.signed_at,
            "path": path.display().to_string()});
        return write_out(out, &format!("{}\n", json_line(&v)));
    }
    write_out(
        out,
        &format!(
            "signed {} by {} (sequence {})\n  pack_sha256: {}\n  wrote:       {}\n",
            sig.pack_id,
            sig.key_id,
            sig.sequence,
            sig.pack_sha256,
            path.display()
        ),
    )
}

/// Where `run` takes its payload from. Its `Debug` never shows `--text`'s
/// payload.
#[derive(Clone)]
pub enum RunInput {
    /// `--text`, taken as given.
    Text(String),
    /// `--input FILE`.
    File(PathBuf),
    /// Standard input.
    Stdin,
}

impl std::fmt::Debug for RunInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Text(t) => f
                .debug_tuple("Text")
                .field(&crate::redacted::Redacted::of(t))
                .finish(),
            Self::File(p) => f.debug_tuple("File").field(p).finish(),
            Self::Stdin => f.write_str("Stdin"),
        }
    }
}

/// Options of `run`.
#[derive(Debug, Clone)]
pub struct RunArgs {
    /// `--pack`, one or more.
    pub packs: Vec<PathBuf>,
    /// License flags.
    pub license: LicenseArgs,
    /// `--pack-id`.
    pub pack_id: Option<String>,
    /// The payload source.
    pub input: RunInput,
    /// `--jsonl`.
    pub jsonl: bool,
    /// `--stream` with its session options ([§11.3](docs/streaming.md#s11-3)); `None` without it.
    pub stream: Option<StreamOptions>,
    /// `--normalize` ([§15](docs/evasion.md#s15)): how every payload is matched.
    pub normalize: Normalize,
}

/// Loads packs in order; two files with one pack id are a `PackFormatError`.
/// With `signers`, every pack's signature must verify ([§17](docs/guides/signing.md#s17)).
pub fn load_packs(
    paths: &[PathBuf],
    license: &VerifiedLicense,
    signers: Option<&PackSigners>,
) -> Result<Vec<LoadedPack>, Error> {
    let mut packs: Vec<LoadedPack> = Vec::with_capacity(paths.len());
    for p in paths {
        let pack = crate::pack::load_pack_file_as::<Error>(p, license, signers)?;
        if let Some(other) = packs.iter().find(|q| q.pack_id == pack.pack_id) {
            return Err(PackError::Format(format!(
                "{} and {} both hold pack `{}`; pack ids must be unique",
                other.source, pack.source, pack.pack_id
            ))
            .into());
        }
        packs.push(pack);
    }
    Ok(packs)
}

/// Chooses the pack: the named one, else the only one.
pub fn choose_pack<'a>(
    packs: &'a [LoadedPack],
    pack_id: Option<&str>,
) -> Result<&'a LoadedPack, Error> {
    match pack_id {
        Some(id) => packs.iter().find(|p| p.pack_id == id).ok_or_else(|| {
            PackError::NotFound(format!(
                "pack `{id}` is not loaded (loaded: {})",
                packs
                    .iter()
                    .map(|p| p.pack_id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .into()
        }),
        None if packs.len() == 1 => Ok(&packs[0]),
        None => Err(PackError::NotFound(format!(
            "{} packs are loaded and no --pack-id names one (loaded: {})",
            packs.len(),
            packs
                .iter()
                .map(|p| p.pack_id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .into()),
    }
}

fn read_capped(reader: impl Read, what: &str) -> Result<Vec<u8>, Error> {
    crate::capped::read_capped(reader, MAX_RUN_INPUT_BYTES).map_err(|e| match e {
        crate::capped::CappedError::Io(e) => Error::io(format_args!("cannot read {what}"), e),
        crate::capped::CappedError::TooLarge => Error::InvalidRequest(format!(
            "{what} is over the {MAX_RUN_INPUT_BYTES}-byte limit"
        )),
    })
}

fn strip_one_newline(mut s: String) -> String {
    if s.ends_with("\r\n") {
        s.truncate(s.len() - 2);
    } else if s.ends_with('\n') {
        s.truncate(s.len() - 1);
    }
    s
}

/// `run`: loads ([§5](docs/formats.md#s5)) and prints decisions, or with `--stream` filters
/// the input to stdout ([§11.3](docs/streaming.md#s11-3); `Blocked: <reason>` on `err`). Returns
/// the exit code.
pub fn run(
    args: &RunArgs,
    stdin: &mut dyn Read,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<u8, Error> {
    if args.stream.is_some() {
        if args.jsonl {
            return Err(Error::Usage(
                "--jsonl and --stream cannot be used together".into(),
            ));
        }
        if matches!(args.input, RunInput::Text(_)) {
            return Err(Error::Usage(
                "--stream reads --input or standard input, not --text".into(),
            ));
        }
    }
    let license = args.license.load(OffsetDateTime::now_utc())?;
    let signers = PackSigners::resolve(args.license.pack_signers.as_deref())?;
    let packs = load_packs(&args.packs, &license, signers.as_ref())?;
    if let Some(id) = &args.pack_id {
        // A `--pack-id` naming no loaded pack fails up front, `--jsonl` too.
        choose_pack(&packs, Some(id))?;
    }
    if args.jsonl {
        return run_jsonl(args, &packs, stdin, out);
    }
    let pack = choose_pack(&packs, args.pack_id.as_deref())?;
    if let Some(opts) = args.stream {
        let opts = StreamOptions {
            normalize: args.normalize,
            ..opts
        };
        return run_stream(&args.input, pack, opts, stdin, out, err);
    }
    let payload = match &args.input {
        RunInput::Text(t) => t.clone(),
        RunInput::File(p) => {
            let f = std::fs::File::open(p)
                .map_err(|e| Error::io(format_args!("cannot read input {}", p.display()), e))?;
            let bytes = read_capped(f, &format!("input {}", p.display()))?;
            let s = String::from_utf8(bytes).map_err(|_| {
                Error::InvalidRequest(format!("input {} is not valid UTF-8", p.display()))
            })?;
            strip_one_newline(s)
        }
        RunInput::Stdin => {
            let bytes = read_capped(stdin, "standard input")?;
            let s = String::from_utf8(bytes)
                .map_err(|_| Error::InvalidRequest("standard input is not valid UTF-8".into()))?;
            strip_one_newline(s)
        }
    };
    let decision = pack.evaluator.evaluate_with(&payload, args.normalize);
    write_out(out, &json_pretty(&decision))?;
    Ok(0)
}

/// `run --stream` ([§11.3](docs/streaming.md#s11-3)): pushes whatever each read returns (a pipe's
/// read returns as soon as it has data), decoding UTF-8 across reads, and
/// writes every release at once. Nothing is written after a block, and held
/// text is never printed.
fn run_stream(
    input: &RunInput,
    pack: &LoadedPack,
    opts: StreamOptions,
    stdin: &mut dyn Read,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<u8, Error> {
    let (mut reader, what): (Box<dyn Read + '_>, String) = match input {
        RunInput::File(p) => (
            Box::new(
                std::fs::File::open(p)
                    .map_err(|e| Error::io(format_args!("cannot read input {}", p.display()), e))?,
            ),
            format!("input {}", p.display()),
        ),
        RunInput::Stdin => (Box::new(stdin), "standard input".into()),
        RunInput::Text(_) => {
            return Err(Error::Usage(
                "--stream reads --input or standard input, not --text".into(),
            ))
        }
    };
    let not_utf8 = || Error::InvalidRequest(format!("{what} is not valid UTF-8"));
    let mut session = pack.evaluator.stream(opts);
    let mut buf = vec![0u8; STREAM_READ_BYTES];
    // `buf[..carry]`: the start of a UTF-8 sequence cut by the last read.
    let mut carry = 0;
    loop {
        let n = match reader.read(&mut buf[carry..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io(format_args!("cannot read {what}"), e)),
        };
        let filled = carry + n;
        let piece = utf8_prefix(&buf[..filled]).ok_or_else(not_utf8)?;
        let used = piece.len();
        let released = session.push(piece);
        if emit_release(&session, &released.text, out, err)? {
            return Ok(STREAM_BLOCKED_EXIT);
        }
        buf.copy_within(used..filled, 0);
        carry = filled - used;
    }
    if carry > 0 {
        return Err(not_utf8());
    }
    let released = session.finish();
    if emit_release(&session, &released.text, out, err)? {
        return Ok(STREAM_BLOCKED_EXIT);
    }
    Ok(0)
}

/// The longest valid UTF-8 prefix of `bytes` when the rest is at most the
/// start of one sequence cut off by the end; `None` for invalid UTF-8.
fn utf8_prefix(bytes: &[u8]) -> Option<&str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Some(s),
        Err(e) if e.error_len().is_none() => std::str::from_utf8(&bytes[..e.valid_up_to()]).ok(),
        Err(_) => None,
    }
}

/// Writes and flushes a release (a blocking push releases nothing); then,
/// if the session is blocked, prints `Blocked: <reason>` on `err` and
/// returns `true`.
fn emit_release(
    session: &StreamSession<'_>,
    text: &str,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<bool, Error> {
    if !text.is_empty() {
        write_out(out, text)?;
        out.flush()
            .map_err(|e| Error::io("cannot write to stdout", e))?;
    }
    match session.blocked() {
        Some(b) => {
            let _ = writeln!(err, "Blocked: {}", b.reason);
            let _ = err.flush();
            Ok(true)
        }
        None => Ok(false),
    }
}

fn line_error(name: ErrorName, message: &str) -> String {
    json_line(&json!({"error": name.as_str(), "message": message}))
}

/// One `--jsonl` line to a decision, or the error of that line: a line that
/// cannot be read (or names no pack while several are loaded) is an
/// `InvalidRequestError`, one naming a pack that is not loaded a
/// `PackNotFoundError` ([§4.3](docs/errors.md#s4-3)).
fn jsonl_decision<'p>(
    line: &[u8],
    packs: &'p [LoadedPack],
    default_id: Option<&str>,
    normalize: Normalize,
) -> Result<Decision<'p>, (ErrorName, String)> {
    let request = jsonl_request(line).map_err(|m| (ErrorName::InvalidRequestError, m))?;
    let chosen = request.pack_id.as_deref().or(default_id);
    if chosen.is_none() && packs.len() > 1 {
        return Err((
            ErrorName::InvalidRequestError,
            format!(
                "the line names no `pack_id` and {} packs are loaded",
                packs.len()
            ),
        ));
    }
    let pack = choose_pack(packs, chosen).map_err(|e| (e.name(), e.to_string()))?;
    Ok(pack
        .evaluator
        .evaluate_with(&request.text, request.normalize.unwrap_or(normalize)))
}

/// Reads one `--jsonl` line: a JSON string, or an object read as the HTTP
/// routes read theirs ([`EvaluateRequest::take_from`], a key twice refused).
fn jsonl_request(line: &[u8]) -> Result<EvaluateRequest, String> {
    if std::str::from_utf8(line).is_err() {
        return Err("line is not valid UTF-8".into());
    }
    match request::parse_strict(line).map_err(|e| format!("line is not valid JSON: {e}"))? {
        Value::String(text) => Ok(EvaluateRequest {
            text,
            pack_id: None,
            normalize: None,
            monitor: false,
        }),
        Value::Object(mut obj) => EvaluateRequest::take_from(&mut obj),
        _ => Err("line is neither a JSON string nor an object with `text`".into()),
    }
}

fn run_jsonl(
    args: &RunArgs,
    packs: &[LoadedPack],
    stdin: &mut dyn Read,
    out: &mut dyn Write,
) -> Result<u8, Error> {
    let mut reader: Box<dyn BufRead + '_> = match &args.input {
        RunInput::File(p) => Box::new(std::io::BufReader::new(
            std::fs::File::open(p)
                .map_err(|e| Error::io(format_args!("cannot read input {}", p.display()), e))?,
        )),
        RunInput::Stdin => Box::new(std::io::BufReader::new(stdin)),
        RunInput::Text(_) => {
            return Err(Error::Usage(
                "--jsonl reads --input or standard input, not --text".into(),
            ))
        }
    };
    let mut all_ok = true;
    let mut line = Vec::new();
    let mut out = std::io::BufWriter::new(out);
    loop {
        line.clear();
        let n = (&mut reader)
            .take(MAX_RUN_INPUT_BYTES + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| Error::io("cannot read input", e))?;
        if n == 0 {
            break;
        }
        if line.len() as u64 > MAX_RUN_INPUT_BYTES {
            return Err(Error::InvalidRequest(format!(
                "an input line is over the {MAX_RUN_INPUT_BYTES}-byte limit"
            )));
        }
        let mut l: &[u8] = &line;
        if let Some(x) = l.strip_suffix(b"\n") {
            l = x;
        }
        if let Some(x) = l.strip_suffix(b"\r") {
            l = x;
        }
        if l.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let text = match jsonl_decision(l, packs, args.pack_id.as_deref(), args.normalize) {
            Ok(d) => json_line(&d),
            Err((name, message)) => {
                all_ok = false;
                line_error(name, &message)
            }
        };
        writeln!(out, "{text}").map_err(|e| Error::io("cannot write to stdout", e))?;
    }
    out.flush()
        .map_err(|e| Error::io("cannot write to stdout", e))?;
    Ok(if all_ok { 0 } else { 1 })
}

/// `inspect`: header fields without a key; with a license, the loaded summary.
/// With `pack_signers` (else `$HELIXOR_PACK_SIGNERS`), the signature is
/// verified, with or without a license.
pub fn inspect(
    pack_path: &Path,
    lic: Option<&LicenseArgs>,
    pack_signers: Option<&Path>,
    as_json: bool,
    out: &mut dyn Write,
) -> Result<(), Error> {
    // With a license, [§5](docs/formats.md#s5) order: the license is checked before the pack.
    let license = match lic {
        Some(lic) => Some(lic.load(OffsetDateTime::now_utc())?),
        None => None,
    };
    let signers = PackSigners::resolve(pack_signers)?;
    let bytes = read_pack_file(pack_path)?;
    let sig = SignatureFile::read_for(pack_path);
    let name = pack_path.display().to_string();
    let sealed = SealedPack::parse(&bytes, &name)?;
    // With signers the signature is checked (a failure is the error, as in
    // a load); without, it is shown as it claims to be, unverified.
    let signature = match &signers {
        Some(s) => Some(s.verify(&bytes, sealed.pack_id, &sig, &name)?.info(true)),
        None => sig.unverified_info(),
    };
    let mut report = json!({
        "pack_id": sealed.pack_id,
        "format_version": sealed.format_version,
        "bytes": bytes.len(),
        "sha256": hex::encode(sealed.sha256),
        "signature": crate::signature::info_json(signature.as_ref()),
        "loaded": false,
    });
    if let Some(license) = &license {
        let pack = crate::pack::load_signed_pack(&bytes, &sig, &name, license, signers.as_ref())?;
        let entry = manifest::pack_entry(
            &pack.doc,
            &pack.rule_actions(),
            &pack.solvers,
            &pack.program,
        );
        report["loaded"] = json!(true);
        report["version"] = json!(pack.version);
        report["name"] = json!(pack.name);
        report["rules"] = json!(pack.rules);
        report["actions"] = entry["actions"].clone();
        report["solvers"] = json!(pack.solvers);
        if pack.program.schema == crate::program::Schema::V2 {
            // What a version-2 pack runs ([§16](docs/codons.md#s16)); never a pattern.
            report["schema_version"] = json!(2);
            report["codons"] = entry["codons"].clone();
            report["hard_rules"] = json!(pack
                .program
                .hard_rules
                .iter()
                .map(|h| json!({
                    "id": h.id,
                    "severity": if h.fatal { "fatal" } else { "warning" },
                    "action": h.action,
                }))
                .collect::<Vec<_>>());
        }
    }
    if as_json {
        return write_out(out, &format!("{}\n", json_line(&report)));
    }
    let mut text = format!(
        "pack_id:        {}\nformat_version: {}\nbytes:          {}\nsha256:         {}\nsignature:      {}\n",
        sealed.pack_id,
        sealed.format_version,
        bytes.len(),
        hex::encode(sealed.sha256),
        match &signature {
            Some(s) => format!(
                "signed by {} (sequence {}, signed at {}){}",
                s.signed_by,
                s.sequence,
                s.signed_at,
                if s.verified { ", verified" } else { ", not verified: no --pack-signers" }
            ),
            None => "none".into(),
        }
    );
    if report["loaded"] == json!(true) {
        text.push_str(&format!(
            "loaded:         yes\nversion:        {}\nname:           {}\nsolvers:        {}\nactions:        {}\nrules:\n",
            report["version"].as_str().unwrap_or_default(),
            report["name"].as_str().unwrap_or("-"),
            join_strings(&report["solvers"]),
            join_strings(&report["actions"]),
        ));
        for r in report["rules"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            text.push_str(&format!(
                "  - {} ({}, {})\n",
                r["id"].as_str().unwrap_or_default(),
                r["type"].as_str().unwrap_or_default(),
                r["action"].as_str().unwrap_or_default()
            ));
        }
        if let Some(hard) = report["hard_rules"].as_array() {
            text.push_str(&format!(
                "schema_version: 2\ncodons:         {}\nhard rules:\n",
                join_strings(&report["codons"])
            ));
            for h in hard {
                text.push_str(&format!(
                    "  - {} ({}, {})\n",
                    h["id"].as_str().unwrap_or_default(),
                    h["severity"].as_str().unwrap_or_default(),
                    h["action"].as_str().unwrap_or_default()
                ));
            }
        }
    } else {
        text.push_str("loaded:         no (pass --license to open it)\n");
    }
    write_out(out, &text)
}

fn join_strings(v: &Value) -> String {
    let items: Vec<&str> = v
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if items.is_empty() {
        "-".into()
    } else {
        items.join(", ")
    }
}

/// `inspect-license`: the report, never the content key. Returns the exit
/// code: 0 only when the signature verified and the license is valid now.
pub fn inspect_license(lic: &LicenseArgs, as_json: bool, out: &mut dyn Write) -> Result<u8, Error> {
    let path = license::resolve_license_path(lic.license.as_deref())?;
    let license = License::read(&path)?;
    let keys = IssuerKeys::resolve(lic.issuer_keys.as_deref())?;
    let verification = license.verify(&keys);
    let now = OffsetDateTime::now_utc();
    let window = license.window_at(now);
    let report = json!({
        "license_id": license.license_id,
        "licensee": license.licensee,
        "tier": license.tier,
        "issued_at": format_time(license.issued_at),
        "not_before": format_time(license.not_before),
        "not_after": format_time(license.not_after),
        "seconds_left": license.seconds_left(now),
        "valid_now": window == Window::Valid,
        "licensed_packs": license.licensed_packs,
        "licensed_solvers": license.licensed_solvers,
        "features": license.features,
        "issuer_key_id": license.issuer_key_id,
        "signature_verified": verification.is_ok(),
    });
    let ok = verification.is_ok() && window == Window::Valid;
    if as_json {
        write_out(out, &format!("{}\n", json_line(&report)))?;
    } else {
        let status = match (&verification, window) {
            (Err(e), _) => format!("INVALID: {e}"),
            (Ok(()), Window::Valid) => "valid".into(),
            (Ok(()), Window::NotYetValid) => "signature verified, not yet valid".into(),
            (Ok(()), Window::Expired) => "signature verified, expired".into(),
        };
        write_out(
            out,
            &format!(
                "license_id:       {}\nlicensee:         {}\ntier:             {}\nissued_at:        {}\nvalid:            {} to {}\nseconds_left:     {}\nlicensed_packs:   {}\nlicensed_solvers: {}\nfeatures:         {}\nissuer_key_id:    {}\nstatus:           {status}\n",
                license.license_id,
                license.licensee,
                license.tier,
                format_time(license.issued_at),
                format_time(license.not_before),
                format_time(license.not_after),
                license.seconds_left(now),
                join_strings(&report["licensed_packs"]),
                join_strings(&report["licensed_solvers"]),
                join_strings(&report["features"]),
                license.issuer_key_id,
            ),
        )?;
    }
    Ok(if ok { 0 } else { 4 })
}

/// One source of a manifest entry, in command-line order.
#[derive(Debug, Clone)]
pub enum ManifestSource {
    /// `--playbook P`.
    Playbook(PathBuf),
    /// `--pack P` (needs the license).
    Pack(PathBuf),
}

/// `manifest`: [§7](docs/formats.md#s7), to `out_file` or stdout.
pub fn manifest(
    sources: &[ManifestSource],
    lic: &LicenseArgs,
    out_file: Option<&Path>,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let (m, _) = build_manifest(sources, lic, "manifest")?;
    let text = json_pretty(&m);
    match out_file {
        Some(f) => crate::atomic::write_atomic(f, text.as_bytes())
            .map_err(|e| Error::io(format_args!("cannot write manifest {}", f.display()), e)),
        None => write_out(out, &text),
    }
}

/// The manifest of `sources`, in order, and the custom rule ids of each
/// pack id (what the manifest itself does not list).
fn build_manifest(
    sources: &[ManifestSource],
    lic: &LicenseArgs,
    command: &str,
) -> Result<(Value, BTreeMap<String, Vec<String>>), Error> {
    if sources.is_empty() {
        return Err(Error::Usage(format!(
            "{command} needs at least one --playbook or --pack"
        )));
    }
    let mut license: Option<VerifiedLicense> = None;
    let mut signers: Option<Option<PackSigners>> = None;
    let mut entries = Vec::with_capacity(sources.len());
    let mut rule_ids: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in sources {
        match s {
            ManifestSource::Playbook(p) => {
                let name = p.display().to_string();
                let bytes = compiler::read_playbook(p)?;
                let doc = playbook::parse_document(&bytes, &name)?.doc;
                let pack_id = playbook::pack_id(&doc, &name)?.to_string();
                let solvers = playbook::solver_names(&doc, &name)?;
                let declared = declarations(&doc, &name)?;
                let actions: Vec<String> = declared.rules.iter().map(|r| r.action_name()).collect();
                rule_ids.insert(
                    pack_id,
                    declared.rules.iter().map(|r| r.id.clone()).collect(),
                );
                entries.push(manifest::pack_entry(
                    &doc,
                    &actions,
                    &solvers,
                    &declared.program,
                ));
            }
            ManifestSource::Pack(p) => {
                if license.is_none() {
                    license = Some(lic.load(OffsetDateTime::now_utc())?);
                }
                if signers.is_none() {
                    signers = Some(PackSigners::resolve(lic.pack_signers.as_deref())?);
                }
                if let (Some(l), Some(s)) = (&license, &signers) {
                    let pack = crate::pack::load_pack_file_as::<Error>(p, l, s.as_ref())?;
                    let mut entry = manifest::pack_entry(
                        &pack.doc,
                        &pack.rule_actions(),
                        &pack.solvers,
                        &pack.program,
                    );
                    // Tied to the sealed pack ([§17](docs/guides/signing.md#s17)): sealed, and
                    // when by its verified signature.
                    entry["is_sealed"] = json!(true);
                    entry["sealed_at"] = match &pack.signature {
                        Some(sig) if sig.verified => json!(sig.signed_at),
                        _ => Value::Null,
                    };
                    rule_ids.insert(
                        pack.pack_id.clone(),
                        pack.rules.iter().map(|r| r.id.clone()).collect(),
                    );
                    entries.push(entry);
                }
            }
        }
    }
    Ok((manifest::manifest(entries), rule_ids))
}

/// Where `sdk` takes its packs from ([§18](docs/formats.md#s18)).
#[derive(Debug, Clone)]
pub enum SdkSource {
    /// `--manifest FILE`: an `embedded-pack-manifest.json`.
    Manifest(PathBuf),
    /// `--playbook` and `--pack`, in command-line order.
    Sources(Vec<ManifestSource>),
}

/// Options of `sdk`.
#[derive(Debug, Clone)]
pub struct SdkArgs {
    /// `--lang`.
    pub lang: crate::sdk::Lang,
    /// Where the packs come from.
    pub source: SdkSource,
    /// License flags, for `--pack`.
    pub license: LicenseArgs,
    /// `--out DIR`.
    pub out: PathBuf,
    /// `--package NAME`.
    pub package: Option<String>,
}

/// A manifest file is refused over this many bytes before it is parsed.
const MAX_MANIFEST_BYTES: u64 = 16 * 1024 * 1024;

/// `sdk`: typed clients generated from the manifest ([§18](docs/formats.md#s18)).
pub fn sdk(args: &SdkArgs, as_json: bool, out: &mut dyn Write) -> Result<(), Error> {
    let (manifest, rule_ids) =
        match &args.source {
            SdkSource::Manifest(path) => {
                let bytes = crate::capped::read_regular_file_capped(path, MAX_MANIFEST_BYTES)
                    .map_err(|e| match e {
                        crate::capped::CappedError::Io(e) => {
                            Error::io(format_args!("cannot read manifest {}", path.display()), e)
                        }
                        crate::capped::CappedError::TooLarge => Error::InvalidRequest(format!(
                            "manifest {} is over the {MAX_MANIFEST_BYTES}-byte limit",
                            path.display()
                        )),
                    })?;
                let v: Value = serde_json::from_slice(&bytes).map_err(|e| {
                    Error::InvalidRequest(format!("manifest {} is not JSON: {e}", path.display()))
                })?;
                (v, BTreeMap::new())
            }
            SdkSource::Sources(sources) => build_manifest(sources, &args.license, "sdk")?,
        };
    let declared = |pack_id: &str| rule_ids.get(pack_id).cloned();
    let ctx = crate::sdk::context(&manifest, args.lang, args.package.as_deref(), &declared)?;
    let files = crate::sdk::render(&ctx, args.lang)?;
    crate::sdk::write(&args.out, &files)?;
    if as_json {
        let v = json!({
            "lang": format!("{:?}", args.lang).to_lowercase(),
            "package": ctx.package,
            "clients": ctx.packs.iter().map(|p| json!({"pack_id": p.pack_id, "client": p.client})).collect::<Vec<_>>(),
            "files": files.iter().map(|f| args.out.join(&f.path).display().to_string()).collect::<Vec<_>>(),
        });
        return write_out(out, &format!("{}\n", json_line(&v)));
    }
    let mut text = format!(
        "wrote {} files to {} (package {})\n",
        files.len(),
        args.out.display(),
        ctx.package
    );
    for p in &ctx.packs {
        text.push_str(&format!("  {} for {}\n", p.client, p.pack_id));
    }
    write_out(out, &text)
}

/// Options of `test` ([§13](docs/policy-tests.md#s13)).
#[derive(Debug, Clone, Default)]
pub struct TestArgs {
    /// Test files and directories; none means `.`.
    pub paths: Vec<PathBuf>,
    /// License flags, for `pack:` test files that name no license.
    pub license: LicenseArgs,
    /// `--junit FILE`.
    pub junit: Option<PathBuf>,
    /// `--coverage`.
    pub coverage: bool,
    /// `--json`.
    pub json: bool,
}

/// `test`: finds the test files, builds every subject first (a broken file
/// stops the run with its own error before any case runs), runs the cases,
/// and writes the report. Returns 0 when every case passed, 1 otherwise.
pub fn test(args: &TestArgs, out: &mut dyn Write, err: &mut dyn Write) -> Result<u8, Error> {
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    let found = policy_test::find_test_files(&paths)?;
    let mut loader = Loader::new(args.license.clone(), OffsetDateTime::now_utc());
    let mut suites = Vec::with_capacity(found.len());
    for path in &found {
        let file = TestFile::read(path)?;
        let subject = loader.subject(&file)?;
        policy_test::check_rule_ids(&file, &subject)?;
        for w in loader.warnings.drain(..) {
            let _ = writeln!(err, "warning: {w}");
        }
        suites.push((file, subject));
    }
    let results: Vec<_> = suites
        .into_iter()
        .map(|(file, subject)| policy_test::run_file(&file, subject))
        .collect();
    let coverage = args.coverage.then(|| policy_test::coverage(&results));
    if let Some(path) = &args.junit {
        crate::atomic::write_atomic(path, policy_test::report::junit(&results).as_bytes())
            .map_err(|e| {
                Error::io(
                    format_args!("cannot write JUnit report {}", path.display()),
                    e,
                )
            })?;
    }
    if args.json {
        let report = policy_test::report::json(&results, coverage.as_ref());
        write_out(out, &format!("{}\n", json_line(&report)))?;
    } else {
        write_out(out, &policy_test::report::text(&results, coverage.as_ref()))?;
    }
    let (_, failed) = policy_test::report::totals(&results);
    Ok(if failed == 0 { 0 } else { 1 })
}

/// `download-pack` ([§14](docs/catalog.md#s14)): downloads, checks ([§5](docs/formats.md#s5)) and writes a
/// catalog pack, then prints what was written (text, or one JSON object).
pub fn download_pack(
    req: &crate::catalog::client::DownloadRequest,
    as_json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), Error> {
    let env = |k: &str| std::env::var(k).ok();
    let d = crate::catalog::client::download_pack(req, &env, err)?;
    if as_json {
        return write_out(out, &format!("{}\n", json_line(&d)));
    }
    let signed = match &d.signature {
        Some(s) => format!(
            "  signed: {} by {} (sequence {}, {})\n",
            s["path"].as_str().unwrap_or_default(),
            s["signed_by"].as_str().unwrap_or_default(),
            s["sequence"],
            if s["verified"] == json!(true) {
                "verified"
            } else {
                "not verified: no --pack-signers"
            }
        ),
        None => String::new(),
    };
    write_out(
        out,
        &format!(
            "downloaded {} (version {}) sealed for {}\n  from:   {}\n  sha256: {}\n  wrote:  {} ({} bytes)\n{signed}",
            d.pack_id,
            if d.version.is_empty() { "none" } else { &d.version },
            d.license_id,
            d.url,
            d.sha256,
            d.path.display(),
            d.bytes
        ),
    )
}

/// `license keygen`: an issuer key pair `DIR/ID.key` (mode 0600) and
/// `DIR/ID.pub`; prints where they went and the public key.
pub fn license_keygen(key_id: &str, dir: &Path, out: &mut dyn Write) -> Result<u8, Error> {
    // The id becomes a file name: refused as a usage error (exit 2) before
    // anything is written.
    if key_id.is_empty() || key_id.starts_with('.') || key_id.contains(['/', '\\']) {
        return Err(Error::Usage(format!(
            "--key-id `{key_id}` is not usable as a file name"
        )));
    }
    let kg = license::keygen(key_id, dir)?;
    let _ = writeln!(
        out,
        "wrote {} (secret, keep it offline) and {} (public key {})",
        kg.secret_path.display(),
        kg.public_path.display(),
        kg.public_key
    );
    Ok(0)
}

/// The flags of `license issue`, as given on the command line (the binary
/// flattens them into its subcommand; each field's doc is its `--help`
/// line): lists may be repeated or comma-separated, times are RFC 3339 text.
#[derive(Debug, Clone, clap::Args)]
pub struct IssueArgs {
    /// The issuer's secret key file (ID.key).
    #[arg(long, value_name = "KEYFILE")]
    pub issuer_key: PathBuf,
    /// license_id.
    #[arg(long, value_name = "ID")]
    pub license_id: String,
    /// licensee.
    #[arg(long, value_name = "NAME")]
    pub licensee: String,
    /// tier.
    #[arg(long, value_name = "T", default_value = "DEVELOPER")]
    pub tier: String,
    /// Pack id globs (repeatable, or comma-separated).
    #[arg(long, value_name = "GLOB")]
    pub packs: Vec<String>,
    /// Solver globs (repeatable, or comma-separated).
    #[arg(long, value_name = "GLOB")]
    pub solvers: Vec<String>,
    /// Features (repeatable, or comma-separated).
    #[arg(long, value_name = "F")]
    pub features: Vec<String>,
    /// Start of validity (RFC 3339; default now).
    #[arg(long, value_name = "TIME")]
    pub not_before: Option<String>,
    /// Days of validity from not_before (default 365).
    #[arg(long, value_name = "N", conflicts_with = "not_after")]
    pub days: Option<u32>,
    /// End of validity (RFC 3339).
    #[arg(long, value_name = "TIME")]
    pub not_after: Option<String>,
    /// Where to write the license.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

/// Items of repeatable, comma-separated flags, trimmed, empty ones dropped.
fn split_list(items: &[String]) -> Vec<String> {
    items
        .iter()
        .flat_map(|s| s.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

fn parse_time_flag(flag: &str, value: &str) -> Result<OffsetDateTime, Error> {
    license::parse_time(value)
        .ok_or_else(|| Error::Usage(format!("{flag} `{value}` is not an RFC 3339 time")))
}

/// `license issue`: the validity window from the flags (a window that ends
/// before it starts is a usage error), then a signed license with a fresh
/// content key; prints where it went and its window, never the key.
pub fn license_issue(args: &IssueArgs, out: &mut dyn Write) -> Result<u8, Error> {
    // Whole seconds: the license's times are printed and signed to the second.
    let now = OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .unwrap_or(OffsetDateTime::now_utc());
    let not_before = match &args.not_before {
        Some(t) => parse_time_flag("--not-before", t)?,
        None => now,
    };
    let not_after = match &args.not_after {
        Some(t) => parse_time_flag("--not-after", t)?,
        None => not_before + time::Duration::days(i64::from(args.days.unwrap_or(365))),
    };
    if not_after <= not_before {
        return Err(Error::Usage(format!(
            "the license would end ({}) before it starts ({})",
            format_time(not_after),
            format_time(not_before)
        )));
    }
    let req = license::IssueRequest {
        issuer_key: args.issuer_key.clone(),
        license_id: args.license_id.clone(),
        licensee: args.licensee.clone(),
        tier: args.tier.clone(),
        packs: split_list(&args.packs),
        solvers: split_list(&args.solvers),
        features: split_list(&args.features),
        not_before,
        not_after,
        issued_at: now,
        out: args.out.clone(),
    };
    license::issue_license(&req)?;
    let _ = writeln!(
        out,
        "wrote license {} to {} (valid {} to {})",
        args.license_id,
        args.out.display(),
        format_time(not_before),
        format_time(not_after)
    );
    Ok(0)
}

/// `healthcheck URL`: 0 when the probe answers healthy, else 1 with why on `err`.
pub fn healthcheck(url: &str, err: &mut dyn Write) -> u8 {
    match crate::server::healthcheck::check(url) {
        Ok(()) => 0,
        Err(why) => {
            let _ = writeln!(err, "healthcheck {url}: {why}");
            1
        }
    }
}

/// Renders an error as [§4.3](docs/errors.md#s4-3) prescribes, in text or as one JSON object.
pub fn render_error(e: &(impl Named + std::fmt::Display), as_json: bool) -> String {
    if as_json {
        json_line(
            &json!({"error": e.name().as_str(), "message": e.to_string(), "problems": e.problems()}),
        )
    } else {
        let mut s = format!("{}: {e}", e.name());
        for p in e.problems() {
            s.push_str("\n  - ");
            s.push_str(p);
        }
        if let Some(c) = e.context() {
            s.push_str("\n  ");
            s.push_str(&c);
        }
        s
    }
}

/// `log verify` ([§19](docs/guides/auditing.md#s19)): every line and, with a checkpoint, its
/// signature and root.
pub fn log_verify(
    log: &Path,
    checkpoint: Option<&Path>,
    key: Option<&Path>,
    json: bool,
    out: &mut dyn Write,
) -> Result<u8, Error> {
    use crate::decision_log::verify;
    let verifier = key.map(verify::read_verifier).transpose()?;
    let cp = checkpoint.zip(verifier.as_ref());
    let v = verify::verify(log, cp)?;
    if json {
        let checkpoint = v.checkpoint.as_ref().map(
            |(origin, size)| serde_json::json!({"origin": origin, "size": size, "verified": true}),
        );
        let doc = serde_json::json!({
            "log": log.display().to_string(),
            "entries": v.entries,
            "root": v.root,
            "checkpoint": checkpoint,
        });
        writeln!(out, "{doc}").map_err(stdout_error)?;
    } else {
        writeln!(
            out,
            "{}: {} entries, root {}",
            log.display(),
            v.entries,
            v.root
        )
        .map_err(stdout_error)?;
        match &v.checkpoint {
            Some((origin, size)) => writeln!(
                out,
                "checkpoint: signed by {origin}, covers entries 0..{size}, verified"
            ),
            None => writeln!(out, "checkpoint: not checked (pass --checkpoint and --key)"),
        }
        .map_err(stdout_error)?;
    }
    Ok(0)
}

/// `log prove`: the inclusion proof of entry `seq` (C2SP `tlog-proof`).
pub fn log_prove(
    log: &Path,
    seq: u64,
    checkpoint: Option<&Path>,
    out: &mut dyn Write,
) -> Result<u8, Error> {
    let default = crate::decision_log::writer::checkpoint_path(log);
    let text = crate::decision_log::verify::prove(log, seq, checkpoint.unwrap_or(&default))?;
    out.write_all(text.as_bytes()).map_err(stdout_error)?;
    Ok(0)
}

/// `log consistency`: checkpoint `new`'s tree extends `old`'s.
pub fn log_consistency(
    log: &Path,
    old: &Path,
    new: &Path,
    key: &Path,
    out: &mut dyn Write,
) -> Result<u8, Error> {
    use crate::decision_log::verify;
    let verifier = verify::read_verifier(key)?;
    let (a, b, proof) = verify::consistency(log, old, new, &verifier)?;
    writeln!(
        out,
        "{} (size {b}) extends {} (size {a}): consistent, both signed by {}",
        new.display(),
        old.display(),
        verifier.name()
    )
    .map_err(stdout_error)?;
    for h in proof {
        writeln!(out, "{h}").map_err(stdout_error)?;
    }
    Ok(0)
}
