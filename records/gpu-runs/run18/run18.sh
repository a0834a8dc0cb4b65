#!/usr/bin/env bash
# GPU run 18, from the repository root, carrying gpu-carry (`bash
# contrib/gpu/pack.sh` at 5aba7b8) with gpu-carry/ab/{old,mid,new}/
# libpxn_transport.so.0.0.0: the transport library of 5f0db2b (old: the
# engine woke for each message its rank received), 2649827 (mid: the engine
# leaves a port to the application that polls it) and 5aba7b8 (new: mid,
# and no spin in a process confined to one CPU; for `all`, packed at
# f58cea1: and the draining thread grants the room it drains). Issue 32's rail-only UCP
# latency and bandwidth through pxn on the GPU machine's 16 cores, each
# variant beside same-rail in the same railonly.sh run. $1:
#   lat  latency 8 B - 64 KiB, ranks bound to one core each: old, mid, new,
#        twice, interleaved; then unbound: old, new (the first call, before
#        railonly.sh stopped needing `ss`, waited 5 s for each server and
#        ran out of time: its files are lat-bind.txt, lat.txt)
#   all  lat (old and new, one round) and bw in one call
#   short bound latency (as lat) and bound bandwidth 64 KiB and 1 MiB, old
#        and new: what was left of the session's device time
#   bw   bandwidth 64 KiB - 16 MiB, bound: old, new; NIXL's notification
#        pattern (unbound: --bind pins only ucx_perftest): old, new; then
#        bandwidth unbound (new), latency with 2 cores per rank (new), and
#        UCP's put bandwidth and get latency through pxn (new)
set -u
top=$PWD c=$top/gpu-carry out=${OUT:-$top/gpu-out}
mkdir -p "$out"
section() { printf '\n==== %s (%s)\n' "$*" "$(date +%T)"; }
section machine; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc
export PATH=$c/iproute/bin:$PATH PXN_BUILD_DIR=$c/build PXN_UCX_PREFIX=$c/ucx
export PXN_SOURCE_DIR=$top PXN_MODULE_INSTALLED=$c/ucx/lib/ucx/libuct_pxn.so.0
export LD_LIBRARY_PATH=$c/ucx/lib:$c/extra
cp "$c/build/.libs/libuct_pxn.so.0.0.0" "$c/ucx/lib/ucx/libuct_pxn.so.0"
use() { # <variant>: its transport library in the carried UCX
    cp "$c/ab/$1/libpxn_transport.so.0.0.0" "$c/ucx/lib/ucx/libpxn_transport.so.0"
    md5sum "$c/ucx/lib/ucx/libpxn_transport.so.0"
}
ro() { # <file> <timeout> <variant> <railonly.sh args...>
    local f=$1 t=$2 v=$3
    shift 3
    section "variant $v: railonly.sh $*"
    use "$v"
    timeout "$t" bash contrib/railonly.sh "$@" 2>&1 | tee -a "$out/$f"
}
lat="--tests tag_lat,ucp_am_lat --sizes 8,1K,8K,16K,64K"
if [ "$1" = lat ]; then
    for r in 1 2; do
        for v in old mid new; do
            ro lat-bind.txt 90 $v $lat --bind
        done
    done
    for v in old new; do
        ro lat.txt 90 $v $lat
    done
fi
if [ "$1" = all ]; then
    for v in old new; do
        ro lat2-bind.txt 90 $v $lat --bind
    done
    for v in old new; do
        ro lat2.txt 90 $v $lat
    done
fi
if [ "$1" = short ]; then # what a last few minutes of device time hold
    for v in old new; do
        ro short-bind.txt 60 $v $lat --bind
    done
    for v in old new; do
        ro short-bind.txt 60 $v --tests tag_bw,ucp_am_bw --sizes 64K,1M --bind
    done
fi
if [ "$1" = bw ] || [ "$1" = all ]; then
    for v in old new; do
        ro bw-bind.txt 100 $v --tests tag_bw,ucp_am_bw --sizes 64K,1M,16M --bind
    done
    ro bw.txt 100 new --tests tag_bw,ucp_am_bw --sizes 64K,1M,16M
    # where the bandwidth goes: pxn's own RMA path under UCP (put, get)
    ro rma.txt 100 new --tests ucp_put_bw,ucp_get --sizes 1M,16M
    ro notify.txt 60 old --tests nixl_notify --sizes 8,64K
    ro notify.txt 60 new --tests nixl_notify --sizes 8,64K
    ro cores2.txt 90 new $lat --bind-cores 2
fi
