#!/usr/bin/env bash
# UCP on a rail-only fabric where every process's UCX sees only its own rail
# NIC (UCX_NET_DEVICES=rail<r>, UCX_TLS=pxn,tcp, pxn over inner tcp): the
# emulated 2 x 2 topology, ucx_perftest cross-rail (node 0 rail 0 to node 1
# rail 1: through pxn alone) beside the same-rail direct path between the
# same kind of processes (node 0 rail 0 to node 1 rail 0: UCP's tcp on
# rail 0), and once the cross-rail pair without pxn (UCX_TLS=tcp: it cannot
# connect). The frontend carries only ucx_perftest's own exchange.
#
#   bash contrib/railonly.sh [--tests tag_lat,tag_bw] [--sizes 8,64K,1M]
#                            [--iters N] [--bind] [--bind-cores N] [--nice]
#
# Latency tests (*_lat) print the typical (median) and average one-way
# latency in us, bandwidth tests MB/s; each with the ratio pxn / same-rail.
# The test nixl_notify (sizes: the put before each notification) runs
# test/apps/ucp_rma_check --nixl --notify 500 instead (its target --busy): NIXL's pattern of a
# put, an ep flush, then a notification (ucp_am_send_nbx), one at a time,
# through pxn, then through the frontend (UCX_TLS=tcp
# UCX_NET_DEVICES=front: what UCP takes across rails when it may use a
# second network), then same-rail; medians and 90th percentiles in us of
# flush-done-to-handler (notify) and put-posted-to-handler (write+notify),
# and the ratios pxn / frontend.
# --bind-cores N: the same with N cores each (the client the first N, the
# server the last N), so that a rank's pxn engine thread may run beside its
# busy-polling thread.
# --bind: every ucx_perftest bound to one core of its own as MPI binds
# ranks (taskset; the relays and engines unbound).
# --nice: every ucx_perftest at nice 19, the relays at 0: on a machine with
# fewer cores than busy processes (2 here: two busy-polling ranks and a
# relay) the relays then get a core when they need one, as they would with
# a core each; the same-rail runs are niced alike.
# Relays: ucx_pxn_relay on node 0 rail 1 and node 1 rail 0. Needs root;
# builds what is missing and brings the topology up (and down again when
# this run brought it up). PXN_UCX_PREFIX: a UCX install holding the pxn
# module and its tools, used as it is (nothing is built; the GPU machine's
# carried copy, `contrib/gpu/run.sh railonly`).
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PXN_BUILD_DIR:-$top/build}
tests=tag_lat,tag_bw
sizes=8,1K,8K,64K,1M,16M
iters=
bind=0 bind_cores=1 nice_ranks=
while [ $# -gt 0 ]; do
    case $1 in
    --tests) tests=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --bind) bind=1; shift ;;
    --bind-cores) bind=1 bind_cores=$2; shift 2 ;;
    --nice) nice_ranks="nice -n 19"; shift ;;
    *) echo "usage: railonly.sh [--tests T,...] [--sizes LIST] [--iters N] [--bind] [--bind-cores N] [--nice]" >&2
       exit 2 ;;
    esac
done
case $bind_cores in
''|*[!0-9]*|0) echo "railonly.sh: --bind-cores wants a number of cores, not '$bind_cores'" >&2; exit 2 ;;
esac
if [ $((2 * bind_cores)) -gt "$(nproc)" ]; then
    echo "railonly.sh: --bind-cores $bind_cores: client and server need $((2 * bind_cores)) of $(nproc) cores" >&2
    exit 2
fi
[ "$(id -u)" = 0 ] || { echo "railonly.sh: run as root (network namespaces)" >&2; exit 2; }

# shellcheck source=contrib/emulation.sh
. "$top/contrib/emulation.sh"
emu_ucx "$build"
if [ -z "${PXN_UCX_PREFIX:-}" ] && [[ ,$tests, == *,nixl_notify,* ]]; then
    make -C "$build" test/apps/ucp_rma_check >/dev/null
fi
emu_up railonly

# slot <node> <rail> <cmd...>: a process of that slot, its UCX on its rail
slot() {
    local n=$1 r=$2; shift 2
    env UCX_PXN_NODE_ID=node$n UCX_PXN_GROUP=pxnro-node$n UCX_PXN_NET_TLS=tcp \
        UCX_PXN_HOME_DEVICE=rail$r UCX_NET_DEVICES=rail$r \
        bash "$T" exec --no-env "$n" "$r" -- "$@"
}

# start_relay <node> <rail>: in the background; env, topology.sh and ip all
# exec, so the pid recorded is the relay's own (SIGTERM stops it)
start_relay() {
    env UCX_PXN_NODE_ID=node$1 UCX_PXN_GROUP=pxnro-node$1 UCX_PXN_NET_TLS=tcp \
        UCX_PXN_HOME_DEVICE=rail$2 UCX_NET_DEVICES=rail$2 \
        bash "$T" exec --no-env "$1" "$2" -- "$ucx/bin/ucx_pxn_relay" \
        > "$log/relay-n$1r$2.log" 2>&1 &
    pids+=($!)
}

bytes() { numfmt --from=iec "$1"; }
cores=$(nproc)

# run <label> <tls> <server node> <server rail> <test> <size>: prints the
# typical and average latency (us) or MB/s, "failed" when the client failed
port=13700
run() {
    local label=$1 tls=$2 sn=$3 sr=$4 test=$5 size=$6 b n pin_s= pin_c=
    port=$((port + 1))
    b=$(bytes "$size")
    n=${iters:-$(( b >= 16777216 ? 20 : (b >= 1048576 ? 100 : 2000) ))}
    if [ $bind = 1 ]; then
        pin_s="taskset -c $((cores - bind_cores))-$((cores - 1))"
        pin_c="taskset -c 0-$((bind_cores - 1))"
    fi
    UCX_TLS=$tls slot "$sn" "$sr" $pin_s $nice_ranks timeout 60 "$ucx/bin/ucx_perftest" -p $port \
        > "$log/server-$label-$test-$size.log" 2>&1 &
    local server=$! ok=0
    emu_wait_listen "pxn-n${sn}r${sr}" "$port" || true
    if UCX_TLS=$tls UCX_LOG_LEVEL=info slot 0 0 $pin_c $nice_ranks timeout 60 \
           "$ucx/bin/ucx_perftest" "10.99.$sn.$((sr + 1))" -p $port -t "$test" -s "$b" \
           -n "$n" -w $(( n / 10 + 1 )) > "$log/client-$label-$test-$size.log" 2>&1; then
        ok=1
    fi
    wait "$server" 2>/dev/null || true
    if [ $ok = 0 ]; then
        echo failed
    elif [[ $test == *_lat ]]; then
        awk '/^Final:/ {printf "%.1f %.1f", $3, $4}' "$log/client-$label-$test-$size.log"
    else
        awk '/^Final:/ {printf "%.0f", $6}' "$log/client-$label-$test-$size.log"
    fi
}

# notify_run <label> <server node> <server rail> <bytes> [VAR=value...]:
# "<notify p50> <p90> <write+notify p50> <p90>" in us, or "failed"
notify_run() {
    local label=$1 sn=$2 sr=$3 b=$4 ok=0 line
    shift 4
    port=$((port + 1))
    UCX_TLS=pxn,tcp slot "$sn" "$sr" env "$@" timeout 60 "$build/test/apps/ucp_rma_check" \
        --target -p $port --nixl --busy > "$log/server-$label-notify-$b.log" 2>&1 &
    local server=$!
    emu_wait_listen "pxn-n${sn}r${sr}" "$port" || true
    UCX_TLS=pxn,tcp slot 0 0 env "$@" timeout 60 "$build/test/apps/ucp_rma_check" \
        --initiator "10.99.$sn.$((sr + 1))" -p $port --nixl --region "$b" --min-block "$b" \
        --max-block "$b" --no-get --notify 500 --notify-block "$b" \
        > "$log/client-$label-notify-$b.log" 2>&1 && ok=1
    wait "$server" 2>/dev/null || ok=0
    line=$(grep -h 'notify_us' "$log/server-$label-notify-$b.log" || true)
    if [ $ok = 0 ] || [ -z "$line" ]; then
        echo failed
    else
        echo "$line" | sed -E 's/.*notify_us p50=([^ ]+) p90=([^ ]+) write_notify_us p50=([^ ]+) p90=([^ ]+).*/\1 \2 \3 \4/'
    fi
}

start_relay 0 1
start_relay 1 0
sleep 1

echo "ucx_perftest, rail-only, each process's UCX on its own rail NIC (logs in $log)"
echo "without pxn (UCX_TLS=tcp), node 0 rail 0 to node 1 rail 1: $(run nopxn tcp 1 1 tag_lat 8)"
grep -h -m1 -E 'ERROR' "$log"/client-nopxn-*.log | sed -E 's/^.*UCX +ERROR +/  /' || true
for test in ${tests//,/ }; do
    if [ "$test" = nixl_notify ]; then
        echo "$test: p50/p90 in us of notify (flush done -> handler) and w+n (put posted -> handler)"
        printf '%6s | %-27s | %-27s | %-27s | %s\n' put "through pxn" "through the frontend" \
            "same rail" "pxn / front (p50)"
        for size in ${sizes//,/ }; do
            b=$(bytes "$size")
            a=$(notify_run pxn 1 1 "$b")
            f=$(notify_run front 1 1 "$b" UCX_TLS=tcp UCX_NET_DEVICES=front)
            s=$(notify_run same 1 0 "$b")
            echo "$a $f $s" | awk -v z="$size" '
                function c(a, b) { return sprintf("%13s", a "/" b) }
                NF == 12 { printf "%6s | %s %s | %s %s | %s %s | %.2f %.2f\n", z,
                           c($1, $2), c($3, $4), c($5, $6), c($7, $8), c($9, $10),
                           c($11, $12), $1 / $5, $3 / $7; next }
                { printf "%6s | %s\n", z, $0 }'
        done
        continue
    fi
    if [[ $test == *_lat ]]; then
        printf '%-10s %6s | %21s | %21s | %11s\n' "$test" "" "through pxn" "same rail" "pxn / same"
        printf '%-10s %6s | %10s %10s | %10s %10s | %5s %5s\n' "" size median avg median avg med avg
    else
        printf '%-10s %6s | %11s | %11s | %10s\n' "$test" "" "through pxn" "same rail" "pxn / same"
        printf '%-10s %6s | %11s | %11s |\n' "" size MB/s MB/s
    fi
    for size in ${sizes//,/ }; do
        a=$(run pxn pxn,tcp 1 1 "$test" "$size")
        s=$(run same pxn,tcp 1 0 "$test" "$size")
        if [[ $test == *_lat ]]; then
            echo "$a $s" | awk -v t="$test" -v z="$size" '
                NF == 4 { printf "%-10s %6s | %10s %10s | %10s %10s | %5.2f %5.2f\n",
                          "", z, $1, $2, $3, $4, $1 / $3, $2 / $4; next }
                { printf "%-10s %6s | %s\n", "", z, $0 }'
        else
            echo "$a $s" | awk -v z="$size" '
                NF == 2 && $2 > 0 { printf "%-10s %6s | %11s | %11s | %10.2f\n", "", z, $1, $2, $1 / $2; next }
                { printf "%-10s %6s | %s\n", "", z, $0 }'
        fi
    done
done
grep -h -m1 'ep_cfg\[' "$log"/client-pxn-*.log | sed -E 's/.*(ep_cfg\[)/cross-rail lanes: \1/' | sort -u
emu_stop
cat "$log/relay-n0r1.log" "$log/relay-n1r0.log" | grep -E 'relayed' || true
