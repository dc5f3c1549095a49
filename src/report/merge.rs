//! Cluster-wide stage rows from the run logs of several members: the
//! reports of one stage occurrence (same epoch, workload, stage and start)
//! from different members become one row, operations, rates and ips
//! figures summed, latency percentiles from the members' histograms added
//! up (without histograms, the worst member's figures). Reports without a
//! member (a lone daemon, older run logs) pass through unchanged.

use std::collections::BTreeMap;

use super::{merged_latency, Counts, LatencyNs, MemberReport, OpReport, StageReport, StepReport};

/// The reports with each cluster stage occurrence merged into one row, in
/// the order of their first report.
pub fn merge_members(reports: Vec<StageReport>) -> Vec<StageReport> {
    type Key = (String, String, usize, String);
    enum Row {
        One(Box<StageReport>),
        Group(Key),
    }
    let mut rows = Vec::new();
    let mut groups: BTreeMap<Key, Vec<StageReport>> = BTreeMap::new();
    for r in reports {
        let Some(m) = &r.member else {
            rows.push(Row::One(Box::new(r)));
            continue;
        };
        let key = (
            m.epoch.clone(),
            r.workload.clone(),
            r.stage_index,
            r.start.clone(),
        );
        if !groups.contains_key(&key) {
            rows.push(Row::Group(key.clone()));
        }
        groups.entry(key).or_default().push(r);
    }
    rows.into_iter()
        .filter_map(|row| match row {
            Row::One(r) => Some(*r),
            Row::Group(key) => groups.remove(&key).map(merge),
        })
        .collect()
}

/// The worst of several latency figures, field by field.
fn worst(all: &[LatencyNs]) -> LatencyNs {
    all.iter().fold(LatencyNs::default(), |a, b| LatencyNs {
        count: a.count + b.count,
        p50: a.p50.max(b.p50),
        p95: a.p95.max(b.p95),
        p99: a.p99.max(b.p99),
        p999: a.p999.max(b.p999),
        max: a.max.max(b.max),
    })
}

fn latency<'a>(parts: impl Iterator<Item = (&'a LatencyNs, Option<&'a str>)> + Clone) -> LatencyNs {
    merged_latency(parts.clone().map(|(_, h)| h))
        .unwrap_or_else(|| worst(&parts.map(|(l, _)| *l).collect::<Vec<_>>()))
}

fn counts<'a>(all: impl Iterator<Item = &'a Counts>) -> Counts {
    all.fold(Counts::default(), |a, b| Counts {
        ok: a.ok + b.ok,
        error: a.error + b.error,
    })
}

/// One row of the reports of one stage occurrence from several members
/// (a capacity probe's parts judge the probe for the whole cluster).
pub fn merge(mut members: Vec<StageReport>) -> StageReport {
    if members.len() == 1 {
        return members.remove(0);
    }
    members.sort_by_key(|r| r.member.as_ref().map_or(0, |m| m.index));
    let mut row = members[0].clone();
    let first = members[0].member.clone();
    row.member = first.map(|m| MemberReport {
        merged: members
            .iter()
            .filter_map(|r| r.member.as_ref().map(|m| m.index))
            .collect(),
        ..m
    });
    row.run_id = members
        .iter()
        .map(|r| r.run_id.as_str())
        .collect::<Vec<_>>()
        .join("+");
    row.end = members
        .iter()
        .map(|r| r.end.clone())
        .max()
        .unwrap_or_default();
    row.duration_seconds = members
        .iter()
        .map(|r| r.duration_seconds)
        .fold(0.0, f64::max);
    row.partial = members.iter().any(|r| r.partial);
    row.operations = counts(members.iter().map(|r| &r.operations));
    row.ops_per_sec = members.iter().map(|r| r.ops_per_sec).sum();
    row.whole_seconds = members.iter().map(|r| r.whole_seconds).max().unwrap_or(0);
    row.ips_75 = members.iter().map(|r| r.ips_75).sum();
    row.ips_95 = members.iter().map(|r| r.ips_95).sum();
    row.ips_99 = members.iter().map(|r| r.ips_99).sum();
    row.latency_ns = latency(
        members
            .iter()
            .map(|r| (&r.latency_ns, r.histogram.as_deref())),
    );
    row.histogram = None;
    // Members' intervals do not line up: a merged row has no samples.
    row.samples = None;
    row.missed = members.iter().map(|r| r.missed).sum();
    for (class, n) in row.errors.iter_mut() {
        *n = members.iter().filter_map(|r| r.errors.get(class)).sum();
    }
    row.count = None;
    row.ops = row
        .ops
        .iter()
        .map(|o| {
            let parts: Vec<&OpReport> = members
                .iter()
                .filter_map(|r| r.ops.iter().find(|x| x.op == o.op))
                .collect();
            OpReport {
                op: o.op.clone(),
                operations: counts(parts.iter().map(|p| &p.operations)),
                ops_per_sec: parts.iter().map(|p| p.ops_per_sec).sum(),
                latency_ns: latency(
                    parts
                        .iter()
                        .map(|p| (&p.latency_ns, p.histogram.as_deref())),
                ),
                histogram: None,
                steps: o
                    .steps
                    .iter()
                    .map(|s| {
                        let steps: Vec<&StepReport> = parts
                            .iter()
                            .filter_map(|p| p.steps.iter().find(|x| x.step == s.step))
                            .collect();
                        StepReport {
                            step: s.step.clone(),
                            requests: counts(steps.iter().map(|x| &x.requests)),
                            requests_per_sec: steps.iter().map(|x| x.requests_per_sec).sum(),
                            latency_ns: latency(
                                steps
                                    .iter()
                                    .map(|x| (&x.latency_ns, x.histogram.as_deref())),
                            ),
                            histogram: None,
                            samples: None,
                        }
                    })
                    .collect(),
                samples: None,
            }
        })
        .collect();
    row
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{RunInfo, StageMeta, StageStats};
    use crate::workload::OpSpec;
    use chrono::TimeZone;
    use std::time::Duration;

    fn member_report(index: u32, stats: &StageStats) -> StageReport {
        let start = chrono::Utc.with_ymd_and_hms(2026, 12, 1, 12, 0, 0).unwrap();
        let meta = StageMeta {
            workload: "w".into(),
            stage: "hold".into(),
            stage_index: 0,
            cycle: 0,
            mode: "rate",
            start,
            end: start + chrono::Duration::seconds(10),
            warmup: Duration::ZERO,
            partial: false,
        };
        let mut r = StageReport::build(
            &RunInfo::new(None),
            &meta,
            stats,
            &[crate::workload::BoundedInserts::new(0, 0, 1).spec("insert")],
        );
        r.member = Some(MemberReport {
            index,
            size: 3,
            epoch: "2026-12-01T11:59:58.000Z".into(),
            merged: Vec::new(),
        });
        r
    }

    #[test]
    fn members_rows_add_up_and_percentiles_come_from_the_merged_histograms() {
        // Three members, 10 s each: latencies 1..=1000 ms spread over them.
        let mut parts: Vec<StageStats> = (0..3).map(|_| StageStats::with_steps(&[2])).collect();
        let mut whole = StageStats::with_steps(&[2]);
        for i in 0..3000u64 {
            let done = Duration::from_millis(i * 3);
            let lat = Duration::from_millis(1 + i % 1000);
            parts[(i % 3) as usize].record(0, done, lat, Ok(()));
            parts[(i % 3) as usize].record_request(0, 0, Duration::ZERO, lat, Ok(()));
            whole.record(0, done, lat, Ok(()));
        }
        let reports: Vec<StageReport> = parts
            .iter()
            .enumerate()
            .map(|(i, s)| member_report(i as u32, s))
            .collect();
        let alone = StageReport::build(
            &RunInfo::new(None),
            &StageMeta {
                workload: "solo".into(),
                stage: "x".into(),
                stage_index: 0,
                cycle: 0,
                mode: "rate",
                start: chrono::Utc::now(),
                end: chrono::Utc::now(),
                warmup: Duration::ZERO,
                partial: false,
            },
            &whole,
            &[OpSpec::single("insert")],
        );
        let mut input = vec![alone.clone()];
        input.extend(reports.iter().rev().cloned());
        let out = merge_members(input);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0], alone, "a lone daemon's row is unchanged");
        let row = &out[1];
        assert_eq!(row.operations.ok, 3000);
        assert!(
            (row.ops_per_sec - 300.0).abs() < 1e-9,
            "{}",
            row.ops_per_sec
        );
        assert_eq!(row.member.as_ref().unwrap().merged, vec![0, 1, 2]);
        assert_eq!(row.latency_ns, whole.total().latency());
        assert_eq!(row.ops[0].operations.ok, 3000);
        assert_eq!(row.ops[0].steps[0].requests.ok, 3000);
        assert_eq!(row.ops[0].latency_ns, whole.total().latency());
        assert_eq!(row.ips_75, reports.iter().map(|r| r.ips_75).sum::<u64>());
        // Without histograms (older run logs), the worst member's figures.
        let bare: Vec<StageReport> = reports
            .iter()
            .cloned()
            .map(|mut r| {
                r.histogram = None;
                r
            })
            .collect();
        let row = &merge_members(bare)[0];
        assert_eq!(row.latency_ns.max, whole.total().latency().max);
        assert_eq!(row.latency_ns.count, 3000);
    }
}
