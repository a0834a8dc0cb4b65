/*
 * The registry directory's lifetime (registry_lease.h) and what a process
 * that ends without closing pxn removes (exit_cleanup.h): real Registry
 * objects in a private base directory, and forked processes for the ends
 * (exit, SIGTERM) that a test process cannot go through itself.
 */
#include "registry_fixture.h"

#include <ucs/pxn/exit_cleanup.h>
#include <ucs/pxn/registry_lease.h>

#include <csignal>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using pxn_test::ChildChannel;
using pxn_test::ForkedChild;
using pxn_test::RegistryTest;

class RegistryLeaseTest : public RegistryTest {
protected:
    bool dir_exists() const
    {
        struct stat st;
        return lstat(dir_.c_str(), &st) == 0;
    }

    /* Files of process `pid` in the registry directory. */
    size_t files_of(int pid) const
    {
        size_t n = 0;
        for (const std::string &name : files()) {
            n += (name.rfind("p" + std::to_string(pid) + "-", 0) == 0);
        }
        return n;
    }

    /* A child that opens the registry, publishes an entry (arena and
     * wakeup FIFO too), says "ready", then on "exit" calls exit(0) (on
     * "quick_exit" quick_exit(0)) with both still open, on "fork" forks a
     * grandchild that exit(0)s and says how many of its files are left,
     * and otherwise waits. */
    ForkedChild &publishing_child()
    {
        const pxn::Settings settings = settings_;
        const std::string   base     = base_.path();
        const std::string   dir      = dir_;
        return start_child([settings, base, dir](ChildChannel &channel) {
            std::unique_ptr<pxn::Registry> registry;
            std::unique_ptr<pxn::RegistryEntry> entry;
            pxn::UniqueFd    arena;
            pxn::RelayWakeup wakeup;
            if ((pxn::Registry::open(settings, base, &registry) != UCS_OK) ||
                (registry->create_entry({"rail1", "dev1", "tcp"}, &entry) != UCS_OK) ||
                (entry->create_host_arena(&arena) != UCS_OK) ||
                (entry->create_wakeup(&wakeup) != UCS_OK) ||
                (entry->publish() != UCS_OK)) {
                channel.send("error");
                return 1;
            }
            channel.send(std::string("ready ") +
                         (pxn::exit_cleanup_owns_sigterm() ? "sigterm" : "-"));
            for (std::string line;;) {
                if (!channel.receive(&line, 60000)) {
                    return 1;
                }
                if (line == "exit") {
                    exit(0); /* not _exit: what an application does */
                } else if (line == "quick_exit") {
                    quick_exit(0);
                } else if (line == "fork") {
                    const pid_t child = fork();
                    if (child == 0) {
                        exit(0);
                    }
                    int status = 0;
                    waitpid(child, &status, 0);
                    const std::string stem = dir + "/" + pxn::entry_stem(
                            uint32_t(getpid()), entry->identity().epoch);
                    struct stat st;
                    int left = 0;
                    for (const char *suffix : {".ctl", ".arena", ".wake"}) {
                        left += (stat((stem + suffix).c_str(), &st) == 0);
                    }
                    channel.send("left " + std::to_string(left));
                }
            }
        });
    }
};

TEST_F(RegistryLeaseTest, LastRegistryToCloseRemovesTheEmptyDirectory)
{
    auto first  = open_registry();
    auto second = open_registry();
    ASSERT_NE(nullptr, second);
    struct stat st;
    EXPECT_EQ(0, stat((dir_ + "/" + pxn::kUsersName).c_str(), &st));
    EXPECT_EQ(std::set<std::string>{pxn::kLockName}, files());
    first.reset();
    EXPECT_TRUE(dir_exists()) << "another Registry still uses it";
    second.reset();
    EXPECT_FALSE(dir_exists());
    /* and the next one makes it again */
    auto third = open_registry();
    ASSERT_NE(nullptr, third);
    EXPECT_TRUE(dir_exists());
}

TEST_F(RegistryLeaseTest, DirectoryWithAnyOtherFileStays)
{
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    const uint64_t start = own_start_time();
    write_entry(header(getpid(), start, 1)); /* a live entry not of this object */
    ASSERT_EQ(0, close(open(path("notes.txt").c_str(), O_CREAT | O_WRONLY, 0600)));
    registry.reset();
    EXPECT_TRUE(dir_exists());
    EXPECT_EQ(1u, files().count("notes.txt"));
}

TEST_F(RegistryLeaseTest, UserThatDiedWithoutLeavingDoesNotKeepTheDirectory)
{
    ForkedChild &holder = start_child([this](ChildChannel &channel) {
        auto registry = open_registry();
        channel.send(registry ? "open" : "error");
        std::string line;
        channel.receive(&line, 60000);
        return 0; /* _exit: no destructor leaves */
    });
    std::string line;
    ASSERT_TRUE(holder.receive(&line));
    ASSERT_EQ("open", line);
    open_registry().reset();
    EXPECT_TRUE(dir_exists()) << "the holder is alive";
    holder.send("go");
    ASSERT_EQ(0, holder.wait());
    open_registry().reset();
    EXPECT_FALSE(dir_exists());
}

/* Processes open, publish, close and leave the same group in a tight loop,
 * so that leave() and open() meet: every entry a process creates must be
 * in the directory everyone sees (never in one removed under it), and
 * nothing may be left at the end. */
TEST_F(RegistryLeaseTest, ProcessesOpeningWhileOthersLeaveNeverSplitTheRegistry)
{
    constexpr int kProcesses = 4, kRounds = 150;
    const pxn::Settings settings = settings_;
    const std::string   base     = base_.path();
    const std::string   dir      = dir_;
    std::vector<ForkedChild*> workers;
    for (int i = 0; i < kProcesses; ++i) {
        workers.push_back(&start_child([=](ChildChannel &channel) {
            int lost = 0, failed = 0;
            for (int round = 0; round < kRounds; ++round) {
                std::unique_ptr<pxn::Registry>      registry;
                std::unique_ptr<pxn::RegistryEntry> entry;
                if ((pxn::Registry::open(settings, base, &registry) != UCS_OK) ||
                    (registry->create_entry({"rail1", "dev1", "tcp"}, &entry) !=
                     UCS_OK)) {
                    ++failed;
                    continue;
                }
                struct stat st;
                const std::string name = pxn::entry_file_name(
                        uint32_t(getpid()), entry->identity().epoch, pxn::kSuffixInit);
                lost += (stat((dir + "/" + name).c_str(), &st) != 0);
            }
            channel.send("lost " + std::to_string(lost) + " failed " +
                         std::to_string(failed));
            return 0;
        }));
    }
    for (ForkedChild *w : workers) {
        std::string line;
        ASSERT_TRUE(w->receive(&line, pxn_test::scaled_ms(120000)));
        EXPECT_EQ("lost 0 failed 0", line);
        EXPECT_EQ(0, w->wait());
    }
    EXPECT_FALSE(dir_exists()) << ::testing::PrintToString(files());
}

TEST_F(RegistryLeaseTest, ExitWithoutClosingRemovesTheEntryFilesAndTheDirectory)
{
    ForkedChild &child = publishing_child();
    std::string  line;
    ASSERT_TRUE(child.receive(&line));
    ASSERT_EQ(0u, line.find("ready")) << line;
    EXPECT_EQ(3u, files_of(child.pid())); /* ctl, arena, wake */
    child.send("exit");
    EXPECT_EQ(0, child.wait());
    EXPECT_FALSE(dir_exists()) << ::testing::PrintToString(files());
}

TEST_F(RegistryLeaseTest, QuickExitRemovesTheEntryFilesAndTheDirectory)
{
    ForkedChild &child = publishing_child();
    std::string  line;
    ASSERT_TRUE(child.receive(&line));
    ASSERT_EQ(3u, files_of(child.pid()));
    child.send("quick_exit");
    EXPECT_EQ(0, child.wait());
    EXPECT_FALSE(dir_exists()) << ::testing::PrintToString(files());
}

TEST_F(RegistryLeaseTest, SigtermAtItsDefaultRemovesTheEntryFilesAndEndsTheProcess)
{
    /* pxn installs its handler once per process, when SIGTERM is at its
     * default; this test process (and so its children) has left it there. */
    ForkedChild &child = publishing_child();
    std::string  line;
    ASSERT_TRUE(child.receive(&line));
    ASSERT_EQ("ready sigterm", line);
    EXPECT_EQ(3u, files_of(child.pid()));
    child.kill(SIGTERM);
    EXPECT_EQ(-SIGTERM, child.wait()) << "the default action still ends it";
    EXPECT_EQ(0u, files_of(child.pid())) << ::testing::PrintToString(files());
    EXPECT_FALSE(dir_exists()) << "it was the directory's only user";
}

TEST_F(RegistryLeaseTest, ForkedChildsExitLeavesItsParentsFiles)
{
    ForkedChild &child = publishing_child();
    std::string  line;
    ASSERT_TRUE(child.receive(&line));
    child.send("fork");
    ASSERT_TRUE(child.receive(&line));
    EXPECT_EQ("left 3", line);
    EXPECT_EQ(3u, files_of(child.pid()));
}

} // namespace
