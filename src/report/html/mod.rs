//! `mongoload report --html OUT.html`: one self-contained HTML page (inline
//! SVG and CSS, no script, nothing fetched) from run logs' stage reports.
//! Per workload: throughput and p99 latency per interval and operation
//! over the run's time, with stage starts, failovers, audit findings and
//! stages whose thresholds failed marked; each operation's latency
//! percentile spectrum from its merged HdrHistograms; the stage and step
//! tables (the cells `mongoload report` prints, [`super::table`]); the
//! thresholds' verdicts; the run's identity. With `--compare`, the base
//! run is overlaid dashed on the new one.
//!
//! Pure: reports in, text out ([`page`]); the CLI writes the file.

pub(crate) mod svg;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use chrono::{DateTime, Utc};

use super::{decode_histogram, table, StageReport};
use svg::{escape, Band, Chart, Marker, MarkerKind, Series};

/// One run (its stage reports) as the page shows it.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    /// `base` or `new` in a comparison; empty otherwise.
    pub role: &'a str,
    /// The run log it was read from.
    pub source: &'a str,
    pub reports: &'a [StageReport],
}

/// The most lines a chart draws: more operations make more charts.
pub const MAX_SERIES: usize = 6;

/// Line colours, one per operation (cycled); red is the failovers'.
pub const PALETTE: [&str; 8] = [
    "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#bcbd22",
];

const STYLE: &str = r#"
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; max-width: 1600px; }
h1 { font-size: 1.5em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1.05em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #ddd; padding: 2px 6px; }
td.num { text-align: right; } th { background: #f3f3f3; }
td.fail { color: #b00; font-weight: bold; } td.pass { color: #070; }
pre { background: #f7f7f7; padding: 0.6em; overflow-x: auto; font-size: 12px; }
p.note { color: #555; font-size: 12px; margin-top: -0.6em; }
svg.chart { display: block; width: 100%; height: auto; margin: 0.5em 0 1.5em; background: #fff; }
svg.chart text { font: 11px system-ui, sans-serif; fill: #333; }
svg.chart text.title { font-size: 13px; font-weight: bold; }
svg.chart .axis line { stroke: #888; } svg.chart line.grid { stroke: #eee; }
svg.chart path.series { fill: none; stroke-width: 1.6; }
svg.chart path.dashed { stroke-dasharray: 5 3; }
svg.chart .legend line { stroke-width: 2; }
svg.chart .marker line { stroke-width: 1; }
svg.chart .marker.stage line { stroke: #999; stroke-dasharray: 2 2; } svg.chart .marker.stage text { fill: #666; }
svg.chart .marker.failover line { stroke: #e00; stroke-width: 2; } svg.chart .marker.failover text { fill: #e00; }
svg.chart .marker.audit line { stroke: #a0a; stroke-width: 2; } svg.chart .marker.audit text { fill: #a0a; }
svg.chart rect.band { fill: #fdd; } svg.chart text.band-label { fill: #b00; }
"#;

/// Seconds from `origin` to the RFC 3339 time `at` (`None` if unreadable).
fn offset(origin: Option<DateTime<Utc>>, at: &str) -> Option<f64> {
    let t = DateTime::parse_from_rfc3339(at).ok()?.with_timezone(&Utc);
    Some((t - origin?).num_milliseconds() as f64 / 1000.0)
}

fn origin(reports: &[StageReport]) -> Option<DateTime<Utc>> {
    reports
        .iter()
        .filter_map(|r| DateTime::parse_from_rfc3339(&r.run_started).ok())
        .map(|t| t.with_timezone(&Utc))
        .min()
}

/// Names in order of first appearance.
fn ordered<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for n in names {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// The per-interval figure `pick` of operation `op` (or of the stage with
/// `None`) over the run, one segment per stage, at each interval's
/// middle; intervals where `pick` gives `None` break the line.
fn over_time(
    reports: &[&StageReport],
    origin: Option<DateTime<Utc>>,
    op: Option<&str>,
    pick: impl Fn(&super::samples::SampleSeries, usize, f64) -> Option<f64>,
) -> Vec<Vec<(f64, f64)>> {
    let mut segments = Vec::new();
    for r in reports {
        let Some(samples) = &r.samples else { continue };
        let series = match op {
            Some(name) => match r.ops.iter().find(|o| o.op == name) {
                Some(o) => match &o.samples {
                    Some(s) => s,
                    None => continue,
                },
                None => continue,
            },
            None => &samples.all,
        };
        let Some(start) = offset(origin, &r.start) else {
            continue;
        };
        let t0 = start + r.warmup_seconds;
        let iv = samples.interval_seconds;
        let mut seg = Vec::new();
        for k in 0..series.len() {
            let x = t0 + (k as f64 + 0.5) * iv;
            match pick(series, k, iv) {
                Some(y) => seg.push((x, y)),
                None => segments.push(std::mem::take(&mut seg)),
            }
        }
        segments.push(seg);
    }
    segments.retain(|s| !s.is_empty());
    segments
}

/// Successful operations per second in interval `k`.
fn throughput(s: &super::samples::SampleSeries, k: usize, interval: f64) -> Option<f64> {
    (interval > 0.0).then(|| s.ok[k] as f64 / interval)
}

/// p99 in ms of interval `k` (none where nothing finished).
fn p99_ms(s: &super::samples::SampleSeries, k: usize, _: f64) -> Option<f64> {
    let v = *s.p99_ns.get(k)?;
    (v > 0).then(|| v as f64 / 1e6)
}

/// The percentile spectrum of a histogram: (log(1/(1−p)) position, ms)
/// from 0 % up to the percentile of its last value, 20 points per nine.
pub fn spectrum(h: &hdrhistogram::Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    // Past 1 − 1/count every percentile is the maximum.
    let max_x = (h.len() as f64).log10().max(1.0);
    let steps = (max_x * 20.0).ceil() as usize;
    (0..=steps)
        .map(|i| {
            let x = max_x * i as f64 / steps as f64;
            let p = svg::percentile_at(x);
            (x, h.value_at_quantile(p) as f64 / 1e6)
        })
        .collect()
}

/// Operation `op`'s histograms over `reports` added up (`None` when none
/// is readable).
fn merged_histogram(reports: &[&StageReport], op: &str) -> Option<hdrhistogram::Histogram<u64>> {
    // A decoded histogram does not grow: add them all to one that does.
    let mut all = hdrhistogram::Histogram::<u64>::new(3).ok()?;
    let mut any = false;
    for r in reports {
        let Some(o) = r.ops.iter().find(|o| o.op == op) else {
            continue;
        };
        let Some(h) = o.histogram.as_deref().and_then(decode_histogram) else {
            continue;
        };
        all.add(&h).ok()?;
        any = true;
    }
    any.then_some(all)
}

/// The marks of a workload's run on its time charts: stage starts,
/// failovers, audit findings, and bands over stages with a failed
/// threshold. `prefix` names the run in a comparison.
fn marks(
    reports: &[&StageReport],
    origin: Option<DateTime<Utc>>,
    prefix: &str,
) -> (Vec<Marker>, Vec<Band>) {
    let mut markers = Vec::new();
    let mut bands = Vec::new();
    for r in reports {
        let stage = table::stage_label(r);
        let start = offset(origin, &r.start);
        let end = offset(origin, &r.end);
        if let Some(x) = start {
            markers.push(Marker {
                x,
                kind: MarkerKind::Stage,
                label: format!("{prefix}{stage}"),
                title: format!("{prefix}stage {stage} ({}) from {}", r.mode, r.start),
            });
        }
        for f in &r.failovers {
            if let Some(x) = offset(origin, &f.at) {
                let on = f
                    .shard
                    .as_ref()
                    .map_or(String::new(), |s| format!(" on shard {s}"));
                let mut title = format!(
                    "{prefix}failover{on} at {}: {} → {}",
                    f.at,
                    f.from.as_deref().unwrap_or("?"),
                    f.to
                );
                if let Some(s) = f.no_primary_seconds {
                    let _ = write!(title, ", no primary {s:.3} s");
                }
                if let Some(s) = f.write_outage_seconds {
                    let _ = write!(title, ", write outage {s:.3} s");
                }
                markers.push(Marker {
                    x,
                    kind: MarkerKind::Failover,
                    label: format!("{prefix}failover{on}"),
                    title,
                });
            }
        }
        if let (Some(a), Some(x)) = (&r.audit, end) {
            if a.missing > 0 {
                markers.push(Marker {
                    x,
                    kind: MarkerKind::Audit,
                    label: format!("{prefix}audit: {} missing", a.missing),
                    title: format!(
                        "{prefix}audit of stage {stage}: {} acknowledged writes found missing ({} checked)",
                        a.missing, a.checked
                    ),
                });
            }
        }
        let failed: Vec<&str> = r
            .thresholds
            .iter()
            .filter(|v| v.failed() || v.breaches > 0)
            .map(|v| v.threshold.as_str())
            .collect();
        if let (false, Some(x0), Some(x1)) = (failed.is_empty(), start, end) {
            bands.push(Band {
                x0: x0 + r.warmup_seconds,
                x1,
                label: format!("{prefix}threshold breached"),
                title: format!("{prefix}stage {stage}: {}", failed.join(", ")),
            });
        }
    }
    (markers, bands)
}

/// Each run's reports of `workload`, with the run's start (the charts'
/// origin).
fn workload_reports<'r>(
    runs: &[Run<'r>],
    workload: &str,
) -> Vec<(Vec<&'r StageReport>, Option<DateTime<Utc>>)> {
    runs.iter()
        .map(|run| {
            (
                run.reports
                    .iter()
                    .filter(|r| r.workload == workload)
                    .collect(),
                origin(run.reports),
            )
        })
        .collect()
}

/// The end of the last stage of any run, in seconds from its origin: the
/// charts' x range.
fn last_end(per_run: &[(Vec<&StageReport>, Option<DateTime<Utc>>)]) -> f64 {
    let mut x_end: f64 = 0.0;
    for (rs, o) in per_run {
        for r in rs {
            if let Some(e) = offset(*o, &r.end) {
                x_end = x_end.max(e);
            }
        }
    }
    x_end
}

/// The stage markers and threshold bands of every run, each label
/// prefixed with its run's role when runs are overlaid.
fn runs_marks(
    runs: &[Run],
    per_run: &[(Vec<&StageReport>, Option<DateTime<Utc>>)],
) -> (Vec<Marker>, Vec<Band>) {
    let overlay = runs.len() > 1;
    let mut markers = Vec::new();
    let mut bands = Vec::new();
    for (run, (rs, o)) in runs.iter().zip(per_run) {
        let prefix = if overlay {
            format!("{}: ", run.role)
        } else {
            String::new()
        };
        let (m, b) = marks(rs, *o, &prefix);
        markers.extend(m);
        bands.extend(b);
    }
    (markers, bands)
}

/// Everything of one workload: its three charts, over one run or two
/// overlaid (the first, the base, dashed).
fn workload_section(out: &mut String, workload: &str, runs: &[Run]) {
    let per_run = workload_reports(runs, workload);
    let ops = ordered(
        per_run
            .iter()
            .flat_map(|(rs, _)| rs.iter().flat_map(|r| r.ops.iter().map(|o| o.op.as_str()))),
    );
    let overlay = runs.len() > 1;
    let x_end = last_end(&per_run);
    let (markers, bands) = runs_marks(runs, &per_run);
    // At most MAX_SERIES lines to a chart: the operations in groups, a
    // chart of each kind per group, each op keeping its colour.
    let per_chart = (MAX_SERIES / runs.len().max(1)).max(1);
    let groups: Vec<(usize, &[&str])> = ops
        .chunks(per_chart)
        .enumerate()
        .map(|(g, c)| (g * per_chart, c))
        .collect();
    let named = |title: &str, group: &[&str]| {
        if groups.len() > 1 {
            format!("{workload}: {title}: {}", group.join(", "))
        } else {
            format!("{workload}: {title}")
        }
    };
    type Pick = fn(&super::samples::SampleSeries, usize, f64) -> Option<f64>;
    let time_chart = |title: &str, y_label: &str, pick: Pick, (first, group): (usize, &[&str])| {
        let mut series = Vec::new();
        for (i, op) in group.iter().enumerate() {
            let i = first + i;
            for (j, (run, (rs, o))) in runs.iter().zip(&per_run).enumerate() {
                series.push(Series {
                    label: series_label(run, op, overlay),
                    color: PALETTE[i % PALETTE.len()],
                    dashed: overlay && j == 0,
                    segments: over_time(rs, *o, Some(op), pick),
                });
            }
        }
        Chart {
            title: named(title, group),
            x_label: "seconds since the run started".into(),
            y_label: y_label.into(),
            x_range: (0.0, x_end),
            x_ticks: Vec::new(),
            series,
            markers: markers.clone(),
            bands: bands.clone(),
        }
        .svg()
    };
    let _ = write!(
        out,
        r#"<section class="workload"><h2>Workload {}</h2>"#,
        escape(workload)
    );
    for &group in &groups {
        out.push_str(&time_chart(
            "throughput per interval (successful ops/s)",
            "ops/s",
            throughput,
            group,
        ));
    }
    for &group in &groups {
        out.push_str(&time_chart(
            "p99 latency per interval (ms)",
            "ms",
            p99_ms,
            group,
        ));
    }
    for &group in &groups {
        spectrum_chart(out, &named, runs, &per_run, group);
    }
    for figure in &KNEE_FIGURES {
        knee_chart(out, workload, runs, &per_run, figure);
    }
    out.push_str("</section>");
}

/// A figure of a capacity probe drawn against its rate: its name, unit
/// and value.
struct KneeFigure {
    name: &'static str,
    unit: &'static str,
    value: fn(&StageReport, &crate::report::ProbeReport) -> f64,
}

/// The knee twice: p99 and the error ratio against the probe rate.
const KNEE_FIGURES: [KneeFigure; 2] = [
    KneeFigure {
        name: "p99",
        unit: "ms",
        value: |r, _| r.latency_ns.p99 as f64 / 1e6,
    },
    KneeFigure {
        name: "errors",
        unit: "%",
        value: |_, p| p.error_ratio * 100.0,
    },
];

/// The capacity searches of a workload: each search's probes as `figure`
/// (p99, the error ratio) against rate (the knee), a mark at each
/// search's capacity. Nothing without a search.
fn knee_chart(
    out: &mut String,
    workload: &str,
    runs: &[Run],
    per_run: &[(Vec<&StageReport>, Option<DateTime<Utc>>)],
    figure: &KneeFigure,
) {
    let overlay = runs.len() > 1;
    let mut series = Vec::new();
    let mut markers = Vec::new();
    let mut max_x: f64 = 0.0;
    for (j, (run, (rs, _))) in runs.iter().zip(per_run).enumerate() {
        // One search: the probes from number 1 to the one with the result.
        let mut probes: Vec<(f64, f64)> = Vec::new();
        for r in rs {
            let Some(p) = &r.probe else {
                continue;
            };
            if p.number == 1 {
                probes.clear();
            }
            probes.push((p.rate, (figure.value)(r, p)));
            max_x = max_x.max(p.rate);
            let Some(result) = &p.result else {
                continue;
            };
            probes.sort_by(|a, b| a.0.total_cmp(&b.0));
            let n = series.len();
            let role = if overlay {
                format!("{}: ", run.role)
            } else {
                String::new()
            };
            series.push(Series {
                label: format!("{role}{} (search {}, {})", r.stage, n + 1, figure.name),
                color: PALETTE[n % PALETTE.len()],
                dashed: overlay && j == 0,
                segments: vec![std::mem::take(&mut probes)],
            });
            markers.push(Marker {
                x: result.capacity,
                kind: MarkerKind::Stage,
                label: format!("{role}{}/s", result.capacity),
                title: format!(
                    "{role}{}: capacity {} ops/s ({}, {} probes)",
                    r.stage, result.capacity, result.end, result.probes
                ),
            });
        }
    }
    if series.is_empty() {
        return;
    }
    series.truncate(MAX_SERIES);
    markers.truncate(MAX_SERIES);
    out.push_str(
        &Chart {
            title: format!(
                "{workload}: capacity searches: {} by probe rate ({})",
                figure.name, figure.unit
            ),
            x_label: "probe rate (ops/s)".into(),
            y_label: figure.unit.into(),
            x_range: (0.0, max_x * 1.05),
            x_ticks: Vec::new(),
            series,
            markers,
            bands: Vec::new(),
        }
        .svg(),
    );
}

/// The latency spectrum of a group of a workload's ops: each op's
/// histograms merged over the run.
fn spectrum_chart(
    out: &mut String,
    named: &dyn Fn(&str, &[&str]) -> String,
    runs: &[Run],
    per_run: &[(Vec<&StageReport>, Option<DateTime<Utc>>)],
    (first, group): (usize, &[&str]),
) {
    let overlay = runs.len() > 1;
    let mut series = Vec::new();
    let mut max_x: f64 = 1.0;
    for (i, op) in group.iter().enumerate() {
        let i = first + i;
        for (j, (run, (rs, _))) in runs.iter().zip(per_run).enumerate() {
            let points = merged_histogram(rs, op)
                .map(|h| spectrum(&h))
                .unwrap_or_default();
            if let Some(&(x, _)) = points.last() {
                max_x = max_x.max(x);
            }
            series.push(Series {
                label: series_label(run, op, overlay),
                color: PALETTE[i % PALETTE.len()],
                dashed: overlay && j == 0,
                segments: vec![points],
            });
        }
    }
    out.push_str(
        &Chart {
            title: named("latency by percentile (all stages, ms)", group),
            x_label: "percentile".into(),
            y_label: "ms".into(),
            x_range: (0.0, max_x),
            x_ticks: svg::percentile_ticks(max_x),
            series,
            markers: Vec::new(),
            bands: Vec::new(),
        }
        .svg(),
    );
}

/// A series' legend: the op, and the run's role in a comparison.
fn series_label(run: &Run, op: &str, overlay: bool) -> String {
    if overlay {
        format!("{op} ({})", run.role)
    } else {
        op.to_owned()
    }
}

/// An HTML table: the first `left` columns are names, the rest numbers.
fn html_table(out: &mut String, class: &str, header: &[&str], rows: &[Vec<String>], left: usize) {
    let _ = write!(out, r#"<table class="{class}"><thead><tr>"#);
    for h in header {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr></thead><tbody>");
    for row in rows {
        out.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            let cls = match cell.as_str() {
                _ if i < left => "",
                "fail" => r#" class="fail""#,
                "pass" => r#" class="pass""#,
                _ => r#" class="num""#,
            };
            let _ = write!(out, "<td{cls}>{}</td>", escape(cell));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
}

/// A threshold's figure as read: latency in ms, ratios as they are.
fn threshold_value(threshold: &str, value: Option<f64>) -> String {
    match value {
        None => "-".into(),
        Some(v) if threshold.trim_start().starts_with('p') => {
            format!("{} ms", table::ms((v * 1e9).round() as u64))
        }
        Some(v) => format!("{v:.6}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_owned(),
    }
}

/// The columns of the thresholds table.
pub const THRESHOLD_COLUMNS: [&str; 6] = [
    "workload",
    "stage",
    "threshold",
    "verdict",
    "value",
    "breaches",
];

fn run_tables(out: &mut String, run: &Run) {
    let role = if run.role.is_empty() {
        String::new()
    } else {
        format!(" ({})", run.role)
    };
    let _ = write!(out, "<h3>Stages{}</h3>", escape(&role));
    html_table(
        out,
        "stages",
        &table::STAGE_COLUMNS,
        &table::stage_rows(run.reports),
        2,
    );
    let _ = write!(out, "<p class=\"note\">{}</p>", escape(table::STAGE_LEGEND));
    let _ = write!(out, "<h3>Operations and steps{}</h3>", escape(&role));
    html_table(
        out,
        "steps",
        &table::STEP_COLUMNS,
        &table::steps_rows(run.reports),
        4,
    );
    let rows: Vec<Vec<String>> = run
        .reports
        .iter()
        .flat_map(|r| {
            r.thresholds.iter().map(move |v| {
                vec![
                    r.workload.clone(),
                    table::stage_label(r),
                    v.threshold.clone(),
                    v.verdict.clone(),
                    threshold_value(&v.threshold, v.value),
                    v.breaches.to_string(),
                ]
            })
        })
        .collect();
    let searches = table::search_rows(run.reports);
    if !searches.is_empty() {
        let _ = write!(out, "<h3>Capacity searches{}</h3>", escape(&role));
        html_table(out, "searches", &table::SEARCH_COLUMNS, &searches, 2);
    }
    let _ = write!(out, "<h3>Thresholds{}</h3>", escape(&role));
    if rows.is_empty() {
        out.push_str("<p>No thresholds in this run.</p>");
    } else {
        html_table(out, "thresholds", &THRESHOLD_COLUMNS, &rows, 3);
    }
}

/// The identity of each run: name, id, version, config hash, start.
fn identity(out: &mut String, runs: &[Run]) {
    let mut rows: Vec<Vec<String>> = Vec::new();
    for run in runs {
        let mut seen: BTreeMap<&str, ()> = BTreeMap::new();
        for r in run.reports {
            if seen.insert(&r.run_id, ()).is_some() {
                continue;
            }
            rows.push(vec![
                run.role.to_owned(),
                run.source.to_owned(),
                r.run_name.clone().unwrap_or_else(|| "-".into()),
                r.run_id.clone(),
                r.version.clone().unwrap_or_else(|| "-".into()),
                r.config_hash.clone().unwrap_or_else(|| "-".into()),
                r.run_started.clone(),
            ]);
        }
    }
    html_table(
        out,
        "identity",
        &[
            "role",
            "run log",
            "name",
            "run id",
            "mongoload",
            "config hash",
            "started",
        ],
        &rows,
        7,
    );
}

/// Each run's config as its run log keeps it (the plan `check-config`
/// prints, password redacted), or a note where the log has none.
fn config(out: &mut String, runs: &[Run]) {
    for run in runs {
        let ids = ordered(run.reports.iter().map(|r| r.run_id.as_str()));
        for id in ids {
            let text = run
                .reports
                .iter()
                .filter(|r| r.run_id == id)
                .find_map(|r| r.config.as_deref());
            let _ = write!(out, "<h3>Config of run {}</h3>", escape(id));
            match text {
                Some(text) => {
                    let _ = write!(out, r#"<pre class="config">{}</pre>"#, escape(text));
                }
                None => out.push_str(
                    "<p>This run log has no config text (mongoload before 0.3, or the run's first line is not in it), only its hash: <code>mongoload check-config</code> prints a config file's plan and hash to match.</p>",
                ),
            }
        }
    }
}

/// The whole page. One run (or several runs, each its own charts), or,
/// with `comparison` (the text `report --compare` prints), two runs
/// overlaid, base first.
pub fn page(runs: &[Run], comparison: Option<&str>) -> String {
    let title = match comparison {
        Some(_) => "mongoload run comparison".to_owned(),
        None => "mongoload run report".to_owned(),
    };
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body><h1>{}</h1>",
        escape(&title),
        escape(&title)
    );
    out.push_str("<h2>Run</h2>");
    identity(&mut out, runs);
    if let Some(text) = comparison {
        let _ = write!(
            out,
            r#"<h2>Comparison</h2><pre class="comparison">{}</pre>"#,
            escape(text)
        );
    }
    let groups: Vec<Vec<Run>> = if comparison.is_some() {
        vec![runs.to_vec()]
    } else {
        runs.iter().map(|r| vec![*r]).collect()
    };
    for group in &groups {
        let workloads = ordered(
            group
                .iter()
                .flat_map(|r| r.reports.iter().map(|r| r.workload.as_str())),
        );
        for w in workloads {
            workload_section(&mut out, w, group);
        }
    }
    out.push_str("<h2>Tables</h2>");
    for run in runs {
        run_tables(&mut out, run);
    }
    out.push_str("<h2>Config</h2>");
    config(&mut out, runs);
    out.push_str(
        "<p class=\"legend\">Dashed grey lines: stage starts (@N a cycle of a repeating schedule, * cut short); red: failovers; purple: acknowledged writes the audit found missing; shaded: a stage where a threshold failed or was breached. Latency includes failed operations; throughput counts successful ones.</p></body></html>\n",
    );
    out
}

/// The runs in `reports`, by run id, in order of first appearance.
pub fn split_runs(reports: &[StageReport]) -> Vec<Vec<StageReport>> {
    let ids = ordered(reports.iter().map(|r| r.run_id.as_str()));
    ids.iter()
        .map(|id| {
            reports
                .iter()
                .filter(|r| r.run_id == *id)
                .cloned()
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests;
