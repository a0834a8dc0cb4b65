/*
 * Scatter-gather operations through pxn (UCT's put_sgl_zcopy, UCX 1.22 on;
 * get_sgl_zcopy, UCX master): many (local, remote, key) elements in one
 * call, in a shuffled order, become one request whose elements fill
 * pieces; every byte is verified. Skipped where UCX has no SGL operation.
 */
#include "pxn_transfer.h"

using pxn_test::PeerProcess;
using pxn_test::PxnTransfer;
using pxn_test::Target;

namespace {

class PxnSgl : public PxnTransfer {
protected:
    void SetUp() override
    {
#ifndef PXN_UCX_EP_PUT_SGL_ZCOPY
        GTEST_SKIP() << "this UCX has no put_sgl_zcopy (UCX 1.22 on)";
#endif
        PxnTransfer::SetUp();
    }
};

TEST_F(PxnSgl, PutsAndGetsOfManyBlocksArriveIntact)
{
    PeerProcess *relay  = cma_peer(0, "r1");
    PeerProcess *target = cma_peer(1, "r1");
    PeerProcess *sender = cma_peer(0, "r0");
    ASSERT_TRUE(relay && target && sender);
    const size_t size = (4 << 20) + 3 * 4096 + 11;
    const Target t    = target_buffer(target, size);
    source_buffer(sender, size, 91);
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));

    /* blocks of 1-64 KiB, 512 per SGL, in a shuffled order */
    EXPECT_EQ("Success",
              status_of(sender->call("put sgl " + t.addr + " " + t.rkey + " " +
                                     std::to_string(size) + " 1024-65536 0")));
    EXPECT_EQ("ok", target->call("check 91 0 " + std::to_string(size)));
    const auto c = counters(0, relay).relay;
    EXPECT_GE(c.bytes, size);
    EXPECT_LT(c.pieces, size / 1024) << "blocks share pieces";

#ifdef PXN_UCX_EP_GET_SGL_ZCOPY
    ASSERT_EQ("ok", target->call("fill 93"));
    EXPECT_EQ("Success",
              status_of(sender->call("get sgl " + t.addr + " " + t.rkey + " " +
                                     std::to_string(size) + " 8192 0")));
    EXPECT_EQ("ok", sender->call("check 93 0 " + std::to_string(size)));
#else
    EXPECT_EQ(ucs_status_string(UCS_ERR_UNSUPPORTED),
              status_of(sender->call("get sgl " + t.addr + " " + t.rkey + " " +
                                     std::to_string(size) + " 8192 0")));
#endif
}

} // namespace
