//! What the terminal shows, as pure functions of plain snapshots: one
//! line per workload, the prepare bar, the failover line and the table at
//! exit. Nothing here reads a clock or the daemon.

use std::time::Duration;

use crate::control::{fmt_rate, ControlState};
use crate::daemon::service::status_phrase;
use crate::engine::{PrepareProgress, StageLabel, StageState};
use crate::error_kind::ErrorKind;
use crate::failover::FailoverRecord;
use crate::report::table::{ms, stage_table};
use crate::report::StageReport;
use indicatif::{ProgressState, ProgressStyle};

/// One workload at one instant, as the progress lines need it.
#[derive(Debug, Clone, Default)]
pub(crate) struct WorkloadSample {
    pub name: String,
    pub stage: StageLabel,
    pub control: ControlState,
    pub prepare: PrepareProgress,
    /// Operations since the workload started: ok, failed, never sent.
    pub ok: u64,
    pub errors: u64,
    pub missed: u64,
    /// Failed operations by class, in [`ErrorKind::ALL`] order.
    pub errors_by_class: [u64; ErrorKind::ALL.len()],
    /// p50 and p99 over the latency window; `None` when no operation
    /// finished within it.
    pub latency: Option<(Duration, Duration)>,
}

/// Positions of a prepare bar (thousandths of the prepare).
pub(crate) const BAR_LENGTH: u64 = 1000;

/// A prepare bar as indicatif draws it with [`prepare_style`]: where it
/// stands, of [`BAR_LENGTH`], and what follows its percentage.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PrepareBar {
    pub position: u64,
    pub message: String,
}

/// `[01:05]`: time since the run started, `[1:02:03]` past an hour.
pub(crate) fn elapsed(d: Duration) -> String {
    let s = d.as_secs();
    match s / 3600 {
        0 => format!("[{:02}:{:02}]", s / 60, s % 60),
        h => format!("[{h}:{:02}:{:02}]", s / 60 % 60, s % 60),
    }
}

/// One line per workload for the interval `dt` from `prev` to `now`
/// (matched by name; a workload new since `prev` counts from zero), each
/// prefixed with `at`. Workloads that prepare are left to the bar, and
/// one that has finished is said so once.
pub(crate) fn lines(
    at: Duration,
    prev: &[WorkloadSample],
    now: &[WorkloadSample],
    dt: Duration,
) -> Vec<String> {
    let zero = WorkloadSample::default();
    now.iter()
        .filter_map(|w| {
            let before = prev.iter().find(|p| p.name == w.name);
            workload_line(before.unwrap_or(&zero), w, dt)
                .map(|line| format!("{} {line}", elapsed(at)))
        })
        .collect()
}

/// The line of one workload (see [`lines`]): its stage and target as
/// systemd's STATUS= says them, the ok operations per second achieved,
/// p50/p99 over the latency window, the interval's errors by class and
/// missed operations.
pub(crate) fn workload_line(
    prev: &WorkloadSample,
    now: &WorkloadSample,
    dt: Duration,
) -> Option<String> {
    match now.stage.state {
        StageState::Preparing => return None,
        StageState::Stopped if prev.stage.state == StageState::Stopped => return None,
        _ => {}
    }
    let mut line = status_phrase(&now.name, &now.stage, &now.control, &now.prepare);
    if now.stage.state == StageState::Stopped {
        return Some(line);
    }
    let secs = dt.as_secs_f64();
    let achieved = if secs > 0.0 {
        now.ok.saturating_sub(prev.ok) as f64 / secs
    } else {
        0.0
    };
    line += &format!(" · {} ops/s achieved", fmt_rate(achieved));
    line += &match now.latency {
        Some((p50, p99)) => format!(
            " · p50 {} p99 {} ms",
            ms(p50.as_nanos() as u64),
            ms(p99.as_nanos() as u64)
        ),
        None => " · p50/p99 -".to_owned(),
    };
    let by_class: Vec<String> = ErrorKind::ALL
        .iter()
        .zip(now.errors_by_class.iter().zip(prev.errors_by_class.iter()))
        .filter_map(|(kind, (n, p))| {
            let d = n.saturating_sub(*p);
            (d > 0).then(|| format!("{kind} {d}"))
        })
        .collect();
    let errors = now.errors.saturating_sub(prev.errors);
    line += &match by_class.is_empty() {
        true => format!(" · {errors} errors"),
        false => format!(" · {errors} errors ({})", by_class.join(", ")),
    };
    line += &format!(" · {} missed", now.missed.saturating_sub(prev.missed));
    Some(line)
}

/// The prepare bar of a workload that prepares:
/// `w: preparing [#######.............]  35%  8120 docs/s  ETA 12s  (step 1/2)`.
pub(crate) fn prepare_bar(w: &WorkloadSample) -> Option<PrepareBar> {
    if w.stage.state != StageState::Preparing {
        return None;
    }
    let p = &w.prepare;
    let ratio = p.ratio.clamp(0.0, 1.0);
    let mut message = String::new();
    if p.documents_total > 0 {
        message += &format!("  {} docs/s", fmt_rate(p.rate));
        message += &match p.eta_seconds {
            Some(eta) => format!(
                "  ETA {}",
                humantime::format_duration(Duration::from_secs(eta.ceil().max(0.0) as u64))
            ),
            None => "  ETA -".to_owned(),
        };
    }
    message += &format!("  (step {}/{})", (p.steps_done + 1).min(p.steps), p.steps);
    Some(PrepareBar {
        position: (ratio * BAR_LENGTH as f64).round() as u64,
        message,
    })
}

/// How indicatif draws the prepare bar of workload `name`: 20 cells, the
/// percentage, then the message, cut at the terminal's width.
pub(crate) fn prepare_style(name: &str) -> ProgressStyle {
    let name = name.to_owned();
    ProgressStyle::with_template("{workload}: preparing [{bar:20}] {percent:>3}%{wide_msg}")
        .expect("a valid template")
        .progress_chars("#.")
        .with_key(
            "workload",
            move |_: &ProgressState, out: &mut dyn std::fmt::Write| {
                let _ = out.write_str(&name);
            },
        )
}

/// Whether a failover is ready to be shown `age` after the driver saw it:
/// once its write outage has ended, or once it is clear that none runs
/// (`outage` is the ongoing one, if any) after `settle`, or at the latest
/// after `give_up`.
pub(crate) fn failover_ready(
    r: &FailoverRecord,
    age: Duration,
    outage: Option<Duration>,
    settle: Duration,
    give_up: Duration,
) -> bool {
    r.write_outage.is_some() || (outage.is_none() && age >= settle) || age >= give_up
}

/// `failover: primary a:1 → b:2, no primary for 1.8 s, write outage 2.0 s`;
/// `outage` is the write outage still running when it is shown, if any.
pub(crate) fn failover_line(r: &FailoverRecord, outage: Option<Duration>) -> String {
    let on = r
        .shard
        .as_ref()
        .map_or(String::new(), |s| format!(" on shard {s}"));
    let mut line = match &r.from {
        Some(from) => format!("failover{on}: primary {from} → {}", r.to),
        None => format!("failover{on}: primary is now {}", r.to),
    };
    if let Some(gap) = r.no_primary {
        line += &format!(", no primary for {:.1} s", gap.as_secs_f64());
    }
    line += &match (r.write_outage, outage) {
        (Some(d), _) => format!(", write outage {:.1} s", d.as_secs_f64()),
        (None, Some(d)) => format!(
            ", write outage still running ({:.0} s so far)",
            d.as_secs_f64()
        ),
        (None, None) => ", no write outage".to_owned(),
    };
    line
}

/// What the terminal shows at exit: the run's stage reports as `mongoload
/// report` prints them.
pub(crate) fn final_table(reports: &[StageReport]) -> String {
    if reports.is_empty() {
        return "no stage report: the run ended before its first stage did\n".to_owned();
    }
    format!("stage reports of this run:\n{}", stage_table(reports))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(name: &str, ok: u64, errors: u64) -> WorkloadSample {
        WorkloadSample {
            name: name.into(),
            stage: StageLabel {
                index: Some(2),
                name: "peak".into(),
                rate: 400.0,
                concurrency: 0,
                state: StageState::Running,
            },
            ok,
            errors,
            ..Default::default()
        }
    }

    #[test]
    fn a_running_workload_shows_target_achieved_latency_errors_and_missed() {
        let prev = running("demo", 1000, 2);
        let mut now = running("demo", 2990, 7);
        now.missed = 4;
        now.errors_by_class[ErrorKind::NotPrimary as usize] = 4;
        now.errors_by_class[ErrorKind::Network as usize] = 1;
        now.latency = Some((Duration::from_micros(210), Duration::from_micros(1920)));
        let lines = lines(
            Duration::from_secs(65),
            &[prev],
            &[now],
            Duration::from_secs(5),
        );
        assert_eq!(
            lines,
            ["[01:05] demo: stage 2 peak, 400 ops/s · 398 ops/s achieved · p50 0.210 p99 1.92 ms · 5 errors (network 1, not_primary 4) · 4 missed"]
        );
    }

    #[test]
    fn closed_loop_no_latency_and_no_errors() {
        let mut w = running("w", 50, 0);
        w.stage.rate = 0.0;
        w.stage.concurrency = 16;
        let line = workload_line(&WorkloadSample::default(), &w, Duration::from_secs(10)).unwrap();
        assert_eq!(
            line,
            "w: stage 2 peak, 16 workers · 5 ops/s achieved · p50/p99 - · 0 errors · 0 missed"
        );
    }

    #[test]
    fn preparing_is_left_to_the_bar_and_finished_is_said_once() {
        let mut prep = running("w", 0, 0);
        prep.stage.state = StageState::Preparing;
        assert_eq!(workload_line(&prep, &prep, Duration::from_secs(5)), None);
        let mut done = running("w", 10, 0);
        done.stage.state = StageState::Stopped;
        assert_eq!(
            workload_line(&running("w", 9, 0), &done, Duration::from_secs(5)).as_deref(),
            Some("w: finished")
        );
        assert_eq!(workload_line(&done, &done, Duration::from_secs(5)), None);
        // A workload new since the last line counts from zero.
        let out = lines(
            Duration::from_secs(5),
            &[],
            &[running("new", 10, 0)],
            Duration::from_secs(5),
        );
        assert!(out[0].starts_with("[00:05] new: stage 2 peak"), "{out:?}");
        assert!(out[0].contains(" 2 ops/s achieved"), "{out:?}");
    }

    /// What indicatif draws of `w`'s prepare bar on a terminal `cols`
    /// wide, trailing blanks removed; `None` when there is no bar.
    fn drawn(w: &WorkloadSample, cols: u16) -> Option<String> {
        let bar = prepare_bar(w)?;
        let term = indicatif::InMemoryTerm::new(4, cols);
        let target = indicatif::ProgressDrawTarget::term_like(Box::new(term.clone()));
        let pb = indicatif::ProgressBar::with_draw_target(Some(BAR_LENGTH), target);
        pb.set_style(prepare_style(&w.name));
        pb.set_position(bar.position);
        pb.set_message(bar.message);
        pb.abandon();
        Some(term.contents().trim_end().to_owned())
    }

    #[test]
    fn the_prepare_bar_shows_percent_rate_and_eta() {
        let mut w = running("demo", 0, 0);
        w.stage.state = StageState::Preparing;
        w.prepare = PrepareProgress {
            steps_done: 0,
            steps: 2,
            documents_done: 350,
            documents_total: 1000,
            ratio: 0.35,
            rate: 8120.0,
            eta_seconds: Some(11.2),
            done: false,
        };
        let full = "demo: preparing [#######.............]  35%  8120 docs/s  ETA 12s  (step 1/2)";
        assert_eq!(drawn(&w, 200).unwrap(), full);
        // Cut at the terminal's width, on one line.
        assert_eq!(drawn(&w, 50).unwrap(), full[..50].trim_end());
        w.prepare.eta_seconds = None;
        assert!(drawn(&w, 200).unwrap().contains("ETA -"));
        // Steps without documents (indexes): percent and step only.
        w.prepare = PrepareProgress {
            steps_done: 1,
            steps: 2,
            ratio: 1.0,
            ..Default::default()
        };
        assert_eq!(
            drawn(&w, 200).unwrap(),
            "demo: preparing [####################] 100%  (step 2/2)"
        );
        assert_eq!(drawn(&running("demo", 0, 0), 200), None);
    }

    #[test]
    fn failover_lines_and_when_they_are_ready() {
        let r = FailoverRecord {
            at: std::time::Instant::now(),
            wall: std::time::SystemTime::now(),
            from: Some("127.0.0.1:1".into()),
            to: "127.0.0.1:2".into(),
            no_primary: Some(Duration::from_millis(1840)),
            write_outage: Some(Duration::from_millis(2040)),
            shard: None,
        };
        assert_eq!(
            failover_line(&r, None),
            "failover: primary 127.0.0.1:1 → 127.0.0.1:2, no primary for 1.8 s, write outage 2.0 s"
        );
        let (settle, give_up) = (Duration::from_secs(6), Duration::from_secs(60));
        let s = |secs| Duration::from_secs(secs);
        assert!(failover_ready(&r, s(0), None, settle, give_up));
        let open = FailoverRecord {
            from: None,
            no_primary: None,
            write_outage: None,
            ..r
        };
        assert!(!failover_ready(&open, s(1), None, settle, give_up));
        assert!(failover_ready(&open, s(6), None, settle, give_up));
        assert!(!failover_ready(&open, s(30), Some(s(31)), settle, give_up));
        assert!(failover_ready(&open, s(60), Some(s(61)), settle, give_up));
        assert_eq!(
            failover_line(&open, None),
            "failover: primary is now 127.0.0.1:2, no write outage"
        );
        assert_eq!(
            failover_line(&open, Some(s(61))),
            "failover: primary is now 127.0.0.1:2, write outage still running (61 s so far)"
        );
    }

    #[test]
    fn elapsed_times() {
        assert_eq!(elapsed(Duration::from_millis(5_900)), "[00:05]");
        assert_eq!(elapsed(Duration::from_secs(3_723)), "[1:02:03]");
    }

    #[test]
    fn the_final_table_is_the_report_table() {
        assert!(final_table(&[]).starts_with("no stage report"));
    }
}
