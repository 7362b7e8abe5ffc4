//! The control endpoint's commands as the supervisor answers them: `stats`, `push`,
//! `mark`, `close`, `stop`.

use super::{Side, Supervisor, side_name};
use crate::workload::{
    churn::ChurnRate,
    config::{Mode, ShardCommand},
    control::{self, Request},
};

impl Supervisor {
    pub(super) fn on_control(&mut self, req: Request) {
        let side = self.o.side;
        let answer = match (req.line.as_str(), side) {
            ("stats", _) => {
                serde_json::to_string(&self.snapshot()).unwrap_or_else(|e| err_json(&e.to_string()))
            }
            (line, Side::Server) if line == "push" || line.starts_with("push ") => {
                match parse_push(line, self.o.push_writers) {
                    Err(e) => err_json(&e),
                    Ok(_) if self.o.mode != Mode::Ws => err_json("push needs --mode ws"),
                    Ok(writers) => {
                        let (id, started) = self.push(writers);
                        serde_json::json!({"push_id": id, "started_unix_ns": started, "writers": writers})
                            .to_string()
                    }
                }
            }
            (line, Side::Client) if line.starts_with("mark ") => match parse_mark(line) {
                Ok((id, started_unix_ns)) => {
                    self.broadcast(ShardCommand::Mark {
                        id,
                        started_unix_ns,
                    });
                    serde_json::json!({"ok": "marked", "push_id": id}).to_string()
                }
                Err(e) => err_json(&e),
            },
            (line, Side::Client) if line.starts_with("churn ") => match parse_churn(line) {
                Err(e) => err_json(&e),
                Ok(_) if self.o.churn.is_none() => {
                    err_json("churn: this client was started without --churn")
                }
                Ok(Some(_)) if self.phase != "hold" => err_json(&format!(
                    "churn on: the client churns what it holds, and it is in its {} phase",
                    self.phase
                )),
                Ok(on) => {
                    self.churn(on.is_some(), on.flatten());
                    serde_json::json!({"ok": if on.is_some() { "churning" } else { "holding" }})
                        .to_string()
                }
            },
            ("close", Side::Client) => {
                self.close();
                serde_json::json!({"ok": "closing"}).to_string()
            }
            ("close", Side::Server) => {
                // Teardown by the server, for clients on other hosts: every shard
                // closes its connections and keeps reporting.
                self.phase = "closing";
                self.broadcast(ShardCommand::Close);
                serde_json::json!({"ok": "closing"}).to_string()
            }
            ("stop", _) => {
                if side == Side::Client {
                    self.close();
                }
                self.stop();
                serde_json::json!({"ok": "stopping"}).to_string()
            }
            (other, _) => err_json(&format!(
                "unknown command {:?}; {} side knows: stats, {}stop",
                control::line::excerpt(other),
                side_name(side),
                if side == Side::Server {
                    "push [WRITERS], close, time, "
                } else {
                    "close, time, mark ID UNIX_NS, churn on [RATE]|off, "
                }
            )),
        };
        let _ = req.reply.send(answer);
    }
}

/// `push` or `push WRITERS` (shards writing at once, 0 for all) on the control endpoint.
fn parse_push(line: &str, default: usize) -> Result<usize, String> {
    match line.split_whitespace().collect::<Vec<_>>()[..] {
        ["push"] => Ok(default),
        ["push", n] => n.parse().map_err(|_| {
            format!(
                "push {:?}: WRITERS is how many shards write at once (0 for all), e.g. `push 4`",
                control::line::excerpt(n)
            )
        }),
        _ => Err(format!(
            "{:?}: say `push` or `push WRITERS`",
            control::line::excerpt(line)
        )),
    }
}

/// `mark ID UNIX_NS`: frames without an id that arrive from now on belong to push ID,
/// whose trigger fired at UNIX_NS (0: no trigger).
fn parse_mark(line: &str) -> Result<(u64, u64), String> {
    match line.split_whitespace().collect::<Vec<_>>()[..] {
        ["mark", id, at] => match (id.parse(), at.parse()) {
            (Ok(id), Ok(at)) => Ok((id, at)),
            _ => {
                Err("mark ID UNIX_NS: two whole numbers, e.g. `mark 1 1796000000000000000`".into())
            }
        },
        _ => Err(format!(
            "{:?}: say `mark ID UNIX_NS`",
            control::line::excerpt(line)
        )),
    }
}

/// `churn on`, `churn on RATE` (connections a second over the client, e.g. `churn on
/// 5000/s`; without one, the configured `--churn`) or `churn off`: Some(rate) to churn,
/// None to stop.
#[allow(clippy::option_option)] // on with the configured rate, on at a rate, or off
fn parse_churn(line: &str) -> Result<Option<Option<ChurnRate>>, String> {
    match line.split_whitespace().collect::<Vec<_>>()[..] {
        ["churn", "on"] => Ok(Some(None)),
        ["churn", "on", rate] => crate::workload::churn::parse(rate).map(|r| Some(Some(r))),
        ["churn", "off"] => Ok(None),
        _ => Err(format!(
            "{:?}: say `churn on`, `churn on RATE` (e.g. churn on 5000/s) or `churn off`",
            control::line::excerpt(line)
        )),
    }
}

fn err_json(msg: &str) -> String {
    serde_json::json!({ "error": msg }).to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use super::*;

    #[test]
    fn push_command_takes_an_optional_writer_count() {
        assert_eq!(parse_push("push", 0), Ok(0));
        assert_eq!(parse_push("push", 3), Ok(3));
        assert_eq!(parse_push("push 4", 0), Ok(4));
        assert!(
            parse_push("push four", 0)
                .unwrap_err()
                .contains("e.g. `push 4`")
        );
        assert!(parse_push("push 1 2", 0).is_err());
    }

    #[test]
    fn churn_command_takes_an_optional_rate() {
        assert_eq!(parse_churn("churn on"), Ok(Some(None)));
        assert_eq!(
            parse_churn("churn on 5000/s"),
            Ok(Some(Some(ChurnRate(5000.0))))
        );
        assert_eq!(parse_churn("churn off"), Ok(None));
        assert!(
            parse_churn("churn on 0")
                .unwrap_err()
                .contains("more than 0")
        );
        assert!(
            parse_churn("churn sideways")
                .unwrap_err()
                .contains("churn on RATE")
        );
    }
}
