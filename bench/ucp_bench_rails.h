/*
 * The processes of a UCP benchmark across emulated rails on one host
 * (ucx_pxn_ucp_bench, ucx_pxn_kv_bench), all in this network namespace,
 * told apart as two nodes of two rails by UCX_PXN_NODE_ID, UCX_PXN_GROUP
 * and UCX_PXN_RAIL_MAP (the way contrib/gpu/run.sh's perftest sets them up):
 *   initiator  node 0 rail 0      (the benchmark's own, started by it)
 *   target     node 1 rail 1      (likewise)
 *   relays     node 0 rail 1 (carries every put and get) and node 1 rail 0:
 *              ucx_pxn_relay, started by start_relays()
 * Inner transport: cuda_ipc with GPU memory (UCX_TLS pxn,tcp,cuda_copy,
 * UCX_PROTO_ENABLE=y, UCX_CUDA_IPC_ENABLE_GET_ZCOPY=y: one GPU has no
 * NVLink, and cuda_ipc offers gets there only when told), cma with host
 * memory (UCX_TLS pxn,tcp). UCP's own transports cannot reach the target's
 * memory (no cuda_ipc, no cma in UCX_TLS; tcp is no RMA lane): pxn carries
 * it all. The config's `env` entries ("NAME=value") come last, so they
 * override. Setup failures end the process (bench_fail, kBenchSetup).
 */
#ifndef PXN_BENCH_UCP_BENCH_RAILS_H_
#define PXN_BENCH_UCP_BENCH_RAILS_H_

#include <apps/peer_process.h>

#include <string>
#include <vector>

namespace pxn_tools {

struct UcpRailsConfig {
    bool                     gpu    = false;
    int                      device = 0;
    std::string              prefix;  /* of the registry groups */
    std::string              relay;   /* "": $PXN_UCX_PREFIX/bin/ucx_pxn_relay, else
                                         the build's UCX_PREFIX */
    std::string              logs;    /* "": a new /tmp/<tag>-XXXXXX */
    std::vector<std::string> env;
    /* The relays' command lines: `relay_wrap` before the program (e.g.
     * taskset -c 1), `relay_args` after it (e.g. -b). */
    std::vector<std::string> relay_wrap, relay_args;
};

/* The options every UCP bench launcher takes for its rails: --prefix NAME,
 * --relay PATH, --logs DIR, --env NAME=value (repeatable). false: `name`
 * is none of them. */
bool ucp_rails_option(UcpRailsConfig *config, const std::string &name,
                      const std::string &value);

class UcpRails {
public:
    /* Resolves the relay program and makes the log directory. */
    UcpRails(const UcpRailsConfig &config, const std::string &tag);
    ~UcpRails();
    UcpRails(const UcpRails&) = delete;
    UcpRails &operator=(const UcpRails&) = delete;

    const UcpRailsConfig &config() const { return c_; }
    /* The environment of the process in (node, rail). */
    std::vector<std::string> env(int node, int rail) const;
    /* Both relays, each waited for until it says "relaying on". */
    void start_relays();
    /* SIGTERM to both, then a line per relay on stdout: "relay: relayed
     * ..." (its counters when it stopped) or "relay: no counters". */
    void stop_relays();
    /* Relay i (0: node 0 rail 1, 1: node 1 rail 0); -1 when not started. */
    pid_t relay_pid(int i) const { return started_ ? relays_[i].pid() : -1; }

    /* This program's path, for starting its own roles. */
    static std::string self_exe();

private:
    UcpRailsConfig    c_;
    BackgroundProcess relays_[2];
    bool              started_ = false;
};

} // namespace pxn_tools

#endif
