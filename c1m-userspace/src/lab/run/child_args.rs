//! The command lines of the lab's children, built from the clap structs that parse them.
//!
//! Each builder destructures its struct field by field, so adding or renaming a field
//! fails to compile here; the flag for a field is looked up in clap's own definition by
//! the field's id, so renaming a flag changes both ends at once. The lab parses the
//! argv it built back with the child's parser before it starts anything: a bad value is
//! reported by the same code that would have rejected it in the child.

use std::{ffi::OsString, path::Path, time::Duration};

use clap::{Args, Command, FromArgMatches};
use thiserror::Error;

use super::flags::RunArgs;
use crate::{
    args::Connections,
    workload::{
        cli::{ClientArgs, CommonArgs, Hold, HostsArgs, ServerArgs, WorkloadArgs},
        tls::args::{ClientTlsArgs, RunTlsArgs, ServerTlsArgs},
    },
};

#[derive(Debug, Error)]
pub(crate) enum ChildArgsError {
    /// A builder names a field clap does not know (caught by the round-trip tests).
    #[error("no flag for field `{0}` in `c1m {1}`")]
    UnknownField(&'static str, &'static str),
    #[error("{0}")]
    Invalid(#[from] clap::Error),
}

/// An argv under construction for subcommand `sub` whose flags are defined by `T`.
struct Argv {
    sub: &'static str,
    cmd: Command,
    out: Vec<OsString>,
    error: Option<ChildArgsError>,
}

impl Argv {
    fn new<T: Args>(sub: &'static str) -> Self {
        Argv {
            sub,
            cmd: T::augment_args(Command::new("c1m")),
            out: vec![sub.into()],
            error: None,
        }
    }

    fn long(&mut self, id: &'static str) -> Option<String> {
        let long = self
            .cmd
            .get_arguments()
            .find(|a| a.get_id() == id)
            .and_then(|a| a.get_long())
            .map(|l| format!("--{l}"));
        if long.is_none() {
            self.error
                .get_or_insert(ChildArgsError::UnknownField(id, self.sub));
        }
        long
    }

    /// `--flag=VALUE` in one word: a value that begins with `-` (`--out=-runs`) is
    /// then never read as a flag of the child.
    fn value(&mut self, id: &'static str, v: impl Into<OsString>) {
        if let Some(flag) = self.long(id) {
            let mut word = OsString::from(format!("{flag}="));
            word.push(v.into());
            self.out.push(word);
        }
    }

    fn opt<V: Into<OsString>>(&mut self, id: &'static str, v: Option<V>) {
        if let Some(v) = v {
            self.value(id, v);
        }
    }

    fn flag(&mut self, id: &'static str, on: bool) {
        if on && let Some(flag) = self.long(id) {
            self.out.push(flag.into());
        }
    }

    fn finish(self) -> Result<Vec<OsString>, ChildArgsError> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.out),
        }
    }
}

/// A duration as `parse_duration` reads it back exactly.
fn duration(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
}

/// The flags server and client share, appended to either's argv.
fn common_argv(v: &mut Argv, c: &CommonArgs) {
    let CommonArgs {
        engine,
        threads,
        control,
        control_token_file,
        stats_json,
        quiet,
    } = c;
    v.value("engine", engine.name());
    v.opt("threads", threads.map(|n| n.to_string()));
    v.opt("control", control.as_ref());
    v.opt("control_token_file", control_token_file.as_ref());
    v.opt("stats_json", stats_json.as_ref());
    v.flag("quiet", *quiet);
}

/// The workload flags `c1m client` and `c1m run` share.
fn workload_argv(v: &mut Argv, w: &WorkloadArgs) {
    let WorkloadArgs {
        payload_size,
        echo_count,
        path,
        heartbeat,
        heartbeat_timeout,
        churn,
        churn_order,
        message_rate,
        total_message_rate,
        message_size,
    } = w;
    v.value("payload_size", payload_size.to_string());
    v.value("echo_count", echo_count.to_string());
    v.value("path", path);
    v.opt("heartbeat", heartbeat.map(duration));
    v.opt("heartbeat_timeout", heartbeat_timeout.map(duration));
    v.opt("churn", churn.map(|r| r.to_string()));
    // Only with --churn, which it requires.
    v.opt("churn_order", churn.map(|_| churn_order.name()));
    v.opt("message_rate", message_rate.map(|r| r.0.to_string()));
    // A total over the run: a client process with a share of the connections (`--shard`)
    // takes the same share of it.
    v.opt(
        "total_message_rate",
        total_message_rate.map(|r| r.0.to_string()),
    );
    v.value("message_size", message_size.to_string());
}

/// `c1m server …` for `a`.
pub(crate) fn server_argv(a: &ServerArgs) -> Result<Vec<OsString>, ChildArgsError> {
    let ServerArgs {
        addrs,
        ports,
        mode,
        max_conns,
        workers,
        push_every,
        push_writers,
        common,
        max_message,
        handshake_timeout,
        backlog,
        duration: stop_after,
        heartbeat,
        heartbeat_timeout,
        message_rate,
        message_size,
        run_id,
        tls:
            ServerTlsArgs {
                tls,
                tls_cert,
                tls_key,
                tls_resumption,
                tls_cert_out,
            },
    } = a;
    let mut v = Argv::new::<ServerArgs>("server");
    v.value("addrs", addrs.join(","));
    v.value("ports", ports);
    v.value("mode", mode.name());
    v.opt("max_conns", max_conns.map(|n| n.to_string()));
    v.value("workers", workers.to_string());
    v.opt("push_every", push_every.map(duration));
    v.value("push_writers", push_writers.to_string());
    common_argv(&mut v, common);
    v.value("max_message", max_message.to_string());
    v.value("handshake_timeout", duration(*handshake_timeout));
    v.value("backlog", backlog.to_string());
    v.opt("duration", stop_after.map(duration));
    v.opt("heartbeat", heartbeat.map(duration));
    v.opt("heartbeat_timeout", heartbeat_timeout.map(duration));
    v.opt("message_rate", message_rate.map(|r| r.0.to_string()));
    v.value("message_size", message_size.to_string());
    v.opt("run_id", run_id.clone());
    v.flag("tls", *tls);
    v.opt("tls_cert", tls_cert.as_ref());
    v.opt("tls_key", tls_key.as_ref());
    v.flag("tls_resumption", *tls_resumption);
    v.opt("tls_cert_out", tls_cert_out.as_ref());
    v.finish()
}

/// `c1m client …` for `a`.
pub(crate) fn client_argv(a: &ClientArgs) -> Result<Vec<OsString>, ChildArgsError> {
    let ClientArgs {
        hosts,
        ports,
        connections,
        rate,
        in_flight,
        hold,
        sources,
        source_ports,
        mode,
        workload,
        connect_timeout,
        workers,
        common,
        stay,
        churn_start,
        step,
        max_message,
        // The lab's own client has none; `c1m run --hosts` gives each client host its
        // share, start, folder, clock and label.
        hosts_run:
            HostsArgs {
                shard,
                start_at,
                run_dir,
                clock_from,
                host_label,
                metrics_addr,
                server_wait,
                loss,
                loss_link,
            },
        push_format,
        push_latency,
        push_stamp,
        push_trigger,
        server_pid,
        tls:
            ClientTlsArgs {
                tls,
                tls_ca,
                tls_insecure_skip_verify,
                tls_server_name,
                tls_resumption,
            },
    } = a;
    let mut v = Argv::new::<ClientArgs>("client");
    v.value("hosts", hosts.join(","));
    v.value("ports", ports);
    v.value("connections", connections.to_string());
    v.value("rate", rate.to_string());
    v.value("in_flight", in_flight.to_string());
    v.value(
        "hold",
        match hold {
            Hold::Forever => "forever".to_owned(),
            Hold::For(d) => duration(*d),
        },
    );
    if !sources.is_empty() {
        v.value("sources", sources.join(","));
    }
    v.opt("source_ports", source_ports.as_ref());
    v.value("mode", mode.name());
    workload_argv(&mut v, workload);
    v.value("connect_timeout", duration(*connect_timeout));
    v.value("workers", workers.to_string());
    common_argv(&mut v, common);
    v.flag("stay", *stay);
    if workload.churn.is_some() {
        v.value("churn_start", churn_start.name());
    }
    v.opt("step", step.map(|n| n.to_string()));
    v.value("max_message", max_message.to_string());
    v.value("push_format", push_format.to_string());
    v.value("push_latency", push_latency.to_string());
    v.opt("push_stamp", push_stamp.map(|i| i.to_string()));
    v.opt(
        "push_trigger",
        push_trigger.as_ref().map(ToString::to_string),
    );
    v.opt("server_pid", server_pid.map(|p| p.to_string()));
    v.opt("shard", shard.map(|s| format!("{}/{}", s.index, s.count)));
    v.opt(
        "start_at",
        start_at
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| format!("{}.{:09}", d.as_secs(), d.subsec_nanos())),
    );
    v.opt("run_dir", run_dir.as_ref());
    v.opt("clock_from", clock_from.as_ref());
    v.opt("host_label", host_label.as_ref());
    v.value("server_wait", duration(*server_wait));
    v.opt("loss", loss.map(|p| p.to_string()));
    v.opt("loss_link", loss_link.as_ref());
    v.flag("tls", *tls);
    v.opt("tls_ca", tls_ca.as_ref());
    v.flag("tls_insecure_skip_verify", *tls_insecure_skip_verify);
    v.opt("tls_server_name", tls_server_name.as_ref());
    v.flag("tls_resumption", *tls_resumption);
    v.opt("metrics_addr", metrics_addr.map(|m| m.to_string()));
    v.finish()
}

/// A clap value enum's name on the command line.
fn value_name(v: &impl clap::ValueEnum) -> String {
    v.to_possible_value()
        .map(|p| p.get_name().to_owned())
        .unwrap_or_default()
}

/// `c1m run …` for `a`: one run of a `--servers` sequence, started as its own process.
pub(crate) fn run_argv(a: &RunArgs) -> Result<Vec<OsString>, ChildArgsError> {
    let RunArgs {
        connections,
        rate,
        ports,
        addr,
        source,
        mode,
        workload,
        engine,
        server_engine,
        server_heartbeat,
        server_message_rate,
        idle,
        pushes,
        phases,
        push_writers,
        setup_timeout,
        in_flight,
        tune,
        no_observer,
        force,
        out,
        metrics_addr,
        metrics_linger,
        metrics_per_port,
        plain,
        json,
        clients,
        expect,
        control_addr,
        server_cmd,
        target,
        server_pid,
        push_trigger,
        push_format,
        push_latency,
        push_stamp,
        push_wait,
        servers,
        repeat,
        baseline,
        verbose,
        checks,
        isolation,
        clean_wait,
        server_name,
        server_workers,
        into,
        // A child gets the resolved flags, never the plan they came from; the plan file
        // is written by the parent's run folder.
        plan: _,
        plan_check: _,
        effective_plan: _,
        // A bound socket, not a flag: a child binds --metrics-addr itself.
        metrics_listener: _,
        // `--hosts` starts its server side as a `c1m run` of its own: that run makes no
        // hosts of its own (a child never recurses).
        hosts: _,
        clients_per_host: _,
        // The hosts' namespaces get the rule; a child run is in one already.
        conntrack: _,
        connect_timeout,
        // Injected on the client hosts' links (their `c1m client --loss`), never by a
        // server host's run.
        loss: _,
        tls:
            RunTlsArgs {
                tls,
                tls_cert,
                tls_key,
                tls_ca,
                tls_insecure_skip_verify,
                tls_resumption,
            },
    } = a;
    let mut v = Argv::new::<RunArgs>("run");
    v.opt("connections", connections.map(|c| c.to_string()));
    v.value("rate", rate.to_string());
    // --target sets the address and ports itself (and conflicts with both flags).
    if target.is_none() {
        v.value("ports", ports.to_string());
        v.value("addr", addr);
    }
    v.opt("source", source.as_ref());
    v.value("mode", mode.name());
    workload_argv(&mut v, workload);
    v.value("engine", engine.name());
    v.opt("server_engine", server_engine.map(|e| e.name()));
    v.opt("server_heartbeat", server_heartbeat.map(duration));
    v.opt(
        "server_message_rate",
        server_message_rate.map(|r| r.0.to_string()),
    );
    // A phase list replaces the fixed sequence's flags (and refuses them beside it).
    if phases.is_empty() {
        v.value("idle", duration(*idle));
        v.value("pushes", pushes.to_string());
    }
    for p in phases {
        v.value("phases", p.to_string());
    }
    v.value("push_writers", push_writers.to_string());
    v.opt("setup_timeout", setup_timeout.map(duration));
    v.value("connect_timeout", duration(*connect_timeout));
    v.value("in_flight", in_flight.to_string());
    v.flag("tune", *tune);
    v.flag("no_observer", *no_observer);
    v.flag("force", *force);
    v.value("out", out);
    v.opt("metrics_addr", metrics_addr.map(|m| m.to_string()));
    // Both require --metrics-addr.
    if metrics_addr.is_some() {
        v.value("metrics_linger", duration(*metrics_linger));
        v.flag("metrics_per_port", *metrics_per_port);
    }
    v.flag("plain", *plain);
    v.flag("json", *json);
    v.value("clients", value_name(clients));
    v.opt("expect", expect.map(|n| n.to_string()));
    v.opt("control_addr", control_addr.as_ref());
    v.opt("server_cmd", server_cmd.as_ref());
    v.flag("tls", *tls);
    v.opt("tls_cert", tls_cert.as_ref());
    v.opt("tls_key", tls_key.as_ref());
    v.opt("tls_ca", tls_ca.as_ref());
    v.flag("tls_insecure_skip_verify", *tls_insecure_skip_verify);
    v.flag("tls_resumption", *tls_resumption);
    v.opt("target", target.as_ref().map(ToString::to_string));
    v.opt("server_pid", server_pid.map(|p| p.to_string()));
    v.opt(
        "push_trigger",
        push_trigger.as_ref().map(ToString::to_string),
    );
    v.value("push_format", push_format.to_string());
    v.value("push_latency", value_name(push_latency));
    v.opt("push_stamp", push_stamp.as_ref().map(value_name));
    v.value("push_wait", duration(*push_wait));
    v.opt("servers", servers.as_ref());
    v.value("repeat", repeat.to_string());
    v.opt("baseline", baseline.as_ref());
    v.flag("verbose", *verbose);
    for c in checks {
        v.value("check", c.to_string());
    }
    v.opt("isolation", isolation.as_ref().map(value_name));
    v.value("clean_wait", duration(*clean_wait));
    v.opt("server_name", server_name.as_ref());
    v.opt("server_workers", server_workers.map(|k| k.to_string()));
    v.opt("into", into.as_ref());
    v.finish()
}

/// `T` as its parser fills it from `argv` (the subcommand name first).
pub(crate) fn parse<T: Args + FromArgMatches>(argv: &[OsString]) -> Result<T, ChildArgsError> {
    let m = T::augment_args(Command::new("c1m")).try_get_matches_from(argv)?;
    Ok(T::from_arg_matches(&m)?)
}

/// `T` with every default, as an empty command line gives it.
pub(crate) fn defaults<T: Args + FromArgMatches>(sub: &str) -> Result<T, ChildArgsError> {
    parse(&[OsString::from(sub)])
}

/// Where the `side`'s control socket is: in the run folder, or, when the folder's path is
/// not UTF-8 (`--control` is text, a unix path or HOST:PORT, and a lossy copy named a
/// folder that does not exist), in this user's runtime folder under the lab's pid.
fn control_socket(dir: &Path, side: &str) -> anyhow::Result<String> {
    let name = format!("{side}.sock");
    if let Some(p) = dir.join(&name).to_str() {
        return Ok(p.to_owned());
    }
    let elsewhere =
        crate::state_dir::runtime_dir()?.join(format!("ctl-{}-{name}", std::process::id()));
    elsewhere.to_str().map(str::to_owned).ok_or_else(|| {
        anyhow::anyhow!("no UTF-8 path for the control sockets: set TMPDIR to a UTF-8 path")
    })
}

/// The server and client of a run as typed arguments: built and checked by the
/// children's own parsers before anything starts.
pub(crate) struct ChildPlan {
    pub server: ServerArgs,
    pub client: ClientArgs,
}

impl ChildPlan {
    pub(crate) fn new(
        args: &RunArgs,
        n: Connections,
        sources: &str,
        dir: &Path,
    ) -> anyhow::Result<Self> {
        let mut server: ServerArgs = defaults("server")?;
        server.addrs = vec![args.addr.clone()];
        server.ports = args.ports.to_string();
        server.mode = args.mode;
        server.common.engine = args.server_engine.unwrap_or(args.engine);
        server.heartbeat = args.server_heartbeat;
        server.heartbeat_timeout = args.server_heartbeat.and(args.workload.heartbeat_timeout);
        server.message_rate = args.server_message_rate;
        server.message_size = args.workload.message_size;
        server.max_conns = Some(n);
        server.common.control = Some(control_socket(dir, "server")?);
        server.common.stats_json = Some(dir.join("server-final.json"));
        server.common.quiet = true;
        let mut client: ClientArgs = defaults("client")?;
        client.hosts = vec![args.addr.clone()];
        client.ports = args.ports.to_string();
        client.connections = n;
        client.rate = args.rate as f64;
        client.in_flight = args.in_flight;
        client.connect_timeout = args.connect_timeout;
        client.hold = Hold::Forever;
        client.sources = vec![sources.to_owned()];
        client.mode = args.mode;
        client.workload = args.workload.clone();
        // Churn phases: a client able to churn at the fastest phase's rate, in their
        // order; each phase tells it its own rate.
        if let Some((rate, order)) = super::phase_list::client_churn(&args.phases) {
            client.workload.churn = Some(rate);
            client.workload.churn_order = order;
        }
        client.common.engine = args.engine;
        client.common.control = Some(control_socket(dir, "client")?);
        client.common.stats_json = Some(dir.join("client-final.json"));
        client.stay = true;
        // The lab turns churn on and off around its idle phase.
        client.churn_start = crate::workload::churn::ChurnStart::Control;
        crate::workload::churn::check(
            args.workload.churn.map(|r| r.0),
            n.get(),
            Some(args.idle),
            "--idle",
        )
        .map_err(anyhow::Error::msg)?;
        // The phases against the count the run settled on (`max` or the default: known
        // only now).
        super::phase_list::check(
            &args.phases,
            &super::phase_list::Setting {
                mode: args.mode,
                trigger: None,
                local_clients: true,
                connections: Some(n.get()),
                heartbeat: args.workload.heartbeat.is_some(),
                messages: args.workload.message_rate.is_some()
                    || args.workload.total_message_rate.is_some(),
            },
        )
        .map_err(|m| anyhow::anyhow!("--phase '{}': {}", args.phases[m.index], m.msg))?;
        client.common.quiet = true;
        client.push_format = args.push_format.clone();
        client.push_latency = args.push_latency;
        client.push_stamp = args.push_stamp;
        (server.tls, client.tls) = args.tls.split(dir)?;
        let plan = ChildPlan { server, client };
        // The children's parsers and checks, now: a bad value is named before any child
        // starts, by the code that would have refused it in the child.
        let _: ServerArgs = parse(&plan.server_argv()?)?;
        let _: ClientArgs = parse(&plan.client_argv()?)?;
        plan.server.listen()?;
        plan.client.endpoints()?;
        Ok(plan)
    }

    pub(crate) fn server_argv(&self) -> anyhow::Result<Vec<OsString>> {
        Ok(server_argv(&self.server)?)
    }

    pub(crate) fn client_argv(&self) -> anyhow::Result<Vec<OsString>> {
        Ok(client_argv(&self.client)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::config::Mode;

    fn server() -> ServerArgs {
        let mut a: ServerArgs = defaults("server").unwrap();
        a.addrs = vec!["127.0.0.1".into(), "127.0.0.2-127.0.0.3".into()];
        a.ports = "9000-9009".into();
        a.mode = Mode::Ws;
        a.max_conns = Some(Connections::of(3000));
        a.common.threads = Some(3);
        a.push_every = Some(Duration::from_millis(1500));
        a.common.control = Some("/tmp/x/server.sock".into());
        a.common.stats_json = Some("/tmp/x/server-final.json".into());
        a.common.quiet = true;
        a.duration = Some(Duration::from_secs(90));
        a
    }

    fn client() -> ClientArgs {
        let mut a: ClientArgs = defaults("client").unwrap();
        a.connections = Connections::of(25_000);
        a.rate = 25_000.0;
        a.hold = Hold::Forever;
        a.sources = vec!["127.0.0.2-127.0.0.4".into()];
        a.source_ports = Some("40000-40999".into());
        a.mode = Mode::Echo;
        a.connect_timeout = Duration::from_millis(250);
        a.common.control = Some("/tmp/x/client.sock".into());
        a.common.stats_json = Some("/tmp/x/client-final.json".into());
        a.common.quiet = true;
        a.stay = true;
        a.step = Some(500);
        a.push_format = crate::workload::push_format::PushFormat::Json("ts".into());
        a.push_latency = crate::workload::push_rule::PushInstant::Write;
        a.push_stamp = Some(crate::workload::push_rule::PushInstant::Broadcast);
        a.push_trigger = Some("signal:USR2".parse().unwrap());
        a.server_pid = Some(4242);
        // A client host of `c1m run --hosts`.
        a.hosts_run = HostsArgs {
            shard: Some(crate::workload::host_share::ShardOf { index: 1, count: 2 }),
            start_at: Some(std::time::UNIX_EPOCH + Duration::from_millis(1_700_000_000_500)),
            run_dir: Some("/tmp/x/hosts/host-1".into()),
            clock_from: Some("10.99.0.1:7999".into()),
            host_label: Some("host-1".into()),
            metrics_addr: None,
            server_wait: Duration::from_secs(120),
            loss: Some("1%".parse().unwrap()),
            loss_link: Some("veth0".into()),
        };
        a
    }

    #[test]
    fn server_args_survive_the_round_trip() {
        let a = server();
        let back: ServerArgs = parse(&server_argv(&a).unwrap()).unwrap();
        assert_eq!(format!("{back:?}"), format!("{a:?}"));
    }

    #[test]
    fn client_args_survive_the_round_trip() {
        let a = client();
        let back: ClientArgs = parse(&client_argv(&a).unwrap()).unwrap();
        assert_eq!(format!("{back:?}"), format!("{a:?}"));
        let mut forever_not = client();
        forever_not.hold = Hold::For(Duration::from_secs(30));
        let back: ClientArgs = parse(&client_argv(&forever_not).unwrap()).unwrap();
        assert_eq!(back.hold, Hold::For(Duration::from_secs(30)));
    }

    #[test]
    fn run_args_survive_the_round_trip() {
        let argv = |args: &[&str]| -> Vec<OsString> {
            std::iter::once("run")
                .chain(args.iter().copied())
                .map(OsString::from)
                .collect()
        };
        for args in [
            &[][..],
            &[
                "-n",
                "5000",
                "--rate",
                "0",
                "--ports",
                "9000-9009",
                "--addr",
                "127.0.0.1",
                "--source",
                "127.0.0.2-127.0.0.3",
                "--mode",
                "echo",
                "--payload-size",
                "100",
                "--echo-count",
                "3",
                "--path",
                "/chat",
                "--engine",
                "tokio",
                "--server-engine",
                "epoll",
                "--idle",
                "2.5s",
                "--pushes",
                "3",
                "--push-writers",
                "2",
                "--setup-timeout",
                "90s",
                "--in-flight",
                "64",
                "--tune",
                "--no-observer",
                "--force",
                "--out",
                "/tmp/runs",
                "--metrics-addr",
                "127.0.0.1:9464",
                "--metrics-linger",
                "5s",
                "--metrics-per-port",
                "--plain",
                "--server-cmd",
                "python3 'a b.py' --port 9000",
                "--push-trigger",
                "signal:USR1",
                "--push-format",
                "u64le-us",
                "--push-latency",
                "write",
                "--push-stamp",
                "broadcast",
                "--push-wait",
                "20s",
                "--isolation",
                "wait",
                "--clean-wait",
                "5s",
                "--server-name",
                "go",
                "--server-workers",
                "68",
                "--into",
                "/tmp/runs/x",
            ][..],
            &[
                "-n",
                "max",
                "--servers",
                "go,c1m-epoll",
                "--repeat",
                "3",
                "--baseline",
                "go",
                "--json",
            ][..],
            // Values that look like flags, and one that is not UTF-8.
            &[
                "--out=-runs",
                "--server-name=--go",
                "--into=-x/y",
                "--source=-",
            ][..],
            &[
                "--target",
                "127.0.0.1:9000-9001",
                "--server-pid",
                "42",
                "--clients",
                "external",
                "--expect",
                "100",
                "--control-addr",
                "127.0.0.1:7999",
            ][..],
        ] {
            let a: RunArgs = parse(&argv(args)).unwrap();
            let back: RunArgs = parse(&run_argv(&a).unwrap()).unwrap();
            assert_eq!(format!("{back:?}"), format!("{a:?}"), "{args:?}");
        }
        let mut argv = argv(&[]);
        argv.push(OsString::from("--out"));
        argv.push(
            <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"runs-\xff").into(),
        );
        let a: RunArgs = parse(&argv).unwrap();
        let back: RunArgs = parse(&run_argv(&a).unwrap()).unwrap();
        assert_eq!(back.out, a.out);
    }

    #[test]
    fn the_childs_parser_rejects_what_the_child_would() {
        let mut a = client();
        a.rate = -1.0;
        let e = parse::<ClientArgs>(&client_argv(&a).unwrap()).unwrap_err();
        assert!(e.to_string().contains("--rate"), "{e}");
    }
}
