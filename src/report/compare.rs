//! `mongoload report --compare BASE NEW`: per-stage deltas of throughput
//! and p99 between two runs, matched by workload and stage name, and the
//! verdict a pipeline gates on (throughput dropped beyond a threshold).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::table::{ms, render};
use super::StageReport;

/// A percentage given as `5%` or `5` (both mean five per cent).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Percent(pub f64);

impl FromStr for Percent {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let num = t.strip_suffix('%').unwrap_or(t).trim();
        match num.parse::<f64>() {
            Ok(v) if v.is_finite() && (0.0..=100.0).contains(&v) => Ok(Percent(v)),
            _ => Err(format!(
                "expected a percentage between 0 and 100 such as 5%, got {s:?}"
            )),
        }
    }
}

impl fmt::Display for Percent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.0)
    }
}

/// One stage pooled over its occurrences in one run (repeats, cycles):
/// throughput over their total measured time, the worst p99.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pooled {
    pub ops_per_sec: f64,
    pub p99_ns: u64,
}

/// One row of a comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Delta {
    pub workload: String,
    pub stage: String,
    pub base: Option<Pooled>,
    pub new: Option<Pooled>,
    /// Throughput change in per cent (negative: slower); `None` when a side
    /// is missing or the base had no throughput.
    pub throughput_pct: Option<f64>,
    pub p99_pct: Option<f64>,
    /// Throughput dropped by more than the threshold.
    pub regression: bool,
}

/// The comparison of two runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub rows: Vec<Delta>,
    pub max_drop: Percent,
}

impl Comparison {
    /// Stages whose throughput dropped beyond the threshold.
    pub fn regressions(&self) -> usize {
        self.rows.iter().filter(|r| r.regression).count()
    }
}

/// A stage's identity across runs: workload and stage name.
type Key = (String, String);

/// Per key, in the order keys first appear: successful count over the
/// summed measured time (a rate), and the worst p99.
fn pool_by<K: Ord + Clone>(
    entries: impl Iterator<Item = (K, u64, f64, u64)>,
) -> (Vec<K>, BTreeMap<K, Pooled>) {
    let mut order = Vec::new();
    let mut sums: BTreeMap<K, (u64, f64, u64)> = BTreeMap::new();
    for (key, ok, secs, p99) in entries {
        let e = sums.entry(key.clone()).or_insert_with(|| {
            order.push(key);
            (0, 0.0, 0)
        });
        e.0 += ok;
        e.1 += secs;
        e.2 = e.2.max(p99);
    }
    let pooled = sums
        .into_iter()
        .map(|(k, (ok, secs, p99))| {
            let ops_per_sec = if secs > 0.0 { ok as f64 / secs } else { 0.0 };
            (
                k,
                Pooled {
                    ops_per_sec,
                    p99_ns: p99,
                },
            )
        })
        .collect();
    (order, pooled)
}

fn pool(reports: &[StageReport]) -> (Vec<Key>, BTreeMap<Key, Pooled>) {
    pool_by(reports.iter().map(|r| {
        let key = (r.workload.clone(), r.stage.clone());
        (key, r.operations.ok, r.duration_seconds, r.latency_ns.p99)
    }))
}

fn pct(base: f64, new: f64) -> Option<f64> {
    (base > 0.0).then(|| (new - base) / base * 100.0)
}

/// Matches the stages of `base` and `new` by workload and stage name (in
/// the order they first appear in `base`, then those only in `new`) and
/// flags the ones whose throughput fell by more than `max_drop`. A stage
/// missing from either run is shown, never a regression.
pub fn compare(base: &[StageReport], new: &[StageReport], max_drop: Percent) -> Comparison {
    let (base_order, base_pooled) = pool(base);
    let (new_order, new_pooled) = pool(new);
    let mut keys = base_order;
    for k in new_order {
        if !base_pooled.contains_key(&k) {
            keys.push(k);
        }
    }
    let rows = keys
        .into_iter()
        .map(|key| {
            let b = base_pooled.get(&key).copied();
            let n = new_pooled.get(&key).copied();
            let (throughput_pct, p99_pct) = match (b, n) {
                (Some(b), Some(n)) => (
                    pct(b.ops_per_sec, n.ops_per_sec),
                    pct(b.p99_ns as f64, n.p99_ns as f64),
                ),
                _ => (None, None),
            };
            Delta {
                regression: throughput_pct.is_some_and(|d| -d > max_drop.0),
                workload: key.0,
                stage: key.1,
                base: b,
                new: n,
                throughput_pct,
                p99_pct,
            }
        })
        .collect();
    Comparison { rows, max_drop }
}

fn signed(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:+.1}%"))
}

/// The comparison as a table and a closing verdict line.
pub fn render_comparison(c: &Comparison) -> String {
    let header = [
        "workload",
        "stage",
        "base ops/s",
        "new ops/s",
        "Δops/s",
        "base p99ms",
        "new p99ms",
        "Δp99",
        "verdict",
    ];
    let rows: Vec<Vec<String>> = c
        .rows
        .iter()
        .map(|d| {
            let verdict = match (&d.base, &d.new) {
                (None, _) => "only in new",
                (_, None) => "only in base",
                _ if d.regression => "REGRESSION",
                _ => "ok",
            };
            let ops =
                |p: &Option<Pooled>| p.map_or("-".to_owned(), |p| format!("{:.1}", p.ops_per_sec));
            let p99 = |p: &Option<Pooled>| p.map_or("-".to_owned(), |p| ms(p.p99_ns));
            vec![
                d.workload.clone(),
                d.stage.clone(),
                ops(&d.base),
                ops(&d.new),
                signed(d.throughput_pct),
                p99(&d.base),
                p99(&d.new),
                signed(d.p99_pct),
                verdict.to_owned(),
            ]
        })
        .collect();
    let mut out = render(&header, &rows, 2);
    let n = c.regressions();
    if n == 0 {
        out.push_str(&format!(
            "no stage lost more than {} of its throughput\n",
            c.max_drop
        ));
    } else {
        out.push_str(&format!(
            "{n} stage(s) lost more than {} of their throughput\n",
            c.max_drop
        ));
    }
    out
}

/// An operation's or a step's identity across runs: workload, stage, op
/// and step (`-` for the operation itself).
type StepKey = (String, String, String, String);

/// Per operation and step: count over the measured time of every
/// occurrence (a rate), and the worst p99.
fn pool_steps(reports: &[StageReport]) -> (Vec<StepKey>, BTreeMap<StepKey, Pooled>) {
    pool_by(reports.iter().flat_map(|r| {
        r.ops.iter().flat_map(move |o| {
            let key = |step: &str| {
                (
                    r.workload.clone(),
                    r.stage.clone(),
                    o.op.clone(),
                    step.to_owned(),
                )
            };
            let secs = r.duration_seconds;
            std::iter::once((key("-"), o.operations.ok, secs, o.latency_ns.p99)).chain(
                o.steps
                    .iter()
                    .map(move |st| (key(&st.step), st.requests.ok, secs, st.latency_ns.p99)),
            )
        })
    }))
}

/// Per operation (step `-`) and per step of each stage: base and new rate
/// and p99 with their change. For reading, not gating: the verdict is the
/// stage's (scheduled operations).
pub fn render_steps(base: &[StageReport], new: &[StageReport]) -> String {
    let (mut keys, b) = pool_steps(base);
    let (new_order, n) = pool_steps(new);
    for k in new_order {
        if !b.contains_key(&k) {
            keys.push(k);
        }
    }
    let header = [
        "workload",
        "stage",
        "op",
        "step",
        "base /s",
        "new /s",
        "Δ/s",
        "base p99ms",
        "new p99ms",
        "Δp99",
    ];
    let rows: Vec<Vec<String>> = keys
        .into_iter()
        .map(|k| {
            let (bp, np) = (b.get(&k).copied(), n.get(&k).copied());
            let rate =
                |p: Option<Pooled>| p.map_or("-".to_owned(), |p| format!("{:.1}", p.ops_per_sec));
            let p99 = |p: Option<Pooled>| p.map_or("-".to_owned(), |p| ms(p.p99_ns));
            let (dr, dp) = match (bp, np) {
                (Some(b), Some(n)) => (
                    pct(b.ops_per_sec, n.ops_per_sec),
                    pct(b.p99_ns as f64, n.p99_ns as f64),
                ),
                _ => (None, None),
            };
            vec![
                k.0,
                k.1,
                k.2,
                k.3,
                rate(bp),
                rate(np),
                signed(dr),
                p99(bp),
                p99(np),
                signed(dp),
            ]
        })
        .collect();
    render(&header, &rows, 4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::table::tests::report;

    #[test]
    fn steps_are_compared_by_op_and_step() {
        use crate::report::{Counts, LatencyNs, OpReport, StepReport};
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
                }],
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

    #[test]
    fn a_drop_beyond_the_threshold_is_a_regression() {
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
        let c = compare(&base, &new, Percent(5.0));
        let stages: Vec<&str> = c.rows.iter().map(|r| r.stage.as_str()).collect();
        assert_eq!(stages, ["warm", "peak", "gone", "added"]);
        assert!(!c.rows[0].regression);
        assert!((c.rows[0].throughput_pct.unwrap() + 4.0).abs() < 1e-9);
        assert!(c.rows[1].regression);
        assert!((c.rows[1].throughput_pct.unwrap() + 10.0).abs() < 1e-9);
        assert!((c.rows[1].p99_pct.unwrap() - 100.0).abs() < 1e-9);
        assert!(!c.rows[2].regression && c.rows[2].new.is_none());
        assert!(!c.rows[3].regression && c.rows[3].base.is_none());
        assert_eq!(c.regressions(), 1);

        // A looser threshold lets the same runs pass.
        assert_eq!(compare(&base, &new, Percent(15.0)).regressions(), 0);

        let text = render_comparison(&c);
        let peak = text
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some("peak"))
            .unwrap();
        assert!(
            peak.contains("-10.0%") && peak.contains("+100.0%"),
            "{text}"
        );
        assert!(peak.ends_with("REGRESSION"), "{text}");
        assert!(
            text.contains("only in base") && text.contains("only in new"),
            "{text}"
        );
        assert!(
            text.ends_with("1 stage(s) lost more than 5% of their throughput\n"),
            "{text}"
        );
    }

    #[test]
    fn repeated_stages_are_pooled() {
        let mut second = report("w", "peak", 30_000, 60.0, 50_000_000);
        second.cycle = 1;
        let base = [report("w", "peak", 90_000, 60.0, 10_000_000), second];
        let (_, pooled) = pool(&base);
        let p = pooled[&("w".to_owned(), "peak".to_owned())];
        assert_eq!(p.ops_per_sec, 1000.0);
        assert_eq!(p.p99_ns, 50_000_000);
    }
}
