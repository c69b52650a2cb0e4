//! Hot reload ([§9.3](docs/serve.md#s9-3)): one reload at a time builds a whole generation on
//! a thread of its own, within [`RELOAD_DEADLINE`], and swaps it in only if
//! every check passed; the
//! triggers (directory watcher with debounce, periodic rescan, `SIGHUP`) call
//! it. Never touches HTTP handling; reads files only through `generation`.

use super::generation::{describe, Generation, Snapshot};
use super::metrics::ReloadLabel;
use super::state::AppState;
pub use super::state::{ReloadOutcome, Trigger};
use crate::license::format_time;
use crate::{Error, PackError};
use notify::event::{AccessKind, AccessMode, ModifyKind};
use notify::{EventKind, RecursiveMode, Watcher};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use time::OffsetDateTime;

/// How long one reload may read and check the deployment's files ([§9.1](docs/configuration.md#s9-1)
/// Files): past it the reload fails and the serving generation stays. A
/// load of many large packs takes seconds; a read that hangs (a stale
/// network mount) never ends.
pub const RELOAD_DEADLINE: Duration = Duration::from_secs(30);

/// Runs `work` on a thread of its own and waits for it at most `deadline`.
/// A read that never returns then holds that thread only: not a worker of
/// the async runtime, not one of its blocking threads (evaluations need
/// those), and nothing shutdown waits for. `busy` is set while the thread
/// runs: a previous reader still stuck past its deadline fails the next
/// attempt at once rather than stacking another thread on the same files.
pub(crate) async fn bounded<T: Send + 'static>(
    what: &str,
    busy: &Arc<AtomicBool>,
    deadline: Duration,
    work: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    if busy.swap(true, Ordering::AcqRel) {
        return Err(Error::Io(
            format!("{what} is not started: the previous one is still reading the deployment's files, past its deadline"),
            None,
        ));
    }
    /// Clears `busy` when the thread ends, even by a panic.
    struct Done(Arc<AtomicBool>);
    impl Drop for Done {
        fn drop(&mut self) {
            self.0.store(false, Ordering::Release);
        }
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    let done = Done(Arc::clone(busy));
    let spawned = std::thread::Builder::new()
        .name("helixor-reload".into())
        .spawn(move || {
            let result = work();
            // Cleared before the outcome is told: the next reload may start
            // as soon as it is.
            drop(done);
            let _ = tx.send(result);
        });
    if let Err(e) = spawned {
        busy.store(false, Ordering::Release);
        return Err(Error::io("cannot start the reload thread", e));
    }
    match tokio::time::timeout(deadline, rx).await {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => Err(Error::Io(
            format!("{what} ended without an outcome (a bug)"),
            None,
        )),
        Err(_) => Err(Error::Io(
            format!(
                "{what} did not finish within {} ms: reading the deployment's files is stuck",
                deadline.as_millis()
            ),
            None,
        )),
    }
}

/// Reloads now, waiting for a reload in progress to end first ([§9.3](docs/serve.md#s9-3)).
pub async fn reload(state: &Arc<AppState>, trigger: Trigger) -> ReloadOutcome {
    let _one_at_a_time = state.reload_lock.lock().await;
    let started = Instant::now();
    let current = state.current();
    let previous = current.as_ref().map(|g| g.fingerprint.clone());
    let next = current.as_ref().map_or(1, |g| g.number.saturating_add(1));
    let floor = current
        .as_ref()
        .map(|g| g.sequences.clone())
        .unwrap_or_default();
    drop(current);
    let sources = state.sources.clone();
    let built = bounded(
        "the reload",
        &state.reload_busy,
        RELOAD_DEADLINE,
        move || {
            let snapshot = Snapshot::read(&sources);
            if previous.is_some() && snapshot.fingerprint() == previous {
                return Ok(None);
            }
            Generation::build(snapshot, next, OffsetDateTime::now_utc(), &floor).map(Some)
        },
    )
    .await;
    let (result, error, message) = match built {
        Ok(Some(generation)) => {
            state.install(generation);
            (ReloadLabel::Success, None, None)
        }
        Ok(None) => (ReloadLabel::Unchanged, None, None),
        Err(e) => {
            if let Error::Pack(PackError::Signature(reason, _)) = &e {
                state.metrics.record_signature_failure(*reason);
            }
            let (name, message) = describe(&e);
            (ReloadLabel::Failure, Some(name), Some(message))
        }
    };
    let now = OffsetDateTime::now_utc();
    let outcome = ReloadOutcome {
        at: now,
        result,
        generation: state.current().map_or(0, |g| g.number),
        error,
        message,
        trigger,
        duration: started.elapsed(),
    };
    // Logged before it is published, so whoever sees the outcome in
    // /v1/status or /metrics also finds it in the logs.
    log_outcome(&outcome);
    state
        .metrics
        .record_reload(result, true, now.unix_timestamp() as f64);
    state.set_last_reload(outcome.clone());
    outcome
}

fn log_outcome(o: &ReloadOutcome) {
    let duration_ms = o.duration.as_secs_f64() * 1e3;
    match o.result {
        ReloadLabel::Success => tracing::info!(
            result = "success",
            generation = o.generation,
            trigger = o.trigger.as_str(),
            duration_ms,
            "reload: generation {} is serving",
            o.generation
        ),
        ReloadLabel::Unchanged if matches!(o.trigger, Trigger::Watch | Trigger::Rescan) => {
            tracing::debug!(
                result = "unchanged",
                generation = o.generation,
                trigger = o.trigger.as_str(),
                duration_ms,
                "reload: deployment unchanged"
            )
        }
        ReloadLabel::Unchanged => tracing::info!(
            result = "unchanged",
            generation = o.generation,
            trigger = o.trigger.as_str(),
            duration_ms,
            "reload: deployment unchanged"
        ),
        ReloadLabel::Failure => tracing::warn!(
            result = "failure",
            generation = o.generation,
            trigger = o.trigger.as_str(),
            duration_ms,
            error = o.error.unwrap_or_default(),
            detail = o.message.as_deref().unwrap_or_default(),
            "reload failed; generation {} keeps serving",
            o.generation
        ),
    }
}

/// The JSON of an outcome as `/v1/status` shows it.
pub fn outcome_json(o: &ReloadOutcome) -> serde_json::Value {
    serde_json::json!({
        "at": format_time(o.at),
        "result": o.result.as_str(),
        "generation": o.generation,
        "error": o.error,
        "message": o.message,
        "trigger": o.trigger.as_str(),
        "duration_ms": o.duration.as_secs_f64() * 1e3,
    })
}

/// Whether a file-system event may change the deployment: anything but
/// reads and metadata changes (our own reads of the watched files open them
/// and may update their access time: they must not trigger reloads; a
/// permission change is picked up by the periodic rescan).
fn is_change(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) | EventKind::Modify(ModifyKind::Metadata(_)) => false,
        _ => true,
    }
}

/// The watched directories and where each led when it was watched.
struct Armed {
    dirs: Vec<PathBuf>,
    watched: HashMap<PathBuf, PathBuf>,
}

impl Armed {
    /// (Re-)watches every directory whose target changed or that was not
    /// watched (it may not have existed): a Kubernetes `..data` swap moves
    /// the packs directory to a new timestamped directory.
    fn arm(&mut self, watcher: &mut notify::RecommendedWatcher) {
        for dir in &self.dirs {
            let now = std::fs::canonicalize(dir).ok();
            let before = self.watched.get(dir).cloned();
            if now.is_some() && now == before {
                continue;
            }
            if before.is_some() {
                let _ = watcher.unwatch(dir);
                self.watched.remove(dir);
            }
            let Some(target) = now else { continue };
            match watcher.watch(dir, RecursiveMode::NonRecursive) {
                Ok(()) => {
                    tracing::debug!(dir = %dir.display(), "watching");
                    self.watched.insert(dir.clone(), target);
                }
                Err(e) => tracing::warn!(
                    dir = %dir.display(),
                    error = %e,
                    "cannot watch directory; the periodic rescan still reloads"
                ),
            }
        }
    }
}

/// Starts the directory watcher and its debounce loop. Returns false if the
/// platform watcher cannot be created (the rescan still runs).
pub fn spawn_watcher(state: &Arc<AppState>) -> bool {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(1);
    let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let relevant = match &res {
            Ok(event) => is_change(&event.kind),
            // Lost events (queue overflow) may hide a change.
            Err(_) => true,
        };
        if relevant {
            // A full channel already holds a pending wake-up: coalesced.
            let _ = tx.try_send(());
        }
    });
    let mut watcher = match watcher {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!(error = %e, "cannot create a file watcher; the periodic rescan still reloads");
            return false;
        }
    };
    let mut armed = Armed {
        dirs: state.sources.watch_dirs(),
        watched: HashMap::new(),
    };
    armed.arm(&mut watcher);
    let debounce = Duration::from_millis(state.config.reload.debounce_ms);
    let max_wait =
        Duration::from_millis(state.config.reload.debounce_ms.saturating_mul(5).max(200));
    let state = Arc::clone(state);
    tokio::spawn(async move {
        while rx.recv().await.is_some() {
            let first = Instant::now();
            loop {
                match tokio::time::timeout(debounce, rx.recv()).await {
                    Ok(Some(())) if first.elapsed() < max_wait => continue,
                    Ok(None) => return,
                    _ => break,
                }
            }
            reload(&state, Trigger::Watch).await;
            armed.arm(&mut watcher);
        }
    });
    true
}

/// Starts the periodic rescan (none when `rescan_interval_s` is 0).
pub fn spawn_rescan(state: &Arc<AppState>) {
    let secs = state.config.reload.rescan_interval_s;
    if secs == 0 {
        return;
    }
    let state = Arc::clone(state);
    tokio::spawn(async move {
        let period = Duration::from_secs(secs);
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            reload(&state, Trigger::Rescan).await;
        }
    });
}

/// Reloads at every `SIGHUP` of `signals` (installed before listening, so
/// an early `SIGHUP` never kills the process).
pub fn spawn_sighup(state: &Arc<AppState>, mut signals: tokio::signal::unix::Signal) {
    let state = Arc::clone(state);
    tokio::spawn(async move {
        while signals.recv().await.is_some() {
            reload(&state, Trigger::Signal).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Named;

    /// A read that never returns fails its reload at the deadline, and the
    /// next attempt at once while it is still stuck; once it returns,
    /// reloads run again.
    #[tokio::test]
    async fn a_stuck_read_fails_at_the_deadline_and_blocks_nothing_else() {
        let busy = Arc::new(AtomicBool::new(false));
        let (release, stuck) = std::sync::mpsc::channel::<()>();
        let started = Instant::now();
        let e = bounded("the reload", &busy, Duration::from_millis(200), move || {
            let _ = stuck.recv();
            Ok(())
        })
        .await
        .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(e.name(), crate::ErrorName::IoError);
        assert_eq!(
            e.to_string(),
            "the reload did not finish within 200 ms: reading the deployment's files is stuck"
        );
        let e = bounded("the reload", &busy, Duration::from_secs(5), || Ok(()))
            .await
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the reload is not started: the previous one is still reading the deployment's files, past its deadline"
        );
        release.send(()).unwrap();
        for _ in 0..200 {
            if !busy.load(Ordering::Acquire) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let n = bounded("the reload", &busy, Duration::from_secs(5), || Ok(7))
            .await
            .unwrap();
        assert_eq!(n, 7);
    }
}
