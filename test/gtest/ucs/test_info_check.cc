/*
 * ucx_pxn_info --check (health_check.h) against registries written by hand
 * in a private base directory: which rails it expects, when it says
 * healthy, one line per problem, stale entries and what they hold, and
 * that broken or hostile files neither crash it nor change its verdict.
 */
#include "registry_fixture.h"

#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace {

using pxn_test::RegistryTest;

class InfoCheckTest : public RegistryTest {
protected:
    void SetUp() override
    {
        RegistryTest::SetUp();
        registry_ = open_registry(); /* the directory, kept for the test */
        ASSERT_NE(nullptr, registry_);
        start_ = own_start_time();
    }

    pxn_test::ChildResult check(std::vector<std::string> args)
    {
        std::vector<std::string> argv = {tool(), "--check", "--base", base_.path(),
                                         "--group", settings_.group};
        argv.insert(argv.end(), args.begin(), args.end());
        return pxn_test::run_program(argv, {"UCX_PXN_GROUP=", "UCX_PXN_RAIL_MAP="});
    }

    static std::string tool()
    {
        return pxn_test::build_dir() + "/src/tools/ucx_pxn_info";
    }

    /* A control file that looks like this process's relay of `rail`. */
    std::string relay(const char *rail, uint64_t epoch,
                      uint32_t state = pxn::abi::kProcessReady,
                      uint64_t heartbeat_age_ns = 0)
    {
        auto h = header(getpid(), start_, epoch);
        snprintf(h.rail, sizeof(h.rail), "%s", rail);
        h.state        = state;
        h.heartbeat_ns = pxn::monotonic_ns() - heartbeat_age_ns;
        h.arena_kind   = 0; /* no arena file to go with it */
        return write_entry(h);
    }

    static std::vector<std::string> lines(const std::string &text)
    {
        std::vector<std::string> out;
        std::istringstream       in(text);
        for (std::string l; std::getline(in, l);) {
            out.push_back(l);
        }
        return out;
    }

    static size_t lines_starting(const std::string &text, const std::string &start)
    {
        size_t n = 0;
        for (const std::string &l : lines(text)) {
            n += (l.rfind(start, 0) == 0);
        }
        return n;
    }

    std::unique_ptr<pxn::Registry> registry_;
    uint64_t                       start_ = 0;
};

TEST_F(InfoCheckTest, HealthyOnlyWhenEveryExpectedRailHasAReadyRelay)
{
    relay("rail0", 1);
    relay("rail1", 2);
    auto r = check({"--rails", "rail0,rail1"});
    EXPECT_EQ(0, r.exit_code) << r.output;
    EXPECT_EQ(1u, lines(r.output).size()) << r.output;
    EXPECT_EQ(0u, r.output.find("HEALTHY: 2 of 2 rails ready (rail0 pid " +
                                std::to_string(getpid()) + ", rail1 pid "))
            << r.output;

    r = check({"--rails", "rail0,rail1,rail2"});
    EXPECT_EQ(1, r.exit_code) << r.output;
    EXPECT_EQ(1u, lines_starting(r.output, "FAIL ")) << r.output;
    EXPECT_NE(std::string::npos,
              r.output.find("FAIL rail2: no relay is up: no relay registered for it\n"))
            << r.output;
    EXPECT_NE(std::string::npos,
              r.output.find("UNHEALTHY: 1 problem, 1 of 3 rails not ready"))
            << r.output;
}

TEST_F(InfoCheckTest, OneLinePerRailWhoseRelayIsDeadFrozenOrNotReady)
{
    auto dead = header(dead_pid(), 1, 3);
    snprintf(dead.rail, sizeof(dead.rail), "rail0");
    dead.arena_kind = 0;
    write_entry(dead);
    relay("rail1", 4, pxn::abi::kProcessReady, 10000000000ull); /* 10 s old */
    relay("rail2", 5, pxn::abi::kProcessInit);
    relay("rail3", 6, pxn::abi::kProcessClosing);
    relay("rail4", 7);

    auto r = check({"--rails", "rail0,rail1,rail2,rail3,rail4"});
    EXPECT_EQ(1, r.exit_code) << r.output;
    EXPECT_EQ(4u, lines_starting(r.output, "FAIL ")) << r.output;
    for (const std::string &want :
         {std::string("FAIL rail0: no relay is up: relay pid ") +
          std::to_string(dead.pid) + " dead (stale entry p" + std::to_string(dead.pid),
          std::string("FAIL rail1: no relay is up: relay pid ") +
          std::to_string(getpid()) + " alive but its heartbeat is 10.0 s old "
          "(limit 3 s): frozen or starved of CPU",
          std::string("FAIL rail2: no relay is up: relay pid ") +
          std::to_string(getpid()) + " still starting (INIT)",
          std::string("FAIL rail3: no relay is up: relay pid ") +
          std::to_string(getpid()) + " shutting down (CLOSING)",
          std::string("STALE p") + std::to_string(dead.pid)}) {
        EXPECT_NE(std::string::npos, r.output.find(want)) << want << "\n" << r.output;
    }
    /* The job's own heartbeat timeout, when it set a longer one. */
    r = check({"--rails", "rail1,rail4", "--heartbeat-timeout", "30"});
    EXPECT_EQ(0, r.exit_code) << r.output;
}

TEST_F(InfoCheckTest, ReportsStaleEntriesWithTheMemoryTheyHoldWithoutFailing)
{
    relay("rail0", 1);
    auto dead = header(dead_pid(), 1, 8);
    snprintf(dead.rail, sizeof(dead.rail), "rail0");
    const std::string ctl = write_entry(dead);
    const std::string arena = pxn::entry_file_name(dead.pid, dead.epoch,
                                                   pxn::kSuffixArena);
    {
        std::ofstream out(path(arena));
        out << std::string(3 << 20, 'x'); /* 3 MiB of pages in use */
    }
    ASSERT_EQ(0, truncate(path(arena).c_str(), off_t(dead.arena_size)));
    ASSERT_EQ(0, chmod(path(arena).c_str(), 0600));
    struct stat c, a;
    ASSERT_EQ(0, stat(path(ctl).c_str(), &c));
    ASSERT_EQ(0, stat(path(arena).c_str(), &a));
    char held[64], apparent[64];
    snprintf(held, sizeof(held), "holds %.1f MiB of ",
             double(c.st_blocks * 512 + a.st_blocks * 512) / 1048576.0);
    snprintf(apparent, sizeof(apparent), "(%.1f MiB apparent)",
             double(c.st_size + a.st_size) / 1048576.0);

    const auto r = check({"--rails", "rail0"});
    EXPECT_EQ(0, r.exit_code) << "a stale entry beside a live relay: " << r.output;
    EXPECT_EQ(1u, lines_starting(r.output, "STALE " + ctl + ": process dead, rail "
                                 "rail0, " + held + dir_ + " " + apparent +
                                 "; ucx_pxn_info --clean --group " +
                                 settings_.group + " removes it"))
            << held << apparent << "\n" << r.output;
}

TEST_F(InfoCheckTest, BrokenOrHostileFilesNeitherCrashItNorChangeItsVerdict)
{
    relay("rail0", 1);
    auto h = header(getpid(), start_, 2);
    snprintf(h.rail, sizeof(h.rail), "rail1");
    write_entry(h, pxn::kSuffixControl, int64_t(h.file_size / 2)); /* truncated */
    write_entry(header(getpid(), start_, 3), pxn::kSuffixControl, 100, 100);
    auto squat = header(getpid(), start_, 4); /* a name that is not its own */
    snprintf(squat.rail, sizeof(squat.rail), "rail1");
    squat.epoch = 99;
    const std::string squatted = pxn::entry_file_name(getpid(), 4,
                                                      pxn::kSuffixControl);
    {
        std::ofstream out(path(squatted));
        out.write(reinterpret_cast<const char*>(&squat), sizeof(squat));
    }
    ASSERT_EQ(0, truncate(path(squatted).c_str(), off_t(squat.file_size)));
    ASSERT_EQ(0, chmod(path(squatted).c_str(), 0600));
    uint64_t init_start = 0;
    ASSERT_EQ(UCS_OK, pxn::process_start_time(1, &init_start));
    auto liar = header(1, init_start + 1, 5); /* pid 1, not its start time */
    snprintf(liar.rail, sizeof(liar.rail), "rail1");
    write_entry(liar);
    ASSERT_EQ(0, mkfifo(path(pxn::entry_file_name(getpid(), 6,
                                                  pxn::kSuffixControl)).c_str(),
                        0600)); /* opening it blocking would hang the check */
    auto evil = header(getpid(), start_, 7);
    snprintf(evil.rail, sizeof(evil.rail), "rail2\n\x1b[2J\xff");
    evil.arena_kind = 0;
    write_entry(evil);

    auto r = check({"--rails", "rail0,rail1", "--timeout", "10"});
    EXPECT_EQ(1, r.exit_code) << r.output;
    EXPECT_EQ(1u, lines_starting(r.output, "FAIL ")) << r.output;
    /* the truncated and squatted files are not relays of rail1; the live
     * pid 1 of another start time is no relay at all */
    EXPECT_NE(std::string::npos,
              r.output.find("FAIL rail1: no relay is up: relay pid 1 gone, its "
                            "pid reused (stale entry p1-0000000000000005.ctl)\n"))
            << r.output;
    EXPECT_EQ(std::string::npos, r.output.find_first_of("\x1b\xff")) << r.output;
    for (const char *note : {"not read: truncated or padded",
                             "not read: truncated: 100 bytes",
                             "not read: header says pid",
                             "not read: a fifo, not a regular file"}) {
        EXPECT_NE(std::string::npos, r.output.find(note)) << note << "\n" << r.output;
    }
    /* Only rail0 expected: the same files leave a healthy node healthy. */
    r = check({"--rails", "rail0"});
    EXPECT_EQ(0, r.exit_code) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("HEALTHY: 1 of 1")) << r.output;
    /* and the rail named with control bytes counts as its own, printable */
    r = check({"--rails", "rail2\n\x1b[2J\xff"});
    EXPECT_EQ(0, r.exit_code) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("rail2\\x0a\\x1b[2J\\xff pid"))
            << r.output;
}

TEST_F(InfoCheckTest, SquattedRegistryDirectoryIsNeitherFollowedNorHealthy)
{
    relay("rail0", 1);
    registry_.reset();
    pxn_test::TempDir elsewhere;
    ASSERT_EQ(0, rename(dir_.c_str(), (elsewhere.path() + "/real").c_str()));
    ASSERT_EQ(0, symlink((elsewhere.path() + "/real").c_str(), dir_.c_str()));
    const auto r = check({"--rails", "rail0"});
    EXPECT_EQ(1, r.exit_code) << r.output;
    EXPECT_NE(std::string::npos,
              r.output.find("FAIL rail0: no relay is up: registry " + dir_ +
                            " a symlink, not a directory")) << r.output;
}

TEST_F(InfoCheckTest, ExpectsTheRailsOfTheNodesRdmaPortsByDefault)
{
    relay("rail0", 1);
    relay("mlx5_2", 2);
    pxn_test::TempDir sys;
    const std::string ib = sys.path() + "/class/infiniband";
    for (const char *port : {"mlx5_0/ports/1", "mlx5_1/ports/1", "mlx5_2/ports/1"}) {
        ASSERT_EQ(0, pxn_test::run_program({"/bin/mkdir", "-p", ib + "/" + port})
                             .exit_code);
        std::ofstream(ib + "/" + port + "/state")
                << ((std::string(port) == "mlx5_1/ports/1") ? "1: DOWN\n" :
                                                              "4: ACTIVE\n");
    }
    auto r = check({"--sysfs", sys.path(), "--rail-map",
                    "mlx5_0:1:rail0,mlx5_1:1:rail1"});
    EXPECT_EQ(1, r.exit_code) << r.output;
    EXPECT_EQ(2u, lines_starting(r.output, "FAIL ")) << r.output;
    EXPECT_NE(std::string::npos,
              r.output.find("FAIL rail1: no ACTIVE port on its NIC (mlx5_1:1 1: DOWN)"))
            << r.output;
    EXPECT_NE(std::string::npos,
              r.output.find("FAIL rail1: no relay is up: no relay registered"))
            << r.output;
    EXPECT_NE(std::string::npos, r.output.find("2 problems, 1 of 3 rails not ready"))
            << r.output;

    /* $UCX_PXN_RAIL_MAP, as the job's environment sets it */
    r = pxn_test::run_program({tool(), "--check", "--base", base_.path(), "--group",
                               settings_.group, "--sysfs", sys.path()},
                              {"UCX_PXN_RAIL_MAP=mlx5_0:1:rail0,mlx5_1:1:rail1"});
    EXPECT_NE(std::string::npos, r.output.find("FAIL rail1: no ACTIVE")) << r.output;

    r = check({"--sysfs", base_.path()});
    EXPECT_EQ(1, r.exit_code) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("UNHEALTHY: no RDMA device under "))
            << r.output;
}

} // namespace
