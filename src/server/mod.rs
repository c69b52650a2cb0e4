//! Serve mode (SPEC §9): `helixor-pack serve` as a library. This module holds
//! the shared state (the serving generation behind an `ArcSwap`, metrics,
//! reload bookkeeping, draining flag) and runs the server: start-up load,
//! listener, reload triggers, expiry warnings, graceful shutdown. It does not
//! parse command-line flags (the binary does) and never logs payloads or keys.
//!
//! - [`config`]: the YAML file, `HELIXOR_*` variables and flags;
//! - [`generation`]: reading a deployment and building a generation;
//! - [`reload`](mod@reload): one-at-a-time reloads and their triggers;
//! - [`routes`]: the HTTP API and its middleware;
//! - [`metrics`]: the Prometheus registry;
//! - [`auth`]: bearer tokens;
//! - `litellm`: LiteLLM's generic guardrail API (SPEC §12.1);
//! - `envoy`: Envoy's external authorization, HTTP service mode (SPEC §12.2);
//! - [`ext_proc`]: Envoy's external processing over gRPC (SPEC §12.3);
//! - `gateway`: what the gateway routes share: judging every string of a
//!   body (SPEC §12.4), the deciding decision, the refusal body;
//! - [`listener`]: the accept loop: connection cap, header-read and idle timeouts;
//! - [`healthcheck`]: the `helixor-pack healthcheck` probe client.

pub mod auth;
pub mod config;
mod envoy;
pub mod ext_proc;
pub(crate) mod gateway;
pub mod generation;
pub mod healthcheck;
pub mod listener;
mod litellm;
pub mod metrics;
pub mod reload;
pub mod routes;
mod stream;

pub use config::{Config, LogFormat, ServeOptions};
pub use generation::{Generation, Sources};
pub use reload::{reload, ReloadOutcome, Trigger};
pub use routes::{router, Route, ROUTES};

use crate::license::format_time;
use crate::Error;
use arc_swap::ArcSwapOption;
use metrics::{Metrics, ReloadLabel};
use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use time::OffsetDateTime;
use tokio::signal::unix::{signal, SignalKind};

/// Licenses closer than this to `not_after` are warned about daily (§9.6).
pub const EXPIRY_WARNING: Duration = Duration::from_secs(14 * 24 * 3600);

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
    pub(crate) streams: stream::Streams,
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
            streams: stream::Streams::default(),
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

    /// Starts draining: `/readyz` answers 503 from now on.
    pub fn begin_drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Whether the server is draining.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }
}

/// Installs the `tracing` subscriber of `log` (stderr; a second call is a no-op).
pub fn init_logging(log: &config::LogConfig) {
    let filter = tracing_subscriber::EnvFilter::try_new(&log.level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    let _ = match log.format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .try_init(),
        LogFormat::Text => builder.with_ansi(false).try_init(),
    };
}

/// `helixor-pack serve`: loads the configuration, then generation 1, then
/// listens until `SIGTERM`/`SIGINT`. Start-up failures return the error
/// (before the listener opens); a clean shutdown returns exit code 0.
pub fn serve(opts: &ServeOptions) -> Result<u8, Error> {
    let config = config::load(opts, &|k| std::env::var(k).ok())?;
    init_logging(&config.log);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("cannot start the async runtime", e))?;
    let result = runtime.block_on(run(config));
    // Whatever still runs (an evaluation on a blocking thread, a reload
    // stuck on a file) must not hold the exit: `run` has already given
    // requests their grace period (SPEC §9.7).
    runtime.shutdown_background();
    result
}

fn io(what: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::io(what, e)
}

/// Runs the server with a resolved configuration (inside a tokio runtime).
pub async fn run(config: Config) -> Result<u8, Error> {
    let sources = Sources::from_config(&config);
    let evasion = config.normalize == crate::engine::Normalize::Evasion;
    let generation = reload::bounded(
        "the start-up load",
        &Arc::new(AtomicBool::new(false)),
        reload::RELOAD_DEADLINE,
        move || {
            if evasion {
                // The evasion view's table, built before the first request.
                crate::engine::warm_normalize();
            }
            Generation::load(&sources, 1)
        },
    )
    .await?;
    // Signals first: a SIGHUP or SIGTERM from now on is handled, not fatal.
    let hup = signal(SignalKind::hangup()).map_err(io("cannot handle SIGHUP"))?;
    let term = signal(SignalKind::terminate()).map_err(io("cannot handle SIGTERM"))?;
    let int = signal(SignalKind::interrupt()).map_err(io("cannot handle SIGINT"))?;
    let listen = config.listen;
    let state = AppState::new(config, Some(generation))?;
    log_generation_loaded(&state);
    spawn_expiry_monitor(&state);

    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| Error::io(format_args!("cannot listen on {listen}"), e))?;
    let local: SocketAddr = listener
        .local_addr()
        .map_err(io("cannot read the bound address"))?;
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let ext_proc = match state.config.ext_proc_listen {
        Some(addr) => {
            let mut rx = stop_rx.clone();
            let stop = async move {
                while !*rx.borrow() {
                    if rx.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
            };
            let (bound, task) = ext_proc::spawn(Arc::clone(&state), addr, stop).await?;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "ext_proc listening on {bound}");
            let _ = out.flush();
            tracing::info!(address = %bound, "ext_proc listening");
            Some(task)
        }
        None => None,
    };
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "listening on {local}");
        let _ = out.flush();
    }
    tracing::info!(address = %local, version = crate::VERSION, "listening");

    if state.config.reload.watch {
        reload::spawn_watcher(&state);
    }
    reload::spawn_rescan(&state);
    reload::spawn_sighup(&state, hup);

    let shutdown_state = Arc::clone(&state);
    let shutdown = async move {
        let (mut term, mut int) = (term, int);
        let which = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        shutdown_state.begin_drain();
        let drain = shutdown_state.config.shutdown.drain_delay_ms;
        tracing::info!(
            signal = which,
            drain_delay_ms = drain,
            "shutting down: draining"
        );
        tokio::time::sleep(Duration::from_millis(drain)).await;
        tracing::info!(
            grace_ms = shutdown_state.config.shutdown.grace_ms,
            "listener closed; finishing requests in flight"
        );
        let _ = stop_tx.send(true);
    };
    let grace = Duration::from_millis(state.config.shutdown.grace_ms);
    let app = router(Arc::clone(&state));
    let limits = &state.config.limits;
    let conn_limits = listener::ConnLimits {
        max_connections: limits.max_connections,
        header_read_timeout: Duration::from_millis(limits.header_read_timeout_ms),
        idle_timeout: Duration::from_millis(limits.idle_timeout_ms),
        write_timeout: Duration::from_millis(limits.write_timeout_ms),
    };
    let server = async move {
        listener::serve(listener, app, conn_limits, shutdown).await;
        Ok::<(), std::io::Error>(())
    };
    let grace_over = async move {
        while !*stop_rx.borrow() {
            if stop_rx.changed().await.is_err() {
                // The sender is gone without a stop: wait for the server.
                std::future::pending::<()>().await;
            }
        }
        tokio::time::sleep(grace).await;
    };
    let ext_proc_done = async move {
        if let Some(task) = ext_proc {
            let _ = task.await;
        }
    };
    tokio::select! {
        r = async { tokio::join!(server, ext_proc_done).0 } => r.map_err(io("the server failed"))?,
        () = grace_over => tracing::warn!("grace period over: requests still in flight are dropped"),
    }
    tracing::info!("stopped");
    Ok(0)
}

fn log_generation_loaded(state: &AppState) {
    if let Some(g) = state.current() {
        tracing::info!(
            generation = g.number,
            license_id = %g.license.license_id,
            not_after = %format_time(g.license.not_after),
            packs = %g.packs.keys().cloned().collect::<Vec<_>>().join(","),
            "generation 1 loaded"
        );
    }
}

/// What the expiry monitor has already said, so each warning is logged
/// once per generation (and daily), not on every wake-up.
#[derive(Default)]
struct ExpiryMonitor {
    warned: Option<(u64, tokio::time::Instant)>,
    expired_logged: Option<u64>,
}

impl ExpiryMonitor {
    /// Logs what is due for the serving license and returns how long to
    /// sleep before the next check.
    fn check(&mut self, state: &AppState) -> Duration {
        let mut sleep_for = Duration::from_secs(3600);
        let Some(g) = state.current() else {
            return sleep_for;
        };
        let left = g.license.seconds_left(OffsetDateTime::now_utc());
        if left == 0 {
            if self.expired_logged != Some(g.number) {
                tracing::error!(
                    license_id = %g.license.license_id,
                    not_after = %format_time(g.license.not_after),
                    generation = g.number,
                    "the license has expired: evaluations answer 503 LicenseExpiredError until a renewed license and its packs are deployed"
                );
                self.expired_logged = Some(g.number);
            }
            return sleep_for;
        }
        let due = match self.warned {
            Some((n, at)) => n != g.number || at.elapsed() >= Duration::from_secs(86_400),
            None => true,
        };
        if due && (left as u64) <= EXPIRY_WARNING.as_secs() {
            tracing::warn!(
                license_id = %g.license.license_id,
                not_after = %format_time(g.license.not_after),
                seconds_left = left,
                "the license expires in {} days: deploy a renewed license with its recompiled packs",
                left / 86_400
            );
            self.warned = Some((g.number, tokio::time::Instant::now()));
        }
        // Wake up right after expiry to log it.
        sleep_for = sleep_for.min(Duration::from_secs(left as u64 + 1));
        sleep_for
    }
}

/// Warns at start-up (before the listener is announced, so operators and
/// tests see it with the first log lines) and daily from 14 days before
/// `not_after`, and once when the serving license expires (§9.6).
fn spawn_expiry_monitor(state: &Arc<AppState>) {
    let state = Arc::clone(state);
    let mut monitor = ExpiryMonitor::default();
    let first = monitor.check(&state);
    tokio::spawn(async move {
        let mut sleep_for = first;
        loop {
            tokio::time::sleep(sleep_for).await;
            sleep_for = monitor.check(&state);
        }
    });
}
