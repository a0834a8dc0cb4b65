/*
 * The GPU stager's per-piece choice between the copy engine and the gather
 * kernel (src/uct/pxn/pxn_copy_policy.h), and the kernel's grid. The
 * shapes are those the issue measured: random 4 KiB-1 MiB blocks (many
 * misaligned segments per piece), fixed 4 KiB, 64 KiB, 1 MiB and 8 MiB
 * operations, host sources; on the sender's own GPU and across NVLink.
 */
#include <uct/pxn/pxn_copy_policy.h>

#include <gtest/gtest.h>

#include <random>

namespace pxn_test {
namespace {

using pxn::CopyChoice;
using pxn::uct::CopyCosts;
using pxn::uct::CopyPlan;
using pxn::uct::PieceShape;
using pxn::uct::plan_copy;

constexpr uint64_t kSlot = 8ull << 20;

PieceShape device(uint32_t segs, uint64_t bytes, uint64_t shifted = 0)
{
    PieceShape s;
    s.device_segs   = segs;
    s.device_bytes  = bytes;
    s.shifted_bytes = shifted;
    return s;
}

/* A full slot of `block`-byte operations. */
PieceShape fixed(uint64_t block)
{
    return device(uint32_t(kSlot / block), kSlot);
}

bool kernel(const PieceShape &shape, const CopyCosts &costs,
            CopyChoice choice = CopyChoice::kAuto)
{
    return plan_copy(choice, shape, costs, 32, true).kernel;
}

const CopyCosts kCostSets[] = {CopyCosts::same_gpu(), CopyCosts::peer_gpu()};

TEST(CopyPolicy, OneFullSlotSegmentGoesByCopyEngine)
{
    for (const CopyCosts &c : kCostSets) {
        EXPECT_FALSE(kernel(device(1, kSlot), c));
        EXPECT_FALSE(kernel(device(1, kSlot, kSlot), c));
    }
}

TEST(CopyPolicy, OneSmallSegmentGoesByKernelOnTheSameGpuByCopyEngineToAPeer)
{
    /* a copy-engine piece completes later: on one GPU a piece of one small
     * put is quicker by kernel; to a peer GPU that was not measured */
    for (uint64_t bytes : {uint64_t(1), uint64_t(4096), uint64_t(65536),
                           uint64_t(1) << 20}) {
        EXPECT_TRUE(kernel(device(1, bytes), CopyCosts::same_gpu())) << bytes;
        EXPECT_TRUE(kernel(device(1, bytes, bytes), CopyCosts::same_gpu())) << bytes;
        EXPECT_FALSE(kernel(device(1, bytes), CopyCosts::peer_gpu())) << bytes;
        EXPECT_FALSE(kernel(device(1, bytes, bytes), CopyCosts::peer_gpu())) << bytes;
    }
}

TEST(CopyPolicy, ManySmallOrMisalignedSegmentsGoByKernel)
{
    for (const CopyCosts &c : kCostSets) {
        for (uint64_t block : {uint64_t(4096), uint64_t(65536), uint64_t(1) << 20}) {
            EXPECT_TRUE(kernel(fixed(block), c)) << block;
            /* misalignment does not turn the choice: the kernel no longer
             * copies byte by byte */
            PieceShape shifted = fixed(block);
            shifted.shifted_bytes = shifted.device_bytes;
            EXPECT_TRUE(kernel(shifted, c)) << block;
        }
    }
}

TEST(CopyPolicy, RandomBlocksOfAPieceGoByKernel)
{
    /* pieces as random 4 KiB-1 MiB operations fill them: ~16 segments of
     * one slot, most of them misaligned */
    std::mt19937_64 rng(11);
    for (const CopyCosts &c : kCostSets) {
        for (int round = 0; round < 100; ++round) {
            PieceShape s;
            while (s.device_bytes < kSlot) {
                const uint64_t len = std::min<uint64_t>(
                        4096 + rng() % ((1 << 20) - 4096), kSlot - s.device_bytes);
                ++s.device_segs;
                s.device_bytes  += len;
                s.shifted_bytes += (rng() % 16) ? len : 0;
            }
            EXPECT_TRUE(kernel(s, c)) << s.device_segs << " segments";
        }
    }
}

TEST(CopyPolicy, FewLargeSegmentsAcrossNvlinkGoByCopyEngine)
{
    /* two halves of a slot: the peer copy engine's bandwidth beats the
     * kernel's stores over NVLink, and two copies cost little to issue */
    EXPECT_FALSE(kernel(device(2, kSlot), CopyCosts::peer_gpu()));
}

TEST(CopyPolicy, CostsFollowSegmentsAndBytes)
{
    const CopyCosts c = CopyCosts::same_gpu();
    const CopyPlan grid = pxn::uct::gather_grid(8, kSlot, 32);
    EXPECT_LT(pxn::uct::ce_cost_ns(device(1, kSlot), c),
              pxn::uct::ce_cost_ns(device(8, kSlot), c));
    EXPECT_LT(pxn::uct::sm_cost_ns(device(8, kSlot), grid, c),
              pxn::uct::sm_cost_ns(device(8, kSlot, kSlot), grid, c));
    EXPECT_LT(pxn::uct::sm_cost_ns(device(8, kSlot), grid, c),
              pxn::uct::ce_cost_ns(device(8, kSlot), c));
}

TEST(CopyPolicy, ForcedChoicesAndNoKernel)
{
    const CopyCosts c = CopyCosts::same_gpu();
    EXPECT_TRUE(kernel(device(1, kSlot), c, CopyChoice::kSm));
    EXPECT_FALSE(kernel(fixed(4096), c, CopyChoice::kCe));
    EXPECT_FALSE(plan_copy(CopyChoice::kSm, fixed(4096), c, 32, false).kernel);
    EXPECT_FALSE(plan_copy(CopyChoice::kAuto, fixed(4096), c, 32, false).kernel);
}

TEST(CopyPolicy, HostSegmentsAloneNeverGoByKernel)
{
    PieceShape s;
    s.host_segs  = 2048;
    s.host_bytes = kSlot;
    for (CopyChoice choice : {CopyChoice::kAuto, CopyChoice::kSm, CopyChoice::kCe}) {
        EXPECT_FALSE(plan_copy(choice, s, CopyCosts::same_gpu(), 32, true).kernel);
    }
    /* a mixed piece: its many device segments still go by kernel */
    s.device_segs  = 1024;
    s.device_bytes = 4 << 20;
    EXPECT_TRUE(plan_copy(CopyChoice::kAuto, s, CopyCosts::same_gpu(), 32,
                          true).kernel);
}

TEST(CopyPolicy, GridSpreadsLargePiecesAndPacksSmallSegmentsIntoWarps)
{
    using pxn::uct::gather_grid;
    /* 2048 x 4 KiB: a warp per segment, 16 warps per CTA, up to the bound */
    CopyPlan p = gather_grid(2048, kSlot, 32);
    EXPECT_TRUE(p.warp_per_segment);
    EXPECT_EQ(32u, p.blocks);
    /* 8 x 1 MiB: a CTA per segment, and more CTAs for the bytes */
    p = gather_grid(8, kSlot, 32);
    EXPECT_FALSE(p.warp_per_segment);
    EXPECT_EQ(32u, p.blocks);
    /* one 8 MiB segment still uses the whole grid (the kernel cuts it) */
    EXPECT_EQ(32u, gather_grid(1, kSlot, 32).blocks);
    EXPECT_EQ(128u, gather_grid(1, kSlot, 128).blocks);
    /* small pieces take few CTAs */
    EXPECT_EQ(1u, gather_grid(2, 8192, 32).blocks);
    EXPECT_EQ(2u, gather_grid(2, 128 << 10, 32).blocks);
    EXPECT_EQ(0u, gather_grid(0, 0, 32).blocks);
    EXPECT_EQ(1u, gather_grid(3, 0, 32).blocks);
}

TEST(CopyPolicy, EveryLaunchOfAPieceIsCounted)
{
    /* a launch carries kPxnGatherMaxSegs segments: one more takes a
     * second launch, and a piece of tiny segments costs what its launches
     * cost the sender */
    const CopyCosts c   = CopyCosts::same_gpu();
    const uint32_t full = kPxnGatherMaxSegs;
    const CopyPlan grid = pxn::uct::gather_grid(full + 1, 64 * (full + 1), 32);
    EXPECT_DOUBLE_EQ(c.sm_launch_ns,
                     pxn::uct::sm_cost_ns(device(full, 64 * full), grid, c));
    EXPECT_DOUBLE_EQ(2 * c.sm_launch_ns,
                     pxn::uct::sm_cost_ns(device(full + 1, 64 * (full + 1)),
                                          grid, c));
}

} // namespace
} // namespace pxn_test
