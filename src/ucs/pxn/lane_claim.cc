#include "lane_claim.h"

#include <ucs/debug/log_def.h>

#include <cinttypes>

namespace pxn {

using abi::load_acquire;
using abi::load_relaxed;
using abi::store_relaxed;
using abi::store_release;

namespace {

bool owned_by(const LaneBlock &lane, const ProcessIdentity &sender)
{
    return (load_acquire(lane.owner().state) == abi::kLaneClaimed) &&
           (lane_owner(lane) == sender);
}

ProcessIdentity relay_identity(const abi::ProcessHeader &h)
{
    ProcessIdentity id;
    id.pid        = h.pid;
    id.start_time = h.start_time;
    id.epoch      = h.epoch;
    return id;
}

ucs_status_t reset_lane(const LaneBlock &lane, const ProcessIdentity &sender,
                        uint64_t initial_seq, bool keep_routes, LaneClaim *claim)
{
    abi::LaneOwner &owner   = lane.owner();
    uint64_t        old     = load_relaxed(owner.lane_epoch);
    uint64_t        epoch   = 0;
    do {
        const ucs_status_t status = random_epoch(&epoch);
        if (status != UCS_OK) {
            return status;
        }
    } while (epoch == old);

    /* Take the lane away from whoever the relay thinks owns it before
     * touching anything else; lane_epoch 0 tells a relay reading the owner
     * block that a claim is in progress (lane_claim.h, seqlock). */
    store_release(owner.state, uint32_t(abi::kLaneFree));
    store_release(owner.lane_epoch, uint64_t(0));

    abi::LaneProducer &producer = lane.producer();
    store_relaxed(producer.head, initial_seq);
    store_relaxed(producer.doorbell, initial_seq);
    store_relaxed(producer.reaped, initial_seq);
    store_relaxed(producer.abandoned, uint64_t(0));
    abi::LaneConsumer &consumer = lane.consumer();
    store_relaxed(consumer.consumed, initial_seq);
    store_relaxed(consumer.completed, initial_seq);
    store_relaxed(consumer.lane_epoch, uint64_t(0));
    store_relaxed(consumer.ack_status, int32_t(0));

    /* Leftovers of the previous owner would otherwise match the new owner's
     * first sequence numbers and generations. */
    for (uint32_t slot = 0; slot < lane.slots(); ++slot) {
        store_relaxed(lane.completion(slot).seq, uint64_t(0));
        store_relaxed(lane.descriptor(slot).seq, uint64_t(0));
    }
    for (uint32_t i = 0; (i < abi::kRouteMailboxes) && !keep_routes; ++i) {
        store_relaxed(lane.route(i).request.request_gen, uint64_t(0));
        store_relaxed(lane.route(i).reply.reply_gen, uint64_t(0));
    }
    for (uint32_t i = 0; (i < abi::kMaxRkeys) && !keep_routes; ++i) {
        store_relaxed(lane.rkey(i).gen, uint64_t(0));
    }

    store_relaxed(owner.owner_pid, sender.pid);
    store_relaxed(owner.owner_start_time, sender.start_time);
    store_relaxed(owner.owner_epoch, sender.epoch);
    store_relaxed(owner.initial_seq, initial_seq);
    store_relaxed(owner.flags, keep_routes ? uint32_t(abi::kLaneKeepRoutes) : 0u);
    store_release(owner.lane_epoch, epoch);
    store_release(owner.state, uint32_t(abi::kLaneClaimed));

    claim->lane_epoch  = epoch;
    claim->initial_seq = initial_seq;
    claim->resumed     = false;
    return UCS_OK;
}

void free_lane(const LaneBlock &lane)
{
    abi::LaneOwner &owner = lane.owner();
    store_release(owner.state, uint32_t(abi::kLaneFree));
    store_relaxed(owner.owner_pid, uint32_t(0));
    store_relaxed(owner.owner_start_time, uint64_t(0));
    store_relaxed(owner.owner_epoch, uint64_t(0));
}

} // namespace

ProcessIdentity lane_owner(const LaneBlock &lane)
{
    const abi::LaneOwner &owner = lane.owner();
    ProcessIdentity id;
    id.pid        = load_relaxed(owner.owner_pid);
    id.start_time = load_relaxed(owner.owner_start_time);
    id.epoch      = load_relaxed(owner.owner_epoch);
    return id;
}

ucs_status_t claim_lane_locked(const ControlView &file,
                               const ProcessIdentity &sender,
                               uint64_t initial_seq, LaneClaim *claim)
{
    const abi::ProcessHeader &h = file.header();
    if (load_acquire(h.state) != abi::kProcessReady) {
        ucs_debug("pxn: relay pid %" PRIu32 " epoch %016" PRIx64 " is not ready "
                  "(state %" PRIu32 "): no lane claimed", h.pid, h.epoch,
                  load_acquire(h.state));
        return UCS_ERR_UNREACHABLE;
    }
    if (sender == relay_identity(h)) {
        ucs_error("pxn: pid %" PRIu32 " epoch %016" PRIx64 " tried to claim a "
                  "lane of its own registry entry", sender.pid, sender.epoch);
        return UCS_ERR_INVALID_PARAM;
    }

    const uint32_t lanes = file.geometry.lanes;
    for (uint32_t i = 0; i < lanes; ++i) {
        const LaneBlock lane = file.lane(i);
        if (owned_by(lane, sender)) {
            claim->index       = i;
            claim->lane_epoch  = load_relaxed(lane.owner().lane_epoch);
            claim->initial_seq = load_relaxed(lane.owner().initial_seq);
            claim->resumed     = true;
            return UCS_OK;
        }
    }

    /* A free lane whose memory the relay still keeps (warm) first: its
     * acknowledgement needs no new memory and the relay's own mapping of
     * it is in place. */
    int warm_index = -1, free_index = -1, dead_index = -1;
    for (uint32_t i = 0; (i < lanes) && (warm_index < 0); ++i) {
        const LaneBlock lane = file.lane(i);
        if (load_acquire(lane.owner().state) != abi::kLaneClaimed) {
            if (load_acquire(lane.memory().backed) != 0) {
                warm_index = int(i);
            } else if (free_index < 0) {
                free_index = int(i);
            }
        } else if ((dead_index < 0) && (free_index < 0)) {
            const ProcessIdentity owner = lane_owner(lane);
            if (!is_alive(owner.pid, owner.start_time)) {
                dead_index = int(i);
            }
        }
    }
    const int index = (warm_index >= 0) ? warm_index :
                      (free_index >= 0) ? free_index : dead_index;
    if (index < 0) {
        ucs_debug("pxn: relay pid %" PRIu32 " epoch %016" PRIx64 " has no free "
                  "lane (all %" PRIu32 " owned by live senders)", h.pid, h.epoch,
                  lanes);
        return UCS_ERR_NO_RESOURCE;
    }
    claim->index = uint32_t(index);
    return reset_lane(file.lane(uint32_t(index)), sender, initial_seq, false,
                      claim);
}

ucs_status_t renew_lane_locked(const ControlView &file,
                               const ProcessIdentity &sender, uint32_t index,
                               uint64_t initial_seq, bool keep_routes,
                               LaneClaim *claim)
{
    if ((index >= file.geometry.lanes) || !owned_by(file.lane(index), sender)) {
        ucs_debug("pxn: lane %" PRIu32 " is not owned by pid %" PRIu32
                  " epoch %016" PRIx64 ": not renewed", index, sender.pid,
                  sender.epoch);
        return UCS_ERR_NO_ELEM;
    }
    claim->index = index;
    return reset_lane(file.lane(index), sender, initial_seq, keep_routes, claim);
}

ucs_status_t release_lane_locked(const ControlView &file,
                                 const ProcessIdentity &sender, uint32_t index)
{
    if ((index >= file.geometry.lanes) || !owned_by(file.lane(index), sender)) {
        ucs_debug("pxn: lane %" PRIu32 " is not owned by pid %" PRIu32
                  " epoch %016" PRIx64 ": not released", index, sender.pid,
                  sender.epoch);
        return UCS_ERR_NO_ELEM;
    }
    free_lane(file.lane(index));
    return UCS_OK;
}

unsigned free_dead_lanes_locked(const ControlView &file)
{
    unsigned freed = 0;
    for (uint32_t i = 0; i < file.geometry.lanes; ++i) {
        const LaneBlock lane = file.lane(i);
        if (load_acquire(lane.owner().state) != abi::kLaneClaimed) {
            continue;
        }
        const ProcessIdentity owner = lane_owner(lane);
        if (!is_alive(owner.pid, owner.start_time)) {
            ucs_debug("pxn: freeing lane %" PRIu32 " of relay pid %" PRIu32
                      ": owner pid %" PRIu32 " is dead", i, file.header().pid,
                      owner.pid);
            free_lane(lane);
            ++freed;
        }
    }
    return freed;
}

} // namespace pxn
