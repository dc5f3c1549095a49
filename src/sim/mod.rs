//! `mongoload sim`: an in-memory server that speaks the MongoDB wire
//! protocol well enough for the official drivers and every built-in
//! workload, with fault injection. A test double and demo target, never a
//! database: no persistence, no replication, no real transactions.

pub mod aggregate;
pub mod query;
pub mod update;

/// `mongoload sim` options.
#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:27017")]
    pub listen: std::net::SocketAddr,
}

/// Runs the simulator until SIGINT or SIGTERM.
pub async fn run_cli(args: SimArgs) -> anyhow::Result<()> {
    let _ = args;
    anyhow::bail!("not built yet")
}
