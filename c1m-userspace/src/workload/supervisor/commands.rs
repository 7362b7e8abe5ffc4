//! The control endpoint's commands as the supervisor answers them: `stats`, `push`,
//! `mark`, `churn`, `heartbeat`, `messages`, `close`, `stop`.

use super::{Side, Supervisor, side_name};
use crate::workload::{
    churn::ChurnRate,
    config::{Mode, ShardCommand},
    control::{self, Request},
    heartbeat::HeartbeatConfig,
    messages::{self, MessageConfig},
    sys,
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
            (line, Side::Client) if line.starts_with("heartbeat ") => match parse_heartbeat(line) {
                Err(e) => err_json(&e),
                Ok(_) if self.o.mode != Mode::Ws => err_json(&format!(
                    "heartbeat: pings are WebSocket frames and this client runs --mode {}: heartbeats need --mode ws",
                    self.o.mode.name()
                )),
                Ok(Some(_)) if self.phase != "hold" => err_json(&format!(
                    "heartbeat on: the client pings what it holds, and it is in its {} phase",
                    self.phase
                )),
                Ok(cfg) => {
                    let on = cfg.is_some();
                    self.broadcast(ShardCommand::Heartbeat {
                        cfg,
                        t0_mono_ns: sys::monotonic_ns(),
                    });
                    serde_json::json!({"ok": if on { "beating" } else { "quiet" }}).to_string()
                }
            },
            (line, Side::Client) if line.starts_with("messages ") => match parse_messages(line) {
                Err(e) => err_json(&e),
                Ok(_) if self.o.mode != Mode::Ws => err_json(&format!(
                    "messages: switched at run time in --mode ws only (this client runs --mode {}; a raw echo stream carries round trips or messages, chosen at start by --message-rate)",
                    self.o.mode.name()
                )),
                Ok(Some(_)) if self.phase != "hold" => err_json(&format!(
                    "messages on: the client sends on what it holds, and it is in its {} phase",
                    self.phase
                )),
                Ok(cfg) => {
                    let on = cfg.is_some();
                    self.broadcast(ShardCommand::Messages {
                        cfg,
                        t0_mono_ns: sys::monotonic_ns(),
                    });
                    serde_json::json!({"ok": if on { "sending" } else { "quiet" }}).to_string()
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
                    "close, time, mark ID UNIX_NS, churn on [RATE]|off, heartbeat on INTERVAL [TIMEOUT]|off, messages on RATE SIZE|off, "
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

/// `heartbeat on INTERVAL [TIMEOUT]` (a ping per connection every INTERVAL, spread over
/// it from now; unanswered TIMEOUT long, default the interval, closes it) or `heartbeat
/// off`: Some(config) to ping, None to stop.
fn parse_heartbeat(line: &str) -> Result<Option<HeartbeatConfig>, String> {
    let duration = |what: &str, v: &str| match crate::duration::parse(v) {
        Ok(d) if d.is_zero() => Err(format!(
            "heartbeat on: {what} 0 is no {what}: give more, e.g. `heartbeat on 30s`"
        )),
        Ok(d) => Ok(d),
        Err(e) => Err(format!("heartbeat on: {what}: {e}")),
    };
    let (interval, timeout) = match line.split_whitespace().collect::<Vec<_>>()[..] {
        ["heartbeat", "off"] => return Ok(None),
        ["heartbeat", "on", i] => (duration("INTERVAL", i)?, None),
        ["heartbeat", "on", i, t] => (duration("INTERVAL", i)?, Some(duration("TIMEOUT", t)?)),
        _ => {
            return Err(format!(
                "{:?}: say `heartbeat on INTERVAL [TIMEOUT]` (e.g. heartbeat on 30s 45s) or `heartbeat off`",
                control::line::excerpt(line)
            ));
        }
    };
    Ok(HeartbeatConfig::of(Some(interval), timeout))
}

/// `messages on RATE SIZE` (per connection, e.g. `messages on 10/s 64`, spread over the
/// interval from now) or `messages off`: Some(config) to send, None to stop.
fn parse_messages(line: &str) -> Result<Option<MessageConfig>, String> {
    match line.split_whitespace().collect::<Vec<_>>()[..] {
        ["messages", "off"] => Ok(None),
        ["messages", "on", rate, size] => {
            let rate = messages::parse_rate(rate).map_err(|e| format!("messages on: {e}"))?;
            let size = messages::parse_size(size)
                .map_err(|e| format!("messages on: {}", e.replace("--message-size", "SIZE")))?;
            MessageConfig::of(Some(rate), None, 1, size).map_err(|e| format!("messages on: {e}"))
        }
        _ => Err(format!(
            "{:?}: say `messages on RATE SIZE` (e.g. messages on 10/s 64) or `messages off`",
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
    fn heartbeat_and_messages_commands_take_their_settings() {
        let hb = parse_heartbeat("heartbeat on 500ms").unwrap().unwrap();
        assert_eq!((hb.interval_ns, hb.timeout_ns), (500_000_000, 500_000_000));
        let hb = parse_heartbeat("heartbeat on 1s 3s").unwrap().unwrap();
        assert_eq!(
            (hb.interval_ns, hb.timeout_ns),
            (1_000_000_000, 3_000_000_000)
        );
        assert_eq!(parse_heartbeat("heartbeat off"), Ok(None));
        assert!(
            parse_heartbeat("heartbeat on 0s")
                .unwrap_err()
                .contains("0 is no")
        );
        assert!(
            parse_heartbeat("heartbeat on")
                .unwrap_err()
                .contains("heartbeat on INTERVAL")
        );
        let m = parse_messages("messages on 10/s 64").unwrap().unwrap();
        assert_eq!((m.interval_ns, m.size), (100_000_000, 64));
        assert_eq!(parse_messages("messages off"), Ok(None));
        assert!(
            parse_messages("messages on 0 64")
                .unwrap_err()
                .contains("more than 0")
        );
        assert!(
            parse_messages("messages on 10 8")
                .unwrap_err()
                .contains("at least 16")
        );
        assert!(
            parse_messages("messages on 10")
                .unwrap_err()
                .contains("messages on RATE SIZE")
        );
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
