//! The decision log of SPEC §19: an append-only, tamper-evident log of
//! decisions, an RFC 6962 Merkle tree whose heads are published as C2SP
//! signed-note checkpoints.

pub mod files;
pub mod merkle;
pub mod note;
pub mod record;
pub mod verify;
pub mod writer;

mod error;

pub use error::LogError;
