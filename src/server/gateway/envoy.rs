//! Envoy external authorization, HTTP service mode ([§12.2](docs/gateways.md#s12-2), [§12.4](docs/gateways.md#s12-4)): any
//! method under `/envoy/ext_authz/`; every string value of the body is
//! judged with one generation (a body that is not JSON is one text). FATAL
//! anywhere → 403 with the OpenAI-style error body; otherwise 200 with
//! `x-helixor-action` and `x-helixor-receipt`. ext_authz cannot change a
//! body: redaction is ext_proc's ([§12.3](docs/gateways.md#s12-3)). Never puts any part of a payload
//! in an answer, a log or a metric.

use super::{
    abandoned_error, body_error, declared_json, judge_body, violation_body, Judge, PackHeader,
    Verdict, ACTION_HEADER, RECEIPT_HEADER,
};
use crate::server::audit::At;
use crate::server::generation::Generation;
use crate::server::http::{json_response, ApiError, RawBody};
use crate::server::state::{AppState, AppStateRef};
use crate::server::work::{choose, noted, off_workers, serving};
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// The route prefix Envoy's `http_service.path_prefix` names.
pub const EXT_AUTHZ_PREFIX: &str = "/envoy/ext_authz";

/// The handler of every method under `/envoy/ext_authz/`.
pub(crate) async fn ext_authz(
    State(state): State<AppStateRef>,
    PackHeader(pack_id): PackHeader,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let generation = serving(&state)?;
    let bytes = body.len();
    let json = declared_json(headers.get(CONTENT_TYPE).map(HeaderValue::as_bytes));
    let request_id = crate::server::api::evaluate::request_id(&headers);
    let resp = off_workers(bytes, move || {
        let exchange = Exchange {
            pack_id: pack_id.as_deref(),
            request_id: request_id.as_deref(),
            declared_json: json,
        };
        judge(&state, &generation, &exchange, &body)
    })
    .await?;
    crate::server::audit::settle(resp).await
}

/// What an ext_authz call says beside its body.
struct Exchange<'a> {
    pack_id: Option<&'a str>,
    request_id: Option<&'a str>,
    declared_json: bool,
}

fn judge(
    state: &AppState,
    generation: &Generation,
    exchange: &Exchange<'_>,
    body: &[u8],
) -> Result<Response, ApiError> {
    let pack = choose(
        generation,
        exchange.pack_id,
        state.config.default_pack.as_deref(),
    )?;
    let mut judge = Judge::new(
        &pack.evaluator,
        state.config.normalize,
        Some(&state.metrics),
    );
    let verdict = judge_body(
        &mut judge,
        body,
        state.config.limits.max_texts,
        exchange.declared_json,
    )
    .map_err(|e| body_error(&e))?;
    if let Verdict::Abandoned = verdict {
        return Err(abandoned_error());
    }
    let Some(d) = judge.deciding() else {
        // No string at all (`{}`, an empty message list): nothing to refuse.
        state.metrics.observe_gateway(EXT_AUTHZ_PREFIX, "allow");
        return Ok(StatusCode::OK.into_response());
    };
    let monitor = crate::server::monitor::is_monitored(state, &pack.pack_id, false);
    let at = At::new(
        EXT_AUTHZ_PREFIX,
        exchange.request_id,
        generation.number,
        pack,
    )
    .monitored(monitor);
    let logged = state.log_decision(d, &at, body);
    if monitor {
        // Decided and logged, never enforced: the request goes on.
        state.metrics.observe_monitored(d);
        state.metrics.observe_gateway(EXT_AUTHZ_PREFIX, "allow");
        return Ok(logged.attach(StatusCode::OK.into_response()));
    }
    if let Verdict::Refuse = verdict {
        state.metrics.observe_gateway(EXT_AUTHZ_PREFIX, "deny");
        return Ok(logged.attach(noted(
            json_response(StatusCode::FORBIDDEN, &violation_body(d)),
            d,
        )));
    }
    state.metrics.observe_gateway(EXT_AUTHZ_PREFIX, "allow");
    let mut resp = StatusCode::OK.into_response();
    for (name, value) in [(ACTION_HEADER, d.action), (RECEIPT_HEADER, &d.receipt_hash)] {
        if let Ok(v) = HeaderValue::from_str(value) {
            resp.headers_mut().insert(name, v);
        }
    }
    Ok(logged.attach(noted(resp, d)))
}
