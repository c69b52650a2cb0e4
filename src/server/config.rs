//! Serve configuration ([§9.1](docs/configuration.md#s9-1)): the YAML file, `HELIXOR_*` variables and
//! flags merged with the defaults, every value checked, errors naming the key.
//! Reads only the configuration file; never touches licenses, packs or tokens.

use crate::Error;
use serde_yaml::Value;
use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

/// Default `listen` address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// Prefix of the environment variable of every key.
pub const ENV_PREFIX: &str = "HELIXOR_";
/// Default `stream.write_timeout_ms`.
pub const DEFAULT_STREAM_WRITE_TIMEOUT_MS: u64 = 10_000;

/// The kind of value a key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Str,
    Path,
    Bool,
    Uint,
    /// A list of strings (a comma-separated variable).
    List,
}

impl Kind {
    fn describe(self) -> &'static str {
        match self {
            Self::Str => "a string",
            Self::Path => "a path (string)",
            Self::Bool => "a boolean",
            Self::Uint => "a non-negative integer",
            Self::List => "a list of strings",
        }
    }
}

/// Every key of the configuration, as a dotted path, with its kind.
const KEYS: &[(&str, Kind)] = &[
    ("listen", Kind::Str),
    ("license", Kind::Path),
    ("packs_dir", Kind::Path),
    ("issuer_keys", Kind::Path),
    ("pack_signers", Kind::Path),
    ("require_pack_signatures", Kind::Bool),
    ("default_pack", Kind::Str),
    ("monitor_packs", Kind::List),
    ("reload.watch", Kind::Bool),
    ("reload.debounce_ms", Kind::Uint),
    ("reload.rescan_interval_s", Kind::Uint),
    ("limits.max_body_bytes", Kind::Uint),
    ("limits.max_batch_items", Kind::Uint),
    ("limits.max_texts", Kind::Uint),
    ("limits.request_timeout_ms", Kind::Uint),
    ("limits.max_concurrency", Kind::Uint),
    ("limits.header_read_timeout_ms", Kind::Uint),
    ("limits.idle_timeout_ms", Kind::Uint),
    ("limits.max_connections", Kind::Uint),
    ("limits.max_response_bytes", Kind::Uint),
    ("limits.write_timeout_ms", Kind::Uint),
    ("auth.tokens_file", Kind::Path),
    ("shutdown.drain_delay_ms", Kind::Uint),
    ("shutdown.grace_ms", Kind::Uint),
    ("log.format", Kind::Str),
    ("log.level", Kind::Str),
    ("stream.max_holdback_chars", Kind::Uint),
    ("stream.max_session_ms", Kind::Uint),
    ("stream.write_timeout_ms", Kind::Uint),
    ("ext_proc.listen", Kind::Str),
    ("ext_proc.max_concurrency", Kind::Uint),
    ("ext_proc.max_streams_per_connection", Kind::Uint),
    ("ext_proc.idle_stream_timeout_ms", Kind::Uint),
    ("engine.normalize", Kind::Str),
    ("decision_log.path", Kind::Path),
    ("decision_log.max_bytes", Kind::Uint),
    ("decision_log.hmac_key_file", Kind::Path),
    ("decision_log.signing_key", Kind::Path),
    ("decision_log.checkpoint_every", Kind::Uint),
    ("decision_log.checkpoint_interval_ms", Kind::Uint),
    ("decision_log.queue", Kind::Uint),
    ("decision_log.required", Kind::Bool),
];

/// The sections (keys holding a mapping).
const SECTIONS: &[&str] = &[
    "reload",
    "limits",
    "auth",
    "shutdown",
    "log",
    "stream",
    "ext_proc",
    "engine",
    "decision_log",
];

/// The environment variable of a key: `reload.debounce_ms` → `HELIXOR_RELOAD_DEBOUNCE_MS`.
pub fn env_var_of(key: &str) -> String {
    format!("{ENV_PREFIX}{}", key.replace('.', "_").to_uppercase())
}

/// Every configuration key, as a dotted path (for docs and tests).
pub fn keys() -> impl Iterator<Item = &'static str> {
    KEYS.iter().map(|(k, _)| *k)
}

#[derive(Debug, Clone, PartialEq)]
enum Raw {
    Str(String),
    Path(PathBuf),
    Bool(bool),
    Uint(u64),
    List(Vec<String>),
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One JSON object per line.
    Json,
    /// Human-readable text.
    Text,
}

/// `reload.*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadConfig {
    /// Watch the license and packs directories.
    pub watch: bool,
    /// Quiet time that coalesces file events, in ms.
    pub debounce_ms: u64,
    /// Period of the digest rescan, in s (0: no rescan).
    pub rescan_interval_s: u64,
}

/// `limits.*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest request body.
    pub max_body_bytes: usize,
    /// Most items in one batch.
    pub max_batch_items: usize,
    /// Most strings judged in one gateway body or LiteLLM call ([§12.4](docs/gateways.md#s12-4)).
    pub max_texts: usize,
    /// Time a request may take, in ms.
    pub request_timeout_ms: u64,
    /// Requests served at once.
    pub max_concurrency: usize,
    /// Time a connection has to send a whole request head, in ms.
    pub header_read_timeout_ms: u64,
    /// Time an idle keep-alive connection is kept, in ms.
    pub idle_timeout_ms: u64,
    /// Connections served at once (the others wait in the listen backlog).
    pub max_connections: usize,
    /// Largest answer of an evaluation (default 4 × `max_body_bytes`).
    pub max_response_bytes: usize,
    /// Time a response may wait for the client to read any of it, in ms.
    pub write_timeout_ms: u64,
}

/// `ext_proc.*` but `listen` ([§9.1](docs/configuration.md#s9-1), [§12.3](docs/gateways.md#s12-3)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtProcConfig {
    /// gRPC streams served at once: their own pool, never the HTTP routes'.
    pub max_concurrency: usize,
    /// HTTP/2 streams one connection may open at once.
    pub max_streams_per_connection: u32,
    /// Time a stream may send nothing before it is ended, in ms.
    pub idle_stream_timeout_ms: u64,
}

/// `shutdown.*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShutdownConfig {
    /// Time `/readyz` reports 503 before the listener closes, in ms.
    pub drain_delay_ms: u64,
    /// Time in-flight requests get after the listener closes, in ms.
    pub grace_ms: u64,
}

/// `log.*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// `json` or `text`.
    pub format: LogFormat,
    /// A `tracing` filter: `info`, `debug`, `helixor=debug,warn`, …
    pub level: String,
}

/// The resolved serve configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// License path; `None`: the [§2](docs/formats.md#s2) lookup order.
    pub license: Option<PathBuf>,
    /// Directory of `*.hxpack` files.
    pub packs_dir: PathBuf,
    /// Issuer keys path; `None`: the [§2](docs/formats.md#s2) lookup order.
    pub issuer_keys: Option<PathBuf>,
    /// Trusted pack signers ([§17](docs/guides/signing.md#s17)); `None`: signatures are not checked.
    pub pack_signers: Option<PathBuf>,
    /// Whether start-up refuses a configuration without `pack_signers`.
    pub require_pack_signatures: bool,
    /// Pack used when a request names none and several are loaded.
    pub default_pack: Option<String>,
    /// Packs whose decisions are made and logged but never enforced
    /// ([§19](docs/guides/auditing.md#s19) monitor mode).
    pub monitor_packs: Vec<String>,
    /// Hot reload.
    pub reload: ReloadConfig,
    /// Request limits.
    pub limits: Limits,
    /// Bearer token file (`auth.tokens_file`).
    pub tokens_file: Option<PathBuf>,
    /// Shutdown timing.
    pub shutdown: ShutdownConfig,
    /// Logging.
    pub log: LogConfig,
    /// Stream sessions ([§11.1](docs/streaming.md#s11-1)): most code points a session may hold
    /// back before it blocks (fail closed).
    pub max_holdback_chars: usize,
    /// Engine time one stream session may spend, in ms, before it fails
    /// closed (`stream.max_session_ms`).
    pub max_session_ms: u64,
    /// Time a stream's client may read nothing before it loses its stream,
    /// in ms (`stream.write_timeout_ms`).
    pub stream_write_timeout_ms: u64,
    /// Where Envoy's external processing gRPC service listens ([§12.3](docs/gateways.md#s12-3);
    /// `ext_proc.listen`); `None`: off.
    pub ext_proc_listen: Option<SocketAddr>,
    /// The external processor's limits.
    pub ext_proc: ExtProcConfig,
    /// How requests are matched unless they say (`engine.normalize`, [§15](docs/evasion.md#s15)).
    pub normalize: crate::engine::Normalize,
    /// The decision log ([§19](docs/guides/auditing.md#s19)); `None`: off.
    pub decision_log: Option<DecisionLogConfig>,
}

/// `decision_log.*` ([§19](docs/guides/auditing.md#s19)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionLogConfig {
    /// The log file (rotated files beside it: `<path>.1`, `<path>.2`, ...).
    pub path: PathBuf,
    /// Bytes a file may reach before it is rotated (0: never).
    pub max_bytes: u64,
    /// Key file of `payload_hmac`; `None`: no payload digest is written.
    pub hmac_key_file: Option<PathBuf>,
    /// Ed25519 key (`license keygen`'s `.key`) that signs checkpoints;
    /// `None`: no checkpoint is written.
    pub signing_key: Option<PathBuf>,
    /// A checkpoint after this many entries.
    pub checkpoint_every: u64,
    /// A checkpoint after this long with new entries, in ms.
    pub checkpoint_interval_ms: u64,
    /// Lines that may wait for the writer; beyond, a line is dropped and
    /// counted (or, with `required`, the evaluation answers 503).
    pub queue: usize,
    /// Whether an evaluation whose line cannot be written answers 503.
    pub required: bool,
}

impl Config {
    /// The defaults of every key, with `packs_dir` set (it has no default).
    pub fn with_packs_dir(packs_dir: impl Into<PathBuf>) -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            license: None,
            packs_dir: packs_dir.into(),
            issuer_keys: None,
            pack_signers: None,
            require_pack_signatures: false,
            default_pack: None,
            monitor_packs: Vec::new(),
            reload: ReloadConfig {
                watch: true,
                debounce_ms: 500,
                rescan_interval_s: 30,
            },
            limits: Limits {
                max_body_bytes: 1024 * 1024,
                max_batch_items: 256,
                max_texts: 10_000,
                request_timeout_ms: 5000,
                max_concurrency: 1024,
                header_read_timeout_ms: 5000,
                idle_timeout_ms: 60_000,
                max_connections: 4096,
                max_response_bytes: 4 * 1024 * 1024,
                write_timeout_ms: 10_000,
            },
            tokens_file: None,
            shutdown: ShutdownConfig {
                drain_delay_ms: 0,
                grace_ms: 10_000,
            },
            log: LogConfig {
                format: LogFormat::Text,
                level: "info".into(),
            },
            max_holdback_chars: crate::engine::DEFAULT_MAX_HOLDBACK_CHARS,
            max_session_ms: crate::engine::DEFAULT_MAX_SESSION_MS,
            stream_write_timeout_ms: DEFAULT_STREAM_WRITE_TIMEOUT_MS,
            ext_proc_listen: None,
            ext_proc: ExtProcConfig {
                max_concurrency: 512,
                max_streams_per_connection: 256,
                idle_stream_timeout_ms: 30_000,
            },
            normalize: crate::engine::Normalize::None,
            decision_log: None,
        }
    }
}

/// What the `serve` flags set (each overrides the variable and the file).
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// `--config FILE`.
    pub config: Option<PathBuf>,
    /// `--license L`.
    pub license: Option<PathBuf>,
    /// `--issuer-keys K`.
    pub issuer_keys: Option<PathBuf>,
    /// `--pack-signers S`.
    pub pack_signers: Option<PathBuf>,
    /// `--packs DIR`.
    pub packs_dir: Option<PathBuf>,
    /// `--listen ADDR`.
    pub listen: Option<String>,
}

fn config_error(msg: impl Into<String>) -> Error {
    Error::Config(msg.into())
}

fn kind_of(key: &str) -> Option<Kind> {
    KEYS.iter().find(|(k, _)| *k == key).map(|(_, kind)| *kind)
}

fn known_under(prefix: &str) -> String {
    KEYS.iter()
        .filter_map(|(k, _)| match prefix {
            "" => Some(k.split('.').next().unwrap_or(k)),
            p => k.strip_prefix(p).and_then(|r| r.strip_prefix('.')),
        })
        .fold(Vec::<&str>::new(), |mut acc, k| {
            if !acc.contains(&k) {
                acc.push(k);
            }
            acc
        })
        .join(", ")
}

/// Reads one YAML value of `key`; `None` for null (unset).
fn yaml_value(
    key: &str,
    kind: Kind,
    v: &Value,
    base: &Path,
    file: &str,
) -> Result<Option<Raw>, Error> {
    let wrong = || {
        config_error(format!(
            "{file}: key `{key}` must be {}, not {}",
            kind.describe(),
            yaml_type_name(v)
        ))
    };
    Ok(Some(match (kind, v) {
        (_, Value::Null) => return Ok(None),
        (Kind::Str, Value::String(s)) => Raw::Str(s.clone()),
        (Kind::Path, Value::String(s)) => {
            if s.is_empty() {
                return Err(config_error(format!(
                    "{file}: key `{key}` is an empty path"
                )));
            }
            let p = PathBuf::from(s);
            Raw::Path(if p.is_relative() { base.join(p) } else { p })
        }
        (Kind::Bool, Value::Bool(b)) => Raw::Bool(*b),
        (Kind::Uint, Value::Number(n)) => Raw::Uint(n.as_u64().ok_or_else(wrong)?),
        (Kind::List, Value::Sequence(items)) => Raw::List(
            items
                .iter()
                .map(|i| i.as_str().map(str::to_string).ok_or_else(wrong))
                .collect::<Result<_, _>>()?,
        ),
        _ => return Err(wrong()),
    }))
}

fn yaml_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_u64() || n.is_i64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

/// Flattens the file into `key → value`, refusing unknown keys and wrong types.
fn read_file(path: &Path) -> Result<BTreeMap<&'static str, Raw>, Error> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path)
        .map_err(|e| config_error(format!("cannot read config file {file}: {e}")))?;
    let root: Value = serde_yaml::from_slice(&bytes)
        .map_err(|e| config_error(format!("config file {file} is not valid YAML: {e}")))?;
    let base = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let mut out = BTreeMap::new();
    let root = match root {
        Value::Null => return Ok(out),
        Value::Mapping(m) => m,
        other => {
            return Err(config_error(format!(
                "config file {file}: the root must be a mapping, not {}",
                yaml_type_name(&other)
            )))
        }
    };
    let key_name = |k: &Value, prefix: &str| -> Result<String, Error> {
        match k {
            Value::String(s) => Ok(s.clone()),
            _ => Err(config_error(format!(
                "{file}: a key {}is not a string",
                if prefix.is_empty() {
                    String::new()
                } else {
                    format!("under `{prefix}` ")
                }
            ))),
        }
    };
    for (k, v) in &root {
        let name = key_name(k, "")?;
        if SECTIONS.contains(&name.as_str()) {
            let section = match v {
                Value::Null => continue,
                Value::Mapping(m) => m,
                other => {
                    return Err(config_error(format!(
                        "{file}: key `{name}` must be a mapping, not {}",
                        yaml_type_name(other)
                    )))
                }
            };
            for (sk, sv) in section {
                let sub = key_name(sk, &name)?;
                let full = format!("{name}.{sub}");
                let Some((key, kind)) = KEYS.iter().find(|(k, _)| *k == full) else {
                    return Err(config_error(format!(
                        "{file}: unknown key `{full}` (known keys under `{name}`: {})",
                        known_under(&name)
                    )));
                };
                if let Some(raw) = yaml_value(key, *kind, sv, &base, &file)? {
                    out.insert(*key, raw);
                }
            }
        } else {
            let Some((key, kind)) = KEYS.iter().find(|(k, _)| *k == name) else {
                return Err(config_error(format!(
                    "{file}: unknown key `{name}` (known keys: {})",
                    known_under("")
                )));
            };
            if let Some(raw) = yaml_value(key, *kind, v, &base, &file)? {
                out.insert(*key, raw);
            }
        }
    }
    Ok(out)
}

fn parse_env(key: &str, kind: Kind, var: &str, value: &str) -> Result<Raw, Error> {
    let wrong = || {
        config_error(format!(
            "{var} (key `{key}`): `{value}` is not {}",
            kind.describe()
        ))
    };
    Ok(match kind {
        Kind::Str => Raw::Str(value.to_string()),
        Kind::Path => Raw::Path(PathBuf::from(value)),
        Kind::Bool => match value.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Raw::Bool(true),
            "false" | "0" | "no" | "off" => Raw::Bool(false),
            _ => return Err(wrong()),
        },
        Kind::Uint => Raw::Uint(value.trim().parse().map_err(|_| wrong())?),
        Kind::List => Raw::List(
            value
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
        ),
    })
}

/// Resolves a `listen` value to a socket address.
pub fn parse_listen(value: &str) -> Option<SocketAddr> {
    value
        .parse()
        .ok()
        .or_else(|| value.to_socket_addrs().ok().and_then(|mut a| a.next()))
}

/// Merges flags, then `env`, then the file, then the defaults ([§9.1](docs/configuration.md#s9-1)).
/// `env` looks a variable up (`std::env::var` in the binary).
pub fn load(opts: &ServeOptions, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, Error> {
    let mut merged = match &opts.config {
        Some(path) => read_file(path)?,
        None => BTreeMap::new(),
    };
    for (key, kind) in KEYS {
        let var = env_var_of(key);
        if let Some(value) = env(&var).filter(|v| !v.is_empty()) {
            merged.insert(*key, parse_env(key, *kind, &var, &value)?);
        }
    }
    if let Some(p) = &opts.license {
        merged.insert("license", Raw::Path(p.clone()));
    }
    if let Some(p) = &opts.issuer_keys {
        merged.insert("issuer_keys", Raw::Path(p.clone()));
    }
    if let Some(p) = &opts.pack_signers {
        merged.insert("pack_signers", Raw::Path(p.clone()));
    }
    if let Some(p) = &opts.packs_dir {
        merged.insert("packs_dir", Raw::Path(p.clone()));
    }
    if let Some(l) = &opts.listen {
        merged.insert("listen", Raw::Str(l.clone()));
    }
    build(&merged)
}

fn build(m: &BTreeMap<&'static str, Raw>) -> Result<Config, Error> {
    let packs_dir = match m.get("packs_dir") {
        Some(Raw::Path(p)) => p.clone(),
        _ => {
            return Err(config_error(
                "key `packs_dir` is not set: pass --packs DIR, set HELIXOR_PACKS_DIR or `packs_dir` in the config file",
            ))
        }
    };
    let mut c = Config::with_packs_dir(packs_dir);
    let uint = |key: &str, min: u64| -> Result<Option<u64>, Error> {
        match m.get(key) {
            Some(Raw::Uint(n)) if *n < min => Err(config_error(format!(
                "key `{key}` must be at least {min}, not {n}"
            ))),
            Some(Raw::Uint(n)) => Ok(Some(*n)),
            _ => Ok(None),
        }
    };
    let usize_of = |key: &str, n: u64| -> Result<usize, Error> {
        usize::try_from(n).map_err(|_| config_error(format!("key `{key}` is too large: {n}")))
    };
    let path = |key: &str| match m.get(key) {
        Some(Raw::Path(p)) => Some(p.clone()),
        _ => None,
    };
    let string = |key: &str| match m.get(key) {
        Some(Raw::Str(s)) => Some(s.clone()),
        _ => None,
    };
    if let Some(l) = string("listen") {
        c.listen = parse_listen(&l).ok_or_else(|| {
            config_error(format!(
                "key `listen`: `{l}` is not an address such as {DEFAULT_LISTEN} or 0.0.0.0:8080"
            ))
        })?;
    }
    if let Some(l) = string("ext_proc.listen").filter(|s| !s.is_empty()) {
        c.ext_proc_listen = Some(parse_listen(&l).ok_or_else(|| {
            config_error(format!(
                "key `ext_proc.listen`: `{l}` is not an address such as 127.0.0.1:9090 or 0.0.0.0:9090"
            ))
        })?);
    }
    c.license = path("license");
    c.issuer_keys = path("issuer_keys");
    c.pack_signers = path("pack_signers");
    if let Some(Raw::Bool(b)) = m.get("require_pack_signatures") {
        c.require_pack_signatures = *b;
    }
    if c.require_pack_signatures && c.pack_signers.is_none() {
        return Err(config_error(
            "key `require_pack_signatures` is true but `pack_signers` is not set: pass --pack-signers PATH, set HELIXOR_PACK_SIGNERS or `pack_signers` in the config file",
        ));
    }
    c.tokens_file = path("auth.tokens_file");
    c.default_pack = string("default_pack").filter(|s| !s.is_empty());
    if let Some(Raw::List(packs)) = m.get("monitor_packs") {
        c.monitor_packs.clone_from(packs);
    }
    if let Some(Raw::Bool(b)) = m.get("reload.watch") {
        c.reload.watch = *b;
    }
    if let Some(n) = uint("reload.debounce_ms", 0)? {
        c.reload.debounce_ms = n;
    }
    if let Some(n) = uint("reload.rescan_interval_s", 0)? {
        c.reload.rescan_interval_s = n;
    }
    if let Some(n) = uint("limits.max_body_bytes", 1)? {
        c.limits.max_body_bytes = usize_of("limits.max_body_bytes", n)?;
    }
    if let Some(n) = uint("limits.max_batch_items", 1)? {
        c.limits.max_batch_items = usize_of("limits.max_batch_items", n)?;
    }
    if let Some(n) = uint("limits.max_texts", 1)? {
        c.limits.max_texts = usize_of("limits.max_texts", n)?;
    }
    if let Some(n) = uint("limits.request_timeout_ms", 1)? {
        c.limits.request_timeout_ms = n;
    }
    if let Some(n) = uint("limits.max_concurrency", 1)? {
        // tokio's semaphore holds at most usize::MAX >> 3 permits.
        if n > 1 << 30 {
            return Err(config_error(format!(
                "key `limits.max_concurrency` is too large: {n}"
            )));
        }
        c.limits.max_concurrency = usize_of("limits.max_concurrency", n)?;
    }
    if let Some(n) = uint("limits.header_read_timeout_ms", 1)? {
        c.limits.header_read_timeout_ms = n;
    }
    if let Some(n) = uint("limits.idle_timeout_ms", 1)? {
        c.limits.idle_timeout_ms = n;
    }
    if let Some(n) = uint("limits.max_connections", 1)? {
        // tokio's semaphore holds at most usize::MAX >> 3 permits.
        if n > 1 << 30 {
            return Err(config_error(format!(
                "key `limits.max_connections` is too large: {n}"
            )));
        }
        c.limits.max_connections = usize_of("limits.max_connections", n)?;
    }
    c.limits.max_response_bytes = match uint("limits.max_response_bytes", 1)? {
        Some(n) => usize_of("limits.max_response_bytes", n)?,
        // Follows the body limit it is a multiple of.
        None => c.limits.max_body_bytes.saturating_mul(4),
    };
    if let Some(n) = uint("limits.write_timeout_ms", 1)? {
        c.limits.write_timeout_ms = n;
    }
    if let Some(n) = uint("ext_proc.max_concurrency", 1)? {
        // tokio's semaphore holds at most usize::MAX >> 3 permits.
        if n > 1 << 30 {
            return Err(config_error(format!(
                "key `ext_proc.max_concurrency` is too large: {n}"
            )));
        }
        c.ext_proc.max_concurrency = usize_of("ext_proc.max_concurrency", n)?;
    }
    if let Some(n) = uint("ext_proc.max_streams_per_connection", 1)? {
        c.ext_proc.max_streams_per_connection = u32::try_from(n).map_err(|_| {
            config_error(format!(
                "key `ext_proc.max_streams_per_connection` is too large: {n} (HTTP/2 allows at most {})",
                u32::MAX
            ))
        })?;
    }
    if let Some(n) = uint("ext_proc.idle_stream_timeout_ms", 1)? {
        c.ext_proc.idle_stream_timeout_ms = n;
    }
    if let Some(n) = uint("shutdown.drain_delay_ms", 0)? {
        c.shutdown.drain_delay_ms = n;
    }
    if let Some(n) = uint("shutdown.grace_ms", 0)? {
        c.shutdown.grace_ms = n;
    }
    if let Some(n) = uint("stream.max_holdback_chars", 1)? {
        c.max_holdback_chars = usize_of("stream.max_holdback_chars", n)?;
    }
    if let Some(n) = uint("stream.max_session_ms", 1)? {
        c.max_session_ms = n;
    }
    if let Some(n) = uint("stream.write_timeout_ms", 1)? {
        c.stream_write_timeout_ms = n;
    }
    if let Some(n) = string("engine.normalize") {
        c.normalize = n.parse().map_err(|_| {
            config_error(format!(
                "key `engine.normalize` must be `none` or `evasion`, not `{n}`"
            ))
        })?;
    }
    if let Some(f) = string("log.format") {
        c.log.format = match f.as_str() {
            "json" => LogFormat::Json,
            "text" => LogFormat::Text,
            other => {
                return Err(config_error(format!(
                    "key `log.format` must be `json` or `text`, not `{other}`"
                )))
            }
        };
    }
    if let Some(l) = string("log.level") {
        tracing_subscriber::EnvFilter::try_new(&l).map_err(|e| {
            config_error(format!(
                "key `log.level`: `{l}` is not a log level or filter ({e})"
            ))
        })?;
        c.log.level = l;
    }
    c.decision_log = decision_log(m, uint, usize_of)?;
    // Every key is typed by the table; a key the table lacks cannot get here.
    debug_assert!(m.keys().all(|k| kind_of(k).is_some()));
    Ok(c)
}

/// `decision_log.*`: `None` unless `decision_log.path` is set (then every
/// other key has its default).
fn decision_log<U, S>(
    m: &BTreeMap<&'static str, Raw>,
    uint: U,
    usize_of: S,
) -> Result<Option<DecisionLogConfig>, Error>
where
    U: Fn(&str, u64) -> Result<Option<u64>, Error>,
    S: Fn(&str, u64) -> Result<usize, Error>,
{
    let path = |key: &str| match m.get(key) {
        Some(Raw::Path(p)) => Some(p.clone()),
        _ => None,
    };
    let Some(log_path) = path("decision_log.path") else {
        if let Some(other) = m.keys().find(|k| k.starts_with("decision_log.")) {
            return Err(config_error(format!(
                "key `{other}` is set but `decision_log.path` is not: set the log file's path"
            )));
        }
        return Ok(None);
    };
    Ok(Some(DecisionLogConfig {
        path: log_path,
        max_bytes: uint("decision_log.max_bytes", 0)?.unwrap_or(0),
        hmac_key_file: path("decision_log.hmac_key_file"),
        signing_key: path("decision_log.signing_key"),
        checkpoint_every: uint("decision_log.checkpoint_every", 1)?.unwrap_or(1000),
        checkpoint_interval_ms: uint("decision_log.checkpoint_interval_ms", 1)?.unwrap_or(10_000),
        queue: match uint("decision_log.queue", 1)? {
            Some(n) => usize_of("decision_log.queue", n)?,
            None => 65_536,
        },
        required: matches!(m.get("decision_log.required"), Some(Raw::Bool(true))),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn write(dir: &Path, text: &str) -> PathBuf {
        let p = dir.join("helixor.yaml");
        std::fs::write(&p, text).unwrap();
        p
    }

    fn opts(config: PathBuf) -> ServeOptions {
        ServeOptions {
            config: Some(config),
            ..ServeOptions::default()
        }
    }

    #[test]
    fn env_names() {
        assert_eq!(
            env_var_of("reload.debounce_ms"),
            "HELIXOR_RELOAD_DEBOUNCE_MS"
        );
        assert_eq!(env_var_of("packs_dir"), "HELIXOR_PACKS_DIR");
        assert_eq!(
            env_var_of("limits.max_body_bytes"),
            "HELIXOR_LIMITS_MAX_BODY_BYTES"
        );
    }

    #[test]
    fn file_env_flags_precedence_and_relative_paths() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(
            dir.path(),
            "listen: 127.0.0.1:9000\npacks_dir: packs\nlicense: /abs/l.hxlic\nreload:\n  debounce_ms: 100\n  watch: false\nlimits:\n  max_body_bytes: 10\nlog:\n  format: json\n",
        );
        let c = load(&opts(f.clone()), &no_env).unwrap();
        assert_eq!(c.listen.port(), 9000);
        assert_eq!(c.packs_dir, dir.path().join("packs"));
        assert_eq!(c.license, Some(PathBuf::from("/abs/l.hxlic")));
        assert_eq!(c.reload.debounce_ms, 100);
        assert!(!c.reload.watch);
        assert_eq!(c.reload.rescan_interval_s, 30);
        assert_eq!(c.limits.max_body_bytes, 10);
        assert_eq!(c.log.format, LogFormat::Json);
        assert_eq!(c.normalize, crate::engine::Normalize::None);

        let env = |k: &str| match k {
            "HELIXOR_ENGINE_NORMALIZE" => Some("evasion".to_string()),
            "HELIXOR_RELOAD_DEBOUNCE_MS" => Some("7".to_string()),
            "HELIXOR_LISTEN" => Some("127.0.0.1:9001".to_string()),
            "HELIXOR_PACKS_DIR" => Some("rel".to_string()),
            _ => None,
        };
        let c = load(&opts(f.clone()), &env).unwrap();
        assert_eq!(c.reload.debounce_ms, 7);
        assert_eq!(c.normalize, crate::engine::Normalize::Evasion);
        assert_eq!(c.listen.port(), 9001);
        assert_eq!(c.packs_dir, PathBuf::from("rel"));

        let mut o = opts(f);
        o.listen = Some("127.0.0.1:0".into());
        o.packs_dir = Some("flag".into());
        let c = load(&o, &env).unwrap();
        assert_eq!(c.listen.port(), 0);
        assert_eq!(c.packs_dir, PathBuf::from("flag"));
    }

    #[test]
    fn unknown_keys_and_wrong_types_name_the_key() {
        let dir = tempfile::tempdir().unwrap();
        for (text, needle) in [
            ("packs_dir: p\nlisen: x\n", "`lisen`"),
            (
                "packs_dir: p\nreload:\n  debounce: 1\n",
                "`reload.debounce`",
            ),
            (
                "packs_dir: p\nreload:\n  debounce_ms: fast\n",
                "`reload.debounce_ms`",
            ),
            (
                "packs_dir: p\nreload:\n  debounce_ms: -1\n",
                "`reload.debounce_ms`",
            ),
            ("packs_dir: p\nreload: 5\n", "`reload`"),
            ("packs_dir: p\nlog:\n  format: xml\n", "`log.format`"),
            (
                "packs_dir: p\nengine:\n  normalize: nfkc\n",
                "`engine.normalize` must be `none` or `evasion`, not `nfkc`",
            ),
            ("packs_dir: p\nlisten: nowhere\n", "`listen`"),
            ("packs_dir: [a]\n", "`packs_dir`"),
            (
                "packs_dir: p\nlimits:\n  max_concurrency: 0\n",
                "`limits.max_concurrency`",
            ),
            (
                "packs_dir: p\nlimits:\n  max_response_bytes: 0\n",
                "key `limits.max_response_bytes` must be at least 1, not 0",
            ),
            (
                "packs_dir: p\nlimits:\n  write_timeout_ms: 0\n",
                "key `limits.write_timeout_ms` must be at least 1, not 0",
            ),
            (
                "packs_dir: p\next_proc:\n  max_concurrency: 0\n",
                "key `ext_proc.max_concurrency` must be at least 1, not 0",
            ),
            (
                "packs_dir: p\next_proc:\n  max_streams_per_connection: 4294967296\n",
                "key `ext_proc.max_streams_per_connection` is too large: 4294967296",
            ),
            (
                "packs_dir: p\next_proc:\n  idle_stream_timeout_ms: 0\n",
                "key `ext_proc.idle_stream_timeout_ms` must be at least 1, not 0",
            ),
            ("listen: 127.0.0.1:1\n", "`packs_dir`"),
        ] {
            let f = write(dir.path(), text);
            let e = load(&opts(f), &no_env).unwrap_err();
            assert!(matches!(e, Error::Config(_)), "{text}");
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
        let env = |k: &str| (k == "HELIXOR_RELOAD_WATCH").then(|| "maybe".to_string());
        let f = write(dir.path(), "packs_dir: p\n");
        let e = load(&opts(f), &env).unwrap_err();
        assert!(e.to_string().contains("HELIXOR_RELOAD_WATCH"), "{e}");
    }

    #[test]
    fn hardening_keys_have_their_defaults_and_variables() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(dir.path(), "packs_dir: p\n");
        let c = load(&opts(f.clone()), &no_env).unwrap();
        assert_eq!(c.limits.max_response_bytes, 4 * 1024 * 1024);
        assert_eq!(c.limits.write_timeout_ms, 10_000);
        assert_eq!(
            c.ext_proc,
            ExtProcConfig {
                max_concurrency: 512,
                max_streams_per_connection: 256,
                idle_stream_timeout_ms: 30_000,
            }
        );
        // The response limit follows the body limit unless it is set.
        let f2 = write(
            dir.path(),
            "packs_dir: p\nlimits:\n  max_body_bytes: 1000\n",
        );
        assert_eq!(
            load(&opts(f2), &no_env).unwrap().limits.max_response_bytes,
            4000
        );
        let env = |k: &str| {
            Some(
                match k {
                    "HELIXOR_LIMITS_MAX_RESPONSE_BYTES" => "77",
                    "HELIXOR_LIMITS_WRITE_TIMEOUT_MS" => "78",
                    "HELIXOR_EXT_PROC_MAX_CONCURRENCY" => "79",
                    "HELIXOR_EXT_PROC_MAX_STREAMS_PER_CONNECTION" => "80",
                    "HELIXOR_EXT_PROC_IDLE_STREAM_TIMEOUT_MS" => "81",
                    _ => return None,
                }
                .to_string(),
            )
        };
        let c = load(&opts(f), &env).unwrap();
        assert_eq!(
            (c.limits.max_response_bytes, c.limits.write_timeout_ms),
            (77, 78)
        );
        assert_eq!(
            c.ext_proc,
            ExtProcConfig {
                max_concurrency: 79,
                max_streams_per_connection: 80,
                idle_stream_timeout_ms: 81,
            }
        );
    }

    #[test]
    fn stream_limits_come_from_the_file_and_the_environment_and_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let c = load(&opts(write(dir.path(), "packs_dir: p\n")), &no_env).unwrap();
        assert_eq!(
            (c.max_session_ms, c.stream_write_timeout_ms),
            (5000, 10_000)
        );
        let f = write(
            dir.path(),
            "packs_dir: p\nstream:\n  max_session_ms: 250\n  write_timeout_ms: 1500\n",
        );
        let c = load(&opts(f.clone()), &no_env).unwrap();
        assert_eq!((c.max_session_ms, c.stream_write_timeout_ms), (250, 1500));
        let env = |k: &str| match k {
            "HELIXOR_STREAM_MAX_SESSION_MS" => Some("40".to_string()),
            "HELIXOR_STREAM_WRITE_TIMEOUT_MS" => Some("900".to_string()),
            _ => None,
        };
        let c = load(&opts(f), &env).unwrap();
        assert_eq!((c.max_session_ms, c.stream_write_timeout_ms), (40, 900));
        for (text, message) in [
            (
                "packs_dir: p\nstream:\n  max_session_ms: 0\n",
                "key `stream.max_session_ms` must be at least 1, not 0",
            ),
            (
                "packs_dir: p\nstream:\n  write_timeout_ms: 0\n",
                "key `stream.write_timeout_ms` must be at least 1, not 0",
            ),
            (
                "packs_dir: p\nstream:\n  max_session_ms: soon\n",
                "key `stream.max_session_ms` must be a non-negative integer, not a string",
            ),
        ] {
            let e = load(&opts(write(dir.path(), text)), &no_env).unwrap_err();
            assert!(e.to_string().contains(message), "{text}: {e}");
        }
    }

    #[test]
    fn empty_file_and_null_sections_use_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(
            dir.path(),
            "packs_dir: p\nreload:\nauth:\n  tokens_file: null\n",
        );
        let c = load(&opts(f), &no_env).unwrap();
        assert_eq!(c, Config::with_packs_dir(dir.path().join("p")));
    }
}
