//! A running stage list's position carried over to an edited list, so a
//! reload that changes only stages after the current one keeps the
//! workload where it is: the same stage index, the same time into it.

use std::time::Duration;

use super::Schedule;

impl Schedule {
    /// The elapsed time in `new` at which `new` is where `self` is at
    /// `elapsed`: the same stage index and the same offset into that stage.
    /// A repeating list maps into its first pass (every pass is alike). A
    /// position past the end of a finished list continues into stages that
    /// `new` appends; a position in a stage that `new` no longer has is the
    /// end of `new`'s list (its next pass, or its end). Time-of-day windows
    /// follow the clock, so their position is `elapsed` unchanged.
    pub fn carry_position(&self, new: &Schedule, elapsed: Duration) -> Duration {
        if self.windows.is_some() || new.windows.is_some() {
            return elapsed;
        }
        let (index, offset) = match self.stage_at(elapsed) {
            Some((index, start)) => (index, elapsed.saturating_sub(start)),
            None => (
                self.stages.len(),
                elapsed.saturating_sub(self.total_duration()),
            ),
        };
        if index < new.stages.len() {
            new.starts[index] + offset
        } else {
            new.total_duration()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Schedule, Stage};
    use std::time::Duration;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn list(durations: &[u64], repeat: bool) -> Schedule {
        let stages = durations
            .iter()
            .enumerate()
            .map(|(i, d)| Stage::rate(format!("s{i}"), 10.0, secs(*d)).unwrap())
            .collect();
        Schedule::new(stages, repeat).unwrap()
    }

    #[test]
    fn the_same_stage_and_offset_in_the_new_list() {
        let old = list(&[10, 20, 30], false);
        // An edited later stage: nothing moves.
        let new = list(&[10, 20, 99], false);
        assert_eq!(old.carry_position(&new, secs(15)), secs(15));
        // A longer earlier stage moves the same position later.
        let new = list(&[40, 20, 30], false);
        assert_eq!(old.carry_position(&new, secs(15)), secs(45));
        assert_eq!(new.stage_at(secs(45)), Some((1, secs(40))));
    }

    #[test]
    fn a_repeating_list_maps_into_its_first_pass() {
        let old = list(&[10, 20], true);
        let new = list(&[10, 20, 5], true);
        // Pass 3, 7 s into stage 1.
        let at = old.carry_position(&new, secs(3 * 30 + 17));
        assert_eq!(at, secs(17));
        assert_eq!(new.stage_at(at), Some((1, secs(10))));
    }

    #[test]
    fn a_finished_list_continues_into_appended_stages() {
        let old = list(&[10, 20], false);
        assert_eq!(old.stage_at(secs(31)), None);
        let new = list(&[10, 20, 60], false);
        let at = old.carry_position(&new, secs(31));
        assert_eq!(at, secs(31));
        assert_eq!(new.stage_at(at), Some((2, secs(30))));
    }

    #[test]
    fn a_removed_stage_is_the_end_of_the_new_list() {
        let old = list(&[10, 20, 30], false);
        // In stage 2 when the new list has only two stages.
        let new = list(&[10, 20], false);
        let at = old.carry_position(&new, secs(31));
        assert_eq!(at, secs(30));
        assert_eq!(new.stage_at(at), None, "a non-repeating list has ended");
        let new = list(&[10, 20], true);
        let at = old.carry_position(&new, secs(31));
        assert_eq!(new.stage_at(at), Some((0, secs(30))), "the next pass");
    }
}
