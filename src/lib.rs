//! Helixor pack runtime: signed licenses, sealed policy packs, a
//! deterministic evaluation engine and the `helixor-pack` tool.
//!
//! The public surface is re-exported here, by layer, each layer depending
//! only on those before it; the modules behind it are private except the
//! five noted at their declaration:
//!
//! - foundations: error names and exit codes ([`ErrorName`], [`Named`]),
//!   canonical JSON ([`canonical_json`]), the `.hxpack` header
//!   ([`SealedPack`], [`PackError`]); keys, AEAD, sealing and opening are
//!   crate-internal (a pack is sealed for, and opened with, a
//!   [`VerifiedLicense`] only), as are size-capped reads, license globs and
//!   atomic file writes;
//! - licenses ([§2](docs/formats.md#s2)): parsing, the validity window and entitlements
//!   ([`License`]), verification ([`VerifiedLicense`], the only kind that
//!   opens or seals a pack), trusted keys ([`IssuerKeys`]), the lookup order
//!   ([`LicenseArgs`]) and issuing ([`issue_license`], [`keygen`]);
//! - playbooks and the compiler ([§4](docs/formats.md#s4)): YAML playbooks
//!   ([`parse_document`]), compile-time checks ([`check_declarations`],
//!   [`CustomRule`]), the example pack's declarations
//!   ([`EXAMPLE_PLAYBOOK_YAML`], [`CODONS`]), compiling and sealing
//!   ([`compile_in_memory`], [`compile_file`], [`CompiledPlaybook`]);
//!   regexes and their cost check are in [`pattern`], the checksum
//!   validators of version-2 codons ([§16.2](docs/codons.md#s16-2)) in [`checksum`], the SDK
//!   manifest is crate-internal;
//! - the engine ([§6](docs/evaluation.md#s6), [§11](docs/streaming.md#s11), [§15](docs/evasion.md#s15)): an [`Evaluator`] turns a payload into a
//!   [`Decision`], and a [`StreamSession`] releases a text arriving in
//!   pieces as soon as it is final;
//! - pack loading ([§5](docs/formats.md#s5)): [`load_pack`] turns a file into a
//!   [`LoadedPack`];
//! - policy tests (`*.test.yaml`, [§13](docs/policy-tests.md#s13)) and the `{text, pack_id}`
//!   evaluation request are crate-internal, reached through [`commands`] and
//!   [`server`] (their errors: [`PolicyTestError`], whose subject's error
//!   is a [`SubjectError`] of the layers below, and [`Error`], the root,
//!   which holds every layer's and wraps nothing that wraps it);
//! - [`commands`]: the `helixor-pack` subcommands (the binary only parses flags);
//! - [`server`]: serve mode ([§9](docs/serve.md#s9)): configuration, generations, hot reload, the HTTP API;
//! - [`catalog`]: catalog packs ([§14](docs/catalog.md#s14)): a vendor's catalog server that
//!   seals its playbooks per license, and the `download-pack` client.
//!
//! With the cargo feature `testing` (off by default, never in a shipped
//! build; the crate's own tests and benches and the fuzz crate turn it on),
//! two more modules: `fuzzing`, the fuzz harnesses over fixed keys, nonce
//! and clock, and `testing`, sealing and opening over a raw content key and
//! evaluators straight from YAML.

mod atomic;
mod builtins;
mod canonical;
mod capped;
// Public: `catalog serve` and `download-pack` are two programs in one
// module (`catalog::server`, `catalog::client`), each with its own
// `serve`, `router` and `ROUTES`; the binary and tests/it/catalog.rs name them
// by those paths, which would collide with serve mode's at the root.
pub mod catalog;
// Public: the validators are named by `checksum:` in playbooks, and the
// python-stdnum oracle test (tests/it/checksum_oracle.rs) checks each one.
pub mod checksum;
// Public: one function per subcommand, named after it (`compile`, `run`,
// `test`, `inspect`…); at the root those names would not say what they do.
pub mod commands;
mod compiler;
mod condition;
mod container;
mod crypto;
pub mod decision_log;
mod declared;
mod engine;
mod error;
// Only with the `testing` feature (and in the unit tests): the fuzz
// harnesses sign licenses and seal packs with fixed keys and a fixed nonce.
#[cfg(any(test, feature = "testing"))]
pub mod fuzzing;
mod glob;
mod json_text;
mod license;
mod manifest;
mod pack;
// Public: the pattern-cost example and the engine bench measure regex
// compilation and the cost check ([§11.4](docs/limits.md#s11-4)) below any playbook
// (`pattern::compile`, `pattern::check_cost`, `pattern::cost`); no other
// caller needs them.
pub mod pattern;
mod playbook;
mod policy_test;
mod program;
mod redacted;
mod request;
mod rules;
pub mod sdk;
mod signature;
// Public: the serve-mode tests build configurations, generations and
// routers by hand and check the route table against the OpenAPI documents
// and the deployment (`server::config`, `server::generation::Snapshot`,
// `server::routes::ROUTES`, `server::ext_proc`).
pub mod server;
// Only with the `testing` feature (and in the unit tests): sealing and
// opening over a raw content key, for the tests of the container and of the
// load-time checks, and evaluators straight from YAML.
#[cfg(any(test, feature = "testing"))]
pub mod testing;

// Foundations ([§1](docs/formats.md#s1), [§3](docs/formats.md#s3), [§4.3](docs/errors.md#s4-3)).
pub use canonical::{to_string as canonical_json, NotFinite};
pub use container::{PackError, SealedPack};
pub use error::{Cause, ErrorName, Named};

// Licenses ([§2](docs/formats.md#s2)).
pub use license::{
    issue_license, keygen, IssueRequest, IssuerKeys, KeygenOutput, License, LicenseArgs,
    LicenseError, VerifiedLicense, Window,
};

// Playbooks and the compiler ([§4](docs/formats.md#s4)).
pub use builtins::{Codon, Validator, CODONS, EXAMPLE_PLAYBOOK_YAML};
pub use compiler::{
    compile_file, compile_in_memory, compile_playbook, CompileOutput, CompiledPlaybook, Entitlement,
};
pub use playbook::{pack_id, pack_version, parse_document, Document, PlaybookError};
pub use rules::{check_declarations, CustomRule, RuleAction, RuleType};

// The engine ([§6](docs/evaluation.md#s6), [§11](docs/streaming.md#s11), [§15](docs/evasion.md#s15)).
pub use engine::{
    Blocked, Decision, Evaluator, Normalize, OwnedStreamSession, Released, Releases, Session,
    Severity, Source, StreamOptions, StreamSession, Trigger, BLOCKED_TEXT, COST_ACTION,
    COST_REASON, DEFAULT_MAX_HOLDBACK_CHARS, DEFAULT_MAX_SESSION_MS, HOLDBACK_ACTION,
    HOLDBACK_REASON, PERMIT_ACTION,
};

// Pack loading ([§5](docs/formats.md#s5)).
pub use pack::{load_pack, load_pack_file, load_signed_pack, LoadedPack, RuleSummary};
pub use signature::{
    read_signing_key, signature_path, PackSignature, PackSigners, Sequences, SignatureFailure,
    SignatureFile, SignatureInfo, MAX_SIGNATURE_BYTES, PACK_SIGNERS_ENV, SIGNATURE_FORMAT,
};

// Policy tests ([§13](docs/policy-tests.md#s13)), driven by `commands::test`.
pub use policy_test::{PolicyTestError, SubjectError};

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
    /// A decision log problem ([§19](docs/guides/auditing.md#s19)).
    #[error(transparent)]
    DecisionLog(#[from] crate::decision_log::LogError),
    /// An error another Helixor service answered with (the catalog's
    /// refusal of `download-pack`): its name and message, as sent.
    #[error("{message}")]
    Remote {
        /// The [§4.3](docs/errors.md#s4-3) name the service answered.
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
            Self::DecisionLog(crate::decision_log::LogError::Io(_)) => ErrorName::IoError,
            Self::DecisionLog(_) => ErrorName::DecisionLogError,
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
