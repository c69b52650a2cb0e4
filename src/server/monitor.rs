//! Monitor mode ([§19](docs/guides/auditing.md#s19)): for a pack in `monitor_packs`,
//! or a request with `"mode": "monitor"`, the decision is made, counted and
//! logged as usual, but the answer permits the payload unchanged and says
//! what would have been decided. For rolling out a pack without breaking
//! traffic. It never changes what the engine decides or what is logged.

use crate::engine::{Decision, Severity, PERMIT_ACTION};
use crate::server::state::AppState;
use serde::Serialize;

/// What a monitored decision would have done, in its answer's `monitored`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Monitored<'e> {
    action: &'e str,
    severity: Option<Severity>,
    rule_ids: Vec<&'e str>,
}

/// Whether `pack_id`'s decisions are monitored: the request asked, or the
/// pack is in `monitor_packs`.
pub(crate) fn is_monitored(state: &AppState, pack_id: &str, requested: bool) -> bool {
    requested || state.config.monitor_packs.iter().any(|p| p == pack_id)
}

/// The answer's view of `d` when monitored: a permit of `payload`
/// unchanged (no triggers; the receipt is the decision's, as logged), and
/// what was decided.
pub(crate) fn permit_view<'e>(d: &Decision<'e>, payload: &str) -> (Decision<'e>, Monitored<'e>) {
    let monitored = Monitored {
        action: d.action,
        severity: d.severity,
        rule_ids: d.triggers.iter().map(|t| t.rule_id).collect(),
    };
    let view = Decision {
        action: PERMIT_ACTION,
        severity: None,
        reason: None,
        clean_text: payload.to_string(),
        triggers: Vec::new(),
        invariants_passed: true,
        pack_id: d.pack_id,
        pack_version: d.pack_version,
        receipt_hash: d.receipt_hash.clone(),
        latency_us: d.latency_us,
        normalized: d.normalized,
    };
    (view, monitored)
}
