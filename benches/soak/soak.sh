#!/usr/bin/env bash
# Soak benchmark (not CI): runs the daemon for SOAK_SECS (default 1 h) at a
# fixed open-loop rate against `mongoload sim` in its own process, with
# periodic faults, and samples the daemon's RSS and open fds every minute.
#
# Faults: the simulator always adds exp:1ms latency, a 2 s stall every
# 120 s, 0.2 % error replies and 0.05 % dropped connections; every
# SOAK_RESTART_EVERY seconds (default 600) it is stopped for 20 s
# (connections refused, the driver reconnecting) and restarted with the
# next error code of 10107, 91, 112, 50. A scraper reads /metrics and
# /status every 5 s meanwhile.
#
#   cargo build --profile bench --bin mongoload     # thin LTO, target/release
#   bash benches/soak/soak.sh                        # ~1 h
#   SOAK_SECS=300 bash benches/soak/soak.sh          # a quick try
#
# Output directory (SOAK_OUT, default target/soak-<UTC time>): samples.csv
# (one row a minute), daemon.log, sim.log, runs.jsonl, summary.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."

BIN=${SOAK_BIN:-target/release/mongoload}
SECS=${SOAK_SECS:-3600}
RATE=${SOAK_RATE:-500}
RESTART_EVERY=${SOAK_RESTART_EVERY:-600}
WARMUP_MIN=${SOAK_WARMUP_MIN:-5}
OUT=${SOAK_OUT:-target/soak-$(date -u +%Y%m%dT%H%M%SZ)}
SIM_PORT=${SOAK_SIM_PORT:-37017}
HTTP_PORT=${SOAK_HTTP_PORT:-39480}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
[ -x "$BIN" ] || { echo "soak: $BIN not found; build it first" >&2; exit 2; }

cat >"$OUT/soak.toml" <<TOML
[target]
uri = "mongodb://127.0.0.1:$SIM_PORT/"
database = "soak"
operation_timeout = "5s"
[http]
listen = "127.0.0.1:$HTTP_PORT"
[run]
shutdown_grace = "10s"
log = "$OUT/runs.jsonl"
[[workloads]]
name = "soak"
kind = "mixed"
max_inflight = 256
max_lag = "10s"
seed = 7
repeat = true
[workloads.mixed]
doc_size = "1KB"
initial_docs = 10000
[[workloads.stages]]
name = "hold"
rate = $RATE
duration = "5m"
TOML

codes=(10107 91 112 50)
sim_pid=
start_sim() {
    local code=$1
    RUST_LOG=warn "$BIN" sim --listen "127.0.0.1:$SIM_PORT" \
        --latency-dist exp:1ms --stall 2s/120s \
        --error-rate 0.002 --error-code "$code" --drop-rate 0.0005 \
        >>"$OUT/sim.log" 2>&1 &
    sim_pid=$!
}
stop_sim() {
    kill -TERM "$sim_pid" 2>/dev/null || true
    wait "$sim_pid" 2>/dev/null || true
}

daemon_pid=
scraper_pid=
cleanup() {
    [ -n "$scraper_pid" ] && kill "$scraper_pid" 2>/dev/null || true
    [ -n "$daemon_pid" ] && kill -TERM "$daemon_pid" 2>/dev/null || true
    [ -n "$sim_pid" ] && kill -TERM "$sim_pid" 2>/dev/null || true
}
trap cleanup EXIT

start_sim "${codes[0]}"
sleep 1
"$BIN" run --config "$OUT/soak.toml" >"$OUT/daemon.log" 2>&1 &
daemon_pid=$!

metrics() { curl -sf --max-time 5 "http://127.0.0.1:$HTTP_PORT/metrics" || true; }
# Sum of a family's samples (every label set).
family_sum() { awk -v f="$1" '$1 ~ "^"f"({|$)" {s += $NF} END {printf "%.0f", s}'; }

(
    while sleep 5; do
        curl -sf --max-time 5 -o /dev/null "http://127.0.0.1:$HTTP_PORT/metrics" || true
        curl -sf --max-time 5 -o /dev/null "http://127.0.0.1:$HTTP_PORT/status" || true
    done
) &
scraper_pid=$!

echo "minute,elapsed_s,rss_kb,fds,threads,ops_ok,ops_error,missed,load1" >"$OUT/samples.csv"
sample() {
    local minute=$1 elapsed=$2 m rss fds threads
    rss=$(awk '/^VmRSS/ {print $2}' "/proc/$daemon_pid/status")
    threads=$(awk '/^Threads/ {print $2}' "/proc/$daemon_pid/status")
    fds=$(ls "/proc/$daemon_pid/fd" | wc -l)
    m=$(metrics)
    local ok err missed
    ok=$(grep '^mongoload_operations_total' <<<"$m" | grep 'outcome="ok"' | family_sum mongoload_operations_total)
    err=$(grep '^mongoload_operations_total' <<<"$m" | grep 'outcome="error"' | family_sum mongoload_operations_total)
    missed=$(family_sum mongoload_missed_operations_total <<<"$m")
    echo "$minute,$elapsed,$rss,$fds,$threads,$ok,$err,$missed,$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$OUT/samples.csv"
}

echo "soak: $SECS s at $RATE ops/s; output in $OUT"
start=$(date +%s)
next_sample=$start
next_restart=$((start + RESTART_EVERY))
restarts=0
while :; do
    now=$(date +%s)
    elapsed=$((now - start))
    kill -0 "$daemon_pid" 2>/dev/null || { echo "soak: the daemon died" >&2; exit 1; }
    if [ "$now" -ge "$next_sample" ]; then
        sample $((elapsed / 60)) "$elapsed"
        next_sample=$((next_sample + 60))
    fi
    [ "$elapsed" -ge "$SECS" ] && break
    if [ "$now" -ge "$next_restart" ]; then
        restarts=$((restarts + 1))
        echo "soak: stopping the simulator for 20 s (restart $restarts)"
        stop_sim
        sleep 20
        start_sim "${codes[$((restarts % 4))]}"
        next_restart=$((next_restart + RESTART_EVERY))
    fi
    sleep 1
done

kill "$scraper_pid" 2>/dev/null || true
scraper_pid=
t0=$(date +%s%N)
kill -TERM "$daemon_pid"
set +e
wait "$daemon_pid"
code=$?
set -e
daemon_pid=
stop_ms=$((($(date +%s%N) - t0) / 1000000))

{
    echo "soak: $SECS s at $RATE ops/s, $restarts simulator restarts"
    echo "exit code $code after SIGTERM, in $stop_ms ms"
    awk -F, -v w="$WARMUP_MIN" 'NR == 2 {first = $0}
        NR > 1 && $1 == w {warm = $3}
        NR > 1 && $1 >= w {if (min == "" || $4 < min) min = $4; if ($4 > max) max = $4;
                           if (rmin == "" || $3 < rmin) rmin = $3; if ($3 > rmax) rmax = $3}
        NR > 1 {last = $0; lrss = $3}
        END {print "first sample: " first; print "last sample:  " last;
             printf "RSS after %d min warm-up: %d kB; at the end: %d kB; growth %+d kB (min %d, max %d kB)\n", w, warm, lrss, lrss - warm, rmin, rmax;
             printf "open fds after warm-up: min %d, max %d\n", min, max}' "$OUT/samples.csv"
    echo "daemon warnings: $(grep -c WARN "$OUT/daemon.log" || true); lines: $(wc -l <"$OUT/daemon.log")"
    grep -c 'shut down within' "$OUT/daemon.log" | sed 's/^/driver shutdown warnings: /' || true
} | tee "$OUT/summary.txt"
