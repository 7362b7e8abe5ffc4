//! The control endpoint's unix socket file: created 0600 with no moment at a wider mode,
//! never taking the path from a live endpoint, removed when the endpoint goes away.

use std::{
    io,
    os::unix::{
        ffi::OsStrExt,
        fs::{FileTypeExt, MetadataExt, PermissionsExt},
        net::{UnixListener, UnixStream},
    },
    path::{Path, PathBuf},
};

use rustix::net::{self as rnet, AddressFamily, SocketAddrUnix, SocketFlags, SocketType};

#[derive(Debug, thiserror::Error)]
pub(crate) enum SocketError {
    #[error(
        "control endpoint {0} is in use by a running process: stop that process, or give --control another path"
    )]
    Live(PathBuf),
    #[error(
        "control endpoint {0} exists and is not a socket: remove it, or give --control another path"
    )]
    NotSocket(PathBuf),
    #[error("control endpoint {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("control endpoint path {0} is longer than a unix socket address allows")]
    TooLong(PathBuf),
}

/// A bound control socket file; dropping it removes the file if it is still ours.
pub(crate) struct SocketFile {
    path: PathBuf,
    /// (device, inode) of the file we bound, so we never remove a successor's.
    id: (u64, u64),
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.id) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Makes `path` free for a new socket: nothing there, or a stale socket (connect
/// refused: its process is gone), which is removed. A live one is refused.
fn clear(path: &Path) -> Result<(), SocketError> {
    let m = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(SocketError::Io {
                path: path.to_owned(),
                source,
            });
        }
    };
    if !m.file_type().is_socket() {
        return Err(SocketError::NotSocket(path.to_owned()));
    }
    match UnixStream::connect(path) {
        Ok(_) => Err(SocketError::Live(path.to_owned())),
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::CONNREFUSED.raw_os_error()) => {
            std::fs::remove_file(path).map_err(|source| SocketError::Io {
                path: path.to_owned(),
                source,
            })
        }
        // Anything else (EACCES, EAGAIN: a full backlog) may be a live endpoint: keep it.
        Err(_) => Err(SocketError::Live(path.to_owned())),
    }
}

/// Binds and listens on a unix socket at `path`, mode 0600 whatever the umask.
pub(crate) fn bind_private(path: &Path) -> Result<(UnixListener, SocketFile), SocketError> {
    let io_err = |source| SocketError::Io {
        path: path.to_owned(),
        source,
    };
    clear(path)?;
    let bytes = path.as_os_str().as_bytes();
    // sun_path holds 108 bytes, its terminating NUL included.
    if bytes.len() >= 108 || bytes.contains(&0) {
        return Err(SocketError::TooLong(path.to_owned()));
    }
    let addr = SocketAddrUnix::new(path).map_err(|_| SocketError::TooLong(path.to_owned()))?;
    let fd = rnet::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )
    .map_err(|e| io_err(e.into()))?;
    // unix_bind() creates the file with the socket inode's mode minus the umask
    // (net/unix/af_unix.c: `SOCK_INODE(sock)->i_mode & ~current_umask()`), so narrowing
    // the inode first means the file is born 0600 (or narrower) — no chmod window.
    rustix::fs::fchmod(&fd, rustix::fs::Mode::from_raw_mode(0o600))
        .map_err(|e| io_err(e.into()))?;
    match rnet::bind(&fd, &addr) {
        Ok(()) => {}
        // Someone bound it since we looked.
        Err(rustix::io::Errno::ADDRINUSE) => return Err(SocketError::Live(path.to_owned())),
        Err(e) => return Err(io_err(e.into())),
    }
    let m = std::fs::symlink_metadata(path).map_err(io_err)?;
    let file = SocketFile {
        path: path.to_owned(),
        id: (m.dev(), m.ino()),
    };
    // A umask that took the owner's bits would leave a socket even we cannot connect to.
    if m.permissions().mode() & 0o777 != 0o600 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io_err)?;
    }
    rnet::listen(&fd, super::BACKLOG as i32).map_err(|e| io_err(e.into()))?;
    Ok((UnixListener::from(fd), file))
}
