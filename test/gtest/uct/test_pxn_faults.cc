/*
 * Failure behaviour beyond a killed relay or sender (test_pxn_put.cc): a
 * relay killed before any publication, restarted under held pieces or
 * killed at random moments (while it writes completions), a frozen relay
 * (and the fence that keeps what its sender failed from going out after
 * it thaws), a target dying under the relay's writes, two relays on one rail, a
 * sequence wrap, and a hostile process scribbling over its lane.
 * Every wait is bounded; bytes and canaries are verified.
 */
#include "pxn_transfer.h"

#include <ucs/pxn/seq.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <random>

using pxn_test::PeerProcess;
using pxn_test::PxnTransfer;
using pxn_test::Target;
using pxn_test::kSlot;
using pxn_test::kSlots;
using pxn_test::scaled_ms;
using pxn_test::scaled_s;
using pxn_tools::BackgroundProcess;
using pxn_tools::split;

namespace {

class PxnFaults : public PxnTransfer {
protected:
    /* Seconds until `peer` answers its pending command; -1 if it does not
     * within timeout_ms. */
    static double seconds_to_answer(PeerProcess *peer, std::string *answer,
                                    int timeout_ms)
    {
        const auto start = std::chrono::steady_clock::now();
        *answer = peer->receive(timeout_ms);
        return answer->empty() ? -1 :
               std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                             start).count();
    }

    /* Where a dead or frozen relay must be noticed by its heartbeat: the
     * credit timeout (1 s by default, as long as the tests' heartbeat
     * timeout) would otherwise race it for the queued operations. */
    static inline const std::vector<std::string> kHeartbeatDecides = {
            "UCX_PXN_CREDIT_TIMEOUT=20s"};

    /* Until `relay` has forwarded a piece: a put through it is under way. */
    bool wait_forwarding(PeerProcess *relay)
    {
        return wait_counters(0, relay, [](const auto &c) {
            return c.relay.pieces >= 1;
        });
    }

    std::string put_cmd(const Target &t, size_t bytes, size_t chunk)
    {
        return "put zcopy " + t.addr + " " + t.rkey + " " + std::to_string(bytes) +
               " " + std::to_string(chunk) + " 0";
    }
};

TEST_F(PxnFaults, RelayKilledBeforeAnyPublicationFailsTheNextPutAtOnce)
{
    /* The heartbeat stays fresh throughout: the relay's exit is seen from
     * its pid before the put publishes anything. */
    const std::vector<std::string> env = {"UCX_PXN_HEARTBEAT_TIMEOUT=20s"};
    const size_t size = 4 << 20;
    auto [relay, target, sender, t] = cross_rail(size, 97, env);
    ASSERT_TRUE(relay && target && sender);
    relay->kill(SIGKILL);
    relay->wait(scaled_ms(5000));

    /* Rail-only: nothing was published and there is no other path. */
    std::string done;
    ASSERT_TRUE(sender->send(put_cmd(t, size, 1 << 20)));
    const double waited = seconds_to_answer(sender, &done, scaled_ms(30000));
    ASSERT_GE(waited, 0) << "sender hung";
    /* scaled, but well below the 20 s heartbeat timeout */
    EXPECT_LT(waited, std::min(scaled_s(1.0), 10.0));
    EXPECT_EQ(ucs_status_string(UCS_ERR_UNREACHABLE), status_of(done));
    const auto c = counters(0, sender);
    EXPECT_EQ(0u, c.sender.pieces);
    EXPECT_EQ(0u, c.sender.fallback_bytes);

    /* A relay started on that rail carries a new endpoint's puts. */
    PeerProcess *restarted = tcp_peer(0, 1, env);
    ASSERT_NE(nullptr, restarted);
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    EXPECT_EQ("Success", put(sender, t, size, 1 << 20));
    EXPECT_EQ("ok", target->call("check 97 0 " + std::to_string(size)));
    expect_healthy(0, restarted, size);
}

TEST_F(PxnFaults, RelayRestartedWhileTheSenderHoldsPiecesFailsThemAndCarriesNewOnes)
{
    const size_t size = 256 << 20;
    auto [relay, target, sender, t] = cross_rail(size, 101, kHeartbeatDecides);
    ASSERT_TRUE(relay && target && sender);
    ASSERT_TRUE(sender->send(put_cmd(t, size, 1 << 20)));
    ASSERT_TRUE(wait_forwarding(relay)) << "the put did not start";
    relay->kill(SIGKILL);
    PeerProcess *restarted = tcp_peer(0, 1); /* a new epoch, before the
                                                old heartbeat goes stale */
    ASSERT_NE(nullptr, restarted);

    /* The pieces of the old epoch fail; the new relay never sees them. */
    std::string done;
    const double waited = seconds_to_answer(sender, &done, scaled_ms(10000));
    ASSERT_GE(waited, 0) << "sender hung";
    /* scaled, but well below the 20 s credit timeout */
    EXPECT_LT(waited, std::min(scaled_s(5.0), 10.0));
    EXPECT_EQ(ucs_status_string(UCS_ERR_ENDPOINT_TIMEOUT), status_of(done));
    EXPECT_EQ(0u, counters(0, restarted).relay.bytes);

    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    EXPECT_EQ("Success", put(sender, t, 8 << 20, 1 << 20));
    EXPECT_EQ("ok", target->call("check 101 0 8388608"));
    expect_healthy(0, restarted, 8 << 20);
}

TEST_F(PxnFaults, RelayKilledAtRandomMomentsNeverHangsTheSenderNorSpoilsLaterPuts)
{
    /* One-slot pieces: the relay writes a completion every few tens of
     * microseconds, so the kills land in completion writes too. */
    const size_t size = 32 << 20;
    auto [first, target, sender, t] = cross_rail(size, 103, kHeartbeatDecides);
    ASSERT_TRUE(first && target && sender);
    ASSERT_TRUE(wait_heartbeat_stale(kill_relay(0, first))); /* goes stale */

    /* Each round kills the relay once it has completed a random number of
     * the put's 512 pieces: inside the put, wherever it stands. */
    std::mt19937 random(::testing::UnitTest::GetInstance()->random_seed());
    int failed = 0;
    for (int round = 0; round < 4; ++round) {
        PeerProcess *relay = tcp_peer(0, 1);
        ASSERT_NE(nullptr, relay);
        ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
        ASSERT_TRUE(sender->send(put_cmd(t, size, kSlot)));
        const uint64_t pieces = std::uniform_int_distribution<uint64_t>(
                1, size / kSlot / 2)(random);
        /* Not asserted: the kill comes anyway (at the latest after the
         * bound, as before). Fine polling: a piece takes tens of us. */
        wait_counters(0, relay, [pieces](const auto &c) {
            return c.relay.pieces >= pieces;
        }, 2, 0.0001);
        const pid_t    relay_pid = relay->pid();
        const uint64_t killed    = monotonic_ns();
        relay->kill(SIGKILL);
        std::string done;
        ASSERT_GE(seconds_to_answer(sender, &done, scaled_ms(10000)), 0)
                << "sender hung in round " << round;
        const std::string status = status_of(done);
        EXPECT_TRUE((status == "Success") ||
                    (status == ucs_status_string(UCS_ERR_ENDPOINT_TIMEOUT)))
                << status;
        failed += (status != "Success");
        EXPECT_NE(-1000, relay->wait(scaled_ms(5000))) << "not reaped";
        /* its heartbeat goes stale */
        ASSERT_TRUE(wait_heartbeat_stale(last_heartbeat(0, relay_pid, killed)));
    }
    EXPECT_GE(failed, 1) << "no kill landed inside a put";

    /* Whatever the dead relays left half-done, a new one carries all. */
    PeerProcess *relay = tcp_peer(0, 1);
    ASSERT_NE(nullptr, relay);
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    EXPECT_EQ("Success", put(sender, t, size, 1 << 20));
    EXPECT_EQ("ok", target->call("check 103 0 " + std::to_string(size)));
    expect_healthy(0, relay, size);
}

TEST_F(PxnFaults, KilledRelayIsNoticedLongBeforeItsHeartbeatGoesStale)
{
    const std::vector<std::string> env = {"UCX_PXN_HEARTBEAT_TIMEOUT=20s",
                                          "UCX_PXN_CREDIT_TIMEOUT=20s"};
    const size_t size = 256 << 20;
    auto [relay, target, sender, t] = cross_rail(size, 109, env);
    ASSERT_TRUE(relay && target && sender);
    ASSERT_TRUE(sender->send(put_cmd(t, size, 1 << 20)));
    ASSERT_TRUE(wait_forwarding(relay)) << "the put did not start";
    relay->kill(SIGKILL);

    std::string done;
    const double waited = seconds_to_answer(sender, &done, scaled_ms(30000));
    ASSERT_GE(waited, 0) << "sender hung";
    /* scaled, but well below the heartbeat timeout */
    EXPECT_LT(waited, std::min(scaled_s(2.0), 10.0)) << "the heartbeat timeout is 20 s";
    EXPECT_EQ(ucs_status_string(UCS_ERR_ENDPOINT_TIMEOUT), status_of(done));

    /* A relay started at once carries a new endpoint: the dead one's entry,
     * its heartbeat still fresh, is passed over. */
    PeerProcess *restarted = tcp_peer(0, 1, env);
    ASSERT_NE(nullptr, restarted);
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    EXPECT_EQ("Success", put(sender, t, 8 << 20, 1 << 20));
    EXPECT_EQ("ok", target->call("check 109 0 8388608"));
    expect_healthy(0, restarted, 8 << 20);
}

TEST_F(PxnFaults, RelayFrozenPastTheHeartbeatTimeoutFailsItsPiecesAndRecovers)
{
    const size_t size = 256 << 20;
    auto [relay, target, sender, t] = cross_rail(size, 61, kHeartbeatDecides);
    ASSERT_TRUE(relay && target && sender);
    ASSERT_TRUE(sender->send(put_cmd(t, size, 1 << 20)));
    ASSERT_TRUE(wait_forwarding(relay)) << "the put did not start";
    ASSERT_TRUE(relay->stop()); /* frozen, not dead: its pid stays alive */

    /* Heartbeat timeout kHeartbeatTimeout; a rail-only fabric has no direct path. */
    std::string done;
    const double waited = seconds_to_answer(sender, &done, scaled_ms(10000));
    ASSERT_GE(waited, 0) << "sender hung behind a frozen relay";
    /* scaled, but well below the 20 s credit timeout */
    EXPECT_LT(waited, std::min(scaled_s(5.0), 10.0));
    EXPECT_EQ(ucs_status_string(UCS_ERR_ENDPOINT_TIMEOUT), status_of(done));
    EXPECT_GE(counters(0, sender).sender.failed_ops, 1u);

    /* Thawed, its heartbeat is fresh again: a new endpoint (the failed one
     * stays failed, as UCT wants) goes through it. */
    const uint64_t frozen_beat = heartbeat_ns(0, relay->pid());
    ASSERT_NE(0u, frozen_beat);
    relay->kill(SIGCONT);
    ASSERT_TRUE(pxn_test::wait_until([&] {
        return heartbeat_ns(0, relay->pid()) > frozen_beat;
    }, 5)) << "no heartbeat after SIGCONT";
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    EXPECT_EQ("Success", put(sender, t, 1 << 20, 65536));
    EXPECT_EQ("ok", target->call("check 61 0 1048576"));
}

/* The fence: a relay frozen while it forwards is declared dead by its
 * sender, which fails every published piece; thawed, the relay finishes
 * the piece it had handed to its inner transport, and forwards none of
 * the pieces it had not taken yet (one in flight at most here, so that
 * published pieces wait in the ring). */
TEST_F(PxnFaults, PiecesFailedOnAFrozenRelayAreNeverForwardedAfterItThaws)
{
    std::vector<std::string> env = kHeartbeatDecides;
    env.push_back("UCX_PXN_INFLIGHT_DEPTH=1");
    const size_t size = 64 << 20;
    auto [relay, target, sender, t] = cross_rail(size, 73, env);
    ASSERT_TRUE(relay && target && sender);
    ASSERT_TRUE(sender->send(put_cmd(t, size, 1 << 20)));
    ASSERT_TRUE(wait_forwarding(relay)) << "the put did not start";
    ASSERT_TRUE(relay->stop());
    const pxn::abi::RelayCounters frozen = counters(0, relay).relay;
    const uint64_t taken = frozen.pieces + frozen.failed_pieces + frozen.inflight;

    std::string done;
    ASSERT_GE(seconds_to_answer(sender, &done, scaled_ms(10000)), 0)
            << "sender hung behind a frozen relay";
    EXPECT_EQ(ucs_status_string(UCS_ERR_ENDPOINT_TIMEOUT), status_of(done));
    const uint64_t published = counters(0, sender).sender.pieces;
    ASSERT_GT(published, taken) << "no piece waited in the ring: nothing to fence";

    const uint64_t beat = heartbeat_ns(0, relay->pid());
    relay->kill(SIGCONT);
    ASSERT_TRUE(pxn_test::wait_until([&] {
        return heartbeat_ns(0, relay->pid()) > beat;
    }, 5)) << "no heartbeat after SIGCONT";
    /* the piece it had taken ends; none it had not taken goes out (fenced,
     * or dropped with the lane its sender released) */
    ASSERT_TRUE(wait_counters(0, relay, [](const auto &c) {
        return c.relay.inflight == 0;
    }, 5));
    pxn_test::hold_for(0.3, "a thawed relay forwards what is in its ring within "
                            "microseconds");
    const pxn::abi::RelayCounters thawed = counters(0, relay).relay;
    EXPECT_LE(thawed.pieces + thawed.failed_pieces, taken)
            << "pieces published before the freeze went out after the sender "
               "had reported them failed";
}

TEST_F(PxnFaults, TargetKilledUnderTheRelaysWritesFailsOnlyItsOwnOperations)
{
    PeerProcess *relay   = tcp_peer(0, 1);
    PeerProcess *doomed  = tcp_peer(1, 1);
    PeerProcess *healthy = tcp_peer(1, 1);
    PeerProcess *first   = tcp_peer(0, 0);
    PeerProcess *second  = tcp_peer(0, 2);
    ASSERT_TRUE(relay && doomed && healthy && first && second);

    const size_t big = 256 << 20, small = 32 << 20;
    Target a = target_buffer(doomed, big);
    Target b = target_buffer(healthy, small);
    source_buffer(first, big, 67);
    source_buffer(second, small, 71);
    ASSERT_EQ("ok", first->call("connect " + a.dev + " " + a.iface));
    ASSERT_EQ("ok", second->call("connect " + b.dev + " " + b.iface));

    ASSERT_TRUE(first->send(put_cmd(a, big, 1 << 20)));
    /* Under the relay's writes: it forwards first's pieces to the target. */
    ASSERT_TRUE(wait_forwarding(relay)) << "the put did not start";
    doomed->kill(SIGKILL);
    EXPECT_EQ("Success", put(second, b, small, 1 << 20));
    EXPECT_EQ("ok", healthy->call("check 71 0 " + std::to_string(small)));

    std::string done;
    ASSERT_GE(seconds_to_answer(first, &done, scaled_ms(20000)), 0) << "sender hung";
    EXPECT_NE("Success", status_of(done));
    EXPECT_GE(counters(0, first).sender.failed_ops, 1u);
    EXPECT_EQ(0u, counters(0, second).sender.failed_ops);
    const auto c = counters(0, relay);
    EXPECT_GE(c.relay.failed_pieces, 1u);
    EXPECT_GE(c.relay.bytes, small);
    /* The relay serves on. */
    EXPECT_EQ("Success", put(second, b, small, 1 << 20));
}

TEST_F(PxnFaults, TwoRelaysOnOneRailTheOldestCarriesTheTraffic)
{
    PeerProcess *older  = tcp_peer(0, 1);
    ASSERT_NE(nullptr, older);
    /* Start times are counted in clock ticks: the newer one starts in a
     * later tick than the older one. */
    const unsigned long long older_start = pxn_test::process_start_ticks(older->pid());
    ASSERT_NE(0u, older_start);
    ASSERT_TRUE(pxn_test::wait_until([&] {
        return pxn_test::boot_ticks() > older_start;
    }, 1)) << "the clock tick does not advance";
    PeerProcess *newer  = tcp_peer(0, 1);
    PeerProcess *target = tcp_peer(1, 1);
    PeerProcess *sender = tcp_peer(0, 0);
    ASSERT_TRUE(older && newer && target && sender);
    ASSERT_LT(older_start, pxn_test::process_start_ticks(newer->pid()));

    const size_t size = 4 << 20;
    Target t = target_buffer(target, size);
    source_buffer(sender, size, 73);
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    EXPECT_EQ("Success", put(sender, t, size / 2, 65536));
    EXPECT_EQ(size / 2, counters(0, older).relay.bytes);
    EXPECT_EQ(0u, counters(0, newer).relay.bytes);

    /* The older one gone (its heartbeat stale), the newer one takes the
     * rail. */
    ASSERT_TRUE(wait_heartbeat_stale(kill_relay(0, older)));
    EXPECT_EQ("Success", put(sender, t, size / 2, 65536, size / 2));
    EXPECT_EQ("ok", target->call("check 73 0 " + std::to_string(size)));
    EXPECT_EQ(size / 2, counters(0, newer).relay.bytes);
}

TEST_F(PxnFaults, SequenceWrapDrainsAndReestablishesTheLaneWithoutLosingAPiece)
{
    const uint64_t near_limit = pxn::kDefaultSeqLimit - 10;
    PeerProcess *relay  = tcp_peer(0, 1);
    PeerProcess *target = tcp_peer(1, 1);
    PeerProcess *sender = tcp_peer(0, 0, {"UCX_PXN_INITIAL_SEQ=" +
                                          std::to_string(near_limit)});
    ASSERT_TRUE(relay && target && sender);

    const size_t size = 16 * kSlots * kSlot; /* 64 pieces: 10, then a new epoch */
    Target t = target_buffer(target, size);
    source_buffer(sender, size, 79);
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    EXPECT_EQ("Success", put(sender, t, size, kSlot));
    EXPECT_EQ("ok", target->call("check 79 0 " + std::to_string(size)));
    const auto c = counters(0, relay);
    EXPECT_EQ(size, c.relay.bytes);
    EXPECT_EQ(0u, c.relay.rejected);
    EXPECT_EQ(2u, c.relay.lane_resets); /* the claim, then the new epoch */
    EXPECT_EQ(size / kSlot, counters(0, sender).sender.pieces);
}

TEST_F(PxnFaults, HostileLaneNeitherStopsTheRelayNorReachesTargetMemory)
{
    const size_t size = 8 << 20;
    auto [relay, target, sender, t] = cross_rail(size, 83);
    ASSERT_TRUE(relay && target && sender);
    EXPECT_EQ("Success", put(sender, t, 1 << 20, 65536)); /* lane and route up */

    BackgroundProcess hostile;
    std::string error;
    ASSERT_TRUE(hostile.start("", {},
                              {pxn_test::app("pxn_hostile_sender"),
                               group(0), "node0", "rail1", "4", "89"},
                              "/tmp/pxn-hostile-" + group(0) + ".log", &error))
            << error;
    /* While it scribbles: the honest sender's puts all arrive intact. */
    for (size_t offset = 0; offset < size; offset += 1 << 20) {
        EXPECT_EQ("Success", put(sender, t, 1 << 20, 65536, offset));
    }
    EXPECT_EQ(0, hostile.wait(scaled_ms(20000))) << hostile.output();
    EXPECT_NE(std::string::npos, hostile.output().find("hostile: ")) << hostile.output();

    EXPECT_EQ("ok", target->call("check 83 0 " + std::to_string(size)));
    const auto c = counters(0, relay);
    EXPECT_GT(c.relay.rejected, 0u);
    EXPECT_EQ(0u, c.relay.failed_pieces);
    /* After it: the relay still serves, the target still answers. */
    EXPECT_EQ("Success", put(sender, t, size, 1 << 20));
    EXPECT_EQ("ok", target->call("check 83 0 " + std::to_string(size)));
}

} // namespace
