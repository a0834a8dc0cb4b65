/*
 * UCP across a rail-only fabric where every process's UCX sees only its own
 * rail NIC (Inner::kRailOnly, pxn_ucp.h): pxn is the only way to a peer on
 * another rail, for every protocol, wireup included. UCX's ucx_perftest
 * (its own out-of-band exchange over the frontend) runs each test with
 * eager and rendezvous sizes; every lane of the client's endpoint must be
 * pxn's, and the relays must have carried the bytes.
 */
#include "pxn_ucp.h"

#include <fstream>
#include <sys/stat.h>

namespace pxn_test {
namespace {

constexpr uint64_t kKiB = 1024, kMiB = 1024 * 1024;

/* Without pxn nothing reaches the other rail: UCP finds no transport, or
 * tcp claims the peer and its connect fails. */
TEST_F(PxnUcp, RailOnlyWithoutPxnTheCrossRailEndpointFails)
{
    BackgroundProcess *r01 = relay(Inner::kRailOnly, kRelay01);
    BackgroundProcess *r10 = relay(Inner::kRailOnly, kRelay10);
    ASSERT_TRUE(r01 && r10);
    const PerftestRun run = perftest(Inner::kRailOnly, kServer, 14301,
                                     {"-t", "tag_lat", "-n", "10"},
                                     {"UCX_TLS=tcp"});
    EXPECT_NE(0, run.client) << tail(run.client_log);
}

TEST_F(PxnUcp, RailOnlyTagLatencyEager)
{
    cross_rail_perftest(Inner::kRailOnly, 14302,
                        {"-t", "tag_lat", "-s", "8", "-n", "2000"}, {}, kRelay01,
                        2000 * 8);
}

TEST_F(PxnUcp, RailOnlyTagLatencyRendezvous)
{
    cross_rail_perftest(Inner::kRailOnly, 14303,
                        {"-t", "tag_lat", "-s", "1048576", "-n", "20", "-w", "2"},
                        {}, kRelay01, 20 * kMiB);
}

TEST_F(PxnUcp, RailOnlyTagBandwidthEager)
{
    cross_rail_perftest(Inner::kRailOnly, 14304,
                        {"-t", "tag_bw", "-s", "4096", "-n", "2000"}, {}, kRelay01,
                        2000 * 4 * kKiB);
}

TEST_F(PxnUcp, RailOnlyTagBandwidthRendezvous)
{
    cross_rail_perftest(Inner::kRailOnly, 14305,
                        {"-t", "tag_bw", "-s", "4194304", "-n", "10", "-w", "2"},
                        {}, kRelay01, 10 * 4 * kMiB);
}

TEST_F(PxnUcp, RailOnlyStreamBandwidth)
{
    cross_rail_perftest(Inner::kRailOnly, 14306,
                        {"-t", "stream_bw", "-s", "65536", "-n", "200"}, {}, kRelay01,
                        200 * 64 * kKiB);
}

TEST_F(PxnUcp, RailOnlyAmBandwidthEager)
{
    cross_rail_perftest(Inner::kRailOnly, 14307,
                        {"-t", "ucp_am_bw", "-s", "4096", "-n", "2000"}, {},
                        kRelay01, 2000 * 4 * kKiB);
}

TEST_F(PxnUcp, RailOnlyAmBandwidthRendezvous)
{
    cross_rail_perftest(Inner::kRailOnly, 14308,
                        {"-t", "ucp_am_bw", "-s", "1048576", "-n", "20", "-w", "2"},
                        {}, kRelay01, 20 * kMiB);
}

TEST_F(PxnUcp, RailOnlyPutBandwidth)
{
    cross_rail_perftest(Inner::kRailOnly, 14309,
                        {"-t", "ucp_put_bw", "-s", "65536", "-n", "200"}, {},
                        kRelay01, 200 * 64 * kKiB);
}

/* tcp has no get: UCP emulates it with active messages, both ways
 * through pxn (the reply through the target's node). */
TEST_F(PxnUcp, RailOnlyGet)
{
    cross_rail_perftest(Inner::kRailOnly, 14310,
                        {"-t", "ucp_get", "-s", "65536", "-n", "100"}, {},
                        kRelay10, 100 * 64 * kKiB);
}

/* UCX_PXN_NET_CONNECT=wired, rc's way (tcp standing in for rc and for the
 * to-iface transport beside it): UCP still reaches the cross-rail peer
 * through pxn alone, and the relays wire their own ep-to-ep routes. */
TEST_F(PxnUcp, RailOnlyWiredTagRendezvousThroughPxnAlone)
{
    cross_rail_perftest(Inner::kRailOnly, 14321,
                        {"-t", "tag_bw", "-s", "4194304", "-n", "10", "-w", "2"},
                        {"UCX_PXN_NET_CONNECT=wired"}, kRelay01, 10 * 4 * kMiB);
}

TEST_F(PxnUcp, RailOnlyWiredAmEagerAndGetThroughPxnAlone)
{
    cross_rail_perftest(Inner::kRailOnly, 14322,
                        {"-t", "ucp_am_bw", "-s", "4096", "-n", "2000"},
                        {"UCX_PXN_NET_CONNECT=wired"}, kRelay01, 2000 * 4 * kKiB);
    cross_rail_perftest(Inner::kRailOnly, 14323,
                        {"-t", "ucp_get", "-s", "65536", "-n", "100"},
                        {"UCX_PXN_NET_CONNECT=wired"}, kRelay10, 100 * 64 * kKiB);
}

/* The rail NIC and the frontend both allowed: UCX 1.13's tcp claims the
 * cross-rail peer on the rail NIC too, but every lane stays pxn's (on both
 * devices), so no lane sits on a NIC that cannot reach the peer. */
TEST_F(PxnUcp, RailAndFrontendAllowedEveryCrossRailLaneIsStillPxn)
{
    cross_rail_perftest(Inner::kRailOnly, 14312,
                        {"-t", "tag_bw", "-s", "1048576", "-n", "20", "-w", "2"},
                        {"UCX_NET_DEVICES=rail0,rail1,front"}, kRelay01, 20 * kMiB);
}

/* NIXL's way (ucp_rma_check --nixl: RMA and AM features, peer error mode,
 * puts flushed, then an active-message notification the target answers),
 * every byte checked, on the rail-only fabric: all of it through pxn. */
TEST_F(PxnUcp, RailOnlyNixlStylePutsAndNotificationsThroughPxnAlone)
{
    constexpr unsigned kRounds = 2;
    BackgroundProcess *r01 = relay(Inner::kRailOnly, kRelay01);
    BackgroundProcess *r10 = relay(Inner::kRailOnly, kRelay10);
    BackgroundProcess *target = rma_target(14311, {}, {"--nixl", "--busy"},
                                           Inner::kRailOnly);
    ASSERT_TRUE(r01 && r10 && target);
    /* and then 20 notifications, each after a flushed 4 KiB put, timed */
    BackgroundProcess *in = rma_initiator(
            14311, {"--nixl", "--no-get", "--rounds", std::to_string(kRounds),
                    "--notify", "20", "--deadline", deadline(30)},
            {}, Inner::kRailOnly);
    ASSERT_NE(nullptr, in);
    const int status = in->wait(scaled_ms(40000));
    const std::string log = in->output();
    EXPECT_EQ(0, status) << tail(log) << "\ntarget:\n" << tail(target->output());
    EXPECT_NE(std::string::npos, log.find("initiator result=ok")) << tail(log);
    EXPECT_NE(std::string::npos, log.find("err_handler_calls=0"));
    const auto cfgs = ep_cfg_lines(log);
    EXPECT_TRUE(only_pxn_lanes(cfgs)) << joined(cfgs);
    EXPECT_EQ(0, target->wait(scaled_ms(10000))) << tail(target->output());
    EXPECT_NE(std::string::npos, target->output().find("target result=ok"));
    EXPECT_NE(std::string::npos, target->output().find("notifications=20 notify_us p50="))
            << tail(target->output());
    const RelayStats s01 = stop_relay(r01), s10 = stop_relay(r10);
    EXPECT_GE(s01.bytes, kRounds * (64ull << 20)) << "puts via n0r1";
    EXPECT_GE(s01.am_messages, 20u) << "the notifications via n0r1";
    EXPECT_GT(s10.am_messages, 0u) << "the target's answers via n1r0";
    EXPECT_EQ(0u, s01.failed + s01.rejected + s10.failed + s10.rejected);
}

/* An MPI program over UCX: Open MPI's pml ucx and osc ucx running
 * test/apps/mpi_rail_check.c (tagged ping-pong 8 B - 1 MiB, eager and
 * rendezvous; one-sided puts into a window; every byte checked), rank 0 on
 * node 0 rail 0 and rank 1 on node 1 rail 1, each rank's UCX on its own
 * rail NIC. mpirun runs in rank 0's namespace and starts the ranks through
 * an rsh agent whose "hosts" are namespaces; Open MPI wires itself over the
 * frontend. */
class PxnMpi : public PxnUcp {
protected:
    void SetUp() override
    {
        PxnUcp::SetUp();
        if (IsSkipped() || HasFatalFailure()) {
            return;
        }
        if ((access(pxn_test::app("mpi_rail_check").c_str(), X_OK) != 0) ||
            (pxn_test::run_program({"/bin/sh", "-c", "command -v mpirun"}).exit_code != 0)) {
            GTEST_SKIP() << "no Open MPI (configure's 'MPI (tests)' line; "
                            "contrib/deps.sh installs it)";
        }
    }

    std::string ns(Slot s) const
    {
        return std::string(kPrefix) + "-n" + std::to_string(s.node) + "r" +
               std::to_string(s.rail);
    }

    std::string script(const std::string &name, const std::string &text) const
    {
        const std::string path = logs_->path() + "/" + name;
        std::ofstream(path) << text;
        chmod(path.c_str(), 0755);
        return path;
    }

    /* mpirun with `tls` in every rank: its exit status and output */
    std::pair<int, std::string> mpirun(const std::string &tls, unsigned iters)
    {
        const std::string rsh = script("netns_rsh", "#!/bin/bash\nhost=$1; shift\n"
                                       "exec ip netns exec \"$host\" bash -c \"$*\"\n");
        /* a rank's environment from its namespace <prefix>-n<node>r<rail> */
        const std::string env = script(
                "rank_env",
                "#!/bin/bash\nns=$(ip netns identify $$)\n"
                "n=${ns##*-n}; n=${n%%r*}; r=${ns##*r}\n"
                "[ $n = 0 ] && g=" + group(0) + " || g=" + group(1) + "\n"
                "export UCX_PXN_NODE_ID=node$n UCX_PXN_GROUP=$g UCX_TLS=" + tls +
                " UCX_PXN_NET_TLS=tcp UCX_PXN_HOME_DEVICE=rail$r "
                "UCX_NET_DEVICES=rail$r LD_LIBRARY_PATH=" + pxn_test::ucx_prefix() +
                "/lib\nexec \"$@\"\n");
        BackgroundProcess *p = spawn(
                "mpirun", Inner::kRailOnly, kClient,
                {"/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
                 "--host", ns(kClient) + "," + ns(kServer), "--mca", "plm_rsh_agent",
                 rsh, "--mca", "oob_tcp_if_include", "front", "--mca", "btl", "self",
                 "--mca", "rtc", "^hwloc", /* its shared topology file crashed
                                              orted now and then */
                 "--mca", "pml", "ucx", "--mca", "osc", "ucx", "--mca", "pml_ucx_tls",
                 "any", "--mca", "pml_ucx_devices", "any", env,
                 pxn_test::app("mpi_rail_check"), std::to_string(iters)});
        if (p == nullptr) {
            return {-1000, ""};
        }
        const int status = p->wait(scaled_ms(120000));
        return {status, p->output()};
    }
};

TEST_F(PxnMpi, RailOnlyMpiProgramMovesVerifiedDataThroughPxnAlone)
{
    BackgroundProcess *r01 = relay(Inner::kRailOnly, kRelay01);
    BackgroundProcess *r10 = relay(Inner::kRailOnly, kRelay10);
    ASSERT_TRUE(r01 && r10);
    const auto run = mpirun("pxn,tcp", 20);
    EXPECT_EQ(0, run.first) << tail(run.second);
    EXPECT_NE(std::string::npos, run.second.find("verified: ok")) << tail(run.second);
    std::cout << run.second.substr(0, run.second.find("verified"));
    const RelayStats s01 = stop_relay(r01), s10 = stop_relay(r10);
    /* 20 round trips of 1 MiB each way, and the 4 MiB window */
    EXPECT_GE(s01.bytes, 24 * kMiB);
    EXPECT_GE(s10.bytes, 20 * kMiB);
    EXPECT_EQ(0u, s01.failed + s01.rejected + s10.failed + s10.rejected);
}

TEST_F(PxnMpi, RailOnlyMpiProgramCannotReachTheOtherRailWithoutPxn)
{
    const auto run = mpirun("tcp", 2);
    EXPECT_NE(0, run.first) << tail(run.second);
    EXPECT_EQ(std::string::npos, run.second.find("verified: ok"));
}

} // namespace
} // namespace pxn_test
