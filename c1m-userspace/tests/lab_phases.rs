//! Heartbeat and message phases of `c1m run` (issue 35 point 4): `heartbeat INTERVAL for
//! LENGTH [timeout T]` and `messages RATE [size S] for LENGTH` switch the lab's client at
//! run time (its control lines `heartbeat on|off`, `messages on|off`), on both client
//! engines; each phase ends once every pong or echo of what it sent is in, so the
//! counts close exactly, and each is recorded under its own name and kind. Refusals are
//! one line naming the fix, before anything starts.

use c1m::{lab::run::plan_file, model::phase::PhaseKind};
use lab_util::{c1m_run, fresh_dir, root_or_skip, run_folders};

use crate::lab_util;

/// Hold, heartbeat, messages, hold, as a plan's tables.
const PHASE_TABLES: &str = "\
connections = 400
ports = \"24500-24501\"
check = [\"failures == 0\", \"kernel = app\"]

[[phase]]
hold = \"1s\"

[[phase]]
heartbeat = \"500ms\"
for = \"3s\"

[[phase]]
messages = \"5/s\"
size = 32
for = \"2s\"

[[phase]]
hold = \"1s\"
";

fn write_plan(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write plan");
    p
}

#[test]
fn heartbeat_and_message_phases_close_their_counts_exactly_on_every_engine() {
    if !root_or_skip("heartbeat_and_message_phases_close_their_counts_exactly_on_every_engine") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let dir = fresh_dir("phases-beat-msg");
    let plan = write_plan(&dir, "phases.toml", PHASE_TABLES);
    for engine in ["epoll", "tokio", "uring"] {
        let out = fresh_dir(&format!("phases-beat-msg-{engine}"));
        let result = c1m_run(
            &out,
            &["--plan", plan.to_str().expect("utf-8"), "--engine", engine],
        )
        .output()
        .expect("c1m run --plan");
        let said = lab_util::printed(&result);
        // Exit 0: the checks held, kernel = app among them.
        assert_eq!(result.status.code(), Some(0), "{engine}: {said}");
        let folder = lab_util::run_folder(&out);
        let run = lab_util::summary(&folder);
        use PhaseKind::{Heartbeat, Hold, Messages, Setup, Teardown};
        let phases = lab_util::phase_kinds(&run);
        assert_eq!(
            phases,
            [
                ("setup", Some(Setup)),
                ("hold", Some(Hold)),
                ("heartbeat", Some(Heartbeat)),
                ("messages", Some(Messages)),
                ("hold-2", Some(Hold)),
                ("teardown", Some(Teardown)),
            ],
            "{engine}"
        );
        assert!(run.warnings.is_empty(), "{engine}: {:?}", run.warnings);
        assert_eq!(
            run.config.phases,
            [
                "hold 1s",
                "heartbeat 0.5s for 3s",
                "messages 5/s size 32 for 2s",
                "hold 1s"
            ]
        );
        let client = run.client.as_ref().expect("the client's snapshot");
        // Every ping answered: sent = pongs + late + missed, none left out, and every
        // connection pinged at least once in 3 s of 0.5 s slots.
        let hb = client.counters.heartbeat;
        assert!(hb.pings >= 400, "{engine}: {hb:?}");
        assert_eq!(
            hb.pings,
            hb.pongs + hb.late_pongs + hb.missed,
            "{engine}: {hb:?}"
        );
        assert_eq!((hb.unanswered, hb.outstanding), (0, 0), "{engine}: {hb:?}");
        // Only the heartbeat phase pinged, and its counts are the whole run's.
        let pings: Vec<u64> = run.phases.iter().map(|p| p.heartbeat_pings).collect();
        assert_eq!(pings, [0, 0, hb.pings, 0, 0, 0], "{engine}");
        let beat = &run.phases[2];
        assert_eq!(
            (
                beat.heartbeat_pongs,
                beat.heartbeat_late_pongs,
                beat.heartbeat_missed
            ),
            (hb.pongs, hb.late_pongs, hb.missed),
            "{engine}"
        );
        // Every message echoed: sent = received, none lost or left out, all in its phase.
        let m = client.counters.messages;
        assert!(m.sent >= 400, "{engine}: {m:?}");
        assert_eq!(m.sent, m.received, "{engine}: {m:?}");
        assert_eq!(
            (m.lost, m.outstanding, m.unmatched),
            (0, 0, 0),
            "{engine}: {m:?}"
        );
        let sent: Vec<(u64, u64)> = run
            .phases
            .iter()
            .map(|p| (p.messages_sent, p.messages_received))
            .collect();
        assert_eq!(
            sent,
            [(0, 0), (0, 0), (0, 0), (m.sent, m.received), (0, 0), (0, 0)],
            "{engine}"
        );
        // The summary names the phases' own counts.
        let stdout = String::from_utf8_lossy(&result.stdout);
        assert!(
            stdout.contains(&format!("; heartbeat: {} pings", c1m::fmt::count(hb.pings))),
            "{engine}: {stdout}"
        );
        assert!(
            stdout.contains(&format!("; messages: {} sent", c1m::fmt::count(m.sent))),
            "{engine}: {stdout}"
        );
        // The folder's plan is the list again.
        let kept = std::fs::read_to_string(folder.join("plan.toml")).expect("plan.toml");
        assert_eq!(kept.matches("[[phase]]").count(), 4, "{kept}");
        assert!(kept.contains("heartbeat = \"500ms\""), "{kept}");
    }
}

#[test]
fn heartbeat_and_message_phases_are_refused_in_one_line_naming_the_fix() {
    let dir = fresh_dir("phases-beat-msg-refused");
    // A plan's: the line of the key, or of the phase.
    for (i, (text, says)) in [
        (
            "[[phase]]\nheartbeat = \"0s\"\nfor = \"3s\"\n",
            ":2: [[phase]]: `heartbeat` is 0",
        ),
        (
            "[[phase]]\nheartbeat = \"1s\"\nfor = \"3s\"\ntimeout = \"never\"\n",
            ":4: [[phase]]: `timeout`: \"never\" is not a duration",
        ),
        (
            "[[phase]]\nmessages = \"0\"\nfor = \"3s\"\n",
            ":2: [[phase]]: `messages`: \"0\": a message rate is more than 0",
        ),
        (
            "[[phase]]\nmessages = \"5/s\"\nsize = 8\nfor = \"3s\"\n",
            ":3: [[phase]]: `size`: 8: a message carries a 16-byte stamp",
        ),
        (
            "mode = \"echo\"\n\n[[phase]]\nhold = \"1s\"\n\n[[phase]]\nheartbeat = \"1s\"\nfor = \"2s\"\n",
            ":6: [[phase]]: heartbeat phases ping WebSocket connections: they need --mode ws (this run is echo)",
        ),
        (
            "mode = \"hold\"\n[[phase]]\nmessages = \"5/s\"\nfor = \"2s\"\n",
            ":2: [[phase]]: message phases switch the client's messages at run time, in --mode ws only",
        ),
        (
            "clients = \"external\"\nexpect = 100\n[[phase]]\nheartbeat = \"1s\"\nfor = \"2s\"\n",
            ":3: [[phase]]: heartbeat phases switch the lab's own client",
        ),
        (
            "message-rate = \"5\"\n[[phase]]\nmessages = \"5\"\nfor = \"2s\"\n",
            ":2: [[phase]]: a message phase beside --message-rate",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let path = write_plan(dir.path(), &format!("bad-{i}.toml"), text);
        let path = path.to_str().expect("utf-8");
        let e = plan_file::resolve_argv(["run", "--plan", path])
            .map(|_| ())
            .expect_err(text)
            .to_string();
        assert!(
            e.starts_with(path) && e.contains(says),
            "{text}: {e}\nwanted {says}"
        );
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    // The command line's: exit 1 in one line, before any run folder.
    for (flags, says) in [
        (&["--phase", "heartbeat 0s for 3s"][..], "`heartbeat` is 0"),
        (
            &["--mode", "echo", "--phase", "heartbeat 1s for 3s"],
            "--phase 'heartbeat 1s for 3s': heartbeat phases ping WebSocket connections: they need --mode ws",
        ),
        (
            &["--phase", "messages 0/s for 2s"],
            "a message rate is more than 0 messages per second",
        ),
        (
            &["--heartbeat", "1s", "--phase", "heartbeat 1s for 2s"],
            "drop --heartbeat",
        ),
    ] {
        let out = fresh_dir("phases-beat-msg-refused-run");
        let o = c1m_run(&out, flags).output().expect("c1m run");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{flags:?}: {stderr}");
        // The error is its first line (clap's own add a "--help" pointer after it).
        let first = stderr.lines().next().unwrap_or_default();
        assert!(first.contains(says), "{flags:?}: {stderr}");
        assert!(run_folders(&out).is_empty(), "{flags:?}");
    }
}

/// Messages at two rates and pushes in two phases: each phase's latency has exactly its
/// own values (its message echoes, its pushes' frames), and the phases add up to the
/// run's histograms, every one of them; the summary shows the per-phase table.
#[test]
fn each_phase_keeps_its_own_latency_and_the_phases_add_up_on_every_engine() {
    if !root_or_skip("each_phase_keeps_its_own_latency_and_the_phases_add_up_on_every_engine") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    const N: u64 = 300;
    for engine in ["epoll", "tokio", "uring"] {
        let out = fresh_dir(&format!("phases-latency-{engine}"));
        let result = c1m_run(
            &out,
            &[
                "-n",
                &N.to_string(),
                "--ports",
                "9510-9511",
                "--engine",
                engine,
                "--phase",
                "messages 2/s size 32 for 2s",
                "--phase",
                "push 1",
                "--phase",
                "messages 10/s for 2s",
                "--phase",
                "push 2 every 1s",
                "--check",
                "failures == 0",
            ],
        )
        .output()
        .expect("c1m run --phase …");
        let said = lab_util::printed(&result);
        assert_eq!(result.status.code(), Some(0), "{engine}: {said}");
        let run = lab_util::summary(&lab_util::run_folder(&out));
        let names: Vec<&str> = run.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "setup",
                "messages",
                "push",
                "messages-2",
                "push-2",
                "teardown"
            ],
            "{engine}"
        );
        let client = run.client.as_ref().expect("the client's snapshot");
        // What phase `i` recorded of `hist` (0: nothing).
        let got = |i: usize, hist: &str| {
            run.phases[i]
                .latency
                .iter()
                .find(|l| l.histogram == hist)
                .map_or(0, |l| l.count)
        };
        // Each message phase timed exactly the echoes it received, and only it did.
        for (i, p) in run.phases.iter().enumerate() {
            assert_eq!(
                got(i, "message_us"),
                p.messages_received,
                "{engine} {}",
                p.name
            );
        }
        let (slow, fast) = (&run.phases[1], &run.phases[3]);
        assert!(slow.messages_received >= N, "{engine}: {slow:?}");
        assert!(
            fast.messages_received > 2 * slow.messages_received,
            "{engine}: {} then {}",
            slow.messages_received,
            fast.messages_received
        );
        // Each push phase timed exactly the frames of its own pushes: push 1 in the
        // first, pushes 2 and 3 in the second, every connection once each.
        let frames = |ids: &[u64]| -> u64 {
            client
                .pushes
                .iter()
                .filter(|p| ids.contains(&p.push_id))
                .map(|p| p.count)
                .sum()
        };
        assert_eq!((frames(&[1]), frames(&[2, 3])), (N, 2 * N), "{engine}");
        for hist in ["push_message_us", "push_fanout_us"] {
            let per_phase: Vec<u64> = (0..run.phases.len()).map(|i| got(i, hist)).collect();
            assert_eq!(per_phase, [0, 0, N, 0, 2 * N, 0], "{engine} {hist}");
        }
        // Every histogram: the phases' counts add up to the run's, exactly.
        for hist in c1m::workload::stats::histograms::HIST_NAMES {
            let whole = client.histogram(hist).expect("decodes").len();
            let phases: u64 = (0..run.phases.len()).map(|i| got(i, hist)).sum();
            assert_eq!(phases, whole, "{engine} {hist}");
        }
        assert_eq!(got(0, "connect_us"), N, "{engine}: connects in the setup");
        // The summary's table: the two message phases' rows under their histogram.
        let stdout = String::from_utf8_lossy(&result.stdout);
        let table = stdout
            .split("latency per phase (ms)")
            .nth(1)
            .unwrap_or_else(|| panic!("{engine}: no per-phase table\n{stdout}"));
        for p in [slow, fast] {
            let row = format!("  {} ", p.name);
            let line = table
                .lines()
                .find(|l| l.starts_with(&row))
                .unwrap_or_else(|| panic!("{engine}: no {} row\n{table}", p.name));
            let count = line.split_whitespace().nth(1);
            assert_eq!(
                count,
                Some(c1m::fmt::count(p.messages_received).as_str()),
                "{line}"
            );
        }
    }
}
