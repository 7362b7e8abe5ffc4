//! The real terminal: raw mode and the alternate screen, taken only in the foreground and
//! restored on drop and before a panic message; the keys the view answers.

use std::{
    io::{self, IsTerminal, Stdout},
    sync::{
        Once,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use ratatui::{
    Terminal,
    backend::CrosstermBackend,
    crossterm::{
        cursor::{Hide, Show},
        event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers},
        execute,
        terminal::{EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode},
    },
};

use super::render_view;
use crate::view::live_state::LiveState;

/// Whether raw mode and the alternate screen are on (so the panic hook knows to undo them).
static ACTIVE: AtomicBool = AtomicBool::new(false);

static PANIC_HOOK: Once = Once::new();

/// The live view on the real terminal. Dropping it (or a panic anywhere) restores the
/// terminal. One at a time per process.
pub struct Tui {
    terminal: Terminal<CrosstermBackend<Stdout>>,
    /// Whether the help overlay is on (`?` toggles it).
    help: bool,
    /// The state last drawn, to redraw at once when a key changes the view (boxed: a
    /// `LiveState` is large and `Tui` sits in an enum beside small variants).
    last: Option<Box<LiveState>>,
}

/// Why this process may not take the terminal, if it may not: raw mode and the alternate
/// screen are `tcsetattr`s, and one from outside the terminal's foreground process group
/// (`c1m run … &`, or under `timeout`, which runs its command in a group of its own)
/// stops the whole process with SIGTTOU, a stop that SIGTERM does not end.
fn not_in_foreground() -> Option<&'static str> {
    let me = rustix::process::getpgrp();
    let stdin = io::stdin();
    let stdout = io::stdout();
    let owned =
        |fd: std::os::fd::BorrowedFd<'_>| rustix::termios::tcgetpgrp(fd).is_ok_and(|g| g == me);
    use std::os::fd::AsFd;
    let stdout_ok = owned(stdout.as_fd());
    let stdin_ok = !stdin.is_terminal() || owned(stdin.as_fd());
    (!(stdout_ok && stdin_ok))
        .then_some("not in the terminal's foreground process group (started in the background?)")
}

impl Tui {
    /// Enters raw mode and the alternate screen. Fails when stdout is not a terminal (use
    /// [`plain::line`](crate::view::plain::line) then), when this process is not in the terminal's
    /// foreground group, or when a `Tui` is already running.
    pub fn start() -> io::Result<Tui> {
        if !io::stdout().is_terminal() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the live view needs a terminal on stdout (use the plain lines instead)",
            ));
        }
        if let Some(why) = not_in_foreground() {
            return Err(io::Error::new(io::ErrorKind::Unsupported, why));
        }
        install_panic_hook();
        if ACTIVE.swap(true, Ordering::SeqCst) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "the live view is already running",
            ));
        }
        let started = (|| {
            enable_raw_mode()?;
            execute!(io::stdout(), EnterAlternateScreen, Hide)?;
            let mut terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
            terminal.clear()?;
            Ok(Tui {
                terminal,
                help: false,
                last: None,
            })
        })();
        if started.is_err() {
            restore_terminal();
        }
        started
    }

    /// Draws one frame (only the cells that changed reach the terminal).
    pub fn draw(&mut self, state: &LiveState) -> io::Result<()> {
        let help = self.help;
        self.terminal
            .draw(|frame| render_view(frame, state, help))?;
        self.last = Some(Box::new(state.clone()));
        Ok(())
    }

    /// Waits up to `timeout` for keys and acts on them: `true` for quit (q or Ctrl-C; raw
    /// mode turns Ctrl-C into a key, not a SIGINT); `?` toggles the help and redraws.
    /// Returns early, `false`, when the terminal was resized, so the caller redraws at
    /// once; use it as the loop's pause.
    pub fn poll_quit(&mut self, timeout: Duration) -> io::Result<bool> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if !event::poll(left)? {
                return Ok(false);
            }
            match event::read()? {
                Event::Key(k) => match key_action(&k) {
                    Some(Action::Quit) => return Ok(true),
                    Some(Action::ToggleHelp) => {
                        self.help = !self.help;
                        if let Some(state) = self.last.take() {
                            self.draw(&state)?;
                        }
                    }
                    None => {}
                },
                Event::Resize(..) => {
                    self.terminal.autoresize()?;
                    return Ok(false);
                }
                _ => {}
            }
            if left.is_zero() {
                return Ok(false);
            }
        }
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        restore_terminal();
    }
}

/// What a key asks of the live view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// q, Q or Ctrl-C.
    Quit,
    /// `?`: the help overlay on or off.
    ToggleHelp,
}

/// The one place keys are read, on press (not on release, where terminals report it).
pub(crate) fn key_action(k: &KeyEvent) -> Option<Action> {
    if k.kind == KeyEventKind::Release {
        return None;
    }
    match k.code {
        KeyCode::Char('q' | 'Q') => Some(Action::Quit),
        KeyCode::Char('c' | 'C') if k.modifiers.contains(KeyModifiers::CONTROL) => {
            Some(Action::Quit)
        }
        KeyCode::Char('?') => Some(Action::ToggleHelp),
        _ => None,
    }
}

/// Leaves the alternate screen and raw mode, once, whoever calls first (drop or panic).
fn restore_terminal() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        // Best effort: the terminal may be gone; nothing better to do with an error here.
        let _ = disable_raw_mode();
        let _ = execute!(io::stdout(), LeaveAlternateScreen, Show);
    }
}

/// Restores the terminal before the previous hook prints the panic, so the message lands
/// on the normal screen instead of vanishing with the alternate one.
fn install_panic_hook() {
    PANIC_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore_terminal();
            previous(info);
        }));
    });
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // panics are the assertions in tests
mod tests {
    use ratatui::crossterm::event::KeyEventState;

    use super::*;

    #[test]
    fn keys() {
        let key = |code, modifiers, kind| KeyEvent {
            code,
            modifiers,
            kind,
            state: KeyEventState::NONE,
        };
        let press = KeyEventKind::Press;
        let none = KeyModifiers::NONE;
        let quit = Some(Action::Quit);
        assert_eq!(key_action(&key(KeyCode::Char('q'), none, press)), quit);
        assert_eq!(
            key_action(&key(KeyCode::Char('Q'), KeyModifiers::SHIFT, press)),
            quit
        );
        assert_eq!(
            key_action(&key(KeyCode::Char('c'), KeyModifiers::CONTROL, press)),
            quit
        );
        assert_eq!(
            key_action(&key(KeyCode::Char('?'), KeyModifiers::SHIFT, press)),
            Some(Action::ToggleHelp)
        );
        assert_eq!(key_action(&key(KeyCode::Char('c'), none, press)), None);
        assert_eq!(key_action(&key(KeyCode::Char('x'), none, press)), None);
        assert_eq!(
            key_action(&key(KeyCode::Char('q'), none, KeyEventKind::Release)),
            None
        );
    }
}
