//! The HTTP kit that serve mode and the catalog server share: the JSON
//! error type and bodies ([`ApiError`], [§9.4](docs/http-api.md#s9-4)), body extractors (content
//! type, size cap, strict JSON), route tables and the router built from
//! one, request ids and the method label, and the accept loop with its
//! connection limits ([§9.1](docs/configuration.md#s9-1)). It knows no route, no handler and no
//! shared state of either server: the extractors read their size cap
//! through [`BodyLimit`].

pub(crate) mod error;
pub(crate) mod extract;
pub(crate) mod listener;
pub(crate) mod request_id;
pub(crate) mod table;

pub use error::{json_response, status_of, ApiError};
pub use request_id::REQUEST_ID_HEADER;
pub use table::{Route, UNMATCHED_ROUTE};

pub(crate) use error::{
    answer_too_large, json_response_capped, layer_error_json, panic_response, LayerMessages,
};
pub(crate) use extract::{
    check_content_type, compressed_reply, compressed_request, content_coding, declared_length,
    declares_over, is_length_limit, too_large, BodyLimit, EvaluateBody, JsonBody, JsonBytes,
    RawBody,
};
pub(crate) use listener::CloseConnection;
pub(crate) use request_id::{drop_unusable_request_id, method_label, usable_request_id};
pub(crate) use table::route_table;
