//! Helixor pack runtime: signed licenses, sealed policy packs, a
//! deterministic evaluation engine and the `helixor-pack` tool.
//!
//! Layers, each depending only on those before it:
//!
//! - [`error`], [`capped`], [`canonical`], [`glob`], [`crypto`], [`atomic`],
//!   [`container`]: names and exit codes, size-capped reads, canonical JSON,
//!   license globs, keys and AEAD, atomic file writes, the `.hxpack` layout;
//! - [`license`]: parsing, verification, the validity window, issuing;
//! - [`playbook`], [`pattern`], [`builtins`], [`rules`], [`compiler`],
//!   [`manifest`]: YAML playbooks, regexes, the example pack's declarations,
//!   compile-time checks and the SDK manifest;
//! - [`engine`]: evaluation of a payload to a decision, and stream sessions
//!   that release a text arriving in pieces as soon as it is final;
//! - [`pack`]: load-time checks that turn a file into an engine;
//! - [`policy_test`]: policy tests (`*.test.yaml`) run through the compiler
//!   or the pack loader and the engine, with text, JSON and JUnit reports;
//! - [`request`]: the `{text, pack_id}` evaluation request, parsed once for
//!   the CLI and the server (strict JSON: a key twice is refused);
//! - [`commands`]: the `helixor-pack` subcommands (the binary only parses flags);
//! - [`server`]: serve mode (SPEC §9): configuration, generations, hot reload, the HTTP API;
//! - [`catalog`]: catalog packs (SPEC §14): a vendor's catalog server that
//!   seals its playbooks per license, and the `download-pack` client.

pub mod atomic;
pub mod builtins;
pub mod canonical;
pub mod capped;
pub mod catalog;
pub mod commands;
pub mod compiler;
pub mod container;
pub mod crypto;
pub mod engine;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod glob;
pub mod license;
pub mod manifest;
pub mod pack;
pub mod pattern;
pub mod playbook;
pub mod policy_test;
pub mod request;
pub mod rules;
pub mod server;

pub use container::PackError;
pub use engine::{Decision, Evaluator};
pub use error::{ErrorName, Named};
pub use license::{IssuerKeys, License, LicenseError};
pub use pack::LoadedPack;
pub use playbook::PlaybookError;
pub use policy_test::PolicyTestError;

/// Any error the tool or the runtime reports, by layer.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum Error {
    /// A license problem.
    #[error(transparent)]
    License(#[from] LicenseError),
    /// A pack container or load problem.
    #[error(transparent)]
    Pack(#[from] PackError),
    /// A playbook or declaration problem.
    #[error(transparent)]
    Playbook(#[from] PlaybookError),
    /// A policy test file or path problem.
    #[error(transparent)]
    PolicyTest(#[from] PolicyTestError),
    /// An invalid serve configuration.
    #[error("{0}")]
    Config(String),
    /// Wrong command-line arguments.
    #[error("{0}")]
    Usage(String),
    /// A malformed evaluation request or input line.
    #[error("{0}")]
    InvalidRequest(String),
    /// A file with no kind of its own that cannot be read or written, or a
    /// server that cannot be reached (`download-pack`).
    #[error("{0}")]
    Io(String, #[source] Option<crate::error::Cause>),
    /// An error another Helixor service answered with (the catalog's
    /// refusal of `download-pack`): its name and message, as sent.
    #[error("{message}")]
    Remote {
        /// The SPEC §4.3 name the service answered.
        name: ErrorName,
        /// Its message, with where it came from.
        message: String,
    },
}

crate::error::io_constructor!(Error);

impl Named for Error {
    fn name(&self) -> ErrorName {
        match self {
            Self::License(e) => e.name(),
            Self::Pack(e) => e.name(),
            Self::Playbook(e) => e.name(),
            Self::PolicyTest(e) => e.name(),
            Self::Config(_) => ErrorName::ConfigError,
            Self::Usage(_) => ErrorName::UsageError,
            Self::InvalidRequest(_) => ErrorName::InvalidRequestError,
            Self::Io(..) => ErrorName::IoError,
            Self::Remote { name, .. } => *name,
        }
    }

    fn problems(&self) -> &[String] {
        match self {
            Self::Playbook(e) => e.problems(),
            Self::PolicyTest(e) => e.problems(),
            _ => &[],
        }
    }

    fn context(&self) -> Option<String> {
        match self {
            Self::PolicyTest(e) => e.context(),
            _ => None,
        }
    }
}

/// The runtime's version (`helixor_build_info`, `/v1/status`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
