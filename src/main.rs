//! `helixor-pack`: parses flags and dispatches to `helixor::commands`.

use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use helixor::commands::{self, IssueArgs, ManifestSource, RunArgs, RunInput, TestArgs};
use helixor::{Error, LicenseArgs, Named, StreamOptions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ErrorFormat {
    Text,
    Json,
}

/// Helixor pack runtime: compile, inspect and run sealed policy packs, and serve them over HTTP.
#[derive(Debug, Parser)]
#[command(name = "helixor-pack", version, about, propagate_version = true)]
struct Cli {
    /// How errors are written to stderr.
    #[arg(long, global = true, value_enum, default_value = "text")]
    error_format: ErrorFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Args, Clone, Default)]
struct LicenseFlags {
    /// License file (else $HELIXOR_LICENSE_FILE, ./helixor.hxlic, ~/.helixor/helixor.hxlic, ~/.helixor/helixor.lic).
    #[arg(long, value_name = "PATH")]
    license: Option<PathBuf>,
    /// Trusted issuer public keys: a JSON file or a directory of <key_id>.pub files (else $HELIXOR_ISSUER_KEYS, ~/.helixor/issuer-keys/).
    #[arg(long, value_name = "PATH")]
    issuer_keys: Option<PathBuf>,
}

impl From<&LicenseFlags> for LicenseArgs {
    fn from(f: &LicenseFlags) -> Self {
        LicenseArgs {
            license: f.license.clone(),
            issuer_keys: f.issuer_keys.clone(),
            pack_signers: None,
        }
    }
}

/// What a manifest is made of: playbooks and sealed packs, in command-line
/// order, and what opens the packs.
#[derive(Debug, clap::Args, Clone, Default)]
struct ManifestInputs {
    /// A YAML playbook (repeatable).
    #[arg(long, value_name = "FILE")]
    playbook: Vec<PathBuf>,
    /// A sealed pack, opened with the license (repeatable).
    #[arg(long, value_name = "FILE")]
    pack: Vec<PathBuf>,
    #[command(flatten)]
    license: LicenseFlags,
    #[command(flatten)]
    signers: SignerFlags,
}

#[derive(Debug, clap::Args, Clone, Default)]
struct SignerFlags {
    /// Trusted pack signers: a JSON file or a directory of <key_id>.pub files (else $HELIXOR_PACK_SIGNERS). With signers, every pack needs a valid PACK.sig; without, signatures are not checked.
    #[arg(long, value_name = "PATH")]
    pack_signers: Option<PathBuf>,
}

/// The license flags and the pack signers of a command that loads packs.
fn loading(license: &LicenseFlags, signers: &SignerFlags) -> LicenseArgs {
    LicenseArgs {
        pack_signers: signers.pack_signers.clone(),
        ..license.into()
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check a YAML playbook and seal it into a .hxpack for a license.
    Compile {
        /// The YAML playbook.
        #[arg(long, value_name = "FILE")]
        playbook: PathBuf,
        #[command(flatten)]
        license: LicenseFlags,
        /// Where to write the pack.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// Also sign the pack with this signing key (`license keygen`'s .key): writes FILE.sig.
        #[arg(long, value_name = "KEYFILE")]
        sign_key: Option<PathBuf>,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Sign a sealed pack: write its detached Ed25519 signature (default PACK.sig).
    Sign {
        /// The .hxpack file.
        pack: PathBuf,
        /// The signing key (`license keygen`'s .key file).
        #[arg(long, value_name = "KEYFILE")]
        key: PathBuf,
        /// The signature's sequence: higher for each deployment of the pack (default: now, in Unix seconds).
        #[arg(long, value_name = "N")]
        sequence: Option<u64>,
        /// Where to write the signature [default: PACK.sig].
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Load packs and evaluate a payload (or JSON lines) to decisions.
    /// With --stream, filter a pipe: write the cleaned text as it is read (exit 6 when blocked).
    Run {
        /// A pack to load (repeatable).
        #[arg(long = "pack", value_name = "FILE", required = true)]
        packs: Vec<PathBuf>,
        #[command(flatten)]
        license: LicenseFlags,
        #[command(flatten)]
        signers: SignerFlags,
        /// Which loaded pack evaluates (needed when several are loaded).
        #[arg(long, value_name = "ID")]
        pack_id: Option<String>,
        /// The payload, taken as given.
        #[arg(long, value_name = "TEXT", conflicts_with = "input")]
        text: Option<String>,
        /// Read the payload from a file (one trailing newline is dropped, except with --stream).
        #[arg(long, value_name = "FILE")]
        input: Option<PathBuf>,
        /// Read one JSON string or {"text": ...} per line; write one decision per line.
        #[arg(long, conflicts_with = "text")]
        jsonl: bool,
        /// Filter --input or stdin as it arrives: write cleaned text at once, exit 6 with `Blocked: <reason>` on stderr when blocked.
        #[arg(long, conflicts_with_all = ["text", "jsonl"])]
        stream: bool,
        /// With --stream: hold back at least N code points and end releases after whitespace (Python-runtime compatibility).
        #[arg(
            long,
            value_name = "N",
            default_value_t = 0,
            requires = "stream",
            conflicts_with_all = ["text", "jsonl"]
        )]
        lookahead_chars: usize,
        /// With --stream: redact FATAL matches instead of blocking.
        #[arg(long, requires = "stream", conflicts_with_all = ["text", "jsonl"])]
        no_block_on_fatal: bool,
        /// With --stream: block (fail closed) when more than N code points are held back.
        #[arg(
            long,
            value_name = "N",
            default_value_t = helixor::DEFAULT_MAX_HOLDBACK_CHARS,
            value_parser = parse_holdback,
            requires = "stream",
            conflicts_with_all = ["text", "jsonl"]
        )]
        max_holdback_chars: usize,
        /// Match through the evasion view ([§15](docs/evasion.md#s15)): other scripts' digits, full-width forms, joiners and soft hyphens inside values.
        #[arg(long, value_name = "MODE", default_value = "none", value_parser = ["none", "evasion"])]
        normalize: String,
    },
    /// Show a pack's header; with --license, load it and summarise its rules.
    Inspect {
        /// The .hxpack file.
        pack: PathBuf,
        #[command(flatten)]
        license: LicenseFlags,
        #[command(flatten)]
        signers: SignerFlags,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Show a license's fields and whether its signature verifies (never the content key).
    InspectLicense {
        #[command(flatten)]
        license: LicenseFlags,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write embedded-pack-manifest.json for playbooks and/or packs.
    Manifest {
        #[command(flatten)]
        inputs: ManifestInputs,
        /// Write to this file instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Generate typed clients (Python, Java, TypeScript) from the pack manifest ([§18](docs/formats.md#s18)).
    Sdk {
        /// The language: python, java or typescript.
        #[arg(long, value_name = "LANG", value_parser = ["python", "java", "typescript"])]
        lang: String,
        /// An embedded-pack-manifest.json.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["playbook", "pack"], required_unless_present_any = ["playbook", "pack"])]
        manifest: Option<PathBuf>,
        #[command(flatten)]
        inputs: ManifestInputs,
        /// The directory to write the clients to (created if needed).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// The package name [default: helixor_clients, com.helixor.clients, helixor-clients].
        #[arg(long, value_name = "NAME")]
        package: Option<String>,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run policy tests: the cases of *.test.yaml files against their playbooks or packs ([§13](docs/policy-tests.md#s13)).
    ///
    /// A playbook is compiled in memory without a license; a pack is loaded with the test file's
    /// `license:` or --license. Exit 0 when every case passed, 1 when one failed, the error's code
    /// for a broken file.
    Test {
        /// Test files, or directories searched recursively for *.test.yaml
        /// (hidden directories, target/ and node_modules/ are skipped) [default: .].
        #[arg(value_name = "PATH")]
        paths: Vec<PathBuf>,
        #[command(flatten)]
        license: LicenseFlags,
        /// Also write a JUnit XML report to FILE.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
        /// List the rules (custom rules and built-in hard rules) that no case triggered.
        #[arg(long)]
        coverage: bool,
        /// Print one JSON document with every file's and case's result instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Serve decisions over HTTP with hot reload of the license and packs ([§9](docs/serve.md#s9)).
    Serve {
        /// YAML configuration file (see config/helixor.yaml).
        #[arg(long, value_name = "FILE", env = "HELIXOR_CONFIG")]
        config: Option<PathBuf>,
        #[command(flatten)]
        license: LicenseFlags,
        #[command(flatten)]
        signers: SignerFlags,
        /// Directory of *.hxpack files (config key packs_dir).
        #[arg(long = "packs", value_name = "DIR")]
        packs_dir: Option<PathBuf>,
        /// Address to listen on, e.g. 127.0.0.1:8080 (port 0: any free port).
        #[arg(long, value_name = "ADDR")]
        listen: Option<String>,
    },
    /// Download a catalog pack sealed for your license; every load-time check runs before it is written ([§14](docs/catalog.md#s14)).
    DownloadPack {
        /// The pack to download.
        #[arg(long, value_name = "ID")]
        pack_id: String,
        /// The catalog's base URL, http or https (else $HELIXOR_CATALOG_URL).
        #[arg(long, value_name = "URL")]
        catalog: Option<String>,
        #[command(flatten)]
        license: LicenseFlags,
        #[command(flatten)]
        signers: SignerFlags,
        /// Where to write the pack (written atomically, only once it loads).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// Bound on connecting and on the whole download, in milliseconds.
        #[arg(long, value_name = "MS", default_value_t = helixor::catalog::client::DEFAULT_TIMEOUT_MS, value_parser = clap::value_parser!(u64).range(1..))]
        timeout_ms: u64,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// A vendor's catalog of playbooks, sealed per customer license ([§14](docs/catalog.md#s14)).
    Catalog {
        #[command(subcommand)]
        command: CatalogCommand,
    },
    /// GET a URL over plain HTTP within 2 s; exit 0 on 200, else 1 (container health checks).
    Healthcheck {
        /// e.g. http://127.0.0.1:8080/healthz
        #[arg(long, value_name = "URL")]
        url: String,
    },
    /// Issuer keys and licenses for self-hosted deployments, tests and the demo.
    License {
        #[command(subcommand)]
        command: LicenseCommand,
    },
    /// Check a decision log offline: verify it, prove an entry, check two checkpoints ([§19](docs/guides/auditing.md#s19)).
    Log {
        #[command(subcommand)]
        command: LogCommand,
    },
}

#[derive(Debug, Subcommand)]
enum LogCommand {
    /// Recompute the tree from every line (rotated files first) and check a signed checkpoint against it.
    Verify {
        /// The log file (decision_log.path).
        log: PathBuf,
        /// A checkpoint note (e.g. LOG.checkpoint); needs --key.
        #[arg(long, value_name = "FILE", requires = "key")]
        checkpoint: Option<PathBuf>,
        /// The checkpoint signer's public key (<key_id>.pub).
        #[arg(long, value_name = "PUB", requires = "checkpoint")]
        key: Option<PathBuf>,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print the inclusion proof of entry N as C2SP tlog-proof text.
    Prove {
        /// The log file.
        log: PathBuf,
        /// The entry (its seq, from 0).
        #[arg(long, value_name = "N")]
        seq: u64,
        /// The checkpoint whose tree the proof is for [default: LOG.checkpoint].
        #[arg(long, value_name = "FILE")]
        checkpoint: Option<PathBuf>,
    },
    /// Check that checkpoint NEW's tree extends checkpoint OLD's, with the log's entries.
    Consistency {
        /// The older checkpoint note.
        old: PathBuf,
        /// The newer checkpoint note.
        new: PathBuf,
        /// The log file.
        #[arg(long, value_name = "FILE")]
        log: PathBuf,
        /// The checkpoints' signer's public key (<key_id>.pub).
        #[arg(long, value_name = "PUB")]
        key: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum CatalogCommand {
    /// Serve the playbooks of a directory: GET /v1/catalog, POST /v1/catalog/packs/{pack_id} with a license.
    Serve {
        /// Directory of playbooks (*.yaml, *.yml), compiled once at start-up.
        #[arg(long, value_name = "DIR")]
        playbooks: PathBuf,
        /// Issuer public keys that verify customers' licenses: a JSON file or a directory of <key_id>.pub files.
        #[arg(long, value_name = "PATH", env = "HELIXOR_ISSUER_KEYS")]
        issuer_keys: PathBuf,
        /// Address to listen on (port 0: any free port).
        #[arg(long, value_name = "ADDR", default_value = helixor::catalog::DEFAULT_LISTEN)]
        listen: String,
        /// Log lines on stderr: text or json.
        #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
        log_format: String,
        /// A tracing filter: info, debug, warn, ...
        #[arg(long, value_name = "LEVEL", default_value = "info")]
        log_level: String,
        /// Sign every pack served with this signing key (`license keygen`'s .key); the signature goes in the x-helixor-pack-signature header.
        #[arg(long, value_name = "KEYFILE")]
        sign_key: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum LicenseCommand {
    /// Generate an issuer key pair: DIR/ID.key (secret, mode 0600) and DIR/ID.pub.
    Keygen {
        /// The key id.
        #[arg(long, value_name = "ID")]
        key_id: String,
        /// The directory to write to.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
    /// Sign a license with a fresh random content key.
    Issue(IssueArgs),
}

/// `--max-holdback-chars`: a count of at least 1 (as `stream.max_holdback_chars`).
fn parse_holdback(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("`{s}` is not an integer ≥ 1")),
    }
}

/// Restores the command-line order of interleaved `--playbook` and `--pack`.
fn manifest_sources(
    m: &ArgMatches,
    playbooks: &[PathBuf],
    packs: &[PathBuf],
) -> Vec<ManifestSource> {
    let mut tagged: Vec<(usize, ManifestSource)> = Vec::new();
    let idx = |id: &str| {
        m.indices_of(id)
            .map(|i| i.collect::<Vec<_>>())
            .unwrap_or_default()
    };
    for (i, p) in idx("playbook").into_iter().zip(playbooks) {
        tagged.push((i, ManifestSource::Playbook(p.clone())));
    }
    for (i, p) in idx("pack").into_iter().zip(packs) {
        tagged.push((i, ManifestSource::Pack(p.clone())));
    }
    tagged.sort_by_key(|(i, _)| *i);
    tagged.into_iter().map(|(_, s)| s).collect()
}

fn dispatch(cli: Cli, matches: &ArgMatches) -> Result<u8, Error> {
    let mut out = std::io::stdout().lock();
    let mut err = std::io::stderr();
    match cli.command {
        Command::Compile {
            playbook,
            license,
            out: out_path,
            sign_key,
            json,
        } => {
            commands::compile(
                &playbook,
                &(&license).into(),
                &out_path,
                sign_key.as_deref(),
                json,
                &mut out,
                &mut err,
            )?;
            Ok(0)
        }
        Command::Sign {
            pack,
            key,
            sequence,
            out: out_file,
            json,
        } => {
            commands::sign(&pack, &key, sequence, out_file.as_deref(), json, &mut out)?;
            Ok(0)
        }
        Command::Run {
            packs,
            license,
            signers,
            pack_id,
            text,
            input,
            jsonl,
            stream,
            lookahead_chars,
            no_block_on_fatal,
            max_holdback_chars,
            normalize,
        } => {
            let input = match (text, input) {
                (Some(t), _) => RunInput::Text(t),
                (None, Some(f)) => RunInput::File(f),
                (None, None) => RunInput::Stdin,
            };
            let args = RunArgs {
                packs,
                license: loading(&license, &signers),
                pack_id,
                input,
                jsonl,
                stream: stream.then_some(StreamOptions {
                    block_on_fatal: !no_block_on_fatal,
                    lookahead_chars,
                    max_holdback_chars,
                    ..StreamOptions::default()
                }),
                normalize: normalize.parse().map_err(Error::Usage)?,
            };
            commands::run(&args, &mut std::io::stdin().lock(), &mut out, &mut err)
        }
        Command::Inspect {
            pack,
            license,
            signers,
            json,
        } => {
            let lic: Option<LicenseArgs> = license.license.is_some().then(|| (&license).into());
            commands::inspect(
                &pack,
                lic.as_ref(),
                signers.pack_signers.as_deref(),
                json,
                &mut out,
            )?;
            Ok(0)
        }
        Command::InspectLicense { license, json } => {
            commands::inspect_license(&(&license).into(), json, &mut out)
        }
        Command::Manifest {
            inputs,
            out: out_file,
        } => {
            let sub = matches
                .subcommand_matches("manifest")
                .cloned()
                .unwrap_or_default();
            let sources = manifest_sources(&sub, &inputs.playbook, &inputs.pack);
            commands::manifest(
                &sources,
                &loading(&inputs.license, &inputs.signers),
                out_file.as_deref(),
                &mut out,
            )?;
            Ok(0)
        }
        Command::Sdk {
            lang,
            manifest,
            inputs,
            out: out_dir,
            package,
            json,
        } => {
            let source = match manifest {
                Some(m) => commands::SdkSource::Manifest(m),
                None => {
                    let sub = matches
                        .subcommand_matches("sdk")
                        .cloned()
                        .unwrap_or_default();
                    commands::SdkSource::Sources(manifest_sources(
                        &sub,
                        &inputs.playbook,
                        &inputs.pack,
                    ))
                }
            };
            let args = commands::SdkArgs {
                lang: lang.parse()?,
                source,
                license: loading(&inputs.license, &inputs.signers),
                out: out_dir,
                package,
            };
            commands::sdk(&args, json, &mut out)?;
            Ok(0)
        }
        Command::Test {
            paths,
            license,
            junit,
            coverage,
            json,
        } => commands::test(
            &TestArgs {
                paths,
                license: (&license).into(),
                junit,
                coverage,
                json,
            },
            &mut out,
            &mut err,
        ),
        Command::Serve {
            config,
            license,
            signers,
            packs_dir,
            listen,
        } => {
            // The server prints its address from its own threads: release stdout.
            drop(out);
            helixor::server::serve(&helixor::server::ServeOptions {
                config,
                license: license.license,
                issuer_keys: license.issuer_keys,
                pack_signers: signers.pack_signers,
                packs_dir,
                listen,
            })
        }
        Command::DownloadPack {
            pack_id,
            catalog,
            license,
            signers,
            out: out_path,
            timeout_ms,
            json,
        } => {
            let req = helixor::catalog::client::DownloadRequest {
                pack_id,
                catalog,
                license: license.license,
                issuer_keys: license.issuer_keys,
                pack_signers: signers.pack_signers,
                out: out_path,
                timeout: std::time::Duration::from_millis(timeout_ms),
            };
            commands::download_pack(&req, json, &mut out, &mut err)?;
            Ok(0)
        }
        Command::Catalog {
            command:
                CatalogCommand::Serve {
                    playbooks,
                    issuer_keys,
                    listen,
                    log_format,
                    log_level,
                    sign_key,
                },
        } => {
            // The server prints its address from its own threads: release stdout.
            drop(out);
            let mut opts = helixor::catalog::server::CatalogServeOptions::new(
                playbooks,
                issuer_keys,
                Some(listen),
            );
            opts.log.level = log_level;
            opts.sign_key = sign_key;
            if log_format == "json" {
                opts.log.format = helixor::server::LogFormat::Json;
            }
            helixor::catalog::server::serve(&opts)
        }
        Command::Healthcheck { url } => Ok(commands::healthcheck(&url, &mut err)),
        Command::License {
            command: LicenseCommand::Keygen { key_id, out: dir },
        } => commands::license_keygen(&key_id, &dir, &mut out),
        Command::License {
            command: LicenseCommand::Issue(args),
        } => commands::license_issue(&args, &mut out),
        Command::Log { command } => match command {
            LogCommand::Verify {
                log,
                checkpoint,
                key,
                json,
            } => commands::log_verify(&log, checkpoint.as_deref(), key.as_deref(), json, &mut out),
            LogCommand::Prove {
                log,
                seq,
                checkpoint,
            } => commands::log_prove(&log, seq, checkpoint.as_deref(), &mut out),
            LogCommand::Consistency { old, new, log, key } => {
                commands::log_consistency(&log, &old, &new, &key, &mut out)
            }
        },
    }
}

fn wants_json_errors() -> bool {
    let args: Vec<String> = std::env::args().collect();
    args.iter().any(|a| a == "--error-format=json")
        || args
            .windows(2)
            .any(|w| w[0] == "--error-format" && w[1] == "json")
}

fn main() -> ExitCode {
    let matches = match Cli::command().try_get_matches() {
        Ok(m) => m,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            let msg = e.render().to_string();
            let msg = msg.trim().trim_start_matches("error: ").to_string();
            eprintln!(
                "{}",
                commands::render_error(&Error::Usage(msg), wants_json_errors())
            );
            return ExitCode::from(2);
        }
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "{}",
                commands::render_error(&Error::Usage(e.to_string()), wants_json_errors())
            );
            return ExitCode::from(2);
        }
    };
    let json = cli.error_format == ErrorFormat::Json;
    match dispatch(cli, &matches) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("{}", commands::render_error(&e, json));
            ExitCode::from(e.name().exit_code())
        }
    }
}
