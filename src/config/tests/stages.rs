//! Tests of the stages and windows a workload runs: warm-up, count-based
//! stages, wall-clock windows and their timeline, arrival processes.

use super::*;

#[test]
fn run_log_and_stage_warmup_parse_and_are_checked() {
    let text = BASE
        .replace(
            "[[workloads]]",
            "[run]\nlog = \"/var/lib/mongoload/runs.jsonl\"\n\n[[workloads]]",
        )
        .replace("duration = \"30s\"", "duration = \"30s\"\nwarmup = \"5s\"");
    let c = parse(&text).unwrap();
    assert_eq!(
        c.run.log.as_deref(),
        Some(Path::new("/var/lib/mongoload/runs.jsonl"))
    );
    let s = c.workloads[0].schedule().unwrap();
    assert_eq!(s.stages()[0].warmup(), Duration::from_secs(5));
    assert_eq!(s.stages()[1].warmup(), Duration::ZERO);
    assert!(c.describe().contains("log: /var/lib/mongoload/runs.jsonl"));
    assert!(c.describe().contains("(warm-up 5s)"));
    // Default: no run log.
    assert_eq!(parse(BASE).unwrap().run.log, None);

    let msg = err_at(
        &text.replace("warmup = \"5s\"", "warmup = \"30s\""),
        "workloads[0].stages[0].warmup",
    );
    assert!(msg.contains("must be shorter than the stage"), "{msg}");
    err_at(
        &text.replace("warmup = \"5s\"", "warmup = \"soon\""),
        "workloads[0].stages[0].warmup",
    );
    err_at(
        &text.replace("/var/lib/mongoload/runs.jsonl", ""),
        "run.log",
    );
}

#[test]
fn count_based_stages_parse_and_are_checked() {
    let text = BASE
        .replace(
            "rate = 500\nduration = \"30s\"",
            "rate = 500\noperations = 100000",
        )
        .replace(
            "concurrency = 16\nduration = \"1m\"",
            "concurrency = 16\noperations = 1000\nper_worker = true\nduration = \"1h\"",
        );
    let c = parse(&text).unwrap();
    let s = c.workloads[0].schedule().unwrap();
    use crate::schedule::{Limit, COUNT_STAGE_CAP};
    assert_eq!(s.stages()[0].limit(), Some(Limit::Total(100_000)));
    assert_eq!(s.stages()[0].duration(), COUNT_STAGE_CAP);
    assert_eq!(s.stages()[1].limit(), Some(Limit::PerWorker(1000)));
    assert_eq!(s.stages()[1].operations_target(), Some(16_000));
    assert_eq!(s.stages()[1].duration(), Duration::from_secs(3600));
    let d = c.describe();
    assert!(
        d.contains("warm: rate 500/s for 100000 operations (at most 30days)"),
        "{d}"
    );
    assert!(
        d.contains("for 1000 operations per worker (at most 1h)"),
        "{d}"
    );

    let msg = err_at(
        &text.replace(
            "rate = 500\noperations = 100000",
            "rate = 500\noperations = 100000\nper_worker = true",
        ),
        "workloads[0].stages[0].operations",
    );
    assert!(msg.contains("per_worker needs concurrency"), "{msg}");
    let msg = err_at(
        &text.replace(
            "rate = 500\noperations = 100000",
            "rate = { from = 1, to = 5 }\noperations = 10",
        ),
        "workloads[0].stages[0].operations",
    );
    assert!(msg.contains("constant level"), "{msg}");
    err_at(
        &text.replace("operations = 100000", "operations = 0"),
        "workloads[0].stages[0].operations",
    );
    let msg = err_at(
        &BASE.replace(
            "rate = 500\nduration = \"30s\"",
            "rate = 500\nduration = \"30s\"\nper_worker = true",
        ),
        "workloads[0].stages[0].per_worker",
    );
    assert!(msg.contains("needs operations"), "{msg}");
    let msg = err_at(
        &BASE.replace("rate = 500\nduration = \"30s\"", "rate = 500"),
        "workloads[0].stages[0].duration",
    );
    assert!(msg.contains("or operations"), "{msg}");
}

const SOAK: &str = r#"
[target]
uri = "mongodb://127.0.0.1:27017"

[control]
socket = "/run/mongoload/control.sock"

[[workloads]]
name = "soak"
kind = "mixed"
timezone = "Europe/Berlin"
windows = [
  { when = "mon-fri 09:00-17:00", rate = 2000, name = "business" },
  { when = "sat,sun 10:00-12:00", concurrency = 8 },
]
default = { rate = 300 }
"#;

#[test]
fn windows_build_a_wall_clock_schedule() {
    let c = parse(SOAK).unwrap();
    assert_eq!(
        c.control.socket.as_deref(),
        Some(Path::new("/run/mongoload/control.sock"))
    );
    let w = &c.workloads[0];
    let s = w.schedule().unwrap();
    let plan = s.windows().expect("a window schedule");
    assert_eq!(plan.windows().tz().name(), "Europe/Berlin");
    let names: Vec<&str> = s.stages().iter().map(|s| s.name()).collect();
    assert_eq!(names, ["business", "sat,sun 10:00-12:00", "default"]);
    // Open-loop windows need max_inflight workers, closed-loop ones 8.
    assert_eq!(w.peak_concurrency(), 256);
    assert_eq!(c.planned_connections(), 256);
}

#[test]
fn bad_windows_name_their_key() {
    let with = |from: &str, to: &str| SOAK.replace(from, to);
    let msg = err_at(
        &with("mon-fri 09:00-17:00", "mon-fri 9-17"),
        "workloads[0].windows[0].when",
    );
    assert!(msg.contains("not a window"), "{msg}");
    err_at(
        &with("Europe/Berlin", "Mars/Olympus"),
        "workloads[0].timezone",
    );
    err_at(
        &with("concurrency = 8", "concurrency = 8.5"),
        "workloads[0].windows[1].concurrency",
    );
    err_at(
        &with("rate = 300", "rate = -1"),
        "workloads[0].default.rate",
    );
    err_at(
        &with("rate = 2000, ", "rate = 2000, concurrency = 3, "),
        "workloads[0].windows[0]",
    );
    err_at(
        &with(
            "default = { rate = 300 }",
            "default = { rate = 300, when = \"09:00-10:00\" }",
        ),
        "workloads[0].default.when",
    );
    err_at(
        &with("{ when = \"sat,sun 10:00-12:00\", ", "{ "),
        "workloads[0].windows[1].when",
    );
    err_at(
        &with("kind = \"mixed\"", "kind = \"mixed\"\nrepeat = true"),
        "workloads[0].repeat",
    );
    let both = format!("{SOAK}[[workloads.stages]]\nrate = 5\nduration = \"1s\"\n");
    err_at(&both, "workloads[0].windows");
    err_at(
        &BASE.replace("kind = \"mixed\"", "kind = \"mixed\"\ntimezone = \"UTC\""),
        "workloads[0].timezone",
    );
    let msg = err_at(
        &with("socket = \"/run/mongoload/control.sock\"", "port = 1"),
        "control.port",
    );
    assert!(msg.contains("unknown field"), "{msg}");
}

#[test]
fn describe_prints_the_windows_next_24_hours() {
    use chrono::TimeZone;
    // Friday 2026-06-05 12:00 UTC = 14:00 CEST.
    let now = chrono::Utc.with_ymd_and_hms(2026, 6, 5, 12, 0, 0).unwrap();
    let d = parse(SOAK).unwrap().describe_at(now);
    for needle in [
        "socket: /run/mongoload/control.sock",
        "windows (Europe/Berlin, repeating forever; the first active wins):",
        "1. mon-fri 09:00-17:00  business: rate 2000/s",
        "2. sat,sun 10:00-12:00  sat,sun 10:00-12:00: concurrency 8 workers",
        "outside: default: rate 300/s",
        "timeline (next 24h, Europe/Berlin):",
        "Fri 2026-06-05 14:00 CEST .. Fri 2026-06-05 17:00 CEST  business: rate 2000/s",
        "Fri 2026-06-05 17:00 CEST .. Sat 2026-06-06 10:00 CEST  default: rate 300/s",
        "Sat 2026-06-06 10:00 CEST .. Sat 2026-06-06 12:00 CEST  sat,sun 10:00-12:00: concurrency 8 workers",
        "Sat 2026-06-06 12:00 CEST .. Sat 2026-06-06 14:00 CEST  default: rate 300/s",
    ] {
        assert!(d.contains(needle), "missing {needle:?} in:\n{d}");
    }
    // Without a default the gaps are idle.
    let idle = parse(&SOAK.replace("default = { rate = 300 }\n", ""))
        .unwrap()
        .describe_at(now);
    assert!(idle.contains("outside: idle"), "{idle}");
    assert!(
        idle.contains("Fri 2026-06-05 17:00 CEST .. Sat 2026-06-06 10:00 CEST  idle"),
        "{idle}"
    );
    // Stage lists still show offsets from the start, and control is off.
    let d = parse(BASE).unwrap().describe_at(now);
    assert!(d.contains("socket: (off)"), "{d}");
    assert!(d.contains("timeline (next 24h):"), "{d}");
}

#[test]
fn arrival_parses_per_open_loop_stage_and_check_config_prints_it() {
    use crate::schedule::Arrival;
    let text = BASE.replace(
        "rate = 500\nduration = \"30s\"",
        "rate = 500\nduration = \"30s\"\narrival = \"poisson\"",
    );
    let seeded = text.replace("kind = \"mixed\"", "kind = \"mixed\"\nseed = 9");
    let c = parse(&seeded).unwrap();
    let s = c.workloads[0].schedule().unwrap();
    assert!(matches!(s.stages()[0].arrival(), Arrival::Poisson { .. }));
    assert_eq!(s.stages()[1].arrival(), Arrival::Uniform);
    // Reproducible: the same config draws the same arrivals; another seed
    // others.
    assert_eq!(s, parse(&seeded).unwrap().workloads[0].schedule().unwrap());
    let other = parse(&text).unwrap().workloads[0].schedule().unwrap();
    assert_ne!(s.stages()[0], other.stages()[0]);
    let d = c.describe();
    assert!(
        d.contains("warm: rate 500/s for 30s, poisson arrivals ("),
        "{d}"
    );

    let uniform = BASE.replace(
        "rate = 500\nduration = \"30s\"",
        "rate = 500\nduration = \"30s\"\narrival = \"uniform\"",
    );
    let u = parse(&uniform).unwrap().workloads[0].schedule().unwrap();
    assert_eq!(u.stages()[0].arrival(), Arrival::Uniform);

    let msg = err_at(
        &BASE.replace(
            "concurrency = 16\nduration = \"1m\"",
            "concurrency = 16\nduration = \"1m\"\narrival = \"poisson\"",
        ),
        "workloads[0].stages[1].arrival",
    );
    assert!(msg.contains("need rate (open loop)"), "{msg}");
    let msg = parse(&text.replace("\"poisson\"", "\"bursty\""))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("arrival") && msg.contains("bursty"), "{msg}");
}
