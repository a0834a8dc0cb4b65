/*
 * pxn inside other people's UCX: a program that did not ask for pxn gets
 * none of it; a pxn that cannot work (a squatted or foreign registry, no
 * room in /dev/shm, no GPU for a GPU arena, a bad setting) leaves UCP
 * working on its other transports and says why in one line; the relay
 * trusts nothing a sender writes. test/apps/ucp_idle is the UCP program:
 * it starts a context and a worker and reports its threads.
 */
#include <apps/peer_process.h>

#include "../common/test_helpers.h"
#include "pxn_transfer.h"

#include <ucs/pxn/control_file.h>
#include <ucs/pxn/lane_claim.h>
#include <ucs/pxn/os_resource.h>

#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <regex>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pxn_test {

using pxn_tools::BackgroundProcess;

namespace {

/* Every lane of relay `pid`'s control file in `group` is free. */
bool all_lanes_free(const std::string &group, pid_t pid)
{
    const std::string dir = "/dev/shm/ucx-pxn-" + std::to_string(geteuid()) +
                            "-" + group;
    DIR *d = opendir(dir.c_str());
    bool found = false, free = true;
    for (dirent *e; (d != nullptr) && ((e = readdir(d)) != nullptr);) {
        pxn::EntryName name;
        if (!pxn::parse_entry_name(e->d_name, &name) ||
            (name.pid != uint32_t(pid)) || (name.suffix != pxn::kSuffixControl)) {
            continue;
        }
        pxn::UniqueFd fd(openat(dirfd(d), e->d_name, O_RDWR));
        pxn::abi::ProcessHeader header;
        uint64_t bytes;
        pxn::SharedMapping map;
        if (!fd.valid() || !pxn::read_header(fd.get(), geteuid(), &header,
                                             &bytes).empty() ||
            (map.map(fd.get(), header.file_size, e->d_name) != UCS_OK)) {
            continue;
        }
        found = true;
        pxn::ControlView view;
        view.base     = map.data();
        view.geometry = pxn::header_geometry(header);
        for (uint32_t i = 0; i < view.geometry.lanes; ++i) {
            free = free && (pxn::abi::load_acquire(view.lane(i).owner().state) ==
                            pxn::abi::kLaneFree);
        }
    }
    if (d != nullptr) {
        closedir(d);
    }
    return found && free;
}

} // namespace

class PxnSafety : public ::testing::Test {
protected:
    void SetUp() override
    {
        const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
        group_ = std::string("sf") +
                 std::to_string(std::hash<std::string>()(info->name()) % 100000);
    }

    void TearDown() override
    {
        remove_tree(registry());
    }

    std::string registry(const std::string &base = "/dev/shm") const
    {
        return base + "/ucx-pxn-" + std::to_string(geteuid()) + "-" + group_;
    }

    /* ucp_idle with `env` on top of a clean pxn environment. */
    ChildResult idle(std::vector<std::string> env, int repeat = 1)
    {
        env.insert(env.begin(), {"UCX_PXN_ENABLE=", "UCX_TLS=",
                                 "UCX_PXN_GROUP=" + group_,
                                 "UCX_PXN_SLOT_SIZE=65536", "UCX_PXN_SLOTS=4"});
        return run_program({app("ucp_idle"), std::to_string(repeat)}, env);
    }

    static bool exists(const std::string &path)
    {
        struct stat st;
        return lstat(path.c_str(), &st) == 0;
    }

    std::string group_;
};

TEST_F(PxnSafety, ProgramThatDidNotAskForPxnGetsNoneOfIt)
{
    const ChildResult r = idle({});
    ASSERT_EQ(0, r.exit_code) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("worker ok")) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("pxn_threads 0")) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("registry no")) << r.output;
    EXPECT_EQ(std::string::npos, r.output.find("pxn:")) << r.output;
    EXPECT_FALSE(exists(registry()));

    /* ucx_info lists no pxn memory domain either */
    const ChildResult info = run_program({ucx_prefix() + "/bin/ucx_info", "-d"},
                                         {"UCX_PXN_ENABLE=", "UCX_TLS=",
                                          "UCX_PXN_GROUP=" + group_});
    EXPECT_EQ(0, info.exit_code);
    EXPECT_EQ(std::string::npos, info.output.find("pxn_")) << info.output;
    EXPECT_FALSE(exists(registry()));
}

TEST_F(PxnSafety, UcxTlsNamingPxnOrEnableTurnsItOn)
{
    for (const std::vector<std::string> &env :
         {std::vector<std::string>{"UCX_TLS=pxn,tcp"},
          std::vector<std::string>{"UCX_TLS=tcp,pxn:aux"},
          std::vector<std::string>{"UCX_PXN_ENABLE=y"}}) {
        const ChildResult r = idle(env);
        EXPECT_EQ(0, r.exit_code) << env[0] << "\n" << r.output;
        EXPECT_NE(std::string::npos, r.output.find("pxn_threads 1"))
                << env[0] << "\n" << r.output;
        EXPECT_NE(std::string::npos, r.output.find("registry yes"))
                << env[0] << "\n" << r.output;
        EXPECT_FALSE(exists(registry())) << env[0] << ": its last user left it";
    }
}

TEST_F(PxnSafety, AllOrAnExclusionDoesNotAskForPxn)
{
    for (const char *tls : {"UCX_TLS=all", "UCX_TLS=^pxn", "UCX_TLS=^tcp"}) {
        const ChildResult r = idle({tls, "UCX_PXN_ENABLE=auto"});
        EXPECT_EQ(0, r.exit_code) << tls << "\n" << r.output;
        EXPECT_NE(std::string::npos, r.output.find("pxn_threads 0"))
                << tls << "\n" << r.output;
        EXPECT_FALSE(exists(registry())) << tls;
    }
    const ChildResult off = idle({"UCX_TLS=pxn,tcp", "UCX_PXN_ENABLE=n"});
    EXPECT_NE(std::string::npos, off.output.find("pxn_threads 0")) << off.output;
}

TEST_F(PxnSafety, SquattedRegistryOfAnyKindLeavesUcpWorking)
{
    struct Squat {
        const char                 *what;
        std::function<void()>       make;
    };
    const std::string path = registry();
    std::vector<Squat> squats = {
        {"a file", [&] { std::ofstream(path) << "x"; }},
        {"a symlink", [&] { ASSERT_EQ(0, symlink("/tmp", path.c_str())); }},
        {"a directory others may write",
         [&] { ASSERT_EQ(0, mkdir(path.c_str(), 0700));
               ASSERT_EQ(0, chmod(path.c_str(), 0777)); }},
    };
    if (geteuid() == 0) {
        squats.push_back({"a directory of another uid", [&] {
            ASSERT_EQ(0, mkdir(path.c_str(), 0700));
            ASSERT_EQ(0, chown(path.c_str(), 4242, 4242));
        }});
    }
    for (const Squat &s : squats) {
        remove_tree(path);
        s.make();
        const ChildResult r = idle({"UCX_TLS=pxn,tcp"}, 2);
        EXPECT_EQ(0, r.exit_code) << s.what << "\n" << r.output;
        EXPECT_NE(std::string::npos, r.output.find("worker ok")) << s.what;
        EXPECT_NE(std::string::npos, r.output.find("pxn_threads 0"))
                << s.what << "\n" << r.output;
        /* one line, naming the path, for two contexts */
        EXPECT_EQ(1u, pxn_test::count_of(r.output, "refusing the registry " + path))
                << s.what << "\n" << r.output;
    }
    remove_tree(path);
}

TEST_F(PxnSafety, EveryBadSettingLeavesUcpWorkingWithOneLine)
{
    const std::vector<std::pair<std::string, std::string>> bad = {
        {"UCX_PXN_SLOTS=0", "UCX_PXN_SLOTS=0"},
        {"UCX_PXN_SLOTS=4294967300", "UCX_PXN_SLOTS=4294967300"},
        {"UCX_PXN_LANES=4294967297", "UCX_PXN_LANES=4294967297"},
        {"UCX_PXN_LANES=-1", "'-1'"},
        {"UCX_PXN_SLOTS=12abc", "'12abc'"},
        {"UCX_PXN_ROUTES=99999999999999999999999", "'99999999999999999999999'"},
        {"UCX_PXN_CUDA_DEVICE=4294967297", "'4294967297'"},
        {"UCX_PXN_REGISTRY_DIR=relative/dir", "UCX_PXN_REGISTRY_DIR='relative/dir'"},
        {"UCX_PXN_HOME_DEVICE=nosuch0", "UCX_PXN_HOME_DEVICE=nosuch0"},
        {"UCX_PXN_NET_TLS=no_such_tl", "UCX_PXN_NET_TLS=no_such_tl"},
    };
    for (const auto &b : bad) {
        const ChildResult r = idle({"UCX_TLS=pxn,tcp", b.first}, 2);
        EXPECT_EQ(0, r.exit_code) << b.first << "\n" << r.output;
        EXPECT_NE(std::string::npos, r.output.find("worker ok"))
                << b.first << "\n" << r.output;
        EXPECT_NE(std::string::npos, r.output.find("pxn_threads 0"))
                << b.first << "\n" << r.output;
        EXPECT_EQ(1u, pxn_test::count_of(r.output, b.second)) << b.first << "\n" << r.output;
        EXPECT_FALSE(exists(registry())) << b.first;
    }
}

TEST_F(PxnSafety, BadSettingsOfAJobThatDidNotAskForPxnStaySilent)
{
    for (const char *tls : {"UCX_TLS=tcp", "UCX_TLS="}) {
        const ChildResult r = idle({tls, "UCX_PXN_SLOTS=12abc",
                                    "UCX_PXN_GROUP=no/such/group"});
        EXPECT_EQ(0, r.exit_code) << tls << "\n" << r.output;
        EXPECT_NE(std::string::npos, r.output.find("worker ok")) << r.output;
        EXPECT_NE(std::string::npos, r.output.find("pxn_threads 0")) << r.output;
        /* no line of pxn's, no parse of its table (UCX's own check of
         * unused variables names them, as it names any transport's that
         * the job does not use) */
        EXPECT_EQ(std::string::npos, r.output.find("12abc")) << tls << "\n" << r.output;
        EXPECT_EQ(std::string::npos, r.output.find("pxn:")) << tls << "\n" << r.output;
        EXPECT_EQ(std::string::npos, r.output.find("no/such/group")) << r.output;
        EXPECT_EQ(std::string::npos, r.output.find("Invalid value")) << r.output;
    }
    /* asked for, the same settings are reported */
    const ChildResult asked = idle({"UCX_TLS=pxn,tcp", "UCX_PXN_SLOTS=12abc"});
    EXPECT_EQ(1u, pxn_test::count_of(asked.output, "'12abc'")) << asked.output;
}

TEST_F(PxnSafety, GpuArenaWithoutAGpuLeavesUcpWorking)
{
    const ChildResult probe = idle({"UCX_TLS=pxn,tcp"});
    if (probe.output.find("cuda") != std::string::npos) {
        GTEST_SKIP() << "a GPU is usable here";
    }
    const ChildResult r = idle({"UCX_TLS=pxn,tcp", "UCX_PXN_ARENA=cuda"}, 2);
    EXPECT_EQ(0, r.exit_code) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("worker ok")) << r.output;
    EXPECT_EQ(1u, pxn_test::count_of(r.output, "UCX_PXN_ARENA=cuda but")) << r.output;
}

/* A private mount namespace with a small tmpfs on /dev/shm (root only),
 * in a death-test child: nothing of it reaches the other tests. */
class PxnSmallShm : public PxnSafety {
protected:
    void SetUp() override
    {
        if (geteuid() != 0) {
            GTEST_SKIP() << "needs root: a private mount namespace";
        }
        PxnSafety::SetUp();
        ::testing::FLAGS_gtest_death_test_style = "threadsafe";
    }

    static void mount_shm(const char *size)
    {
        if ((unshare(CLONE_NEWNS) != 0) ||
            (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ||
            (mount("tmpfs", "/dev/shm", "tmpfs", 0,
                   (std::string("mode=1777,size=") + size).c_str()) != 0)) {
            fprintf(stderr, "cannot mount a private /dev/shm: %m\n");
            _exit(3);
        }
    }
};

TEST_F(PxnSmallShm, FourMiBShmLeavesUcpWorkingWithoutPxn)
{
    EXPECT_EXIT({
        mount_shm("4m");
        const ChildResult r = idle({"UCX_TLS=pxn,tcp"}, 2);
        fprintf(stderr, "%s", r.output.c_str());
        _exit(((r.exit_code == 0) &&
               (r.output.find("pxn_threads 0") != std::string::npos) &&
               (pxn_test::count_of(r.output, "/dev/shm holds 4 MiB in all") == 1)) ? 0 : 1);
    }, ::testing::ExitedWithCode(0), "");
}

TEST_F(PxnSmallShm, FullShmLeavesUcpWorkingWithoutPxn)
{
    EXPECT_EXIT({
        mount_shm("64m");
        {
            std::ofstream fill("/dev/shm/fill");
            const std::string mib(1 << 20, 'x');
            for (int i = 0; i < 63; ++i) {
                fill << mib;
            }
        }
        const ChildResult r = idle({"UCX_TLS=pxn,tcp"}, 2);
        fprintf(stderr, "%s", r.output.c_str());
        _exit(((r.exit_code == 0) &&
               (r.output.find("pxn_threads 0") != std::string::npos) &&
               (pxn_test::count_of(r.output, "MiB free, a relay needs") == 1)) ? 0 : 1);
    }, ::testing::ExitedWithCode(0), "");
}

TEST_F(PxnSmallShm, DefaultGeometryShrinksToFitA64MiBShm)
{
    EXPECT_EXIT({
        mount_shm("64m");
        /* the tests' small geometry unset: the default one must shrink */
        const ChildResult r = run_program({app("ucp_idle")},
                                          {"UCX_PXN_ENABLE=", "UCX_TLS=pxn,tcp",
                                           "UCX_PXN_GROUP=" + group_});
        fprintf(stderr, "%s", r.output.c_str());
        _exit(((r.exit_code == 0) &&
               (r.output.find("pxn_threads 1") != std::string::npos) &&
               (pxn_test::count_of(r.output, "staging geometry reduced") == 1)) ? 0 : 1);
    }, ::testing::ExitedWithCode(0), "");
}

/* The relay against senders that break the rules (cma, any user). */
class PxnHostileRelay : public PxnTransfer {
protected:
    void SetUp() override
    {
        const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
        group_ = std::string("hr") +
                 std::to_string(std::hash<std::string>()(info->name()) % 100000);
    }

    static uint64_t cpu_ticks(pid_t pid)
    {
        std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
        std::string text((std::istreambuf_iterator<char>(stat)), {});
        const size_t close = text.rfind(')');
        std::istringstream in(text.substr(close + 2));
        std::string field;
        uint64_t utime = 0, stime = 0;
        for (int i = 3; (i <= 15) && (in >> field); ++i) {
            if (i == 14) {
                utime = std::stoull(field);
            } else if (i == 15) {
                stime = std::stoull(field);
            }
        }
        return utime + stime;
    }
};

TEST_F(PxnHostileRelay, RouteToTheRelaysOwnProcessIsRefused)
{
    PeerProcess *relay  = cma_peer(0, "r1");
    PeerProcess *target = cma_peer(1, "r1");
    PeerProcess *sender = cma_peer(0, "r0");
    ASSERT_TRUE(relay && target && sender);
    /* the relay as the "target": its own memory through its inner cma. A
     * sender refuses a peer of its own node before it asks any relay
     * (uct_ep_create: unreachable); the relay's own refusal, for a sender
     * that asks anyway, is RelayRoutes.RouteToTheRelaysOwnProcessIsRefused. */
    const Target self = target_buffer(relay, 4096);
    EXPECT_EQ("err Destination is unreachable",
              sender->call("connect " + self.dev + " " + self.iface));
    const auto c = counters(0, relay);
    EXPECT_EQ(0u, c.relay.route_errors);
    /* and it goes on relaying for honest routes */
    const Target t = target_buffer(target, 65536);
    source_buffer(sender, 65536, 5);
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    EXPECT_EQ("Success", put(sender, t, 65536, 4096));
    EXPECT_EQ("ok", target->call("check 5 0 65536"));
}

TEST_F(PxnHostileRelay, SenderKilledBetweenCommitAndDoorbellNeitherSpinsNorKeepsItsLane)
{
    PeerProcess *relay = cma_peer(0, "r1");
    ASSERT_NE(nullptr, relay);
    BackgroundProcess dying;
    std::string error;
    ASSERT_TRUE(dying.start("", {}, {app("pxn_hostile_sender"), group(0), "node0",
                                     "r1", "commit"},
                            "/tmp/pxn-commit-" + group(0) + ".log", &error))
            << error;
    ASSERT_TRUE(dying.wait_for_output("committed lane", scaled_ms(10000)))
            << dying.output();
    dying.kill(SIGKILL);
    dying.wait(scaled_ms(5000));

    /* its lane is given back... */
    const bool freed = wait_until([&] {
        return all_lanes_free(group(0), relay->pid());
    }, 10);
    EXPECT_TRUE(freed) << "the dead sender's lane is still claimed";
    /* ...and the relay, with nothing to do, sleeps: < 10% of a core */
    const uint64_t before = cpu_ticks(relay->pid());
    hold_for(1.0, "CPU time of an idle relay over one second");
    const uint64_t ticks = cpu_ticks(relay->pid()) - before;
    EXPECT_LT(ticks, uint64_t(sysconf(_SC_CLK_TCK) / 10))
            << ticks << " ticks in one second";
}

} // namespace pxn_test
