//! The state serve mode shares ([§9](docs/serve.md#s9)): the serving generation behind an
//! `ArcSwap`, metrics, reload bookkeeping, the draining flag, the
//! concurrency slots, the memory budgets of bodies and streams. Handlers,
//! middleware and reload triggers read it; it runs nothing itself and
//! imports no handler.

use crate::server::api::stream::registry::Streams;
use crate::server::config::Config;
use crate::server::generation::{Generation, Sources};
use crate::server::http::BodyLimit;
use crate::server::metrics::{Metrics, ReloadLabel};
use crate::Error;
use arc_swap::ArcSwapOption;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use time::OffsetDateTime;

/// The shared state as handlers and middleware hold it.
pub(crate) type AppStateRef = Arc<AppState>;

/// What started a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// File-system events in a watched directory, after the debounce.
    Watch,
    /// The periodic digest rescan.
    Rescan,
    /// `SIGHUP`.
    Signal,
    /// `POST /admin/reload`.
    Admin,
}

impl Trigger {
    /// `watch`, `rescan`, `sighup` or `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Watch => "watch",
            Self::Rescan => "rescan",
            Self::Signal => "sighup",
            Self::Admin => "admin",
        }
    }
}

/// The outcome of one reload attempt (`last_reload` of `/v1/status`).
#[derive(Debug, Clone, PartialEq)]
pub struct ReloadOutcome {
    /// When the attempt ended.
    pub at: OffsetDateTime,
    /// `success`, `unchanged` or `failure`.
    pub result: ReloadLabel,
    /// The generation serving after the attempt (0 if none).
    pub generation: u64,
    /// The error name of a failure.
    pub error: Option<&'static str>,
    /// The error message of a failure (names files, never keys or payloads).
    pub message: Option<String>,
    /// What started it.
    pub trigger: Trigger,
    /// How long it took.
    pub duration: Duration,
}

/// Everything the handlers and the reload triggers share.
#[derive(Debug)]
pub struct AppState {
    /// The configuration the server started with.
    pub config: Config,
    /// Where the deployment's files are.
    pub sources: Sources,
    /// The serving generation; a request loads it once.
    pub(crate) current: ArcSwapOption<Generation>,
    /// The metrics registry.
    pub metrics: Metrics,
    /// Held by the reload in progress (one at a time).
    pub(crate) reload_lock: tokio::sync::Mutex<()>,
    last_reload: Mutex<Option<ReloadOutcome>>,
    draining: AtomicBool,
    /// Slots of `limits.max_concurrency`.
    pub(crate) slots: Arc<tokio::sync::Semaphore>,
    /// Set while a reload's thread reads the deployment (it may outlive its
    /// deadline: see [`reload::bounded`]).
    pub(crate) reload_busy: Arc<AtomicBool>,
    /// Memory for large request bodies, in KiB ([`body_budget_kib`]).
    pub(crate) body_budget: Arc<tokio::sync::Semaphore>,
    /// The streams in flight and their memory (`POST /v1/evaluate/stream`).
    pub(crate) streams: Streams,
    /// The decision log ([§19](docs/guides/auditing.md#s19)), when configured.
    pub(crate) decision_log: Option<crate::server::audit::ServedLog>,
}

/// Large request bodies held in memory at once, at the largest allowed size
/// (16 MiB at the default limit). Enough to keep the few large evaluations
/// that run at once busy; more only grows what the allocator keeps after a
/// flood (64: 340 MB resident after 400 requests of 1 MiB, 16: 115 MB).
pub const BODY_BUDGET_BODIES: usize = 16;

/// The memory large request bodies may take at once, in KiB: enough for
/// [`BODY_BUDGET_BODIES`] bodies of `max_body_bytes` (a body past it waits,
/// unread, for the others' requests to end).
fn body_budget_kib(max_body_bytes: usize) -> usize {
    // Counted as reservations are (whole KiB a body), so that exactly that
    // many of the largest bodies fit.
    max_body_bytes
        .div_ceil(1024)
        .saturating_mul(BODY_BUDGET_BODIES)
        .clamp(1, 1 << 29)
}

impl AppState {
    /// The state for `config`, serving `generation` if given (start-up:
    /// generation 1; `None` answers 503 until a reload succeeds).
    pub fn new(config: Config, generation: Option<Generation>) -> Result<Arc<Self>, Error> {
        let metrics = Metrics::new().map_err(|e| Error::io("cannot create the metrics", e))?;
        let max_body_bytes = config.limits.max_body_bytes;
        let decision_log = match &config.decision_log {
            Some(cfg) => Some(crate::server::audit::ServedLog::open(cfg, &metrics)?),
            None => None,
        };
        let state = Arc::new(Self {
            sources: Sources::from_config(&config),
            slots: Arc::new(tokio::sync::Semaphore::new(config.limits.max_concurrency)),
            config,
            current: ArcSwapOption::empty(),
            metrics,
            reload_lock: tokio::sync::Mutex::new(()),
            last_reload: Mutex::new(None),
            draining: AtomicBool::new(false),
            reload_busy: Arc::new(AtomicBool::new(false)),
            body_budget: Arc::new(tokio::sync::Semaphore::new(body_budget_kib(max_body_bytes))),
            streams: Streams::default(),
            decision_log,
        });
        if let Some(g) = generation {
            state.install(g);
            state.metrics.record_reload(
                ReloadLabel::Success,
                false,
                OffsetDateTime::now_utc().unix_timestamp() as f64,
            );
        }
        Ok(state)
    }

    /// The serving generation, if any.
    pub fn current(&self) -> Option<Arc<Generation>> {
        self.current.load_full()
    }

    /// Swaps `generation` in; requests in flight keep the one they loaded.
    pub(crate) fn install(&self, generation: Generation) {
        self.metrics.set_generation(
            generation.number,
            generation.packs.len(),
            generation.not_after_unix,
        );
        if let Some(d) = &self.config.default_pack {
            if !generation.packs.contains_key(d) {
                tracing::warn!(
                    default_pack = %d,
                    generation = generation.number,
                    "default_pack is not loaded: requests naming no pack get 404"
                );
            }
        }
        self.current.store(Some(Arc::new(generation)));
    }

    /// The last reload attempt, if any.
    pub fn last_reload(&self) -> Option<ReloadOutcome> {
        self.last_reload
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set_last_reload(&self, outcome: ReloadOutcome) {
        *self
            .last_reload
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(outcome);
    }

    /// Logs `decision` when the decision log is on; what the answer must
    /// wait for.
    pub(crate) fn log_decision(
        &self,
        decision: &crate::engine::Decision<'_>,
        at: &crate::server::audit::At<'_>,
        payload: &[u8],
    ) -> crate::server::audit::Pending {
        match &self.decision_log {
            Some(log) => log.record(&self.metrics, decision, at, log.hmac(payload), true),
            None => crate::server::audit::Pending::default(),
        }
    }

    /// Hex HMAC of `payload` when the decision log has a key (for a stream,
    /// whose decision comes after its text is gone).
    pub(crate) fn payload_hmac(&self, payload: &[u8]) -> Option<String> {
        self.decision_log.as_ref().and_then(|l| l.hmac(payload))
    }

    /// Logs a decision whose answer has already left (a stream's): written
    /// in order, never waited for.
    pub(crate) fn log_decision_after(
        &self,
        decision: &crate::engine::Decision<'_>,
        at: &crate::server::audit::At<'_>,
        payload_hmac: Option<String>,
    ) {
        if let Some(log) = &self.decision_log {
            log.record(&self.metrics, decision, at, payload_hmac, false);
        }
    }

    /// Writes the decision log's queued lines and a last checkpoint.
    pub fn close_decision_log(&self) {
        if let Some(log) = &self.decision_log {
            log.close();
        }
    }

    /// Starts draining: `/readyz` answers 503 from now on.
    pub fn begin_drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Whether the server is draining.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }
}

impl BodyLimit for AppStateRef {
    fn max_body_bytes(&self) -> usize {
        self.config.limits.max_body_bytes
    }
}
