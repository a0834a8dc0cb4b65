/*
 * Pins the shared-memory ABI of abi.h field by field. A failure here means
 * the layout changed: bump abi::kAbiVersion, update docs/abi.md, then this
 * file.
 */
#include <ucs/pxn/abi.h>
#include <ucs/pxn/settings.h>

#include <gtest/gtest.h>

#include <cstring>

namespace {

namespace abi = pxn::abi;

#define EXPECT_FIELD(_type, _field, _offset, _size) \
    do { \
        EXPECT_EQ(size_t(_offset), offsetof(abi::_type, _field)) << #_field; \
        EXPECT_EQ(size_t(_size), sizeof(abi::_type::_field)) << #_field; \
    } while (0)

TEST(AbiLayout, ConstantsArePinned)
{
    EXPECT_EQ(0, std::memcmp(&abi::kMagic, "oUCXPXN1", 8));
    EXPECT_EQ(9u, abi::kAbiVersion);
    EXPECT_EQ(1u, abi::kLaneKeepRoutes);
    EXPECT_EQ(64u, abi::kCacheLine);
    EXPECT_EQ(64u, abi::kNameMax);
    EXPECT_EQ(128u, abi::kHandleMax);
    EXPECT_EQ(32u, abi::kTlNameMax);
    EXPECT_EQ(16u, abi::kRouteMailboxes);
    EXPECT_EQ(64u, abi::kMaxRkeys);
    EXPECT_EQ(240u, abi::kRkeyMax);
    EXPECT_EQ(64u, abi::kDevAddrMax);
    EXPECT_EQ(64u, abi::kIfaceAddrMax);
    EXPECT_EQ(256u, abi::kEpAddrMax);
    EXPECT_EQ(4096u, abi::kLaneOffset);
}

TEST(AbiLayout, EnumValuesArePinned)
{
    EXPECT_EQ(1u, abi::kProcessInit);
    EXPECT_EQ(2u, abi::kProcessReady);
    EXPECT_EQ(3u, abi::kProcessClosing);
    EXPECT_EQ(1u, abi::kArenaHostShm);
    EXPECT_EQ(2u, abi::kArenaCudaIpc);
    EXPECT_EQ(0u, abi::kLaneFree);
    EXPECT_EQ(1u, abi::kLaneClaimed);
    EXPECT_EQ(1u, abi::kOpPut);
    EXPECT_EQ(2u, abi::kOpGet);
    EXPECT_EQ(3u, abi::kOpAm);
    EXPECT_EQ(1u, abi::kRouteToIface);
    EXPECT_EQ(2u, abi::kRouteCreateEp);
    EXPECT_EQ(3u, abi::kRouteConnectEp);
    EXPECT_EQ(4u, abi::kRouteRelease);
}

TEST(AbiLayout, ProcessHeader)
{
    EXPECT_EQ(576u, sizeof(abi::ProcessHeader));
    EXPECT_EQ(64u, alignof(abi::ProcessHeader));
    EXPECT_FIELD(ProcessHeader, magic, 0, 8);
    EXPECT_FIELD(ProcessHeader, abi_version, 8, 4);
    EXPECT_FIELD(ProcessHeader, header_size, 12, 4);
    EXPECT_FIELD(ProcessHeader, uid, 16, 4);
    EXPECT_FIELD(ProcessHeader, pid, 20, 4);
    EXPECT_FIELD(ProcessHeader, start_time, 24, 8);
    EXPECT_FIELD(ProcessHeader, epoch, 32, 8);
    EXPECT_FIELD(ProcessHeader, node_id, 40, 64);
    EXPECT_FIELD(ProcessHeader, rail, 104, 64);
    EXPECT_FIELD(ProcessHeader, device, 168, 64);
    EXPECT_FIELD(ProcessHeader, inner_tl, 232, 32);
    EXPECT_FIELD(ProcessHeader, lanes, 264, 4);
    EXPECT_FIELD(ProcessHeader, slots, 268, 4);
    EXPECT_FIELD(ProcessHeader, slot_size, 272, 8);
    EXPECT_FIELD(ProcessHeader, max_plan, 280, 4);
    EXPECT_FIELD(ProcessHeader, arena_kind, 284, 4);
    EXPECT_FIELD(ProcessHeader, arena_size, 288, 8);
    EXPECT_FIELD(ProcessHeader, lane_offset, 296, 8);
    EXPECT_FIELD(ProcessHeader, lane_stride, 304, 8);
    EXPECT_FIELD(ProcessHeader, desc_stride, 312, 8);
    EXPECT_FIELD(ProcessHeader, file_size, 320, 8);
    EXPECT_FIELD(ProcessHeader, arena_handle, 328, 128);
    EXPECT_FIELD(ProcessHeader, reserved0, 456, 56);
    /* live block: its own cache line */
    EXPECT_FIELD(ProcessHeader, state, 512, 4);
    EXPECT_FIELD(ProcessHeader, relay_sleeping, 516, 4);
    EXPECT_FIELD(ProcessHeader, heartbeat_ns, 520, 8);
    EXPECT_FIELD(ProcessHeader, reserved1, 528, 48);
}

TEST(AbiLayout, CountersSitBetweenHeaderAndLanes)
{
    EXPECT_EQ(1024u, abi::kCountersOffset);
    EXPECT_EQ(320u, sizeof(abi::RelayCounters));
    EXPECT_EQ(256u, sizeof(abi::SenderCounters));
    EXPECT_EQ(576u, sizeof(abi::ProcessCounters));
    EXPECT_EQ(0u, offsetof(abi::ProcessCounters, relay));
    EXPECT_EQ(320u, offsetof(abi::ProcessCounters, sender));
    EXPECT_EQ(80u, sizeof(abi::LatencyHistogram));
    EXPECT_EQ(144u, offsetof(abi::RelayCounters, pickup));
    EXPECT_EQ(224u, offsetof(abi::RelayCounters, get_pieces));
    EXPECT_EQ(232u, offsetof(abi::RelayCounters, get_bytes));
    EXPECT_EQ(240u, offsetof(abi::RelayCounters, am_pieces));
    EXPECT_EQ(248u, offsetof(abi::RelayCounters, am_messages));
    EXPECT_EQ(256u, offsetof(abi::RelayCounters, am_bytes));
    EXPECT_EQ(264u, offsetof(abi::RelayCounters, am_credit_waits));
    EXPECT_EQ(272u, offsetof(abi::RelayCounters, reserved));
    EXPECT_EQ(96u, offsetof(abi::SenderCounters, completion));
    EXPECT_EQ(176u, offsetof(abi::SenderCounters, get_pieces));
    EXPECT_EQ(184u, offsetof(abi::SenderCounters, get_bytes));
    EXPECT_EQ(192u, offsetof(abi::SenderCounters, am_sent));
    EXPECT_EQ(200u, offsetof(abi::SenderCounters, am_received));
    EXPECT_EQ(208u, offsetof(abi::SenderCounters, am_refused));
    EXPECT_EQ(216u, offsetof(abi::SenderCounters, reserved));
    EXPECT_EQ(64u, offsetof(abi::RelayCounters, last_completion_ns));
    EXPECT_EQ(64u, offsetof(abi::SenderCounters, last_completion_ns));
    EXPECT_EQ(0u, offsetof(abi::RelayCounters, pieces));
    EXPECT_EQ(8u, offsetof(abi::RelayCounters, bytes));
    EXPECT_EQ(24u, offsetof(abi::RelayCounters, rejected));
    EXPECT_EQ(56u, offsetof(abi::RelayCounters, inflight));
    EXPECT_EQ(72u, offsetof(abi::RelayCounters, routes_active));
    EXPECT_EQ(80u, offsetof(abi::RelayCounters, lane_commits));
    EXPECT_EQ(88u, offsetof(abi::RelayCounters, lane_commit_ns));
    EXPECT_EQ(96u, offsetof(abi::RelayCounters, warm_claims));
    EXPECT_EQ(104u, offsetof(abi::RelayCounters, lanes_backed));
    EXPECT_EQ(112u, offsetof(abi::RelayCounters, fenced));
    EXPECT_EQ(120u, offsetof(abi::RelayCounters, rkeys_held));
    EXPECT_EQ(128u, offsetof(abi::RelayCounters, inner_ops));
    EXPECT_EQ(136u, offsetof(abi::RelayCounters, inner_sgl_ops));
    EXPECT_EQ(72u, offsetof(abi::SenderCounters, lane_open_ns));
    EXPECT_EQ(80u, offsetof(abi::SenderCounters, lane_map_ns));
    EXPECT_EQ(88u, offsetof(abi::SenderCounters, spare_misses));
    EXPECT_EQ(16u, offsetof(abi::SenderCounters, credit_stalls));
    EXPECT_EQ(40u, offsetof(abi::SenderCounters, fallback_bytes));
    EXPECT_EQ(48u, offsetof(abi::SenderCounters, lanes));
    EXPECT_LE(sizeof(abi::ProcessHeader), abi::kCountersOffset);
    EXPECT_LE(abi::kCountersOffset + sizeof(abi::ProcessCounters),
              abi::kLaneOffset);

    uint64_t counter = 41;
    abi::bump(counter);
    abi::bump(counter, 8);
    EXPECT_EQ(50u, counter);
}

TEST(AbiLayout, LaneHeaderBlocks)
{
    EXPECT_EQ(64u, sizeof(abi::LaneOwner));
    EXPECT_FIELD(LaneOwner, state, 0, 4);
    EXPECT_FIELD(LaneOwner, owner_pid, 4, 4);
    EXPECT_FIELD(LaneOwner, owner_start_time, 8, 8);
    EXPECT_FIELD(LaneOwner, owner_epoch, 16, 8);
    EXPECT_FIELD(LaneOwner, lane_epoch, 24, 8);
    EXPECT_FIELD(LaneOwner, initial_seq, 32, 8);
    EXPECT_FIELD(LaneOwner, flags, 40, 4);
    EXPECT_FIELD(LaneOwner, reserved, 44, 20);

    EXPECT_EQ(64u, sizeof(abi::LaneProducer));
    EXPECT_FIELD(LaneProducer, head, 0, 8);
    EXPECT_FIELD(LaneProducer, doorbell, 8, 8);
    EXPECT_FIELD(LaneProducer, reaped, 16, 8);
    EXPECT_FIELD(LaneProducer, abandoned, 24, 8);
    EXPECT_FIELD(LaneProducer, rung_ns, 32, 8);
    EXPECT_FIELD(LaneProducer, reserved, 40, 24);

    EXPECT_EQ(64u, sizeof(abi::LaneConsumer));
    EXPECT_FIELD(LaneConsumer, consumed, 0, 8);
    EXPECT_FIELD(LaneConsumer, completed, 8, 8);
    EXPECT_FIELD(LaneConsumer, lane_epoch, 16, 8);
    EXPECT_FIELD(LaneConsumer, ack_status, 24, 4);
    EXPECT_FIELD(LaneConsumer, reserved0, 28, 4);
    EXPECT_FIELD(LaneConsumer, completed_ns, 32, 8);
    EXPECT_FIELD(LaneConsumer, reserved, 40, 24);

    EXPECT_EQ(128u, sizeof(abi::LaneMemory));
    EXPECT_FIELD(LaneMemory, gen, 0, 8);
    EXPECT_FIELD(LaneMemory, size, 8, 8);
    EXPECT_FIELD(LaneMemory, backed, 16, 4);
    EXPECT_FIELD(LaneMemory, reserved0, 20, 4);
    EXPECT_FIELD(LaneMemory, handle, 24, 64);
    EXPECT_FIELD(LaneMemory, reserved, 88, 40);

    /* Owner, producer, consumer and memory never share a cache line. */
    EXPECT_EQ(320u, sizeof(abi::LaneHeader));
    EXPECT_EQ(64u, alignof(abi::LaneHeader));
    EXPECT_FIELD(LaneHeader, owner, 0, 64);
    EXPECT_FIELD(LaneHeader, producer, 64, 64);
    EXPECT_FIELD(LaneHeader, consumer, 128, 64);
    EXPECT_FIELD(LaneHeader, memory, 192, 128);
}

TEST(AbiLayout, RouteEntry)
{
    EXPECT_EQ(448u, sizeof(abi::RouteRequest));
    EXPECT_FIELD(RouteRequest, request_gen, 0, 8);
    EXPECT_FIELD(RouteRequest, kind, 8, 4);
    EXPECT_FIELD(RouteRequest, route, 12, 4);
    EXPECT_FIELD(RouteRequest, dev_addr_len, 16, 2);
    EXPECT_FIELD(RouteRequest, iface_addr_len, 18, 2);
    EXPECT_FIELD(RouteRequest, ep_addr_len, 20, 2);
    EXPECT_FIELD(RouteRequest, reserved0, 22, 2);
    EXPECT_FIELD(RouteRequest, dev_addr, 24, 64);
    EXPECT_FIELD(RouteRequest, iface_addr, 88, 64);
    EXPECT_FIELD(RouteRequest, ep_addr, 152, 256);
    EXPECT_FIELD(RouteRequest, reserved1, 408, 40);

    EXPECT_EQ(320u, sizeof(abi::RouteReply));
    EXPECT_FIELD(RouteReply, reply_gen, 0, 8);
    EXPECT_FIELD(RouteReply, status, 8, 4);
    EXPECT_FIELD(RouteReply, route, 12, 4);
    EXPECT_FIELD(RouteReply, ep_addr_len, 16, 2);
    EXPECT_FIELD(RouteReply, reserved0, 18, 6);
    EXPECT_FIELD(RouteReply, ep_addr, 24, 256);
    EXPECT_FIELD(RouteReply, reserved1, 280, 40);

    /* Sender's request and relay's reply in separate cache lines. */
    EXPECT_EQ(768u, sizeof(abi::RouteEntry));
    EXPECT_FIELD(RouteEntry, request, 0, 448);
    EXPECT_FIELD(RouteEntry, reply, 448, 320);
}

TEST(AbiLayout, RkeyCompletionPlanDescriptor)
{
    EXPECT_EQ(256u, sizeof(abi::RkeyEntry));
    EXPECT_EQ(64u, alignof(abi::RkeyEntry));
    EXPECT_FIELD(RkeyEntry, gen, 0, 8);
    EXPECT_FIELD(RkeyEntry, length, 8, 4);
    EXPECT_FIELD(RkeyEntry, reserved, 12, 4);
    EXPECT_FIELD(RkeyEntry, packed, 16, 240);

    EXPECT_EQ(16u, sizeof(abi::Completion));
    EXPECT_EQ(8u, alignof(abi::Completion));
    EXPECT_FIELD(Completion, seq, 0, 8);
    EXPECT_FIELD(Completion, status, 8, 4);
    EXPECT_FIELD(Completion, reserved, 12, 4);

    EXPECT_EQ(16u, sizeof(abi::Plan));
    EXPECT_EQ(8u, alignof(abi::Plan));
    EXPECT_FIELD(Plan, remote_addr, 0, 8);
    EXPECT_FIELD(Plan, length, 8, 4);
    EXPECT_FIELD(Plan, rkey_index, 12, 4);

    EXPECT_EQ(64u, sizeof(abi::DescriptorHeader));
    EXPECT_EQ(64u, alignof(abi::DescriptorHeader));
    EXPECT_FIELD(DescriptorHeader, seq, 0, 8);
    EXPECT_FIELD(DescriptorHeader, lane_epoch, 8, 8);
    EXPECT_FIELD(DescriptorHeader, op, 16, 4);
    EXPECT_FIELD(DescriptorHeader, plan_count, 20, 4);
    EXPECT_FIELD(DescriptorHeader, length, 24, 8);
    EXPECT_FIELD(DescriptorHeader, route, 32, 4);
    EXPECT_FIELD(DescriptorHeader, flags, 36, 4);
    EXPECT_FIELD(DescriptorHeader, reserved, 40, 24);
}

TEST(AbiLayout, DefaultLaneLayout)
{
    const pxn::Geometry   g;
    const abi::LaneLayout l = abi::lane_layout(g.slots, g.max_plan);
    EXPECT_EQ(320u, l.routes);
    EXPECT_EQ(320u + 16 * 768, l.rkeys);                  /* 12608 */
    EXPECT_EQ(12608u + 64 * 256, l.completions);          /* 28992 */
    EXPECT_EQ(28992u + 64, l.descriptors);                /* 4 x 16 -> 64 */
    EXPECT_EQ(64u + 4096 * 16, l.desc_stride);            /* 65600 */
    EXPECT_EQ(72u * 4096, l.lane_stride);                 /* 294912 */
    EXPECT_LE(l.descriptors + 4 * l.desc_stride, l.lane_stride);

    /* Control file: header page + 7 lanes. */
    EXPECT_EQ(2068480u, abi::kLaneOffset + g.lanes * l.lane_stride);
}

TEST(AbiLayout, DefaultGeometryGives224MiBArena)
{
    const pxn::Geometry g;
    EXPECT_EQ(7u, g.lanes);
    EXPECT_EQ(4u, g.slots);
    EXPECT_EQ(8ull << 20, g.slot_size);
    EXPECT_EQ(4096u, g.max_plan);
    EXPECT_EQ(224ull << 20, g.arena_size());
}

TEST(AbiLayout, NonPowerOfTwoSlots)
{
    const abi::LaneLayout l = abi::lane_layout(5, 3);
    EXPECT_EQ(320u, l.routes);
    EXPECT_EQ(28992u, l.completions);
    EXPECT_EQ(28992u + 128, l.descriptors);  /* 5 x 16 = 80 -> 128 */
    EXPECT_EQ(128u, l.desc_stride);          /* 64 + 48 = 112 -> 128 */
    EXPECT_EQ(8u * 4096, l.lane_stride);     /* 29760 -> 32768 */
}

TEST(AbiLayout, LaneLayoutInvariantsHoldForAllShapes)
{
    for (uint32_t slots : {1u, 2u, 3u, 5u, 7u, 17u, 18u, 19u, 1000u, 4096u}) {
        for (uint32_t max_plan : {1u, 3u, 4u, 5u, 4096u, 65536u}) {
            const abi::LaneLayout l = abi::lane_layout(slots, max_plan);
            SCOPED_TRACE(testing::Message() << slots << " x " << max_plan);
            EXPECT_EQ(0u, l.routes % 64);
            EXPECT_EQ(0u, l.rkeys % 64);
            EXPECT_EQ(0u, l.completions % 64);
            EXPECT_EQ(0u, l.descriptors % 64);
            EXPECT_EQ(0u, l.desc_stride % 64);
            EXPECT_EQ(0u, l.lane_stride % 4096);
            EXPECT_GE(l.descriptors - l.completions,
                      uint64_t(slots) * sizeof(abi::Completion));
            EXPECT_GE(l.desc_stride, sizeof(abi::DescriptorHeader) +
                                     uint64_t(max_plan) * sizeof(abi::Plan));
            EXPECT_GE(l.lane_stride, l.descriptors + slots * l.desc_stride);
            EXPECT_LT(l.lane_stride - 4096, l.descriptors + slots * l.desc_stride);
        }
    }
}

TEST(AbiLayout, AccessHelpersReadWhatTheyWrite)
{
    abi::LaneProducer p = {};
    abi::store_release(p.doorbell, uint64_t(19));
    abi::store_relaxed(p.head, uint64_t(20));
    EXPECT_EQ(19u, abi::load_acquire(p.doorbell));
    EXPECT_EQ(20u, abi::load_relaxed(p.head));
}

} // namespace
