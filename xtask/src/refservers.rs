//! `cargo xtask reference-servers`: installs each reference server's runtime and library
//! from its registry when missing (apt, npm, pip) and builds it into
//! `<target dir>/reference-servers/<name>/` (beside the c1m binary), with a `run` wrapper
//! that `exec`s the server (so the PID c1m starts is the one a SIGUSR1 must reach). Idempotent: a server whose
//! output is newer than its sources is left alone. The protocol they share is
//! `reference-servers/PROTOCOL.md`.

use std::{
    fs,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    process::Command,
    time::{Instant, SystemTime},
};

use anyhow::{Context, Result, bail};

use crate::util::{have, is_root, python_websockets, root, run, target_dir};

/// Debian's Go keeps gorilla/websocket here; with `GO111MODULE=off` this is a GOPATH and
/// the build needs no network.
const GOPATH: &str = "/usr/share/gocode";
const GORILLA: &str = "/usr/share/gocode/src/github.com/gorilla/websocket";
const GORILLA_PACKAGE: &str = "golang-github-gorilla-websocket-dev";
/// Debian's libnetty-java: one jar per Netty module (netty-all.jar is only a manifest).
const NETTY_JARS: [&str; 7] = [
    "netty-buffer",
    "netty-codec",
    "netty-codec-http",
    "netty-common",
    "netty-handler",
    "netty-resolver",
    "netty-transport",
];

#[derive(Clone, Copy, Debug)]
enum Server {
    Python,
    Node,
    Go,
    Netty,
}

impl Server {
    const ALL: [Server; 4] = [Server::Python, Server::Node, Server::Go, Server::Netty];

    fn name(self) -> &'static str {
        match self {
            Server::Python => "python",
            Server::Node => "node",
            Server::Go => "go",
            Server::Netty => "netty",
        }
    }

    /// Source files whose change forces a rebuild.
    fn sources(self) -> &'static [&'static str] {
        match self {
            Server::Python => &["server.py"],
            Server::Node => &["server.js", "package.json", "package-lock.json"],
            Server::Go => &["main.go"],
            Server::Netty => &["RefServer.java"],
        }
    }

    fn src_dir(self) -> PathBuf {
        root().join("reference-servers").join(self.name())
    }

    /// Beside the `<profile>/` folder that holds c1m (it looks there): cargo's target
    /// dir, `CARGO_TARGET_DIR` included.
    fn out_dir(self) -> PathBuf {
        target_dir().join("reference-servers").join(self.name())
    }

    /// Installs what is missing: (program or path that proves it is there, how to get it).
    fn install(self) -> Result<()> {
        match self {
            Server::Python => {
                apt_if_missing(&[("python3", "python3"), ("pip3", "python3-pip")])?;
                python_websockets()
            }
            Server::Node => apt_if_missing(&[("node", "nodejs"), ("npm", "npm")]),
            Server::Go => {
                apt_if_missing(&[("go", "golang-go")])?;
                if !Path::new(GORILLA).is_dir() {
                    apt(&[GORILLA_PACKAGE])?;
                }
                Ok(())
            }
            Server::Netty => {
                apt_if_missing(&[("javac", "default-jdk-headless")])?;
                if netty_classpath().is_err() {
                    apt(&["libnetty-java"])?;
                }
                Ok(())
            }
        }
    }

    /// Builds into `out`; writes `out/run`.
    fn build(self, out: &Path) -> Result<()> {
        let src = self.src_dir();
        let exec = match self {
            Server::Python => format!("python3 {}", src.join("server.py").display()),
            Server::Node => {
                for f in ["server.js", "package.json", "package-lock.json"] {
                    copy(&src.join(f), &out.join(f))?;
                }
                // `ci`: exactly the committed lock file, nothing resolved anew.
                run(Command::new("npm")
                    .args(["ci", "--no-audit", "--no-fund", "--omit=dev", "--quiet"])
                    .current_dir(out))?;
                format!("node {}", out.join("server.js").display())
            }
            Server::Go => {
                let bin = out.join("server");
                // A GOPATH build records no module version: the server reports the one of
                // the package this build compiled in.
                let ldflags = format!(
                    "-X main.libraryVersion={}",
                    debian_upstream_version(GORILLA_PACKAGE).unwrap_or_else(|| "unknown".into())
                );
                run(Command::new("go")
                    .arg("build")
                    .arg("-ldflags")
                    .arg(ldflags)
                    .arg("-o")
                    .arg(&bin)
                    .arg(src.join("main.go"))
                    .env("GO111MODULE", "off")
                    .env("GOPATH", GOPATH)
                    .env("GOFLAGS", "")
                    .env("GOCACHE", out.join("cache"))
                    .current_dir(out))?;
                bin.display().to_string()
            }
            Server::Netty => {
                let cp = netty_classpath()?;
                let classes = out.join("classes");
                fs::create_dir_all(&classes).with_context(|| classes.display().to_string())?;
                run(Command::new("javac")
                    .args(["-nowarn", "-XDignore.symbol.file", "-cp", &cp, "-d"])
                    .arg(&classes)
                    .arg(src.join("RefServer.java")))?;
                format!("java -cp {}:{cp} RefServer", classes.display())
            }
        };
        let script = out.join("run");
        let text = format!(
            "#!/bin/sh\n# Built by `cargo xtask reference-servers`; see reference-servers/PROTOCOL.md.\nexec {exec} \"$@\"\n"
        );
        fs::write(&script, text).with_context(|| script.display().to_string())?;
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755))
            .with_context(|| script.display().to_string())
    }

    /// The `run` wrapper is newer than every source file.
    fn up_to_date(self) -> bool {
        let mtime = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).ok();
        let Some(built) = mtime(&self.out_dir().join("run")) else {
            return false;
        };
        self.sources()
            .iter()
            .all(|f| mtime(&self.src_dir().join(f)).is_some_and(|t: SystemTime| t <= built))
    }
}

/// Installs the runtimes and builds every reference server; prints one line per server.
pub fn build_all() -> Result<()> {
    let mut failed = Vec::new();
    for s in Server::ALL {
        let t = Instant::now();
        if s.up_to_date() {
            eprintln!("xtask: reference server {:<6} up to date", s.name());
            continue;
        }
        let out = s.out_dir();
        let result = fs::create_dir_all(&out)
            .with_context(|| out.display().to_string())
            .and_then(|()| s.install())
            .and_then(|()| s.build(&out));
        match result {
            Ok(()) => eprintln!(
                "xtask: reference server {:<6} built in {:.1} s: {}",
                s.name(),
                t.elapsed().as_secs_f64(),
                out.join("run").display()
            ),
            Err(e) => {
                eprintln!("xtask: reference server {} failed: {e:#}", s.name());
                failed.push(s.name());
            }
        }
    }
    if !failed.is_empty() {
        bail!(
            "reference servers not built: {} (see the lines above; as root, \
             `cargo xtask reference-servers` installs their runtimes)",
            failed.join(", ")
        );
    }
    Ok(())
}

/// The upstream version of an installed Debian package: `1:4.1.48-7+deb12u2` → `4.1.48`
/// (no epoch, no Debian revision); None when dpkg does not know it.
fn debian_upstream_version(package: &str) -> Option<String> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", package])
        .output()
        .ok()?;
    let full = String::from_utf8(out.stdout).ok()?;
    let no_epoch = full.trim().split_once(':').map_or(full.trim(), |(_, v)| v);
    let upstream = no_epoch.rsplit_once('-').map_or(no_epoch, |(v, _)| v);
    (out.status.success() && !upstream.is_empty()).then(|| upstream.to_owned())
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    fs::copy(from, to)
        .map(drop)
        .with_context(|| format!("copy {} to {}", from.display(), to.display()))
}

fn netty_classpath() -> Result<String> {
    let jars: Vec<PathBuf> = NETTY_JARS
        .iter()
        .map(|j| Path::new("/usr/share/java").join(format!("{j}.jar")))
        .collect();
    if let Some(missing) = jars.iter().find(|j| !j.exists()) {
        bail!(
            "{} missing (Debian package libnetty-java)",
            missing.display()
        );
    }
    Ok(jars
        .iter()
        .map(|j| j.display().to_string())
        .collect::<Vec<_>>()
        .join(":"))
}

/// Installs the Debian packages of the programs not on PATH.
fn apt_if_missing(wanted: &[(&str, &str)]) -> Result<()> {
    let missing: Vec<&str> = wanted
        .iter()
        .filter(|(program, _)| !have(program))
        .map(|(_, package)| *package)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    apt(&missing)
}

fn apt(packages: &[&str]) -> Result<()> {
    if !is_root() {
        bail!(
            "missing Debian packages; install them: sudo apt-get install -y {}",
            packages.join(" ")
        );
    }
    eprintln!("xtask: installing {} (apt)", packages.join(" "));
    let install = |cmd: &mut Command| {
        run(cmd
            .args(["install", "-y", "-q"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive"))
    };
    // A fresh machine has no package lists yet: update only when the first try fails.
    if install(&mut Command::new("apt-get")).is_err() {
        run(Command::new("apt-get").args(["update", "-q"]))?;
        install(&mut Command::new("apt-get"))?;
    }
    Ok(())
}
