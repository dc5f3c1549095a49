//! `mongoload report --compare BASE NEW`: each stage's (and each
//! operation's) throughput, error ratio and latency percentiles in two
//! runs, matched by workload, stage and op name, as means with confidence
//! intervals over the stages' per-interval samples; the verdict a
//! pipeline gates on is a significant change (Welch's t) beyond a gate.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::samples::SampleSeries;
use super::significance::{estimate, mann_whitney, median, welch, Difference, Estimate};
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
pub(crate) struct Pooled {
    pub ops_per_sec: f64,
    pub p99_ns: u64,
}

/// What `report --compare` gates on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Gates {
    /// The largest significant throughput drop that passes.
    pub max_drop: Percent,
    /// The largest significant rise of p50, p99 or p99.9 that passes.
    pub max_latency_rise: Percent,
    /// The largest significant rise of the error ratio that passes, in
    /// percentage points.
    pub max_error_rise: Percent,
    /// The confidence level of the intervals and tests (0.99).
    pub confidence: f64,
}

impl Default for Gates {
    fn default() -> Self {
        Gates {
            max_drop: Percent(5.0),
            max_latency_rise: Percent(5.0),
            max_error_rise: Percent(0.1),
            confidence: 0.99,
        }
    }
}

/// A figure compared between runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Figure {
    /// Successful operations per second.
    Throughput,
    /// Failed over finished operations.
    ErrorRatio,
    P50,
    P99,
    P999,
}

impl Figure {
    pub(crate) const ALL: [Figure; 5] = [
        Figure::Throughput,
        Figure::ErrorRatio,
        Figure::P50,
        Figure::P99,
        Figure::P999,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Figure::Throughput => "ops/s",
            Figure::ErrorRatio => "error %",
            Figure::P50 => "p50 ms",
            Figure::P99 => "p99 ms",
            Figure::P999 => "p99.9 ms",
        }
    }

    /// The figure's value in each interval that has one.
    fn values(self, s: &SampleSeries, interval: f64) -> Vec<f64> {
        let n = s.len();
        // An interval whose results' latency went to a later one (handed
        // over late) has none: 0.
        let lat = |v: &[u64]| {
            v.iter()
                .filter(|&&ns| ns > 0)
                .map(|&ns| ns as f64 / 1e6)
                .collect()
        };
        match self {
            Figure::Throughput => s.ok.iter().map(|&ok| ok as f64 / interval).collect(),
            Figure::ErrorRatio => (0..n)
                .filter(|&i| s.ok[i] + s.error[i] > 0)
                .map(|i| s.error[i] as f64 / (s.ok[i] + s.error[i]) as f64 * 100.0)
                .collect(),
            Figure::P50 => lat(&s.p50_ns),
            Figure::P99 => lat(&s.p99_ns),
            Figure::P999 => lat(&s.p999_ns),
        }
    }
}

/// One figure of one stage (or one op of it) in both runs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FigureDelta {
    pub figure: Figure,
    /// Means with their confidence intervals.
    pub base: Estimate,
    pub new: Estimate,
    /// Welch's t-test of the means.
    pub diff: Difference,
    /// Latency percentiles: the change of the per-interval medians in per
    /// cent and the Mann–Whitney p-value, which decide (one stalled
    /// second moves a mean and its variance, not the ranks).
    pub robust: Option<(f64, f64)>,
    /// The change is significant (Welch's t, or Mann–Whitney for latency).
    pub significant: bool,
    /// Significant, in the bad direction and beyond its gate.
    pub regression: bool,
}

impl FigureDelta {
    /// "−7.2 % ± 1.1 %, significant" or "no significant change (±3.0 %)";
    /// the error ratio in percentage points; latency as the change of the
    /// medians (Mann–Whitney).
    pub(crate) fn change(&self) -> String {
        if let Some((d, _)) = self.robust {
            return if self.significant {
                format!("{}{:.1} % (medians), significant", sign(d), d.abs())
            } else {
                format!(
                    "no significant change (medians {}{:.1} %)",
                    sign(d),
                    d.abs()
                )
            };
        }
        let (d, e, unit) = match self.figure {
            Figure::ErrorRatio => (self.diff.diff, self.diff.error, " pp"),
            _ => match self.diff.percent(&self.base) {
                Some((d, e)) => (d, e, " %"),
                None => (self.diff.diff, self.diff.error, ""),
            },
        };
        if self.significant {
            format!(
                "{}{:.1}{unit} ± {e:.1}{unit}, significant",
                sign(d),
                d.abs()
            )
        } else {
            format!("no significant change (±{e:.1}{unit})")
        }
    }
}

fn sign(v: f64) -> &'static str {
    if v < 0.0 {
        "−"
    } else {
        "+"
    }
}

/// One row of a comparison: a stage, or one operation of it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Delta {
    pub workload: String,
    pub stage: String,
    /// `None`: the stage's operations together.
    pub op: Option<String>,
    /// `None`: the operation as a whole; else one step of an operation of
    /// several steps (its requests).
    pub step: Option<String>,
    pub base: Option<Pooled>,
    pub new: Option<Pooled>,
    /// Throughput change in per cent (negative: slower); `None` when a side
    /// is missing or the base had no throughput.
    pub throughput_pct: Option<f64>,
    pub p99_pct: Option<f64>,
    /// Each figure with its statistics; empty when a run log has no
    /// samples (mongoload before 0.3, a merged cluster row) or fewer than
    /// [`MIN_SAMPLES`].
    pub figures: Vec<FigureDelta>,
    /// A significant regression beyond its gate; without samples, a
    /// throughput drop beyond `max_drop` (no statistics).
    pub regression: bool,
}

/// The comparison of two runs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Comparison {
    pub rows: Vec<Delta>,
    pub gates: Gates,
}

impl Comparison {
    /// Rows (stages or ops) with a regression.
    pub(crate) fn regressions(&self) -> usize {
        self.rows.iter().filter(|r| r.regression).count()
    }
}

/// A stage's identity across runs: workload, stage name, op (`-` for
/// all of them) and step (`-` for the operation as a whole).
type Key = (String, String, String, String);

/// One key's occurrences in one run: ok count, measured seconds, worst
/// p99, and the samples (per interval length).
#[derive(Default)]
struct Pool {
    ok: u64,
    secs: f64,
    p99: u64,
    /// The concatenated samples; `None` once an occurrence had none.
    samples: Option<(f64, SampleSeries)>,
    missing_samples: bool,
}

impl Pool {
    fn add(&mut self, ok: u64, secs: f64, p99: u64, samples: Option<(f64, &SampleSeries)>) {
        self.ok += ok;
        self.secs += secs;
        self.p99 = self.p99.max(p99);
        match (samples, &mut self.samples) {
            (Some((i, s)), Some((interval, all))) if *interval == i => all.extend(s),
            (Some((i, s)), None) if !self.missing_samples => {
                self.samples = Some((i, s.clone()));
            }
            _ => {
                self.missing_samples = true;
                self.samples = None;
            }
        }
    }

    fn pooled(&self) -> Pooled {
        Pooled {
            ops_per_sec: if self.secs > 0.0 {
                self.ok as f64 / self.secs
            } else {
                0.0
            },
            p99_ns: self.p99,
        }
    }
}

/// Per key, in the order keys first appear.
fn pool(reports: &[StageReport]) -> (Vec<Key>, BTreeMap<Key, Pool>) {
    let mut order = Vec::new();
    let mut pools: BTreeMap<Key, Pool> = BTreeMap::new();
    let mut add = |key: Key, ok, secs, p99, samples| {
        pools
            .entry(key.clone())
            .or_insert_with(|| {
                order.push(key);
                Pool::default()
            })
            .add(ok, secs, p99, samples);
    };
    for r in reports {
        let interval = r.samples.as_ref().map(|s| s.interval_seconds);
        let key = |op: &str, step: &str| {
            (
                r.workload.clone(),
                r.stage.clone(),
                op.to_owned(),
                step.to_owned(),
            )
        };
        add(
            key("-", "-"),
            r.operations.ok,
            r.duration_seconds,
            r.latency_ns.p99,
            r.samples.as_ref().map(|s| (s.interval_seconds, &s.all)),
        );
        for o in &r.ops {
            add(
                key(&o.op, "-"),
                o.operations.ok,
                r.duration_seconds,
                o.latency_ns.p99,
                interval.zip(o.samples.as_ref()),
            );
            // The steps of an operation of several steps, where the log
            // has their samples (mongoload 0.3 on).
            for st in o.steps.iter().filter(|st| st.samples.is_some()) {
                add(
                    key(&o.op, &st.step),
                    st.requests.ok,
                    r.duration_seconds,
                    st.latency_ns.p99,
                    interval.zip(st.samples.as_ref()),
                );
            }
        }
    }
    (order, pools)
}

fn pct(base: f64, new: f64) -> Option<f64> {
    (base > 0.0).then(|| (new - base) / base * 100.0)
}

/// Fewer intervals than this on either side: no statistics (the
/// throughput gate of the whole stage applies, as without samples).
pub(crate) const MIN_SAMPLES: usize = 5;

/// Each figure of one key compared, when both sides have samples.
fn figures(b: &Pool, n: &Pool, gates: &Gates) -> Vec<FigureDelta> {
    let (Some((bi, bs)), Some((ni, ns))) = (&b.samples, &n.samples) else {
        return Vec::new();
    };
    if bs.len() < MIN_SAMPLES || ns.len() < MIN_SAMPLES {
        return Vec::new();
    }
    Figure::ALL
        .iter()
        .filter_map(|&figure| {
            let (bv, nv) = (figure.values(bs, *bi), figure.values(ns, *ni));
            let base = estimate(&bv, gates.confidence)?;
            let new = estimate(&nv, gates.confidence)?;
            let diff = welch(&base, &new, gates.confidence);
            let rel = diff.percent(&base).map(|(d, _)| d);
            let alpha = 1.0 - gates.confidence;
            let (robust, significant, beyond) = match figure {
                Figure::Throughput => (
                    None,
                    diff.significant,
                    rel.is_some_and(|d| -d > gates.max_drop.0),
                ),
                Figure::ErrorRatio => (None, diff.significant, diff.diff > gates.max_error_rise.0),
                Figure::P50 | Figure::P99 | Figure::P999 => {
                    let p = mann_whitney(&bv, &nv)?;
                    let (mb, mn) = (median(&bv)?, median(&nv)?);
                    let change = if mb > 0.0 {
                        (mn - mb) / mb * 100.0
                    } else {
                        0.0
                    };
                    (
                        Some((change, p)),
                        p < alpha,
                        change > gates.max_latency_rise.0,
                    )
                }
            };
            Some(FigureDelta {
                figure,
                base,
                new,
                robust,
                significant,
                regression: significant && beyond,
                diff,
            })
        })
        .collect()
}

/// Matches the stages (and their operations) of `base` and `new` by
/// workload, stage and op name (in the order they first appear in `base`,
/// then those only in `new`) and compares each figure: mean ± confidence
/// interval over the per-interval samples, Welch's t-test. A regression
/// is a change in the bad direction that is significant and beyond its
/// gate. Run logs without samples fall back to the throughput of the
/// whole stage against `max_drop`. A stage missing from either run is
/// shown, never a regression.
pub(crate) fn compare(base: &[StageReport], new: &[StageReport], gates: Gates) -> Comparison {
    let (base_order, base_pools) = pool(base);
    let (new_order, new_pools) = pool(new);
    let mut keys = base_order;
    for k in new_order {
        if !base_pools.contains_key(&k) {
            keys.push(k);
        }
    }
    // A step is compared only where both logs have its samples (an older
    // log has none: that is no news about the step).
    keys.retain(|k| k.3 == "-" || (base_pools.contains_key(k) && new_pools.contains_key(k)));
    let rows = keys
        .into_iter()
        .map(|key| {
            let (bp, np) = (base_pools.get(&key), new_pools.get(&key));
            let (b, n) = (bp.map(Pool::pooled), np.map(Pool::pooled));
            let (throughput_pct, p99_pct) = match (b, n) {
                (Some(b), Some(n)) => (
                    pct(b.ops_per_sec, n.ops_per_sec),
                    pct(b.p99_ns as f64, n.p99_ns as f64),
                ),
                _ => (None, None),
            };
            let figures = match (bp, np) {
                (Some(b), Some(n)) => figures(b, n, &gates),
                _ => Vec::new(),
            };
            let regression = if figures.is_empty() {
                throughput_pct.is_some_and(|d| -d > gates.max_drop.0)
            } else {
                figures.iter().any(|f| f.regression)
            };
            Delta {
                workload: key.0,
                stage: key.1,
                op: (key.2 != "-").then_some(key.2),
                step: (key.3 != "-").then_some(key.3),
                base: b,
                new: n,
                throughput_pct,
                p99_pct,
                figures,
                regression,
            }
        })
        .collect();
    Comparison { rows, gates }
}

/// Which run(s) a run log holds: name (or id), version and config hash
/// of each, in order of first appearance.
pub(crate) fn describe_run(reports: &[StageReport]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for r in reports {
        let mut d = format!("run {}", r.run_name.as_deref().unwrap_or(&r.run_id));
        if r.run_name.is_some() {
            d.push_str(&format!(" ({})", r.run_id));
        }
        if let Some(v) = &r.version {
            d.push_str(&format!(", mongoload {v}"));
        }
        if let Some(h) = &r.config_hash {
            d.push_str(&format!(", config {h}"));
        }
        if !seen.contains(&d) {
            seen.push(d);
        }
    }
    if seen.is_empty() {
        "no stage reports".to_owned()
    } else {
        seen.join("; ")
    }
}

fn signed(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:+.1}%"))
}

/// The comparison as a table (one row per figure of each stage, and of
/// each operation when `ops`, or when it regressed) and a closing verdict
/// line.
pub(crate) fn render_comparison(c: &Comparison, ops: bool) -> String {
    let header = [
        "workload", "stage", "op", "figure", "base", "new", "change", "verdict",
    ];
    let mut rows: Vec<Vec<String>> = Vec::new();
    for d in &c.rows {
        let mut op = d.op.clone().unwrap_or_else(|| "-".to_owned());
        if let Some(step) = &d.step {
            op = format!("{op}/{step}");
        }
        if d.op.is_some() && !ops && !d.regression {
            continue;
        }
        let lead = |figure: &str| {
            vec![
                d.workload.clone(),
                d.stage.clone(),
                op.clone(),
                figure.to_owned(),
            ]
        };
        match (&d.base, &d.new) {
            (None, _) | (_, None) => {
                let mut row = lead("-");
                row.extend(["-".into(), "-".into(), "-".into()]);
                row.push(
                    if d.base.is_none() {
                        "only in new"
                    } else {
                        "only in base"
                    }
                    .into(),
                );
                rows.push(row);
            }
            _ if d.figures.is_empty() => {
                let ops = |p: &Option<Pooled>| {
                    p.map_or("-".to_owned(), |p| format!("{:.1}", p.ops_per_sec))
                };
                let mut row = lead("ops/s");
                row.extend([
                    ops(&d.base),
                    ops(&d.new),
                    format!("{} (no statistics)", signed(d.throughput_pct)),
                    if d.regression { "REGRESSION" } else { "ok" }.into(),
                ]);
                rows.push(row);
                let p99 = |p: &Option<Pooled>| p.map_or("-".to_owned(), |p| ms(p.p99_ns));
                let mut row = lead("p99 ms");
                row.extend([
                    p99(&d.base),
                    p99(&d.new),
                    format!("{} (no statistics: not gated)", signed(d.p99_pct)),
                    "-".into(),
                ]);
                rows.push(row);
            }
            _ => {
                for f in &d.figures {
                    if d.op.is_some() && !ops && !f.regression {
                        continue;
                    }
                    let est = |e: &Estimate| format!("{} ± {}", num(e.mean), num(e.error));
                    let mut row = lead(f.figure.as_str());
                    row.extend([
                        est(&f.base),
                        est(&f.new),
                        f.change(),
                        if f.regression { "REGRESSION" } else { "ok" }.into(),
                    ]);
                    rows.push(row);
                }
            }
        }
    }
    let mut out = render(&header, &rows, 4);
    let n = c.regressions();
    let g = &c.gates;
    let how = format!(
        "confidence {}%; per-interval samples: Welch's t for ops/s and errors, Mann–Whitney for latency; gates: ops/s −{}, latency +{}, errors +{} pp",
        c.gates.confidence * 100.0,
        g.max_drop,
        g.max_latency_rise,
        g.max_error_rise.0
    );
    if n == 0 {
        out.push_str(&format!("no significant regression ({how})\n"));
    } else {
        out.push_str(&format!("{n} regression(s) ({how})\n"));
    }
    out
}

/// A figure with three significant digits or one decimal.
fn num(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

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
pub(crate) fn render_steps(base: &[StageReport], new: &[StageReport]) -> String {
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
mod tests;
