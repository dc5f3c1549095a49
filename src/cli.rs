//! The command line: one binary, several subcommands. `main.rs` parses
//! this and calls [`run`]; everything here maps straight onto the library.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Constant or scheduled synthetic load for MongoDB, with Prometheus metrics.
#[derive(Debug, Parser)]
#[command(name = "mongoload", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the built-in MongoDB wire-protocol simulator (a test double, not a database).
    Sim(crate::sim::SimArgs),
}

/// Runs the parsed command line and returns the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mongoload: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match cli.command {
        Command::Sim(args) => match runtime.block_on(crate::sim::run_cli(args)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("mongoload sim: {e:#}");
                ExitCode::FAILURE
            }
        },
    }
}
