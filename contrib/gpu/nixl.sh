#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with gpu-carry-nixl/
# made by contrib/gpu/nixl_pack.sh: NIXL's nixlbench (ASIO runtime, two
# processes) across emulated nodes and rails through pxn, host memory (inner
# cma) and GPU memory (inner cuda_ipc), WRITE and READ with
# --check_consistency, the relay's counters, and the same transfers without
# pxn; then the relay killed mid-transfer. Results go to $OUT (or ./gpu-out).
#
#   bash contrib/gpu/nixl.sh [host|gpu|kill|all]
#   bash contrib/gpu/nixl.sh sgl
#
# sgl (not part of all): KV-cache-like shapes, GPU memory, WRITE, 32 blocks
# per transfer of 8 KiB and of 64 KiB, --check_consistency, each with
# NIXL_UCX_SGL_ENABLE=n and =y, through pxn (inner cuda_ipc) and without pxn
# (UCX_TLS=cuda_ipc,cuda_copy,tcp: cuda_ipc directly between the two
# processes), first time-sliced, then under CUDA MPS; nixlbench's rows, the
# relays' byte counts beside the bytes nixlbench moved, and UCP's protocol
# rows for the put (`sgl | pxn/cuda` when UCP used SGL on the pxn lane).
# NIXL_SGL_MEM=host: host memory, inner cma, baseline UCX_TLS=cma,tcp, no
# MPS (a dry run without a GPU). NIXL_SGL_ITER / NIXL_SGL_WARMUP: nixlbench's
# --num_iter / --warmup_iter (default 512 / 64); NIXL_SGL_MPS=n: no MPS part;
# NIXL_SGL_CASES: a regex, only the pairs whose tag matches.
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
    # (nb_total, nb_blk_lo, nb_blk_hi, nb_iter, nb_warm, nb_timeout: the sgl set's shapes)
    local args=(--runtime_type=ASIO --asio_address=127.0.0.1 "--asio_port=$port" --backend=UCX
                --op_type="$op" --initiator_seg_type="$seg" --target_seg_type="$seg"
                --check_consistency --total_buffer_size=${nb_total:-$((256 << 20))}
                --start_block_size=${nb_blk_lo:-65536} --max_block_size=${nb_blk_hi:-$((64 << 20))}
                --num_iter=${nb_iter:-64} --warmup_iter=${nb_warm:-8} --large_blk_iter_ftr=1 "$@")
    UCX_TLS=$tls UCX_PROTO_INFO=y node 0 0 "$inner" timeout "${nb_timeout:-300}" "$nb" "${args[@]}" \
        > "$out/$tag-init.log" 2>&1 &
    local i=$! n
    # the target only once the initiator listens (ASIO's rank 0 is the
    # process that binds the port: a slow initiator would swap the roles)
    for n in $(seq 100); do
        grep -q "^ *[0-9]*: [0-9A-F]*:$(printf %04X "$port") 00000000:0000 0A" /proc/net/tcp && break
        sleep 0.1
    done
    sleep 0.2
    UCX_TLS=$tls node 1 1 "$inner" timeout "${nb_timeout:-300}" "$nb" "${args[@]}" \
        > "$out/$tag-targ.log" 2>&1 &
    local t=$!
    pids+=("$i" "$t")
    wait "$i"
    local irc=$?
    # a target whose initiator died waits for it until its timeout
    for n in $(seq 50); do kill -0 "$t" 2>/dev/null || break; sleep 0.1; done
    kill -TERM "$t" 2>/dev/null
    wait "$t"
    local trc=$?
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

if [ "$what" = sgl ]; then
    # about 10 s a pair on one H200 (estimated), 16 pairs
    seg=VRAM inner=cuda_ipc tls=pxn,tcp,cuda_copy plain=cuda_ipc,cuda_copy,tcp
    if [ "${NIXL_SGL_MEM:-cuda}" = host ]; then
        seg=DRAM inner=cma tls=pxn,tcp plain=cma,tcp
        NIXL_SGL_MPS=n
    fi
    export UCX_CUDA_IPC_ENABLE_GET_ZCOPY=y # one GPU has no NVLink peer
    nb_total=$((64 << 20)) nb_iter=${NIXL_SGL_ITER:-512} nb_warm=${NIXL_SGL_WARMUP:-64}
    nb_timeout=45 batch=32 sgl_deadline=${NIXL_SGL_DEADLINE:-500}
    # sgl_pair <tag> <pxn|plain> <block> <n|y>: one nixlbench pair; a pair
    # that would start past $sgl_deadline s is skipped (one device call)
    sgl_pair() {
        local tag=$1 how=$2 blk=$3 s=$4 t=$tls
        [ "$how" = plain ] && t=$plain
        [[ $tag =~ ${NIXL_SGL_CASES:-.} ]] || return 0 # a regex on the tags
        section "$tag: $seg WRITE $blk B x $batch, UCX_TLS=$t, NIXL_UCX_SGL_ENABLE=$s"
        if [ "$SECONDS" -gt "$sgl_deadline" ]; then
            echo "$tag: skipped, $SECONDS s into the run"
            return
        fi
        export NIXL_UCX_SGL_ENABLE=$s
        nb_blk_lo=$blk nb_blk_hi=$blk
        [ "$how" = pxn ] && start_relays "$inner" "$tag"
        pair "$tag" "$inner" "$t" "$seg" WRITE --start_batch_size=$batch --max_batch_size=$batch
        [ "$how" = pxn ] && stop_relays "$tag"
        echo "bytes nixlbench moved: $(( (nb_iter + nb_warm) * blk * batch ))"
        # UCP's put protocols of this process ("from sgl ... | sgl | pxn/cuda")
        grep -h -E 'ucp_put\* from sgl|\| +sgl +\||cfg#[0-9]+ rma\(' "$out/$tag-init.log" |
            sed -e 's/^.*UCX  INFO  *//' -e 's/^[^|]*|/|/' | tr -s ' ' | sort | uniq -c
        if grep -q -E '\| +sgl +\| +pxn/' "$out/$tag-init.log"; then
            echo "$tag: UCP used the SGL protocol on the pxn lane"
        elif [ "$how" = pxn ]; then
            echo "$tag: no sgl row on a pxn lane"
        fi
        unset NIXL_UCX_SGL_ENABLE
    }
    sgl_shapes() { # <label>
        local blk s
        for blk in 8192 65536; do
            for s in n y; do
                sgl_pair "sgl-$1-$((blk >> 10))k-pxn-sgl$s" pxn "$blk" "$s"
            done
            for s in n y; do
                sgl_pair "sgl-$1-$((blk >> 10))k-plain-sgl$s" plain "$blk" "$s"
            done
        done
    }
    section "sgl shapes, time-sliced (no MPS)"
    sgl_shapes nomps
    if [ "${NIXL_SGL_MPS:-y}" = y ]; then
        export CUDA_MPS_PIPE_DIRECTORY=/tmp/pxn-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/pxn-mps-log
        mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
        if nvidia-cuda-mps-control -d; then
            trap 'kill_all; echo quit | nvidia-cuda-mps-control' EXIT
            sleep 1
            section "sgl shapes, CUDA MPS"
            sgl_shapes mps
            # the server that ran the clients above: MPS was in use
            echo "MPS servers: $(echo get_server_list | nvidia-cuda-mps-control | tr '\n' ' ')"
            echo quit | nvidia-cuda-mps-control
            trap kill_all EXIT
            sleep 1
        else
            section "CUDA MPS did not start: no MPS figures"
        fi
    fi
    # one line a pair: nixlbench's row and the relay n0r1's bytes
    section "summary (block, batch, GB/s, avg lat, ..., avg tx, p99 tx; relay n0r1 bytes)"
    for f in "$out"/sgl-*-init.log; do
        [ -f "$f" ] || continue
        tag=$(basename "$f" -init.log)
        row=$(awk '/^Block Size/ {t = 1; next} t && /^[0-9]+ / {print; exit}' "$f" | tr -s ' ')
        rb=$(sed -n 's/.*relayed [0-9]* pieces, \([0-9]*\) bytes.*/\1/p' "$out/$tag-relay01.log" 2>/dev/null)
        sg=-; grep -q -E '\| +sgl +\| +pxn/' "$f" && sg=sgl-on-pxn
        printf '%-26s %s | relay %s | %s\n' "$tag" "${row:-no row}" "${rb:--}" "$sg"
    done
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
