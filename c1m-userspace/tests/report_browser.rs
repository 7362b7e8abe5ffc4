//! `report.html` and `c1m compare`'s compare.html opened in headless Chromium (Debian's
//! `chromium` package): a screenshot is taken, and every chart is present in the DOM with
//! `data-points` > 0 and SVG paths that hold points. No root needed; no network.
#![allow(clippy::unwrap_used)] // panics are the assertions

use std::{
    io::Read as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use c1m::compare::{self, input::RunSpec};
use c1m::report::{
    IntervalRecorder,
    fixture::{self, FIXTURE_CHARTS},
    write_run,
};

const CHROMIUM: &str = "/usr/bin/chromium";

fn require_chromium() {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: run `cargo xtask test` (it installs Debian's chromium), or `apt-get install -y chromium`"
    );
}

/// Runs headless Chromium on `page` with `extra` flags; returns stdout.
fn chromium(page: &Path, extra: &[String]) -> String {
    let profile = fixture::test_dir("chromium-profile");
    let mut child = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Drain stdout while waiting: --dump-dom writes more than a pipe holds.
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("chromium did not finish within 120 s on {}", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "chromium failed: {status:?}");
    let out = reader.join().unwrap();
    drop(profile);
    String::from_utf8_lossy(&out).into_owned()
}

/// Screenshot of `page` at 1400×4000; checks it is a PNG of that size with content.
fn screenshot(page: &Path) -> PathBuf {
    let png = page.with_extension("png");
    chromium(
        page,
        &[
            format!("--screenshot={}", png.display()),
            "--window-size=1400,4000".to_owned(),
        ],
    );
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    assert_eq!((be(16), be(20)), (1400, 4000), "screenshot size");
    // A blank page of that size compresses to a few KiB; charts and tables do not.
    assert!(
        bytes.len() > 100_000,
        "screenshot looks empty: {} bytes",
        bytes.len()
    );
    eprintln!(
        "screenshot: {} (kept after the test with C1M_KEEP_TEST_DIRS=1)",
        png.display()
    );
    png
}

/// In the DOM Chromium built: each chart element exists, says data-points > 0 and
/// holds SVG paths with at least two points.
fn assert_charts(dom: &str, ids: &[&str]) {
    for id in ids {
        let at = dom
            .find(&format!("id=\"{id}\""))
            .unwrap_or_else(|| panic!("chart {id} missing from the DOM"));
        let start = dom[..at].rfind('<').unwrap();
        let end = at + dom[at..].find("</figure>").unwrap();
        let el = &dom[start..end];
        let n: u64 = el
            .split("data-points=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{id}: no data-points"));
        assert!(n > 0, "{id}: data-points = 0");
        assert!(el.contains("<svg"), "{id}: no svg");
        let paths: Vec<&str> = el
            .split("<path d=\"")
            .skip(1)
            .filter_map(|p| p.split('"').next())
            .collect();
        assert!(!paths.is_empty(), "{id}: no path");
        let most = paths
            .iter()
            .map(|d| d.matches(['M', 'L']).count())
            .max()
            .unwrap();
        assert!(most >= 2, "{id}: paths have no line ({paths:?})");
        for label in ["xlabel", "ylabel"] {
            assert!(
                el.contains(&format!("class=\"{label}\"")),
                "{id}: no {label}"
            );
        }
    }
}

#[test]
fn report_renders_in_chromium() {
    require_chromium();
    let dir = fixture::test_dir("browser");
    write_run(&dir, &fixture::sample_run()).unwrap();
    let report = dir.join("report.html");
    screenshot(&report);
    let dom = chromium(&report, &["--dump-dom".to_owned()]);
    assert!(
        dom.contains("<h1>c1m run"),
        "the page did not load: {}",
        &dom[..dom.len().min(500)]
    );
    assert_charts(&dom, &FIXTURE_CHARTS);
    assert_eq!(dom.matches("class=\"chart\"").count(), FIXTURE_CHARTS.len());
    // Every phase has its band in every time chart.
    for phase in ["setup", "idle", "push", "teardown"] {
        assert_eq!(
            dom.matches(&format!("data-phase=\"{phase}\"")).count(),
            7,
            "{phase}"
        );
    }
}

#[test]
fn compare_page_renders_in_chromium() {
    require_chromium();
    let (a, b) = (
        fixture::test_dir("browser-a"),
        fixture::test_dir("browser-b"),
    );
    let (run, snaps) = fixture::sample_run_with_snapshots();
    write_run(&a, &run).unwrap();
    // The .hlog files c1m run leaves, for the latency-over-time charts.
    let mut rec = IntervalRecorder::new(run.started_unix_ms);
    for (side, s) in &snaps {
        rec.observe(side, s).unwrap();
    }
    rec.write(&a).unwrap();
    rec.write(&b).unwrap();
    let mut other = run.clone();
    other.config.rate_per_s = 100_000;
    // Less memory per connection: one name is the best of that column.
    other.per_connection.server_user_bytes =
        other.per_connection.server_user_bytes.map(|v| v * 0.8);
    for s in &mut other.samples {
        s.t_s *= 0.8;
        s.server_rss_per_connection_bytes = s.server_rss_per_connection_bytes.map(|v| v * 0.8);
    }
    write_run(&b, &other).unwrap();
    let out = a.join("cmp");
    let spec = |p: &Path, n: &str| RunSpec {
        dir: p.to_path_buf(),
        name: n.to_owned(),
    };
    let code = compare::cli::run(
        compare::cli::CompareArgs {
            runs: vec![spec(&a, "A"), spec(&b, "B")],
            out: out.clone(),
            baseline: None,
            verbose: false,
        },
        &mut std::io::sink(),
    )
    .unwrap();
    assert_eq!(code, 0);
    let page = out.join(compare::HTML);
    screenshot(&page);
    let dom = chromium(&page, &["--dump-dom".to_owned()]);
    assert_charts(&dom, &COMPARE_CHARTS);
    // Small multiples: 21 figures over time, 4 histograms over time at 2 quantiles, 4
    // distributions; each run's phases in a strip under each time chart.
    assert_eq!(dom.matches("class=\"chart\"").count(), 21 + 8 + 4);
    let el = dom
        .split("id=\"chart-conn-server-app-open\"")
        .nth(1)
        .unwrap();
    let el = el.split("</figure>").next().unwrap();
    assert_eq!(el.matches("class=\"lane\"").count(), 2 * 4);
    assert_answer_leads(&page);
}

/// Issue 32, point 2: compare.html leads with the answer. In a copy of the page (the
/// page itself runs no script), a script measures, as Chromium laid it out at 1,400 px:
/// the headline table's right edge and bottom, the first chart's top and the page's
/// scroll width. The table is within 1,400 px and above the first chart, and no cell
/// widens the page.
fn assert_answer_leads(page: &Path) {
    let scratch = fixture::test_dir("browser-measure");
    let copy = scratch.join("compare.html");
    let html = std::fs::read_to_string(page).unwrap();
    let script = "<script>\
        const t = document.getElementById('headline').getBoundingClientRect();\
        const c = document.querySelector('figure.chart').getBoundingClientRect();\
        document.body.setAttribute('data-measured', [t.right, t.bottom, c.top,\
            document.documentElement.scrollWidth].map(Math.round).join(','));\
        </script>";
    std::fs::write(&copy, html.replace("</body>", &format!("{script}</body>"))).unwrap();
    let dom = chromium(
        &copy,
        &[
            "--dump-dom".to_owned(),
            "--window-size=1400,4000".to_owned(),
        ],
    );
    let measured: Vec<i64> = dom
        .split("data-measured=\"")
        .nth(1)
        .and_then(|m| m.split('"').next())
        .unwrap_or_else(|| panic!("the script did not run: {}", &dom[..dom.len().min(300)]))
        .split(',')
        .map(|v| v.parse().unwrap())
        .collect();
    let [right, bottom, chart_top, scroll_width] = measured[..] else {
        panic!("{measured:?}");
    };
    assert!(right <= 1400, "the table ends at {right} px");
    assert!(
        bottom < chart_top,
        "table bottom {bottom} px, first chart at {chart_top} px"
    );
    assert!(scroll_width <= 1400, "the page is {scroll_width} px wide");
    // The table itself: a row per name, the best of a column marked.
    let table = dom.split("id=\"headline\"").nth(1).unwrap();
    let table = table.split("</table>").next().unwrap();
    assert_eq!(table.matches("<tr>").count(), 1 + 2, "{table}");
    assert!(table.contains("class=\"best\""), "{table}");
    drop(scratch);
}

/// Charts of compare.html for two runs of the fixture with their .hlog files: a few of
/// every kind (a figure over time, latency over time, a distribution).
const COMPARE_CHARTS: [&str; 8] = [
    "chart-conn-server-app-open",
    "chart-conn-client-kernel-established",
    "chart-setup-rate-client-app-connected-s",
    "chart-memory-observer-rss",
    "chart-cpu-server",
    "chart-latt-client-connect_us-p50",
    "chart-latt-client-push_message_us-p99",
    "chart-lat-client-connect_us",
];
