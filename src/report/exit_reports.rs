//! The run's stage reports kept in memory for the table printed at exit:
//! the report writer hands each one over, the terminal UI reads them back.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use super::StageReport;

/// Stage reports kept for the table at exit (the newest).
pub(crate) const KEEP_REPORTS: usize = 1000;

/// Keeps a copy of each stage report of the run (the newest
/// [`KEEP_REPORTS`], without their histograms) for the table at exit.
#[derive(Debug, Default)]
pub struct ReportTap(Mutex<VecDeque<StageReport>>);

impl ReportTap {
    /// Keeps a copy of `r`.
    pub fn keep(&self, r: &StageReport) {
        let mut r = r.clone();
        r.histogram = None;
        for op in &mut r.ops {
            op.histogram = None;
            for step in &mut op.steps {
                step.histogram = None;
            }
        }
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() == KEEP_REPORTS {
            kept.pop_front();
        }
        kept.push_back(r);
    }

    /// The reports kept, oldest first.
    pub fn reports(&self) -> Vec<StageReport> {
        let kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        kept.iter().cloned().collect()
    }
}
