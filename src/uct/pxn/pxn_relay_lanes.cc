/*
 * A relay's lanes, beside their data path in pxn_relay.cc: who owns each
 * (claims, renewals, releases, owners that died), the routes they hold and
 * ask for (route mailboxes), a committed piece whose doorbell does not
 * come, and the cheap check for work that the engine makes before it
 * sleeps.
 */
#include "pxn_relay.h"

#include <ucs/debug/log_def.h>
#include <ucs/pxn/identity.h>
#include <ucs/pxn/lane_claim.h>

namespace pxn {
namespace uct {
void Relay::set_held(Lane &lane, uint32_t route, bool held)
{
    uint64_t &word = lane.held[route / 64];
    const uint64_t bit = 1ull << (route % 64);
    word = held ? (word | bit) : (word & ~bit);
}

void Relay::drop_lane(Lane &lane)
{
    for (uint32_t w = 0; w < lane.held.size(); ++w) {
        for (uint64_t bits = lane.held[w]; bits != 0; bits &= bits - 1) {
            routes_->release(w * 64 + __builtin_ctzll(bits));
        }
        lane.held[w] = 0;
    }
    lane.rkeys.clear();
    abi::store_relaxed(counters_->routes_active, uint64_t(routes_->active()));
    std::fill(std::begin(lane.mailbox_gen), std::end(lane.mailbox_gen), 0);
    if (lane.committed && release_lane_) {
        release_lane_(lane.index);
    }
    lane.slots         = LaneSlots();
    lane.committed     = false;
    lane.refused       = false;
    lane.stalled_since = 0;
    lane.epoch         = 0;
}

/* Follows the lane's owner block (a seqlock keyed on lane_epoch, see
 * lane_claim.h). Returns 1 when the lane changed hands. */
unsigned Relay::sync_owner(Lane &lane)
{
    abi::LaneOwner &owner = lane.block.owner();
    const uint64_t e1     = abi::load_acquire(owner.lane_epoch);
    if (e1 == 0) {
        return 0; /* never claimed, or being claimed right now */
    }
    const uint32_t state  = abi::load_acquire(owner.state);
    if ((e1 == lane.epoch) && (state == abi::kLaneClaimed)) {
        return 0; /* the incarnation we serve: every round of every lane */
    }
    const uint64_t start  = abi::load_relaxed(owner.initial_seq);
    const uint32_t flags  = abi::load_relaxed(owner.flags);
    ProcessIdentity who;
    who.pid        = abi::load_relaxed(owner.owner_pid);
    who.start_time = abi::load_relaxed(owner.owner_start_time);
    who.epoch      = abi::load_relaxed(owner.owner_epoch);
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint64_t e2     = abi::load_relaxed(owner.lane_epoch);

    if ((e1 == 0) || (e1 != e2)) {
        return 0; /* being claimed right now */
    }
    if (state != abi::kLaneClaimed) {
        if ((lane.epoch != 0) && (lane.inflight == 0)) {
            drop_lane(lane);
            return 1;
        }
        return 0;
    }
    if ((e1 == lane.epoch) || (lane.inflight != 0)) {
        return 0; /* current, or waiting for old pieces to finish */
    }

    /* The same owner after a seq wrap keeps its routes and rkeys. */
    if (!(flags & abi::kLaneKeepRoutes) || (lane.epoch == 0) ||
        (who != lane.owner)) {
        drop_lane(lane);
    }
    ucs_status_t ack = UCS_OK;
    if (!lane.committed) {
        ack            = commit_lane_ ? commit_lane_(lane.index, &lane.slots) :
                                        UCS_OK;
        lane.committed = (ack == UCS_OK);
    }
    lane.refused                = (ack != UCS_OK);
    abi::LaneConsumer &consumer = lane.block.consumer();
    abi::store_relaxed(consumer.ack_status, int32_t(ack));
    lane.next_seq               = start + 1;
    lane.tracker.reset(geometry_.slots, start);
    lane.stalled_since          = 0;
    abi::store_relaxed(consumer.consumed, start);
    abi::store_relaxed(consumer.completed, start);
    for (uint32_t slot = 0; slot < geometry_.slots; ++slot) {
        abi::store_relaxed(lane.block.completion(slot).seq, uint64_t(0));
    }
    abi::store_release(consumer.lane_epoch, e1);
    lane.epoch = e1;
    lane.owner = who;
    abi::bump(counters_->lane_resets);
    ucs_debug("pxn: relay lane %u now owned by pid %u (lane epoch %lx)",
              lane.index, who.pid, e1);
    return 1;
}

unsigned Relay::serve_routes(Lane &lane)
{
    unsigned work = 0;
    for (uint32_t i = 0; i < abi::kRouteMailboxes; ++i) {
        abi::RouteEntry &mailbox = lane.block.route(i);
        const uint64_t gen       = route_request_gen(&mailbox.request);
        if ((gen == lane.mailbox_gen[i]) || (gen == 0)) {
            continue;
        }
        lane.mailbox_gen[i] = gen;
        ++work;

        RouteMessage request;
        RouteAnswer answer;
        answer.status = read_route_request(&mailbox.request, &request);
        if (answer.status == UCS_OK) {
            answer.route = request.route;
            if (request.kind == abi::kRouteRelease) {
                if (holds(lane, request.route)) {
                    set_held(lane, request.route, false);
                    routes_->release(request.route);
                    lane.rkeys.release_route(request.route);
                } else {
                    answer.status = UCS_ERR_INVALID_PARAM;
                }
            } else if ((request.kind == abi::kRouteConnectEp) &&
                       !holds(lane, request.route)) {
                answer.status = UCS_ERR_INVALID_PARAM;
            } else {
                const bool new_hold = (request.kind != abi::kRouteConnectEp);
                answer = routes_->serve(request);
                if ((answer.status == UCS_OK) && new_hold) {
                    if (holds(lane, answer.route)) {
                        routes_->release(answer.route); /* one hold a lane */
                    }
                    set_held(lane, answer.route, true);
                }
            }
        }
        if (answer.status == UCS_OK) {
            abi::bump(counters_->routes, request.kind != abi::kRouteRelease);
        } else {
            abi::bump(counters_->route_errors);
            ucs_debug("pxn: relay lane %u route request (kind %u) failed: %s",
                      lane.index, unsigned(request.kind),
                      ucs_status_string(answer.status));
        }
        post_route_reply(&mailbox.reply, gen, answer);
    }
    if (work != 0) {
        abi::store_relaxed(counters_->routes_active, uint64_t(routes_->active()));
    }
    return work;
}

void Relay::check_stall(Lane &lane)
{
    const abi::LaneProducer &producer = lane.block.producer();
    const bool stalled = (abi::load_acquire(producer.head) >= lane.next_seq) &&
                         (abi::load_acquire(producer.doorbell) < lane.next_seq);
    const uint64_t now = monotonic_ns();
    if (!stalled) {
        lane.stalled_since = 0;
        return;
    }
    if (lane.stalled_since == 0) {
        lane.stalled_since    = now;
        lane.next_owner_check = now + kStallNs;
        return;
    }
    if (now < lane.next_owner_check) {
        return;
    }
    lane.next_owner_check = now + kStallNs;
    if (is_alive(lane.owner.pid, lane.owner.start_time)) {
        return;
    }
    /* Its sender died between commit and doorbell: free the lane (the next
     * round drops it). A busy registry lock is tried again later. */
    if (registry_->free_dead_lanes(entry_->view(), Registry::LockWait::kTry) > 0) {
        ucs_debug("pxn: relay lane %u: owner pid %u died before ringing its "
                  "doorbell: lane freed", lane.index, lane.owner.pid);
    }
}


void Relay::sweep_owners(uint64_t now)
{
    if (now < next_sweep_ns_) {
        return;
    }
    next_sweep_ns_ = now + kOwnerSweepNs;
    for (const Lane &lane : lanes_) {
        if ((lane.epoch != 0) &&
            !is_alive(lane.owner.pid, lane.owner.start_time) &&
            (registry_->free_dead_lanes(entry_->view(),
                                        Registry::LockWait::kTry) > 0)) {
            ucs_debug("pxn: relay lane %u: owner pid %u died: lane freed",
                      lane.index, lane.owner.pid);
            return; /* every dead owner's lane is freed: the next rounds
                       drop them */
        }
    }
}

Relay::Pending Relay::pending() const
{
    const uint64_t now = monotonic_ns();
    /* a route's wiring answer is polled for (its frame may wait for the
     * wiring iface's connection) */
    Pending pending    = routes_->wiring() ? Pending::kSoon : Pending::kNone;
    for (const Lane &lane : lanes_) {
        const abi::LaneOwner &owner = lane.block.owner();
        if (abi::load_acquire(owner.lane_epoch) != lane.epoch) {
            if ((lane.epoch != 0) ||
                (abi::load_acquire(owner.state) == abi::kLaneClaimed)) {
                return Pending::kNow;
            }
        }
        if (lane.epoch == 0) {
            continue;
        }
        for (uint32_t i = 0; i < abi::kRouteMailboxes; ++i) {
            const uint64_t gen = route_request_gen(&lane.block.route(i).request);
            if ((gen != 0) && (gen != lane.mailbox_gen[i])) {
                return Pending::kNow;
            }
        }
        const abi::LaneProducer &producer = lane.block.producer();
        if (abi::load_acquire(producer.head) < lane.next_seq) {
            continue;
        }
        if ((abi::load_acquire(producer.doorbell) >= lane.next_seq) &&
            (inflight_ - parked_ < depth_) && !lane.parked) {
            return Pending::kNow;
        }
        /* Not rung yet, or waiting for a piece to free up (whose completion
         * wakes us where the inner transport has events): a sender that
         * died before ringing must not keep us polling past kStallNs. */
        if ((lane.stalled_since == 0) || (now - lane.stalled_since < kStallNs)) {
            pending = Pending::kSoon;
        }
    }
    return pending;
}

} // namespace uct
} // namespace pxn
