//! The one way the tool writes a file it produces (packs, licenses, keys,
//! manifests, reports, downloads): to a temporary file beside the target,
//! synced, then renamed into place, so that a reader never sees half a file
//! and a failed write leaves the old file as it was. It knows nothing of
//! what the bytes are and never logs them.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Who may read the file written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// As the process's umask allows (packs, public keys, reports).
    Shared,
    /// The owner only, mode 0600 from the moment it exists (licenses and
    /// secret keys hold key material).
    Private,
}

/// Writes `bytes` to `path` atomically, readable as the umask allows.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_as(path, bytes, Access::Shared)
}

/// Writes `bytes` to `path` atomically with `access`.
pub fn write_atomic_as(path: &Path, bytes: &[u8], access: Access) -> std::io::Result<()> {
    let tmp = stage(path, bytes, access)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Writes files that belong together (a pack and its signature): every
/// temporary file is written and synced before any is renamed into place,
/// in the order given, so a failure while writing leaves every target as
/// it was.
pub fn write_atomic_all(files: &[(&Path, &[u8])]) -> std::io::Result<()> {
    let mut staged: Vec<PathBuf> = Vec::with_capacity(files.len());
    let cleanup = |staged: &[PathBuf]| {
        for t in staged {
            let _ = std::fs::remove_file(t);
        }
    };
    for (path, bytes) in files {
        match stage(path, bytes, Access::Shared) {
            Ok(t) => staged.push(t),
            Err(e) => {
                cleanup(&staged);
                return Err(e);
            }
        }
    }
    for (k, (tmp, (path, _))) in staged.iter().zip(files).enumerate() {
        if let Err(e) = std::fs::rename(tmp, path) {
            cleanup(&staged[k..]);
            return Err(e);
        }
    }
    Ok(())
}

/// Writes `bytes` to a new temporary file beside `path`, synced; returns
/// its path (removed again on failure).
fn stage(path: &Path, bytes: &[u8], access: Access) -> std::io::Result<PathBuf> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let suffix = hex::encode(crate::crypto::random_bytes::<6>().map_err(std::io::Error::other)?);
    // A dot name: directory scans (the packs directory, the catalog's
    // playbooks) skip it while it is being written.
    let tmp = dir.join(format!(".{file_name}.{suffix}.tmp"));
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    if access == Access::Private {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let result = (|| {
        let mut f = opts.open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    match result {
        Ok(()) => Ok(tmp),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_replace_whole_files_and_leave_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic_as(&p, b"two", Access::Private).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&p).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
        assert!(write_atomic(&dir.path().join("no/such/dir/f"), b"x").is_err());
    }

    #[test]
    fn files_written_together_are_both_written_or_neither() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("p.hxpack"), dir.path().join("p.hxpack.sig"));
        write_atomic_all(&[(&a, b"pack"), (&b, b"sig")]).unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), b"pack");
        assert_eq!(std::fs::read(&b).unwrap(), b"sig");
        // The second cannot be staged: the first is not replaced either.
        let missing = dir.path().join("no/such/dir/x.sig");
        assert!(write_atomic_all(&[(&a, b"new"), (&missing, b"x")]).is_err());
        assert_eq!(std::fs::read(&a).unwrap(), b"pack");
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["p.hxpack", "p.hxpack.sig"]);
    }
}
