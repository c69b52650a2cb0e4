//! Reading files and streams under a size cap that is checked before the
//! input is held whole (every input is capped before it is parsed), and the
//! deployment's files only when they are regular files, without blocking.
//! Knows nothing of what the bytes mean; callers turn failures into their
//! own errors.

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

/// What a file type is, for messages.
pub fn describe_type(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_file() {
        "a regular file"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_symlink() {
        "a symbolic link"
    } else {
        "not a file"
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

/// Opens and reads the regular file at `path` (symlinks followed) under the
/// cap, without ever blocking on what is not one: the open does not wait
/// for a FIFO's writer (`O_NONBLOCK`), and the type is checked on the
/// opened descriptor, so the file checked is the file read. A FIFO, a
/// socket, a device or a directory is an [`CappedError::Io`] error of kind
/// `InvalidInput` saying what it is, which callers report as the error of
/// the file's kind. For the deployment's files ([§9.1](docs/configuration.md#s9-1) Files): the
/// license, issuer keys and packs.
pub fn read_regular_file_capped(path: &Path, cap: u64) -> Result<Vec<u8>, CappedError> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(CappedError::Io)?;
    let meta = file.metadata().map_err(CappedError::Io)?;
    if !meta.is_file() {
        return Err(CappedError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("not a regular file ({})", describe_type(meta.file_type())),
        )));
    }
    if meta.len() > cap {
        return Err(CappedError::TooLarge);
    }
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

    /// [§9.1](docs/configuration.md#s9-1) Files: a FIFO is refused at once (no writer ever comes),
    /// as is a directory or a device; a symlink to a regular file is read.
    #[test]
    fn only_regular_files_are_read_and_a_fifo_never_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("license.hxlic");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let started = std::time::Instant::now();
        let e = read_regular_file_capped(&fifo, 64).unwrap_err();
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        assert_eq!(e.to_string(), "not a regular file (a FIFO)");
        let e = read_regular_file_capped(dir.path(), 64).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file (a directory)");
        let e = read_regular_file_capped(Path::new("/dev/zero"), 64).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file (a character device)");
        let file = dir.path().join("real");
        std::fs::write(&file, b"abc").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_regular_file_capped(&link, 64).unwrap(), b"abc");
        assert!(matches!(
            read_regular_file_capped(&link, 2),
            Err(CappedError::TooLarge)
        ));
        let to_fifo = dir.path().join("to-fifo");
        std::os::unix::fs::symlink(&fifo, &to_fifo).unwrap();
        let e = read_regular_file_capped(&to_fifo, 64).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file (a FIFO)");
    }

    #[test]
    fn exhaustion_is_told_apart_from_a_bad_file() {
        assert!(is_exhaustion(&std::io::Error::from_raw_os_error(24)));
        assert!(is_exhaustion(&std::io::Error::from_raw_os_error(23)));
        assert!(!is_exhaustion(&std::io::Error::from_raw_os_error(2)));
        assert!(!is_exhaustion(&std::io::Error::from_raw_os_error(13)));
    }
}
