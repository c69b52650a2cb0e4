//! The server's side of the decision log ([§19](docs/guides/auditing.md#s19)): opens it from
//! `decision_log.*`, turns each decision of a route into its line (the
//! payload only as its HMAC) and, for the lines an answer must wait for
//! (FATAL, or all with `decision_log.required`), waits off the engine
//! before the answer leaves. It never logs a payload or a key.

use crate::decision_log::note::NoteSigner;
use crate::decision_log::record::{now_rfc3339, Decided, HmacKey, Record};
use crate::decision_log::writer::{DecisionLog, Settings, Submitted};
use crate::engine::Decision;
use crate::error::ErrorName;
use crate::pack::LoadedPack;
use crate::server::config::DecisionLogConfig;
use crate::server::http::ApiError;
use crate::server::metrics::Metrics;
use crate::Error;
use axum::response::Response;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;
use zeroize::Zeroizing;

/// Longest an answer waits for its line to be written.
const WAIT_FOR_LINE: Duration = Duration::from_secs(2);

/// The decision log as the server uses it.
#[derive(Debug)]
pub(crate) struct ServedLog {
    log: DecisionLog,
    hmac: Option<HmacKey>,
    required: bool,
}

impl ServedLog {
    /// Opens the log of `cfg`: its keys read, its files checked and its
    /// tree rebuilt. A problem is a `ConfigError` naming the key.
    pub(crate) fn open(cfg: &DecisionLogConfig, metrics: &Metrics) -> Result<Self, Error> {
        let hmac = match &cfg.hmac_key_file {
            Some(p) => {
                let bytes = crate::capped::read_regular_file_capped(p, 8192).map_err(|e| {
                    Error::Config(format!(
                        "key `decision_log.hmac_key_file`: {}: cannot read: {e}",
                        p.display()
                    ))
                })?;
                Some(
                    HmacKey::from_file_bytes(Zeroizing::new(bytes)).map_err(|e| {
                        Error::Config(format!(
                            "key `decision_log.hmac_key_file`: {}: {e}",
                            p.display()
                        ))
                    })?,
                )
            }
            None => None,
        };
        let signer = match &cfg.signing_key {
            Some(p) => {
                let (key_id, key) = crate::license::read_signing_key(p).map_err(|e| {
                    Error::Config(format!(
                        "key `decision_log.signing_key`: {}",
                        e.to_string().replace("issuer key file", "signing key file")
                    ))
                })?;
                Some(NoteSigner::new(&key_id, key).map_err(|e| {
                    Error::Config(format!(
                        "key `decision_log.signing_key`: {}: {e}",
                        p.display()
                    ))
                })?)
            }
            None => None,
        };
        let log = DecisionLog::open(Settings {
            path: cfg.path.clone(),
            max_bytes: cfg.max_bytes,
            checkpoint_every: cfg.checkpoint_every,
            checkpoint_interval: Duration::from_millis(cfg.checkpoint_interval_ms),
            queue: cfg.queue,
            signer,
            on_error: metrics.decision_log_errors(),
        })
        .map_err(|e| Error::Config(format!("key `decision_log.path`: {e}")))?;
        Ok(Self {
            log,
            hmac,
            required: cfg.required,
        })
    }

    /// Hands the line of `decision` (made on `route` for `payload` by
    /// `pack` of `generation`) to the writer; what the answer must wait for.
    pub(crate) fn record(
        &self,
        metrics: &Metrics,
        decision: &Decision<'_>,
        at: &At<'_>,
        payload_hmac: Option<String>,
        wait: bool,
    ) -> Pending {
        let record = Record::of(
            decision,
            Decided {
                route: at.route,
                request_id: at.request_id,
                generation: at.generation,
                pack_sha256: at.pack_sha256,
                time: now_rfc3339(),
                monitored: at.monitored,
            },
            payload_hmac,
        );
        let wait = wait && (self.required || record.is_fatal());
        metrics.observe_decision_logged();
        match self.log.submit(record, wait) {
            Submitted::Queued => Pending::default(),
            Submitted::Lost => Pending::lost(self.required),
            Submitted::Waiting(rx) => Pending {
                waits: vec![rx],
                lost: false,
                required: self.required,
            },
        }
    }

    /// Hex HMAC of `payload` under the configured key, if one is.
    pub(crate) fn hmac(&self, payload: &[u8]) -> Option<String> {
        self.hmac.as_ref().and_then(|k| k.digest(payload))
    }

    /// Writes what is queued and a last checkpoint (at shutdown).
    pub(crate) fn close(&self) {
        self.log.close(Duration::from_secs(5));
    }
}

/// Where a decision was made: the route, the request, and the generation
/// and pack that decided.
#[derive(Debug, Clone, Copy)]
pub(crate) struct At<'a> {
    /// The route (its template, or the gateway's name).
    pub(crate) route: &'a str,
    /// The request's `x-request-id`.
    pub(crate) request_id: Option<&'a str>,
    /// The serving generation.
    pub(crate) generation: u64,
    /// Hex SHA-256 of the deciding pack's file.
    pub(crate) pack_sha256: &'a str,
    /// Made in monitor mode.
    pub(crate) monitored: bool,
}

impl<'a> At<'a> {
    /// Where `pack` of `generation` decided on `route`.
    pub(crate) fn new(
        route: &'a str,
        request_id: Option<&'a str>,
        generation: u64,
        pack: &'a LoadedPack,
    ) -> Self {
        Self {
            route,
            request_id,
            generation,
            pack_sha256: &pack.file_sha256,
            monitored: false,
        }
    }

    /// The same place, in monitor mode or not.
    pub(crate) fn monitored(self, monitored: bool) -> Self {
        Self { monitored, ..self }
    }
}

/// The lines an answer waits for before it leaves.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    waits: Vec<oneshot::Receiver<Result<u64, ()>>>,
    /// A line was lost already.
    lost: bool,
    /// Whether a lost line fails the answer.
    required: bool,
}

impl Pending {
    fn lost(required: bool) -> Self {
        Self {
            waits: Vec::new(),
            lost: true,
            required,
        }
    }

    /// Adds `other`'s lines (a batch waits for all of its items').
    pub(crate) fn join(&mut self, other: Self) {
        self.waits.extend(other.waits);
        self.lost |= other.lost;
        self.required |= other.required;
    }

    /// Puts the wait in `resp`'s extensions, for [`settle`].
    pub(crate) fn attach(self, mut resp: Response) -> Response {
        if !self.waits.is_empty() || self.lost {
            resp.extensions_mut()
                .insert(PendingLog(Arc::new(Mutex::new(Some(self)))));
        }
        resp
    }

    /// Waits for the lines; `Err` (503) when one is lost and the log is
    /// required.
    async fn wait(self) -> Result<(), ApiError> {
        let mut lost = self.lost;
        for rx in self.waits {
            match tokio::time::timeout(WAIT_FOR_LINE, rx).await {
                Ok(Ok(Ok(_))) => {}
                _ => lost = true,
            }
        }
        if lost && self.required {
            return Err(ApiError::new(
                ErrorName::ServiceUnavailableError,
                "the decision could not be written to the decision log (decision_log.required)",
            ));
        }
        Ok(())
    }
}

/// A response's lines still to be written (see [`Pending::attach`]).
#[derive(Clone, Debug)]
struct PendingLog(Arc<Mutex<Option<Pending>>>);

/// Waits for the lines `resp` carries before it may leave: a FATAL
/// decision's line is on disk (written and flushed) before the client
/// learns of it.
pub(crate) async fn settle(mut resp: Response) -> Result<Response, ApiError> {
    let pending = resp.extensions_mut().remove::<PendingLog>().and_then(|p| {
        p.0.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    });
    if let Some(p) = pending {
        p.wait().await?;
    }
    Ok(resp)
}
