#include <ucs/pxn/abi.h>
#include <ucs/pxn/planner.h>

#include <gtest/gtest.h>

#include <vector>

namespace {

using pxn::PlanLimits;
using pxn::PlannedSegment;
using pxn::Planner;
using pxn::Segment;

constexpr uint64_t kLocal  = 0x10000000ull;
constexpr uint64_t kRemote = 0x7f0000000000ull;

Segment segment(uint64_t offset, uint64_t length, uint32_t request = 0,
                uint32_t rkey = 0)
{
    return {kLocal + offset, kRemote + offset, length, rkey, request};
}

/* Every byte of the input appears exactly once, in order, at consecutive
 * slot offsets of each piece; no piece breaks a limit. */
void expect_tiles_input(const Planner &p, const std::vector<Segment> &in,
                        const PlanLimits &limits)
{
    size_t   seg    = 0;
    uint64_t offset = 0;
    size_t   next_first = 0;
    for (const Planner::Piece &piece : p.pieces()) {
        ASSERT_EQ(next_first, piece.first);
        ASSERT_GE(piece.count, 1u);
        ASSERT_LE(piece.count, limits.max_plan);
        ASSERT_LE(piece.length, limits.slot_size);
        uint64_t slot_offset = 0;
        for (uint32_t i = 0; i < piece.count; ++i) {
            const PlannedSegment &ps = p.segments()[piece.first + i];
            while (in[seg].length == 0) {
                ++seg;
            }
            EXPECT_EQ(slot_offset, ps.slot_offset);
            EXPECT_EQ(in[seg].local_addr + offset, ps.local_addr);
            EXPECT_EQ(in[seg].remote_addr + offset, ps.remote_addr);
            EXPECT_EQ(in[seg].rkey_index, ps.rkey_index);
            EXPECT_EQ(in[seg].request, ps.request);
            ASSERT_GT(ps.length, 0u);
            slot_offset += ps.length;
            offset      += ps.length;
            ASSERT_LE(offset, in[seg].length);
            if (offset == in[seg].length) {
                ++seg;
                offset = 0;
            }
        }
        EXPECT_EQ(slot_offset, piece.length);
        next_first += piece.count;
    }
    while ((seg < in.size()) && (in[seg].length == 0)) {
        ++seg;
    }
    EXPECT_EQ(in.size(), seg);
    EXPECT_EQ(p.segments().size(), next_first);
}

std::vector<uint64_t> piece_lengths(const Planner &p)
{
    std::vector<uint64_t> lengths;
    for (const Planner::Piece &piece : p.pieces()) {
        lengths.push_back(piece.length);
    }
    return lengths;
}

TEST(Planner, SegmentOneByteShortOfSlotIsOnePiece)
{
    const PlanLimits limits = {4096, 8};
    const std::vector<Segment> in = {segment(0, 4095)};
    Planner p;
    ASSERT_EQ(UCS_OK, p.plan(limits, in.data(), in.size(), 1));
    EXPECT_EQ(std::vector<uint64_t>({4095}), piece_lengths(p));
    EXPECT_EQ(1u, p.credits()[0]);
    expect_tiles_input(p, in, limits);
}

TEST(Planner, SegmentOfExactlySlotSizeIsOnePiece)
{
    const PlanLimits limits = {4096, 8};
    const std::vector<Segment> in = {segment(0, 4096)};
    Planner p;
    ASSERT_EQ(UCS_OK, p.plan(limits, in.data(), in.size(), 1));
    EXPECT_EQ(std::vector<uint64_t>({4096}), piece_lengths(p));
    EXPECT_EQ(1u, p.credits()[0]);
}

TEST(Planner, SegmentOneByteOverSlotSplitsByAddress)
{
    const PlanLimits limits = {4096, 8};
    const std::vector<Segment> in = {segment(0, 4097)};
    Planner p;
    ASSERT_EQ(UCS_OK, p.plan(limits, in.data(), in.size(), 1));
    EXPECT_EQ(std::vector<uint64_t>({4096, 1}), piece_lengths(p));
    ASSERT_EQ(2u, p.segments().size());
    EXPECT_EQ(kRemote + 4096, p.segments()[1].remote_addr);
    EXPECT_EQ(kLocal + 4096, p.segments()[1].local_addr);
    EXPECT_EQ(0u, p.segments()[1].slot_offset);
    EXPECT_EQ(2u, p.credits()[0]);
    expect_tiles_input(p, in, limits);
}

TEST(Planner, FiveGiBContiguousGivesExactly640PiecesOf8MiB)
{
    const PlanLimits limits = PlanLimits::of(pxn::Geometry());
    const std::vector<Segment> in = {segment(0, 5ull << 30)};
    Planner p;
    ASSERT_EQ(UCS_OK, p.plan(limits, in.data(), in.size(), 1));
    ASSERT_EQ(640u, p.pieces().size());
    for (size_t i = 0; i < p.pieces().size(); ++i) {
        EXPECT_EQ(8ull << 20, p.pieces()[i].length);
        EXPECT_EQ(1u, p.pieces()[i].count);
        EXPECT_EQ(kRemote + i * (8ull << 20), p.segments()[i].remote_addr);
    }
    EXPECT_EQ(640u, p.credits()[0]);
    expect_tiles_input(p, in, limits);
}

TEST(Planner, ClosesPieceAtPlanCountCap)
{
    const PlanLimits limits = {4096, 3};
    std::vector<Segment> in;
    for (uint64_t i = 0; i < 10; ++i) {
        in.push_back(segment(i * 100, 10));
    }
    Planner p;
    ASSERT_EQ(UCS_OK, p.plan(limits, in.data(), in.size(), 1));
    ASSERT_EQ(4u, p.pieces().size());
    EXPECT_EQ(3u, p.pieces()[0].count);
    EXPECT_EQ(3u, p.pieces()[2].count);
    EXPECT_EQ(1u, p.pieces()[3].count);
    EXPECT_EQ(std::vector<uint64_t>({30, 30, 30, 10}), piece_lengths(p));
    EXPECT_EQ(4u, p.credits()[0]);
    expect_tiles_input(p, in, limits);
}

TEST(Planner, PacksManySmallSegmentsIntoFewPieces)
{
    const PlanLimits limits = PlanLimits::of(pxn::Geometry());
    std::vector<Segment> in;
    for (uint64_t i = 0; i < 10000; ++i) {
        in.push_back(segment(i * 4096, 1024, uint32_t(i / 2000)));
    }
    Planner p;
    ASSERT_EQ(UCS_OK, p.plan(limits, in.data(), in.size(), 5));
    /* 10 MB fits 2 slots, but 10000 plans need ceil(10000 / 4096) = 3. */
    ASSERT_EQ(3u, p.pieces().size());
    EXPECT_EQ(4096u, p.pieces()[0].count);
    EXPECT_EQ(4096u * 1024, p.pieces()[0].length);
    EXPECT_EQ(10000u - 2 * 4096, p.pieces()[2].count);
    /* Requests of 2000 segments each; r2 and r4 straddle pieces. */
    EXPECT_EQ(std::vector<uint64_t>({1, 1, 2, 1, 2}), p.credits());
    expect_tiles_input(p, in, limits);
}

TEST(Planner, SegmentStraddlesPiecesAndPiecesMixRequests)
{
    const PlanLimits limits = {100, 16};
    const std::vector<Segment> in = {segment(0, 60, 0), segment(1000, 60, 1),
                                     segment(2000, 60, 2),
                                     segment(3000, 60, 3)};
    Planner p;
    ASSERT_EQ(UCS_OK, p.plan(limits, in.data(), in.size(), 4));
    EXPECT_EQ(std::vector<uint64_t>({100, 100, 40}), piece_lengths(p));

    const auto &s = p.segments();
    ASSERT_EQ(6u, s.size());
    /* piece 0: r0 60, r1 40 | piece 1: r1 20, r2 60, r3 20 | piece 2: r3 40 */
    EXPECT_EQ(1u, s[1].request);
    EXPECT_EQ(40u, s[1].length);
    EXPECT_EQ(60u, s[1].slot_offset);
    EXPECT_EQ(1u, s[2].request);
    EXPECT_EQ(20u, s[2].length);
    EXPECT_EQ(kRemote + 1000 + 40, s[2].remote_addr);
    EXPECT_EQ(0u, s[2].slot_offset);
    EXPECT_EQ(3u, s[5].request);
    EXPECT_EQ(kRemote + 3000 + 20, s[5].remote_addr);

    EXPECT_EQ(std::vector<uint64_t>({1, 2, 1, 2}), p.credits());
    expect_tiles_input(p, in, limits);
}

TEST(Planner, CreditsAreKnownBeforeTheFirstPieceAndEndAtTheLastPiece)
{
    const PlanLimits limits = {1000, 4};
    std::vector<Segment> in;
    for (uint32_t r = 0; r < 6; ++r) {
        for (uint32_t k = 0; k <= r; ++k) {
            in.push_back(segment((r * 10 + k) * 10000, 150 * (k + 1), r));
        }
    }
    /* Last piece that carries bytes of each request, found by streaming. */
    pxn::PieceCursor cursor;
    ASSERT_EQ(UCS_OK, cursor.reset(limits, in.data(), in.size(), 6));
    std::vector<uint64_t> credits(6, 99);
    const pxn::PlanTotals totals = cursor.count(credits.data());
    for (uint32_t r = 0; r < 6; ++r) {
        EXPECT_GE(credits[r], 1u);
    }

    std::vector<PlannedSegment> buffer(limits.max_plan);
    std::vector<uint64_t>       remaining = credits;
    std::vector<int64_t>        last_piece(6, -1), done_at(6, -1);
    uint64_t                    length, pieces = 0, planned = 0;
    while (!cursor.done()) {
        const uint32_t n = cursor.next(buffer.data(), &length);
        ASSERT_GT(n, 0u);
        for (uint32_t i = 0; i < n; ++i) {
            const PlannedSegment &ps = buffer[i];
            last_piece[ps.request] = int64_t(pieces);
            if (ps.credit) {
                ASSERT_GT(remaining[ps.request], 0u);
                if (--remaining[ps.request] == 0) {
                    done_at[ps.request] = int64_t(pieces);
                }
            }
        }
        ++pieces;
        planned += n;
    }
    EXPECT_EQ(totals.pieces, pieces);
    EXPECT_EQ(totals.segments, planned);
    for (uint32_t r = 0; r < 6; ++r) {
        EXPECT_EQ(0u, remaining[r]) << r;
        EXPECT_EQ(last_piece[r], done_at[r]) << r;
    }
    EXPECT_EQ(0u, cursor.next(buffer.data(), &length));
}

TEST(Planner, InterleavedRequestsGetOneCreditPerRun)
{
    const PlanLimits limits = {1000, 16};
    const std::vector<Segment> in = {segment(0, 10, 0), segment(100, 10, 1),
                                     segment(200, 10, 0)};
    Planner p;
    ASSERT_EQ(UCS_OK, p.plan(limits, in.data(), in.size(), 2));
    ASSERT_EQ(1u, p.pieces().size());
    EXPECT_TRUE(p.segments()[0].credit);
    EXPECT_TRUE(p.segments()[1].credit);
    EXPECT_TRUE(p.segments()[2].credit);
    EXPECT_EQ(std::vector<uint64_t>({2, 1}), p.credits());

    const std::vector<Segment> grouped = {segment(0, 10, 0), segment(100, 10, 0),
                                          segment(200, 10, 1)};
    ASSERT_EQ(UCS_OK, p.plan(limits, grouped.data(), grouped.size(), 2));
    EXPECT_FALSE(p.segments()[1].credit);
    EXPECT_EQ(std::vector<uint64_t>({1, 1}), p.credits());
}

TEST(Planner, SkipsEmptySegmentsAndGivesEmptyRequestsNoCredit)
{
    const PlanLimits limits = {1000, 16};
    const std::vector<Segment> in = {segment(0, 0, 0), segment(0, 10, 1),
                                     segment(0, 0, 1), segment(0, 0, 2)};
    Planner p;
    ASSERT_EQ(UCS_OK, p.plan(limits, in.data(), in.size(), 3));
    ASSERT_EQ(1u, p.pieces().size());
    ASSERT_EQ(1u, p.segments().size());
    EXPECT_EQ(std::vector<uint64_t>({0, 1, 0}), p.credits());

    ASSERT_EQ(UCS_OK, p.plan(limits, in.data(), 1, 1));
    EXPECT_TRUE(p.pieces().empty());
    EXPECT_EQ(0u, p.credits()[0]);

    pxn::PieceCursor cursor;
    ASSERT_EQ(UCS_OK, cursor.reset(limits, in.data(), 1, 1));
    EXPECT_TRUE(cursor.done());
}

TEST(Planner, RejectsBadLimitsAndSegments)
{
    Planner p;
    const std::vector<Segment> good = {segment(0, 10)};
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, p.plan({0, 4}, good.data(), 1, 1));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              p.plan({uint64_t(UINT32_MAX) + 1, 4}, good.data(), 1, 1));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, p.plan({4096, 0}, good.data(), 1, 1));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, p.plan({4096, 4}, nullptr, 1, 1));

    const PlanLimits limits = {4096, 4};
    Segment bad = segment(0, 10, 1);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, p.plan(limits, &bad, 1, 1));
    bad = segment(0, 10, 0, pxn::abi::kMaxRkeys);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, p.plan(limits, &bad, 1, 1));
    bad = {UINT64_MAX - 5, kRemote, 6, 0, 0};
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, p.plan(limits, &bad, 1, 1));
    bad = {kLocal, UINT64_MAX - 5, 6, 0, 0};
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, p.plan(limits, &bad, 1, 1));
    EXPECT_TRUE(p.pieces().empty());

    bad = {kLocal, UINT64_MAX - 5, 5, 0, 0}; /* ends at the last byte */
    EXPECT_EQ(UCS_OK, p.plan(limits, &bad, 1, 1));

    pxn::PieceCursor cursor;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, cursor.reset({0, 4}, good.data(), 1, 1));
    EXPECT_TRUE(cursor.done());
}

TEST(Planner, CursorEmitsWhatTheBatchPlannerPlans)
{
    const PlanLimits limits = {777, 5};
    std::vector<Segment> in;
    for (uint32_t i = 0; i < 40; ++i) {
        in.push_back(segment(i * 5000, (i * 397) % 2000, i % 7, i % 3));
    }
    Planner p;
    ASSERT_EQ(UCS_OK, p.plan(limits, in.data(), in.size(), 7));
    expect_tiles_input(p, in, limits);

    pxn::PieceCursor cursor;
    ASSERT_EQ(UCS_OK, cursor.reset(limits, in.data(), in.size(), 7));
    std::vector<PlannedSegment> buffer(limits.max_plan);
    for (const Planner::Piece &piece : p.pieces()) {
        uint64_t length;
        ASSERT_EQ(piece.count, cursor.next(buffer.data(), &length));
        EXPECT_EQ(piece.length, length);
        for (uint32_t i = 0; i < piece.count; ++i) {
            const PlannedSegment &a = p.segments()[piece.first + i];
            EXPECT_EQ(a.remote_addr, buffer[i].remote_addr);
            EXPECT_EQ(a.slot_offset, buffer[i].slot_offset);
            EXPECT_EQ(a.credit, buffer[i].credit);
        }
    }
    EXPECT_TRUE(cursor.done());
}

TEST(Planner, ReplanningTheSameShapeReusesItsMemory)
{
    const PlanLimits limits = {4096, 8};
    std::vector<Segment> in;
    for (uint32_t i = 0; i < 100; ++i) {
        in.push_back(segment(i * 8192, 3000, i % 4));
    }
    Planner p;
    ASSERT_EQ(UCS_OK, p.reserve(128, 256, 4));
    const PlannedSegment *segments = p.segments().data();
    const Planner::Piece *pieces   = p.pieces().data();
    const uint64_t       *credits  = p.credits().data();
    for (int round = 0; round < 3; ++round) {
        ASSERT_EQ(UCS_OK, p.plan(limits, in.data(), in.size(), 4));
        EXPECT_EQ(segments, p.segments().data());
        EXPECT_EQ(pieces, p.pieces().data());
        EXPECT_EQ(credits, p.credits().data());
        /* Reserved room is kept, not trimmed to this batch. */
        EXPECT_GE(p.segments().capacity(), 256u);
        EXPECT_GE(p.pieces().capacity(), 128u);
    }
}

} // namespace
