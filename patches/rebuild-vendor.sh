#!/usr/bin/env bash
# vendor/mongodb is the published mongodb crate plus the patches in
# patches/mongodb/ (applied in name order), byte for byte: this script
# makes it so, or with --check says whether it is (exit 1 and the diff when
# not; .ci/run runs it). A path dependency has no checksum in Cargo.lock,
# so nothing else checks what vendor/ holds.
#
#   bash patches/rebuild-vendor.sh           # rebuild vendor/mongodb
#   bash patches/rebuild-vendor.sh --check   # compare, change nothing
#
# The crate comes from cargo's registry cache, else cargo downloads it;
# either way its SHA-256 must be the one crates.io publishes.
set -euo pipefail
cd "$(dirname "$0")/.."

crate=mongodb version=3.9.1
sha256=af84443ae9878f59a6818686f339064479f42cdf293c4c637d8fc9c0a8c5eed6
vendor=vendor/$crate patches=patches/$crate

mode=rebuild
case "${1:-}" in
    "") ;;
    --check) mode=check ;;
    *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The .crate file: cargo's cache, else a throwaway package that depends on
# exactly this version, fetched with the checkout's lockfile so that only
# the crate itself is new.
cargo_home=${CARGO_HOME:-$HOME/.cargo}
file=$(ls "$cargo_home"/registry/cache/*/"$crate-$version.crate" 2>/dev/null | head -n 1 || true)
if [ -z "$file" ]; then
    mkdir -p "$tmp/fetch/src"
    printf '[package]\nname = "fetch"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\n%s = "=%s"\n' \
        "$crate" "$version" >"$tmp/fetch/Cargo.toml"
    : >"$tmp/fetch/src/lib.rs"
    cp Cargo.lock "$tmp/fetch/"
    (cd "$tmp/fetch" && cargo fetch --quiet)
    file=$(ls "$cargo_home"/registry/cache/*/"$crate-$version.crate" | head -n 1)
fi
echo "$sha256  $file" | sha256sum --check --quiet

# The crate, then the patches, in a directory outside any git repository
# (git apply would otherwise take paths from the repository's root).
tar -xzf "$file" -C "$tmp"
src=$tmp/$crate-$version
for p in "$patches"/*.patch; do
    (cd "$src" && GIT_CEILING_DIRECTORIES="$tmp" git apply --whitespace=nowarn "$OLDPWD/$p")
done

if [ "$mode" = check ]; then
    if diff -r "$src" "$vendor" >"$tmp/diff"; then
        echo "$vendor is $crate $version + $(ls "$patches"/*.patch | wc -l) patches of $patches/"
    else
        echo "$vendor differs from $crate $version + the patches of $patches/" \
            "(bash patches/rebuild-vendor.sh rebuilds it):" >&2
        cat "$tmp/diff" >&2
        exit 1
    fi
else
    rm -rf "$vendor"
    mv "$src" "$vendor"
    echo "rebuilt $vendor: $crate $version + $(ls "$patches"/*.patch | wc -l) patches of $patches/"
fi
