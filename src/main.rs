use std::process::ExitCode;

use clap::Parser;

/// jemalloc instead of the system allocator: the driver and the workers
/// allocate and free many small buffers per request on every runtime
/// thread; glibc's malloc took about an eighth of the daemon's CPU
/// (BENCHMARKS.md, "Closed loop").
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    mongoload::cli::run(mongoload::cli::Cli::parse())
}
