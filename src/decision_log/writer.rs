//! The decision log's writer ([§19](docs/guides/auditing.md#s19)): evaluations hand their lines to
//! a bounded queue and never wait on the disk, except for the lines they
//! must see written (FATAL decisions, or every line with `required`); one
//! thread assigns `seq`, appends, flushes, rotates, keeps the Merkle tree
//! and writes signed checkpoints. A failed write is cut back off the file,
//! so the lines on disk always form the tree. It never sees a payload.

use super::files::{log_files, next_rotation, repair, scan, MAX_LINE_BYTES};
use super::merkle::{leaf_hash, Frontier};
use super::note::{Checkpoint, NoteSigner};
use super::record::Record;
use super::LogError;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Most lines the writer takes off the queue before it flushes.
const BATCH: usize = 1024;
/// How long the writer lets lines gather after a small batch. While it
/// waits, handing it a line is a push onto the queue: no wake-up, no
/// system call per line. A line an answer waits for wakes it at once.
const GATHER: Duration = Duration::from_millis(2);

/// How the writer runs.
pub struct Settings {
    /// The active log file.
    pub path: PathBuf,
    /// Rotate before a file would pass this many bytes (0: never).
    pub max_bytes: u64,
    /// A checkpoint after this many new entries.
    pub checkpoint_every: u64,
    /// A checkpoint after this long with new entries.
    pub checkpoint_interval: Duration,
    /// Lines that may wait in the queue.
    pub queue: usize,
    /// Signs checkpoints; `None`: none are written.
    pub signer: Option<NoteSigner>,
    /// Called with a reason each time a line is lost (`queue_full`,
    /// `write`) or a checkpoint cannot be written (`checkpoint`).
    pub on_error: Arc<dyn Fn(&'static str) + Send + Sync>,
}

/// Where a checkpoint of the log at `path` is written.
pub fn checkpoint_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".checkpoint");
    PathBuf::from(s)
}

/// Told when a line is written (its `seq`) or lost.
type Ack = Option<oneshot::Sender<Result<u64, ()>>>;

enum Job {
    Line(Box<Record>, Ack),
    Close(std::sync::mpsc::Sender<()>),
}

/// The handle evaluations log through (cheap to share).
pub struct DecisionLog {
    tx: SyncSender<Job>,
    /// The writer thread, woken for a line an answer waits for.
    writer: std::thread::Thread,
    on_error: Arc<dyn Fn(&'static str) + Send + Sync>,
}

impl std::fmt::Debug for DecisionLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DecisionLog(..)")
    }
}

/// What became of a line handed to the log.
#[derive(Debug)]
pub enum Submitted {
    /// Queued; written in order, soon.
    Queued,
    /// Lost (the queue was full or the writer is gone); counted.
    Lost,
    /// Queued; the receiver says when it is written (its `seq`) or lost.
    Waiting(oneshot::Receiver<Result<u64, ()>>),
}

impl DecisionLog {
    /// Opens the log: reads every file (checking each line's `seq`), cuts a
    /// torn last line, rebuilds the tree and starts the writer thread.
    pub fn open(settings: Settings) -> Result<Self, LogError> {
        if let Some(dir) = settings.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| LogError::Io(format!("{}: cannot create: {e}", dir.display())))?;
        }
        let found = scan(&settings.path)?;
        if found.torn_tail > 0 {
            tracing::warn!(
                path = %settings.path.display(),
                bytes = found.torn_tail,
                "decision log: cut a torn last line (a write cut short by a crash)"
            );
            repair(&settings.path, found.torn_tail)?;
        }
        warn_if_behind_checkpoint(&settings.path, found.leaves.len() as u64);
        let mut tree = Frontier::new();
        for leaf in &found.leaves {
            tree.push(*leaf);
        }
        let file = open_append(&settings.path)?;
        let size = file
            .metadata()
            .map_err(|e| LogError::Io(format!("{}: {e}", settings.path.display())))?
            .len();
        let (tx, rx) = std::sync::mpsc::sync_channel(settings.queue.max(1));
        let on_error = Arc::clone(&settings.on_error);
        let mut w = Writer {
            // What an earlier run wrote after its last checkpoint gets one
            // at start-up.
            checkpointed: 0,
            tree,
            out: std::io::BufWriter::with_capacity(256 * 1024, file),
            size,
            last_checkpoint: Instant::now(),
            settings,
        };
        w.checkpoint_if(true);
        let handle = std::thread::Builder::new()
            .name("decision-log".into())
            .spawn(move || w.run(&rx))
            .map_err(|e| LogError::Io(format!("cannot start the decision log writer: {e}")))?;
        Ok(Self {
            tx,
            writer: handle.thread().clone(),
            on_error,
        })
    }

    /// Hands `record` to the writer. With `wait`, the answer says when it
    /// is written. Never blocks.
    pub fn submit(&self, record: Record, wait: bool) -> Submitted {
        let (ack, rx) = if wait {
            let (t, r) = oneshot::channel();
            (Some(t), Some(r))
        } else {
            (None, None)
        };
        match self.tx.try_send(Job::Line(Box::new(record), ack)) {
            Ok(()) => match rx {
                Some(rx) => {
                    self.writer.unpark();
                    Submitted::Waiting(rx)
                }
                None => Submitted::Queued,
            },
            Err(TrySendError::Full(_)) => {
                (self.on_error)("queue_full");
                Submitted::Lost
            }
            Err(TrySendError::Disconnected(_)) => {
                (self.on_error)("write");
                Submitted::Lost
            }
        }
    }

    /// Writes what is queued and a last checkpoint, and waits (at most
    /// `within`) for the writer to say so. For shutdown.
    pub fn close(&self, within: Duration) {
        let (t, r) = std::sync::mpsc::channel();
        if self.tx.send(Job::Close(t)).is_ok() {
            self.writer.unpark();
            let _ = r.recv_timeout(within);
        }
    }
}

/// Logs an error when the last checkpoint covers more entries than the
/// log holds: lines it signed were lost (a crash before the disk kept
/// them) or removed. The log goes on; the next checkpoint is smaller, and
/// `log consistency` against the kept one fails, as it should.
fn warn_if_behind_checkpoint(path: &Path, entries: u64) {
    let Ok(note) = std::fs::read_to_string(checkpoint_path(path)) else {
        return;
    };
    let Some(text) = note.rfind("\n\n").map(|i| &note[..=i]) else {
        return;
    };
    if let Ok(cp) = Checkpoint::parse(text) {
        if cp.size > entries {
            tracing::error!(
                path = %path.display(),
                checkpoint_size = cp.size,
                entries,
                "decision log: the last checkpoint covers more entries than the log holds: lines were lost or removed"
            );
        }
    }
}

fn open_append(path: &Path) -> Result<std::fs::File, LogError> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| LogError::Io(format!("{}: cannot open for append: {e}", path.display())))
}

struct Writer {
    settings: Settings,
    tree: Frontier,
    out: std::io::BufWriter<std::fs::File>,
    /// Bytes in the active file, written or buffered.
    size: u64,
    /// Tree size of the last checkpoint.
    checkpointed: u64,
    last_checkpoint: Instant,
}

impl Writer {
    fn run(&mut self, rx: &Receiver<Job>) {
        loop {
            let first = if self.tree.size() > self.checkpointed && self.settings.signer.is_some() {
                let left = self
                    .settings
                    .checkpoint_interval
                    .saturating_sub(self.last_checkpoint.elapsed());
                match rx.recv_timeout(left) {
                    Ok(job) => job,
                    Err(RecvTimeoutError::Timeout) => {
                        self.checkpoint_if(true);
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            } else {
                match rx.recv() {
                    Ok(job) => job,
                    Err(_) => break,
                }
            };
            let mut jobs = vec![first];
            while jobs.len() < BATCH {
                match rx.try_recv() {
                    Ok(job) => jobs.push(job),
                    Err(_) => break,
                }
            }
            let small = jobs.len() < BATCH;
            let mut closing = None;
            let mut lines = Vec::with_capacity(jobs.len());
            for job in jobs {
                match job {
                    Job::Line(record, ack) => lines.push((record, ack)),
                    Job::Close(done) => closing = Some(done),
                }
            }
            self.write_batch(lines);
            self.checkpoint_if(false);
            if let Some(done) = closing {
                self.checkpoint_if(true);
                let _ = done.send(());
                return;
            }
            if small {
                std::thread::park_timeout(GATHER);
            }
        }
        self.checkpoint_if(true);
    }

    /// Appends `lines` and flushes; on a failure, cuts the file back to
    /// where the batch began and restores the tree, and every line of the
    /// batch is lost (and counted).
    fn write_batch(&mut self, lines: Vec<(Box<Record>, Ack)>) {
        if lines.is_empty() {
            return;
        }
        let tree_before = self.tree.clone();
        let size_before = self.size;
        let mut acks = Vec::new();
        let mut result = Ok(());
        for (mut record, ack) in lines {
            record.seq = self.tree.size();
            let line = match serde_json::to_vec(&record) {
                // A line the log could not read back is never written.
                Ok(l) if l.len() < MAX_LINE_BYTES => l,
                _ => {
                    (self.settings.on_error)("write");
                    if let Some(a) = ack {
                        let _ = a.send(Err(()));
                    }
                    continue;
                }
            };
            if let Err(e) = self.rotate_for(line.len() as u64 + 1) {
                result = Err(e);
                acks.push((ack, record.seq));
                break;
            }
            if let Err(e) = self
                .out
                .write_all(&line)
                .and_then(|()| self.out.write_all(b"\n"))
            {
                result = Err(LogError::Io(format!("cannot write: {e}")));
                acks.push((ack, record.seq));
                break;
            }
            self.size += line.len() as u64 + 1;
            self.tree.push(leaf_hash(&line));
            acks.push((ack, record.seq));
        }
        if result.is_ok() {
            if let Err(e) = self.out.flush() {
                result = Err(LogError::Io(format!("cannot flush: {e}")));
            }
        }
        match result {
            Ok(()) => {
                for (ack, seq) in acks {
                    if let Some(a) = ack {
                        let _ = a.send(Ok(seq));
                    }
                }
            }
            Err(e) => {
                tracing::error!(path = %self.settings.path.display(), error = %e, lines = acks.len(), "decision log: lines lost");
                self.undo(size_before, tree_before);
                for (ack, _) in acks {
                    (self.settings.on_error)("write");
                    if let Some(a) = ack {
                        let _ = a.send(Err(()));
                    }
                }
            }
        }
    }

    /// Puts the active file and the tree back as they were before a failed
    /// batch (a rotation in the batch is not undone: its lines were whole).
    fn undo(&mut self, size: u64, tree: Frontier) {
        let path = self.settings.path.clone();
        // The buffer may hold part of the failed batch: drop it with the
        // writer, and reopen the file.
        let cut = open_append(&path).and_then(|f| {
            let len = f.metadata().map_err(|e| LogError::Io(e.to_string()))?.len();
            let keep = len.min(size);
            f.set_len(keep)
                .map_err(|e| LogError::Io(format!("{}: cannot cut back: {e}", path.display())))?;
            Ok((f, keep))
        });
        match cut {
            Ok((f, keep)) => {
                let old = std::mem::replace(
                    &mut self.out,
                    std::io::BufWriter::with_capacity(256 * 1024, f),
                );
                // Its buffered bytes are the failed batch's: never written.
                let _ = old.into_parts();
                self.size = keep;
                self.tree = tree;
            }
            Err(e) => {
                tracing::error!(error = %e, "decision log: cannot restore the file after a failed write");
                self.tree = tree;
            }
        }
    }

    /// Rotates the active file when `more` bytes would take it past
    /// `max_bytes` (a file always takes at least one line).
    fn rotate_for(&mut self, more: u64) -> Result<(), LogError> {
        let max = self.settings.max_bytes;
        if max == 0 || self.size == 0 || self.size + more <= max {
            return Ok(());
        }
        self.out
            .flush()
            .map_err(|e| LogError::Io(format!("cannot flush: {e}")))?;
        let path = self.settings.path.clone();
        let n = next_rotation(&path)?;
        let mut rotated = path.as_os_str().to_owned();
        rotated.push(format!(".{n}"));
        std::fs::rename(&path, &rotated)
            .map_err(|e| LogError::Io(format!("{}: cannot rotate: {e}", path.display())))?;
        self.out = std::io::BufWriter::with_capacity(256 * 1024, open_append(&path)?);
        self.size = 0;
        Ok(())
    }

    /// Writes a checkpoint when there are new entries and `now`, or
    /// `checkpoint_every` new entries, or the interval has passed.
    fn checkpoint_if(&mut self, now: bool) {
        let Some(signer) = &self.settings.signer else {
            return;
        };
        let new = self.tree.size().saturating_sub(self.checkpointed);
        let due = new >= self.settings.checkpoint_every
            || self.last_checkpoint.elapsed() >= self.settings.checkpoint_interval;
        // A log always has a checkpoint, even an empty one.
        let missing = !checkpoint_path(&self.settings.path).exists();
        if (new == 0 || !(now || due)) && !missing {
            return;
        }
        let cp = Checkpoint {
            origin: signer.name().to_string(),
            size: self.tree.size(),
            root: self.tree.root(),
        };
        let written = signer
            .sign(&cp.text())
            .map_err(|e| LogError::Io(e.to_string()))
            .and_then(|note| {
                crate::atomic::write_atomic(&checkpoint_path(&self.settings.path), note.as_bytes())
                    .map_err(|e| LogError::Io(e.to_string()))
            });
        match written {
            Ok(()) => {
                self.checkpointed = cp.size;
                self.last_checkpoint = Instant::now();
            }
            Err(e) => {
                (self.settings.on_error)("checkpoint");
                tracing::error!(path = %self.settings.path.display(), error = %e, "decision log: cannot write a checkpoint");
            }
        }
    }
}

/// The number of lines in the log at `path` (for status and tests).
pub fn entries(path: &Path) -> Result<u64, LogError> {
    Ok(scan(path)?.leaves.len() as u64)
}

/// Whether the log at `path` has any file.
pub fn exists(path: &Path) -> bool {
    log_files(path).is_ok_and(|f| !f.is_empty())
}
