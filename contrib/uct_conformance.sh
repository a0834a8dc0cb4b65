#!/usr/bin/env bash
# UCX's own UCT test suite (test/gtest/uct of a UCX 1.22 source tree) run
# against the pxn transport, test by test, with a watchdog.
#
#   bash contrib/uct_conformance.sh --ucx-src <src> --ucx <install> [options]
#
#   --ucx-src DIR   a UCX 1.22 source tree configured in place with
#                   --enable-gtest and built (src/ and tools; the gtest
#                   program itself need not be built)
#   --ucx DIR       the UCX install pxn was built against and installed into
#                   (DIR/lib/ucx/libuct_pxn.so.0; contrib/ucx_copy.sh +
#                   contrib/build.sh, docs/versions.md "Commands")
#   --relay PATH    ucx_pxn_relay (default: DIR/bin/ucx_pxn_relay)
#   --out DIR       results and logs (default: ./uct-conformance)
#   --modes LIST    comma list of tworails,onerail,loopback (default: all)
#   --inner LIST    comma list of inner transports: cma,tcp (default: both)
#   --filter PAT    gtest filter within the pxn tests (default: 'pxn/*')
#   --timeout S     watchdog per test in seconds (default: 60)
#   --jobs N        make -j for the test program (default: nproc)
#   --build-only    prepare and build the test program, run nothing
#   --no-build      run the program built before
#
# What it does:
#  1. Copies <src>/test/gtest to <src>/test/gtest-pxn (a sibling, so the
#     configured Makefile's relative paths hold) and patches the copy, never
#     UCX's own tests: contrib/uct_conformance/pxn_hook.h is appended to
#     uct/uct_test.h (pxn added to UCT_INSTANTIATE_TEST_CASE, its NO_SELF and
#     NO_GPU variants; the second-rail hook's declaration), uct_test.cc's
#     entity constructor opens its md through the hook (contrib/uct_conformance/pxn_hook.cc,
#     appended to uct_test.cc), test_md.cc's md list gets `pxn`, and
#     test_uct_peer_failure_rma_zcopy (UCX: cma only) is instantiated for pxn.
#     Builds `gtest` there from UCX's common/ and uct/ test sources only
#     (not ib/, cuda/, sm/, tcp/, ucs/, ucp/, ucm/).
#  2. Lists the pxn tests (`--gtest_list_tests`) and keeps the instances on
#     the home device of entity A (cma: memory; tcp: rail0).
#  3. Per inner transport (UCX_PXN_NET_TLS) and mode, runs every test in a
#     process of its own, for at most --timeout seconds:
#       tworails  entity A (node n0, rail0) and entity B (node n1, rail1):
#                 the first entity of a test is A, every later one opens
#                 its md with B's UCX_PXN_NODE_ID/GROUP/RAIL_MAP/HOME_DEVICE
#                 (pxn_hook.cc; PXN_CONFORMANCE_B=odd: entities 1, 3, ...);
#                 relays: node n0 rail1 in A's group, node n1 rail0 in B's
#                 group (ucx_pxn_relay): A -> B and B -> A go through a relay.
#                 The non-loopback instances.
#       onerail   every entity is A (same node, same rail; the suite's
#                 default): pxn must use a direct path or report
#                 unreachable, never hang. The non-loopback instances.
#       loopback  the `/loopback` instances of the p2p tests (an ep to its
#                 own iface), entity A, relays up.
#     Inner cma: device `memory`, rails from UCX_PXN_RAIL_MAP. Inner tcp:
#     everything runs in a network namespace of its own with lo and two
#     interfaces rail0 (10.100.0.1/16) and rail1 (10.101.1.1/16) (the
#     two ends of one veth pair), UCX_PXN_HOME_DEVICE=rail0/rail1.
#  4. Classifies each test: passed, failed (assertion text kept), crashed
#     (a signal: run again under gdb for a backtrace), timeout (gdb stacks of
#     all threads, then SIGKILL), skipped (UCX's reason kept), and prints per
#     inner transport and mode the counts and the names of the tests that
#     did not pass.
#
# Output under --out: results-<inner>-<mode>.tsv (test, status, detail),
# summary-<inners>.txt, logs/<inner>/<mode>/<test>.log (+ .gdb: backtraces),
# logs/<inner>/relay-*.log. Needs root (network namespaces, gdb attach).
# Relays and the namespace are removed on exit (trap), also on Ctrl-C.
#
# Example (UCX 1.22.0 from its tag, pxn built into a copy of its install,
# docs/versions.md "Commands"):
#   ./autogen.sh && ./configure --prefix=<ucx> --enable-mt --enable-cma \
#       --enable-devel-headers --without-java --without-go \
#       --disable-doxygen-doc --enable-gtest --without-cuda   # in <src>
#   for d in src/ucm src/ucs src/uct src/ucp src/tools/info src/tools/perf; do
#       make -C <src>/$d install; done  # (a top-level make would also build
#   make -C <src> install-am            #  UCX's whole gtest: not needed)
#   bash contrib/ucx_copy.sh <ucx> <copy>
#   PXN_BUILD_DIR=<build> PXN_CONFIGURE_FLAGS="--with-cuda=no --with-ucx=<copy> \
#       --with-ucx-src=<src> --with-ucx-build=<src> --with-stock-ucx=<ucx>/lib" \
#       bash contrib/build.sh
#   bash contrib/uct_conformance.sh --ucx-src <src> --ucx <copy> --out <dir>
#
# Environment: extra UCX_* variables are passed on to the tests (e.g.
# UCX_LOG_LEVEL=debug); PXN_CONFORMANCE_VERBOSE=1 makes the hook say which
# entity opens which md.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
hook=$top/contrib/uct_conformance/pxn_hook.h
hook_cc=$top/contrib/uct_conformance/pxn_hook.cc

src='' ucx='' relay='' out=$PWD/uct-conformance
modes=tworails,onerail,loopback inners=cma,tcp filter='pxn/*' timeout=60
jobs=$(nproc) build=1 run=1

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit "${1:-0}"; }
die() { echo "uct_conformance: error: $*" >&2; exit 1; }
say() { echo "[uct-conformance] $*" >&2; }

while [ $# -gt 0 ]; do
    case $1 in
    --ucx-src) src=$2; shift 2 ;;
    --ucx) ucx=$2; shift 2 ;;
    --relay) relay=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --inner) inners=$2; shift 2 ;;
    --filter) filter=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --build-only) run=0; shift ;;
    --no-build) build=0; shift ;;
    -h|--help) usage 0 ;;
    *) echo "unknown argument: $1" >&2; usage 1 >&2 ;;
    esac
done
[ -n "$src" ] || die "--ucx-src is required"
src=$(cd "$src" && pwd)
[ -f "$src/test/gtest/Makefile" ] ||
    die "$src/test/gtest/Makefile missing: configure UCX in place with --enable-gtest"
[ -f "$src/config.h" ] || die "$src is not a configured UCX tree (no config.h)"
[ -f "$hook" ] && [ -f "$hook_cc" ] || die "$hook or $hook_cc missing"
gdir=$src/test/gtest-pxn
bin=$gdir/gtest

# ------------------------------------------------------------ the program --
prepare() {
    local stamp_text
    stamp_text="hook=$(cat "$hook" "$hook_cc" | md5sum | cut -c1-32) script=4"
    if [ -f "$gdir/.pxn-conformance" ] &&
       [ "$(cat "$gdir/.pxn-conformance")" = "$stamp_text" ] &&
       [ ! "$src/test/gtest/uct/uct_test.h" -nt "$gdir/.pxn-conformance" ]; then
        return 0
    fi
    say "copying $src/test/gtest to $gdir and patching the copy"
    rm -rf "$gdir"
    cp -a "$src/test/gtest" "$gdir"
    find "$gdir" \( -name '*.o' -o -name '*.lo' -o -name '*.la' -o -name '*.a' \) -delete
    find "$gdir" -name .libs -type d -prune -exec rm -rf {} +
    rm -f "$gdir/gtest"
    # the copy's own headers and sources, not the original's
    sed -i 's#test/gtest\([^-A-Za-z0-9_]\|$\)#test/gtest-pxn\1#g' "$gdir/Makefile"
    grep -rlE --include='*.cc' --include='*.h' '<gtest/(uct|common)/' \
        "$gdir/uct" "$gdir/common" | grep -v /googletest/ |
        xargs -r sed -i 's#<gtest/\(uct\|common\)/#<gtest-pxn/\1/#'
    # 1. pxn instantiations and the hook
    grep -q 'PXN_CONFORMANCE_HOOK_H' "$gdir/uct/uct_test.h" ||
        cat "$hook" >> "$gdir/uct/uct_test.h"
    # 2. the entity's md through the hook (the constructor of device entities)
    sed -i 's/resource\.md_name\.c_str(), md_config);/resource.md_name.c_str(), pxn_conformance::md_config(resource, md_config));/' \
        "$gdir/uct/uct_test.cc"
    cat "$hook_cc" >> "$gdir/uct/uct_test.cc"
    [ "$(grep -c 'pxn_conformance::md_config' "$gdir/uct/uct_test.cc")" = 1 ] ||
        die "could not patch uct_test.cc's entity constructor (UCX version?)"
    # 3. test_md for the pxn component
    sed -i 's/^\([[:space:]]*\)knem, \\$/\1knem, \\\n\1pxn, \\/' "$gdir/uct/test_md.cc"
    grep -q '^[[:space:]]*pxn, \\$' "$gdir/uct/test_md.cc" ||
        die "could not add pxn to test_md.cc's md list (UCX version?)"
    # 4. the RMA peer-failure test (instantiated for cma only) for pxn too
    grep -q '^_UCT_INSTANTIATE_TEST_CASE(test_uct_peer_failure_rma_zcopy, cma)' \
        "$gdir/uct/test_peer_failure.cc" ||
        die "test_peer_failure.cc has no test_uct_peer_failure_rma_zcopy (UCX version?)"
    echo '_UCT_INSTANTIATE_TEST_CASE(test_uct_peer_failure_rma_zcopy, pxn)' \
        >> "$gdir/uct/test_peer_failure.cc"
    echo "$stamp_text" > "$gdir/.pxn-conformance"
}

build_program() {
    say "building $bin (make -j$jobs; the UCT tests only)"
    make -C "$gdir/common/googletest" -j"$jobs" > "$gdir/build-googletest.log" 2>&1 ||
        { tail -30 "$gdir/build-googletest.log"; die "googletest build failed"; }
    local objs
    objs=$(make -C "$gdir" -s -f Makefile -f <(printf 'pxn-print-objs:\n\t@echo $(am_gtest_OBJECTS)\n') pxn-print-objs |
           tr ' ' '\n' |
           grep -E '^(common|uct)/' |
           grep -vE '^uct/(ib|cuda|sm|tcp)/|test_(sockaddr|tag|mm|atomic_key_reg_rdma_mem_type|device)\.' |
           tr '\n' ' ')
    [ -n "$objs" ] || die "no test objects found in $gdir/Makefile"
    make -C "$gdir" -j"$jobs" gtest gtest_OBJECTS="$objs" > "$gdir/build-gtest.log" 2>&1 ||
        { grep -E 'error|Error' "$gdir/build-gtest.log" | head -30; die "gtest build failed ($gdir/build-gtest.log)"; }
}

if [ "$build" = 1 ]; then
    prepare
    build_program
fi
[ -x "$bin" ] || die "$bin not built"
[ "$run" = 1 ] || { say "built $bin"; exit 0; }

# ------------------------------------------------------------ the runs -----
[ "$(id -u)" = 0 ] || die "run as root (network namespaces, gdb attach)"
[ -n "$ucx" ] || die "--ucx is required"
ucx=$(cd "$ucx" && pwd)
module=$ucx/lib/ucx/libuct_pxn.so.0
[ -f "$module" ] || die "$module missing: build and install pxn into $ucx"
relay=${relay:-$ucx/bin/ucx_pxn_relay}
[ -x "$relay" ] || die "relay program $relay missing (--relay)"
command -v gdb >/dev/null || die "gdb missing (apt-get install gdb)"
mkdir -p "$out/logs" "$out/plugins"
out=$(cd "$out" && pwd)
# only pxn from the plugin path: UCX's own modules from its tree
ln -sf "$module" "$out/plugins/libuct_pxn.so.0"

tag="uctc$$"
ns=""
nsx=()          # the command prefix that runs in the namespace (tcp)
relay_pids=()
cleanup() {
    local p
    if [ -n "${cur_pid:-}" ]; then
        kill -KILL "$cur_pid" 2>/dev/null || true
        wait "$cur_pid" 2>/dev/null || true
        cur_pid=""
    fi
    for p in "${relay_pids[@]}"; do
        [ -n "$p" ] && kill -TERM "$p" 2>/dev/null || true
    done
    for p in "${relay_pids[@]}"; do
        [ -n "$p" ] && wait "$p" 2>/dev/null || true
    done
    relay_pids=()
    if [ -n "$ns" ]; then
        ip netns del "$ns" 2>/dev/null || true
        ns=""
        nsx=()
    fi
    rm -rf /dev/shm/ucx-pxn-"$(id -u)"-"$tag"-* 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

setup_ns() {
    ns="$tag-tcp"
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    # Both rail addresses are local here, so their traffic goes over lo;
    # at lo's MTU (65536) a receive window of a few KiB (many small
    # messages) stalls a connection for a persist timeout (~200 ms) per
    # window: give lo a NIC's MTU.
    ip -n "$ns" link set lo mtu 1500
    # one veth pair: both ends have a carrier (no dummy module needed)
    ip -n "$ns" link add rail0 type veth peer name rail1
    ip -n "$ns" addr add 10.100.0.1/16 dev rail0
    ip -n "$ns" addr add 10.101.1.1/16 dev rail1
    ip -n "$ns" link set rail0 up
    ip -n "$ns" link set rail1 up
    nsx=(ip netns exec "$ns")
}

# env_of <node> <rail>: the UCX_PXN_* settings of that slot (same names for
# every slot, so that the hook can switch between them)
env_of() {
    local n=$1 r=$2
    case $inner in
    cma) echo "UCX_PXN_NODE_ID=n$n UCX_PXN_GROUP=$tag-$inner-n$n UCX_PXN_RAIL_MAP=memory:rail$r" ;;
    tcp) echo "UCX_PXN_NODE_ID=n$n UCX_PXN_GROUP=$tag-$inner-n$n UCX_PXN_HOME_DEVICE=rail$r" ;;
    esac
}

common_env() {
    echo "UCX_PXN_ENABLE=y UCX_PXN_NET_TLS=$inner UCX_PLUGIN_PATH=$out/plugins"\
         "UCX_WARN_UNUSED_ENV_VARS=n"
}

start_relay() { # <node> <rail>
    local log=$out/logs/$inner/relay-n$1r$2.log
    # env and ip netns exec exec: $! is the relay
    # shellcheck disable=SC2046
    "${nsx[@]}" env $(common_env) $(env_of "$1" "$2") "$relay" -m "pxn_$inner" \
        >> "$log" 2>&1 &
    relay_pids+=($!)
}

relays_up() {
    local i reg
    reg=/dev/shm/ucx-pxn-$(id -u)-$tag-$inner
    for i in $(seq 50); do
        compgen -G "$reg-n0/*.ctl" > /dev/null && compgen -G "$reg-n1/*.ctl" > /dev/null &&
            return 0
        sleep 0.2
    done
    return 1
}

start_relays() {
    start_relay 0 1  # A's group: serves rail1 on node n0 (A -> B)
    start_relay 1 0  # B's group: serves rail0 on node n1 (B -> A)
    relays_up || { cat "$out/logs/$inner"/relay-*.log >&2; die "relays did not start"; }
}

check_relays() {
    local p dead=0
    for p in "${relay_pids[@]}"; do
        kill -0 "$p" 2>/dev/null || dead=1
    done
    if [ "$dead" = 1 ]; then
        echo "relay died before $1: restarting" >> "$out/logs/$inner/relays-restarted.log"
        for p in "${relay_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
        for p in "${relay_pids[@]}"; do wait "$p" 2>/dev/null || true; done
        relay_pids=()
        start_relays
    fi
}

# the registry entries (control file, arena, wakeup FIFO) of processes that
# are gone: a test killed by the watchdog or a signal leaves its own behind,
# and each holds a populated host arena in /dev/shm
reap_stale() {
    local f pid n=0
    for f in /dev/shm/ucx-pxn-"$(id -u)"-"$tag"-*/p*-*; do
        [ -e "$f" ] || continue
        pid=${f##*/p}
        pid=${pid%%-*}
        if ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$f"
            n=$((n + 1))
        fi
    done
    [ "$n" = 0 ] || echo "$1: removed $n registry files of dead processes" >> "$out/logs/$inner/stale-entries.log"
}

# the test environment of a mode
test_env() {
    local a b
    a=$(env_of 0 0)
    b=$(env_of 1 1)
    echo "$(common_env) UCX_HANDLE_ERRORS=${UCX_HANDLE_ERRORS:-bt} $a"
    if [ "$mode" = tworails ]; then
        echo "PXN_CONFORMANCE_ENV_A=${a// /;} PXN_CONFORMANCE_ENV_B=${b// /;}"
    fi
}

# prints "suite.name<TAB>param" for every pxn test
list_tests() {
    # shellcheck disable=SC2046
    "${nsx[@]}" env $(test_env) "$bin" --gtest_list_tests --gtest_filter="$filter" 2>/dev/null |
        awk '/^[^ ]/ { suite = $1; next }
             /^  / { name = $1; param = ""; if (index($0, "GetParam() = ")) { param = substr($0, index($0, "GetParam() = ") + 13) }
                     print suite name "\t" param }'
}

# keeps the instances of this mode: on A's home device, loopback or not
select_tests() {
    local dev
    case $inner in cma) dev=memory ;; tcp) dev=rail0 ;; esac
    awk -F'\t' -v dev="$dev" -v mode="$mode" '
        { n = split($2, p, "/"); loop = (p[n] == "loopback")
          if (n >= 2 && p[2] != dev) next        # <tl>/<device>[/loopback]
          if (mode == "loopback" && !loop) next
          if (mode != "loopback" && loop) next
          print $1 }'
}

gdb_stacks() { # <pid> <file>
    timeout 60 gdb -p "$1" -batch -nx -ex "set pagination off" \
        -ex "thread 1" -ex bt -ex "info threads" -ex "thread apply all bt" < /dev/null > "$2" 2>&1 || true
}

# run_one <test>: sets res (status) and res_detail; runs in this shell (not
# in a subshell), so that a signal stops the harness within 0.2 s
cur_pid=""
run_one() {
    local t=$1 name log elapsed=0 rc
    name=$(echo "$t" | tr '/' '_')
    log=$logdir/$name.log
    res_detail=""
    # shellcheck disable=SC2046
    # line-buffered: what a test printed before the watchdog killed it stays
    "${nsx[@]}" env $(test_env) stdbuf -oL -eL "$bin" --gtest_filter="$t" > "$log" 2>&1 &
    cur_pid=$!
    while kill -0 "$cur_pid" 2>/dev/null; do
        if [ "$elapsed" -ge $((timeout * 5)) ]; then
            gdb_stacks "$cur_pid" "$log.gdb"
            kill -KILL "$cur_pid" 2>/dev/null || true
            wait "$cur_pid" 2>/dev/null || true
            cur_pid=""
            res=timeout
            res_detail="after ${timeout}s, stacks in $log.gdb"
            return 0
        fi
        sleep 0.2
        elapsed=$((elapsed + 1))
    done
    rc=0
    wait "$cur_pid" || rc=$?
    cur_pid=""
    if [ "$rc" -ge 128 ] || grep -q 'Caught signal' "$log"; then
        res=crashed
        res_detail=$(grep -m1 -E 'Caught signal|Assertion|Fatal:' "$log" || echo "exit status $rc")
        # again under gdb, for a backtrace with line numbers
        # shellcheck disable=SC2046
        "${nsx[@]}" env $(test_env) UCX_HANDLE_ERRORS=none timeout $((timeout * 2)) gdb -batch -nx \
            -ex "set pagination off" -ex run -ex bt -ex "info threads" \
            -ex "thread apply all bt" --args "$bin" --gtest_filter="$t" < /dev/null \
            > "$log.gdb" 2>&1 || true
        res_detail="$res_detail (backtrace: $log.gdb)"
        return 0
    fi
    if grep -q '^\[  FAILED  \]' "$log"; then
        res=failed
        res_detail=$(grep -m3 -E 'Failure|Expected|Which is|Value of|error|ERROR|Got [0-9]+ errors' "$log" |
                     tr '\n\t' '  ' | cut -c1-400)
        return 0
    fi
    if [ "$rc" = 0 ] && grep -q '^\[  PASSED  \] 1 test' "$log"; then
        # UCX's skips in a test body print "[     SKIP ] (reason)" and pass
        if grep -qE '^\[ *SKIP *\]|^\[  SKIPPED \] 1 test' "$log"; then
            res=skipped
            res_detail=$(grep -m1 -E '^\[ *SKIP *\]' "$log" | sed 's/^\[ *SKIP *\] *//')
        else
            res=passed
        fi
        return 0
    fi
    if grep -q '^\[==========\] 0 tests' "$log"; then
        res=error
        res_detail="no test matched the filter"
        return 0
    fi
    res=failed
    res_detail="exit status $rc: $(tail -2 "$log" | tr '\n\t' '  ' | cut -c1-300)"
}

summary=$out/summary-${inners//,/-}.txt
: > "$summary"
IFS=, read -r -a inner_list <<< "$inners"
IFS=, read -r -a mode_list <<< "$modes"
for inner in "${inner_list[@]}"; do
    case $inner in cma|tcp) ;; *) die "inner transport $inner: cma or tcp" ;; esac
    mkdir -p "$out/logs/$inner"
    [ "$inner" = tcp ] && setup_ns
    start_relays
    for mode in "${mode_list[@]}"; do
        case $mode in tworails|onerail|loopback) ;; *) die "mode $mode?" ;; esac
        logdir=$out/logs/$inner/$mode
        mkdir -p "$logdir"
        list_tests > "$logdir/all-tests.txt"
        select_tests < "$logdir/all-tests.txt" > "$logdir/tests.txt"
        total=$(wc -l < "$logdir/tests.txt")
        say "$inner/$mode: $total tests (of $(wc -l < "$logdir/all-tests.txt") listed)"
        results=$out/results-$inner-$mode.tsv
        : > "$results"
        i=0
        while read -r t; do
            i=$((i + 1))
            check_relays "$t"
            run_one "$t"
            printf '%s\t%s\t%s\n' "$t" "$res" "$res_detail" >> "$results"
            reap_stale "$t"
            say "$inner/$mode [$i/$total] $t: $res"
        done < "$logdir/tests.txt"
        {
            printf '%s/%s: ' "$inner" "$mode"
            for s in passed failed crashed timeout skipped error; do
                printf '%s %s  ' "$s" "$(awk -F'\t' -v s="$s" '$2 == s' "$results" | wc -l)"
            done
            echo
            awk -F'\t' '$2 != "passed" && $2 != "skipped" { print "    " $2 ": " $1 }' "$results"
        } >> "$summary"
    done
    cleanup
done
cat "$summary"
