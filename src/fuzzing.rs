//! Fuzz harnesses (issue 12): one function per target, run by the AFL
//! binaries of `fuzz/` and replayed over `fuzz/corpus/` and
//! `fuzz/regressions/` by `tests/it/fuzz_replay.rs`. Only with the cargo
//! feature `testing`: the harnesses sign a license with a fixed issuer key
//! and seal packs with a fixed content key and nonce.
//!
//! Every harness takes arbitrary bytes and returns normally on any input;
//! it panics only when an invariant of the code under test breaks, which is
//! the fuzzer's bug signal. The harnesses are deterministic: the keys,
//! nonce and clock they use are fixed.

use crate::canonical;
use crate::compiler::{compile_in_memory, Entitlement};
use crate::container::{seal_with_nonce, PackError, SealedPack};
use crate::crypto::sha256_hex;
use crate::engine::{Severity, StreamOptions};
use crate::license::{
    IssuerKeys, License, LicenseError, VerifiedLicense, FEATURE_CUSTOM_COMPILATION, LICENSE_FORMAT,
};
use crate::pack::load_pack;
use crate::playbook::PlaybookError;
use crate::signature::{PackSignature, PackSigners, SignatureFile};
use crate::{Error, Evaluator};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ed25519_dalek::{Signer as _, SigningKey};
use serde_json::{json, Map, Value};
use std::sync::OnceLock;
use time::OffsetDateTime;

/// The issuer key id of the harnesses' fixed signing key.
const ISSUER_KEY_ID: &str = "fuzz-issuer";
/// The license id of [`fixture_license`].
const LICENSE_ID: &str = "lic_fuzz_0001";

/// A text with PII of several kinds, evaluated by packs that load.
const PROBE_TEXT: &str = "Mail jane.doe@example.com or call (415) 555-0123; \
    card 4111 1111 1111 1111, SSN 123-45-6789, MRN 12345678, TCK-123456, secret plan.";

/// Custom rules of the second stream evaluator (and of the stream property
/// tests): flags, Luhn, overlaps.
pub const PROBE_RULES: &str = r#"
pack_id: test.stream_probe.v1
version: 1
rules:
  - {id: ticket, type: regex, pattern: '\bTCK-\d{6}\b', action: redact}
  - {id: word, type: regex, pattern: '(?i)\bsecret\w*', action: block}
  - {id: gift, type: luhn_checksum, pattern: '\d{4}-\d{4}', action: redact}
  - {id: at_host, type: regex, pattern: '@example\.com and \w+', action: redact}
  - {id: priority, type: regex, pattern: 'kkkk(?:lmno)?\b|kkkkl', action: redact}
  - {id: quote, type: regex, pattern: '^>\s?\w+', flags: [MULTILINE], action: redact}
  - {id: amount, type: regex, pattern: '\$\d+(?:\.\d\d)?', action: redact}
  - {id: codename, type: regex, pattern: '\b(?:bluebird|nightjar)\b', flags: [IGNORECASE], action: block}
  - {id: dotted, type: regex, pattern: 'x\.?y+\.?z', flags: [DOTALL], action: redact}
"#;

/// Stream texts are cut to this many code points (a bound on one run).
const MAX_STREAM_CHARS: usize = 2048;
/// Up to this many code points, every release is also checked for finality.
const FINALITY_CHARS: usize = 256;

/// Reports a broken invariant: the one way a harness panics.
#[allow(clippy::panic)]
#[track_caller]
fn broken(what: String) -> ! {
    panic!("fuzz invariant broken: {what}")
}

/// The harnesses' fixed issuer signing key (never a real one).
fn signing_key() -> SigningKey {
    SigningKey::from_bytes(&[0x5a; 32])
}

/// The trusted issuer keys that hold the fixed signing key's public half.
fn issuer_keys() -> IssuerKeys {
    IssuerKeys::from_keys(
        [(ISSUER_KEY_ID.to_string(), signing_key().verifying_key())],
        "fuzz fixture",
    )
}

/// `obj` signed as an issuer signs a license: the canonical JSON of every
/// field but `signature`, which is then set.
fn sign_object(mut obj: Map<String, Value>) -> Option<Map<String, Value>> {
    obj.remove("signature");
    let message = canonical::to_string(&Value::Object(obj.clone())).ok()?;
    let sig = signing_key().sign(message.as_bytes());
    obj.insert("signature".into(), json!(B64.encode(sig.to_bytes())));
    Some(obj)
}

/// The JSON of the license every harness that needs one uses: a fixed
/// content key, every pack and solver allowed, signed by the harnesses'
/// fixed issuer key.
pub fn fixture_license_json() -> String {
    let obj = json!({
        "format": LICENSE_FORMAT,
        "license_id": LICENSE_ID,
        "licensee": "Fuzz Corp",
        "tier": "DEVELOPER",
        "issued_at": "2026-01-01T00:00:00Z",
        "not_before": "2026-01-01T00:00:00Z",
        "not_after": "2036-01-01T00:00:00Z",
        "licensed_packs": ["*"],
        "licensed_solvers": ["*"],
        "features": [FEATURE_CUSTOM_COMPILATION],
        "content_key": B64.encode([0x42u8; 32]),
        "issuer_key_id": ISSUER_KEY_ID,
    });
    let signed = match obj {
        Value::Object(m) => sign_object(m).map(Value::Object),
        _ => None,
    };
    signed.map_or_else(String::new, |v| v.to_string())
}

/// [`fixture_license_json`], verified with the fixed issuer key at the
/// harnesses' fixed clock (inside its window).
pub fn fixture_license() -> &'static VerifiedLicense {
    static LICENSE: OnceLock<VerifiedLicense> = OnceLock::new();
    LICENSE.get_or_init(|| {
        let keys = || Ok::<_, LicenseError>(issuer_keys());
        License::verified(
            fixture_license_json().as_bytes(),
            "fuzz fixture",
            keys,
            now(),
        )
        .unwrap_or_else(|e| broken(format!("the fixture license does not verify: {e}")))
    })
}

/// The harnesses' fixed clock: inside the fixture license's window.
fn now() -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// `plaintext` sealed as a pack `pack_id` for [`fixture_license`], with a
/// fixed nonce (seeds and the harnesses).
pub fn seal_for_fixture(pack_id: &str, plaintext: &[u8]) -> Result<Vec<u8>, PackError> {
    let license = fixture_license();
    seal_with_nonce(
        pack_id,
        &license.license_id,
        &license.content_key().pack_key(),
        plaintext,
        [7; 12],
    )
}

/// Runs the probe text through a loaded evaluator and checks that the
/// whole-text answers agree with each other.
fn probe(ev: &Evaluator) {
    let d = ev.evaluate(PROBE_TEXT);
    let fatal = d.triggers.iter().any(|t| t.severity == Severity::Fatal);
    if !fatal && d.clean_text != ev.redacted_text(PROBE_TEXT) {
        broken(
            "a decision without a FATAL trigger has a clean_text other than redacted_text".into(),
        );
    }
}

/// The pack container ([§5](docs/formats.md#s5)): `data` as a `.hxpack` file loaded with
/// the fixture license, and `data` as the plaintext of a pack sealed for
/// it (the checks after decryption).
pub fn container(data: &[u8]) {
    let license = fixture_license();
    if let Ok(sealed) = SealedPack::parse(data, "fuzz.hxpack") {
        if sealed.pack_id.is_empty() || sealed.ciphertext.len() < 16 {
            broken("a parsed header has an empty pack id or no room for the tag".into());
        }
        if !data.ends_with(sealed.ciphertext) {
            broken("the ciphertext is not the end of the file".into());
        }
    }
    if let Ok(pack) = load_pack(data, "fuzz.hxpack", license) {
        probe(&pack.evaluator);
    }

    // The plaintext path: sealed here, so the key and tag are right.
    let pack_id = serde_json::from_slice::<Value>(data)
        .ok()
        .and_then(|v| v.get("pack_id").and_then(Value::as_str).map(str::to_string))
        .filter(|id| !id.is_empty() && id.len() <= 1024)
        .unwrap_or_else(|| "fuzz.pack.v1".to_string());
    let Ok(sealed) = seal_for_fixture(&pack_id, data) else {
        return;
    };
    match load_pack(&sealed, "fuzz.hxpack", license) {
        Ok(pack) => {
            if pack.pack_id != pack_id || pack.sha256 != sha256_hex(data) {
                broken("a loaded pack's id or digest differs from what was sealed".into());
            }
            probe(&pack.evaluator);
        }
        Err(Error::Pack(PackError::Unseal | PackError::Format(_))) => {
            broken("a pack sealed for the license does not parse or unseal".into())
        }
        Err(_) => {}
    }
}

/// The license parser ([§2](docs/formats.md#s2)): `data` parsed, verified and checked; and
/// `data`'s JSON object signed by the fixture issuer, which must then verify.
pub fn license(data: &[u8]) {
    let keys = issuer_keys();
    if let Ok(lic) = License::parse(data, "fuzz.hxlic") {
        let _ = lic.verify(&keys);
        exercise(&lic);
    }
    let Ok(Value::Object(obj)) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let Some(signed) = sign_object(obj) else {
        return;
    };
    let text = Value::Object(signed).to_string();
    if let Ok(lic) = License::parse(text.as_bytes(), "fuzz-signed.hxlic") {
        if lic.issuer_key_id == ISSUER_KEY_ID {
            if let Err(e) = lic.verify(&keys) {
                broken(format!(
                    "a license signed by the trusted issuer does not verify: {e}"
                ));
            }
        }
        exercise(&lic);
    }
}

/// The checks a parsed license goes through at load and compile.
fn exercise(lic: &License) {
    let _ = lic.check_window(now());
    let _ = lic.seconds_left(now());
    let _ = lic.check_pack(&lic.license_id);
    let _ = lic.check_catalog_pack(&lic.licensee);
    let _ = lic.check_solvers(&lic.features);
}

/// The playbook compiler ([§4.2](docs/formats.md#s4-2), as `helixor-pack test` runs it): a
/// playbook that compiles is sealed for the fixture license and must load.
pub fn playbook(data: &[u8]) {
    let Ok(compiled) = compile_in_memory(data, "fuzz.yaml", Entitlement::PolicyTest) else {
        return;
    };
    let Ok(sealed) = seal_for_fixture(&compiled.pack_id, &compiled.plaintext) else {
        return;
    };
    match load_pack(&sealed, "fuzz.hxpack", fixture_license()) {
        Ok(pack) => {
            if pack.sha256 != compiled.sha256 || pack.version != compiled.version {
                broken("the loaded pack's digest or version differs from the compiled one".into());
            }
            probe(&pack.evaluator);
        }
        // The compiler does not build the automata: one the engine cannot
        // build is refused at load, by name ([§5](docs/formats.md#s5) step 7).
        Err(Error::Playbook(PlaybookError::Unsupported { .. })) => {}
        Err(e) => broken(format!("a playbook that compiles does not load: {e}")),
    }
}

/// The one evaluation-request parser (`src/request.rs`) of every HTTP
/// route and `run --jsonl` ([§9.1](docs/configuration.md#s9-1)): `{text, pack_id?, normalize?}`, an
/// object with a key twice refused.
fn evaluate_body(data: &[u8]) -> Result<crate::request::EvaluateRequest, String> {
    crate::request::parse_evaluate_body(data).map_err(|e| e.to_string())
}

/// The JSON body parser, against serde_json's own parser and an
/// independent duplicate-key check: the strict parser refuses exactly the
/// documents with a key twice, and otherwise reads the same `text`.
pub fn json_body(data: &[u8]) {
    let strict = crate::request::parse_strict(data);
    let lax = serde_json::from_slice::<Value>(data);
    let dup = has_duplicate_key(data);
    match (&strict, &lax) {
        (Ok(s), Ok(l)) if s != l || dup == Some(true) => {
            broken("the strict parser read another value, or kept a key twice".into())
        }
        (Ok(_), Err(_)) => broken("the strict parser accepts what serde_json refuses".into()),
        (Err(_), Ok(_)) if dup != Some(true) => {
            broken("the strict parser refuses a document without a key twice".into())
        }
        _ => {}
    }
    let Ok(Value::Object(obj)) = lax else {
        return;
    };
    if let Ok(r) = evaluate_body(data) {
        if obj.get("text").and_then(Value::as_str) != Some(r.text.as_str())
            || obj.get("pack_id").and_then(Value::as_str) != r.pack_id.as_deref()
            || obj.get("normalize").and_then(Value::as_str) != r.normalize.map(|n| n.as_str())
        {
            broken("the body parser read another `text`, `pack_id` or `normalize`".into());
        }
    }
}

/// Whether the JSON document `data` has an object with a key twice
/// (`None` when it is not JSON).
fn has_duplicate_key(data: &[u8]) -> Option<bool> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_slice(data);
    let dup = DupCheck.deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(dup)
}

/// A seed that reads any JSON value and tells whether some object in it
/// has a key twice.
struct DupCheck;

impl<'de> serde::de::DeserializeSeed<'de> for DupCheck {
    type Value = bool;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for DupCheck {
    type Value = bool;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_str<E>(self, _: &str) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_unit<E>(self) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        let mut dup = false;
        while let Some(d) = seq.next_element_seed(DupCheck)? {
            dup |= d;
        }
        Ok(dup)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let mut keys: Vec<String> = Vec::new();
        let mut dup = false;
        while let Some(key) = map.next_key::<String>()? {
            dup |= map.next_value_seed(DupCheck)?;
            dup |= keys.contains(&key);
            keys.push(key);
        }
        Ok(dup)
    }
}

/// Every string value of `v` (keys are not judged, [§12.4](docs/gateways.md#s12-4)).
fn all_strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|e| all_strings(e, out)),
        Value::Object(m) => m.values().for_each(|e| all_strings(e, out)),
        _ => {}
    }
}

/// The body walker of the gateways ([§12.4](docs/gateways.md#s12-4), `src/json_text.rs`) and
/// the judge over it: the walker reads a JSON body exactly when serde_json
/// reads it without a key twice, finds exactly its string values, and a rewrite of them reads back as the same document with
/// those strings changed; the judge never panics, refuses only with a FATAL
/// rule met, and a body it rewrites is still JSON with as many strings.
pub fn body_walker(data: &[u8]) {
    use crate::json_text::{self, Body, BodyError};
    use crate::server::gateway::{judge_body, Judge, Verdict};
    const MAX: usize = 100_000;
    let walked = json_text::read(data, MAX);
    let text = std::str::from_utf8(data);
    match (&walked, &text) {
        (Err(BodyError::NotUtf8 { .. }), Ok(_)) | (Ok(_), Err(_)) => {
            broken("the walker misread whether the body is UTF-8".into())
        }
        (Ok(Body::Text(_)), Ok(t)) if json_text::looks_like_json(t) => {
            broken("a body that starts like JSON was read as text".into())
        }
        _ => {}
    }
    let mut lax: Option<Value> = None;
    if text.is_ok_and(json_text::looks_like_json) {
        // serde_json reads no byte order mark: the walker refuses it too.
        let dup = has_duplicate_key(data);
        match (&walked, dup) {
            (Ok(Body::Json(_)), Some(true)) => broken("a key twice was read".into()),
            (Ok(Body::Json(_)), None) => broken("the walker read what serde_json refuses".into()),
            // A key twice before a syntax error is refused as a key twice.
            (Err(BodyError::DuplicateKey), Some(false)) => {
                broken("a duplicate key was claimed where there is none".into())
            }
            (Err(BodyError::Malformed { .. }), Some(_)) => {
                broken("the walker refused JSON that serde_json reads".into())
            }
            _ => {}
        }
        lax = serde_json::from_slice(data).ok();
    }
    if let (Ok(Body::Json(found)), Some(v)) = (&walked, &lax) {
        // serde_json's maps are sorted by key: the strings are compared as
        // multisets (the unit tests pin document order).
        let mut want = Vec::new();
        all_strings(v, &mut want);
        want.sort_unstable();
        let mut got: Vec<&str> = found.iter().map(|s| &*s.text).collect();
        got.sort_unstable();
        if got != want {
            broken("the walker found other strings than serde_json".into());
        }
        let mut marked: Vec<String> = found.iter().map(|s| format!("<{}>", s.text)).collect();
        let out = json_text::rewrite(
            data,
            found
                .iter()
                .zip(&marked)
                .map(|(s, m)| (s.span.clone(), m.as_str())),
        );
        let mut back = Vec::new();
        match serde_json::from_slice::<Value>(&out) {
            Ok(b) => all_strings(&b, &mut back),
            Err(_) => broken("a rewritten body is not JSON".into()),
        }
        back.sort_unstable();
        marked.sort_unstable();
        if back != marked {
            broken("a rewritten body reads back as another document".into());
        }
    }
    let ev = &stream_evaluators()[0];
    let mut judge = Judge::new(ev, crate::engine::Normalize::None, None);
    match judge_body(&mut judge, data, MAX, true) {
        Ok(Verdict::Refuse) if judge.fatal_ids().is_empty() => {
            broken("a refusal without a FATAL rule".into())
        }
        Ok(Verdict::Rewrite(out)) if lax.is_some() => {
            let mut before = Vec::new();
            let mut after = Vec::new();
            all_strings(lax.as_ref().unwrap_or(&Value::Null), &mut before);
            match serde_json::from_slice::<Value>(&out) {
                Ok(b) => all_strings(&b, &mut after),
                Err(_) => broken("a redacted body is not JSON".into()),
            }
            if before.len() != after.len() {
                broken("a redacted body has another number of strings".into());
            }
        }
        Ok(Verdict::Abandoned) => broken("work abandoned outside a request".into()),
        _ => {}
    }
}

/// The two stream evaluators: built-in rules only, and the probe rules.
fn stream_evaluators() -> &'static [Evaluator; 2] {
    static EVALUATORS: OnceLock<[Evaluator; 2]> = OnceLock::new();
    EVALUATORS.get_or_init(|| {
        let build = |yaml: &str| {
            crate::testing::rules_evaluator("fuzz.stream.v1", "1", yaml)
                .unwrap_or_else(|e| broken(format!("a stream fixture does not build: {e}")))
        };
        [build("pack_id: fuzz.builtin.v1\n"), build(PROBE_RULES)]
    })
}

/// The parts of a stream input: options, piece sizes and the text.
struct StreamInput {
    evaluator: usize,
    opts: StreamOptions,
    sizes: Vec<usize>,
    text: String,
}

/// `data` as `[flags] [piece sizes…] 0xFF [text]` (no 0xFF: every byte
/// after the flags is text, cut in pieces of 7 code points). Flags: bit 0
/// picks the evaluator (0 built-in rules, 1 the probe rules), bit 1 set
/// turns `block_on_fatal` off, bits 2–4 times 5 give `lookahead_chars`.
fn stream_input(data: &[u8]) -> Option<StreamInput> {
    let (&flags, rest) = data.split_first()?;
    let (sizes, text) = match rest.iter().position(|&b| b == 0xFF) {
        Some(at) => (
            rest[..at]
                .iter()
                .map(|&b| usize::from(b % 40) + 1)
                .collect(),
            &rest[at + 1..],
        ),
        None => (vec![7], rest),
    };
    let sizes = if sizes.is_empty() { vec![1] } else { sizes };
    Some(StreamInput {
        evaluator: usize::from(flags & 1),
        opts: StreamOptions {
            block_on_fatal: flags & 2 == 0,
            lookahead_chars: usize::from((flags >> 2) & 7) * 5,
            ..StreamOptions::default()
        },
        sizes,
        text: String::from_utf8_lossy(text)
            .chars()
            .take(MAX_STREAM_CHARS)
            .collect(),
    })
}

/// A stream session ([§11.1](docs/streaming.md#s11-1)) over the text of `data` cut at its cut
/// points: without a block the releases concatenate to the whole text's
/// `redacted_text`; a block happens only with `block_on_fatal` and a FATAL
/// trigger of the whole text, and nothing is released after it; on short
/// texts every release is also final for the end of input.
pub fn stream(data: &[u8]) {
    let Some(input) = stream_input(data) else {
        return;
    };
    let ev = &stream_evaluators()[input.evaluator];
    let block = input.opts.block_on_fatal;
    let chars: Vec<char> = input.text.chars().collect();
    let check_each = chars.len() <= FINALITY_CHARS;
    let mut session = ev.stream(input.opts);
    let mut released = String::new();
    let mut pushed = String::new();
    let (mut at, mut k) = (0, 0);
    while at < chars.len() {
        let n = input.sizes[k % input.sizes.len()].min(chars.len() - at);
        let piece: String = chars[at..at + n].iter().collect();
        (at, k) = (at + n, k + 1);
        let was_blocked = session.blocked().is_some();
        let out = session.push(&piece);
        pushed.push_str(&piece);
        if was_blocked && !out.text.is_empty() {
            broken("a blocked session released text".into());
        }
        released.push_str(&out.text);
        if check_each
            && session.blocked().is_none()
            && !ev.redacted_text(&pushed).starts_with(&released)
        {
            broken(
                "a release is not final: the pushed text's redaction does not start with it".into(),
            );
        }
    }
    let was_blocked = session.blocked().is_some();
    let rest = session.finish();
    if was_blocked && !rest.text.is_empty() {
        broken("a blocked session released text at the finish".into());
    }
    released.push_str(&rest.text);
    if !session.push("after the end").text.is_empty() {
        broken("a finished session released text".into());
    }
    let whole = &input.text;
    let d = ev.evaluate(whole);
    let fatal = d.triggers.iter().any(|t| t.severity == Severity::Fatal);
    let redacted = ev.redacted_text(whole);
    match session.blocked() {
        Some(b) => {
            if !block || !fatal {
                broken(format!(
                    "blocked with {} without block_on_fatal and a FATAL trigger",
                    b.action
                ));
            }
            if !d
                .triggers
                .iter()
                .any(|t| t.action == b.action && t.severity == Severity::Fatal)
            {
                broken(format!(
                    "blocked with {}, not a FATAL trigger of the whole text",
                    b.action
                ));
            }
            if !redacted.starts_with(&released) {
                broken("a blocked session released what the whole text's redaction does not start with".into());
            }
        }
        None => {
            if block && fatal {
                broken(format!("the FATAL {} never blocked the session", d.action));
            }
            if released != redacted {
                broken("the releases do not concatenate to the whole text's redacted_text".into());
            }
            if !fatal && released != d.clean_text {
                broken("the releases differ from the decision's clean_text".into());
            }
        }
    }
}

/// The key id of the harnesses' fixed pack signer.
const SIGNER_KEY_ID: &str = "fuzz-signer";
/// The pack id of [`signature_pack`].
const SIGNED_PACK_ID: &str = "custom.fuzz_signed.v1";

/// The harnesses' fixed pack signing key (never a real one).
fn signer_key() -> SigningKey {
    SigningKey::from_bytes(&[0x3c; 32])
}

/// The pack the signature harness verifies against: sealed once.
fn signature_pack() -> &'static [u8] {
    static PACK: OnceLock<Vec<u8>> = OnceLock::new();
    PACK.get_or_init(|| {
        let plain = format!(r#"{{"pack_id":"{SIGNED_PACK_ID}"}}"#);
        seal_for_fixture(SIGNED_PACK_ID, plain.as_bytes())
            .unwrap_or_else(|e| broken(format!("the signed fixture pack cannot be sealed: {e}")))
    })
}

/// The fixture signer's signature of [`signature_pack`] at sequence 1:
/// the seed of the `signature` target.
pub fn fixture_signature() -> String {
    PackSignature::sign(
        signature_pack(),
        "fuzz",
        SIGNER_KEY_ID,
        &signer_key(),
        1,
        now(),
    )
    .map(|s| s.to_file_text())
    .unwrap_or_default()
}

/// The pack signature parser and verifier ([§17](docs/guides/signing.md#s17)): `data` as a
/// `.sig` beside the fixed pack, checked with the fixed signer trusted. A
/// signature that verifies must parse, name the signer, and sign that pack
/// id and those bytes; one that parses must write back to itself.
pub fn signature(data: &[u8]) {
    let signers = PackSigners::from_keys(
        [(SIGNER_KEY_ID.to_string(), signer_key().verifying_key())],
        "fuzz signers",
    );
    let pack = signature_pack();
    let file = SignatureFile::Bytes(data.to_vec());
    let parsed = PackSignature::parse(data, "fuzz.sig");
    match (
        &parsed,
        signers.verify(pack, SIGNED_PACK_ID, &file, "fuzz.hxpack"),
    ) {
        (Err(_), Ok(_)) => broken("a signature that does not parse verified".into()),
        (Ok(_), Ok(v)) => {
            if v.key_id != SIGNER_KEY_ID
                || v.pack_id != SIGNED_PACK_ID
                || v.pack_sha256 != sha256_hex(pack)
            {
                broken("a signature verified for another key, pack or bytes".into());
            }
        }
        (_, Err(PackError::Signature(..))) => {}
        (_, Err(e)) => broken(format!("a signature check failed with another error: {e}")),
    }
    if let Ok(s) = parsed {
        match PackSignature::parse(s.to_file_text().as_bytes(), "again.sig") {
            Ok(again) if again == s => {}
            _ => broken("a parsed signature does not write back to itself".into()),
        }
    }
}

/// A harness: arbitrary bytes in, a panic only on a broken invariant.
pub type Harness = fn(&[u8]);

/// Every harness by target name, as `fuzz/` and the replay test name them.
pub const TARGETS: [(&str, Harness); 7] = [
    ("container", container),
    ("license", license),
    ("playbook", playbook),
    ("json_body", json_body),
    ("stream", stream),
    ("body_walker", body_walker),
    ("signature", signature),
];
