#!/usr/bin/env bash
# UCP across emulated rails with ucx_perftest: cross-rail through pxn, the
# same transfer forced onto the frontend (UCX_TLS without pxn), and a
# same-rail pair with and without pxn in UCX_TLS (pxn must stay out of it).
#
#   bash contrib/perftest.sh [--test ucp_put_bw] [--sizes 4K,1M,64M] [--iters N]
#   bash contrib/perftest.sh --test ucp_put_bw,ucp_get [--sizes ...]
#                            [--nixl] [--outstanding N]
#
# With several tests (comma-separated), only the cross-rail pxn path runs,
# each test beside the others (e.g. GET beside PUT, with their ratio), every
# size with fresh processes (as a new client's first transfer).
#
# --outstanding N: at most N operations in flight (ucx_perftest -O; its
# defaults differ: 32 for ucp_put_bw, 1 for ucp_get).
# PXN_UCX_PREFIX: a UCX install holding the pxn module and its tools, used
# as it is (nothing is built; the GPU machine's carried copy).
# --nixl: NIXL's UCP settings (UCX_RNDV_THRESH=inf UCX_MAX_RMA_RAILS=2
# UCX_RC_FENCE=none) and its peer error mode (ucx_perftest -e) for every run,
# cma's memory invalidation on.
# Any UCX the build tree ($PXN_BUILD_DIR) was configured for: the module is
# preloaded where that UCX loads it no other way (PXN_MODULE_LOAD=preload).
#
# Inner transport cma (put and get, same host): rails are told apart by
# UCX_PXN_RAIL_MAP, UCP's own tcp stays on the frontend. Relays:
# ucx_pxn_relay on node 0 rail 1 (client -> server) and node 1 rail 0
# (server -> client, and gets by the receiver). Needs root; builds what is
# missing and brings the 2x2 topology up.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PXN_BUILD_DIR:-$top/build}
test=ucp_put_bw
sizes=4K,64K,1M,16M,64M
iters=
outstanding=
eflag=
while [ $# -gt 0 ]; do
    case $1 in
    --outstanding) outstanding=$2; shift 2 ;;
    --test) test=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    # cma stands in for rc (ep-to-ep) and dc (KSM invalidation): UCX 1.15-1.19
    # want md invalidation of a to-iface bulk lane in peer mode (docs/ucp.md)
    --nixl) eflag=-e; shift
            export UCX_RNDV_THRESH=inf UCX_MAX_RMA_RAILS=2 UCX_RC_FENCE=none \
                   UCX_CMA_MEMORY_INVALIDATE=y ;;
    *) echo "usage: perftest.sh [--test T[,T2...]] [--sizes LIST] [--iters N] [--outstanding N] [--nixl]" >&2
       exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "perftest.sh: run as root (network namespaces)" >&2; exit 2; }

# shellcheck source=contrib/emulation.sh
. "$top/contrib/emulation.sh"
emu_ucx "$build"
emu_up perftest # the namespaces go again at the end when this run brought them up
if [ -z "${PXN_UCX_PREFIX:-}" ] &&
   [ "$(sed -n 's/^PXN_MODULE_LOAD = //p' "$build/Makefile")" = preload ]; then
    # and the UCX's libraries for the module's own dependencies in every
    # process of the chain (bash, ip): README, "Using the module with a UCX
    # built elsewhere"
    export LD_PRELOAD="$(sed -n 's/^UCX_MODULEDIR = //p' "$build/Makefile")/libuct_pxn.so.0"
    export LD_LIBRARY_PATH="$ucx/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

# slot <node> <rail> <cmd...>: a process of that slot, pxn over cma
slot() {
    local n=$1 r=$2; shift 2
    env UCX_PXN_NODE_ID=node$n UCX_PXN_GROUP=pxnperf-node$n \
        UCX_PXN_NET_TLS=cma UCX_PXN_RAIL_MAP=memory:rail$r \
        UCX_NET_DEVICES=front,memory \
        bash "$T" exec --no-env "$n" "$r" -- "$@"
}

# start_relay <node> <rail>: in the background; env, topology.sh and ip all
# exec, so the pid recorded is the relay's own (SIGTERM drains it).
start_relay() {
    env UCX_PXN_NODE_ID=node$1 UCX_PXN_GROUP=pxnperf-node$1 \
        UCX_PXN_NET_TLS=cma UCX_PXN_RAIL_MAP=memory:rail$2 \
        bash "$T" exec --no-env "$1" "$2" -- "$ucx/bin/ucx_pxn_relay" \
        > "$log/relay-n$1r$2.log" 2>&1 &
    pids+=($!)
}

bytes() { numfmt --from=iec "$1"; }

# run <label> <tls> <server node> <server rail> <size> [test]: prints MB/s
# and Kmsg/s
port=13600
run() {
    local label=$1 tls=$2 sn=$3 sr=$4 size=$5 test=${6:-$test}
    port=$((port + 1))
    local b
    b=$(bytes "$size")
    local n=${iters:-$(( b >= 16777216 ? 20 : (b >= 1048576 ? 100 : 2000) ))}
    UCX_TLS=$tls slot "$sn" "$sr" timeout 60 "$ucx/bin/ucx_perftest" -p $port $eflag \
        > "$log/server-$label-$size.log" 2>&1 &
    local server=$!
    # until it listens (a UCX 1.22 process takes 0.4 s more to start)
    emu_wait_listen "pxn-n${sn}r${sr}" "$port" || true
    local ip=10.99.$sn.$((sr + 1)) try ok=0
    # A loaded machine may start the server late: "connect() failed" is
    # tried again (the client never reached it), anything else is a result.
    for try in 1 2 3 4 5; do
        if UCX_TLS=$tls UCX_LOG_LEVEL=info slot 0 0 timeout 60 \
               "$ucx/bin/ucx_perftest" "$ip" -p $port -t "$test" \
               -s "$(bytes "$size")" -n "$n" -w $(( n / 10 + 1 )) \
               ${outstanding:+-O $outstanding} $eflag \
               > "$log/client-$label-$size.log" 2>&1; then
            ok=1
            break
        fi
        grep -q 'connect() failed' "$log/client-$label-$size.log" || break
        sleep 0.5
    done
    if [ $ok = 1 ]; then
        awk '/^Final:/ {printf "%10.0f %10.1f", $6, $8 / 1000}' \
            "$log/client-$label-$size.log"
    else
        printf '%10s %10s' failed -
    fi
    wait "$server" 2>/dev/null || true
}

start_relay 0 1
start_relay 1 0
sleep 1

if [[ $test == *,* ]]; then
    IFS=, read -r -a tests <<<"$test"
    echo "ucx_perftest across emulated rails through pxn (inner cma; logs in $log)"
    printf '%6s' ""
    for t in "${tests[@]}"; do printf ' | %21s' "$t"; done
    printf ' | %s\n' "${tests[1]}/${tests[0]}"
    printf '%6s' size
    for t in "${tests[@]}"; do printf ' | %10s %10s' MB/s Kmsg/s; done
    printf ' |\n'
    for size in ${sizes//,/ }; do
        printf '%6s' "$size"
        first=
        for t in "${tests[@]}"; do
            r=$(run "pxn-$t" pxn,tcp 1 1 "$size" "$t")
            printf ' | %s' "$r"
            if [ -z "$first" ]; then first=$r; else second=$r; fi
        done
        echo "$first $second" | awk '{ if ($1 > 0 && $3 > 0) printf " | %6.2f\n", $3 / $1;
                                        else print " |   -" }'
    done
    grep -hE 'ep_cfg\[|INFO +.* cfg#[0-9]+ ' "$log"/client-pxn-*.log |
        sed -E 's/.*(ep_cfg\[|INFO +)/cross-rail: \1/; s/INFO +//' | sort -u | head -3
    emu_stop
    cat "$log/relay-n0r1.log" "$log/relay-n1r0.log" | grep stopped
    exit 0
fi

echo "ucx_perftest -t $test across emulated rails (inner cma; logs in $log)"
printf '%6s | %21s | %21s | %6s | %21s | %21s\n' "" "cross-rail via pxn" \
    "cross-rail frontend" "ratio" "same-rail pxn in TLS" "same-rail without"
printf '%6s | %10s %10s | %10s %10s | %6s | %10s %10s | %10s %10s\n' size \
    MB/s Kmsg/s MB/s Kmsg/s "" MB/s Kmsg/s MB/s Kmsg/s
for size in ${sizes//,/ }; do
    a=$(run pxn pxn,tcp 1 1 "$size")
    b=$(run front tcp 1 1 "$size")
    c=$(run same-pxn pxn,tcp 1 0 "$size")
    d=$(run same tcp 1 0 "$size")
    ratio=$(echo "$a $b" | awk '{ if ($1 > 0 && $3 > 0) printf "%5.1fx", $1 / $3;
                                   else print "  -" }')
    printf '%6s | %s | %s | %6s | %s | %s\n' "$size" "$a" "$b" "$ratio" "$c" "$d"
done
# pxn_lanes <log...>: the lanes of UCP's endpoint configuration lines
# (UCX 1.13: "ep_cfg[0]: rma(pxn/memory)"; 1.14 on: "... cfg#0
# rma(pxn/memory) am(pxn/memory tcp/front)") where one is a pxn lane: a
# <transport>/<device> inside a feature's parentheses. Only those lines,
# from the configuration on: other lines name paths ("Version 1.13.1
# (loaded from <UCX prefix>/lib/libucp.so.0)"), where "pxn/" can be part of
# a directory's name.
pxn_lanes() {
    sed -nE -e 's/.*(ep_cfg\[[0-9]+\]:)/\1/p' -e 's/.*INFO +.* (cfg#[0-9]+ )/\1/p' "$@" |
        grep -E '[( ]pxn/' || true
}
same_pxn=$(pxn_lanes "$log"/client-same-pxn-*.log)
if [ -n "$same_pxn" ]; then
    echo "WARNING: a same-rail pair used pxn:"; echo "$same_pxn"
else
    echo "same-rail pairs: no pxn lane (ep_cfg lines in $log/client-same-pxn-*.log)"
fi
# UCX 1.13: "ep_cfg[0]: rma(pxn/...)"; 1.14 on: "perftest inter-node cfg#0 rma(pxn/...)"
grep -hE 'ep_cfg\[|INFO +.* cfg#[0-9]+ ' "$log"/client-pxn-*.log |
    sed -E 's/.*(ep_cfg\[|INFO +)/cross-rail: \1/; s/INFO +//' | sort -u | head -3
emu_stop
cat "$log/relay-n0r1.log" "$log/relay-n1r0.log" | grep stopped
