/*
 * A sender lane and the relay in one process over FakeNet: the data path
 * end to end (descriptors, slots, completions, reaping) and the rules of
 * the asynchronous control path (a lane that opens in the background, a
 * relay that answers late).
 */
#include "lane_fixture.h"

#include <chrono>
#include <cstring>
#include <random>

namespace pxn_test {

using pxn::uct::SendLane;

class RelayLane : public LaneFixture {
protected:
    /* A target buffer of `size` bytes reachable through a route. */
    void make_target(size_t size)
    {
        target_.assign(size, 0);
        rkey_ = net_->register_remote(target_.data(), target_.size());
    }

    /* The relay running, a target of `size` bytes, a ready lane and a route
     * through it to inner peer `peer` (call with ASSERT_NO_FATAL_FAILURE). */
    void open_route(size_t size, uint64_t peer, std::unique_ptr<SendLane> *lane,
                    pxn::RouteAnswer *route)
    {
        start_relay();
        make_target(size);
        *lane = open_lane();
        ASSERT_TRUE(make_ready(**lane));
        *route = route_to(**lane, peer);
        ASSERT_EQ(UCS_OK, route->status);
    }

    uint32_t lane_rkey(SendLane &lane)
    {
        uint32_t index = 0;
        EXPECT_EQ(UCS_OK, lane.control().rkey_index(rkey_.data(),
                                                    uint16_t(rkey_.size()),
                                                    &index));
        return index;
    }

    /* `count` puts of 8 bytes (value i + 1, 16 bytes apart) posted on a
     * ready lane while the relay does not run, each accepted in the call;
     * then every byte checked and *pieces the pieces the relay forwarded. */
    void small_puts(uint64_t count, uint64_t *pieces)
    {
        std::unique_ptr<SendLane> lane;
        pxn::RouteAnswer route;
        ASSERT_NO_FATAL_FAILURE(open_route(65536, 2, &lane, &route));
        const uint32_t rkey = lane_rkey(*lane);
        TestOwner owner;
        for (uint64_t i = 0; i < count; ++i) {
            size_t packed = 0;
            const pxn::uct::ImmediateOp op{
                    pxn::abi::kOpPut, route.route, rkey,
                    reinterpret_cast<uint64_t>(target_.data()) + i * 16, 8};
            ASSERT_EQ(UCS_OK, lane->stage_now(&owner, op, &packed,
                                              [&](uint8_t *dest) {
                                                  memset(dest, int(i + 1), 8);
                                                  return size_t(8);
                                              })) << i;
            ASSERT_EQ(8u, packed);
        }
        ASSERT_TRUE(drive([&] { return owner.done.size() == count; }));
        for (uint64_t i = 0; i < count; ++i) {
            EXPECT_EQ(uint8_t(i + 1), target_[i * 16]) << i;
            EXPECT_EQ(0u, target_[i * 16 + 8]) << i;
        }
        *pieces = relay_counters().pieces;
    }

    /* `blocks` blocks of `block` bytes, every other block-sized range of
     * the target (no two adjacent: a plan each), as one scatter-gather
     * request (put: pattern -> target; get: target -> local), every byte
     * checked; *inner_ops / *sgl_ops: what the relay posted. */
    void scattered(pxn::abi::Op op, size_t blocks, size_t block,
                   uint64_t *inner_ops, uint64_t *sgl_ops)
    {
        std::unique_ptr<SendLane> lane;
        pxn::RouteAnswer route;
        ASSERT_NO_FATAL_FAILURE(open_route(2 * blocks * block, 9, &lane, &route));
        const bool get      = (op == pxn::abi::kOpGet);
        auto local          = get ? std::vector<uint8_t>(blocks * block, 0) :
                                    pattern(blocks * block, 11);
        const auto remote   = pattern(target_.size(), 12);
        if (get) {
            target_ = remote;
        }
        const uint32_t rkey = lane_rkey(*lane);
        lane->control().rkey_hold(rkey);
        std::vector<pxn::ScatterSegment> segs(blocks);
        for (size_t i = 0; i < blocks; ++i) {
            segs[i] = {reinterpret_cast<uint64_t>(local.data() + i * block), block,
                       reinterpret_cast<uint64_t>(target_.data() + 2 * i * block),
                       rkey};
        }
        TestOwner owner;
        Completion comp;
        ASSERT_EQ(UCS_INPROGRESS,
                  lane->post_scattered(&owner, op, route.route, segs.data(),
                                       segs.size(), 1ull << rkey, &comp.comp));
        ASSERT_TRUE(drive([&] { return comp.calls == 1; }));
        EXPECT_EQ(UCS_OK, comp.comp.status);
        for (size_t i = 0; i < blocks; ++i) {
            const uint8_t *there = target_.data() + 2 * i * block;
            ASSERT_EQ(0, memcmp(local.data() + i * block, there, block)) << i;
            if (!get) {
                ASSERT_EQ(0u, there[block]) << i; /* the gap stays */
            }
        }
        *inner_ops = relay_counters().inner_ops;
        *sgl_ops   = relay_counters().inner_sgl_ops;
        EXPECT_EQ(*sgl_ops, net_->stats().sgl_ops);
        EXPECT_EQ(blocks, get ? net_->stats().gets : net_->stats().puts);
    }

    static std::vector<uint8_t> pattern(size_t size, uint64_t seed)
    {
        std::vector<uint8_t> v(size);
        std::mt19937_64 rng(seed);
        for (auto &b : v) {
            b = uint8_t(rng());
        }
        return v;
    }

    std::vector<uint8_t> target_;
    pxn::Bytes           rkey_;
};

TEST_F(RelayLane, PutOfSeveralSlotsLandsInTargetMemory)
{
    std::unique_ptr<SendLane> lane;
    pxn::RouteAnswer route;
    ASSERT_NO_FATAL_FAILURE(open_route(1 << 20, 7, &lane, &route));

    /* 5 slots' worth in three segments, at an odd target offset */
    const auto src = pattern(5 * 65536 + 123, 1);
    const uct_iov_t iov[3] = {
        {const_cast<uint8_t*>(src.data()), 1000, nullptr, 0, 1},
        {const_cast<uint8_t*>(src.data()) + 1000, 200000, nullptr, 0, 1},
        {const_cast<uint8_t*>(src.data()) + 201000, src.size() - 201000, nullptr, 0, 1}};
    TestOwner owner;
    Completion comp;
    const uint64_t remote = reinterpret_cast<uint64_t>(target_.data()) + 77;
    ASSERT_EQ(UCS_INPROGRESS, lane->post(&owner, pxn::abi::kOpPut, route.route,
                                         lane_rkey(*lane), remote, iov, 3,
                                         &comp.comp));
    ASSERT_TRUE(drive([&] { return comp.calls == 1; }));
    EXPECT_EQ(UCS_OK, comp.comp.status);
    ASSERT_EQ(1u, owner.done.size());
    EXPECT_EQ(UCS_OK, owner.done[0]);
    EXPECT_EQ(0, memcmp(target_.data() + 77, src.data(), src.size()));
    EXPECT_EQ(0u, target_[76]);
    EXPECT_EQ(0u, target_[77 + src.size()]);
    EXPECT_GE(relay_counters().pieces, 6u); /* a 4-slot ring, refilled */
    EXPECT_EQ(src.size(), relay_counters().bytes);
    EXPECT_EQ(0u, relay_counters().get_pieces); /* puts only */
    EXPECT_EQ(0u, relay_counters().rejected);
    EXPECT_TRUE(lane->idle());
}

/* What an operator reads for starvation: each piece the relay took after
 * a CPU-rung doorbell is a pickup sample, each completion the sender reaped
 * a completion sample, in their histograms' buckets. */
TEST_F(RelayLane, PickupsAndCompletionsAreTimedIntoTheirHistograms)
{
    std::unique_ptr<SendLane> lane;
    pxn::RouteAnswer route;
    ASSERT_NO_FATAL_FAILURE(open_route(1 << 20, 7, &lane, &route));
    const auto src = pattern(3 * 65536, 2);
    const uct_iov_t iov = {const_cast<uint8_t*>(src.data()), src.size(), nullptr, 0, 1};
    TestOwner owner;
    Completion comp;
    ASSERT_EQ(UCS_INPROGRESS,
              lane->post(&owner, pxn::abi::kOpPut, route.route, lane_rkey(*lane),
                         reinterpret_cast<uint64_t>(target_.data()), &iov, 1,
                         &comp.comp));
    ASSERT_TRUE(drive([&] { return comp.calls == 1; }));
    const pxn::abi::LatencyHistogram &pickup     = relay_counters().pickup;
    const pxn::abi::LatencyHistogram &completion = sender_counters_.completion;
    EXPECT_EQ(relay_counters().pieces, pickup.count);
    EXPECT_GE(completion.count, 3u);
    for (const auto *h : {&pickup, &completion}) {
        uint64_t in_buckets = 0;
        for (uint64_t n : h->buckets) {
            in_buckets += n;
        }
        EXPECT_EQ(h->count, in_buckets);
        EXPECT_GT(h->sum_ns, 0u);
    }
}

/* The fence: a sender that gave up on its lane (relay declared dead) has
 * reported its published pieces failed; the relay, still holding one piece
 * in flight (so it keeps the released lane), forwards none of the others. */
TEST_F(RelayLane, RelayForwardsNothingOfALaneItsSenderGaveUpOn)
{
    std::unique_ptr<SendLane> lane;
    pxn::RouteAnswer route;
    ASSERT_NO_FATAL_FAILURE(open_route(1 << 20, 3, &lane, &route));
    const auto src = pattern(4 * 65536, 9);
    const uint32_t rkey = lane_rkey(*lane);
    TestOwner owner;
    Completion comps[4];
    for (unsigned i = 0; i < 4; ++i) { /* a piece each, all published */
        const uct_iov_t iov = {const_cast<uint8_t*>(src.data()) + i * 65536,
                               65536, nullptr, 0, 1};
        ASSERT_EQ(UCS_INPROGRESS,
                  lane->post(&owner, pxn::abi::kOpPut, route.route, rkey,
                             reinterpret_cast<uint64_t>(target_.data()) + i * 65536,
                             &iov, 1, &comps[i].comp));
    }
    net_->hold(true);
    {
        std::lock_guard<std::mutex> guard(net_->lock());
        relay_->progress(); /* takes the first piece only */
    }
    ASSERT_EQ(1u, net_->inflight());
    lane->fail_all(UCS_ERR_ENDPOINT_TIMEOUT);
    ASSERT_TRUE(drive([&] { return owner.done.size() == 4; }, 100));
    for (unsigned i = 0; i < 4; ++i) {
        EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, comps[i].comp.status) << i;
    }
    for (int i = 0; i < 100; ++i) {
        round(); /* the relay has every chance to forward the other three */
    }
    EXPECT_EQ(1u, net_->stats().puts);
    EXPECT_EQ(3u, relay_counters().fenced);
    net_->hold(false);
    net_->release_all();
    ASSERT_TRUE(drive([&] { return relay_counters().inflight == 0; }));
    EXPECT_EQ(1u, net_->stats().puts);
    EXPECT_EQ(0, memcmp(target_.data(), src.data(), 65536)); /* posted before */
    EXPECT_EQ(0u, target_[65536]);
}

/* What the relay unpacked for a target (an inner transport may hold
 * memory for a key: cuda_ipc maps the target's buffer) goes when the lane
 * releases the route to it, not when the lane ends. */
TEST_F(RelayLane, KeysOfARouteGoWhenTheLaneReleasesIt)
{
    std::unique_ptr<SendLane> lane;
    pxn::RouteAnswer route;
    ASSERT_NO_FATAL_FAILURE(open_route(65536, 5, &lane, &route));
    std::vector<uint8_t> src(4096, 0x3c);
    const uct_iov_t iov = {src.data(), src.size(), nullptr, 0, 1};
    TestOwner owner;
    Completion comp;
    ASSERT_EQ(UCS_INPROGRESS,
              lane->post(&owner, pxn::abi::kOpPut, route.route, lane_rkey(*lane),
                         reinterpret_cast<uint64_t>(target_.data()), &iov, 1,
                         &comp.comp));
    ASSERT_TRUE(drive([&] { return comp.calls == 1; }));
    EXPECT_EQ(1u, net_->stats().rkeys_unpacked);
    EXPECT_EQ(1u, relay_counters().rkeys_held);
    lane->control().release_route(route.route);
    ASSERT_TRUE(drive([&] { return relay_counters().routes_active == 0; }));
    EXPECT_EQ(1u, net_->stats().rkeys_released);
    EXPECT_EQ(0u, relay_counters().rkeys_held);
    EXPECT_TRUE(lane->usable()); /* the lane goes on */
}

TEST_F(RelayLane, GetFillsTheLocalBufferFromTargetMemory)
{
    std::unique_ptr<SendLane> lane;
    pxn::RouteAnswer route;
    ASSERT_NO_FATAL_FAILURE(open_route(1 << 20, 8, &lane, &route));
    const auto remote_bytes = pattern(target_.size(), 2);
    memcpy(target_.data(), remote_bytes.data(), target_.size());

    std::vector<uint8_t> local(300000, 0);
    const uct_iov_t iov = {local.data(), local.size(), nullptr, 0, 1};
    TestOwner owner;
    Completion comp;
    ASSERT_EQ(UCS_INPROGRESS,
              lane->post(&owner, pxn::abi::kOpGet, route.route, lane_rkey(*lane),
                         reinterpret_cast<uint64_t>(target_.data()) + 5000,
                         &iov, 1, &comp.comp));
    ASSERT_TRUE(drive([&] { return comp.calls == 1; }));
    EXPECT_EQ(UCS_OK, comp.comp.status);
    EXPECT_EQ(0, memcmp(local.data(), remote_bytes.data() + 5000, local.size()));
    /* the relay counts them as gets: every piece and byte */
    EXPECT_EQ(relay_counters().pieces, relay_counters().get_pieces);
    EXPECT_EQ(local.size(), relay_counters().get_bytes);
    EXPECT_EQ(sender_counters_.pieces, sender_counters_.get_pieces);
    EXPECT_EQ(local.size(), sender_counters_.get_bytes);
}

TEST_F(RelayLane, OperationsWaitOutsideTheCallWhileTheLaneOpens)
{
    start_relay();
    make_target(65536);
    auto lane = open_lane();
    /* The relay does not run: the lane stays unacknowledged. With a 30 s
     * heartbeat timeout, a call that waited for the relay would take 30 s. */
    lane->progress();
    EXPECT_TRUE(lane->opening());
    const auto src = pattern(4096, 3);
    const uct_iov_t iov = {const_cast<uint8_t*>(src.data()), src.size(), nullptr,
                           0, 1};
    TestOwner owner;
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(UCS_ERR_NO_RESOURCE,
              lane->post(&owner, pxn::abi::kOpPut, 0, 0,
                         reinterpret_cast<uint64_t>(target_.data()), &iov, 1,
                         nullptr));
    size_t packed = 0;
    EXPECT_EQ(UCS_ERR_NO_RESOURCE,
              lane->stage_now(&owner, {pxn::abi::kOpPut, 0, 0, 0, 8}, &packed,
                              [](uint8_t *) { return size_t(8); }));
    for (int i = 0; i < 1000; ++i) {
        lane->progress();
    }
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_LT(took, std::chrono::seconds(10)) << "a call waited for the relay";
    EXPECT_TRUE(lane->opening());
    EXPECT_TRUE(owner.done.empty());

    /* The relay comes: the lane becomes ready, the operation goes. */
    ASSERT_TRUE(make_ready(*lane));
    const pxn::RouteAnswer route = route_to(*lane, 1);
    ASSERT_EQ(UCS_OK, route.status);
    Completion comp;
    ASSERT_EQ(UCS_INPROGRESS,
              lane->post(&owner, pxn::abi::kOpPut, route.route, lane_rkey(*lane),
                         reinterpret_cast<uint64_t>(target_.data()), &iov, 1,
                         &comp.comp));
    ASSERT_TRUE(drive([&] { return comp.calls == 1; }));
    EXPECT_EQ(0, memcmp(target_.data(), src.data(), src.size()));
}

TEST_F(RelayLane, SmallPutsShareASlotUntilItIsFull)
{
    settings_.piece_ops = 0; /* no piece out before it is full */
    uint64_t pieces = 0;
    /* max_plan (64) plans fit one piece, which goes out when full */
    ASSERT_NO_FATAL_FAILURE(small_puts(64, &pieces));
    EXPECT_EQ(1u, pieces);
}

TEST_F(RelayLane, SmallPutsGoOutInPiecesOfPieceOpsWhileTheRingHasRoom)
{
    settings_.piece_ops = 16;
    uint64_t pieces = 0;
    /* A piece goes out at 16 segments while a slot is free for the next (3
     * pieces); the fourth, in the ring's last slot, keeps filling (32), so
     * that no put finds the ring full, until progress sends it. */
    ASSERT_NO_FATAL_FAILURE(small_puts(80, &pieces));
    EXPECT_EQ(4u, pieces);
}

/* UCX_PXN_PIECE_BYTES: a 40000-byte operation on a ring of 4 slots of
 * 64 KiB. Pieces of 4 KiB go out in the posting call until the ring is
 * full (the relay does not run), and the rest in pieces of 4 KiB as slots
 * come back: 10 in all. Every byte arrives. */
TEST_F(RelayLane, LargeOperationGoesOutInPiecesOfPieceBytes)
{
    for (const auto op : {pxn::abi::kOpPut, pxn::abi::kOpGet}) {
        settings_.piece_bytes = 4096;
        std::unique_ptr<SendLane> lane;
        pxn::RouteAnswer route;
        ASSERT_NO_FATAL_FAILURE(open_route(65536, 5, &lane, &route));
        const bool get = (op == pxn::abi::kOpGet);
        auto local     = get ? std::vector<uint8_t>(40000, 0) : pattern(40000, 8);
        if (get) {
            const auto remote = pattern(40000, 9);
            std::copy(remote.begin(), remote.end(), target_.begin());
        }
        const uct_iov_t iov = {local.data(), local.size(), nullptr, 0, 1};
        TestOwner owner;
        Completion comp;
        const uint64_t before = sender_counters_.pieces;
        ASSERT_EQ(UCS_INPROGRESS,
                  lane->post(&owner, op, route.route, lane_rkey(*lane),
                             reinterpret_cast<uint64_t>(target_.data()), &iov, 1,
                             &comp.comp));
        EXPECT_EQ(4u, sender_counters_.pieces - before) << op;
        ASSERT_TRUE(drive([&] { return comp.calls == 1; }));
        EXPECT_EQ(UCS_OK, comp.comp.status);
        EXPECT_EQ(10u, sender_counters_.pieces - before) << op;
        EXPECT_EQ(0, memcmp(target_.data(), get ? pattern(40000, 9).data() :
                                                  local.data(), 40000)) << op;
        if (get) {
            EXPECT_EQ(0, memcmp(local.data(), target_.data(), 40000));
        }
        lane.reset(); /* before the relay it used */
        TearDown();
        SetUp();
    }
}

/* Small operations, each staged whole in its call: pieces of 4 KiB while
 * the ring has a slot for the next, then the ring's last slot fills up, so
 * that they keep finding room while the relay works. */
TEST_F(RelayLane, SmallOperationsFillTheRingsLastSlotBeyondPieceBytes)
{
    settings_.piece_bytes = 4096;
    std::unique_ptr<SendLane> lane;
    pxn::RouteAnswer route;
    ASSERT_NO_FATAL_FAILURE(open_route(65536, 2, &lane, &route));
    const uint32_t rkey = lane_rkey(*lane);
    TestOwner owner;
    const uint64_t before = sender_counters_.pieces;
    for (uint64_t i = 0; i < 40; ++i) { /* 3 pieces of 4, then 28 in one */
        size_t packed = 0;
        const pxn::uct::ImmediateOp op{
                pxn::abi::kOpPut, route.route, rkey,
                reinterpret_cast<uint64_t>(target_.data()) + i * 1024, 1024};
        ASSERT_EQ(UCS_OK, lane->stage_now(&owner, op, &packed, [&](uint8_t *dest) {
            memset(dest, int(i + 1), 1024);
            return size_t(1024);
        })) << i;
    }
    EXPECT_EQ(3u, sender_counters_.pieces - before);
    ASSERT_TRUE(drive([&] { return owner.done.size() == 40; }));
    EXPECT_EQ(4u, sender_counters_.pieces - before);
    for (uint64_t i = 0; i < 40; ++i) {
        EXPECT_EQ(uint8_t(i + 1), target_[i * 1024 + 1023]) << i;
    }
}

TEST_F(RelayLane, PieceBytesZeroStagesALargeOperationInOnePiece)
{
    settings_.piece_bytes = 0;
    std::unique_ptr<SendLane> lane;
    pxn::RouteAnswer route;
    ASSERT_NO_FATAL_FAILURE(open_route(65536, 5, &lane, &route));
    const auto src = pattern(40000, 8);
    const uct_iov_t iov = {const_cast<uint8_t*>(src.data()), src.size(), nullptr, 0, 1};
    TestOwner owner;
    Completion comp;
    const uint64_t before = sender_counters_.pieces;
    ASSERT_EQ(UCS_INPROGRESS,
              lane->post(&owner, pxn::abi::kOpPut, route.route, lane_rkey(*lane),
                         reinterpret_cast<uint64_t>(target_.data()), &iov, 1,
                         &comp.comp));
    EXPECT_EQ(0u, sender_counters_.pieces - before); /* open until progress */
    ASSERT_TRUE(drive([&] { return comp.calls == 1; }));
    EXPECT_EQ(1u, sender_counters_.pieces - before);
    EXPECT_EQ(0, memcmp(target_.data(), src.data(), src.size()));
}

/* A piece holds up to max_plan (64) blocks; an inner transport with
 * scatter-gather operations of at most 16 elements takes them in 4. */
TEST_F(RelayLane, BlocksOfAPieceGoAsInnerSglOperationsWhereTheInnerTransportHasThem)
{
    settings_.piece_ops = 0;
    net_->offer_sgl(16, 16);
    for (const auto op : {pxn::abi::kOpPut, pxn::abi::kOpGet}) {
        uint64_t inner_ops = 0, sgl_ops = 0;
        ASSERT_NO_FATAL_FAILURE(scattered(op, 256, 200, &inner_ops, &sgl_ops));
        EXPECT_EQ(16u, inner_ops) << op; /* 256 blocks in pieces of 64 */
        EXPECT_EQ(16u, sgl_ops) << op;
        TearDown();
        SetUp();
        settings_.piece_ops = 0;
        net_->offer_sgl(16, 16);
    }
}

TEST_F(RelayLane, BlocksGoOneInnerOperationEachWithoutInnerSgl)
{
    settings_.piece_ops = 0;
    net_->offer_sgl(16, 16);
    settings_.relay_sgl = false; /* UCX_PXN_RELAY_SGL=n */
    uint64_t inner_ops = 0, sgl_ops = 0;
    ASSERT_NO_FATAL_FAILURE(scattered(pxn::abi::kOpPut, 256, 200, &inner_ops, &sgl_ops));
    EXPECT_EQ(256u, inner_ops);
    EXPECT_EQ(0u, sgl_ops);
    TearDown();
    SetUp();
    settings_.piece_ops = 0; /* an inner transport without them */
    ASSERT_NO_FATAL_FAILURE(scattered(pxn::abi::kOpGet, 256, 200, &inner_ops, &sgl_ops));
    EXPECT_EQ(256u, inner_ops);
    EXPECT_EQ(0u, sgl_ops);
}

TEST_F(RelayLane, InnerErrorFailsTheRouteButNotTheLane)
{
    std::unique_ptr<SendLane> lane;
    pxn::RouteAnswer route;
    ASSERT_NO_FATAL_FAILURE(open_route(65536, 3, &lane, &route));
    const uint32_t rkey = lane_rkey(*lane);
    const auto src = pattern(1000, 4);
    const uct_iov_t iov = {const_cast<uint8_t*>(src.data()), src.size(), nullptr,
                           0, 1};
    const uint64_t target = reinterpret_cast<uint64_t>(target_.data());
    TestOwner owner;
    Completion bad, after, fresh;
    /* outside the registered range: the fake's protection error, which
     * leaves the inner ep unusable (an rc QP in error state) */
    ASSERT_EQ(UCS_INPROGRESS, lane->post(&owner, pxn::abi::kOpPut, route.route,
                                         rkey, target + 65000, &iov, 1, &bad.comp));
    ASSERT_TRUE(drive([&] { return bad.calls == 1; }));
    EXPECT_EQ(UCS_ERR_IO_ERROR, bad.comp.status);
    EXPECT_EQ(1u, relay_counters().failed_pieces);
    /* the route is gone from this relay's point of view... */
    ASSERT_EQ(UCS_INPROGRESS, lane->post(&owner, pxn::abi::kOpPut, route.route,
                                         rkey, target, &iov, 1, &after.comp));
    ASSERT_TRUE(drive([&] { return after.calls == 1; }));
    EXPECT_EQ(UCS_ERR_UNREACHABLE, after.comp.status);
    EXPECT_EQ(0u, relay_counters().rejected);
    /* ...while the lane goes on: a new route gets a new inner ep */
    const pxn::RouteAnswer again = route_to(*lane, 3);
    ASSERT_EQ(UCS_OK, again.status);
    EXPECT_NE(route.route, again.route);
    EXPECT_EQ(2u, net_->stats().eps_created);
    ASSERT_EQ(UCS_INPROGRESS, lane->post(&owner, pxn::abi::kOpPut, again.route,
                                         rkey, target, &iov, 1, &fresh.comp));
    ASSERT_TRUE(drive([&] { return fresh.calls == 1; }));
    EXPECT_EQ(UCS_OK, fresh.comp.status);
    EXPECT_EQ(0, memcmp(target_.data(), src.data(), src.size()));
}

TEST_F(RelayLane, TwoSendersOfOneProcessGetLanesOfTheirOwn)
{
    start_relay();
    auto a = open_lane();
    auto b = open_lane();
    ASSERT_TRUE(make_ready(*a));
    ASSERT_TRUE(make_ready(*b));
    EXPECT_NE(a->control().index(), b->control().index());
    EXPECT_EQ(2u, relay_counters().lane_resets);
}

TEST_F(RelayLane, LaneFailsWhenTheRelayNeverAcknowledges)
{
    settings_.heartbeat_timeout = 0.05;
    start_relay();
    auto lane = open_lane();
    /* the relay never runs and its heartbeat goes stale */
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::seconds(10);
    while (!lane->failed() && (std::chrono::steady_clock::now() < deadline)) {
        lane->progress();
    }
    EXPECT_TRUE(lane->failed());
    EXPECT_FALSE(lane->usable());
}

} // namespace pxn_test
