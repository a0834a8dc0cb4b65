#include <ucs/pxn/identity.h>

#include "../common/test_helpers.h"

#include <gtest/gtest.h>

#include <climits>
#include <csignal>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

/* A /proc/<pid>/stat line with the given comm and start time (field 22). */
std::string stat_line(const std::string &comm, char state, uint64_t start_time)
{
    std::ostringstream os;
    os << "4242 (" << comm << ") " << state;
    for (int field = 4; field <= 21; ++field) {
        os << " " << field * 10;
    }
    os << " " << start_time << " 123456 789 18446744073709551615 1 2 3\n";
    return os.str();
}

uint64_t parsed_start_time(const std::string &text)
{
    char     state = 0;
    uint64_t start = 0;
    EXPECT_TRUE(pxn::parse_proc_stat(text.data(), text.size(), &state, &start))
            << text;
    return start;
}

TEST(Identity, ParsesStartTimeOfAPlainStatLine)
{
    char     state = 0;
    uint64_t start = 0;
    const std::string line = stat_line("bash", 'S', 987654321);
    ASSERT_TRUE(pxn::parse_proc_stat(line.data(), line.size(), &state, &start));
    EXPECT_EQ('S', state);
    EXPECT_EQ(987654321u, start);
}

TEST(Identity, CountsFieldsFromTheLastParenthesisOfComm)
{
    EXPECT_EQ(77u, parsed_start_time(stat_line("a) b (c", 'R', 77)));
    EXPECT_EQ(78u, parsed_start_time(stat_line(") 1 2 3 4 5 6 7 8 9 10 ", 'S', 78)));
    EXPECT_EQ(79u, parsed_start_time(stat_line("((()))", 'S', 79)));
    EXPECT_EQ(80u, parsed_start_time(stat_line("", 'S', 80)));
}

TEST(Identity, RejectsMalformedStatText)
{
    char     state;
    uint64_t start;
    for (const std::string &text :
         {std::string(""), std::string("4242 (x"), std::string("4242 (x)"),
          std::string("4242 (x) S 1 2 3"), std::string("4242 (x) SS 1"),
          std::string("4242 (x) S") + std::string(40, ' ')}) {
        EXPECT_FALSE(pxn::parse_proc_stat(text.data(), text.size(), &state, &start))
                << "'" << text << "'";
    }
    /* field 22 not numeric */
    std::string bad = "4242 (x) S";
    for (int field = 4; field <= 21; ++field) {
        bad += " 1";
    }
    bad += " 12a4 5\n";
    EXPECT_FALSE(pxn::parse_proc_stat(bad.data(), bad.size(), &state, &start));
    /* overflow */
    bad = "4242 (x) S";
    for (int field = 4; field <= 21; ++field) {
        bad += " 1";
    }
    bad += " 99999999999999999999999 5\n";
    EXPECT_FALSE(pxn::parse_proc_stat(bad.data(), bad.size(), &state, &start));
}

TEST(Identity, ReadsTheStartTimeOfThisProcess)
{
    std::ifstream     in("/proc/self/stat");
    std::stringstream text;
    text << in.rdbuf();
    const uint64_t expected = parsed_start_time(text.str());

    uint64_t start = 0;
    ASSERT_EQ(UCS_OK, pxn::process_start_time(getpid(), &start));
    EXPECT_EQ(expected, start);
    EXPECT_GT(start, 0u);
}

TEST(Identity, ReadsTheStartTimeOfAProcessWithParenthesesInItsName)
{
    pxn_test::ForkedChild child;
    ASSERT_TRUE(child.start([](pxn_test::ChildChannel &channel) {
        prctl(PR_SET_NAME, "x) (y z) 1 2");
        uint64_t start = 0;
        if (pxn::process_start_time(getpid(), &start) != UCS_OK) {
            return 1;
        }
        channel.send(std::to_string(start));
        std::string line;
        channel.receive(&line, 10000);
        return 0;
    }));
    std::string reply;
    ASSERT_TRUE(child.receive(&reply));

    std::ifstream comm("/proc/" + std::to_string(child.pid()) + "/comm");
    std::string   name;
    std::getline(comm, name);
    EXPECT_EQ("x) (y z) 1 2", name);

    uint64_t start = 0;
    ASSERT_EQ(UCS_OK, pxn::process_start_time(child.pid(), &start));
    EXPECT_EQ(reply, std::to_string(start));
    EXPECT_TRUE(pxn::is_alive(child.pid(), start));
    child.send("exit");
    EXPECT_EQ(0, child.wait());
}

TEST(Identity, ReapedProcessHasNoStartTimeAndIsDead)
{
    pxn_test::ForkedChild child;
    ASSERT_TRUE(child.start([](pxn_test::ChildChannel &channel) {
        channel.send("up");
        std::string line;
        channel.receive(&line, 10000);
        return 0;
    }));
    std::string line;
    ASSERT_TRUE(child.receive(&line));
    const int pid   = child.pid();
    uint64_t  start = 0;
    ASSERT_EQ(UCS_OK, pxn::process_start_time(pid, &start));
    child.send("exit");
    ASSERT_EQ(0, child.wait());

    uint64_t after = 0;
    EXPECT_EQ(UCS_ERR_NO_ELEM, pxn::process_start_time(pid, &after));
    EXPECT_FALSE(pxn::is_alive(pid, start));
}

TEST(Identity, ZombieIsDead)
{
    pxn_test::ForkedChild child;
    ASSERT_TRUE(child.start([](pxn_test::ChildChannel &channel) {
        channel.send("up");
        std::string line;
        channel.receive(&line, 10000);
        return 0;
    }));
    std::string line;
    ASSERT_TRUE(child.receive(&line));
    uint64_t start = 0;
    ASSERT_EQ(UCS_OK, pxn::process_start_time(child.pid(), &start));
    child.send("exit");

    /* Not reaped: wait (bounded) until it is a zombie. */
    siginfo_t info;
    memset(&info, 0, sizeof(info));
    ASSERT_EQ(0, waitid(P_PID, child.pid(), &info, WEXITED | WNOWAIT));
    EXPECT_EQ(0, kill(child.pid(), 0)); /* a zombie still has its pid */
    EXPECT_FALSE(pxn::is_alive(child.pid(), start));
    EXPECT_EQ(UCS_ERR_NO_ELEM, pxn::process_start_time(child.pid(), &start));
    EXPECT_EQ(0, child.wait());
}

TEST(Identity, LiveProcessWithAnotherStartTimeIsNotAlive)
{
    uint64_t start = 0;
    ASSERT_EQ(UCS_OK, pxn::process_start_time(getpid(), &start));
    EXPECT_TRUE(pxn::is_alive(getpid(), start));
    EXPECT_FALSE(pxn::is_alive(getpid(), start + 1));
    EXPECT_FALSE(pxn::is_alive(getpid(), 0));
}

TEST(Identity, NonPositiveOrHugePidsAreNeverAlive)
{
    EXPECT_FALSE(pxn::is_alive(0, 0));
    EXPECT_FALSE(pxn::is_alive(-1, 0));
    EXPECT_FALSE(pxn::is_alive(int64_t(INT_MAX) + 1, 0));
    EXPECT_FALSE(pxn::is_alive(int64_t(UINT32_MAX), 0));
}

TEST(Identity, RandomEpochsAreNonZeroAndDistinct)
{
    std::set<uint64_t> seen;
    for (int i = 0; i < 1000; ++i) {
        uint64_t epoch = 0;
        ASSERT_EQ(UCS_OK, pxn::random_epoch(&epoch));
        EXPECT_NE(0u, epoch);
        seen.insert(epoch);
    }
    EXPECT_EQ(1000u, seen.size());
}

TEST(Identity, CurrentProcessKeepsPidAndStartTimeWithANewEpoch)
{
    pxn::ProcessIdentity a, b;
    ASSERT_EQ(UCS_OK, pxn::current_process(&a));
    ASSERT_EQ(UCS_OK, pxn::current_process(&b));
    EXPECT_EQ(uint32_t(getpid()), a.pid);
    EXPECT_TRUE(a.same_process(b));
    EXPECT_NE(a.epoch, b.epoch);
    EXPECT_FALSE(a == b);
    EXPECT_TRUE(pxn::is_alive(a.pid, a.start_time));
}

TEST(Identity, NodeIdentityIsTheBootIdUnlessOverridden)
{
    std::ifstream in(pxn::kBootIdPath);
    std::string   boot_id;
    std::getline(in, boot_id);
    ASSERT_EQ(36u, boot_id.size());

    std::string node;
    ASSERT_EQ(UCS_OK, pxn::node_identity("", &node));
    EXPECT_EQ(boot_id, node);
    ASSERT_EQ(UCS_OK, pxn::node_identity("node-7", &node));
    EXPECT_EQ("node-7", node);
}

TEST(Identity, NodeIdentityFailsWithoutABootId)
{
    pxn_test::TempDir dir;
    ASSERT_FALSE(dir.path().empty());
    const std::string empty = dir.path() + "/boot_id";
    std::ofstream(empty) << "\n";

    pxn_test::LogCapture log;
    std::string          node = "unchanged";
    EXPECT_EQ(UCS_ERR_IO_ERROR,
              pxn::node_identity("", &node, (dir.path() + "/missing").c_str()));
    EXPECT_EQ(UCS_ERR_IO_ERROR, pxn::node_identity("", &node, empty.c_str()));
    EXPECT_EQ("unchanged", node);
    EXPECT_TRUE(log.contains("UCX_PXN_NODE_ID")) << log.joined();
}

} // namespace
