#include <ucs/pxn/piece_builder.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace {

namespace abi = pxn::abi;
using pxn::IoSegment;
using pxn::OpCursor;
using pxn::PieceBuilder;
using pxn::Placement;
using pxn::PlanLimits;

constexpr uint64_t kRemote = 0x7f0000000000ull;
constexpr uint32_t kRkey   = 5;
constexpr uint32_t kRoute  = 3;

/* One closed piece as the caller sees it. */
struct Piece {
    uint64_t               seq;
    uint64_t               length;
    std::vector<abi::Plan> plans;
    std::vector<Placement> placements;
};

Piece snapshot(const PieceBuilder &b, std::vector<Placement> placements)
{
    Piece p;
    p.seq        = b.seq();
    p.length     = b.length();
    p.plans.assign(b.plans(), b.plans() + b.count());
    p.placements = std::move(placements);
    return p;
}

void init_builder(PieceBuilder *b, uint64_t slot_size, uint32_t max_plan)
{
    ASSERT_EQ(UCS_OK, b->init(PlanLimits{slot_size, max_plan}));
}

/* Places one whole operation into fresh pieces, one after another. */
std::vector<Piece> fill_pieces(PieceBuilder *b,
                               const std::vector<IoSegment> &segs,
                               uint64_t remote_addr)
{
    std::vector<Piece> pieces;
    OpCursor cursor;
    uint64_t seq = 1;
    while (cursor.seg < segs.size()) {
        b->open(seq++, abi::kOpPut, kRoute);
        std::vector<Placement> placements;
        const uint64_t placed = b->fill(segs.data(), uint32_t(segs.size()),
                                        remote_addr, kRkey, &cursor,
                                        [&](const Placement &p) {
                                            placements.push_back(p);
                                        });
        EXPECT_EQ(placed, b->length());
        b->close();
        pieces.push_back(snapshot(*b, std::move(placements)));
        if (pieces.size() > 1000000) {
            ADD_FAILURE() << "fill makes no progress";
            break;
        }
    }
    return pieces;
}

/* Every piece: plans tile the slot, one plan per placement with the same
 * length and slot offset, within the limits. */
void expect_piece_is_well_formed(const Piece &p, const PlanLimits &limits)
{
    EXPECT_LE(p.length, limits.slot_size);
    EXPECT_LE(p.plans.size(), limits.max_plan);
    ASSERT_EQ(p.plans.size(), p.placements.size());
    uint64_t offset = 0;
    for (size_t i = 0; i < p.plans.size(); ++i) {
        EXPECT_NE(0u, p.plans[i].length);
        EXPECT_EQ(kRkey, p.plans[i].rkey_index);
        EXPECT_EQ(offset, p.placements[i].slot_offset);
        EXPECT_EQ(uint64_t(p.plans[i].length), p.placements[i].length);
        offset += p.plans[i].length;
    }
    EXPECT_EQ(offset, p.length);
}

TEST(PieceBuilder, InitRejectsZeroSlotSize)
{
    PieceBuilder b;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, b.init(PlanLimits{0, 8}));
}

TEST(PieceBuilder, InitRejectsSlotSizeAboveUint32Max)
{
    PieceBuilder b;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              b.init(PlanLimits{uint64_t(UINT32_MAX) + 1, 8}));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, b.init(PlanLimits{8ull << 32, 8}));
    EXPECT_EQ(UCS_OK, b.init(PlanLimits{UINT32_MAX, 8}));
    EXPECT_EQ(uint64_t(UINT32_MAX), b.limits().slot_size);
}

TEST(PieceBuilder, InitRejectsZeroMaxPlan)
{
    PieceBuilder b;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, b.init(PlanLimits{4096, 0}));
    EXPECT_EQ(UCS_OK, b.init(PlanLimits{4096, 1}));
}

TEST(PieceBuilder, LimitsOfGeometryTakeSlotSizeAndMaxPlan)
{
    pxn::Geometry g;
    g.slot_size = 12345;
    g.max_plan  = 77;
    const PlanLimits limits = PlanLimits::of(g);
    EXPECT_EQ(12345u, limits.slot_size);
    EXPECT_EQ(77u, limits.max_plan);
}

TEST(PieceBuilder, InitLeavesNoPieceOpen)
{
    PieceBuilder b;
    init_builder(&b, 4096, 8);
    EXPECT_FALSE(b.is_open());
    EXPECT_FALSE(b.accepts(abi::kOpPut, kRoute, 1));
    b.open(9, abi::kOpPut, kRoute);
    EXPECT_TRUE(b.is_open());
    init_builder(&b, 4096, 8);
    EXPECT_FALSE(b.is_open());
}

TEST(PieceBuilder, AcceptsOnlyTheOpenPiecesOpAndRoute)
{
    PieceBuilder b;
    init_builder(&b, 4096, 8);
    b.open(1, abi::kOpGet, kRoute);
    EXPECT_TRUE(b.accepts(abi::kOpGet, kRoute, 100));
    EXPECT_FALSE(b.accepts(abi::kOpPut, kRoute, 100));
    EXPECT_FALSE(b.accepts(abi::kOpGet, kRoute + 1, 100));
    EXPECT_FALSE(b.accepts(abi::kOpPut, kRoute + 1, 100));
}

/* An AM piece holds the messages of one target iface (its group): one
 * that goes fails no other's. */
TEST(PieceBuilder, AcceptsOnlyTheOpenPiecesGroup)
{
    PieceBuilder b;
    init_builder(&b, 4096, 8);
    b.open(1, abi::kOpAm, kRoute, 7);
    EXPECT_TRUE(b.accepts(abi::kOpAm, kRoute, 100, 7));
    EXPECT_FALSE(b.accepts(abi::kOpAm, kRoute, 100, 8));
    EXPECT_FALSE(b.accepts(abi::kOpAm, kRoute, 100));
    b.open(2, abi::kOpPut, kRoute);
    EXPECT_TRUE(b.accepts(abi::kOpPut, kRoute, 100));
    EXPECT_FALSE(b.accepts(abi::kOpPut, kRoute, 100, 7));
}

TEST(PieceBuilder, AcceptsOnlyWhatFitsTheRoomLeft)
{
    PieceBuilder b;
    init_builder(&b, 4096, 8);
    b.open(1, abi::kOpPut, kRoute);
    EXPECT_TRUE(b.accepts(abi::kOpPut, kRoute, 4096));
    EXPECT_FALSE(b.accepts(abi::kOpPut, kRoute, 4097));
    b.add(kRemote, 1000, kRkey);
    EXPECT_TRUE(b.accepts(abi::kOpPut, kRoute, 3096));
    EXPECT_FALSE(b.accepts(abi::kOpPut, kRoute, 3097));
    /* No wrap-around for huge lengths. */
    EXPECT_FALSE(b.accepts(abi::kOpPut, kRoute, UINT64_MAX));
}

TEST(PieceBuilder, AcceptsOnlyWhileOneMorePlanFits)
{
    PieceBuilder b;
    init_builder(&b, 4096, 3);
    b.open(1, abi::kOpPut, kRoute);
    b.add(kRemote, 1, kRkey);
    b.add(kRemote + 1, 1, kRkey);
    EXPECT_TRUE(b.accepts(abi::kOpPut, kRoute, 1));
    b.add(kRemote + 2, 1, kRkey);
    EXPECT_FALSE(b.accepts(abi::kOpPut, kRoute, 1));
}

TEST(PieceBuilder, AcceptsNothingAfterClose)
{
    PieceBuilder b;
    init_builder(&b, 4096, 8);
    b.open(1, abi::kOpPut, kRoute);
    b.close();
    EXPECT_FALSE(b.is_open());
    EXPECT_FALSE(b.accepts(abi::kOpPut, kRoute, 1));
}

TEST(PieceBuilder, AddReturnsTilingSlotOffsetsAndRecordsPlans)
{
    PieceBuilder b;
    init_builder(&b, 4096, 8);
    b.open(1, abi::kOpPut, kRoute);
    EXPECT_EQ(0u, b.add(0x1000, 10, 1));
    EXPECT_EQ(10u, b.add(0x9000, 20, 2));
    EXPECT_EQ(30u, b.add(0x5000, 7, 3));
    EXPECT_EQ(37u, b.length());
    ASSERT_EQ(3u, b.count());
    const abi::Plan *plans = b.plans();
    EXPECT_EQ(0x1000u, plans[0].remote_addr);
    EXPECT_EQ(10u, plans[0].length);
    EXPECT_EQ(1u, plans[0].rkey_index);
    EXPECT_EQ(0x9000u, plans[1].remote_addr);
    EXPECT_EQ(20u, plans[1].length);
    EXPECT_EQ(2u, plans[1].rkey_index);
    EXPECT_EQ(0x5000u, plans[2].remote_addr);
    EXPECT_EQ(7u, plans[2].length);
    EXPECT_EQ(3u, plans[2].rkey_index);
}

TEST(PieceBuilder, FullWhenSlotSizeBytesArePlanned)
{
    PieceBuilder b;
    init_builder(&b, 100, 8);
    b.open(1, abi::kOpPut, kRoute);
    EXPECT_FALSE(b.full());
    b.add(kRemote, 99, kRkey);
    EXPECT_FALSE(b.full());
    b.add(kRemote + 99, 1, kRkey);
    EXPECT_TRUE(b.full());
    EXPECT_FALSE(b.accepts(abi::kOpPut, kRoute, 1));
}

TEST(PieceBuilder, FullWhenMaxPlanPlansAreAdded)
{
    PieceBuilder b;
    init_builder(&b, 4096, 2);
    b.open(1, abi::kOpPut, kRoute);
    b.add(kRemote, 1, kRkey);
    EXPECT_FALSE(b.full());
    b.add(kRemote + 1, 1, kRkey);
    EXPECT_TRUE(b.full());
    EXPECT_EQ(2u, b.length());
}

TEST(PieceBuilder, OpenStartsAnEmptyPiece)
{
    PieceBuilder b;
    init_builder(&b, 100, 2);
    b.open(1, abi::kOpPut, kRoute);
    b.add(kRemote, 60, kRkey);
    b.add(kRemote, 40, kRkey);
    ASSERT_TRUE(b.full());
    b.close();
    b.open(2, abi::kOpGet, 7);
    EXPECT_FALSE(b.full());
    EXPECT_EQ(0u, b.length());
    EXPECT_EQ(0u, b.count());
    EXPECT_EQ(2u, b.seq());
    EXPECT_EQ(abi::kOpGet, b.op());
    EXPECT_EQ(7u, b.route());
    EXPECT_EQ(0u, b.add(kRemote, 5, kRkey));
}

TEST(PieceBuilder, FieldsStayReadableAfterClose)
{
    PieceBuilder b;
    init_builder(&b, 4096, 8);
    b.open(42, abi::kOpGet, 11);
    b.add(0x1000, 100, 1);
    b.add(0x2000, 200, 2);
    b.close();
    EXPECT_FALSE(b.is_open());
    EXPECT_EQ(42u, b.seq());
    EXPECT_EQ(abi::kOpGet, b.op());
    EXPECT_EQ(11u, b.route());
    EXPECT_EQ(300u, b.length());
    ASSERT_EQ(2u, b.count());
    EXPECT_EQ(0x1000u, b.plans()[0].remote_addr);
    EXPECT_EQ(200u, b.plans()[1].length);
    EXPECT_EQ(2u, b.plans()[1].rkey_index);
}

TEST(PieceBuilder, CursorStartsUnstartedAndIsStartedOncePartlyPlaced)
{
    OpCursor cursor;
    EXPECT_FALSE(cursor.started());
    EXPECT_EQ(0u, cursor.seg);
    EXPECT_EQ(0u, cursor.seg_offset);
    EXPECT_EQ(0u, cursor.remote_offset);

    OpCursor in_segment;
    in_segment.seg_offset = 1;
    EXPECT_TRUE(in_segment.started());

    OpCursor past_segment;
    past_segment.seg = 1;
    EXPECT_TRUE(past_segment.started());

    /* Through fill(): an operation cut by the end of the slot. */
    PieceBuilder b;
    init_builder(&b, 100, 8);
    const IoSegment segs[] = {{0x1000, 150}};
    b.open(1, abi::kOpPut, kRoute);
    OpCursor op;
    b.fill(segs, 1, kRemote, kRkey, &op, [](const Placement &) {});
    EXPECT_TRUE(op.started());
    EXPECT_EQ(0u, op.seg);
    EXPECT_EQ(100u, op.seg_offset);
}

TEST(PieceBuilder, FillPlacesSegmentsInOrderWithContiguousRemoteAddresses)
{
    PieceBuilder b;
    init_builder(&b, 4096, 8);
    const IoSegment segs[] = {{0x10000, 100}, {0x30000, 50}, {0x20000, 7}};
    b.open(1, abi::kOpPut, kRoute);
    OpCursor cursor;
    std::vector<Placement> placed;
    const uint64_t n = b.fill(segs, 3, kRemote, kRkey, &cursor,
                              [&](const Placement &p) { placed.push_back(p); });
    EXPECT_EQ(157u, n);
    EXPECT_EQ(157u, b.length());
    EXPECT_FALSE(b.full());
    EXPECT_EQ(3u, cursor.seg);
    EXPECT_EQ(0u, cursor.seg_offset);
    EXPECT_EQ(157u, cursor.remote_offset);

    ASSERT_EQ(3u, placed.size());
    ASSERT_EQ(3u, b.count());
    const uint64_t offsets[] = {0, 100, 150};
    const uint64_t remote[]  = {kRemote, kRemote + 100, kRemote + 150};
    for (size_t i = 0; i < 3; ++i) {
        SCOPED_TRACE(i);
        EXPECT_EQ(segs[i].addr, placed[i].addr);
        EXPECT_EQ(segs[i].length, placed[i].length);
        EXPECT_EQ(offsets[i], placed[i].slot_offset);
        EXPECT_EQ(remote[i], b.plans()[i].remote_addr);
        EXPECT_EQ(segs[i].length, uint64_t(b.plans()[i].length));
        EXPECT_EQ(kRkey, b.plans()[i].rkey_index);
    }
}

TEST(PieceBuilder, FillAppendsAfterPlansAlreadyInThePiece)
{
    PieceBuilder b;
    init_builder(&b, 4096, 8);
    b.open(1, abi::kOpPut, kRoute);
    b.add(0x5000, 64, 1);
    const IoSegment segs[] = {{0x10000, 32}};
    OpCursor cursor;
    std::vector<Placement> placed;
    b.fill(segs, 1, kRemote, kRkey, &cursor,
           [&](const Placement &p) { placed.push_back(p); });
    ASSERT_EQ(1u, placed.size());
    EXPECT_EQ(64u, placed[0].slot_offset);
    ASSERT_EQ(2u, b.count());
    EXPECT_EQ(kRemote, b.plans()[1].remote_addr);
    EXPECT_EQ(96u, b.length());
}

TEST(PieceBuilder, FillSkipsZeroLengthSegmentsWithoutPlanningThem)
{
    PieceBuilder b;
    init_builder(&b, 4096, 8);
    const IoSegment segs[] = {{0x1000, 0}, {0x2000, 10}, {0x3000, 0},
                              {0x4000, 0}, {0x5000, 20}, {0x6000, 0}};
    b.open(1, abi::kOpPut, kRoute);
    OpCursor cursor;
    std::vector<Placement> placed;
    const uint64_t n = b.fill(segs, 6, kRemote, kRkey, &cursor,
                              [&](const Placement &p) { placed.push_back(p); });
    EXPECT_EQ(30u, n);
    EXPECT_EQ(6u, cursor.seg);
    ASSERT_EQ(2u, placed.size());
    ASSERT_EQ(2u, b.count());
    EXPECT_EQ(0x2000u, placed[0].addr);
    EXPECT_EQ(0x5000u, placed[1].addr);
    EXPECT_EQ(10u, placed[1].slot_offset);
    EXPECT_EQ(kRemote, b.plans()[0].remote_addr);
    EXPECT_EQ(kRemote + 10, b.plans()[1].remote_addr);
}

TEST(PieceBuilder, FillOfOnlyZeroLengthSegmentsPlansNothing)
{
    PieceBuilder b;
    init_builder(&b, 4096, 8);
    const IoSegment segs[] = {{0x1000, 0}, {0x2000, 0}};
    b.open(1, abi::kOpPut, kRoute);
    OpCursor cursor;
    unsigned calls = 0;
    EXPECT_EQ(0u, b.fill(segs, 2, kRemote, kRkey, &cursor,
                         [&](const Placement &) { ++calls; }));
    EXPECT_EQ(0u, calls);
    EXPECT_EQ(0u, b.count());
    EXPECT_EQ(0u, b.length());
    EXPECT_EQ(2u, cursor.seg);
}

TEST(PieceBuilder, SplitsAnOperationLargerThanTheRoomLeftAcrossPieces)
{
    PieceBuilder b;
    init_builder(&b, 100, 8);
    const IoSegment segs[] = {{0x10000, 60}, {0x20000, 70}};
    OpCursor cursor;

    b.open(1, abi::kOpPut, kRoute);
    std::vector<Placement> first;
    EXPECT_EQ(100u, b.fill(segs, 2, kRemote, kRkey, &cursor,
                           [&](const Placement &p) { first.push_back(p); }));
    EXPECT_TRUE(b.full());
    EXPECT_EQ(1u, cursor.seg);
    EXPECT_EQ(40u, cursor.seg_offset);
    EXPECT_EQ(100u, cursor.remote_offset);
    ASSERT_EQ(2u, first.size());
    EXPECT_EQ(0x20000u, first[1].addr);
    EXPECT_EQ(40u, first[1].length);
    EXPECT_EQ(60u, first[1].slot_offset);
    EXPECT_EQ(kRemote + 60, b.plans()[1].remote_addr);
    EXPECT_EQ(40u, b.plans()[1].length);
    b.close();

    b.open(2, abi::kOpPut, kRoute);
    std::vector<Placement> second;
    EXPECT_EQ(30u, b.fill(segs, 2, kRemote, kRkey, &cursor,
                          [&](const Placement &p) { second.push_back(p); }));
    EXPECT_FALSE(b.full());
    EXPECT_EQ(2u, cursor.seg);
    ASSERT_EQ(1u, second.size());
    EXPECT_EQ(0x20000u + 40, second[0].addr);
    EXPECT_EQ(30u, second[0].length);
    EXPECT_EQ(0u, second[0].slot_offset);
    ASSERT_EQ(1u, b.count());
    EXPECT_EQ(kRemote + 100, b.plans()[0].remote_addr);
    EXPECT_EQ(30u, b.plans()[0].length);
}

/* UCX_PXN_PIECE_BYTES: a piece opened smaller than the slot takes an
 * operation only up to its size; the rest goes on in the next piece. */
TEST(PieceBuilder, PieceOpenedSmallerThanTheSlotIsFullAtItsSize)
{
    PieceBuilder b;
    init_builder(&b, 1000, 8);
    const IoSegment segs[] = {{0x10000, 700}};
    OpCursor cursor;

    b.open(1, abi::kOpPut, kRoute, 0, 300);
    EXPECT_EQ(300u, b.size());
    EXPECT_EQ(300u, b.fill(segs, 1, kRemote, kRkey, &cursor, [](const Placement &) {}));
    EXPECT_TRUE(b.full());
    EXPECT_FALSE(b.accepts(abi::kOpPut, kRoute, 1));
    EXPECT_EQ(300u, cursor.seg_offset);
    b.close();

    b.open(2, abi::kOpPut, kRoute); /* the whole slot */
    EXPECT_EQ(1000u, b.size());
    EXPECT_EQ(400u, b.fill(segs, 1, kRemote, kRkey, &cursor, [](const Placement &) {}));
    EXPECT_FALSE(b.full());
    EXPECT_EQ(kRemote + 300, b.plans()[0].remote_addr);
}

/* A plan placed whole (short and bcopy packing) still goes into a smaller
 * piece that has room in its slot; the piece is full after it. */
TEST(PieceBuilder, WholePlanMayTakeASmallerPiecePastItsSizeUpToTheSlot)
{
    PieceBuilder b;
    init_builder(&b, 1000, 8);
    b.open(1, abi::kOpPut, kRoute, 0, 300);
    ASSERT_TRUE(b.accepts(abi::kOpPut, kRoute, 200));
    b.add(kRemote, 200, kRkey);
    ASSERT_TRUE(b.accepts(abi::kOpPut, kRoute, 800));
    EXPECT_FALSE(b.accepts(abi::kOpPut, kRoute, 801));
    b.add(kRemote + 200, 500, kRkey);
    EXPECT_TRUE(b.full());
    EXPECT_FALSE(b.accepts(abi::kOpPut, kRoute, 1));
}

TEST(PieceBuilder, SizeZeroOrAboveTheSlotIsTheSlot)
{
    PieceBuilder b;
    init_builder(&b, 1000, 8);
    b.open(1, abi::kOpPut, kRoute, 0, 0);
    EXPECT_EQ(1000u, b.size());
    b.open(2, abi::kOpPut, kRoute, 0, 5000);
    EXPECT_EQ(1000u, b.size());
}

TEST(PieceBuilder, FillOfAFullPiecePlacesNothingAndKeepsTheCursor)
{
    PieceBuilder b;
    init_builder(&b, 100, 8);
    b.open(1, abi::kOpPut, kRoute);
    b.add(kRemote, 100, kRkey);
    ASSERT_TRUE(b.full());
    const IoSegment segs[] = {{0x1000, 10}};
    OpCursor cursor;
    unsigned calls = 0;
    EXPECT_EQ(0u, b.fill(segs, 1, kRemote, kRkey, &cursor,
                         [&](const Placement &) { ++calls; }));
    EXPECT_EQ(0u, calls);
    EXPECT_FALSE(cursor.started());
    EXPECT_EQ(1u, b.count());
}

TEST(PieceBuilder, OperationEndingInEmptySegmentsIsDoneWhenItsBytesFillThePiece)
{
    PieceBuilder b;
    init_builder(&b, 100, 8);
    b.open(1, abi::kOpPut, kRoute);
    const IoSegment segs[] = {{0x1000, 100}, {0x2000, 0}, {0x3000, 0}};
    OpCursor cursor;
    EXPECT_EQ(100u, b.fill(segs, 3, kRemote, kRkey, &cursor,
                           [](const Placement &) {}));
    EXPECT_TRUE(b.full());
    EXPECT_EQ(3u, cursor.seg); /* nothing left for another piece */
    EXPECT_EQ(1u, b.count());
}

TEST(PieceBuilder, FillStopsWhenMaxPlanIsReached)
{
    PieceBuilder b;
    init_builder(&b, 4096, 2);
    const IoSegment segs[] = {{0x1000, 10}, {0x2000, 10}, {0x3000, 10}};
    b.open(1, abi::kOpPut, kRoute);
    OpCursor cursor;
    unsigned calls = 0;
    EXPECT_EQ(20u, b.fill(segs, 3, kRemote, kRkey, &cursor,
                          [&](const Placement &) { ++calls; }));
    EXPECT_EQ(2u, calls);
    EXPECT_TRUE(b.full());
    EXPECT_EQ(2u, cursor.seg);
    EXPECT_EQ(0u, cursor.seg_offset);
    EXPECT_EQ(20u, cursor.remote_offset);
    b.close();

    b.open(2, abi::kOpPut, kRoute);
    std::vector<Placement> placed;
    EXPECT_EQ(10u, b.fill(segs, 3, kRemote, kRkey, &cursor,
                          [&](const Placement &p) { placed.push_back(p); }));
    ASSERT_EQ(1u, placed.size());
    EXPECT_EQ(0x3000u, placed[0].addr);
    EXPECT_EQ(kRemote + 20, b.plans()[0].remote_addr);
}

TEST(PieceBuilder, PlacesEveryByteOfALargeOperationExactlyOnce)
{
    PieceBuilder b;
    const PlanLimits limits{64, 3};
    init_builder(&b, limits.slot_size, limits.max_plan);
    /* Segments in a model address space of 4096 bytes, out of order, with
     * zero-length ones in between. */
    const std::vector<IoSegment> segs = {
            {1000, 100}, {0, 3}, {2000, 0}, {3000, 250}, {10, 1},
            {500, 77},   {20, 0}, {600, 64}, {700, 65}, {4000, 63}};
    uint64_t total = 0;
    for (const IoSegment &s : segs) {
        total += s.length;
    }

    const std::vector<Piece> pieces = fill_pieces(&b, segs, kRemote);
    EXPECT_GE(pieces.size(), (total + limits.slot_size - 1) / limits.slot_size);

    std::vector<int> local(4096, 0);  /* times each local byte was placed */
    std::vector<int> remote(total, 0); /* times each remote byte was planned */
    for (const Piece &p : pieces) {
        expect_piece_is_well_formed(p, limits);
        EXPECT_NE(0u, p.plans.size());
        for (size_t i = 0; i < p.plans.size(); ++i) {
            for (uint64_t k = 0; k < p.placements[i].length; ++k) {
                ++local.at(p.placements[i].addr + k);
                ++remote.at(p.plans[i].remote_addr - kRemote + k);
            }
        }
    }
    for (const IoSegment &s : segs) {
        for (uint64_t k = 0; k < s.length; ++k) {
            EXPECT_EQ(1, local[s.addr + k]) << "byte " << s.addr + k;
            local[s.addr + k] = 0;
        }
    }
    for (size_t i = 0; i < local.size(); ++i) {
        EXPECT_EQ(0, local[i]) << "byte outside the operation " << i;
    }
    for (size_t i = 0; i < remote.size(); ++i) {
        EXPECT_EQ(1, remote[i]) << "remote byte " << i;
    }

    /* Remote order follows local order: placements concatenated give the
     * segments, and plans' remote addresses advance contiguously. */
    uint64_t expected_remote = kRemote;
    size_t seg               = 0;
    uint64_t seg_offset      = 0;
    for (const Piece &p : pieces) {
        for (size_t i = 0; i < p.plans.size(); ++i) {
            while (segs[seg].length == seg_offset) {
                ++seg;
                seg_offset = 0;
            }
            EXPECT_EQ(segs[seg].addr + seg_offset, p.placements[i].addr);
            EXPECT_EQ(expected_remote, p.plans[i].remote_addr);
            seg_offset      += p.placements[i].length;
            expected_remote += p.plans[i].length;
        }
    }
    EXPECT_EQ(kRemote + total, expected_remote);
}

/* Random operations staged one after another the way the sender does:
 * pieces are shared by consecutive operations of one op and route, a new
 * piece opens when the open one is full or of another kind. */
TEST(PieceBuilder, RandomOperationsReproduceTheirBytesAcrossPieces)
{
    std::mt19937_64 rng(0x5eed2024);
    for (int round = 0; round < 200; ++round) {
        SCOPED_TRACE(round);
        const PlanLimits limits{1 + rng() % 512, uint32_t(1 + rng() % 9)};
        PieceBuilder b;
        init_builder(&b, limits.slot_size, limits.max_plan);

        struct Op {
            abi::Op                op;
            uint32_t               route;
            uint64_t               remote;
            std::vector<IoSegment> segs;
            std::vector<Placement> placed;
            std::vector<abi::Plan> plans;
        };
        std::vector<Op> ops(1 + rng() % 12);
        uint64_t local_base = 0x100000;
        for (Op &op : ops) {
            op.op     = (rng() % 4 == 0) ? abi::kOpGet : abi::kOpPut;
            op.route  = uint32_t(rng() % 2);
            op.remote = (rng() % 1000) << 20;
            op.segs.resize(rng() % 9);
            for (IoSegment &s : op.segs) {
                const unsigned shape = rng() % 8;
                s.length = (shape == 0) ? 0 :
                           (shape == 1) ? limits.slot_size :
                           (shape == 2) ? 1 + rng() % (4 * limits.slot_size) :
                                          1 + rng() % 64;
                s.addr      = local_base;
                local_base += s.length + 1 + rng() % 16;
            }
        }

        std::vector<Piece> pieces;
        std::vector<Placement> open_placed;
        uint64_t seq = 1;
        auto close_piece = [&]() {
            b.close();
            if (b.count() != 0) {
                pieces.push_back(snapshot(b, std::move(open_placed)));
            }
            open_placed.clear();
        };
        for (Op &op : ops) {
            OpCursor cursor;
            unsigned steps = 0;
            while (cursor.seg < op.segs.size()) {
                ASSERT_LT(++steps, 100000u) << "no progress";
                if (!b.accepts(op.op, op.route, 1)) {
                    if (b.is_open()) {
                        close_piece();
                    }
                    b.open(seq++, op.op, op.route);
                }
                const uint32_t first_plan = b.count();
                const uint64_t length     = b.length();
                const uint64_t placed     = b.fill(
                        op.segs.data(), uint32_t(op.segs.size()), op.remote,
                        kRkey, &cursor, [&](const Placement &p) {
                            op.placed.push_back(p);
                            open_placed.push_back(p);
                        });
                EXPECT_EQ(length + placed, b.length());
                op.plans.insert(op.plans.end(), b.plans() + first_plan,
                                b.plans() + b.count());
                if (b.full()) {
                    close_piece();
                }
            }
        }
        if (b.is_open()) {
            close_piece();
        }

        for (const Piece &p : pieces) {
            expect_piece_is_well_formed(p, limits);
        }
        /* Each op: its placements concatenated are its non-empty segments,
         * its plans' remote ranges concatenated are [remote, remote+total). */
        for (const Op &op : ops) {
            ASSERT_EQ(op.placed.size(), op.plans.size());
            std::vector<IoSegment> joined;
            for (const Placement &p : op.placed) {
                EXPECT_NE(0u, p.length);
                if (!joined.empty() &&
                    (joined.back().addr + joined.back().length == p.addr)) {
                    joined.back().length += p.length;
                } else {
                    joined.push_back({p.addr, p.length});
                }
            }
            std::vector<IoSegment> expected;
            for (const IoSegment &s : op.segs) {
                if (s.length != 0) {
                    expected.push_back(s);
                }
            }
            ASSERT_EQ(expected.size(), joined.size());
            for (size_t i = 0; i < expected.size(); ++i) {
                EXPECT_EQ(expected[i].addr, joined[i].addr);
                EXPECT_EQ(expected[i].length, joined[i].length);
            }
            uint64_t remote = op.remote;
            for (size_t i = 0; i < op.plans.size(); ++i) {
                EXPECT_EQ(remote, op.plans[i].remote_addr);
                EXPECT_EQ(op.placed[i].length, uint64_t(op.plans[i].length));
                remote += op.plans[i].length;
            }
            uint64_t total = 0;
            for (const IoSegment &s : op.segs) {
                total += s.length;
            }
            EXPECT_EQ(op.remote + total, remote);
        }
    }
}

} // namespace
