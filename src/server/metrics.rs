//! Prometheus metrics ([§9.5](docs/serve.md#s9-5)) in one registry owned by the server state
//! (not the process-wide default). Labels are pack ids, rule ids, actions,
//! route templates and status codes: never a payload, path or token.

use crate::engine::Decision;
use prometheus::{
    Encoder, Gauge, Histogram, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry, TextEncoder,
};

/// Buckets of `helixor_evaluation_duration_seconds`: 1 µs to 10 ms.
pub const EVALUATION_BUCKETS: &[f64] = &[
    1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2,
];
/// Buckets of `helixor_http_request_duration_seconds`: 50 µs to 5 s.
pub const HTTP_BUCKETS: &[f64] = &[
    5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// Every metric of the server.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Registry,
    evaluations: IntCounterVec,
    normalized: IntCounterVec,
    triggers: IntCounterVec,
    evaluation_duration: Histogram,
    http_requests: IntCounterVec,
    http_duration: HistogramVec,
    generation: IntGauge,
    packs_loaded: IntGauge,
    reloads: IntCounterVec,
    last_reload_successful: IntGauge,
    last_reload_success_timestamp: Gauge,
    license_expiry: Gauge,
    stream_sessions: IntCounterVec,
    gateway_answers: IntCounterVec,
    signature_failures: IntCounterVec,
    decision_log_lines: prometheus::IntCounter,
    monitored: IntCounterVec,
    decision_log_errors: IntCounterVec,
}

/// The outcome label of `helixor_reloads_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadLabel {
    /// A new generation was swapped in.
    Success,
    /// The files' digests equal the serving generation's.
    Unchanged,
    /// The deployment failed a check; the serving generation stays.
    Failure,
}

impl ReloadLabel {
    /// `success`, `unchanged` or `failure`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Unchanged => "unchanged",
            Self::Failure => "failure",
        }
    }
}

fn register<T: prometheus::core::Collector + Clone + 'static>(
    registry: &Registry,
    metric: prometheus::Result<T>,
) -> prometheus::Result<T> {
    let metric = metric?;
    registry.register(Box::new(metric.clone()))?;
    Ok(metric)
}

impl Metrics {
    /// Creates and registers every metric in a new registry.
    pub fn new() -> prometheus::Result<Self> {
        let r = Registry::new();
        let build_info: IntGaugeVec = register(
            &r,
            IntGaugeVec::new(
                Opts::new(
                    "helixor_build_info",
                    "Always 1; the runtime's version as a label.",
                ),
                &["version"],
            ),
        )?;
        build_info.with_label_values(&[crate::VERSION]).set(1);
        let reloads: IntCounterVec = register(
            &r,
            IntCounterVec::new(
                Opts::new(
                    "helixor_reloads_total",
                    "Reload attempts by result (the start-up load is not counted).",
                ),
                &["result"],
            ),
        )?;
        for l in [
            ReloadLabel::Success,
            ReloadLabel::Unchanged,
            ReloadLabel::Failure,
        ] {
            reloads.with_label_values(&[l.as_str()]);
        }
        let signature_failures: IntCounterVec = register(
            &r,
            IntCounterVec::new(
                Opts::new(
                    "helixor_pack_signature_failures_total",
                    "Reloads refused for a pack signature (SPEC §17), by the check that failed (a refused deployment is retried at each rescan).",
                ),
                &["reason"],
            ),
        )?;
        // Every reason from 0, so that an alert can use rate() at once.
        for reason in crate::signature::SignatureFailure::ALL {
            signature_failures.with_label_values(&[reason.as_str()]);
        }
        Ok(Self {
            evaluations: register(
                &r,
                IntCounterVec::new(
                    Opts::new("helixor_evaluations_total", "Decisions by pack and action."),
                    &["pack_id", "action"],
                ),
            )?,
            normalized: register(
                &r,
                IntCounterVec::new(
                    Opts::new(
                        "helixor_normalized_evaluations_total",
                        "Decisions made on an evasion view that differed from the text (SPEC §15), by pack.",
                    ),
                    &["pack_id"],
                ),
            )?,
            triggers: register(
                &r,
                IntCounterVec::new(
                    Opts::new(
                        "helixor_triggers_total",
                        "Triggers by pack, rule and severity.",
                    ),
                    &["pack_id", "rule_id", "severity"],
                ),
            )?,
            evaluation_duration: register(
                &r,
                Histogram::with_opts(
                    HistogramOpts::new(
                        "helixor_evaluation_duration_seconds",
                        "Engine time per evaluation.",
                    )
                    .buckets(EVALUATION_BUCKETS.to_vec()),
                ),
            )?,
            http_requests: register(
                &r,
                IntCounterVec::new(
                    Opts::new(
                        "helixor_http_requests_total",
                        "HTTP requests by route template, method and status.",
                    ),
                    &["route", "method", "status"],
                ),
            )?,
            http_duration: register(
                &r,
                HistogramVec::new(
                    HistogramOpts::new(
                        "helixor_http_request_duration_seconds",
                        "HTTP request duration by route template.",
                    )
                    .buckets(HTTP_BUCKETS.to_vec()),
                    &["route"],
                ),
            )?,
            generation: register(
                &r,
                IntGauge::new("helixor_generation", "The generation now serving."),
            )?,
            packs_loaded: register(
                &r,
                IntGauge::new(
                    "helixor_packs_loaded",
                    "Packs in the generation now serving.",
                ),
            )?,
            reloads,
            last_reload_successful: register(
                &r,
                IntGauge::new(
                    "helixor_last_reload_successful",
                    "1 if the last reload attempt succeeded or found nothing changed, else 0.",
                ),
            )?,
            last_reload_success_timestamp: register(
                &r,
                Gauge::new(
                    "helixor_last_reload_success_timestamp_seconds",
                    "Unix time of the last successful load or unchanged reload.",
                ),
            )?,
            license_expiry: register(
                &r,
                Gauge::new(
                    "helixor_license_expiry_timestamp_seconds",
                    "Unix time at which the serving license expires (not_after).",
                ),
            )?,
            stream_sessions: register(
                &r,
                IntCounterVec::new(
                    Opts::new(
                        "helixor_stream_sessions_total",
                        "Stream sessions by pack and outcome (finished or blocked).",
                    ),
                    &["pack_id", "outcome"],
                ),
            )?,
            gateway_answers: register(
                &r,
                IntCounterVec::new(
                    Opts::new(
                        "helixor_gateway_answers_total",
                        "Answers to gateway calls (SPEC §12) by route template and answer.",
                    ),
                    &["route", "answer"],
                ),
            )?,
            signature_failures,
            monitored: register(
                &r,
                IntCounterVec::new(
                    Opts::new(
                        "helixor_monitored_decisions_total",
                        "Decisions made in monitor mode (SPEC §19), answered as permits, by pack and the action decided.",
                    ),
                    &["pack_id", "action"],
                ),
            )?,
            decision_log_lines: register(
                &r,
                prometheus::IntCounter::new(
                    "helixor_decision_log_lines_total",
                    "Decisions handed to the decision log (SPEC §19).",
                ),
            )?,
            decision_log_errors: {
                let errors: IntCounterVec = register(
                    &r,
                    IntCounterVec::new(
                        Opts::new(
                            "helixor_decision_log_errors_total",
                            "Decision log lines lost, or checkpoints not written (SPEC §19), by reason: queue_full, write, checkpoint.",
                        ),
                        &["reason"],
                    ),
                )?;
                for reason in ["queue_full", "write", "checkpoint"] {
                    errors.with_label_values(&[reason]);
                }
                errors
            },
            registry: r,
        })
    }

    /// Counts a load refused for a pack signature.
    pub fn record_signature_failure(&self, reason: crate::signature::SignatureFailure) {
        self.signature_failures
            .with_label_values(&[reason.as_str()])
            .inc();
    }

    /// Counts one decision, its triggers and its engine time.
    pub fn observe_decision(&self, d: &Decision<'_>) {
        self.evaluations
            .with_label_values(&[d.pack_id, d.action])
            .inc();
        for t in &d.triggers {
            self.triggers
                .with_label_values(&[d.pack_id, t.rule_id, t.severity.as_str()])
                .inc();
        }
        if d.normalized {
            self.normalized.with_label_values(&[d.pack_id]).inc();
        }
        self.evaluation_duration.observe(d.latency_us / 1e6);
    }

    /// Counts one decision made in monitor mode (also counted as a
    /// decision, with the action decided).
    pub fn observe_monitored(&self, d: &Decision<'_>) {
        self.monitored
            .with_label_values(&[d.pack_id, d.action])
            .inc();
    }

    /// Counts one line handed to the decision log.
    pub fn observe_decision_logged(&self) {
        self.decision_log_lines.inc();
    }

    /// A counter of decision log errors, by reason, for the log's writer.
    pub fn decision_log_errors(&self) -> std::sync::Arc<dyn Fn(&'static str) + Send + Sync> {
        let errors = self.decision_log_errors.clone();
        std::sync::Arc::new(move |reason| errors.with_label_values(&[reason]).inc())
    }

    /// Counts one stream session that ended (`finished` or `blocked`).
    pub fn observe_stream_session(&self, pack_id: &str, blocked: bool) {
        let outcome = if blocked { "blocked" } else { "finished" };
        self.stream_sessions
            .with_label_values(&[pack_id, outcome])
            .inc();
    }

    /// Counts one answer to a gateway (LiteLLM's action, Envoy's verdict).
    pub fn observe_gateway(&self, route: &str, answer: &str) {
        self.gateway_answers
            .with_label_values(&[route, answer])
            .inc();
    }

    /// Counts one HTTP request.
    pub fn observe_request(&self, route: &str, method: &str, status: &str, seconds: f64) {
        self.http_requests
            .with_label_values(&[route, method, status])
            .inc();
        self.http_duration
            .with_label_values(&[route])
            .observe(seconds);
    }

    /// Records a newly serving generation.
    pub fn set_generation(&self, number: u64, packs: usize, not_after_unix: i64) {
        self.generation
            .set(i64::try_from(number).unwrap_or(i64::MAX));
        self.packs_loaded
            .set(i64::try_from(packs).unwrap_or(i64::MAX));
        // Unix seconds are exact in an f64 for any realistic date.
        self.license_expiry.set(not_after_unix as f64);
    }

    /// Records a load or reload attempt (`counted`: false for the start-up load).
    pub fn record_reload(&self, label: ReloadLabel, counted: bool, now_unix: f64) {
        if counted {
            self.reloads.with_label_values(&[label.as_str()]).inc();
        }
        match label {
            ReloadLabel::Failure => self.last_reload_successful.set(0),
            ReloadLabel::Success | ReloadLabel::Unchanged => {
                self.last_reload_successful.set(1);
                self.last_reload_success_timestamp.set(now_unix);
            }
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> Result<Vec<u8>, String> {
        let mut out = Vec::with_capacity(8 * 1024);
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .map_err(|e| e.to_string())?;
        Ok(out)
    }
}

/// The `Content-Type` of [`Metrics::render`].
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_family() {
        let m = Metrics::new().unwrap();
        m.observe_request("/healthz", "GET", "200", 0.001);
        m.set_generation(3, 2, 1_800_000_000);
        m.record_reload(ReloadLabel::Failure, true, 1.0);
        let text = String::from_utf8(m.render().unwrap()).unwrap();
        for name in [
            "helixor_build_info{version=",
            "helixor_reloads_total{result=\"failure\"} 1",
            "helixor_reloads_total{result=\"unchanged\"} 0",
            "helixor_last_reload_successful 0",
            "helixor_generation 3",
            "helixor_packs_loaded 2",
            "helixor_license_expiry_timestamp_seconds 1800000000",
            "helixor_http_requests_total{method=\"GET\",route=\"/healthz\",status=\"200\"} 1",
            "helixor_evaluation_duration_seconds_bucket{le=\"0.000001\"} 0",
        ] {
            assert!(text.contains(name), "{name} missing in\n{text}");
        }
    }
}
