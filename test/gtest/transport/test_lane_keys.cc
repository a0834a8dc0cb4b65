/*
 * The remote key table of a sender lane (LaneControl): a key is found
 * where it was written, and (index, generation) names one key for as long
 * as rkey_current() says so, which is what lets endpoints cache it instead
 * of searching the table on every operation.
 */
#include "lane_fixture.h"

#include <vector>

namespace pxn_test {

using pxn::uct::SendLane;

class LaneKeys : public LaneFixture {
protected:
    void SetUp() override
    {
        LaneFixture::SetUp();
        start_relay();
        lane_ = open_lane();
        ASSERT_TRUE(make_ready(*lane_));
        memory_.assign(4096 * (pxn::abi::kMaxRkeys + 1), 0);
    }

    void TearDown() override
    {
        lane_.reset();
        LaneFixture::TearDown();
    }

    /* A key of its own for each i. */
    pxn::Bytes key(unsigned i)
    {
        return net_->register_remote(memory_.data() + 4096 * i, 4096);
    }

    ucs_status_t index_of(SendLane &lane, const pxn::Bytes &k, uint32_t *index,
                          uint64_t *gen)
    {
        return lane.control().rkey_index(k.data(), uint16_t(k.size()), index, gen);
    }

    std::unique_ptr<SendLane> lane_;
    std::vector<uint8_t>      memory_;
};

TEST_F(LaneKeys, AKeyFoundAgainKeepsItsEntryAndGeneration)
{
    const pxn::Bytes k = key(0);
    uint32_t i1, i2;
    uint64_t g1, g2;
    ASSERT_EQ(UCS_OK, index_of(*lane_, k, &i1, &g1));
    ASSERT_EQ(UCS_OK, index_of(*lane_, k, &i2, &g2));
    EXPECT_EQ(i1, i2);
    EXPECT_EQ(g1, g2);
    EXPECT_TRUE(lane_->control().rkey_current(i1, g1));
    EXPECT_FALSE(lane_->control().rkey_current(i1, g1 + 1));
    EXPECT_FALSE(lane_->control().rkey_current(pxn::abi::kMaxRkeys, g1));
}

TEST_F(LaneKeys, ARewrittenEntryIsNoLongerCurrent)
{
    std::vector<uint32_t> index(pxn::abi::kMaxRkeys + 1);
    std::vector<uint64_t> gen(pxn::abi::kMaxRkeys + 1);
    for (unsigned i = 0; i < pxn::abi::kMaxRkeys; ++i) {
        ASSERT_EQ(UCS_OK, index_of(*lane_, key(i), &index[i], &gen[i]));
    }
    /* a full table: an entry nobody holds is rewritten for the new key */
    const unsigned last = pxn::abi::kMaxRkeys;
    ASSERT_EQ(UCS_OK, index_of(*lane_, key(last), &index[last], &gen[last]));
    unsigned rewritten = 0;
    for (unsigned i = 0; i < last; ++i) {
        if (index[i] == index[last]) {
            ++rewritten;
            EXPECT_FALSE(lane_->control().rkey_current(index[i], gen[i]));
            EXPECT_NE(gen[i], gen[last]);
        } else {
            EXPECT_TRUE(lane_->control().rkey_current(index[i], gen[i]));
        }
    }
    EXPECT_EQ(1u, rewritten);
    EXPECT_TRUE(lane_->control().rkey_current(index[last], gen[last]));
}

TEST_F(LaneKeys, HeldEntriesAreNeverRewritten)
{
    std::vector<uint32_t> index(pxn::abi::kMaxRkeys);
    uint64_t gen;
    for (unsigned i = 0; i < pxn::abi::kMaxRkeys; ++i) {
        ASSERT_EQ(UCS_OK, index_of(*lane_, key(i), &index[i], &gen));
        lane_->control().rkey_hold(index[i]);
    }
    uint32_t more;
    EXPECT_EQ(UCS_ERR_NO_RESOURCE,
              index_of(*lane_, key(pxn::abi::kMaxRkeys), &more, &gen));
    lane_->control().rkey_drop(index[5]);
    ASSERT_EQ(UCS_OK, index_of(*lane_, key(pxn::abi::kMaxRkeys), &more, &gen));
    EXPECT_EQ(index[5], more);
    for (unsigned i = 0; i < pxn::abi::kMaxRkeys; ++i) {
        if (i != 5) {
            lane_->control().rkey_drop(index[i]);
        }
    }
}

TEST_F(LaneKeys, GenerationsAreUniqueAcrossLanes)
{
    auto other = open_lane();
    ASSERT_TRUE(make_ready(*other));
    const pxn::Bytes k = key(0);
    uint32_t i1, i2;
    uint64_t g1, g2;
    ASSERT_EQ(UCS_OK, index_of(*lane_, k, &i1, &g1));
    ASSERT_EQ(UCS_OK, index_of(*other, k, &i2, &g2));
    EXPECT_NE(g1, g2);
    /* one lane's (index, generation) never names an entry of another */
    EXPECT_FALSE(other->control().rkey_current(i1, g1));
    EXPECT_FALSE(lane_->control().rkey_current(i2, g2));
}

} // namespace pxn_test
