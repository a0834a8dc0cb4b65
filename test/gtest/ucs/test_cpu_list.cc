#include <ucs/pxn/cpu_list.h>

#include <gtest/gtest.h>

using pxn::choose_engine_cpus;
using pxn::format_cpu_list;
using pxn::parse_cpu_list;

TEST(CpuList, ParsesTheKernelsForm)
{
    std::vector<int> cpus;
    std::string error;
    ASSERT_TRUE(parse_cpu_list("0-3,8,10-11\n", &cpus, &error)) << error;
    EXPECT_EQ((std::vector<int>{0, 1, 2, 3, 8, 10, 11}), cpus);
    ASSERT_TRUE(parse_cpu_list("5,1,5,0-1", &cpus, &error)) << error;
    EXPECT_EQ((std::vector<int>{0, 1, 5}), cpus);
    EXPECT_EQ("0-3,8,10-11", format_cpu_list({0, 1, 2, 3, 8, 10, 11}));
    EXPECT_EQ("7", format_cpu_list({7}));
    EXPECT_EQ("", format_cpu_list({}));
}

TEST(CpuList, RefusesWhatIsNotAList)
{
    std::vector<int> cpus;
    std::string error;
    for (const char *bad : {"", ",", "1,", "a", "3-1", "1-", "-1", "1 2", "0-9999",
                            "1;2"}) {
        EXPECT_FALSE(parse_cpu_list(bad, &cpus, &error)) << "'" << bad << "'";
        EXPECT_FALSE(error.empty());
    }
}

TEST(CpuList, AutoPlacesTheEngineOnTheProcesssCpusNearItsGpu)
{
    std::string why;
    EXPECT_EQ((std::vector<int>{2, 3}),
              choose_engine_cpus("auto", {0, 1, 2, 3}, {2, 3, 4, 5}, &why));
    EXPECT_NE(std::string::npos, why.find("local to the GPU")) << why;
    /* GPU unknown, or none of the process's CPUs near it, or all of them:
     * the process's affinity stays */
    EXPECT_TRUE(choose_engine_cpus("auto", {0, 1}, {}, &why).empty());
    EXPECT_NE(std::string::npos, why.find("not known")) << why;
    EXPECT_TRUE(choose_engine_cpus("auto", {0, 1}, {4, 5}, &why).empty());
    EXPECT_TRUE(choose_engine_cpus("auto", {4, 5}, {0, 1, 4, 5}, &why).empty());
}

TEST(CpuList, AListNeverLeavesWhatTheProcessMayUse)
{
    std::string why;
    EXPECT_EQ((std::vector<int>{1}), choose_engine_cpus("1,6", {0, 1}, {}, &why));
    EXPECT_TRUE(choose_engine_cpus("6-7", {0, 1}, {}, &why).empty());
    EXPECT_NE(std::string::npos, why.find("names none of them")) << why;
    EXPECT_TRUE(choose_engine_cpus("inherit", {0, 1}, {0}, &why).empty());
}
