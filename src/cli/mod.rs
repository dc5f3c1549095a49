//! The command line: one binary, several subcommands. `main.rs` parses
//! this and calls [`run`]; each subcommand maps straight onto the library.

pub mod manpage;

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::config::{self, Config, ConfigError, SecretUri};
use crate::daemon;
use crate::daemon::service::{self, Signal};
use crate::exit::Exit;

/// Exit status for a configuration error (sysexits' EX_CONFIG), including
/// a path the daemon must write and cannot; the systemd units list it in
/// RestartPreventExitStatus so a bad config does not loop.
pub const EX_CONFIG: u8 = Exit::Config.code();

/// The config `mongoload demo` runs, bundled into the binary.
pub const DEMO_CONFIG: &str = include_str!("../../etc/examples/demo.toml");

/// Constant or scheduled synthetic load for MongoDB, with Prometheus metrics.
#[derive(Debug, Parser)]
#[command(name = "mongoload", version, about, long_about = None, after_long_help = manpage::after_help())]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the load daemon with a config file.
    Run(RunArgs),
    /// Validate a config file and print the resolved plan and timeline.
    CheckConfig(ConfigArg),
    /// Check the deployment before running: reachability, authentication,
    /// version, topology, write concern, readWrite privileges, what prepare
    /// writes (exit 0 ready, 69 unreachable, 77 refused, 78 config).
    CheckTarget(crate::check_target::CheckTargetArgs),
    /// Run the built-in MongoDB wire-protocol simulator (a test double, not a database).
    Sim(Box<crate::sim::SimArgs>),
    /// Start the simulator and the daemon against it with a bundled example config.
    Demo(DemoArgs),
    /// Control a running daemon through its control socket ([control] socket).
    Ctl(CtlArgs),
    /// Write a `custom` workload config from mongod's JSON log ("Slow
    /// query" entries), the profiler or $queryStats: the deployment's own
    /// query shapes, proportions and rate (x --scale), values synthesized.
    Capture(Box<crate::capture::CaptureArgs>),
    /// Print one row per stage from run logs, or compare two runs with
    /// statistics (exit 1 on a significant regression beyond a gate, 2 on
    /// unreadable input).
    Report(ReportArgs),
    /// Print the man page (roff) generated from this command line, or write
    /// every page into a directory.
    #[command(hide = true)]
    Man(ManArgs),
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write mongoload.1 and a page per subcommand into this directory
    /// instead of printing mongoload.1.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// Exit status of `mongoload report --compare` when a figure of a stage
/// or an operation changed for the worse, significantly and beyond its
/// gate (`--max-drop`, `--max-latency-rise`, `--max-error-rise`).
pub const EXIT_REGRESSION: u8 = Exit::Failure.code();
/// Exit status of `mongoload report` when a run log cannot be read.
pub const EXIT_BAD_INPUT: u8 = Exit::Usage.code();

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Run logs (JSON lines, as written to [run] log).
    #[arg(value_name = "RUNLOG", required_unless_present = "compare")]
    pub files: Vec<PathBuf>,
    /// Compare two run logs: throughput, error ratio and p50/p99/p99.9 of
    /// each stage and operation, matched by name, as means with confidence
    /// intervals over per-interval samples (Welch's t-test).
    #[arg(long, num_args = 2, value_names = ["BASE", "NEW"], conflicts_with = "files")]
    pub compare: Option<Vec<PathBuf>>,
    /// With --compare: the largest significant throughput drop that still passes (exit 1 beyond it).
    #[arg(long, default_value = "5%", requires = "compare")]
    pub max_drop: crate::report::compare::Percent,
    /// With --compare: the largest significant rise of p50, p99 or p99.9 that still passes.
    #[arg(long, default_value = "5%", requires = "compare")]
    pub max_latency_rise: crate::report::compare::Percent,
    /// With --compare: the largest significant rise of the error ratio that
    /// still passes, in percentage points (0.1% : from 0.2 % to 0.3 % passes).
    #[arg(long, default_value = "0.1%", requires = "compare")]
    pub max_error_rise: crate::report::compare::Percent,
    /// With --compare: the confidence level of the intervals and tests.
    #[arg(long, default_value = "0.99", requires = "compare", value_parser = confidence)]
    pub confidence: f64,
    /// Also one row per operation and per step (request) of each stage.
    #[arg(long)]
    pub steps: bool,
    /// Also write an HTML report to this file: charts over time with
    /// stages, failovers, audit findings and threshold breaches marked,
    /// latency by percentile, the tables and thresholds' verdicts (with
    /// --compare, the base run overlaid dashed). Self-contained: opens
    /// offline.
    #[arg(long, value_name = "OUT.html")]
    pub html: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CtlArgs {
    /// The control socket [default: $MONGOLOAD_CONTROL_SOCKET, else /run/mongoload/control.sock].
    #[arg(long, short)]
    pub socket: Option<PathBuf>,
    /// Print the daemon's JSON answer instead of text.
    #[arg(long)]
    pub json: bool,
    /// In a [cluster]: act on every member (through the database), levels
    /// being the cluster's totals; without it a command acts on this
    /// member only, levels its own.
    #[arg(long)]
    pub all: bool,
    #[command(subcommand)]
    pub command: CtlCommand,
}

/// What `mongoload ctl` asks the daemon.
#[derive(Debug, Subcommand)]
pub enum CtlCommand {
    /// Every workload's state, stage, targets and runtime control.
    Status,
    /// Idle the workload's workers (in-flight operations finish).
    Pause { workload: String },
    /// Undo a pause.
    Resume { workload: String },
    /// Run open loop at RATE ops/s instead of the schedule, until reset.
    SetRate { workload: String, rate: f64 },
    /// Run closed loop with WORKERS workers instead of the schedule, until reset.
    SetConcurrency { workload: String, workers: u32 },
    /// Multiply the scheduled rate or concurrency by FACTOR (1 = as scheduled).
    Scale { workload: String, factor: f64 },
    /// Back to the schedule as configured: clears pause, override and scale.
    Reset { workload: String },
    /// Run a full pass of the workload's acknowledged-write audit now (its
    /// result is logged and counted); prints the audit's figures so far.
    Audit { workload: String },
}

impl CtlCommand {
    /// The request line sent on the socket.
    fn line(&self) -> String {
        match self {
            CtlCommand::Status => "status".into(),
            CtlCommand::Pause { workload } => format!("pause {workload}"),
            CtlCommand::Resume { workload } => format!("resume {workload}"),
            CtlCommand::SetRate { workload, rate } => format!("set-rate {workload} {rate}"),
            CtlCommand::SetConcurrency { workload, workers } => {
                format!("set-concurrency {workload} {workers}")
            }
            CtlCommand::Scale { workload, factor } => format!("scale {workload} {factor}"),
            CtlCommand::Reset { workload } => format!("reset {workload}"),
            CtlCommand::Audit { workload } => format!("audit {workload}"),
        }
    }
}

/// Exit status of `mongoload ctl` when the daemon cannot be reached
/// (sysexits' EX_UNAVAILABLE); a refused request exits 1.
pub const EX_UNAVAILABLE: u8 = Exit::Unavailable.code();

/// `--config PATH` (declared with the config's loading, where
/// check-target's arguments take it too).
pub use crate::config::ConfigArg;

/// `mongoload run`: the config file and the live progress options.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    #[command(flatten)]
    pub progress: crate::progress::ProgressArgs,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where to serve /metrics, /healthz, /readyz and /status.
    #[arg(long, default_value = "127.0.0.1:9480")]
    pub http_listen: SocketAddr,
    /// Where the simulator listens (port 0: a free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub sim_listen: SocketAddr,
    /// The run log: one JSON line per finished stage, appended
    /// (`mongoload report --html OUT.html RUNLOG` makes the page); where
    /// its directory cannot be written, the same name in the temporary
    /// directory.
    #[arg(long, value_name = "RUNLOG", default_value = "mongoload-demo.jsonl")]
    pub run_log: PathBuf,
    #[command(flatten)]
    pub progress: crate::progress::ProgressArgs,
}

/// The default log level: `info`, or `warn` under live progress, whose
/// lines and final table say what the INFO lines (stage starts, stage
/// reports) would. RUST_LOG overrides either.
fn log_level(progress: &Option<crate::progress::Progress>) -> &'static str {
    if progress.is_some() {
        "warn"
    } else {
        "info"
    }
}

/// Runs the parsed command line and returns the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::CheckConfig(arg) => check_config(&arg.path()),
        Command::CheckTarget(args) => block_on(crate::check_target::run_cli(args)),
        Command::Run(args) => {
            let progress = args.progress.progress();
            crate::daemon::logging::init_with(log_level(&progress), progress.is_some());
            let path = args.config.path();
            let config = match config::load(&path) {
                Ok(c) => c,
                Err(e) => return config_error(&e),
            };
            let (growth, shard) = (config.growth_warnings(), config.shard_warnings());
            for w in config.warnings.iter().chain(&growth).chain(&shard) {
                tracing::warn!("{}: {w}", path.display());
            }
            crate::daemon::writable_paths::create_dirs(&config);
            if let Some(u) = crate::daemon::writable_paths::check(&config).first() {
                return config_error(&u.to_config_error(&path));
            }
            if let Some(w) = crate::daemon::limits::pool_warning(&config) {
                tracing::warn!("{w}");
            }
            match crate::daemon::limits::ensure_fds(&config, &path) {
                Ok(Some(n)) => tracing::info!(
                    "raised the soft RLIMIT_NOFILE to {n} for the plan's connections"
                ),
                Ok(None) => {}
                Err(e) => return config_error(&e),
            }
            block_on(run_daemon(config, Some(path), progress))
        }
        Command::Sim(args) => block_on(async move {
            match crate::sim::run_cli(*args).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("mongoload sim: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }),
        Command::Demo(args) => {
            let progress = args.progress.progress();
            // The demo's failovers are scheduled: under the live view their
            // WARN lines would bury it (the view shows the outages).
            let level = match &progress {
                Some(_) => DEMO_PROGRESS_LOG,
                None => log_level(&progress),
            };
            crate::daemon::logging::init_with(level, progress.is_some());
            block_on(demo(args, progress))
        }
        Command::Report(args) => report(&args),
        Command::Capture(args) => block_on(async move { crate::capture::run_cli(&args).await }),
        Command::Ctl(args) => block_on(ctl(args)),
        Command::Man(args) => man(args),
    }
}

/// Writes `text` to stdout. A reader that went away (`mongoload report …
/// | head`) ends the output quietly, as Unix tools do, and the command
/// keeps its exit status; any other write error fails the command.
fn emit(text: &str) -> Result<(), ExitCode> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => {
            eprintln!("mongoload: cannot write to stdout: {e}");
            Err(ExitCode::FAILURE)
        }
    }
}

/// [`emit`], then `code` unless the write failed.
fn emit_then(text: &str, code: ExitCode) -> ExitCode {
    emit(text).err().unwrap_or(code)
}

fn man(args: ManArgs) -> ExitCode {
    let result = match &args.dir {
        Some(dir) => manpage::generate_to(dir).map(|pages| {
            pages
                .iter()
                .map(|p| format!("{}\n", p.display()))
                .collect::<String>()
        }),
        None => {
            let mut page = Vec::new();
            manpage::render(&mut page).map(|()| String::from_utf8_lossy(&page).into_owned())
        }
    };
    match result {
        Ok(text) => emit_then(&text, ExitCode::SUCCESS),
        Err(e) => {
            eprintln!("mongoload man: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `mongoload ctl`: one request to the daemon's control socket.
async fn ctl(args: CtlArgs) -> ExitCode {
    use crate::control::{client, default_socket, Command as Request};
    let socket = args.socket.clone().unwrap_or_else(default_socket);
    let line = match args.all {
        true => format!("all {}", args.command.line()),
        false => args.command.line(),
    };
    let request: Request = match line.parse() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mongoload ctl: {e}");
            return Exit::Usage.into();
        }
    };
    let reply = match client::request(&socket, &request).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mongoload ctl: {e}");
            return ExitCode::from(EX_UNAVAILABLE);
        }
    };
    if args.json {
        let code = if reply["ok"] == true {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
        return emit_then(&format!("{reply}\n"), code);
    }
    match client::render(&reply) {
        Ok(text) => emit_then(&text, ExitCode::SUCCESS),
        Err(reason) => {
            eprintln!("mongoload ctl: {reason}");
            ExitCode::FAILURE
        }
    }
}

fn confidence(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(c) if c > 0.5 && c < 1.0 => Ok(c),
        _ => Err(format!(
            "expected a confidence level between 0.5 and 1 such as 0.99, got {s:?}"
        )),
    }
}

/// `mongoload report`: tables from run logs, or a comparison of two.
fn report(args: &ReportArgs) -> ExitCode {
    match &args.compare {
        Some(pair) => report_compare(args, pair),
        None => report_tables(args),
    }
}

/// A run log's reports; an unreadable one is said on stderr (exit 2).
fn read_log(path: &Path) -> Result<Vec<crate::report::StageReport>, ExitCode> {
    crate::report::read(path).map_err(|e| {
        eprintln!("mongoload report: {e}");
        ExitCode::from(EXIT_BAD_INPUT)
    })
}

/// `mongoload report --compare BASE NEW`: the comparison's text (and HTML
/// page), exiting with [`EXIT_REGRESSION`] when it finds a regression.
fn report_compare(args: &ReportArgs, pair: &[PathBuf]) -> ExitCode {
    use crate::report::{self, compare, table};
    let (base, new) = match (read_log(&pair[0]), read_log(&pair[1])) {
        (Ok(b), Ok(n)) => (
            report::merge::merge_members(b),
            report::merge::merge_members(n),
        ),
        (Err(code), _) | (_, Err(code)) => return code,
    };
    let gates = compare::Gates {
        max_drop: args.max_drop,
        max_latency_rise: args.max_latency_rise,
        max_error_rise: args.max_error_rise,
        confidence: args.confidence,
    };
    let c = compare::compare(&base, &new, gates);
    let mut text = format!(
        "base: {}\nnew:  {}\n\n",
        compare::describe_run(&base),
        compare::describe_run(&new)
    );
    text.push_str(&compare::render_comparison(&c, args.steps));
    let searches = table::search_comparison(&base, &new);
    if !searches.is_empty() {
        text.push('\n');
        text.push_str(&searches);
    }
    if args.steps {
        text.push('\n');
        text.push_str(&compare::render_steps(&base, &new));
    }
    let code = if c.regressions() > 0 {
        ExitCode::from(EXIT_REGRESSION)
    } else {
        ExitCode::SUCCESS
    };
    if let Some(out) = &args.html {
        let (b, n) = (pair[0].display().to_string(), pair[1].display().to_string());
        let runs = [
            report::html::Run {
                role: "base",
                source: &b,
                reports: &base,
            },
            report::html::Run {
                role: "new",
                source: &n,
                reports: &new,
            },
        ];
        if let Err(code) = write_html(out, &report::html::page(&runs, Some(&text))) {
            return code;
        }
    }
    emit_then(&text, code)
}

/// `mongoload report FILE…`: the tables of the stages (one row per cluster
/// stage), searches, shards and steps (and the HTML page).
fn report_tables(args: &ReportArgs) -> ExitCode {
    use crate::report::{self, table};
    let mut all = Vec::new();
    // The run log each run was first read from, for the HTML report.
    let mut sources: Vec<(String, String)> = Vec::new();
    for path in &args.files {
        match read_log(path) {
            Ok(r) => {
                for s in &r {
                    if !sources.iter().any(|(id, _)| *id == s.run_id) {
                        sources.push((s.run_id.clone(), path.display().to_string()));
                    }
                }
                all.extend(r)
            }
            Err(code) => return code,
        }
    }
    // Cluster members' rows of one stage become one cluster-wide row.
    let all = report::merge::merge_members(all);
    let mut text = table::stage_table(&all);
    for extra in [
        table::searches_table(&all),
        table::shards_table(&all),
        table::shard_failovers_table(&all),
    ] {
        if !extra.is_empty() {
            text.push('\n');
            text.push_str(&extra);
        }
    }
    if args.steps {
        text.push('\n');
        text.push_str(&table::steps_table(&all));
    }
    if let Some(out) = &args.html {
        let split = report::html::split_runs(&all);
        let runs: Vec<report::html::Run> = split
            .iter()
            .map(|reports| report::html::Run {
                role: "",
                source: sources
                    .iter()
                    .find(|(id, _)| reports.first().is_some_and(|r| r.run_id == *id))
                    .map_or("", |(_, path)| path.as_str()),
                reports,
            })
            .collect();
        if let Err(code) = write_html(out, &report::html::page(&runs, None)) {
            return code;
        }
    }
    emit_then(&text, ExitCode::SUCCESS)
}

/// Writes the HTML report; a failure names the file (exit 2).
fn write_html(path: &Path, html: &str) -> Result<(), ExitCode> {
    std::fs::write(path, html).map_err(|e| {
        eprintln!(
            "mongoload report: cannot write the HTML report {}: {e}",
            path.display()
        );
        ExitCode::from(EXIT_BAD_INPUT)
    })
}

fn block_on(f: impl Future<Output = ExitCode>) -> ExitCode {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(f),
        Err(e) => {
            eprintln!("mongoload: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

fn config_error(e: &ConfigError) -> ExitCode {
    eprintln!("mongoload: invalid config: {e}");
    ExitCode::from(EX_CONFIG)
}

/// `mongoload check-config`. Paths the daemon must write are tried as
/// whoever runs the check, as `mongoload run` by the same user would (a
/// missing directory this user can create is fine: `run` creates it):
/// what `run` refuses with 78, the check refuses with the same line.
fn check_config(path: &Path) -> ExitCode {
    match config::load(path) {
        Ok(config) => {
            use crate::daemon::limits::{self, Verdict};
            for w in &config.warnings {
                eprintln!("mongoload: warning: {}: {w}", path.display());
            }
            if let Some(u) = crate::daemon::writable_paths::check(&config).first() {
                return config_error(&u.to_config_error(path));
            }
            // A readable uri_file is checked as `run` checks it; one this
            // user cannot read (a systemd credential, a Kubernetes Secret
            // outside its pod) only `run` can.
            if let (None, Some(file)) = (&config.target.uri, &config.target.uri_file) {
                match std::fs::read_to_string(file) {
                    Ok(_) => {
                        if let Err(e) = config.target.resolve_uri() {
                            return config_error(&e);
                        }
                    }
                    Err(e) => eprintln!(
                        "mongoload: warning: {}: target.uri_file: {} cannot be read by this user \
                         ({e}); mongoload run reads it at start and exits {EX_CONFIG} if it cannot",
                        path.display(),
                        file.display()
                    ),
                }
            }
            let budget = limits::fd_budget(&config);
            let limit = limits::nofile();
            let mut text = format!(
                "{path}: ok\n\n{}\n{}\n",
                config.describe(),
                limits::describe(&budget, limit),
                path = path.display()
            );
            if let Some(w) = limits::pool_warning(&config) {
                eprintln!("mongoload: warning: {w}");
            }
            for w in config
                .growth_warnings()
                .iter()
                .chain(&config.shard_warnings())
            {
                eprintln!("mongoload: warning: {}: {w}", path.display());
            }
            match limits::verdict(budget.needed, limit) {
                Verdict::Fits => {}
                Verdict::Raise(n) => {
                    text.push_str(&format!("  (mongoload run raises the soft limit to {n})\n"))
                }
                // Warn, do not fail: the service may run under another
                // limit (LimitNOFILE=) than this shell; run refuses.
                Verdict::TooFew { hard } => eprintln!(
                    "mongoload: warning: {}\nmongoload: warning: mongoload run refuses this plan under this limit (exit {EX_CONFIG})",
                    limits::too_few(path, &budget, hard)
                ),
            }
            emit_then(&text, ExitCode::SUCCESS)
        }
        Err(e) => config_error(&e),
    }
}

/// Runs the daemon until its schedules end or SIGTERM/SIGINT; SIGHUP
/// reloads the config file (`path`): a valid one replaces the plan live
/// (see [`crate::daemon::supervisor`]), an invalid one is logged and ignored. With
/// `progress`, the terminal shows the run live and its stage table at exit.
async fn run_daemon(
    config: Config,
    path: Option<PathBuf>,
    progress: Option<crate::progress::Progress>,
) -> ExitCode {
    let mut signals = match service::signals() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mongoload: cannot install signal handlers: {e}");
            return ExitCode::FAILURE;
        }
    };
    let tap = progress.as_ref().map(|p| p.tap());
    let running = match daemon::start_with(config, tap).await {
        Ok(r) => r,
        Err(daemon::StartError::Config(e)) => return config_error(&e),
        Err(e @ (daemon::StartError::Uri { .. } | daemon::StartError::Workload { .. })) => {
            tracing::error!("invalid config: {e}");
            return ExitCode::from(EX_CONFIG);
        }
        // systemd restarts it: the deployment may be found later.
        Err(e @ daemon::StartError::Client { .. }) => {
            tracing::error!("cannot start: {e}");
            return ExitCode::from(EX_UNAVAILABLE);
        }
        // Logged once: to the journal under systemd, else to stderr.
        Err(e) => {
            tracing::error!("cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    let live = progress.map(|p| p.start(&running));
    let cancel = running.cancel_token();
    let reloader = running.reloader();
    let mut done = tokio::spawn(running.wait());
    let finished = loop {
        tokio::select! {
            r = &mut done => break r,
            signal = signals.recv() => match signal {
                // The daemon tells systemd STOPPING=1 (once) when cancelled.
                Some(Signal::Terminate) | None if !cancel.is_cancelled() => {
                    tracing::info!("stopping: dispatch stopped, draining in-flight operations");
                    cancel.cancel();
                }
                Some(Signal::Terminate) | None => {}
                Some(Signal::Reload) => match &path {
                    // In a task, so SIGTERM is still heard while a reload
                    // drains a changed workload.
                    Some(p) => {
                        let (reloader, p) = (reloader.clone(), p.clone());
                        tokio::spawn(async move { reloader.reload_file(&p).await });
                    }
                    None => tracing::info!("SIGHUP ignored: this run has no config file"),
                },
            },
        }
    };
    if let Some(live) = live {
        live.finish().await;
    }
    match finished {
        Ok(summary) if summary.workloads.iter().any(|w| w.fatal_exit.is_some()) => ExitCode::from(
            summary
                .workloads
                .iter()
                .find_map(|w| w.fatal_exit)
                .unwrap_or(1),
        ),
        Ok(summary) if summary.workloads.iter().any(|w| w.threshold_aborted) => {
            ExitCode::from(crate::threshold::EXIT_THRESHOLD_ABORT)
        }
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("run task failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `mongoload demo`: the simulator in-process (a three-member replica set
/// that fails over every [`DEMO_FAILOVER_EVERY`]), the daemon against it
/// with the bundled config.
async fn demo(args: DemoArgs, progress: Option<crate::progress::Progress>) -> ExitCode {
    let mut set = crate::sim::ReplSetConfig::new("demo", 3);
    set.failover_every = Some(DEMO_FAILOVER_EVERY);
    set.election = crate::sim::ElectionTime {
        min: Duration::from_secs(1),
        max: Duration::from_secs(3),
    };
    set.replication_lag = DEMO_REPLICATION_LAG;
    let sim = match crate::sim::start_replset(
        crate::sim::SimConfig {
            listen: args.sim_listen,
            ..Default::default()
        },
        set,
    )
    .await
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "mongoload demo: cannot start the simulator on {}: {e}",
                args.sim_listen
            );
            return ExitCode::FAILURE;
        }
    };
    let mut config = match demo_config() {
        Ok(c) => c,
        Err(e) => return config_error(&e),
    };
    config.target.uri = Some(SecretUri::new(sim.uri()));
    config.target.uri_file = None;
    config.http.listen = args.http_listen;
    let run_log = demo_run_log(&args.run_log);
    config.run.log = Some(run_log.clone());
    // The demo runs on when nobody reads its stdout.
    let _ = emit(&format!(
        "mongoload demo: simulator (an in-memory test double, not a database) at {}\n\
         mongoload demo: a replica set of 3 whose primary steps down every {}\n\
         mongoload demo: metrics at http://{}/metrics  status at http://{}/status\n\
         mongoload demo: run log (a line per finished stage) at {}\n\
         mongoload demo: Ctrl-C stops both\n",
        sim.uri(),
        humantime::format_duration(DEMO_FAILOVER_EVERY),
        args.http_listen,
        args.http_listen,
        run_log.display(),
    ));
    let code = run_daemon(config, None, progress).await;
    sim.shutdown().await;
    let _ = emit(&format!(
        "mongoload demo: run log at {log}; as a page: mongoload report --html mongoload-demo.html {log}\n",
        log = run_log.display(),
    ));
    code
}

/// The demo's run log: `wanted` made absolute, or the same file name in
/// the temporary directory where `wanted`'s directory cannot be written
/// (a demo started from `/`), so that the demo runs wherever it starts.
fn demo_run_log(wanted: &Path) -> PathBuf {
    let absolute = std::env::current_dir()
        .map(|d| d.join(wanted))
        .unwrap_or_else(|_| wanted.to_path_buf());
    let writable = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&absolute)
        .is_ok();
    if writable {
        return absolute;
    }
    let name = wanted
        .file_name()
        .map_or_else(|| "mongoload-demo.jsonl".into(), |n| n.to_os_string());
    std::env::temp_dir().join(name)
}

/// The demo's log filter under the live view: warnings, except those of
/// the failovers the demo schedules itself (RUST_LOG overrides it).
pub const DEMO_PROGRESS_LOG: &str = "warn,mongoload::failover=error";

/// How often the demo's replica set fails over.
pub const DEMO_FAILOVER_EVERY: Duration = Duration::from_secs(20);

/// How late the demo's secondaries apply writes (the lag probe shows it).
pub const DEMO_REPLICATION_LAG: Duration = Duration::from_millis(100);

/// The bundled demo config, parsed as if from etc/examples/demo.toml.
pub fn demo_config() -> Result<Config, ConfigError> {
    config::parse_with_env(
        DEMO_CONFIG,
        Path::new("etc/examples/demo.toml"),
        std::iter::empty(),
    )
}
