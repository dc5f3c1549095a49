//! Tests of `compare`: steps matched by op and step, the gate with and
//! without samples, noise against a shift, pooled repeats.

use super::*;
use crate::report::table::tests::report;
use crate::report::{Counts, LatencyNs, OpReport, StepReport};

#[test]
fn steps_are_compared_by_op_and_step() {
    let with = |ok: u64, p99: u64| {
        let mut r = report("sb", "run", ok, 10.0, p99);
        r.ops = vec![OpReport {
            op: "transaction".into(),
            operations: Counts { ok, error: 0 },
            ops_per_sec: ok as f64 / 10.0,
            latency_ns: LatencyNs {
                p99,
                ..LatencyNs::default()
            },
            histogram: None,
            steps: vec![StepReport {
                step: "point_select".into(),
                requests: Counts {
                    ok: 10 * ok,
                    error: 0,
                },
                requests_per_sec: ok as f64,
                latency_ns: LatencyNs {
                    p99: p99 / 10,
                    ..LatencyNs::default()
                },
                histogram: None,
                samples: None,
            }],
            samples: None,
        }];
        r
    };
    let t = render_steps(&[with(100, 10_000_000)], &[with(90, 20_000_000)]);
    let rows: Vec<Vec<&str>> = t
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 2, "{t}");
    assert_eq!(
        rows[0],
        [
            "sb",
            "run",
            "transaction",
            "-",
            "10.0",
            "9.0",
            "-10.0%",
            "10.0",
            "20.0",
            "+100.0%"
        ]
    );
    assert_eq!(rows[1][3..7], ["point_select", "100.0", "90.0", "-10.0%"]);
}

#[test]
fn percent_parses_with_or_without_sign() {
    assert_eq!("5%".parse::<Percent>(), Ok(Percent(5.0)));
    assert_eq!(" 2.5 ".parse::<Percent>(), Ok(Percent(2.5)));
    assert!("-1%".parse::<Percent>().is_err());
    assert!("lots".parse::<Percent>().is_err());
    assert!("150%".parse::<Percent>().is_err());
}

fn gates(max_drop: f64) -> Gates {
    Gates {
        max_drop: Percent(max_drop),
        ..Gates::default()
    }
}

#[test]
fn without_samples_a_drop_beyond_the_gate_is_a_regression() {
    let base = [
        report("w", "warm", 6_000, 60.0, 2_000_000),
        report("w", "peak", 60_000, 60.0, 10_000_000),
        report("w", "gone", 100, 10.0, 1_000_000),
    ];
    let new = [
        // 4 % slower: within 5 %.
        report("w", "warm", 5_760, 60.0, 2_000_000),
        // 10 % slower and p99 doubled.
        report("w", "peak", 54_000, 60.0, 20_000_000),
        report("w", "added", 100, 10.0, 1_000_000),
    ];
    let c = compare(&base, &new, gates(5.0));
    let stages: Vec<&str> = c.rows.iter().map(|r| r.stage.as_str()).collect();
    assert_eq!(stages, ["warm", "peak", "gone", "added"]);
    assert!(!c.rows[0].regression);
    assert!((c.rows[0].throughput_pct.unwrap() + 4.0).abs() < 1e-9);
    assert!(c.rows[1].regression);
    assert!(c.rows[1].figures.is_empty());
    assert!((c.rows[1].throughput_pct.unwrap() + 10.0).abs() < 1e-9);
    assert!((c.rows[1].p99_pct.unwrap() - 100.0).abs() < 1e-9);
    assert!(!c.rows[2].regression && c.rows[2].new.is_none());
    assert!(!c.rows[3].regression && c.rows[3].base.is_none());
    assert_eq!(c.regressions(), 1);

    // A looser gate lets the same runs pass.
    assert_eq!(compare(&base, &new, gates(15.0)).regressions(), 0);

    let text = render_comparison(&c, false);
    let peak: Vec<&str> = text
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("peak"))
        .collect();
    assert!(peak[0].contains("-10.0% (no statistics)"), "{text}");
    assert!(peak[0].ends_with("REGRESSION"), "{text}");
    assert!(
        peak[1].contains("+100.0% (no statistics: not gated)"),
        "{text}"
    );
    assert!(
        text.contains("only in base") && text.contains("only in new"),
        "{text}"
    );
    assert!(
        text.lines().last().unwrap().starts_with("1 regression(s)"),
        "{text}"
    );
}

/// A report of `secs` 1 s samples around `rate` ops/s and `p99` ms
/// (deterministic noise of ±`noise` relative), `errors` failed a second.
fn sampled(stage: &str, secs: usize, rate: f64, p99: f64, errors: u64, seed: u64) -> StageReport {
    use crate::report::samples::{SampleSeries, Samples};
    let mut x = seed;
    let mut next = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((x >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    };
    let mut s = SampleSeries::default();
    for _ in 0..secs {
        s.ok.push((rate * (1.0 + 0.02 * next())).round() as u64);
        s.error.push(errors);
        let p = p99 * (1.0 + 0.03 * next());
        s.p50_ns.push((p / 4.0 * 1e6) as u64);
        s.p99_ns.push((p * 1e6) as u64);
        s.p999_ns.push((p * 2.0 * 1e6) as u64);
    }
    let ok: u64 = s.ok.iter().sum();
    let mut r = report("w", stage, ok, secs as f64, (p99 * 1e6) as u64);
    r.samples = Some(Samples {
        interval_seconds: 1.0,
        all: s,
    });
    r
}

#[test]
fn noise_is_no_change_and_a_shift_is_significant() {
    let base = [sampled("open", 60, 1000.0, 20.0, 0, 1)];
    // The same plan again: no significant change.
    let same = [sampled("open", 60, 1000.0, 20.0, 0, 2)];
    let c = compare(&base, &same, Gates::default());
    assert_eq!(c.regressions(), 0, "{}", render_comparison(&c, false));
    assert_eq!(c.rows[0].figures.len(), 5);
    for f in &c.rows[0].figures {
        assert!(
            f.change().starts_with("no significant change ("),
            "{:?}: {}",
            f.figure,
            f.change()
        );
    }
    // Open loop, 10 % more latency: throughput unchanged, latency
    // regresses, significantly.
    let slower = [sampled("open", 60, 1000.0, 22.0, 0, 3)];
    let c = compare(&base, &slower, Gates::default());
    let p99 = c.rows[0]
        .figures
        .iter()
        .find(|f| f.figure == Figure::P99)
        .unwrap();
    assert!(p99.regression && p99.significant, "{p99:?}");
    let (d, e) = p99.diff.percent(&p99.base).unwrap();
    assert!((d - 10.0).abs() < 2.0 && e < 2.0, "{d} ± {e}");
    let (median_change, p) = p99.robust.unwrap();
    assert!((median_change - 10.0).abs() < 2.0 && p < 1e-4, "{p99:?}");
    assert!(
        p99.change().starts_with("+1") && p99.change().ends_with("(medians), significant"),
        "{}",
        p99.change()
    );
    let ops = &c.rows[0].figures[0];
    assert!(!ops.regression && !ops.significant, "{ops:?}");
    assert_eq!(c.regressions(), 1);
    // A looser latency gate passes the same rise.
    let loose = Gates {
        max_latency_rise: Percent(15.0),
        ..Gates::default()
    };
    assert_eq!(compare(&base, &slower, loose).regressions(), 0);
    let text = render_comparison(&c, false);
    assert!(
        text.lines()
            .any(|l| l.contains("p99 ms") && l.ends_with("REGRESSION")),
        "{text}"
    );

    // Closed loop: 10 % less throughput is caught.
    let fewer = [sampled("open", 60, 900.0, 20.0, 0, 4)];
    let c = compare(&base, &fewer, Gates::default());
    let ops = &c.rows[0].figures[0];
    assert!(ops.regression, "{ops:?}");
    assert!(ops.change().starts_with("−10."), "{}", ops.change());
    // And errors: 1 % of operations failing where none did.
    let failing = [sampled("open", 60, 1000.0, 20.0, 10, 5)];
    let c = compare(&base, &failing, Gates::default());
    let e = &c.rows[0].figures[1];
    assert_eq!(e.figure, Figure::ErrorRatio);
    assert!(e.regression, "{e:?}");
}

/// `sampled` with one operation `transaction` of two steps whose
/// samples are `read` and `write`'s (p99 in ms).
fn with_steps(seed: u64, read_p99: f64, write_p99: f64) -> StageReport {
    let mut r = sampled("open", 60, 1000.0, 20.0, 0, seed);
    let series = |p99: f64, seed: u64| sampled("open", 60, 1000.0, p99, 0, seed).samples;
    let step = |name: &str, p99: f64, seed: u64| StepReport {
        step: name.into(),
        requests: Counts {
            ok: 60_000,
            error: 0,
        },
        requests_per_sec: 1000.0,
        latency_ns: LatencyNs {
            p99: (p99 * 1e6) as u64,
            ..LatencyNs::default()
        },
        histogram: None,
        samples: series(p99, seed).map(|s| s.all),
    };
    r.ops = vec![OpReport {
        op: "transaction".into(),
        operations: r.operations,
        ops_per_sec: r.ops_per_sec,
        latency_ns: r.latency_ns,
        histogram: None,
        steps: vec![
            step("read", read_p99, seed + 100),
            step("write", write_p99, seed + 200),
        ],
        samples: r.samples.as_ref().map(|s| s.all.clone()),
    }];
    r
}

#[test]
fn a_step_is_gated_with_statistics_where_both_logs_have_its_samples() {
    let base = [with_steps(1, 2.0, 10.0)];
    let same = [with_steps(2, 2.0, 10.0)];
    let c = compare(&base, &same, Gates::default());
    assert_eq!(c.regressions(), 0, "{}", render_comparison(&c, true));
    let steps: Vec<&str> = c.rows.iter().filter_map(|d| d.step.as_deref()).collect();
    assert_eq!(steps, ["read", "write"]);
    // One step 10 % slower, the operation as a whole not beyond its
    // gate: the step's row is the regression.
    let slower = [with_steps(3, 2.0, 11.0)];
    let c = compare(&base, &slower, Gates::default());
    let regressed: Vec<(Option<&str>, Option<&str>)> = c
        .rows
        .iter()
        .filter(|d| d.regression)
        .map(|d| (d.op.as_deref(), d.step.as_deref()))
        .collect();
    assert_eq!(regressed, [(Some("transaction"), Some("write"))]);
    let text = render_comparison(&c, false);
    assert!(
        text.lines()
            .any(|l| l.contains("transaction/write") && l.ends_with("REGRESSION")),
        "{text}"
    );
    // A base log without step samples (before 0.3): no step row.
    let mut old = with_steps(1, 2.0, 10.0);
    for s in &mut old.ops[0].steps {
        s.samples = None;
    }
    let c = compare(&[old], &slower, Gates::default());
    assert!(c.rows.iter().all(|d| d.step.is_none()), "{c:?}");
}

#[test]
fn repeated_stages_are_pooled() {
    let mut second = report("w", "peak", 30_000, 60.0, 50_000_000);
    second.cycle = 1;
    let base = [report("w", "peak", 90_000, 60.0, 10_000_000), second];
    let (_, pools) = pool(&base);
    let key = (
        "w".to_owned(),
        "peak".to_owned(),
        "-".to_owned(),
        "-".to_owned(),
    );
    let p = pools[&key].pooled();
    assert_eq!(p.ops_per_sec, 1000.0);
    assert_eq!(p.p99_ns, 50_000_000);
}
