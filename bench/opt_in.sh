#!/usr/bin/env bash
# What pxn costs a UCP process that did not ask for it, in three
# configurations of the same UCX install:
#
#   not loaded   UCX_MODULES=^pxn: the module is never dlopen()ed (baseline)
#   not asked    the default: pxn installed, UCX_TLS unset (pxn inactive)
#   asked        UCX_TLS=pxn,tcp,self: pxn active (its thread and registry)
#
# For test/apps/ucp_idle (a UCP context with RMA and TAG, one worker, exit):
# context + worker creation time, process wall time, threads, pxn threads;
# for `ucx_info -e -u t -w` of the UCX the build uses: process wall time;
# for a `ucx_perftest` pair on loopback (server, then, 0.3 s after it
# listens, a client running tag_lat for 100 iterations, each on a core of
# its own): the client's wall time, connection included. All: registry files left after the processes exited (not
# counting the registry directory's empty .lock, which stays for the next
# process).
# Medians of RUNS fresh processes per configuration, the configurations
# interleaved and their order rotated (no order bias), and each one's ratio
# to the baseline. PXN_OPT_IN_AA=1 runs "not loaded" in the place of "not
# asked" too: the ratio between two identical configurations, this
# machine's noise floor.
#
#   bash bench/opt_in.sh [RUNS]      (default 21; any user, no root needed)
#
# Builds nothing: run contrib/build.sh first.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PXN_BUILD_DIR:-$top/build}
app=$build/test/apps/ucp_idle
ucx_bin=$(sed -n 's/^UCX_PREFIX = //p' "$build/Makefile" 2>/dev/null)/bin
ucx_info=$ucx_bin/ucx_info
perftest=$ucx_bin/ucx_perftest
runs=${1:-21}
[ -x "$app" ] && [ -x "$ucx_info" ] && [ -x "$perftest" ] ||
    { echo "opt_in: $app, $ucx_info or $perftest missing (run contrib/build.sh)" >&2; exit 2; }

registry=$(mktemp -d /dev/shm/pxn-opt-in.XXXXXX)
trap 'rm -rf "$registry"' EXIT
names=("not loaded" "not asked" "asked")
envs=("UCX_MODULES=^pxn" "" "UCX_TLS=pxn,tcp,self")
if [ "${PXN_OPT_IN_AA:-0}" = 1 ]; then
    names[1]="not loaded'"
    envs[1]="UCX_MODULES=^pxn"
fi

median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
files_left() { find "$registry" -mindepth 1 -type f ! -name .lock | wc -l; }

# run CONFIG PROGRAM ARGS...: the program in configuration CONFIG; prints
# its wall time in ns, then its output.
run() {
    local config=$1; shift
    local t0 t1 out
    t0=$(date +%s%N)
    out=$(env -u UCX_TLS -u UCX_PXN_ENABLE UCX_PXN_REGISTRY_DIR="$registry" \
              UCX_PXN_GROUP=optin UCX_PXN_NET_TLS=tcp \
              ${envs[$config]:+"${envs[$config]}"} "$@" 2>&1) ||
        { echo "opt_in: $* (${names[$config]}) failed: $out" >&2; exit 1; }
    t1=$(date +%s%N)
    echo "$((t1 - t0))"
    echo "$out"
}

# Server and client on cores of their own where there are two: where the
# scheduler puts two spinning processes moves tag_lat by 4x (0.15-0.65 us).
server_cpu=() client_cpu=()
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
    server_cpu=(taskset -c 0) client_cpu=(taskset -c 1)
fi

# perf CONFIG PORT: a ucx_perftest server on loopback and, once it
# listens, a client; prints the client's wall time in ns.
perf() {
    local config=$1 port=$2 server out
    env -u UCX_TLS -u UCX_PXN_ENABLE UCX_PXN_REGISTRY_DIR="$registry" \
        UCX_PXN_GROUP=optin UCX_PXN_NET_TLS=tcp \
        ${envs[$config]:+"${envs[$config]}"} "${server_cpu[@]}" "$perftest" -p "$port" \
        >/dev/null 2>&1 &
    server=$!
    for ((t = 0; t < 500; ++t)); do
        ss -Hltn "sport = :$port" | grep -q . && break
        sleep 0.01
    done
    # A client that meets a server still starting up takes 25-35 ms or
    # 115-200 ms here, depending on how the two starts interleave: give
    # the server time to settle, so that the client's own time is measured.
    sleep 0.3
    out=$(run "$config" "${client_cpu[@]}" "$perftest" 127.0.0.1 -p "$port" -t tag_lat \
              -n 100 -s 8) ||
        exit 1
    wait "$server" || { echo "opt_in: ucx_perftest server (${names[$config]}) failed" >&2; exit 1; }
    echo "${out%%$'\n'*}"
}

declare -A create wall threads pxn left iwall ileft pwall pleft
port=$((20000 + RANDOM % 20000))
for ((i = 0; i < runs; ++i)); do
    for k in 0 1 2; do
        c=$(( (i + k) % 3 )) # each configuration first, second and third in turn
        out=$(run $c "$app" 1)
        grep -q '^worker ok' <<<"$out" ||
            { echo "opt_in: ucp_idle (${names[$c]}): $out" >&2; exit 1; }
        wall[$c]+="${out%%$'\n'*} "
        create[$c]+="$(awk '/^time_ns/ {print $2}' <<<"$out") "
        threads[$c]+="$(awk '/^threads/ {print $2}' <<<"$out") "
        pxn[$c]+="$(awk '/^pxn_threads/ {print $2}' <<<"$out") "
        left[$c]+="$(files_left) "
        out=$(run $c "$ucx_info" -e -u t -w)
        iwall[$c]+="${out%%$'\n'*} "
        ileft[$c]+="$(files_left) "
        port=$((port + 1))
        pwall[$c]+="$(perf $c $port) "
        pleft[$c]+="$(files_left) "
    done
done

med() { tr ' ' '\n' <<<"$1" | grep . | median; }
most() { tr ' ' '\n' <<<"$1" | grep . | sort -n | tail -n 1; }
ms() { awk "BEGIN {printf \"%.2f\", $1 / 1e6}"; }
ratio() { awk "BEGIN {printf \"%.2fx\", $1 / $2}"; }

echo "ucp_idle, median of $runs processes each ($(nproc) cores; compare ratios of one run)"
printf '%-11s %10s %10s %8s %12s %11s %16s\n' "" "create ms" "process ms" \
       "threads" "pxn threads" "files left" "vs not loaded"
for c in 0 1 2; do
    printf '%-11s %10s %10s %8s %12s %11s %16s\n' "${names[$c]}" \
           "$(ms "$(med "${create[$c]}")")" "$(ms "$(med "${wall[$c]}")")" \
           "$(med "${threads[$c]}")" "$(med "${pxn[$c]}")" "$(most "${left[$c]}")" \
           "$(ratio "$(med "${create[$c]}")" "$(med "${create[0]}")"), $(ratio "$(med "${wall[$c]}")" "$(med "${wall[0]}")")"
done
echo
echo "ucx_info -e -u t -w, median of $runs processes each"
printf '%-11s %10s %11s %14s\n' "" "process ms" "files left" "vs not loaded"
for c in 0 1 2; do
    printf '%-11s %10s %11s %14s\n' "${names[$c]}" "$(ms "$(med "${iwall[$c]}")")" \
           "$(most "${ileft[$c]}")" "$(ratio "$(med "${iwall[$c]}")" "$(med "${iwall[0]}")")"
done
echo
echo "ucx_perftest pair on loopback (tag_lat, 100 iterations), median of $runs client processes each"
printf '%-11s %10s %11s %14s\n' "" "client ms" "files left" "vs not loaded"
for c in 0 1 2; do
    printf '%-11s %10s %11s %14s\n' "${names[$c]}" "$(ms "$(med "${pwall[$c]}")")" \
           "$(most "${pleft[$c]}")" "$(ratio "$(med "${pwall[$c]}")" "$(med "${pwall[0]}")")"
done
