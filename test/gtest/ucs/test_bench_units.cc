#include <bench/bench_units.h>

#include <gtest/gtest.h>

using pxn_tools::human;
using pxn_tools::median;
using pxn_tools::parse_size;
using pxn_tools::parse_sizes;

TEST(BenchUnits, ParsesPlainAndBinarySuffixedSizes)
{
    uint64_t bytes = 0;
    EXPECT_TRUE(parse_size("4096", &bytes));
    EXPECT_EQ(4096u, bytes);
    EXPECT_TRUE(parse_size("4K", &bytes));
    EXPECT_EQ(4096u, bytes);
    EXPECT_TRUE(parse_size("8m", &bytes));
    EXPECT_EQ(8ull << 20, bytes);
    EXPECT_TRUE(parse_size("1G", &bytes));
    EXPECT_EQ(1ull << 30, bytes);
}

TEST(BenchUnits, RejectsWhatIsNotASizeAndLeavesTheOutputAlone)
{
    uint64_t bytes = 7;
    for (const char *bad : {"", "0", "-4K", "4KB", "1.5M", "K", "4 K",
                            "99999999999999999999", "17179869184G"}) {
        EXPECT_FALSE(parse_size(bad, &bytes)) << bad;
    }
    EXPECT_EQ(7u, bytes);
}

TEST(BenchUnits, ParsesListsAndRejectsEmptyItems)
{
    std::vector<uint64_t> sizes;
    EXPECT_TRUE(parse_sizes("4K,64K,8M", &sizes));
    EXPECT_EQ((std::vector<uint64_t>{4096, 65536, 8ull << 20}), sizes);
    EXPECT_FALSE(parse_sizes("4K,,8M", &sizes));
    EXPECT_FALSE(parse_sizes("4K,", &sizes));
}

TEST(BenchUnits, PrintsTheShortestExactForm)
{
    EXPECT_EQ("1000", human(1000));
    EXPECT_EQ("4K", human(4096));
    EXPECT_EQ("1536K", human(3ull << 19));
    EXPECT_EQ("8M", human(8ull << 20));
    EXPECT_EQ("2G", human(2ull << 30));
}

TEST(BenchUnits, MedianIsTheMiddleValueOrTheUpperOfTwoAndZeroForNone)
{
    EXPECT_EQ(2.0, median({3.0, 1.0, 2.0}));
    EXPECT_EQ(3.0, median({4.0, 1.0, 3.0, 2.0}));
    EXPECT_EQ(5.0, median({5.0}));
    EXPECT_EQ(0.0, median({}));
}
