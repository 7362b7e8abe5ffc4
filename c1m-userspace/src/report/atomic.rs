//! All-or-nothing file writes: `name.tmp`, fsync, rename over `name`. A reader (or a
//! crash at any instant) sees the old complete file or the new complete file.

use std::{
    ffi::OsString,
    fs::File,
    io::{self, Write},
    path::{Path, PathBuf},
};

use thiserror::Error;

/// A write that did not happen, with the file it failed on (`name.tmp` or `name`).
#[derive(Debug, Error)]
#[error("{}: {error}", path.display())]
pub(crate) struct WriteError {
    pub path: PathBuf,
    pub error: io::Error,
}

fn at(path: &Path) -> impl FnOnce(io::Error) -> WriteError + '_ {
    move |error| WriteError {
        path: path.to_owned(),
        error,
    }
}

pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    let mut tmp_name = path.file_name().map(OsString::from).unwrap_or_default();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    let written = File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
        .map_err(at(&tmp));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, path).map_err(at(path))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_tmp() {
        let dir = crate::report::fixture::test_dir("atomic");
        let p = dir.join("a.txt");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert!(!dir.join("a.txt.tmp").exists());
        // A folder that cannot be written: the error names the .tmp path, no panic.
        let err = write_atomic(&dir.join("missing/b.txt"), b"x").unwrap_err();
        assert!(err.to_string().contains("b.txt.tmp"), "{err}");
    }
}
