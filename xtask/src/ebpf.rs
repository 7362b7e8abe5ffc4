//! `cargo xtask build-ebpf`: builds `c1m-ebpf` for `bpfel-unknown-none` with the
//! preinstalled nightly, installing on first use what a fresh machine lacks:
//! rust-src (for `-Z build-std=core`) and a bpf-linker linked against the nightly's
//! own LLVM (no system LLVM of the right version exists here; ../shared/TOOLCHAIN.md).

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::SystemTime,
};

use anyhow::{Context, Result, bail};

use crate::util::{root, run};

const TOOLCHAIN: &str = "nightly";
const TARGET: &str = "bpfel-unknown-none";
/// The bpf-linker release verified on this kind of machine.
const BPF_LINKER_VERSION: &str = "0.13.0";

pub fn object_path() -> PathBuf {
    root()
        .join("c1m-ebpf/target")
        .join(TARGET)
        .join("release/c1m-ebpf")
}

pub fn build(force: bool) -> Result<()> {
    let object = object_path();
    if !force && is_fresh(&object)? {
        eprintln!("xtask: eBPF object is up to date: {}", object.display());
        return Ok(());
    }
    ensure_rust_src()?;
    ensure_bpf_linker()?;
    let mut cmd = nightly("cargo");
    cmd.args([
        "build",
        "--release",
        "--target",
        TARGET,
        "-Z",
        "build-std=core",
    ])
    // Where c1m-userspace's build.rs reads the object: a CARGO_TARGET_DIR of the
    // caller's (a worktree's own target folder) moved it away, and c1m was built
    // without its eBPF object while this said "built".
    .arg("--target-dir")
    .arg(root().join("c1m-ebpf/target"))
    .env("RUSTFLAGS", "-C debuginfo=2 -C link-arg=--btf")
    .current_dir(root().join("c1m-ebpf"));
    run(&mut cmd).context("building the eBPF programs")?;
    eprintln!("xtask: built {}", object.display());
    Ok(())
}

/// A command from the nightly toolchain, with the caller's toolchain pins removed
/// (`cargo xtask` runs under stable, whose rustup and cargo variables would leak in).
fn nightly(program: &str) -> Command {
    let mut cmd = Command::new("rustup");
    cmd.args(["run", TOOLCHAIN, program]);
    for var in [
        "RUSTUP_TOOLCHAIN",
        "RUSTC",
        "RUSTDOC",
        "RUSTC_WRAPPER",
        "CARGO",
        "CARGO_ENCODED_RUSTFLAGS",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("could not start {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn ensure_rust_src() -> Result<()> {
    let installed = output(nightly("rustc").args(["--print", "sysroot"])).context(
        "the `nightly` toolchain is needed for the eBPF build: `rustup toolchain install nightly`",
    )?;
    let src = Path::new(installed.trim()).join("lib/rustlib/src/rust/library/core");
    if src.exists() {
        return Ok(());
    }
    eprintln!("xtask: adding rust-src to the nightly toolchain");
    run(Command::new("rustup").args(["component", "add", "rust-src", "--toolchain", TOOLCHAIN]))
}

fn ensure_bpf_linker() -> Result<()> {
    if Command::new("bpf-linker")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
    {
        return Ok(());
    }
    let home =
        std::env::var("HOME").context("HOME is not set: needed to place bpf-linker's LLVM")?;
    let sysroot = output(nightly("rustc").args(["--print", "sysroot"]))?;
    let lib_dir = Path::new(sysroot.trim()).join("lib");
    // `libLLVM-22-rust-*.so` is a linker script; the real library is `libLLVM.so.*-rust-*`.
    let llvm = fs::read_dir(&lib_dir)
        .with_context(|| format!("reading {}", lib_dir.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|name| name.starts_with("libLLVM.so.") && name.contains("-rust-"))
        .with_context(|| format!("no libLLVM.so.*-rust-* in {}", lib_dir.display()))?;
    let version = output(nightly("rustc").arg("-vV"))?;
    let major = version
        .lines()
        .find_map(|l| l.strip_prefix("LLVM version: "))
        .and_then(|v| v.split('.').next())
        .context("`rustc +nightly -vV` printed no LLVM version")?
        .to_owned();
    // Must outlive the install: bpf-linker keeps this directory as its RUNPATH.
    let prefix = Path::new(&home).join(".cargo/c1m-llvm");
    let prefix_lib = prefix.join("lib");
    fs::create_dir_all(&prefix_lib)
        .with_context(|| format!("creating {}", prefix_lib.display()))?;
    for link in ["libLLVM.so".to_owned(), llvm.clone()] {
        let path = prefix_lib.join(&link);
        let _ = fs::remove_file(&path);
        std::os::unix::fs::symlink(lib_dir.join(&llvm), &path)
            .with_context(|| format!("linking {}", path.display()))?;
    }
    eprintln!(
        "xtask: installing bpf-linker {BPF_LINKER_VERSION} against the nightly's LLVM {major} (about 2 minutes)"
    );
    let mut cmd = Command::new("cargo");
    cmd.args([
        "install",
        "bpf-linker",
        "--version",
        BPF_LINKER_VERSION,
        "--no-default-features",
        "--features",
    ])
    .arg(format!("llvm-{major}"))
    .env("LLVM_PREFIX", &prefix)
    .env_remove("RUSTUP_TOOLCHAIN");
    run(&mut cmd).context("installing bpf-linker")
}

/// The object exists and is newer than every source that goes into it.
fn is_fresh(object: &Path) -> Result<bool> {
    let Ok(built) = fs::metadata(object).and_then(|m| m.modified()) else {
        return Ok(false);
    };
    let r = root();
    let inputs = [
        r.join("c1m-ebpf/src"),
        r.join("c1m-ebpf/Cargo.toml"),
        r.join("c1m-ebpf/Cargo.lock"),
        r.join("c1m-common/src"),
        r.join("c1m-common/Cargo.toml"),
    ];
    for input in inputs {
        if newest(&input)? > built {
            return Ok(false);
        }
    }
    Ok(true)
}

fn newest(path: &Path) -> Result<SystemTime> {
    let meta = fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    let mut latest = meta.modified()?;
    if meta.is_dir() {
        for entry in fs::read_dir(path)? {
            latest = latest.max(newest(&entry?.path())?);
        }
    }
    Ok(latest)
}
