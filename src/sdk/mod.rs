//! Typed clients from the manifest ([§18](docs/formats.md#s18)): the template context built from
//! the packs of an `embedded-pack-manifest.json`, rendered with minijinja
//! from the templates of `src/sdk/templates/<lang>/` (built into the binary)
//! into a client package per language. Knows nothing of licenses or packs'
//! plaintext: it reads only the manifest, which holds no pattern.

use crate::Error;
use minijinja::Environment;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The generator's name, as the manifest's `generator` calls it.
pub const GENERATOR: &str = "helixor-sdk-gen";

/// A language clients are generated for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// Python ≥ 3.9, standard library only (`urllib`, dataclasses).
    Python,
    /// Java 17, `java.net.http`, with a small embedded JSON reader.
    Java,
    /// TypeScript with `fetch`.
    TypeScript,
}

impl std::str::FromStr for Lang {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "python" => Ok(Self::Python),
            "java" => Ok(Self::Java),
            "typescript" => Ok(Self::TypeScript),
            other => Err(Error::Usage(format!(
                "--lang `{other}` is not one of python, java, typescript"
            ))),
        }
    }
}

impl Lang {
    /// The default package name.
    pub fn default_package(self) -> &'static str {
        match self {
            Self::Python => "helixor_clients",
            Self::Java => "com.helixor.clients",
            Self::TypeScript => "helixor-clients",
        }
    }

    /// Whether `name` is a package name of this language.
    fn valid_package(self, name: &str) -> bool {
        let ident = |s: &str| {
            s.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        match self {
            Self::Python => ident(name),
            Self::Java => name.split('.').all(|p| ident(p) && !is_java_keyword(p)),
            Self::TypeScript => {
                !name.is_empty()
                    && name.len() <= 214
                    && name.chars().all(|c| {
                        c.is_ascii_lowercase() || c.is_ascii_digit() || "-._@/".contains(c)
                    })
            }
        }
    }
}

/// One template of a language and where its output goes: `{package_path}`,
/// `{package}` and, for a template rendered once per pack, `{client}` and
/// `{module}` are replaced.
struct TemplateFile {
    name: &'static str,
    source: &'static str,
    out: &'static str,
    per_pack: bool,
}

macro_rules! template {
    ($lang:literal, $file:literal, $out:literal, $per_pack:literal) => {
        TemplateFile {
            name: concat!($lang, "/", $file),
            source: include_str!(concat!("templates/", $lang, "/", $file)),
            out: $out,
            per_pack: $per_pack,
        }
    };
}

fn templates(lang: Lang) -> Vec<TemplateFile> {
    match lang {
        Lang::Python => vec![
            template!("python", "pyproject.toml.j2", "pyproject.toml", false),
            template!("python", "__init__.py.j2", "{package}/__init__.py", false),
            template!("python", "_runtime.py.j2", "{package}/_runtime.py", false),
            template!("python", "py.typed.j2", "{package}/py.typed", false),
            template!("python", "client.py.j2", "{package}/{module}.py", true),
        ],
        Lang::Java => vec![
            template!("java", "README.md.j2", "README.md", false),
            template!(
                "java",
                "HelixorError.java.j2",
                "src/main/java/{package_path}/HelixorError.java",
                false
            ),
            template!(
                "java",
                "Json.java.j2",
                "src/main/java/{package_path}/Json.java",
                false
            ),
            template!(
                "java",
                "Severity.java.j2",
                "src/main/java/{package_path}/Severity.java",
                false
            ),
            template!(
                "java",
                "Transport.java.j2",
                "src/main/java/{package_path}/Transport.java",
                false
            ),
            template!(
                "java",
                "Client.java.j2",
                "src/main/java/{package_path}/{client}.java",
                true
            ),
        ],
        Lang::TypeScript => vec![
            template!("typescript", "package.json.j2", "package.json", false),
            template!("typescript", "tsconfig.json.j2", "tsconfig.json", false),
            template!("typescript", "runtime.ts.j2", "src/runtime.ts", false),
            template!("typescript", "index.ts.j2", "src/index.ts", false),
            template!("typescript", "client.ts.j2", "src/{module}.ts", true),
        ],
    }
}

/// An enum member: the value on the wire and its identifier in code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Member {
    /// The string the server sends.
    pub value: String,
    /// An UPPER_SNAKE identifier, unique in its enum, never `UNKNOWN`.
    pub name: String,
}

/// What the templates know of one pack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PackContext {
    /// The pack id, sent as `pack_id`.
    pub pack_id: String,
    /// The manifest's `domain_name`.
    pub domain_name: String,
    /// `<domain_name>Client`.
    pub client: String,
    /// snake_case of `domain_name` (module and file names).
    pub module: String,
    /// The manifest's `raw_pack_sha256`.
    pub raw_pack_sha256: String,
    /// The manifest's `actions`.
    pub actions: Vec<Member>,
    /// The custom rule ids and hard rule ids.
    pub rule_ids: Vec<Member>,
}

/// The whole context of a rendering.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Context {
    /// `helixor-sdk-gen <version>`.
    pub generator: String,
    /// The runtime's version.
    pub version: String,
    /// The language's package name.
    pub package: String,
    /// The package as a path (`com/helixor/clients`; Java).
    pub package_path: String,
    /// Every pack of the manifest, in its order.
    pub packs: Vec<PackContext>,
}

/// Module names the shared files of the generated packages use.
const RESERVED_MODULES: [&str; 5] = ["runtime", "_runtime", "index", "conformance", "__init__"];
/// Names the shared files of the generated packages export (a pack's
/// namespace in TypeScript is its domain name).
const RESERVED_DOMAINS: [&str; 4] = ["HelixorError", "Severity", "Json", "Transport"];

/// The actions of the built-in hard rules of a version-1 pack: named by its
/// derived actions, but not custom rules.
const BUILTIN_HARD_RULE_ACTIONS: [&str; 4] = [
    "block_glba_ssn_leakage",
    "block_pci_dss_pan_leakage",
    "block_hipaa_phi_leakage",
    "redact_and_permit_contact_pii",
];

/// The context of `manifest` (an `embedded-pack-manifest.json`) for `lang`,
/// with `rule_ids` per pack id when the declarations are known (from
/// `--playbook` or `--pack`); otherwise the rule ids its derived actions
/// name, with the hard rule ids ([§18](docs/formats.md#s18)).
pub fn context(
    manifest: &Value,
    lang: Lang,
    package: Option<&str>,
    declared_rules: &dyn Fn(&str) -> Option<Vec<String>>,
) -> Result<Context, Error> {
    let package = package.unwrap_or(lang.default_package()).to_string();
    if !lang.valid_package(&package) {
        return Err(Error::Usage(format!(
            "--package `{package}` is not a package name for this language"
        )));
    }
    let bad = |detail: String| Error::InvalidRequest(format!("the manifest: {detail}"));
    let packs = manifest
        .get("packs")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no `packs` list".into()))?;
    if packs.is_empty() {
        return Err(bad("`packs` is empty".into()));
    }
    let mut out: Vec<PackContext> = Vec::with_capacity(packs.len());
    for (i, p) in packs.iter().enumerate() {
        let field = |k: &str| {
            p.get(k)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| bad(format!("pack {i}: no string `{k}`")))
        };
        let pack_id = field("pack_id")?;
        let domain_name = field("domain_name")?;
        let raw_pack_sha256 = field("raw_pack_sha256")?;
        if !is_ident(&domain_name) {
            return Err(bad(format!(
                "pack `{pack_id}`: `domain_name` `{domain_name}` is not an identifier"
            )));
        }
        if raw_pack_sha256.len() != 64 || !raw_pack_sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad(format!(
                "pack `{pack_id}`: `raw_pack_sha256` is not 64 hex digits"
            )));
        }
        let strings = |k: &str| -> Result<Vec<String>, Error> {
            p.get(k)
                .and_then(Value::as_array)
                .ok_or_else(|| bad(format!("pack `{pack_id}`: no list `{k}`")))?
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| bad(format!("pack `{pack_id}`: `{k}` holds a non-string")))
                })
                .collect()
        };
        let actions = strings("actions")?;
        let hard_rule_ids: Vec<String> = p
            .get("hard_rules")
            .and_then(Value::as_array)
            .ok_or_else(|| bad(format!("pack `{pack_id}`: no list `hard_rules`")))?
            .iter()
            .map(|h| {
                h.get("id")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .ok_or_else(|| bad(format!("pack `{pack_id}`: a hard rule without `id`")))
            })
            .collect::<Result<_, _>>()?;
        let custom = declared_rules(&pack_id).unwrap_or_else(|| {
            actions
                .iter()
                .filter(|a| !BUILTIN_HARD_RULE_ACTIONS.contains(&a.as_str()))
                .filter_map(|a| {
                    a.strip_prefix("block_")
                        .or_else(|| a.strip_prefix("redact_"))
                })
                .map(str::to_string)
                .collect()
        });
        let mut rule_ids: Vec<String> = Vec::new();
        for id in custom.into_iter().chain(hard_rule_ids) {
            if !rule_ids.contains(&id) {
                rule_ids.push(id);
            }
        }
        let client = format!("{domain_name}Client");
        let module = snake_case(&domain_name);
        // The shared files of every language: a pack's client or module
        // may not take their names.
        if RESERVED_MODULES.contains(&module.as_str())
            || RESERVED_DOMAINS.contains(&domain_name.as_str())
        {
            return Err(bad(format!(
                "pack `{pack_id}`: its client {client} ({module}) would take the name of a shared file"
            )));
        }
        if let Some(other) = out
            .iter()
            .find(|o| o.client == client || o.module == module)
        {
            return Err(bad(format!(
                "packs `{}` and `{pack_id}` both make a client named {client}: generate them into separate directories",
                other.pack_id
            )));
        }
        out.push(PackContext {
            pack_id,
            domain_name,
            client,
            module,
            raw_pack_sha256,
            actions: members(&actions),
            rule_ids: members(&rule_ids),
        });
    }
    Ok(Context {
        generator: format!("{GENERATOR} {}", crate::VERSION),
        version: crate::VERSION.to_string(),
        package_path: package.replace('.', "/"),
        package,
        packs: out,
    })
}

/// One generated file: where it goes under the output directory, and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    /// Relative path.
    pub path: PathBuf,
    /// The file's text.
    pub text: String,
}

/// Renders every template of `lang` for `ctx`: the same context always
/// gives the same files, in the same order.
pub fn render(ctx: &Context, lang: Lang) -> Result<Vec<Generated>, Error> {
    let mut env = Environment::new();
    // Generated code is not HTML: nothing is escaped behind the
    // templates' back; every literal goes through `lit`.
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.set_keep_trailing_newline(true);
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.add_filter("lit", move |s: String| literal(lang, &s));
    env.add_filter("comment", |s: String| comment_safe(&s));
    let files = templates(lang);
    for t in &files {
        env.add_template(t.name, t.source)
            .map_err(|e| template_error(t.name, &e))?;
    }
    let mut out = Vec::new();
    for t in &files {
        let tmpl = env
            .get_template(t.name)
            .map_err(|e| template_error(t.name, &e))?;
        let path_of = |pack: Option<&PackContext>| {
            let mut p = t
                .out
                .replace("{package_path}", &ctx.package_path)
                .replace("{package}", &ctx.package);
            if let Some(pack) = pack {
                p = p
                    .replace("{client}", &pack.client)
                    .replace("{module}", &pack.module);
            }
            PathBuf::from(p)
        };
        if t.per_pack {
            for pack in &ctx.packs {
                let text = tmpl
                    .render(minijinja::context! { pack => pack, ..minijinja::Value::from_serialize(ctx) })
                    .map_err(|e| template_error(t.name, &e))?;
                out.push(Generated {
                    path: path_of(Some(pack)),
                    text,
                });
            }
        } else {
            let text = tmpl.render(ctx).map_err(|e| template_error(t.name, &e))?;
            out.push(Generated {
                path: path_of(None),
                text,
            });
        }
    }
    Ok(out)
}

/// Writes `files` under `dir` (created if needed), each atomically.
pub fn write(dir: &Path, files: &[Generated]) -> Result<(), Error> {
    for f in files {
        let path = dir.join(&f.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| {
                Error::io(
                    format_args!("cannot create directory {}", parent.display()),
                    e,
                )
            })?;
        }
        crate::atomic::write_atomic(&path, f.text.as_bytes())
            .map_err(|e| Error::io(format_args!("cannot write {}", path.display()), e))?;
    }
    Ok(())
}

fn template_error(name: &str, e: &minijinja::Error) -> Error {
    // A template is part of the binary: failing to render one is a bug,
    // reported with where it happened.
    Error::Io(format!("template {name}: {e:#}"), None)
}

/// Whether `s` is an ASCII identifier (letters, digits, `_`; not first a digit).
fn is_ident(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `RegulatoryPiiGuard` → `regulatory_pii_guard`.
fn snake_case(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    let chars: Vec<char> = s.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() {
            let prev_lower =
                i > 0 && (chars[i - 1].is_ascii_lowercase() || chars[i - 1].is_ascii_digit());
            let next_lower = chars.get(i + 1).is_some_and(char::is_ascii_lowercase);
            let prev_upper = i > 0 && chars[i - 1].is_ascii_uppercase();
            if i > 0 && !out.ends_with('_') && (prev_lower || (prev_upper && next_lower)) {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Enum members for `values`: UPPER_SNAKE names, unique, never `UNKNOWN`
/// (every language's enum keeps that one for values it does not know).
fn members(values: &[String]) -> Vec<Member> {
    let mut taken: BTreeSet<String> = BTreeSet::from(["UNKNOWN".to_string()]);
    values
        .iter()
        .map(|v| {
            let mut name: String = v
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() {
                        c.to_ascii_uppercase()
                    } else {
                        '_'
                    }
                })
                .collect();
            name = name.trim_matches('_').to_string();
            while name.contains("__") {
                name = name.replace("__", "_");
            }
            if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
                name = format!("V_{name}");
            }
            let base = name.clone();
            let mut n = 2;
            while taken.contains(&name) {
                name = format!("{base}_{n}");
                n += 1;
            }
            taken.insert(name.clone());
            Member {
                value: v.clone(),
                name,
            }
        })
        .collect()
}

/// A complete string literal of `lang` for `s`.
fn literal(lang: Lang, s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            // Java reads `\uXXXX` before it lexes: a control character is
            // written as an octal escape there, which it does not.
            c if (c as u32) < 0x20 || c == '\u{7f}' => match lang {
                Lang::Java => out.push_str(&format!("\\{:03o}", c as u32)),
                Lang::Python | Lang::TypeScript => {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                }
            },
            // Line separators end a line in JavaScript sources before ES2019
            // and in some editors: escaped where an escape exists.
            '\u{2028}' | '\u{2029}' if lang != Lang::Java => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `s` made safe inside any comment of the three languages: no comment
/// terminator, no line break, no control character.
fn comment_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() || c == '\u{2028}' || c == '\u{2029}' {
                '?'
            } else {
                c
            }
        })
        .collect::<String>()
        .replace("*/", "*?")
}

fn is_java_keyword(s: &str) -> bool {
    const KEYWORDS: [&str; 53] = [
        "abstract",
        "assert",
        "boolean",
        "break",
        "byte",
        "case",
        "catch",
        "char",
        "class",
        "const",
        "continue",
        "default",
        "do",
        "double",
        "else",
        "enum",
        "extends",
        "final",
        "finally",
        "float",
        "for",
        "goto",
        "if",
        "implements",
        "import",
        "instanceof",
        "int",
        "interface",
        "long",
        "native",
        "new",
        "package",
        "private",
        "protected",
        "public",
        "return",
        "short",
        "static",
        "strictfp",
        "super",
        "switch",
        "synchronized",
        "this",
        "throw",
        "throws",
        "transient",
        "try",
        "void",
        "volatile",
        "while",
        "true",
        "false",
        "null",
    ];
    KEYWORDS.contains(&s)
}

#[cfg(test)]
mod tests;
