//! The error names and exit codes of [§4.3](docs/errors.md#s4-3), shared by every layer; it
//! knows nothing of files, keys or payloads.

use std::fmt;
use std::sync::Arc;

/// Every error name the tool and the runtime report ([§4.3](docs/errors.md#s4-3)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorName {
    /// YAML unreadable, root not a mapping, `pack_id` missing.
    CompilerError,
    /// A declaration cannot be read (a kind of `CompilerError`).
    PlaybookParseError,
    /// Rules, codons or hard rules the engine cannot execute.
    UnsupportedPackDeclarationError,
    /// No license at any place of the lookup order.
    LicenseNotFoundError,
    /// The license file is unreadable, too large, or lacks a field.
    LicenseError,
    /// Unknown issuer key or a signature that does not verify.
    LicenseSignatureError,
    /// Before `not_before`.
    LicenseNotYetValidError,
    /// At or after `not_after`.
    LicenseExpiredError,
    /// Pack id or solver not allowed by the license.
    LicenseEntitlementError,
    /// A pack file that is not a well-formed container.
    PackFormatError,
    /// Decryption failed.
    PackUnsealError,
    /// The plaintext does not match its header or is not a playbook.
    PackIntegrityError,
    /// A pack that is not loaded, or no pack at all.
    PackNotFoundError,
    /// A pack signature that is missing, unparseable, untrusted, invalid,
    /// for another pack, or a rollback ([§17](docs/guides/signing.md#s17)).
    PackSignatureError,
    /// An invalid `serve` configuration.
    ConfigError,
    /// Wrong command-line arguments.
    UsageError,
    /// A malformed evaluation request.
    InvalidRequestError,
    /// HTTP 401.
    UnauthorizedError,
    /// HTTP 404 for an unknown route.
    NotFoundError,
    /// HTTP 405.
    MethodNotAllowedError,
    /// HTTP 413.
    PayloadTooLargeError,
    /// HTTP 415.
    UnsupportedMediaTypeError,
    /// HTTP 503.
    ServiceUnavailableError,
    /// A file that cannot be read or written.
    IoError,
    /// A decision log that does not verify: an edited, removed, reordered
    /// or cut line, or a checkpoint or proof that does not check.
    DecisionLogError,
}

impl ErrorName {
    /// Every name, in [§4.3](docs/errors.md#s4-3) order.
    pub const ALL: [ErrorName; 25] = [
        Self::CompilerError,
        Self::PlaybookParseError,
        Self::UnsupportedPackDeclarationError,
        Self::LicenseNotFoundError,
        Self::LicenseError,
        Self::LicenseSignatureError,
        Self::LicenseNotYetValidError,
        Self::LicenseExpiredError,
        Self::LicenseEntitlementError,
        Self::PackFormatError,
        Self::PackUnsealError,
        Self::PackIntegrityError,
        Self::PackNotFoundError,
        Self::PackSignatureError,
        Self::ConfigError,
        Self::UsageError,
        Self::InvalidRequestError,
        Self::UnauthorizedError,
        Self::NotFoundError,
        Self::MethodNotAllowedError,
        Self::PayloadTooLargeError,
        Self::UnsupportedMediaTypeError,
        Self::ServiceUnavailableError,
        Self::IoError,
        Self::DecisionLogError,
    ];

    /// The name printed as `s`, if it is one (e.g. an error body of a server).
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|n| n.as_str() == s)
    }

    /// The name as printed, e.g. `LicenseExpiredError`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CompilerError => "CompilerError",
            Self::PlaybookParseError => "PlaybookParseError",
            Self::UnsupportedPackDeclarationError => "UnsupportedPackDeclarationError",
            Self::LicenseNotFoundError => "LicenseNotFoundError",
            Self::LicenseError => "LicenseError",
            Self::LicenseSignatureError => "LicenseSignatureError",
            Self::LicenseNotYetValidError => "LicenseNotYetValidError",
            Self::LicenseExpiredError => "LicenseExpiredError",
            Self::LicenseEntitlementError => "LicenseEntitlementError",
            Self::PackFormatError => "PackFormatError",
            Self::PackUnsealError => "PackUnsealError",
            Self::PackIntegrityError => "PackIntegrityError",
            Self::PackNotFoundError => "PackNotFoundError",
            Self::PackSignatureError => "PackSignatureError",
            Self::ConfigError => "ConfigError",
            Self::UsageError => "UsageError",
            Self::InvalidRequestError => "InvalidRequestError",
            Self::UnauthorizedError => "UnauthorizedError",
            Self::NotFoundError => "NotFoundError",
            Self::MethodNotAllowedError => "MethodNotAllowedError",
            Self::PayloadTooLargeError => "PayloadTooLargeError",
            Self::UnsupportedMediaTypeError => "UnsupportedMediaTypeError",
            Self::ServiceUnavailableError => "ServiceUnavailableError",
            Self::IoError => "IoError",
            Self::DecisionLogError => "DecisionLogError",
        }
    }

    /// The CLI exit code of [§4.3](docs/errors.md#s4-3).
    pub fn exit_code(self) -> u8 {
        match self {
            Self::UsageError | Self::ConfigError => 2,
            Self::CompilerError
            | Self::PlaybookParseError
            | Self::UnsupportedPackDeclarationError => 3,
            Self::LicenseNotFoundError
            | Self::LicenseError
            | Self::LicenseSignatureError
            | Self::LicenseNotYetValidError
            | Self::LicenseExpiredError
            | Self::LicenseEntitlementError => 4,
            Self::PackFormatError
            | Self::PackUnsealError
            | Self::PackIntegrityError
            | Self::PackNotFoundError
            | Self::PackSignatureError => 5,
            // Every other name has its arm too: a new name must be given a
            // code here, it cannot become 1 unseen.
            Self::InvalidRequestError
            | Self::UnauthorizedError
            | Self::NotFoundError
            | Self::MethodNotAllowedError
            | Self::PayloadTooLargeError
            | Self::UnsupportedMediaTypeError
            | Self::ServiceUnavailableError
            | Self::IoError
            | Self::DecisionLogError => 1,
        }
    }
}

impl fmt::Display for ErrorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The underlying error of a failure (an OS error, a runtime's), kept as the
/// `source()` of the error that reports it rather than only flattened into
/// its message. Shared, so that the errors holding it stay `Clone`; compared
/// by what it says, as those errors are compared in tests.
#[derive(Debug, Clone)]
pub struct Cause(Arc<dyn std::error::Error + Send + Sync>);

impl Cause {
    /// Keeps `e` as a cause.
    pub fn new(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Arc::new(e))
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for Cause {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for Cause {}

/// `"{context}: {e}"`, the message of a failure with a cause, and the cause
/// kept: every `Io` variant is built through it (the message stays what it
/// always printed; the cause is also its `source()`).
pub fn caused(
    context: impl fmt::Display,
    e: impl std::error::Error + Send + Sync + 'static,
) -> (String, Option<Cause>) {
    (format!("{context}: {e}"), Some(Cause::new(e)))
}

/// Gives an error enum whose `Io(String, Option<Cause>)` variant is its
/// `IoError` the constructor `io(context, e)` (one definition for every
/// layer's error type).
macro_rules! io_constructor {
    ($t:ty) => {
        impl $t {
            /// An `Io` error: `"{context}: {e}"`, with `e` kept as its source.
            pub fn io(
                context: impl std::fmt::Display,
                e: impl std::error::Error + Send + Sync + 'static,
            ) -> Self {
                let (message, cause) = $crate::error::caused(context, e);
                Self::Io(message, cause)
            }
        }
    };
}
pub(crate) use io_constructor;

/// Errors that carry a [§4.3](docs/errors.md#s4-3) name: every layer's error type implements it.
pub trait Named {
    /// The name of this error ([§4.3](docs/errors.md#s4-3)).
    fn name(&self) -> ErrorName;
    /// Every problem of an `UnsupportedPackDeclarationError`; empty otherwise.
    fn problems(&self) -> &[String] {
        &[]
    }
    /// Where the error happened, when the message alone does not say
    /// (text errors print it on a line of its own; JSON errors omit it).
    fn context(&self) -> Option<String> {
        None
    }
}

/// Whether `c` must not reach a terminal or a log line raw: a C0 or C1
/// control character (escape sequences, carriage returns that overwrite
/// what was printed) or a bidirectional formatting character (which
/// reorders what is shown).
fn is_unprintable(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every control and bidirectional formatting character
/// escaped as `\u{1b}`: what a remote server said, made safe to print to a
/// terminal or a log (an answer can carry escape sequences that rewrite
/// the screen or forge lines). Borrowed when there is nothing to escape.
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(is_unprintable) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_unprintable(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert!(matches!(
            escape_controls("plain text, é 会"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(
            escape_controls("a\u{1b}[2Jb\r\nc\u{7f}\u{9b}d\u{202e}e\tf"),
            "a\\u{1b}[2Jb\\u{d}\\u{a}c\\u{7f}\\u{9b}d\\u{202e}e\\u{9}f"
        );
    }

    #[test]
    fn every_name_parses_back() {
        for n in ErrorName::ALL {
            assert_eq!(ErrorName::from_name(n.as_str()), Some(n));
        }
        assert_eq!(ErrorName::from_name("InternalError"), None);
    }

    #[test]
    fn an_io_error_keeps_its_cause_and_its_message() {
        use std::error::Error as _;
        let e = crate::Error::io("cannot write x", std::io::Error::other("disk full"));
        assert_eq!(e.to_string(), "cannot write x: disk full");
        assert_eq!(e.name(), ErrorName::IoError);
        assert_eq!(
            e.source().map(ToString::to_string).as_deref(),
            Some("disk full")
        );
        assert_eq!(e.clone(), e);
    }
}
