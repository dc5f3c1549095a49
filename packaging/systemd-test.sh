#!/usr/bin/env bash
# The installed package under a live systemd, run by CI (.ci/run) as root on
# Debian bookworm after packaging/check.sh has built the .deb:
#   1. a bookworm root filesystem with systemd from the Debian archive
#      (mmdebstrap), cached as target/systemd-test/bookworm-rootfs.tar, so
#      only the first run downloads it (about 30 s);
#   2. a fresh copy booted with systemd-nspawn --register=no --keep-unit
#      (no systemd on the host to register with), sharing the host network,
#      so the daemon in the container reaches `mongoload sim` on the host's
#      loopback and the host scrapes the daemon's /metrics;
#   3. the .deb installed with apt; systemctl run in the container through
#      nsenter into its PID 1; every promise of the units checked: out of
#      the box, /metrics, STATUS=, ctl as root and as the service user,
#      reload (MainPID and stage position kept, a broken file refused),
#      stop within the grace period, a config error (exit 78, never
#      restarted), an unwritable run.log (exit 78, then the ReadWritePaths=
#      drop-in), instances side by side, the watchdog on a frozen daemon,
#      systemd-analyze security, purge.
# Usage: packaging/systemd-test.sh [PACKAGE.deb | --rootfs-only]   (default:
# the one .deb in target/debian/, where packaging/check.sh leaves it;
# --rootfs-only makes the cached root filesystem and stops). It changes nothing
# on the host but target/systemd-test/.
# Needs: root, mmdebstrap, systemd-container (systemd-nspawn), util-linux
# (nsenter), python3, the Debian archive reachable (first run only).
set -euo pipefail
cd "$(dirname "$0")/.."

target_dir=${CARGO_TARGET_DIR:-target}
deb=${1:-}
# --rootfs-only: make (or find cached) the root filesystem and stop; CI
# runs it early, beside the build, since it mostly waits on the archive.
rootfs_only=false
if [ "$deb" = --rootfs-only ]; then
    rootfs_only=true
    deb=""
elif [ -z "$deb" ]; then
    shopt -s nullglob
    debs=("$target_dir"/debian/*.deb)
    shopt -u nullglob
    [ "${#debs[@]}" = 1 ] || { echo "systemd-test: want one .deb in $target_dir/debian/, found ${#debs[@]}; pass its path" >&2; exit 2; }
    deb=${debs[0]}
fi
$rootfs_only || [ -f "$deb" ] || { echo "systemd-test: no such package: $deb" >&2; exit 2; }

cache="$target_dir/systemd-test"
work=""
nspawn_pid=""
sim_pid=""
pid1=""

step() { echo "--- systemd-test (${SECONDS}s): $*"; }

# Runs a command inside the container (all of PID 1's namespaces), with a
# clean environment.
c() {
    timeout 120 nsenter --target "$pid1" --all \
        env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"
}

# The value of one property of a unit.
prop() { c systemctl show --property "$2" --value "$1"; }

diagnose() {
    if [ -n "$work" ] && [ -f "$work/console.log" ]; then
        echo "=== the container's console (last lines)"
        tail -20 "$work/console.log"
    fi
    [ -n "$pid1" ] || return 0
    echo "=== systemctl status 'mongoload*'"
    c systemctl status --no-pager --full 'mongoload*' 2>&1 | tail -40 || true
    echo "=== journal of the mongoload units"
    c journalctl --no-pager -o short-precise -n 120 -u 'mongoload*' 2>&1 || true
}

fail() {
    echo "packaging/systemd-test.sh: FAIL: $*" >&2
    diagnose >&2
    exit 1
}

cleanup() {
    local rc=$?
    set +e
    if [ -n "$nspawn_pid" ] && kill -0 "$nspawn_pid" 2>/dev/null; then
        # SIGTERM asks the container's systemd to shut down cleanly.
        kill -TERM "$nspawn_pid"
        for _ in $(seq 1 100); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 0.2; done
        kill -KILL "$nspawn_pid" 2>/dev/null
        wait "$nspawn_pid" 2>/dev/null
    fi
    [ -n "$sim_pid" ] && kill -TERM "$sim_pid" 2>/dev/null && wait "$sim_pid" 2>/dev/null
    [ -n "$work" ] && rm -rf "$work"
    if [ "$rc" = 0 ]; then echo "--- systemd-test (${SECONDS}s): ok"; fi
}
trap cleanup EXIT

# Polls `$@` every 0.5 s for up to $1 seconds until it succeeds.
until_ok() {
    local limit=$1 what=$2
    shift 2
    local deadline=$((SECONDS + limit))
    until "$@"; do
        [ "$SECONDS" -lt "$deadline" ] || fail "no $what within ${limit}s"
        sleep 0.5
    done
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# GET http://127.0.0.1:$1$2 from the host, the body.
http_get() {
    python3 - "$1" "$2" <<'EOF'
import sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}{sys.argv[2]}", timeout=5) as r:
    sys.stdout.write(r.read().decode())
EOF
}

# The sum of every mongoload_operations_total sample on the daemon at port $1.
operations() {
    http_get "$1" /metrics | awk '/^mongoload_operations_total[{ ]/ { s += $NF } END { printf "%d\n", s }'
}

for tool in mmdebstrap systemd-nspawn nsenter python3 dpkg-deb; do
    command -v "$tool" >/dev/null || fail "$tool missing (apt-get install mmdebstrap systemd-container util-linux python3)"
done
[ "$(id -u)" = 0 ] || fail "must run as root (systemd-nspawn)"

step "the root filesystem"
mkdir -p "$cache"
packages=systemd,systemd-sysv,dbus,adduser
rootfs="$cache/bookworm-rootfs.tar"
key="bookworm minbase $packages"
if [ -f "$rootfs" ] && [ "$(cat "$rootfs.key" 2>/dev/null)" = "$key" ]; then
    echo "cached: $rootfs"
else
    rm -rf "$rootfs" "$rootfs.key" "$cache/partial.tar"
    mmdebstrap --quiet --format=tar --variant=minbase --include="$packages" \
        bookworm "$cache/partial.tar" || fail "mmdebstrap (it needs the Debian archive)"
    mv "$cache/partial.tar" "$rootfs"
    echo "$key" >"$rootfs.key"
fi
$rootfs_only && exit 0
work=$(mktemp -d "$cache/run.XXXXXX")
root="$work/root"
mkdir "$root"
tar -C "$root" -xf "$rootfs"
cp "$deb" "$root/root/mongoload.deb"

step "the simulator on the host's loopback, with the packaged binary"
dpkg-deb -x "$deb" "$work/pkg"
bin="$work/pkg/usr/bin/mongoload"
sim_port=$(free_port)
"$bin" sim --listen "127.0.0.1:$sim_port" >"$work/sim.log" 2>&1 &
sim_pid=$!

step "boot the container"
systemd-nspawn --quiet --register=no --keep-unit --boot --console=read-only \
    --link-journal=no --machine=mongoload-ci --directory="$root" \
    >"$work/console.log" 2>&1 &
nspawn_pid=$!
find_pid1() {
    pid1=$(cat "/proc/$nspawn_pid/task/$nspawn_pid/children" 2>/dev/null | awk '{ print $1 }')
    [ -n "$pid1" ] && [ "$(cat "/proc/$pid1/comm" 2>/dev/null)" = systemd ]
}
until_ok 30 "container init" find_pid1
booted() {
    local state
    state=$(c systemctl is-system-running 2>/dev/null) || true
    case "$state" in running | degraded) return 0 ;; *) return 1 ;; esac
}
until_ok 90 "booted container" booted
c systemctl --version | head -1

step "apt install the package"
c apt-get install -y -q /root/mongoload.deb >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; fail "apt install"; }
c getent passwd mongoload >/dev/null || fail "no mongoload user"
[ "$(c systemctl is-enabled mongoload.service || true)" = disabled ] || fail "the install enabled mongoload.service"

step "out of the box: the shipped config, enable --now, ctl as root and as mongoload"
# Only the deployment (nothing listens on port 1: not fatal) and the metrics
# port (free) come from a drop-in; the file is the shipped one.
http_port=$(free_port)
c mkdir -p /etc/systemd/system/mongoload.service.d
printf '[Service]\nEnvironment=MONGOLOAD_TARGET__URI=mongodb://127.0.0.1:1 MONGOLOAD_HTTP__LISTEN=127.0.0.1:%s\n' "$http_port" \
    >"$root/etc/systemd/system/mongoload.service.d/ci.conf"
c systemctl daemon-reload
c systemctl enable --now mongoload || fail "enable --now with the shipped config"
[ "$(prop mongoload SubState)" = running ] || fail "not running"
has_status() { [ -n "$(prop mongoload StatusText)" ]; }
until_ok 10 "STATUS=" has_status
echo "Status: $(prop mongoload StatusText)"
c mongoload ctl status | grep -q '^mixed ' || fail "ctl status as root"
c runuser -u mongoload -- mongoload ctl status | grep -q '^mixed ' || fail "ctl status as mongoload"
[ "$(c stat -c '%a %U' /run/mongoload/control.sock)" = "600 mongoload" ] || fail "control socket mode"
c systemctl stop mongoload
rm "$root/etc/systemd/system/mongoload.service.d/ci.conf"
c systemctl daemon-reload

step "a test config against the simulator: active (running), STATUS=, /metrics grows"
http_port=$(free_port)
config() { # the test config; stages after the first two as $1
    cat <<EOF
[target]
uri = "mongodb://127.0.0.1:$sim_port"
database = "systemd_test"
connect_timeout = "2s"
server_selection_timeout = "2s"

[http]
listen = "127.0.0.1:$http_port"

[run]
shutdown_grace = "10s"
log = "/var/lib/mongoload/runs.jsonl"

[control]
socket = "/run/mongoload/control.sock"

[[workloads]]
name = "mixed"
kind = "mixed"
max_inflight = 16
seed = 1

[workloads.mixed]
doc_size = "1KB"
initial_docs = 200
collection = "systemd_test"

[[workloads.stages]]
name = "first"
rate = 50
duration = "8s"

[[workloads.stages]]
name = "second"
rate = 50
duration = "1h"
${1:-}
EOF
}
put_config() { # text on stdin → /etc/mongoload/$1 as the package installs it
    c install -m 0640 -o root -g mongoload /dev/stdin "/etc/mongoload/$1"
}
config | put_config mongoload.toml
c systemctl restart mongoload || fail "start with the test config"
[ "$(prop mongoload ActiveState)/$(prop mongoload SubState)" = active/running ] || fail "not active (running)"
main_pid=$(prop mongoload MainPID)
status_has() { prop mongoload StatusText | grep -qF "$1"; }
until_ok 20 "STATUS= with stage 0" status_has "mixed: stage 0 first"
first=$(operations "$http_port")
grows() { [ "$(operations "$http_port")" -gt "$((first + 20))" ]; }
until_ok 20 "more operations on /metrics" grows
echo "operations: $first, then $(operations "$http_port")"

step "STATUS= follows ctl"
c mongoload ctl pause mixed >/dev/null
until_ok 5 "STATUS= paused" status_has "mixed: paused"
c runuser -u mongoload -- mongoload ctl set-rate mixed 20 >/dev/null
c mongoload ctl resume mixed >/dev/null
until_ok 5 "STATUS= with the override" status_has "[control: rate 20/s (override)]"
c mongoload ctl reset mixed >/dev/null
echo "Status: $(prop mongoload StatusText)"

step "the first stage's report reaches the run log; stage 1 runs"
until_ok 30 "stage 1 in STATUS=" status_has "mixed: stage 1 second"
logged() { c grep -q '"stage":"first"' /var/lib/mongoload/runs.jsonl; }
until_ok 15 "the first stage in /var/lib/mongoload/runs.jsonl" logged

step "reload: a third stage added keeps MainPID and the stage position"
config "$(printf '[[workloads.stages]]\nname = "third"\nrate = 10\nduration = "1h"\n')" | put_config mongoload.toml
c systemctl reload mongoload || fail "reload"
[ "$(prop mongoload MainPID)" = "$main_pid" ] || fail "reload changed MainPID"
rescheduled() { c journalctl -u mongoload --no-pager -o cat | grep -q "reloaded /etc/mongoload/mongoload.toml: rescheduled mixed"; }
until_ok 5 "the reload in the journal" rescheduled
status_has "mixed: stage 1 second" || fail "the reload moved the position: $(prop mongoload StatusText)"
reloads_ok() { http_get "$http_port" /metrics | grep -q '^mongoload_config_reloads_total{result="ok"} 1$'; }
until_ok 5 "mongoload_config_reloads_total ok 1" reloads_ok

step "reload: a broken file is refused, the service stays up"
config | sed 's/^database = .*/&\nno_such_key = 1/' | put_config mongoload.toml
if c systemctl reload mongoload 2>/dev/null; then fail "a broken file was reloaded"; fi
[ "$(prop mongoload ActiveState)" = active ] || fail "not active after a refused reload"
[ "$(prop mongoload MainPID)" = "$main_pid" ] || fail "a refused reload changed MainPID"
config | put_config mongoload.toml

step "stop: exit 0 within the grace period"
before=$SECONDS
c systemctl stop mongoload || fail "stop"
took=$((SECONDS - before))
[ "$took" -le 15 ] || fail "stop took ${took}s (grace 10s)"
[ "$(prop mongoload Result)/$(prop mongoload ExecMainStatus)" = success/0 ] \
    || fail "stop: Result=$(prop mongoload Result) status=$(prop mongoload ExecMainStatus)"
echo "stopped in ${took}s"

step "a bad key at start: fails once with 78, never restarted"
config | sed 's/^database = .*/&\nno_such_key = 1/' | put_config mongoload.toml
if c systemctl start mongoload 2>/dev/null; then fail "started with a bad key"; fi
invocation=$(prop mongoload InvocationID)
sleep 7 # past RestartSec=5s: a restart would have come
[ "$(prop mongoload ActiveState)" = failed ] || fail "state $(prop mongoload ActiveState), want failed"
[ "$(prop mongoload ExecMainStatus)" = 78 ] || fail "exit status $(prop mongoload ExecMainStatus), want 78"
[ "$(prop mongoload NRestarts)" = 0 ] || fail "NRestarts $(prop mongoload NRestarts), want 0"
# The main process's entries, by invocation or by PID: a line that reaches
# journald after the process has exited may carry no unit fields.
main_pid=$(prop mongoload ExecMainPID)
said=$(c journalctl --no-pager -o cat "_SYSTEMD_INVOCATION_ID=$invocation" + "_PID=$main_pid" | grep -c "invalid config" || true)
[ "$said" = 1 ] || fail "the config error was logged $said times, want once"
c systemctl reset-failed mongoload

step "a run.log the sandbox cannot write: 78 naming the key; the ReadWritePaths= drop-in fixes it"
c install -d -o mongoload -g mongoload /srv/mongoload
config | sed 's|^log = .*|log = "/srv/mongoload/runs.jsonl"|' | put_config mongoload.toml
if c systemctl start mongoload 2>/dev/null; then fail "started with an unwritable run.log"; fi
[ "$(prop mongoload ExecMainStatus)/$(prop mongoload NRestarts)" = 78/0 ] || fail "unwritable run.log: not 78 without restarts"
c journalctl -u mongoload --no-pager -o cat | grep "run.log: /srv/mongoload/runs.jsonl" | grep -q "ReadWritePaths=/srv/mongoload" \
    || fail "the error does not name run.log and the drop-in"
c systemctl reset-failed mongoload
printf '[Service]\nReadWritePaths=/srv/mongoload\n' >"$root/etc/systemd/system/mongoload.service.d/srv.conf"
c systemctl daemon-reload
c systemctl start mongoload || fail "start with the ReadWritePaths= drop-in"
c systemctl stop mongoload
rm "$root/etc/systemd/system/mongoload.service.d/srv.conf"
c systemctl daemon-reload
config | put_config mongoload.toml

step "mongoload@a and mongoload@b side by side, each with its control socket"
# As docs/systemd.md says: a copy of the config per instance, its own port (and
# its own run log under /var/lib/mongoload/NAME).
ports=()
for name in a b; do
    port=$(free_port)
    ports+=("$port")
    c install -m 0640 -g mongoload /etc/mongoload/mongoload.toml "/etc/mongoload/$name.toml"
    c sed -i "s|^listen = .*|listen = \"127.0.0.1:$port\"|; s|^log = .*|log = \"/var/lib/mongoload/$name/runs.jsonl\"|" "/etc/mongoload/$name.toml"
done
c systemctl start mongoload mongoload@a mongoload@b || fail "start mongoload, mongoload@a and mongoload@b"
for name in a b; do
    [ "$(prop "mongoload@$name" SubState)" = running ] || fail "mongoload@$name not running"
    c mongoload ctl --socket "/run/mongoload/$name/control.sock" status | grep -q '^mixed ' || fail "ctl to mongoload@$name as root"
    c runuser -u mongoload -- mongoload ctl -s "/run/mongoload/$name/control.sock" status | grep -q '^mixed ' \
        || fail "ctl to mongoload@$name as mongoload"
done
c mongoload ctl status | grep -q '^mixed ' || fail "ctl to mongoload beside the instances"
for port in "${ports[@]}"; do http_get "$port" /healthz >/dev/null || fail "no /healthz on $port"; done
# Stopping one unit leaves the others' sockets in place.
c systemctl stop mongoload mongoload@b
c test ! -e /run/mongoload/b || fail "/run/mongoload/b left behind"
c mongoload ctl -s /run/mongoload/a/control.sock status | grep -q '^mixed ' || fail "mongoload@a's socket went with another unit"

step "the watchdog restarts a frozen daemon (SIGSTOP; WatchdogSec=30s)"
frozen=$(prop mongoload@a MainPID)
c sh -c "kill -STOP $frozen"
restarted() {
    [ "$(prop mongoload@a NRestarts)" = 1 ] && [ "$(prop mongoload@a SubState)" = running ] \
        && [ "$(prop mongoload@a MainPID)" != "$frozen" ]
}
until_ok 90 "a watchdog restart of mongoload@a" restarted
c journalctl -u mongoload@a --no-pager -o cat | grep -q "Watchdog timeout" || fail "no watchdog timeout in the journal"
until_ok 20 "mongoload@a's socket after the restart" \
    sh -c "nsenter --target $pid1 --all mongoload ctl -s /run/mongoload/a/control.sock status >/dev/null 2>&1"

step "systemd-analyze security: exposure at most 2.0"
for unit in mongoload.service mongoload@a.service; do
    line=$(c systemd-analyze security --no-pager "$unit" | tail -1)
    echo "$line"
    score=$(echo "$line" | sed -n 's/.*: \([0-9.]*\) .*/\1/p')
    [ -n "$score" ] && awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }' || fail "$unit: $line"
done

step "apt purge stops the instances and removes the configuration"
c apt-get purge -y -q mongoload >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; fail "purge"; }
[ "$(c systemctl is-active mongoload@a.service || true)" = inactive ] || fail "mongoload@a still runs after purge"
c test ! -e /etc/mongoload || fail "purge left /etc/mongoload"
