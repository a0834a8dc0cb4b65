/*
 * Active messages through pxn across emulated rails (inner tcp): a sender on
 * node 0 rail 0, the relay of rail 1 on node 0, a target on node 1 rail 1
 * whose handlers check every message (ucx_pxn_peer's "am" commands).
 */
#include "pxn_transfer.h"

namespace pxn_test {
namespace {

class PxnAm : public PxnTransfer {
protected:
    /* "am <received> <bad> <out of order> <bytes>" as numbers */
    std::vector<uint64_t> stats(PeerProcess *peer)
    {
        std::vector<uint64_t> n;
        for (const auto &field : split(peer->call("am stats"))) {
            if (field != "am") {
                n.push_back(std::stoull(field));
            }
        }
        return n;
    }

    /* The target progresses ("serve") while the sender sends, then stops. */
    std::string send_served(CrossRail &c, const std::string &what)
    {
        EXPECT_TRUE(c.target->send("serve"));
        const std::string done = c.sender->call(what, 60000);
        EXPECT_EQ("ok", c.target->call("stop"));
        return done;
    }
};

TEST_F(PxnAm, IfaceOffersShortAndBcopyMessagesWithTruthfulLimits)
{
    CrossRail c = cross_rail(4096, 1);
    ASSERT_NE(nullptr, c.sender);
    const auto caps = split(c.sender->call("am caps"));
    ASSERT_EQ(4u, caps.size());
    EXPECT_EQ("3", caps[1]);                  /* short and bcopy */
    EXPECT_LE(std::stoul(caps[2]), 1024u);    /* staged in the call */
    /* inner tcp's am_bcopy (8 KiB segments) less pxn's frame header */
    EXPECT_GT(std::stoul(caps[3]), 4096u);
    EXPECT_LT(std::stoul(caps[3]), 8192u);
    /* one byte more than the limit is the caller's error */
    EXPECT_EQ("0", status_of(c.sender->call("am send short 0 1 " + caps[2])));
    EXPECT_NE("0", status_of(c.sender->call(
                      "am send short 0 1 " + std::to_string(std::stoul(caps[2]) + 1))));
}

TEST_F(PxnAm, MessagesReachTheTargetsHandlersIntactAndInOrder)
{
    CrossRail c = cross_rail(4096, 1);
    ASSERT_NE(nullptr, c.sender);
    ASSERT_EQ("ok", c.target->call("am listen"));
    /* within one route's credit: the target need not progress meanwhile */
    EXPECT_EQ("0", status_of(c.sender->call("am send short 5 100 200")));
    EXPECT_EQ("0", status_of(c.sender->call("am send bcopy 7 20 4000")));
    EXPECT_EQ("0", status_of(c.sender->call("am send bcopy 31 10 8")));
    EXPECT_EQ("0", status_of(c.sender->call("am send iov 9 30 300")));
    EXPECT_EQ("ok", c.target->call("progress 500"));
    const auto n = stats(c.target);
    ASSERT_EQ(4u, n.size());
    EXPECT_EQ(160u, n[0]);
    EXPECT_EQ(0u, n[1]) << "corrupted messages";
    EXPECT_EQ(0u, n[2]) << "messages out of order";
    EXPECT_EQ(100u * 200 + 20 * 4000 + 10 * 8 + 30 * 300, n[3]);
}

TEST_F(PxnAm, ManyMoreMessagesThanOneCreditWindowAllArrive)
{
    CrossRail c = cross_rail(4096, 1);
    ASSERT_NE(nullptr, c.sender);
    ASSERT_EQ("ok", c.target->call("am listen"));
    /* 16 MB: the route's credit (256 KiB) comes back again and again */
    const std::string done = send_served(c, "am send bcopy 3 4000 4000");
    EXPECT_EQ("0", status_of(done)) << done;
    EXPECT_EQ("ok", c.target->call("progress 200"));
    const auto n = stats(c.target);
    ASSERT_EQ(4u, n.size());
    EXPECT_EQ(4000u, n[0]);
    EXPECT_EQ(0u, n[1]);
    EXPECT_EQ(0u, n[2]);
}

} // namespace
} // namespace pxn_test
