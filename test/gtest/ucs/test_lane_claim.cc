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

/* Lane claims, peer mappings and what a sender opens through them. */
class RegistryLaneTest : public RegistryTest {
};

TEST_F(RegistryLaneTest, EightProcessesClaimDistinctLanesAndAFullRelayRefuses)
{
    constexpr int kProcesses = 8;
    auto          processes  = start_processes(kProcesses);
    /* All claim at the same time: 8 x 7 claims race for the lock. */
    for (ForkedChild *child : processes) {
        ASSERT_TRUE(child->send("claim"));
    }
    for (ForkedChild *child : processes) {
        std::string reply;
        ASSERT_TRUE(child->receive(&reply));
        EXPECT_EQ("claimed 7", reply) << child->pid();
    }

    std::set<uint32_t> pids;
    for (ForkedChild *child : processes) {
        pids.insert(uint32_t(child->pid()));
    }
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    std::vector<pxn::PeerInfo> peers;
    ASSERT_EQ(UCS_OK, registry->discover(nullptr, &peers));
    ASSERT_EQ(size_t(kProcesses), peers.size());

    const pxn::ProcessIdentity outsider = sender_identity();
    std::set<uint64_t>         lane_epochs;
    for (const auto &peer : peers) {
        std::unique_ptr<pxn::PeerMapping> mapping;
        ASSERT_EQ(UCS_OK, registry->map_peer(peer, &mapping));
        std::set<uint32_t> owners;
        for (uint32_t i = 0; i < mapping->lanes(); ++i) {
            const pxn::LaneBlock lane = mapping->lane(i);
            EXPECT_EQ(pxn::abi::kLaneClaimed, load_acquire(lane.owner().state));
            const pxn::ProcessIdentity owner = pxn::lane_owner(lane);
            EXPECT_NE(peer.identity.pid, owner.pid) << "a relay owns its own lane";
            EXPECT_EQ(1u, pids.count(owner.pid));
            EXPECT_TRUE(owners.insert(owner.pid).second)
                    << "pid " << owner.pid << " holds two lanes of " << peer.name;
            EXPECT_TRUE(pxn::is_alive(owner.pid, owner.start_time));
            EXPECT_NE(0u, owner.epoch);
            const uint64_t epoch = load_relaxed(lane.owner().lane_epoch);
            EXPECT_TRUE(lane_epochs.insert(epoch).second);
        }
        EXPECT_EQ(7u, owners.size());

        /* A ninth sender finds this relay full. */
        pxn::LaneClaim claim;
        EXPECT_EQ(UCS_ERR_NO_RESOURCE, mapping->claim_lane(outsider, &claim));
    }
    EXPECT_EQ(size_t(kProcesses * 7), lane_epochs.size());
}

TEST_F(RegistryLaneTest, SameSenderReclaimingGetsItsLaneBackUnchanged)
{
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    auto entry   = published_entry(registry.get());
    auto mapping = map_only_peer(registry.get());
    ASSERT_NE(nullptr, mapping);
    const pxn::ProcessIdentity sender = sender_identity();

    pxn::LaneClaim first, again;
    ASSERT_EQ(UCS_OK, mapping->claim_lane(sender, &first, 10));
    EXPECT_FALSE(first.resumed);
    EXPECT_EQ(10u, first.initial_seq);
    const pxn::LaneBlock lane = mapping->lane(first.index);
    EXPECT_EQ(10u, load_relaxed(lane.producer().head));
    store_relaxed(lane.producer().head, uint64_t(15));

    ASSERT_EQ(UCS_OK, mapping->claim_lane(sender, &again, 99));
    EXPECT_TRUE(again.resumed);
    EXPECT_EQ(first.index, again.index);
    EXPECT_EQ(first.lane_epoch, again.lane_epoch);
    EXPECT_EQ(10u, again.initial_seq);
    EXPECT_EQ(15u, load_relaxed(lane.producer().head));

    /* The relay sees the same lane through its own mapping. */
    const pxn::LaneBlock own = entry->lane(first.index);
    EXPECT_EQ(first.lane_epoch, load_acquire(own.owner().lane_epoch));
    EXPECT_EQ(sender, pxn::lane_owner(own));
    EXPECT_EQ(15u, load_relaxed(own.producer().head));

    /* Another incarnation of the same process is another sender. */
    pxn::LaneClaim other;
    ASSERT_EQ(UCS_OK, mapping->claim_lane(sender_identity(), &other));
    EXPECT_NE(first.index, other.index);
}

TEST_F(RegistryLaneTest, RestartedSenderGetsANewLaneEpochAndResetCounters)
{
    settings_.geometry.lanes = 1;
    auto processes = start_processes(2); /* relay R and sender S1 */
    EXPECT_EQ("claimed 1", command(processes[1], "claim"));
    EXPECT_EQ("scribbled", command(processes[1], "scribble"));

    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    std::vector<pxn::PeerInfo> peers;
    ASSERT_EQ(UCS_OK, registry->discover(nullptr, &peers));
    ASSERT_EQ(2u, peers.size());
    const bool           first = (peers[0].identity.pid ==
                                  uint32_t(processes[0]->pid()));
    const pxn::PeerInfo &relay = first ? peers[0] : peers[1];
    std::unique_ptr<pxn::PeerMapping> mapping;
    ASSERT_EQ(UCS_OK, registry->map_peer(relay, &mapping));
    const pxn::LaneBlock lane      = mapping->lane(0);
    const uint64_t       old_epoch = load_relaxed(lane.owner().lane_epoch);
    EXPECT_EQ(uint32_t(processes[1]->pid()), pxn::lane_owner(lane).pid);
    EXPECT_EQ(7u, load_relaxed(lane.producer().head));

    /* While S1 lives, its lane is not for anyone else. */
    const pxn::ProcessIdentity restarted = sender_identity();
    pxn::LaneClaim             claim;
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, mapping->claim_lane(restarted, &claim));

    processes[1]->kill(SIGKILL);
    EXPECT_EQ(-SIGKILL, processes[1]->wait());
    /* No cleanup in between: the claim itself sees the dead owner. */
    ASSERT_EQ(UCS_OK, mapping->claim_lane(restarted, &claim, 100));
    EXPECT_EQ(0u, claim.index);
    EXPECT_FALSE(claim.resumed);
    EXPECT_NE(old_epoch, claim.lane_epoch);
    EXPECT_NE(0u, claim.lane_epoch);
    EXPECT_EQ(restarted, pxn::lane_owner(lane));
    EXPECT_EQ(claim.lane_epoch, load_acquire(lane.owner().lane_epoch));
    EXPECT_EQ(100u, load_relaxed(lane.owner().initial_seq));
    EXPECT_EQ(100u, load_relaxed(lane.producer().head));
    EXPECT_EQ(100u, load_relaxed(lane.producer().doorbell));
    EXPECT_EQ(100u, load_relaxed(lane.producer().reaped));
    EXPECT_EQ(100u, load_relaxed(lane.consumer().consumed));
    EXPECT_EQ(100u, load_relaxed(lane.consumer().completed));
    /* not yet acknowledged by the relay */
    EXPECT_EQ(0u, load_relaxed(lane.consumer().lane_epoch));
    EXPECT_EQ(0u, load_relaxed(lane.descriptor(0).seq));
    EXPECT_EQ(0u, load_relaxed(lane.completion(0).seq));
    EXPECT_EQ(0u, load_relaxed(lane.rkey(3).gen));
}

TEST_F(RegistryLaneTest, NeverClaimsALaneOfItsOwnEntry)
{
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    auto entry   = published_entry(registry.get());
    auto mapping = map_only_peer(registry.get());
    ASSERT_NE(nullptr, mapping);

    pxn_test::LogCapture log;
    pxn::LaneClaim       claim;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, mapping->claim_lane(entry->identity(), &claim));
    EXPECT_TRUE(log.contains("its own registry entry")) << log.joined();
    for (uint32_t i = 0; i < mapping->lanes(); ++i) {
        EXPECT_EQ(pxn::abi::kLaneFree, load_acquire(mapping->lane(i).owner().state));
    }
}

TEST_F(RegistryLaneTest, RenewGivesTheOwnerANewLaneEpochOnTheSameLane)
{
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    auto entry   = published_entry(registry.get());
    auto mapping = map_only_peer(registry.get());
    ASSERT_NE(nullptr, mapping);
    const pxn::ProcessIdentity sender = sender_identity();
    pxn::LaneClaim             claim, renewed;
    ASSERT_EQ(UCS_OK, mapping->claim_lane(sender, &claim));
    store_relaxed(mapping->lane(claim.index).producer().head, uint64_t(1000));

    ASSERT_EQ(UCS_OK, mapping->renew_lane(sender, claim.index, &renewed, 0));
    EXPECT_EQ(claim.index, renewed.index);
    EXPECT_NE(claim.lane_epoch, renewed.lane_epoch);
    EXPECT_EQ(0u, load_relaxed(mapping->lane(claim.index).producer().head));

    EXPECT_EQ(UCS_ERR_NO_ELEM,
              mapping->renew_lane(sender_identity(), claim.index, &renewed));
    EXPECT_EQ(UCS_ERR_NO_ELEM,
              mapping->renew_lane(sender, claim.index + 1, &renewed));
    EXPECT_EQ(UCS_ERR_NO_ELEM, mapping->renew_lane(sender, 1000, &renewed));
}

TEST_F(RegistryLaneTest, RenewalForASeqWrapKeepsRoutesAndRkeysOthersClearThem)
{
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    auto entry   = published_entry(registry.get());
    auto mapping = map_only_peer(registry.get());
    ASSERT_NE(nullptr, mapping);
    const pxn::ProcessIdentity sender = sender_identity();
    pxn::LaneClaim             claim, renewed;
    ASSERT_EQ(UCS_OK, mapping->claim_lane(sender, &claim));
    const pxn::LaneBlock lane = mapping->lane(claim.index);
    EXPECT_EQ(0u, load_relaxed(lane.owner().flags));
    store_relaxed(lane.route(3).request.request_gen, uint64_t(5));
    store_relaxed(lane.route(3).reply.reply_gen, uint64_t(5));
    store_relaxed(lane.rkey(7).gen, uint64_t(9));
    store_relaxed(lane.producer().head, uint64_t(40));

    ASSERT_EQ(UCS_OK, mapping->renew_lane(sender, claim.index, &renewed, 0, true));
    EXPECT_NE(claim.lane_epoch, renewed.lane_epoch);
    EXPECT_EQ(uint32_t(pxn::abi::kLaneKeepRoutes), load_relaxed(lane.owner().flags));
    EXPECT_EQ(5u, load_relaxed(lane.route(3).request.request_gen));
    EXPECT_EQ(5u, load_relaxed(lane.route(3).reply.reply_gen));
    EXPECT_EQ(9u, load_relaxed(lane.rkey(7).gen));
    EXPECT_EQ(0u, load_relaxed(lane.producer().head));

    ASSERT_EQ(UCS_OK, mapping->renew_lane(sender, claim.index, &renewed));
    EXPECT_EQ(0u, load_relaxed(lane.owner().flags));
    EXPECT_EQ(0u, load_relaxed(lane.route(3).request.request_gen));
    EXPECT_EQ(0u, load_relaxed(lane.route(3).reply.reply_gen));
    EXPECT_EQ(0u, load_relaxed(lane.rkey(7).gen));
}

TEST_F(RegistryLaneTest, ReleasedLaneIsFreeAndOnlyItsOwnerCanReleaseIt)
{
    settings_.geometry.lanes = 1;
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    auto entry   = published_entry(registry.get());
    auto mapping = map_only_peer(registry.get());
    ASSERT_NE(nullptr, mapping);
    const pxn::ProcessIdentity a = sender_identity(), b = sender_identity();
    pxn::LaneClaim             claim;
    ASSERT_EQ(UCS_OK, mapping->claim_lane(a, &claim));
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, mapping->claim_lane(b, &claim));
    EXPECT_EQ(UCS_ERR_NO_ELEM, mapping->release_lane(b, 0));
    EXPECT_EQ(UCS_ERR_NO_ELEM, mapping->release_lane(a, 5));

    ASSERT_EQ(UCS_OK, mapping->release_lane(a, 0));
    const pxn::LaneBlock lane = entry->lane(0);
    EXPECT_EQ(pxn::abi::kLaneFree, load_acquire(lane.owner().state));
    EXPECT_EQ(0u, pxn::lane_owner(lane).pid);
    EXPECT_EQ(claim.lane_epoch, load_relaxed(lane.owner().lane_epoch));
    EXPECT_EQ(UCS_ERR_NO_ELEM, mapping->release_lane(a, 0));

    ASSERT_EQ(UCS_OK, mapping->claim_lane(b, &claim));
    EXPECT_EQ(b, pxn::lane_owner(lane));
}

TEST_F(RegistryLaneTest, ClaimPrefersAFreeLaneWhoseMemoryIsStillBacked)
{
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    auto entry   = published_entry(registry.get());
    auto mapping = map_only_peer(registry.get());
    ASSERT_NE(nullptr, mapping);

    /* the relay keeps lane 4's memory (warm), lanes 0..3 have none */
    pxn::abi::LaneMemory &memory = entry->lane(4).memory();
    store_relaxed(memory.gen, uint64_t(9));
    pxn::abi::store_release(memory.backed, uint32_t(1));
    pxn::LaneClaim warm, cold;
    ASSERT_EQ(UCS_OK, mapping->claim_lane(sender_identity(), &warm));
    EXPECT_EQ(4u, warm.index);
    /* a claim never writes the relay's memory block */
    EXPECT_EQ(1u, load_acquire(memory.backed));
    EXPECT_EQ(9u, load_relaxed(memory.gen));

    /* no warm lane left: the first free one */
    ASSERT_EQ(UCS_OK, mapping->claim_lane(sender_identity(), &cold));
    EXPECT_EQ(0u, cold.index);
}

TEST_F(RegistryLaneTest, PeerMappingReleasesItsLanesWhenDestroyed)
{
    settings_.geometry.lanes = 1;
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    auto                       entry  = published_entry(registry.get());
    const pxn::ProcessIdentity sender = sender_identity();
    pxn::LaneClaim             claim;
    {
        auto mapping = map_only_peer(registry.get());
        ASSERT_NE(nullptr, mapping);
        ASSERT_EQ(UCS_OK, mapping->claim_lane(sender, &claim));
        ASSERT_EQ(UCS_OK, mapping->claim_lane(sender, &claim)); /* shared */
    }
    EXPECT_EQ(pxn::abi::kLaneFree, load_acquire(entry->lane(0).owner().state));
}

TEST_F(RegistryLaneTest, ClosingRelayRefusesNewClaims)
{
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    auto entry   = published_entry(registry.get());
    auto mapping = map_only_peer(registry.get());
    ASSERT_NE(nullptr, mapping);
    EXPECT_TRUE(mapping->is_healthy());

    ASSERT_EQ(UCS_OK, entry->begin_close());
    EXPECT_EQ(pxn::abi::kProcessClosing, load_acquire(mapping->header().state));
    EXPECT_FALSE(mapping->is_healthy());
    pxn::LaneClaim claim;
    EXPECT_EQ(UCS_ERR_UNREACHABLE, mapping->claim_lane(sender_identity(), &claim));
    std::vector<pxn::PeerInfo> peers;
    ASSERT_EQ(UCS_OK, registry->discover(nullptr, &peers));
    EXPECT_TRUE(peers.empty());

    /* The mapping outlives the relay's files. */
    entry.reset();
    EXPECT_EQ(std::set<std::string>({".lock"}), files());
    EXPECT_EQ(pxn::abi::kProcessClosing, load_acquire(mapping->header().state));
}

TEST_F(RegistryLaneTest, HostArenaIsSharedWithPeers)
{
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    pxn::UniqueFd relay_fd;
    auto          entry   = published_entry(registry.get(), &relay_fd);
    auto          mapping = map_only_peer(registry.get());
    ASSERT_NE(nullptr, mapping);
    pxn::UniqueFd sender_fd;
    ASSERT_EQ(UCS_OK, mapping->open_host_arena(&sender_fd));

    const size_t size = settings_.geometry.arena_size();
    pxn::SharedMapping relay_map, sender_map;
    ASSERT_EQ(UCS_OK, relay_map.map(relay_fd.get(), size, "relay arena"));
    ASSERT_EQ(UCS_OK, sender_map.map(sender_fd.get(), size, "sender arena"));
    memset(sender_map.data() + size - 4096, 0x5a, 4096);
    EXPECT_EQ(0x5a, relay_map.data()[size - 1]);
    EXPECT_EQ(0, relay_map.data()[0]);
}

TEST_F(RegistryLaneTest, SenderRefusesAnArenaHandleThatIsNotTheRelaysOwnFile)
{
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    std::unique_ptr<pxn::RegistryEntry> entry;
    ASSERT_EQ(UCS_OK, registry->create_entry({"rail1", "d", "tcp"}, &entry));
    const char handle[] = "../../etc/passwd";
    ASSERT_EQ(UCS_OK,
              entry->set_arena(pxn::abi::kArenaHostShm, handle, sizeof(handle)));
    std::vector<uint8_t> too_long(pxn::abi::kHandleMax + 1);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              entry->set_arena(pxn::abi::kArenaCudaIpc, too_long.data(),
                               too_long.size()));
    ASSERT_EQ(UCS_OK, entry->publish());
    auto mapping = map_only_peer(registry.get());
    ASSERT_NE(nullptr, mapping);
    pxn_test::LogCapture log;
    pxn::UniqueFd        fd;
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, mapping->open_host_arena(&fd));
    EXPECT_FALSE(fd.valid());
}

TEST_F(RegistryLaneTest, WakeupFifoIsReachableThroughTheRegistry)
{
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    auto             entry = published_entry(registry.get());
    pxn::RelayWakeup relay;
    ASSERT_EQ(UCS_OK, entry->create_wakeup(&relay));
    auto mapping = map_only_peer(registry.get());
    ASSERT_NE(nullptr, mapping);
    pxn::SenderWakeup sender;
    ASSERT_EQ(UCS_OK, mapping->open_wakeup(&sender));

    EXPECT_EQ(UCS_OK, sender.notify());
    struct pollfd pfd = {relay.fd(), POLLIN, 0};
    EXPECT_EQ(0, poll(&pfd, 1, 0));
    relay.prepare_sleep();
    EXPECT_EQ(1u, load_relaxed(mapping->header().relay_sleeping));
    EXPECT_EQ(UCS_OK, sender.notify());
    EXPECT_EQ(1, poll(&pfd, 1, 1000));
    EXPECT_EQ(1u, relay.drain());
    EXPECT_EQ(0u, load_relaxed(mapping->header().relay_sleeping));
}

} // namespace
