#!/usr/bin/env bash
# An MPI program over UCX (Open MPI's pml ucx and osc ucx) on the emulated
# rail-only topology, each rank's UCX limited to its own rail NIC
# (UCX_NET_DEVICES=rail<r>, UCX_TLS=pxn,tcp): rank 0 on node 0 rail 0, rank
# 1 on node 1 rail 1, so pxn is the only way between them. Runs
# test/apps/mpi_rail_check.c (tagged ping-pong 8 B - 1 MiB, one-sided puts,
# every byte checked) and prints its latencies, "verified: ok" and what the
# relays carried.
#
#   bash contrib/mpi_check.sh [--iters N] [--without-pxn] [--same-rail]
#
# --without-pxn: UCX_TLS=tcp (MPI_Init cannot reach the other rank);
# --same-rail: rank 1 on node 1 rail 0 (UCP's tcp on rail 0, no pxn), the
# baseline. Ranks are started in their namespaces by mpirun's rsh agent
# (a namespace name is the "host"), mpirun itself runs in node 0 rail 0,
# Open MPI's own wiring goes over the frontend. Installs Open MPI (Debian's
# openmpi-bin, libopenmpi-dev) and builds what is missing. Needs root.
# PXN_TOPOLOGY_PREFIX: the topology's namespace prefix (default pxn).
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PXN_BUILD_DIR:-$top/build}
iters=100
tls=pxn,tcp
server_rail=1
while [ $# -gt 0 ]; do
    case $1 in
    --iters) iters=$2; shift 2 ;;
    --without-pxn) tls=tcp; shift ;;
    --same-rail) server_rail=0; shift ;;
    *) echo "usage: mpi_check.sh [--iters N] [--without-pxn] [--same-rail]" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "mpi_check.sh: run as root (network namespaces)" >&2; exit 2; }

# shellcheck source=contrib/emulation.sh
. "$top/contrib/emulation.sh"
PXN_UCX_PREFIX= emu_ucx "$build" # this build's UCX: mpicc and the ranks need it
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
    echo "[mpi] installing Debian's Open MPI" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q openmpi-bin libopenmpi-dev >/dev/null
fi
prog=$build/test/apps/mpi_rail_check
if [ ! -x "$prog" ] || [ "$top/test/apps/mpi_rail_check.c" -nt "$prog" ]; then
    mkdir -p "$(dirname "$prog")"
    mpicc -O2 -Wall -o "$prog" "$top/test/apps/mpi_rail_check.c"
fi

pfx=${PXN_TOPOLOGY_PREFIX:-pxn}
emu_up mpi "$pfx"
work=$log

# mpirun's rsh agent: the "host" is a network namespace
cat > "$work/netns_rsh" <<'EOF'
#!/bin/bash
host=$1; shift
exec ip netns exec "$host" bash -c "$*"
EOF
# a rank's environment from its namespace <prefix>-n<node>r<rail>
cat > "$work/rank_env" <<EOF
#!/bin/bash
ns=\$(ip netns identify \$\$)
n=\${ns##*-n}; n=\${n%%r*}; r=\${ns##*r}
export UCX_PXN_NODE_ID=node\$n UCX_PXN_GROUP=pxnmpi-node\$n UCX_TLS=$tls \\
       UCX_PXN_NET_TLS=tcp UCX_PXN_HOME_DEVICE=rail\$r UCX_NET_DEVICES=rail\$r \\
       LD_LIBRARY_PATH=$ucx/lib
exec "\$@"
EOF
chmod +x "$work/netns_rsh" "$work/rank_env"

start_relay() {
    env UCX_PXN_NODE_ID=node$1 UCX_PXN_GROUP=pxnmpi-node$1 UCX_PXN_NET_TLS=tcp \
        UCX_PXN_HOME_DEVICE=rail$2 UCX_NET_DEVICES=rail$2 \
        bash "$T" exec --prefix "$pfx" --no-env "$1" "$2" -- "$ucx/bin/ucx_pxn_relay" \
        > "$work/relay-n$1r$2.log" 2>&1 &
    pids+=($!)
}
start_relay 0 1
start_relay 1 0
sleep 1

echo "mpi_rail_check: rank 0 node 0 rail 0, rank 1 node 1 rail $server_rail, UCX_TLS=$tls," \
     "each rank's UCX on its own rail NIC (logs in $work)"
status=0
timeout 300 ip netns exec "$pfx-n0r0" mpirun --allow-run-as-root --oversubscribe -np 2 \
    --host "$pfx-n0r0,$pfx-n1r$server_rail" --mca plm_rsh_agent "$work/netns_rsh" \
    --mca oob_tcp_if_include front --mca btl self --mca pml ucx --mca osc ucx \
    --mca rtc ^hwloc \
    --mca pml_ucx_tls any --mca pml_ucx_devices any \
    "$work/rank_env" "$prog" "$iters" > "$work/mpi.log" 2>&1 || status=$?
grep -E '^(pingpong|verified)' "$work/mpi.log" || tail -n 15 "$work/mpi.log"
emu_stop
grep -h 'relayed' "$work"/relay-*.log | sed 's/^/  /' || true
exit "$status"
