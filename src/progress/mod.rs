//! Live progress on a terminal for `mongoload run` and `demo`: while stderr
//! is a terminal (and not the journal), a line per workload every few
//! seconds (stage, target and achieved rate, p50/p99 over the latency
//! window, errors by class, missed), a bar per workload that prepares, a
//! line per failover with its write outage, and the run's stage table at
//! exit. Figures come from the daemon's handles (the workloads' status and
//! metric handles, the failover log), never from the /metrics text; what
//! is shown is made by the pure functions of [`render`]. `indicatif` draws
//! the bars, each the progress bar of a span (`tracing-indicatif`, which
//! [`crate::daemon::logging`] installs), and the log records and the
//! lines are written above them, so the two never cut into each other.

pub(crate) mod render;

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tracing_indicatif::span_ext::IndicatifSpanExt;

use crate::daemon::supervisor::Slots;
use crate::daemon::Running;
use crate::error_kind::ErrorKind;
use crate::failover::{Failover, UNCONFIRMED_GRACE};
use crate::report::ReportTap;
use render::WorkloadSample;

/// How often the bars are redrawn and failovers looked for.
const TICK: Duration = Duration::from_secs(1);

/// A failover whose write outage has not ended by then is shown anyway.
const FAILOVER_GIVE_UP: Duration = Duration::from_secs(60);

/// The progress options of `run` and `demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct ProgressArgs {
    /// Show no live progress. Without it, when stderr is a terminal (not
    /// the journal, TERM not dumb): a line per workload every
    /// --progress-interval, a bar while a workload prepares, a line per
    /// failover, and the run's stage table at exit.
    #[arg(long)]
    pub no_progress: bool,
    /// How often the progress lines come.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub progress_interval: Duration,
}

impl ProgressArgs {
    /// Progress for this run, if stderr is a terminal that wants it.
    pub fn progress(&self) -> Option<Progress> {
        let wanted = wanted(
            self.no_progress,
            std::io::stderr().is_terminal(),
            crate::daemon::logging::stderr_is_journal(),
            std::env::var_os("TERM").as_deref(),
        );
        wanted.then(|| Progress {
            every: self.progress_interval,
            tap: Arc::default(),
        })
    }
}

/// Whether to show progress: not turned off, stderr a terminal and not
/// the journal, and a terminal that understands erasing a line.
fn wanted(
    no_progress: bool,
    terminal: bool,
    journal: bool,
    term: Option<&std::ffi::OsStr>,
) -> bool {
    !no_progress && terminal && !journal && term.is_none_or(|t| t != "dumb")
}

/// Progress for one run, before the daemon starts.
pub struct Progress {
    every: Duration,
    tap: Arc<ReportTap>,
}

impl Progress {
    /// Where the daemon keeps its stage reports for the table at exit
    /// ([`crate::daemon::start_with`]).
    pub fn tap(&self) -> Arc<ReportTap> {
        self.tap.clone()
    }

    /// Starts showing the progress of `running`.
    pub fn start(self, running: &Running) -> Live {
        let stop = CancellationToken::new();
        let task = tokio::spawn(show(
            running.slots.clone(),
            running.failover.clone(),
            self.every,
            stop.clone(),
        ));
        Live {
            tap: self.tap,
            stop,
            task,
        }
    }
}

/// Progress being shown.
pub struct Live {
    tap: Arc<ReportTap>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Live {
    /// Once the run has ended: stops the lines, removes the bars and
    /// prints the run's stage table.
    pub async fn finish(self) {
        self.stop.cancel();
        // The task's bars go with it.
        let _ = self.task.await;
        print(&render::final_table(&self.tap.reports()));
    }
}

/// Writes `text` (whole lines) above the bars: through the writer of the
/// `tracing-indicatif` layer, which hides them while it writes, or
/// straight to stderr when another subscriber logs (a test's).
fn print(text: &str) {
    // Nowhere to report a terminal that went away.
    let _ = match tracing_indicatif::writer::get_indicatif_stderr_writer() {
        Some(mut above_bars) => above_bars.write_all(text.as_bytes()),
        None => std::io::stderr().lock().write_all(text.as_bytes()),
    };
}

/// The prepare bars shown, by workload: each the progress bar of a span
/// of its own, removed when the span closes.
#[derive(Default)]
struct Bars(HashMap<String, tracing::Span>);

impl Bars {
    /// A bar for each workload of `now` that prepares, none for the others.
    fn show(&mut self, now: &[WorkloadSample]) {
        self.0.retain(|name, _| {
            now.iter()
                .any(|w| &w.name == name && render::prepare_bar(w).is_some())
        });
        for w in now {
            let Some(bar) = render::prepare_bar(w) else {
                continue;
            };
            match self.0.get(&w.name) {
                Some(span) => {
                    span.pb_set_position(bar.position);
                    span.pb_set_message(&bar.message);
                }
                None => {
                    self.0.insert(w.name.clone(), bar_span(&w.name, &bar));
                }
            }
        }
    }
}

/// The span whose progress bar is `workload`'s prepare bar, shown from
/// `bar` on.
fn bar_span(workload: &str, bar: &render::PrepareBar) -> tracing::Span {
    let span = tracing::info_span!("prepare", indicatif.pb_show = tracing::field::Empty);
    span.pb_set_style(&render::prepare_style(workload));
    span.pb_set_length(render::BAR_LENGTH);
    span.pb_set_position(bar.position);
    span.pb_set_message(&bar.message);
    span.pb_start();
    span
}

/// The progress task: bars and failovers every [`TICK`], workload lines
/// every `every`.
async fn show(
    slots: Arc<Slots>,
    failover: Arc<Failover>,
    every: Duration,
    stop: CancellationToken,
) {
    let start = Instant::now();
    let (mut prev, mut prev_at) = (sample(&slots), start);
    // Failovers before the run are not this run's news.
    let mut shown = failover.recent(1).last().map(|r| r.at);
    let mut bars = Bars::default();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.cancelled() => return,
        }
        let now_at = Instant::now();
        let outage = failover.ongoing_outage();
        for r in failover.recent(16) {
            if shown.is_some_and(|at| r.at <= at) {
                continue;
            }
            let age = now_at.saturating_duration_since(r.at);
            let settle = UNCONFIRMED_GRACE + TICK;
            if !render::failover_ready(&r, age, outage, settle, FAILOVER_GIVE_UP) {
                break;
            }
            let at = render::elapsed(now_at - start);
            print(&format!("{at} {}\n", render::failover_line(&r, outage)));
            shown = Some(r.at);
        }
        let now = sample(&slots);
        bars.show(&now);
        // Half a tick of slack: a tick that wakes a little early is on time.
        if now_at - prev_at + TICK / 2 >= every {
            let lines = render::lines(now_at - start, &prev, &now, now_at - prev_at);
            if !lines.is_empty() {
                print(&(lines.join("\n") + "\n"));
            }
            (prev, prev_at) = (now, now_at);
        }
    }
}

/// Every workload now, from its status and metric handles.
fn sample(slots: &Slots) -> Vec<WorkloadSample> {
    use std::sync::atomic::Ordering::Relaxed;
    slots
        .list()
        .iter()
        .map(|s| {
            let metrics = s
                .metrics
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            let (errors_by_class, latency) = match &metrics {
                Some(m) => {
                    let l = m.latency_window();
                    (
                        ErrorKind::ALL.map(|k| m.errors_of(k)),
                        (l.count > 0).then_some((l.p50, l.p99)),
                    )
                }
                None => Default::default(),
            };
            WorkloadSample {
                name: s.name.clone(),
                stage: s.status.stage(),
                control: s.control.borrow().clone(),
                prepare: s.status.prepare(),
                ok: s.status.ok.load(Relaxed),
                errors: s.status.errors.load(Relaxed),
                missed: s.status.missed.load(Relaxed),
                errors_by_class,
                latency,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::exit_reports::KEEP_REPORTS;
    use crate::report::{RunInfo, StageMeta, StageReport, StageStats};
    use crate::workload::OpSpec;

    #[test]
    fn progress_only_on_a_terminal_outside_the_journal() {
        let xterm = Some(std::ffi::OsStr::new("xterm"));
        let dumb = Some(std::ffi::OsStr::new("dumb"));
        assert!(wanted(false, true, false, xterm));
        assert!(wanted(false, true, false, None));
        assert!(!wanted(true, true, false, xterm), "--no-progress");
        assert!(!wanted(false, false, false, xterm), "a file or a pipe");
        assert!(!wanted(false, true, true, xterm), "the journal");
        assert!(!wanted(false, true, false, dumb), "TERM=dumb");
    }

    #[test]
    fn a_bar_whatever_the_log_level_and_only_while_preparing() {
        use crate::engine::{StageLabel, StageState};
        let preparing = |name: &str| WorkloadSample {
            name: name.into(),
            stage: StageLabel {
                state: StageState::Preparing,
                ..Default::default()
            },
            ..Default::default()
        };
        for level in ["warn", "off"] {
            let filter = tracing_subscriber::EnvFilter::new(level);
            let subscriber = crate::daemon::logging::progress_subscriber(filter, false);
            tracing::subscriber::with_default(subscriber, || {
                // The log level filters the log lines only.
                let bar = render::prepare_bar(&preparing("w")).unwrap();
                assert!(!bar_span("w", &bar).is_disabled(), "no bar at {level}");
                let mut bars = Bars::default();
                bars.show(&[preparing("a"), preparing("b")]);
                let mut shown: Vec<&String> = bars.0.keys().collect();
                shown.sort();
                assert_eq!(shown, ["a", "b"]);
                let mut b = preparing("b");
                b.stage.state = StageState::Running;
                bars.show(&[preparing("a"), b]);
                assert_eq!(bars.0.keys().collect::<Vec<_>>(), ["a"]);
                assert!(bars.0.values().all(|s| !s.is_disabled()));
            });
        }
    }

    fn report(stage: &str) -> StageReport {
        let mut stats = StageStats::with_steps(&[1]);
        stats.record(0, Duration::from_secs(1), Duration::from_millis(2), Ok(()));
        let now = chrono::Utc::now();
        let meta = StageMeta {
            workload: "w".into(),
            stage: stage.into(),
            stage_index: 0,
            cycle: 0,
            mode: "rate",
            start: now - chrono::Duration::seconds(10),
            end: now,
            warmup: Duration::ZERO,
            partial: false,
        };
        StageReport::build(
            &RunInfo::new(None),
            &meta,
            &stats,
            &[OpSpec::single("insert")],
        )
    }

    #[test]
    fn the_tap_keeps_the_newest_reports_without_histograms() {
        let tap = ReportTap::default();
        let r = report("s0");
        assert!(r.histogram.is_some() && r.ops[0].histogram.is_some());
        tap.keep(&r);
        let kept = tap.reports();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].histogram, None);
        assert_eq!(kept[0].ops[0].histogram, None);
        assert!(kept[0].ops[0].steps.iter().all(|s| s.histogram.is_none()));
        // The table is the one `mongoload report` prints of them.
        assert_eq!(
            render::final_table(&kept),
            format!(
                "stage reports of this run:\n{}",
                crate::report::table::stage_table(&[r])
            )
        );
        for i in 1..=KEEP_REPORTS {
            tap.keep(&report(&format!("s{i}")));
        }
        let kept = tap.reports();
        assert_eq!(kept.len(), KEEP_REPORTS);
        assert_eq!(kept[0].stage, "s1", "the oldest went first");
    }
}
