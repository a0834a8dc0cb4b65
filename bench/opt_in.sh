#!/usr/bin/env bash
# What pxn costs a UCP process that did not ask for it: context + worker
# creation time, process wall time, threads and registry files of
# test/apps/ucp_idle, each the median of RUNS fresh processes, in three
# configurations of the same UCX install:
#
#   not loaded   UCX_MODULES=^pxn: the module is never dlopen()ed (baseline)
#   not asked    the default: pxn installed, UCX_TLS unset (pxn inactive)
#   asked        UCX_TLS=pxn,tcp,self: pxn active (its thread and registry)
#
# "files left": registry files still there after the process exited, but
# the registry directory's empty .lock, which stays for the next process.
#
#   bash bench/opt_in.sh [RUNS]      (default 21; any user, no root needed)
#
# Prints the figures and the ratio of each to the baseline. Builds nothing:
# run contrib/build.sh first.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PXN_BUILD_DIR:-$top/build}
app=$build/test/apps/ucp_idle
runs=${1:-21}
[ -x "$app" ] || { echo "opt_in: $app missing (run contrib/build.sh)" >&2; exit 2; }

registry=$(mktemp -d /dev/shm/pxn-opt-in.XXXXXX)
trap 'rm -rf "$registry"' EXIT

median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

# measure ENV...: medians (create ns, process ns, threads, pxn threads) and
# the most registry files left behind, over RUNS processes with ENV.
measure() {
    local create=() wall=() threads=() pxn=() left=()
    for ((i = 0; i < runs; ++i)); do
        local t0 t1 out
        t0=$(date +%s%N)
        out=$(env -u UCX_TLS -u UCX_PXN_ENABLE UCX_PXN_REGISTRY_DIR="$registry" \
                  UCX_PXN_GROUP=optin UCX_PXN_NET_TLS=tcp "$@" "$app" 1)
        t1=$(date +%s%N)
        grep -q '^worker ok' <<<"$out" ||
            { echo "opt_in: $*: $out" >&2; exit 1; }
        create+=("$(awk '/^time_ns/ {print $2}' <<<"$out")")
        wall+=("$((t1 - t0))")
        threads+=("$(awk '/^threads/ {print $2}' <<<"$out")")
        pxn+=("$(awk '/^pxn_threads/ {print $2}' <<<"$out")")
        left+=("$(find "$registry" -mindepth 1 -type f ! -name .lock | wc -l)")
    done
    echo "$(printf '%s\n' "${create[@]}" | median)" \
         "$(printf '%s\n' "${wall[@]}" | median)" \
         "$(printf '%s\n' "${threads[@]}" | median)" \
         "$(printf '%s\n' "${pxn[@]}" | median)" \
         "$(printf '%s\n' "${left[@]}" | sort -n | tail -n 1)"
}

echo "ucp_idle, median of $runs processes each ($(nproc) cores; compare ratios of one run)"
printf '%-11s %10s %10s %8s %12s %11s %14s\n' "" "create ms" "process ms" \
       "threads" "pxn threads" "files left" "vs not loaded"
base=""
for config in "not loaded:UCX_MODULES=^pxn" "not asked:" "asked:UCX_TLS=pxn,tcp,self"; do
    name=${config%%:*}
    env_var=${config#*:}
    read -r create wall threads pxn left < <(measure ${env_var:+"$env_var"})
    [ -n "$base" ] || base="$create $wall"
    printf '%-11s %10.2f %10.2f %8s %12s %11s %14s\n' "$name" \
           "$(awk "BEGIN {print $create / 1e6}")" "$(awk "BEGIN {print $wall / 1e6}")" \
           "$threads" "$pxn" "$left" \
           "$(awk -v b="$base" "BEGIN {split(b, v, \" \"); printf \"%.2fx, %.2fx\", $create / v[1], $wall / v[2]}")"
done
