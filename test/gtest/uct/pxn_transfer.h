/*
 * The fixture of the multi-process UCT tests: every process is a
 * ucx_pxn_peer (fork+exec), driven over pipes; every byte is verified
 * against a pattern, canaries around target buffers stay intact.
 *
 * tcp runs over the emulated rail-only topology (contrib/topology.sh, 2
 * nodes x 8 rails, prefix "pxnt", brought up per test suite); cma needs no
 * topology: processes tell their rails apart by UCX_PXN_RAIL_MAP. Each test
 * gets its own registry groups, removed afterwards.
 */
#ifndef PXN_TEST_UCT_PXN_TRANSFER_H_
#define PXN_TEST_UCT_PXN_TRANSFER_H_

#include <apps/peer_process.h>

#include "../common/test_helpers.h"

#include <gtest/gtest.h>
#include <ucs/type/status.h>

#include <csignal>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <functional>
#include <memory>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

namespace pxn_test {

using pxn_tools::PeerProcess;
using pxn_tools::split;

inline constexpr const char *kPrefix  = "pxnt";
inline constexpr size_t      kSlot    = 65536; /* UCX_PXN_SLOT_SIZE in these tests */
inline constexpr size_t      kSlots   = 4;     /* UCX_PXN_SLOTS */
/* UCX_PXN_HEARTBEAT_TIMEOUT of tcp_peer() and cma_peer(), in seconds: a
 * relay on a loaded 2-core machine (CI, make check running test programs
 * side by side) was seen to miss 1 s of heartbeats */
inline constexpr int         kHeartbeatTimeout = 2;

inline std::string topology_script()
{
    return pxn_test::source_dir() + "/contrib/topology.sh";
}

struct Target {
    std::string dev, iface, addr, rkey;
};

/* The usual three processes of a cross-rail put (PxnTransfer::cross_rail). */
struct CrossRail {
    PeerProcess *relay  = nullptr;
    PeerProcess *target = nullptr;
    PeerProcess *sender = nullptr; /* nullptr too if it could not connect */
    Target       t;
};

class PxnTransfer : public ::testing::Test {
protected:
    static void SetUpTestSuite() { up(kPrefix, 8, false); }
    static void TearDownTestSuite() { down(kPrefix); }

    static void up(const char *prefix, int rails, bool spine)
    {
        prefix_ = prefix;
        if (geteuid() != 0) {
            return;
        }
        std::vector<std::string> argv = {"/bin/bash", topology_script(), "up",
                                         "--nodes", "2", "--rails",
                                         std::to_string(rails), "--prefix",
                                         prefix};
        if (spine) {
            argv.push_back("--spine");
        }
        auto r = pxn_test::run_program(argv);
        topology_ok_  = (r.exit_code == 0);
        topology_log_ = r.output;
    }

    static void down(const char *prefix)
    {
        if (geteuid() == 0) {
            pxn_test::run_program({"/bin/bash", topology_script(), "down",
                                   "--prefix", prefix});
        }
    }

    void SetUp() override
    {
        if (geteuid() != 0) {
            GTEST_SKIP() << "needs root: the rail topology uses network namespaces";
        }
        ASSERT_TRUE(topology_ok_) << topology_log_;
        const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
        group_ = std::string("t") +
                 std::to_string(std::hash<std::string>()(info->name()) % 100000);
    }

    void TearDown() override
    {
        peers_.clear();
        for (int node = 0; node < 2; ++node) {
            pxn_test::run_program({"/bin/rm", "-rf", "/dev/shm/ucx-pxn-" +
                                   std::to_string(geteuid()) + "-" + group(node)});
        }
    }

    std::string group(int node) const
    {
        return group_ + "-node" + std::to_string(node);
    }

    /* A pxn process in slot (node, rail) of the topology, inner tcp. */
    PeerProcess *tcp_peer(int node, int rail, std::vector<std::string> env = {})
    {
        env.insert(env.begin(),
                   {"UCX_PXN_NODE_ID=node" + std::to_string(node),
                    "UCX_PXN_GROUP=" + group(node),
                    "UCX_PXN_HOME_DEVICE=rail" + std::to_string(rail),
                    "UCX_PXN_NET_TLS=tcp",
                    "UCX_PXN_SLOT_SIZE=" + std::to_string(kSlot),
                    "UCX_PXN_SLOTS=" + std::to_string(kSlots),
                    "UCX_PXN_HEARTBEAT_TIMEOUT=" +
                    std::to_string(kHeartbeatTimeout) + "s"});
        const std::string ns = prefix_ + "-n" + std::to_string(node) + "r" +
                               std::to_string(rail);
        return start(ns, env, "pxn_tcp", "front");
    }

    /* A pxn process over cma on this host, on rail `rail` of node `node`. */
    PeerProcess *cma_peer(int node, const std::string &rail)
    {
        return start("", {"UCX_PXN_NODE_ID=node" + std::to_string(node),
                          "UCX_PXN_GROUP=" + group(node), "UCX_PXN_NET_TLS=cma",
                          "UCX_PXN_RAIL_MAP=memory:" + rail,
                          "UCX_PXN_SLOT_SIZE=" + std::to_string(kSlot),
                          "UCX_PXN_SLOTS=" + std::to_string(kSlots),
                          "UCX_PXN_HEARTBEAT_TIMEOUT=" +
                          std::to_string(kHeartbeatTimeout) + "s"},
                     "pxn_cma", "memory");
    }

    PeerProcess *start(const std::string &ns, const std::vector<std::string> &env,
                       const std::string &md, const std::string &dev)
    {
        peers_.emplace_back(new PeerProcess());
        std::string error;
        if (!peers_.back()->start(pxn_test::app("ucx_pxn_peer"),
                                  ns, env, md, "pxn", dev, &error)) {
            ADD_FAILURE() << error;
            return nullptr;
        }
        return peers_.back().get();
    }

    Target target_buffer(PeerProcess *peer, size_t size)
    {
        Target t;
        auto info  = split(peer->call("info"));
        auto alloc = split(peer->call("alloc " + std::to_string(size)));
        EXPECT_EQ(4u, info.size());
        EXPECT_EQ(3u, alloc.size());
        if ((info.size() == 4) && (alloc.size() == 3)) {
            t = {info[1], info[2], alloc[1], alloc[2]};
        }
        return t;
    }

    void source_buffer(PeerProcess *peer, size_t size, int seed)
    {
        EXPECT_EQ("alloc", split(peer->call("alloc " + std::to_string(size)))[0]);
        EXPECT_EQ("ok", peer->call("fill " + std::to_string(seed)));
    }

    /* A relay on node 0 rail 1, a target on node 1 rail 1 with a buffer of
     * `size` bytes, and a sender on node 0 rail 0 with `size` bytes of
     * pattern `seed`, connected to the target; `env` for all three. */
    CrossRail cross_rail(size_t size, int seed,
                         const std::vector<std::string> &env = {})
    {
        CrossRail c;
        c.relay  = tcp_peer(0, 1, env);
        c.target = tcp_peer(1, 1, env);
        c.sender = tcp_peer(0, 0, env);
        if ((c.relay == nullptr) || (c.target == nullptr) || (c.sender == nullptr)) {
            return c;
        }
        c.t = target_buffer(c.target, size);
        source_buffer(c.sender, size, seed);
        const std::string reply = c.sender->call("connect " + c.t.dev + " " +
                                                 c.t.iface);
        if (reply != "ok") {
            ADD_FAILURE() << "connect: " << reply;
            c.sender = nullptr;
        }
        return c;
    }

    /* cross_rail() with cma peers (they have gets): relay node 0 rail r1,
     * target node 1 rail r1, sender node 0 rail r0. */
    CrossRail cma_cross_rail(size_t size, int seed)
    {
        CrossRail c;
        c.relay  = cma_peer(0, "r1");
        c.target = cma_peer(1, "r1");
        c.sender = cma_peer(0, "r0");
        if (!c.relay || !c.target || !c.sender) {
            return c;
        }
        c.t = target_buffer(c.target, size);
        source_buffer(c.sender, size, seed);
        EXPECT_EQ("ok", c.sender->call("connect " + c.t.dev + " " + c.t.iface));
        return c;
    }

    /* "done <status string> <ns> <ops>" -> status string */
    static std::string status_of(const std::string &done)
    {
        std::string status;
        return pxn_tools::parse_done(done, &status, nullptr) ? status : done;
    }

    std::string put(PeerProcess *sender, const Target &t, size_t bytes,
                    size_t chunk, size_t offset = 0,
                    const std::string &kind = "zcopy")
    {
        return status_of(sender->call("put " + kind + " " + t.addr + " " + t.rkey +
                                      " " + std::to_string(bytes) + " " +
                                      std::to_string(chunk) + " " +
                                      std::to_string(offset),
                                      pxn_test::scaled_ms(30000)));
    }

    pxn::abi::ProcessCounters counters(int node, PeerProcess *peer)
    {
        pxn::abi::ProcessCounters c = {};
        EXPECT_TRUE(pxn_tools::read_counters(group(node), peer->pid(), &c));
        return c;
    }

    using CountersCheck = std::function<bool(const pxn::abi::ProcessCounters&)>;

    /* Waits (bounded: timeout_s, scaled; polling every poll_s) until
     * `peer`'s registry entry on `node` exists and its counters pass `done`;
     * false on timeout. `peer` must not have been reaped (its pid is read at
     * the call). */
    bool wait_counters(int node, PeerProcess *peer, const CountersCheck &done,
                       double timeout_s = 10, double poll_s = 0.001)
    {
        const std::string g   = group(node);
        const pid_t       pid = peer->pid();
        return pxn_test::wait_until([&] {
            pxn::abi::ProcessCounters c = {};
            return pxn_tools::read_counters(g, pid, &c) && done(c);
        }, timeout_s, poll_s);
    }

    /* The published control file (p<pid>-<epoch>.ctl) of process `pid` in
     * the registry of `node`; "" if there is none (never published, or
     * removed by a registry cleanup). */
    std::string entry_path(int node, pid_t pid) const
    {
        const std::string dir = "/dev/shm/ucx-pxn-" + std::to_string(geteuid()) +
                                "-" + group(node);
        const std::string prefix = "p" + std::to_string(pid) + "-";
        std::string path;
        DIR *d = opendir(dir.c_str());
        for (dirent *e; (d != nullptr) && ((e = readdir(d)) != nullptr);) {
            const std::string name = e->d_name;
            if ((name.rfind(prefix, 0) == 0) && (name.size() > 4) &&
                (name.compare(name.size() - 4, 4, ".ctl") == 0)) {
                path = dir + "/" + name;
            }
        }
        if (d != nullptr) {
            closedir(d);
        }
        return path;
    }

    /* ProcessHeader::heartbeat_ns (CLOCK_MONOTONIC) of `pid`'s entry on
     * `node`; 0 if it has none. */
    uint64_t heartbeat_ns(int node, pid_t pid) const
    {
        const std::string path = entry_path(node, pid);
        const int fd = path.empty() ? -1 : open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            return 0;
        }
        void *map = mmap(nullptr, pxn::abi::kLaneOffset, PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        if (map == MAP_FAILED) {
            return 0;
        }
        const uint64_t beat = pxn::abi::load_acquire(
                static_cast<const pxn::abi::ProcessHeader*>(map)->heartbeat_ns);
        munmap(map, pxn::abi::kLaneOffset);
        return beat;
    }

    static uint64_t monotonic_ns()
    {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        return uint64_t(now.tv_sec) * 1000000000ull + uint64_t(now.tv_nsec);
    }

    /* The last heartbeat of relay `pid` on `node`, dead and reaped (killed
     * at killed_ns, CLOCK_MONOTONIC): its entry's heartbeat_ns, final now,
     * or killed_ns where a registry cleanup removed the entry already (its
     * last beat was no later). */
    uint64_t last_heartbeat(int node, pid_t pid, uint64_t killed_ns) const
    {
        const uint64_t beat = heartbeat_ns(node, pid);
        return (beat != 0) ? beat : killed_ns;
    }

    /* SIGKILLs `relay` (on `node`), reaps it, returns last_heartbeat(). */
    uint64_t kill_relay(int node, PeerProcess *relay)
    {
        const pid_t    pid    = relay->pid();
        const uint64_t killed = monotonic_ns();
        relay->kill(SIGKILL);
        EXPECT_NE(-1000, relay->wait(pxn_test::scaled_ms(5000))) << "not reaped";
        return last_heartbeat(node, pid, killed);
    }

    /* Until a dead relay's last heartbeat (last_beat_ns) is older than
     * kHeartbeatTimeout: what every process's health check then sees
     * (peer_mapping.h: is_healthy). Bounded. */
    static bool wait_heartbeat_stale(uint64_t last_beat_ns)
    {
        return pxn_test::wait_until([&] {
            return monotonic_ns() > last_beat_ns + kHeartbeatTimeout * 1000000000ull;
        }, kHeartbeatTimeout + 10.0);
    }

    void expect_healthy(int relay_node, PeerProcess *relay, size_t bytes)
    {
        const auto c = counters(relay_node, relay);
        EXPECT_GE(c.relay.bytes, bytes);
        EXPECT_EQ(0u, c.relay.rejected);
        EXPECT_EQ(0u, c.relay.failed_pieces);
        EXPECT_EQ(0u, c.sender.fallback_bytes);
    }

    static inline bool        topology_ok_ = false;
    static inline std::string topology_log_;
    static inline std::string prefix_;
    std::string        group_;
    std::vector<std::unique_ptr<PeerProcess>> peers_;
};

} // namespace pxn_test

#endif
