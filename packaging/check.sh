#!/usr/bin/env bash
# Packaging checks, run by CI (.ci/run) on Debian bookworm as root:
#   1. the man pages are generated from the CLI and the .deb is built
#      (cargo-deb from crates.io: `cargo install cargo-deb --locked`) into
#      target/debian/, where packaging/systemd-test.sh takes it next; the
#      binary from the `release` profile, or PACKAGE_PROFILE's (CI: dev,
#      with PACKAGE_PREBUILT=1: the binary the tests built, not rebuilt);
#   2. the .deb is listed (dpkg-deb -c), its control data checked (conffile,
#      dependencies, maintainer scripts that never enable or start a unit);
#   3. it is unpacked into a scratch root (dpkg -x) and every file checked
#      at its path with its mode; the packaged binary validates the
#      packaged config;
#   4. `systemd-analyze verify` passes on both units (against the packaged
#      binary: verify insists ExecStart= exists) with no warning at all;
#   5. with --install (CI passes it; it changes the machine): dpkg -i, the
#      system user and config permissions, check-config as that user,
#      verify of the installed units, remove keeps /etc/mongoload, purge
#      removes /etc/mongoload and /var/lib/mongoload.
# Needs: cargo, cargo-deb, dpkg, systemd (systemd-analyze), adduser.
set -euo pipefail
cd "$(dirname "$0")/.."

install=false
for arg in "$@"; do
    case "$arg" in
        --install) install=true ;;
        *) echo "usage: $0 [--install]" >&2; exit 2 ;;
    esac
done

fail() { echo "packaging/check.sh: FAIL: $*" >&2; exit 1; }
step() { echo "--- packaging: $*"; }

command -v cargo-deb >/dev/null || fail "cargo-deb missing: cargo install cargo-deb --locked"
command -v systemd-analyze >/dev/null || fail "systemd-analyze missing: apt-get install systemd"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
target_dir=${CARGO_TARGET_DIR:-target}

# The binary's Cargo profile: `release` (LTO, one codegen unit) is what
# ships. CI passes PACKAGE_PROFILE=dev and PACKAGE_PREBUILT=1: the binary
# its tests already built, as it is (cargo-deb strips it), since what is
# checked here is the package (files, modes, control data, units,
# maintainer scripts), not the compiler's optimization, and a release
# build takes 14 minutes of CI's 2 cores. (A `cargo build` here would
# build the library once more: the tests' build has the features their
# dev-dependencies turn on in shared dependencies.)
profile=${PACKAGE_PROFILE:-release}
case "$profile" in dev) profile_dir=debug ;; *) profile_dir=$profile ;; esac
bin="$target_dir/$profile_dir/mongoload"
if [ "${PACKAGE_PREBUILT:-}" = 1 ]; then
    [ -x "$bin" ] || fail "PACKAGE_PREBUILT=1 but no binary at $bin"
else
    # cargo-deb's own build passes flags of its own that rebuild the
    # binary: build it here as `cargo build` does, and package that one.
    cargo build --locked --profile "$profile" --bin mongoload
fi

step "man pages from the CLI definition"
rm -rf target/man
"$bin" man --dir target/man >/dev/null
gzip -9nf target/man/*.1 target/man/*.5
ls target/man

step "cargo deb ($profile profile, $bin)"
rm -f "$target_dir"/debian/*.deb
cargo deb --locked --profile "$profile" --no-build --output "$target_dir/debian/" \
    >"$scratch/deb.log" 2>&1 || { cat "$scratch/deb.log"; fail "cargo deb"; }
deb=$(ls "$target_dir"/debian/*.deb)
[ "$(echo "$deb" | wc -l)" = 1 ] || fail "expected one .deb, got: $deb"
echo "$deb"

step "dpkg-deb -c"
dpkg-deb -c "$deb" | tee "$scratch/contents"
# Owners are root/root; nothing world-writable, setuid or setgid.
awk '{ print $1, $2, $6 }' "$scratch/contents" | while read -r perms owner path; do
    case "$owner" in root/root|0/0) ;; *) fail "$path owned by $owner" ;; esac
    case "$perms" in
        d*) ;;
        l*) ;;
        -*) [ "${perms:8:1}" = "-" ] || fail "$path is world-writable ($perms)"
            case "$perms" in *s*|*S*) fail "$path is setuid/setgid ($perms)" ;; esac ;;
        *) fail "$path: unexpected entry type ($perms)" ;;
    esac
done

step "control data"
dpkg-deb -I "$deb"
dpkg-deb -e "$deb" "$scratch/control"
grep -qx "/etc/mongoload/mongoload.toml" "$scratch/control/conffiles" \
    || fail "the config is not a conffile"
dpkg-deb -f "$deb" Depends | grep -qw adduser || fail "Depends lacks adduser"
for script in postinst postrm prerm; do
    f="$scratch/control/$script"
    [ -f "$f" ] || fail "no $script"
    [ -x "$f" ] || fail "$script not executable"
    sh -n "$f" || fail "$script: syntax error"
done
grep -q "adduser --system" "$scratch/control/postinst" || fail "postinst creates no system user"
# Nothing enabled or started on install: only dh's "re-enable if it was
# enabled" and "try-restart if running" snippets may appear.
if grep -vE '^[[:space:]]*#' "$scratch/control/postinst" \
    | grep -nE "deb-systemd-invoke (start|restart)|systemctl (enable|start)"; then
    fail "postinst enables or starts a unit"
fi
grep -q "try-restart" "$scratch/control/postinst" || fail "upgrade does not try-restart running units"
awk '/"\$1" = "purge"/ { purge = 1 } /rm -rf \/etc\/mongoload|rm -rf \/var\/lib\/mongoload/ && !purge { bad = 1 }
     END { exit bad }' "$scratch/control/postrm" || fail "postrm deletes data outside purge"

step "dpkg -x: every file at its path with its mode"
root="$scratch/root"
dpkg -x "$deb" "$root"
expect() { # mode path
    [ -e "$root$2" ] || fail "missing $2"
    [ -f "$root$2" ] || fail "$2 is not a regular file"
    local mode; mode=$(stat -c %a "$root$2")
    [ "$mode" = "$1" ] || fail "$2 has mode $mode, want $1"
}
expect 755 /usr/bin/mongoload
expect 640 /etc/mongoload/mongoload.toml
expect 644 /usr/lib/systemd/system/mongoload.service
expect 644 /usr/lib/systemd/system/mongoload@.service
for page in mongoload mongoload-run mongoload-check-config mongoload-check-target mongoload-sim mongoload-demo; do
    expect 644 "/usr/share/man/man1/$page.1.gz"
    zcat "$root/usr/share/man/man1/$page.1.gz" | grep -q '^\.TH ' || fail "$page.1.gz is not a man page"
done
expect 644 /usr/share/man/man5/mongoload.toml.5.gz
zcat "$root/usr/share/man/man5/mongoload.toml.5.gz" | grep -q '^\.TH mongoload.toml 5' || fail "mongoload.toml.5.gz is not a man page"
expect 644 /usr/share/doc/mongoload/README.md
expect 644 /usr/share/doc/mongoload/BENCHMARKS.md
# The manual: every page of docs/, where README.md's links lead.
for page in docs/*.md; do
    expect 644 "/usr/share/doc/mongoload/$page"
done
expect 644 /usr/share/doc/mongoload/copyright
expect 644 /usr/share/doc/mongoload/examples/demo.toml
expect 644 /usr/share/doc/mongoload/examples/credentials.conf
expect 644 /usr/share/mongoload/dashboards/mongoload-overview.json
expect 644 /usr/share/mongoload/dashboards/mongoload-db-hosts.json
expect 644 /usr/share/mongoload/grafana/provisioning/dashboards/mongoload.yml
expect 644 /usr/share/mongoload/grafana/provisioning/datasources/prometheus.yml
expect 644 /usr/share/mongoload/prometheus/mongoload-rules.yml
expect 644 /usr/share/mongoload/prometheus/prometheus.yml
# Everything in the repository's asset directories made it in.
for f in dashboards/*.json etc/prometheus/*.yml etc/prometheus/tests/*.yml etc/examples/*.toml; do
    name=$(basename "$f")
    find "$root/usr/share" -name "$name" | grep -q . || fail "$f is not packaged"
done
# The units are the repository's, unchanged.
cmp packaging/systemd/mongoload.service "$root/usr/lib/systemd/system/mongoload.service"
cmp packaging/systemd/mongoload@.service "$root/usr/lib/systemd/system/mongoload@.service"
"$root/usr/bin/mongoload" --version
# The grafana provisioning points where the dashboards are.
grep -q "path: /usr/share/mongoload/dashboards" \
    "$root/usr/share/mongoload/grafana/provisioning/dashboards/mongoload.yml" \
    || fail "grafana provisioning does not point at /usr/share/mongoload/dashboards"

step "the packaged config passes check-config (packaged binary)"
env -u MONGOLOAD_CONFIG "$root/usr/bin/mongoload" check-config --config "$root/etc/mongoload/mongoload.toml" >"$scratch/check.out" \
    || { cat "$scratch/check.out"; fail "check-config on the packaged config"; }
head -3 "$scratch/check.out"
grep -q "mongodb://localhost:27017" "$scratch/check.out" || fail "default config does not target localhost:27017"

step "systemd-analyze verify (units rewritten to run the packaged binary)"
verify() { # unit file(s); any output is a failure: verify only warns on unknown keys
    local out
    out=$(systemd-analyze verify --man=no "$@" 2>&1) || { echo "$out"; fail "verify $*"; }
    [ -z "$out" ] || { echo "$out"; fail "verify printed warnings for $*"; }
}
units="$scratch/units"
mkdir -p "$units"
for unit in mongoload.service mongoload@.service; do
    sed "s#/usr/bin/mongoload#$root/usr/bin/mongoload#g" \
        "$root/usr/lib/systemd/system/$unit" >"$units/$unit"
done
cp "$units/mongoload@.service" "$units/mongoload@ci.service"
verify "$units/mongoload.service"
verify "$units/mongoload@.service"
verify "$units/mongoload@ci.service"
# Sanity: verify does catch a broken unit, so the check above means something.
sed 's#^ExecStart=.*#ExecStart=/nonexistent/mongoload run#' "$units/mongoload.service" >"$units/broken.service"
if systemd-analyze verify --man=no "$units/broken.service" >/dev/null 2>&1; then
    fail "systemd-analyze verify accepted a unit whose binary does not exist"
fi
echo "units ok"

if $install; then
    step "dpkg -i / -r / -P on this machine"
    dpkg -i "$deb"
    getent passwd mongoload >/dev/null || fail "no mongoload user after install"
    [ "$(stat -c '%a %U %G' /etc/mongoload/mongoload.toml)" = "640 root mongoload" ] \
        || fail "config is $(stat -c '%a %U %G' /etc/mongoload/mongoload.toml), want 640 root mongoload"
    # As the unit runs it: systemd creates /run/mongoload (RuntimeDirectory=,
    # owned by the service user) before ExecStartPre= checks the config;
    # without it check-config refuses the control socket, as run would.
    runuser -u mongoload -- /usr/bin/mongoload check-config >/dev/null 2>&1 \
        && fail "check-config accepted a control socket the mongoload user cannot create"
    install -d -o mongoload -g mongoload -m 0755 /run/mongoload
    runuser -u mongoload -- /usr/bin/mongoload check-config >/dev/null \
        || fail "the mongoload user cannot validate the installed config"
    rm -rf /run/mongoload
    verify /usr/lib/systemd/system/mongoload.service
    verify /usr/lib/systemd/system/mongoload@.service
    # Nothing enabled by the install.
    [ ! -e /etc/systemd/system/multi-user.target.wants/mongoload.service ] || fail "mongoload.service was enabled"
    mkdir -p /var/lib/mongoload && touch /var/lib/mongoload/run.log
    dpkg -r mongoload
    [ -f /etc/mongoload/mongoload.toml ] || fail "remove deleted the config"
    [ -f /var/lib/mongoload/run.log ] || fail "remove deleted the run logs"
    dpkg -P mongoload
    [ ! -e /etc/mongoload ] || fail "purge left /etc/mongoload"
    [ ! -e /var/lib/mongoload ] || fail "purge left /var/lib/mongoload"
    echo "install, remove and purge ok"
fi

step "ok"
