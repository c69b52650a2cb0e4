//! Request identity shared by every server of the crate: the `x-request-id`
//! header (kept when usable, else generated) and the bounded `method`
//! label of metrics. Reads headers and the method only, never a body.

use axum::extract::Request;
use axum::http::Method;

/// The request id header, taken from the request or generated.
pub const REQUEST_ID_HEADER: &str = "x-request-id";
/// Longest client `x-request-id` kept; a longer one is replaced.
pub const MAX_REQUEST_ID_LEN: usize = 128;

/// An empty, overlong or non-printable `x-request-id` is dropped, so one is generated.
pub(crate) async fn drop_unusable_request_id(mut req: Request) -> Request {
    let unusable = req
        .headers()
        .get(REQUEST_ID_HEADER)
        .is_some_and(|v| !usable_request_id(v.as_bytes()));
    if unusable {
        req.headers_mut().remove(REQUEST_ID_HEADER);
    }
    req
}

/// Whether a client's request id may be kept (and logged): printable
/// ASCII, 1 to [`MAX_REQUEST_ID_LEN`] bytes.
pub(crate) fn usable_request_id(b: &[u8]) -> bool {
    !b.is_empty() && b.len() <= MAX_REQUEST_ID_LEN && b.iter().all(u8::is_ascii_graphic)
}

/// The `method` label: the standard methods, else `other`.
pub(crate) fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::HEAD => "HEAD",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        Method::TRACE => "TRACE",
        Method::CONNECT => "CONNECT",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_short_printable_ids_are_kept() {
        assert!(usable_request_id(b"f3fdf2af-6ae9-42f0"));
        assert!(usable_request_id(&[b'a'; MAX_REQUEST_ID_LEN]));
        assert!(!usable_request_id(&[b'a'; MAX_REQUEST_ID_LEN + 1]));
        assert!(!usable_request_id(b""));
        assert!(!usable_request_id(b"a b"));
        assert!(!usable_request_id(b"a\nb"));
        assert!(!usable_request_id("é".as_bytes()));
    }
}
