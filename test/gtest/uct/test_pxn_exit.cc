/*
 * What a pxn process leaves behind when it ends (exit_cleanup.h,
 * registry_lease.h), through the installed module: ucx_pxn_peer processes
 * over cma on this host (no topology), each test in a group of its own.
 * A process that returns from main after closing UCT, that calls exit()
 * with UCT open, or that gets SIGTERM at its default disposition removes
 * its registry files, and the last one its group's directory; an
 * application's own SIGTERM handler is never replaced.
 */
#include "pxn_transfer.h"

#include <csignal>
#include <dirent.h>
#include <sys/stat.h>

namespace {

using pxn_tools::PeerProcess;

class PxnExit : public ::testing::Test {
protected:
    void SetUp() override
    {
        const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
        group_ = "x" + std::to_string(std::hash<std::string>()(info->name()) % 100000) +
                 "-" + std::to_string(getpid());
        dir_   = "/dev/shm/ucx-pxn-" + std::to_string(geteuid()) + "-" + group_;
    }

    void TearDown() override
    {
        peers_.clear();
        pxn_test::remove_tree(dir_);
    }

    /* A process with pxn open on rail `rail`, once its relay is published. */
    PeerProcess *peer(const std::string &rail, const std::string &sigterm = "")
    {
        peers_.emplace_back(new PeerProcess());
        std::string error;
        std::vector<std::string> env = {
                "UCX_PXN_NODE_ID=node0", "UCX_PXN_GROUP=" + group_,
                "UCX_PXN_NET_TLS=cma", "UCX_PXN_RAIL_MAP=memory:" + rail,
                "UCX_PXN_SLOT_SIZE=65536", "UCX_PXN_SLOTS=4"};
        if (!sigterm.empty()) {
            env.push_back("PXN_PEER_SIGTERM=" + sigterm);
        }
        if (!peers_.back()->start(pxn_test::app("ucx_pxn_peer"), "", env, "pxn_cma",
                                  "pxn", "memory", &error)) {
            ADD_FAILURE() << error;
            return nullptr;
        }
        PeerProcess *p = peers_.back().get();
        EXPECT_TRUE(pxn_test::wait_until([&] { return files_of(p->pid()) >= 2; },
                                         10))
                << "no registry entry of pid " << p->pid();
        return p;
    }

    /* Files of process `pid` in the group's directory (ctl, arena, wake). */
    size_t files_of(pid_t pid) const
    {
        size_t n = 0;
        DIR   *d = opendir(dir_.c_str());
        const std::string prefix = "p" + std::to_string(pid) + "-";
        for (dirent *e; (d != nullptr) && ((e = readdir(d)) != nullptr);) {
            n += (std::string(e->d_name).rfind(prefix, 0) == 0);
        }
        if (d != nullptr) {
            closedir(d);
        }
        return n;
    }

    bool dir_exists() const
    {
        struct stat st;
        return lstat(dir_.c_str(), &st) == 0;
    }

    std::string group_, dir_;
    std::vector<std::unique_ptr<PeerProcess>> peers_;
};

TEST_F(PxnExit, LastProcessOfAGroupRemovesItsDirectory)
{
    PeerProcess *a = peer("rail0");
    PeerProcess *b = peer("rail1");
    ASSERT_TRUE(a && b);
    ASSERT_TRUE(a->send("quit"));
    EXPECT_EQ(0, a->wait(pxn_test::scaled_ms(10000)));
    EXPECT_EQ(0u, files_of(a->pid()));
    EXPECT_TRUE(dir_exists()) << "b still uses it";
    ASSERT_TRUE(b->send("quit"));
    EXPECT_EQ(0, b->wait(pxn_test::scaled_ms(10000)));
    EXPECT_FALSE(dir_exists());
}

TEST_F(PxnExit, ExitWithUctStillOpenLeavesNothing)
{
    PeerProcess *a = peer("rail0");
    ASSERT_NE(nullptr, a);
    ASSERT_TRUE(a->send("exit"));
    EXPECT_EQ(0, a->wait(pxn_test::scaled_ms(10000)));
    EXPECT_FALSE(dir_exists());
}

TEST_F(PxnExit, SigtermAtItsDefaultRemovesTheProcesssFilesAndEndsIt)
{
    PeerProcess *a = peer("rail0");
    PeerProcess *b = peer("rail1");
    ASSERT_TRUE(a && b);
    a->kill(SIGTERM);
    EXPECT_EQ(-SIGTERM, a->wait(pxn_test::scaled_ms(10000)));
    EXPECT_EQ(0u, files_of(a->pid()));
    EXPECT_GE(files_of(b->pid()), 2u) << "only its own files";
    b->kill(SIGTERM);
    EXPECT_EQ(-SIGTERM, b->wait(pxn_test::scaled_ms(10000)));
    EXPECT_EQ(0u, files_of(b->pid()));
    EXPECT_FALSE(dir_exists()) << "the last one leaves the directory too";
}

TEST_F(PxnExit, AnApplicationsOwnSigtermHandlerIsKept)
{
    /* installed before pxn opened, and after */
    for (const char *when : {"own", "after"}) {
        PeerProcess *a = peer("rail0", when);
        ASSERT_NE(nullptr, a);
        a->kill(SIGTERM);
        EXPECT_EQ("sigterm", a->receive(pxn_test::scaled_ms(10000))) << when;
        EXPECT_EQ(-1000, a->wait(200)) << when << ": it goes on";
        EXPECT_GE(files_of(a->pid()), 2u) << when;
        ASSERT_TRUE(a->send("quit"));
        EXPECT_EQ(0, a->wait(pxn_test::scaled_ms(10000))) << when;
        EXPECT_FALSE(dir_exists()) << when;
    }
}

} // namespace
