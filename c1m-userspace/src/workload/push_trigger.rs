//! What makes a server push: c1m's control endpoint, a signal to the server's process,
//! an HTTP request, a command, or nothing (the server pushes on its own schedule).

use std::{fmt, str::FromStr, time::Duration};

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `--push-trigger`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PushTrigger {
    /// `push` on c1m's own server's control endpoint.
    Control,
    /// A signal to the server's pid (`signal:USR1`, `signal:HUP`, …).
    Signal(Signal),
    /// An HTTP/1.1 request to this URL: `http:http://127.0.0.1:9001/push` GETs it,
    /// `http-post:…` POSTs an empty body.
    Http(HttpMethod, String),
    /// A command, split into words as the shell would, run without one.
    Cmd(String),
    /// Nothing: the server pushes on its own schedule; c1m measures what arrives.
    None,
}

/// The method of an `http` trigger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpMethod {
    Get,
    Post,
}

impl HttpMethod {
    fn as_str(self) -> &'static str {
        match self {
            HttpMethod::Get => "GET",
            HttpMethod::Post => "POST",
        }
    }

    /// The `--push-trigger` prefix that names it.
    fn prefix(self) -> &'static str {
        match self {
            HttpMethod::Get => "http",
            HttpMethod::Post => "http-post",
        }
    }
}

/// A signal by name and number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signal {
    pub name: &'static str,
    pub number: rustix::process::Signal,
}

const SIGNALS: [(&str, rustix::process::Signal); 10] = {
    use rustix::process::Signal as S;
    [
        ("USR1", S::USR1),
        ("USR2", S::USR2),
        ("HUP", S::HUP),
        ("INT", S::INT),
        ("QUIT", S::QUIT),
        ("TERM", S::TERM),
        ("ALRM", S::ALARM),
        ("CONT", S::CONT),
        ("WINCH", S::WINCH),
        ("PWR", S::POWER),
    ]
};

const TRIGGERS: &str =
    "control, signal:NAME (e.g. signal:USR1), http:URL (GET), http-post:URL, cmd:COMMAND, none";

impl FromStr for Signal {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bare = s.trim().to_ascii_uppercase();
        let bare = bare.strip_prefix("SIG").unwrap_or(&bare);
        SIGNALS
            .iter()
            .find(|(n, _)| *n == bare)
            .map(|&(name, number)| Signal { name, number })
            .ok_or_else(|| {
                let names: Vec<&str> = SIGNALS.iter().map(|(n, _)| *n).collect();
                format!("unknown signal {s:?}; one of: {}", names.join(", "))
            })
    }
}

impl FromStr for PushTrigger {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "control" => return Ok(PushTrigger::Control),
            "none" => return Ok(PushTrigger::None),
            _ => {}
        }
        let Some((kind, rest)) = s.split_once(':') else {
            return Err(format!("unknown push trigger {s:?}; one of: {TRIGGERS}"));
        };
        match kind {
            "signal" => rest.parse().map(PushTrigger::Signal),
            "http" | "http-post" if rest.starts_with("http://") => {
                let method = if kind == "http" {
                    HttpMethod::Get
                } else {
                    HttpMethod::Post
                };
                Ok(PushTrigger::Http(method, rest.to_owned()))
            }
            "http" | "http-post" => Err(format!(
                "push trigger {s:?}: only plain http://HOST:PORT/PATH URLs are supported"
            )),
            "cmd" if split_words(rest).is_some() => Ok(PushTrigger::Cmd(rest.to_owned())),
            "cmd" => Err(format!(
                "push trigger {s:?}: the command is empty or badly quoted"
            )),
            _ => Err(format!("unknown push trigger {s:?}; one of: {TRIGGERS}")),
        }
    }
}

impl fmt::Display for PushTrigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushTrigger::Control => f.write_str("control"),
            PushTrigger::Signal(s) => write!(f, "signal:{}", s.name),
            PushTrigger::Http(m, u) => write!(f, "{}:{u}", m.prefix()),
            PushTrigger::Cmd(c) => write!(f, "cmd:{c}"),
            PushTrigger::None => f.write_str("none"),
        }
    }
}

/// A clap value parser: one line naming the triggers.
pub(crate) fn parse(s: &str) -> Result<PushTrigger, String> {
    s.parse()
}

/// A command line split into words as a shell would split it, with no shell run; None
/// when it is empty or badly quoted.
pub(crate) fn split_words(cmd: &str) -> Option<Vec<String>> {
    shlex::split(cmd).filter(|argv| !argv.is_empty())
}

/// How long an HTTP or command trigger may take.
const TRIGGER_TIMEOUT: Duration = Duration::from_secs(10);

impl PushTrigger {
    /// Fires a trigger other than `control` (the lab drives that one itself) at the
    /// server `pid` (needed for a signal).
    pub(crate) async fn fire(&self, pid: Option<u32>) -> Result<()> {
        match self {
            PushTrigger::Control | PushTrigger::None => Ok(()),
            PushTrigger::Signal(sig) => {
                let pid = pid.context("a signal trigger needs the server's pid")?;
                // A pid the lab started or was given; 0 (our own process group) is not one.
                let target = rustix::process::Pid::from_raw(pid as i32)
                    .with_context(|| format!("no server pid to signal ({pid})"))?;
                rustix::process::kill_process(target, sig.number).map_err(|e| {
                    anyhow::anyhow!(
                        "sending SIG{} to the server (pid {pid}): {}",
                        sig.name,
                        std::io::Error::from(e)
                    )
                })
            }
            PushTrigger::Http(method, url) => {
                tokio::time::timeout(TRIGGER_TIMEOUT, http_request(*method, url))
                    .await
                    .with_context(|| {
                        format!("{} {url} did not answer within 10 s", method.as_str())
                    })?
            }
            PushTrigger::Cmd(c) => {
                let argv = split_words(c)
                    .with_context(|| format!("the push command {c:?} is badly quoted"))?;
                let status = tokio::time::timeout(
                    TRIGGER_TIMEOUT,
                    tokio::process::Command::new(&argv[0])
                        .args(&argv[1..])
                        .stdin(std::process::Stdio::null())
                        .kill_on_drop(true)
                        .status(),
                )
                .await
                .with_context(|| format!("the push command {c:?} ran longer than 10 s"))?
                .with_context(|| format!("running the push command {c:?}"))?;
                if !status.success() {
                    bail!("the push command {c:?} failed ({status})");
                }
                Ok(())
            }
        }
    }
}

/// A plain HTTP/1.1 request with no body; any 2xx answer is success.
async fn http_request(method: HttpMethod, url: &str) -> Result<()> {
    let m = method.as_str();
    let rest = url.strip_prefix("http://").unwrap_or(url);
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let addr = if host.contains(':') {
        host.to_owned()
    } else {
        format!("{host}:80")
    };
    let mut s = tokio::net::TcpStream::connect(&addr)
        .await
        .with_context(|| format!("connecting to {addr} for {m} {url}"))?;
    let body = match method {
        HttpMethod::Get => "",
        HttpMethod::Post => "Content-Length: 0\r\n",
    };
    s.write_all(
        format!("{m} {path} HTTP/1.1\r\nHost: {host}\r\n{body}Connection: close\r\n\r\n")
            .as_bytes(),
    )
    .await?;
    let mut head = vec![0u8; 512];
    let n = s.read(&mut head).await?;
    let line = String::from_utf8_lossy(&head[..n]);
    let status = line.split_whitespace().nth(1).unwrap_or("");
    if !status.starts_with('2') {
        bail!(
            "{m} {url} answered {:?}",
            line.lines().next().unwrap_or("nothing")
        );
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn triggers_parse_and_print_back() {
        for s in [
            "control",
            "none",
            "signal:USR1",
            "signal:HUP",
            "http:http://127.0.0.1:9001/push",
            "http-post:http://127.0.0.1:9001/push",
            "cmd:kill -USR2 1",
        ] {
            assert_eq!(s.parse::<PushTrigger>().unwrap().to_string(), s);
        }
        assert_eq!(
            "signal:sigusr2".parse::<PushTrigger>().unwrap(),
            PushTrigger::Signal(Signal {
                name: "USR2",
                number: rustix::process::Signal::USR2
            })
        );
    }

    #[test]
    fn a_bad_trigger_is_one_line_naming_the_good_ones() {
        for bad in ["signal:FOO", "webhook", "http:ftp://x", "cmd:"] {
            let e = bad.parse::<PushTrigger>().unwrap_err();
            assert!(!e.contains('\n'), "{e}");
        }
        assert!(
            "webhook"
                .parse::<PushTrigger>()
                .unwrap_err()
                .contains("signal:NAME")
        );
    }

    /// A real HTTP peer on loopback: the trigger sends the method and path asked for,
    /// and a non-2xx answer is an error naming it.
    #[tokio::test]
    async fn http_triggers_send_their_method_and_judge_the_answer() {
        use tokio::net::TcpListener;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let mut seen = Vec::new();
            for status in ["200 OK", "204 No Content", "503 Busy"] {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 1024];
                let n = s.read(&mut buf).await.unwrap();
                let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                seen.push(head.lines().next().unwrap_or("").to_owned());
                s.write_all(format!("HTTP/1.1 {status}\r\n\r\n").as_bytes())
                    .await
                    .unwrap();
            }
            seen
        });
        let get: PushTrigger = format!("http:http://127.0.0.1:{port}/push")
            .parse()
            .unwrap();
        let post: PushTrigger = format!("http-post:http://127.0.0.1:{port}/go")
            .parse()
            .unwrap();
        get.fire(None).await.unwrap();
        post.fire(None).await.unwrap();
        let e = get.fire(None).await.unwrap_err().to_string();
        assert!(e.contains("GET") && e.contains("503"), "{e}");
        assert_eq!(
            server.await.unwrap(),
            [
                "GET /push HTTP/1.1",
                "POST /go HTTP/1.1",
                "GET /push HTTP/1.1"
            ]
        );
    }
}
