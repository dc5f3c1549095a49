//! The driver's event handlers: its SDAM events feed [`Failover`] (the
//! primary, its changes, each member's faults) and the topology metrics;
//! its CMAP events feed the pool metrics and the book of the write
//! attempts of the task they run in ([`crate::mongo::attempts`]: the
//! published driver calls the handler inline, in the operation's task).

use std::sync::{Arc, Mutex, PoisonError};

use mongodb::bson::oid::ObjectId;
use mongodb::event::cmap::CmapEvent;
use mongodb::event::sdam::{SdamEvent, TopologyDescription};
use mongodb::event::EventHandler;
use mongodb::ServerType;

use super::{Failover, PrimaryLoss};
use crate::error_kind::ErrorKind;
use crate::metrics::DriverMetrics;
use crate::mongo::Handlers;

/// The handlers of the load's client: pool and topology metrics into
/// `driver`, the primary and the write attempts into `failover`.
pub(crate) fn handlers(driver: &Arc<DriverMetrics>, failover: &Arc<Failover>) -> Handlers {
    let pool = Arc::clone(driver);
    let cmap = EventHandler::callback(move |event: CmapEvent| {
        match &event {
            CmapEvent::ConnectionCheckoutStarted(ev) => {
                crate::mongo::attempts::checkout_started(&ev.address);
            }
            CmapEvent::ConnectionCheckedOut(ev) => {
                crate::mongo::attempts::checkout_ended(ev.duration, false);
            }
            CmapEvent::ConnectionCheckoutFailed(ev) => {
                crate::mongo::attempts::checkout_ended(ev.duration, true);
            }
            _ => {}
        }
        pool.on_cmap(&event);
    });
    let (driver, failover) = (Arc::clone(driver), Arc::clone(failover));
    let tracker = Mutex::new(PrimaryTracker::default());
    let sdam = EventHandler::callback(move |event: SdamEvent| match &event {
        SdamEvent::ServerDescriptionChanged(ev) => failover.on_server(ev),
        SdamEvent::TopologyDescriptionChanged(ev) => {
            let desc = &ev.new_description;
            let (primary, changed) = lock(&tracker).observe_description(desc);
            driver.on_topology(desc, changed);
            let loss = failover
                .primary()
                .map_or(PrimaryLoss::Other, |old| loss_of(desc, &old));
            failover.on_topology(primary.as_deref(), changed, loss);
        }
        _ => {}
    });
    Handlers {
        cmap: Some(cmap),
        sdam: Some(sdam),
    }
}

/// The SDAM handler of the monitoring-only client of shard `shard`
/// (through a mongos): its primary and failovers, on the shard's label
/// ([`Failover::on_shard_topology`]).
pub(crate) fn shard_sdam_handler(
    failover: &Arc<Failover>,
    shard: String,
) -> EventHandler<SdamEvent> {
    let failover = Arc::clone(failover);
    let tracker = Mutex::new(PrimaryTracker::default());
    EventHandler::callback(move |event| {
        let SdamEvent::TopologyDescriptionChanged(ev) = event else {
            return;
        };
        let (primary, changed) = lock(&tracker).observe_description(&ev.new_description);
        failover.on_shard_topology(&shard, primary.as_deref(), changed);
    })
}

fn lock(tracker: &Mutex<PrimaryTracker>) -> std::sync::MutexGuard<'_, PrimaryTracker> {
    tracker.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Counts primary changes: a primary at a different address, or the same
/// address after a new election (a higher election id), excluding the first
/// primary seen. A period without primary is not a change by itself.
#[derive(Debug, Default)]
struct PrimaryTracker {
    last: Option<(String, Option<ObjectId>)>,
}

impl PrimaryTracker {
    /// Feeds the primary of a new topology description; true on a change.
    fn observe(&mut self, primary: Option<&str>, election: Option<ObjectId>) -> bool {
        let Some(addr) = primary else {
            return false;
        };
        let changed = match &self.last {
            None => false,
            Some((last_addr, last_election)) => {
                last_addr != addr
                    || matches!((last_election, election), (Some(a), Some(b)) if *a != b)
            }
        };
        self.last = Some((addr.to_owned(), election));
        changed
    }

    /// The primary of `desc` and whether it is a change.
    fn observe_description(&mut self, desc: &TopologyDescription) -> (Option<String>, bool) {
        let primary = desc
            .servers()
            .into_iter()
            .find(|(_, s)| s.server_type() == ServerType::RsPrimary)
            .map(|(a, _)| a.to_string());
        let changed = self.observe(primary.as_deref(), desc.max_election_id());
        (primary, changed)
    }
}

/// How `old`, the primary until now, looks in `desc`.
fn loss_of(desc: &TopologyDescription, old: &str) -> PrimaryLoss {
    desc.servers()
        .into_iter()
        .find(|(a, _)| a.to_string() == old)
        .map_or(PrimaryLoss::Other, |(_, info)| {
            primary_loss(info.server_type(), info.error())
        })
}

/// How a member that was the primary looks now: its type and the error
/// the driver marked it unknown with.
fn primary_loss(server_type: ServerType, error: Option<&mongodb::error::Error>) -> PrimaryLoss {
    match server_type {
        ServerType::RsPrimary => PrimaryLoss::Other,
        ServerType::Unknown => match error.map(crate::error_kind::classify) {
            Some(ErrorKind::Timeout) => PrimaryLoss::Unreachable,
            Some(ErrorKind::Network) => PrimaryLoss::ConnectionLost,
            // A state-change error (NotWritablePrimary, …) it answered.
            Some(ErrorKind::NotPrimary) => PrimaryLoss::SteppedDown,
            _ => PrimaryLoss::Other,
        },
        _ => PrimaryLoss::SteppedDown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_primary_is_told_apart_by_how_it_looks_now() {
        let io = |k: std::io::ErrorKind| mongodb::error::Error::from(std::io::Error::from(k));
        let timed_out = io(std::io::ErrorKind::TimedOut);
        let reset = io(std::io::ErrorKind::ConnectionReset);
        assert_eq!(
            primary_loss(ServerType::Unknown, Some(&timed_out)),
            PrimaryLoss::Unreachable
        );
        assert_eq!(
            primary_loss(ServerType::Unknown, Some(&reset)),
            PrimaryLoss::ConnectionLost
        );
        assert_eq!(
            primary_loss(ServerType::RsSecondary, None),
            PrimaryLoss::SteppedDown
        );
        assert_eq!(primary_loss(ServerType::Unknown, None), PrimaryLoss::Other);
    }

    #[test]
    fn primary_changes_counted_on_new_address_or_new_election() {
        let e1 = ObjectId::from_bytes([0; 12]);
        let e2 = ObjectId::from_bytes([1; 12]);
        let mut t = PrimaryTracker::default();
        assert!(!t.observe(None, None), "no primary yet");
        assert!(
            !t.observe(Some("a:1"), Some(e1)),
            "first primary is no change"
        );
        assert!(!t.observe(Some("a:1"), Some(e1)), "same primary");
        assert!(!t.observe(None, Some(e1)), "losing the primary alone");
        assert!(t.observe(Some("b:1"), Some(e2)), "failover to b");
        assert!(
            t.observe(Some("b:1"), Some(e1)),
            "re-election of b with another id"
        );
        assert!(
            !t.observe(Some("b:1"), None),
            "unknown election id is no evidence"
        );
    }

    /// The real driver, pointed at a loopback port nobody listens on: its
    /// SDAM events must reach the topology gauges through [`handlers`].
    #[tokio::test]
    async fn real_driver_events_reach_the_topology_gauges() {
        use mongodb::options::ClientOptions;

        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            probe.local_addr().unwrap().port()
        };
        let m = crate::metrics::Metrics::new().unwrap();
        let failover = Failover::register_in(m.registry()).unwrap();
        let mut options = ClientOptions::parse(format!(
            "mongodb://127.0.0.1:{port}/?serverSelectionTimeoutMS=300&connectTimeoutMS=300"
        ))
        .await
        .unwrap();
        let h = handlers(m.driver(), &failover);
        options.sdam_event_handler = h.sdam;
        options.cmap_event_handler = h.cmap;
        let client = mongodb::Client::with_options(options).unwrap();
        let result = client
            .database("mongoload")
            .run_command(mongodb::bson::doc! { "ping": 1 })
            .await;
        assert!(result.is_err(), "nothing listens on {port}");

        let view = m.topology();
        assert_eq!(view.servers.get("unknown"), Some(&1), "{view:?}");
        assert!(!view.writable);
        assert_eq!(view.primary, None);
        assert_eq!(failover.primary(), None);
        let text = m.encode().unwrap();
        for line in [
            r#"mongoload_topology_servers{type="unknown"} 1"#,
            r#"mongoload_topology_servers{type="standalone"} 0"#,
            r#"mongoload_pool_connections{state="in_use"} 0"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
        client.shutdown().await;
    }
}
