/*
 * The gather and scatter kernels' per-thread work (src/uct/pxn/pxn_gather.h)
 * run on the CPU: every thread of a simulated launch in turn, over host
 * buffers, with a memory policy that checks each access. A launch is right
 * when every destination byte of every segment is written exactly once
 * with its source byte, no byte around them is touched, every vector access
 * is 16-byte aligned and every load lies in a 16-byte granule that holds a
 * byte of a segment's source (so never in another allocation).
 *
 * Gather copies segments from "outside" buffers into the slot (a put's
 * sources into its slot), scatter from the slot to outside buffers (a GET
 * reply to its destinations): the same code with source and destination
 * swapped.
 */
#include <uct/pxn/pxn_gather.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace pxn_test {
namespace {

namespace gather = pxn::gather;

/* What the checking memory policy knows about the launch under test. */
struct Launch {
    /* Destination buffer: stores are counted per byte; one outside it is
     * bad. */
    uintptr_t             dst_base = 0;
    std::vector<unsigned> writes;
    /* Source buffer (16-byte aligned base): bytes of some segment's source
     * (1) and the granules that hold any of them (1). */
    uintptr_t             src_base = 0;
    std::vector<uint8_t>  src_byte, src_granule;
    unsigned              bad_loads = 0, bad_stores = 0, unaligned = 0;
    unsigned              vector_stores = 0;

    void mark_source(uintptr_t at, uint64_t length)
    {
        for (uint64_t i = 0; i < length; ++i) {
            src_byte[at + i - src_base]                = 1;
            src_granule[(at + i - src_base) / 16]      = 1;
        }
    }

    bool byte_in_source(uintptr_t at) const
    {
        return (at >= src_base) && (at - src_base < src_byte.size()) &&
               src_byte[at - src_base];
    }

    bool granule_in_source(uintptr_t at) const
    {
        return (at >= src_base) && ((at - src_base) % 16 == 0) &&
               ((at - src_base) / 16 < src_granule.size()) &&
               src_granule[(at - src_base) / 16];
    }

    void store(uintptr_t at, size_t length)
    {
        if ((at < dst_base) || (at + length > dst_base + writes.size())) {
            ++bad_stores;
            return;
        }
        for (size_t i = 0; i < length; ++i) {
            ++writes[at - dst_base + i];
        }
    }
};

Launch *g_launch = nullptr;

struct CheckedMem {
    static PxnVec16 load(const PxnVec16 *p)
    {
        const uintptr_t at = reinterpret_cast<uintptr_t>(p);
        g_launch->unaligned += (at & 15) != 0;
        if (!g_launch->granule_in_source(at)) {
            ++g_launch->bad_loads;
            return PxnVec16{0, 0, 0, 0};
        }
        return *p;
    }
    static void store(PxnVec16 *p, const PxnVec16 &v)
    {
        const uintptr_t at = reinterpret_cast<uintptr_t>(p);
        g_launch->unaligned += (at & 15) != 0;
        ++g_launch->vector_stores;
        g_launch->store(at, 16);
        *p = v;
    }
    static uint8_t load_byte(const uint8_t *p)
    {
        g_launch->bad_loads += !g_launch->byte_in_source(reinterpret_cast<uintptr_t>(p));
        return *p;
    }
    static void store_byte(uint8_t *p, uint8_t v)
    {
        g_launch->store(reinterpret_cast<uintptr_t>(p), 1);
        *p = v;
    }
};

struct Grid {
    unsigned blocks, threads;
    bool     warp_per_segment;

    std::string name() const
    {
        return std::to_string(blocks) + "x" + std::to_string(threads) +
               (warp_per_segment ? " warps" : " CTAs");
    }
};

/* 16-byte aligned buffers with guards: the slot and the "outside" memory
 * (sources of a gather, destinations of a scatter). */
class GatherTest : public ::testing::TestWithParam<bool> {
protected:
    static constexpr size_t  kGuard = 64;
    static constexpr uint8_t kFill  = 0xa5;

    bool scatter() const { return GetParam(); }

    void SetUp() override { g_launch = &launch_; }
    void TearDown() override { g_launch = nullptr; }

    void buffers(size_t outside, size_t slot)
    {
        outside_.assign(outside + 2 * kGuard + 16, 0);
        slot_.assign(slot + 2 * kGuard + 16, 0);
        outside_base_ = align(outside_.data() + kGuard);
        slot_base_    = align(slot_.data() + kGuard);
        filled_       = false;
    }

    static uint8_t *align(uint8_t *p)
    {
        return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 15) &
                                          ~uintptr_t(15));
    }

    /* `length` bytes between `outside` bytes into the outside buffer and
     * `slot` bytes into the slot. */
    PxnGatherSeg seg(size_t outside, size_t slot, size_t length) const
    {
        return {reinterpret_cast<uint64_t>(outside_base_ + outside),
                uint32_t(slot), uint32_t(length)};
    }

    /* A segment copied from `src` bytes into its source buffer to `dst`
     * bytes into its destination buffer, in the direction under test. */
    PxnGatherSeg copy(size_t src, size_t dst, size_t length) const
    {
        return scatter() ? seg(dst, src, length) : seg(src, dst, length);
    }

    std::vector<uint8_t> &src_buffer() { return scatter() ? slot_ : outside_; }
    std::vector<uint8_t> &dst_buffer() { return scatter() ? outside_ : slot_; }

    /* One segment of `length` bytes from source offset `src` to `dst`. */
    void copy_one(const Grid &grid, size_t src, size_t dst, size_t length)
    {
        segs_ = {copy(src, dst, length)};
        run_and_check(grid, "src +" + std::to_string(src) + ", dst +" +
                            std::to_string(dst) + ", " + std::to_string(length) +
                            " bytes");
    }

    /* Runs every thread of `grid` over segs_ (as the kernel does), then
     * checks every byte of the destination buffer, guards included. */
    void run_and_check(const Grid &grid, const std::string &what)
    {
        std::vector<uint8_t> &src = src_buffer(), &dst = dst_buffer();
        if (!filled_) { /* the source is never written: once per buffer */
            std::mt19937 rng(7);
            for (uint8_t &b : src) {
                b = uint8_t(rng());
            }
            filled_ = true;
        }
        std::fill(dst.begin(), dst.end(), kFill);
        std::vector<uint8_t> expected = dst;
        launch_.dst_base = reinterpret_cast<uintptr_t>(dst.data());
        launch_.writes.assign(dst.size(), 0);
        launch_.src_base = reinterpret_cast<uintptr_t>(align(src.data())) - 16;
        launch_.src_byte.assign(src.size() + 32, 0);
        launch_.src_granule.assign(src.size() / 16 + 3, 0);
        launch_.bad_loads = launch_.bad_stores = launch_.unaligned = 0;
        launch_.vector_stores = 0;
        std::vector<unsigned> owners(dst.size(), 0);
        for (const PxnGatherSeg &s : segs_) {
            const uint8_t *from = scatter() ? slot_base_ + s.offset :
                                  reinterpret_cast<const uint8_t*>(s.addr);
            uint8_t *to         = scatter() ? reinterpret_cast<uint8_t*>(s.addr) :
                                  slot_base_ + s.offset;
            const size_t at     = to - dst.data();
            memcpy(expected.data() + at, from, s.length);
            for (uint64_t j = 0; j < s.length; ++j) {
                ++owners[at + j];
            }
            launch_.mark_source(reinterpret_cast<uintptr_t>(from), s.length);
        }
        for (unsigned b = 0; b < grid.blocks; ++b) {
            for (unsigned t = 0; t < grid.threads; ++t) {
                const gather::Worker w = gather::gather_worker(
                        t, grid.threads, b, grid.blocks, grid.warp_per_segment);
                if (scatter()) {
                    gather::gather_thread<true, CheckedMem>(
                            segs_.data(), unsigned(segs_.size()), slot_base_, w);
                } else {
                    gather::gather_thread<false, CheckedMem>(
                            segs_.data(), unsigned(segs_.size()), slot_base_, w);
                }
            }
        }
        const std::string where = std::string(scatter() ? "scatter" : "gather") +
                                  ", " + what + ", grid " + grid.name();
        ASSERT_EQ(0u, launch_.bad_loads) << where;
        ASSERT_EQ(0u, launch_.bad_stores) << where;
        ASSERT_EQ(0u, launch_.unaligned) << where;
        for (size_t at = 0; at < dst.size(); ++at) {
            ASSERT_EQ(std::min(owners[at], 1u), launch_.writes[at])
                    << where << ": byte " << at << " of the destination buffer";
        }
        ASSERT_TRUE(expected == dst) << where;
    }

    Launch                    launch_;
    std::vector<PxnGatherSeg> segs_;
    std::vector<uint8_t>      outside_, slot_;
    uint8_t                  *outside_base_ = nullptr;
    uint8_t                  *slot_base_    = nullptr;
    bool                      filled_       = false;
};

TEST(GatherLayout, SplitsEveryAlignmentIntoHeadAlignedBodyAndTail)
{
    for (uint64_t dst = 0; dst < 16; ++dst) {
        for (uint64_t src = 0; src < 16; ++src) {
            for (uint64_t length = 0; length <= 300; ++length) {
                const gather::Layout l = gather::split_segment(src, dst, length);
                ASSERT_EQ(length, l.head + 16 * l.vectors + l.tail);
                ASSERT_LT(l.head, 16u);
                ASSERT_LT(l.tail, 16u);
                if (l.vectors > 0) {
                    ASSERT_EQ(0u, (dst + l.head) % 16);
                }
                if (length >= 15) {
                    ASSERT_EQ((16 - dst % 16) % 16, l.head);
                }
                ASSERT_EQ((src + l.head) % 16, l.shift);
            }
        }
    }
}

TEST_P(GatherTest, EveryAlignmentAndLengthUpTo300IsCopiedExactly)
{
    buffers(512, 512);
    const Grid grids[] = {{1, 64, true}, {2, 32, false}};
    for (const Grid &grid : grids) {
        for (size_t dst = 0; dst < 16; ++dst) {
            for (size_t src = 0; src < 16; ++src) {
                for (size_t length = 0; length <= 300; ++length) {
                    copy_one(grid, src, dst, length);
                    if (HasFatalFailure()) {
                        return;
                    }
                }
            }
        }
    }
}

TEST_P(GatherTest, LargeMisalignedSegmentsAreCopiedExactlyWithTheKernelsGrid)
{
    const size_t lengths[] = {4096, 65536 + 3, (1 << 20) + 9};
    buffers((1 << 20) + 64, (1 << 20) + 64);
    const Grid grids[] = {{4, 512, true}, {32, 512, false}, {3, 512, false}};
    for (const Grid &grid : grids) {
        for (size_t length : lengths) {
            for (size_t src : {0, 1, 13}) {
                for (size_t dst : {0, 3}) {
                    copy_one(grid, src, dst, length);
                    if (HasFatalFailure()) {
                        return;
                    }
                }
            }
        }
    }
}

TEST_P(GatherTest, OneLargeSegmentSpreadsOverEveryWorker)
{
    buffers(8 << 20, 8 << 20);
    const unsigned blocks = 32;
    segs_ = {copy(5, 0, 8 << 20)};
    run_and_check({blocks, 512, false}, "8 MiB, src +5");
    /* Each CTA alone: every one copies a part of the one segment. */
    for (unsigned b = 0; b < blocks; ++b) {
        launch_.vector_stores = 0;
        const gather::Worker w = gather::gather_worker(0, 512, b, blocks, false);
        if (scatter()) {
            gather::gather_thread<true, CheckedMem>(segs_.data(), 1, slot_base_, w);
        } else {
            gather::gather_thread<false, CheckedMem>(segs_.data(), 1, slot_base_, w);
        }
        EXPECT_GT(launch_.vector_stores, 0u) << "CTA " << b;
    }
}

TEST_P(GatherTest, ManyMisalignedSegmentsOfOnePieceAreCopiedExactly)
{
    constexpr size_t kSlot = 1 << 20;
    buffers(4 * kSlot, kSlot);
    std::mt19937_64 rng(15);
    const Grid grids[] = {{2, 512, true}, {1, 64, true}, {8, 128, false},
                          {32, 512, false}};
    for (unsigned round = 0; round < 24; ++round) {
        /* Segments packed one after the other in the slot (as pieces are),
         * each to or from anywhere outside it (gather: sources may overlap;
         * scatter: destinations one after the other with gaps); some
         * empty, some large. */
        segs_.clear();
        size_t offset    = rng() % 16;
        size_t outside   = rng() % 16;
        const size_t max = (round % 3 == 0) ? 300 : (round % 3 == 1) ? 5000 : 200000;
        while (segs_.size() < 4096) {
            const size_t length = rng() % (max + 1);
            if ((offset + length > kSlot) || (outside + length > 4 * kSlot)) {
                break;
            }
            if (scatter()) {
                segs_.push_back(seg(outside, offset, length));
                outside += length + rng() % 40;
            } else {
                segs_.push_back(seg(rng() % (3 * kSlot), offset, length));
            }
            offset += length + ((round & 4) ? rng() % 3 : 0);
        }
        const Grid &grid = grids[round % 4];
        run_and_check(grid, "round " + std::to_string(round) + ", " +
                            std::to_string(segs_.size()) + " segments");
        if (HasFatalFailure()) {
            return;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Direction, GatherTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool> &info) {
                             return info.param ? "Scatter" : "Gather";
                         });

} // namespace
} // namespace pxn_test
