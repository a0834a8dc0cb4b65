/*
 * The gather kernel's per-thread work (src/uct/pxn/pxn_gather.h) run on the
 * CPU: every thread of a simulated launch in turn, over host buffers, with
 * a memory policy that checks each access. A launch is right when every
 * destination byte of every segment is written exactly once with its
 * source byte, no byte around them is touched, every vector access is
 * 16-byte aligned and every load lies in a 16-byte granule that holds a
 * byte of a segment's source (so never in another allocation).
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
    std::vector<PxnGatherSeg> segs;
    uint8_t                  *slot = nullptr;
    size_t                    slot_size = 0;
    std::vector<unsigned>     writes;       /* per slot byte */
    unsigned                  bad_loads  = 0;
    unsigned                  bad_stores = 0;
    unsigned                  unaligned  = 0;
    unsigned                  vector_stores = 0;

    /* Bytes of the source buffer that belong to a segment (1), and the
     * 16-byte granules holding any of them (1). */
    uintptr_t               src_base = 0;
    std::vector<uint8_t>    src_byte, src_granule;

    void mark_sources()
    {
        std::fill(src_byte.begin(), src_byte.end(), 0);
        std::fill(src_granule.begin(), src_granule.end(), 0);
        for (const PxnGatherSeg &s : segs) {
            for (uint64_t i = 0; i < s.length; ++i) {
                const uintptr_t at = s.src + i - src_base;
                src_byte[at]         = 1;
                src_granule[at / 16] = 1;
            }
        }
    }

    bool byte_in_source(uintptr_t at) const
    {
        return (at >= src_base) && (at - src_base < src_byte.size()) &&
               src_byte[at - src_base];
    }

    /* [at, at + 16) is one granule (at is aligned) of some segment. */
    bool granule_in_source(uintptr_t at) const
    {
        return (at >= src_base) && ((at - src_base) % 16 == 0) &&
               ((at - src_base) / 16 < src_granule.size()) &&
               src_granule[(at - src_base) / 16];
    }

    void store(uintptr_t at, size_t length)
    {
        const uintptr_t base = reinterpret_cast<uintptr_t>(slot);
        if ((at < base) || (at + length > base + slot_size)) {
            ++bad_stores;
            return;
        }
        for (size_t i = 0; i < length; ++i) {
            ++writes[at - base + i];
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
        const uintptr_t at = reinterpret_cast<uintptr_t>(p);
        g_launch->bad_loads += !g_launch->byte_in_source(at);
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

/* 16-byte aligned buffers with room for any misalignment and guards. */
class GatherTest : public ::testing::Test {
protected:
    static constexpr size_t  kGuard = 64;
    static constexpr uint8_t kFill  = 0xa5;

    void SetUp() override
    {
        g_launch = &launch_;
    }

    void TearDown() override
    {
        g_launch = nullptr;
    }

    /* A source of `size` pattern bytes and a slot of `slot_size` + guards. */
    void buffers(size_t size, size_t slot_size)
    {
        src_.assign(size + 2 * kGuard, 0);
        std::mt19937 rng(7);
        for (uint8_t &b : src_) {
            b = uint8_t(rng());
        }
        slot_.assign(slot_size + 2 * kGuard + 16, kFill);
        src_base_  = align(src_.data() + kGuard);
        slot_base_ = align(slot_.data() + kGuard);
        launch_.src_base = reinterpret_cast<uintptr_t>(align(src_.data()));
        launch_.src_byte.assign(src_.size(), 0);
        launch_.src_granule.assign(src_.size() / 16 + 1, 0);
        launch_.slot      = slot_base_;
        launch_.slot_size = slot_size;
        capacity_         = slot_size;
    }

    static uint8_t *align(uint8_t *p)
    {
        return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 15) &
                                          ~uintptr_t(15));
    }

    PxnGatherSeg seg(size_t src_offset, size_t slot_offset, size_t length) const
    {
        return {reinterpret_cast<uint64_t>(src_base_ + src_offset), slot_offset,
                length};
    }

    /* Runs every thread of `grid` over launch_.segs (as the kernel does),
     * then checks every byte of the slot and its guards. */
    void run_and_check(const Grid &grid, const std::string &what)
    {
        /* the slot checked: up to 32 bytes past the last segment (the
         * guards beyond it are checked too) */
        uint64_t end = 0;
        for (const PxnGatherSeg &s : launch_.segs) {
            end = std::max(end, s.offset + s.length);
        }
        launch_.slot_size = std::min<size_t>(end + 32, capacity_);
        std::fill(slot_.begin(), slot_.end(), kFill);
        launch_.writes.assign(launch_.slot_size, 0);
        launch_.bad_loads = launch_.bad_stores = launch_.unaligned = 0;
        launch_.vector_stores = 0;
        launch_.mark_sources();
        for (unsigned b = 0; b < grid.blocks; ++b) {
            for (unsigned t = 0; t < grid.threads; ++t) {
                const gather::Worker w = gather::gather_worker(
                        t, grid.threads, b, grid.blocks, grid.warp_per_segment);
                gather::gather_thread<CheckedMem>(launch_.segs.data(),
                                                  unsigned(launch_.segs.size()),
                                                  slot_base_, w);
            }
        }
        const std::string where = what + ", grid " + grid.name();
        ASSERT_EQ(0u, launch_.bad_loads) << where;
        ASSERT_EQ(0u, launch_.bad_stores) << where;
        ASSERT_EQ(0u, launch_.unaligned) << where;
        std::vector<int> owner(launch_.slot_size, -1);
        for (size_t i = 0; i < launch_.segs.size(); ++i) {
            const PxnGatherSeg &s = launch_.segs[i];
            for (uint64_t j = 0; j < s.length; ++j) {
                owner[s.offset + j] = int(i);
            }
        }
        for (size_t at = 0; at < launch_.slot_size; ++at) {
            if (owner[at] < 0) {
                ASSERT_EQ(0u, launch_.writes[at]) << where << ": byte " << at;
                ASSERT_EQ(kFill, slot_base_[at]) << where << ": byte " << at;
                continue;
            }
            const PxnGatherSeg &s = launch_.segs[owner[at]];
            const uint8_t want    = reinterpret_cast<const uint8_t*>(
                    s.src)[at - s.offset];
            ASSERT_EQ(1u, launch_.writes[at]) << where << ": byte " << at;
            ASSERT_EQ(want, slot_base_[at]) << where << ": byte " << at;
        }
        for (const uint8_t *p = slot_.data(); p < slot_base_; ++p) {
            ASSERT_EQ(kFill, *p) << where << ": guard before the slot";
        }
        for (const uint8_t *p = slot_base_ + launch_.slot_size;
             p < slot_.data() + slot_.size(); ++p) {
            ASSERT_EQ(kFill, *p) << where << ": guard after the slot";
        }
    }

    Launch               launch_;
    std::vector<uint8_t> src_, slot_;
    uint8_t             *src_base_  = nullptr;
    uint8_t             *slot_base_ = nullptr;
    size_t               capacity_  = 0;
};

TEST_F(GatherTest, LayoutSplitsEveryAlignmentIntoHeadAlignedBodyAndTail)
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

TEST_F(GatherTest, EveryAlignmentAndLengthUpTo300IsCopiedExactly)
{
    buffers(512, 512);
    const Grid grids[] = {{1, 64, true}, {2, 32, false}};
    for (const Grid &grid : grids) {
        for (size_t dst = 0; dst < 16; ++dst) {
            for (size_t src = 0; src < 16; ++src) {
                for (size_t length = 0; length <= 300; ++length) {
                    launch_.segs = {seg(src, dst, length)};
                    run_and_check(grid, "src +" + std::to_string(src) + ", dst +" +
                                        std::to_string(dst) + ", " +
                                        std::to_string(length) + " bytes");
                    if (HasFatalFailure()) {
                        return;
                    }
                }
            }
        }
    }
}

TEST_F(GatherTest, LargeMisalignedSegmentsAreCopiedExactlyWithTheKernelsGrid)
{
    const size_t lengths[] = {4096, 65536 + 3, 262144 - 5, (1 << 20) + 9};
    buffers((1 << 20) + 64, (1 << 20) + 64);
    const Grid grids[] = {{4, 512, true}, {32, 512, false}, {3, 512, false}};
    for (const Grid &grid : grids) {
        for (size_t length : lengths) {
            for (size_t src : {0, 1, 4, 8, 13}) {
                for (size_t dst : {0, 3, 8, 15}) {
                    launch_.segs = {seg(src, dst, length)};
                    run_and_check(grid, "src +" + std::to_string(src) + ", dst +" +
                                        std::to_string(dst) + ", " +
                                        std::to_string(length) + " bytes");
                    if (HasFatalFailure()) {
                        return;
                    }
                }
            }
        }
    }
}

TEST_F(GatherTest, OneLargeSegmentSpreadsOverEveryWorker)
{
    buffers(8 << 20, 8 << 20);
    const unsigned blocks = 32;
    launch_.segs = {seg(5, 0, 8 << 20)};
    launch_.mark_sources();
    launch_.writes.assign(launch_.slot_size, 0);
    const gather::Layout l = gather::split_segment(0, 0, 8 << 20);
    /* Every CTA gets a part of the one segment. */
    for (unsigned b = 0; b < blocks; ++b) {
        launch_.vector_stores = 0;
        const gather::Worker w = gather::gather_worker(0, 512, b, blocks, false);
        gather::gather_thread<CheckedMem>(launch_.segs.data(), 1, slot_base_, w);
        EXPECT_GT(launch_.vector_stores, 0u) << "CTA " << b;
    }
    EXPECT_EQ(32u, gather::used_parts(l.vectors, gather::gather_parts(1, blocks),
                                      512));
    run_and_check({blocks, 512, false}, "8 MiB, src +5");
}

TEST_F(GatherTest, ManyMisalignedSegmentsOfOnePieceAreCopiedExactly)
{
    constexpr size_t kSlot = 1 << 20;
    buffers(4 * kSlot, kSlot);
    std::mt19937_64 rng(15);
    const Grid grids[] = {{2, 512, true}, {1, 64, true}, {8, 128, false},
                          {32, 512, false}};
    for (unsigned round = 0; round < 24; ++round) {
        /* Segments packed one after the other in the slot, as pieces are,
         * from anywhere in the source; some empty, some large. */
        launch_.segs.clear();
        size_t offset    = rng() % 16;
        const size_t max = (round % 3 == 0) ? 300 : (round % 3 == 1) ? 5000 : 200000;
        while (launch_.segs.size() < 4096) {
            const size_t length = rng() % (max + 1);
            if (offset + length > kSlot) {
                break;
            }
            launch_.segs.push_back(seg(rng() % (3 * kSlot), offset, length));
            offset += length + ((round & 4) ? rng() % 3 : 0);
        }
        const Grid &grid = grids[round % 4];
        run_and_check(grid, "round " + std::to_string(round) + ", " +
                            std::to_string(launch_.segs.size()) + " segments");
        if (HasFatalFailure()) {
            return;
        }
    }
}

} // namespace
} // namespace pxn_test
