/*
 * pxn_entry.h from the outside: an allocation that fails inside a UCT call
 * (ucx_pxn_peer's "nomem" commands, peer_nomem.h: the peer's operator new
 * throws std::bad_alloc for the armed allocation) returns
 * UCS_ERR_NO_MEMORY instead of ending the process, and leaves the ep or
 * iface as good as before: the same call unarmed succeeds. cma peers:
 * relay node 0 rail r1, target node 1 rail r1, sender node 0 rail r0.
 */
#include "pxn_transfer.h"

using pxn_test::PeerProcess;
using pxn_test::PxnTransfer;
using pxn_tools::split;

namespace {

class PxnNoMemory : public PxnTransfer {
protected:
    /* "nomem put_zcopy <nth> ..." of the first `bytes` of the sender's
     * buffer: {status, fired, completion} */
    static std::vector<std::string> put_zcopy(PeerProcess *sender,
                                              const pxn_test::Target &t,
                                              unsigned nth, size_t bytes)
    {
        return split(sender->call("nomem put_zcopy " + std::to_string(nth) +
                                  " " + t.addr + " " + t.rkey + " " +
                                  std::to_string(bytes),
                                  pxn_test::scaled_ms(30000)));
    }

    /* the peer's answers give statuses as numbers */
    static std::string no_memory() { return std::to_string(UCS_ERR_NO_MEMORY); }
    static std::string in_progress() { return std::to_string(UCS_INPROGRESS); }
    static std::string ok() { return std::to_string(UCS_OK); }
};

/* The first zero-copy put of a fresh lane takes a request from an empty
 * pool: the pool cannot grow, the put is refused in the call and never
 * completes; the next put takes the request and the data arrives. */
TEST_F(PxnNoMemory, PutZcopyReturnsNoMemoryWhenTheRequestPoolCannotGrow)
{
    auto [relay, target, sender, t] = cma_cross_rail(4096, 71);
    ASSERT_TRUE(relay && target && sender);
    const auto refused = put_zcopy(sender, t, 1, 4096);
    ASSERT_EQ(5u, refused.size());
    EXPECT_EQ(no_memory(), refused[1]);
    EXPECT_EQ("1", refused[2]) << "the armed allocation was not reached";
    EXPECT_EQ("none", refused[4]) << "a refused put completed";
    EXPECT_NE("ok", target->call("check 71 0 4096"));

    const auto accepted = put_zcopy(sender, t, 0, 4096);
    ASSERT_EQ(5u, accepted.size());
    EXPECT_EQ(in_progress(), accepted[1]);
    EXPECT_EQ(ok(), accepted[4]);
    EXPECT_EQ("ok", target->call("check 71 0 4096"));
}

/* Every allocation of a first put, failed in turn: each attempt is refused
 * with nothing left behind, or accepted and completes; the first attempt
 * that reaches no armed allocation is accepted. */
TEST_F(PxnNoMemory, EveryAllocationOfAFirstPutZcopyFailsCleanly)
{
    auto [relay, target, sender, t] = cma_cross_rail(4096, 73);
    ASSERT_TRUE(relay && target && sender);
    unsigned refused = 0;
    for (unsigned nth = 1; nth <= 64; ++nth) {
        const auto reply = put_zcopy(sender, t, nth, 4096);
        ASSERT_EQ(5u, reply.size()) << nth;
        if (reply[1] == no_memory()) {
            EXPECT_EQ("1", reply[2]) << nth;
            EXPECT_EQ("none", reply[4]) << nth;
            ++refused;
            continue;
        }
        EXPECT_EQ(in_progress(), reply[1]) << nth;
        EXPECT_EQ(ok(), reply[4]) << nth;
        if (reply[2] == "0") {
            break; /* no allocation left to fail */
        }
    }
    EXPECT_GE(refused, 1u);
    EXPECT_EQ("ok", target->call("check 73 0 4096"));
}

/* A fenced ep takes pending requests; the one whose queue cannot grow is
 * refused and is not in the queue: pending_purge gives back exactly the
 * requests added, the next pending_add succeeds. */
TEST_F(PxnNoMemory, PendingAddReturnsNoMemoryWhenThePendingQueueCannotGrow)
{
    auto [relay, target, sender, t] = cma_cross_rail(4096, 75);
    ASSERT_TRUE(relay && target && sender);
    const auto reply = split(sender->call("nomem pending " + t.addr + " " +
                                          t.rkey + " 1000",
                                          pxn_test::scaled_ms(30000)));
    ASSERT_EQ(9u, reply.size());
    EXPECT_NE("0", reply[1]) << "no pending_add allocated";
    EXPECT_EQ(no_memory(), reply[2]);
    EXPECT_EQ(reply[4], reply[6]) << "added and purged differ";
    EXPECT_EQ(ok(), reply[8]);
    /* the ep goes on */
    EXPECT_EQ("Success", put(sender, t, 4096, 1024));
    EXPECT_EQ("ok", target->call("check 75 0 4096"));
}

/* An iface whose first allocation fails is not opened (UCS_ERR_NO_MEMORY,
 * nothing half-made); the next open of the same device succeeds. */
TEST_F(PxnNoMemory, IfaceOpenReturnsNoMemoryWhenItsFirstAllocationFails)
{
    PeerProcess *peer = cma_peer(0, "r0");
    ASSERT_TRUE(peer);
    const auto reply = split(peer->call("nomem iface 1"));
    ASSERT_EQ(5u, reply.size());
    EXPECT_EQ(no_memory(), reply[1]);
    EXPECT_EQ("1", reply[2]);
    EXPECT_EQ(ok(), reply[4]);
}

} // namespace
