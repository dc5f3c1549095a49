#!/usr/bin/env bash
# Builds the container image from packaging/container/Containerfile with
# buildah, offline but for the package registries, and checks it. CI runs it
# from .ci/run as root; it needs buildah and mmdebstrap (Debian packages).
#
#   packaging/container/check.sh [--full | --binary PATH]
#
# Two ways to make the image's binary:
#   --full: the Containerfile's own `cargo build --locked` inside its build
#     stage (the in-image compile, about 7 minutes of CI's 2 cores). On
#     success it writes packaging/container/full-build.sha256: the hashes
#     of what that compile depends on beyond the sources (the Containerfile,
#     Cargo.lock, .dockerignore) and the toolchain's version. (A change to
#     the stand-in rust image below is checked by running --full.)
#   --binary PATH (CI passes the binary its tests built): while those
#     hashes still match the committed full-build.sha256, the one
#     instruction of the Containerfile that compiles is replaced by a COPY
#     of PATH, after a check that every file of this workspace that the
#     compile read (the binary's dep-info) is in the build context;
#     the rest of the Containerfile runs unchanged. Where they differ (the
#     Containerfile, the lock file, the context or the toolchain changed),
#     it says so and does the full build; commit the stamp that run writes.
# With no argument: --full.
#
# The Containerfile's base images (rust:1-bookworm, debian:bookworm-slim)
# live on a container registry this machine cannot reach, so the script
# first makes local stand-ins from Debian's packages with mmdebstrap and
# passes them as RUST_IMAGE / RUNTIME_IMAGE:
#   - localhost/debian:bookworm-slim: a minbase bookworm with passwd, as the
#     slim image is (with --binary, the build stage's base too: nothing
#     compiles there);
#   - localhost/rust:bookworm (--full only): bookworm with gcc, libc6-dev
#     and make (jemalloc), cargo and rustc on PATH in /usr/local/cargo/bin
#     from this machine's Rust toolchain (rustup's, mounted read-only into
#     the build), and this machine's CA bundle (its egress proxy re-signs
#     crates.io's TLS).
# The full build passes the Containerfile's CARGO_PROFILE argument
# `image-check` (Cargo.toml: unoptimized, no debug info) in place of
# `release`, since what is checked is that the Containerfile builds and its
# image runs, and the release build takes a quarter of an hour of CI's 2
# cores; set IMAGE_PROFILE=release to check the shipped build. The build
# runs in Docker format (which keeps a HEALTHCHECK; OCI drops it). The
# image is then inspected (user, entrypoint, command, port, no healthcheck)
# and run as its user: --version, check-config of its default config, and
# `mongoload demo` until its /metrics counts operations.
#
# Everything lives in a private storage root under /var/tmp, removed at the
# end: the machine's own container storage is not touched.
set -euo pipefail
cd "$(dirname "$0")/../.."

fail() { echo "packaging/container/check.sh: FAIL: $*" >&2; exit 1; }
step() { echo "--- container: $*"; }

binary=""
case "${1:-}" in
    "" | --full) ;;
    --binary) binary=${2:?"--binary needs the path of a built mongoload"} ;;
    *) echo "usage: $0 [--full | --binary PATH]" >&2; exit 2 ;;
esac

for tool in buildah mmdebstrap curl python3 rustc sha256sum; do
    command -v "$tool" >/dev/null \
        || fail "$tool missing (apt-get install buildah mmdebstrap curl python3; rustc: the toolchain the build mounts)"
done
[ "$(id -u)" = 0 ] || fail "run as root (buildah with a private storage root)"

# What the in-image compile depends on beyond the sources.
stamp=packaging/container/full-build.sha256
inputs() {
    sha256sum packaging/container/Containerfile Cargo.lock .dockerignore
    echo "toolchain  $(rustc --version)"
}
if [ -n "$binary" ]; then
    [ -x "$binary" ] || fail "no binary at $binary"
    # Cargo's dep-info: beside the binary (`cargo build` writes one that
    # names every file the build read), or else (a binary `cargo test`
    # built) rustc's own, in deps/: the binary's unit (the file it is a
    # hard link of) and the library units of this workspace's crates and
    # of the patched ones under vendor/ (the ones whose dep-info names an
    # .rlib; not the unit tests' units, which read fixtures the image never
    # needs).
    if [ -f "$binary.d" ]; then
        depinfos=("$binary.d")
    else
        deps="$(dirname "$binary")/deps"
        unit=$(find "$deps" -maxdepth 1 -samefile "$binary" 2>/dev/null | head -1)
        [ -n "$unit" ] && [ -f "$unit.d" ] || fail "no dep-info of $binary (beside it, or in deps/): build it with cargo"
        mapfile -t depinfos < <(echo "$unit.d"; grep -l -E '^[^ ]*/lib(mongoload|mongoload_sim|mongoload_loglimit|mongodb)-[0-9a-f]+\.rlib:' "$deps"/*.d)
    fi
    if ! inputs | cmp -s - "$stamp"; then
        echo "the in-image compile's inputs differ from $stamp; the full build instead:"
        inputs | diff "$stamp" - || true
        binary=""
    fi
fi

work=$(mktemp -d /var/tmp/mongoload-image.XXXXXX)
# buildah keeps RUN --mount=type=cache directories under $TMPDIR: inside
# $work, they go with it.
mkdir -p "$work/tmp"
export TMPDIR="$work/tmp"
store=(--root "$work/storage" --runroot "$work/run" --storage-driver "${STORAGE_DRIVER:-overlay}")
b() { buildah "${store[@]}" "$@"; }
cleanup() {
    # The demo stops by itself (timeout inside the container).
    [ -n "${demo_pid:-}" ] && wait "$demo_pid" 2>/dev/null
    b rm --all >/dev/null 2>&1 || true
    b rmi --all --force >/dev/null 2>&1 || true
    # buildah leaves its overlay directory bind-mounted on itself.
    mount | awk -v w="$work/" 'index($3, w) == 1 { print $3 }' | sort -r | xargs -r umount
    rm -rf "$work"
}
trap cleanup EXIT

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
start=$(date +%s)

step "base images from Debian packages (mmdebstrap)"
mmdebstrap --quiet --variant=minbase --include=passwd \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    bookworm "$work/slim.tar"
ctr=$(b from scratch)
b add "$ctr" "$work/slim.tar" / >/dev/null
b config --cmd '["bash"]' "$ctr"
b commit --quiet --rm "$ctr" localhost/debian:bookworm-slim >/dev/null
rm "$work/slim.tar"

containerfile=packaging/container/Containerfile
profile=${IMAGE_PROFILE:-image-check}
toolchain=()
if [ -n "$binary" ]; then
    step "the Containerfile with the binary $binary in place of its compile"
    # The workspace's files the compile read, relative to the repository
    # (each dep-info's first line: a unit, then every file it read; rustc
    # writes this workspace's as relative paths, cargo as absolute ones),
    # those that still exist (a target directory may hold older units).
    root=$(pwd)/
    for d in "${depinfos[@]}"; do sed -n '1s/^[^:]*: //p' "$d"; done | tr ' ' '\n' \
        | awk -v r="$root" 'index($0, r) == 1 { print substr($0, length(r) + 1); next } /^[^\/]/' \
        | sort -u | while read -r f; do [ -f "$f" ] && echo "$f"; done >"$work/sources"
    grep -qx 'src/main.rs' "$work/sources" && grep -qx 'src/lib.rs' "$work/sources" \
        || fail "the dep-info (${depinfos[*]}) names neither src/main.rs nor src/lib.rs"
    ctr=$(b from scratch)
    b copy "$ctr" "$binary" /prebuilt/mongoload >/dev/null
    b copy "$ctr" "$work/sources" /prebuilt/sources >/dev/null
    b commit --quiet --rm "$ctr" localhost/mongoload-binary:check >/dev/null
    # The instruction that compiles: from its `RUN --mount=…registry` line
    # to the first line that does not continue.
    awk '
        /^RUN --mount=type=cache,target=\/usr\/local\/cargo\/registry/ { skip = 1; n++ }
        skip { if ($0 !~ /\\$/) { skip = 0
            print "COPY --from=localhost/mongoload-binary:check /prebuilt/ /prebuilt/"
            print "RUN while read -r f; do [ -e \"$f\" ] || { echo \"not in the build context: $f\" >&2; exit 1; }; done </prebuilt/sources \\"
            print "    && install -D -m 0755 /prebuilt/mongoload /out/usr/bin/mongoload && rm -r /prebuilt"
          }; next }
        { print }
        END { if (n != 1) exit 1 }
    ' packaging/container/Containerfile >"$work/Containerfile" \
        || fail "the Containerfile has no single compiling RUN instruction to replace"
    containerfile=$work/Containerfile
    rust_image=localhost/debian:bookworm-slim
    echo "$(wc -l <"$work/sources") source files, all to be found in the build context"
else
    mmdebstrap --quiet --variant=minbase --include=gcc,libc6-dev,make,ca-certificates \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
        bookworm "$work/rust.tar"
    sysroot=$(rustc --print sysroot)
    ctr=$(b from scratch)
    b add "$ctr" "$work/rust.tar" / >/dev/null
    rm "$work/rust.tar"
    b copy "$ctr" /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt >/dev/null
    # The toolchain is not copied in (600 MB twice over): the build mounts this
    # machine's, read-only, at /usr/local/rust.
    b run --isolation chroot "$ctr" -- sh -c \
        'mkdir -p /usr/local/cargo/bin && for t in cargo rustc rustdoc; do ln -s /usr/local/rust/bin/$t /usr/local/cargo/bin/$t; done'
    b config --env CARGO_HOME=/usr/local/cargo \
        --env PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr"
    b commit --quiet --rm "$ctr" localhost/rust:bookworm >/dev/null
    toolchain=(--volume "$sysroot:/usr/local/rust:ro")
    ctr=$(b from localhost/rust:bookworm)
    b run --isolation chroot "${toolchain[@]}" "$ctr" -- cargo --version
    b rm "$ctr" >/dev/null
    rust_image=localhost/rust:bookworm
fi

step "build the Containerfile (${binary:-cargo build --profile $profile --locked inside})"
b build --quiet --isolation chroot --layers=false --format docker "${toolchain[@]}" \
    --build-arg CARGO_PROFILE="$profile" \
    --build-arg RUST_IMAGE="$rust_image" \
    --build-arg RUNTIME_IMAGE=localhost/debian:bookworm-slim \
    -f "$containerfile" -t "localhost/mongoload:$version" . \
    >"$work/build.log" 2>&1 || { tail -60 "$work/build.log"; fail "buildah build"; }
grep -E '^ *Finished ' "$work/build.log" || true
echo "built localhost/mongoload:$version in $(( $(date +%s) - start )) s (base images included)"

step "image config"
inspect() { b inspect --type image --format "$1" "localhost/mongoload:$version"; }
# Go template values (buildah 1.28 has no `json` function): [a b] for lists.
expect_config() { # what template want
    local got; got=$(inspect "$2")
    [ "$got" = "$3" ] || fail "$1 is '$got', want '$3'"
}
expect_config user '{{.OCIv1.Config.User}}' 10001:10001
expect_config entrypoint '{{.OCIv1.Config.Entrypoint}}' '[mongoload]'
expect_config cmd '{{.OCIv1.Config.Cmd}}' '[run]'
expect_config healthcheck '{{.Docker.Config.Healthcheck}}' '<nil>'
inspect '{{.OCIv1.Config.ExposedPorts}}' | grep -q '9480' || fail "port 9480 not exposed"
echo "user 10001:10001, entrypoint [mongoload], cmd [run], port 9480, no healthcheck"
echo "size: $(b images --format '{{.Size}}' "localhost/mongoload:$version")"

step "run the image as its user"
ctr=$(b from "localhost/mongoload:$version")
run() { b run --isolation chroot --user 10001:10001 "$ctr" -- "$@"; }
run mongoload --version
[ "$(run id -u)" = 10001 ] || fail "not running as uid 10001"
out=$(run mongoload check-config) || { echo "$out"; fail "check-config of the image's default config"; }
echo "$out" | head -3
run sh -c 'grep -q "^listen = \"0.0.0.0:9480\"" /etc/mongoload/mongoload.toml' || fail "the default config does not listen on 0.0.0.0:9480"
for f in etc/examples/*.toml; do
    run test -f "/usr/share/doc/mongoload/examples/$(basename "$f")" || fail "$f is not in the image"
done
# chroot isolation shares the host's network: the demo's /metrics is
# reachable from here, on a free loopback port.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# buildah does not pass a signal on to what it runs: the demo ends itself
# (SIGTERM from timeout after 30 s), and the script waits for it.
buildah "${store[@]}" run --isolation chroot --user 10001:10001 "$ctr" -- \
    timeout 30 mongoload demo --http-listen "127.0.0.1:$port" >"$work/demo.log" 2>&1 &
demo_pid=$!
# /metrics is some 300 KB: it goes to a file first, since a `curl | grep -q`
# under pipefail fails when grep stops reading (curl exits 23).
ops=
for _ in $(seq 1 30); do
    if curl -fsS -o "$work/metrics.txt" "http://127.0.0.1:$port/metrics" 2>/dev/null; then
        ops=$(grep '^mongoload_operations_total{' "$work/metrics.txt" | head -3 || true)
        [ -n "$ops" ] && break
    fi
    kill -0 "$demo_pid" 2>/dev/null || { cat "$work/demo.log"; fail "mongoload demo exited in the image"; }
    sleep 1
done
[ -n "$ops" ] || { cat "$work/demo.log"; fail "no operations on the demo's /metrics"; }
echo "$ops"
wait "$demo_pid" || true
demo_pid=
# SIGTERM drains and ends with the final summary line.
grep "final: [0-9]* operations ok" "$work/demo.log" | tail -1 \
    || { tail -20 "$work/demo.log"; fail "the demo did not drain and summarise on SIGTERM"; }

if [ -z "$binary" ] && [ "$profile" = image-check ]; then
    inputs >"$stamp"
    echo "wrote $stamp: commit it, and --binary checks skip the in-image compile until these change"
fi
step "ok ($(( $(date +%s) - start )) s)"
