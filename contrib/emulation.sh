# Sourced (never run) by the scripts that run programs on the emulated
# 2 x 2 rail topology (perftest.sh, railonly.sh, mpi_check.sh; nixl_check.sh
# and gpu/run.sh for emu_wait_listen alone): what each needs before its
# first program and after its last. Needs $top (the repository root).
#
# emu_ucx <build>   sets ucx: $PXN_UCX_PREFIX as it is (nothing is built:
#                   the GPU machine's carried copy), else contrib/build.sh
#                   and <build>'s UCX install
# emu_up <name> [<prefix>]
#                   brings the topology up (namespace prefix, default pxn)
#                   and down again at exit when it was down; sets T
#                   (topology.sh), log (a new /tmp/pxn-<name>.XXXXXX for
#                   the run's logs) and pids=(): processes whose pids the
#                   script adds there are stopped at exit
# emu_stop          stops (SIGTERM) and reaps the processes in pids now
# emu_wait_listen <netns> <port>
#                   waits (at most 10 s) until a tcp socket listens on <port>
#                   in <netns> (-: this host's own namespace); reads
#                   /proc/net/tcp{,6} there, so it needs no `ss` (the GPU
#                   machine carries only `ip`)

emu_ucx() {
    if [ -n "${PXN_UCX_PREFIX:-}" ]; then
        ucx=$PXN_UCX_PREFIX
    else
        bash "$top/contrib/build.sh"
        ucx=$(sed -n 's/^UCX_PREFIX = //p' "$1/Makefile")
    fi
}

emu_stop() {
    local p
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    pids=()
}

emu_wait_listen() {
    local i hex ns=()
    hex=$(printf '%04X' "$2")
    [ "$1" = - ] || ns=(ip netns exec "$1")
    for i in $(seq 100); do
        "${ns[@]}" awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 }
            END { exit !f }' /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}

emu_up() {
    emu_prefix=${2:-pxn}
    T="$top/contrib/topology.sh"
    if bash "$T" status --prefix "$emu_prefix" >/dev/null 2>&1; then
        emu_was_up=1
    else
        emu_was_up=0
    fi
    bash "$T" up --nodes 2 --rails 2 --prefix "$emu_prefix" >&2
    log=$(mktemp -d "/tmp/pxn-$1.XXXXXX")
    pids=()
    trap emu_finish EXIT
}

emu_finish() {
    emu_stop
    [ "$emu_was_up" = 1 ] || bash "$T" down --prefix "$emu_prefix" >&2
}
