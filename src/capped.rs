//! Reading files and streams under a size cap that is checked before the
//! input is held whole (every input is capped before it is parsed). Knows
//! nothing of what the bytes mean; callers turn failures into their own errors.

use std::io::Read;
use std::path::Path;

/// Why a capped read failed.
#[derive(Debug)]
pub enum CappedError {
    /// The file or stream could not be opened or read.
    Io(std::io::Error),
    /// The input is larger than the cap.
    TooLarge,
}

impl std::fmt::Display for CappedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Io(e) => write!(f, "{e}"),
            Self::TooLarge => f.write_str("input over the size limit"),
        }
    }
}

/// Reads all of `reader`, failing once more than `cap` bytes arrive.
pub fn read_capped(reader: impl Read, cap: u64) -> Result<Vec<u8>, CappedError> {
    let mut buf = Vec::new();
    reader
        .take(cap.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(CappedError::Io)?;
    if buf.len() as u64 > cap {
        return Err(CappedError::TooLarge);
    }
    Ok(buf)
}

/// Whether a read failed because the machine ran out of a resource (file
/// descriptors, memory) rather than because of the file: such a failure is
/// an `IoError`, never blamed on the license or the pack (they are fine).
pub fn is_exhaustion(e: &std::io::Error) -> bool {
    // EMFILE, ENFILE, ENOMEM (Linux numbers; the kinds are not stable names).
    e.kind() == std::io::ErrorKind::OutOfMemory || matches!(e.raw_os_error(), Some(12 | 23 | 24))
}

/// Opens and reads the file at `path` under the cap.
pub fn read_file_capped(path: &Path, cap: u64) -> Result<Vec<u8>, CappedError> {
    let file = std::fs::File::open(path).map_err(CappedError::Io)?;
    read_capped(file, cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_is_inclusive() {
        assert_eq!(read_capped(&b"abcd"[..], 4).unwrap(), b"abcd");
        assert!(matches!(
            read_capped(&b"abcde"[..], 4),
            Err(CappedError::TooLarge)
        ));
        assert!(matches!(
            read_file_capped(Path::new("/nonexistent/x"), 4),
            Err(CappedError::Io(_))
        ));
    }

    #[test]
    fn exhaustion_is_told_apart_from_a_bad_file() {
        assert!(is_exhaustion(&std::io::Error::from_raw_os_error(24)));
        assert!(is_exhaustion(&std::io::Error::from_raw_os_error(23)));
        assert!(!is_exhaustion(&std::io::Error::from_raw_os_error(2)));
        assert!(!is_exhaustion(&std::io::Error::from_raw_os_error(13)));
    }
}
