//! Helpers for the black-box CLI tests: a sandbox per test (its own HOME,
//! working directory, issuer key and licenses, no `HELIXOR_*` variables from
//! the caller's environment), and assertions on the error contract of [§4.3](docs/errors.md#s4-3).

use assert_cmd::Command;
use serde_json::Value;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

/// The issuer key id every sandbox generates.
pub const ISSUER: &str = "test-issuer";

/// The exact message of every decryption failure ([§4.3](docs/errors.md#s4-3)).
pub const UNSEAL_MESSAGE: &str =
    "Decryption failed: content key mismatch or corrupted pack envelope";

/// Builds a `Vec<OsString>` from strings and paths: `args!["run", "--pack", &pack]`.
macro_rules! args {
    ($($a:expr),* $(,)?) => {
        vec![$(::std::ffi::OsString::from($a)),*]
    };
}
pub(crate) use args;

/// A fixture copied from `../shared/reference/` (or the schema's example).
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fixtures")
        .join(name)
}

/// The text of a fixture.
pub fn fixture_text(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).unwrap()
}

/// One test's sandbox.
pub struct Env {
    root: tempfile::TempDir,
    /// `$HOME` of every command.
    pub home: PathBuf,
    /// The working directory of every command (`./helixor.hxlic` lives here).
    pub work: PathBuf,
    /// An issuer-keys directory holding `test-issuer.pub` (and its `.key`).
    pub keys: PathBuf,
    /// The issuer's secret key file.
    pub key_file: PathBuf,
    /// A license for `custom.*` and `compliance.*` with `custom_playbook_compilation`.
    pub lic: PathBuf,
}

/// What a failing command printed, in both error formats.
#[derive(Debug)]
pub struct Failure {
    /// stderr of the text run.
    pub text: String,
    /// `message` of the JSON run.
    pub message: String,
    /// `problems` of the JSON run.
    pub problems: Vec<String>,
}

impl Failure {
    /// Asserts the text form names every one of `needles`.
    pub fn names(&self, needles: &[&str]) -> &Self {
        for n in needles {
            assert!(
                self.text.contains(n),
                "stderr should name {n:?}:\n{}",
                self.text
            );
        }
        self
    }
}

impl Env {
    pub fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        let work = root.path().join("work");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        let keys = root.path().join("keys");
        let mut env = Env {
            home,
            work,
            key_file: keys.join(format!("{ISSUER}.key")),
            keys,
            lic: PathBuf::new(),
            root,
        };
        env.ok(args![
            "license", "keygen", "--key-id", ISSUER, "--out", &env.keys
        ]);
        env.lic = env.issue(
            "lic_main",
            &[
                "--packs",
                "custom.*,compliance.*",
                "--features",
                "custom_playbook_compilation",
            ],
        );
        env
    }

    /// The sandbox root (outside the working directory).
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// A path in the working directory.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.work.join(rel)
    }

    /// Writes a file in the working directory.
    pub fn write(&self, rel: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let p = self.path(rel);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(&p, bytes).unwrap();
        p
    }

    /// The binary, with this sandbox's HOME and working directory and no
    /// `HELIXOR_*` or proxy variable inherited.
    pub fn cmd(&self) -> Command {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_helixor-pack"));
        super::scrubbed(&mut c)
            .current_dir(&self.work)
            .env("HOME", &self.home)
            .env_remove("HELIXOR_LICENSE_FILE")
            .env_remove("HELIXOR_ISSUER_KEYS");
        let mut c = Command::from_std(c);
        c.timeout(Duration::from_secs(120));
        c
    }

    /// Runs a command with `envs` and `stdin`, returning its raw output.
    pub fn output_with(
        &self,
        args: &[OsString],
        envs: &[(&str, &Path)],
        stdin: Option<&[u8]>,
    ) -> Output {
        let mut c = self.cmd();
        c.args(args);
        for (k, v) in envs {
            c.env(k, v);
        }
        if let Some(s) = stdin {
            c.write_stdin(s.to_vec());
        }
        let out = c.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("panicked"),
            "the command panicked: {args:?}\n{stderr}"
        );
        out
    }

    /// Runs a command that must succeed; returns its stdout.
    pub fn ok(&self, args: Vec<OsString>) -> String {
        self.ok_with(&args, &[], None)
    }

    /// Runs a command that must succeed, with variables and stdin; returns stdout.
    pub fn ok_with(
        &self,
        args: &[OsString],
        envs: &[(&str, &Path)],
        stdin: Option<&[u8]>,
    ) -> String {
        let out = self.output_with(args, envs, stdin);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs a command that must succeed and print one JSON document.
    pub fn ok_json(&self, args: Vec<OsString>) -> Value {
        let s = self.ok(args);
        serde_json::from_str(&s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
    }

    /// Runs a command that must fail with error `name` and exit `code`, once
    /// with text errors and once with `--error-format json` (after the
    /// subcommand), and checks [§4.3](docs/errors.md#s4-3): the name is the first word of
    /// stderr and the `error` field, `problems` is present (non-empty only
    /// for `UnsupportedPackDeclarationError`), nothing on stdout, no panic.
    pub fn fails(&self, args: Vec<OsString>, name: &str, code: i32) -> Failure {
        self.fails_with(&args, &[], None, name, code)
    }

    /// [`Env::fails`] with environment variables and stdin.
    pub fn fails_with(
        &self,
        args: &[OsString],
        envs: &[(&str, &Path)],
        stdin: Option<&[u8]>,
        name: &str,
        code: i32,
    ) -> Failure {
        let out = self.output_with(args, envs, stdin);
        let text = String::from_utf8(out.stderr).unwrap();
        assert_eq!(
            out.status.code(),
            Some(code),
            "{args:?}: exit code; stderr:\n{text}"
        );
        assert!(
            text.starts_with(&format!("{name}: ")),
            "{args:?}: stderr should start with `{name}: `:\n{text}"
        );
        assert!(
            out.stdout.is_empty(),
            "{args:?}: nothing on stdout on error, got:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );

        let mut json_args = args.to_vec();
        json_args.push("--error-format".into());
        json_args.push("json".into());
        let out = self.output_with(&json_args, envs, stdin);
        assert_eq!(out.status.code(), Some(code), "{json_args:?}: exit code");
        assert!(out.stdout.is_empty(), "{json_args:?}: nothing on stdout");
        let stderr = String::from_utf8(out.stderr).unwrap();
        let v: Value = serde_json::from_str(stderr.trim()).unwrap_or_else(|e| {
            panic!("{json_args:?}: stderr is not one JSON object ({e}):\n{stderr}")
        });
        let obj = v.as_object().expect("a JSON object");
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["error", "message", "problems"], "{stderr}");
        assert_eq!(v["error"], name, "{stderr}");
        let message = v["message"]
            .as_str()
            .expect("message is a string")
            .to_string();
        let problems: Vec<String> = v["problems"]
            .as_array()
            .expect("problems is a list")
            .iter()
            .map(|p| p.as_str().expect("problems are strings").to_string())
            .collect();
        if name == "UnsupportedPackDeclarationError" {
            assert!(!problems.is_empty(), "{stderr}");
        } else {
            assert!(problems.is_empty(), "{stderr}");
        }
        // Same first line (clap's usage hint below it echoes the extra flag).
        assert_eq!(
            text.lines().next().unwrap_or_default(),
            format!("{name}: {}", message.lines().next().unwrap_or_default()),
            "text and JSON messages differ:\n{text}\n{message}"
        );
        for p in &problems {
            assert!(
                text.contains(p.as_str()),
                "text lacks problem {p:?}:\n{text}"
            );
        }
        Failure {
            text,
            message,
            problems,
        }
    }

    /// `--license L --issuer-keys <sandbox keys>`.
    pub fn lic_args(&self, license: &Path) -> Vec<OsString> {
        args!["--license", license, "--issuer-keys", &self.keys]
    }

    /// Issues a license `<id>.hxlic` with the sandbox issuer key and `extra` flags.
    pub fn issue(&self, id: &str, extra: &[&str]) -> PathBuf {
        let out = self
            .root
            .path()
            .join("licenses")
            .join(format!("{id}.hxlic"));
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        let mut a = args![
            "license",
            "issue",
            "--issuer-key",
            &self.key_file,
            "--license-id",
            id,
            "--licensee",
            "Test Corp",
            "--out",
            &out
        ];
        a.extend(extra.iter().map(OsString::from));
        self.ok(a);
        out
    }

    /// `compile --json` of `playbook` for `license` into `out`; returns the JSON.
    pub fn compile(&self, playbook: &Path, license: &Path, out: &Path) -> Value {
        let mut a = args!["compile", "--playbook", playbook, "--out", out, "--json"];
        a.extend(self.lic_args(license));
        self.ok_json(a)
    }

    /// Compiles a fixture for the main license into `<work>/<stem>.hxpack`.
    pub fn pack(&self, fixture_name: &str) -> PathBuf {
        let stem = fixture_name.trim_end_matches(".yaml");
        let out = self.path(&format!("{stem}.hxpack"));
        self.compile(&fixture(fixture_name), &self.lic, &out);
        out
    }

    /// `compile` args for `playbook`, the main license and `out`.
    pub fn compile_args(&self, playbook: &Path, license: &Path, out: &Path) -> Vec<OsString> {
        let mut a = args!["compile", "--playbook", playbook, "--out", out];
        a.extend(self.lic_args(license));
        a
    }

    /// Compiles `playbook` expecting `name`/`code`, into an empty directory
    /// that must still be empty afterwards (no pack, no temporary file).
    pub fn compile_fails(&self, playbook: &Path, license: &Path, name: &str, code: i32) -> Failure {
        let dir = self.root.path().join("out");
        std::fs::create_dir_all(&dir).unwrap();
        let f = self.fails(
            self.compile_args(playbook, license, &dir.join("p.hxpack")),
            name,
            code,
        );
        assert_eq!(
            entries(&dir),
            Vec::<String>::new(),
            "a failed compile leaves no file"
        );
        f
    }

    /// `run --pack P --text T` with the main license; returns the decision.
    pub fn decide(&self, pack: &Path, text: &str) -> Value {
        let mut a = args!["run", "--pack", pack, "--text", text];
        a.extend(self.lic_args(&self.lic));
        self.ok_json(a)
    }
}

impl Default for Env {
    fn default() -> Self {
        Self::new()
    }
}

/// The file names in `dir`, sorted.
pub fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Length of the header's pack id.
pub fn id_len(pack: &[u8]) -> usize {
    usize::from(u16::from_be_bytes([pack[6], pack[7]]))
}

/// Copies `src` to `dst` with `f` applied to its bytes.
pub fn mutate(src: &Path, dst: &Path, f: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    let mut bytes = std::fs::read(src).unwrap();
    f(&mut bytes);
    std::fs::write(dst, &bytes).unwrap();
    dst.to_path_buf()
}

/// Hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}
