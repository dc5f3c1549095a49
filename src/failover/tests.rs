use super::*;
use crate::mongo::attempts::member_key;
use mongodb::options::ServerAddress;
use mongodb::ServerType;

#[test]
fn only_availability_errors_make_an_outage() {
    assert!(is_outage_error(ErrorKind::NotPrimary));
    assert!(is_outage_error(ErrorKind::ServerSelection));
    assert!(!is_outage_error(ErrorKind::DuplicateKey));
    assert!(!is_outage_error(ErrorKind::Auth));
    let m = Failover::new().unwrap();
    let t0 = Instant::now();
    m.write_result(t0, t0, Err(ErrorKind::DuplicateKey));
    assert_eq!(m.ongoing_outage(), None);
    m.write_result(t0, t0 + Duration::from_millis(1), Err(ErrorKind::Network));
    assert!(m.ongoing_outage().is_some());
    m.write_result(
        t0 + Duration::from_millis(2),
        t0 + Duration::from_millis(500),
        Ok(()),
    );
    assert_eq!(m.ongoing_outage(), None);
    assert_eq!(m.families.outage.get_sample_count(), 1);
    assert!(
        (m.families.outage_last.get() - 0.499).abs() < 1e-9,
        "{}",
        m.families.outage_last.get()
    );
}

#[test]
fn failovers_are_recorded_with_their_gap_and_outage() {
    let m = Failover::new().unwrap();
    let mut seen = m.subscribe();
    m.on_topology(Some("a:1"), false, PrimaryLoss::Other);
    assert!(m.recent(10).is_empty(), "the first primary is no failover");
    assert_eq!(m.families.primary_info.with_label_values(&["a:1"]).get(), 1);
    let t0 = Instant::now();
    m.write_result(t0, t0, Err(ErrorKind::NotPrimary));
    m.on_topology(None, false, PrimaryLoss::ConnectionLost);
    m.on_topology(Some("b:1"), true, PrimaryLoss::Other);
    assert!(seen.has_changed().unwrap());
    let _ = seen.borrow_and_update();
    let r = m.recent(10);
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].from.as_deref(), r[0].to.as_str()),
        (Some("a:1"), "b:1")
    );
    assert!(r[0].no_primary.is_some());
    assert_eq!(r[0].write_outage, None);
    // The a:1 series is gone, b:1 is primary.
    let page = {
        let reg = Registry::new();
        reg.register(Box::new(m.families.primary_info.clone()))
            .unwrap();
        format!("{:?}", reg.gather())
    };
    assert!(!page.contains("a:1") && page.contains("b:1"), "{page}");
    m.write_result(Instant::now(), Instant::now(), Ok(()));
    let r = m.between(t0, Instant::now());
    assert!(
        r[0].write_outage.is_some(),
        "the outage is attached to the failover"
    );
    assert_eq!(m.families.no_primary.get_sample_count(), 1);
    assert_ne!(
        m.primary_back.load(Ordering::Relaxed),
        0,
        "the primary is back"
    );
    // The same primary again after a gap: no failover.
    m.on_topology(None, false, PrimaryLoss::ConnectionLost);
    m.on_topology(Some("b:1"), false, PrimaryLoss::Other);
    assert_eq!(m.recent(10).len(), 1);
    assert!(!seen.has_changed().unwrap());
    assert_eq!(m.families.primary_changes.get(), 1, "b:1 only");
}

/// The driver delivers its events on a task of its own: under load a
/// write can be acknowledged by the new primary before the event
/// naming it reaches the handler. The outage still belongs to that
/// failover; after a gap that ends with the same primary it belongs to
/// none.
#[test]
fn an_outage_over_before_the_event_of_its_primary_is_that_failovers() {
    let m = Failover::new().unwrap();
    m.on_topology(Some("a:1"), false, PrimaryLoss::Other);
    m.on_topology(None, false, PrimaryLoss::SteppedDown);
    let t0 = Instant::now();
    m.write_result(t0, t0, Err(ErrorKind::ServerSelection));
    let t1 = t0 + Duration::from_millis(3);
    m.write_result(t1, t1, Ok(()));
    assert_eq!(m.families.outage.get_sample_count(), 1, "the outage ended");
    assert!(m.recent(10).is_empty(), "no failover known yet");
    m.on_topology(Some("b:1"), true, PrimaryLoss::Other);
    let r = m.recent(10);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].to, "b:1");
    let length = r[0].write_outage.expect("the outage attached");
    assert!(length >= Duration::from_millis(3), "{length:?}");

    // A dropped connection: the same primary back, no failover, and
    // its outage goes to no later failover.
    m.on_topology(None, false, PrimaryLoss::ConnectionLost);
    let t2 = Instant::now();
    m.write_result(t2, t2, Err(ErrorKind::Network));
    m.write_result(t2, t2 + Duration::from_millis(1), Ok(()));
    m.on_topology(Some("b:1"), false, PrimaryLoss::Other);
    m.on_topology(None, false, PrimaryLoss::SteppedDown);
    m.on_topology(Some("c:1"), true, PrimaryLoss::Other);
    let r = m.recent(10);
    assert_eq!(r.len(), 2);
    assert_eq!(r[1].write_outage, None, "{r:?}");
}

/// Attempts `(member, started)` of one request, each with its
/// connection in hand 1 ms after its checkout began.
fn attempts(list: &[(&str, Instant)]) -> Attempts {
    let mut a = Attempts::default();
    for (member, at) in list {
        a.started(member_key(&ServerAddress::parse(member).unwrap()), *at);
        a.ended(Duration::from_millis(1), false);
    }
    a
}

fn server(m: &Failover, address: &str, from: ServerType, to: ServerType, error: Option<ErrorKind>) {
    m.members().changed(
        &ServerAddress::parse(address).unwrap(),
        from,
        to,
        error,
        Instant::now(),
    );
}

/// A refusal by the old primary of a write sent after the driver
/// knew the new one starts no outage; the same refusal from the
/// current primary, or of a write sent before the new primary was
/// known, does.
#[test]
fn a_refusal_by_the_replaced_primary_is_no_outage() {
    let m = Failover::new().unwrap();
    server(&m, "a:1", ServerType::Unknown, ServerType::RsPrimary, None);
    server(
        &m,
        "b:1",
        ServerType::Unknown,
        ServerType::RsSecondary,
        None,
    );
    m.on_topology(Some("a:1"), false, PrimaryLoss::Other);
    m.on_topology(None, false, PrimaryLoss::SteppedDown);
    server(
        &m,
        "a:1",
        ServerType::RsPrimary,
        ServerType::RsSecondary,
        None,
    );
    let before = Instant::now();
    std::thread::sleep(Duration::from_millis(5));
    m.on_topology(Some("b:1"), true, PrimaryLoss::Other);
    server(
        &m,
        "b:1",
        ServerType::RsSecondary,
        ServerType::RsPrimary,
        None,
    );
    // Ends the outage the loss began.
    m.write_result(Instant::now(), Instant::now(), Ok(()));
    assert_eq!(m.families.outage.get_sample_count(), 1);
    // Refused by a:1 (a stale route), retried and refused again by
    // the current primary: only the last one counts.
    let t = Instant::now();
    let stale = attempts(&[("a:1", t), ("b:1", t + Duration::from_millis(2))]);
    m.write_done(t, t, &stale, Ok(()));
    assert_eq!(m.ongoing_outage(), None, "a stale route");
    assert_eq!(
        m.families.retried.with_label_values(&["not_primary"]).get(),
        1
    );
    // Sent before b:1 was known: counts (the clock's own rule leaves
    // out what was sent before the last outage ended).
    let took = before.elapsed();
    assert!(m.state().sent_to_replaced_primary("a:1", Instant::now()));
    assert!(!m
        .state()
        .sent_to_replaced_primary("a:1", Instant::now() - took));
    server(
        &m,
        "b:1",
        ServerType::RsPrimary,
        ServerType::Unknown,
        Some(ErrorKind::NotPrimary),
    );
    let t = Instant::now();
    let refused = attempts(&[("b:1", t), ("b:1", t + Duration::from_millis(2))]);
    m.write_done(
        t,
        t + Duration::from_millis(3),
        &refused,
        Err(ErrorKind::NotPrimary),
    );
    assert!(m.ongoing_outage().is_some(), "the current primary refuses");
    assert_eq!(
        m.families.retried.with_label_values(&["not_primary"]).get(),
        2
    );
}

#[test]
fn a_write_concern_error_is_no_acknowledgement() {
    let m = Failover::new().unwrap();
    let t0 = Instant::now();
    let ms = Duration::from_millis(1);
    let one = attempts(&[("a:1", t0)]);
    m.write_done(t0, t0 + ms, &one, Err(ErrorKind::Network));
    assert!(m.ongoing_outage().is_some());
    // A write concern error is the operation's error: its class.
    let t1 = t0 + 2 * ms;
    m.write_done(
        t1,
        t1 + ms,
        &attempts(&[("a:1", t1)]),
        Err(ErrorKind::Other),
    );
    assert!(
        m.ongoing_outage().is_some(),
        "acknowledged below the concern asked for"
    );
    let t2 = t0 + 5 * ms;
    m.write_done(t2, t2 + ms, &attempts(&[("a:1", t2)]), Ok(()));
    assert_eq!(m.ongoing_outage(), None);
}

/// Two checkouts for one write: the driver sent it again after the
/// first attempt failed. One retry by the class of the fault the
/// driver marked the member with, an outage from the failed attempt,
/// ended by the retry's acknowledgement, which is dated from its own
/// sending (after the outage began), not the request's.
#[test]
fn a_write_sent_again_is_one_retry_and_its_failed_attempt_starts_the_outage() {
    let m = Failover::new().unwrap();
    let ms = Duration::from_millis(1);
    server(&m, "a:1", ServerType::Unknown, ServerType::RsPrimary, None);
    let t0 = Instant::now();
    std::thread::sleep(2 * ms);
    server(
        &m,
        "a:1",
        ServerType::RsPrimary,
        ServerType::Unknown,
        Some(ErrorKind::Network),
    );
    let fault_at = m
        .members()
        .fault(&attempts(&[("a:1", t0)]).last().unwrap())
        .at
        .unwrap();
    std::thread::sleep(2 * ms);
    let t1 = Instant::now();
    let retried = attempts(&[("a:1", t0), ("a:1", t1)]);
    m.write_done(t0, t1 + 3 * ms, &retried, Ok(()));
    assert_eq!(m.families.retried.with_label_values(&["network"]).get(), 1);
    let total: u64 = ErrorKind::ALL
        .iter()
        .map(|k| m.families.retried.with_label_values(&[k.as_str()]).get())
        .sum();
    assert_eq!(total, 1, "counted once");
    assert_eq!(
        m.ongoing_outage(),
        None,
        "the retry's acknowledgement ends it"
    );
    assert_eq!(m.families.outage.get_sample_count(), 1);
    // From the fault (the attempt failed between its sending and the
    // retry's checkout) to the acknowledgement.
    let want = (t1 + 3 * ms).duration_since(fault_at).as_secs_f64();
    assert!(
        (m.families.outage_last.get() - want).abs() < 1e-6,
        "{} vs {want}",
        m.families.outage_last.get()
    );
    // One checkout: no retry, whatever the outcome.
    let t2 = Instant::now();
    m.write_done(t2, t2, &attempts(&[("a:1", t2)]), Err(ErrorKind::Network));
    assert_eq!(m.families.retried.with_label_values(&["network"]).get(), 1);
    // No member fault known when the write returns: `other`, and no
    // outage from it.
    let m = Failover::new().unwrap();
    let t3 = Instant::now();
    m.write_done(
        t3,
        t3 + 3 * ms,
        &attempts(&[("c:1", t3), ("c:1", t3 + ms)]),
        Ok(()),
    );
    assert_eq!(m.families.retried.with_label_values(&["other"]).get(), 1);
    assert_eq!(m.families.outage.get_sample_count(), 0);
    // Attempts not read (`command_events = false`): no retry counted.
    m.track_attempts(false);
    m.write_done(
        t3,
        t3 + 3 * ms,
        &attempts(&[("c:1", t3), ("c:1", t3 + ms)]),
        Ok(()),
    );
    assert_eq!(m.families.retried.with_label_values(&["other"]).get(), 1);
}
