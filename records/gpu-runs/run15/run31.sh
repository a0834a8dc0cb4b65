#!/usr/bin/env bash
# GPU run 15: UCP puts/gets of GPU memory (ucx_pxn_ucp_bench) and KV-cache
# shapes (ucx_pxn_kv_bench) with the engine of HEAD (gpu-carry) and the one
# before issue 31 (12c5b43, gpu-carry-kv/base), same card, same call,
# time-sliced then under CUDA MPS. $1: what (ucp|kv|both)
set -u
top=$PWD c=$top/gpu-carry k=$top/gpu-carry-kv out=${OUT:-$top/gpu-out}
what=${1:-both}
mkdir -p /tmp/pxn15
section() { printf '\n==== %s\n' "$*"; }
section machine; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc
cp "$c/build/.libs/libuct_pxn.so.0.0.0" "$c/ucx/lib/ucx/libuct_pxn.so.0"
cp "$c/build/.libs/libpxn_transport.so.0.0.0" "$c/ucx/lib/ucx/libpxn_transport.so.0"
one() { # <engine cur|base> <bench ucp|kv> <tag>
    local u b ex
    if [ "$1" = cur ]; then u=$c/ucx b=$c/build ex=$c/extra
    elif [ "$1" = new ]; then
        rm -rf /tmp/newucx && cp -a "$c/ucx" /tmp/newucx && cp "$k"/new/*.so.0 /tmp/newucx/lib/ucx/
        u=/tmp/newucx b=$c/build ex=$c/extra
    else u=$k/base b=$k/base/build ex=$k/gpu-carry/extra; fi
    local args=(--gpu --rounds ${PXN_ROUNDS:-3} --reps 2 --deadline 100 ${PXN_UCP_ARGS:-})
    [ "$2" = kv ] && args=(--gpu --reps 2 --seconds 0.25 --deadline 100 --label "engine $1, $3")
    section "$2 bench, engine $1, $3"
    env LD_LIBRARY_PATH="$u/lib:$ex" PXN_BUILD_DIR="$b" PXN_UCX_PREFIX="$u" \
        PXN_SOURCE_DIR="$top" timeout ${PXN_BENCH_TIMEOUT:-130} "$b/bench/ucx_pxn_${2}_bench" "${args[@]}" \
        --logs "/tmp/pxn15/$2-$1-$3" 2>&1 | tee "$out/$2-$1-$3.txt"
    echo "exit ${PIPESTATUS[0]}"
    tar czf "$out/logs-$2-$1-$3.tgz" -C /tmp/pxn15 "$2-$1-$3"
}
round() { # <tag>
    for bench in ucp kv; do
        case $what in both|$bench) ;; *) continue ;; esac
        if [ "${2:-}" = reversed ]; then one cur $bench "$1"; one base $bench "$1"
        else one base $bench "$1"; one cur $bench "$1"; fi
    done
}
[ -n "${PXN_SKIP_NOMPS:-}" ] || if [ -n "${PXN_ENGINES:-}" ]; then
    for e in $PXN_ENGINES; do one $e ucp quick; done
    exit 0
fi
round nomps
export CUDA_MPS_PIPE_DIRECTORY=/tmp/pxn-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/pxn-mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
if nvidia-cuda-mps-control -d; then
    sleep 1
    round mps
    echo "MPS servers: $(echo get_server_list | nvidia-cuda-mps-control | tr '\n' ' ')"
    echo quit | nvidia-cuda-mps-control; sleep 1
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    [ -z "${PXN_AGAIN_NOMPS:-}" ] || round nomps2 reversed
else
    section "CUDA MPS did not start"
fi
