//! The per-run token that guards a control endpoint reachable from other hosts or
//! namespaces, where no peer uid can be known: 32 bytes from getrandom(2), hex, in a file
//! only the owner can read. Every connection's first line must be `auth <token>`.

use std::{
    fs::{self, OpenOptions},
    io::{self, Write},
    os::unix::fs::{OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
};

const TOKEN_BYTES: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("getrandom: {0}")]
    Random(io::Error),
    #[error("control token file {path}: {source}")]
    File { path: PathBuf, source: io::Error },
    #[error("control token file {0} holds no token")]
    Empty(PathBuf),
}

#[derive(Clone)]
pub struct Token(String);

impl Token {
    /// A fresh token from the kernel's CSPRNG (never a time-based fallback).
    pub fn generate() -> Result<Token, TokenError> {
        let mut b = [0u8; TOKEN_BYTES];
        let mut got = 0;
        while got < b.len() {
            // SAFETY: the pointer and length describe the unfilled tail of b.
            let n = unsafe { libc::getrandom(b[got..].as_mut_ptr().cast(), b.len() - got, 0) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(TokenError::Random(e));
                }
                continue;
            }
            got += n as usize;
        }
        Ok(Token(b.iter().map(|x| format!("{x:02x}")).collect()))
    }

    /// Writes the token to `path`, readable and writable by the owner only. An old file
    /// there is replaced; the new one is created exclusively (no symlink followed) at
    /// 0600, so it is never readable by others, whatever the umask.
    pub fn write(&self, path: &Path) -> Result<(), TokenError> {
        let err = |source| TokenError::File {
            path: path.to_owned(),
            source,
        };
        match fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(err(e)),
        }
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(err)?;
        // The umask can only have narrowed 0600; make it exactly 0600 so the owner can read.
        f.set_permissions(fs::Permissions::from_mode(0o600))
            .map_err(err)?;
        writeln!(f, "{}", self.0).map_err(err)
    }

    pub fn read(path: &Path) -> Result<Token, TokenError> {
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

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `line` is `auth <this token>`; compares in time independent of where
    /// the first difference is.
    pub fn admits(&self, line: &str) -> bool {
        let Some(given) = line.strip_prefix("auth ") else {
            return false;
        };
        let (a, b) = (given.trim().as_bytes(), self.0.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
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
    fn file_is_owner_only_and_reads_back() {
        let dir = std::env::temp_dir().join(format!("c1m-token-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t");
        fs::write(&p, "old").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        let t = Token::generate().unwrap();
        t.write(&p).unwrap();
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(Token::read(&p).unwrap().as_str(), t.as_str());
        fs::remove_dir_all(&dir).unwrap();
    }
}
