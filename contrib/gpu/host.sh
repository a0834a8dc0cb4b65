#!/usr/bin/env bash
# Host-memory benchmarks across emulated rails on the GPU machine (16
# cores: room for sender, relay and target at once, which a 2-core machine
# does not have). Run as root from the repository root, with gpu-carry/
# made by contrib/gpu/pack.sh (`bash contrib/gpu/run.sh host` calls this):
#
#   bash contrib/gpu/host.sh [--quick]
#
# PXN_HOST_REPS (5) and PXN_HOST_TOTAL (1G): repetitions and bytes per
# measurement of the UCT benchmarks.
#
# The machine has no `ip`: pack.sh carries Debian's (gpu-carry/iproute/bin/ip,
# its libraries beside it, found through its rpath, so nothing else loads
# them), put first in PATH for contrib/topology.sh and the test programs.
# Results (and the topology's state on failure) go to $OUT (or ./gpu-out).
#   1. UCT bench, tcp over the rails: pxn/direct ratio and the relay's CPU
#      seconds per GB relayed, yielding and spinning applications
#   2. UCT bench, cma on the host: GET beside PUT, 4 KiB..8 MiB and random
#   3. ucx_perftest (UCP) across the rails, and GET beside PUT
#   4. per-operation CPU cost of the sender, native times (no valgrind)
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
c=${PXN_CARRY:-$top/gpu-carry}
out=${OUT:-$top/gpu-out}
quick=0
[ "${1:-}" = --quick ] && quick=1
mkdir -p "$out"

section() { printf '\n==== %s\n' "$*"; }
fail() { echo "host.sh: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "run as root (network namespaces)"
[ -x "$c/iproute/bin/ip" ] || fail "no $c/iproute/bin/ip: run contrib/gpu/pack.sh here first"
export PATH=$c/iproute/bin:$PATH
export LD_LIBRARY_PATH=$c/ucx/lib:$c/extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PXN_BUILD_DIR=$c/build PXN_UCX_PREFIX=$c/ucx
export PXN_MODULE_INSTALLED=$c/ucx/lib/ucx/libuct_pxn.so.0
cp "$c/build/.libs/libuct_pxn.so.0.0.0" "$PXN_MODULE_INSTALLED"
cp "$c/build/.libs/libpxn_transport.so.0.0.0" "$c/ucx/lib/ucx/libpxn_transport.so.0"
bench=$c/build/bench

section "machine"
nproc
df -h /dev/shm
# Host arenas live in the registry's file system: a container's small
# /dev/shm would shrink pxn's geometry (configuration.md); the disk then.
if [ "$(df -k --output=size /dev/shm | tail -n 1)" -lt $((4 << 20)) ]; then
    export UCX_PXN_REGISTRY_DIR=/tmp/pxn-registry
    mkdir -p "$UCX_PXN_REGISTRY_DIR"
    echo "/dev/shm under 4 GiB: UCX_PXN_REGISTRY_DIR=$UCX_PXN_REGISTRY_DIR"
fi
ip -V || fail "the carried ip does not run here"
command -v ip
# A network namespace is all the topology needs of the kernel and of ip.
ip netns add pxn-probe || fail "'ip netns add' fails here: no network namespaces"
ip netns exec pxn-probe ip link show lo >/dev/null || fail "'ip netns exec' fails here"
ip netns del pxn-probe

T=$top/contrib/topology.sh
bash "$T" down >/dev/null 2>&1 || true
bash "$T" up --nodes 2 --rails 2 || fail "topology up failed"
trap 'bash "$T" down >/dev/null 2>&1' EXIT

reps=${PXN_HOST_REPS:-5} sizes=1M,4M,16M,64M total=${PXN_HOST_TOTAL:-1G}
get_sizes=4K,64K,1M,8M,rand pt_sizes=4K,64K,1M,16M,64M pt_get_sizes=4K,64K,1M,8M
if [ $quick = 1 ]; then # a check of this script, not a measurement
    reps=1 sizes=1M total=64M get_sizes=4K,rand pt_sizes=64K pt_get_sizes=64K
fi

section "UCT put, tcp over the rails: pxn vs direct, yielding applications"
timeout 900 "$bench/ucx_pxn_bench" --reps $reps --total $total --sizes $sizes \
    2>&1 | tee "$out/host-bench-tcp.txt"
section "the same, spinning applications"
timeout 900 "$bench/ucx_pxn_bench" --reps $reps --total $total --sizes $sizes \
    --wait spin 2>&1 | tee "$out/host-bench-tcp-spin.txt"
section "UCT put and get, cma on the host: GET beside PUT"
timeout 900 "$bench/ucx_pxn_bench" --inner cma --ops put,get --reps $reps --total $total \
    --sizes $get_sizes 2>&1 | tee "$out/host-bench-cma-get.txt"
section "the same, spinning applications"
timeout 900 "$bench/ucx_pxn_bench" --inner cma --ops put,get --reps $reps --total $total \
    --sizes $get_sizes --wait spin 2>&1 | tee "$out/host-bench-cma-get-spin.txt"

section "ucx_perftest across the rails (UCP, inner cma)"
timeout 900 bash "$top/contrib/perftest.sh" --sizes $pt_sizes 2>&1 |
    tee "$out/host-perftest-put.txt"
section "ucx_perftest GET beside PUT (32 outstanding each)"
timeout 900 bash "$top/contrib/perftest.sh" --test ucp_put_bw,ucp_get \
    --outstanding 32 --sizes $pt_get_sizes 2>&1 | tee "$out/host-perftest-get.txt"

section "sender CPU per operation (native; callgrind counts are from the CPU machine)"
if [ -x "$bench/ucx_pxn_op_cost" ]; then
    timeout 300 "$bench/ucx_pxn_op_cost" --no-valgrind 2>&1 | tee "$out/host-op-cost.txt"
fi
