//! What the `Debug` of a type holding a secret (a key, a pack's plaintext,
//! a pattern) or a payload prints in its place: its size, never its bytes.

use std::fmt;

/// Prints `<redacted N bytes>`.
#[derive(Clone, Copy)]
pub(crate) struct Redacted(pub(crate) usize);

impl Redacted {
    /// The stand-in of `bytes`.
    pub(crate) fn of(bytes: impl AsRef<[u8]>) -> Self {
        Self(bytes.as_ref().len())
    }
}

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<redacted {} bytes>", self.0)
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;

    /// A pattern, a context word, a payload and a JSON key found nowhere
    /// else in what the types below hold.
    const PATTERN_MARK: &str = "ZQXW";
    const WORD: &str = "zqxcontextword";
    const PAYLOAD: &str = "jane.qzx@example.com 078-05-1120";
    const KEY: &str = "qzxkey";

    fn hidden(shown: &str, secrets: &[&str]) {
        for s in secrets {
            assert!(!shown.contains(s), "{s:?} in {shown}");
        }
    }

    #[test]
    fn debug_prints_no_pattern_plaintext_key_or_payload() {
        let pattern = format!(r"\b{PATTERN_MARK}-\d{{6}}\b");
        let yaml = format!(
            "pack_id: custom.redacted.v1\nversion: 1\nrules:\n  - {{id: ticket, type: regex, pattern: '{pattern}', action: redact}}\n"
        );
        let doc = crate::parse_document(yaml.as_bytes(), "p.yaml").unwrap();
        let compiled =
            crate::compile_in_memory(yaml.as_bytes(), "p.yaml", crate::Entitlement::PolicyTest)
                .unwrap();
        let plaintext = String::from_utf8(compiled.plaintext.to_vec()).unwrap();
        assert!(plaintext.contains(PATTERN_MARK));
        let license = crate::fuzzing::fixture_license();
        let sealed =
            crate::fuzzing::seal_for_fixture(&compiled.pack_id, &compiled.plaintext).unwrap();
        let loaded = crate::load_pack(&sealed, "p.hxpack", license).unwrap();
        let rule = &compiled.rules[0];
        let cost = crate::pattern::cost::PackPattern {
            exact: &rule.pattern.exact_src,
            filter: Some(&rule.pattern.filter),
            ascii_words: Some(&rule.pattern.ascii_words),
            required: rule.pattern.required.as_deref(),
            literals: rule.pattern.literals.as_ref(),
        };
        let patterns = [
            format!("{doc:?}"),
            format!("{compiled:?}"),
            format!("{loaded:?}"),
            format!("{rule:?}"),
            format!("{:?}", rule.pattern),
            format!("{cost:?}"),
            format!("{:?}", *compiled.program),
        ];
        for shown in &patterns {
            hidden(shown, &[PATTERN_MARK, &plaintext]);
        }
        // The names stay: a Debug is still of use.
        assert!(
            patterns[2].contains("custom.redacted.v1"),
            "{}",
            patterns[2]
        );
        assert!(patterns[3].contains("ticket"), "{}", patterns[3]);

        let context = crate::program::Context::new(vec![WORD.into()], 8, 8).unwrap();
        hidden(&format!("{context:?}"), &[WORD]);

        // The fixture license's content key: 32 bytes 0x42.
        let key_b64 = base64::engine::general_purpose::STANDARD.encode([0x42u8; 32]);
        let lic: &crate::License = license;
        for shown in [format!("{license:?}"), format!("{lic:?}")] {
            hidden(&shown, &[&key_b64, "66, 66", "4242"]);
            assert!(shown.contains("lic_fuzz_0001"), "{shown}");
        }

        let body = format!(r#"{{"{KEY}": "{PAYLOAD}", "pack_id": "p"}}"#);
        let (request, _) =
            crate::request::parse_evaluate_object(format!(r#"{{"text": "{PAYLOAD}"}}"#).as_bytes())
                .unwrap();
        let read = crate::json_text::read(body.as_bytes(), 16).unwrap();
        let text = crate::json_text::read(PAYLOAD.as_bytes(), 16).unwrap();
        let input = crate::commands::RunInput::Text(PAYLOAD.into());
        for shown in [
            format!("{request:?}"),
            format!("{read:?}"),
            format!("{text:?}"),
            format!("{input:?}"),
        ] {
            hidden(&shown, &[PAYLOAD, "qzx", KEY]);
            assert!(shown.contains("redacted"), "{shown}");
        }
    }
}
