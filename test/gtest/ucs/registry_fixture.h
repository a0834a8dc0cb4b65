/*
 * Fixture shared by the registry tests (test_registry.cc, test_lane_claim.cc):
 * a private base directory per test (removed afterwards), a small geometry,
 * forked pxn processes driven over pipes (killed and reaped in TearDown),
 * and hand-written control files.
 */
#ifndef PXN_TEST_REGISTRY_FIXTURE_H_
#define PXN_TEST_REGISTRY_FIXTURE_H_

#include <ucs/pxn/control_file.h>
#include <ucs/pxn/lane_claim.h>
#include <ucs/pxn/peer_mapping.h>
#include <ucs/pxn/registry.h>
#include <ucs/pxn/registry_entry.h>
#include <ucs/pxn/registry_lease.h>

#include "../common/test_helpers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <memory>
#include <set>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace pxn_test {

constexpr uint32_t kForeignUid = 12345;

/*
 * A pxn process: relay entry published (arena and wakeup included), then
 * commands from the test, one line each:
 *   discover  -> "peers <pid>..."
 *   claim     -> claims a lane at every discovered peer: "claimed <n>"
 *   scribble  -> writes counters and seq fields into its claimed lanes
 *   exit      -> orderly shutdown (lanes released, files removed): "bye"
 * Heartbeats every 50 ms while it waits.
 */
int pxn_process(const pxn::Settings &settings, const std::string &base,
                ChildChannel &channel);

class RegistryTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_FALSE(base_.path().empty());
        const auto *test = ::testing::UnitTest::GetInstance()->current_test_info();
        settings_.group  = test->name();
        settings_.group.resize(std::min<size_t>(settings_.group.size(), 64));
        settings_.node_id            = "node-a";
        settings_.net_tls            = {"tcp"};
        settings_.geometry.lanes     = 7;
        settings_.geometry.slots     = 4;
        settings_.geometry.slot_size = 4096;
        settings_.geometry.max_plan  = 8;
        /* Generous: valgrind slows the children down. Stale heartbeats are
         * tested with explicit old values. */
        settings_.heartbeat_timeout = 30.0;
        dir_ = base_.path() + "/ucx-pxn-" + std::to_string(geteuid()) + "-" +
               settings_.group;
    }

    void TearDown() override { children_.clear(); }

    std::unique_ptr<pxn::Registry> open_registry()
    {
        std::unique_ptr<pxn::Registry> registry;
        EXPECT_EQ(UCS_OK, pxn::Registry::open(settings_, base_.path(), &registry));
        return registry;
    }

    ForkedChild &start_child(const std::function<int(ChildChannel&)> &body)
    {
        children_.emplace_back(new ForkedChild());
        EXPECT_TRUE(children_.back()->start(body));
        return *children_.back();
    }

    /* Starts pxn_process() children and waits until each has published. */
    std::vector<ForkedChild*> start_processes(int count)
    {
        const pxn::Settings settings = settings_;
        const std::string   base     = base_.path();
        std::vector<ForkedChild*> started;
        for (int i = 0; i < count; ++i) {
            started.push_back(&start_child([settings, base](ChildChannel &channel) {
                return pxn_process(settings, base, channel);
            }));
        }
        for (ForkedChild *child : started) {
            std::string line;
            EXPECT_TRUE(child->receive(&line)) << "child " << child->pid();
            EXPECT_EQ(0u, line.find("ready ")) << line;
        }
        return started;
    }

    std::string command(ForkedChild *child, const std::string &line)
    {
        std::string reply;
        EXPECT_TRUE(child->send(line));
        EXPECT_TRUE(child->receive(&reply)) << line << " to " << child->pid();
        return reply;
    }

    /* The names in the registry directory but .users (registry_lease.h:
     * test_registry_lease.cc tests it); none when there is no directory. */
    std::set<std::string> files() const
    {
        std::set<std::string> names;
        DIR                  *dir = opendir(dir_.c_str());
        if (dir == nullptr) {
            return names;
        }
        while (const struct dirent *de = readdir(dir)) {
            if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
                strcmp(de->d_name, pxn::kUsersName)) {
                names.insert(de->d_name);
            }
        }
        closedir(dir);
        return names;
    }

    /* A header as a relay of this test's geometry would write it. */
    pxn::abi::ProcessHeader header(uint32_t pid, uint64_t start_time,
                                   uint64_t epoch) const
    {
        return header_for(settings_.geometry, pid, start_time, epoch);
    }

    pxn::abi::ProcessHeader header_for(const pxn::Geometry &g, uint32_t pid,
                                       uint64_t start_time, uint64_t epoch) const
    {
        pxn::abi::ProcessHeader h;
        memset(&h, 0, sizeof(h));
        const auto layout = pxn::abi::lane_layout(g.slots, g.max_plan);
        h.magic           = pxn::abi::kMagic;
        h.abi_version     = pxn::abi::kAbiVersion;
        h.header_size     = sizeof(h);
        h.uid             = geteuid();
        h.pid             = pid;
        h.start_time      = start_time;
        h.epoch           = epoch;
        strcpy(h.node_id, settings_.node_id.c_str());
        strcpy(h.rail, "rail9");
        strcpy(h.device, "dev9");
        strcpy(h.inner_tl, "tcp");
        h.lanes        = g.lanes;
        h.slots        = g.slots;
        h.slot_size    = g.slot_size;
        h.max_plan     = g.max_plan;
        h.arena_kind   = pxn::abi::kArenaHostShm;
        h.arena_size   = g.arena_size();
        h.lane_offset  = pxn::abi::kLaneOffset;
        h.lane_stride  = layout.lane_stride;
        h.desc_stride  = layout.desc_stride;
        h.file_size    = pxn::control_file_size(g);
        h.state        = pxn::abi::kProcessReady;
        h.heartbeat_ns = pxn::monotonic_ns();
        return h;
    }

    /* Writes a control file by hand: `bytes` of the header (all of it by
     * default), the file sized to `size` (h.file_size by default). */
    std::string write_entry(const pxn::abi::ProcessHeader &h,
                            const char *suffix = pxn::kSuffixControl,
                            int64_t size = -1, size_t bytes = sizeof(h))
    {
        const std::string name = pxn::entry_file_name(h.pid, h.epoch, suffix);
        const std::string path = dir_ + "/" + name;
        const int fd = open(path.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
        EXPECT_GE(fd, 0) << path << ": " << strerror(errno);
        EXPECT_EQ(ssize_t(bytes), write(fd, &h, bytes));
        EXPECT_EQ(0, ftruncate(fd, (size < 0) ? off_t(h.file_size) : off_t(size)));
        close(fd);
        return name;
    }

    /* Full path of a file of the registry directory. */
    std::string path(const std::string &name) const { return dir_ + "/" + name; }
    /* ... and of the control file of this process with that epoch. */
    std::string path(uint64_t epoch) const
    {
        return path(pxn::entry_file_name(getpid(), epoch, pxn::kSuffixControl));
    }

    uint64_t own_start_time() const
    {
        uint64_t start = 0;
        EXPECT_EQ(UCS_OK, pxn::process_start_time(getpid(), &start));
        return start;
    }

    /* pid of a process that has exited and been reaped. */
    uint32_t dead_pid()
    {
        ForkedChild child;
        EXPECT_TRUE(child.start([](ChildChannel&) { return 0; }));
        const int pid = child.pid();
        EXPECT_EQ(0, child.wait());
        return uint32_t(pid);
    }

    std::unique_ptr<pxn::RegistryEntry>
    published_entry(pxn::Registry *registry, pxn::UniqueFd *arena = nullptr)
    {
        std::unique_ptr<pxn::RegistryEntry> entry;
        EXPECT_EQ(UCS_OK,
                  registry->create_entry({"rail1", "mlx5_1", "tcp"}, &entry));
        if (entry == nullptr) {
            return entry;
        }
        pxn::UniqueFd fd;
        EXPECT_EQ(UCS_OK,
                  entry->create_host_arena((arena != nullptr) ? arena : &fd));
        EXPECT_EQ(UCS_OK, entry->publish());
        return entry;
    }

    /* Discovers exactly one peer (the caller's own entry, typically) and
     * maps it. */
    std::unique_ptr<pxn::PeerMapping> map_only_peer(pxn::Registry *registry)
    {
        std::vector<pxn::PeerInfo> peers;
        EXPECT_EQ(UCS_OK, registry->discover(nullptr, &peers));
        EXPECT_EQ(1u, peers.size());
        std::unique_ptr<pxn::PeerMapping> mapping;
        if (peers.size() == 1) {
            EXPECT_EQ(UCS_OK, registry->map_peer(peers[0], &mapping));
        }
        return mapping;
    }

    /* Another sender incarnation of this process (epoch differs from any
     * entry's). */
    pxn::ProcessIdentity sender_identity()
    {
        pxn::ProcessIdentity id;
        EXPECT_EQ(UCS_OK, pxn::current_process(&id));
        return id;
    }

    pxn_test::TempDir                         base_;
    pxn::Settings                             settings_;
    std::string                               dir_;
    std::vector<std::unique_ptr<ForkedChild>> children_;
};

} // namespace pxn_test

#endif
