#!/usr/bin/env bash
# Part of contrib/gpu/pack.sh: what contrib/gpu/host.sh needs on the GPU
# machine beside the rest of gpu-carry/: the host benchmark programs, and
# iproute2's `ip` (that machine has none) with the libraries it links
# beyond the C library, found through its rpath ($ORIGIN/../lib) so that no
# other program there loads them.
#   bash contrib/gpu/pack_host.sh <build dir> <carry dir>
#   bash contrib/gpu/pack_host.sh --tools     only what it needs here (pack.sh
#                                             runs it before building)
# Needs `ip` (iproute2: contrib/deps.sh installs it) and patchelf, which it
# installs from Debian's archive when run as root (else it names the package).
set -euo pipefail

die() { echo "pack_host.sh: $*" >&2; exit 1; }

tools() {
    command -v ip >/dev/null ||
        die "no ip (iproute2) here to carry: bash contrib/deps.sh installs it (as root)"
    command -v patchelf >/dev/null && return 0
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        die "patchelf is needed to carry ip: install Debian's package patchelf (as root: apt-get install patchelf), or run this as root"
    fi
    echo "pack_host.sh: installing patchelf (to carry ip)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends patchelf >/dev/null
    command -v patchelf >/dev/null || die "patchelf still missing after apt-get install patchelf"
}

if [ "${1:-}" = --tools ]; then
    tools
    exit 0
fi
[ $# = 2 ] || { echo "usage: pack_host.sh <build dir> <carry dir> | --tools" >&2; exit 2; }
build=$1
out=$2
tools

make -C "$build" -j"$(nproc)" bench/ucx_pxn_bench bench/ucx_pxn_op_cost \
    test/apps/ucx_pxn_peer >/dev/null
mkdir -p "$out/build/bench" "$out/build/test/apps" "$out/iproute/bin" \
         "$out/iproute/lib"
cp "$build"/bench/{ucx_pxn_bench,ucx_pxn_op_cost} "$out/build/bench/"
cp "$build/test/apps/ucx_pxn_peer" "$out/build/test/apps/"

ip=$(command -v ip)
cp -L "$ip" "$out/iproute/bin/ip"
ldd "$ip" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
    case $name in
    libc.so.*|ld-linux*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*) ;;
    *) cp -L "$path" "$out/iproute/lib/$name" ;;
    esac
done
# DT_RPATH (not RUNPATH): it also serves the libraries' own dependencies.
patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$out/iproute/bin/ip"
for lib in "$out"/iproute/lib/*; do
    patchelf --force-rpath --set-rpath '$ORIGIN' "$lib"
done
