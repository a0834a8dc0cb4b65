#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with gpu-carry-nixl/
# made by contrib/gpu/nixl_pack.sh: NIXL's nixlbench (ASIO runtime, two
# processes) across emulated nodes and rails through pxn, host memory (inner
# cma) and GPU memory (inner cuda_ipc), WRITE and READ with
# --check_consistency, the relay's counters, and the same transfers without
# pxn; then the relay killed mid-transfer. Results go to $OUT (or ./gpu-out).
#
#   bash contrib/gpu/nixl.sh [host|gpu|kill|all]
#
# No network namespaces: nodes are told apart by UCX_PXN_NODE_ID and
# UCX_PXN_GROUP, rails by UCX_PXN_RAIL_MAP; UCP's own transports are tcp
# (and cuda_copy for GPU memory), never cma or cuda_ipc, so the only way
# from "node 0 rail 0" to "node 1 rail 1" other than tcp is pxn's relay.
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
c=$top/gpu-carry-nixl
out=${OUT:-$top/gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$c/ucx/lib:$c/nixl/lib:$c/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NIXL_PLUGIN_DIR=$c/nixl/lib/plugins
what=${1:-all}
nb=$c/nixl/bin/nixlbench
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
pids=()
kill_all() { local p; for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done; }
trap kill_all EXIT

section() { printf '\n==== %s\n' "$*"; }

# node <n> <rail> <inner> cmd...: a process of emulated node n on rail r
# (GPU rail % gpus; its pxn relay forwards with <inner>). It execs: run it
# in the background (then $! is cmd's pid) or in a ( subshell ).
node() {
    local n=$1 r=$2 inner=$3 map=memory
    shift 3
    [ "$inner" = cuda_ipc ] && map=cuda
    exec env UCX_PXN_NODE_ID=node$n UCX_PXN_GROUP=gpunixl-node$n UCX_PXN_NET_TLS=$inner \
        UCX_PXN_RAIL_MAP=$map:rail$r UCX_PXN_CUDA_DEVICE=$((r % (gpus > 0 ? gpus : 1))) \
        "$@"
}

start_relays() { # start_relays <inner> <tag>
    node 0 1 "$1" "$c/ucx/bin/ucx_pxn_relay" > "$out/$2-relay01.log" 2>&1 &
    r01=$!
    node 1 0 "$1" "$c/ucx/bin/ucx_pxn_relay" > "$out/$2-relay10.log" 2>&1 &
    r10=$!
    pids+=("$r01" "$r10")
    sleep 2
}
stop_relays() { # prints their exit lines
    kill -TERM "$r01" "$r10" 2>/dev/null
    wait "$r01" "$r10" 2>/dev/null
    grep -h 'stopped' "$out/$1-relay01.log" "$out/$1-relay10.log"
}

port=12600
# pair <tag> <inner> <UCX_TLS> <seg> <op> [nixlbench args...]: initiator
# node 0 rail 0 (binds 127.0.0.1, rank 0), target node 1 rail 1
pair() {
    local tag=$1 inner=$2 tls=$3 seg=$4 op=$5
    shift 5
    port=$((port + 1))
    local args=(--runtime_type=ASIO --asio_address=127.0.0.1 "--asio_port=$port" --backend=UCX
                --op_type="$op" --initiator_seg_type="$seg" --target_seg_type="$seg"
                --check_consistency --total_buffer_size=$((256 << 20))
                --start_block_size=65536 --max_block_size=$((64 << 20))
                --num_iter=64 --warmup_iter=8 --large_blk_iter_ftr=1 "$@")
    UCX_TLS=$tls UCX_PROTO_INFO=y node 0 0 "$inner" timeout 300 "$nb" "${args[@]}" \
        > "$out/$tag-init.log" 2>&1 &
    local i=$!
    sleep 1
    (UCX_TLS=$tls node 1 1 "$inner" timeout 300 "$nb" "${args[@]}" > "$out/$tag-targ.log" 2>&1)
    local trc=$?
    wait "$i"
    local irc=$?
    echo "$tag: initiator exit $irc, target exit $trc"
    awk '/^Block Size/ {print; t = 1; next} t && /^[0-9]+ / {print}' "$out/$tag-init.log"
    grep -h -E 'Consistency check failed|Transfer failed' "$out/$tag-init.log" "$out/$tag-targ.log"
}

# run_set <inner> <pxn UCX_TLS> <plain UCX_TLS> <seg> [VAR=value...]: in a
# subshell, the variables exported for relays and nixlbench alike
run_set() (
    inner=$1 tls=$2 plain=$3 seg=$4
    shift 4
    [ $# -gt 0 ] && export "${@:?}"
    for op in WRITE READ; do
        for pt in 0 1; do
            section "$seg $op through pxn, progress thread $pt"
            start_relays "$inner" "$seg-$op-pt$pt"
            pair "$seg-$op-pt$pt" "$inner" "$tls" "$seg" "$op" --enable_pt=$pt
            stop_relays "$seg-$op-pt$pt"
        done
        section "$seg $op without pxn (UCX_TLS=$plain)"
        pair "$seg-$op-plain" "$inner" "$plain" "$seg" "$op"
    done
    # pxn's lanes in UCP's lines ("rma(pxn/cuda)", "| pxn/cuda |"), not
    # paths that hold "pxn/" (a checkout named ucx-pxn)
    grep -h -m3 -E '[|( ]pxn/' "$out/$seg-WRITE-pt0-init.log" "$out/$seg-READ-pt0-init.log"
)

section "machine"
nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1 | head -3
"$c/ucx/bin/ucx_info" -v | head -1
UCX_PXN_ENABLE=y "$c/ucx/bin/ucx_info" -d | grep -E 'Transport: (pxn|cma|cuda)' | sort | uniq -c

if [ "$what" = all ] || [ "$what" = host ]; then
    section "host memory through pxn (inner cma), then UCX_TLS=tcp"
    run_set cma pxn,tcp tcp DRAM
fi

if [ "$what" = all ] || [ "$what" = gpu ]; then
    section "GPU memory through pxn (inner cuda_ipc), then UCX_TLS=tcp,cuda_copy"
    # One GPU has no NVLink peer: cuda_ipc enables gets only when told.
    run_set cuda_ipc pxn,tcp,cuda_copy tcp,cuda_copy VRAM UCX_CUDA_IPC_ENABLE_GET_ZCOPY=y
fi

if [ "$what" = all ] || [ "$what" = kill ]; then
    section "relay node 0 rail 1 killed mid-transfer (host memory, UCX_PXN_FALLBACK=n)"
    # (bash's notices of killed or aborting processes go to kill-shell.err)
    for op in WRITE READ; do
        port=$((port + 1))
        start_relays cma "kill-$op"
        UCX_TLS=pxn,tcp UCX_PXN_FALLBACK=n node 0 0 cma timeout 120 "$nb" --runtime_type=ASIO \
            --asio_address=127.0.0.1 --asio_port=$port --backend=UCX --op_type=$op \
            --total_buffer_size=$((64 << 20)) --start_block_size=1048576 --max_block_size=1048576 \
            --num_iter=1000000 --warmup_iter=8 > "$out/kill-$op-init.log" 2>&1 &
        i=$!
        sleep 1
        UCX_TLS=pxn,tcp UCX_PXN_FALLBACK=n node 1 1 cma timeout 120 "$nb" --runtime_type=ASIO \
            --asio_address=127.0.0.1 --asio_port=$port --backend=UCX --op_type=$op \
            --total_buffer_size=$((64 << 20)) --start_block_size=1048576 --max_block_size=1048576 \
            --num_iter=1000000 --warmup_iter=8 > "$out/kill-$op-targ.log" 2>&1 &
        t=$!
        pids+=("$i" "$t")
        sleep 5
        kill -KILL "$r01"
        t0=$SECONDS
        wait "$i"
        echo "$op: initiator exit $? $((SECONDS - t0)) s after the kill (124: still running at 120 s)"
        grep -h -E '(Transfer|postSlot) failed|died|healthy' "$out/kill-$op-init.log" | head -3
        kill -TERM "$t" 2>/dev/null
        kill -TERM "$r10" 2>/dev/null
        wait "$t" "$r10" 2>/dev/null
    done 2>>"$out/kill-shell.err"
fi
# the killed relays' registry entries (no process of these groups is left)
rm -rf "/dev/shm/ucx-pxn-$(id -u)-gpunixl-node0" "/dev/shm/ucx-pxn-$(id -u)-gpunixl-node1"
