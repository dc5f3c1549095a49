use std::process::ExitCode;

use clap::Parser;

/// jemalloc instead of the system allocator: the driver and the workers
/// allocate and free many small buffers per request on every runtime
/// thread; glibc's malloc took about an eighth of the daemon's CPU
/// (BENCHMARKS.md, "Closed loop").
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its first allocation (tikv-jemalloc-sys,
/// `malloc_conf`; `_RJEM_MALLOC_CONF` still overrides them): freed pages
/// returned to the system at once, none kept dirty or muzzy. With a 1 s
/// dirty decay (100 ms alike) RssAnon at 1,000 in flight was 51.7 MiB on
/// the release build, 48.4 MiB with none; no cost seen in CPU per
/// operation, closed loop or open (BENCHMARKS.md, "The driver as
/// published").
#[allow(non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: Option<&'static std::ffi::c_char> =
    // SAFETY: a NUL-terminated string of static lifetime, which jemalloc
    // only reads.
    Some(unsafe { &*c"dirty_decay_ms:0,muzzy_decay_ms:0".as_ptr() });

fn main() -> ExitCode {
    mongoload::cli::run(mongoload::cli::Cli::parse())
}
