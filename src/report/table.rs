//! Plain-text tables: one row per stage report (and, with `--steps`, one
//! per operation and per step of each), columns aligned, numbers
//! right-aligned, latency in milliseconds with three significant digits,
//! ready to paste into a report.

use std::collections::BTreeMap;

use super::{LatencyNs, StageReport};

/// The columns of [`stage_table`], in order.
pub const STAGE_COLUMNS: [&str; 14] = [
    "workload", "stage", "duration", "ops", "ops/s", "ips.75", "ips.95", "ips.99", "p50ms",
    "p95ms", "p99ms", "p99.9ms", "maxms", "errors",
];

/// The line under [`stage_table`] that says what its less common columns
/// hold.
pub const STAGE_LEGEND: &str = "ips.75/.95/.99: the ok ops/s that 75/95/99 % of the stage's whole seconds reached (the insert benchmark's figures; - under 4/20/100 seconds); * a stage cut short";

/// The `ips.N` cell of a stage of `seconds` whole seconds: the rate that
/// the fraction `p` of its seconds reached, or `-` where the stage has too
/// few seconds for it to be more than its slowest second (fewer than
/// `1 / (1 - p)`: 4 for ips.75, 20 for ips.95, 100 for ips.99).
pub fn ips_cell(rate: u64, seconds: u64, p: f64) -> String {
    if (seconds as f64) * (1.0 - p) < 1.0 - 1e-9 {
        "-".to_owned()
    } else {
        rate.to_string()
    }
}

/// Nanoseconds as milliseconds with three significant digits (`0.512`,
/// `1.23`, `12.3`, `123`, `1230`).
pub fn ms(ns: u64) -> String {
    let v = ns as f64 / 1e6;
    if v == 0.0 {
        "0".to_owned()
    } else if v < 1.0 {
        format!("{v:.3}")
    } else if v < 10.0 {
        format!("{v:.2}")
    } else if v < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// The stage's label in tables: its name, `@cycle` for repeats after the
/// first (a capacity search's probe: `#N` and its rate instead), and `*`
/// when the stage was cut short.
pub fn stage_label(r: &StageReport) -> String {
    let mut s = r.stage.clone();
    if let Some(p) = &r.probe {
        s.push_str(&format!(" #{} {}/s", p.number, p.rate));
    } else if r.cycle > 0 {
        s.push_str(&format!("@{}", r.cycle));
    }
    if r.partial {
        s.push('*');
    }
    // A cluster-wide row: how many members it adds up.
    if let Some(m) = r.member.as_ref().filter(|m| !m.merged.is_empty()) {
        s.push_str(&format!(" ({}/{})", m.merged.len(), m.size));
    }
    s
}

/// One row per report, in the given order.
pub fn stage_table(reports: &[StageReport]) -> String {
    let mut text = render(&STAGE_COLUMNS, &stage_rows(reports), 2);
    text.push_str(STAGE_LEGEND);
    text.push('\n');
    text
}

/// The cells of [`stage_table`] (under [`STAGE_COLUMNS`]), unaligned: the
/// HTML report shows the same figures.
pub fn stage_rows(reports: &[StageReport]) -> Vec<Vec<String>> {
    reports
        .iter()
        .map(|r| {
            vec![
                r.workload.clone(),
                stage_label(r),
                format!("{:.0}s", r.duration_seconds),
                r.operations.ok.to_string(),
                format!("{:.1}", r.ops_per_sec),
                ips_cell(r.ips_75, r.whole_seconds, 0.75),
                ips_cell(r.ips_95, r.whole_seconds, 0.95),
                ips_cell(r.ips_99, r.whole_seconds, 0.99),
                ms(r.latency_ns.p50),
                ms(r.latency_ns.p95),
                ms(r.latency_ns.p99),
                ms(r.latency_ns.p999),
                ms(r.latency_ns.max),
                r.errors_total().to_string(),
            ]
        })
        .collect()
}

/// The columns of [`steps_table`], in order.
pub const STEP_COLUMNS: [&str; 12] = [
    "workload", "stage", "op", "step", "count", "per s", "p50ms", "p95ms", "p99ms", "p99.9ms",
    "maxms", "errors",
];

/// Per stage, one row per scheduled operation (`step` shown as `-`: the
/// operation's count and response time) followed by one row per step of
/// it (its requests: count and request duration), but for an operation
/// of one step named like it, whose row would repeat the operation's.
/// Stages of run logs without steps (mongoload 0.1) show their
/// operations only.
pub fn steps_table(reports: &[StageReport]) -> String {
    render(&STEP_COLUMNS, &steps_rows(reports), 4)
}

/// The cells of [`steps_table`] (under [`STEP_COLUMNS`]), unaligned.
pub fn steps_rows(reports: &[StageReport]) -> Vec<Vec<String>> {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let row =
        |r: &StageReport, op: &str, step: &str, ok: u64, rate: f64, l: &LatencyNs, err: u64| {
            vec![
                r.workload.clone(),
                stage_label(r),
                op.to_owned(),
                step.to_owned(),
                ok.to_string(),
                format!("{rate:.1}"),
                ms(l.p50),
                ms(l.p95),
                ms(l.p99),
                ms(l.p999),
                ms(l.max),
                err.to_string(),
            ]
        };
    for r in reports {
        for o in &r.ops {
            let c = &o.operations;
            rows.push(row(
                r,
                &o.op,
                "-",
                c.ok,
                o.ops_per_sec,
                &o.latency_ns,
                c.error,
            ));
            if let [only] = o.steps.as_slice() {
                if only.step == o.op {
                    continue;
                }
            }
            for s in &o.steps {
                let c = &s.requests;
                rows.push(row(
                    r,
                    &o.op,
                    &s.step,
                    c.ok,
                    s.requests_per_sec,
                    &s.latency_ns,
                    c.error,
                ));
            }
        }
    }
    rows
}

/// The columns of [`shards_table`], in order.
pub const SHARD_COLUMNS: [&str; 5] = ["workload", "stage", "shard", "documents", "share"];

/// Per stage read through a mongos, one row per shard: the documents of
/// the workload's collections on it when the report was written and its
/// share of them (the shares of a stage add up to 100 %). Empty when no
/// report has documents per shard.
pub fn shards_table(reports: &[StageReport]) -> String {
    let rows = shards_rows(reports);
    if rows.is_empty() {
        return String::new();
    }
    render(&SHARD_COLUMNS, &rows, 3)
}

/// The cells of [`shards_table`] (under [`SHARD_COLUMNS`]), unaligned.
pub fn shards_rows(reports: &[StageReport]) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for r in reports {
        let Some(per) = &r.shard_documents else {
            continue;
        };
        let total: i64 = per.values().sum();
        for (shard, n) in per {
            let share = if total > 0 {
                format!("{:.1}%", 100.0 * *n as f64 / total as f64)
            } else {
                "-".to_owned()
            };
            rows.push(vec![
                r.workload.clone(),
                stage_label(r),
                shard.clone(),
                n.to_string(),
                share,
            ]);
        }
    }
    rows
}

/// The columns of [`shard_failovers_table`], in order.
pub const SHARD_FAILOVER_COLUMNS: [&str; 6] = [
    "workload",
    "stage",
    "shard",
    "failovers",
    "no_primary_max_s",
    "write_outage_max_s",
];

/// Per stage read through a mongos, one row per shard that failed over:
/// its failovers in the stage, the longest time without a primary and the
/// longest write outage attributed to it (`-`: none known). Empty when no
/// stage saw a shard fail over.
pub fn shard_failovers_table(reports: &[StageReport]) -> String {
    let mut rows = Vec::new();
    for r in reports {
        let mut per: BTreeMap<&str, (u64, Option<f64>, Option<f64>)> = BTreeMap::new();
        for f in &r.failovers {
            let Some(shard) = f.shard.as_deref() else {
                continue;
            };
            let e = per.entry(shard).or_default();
            e.0 += 1;
            let max = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            e.1 = max(e.1, f.no_primary_seconds);
            e.2 = max(e.2, f.write_outage_seconds);
        }
        let secs = |s: Option<f64>| s.map_or("-".to_owned(), |s| format!("{s:.3}"));
        for (shard, (n, gap, outage)) in per {
            rows.push(vec![
                r.workload.clone(),
                stage_label(r),
                shard.to_owned(),
                n.to_string(),
                secs(gap),
                secs(outage),
            ]);
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    render(&SHARD_FAILOVER_COLUMNS, &rows, 3)
}

/// The columns of [`searches_table`], in order.
pub const SEARCH_COLUMNS: [&str; 7] = [
    "workload", "stage", "capacity", "ended", "probes", "passed", "failed",
];

/// One row per capacity search: its result, why it ended, and the rates
/// its probes passed and failed at (the probes themselves are rows of the
/// stage table). Empty without a search.
pub fn searches_table(reports: &[StageReport]) -> String {
    let rows = search_rows(reports);
    if rows.is_empty() {
        return String::new();
    }
    render(&SEARCH_COLUMNS, &rows, 2)
}

/// The cells of [`searches_table`] (under [`SEARCH_COLUMNS`]), unaligned.
pub fn search_rows(reports: &[StageReport]) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut probes: Vec<&super::ProbeReport> = Vec::new();
    for r in reports {
        let Some(p) = &r.probe else {
            continue;
        };
        if p.number == 1 {
            probes.clear();
        }
        probes.push(p);
        let Some(result) = &p.result else {
            continue;
        };
        let rates = |verdict: &str| {
            let mut v: Vec<f64> = probes
                .iter()
                .filter(|p| p.verdict == verdict)
                .map(|p| p.rate)
                .collect();
            v.sort_by(f64::total_cmp);
            let v: Vec<String> = v.iter().map(|r| r.to_string()).collect();
            if v.is_empty() {
                "-".to_owned()
            } else {
                v.join(" ")
            }
        };
        rows.push(vec![
            r.workload.clone(),
            r.stage.clone(),
            format!("{}/s", result.capacity),
            result.end.clone(),
            result.probes.to_string(),
            rates("pass"),
            rates("fail"),
        ]);
    }
    rows
}

/// The last result of each capacity search stage, by workload and stage.
fn capacities(reports: &[StageReport]) -> BTreeMap<(String, String), f64> {
    reports
        .iter()
        .filter_map(|r| {
            let result = r.probe.as_ref()?.result.as_ref()?;
            Some(((r.workload.clone(), r.stage.clone()), result.capacity))
        })
        .collect()
}

/// `report --compare`'s capacity searches: each search stage's last
/// capacity in the base and the new run, and the change. Empty when
/// neither run searched.
pub fn search_comparison(base: &[StageReport], new: &[StageReport]) -> String {
    let (b, n) = (capacities(base), capacities(new));
    let mut keys: Vec<&(String, String)> = b.keys().chain(n.keys()).collect();
    keys.sort();
    keys.dedup();
    let cell = |v: Option<&f64>| v.map_or("-".to_owned(), |c| format!("{c}/s"));
    let rows: Vec<Vec<String>> = keys
        .into_iter()
        .map(|k| {
            let change = match (b.get(k), n.get(k)) {
                (Some(&x), Some(&y)) if x > 0.0 => format!("{:+.1}%", (y / x - 1.0) * 100.0),
                _ => "-".to_owned(),
            };
            vec![
                k.0.clone(),
                k.1.clone(),
                cell(b.get(k)),
                cell(n.get(k)),
                change,
            ]
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    render(
        &[
            "workload",
            "search",
            "base capacity",
            "new capacity",
            "change",
        ],
        &rows,
        2,
    )
}

/// Aligns `rows` under `header`: the first `left` columns left-aligned
/// (names), the rest right-aligned (numbers); two spaces between columns.
pub fn render(header: &[&str], rows: &[Vec<String>], left: usize) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut parts = Vec::with_capacity(widths.len());
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            let pad = w.saturating_sub(cell.chars().count());
            if i < left {
                parts.push(format!("{cell}{}", " ".repeat(pad)));
            } else {
                parts.push(format!("{}{cell}", " ".repeat(pad)));
            }
        }
        out.push_str(parts.join("  ").trim_end());
        out.push('\n');
    };
    line(&mut header.iter().copied());
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::report::{Counts, LatencyNs};

    #[test]
    fn shards_rows_give_each_shard_its_documents_and_share() {
        let mut a = report("w", "s1", 10, 1.0, 1000);
        a.shard_documents = Some(
            [("shard0".to_owned(), 300), ("shard1".to_owned(), 100)]
                .into_iter()
                .collect(),
        );
        let b = report("w", "s2", 10, 1.0, 1000);
        let rows = shards_rows(&[a.clone(), b.clone()]);
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(rows[0][2..], ["shard0", "300", "75.0%"]);
        assert_eq!(rows[1][2..], ["shard1", "100", "25.0%"]);
        assert!(shards_table(&[b]).is_empty(), "no shards, no table");
        assert!(shards_table(&[a]).starts_with("workload"));
    }

    #[test]
    fn shard_failovers_are_counted_per_shard_with_their_longest_times() {
        let f =
            |shard: Option<&str>, gap: f64, outage: Option<f64>| crate::report::FailoverReport {
                at: "2026-12-02T12:00:00Z".into(),
                from: None,
                to: "h:1".into(),
                no_primary_seconds: Some(gap),
                write_outage_seconds: outage,
                shard: shard.map(str::to_owned),
            };
        let mut a = report("w", "s1", 10, 1.0, 1000);
        a.failovers = vec![
            f(Some("shard1"), 1.5, Some(1.25)),
            f(Some("shard1"), 2.0, None),
            f(Some("shard0"), 0.5, None),
            f(None, 3.0, Some(3.0)),
        ];
        let text = shard_failovers_table(&[a]);
        let lines: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(lines[1][2..], ["shard0", "1", "0.500", "-"]);
        assert_eq!(lines[2][2..], ["shard1", "2", "2.000", "1.250"]);
        assert!(shard_failovers_table(&[report("w", "s", 1, 1.0, 1)]).is_empty());
    }

    pub(crate) fn report(
        workload: &str,
        stage: &str,
        ops: u64,
        secs: f64,
        p99: u64,
    ) -> StageReport {
        StageReport {
            run_id: "r".into(),
            run_name: None,
            version: None,
            config_hash: None,
            config: None,
            run_started: "2026-11-29T12:00:00.000Z".into(),
            workload: workload.into(),
            stage: stage.into(),
            stage_index: 0,
            cycle: 0,
            mode: "rate".into(),
            start: "2026-11-29T12:00:00.000Z".into(),
            end: "2026-11-29T12:01:00.000Z".into(),
            duration_seconds: secs,
            warmup_seconds: 0.0,
            partial: false,
            operations: Counts { ok: ops, error: 0 },
            ops_per_sec: ops as f64 / secs,
            whole_seconds: secs as u64,
            ips_75: 1000,
            ips_95: 990,
            ips_99: 12,
            latency_ns: LatencyNs {
                count: ops,
                p50: 512_000,
                p95: 1_234_000,
                p99,
                p999: 1_020_000_000,
                max: 1_100_000_000,
            },
            histogram: None,
            member: None,
            errors: [("timeout".to_owned(), 3), ("network".to_owned(), 1)].into(),
            missed: 0,
            samples: None,
            ops: Vec::new(),
            count: None,
            failovers: Vec::new(),
            audit: None,
            thresholds: Vec::new(),
            shard_documents: None,
            probe: None,
        }
    }

    #[test]
    fn milliseconds_keep_three_significant_digits() {
        assert_eq!(ms(0), "0");
        assert_eq!(ms(512_345), "0.512");
        assert_eq!(ms(1_234_567), "1.23");
        assert_eq!(ms(12_345_678), "12.3");
        assert_eq!(ms(123_456_789), "123");
        assert_eq!(ms(1_234_567_890), "1235");
    }

    #[test]
    fn steps_nest_under_their_operation() {
        use crate::report::{OpReport, StepReport};
        let mut r = report("sb", "run", 100, 10.0, 9_000_000);
        let latency = |p99| LatencyNs {
            p99,
            ..LatencyNs::default()
        };
        r.ops = vec![OpReport {
            op: "transaction".into(),
            operations: Counts { ok: 100, error: 2 },
            ops_per_sec: 10.0,
            latency_ns: latency(9_000_000),
            histogram: None,
            steps: vec![
                StepReport {
                    step: "point_select".into(),
                    requests: Counts { ok: 1020, error: 0 },
                    requests_per_sec: 102.0,
                    latency_ns: latency(400_000),
                    histogram: None,
                    samples: None,
                },
                StepReport {
                    step: "delete".into(),
                    requests: Counts { ok: 100, error: 2 },
                    requests_per_sec: 10.0,
                    latency_ns: latency(1_500_000),
                    histogram: None,
                    samples: None,
                },
            ],
            samples: None,
        }];
        let t = steps_table(&[r]);
        let cells: Vec<Vec<&str>> = t.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(cells.len(), 4, "{t}");
        assert_eq!(cells[0][..5], ["workload", "stage", "op", "step", "count"]);
        assert_eq!(
            cells[1][..6],
            ["sb", "run", "transaction", "-", "100", "10.0"]
        );
        assert_eq!(cells[1][8], "9.00");
        assert_eq!(
            cells[2][..6],
            ["sb", "run", "transaction", "point_select", "1020", "102.0"]
        );
        assert_eq!(cells[3][3..6], ["delete", "100", "10.0"]);
        assert_eq!(cells[3][11], "2");
    }

    /// The rate 99 % of the seconds of a 60 s stage reached is the
    /// slowest second's: shown as `-`, not as a figure of its own.
    #[test]
    fn an_ips_column_needs_enough_seconds() {
        assert_eq!(ips_cell(7, 3, 0.75), "-");
        assert_eq!(ips_cell(7, 4, 0.75), "7");
        assert_eq!(ips_cell(7, 19, 0.95), "-");
        assert_eq!(ips_cell(7, 20, 0.95), "7");
        assert_eq!(ips_cell(0, 99, 0.99), "-");
        assert_eq!(ips_cell(0, 100, 0.99), "0");
    }

    #[test]
    fn a_search_is_a_row_with_its_result_and_its_probes_rates() {
        use crate::report::{ProbeReport, SearchResultReport};
        let probe = |number: u32, rate: f64, verdict: &str, last: bool| {
            let mut r = report("w", "capacity", 1000, 10.0, 5_000_000);
            r.cycle = u64::from(number) - 1;
            r.probe = Some(ProbeReport {
                number,
                rate,
                verdict: verdict.into(),
                error_ratio: 0.0,
                result: last.then(|| SearchResultReport {
                    capacity: 750.0,
                    end: "converged".into(),
                    probes: 4,
                }),
            });
            r
        };
        let rs = [
            probe(1, 250.0, "pass", false),
            probe(2, 500.0, "pass", false),
            probe(3, 1000.0, "fail", false),
            probe(4, 750.0, "pass", true),
        ];
        assert_eq!(stage_label(&rs[2]), "capacity #3 1000/s");
        let t = searches_table(&rs);
        let row = t.lines().nth(1).unwrap();
        let cells: Vec<&str> = row
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(
            cells,
            [
                "w",
                "capacity",
                "750/s",
                "converged",
                "4",
                "250 500 750",
                "1000"
            ]
        );
        assert!(searches_table(&rs[..3]).is_empty(), "no result yet");
        // Compared with a run whose search found 600/s: -20 %.
        let mut lower = rs.clone();
        if let Some(p) = lower[3].probe.as_mut() {
            p.result.as_mut().unwrap().capacity = 600.0;
        }
        let t = search_comparison(&rs, &lower);
        let row = t.lines().nth(1).unwrap();
        let cells: Vec<&str> = row
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(cells, ["w", "capacity", "750/s", "600/s", "-20.0%"]);
        assert!(search_comparison(&rs[..3], &rs[..2]).is_empty());
    }

    #[test]
    fn one_aligned_row_per_stage() {
        let mut b = report("mixed", "peak", 60_000, 60.0, 950_000_000);
        b.cycle = 2;
        b.partial = true;
        let t = stage_table(&[report("mixed", "warm", 6_000, 60.0, 2_000_000), b]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert_eq!(lines[3], STAGE_LEGEND, "the legend under the rows");
        assert!(lines[0].starts_with("workload  stage    duration"), "{t}");
        assert!(lines[0].ends_with("errors"), "{t}");
        let cells: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(
            cells,
            [
                "mixed", "peak@2*", "60s", "60000", "1000.0", "1000", "990", "-", "0.512", "1.23",
                "950", "1020", "1100", "4"
            ]
        );
        // Numbers are right-aligned: every line has the same length.
        assert_eq!(lines[1].len(), lines[2].len(), "{t}");
        assert_eq!(lines[0].len(), lines[1].len(), "{t}");
    }
}
