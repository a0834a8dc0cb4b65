/*
 * One soak run (ucx_pxn_soak, docs/soak.md): the 16 processes, the 16 flows,
 * the relay restarts, and the checks at the end, from start to summary.
 *
 * Layout: 2 nodes x 8 rails, one ucx_pxn_peer per (node, rail) over cma,
 * each a pxn iface and so a relay for its rail and a sender at once. Flows
 * (soak_flow.h):
 *   main:  node0/rail r (r != 1) -> buffer 1+r on node1/rail1, all 7
 *          through the relay node0/rail1;
 *   cross: node1/rail r (r != 2) -> buffer 1+r on node0/rail2, all 7
 *          through the relay node1/rail2 (the other direction, at the same
 *          time);
 *   the two relays send too: node0/rail1 -> node1/rail3 via node0/rail3,
 *          node1/rail2 -> node0/rail3 via node1/rail3.
 * Restarts: after the warm-up, every restart_every seconds one of the two
 * busy relays (node0/rail1, node1/rail2, alternately) gets SIGKILL and a
 * new process takes its slot. They are never targets, so no target buffer
 * is lost; their own flows start over on the new incarnation.
 *
 * Pass/fail (exit status of run(): 0 pass, 1 fail): data that does not
 * match, a hang (a command unanswered within op_timeout), an operation
 * failing with no restart of its relay in the 30 s before or 50 times in a
 * row, a flow without an ep for reconnect_timeout, flows not done
 * drain_timeout after the end, a peer not exiting 0 on quit, any file but
 * .lock left in the soak's registries, and for each process never
 * restarted: more open fds, more or larger pxn registry mappings, or own
 * RSS (VmRSS without those mappings) grown by more than the tolerance,
 * between the end of the warm-up and the end.
 *
 * Signals: SIGINT and SIGTERM are blocked from run() on, in the soak and
 * (inherited through fork and exec) in its peers; run() polls for them and
 * then ends the traffic early, still draining, verifying and shutting down
 * in order.
 */
#ifndef PXN_TOOLS_SOAK_RUN_H_
#define PXN_TOOLS_SOAK_RUN_H_

#include "soak_flow.h"
#include "soak_peer.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pxn_tools {

struct SoakOptions {
    double   duration          = 600;
    uint64_t seed              = 0; /* 0: from the clock */
    double   restart_every     = 30;
    double   warmup            = 30;
    uint64_t max_size          = 64ull << 20;
    double   progress_every    = 10;
    double   op_timeout        = 120;
    double   reconnect_timeout = 60;
    double   drain_timeout     = 300;
    double   rss_tolerance_mb  = 16;
    double   rss_tolerance_pct = 5;
    std::string heartbeat;   /* UCX_PXN_HEARTBEAT_TIMEOUT; "": pxn's default */
    int      wait_mode         = 1; /* PXN_PEER_YIELD */
    std::string prefix;      /* groups <prefix>-node0/1; "": soak<pid> */
    std::string inject;      /* self-test: "corrupt" or "leak" */
    std::string peer;        /* the ucx_pxn_peer binary */
    std::vector<std::string> env; /* more environment for every peer */
};

class SoakRun {
public:
    static constexpr int    kNodes          = 2;
    static constexpr int    kRails          = 8;
    static constexpr int    kMainRelayRail  = 1; /* node 0: 7 senders into it */
    static constexpr int    kCrossRelayRail = 2; /* node 1: 7 the other way */
    static constexpr int    kSideRail       = 3; /* where the two relays send */
    /* A failure this soon after its relay was killed is explained by it. */
    static constexpr double kRestartWindowS = 30;

    explicit SoakRun(const SoakOptions &options);
    SoakRun(const SoakRun&) = delete;
    SoakRun &operator=(const SoakRun&) = delete;

    /* Everything, summary included: 0 pass, 1 fail, 2 the registries of
     * the prefix exist already. */
    int run();

private:
    SoakPeer *peer(int node, int rail) { return peers_[node * kRails + rail].get(); }
    bool      long_lived(const SoakPeer *p) const;
    std::vector<std::string> peer_env(int node, int rail) const;

    bool start_peers();
    bool make_flows();
    void traffic();
    void progress_line();
    void restart_next();
    void take_baseline();
    void drain();
    bool check_targets();
    bool check_processes(const std::vector<ProcSample> &final_samples);
    bool quit_peers();
    bool check_registries();
    void print_counters();
    void print_summary();

    SoakOptions                            opt_;
    std::string                            groups_[kNodes];
    std::vector<std::unique_ptr<SoakPeer>> peers_; /* node * kRails + rail */
    std::vector<std::unique_ptr<SoakFlow>> flows_;
    std::vector<SoakPeer*>                 victims_;
    SoakStats                              stats_;
    SoakVerdict                            verdict_;
    std::vector<ProcSample>                baseline_;
    bool                                   have_baseline_ = false;
    double                                 baseline_at_   = 0;
    unsigned                               restarts_      = 0;
    unsigned                               stale_after_restart_ = 0;
    double                                 traffic_s_     = 0;
    double                                 drain_s_       = 0;
    std::chrono::steady_clock::time_point  start_;
};

} // namespace pxn_tools

#endif
