//! c1m's own state between processes (port locks, lab journals, `--tune` restore
//! records): where it lives and which of it is trusted.
//!
//! Root acts on what these files say (writes sysctls back, kills processes), so a file
//! counts only if nobody but the reader could have written it: the directory is the
//! reader's (owned by its euid, a real directory, not writable by group or others) and
//! so is each file (a regular file, opened without following a symlink). Before, the
//! records lived in world-writable /tmp and any local user could make root write a
//! chosen text to a chosen file (issue 30, case 1), or plant `/tmp/c1m-UID` with a
//! journal that had another user's process killed (case 2).

use std::{
    fs::File,
    io::Read,
    os::unix::fs::{DirBuilderExt, MetadataExt},
    path::{Path, PathBuf},
};

use rustix::fs::{Mode, OFlags};
use thiserror::Error;

/// Why a state directory or file is not used. No `source` field: each variant is one
/// line already, and anyhow's chain would say the cause twice.
#[derive(Debug, Error)]
pub(crate) enum StateError {
    #[error("{}: {cause}", path.display())]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error(
        "the state directory {} is not trusted: {why}; fix: rm -r {} (as its owner), then run again",
        path.display(),
        path.display()
    )]
    Untrusted { path: PathBuf, why: String },
    #[error("{} is not trusted: {why}", path.display())]
    UntrustedFile { path: PathBuf, why: String },
}

/// The effective uid: whose state this process may trust.
pub(crate) fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Where c1m keeps state that outlives one process but not a reboot: /run/c1m as root
/// (never anything a user's environment names: `sudo -E` keeps TMPDIR), else
/// $XDG_RUNTIME_DIR/c1m when that directory is the user's, else $TMPDIR/c1m-UID.
/// Created 0700 on first use; one that exists and is not the user's is refused.
pub(crate) fn runtime_dir() -> Result<PathBuf, StateError> {
    let uid = euid();
    if uid == 0 {
        return private_dir(Path::new("/run/c1m"));
    }
    // A $XDG_RUNTIME_DIR inherited from another user (`su`) is theirs: not ours to use.
    let xdg = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute() && untrusted_dir(d).is_none());
    let mut last = None;
    for dir in [
        xdg.map(|d| d.join("c1m")),
        Some(std::env::temp_dir().join(format!("c1m-{uid}"))),
    ]
    .into_iter()
    .flatten()
    {
        match private_dir(&dir) {
            Ok(d) => return Ok(d),
            // Cannot be made there (no such parent, not writable): the next one.
            Err(e @ StateError::Io { .. }) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| StateError::Io {
        path: std::env::temp_dir(),
        cause: std::io::Error::other("no runtime directory"),
    }))
}

/// `path` as a directory of this user's only: made (mode 0700) if missing, refused
/// (one line naming the owner found and the fix) if it is not the user's.
pub(crate) fn private_dir(path: &Path) -> Result<PathBuf, StateError> {
    match std::fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(cause) => {
            return Err(StateError::Io {
                path: path.to_owned(),
                cause,
            });
        }
    }
    match untrusted_dir(path) {
        None => Ok(path.to_owned()),
        Some(why) => Err(StateError::Untrusted {
            path: path.to_owned(),
            why,
        }),
    }
}

/// Why the directory at `path` is not this user's alone (None when it is). By lstat:
/// a symlink is refused, never followed.
fn untrusted_dir(path: &Path) -> Option<String> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) => return Some(e.to_string()),
    };
    let kind = meta.file_type();
    let mut why = Vec::new();
    if kind.is_symlink() {
        why.push("a symbolic link".to_owned());
    } else if !kind.is_dir() {
        why.push("not a directory".to_owned());
    }
    why.extend(owner_and_mode(meta.uid(), meta.mode()));
    (!why.is_empty()).then(|| why.join(", "))
}

/// What is wrong with an owner and mode for this user's state (empty when nothing).
fn owner_and_mode(uid: u32, mode: u32) -> Vec<String> {
    let mut why = Vec::new();
    if uid != euid() {
        why.push(format!("owned by uid {uid}, not uid {}", euid()));
    }
    if mode & 0o022 != 0 {
        why.push(format!(
            "writable by group or others (mode {:04o})",
            mode & 0o7777
        ));
    }
    why
}

/// The bytes of the state file at `path` (at most `cap`): a regular file of this
/// user's, not writable by others, opened without following a symlink and without
/// blocking on a FIFO. Anything else is refused, never read.
pub(crate) fn read_private(path: &Path, cap: u64) -> Result<Vec<u8>, StateError> {
    let io = |cause: std::io::Error| StateError::Io {
        path: path.to_owned(),
        cause,
    };
    let refused = |why: String| StateError::UntrustedFile {
        path: path.to_owned(),
        why,
    };
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
    let fd = match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::LOOP) => return Err(refused("a symbolic link".to_owned())),
        Err(e) => return Err(io(e.into())),
    };
    let file = File::from(fd);
    let meta = file.metadata().map_err(io)?;
    let mut why = Vec::new();
    if !meta.file_type().is_file() {
        why.push("not a regular file".to_owned());
    }
    why.extend(owner_and_mode(meta.uid(), meta.mode()));
    if meta.len() > cap {
        why.push(format!(
            "{} bytes, more than a state file's {cap}",
            meta.len()
        ));
    }
    if !why.is_empty() {
        return Err(refused(why.join(", ")));
    }
    let mut bytes = Vec::new();
    file.take(cap).read_to_end(&mut bytes).map_err(io)?;
    Ok(bytes)
}

/// Writes a state file all or nothing (`name.tmp`, fsync, rename over `name`), mode
/// 0600 whatever the umask, so [`read_private`] reads it back.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    let mut tmp_name = path.file_name().map(|n| n.to_owned()).unwrap_or_default();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    let io = |p: &Path| {
        let p = p.to_owned();
        move |cause: std::io::Error| StateError::Io { path: p, cause }
    };
    let flags =
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let written = rustix::fs::open(&tmp, flags, Mode::from_raw_mode(0o600))
        .map_err(std::io::Error::from)
        .and_then(|fd| {
            // The mode of a file left by an older version (created under the umask).
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o600))?;
            let mut f = File::from(fd);
            std::io::Write::write_all(&mut f, bytes)?;
            f.sync_all()
        })
        .map_err(io(&tmp));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, path).map_err(io(path))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use std::os::unix::fs::{PermissionsExt, symlink};

    use super::*;

    struct Dir(PathBuf);

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn scratch(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("c1m-state-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_state_dir_is_made_private_and_a_foreign_one_refused() {
        let d = scratch("dir");
        let mine = d.0.join("mine");
        assert_eq!(private_dir(&mine).unwrap(), mine);
        let mode = std::fs::metadata(&mine).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        // Made by an older c1m under umask 022: not writable by others, still fine.
        chmod(&mine, 0o755);
        assert!(private_dir(&mine).is_ok());

        let open = d.0.join("open");
        std::fs::create_dir(&open).unwrap();
        chmod(&open, 0o777);
        let err = private_dir(&open).unwrap_err().to_string();
        assert!(err.contains("mode 0777"), "{err}");
        assert!(err.contains(&format!("rm -r {}", open.display())), "{err}");

        let link = d.0.join("link");
        symlink(&mine, &link).unwrap();
        let err = private_dir(&link).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");

        if euid() == 0 {
            let theirs = d.0.join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), None).unwrap();
            let err = private_dir(&theirs).unwrap_err().to_string();
            assert!(err.contains("owned by uid 65534, not uid 0"), "{err}");
        }
    }

    #[test]
    fn only_own_regular_files_are_read() {
        let d = scratch("files");
        let ok = d.0.join("ok.json");
        std::fs::write(&ok, b"[]").unwrap();
        chmod(&ok, 0o666);
        // Written as state: 0600 whatever the file was.
        write_private(&ok, b"{}").unwrap();
        assert_eq!(std::fs::metadata(&ok).unwrap().mode() & 0o777, 0o600);
        assert_eq!(read_private(&ok, 1024).unwrap(), b"{}");

        let loose = d.0.join("loose.json");
        std::fs::write(&loose, b"{}").unwrap();
        chmod(&loose, 0o666);
        let err = read_private(&loose, 1024).unwrap_err().to_string();
        assert!(err.contains("mode 0666"), "{err}");

        let link = d.0.join("link.json");
        symlink(&ok, &link).unwrap();
        let err = read_private(&link, 1024).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");

        // A FIFO is refused at once, not waited on.
        let fifo = d.0.join("fifo.json");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let err = read_private(&fifo, 1024).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");

        let big = d.0.join("big.json");
        std::fs::write(&big, vec![b' '; 2048]).unwrap();
        chmod(&big, 0o600);
        assert!(read_private(&big, 1024).is_err());

        if euid() == 0 {
            std::os::unix::fs::chown(&ok, Some(65534), None).unwrap();
            let err = read_private(&ok, 1024).unwrap_err().to_string();
            assert!(err.contains("owned by uid 65534"), "{err}");
        }
    }
}
