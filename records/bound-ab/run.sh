#!/usr/bin/env bash
# Issue 32, this 2-core machine: ranks bound to one core each, the transport
# library before (5f0db2b, /tmp/ab-old) against the current build, installed
# in turn into the UCX that contrib/build.sh made (restored at the end;
# PXN_UCX_PREFIX, so that railonly.sh installs nothing over it),
# interleaved, twice. Each railonly.sh run has its own same-rail runs.
#   bash records/bound-ab/run.sh <old libpxn_transport.so> > records/bound-ab/out.txt
#   bash records/bound-ab/run.sh <old libpxn_transport.so> unbound > records/bound-ab/out-unbound.txt
#       the same with the ranks unbound
set -u
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
old=$1
bind=--bind
[ "${2:-}" = unbound ] && bind=
lib=$top/.deps/ucx/lib/ucx/libpxn_transport.so.0.0.0
new=$top/build/.libs/libpxn_transport.so.0.0.0
trap 'cp "$new" "$lib"' EXIT
for r in 1 2; do
    for v in old new; do
        if [ $v = old ]; then cp "$old" "$lib"; else cp "$new" "$lib"; fi
        printf '\n==== %s, round %s: %s\n' $v $r "$(md5sum < "$lib" | cut -c1-12)"
        PXN_UCX_PREFIX=$top/.deps/ucx flock /root/.pxn-netns.lock bash "$top/contrib/railonly.sh" \
            --tests tag_lat,ucp_am_lat,tag_bw,ucp_am_bw --sizes 8,8K,64K $bind 2>&1 |
            grep -vE '^\[topology\]'
    done
done
