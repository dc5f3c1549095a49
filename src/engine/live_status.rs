//! What a workload's engine shows while it runs: its live counts, its
//! stage, its prepare progress (for `/status`, `ctl status`, systemd's
//! STATUS= line and the final summary) and the controller's heartbeat
//! (for the systemd watchdog).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Live figures of a workload for `/status` and the final summary.
#[derive(Debug, Default)]
pub struct WorkloadStatus {
    pub ok: AtomicU64,
    pub errors: AtomicU64,
    pub missed: AtomicU64,
    /// When the controller last ticked: the systemd watchdog pings only
    /// while every running workload's controller is alive.
    pub heartbeat: Heartbeat,
    stage: Mutex<StageLabel>,
    prepare: Mutex<PrepareProgress>,
    /// A prepare that cannot succeed here stopped the run: the exit status
    /// it asks for (78 a config the deployment cannot take, 77 a missing
    /// privilege).
    fatal: Mutex<Option<u8>>,
}

/// How far the prepare steps are, as `/status` shows it: documents of all
/// load steps in place out of their total, the load rate and the ETA.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct PrepareProgress {
    /// Prepare steps finished, of `steps`.
    pub steps_done: usize,
    pub steps: usize,
    /// Documents in place over all load steps, of `documents_total`.
    pub documents_done: u64,
    pub documents_total: u64,
    /// `documents_done / documents_total` (1 with nothing to load).
    pub ratio: f64,
    /// Documents per second inserted by this prepare so far.
    pub rate: f64,
    /// Seconds left at that rate; `None` before any progress.
    pub eta_seconds: Option<f64>,
    /// Whether every step has finished.
    pub done: bool,
}

/// When a workload's controller last ticked (it ticks at least once a
/// second while a stage runs), or "not watched" while the workload
/// prepares, drains or has stopped: those states have no tick to miss.
#[derive(Debug, Default)]
pub struct Heartbeat {
    /// Microseconds since [`heartbeat_origin`] plus one; 0 = not watched.
    at: AtomicU64,
}

impl Heartbeat {
    /// Records a tick now.
    pub fn beat(&self) {
        let now = heartbeat_origin().elapsed().as_micros() as u64;
        self.at.store(now.saturating_add(1), Ordering::Relaxed);
    }

    /// Takes the workload out of the watch (schedule over, draining).
    pub fn clear(&self) {
        self.at.store(0, Ordering::Relaxed);
    }

    /// Time since the last tick; `None` when not watched.
    pub fn age(&self) -> Option<Duration> {
        let at = self.at.load(Ordering::Relaxed).checked_sub(1)?;
        let now = heartbeat_origin().elapsed();
        Some(now.saturating_sub(Duration::from_micros(at)))
    }
}

/// A fixed instant the heartbeats count from, so one atomic holds one.
fn heartbeat_origin() -> std::time::Instant {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *ORIGIN.get_or_init(std::time::Instant::now)
}

/// The current stage as `/status` shows it.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct StageLabel {
    pub index: Option<usize>,
    pub name: String,
    pub rate: f64,
    pub concurrency: u32,
    pub state: StageState,
}

/// What a workload is doing, as `/status` (in lower case), `ctl status`
/// and systemd's STATUS= line say it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StageState {
    /// Running its prepare steps (the first state of every workload).
    #[default]
    Preparing,
    /// A stage runs.
    Running,
    /// Paused by runtime control: in-flight operations finish, nothing new.
    Paused,
    /// Between stages, or outside every time-of-day window.
    Idle,
    /// The schedule has ended or the workload was stopped.
    Stopped,
}

impl StageState {
    /// Whether the workload is where its plan wants it: running, or
    /// deliberately paused or idle (readiness).
    pub fn on_plan(self) -> bool {
        matches!(
            self,
            StageState::Running | StageState::Paused | StageState::Idle
        )
    }
}

impl WorkloadStatus {
    /// The operations ok, in error and missed so far.
    pub fn totals(&self) -> (u64, u64, u64) {
        (
            self.ok.load(Ordering::Relaxed),
            self.errors.load(Ordering::Relaxed),
            self.missed.load(Ordering::Relaxed),
        )
    }

    pub fn stage(&self) -> StageLabel {
        self.stage.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The exit status a prepare that cannot succeed asked for.
    pub fn fatal(&self) -> Option<u8> {
        self.fatal.lock().map(|f| *f).unwrap_or_default()
    }

    /// Records that the prepare cannot succeed here (exit status `code`).
    pub fn set_fatal(&self, code: u8) {
        if let Ok(mut f) = self.fatal.lock() {
            *f = Some(code);
        }
    }

    /// The prepare progress (final once `done`).
    pub fn prepare(&self) -> PrepareProgress {
        self.prepare.lock().map(|p| p.clone()).unwrap_or_default()
    }

    pub(crate) fn set_prepare(&self, progress: PrepareProgress) {
        if let Ok(mut p) = self.prepare.lock() {
            *p = progress;
        }
    }

    pub(super) fn set_stage(&self, label: StageLabel) {
        if let Ok(mut s) = self.stage.lock() {
            *s = label;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_is_unwatched_until_the_first_beat_and_after_clear() {
        let h = Heartbeat::default();
        assert_eq!(h.age(), None);
        h.beat();
        let age = h.age().expect("watched after a beat");
        assert!(age < Duration::from_secs(1), "{age:?}");
        std::thread::sleep(Duration::from_millis(30));
        assert!(h.age().unwrap() >= Duration::from_millis(30));
        h.beat();
        assert!(h.age().unwrap() < Duration::from_millis(30));
        h.clear();
        assert_eq!(h.age(), None);
    }
}
