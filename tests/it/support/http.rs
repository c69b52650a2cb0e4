//! Requests through a router in this process (`tower::ServiceExt::oneshot`),
//! the answer read whole.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

/// An answer, read whole.
pub struct Resp {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub bytes: Bytes,
    /// The body as text (lossy: a body that is not UTF-8 shows U+FFFD).
    pub text: String,
}

impl Resp {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes).unwrap_or_else(|e| panic!("{e}: {}", self.text))
    }

    /// The `error` name of an error answer (which must have a `message`).
    pub fn error(&self) -> String {
        let v = self.json();
        assert!(v["message"].is_string(), "{v}");
        v["error"].as_str().unwrap().to_string()
    }

    /// The `content-type` header as sent, if any.
    pub fn content_type(&self) -> Option<String> {
        self.headers
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string())
    }

    /// The media type of `content-type`, without its parameters (empty
    /// when there is none).
    pub fn mime(&self) -> String {
        self.content_type()
            .unwrap_or_default()
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_string()
    }
}

/// Sends `req` to `app` and reads the whole answer.
pub async fn send(app: &Router, req: Request<Body>) -> Resp {
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    Resp {
        status,
        headers,
        text: String::from_utf8_lossy(&bytes).into_owned(),
        bytes,
    }
}

/// `GET path`.
pub async fn get(app: &Router, path: &str) -> Resp {
    send(app, Request::get(path).body(Body::empty()).unwrap()).await
}

/// `POST path` with a JSON body.
pub async fn post_json(app: &Router, path: &str, body: &str) -> Resp {
    send(app, json_request(path, body)).await
}

/// A `POST path` request with `content-type: application/json`.
pub fn json_request(path: &str, body: &str) -> Request<Body> {
    Request::post(path)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}
