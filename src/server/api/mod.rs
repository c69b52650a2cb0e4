//! Serve mode's own handlers ([§9.4](docs/http-api.md#s9-4), [§11.1](docs/streaming.md#s11-1)): the evaluation routes
//! (`evaluate`), the event stream (`stream`) and the operations routes
//! (`ops`: probes, status, packs, metrics, reload). The gateways' handlers
//! are in [`crate::server::gateway`]. Handlers read bodies through the
//! extractors of [`crate::server::http`] and run their work through
//! [`crate::server::work`]; none names a route or imports the route table.

pub(crate) mod evaluate;
pub(crate) mod ops;
pub(crate) mod stream;
