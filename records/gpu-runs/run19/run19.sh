#!/usr/bin/env bash
# GPU run 19, from the repository root, carrying gpu-carry (`bash
# contrib/gpu/pack.sh` at the commit that adds this file or later). Issue
# 32's rail-only UCP bandwidth through pxn on the GPU machine's 16 cores,
# UCX_PXN_PIECE_BYTES off (0: pieces fill their 8 MiB slot, as before it)
# against its default (auto: 256 KiB pieces with the host arena these runs
# use), interleaved, each railonly.sh run with its own same-rail runs; then
# what run 18's second call left: bound bandwidth, UCP's RMA through pxn,
# NIXL's notification pattern. $1:
#   bw    bandwidth and large-message latency, ranks unbound, twice (bw.txt)
#   bind  the same, ranks bound to a core each, once (bw-bind.txt); UCP's
#         RMA through pxn (put bandwidth, get), off and auto (rma.txt)
#   bind2 the bound bandwidth runs again, twice, in a later call (bw-bind2.txt)
#   rest  nixl_notify, off and auto (notify.txt); the UCT bench (tcp,
#         yielding applications) off and auto (uct.txt); small-message
#         latency at the default, ranks unbound then bound (lat.txt)
set -u
top=$PWD c=$top/gpu-carry out=${OUT:-$top/gpu-out}
mkdir -p "$out"
section() { printf '\n==== %s (%s)\n' "$*" "$(date +%T)"; }
section machine; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc
export PATH=$c/iproute/bin:$PATH PXN_BUILD_DIR=$c/build PXN_UCX_PREFIX=$c/ucx
export PXN_SOURCE_DIR=$top PXN_MODULE_INSTALLED=$c/ucx/lib/ucx/libuct_pxn.so.0
export LD_LIBRARY_PATH=$c/ucx/lib:$c/extra
cp "$c/build/.libs/libuct_pxn.so.0.0.0" "$c/ucx/lib/ucx/libuct_pxn.so.0"
cp "$c/build/.libs/libpxn_transport.so.0.0.0" "$c/ucx/lib/ucx/libpxn_transport.so.0"
ro() { # <file> <timeout> <PIECE_BYTES> <railonly.sh args...>
    local f=$1 t=$2 v=$3
    shift 3
    section "UCX_PXN_PIECE_BYTES=$v: railonly.sh $*" | tee -a "$out/$f"
    UCX_PXN_PIECE_BYTES=$v timeout "$t" bash contrib/railonly.sh "$@" 2>&1 | tee -a "$out/$f"
}
big="--tests tag_lat,ucp_am_lat,tag_bw,ucp_am_bw --sizes 256K,1M,4M,16M --iters 200"
if [ "$1" = bw ]; then
    for r in 1 2; do
        for v in 0 auto; do
            ro bw.txt 140 $v $big
        done
    done
fi
if [ "$1" = bind ]; then
    for v in 0 auto; do
        ro bw-bind.txt 140 $v $big --bind
    done
    for v in 0 auto; do
        ro rma.txt 90 $v --tests ucp_put_bw,ucp_get --sizes 1M,16M
    done
fi
if [ "$1" = bind2 ]; then
    for r in 1 2; do
        for v in 0 auto; do
            ro bw-bind2.txt 140 $v $big --bind
        done
    done
fi
if [ "$1" = rest ]; then
    for v in 0 auto; do
        ro notify.txt 60 $v --tests nixl_notify --sizes 8,64K,1M
    done
    for v in 0 auto; do
        section "UCX_PXN_PIECE_BYTES=$v: ucx_pxn_bench tcp"
        UCX_PXN_PIECE_BYTES=$v timeout 120 bash contrib/topology.sh up --nodes 2 --rails 2 >/dev/null 2>&1
        UCX_PXN_PIECE_BYTES=$v timeout 120 "$c/build/bench/ucx_pxn_bench" --reps 3 \
            --sizes 1M,4M,16M --total 512M --env UCX_PXN_PIECE_BYTES=$v 2>&1 | tee -a "$out/uct.txt"
        bash contrib/topology.sh down >/dev/null 2>&1
    done
    for b in "" --bind; do
        ro lat.txt 90 auto --tests tag_lat,ucp_am_lat --sizes 8,1K,8K,16K,64K $b
    done
fi
