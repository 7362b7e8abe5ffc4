//! The TLS handshake as figures (issue 34): a `c1m run --tls` records both TLS
//! histograms for every connection and says so in its summary, report and config; a
//! plain run says nothing of TLS; a client that does not trust the server's certificate
//! has its failures named in words in the live plain lines. Root: each run is in a
//! private network namespace; without root the tests say SKIP loudly. Ports
//! 23600–23649, control 23690–23699 (inside the namespace).
#![allow(clippy::unwrap_used)] // panics are the assertions in tests

use std::{process::Command, time::Duration};

use serde_json::Value;

use crate::lab_util::{bounded, c1m_run, fresh_dir, root_or_skip, run_folder};

/// `c1m run --plain ARGS` within 4 minutes: (stdout, summary.json, run folder).
fn run(out: &std::path::Path, args: &[&str]) -> (String, Value, std::path::PathBuf) {
    let mut cmd = c1m_run(out, args);
    // One line per sentence: the summary's prose is not wrapped mid-phrase.
    cmd.env("COLUMNS", "400");
    let r = bounded(cmd, Duration::from_secs(240));
    let stdout = String::from_utf8_lossy(&r.stdout).into_owned();
    let dir = run_folder(out);
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap())
            .unwrap_or_else(|e| panic!("{e}\n{stdout}\n{}", String::from_utf8_lossy(&r.stderr)));
    (stdout, summary, dir)
}

fn count(summary: &Value, hist: &str) -> Option<u64> {
    summary
        .pointer(&format!("/client/percentiles/{hist}/count"))
        .and_then(Value::as_u64)
}

#[test]
fn a_tls_run_times_every_handshake_and_a_plain_run_says_nothing_of_tls() {
    if !root_or_skip("a_tls_run_times_every_handshake_and_a_plain_run_says_nothing_of_tls") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let out = fresh_dir("tls-figures");
    let (stdout, s, dir) = run(
        out.path(),
        &[
            "--tls",
            "-n",
            "1000",
            "--idle",
            "1s",
            "--ports",
            "23600-23603",
        ],
    );
    assert!(stdout.contains("== c1m run: complete"), "{stdout}");
    // Every connection: its TLS handshake from the call and from the schedule (the
    // lab's default --rate schedules each), then its WebSocket handshake.
    for h in [
        "tls_handshake_us",
        "tls_open_from_schedule_us",
        "ws_handshake_us",
        "connect_us",
    ] {
        assert_eq!(count(&s, h), Some(1000), "{h}\n{stdout}");
        assert!(dir.join(format!("client-{h}.hgrm")).exists(), "{h}.hgrm");
    }
    assert_eq!(
        s.pointer("/config/tls").unwrap(),
        &serde_json::json!({"resumption": false, "key": "ecdsa"})
    );
    for part in [
        "1,000 connections, wss mode,",
        "TLS: ECDSA certificate, resumption off; client handshakes 1,000 full, 0 resumed",
        "TLS handshake (call: ClientHello → handshake done)",
        "client tls_handshake (ms)",
    ] {
        assert!(stdout.contains(part), "{part:?} in\n{stdout}");
    }
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("TLS handshakes"), "the TLS card");
    assert!(html.contains("No TLS handshake failed."));

    let plain_out = fresh_dir("tls-figures-plain");
    let (stdout, s, dir) = run(
        plain_out.path(),
        &["-n", "200", "--idle", "1s", "--ports", "23610-23613"],
    );
    assert!(stdout.contains("== c1m run: complete"), "{stdout}");
    assert!(stdout.contains("200 connections, ws mode,"), "{stdout}");
    assert_eq!(count(&s, "tls_handshake_us"), Some(0));
    assert_eq!(s.pointer("/config/tls"), Some(&Value::Null));
    let summary_text = stdout
        .split("== c1m run:")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    let tls_lines: Vec<&str> = summary_text
        .lines()
        .filter(|l| l.contains("TLS") || l.contains("tls_"))
        .collect();
    assert!(tls_lines.is_empty(), "{tls_lines:#?}");
    assert!(!dir.join("client-tls_handshake_us.hgrm").exists());
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(!html.contains("TLS handshakes"));
}

#[test]
fn an_untrusted_certificate_is_named_in_words_live_and_after() {
    if !root_or_skip("an_untrusted_certificate_is_named_in_words_live_and_after") {
        return;
    }
    c1m::netns::enter_private().expect("private netns");
    let out = fresh_dir("tls-untrusted");
    // A certificate the lab's server does not present: the client trusts only it.
    let other = out.path().join("other.pem");
    let key = out.path().join("other-key.pem");
    let made = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:P-256", "-nodes", "-days", "2"])
        .args(["-subj", "/CN=127.0.0.1", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&other)
        .output()
        .unwrap();
    assert!(made.status.success(), "openssl");
    let runs = out.path().join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let tls_ca = other.to_string_lossy().into_owned();
    let (stdout, s, dir) = run(
        &runs,
        &[
            "--tls", "--tls-ca", &tls_ca, "-n", "50", "--idle", "1s", "--ports", "23620",
        ],
    );
    assert_eq!(
        s.pointer("/client/counters/tls_errors/untrusted_certificate")
            .and_then(Value::as_u64),
        Some(50),
        "{stdout}"
    );
    // The live plain lines: the reasons in words, one value.
    assert!(
        stdout
            .lines()
            .any(|l| l.contains(" client_tls_failures=50_untrusted_certificate ")),
        "{stdout}"
    );
    assert!(
        stdout.contains("client failed: 50 untrusted certificate"),
        "{stdout}"
    );
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("TLS failures by reason"));
    assert!(html.contains("untrusted certificate"));
}
