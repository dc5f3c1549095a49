use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    mongoload::cli::run(mongoload::cli::Cli::parse())
}
