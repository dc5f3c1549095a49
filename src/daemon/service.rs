//! systemd integration: `sd_notify` states for `Type=notify-reload` units
//! (READY, STATUS, RELOADING with MONOTONIC_USEC, STOPPING, WATCHDOG), the
//! watchdog interval, and the signals that stop or reload the daemon.
//!
//! Every notify function is a no-op returning `Ok(())` when NOTIFY_SOCKET is
//! unset (not run by systemd). Errors are worth a warning, never fatal.

use std::io;
use std::time::Duration;

use sd_notify::NotifyState;
use tokio::signal::unix::{signal, SignalKind};

use crate::control::{fmt_rate, ControlState};
use crate::engine::{PrepareProgress, StageLabel, StageState};

/// Tells systemd the service is up (READY=1): send it once `/metrics`
/// listens and the plan runs, and again after a reload.
pub(crate) fn notify_ready() -> io::Result<()> {
    sd_notify::notify(false, &[NotifyState::Ready])
}

/// Sets the one-line status `systemctl status` shows (STATUS=…). Newlines
/// would end the field early, so they become spaces.
pub(crate) fn notify_status(status: &str) -> io::Result<()> {
    let line = one_line(status);
    sd_notify::notify(false, &[NotifyState::Status(&line)])
}

/// Tells systemd a reload started (RELOADING=1 with MONOTONIC_USEC, as
/// `Type=notify-reload` requires); follow with [`notify_ready`] when done.
pub(crate) fn notify_reloading() -> io::Result<()> {
    let now = NotifyState::monotonic_usec_now()?;
    sd_notify::notify(false, &[NotifyState::Reloading, now])
}

/// Tells systemd the service is shutting down (STOPPING=1).
pub(crate) fn notify_stopping() -> io::Result<()> {
    sd_notify::notify(false, &[NotifyState::Stopping])
}

/// Pets the watchdog (WATCHDOG=1). Call it from the load loop every
/// [`watchdog_interval`], so a wedged engine, not just a live process, is
/// caught.
pub(crate) fn notify_watchdog() -> io::Result<()> {
    sd_notify::notify(false, &[NotifyState::Watchdog])
}

/// How often to call [`notify_watchdog`]: half of WATCHDOG_USEC, as
/// sd_watchdog_enabled(3) advises; `None` when the watchdog is off or meant
/// for another process (WATCHDOG_PID).
pub(crate) fn watchdog_interval() -> Option<Duration> {
    let usec = std::env::var("WATCHDOG_USEC").ok();
    let pid = std::env::var("WATCHDOG_PID").ok();
    watchdog_interval_from(usec.as_deref(), pid.as_deref(), std::process::id())
}

/// [`watchdog_interval`] on plain values: WATCHDOG_USEC, WATCHDOG_PID and
/// this process's id.
pub(crate) fn watchdog_interval_from(
    usec: Option<&str>,
    pid: Option<&str>,
    my_pid: u32,
) -> Option<Duration> {
    let usec: u64 = usec?.trim().parse().ok()?;
    if usec == 0 {
        return None;
    }
    if let Some(pid) = pid {
        if pid.trim().parse::<u32>().ok()? != my_pid {
            return None;
        }
    }
    Some(Duration::from_micros(usec / 2))
}

/// The workloads (by index) whose controller has not ticked for longer
/// than `max_age`: while any is listed, the daemon withholds WATCHDOG=1 so
/// systemd restarts a wedged engine. `ages` holds each workload's time
/// since its last tick, `None` for one not under watch (preparing,
/// draining, stopped).
pub(crate) fn stalled_workloads(ages: &[Option<Duration>], max_age: Duration) -> Vec<usize> {
    ages.iter()
        .enumerate()
        .filter(|(_, age)| matches!(age, Some(a) if *a > max_age))
        .map(|(i, _)| i)
        .collect()
}

/// One workload's part of the STATUS= line `systemctl status` shows: its
/// stage and effective level (after runtime control), or what it does
/// instead (preparing, paused, idle, finished).
pub(crate) fn status_phrase(
    name: &str,
    stage: &StageLabel,
    control: &ControlState,
    prepare: &PrepareProgress,
) -> String {
    let at = match stage.index {
        Some(i) => format!("stage {i} {}", stage.name),
        None => stage.name.clone(),
    };
    let level = if stage.concurrency > 0 {
        format!("{} workers", stage.concurrency)
    } else {
        format!("{} ops/s", fmt_rate(stage.rate))
    };
    let mut phrase = match stage.state {
        StageState::Preparing => {
            format!("{name}: preparing, {:.0}% loaded", prepare.ratio * 100.0)
        }
        StageState::Paused => format!("{name}: paused in {at}"),
        StageState::Idle if stage.index.is_none() => format!("{name}: idle outside every window"),
        StageState::Idle => format!("{name}: idle in {at}"),
        StageState::Running => format!("{name}: {at}, {level}"),
        StageState::Stopped => format!("{name}: finished"),
    };
    // Paused says so already; an override or a scale is worth naming.
    if stage.state != StageState::Paused
        && (control.override_load.is_some() || control.scale != 1.0)
    {
        phrase += &format!(" [control: {control}]");
    }
    phrase
}

/// The STATUS= line once the daemon is stopping (SIGTERM, or every
/// schedule has ended): in-flight operations drain for up to
/// `run.shutdown_grace`.
pub(crate) const STOPPING_STATUS: &str =
    "stopping: dispatch stopped, draining in-flight operations";

fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect()
}

/// What a signal asks the daemon to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    /// SIGTERM or SIGINT: stop dispatch, drain, exit.
    Terminate,
    /// SIGHUP: validate and apply the config file again.
    Reload,
}

/// The daemon's signal handlers. Once created, SIGTERM, SIGINT and SIGHUP no
/// longer kill the process: they are delivered here.
pub(crate) struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers. Needs a Tokio runtime with I/O enabled.
    pub(crate) fn new() -> io::Result<Self> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// The next signal. Cancel-safe, so it can sit in a `select!` loop.
    /// `None` only if the runtime shuts the handlers down.
    pub(crate) async fn recv(&mut self) -> Option<Signal> {
        tokio::select! {
            s = self.term.recv() => s.map(|()| Signal::Terminate),
            s = self.int.recv() => s.map(|()| Signal::Terminate),
            s = self.hup.recv() => s.map(|()| Signal::Reload),
        }
    }
}

/// Installs the handlers: shorthand for [`Signals::new`].
pub(crate) fn signals() -> io::Result<Signals> {
    Signals::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixDatagram;

    #[test]
    fn watchdog_interval_is_half_of_watchdog_usec_for_this_process() {
        assert_eq!(
            watchdog_interval_from(Some("20000000"), None, 7),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            watchdog_interval_from(Some("20000000"), Some("7"), 7),
            Some(Duration::from_secs(10))
        );
        assert_eq!(watchdog_interval_from(Some("20000000"), Some("8"), 7), None);
        assert_eq!(watchdog_interval_from(Some("0"), None, 7), None);
        assert_eq!(watchdog_interval_from(Some("ten"), None, 7), None);
        assert_eq!(watchdog_interval_from(None, Some("7"), 7), None);
        assert_eq!(watchdog_interval_from(Some("1000"), Some("x"), 7), None);
    }

    #[test]
    fn stalled_workloads_are_those_watched_and_older_than_max_age() {
        let max = Duration::from_secs(5);
        let s = Duration::from_secs;
        assert_eq!(stalled_workloads(&[], max), Vec::<usize>::new());
        assert_eq!(stalled_workloads(&[None, None], max), Vec::<usize>::new());
        assert_eq!(
            stalled_workloads(&[Some(s(1)), Some(s(5))], max),
            Vec::<usize>::new()
        );
        assert_eq!(
            stalled_workloads(&[Some(s(1)), None, Some(s(6)), Some(s(60))], max),
            vec![2, 3]
        );
        assert_eq!(
            stalled_workloads(&[Some(Duration::from_millis(5001))], max),
            vec![0]
        );
    }

    #[test]
    fn status_phrases_follow_stage_control_and_state() {
        let stage = |state, index, rate, concurrency| StageLabel {
            index,
            name: "steady".into(),
            rate,
            concurrency,
            state,
        };
        let none = ControlState::default();
        let prep = PrepareProgress {
            ratio: 0.456,
            ..Default::default()
        };
        let phrase = |s: &StageLabel, c: &ControlState| status_phrase("w", s, c, &prep);
        assert_eq!(
            phrase(&stage(StageState::Running, Some(1), 13.004_2, 0), &none),
            "w: stage 1 steady, 13 ops/s"
        );
        assert_eq!(
            phrase(&stage(StageState::Running, Some(0), 0.0, 16), &none),
            "w: stage 0 steady, 16 workers"
        );
        assert_eq!(
            phrase(&stage(StageState::Preparing, None, 0.0, 0), &none),
            "w: preparing, 46% loaded"
        );
        let mut paused = none.clone();
        paused.paused = true;
        assert_eq!(
            phrase(&stage(StageState::Paused, Some(1), 0.0, 0), &paused),
            "w: paused in stage 1 steady"
        );
        let mut fast = none.clone();
        fast.override_load = Some(crate::schedule::Load::Rate(500.0));
        assert_eq!(
            phrase(&stage(StageState::Running, Some(1), 500.0, 0), &fast),
            "w: stage 1 steady, 500 ops/s [control: rate 500/s (override)]"
        );
        let mut half = none.clone();
        half.scale = 0.5;
        assert!(phrase(&stage(StageState::Running, Some(1), 50.0, 0), &half)
            .ends_with("[control: scale 0.5]"));
        let idle = StageLabel {
            name: "idle".into(),
            ..stage(StageState::Idle, None, 0.0, 0)
        };
        assert_eq!(phrase(&idle, &none), "w: idle outside every window");
        assert_eq!(
            phrase(&stage(StageState::Idle, Some(2), 0.0, 0), &half),
            "w: idle in stage 2 steady [control: scale 0.5]"
        );
        assert_eq!(
            phrase(&stage(StageState::Stopped, None, 0.0, 0), &none),
            "w: finished"
        );
    }

    /// The one test that touches NOTIFY_SOCKET and WATCHDOG_*: environment
    /// variables are process-wide, so everything that depends on them runs
    /// here, in sequence.
    #[test]
    fn notifications_reach_a_real_notify_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let socket = UnixDatagram::bind(&path).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let recv = || {
            let mut buf = [0u8; 4096];
            let n = socket.recv(&mut buf).unwrap();
            String::from_utf8(buf[..n].to_vec()).unwrap()
        };

        std::env::remove_var("NOTIFY_SOCKET");
        notify_ready().expect("no-op without NOTIFY_SOCKET");
        notify_reloading().expect("no-op without NOTIFY_SOCKET");

        std::env::set_var("NOTIFY_SOCKET", &path);
        notify_ready().unwrap();
        assert_eq!(recv(), "READY=1\n");
        notify_status("stage hold\n2000 ops/s").unwrap();
        assert_eq!(recv(), "STATUS=stage hold 2000 ops/s\n");
        notify_reloading().unwrap();
        let msg = recv();
        let mut lines = msg.lines();
        assert_eq!(lines.next(), Some("RELOADING=1"));
        let usec: u64 = lines
            .next()
            .and_then(|l| l.strip_prefix("MONOTONIC_USEC="))
            .expect("MONOTONIC_USEC follows RELOADING")
            .parse()
            .unwrap();
        assert!(usec > 0);
        notify_watchdog().unwrap();
        assert_eq!(recv(), "WATCHDOG=1\n");
        notify_stopping().unwrap();
        assert_eq!(recv(), "STOPPING=1\n");

        std::env::set_var("WATCHDOG_USEC", "3000000");
        std::env::set_var("WATCHDOG_PID", std::process::id().to_string());
        assert_eq!(watchdog_interval(), Some(Duration::from_millis(1500)));
        std::env::remove_var("WATCHDOG_PID");
        std::env::remove_var("WATCHDOG_USEC");
        assert_eq!(watchdog_interval(), None);

        // A socket that went away is an error the caller can log.
        drop(socket);
        assert!(notify_ready().is_err());
        std::env::remove_var("NOTIFY_SOCKET");
    }

    /// Real signals sent to this process with kill(1): the handlers are
    /// installed first, so the default actions never run.
    #[tokio::test]
    async fn signals_map_to_terminate_and_reload() {
        let mut signals = signals().unwrap();
        let pid = std::process::id().to_string();
        for (name, expected) in [
            ("-HUP", Signal::Reload),
            ("-TERM", Signal::Terminate),
            ("-INT", Signal::Terminate),
        ] {
            let status = std::process::Command::new("kill")
                .args([name, &pid])
                .status()
                .unwrap();
            assert!(status.success());
            let got = tokio::time::timeout(Duration::from_secs(5), signals.recv())
                .await
                .expect("signal delivered");
            assert_eq!(got, Some(expected), "{name}");
        }
    }
}
