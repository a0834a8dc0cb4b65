#!/usr/bin/env bash
# The main job, on an emulated rail-only topology (2 nodes x 2 rails in
# network namespaces):
#  1. UCT: a cross-rail transfer through pxn next to the same transfer over
#     the same-rail direct path, with the bytes the relay carried
#       node 0 rail 0 --shm--> relay node 0 rail 1 --tcp over rail 1--> node 1 rail 1
#       node 0 rail 0 --tcp over rail 0----------------------------------> node 1 rail 0
#  2. UCP: ucx_perftest ucp_put_bw cross-rail through pxn (ucx_pxn_relay on
#     node 0 rail 1) against the same transfer forced onto the frontend, with
#     the relay's counters (contrib/perftest.sh).
#  3. UCP with each process's UCX on its own rail NIC only: tagged messages
#     cross-rail through pxn alone beside the same-rail direct path, and
#     without pxn, where the cross-rail endpoint cannot be made
#     (contrib/railonly.sh).
#
# Installs and builds whatever is missing first. Needs root (namespaces).
# Extra arguments go to ucx_pxn_bench (e.g. --sizes 4K,1M,64M --reps 5).
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PXN_BUILD_DIR:-$top/build}
if [ "$(id -u)" != 0 ]; then
    echo "demo: run as root: the rail topology uses network namespaces" >&2
    exit 2
fi

bash "$top/contrib/build.sh"
# Nothing left behind: the namespaces go again at the end when this run
# brought them up (a topology that was up before stays). Processes end
# normally; registries go with their last process.
if bash "$top/contrib/topology.sh" status >/dev/null 2>&1; then
    topology_was_up=1
else
    topology_was_up=0
fi
trap '[ "$topology_was_up" = 1 ] || bash "$top/contrib/topology.sh" down >&2' EXIT
bash "$top/contrib/topology.sh" up --nodes 2 --rails 2 >&2
if [ $# -eq 0 ]; then
    set -- --sizes 64K,1M,16M,64M --reps 3
fi
echo "==== 1. UCT: cross-rail through pxn vs same-rail direct (tcp)"
"$build/bench/ucx_pxn_bench" "$@"
echo
echo "==== 2. UCP: ucx_perftest cross-rail through pxn vs the frontend path"
bash "$top/contrib/perftest.sh" --sizes 64K,1M,16M
echo
echo "==== 3. UCP, rail-only (each process's UCX on its own rail NIC): pxn alone"
bash "$top/contrib/railonly.sh" --tests tag_lat,tag_bw --sizes 8,64K,1M
