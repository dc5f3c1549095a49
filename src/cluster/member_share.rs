//! A member's share of a stage: rates divided by the cluster's size,
//! worker counts and operation counts split so that the members' parts add
//! up to the configured total exactly (the first `total % size` members
//! run one more). Pure: plain values in, plain values out.

use crate::control::ControlState;
use crate::schedule::{Limit, Load, Mode, Shape, Stage};

use super::Member;

impl Member {
    /// This member's part of a whole `total` (workers, operations,
    /// documents): `total / size`, plus one for the first `total % size`
    /// members.
    pub fn split(self, total: u64) -> u64 {
        let size = u64::from(self.size.max(1));
        total / size + u64::from(u64::from(self.index) < total % size)
    }

    /// This member's part of a rate: the rate divided by the size.
    pub fn rate(self, rate: f64) -> f64 {
        rate / f64::from(self.size.max(1))
    }

    /// This member's part of a level of `mode`: a rate divided, a worker
    /// count split. A ramp's worker counts are split at each end, so the
    /// members' rounded levels add up to the total at both ends.
    fn level(self, mode: Mode, level: f64) -> f64 {
        match mode {
            Mode::Rate => self.rate(level),
            Mode::Concurrency => self.split(level.max(0.0).round() as u64) as f64,
        }
    }

    /// The stage this member runs of a cluster-wide `stage`: same name,
    /// mode, duration and warm-up, its share of every level and of an
    /// operation count in all (a count per worker stays per worker: the
    /// workers are what is split). A lone daemon runs the stage itself.
    pub fn share(self, stage: &Stage) -> Stage {
        if self.is_sole() {
            return stage.clone();
        }
        let mode = stage.mode();
        let shape = match stage.shape() {
            Shape::Hold(l) => Shape::Hold(self.level(mode, *l)),
            Shape::Ramp { from, to } => Shape::Ramp {
                from: self.level(mode, *from),
                to: self.level(mode, *to),
            },
            Shape::Steps { levels, each } => Shape::Steps {
                levels: levels.iter().map(|l| self.level(mode, *l)).collect(),
                each: *each,
            },
        };
        let limit = stage.limit().map(|l| match l {
            Limit::Total(n) => Limit::Total(self.split(n)),
            per_worker => per_worker,
        });
        // Poisson arrivals: each member its own draw of its share.
        stage.reshaped(shape, limit).reseeded(u64::from(self.index))
    }

    /// A cluster-wide control state (levels as totals) as this member
    /// applies it: an override's level is its share; pause and scale are
    /// the same for every member.
    pub fn share_control(self, cluster: &ControlState) -> ControlState {
        ControlState {
            override_load: cluster.override_load.map(|l| match l {
                Load::Rate(r) => Load::Rate(self.rate(r)),
                Load::Concurrency(c) => Load::Concurrency(self.split(u64::from(c)) as u32),
            }),
            ..cluster.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn members(size: u32) -> impl Iterator<Item = Member> {
        (0..size).map(move |index| Member { index, size })
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn members_draw_their_own_poisson_arrivals_of_their_share() {
        use crate::schedule::Arrival;
        let stage = Stage::rate("p", 900.0, secs(20))
            .unwrap()
            .with_arrival(Arrival::Poisson { seed: 4 })
            .unwrap();
        let shares: Vec<Stage> = members(3).map(|m| m.share(&stage)).collect();
        for s in &shares {
            // Each a Poisson draw of 300/s × 20 s = 6,000 (σ ≈ 77).
            let n = s.total_ops() as f64;
            assert!((n - 6000.0).abs() < 4.0 * 6000f64.sqrt(), "{n}");
            assert!(matches!(s.arrival(), Arrival::Poisson { .. }));
        }
        // Not in step: the members' first arrivals differ.
        let first = |s: &Stage| (0..20).map(|i| s.intended_offset(i)).collect::<Vec<_>>();
        assert_ne!(first(&shares[0]), first(&shares[1]));
        assert_ne!(first(&shares[1]), first(&shares[2]));
        // A lone daemon runs the stage's own draw.
        let alone = Member { index: 0, size: 1 }.share(&stage);
        assert_eq!(alone, stage);
    }

    #[test]
    fn parts_add_up_to_the_total() {
        for size in 1..=7 {
            for total in [0u64, 1, 2, 3, 10, 11, 1000, 1001] {
                let parts: Vec<u64> = members(size).map(|m| m.split(total)).collect();
                assert_eq!(parts.iter().sum::<u64>(), total, "{size} {total}");
                assert!(parts.iter().max().unwrap() - parts.iter().min().unwrap() <= 1);
                // The first members take the remainder.
                assert!(parts.windows(2).all(|w| w[0] >= w[1]), "{parts:?}");
            }
        }
    }

    #[test]
    fn a_held_rate_is_divided_and_workers_are_split() {
        let rate = Stage::rate("r", 1000.0, secs(10)).unwrap();
        let shares: Vec<Stage> = members(3).map(|m| m.share(&rate)).collect();
        let sum: f64 = shares.iter().map(|s| s.rate_at(secs(1))).sum();
        assert!((sum - 1000.0).abs() < 1e-9);
        // Open-loop tickets of the three add up to the stage's.
        let tickets: u64 = shares.iter().map(|s| s.total_ops()).sum();
        assert!((rate.total_ops() as i64 - tickets as i64).abs() <= 3);
        assert_eq!(shares[1].name(), "r");
        assert_eq!(shares[1].duration(), secs(10));

        let workers = Stage::concurrency("c", 10, secs(10)).unwrap();
        let counts: Vec<u32> = members(3)
            .map(|m| m.share(&workers).concurrency_at(secs(0)))
            .collect();
        assert_eq!(counts, vec![4, 3, 3]);
        // Fewer workers than members: some run none.
        let two = Stage::concurrency("c", 2, secs(10)).unwrap();
        let counts: Vec<u32> = members(3)
            .map(|m| m.share(&two).concurrency_at(secs(0)))
            .collect();
        assert_eq!(counts, vec![1, 1, 0]);
    }

    #[test]
    fn ramps_and_steps_keep_their_shape() {
        let ramp = Stage::new(
            "up",
            Mode::Rate,
            Shape::Ramp {
                from: 300.0,
                to: 900.0,
            },
            secs(60),
        )
        .unwrap();
        for at in [0, 15, 30, 60] {
            let sum: f64 = members(3).map(|m| m.share(&ramp).rate_at(secs(at))).sum();
            assert!((sum - ramp.rate_at(secs(at))).abs() < 1e-9, "{at}");
        }
        let steps = Stage::new(
            "sweep",
            Mode::Concurrency,
            Shape::Steps {
                levels: vec![3.0, 6.0, 16.0],
                each: secs(10),
            },
            secs(30),
        )
        .unwrap();
        for (at, total) in [(0, 3), (10, 6), (25, 16)] {
            let sum: u32 = members(3)
                .map(|m| m.share(&steps).concurrency_at(secs(at)))
                .sum();
            assert_eq!(sum, total, "{at}");
        }
        let rate_steps = Stage::new(
            "rs",
            Mode::Rate,
            Shape::Steps {
                levels: vec![30.0, 90.0],
                each: secs(10),
            },
            secs(20),
        )
        .unwrap()
        .with_warmup(secs(2))
        .unwrap();
        let share = Member { index: 2, size: 3 }.share(&rate_steps);
        assert_eq!(share.rate_at(secs(15)), 30.0);
        assert_eq!(share.warmup(), secs(2));
        assert_eq!(share.total_ops(), 100 + 300);
    }

    #[test]
    fn an_operation_count_in_all_is_split_a_count_per_worker_is_not() {
        let total = Stage::rate("n", 100.0, secs(3600))
            .unwrap()
            .with_limit(Limit::Total(1000))
            .unwrap();
        let parts: Vec<u64> = members(3)
            .map(|m| m.share(&total).operations_target().unwrap())
            .collect();
        assert_eq!(parts, vec![334, 333, 333]);
        let per_worker = Stage::concurrency("w", 10, secs(3600))
            .unwrap()
            .with_limit(Limit::PerWorker(50))
            .unwrap();
        let parts: Vec<u64> = members(3)
            .map(|m| m.share(&per_worker).operations_target().unwrap())
            .collect();
        assert_eq!(parts, vec![200, 150, 150]);
    }

    #[test]
    fn a_lone_daemon_runs_the_stage_as_configured() {
        let s = Stage::rate("r", 123.0, secs(5)).unwrap();
        assert_eq!(Member::SOLE.share(&s), s);
        let c = ControlState {
            override_load: Some(Load::Rate(10.0)),
            ..ControlState::default()
        };
        assert_eq!(Member::SOLE.share_control(&c), c);
    }

    #[test]
    fn cluster_control_levels_are_totals() {
        let c = ControlState {
            paused: false,
            override_load: Some(Load::Concurrency(10)),
            scale: 2.0,
        };
        let parts: Vec<ControlState> = members(3).map(|m| m.share_control(&c)).collect();
        assert_eq!(parts[0].override_load, Some(Load::Concurrency(4)));
        assert_eq!(parts[2].override_load, Some(Load::Concurrency(3)));
        assert!(parts.iter().all(|p| p.scale == 2.0));
        let r = ControlState {
            override_load: Some(Load::Rate(300.0)),
            ..ControlState::default()
        };
        assert_eq!(
            Member { index: 1, size: 3 }.share_control(&r).override_load,
            Some(Load::Rate(100.0))
        );
    }
}
