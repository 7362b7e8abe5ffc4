//! State files as a hostile local user plants them (issue 30, cases 1, 2 and 13): root
//! trusts only its own records under /run/c1m, a user only a state directory that is
//! theirs and not writable by others, and `doctor --restore` says what it removed.
//! Every case runs the real second uid (65534, by setpriv), as a hostile user would.

use crate::lab_util;

use std::{
    os::unix::fs::{DirBuilderExt, PermissionsExt, chown},
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use lab_util::{bounded, root_or_skip};

const NOBODY: u32 = 65534;

/// Removes what a test made, also when it fails.
struct Cleanup(Vec<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_dir_all(p);
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A process of uid 65534 (`sleep`), killed when dropped.
struct NobodySleep(Child);

impl NobodySleep {
    fn start() -> Self {
        let child = Command::new("setpriv")
            .args(setpriv_args())
            .args(["sleep", "120"])
            .stdin(Stdio::null())
            .spawn()
            .expect("setpriv (util-linux)");
        let pid = child.id();
        // The start time is the process's (exec keeps it); the uid is set by setpriv
        // before it execs sleep.
        let until = Instant::now() + Duration::from_secs(10);
        while uid_of(pid) != Some(NOBODY) || !comm_is(pid, "sleep") {
            assert!(Instant::now() < until, "setpriv did not become sleep");
            std::thread::sleep(Duration::from_millis(10));
        }
        NobodySleep(child)
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    fn start_time(&self) -> u64 {
        c1m::procstat::start_time(self.pid()).expect("sleep's start time")
    }

    /// Whether it still runs (reaped here once it ended).
    fn running(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(None))
    }

    /// Waits (bounded) for it to end.
    fn ended_within(&mut self, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if !self.running() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for NobodySleep {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn uid_of(pid: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn comm_is(pid: u32, name: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == name)
}

fn setpriv_args() -> [&'static str; 5] {
    [
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
        "--",
    ]
}

/// `c1m ARGS` as uid 65534, with `tmpdir` as its TMPDIR and no XDG_RUNTIME_DIR, so its
/// state directory is `tmpdir/c1m-65534`.
fn c1m_as_nobody(tmpdir: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new("setpriv");
    cmd.args(setpriv_args())
        .arg(env!("CARGO_BIN_EXE_c1m"))
        .args(args)
        .env("TMPDIR", tmpdir)
        .env_remove("XDG_RUNTIME_DIR")
        .stdin(Stdio::null());
    bounded(cmd, Duration::from_secs(60))
}

/// A pid no process can have: above the kernel's PID_MAX_LIMIT (4,194,304).
fn impossible_pid(salt: u32) -> u32 {
    4_194_305 + salt % 100_000
}

/// A folder under /tmp that uid 65534 may enter (and, `owner` given, owns).
fn test_dir(name: &str, mode: u32, owner: Option<u32>) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("c1m-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("test dir");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).expect("chmod");
    if let Some(uid) = owner {
        chown(&dir, Some(uid), Some(uid)).expect("chown");
    }
    dir
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A journal of a lab that is gone, naming `children` (pid, start time, uid).
fn journal_json(lab_pid: u32, folder: &Path, children: &[(u32, u64, u32)]) -> String {
    let children: Vec<serde_json::Value> = children
        .iter()
        .map(|(pid, start, uid)| {
            serde_json::json!({"role": "server", "pid": pid, "start_time": start, "uid": uid})
        })
        .collect();
    serde_json::json!({
        "lab": {"pid": lab_pid, "start_time": 1, "uid": NOBODY},
        "run_folder": folder,
        "command_line": "c1m run",
        "netns": 0,
        "sysctls": [],
        "children": children,
        "cgroups": [],
    })
    .to_string()
}

/// Case 1: a restore record another user planted in /tmp names a file; root's run and
/// `doctor --restore` must not write it (before: "c1m: restored /tmp/proof = planted").
#[test]
fn a_record_planted_in_tmp_makes_root_write_nothing() {
    if !root_or_skip("a_record_planted_in_tmp_makes_root_write_nothing") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let me = std::process::id();
    let proof = PathBuf::from(format!("/tmp/c1m-test-proof-{me}"));
    let record = PathBuf::from(format!("/tmp/c1m-tuned-{}.json", impossible_pid(me)));
    let out = std::env::temp_dir().join(format!("c1m-test-planted-record-{me}"));
    let _cleanup = Cleanup(vec![proof.clone(), record.clone(), out.clone()]);
    let _ = std::fs::remove_file(&proof);
    let planted = format!(
        r#"{{"netns":null,"changed":[{{"name":"{}","old":"planted","new":"x"}}],"held":[]}}"#,
        proof.display()
    );
    // Planted by uid 65534 itself, as the issue reproduced it.
    let wrote = Command::new("setpriv")
        .args(setpriv_args())
        .args(["sh", "-c", "printf '%s' \"$1\" > \"$2\"", "sh"])
        .arg(&planted)
        .arg(&record)
        .status()
        .expect("setpriv sh");
    assert!(wrote.success(), "nobody plants the record");

    let mut run = Command::new(env!("CARGO_BIN_EXE_c1m"));
    run.args(["run", "-n", "10", "--mode", "hold", "--idle", "0s"])
        .args(["--no-observer", "--plain", "--ports", "21720", "--out"])
        .arg(&out)
        .env_remove("TMPDIR");
    let run = bounded(run, Duration::from_secs(120));
    let (stdout, stderr) = text(&run);
    assert!(
        !proof.exists(),
        "root's run wrote the file a planted record named:\n{stderr}"
    );
    assert_eq!(run.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(&record.display().to_string()) && stderr.contains("not read"),
        "the run says it ignored the planted record:\n{stderr}"
    );
    assert!(record.exists(), "the record is not root's to consume");

    let mut restore = Command::new(env!("CARGO_BIN_EXE_c1m"));
    restore.args(["doctor", "--restore"]).env_remove("TMPDIR");
    let restore = bounded(restore, Duration::from_secs(60));
    let (stdout, stderr) = text(&restore);
    assert!(
        !proof.exists(),
        "doctor --restore wrote the file a planted record named:\n{stdout}\n{stderr}"
    );
    assert!(!stdout.contains("restored /tmp"), "{stdout}");
    assert!(
        stderr.contains(&record.display().to_string()),
        "doctor --restore says it ignored the planted record:\n{stderr}"
    );
}

/// Case 2: another user pre-created the state directory (mode 0777) with a journal
/// naming one of uid 65534's processes; 65534's `doctor --restore` must refuse the
/// directory and kill nothing (before: "ended server pid …", its own sleep killed).
#[test]
fn a_planted_state_dir_is_refused_and_kills_nothing() {
    if !root_or_skip("a_planted_state_dir_is_refused_and_kills_nothing") {
        return;
    }
    let me = std::process::id();
    let tmp = test_dir("planted-dir", 0o755, None);
    let _cleanup = Cleanup(vec![tmp.clone()]);
    let state = tmp.join(format!("c1m-{NOBODY}"));
    let labs = state.join("labs");
    std::fs::create_dir_all(&labs).expect("planted dir");
    for d in [&state, &labs] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    }
    let mut victim = NobodySleep::start();
    let journal = journal_json(
        impossible_pid(me),
        &tmp.join("run"),
        &[(victim.pid(), victim.start_time(), NOBODY)],
    );
    std::fs::write(labs.join(format!("{}.json", impossible_pid(me))), journal).expect("journal");

    let out = c1m_as_nobody(&tmp, &["doctor", "--restore"]);
    let (stdout, stderr) = text(&out);
    assert!(
        victim.running(),
        "a journal in another user's directory killed pid {}:\n{stdout}\n{stderr}",
        victim.pid()
    );
    assert!(!stdout.contains("ended"), "{stdout}");
    assert_eq!(out.status.code(), Some(1), "refused:\n{stdout}\n{stderr}");
    let line = stderr.trim();
    assert_eq!(line.lines().count(), 1, "one line:\n{stderr}");
    assert!(
        line.contains(&state.display().to_string())
            && line.contains("uid 0")
            && line.contains(&format!("rm -r {}", state.display())),
        "names the directory, its owner and the fix:\n{stderr}"
    );
}

/// Case 1's other half: as a user, `doctor --tune` cannot write a sysctl; it must fail
/// in one line (before: "Permission denied (os error 13) (needs root): Permission denied
/// (os error 13)", case 13) and leave no record claiming the change.
#[test]
fn a_non_root_tune_that_fails_leaves_no_record() {
    if !root_or_skip("a_non_root_tune_that_fails_leaves_no_record") {
        return;
    }
    // Defaults of a fresh namespace: -n 100,000,000 needs more TIME_WAIT buckets.
    c1m::netns::enter_private().expect("private netns");
    let tmp = test_dir("nonroot-tune", 0o755, Some(NOBODY));
    let _cleanup = Cleanup(vec![tmp.clone()]);
    let out = c1m_as_nobody(
        &tmp,
        &["doctor", "-n", "100000000", "--no-observer", "--tune"],
    );
    let (stdout, stderr) = text(&out);
    let records = files_named(&tmp, "tuned");
    let claims: Vec<String> = records
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap_or_default())
        .filter(|t| t.contains("\"new\""))
        .collect();
    assert!(
        claims.is_empty(),
        "a failed tune left a record claiming a change: {records:?}\n{claims:?}\n{stderr}"
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let line = stderr.trim();
    assert_eq!(line.lines().count(), 1, "one line:\n{stderr}");
    assert_eq!(line.matches("os error 13").count(), 1, "said once: {line}");
    assert!(line.contains("root"), "names the fix: {line}");
}

/// Case 13: `doctor --restore` names every journal and process it removed, one line
/// each, and says "nothing to restore" when so.
#[test]
fn doctor_restore_names_what_it_removed() {
    if !root_or_skip("doctor_restore_names_what_it_removed") {
        return;
    }
    let me = std::process::id();
    let tmp = test_dir("restore-says", 0o755, Some(NOBODY));
    let _cleanup = Cleanup(vec![tmp.clone()]);
    let state = tmp.join(format!("c1m-{NOBODY}"));
    let labs = state.join("labs");
    std::fs::create_dir_all(&labs).expect("state dir");
    for d in [&state, &labs] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        chown(d, Some(NOBODY), Some(NOBODY)).expect("chown");
    }
    let mut child = NobodySleep::start();
    // A pid the kernel since gave another process (the start time differs): spared.
    let reused = (
        me,
        c1m::procstat::start_time(me).expect("own start") + 1,
        NOBODY,
    );
    let lab = impossible_pid(me);
    let journal = labs.join(format!("{lab}.json"));
    std::fs::write(
        &journal,
        journal_json(
            lab,
            &tmp.join("run"),
            &[(child.pid(), child.start_time(), NOBODY), reused],
        ),
    )
    .expect("journal");
    std::fs::set_permissions(&journal, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    chown(&journal, Some(NOBODY), Some(NOBODY)).expect("chown");

    let out = c1m_as_nobody(&tmp, &["doctor", "--restore"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(child.ended_within(Duration::from_secs(10)), "{stdout}");
    assert!(
        stdout.contains(&format!("ended server pid {}", child.pid())),
        "{stdout}"
    );
    assert!(!stdout.contains(&format!("pid {me} ")), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("removed") && l.contains(&journal.display().to_string())),
        "names the journal it removed:\n{stdout}"
    );
    assert!(!journal.exists());
    assert!(!stdout.contains("nothing to restore"), "{stdout}");

    let again = c1m_as_nobody(&tmp, &["doctor", "--restore"]);
    let (stdout, stderr) = text(&again);
    assert_eq!(again.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(stdout.trim(), "nothing to restore", "{stderr}");
}

/// Every file under `dir` whose name contains `part`.
fn files_named(dir: &Path, part: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if e.file_name().to_string_lossy().contains(part) {
                out.push(p);
            }
        }
    }
    out
}

/// Deletes a network namespace this test made, also when it fails.
struct OwnNetns(String);

impl Drop for OwnNetns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.0])
            .status();
    }
}

/// A journal of a killed `c1m run --hosts` lab (uid 0) naming `namespace` and a link of
/// the same prefix, and `child` (pid, start time, uid) as its server host.
fn hosts_journal_json(
    lab_pid: u32,
    folder: &Path,
    namespace: &str,
    child: (u32, u64, u32),
) -> String {
    let mut j: serde_json::Value =
        serde_json::from_str(&journal_json(lab_pid, folder, &[child])).expect("json");
    j["lab"]["uid"] = 0.into();
    j["namespaces"] = serde_json::json!([namespace]);
    j["links"] = serde_json::json!([namespace.replace("-srv", "-s")]);
    j.to_string()
}

/// Issue 33: root's sweep of killed `--hosts` labs reads only root's own journals in
/// /run/c1m/labs (never a run folder's `journal.json`, which another user may write),
/// deletes only namespaces and links named with the journal's own lab pid, and signals
/// only a process whose pid, start time and owner are the journal's. Three journals
/// naming a real namespace and a real process of uid 65534 delete and kill nothing.
#[test]
fn a_hosts_journal_root_did_not_write_deletes_and_kills_nothing() {
    if !root_or_skip("a_hosts_journal_root_did_not_write_deletes_and_kills_nothing") {
        return;
    }
    let me = std::process::id();
    let (fake, other) = (impossible_pid(me), impossible_pid(me + 1));
    // Named as `c1m run --hosts` of lab `fake` names its server host's namespace.
    let ns = format!("c1mh{fake}-srv");
    let made = Command::new("ip")
        .args(["netns", "add", &ns])
        .status()
        .expect("ip");
    assert!(made.success(), "ip netns add {ns}");
    let _ns = OwnNetns(ns.clone());
    let labs = Path::new("/run/c1m/labs");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(labs)
        .expect("/run/c1m/labs");
    let tmp = test_dir("hosts-journal", 0o777, None);
    let nobodys = labs.join(format!("{fake}.json"));
    let roots = labs.join(format!("{other}.json"));
    let _cleanup = Cleanup(vec![tmp.clone(), nobodys.clone(), roots.clone()]);
    let mut victim = NobodySleep::start();
    let child = (victim.pid(), victim.start_time(), NOBODY);

    // 1. In a run folder another uid can write: never read by the sweep.
    let run = tmp.join("run");
    std::fs::create_dir_all(&run).expect("run folder");
    let in_run = run.join("journal.json");
    std::fs::write(&in_run, hosts_journal_json(fake, &run, &ns, child)).expect("journal");
    chown(&in_run, Some(NOBODY), Some(NOBODY)).expect("chown");
    // 2. In root's labs directory, but the file is 65534's.
    std::fs::write(&nobodys, hosts_journal_json(fake, &run, &ns, child)).expect("journal");
    std::fs::set_permissions(&nobodys, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    chown(&nobodys, Some(NOBODY), Some(NOBODY)).expect("chown");
    // 3. Root's own file, naming another lab's namespace, and 65534's process as root's.
    std::fs::write(
        &roots,
        hosts_journal_json(other, &run, &ns, (child.0, child.1, 0)),
    )
    .expect("journal");
    std::fs::set_permissions(&roots, std::fs::Permissions::from_mode(0o600)).expect("chmod");

    let mut restore = Command::new(env!("CARGO_BIN_EXE_c1m"));
    restore.args(["doctor", "--restore"]).stdin(Stdio::null());
    let out = bounded(restore, Duration::from_secs(120));
    let (stdout, stderr) = text(&out);
    assert!(
        victim.running(),
        "a journal root did not write killed pid {}:\n{stdout}\n{stderr}",
        victim.pid()
    );
    assert!(
        Path::new("/run/netns").join(&ns).exists(),
        "{ns} deleted:\n{stdout}\n{stderr}"
    );
    assert!(
        !stdout.contains(&format!("ended server pid {}", victim.pid())),
        "{stdout}"
    );
    assert!(!stdout.contains("removed network namespace"), "{stdout}");
    assert_eq!(
        out.status.code(),
        Some(1),
        "something is left:\n{stdout}\n{stderr}"
    );
    // 2: refused as 65534's file, in one line naming it.
    assert!(
        stderr.lines().any(|l| l.contains("not read")
            && l.contains(&nobodys.display().to_string())
            && l.contains("owned by uid 65534")),
        "{stderr}"
    );
    // 3: its names and its process refused, each said.
    for (kind, name) in [
        ("network namespace", ns.clone()),
        ("link", ns.replace("-srv", "-s")),
    ] {
        assert!(
            stderr.contains(&format!(
                "left {kind} {name}: not one c1m makes for lab pid {other}"
            )),
            "{kind} {name}:\n{stderr}"
        );
    }
    assert!(
        stdout.contains(&format!(
            "left server pid {} running: it runs as uid {NOBODY}, its journal says uid 0",
            victim.pid()
        )),
        "{stdout}"
    );
    // 1: never read, so never named, never consumed.
    assert!(in_run.exists());
    assert!(!format!("{stdout}{stderr}").contains(&in_run.display().to_string()));
}
