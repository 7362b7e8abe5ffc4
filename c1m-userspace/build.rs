//! Embeds the eBPF object built by `cargo xtask build-ebpf`. When it is missing the
//! crate still builds (so `cargo check`, clippy and the pure tests work anywhere)
//! and the observer explains at run time how to build it. An object older than the
//! kernel side's sources (c1m-ebpf, or the types it shares in c1m-common) is not
//! embedded: it would load programs that disagree with this binary's maps and structs,
//! silently. The build warns, and the observer refuses with the file that is newer.

use std::{
    env, fs,
    path::{Path, PathBuf},
    time::SystemTime,
};

/// The newest file under `dir` (recursively) and its modification time.
fn newest(dir: &Path) -> Option<(SystemTime, PathBuf)> {
    let mut best: Option<(SystemTime, PathBuf)> = None;
    for entry in fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let found = if path.is_dir() {
            newest(&path)
        } else {
            let t = entry.metadata().ok()?.modified().ok()?;
            Some((t, path))
        };
        if let Some(f) = found
            && best.as_ref().is_none_or(|b| f.0 > b.0)
        {
            best = Some(f);
        }
    }
    best
}

fn main() {
    let manifest =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let object = manifest.join("../c1m-ebpf/target/bpfel-unknown-none/release/c1m-ebpf");
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("c1m-ebpf.o");
    let sources = [
        manifest.join("../c1m-ebpf/src"),
        manifest.join("../c1m-ebpf/Cargo.toml"),
        manifest.join("../c1m-common/src"),
    ];
    println!("cargo:rerun-if-changed={}", object.display());
    for s in &sources {
        println!("cargo:rerun-if-changed={}", s.display());
    }
    let built = fs::metadata(&object).and_then(|m| m.modified()).ok();
    let newer_source = built.and_then(|built| {
        sources
            .iter()
            .filter_map(|s| {
                if s.is_dir() {
                    newest(s)
                } else {
                    Some((fs::metadata(s).ok()?.modified().ok()?, s.clone()))
                }
            })
            .filter(|(t, _)| *t > built)
            .max_by_key(|(t, _)| *t)
            .map(|(_, p)| p)
    });
    let bytes = match (&newer_source, fs::read(&object)) {
        (None, Ok(bytes)) => bytes,
        (Some(newer), Ok(_)) => {
            let newer = newer.canonicalize().unwrap_or_else(|_| newer.clone());
            let object = object.canonicalize().unwrap_or_else(|_| object.clone());
            println!(
                "cargo:warning=the eBPF object {} is older than {}: not embedded; run `cargo xtask build-ebpf` (or `cargo xtask build`)",
                object.display(),
                newer.display()
            );
            println!("cargo:rustc-env=C1M_EBPF_STALE={}", newer.display());
            Vec::new()
        }
        (_, Err(_)) => Vec::new(),
    };
    fs::write(&out, bytes).expect("writing OUT_DIR/c1m-ebpf.o");
}
