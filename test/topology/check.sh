#!/usr/bin/env bash
# Asserts the ping matrix of a topology built by contrib/topology.sh:
#   - frontend: every slot reaches every other slot's `front` address;
#   - rails: a slot reaches the rail address of every slot on its own rail
#     directly (no hop); other rails' addresses are unreachable in rail-only
#     mode and reachable through exactly one hop (the spine) with --spine.
# With --bw it also measures TCP throughput n0r0 -> n1r0 (same rail) and, with
# a spine, n0r0 -> n1r1 (cross rail), and checks that the cross-rail rate is
# near the spine's tbf rate and well below the same-rail rate.
#
#   test/topology/check.sh [--prefix NAME] [--expect rail-only|spine] [--bw]
#
# Exits 0 when everything matches, 1 on any mismatch, 2 on usage errors.
# Needs root and python3 (raw ICMP sockets; no ping binary needed).
set -euo pipefail

prog=${0##*/}
prefix=pxn expect=auto bw=0
while [ $# -gt 0 ]; do
    case $1 in
    --prefix) prefix=${2:?--prefix needs a value}; shift 2 ;;
    --prefix=*) prefix=${1#*=}; shift ;;
    --expect) expect=${2:?--expect needs a value}; shift 2 ;;
    --expect=*) expect=${1#*=}; shift ;;
    --bw) bw=1; shift ;;
    -h | --help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "$prog: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
case $expect in auto | rail-only | spine) ;; *) echo "$prog: --expect rail-only|spine" >&2; exit 2 ;; esac
[ "$(id -u)" -eq 0 ] || { echo "$prog: must be run as root" >&2; exit 2; }
command -v python3 >/dev/null 2>&1 || { echo "$prog: needs python3" >&2; exit 2; }

mapfile -t slots < <(ip netns list | awk '{print $1}' |
    sed -n "s/^${prefix}-n\([0-9][0-9]*\)r\([0-9][0-9]*\)\$/\1 \2/p" | sort -n -k1,1 -k2,2)
[ ${#slots[@]} -gt 0 ] || { echo "$prog: no topology with prefix $prefix" >&2; exit 1; }
if ip netns list | awk '{print $1}' | grep -qxF "$prefix-spine"; then mode=spine; else mode=rail-only; fi
fail=0
if [ "$expect" != auto ] && [ "$expect" != "$mode" ]; then
    echo "MISMATCH: expected a $expect topology, found $mode"
    fail=1
fi

tmp=$(mktemp -d)
pids=()
# shellcheck disable=SC2317 # called by the trap
cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT

# ping many targets at once: prints "<addr> <hops>" or "<addr> -" per target
cat >"$tmp/ping.py" <<'EOF'
import os, select, socket, struct, sys, time

def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF

ident = os.getpid() & 0xFFFF
targets = sys.argv[1:]
got = {}
unreach = set()
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
for rnd in range(3):
    for seq, t in enumerate(targets):
        if t in got or t in unreach:
            continue
        hdr = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
        pkt = struct.pack("!BBHHH", 8, 0, csum(hdr + b"pxn"), ident, seq) + b"pxn"
        try:
            s.sendto(pkt, (t, 0))
        except OSError:
            unreach.add(t)  # no route
    end = time.time() + 0.7
    while len(got) + len(unreach) < len(targets):
        left = end - time.time()
        if left <= 0 or not select.select([s], [], [], left)[0]:
            break
        data, (src, _) = s.recvfrom(2048)
        ihl = (data[0] & 15) * 4
        typ, _, _, rid, _ = struct.unpack("!BBHHH", data[ihl:ihl + 8])
        if typ == 0 and rid == ident and src in targets:
            got.setdefault(src, 64 - data[8])  # hops = 64 - received TTL
for t in targets:
    print(t, got.get(t, "-"))
EOF

# TCP throughput: "server ADDR PORT" prints Mbit/s; "client ADDR PORT SECONDS"
cat >"$tmp/bw.py" <<'EOF'
import socket, sys, time
if sys.argv[1] == "server":
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((sys.argv[2], int(sys.argv[3])))
    ls.listen(1)
    c, _ = ls.accept()
    n, t0 = 0, None
    while True:
        b = c.recv(1 << 20)
        if not b:
            break
        if t0 is None:
            t0 = time.time()
        n += len(b)
    print("%.0f" % (n * 8 / (time.time() - t0) / 1e6))
else:
    for _ in range(100):
        try:
            c = socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=2)
            break
        except OSError:
            time.sleep(0.05)
    buf = b"x" * (1 << 20)
    end = time.time() + float(sys.argv[4])
    while time.time() < end:
        c.sendall(buf)
    c.close()
EOF

ns() { echo "$prefix-n$1r$2"; }
rail_addr() { echo "10.$((100 + $2)).$1.1"; }
# the same into variable $addr, without a subshell (the matrix has N^2 cells)
front_addr_v() { printf -v addr '10.99.%d.%d' "${1% *}" $((${1#* } + 1)); } # "node rail"
rail_addr_v() { printf -v addr '10.%d.%d.1' $((100 + ${1#* })) "${1% *}"; }

# all sources at once, one pinger each; res[src|dst] = hops or -
declare -A res
i=0
for s in "${slots[@]}"; do
    read -r sn sr <<<"$s"
    i=$((i + 1))
    targets=()
    for d in "${slots[@]}"; do
        [ "$d" != "$s" ] || continue
        front_addr_v "$d"; targets+=("$addr")
        rail_addr_v "$d"; targets+=("$addr")
    done
    [ ${#targets[@]} -gt 0 ] || continue
    ip netns exec "$(ns "$sn" "$sr")" python3 "$tmp/ping.py" "${targets[@]}" >"$tmp/ping.$i" &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || { echo "$prog: a pinger failed" >&2; exit 1; }; done
pids=()
i=0
for s in "${slots[@]}"; do
    i=$((i + 1))
    [ -e "$tmp/ping.$i" ] || continue
    while read -r addr hops; do res["$s|$addr"]=$hops; done <"$tmp/ping.$i"
done

# cell: "ok" direct, "ok1" one hop, "--" unreachable; "!" marks a mismatch
checks=0 bad=0
matrix() { # kind
    local kind=$1 s d sr dr want got cell addr
    printf '%-9s' "from\\to"
    for d in "${slots[@]}"; do printf '%6s' "n${d/ /r}"; done
    echo
    for s in "${slots[@]}"; do
        sr=${s#* }
        printf '%-9s' "n${s/ /r}"
        for d in "${slots[@]}"; do
            dr=${d#* }
            if [ "$d" = "$s" ]; then printf '%6s' .; continue; fi
            if [ "$kind" = front ]; then
                front_addr_v "$d"; want=0
            else
                rail_addr_v "$d"
                if [ "$dr" = "$sr" ]; then want=0
                elif [ "$mode" = spine ]; then want=1
                else want=-; fi
            fi
            got=${res["$s|$addr"]:-?}
            case $got in 0) cell=ok ;; -) cell=-- ;; *) cell=ok$got ;; esac
            checks=$((checks + 1))
            if [ "$got" != "$want" ]; then cell="!$cell"; bad=$((bad + 1)); fi
            printf '%6s' "$cell"
        done
        echo
    done
}

echo "topology $prefix: ${#slots[@]} slots, $mode"
echo "frontend (10.99.<node>.<rail+1>): expected ok everywhere"
matrix front
if [ "$mode" = spine ]; then
    echo "rail addresses (10.<100+rail>.<node>.1): expected ok on the same rail, ok1 (via the spine) across rails"
else
    echo "rail addresses (10.<100+rail>.<node>.1): expected ok on the same rail, -- (unreachable) across rails"
fi
matrix rail
echo "(ok: reached directly, okN: reached through N routers, --: unreachable, !: not as expected)"
if [ "$bad" -gt 0 ]; then
    echo "MISMATCH: $bad of $checks pings not as expected"
    fail=1
else
    echo "ping matrix: $checks checks as expected"
fi

bw_run() { # src(n r) dst(n r) -> Mbit/s
    local port=$((5201 + RANDOM % 1000)) addr out
    addr=$(rail_addr "$3" "$4")
    ip netns exec "$(ns "$3" "$4")" python3 "$tmp/bw.py" server "$addr" "$port" >"$tmp/bw.out" &
    pids+=($!)
    ip netns exec "$(ns "$1" "$2")" python3 "$tmp/bw.py" client "$addr" "$port" 1.5
    wait "${pids[-1]}"
    out=$(cat "$tmp/bw.out")
    echo "$out"
}

if [ "$bw" = 1 ]; then
    if ! printf '%s\n' "${slots[@]}" | grep -qx '1 1' || ! printf '%s\n' "${slots[@]}" | grep -qx '1 0'; then
        echo "bandwidth: needs at least 2 nodes x 2 rails, skipped"
    else
        same=$(bw_run 0 0 1 0)
        echo "bandwidth n0r0 -> n1r0 (same rail): $same Mbit/s"
        if [ "$mode" = spine ]; then
            rate=$(tc -n "$prefix-spine" qdisc show dev rail0 | grep -oE 'rate [0-9.]+[KMGT]?bit' | head -n1 | awk '{print $2}')
            rate_mbit=$(awk -v r="$rate" 'BEGIN {
                n = r + 0; u = substr(r, length(n "") + 1)
                m = (u ~ /^K/) ? 1e-3 : (u ~ /^M/) ? 1 : (u ~ /^G/) ? 1e3 : (u ~ /^T/) ? 1e6 : 1e-6
                printf "%.0f", n * m }')
            cross=$(bw_run 0 0 1 1)
            echo "bandwidth n0r0 -> n1r1 (cross rail, spine at $rate): $cross Mbit/s"
            if [ "$cross" -gt $((rate_mbit * 110 / 100)) ] || [ "$cross" -lt $((rate_mbit / 2)) ]; then
                echo "MISMATCH: cross-rail rate $cross Mbit/s is not near the spine rate $rate_mbit Mbit/s"
                fail=1
            elif [ "$same" -le $((cross * 2)) ]; then
                echo "MISMATCH: same-rail rate $same Mbit/s is not well above cross-rail $cross Mbit/s"
                fail=1
            else
                echo "bandwidth: cross-rail limited by the spine as expected"
            fi
        fi
    fi
fi

[ "$fail" = 0 ] && echo "PASS" || echo "FAIL"
exit "$fail"
