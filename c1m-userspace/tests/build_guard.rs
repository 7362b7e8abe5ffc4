//! The stale-object guard of `build.rs` (issue 31, point 8), run for real: the build
//! script cargo compiled for this crate is executed against a scratch tree laid out as
//! the workspace is (`c1m-userspace/`, `c1m-ebpf/`, `c1m-common/`). A kernel-side source
//! newer than the object makes it refuse to embed the object, warn naming that file and
//! the command, and hand the observer the file (`C1M_EBPF_STALE`), which it refuses with.
#![allow(clippy::unwrap_used)]

use std::{
    fs::File,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, SystemTime},
};

/// The newest `build-script-build` cargo made for c1m-userspace in this profile.
fn build_script() -> PathBuf {
    // target/<profile>/deps/<this test> -> target/<profile>/build/c1m-userspace-*/
    let deps = std::env::current_exe().unwrap();
    let profile = deps.parent().and_then(Path::parent).unwrap();
    std::fs::read_dir(profile.join("build"))
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("c1m-userspace-")
        })
        .map(|e| e.path().join("build-script-build"))
        .filter(|p| p.is_file())
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .expect("cargo built c1m-userspace's build script")
}

/// Writes `bytes` to `root/rel` with modification time `at`.
fn file_at(root: &Path, rel: &str, bytes: &[u8], at: SystemTime) -> PathBuf {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, bytes).unwrap();
    File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(at)
        .unwrap();
    path
}

const OBJECT: &str = "c1m-ebpf/target/bpfel-unknown-none/release/c1m-ebpf";

/// Runs the build script over `root`; its stdout (cargo's instructions) and the object
/// it left for `include_bytes!`.
fn run_build_script(root: &Path) -> (String, Vec<u8>) {
    let out_dir = root.join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = Command::new(build_script())
        .env("CARGO_MANIFEST_DIR", root.join("c1m-userspace"))
        .env("OUT_DIR", &out_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let embedded = std::fs::read(out_dir.join("c1m-ebpf.o")).unwrap();
    (String::from_utf8_lossy(&out.stdout).into_owned(), embedded)
}

/// A workspace-shaped scratch tree whose object was built after every source.
fn tree() -> (tempfile::TempDir, SystemTime) {
    let dir = tempfile::Builder::new()
        .prefix("c1m-test-build-guard-")
        .tempdir()
        .unwrap();
    let root = dir.path();
    let built = SystemTime::now() - Duration::from_secs(600);
    let before = built - Duration::from_secs(60);
    std::fs::create_dir_all(root.join("c1m-userspace")).unwrap();
    file_at(root, "c1m-ebpf/src/main.rs", b"// programs", before);
    file_at(root, "c1m-ebpf/src/probes/tp.rs", b"// a hook", before);
    file_at(root, "c1m-ebpf/Cargo.toml", b"[package]", before);
    file_at(root, "c1m-common/src/lib.rs", b"// shared types", before);
    file_at(root, OBJECT, b"\x7fELF object", built);
    (dir, built)
}

#[test]
fn an_object_newer_than_every_source_is_embedded_without_a_word() {
    let (dir, _) = tree();
    let (stdout, embedded) = run_build_script(dir.path());
    assert_eq!(embedded, b"\x7fELF object");
    assert!(!stdout.contains("cargo:warning"), "{stdout}");
    assert!(!stdout.contains("C1M_EBPF_STALE"), "{stdout}");
}

#[test]
fn a_touched_kernel_side_source_keeps_the_object_out_and_names_the_file() {
    for touched in [
        "c1m-ebpf/src/probes/tp.rs",
        "c1m-ebpf/Cargo.toml",
        "c1m-common/src/lib.rs",
    ] {
        let (dir, built) = tree();
        let root = dir.path();
        let newer = file_at(root, touched, b"// edited", built + Duration::from_secs(5));
        let (stdout, embedded) = run_build_script(root);
        assert!(
            embedded.is_empty(),
            "{touched}: the stale object was embedded"
        );
        let newer = newer.canonicalize().unwrap();
        let warning = stdout
            .lines()
            .find(|l| l.starts_with("cargo:warning="))
            .unwrap_or_else(|| panic!("{touched}: no warning in {stdout}"));
        assert!(
            warning.contains(&format!("is older than {}", newer.display()))
                && warning.contains("cargo xtask build-ebpf"),
            "{warning}"
        );
        // What the observer is compiled with, and refuses with.
        assert!(
            stdout
                .lines()
                .any(|l| l == format!("cargo:rustc-env=C1M_EBPF_STALE={}", newer.display())),
            "{stdout}"
        );
    }
}

#[test]
fn no_object_at_all_builds_an_empty_one_without_a_stale_mark() {
    let (dir, _) = tree();
    std::fs::remove_file(dir.path().join(OBJECT)).unwrap();
    let (stdout, embedded) = run_build_script(dir.path());
    assert!(embedded.is_empty());
    assert!(!stdout.contains("C1M_EBPF_STALE"), "{stdout}");
}
