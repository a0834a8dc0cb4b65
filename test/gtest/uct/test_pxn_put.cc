/*
 * Cross-rail puts and gets through a real relay process, at the UCT level
 * (fixture: pxn_transfer.h).
 */
#include "pxn_transfer.h"

#include <csignal>
#include <thread>

using pxn_test::PeerProcess;
using pxn_test::PxnTransfer;
using pxn_test::Target;
using pxn_test::kSlot;
using pxn_test::kSlots;
using pxn_test::scaled_ms;
using pxn_tools::split;

namespace {

/* "<device address> <iface address>" of a peer, as "reachable" takes them. */
std::string addr(PeerProcess *p)
{
    const auto info = split(p->call("info"));
    return info[1] + " " + info[2];
}

/* The direct paths of the benchmarks and of contrib/demo.sh: a process of
 * the inner transport alone registers its buffer and answers with its
 * address (cma and tcp have no rkey: "-"). */
TEST(PxnPeer, InnerTransportPeersAllocateRegisteredBuffers)
{
    for (const char *md : {"cma", "tcp"}) {
        PeerProcess p;
        std::string error;
        ASSERT_TRUE(p.start(pxn_test::app("ucx_pxn_peer"), "", {}, md, md,
                            (std::string(md) == "tcp") ? "lo" : "memory", &error))
                << md << ": " << error;
        const auto alloc = split(p.call("alloc 4096"));
        ASSERT_EQ(3u, alloc.size()) << md;
        EXPECT_EQ("alloc", alloc[0]) << md;
        EXPECT_EQ("-", alloc[2]) << md;
        EXPECT_EQ("ok", p.call("fill 5")) << md;
        p.send("quit");
        EXPECT_EQ(0, p.wait(10000)) << md;
    }
}

TEST_F(PxnTransfer, SameRailAndSameNodePeersAreNotReachable)
{
    PeerProcess *relay  = tcp_peer(0, 1);
    PeerProcess *sender = tcp_peer(0, 0);
    PeerProcess *same_rail = tcp_peer(1, 0);
    PeerProcess *cross     = tcp_peer(1, 1);
    ASSERT_TRUE(relay && sender && same_rail && cross);

    EXPECT_EQ("0", sender->call("reachable " + addr(same_rail)));
    EXPECT_EQ("0", sender->call("reachable " + addr(relay)));
    EXPECT_EQ("1", sender->call("reachable " + addr(cross)));
}

/* UCP of UCX 1.15 on asks with a scope (a peer reachable at DEVICE scope
 * makes the endpoint intra-node), and 1.18 on reads the iface's
 * UCT_IFACE_FLAG_INTER_NODE: a pxn peer is on another node and rail,
 * reachable over the network only, never as the same device. */
TEST_F(PxnTransfer, CrossRailPeerIsReachableOverTheNetworkNeverAsTheSameDevice)
{
    PeerProcess *relay     = tcp_peer(0, 1);
    PeerProcess *sender    = tcp_peer(0, 0);
    PeerProcess *same_rail = tcp_peer(1, 0);
    PeerProcess *cross     = tcp_peer(1, 1);
    ASSERT_TRUE(relay && sender && same_rail && cross);

    const std::string network = sender->call("reachable_v2 network " + addr(cross));
    const std::string inter   = sender->call("inter_node");
    if ((network == "unsupported") && (inter == "unsupported")) {
        GTEST_SKIP() << "this UCX has neither scoped reachability (1.15 on) "
                        "nor UCT_IFACE_FLAG_INTER_NODE (1.18 on)";
    }
    if (network != "unsupported") {
        EXPECT_EQ("1", network);
        EXPECT_EQ("0", sender->call("reachable_v2 device " + addr(cross)));
        EXPECT_EQ("0", sender->call("reachable_v2 network " + addr(same_rail)));
        EXPECT_EQ("0", sender->call("reachable_v2 device " + addr(same_rail)));
        EXPECT_EQ("0", sender->call("reachable_v2 network " + addr(relay)));
    }
    if (inter != "unsupported") {
        EXPECT_EQ("1", inter);
    }
}

TEST_F(PxnTransfer, CrossRail10KiBGoesThroughTheRelay)
{
    const size_t size = 10240;
    auto [relay, target, sender, t] = cross_rail(size, 7);
    ASSERT_TRUE(relay && target && sender);
    EXPECT_EQ("Success", put(sender, t, size, size));
    EXPECT_EQ("ok", target->call("check 7 0 " + std::to_string(size)));
    expect_healthy(0, relay, size);
    EXPECT_EQ(size, counters(0, sender).sender.bytes);
}

/* ucx_pxn_first_bench unpacks the target's rkey before its first transfer
 * ("rkey", timed); the transfers after it use the rkey kept then. */
TEST_F(PxnTransfer, PeerUnpacksARkeyAheadAndItsPutsUseIt)
{
    const size_t size = 4096;
    auto [relay, target, sender, t] = cross_rail(size, 3);
    ASSERT_TRUE(relay && target && sender);
    const auto unpacked = split(sender->call("rkey " + t.rkey));
    ASSERT_EQ(2u, unpacked.size());
    EXPECT_EQ("rkey", unpacked[0]);
    EXPECT_GT(std::stoull(unpacked[1]), 0u); /* it did unpack, in some ns */
    EXPECT_EQ("Success", put(sender, t, size, size));
    EXPECT_EQ("ok", target->call("check 3 0 " + std::to_string(size)));
}

TEST_F(PxnTransfer, EpToEpModelConnectsThroughRelayEps)
{
    const std::vector<std::string> ep_model = {"UCX_PXN_NET_CONNECT=ep"};
    PeerProcess *relay  = tcp_peer(0, 1, ep_model);
    PeerProcess *target = tcp_peer(1, 1, ep_model);
    PeerProcess *sender = tcp_peer(0, 0, ep_model);
    ASSERT_TRUE(relay && target && sender);

    const size_t size = 3 * kSlot + 123;
    Target t = target_buffer(target, size);
    source_buffer(sender, size, 9);
    EXPECT_EQ("1", split(sender->call("info"))[3]) << "not the ep-to-ep model";
    auto sender_ep = split(sender->call("ep_addr"));
    auto target_ep = split(target->call("ep_addr"));
    ASSERT_EQ(2u, sender_ep.size());
    ASSERT_EQ(2u, target_ep.size());
    const std::string sender_dev = split(sender->call("info"))[1];
    ASSERT_EQ("ok", sender->call("connect_ep " + t.dev + " " + target_ep[1]));
    ASSERT_EQ("ok", target->call("connect_ep " + sender_dev + " " + sender_ep[1]));
    EXPECT_EQ("Success", put(sender, t, size, 10000));
    EXPECT_EQ("ok", target->call("check 9 0 " + std::to_string(size)));
    expect_healthy(0, relay, size);
}

TEST_F(PxnTransfer, PiecesAroundTheSlotSizeArriveIntact)
{
    const size_t size = 4 * kSlot;
    auto [relay, target, sender, t] = cross_rail(size, 3);
    ASSERT_TRUE(relay && target && sender);
    size_t offset = 0;
    for (size_t bytes : {kSlot - 1, kSlot, kSlot + 1}) {
        EXPECT_EQ("Success", put(sender, t, bytes, bytes, offset)) << bytes;
        EXPECT_EQ("ok", target->call("check 3 " + std::to_string(offset) + " " +
                                     std::to_string(bytes))) << bytes;
        offset += bytes;
    }
    expect_healthy(0, relay, 3 * kSlot);
}

TEST_F(PxnTransfer, ShortAndBcopyPutsAreStagedAtOnce)
{
    const size_t size = 200000;
    auto [relay, target, sender, t] = cross_rail(size, 5);
    ASSERT_TRUE(relay && target && sender);
    EXPECT_EQ("Success", put(sender, t, 100000, 1000, 0, "short"));
    EXPECT_EQ("Success", put(sender, t, 100000, 30000, 100000, "bcopy"));
    EXPECT_EQ("ok", target->call("check 5 0 " + std::to_string(size)));
    expect_healthy(0, relay, size);
}

TEST_F(PxnTransfer, FullRingMakesThePieceAfterKWaitForSlotZero)
{
    const std::vector<std::string> slow = {"UCX_PXN_HEARTBEAT_TIMEOUT=10s",
                                           "UCX_PXN_CREDIT_TIMEOUT=20s"};
    PeerProcess *relay  = tcp_peer(0, 1, slow);
    PeerProcess *target = tcp_peer(1, 1, slow);
    PeerProcess *sender = tcp_peer(0, 0, slow);
    ASSERT_TRUE(relay && target && sender);

    const size_t size = (kSlots + 1) * kSlot;
    Target t = target_buffer(target, size);
    source_buffer(sender, size, 11);
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));

    ASSERT_TRUE(relay->stop());
    ASSERT_TRUE(sender->send("put zcopy " + t.addr + " " + t.rkey + " " +
                             std::to_string(size) + " " + std::to_string(size) +
                             " 0"));
    /* K pieces fill the ring; the K+1-th has no credit while nothing is
     * reaped. */
    EXPECT_TRUE(wait_counters(0, sender, [](const auto &c) {
        return (c.sender.pieces >= kSlots) && (c.sender.credit_stalls >= 1);
    }, 2)) << "the ring did not fill";
    /* The negative: no event says that something will not happen, so it
     * gets a short while to (it would within microseconds). */
    pxn_test::hold_for(0.2, "a stopped relay: piece K+1 must stay unpublished "
                            "and the put incomplete");
    EXPECT_EQ(kSlots, counters(0, sender).sender.pieces);
    EXPECT_GE(counters(0, sender).sender.credit_stalls, 1u);
    EXPECT_EQ("", sender->receive(10)) << "completed without the relay";

    relay->kill(SIGCONT);
    EXPECT_EQ("Success", status_of(sender->receive(scaled_ms(20000))));
    EXPECT_EQ(kSlots + 1, counters(0, sender).sender.pieces);
    EXPECT_EQ(kSlots + 1, counters(0, relay).relay.pieces);
    EXPECT_EQ("ok", target->call("check 11 0 " + std::to_string(size)));
}

/* 100 puts of 500 bytes posted back to back (no progress in between) behind
 * a stopped relay, then a flush: the pieces the sender published, counted
 * while the relay cannot reap any; then the relay resumes and every byte
 * must arrive. */
class PxnPieceOps : public PxnTransfer {
protected:
    uint64_t pieces_of_small_puts(const std::string &piece_ops)
    {
        const std::vector<std::string> env = {"UCX_PXN_PIECE_OPS=" + piece_ops,
                                              "UCX_PXN_HEARTBEAT_TIMEOUT=10s",
                                              "UCX_PXN_CREDIT_TIMEOUT=20s"};
        PeerProcess *relay  = tcp_peer(0, 1, env);
        PeerProcess *target = tcp_peer(1, 1, env);
        PeerProcess *sender = tcp_peer(0, 0, env);
        if (!relay || !target || !sender) {
            ADD_FAILURE() << "peers did not start";
            return 0;
        }
        const size_t size = 100 * 500;
        Target t = target_buffer(target, size);
        source_buffer(sender, size, 19);
        EXPECT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
        EXPECT_TRUE(relay->stop());
        EXPECT_TRUE(sender->send("put zcopy " + t.addr + " " + t.rkey + " " +
                                 std::to_string(size) + " 500 0"));
        EXPECT_TRUE(wait_counters(0, sender, [](const auto &c) {
            return c.sender.pieces >= 1;
        }, 2));
        pxn_test::hold_for(0.2, "a stopped relay: the pieces published while "
                                "posting and by the flush, no more");
        const uint64_t pieces = counters(0, sender).sender.pieces;
        relay->kill(SIGCONT);
        EXPECT_EQ("Success", status_of(sender->receive(scaled_ms(20000))));
        EXPECT_EQ("ok", target->call("check 19 0 " + std::to_string(size)));
        return pieces;
    }
};

/* Three pieces of 32 go out while posting (a slot free for the next), the
 * fourth (4 operations, the ring's last slot) with the flush. */
TEST_F(PxnPieceOps, SmallOperationsGoOutInPiecesOfPieceOpsWhileTheRingHasRoom)
{
    EXPECT_EQ(kSlots, pieces_of_small_puts("32"));
}

TEST_F(PxnPieceOps, PieceOpsZeroFillsOnePieceUntilTheFlush)
{
    EXPECT_EQ(1u, pieces_of_small_puts("0"));
}

TEST_F(PxnTransfer, SixtyFourSlotsOfDataTakeManyRingRounds)
{
    const size_t size = 64 * kSlot + 777;
    auto [relay, target, sender, t] = cross_rail(size, 13);
    ASSERT_TRUE(relay && target && sender);
    EXPECT_EQ("Success", put(sender, t, size, 100003));
    EXPECT_EQ("ok", target->call("check 13 0 " + std::to_string(size)));
    expect_healthy(0, relay, size);
    EXPECT_GE(counters(0, relay).relay.pieces, 65u);
}

TEST_F(PxnTransfer, SevenSendersShareOneRelay)
{
    PeerProcess *relay  = tcp_peer(0, 7);
    PeerProcess *target = tcp_peer(1, 7);
    ASSERT_TRUE(relay && target);
    const size_t part = 1 << 20, size = 7 * part;
    Target t = target_buffer(target, size);

    std::vector<PeerProcess*> senders;
    for (int rail = 0; rail < 7; ++rail) {
        senders.push_back(tcp_peer(0, rail));
        ASSERT_NE(nullptr, senders.back());
        source_buffer(senders.back(), size, 17);
        ASSERT_EQ("ok", senders.back()->call("connect " + t.dev + " " + t.iface));
    }
    for (int i = 0; i < 7; ++i) {
        ASSERT_TRUE(senders[i]->send("put zcopy " + t.addr + " " + t.rkey + " " +
                                     std::to_string(part) + " 65536 " +
                                     std::to_string(i * part)));
    }
    for (int i = 0; i < 7; ++i) {
        EXPECT_EQ("Success", status_of(senders[i]->receive(scaled_ms(30000)))) << i;
    }
    EXPECT_EQ("ok", target->call("check 17 0 " + std::to_string(size)));
    expect_healthy(0, relay, size);
    EXPECT_EQ(7u, counters(0, relay).relay.lane_resets);
}

TEST_F(PxnTransfer, RelayKilledMidTransferFailsTheOutstandingOperations)
{
    const size_t size = 256 << 20;
    auto [relay, target, sender, t] = cross_rail(size, 19);
    ASSERT_TRUE(relay && target && sender);
    ASSERT_TRUE(sender->send("put zcopy " + t.addr + " " + t.rkey + " " +
                             std::to_string(size) + " 1048576 0"));
    /* Mid-transfer: the relay forwards the put's pieces. */
    ASSERT_TRUE(wait_counters(0, relay, [](const auto &c) {
        return c.relay.pieces >= 1;
    })) << "the put did not start";
    relay->kill(SIGKILL);
    /* Heartbeat timeout 1 s: every outstanding operation ends in error. */
    const auto start = std::chrono::steady_clock::now();
    const std::string done = sender->receive(scaled_ms(10000));
    const double waited = std::chrono::duration<double>(
            std::chrono::steady_clock::now() - start).count();
    ASSERT_FALSE(done.empty()) << "sender hung";
    EXPECT_NE("Success", status_of(done));
    EXPECT_LT(waited, pxn_test::scaled_s(5.0));
    EXPECT_GE(counters(0, sender).sender.failed_ops, 1u);
}

TEST_F(PxnTransfer, LaneOfAKilledSenderIsClaimedAgain)
{
    const std::vector<std::string> one_lane = {"UCX_PXN_LANES=1"};
    PeerProcess *relay  = tcp_peer(0, 1, one_lane);
    PeerProcess *target = tcp_peer(1, 1, one_lane);
    PeerProcess *first  = tcp_peer(0, 0, one_lane);
    ASSERT_TRUE(relay && target && first);

    const size_t size = 64 << 20;
    Target t = target_buffer(target, size);
    source_buffer(first, size, 23);
    ASSERT_EQ("ok", first->call("connect " + t.dev + " " + t.iface));
    ASSERT_TRUE(first->send("put zcopy " + t.addr + " " + t.rkey + " " +
                            std::to_string(size) + " 1048576 0"));
    /* It holds the lane, pieces in flight. */
    ASSERT_TRUE(wait_counters(0, first, [](const auto &c) {
        return c.sender.pieces >= 1;
    })) << "the first sender did not publish";
    first->kill(SIGKILL);
    first->wait(scaled_ms(5000));

    /* The relay's only lane belonged to the dead sender. */
    PeerProcess *second = tcp_peer(0, 2, one_lane);
    ASSERT_NE(nullptr, second);
    source_buffer(second, size, 29);
    ASSERT_EQ("ok", second->call("connect " + t.dev + " " + t.iface));
    EXPECT_EQ("Success", put(second, t, 1 << 20, 65536));
    EXPECT_EQ("ok", target->call("check 29 0 1048576"));
}

TEST_F(PxnTransfer, RestartedRelayCarriesNewPieces)
{
    const size_t size = 2 << 20;
    auto [relay, target, sender, t] = cross_rail(size, 31);
    ASSERT_TRUE(relay && target && sender);
    EXPECT_EQ("Success", put(sender, t, size / 2, 65536));

    const uint64_t last_beat = kill_relay(0, relay);
    PeerProcess *restarted = tcp_peer(0, 1);
    ASSERT_NE(nullptr, restarted);
    /* the old relay's heartbeat goes stale (the sender still maps it) */
    ASSERT_TRUE(wait_heartbeat_stale(last_beat));
    EXPECT_EQ("Success", put(sender, t, size / 2, 65536, size / 2));
    EXPECT_EQ("ok", target->call("check 31 0 " + std::to_string(size)));
    EXPECT_GE(counters(0, restarted).relay.bytes, size / 2);
}

TEST_F(PxnTransfer, GetsOverTcpAreRefusedAndTheRelayStays)
{
    const size_t size = 2 * kSlot;
    auto [relay, target, sender, t] = cross_rail(size, 47);
    ASSERT_TRUE(relay && target && sender);
    /* tcp has no get_zcopy: pxn over tcp does not advertise GET, and a get
     * must not reach the relay (whose inner get op would be NULL). */
    for (const std::string kind : {"zcopy", "bcopy"}) {
        EXPECT_EQ("Unsupported operation", status_of(sender->call(
                "get " + kind + " " + t.addr + " " + t.rkey + " " +
                std::to_string(size) + " 30000 0"))) << kind;
    }
    EXPECT_EQ("Success", put(sender, t, size, 50000));
    EXPECT_EQ("ok", target->call("check 47 0 " + std::to_string(size)));
    expect_healthy(0, relay, size);
}

TEST_F(PxnTransfer, CmaRelayPutsAndGets)
{
    PeerProcess *relay  = cma_peer(0, "railB");
    PeerProcess *target = cma_peer(1, "railB");
    PeerProcess *sender = cma_peer(0, "railA");
    ASSERT_TRUE(relay && target && sender);

    const size_t size = 3 * kSlot + 5;
    Target t = target_buffer(target, size);
    source_buffer(sender, size, 37);
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    EXPECT_EQ("Success", put(sender, t, size, 50000));
    EXPECT_EQ("ok", target->call("check 37 0 " + std::to_string(size)));

    /* GET: the target's bytes come back into a zeroed sender buffer. */
    EXPECT_EQ("ok", target->call("fill 41"));
    EXPECT_EQ("alloc", split(sender->call("alloc " + std::to_string(size)))[0]);
    EXPECT_EQ("Success", status_of(sender->call(
            "get zcopy " + t.addr + " " + t.rkey + " " + std::to_string(size) +
            " 70000 0")));
    EXPECT_EQ("ok", sender->call("check 41 0 " + std::to_string(size)));

    /* get_bcopy: each reply lands in one piece and is unpacked. */
    EXPECT_EQ("ok", target->call("fill 43"));
    EXPECT_EQ("alloc", split(sender->call("alloc " + std::to_string(size)))[0]);
    EXPECT_EQ("Success", status_of(sender->call(
            "get bcopy " + t.addr + " " + t.rkey + " " + std::to_string(size) +
            " 30000 0")));
    EXPECT_EQ("ok", sender->call("check 43 0 " + std::to_string(size)));
    expect_healthy(0, relay, 3 * size);
}

/* Behind a frozen relay's full ring (K pieces published): the K operations
 * queued after them have each gone, at their credit timeout, to the direct
 * path or to an error. */
bool queued_ops_decided(const pxn::abi::ProcessCounters &c)
{
    return c.sender.fallback_ops + c.sender.failed_ops >= kSlots;
}

/*
 * Operations that cannot be published (relay frozen, no ring credit for
 * UCX_PXN_CREDIT_TIMEOUT) fall back once to the sender's own inner
 * transport where the target is reachable from it: over a spine here,
 * nowhere on a rail-only fabric.
 */
class PxnFallback : public PxnTransfer {
protected:
    static void SetUpTestSuite() { up("pxns", 2, true); }
    static void TearDownTestSuite() { down("pxns"); }

    /* Relay frozen: K pieces are published and wait, the next K operations
     * stay queued past the credit timeout. Returns the sender's answer. */
    std::string put_past_a_frozen_relay(PeerProcess **target_p,
                                        Target *t, PeerProcess **relay_p,
                                        PeerProcess **sender_p)
    {
        const std::vector<std::string> env = {"UCX_PXN_HEARTBEAT_TIMEOUT=20s",
                                              "UCX_PXN_CREDIT_TIMEOUT=300ms"};
        PeerProcess *relay  = tcp_peer(0, 1, env);
        PeerProcess *target = tcp_peer(1, 1, env);
        PeerProcess *sender = tcp_peer(0, 0, env);
        if (!relay || !target || !sender) {
            return "";
        }
        const size_t size = 2 * kSlots * kSlot;
        *t = target_buffer(target, size);
        source_buffer(sender, size, 47);
        EXPECT_EQ("ok", sender->call("connect " + t->dev + " " + t->iface));
        EXPECT_TRUE(relay->stop());
        EXPECT_TRUE(sender->send("put zcopy " + t->addr + " " + t->rkey + " " +
                                 std::to_string(size) + " " +
                                 std::to_string(kSlot) + " 0"));
        /* Past the credit timeout: each of the next K operations has been
         * sent directly or failed. */
        EXPECT_TRUE(wait_counters(0, sender, queued_ops_decided));
        relay->kill(SIGCONT);
        *target_p = target;
        *relay_p  = relay;
        *sender_p = sender;
        return status_of(sender->receive(scaled_ms(20000)));
    }
};

TEST_F(PxnFallback, QueuedOperationsTakeTheDirectPathOverTheSpine)
{
    PeerProcess *target = nullptr, *relay = nullptr, *sender = nullptr;
    Target t;
    EXPECT_EQ("Success", put_past_a_frozen_relay(&target, &t, &relay, &sender));
    ASSERT_TRUE(target && relay && sender);
    const size_t size = 2 * kSlots * kSlot;
    EXPECT_EQ("ok", target->call("check 47 0 " + std::to_string(size)));
    const auto c = counters(0, sender);
    EXPECT_EQ(kSlots, c.sender.pieces);          /* the first K: relayed */
    EXPECT_EQ(kSlots, c.sender.fallback_ops);    /* the next K: direct */
    EXPECT_EQ(kSlots * kSlot, c.sender.fallback_bytes);
    EXPECT_EQ(kSlots * kSlot, counters(0, relay).relay.bytes);
}

TEST_F(PxnFallback, RelayDeadBeforeAPutSendsItOnTheDirectPathUntilANewRelayComes)
{
    PeerProcess *relay  = tcp_peer(0, 1);
    PeerProcess *target = tcp_peer(1, 1);
    PeerProcess *sender = tcp_peer(0, 0);
    ASSERT_TRUE(relay && target && sender);
    const size_t size = 4 << 20;
    Target t = target_buffer(target, size);
    source_buffer(sender, size, 107);
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    EXPECT_EQ("Success", put(sender, t, 1 << 20, 65536));
    const uint64_t last_beat = kill_relay(0, relay);
    ASSERT_TRUE(wait_heartbeat_stale(last_beat)); /* its heartbeat goes stale */

    /* Nothing of it was published: the same ep sends it straight. */
    EXPECT_EQ("Success", put(sender, t, 1 << 20, 65536, 1 << 20));
    auto c = counters(0, sender);
    EXPECT_EQ(16u, c.sender.fallback_ops);
    EXPECT_EQ(1u << 20, c.sender.fallback_bytes);
    EXPECT_EQ(0u, c.sender.failed_ops);

    /* A relay back on that rail: the ep routes through it again. */
    PeerProcess *restarted = tcp_peer(0, 1);
    ASSERT_NE(nullptr, restarted);
    ASSERT_TRUE(wait_counters(0, restarted, [](const auto &) { return true; }))
            << "the new relay is not published";
    pxn_test::hold_for(0.15, "an ep looks for a new relay at most every 100 ms "
                             "(Ep::kRerouteNs); it last looked during the "
                             "direct put, and nothing shows when it looks next");
    EXPECT_EQ("Success", put(sender, t, size / 2, 65536, size / 2));
    EXPECT_EQ("ok", target->call("check 107 0 " + std::to_string(size)));
    EXPECT_EQ(size / 2, counters(0, restarted).relay.bytes);
    EXPECT_EQ(1u << 20, counters(0, sender).sender.fallback_bytes);
}

class PxnNoFallback : public PxnTransfer {
};

TEST_F(PxnNoFallback, QueuedOperationsFailCleanlyOnARailOnlyFabric)
{
    const std::vector<std::string> env = {"UCX_PXN_HEARTBEAT_TIMEOUT=20s",
                                          "UCX_PXN_CREDIT_TIMEOUT=300ms"};
    PeerProcess *relay  = tcp_peer(0, 1, env);
    PeerProcess *target = tcp_peer(1, 1, env);
    PeerProcess *sender = tcp_peer(0, 0, env);
    ASSERT_TRUE(relay && target && sender);
    const size_t size = 2 * kSlots * kSlot;
    Target t = target_buffer(target, size);
    source_buffer(sender, size, 53);
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    ASSERT_TRUE(relay->stop());
    ASSERT_TRUE(sender->send("put zcopy " + t.addr + " " + t.rkey + " " +
                             std::to_string(size) + " " +
                             std::to_string(kSlot) + " 0"));
    /* past the credit timeout */
    ASSERT_TRUE(wait_counters(0, sender, queued_ops_decided));
    relay->kill(SIGCONT);
    EXPECT_EQ(ucs_status_string(UCS_ERR_TIMED_OUT),
              status_of(sender->receive(scaled_ms(20000))));
    /* The published half arrived; nothing was sent twice. */
    EXPECT_EQ("ok", target->call("check 53 0 " + std::to_string(kSlots * kSlot)));
    const auto c = counters(0, sender);
    EXPECT_EQ(0u, c.sender.fallback_bytes);
    EXPECT_EQ(kSlots, c.sender.failed_ops);
    EXPECT_EQ(kSlots * kSlot, counters(0, relay).relay.bytes);
}

TEST_F(PxnNoFallback, FallbackOffFailsWithoutTryingADirectPath)
{
    const std::vector<std::string> env = {"UCX_PXN_HEARTBEAT_TIMEOUT=20s",
                                          "UCX_PXN_CREDIT_TIMEOUT=300ms",
                                          "UCX_PXN_FALLBACK=n"};
    PeerProcess *relay  = tcp_peer(0, 1, env);
    PeerProcess *target = tcp_peer(1, 1, env);
    PeerProcess *sender = tcp_peer(0, 0, env);
    ASSERT_TRUE(relay && target && sender);
    const size_t size = 2 * kSlots * kSlot;
    Target t = target_buffer(target, size);
    source_buffer(sender, size, 59);
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    ASSERT_TRUE(relay->stop());
    ASSERT_TRUE(sender->send("put zcopy " + t.addr + " " + t.rkey + " " +
                             std::to_string(size) + " " +
                             std::to_string(kSlot) + " 0"));
    /* past the credit timeout */
    ASSERT_TRUE(wait_counters(0, sender, queued_ops_decided));
    relay->kill(SIGCONT);
    EXPECT_EQ(ucs_status_string(UCS_ERR_TIMED_OUT),
              status_of(sender->receive(scaled_ms(20000))));
    EXPECT_EQ(kSlots, counters(0, sender).sender.failed_ops);
    EXPECT_EQ("ok", target->call("check 59 0 " + std::to_string(kSlots * kSlot)));
}

} // namespace
