#include <ucs/pxn/slicer.h>

#include <gtest/gtest.h>

#include <vector>

namespace {

namespace abi = pxn::abi;
using pxn::InnerOp;
using pxn::SlicePolicy;

constexpr uint64_t kKiB = 1024;

SlicePolicy policy(uint64_t relay_slice, uint64_t merge,
                   uint64_t max_zcopy = 1ull << 30, uint64_t align = 0)
{
    SlicePolicy p;
    EXPECT_EQ(UCS_OK, pxn::make_slice_policy(relay_slice, merge,
                                             {max_zcopy, 16, align}, &p));
    return p;
}

std::vector<InnerOp> slice(const SlicePolicy &p,
                           const std::vector<abi::Plan> &plans)
{
    pxn::Slicer slicer;
    slicer.reset(p, plans.data(), uint32_t(plans.size()));
    std::vector<InnerOp> ops;
    InnerOp op;
    while (slicer.next(&op)) {
        ops.push_back(op);
    }
    EXPECT_TRUE(slicer.done());
    EXPECT_FALSE(slicer.next(&op));
    EXPECT_EQ(ops.size(),
              pxn::Slicer::count_ops(p, plans.data(), uint32_t(plans.size())));
    return ops;
}

std::vector<uint64_t> lengths(const std::vector<InnerOp> &ops)
{
    std::vector<uint64_t> out;
    for (const InnerOp &op : ops) {
        out.push_back(op.length);
    }
    return out;
}

/* Ops cover every plan exactly once, in order, with matching addresses. */
void expect_covers(const std::vector<InnerOp> &ops,
                   const std::vector<abi::Plan> &plans, uint64_t max_zcopy)
{
    size_t   k           = 0;
    uint64_t slot_offset = 0;
    for (uint32_t i = 0; i < plans.size(); ++i) {
        uint64_t done = 0;
        while (done < plans[i].length) {
            ASSERT_LT(k, ops.size());
            const InnerOp &op = ops[k++];
            EXPECT_EQ(i, op.plan);
            EXPECT_EQ(slot_offset + done, op.slot_offset);
            EXPECT_EQ(plans[i].remote_addr + done, op.remote_addr);
            EXPECT_EQ(plans[i].rkey_index, op.rkey_index);
            ASSERT_GT(op.length, 0u);
            EXPECT_LE(op.length, max_zcopy);
            done += op.length;
        }
        EXPECT_EQ(uint64_t(plans[i].length), done);
        slot_offset += plans[i].length;
    }
    EXPECT_EQ(ops.size(), k);
}

TEST(Slicer, CutsIntoFixedSlices)
{
    const SlicePolicy p = policy(64 * kKiB, 4 * kKiB);
    const std::vector<abi::Plan> plans = {{0x100000, uint32_t(256 * kKiB), 3}};
    const auto ops = slice(p, plans);
    EXPECT_EQ(std::vector<uint64_t>(4, 64 * kKiB), lengths(ops));
    expect_covers(ops, plans, 1ull << 30);
}

TEST(Slicer, MergesShortTailIntoPreviousSlice)
{
    const SlicePolicy p = policy(64 * kKiB, 4 * kKiB);
    /* 128K + 4K: the 4K tail rides with the last slice. */
    std::vector<abi::Plan> plans = {{0x100000, uint32_t(132 * kKiB), 0}};
    EXPECT_EQ(std::vector<uint64_t>({64 * kKiB, 68 * kKiB}),
              lengths(slice(p, plans)));
    /* 128K + 4K + 1: the tail is long enough to go alone. */
    plans[0].length = uint32_t(132 * kKiB + 1);
    EXPECT_EQ(std::vector<uint64_t>({64 * kKiB, 64 * kKiB, 4 * kKiB + 1}),
              lengths(slice(p, plans)));
    /* A plan of up to slice + merge is one op. */
    plans[0].length = uint32_t(68 * kKiB);
    EXPECT_EQ(std::vector<uint64_t>({68 * kKiB}), lengths(slice(p, plans)));
    plans[0].length = 100;
    EXPECT_EQ(std::vector<uint64_t>({100}), lengths(slice(p, plans)));
}

TEST(Slicer, NoSlicingBeyondMaxZcopyWhenRelaySliceIsZero)
{
    const SlicePolicy p = policy(0, 4 * kKiB, 1 * kKiB * kKiB);
    EXPECT_EQ(1 * kKiB * kKiB, p.slice);
    EXPECT_EQ(0u, p.merge);
    const std::vector<abi::Plan> plans = {{0x100000, uint32_t(8 * kKiB * kKiB), 1},
                                          {0x900000, 100, 2}};
    const auto ops = slice(p, plans);
    EXPECT_EQ(9u, ops.size());
    expect_covers(ops, plans, 1 * kKiB * kKiB);

    /* 1 MiB + 1 byte: the tail goes alone, max_zcopy is a hard limit. */
    const std::vector<abi::Plan> odd = {{0, uint32_t(kKiB * kKiB + 1), 0}};
    EXPECT_EQ(std::vector<uint64_t>({kKiB * kKiB, 1}), lengths(slice(p, odd)));
}

TEST(Slicer, ClampsSliceAndMergeToMaxZcopy)
{
    /* relay_slice above max_zcopy: slice = max_zcopy, no room to merge. */
    SlicePolicy p = policy(64 * kKiB, 4 * kKiB, 16 * kKiB);
    EXPECT_EQ(16 * kKiB, p.slice);
    EXPECT_EQ(0u, p.merge);
    std::vector<abi::Plan> plans = {{0, uint32_t(33 * kKiB), 0}};
    auto ops = slice(p, plans);
    EXPECT_EQ(std::vector<uint64_t>({16 * kKiB, 16 * kKiB, kKiB}), lengths(ops));
    expect_covers(ops, plans, 16 * kKiB);

    /* Merge reduced so that slice + merge <= max_zcopy. */
    p = policy(64 * kKiB, 4 * kKiB, 66 * kKiB);
    EXPECT_EQ(2 * kKiB, p.merge);
    plans[0].length = uint32_t(131 * kKiB);
    ops = slice(p, plans);
    EXPECT_EQ(std::vector<uint64_t>({64 * kKiB, 64 * kKiB, 3 * kKiB}), lengths(ops));
    expect_covers(ops, plans, 66 * kKiB);
}

TEST(Slicer, RoundsSliceDownToInnerAlignment)
{
    const SlicePolicy p = policy(0, 0, 1000, 64);
    EXPECT_EQ(960u, p.slice);
    const std::vector<abi::Plan> plans = {{0x1000, 2000, 0}};
    const auto ops = slice(p, plans);
    EXPECT_EQ(std::vector<uint64_t>({960, 960, 80}), lengths(ops));
    EXPECT_EQ(0x1000u + 960, ops[1].remote_addr);

    /* Rounding leaves room below max_zcopy, but relay_slice 0 never merges. */
    EXPECT_EQ(0u, policy(0, 4 * kKiB, 1000, 64).merge);
    /* max_zcopy below the alignment: nothing to round to. */
    EXPECT_EQ(32u, policy(0, 0, 32, 64).slice);
    EXPECT_EQ(1000u, policy(0, 0, 1000, 1).slice);
}

TEST(Slicer, NeverMergesPlansOfDifferentRemoteRanges)
{
    /* Two adjacent tiny plans: two ops, even though both fit one slice. */
    const SlicePolicy p = policy(64 * kKiB, 4 * kKiB);
    const std::vector<abi::Plan> plans = {{0x1000, 10, 0}, {0x100a, 20, 0},
                                          {0x9000, 30, 1}};
    const auto ops = slice(p, plans);
    ASSERT_EQ(3u, ops.size());
    EXPECT_EQ(10u, ops[1].slot_offset);
    EXPECT_EQ(30u, ops[2].slot_offset);
    EXPECT_EQ(1u, ops[2].rkey_index);
    expect_covers(ops, plans, 1ull << 30);
}

TEST(Slicer, ResumesWhereItStopped)
{
    const SlicePolicy p = policy(64, 0);
    const std::vector<abi::Plan> plans = {{0, 200, 0}, {1000, 64, 1}};
    pxn::Slicer slicer;
    slicer.reset(p, plans.data(), 2);
    InnerOp op;
    ASSERT_TRUE(slicer.next(&op));
    ASSERT_TRUE(slicer.next(&op));
    EXPECT_EQ(64u, op.slot_offset);
    /* The relay hit its in-flight cap here and comes back later. */
    std::vector<InnerOp> rest;
    while (slicer.next(&op)) {
        rest.push_back(op);
    }
    ASSERT_EQ(3u, rest.size());
    EXPECT_EQ(128u, rest[0].slot_offset);
    EXPECT_EQ(64u, rest[0].length);
    EXPECT_EQ(8u, rest[1].length);
    EXPECT_EQ(200u, rest[2].slot_offset);
    EXPECT_EQ(1000u, rest[2].remote_addr);
}

TEST(Slicer, RefusesInnerTransportWithoutZcopy)
{
    SlicePolicy p;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::make_slice_policy(0, 0, {0, 16, 0}, &p));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::make_slice_policy(0, 0, {4096, 0, 0}, &p));
}

TEST(Slicer, EmptyPieceGivesNoOps)
{
    pxn::Slicer slicer;
    slicer.reset(policy(64, 0), nullptr, 5);
    InnerOp op;
    EXPECT_TRUE(slicer.done());
    EXPECT_FALSE(slicer.next(&op));
}

} // namespace
