//! `cargo xtask bench tls`: TLS 1.3 setup against the crypto floor of this box, measured
//! in the same run. `openssl speed` gives one core's X25519, ECDSA P-256 sign and verify
//! rates; a full handshake's public-key work per side, over this box's cores, is the most
//! handshakes a second both ends here could do if they did nothing else. Each round, in
//! fresh network namespaces: the floor again (this minute's), a minimal OpenSSL pair
//! (`xtask/c/tls_ref.c`, built with gcc here) doing full handshakes, the same with ticket
//! resumption, c1m's plain TCP setup (what the floor leaves out: a connection's own
//! CPU), and `c1m run --tls` full and with `--tls-resumption`. Each is printed with its
//! ratio to the floor, c1m's also to the C pair's and to the floor plus its TCP; then,
//! per round, resumed over full for each pair: handshakes a second and CPU per handshake
//! per side, so every ratio comes from the same minutes of the box.
//!
//! What a full TLS 1.3 handshake (X25519, ECDSA P-256 cert) counts per side:
//! - server: 1 X25519 key generation + 1 X25519 derivation + 1 ECDSA sign
//!   (CertificateVerify);
//! - client: 1 X25519 key generation + 1 X25519 derivation + 1 ECDSA verify
//!   (CertificateVerify). A self-signed cert that the client trusts as it is needs no
//!   other signature checked; a leaf signed by a CA adds 1 verify (printed apart).
//!
//! `openssl speed ecdhx25519` times derivations only; a key generation is counted at
//! that cost (it is a fixed-base multiplication, cheaper in OpenSSL), so the floor's
//! limit is a little below the true one. Hashing, HKDF and the AEAD records of a
//! handshake are left out: microseconds against ~100 µs of public-key work. A resumed
//! handshake (psk_dhe_ke, OpenSSL's and rustls's default) keeps both X25519 and drops
//! sign and verify.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context, Result, bail};

use crate::{
    bench::{Netns, Proc, settle},
    util::{c1m_binary, is_root, run, target_dir},
};

/// One core's rates, operations a second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Speed {
    pub x25519: f64,
    pub sign: f64,
    pub verify: f64,
}

/// The rates from `openssl speed ecdhx25519 ecdsap256`'s table: the row naming
/// `ecdsa (nistp256)` ends in sign/s and verify/s, the one naming `ecdh (X25519)` in
/// op/s. Anything else (a missing row, a rate that is not a positive number) is an
/// error naming what was missing.
pub(crate) fn parse_speed(text: &str) -> Result<Speed> {
    let row = |name: &str, last: usize| -> Result<Vec<f64>> {
        let line = text
            .lines()
            .find(|l| l.contains(name) && !l.trim_start().starts_with("Doing"))
            .with_context(|| format!("openssl speed printed no {name:?} row"))?;
        let numbers: Vec<&str> = line.split_whitespace().rev().take(last).collect();
        let rates: Vec<f64> = numbers
            .iter()
            .rev()
            .filter_map(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v > 0.0)
            .collect();
        if rates.len() != last {
            bail!("openssl speed's {name:?} row has no {last} rate(s): {line:?}");
        }
        Ok(rates)
    };
    let ecdsa = row("ecdsa (nistp256)", 2)?;
    let ecdh = row("ecdh (X25519)", 1)?;
    Ok(Speed {
        x25519: ecdh[0],
        sign: ecdsa[0],
        verify: ecdsa[1],
    })
}

/// The public-key CPU a handshake takes per side, µs, and what the box's cores allow.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Floor {
    pub server_us: f64,
    pub client_us: f64,
    /// Full handshakes a second, both ends on this box.
    pub full_per_s: f64,
    /// The same with a CA-signed leaf: the client verifies one signature more.
    pub ca_signed_per_s: f64,
    /// Resumed handshakes a second (both X25519 per side, no signature).
    pub resumed_per_s: f64,
}

pub(crate) fn floor(s: Speed, cores: u32) -> Floor {
    let us = |rate: f64| 1e6 / rate;
    let x = 2.0 * us(s.x25519);
    let server_us = x + us(s.sign);
    let client_us = x + us(s.verify);
    let per_s = |cpu_us: f64| f64::from(cores) * 1e6 / cpu_us;
    Floor {
        server_us,
        client_us,
        full_per_s: per_s(server_us + client_us),
        ca_signed_per_s: per_s(server_us + client_us + us(s.verify)),
        resumed_per_s: per_s(2.0 * x),
    }
}

/// Cores this process may run on.
fn cores() -> u32 {
    std::thread::available_parallelism()
        .map(|n| u32::try_from(n.get()).unwrap_or(u32::MAX))
        .unwrap_or(1)
}

/// Rates per second of CPU (openssl's default; `-elapsed` counted wall time, and on a
/// box shared with other work the floor halved from one round to the next while c1m's
/// figures, CPU per handshake from rusage, did not: it read 1.25 of the floor).
fn openssl_speed() -> Result<Speed> {
    settle();
    let out = Command::new("openssl")
        .args(["speed", "-seconds", "3", "ecdhx25519", "ecdsap256"])
        .stderr(Stdio::null())
        .output()
        .context("running openssl speed (is openssl installed?)")?;
    if !out.status.success() {
        bail!("openssl speed failed: {}", out.status);
    }
    parse_speed(&String::from_utf8_lossy(&out.stdout))
}

/// Installs Debian's libssl-dev when its headers are missing (as xtask installs the
/// tests' tools: apt-get, as root).
fn libssl_dev() -> Result<()> {
    if Path::new("/usr/include/openssl/ssl.h").exists() {
        return Ok(());
    }
    if !is_root() {
        bail!("OpenSSL headers missing: sudo apt-get install -y libssl-dev");
    }
    eprintln!("xtask: installing libssl-dev (apt)");
    run(Command::new("apt-get").args(["update", "-q"]))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "-q", "libssl-dev"])
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

/// Compiles the C pair into the target directory (no binary is committed).
fn build_ref() -> Result<PathBuf> {
    libssl_dev()?;
    let src = crate::util::root().join("xtask/c/tls_ref.c");
    let dir = target_dir();
    std::fs::create_dir_all(&dir)?;
    let out = dir.join("c1m-tls-ref");
    run(Command::new("gcc")
        .args(["-O2", "-Wall", "-Wextra", "-o"])
        .arg(&out)
        .arg(&src)
        .args(["-lssl", "-lcrypto"]))
    .context("building xtask/c/tls_ref.c (is gcc installed?)")?;
    Ok(out)
}

/// A self-signed ECDSA P-256 cert and key for localhost in `dir`: (cert, key).
fn make_cert(dir: &Path) -> Result<(PathBuf, PathBuf)> {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    run(Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
        .args(["-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null()))
    .context("making a test certificate with openssl req")?;
    Ok((cert, key))
}

/// c1m's `--in-flight` in each of its rounds: enough to keep both cores busy (64 left
/// a tenth idle), few enough that most of a resumed round finds a ticket.
const IN_FLIGHT: u64 = 128;

/// One measurement: handshakes a second and CPU per handshake per side, µs.
#[derive(Debug, Clone, Copy, Default)]
struct Measured {
    per_s: f64,
    server_us: f64,
    client_us: f64,
    /// Handshakes that resumed a session (the C pair's resume mode; c1m's server's
    /// `tls_handshakes.resumed`).
    resumed: u64,
}

/// Resumed over full, one pair, one round: (handshakes/s, server CPU, client CPU).
fn ratios(full: &Measured, resumed: &Measured) -> (f64, f64, f64) {
    (
        resumed.per_s / full.per_s,
        resumed.server_us / full.server_us,
        resumed.client_us / full.client_us,
    )
}

/// The fields after the word that starts a line of the C pair.
fn fields(line: &str) -> Vec<f64> {
    line.split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect()
}

/// The C pair in a fresh namespace: `n` handshakes, `resume` or full.
fn c_pair(
    exe: &Path,
    cert: &Path,
    key: &Path,
    n: u64,
    resume: bool,
    tag: &str,
) -> Result<Measured> {
    let ns = Netns::new(tag)?;
    let procs = cores().min(64).to_string();
    let mode = if resume { "resume" } else { "full" };
    let mut s = ns.cmd(exe);
    s.arg("server").arg(cert).arg(key).args([&procs, mode]);
    let mut server = Proc::spawn(s)?;
    let ready = server.expect("ready")?;
    let port = ready
        .split_whitespace()
        .nth(1)
        .with_context(|| format!("bad line from the C server: {ready}"))?;
    let mut c = ns.cmd(exe);
    c.arg("client")
        .arg(cert)
        .args([port, &procs, &n.to_string(), mode]);
    let out = c
        .stderr(Stdio::inherit())
        .output()
        .context("the C client")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("client "))
        .with_context(|| format!("no result line from the C client ({})", out.status))?;
    // "client OK FAILED RESUMED ELAPSED_NS USER_S SYS_S"
    let [ok, failed, resumed, elapsed_ns, cu, cs] = fields(line)[..] else {
        bail!("bad line from the C client: {line}");
    };
    server.say("stop")?;
    // "server HANDSHAKES USER_S SYS_S"
    let sline = server.expect("server ")?;
    let [_, su, ss] = fields(&sline)[..] else {
        bail!("bad line from the C server: {sline}");
    };
    if failed > 0.0 {
        eprintln!("bench tls: C client ({mode}): {failed} of {n} handshakes failed");
    }
    if ok < 1.0 || elapsed_ns <= 0.0 {
        bail!("the C pair ({mode}) completed no handshake: {line}");
    }
    Ok(Measured {
        per_s: ok / (elapsed_ns / 1e9),
        server_us: (su + ss) * 1e6 / ok,
        client_us: (cu + cs) * 1e6 / ok,
        resumed: resumed as u64,
    })
}

/// What a c1m round sets up: plain TCP (what the floor leaves out), full handshakes, or
/// handshakes resumed from the tickets of the connections before.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Setup {
    Plain,
    Full,
    Resumed,
}

/// `c1m run --mode hold -n N --rate 0` (`--tls`, `--tls-resumption` as `setup` says) in
/// a fresh namespace: its setup rate and each side's CPU over the setup phase per
/// connection, from summary.json. Resumed, the first connections (up to
/// [`IN_FLIGHT`]) start before any ticket has come back: `resumed` says how many did.
fn c1m_run(n: u64, tag: &str, setup: Setup) -> Result<Measured> {
    let ns = Netns::new(tag)?;
    let out = std::env::temp_dir().join(format!("c1m-xbench-tls-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let status = ns
        .cmd(c1m_binary())
        .arg("run")
        .args((setup != Setup::Plain).then_some("--tls"))
        .args((setup == Setup::Resumed).then_some("--tls-resumption"))
        .args(["--mode", "hold", "--rate", "0", "--plain"])
        .args(["--idle", "1s", "-n", &n.to_string(), "--out"])
        .arg(&out)
        // Connections that start before any ticket came back cannot resume; the same
        // in-flight for every round keeps them comparable.
        .args(["--in-flight", &IN_FLIGHT.to_string()])
        .stdout(Stdio::null())
        .status()
        .context("c1m run --mode hold")?;
    let figures = read_c1m(&out, n);
    let _ = std::fs::remove_dir_all(&out);
    if !status.success() {
        bail!("c1m run ({setup:?}) -n {n} ended {status}");
    }
    figures
}

fn read_c1m(out: &Path, n: u64) -> Result<Measured> {
    let dir = std::fs::read_dir(out)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.join("summary.json").is_file())
        .with_context(|| format!("no run folder in {}", out.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json"))?)?;
    let setup = v["phases"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "setup"))
        .context("no setup phase in summary.json")?;
    let cpu = |side: &str| {
        setup[side]["cpu_user_s"].as_f64().unwrap_or(f64::NAN)
            + setup[side]["cpu_sys_s"].as_f64().unwrap_or(f64::NAN)
    };
    let connected = v["client"]["counters"]["connected"]
        .as_u64()
        .unwrap_or(n)
        .max(1) as f64;
    Ok(Measured {
        per_s: v["client"]["setup_rate"]["achieved_per_s"]
            .as_f64()
            .context("summary.json has no client.setup_rate.achieved_per_s")?,
        server_us: cpu("server") * 1e6 / connected,
        client_us: cpu("client") * 1e6 / connected,
        resumed: v["server"]["counters"]["tls_handshakes"]["resumed"]
            .as_u64()
            .unwrap_or(0),
    })
}

pub fn bench(n: u64, rounds: u32) -> Result<()> {
    if !is_root() {
        bail!("bench tls needs root (private network namespaces): sudo -E cargo xtask bench tls");
    }
    if n == 0 || rounds == 0 {
        bail!("--handshakes and --rounds must be at least 1");
    }
    println!(
        "== TLS 1.3 setup against this box's crypto floor: {n} handshakes, {rounds} round(s), {} core(s)",
        cores()
    );
    let exe = build_ref()?;
    let tmp = std::env::temp_dir().join(format!("c1m-xbench-tls-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let result = rounds_of(&exe, &tmp, n, rounds);
    let _ = std::fs::remove_dir_all(&tmp);
    result
}

/// The floor of this minute: `openssl speed` just before the round it judges (this
/// box's speed swings ±2× by the hour; one measurement at the start judged later rounds
/// by another hour's box).
fn floor_now(cores: u32) -> Result<Floor> {
    let speed = openssl_speed()?;
    let f = floor(speed, cores);
    println!(
        "      openssl speed, one core: X25519 {:.0} ops/s ({:.1} µs), ECDSA P-256 sign {:.0}/s ({:.1} µs), verify {:.0}/s ({:.1} µs)",
        speed.x25519,
        1e6 / speed.x25519,
        speed.sign,
        1e6 / speed.sign,
        speed.verify,
        1e6 / speed.verify
    );
    println!(
        "      floor: public-key CPU per full handshake server {:.1} µs (2 X25519 + 1 sign), client {:.1} µs (2 X25519 + 1 verify); {cores} core(s): {:.0} full handshakes/s ({:.0}/s with a CA-signed leaf, {:.0}/s resumed)",
        f.server_us, f.client_us, f.full_per_s, f.ca_signed_per_s, f.resumed_per_s
    );
    Ok(f)
}

/// The most full handshakes a second with the floor's crypto and the TCP connection's
/// own CPU (a plain c1m round: connect, accept, close) and nothing else.
fn with_tcp(f: &Floor, tcp: &Measured, cores: u32) -> f64 {
    f64::from(cores) * 1e6 / (f.server_us + f.client_us + tcp.server_us + tcp.client_us)
}

fn rounds_of(exe: &Path, tmp: &Path, n: u64, rounds: u32) -> Result<()> {
    let cores = cores();
    let (cert, key) = make_cert(tmp)?;
    let line = |what: &str, m: &Measured, floor: f64| {
        println!(
            "      {what:<12} {:>7.0} handshakes/s = {:.2} of the floor; CPU per handshake: server {:.0} µs, client {:.0} µs",
            m.per_s,
            m.per_s / floor,
            m.server_us,
            m.client_us
        );
    };
    let mut of_floor = Vec::new();
    let mut of_ceiling = Vec::new();
    let mut of_cpu = Vec::new();
    let mut of_tls = Vec::new();
    for r in 0..rounds {
        println!("   round {}:", r + 1);
        let f = floor_now(cores)?;
        let full = c_pair(exe, &cert, &key, n, false, &format!("t{r}f"))?;
        line("C full", &full, f.full_per_s);
        let resumed = c_pair(exe, &cert, &key, n, true, &format!("t{r}r"))?;
        line("C resumed", &resumed, f.resumed_per_s);
        println!(
            "      {:<12} ({} of {n} resumed; its floor is the resumed one)",
            "", resumed.resumed
        );
        let tcp = c1m_run(n, &format!("t{r}p"), Setup::Plain)?;
        let ceiling = with_tcp(&f, &tcp, cores);
        println!(
            "      {:<12} {:>7.0} connections/s; CPU per connection: server {:.0} µs, client {:.0} µs (floor + this: {ceiling:.0} handshakes/s)",
            "c1m TCP", tcp.per_s, tcp.server_us, tcp.client_us
        );
        let m = c1m_run(n, &format!("t{r}m"), Setup::Full)?;
        line("c1m full", &m, f.full_per_s);
        println!(
            "      {:<12} c1m / C full: {:.2}; of floor + TCP: {:.2}; TLS's own CPU (c1m's less its TCP): server {:.0} µs, client {:.0} µs",
            "",
            m.per_s / full.per_s,
            m.per_s / ceiling,
            m.server_us - tcp.server_us,
            m.client_us - tcp.client_us
        );
        // On a box shared with other work the rate says how much CPU was free; what the
        // CPU per handshake allows says what c1m needs, and without TCP's share what the
        // TLS handshake itself needs: the floor's own terms.
        let bound = f64::from(cores) * 1e6 / (m.server_us + m.client_us);
        let tls_alone = f64::from(cores) * 1e6
            / (m.server_us - tcp.server_us + m.client_us - tcp.client_us).max(1.0);
        println!(
            "      {:<12} the CPU allows {bound:.0} handshakes/s = {:.2} of the floor; the TLS handshake alone (less TCP) {tls_alone:.0}/s = {:.2} of the floor",
            "",
            bound / f.full_per_s,
            tls_alone / f.full_per_s
        );
        of_floor.push(m.per_s / f.full_per_s);
        of_ceiling.push(m.per_s / ceiling);
        of_cpu.push(bound / f.full_per_s);
        of_tls.push(tls_alone / f.full_per_s);
        let mr = c1m_run(n, &format!("t{r}n"), Setup::Resumed)?;
        line("c1m resumed", &mr, f.resumed_per_s);
        println!(
            "      {:<12} ({} of {n} resumed); c1m / C resumed: {:.2}",
            "",
            mr.resumed,
            mr.per_s / resumed.per_s
        );
        for (who, full, resumed) in [("C", &full, &resumed), ("c1m", &m, &mr)] {
            let (rate, server, client) = ratios(full, resumed);
            println!(
                "      {who:<4} resumed / full: {rate:.2}× handshakes/s, CPU per handshake: server {server:.2}×, client {client:.2}×"
            );
        }
    }
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "   c1m full handshakes per round, of the crypto floor (goal 0.8): rate {}; CPU-bound {}; TLS handshake alone (less TCP) {}; rate of floor + TCP {}",
        list(&of_floor),
        list(&of_cpu),
        list(&of_tls),
        list(&of_ceiling)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `openssl speed -seconds 1 -elapsed ecdhx25519 ecdsap256`, OpenSSL 3.0.19, this box.
    const CAPTURED: &str = "\
version: 3.0.19
built on: Fri Apr  3 12:29:32 2026 UTC
options: bn(64,64)
compiler: gcc -fPIC -pthread -m64 -Wa,--noexecstack -Wall -O2 -DNDEBUG
CPUINFO: OPENSSL_ia32cap=0xfffa3203078bffff:0x400684219c07ab
                              sign    verify    sign/s verify/s
 256 bits ecdsa (nistp256)   0.0000s   0.0001s  34819.0  11654.0
                              op      op/s
 253 bits ecdh (X25519)   0.0000s  22591.0
";

    #[test]
    fn the_speed_table_gives_each_rate() {
        assert_eq!(
            parse_speed(CAPTURED).expect("parsed"),
            Speed {
                x25519: 22591.0,
                sign: 34819.0,
                verify: 11654.0
            }
        );
        // The progress lines that name the same algorithms (stderr, but also stdout when
        // merged) are not rows.
        let merged = format!(
            "Doing 256 bits sign ecdsa (nistp256)'s for 3s: 1 2\n{CAPTURED}\
             Doing 253 bits  ecdh (X25519)'s for 3s: 3 4\n"
        );
        assert_eq!(parse_speed(&merged).expect("parsed").x25519, 22591.0);
    }

    #[test]
    fn bad_speed_output_is_a_one_line_error() {
        let no_ecdh: String = CAPTURED
            .lines()
            .filter(|l| !l.contains("X25519"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(
            parse_speed(&no_ecdh).unwrap_err().to_string(),
            "openssl speed printed no \"ecdh (X25519)\" row"
        );
        let broken = CAPTURED.replace("11654.0", "n/a");
        assert_eq!(
            parse_speed(&broken).unwrap_err().to_string(),
            "openssl speed's \"ecdsa (nistp256)\" row has no 2 rate(s): \
             \" 256 bits ecdsa (nistp256)   0.0000s   0.0001s  34819.0  n/a\""
        );
        let zero = CAPTURED.replace("22591.0", "0.0");
        assert!(parse_speed(&zero).is_err());
        assert!(parse_speed("").is_err());
    }

    #[test]
    fn the_floor_counts_two_x25519_and_one_signature_per_side() {
        // Round rates: X25519 20 µs, sign 25 µs, verify 100 µs.
        let s = Speed {
            x25519: 50_000.0,
            sign: 40_000.0,
            verify: 10_000.0,
        };
        let f = floor(s, 2);
        assert!((f.server_us - 65.0).abs() < 1e-9, "{f:?}");
        assert!((f.client_us - 140.0).abs() < 1e-9, "{f:?}");
        // 2 cores / 205 µs; a CA-signed leaf: / 305 µs; resumed: / 80 µs.
        assert!((f.full_per_s - 2e6 / 205.0).abs() < 1e-6, "{f:?}");
        assert!((f.ca_signed_per_s - 2e6 / 305.0).abs() < 1e-6, "{f:?}");
        assert!((f.resumed_per_s - 25_000.0).abs() < 1e-6, "{f:?}");
    }

    #[test]
    fn c1m_figures_come_from_the_setup_phase_of_summary_json() {
        let out = std::env::temp_dir().join(format!("c1m-xtask-tls-test-{}", std::process::id()));
        let dir = out.join("20261203-111000");
        std::fs::create_dir_all(&dir).expect("dir");
        let summary = serde_json::json!({
            "client": {"counters": {"connected": 2000}, "setup_rate": {"achieved_per_s": 1500.0}},
            "server": {"counters": {"tls_handshakes": {"full": 30, "resumed": 1970}}},
            "phases": [
                {"name": "setup",
                 "server": {"cpu_user_s": 0.5, "cpu_sys_s": 0.1},
                 "client": {"cpu_user_s": 1.0, "cpu_sys_s": 0.2}},
                {"name": "idle",
                 "server": {"cpu_user_s": 9.0, "cpu_sys_s": 9.0},
                 "client": {"cpu_user_s": 9.0, "cpu_sys_s": 9.0}}
            ]
        });
        std::fs::write(dir.join("summary.json"), summary.to_string()).expect("write");
        let m = read_c1m(&out, 2000);
        let _ = std::fs::remove_dir_all(&out);
        let m = m.expect("read");
        assert_eq!(m.per_s, 1500.0);
        // 0.6 s over 2,000 handshakes = 300 µs; 1.2 s = 600 µs (idle's CPU is not setup's).
        assert!((m.server_us - 300.0).abs() < 1e-9, "{m:?}");
        assert!((m.client_us - 600.0).abs() < 1e-9, "{m:?}");
        assert_eq!(m.resumed, 1970);
    }

    #[test]
    fn resumed_over_full_is_each_figure_divided() {
        let full = Measured {
            per_s: 1000.0,
            server_us: 400.0,
            client_us: 500.0,
            resumed: 0,
        };
        let resumed = Measured {
            per_s: 2500.0,
            server_us: 100.0,
            client_us: 250.0,
            resumed: 10,
        };
        assert_eq!(ratios(&full, &resumed), (2.5, 0.25, 0.5));
    }

    #[test]
    fn result_lines_are_split_into_their_numbers() {
        assert_eq!(
            fields("client 1000 0 998 1714722140 0.344 0.168"),
            vec![1000.0, 0.0, 998.0, 1714722140.0, 0.344, 0.168]
        );
        assert_eq!(
            fields("server 1000 0.401 0.074"),
            vec![1000.0, 0.401, 0.074]
        );
    }
}
