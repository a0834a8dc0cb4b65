/*
 * UCP across a rail-only fabric where every process's UCX sees only its own
 * rail NIC (Inner::kRailOnly, pxn_ucp.h): pxn is the only way to a peer on
 * another rail, for every protocol, wireup included. UCX's ucx_perftest
 * (its own out-of-band exchange over the frontend) runs each test with
 * eager and rendezvous sizes; every lane of the client's endpoint must be
 * pxn's, and the relays must have carried the bytes.
 */
#include "pxn_ucp.h"

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

/* NIXL's way (ucp_rma_check --nixl: RMA and AM features, peer error mode,
 * puts flushed, then an active-message notification the target answers),
 * every byte checked, on the rail-only fabric: all of it through pxn. */
TEST_F(PxnUcp, RailOnlyNixlStylePutsAndNotificationsThroughPxnAlone)
{
    constexpr unsigned kRounds = 2;
    BackgroundProcess *r01 = relay(Inner::kRailOnly, kRelay01);
    BackgroundProcess *r10 = relay(Inner::kRailOnly, kRelay10);
    BackgroundProcess *target = rma_target(14311, {}, {"--nixl"}, Inner::kRailOnly);
    ASSERT_TRUE(r01 && r10 && target);
    BackgroundProcess *in = rma_initiator(
            14311, {"--nixl", "--no-get", "--rounds", std::to_string(kRounds),
                    "--deadline", deadline(30)},
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
    const RelayStats s01 = stop_relay(r01), s10 = stop_relay(r10);
    EXPECT_GE(s01.bytes, kRounds * (64ull << 20)) << "puts via n0r1";
    EXPECT_GT(s10.pieces, 0u) << "the target's answers via n1r0";
    EXPECT_EQ(0u, s01.failed + s01.rejected + s10.failed + s10.rejected);
}

} // namespace
} // namespace pxn_test
