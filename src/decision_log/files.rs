//! The decision log's files ([§19](docs/guides/auditing.md#s19)) as one sequence of lines: the
//! rotated files `<path>.1`, `<path>.2`, ... oldest first, then `<path>`;
//! each line a leaf of one Merkle tree. Reads, checks and (at start-up)
//! repairs a torn last line; never prints a line's content in an error
//! beyond its position.

use super::merkle::{leaf_hash, Hash};
use super::record::Record;
use super::LogError;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// Longest line the log holds; a longer one is a corrupt log.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// The files of the log at `path`, oldest first (rotated files by their
/// number, then the active file when it exists).
pub fn log_files(path: &Path) -> Result<Vec<PathBuf>, LogError> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or_else(|| Path::new("."));
    let Some(base) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return Err(LogError::Io(format!("{}: not a file path", path.display())));
    };
    let mut rotated: Vec<(u64, PathBuf)> = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(LogError::Io(format!("{}: cannot list: {e}", dir.display()))),
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(n) = name
            .strip_prefix(&base)
            .and_then(|r| r.strip_prefix('.'))
            .and_then(|r| r.parse::<u64>().ok())
        else {
            continue;
        };
        rotated.push((n, entry.path()));
    }
    rotated.sort();
    let mut files: Vec<PathBuf> = rotated.into_iter().map(|(_, p)| p).collect();
    if path.exists() {
        files.push(path.to_path_buf());
    }
    Ok(files)
}

/// The next free rotation number of the log at `path`.
pub fn next_rotation(path: &Path) -> Result<u64, LogError> {
    let files = log_files(path)?;
    let mut max = 0;
    for f in &files {
        if let Some(n) = f
            .extension()
            .and_then(|e| e.to_str())
            .and_then(|e| e.parse::<u64>().ok())
        {
            max = max.max(n);
        }
    }
    Ok(max + 1)
}

/// What reading a whole log found.
#[derive(Debug, Default)]
pub struct Scan {
    /// Every line's leaf hash, in order.
    pub leaves: Vec<Hash>,
    /// Bytes of a torn last line (no newline) at the end of the last file.
    pub torn_tail: u64,
}

/// Reads every line of the log at `path`, checking that each is a
/// [`Record`] whose `seq` is its position. A last line without its newline
/// (a crash mid-write) is not a leaf: [`Scan::torn_tail`] says how long it
/// is; anywhere else it is an error.
pub fn scan(path: &Path) -> Result<Scan, LogError> {
    let files = log_files(path)?;
    let mut out = Scan::default();
    let last = files.len().saturating_sub(1);
    for (i, file) in files.iter().enumerate() {
        let name = file.display().to_string();
        let f = std::fs::File::open(file)
            .map_err(|e| LogError::Io(format!("{name}: cannot read: {e}")))?;
        let mut reader = BufReader::new(f);
        let mut buf = Vec::new();
        let mut lineno = 0u64;
        loop {
            buf.clear();
            let n = (&mut reader)
                .take(MAX_LINE_BYTES as u64 + 1)
                .read_until(b'\n', &mut buf)
                .map_err(|e| LogError::Io(format!("{name}: cannot read: {e}")))?;
            if n == 0 {
                break;
            }
            lineno += 1;
            if buf.last() != Some(&b'\n') {
                if buf.len() > MAX_LINE_BYTES {
                    return Err(LogError::Corrupt(format!(
                        "{name} line {lineno}: longer than {MAX_LINE_BYTES} bytes"
                    )));
                }
                if i == last {
                    out.torn_tail = buf.len() as u64;
                    break;
                }
                return Err(LogError::Corrupt(format!(
                    "{name} line {lineno}: no newline at the end of a rotated file"
                )));
            }
            let line = &buf[..buf.len() - 1];
            let expected = out.leaves.len() as u64;
            check_line(line, expected).map_err(|why| {
                LogError::Corrupt(format!("{name} line {lineno} (entry {expected}): {why}"))
            })?;
            out.leaves.push(leaf_hash(line));
        }
    }
    Ok(out)
}

/// Whether `line` is a record with `seq` `expected`; else what is wrong.
fn check_line(line: &[u8], expected: u64) -> Result<(), String> {
    let record: Record = serde_json::from_slice(line)
        .map_err(|e| format!("not a decision record ({})", e.classify_name()))?;
    if record.seq != expected {
        return Err(format!("seq {} where {expected} was expected", record.seq));
    }
    Ok(())
}

/// serde_json's error category as a word (never the text it quotes).
trait ClassifyName {
    fn classify_name(&self) -> &'static str;
}

impl ClassifyName for serde_json::Error {
    fn classify_name(&self) -> &'static str {
        match self.classify() {
            serde_json::error::Category::Io => "unreadable",
            serde_json::error::Category::Syntax => "not JSON",
            serde_json::error::Category::Data => "wrong fields or types",
            serde_json::error::Category::Eof => "cut short",
        }
    }
}

/// Cuts a torn last line off the active file at `path` (`torn` bytes).
pub fn repair(path: &Path, torn: u64) -> Result<(), LogError> {
    let name = path.display();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| LogError::Io(format!("{name}: cannot open to repair: {e}")))?;
    let len = f
        .metadata()
        .map_err(|e| LogError::Io(format!("{name}: {e}")))?
        .len();
    f.set_len(len.saturating_sub(torn))
        .map_err(|e| LogError::Io(format!("{name}: cannot cut the torn last line: {e}")))?;
    f.sync_all()
        .map_err(|e| LogError::Io(format!("{name}: {e}")))
}
