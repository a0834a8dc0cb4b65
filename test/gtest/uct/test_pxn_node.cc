/*
 * pxn in one process: however many workers and devices open pxn, the
 * process has one relay (registry entry, arena, engine thread) per home
 * rail. test/apps/multi_iface opens an iface on every pxn device in each of
 * several workers, like a UCP program that pins no device.
 */
#include <apps/peer_process.h>

#include "../common/test_helpers.h"
#include "pxn_transfer.h"

#include <ucs/pxn/control_file.h>

#include <gtest/gtest.h>

#include <dirent.h>
#include <fstream>
#include <sched.h>
#include <sstream>
#include <fcntl.h>
#include <set>
#include <unistd.h>

namespace pxn_test {

using pxn_tools::BackgroundProcess;

namespace {

/* Rails of the relays that process `pid` published in `group`. */
std::multiset<std::string> relays_of(const std::string &group, pid_t pid)
{
    std::multiset<std::string> rails;
    const std::string dir = "/dev/shm/ucx-pxn-" + std::to_string(geteuid()) +
                            "-" + group;
    DIR *d = opendir(dir.c_str());
    if (d == nullptr) {
        return rails;
    }
    for (dirent *e; (e = readdir(d)) != nullptr;) {
        pxn::EntryName name;
        if (!pxn::parse_entry_name(e->d_name, &name) ||
            (name.pid != uint32_t(pid)) || (name.suffix != pxn::kSuffixControl)) {
            continue;
        }
        const int fd = openat(dirfd(d), e->d_name, O_RDONLY);
        pxn::abi::ProcessHeader header;
        uint64_t bytes;
        if ((fd >= 0) && pxn::read_header(fd, geteuid(), &header, &bytes).empty()) {
            rails.insert(pxn::fixed_string(header.rail, sizeof(header.rail)));
        }
        if (fd >= 0) {
            close(fd);
        }
    }
    closedir(d);
    return rails;
}

std::vector<std::string> small_geometry()
{
    return {"UCX_PXN_SLOT_SIZE=65536", "UCX_PXN_SLOTS=4"};
}

} // namespace

class PxnNode : public PxnTransfer {
protected:
    void SetUp() override
    {
        const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
        group_ = std::string("nd") +
                 std::to_string(std::hash<std::string>()(info->name()) % 100000);
    }

    /* multi_iface with `workers` workers in `netns` ("" here) */
    BackgroundProcess *start(const std::string &netns, int workers,
                             std::vector<std::string> env)
    {
        env.push_back("UCX_PXN_GROUP=" + group_);
        for (const auto &e : small_geometry()) {
            env.push_back(e);
        }
        procs_.emplace_back(new BackgroundProcess());
        std::string error;
        if (!procs_.back()->start(netns, env,
                                  {app("multi_iface"), std::to_string(workers)},
                                  "/tmp/pxn-node-" + group_ + ".log", &error) ||
            !procs_.back()->wait_for_output("ready", 20000)) {
            ADD_FAILURE() << error << procs_.back()->output();
            return nullptr;
        }
        return procs_.back().get();
    }

    void TearDown() override
    {
        procs_.clear();
        remove_tree("/dev/shm/ucx-pxn-" + std::to_string(geteuid()) + "-" + group_);
    }

    std::vector<std::unique_ptr<BackgroundProcess>> procs_;
};

TEST_F(PxnNode, EveryWorkerOfAProcessSharesOneRelay)
{
    /* cma: one device; runs as any user */
    BackgroundProcess *p = start("", 3, {"UCX_PXN_NET_TLS=cma",
                                         "UCX_PXN_RAIL_MAP=memory:r0"});
    ASSERT_NE(nullptr, p);
    EXPECT_NE(std::string::npos, p->output().find("ready 3")) << p->output();
    EXPECT_EQ(std::multiset<std::string>{"r0"}, relays_of(group_, p->pid()));
}

TEST_F(PxnNode, IfacesOnEveryDeviceShareTheRelayOfTheHomeRail)
{
    if (geteuid() != 0) {
        GTEST_SKIP() << "needs root: the rail topology uses network namespaces";
    }
    ASSERT_TRUE(topology_ok_) << topology_log_;
    /* tcp in a slot of the topology: devices rail2 and front (at least) */
    BackgroundProcess *p = start(std::string(kPrefix) + "-n0r2", 2,
                                 {"UCX_PXN_NET_TLS=tcp",
                                  "UCX_PXN_HOME_DEVICE=rail2"});
    ASSERT_NE(nullptr, p);
    const std::string out = p->output();
    const int ifaces      = atoi(out.substr(out.find("ready") + 6).c_str());
    EXPECT_GE(ifaces, 4) << out; /* 2 workers x >= 2 devices */
    EXPECT_EQ(std::multiset<std::string>{"rail2"}, relays_of(group_, p->pid()));
}

TEST_F(PxnNode, WithoutAGpuEachDeviceIsItsOwnHomeRail)
{
    if (geteuid() != 0) {
        GTEST_SKIP() << "needs root: the rail topology uses network namespaces";
    }
    ASSERT_TRUE(topology_ok_) << topology_log_;
    BackgroundProcess *p = start(std::string(kPrefix) + "-n0r3", 2,
                                 {"UCX_PXN_NET_TLS=tcp"});
    ASSERT_NE(nullptr, p);
    /* "ready <n> <dev>,<dev>...": every device its own home rail, one relay
     * each, shared by both workers */
    std::string out = p->output();
    out = out.substr(out.find("ready"));
    out = out.substr(0, out.find('\n'));
    const std::vector<std::string> words = split(out);
    ASSERT_EQ(3u, words.size()) << out;
    std::multiset<std::string> devices;
    for (const std::string &d : split(words[2], ',')) {
        devices.insert(d);
    }
    EXPECT_GE(devices.size(), 2u) << out;
    EXPECT_NE(devices.end(), devices.find("rail3")) << out;
    EXPECT_EQ(devices, relays_of(group_, p->pid()));
}

} // namespace pxn_test

namespace pxn_test {
namespace {

std::string read_file(const std::string &path)
{
    std::ifstream file(path);
    return std::string((std::istreambuf_iterator<char>(file)), {});
}

/* The Cpus_allowed_list of a /proc status file. */
std::string cpus_allowed(const std::string &status_path)
{
    const std::string status = read_file(status_path);
    const size_t at          = status.find("Cpus_allowed_list:");
    if (at == std::string::npos) {
        return "";
    }
    const size_t from = status.find_first_not_of(" \t", at + 18);
    return status.substr(from, status.find('\n', from) - from);
}

/* /proc of the thread named ucx-pxn of `pid`: its Cpus_allowed_list and
 * nice value; false if there is none. */
bool engine_thread(pid_t pid, std::string *cpus, int *nice)
{
    const std::string task = pxn_tools::thread_dir(pid, "ucx-pxn");
    if (task.empty()) {
        return false;
    }
    *cpus = cpus_allowed(task + "/status");
    const std::string stat = read_file(task + "/stat");
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::string field;
    for (int i = 3; (i <= 19) && (fields >> field); ++i) {
        if (i == 19) {
            *nice = std::stoi(field);
        }
    }
    return true;
}

/* The last CPU this process may run on. */
int last_allowed_cpu()
{
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof(set), &set);
    int last = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        last = CPU_ISSET(cpu, &set) ? cpu : last;
    }
    return last;
}

} // namespace

TEST_F(PxnNode, EngineThreadTakesTheCpusAndNiceValueItIsGiven)
{
    const int cpu = last_allowed_cpu();
    BackgroundProcess *p = start("", 1, {"UCX_PXN_NET_TLS=cma", "UCX_PXN_RAIL_MAP=memory:r0",
                                         "UCX_PXN_ENGINE_CPUS=" + std::to_string(cpu),
                                         "UCX_PXN_ENGINE_NICE=5"});
    ASSERT_NE(nullptr, p);
    std::string cpus;
    int nice = -100;
    ASSERT_TRUE(engine_thread(p->pid(), &cpus, &nice)) << p->output();
    EXPECT_EQ(std::to_string(cpu), cpus);
    EXPECT_EQ(5, nice);
}

/* A list the process may not use (a cpuset or taskset elsewhere) leaves the
 * engine where the process is, and says so once. */
TEST_F(PxnNode, EngineThreadNeverLeavesTheProcesssCpus)
{
    BackgroundProcess *p = start("", 1, {"UCX_PXN_NET_TLS=cma", "UCX_PXN_RAIL_MAP=memory:r0",
                                         "UCX_PXN_ENGINE_CPUS=8000-8001"});
    ASSERT_NE(nullptr, p);
    std::string cpus;
    int nice = -100;
    ASSERT_TRUE(engine_thread(p->pid(), &cpus, &nice)) << p->output();
    EXPECT_EQ(cpus_allowed("/proc/" + std::to_string(p->pid()) + "/status"), cpus);
    EXPECT_FALSE(cpus.empty());
    /* The engine thread may say so after "ready": its line can sit in
     * stdout's buffer (a file) until the program ends (SIGTERM: it closes
     * UCT and returns). */
    p->kill(SIGTERM);
    EXPECT_EQ(0, p->wait(pxn_test::scaled_ms(10000))) << p->output();
    EXPECT_NE(std::string::npos, p->output().find("names none of them")) << p->output();
}

} // namespace pxn_test
