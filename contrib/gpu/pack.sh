#!/usr/bin/env bash
# Packs what the GPU machine needs into gpu-carry/ (git-ignored): the UCX
# install's libraries, modules and tools, the pxn module, the test and
# benchmark binaries, and the few system libraries that machine may lack.
# Everything is built here (x86-64), from this tree (a fresh clone builds
# its dependencies first: contrib/build.sh); docs/gpu.md says how it is run
# there.
#
#   bash contrib/gpu/pack.sh                      gpu-carry/ from build/
#   bash contrib/gpu/pack.sh versions BUILD...    gpu-carry-versions/<UCX version>/
#       for `run.sh versions`: from pxn build trees configured against other
#       UCX installs (docs/versions.md), each UCX's libraries, modules and
#       tools with the pxn module built against it, how that UCX loads it,
#       and uct_gtest with its programs (<version>/build/) for the GPU tests,
#       and ucx_pxn_kv_bench (<version>/build/bench/) for `run.sh kv`.
#   bash contrib/gpu/pack.sh kv BUILD...          gpu-carry-kv/
#       `run.sh kv` alone, self-contained (about 12 MiB with two UCX): a
#       repository root of its own holding contrib/gpu/run.sh,
#       gpu-carry/extra (libnuma, libcudart) and gpu-carry-versions/<UCX
#       version>/ per build tree as above without the tests (UCX's
#       libraries, modules, ucx_info and ucx_pxn_relay, the module,
#       ucx_pxn_kv_bench). Carried into any checkout and run there as
#       `bash gpu-carry-kv/contrib/gpu/run.sh kv` (docs/gpu.md).
#
# gpu-carry/ mirrors a build tree, so that the programs find each other
# through PXN_BUILD_DIR=gpu-carry/build:
#   gpu-carry/ucx/{bin,lib,lib/ucx}   UCX with the pxn module and tools
#   gpu-carry/build/.libs             libuct_pxn.so.0.0.0, libpxn_transport.so.0.0.0 (run.sh installs them)
#   gpu-carry/build/bench             ucx_pxn_bench, ucx_pxn_stage_bench,
#                                     ucx_pxn_ucp_bench, ucx_pxn_kv_bench,
#                                     ucx_pxn_contention_bench
#   gpu-carry/build/test/apps         ucx_pxn_peer and the tests' helpers
#   gpu-carry/build/test/gtest        uct_gtest
#   gpu-carry/extra                   libnuma, libcudart
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# the programs uct_gtest starts
test_apps="ucx_pxn_peer ucx_pxn_soak pxn_hostile_sender multi_iface ucp_idle
           stock_ucx_probe ucp_rma_check"

# pack_ucx <pxn build tree> <out> <tests|kv>: <out>/<UCX version>/ from
# the tree's UCX install (docs/versions.md): its libraries, modules and
# tools with the module built against it, how it loads the module
# (module-load), and a build-tree mirror (build/): the module and
# ucx_pxn_kv_bench, with `tests` uct_gtest and the programs it starts too
pack_ucx() {
    local b=$1 out=$2 what=$3 ucx load v d p app
    ucx=$(sed -n 's/^UCX_PREFIX = //p' "$b/Makefile")
    load=$(sed -n 's/^PXN_MODULE_LOAD = //p' "$b/Makefile")
    make -C "$b" -j"$(nproc)" all >/dev/null
    make -C "$b" install >/dev/null
    v=$("$ucx/bin/ucx_info" -v | sed -n -e 's/^# Library version: //p' -e 's/^# Version //p')
    d=$out/$v
    mkdir -p "$d/lib/ucx" "$d/bin" "$d/build/.libs" "$d/build/bench"
    cp -L "$ucx"/lib/lib*.so.0 "$d/lib/"
    cp -L "$ucx"/lib/ucx/*.so.0 "$d/lib/ucx/"
    for p in ucx_info ucx_perftest; do # ucx_copy.sh wraps them
        [ "$what" = kv ] && [ $p = ucx_perftest ] && continue
        if [ -f "$ucx/bin/$p.real" ]; then cp "$ucx/bin/$p.real" "$d/bin/$p"
        else cp "$ucx/bin/$p" "$d/bin/$p"; fi
    done
    cp "$ucx/bin/ucx_pxn_relay" "$d/bin/"
    [ "$what" = kv ] || cp "$ucx/bin/ucx_pxn_info" "$d/bin/"
    echo "$load" > "$d/module-load"
    cp -L "$b"/.libs/{libuct_pxn,libpxn_transport}.so.0.0.0 "$d/build/.libs/"
    # run.sh kv: the KV-cache bench against this UCX
    cp "$b/bench/ucx_pxn_kv_bench" "$d/build/bench/"
    if [ "$what" = tests ]; then
        # the GPU test subset against this UCX (run.sh versions)
        make -C "$b" -j"$(nproc)" check TESTS= >/dev/null
        mkdir -p "$d/build/test/apps" "$d/build/test/gtest"
        cp "$b/test/gtest/uct_gtest" "$d/build/test/gtest/"
        for app in $test_apps; do cp "$b/test/apps/$app" "$d/build/test/apps/"; done
    fi
    find "$d" -type f -exec strip --strip-debug {} + 2>/dev/null || true
    echo "UCX $v (pxn loaded: $load): $(du -sh "$d" | cut -f1)"
}

# the system libraries the GPU machine lacks: libnuma (UCX), libcudart
# (UCX's CUDA modules, when built with CUDA 13)
pack_extra() {
    local lib
    mkdir -p "$1"
    for lib in libnuma.so.1; do
        cp -L "$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')" "$1/"
    done
    cp -L /usr/local/cuda/lib64/libcudart.so.13 "$1/" 2>/dev/null || true
}

if [ "${1:-}" = versions ] || [ "${1:-}" = kv ]; then
    mode=$1
    shift
    [ $# -gt 0 ] || { echo "pack.sh $mode: name pxn build trees" >&2; exit 2; }
    if [ "$mode" = versions ]; then
        out=$top/gpu-carry-versions
        rm -rf "$out"
        for b in "$@"; do pack_ucx "$b" "$out" tests; done
        exit 0
    fi
    kv=$top/gpu-carry-kv
    rm -rf "$kv"
    mkdir -p "$kv/contrib/gpu"
    cp "$top/contrib/gpu/run.sh" "$kv/contrib/gpu/"
    pack_extra "$kv/gpu-carry/extra"
    for b in "$@"; do pack_ucx "$b" "$kv/gpu-carry-versions" kv; done
    du -sh "$kv"
    exit 0
fi

build=${PXN_BUILD_DIR:-$top/build}
jobs=${PXN_JOBS:-$(nproc)}
out=$top/gpu-carry

# what pack_host.sh needs here (patchelf, installed as root), before the build
bash "$top/contrib/gpu/pack_host.sh" --tools
PXN_BUILD_DIR=$build bash "$top/contrib/build.sh"
ucx=$(sed -n 's/^UCX_PREFIX = //p' "$build/Makefile")
# The check programs (uct_gtest and the helpers it starts), none run here.
make -C "$build" -j"$jobs" check TESTS= >/dev/null
[ -x "$build/bench/ucx_pxn_stage_bench" ] ||
    { echo "pack.sh: no bench/ucx_pxn_stage_bench: configure found no CUDA" >&2; exit 1; }

rm -rf "$out"
mkdir -p "$out/ucx/lib/ucx" "$out/ucx/bin" "$out/build/.libs" \
         "$out/build/bench" "$out/build/test/apps" "$out/build/test/gtest" \
         "$out/extra"
for lib in ucs uct ucp ucm ucs_signal; do
    cp -L "$ucx/lib/lib$lib.so.0" "$out/ucx/lib/"
done
cp -L "$ucx"/lib/ucx/*.so.0 "$out/ucx/lib/ucx/"
for program in ucx_info ucx_perftest ucx_pxn_relay ucx_pxn_info; do
    # a copy made by contrib/ucx_copy.sh wraps UCX's own programs in scripts
    if [ -x "$ucx/bin/$program.real" ]; then
        cp "$ucx/bin/$program.real" "$out/ucx/bin/$program"
    else
        cp "$ucx/bin/$program" "$out/ucx/bin/"
    fi
done
cp -L "$build"/.libs/{libuct_pxn,libpxn_transport}.so.0.0.0 "$out/build/.libs/"
cp "$build"/bench/{ucx_pxn_bench,ucx_pxn_stage_bench,ucx_pxn_ucp_bench,ucx_pxn_kv_bench} \
   "$build"/bench/ucx_pxn_contention_bench "$out/build/bench/"
for app in $test_apps; do
    cp "$build/test/apps/$app" "$out/build/test/apps/"
done
cp "$build/test/gtest/uct_gtest" "$out/build/test/gtest/"
pack_extra "$out/extra"
# run.sh arena: staging memory and first transfers (and the peer they drive)
mkdir -p "$out/build/bench" "$out/build/test/apps"
cp "$build"/bench/{ucx_pxn_first_bench,ucx_pxn_footprint,ucx_pxn_bench,ucx_pxn_stage_bench} \
   "$out/build/bench/"
cp "$build/test/apps/ucx_pxn_peer" "$out/build/test/apps/"
# contrib/gpu/host.sh: host benchmarks, and iproute2's ip
bash "$top/contrib/gpu/pack_host.sh" "$build" "$out"
find "$out" -type f \( -name '*.so*' -o -perm -u+x \) -exec strip --strip-debug {} + 2>/dev/null || true
du -sh "$out"
