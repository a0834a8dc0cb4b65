#include <ucs/pxn/seq.h>

#include <gtest/gtest.h>

#include <vector>

namespace {

TEST(Seq, ZeroIsInvalidAndFirstSeqIsOne)
{
    EXPECT_FALSE(pxn::seq_is_valid(0));
    EXPECT_TRUE(pxn::seq_is_valid(1));

    pxn::SendWindow w;
    ASSERT_EQ(UCS_OK, w.reset(18, 7));
    uint64_t seq = 0;
    ASSERT_EQ(UCS_OK, w.reserve(&seq));
    EXPECT_EQ(1u, seq);
}

TEST(Seq, SlotIsSeqMinusOneModuloSlotsForNonPowerOfTwo)
{
    EXPECT_EQ(0u, pxn::slot_of(1, 18));
    EXPECT_EQ(17u, pxn::slot_of(18, 18));
    EXPECT_EQ(0u, pxn::slot_of(19, 18));
    EXPECT_EQ(15u, pxn::slot_of(34, 18));  /* a mask (& 17) would give 1 */
    EXPECT_EQ(5u, pxn::slot_of(1000, 7));
    EXPECT_EQ(0u, pxn::slot_of(5, 1));
    /* Near the top of the range the division still holds. */
    EXPECT_EQ((UINT64_MAX - 1) % 18, pxn::slot_of(UINT64_MAX, 18));
}

TEST(Seq, SlotAddressIsArenaPlusLaneAndSlotTimesSlotSize)
{
    constexpr uint64_t kS = 8ull << 20;
    EXPECT_EQ(0u, pxn::slot_offset(0, 0, 18, kS));
    EXPECT_EQ(5 * kS, pxn::slot_offset(0, 5, 18, kS));
    EXPECT_EQ((3 * 18 + 5) * kS, pxn::slot_offset(3, 5, 18, kS));
    /* Last byte of the default 7 x 18 x 8 MiB arena. */
    EXPECT_EQ(1008ull << 20, pxn::slot_offset(6, 17, 18, kS) + kS);

    std::vector<char> arena(3 * 5 * 64);
    EXPECT_EQ(arena.data() + (2 * 5 + 4) * 64,
              pxn::slot_address(arena.data(), 2, 4, 5, 64));
}

TEST(Seq, CreditExhaustedWithSlotsInFlight)
{
    EXPECT_TRUE(pxn::has_credit(18, 0, 18));
    EXPECT_FALSE(pxn::has_credit(19, 0, 18));
    EXPECT_TRUE(pxn::has_credit(19, 1, 18));
    EXPECT_FALSE(pxn::has_credit(3, 5, 18)); /* corrupt: next <= reaped */

    pxn::SendWindow w;
    ASSERT_EQ(UCS_OK, w.reset(18, 1));
    uint64_t seq = 0;
    for (uint64_t expected = 1; expected <= 18; ++expected) {
        ASSERT_EQ(UCS_OK, w.reserve(&seq));
        EXPECT_EQ(expected, seq);
    }
    EXPECT_EQ(18u, w.in_flight());
    seq = 0;
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, w.reserve(&seq));
    EXPECT_EQ(0u, seq);
    EXPECT_EQ(19u, w.next());
}

TEST(Seq, ReusesSlotZeroAfterFirstReap)
{
    constexpr uint32_t kSlots = 18;
    pxn::SendWindow w;
    ASSERT_EQ(UCS_OK, w.reset(kSlots, 1));
    uint64_t seq = 0;
    for (uint32_t i = 0; i < kSlots; ++i) {
        ASSERT_EQ(UCS_OK, w.reserve(&seq));
        EXPECT_EQ(i, pxn::slot_of(seq, kSlots));
    }
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, w.reserve(&seq));

    /* Reaping out of order is refused and gives no credit. */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, w.reap(2));
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, w.reserve(&seq));

    ASSERT_EQ(UCS_OK, w.reap(1));
    ASSERT_EQ(UCS_OK, w.reserve(&seq));
    EXPECT_EQ(19u, seq);
    EXPECT_EQ(0u, pxn::slot_of(seq, kSlots));
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, w.reserve(&seq));
}

TEST(Seq, RefusesReapOfUnallocatedSeq)
{
    pxn::SendWindow w;
    ASSERT_EQ(UCS_OK, w.reset(4, 1));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, w.reap(1));
    uint64_t seq = 0;
    ASSERT_EQ(UCS_OK, w.reserve(&seq));
    EXPECT_EQ(UCS_OK, w.reap(1));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, w.reap(1));
    EXPECT_TRUE(w.drained());
}

TEST(Seq, LaneStartsAfterInitialSeq)
{
    pxn::SendWindow w;
    ASSERT_EQ(UCS_OK, w.reset(5, 9, 1000));
    uint64_t seq = 0;
    ASSERT_EQ(UCS_OK, w.reserve(&seq));
    EXPECT_EQ(1001u, seq);
    EXPECT_EQ(1000u, w.reaped());
    EXPECT_EQ(0u, pxn::slot_of(seq, 5));
}

TEST(Seq, RefusesBadWindowParameters)
{
    pxn::SendWindow w;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, w.reset(0, 1));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, w.reset(pxn::kMaxSlots + 1, 1));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, w.reset(4, 0));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, w.reset(4, 1, 100, 100));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, w.reset(4, 1, 0, UINT64_MAX));

    pxn::CompletionTracker t;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, t.reset(0));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, t.reset(pxn::kMaxSlots + 1));
}

TEST(Seq, CompletedAdvancesContiguouslyWithOutOfOrderFinishes)
{
    pxn::CompletionTracker t;
    ASSERT_EQ(UCS_OK, t.reset(18));

    ASSERT_EQ(UCS_OK, t.finish(3));
    ASSERT_EQ(UCS_OK, t.finish(2));
    EXPECT_EQ(0u, t.completed());
    EXPECT_TRUE(t.is_finished(3));
    EXPECT_FALSE(t.is_finished(1));

    ASSERT_EQ(UCS_OK, t.finish(1));
    EXPECT_EQ(3u, t.completed());

    ASSERT_EQ(UCS_OK, t.finish(5));
    EXPECT_EQ(3u, t.completed());
    ASSERT_EQ(UCS_OK, t.finish(4));
    EXPECT_EQ(5u, t.completed());
    EXPECT_TRUE(t.is_finished(2));
    EXPECT_FALSE(t.is_finished(6));
}

TEST(Seq, CompletedCrossesTheWindowInReverseOrder)
{
    /* A full window finished back to front, twice (slots reused). */
    pxn::CompletionTracker t;
    ASSERT_EQ(UCS_OK, t.reset(7));
    for (uint64_t base = 0; base < 14; base += 7) {
        for (uint64_t seq = base + 7; seq > base + 1; --seq) {
            ASSERT_EQ(UCS_OK, t.finish(seq));
            EXPECT_EQ(base, t.completed());
        }
        ASSERT_EQ(UCS_OK, t.finish(base + 1));
        EXPECT_EQ(base + 7, t.completed());
    }
}

TEST(Seq, TrackerRefusesSeqOutsideWindowOrTwice)
{
    pxn::CompletionTracker t;
    ASSERT_EQ(UCS_OK, t.reset(4));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, t.finish(0));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, t.finish(5)); /* beyond the window */
    ASSERT_EQ(UCS_OK, t.finish(2));
    EXPECT_EQ(UCS_ERR_ALREADY_EXISTS, t.finish(2));
    ASSERT_EQ(UCS_OK, t.finish(1));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, t.finish(1)); /* already completed */
    EXPECT_EQ(UCS_OK, t.finish(6));                /* window moved */
    EXPECT_EQ(2u, t.completed());
}

TEST(Seq, TrackerStartsAtInitialSeq)
{
    pxn::CompletionTracker t;
    ASSERT_EQ(UCS_OK, t.reset(3, 500));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, t.finish(500));
    ASSERT_EQ(UCS_OK, t.finish(501));
    EXPECT_EQ(501u, t.completed());
}

TEST(Seq, NeedsReestablishAboveLimitAndAtZero)
{
    EXPECT_FALSE(pxn::needs_reestablish(1));
    EXPECT_FALSE(pxn::needs_reestablish(pxn::kDefaultSeqLimit));
    EXPECT_TRUE(pxn::needs_reestablish(pxn::kDefaultSeqLimit + 1));
    EXPECT_TRUE(pxn::needs_reestablish(0)); /* wrapped */
    EXPECT_TRUE(pxn::needs_reestablish(11, 10));
    EXPECT_FALSE(pxn::needs_reestablish(10, 10));
    /* The margin keeps seq + slots from wrapping for any window. */
    EXPECT_GT(UINT64_MAX - pxn::kDefaultSeqLimit, uint64_t(pxn::kMaxSlots));
}

TEST(Seq, WrapForcesEpochChange)
{
    /* A lane claimed with initial_seq close to the limit. */
    constexpr uint64_t kLimit = pxn::kDefaultSeqLimit;
    pxn::SendWindow w;
    ASSERT_EQ(UCS_OK, w.reset(4, 11, kLimit - 3));

    uint64_t seq = 0;
    for (uint64_t expected = kLimit - 2; expected <= kLimit; ++expected) {
        ASSERT_EQ(UCS_OK, w.reserve(&seq));
        EXPECT_EQ(expected, seq);
    }
    /* Credit is left (3 of 4 in flight), but the limit is reached. */
    EXPECT_TRUE(pxn::has_credit(w.next(), w.reaped(), w.slots()));
    EXPECT_TRUE(w.needs_reestablish());
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, w.reserve(&seq));

    /* Not before the lane is drained ... */
    EXPECT_EQ(UCS_ERR_BUSY, w.reestablish(12));
    ASSERT_EQ(UCS_OK, w.reap(kLimit - 2));
    ASSERT_EQ(UCS_OK, w.reap(kLimit - 1));
    EXPECT_EQ(UCS_ERR_BUSY, w.reestablish(12));
    ASSERT_EQ(UCS_OK, w.reap(kLimit));
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, w.reserve(&seq));

    /* ... and never under the old epoch. */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, w.reestablish(11));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, w.reestablish(0));
    ASSERT_EQ(UCS_OK, w.reestablish(12));
    EXPECT_EQ(12u, w.epoch());
    ASSERT_EQ(UCS_OK, w.reserve(&seq));
    EXPECT_EQ(1u, seq);
    EXPECT_EQ(0u, pxn::slot_of(seq, 4));
}

TEST(Seq, WrapLimitIsConfigurable)
{
    pxn::SendWindow w;
    ASSERT_EQ(UCS_OK, w.reset(8, 1, 0, 3));
    uint64_t seq = 0;
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(UCS_OK, w.reserve(&seq));
    }
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, w.reserve(&seq));
    for (uint64_t s = 1; s <= 3; ++s) {
        ASSERT_EQ(UCS_OK, w.reap(s));
    }
    ASSERT_EQ(UCS_OK, w.reestablish(2, 0));
    ASSERT_EQ(UCS_OK, w.reserve(&seq));
    EXPECT_EQ(1u, seq);
}

} // namespace
