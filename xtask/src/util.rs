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

pub fn c1m_binary() -> PathBuf {
    root().join("target/release/c1m")
}

pub fn exec_c1m(args: &[String]) -> Result<()> {
    run(Command::new(c1m_binary()).args(args))
}

/// Third-party peers the tests talk to (Python `websockets`), installed when missing.
pub fn test_prerequisites() -> Result<()> {
    let have = Command::new("python3")
        .args(["-c", "import websockets"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !have {
        eprintln!("xtask: installing Python `websockets` for the interop tests");
        run(Command::new("python3").args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "websockets",
        ]))?;
    }
    Ok(())
}
