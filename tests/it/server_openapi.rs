//! `openapi.yaml` matches the server: the same routes as
//! `helixor::server::ROUTES` (both ways), every `$ref` resolves, and real
//! answers of every route and status validate against the documented schema.

use crate::support::http::send;
use crate::support::openapi::{resolve, validate};
use crate::support::server::{test_playbook, Fixture};
use axum::body::Body;
use axum::http::Request;
use axum::Router;
use helixor::server::{router, AppState, Config, Generation, Route, Sources, ROUTES};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::Arc;
use time::OffsetDateTime;

const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// A router path in OpenAPI's form: `{*path}` (a catch-all) is `{path}`.
fn doc_path(route: &str) -> String {
    route.replace("{*", "{")
}

/// The documented path of a request path.
fn template(path: &str) -> String {
    match path.strip_prefix("/envoy/ext_authz/") {
        Some(_) => "/envoy/ext_authz/{path}".to_string(),
        None => path.to_string(),
    }
}

/// A concrete request path for a route of the table.
fn concrete(route: &str) -> String {
    route.replace("{*path}", "v1/chat/completions")
}

fn document() -> Value {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml"))
        .expect("openapi.yaml at the repository root");
    serde_yaml::from_str(&text).expect("openapi.yaml parses")
}

#[test]
fn routes_in_the_router_and_in_the_document_are_the_same() {
    let doc = document();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (key, _) in item.as_object().unwrap() {
            if METHODS.contains(&key.as_str()) {
                documented.insert((key.to_uppercase(), path.clone()));
            }
        }
    }
    let served: BTreeSet<(String, String)> = ROUTES
        .iter()
        .filter(|r| r.documented)
        .map(|r| (r.method.to_string(), doc_path(r.path)))
        .collect();
    let missing: Vec<_> = served.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&served).collect();
    assert!(
        missing.is_empty(),
        "served but not in openapi.yaml: {missing:?}"
    );
    assert!(
        extra.is_empty(),
        "in openapi.yaml but not served: {extra:?}"
    );
}

#[test]
fn every_ref_resolves() {
    crate::support::openapi::assert_refs_resolve(&document());
}

struct Checker {
    doc: Value,
    seen: BTreeSet<(String, String, u16)>,
}

impl Checker {
    /// Sends `req` and validates the answer against the document.
    async fn check(&mut self, app: &Router, req: Request<Body>) -> (u16, Value) {
        let method = req.method().as_str().to_lowercase();
        let path = template(req.uri().path());
        let resp = send(app, req).await;
        let status = resp.status.as_u16();
        let mime = resp.mime();
        assert!(resp.headers.contains_key("x-request-id"));
        let bytes = resp.bytes;
        let op = &self.doc["paths"][&path][&method];
        assert!(op.is_object(), "{method} {path} is not documented");
        let documented = op["responses"]
            .get(status.to_string())
            .unwrap_or_else(|| panic!("{method} {path}: status {status} is not documented"));
        let documented = resolve(&self.doc, documented);
        if documented.get("content").is_none() {
            assert!(
                bytes.is_empty(),
                "{method} {path} {status}: an undocumented body"
            );
            self.seen.insert((method, path, status));
            return (status, Value::Null);
        }
        let schema = documented["content"].get(&mime).unwrap_or_else(|| {
            panic!("{method} {path} {status}: content type {mime} is not documented")
        })["schema"]
            .clone();
        let body: Value = match mime.as_str() {
            "application/json" => serde_json::from_slice(&bytes).unwrap(),
            // Server-sent events: the schema describes one event.
            "text/event-stream" => Value::Array(
                String::from_utf8(bytes.to_vec())
                    .unwrap()
                    .split("\n\n")
                    .filter(|e| !e.is_empty())
                    .map(|e| json!({"event": "message", "data": e.strip_prefix("data: ").unwrap()}))
                    .collect(),
            ),
            _ => Value::String(String::from_utf8(bytes.to_vec()).unwrap()),
        };
        let items = match (&body, mime.as_str()) {
            (Value::Array(events), "text/event-stream") => events.clone(),
            _ => vec![body.clone()],
        };
        for item in &items {
            if let Err(e) = validate(&self.doc, &schema, item, "body") {
                panic!("{method} {path} {status}: {e}");
            }
        }
        self.seen.insert((method, path, status));
        (status, body)
    }
}

fn post(path: &str, body: &str) -> Request<Body> {
    Request::post(path)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

fn get(path: &str) -> Request<Body> {
    Request::get(path).body(Body::empty()).unwrap()
}

fn app_for(
    fx: &Fixture,
    tweak: impl FnOnce(&mut Config),
    expired: bool,
) -> (Router, Arc<AppState>) {
    let now = OffsetDateTime::now_utc().replace_nanosecond(0).unwrap();
    let license = if expired {
        fx.license_window(
            now - time::Duration::hours(2),
            now - time::Duration::hours(1),
        )
    } else {
        fx.license()
    };
    let packs_dir = fx
        .path()
        .join(if expired { "packs-expired" } else { "packs" });
    fx.packs(&license, &packs_dir, "1.0.0");
    let mut config = Config::with_packs_dir(&packs_dir);
    config.license = Some(license);
    config.issuer_keys = Some(fx.issuer_dir.clone());
    config.limits.max_body_bytes = 4096;
    config.limits.max_batch_items = 3;
    tweak(&mut config);
    let sources = Sources::from_config(&config);
    let at = if expired {
        now - time::Duration::minutes(90)
    } else {
        now
    };
    let generation = Generation::build(
        helixor::server::generation::Snapshot::read(&sources),
        1,
        at,
        &helixor::Sequences::default(),
    )
    .unwrap();
    let state = AppState::new(config, Some(generation)).unwrap();
    (router(Arc::clone(&state)), state)
}

#[tokio::test]
async fn real_answers_validate_against_the_document() {
    let mut c = Checker {
        doc: document(),
        seen: BTreeSet::new(),
    };
    let fx = Fixture::new();
    let (app, state) = app_for(&fx, |_| {}, false);
    let ids = r#""pack_id": "custom.test_ids.v1""#;
    for text in [
        "hello",
        "TCK-123456 and bob@example.com",
        "ssn 123-45-6789, card 4111 1111 1111 1111, MRN 1234567, call 212-555-0100 from 10.0.0.1",
    ] {
        for path in ["/evaluate", "/v1/evaluate"] {
            let (s, _) = c
                .check(&app, post(path, &format!(r#"{{"text": "{text}", {ids}}}"#)))
                .await;
            assert_eq!(s, 200);
        }
    }
    for (path, body, want) in [
        ("/evaluate", "{", 400),
        ("/evaluate", r#"{"text": "x"}"#, 400),
        ("/v1/evaluate", "[1]", 400),
        ("/evaluate", r#"{"text": "x", "pack_id": "nope"}"#, 404),
        ("/v1/evaluate", r#"{"text": "x", "pack_id": "nope"}"#, 404),
        (
            "/evaluate/batch",
            r#"{"items": [{"text": "TCK-123456", "pack_id": "custom.test_ids.v1"}, 1, {"text": "a"}]}"#,
            200,
        ),
        ("/evaluate/batch", r#"{"items": [1, 2, 3, 4]}"#, 400),
        ("/evaluate/batch", r#"{"items": 1}"#, 400),
    ] {
        let (s, _) = c.check(&app, post(path, body)).await;
        assert_eq!(s, want, "{path} {body}");
    }
    // Streams: the SSE body, and each event against its schema.
    for (body, want) in [
        (
            r#"{"text": "mail a@b.co, SSN 123-45-6789 now", "pack_id": "compliance.regulatory_pii_guard.v1", "chunk_size": 3}"#,
            200,
        ),
        (
            r#"{"text": "TCK-123456 x y", "pack_id": "custom.test_ids.v1", "block_on_fatal": false, "lookahead_chars": 2}"#,
            200,
        ),
        (r#"{"text": "x", "chunk_size": 0}"#, 400),
        (r#"{"text": "x", "pack_id": "nope"}"#, 404),
    ] {
        let (s, text) = c.check(&app, post("/v1/evaluate/stream", body)).await;
        assert_eq!(s, want, "{body}");
        if s != 200 {
            continue;
        }
        let events: Vec<Value> = text
            .as_array()
            .unwrap()
            .iter()
            .map(|e| serde_json::from_str(e["data"].as_str().unwrap()).unwrap())
            .collect();
        assert!(events.len() >= 2, "{text}");
        for e in &events {
            let name = if e.get("done").is_some() {
                "StreamDone"
            } else if e["blocked"] == true {
                "StreamBlocked"
            } else {
                "StreamRelease"
            };
            let schema = json!({"$ref": format!("#/components/schemas/{name}")});
            validate(&c.doc, &schema, e, "event").unwrap();
        }
    }
    // LiteLLM's guardrail calls, as LiteLLM 1.108.7 sends them.
    let litellm = "/beta/litellm_basic_guardrail_api";
    for (body, want) in [
        (
            r#"{"input_type": "request", "texts": ["mail bob@example.com", "TCK-123456"], "litellm_call_id": "c1", "structured_messages": null, "additional_provider_specific_params": {"pack_id": "custom.test_ids.v1"}, "model": "fake"}"#,
            200,
        ),
        (
            r#"{"input_type": "response", "texts": ["Hi bob@exa"], "additional_provider_specific_params": {"pack_id": "compliance.regulatory_pii_guard.v1"}}"#,
            200,
        ),
        (
            r#"{"input_type": "response", "texts": ["SSN 123-45-6789"], "additional_provider_specific_params": {"pack_id": "compliance.regulatory_pii_guard.v1"}}"#,
            200,
        ),
        (
            r#"{"input_type": "request", "texts": null, "additional_provider_specific_params": {"pack_id": "custom.test_ids.v1"}}"#,
            200,
        ),
        (r#"{"input_type": "request", "texts": []}"#, 400),
        (r#"{"input_type": "prompt", "texts": []}"#, 400),
        (
            r#"{"input_type": "request", "texts": [], "additional_provider_specific_params": {"pack_id": "nope"}}"#,
            404,
        ),
    ] {
        let (s, _) = c.check(&app, post(litellm, body)).await;
        assert_eq!(s, want, "{body}");
    }
    // Envoy's ext_authz checks: every method, any body.
    for (m, body, want) in [
        (
            "POST",
            r#"{"model": "m", "messages": [{"role": "user", "content": "SSN 123-45-6789"}]}"#,
            403,
        ),
        (
            "POST",
            r#"{"model": "m", "prompt": "mail bob@example.com"}"#,
            200,
        ),
        ("GET", "", 200),
        ("PUT", "x", 200),
        ("PATCH", "x", 200),
        ("DELETE", "x", 200),
        ("OPTIONS", "", 200),
    ] {
        let req = Request::builder()
            .method(m)
            .uri("/envoy/ext_authz/v1/chat/completions")
            .header("x-helixor-pack", "compliance.regulatory_pii_guard.v1")
            .body(Body::from(body))
            .unwrap();
        assert_eq!(c.check(&app, req).await.0, want, "{m} {body}");
    }
    let big = format!(r#"{{"text": "{}"}}"#, "x".repeat(5000));
    for path in [
        "/evaluate",
        "/v1/evaluate",
        "/evaluate/batch",
        "/v1/evaluate/stream",
        litellm,
    ] {
        assert_eq!(c.check(&app, post(path, &big)).await.0, 413);
        let req = Request::post(path).body(Body::from("{}")).unwrap();
        assert_eq!(c.check(&app, req).await.0, 415);
    }
    for path in [
        "/healthz",
        "/readyz",
        "/v1/health",
        "/v1/status",
        "/v1/packs",
        "/metrics",
    ] {
        assert_eq!(c.check(&app, get(path)).await.0, 200, "{path}");
    }
    assert_eq!(c.check(&app, post("/admin/reload", "")).await.0, 200);
    let (_, status) = c.check(&app, get("/v1/status")).await;
    assert_eq!(status["last_reload"]["result"], "unchanged");
    std::fs::write(state.config.packs_dir.join("bad.hxpack"), b"junk").unwrap();
    assert_eq!(c.check(&app, post("/admin/reload", "")).await.0, 409);
    c.check(&app, get("/v1/status")).await;
    state.begin_drain();
    assert_eq!(c.check(&app, get("/readyz")).await.0, 503);
    assert_eq!(c.check(&app, get("/v1/health")).await.0, 503);

    // An expired license.
    let (app, _) = app_for(&fx, |_| {}, true);
    for (path, body) in [
        (
            "/evaluate",
            r#"{"text": "x", "pack_id": "custom.test_ids.v1"}"#,
        ),
        (
            "/v1/evaluate",
            r#"{"text": "x", "pack_id": "custom.test_ids.v1"}"#,
        ),
        ("/evaluate/batch", r#"{"items": []}"#),
        (
            "/beta/litellm_basic_guardrail_api",
            r#"{"input_type": "request", "texts": ["x"]}"#,
        ),
    ] {
        assert_eq!(c.check(&app, post(path, body)).await.0, 503);
    }
    assert_eq!(c.check(&app, get("/readyz")).await.0, 503);
    c.check(&app, get("/v1/status")).await;

    // No generation at all.
    let app = router(AppState::new(Config::with_packs_dir(fx.path().join("none")), None).unwrap());
    c.check(&app, get("/v1/status")).await;
    c.check(&app, get("/v1/packs")).await;
    assert_eq!(
        c.check(&app, post("/evaluate", r#"{"text": "x"}"#)).await.0,
        503
    );

    // Answers over limits.max_response_bytes.
    let fx3 = Fixture::new();
    let (app, _) = app_for(&fx3, |cfg| cfg.limits.max_response_bytes = 600, false);
    let dense = format!(
        r#"{{"text": "{}", "pack_id": "compliance.regulatory_pii_guard.v1"}}"#,
        "a@b.cc ".repeat(100)
    );
    for path in ["/evaluate", "/v1/evaluate"] {
        let (s, v) = c.check(&app, post(path, &dense)).await;
        assert_eq!(s, 413, "{path}");
        assert_eq!(
            v,
            json!({"error": "PayloadTooLargeError", "message": "the answer would be over the 600-byte limit (limits.max_response_bytes)"})
        );
    }

    // Bearer tokens.
    let tokens = fx.path().join("tokens");
    std::fs::write(&tokens, "t0ken\n").unwrap();
    let fx2 = Fixture::new();
    let (app, _) = app_for(&fx2, |cfg| cfg.tokens_file = Some(tokens.clone()), false);
    for Route {
        method: m, path: p, ..
    } in ROUTES
    {
        let req = Request::builder()
            .method(*m)
            .uri(concrete(p))
            .header("content-type", "application/json")
            .body(Body::from(r#"{"text": "x"}"#))
            .unwrap();
        let (s, _) = c.check(&app, req).await;
        let exempt = ["/healthz", "/readyz", "/metrics", "/v1/health"].contains(p);
        assert_eq!(s == 401, !exempt, "{m} {p}: {s}");
    }

    // Every operation was exercised with at least its 200 (or 409) answer.
    for Route {
        method: m, path: p, ..
    } in ROUTES.iter().filter(|r| r.documented)
    {
        assert!(
            c.seen
                .iter()
                .any(|(sm, sp, s)| sm == &m.to_lowercase() && *sp == doc_path(p) && *s < 300),
            "{m} {p} never answered 2xx"
        );
    }
    let _ = test_playbook;
}
