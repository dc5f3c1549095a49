//! Tests of the faults: the records of each kind, latency forms and
//! samples, stalls, capacity queueing and errors by rate and command.

use super::*;
use rand::rngs::SmallRng;
use rand::SeedableRng;

#[tokio::test]
async fn a_freeze_is_recorded_from_its_start_to_its_end() {
    let f = Faults::new(FaultConfig::default());
    assert!(!f.frozen());
    f.while_silent().await;
    assert!(f.freeze());
    assert!(!f.freeze(), "already frozen");
    assert!(f.frozen());
    let r = f.records();
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].kind, r[0].end), ("freeze", None));
    // A waiter is released by the thaw, not before.
    let waiter = {
        let f = f.clone();
        tokio::spawn(async move { f.while_silent().await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiter.is_finished());
    assert!(f.thaw());
    assert!(!f.thaw(), "not frozen");
    tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("released by the thaw")
        .unwrap();
    let r = f.records();
    let end = r[0].end.expect("ended");
    assert!(end - r[0].start >= Duration::from_millis(50));
    assert_eq!(r[0].length(), end - r[0].start);
}

#[test]
fn blackhole_reset_and_slow_are_recorded_each_by_kind() {
    let mut rng = SmallRng::seed_from_u64(4);
    let f = Faults::new(FaultConfig::default());
    assert!(f.blackhole());
    assert!(!f.blackhole(), "already blackholed");
    assert!(f.blackholed() && !f.frozen() && f.gate().borrow().silent());
    assert!(f.freeze());
    assert!(f.thaw());
    assert!(f.gate().borrow().silent(), "still blackholed");
    assert!(f.end(Fault::Blackhole));
    assert!(!f.gate().borrow().silent());
    assert!(f.reset());
    assert!(f.resetting());
    assert!(f.end(Fault::Reset));
    assert!(!f.resetting());
    // A slow member's latency goes on every command but the handshake,
    // on top of the configured latency.
    f.set_latency(Some(LatencyDist::Fixed(Duration::from_millis(2))));
    assert!(f.slow(Duration::from_millis(50)));
    assert!(!f.slow(Duration::from_millis(10)), "already slow");
    assert_eq!(f.decide("find", &mut rng).delay, Duration::from_millis(52));
    assert_eq!(f.decide("hello", &mut rng).delay, Duration::ZERO);
    f.clear();
    assert_eq!(f.decide("find", &mut rng).delay, Duration::from_millis(50));
    assert!(f.end(Fault::Slow(Duration::ZERO)));
    assert!(!f.end(Fault::Slow(Duration::ZERO)));
    assert_eq!(f.decide("find", &mut rng), Decision::default());
    let kinds: Vec<_> = f
        .records()
        .iter()
        .map(|r| (r.kind, r.end.is_some(), r.election))
        .collect();
    assert_eq!(
        kinds,
        [
            ("blackhole", true, None),
            ("freeze", true, None),
            ("reset", true, None),
            ("slow", true, None)
        ]
    );
}

#[test]
fn latency_parses_every_form() {
    assert_eq!(
        "2ms".parse(),
        Ok(LatencyDist::Fixed(Duration::from_millis(2)))
    );
    assert_eq!(
        "fixed:1s".parse(),
        Ok(LatencyDist::Fixed(Duration::from_secs(1)))
    );
    assert_eq!(
        "uniform:1ms..5ms".parse(),
        Ok(LatencyDist::Uniform {
            min: Duration::from_millis(1),
            max: Duration::from_millis(5)
        })
    );
    assert_eq!(
        "exp:2ms".parse(),
        Ok(LatencyDist::Exponential {
            mean: Duration::from_millis(2)
        })
    );
    assert!("uniform:5ms..1ms".parse::<LatencyDist>().is_err());
    assert!("normal:1ms".parse::<LatencyDist>().is_err());
    assert!("fast".parse::<LatencyDist>().is_err());
}

#[test]
fn samples_stay_in_their_distribution() {
    let mut rng = SmallRng::seed_from_u64(1);
    let u = LatencyDist::Uniform {
        min: Duration::from_millis(1),
        max: Duration::from_millis(5),
    };
    let e = LatencyDist::Exponential {
        mean: Duration::from_millis(2),
    };
    let mut sum = Duration::ZERO;
    for _ in 0..10_000 {
        let s = u.sample(&mut rng);
        assert!(s >= Duration::from_millis(1) && s <= Duration::from_millis(5));
        sum += e.sample(&mut rng);
    }
    let mean = sum / 10_000;
    assert!(
        mean > Duration::from_micros(1800) && mean < Duration::from_micros(2200),
        "{mean:?}"
    );
}

#[test]
fn stall_holds_only_inside_its_window() {
    let s: Stall = "1s/10s".parse().unwrap();
    assert_eq!(s.hold(Duration::from_millis(0)), Duration::from_secs(1));
    assert_eq!(
        s.hold(Duration::from_millis(400)),
        Duration::from_millis(600)
    );
    assert_eq!(s.hold(Duration::from_millis(1500)), Duration::ZERO);
    assert_eq!(
        s.hold(Duration::from_millis(10_250)),
        Duration::from_millis(750)
    );
    assert!("2s/1s".parse::<Stall>().is_err());
    assert!("1s".parse::<Stall>().is_err());
}

#[test]
fn the_start_up_line_reads_like_the_flags_not_a_struct() {
    assert_eq!(FaultConfig::default().to_string(), "none");
    let f = FaultConfig {
        latency: Some(LatencyDist::Fixed(Duration::from_millis(5))),
        stall: Some(Stall {
            duration: Duration::from_secs(1),
            period: Duration::from_secs(10),
        }),
        error: Some(ErrorFault {
            rate: 0.05,
            code: 10107,
            commands: vec!["insert".into()],
        }),
        drop_rate: 0.01,
        lose_reply_rate: 0.02,
        capacity: None,
        refuse: false,
    };
    let text = f.to_string();
    assert_eq!(
        text,
        "latency 5ms; stall 1s every 10s; error 10107 at 5% on insert; drop 1%; lose reply 2%"
    );
    assert!(!text.contains("FaultConfig") && !text.contains('{'));
}

#[test]
fn a_capacity_queues_commands_fifo_with_a_mean_service_of_its_inverse() {
    let mut rng = SmallRng::seed_from_u64(3);
    let f = Faults::new(FaultConfig {
        capacity: Some(1000.0),
        ..FaultConfig::default()
    });
    // 2,000 commands at once: the last waits for all the others'
    // service, about 2 s, and each waits longer than the one before.
    let waits: Vec<Duration> = (0..2000)
        .map(|_| f.decide("find", &mut rng).delay)
        .collect();
    assert!(waits.windows(2).all(|w| w[1] >= w[0]));
    let last = waits.last().unwrap().as_secs_f64();
    assert!((1.85..2.15).contains(&last), "{last}");
    // The handshake does not queue.
    assert_eq!(f.decide("hello", &mut rng).delay, Duration::ZERO);
    f.set_capacity(None);
    assert_eq!(f.decide("find", &mut rng).delay, Duration::ZERO);
}

#[test]
fn errors_respect_rate_and_command_filter() {
    let mut rng = SmallRng::seed_from_u64(2);
    let f = Faults::new(FaultConfig::default());
    assert_eq!(f.decide("insert", &mut rng), Decision::default());
    f.set_error(Some(ErrorFault {
        rate: 1.0,
        code: 10107,
        commands: vec!["insert".into()],
    }));
    assert_eq!(f.decide("insert", &mut rng).error, Some(10107));
    assert_eq!(f.decide("find", &mut rng).error, None);
    assert_eq!(f.decide("hello", &mut rng).error, None);
    f.set_error(Some(ErrorFault {
        rate: 0.5,
        code: 91,
        commands: vec![],
    }));
    let hits = (0..2000)
        .filter(|_| f.decide("find", &mut rng).error.is_some())
        .count();
    assert!((800..1200).contains(&hits), "{hits}");
    f.clear();
    assert_eq!(f.decide("find", &mut rng), Decision::default());
}
