//! Tests of the schedule math on plain values and virtual time.
use super::*;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

#[test]
fn hold_offsets_are_exact_at_1000_per_second() {
    let s = Stage::rate("a", 1000.0, secs(10.0)).unwrap();
    assert_eq!(s.intended_offset(0), Some(Duration::ZERO));
    assert_eq!(s.intended_offset(1), Some(Duration::from_millis(1)));
    assert_eq!(s.intended_offset(1234), Some(Duration::from_millis(1234)));
    assert_eq!(s.intended_offset(9999), Some(Duration::from_millis(9999)));
    // The op at exactly 10 s belongs to the next stage.
    assert_eq!(s.intended_offset(10_000), None);
    assert_eq!(s.total_ops(), 10_000);
}

#[test]
fn fractional_rate_does_not_drift() {
    let s = Stage::rate("a", 3.0, secs(1e6)).unwrap();
    // 3 ops per second: op 3·k starts at exactly k seconds even far out.
    assert_eq!(s.intended_offset(3 * 500_000), Some(secs(500_000.0)));
    let s = Stage::rate("b", 0.5, secs(100.0)).unwrap();
    assert_eq!(s.intended_offset(7), Some(secs(14.0)));
    assert_eq!(s.total_ops(), 50);
}

#[test]
fn ops_due_agrees_with_intended_offset() {
    let stages = [
        Stage::rate("h", 1000.0, secs(2.0)).unwrap(),
        Stage::rate("f", 333.3, secs(2.0)).unwrap(),
        Stage::new(
            "r",
            Mode::Rate,
            Shape::Ramp {
                from: 0.0,
                to: 900.0,
            },
            secs(2.0),
        )
        .unwrap(),
        Stage::new(
            "d",
            Mode::Rate,
            Shape::Ramp {
                from: 900.0,
                to: 10.0,
            },
            secs(2.0),
        )
        .unwrap(),
        Stage::new(
            "s",
            Mode::Rate,
            Shape::Steps {
                levels: vec![100.0, 250.5, 7.0],
                each: secs(0.7),
            },
            Duration::ZERO,
        )
        .unwrap(),
    ];
    for s in &stages {
        let total = s.total_ops();
        assert!(total > 0);
        let mut last = Duration::ZERO;
        for i in 0..total {
            let o = s
                .intended_offset(i)
                .unwrap_or_else(|| panic!("{s}: op {i} of {total}"));
            assert!(o >= last, "{s}: offsets must not decrease at {i}");
            last = o;
            assert!(s.ops_due(o) > i, "{s}: ops_due({o:?}) ≤ {i}");
            if let Some(before) = o.checked_sub(Duration::from_nanos(1)) {
                assert!(s.ops_due(before) <= i, "{s}: op {i} due before its offset");
            }
        }
        assert_eq!(s.intended_offset(total), None, "{s}");
        assert_eq!(s.ops_due(s.duration()), total);
        assert_eq!(s.ops_due(secs(1e9)), total);
    }
}

#[test]
fn ramp_matches_its_integral() {
    // 0 → 1000 ops/s over 10 s: 5000 ops, N(t) = 50 t².
    let s = Stage::new(
        "r",
        Mode::Rate,
        Shape::Ramp {
            from: 0.0,
            to: 1000.0,
        },
        secs(10.0),
    )
    .unwrap();
    let total = s.total_ops();
    assert!((4999..=5001).contains(&total), "{total}");
    // Op 1250 is due when 50 t² = 1250: t = 5 s.
    let t = s.intended_offset(1250).unwrap().as_secs_f64();
    assert!((t - 5.0).abs() < 1e-6, "{t}");
    assert_eq!(s.rate_at(secs(5.0)), 500.0);
    // Over the second half the achieved rate averages 750/s.
    let second_half = s.ops_due(secs(9.999_999)) - s.ops_due(secs(5.0));
    assert!((3740..=3760).contains(&second_half), "{second_half}");
    // Gaps shrink as the rate rises.
    let gap = |i| s.intended_offset(i + 1).unwrap() - s.intended_offset(i).unwrap();
    assert!(gap(100) > gap(1000));
    assert!(gap(1000) > gap(4000));
}

#[test]
fn ramp_down_to_zero_ends_cleanly() {
    // 1000 → 0 over 10 s: 5000 ops, all before the end, the gaps growing.
    let s = Stage::new(
        "d",
        Mode::Rate,
        Shape::Ramp {
            from: 1000.0,
            to: 0.0,
        },
        secs(10.0),
    )
    .unwrap();
    let total = s.total_ops();
    assert!((4999..=5000).contains(&total), "{total}");
    let last = s.intended_offset(total - 1).unwrap();
    assert!(last < secs(10.0));
    assert_eq!(s.intended_offset(total), None);
    assert_eq!(s.intended_offset(u64::MAX / 2), None);
    assert_eq!(s.rate_at(secs(10.0)), 0.0);
    assert_eq!(s.rate_at(secs(2.5)), 750.0);
}

#[test]
fn steps_hold_each_level() {
    let s = Stage::new(
        "sweep",
        Mode::Concurrency,
        Shape::Steps {
            levels: vec![3.0, 6.0, 15.0],
            each: secs(60.0),
        },
        Duration::ZERO,
    )
    .unwrap();
    assert_eq!(s.duration(), secs(180.0));
    assert_eq!(s.concurrency_at(secs(0.0)), 3);
    assert_eq!(s.concurrency_at(secs(59.9)), 3);
    assert_eq!(s.concurrency_at(secs(60.0)), 6);
    assert_eq!(s.concurrency_at(secs(179.0)), 15);
    assert_eq!(s.rate_at(secs(1.0)), 0.0);
    assert_eq!(s.intended_offset(0), None);

    let r = Stage::new(
        "rates",
        Mode::Rate,
        Shape::Steps {
            levels: vec![10.0, 100.0],
            each: secs(1.0),
        },
        Duration::ZERO,
    )
    .unwrap();
    assert_eq!(r.total_ops(), 110);
    assert_eq!(r.intended_offset(9), Some(secs(0.9)));
    assert_eq!(r.intended_offset(10), Some(secs(1.0)));
    assert_eq!(r.intended_offset(11), Some(secs(1.01)));
}

#[test]
fn concurrency_ramp_rounds_to_workers() {
    let s = Stage::new(
        "c",
        Mode::Concurrency,
        Shape::Ramp {
            from: 1.0,
            to: 11.0,
        },
        secs(10.0),
    )
    .unwrap();
    assert_eq!(s.concurrency_at(secs(0.0)), 1);
    assert_eq!(s.concurrency_at(secs(5.0)), 6);
    assert_eq!(s.concurrency_at(secs(100.0)), 11);
    assert_eq!(s.load_at(secs(5.0)), Load::Concurrency(6));
}

#[test]
fn bad_stages_are_rejected() {
    assert_eq!(
        Stage::rate("x", -5.0, secs(1.0)),
        Err(StageError::BadLevel(-5.0))
    );
    assert_eq!(
        Stage::rate("x", 0.0, secs(1.0)),
        Err(StageError::BadLevel(0.0))
    );
    assert!(Stage::rate("x", f64::NAN, secs(1.0)).is_err());
    assert_eq!(
        Stage::rate("x", 1.0, Duration::ZERO),
        Err(StageError::ZeroDuration)
    );
    assert_eq!(
        Stage::new("x", Mode::Concurrency, Shape::Hold(2.5), secs(1.0)),
        Err(StageError::FractionalConcurrency(2.5))
    );
    assert!(Stage::new(
        "x",
        Mode::Rate,
        Shape::Ramp { from: 0.0, to: 0.0 },
        secs(1.0)
    )
    .is_err());
    assert!(Stage::new(
        "x",
        Mode::Rate,
        Shape::Ramp {
            from: -1.0,
            to: 5.0
        },
        secs(1.0)
    )
    .is_err());
    assert_eq!(
        Stage::new(
            "x",
            Mode::Rate,
            Shape::Steps {
                levels: vec![],
                each: secs(1.0)
            },
            secs(1.0)
        ),
        Err(StageError::NoSteps)
    );
    assert_eq!(Schedule::new(vec![], false), Err(ScheduleError::Empty));
}

fn two_stage(repeat: bool) -> Schedule {
    Schedule::new(
        vec![
            Stage::rate("a", 100.0, secs(30.0)).unwrap(),
            Stage::concurrency("b", 4, secs(60.0)).unwrap(),
        ],
        repeat,
    )
    .unwrap()
}

#[test]
fn stage_at_finds_the_stage_and_detects_the_end() {
    let s = two_stage(false);
    assert_eq!(s.total_duration(), secs(90.0));
    assert_eq!(s.stage_at(secs(0.0)), Some((0, secs(0.0))));
    assert_eq!(s.stage_at(secs(29.999)), Some((0, secs(0.0))));
    assert_eq!(s.stage_at(secs(30.0)), Some((1, secs(30.0))));
    assert_eq!(s.stage_at(secs(89.9)), Some((1, secs(30.0))));
    assert_eq!(s.stage_at(secs(90.0)), None);
    assert_eq!(s.stage_at(secs(1e6)), None);
}

#[test]
fn repeat_wraps() {
    let s = two_stage(true);
    assert_eq!(s.stage_at(secs(90.0)), Some((0, secs(90.0))));
    assert_eq!(s.stage_at(secs(125.0)), Some((1, secs(120.0))));
    // Far out, the cycle start is still exact.
    let day = 86_400.0 * 365.0;
    let (idx, start) = s.stage_at(secs(day)).unwrap();
    let cycle = (day / 90.0).floor() * 90.0;
    let expect = if day - cycle < 30.0 {
        (0, cycle)
    } else {
        (1, cycle + 30.0)
    };
    assert_eq!((idx, start), (expect.0, secs(expect.1)));
}

#[test]
fn timeline_lists_occurrences_to_the_horizon() {
    let t = two_stage(true).timeline(secs(200.0), 100);
    let rows: Vec<(u64, usize, u64, u64)> = t
        .iter()
        .map(|e| (e.cycle, e.stage, e.start.as_secs(), e.end.as_secs()))
        .collect();
    assert_eq!(
        rows,
        vec![
            (0, 0, 0, 30),
            (0, 1, 30, 90),
            (1, 0, 90, 120),
            (1, 1, 120, 180),
            (2, 0, 180, 200)
        ]
    );
    assert_eq!(two_stage(false).timeline(secs(86_400.0), 100).len(), 2);
    assert_eq!(two_stage(true).timeline(secs(86_400.0), 10).len(), 10);
}

#[test]
fn display_is_readable() {
    let s = Stage::rate("warm", 500.0, secs(30.0)).unwrap();
    assert_eq!(s.to_string(), "warm: rate 500/s for 30s");
}

#[test]
fn scaled_stages_keep_their_anchor() {
    let r = Stage::new(
        "r",
        Mode::Rate,
        Shape::Ramp {
            from: 100.0,
            to: 300.0,
        },
        secs(10.0),
    )
    .unwrap();
    let d = r.scaled(2.0).unwrap();
    assert_eq!(d.duration(), r.duration());
    assert_eq!(d.rate_at(secs(5.0)), 400.0);
    assert_eq!(d.total_ops(), 2 * r.total_ops());
    assert_eq!(r.scaled(0.0), None);
    assert_eq!(r.scaled(f64::NAN), None);
    assert_eq!(r.scaled(1.0).as_ref(), Some(&r));
    let c = Stage::concurrency("c", 3, secs(1.0)).unwrap();
    assert_eq!(c.scaled(1.5).unwrap().concurrency_at(Duration::ZERO), 5);
    // Never below one worker for a hold.
    assert_eq!(c.scaled(0.01).unwrap().concurrency_at(Duration::ZERO), 1);
}

#[test]
fn first_ticket_skips_what_was_due_before() {
    let s = Stage::rate("a", 1000.0, secs(10.0)).unwrap();
    assert_eq!(s.first_ticket_at(Duration::ZERO), 0);
    // Op 2500 is due at exactly 2.5 s: still to be sent.
    assert_eq!(s.first_ticket_at(secs(2.5)), 2500);
    assert_eq!(s.first_ticket_at(secs(2.5005)), 2501);
    assert_eq!(s.first_ticket_at(secs(20.0)), s.total_ops());
}

#[test]
fn a_count_based_stage_keeps_its_count_when_scaled_or_overridden() {
    let s = Stage::concurrency("c", 4, secs(60.0))
        .unwrap()
        .with_limit(Limit::PerWorker(100))
        .unwrap();
    assert_eq!(s.operations_target(), Some(400));
    assert_eq!(
        s.to_string(),
        "c: concurrency 4 workers for 100 operations per worker (at most 1m)"
    );
    let doubled = s.scaled(2.0).unwrap();
    assert_eq!(doubled.limit(), Some(Limit::PerWorker(100)));
    assert_eq!(doubled.operations_target(), Some(800));
    // A rate override of a per-worker count runs the same operations.
    let over = Stage::rate("c", 50.0, secs(60.0)).unwrap().limited_like(&s);
    assert_eq!(over.limit(), Some(Limit::Total(400)));
    let timed = Stage::rate("t", 5.0, secs(1.0)).unwrap();
    assert_eq!(timed.clone().limited_like(&timed).limit(), None);
    // Only holds; per worker only in closed loop; never 0.
    let ramp = Stage::new(
        "r",
        Mode::Rate,
        Shape::Ramp { from: 1.0, to: 2.0 },
        secs(1.0),
    )
    .unwrap();
    assert!(ramp.with_limit(Limit::Total(5)).is_err());
    assert!(Stage::rate("r", 5.0, secs(1.0))
        .unwrap()
        .with_limit(Limit::PerWorker(5))
        .is_err());
    assert!(Stage::rate("r", 5.0, secs(1.0))
        .unwrap()
        .with_limit(Limit::Total(0))
        .is_err());
}

#[test]
fn occurrence_of_stages_and_windows() {
    use chrono::TimeZone;
    let now = Utc.with_ymd_and_hms(2026, 6, 1, 6, 0, 0).unwrap(); // Monday
    let s = two_stage(false);
    let o = s.occurrence(secs(45.0), now).unwrap();
    assert_eq!(
        (o.index, o.start, o.duration),
        (Some(1), secs(30.0), secs(60.0))
    );
    assert_eq!(o.stage.unwrap().name(), "b");
    assert_eq!(s.occurrence(secs(90.0), now), None);

    let level = |name: &str, level| window::WindowLevel {
        name: name.into(),
        mode: Mode::Rate,
        level,
        search: None,
    };
    let plan = WindowPlan::new(
        chrono_tz::Tz::UTC,
        vec![(
            "mon-fri 09:00-17:00".parse().unwrap(),
            level("busy", 2000.0),
        )],
        Some(level("quiet", 300.0)),
    )
    .unwrap();
    let w = Schedule::from_windows(plan);
    assert!(w.repeats());
    assert_eq!(w.stages().len(), 2);
    // 06:00 UTC Monday: quiet for three hours, whatever the elapsed time.
    let o = w.occurrence(secs(1e6), now).unwrap();
    assert_eq!(
        (o.index, o.start, o.duration),
        (Some(1), secs(1e6), secs(3.0 * 3600.0))
    );
    let st = o.stage.unwrap();
    assert_eq!((st.name(), st.rate_at(Duration::ZERO)), ("quiet", 300.0));
    assert_eq!(st.duration(), secs(3.0 * 3600.0));
}

#[test]
fn an_idle_worker_knows_when_the_level_reaches_it() {
    let secs = Duration::from_secs;
    let hold = Stage::concurrency("h", 8, secs(60)).unwrap();
    assert_eq!(hold.worker_needed_at(3, secs(5)), Some(secs(5)));
    assert_eq!(
        hold.worker_needed_at(8, secs(5)),
        None,
        "above a hold: never"
    );
    // 0 → 10 workers over 10 s, rounded: worker 4 is needed from 4.5 s.
    let ramp = Stage::new(
        "r",
        Mode::Concurrency,
        Shape::Ramp {
            from: 0.0,
            to: 10.0,
        },
        secs(10),
    )
    .unwrap();
    let at = ramp.worker_needed_at(4, secs(1)).unwrap();
    assert_eq!(at, Duration::from_millis(4500));
    assert_eq!(ramp.concurrency_at(at), 5);
    assert_eq!(ramp.concurrency_at(at - Duration::from_nanos(1)), 4);
    assert_eq!(ramp.worker_needed_at(10, secs(1)), None, "never 11 workers");
    let falling = Stage::new(
        "f",
        Mode::Concurrency,
        Shape::Ramp {
            from: 10.0,
            to: 0.0,
        },
        secs(10),
    )
    .unwrap();
    assert_eq!(falling.worker_needed_at(9, secs(2)), None);
    // Steps 2, 1, 6 of 10 s each: worker 3 waits for the third step.
    let steps = Stage::new(
        "s",
        Mode::Concurrency,
        Shape::Steps {
            levels: vec![2.0, 1.0, 6.0],
            each: secs(10),
        },
        secs(30),
    )
    .unwrap();
    assert_eq!(steps.worker_needed_at(3, secs(3)), Some(secs(20)));
    assert_eq!(steps.worker_needed_at(6, secs(3)), None);
    let open = Stage::rate("o", 100.0, secs(10)).unwrap();
    assert_eq!(open.worker_needed_at(0, secs(1)), None);
}

fn poisson(stage: Stage, seed: u64) -> Stage {
    stage.with_arrival(Arrival::Poisson { seed }).unwrap()
}

/// The gaps between consecutive intended starts, in seconds.
fn gaps(s: &Stage) -> Vec<f64> {
    let offsets: Vec<f64> = (0..s.total_ops())
        .map(|i| s.intended_offset(i).unwrap().as_secs_f64())
        .collect();
    offsets.windows(2).map(|w| w[1] - w[0]).collect()
}

fn mean_and_cv(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt() / mean)
}

#[test]
fn poisson_arrivals_count_within_the_poisson_band_with_exponential_gaps() {
    // 1000/s for 60 s: 60,000 expected, standard deviation √60,000 ≈ 245.
    for seed in [1, 2, 3] {
        let s = poisson(Stage::rate("p", 1000.0, secs(60.0)).unwrap(), seed);
        let n = s.total_ops() as f64;
        assert!((n - 60_000.0).abs() < 4.0 * 60_000f64.sqrt(), "{n}");
        let (mean, cv) = mean_and_cv(&gaps(&s));
        assert!((mean - 0.001).abs() < 0.00002, "mean gap {mean}");
        assert!((cv - 1.0).abs() < 0.03, "coefficient of variation {cv}");
        // Exponential: P(gap > mean) = 1/e.
        let g = gaps(&s);
        let over = g.iter().filter(|&&x| x > mean).count() as f64 / g.len() as f64;
        assert!((over - (-1f64).exp()).abs() < 0.01, "{over}");
    }
    // Uniform arrivals (the default) are evenly spaced: CV 0, count exact.
    let u = Stage::rate("u", 1000.0, secs(60.0)).unwrap();
    assert_eq!(u.arrival(), Arrival::Uniform);
    assert_eq!(u.total_ops(), 60_000);
    assert!(mean_and_cv(&gaps(&u)).1 < 1e-6);
}

#[test]
fn poisson_counts_vary_as_poisson_over_seeds() {
    // The count itself is drawn: its variance over seeds ≈ its mean
    // (a fixed count, as uniform arrivals have, would have none).
    let counts: Vec<f64> = (0..400)
        .map(|seed| poisson(Stage::rate("p", 50.0, secs(10.0)).unwrap(), seed).total_ops() as f64)
        .collect();
    let (mean, cv) = mean_and_cv(&counts);
    let var = (cv * mean).powi(2);
    assert!((mean - 500.0).abs() < 4.0, "{mean}");
    assert!((var / 500.0 - 1.0).abs() < 0.2, "variance {var}");
}

#[test]
fn poisson_arrivals_are_seeded_and_reproducible() {
    let a = poisson(Stage::rate("p", 200.0, secs(30.0)).unwrap(), 42);
    let b = poisson(Stage::rate("p", 200.0, secs(30.0)).unwrap(), 42);
    let c = poisson(Stage::rate("p", 200.0, secs(30.0)).unwrap(), 43);
    let offsets = |s: &Stage| (0..1000).map(|i| s.intended_offset(i)).collect::<Vec<_>>();
    assert_eq!(a, b);
    assert_eq!(offsets(&a), offsets(&b));
    assert_ne!(offsets(&a), offsets(&c));
    // Asked in any order, the same answers.
    let backwards: Vec<_> = (0..1000).rev().map(|i| a.intended_offset(i)).collect();
    assert_eq!(backwards.into_iter().rev().collect::<Vec<_>>(), offsets(&a));
}

#[test]
fn poisson_ops_due_agrees_with_intended_offset() {
    let ramp = Stage::new(
        "r",
        Mode::Rate,
        Shape::Ramp {
            from: 100.0,
            to: 3000.0,
        },
        secs(5.0),
    )
    .unwrap();
    let steps = Stage::new(
        "s",
        Mode::Rate,
        Shape::Steps {
            levels: vec![500.0, 50.0, 2000.0],
            each: secs(1.0),
        },
        Duration::ZERO,
    )
    .unwrap();
    for s in [
        poisson(Stage::rate("h", 777.7, secs(3.0)).unwrap(), 5),
        poisson(ramp, 6),
        poisson(steps, 7),
    ] {
        let n = s.total_ops();
        for i in 0..n {
            let at = s.intended_offset(i).unwrap();
            assert!(at < s.duration());
            assert!(s.ops_due(at) > i, "{s} op {i}");
            if let Some(before) = at.checked_sub(Duration::from_nanos(1)) {
                assert!(s.ops_due(before) <= i, "{s} op {i}");
            }
            // The first ticket at an op's start is that op or an earlier
            // one at the same nanosecond.
            assert!(s.first_ticket_at(at) <= i);
        }
        assert_eq!(s.intended_offset(n), None);
        assert_eq!(s.ops_due(s.duration()), n);
    }
}

#[test]
fn poisson_arrivals_follow_a_ramp_and_steps() {
    // A ramp 0 → 2000/s over 10 s: 5,000 ops in the first half expected,
    // 15,000 in the second (each ± 4σ).
    let s = poisson(
        Stage::new(
            "r",
            Mode::Rate,
            Shape::Ramp {
                from: 0.0,
                to: 2000.0,
            },
            secs(10.0),
        )
        .unwrap(),
        11,
    );
    let first = s.ops_due(secs(5.0) - Duration::from_nanos(1)) as f64;
    let second = s.total_ops() as f64 - first;
    assert!((first - 2500.0).abs() < 4.0 * 2500f64.sqrt(), "{first}");
    assert!((second - 7500.0).abs() < 4.0 * 7500f64.sqrt(), "{second}");
    // Scaled by 2 (runtime control): twice the operations, still Poisson.
    let doubled = poisson(Stage::rate("h", 500.0, secs(20.0)).unwrap(), 3)
        .scaled(2.0)
        .unwrap();
    assert_eq!(doubled.arrival(), Arrival::Poisson { seed: 3 });
    let n = doubled.total_ops() as f64;
    assert!((n - 20_000.0).abs() < 4.0 * 20_000f64.sqrt(), "{n}");
    assert!((mean_and_cv(&gaps(&doubled)).1 - 1.0).abs() < 0.05);
}

#[test]
fn poisson_arrivals_need_open_loop_and_show_in_the_description() {
    let closed = Stage::concurrency("c", 4, secs(10.0)).unwrap();
    assert_eq!(
        closed.with_arrival(Arrival::Poisson { seed: 1 }),
        Err(StageError::ArrivalNeedsRate)
    );
    let s = poisson(Stage::rate("p", 100.0, secs(10.0)).unwrap(), 1);
    let text = s.to_string();
    assert!(
        text.starts_with("p: rate 100/s for 10s, poisson arrivals ("),
        "{text}"
    );
    assert_eq!(format!("{s:#}"), "p: rate 100/s, poisson arrivals");
}
