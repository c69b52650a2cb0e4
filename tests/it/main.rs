//! The integration tests: one test crate, so the library and its
//! dependencies are linked into one binary instead of one per file. Each
//! module was a test binary of its own; the helpers they share are in
//! [`support`]. Run one module with a filter on its path, e.g.
//! `cargo test --test it stream_props::`.
//!
//! The tests run on threads of one process: none sets an environment
//! variable of the process or changes its working directory (a child
//! process gets its variables through `Command::env`), and the caches of
//! compiled evaluators (`OnceLock`) are read-only once built.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod support;

mod catalog;
mod checksum_oracle;
mod cli;
mod cli_sdk;
mod cli_sign;
mod cli_stream;
mod cli_test;
mod deploy;
mod fuzz_replay;
mod golden;
mod props;
mod receipt;
mod server_config;
mod server_connections;
mod server_decision_log;
mod server_e2e;
mod server_ext_proc;
mod server_hardening;
mod server_openapi;
mod server_router;
mod server_signed;
mod server_stream;
mod server_stream_attacks;
mod stream_props;
mod v2_differential;
