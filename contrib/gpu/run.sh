#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with gpu-carry/ made
# by contrib/gpu/pack.sh: the GPU test subset, ucx_perftest with CUDA memory
# through pxn, and the GPU benchmark. Results go to $OUT (or ./gpu-out).
#   bash contrib/gpu/run.sh [tests|perftest|bench|stage|all]   (or tune, or
#   cross: the staging hop between two GPUs and several senders into one
#   relay; senders: only the latter; staging: the GPU tests, then the
#   staging hop's piece shapes and GET copy-out, then UCP puts and gets of
#   GPU memory per copy policy (five interleaved rounds), in about five
#   minutes; arena: staging memory per lane, geometries, first transfers;
#   ucp: only the UCP puts and gets of staging; host: host-memory
#   benchmarks across emulated rails,
#   contrib/gpu/host.sh, as root)
#   bash contrib/gpu/run.sh versions: with each UCX in $PXN_GPU_VERSIONS_DIR
#   (default gpu-carry-versions/, made by `contrib/gpu/pack.sh versions`;
#   gpu-carry/extra gives libcudart), the GPU test subset, then
#   ucx_perftest -m cuda put/get through pxn, protocols v2 as each UCX
#   defaults them (no UCX_PROTO_ENABLE), beside a run without pxn
#   (PXN_GPU_VERSIONS_PERFTEST=n: the tests only).
#   bash contrib/gpu/run.sh contention: ucx_pxn_contention_bench on this
#   machine's cores (host memory, inner cma; PXN_CONTENTION_ARGS).
#   bash contrib/gpu/run.sh railonly: contrib/railonly.sh (UCP through pxn
#   alone on a rail-only fabric, beside same-rail) on this machine's cores,
#   ranks unbound, then bound (--bind); PXN_RAILONLY_ARGS adds options.
#   bash contrib/gpu/run.sh kv: ucx_pxn_kv_bench (KV-cache shapes, pxn against
#   the inner cuda_ipc alone, docs/benchmarks.md) with GPU memory, with the
#   UCX of gpu-carry/ (where it holds the bench) and with each UCX of
#   gpu-carry-versions/ packed with the bench (UCX 1.22 built with CUDA:
#   pxn-sgl), first time-sliced (the processes' CUDA contexts take turns
#   on the GPU, no MPS), then under CUDA MPS; $OUT/kv-<UCX
#   version>-<nomps|mps>.txt and $OUT/kv-logs.tgz (PXN_KV_ARGS: the
#   bench's options, default below; PXN_KV_MEM=host: host memory, inner
#   cma, a dry run on a machine without a GPU; PXN_KV_VERSIONS="1.13.1
#   1.23.0": only those of the packed UCX). `pack.sh kv` packs all it
#   needs, this script included, into gpu-carry-kv/: there
#   `bash gpu-carry-kv/contrib/gpu/run.sh kv`.
# PXN_GPU_TESTS: the gtest filter of `tests` (default PxnCuda.*:PxnComponent.*).
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=contrib/emulation.sh
. "$top/contrib/emulation.sh" # emu_wait_listen
c=$top/gpu-carry
out=${OUT:-$top/gpu-out}
mkdir -p "$out"
what=${1:-all}

section() { printf '\n==== %s\n' "$*"; }

if [ "$what" = versions ]; then
    vdir=${PXN_GPU_VERSIONS_DIR:-$top/gpu-carry-versions}
    # One GPU, no NVLink: cuda_ipc disables gets unless told otherwise.
    # (PXN_GPU_VERSIONS_MEM=host UCX_PXN_NET_TLS=cma PXN_GPU_VERSIONS_DEV=memory:
    # a dry run without a GPU.)
    export UCX_PXN_NET_TLS=${UCX_PXN_NET_TLS:-cuda_ipc} UCX_CUDA_IPC_ENABLE_GET_ZCOPY=y
    mem=${PXN_GPU_VERSIONS_MEM:-cuda}
    dev=${PXN_GPU_VERSIONS_DEV:-cuda}
    nixl_env=(UCX_RNDV_THRESH=inf UCX_MAX_RMA_RAILS=2 UCX_RC_FENCE=none
              UCX_MAX_HCA_PER_GPU=auto)
    for u in "$vdir"/*/; do
        u=${u%/}
        v=${u##*/}
        load=$(cat "$u/module-load")
        pre=
        [ "$load" = preload ] && pre=$u/lib/ucx/libuct_pxn.so.0
        # at <node> <rail> [VAR=value...] <cmd...>: a process of that slot
        # with this UCX and the module loaded its way; in a subshell that
        # execs it ("(at ...) &"), $! is the process itself
        at() {
            local n=$1 r=$2
            shift 2
            exec env LD_LIBRARY_PATH="$u/lib" LD_PRELOAD="$pre" UCX_PXN_NODE_ID=node$n \
                UCX_PXN_GROUP=gpuver-$v-node$n UCX_PXN_RAIL_MAP=$dev:rail$r \
                UCX_PXN_CUDA_DEVICE=0 "$@"
        }
        section "UCX $v, pxn loaded: $load${pre:+ (LD_PRELOAD)}"
        (at 0 0 "$u/bin/ucx_info" -v) | head -2
        if [ -x "$u/build/test/gtest/uct_gtest" ]; then
            section "UCX $v: GPU tests"
            for m in libuct_pxn libpxn_transport; do # the module and the transport it opens
                cp "$u/build/.libs/$m.so.0.0.0" "$u/lib/ucx/$m.so.0"
            done
            # the tests set what they need: nothing of this script's own
            env -u UCX_PXN_NET_TLS -u UCX_CUDA_IPC_ENABLE_GET_ZCOPY \
                LD_LIBRARY_PATH="$u/lib:$c/extra" PXN_BUILD_DIR="$u/build" \
                PXN_UCX_PREFIX="$u" PXN_SOURCE_DIR="$top" PXN_MODULE_LOAD="$load" \
                PXN_MODULE_INSTALLED="$u/lib/ucx/libuct_pxn.so.0" \
                timeout 300 "$u/build/test/gtest/uct_gtest" \
                --gtest_filter="${PXN_GPU_TESTS:-PxnCuda.*:PxnComponent.*}" 2>&1 |
                tee "$out/v$v-gpu-tests.log" | grep -vE '^\[ *(RUN|OK) '
        fi
        [ "${PXN_GPU_VERSIONS_PERFTEST:-y}" = n ] && continue
        (at 0 0 UCX_PXN_ENABLE=y "$u/bin/ucx_info" -d) |
            grep -E 'Memory domain: pxn|Transport: pxn' | sort -u
        (at 0 1 "$u/bin/ucx_pxn_relay") > "$out/v$v-relay01.log" 2>&1 &
        r1=$!
        (at 1 0 "$u/bin/ucx_pxn_relay") > "$out/v$v-relay10.log" 2>&1 &
        r2=$!
        sleep 2
        port=13500
        for test in ucp_put_bw ucp_get; do
            for cfg in pxn pxn-nixl no-pxn; do
                tls=pxn,tcp,cuda_copy
                extra=()
                eflag=
                [ "$cfg" = no-pxn ] && tls=tcp,cuda_copy
                [ "$cfg" = pxn-nixl ] && { extra=("${nixl_env[@]}"); eflag=-e; }
                for size in 1048576 8388608; do
                    port=$((port + 1))
                    log=$out/v$v-$test-$cfg-$size
                    (at 1 1 UCX_TLS=$tls "${extra[@]}" timeout 60 \
                        "$u/bin/ucx_perftest" -p $port) > "$log-server.log" 2>&1 &
                    server=$!
                    emu_wait_listen - "$port" || true # until it listens
                    (at 0 0 UCX_TLS=$tls UCX_PROTO_INFO=y "${extra[@]}" timeout 60 \
                        "$u/bin/ucx_perftest" 127.0.0.1 -p $port -t $test -m $mem \
                        $eflag -s $size -n 200 -w 20) > "$log-client.log" 2>&1
                    rc=$?
                    wait $server
                    printf '%-10s %-8s %9s exit %d  %s\n' "$test" "$cfg" "$size" $rc \
                        "$(awk '/^Final:/ {printf "%.0f MB/s", $6}' "$log-client.log")"
                    # the protocol tables' rows (UCX_PROTO_INFO=y)
                    grep -E '\| .*(pxn|cuda_ipc|cuda_copy|tcp)/' "$log-client.log" |
                        grep -v 'cfg#' | sed 's/^[^|]*//' | sort -u | head -6
                done
            done
        done
        kill -TERM $r1 $r2
        wait $r1 $r2
        cat "$out/v$v-relay01.log" "$out/v$v-relay10.log" | grep -E 'stopped|relayed'
    done
    exit 0
fi

if [ "$what" = kv ]; then
    # About a minute each on one H200 (estimated: 50-60 measurements of
    # about half a second); its processes' deadline (100 s) ends a bench
    # that hangs with what it measured so far, timeout (125 s) one that
    # still hangs: four stay within the 10 minutes of one device call.
    kv_args=${PXN_KV_ARGS:---reps 2 --seconds 0.25 --deadline 100}
    # PXN_KV_MEM=host: a dry run without a GPU (host memory, inner cma)
    mem=--gpu
    [ "${PXN_KV_MEM:-cuda}" = host ] && mem=
    vdir=${PXN_GPU_VERSIONS_DIR:-$top/gpu-carry-versions}
    logs=/tmp/pxn-kv-logs
    rm -rf "$logs"
    mkdir -p "$logs"
    # kv_run <UCX dir> <build mirror> <module load> <tag> <label>: one bench
    # with that UCX, the module loaded its way
    kv_run() {
        local u=$1 b=$2 load=$3 tag=$4 label=$5 pre= v
        [ "$load" = preload ] && pre=$u/lib/ucx/libuct_pxn.so.0
        for m in libuct_pxn libpxn_transport; do # the module and the transport it opens
            cp "$b/.libs/$m.so.0.0.0" "$u/lib/ucx/$m.so.0"
        done
        v=$(LD_LIBRARY_PATH="$u/lib:$c/extra" "$u/bin/ucx_info" -v |
            sed -n -e 's/^# Library version: //p' -e 's/^# Version //p')
        section "ucx_pxn_kv_bench, UCX $v, $label"
        # shellcheck disable=SC2086
        env LD_LIBRARY_PATH="$u/lib:$c/extra" LD_PRELOAD="$pre" PXN_BUILD_DIR="$b" \
            PXN_UCX_PREFIX="$u" PXN_SOURCE_DIR="$top" \
            timeout 125 "$b/bench/ucx_pxn_kv_bench" $mem --label "UCX $v, $label" \
            --logs "$logs/$v-$tag" $kv_args 2>&1 | tee "$out/kv-$v-$tag.txt"
        echo "exit ${PIPESTATUS[0]}"
    }
    kv_all() { # <tag> <label>
        # gpu-carry/'s UCX (contrib/deps.sh's 1.13.1) names pxn in its modules
        [ -x "$c/build/bench/ucx_pxn_kv_bench" ] &&
            kv_run "$c/ucx" "$c/build" name "$1" "$2"
        for u in "$vdir"/*/; do
            u=${u%/}
            # PXN_KV_VERSIONS="1.13.1 1.23.0": only these of the packed UCX
            case " ${PXN_KV_VERSIONS:-${u##*/}} " in *" ${u##*/} "*) ;; *) continue ;; esac
            [ -x "$u/build/bench/ucx_pxn_kv_bench" ] &&
                kv_run "$u" "$u/build" "$(cat "$u/module-load")" "$1" "$2"
        done
    }
    section "machine"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    nproc
    kv_all nomps "time-sliced, no MPS"
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/pxn-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/pxn-mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if nvidia-cuda-mps-control -d; then
        sleep 1
        kv_all mps "CUDA MPS"
        # the server that ran the clients above: MPS was in use
        echo "MPS servers: $(echo get_server_list | nvidia-cuda-mps-control | tr '\n' ' ')"
        echo quit | nvidia-cuda-mps-control
        sleep 1
    else
        section "CUDA MPS did not start: no MPS figures"
    fi
    tar czf "$out/kv-logs.tgz" -C "$logs" .
    exit 0
fi

export LD_LIBRARY_PATH=$c/ucx/lib:$c/extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PXN_BUILD_DIR=$c/build PXN_UCX_PREFIX=$c/ucx PXN_SOURCE_DIR=$top
export PXN_MODULE_INSTALLED=$c/ucx/lib/ucx/libuct_pxn.so.0
cp "$c/build/.libs/libuct_pxn.so.0.0.0" "$PXN_MODULE_INSTALLED"
cp "$c/build/.libs/libpxn_transport.so.0.0.0" "$c/ucx/lib/ucx/libpxn_transport.so.0"

if [ "$what" = all ] || [ "$what" = tests ]; then
    section "machine"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    "$c/ucx/bin/ucx_info" -d | grep -E 'Memory domain|Transport|Device' | head -40
    if [ "$(nvidia-smi -L | wc -l)" -gt 1 ]; then
        section "GPU topology (the tests put railA on GPU 0, railB on GPU 1, ...)"
        nvidia-smi topo -m 2>&1 | tee "$out/topology.txt"
    fi
    section "GPU tests"
    timeout 300 "$c/build/test/gtest/uct_gtest" --gtest_filter="${PXN_GPU_TESTS:-PxnCuda.*:PxnComponent.*}" 2>&1 |
        tee "$out/gpu-tests.log" | grep -vE '^\[ *(RUN|OK) '
fi

if [ "$what" = all ] || [ "$what" = perftest ]; then
    section "ucx_perftest -m cuda -t ucp_put_bw through pxn (UCX_PROTO_ENABLE=y)"
    # One GPU has no NVLink: cuda_ipc disables gets unless told otherwise,
    # and without gets pxn is no RMA lane for UCP.
    export UCX_PXN_NET_TLS=cuda_ipc UCX_PROTO_ENABLE=y UCX_CUDA_IPC_ENABLE_GET_ZCOPY=y
    node() { env UCX_PXN_NODE_ID=node$1 UCX_PXN_GROUP=gpuperf-node$1 \
                 UCX_PXN_RAIL_MAP=cuda:rail$2 UCX_PXN_CUDA_DEVICE=0 "${@:3}"; }
    node 0 1 "$c/ucx/bin/ucx_pxn_relay" > "$out/relay01.log" 2>&1 &
    r1=$!
    node 1 0 "$c/ucx/bin/ucx_pxn_relay" > "$out/relay10.log" 2>&1 &
    r2=$!
    sleep 1
    for size in 65536 1048576 8388608; do
        UCX_TLS=pxn,tcp,cuda_copy node 1 1 timeout 40 "$c/ucx/bin/ucx_perftest" \
            -p 13400 > "$out/perftest-server-$size.log" 2>&1 &
        server=$!
        sleep 1
        UCX_TLS=pxn,tcp,cuda_copy UCX_PROTO_INFO=y node 0 0 timeout 40 \
            "$c/ucx/bin/ucx_perftest" 127.0.0.1 -p 13400 -t ucp_put_bw -m cuda \
            -s $size -n 200 -w 20 > "$out/perftest-client-$size.log" 2>&1
        echo "size $size: exit $?"
        grep -E 'Final|pxn' "$out/perftest-client-$size.log" | head -5
        wait $server
    done
    pkill -TERM -f ucx_pxn_relay; wait $r1 $r2
    cat "$out/relay01.log" "$out/relay10.log"
    unset UCX_PXN_NET_TLS UCX_PROTO_ENABLE UCX_CUDA_IPC_ENABLE_GET_ZCOPY
fi

if [ "$what" = tune ]; then
    section "raw copy loop: 8 MiB device-to-device copies (torch), one GPU"
    python3 - <<'PY' 2>&1 | tee "$out/raw-copy.txt"
import torch
n = 8 << 20
a = torch.empty(n, dtype=torch.uint8, device="cuda")
b = torch.empty(n, dtype=torch.uint8, device="cuda")
for _ in range(10):
    b.copy_(a)
torch.cuda.synchronize()
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
reps = 1000
s.record()
for _ in range(reps):
    b.copy_(a)
e.record()
torch.cuda.synchronize()
ms = s.elapsed_time(e)
print("raw 8 MiB copy loop: %.1f GB/s (%.2f us per copy)" % (n * reps / ms / 1e6, ms * 1e3 / reps))
PY
    for env in "UCX_PXN_INFLIGHT_DEPTH=4" "UCX_PXN_INFLIGHT_DEPTH=16" \
               "UCX_PXN_GPU_DOORBELL=n" "UCX_PXN_SLOTS=64"; do
        section "pxn with $env"
        timeout 60 "$c/build/bench/ucx_pxn_bench" --gpu --reps 3 --total 1G \
            --sizes 1M,8M,64M --env "$env" 2>&1 | tee "$out/tune-${env//=/-}.txt" |
            grep -E '^ +[0-9]+[KM] |relay:'
    done
fi

# run.sh arena: a relay's GPU memory on demand and the first transfer of a
# fresh sender (docs/gpu.md, "Staging memory on demand"), in about two and
# a half minutes; logs arena-*.txt in $OUT.
arena() {
    local b=$c/build/bench g
    section "machine"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv |
        tee "$out/arena-machine.txt"
    section "GPU memory of one process's relay: opened, 1 and every lane claimed, released"
    timeout 40 "$b/ucx_pxn_footprint" --linger 2 2>&1 | tee "$out/arena-footprint.txt"
    section "the same with 18 slots per lane (the former default geometry)"
    timeout 40 "$b/ucx_pxn_footprint" --linger 2 --env UCX_PXN_SLOTS=18 2>&1 |
        tee "$out/arena-footprint-slots18.txt"
    section "staging hop per geometry (SLOTS SLOT_SIZE): lane vs raw copies"
    for g in "18 8M" "4 8M" "8 4M" "2 16M" "6 4M"; do
        set -- $g
        echo "-- SLOTS=$1 SLOT_SIZE=$2"
        timeout 30 "$b/ucx_pxn_stage_bench" --slots "$1" --slot-size "$2" \
            --phases hop --seconds 0.5 2>&1 |
            tee "$out/arena-hop-$1x$2.txt" | grep -E '^ '
    done
    section "UCT put bandwidth, GPU memory, per geometry (18 8M and 4 8M twice)"
    for g in "18 8M" "4 8M" "8 4M" "2 16M" "18 8M" "4 8M"; do
        set -- $g
        echo "-- SLOTS=$1 SLOT_SIZE=$2"
        timeout 45 "$b/ucx_pxn_bench" --gpu --reps 3 --total 1G --sizes 1M,8M,64M \
            --prefix arena --env UCX_PXN_SLOTS="$1" \
            --env UCX_PXN_SLOT_SIZE="$2" 2>&1 |
            tee -a "$out/arena-bench-$1x$2.txt" | grep -E '^ +[0-9]+[KM] |relay:|verified'
    done
    section "first 256 MiB put and get of fresh senders vs the same repeated"
    timeout 120 "$b/ucx_pxn_first_bench" --gpu --runs 6 --repeat 5 --new-target-at 5 --prefix arena 2>&1 |
        tee "$out/arena-first.txt"
}
if [ "$what" = arena ]; then
    arena
fi

if [ "$what" = all ] || [ "$what" = stage ]; then
    section "GPU topology"
    nvidia-smi topo -m 2>&1 | tee "$out/topology.txt"
    section "GPU staging hop alone: lane vs raw copies, scatter, doorbells, compute"
    timeout 300 "$c/build/bench/ucx_pxn_stage_bench" 2>&1 | tee "$out/stage-bench.txt"
    if [ "$(nvidia-smi -L | wc -l)" -gt 1 ]; then
        section "across GPUs: sender on GPU 0, relay's arena on GPU 1 (NVLink)"
        timeout 300 "$c/build/bench/ucx_pxn_stage_bench" --sender-gpu 0 \
            --relay-gpu 1 --phases hop,scatter,latency 2>&1 |
            tee "$out/stage-bench-gpu0-gpu1.txt"
    fi
    section "staging hop with larger slots"
    for slot in 16M 32M; do
        timeout 60 "$c/build/bench/ucx_pxn_stage_bench" --slot-size $slot \
            --phases hop 2>&1 | tee "$out/stage-bench-hop-$slot.txt" | grep -E '^ '
    done
fi

if [ "$what" = cross ]; then
    [ "$(nvidia-smi -L | wc -l)" -gt 1 ] || { echo "cross: needs 2 GPUs" >&2; exit 1; }
    section "GPU topology"
    nvidia-smi topo -m 2>&1 | tee "$out/topology.txt"
    section "across GPUs: sender on GPU 0, relay's arena on GPU 1"
    timeout 300 "$c/build/bench/ucx_pxn_stage_bench" --sender-gpu 0 \
        --relay-gpu 1 --phases hop,scatter,latency 2>&1 |
        tee "$out/stage-bench-gpu0-gpu1.txt"
    section "the other way, and larger slots: hop only"
    timeout 60 "$c/build/bench/ucx_pxn_stage_bench" --sender-gpu 1 \
        --relay-gpu 0 --phases hop 2>&1 | tee "$out/stage-bench-gpu1-gpu0.txt"
    timeout 60 "$c/build/bench/ucx_pxn_stage_bench" --sender-gpu 0 \
        --relay-gpu 1 --slot-size 32M --phases hop 2>&1 |
        tee "$out/stage-bench-gpu0-gpu1-32M.txt"
fi

if [ "$what" = cross ] || [ "$what" = senders ]; then
    section "several senders into one relay: UCT puts of GPU memory through pxn"
    timeout 400 python3 "$top/contrib/gpu/multi_sender.py" \
        --peer "$c/build/test/apps/ucx_pxn_peer" 2>&1 | tee "$out/multi-sender.txt"
fi

ucp_bench() {
    section "UCP puts and gets of 256 MiB of GPU memory through pxn, per copy policy"
    timeout 300 "$c/build/bench/ucx_pxn_ucp_bench" --gpu --rounds 5 --reps 2 --deadline 100 \
        --logs "$out/staging-ucp-bench-logs" 2>&1 | tee "$out/staging-ucp-bench.txt"
}
if [ "$what" = staging ]; then
    section "machine"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv |
        tee "$out/staging-machine.txt"
    section "GPU tests (PxnCuda)"
    timeout 120 "$c/build/test/gtest/uct_gtest" --gtest_filter='PxnCuda.*' 2>&1 |
        tee "$out/staging-gpu-tests.log" | grep -vE '^\[ *(RUN|OK) '
    section "staging hop alone: piece shapes per copy policy, GET copy-out, hop"
    timeout 150 "$c/build/bench/ucx_pxn_stage_bench" --seconds 0.5 \
        --phases shapes,copyout,hop 2>&1 | tee "$out/staging-stage-bench.txt"
    if [ "$(nvidia-smi -L | wc -l)" -gt 1 ]; then
        section "piece shapes across GPUs: sender on GPU 0, relay's arena on GPU 1"
        timeout 100 "$c/build/bench/ucx_pxn_stage_bench" --seconds 0.5 \
            --sender-gpu 0 --relay-gpu 1 --phases shapes,copyout 2>&1 |
            tee "$out/staging-stage-bench-gpu0-gpu1.txt"
    fi
    ucp_bench
fi
if [ "$what" = ucp ]; then
    ucp_bench
fi

# run.sh contention: ucx_pxn_contention_bench (host memory, inner cma) on
# this machine's cores, a busy poller per core in its busy setting
# (docs/relay-engine.md, "A relay beside busy pollers"); PXN_CONTENTION_ARGS
# replaces its default options.
if [ "$what" = contention ]; then
    section "latency through a relay on contended cores (ucx_pxn_contention_bench)"
    nproc
    timeout 500 "$c/build/bench/ucx_pxn_contention_bench" \
        ${PXN_CONTENTION_ARGS:---iters 200} --logs "$out/contention-logs" 2>&1 |
        tee "$out/contention.txt"
fi

if [ "$what" = all ] || [ "$what" = bench ]; then
    section "UCT put bandwidth, GPU memory: pxn (cuda_ipc relay) vs direct cuda_ipc"
    timeout 150 "$c/build/bench/ucx_pxn_bench" --gpu --reps 3 --total 1G \
        --sizes 4K,16K,64K,256K,1M,8M,64M 2>&1 | tee "$out/bench-gpu.txt"
    section "same, CPU doorbell"
    timeout 60 "$c/build/bench/ucx_pxn_bench" --gpu --reps 3 --total 256M \
        --sizes 4K,64K,8M --env UCX_PXN_GPU_DOORBELL=n 2>&1 | tee "$out/bench-gpu-cpudb.txt"
    section "same, copy engine only"
    timeout 60 "$c/build/bench/ucx_pxn_bench" --gpu --reps 3 --total 256M \
        --sizes 4K,64K,8M --env UCX_PXN_COPY=ce 2>&1 | tee "$out/bench-gpu-ce.txt"
fi

if [ "$what" = railonly ]; then
    export PATH=$c/iproute/bin:$PATH PXN_BUILD_DIR=$c/build PXN_UCX_PREFIX=$c/ucx
    export LD_LIBRARY_PATH=$c/ucx/lib:$c/extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    cp "$c/build/.libs/libuct_pxn.so.0.0.0" "$c/ucx/lib/ucx/libuct_pxn.so.0"
    cp "$c/build/.libs/libpxn_transport.so.0.0.0" "$c/ucx/lib/ucx/libpxn_transport.so.0"
    if [ "$(df -k --output=size /dev/shm | tail -n 1)" -lt $((4 << 20)) ]; then
        export UCX_PXN_REGISTRY_DIR=/tmp/pxn-registry # as host.sh: a small /dev/shm
        mkdir -p "$UCX_PXN_REGISTRY_DIR"
    fi
    for b in "" --bind; do
        section "UCP through pxn alone, rail-only (contrib/railonly.sh $b)"
        nproc
        # shellcheck disable=SC2086
        timeout 280 bash "$top/contrib/railonly.sh" --tests tag_lat,ucp_am_lat,tag_bw,ucp_am_bw \
            --sizes 8,1K,8K,64K,1M,16M $b ${PXN_RAILONLY_ARGS:-} 2>&1 |
            tee "$out/railonly${b:+-bind}.txt"
    done
fi

# --- host: host memory across emulated rails (contrib/gpu/host.sh) ---------
if [ "$what" = host ]; then
    section "host benchmarks across emulated rails (contrib/gpu/host.sh)"
    OUT=$out bash "$top/contrib/gpu/host.sh" 2>&1 | tee "$out/host.txt"
fi
