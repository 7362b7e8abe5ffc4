//! Small process helpers shared by the xtask commands.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};

/// The workspace root (xtask lives one level below it).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

pub fn run(cmd: &mut Command) -> Result<()> {
    let shown = format!("{cmd:?}");
    let status = cmd
        .status()
        .with_context(|| format!("could not start {shown}"))?;
    if !status.success() {
        bail!("{shown} failed: {status}");
    }
    Ok(())
}

pub fn cargo(args: &[&str]) -> Result<()> {
    run(Command::new(cargo_bin()).args(args).current_dir(root()))
}

/// The cargo profile the tests and the `c1m` binary they start are built in (the
/// workspace's Cargo.toml says why it is not `release`).
pub const TEST_PROFILE: &str = "suite";

pub fn cargo_bin() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions. Avoids a libc dependency for one call.
    unsafe extern "C" {
        fn geteuid() -> u32;
    }
    unsafe { geteuid() == 0 }
}

/// Cargo's target directory: `CARGO_TARGET_DIR` when set (relative to the workspace
/// root, where `cargo` runs), else `target/`. A worktree built into a shared directory
/// has no `target/` of its own.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) if !d.is_empty() => root().join(d),
        _ => root().join("target"),
    }
}

pub fn c1m_binary() -> PathBuf {
    target_dir().join("release/c1m")
}

pub fn exec_c1m(args: &[String]) -> Result<()> {
    run(Command::new(c1m_binary()).args(args))
}

pub fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// What the tests drive besides c1m: Debian's chromium (report screenshots), tmux
/// (the live view in a real terminal), iproute2's `ss`, util-linux's `setpriv`,
/// nftables' `nft` (`--conntrack` tracks a client host's connections with a rule), and
/// podman with runc and catatonit (its pods' infra process) to play the Kubernetes
/// manifests (tests/deploy_podman.rs).
fn debian_prerequisites() -> Result<()> {
    let missing: Vec<&str> = [
        ("chromium", "chromium"),
        ("tmux", "tmux"),
        ("ss", "iproute2"),
        ("setpriv", "util-linux"),
        ("nft", "nftables"),
        ("podman", "podman"),
        ("runc", "runc"),
        ("catatonit", "catatonit"),
    ]
    .into_iter()
    .filter(|(program, _)| !have(program))
    .map(|(_, package)| package)
    .collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !is_root() {
        eprintln!(
            "xtask: missing {missing:?}; tests that need them will fail. Install: sudo apt-get install -y {}",
            missing.join(" ")
        );
        return Ok(());
    }
    eprintln!("xtask: installing {} (apt)", missing.join(" "));
    // A fresh machine has no package lists yet.
    run(Command::new("apt-get").args(["update", "-q"]))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "-q"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

/// Third-party peers and tools the tests use, installed when missing.
pub fn test_prerequisites() -> Result<()> {
    debian_prerequisites()?;
    python_websockets()
}

/// Python's `websockets` with its asyncio API (13 or newer): the interop tests' peer
/// and the Python reference server.
pub fn python_websockets() -> Result<()> {
    let have = Command::new("python3")
        .args(["-c", "import websockets.asyncio.server"])
        .output()
        .is_ok_and(|o| o.status.success());
    if have {
        return Ok(());
    }
    eprintln!("xtask: installing Python `websockets` (pip)");
    run(Command::new("python3").args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "websockets>=13",
    ]))
}
