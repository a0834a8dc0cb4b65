/*
 * Ep (pxn_ep.h): how an ep gets and keeps its route through a relay:
 * route requests and answers, connection to an iface address, the
 * ep-to-ep addresses and handshake, and rerouting after a lane failed.
 */
#include "pxn_ep.h"

#include "pxn_iface.h"

extern "C" {
#include <ucs/debug/log.h>
}

#include <algorithm>
#include <cstring>

namespace pxn {
namespace uct {

void Ep::request_route(const std::shared_ptr<SendLane> &lane,
                       const RouteMessage &message)
{
    asked_ = lane;
    transition(Event::kRouteAsked);
    lane->control().request_route(message, this); /* may answer at once */
}

RouteMessage Ep::route_to_peer() const
{
    RouteMessage message;
    message.kind  = abi::kRouteToIface;
    message.dev   = peer_.inner;
    message.iface = peer_iface_;
    return message;
}

void Ep::route_answered(const RouteAnswer &answer)
{
    std::shared_ptr<SendLane> lane = std::move(asked_);
    asked_.reset();
    if (answer.status == UCS_OK) {
        if ((lane_ != nullptr) && (lane_ != lane)) {
            lane_->control().release_route(route_);
        }
        lane_  = std::move(lane);
        route_ = answer.route;
        transition(Event::kRouteGranted);
        return;
    }
    ucs_debug("pxn: ep %p: no route through relay pid %u: %s", self_,
              lane->relay().identity.pid, ucs_status_string(answer.status));
    transition(Event::kRouteRefused, answer.status);
}

ucs_status_t Ep::connect_to_iface(const DeviceAddress &peer,
                                  const Bytes &inner_iface_addr,
                                  uint32_t am_cookie)
{
    if (!hub_->is_target(peer)) {
        /* This process, or a peer UCP reaches on its own rail: never ours
         * (uct_iface_is_reachable says so too). */
        return UCS_ERR_UNREACHABLE;
    }
    peer_       = peer;
    peer_iface_ = inner_iface_addr;
    am_cookie_  = am_cookie;
    has_peer_   = true;
    to_iface_   = true;
    std::shared_ptr<SendLane> lane;
    ucs_status_t status = hub_->lane_for(peer.rail_hash, &lane);
    if (status != UCS_OK) {
        return status;
    }
    request_route(lane, route_to_peer());
    return UCS_OK;
}

ucs_status_t Ep::prepare_ep_address()
{
    /* The lanes keep spare relay eps in stock from the iface's start
     * (Hub::stock_spares), so this usually takes one at once. An empty
     * stock (the first endpoint of a worker that never progressed, or a
     * burst) is waited for on the lane's control path only, nothing is
     * completed meanwhile, and only while the relay is healthy, for at most
     * kSpareWaitNs in all; a rail still without one is left out of this
     * endpoint's address (it cannot send there: spare_misses). */
    const uint64_t deadline = monotonic_ns() + kSpareWaitNs;
    for (const auto &lane : hub_->all_lanes()) {
        lane->control().want_spares(Hub::kSpareRoutes);
        RouteAnswer spare;
        bool taken;
        while (!(taken = lane->control().take_spare(&spare)) &&
               !lane->failed() && lane->control().relay_healthy(monotonic_ns()) &&
               (monotonic_ns() < deadline)) {
            if (lane->progress_control() == 0) {
                sched_yield();
            }
        }
        if (taken && (spare.status == UCS_OK) && !spare.relay_ep.empty()) {
            candidates_.push_back({lane, spare.route, spare.relay_dev,
                                   spare.relay_ep});
            continue;
        }
        ucs_debug("pxn: ep %p: no spare relay ep at rail %s: this endpoint "
                  "will not send to that rail", self_,
                  lane->relay().rail.c_str());
        __atomic_fetch_add(&hub_->sender_counters().spare_misses, 1,
                           __ATOMIC_RELAXED);
    }
    std::lock_guard<std::mutex> guard(hub_->net().lock());
    return hub_->net().ep_create_unconnected(&passive_, &passive_addr_);
}

bool Ep::is_connected_to(const DeviceAddress *dev, const Bytes *iface,
                         const EpAddress *ep) const
{
    if (!has_peer_) {
        return false; /* not connected to anybody yet */
    }
    if ((dev != nullptr) &&
        ((dev->node_hash != peer_.node_hash) ||
         (dev->rail_hash != peer_.rail_hash) || (dev->inner != peer_.inner))) {
        return false;
    }
    if (to_iface_) {
        return (iface == nullptr) || (*iface == peer_iface_);
    }
    return (ep == nullptr) || (ep->own == peer_ep_);
}

size_t Ep::ep_address_size() const
{
    return kMaxEpAddress;
}

void Ep::pack_ep_address(uint8_t *out) const
{
    EpAddress addr;
    addr.own = passive_addr_;
    for (const Candidate &c : candidates_) {
        addr.relays.push_back({c.lane->rail_hash(), c.relay_dev, c.relay_ep});
        if (addr.packed_size() == 0) {
            addr.relays.pop_back();
            ucs_warn("pxn: ep address too small for all relays: rail %s left out",
                     c.lane->relay().rail.c_str());
        }
    }
    memset(out, 0, kMaxEpAddress);
    addr.pack(out);
}

ucs_status_t Ep::connect_to_ep(const DeviceAddress &peer, const EpAddress &addr)
{
    peer_     = peer;
    peer_ep_  = addr.own;
    has_peer_ = true;
    for (Candidate &c : candidates_) {
        if ((c.lane->rail_hash() == peer.rail_hash) && (asked_ == nullptr)) {
            RouteMessage message;
            message.kind  = abi::kRouteConnectEp;
            message.route = c.route;
            message.dev   = peer.inner;
            message.ep    = addr.own;
            /* The lane holds the route since its creation: connected, it is
             * ours (route_answered() keeps its id). */
            request_route(c.lane, message);
            continue;
        }
        c.lane->control().release_route(c.route);
    }
    candidates_.clear();

    /* The peer's relay of our rail writes into us through our passive ep. */
    const RelayEpAddress *relay = addr.relay_for(hub_->rail_hash());
    ucs_status_t inbound        = UCS_ERR_UNREACHABLE;
    if ((relay != nullptr) && (passive_ != nullptr)) {
        std::lock_guard<std::mutex> guard(hub_->net().lock());
        inbound = hub_->net().ep_connect(passive_, relay->device.data(),
                                         relay->ep.data());
    }
    /* Either direction makes the connection useful: an ep that can only
     * receive answers its sends with UCS_ERR_UNREACHABLE. */
    return ((asked_ != nullptr) || (lane_ != nullptr) || (inbound == UCS_OK)) ?
           UCS_OK : inbound;
}

bool Ep::reroute()
{
    /* Routes of ep-to-ep need a new handshake. */
    const uint64_t now = monotonic_ns();
    if (!to_iface_ || (now < next_reroute_ns_)) {
        return false;
    }
    next_reroute_ns_ = now + kRerouteNs;
    std::shared_ptr<SendLane> lane;
    if ((hub_->lane_for(peer_.rail_hash, &lane) != UCS_OK) || (lane == lane_)) {
        return false;
    }
    request_route(lane, route_to_peer());
    return true;
}

} // namespace uct
} // namespace pxn
