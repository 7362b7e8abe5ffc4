//! The live view in a real terminal: tmux (160x50, a private server) runs this test binary
//! as a helper process that starts the `Tui` on the demo state; `capture-pane` reads the
//! screen; `send-keys q` quits. Checks: both columns with the right numbers, a resize
//! redraws at the new size, `?` toggles the help, quitting leaves the alternate screen
//! and raw mode (`stty` shows `icanon` again), and a panic restores the terminal *before*
//! its message is printed, so the message stays readable on the normal screen.
//!
//! Every wait is for the whole screen the view must show, rendered by the same code at the
//! pane's size (`text_screen_view`), never for its first line: the terminal draws a frame
//! in pieces, and a capture can land between them (a half-drawn help box failed 2 runs
//! of 4 when the wait was for the box's title alone).
//!
//! Needs tmux: `cargo xtask test` installs it; without it these tests fail and say so.
#![allow(clippy::unwrap_used)] // panics are the assertions in tests

use std::{
    process::{Command, Output},
    time::{Duration, Instant},
};

use c1m::view::{
    demo,
    live_state::LiveState,
    tui::{terminal::Tui, text_screen_view},
};

/// Set in the helper's environment: "run" (quit on q) or "panic" (panic on q).
const HELPER_ENV: &str = "C1M_LIVE_VIEW_HELPER";
const PANIC_MESSAGE: &str = "live view helper panics on purpose";
const WAIT: Duration = Duration::from_secs(30);

/// The state the helper draws: the demo, or with "stale" the demo whose kernel figures
/// are 1.5 s (counts) and 1.9 s (memory) old.
fn helper_state(mode: &str) -> LiveState {
    let mut state = demo::state();
    if mode == "stale" {
        if let Some(k) = state.kernel.as_mut() {
            k.unix_ms -= 1_500;
            k.walk.ended_unix_ms -= 1_500;
        }
        demo::refigure(&mut state);
    }
    state
}

/// Not a test of its own: the program tmux runs (does nothing unless [`HELPER_ENV`] is
/// set). Draws four times a second, like the lab's loop, for at most a minute.
#[test]
fn tmux_helper_process() {
    let Ok(mode) = std::env::var(HELPER_ENV) else {
        return;
    };
    let state = helper_state(&mode);
    let mut tui = Tui::start().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        tui.draw(&state).unwrap();
        if tui.poll_quit(Duration::from_millis(250)).unwrap() {
            break;
        }
    }
    if mode == "panic" {
        // Leave restoring to the panic hook alone: no Drop runs for a forgotten Tui.
        std::mem::forget(tui);
        panic!("{PANIC_MESSAGE}");
    }
}

/// A private tmux server, killed on drop.
struct Tmux {
    socket: String,
    /// The helper's mode, so a wait renders the state the helper draws.
    mode: String,
}

impl Tmux {
    fn new(name: &str) -> Tmux {
        match Command::new("tmux").arg("-V").output() {
            Ok(o) if o.status.success() => {}
            _ => panic!(
                "tmux is not installed: run `cargo xtask test`, which installs it \
                 (or `apt-get install -y tmux`)"
            ),
        }
        Tmux {
            socket: format!("c1m-live-view-{}-{name}", std::process::id()),
            mode: String::new(),
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        let out = Command::new("tmux")
            .args(["-f", "/dev/null", "-L", &self.socket])
            .args(args)
            .env_remove("TMUX")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn screen(&self) -> String {
        String::from_utf8(self.run(&["capture-pane", "-p", "-t", "lv"]).stdout).unwrap()
    }

    /// The pane's size in cells (the status line is not part of it).
    fn pane_size(&self) -> (u16, u16) {
        let out = self.run(&[
            "display-message",
            "-p",
            "-t",
            "lv",
            "#{pane_width} #{pane_height}",
        ]);
        let text = String::from_utf8_lossy(&out.stdout);
        let mut it = text.split_whitespace().map(|n| n.parse::<u16>().unwrap());
        (it.next().unwrap(), it.next().unwrap())
    }

    /// Waits until the pane shows exactly what the view draws for the demo state at the
    /// pane's current size (help overlay on or off); returns the screen.
    fn wait_for_view(&self, what: &str, help: bool) -> String {
        let start = Instant::now();
        loop {
            let (w, h) = self.pane_size();
            let want =
                normalized(&text_screen_view(&helper_state(&self.mode), w, h, help).join("\n"));
            let s = self.screen();
            if normalized(&s) == want {
                return s;
            }
            assert!(
                start.elapsed() < WAIT,
                "timed out waiting for {what} at {w}x{h}; screen:\n{s}\nwanted:\n{}",
                want.join("\n")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn alternate_on(&self) -> bool {
        let out = self.run(&["display-message", "-p", "-t", "lv", "#{alternate_on}"]);
        String::from_utf8_lossy(&out.stdout).trim() == "1"
    }

    /// Waits until the screen satisfies `ok`; returns it, or fails with the last screen.
    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            assert!(
                start.elapsed() < WAIT,
                "timed out waiting for {what}; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Starts the helper in a 160x50 pane; after it exits, the pane prints the terminal's
    /// `icanon` flag (restored: `icanon`; left raw: `-icanon`) and a marker.
    fn start_helper(&mut self, mode: &str) {
        self.start_helper_at(mode, 160, 50);
    }

    /// [`Tmux::start_helper`] in a `w`×`h` pane.
    fn start_helper_at(&mut self, mode: &str, w: u16, h: u16) {
        self.mode = mode.to_owned();
        let (w, h) = (w.to_string(), h.to_string());
        let exe = std::env::current_exe().unwrap();
        let script = format!(
            "{HELPER_ENV}={mode} '{}' --exact live_view_tmux::tmux_helper_process --nocapture --test-threads=1; \
             stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e -icanon | sed 's/^/TTY:/'; \
             echo HELPER-DONE; sleep 60",
            exe.display()
        );
        self.run(&["new-session", "-d", "-x", &w, "-y", &h, "-s", "lv", &script]);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

/// A screen's rows with runs of blanks as one space and no blank rows at the end: a
/// terminal and the test backend may differ in the padding cell after a wide symbol.
fn normalized(screen: &str) -> Vec<String> {
    let mut rows: Vec<String> = screen
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    while rows.last().is_some_and(String::is_empty) {
        rows.pop();
    }
    rows
}

/// The first line holding `label`, split at column `mid`.
fn halves(screen: &str, label: &str, mid: usize) -> (String, String) {
    let line = screen
        .lines()
        .find(|l| l.contains(label))
        .unwrap_or_else(|| panic!("no {label:?} on screen:\n{screen}"));
    let left: String = line.chars().take(mid).collect();
    let right: String = line.chars().skip(mid).collect();
    (left, right)
}

#[test]
fn live_view_in_tmux_shows_both_columns_and_restores_the_terminal() {
    let mut tmux = Tmux::new("run");
    tmux.start_helper("run");
    let screen = tmux.wait_for_view("the live view", false);
    assert!(tmux.alternate_on(), "the view runs on the alternate screen");
    let (l, r) = halves(&screen, "kernel ESTABLISHED", 80);
    assert!(l.contains("600,407") && r.contains("600,349"), "{screen}");
    let (l, r) = halves(&screen, "app open", 80);
    assert!(l.contains("600,000") && r.contains("600,300"), "{screen}");
    let (l, r) = halves(&screen, "accept queue / limit", 80);
    assert!(
        l.contains("412 / 40,960") && r.contains("5 (refused 3, timed_out 2)"),
        "{screen}"
    );
    assert!(
        screen.contains("412 established in the kernel, not yet accepted"),
        "{screen}"
    );
    assert!(
        screen.contains("unavailable: synack_retransmits"),
        "{screen}"
    );

    // A resize is drawn at the new size.
    tmux.run(&["resize-window", "-t", "lv", "-x", "100", "-y", "40"]);
    let screen = tmux.wait_for_view("the view at 100 columns", false);
    assert!(tmux.pane_size().0 == 100, "{screen}");
    assert!(screen.lines().all(|l| l.chars().count() <= 100), "{screen}");
    let (l, r) = halves(&screen, "kernel ESTABLISHED", 50);
    assert!(l.contains("600,407") && r.contains("600,349"), "{screen}");

    // `?` shows the help over the view and keeps it across redraws; `?` again hides it.
    tmux.run(&["send-keys", "-t", "lv", "?"]);
    let screen = tmux.wait_for_view("the whole help box", true);
    assert!(screen.contains("help: ? closes"), "{screen}");
    assert!(
        screen.contains("stale: the source is older than 1 s"),
        "{screen}"
    );
    tmux.run(&["send-keys", "-t", "lv", "?"]);
    let screen = tmux.wait_for_view("the help to close", false);
    assert!(!screen.contains("help: ? closes"), "{screen}");

    tmux.run(&["send-keys", "-t", "lv", "q"]);
    let screen = tmux.wait_for("the helper to exit", |s| s.contains("HELPER-DONE"));
    assert!(!tmux.alternate_on(), "left the alternate screen:\n{screen}");
    assert!(screen.contains("TTY:icanon"), "raw mode left on:\n{screen}");
    assert!(!screen.contains("kernel ESTABLISHED"), "{screen}");
    assert!(
        screen.contains("test live_view_tmux::tmux_helper_process ... ok"),
        "{screen}"
    );
}

#[test]
fn a_panic_restores_the_terminal_before_its_message() {
    let mut tmux = Tmux::new("panic");
    tmux.start_helper("panic");
    tmux.wait_for_view("the live view", false);
    tmux.run(&["send-keys", "-t", "lv", "q"]);
    let screen = tmux.wait_for("the helper to exit", |s| s.contains("HELPER-DONE"));
    assert!(!tmux.alternate_on(), "left the alternate screen:\n{screen}");
    assert!(screen.contains("TTY:icanon"), "raw mode left on:\n{screen}");
    // Printed after the restore, so it is on the normal screen, one line, not staircased.
    let line = screen
        .lines()
        .find(|l| l.contains(PANIC_MESSAGE))
        .unwrap_or_else(|| panic!("panic message lost:\n{screen}"));
    assert_eq!(line.trim_end(), PANIC_MESSAGE, "{screen}");
}

/// Issue 32: at 80×24 the header was cut and named a source by its internal name
/// (`kernel_walk figures 1.5 s old`); at 200×50 the panels stretched, values far from
/// their labels, and the setup chart drew 2 of 196 columns. In a real terminal: the
/// header fits whole, in words, and at 200×50 each value is within a few columns of its
/// label and the chart spans its panel.
#[test]
fn the_header_fits_80x24_and_wide_panels_keep_values_by_their_labels() {
    let mut tmux = Tmux::new("sizes");
    tmux.start_helper_at("stale", 80, 24);
    let screen = tmux.wait_for_view("the live view at 80x24", false);
    assert_eq!(tmux.pane_size(), (80, 24), "{screen}");
    let header = screen.lines().next().unwrap().trim_end();
    assert!(header.chars().count() <= 80, "{screen}");
    for piece in [
        "c1m run",
        "phase setup",
        "elapsed 49.0 s",
        "late: kernel 1.5 s, kernel memory 1.9 s",
    ] {
        assert!(header.contains(piece), "{piece:?} not whole in {header:?}");
    }
    assert!(
        !screen.contains("kernel_walk") && !header.contains("figures"),
        "an internal name on screen:\n{screen}"
    );

    tmux.run(&["resize-window", "-t", "lv", "-x", "200", "-y", "50"]);
    let screen = tmux.wait_for_view("the view at 200x50", false);
    assert_eq!(tmux.pane_size(), (200, 50), "{screen}");
    // Each value starts within GAP columns of its label's end, in its own panel.
    const GAP: usize = 14;
    let mut checked = 0;
    for line in screen
        .lines()
        .filter(|l| l.starts_with('│') && l.contains("││"))
    {
        for panel in line.split('│').filter(|p| !p.trim().is_empty()) {
            let Some(label_end) = [
                "app open",
                "kernel ESTABLISHED",
                "kernel per socket",
                "user per connection",
                "resident memory",
                "connect p50",
                "connect p99",
            ]
            .iter()
            .find_map(|l| panel.find(l).map(|at| at + l.len())) else {
                continue;
            };
            let rest = &panel[label_end..];
            let gap = rest.chars().take_while(|c| *c == ' ').count();
            assert!(
                gap <= GAP && gap < rest.chars().count(),
                "value {gap} columns from its label in {panel:?}:\n{screen}"
            );
            checked += 1;
        }
    }
    assert_eq!(
        checked, 12,
        "5 rows in each column, 2 in latency:\n{screen}"
    );
    // The setup chart's bottom row is bars from border to border.
    let lines: Vec<&str> = screen.lines().collect();
    let top = lines
        .iter()
        .position(|l| l.contains(" setup rate, connections/s"))
        .unwrap();
    let bottom = top
        + lines[top..]
            .iter()
            .position(|l| l.starts_with('└'))
            .unwrap();
    let row: Vec<char> = lines[bottom - 1].chars().collect();
    assert_eq!(row.len(), 200, "{screen}");
    assert!(
        row[1..199].iter().all(|c| *c == '█'),
        "the chart does not span its panel:\n{screen}"
    );

    tmux.run(&["send-keys", "-t", "lv", "q"]);
    tmux.wait_for("the helper to exit", |s| s.contains("HELPER-DONE"));
}
