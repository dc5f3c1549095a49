//! `mongoload report --html`: a failover drill against the simulator's
//! replica set writes a run log (two stages, two operations, a threshold),
//! the real binary turns it into the HTML report, and Debian's headless
//! `chromium` renders it with every request sent to a dead proxy: the
//! charts are drawn (coloured pixels in the screenshot, one series per
//! operation), the tables in the rendered DOM hold the run log's figures,
//! the failover is marked, and the page refers to nothing outside itself.
//! Laid out at 1280 px, the report and a comparison (the same marks twice)
//! have every chart as wide as the page, no label over another and the
//! legends under the plots.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mongoload::report::StageReport;
use mongoload::sim::{self, FaultConfig, LatencyDist, ReplSetConfig, SimConfig};

const CHROMIUM: &str = "chromium";
const PASSWORD: &str = "html-s3cret-pw";

/// Debian's chromium, or a loud notice (a failure when `CI` is set).
fn chromium() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(CHROMIUM))
            .find(|p| p.is_file())
    });
    if found.is_some() {
        return found;
    }
    if std::env::var_os("CI").is_some() {
        panic!("{CHROMIUM} is missing and CI is set: install the Debian package chromium");
    }
    eprintln!(
        "\n!!!!!!!! SKIPPED: {CHROMIUM} is not installed; the HTML report was not rendered.\n\
         !!!!!!!! apt-get install -y chromium\n"
    );
    None
}

/// Runs headless chromium on `page` with `args`, every request through a
/// proxy that does not exist; its stdout. Killed after 60 s.
fn run_chromium(bin: &Path, profile: &Path, page: &Path, args: &[String]) -> Vec<u8> {
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--hide-scrollbars",
            "--proxy-server=127.0.0.1:9",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium {args:?} did not finish in 60 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "chromium {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Measures the layout of the report at `html` as chromium draws it at
/// 1280 px: a copy with a script appended (the report itself has none)
/// that reads every chart's width against the page's, every pair of
/// labels of a chart for overlap (by more than half a pixel each way) and
/// each legend entry against the plot's x axis, and writes what it found
/// into the DOM. Returns the number of charts and the problems.
fn layout_problems(bin: &Path, profile: &Path, html: &Path) -> (usize, Vec<String>) {
    const CHECK: &str = r#"<script>(function () {
  const problems = [];
  const body = document.body.getBoundingClientRect();
  const charts = document.querySelectorAll("svg.chart");
  charts.forEach((svg, k) => {
    const name = svg.querySelector("text.title").textContent;
    const r = svg.getBoundingClientRect();
    if (r.width < 0.95 * body.width) {
      problems.push(`${name}: ${r.width} px wide in a page of ${body.width}`);
    }
    const texts = [...svg.querySelectorAll("text")]
      .map((t) => ({ text: t.textContent, box: t.getBoundingClientRect() }))
      .filter((t) => t.box.width > 0);
    for (let i = 0; i < texts.length; i++) {
      for (let j = i + 1; j < texts.length; j++) {
        const a = texts[i].box, b = texts[j].box;
        const x = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const y = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (x > 0.5 && y > 0.5) {
          problems.push(`${name}: "${texts[i].text}" overlaps "${texts[j].text}"`);
        }
      }
    }
    const axis = svg.querySelector("g.axis line").getBoundingClientRect();
    svg.querySelectorAll("g.legend").forEach((g) => {
      if (g.getBoundingClientRect().top < axis.bottom) {
        problems.push(`${name}: the legend's "${g.textContent}" is over the plot`);
      }
    });
  });
  const pre = document.createElement("pre");
  pre.id = "layout";
  pre.textContent = JSON.stringify({ charts: charts.length, problems });
  document.body.appendChild(pre);
})();</script>"#;
    let page = std::fs::read_to_string(html).unwrap();
    let probe = html.with_extension("layout.html");
    std::fs::write(&probe, page.replace("</body>", &format!("{CHECK}</body>"))).unwrap();
    let dom = String::from_utf8(run_chromium(
        bin,
        profile,
        &probe,
        &["--dump-dom".into(), "--window-size=1280,1000".into()],
    ))
    .unwrap();
    let start = dom
        .find(r#"<pre id="layout">"#)
        .expect("the layout script ran")
        + 17;
    let json = &dom[start..start + dom[start..].find("</pre>").unwrap()];
    let json = json.replace("&quot;", "\"").replace("&amp;", "&");
    let v: serde_json::Value =
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    let problems = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_owned())
        .collect();
    (v["charts"].as_u64().unwrap() as usize, problems)
}

/// The cells of each row of the `<table class="CLASS">` in `dom`.
fn table_rows(dom: &str, class: &str) -> Vec<Vec<String>> {
    let start = dom
        .find(&format!(r#"<table class="{class}">"#))
        .unwrap_or_else(|| panic!("no table {class} in the DOM"));
    let table = &dom[start..start + dom[start..].find("</table>").unwrap()];
    let body = &table[table.find("<tbody>").unwrap()..];
    body.split("<tr>")
        .skip(1)
        .map(|row| {
            row.split("<td")
                .skip(1)
                .map(|cell| {
                    let text = &cell[cell.find('>').unwrap() + 1..cell.find("</td>").unwrap()];
                    text.replace("&lt;", "<")
                        .replace("&gt;", ">")
                        .replace("&amp;", "&")
                })
                .collect()
        })
        .collect()
}

/// `ms` (three significant digits) is `ns` read in milliseconds.
fn same_ms(cell: &str, ns: u64) {
    let shown: f64 = cell.parse().unwrap_or_else(|_| panic!("{cell:?}"));
    let want = ns as f64 / 1e6;
    assert!(
        (shown - want).abs() <= want * 0.006 + 0.0006,
        "{cell} ms shown, {want} ms in the run log"
    );
}

/// Pixels of the screenshot near each of `colours` (anti-aliased lines
/// blend with the white background: a tolerance per channel), and the
/// number of pixels.
fn pixels_near(png_path: &Path, colours: &[[u8; 3]]) -> (Vec<usize>, usize) {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_path).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    assert!(channels >= 3, "{:?}", info.color_type);
    let pixels = &buf[..info.buffer_size()];
    let counts = colours
        .iter()
        .map(|c| {
            pixels
                .chunks(channels)
                .filter(|p| (0..3).all(|i| p[i].abs_diff(c[i]) <= 40))
                .count()
        })
        .collect();
    (counts, pixels.len() / channels)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_html_report_of_a_failover_run_renders_offline_with_the_run_logs_figures() {
    let Some(chromium) = chromium() else { return };
    let mut set = ReplSetConfig::new("rs0", 3);
    set.election = sim::ElectionTime::fixed(Duration::from_secs(1));
    let config = SimConfig {
        faults: FaultConfig {
            latency: Some(LatencyDist::Fixed(Duration::from_millis(3))),
            ..Default::default()
        },
        // A password in the URI: the report shows the config without it.
        auth: Some(sim::AuthUser {
            user: "htmluser".into(),
            password: PASSWORD.into(),
        }),
        ..Default::default()
    };
    let sim = sim::start_replset(config, set).await.unwrap();
    let set = sim.replset().unwrap().clone();
    let uri = format!(
        "mongodb://htmluser:{PASSWORD}@{},{}/?replicaSet=rs0",
        set.hosts()[0],
        set.hosts()[1]
    );
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.jsonl");
    let toml = format!(
        r#"[target]
uri = "{uri}"
database = "mlthtml"
connect_timeout = "2s"
server_selection_timeout = "10s"
operation_timeout = "10s"
[http]
listen = "127.0.0.1:0"
[run]
name = "html-drill"
shutdown_grace = "5s"
log = "{log}"
[[workloads]]
name = "w"
kind = "mixed"
max_inflight = 128
seed = 5
[workloads.mixed]
insert = 1
update = 0
delete = 0
find = 1
doc_size = 128
initial_docs = 20
collection = "h"
[[workloads.stages]]
name = "warm"
rate = 100
duration = "4s"
[[workloads.stages]]
name = "drill"
rate = 150
duration = "8s"
[[workloads.thresholds]]
check = "p99 < 20s"
"#,
        log = log.display()
    );
    let (_file, running) = crate::common::start_daemon(&toml).await;
    // Step down 3 s into the drill (4 s of warm first).
    tokio::time::sleep(Duration::from_secs(7)).await;
    set.step_down().expect("a primary steps down");
    tokio::time::timeout(Duration::from_secs(40), running.wait())
        .await
        .expect("the run ends");
    drop(sim);
    let mut reports: Vec<StageReport> = crate::common::read_run_log(&log);
    assert_eq!(reports.len(), 2, "{reports:?}");
    // A run log is input like any other: a stage name with markup in it
    // (config validation aside) must reach the page as text.
    const HOSTILE: &str = "<script>document.title='pwned'</script>warm";
    reports[0].stage = HOSTILE.to_owned();
    let lines: Vec<String> = reports
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect();
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    let failovers: usize = reports.iter().map(|r| r.failovers.len()).sum();
    assert!(failovers >= 1, "the step-down is in the run log");

    // The real binary writes the report; stdout keeps report's table.
    let out_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("html-report");
    std::fs::create_dir_all(&out_dir).unwrap();
    let html_path = out_dir.join("report.html");
    let _ = std::fs::remove_file(&html_path);
    let out = Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["report", "--html"])
        .arg(&html_path)
        .arg(&log)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("drill"));
    let html = std::fs::read_to_string(&html_path).unwrap();
    // The run's config, as check-config prints it, without the password.
    assert!(!html.contains(PASSWORD), "the password is in the page");
    assert!(html.contains(r#"<pre class="config">"#), "no config shown");
    assert!(
        html.contains("htmluser:***@"),
        "the config's URI is not shown redacted"
    );
    assert!(
        html.contains("mlthtml"),
        "the config's database is not shown"
    );
    // Nothing to fetch: no URL (the config text has an `http:` section,
    // not a URL), no src or href, no script, no CSS import.
    for bad in [
        "http://", "https://", "file://", "src=", "href=", "<script", "@import", "url(",
    ] {
        assert!(!html.contains(bad), "the page has {bad:?}");
    }

    let profile = tempfile::tempdir().unwrap();
    let dom = String::from_utf8(run_chromium(
        &chromium,
        profile.path(),
        &html_path,
        &["--dump-dom".into()],
    ))
    .unwrap();
    // Rendered to its end through the dead proxy.
    assert!(dom.contains(r#"<p class="legend">"#), "{dom}");
    // The stage's name reached the page as text, not markup.
    assert!(!dom.contains("<script"), "{dom}");
    assert!(dom.contains("&lt;script&gt;document.title"), "{dom}");
    assert!(dom.contains("html-drill"), "{dom}");

    // One chart each for throughput, latency and the spectrum, one series
    // per operation each, every one drawn.
    assert_eq!(dom.matches("<svg").count(), 3, "{dom}");
    let paths: Vec<&str> = dom.split(r#"<path class="series""#).skip(1).collect();
    assert_eq!(paths.len(), 3 * 2, "two ops, three charts");
    for p in &paths {
        let d = &p[p.find(" d=\"").unwrap() + 4..];
        let d = &d[..d.find('"').unwrap()];
        assert!(d.matches('L').count() >= 5, "a series barely drawn: {d}");
    }
    for op in ["insert", "find"] {
        assert_eq!(dom.matches(&format!(r#"data-series="{op}""#)).count(), 3);
    }
    // The failovers are marked on both time charts; the stages too.
    assert_eq!(
        dom.matches(r#"<g class="marker failover">"#).count(),
        2 * failovers
    );
    assert_eq!(dom.matches(r#"<g class="marker stage">"#).count(), 2 * 2);

    // The tables hold the run log's figures.
    let stages = table_rows(&dom, "stages");
    assert_eq!(stages.len(), reports.len());
    for (row, r) in stages.iter().zip(&reports) {
        assert_eq!(row[0], r.workload);
        assert_eq!(row[1], r.stage);
        assert_eq!(row[3], r.operations.ok.to_string());
        let ops_s: f64 = row[4].parse().unwrap();
        assert!((ops_s - r.ops_per_sec).abs() <= 0.05, "{row:?} {r:?}");
        assert_eq!(
            row[7],
            mongoload::report::table::ips_cell(r.ips_99, r.whole_seconds, 0.99)
        );
        same_ms(&row[8], r.latency_ns.p50);
        same_ms(&row[10], r.latency_ns.p99);
        same_ms(&row[12], r.latency_ns.max);
        assert_eq!(row[13], r.errors_total().to_string());
    }
    let steps = table_rows(&dom, "steps");
    let op_rows: Vec<&Vec<String>> = steps.iter().filter(|row| row[3] == "-").collect();
    let want: Vec<(String, String, u64, u64)> = reports
        .iter()
        .flat_map(|r| {
            r.ops.iter().map(|o| {
                (
                    r.stage.clone(),
                    o.op.clone(),
                    o.operations.ok,
                    o.latency_ns.p99,
                )
            })
        })
        .collect();
    assert_eq!(op_rows.len(), want.len());
    for (row, (stage, op, ok, p99)) in op_rows.iter().zip(&want) {
        assert_eq!((&row[1], &row[2]), (stage, op));
        assert_eq!(row[4], ok.to_string());
        same_ms(&row[8], *p99);
    }
    let verdicts = table_rows(&dom, "thresholds");
    let want: Vec<(String, String)> = reports
        .iter()
        .flat_map(|r| {
            r.thresholds
                .iter()
                .map(|v| (v.threshold.clone(), v.verdict.clone()))
        })
        .collect();
    assert_eq!(want.len(), 2, "one threshold in two stages");
    let shown: Vec<(String, String)> = verdicts
        .iter()
        .map(|row| (row[2].clone(), row[3].clone()))
        .collect();
    assert_eq!(shown, want);
    let ident = table_rows(&dom, "identity");
    assert_eq!(ident[0][3], reports[0].run_id);
    assert_eq!(Some(&ident[0][4]), reports[0].version.as_ref());
    assert_eq!(Some(&ident[0][5]), reports[0].config_hash.as_ref());

    // Laid out at 1280 px: full-width charts, no label over another.
    let (charts, problems) = layout_problems(&chromium, profile.path(), &html_path);
    assert_eq!(charts, 3);
    assert!(problems.is_empty(), "{problems:#?}");

    // The screenshot: the charts' colours are on it.
    let shot = out_dir.join("report.png");
    let _ = std::fs::remove_file(&shot);
    run_chromium(
        &chromium,
        profile.path(),
        &html_path,
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1280,1100".into(),
        ],
    );
    // The first two line colours of the report's palette: insert, find.
    assert_eq!(
        mongoload::report::html::PALETTE[..2],
        ["#1f77b4", "#2ca02c"]
    );
    let (near, total) = pixels_near(&shot, &[[0x1f, 0x77, 0xb4], [0x2c, 0xa0, 0x2c]]);
    eprintln!(
        "HTML report {}; screenshot {}: of {total} pixels, {} in insert's colour, {} in find's",
        html_path.display(),
        shot.display(),
        near[0],
        near[1]
    );
    for (op, n) in ["insert", "find"].iter().zip(&near) {
        assert!(
            *n >= 400,
            "{op}'s lines have {n} pixels: not drawn (a legend alone has ~100)"
        );
    }

    // --compare with --html: the same run as base and new, overlaid (the
    // base dashed); the exit status stays the comparison's.
    let compared = out_dir.join("compare.html");
    let out = Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["report", "--html"])
        .arg(&compared)
        .arg("--compare")
        .args([&log, &log])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let html = std::fs::read_to_string(&compared).unwrap();
    assert_eq!(html.matches(r#"<path class="series"#).count(), 2 * 3 * 2);
    assert_eq!(
        html.matches(r#"<path class="series dashed""#).count(),
        3 * 2
    );
    assert!(html.contains(r#"data-series="find (base)""#));
    assert!(html.contains(r#"<pre class="comparison">"#));
    // Both runs' marks at the same times: their labels still apart.
    let (charts, problems) = layout_problems(&chromium, profile.path(), &compared);
    assert_eq!(charts, 3);
    assert!(problems.is_empty(), "{problems:#?}");

    // An HTML file that cannot be written: exit 2, naming the file.
    let unwritable = out_dir.join("no-such-dir").join("r.html");
    let out = Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["report", "--html"])
        .arg(&unwritable)
        .arg(&log)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cannot write the HTML report") && err.contains("no-such-dir/r.html"),
        "{err}"
    );
}
