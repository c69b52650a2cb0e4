//! `helixor-pack catalog serve` ([§14](docs/catalog.md#s14)): the catalog's HTTP API, with the
//! conventions of serve mode ([§9.4](docs/http-api.md#s9-4)): one route table, JSON error bodies
//! `{"error": NAME, "message": ...}` with the names of [§4.3](docs/errors.md#s4-3), the body capped
//! before it is parsed, `x-request-id`, serve's accept loop with its
//! connection limits (a request head within 5 s, at most 4096 connections,
//! 60 s idle), graceful shutdown on `SIGTERM`.
//!
//! | route | answers |
//! |---|---|
//! | `GET /v1/catalog` | `{"packs": [{"pack_id", "version", "name"}]}` |
//! | `POST /v1/catalog/packs/{pack_id}` | body: the license file (`application/json`, at most 64 KiB) → 200 `application/octet-stream`, the pack sealed for that license |
//! | `GET /healthz` | 200 while the process runs |
//!
//! Errors: 400 `InvalidRequestError` (a body that is not JSON, or has a key
//! twice), 403 for every `License*` error (a license that does not parse,
//! verify, or is outside its window; a pack or solver it does not allow),
//! 404 `PackNotFoundError` (a pack the catalog does not hold) or
//! `NotFoundError` (a route), 405, 413 `PayloadTooLargeError`, 415
//! `UnsupportedMediaTypeError`, 503 `ServiceUnavailableError` past the
//! request timeout. Never logs a license body, a key or a playbook: a request
//! line names the route, status, pack id (one the catalog holds), license id
//! and error name.

use super::{Catalog, DEFAULT_LISTEN};
use crate::error::{ErrorName, Named};
use crate::license::IssuerKeys;
use crate::request::parse_strict;
use crate::server::config::{LogConfig, LogFormat};
use crate::server::http::listener::{self, ConnLimits};
use crate::server::http::{
    check_content_type, drop_unusable_request_id, json_response, layer_error_json, method_label,
    panic_response, route_table, status_of, ApiError, LayerMessages, Route, REQUEST_ID_HEADER,
};
use crate::Error;
use axum::extract::{MatchedPath, Path, Request, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{on, MethodFilter, MethodRouter};
use axum::Router;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use futures_util::StreamExt as _;
use serde_json::{json, Value};
use std::io::Write as _;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use time::OffsetDateTime;
use tokio::signal::unix::{signal, SignalKind};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use zeroize::{Zeroize, Zeroizing};

/// A catalog route: no token (the license in the body is the credential),
/// no concurrency limit of serve mode's, labelled by its template.
const fn route(
    method: &'static str,
    path: &'static str,
    handler: fn(MethodFilter) -> MethodRouter<CatalogRef>,
) -> Route<CatalogRef> {
    Route {
        method,
        path,
        handler,
        auth_exempt: true,
        probe: false,
        gateway: false,
        label: path,
        documented: true,
    }
}

/// Every route of the catalog: the router and its log labels are built
/// from this table, and a test compares it with `openapi-catalog.yaml`.
pub static ROUTES: &[Route<CatalogRef>] = &[
    route("GET", "/v1/catalog", |f| on(f, list)),
    route("POST", "/v1/catalog/packs/{pack_id}", |f| on(f, pack)),
    Route {
        probe: true,
        ..route("GET", "/healthz", |f| on(f, healthz))
    },
];

/// Largest request body: a license file ([§2](docs/formats.md#s2) caps those at 64 KiB).
pub const MAX_BODY_BYTES: usize = crate::license::MAX_LICENSE_BYTES as usize;
/// A request that has not been answered in this time gets 503.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Time requests in flight get after `SIGTERM`.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// The connection limits of serve mode's defaults ([§9.1](docs/configuration.md#s9-1)): 4096
/// connections at once, 5 s for a request head (slowloris), 60 s idle, 10 s
/// for a client to read any of its answer.
pub const CONNECTION_LIMITS: ConnLimits = ConnLimits {
    max_connections: 4096,
    header_read_timeout: Duration::from_secs(5),
    idle_timeout: Duration::from_secs(60),
    write_timeout: Duration::from_secs(10),
};

/// Options of `helixor-pack catalog serve`.
#[derive(Debug, Clone)]
pub struct CatalogServeOptions {
    /// The directory of playbooks (`*.yaml`, `*.yml`).
    pub playbooks: PathBuf,
    /// The issuer public keys that verify customers' licenses ([§2](docs/formats.md#s2) form).
    pub issuer_keys: PathBuf,
    /// Address to listen on; `None`: [`DEFAULT_LISTEN`].
    pub listen: Option<String>,
    /// Log lines on stderr.
    pub log: LogConfig,
    /// A signing key (`license keygen`'s `.key`): every pack served is
    /// signed with it ([§17](docs/guides/signing.md#s17)).
    pub sign_key: Option<PathBuf>,
}

impl CatalogServeOptions {
    /// Options with text logs at `info`.
    pub fn new(playbooks: PathBuf, issuer_keys: PathBuf, listen: Option<String>) -> Self {
        Self {
            playbooks,
            issuer_keys,
            listen,
            log: LogConfig {
                format: LogFormat::Text,
                level: "info".into(),
            },
            sign_key: None,
        }
    }
}

fn parse_listen(s: &str) -> Result<SocketAddr, Error> {
    s.parse::<SocketAddr>()
        .ok()
        .or_else(|| s.to_socket_addrs().ok().and_then(|mut a| a.next()))
        .ok_or_else(|| Error::Usage(format!("--listen `{s}` is not an address (host:port)")))
}

/// `helixor-pack catalog serve`: compiles the catalog (a broken playbook
/// stops start-up with its error, before the listener opens), then serves
/// until `SIGTERM`/`SIGINT` and returns exit code 0.
pub fn serve(opts: &CatalogServeOptions) -> Result<u8, Error> {
    let listen = parse_listen(opts.listen.as_deref().unwrap_or(DEFAULT_LISTEN))?;
    crate::server::init_logging(&opts.log);
    let keys = IssuerKeys::from_path(&opts.issuer_keys)?;
    // A signing key that cannot be read stops start-up, before the
    // playbooks are compiled and long before the listener opens.
    let signer = opts
        .sign_key
        .as_deref()
        .map(crate::signature::read_signing_key)
        .transpose()?;
    let (mut catalog, warnings) = Catalog::load(&opts.playbooks, keys)?;
    if let Some((key_id, key)) = signer {
        tracing::info!("signing every pack served as `{key_id}`");
        catalog = catalog.with_signer(key_id, key);
    }
    for w in &warnings {
        tracing::warn!("{w}");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("cannot start the async runtime", e))?;
    runtime.block_on(run(Arc::new(catalog), listen))
}

/// Serves `catalog` on `listen` (inside a tokio runtime) until `SIGTERM` or
/// `SIGINT`; prints `listening on ADDR` on stdout once the listener is open.
pub async fn run(catalog: Arc<Catalog>, listen: SocketAddr) -> Result<u8, Error> {
    let io = |what: &'static str| move |e: std::io::Error| Error::io(what, e);
    let term = signal(SignalKind::terminate()).map_err(io("cannot handle SIGTERM"))?;
    let int = signal(SignalKind::interrupt()).map_err(io("cannot handle SIGINT"))?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| Error::io(format_args!("cannot listen on {listen}"), e))?;
    let local = listener
        .local_addr()
        .map_err(io("cannot read the bound address"))?;
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "listening on {local}");
        let _ = out.flush();
    }
    tracing::info!(
        address = %local,
        packs = %catalog.items().iter().map(|i| i.pack_id.as_str()).collect::<Vec<_>>().join(","),
        playbooks = %catalog.source.display(),
        version = crate::VERSION,
        "catalog listening"
    );
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let shutdown = async move {
        let (mut term, mut int) = (term, int);
        let which = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        tracing::info!(
            signal = which,
            "shutting down: finishing requests in flight"
        );
        let _ = stop_tx.send(true);
    };
    let server = listener::serve(listener, router(catalog), CONNECTION_LIMITS, shutdown);
    let grace_over = async move {
        while !*stop_rx.borrow() {
            if stop_rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    tokio::select! {
        () = server => {}
        () = grace_over => tracing::warn!("grace period over: requests still in flight are dropped"),
    }
    tracing::info!("stopped");
    Ok(0)
}

/// The HTTP status of a catalog error: 403 for every `License*` name (the
/// license sent is refused), else as serve mode answers it ([§9.4](docs/http-api.md#s9-4)).
pub fn catalog_status(name: ErrorName) -> StatusCode {
    if name.exit_code() == 4 {
        StatusCode::FORBIDDEN
    } else {
        status_of(name)
    }
}

fn api_error(e: &Error) -> ApiError {
    ApiError::with_statuses(e.name(), e.to_string(), catalog_status)
}

/// The catalog's state, as its handlers take it.
pub type CatalogRef = Arc<Catalog>;

async fn not_found() -> ApiError {
    ApiError::new(ErrorName::NotFoundError, MESSAGES.not_found)
}

/// The catalog's application: every route of [`ROUTES`] with the middleware.
pub fn router(catalog: Arc<Catalog>) -> Router {
    let app: Router<CatalogRef> = route_table(ROUTES);
    app.fallback(not_found)
        .with_state(catalog)
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            REQUEST_TIMEOUT,
        ))
        .layer(middleware::map_response(json_errors))
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(middleware::from_fn(observe))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .layer(middleware::map_request(drop_unusable_request_id))
}

/// The catalog's messages for errors that layers and extractors produce.
const MESSAGES: LayerMessages = LayerMessages {
    not_found: "no such route (see openapi-catalog.yaml)",
    too_large: "the request body is over the 65536-byte limit of a license file",
    timeout: "the request did not complete in time",
};

/// The JSON body for errors that layers and extractors produce themselves.
async fn json_errors(resp: Response) -> Response {
    layer_error_json(resp, &MESSAGES)
}

/// What a pack request tells the request log line: never the license body.
#[derive(Debug, Clone)]
struct PackNote {
    /// A pack id the catalog holds (a client's unknown id is not logged).
    pack_id: Option<String>,
    license_id: Option<String>,
    error: Option<&'static str>,
}

/// One log line per request: route template, method, status, latency,
/// request id; for pack requests, the pack, the license id and the error
/// name (info level: a vendor's record of what was sealed for whom).
async fn observe(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .and_then(|m| ROUTES.iter().find(|r| r.path == m.as_str()))
        .map_or(crate::server::http::UNMATCHED_ROUTE, |r| r.label);
    let method = method_label(req.method());
    let request_id = req
        .headers()
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let resp = next.run(req).await;
    let latency_ms = started.elapsed().as_secs_f64() * 1e3;
    let status = resp.status().as_u16();
    match resp.extensions().get::<PackNote>() {
        Some(n) => tracing::info!(
            route,
            method,
            status,
            latency_ms,
            pack_id = n.pack_id.as_deref(),
            license_id = n.license_id.as_deref(),
            error = n.error,
            request_id,
            "{}",
            if n.error.is_none() {
                "sealed a catalog pack"
            } else {
                "refused a catalog pack"
            }
        ),
        None => tracing::debug!(route, method, status, latency_ms, request_id, "request"),
    }
    resp
}

async fn healthz() -> Response {
    json_response(StatusCode::OK, &json!({"status": "ok"}))
}

async fn list(State(catalog): State<CatalogRef>) -> Response {
    json_response(StatusCode::OK, &json!({"packs": catalog.items()}))
}

fn too_large() -> ApiError {
    ApiError::new(
        ErrorName::PayloadTooLargeError,
        format!("the request body is over the {MAX_BODY_BYTES}-byte limit of a license file"),
    )
}

/// Reads the body (a license: it holds a content key) into zeroizing memory
/// of a fixed capacity, so that no reallocation leaves a copy behind, and
/// wipes each received chunk that is not shared. (What the HTTP library
/// buffered itself is out of reach.) 413 over [`MAX_BODY_BYTES`], declared
/// or sent; 400 if it cannot be read.
async fn read_license_body(req: Request) -> Result<Zeroizing<Vec<u8>>, ApiError> {
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Err(too_large());
    }
    let mut buf = Zeroizing::new(Vec::with_capacity(MAX_BODY_BYTES));
    let mut stream = req.into_body().into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| {
            ApiError::new(
                ErrorName::InvalidRequestError,
                "the request body could not be read",
            )
        })?;
        let fits = buf.len() + chunk.len() <= MAX_BODY_BYTES;
        if fits {
            buf.extend_from_slice(&chunk);
        }
        if let Ok(mut owned) = chunk.try_into_mut() {
            owned.as_mut().zeroize();
        }
        if !fits {
            return Err(too_large());
        }
    }
    Ok(buf)
}

/// Wipes every string of a parsed JSON value (a license's content key).
fn wipe(v: &mut Value) {
    match v {
        Value::String(s) => s.zeroize(),
        Value::Array(items) => items.iter_mut().for_each(wipe),
        Value::Object(m) => m.values_mut().for_each(wipe),
        _ => {}
    }
}

/// `POST /v1/catalog/packs/{pack_id}`: the license in the body is parsed,
/// verified and window-checked, the pack looked up, the license's
/// entitlements checked, and the compiled playbook sealed for it.
async fn pack(
    State(catalog): State<CatalogRef>,
    id: Result<Path<String>, axum::extract::rejection::PathRejection>,
    req: Request,
) -> Response {
    let mut note = PackNote {
        pack_id: None,
        license_id: None,
        error: None,
    };
    let result = seal_request(&catalog, id, req, &mut note)
        .await
        .and_then(
            |bytes| match catalog.sign(&bytes, OffsetDateTime::now_utc()) {
                None => Ok((bytes, None)),
                Some(Ok(sig)) => HeaderValue::from_str(&B64.encode(sig))
                    .map(|h| (bytes, Some(h)))
                    .map_err(|_| ApiError::internal("the pack's signature could not be sent")),
                Some(Err(e)) => {
                    tracing::error!(error = %e, "cannot sign a sealed pack");
                    Err(ApiError::internal("the pack could not be signed"))
                }
            },
        );
    let mut resp = match result {
        Ok((bytes, sig)) => {
            let mut resp = (
                StatusCode::OK,
                [
                    (
                        CONTENT_TYPE,
                        HeaderValue::from_static("application/octet-stream"),
                    ),
                    // Sealed for one license: no shared cache should keep it.
                    (CACHE_CONTROL, HeaderValue::from_static("no-store")),
                ],
                bytes,
            )
                .into_response();
            if let Some(sig) = sig {
                resp.headers_mut().insert(super::SIGNATURE_HEADER, sig);
            }
            resp
        }
        Err(e) => {
            note.error = Some(e.name());
            let mut resp = e.into_response();
            resp.headers_mut()
                .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
            resp
        }
    };
    resp.extensions_mut().insert(note);
    resp
}

async fn seal_request(
    catalog: &Catalog,
    id: Result<Path<String>, axum::extract::rejection::PathRejection>,
    req: Request,
    note: &mut PackNote,
) -> Result<Vec<u8>, ApiError> {
    let Path(pack_id) = id.map_err(|_| {
        ApiError::new(
            ErrorName::InvalidRequestError,
            "the pack id in the path is not valid UTF-8",
        )
    })?;
    check_content_type(req.headers())?;
    let body = read_license_body(req).await?;
    // Malformed JSON, or a key twice, is a 400 as on every JSON route ([§9.1](docs/configuration.md#s9-1));
    // JSON that is not a valid license is a 403 `LicenseError` below.
    match parse_strict(&body) {
        Ok(mut v) => wipe(&mut v),
        Err(e) => {
            return Err(ApiError::new(
                ErrorName::InvalidRequestError,
                format!("the body is not valid JSON: {e}"),
            ))
        }
    }
    let license = catalog
        .verify_license(&body, OffsetDateTime::now_utc())
        .map_err(|e| api_error(&e))?;
    drop(body);
    note.license_id = Some(license.license_id.clone());
    if catalog.contains(&pack_id) {
        note.pack_id = Some(pack_id.clone());
    }
    catalog
        .seal_for(&pack_id, &license)
        .map_err(|e| api_error(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn license_errors_are_403() {
        for n in ErrorName::ALL {
            let s = catalog_status(n);
            if n.as_str().starts_with("License") {
                assert_eq!(s, StatusCode::FORBIDDEN, "{n}");
            } else {
                assert_ne!(s, StatusCode::FORBIDDEN, "{n}");
            }
        }
        assert_eq!(
            catalog_status(ErrorName::PackNotFoundError),
            StatusCode::NOT_FOUND
        );
    }

    #[test]
    fn listen_addresses() {
        assert!(parse_listen("127.0.0.1:0").is_ok());
        assert!(matches!(parse_listen("nowhere"), Err(Error::Usage(_))));
    }
}
