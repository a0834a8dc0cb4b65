#!/usr/bin/env bash
# Part of contrib/gpu/pack.sh: what contrib/gpu/host.sh needs on the GPU
# machine beside the rest of gpu-carry/: the host benchmark programs, and
# iproute2's `ip` (that machine has none) with the libraries it links
# beyond the C library, found through its rpath ($ORIGIN/../lib) so that no
# other program there loads them.
#   bash contrib/gpu/pack_host.sh <build dir> <carry dir>
set -euo pipefail

build=$1
out=$2

make -C "$build" -j"$(nproc)" bench/ucx_pxn_bench bench/ucx_pxn_op_cost \
    test/apps/ucx_pxn_peer >/dev/null
mkdir -p "$out/build/bench" "$out/build/test/apps" "$out/iproute/bin" \
         "$out/iproute/lib"
cp "$build"/bench/{ucx_pxn_bench,ucx_pxn_op_cost} "$out/build/bench/"
cp "$build/test/apps/ucx_pxn_peer" "$out/build/test/apps/"

ip=$(command -v ip || true)
[ -n "$ip" ] || { echo "pack_host.sh: no ip (iproute2) here to carry" >&2; exit 1; }
command -v patchelf >/dev/null ||
    { echo "pack_host.sh: patchelf is needed to carry ip" >&2; exit 1; }
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
