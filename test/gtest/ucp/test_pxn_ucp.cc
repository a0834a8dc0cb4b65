/*
 * UCP across emulated rails with UCX's ucx_perftest (pxn_ucp.h): cross-rail
 * through pxn, same-rail and same-node pairs without it, the protocols UCP
 * chose (UCX_PROTO_INFO), NIXL's settings.
 */
#include "pxn_ucp.h"

namespace pxn_test {
namespace {

/* No UCX_PROTO_ENABLE: protocols v2 where they are UCP's default (1.16
 * on), whose tables (UCX_PROTO_INFO=y) must name pxn for every size. */
TEST_F(PxnUcp, PerftestPutBwCrossRailCma)
{
    cross_rail_perftest(Inner::kCma, 14101,
                        {"-t", "ucp_put_bw", "-s", "1048576", "-n", "100", "-w", "5"}, {},
                        kRelay01, 100 * kMiB, "ucp_put");
}

TEST_F(PxnUcp, PerftestGetCrossRailCma)
{
    cross_rail_perftest(Inner::kCma, 14102,
                        {"-t", "ucp_get", "-s", "1048576", "-n", "100", "-w", "5"}, {},
                        kRelay01, 100 * kMiB, "ucp_get");
}

/* NIXL's UCP settings: rendezvous off, two RMA rails allowed, no fence.
 * From UCX 1.20, with rendezvous off, UCP needs no memory invalidation from
 * a connect-to-iface lane in peer error mode: the inner md's (cma's) is
 * then left off, to show it. */
std::vector<std::string> nixl_env()
{
    std::vector<std::string> env = {"UCX_RNDV_THRESH=inf", "UCX_MAX_RMA_RAILS=2",
                                    "UCX_RC_FENCE=none"};
    if (pxn_tools::make_var("PXN_UCP_PEER_BW_INVALIDATE") == "rndv") {
        env.push_back("UCX_CMA_MEMORY_INVALIDATE=n");
    }
    return env;
}

TEST_F(PxnUcp, PerftestPutBwCrossRailCmaWithNixlSettings)
{
    cross_rail_perftest(Inner::kCma, 14112,
                        {"-t", "ucp_put_bw", "-e", "-s", "1048576", "-n", "100", "-w",
                         "5"}, nixl_env(), kRelay01, 100 * kMiB, "ucp_put");
}

/* UCX 1.18 emulates gets of an ep in peer error mode with active
 * messages (no RMA lane, no pxn): there, the test checks that. */
TEST_F(PxnUcp, PerftestGetCrossRailCmaWithNixlSettings)
{
    const bool rma = peer_mode_gets_use_rma_lanes();
    cross_rail_perftest(Inner::kCma, 14115,
                        {"-t", "ucp_get", "-e", "-s", "1048576", "-n", "100", "-w",
                         "5"}, nixl_env(), kRelay01, rma ? 100 * kMiB : 0, "ucp_get",
                        rma);
}

/* A pair on one node (client n0r0, server n0r1): not a pxn peer. */
TEST_F(PxnUcp, SameNodePerftestPutBwDoesNotUsePxn)
{
    no_pxn_perftest(Inner::kCma, kRelay01, {{1, 0}, {1, 1}}, 14113,
                    {"-t", "ucp_put_bw", "-s", "1048576", "-n", "20", "-w", "2"}, {},
                    "ucp_put");
}

TEST_F(PxnUcp, SameRailPerftestGetCmaDoesNotUsePxn)
{
    same_rail_perftest(Inner::kCma, 14114,
                       {"-t", "ucp_get", "-s", "1048576", "-n", "20", "-w", "2"}, {},
                       "ucp_get");
}

/* Default rendezvous: the receiver (server, n1r1) gets from the sender's
 * n0r0 buffer through its node's relay of rail 0. */
TEST_F(PxnUcp, PerftestTagBwCrossRailCmaRendezvousGet)
{
    cross_rail_perftest(Inner::kCma, 14103,
                        {"-t", "tag_bw", "-s", "4194304", "-n", "20", "-w", "2"}, {},
                        kRelay10, 20 * 4 * kMiB);
}

TEST_F(PxnUcp, PerftestTagBwCrossRailTcpRendezvousPut)
{
    cross_rail_perftest(Inner::kTcp, 14104,
                        {"-t", "tag_bw", "-s", "4194304", "-n", "10", "-w", "2"},
                        {"UCX_RNDV_SCHEME=put_zcopy"}, kRelay01, 10 * 4 * kMiB);
}

TEST_F(PxnUcp, SameRailPerftestPutBwCmaDoesNotUsePxn)
{
    same_rail_perftest(Inner::kCma, 14105,
                       {"-t", "ucp_put_bw", "-s", "1048576", "-n", "20", "-w", "2"}, {},
                       "ucp_put");
}

TEST_F(PxnUcp, SameRailPerftestTagBwTcpDoesNotUsePxn)
{
    same_rail_perftest(Inner::kTcp, 14106,
                       {"-t", "tag_bw", "-s", "4194304", "-n", "10", "-w", "2"},
                       {"UCX_RNDV_SCHEME=put_zcopy"});
}

} // namespace
} // namespace pxn_test
