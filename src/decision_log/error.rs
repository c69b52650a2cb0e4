//! The decision log's errors: reading, writing and verifying a log. Messages
//! name the file, line or signature, never a line's content or a key.

/// What went wrong with a decision log.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum LogError {
    /// A file cannot be read or written.
    #[error("{0}")]
    Io(String),
    /// A line is not what the log wrote (edited, reordered, cut).
    #[error("{0}")]
    Corrupt(String),
    /// A checkpoint or proof does not verify, or does not match the log.
    #[error("{0}")]
    Verify(String),
    /// A key or setting is unusable.
    #[error("{0}")]
    Config(String),
}
