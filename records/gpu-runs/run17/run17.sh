#!/usr/bin/env bash
# GPU run 17, from the repository root, carrying gpu-carry (`bash
# contrib/gpu/pack.sh` at the commit the README names). Issue 32 on the GPU
# machine's 16 cores. $1:
#   main  the GPU tests of active messages (PxnCuda.AmZcopy*: am_zcopy of a
#         GPU payload), then contrib/railonly.sh (UCP through pxn alone on a
#         rail-only fabric, beside same-rail), ranks unbound (`bound`: the
#         same with the ranks bound):
#         latency 8 B - 1 MiB, bandwidth 64 KiB - 16 MiB (tag and AM), and
#         NIXL's notification pattern (nixl_notify)
#   tests the GPU tests alone
#   cores small-message latency with each rank bound to 1 core (its pxn
#         engine thread shares the busy rank's core) against 2 cores each,
#         twice each, interleaved
#   ab1m  1 MiB latency (rendezvous), UCX_TCP_TX_SEG_SIZE=8k against the
#         default, twice each, interleaved, ranks unbound: did pxn's 64 KiB
#         send segment make the 1 MiB cells slower than run 16's?
#   ab    what two settings do, latency and bandwidth around the eager
#         limit: UCX_TCP_TX_SEG_SIZE=8k (pxn's inner tcp with tcp's own
#         8 KiB send segments, as before 82c582a; UCP's same-rail tcp has
#         them either way) against the default, and UCX_PXN_AM_POLL=n
#         against y, ranks bound
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
ro() { # <file> <timeout> <railonly.sh args...>
    local f=$1 t=$2
    shift 2
    section "railonly.sh $* ${ENV_NOTE:-}"
    timeout "$t" bash contrib/railonly.sh "$@" 2>&1 | tee -a "$out/$f"
}
if [ "$1" = main ] || [ "$1" = bound ] || [ "$1" = tests ]; then
    section "GPU tests"
    timeout 120 "$c/build/test/gtest/uct_gtest" \
        --gtest_filter='PxnCuda.AmZcopy*:PxnCuda.GpuSourceIntoAHostArena' 2>&1 |
        tee "$out/tests.txt" | grep -vE '^\[ *RUN '
fi
if [ "$1" = main ] || [ "$1" = bound ]; then
    b=""
    [ "$1" = bound ] && b=--bind
    {
        f=railonly${b:+-bind}.txt
        ro "$f" 150 --tests tag_lat,ucp_am_lat --sizes 8,1K,8K,16K,64K,1M $b
        ro "$f" 120 --tests tag_bw,ucp_am_bw --sizes 64K,1M,16M $b
        ro "$f" 60 --tests nixl_notify --sizes 8,64K $b
    }
fi
if [ "$1" = ab ]; then
    for b in "" --bind; do
        f=tx8k${b:+-bind}.txt
        ENV_NOTE="UCX_TCP_TX_SEG_SIZE=8k" UCX_TCP_TX_SEG_SIZE=8k \
            ro "$f" 100 --tests tag_lat,ucp_am_lat --sizes 8K,16K,64K $b
        ENV_NOTE="default" ro "$f" 100 --tests tag_lat,ucp_am_lat --sizes 8K,16K,64K $b
    done
    for p in n y; do
        ENV_NOTE="UCX_PXN_AM_POLL=$p" UCX_PXN_AM_POLL=$p \
            ro ampoll.txt 100 --tests tag_lat,ucp_am_lat,nixl_notify --sizes 8,8K --bind
    done
fi
if [ "$1" = ab1m ]; then
    for r in 1 2; do
        ENV_NOTE="UCX_TCP_TX_SEG_SIZE=8k round $r" UCX_TCP_TX_SEG_SIZE=8k \
            ro ab1m.txt 100 --tests tag_lat,ucp_am_lat --sizes 1M
        ENV_NOTE="default round $r" ro ab1m.txt 100 --tests tag_lat,ucp_am_lat --sizes 1M
    done
fi
if [ "$1" = cores ]; then
    for r in 1 2; do
        for n in 1 2; do
            ENV_NOTE="--bind-cores $n round $r" \
                ro cores.txt 100 --tests tag_lat,ucp_am_lat --sizes 8,1K,8K,16K --bind-cores $n
        done
    done
fi
