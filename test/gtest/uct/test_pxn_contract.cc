/*
 * UCT's contract as pxn keeps it, from the outside (ucx_pxn_peer, the
 * commands of peer_lifecycle.h): completions only from progress, never
 * inside the posting call (credit timeouts of every length); flush with
 * UCT_FLUSH_FLAG_CANCEL; pending_add's UCS_ERR_BUSY; zero-length
 * operations without a remote key; lengths beyond the iface's caps; an
 * iface flush after an ep failed; eps
 * to peers pxn does not carry (the process itself, its own rail) refused
 * at creation; an ep-to-ep uct_ep_create that does not wait on a stopped
 * relay.
 */
#include "pxn_transfer.h"

#include <chrono>
#include <csignal>

using pxn_test::PeerProcess;
using pxn_test::PxnTransfer;
using pxn_test::Target;
using pxn_test::kSlot;
using pxn_test::kSlots;
using pxn_test::scaled_ms;
using pxn_test::scaled_s;
using pxn_tools::split;

namespace {

class PxnContract : public PxnTransfer {
protected:
    /* "contract <n>" -> n; -1 if the answer is not that. */
    static long completions_inside_calls(PeerProcess *peer)
    {
        const auto reply = split(peer->call("contract"));
        return ((reply.size() == 2) && (reply[0] == "contract")) ?
               std::stol(reply[1]) : -1;
    }
};

/* The repro of a UCP abort (uct_iface.h "comp->count > 0"): an operation
 * given up for want of ring credit completed inside the call that posted
 * it. Short timeouts give up while the relay is merely busy. */
TEST_F(PxnContract, CreditTimeoutsFailOperationsFromProgressNeverInsideTheCall)
{
    const size_t size = 4 << 20;
    const std::string timed_out_text = ucs_status_string(UCS_ERR_TIMED_OUT);
    int timed_out = 0;
    for (const std::string timeout : {"1us", "100us", "1ms", "10ms"}) {
        peers_.clear();
        auto [relay, target, sender, t] = cross_rail(
                size, 61, {"UCX_PXN_CREDIT_TIMEOUT=" + timeout,
                           "UCX_PXN_FALLBACK=n", "UCX_PXN_HEARTBEAT_TIMEOUT=10s"});
        ASSERT_TRUE(relay && target && sender);
        const std::string status = put(sender, t, size, 8192);
        EXPECT_TRUE((status == "Success") || (status == timed_out_text))
                << timeout << ": " << status;
        timed_out += (status == timed_out_text);
        EXPECT_EQ(0, completions_inside_calls(sender)) << timeout;
    }
    EXPECT_GE(timed_out, 1) << "no credit timeout happened: nothing was tested";
}

TEST_F(PxnContract, FlushWithCancelEndsTheOperationsNotYetStagedAndTheEp)
{
    const size_t size = 16 * kSlot;
    /* the relay stays stopped for a while: not declared dead meanwhile */
    auto [relay, target, sender, t] = cross_rail(size, 63,
                                                 {"UCX_PXN_HEARTBEAT_TIMEOUT=10s"});
    ASSERT_TRUE(relay && target && sender);
    ASSERT_TRUE(relay->stop());
    /* a piece per operation: kSlots published, the others queued */
    ASSERT_TRUE(sender->send("put_cancel " + t.addr + " " + t.rkey + " " +
                             std::to_string(size) + " " + std::to_string(kSlot)));
    pxn_test::hold_for(0.3, "the published pieces wait for the stopped relay");
    relay->kill(SIGCONT);
    const std::string reply = sender->receive(scaled_ms(20000));
    EXPECT_EQ("canceled " + std::to_string(16 - kSlots) + " ok " +
              std::to_string(kSlots) + " failed 0 after " +
              ucs_status_string(UCS_ERR_CANCELED), reply);
    /* what was published arrived; nothing after it */
    EXPECT_EQ("ok", target->call("check 63 0 " + std::to_string(kSlots * kSlot)));
    EXPECT_NE("ok", target->call("check 63 " + std::to_string(kSlots * kSlot) +
                                 " " + std::to_string(kSlot)));
    EXPECT_EQ(0, completions_inside_calls(sender));
    /* a new ep routes again */
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    EXPECT_EQ("Success", put(sender, t, size, kSlot));
    EXPECT_EQ("ok", target->call("check 63 0 " + std::to_string(size)));
}

TEST_F(PxnContract, PendingAddSaysBusyWhileAnOperationWouldGo)
{
    auto [relay, target, sender, t] = cross_rail(65536, 65);
    ASSERT_TRUE(relay && target && sender);
    EXPECT_EQ("Success", put(sender, t, 65536, 4096));
    EXPECT_EQ("busy", sender->call("pending"));
    /* an ep that cannot send takes the request */
    kill_relay(0, relay);
    EXPECT_NE("Success", put(sender, t, 65536, 4096));
    EXPECT_EQ("added", sender->call("pending"));
}

TEST_F(PxnContract, ZeroLengthOperationsWithoutARemoteKeyComplete)
{
    auto [relay, target, sender, t] = cma_cross_rail(4096, 67);
    ASSERT_TRUE(relay && target && sender);
    EXPECT_EQ("zero Success|0|Success|Success|Success", sender->call("zero"));
    EXPECT_EQ(0, completions_inside_calls(sender));
    /* the ep is as good as before */
    EXPECT_EQ("Success", put(sender, t, 4096, 1024));
    EXPECT_EQ("ok", target->call("check 67 0 4096"));
}

/* As UCX's transports check them (UCT_CHECK_LENGTH): an error in the call,
 * nothing moved, the ep as good as before. */
TEST_F(PxnContract, LengthsBeyondTheIfaceCapsAreRefusedInTheCall)
{
    const size_t size = 128 << 10; /* > max_bcopy (64 KiB) + 1 */
    auto [relay, target, sender, t] = cma_cross_rail(size, 71);
    ASSERT_TRUE(relay && target && sender);
    const std::string invalid = ucs_status_string(UCS_ERR_INVALID_PARAM);
    EXPECT_EQ("oversize " + invalid + "|" + invalid + "|" + invalid,
              sender->call("oversize " + t.addr + " " + t.rkey));
    EXPECT_EQ(0, completions_inside_calls(sender));
    pxn_test::hold_for(0.2, "anything wrongly posted would land");
    EXPECT_NE("ok", target->call("check 71 0 1025")); /* the put_short's */
    EXPECT_EQ("Success", put(sender, t, size, 65536));
    EXPECT_EQ("ok", target->call("check 71 0 " + std::to_string(size)));
}

TEST_F(PxnContract, IfaceFlushCompletesAfterAnEpFailed)
{
    auto [relay, target, sender, t] = cross_rail(1 << 20, 69);
    ASSERT_TRUE(relay && target && sender);
    EXPECT_EQ("Success", put(sender, t, 1 << 20, 65536));
    kill_relay(0, relay);
    EXPECT_NE("Success", put(sender, t, 1 << 20, 65536));
    EXPECT_EQ("ok", sender->call("iface_flush " + std::to_string(scaled_ms(5000))));
}

TEST_F(PxnContract, EpsToThisProcessOrItsOwnRailAreRefusedAtCreation)
{
    PeerProcess *relay  = tcp_peer(0, 1);
    PeerProcess *same   = tcp_peer(1, 0); /* another node, the sender's rail */
    PeerProcess *sender = tcp_peer(0, 0);
    ASSERT_TRUE(relay && same && sender);
    const Target self = target_buffer(sender, 4096);
    const std::string unreachable = std::string("err ") +
                                    ucs_status_string(UCS_ERR_UNREACHABLE);
    EXPECT_EQ(unreachable, sender->call("connect " + self.dev + " " + self.iface));
    const Target peer = target_buffer(same, 4096);
    EXPECT_EQ(unreachable, sender->call("connect " + peer.dev + " " + peer.iface));
    EXPECT_EQ("0", sender->call("reachable " + peer.dev + " " + peer.iface));
    EXPECT_EQ(0u, counters(0, relay).relay.route_errors);
}

/* The first endpoint of a worker that never progressed needs a spare
 * relay ep; a stopped relay (fresh heartbeat, so healthy) must not stop
 * uct_ep_create for its heartbeat timeout. */
TEST_F(PxnContract, EpToEpCreateDoesNotWaitForAStoppedRelay)
{
    const std::vector<std::string> env = {"UCX_PXN_NET_CONNECT=ep",
                                          "UCX_PXN_HEARTBEAT_TIMEOUT=20s"};
    PeerProcess *relay = tcp_peer(0, 1, env);
    ASSERT_NE(nullptr, relay);
    ASSERT_TRUE(relay->stop());
    PeerProcess *sender = tcp_peer(0, 0, env);
    ASSERT_NE(nullptr, sender);
    const auto start = std::chrono::steady_clock::now();
    const auto addr  = split(sender->call("ep_addr"));
    const double took = std::chrono::duration<double>(
            std::chrono::steady_clock::now() - start).count();
    relay->kill(SIGCONT);
    ASSERT_EQ(2u, addr.size());
    EXPECT_EQ("ep_addr", addr[0]);
    /* scaled, but far below the 20 s heartbeat timeout */
    EXPECT_LT(took, std::min(scaled_s(2.0), 10.0));
    EXPECT_EQ(1u, counters(0, sender).sender.spare_misses);
}

} // namespace
