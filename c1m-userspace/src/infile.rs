//! Opening a file c1m reads back (a run folder's `summary.json`, its `.hlog` files):
//! only a regular file, never more than a cap. A FIFO or `/dev/zero` in a crafted folder
//! once made `report`, `compare` and `merge` hang forever or grow without bound (2.4 GB
//! in 4 s).
//!
//! The open is `O_NOFOLLOW | O_NONBLOCK`, so opening a FIFO with no writer returns at once
//! (and is then refused by its type) instead of blocking; the type and size come from
//! `fstat` on the open file, so what is checked is what is read.

use std::{
    fs::{File, OpenOptions},
    io::{self, Read},
    os::unix::fs::{FileTypeExt, OpenOptionsExt},
    path::{Path, PathBuf},
};

use thiserror::Error;

/// Why an input file is not read. Each message is one line naming the file, the cause and
/// what to pass instead.
#[derive(Debug, Error)]
pub enum InFileError {
    #[error("{}: not found", path.display())]
    Missing { path: PathBuf },
    #[error("{}: is {what}, not a regular file: pass the file c1m wrote", path.display())]
    NotRegular { path: PathBuf, what: &'static str },
    #[error(
        "{}: larger than {}, the most c1m reads of this file: not one c1m wrote; pass the run folder's own",
        path.display(),
        mib(*cap)
    )]
    TooBig { path: PathBuf, cap: u64 },
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
}

impl InFileError {
    /// The file is not there (callers say what folder to pass instead).
    pub(crate) fn is_missing(&self) -> bool {
        matches!(self, InFileError::Missing { .. })
    }
}

fn mib(bytes: u64) -> String {
    const MIB: u64 = 1 << 20;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// An input file, open and checked: a regular file of at most `cap` bytes when opened.
/// Reading it stops with [`InFileError::TooBig`] past `cap` bytes, so a file that grows
/// while it is read is refused rather than read without end.
#[derive(Debug)]
pub(crate) struct Capped {
    path: PathBuf,
    file: io::Take<File>,
    cap: u64,
    read: u64,
}

impl Capped {
    /// Opens `path` for reading if it is a regular file (not a symbolic link, FIFO, device,
    /// socket or folder) of at most `cap` bytes.
    pub(crate) fn open(path: &Path, cap: u64) -> Result<Capped, InFileError> {
        let io_err = |source: io::Error| InFileError::Io {
            path: path.to_owned(),
            source,
        };
        let file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(InFileError::Missing {
                    path: path.to_owned(),
                });
            }
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(InFileError::NotRegular {
                    path: path.to_owned(),
                    what: "a symbolic link",
                });
            }
            Err(e) => return Err(io_err(e)),
        };
        let meta = file.metadata().map_err(io_err)?;
        if let Some(what) = not_regular(meta.file_type()) {
            return Err(InFileError::NotRegular {
                path: path.to_owned(),
                what,
            });
        }
        if meta.len() > cap {
            return Err(InFileError::TooBig {
                path: path.to_owned(),
                cap,
            });
        }
        Ok(Capped {
            path: path.to_owned(),
            file: Read::take(file, cap.saturating_add(1)),
            cap,
            read: 0,
        })
    }

    /// The open file's metadata (`fstat`): what is checked is what is read.
    pub(crate) fn metadata(&self) -> io::Result<std::fs::Metadata> {
        self.file.get_ref().metadata()
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The whole file.
    pub(crate) fn read_all(mut self) -> Result<Vec<u8>, InFileError> {
        let mut bytes = Vec::new();
        match Read::read_to_end(&mut self, &mut bytes) {
            Ok(_) => Ok(bytes),
            Err(_) if self.read > self.cap => Err(self.too_big()),
            Err(source) => Err(InFileError::Io {
                path: self.path,
                source,
            }),
        }
    }

    fn too_big(&self) -> InFileError {
        InFileError::TooBig {
            path: self.path.clone(),
            cap: self.cap,
        }
    }
}

impl Read for Capped {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read(buf)?;
        self.read += n as u64;
        if self.read > self.cap {
            return Err(io::Error::other(self.too_big()));
        }
        Ok(n)
    }
}

/// What a file that is not a regular one is, for the error.
fn not_regular(kind: std::fs::FileType) -> Option<&'static str> {
    if kind.is_file() {
        None
    } else if kind.is_dir() {
        Some("a folder")
    } else if kind.is_fifo() {
        Some("a FIFO")
    } else if kind.is_char_device() {
        Some("a character device")
    } else if kind.is_block_device() {
        Some("a block device")
    } else if kind.is_socket() {
        Some("a socket")
    } else {
        Some("not a plain file")
    }
}

/// [`Capped::open`] then [`Capped::read_all`].
pub(crate) fn read(path: &Path, cap: u64) -> Result<Vec<u8>, InFileError> {
    Capped::open(path, cap)?.read_all()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("c1m-infile-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn only_regular_files_within_the_cap() {
        let d = dir("kinds");
        let file = d.join("a.json");
        std::fs::write(&file, b"0123456789").unwrap();
        assert_eq!(read(&file, 10).unwrap(), b"0123456789");
        let e = read(&file, 9).unwrap_err().to_string();
        assert!(
            e.contains("a.json: larger than 9 bytes, the most c1m reads"),
            "{e}"
        );
        let e = read(&d.join("none"), 10).unwrap_err();
        assert!(e.is_missing(), "{e}");
        let e = read(&d, 10).unwrap_err().to_string();
        assert!(e.ends_with("is a folder, not a regular file: pass the file c1m wrote"));
        let e = read(Path::new("/dev/zero"), 10).unwrap_err().to_string();
        assert!(e.contains("is a character device"), "{e}");
        let link = d.join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let e = read(&link, 10).unwrap_err().to_string();
        assert!(e.contains("is a symbolic link"), "{e}");
        // A FIFO with no writer: the open returns at once and the FIFO is refused.
        let fifo = d.join("fifo");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        let e = read(&fifo, 10).unwrap_err().to_string();
        assert!(e.contains("is a FIFO, not a regular file"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
