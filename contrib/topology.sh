#!/usr/bin/env bash
# Emulated rail topology on one host, built from network namespaces, veth
# pairs and bridges. See docs/topology.md.
#
#   topology.sh up     [--nodes N] [--rails M] [--spine[=RATE]] [--prefix NAME]
#   topology.sh down   [--prefix NAME]
#   topology.sh status [--prefix NAME]
#   topology.sh env    [--prefix NAME] <node> <rail>
#   topology.sh exec   [--prefix NAME] [--no-env] <node> <rail> [--] [cmd...]
#
# One namespace <prefix>-n<node>r<rail> per process slot, holding `lo`,
# `front` (frontend network, 10.99.<node>.<rail+1>/16) and `rail<rail>`
# (10.<100+rail>.<node>.1/16). All bridges live in the namespace
# <prefix>-fabric; the root namespace is never touched. `--spine` adds the
# router namespace <prefix>-spine (10.<100+r>.255.254 on every rail) with
# tbf-limited links. `up` converges to the requested topology (create what is
# missing, fix what differs, remove what is no longer requested); `down`
# removes every namespace of the prefix. Both are idempotent.
set -euo pipefail

prog=${0##*/}
MAX_NODES=255 # node octet 0..254; .255 is the spine's
MAX_RAILS=155 # 10.<100+r> stays <= 10.255
FRONT_NET=10.99

usage() {
    cat <<EOF
usage: $prog up     [--nodes N] [--rails M] [--spine[=RATE]] [--prefix NAME]
       $prog down   [--prefix NAME]
       $prog status [--prefix NAME]
       $prog env    [--prefix NAME] <node> <rail>
       $prog exec   [--prefix NAME] [--no-env] <node> <rail> [--] [cmd...]

  up      build (or converge to) N nodes x M rails (default 2 x 2); rail-only
          unless --spine is given (spine links limited to RATE, default 1gbit;
          RATE: <number>{bit,kbit,mbit,gbit,tbit})
  down    remove every namespace, bridge and link of the prefix
  status  print the namespaces and their addresses (exit 1 if not up)
  env     print the export lines for a UCX process in slot (node, rail)
  exec    run cmd (default: \$SHELL) in the slot's namespace with that
          environment (--no-env: without it)
  --prefix NAME   namespace prefix, default pxn ([A-Za-z0-9][A-Za-z0-9_-]*,
                  at most 32 characters)
EOF
}

die() { echo "$prog: error: $*" >&2; exit 1; }
warn() { echo "$prog: warning: $*" >&2; }
say() { echo "[topology] $*" >&2; }

need_root() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "$prog: must be run as root (it creates network namespaces, veth pairs and bridges)" >&2
        exit 2
    fi
    command -v ip >/dev/null 2>&1 || die "'ip' (iproute2) not found"
    ip netns list >/dev/null 2>&1 ||
        die "'ip' does not support network namespaces ('ip netns list' failed)"
}

# serialise concurrent up/down (flock on this script; nothing left behind)
lock() {
    command -v flock >/dev/null 2>&1 || return 0
    exec 9<"${BASH_SOURCE[0]}"
    flock 9
}

need_link_types() {
    local help
    help=$(ip link help 2>&1 || true)
    for t in veth bridge; do
        grep -qw "$t" <<<"$help" || die "'ip link' does not support type $t"
    done
}

# ---------------------------------------------------------------- names ----
prefix=pxn
fabric_ns() { echo "$prefix-fabric"; }
spine_ns() { echo "$prefix-spine"; }
slot_ns() { echo "$prefix-n$1r$2"; }
# (the address and MAC scheme itself is written out in slot_ifs & co. below)
check_prefix() {
    [[ $prefix =~ ^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$ ]] ||
        die "bad --prefix '$prefix': 1-32 of [A-Za-z0-9_-], starting with a letter or digit"
}

in_range() { # value min max
    [[ $1 =~ ^[0-9]{1,6}$ ]] && [ "$((10#$1))" -ge "$2" ] && [ "$((10#$1))" -le "$3" ]
}

check_uint() { # what value max
    in_range "$2" 0 "$3" || die "bad $1 '$2': expected an integer 0..$3"
}

# ---------------------------------------------------------- primitives ----
netns_list() { ip netns list 2>/dev/null | awk '{print $1}'; }
ns_exists() { [ -e "/run/netns/$1" ] || netns_list | grep -qxF "$1"; }

# slots present: lines "node rail", sorted
present_slots() {
    netns_list | sed -n "s/^${prefix}-n\([0-9][0-9]*\)r\([0-9][0-9]*\)\$/\1 \2/p" | sort -n -k1,1 -k2,2
}

# links of a namespace: lines "name ifindex peer-ifindex mac" ("-" if none)
links_of() {
    ip -n "$1" -o link show | awk '{
        idx = $1; sub(":", "", idx); name = $2; sub(":$", "", name); peer = "-"
        if ((i = index(name, "@if")) > 0) { peer = substr(name, i + 3); name = substr(name, 1, i - 1) }
        else if ((i = index(name, "@")) > 0) name = substr(name, 1, i - 1)
        mac = "-"
        for (j = 1; j < NF; j++) if ($j == "link/ether") mac = $(j + 1)
        print name, idx, peer, mac }'
}

# deletes a link; one that is gone meanwhile is fine (the veth ends of a
# deleted namespace disappear asynchronously, with their peers)
link_del() { # ns dev
    ip -n "$1" link del dev "$2" 2>/dev/null || ! ip -n "$1" link show dev "$2" >/dev/null 2>&1 ||
        die "cannot delete $2 in $1"
}

run_batch() { # ns what: `ip -batch` of stdin, if any
    local cmds
    cmds=$(cat)
    [ -n "$cmds" ] || return 0
    ip -n "$1" -batch - <<<"$cmds" >/dev/null || die "cannot $2 in $1"
}

# Creates the namespace if needed, IPv6 off (writing `all` also sets
# `default`: interfaces created later are born without IPv6, so no
# link-local addresses, DAD or router solicitations on the emulated networks)
# and IPv4 forwarding as given.
ns_ensure() { # ns forward(0/1)
    if ! ns_exists "$1"; then
        ip netns add "$1" || die "cannot create namespace $1"
    fi
    # shellcheck disable=SC2016 # $f is the inner shell's
    ip netns exec "$1" sh -c '
        f=/proc/sys/net/ipv6/conf/all/disable_ipv6; [ ! -e $f ] || echo 1 > $f
        echo '"$2"' > /proc/sys/net/ipv4/ip_forward' || die "cannot set sysctls in $1"
}

ns_remove() {
    local ns=$1 pids
    ns_exists "$ns" || return 0
    pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ' || true)
    [ -z "$pids" ] || warn "processes still run in $ns (pids: ${pids% }); the namespace lives on until they exit"
    ip netns del "$ns" || die "cannot delete namespace $ns"
}

# fabric links: FAB[name]="ifindex peer-ifindex"; fab_cmds: `ip -batch` lines
# run in the fabric namespace at the end of `up` (ports to bridges, up)
declare -A FAB=()
fab_cmds=''
fab_ports() { # ifs lines (see ns_converge) -> fab_cmds
    fab_cmds+=$(awk '{print "link set dev", $2, "master", $3, "up"}' <<<"$1")$'\n'
}

# background jobs (one per namespace to converge), at most one per CPU
bg_pids=()
max_jobs=$(nproc 2>/dev/null || echo 4)
job_wait() { # [all]: wait for all jobs, or until there is room for one more
    local p rc=0
    [ "${1:-}" = all ] || [ ${#bg_pids[@]} -ge "$max_jobs" ] || return 0
    for p in "${bg_pids[@]}"; do wait "$p" || rc=1; done
    bg_pids=()
    [ "$rc" = 0 ] || die "configuring the namespaces failed (see above)"
}
fab_load() {
    local name idx peer mac
    FAB=()
    while read -r name idx peer mac; do FAB[$name]="$idx $peer"; done < <(links_of "$(fabric_ns)")
}

# Converges one endpoint namespace (a slot, or the spine): exactly the given
# veth interfaces, each paired with its end in the fabric namespace (on the
# given bridge), with a fixed MAC and one IPv4 address, up; exactly the given
# static routes and permanent neighbour entries.
#   $1 ns   $2 forward (0/1)
#   $3 interfaces: lines "<dev> <fabric end> <bridge> <mac> <addr>"
#   $4 routes:     lines "<net> via <gateway> dev <dev>"
#   $5 neighbours: lines "<addr> <dev> <mac>"
#
# Permanent ARP entries, rather than ARP: the kernel's neighbour table is
# shared by all namespaces, and its garbage collection limit
# (net.ipv4.neigh.default.gc_thresh3, 1024 by default, settable in the root
# namespace only) counts the learned entries of all of them together; an
# 8 x 8 topology talking all-to-all on the frontend needs ~4500 and drops
# packets ("neighbor table overflow"). Permanent entries do not count.
ns_converge() {
    local ns=$1 ifs=$3 routes=$4 neigh=$5 fab dev fif mac addr name idx peer have
    local -A LINK=() WANT=()
    fab=$(fabric_ns)
    ns_ensure "$ns" "$2"
    while read -r name idx peer mac; do LINK[$name]="$idx $peer $mac"; done < <(links_of "$ns")
    while read -r dev _; do WANT[$dev]=1; done <<<"$ifs"
    for name in "${!LINK[@]}"; do # anything else: stale rails, foreign links
        [ "$name" = lo ] || [ -n "${WANT[$name]:-}" ] || link_del "$ns" "$name"
    done
    {
        echo "link set dev lo up"
        while read -r dev fif _ mac _; do
            read -r idx peer have <<<"${LINK[$dev]:-- - -}"
            if [ "${FAB[$fif]:-}" != "$peer $idx" ]; then # missing, or not a pair
                [ -z "${FAB[$fif]:-}" ] || link_del "$fab" "$fif"
                [ "$idx" = - ] || link_del "$ns" "$dev"
                ip -n "$fab" link add "$fif" type veth peer name "$dev" address "$mac" netns "$ns" ||
                    die "cannot create veth pair $fab/$fif - $ns/$dev"
            elif [ "$have" != "$mac" ]; then
                echo "link set dev $dev address $mac"
            fi
            echo "link set dev $dev up"
        done <<<"$ifs"
        have=$(ip -n "$ns" -4 -o addr show | awk '$2 != "lo" {print $2, $4}' | sort)
        if [ "$have" != "$(awk '{print $1, $5 "/16"}' <<<"$ifs" | sort)" ]; then
            while read -r dev _ _ _ addr; do
                echo "addr flush dev $dev"
                echo "addr add $addr/16 dev $dev"
            done <<<"$ifs"
        fi
    } | run_batch "$ns" "configure the interfaces"
    {
        have=$(ip -n "$ns" -4 route show proto static | sed 's/ *$//' | sort)
        if [ "$have" != "$(sort <<<"$routes")" ]; then
            echo "route flush proto static"
            [ -z "$routes" ] || sed 's/^/route add /; s/$/ proto static/' <<<"$routes"
        fi
        have=$(ip -n "$ns" -4 neigh show nud permanent | awk '{print $1, $3, $5}' | sort)
        if [ "$have" != "$(sort <<<"$neigh")" ]; then
            echo "neigh flush nud permanent"
            [ -z "$neigh" ] || awk '{print "neigh replace", $1, "lladdr", $3, "dev", $2, "nud permanent"}' <<<"$neigh"
        fi
    } | run_batch "$ns" "set the routes and neighbours"
}

# what one slot (node n, rail r) of an N x M topology wants (printf only:
# the neighbour lists have thousands of lines)
slot_ifs() { # n r
    printf 'front fn%dr%d br-front 02:00:01:%02x:%02x:00 %s.%d.%d\n' "$1" "$2" "$1" "$2" "$FRONT_NET" "$1" $(($2 + 1))
    printf 'rail%d rn%dr%d br-rail%d 02:00:02:%02x:%02x:00 10.%d.%d.1\n' "$2" "$1" "$2" "$2" "$1" "$2" $((100 + $2)) "$1"
}
slot_routes() { # n r M spine
    local k
    [ "$4" = 1 ] || return 0
    for ((k = 0; k < $3; k++)); do
        [ "$k" = "$2" ] || printf '10.%d.0.0/16 via 10.%d.255.254 dev rail%d\n' $((100 + k)) $((100 + $2)) "$2"
    done
}
slot_neigh() { # n r N M spine
    local k l
    for ((k = 0; k < $3; k++)); do
        for ((l = 0; l < $4; l++)); do
            [ "$k" != "$1" ] || [ "$l" != "$2" ] || continue
            printf '%s.%d.%d front 02:00:01:%02x:%02x:00\n' "$FRONT_NET" "$k" $((l + 1)) "$k" "$l"
        done
        [ "$k" = "$1" ] || printf '10.%d.%d.1 rail%d 02:00:02:%02x:%02x:00\n' $((100 + $2)) "$k" "$2" "$k" "$2"
    done
    [ "$5" = 0 ] || printf '10.%d.255.254 rail%d 02:00:03:ff:%02x:00\n' $((100 + $2)) "$2" "$2"
}
spine_ifs() { # M
    local r
    for ((r = 0; r < $1; r++)); do
        printf 'rail%d sp%d br-rail%d 02:00:03:ff:%02x:00 10.%d.255.254\n' "$r" "$r" "$r" "$r" $((100 + r))
    done
}
spine_neigh() { # N M
    local k r
    for ((r = 0; r < $2; r++)); do
        for ((k = 0; k < $1; k++)); do
            printf '10.%d.%d.1 rail%d 02:00:02:%02x:%02x:00\n' $((100 + r)) "$k" "$r" "$k" "$r"
        done
    done
}

# -------------------------------------------------------------- spine ----
rate_bps='' rate_str=''
parse_rate() {
    local r=${1,,} num unit
    [[ $r =~ ^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit|tbit)$ ]] ||
        die "bad spine rate '$1': expected <number>{bit,kbit,mbit,gbit,tbit}, e.g. 1gbit"
    rate_str=$1
    num=${BASH_REMATCH[1]}
    unit=${BASH_REMATCH[3]}
    rate_bps=$(awk -v n="$num" -v u="$unit" 'BEGIN {
        m = (u == "bit") ? 1 : (u == "kbit") ? 1e3 : (u == "mbit") ? 1e6 : (u == "gbit") ? 1e9 : 1e12
        printf "%.0f", n * m }')
    [ "$rate_bps" -ge 8000 ] || die "spine rate '$1' is too low (at least 8kbit)"
}

shape_cmds() { # dev...: `tc -batch` lines, tbf at rate_bps, burst 2 ms (at least 64 KiB)
    local burst dev
    burst=$(awk -v r="$rate_bps" 'BEGIN { b = r / 8 * 0.002; if (b < 65536) b = 65536; printf "%.0f", b }')
    for dev in "$@"; do
        echo "qdisc replace dev $dev root tbf rate ${rate_bps}bit burst $burst latency 50ms"
    done
}

# ---------------------------------------------------------- commands ----
cmd_up() {
    local nodes=$1 rails=$2 spine=$3 fab sp n r node rail name bridges extra=0 devs=()
    need_root
    need_link_types
    if [ "$spine" = 1 ]; then
        command -v tc >/dev/null 2>&1 || die "--spine needs 'tc' (iproute2)"
    fi
    fab=$(fabric_ns)
    sp=$(spine_ns)
    lock

    # what a previous `up` with other sizes or without --spine created
    while read -r node rail; do
        [ -n "$node" ] || continue
        if [ "$node" -ge "$nodes" ] || [ "$rail" -ge "$rails" ]; then
            ns_remove "$(slot_ns "$node" "$rail")"
            extra=$((extra + 1))
        fi
    done < <(present_slots)
    [ "$extra" = 0 ] || say "removed $extra slot namespaces outside $nodes x $rails"
    if [ "$spine" = 0 ] && ns_exists "$sp"; then
        say "removing $sp"
        ns_remove "$sp"
    fi

    # the fabric: bridges, and nothing the slots or the spine do not use
    ns_ensure "$fab" 0
    fab_load
    local -A want=([br-front]=1)
    for ((r = 0; r < rails; r++)); do want[br-rail$r]=1; done
    for ((n = 0; n < nodes; n++)); do
        for ((r = 0; r < rails; r++)); do want[fn${n}r$r]=1 want[rn${n}r$r]=1; done
    done
    for ((r = 0; r < rails && spine; r++)); do want[sp$r]=1; done
    for name in "${!FAB[@]}"; do
        [ "$name" = lo ] || [ -n "${want[$name]:-}" ] || link_del "$fab" "$name"
    done
    bridges=$(ip -n "$fab" -o link show type bridge | awk '{sub(":$", "", $2); print $2}')
    for name in br-front $(for ((r = 0; r < rails; r++)); do echo "br-rail$r"; done); do
        if ! grep -qxF "$name" <<<"$bridges"; then
            link_del "$fab" "$name"
            ip -n "$fab" link add "$name" type bridge stp_state 0 forward_delay 0 ||
                die "cannot create bridge $name in $fab"
        fi
        fab_cmds+="link set dev $name up"$'\n'
    done
    fab_load

    for ((n = 0; n < nodes; n++)); do
        for ((r = 0; r < rails; r++)); do
            job_wait
            ns_converge "$(slot_ns "$n" "$r")" 0 "$(slot_ifs "$n" "$r")" \
                "$(slot_routes "$n" "$r" "$rails" "$spine")" "$(slot_neigh "$n" "$r" "$nodes" "$rails" "$spine")" &
            bg_pids+=($!)
            fab_ports "$(slot_ifs "$n" "$r")"
        done
    done
    if [ "$spine" = 1 ]; then
        ns_converge "$sp" 1 "$(spine_ifs "$rails")" "" "$(spine_neigh "$nodes" "$rails")" &
        bg_pids+=($!)
        fab_ports "$(spine_ifs "$rails")"
    fi
    job_wait all
    if [ "$spine" = 1 ]; then
        # both directions of every spine link: into the spine (fabric side)
        # and out of it (spine side)
        for ((r = 0; r < rails; r++)); do devs+=("rail$r"); done
        shape_cmds "${devs[@]}" | tc -n "$sp" -batch - ||
            die "cannot attach tbf qdiscs in $sp (is sch_tbf available?)"
        shape_cmds "${devs[@]/#rail/sp}" | tc -n "$fab" -batch - ||
            die "cannot attach tbf qdiscs in $fab (is sch_tbf available?)"
    fi
    run_batch "$fab" "attach the ports to the bridges" <<<"${fab_cmds%$'\n'}"

    if [ "$spine" = 1 ]; then
        say "up: $prefix: $nodes nodes x $rails rails, spine links at $rate_str"
    else
        say "up: $prefix: $nodes nodes x $rails rails, rail-only"
    fi
}

cmd_down() {
    local ns
    need_root
    lock
    for ns in $(netns_list | grep -E "^${prefix}-(n[0-9]+r[0-9]+|fabric|spine)\$" || true); do
        ns_remove "$ns"
    done
    say "down: $prefix"
}

addrs_of() { # ns -> "dev addr/len ..." of IPv4 addresses
    ip -n "$1" -4 -o addr show 2>/dev/null | awk '$2 != "lo" {printf "%s %s  ", $2, $4}'
}

cmd_status() {
    local slots nodes rails fab sp node rail rate
    need_root
    slots=$(present_slots)
    fab=$(fabric_ns)
    sp=$(spine_ns)
    if [ -z "$slots" ] && ! ns_exists "$fab"; then
        echo "topology $prefix: not up"
        return 1
    fi
    nodes=$(awk 'BEGIN {m = -1} $1 > m {m = $1} END {print m + 1}' <<<"$slots")
    rails=$(awk 'BEGIN {m = -1} $2 > m {m = $2} END {print m + 1}' <<<"$slots")
    if ns_exists "$sp"; then
        rate=$(tc -n "$sp" qdisc show dev rail0 2>/dev/null | grep -oE 'rate [^ ]+' | head -n1 || true)
        echo "topology $prefix: $nodes nodes x $rails rails, fabric: spine (${rate:-no rate limit})"
    else
        echo "topology $prefix: $nodes nodes x $rails rails, fabric: rail-only"
    fi
    ns_exists "$fab" || echo "  (fabric namespace $fab is missing: run up again)"
    while read -r node rail; do
        [ -n "$node" ] || continue
        printf '  %-20s %s\n' "$(slot_ns "$node" "$rail")" "$(addrs_of "$(slot_ns "$node" "$rail")")"
    done <<<"$slots"
    if ns_exists "$sp"; then
        printf '  %-20s %s\n' "$sp" "$(addrs_of "$sp")"
    fi
    if ns_exists "$fab"; then
        printf '  %-20s %s\n' "$fab" \
            "bridges: $(ip -n "$fab" -o link show type bridge | sed -n 's/^[0-9]*: \([^:@]*\).*/\1/p' | tr '\n' ' ')"
    fi
}

slot_env() { # node rail
    cat <<EOF
export UCX_PXN_NODE_ID=node$1
export UCX_PXN_GROUP=$prefix-node$1
export UCX_NET_DEVICES=front
export UCX_PXN_HOME_DEVICE=rail$2
EOF
}

cmd_env() {
    local node=$1 rail=$2
    if [ "$(id -u)" -eq 0 ] && ! ns_exists "$(slot_ns "$node" "$rail")"; then
        warn "namespace $(slot_ns "$node" "$rail") does not exist (topology not up, or smaller)"
    fi
    slot_env "$node" "$rail"
}

cmd_exec() {
    local node=$1 rail=$2 withenv=$3 ns
    shift 3
    need_root
    ns=$(slot_ns "$node" "$rail")
    ns_exists "$ns" || die "namespace $ns does not exist (run: $prog up --prefix $prefix ...)"
    [ $# -gt 0 ] || set -- "${SHELL:-/bin/sh}"
    if [ "$withenv" = 1 ]; then
        local -a vars=()
        while read -r _ kv; do vars+=("$kv"); done < <(slot_env "$node" "$rail")
        exec ip netns exec "$ns" env "${vars[@]}" "$@"
    fi
    exec ip netns exec "$ns" "$@"
}

# -------------------------------------------------------------- main ----
[ $# -gt 0 ] || { usage >&2; exit 1; }
cmd=$1
shift
nodes=2 rails=2 spine=0 withenv=1
pos=()
while [ $# -gt 0 ]; do
    case $1 in
    --prefix) [ $# -ge 2 ] || die "--prefix needs a value"; prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#*=}; shift ;;
    --nodes | --rails)
        [ "$cmd" = up ] || die "$1 is an option of 'up'"
        [ $# -ge 2 ] || die "$1 needs a value"
        if [ "$1" = --nodes ]; then nodes=$2; else rails=$2; fi
        shift 2 ;;
    --nodes=* | --rails=*)
        [ "$cmd" = up ] || die "${1%%=*} is an option of 'up'"
        if [ "${1%%=*}" = --nodes ]; then nodes=${1#*=}; else rails=${1#*=}; fi
        shift ;;
    --spine | --spine=*)
        [ "$cmd" = up ] || die "--spine is an option of 'up'"
        spine=1
        if [ "$1" = --spine ]; then parse_rate 1gbit; else parse_rate "${1#*=}"; fi
        shift ;;
    --no-env)
        [ "$cmd" = exec ] || die "--no-env is an option of 'exec'"
        withenv=0; shift ;;
    -h | --help) usage; exit 0 ;;
    --)
        shift
        [ "$cmd" = exec ] || die "unexpected '--'"
        break ;;
    -*) die "unknown option '$1' (see $prog --help)" ;;
    *)
        pos+=("$1"); shift
        # exec: the command may follow <node> <rail> without '--'
        if [ "$cmd" = exec ] && [ ${#pos[@]} -eq 2 ]; then break; fi ;;
    esac
done
check_prefix

case $cmd in
up)
    if [ ${#pos[@]} -gt 0 ]; then
        [[ ! ${pos[0],,} =~ bit$ ]] || die "unexpected argument '${pos[0]}' (the spine rate is given as --spine=RATE)"
        die "unexpected argument '${pos[0]}'"
    fi
    in_range "$nodes" 1 $MAX_NODES || die "bad --nodes '$nodes': expected 1..$MAX_NODES"
    in_range "$rails" 1 $MAX_RAILS || die "bad --rails '$rails': expected 1..$MAX_RAILS"
    cmd_up "$((10#$nodes))" "$((10#$rails))" "$spine"
    ;;
down | status)
    [ ${#pos[@]} -eq 0 ] || die "unexpected argument '${pos[0]}'"
    "cmd_$cmd"
    ;;
env | exec)
    [ ${#pos[@]} -eq 2 ] || die "$cmd needs <node> <rail>"
    check_uint node "${pos[0]}" $((MAX_NODES - 1))
    check_uint rail "${pos[1]}" $((MAX_RAILS - 1))
    if [ "$cmd" = env ]; then
        [ $# -eq 0 ] || die "unexpected argument '$1'"
        cmd_env "$((10#${pos[0]}))" "$((10#${pos[1]}))"
    else
        [ "${1:-}" != -- ] || shift
        cmd_exec "$((10#${pos[0]}))" "$((10#${pos[1]}))" "$withenv" "$@"
    fi
    ;;
help | -h | --help) usage ;;
*) usage >&2; die "unknown command '$cmd'" ;;
esac
