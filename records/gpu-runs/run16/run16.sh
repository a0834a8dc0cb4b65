#!/usr/bin/env bash
# GPU run 16, from the repository root, carrying gpu-carry (HEAD: `bash
# contrib/gpu/pack.sh`) and gpu-carry-kv (run 15's: base = pxn at 12c5b43,
# the engine before issue 31, `pack.sh kv` of its build plus its
# ucx_pxn_ucp_bench). $1:
#   mps       ucx_pxn_ucp_bench (--modes random,1M,8M --copies auto) and
#             ucx_pxn_kv_bench, engines base and cur (HEAD), under CUDA MPS
#   nomps     the same time-sliced (cur first)
#   mps8m     ucx_pxn_ucp_bench --modes 8M --rounds 9 under CUDA MPS, engines
#             base, cur, base, cur
#   railonly  contrib/gpu/run.sh railonly (issue 32, 16 cores)
#   ampoll    contrib/railonly.sh latency (ranks bound) and nixl_notify,
#             UCX_PXN_AM_POLL=n then y (gpu-carry: c038b68)
set -u
top=$PWD c=$top/gpu-carry k=$top/gpu-carry-kv out=${OUT:-$top/gpu-out}
mkdir -p "$out" /tmp/pxn16
section() { printf '\n==== %s\n' "$*"; }
section machine; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc
if [ "$1" = railonly ]; then bash contrib/gpu/run.sh railonly; exit; fi
if [ "$1" = ampoll ]; then
    export PATH=$c/iproute/bin:$PATH PXN_BUILD_DIR=$c/build PXN_UCX_PREFIX=$c/ucx
    export LD_LIBRARY_PATH=$c/ucx/lib:$c/extra
    cp "$c/build/.libs/libuct_pxn.so.0.0.0" "$c/ucx/lib/ucx/libuct_pxn.so.0"
    cp "$c/build/.libs/libpxn_transport.so.0.0.0" "$c/ucx/lib/ucx/libpxn_transport.so.0"
    for run in "n --bind" "y --bind"; do
        set -- $run
        section "UCX_PXN_AM_POLL=$1 railonly.sh ${2:-}"
        UCX_PXN_AM_POLL=$1 timeout 100 bash contrib/railonly.sh --tests tag_lat,ucp_am_lat,nixl_notify \
            --sizes 8,8K ${2:-} 2>&1 | tee -a "$out/ampoll.txt"
    done
    exit
fi
cp "$c/build/.libs/libuct_pxn.so.0.0.0" "$c/ucx/lib/ucx/libuct_pxn.so.0"
cp "$c/build/.libs/libpxn_transport.so.0.0.0" "$c/ucx/lib/ucx/libpxn_transport.so.0"
one() { # <engine cur|base> <bench ucp|kv> <tag>
    local u b ex args
    if [ "$1" = cur ]; then u=$c/ucx b=$c/build ex=$c/extra
    else u=$k/base b=$k/base/build ex=$k/gpu-carry/extra; fi
    args=(--gpu --rounds 3 --reps 2 --deadline 90 --modes random,1M,8M --copies auto)
    [ "$3" = mps8m ] && args=(--gpu --rounds 9 --reps 2 --deadline 90 --modes 8M --copies auto)
    [ "$2" = kv ] && args=(--gpu --reps 2 --seconds 0.25 --deadline 90 --label "engine $1, $3")
    section "$2 bench, engine $1, $3"
    env LD_LIBRARY_PATH="$u/lib:$ex" PXN_BUILD_DIR="$b" PXN_UCX_PREFIX="$u" \
        PXN_SOURCE_DIR="$top" timeout 100 "$b/bench/ucx_pxn_${2}_bench" "${args[@]}" \
        --logs "/tmp/pxn16/$2-$1-$3" 2>&1 | tee "$out/$2-$1-$3.txt"
    echo "exit ${PIPESTATUS[0]}"
    tar czf "$out/logs-$2-$1-$3.tgz" -C /tmp/pxn16 "$2-$1-$3"
}
if [ "$1" = nomps ]; then
    for bench in ucp kv; do one cur $bench nomps; one base $bench nomps; done
    exit
fi
export CUDA_MPS_PIPE_DIRECTORY=/tmp/pxn-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/pxn-mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
echo quit | nvidia-cuda-mps-control 2>/dev/null; sleep 1
if nvidia-cuda-mps-control -d; then
    sleep 1
    if [ "$1" = mps8m ]; then
        one base ucp mps8m; one cur ucp mps8m
        mv "$out/ucp-base-mps8m.txt" "$out/ucp-base-mps8m-1.txt"; mv "$out/ucp-cur-mps8m.txt" "$out/ucp-cur-mps8m-1.txt"
        one base ucp mps8m; one cur ucp mps8m
    else
        for bench in ucp kv; do one base $bench mps; one cur $bench mps; done
    fi
    echo "MPS servers: $(echo get_server_list | nvidia-cuda-mps-control | tr '\n' ' ')"
    echo quit | nvidia-cuda-mps-control; sleep 1
else
    section "CUDA MPS did not start"
fi
