//! The operations handlers ([§9.4](docs/http-api.md#s9-4)): probes (`/healthz`, `/readyz`,
//! `/v1/health`), `/v1/status`, `/v1/packs`, `/metrics` and
//! `POST /admin/reload`. They read the shared state and never evaluate; a
//! status shows license and pack metadata, never a key, a token or a pack's
//! rules.

use crate::license::{format_time, Window};
use crate::server::generation::Generation;
use crate::server::http::{json_response, ApiError};
use crate::server::metrics;
use crate::server::reload::{outcome_json, reload, Trigger};
use crate::server::state::AppState;
use crate::server::state::AppStateRef;
use crate::server::work::now_unix_nanos;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use time::OffsetDateTime;

/// `GET /healthz`: the process answers.
pub(crate) async fn healthz() -> Response {
    json_response(StatusCode::OK, &json!({"status": "ok"}))
}

/// Why the server is not ready, if it is not ([§9.4](docs/http-api.md#s9-4) `/readyz`).
fn not_ready(state: &AppState) -> Option<ApiError> {
    if state.is_draining() {
        return Some(ApiError::unavailable(
            "the server is shutting down (draining)",
        ));
    }
    match state.current() {
        None => Some(ApiError::unavailable("no generation is loaded")),
        Some(g) if g.expired_at(now_unix_nanos()) => Some(g.expired_error().into()),
        Some(_) => None,
    }
}

/// `GET /readyz`: 200 with a generation that may serve, else its 503.
pub(crate) async fn readyz(State(state): State<AppStateRef>) -> Result<Response, ApiError> {
    if let Some(e) = not_ready(&state) {
        return Err(e);
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({"status": "ready", "generation": state.current().map(|g| g.number)}),
    ))
}

/// `GET /v1/health`: `/readyz` with the version, in one shape for both answers.
pub(crate) async fn v1_health(State(state): State<AppStateRef>) -> Response {
    let generation = state.current().map(|g| g.number);
    match not_ready(&state) {
        None => json_response(
            StatusCode::OK,
            &json!({"status": "healthy", "version": crate::VERSION, "generation": generation}),
        ),
        Some(e) => json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({
                "status": "unavailable",
                "version": crate::VERSION,
                "generation": generation,
                "error": e.name(),
                "message": e.message(),
            }),
        ),
    }
}

fn packs_json(g: &Generation) -> Vec<Value> {
    g.packs
        .values()
        .map(|p| {
            json!({
                "pack_id": p.pack_id,
                "version": p.version,
                "name": p.name,
                "sha256": p.sha256,
                "rules": p.rules.len(),
                "schema_version": match p.program.schema {
                    crate::program::Schema::V1 => 1,
                    crate::program::Schema::V2 => 2,
                },
                "codons": p.program.codons.len(),
                "hard_rules": p.program.hard_rules.len(),
                "signature": crate::signature::info_json(p.signature.as_ref()),
            })
        })
        .collect()
}

/// `GET /v1/status`: version, generation, license metadata, packs, last reload.
pub(crate) async fn status(State(state): State<AppStateRef>) -> Response {
    let now = OffsetDateTime::now_utc();
    let generation = state.current();
    let license = generation.as_ref().map(|g| {
        let l = &g.license;
        json!({
            "license_id": l.license_id,
            "licensee": l.licensee,
            "tier": l.tier,
            "not_before": format_time(l.not_before),
            "not_after": format_time(l.not_after),
            "seconds_left": l.seconds_left(now),
            "valid_now": l.window_at(now) == Window::Valid,
            "issuer_key_id": l.issuer_key_id,
        })
    });
    let body = json!({
        "version": crate::VERSION,
        "generation": generation.as_ref().map(|g| g.number),
        "loaded_at": generation.as_ref().map(|g| format_time(g.loaded_at)),
        "license": license,
        "packs": generation.as_deref().map(packs_json).unwrap_or_default(),
        "last_reload": state.last_reload().as_ref().map(outcome_json),
    });
    json_response(StatusCode::OK, &body)
}

/// `GET /v1/packs`: the packs of the serving generation.
pub(crate) async fn packs(State(state): State<AppStateRef>) -> Response {
    let packs = state
        .current()
        .as_deref()
        .map(packs_json)
        .unwrap_or_default();
    json_response(StatusCode::OK, &json!({ "packs": packs }))
}

/// `GET /metrics`: the Prometheus text.
pub(crate) async fn metrics_text(State(state): State<AppStateRef>) -> Result<Response, ApiError> {
    let text = state
        .metrics
        .render()
        .map_err(|_| ApiError::internal("the metrics could not be rendered"))?;
    Ok((
        StatusCode::OK,
        [(
            CONTENT_TYPE,
            HeaderValue::from_static(metrics::CONTENT_TYPE),
        )],
        text,
    )
        .into_response())
}

/// `POST /admin/reload`: 200 with the generation, or 409 with why it failed.
pub(crate) async fn admin_reload(State(state): State<AppStateRef>) -> Result<Response, ApiError> {
    // Its own task: a client that goes away, or the request timeout, does
    // not cancel a reload halfway.
    let task = tokio::spawn(async move { reload(&state, Trigger::Admin).await });
    let o = task
        .await
        .map_err(|_| ApiError::internal("the reload task did not finish"))?;
    Ok(match o.error {
        None => json_response(
            StatusCode::OK,
            &json!({"result": o.result.as_str(), "generation": o.generation}),
        ),
        Some(name) => json_response(
            StatusCode::CONFLICT,
            &json!({
                "result": o.result.as_str(),
                "error": name,
                "message": o.message,
                "generation": o.generation,
            }),
        ),
    })
}
