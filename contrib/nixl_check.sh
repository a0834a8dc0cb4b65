#!/usr/bin/env bash
# NIXL, unmodified, across emulated rails through pxn (docs/nixl.md).
#
#   NIXL_PREFIX=/opt/nixl bash contrib/nixl_check.sh [--quick] [--no-kill]
#       [--no-baseline] [--batch N] [--blocks FIRST[,LAST]] [--sgl] [--railonly]
#
# Takes an installed NIXL (nixlbench built against a UCX that has the pxn
# module) or NIXL's UCX plugin in a NIXL wheel's private UCX
# (<pkg>.libs/nixl, pxn added by contrib/wheel_install.sh); builds nothing.
# Two nixlbench processes (ASIO runtime, no etcd) on different emulated
# nodes and rails -- initiator node 0 rail 0, target node 1 rail 1 -- with
# NIXL's own UCX settings and peer error mode:
#   1. WRITE and READ, progress thread off and on, --check_consistency:
#      both exit 0, the relay of rail 1 on node 0 (ucx_pxn_relay) carried
#      at least every byte nixlbench moved, and the initiator loaded NIXL's
#      UCX plugin and libucp from the UCX under test (printed, from
#      LD_DEBUG=libs of the initiator, with the pxn module it loaded); the
#      protocol rows of UCP's put/get tables that name pxn/, each labelled
#      with its table;
#   2. the same transfers without pxn (UCX_TLS=tcp: the frontend, the only
#      path UCP has across rails of a rail-only fabric), bandwidth side by
#      side (with NIXL_UCX_SGL_ENABLE set, these run with it =n: UCP's tcp
#      has no SGL put, and NIXL aborts without one);
#   3. the relay SIGKILLed mid-transfer (1 MiB blocks, one per transfer):
#      with UCX_PXN_FALLBACK=n the initiator must report a failed transfer
#      (not hang); with the default fallback it must either report one or
#      finish on pxn's direct path with the data checked.
# --quick: block sizes 64 KiB to 1 MiB, 16 iterations (default 64 KiB to
# 16 MiB, 32); --blocks FIRST[,LAST]: block sizes in bytes, doubled from
# FIRST to LAST as nixlbench does; --batch N: N blocks per transfer
# (nixlbench's --start_batch_size=N --max_batch_size=N) in checks 1 and 2;
# --sgl: NIXL_UCX_SGL_ENABLE=y (NIXL posts a WRITE's blocks as one UCP SGL
# put; UCX 1.22 on), and one more check per progress thread: the WRITE's
# "from sgl host memory" table has an sgl row naming pxn/.
# --railonly: every process's UCX on its own rail NIC only, as NIXL
# deployments are told to set it (UCX_NET_DEVICES=rail<r>, UCX_TLS=pxn,tcp,
# pxn's inner transport tcp: UCX_PXN_NET_TLS=tcp UCX_PXN_HOME_DEVICE=rail<r>,
# no UCX_PXN_RAIL_MAP); the frontend carries only nixlbench's own ASIO
# exchange. pxn then carries everything UCP sends to the peer: wireup, NIXL's
# notifications (UCP active messages) and the data (READ: tcp has no get,
# so UCP emulates it with active messages, the data coming back through the
# relay of rail 0 on node 1). Check 1 then also needs every lane of the
# initiator's endpoint to the target to be pxn's, and the relay of rail 1
# on node 0 to have forwarded at least as many active messages as
# nixlbench sent notifications (one with every transfer, "0xBEEF"; the
# target waits for all of them before it exits 0); it prints both relays'
# AM counters (ucx_pxn_info). Check 2 runs the same pairs without pxn
# (UCX_TLS=tcp on the rail NIC): they cannot reach the peer, and that,
# within a bounded time, is the expected result (PASS, with the error
# seen); then, for the bandwidth table, with the frontend allowed
# (UCX_TLS=tcp UCX_NET_DEVICES=front: what UCP takes across rails when it
# may use a second network). No relay-kill runs (check 3) in this mode.
# Then NIXL's notification latency: contrib/nixl_notify_lat.py (NIXL's
# python API, send_notif ping-pong, 1000 round trips after 100) through
# pxn, with the frontend allowed, and to a peer on the same rail (UCP's
# tcp on rail 0); one-way p50/p90/p99 in us, and one more check: every
# ping and answer went through the relays (their AM counters). Skipped,
# with a line saying so, where no python3 imports NIXL's python package.
# Prints one line per check and "N passed, M failed". A pair of nixlbench
# processes whose every transfer was made and checked, but one of which
# aborted in nixlbench's final barrier (exit 134, "ASIO Read head failed: End
# of file": see shutdown_race) is reported and counted apart: "passed
# (nixlbench's shutdown race: exit 134 after verified data)"; then the last
# line reads "N passed, K passed (nixlbench's shutdown race ...), M failed".
# Exit status 0 when nothing failed. Without NIXL_PREFIX it prints one SKIP
# line and exits 0. The namespaces, the processes it started and its
# groups' registries are removed when it exits, also on failure or
# interrupt (its logs stay).
#
# Environment: NIXL_PREFIX (required; an installed NIXL: bin/nixlbench and
# libnixl.so), NIXLBENCH (default $NIXL_PREFIX/bin/nixlbench; installed
# without an rpath, it finds NIXL's libraries through LD_LIBRARY_PATH: the
# directory of libnixl.so is added, other libraries it lacks are named),
# NIXL_PLUGIN_DIR (NIXL's own variable, passed on: where NIXL loads its
# plugins from; libplugin_UCX.so is looked for there first, then under
# NIXL_PREFIX; a wheel keeps it in <pkg>.libs/nixl), NIXL_UCX (the UCX NIXL
# runs on: a UCX prefix, lib/ holding libucp and lib/ucx the pxn module, or
# a wheel's <pkg>.libs holding the renamed libucp-<suffix>-<hash>.so and
# ucx/; default: the directory where that plugin resolves libucp, or its
# parent when it is named lib or lib64), PXN_TOOLS (directory of
# ucx_pxn_relay and ucx_pxn_info; default <UCX library dir>/bin where
# wheel_install.sh puts them, else $NIXL_UCX/bin), UCX_INFO (a ucx_info of
# that UCX; default $NIXL_UCX/bin/ucx_info; a wheel has none: then pxn and
# the version are read through the UCX's own libraries with python3's
# ctypes), NIXL_CHECK_PREFIX (namespace prefix, default nixl), NIXL_PYTHON
# (--railonly's latency runs: a python3 with NIXL's python package's needs,
# numpy; default python3, else /usr/bin/python3; the package itself is
# taken from NIXL_PREFIX's site-packages). UCX_* variables of the
# environment reach every process it starts (e.g. UCX_PXN_PIECE_OPS).
# $NIXL_UCX/lib, where it exists, is put on LD_LIBRARY_PATH.
# Needs root (network namespaces). Run it under the same netns lock as the
# other namespace tests if several run on one machine
# (flock ~/.pxn-netns.lock bash contrib/nixl_check.sh ...).
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=contrib/emulation.sh
. "$top/contrib/emulation.sh" # emu_wait_listen
prog=nixl_check.sh
quick=0 kill_checks=1 baseline=1 batch=1 sgl=0 blocks='' railonly=0
usage() {
    echo "usage: [NIXL_PREFIX=...] $prog [--quick] [--no-kill] [--no-baseline] [--batch N] [--blocks FIRST[,LAST]] [--sgl] [--railonly]" >&2
    exit 2
}
while [ $# -gt 0 ]; do
    case $1 in
    --quick) quick=1 ;;
    --no-kill) kill_checks=0 ;;
    --no-baseline) baseline=0 ;;
    --batch) [ $# -ge 2 ] || usage; batch=$2; shift ;;
    --blocks) [ $# -ge 2 ] || usage; blocks=$2; shift ;;
    --sgl) sgl=1 ;;
    --railonly) railonly=1 kill_checks=0 ;;
    *) usage ;;
    esac
    shift
done
[[ $batch =~ ^[1-9][0-9]*$ ]] || usage
[ -z "$blocks" ] || [[ $blocks =~ ^[1-9][0-9]*(,[1-9][0-9]*)?$ ]] || usage

if [ -z "${NIXL_PREFIX:-}" ]; then
    echo "$prog: SKIP: NIXL_PREFIX is not set (the prefix of an installed NIXL with nixlbench)"
    exit 0
fi
die() { echo "$prog: error: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "run as root (network namespaces)"
nixlbench=${NIXLBENCH:-$NIXL_PREFIX/bin/nixlbench}
[ -x "$nixlbench" ] || die "no nixlbench at $nixlbench (set NIXLBENCH)"
[ "$sgl" = 0 ] || export NIXL_UCX_SGL_ENABLE=y

# NIXL's UCX plugin: where NIXL loads it from (NIXL_PLUGIN_DIR wins over
# NIXL's default, the plugins/ directory beside libnixl.so).
plugin=
if [ -n "${NIXL_PLUGIN_DIR:-}" ] && [ -f "$NIXL_PLUGIN_DIR/libplugin_UCX.so" ]; then
    plugin=$(readlink -f "$NIXL_PLUGIN_DIR/libplugin_UCX.so")
else
    plugin=$(find "$NIXL_PREFIX" -name 'libplugin_UCX.so' -print -quit)
    [ -z "$plugin" ] || plugin=$(readlink -f "$plugin")
fi
# ucp_of <file>: the libucp <file> resolves (libucp.so.0; a wheel's
# libucp-<suffix>-<hash>.so.0.0.0), empty if none
ucp_of() {
    ldd "$1" 2>/dev/null | awk '$1 ~ /^libucp(-[^ ]*)?\.so/ && $2 == "=>" && $3 != "not" {print $3; exit}'
}
# has_ucp <dir>: a libucp is there
has_ucp() { compgen -G "$1/libucp.so*" >/dev/null || compgen -G "$1/libucp-*.so*" >/dev/null; }

# The UCX NIXL runs on, and its library directory (libucp; modules in ucx/).
if [ -z "${NIXL_UCX:-}" ]; then
    [ -n "$plugin" ] || die "no libplugin_UCX.so in NIXL_PLUGIN_DIR nor under $NIXL_PREFIX (set NIXL_UCX)"
    ucp=$(ucp_of "$plugin")
    [ -n "$ucp" ] || die "$plugin does not resolve libucp (set NIXL_UCX)"
    ucx_libdir=$(dirname "$(readlink -f "$ucp")")
    case ${ucx_libdir##*/} in
    lib|lib64) NIXL_UCX=$(dirname "$ucx_libdir") ;;
    *) NIXL_UCX=$ucx_libdir ;; # a wheel's <pkg>.libs
    esac
elif has_ucp "$NIXL_UCX/lib"; then
    ucx_libdir=$NIXL_UCX/lib
elif has_ucp "$NIXL_UCX"; then
    ucx_libdir=$NIXL_UCX
else
    die "no libucp in $NIXL_UCX/lib nor in $NIXL_UCX (NIXL_UCX: a UCX prefix or a wheel's <pkg>.libs)"
fi
ucx_libdir=$(readlink -f "$ucx_libdir")
# nixlbench has no rpath: NIXL's libraries (<prefix>/lib/<multiarch>) and
# what they link (Abseil, when NIXL built its own) come from LD_LIBRARY_PATH.
nixl_libdir=$(find "$NIXL_PREFIX" -name libnixl.so -print -quit)
[ -n "$nixl_libdir" ] || die "no libnixl.so under $NIXL_PREFIX"
nixl_libdir=$(dirname "$nixl_libdir")
if [ -n "${PXN_TOOLS:-}" ]; then
    tools=$PXN_TOOLS
elif [ -x "$ucx_libdir/bin/ucx_pxn_relay" ]; then
    tools=$ucx_libdir/bin
else
    tools=$NIXL_UCX/bin
fi
relay_bin=$tools/ucx_pxn_relay info_bin=$tools/ucx_pxn_info
if [ ! -x "$relay_bin" ] || [ ! -x "$info_bin" ]; then
    die "no ucx_pxn_relay/ucx_pxn_info in $tools (set PXN_TOOLS)"
fi
ldpath=$nixl_libdir
[ ! -d "$NIXL_UCX/lib" ] || ldpath=$NIXL_UCX/lib:$ldpath
export LD_LIBRARY_PATH="$ldpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
missing=$(ldd "$nixlbench" 2>/dev/null | awk '$2 == "=>" && $3 == "not" {print $1}' | tr '\n' ' ')
[ -z "$missing" ] ||
    die "nixlbench does not find ${missing% }: put their directories on LD_LIBRARY_PATH (docs/nixl.md, \"What NIXL's build needs\")"
if [ -n "$plugin" ]; then
    ucp=$(ucp_of "$plugin")
    if [ -z "$ucp" ] || [ "$(dirname "$(readlink -f "$ucp")")" != "$ucx_libdir" ]; then
        die "NIXL's UCX plugin $plugin resolves libucp to ${ucp:-nothing}, not to one in $ucx_libdir (NIXL_UCX)"
    fi
fi

# pxn and the version: ucx_info of that UCX, or the UCX's own libraries
ucx_info=${UCX_INFO:-}
if [ -z "$ucx_info" ]; then
    for f in "$NIXL_UCX/bin/ucx_info.real" "$NIXL_UCX/bin/ucx_info"; do
        if [ -x "$f" ]; then ucx_info=$f; break; fi
    done
fi
if [ -n "$ucx_info" ]; then
    [ -x "$ucx_info" ] || die "UCX_INFO=$ucx_info: not executable"
    if ! UCX_PXN_ENABLE=y "$ucx_info" -d 2>/dev/null | grep -q 'Transport: pxn'; then
        die "$ucx_info -d lists no pxn transport (module not in $ucx_libdir/ucx nor UCX_PLUGIN_PATH?)"
    fi
    ucx_version=$("$ucx_info" -v | sed -n -e 's/^# Library version: //p' -e 's/^# Version //p' | head -1)
else
    lib_ucp=$(compgen -G "$ucx_libdir/libucp.so*" || compgen -G "$ucx_libdir/libucp-*.so*")
    lib_uct=$(compgen -G "$ucx_libdir/libuct.so*" || compgen -G "$ucx_libdir/libuct-*.so*")
    # libucp first (the module's version guard asks it), then UCT's
    # component list, as contrib/wheel_install.sh does
    ucx_query=$(python3 "$top/contrib/ucx_query.py" "${lib_ucp%%$'\n'*}" "${lib_uct%%$'\n'*}" 2>&1) ||
        die "could not load the UCX of $ucx_libdir with python3 (ctypes): $ucx_query"
    grep -q '^components:.* pxn\( \|$\)' <<<"$ucx_query" ||
        die "the UCX of $ucx_libdir lists no pxn component (module not in $ucx_libdir/ucx?); it said: $ucx_query"
    ucx_version=$(sed -n 's/^version: //p' <<<"$ucx_query")
fi

T=$top/contrib/topology.sh
prefix=${NIXL_CHECK_PREFIX:-nixl}

pids=()
cleanup() { # the processes this script started
    local p
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    [ ${#pids[@]} = 0 ] || sleep 0.5
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    pids=()
}
# On every exit (the end, die, a failed command, SIGINT/SIGTERM): the
# processes, then the namespaces of the prefix, then the registries of its
# groups (killed relays leave their entries, arena pages included, until a
# process of their group registers again; no process of these groups is
# left).
finish() {
    trap - EXIT INT TERM
    cleanup
    bash "$T" down --prefix "$prefix" >/dev/null 2>&1 ||
        echo "$prog: warning: contrib/topology.sh down --prefix $prefix failed" >&2
    rm -rf "/dev/shm/ucx-pxn-$(id -u)-$prefix-node0" "/dev/shm/ucx-pxn-$(id -u)-$prefix-node1"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bash "$T" up --prefix "$prefix" --nodes 2 --rails 2 >/dev/null 2>&1 ||
    die "contrib/topology.sh up --prefix $prefix failed"
log=$(mktemp -d /tmp/pxn-nixl.XXXXXX)
echo "$prog: nixlbench $nixlbench, UCX $NIXL_UCX ($ucx_version), logs in $log"
echo "  NIXL's UCX plugin ${plugin:-(not found)}, UCX libraries in $ucx_libdir, tools in $tools${NIXL_UCX_SGL_ENABLE:+, NIXL_UCX_SGL_ENABLE=$NIXL_UCX_SGL_ENABLE}"

# slot <node> <rail> cmd...: in the slot's namespace, as a process of that
# emulated node (own registry group and node id), pxn's inner transport cma
# (rails told apart by UCX_PXN_RAIL_MAP), UCP's own tcp on the frontend;
# with --railonly pxn's inner transport tcp and UCP's on the slot's rail
# NIC only (slot_devices, when set, names UCP's devices instead).
# It execs (env, topology.sh and ip exec too): call it only in the
# background, where $! is then cmd's own pid.
slot() {
    local n=$1 r=$2
    shift 2
    if [ "$railonly" = 1 ]; then
        exec env UCX_PXN_NODE_ID="node$n" UCX_PXN_GROUP="$prefix-node$n" \
            UCX_PXN_NET_TLS=tcp UCX_PXN_HOME_DEVICE="rail$r" \
            UCX_NET_DEVICES="${slot_devices:-rail$r}" \
            bash "$T" exec --prefix "$prefix" --no-env "$n" "$r" -- "$@"
    fi
    exec env UCX_PXN_NODE_ID="node$n" UCX_PXN_GROUP="$prefix-node$n" \
        UCX_PXN_NET_TLS=cma UCX_PXN_RAIL_MAP="memory:rail$r" \
        UCX_NET_DEVICES="${slot_devices:-front,memory}" \
        bash "$T" exec --prefix "$prefix" --no-env "$n" "$r" -- "$@"
}

# start_relay <node> <rail> <name>: sets relay_pid
start_relay() {
    slot "$1" "$2" "$relay_bin" > "$log/$3.log" 2>&1 &
    relay_pid=$!
    pids+=("$relay_pid")
    local i
    for i in $(seq 100); do
        grep -q 'relaying on' "$log/$3.log" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "relay $3 did not start:"; cat "$log/$3.log"
    return 1
}

# stop_relay <pid> <name>: SIGTERM (it drains and prints its counters);
# sets relayed to the bytes it carried
stop_relay() {
    kill -TERM "$1" 2>/dev/null
    { wait "$1"; } 2>/dev/null
    relayed=$(sed -n 's/.*relayed [0-9]* pieces, \([0-9]*\) bytes.*/\1/p' "$log/$2.log" | tail -1)
}

# relay_counter <group> <pid> <name>: a relay counter of a process now
# (ucx_pxn_info)
relay_counter() {
    "$info_bin" --group "$1" --json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(e["counters"]["relay"][sys.argv[2]] for r in d["registries"]
          for e in r["entries"] if e.get("pid") == int(sys.argv[1]) and e.get("read")))' "$2" "$3" 2>/dev/null ||
        echo 0
}

# relay_bytes <group> <pid>: the relay's byte counter now
relay_bytes() { relay_counter "$1" "$2" bytes; }

# sender_counter <group> <pid> <name>: a sender counter of a process
sender_counter() {
    "$info_bin" --group "$1" --json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(e["counters"]["sender"][sys.argv[2]] for r in d["registries"]
          for e in r["entries"] if e.get("pid") == int(sys.argv[1]) and e.get("read")))' "$2" "$3" 2>/dev/null ||
        echo 0
}

# nixlbench doubles the block size from the first to the last
if [ "$quick" = 1 ]; then
    first=65536 last=1048576 iters=16 warmup=4
else
    first=65536 last=16777216 iters=32 warmup=4
fi
if [ -n "$blocks" ]; then
    first=${blocks%%,*} last=${blocks#*,}
    [ "$first" -le "$last" ] || usage
fi
port=12400
# nb_args <op> <pt> <first block> <last block> <iters> <batch>: nixlbench's
# command line; its buffer holds a transfer's blocks
nb_args() {
    local buf=$((64 << 20))
    [ $(($4 * $6)) -le "$buf" ] || buf=$(($4 * $6))
    echo "$nixlbench --runtime_type=ASIO --asio_address=10.99.0.1 --asio_port=$port" \
        "--backend=UCX --op_type=$1 --enable_pt=$2 --check_consistency" \
        "--total_buffer_size=$buf --start_block_size=$3 --max_block_size=$4" \
        "--start_batch_size=$6 --max_batch_size=$6" \
        "--num_iter=$5 --warmup_iter=$warmup --large_blk_iter_ftr=1"
}

pass=0 race=0 fail=0
race_text="passed (nixlbench's shutdown race: exit 134 after verified data)"
result() { # result <PASS|RACE|FAIL> <text>
    case $1 in
    PASS) pass=$((pass + 1)); echo "PASS $2" ;;
    RACE) race=$((race + 1)); echo "PASS $2: $race_text" ;;
    *)    fail=$((fail + 1)); echo "FAIL $2" ;;
    esac
}

# wait_pid <pid> <seconds>: 0 when it exited in time (its status in $rc)
wait_pid() {
    local i
    for i in $(seq $(($2 * 10))); do
        if ! kill -0 "$1" 2>/dev/null; then
            { wait "$1"; } 2>/dev/null
            rc=$?
            return 0
        fi
        sleep 0.1
    done
    return 1
}

# env_slot <UCX_TLS> "<VAR=value ...>" <node> <rail> cmd...: slot with these
# variables added (background only, like slot)
env_slot() {
    local tls=$1 vars=$2
    shift 2
    # shellcheck disable=SC2086,SC2163 # vars holds VAR=value words
    export UCX_TLS=$tls ${vars}
    slot "$@"
}

# loaded <ld.so debug file> <regex>: the first library whose path matches,
# of those the process loaded (LD_DEBUG=libs: "calling init: <path>"),
# symbolic links resolved
loaded() {
    local f
    f=$(sed -n 's/.*calling init: //p' "$1" 2>/dev/null | grep -m1 -E "$2")
    [ -z "$f" ] || readlink -f "$f"
}

# wait_listen <port>: until the initiator (n0r0) listens on its ASIO port,
# 10 s at most: a target started before that gets "ASIO Connection failed:
# Connection refused" and the pair never starts
wait_listen() {
    emu_wait_listen "$prefix-n0r0" "$1"
}

# pair <label> <tls> <op> <pt> [env...]: initiator n0r0 (binds the ASIO
# address, rank 0), target n1r1 (connects); each given pair_wait seconds
# (default 300 and 30) to exit before it is killed. Sets init_rc, targ_rc, and
# what the initiator loaded: loaded_plugin (NIXL's UCX plugin),
# loaded_ucp (libucp), loaded_pxn (the pxn module).
pair() {
    local label=$1 tls=$2 op=$3 pt=$4
    shift 4
    port=$((port + 1))
    local args
    args=$(nb_args "$op" "$pt" "$first" "$last" "$iters" "$batch")
    # shellcheck disable=SC2086
    env_slot "$tls" "UCX_PROTO_INFO=y UCX_LOG_LEVEL=info LD_DEBUG=libs LD_DEBUG_OUTPUT=$log/$label-ld $*" \
        0 0 $args > "$log/$label-init.log" 2>&1 &
    local i=$!
    pids+=("$i")
    wait_listen "$port"
    # shellcheck disable=SC2086
    env_slot "$tls" "$*" 1 1 $args > "$log/$label-targ.log" 2>&1 &
    local t=$!
    pids+=("$t")
    init_rc=timeout targ_rc=timeout
    wait_pid "$i" "${pair_wait:-300}" && init_rc=$rc
    wait_pid "$t" "${pair_wait:-30}" && targ_rc=$rc
    kill -KILL "$i" "$t" 2>/dev/null
    { wait "$i" "$t"; } 2>/dev/null
    # (every process the initiator's command line exec'd into wrote here:
    # env, bash, ip, then nixlbench, all with its pid)
    loaded_plugin=$(loaded "$log/$label-ld.$i" '/libplugin_UCX\.so$')
    loaded_ucp=$(loaded "$log/$label-ld.$i" '/libucp(-[^/]*)?\.so[^/]*$')
    loaded_pxn=$(loaded "$log/$label-ld.$i" '/libuct_pxn[^/]*\.so[^/]*$')
}

# loaded_wrong: why the initiator's libraries are not those under test
# (empty when they are)
loaded_wrong() {
    if [ -z "$loaded_ucp" ] || [ "$(dirname "$loaded_ucp")" != "$ucx_libdir" ]; then
        echo "nixlbench loaded libucp ${loaded_ucp:-(none seen)}, not one of $ucx_libdir"
    elif [ -n "$plugin" ] && [ "$loaded_plugin" != "$plugin" ]; then
        echo "nixlbench loaded NIXL's UCX plugin ${loaded_plugin:-(none seen)}, not $plugin"
    fi
}

# bw <log>: "block GB/s" lines of nixlbench's table
bw() { awk '/^Block Size/ {t = 1; next} t && /^[0-9]+ / {print $1, $3}' "$1"; }

# rows_complete <initiator log> <first block> <last block>: the initiator
# printed its table row for every block size. It prints a block size's row
# once its transfers completed and it checked them (READ: every byte, with
# --check_consistency); it starts the next block size only after the target
# checked the previous one (WRITE) and answered.
rows_complete() {
    local b rows
    rows=$(bw "$1" | awk '{print $1}')
    for ((b = $2; b <= $3; b *= 2)); do
        grep -qx "$b" <<<"$rows" || return 1
    done
}

# shutdown_race <init rc> <targ rc> <init log> <targ log> <first> <last>:
# true for nixlbench's final-barrier race after verified data, not a
# failed transfer. In nixlbench's last barrier (ASIO runtime) each side
# sends its barrier message and returns once it has the other's; the side
# that returns first exits, and its own message may not have left, so the
# other side, still waiting, reads end of file and aborts: exit 134, "ASIO
# Read head failed: End of file". Each side reaches that barrier only after
# its last check (the target checks WRITE data, the initiator READ data;
# a failed check exits 1 first), and a side that exited 0 had the other's
# barrier message. So: one side 0, the other 134 with that message, no
# "Consistency check failed", no failed transfer, and the initiator's row
# of every block size. Anything else is a failure.
shutdown_race() {
    local irc=$1 trc=$2 ilog=$3 tlog=$4 aborted
    case "$irc/$trc" in
    0/134) aborted=$tlog ;;
    134/0) aborted=$ilog ;;
    *) return 1 ;;
    esac
    grep -q 'ASIO Read head failed: End of file' "$aborted" &&
        ! grep -q -E 'Consistency check failed|(Transfer|postSlot|prepareSlot) failed' "$ilog" "$tlog" &&
        rows_complete "$ilog" "$5" "$6"
}

# lanes_not_pxn <initiator log>: the lanes of the initiator's endpoint to
# the target (its first "inter-node cfg" line, UCX_LOG_LEVEL=info) that
# name a transport other than pxn; "(no lanes line)" if there is none
lanes_not_pxn() {
    local line
    line=$(grep -h -m1 'inter-node cfg' "$1")
    [ -n "$line" ] || { echo "(no lanes line)"; return; }
    grep -o '[a-z_]*([^)]*)' <<<"${line#*inter-node cfg}" |
        awk '{ s = $0; sub(/^[^(]*\(/, "", s); sub(/\)$/, "", s)
               n = split(s, tl, " ")
               for (i = 1; i <= n; i++) if (tl[i] !~ /^pxn\//) { print; break } }' |
        tr '\n' ' ' | sed 's/ $//'
}

expected=0 notifs=0
for ((b = first; b <= last; b *= 2)); do
    expected=$((expected + (iters + warmup) * b * batch))
    # one notification with every transfer (nixlbench's execTransfer)
    notifs=$((notifs + iters + warmup))
done

# The relay that carries the data: n0r1 (the initiator's puts and gets to
# rail 1); with --railonly a READ's data come back as active messages
# through n1r0.
if [ "$railonly" = 1 ]; then
    echo "== rail-only: every process's UCX on its own rail NIC (UCX_NET_DEVICES=rail<r>), pxn over tcp, the frontend for nixlbench's ASIO exchange only"
fi
echo "== transfers node 0 rail 0 -> node 1 rail 1 through pxn (relays n0r1, n1r0), NIXL defaults, $batch block(s) per transfer"
for op in WRITE READ; do
    for pt in 0 1; do
        label=pxn-$op-pt$pt
        start_relay 0 1 "$label-relay01" || { result FAIL "$label: relay"; continue; }
        r01=$relay_pid
        start_relay 1 0 "$label-relay10" || { result FAIL "$label: relay"; continue; }
        r10=$relay_pid
        # (bash's notices of an aborted nixlbench go to a log)
        pair "$label" pxn,tcp "$op" "$pt" 2>>"$log/shell.err"
        # the relays' active-message counters, before they stop
        am01=$(relay_counter "$prefix-node0" "$r01" am_messages)
        amb01=$(relay_counter "$prefix-node0" "$r01" am_bytes)
        am10=$(relay_counter "$prefix-node1" "$r10" am_messages)
        amb10=$(relay_counter "$prefix-node1" "$r10" am_bytes)
        stop_relay "$r01" "$label-relay01"
        b01=$relayed
        stop_relay "$r10" "$label-relay10"
        b10=$relayed
        carried=$b01 via=n0r1 other=n1r0 other_b=$b10
        if [ "$railonly" = 1 ] && [ "$op" = READ ]; then
            carried=$b10 via=n1r0 other=n0r1 other_b=$b01
        fi
        what="$op progress thread $pt: nixlbench rc $init_rc/$targ_rc, relay $via carried ${carried:-?} B of $expected B moved ($other: ${other_b:-?} B)"
        wrong=$(loaded_wrong)
        if [ -z "$wrong" ] && [ "$railonly" = 1 ]; then
            # NIXL's notifications: UCP active messages, initiator to target
            what="$what; $notifs notifications: relay n0r1 forwarded ${am01:-?} active messages (${amb01:-?} B), n1r0 ${am10:-?} (${amb10:-?} B)"
            nonpxn=$(lanes_not_pxn "$log/$label-init.log")
            if [ -n "$nonpxn" ]; then
                wrong="the initiator's endpoint has lanes other than pxn's: $nonpxn"
            elif [ "${am01:-0}" -lt "$notifs" ]; then
                wrong="relay n0r1 forwarded fewer active messages than nixlbench sent notifications"
            fi
        fi
        if [ -z "${shown_loaded:-}" ] && [ -n "$loaded_ucp" ]; then
            shown_loaded="  loaded by nixlbench (initiator of $label, LD_DEBUG=libs):
    NIXL's UCX plugin ${loaded_plugin:-(none seen)}
    libucp $loaded_ucp
    pxn module ${loaded_pxn:-(none seen)}"
        fi
        if [ -n "$wrong" ]; then
            result FAIL "$what, but $wrong (logs $log/$label-*)"
        elif [ "$init_rc" = 0 ] && [ "$targ_rc" = 0 ] && [ "${carried:-0}" -ge "$expected" ] &&
           ! grep -q 'Consistency check failed' "$log/$label-init.log" "$log/$label-targ.log"; then
            result PASS "$what, every byte checked by nixlbench"
        elif [ "${carried:-0}" -ge "$expected" ] &&
             shutdown_race "$init_rc" "$targ_rc" "$log/$label-init.log" \
                 "$log/$label-targ.log" "$first" "$last"; then
            result RACE "$what, every byte checked by nixlbench (logs $log/$label-*.log)"
        else
            result FAIL "$what (logs $log/$label-*.log)"
        fi
    done
done
# what the initiator loaded (LD_DEBUG=libs), what UCP chose (UCX_LOG_LEVEL=info,
# UCX_PROTO_INFO=y of the initiators)
echo "${shown_loaded:-  loaded by nixlbench: nothing seen (LD_DEBUG=libs of the initiators)}"
grep -h -m1 'inter-node cfg' "$log/pxn-WRITE-pt0-init.log" | sed 's/.*INFO */  UCP lanes: /'

# proto_rows <initiator log> <op>: the rows of UCP's put (WRITE) or get
# (READ) tables that name pxn/, each after its table's title
proto_rows() {
    local what='write by ucp_put'
    [ "$2" = READ ] && what='read by ucp_get'
    awk -v title="| remote memory $what" '
        { c = substr($0, index($0, "|")) }    # after the log prefix
        index(c, title) == 1 {
            t = substr(c, index(c, " by ") + 4)
            sub(/ *\|[^|]*$/, "", t)
            next
        }
        c ~ /^\| *Range/ { next }
        c ~ /^\| *[A-Za-z]/ { t = ""; next }    # the next table
        t != "" && c ~ /^\| *[0-9][^|]*\|.*[|( ]pxn\// {
            gsub(/ +/, " ", c)
            print t ": " c
        }' "$1" | sort -u
}
for op in WRITE READ; do
    proto_rows "$log/pxn-$op-pt0-init.log" "$op" | sed "s/^/  $op, /"
done
if [ "$sgl" = 1 ]; then
    for pt in 0 1; do
        rows=$(proto_rows "$log/pxn-WRITE-pt$pt-init.log" WRITE | grep -E ' from sgl [^:]*: .*\| sgl \| [^|]*pxn/' | head -1)
        if [ -n "$rows" ]; then
            result PASS "WRITE progress thread $pt, NIXL_UCX_SGL_ENABLE=y: UCP's SGL put on pxn ($rows)"
        else
            result FAIL "WRITE progress thread $pt, NIXL_UCX_SGL_ENABLE=y: no sgl row naming pxn/ in UCP's 'from sgl host memory' put table (logs $log/pxn-WRITE-pt$pt-*)"
        fi
    done
fi

if [ "$baseline" = 1 ]; then
    # UCP's tcp has no SGL put: NIXL with SGL on would abort
    base_env='' base_note='' base_devices='' base_what=''
    if [ -n "${NIXL_UCX_SGL_ENABLE:-}" ]; then
        base_env=NIXL_UCX_SGL_ENABLE=n base_note=", NIXL_UCX_SGL_ENABLE=n"
    fi
    if [ "$railonly" = 1 ]; then
        # Nothing of UCP's own reaches a rail-1 address from rail 0: the
        # pair must fail, and within unreachable_wait seconds.
        unreachable_wait=60
        echo "== the same transfers without pxn (UCX_TLS=tcp, each process's UCX on its rail NIC$base_note): expected to fail (each nixlbench given ${unreachable_wait} s)"
        for op in WRITE READ; do
            label=nopxn-$op-pt0
            t0=$SECONDS
            # shellcheck disable=SC2086
            pair_wait=$unreachable_wait pair "$label" tcp "$op" 0 $base_env 2>>"$log/shell.err"
            took=$((SECONDS - t0))
            # UCP's word and NIXL's (the initiator's: it connects)
            err=$(grep -h -m1 -E 'UCX +ERROR' "$log/$label-init.log" |
                  sed -E 's/^.*UCX +ERROR +//; s/ +$//')
            nixl_err=$(grep -h -m1 -E '^NIXL: .*NIXL_ERR' "$log/$label-init.log")
            [ -z "$nixl_err" ] || err="${err:+$err; }$nixl_err"
            what="$op without pxn: nixlbench rc $init_rc/$targ_rc within $took s"
            if [ "$init_rc" = 0 ] && [ "$targ_rc" = 0 ]; then
                result FAIL "$what: the peer was reached without pxn, so this is no rail-only setup (logs $log/$label-*.log)"
            elif [ -n "$err" ]; then
                result PASS "$what: cannot reach the peer, as expected ('$err')"
            else
                result FAIL "$what, and no error in its logs (logs $log/$label-*.log)"
            fi
        done
        base_note=", UCX_NET_DEVICES=front$base_note" base_devices=front
        base_what=", frontend allowed"
    fi
    echo "== the same transfers without pxn (UCX_TLS=tcp, frontend$base_note), bandwidth in GB/s"
    for op in WRITE READ; do
        # shellcheck disable=SC2086
        slot_devices=$base_devices pair "tcp-$op-pt0" tcp "$op" 0 $base_env 2>>"$log/shell.err"
        if [ "$init_rc" = 0 ] && [ "$targ_rc" = 0 ]; then
            result PASS "$op without pxn$base_what: nixlbench rc 0/0"
        elif shutdown_race "$init_rc" "$targ_rc" "$log/tcp-$op-pt0-init.log" \
                 "$log/tcp-$op-pt0-targ.log" "$first" "$last"; then
            result RACE "$op without pxn$base_what: nixlbench rc $init_rc/$targ_rc (logs $log/tcp-$op-pt0-*.log)"
        else
            result FAIL "$op without pxn$base_what: nixlbench rc $init_rc/$targ_rc (logs $log/tcp-$op-pt0-*.log)"
        fi
        printf '  %-9s %10s %10s %7s\n' "$op" "pxn" "tcp" "ratio"
        join <(bw "$log/pxn-$op-pt0-init.log") <(bw "$log/tcp-$op-pt0-init.log") |
            awk '{printf "  %9d %10.3f %10.3f %6.1fx\n", $1, $2, $3, ($3 > 0) ? $2 / $3 : 0}'
    done
fi

# NIXL's notification latency (--railonly): contrib/nixl_notify_lat.py, a
# ping-pong of NIXL's standalone notifications (send_notif / genNotif)
# through NIXL's python API, initiator node 0 rail 0. Needs a python3 that
# imports NIXL's python package (NIXL_PYTHON, else python3 or
# /usr/bin/python3; the package from NIXL_PREFIX's site-packages).
lat_iters=1000 lat_warmup=100
nixl_python='' nixl_pypath=''
find_nixl_python() {
    local api py
    api=$(find "$NIXL_PREFIX" -path '*/site-packages/nixl*/_api.py' -print -quit)
    [ -z "$api" ] || nixl_pypath=$(dirname "$(dirname "$api")")
    for py in ${NIXL_PYTHON:-python3 /usr/bin/python3}; do
        if PYTHONPATH="$nixl_pypath${PYTHONPATH:+:$PYTHONPATH}" "$py" -c \
               'try:
    import nixl._api
except ImportError:
    import nixl_cu12._api' >/dev/null 2>&1; then
            nixl_python=$py
            return 0
        fi
    done
    return 1
}

# notify_lat <label> <tls> <target node> <target rail>: one ping-pong run
# (slot_devices as for pair); sets lat to "p50 p90 p99" one-way in us, or
# to nothing when it failed
notify_lat() {
    local label=$1 tls=$2 tn=$3 tr=$4 i t
    port=$((port + 1))
    local lat_py="$nixl_python $top/contrib/nixl_notify_lat.py --port $port --iters $lat_iters --warmup $lat_warmup"
    # shellcheck disable=SC2086
    env_slot "$tls" "PYTHONPATH=$nixl_pypath${PYTHONPATH:+:$PYTHONPATH}" "$tn" "$tr" \
        $lat_py --target > "$log/$label-targ.log" 2>&1 &
    t=$!
    pids+=("$t")
    emu_wait_listen "$prefix-n${tn}r$tr" "$port" || true
    # shellcheck disable=SC2086
    env_slot "$tls" "PYTHONPATH=$nixl_pypath${PYTHONPATH:+:$PYTHONPATH}" 0 0 \
        $lat_py --initiator "10.99.$tn.$((tr + 1))" > "$log/$label-init.log" 2>&1 &
    i=$!
    pids+=("$i")
    local irc=timeout trc=timeout
    wait_pid "$i" 90 && irc=$rc
    wait_pid "$t" 10 && trc=$rc
    kill -KILL "$i" "$t" 2>/dev/null
    { wait "$i" "$t"; } 2>/dev/null
    lat=
    if [ "$irc" = 0 ] && [ "$trc" = 0 ]; then
        lat=$(sed -n 's/^nixl_notify_lat: iters=.* p50=\([^ ]*\) p90=\([^ ]*\) p99=\([^ ]*\) .*/\1 \2 \3/p' "$log/$label-init.log")
    fi
}

if [ "$railonly" = 1 ]; then
    if ! find_nixl_python; then
        echo "== NIXL's notification latency: SKIP: no python3 imports NIXL's python package (set NIXL_PYTHON; NIXL's python API needs numpy)"
    else
        echo "== NIXL's notification latency: $lat_iters round trips of send_notif (after $lat_warmup), one-way (round trip / 2) in us"
        printf '  %-44s %9s %9s %9s\n' "path" p50 p90 p99
        lat_row() { # <what> <result of notify_lat>
            if [ -n "$2" ]; then
                # shellcheck disable=SC2086
                printf '  %-44s %9s %9s %9s\n' "$1" $2
            else
                printf '  %-44s %s\n' "$1" "failed"
            fi
        }
        if ! start_relay 0 1 lat-relay01; then
            result FAIL "NIXL notifications through pxn: relay"
        elif r01=$relay_pid && ! start_relay 1 0 lat-relay10; then
            result FAIL "NIXL notifications through pxn: relay"
        else
            r10=$relay_pid
            notify_lat lat-pxn pxn,tcp 1 1
            pxn_lat=$lat
            am01=$(relay_counter "$prefix-node0" "$r01" am_messages)
            am10=$(relay_counter "$prefix-node1" "$r10" am_messages)
            stop_relay "$r01" lat-relay01
            stop_relay "$r10" lat-relay10
            lat_row "through pxn (n0r0 -> n1r1, rail NICs only)" "$pxn_lat"
            pings=$((lat_iters + lat_warmup))
            what="NIXL notifications through pxn: $pings pings and $pings answers; relay n0r1 forwarded ${am01:-?} active messages, n1r0 ${am10:-?}"
            if [ -n "$pxn_lat" ] && [ "${am01:-0}" -ge "$pings" ] && [ "${am10:-0}" -ge "$pings" ]; then
                result PASS "$what"
            else
                result FAIL "$what (logs $log/lat-*)"
            fi
        fi
        slot_devices=front notify_lat lat-front tcp 1 1
        lat_row "frontend (UCX_TLS=tcp UCX_NET_DEVICES=front)" "$lat"
        notify_lat lat-same pxn,tcp 1 0
        lat_row "same rail (n0r0 -> n1r0, UCP's tcp on rail 0)" "$lat"
    fi
fi

# kill_case <label> <op> <pt> <fallback y|n>: SIGKILL the relay n0r1 once it
# has carried 64 MiB of a long run of 1 MiB transfers.
kill_case() {
    local label=$1 op=$2 pt=$3 fb=$4
    port=$((port + 1))
    start_relay 0 1 "$label-relay01" || { result FAIL "$label: relay"; return; }
    local r01=$relay_pid
    start_relay 1 0 "$label-relay10" || { result FAIL "$label: relay"; return; }
    local r10=$relay_pid
    local n=100000
    [ "$fb" = y ] && n=400 # finishes on the direct path in the emulation
    local args
    args=$(nb_args "$op" "$pt" 1048576 1048576 "$n" 1)
    # shellcheck disable=SC2086
    env_slot pxn,tcp "UCX_PXN_FALLBACK=$fb" 0 0 $args > "$log/$label-init.log" 2>&1 &
    local i=$!
    pids+=("$i")
    wait_listen "$port"
    # shellcheck disable=SC2086
    env_slot pxn,tcp "UCX_PXN_FALLBACK=$fb" 1 1 $args > "$log/$label-targ.log" 2>&1 &
    local t=$!
    pids+=("$t")
    local b=0
    for _ in $(seq 300); do
        b=$(relay_bytes "$prefix-node0" "$r01")
        [ "${b:-0}" -ge $((64 << 20)) ] && break
        kill -0 "$i" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$r01" 2>/dev/null
    { wait "$r01"; } 2>/dev/null
    local t0=$SECONDS bound=30 fallback=0 f
    [ "$fb" = y ] && bound=120
    rc=timeout
    # the initiator's sender counters while it runs: did pxn fall back?
    while [ $((SECONDS - t0)) -lt "$bound" ]; do
        if wait_pid "$i" 1; then break; fi
        f=$(sender_counter "$prefix-node0" "$i" fallback_ops)
        [ "${f:-0}" -gt "$fallback" ] && fallback=$f
    done
    local took=$((SECONDS - t0))
    local failed_line
    failed_line=$(grep -h -m1 -E '(Transfer|postSlot|prepareSlot) failed' "$log/$label-init.log")
    local what="$op progress thread $pt, UCX_PXN_FALLBACK=$fb, relay killed after ${b:-0} B"
    local init_rc=$rc targ_rc=timeout
    local finished="transfers finished on pxn's direct path (cma reaches every emulated node; fallback_ops seen: $fallback) within ${took} s, data checked"
    [ "$fb" = y ] && [ "$init_rc" != timeout ] && [ -z "$failed_line" ] &&
        wait_pid "$t" 30 && targ_rc=$rc
    if [ "$init_rc" = timeout ]; then
        result FAIL "$what: initiator still running ${bound} s later (logs $log/$label-*.log)"
    elif [ "$init_rc" != 0 ] && [ -n "$failed_line" ]; then
        result PASS "$what: initiator reported '$failed_line' within ${took} s"
    elif [ "$fb" = y ] && [ "$init_rc" = 0 ] && [ "$targ_rc" = 0 ] &&
         ! grep -q 'Consistency check failed' "$log/$label-init.log" "$log/$label-targ.log"; then
        result PASS "$what: $finished"
    elif [ "$fb" = y ] &&
         shutdown_race "$init_rc" "$targ_rc" "$log/$label-init.log" "$log/$label-targ.log" \
             1048576 1048576; then
        result RACE "$what: nixlbench rc $init_rc/$targ_rc, $finished (logs $log/$label-*.log)"
    else
        result FAIL "$what: initiator rc $init_rc without a reported transfer failure (logs $log/$label-*.log)"
    fi
    # nixlbench's target waits for notifications that will not come: its
    # own behaviour, not pxn's.
    kill -TERM "$t" 2>/dev/null
    wait_pid "$t" 5 || { kill -KILL "$t" 2>/dev/null; { wait "$t"; } 2>/dev/null; }
    stop_relay "$r10" "$label-relay10"
}

if [ "$kill_checks" = 1 ]; then
    echo "== relay n0r1 killed mid-transfer"
    # (bash's notices of nixlbench targets aborting go to a log)
    {
        for op in WRITE READ; do
            for pt in 0 1; do
                kill_case "kill-$op-pt$pt-nofb" "$op" "$pt" n
            done
        done
        kill_case "kill-WRITE-pt0-fb" WRITE 0 y
        kill_case "kill-READ-pt1-fb" READ 1 y
    } 2>>"$log/shell.err"
fi

if [ "$race" = 0 ]; then
    echo "$pass passed, $fail failed"
else
    echo "$pass passed, $race $race_text, $fail failed"
fi
[ "$fail" = 0 ]
