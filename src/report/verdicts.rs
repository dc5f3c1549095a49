//! A stage report's threshold verdicts: the figures of a whole stage, read
//! off its report, and the verdict of each threshold that applies in it.
//! Pure: tested on plain reports.

use std::time::Duration;

use super::StageReport;
use crate::threshold::{Figures, Threshold, ThresholdVerdict};

/// The figures of a whole stage for a threshold (its op, or all).
pub(crate) fn stage_figures(report: &StageReport, op: Option<&str>) -> Figures {
    let ns = Duration::from_nanos;
    match op.and_then(|name| report.ops.iter().find(|o| o.op == name)) {
        Some(o) => Figures {
            ok: o.operations.ok,
            error: o.operations.error,
            missed: 0,
            p50: ns(o.latency_ns.p50),
            p99: ns(o.latency_ns.p99),
            p999: ns(o.latency_ns.p999),
        },
        None if op.is_some() => Figures::default(),
        None => Figures {
            ok: report.operations.ok,
            error: report.operations.error,
            missed: report.missed,
            p50: ns(report.latency_ns.p50),
            p99: ns(report.latency_ns.p99),
            p999: ns(report.latency_ns.p999),
        },
    }
}

/// The verdict of each threshold that applies in the report's stage, over
/// the whole stage; `breaches(name)` gives the crossings the sliding
/// window saw during it.
pub(crate) fn stage_verdicts(
    report: &StageReport,
    thresholds: &[Threshold],
    breaches: impl Fn(&str) -> u64,
) -> Vec<ThresholdVerdict> {
    thresholds
        .iter()
        .filter(|t| t.applies_in(&report.stage))
        .map(|t| {
            let figures = stage_figures(report, t.op.as_deref());
            let value = t.check.value(&figures);
            let verdict = match t.check.passes(&figures) {
                Some(true) => "pass",
                Some(false) => "fail",
                None => "no data",
            };
            ThresholdVerdict {
                threshold: t.name.clone(),
                verdict: verdict.to_owned(),
                value,
                breaches: breaches(&t.name),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::table::tests::report;
    use crate::threshold::tests::threshold;
    use crate::threshold::{AbortScope, ThresholdConfig};

    #[test]
    fn stage_verdicts_read_the_stage_report() {
        let mut r = report("w", "peak", 1000, 10.0, 60_000_000);
        r.missed = 0;
        let ts = [
            threshold("p99 < 50ms"),
            threshold("error_ratio < 0.01"),
            ThresholdConfig {
                check: "p99 < 1s".into(),
                op: None,
                stage: Some("other".into()),
                window: Duration::from_secs(60),
                abort_on_fail: false,
                grace: Duration::ZERO,
                abort: AbortScope::Run,
            }
            .build(&[])
            .unwrap(),
        ];
        let v = stage_verdicts(&r, &ts, |name| u64::from(name.starts_with("p99")));
        assert_eq!(v.len(), 2, "the stage-bound one is not for peak");
        assert_eq!(v[0].verdict, "fail");
        assert_eq!(v[0].value, Some(0.06));
        assert_eq!(v[0].breaches, 1);
        assert_eq!(v[1].verdict, "pass");
        assert!(v[0].failed() && !v[1].failed());
    }
}
