//! Tests of the HTML report: escaping, the charts (series per op, a search,
//! the percentile spectrum, samples with gaps) and the tables' figures.

use super::*;
use crate::report::samples::{SampleSeries, Samples};
use crate::report::table::tests::report;
use crate::report::{Counts, FailoverReport, LatencyNs, OpReport};

fn with_ops(mut r: StageReport, ops: &[&str]) -> StageReport {
    let mut h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
    for v in 1..=1000u64 {
        h.record(v * 1000).unwrap();
    }
    let series = SampleSeries {
        ok: vec![10, 20, 30],
        error: vec![0, 0, 0],
        p50_ns: vec![1_000_000, 0, 3_000_000],
        p99_ns: vec![2_000_000, 0, 4_000_000],
        p999_ns: vec![2_000_000, 0, 4_000_000],
    };
    r.samples = Some(Samples {
        interval_seconds: 1.0,
        all: series.clone(),
    });
    r.ops = ops
        .iter()
        .map(|op| OpReport {
            op: (*op).into(),
            operations: Counts { ok: 60, error: 0 },
            ops_per_sec: 20.0,
            latency_ns: LatencyNs::default(),
            histogram: Some(crate::report::stats::encode_histogram(&h)),
            steps: Vec::new(),
            samples: Some(series.clone()),
        })
        .collect();
    r
}

#[test]
fn every_string_from_the_log_is_escaped() {
    let mut r = with_ops(
        report(
            "<script>alert(1)</script>",
            "<script>x</script>",
            60,
            3.0,
            1,
        ),
        &["<img src=x onerror=alert(2)>"],
    );
    r.run_name = Some("</title><script>".into());
    r.config = Some("target: mongodb://h/<script>".into());
    r.failovers = vec![FailoverReport {
        at: "2026-11-29T12:00:01.000Z".into(),
        from: Some("<a>".into()),
        to: "b".into(),
        no_primary_seconds: None,
        write_outage_seconds: None,
        shard: Some("<s>".into()),
    }];
    let runs = [Run {
        role: "",
        source: "<runs>.jsonl",
        reports: std::slice::from_ref(&r),
    }];
    let html = page(&runs, Some("<script>compare</script>"));
    assert!(!html.contains("<script"), "{html}");
    assert!(!html.contains("<img"), "{html}");
    assert!(!html.contains("<a>"), "{html}");
    assert!(html.contains("&lt;script&gt;x&lt;/script&gt;"));
    assert!(html.contains("&lt;img src=x onerror=alert(2)&gt;"));
    assert!(html.contains(r#"<pre class="config">target: mongodb://h/&lt;script&gt;</pre>"#));
}

#[test]
fn a_search_is_drawn_as_p99_against_rate_with_its_capacity_marked() {
    use crate::report::{ProbeReport, SearchResultReport};
    let probe = |number: u32, rate: f64, p99_ms: u64, last: bool| {
        let mut r = with_ops(
            report("w", "capacity", 100, 5.0, p99_ms * 1_000_000),
            &["find"],
        );
        r.cycle = u64::from(number) - 1;
        r.probe = Some(ProbeReport {
            number,
            rate,
            verdict: if p99_ms < 30 { "pass" } else { "fail" }.into(),
            error_ratio: if p99_ms < 30 { 0.0 } else { 0.02 },
            result: last.then(|| SearchResultReport {
                capacity: 750.0,
                end: "converged".into(),
                probes: 4,
            }),
        });
        r
    };
    let rs = [
        probe(1, 250.0, 8, false),
        probe(2, 500.0, 9, false),
        probe(3, 1000.0, 140, false),
        probe(4, 750.0, 13, true),
    ];
    let runs = [Run {
        role: "",
        source: "runs.jsonl",
        reports: &rs,
    }];
    let html = page(&runs, None);
    assert!(html.contains("w: capacity searches: p99 by probe rate (ms)"));
    // The probes in order of rate, and the capacity marked.
    assert!(html.contains("capacity (search 1, p99)"), "{html}");
    // And the error ratio the same way.
    assert!(html.contains("w: capacity searches: errors by probe rate (%)"));
    assert!(html.contains("capacity (search 1, errors)"), "{html}");
    assert!(html.contains("750/s"));
    assert!(html.contains("<h3>Capacity searches</h3>"));
    for cell in &table::search_rows(&rs)[0] {
        assert!(html.contains(&format!(">{}</td>", escape(cell))), "{cell}");
    }
    // Without a search, neither.
    let plain = with_ops(report("w", "hold", 60, 3.0, 9_000_000), &["find"]);
    let runs = [Run {
        role: "",
        source: "runs.jsonl",
        reports: std::slice::from_ref(&plain),
    }];
    let html = page(&runs, None);
    assert!(!html.contains("capacity searches") && !html.contains("Capacity searches"));
}

#[test]
fn a_page_has_a_series_per_op_and_the_tables_figures() {
    let r = with_ops(report("w", "hold", 60, 3.0, 9_000_000), &["insert", "find"]);
    let runs = [Run {
        role: "",
        source: "runs.jsonl",
        reports: std::slice::from_ref(&r),
    }];
    let html = page(&runs, None);
    // Three charts of two series each.
    assert_eq!(html.matches("<svg").count(), 3);
    assert_eq!(html.matches(r#"<path class="series""#).count(), 6);
    assert!(html.contains(r#"data-series="insert""#));
    // The stage table's cells are report's.
    for cell in &table::stage_rows(std::slice::from_ref(&r))[0] {
        assert!(html.contains(&format!(">{}</td>", escape(cell))), "{cell}");
    }
    // Nothing leaves the file.
    assert!(!html.contains("http://") && !html.contains("https://"));
    // Overlaid: twice the series, the base dashed.
    let runs = [
        Run {
            role: "base",
            ..runs[0]
        },
        Run {
            role: "new",
            ..runs[0]
        },
    ];
    let html = page(&runs, Some("no regression"));
    assert_eq!(html.matches(r#"<path class="series"#).count(), 12);
    assert_eq!(html.matches(r#"<path class="series dashed""#).count(), 6);
    assert!(html.contains(r#"data-series="find (base)""#));
}

#[test]
fn many_ops_are_drawn_in_charts_of_at_most_max_series_lines() {
    let ops = ["a", "b", "c", "d", "e", "f", "g"];
    let r = with_ops(report("w", "hold", 60, 3.0, 9_000_000), &ops);
    let one = Run {
        role: "",
        source: "runs.jsonl",
        reports: std::slice::from_ref(&r),
    };
    for (runs, per_op) in [
        (vec![one], 1),
        (
            vec![
                Run {
                    role: "base",
                    ..one
                },
                Run { role: "new", ..one },
            ],
            2,
        ),
    ] {
        let html = page(&runs, runs.get(1).map(|_| "no regression"));
        let charts: Vec<&str> = html.split("<svg").skip(1).collect();
        // Seven ops: 6 + 1 lines alone, 3 + 3 + 1 (two lines each) overlaid.
        let groups = if per_op == 1 { 2 } else { 3 };
        assert_eq!(charts.len(), 3 * groups);
        for c in &charts {
            let n = c.matches(r#"<path class="series"#).count();
            assert!((1..=MAX_SERIES).contains(&n), "{n} lines");
        }
        // Each op in one chart of each kind, in its own colour.
        for (i, op) in ops.iter().enumerate() {
            let label = if per_op == 1 {
                op.to_string()
            } else {
                format!("{op} (new)")
            };
            let drawn = format!(r#"data-series="{label}" d="#);
            assert_eq!(html.matches(&drawn).count(), 3, "{op}");
            let coloured = format!(r#"stroke="{}""#, PALETTE[i % PALETTE.len()]);
            assert!(html.contains(&coloured));
        }
        assert!(html.contains("w: throughput per interval (successful ops/s): a, b"));
    }
}

#[test]
fn samples_become_points_in_the_run_s_time_with_gaps() {
    let mut r = with_ops(report("w", "hold", 60, 3.0, 1), &["insert"]);
    r.run_started = "2026-11-29T11:59:50.000Z".into();
    r.warmup_seconds = 2.0;
    let o = origin(std::slice::from_ref(&r));
    let rs = [&r];
    // Stage starts 10 s into the run, plus 2 s of warm-up.
    let t = over_time(&rs, o, Some("insert"), throughput);
    assert_eq!(t, [vec![(12.5, 10.0), (13.5, 20.0), (14.5, 30.0)]]);
    // No latency where nothing finished: the line breaks.
    let l = over_time(&rs, o, Some("insert"), p99_ms);
    assert_eq!(l, [vec![(12.5, 2.0)], vec![(14.5, 4.0)]]);
    assert!(over_time(&rs, o, Some("nope"), throughput).is_empty());
}

#[test]
fn the_spectrum_reads_the_histogram_at_each_nine() {
    let mut h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
    for v in 1..=10_000u64 {
        h.record(v * 1000).unwrap();
    }
    let s = spectrum(&h);
    assert_eq!(s.first().unwrap().0, 0.0);
    assert!((s.last().unwrap().0 - 4.0).abs() < 1e-9);
    let at = |x: f64| {
        s.iter()
            .find(|p| (p.0 - x).abs() < 1e-9)
            .unwrap_or_else(|| panic!("no point at {x}"))
            .1
    };
    // 90 % of 1..10,000 µs is 9 ms, 99 % 9.9 ms (3 significant digits).
    assert!((at(1.0) - 9.0).abs() < 0.01, "{}", at(1.0));
    assert!((at(2.0) - 9.9).abs() < 0.01, "{}", at(2.0));
    assert!(spectrum(&hdrhistogram::Histogram::<u64>::new(3).unwrap()).is_empty());
}

#[test]
fn an_ops_histograms_add_up_over_its_stages() {
    let encoded = |values: std::ops::RangeInclusive<u64>| {
        let mut h = crate::report::decode_histogram(&crate::report::stats::encode_histogram(
            &hdrhistogram::Histogram::<u64>::new(3).unwrap(),
        ))
        .unwrap();
        h.auto(true);
        for v in values {
            h.record(v).unwrap();
        }
        crate::report::stats::encode_histogram(&h)
    };
    let mut a = with_ops(report("w", "a", 60, 3.0, 1), &["insert"]);
    let mut b = a.clone();
    a.ops[0].histogram = Some(encoded(1..=100));
    // The second stage's values are far beyond the first's range.
    b.ops[0].histogram = Some(encoded(1_000_000_000..=1_000_000_099));
    let h = merged_histogram(&[&a, &b], "insert").unwrap();
    assert_eq!(h.len(), 200);
    assert!(h.max() >= 1_000_000_000);
    assert!(merged_histogram(&[&a, &b], "find").is_none());
}

#[test]
fn a_run_log_without_samples_or_histograms_still_makes_a_page() {
    // mongoload 0.1's lines, or merged cluster rows: tables, no lines.
    let mut r = report("w", "hold", 60, 3.0, 1);
    r.ops = with_ops(report("w", "hold", 60, 3.0, 1), &["find"]).ops;
    r.ops[0].samples = None;
    r.ops[0].histogram = None;
    r.samples = None;
    let runs = [Run {
        role: "",
        source: "old.jsonl",
        reports: std::slice::from_ref(&r),
    }];
    let html = page(&runs, None);
    assert_eq!(html.matches("<svg").count(), 3);
    assert_eq!(html.matches(r#" d="""#).count(), 3, "{html}");
    assert!(html.contains(r#"<table class="stages">"#));
    assert!(html.ends_with("</html>\n"));
}

#[test]
fn threshold_values_read_as_their_figure() {
    assert_eq!(threshold_value("p99 < 50ms", Some(0.0123)), "12.3 ms");
    assert_eq!(
        threshold_value("error_ratio < 0.001", Some(0.0025)),
        "0.0025"
    );
    assert_eq!(threshold_value("achieved_ratio > 0.99", Some(1.0)), "1");
    assert_eq!(threshold_value("p99 < 50ms", None), "-");
}
