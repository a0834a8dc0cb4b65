#!/usr/bin/env bash
# Proves that the test suite leaves nothing on the machine: no network
# namespace and nothing in /dev/shm. `make check` runs it twice:
#
#   test/leftovers/mark.sh   first (every other test's log depends on its log):
#                            notes what is there before the suite
#   test/leftovers/check.sh  last (its log depends on every other test's log):
#                            fails, naming each, for what appeared since and is
#                            still there
#
# It judges only what this suite can have made, so that other users of the
# machine (another engineer's topology, another build's suite, a job) never
# fail it:
#  - network namespaces of the suite's topology prefixes: pxnt (PxnTransfer),
#    pxns (PxnSpine), pxnu (PxnUcp), pxno (PxnOperator), soak<pid> and
#    soakt<pid> (the soaks);
#  - /dev/shm/pxn-test-<inode of this build directory>-* (TempDir);
#  - registry directories /dev/shm/ucx-pxn-<uid>-<group> of the suite's
#    groups (the fixtures name them: t<n>-node<n>, u<n>x<n>..., nd<n>...,
#    sf<n>..., hr<n>..., g<n>..., fork<n>, soak[t]<n>-node<n>, x<n>-<n>,
#    default, and the 64-character ggg...g) that nobody uses: no process
#    holds their .users lock (registry_lease.h) and no live process has an
#    entry in them.
# Usage: test/leftovers.sh mark|check [STATE FILE]
set -euo pipefail

mode=${1:?mode: mark or check}
build=${PXN_BUILD_DIR:-$(pwd)}
state=${2:-$build/test/leftovers.state}
uid=$(id -u)
token=$(stat -c %i "$build")
prefixes='^(pxnt|pxns|pxnu|pxno|soakt?[0-9]+)-'
groups="^ucx-pxn-$uid-(t[0-9]+-node[0-9]+|u[0-9]+x.*|nd[0-9].*|sf[0-9].*|hr[0-9].*|g[0-9]+.*|fork[0-9]+|soakt?[0-9]+-node[0-9]+|x[0-9]+-[0-9]+|default|g{64})$"

namespaces() {
    if [ "$(id -u)" = 0 ] && command -v ip >/dev/null; then
        ip netns list 2>/dev/null | awk '{print $1}' | grep -E "$prefixes" || true
    fi
}

# A registry directory some process still uses: a holder of its .users
# lock, or a live process with an entry (p<pid>-<epoch>.*) in it.
in_use() {
    local dir=$1 f pid
    if [ -f "$dir/.users" ] && ! flock -n -x "$dir/.users" -c true 2>/dev/null; then
        return 0
    fi
    for f in "$dir"/p*-*; do
        [ -e "$f" ] || continue
        pid=${f##*/p}
        pid=${pid%%-*}
        [ -d "/proc/$pid" ] && return 0
    done
    return 1
}

shm() {
    local d name
    for d in /dev/shm/pxn-test-"$token"-* /dev/shm/ucx-pxn-"$uid"-*; do
        [ -e "$d" ] || continue
        name=${d##*/}
        case $name in
        pxn-test-*) echo "/dev/shm/$name" ;;
        *) if [[ $name =~ $groups ]] && ! in_use "$d"; then echo "/dev/shm/$name"; fi ;;
        esac
    done
}

snapshot() {
    { namespaces | sed 's/^/netns /'; shm | sed 's/^/shm /'; } | sort
}

case $mode in
mark)
    mkdir -p "$(dirname "$state")"
    snapshot > "$state"
    echo "leftovers: $(wc -l < "$state") of the suite's kind there before it (not judged)"
    ;;
check)
    [ -f "$state" ] || { echo "leftovers: no $state: mark first"; exit 99; }
    left=$(comm -13 "$state" <(snapshot))
    if [ -n "$left" ]; then
        echo "leftovers: the suite left these behind:"
        echo "$left" | sed 's/^/  /'
        for d in $(echo "$left" | awk '$1 == "shm" {print $2}'); do
            ls -la "$d" | sed 's/^/    /'
        done
        exit 1
    fi
    echo "leftovers: none (namespaces of prefixes pxnt pxns pxnu pxno soak*, /dev/shm of the suite's groups and temporary directories)"
    ;;
*)
    echo "usage: test/leftovers.sh mark|check [STATE FILE]" >&2
    exit 2
    ;;
esac
