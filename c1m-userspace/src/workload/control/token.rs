//! The per-run token that guards a control endpoint reachable from other hosts or
//! namespaces, where no peer uid can be known: 32 bytes from getrandom(2), hex, in a file
//! only the owner can read. Every connection's first line must be `auth <token>`.
//!
//! The file at `--control-token-file` is claimed, never taken over: a path that does not
//! exist gets a fresh token (and is removed at exit); a token file of this user's that no
//! one else can read is used as it is (and left at exit: two servers may share one);
//! anything else is refused. Before, the path was replaced whatever it was (a file owned
//! by `nobody` became root's token) and removed at exit, so two servers sharing a path
//! overwrote and deleted each other's token.

use std::{
    fs::{self, OpenOptions},
    io::{self, Read, Write},
    os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
};

const TOKEN_BYTES: usize = 32;

/// What a token read from a file may look like: one word of printable ASCII, long enough
/// to be a secret (ours are 64 hex digits).
const TOKEN_LEN: std::ops::RangeInclusive<usize> = 32..=1024;

#[derive(Debug, thiserror::Error)]
pub(crate) enum TokenError {
    #[error("getrandom: {0}")]
    Random(io::Error),
    #[error("control token file {path}: {source}")]
    File { path: PathBuf, source: io::Error },
    #[error("control token file {0} holds no token")]
    Empty(PathBuf),
    #[error(
        "control token file {path} exists and {why}: c1m neither replaces nor removes a file it did not make; pass a path that does not exist (or a token file of yours, mode 0600)"
    )]
    NotOurs { path: PathBuf, why: String },
}

#[derive(Clone)]
pub(crate) struct Token(String);

impl Token {
    /// A fresh token from the kernel's CSPRNG (never a time-based fallback).
    pub(crate) fn generate() -> Result<Token, TokenError> {
        let mut b = [0u8; TOKEN_BYTES];
        let mut got = 0;
        while got < b.len() {
            match rustix::rand::getrandom(&mut b[got..], rustix::rand::GetRandomFlags::empty()) {
                Ok(n) => got += n,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(TokenError::Random(e.into())),
            }
        }
        Ok(Token(b.iter().map(|x| format!("{x:02x}")).collect()))
    }

    pub(crate) fn read(path: &Path) -> Result<Token, TokenError> {
        let s = fs::read_to_string(path).map_err(|source| TokenError::File {
            path: path.to_owned(),
            source,
        })?;
        let t = s.trim();
        if t.is_empty() {
            return Err(TokenError::Empty(path.to_owned()));
        }
        Ok(Token(t.to_owned()))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `line` is `auth <this token>`; compares in time independent of where
    /// the first difference is.
    pub(crate) fn admits(&self, line: &str) -> bool {
        let Some(given) = line.strip_prefix("auth ") else {
            return false;
        };
        let (a, b) = (given.trim().as_bytes(), self.0.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

/// The token file a server serves with: made by this process, or found.
pub(crate) struct TokenFile {
    path: PathBuf,
    token: Token,
    /// (device, inode) of the file this process made; None: found, not ours to remove.
    made: Option<(u64, u64)>,
}

impl TokenFile {
    /// Claims `path`: a fresh token there if nothing is, or the token of a file of this
    /// user's that only its owner can read; anything else is refused, untouched.
    pub(crate) fn claim(path: &Path) -> Result<TokenFile, TokenError> {
        let err = |source| TokenError::File {
            path: path.to_owned(),
            source,
        };
        let token = Token::generate()?;
        // Written whole to a private file, then linked into place: link(2) fails on a
        // path that exists, and a reader never sees a half-written token.
        let mut tmp_name = path
            .file_name()
            .map(|n| n.to_os_string())
            .unwrap_or_default();
        tmp_name.push(format!(".{}.tmp", std::process::id()));
        let tmp = path.with_file_name(tmp_name);
        let _ = fs::remove_file(&tmp);
        let written = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
            .and_then(|mut f| {
                // The umask can only have narrowed 0600; exactly 0600, so the owner reads it.
                f.set_permissions(fs::Permissions::from_mode(0o600))?;
                writeln!(f, "{}", token.0)?;
                f.sync_all()?;
                fs::hard_link(&tmp, path)?;
                f.metadata()
            });
        let _ = fs::remove_file(&tmp);
        match written {
            Ok(meta) => Ok(TokenFile {
                path: path.to_owned(),
                token,
                made: Some((meta.dev(), meta.ino())),
            }),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(TokenFile {
                path: path.to_owned(),
                token: found(path)?,
                made: None,
            }),
            Err(e) => Err(err(e)),
        }
    }

    pub(crate) fn token(&self) -> &Token {
        &self.token
    }

    /// Whether this process made the file (and so removes it).
    pub(crate) fn made(&self) -> bool {
        self.made.is_some()
    }

    /// Removes the file if this process made it and it is still that file.
    pub(crate) fn remove(&self) {
        let Some(made) = self.made else { return };
        let same = fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == made);
        if same {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// The token in a file someone else made, if it is one this user may serve with.
fn found(path: &Path) -> Result<Token, TokenError> {
    let refuse = |why: String| TokenError::NotOurs {
        path: path.to_owned(),
        why,
    };
    let mut f = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(refuse("is a symbolic link".into()));
        }
        Err(source) => {
            return Err(TokenError::File {
                path: path.to_owned(),
                source,
            });
        }
    };
    let meta = f.metadata().map_err(|source| TokenError::File {
        path: path.to_owned(),
        source,
    })?;
    if !meta.is_file() {
        return Err(refuse("is not a regular file".into()));
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(refuse(format!("belongs to uid {}, not {me}", meta.uid())));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(refuse(format!(
            "is readable by others (mode {:04o})",
            meta.mode() & 0o7777
        )));
    }
    let mut text = String::new();
    let read = Read::take(&mut f, *TOKEN_LEN.end() as u64 + 2).read_to_string(&mut text);
    let word = text.trim();
    let is_token = read.is_ok()
        && TOKEN_LEN.contains(&word.len())
        && word.bytes().all(|b| b.is_ascii_graphic());
    if !is_token {
        return Err(refuse(format!(
            "holds no token (one word of {} to {} printable characters)",
            TOKEN_LEN.start(),
            TOKEN_LEN.end()
        )));
    }
    Ok(Token(word.to_owned()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn fresh_tokens_differ_and_admit_only_themselves() {
        let (a, b) = (Token::generate().unwrap(), Token::generate().unwrap());
        assert_eq!(a.as_str().len(), 2 * TOKEN_BYTES);
        assert_ne!(a.as_str(), b.as_str());
        assert!(a.admits(&format!("auth {}", a.as_str())));
        assert!(!a.admits(&format!("auth {}", b.as_str())));
        assert!(!a.admits(a.as_str()));
        assert!(!a.admits("auth "));
    }

    #[test]
    fn a_made_file_is_owner_only_and_a_found_one_is_read_and_left() {
        let dir = std::env::temp_dir().join(format!("c1m-token-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t");
        let _ = fs::remove_file(&p);
        let made = TokenFile::claim(&p).unwrap();
        assert!(made.made());
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(Token::read(&p).unwrap().as_str(), made.token().as_str());
        // A second claimer shares it and leaves it; the maker removes it.
        let found = TokenFile::claim(&p).unwrap();
        assert!(!found.made());
        assert_eq!(found.token().as_str(), made.token().as_str());
        found.remove();
        assert!(p.exists());
        made.remove();
        assert!(!p.exists());
        // Not a token, or readable by others: refused and untouched.
        for (text, mode, says) in [
            ("old", 0o600, "holds no token"),
            (&"x".repeat(64)[..], 0o644, "readable by others (mode 0644)"),
        ] {
            fs::write(&p, text).unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
            let e = TokenFile::claim(&p).err().unwrap().to_string();
            assert!(e.contains(says) && !e.contains('\n'), "{e}");
            assert_eq!(fs::read_to_string(&p).unwrap(), text);
        }
        fs::remove_dir_all(&dir).unwrap();
    }
}
