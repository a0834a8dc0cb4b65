/*
 * SendLane's control path (pxn_sender.h): opening a lane into a relay,
 * mapping its arena, routes and remote keys, and renewing the lane at a
 * sequence wrap. These may block for up to the heartbeat timeout waiting
 * for the relay; the data path is in pxn_sender.cc.
 */
#include "pxn_sender.h"

#include <ucs/debug/log_def.h>

#include <cstring>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>

namespace pxn {
namespace uct {

namespace {

/* Waits, sleeping briefly, until done() or the deadline; control path. */
template<typename Done>
bool wait_until(uint64_t timeout_ns, Done &&done)
{
    const uint64_t deadline = monotonic_ns() + timeout_ns;
    while (!done()) {
        if (monotonic_ns() > deadline) {
            return false;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    return true;
}

} // namespace

ucs_status_t SendLane::open(Registry *registry, const PeerInfo &relay,
                            const ProcessIdentity &self, const Settings &settings,
                            abi::SenderCounters *counters,
                            std::unique_ptr<SendLane> *lane_p)
{
    std::unique_ptr<SendLane> lane(new SendLane());
    lane->counters_          = counters;
    lane->registry_          = registry;
    lane->self_              = self;
    lane->geometry_          = settings.geometry;
    lane->credit_timeout_ns_ = uint64_t(settings.credit_timeout * 1e9);
    lane->rail_hash_         = pxn::rail_hash(relay.rail);

    ucs_status_t status = registry->map_peer(relay, &lane->mapping_);
    if (status != UCS_OK) {
        return status;
    }
    LaneClaim claim;
    status = lane->mapping_->claim_lane(self, &claim, settings.initial_seq);
    if ((status == UCS_OK) && claim.resumed) {
        /* A previous SendLane of ours may have left pieces behind: start a
         * new incarnation rather than guess its counters. */
        status = lane->mapping_->renew_lane(self, claim.index, &claim,
                                            settings.initial_seq);
    }
    if (status != UCS_OK) {
        ucs_debug("pxn: no lane at relay pid %u (rail %s): %s",
                  relay.identity.pid, relay.rail.c_str(),
                  ucs_status_string(status));
        lane->mapping_.reset();
        return status;
    }
    lane->lane_index_ = claim.index;
    lane->block_      = lane->mapping_->lane(claim.index);

    status = lane->map_arena(relay, settings);
    if (status == UCS_OK) {
        status = lane->mapping_->open_wakeup(&lane->wakeup_);
    }
    if (status != UCS_OK) {
        return status;
    }

    /* The relay acknowledges a new lane incarnation once it dropped every
     * state of the previous owner (lane_claim.h). */
    lane->wakeup_.notify();
    const uint64_t epoch = claim.lane_epoch;
    abi::LaneConsumer &consumer = lane->block_.consumer();
    if (!wait_until(registry->heartbeat_timeout_ns(), [&] {
            lane->wakeup_.notify();
            return abi::load_acquire(consumer.lane_epoch) == epoch;
        })) {
        ucs_warn("pxn: relay pid %u (rail %s) did not acknowledge lane %u",
                 relay.identity.pid, relay.rail.c_str(), claim.index);
        return UCS_ERR_TIMED_OUT;
    }
    status = lane->window_.reset(settings.geometry.slots, epoch,
                                 claim.initial_seq);
    if (status != UCS_OK) {
        return status;
    }
    if (lane->stager_ == nullptr) {
        lane->populate_slots();
    }
    lane->published_ = claim.initial_seq;
    lane->records_.resize(settings.geometry.slots);
    lane->plans_.resize(settings.geometry.max_plan);
    lane->held_ = true;
    abi::bump(lane->counters_->lanes);
    ucs_debug("pxn: claimed lane %u at relay pid %u (rail %s, lane epoch %lx)",
              claim.index, relay.identity.pid, relay.rail.c_str(), epoch);
    *lane_p = std::move(lane);
    return UCS_OK;
}

ucs_status_t SendLane::map_arena(const PeerInfo &relay, const Settings &settings)
{
#ifdef PXN_HAVE_CUDA
    cu_ = CudaDriver::get();
#endif
    if (relay.arena_kind == abi::kArenaHostShm) {
        UniqueFd fd;
        ucs_status_t status = mapping_->open_host_arena(&fd);
        if (status == UCS_OK) {
            status = arena_.map(fd.get(), settings.geometry.arena_size(),
                                "relay arena");
        }
        return status;
    }
#ifdef PXN_HAVE_CUDA
    if (relay.arena_kind == abi::kArenaCudaIpc) {
        CudaStager::Options options;
        options.policy       = settings.copy;
        options.gpu_doorbell = settings.gpu_doorbell;
        options.gather_ctas  = settings.gather_ctas;
        bounce_.resize(65536);
        return CudaStager::open(relay.arena_handle.data(), lane_index_,
                                settings.geometry, &block_.producer(), options,
                                &stager_);
    }
#endif
    ucs_debug("pxn: relay pid %u has an arena this process cannot use (kind %u)",
              relay.identity.pid, relay.arena_kind);
    return UCS_ERR_UNSUPPORTED;
}

/* Faults in this lane's slots once, on the control path: a first touch of a
 * tmpfs page in the data path costs ~25 ms per 8 MiB slot on a VM, which
 * would stall the first round of the ring. The lane is ours and idle. */
void SendLane::populate_slots()
{
    uint8_t *first     = arena_.data() + slot_offset(lane_index_, 0,
                                                     geometry_.slots,
                                                     geometry_.slot_size);
    const size_t bytes = size_t(geometry_.slots) * geometry_.slot_size;
    if (madvise(first, bytes, MADV_POPULATE_WRITE) == 0) {
        return;
    }
    const size_t page = sysconf(_SC_PAGESIZE);
    for (size_t offset = 0; offset < bytes; offset += page) {
        volatile uint8_t *p = first + offset;
        *p = *p; /* older kernels: touch every page */
    }
}

ucs_status_t SendLane::wait_route_reply(uint32_t route, uint64_t gen)
{
    const abi::RouteReply &reply = block_.route(route).reply;
    if (!wait_until(registry_->heartbeat_timeout_ns(), [&] {
            return (abi::load_acquire(reply.reply_gen) == gen) ||
                   !mapping_->is_healthy();
        }) || (abi::load_acquire(reply.reply_gen) != gen)) {
        ucs_debug("pxn: relay pid %u gave no route reply",
                  relay().identity.pid);
        return UCS_ERR_UNREACHABLE;
    }
    return static_cast<ucs_status_t>(reply.status);
}

static bool find_free_route(const bool *used, uint32_t *route)
{
    for (uint32_t i = 0; i < abi::kMaxRoutes; ++i) {
        if (!used[i]) {
            *route = i;
            return true;
        }
    }
    return false;
}

ucs_status_t SendLane::route_to_iface(const Bytes &dev_addr,
                                      const Bytes &iface_addr, uint32_t *route)
{
    if ((dev_addr.size() > abi::kDevAddrMax) ||
        (iface_addr.size() > abi::kIfaceAddrMax)) {
        return UCS_ERR_INVALID_PARAM;
    }
    uint32_t index;
    if (!usable() || !find_free_route(route_used_, &index)) {
        return usable() ? UCS_ERR_NO_RESOURCE : UCS_ERR_UNREACHABLE;
    }
    abi::RouteRequest &req = block_.route(index).request;
    req.flags          = abi::kRouteConnectToIface;
    req.dev_addr_len   = static_cast<uint16_t>(dev_addr.size());
    req.iface_addr_len = static_cast<uint16_t>(iface_addr.size());
    req.ep_addr_len    = 0;
    memcpy(req.dev_addr, dev_addr.data(), dev_addr.size());
    memcpy(req.iface_addr, iface_addr.data(), iface_addr.size());
    const uint64_t gen = ++route_gen_[index];
    abi::store_release(req.request_gen, gen);
    wakeup_.notify();

    ucs_status_t status = wait_route_reply(index, gen);
    if (status == UCS_OK) {
        route_used_[index] = true;
        *route             = index;
    }
    return status;
}

ucs_status_t SendLane::route_ep_create(uint32_t *route, Bytes *relay_dev_addr,
                                       Bytes *relay_ep_addr)
{
    uint32_t index;
    if (!usable() || !find_free_route(route_used_, &index)) {
        return usable() ? UCS_ERR_NO_RESOURCE : UCS_ERR_UNREACHABLE;
    }
    abi::RouteRequest &req = block_.route(index).request;
    req.flags          = abi::kRouteConnectToEp;
    req.dev_addr_len   = 0;
    req.iface_addr_len = 0;
    req.ep_addr_len    = 0;
    const uint64_t gen = ++route_gen_[index];
    abi::store_release(req.request_gen, gen);
    wakeup_.notify();

    ucs_status_t status = wait_route_reply(index, gen);
    if (status != UCS_OK) {
        return status;
    }
    /* u8 device address length | device address | ep address */
    const abi::RouteReply &reply = block_.route(index).reply;
    const size_t length          = reply.ep_addr_len;
    if ((length < 2) || (length > abi::kEpAddrMax) ||
        (size_t(reply.ep_addr[0]) + 2 > length)) {
        return UCS_ERR_INVALID_ADDR;
    }
    const uint8_t *dev = reply.ep_addr + 1;
    relay_dev_addr->assign(dev, dev + reply.ep_addr[0]);
    relay_ep_addr->assign(dev + reply.ep_addr[0], reply.ep_addr + length);
    route_used_[index] = true;
    *route             = index;
    return UCS_OK;
}

ucs_status_t SendLane::route_ep_connect(uint32_t route, const Bytes &dev_addr,
                                        const Bytes &ep_addr)
{
    if ((route >= abi::kMaxRoutes) || !route_used_[route] ||
        (dev_addr.size() > abi::kDevAddrMax) || ep_addr.empty() ||
        (ep_addr.size() > abi::kEpAddrMax)) {
        return UCS_ERR_INVALID_PARAM;
    }
    abi::RouteRequest &req = block_.route(route).request;
    req.flags        = abi::kRouteConnectToEp;
    req.dev_addr_len = static_cast<uint16_t>(dev_addr.size());
    req.ep_addr_len  = static_cast<uint16_t>(ep_addr.size());
    memcpy(req.dev_addr, dev_addr.data(), dev_addr.size());
    memcpy(req.ep_addr, ep_addr.data(), ep_addr.size());
    const uint64_t gen = ++route_gen_[route];
    abi::store_release(req.request_gen, gen);
    wakeup_.notify();
    return wait_route_reply(route, gen);
}

void SendLane::route_release(uint32_t route)
{
    if ((route >= abi::kMaxRoutes) || !route_used_[route]) {
        return;
    }
    route_used_[route] = false;
    if (failed_) {
        return;
    }
    /* flags 0: the relay destroys its ep once no piece uses it. */
    abi::RouteRequest &req = block_.route(route).request;
    req.flags = 0;
    abi::store_release(req.request_gen, ++route_gen_[route]);
    wakeup_.notify();
}

ucs_status_t SendLane::rkey_index(const uint8_t *packed, uint16_t length,
                                  uint32_t *index)
{
    if (length > abi::kRkeyMax) {
        return UCS_ERR_INVALID_PARAM;
    }
    int free = -1;
    for (uint32_t i = 0; i < abi::kMaxRkeys; ++i) {
        const RkeySlot &slot = rkeys_[i];
        if ((slot.gen != 0) && (slot.length == length) &&
            (memcmp(slot.packed, packed, length) == 0)) {
            *index = i;
            return UCS_OK;
        }
        if ((slot.users == 0) && ((free < 0) || (slot.gen == 0))) {
            free = static_cast<int>(i);
        }
    }
    if (free < 0) {
        return UCS_ERR_NO_RESOURCE;
    }
    RkeySlot &slot = rkeys_[free];
    slot.length    = length;
    memcpy(slot.packed, packed, length);
    slot.gen = ++rkey_gen_;
    abi::RkeyEntry &entry = block_.rkey(free);
    memcpy(entry.packed, packed, length);
    abi::store_relaxed(entry.length, uint32_t(length));
    abi::store_release(entry.gen, slot.gen);
    *index = static_cast<uint32_t>(free);
    return UCS_OK;
}

ucs_status_t SendLane::reestablish()
{
    LaneClaim claim;
    /* The lane is drained; its routes and rkeys stay (lane_claim.h). */
    ucs_status_t status = mapping_->renew_lane(self_, lane_index_, &claim, 0,
                                               true);
    if (status != UCS_OK) {
        return status;
    }
    abi::LaneConsumer &consumer = block_.consumer();
    if (!wait_until(registry_->heartbeat_timeout_ns(), [&] {
            wakeup_.notify();
            return abi::load_acquire(consumer.lane_epoch) == claim.lane_epoch;
        })) {
        return UCS_ERR_TIMED_OUT;
    }
    ucs_debug("pxn: lane %u at relay pid %u re-established at seq %lu "
              "(lane epoch %lx)", lane_index_, relay().identity.pid,
              claim.initial_seq, claim.lane_epoch);
    published_ = claim.initial_seq;
    return window_.reestablish(claim.lane_epoch, claim.initial_seq);
}

} // namespace uct
} // namespace pxn
