/*
 * The soak's pass planner (test/apps/soak_plan.h): every pass covers every
 * byte of its buffer, stays inside it, and keeps each command within the
 * transport's limits and kMaxChunks operations.
 */
#include <apps/soak_plan.h>

#include <gtest/gtest.h>

#include <map>
#include <random>

using pxn_tools::ByteCoverage;
using pxn_tools::SoakCaps;
using pxn_tools::SoakOp;
using pxn_tools::SoakPlanner;

namespace {

/* What pxn offers over cma (ucx_pxn_peer "caps" with default settings). */
SoakCaps pxn_caps()
{
    SoakCaps caps;
    EXPECT_TRUE(SoakCaps::parse("caps 1024 65536 1073741824 65536 1073741824",
                                &caps));
    return caps;
}

uint64_t limit_of(const SoakCaps &caps, const SoakOp &op)
{
    if (op.get) {
        return (op.kind == "bcopy") ? caps.get_bcopy : caps.get_zcopy;
    }
    return (op.kind == "short") ? caps.put_short :
           (op.kind == "bcopy") ? caps.put_bcopy : caps.put_zcopy;
}

} // namespace

TEST(SoakPlan, EveryPassCoversEveryByteAndStaysInsideTheBuffer)
{
    const SoakCaps caps = pxn_caps();
    std::mt19937_64 rng(7);
    for (uint64_t size : {1ull, 2ull, 4095ull, 65536ull, (1ull << 20) + 3,
                          64ull << 20}) {
        const SoakPlanner planner(caps, size, size);
        for (int pass = 0; pass < 50; ++pass) {
            for (bool get : {false, true}) {
                ByteCoverage covered;
                const auto ops = planner.pass(get, rng);
                ASSERT_FALSE(ops.empty());
                for (const SoakOp &op : ops) {
                    ASSERT_EQ(get, op.get);
                    ASSERT_GE(op.bytes, 1u);
                    ASSERT_LE(op.offset + op.bytes, size) << op.command("a", "k");
                    covered.add(op.offset, op.offset + op.bytes);
                }
                EXPECT_TRUE(covered.gaps(size).empty()) << size << " " << pass;
            }
        }
    }
}

TEST(SoakPlan, CommandsStayWithinTheTransportLimitsAndTheChunkBound)
{
    const SoakCaps caps = pxn_caps();
    std::mt19937_64 rng(11);
    const SoakPlanner planner(caps, 64ull << 20, 64ull << 20);
    std::map<std::string, unsigned> kinds;
    for (int pass = 0; pass < 200; ++pass) {
        for (bool get : {false, true}) {
            for (const SoakOp &op : planner.pass(get, rng)) {
                ASSERT_GE(op.chunk, 1u);
                ASSERT_LE(op.chunk, op.bytes);
                ASSERT_LE(op.chunk, limit_of(caps, op)) << op.kind;
                ASSERT_LE((op.bytes + op.chunk - 1) / op.chunk,
                          SoakPlanner::kMaxChunks) << op.command("a", "k");
                ++kinds[(get ? "get_" : "put_") + op.kind];
            }
        }
    }
    for (const char *kind : {"put_short", "put_bcopy", "put_zcopy", "get_bcopy",
                             "get_zcopy"}) {
        EXPECT_GT(kinds[kind], 0u) << kind << " never planned";
    }
}

TEST(SoakPlan, SizesSpanFromBytesToTheMaximum)
{
    std::mt19937_64 rng(13);
    const uint64_t max = 64ull << 20;
    const SoakPlanner planner(pxn_caps(), max, max);
    uint64_t smallest = max, largest = 0;
    for (int pass = 0; pass < 200; ++pass) {
        for (const SoakOp &op : planner.pass(false, rng)) {
            smallest = std::min(smallest, op.bytes);
            largest  = std::max(largest, op.bytes);
        }
    }
    EXPECT_LE(smallest, 16u);
    EXPECT_GE(largest, max / 4);
}

TEST(SoakPlan, NoGetPassWhereTheTransportHasNoGet)
{
    SoakCaps caps;
    ASSERT_TRUE(SoakCaps::parse("caps 1024 65536 1073741824 0 0", &caps));
    std::mt19937_64 rng(17);
    const SoakPlanner planner(caps, 4096, 4096);
    EXPECT_FALSE(planner.can(true));
    EXPECT_TRUE(planner.pass(true, rng).empty());
    EXPECT_FALSE(planner.pass(false, rng).empty());
}

TEST(SoakPlan, CapsParseRejectsMalformedAnswers)
{
    SoakCaps caps;
    caps.put_short = 5;
    for (const char *bad : {"", "caps", "caps 1 2 3 4", "err unknown command caps",
                            "caps a b c d e"}) {
        EXPECT_FALSE(SoakCaps::parse(bad, &caps)) << bad;
    }
    EXPECT_EQ(5u, caps.put_short);
}

TEST(SoakPlan, CoverageMergesOverlappingAndTouchingRanges)
{
    ByteCoverage c;
    c.add(10, 20);
    c.add(30, 40);
    c.add(20, 25); /* touches the first */
    c.add(5, 12);  /* overlaps the first */
    c.add(50, 50); /* empty */
    const auto gaps = c.gaps(45);
    ASSERT_EQ(3u, gaps.size());
    EXPECT_EQ(std::make_pair(uint64_t(0), uint64_t(5)), gaps[0]);
    EXPECT_EQ(std::make_pair(uint64_t(25), uint64_t(30)), gaps[1]);
    EXPECT_EQ(std::make_pair(uint64_t(40), uint64_t(45)), gaps[2]);
    c.add(0, 100);
    EXPECT_TRUE(c.gaps(45).empty());
}
