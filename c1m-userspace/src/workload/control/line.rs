//! Framing of control lines, pure (no sockets): a bounded buffer that yields whole lines,
//! refuses a line longer than [`MAX_LINE`] bytes without ever holding more than
//! `MAX_LINE + 1`, and never yields a partial line (one cut by EOF is dropped by the
//! caller simply by not asking again).

/// Longest control line in bytes, without its newline. The longest real request is
/// `auth <64 hex digits>`; 4 KiB leaves room for hand-typed ones.
pub(crate) const MAX_LINE: usize = 4096;

/// The longest part of a request a reply quotes back (chars), so a reply never grows
/// with what the peer sent.
pub(crate) const ECHO_CHARS: usize = 32;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LineError {
    #[error("line longer than {MAX_LINE} bytes")]
    TooLong,
    #[error("line is not UTF-8")]
    NotUtf8,
}

/// Bytes received but not yet framed.
#[derive(Default)]
pub(crate) struct LineBuf {
    buf: Vec<u8>,
}

impl LineBuf {
    /// How many bytes the next read may add: the buffer never exceeds `MAX_LINE + 1`,
    /// enough to see the newline that ends a line of exactly `MAX_LINE` bytes.
    pub(crate) fn room(&self) -> usize {
        (MAX_LINE + 1).saturating_sub(self.buf.len())
    }

    pub(crate) fn extend(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next whole line (trimmed), `Ok(None)` if more bytes are needed, or an error:
    /// `TooLong` is final (the caller closes), `NotUtf8` consumes the bad line.
    pub(crate) fn next_line(&mut self) -> Result<Option<String>, LineError> {
        let Some(nl) = self.buf.iter().position(|&b| b == b'\n') else {
            return if self.buf.len() > MAX_LINE {
                Err(LineError::TooLong)
            } else {
                Ok(None)
            };
        };
        if nl > MAX_LINE {
            return Err(LineError::TooLong);
        }
        let line: Vec<u8> = self.buf.drain(..=nl).collect();
        match std::str::from_utf8(&line[..nl]) {
            Ok(s) => Ok(Some(s.trim().to_owned())),
            Err(_) => Err(LineError::NotUtf8),
        }
    }
}

/// At most [`ECHO_CHARS`] of `s`, marked when cut, for quoting a request in a reply.
pub(crate) fn excerpt(s: &str) -> String {
    match s.char_indices().nth(ECHO_CHARS) {
        None => s.to_owned(),
        Some((i, _)) => format!("{}…", &s[..i]),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    fn feed(b: &mut LineBuf, data: &[u8]) -> Vec<Result<Option<String>, LineError>> {
        let mut out = Vec::new();
        let mut rest = data;
        loop {
            let n = b.room().min(rest.len());
            b.extend(&rest[..n]);
            rest = &rest[n..];
            loop {
                match b.next_line() {
                    Ok(None) => break,
                    Err(LineError::TooLong) => {
                        out.push(Err(LineError::TooLong));
                        return out;
                    }
                    r => out.push(r),
                }
            }
            if rest.is_empty() {
                return out;
            }
        }
    }

    #[test]
    fn whole_lines_in_any_chunking() {
        let mut b = LineBuf::default();
        assert_eq!(feed(&mut b, b"sta"), vec![]);
        assert_eq!(
            feed(&mut b, b"ts\r\npush 4\nsto"),
            vec![Ok(Some("stats".into())), Ok(Some("push 4".into()))]
        );
        // The partial `sto` stays unframed: a caller that sees EOF now drops it.
        assert_eq!(b.next_line(), Ok(None));
    }

    #[test]
    fn exactly_max_is_a_line_one_more_is_refused() {
        let mut ok = vec![b'a'; MAX_LINE];
        ok.push(b'\n');
        let mut b = LineBuf::default();
        assert_eq!(feed(&mut b, &ok), vec![Ok(Some("a".repeat(MAX_LINE)))]);
        let mut long = vec![b'a'; MAX_LINE + 1];
        long.push(b'\n');
        let mut b = LineBuf::default();
        assert_eq!(feed(&mut b, &long), vec![Err(LineError::TooLong)]);
    }

    #[test]
    fn a_huge_line_never_grows_the_buffer() {
        let mut b = LineBuf::default();
        let chunk = vec![b'x'; 64 * 1024];
        let r = feed(&mut b, &chunk);
        assert_eq!(r, vec![Err(LineError::TooLong)]);
        assert!(b.buf.len() <= MAX_LINE + 1);
    }

    #[test]
    fn bad_utf8_is_one_error_then_framing_goes_on() {
        let mut b = LineBuf::default();
        assert_eq!(
            feed(&mut b, b"\xff\xfe\nstats\n"),
            vec![Err(LineError::NotUtf8), Ok(Some("stats".into()))]
        );
    }

    #[test]
    fn excerpt_is_bounded() {
        assert_eq!(excerpt("stats"), "stats");
        let long = "é".repeat(1000);
        let e = excerpt(&long);
        assert_eq!(e.chars().count(), ECHO_CHARS + 1);
        assert!(e.ends_with('…'));
    }
}
