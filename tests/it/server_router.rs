//! Serve mode through `tower::ServiceExt::oneshot`: every route and every
//! error status of [§9.4](docs/http-api.md#s9-4), without a socket.

use crate::support::http::{get, post_json, send};
use crate::support::server::{test_playbook, Fixture, TEST_PACK};
use axum::body::{Body, Bytes};
use axum::http::{Request, StatusCode};
use axum::Router;
use helixor::server::{router, AppState, Config, Generation, Route, Sources, ROUTES};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;

const PII_PACK: &str = "compliance.regulatory_pii_guard.v1";

struct Setup {
    fx: Fixture,
    state: Arc<AppState>,
    app: Router,
    packs_dir: PathBuf,
}

/// A generation of the PII pack and the test pack (or only the test pack).
fn setup_with(both_packs: bool, tweak: impl FnOnce(&mut Config)) -> Setup {
    let fx = Fixture::new();
    let license = fx.license();
    let packs_dir = fx.path().join("packs");
    if both_packs {
        fx.packs(&license, &packs_dir, "1.0.0");
    } else {
        std::fs::create_dir_all(&packs_dir).unwrap();
        fx.compile_text(
            &license,
            &test_playbook("1.0.0"),
            &packs_dir.join("ids.hxpack"),
        );
    }
    let mut config = Config::with_packs_dir(&packs_dir);
    config.license = Some(license);
    config.issuer_keys = Some(fx.issuer_dir.clone());
    tweak(&mut config);
    let generation = Generation::load(&Sources::from_config(&config), 1).unwrap();
    let state = AppState::new(config, Some(generation)).unwrap();
    let app = router(Arc::clone(&state));
    Setup {
        fx,
        state,
        app,
        packs_dir,
    }
}

fn setup() -> Setup {
    setup_with(true, |_| {})
}

#[tokio::test]
async fn every_route_in_the_table_is_served() {
    let s = setup();
    for Route { method, path, .. } in ROUTES {
        let req = Request::builder()
            .method(*method)
            .uri(*path)
            .header("content-type", "application/json")
            .body(Body::from(
                r#"{"text":"x","pack_id":"custom.test_ids.v1","items":[]}"#,
            ))
            .unwrap();
        let r = send(&s.app, req).await;
        assert_ne!(
            r.status,
            StatusCode::NOT_FOUND,
            "{method} {path}: {}",
            r.text
        );
        assert_ne!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
    }
}

#[tokio::test]
async fn evaluate_returns_the_decision_and_the_generation() {
    let s = setup();
    let r = post_json(
        &s.app,
        "/evaluate",
        r#"{"text": "See TCK-123456 or mail bob@example.com", "pack_id": "custom.test_ids.v1"}"#,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.headers["content-type"], "application/json");
    let d = r.json();
    assert_eq!(d["action"], "redact_ticket_id");
    assert_eq!(d["severity"], "WARNING");
    assert_eq!(
        d["clean_text"],
        "See [REDACTED_TICKET_ID] or mail [REDACTED_EMAIL]"
    );
    assert_eq!(d["pack_id"], TEST_PACK);
    assert_eq!(d["pack_version"], "1.0.0");
    assert_eq!(d["generation"], 1);
    assert_eq!(d["triggers"][0]["spans"], json!([[4, 14]]));
    assert!(d["receipt_hash"].as_str().unwrap().starts_with("hx_proof_"));
    assert!(d["latency_us"].is_number());
    assert!(d.get("remedy").is_none());
    let keys: Vec<&str> = d.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys.len(), 11, "{keys:?}");
}

#[tokio::test]
async fn v1_evaluate_adds_remedy_with_categories_in_trigger_order() {
    let s = setup();
    let r = post_json(
        &s.app,
        "/v1/evaluate",
        r#"{"text": "TCK-123456 ssn 123-45-6789 ip 10.1.2.3 mail a@b.io", "pack_id": "custom.test_ids.v1"}"#,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    let d = r.json();
    assert_eq!(d["action"], "block_glba_ssn_leakage");
    assert_eq!(d["generation"], 1);
    assert_eq!(
        d["remedy"],
        json!({
            "clean_text": "[BLOCKED: Prohibited Content]",
            "redacted_categories": ["ticket_id", "SSN (GLBA/FCRA)", "Email (GDPR/CCPA)", "IP Address (GDPR)"]
        })
    );
}

#[tokio::test]
async fn pack_choice_rules() {
    // Two packs and no pack_id: 400; unknown: 404; default_pack: used.
    let s = setup();
    let r = post_json(&s.app, "/evaluate", r#"{"text": "hi"}"#).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.error(), "InvalidRequestError");
    assert!(r.json()["message"].as_str().unwrap().contains("pack_id"));
    let r = post_json(
        &s.app,
        "/evaluate",
        r#"{"text": "hi", "pack_id": "nope.v1"}"#,
    )
    .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.error(), "PackNotFoundError");
    let r = post_json(&s.app, "/evaluate", r#"{"text": "hi", "pack_id": null}"#).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);

    let s = setup_with(true, |c| c.default_pack = Some(PII_PACK.into()));
    let r = post_json(&s.app, "/evaluate", r#"{"text": "hi"}"#).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json()["pack_id"], PII_PACK);

    let s = setup_with(true, |c| c.default_pack = Some("gone.v1".into()));
    let r = post_json(&s.app, "/evaluate", r#"{"text": "hi"}"#).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.error(), "PackNotFoundError");

    // One pack: no pack_id needed.
    let s = setup_with(false, |_| {});
    let r = post_json(&s.app, "/evaluate", r#"{"text": "TCK-000001"}"#).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json()["pack_id"], TEST_PACK);
}

#[tokio::test]
async fn bad_bodies_are_400_and_never_echo_the_payload() {
    let s = setup_with(false, |_| {});
    let secret = "SECRET-123-45-6789";
    for body in [
        format!(r#"{{"text": "{secret}""#),
        format!(r#"["{secret}"]"#),
        "42".to_string(),
        format!(r#""{secret}""#),
        format!(r#"{{"txt": "{secret}"}}"#),
        r#"{"text": 5}"#.to_string(),
        r#"{"text": null}"#.to_string(),
        format!(r#"{{"text": "{secret}", "pack_id": 7}}"#),
        format!(r#"{{"text": "{secret}", "pack_id": ["{secret}"]}}"#),
        String::new(),
        "\u{0}\u{1}".to_string(),
        // Two `text`s: two parsers could judge different ones ([§9.1](docs/configuration.md#s9-1)).
        format!(r#"{{"text": "ok", "text": "{secret}"}}"#),
        format!(r#"{{"text": "{secret}", "pack_id": "a", "pack_id": "b"}}"#),
    ] {
        let r = post_json(&s.app, "/evaluate", &body).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.text);
        assert_eq!(r.error(), "InvalidRequestError");
        assert!(!r.text.contains("SECRET"), "{}", r.text);
        assert!(!r.text.contains("123-45"), "{}", r.text);
    }
    let r = send(
        &s.app,
        Request::post("/evaluate")
            .header("content-type", "application/json")
            .body(Body::from(vec![b'"', 0xff, 0xfe, b'"']))
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn content_type_is_checked_415() {
    let s = setup_with(false, |_| {});
    let r = send(
        &s.app,
        Request::post("/evaluate")
            .body(Body::from(r#"{"text":"x"}"#))
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(r.error(), "UnsupportedMediaTypeError");
    for ct in ["text/plain", "application/x-www-form-urlencoded", "json"] {
        let r = send(
            &s.app,
            Request::post("/evaluate/batch")
                .header("content-type", ct)
                .body(Body::from(r#"{"items":[]}"#))
                .unwrap(),
        )
        .await;
        assert_eq!(r.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{ct}");
        assert_eq!(r.error(), "UnsupportedMediaTypeError");
    }
    for ct in [
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/vnd.x+json",
    ] {
        let r = send(
            &s.app,
            Request::post("/v1/evaluate")
                .header("content-type", ct)
                .body(Body::from(r#"{"text":"x"}"#))
                .unwrap(),
        )
        .await;
        assert_eq!(r.status, StatusCode::OK, "{ct}");
    }
}

#[tokio::test]
async fn bodies_over_the_limit_are_413() {
    let s = setup_with(false, |c| c.limits.max_body_bytes = 64);
    let big = format!(r#"{{"text": "{}"}}"#, "a".repeat(100));
    let r = post_json(&s.app, "/evaluate", &big).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(r.error(), "PayloadTooLargeError");
    assert!(!r.text.contains("aaaa"));
    // Without Content-Length (a streamed body).
    let r = send(
        &s.app,
        Request::post("/evaluate/batch")
            .header("content-type", "application/json")
            .body(chunked_body(big.clone()).await)
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.text);
    assert_eq!(r.error(), "PayloadTooLargeError");
    let r = post_json(&s.app, "/evaluate", r#"{"text": "small"}"#).await;
    assert_eq!(r.status, StatusCode::OK);
}

/// A body sent in one chunk without `Content-Length`.
async fn chunked_body(text: String) -> Body {
    let (mut tx, body) = http_body_util::channel::Channel::<Bytes, std::io::Error>::new(1);
    tx.send_data(Bytes::from(text)).await.unwrap();
    drop(tx);
    Body::new(body)
}

/// A body whose first chunk arrives and whose end never does (while the
/// returned sender lives).
async fn endless_body() -> (Body, http_body_util::channel::Sender<Bytes, std::io::Error>) {
    let (mut tx, body) = http_body_util::channel::Channel::<Bytes, std::io::Error>::new(1);
    tx.send_data(Bytes::from_static(b"{\"text\": "))
        .await
        .unwrap();
    (Body::new(body), tx)
}

#[tokio::test]
async fn unknown_routes_are_404_and_wrong_methods_405() {
    let s = setup();
    for path in ["/", "/nope", "/evaluate/", "/v2/evaluate", "/admin"] {
        let r = get(&s.app, path).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(r.error(), "NotFoundError");
    }
    let r = get(&s.app, "/evaluate").await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.error(), "MethodNotAllowedError");
    assert_eq!(r.headers["allow"], "POST");
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        let r = send(
            &s.app,
            Request::builder()
                .method(method)
                .uri("/healthz")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
        assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{method}");
        assert_eq!(r.headers["allow"], "GET, HEAD");
        assert_eq!(r.error(), "MethodNotAllowedError");
    }
    let r = send(
        &s.app,
        Request::head("/healthz").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
}

#[tokio::test]
async fn request_ids_are_generated_or_propagated() {
    let s = setup();
    let r = get(&s.app, "/healthz").await;
    let id = r.headers["x-request-id"].to_str().unwrap();
    assert!(id.len() >= 16, "{id}");
    let r = send(
        &s.app,
        Request::get("/nope")
            .header("x-request-id", "abc-123")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(r.headers["x-request-id"], "abc-123");
    for unusable in ["", "a b", &"x".repeat(200)] {
        let r = send(
            &s.app,
            Request::get("/healthz")
                .header("x-request-id", unusable)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
        let id = r.headers["x-request-id"].to_str().unwrap();
        assert!(id.len() >= 16 && id.len() <= 128 && id != unusable, "{id}");
    }
    let r = post_json(&s.app, "/evaluate", "{").await;
    assert!(r.headers.contains_key("x-request-id"));
}

#[tokio::test]
async fn batch_evaluates_every_item_from_one_generation() {
    let s = setup_with(true, |c| c.limits.max_batch_items = 4);
    let r = post_json(
        &s.app,
        "/evaluate/batch",
        r#"{"items": [
            {"text": "TCK-123456", "pack_id": "custom.test_ids.v1"},
            {"text": "hello", "pack_id": "compliance.regulatory_pii_guard.v1"},
            42,
            {"text": "x", "pack_id": "nope.v1"}
        ]}"#,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let v = r.json();
    assert_eq!(v["generation"], 1);
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 4);
    assert_eq!(results[0]["action"], "redact_ticket_id");
    assert!(results[0].get("generation").is_none());
    assert_eq!(results[1]["action"], "permit_clean_payload");
    assert_eq!(results[2]["error"], "InvalidRequestError");
    assert_eq!(results[3]["error"], "PackNotFoundError");
    // No pack_id with two packs: a per-item error.
    let r = post_json(
        &s.app,
        "/evaluate/batch",
        r#"{"items": [{"text": "a"}, {"txt": 1}]}"#,
    )
    .await;
    let v = r.json();
    assert_eq!(v["results"][0]["error"], "InvalidRequestError");
    assert_eq!(v["results"][1]["error"], "InvalidRequestError");

    let r = post_json(&s.app, "/evaluate/batch", r#"{"items": []}"#).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json()["results"], json!([]));

    let five = r#"{"items": [{"text":"a"},{"text":"a"},{"text":"a"},{"text":"a"},{"text":"a"}]}"#;
    let r = post_json(&s.app, "/evaluate/batch", five).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.error(), "InvalidRequestError");
    for bad in [
        r#"{"items": {}}"#,
        r#"{"text": "x"}"#,
        "[]",
        r#"{"items": "abc"}"#,
    ] {
        let r = post_json(&s.app, "/evaluate/batch", bad).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(r.error(), "InvalidRequestError");
    }
}

#[tokio::test]
async fn probes_status_packs_and_metrics() {
    let s = setup();
    let r = get(&s.app, "/healthz").await;
    assert_eq!(
        (r.status, r.json()),
        (StatusCode::OK, json!({"status": "ok"}))
    );
    let r = get(&s.app, "/readyz").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json(), json!({"status": "ready", "generation": 1}));
    let r = get(&s.app, "/v1/health").await;
    assert_eq!(
        r.json(),
        json!({"status": "healthy", "version": helixor::VERSION, "generation": 1})
    );

    let r = get(&s.app, "/v1/status").await;
    assert_eq!(r.status, StatusCode::OK);
    let v = r.json();
    assert_eq!(v["version"], helixor::VERSION);
    assert_eq!(v["generation"], 1);
    assert!(v["loaded_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(v["last_reload"], Value::Null);
    let lic = &v["license"];
    assert_eq!(lic["license_id"], "lic_test_0");
    assert_eq!(lic["valid_now"], true);
    assert!(lic["seconds_left"].as_i64().unwrap() > 0);
    assert_eq!(lic["issuer_key_id"], "test-issuer");
    assert!(lic.get("content_key").is_none());
    let packs = v["packs"].as_array().unwrap();
    assert_eq!(packs.len(), 2);
    assert_eq!(packs[0]["pack_id"], PII_PACK);
    assert_eq!(packs[1]["rules"], 1);
    // Version-1 packs run the example pack's six codons and four hard rules.
    assert_eq!(
        (
            &packs[1]["schema_version"],
            &packs[1]["codons"],
            &packs[1]["hard_rules"]
        ),
        (&json!(1), &json!(6), &json!(4))
    );
    // No key material anywhere.
    let license_text = std::fs::read_to_string(s.state.config.license.clone().unwrap()).unwrap();
    let lic_json: Value = serde_json::from_str(&license_text).unwrap();
    let key = lic_json["content_key"].as_str().unwrap();
    assert!(!r.text.contains(key));

    let r = get(&s.app, "/v1/packs").await;
    assert_eq!(r.json()["packs"], v["packs"]);

    post_json(
        &s.app,
        "/evaluate",
        r#"{"text":"TCK-123456","pack_id":"custom.test_ids.v1"}"#,
    )
    .await;
    get(&s.app, "/does/not/exist").await;
    let r = get(&s.app, "/metrics").await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    for needle in [
        "helixor_build_info{version=\"",
        "helixor_generation 1",
        "helixor_packs_loaded 2",
        "helixor_last_reload_successful 1",
        "helixor_license_expiry_timestamp_seconds ",
        "helixor_last_reload_success_timestamp_seconds ",
        "helixor_reloads_total{result=\"success\"} 0",
        "helixor_evaluations_total{action=\"redact_ticket_id\",pack_id=\"custom.test_ids.v1\"} 1",
        "helixor_triggers_total{pack_id=\"custom.test_ids.v1\",rule_id=\"ticket_id\",severity=\"WARNING\"} 1",
        "helixor_evaluation_duration_seconds_bucket{le=\"0.000001\"}",
        "helixor_http_requests_total{method=\"POST\",route=\"/evaluate\",status=\"200\"} 1",
        "helixor_http_requests_total{method=\"GET\",route=\"unmatched\",status=\"404\"} 1",
        "helixor_http_request_duration_seconds_count{route=\"/evaluate\"} 1",
    ] {
        assert!(r.text.contains(needle), "{needle} missing:\n{}", r.text);
    }
    assert!(!r.text.contains("/does/not/exist"));
}

#[tokio::test]
async fn admin_reload_success_unchanged_and_failure() {
    let s = setup_with(false, |_| {});
    let r = post_json(&s.app, "/admin/reload", "").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json(), json!({"result": "unchanged", "generation": 1}));

    // A new pack: success, generation 2.
    let license = s.state.config.license.clone().unwrap();
    s.fx.compile_text(
        &license,
        helixor::EXAMPLE_PLAYBOOK_YAML,
        &s.packs_dir.join("pii.hxpack"),
    );
    let r = send(
        &s.app,
        Request::post("/admin/reload").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(r.json(), json!({"result": "success", "generation": 2}));
    let r = post_json(
        &s.app,
        "/evaluate",
        r#"{"text":"x","pack_id":"compliance.regulatory_pii_guard.v1"}"#,
    )
    .await;
    assert_eq!(r.json()["generation"], 2);

    // A corrupted pack: 409, generation 2 keeps serving.
    std::fs::write(s.packs_dir.join("zz.hxpack"), b"HXPK garbage").unwrap();
    let r = post_json(&s.app, "/admin/reload", "").await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    let v = r.json();
    assert_eq!(v["result"], "failure");
    assert_eq!(v["error"], "PackFormatError");
    assert_eq!(v["generation"], 2);
    assert!(v["message"].as_str().unwrap().contains("zz.hxpack"));
    let r = get(&s.app, "/v1/status").await;
    let st = r.json();
    assert_eq!(st["generation"], 2);
    assert_eq!(st["last_reload"]["result"], "failure");
    assert_eq!(st["last_reload"]["error"], "PackFormatError");
    let r = get(&s.app, "/metrics").await;
    assert!(r
        .text
        .contains("helixor_reloads_total{result=\"failure\"} 1"));
    assert!(r
        .text
        .contains("helixor_reloads_total{result=\"success\"} 1"));
    assert!(r
        .text
        .contains("helixor_reloads_total{result=\"unchanged\"} 1"));
    assert!(r.text.contains("helixor_last_reload_successful 0"));

    // Duplicate pack ids: PackFormatError naming both files.
    std::fs::remove_file(s.packs_dir.join("zz.hxpack")).unwrap();
    std::fs::copy(
        s.packs_dir.join("ids.hxpack"),
        s.packs_dir.join("ids2.hxpack"),
    )
    .unwrap();
    let r = post_json(&s.app, "/admin/reload", "").await;
    let v = r.json();
    assert_eq!(v["error"], "PackFormatError");
    let m = v["message"].as_str().unwrap();
    assert!(m.contains("ids.hxpack") && m.contains("ids2.hxpack"), "{m}");

    // Empty packs directory: PackNotFoundError.
    for f in std::fs::read_dir(&s.packs_dir).unwrap() {
        std::fs::remove_file(f.unwrap().path()).unwrap();
    }
    let r = post_json(&s.app, "/admin/reload", "").await;
    assert_eq!(r.json()["error"], "PackNotFoundError");
    // A license replaced by garbage: LicenseError, still generation 2.
    std::fs::write(&license, b"not a license").unwrap();
    let r = post_json(&s.app, "/admin/reload", "").await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert_eq!(r.json()["error"], "LicenseError");
    let r = post_json(
        &s.app,
        "/evaluate",
        r#"{"text":"x","pack_id":"custom.test_ids.v1"}"#,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json()["generation"], 2);
}

#[tokio::test]
async fn no_generation_is_503_service_unavailable() {
    let fx = Fixture::new();
    let mut config = Config::with_packs_dir(fx.path().join("none"));
    config.license = Some(fx.path().join("missing.hxlic"));
    let state = AppState::new(config, None).unwrap();
    let app = router(state);
    let r = post_json(&app, "/evaluate", r#"{"text":"x"}"#).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.error(), "ServiceUnavailableError");
    let r = post_json(&app, "/evaluate/batch", r#"{"items":[]}"#).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    let r = get(&app, "/readyz").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.error(), "ServiceUnavailableError");
    let r = get(&app, "/v1/health").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.json()["status"], "unavailable");
    let r = get(&app, "/v1/status").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json()["generation"], Value::Null);
    assert_eq!(get(&app, "/healthz").await.status, StatusCode::OK);
    let r = post_json(&app, "/admin/reload", "").await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert_eq!(r.json()["error"], "LicenseNotFoundError");
    assert_eq!(r.json()["generation"], 0);
}

#[tokio::test]
async fn expired_license_is_503_license_expired_but_status_answers() {
    let fx = Fixture::new();
    let now = OffsetDateTime::now_utc().replace_nanosecond(0).unwrap();
    let license = fx.license_window(
        now - time::Duration::hours(2),
        now - time::Duration::hours(1),
    );
    let packs_dir = fx.path().join("packs");
    std::fs::create_dir_all(&packs_dir).unwrap();
    fx.compile_text(&license, &test_playbook("1"), &packs_dir.join("ids.hxpack"));
    let mut config = Config::with_packs_dir(&packs_dir);
    config.license = Some(license);
    config.issuer_keys = Some(fx.issuer_dir.clone());
    let sources = Sources::from_config(&config);
    // Loaded while it was valid (90 minutes ago), expired now.
    let generation = Generation::build(
        helixor::server::generation::Snapshot::read(&sources),
        1,
        now - time::Duration::minutes(90),
        &helixor::Sequences::default(),
    )
    .unwrap();
    let app = router(AppState::new(config, Some(generation)).unwrap());
    let r = post_json(&app, "/evaluate", r#"{"text":"x"}"#).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.error(), "LicenseExpiredError");
    let r = post_json(&app, "/v1/evaluate", r#"{"text":"x"}"#).await;
    assert_eq!(r.error(), "LicenseExpiredError");
    let r = post_json(&app, "/evaluate/batch", r#"{"items":[{"text":"x"}]}"#).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.error(), "LicenseExpiredError");
    let r = get(&app, "/readyz").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.error(), "LicenseExpiredError");
    let r = get(&app, "/v1/status").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json()["license"]["valid_now"], false);
    assert_eq!(r.json()["license"]["seconds_left"], 0);
    assert_eq!(get(&app, "/metrics").await.status, StatusCode::OK);
    assert_eq!(get(&app, "/healthz").await.status, StatusCode::OK);
}

#[tokio::test]
async fn draining_turns_readiness_off_but_keeps_serving() {
    let s = setup_with(false, |_| {});
    s.state.begin_drain();
    let r = get(&s.app, "/readyz").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.error(), "ServiceUnavailableError");
    let r = post_json(&s.app, "/evaluate", r#"{"text":"x"}"#).await;
    assert_eq!(r.status, StatusCode::OK);
}

#[tokio::test]
async fn bearer_tokens_401_and_exempt_probes() {
    let fx_tokens = tempfile::tempdir().unwrap();
    let tokens = fx_tokens.path().join("tokens");
    let hashed = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(b"hashed-token"))
    };
    std::fs::write(&tokens, format!("# tokens\nraw-token\nsha256:{hashed}\n")).unwrap();
    let s = setup_with(false, |c| c.tokens_file = Some(tokens.clone()));
    let call = |auth: Option<&'static str>| {
        let mut b = Request::post("/evaluate").header("content-type", "application/json");
        if let Some(a) = auth {
            b = b.header("authorization", a);
        }
        b.body(Body::from(r#"{"text":"x"}"#)).unwrap()
    };
    for auth in [
        None,
        Some("Bearer wrong"),
        Some("raw-token"),
        Some("Basic raw-token"),
        Some("Bearer "),
    ] {
        let r = send(&s.app, call(auth)).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{auth:?}");
        assert_eq!(r.error(), "UnauthorizedError");
        assert_eq!(r.headers["www-authenticate"], "Bearer");
    }
    for auth in [
        "Bearer raw-token",
        "Bearer hashed-token",
        "bearer raw-token",
    ] {
        let r = send(&s.app, call(Some(auth))).await;
        assert_eq!(r.status, StatusCode::OK, "{auth}");
    }
    for path in ["/healthz", "/readyz", "/metrics", "/v1/health"] {
        assert_eq!(get(&s.app, path).await.status, StatusCode::OK, "{path}");
    }
    for path in ["/v1/status", "/v1/packs"] {
        assert_eq!(
            get(&s.app, path).await.status,
            StatusCode::UNAUTHORIZED,
            "{path}"
        );
    }
    let r = post_json(&s.app, "/admin/reload", "").await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    // Re-read on reload: the new token works after /admin/reload.
    std::fs::write(&tokens, "new-token\n").unwrap();
    let r = send(
        &s.app,
        Request::post("/admin/reload")
            .header("authorization", "Bearer raw-token")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(r.json()["result"], "success");
    assert_eq!(
        send(&s.app, call(Some("Bearer raw-token"))).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        send(&s.app, call(Some("Bearer new-token"))).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn a_trickling_upload_holds_no_slot_and_times_out_503() {
    let s = setup_with(false, |c| {
        c.limits.max_concurrency = 1;
        c.limits.request_timeout_ms = 1500;
    });
    // One request's body never ends: it holds no slot (a slot is taken only
    // once the whole body has arrived, [§9.1](docs/configuration.md#s9-1)), so others are served.
    let app = s.app.clone();
    let (body, _sender) = endless_body().await;
    let held = tokio::spawn(async move {
        send(
            &app,
            Request::post("/evaluate")
                .header("content-type", "application/json")
                .body(body)
                .unwrap(),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r = post_json(&s.app, "/evaluate", r#"{"text":"x"}"#).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    // Probes are not limited.
    assert_eq!(get(&s.app, "/healthz").await.status, StatusCode::OK);
    // The held request times out: 503 JSON.
    let r = held.await.unwrap();
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text);
    assert_eq!(r.error(), "ServiceUnavailableError");
    // The slot is free again.
    let r = post_json(&s.app, "/evaluate", r#"{"text":"x"}"#).await;
    assert_eq!(r.status, StatusCode::OK);
}

fn litellm_call(body: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut b = Request::post("/beta/litellm_basic_guardrail_api")
        .header("content-type", "application/json");
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(Body::from(body.to_string())).unwrap()
}

#[tokio::test]
async fn litellm_guardrail_pack_choice_auth_and_metrics() {
    let fx_tokens = tempfile::tempdir().unwrap();
    let tokens = fx_tokens.path().join("tokens");
    std::fs::write(&tokens, "guard-key\n").unwrap();
    let s = setup_with(true, |c| c.tokens_file = Some(tokens.clone()));
    let prompt =
        r#"{"input_type": "request", "texts": ["TCK-123456 to bob@example.com"], "images": null}"#;
    // The pack: the body's, then the header's; two packs and neither is a 400.
    let r = send(&s.app, litellm_call(prompt, &[("x-api-key", "guard-key")])).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.error(), "InvalidRequestError");
    let r = send(
        &s.app,
        litellm_call(
            prompt,
            &[("x-api-key", "guard-key"), ("x-helixor-pack", TEST_PACK)],
        ),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.json(),
        json!({"action": "GUARDRAIL_INTERVENED", "texts": ["[REDACTED_TICKET_ID] to [REDACTED_EMAIL]"]})
    );
    let in_body = format!(
        r#"{{"input_type": "request", "texts": ["TCK-123456 to bob@example.com"], "additional_provider_specific_params": {{"pack_id": "{PII_PACK}"}}}}"#
    );
    let r = send(
        &s.app,
        litellm_call(
            &in_body,
            &[
                ("authorization", "Bearer guard-key"),
                ("x-helixor-pack", TEST_PACK),
            ],
        ),
    )
    .await;
    assert_eq!(
        r.json(),
        json!({"action": "GUARDRAIL_INTERVENED", "texts": ["TCK-123456 to [REDACTED_EMAIL]"]})
    );
    let r = send(
        &s.app,
        litellm_call(
            prompt,
            &[("x-api-key", "guard-key"), ("x-helixor-pack", "nope")],
        ),
    )
    .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.error(), "PackNotFoundError");
    // A wrong or missing key is 401; x-api-key is only for gateway routes.
    for headers in [
        vec![],
        vec![("x-api-key", "wrong")],
        vec![("x-api-key", "")],
    ] {
        let r = send(&s.app, litellm_call(prompt, &headers)).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{headers:?}");
    }
    let r = send(
        &s.app,
        Request::post("/evaluate")
            .header("content-type", "application/json")
            .header("x-api-key", "guard-key")
            .body(Body::from(r#"{"text": "x"}"#))
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    // A blocked reply: the reason names the rule, nothing of the value.
    let reply = format!(
        r#"{{"input_type": "response", "texts": ["SSN 123-45-6789"], "additional_provider_specific_params": {{"pack_id": "{PII_PACK}"}}}}"#
    );
    let r = send(&s.app, litellm_call(&reply, &[("x-api-key", "guard-key")])).await;
    assert_eq!(
        r.json(),
        json!({"action": "BLOCKED", "blocked_reason": "Statutory violation: Social Security Number (GLBA / FCRA) detected (RULE-GLBA-SSN-BLOCK)"})
    );
    let metrics = send(
        &s.app,
        Request::get("/metrics").body(Body::empty()).unwrap(),
    )
    .await
    .text;
    for line in [
        r#"helixor_gateway_answers_total{answer="GUARDRAIL_INTERVENED",route="/beta/litellm_basic_guardrail_api"} 2"#,
        r#"helixor_gateway_answers_total{answer="BLOCKED",route="/beta/litellm_basic_guardrail_api"} 1"#,
        r#"helixor_http_requests_total{method="POST",route="/beta/litellm_basic_guardrail_api",status="200"} 3"#,
        r#"helixor_evaluations_total{action="block_glba_ssn_leakage",pack_id="compliance.regulatory_pii_guard.v1"} 1"#,
    ] {
        assert!(metrics.contains(line), "{line}\n{metrics}");
    }
}

#[tokio::test]
async fn envoy_ext_authz_refuses_fatal_prompts_and_tags_the_others() {
    let s = setup();
    let call = |method: &str, path: &str, body: &str| {
        Request::builder()
            .method(method)
            .uri(path)
            .header("x-helixor-pack", PII_PACK)
            .body(Body::from(body.to_string()))
            .unwrap()
    };
    // An SSN in a chat completion: 403 with the OpenAI-style error body.
    let chat = r#"{"model":"m","messages":[{"role":"user","content":"my SSN is 123-45-6789"}]}"#;
    let r = send(
        &s.app,
        call("POST", "/envoy/ext_authz/v1/chat/completions", chat),
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(r.headers["content-type"], "application/json");
    assert_eq!(
        r.json(),
        json!({"error": {
            "message": "Statutory violation: Social Security Number (GLBA / FCRA) detected",
            "type": "helixor_policy_violation",
            "code": "block_glba_ssn_leakage",
        }})
    );
    assert!(!r.text.contains("6789"));
    // An e-mail in an Anthropic system prompt: allowed (ext_authz cannot
    // redact), tagged with the action and the receipt.
    let anthropic = r#"{"model":"c","system":"mail jane@example.com","messages":[{"role":"user","content":"hi"}]}"#;
    let r = send(
        &s.app,
        call("POST", "/envoy/ext_authz/v1/messages", anthropic),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.headers["x-helixor-action"],
        "redact_and_permit_contact_pii"
    );
    let receipt = r.headers["x-helixor-receipt"].to_str().unwrap();
    assert!(receipt.starts_with("hx_proof_"), "{receipt}");
    assert_eq!(r.text, "");
    // Any method, any body: a GET of the model list passes.
    let r = send(&s.app, call("GET", "/envoy/ext_authz/v1/models", "")).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.headers["x-helixor-action"], "permit_clean_payload");
    let r = send(&s.app, call("DELETE", "/envoy/ext_authz/x", "123-45-6789")).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    // A key twice: refused (Envoy denies), as the upstream could read the other value.
    let twice = r#"{"messages":[{"role":"user","content":"SSN 123-45-6789"}],"messages":[]}"#;
    let r = send(
        &s.app,
        call("POST", "/envoy/ext_authz/v1/chat/completions", twice),
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        r.json(),
        json!({"error": "InvalidRequestError", "message": "the JSON body has an object with the same key twice"})
    );
    // No pack named and two loaded: a 400 (Envoy denies it).
    let r = send(
        &s.app,
        Request::post("/envoy/ext_authz/v1/completions")
            .body(Body::from(r#"{"prompt":"x"}"#))
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let metrics = get(&s.app, "/metrics").await.text;
    for line in [
        r#"helixor_gateway_answers_total{answer="deny",route="/envoy/ext_authz"} 2"#,
        r#"helixor_gateway_answers_total{answer="allow",route="/envoy/ext_authz"} 2"#,
        r#"helixor_http_requests_total{method="POST",route="/envoy/ext_authz/{*path}",status="403"} 1"#,
    ] {
        assert!(metrics.contains(line), "{line}\n{metrics}");
    }
}

/// [§15](docs/evasion.md#s15): `normalize` per request on every evaluate route, and
/// `engine.normalize` as the server's default.
#[tokio::test]
async fn normalize_evasion_per_request_and_as_the_server_default() {
    let ssn = "SSN １２３-４５-６７８９ on file";
    let body = |extra: &str| format!(r#"{{"text": "{ssn}", "pack_id": "{PII_PACK}"{extra}}}"#);
    let s = setup();
    // As written (the default): the full-width SSN passes, and no `normalized`.
    let d = post_json(&s.app, "/evaluate", &body("")).await.json();
    assert_eq!(d["action"], "permit_clean_payload");
    assert!(d.get("normalized").is_none(), "{d}");
    for path in ["/evaluate", "/v1/evaluate"] {
        let r = post_json(&s.app, path, &body(r#", "normalize": "evasion""#)).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        let d = r.json();
        assert_eq!(d["action"], "block_glba_ssn_leakage", "{path}");
        assert_eq!(d["triggers"][0]["spans"], json!([[4, 15]]));
        assert_eq!(d["normalized"], true);
    }
    // A redaction covers the whole evasive value in the original text.
    let r = post_json(
        &s.app,
        "/evaluate",
        &format!(
            r#"{{"text": "mail jane\u200b@example.com or ｊｏｅ＠ｅｘａｍｐｌｅ．ｃｏｍ", "pack_id": "{PII_PACK}", "normalize": "evasion"}}"#
        ),
    )
    .await;
    let d = r.json();
    assert_eq!(d["clean_text"], "mail [REDACTED_EMAIL] or [REDACTED_EMAIL]");
    assert_eq!(d["triggers"][0]["spans"], json!([[5, 22], [26, 41]]));
    // Batch: the body's `normalize` is every item's default; an item's wins.
    let r = post_json(
        &s.app,
        "/evaluate/batch",
        &format!(
            r#"{{"normalize": "evasion", "items": [{}, {}, {}]}}"#,
            body(""),
            body(r#", "normalize": "none""#),
            body(r#", "normalize": "fold""#)
        ),
    )
    .await;
    let v = r.json();
    assert_eq!(v["results"][0]["action"], "block_glba_ssn_leakage");
    assert_eq!(v["results"][1]["action"], "permit_clean_payload");
    assert_eq!(v["results"][2]["error"], "InvalidRequestError");
    assert_eq!(
        v["results"][2]["message"],
        "items[2]: `normalize` must be \"none\" or \"evasion\""
    );
    // A bad value is a 400 that names the field.
    let r = post_json(&s.app, "/evaluate", &body(r#", "normalize": 1"#)).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        r.json()["message"],
        "`normalize` must be a string, not a number"
    );
    // Streaming: the session and the done event.
    let r = post_json(
        &s.app,
        "/v1/evaluate/stream",
        &body(r#", "normalize": "evasion", "chunk_size": 3"#),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let events: Vec<Value> = r
        .text
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let released: String = events.iter().filter_map(|e| e["text"].as_str()).collect();
    assert_eq!(released, "SSN ");
    let blocked = events.iter().find(|e| e["blocked"] == true).unwrap();
    assert_eq!(blocked["action"], "block_glba_ssn_leakage");
    let done = events.last().unwrap();
    assert_eq!(done["done"], true);
    assert_eq!(done["action"], "block_glba_ssn_leakage");
    assert_eq!(done["normalized"], true);
    // The counter of normalized evaluations (the stream's decision included).
    let m = get(&s.app, "/metrics").await.text;
    let line = m
        .lines()
        .find(|l| l.starts_with("helixor_normalized_evaluations_total{pack_id=\"compliance.regulatory_pii_guard.v1\"}"))
        .unwrap_or_else(|| panic!("{m}"));
    assert!(line.ends_with(" 5"), "{line}");

    // engine.normalize: evasion is the default; a request can still say none.
    let s = setup_with(true, |c| c.normalize = helixor::Normalize::Evasion);
    let d = post_json(&s.app, "/evaluate", &body("")).await.json();
    assert_eq!(d["action"], "block_glba_ssn_leakage");
    let d = post_json(&s.app, "/evaluate", &body(r#", "normalize": "none""#))
        .await
        .json();
    assert_eq!(d["action"], "permit_clean_payload");
    // A text with nothing to normalize decides as it would with none.
    let d = post_json(
        &s.app,
        "/evaluate",
        &format!(r#"{{"text": "café, 会議, SSN 123-45-6789", "pack_id": "{PII_PACK}"}}"#),
    )
    .await
    .json();
    assert_eq!(d["action"], "block_glba_ssn_leakage");
    assert!(d.get("normalized").is_none(), "{d}");
}

/// [§12.4](docs/gateways.md#s12-4) on ext_authz: every string of a body is judged, wherever an
/// agent exchange carries it (each row was allowed before, issue 28).
#[tokio::test]
async fn ext_authz_judges_every_string_of_an_agent_exchange() {
    let s = setup();
    let call = |body: &str| {
        Request::post("/envoy/ext_authz/v1/any")
            .header("x-helixor-pack", PII_PACK)
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap()
    };
    for (row, body) in crate::support::server::agent_bodies("123-45-6789") {
        let r = send(&s.app, call(&body)).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{row}: {}", r.text);
        assert_eq!(r.json()["error"]["code"], "block_glba_ssn_leakage", "{row}");
        assert!(!r.text.contains("6789"), "{row}");
    }
    for (row, body) in crate::support::server::agent_bodies("jane.doe@example.com") {
        let r = send(&s.app, call(&body)).await;
        assert_eq!(r.status, StatusCode::OK, "{row}: {}", r.text);
        assert_eq!(
            r.headers["x-helixor-action"], "redact_and_permit_contact_pii",
            "{row}"
        );
    }
}

/// [§12.4](docs/gateways.md#s12-4): what cannot be judged is refused, with a message that says
/// why (and never a part of the body).
#[tokio::test]
async fn ext_authz_refuses_bodies_it_cannot_judge() {
    let s = setup_with(true, |c| c.limits.max_texts = 8);
    let call = |encodings: &[&str], body: Vec<u8>| {
        let mut b = Request::post("/envoy/ext_authz/v1/chat/completions")
            .header("x-helixor-pack", PII_PACK);
        for e in encodings {
            b = b.header("content-encoding", *e);
        }
        b.body(Body::from(body)).unwrap()
    };
    // A gzip body (the bytes of gzip("SSN 123-45-6789")'s header suffice).
    let gzip = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03".to_vec();
    for lines in [&["gzip"][..], &["identity", "gzip"], &["identity, br"]] {
        let r = send(&s.app, call(lines, gzip.clone())).await;
        assert_eq!(r.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{lines:?}");
        let coding = lines.last().unwrap().rsplit(", ").next().unwrap();
        assert_eq!(
            r.json(),
            json!({"error": "UnsupportedMediaTypeError", "message": format!("the request body is compressed (content-encoding: {coding}); compressed bodies are not inspected: send it uncompressed")}),
        );
    }
    // Not UTF-8: said as it is (it once claimed a duplicate key).
    let r = send(
        &s.app,
        call(&[], b"{\"a\":\"SSN \xff 123-45-6789\"}".to_vec()),
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        r.json(),
        json!({"error": "InvalidRequestError", "message": "the body is not UTF-8 text (invalid byte at offset 10)"})
    );
    // A text that only starts like JSON, declared as text: one text, judged.
    let r = send(
        &s.app,
        Request::post("/envoy/ext_authz/v1/x")
            .header("x-helixor-pack", PII_PACK)
            .header("content-type", "text/plain")
            .body(Body::from(r#""Hi", she wrote: SSN 123-45-6789"#))
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    // JSON that a lenient upstream parser would read: refused, never passed.
    let r = send(
        &s.app,
        call(&[], br#"{"a": NaN, "b": "123-45-6789"}"#.to_vec()),
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.error(), "InvalidRequestError");
    assert!(!r.text.contains("6789"), "{}", r.text);
    // More strings than limits.max_texts: 413.
    let r = send(
        &s.app,
        call(&[], br#"["1","2","3","4","5","6","7","8","9"]"#.to_vec()),
    )
    .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        r.json(),
        json!({"error": "PayloadTooLargeError", "message": "the body holds more than 8 strings (limits.max_texts)"})
    );
}

/// [§12.4](docs/gateways.md#s12-4) on LiteLLM: the rows and tools it forwards are judged and
/// given back redacted.
#[tokio::test]
async fn litellm_judges_rows_and_tools() {
    let s = setup();
    let rows = |result: &str| {
        json!([{"role": "user", "content": "who is it?"},
               {"role": "tool", "tool_call_id": "c1", "content": result}])
    };
    let body = |result: &str| {
        json!({"input_type": "request", "texts": ["who is it?"], "structured_messages": rows(result)})
            .to_string()
    };
    let headers = [("x-helixor-pack", PII_PACK)];
    let r = send(&s.app, litellm_call(&body("SSN 123-45-6789"), &headers)).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.json(),
        json!({"action": "BLOCKED", "blocked_reason": "Statutory violation: Social Security Number (GLBA / FCRA) detected (RULE-GLBA-SSN-BLOCK)"})
    );
    let r = send(
        &s.app,
        litellm_call(&body("jane.doe@example.com"), &headers),
    )
    .await;
    assert_eq!(
        r.json(),
        json!({"action": "GUARDRAIL_INTERVENED", "structured_messages": rows("[REDACTED_EMAIL]")})
    );
}
