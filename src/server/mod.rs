//! Serve mode ([§9](docs/serve.md#s9)): `helixor-pack serve` as a library. This module
//! runs the server: start-up load, listener, reload triggers, expiry
//! warnings, graceful shutdown. It does not parse command-line flags (the
//! binary does) and never logs payloads or keys. Its modules, each
//! importing only those listed before it:
//!
//! - [`config`]: the YAML file, `HELIXOR_*` variables and flags;
//! - [`metrics`]: the Prometheus registry; [`auth`]: bearer tokens;
//! - [`generation`]: reading a deployment and building a generation;
//! - `http`: the HTTP kit shared with the catalog server: the JSON error
//!   type, body extractors, route tables, request ids, the accept loop
//!   (connection cap, header-read and idle timeouts);
//! - `state`: [`AppState`], what handlers, middleware and reloads share;
//! - [`reload`](mod@reload): one-at-a-time reloads and their triggers;
//! - `work`: a request's slot and body memory, large work off the async
//!   workers, the serving generation and the choice of pack;
//! - `api`: serve mode's handlers (evaluation, the event stream,
//!   operations);
//! - `gateway`: the gateways ([§12](docs/gateways.md#s12)): judging every string of a body
//!   ([§12.4](docs/gateways.md#s12-4)), the deciding decision and the refusal body, used by LiteLLM's
//!   guardrail API ([§12.1](docs/gateways.md#s12-1)), Envoy's ext_authz ([§12.2](docs/gateways.md#s12-2)) and [`ext_proc`]
//!   ([§12.3](docs/gateways.md#s12-3));
//! - [`routes`]: the one route table and the middleware stack;
//! - [`healthcheck`]: the `helixor-pack healthcheck` probe client.
//!
//! `scripts/module-graph.py --check` (run by CI) fails on any import cycle.

mod api;
pub(crate) mod audit;
pub mod auth;
pub mod config;
pub(crate) mod gateway;
pub mod generation;
pub mod healthcheck;
pub(crate) mod http;
pub mod metrics;
pub(crate) mod monitor;
pub mod reload;
pub mod routes;
mod state;
mod work;

pub use config::{Config, LogFormat, ServeOptions};
pub use gateway::ext_proc;
pub use generation::{Generation, Sources};
pub use reload::{reload, ReloadOutcome, Trigger};
pub use routes::{router, Route, ROUTES};
pub use state::{AppState, BODY_BUDGET_BODIES};

use crate::license::format_time;
use crate::Error;
use http::listener;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;
use tokio::signal::unix::{signal, SignalKind};

/// Licenses closer than this to `not_after` are warned about daily ([§9.6](docs/serve.md#s9-6)).
pub const EXPIRY_WARNING: Duration = Duration::from_secs(14 * 24 * 3600);

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
    // requests their grace period ([§9.7](docs/serve.md#s9-7)).
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
    state.close_decision_log();
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
            // `unchecked`: no pack signers are configured ([§17](docs/guides/signing.md#s17)).
            signatures = %if g.signed { "verified" } else { "unchecked" },
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
/// `not_after`, and once when the serving license expires ([§9.6](docs/serve.md#s9-6)).
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
