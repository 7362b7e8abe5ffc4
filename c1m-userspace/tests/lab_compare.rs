//! `c1m compare` on real runs: two `c1m run -n 2000` folders compared as two setups and
//! as repeats of one (exact counts in the table and in compare.csv), and every kind of
//! bad input exiting 2 with one line that names the path. Root: the runs happen in a
//! private network namespace; without root the test says SKIP loudly. Written runs (no
//! root): six names of three repeats fit $COLUMNS.

use std::{path::Path, process::Command};

use lab_util::{c1m_run, fresh_dir, root_or_skip, run_folders};

use crate::lab_util;

fn compare(args: &[String], out: &Path) -> (i32, String, String) {
    compare_within(args, out, "120")
}

/// `c1m compare ARGS --out OUT` with $COLUMNS set: (exit code, stdout, stderr).
fn compare_within(args: &[String], out: &Path, columns: &str) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_c1m"))
        .env("COLUMNS", columns)
        .arg("compare")
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .expect("c1m compare");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The text line of a key figure, whitespace collapsed.
fn line(text: &str, figure: &str) -> String {
    text.lines()
        .find(|l| l.trim_start().starts_with(figure))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| panic!("no `{figure}` line in\n{text}"))
}

#[test]
fn two_real_runs_compare_with_exact_counts() {
    if !root_or_skip("two_real_runs_compare_with_exact_counts") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let dir = fresh_dir("compare");
    let runs = dir.join("runs");
    for _ in 0..2 {
        let st = c1m_run(
            &runs,
            &[
                "--ports",
                "8000-8003",
                "-n",
                "2000",
                "--rate",
                "2000",
                "--idle",
                "1s",
            ],
        )
        .status()
        .expect("c1m run");
        assert_eq!(st.code(), Some(0), "c1m run -n 2000");
    }
    let mut folders = run_folders(&runs);
    folders.sort();
    assert_eq!(folders.len(), 2);
    let arg = |p: &Path, n: &str| format!("{}={n}", p.display());

    // Two setups, one run each: the answer first, the detail in compare.txt.
    let out = dir.join("two");
    let (code, answer, err) = compare(&[arg(&folders[0], "a"), arg(&folders[1], "b")], &out);
    assert_eq!(code, 0, "{err}");
    assert!(
        answer.starts_with("Comparison of 2 names over 2 runs\n"),
        "{answer}"
    );
    assert!(!answer.contains("Key figures"), "{answer}");
    let held = answer
        .lines()
        .find(|l| l.starts_with("server ") && l.contains("held"))
        .unwrap_or_else(|| panic!("no headline table\n{answer}"));
    assert!(held.contains("setup rate"), "{held}");
    for name in ["a", "b"] {
        assert_eq!(
            line(&answer, &format!("{name} ")).split(' ').nth(1),
            Some("2,000"),
            "{answer}"
        );
    }
    assert!(
        answer.contains("    a vs b connections held: the same in every run\n"),
        "{answer}"
    );
    // Two runs paced alike may make exactly the same rate: then that is the verdict.
    assert!(
        answer.contains("a vs b setup rate: no call (a has 1 run and b has 1 run, 3 needed")
            || answer.contains("a vs b setup rate: the same in every run")
            || answer.contains("a vs b setup rate: no practical difference (under 1%)"),
        "{answer}"
    );
    let text = std::fs::read_to_string(out.join("compare.txt")).unwrap();
    assert!(text.starts_with(&answer[..answer.find("Setup differences").unwrap()]));
    assert_eq!(line(&text, "target"), "target 2,000 2,000 same");
    assert_eq!(
        line(&text, "peak open, server app"),
        "peak open, server app 2,000 2,000 same"
    );
    assert_eq!(
        line(&text, "peak ESTABLISHED, server kernel"),
        "peak ESTABLISHED, server kernel 2,000 2,000 same"
    );
    assert_eq!(line(&text, "client failures"), "client failures 0 0 same");
    // The latency table: connect has one value per connection, in a and in b.
    let count = text
        .lines()
        .skip_while(|l| l.trim() != "client connect")
        .find(|l| l.trim_start().starts_with("count "))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| panic!("no connect count\n{text}"));
    assert_eq!(count, "count 2,000 2,000 same");
    // One run each: no call, whatever the difference.
    let verdicts = text
        .lines()
        .skip_while(|l| !l.starts_with("Verdicts vs a, over "))
        .nth(1)
        .unwrap_or_else(|| panic!("no verdicts for b\n{text}"));
    assert!(
        verdicts.starts_with("  b: ") && verdicts.contains(" too few runs"),
        "{verdicts}"
    );
    assert!(
        !verdicts.contains("beyond") && !verdicts.contains("measurably"),
        "{verdicts}"
    );
    for f in ["compare.csv", "compare.json", "compare.html", "compare.txt"] {
        assert!(out.join(f).exists(), "{f}");
    }

    // The same two folders as repeats of one setup: n = 2 in compare.csv.
    let out = dir.join("repeats");
    let (code, text, err) = compare(&[arg(&folders[0], "r"), arg(&folders[1], "r")], &out);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("  r: 2 runs (complete), "), "{text}");
    let csv = std::fs::read_to_string(out.join("compare.csv")).unwrap();
    assert!(
        csv.lines().any(|l| l
            == "Connections,\"peak open, client app\",count,r,2,2000,0,2000,2000,2000,r,,,,,,,,,,baseline,,,"),
        "{csv}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("compare.json")).unwrap()).unwrap();
    assert_eq!(json["runs"].as_array().map(Vec::len), Some(2));
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let dir = fresh_dir("compare-bad");
    let not_run = dir.join("not-a-run");
    std::fs::create_dir_all(&not_run).unwrap();
    let foreign = dir.join("foreign");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(foreign.join("summary.json"), r#"{"version": 3}"#).unwrap();
    let missing = dir.join("missing");
    let cases = [
        (
            missing.clone(),
            "no such folder: pass a run folder written by c1m run",
        ),
        (
            not_run.clone(),
            "summary.json not found: pass a run folder written by c1m run",
        ),
        (foreign.clone(), "not a c1m run summary (schema mismatch)"),
    ];
    for (path, want) in cases {
        let (code, out, err) = compare(&[path.display().to_string()], &dir.join("out"));
        assert_eq!(code, 2, "{}: {err}", path.display());
        assert_eq!(out, "");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("c1m compare: ") && err.contains(&*path.display().to_string()),
            "{err}"
        );
        assert!(err.contains(want), "{err}");
    }
    let (code, _, err) = compare(&[format!("{}=", missing.display())], &dir.join("out"));
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("empty name after '='"), "{err}");

    // A baseline that names no run.
    let (a, b) = (dir.join("a"), dir.join("b"));
    let run = c1m::report::sample_run();
    for d in [&a, &b] {
        c1m::report::write_run(d, &run).unwrap();
    }
    let args = [
        format!("{}=go", a.display()),
        format!("{}=node", b.display()),
        "--baseline".into(),
        "rust".into(),
    ];
    let (code, out, err) = compare(&args, &dir.join("out"));
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert_eq!(
        err,
        "c1m compare: --baseline rust: no run is named so; pick from go, node\n"
    );
}

/// Six names of three repeats each, every figure a little different: every line of the
/// output fits $COLUMNS, 120 and 80.
#[test]
fn six_names_of_three_repeats_fit_the_columns() {
    let dir = fresh_dir("compare-columns");
    let mut args = Vec::new();
    let base = c1m::report::sample_run();
    for r in 0..3 {
        for n in 0..6 {
            let mut run = base.clone();
            let jitter = 1.0 + 0.013 * (r * 6 + n) as f64;
            run.per_connection.server_user_bytes = Some(1234.0 * jitter);
            run.per_connection.kernel_bytes_per_socket = Some(4086.0 * jitter);
            for p in &mut run.phases {
                p.duration_s *= jitter;
                p.server.cpu_sys_s *= jitter;
            }
            run.config.sources_reason =
                format!("server {n}: a long sentence about where the source addresses came from");
            let folder = dir.join(format!("server-{n}-{r}"));
            c1m::report::write_run(&folder, &run).unwrap();
            args.push(format!("{}=server-{n}", folder.display()));
        }
    }
    args.extend(["--baseline".into(), "server-2".into(), "--verbose".into()]);
    for columns in [120, 80] {
        let (code, text, err) = compare_within(&args, &dir.join("out"), &columns.to_string());
        assert_eq!(code, 0, "{err}");
        let wide: Vec<&str> = text
            .lines()
            .filter(|l| l.chars().count() > columns)
            .collect();
        assert!(wide.is_empty(), "wider than {columns}: {wide:#?}\n{text}");
        assert!(text.contains("Verdicts vs server-2, over "), "{text}");
        assert!(text.contains("Every pair, figure by figure"), "{text}");
        assert!(
            text.contains("[1] server-2, config.sources_reason: server 2: a long"),
            "{text}"
        );
    }
}

/// One folder named twice is one run, not two repeats: `A=a A=a B=b B=b` once turned
/// two single runs into "apart (+0.0%)" rows. Refused, naming the folder.
#[test]
fn the_same_folder_twice_is_refused_not_counted_as_a_repeat() {
    let dir = fresh_dir("compare-twice");
    let (a, b) = (dir.join("a"), dir.join("b"));
    for d in [&a, &b] {
        c1m::report::write_run(d, &c1m::report::fixture::sample_run()).unwrap();
    }
    let arg = |p: &Path, n: &str| format!("{}={n}", p.display());
    // The same folder under another spelling is the same folder.
    let a_again = format!("{}/./=A", a.display());
    for args in [
        vec![arg(&a, "A"), arg(&a, "A"), arg(&b, "B"), arg(&b, "B")],
        vec![arg(&a, "A"), a_again, arg(&b, "B")],
        vec![arg(&a, "A"), arg(&a, "B")],
    ] {
        let (code, out, err) = compare(&args, &dir.join("out"));
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert_eq!(out, "", "{args:?}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("c1m compare: ") && err.contains(&*a.display().to_string()),
            "{err}"
        );
        assert!(err.contains("given twice"), "{err}");
    }
    let (code, _, err) = compare(&[arg(&a, "A"), arg(&b, "B")], &dir.join("out"));
    assert_eq!(code, 0, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A phase's latency as the lab records it: `count` pongs, percentiles from `p50` up.
fn pongs(count: u64, p50: u64) -> c1m::model::phase::PhaseLatency {
    c1m::model::phase::PhaseLatency {
        side: c1m::model::phase::AppSide::Client,
        histogram: "pong_us".into(),
        count,
        p50,
        p90: 2 * p50,
        p99: 3 * p50,
        p999: 4 * p50,
        max: 5 * p50,
    }
}

/// A fixed run (setup, idle, push, teardown) beside a phase list (setup, hold, push,
/// hold-2, teardown): per phase, the rows line up by kind, so the fixed run's idle is
/// the list's hold, for CPU and for latency per phase; the list's second hold has no
/// partner. Pongs through every held and push phase make the per-phase latency rows.
#[test]
fn phases_line_up_by_kind_so_idle_meets_hold() {
    use c1m::model::phase::{Phase, PhaseKind};
    let dir = fresh_dir("compare-phase-kinds");
    let mut fixed = c1m::report::fixture::sample_run();
    let kinds = [
        PhaseKind::Setup,
        PhaseKind::Hold,
        PhaseKind::Push,
        PhaseKind::Teardown,
    ];
    for (p, k) in fixed.phases.iter_mut().zip(kinds) {
        p.kind = Some(k);
    }
    assert_eq!(fixed.phases[1].name, "idle");
    fixed.phases[1].latency = vec![pongs(2_000, 1_000)];
    fixed.phases[2].latency = vec![pongs(600, 40_000)];
    let mut list = fixed.clone();
    list.config.phases = vec!["hold 1s".into(), "push 1".into(), "hold 1s".into()];
    let named = |p: &Phase, name: &str| Phase {
        name: name.into(),
        ..p.clone()
    };
    let (setup, idle, push, teardown) = (
        &fixed.phases[0],
        &fixed.phases[1],
        &fixed.phases[2],
        &fixed.phases[3],
    );
    let mut second = named(idle, "hold-2");
    second.latency = vec![pongs(2_000, 2_000)];
    list.phases = vec![
        setup.clone(),
        named(idle, "hold"),
        push.clone(),
        second,
        teardown.clone(),
    ];
    let (a, b) = (dir.join("fixed"), dir.join("list"));
    c1m::report::write_run(&a, &fixed).unwrap();
    c1m::report::write_run(&b, &list).unwrap();
    let args = [
        format!("{}=fixed", a.display()),
        format!("{}=list", b.display()),
        "--verbose".into(),
    ];
    let (code, text, err) = compare(&args, &dir.join("out"));
    assert_eq!(code, 0, "{err}");
    // Every per-phase row is named by kind: no `idle` row, and its CPU meets the hold's.
    assert!(!text.contains("\n  idle: "), "{text}");
    let hold = line(&text, "hold: server");
    let cells: Vec<&str> = hold
        .strip_prefix("hold: server ")
        .and_then(|r| r.strip_suffix(" same"))
        .unwrap_or_else(|| panic!("{hold}"))
        .split(' ')
        .collect();
    let (x, y) = cells.split_at(cells.len() / 2);
    assert_eq!(x, y, "{hold}");
    // Latency per phase: the hold's and the push's pongs side by side, the list's
    // second hold alone.
    let at = text
        .find("\nLatency per phase: client pong")
        .unwrap_or_else(|| panic!("no per-phase pong rows\n{text}"));
    let pong = &text[at..];
    assert_eq!(line(pong, "hold: count"), "hold: count 2,000 2,000 same");
    assert_eq!(
        line(pong, "hold: median"),
        "hold: median 1.000 ms 1.000 ms same"
    );
    assert_eq!(
        line(pong, "push: 99%"),
        "push: 99% 120.000 ms 120.000 ms same"
    );
    assert!(
        line(pong, "hold-2: median").starts_with("hold-2: median – 2.000 ms"),
        "{pong}"
    );
    // The list's own phase joins its group's rows: one title each.
    for group in ["\nLatency per phase: client pong", "\nCPU time per phase"] {
        assert_eq!(text.matches(group).count(), 1, "{group}\n{text}");
    }
    let csv = std::fs::read_to_string(dir.join("out").join("compare.csv")).unwrap();
    assert!(csv.contains(",hold: server,"), "{csv}");
    assert!(!csv.contains(",idle: server,"), "{csv}");
    let _ = std::fs::remove_dir_all(&dir);
}
