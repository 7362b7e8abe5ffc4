//! CPU a connection set up, by side and by user / system time: the one home of that
//! figure for every side-by-side bench. c1m's scenarios bench reports it itself (each
//! side's processes, `/proc/<pid>/stat`); the C programs' comes from a cgroup v2 per side
//! (`cpu.stat`, the same per-task accounting), read over the same window: the server's
//! from the client's start to the ramp's end, the client's whole life to the ramp's end.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use anyhow::{Context, Result};

use crate::bench_table::{Better, Row};

/// Where cgroup v2 is mounted: a hybrid layout's unified tree first.
const CGROUP_ROOTS: [&str; 2] = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"];

/// The scenarios bench's `setup_cpu` keys and the table's row for each, in
/// [`SetupCpu::split`]'s order.
const SPLIT: [(&str, &str); 4] = [
    ("server_user_us", "CPU per WebSocket: server user"),
    ("server_sys_us", "CPU per WebSocket: server system"),
    ("client_user_us", "CPU per WebSocket: client user"),
    ("client_sys_us", "CPU per WebSocket: client system"),
];

/// µs of CPU a connection set up: server user, server system, client user, client system.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SetupCpu {
    pub(crate) split: [f64; 4],
}

impl SetupCpu {
    /// From a scenarios bench figure's `setup_cpu` object.
    pub(crate) fn from_c1m(v: &serde_json::Value) -> SetupCpu {
        SetupCpu {
            split: SPLIT.map(|(key, _)| v[key].as_f64().unwrap_or(0.0)),
        }
    }

    /// The mean of several runs' (zeros if none).
    pub(crate) fn mean(runs: &[SetupCpu]) -> SetupCpu {
        let n = runs.len().max(1) as f64;
        SetupCpu {
            split: std::array::from_fn(|i| runs.iter().map(|c| c.split[i]).sum::<f64>() / n),
        }
    }

    pub(crate) fn total(&self) -> f64 {
        self.split.iter().sum()
    }

    /// One run's figure in words, for a line printed as the run ends.
    pub(crate) fn line(&self) -> String {
        let [su, ss, cu, cs] = self.split;
        format!(
            "CPU {:.1} µs a connection (server {su:.2} + {ss:.2}, client {cu:.2} + {cs:.2} user + system)",
            self.total()
        )
    }

    /// The table's rows of a setup's CPU over the rounds, (subject, reference) each: the
    /// total, and for a WebSocket its four parts (where a difference in the total is).
    pub(crate) fn rows(setup: Setup, rounds: &[(SetupCpu, SetupCpu)]) -> Vec<Row> {
        let row = |figure: &'static str, f: &dyn Fn(&SetupCpu) -> f64| Row {
            figure,
            unit: "µs",
            better: Better::Lower,
            goal: None,
            rounds: rounds.iter().map(|(s, r)| (f(s), f(r))).collect(),
        };
        match setup {
            Setup::Raw => vec![row("CPU per raw TCP connection set up", &|c| c.total())],
            Setup::WebSocket => std::iter::once(row("CPU per WebSocket set up", &|c| c.total()))
                .chain(
                    SPLIT
                        .iter()
                        .enumerate()
                        .map(|(i, &(_, figure))| row(figure, &|c| c.split[i])),
                )
                .collect(),
        }
    }
}

/// Which setup a CPU figure is of.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Setup {
    Raw,
    WebSocket,
}

/// A cgroup v2 of the bench's own, removed on drop (once its processes are gone).
pub(crate) struct Cgroup {
    pub(crate) dir: PathBuf,
}

impl Cgroup {
    /// `c1m-xbench-<pid>-<tag>` under the cgroup v2 root.
    pub(crate) fn new(tag: &str) -> Result<Cgroup> {
        let root = CGROUP_ROOTS
            .iter()
            .map(Path::new)
            .find(|p| p.join("cgroup.procs").exists())
            .context("no cgroup v2 mount (looked at /sys/fs/cgroup/unified and /sys/fs/cgroup)")?;
        let dir = root.join(format!("c1m-xbench-{}-{tag}", std::process::id()));
        std::fs::create_dir(&dir).with_context(|| format!("mkdir {}", dir.display()))?;
        Ok(Cgroup { dir })
    }

    /// Its name, as `perf --for-each-cgroup` takes it.
    pub(crate) fn name(&self) -> String {
        self.dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// `inner` started by a shell that first moves itself into this cgroup (from outside
    /// a network namespace: `ip netns exec` mounts a sysfs without the cgroup tree).
    pub(crate) fn wrap(&self, inner: &Command) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", "echo $$ > \"$0/cgroup.procs\" && exec \"$@\""])
            .arg(&self.dir)
            .arg(inner.get_program())
            .args(inner.get_args());
        c
    }

    /// (user, system) µs its processes have run, the dead ones' included.
    fn cpu_us(&self) -> Result<(f64, f64)> {
        let path = self.dir.join("cpu.stat");
        let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
        let field = |k: &str| -> Result<f64> {
            text.lines()
                .find_map(|l| l.strip_prefix(k)?.strip_prefix(' ')?.trim().parse().ok())
                .with_context(|| format!("no {k} in {}", path.display()))
        };
        Ok((field("user_usec")?, field("system_usec")?))
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // The run's processes were killed first; their exit (closing 200,000 sockets)
        // took over 5 s here.
        for _ in 0..600 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Each side of a run in a cgroup of its own, and their CPU over its setup.
pub(crate) struct SideCgroups {
    pub(crate) server: Cgroup,
    pub(crate) client: Cgroup,
    server_at_start: (f64, f64),
    /// Server (user, system), client (user, system) µs over the setup, once it ended.
    setup_us: Option<[f64; 4]>,
}

impl SideCgroups {
    pub(crate) fn new(tag: &str) -> Result<SideCgroups> {
        Ok(SideCgroups {
            server: Cgroup::new(&format!("{tag}s"))?,
            client: Cgroup::new(&format!("{tag}c"))?,
            server_at_start: (0.0, 0.0),
            setup_us: None,
        })
    }

    /// The setup starts: the client is not started yet, the server is.
    pub(crate) fn setup_starts(&mut self) -> Result<()> {
        self.server_at_start = self.server.cpu_us()?;
        Ok(())
    }

    /// The setup ended: the server's CPU since its start, the client's whole life.
    pub(crate) fn setup_ended(&mut self) -> Result<()> {
        let (su, ss) = self.server.cpu_us()?;
        let (cu, cs) = self.client.cpu_us()?;
        let (su0, ss0) = self.server_at_start;
        self.setup_us = Some([su - su0, ss - ss0, cu, cs].map(|v| v.max(0.0)));
        Ok(())
    }

    /// The setup's CPU a connection, for `n` connections (zeros: not measured).
    pub(crate) fn per_connection(&self, n: u64) -> SetupCpu {
        let per = |us: f64| us / n.max(1) as f64;
        SetupCpu {
            split: self.setup_us.unwrap_or_default().map(per),
        }
    }
}
