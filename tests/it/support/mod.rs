//! Helpers shared by the integration tests: the CLI sandbox ([`cli`]), the
//! serve-mode fixtures and the real server ([`server`]), the OpenAPI
//! checks ([`openapi`]), requests through a `Router` ([`http`]), child
//! processes without the caller's `HELIXOR_*` and proxy variables
//! ([`scrubbed`]) and evaluators built from YAML ([`compiled_evaluator`],
//! [`rules_evaluator`]).

pub mod cli;
pub mod http;
pub mod openapi;
pub mod server;

use helixor::Evaluator;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root (`CARGO_MANIFEST_DIR`).
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A path under the repository root.
pub fn repo_path(rel: &str) -> PathBuf {
    root().join(rel)
}

/// `cmd` without any `HELIXOR_*` or proxy (`*_proxy`, any case) variable
/// of the test process: a child process sees only what its test sets with
/// `Command::env`.
pub fn scrubbed(cmd: &mut Command) -> &mut Command {
    for (k, _) in std::env::vars_os() {
        let name = k.to_string_lossy();
        if name.starts_with("HELIXOR_") || name.to_ascii_lowercase().ends_with("_proxy") {
            cmd.env_remove(&k);
        }
    }
    cmd
}

/// [`helixor::testing::compiled_evaluator`]: the engine of a playbook as
/// `helixor-pack test` builds it (a version-2 playbook runs its own
/// declarations).
pub fn compiled_evaluator(yaml: &[u8], name: &str) -> Evaluator {
    helixor::testing::compiled_evaluator(yaml, name).unwrap()
}

/// [`compiled_evaluator`] of a file under the repository root.
pub fn compiled_evaluator_file(rel: &str) -> Evaluator {
    let bytes = std::fs::read(repo_path(rel)).unwrap();
    compiled_evaluator(&bytes, rel)
}

/// [`helixor::testing::rules_evaluator`]: the version-1 engine of a
/// playbook's custom rules, as pack `pack_id` at `version`.
pub fn rules_evaluator(pack_id: &str, version: &str, yaml: &str) -> Evaluator {
    helixor::testing::rules_evaluator(pack_id, version, yaml).unwrap()
}
