//! Bearer tokens ([§9.1](docs/configuration.md#s9-1) `auth.tokens_file`): parsing the token file and
//! checking `Authorization: Bearer` in constant time over SHA-256 digests.
//! Never stores, logs or returns a token; does not read any other file.

use crate::Error;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The header LiteLLM sends its guardrail `api_key` in.
pub const API_KEY_HEADER: &str = "x-api-key";

/// Largest token file read (a token per line; far more than any deployment needs).
pub const MAX_TOKENS_FILE_BYTES: u64 = 1024 * 1024;

/// The accepted tokens, as SHA-256 digests only.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenSet {
    digests: Vec<[u8; 32]>,
}

impl std::fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSet")
            .field("tokens", &self.digests.len())
            .finish()
    }
}

fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

impl TokenSet {
    /// Parses a token file: one token per line, either the token itself or
    /// `sha256:<64 lowercase hex digits>`; blank lines and `#` comments ignored.
    /// `name` is used in messages (which never quote a token).
    pub fn parse(text: &str, name: &str) -> Result<Self, Error> {
        let mut digests = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if let Some(hex_digest) = line.strip_prefix("sha256:") {
                let bytes: Option<[u8; 32]> = (hex_digest.len() == 64
                    && hex_digest
                        .bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
                .then(|| hex::decode(hex_digest).ok())
                .flatten()
                .and_then(|v| v.try_into().ok());
                match bytes {
                    Some(d) => digests.push(d),
                    None => {
                        return Err(Error::Config(format!(
                            "auth.tokens_file {name}, line {}: `sha256:` must be followed by 64 lowercase hex digits",
                            i + 1
                        )))
                    }
                }
            } else {
                digests.push(digest(line.as_bytes()));
            }
        }
        Ok(Self { digests })
    }

    /// Reads and parses the token file at `path` (a `ConfigError` if unreadable).
    pub fn read(path: &std::path::Path) -> Result<(Self, [u8; 32]), Error> {
        let name = path.display().to_string();
        let bytes =
            crate::capped::read_regular_file_capped(path, MAX_TOKENS_FILE_BYTES).map_err(|e| {
                match e {
                    crate::capped::CappedError::Io(e) => {
                        Error::Config(format!("auth.tokens_file {name} cannot be read: {e}"))
                    }
                    crate::capped::CappedError::TooLarge => Error::Config(format!(
                        "auth.tokens_file {name} is over the {MAX_TOKENS_FILE_BYTES}-byte limit"
                    )),
                }
            })?;
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| Error::Config(format!("auth.tokens_file {name} is not UTF-8 text")))?;
        Ok((Self::parse(text, &name)?, digest(&bytes)))
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.digests.len()
    }

    /// Whether no token is accepted.
    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
    }

    /// Whether `token` is one of the accepted tokens. Compares every digest in
    /// constant time, so the answer's timing does not depend on which one.
    pub fn accepts(&self, token: &str) -> bool {
        let d = digest(token.as_bytes());
        let mut ok = subtle::Choice::from(0u8);
        for known in &self.digests {
            ok |= known.ct_eq(&d);
        }
        bool::from(ok)
    }

    /// Checks an `Authorization` header value (`Bearer <token>`).
    pub fn accepts_header(&self, header: Option<&[u8]>) -> bool {
        let Some(value) = header.and_then(|h| std::str::from_utf8(h).ok()) else {
            return false;
        };
        let value = value.trim();
        let Some((scheme, token)) = value.split_once(' ') else {
            return false;
        };
        scheme.eq_ignore_ascii_case("bearer") && self.accepts(token.trim())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_and_hashed_tokens() {
        let hashed = hex::encode(digest(b"s3cret"));
        let set = TokenSet::parse(
            &format!("# comment\n\nplain-token\n  sha256:{hashed}  \n"),
            "t",
        )
        .unwrap();
        assert_eq!(set.len(), 2);
        assert!(set.accepts("plain-token"));
        assert!(set.accepts("s3cret"));
        // The digest line is not itself a token.
        assert!(!set.accepts(&format!("sha256:{hashed}")));
        assert!(!set.accepts(&hashed));
        assert!(!set.accepts(""));
        assert!(set.accepts_header(Some(b"Bearer plain-token")));
        assert!(set.accepts_header(Some(b"bearer s3cret")));
        assert!(!set.accepts_header(Some(b"Basic plain-token")));
        assert!(!set.accepts_header(Some(b"Bearer")));
        assert!(!set.accepts_header(None));
    }

    #[test]
    fn bad_digest_line_is_a_config_error_without_the_token() {
        let e = TokenSet::parse("ok\nsha256:ABCDEF\n", "f").unwrap_err();
        assert!(matches!(e, Error::Config(_)));
        assert!(e.to_string().contains("line 2"), "{e}");
        assert!(!e.to_string().contains("ABCDEF"));
    }
}
