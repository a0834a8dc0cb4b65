/*
 * The relay's staging memory (pxn_relay_arena.h) with a host arena, relay
 * and senders in one process over FakeNet: a lane has memory only once a
 * claim is acknowledged (or as a warm spare), keeps it for the linger time
 * after it is free, is reused by the next claim, and the arena file's
 * blocks (what the file system really holds) follow.
 */
#include "lane_fixture.h"

#include <algorithm>
#include <sys/stat.h>

namespace pxn_test {

using pxn::uct::SendLane;

class RelayArena : public LaneFixture {
protected:
    void SetUp() override
    {
        LaneFixture::SetUp();
        settings_.warm_lanes  = 0;
        settings_.lane_linger = 3600;
    }

    uint64_t lane_bytes() const
    {
        return uint64_t(settings_.geometry.slots) * settings_.geometry.slot_size;
    }

    /* Bytes of the arena file the file system holds. */
    uint64_t arena_blocks() const
    {
        struct stat st;
        const std::string path = registry_->path() + "/" +
                                 relay_->entry().arena_name();
        EXPECT_EQ(0, stat(path.c_str(), &st)) << path;
        return uint64_t(st.st_blocks) * 512;
    }

    const pxn::abi::LaneMemory &memory(uint32_t lane) const
    {
        return relay_->entry().lane(lane).memory();
    }

    uint32_t backed(uint32_t lane) const
    {
        return pxn::abi::load_acquire(memory(lane).backed);
    }

    /* Gives the lane back and lets the relay notice. */
    void close_lane(std::unique_ptr<SendLane> &lane)
    {
        lanes_.erase(std::find(lanes_.begin(), lanes_.end(), lane.get()));
        lane.reset();
        rounds(50);
    }

    /* Rounds until done(): the arena's upkeep waits for the relay to be
     * quiet for RelayService::kQuietNs, a time, not a number of rounds. */
    bool settle(const std::function<bool()> &done)
    {
        return wait_until([&] {
            round();
            return done();
        }, 10, 0.0001);
    }

    void rounds(unsigned n)
    {
        for (unsigned i = 0; i < n; ++i) {
            round();
        }
    }
};

TEST_F(RelayArena, LaneGetsMemoryOnlyWhenItsClaimIsAcknowledged)
{
    start_relay();
    rounds(50);
    EXPECT_EQ(0u, arena_blocks());
    EXPECT_EQ(0u, relay_counters().lanes_backed);
    for (uint32_t l = 0; l < settings_.geometry.lanes; ++l) {
        EXPECT_EQ(0u, backed(l));
    }

    auto lane = open_lane();
    ASSERT_TRUE(make_ready(*lane));
    const uint32_t index = lane->control().index();
    EXPECT_EQ(1u, backed(index));
    EXPECT_NE(0u, memory(index).gen);
    EXPECT_EQ(lane_bytes(), memory(index).size);
    EXPECT_GE(arena_blocks(), lane_bytes());
    EXPECT_LT(arena_blocks(), 2 * lane_bytes());
    EXPECT_EQ(1u, relay_counters().lane_commits);
    EXPECT_EQ(1u, relay_counters().lanes_backed);
    EXPECT_EQ(0u, relay_counters().warm_claims);
    EXPECT_EQ(1u, sender_counters_.lanes);
    EXPECT_GE(sender_counters_.lane_open_ns, sender_counters_.lane_map_ns);
    EXPECT_GT(sender_counters_.lane_open_ns, 0u);
}

TEST_F(RelayArena, FreeLaneKeepsItsMemoryForTheLingerTimeOnly)
{
    start_relay();
    auto lane = open_lane();
    ASSERT_TRUE(make_ready(*lane));
    const uint32_t index = lane->control().index();
    close_lane(lane);
    /* warm: still backed long after the lane is free */
    rounds(1000);
    EXPECT_EQ(1u, backed(index));
    EXPECT_GE(arena_blocks(), lane_bytes());
    relay_.reset();
    registry_.reset();

    /* a relay without linger gives the memory back at once */
    settings_.lane_linger = 0;
    start_relay();
    lane = open_lane();
    ASSERT_TRUE(make_ready(*lane));
    const uint32_t again = lane->control().index();
    EXPECT_GE(arena_blocks(), lane_bytes());
    close_lane(lane);
    ASSERT_TRUE(settle([&] { return backed(again) == 0; }));
    EXPECT_EQ(0u, arena_blocks());
    EXPECT_EQ(0u, relay_counters().lanes_backed);
}

TEST_F(RelayArena, NextClaimReusesTheWarmLaneWithoutBackingItAgain)
{
    start_relay();
    auto first = open_lane();
    ASSERT_TRUE(make_ready(*first));
    const uint32_t index = first->control().index();
    const uint64_t gen   = memory(index).gen;
    close_lane(first);

    auto second = open_lane();
    ASSERT_TRUE(make_ready(*second));
    EXPECT_EQ(index, second->control().index());
    EXPECT_EQ(gen, memory(index).gen);
    EXPECT_EQ(1u, relay_counters().lane_commits);
    EXPECT_EQ(1u, relay_counters().warm_claims);
    EXPECT_LT(arena_blocks(), 2 * lane_bytes());
}

TEST_F(RelayArena, ClaimPrefersTheWarmLaneOverAnEarlierColdOne)
{
    /* lanes 0 and 1 claimed; lane 0 given back with linger 0, lane 1 kept
     * warm by the one warm lane the relay keeps */
    settings_.lane_linger = 0;
    settings_.warm_lanes  = 1;
    start_relay();
    auto a = open_lane();
    ASSERT_TRUE(make_ready(*a));
    auto b = open_lane();
    ASSERT_TRUE(make_ready(*b));
    ASSERT_EQ(0u, a->control().index());
    ASSERT_EQ(1u, b->control().index());
    close_lane(a);
    close_lane(b);
    ASSERT_TRUE(settle([&] { return relay_counters().lanes_backed == 1; }));
    rounds(100);
    ASSERT_EQ(1u, relay_counters().lanes_backed);
    ASSERT_EQ(0u, backed(0));
    ASSERT_EQ(1u, backed(1));

    auto c = open_lane();
    ASSERT_TRUE(make_ready(*c));
    EXPECT_EQ(1u, c->control().index());
    EXPECT_GE(relay_counters().warm_claims, 1u);
}

TEST_F(RelayArena, WarmLaneIsBackedAheadOfAnyClaimAndReplacedWhenTaken)
{
    settings_.warm_lanes = 1;
    start_relay();
    ASSERT_TRUE(settle([&] { return relay_counters().lanes_backed == 1; }));
    EXPECT_GE(arena_blocks(), lane_bytes());
    EXPECT_LT(arena_blocks(), 2 * lane_bytes());
    EXPECT_EQ(1u, backed(0));

    auto lane = open_lane();
    ASSERT_TRUE(make_ready(*lane));
    EXPECT_EQ(0u, lane->control().index());
    EXPECT_EQ(1u, relay_counters().warm_claims);
    EXPECT_EQ(1u, relay_counters().lane_commits);
    /* the next spare, in rounds without work */
    ASSERT_TRUE(settle([&] { return relay_counters().lanes_backed == 2; }));
    rounds(100);
    EXPECT_EQ(2u, relay_counters().lanes_backed);
    EXPECT_GE(arena_blocks(), 2 * lane_bytes());
}

TEST_F(RelayArena, EveryLaneClaimedStaysWithinLanesTimesLaneBytes)
{
    settings_.warm_lanes = 2;
    start_relay();
    std::vector<std::unique_ptr<SendLane>> lanes;
    for (uint32_t i = 0; i < settings_.geometry.lanes; ++i) {
        lanes.push_back(open_lane());
        ASSERT_TRUE(make_ready(*lanes.back()));
    }
    rounds(200);
    EXPECT_EQ(settings_.geometry.lanes, relay_counters().lanes_backed);
    EXPECT_LE(arena_blocks(), settings_.geometry.arena_size());
    EXPECT_GE(arena_blocks(), settings_.geometry.arena_size());
}

TEST_F(RelayArena, PiecesLandThroughAReusedLane)
{
    start_relay();
    std::vector<uint8_t> target(200000, 0);
    const pxn::Bytes rkey = net_->register_remote(target.data(), target.size());
    for (int round = 0; round < 2; ++round) {
        auto lane = open_lane();
        ASSERT_TRUE(make_ready(*lane));
        const pxn::RouteAnswer route = route_to(*lane, 3);
        ASSERT_EQ(UCS_OK, route.status);
        uint32_t key = 0;
        ASSERT_EQ(UCS_OK, lane->control().rkey_index(rkey.data(),
                                                     uint16_t(rkey.size()), &key));
        std::vector<uint8_t> src(target.size(), uint8_t(0x40 + round));
        const uct_iov_t iov = {src.data(), src.size(), nullptr, 0, 1};
        TestOwner owner;
        Completion comp;
        ASSERT_EQ(UCS_INPROGRESS,
                  lane->post(&owner, pxn::abi::kOpPut, route.route, key,
                             reinterpret_cast<uint64_t>(target.data()), &iov, 1,
                             &comp.comp));
        ASSERT_TRUE(drive([&] { return comp.calls == 1; }));
        EXPECT_EQ(UCS_OK, comp.comp.status);
        EXPECT_EQ(src, target);
        close_lane(lane);
    }
    EXPECT_EQ(1u, relay_counters().lane_commits);
    EXPECT_EQ(1u, relay_counters().warm_claims);
}

} // namespace pxn_test
