#include "registry_fixture.h"

#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

using pxn::abi::load_acquire;
using pxn::abi::load_relaxed;
using pxn::abi::store_relaxed;
using pxn_test::ChildChannel;
using pxn_test::ForkedChild;
using pxn_test::kForeignUid;
using pxn_test::RegistryTest;

TEST_F(RegistryTest, EntryNamesRoundTripAndForeignNamesAreRejected)
{
    pxn::EntryName parsed;
    const std::string name = pxn::entry_file_name(4242, 0xabcdef0123456789ull,
                                                  "ctl");
    EXPECT_EQ("p4242-abcdef0123456789.ctl", name);
    ASSERT_TRUE(pxn::parse_entry_name(name.c_str(), &parsed));
    EXPECT_EQ(4242u, parsed.pid);
    EXPECT_EQ(0xabcdef0123456789ull, parsed.epoch);
    EXPECT_EQ("ctl", parsed.suffix);
    for (const char *bad : {"", ".lock", "p-0123456789abcdef.ctl", "p12-0123.ctl",
                            "p12-0123456789ABCDEF.ctl", "p12-0123456789abcdef",
                            "p12-0123456789abcdef.", "q12-0123456789abcdef.ctl",
                            "p99999999999-0123456789abcdef.ctl",
                            "p12-0123456789abcdef0.ctl"}) {
        EXPECT_FALSE(pxn::parse_entry_name(bad, &parsed)) << bad;
    }
}

TEST_F(RegistryTest, RefusesInvalidGroupNames)
{
    for (const std::string &group :
         {std::string(""), std::string("."), std::string(".."), std::string("a/b"),
          std::string("a b"), std::string(65, 'g'), std::string("x\n")}) {
        pxn::Settings settings = settings_;
        settings.group         = group;
        pxn_test::LogCapture           log;
        std::unique_ptr<pxn::Registry> registry;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM,
                  pxn::Registry::open(settings, base_.path(), &registry))
                << "'" << group << "'";
        EXPECT_EQ(nullptr, registry);
        EXPECT_EQ(1u, log.messages().size()) << log.joined();
        EXPECT_TRUE(log.contains("UCX_PXN_GROUP")) << log.joined();
    }
    /* Nothing was created for them. */
    DIR *dir = opendir(base_.path().c_str());
    ASSERT_NE(nullptr, dir);
    int entries = 0;
    while (const struct dirent *de = readdir(dir)) {
        entries += (de->d_name[0] != '.');
    }
    closedir(dir);
    EXPECT_EQ(0, entries);
}

TEST_F(RegistryTest, CreatesAPrivateDirectoryAndPrivateFiles)
{
    settings_.group = "job-1.x_Y";
    dir_ = base_.path() + "/ucx-pxn-" + std::to_string(geteuid()) + "-job-1.x_Y";
    const mode_t old_umask = umask(0);
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    EXPECT_EQ(dir_, registry->path());
    EXPECT_EQ("node-a", registry->node_id());
    pxn::UniqueFd    arena;
    auto             entry = published_entry(registry.get(), &arena);
    pxn::RelayWakeup wakeup;
    {
        pxn_test::LogCapture log; /* immutable after publication */
        ASSERT_EQ(UCS_ERR_INVALID_PARAM,
                  entry->set_arena(pxn::abi::kArenaHostShm, "x", 2));
    }
    ASSERT_EQ(UCS_OK, entry->create_wakeup(&wakeup));
    umask(old_umask);

    struct stat st;
    ASSERT_EQ(0, lstat(dir_.c_str(), &st));
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(0700u, st.st_mode & 07777);
    const std::set<std::string> expected = {
            ".lock", entry->control_name(), entry->arena_name(), entry->wake_name()};
    EXPECT_EQ(expected, files());
    for (const auto &name : expected) {
        ASSERT_EQ(0, lstat((dir_ + "/" + name).c_str(), &st)) << name;
        EXPECT_EQ(0600u, st.st_mode & 07777) << name;
        EXPECT_EQ(geteuid(), st.st_uid) << name;
    }
}

TEST_F(RegistryTest, RefusesADirectoryOwnedByAnotherUid)
{
    if (geteuid() != 0) {
        GTEST_SKIP() << "needs root to chown";
    }
    ASSERT_EQ(0, mkdir(dir_.c_str(), 0700));
    ASSERT_EQ(0, chown(dir_.c_str(), kForeignUid, kForeignUid));
    pxn_test::LogCapture           log;
    std::unique_ptr<pxn::Registry> registry;
    EXPECT_EQ(UCS_ERR_REJECTED,
              pxn::Registry::open(settings_, base_.path(), &registry));
    EXPECT_EQ(1u, log.messages().size()) << log.joined();
    EXPECT_TRUE(log.contains("owned by uid 12345")) << log.joined();
}

TEST_F(RegistryTest, RefusesADirectoryWithGroupOrWorldAccess)
{
    ASSERT_EQ(0, mkdir(dir_.c_str(), 0700));
    for (mode_t mode : {0777, 0750, 0701, 0500}) {
        ASSERT_EQ(0, chmod(dir_.c_str(), mode));
        pxn_test::LogCapture           log;
        std::unique_ptr<pxn::Registry> registry;
        EXPECT_EQ(UCS_ERR_REJECTED,
                  pxn::Registry::open(settings_, base_.path(), &registry))
                << std::oct << mode;
        EXPECT_EQ(1u, log.messages().size()) << log.joined();
        EXPECT_TRUE(log.contains("expected 0700")) << log.joined();
    }
    ASSERT_EQ(0, chmod(dir_.c_str(), 0700));
    EXPECT_NE(nullptr, open_registry());
}

TEST_F(RegistryTest, RefusesASymlinkedDirectory)
{
    const std::string real = base_.path() + "/real";
    ASSERT_EQ(0, mkdir(real.c_str(), 0700));
    ASSERT_EQ(0, symlink(real.c_str(), dir_.c_str()));
    pxn_test::LogCapture           log;
    std::unique_ptr<pxn::Registry> registry;
    EXPECT_EQ(UCS_ERR_REJECTED,
              pxn::Registry::open(settings_, base_.path(), &registry));
    EXPECT_TRUE(log.contains("symlink")) << log.joined();

    /* A regular file in its place is refused the same way. */
    ASSERT_EQ(0, unlink(dir_.c_str()));
    ASSERT_EQ(0, close(open(dir_.c_str(), O_CREAT | O_WRONLY, 0600)));
    EXPECT_EQ(UCS_ERR_REJECTED,
              pxn::Registry::open(settings_, base_.path(), &registry));
}

TEST_F(RegistryTest, PublishesAnEntryOnlyAfterItIsComplete)
{
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    std::unique_ptr<pxn::RegistryEntry> entry;
    ASSERT_EQ(UCS_OK,
              registry->create_entry({"rail1", "mlx5_1", "rc_mlx5"}, &entry));
    EXPECT_FALSE(entry->is_published());
    EXPECT_EQ(pxn::abi::kProcessInit, load_acquire(entry->header().state));
    EXPECT_EQ(1u, files().count(entry->control_name()));
    EXPECT_EQ(0u, entry->control_name().find("p" + std::to_string(getpid()) + "-"));

    std::vector<pxn::PeerInfo> peers;
    ASSERT_EQ(UCS_OK, registry->discover(nullptr, &peers));
    EXPECT_TRUE(peers.empty());

    pxn::UniqueFd arena;
    ASSERT_EQ(UCS_OK, entry->create_host_arena(&arena));
    ASSERT_EQ(UCS_OK, entry->publish());
    EXPECT_TRUE(entry->is_published());
    EXPECT_EQ(std::set<std::string>(
                      {".lock", entry->control_name(), entry->arena_name()}),
              files());
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, entry->publish());

    ASSERT_EQ(UCS_OK, registry->discover(nullptr, &peers));
    ASSERT_EQ(1u, peers.size());
    const pxn::PeerInfo &peer = peers[0];
    EXPECT_EQ(entry->identity(), peer.identity);
    EXPECT_EQ("node-a", peer.node_id);
    EXPECT_EQ("rail1", peer.rail);
    EXPECT_EQ("mlx5_1", peer.device);
    EXPECT_EQ("rc_mlx5", peer.inner_tl);
    EXPECT_EQ(uint32_t(pxn::abi::kArenaHostShm), peer.arena_kind);
    EXPECT_EQ(settings_.geometry.arena_size(), peer.arena_size);
    EXPECT_STREQ(entry->arena_name().c_str(),
                 reinterpret_cast<const char*>(peer.arena_handle.data()));
    EXPECT_EQ(dir_ + "/" + entry->control_name(), peer.path);

    const pxn::abi::ProcessHeader &h = entry->header();
    EXPECT_EQ(pxn::abi::kMagic, h.magic);
    EXPECT_EQ(geteuid(), h.uid);
    EXPECT_EQ(pxn::abi::kLaneOffset, h.lane_offset);
    EXPECT_EQ(pxn::control_file_size(settings_.geometry), h.file_size);
    EXPECT_EQ(pxn::abi::lane_layout(4, 8).lane_stride, h.lane_stride);
    EXPECT_EQ(pxn::abi::lane_layout(4, 8).desc_stride, h.desc_stride);

    /* Its own incarnation is not a peer. */
    ASSERT_EQ(UCS_OK, registry->discover(&entry->identity(), &peers));
    EXPECT_TRUE(peers.empty());
}

TEST_F(RegistryTest, PublicationNeverReplacesAnExistingName)
{
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    const int dir = registry->dir_fd();
    for (bool use_renameat2 : {true, false}) {
        ASSERT_EQ(0, close(openat(dir, "a", O_CREAT | O_WRONLY, 0600)));
        ASSERT_EQ(0, close(openat(dir, "b", O_CREAT | O_WRONLY, 0600)));
        pxn_test::LogCapture log;
        EXPECT_EQ(UCS_ERR_ALREADY_EXISTS,
                  pxn::rename_no_replace(dir, "a", "b", use_renameat2));
        EXPECT_TRUE(log.contains("File exists")) << log.joined();
        ASSERT_EQ(0, unlinkat(dir, "b", 0));
        EXPECT_EQ(UCS_OK, pxn::rename_no_replace(dir, "a", "b", use_renameat2));
        EXPECT_EQ(std::set<std::string>({".lock", "b"}), files());
        ASSERT_EQ(0, unlinkat(dir, "b", 0));
    }
}

TEST_F(RegistryTest, OrderlyShutdownLeavesNoFiles)
{
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    {
        auto             entry = published_entry(registry.get());
        pxn::RelayWakeup wakeup;
        ASSERT_EQ(UCS_OK, entry->create_wakeup(&wakeup));
        EXPECT_EQ(4u, files().size());
        /* close() is idempotent; the destructor calls it again */
        entry->close();
        EXPECT_EQ(std::set<std::string>({".lock"}), files());
    }
    {
        /* An entry that never got published is removed too. */
        std::unique_ptr<pxn::RegistryEntry> entry;
        ASSERT_EQ(UCS_OK, registry->create_entry({"r", "d", "tcp"}, &entry));
        pxn::UniqueFd arena;
        ASSERT_EQ(UCS_OK, entry->create_host_arena(&arena));
    }
    EXPECT_EQ(std::set<std::string>({".lock"}), files());

    /* The same through a real process that exits orderly, */
    auto processes = start_processes(1);
    EXPECT_EQ(4u, files().size());
    EXPECT_EQ("bye", command(processes[0], "exit"));
    EXPECT_EQ(0, processes[0]->wait());
    EXPECT_EQ(std::set<std::string>({".lock"}), files());
    /* and the directory goes with its last user. */
    registry.reset();
    EXPECT_EQ(std::set<std::string>(), files());
}

TEST_F(RegistryTest, RestartedRelayGetsANewEpochAndName)
{
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    auto first = published_entry(registry.get());
    const pxn::ProcessIdentity old_identity = first->identity();
    const std::string          old_name     = first->control_name();
    first.reset();
    auto second = published_entry(registry.get());
    EXPECT_TRUE(second->identity().same_process(old_identity));
    EXPECT_NE(old_identity.epoch, second->identity().epoch);
    EXPECT_NE(old_name, second->control_name());
}

TEST_F(RegistryTest, TwoProcessesDiscoverEachOther)
{
    auto processes = start_processes(2);
    ASSERT_EQ(2u, processes.size());
    EXPECT_EQ("peers " + std::to_string(processes[1]->pid()),
              command(processes[0], "discover"));
    EXPECT_EQ("peers " + std::to_string(processes[0]->pid()),
              command(processes[1], "discover"));
}

TEST_F(RegistryTest, SigkilledProcessLosesItsEntryAndItsLanes)
{
    auto processes = start_processes(3);
    for (ForkedChild *child : processes) {
        EXPECT_EQ("claimed 2", command(child, "claim"));
    }
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    std::vector<pxn::PeerInfo> peers;
    ASSERT_EQ(UCS_OK, registry->discover(nullptr, &peers));
    ASSERT_EQ(3u, peers.size());
    EXPECT_EQ(3u * 3 + 1, files().size());

    const uint32_t victim = uint32_t(processes[1]->pid());
    processes[1]->kill(SIGKILL);
    EXPECT_EQ(-SIGKILL, processes[1]->wait());

    pxn::CleanupStats stats;
    ASSERT_EQ(UCS_OK, registry->cleanup(&stats));
    EXPECT_EQ(1u, stats.entries_removed);
    EXPECT_EQ(3u, stats.files_removed); /* ctl, arena, wake */
    EXPECT_EQ(2u, stats.lanes_freed);
    for (const auto &name : files()) {
        EXPECT_EQ(std::string::npos, name.find("p" + std::to_string(victim) + "-"))
                << name;
    }
    EXPECT_EQ(2u * 3 + 1, files().size());

    /* At the survivors, the victim's lane is FREE and the other survivor's
     * is still claimed. */
    for (const auto &peer : peers) {
        if (peer.identity.pid == victim) {
            continue;
        }
        std::unique_ptr<pxn::PeerMapping> mapping;
        ASSERT_EQ(UCS_OK, registry->map_peer(peer, &mapping));
        int claimed = 0;
        for (uint32_t i = 0; i < mapping->lanes(); ++i) {
            const pxn::LaneBlock lane = mapping->lane(i);
            if (load_acquire(lane.owner().state) == pxn::abi::kLaneClaimed) {
                ++claimed;
                EXPECT_NE(victim, pxn::lane_owner(lane).pid);
            }
        }
        EXPECT_EQ(1, claimed) << peer.name;
    }
    ASSERT_EQ(UCS_OK, registry->discover(nullptr, &peers));
    EXPECT_EQ(2u, peers.size());

    /* A second cleanup has nothing left to do. */
    ASSERT_EQ(UCS_OK, registry->cleanup(&stats));
    EXPECT_EQ(0u, stats.entries_removed + stats.files_removed + stats.lanes_freed);
}

TEST_F(RegistryTest, ReusedPidWithAnotherStartTimeIsStale)
{
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    /* This process is alive, but the entry claims it started at another
     * time: the pid was reused. */
    const uint64_t start = own_start_time();
    const auto     stale = header(getpid(), start + 1, 0x1111);
    const auto     live  = header(getpid(), start, 0x2222);
    write_entry(stale);
    write_entry(stale, pxn::kSuffixArena, 4096, 0);
    const std::string live_name = write_entry(live);

    std::vector<pxn::PeerInfo> peers;
    ASSERT_EQ(UCS_OK, registry->discover(nullptr, &peers));
    ASSERT_EQ(1u, peers.size());
    EXPECT_EQ(live_name, peers[0].name);

    pxn::CleanupStats stats;
    ASSERT_EQ(UCS_OK, registry->cleanup(&stats));
    EXPECT_EQ(1u, stats.entries_removed);
    EXPECT_EQ(2u, stats.files_removed);
    EXPECT_EQ(std::set<std::string>({".lock", live_name}), files());
}

TEST_F(RegistryTest, OpenRemovesEntriesOfDeadProcesses)
{
    auto keeper = open_registry(); /* creates the directory and keeps it */
    ASSERT_NE(nullptr, keeper);
    const uint32_t dead = dead_pid();
    auto published      = header(dead, 1, 0x10);
    auto initialising   = header(dead, 1, 0x20);
    initialising.state  = pxn::abi::kProcessInit;
    write_entry(published);
    write_entry(published, pxn::kSuffixWake, 0, 0);
    write_entry(initialising, pxn::kSuffixInit);
    /* a corrupt file of a dead pid: only the name can tell, and does */
    auto corrupt  = header(dead, 1, 0x30);
    corrupt.magic = 0;
    write_entry(corrupt, pxn::kSuffixControl, 100, 100);
    /* an arena whose control file is gone (relay killed while closing) */
    write_entry(header(dead, 1, 0x40), pxn::kSuffixArena, 4096, 0);
    /* the same for a live pid stays */
    const std::string kept = write_entry(header(getpid(), 1, 0x50),
                                         pxn::kSuffixArena, 4096, 0);
    EXPECT_EQ(7u, files().size());

    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    EXPECT_EQ(std::set<std::string>({".lock", kept}), files());
}

TEST_F(RegistryTest, RefusesAnEntryOfAnotherGeometryWithOneWarning)
{
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    pxn::Geometry other = settings_.geometry;
    other.slots         = 8;
    const std::string name =
            write_entry(header_for(other, getpid(), own_start_time(), 7));

    pxn_test::LogCapture       log;
    std::vector<pxn::PeerInfo> peers;
    ASSERT_EQ(UCS_OK, registry->discover(nullptr, &peers));
    ASSERT_EQ(UCS_OK, registry->discover(nullptr, &peers));
    EXPECT_TRUE(peers.empty());
    ASSERT_EQ(1u, log.messages().size()) << log.joined();
    EXPECT_TRUE(log.contains("geometry lanes=7 slots=8")) << log.joined();
    EXPECT_TRUE(log.contains(name)) << log.joined();

    /* Its owner is alive: cleanup leaves it alone. */
    ASSERT_EQ(UCS_OK, registry->cleanup());
    EXPECT_EQ(1u, files().count(name));
}

TEST_F(RegistryTest, RefusesAnEntryOfAnotherAbiVersion)
{
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    auto newer        = header(getpid(), own_start_time(), 8);
    newer.abi_version = pxn::abi::kAbiVersion + 1;
    auto bigger        = header(getpid(), own_start_time(), 9);
    bigger.header_size = sizeof(bigger) + 64;
    write_entry(newer);
    write_entry(bigger);

    pxn_test::LogCapture       log;
    std::vector<pxn::PeerInfo> peers;
    ASSERT_EQ(UCS_OK, registry->discover(nullptr, &peers));
    EXPECT_TRUE(peers.empty());
    EXPECT_EQ(2u, log.messages().size()) << log.joined();
    EXPECT_TRUE(log.contains("ABI version " +
                             std::to_string(pxn::abi::kAbiVersion + 1)))
            << log.joined();
    EXPECT_TRUE(log.contains("header 640 bytes")) << log.joined();
}

TEST_F(RegistryTest, RefusesCorruptAndTruncatedFilesWithoutCrashing)
{
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    const uint64_t start = own_start_time();
    const uint64_t size  = pxn::control_file_size(settings_.geometry);

    auto magic  = header(getpid(), start, 1);
    magic.magic = 0x4242;
    write_entry(magic);
    write_entry(header(getpid(), start, 2), pxn::kSuffixControl, 0, 0);
    write_entry(header(getpid(), start, 3), pxn::kSuffixControl, 100, 100);
    write_entry(header(getpid(), start, 4), pxn::kSuffixControl, int64_t(size / 2));
    write_entry(header(getpid(), start, 5), pxn::kSuffixControl,
                int64_t(size + 4096));
    auto lying      = header(getpid(), start, 6);
    lying.file_size = size * 1000; /* and the file really is that small */
    write_entry(lying, pxn::kSuffixControl, int64_t(size));
    auto stride        = header(getpid(), start, 7);
    stride.lane_stride = 64;
    write_entry(stride);
    /* a header that names another incarnation than its file name */
    const std::string misnamed = write_entry(header(getpid(), start, 8));
    ASSERT_EQ(0, rename(path(misnamed).c_str(), path(13).c_str()));
    auto foreign = header(getpid(), start, 9);
    foreign.uid  = kForeignUid;
    write_entry(foreign);
    /* Not regular files at all. */
    ASSERT_EQ(0, mkdir(path(10).c_str(), 0700));
    ASSERT_EQ(0, mkfifo(path(11).c_str(), 0600));
    ASSERT_EQ(0, symlink("/dev/zero", path(12).c_str()));

    pxn_test::LogCapture       log;
    std::vector<pxn::PeerInfo> peers;
    ASSERT_EQ(UCS_OK, registry->discover(nullptr, &peers));
    EXPECT_TRUE(peers.empty());
    for (const char *why :
         {"wrong magic", "smaller than a header", "truncated or padded",
          "inconsistent layout", "does not match the file name",
          "header says uid 12345", "not a regular file"}) {
        EXPECT_TRUE(log.contains(why)) << why << "\n" << log.joined();
    }
    EXPECT_EQ(11u, log.messages().size()) << log.joined();

    ASSERT_EQ(UCS_OK, registry->cleanup()); /* none of them is stale */
    EXPECT_EQ(13u, files().size());
}

TEST_F(RegistryTest, MapPeerRefusesAFileTruncatedAfterDiscovery)
{
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    const std::string name = write_entry(header(getpid(), own_start_time(), 1));
    std::vector<pxn::PeerInfo> peers;
    ASSERT_EQ(UCS_OK, registry->discover(nullptr, &peers));
    ASSERT_EQ(1u, peers.size());

    ASSERT_EQ(0, truncate((dir_ + "/" + name).c_str(), 8192));
    pxn_test::LogCapture              log;
    std::unique_ptr<pxn::PeerMapping> mapping;
    EXPECT_EQ(UCS_ERR_UNREACHABLE, registry->map_peer(peers[0], &mapping));
    EXPECT_EQ(nullptr, mapping);
    EXPECT_TRUE(log.contains("truncated")) << log.joined();

    /* Gone altogether. */
    ASSERT_EQ(0, unlink((dir_ + "/" + name).c_str()));
    EXPECT_EQ(UCS_ERR_UNREACHABLE, registry->map_peer(peers[0], &mapping));
}

TEST_F(RegistryTest, IgnoresFilesOfAnotherUidWithOneWarning)
{
    if (geteuid() != 0) {
        GTEST_SKIP() << "needs root to chown";
    }
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    const std::string name = write_entry(header(dead_pid(), 1, 1));
    ASSERT_EQ(0, chown((dir_ + "/" + name).c_str(), kForeignUid, kForeignUid));

    pxn_test::LogCapture       log;
    std::vector<pxn::PeerInfo> peers;
    ASSERT_EQ(UCS_OK, registry->discover(nullptr, &peers));
    ASSERT_EQ(UCS_OK, registry->cleanup());
    ASSERT_EQ(UCS_OK, registry->discover(nullptr, &peers));
    EXPECT_TRUE(peers.empty());
    ASSERT_EQ(1u, log.messages().size()) << log.joined();
    EXPECT_TRUE(log.contains("owned by uid 12345")) << log.joined();
    EXPECT_EQ(1u, files().count(name)); /* not ours to remove */
}

TEST_F(RegistryTest, SkipsOtherNodesStaleHeartbeatsAndClosingRelays)
{
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    const uint64_t start = own_start_time();
    auto other_node = header(getpid(), start, 1);
    strcpy(other_node.node_id, "node-b");
    auto old_heartbeat         = header(getpid(), start, 2);
    old_heartbeat.heartbeat_ns = 1;
    auto closing  = header(getpid(), start, 3);
    closing.state = pxn::abi::kProcessClosing;
    auto unterminated = header(getpid(), start, 4); /* strings fill their fields */
    memset(unterminated.rail, 'r', sizeof(unterminated.rail));
    memset(unterminated.inner_tl, 't', sizeof(unterminated.inner_tl));
    for (const auto &h : {other_node, old_heartbeat, closing, unterminated}) {
        write_entry(h);
    }

    pxn_test::LogCapture       log;
    std::vector<pxn::PeerInfo> peers;
    ASSERT_EQ(UCS_OK, registry->discover(nullptr, &peers));
    ASSERT_EQ(1u, peers.size());
    EXPECT_EQ(4u, peers[0].identity.epoch);
    EXPECT_EQ(std::string(64, 'r'), peers[0].rail);
    EXPECT_EQ(std::string(32, 't'), peers[0].inner_tl);
    EXPECT_TRUE(log.messages().empty()) << log.joined(); /* normal states: debug */
}

TEST_F(RegistryTest, HeartbeatAgeDecidesHealth)
{
    settings_.heartbeat_timeout = 0.5;
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    EXPECT_EQ(500000000u, registry->heartbeat_timeout_ns());
    auto entry   = published_entry(registry.get());
    auto mapping = map_only_peer(registry.get());
    ASSERT_NE(nullptr, mapping);
    EXPECT_TRUE(mapping->is_healthy());
    EXPECT_LT(mapping->heartbeat_age_ns(), 500000000u);

    /* A relay that stopped heart-beating a second ago. */
    pxn::abi::store_release(entry->header().heartbeat_ns,
                            uint64_t(pxn::monotonic_ns() - 1000000000ull));
    EXPECT_GE(mapping->heartbeat_age_ns(), 1000000000u);
    EXPECT_FALSE(mapping->is_healthy());
    std::vector<pxn::PeerInfo> peers;
    ASSERT_EQ(UCS_OK, registry->discover(nullptr, &peers));
    EXPECT_TRUE(peers.empty());

    entry->heartbeat();
    EXPECT_TRUE(mapping->is_healthy());
    ASSERT_EQ(UCS_OK, registry->discover(nullptr, &peers));
    EXPECT_EQ(1u, peers.size());
}

TEST_F(RegistryTest, ControlFileSizeFollowsTheLaneLayout)
{
    const pxn::Geometry defaults;
    const auto          layout = pxn::abi::lane_layout(defaults.slots,
                                                       defaults.max_plan);
    EXPECT_EQ(pxn::abi::kLaneOffset + 7 * layout.lane_stride,
              pxn::control_file_size(defaults));
    EXPECT_EQ(0u, layout.lane_stride % 4096);

    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    auto entry = published_entry(registry.get());
    struct stat st;
    ASSERT_EQ(0, stat((dir_ + "/" + entry->control_name()).c_str(), &st));
    EXPECT_EQ(off_t(pxn::control_file_size(settings_.geometry)), st.st_size);
    /* lanes are laid out back to back after the header page */
    EXPECT_EQ(entry->lane(0).base() + entry->header().lane_stride,
              entry->lane(1).base());
    EXPECT_EQ(reinterpret_cast<uint8_t*>(&entry->header()) + pxn::abi::kLaneOffset,
              entry->lane(0).base());
    const pxn::LaneBlock lane = entry->lane(6);
    EXPECT_LE(reinterpret_cast<uint8_t*>(lane.plans(3) + 8),
              reinterpret_cast<uint8_t*>(&entry->header()) + st.st_size);
}

} // namespace
