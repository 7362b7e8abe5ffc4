//! `cargo xtask image`: c1m's container image, built offline from this repository. c1m
//! (release, eBPF object embedded), the shared libraries it links, and the /bin/sh and
//! sleep the manifests' scripts run go into target/podman/rootfs
//! (deploy/kubernetes/rootfs.sh); `podman build` copies that folder onto `FROM scratch`
//! (deploy/kubernetes/Containerfile). Nothing is pulled. The image is `c1m:latest` in
//! podman's default storage, labelled with the binary's SHA-256, for `podman push` to
//! where the nodes pull.

use std::{process::Command, time::Instant};

use anyhow::{Context, Result, bail};

use crate::util;

pub fn build() -> Result<()> {
    if !util::have("podman") {
        bail!("podman is not installed: apt-get install podman runc catatonit");
    }
    let start = Instant::now();
    let binary = util::c1m_binary();
    let dir = util::target_dir().join("podman");
    let rootfs = dir.join("rootfs");
    if rootfs.exists() {
        std::fs::remove_dir_all(&rootfs)
            .with_context(|| format!("removing the old {}", rootfs.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let kube = util::root().join("deploy/kubernetes");
    util::run(
        Command::new(kube.join("rootfs.sh"))
            .arg(&binary)
            .arg(&rootfs),
    )?;
    let sha = Command::new("sha256sum")
        .arg(&binary)
        .output()
        .context("sha256sum")?;
    let sha = String::from_utf8_lossy(&sha.stdout);
    let sha = sha.split_whitespace().next().unwrap_or("unknown");
    util::run(
        Command::new("podman")
            .args(["build", "--quiet", "--tag", "c1m:latest", "--label"])
            .arg(format!("c1m.binary-sha256={sha}"))
            .arg("--file")
            .arg(kube.join("Containerfile"))
            .arg(&rootfs),
    )?;
    eprintln!(
        "xtask: image c1m:latest (c1m's SHA-256 {sha}) in {:.1} s; push it where the nodes pull, e.g.\n  \
         podman push c1m:latest REGISTRY/c1m:latest",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
