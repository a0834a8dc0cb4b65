#!/usr/bin/env bash
# UCX_PXN_PIECE_BYTES on this 2-core machine, the ranks at nice 19 (railonly.sh
# --nice: the relays get a core when they need one). Three variants,
# interleaved, three rounds, each railonly.sh run with its own same-rail runs:
#   off       the current build, UCX_PXN_PIECE_BYTES=0 (pieces fill their slot)
#   lastslot  <lastslot lib> (cbabe48: 256 KiB pieces while the ring has room,
#             the ring's last slot fills up), PIECE_BYTES=auto
#   stream    the current build, auto: 256 KiB pieces, the last slot too when
#             the operation has that much left
#   bash records/piece-bytes/run.sh <cbabe48's libpxn_transport.so> > records/piece-bytes/out.txt
set -u
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
lastslot=$1
lib=$top/.deps/ucx/lib/ucx/libpxn_transport.so.0.0.0
new=$top/build/.libs/libpxn_transport.so.0.0.0
trap 'cp "$new" "$lib"' EXIT
for r in 1 2 3; do
    for v in off lastslot stream; do
        bytes=auto
        case $v in
        off) cp "$new" "$lib"; bytes=0 ;;
        lastslot) cp "$lastslot" "$lib" ;;
        stream) cp "$new" "$lib" ;;
        esac
        printf '\n==== %s, round %s: %s, UCX_PXN_PIECE_BYTES=%s\n' $v $r \
            "$(md5sum < "$lib" | cut -c1-12)" $bytes
        UCX_PXN_PIECE_BYTES=$bytes PXN_UCX_PREFIX=$top/.deps/ucx flock /root/.pxn-netns.lock \
            bash "$top/contrib/railonly.sh" --nice --iters 200 \
            --tests tag_lat,ucp_am_lat,tag_bw,ucp_am_bw --sizes 256K,1M,4M,16M 2>&1 |
            grep -vE '^\[topology\]'
    done
done
