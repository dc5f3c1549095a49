//! The side runtime: one OS thread of its own, running a current-thread
//! tokio runtime, for the HTTP endpoint and the control socket. Their
//! requests (a scrape storm, a stuck client, a port scan) then never run on
//! the load runtime's worker threads, take at most this one thread's CPU,
//! and that thread runs at a lower scheduling priority than the load
//! (nice +10), so when the machine is short of CPU the kernel serves the
//! load first. See BENCHMARKS.md ("Scrape isolation") for the measurements
//! behind the choice.

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// How much lower than the load the side thread runs (added to its nice
/// value: 10 gives it about a tenth of a core's share against a busy load
/// thread, and all of an idle core).
pub(crate) const NICE_INCREMENT: i32 = 10;

/// A running side runtime; [`SideRuntime::shutdown`] stops it.
pub(crate) struct SideRuntime {
    handle: tokio::runtime::Handle,
    stop: CancellationToken,
    done: oneshot::Receiver<()>,
}

impl SideRuntime {
    /// Starts the thread, named `name`, and its runtime.
    pub(crate) fn start(name: &str) -> std::io::Result<SideRuntime> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name(name)
            .build()?;
        let handle = runtime.handle().clone();
        let stop = CancellationToken::new();
        let (tx, done) = oneshot::channel();
        let until = stop.clone();
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                if let Err(e) = lower_priority(NICE_INCREMENT) {
                    tracing::debug!("cannot lower the priority of the side thread: {e}");
                }
                runtime.block_on(until.cancelled());
                // Tasks still running are dropped with the runtime, here,
                // outside of any async context.
                drop(runtime);
                let _ = tx.send(());
            })?;
        Ok(SideRuntime { handle, stop, done })
    }

    /// Runs `future` on the side thread. The handle can be awaited from
    /// any runtime.
    #[cfg(test)]
    pub(crate) fn spawn<F>(&self, future: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn(future)
    }

    /// The runtime's handle, to spawn on it.
    pub(crate) fn handle(&self) -> &tokio::runtime::Handle {
        &self.handle
    }

    /// Stops the runtime (tasks still running are dropped) and waits for
    /// its thread to finish.
    pub(crate) async fn shutdown(self) {
        self.stop.cancel();
        let _ = self.done.await;
    }
}

/// Adds `increment` to the calling thread's nice value (Linux applies
/// `setpriority(PRIO_PROCESS, tid)` to that thread only).
fn lower_priority(increment: i32) -> std::io::Result<()> {
    let tid = rustix::thread::gettid();
    let current = rustix::process::getpriority_process(Some(tid))?;
    rustix::process::setpriority_process(Some(tid), (current + increment).min(19))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nice value of a thread of this process, from /proc.
    fn nice_of(tid: u32) -> i32 {
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        after.split_whitespace().nth(16).unwrap().parse().unwrap()
    }

    #[tokio::test]
    async fn runs_tasks_on_its_own_lower_priority_thread() {
        let side = SideRuntime::start("side-test").unwrap();
        let (name, tid) = side
            .spawn(async {
                (
                    std::thread::current().name().map(str::to_owned),
                    rustix::thread::gettid().as_raw_nonzero().get() as u32,
                )
            })
            .await
            .unwrap();
        assert_eq!(name.as_deref(), Some("side-test"));
        let ours = nice_of(rustix::thread::gettid().as_raw_nonzero().get() as u32);
        assert_eq!(nice_of(tid), (ours + NICE_INCREMENT).min(19));
        // A task still pending at shutdown is dropped, not waited for.
        let pending = side.spawn(std::future::pending::<()>());
        side.shutdown().await;
        assert!(pending.await.unwrap_err().is_cancelled());
    }
}
