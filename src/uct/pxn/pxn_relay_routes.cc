#include "pxn_relay_routes.h"

#include <ucs/debug/log_def.h>
#include <ucs/pxn/am_frame.h>

#include <new>

namespace pxn {
namespace uct {

RouteTable::RouteTable(Net *net, uint32_t capacity, LocalCheck is_local,
                       uint64_t wire_timeout_ns) :
    net_(net), is_local_(std::move(is_local)), routes_(capacity),
    wire_timeout_ns_(wire_timeout_ns)
{
    net_->set_ep_failure([this](uct_ep_h ep, ucs_status_t status) {
        ep_failed(ep, status);
    });
}

RouteTable::~RouteTable()
{
    net_->set_ep_failure(nullptr);
    for (Route &route : routes_) {
        destroy_eps(route);
    }
}

void RouteTable::destroy_eps(Route &route)
{
    for (uct_ep_h *ep : {&route.ep, &route.wire_ep}) {
        if (*ep != nullptr) {
            net_->ep_destroy(*ep);
            *ep = nullptr;
        }
    }
}

ucs_status_t RouteTable::allocate(uint32_t *id)
{
    for (uint32_t i = 0; i < routes_.size(); ++i) {
        if (!routes_[i].used) {
            routes_[i]      = Route();
            routes_[i].used = true;
            routes_[i].gen  = ++next_gen_;
            ++active_;
            *id = i;
            return UCS_OK;
        }
    }
    if (!warned_full_) {
        warned_full_ = true;
        ucs_warn("pxn: relay has no room for another route: all %zu routes "
                 "(UCX_PXN_ROUTES) are in use", routes_.size());
    }
    return UCS_ERR_EXCEEDS_LIMIT;
}

void RouteTable::maybe_free(uint32_t id)
{
    Route &route = routes_[id];
    if (!route.used || (route.refs != 0) || (route.inflight != 0)) {
        return;
    }
    if (closing_) {
        closing_(id, am_ep(id), route.failed);
    }
    if ((route.wire_ep != nullptr) && !route.failed &&
        route.wire_request.empty()) {
        /* the target's port may let its ep go (best effort: a port whose
         * process ends lets it go anyway) */
        uint8_t frame[sizeof(AmFrameHeader) + 2 + 2 * UINT8_MAX];
        const size_t length = write_am_unwire(frame, sizeof(frame), route.gen,
                                              id + 1, net_->device_address(),
                                              net_->iface_address());
        (void)net_->am_send(route.wire_ep, frame, length, nullptr, 0);
    }
    wiring_ -= route.wiring;
    destroy_eps(route);
    route = Route();
    --active_;
}

RouteAnswer RouteTable::serve(const RouteMessage &request)
{
    switch (request.kind) {
    case abi::kRouteToIface:
        return to_iface(request);
    case abi::kRouteCreateEp:
        return create_ep();
    case abi::kRouteConnectEp:
        return connect_ep(request);
    default:
        return RouteAnswer{UCS_ERR_INVALID_PARAM, 0, {}, {}};
    }
}

RouteAnswer RouteTable::to_iface(const RouteMessage &request)
{
    RouteAnswer answer;
    const uct_iface_attr_t &attr = net_->attr();
    if (!net_->to_iface() || (request.dev.size() != attr.device_addr_len) ||
        (request.iface.size() != net_->iface_addr_len())) {
        answer.status = UCS_ERR_UNREACHABLE;
        return answer;
    }
    if (is_local_(request.dev, request.iface)) {
        ucs_debug("pxn: relay refused a route to its own process");
        answer.status = UCS_ERR_INVALID_PARAM;
        return answer;
    }
    Bytes key(request.dev);
    key.insert(key.end(), request.iface.begin(), request.iface.end());
    for (uint32_t i = 0; i < routes_.size(); ++i) {
        const Route &route = routes_[i];
        if (usable(i) && (route.key == key)) {
            ++routes_[i].refs;
            answer.route = i;
            return answer;
        }
    }
    if (!net_->is_reachable(request.dev.data(), request.iface.data())) {
        answer.status = UCS_ERR_UNREACHABLE;
        return answer;
    }
    uint32_t id;
    answer.status = allocate(&id);
    if (answer.status != UCS_OK) {
        return answer;
    }
    Route &route  = routes_[id];
    const bool wired = (net_->mode() == Net::ConnectMode::kWired);
    answer.status = net_->ep_create_to_iface(request.dev.data(),
                                             request.iface.data(),
                                             wired ? &route.wire_ep : &route.ep);
    if ((answer.status == UCS_OK) && wired) {
        answer.status = wire(id);
    }
    if (answer.status != UCS_OK) {
        destroy_eps(route);
        maybe_free(id);
        return answer;
    }
    route.key       = std::move(key);
    route.connected = !wired;
    route.refs      = 1;
    answer.route    = id;
    return answer;
}

ucs_status_t RouteTable::wire(uint32_t id)
{
    Route &route = routes_[id];
    Bytes relay_ep;
    ucs_status_t status = net_->ep_create_unconnected(&route.ep, &relay_ep);
    if (status != UCS_OK) {
        route.ep = nullptr;
        return status;
    }
    uint8_t frame[sizeof(AmFrameHeader) + 3 + 3 * UINT8_MAX];
    const size_t length = write_am_wire(frame, sizeof(frame), route.gen, id + 1,
                                        net_->device_address(), relay_ep,
                                        net_->iface_address());
    if (length == 0) {
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    try {
        route.wire_request.assign(frame, frame + length);
    } catch (const std::bad_alloc&) {
        return UCS_ERR_NO_MEMORY;
    }
    route.wiring        = true;
    route.wire_deadline = 0; /* the next progress_wiring() sets it */
    ++wiring_;
    (void)send_wire(route); /* now, where it can go */
    return UCS_OK;
}

bool RouteTable::send_wire(Route &route)
{
    if (route.wire_request.empty() ||
        (net_->am_send(route.wire_ep, route.wire_request.data(),
                       route.wire_request.size(), nullptr, 0) != UCS_OK)) {
        return false;
    }
    route.wire_request.clear();
    return true;
}

bool RouteTable::progress_wiring(uint64_t now)
{
    bool did = false;
    for (uint32_t id = 0; (wiring_ != 0) && (id < routes_.size()); ++id) {
        Route &route = routes_[id];
        if (!route.used || !route.wiring || route.failed) {
            continue;
        }
        if (route.wire_deadline == 0) {
            route.wire_deadline = now + wire_timeout_ns_;
        } else if (now > route.wire_deadline) {
            ucs_debug("pxn: relay route %u: no answer to its wiring", id);
            ep_failed(route.wire_ep, UCS_ERR_ENDPOINT_TIMEOUT);
            did = true;
            continue;
        }
        did |= send_wire(route);
    }
    return did;
}

void RouteTable::wired_answer(uint32_t id, uint64_t gen, const Bytes &target_ep)
{
    if ((id >= routes_.size()) || !routes_[id].used || !routes_[id].wiring ||
        routes_[id].failed || (routes_[id].gen != gen)) {
        return; /* an old route's answer, or none asked */
    }
    Route &route = routes_[id];
    route.wiring = false;
    --wiring_;
    const Bytes target_dev(route.key.begin(),
                           route.key.begin() + net_->attr().device_addr_len);
    const ucs_status_t status = (target_ep.size() == net_->attr().ep_addr_len) ?
                                net_->ep_connect(route.ep, target_dev.data(),
                                                 target_ep.data()) :
                                UCS_ERR_INVALID_PARAM;
    if (status != UCS_OK) {
        ucs_debug("pxn: relay route %u: wiring failed: %s", id,
                  ucs_status_string(status));
        ep_failed(route.ep, status);
        return;
    }
    ucs_debug("pxn: relay route %u wired", id);
    route.connected = true;
}

RouteAnswer RouteTable::create_ep()
{
    RouteAnswer answer;
    if (net_->mode() != Net::ConnectMode::kEp) {
        answer.status = UCS_ERR_UNSUPPORTED;
        return answer;
    }
    uint32_t id;
    answer.status = allocate(&id);
    if (answer.status != UCS_OK) {
        return answer;
    }
    Route &route  = routes_[id];
    answer.status = net_->ep_create_unconnected(&route.ep, &answer.relay_ep);
    if (answer.status != UCS_OK) {
        route.ep = nullptr;
        maybe_free(id);
        return answer;
    }
    route.refs       = 1;
    answer.relay_dev = net_->device_address();
    answer.route     = id;
    return answer;
}

RouteAnswer RouteTable::connect_ep(const RouteMessage &request)
{
    RouteAnswer answer;
    answer.route                 = request.route;
    const uct_iface_attr_t &attr = net_->attr();
    if ((request.route >= routes_.size()) || !routes_[request.route].used ||
        routes_[request.route].connected ||
        (request.dev.size() != attr.device_addr_len) ||
        (request.ep.size() != attr.ep_addr_len)) {
        answer.status = UCS_ERR_INVALID_PARAM;
        return answer;
    }
    if (is_local_(request.dev, Bytes())) {
        ucs_debug("pxn: relay refused a route to its own process");
        answer.status = UCS_ERR_INVALID_PARAM;
        return answer;
    }
    Route &route  = routes_[request.route];
    answer.status = net_->ep_connect(route.ep, request.dev.data(),
                                     request.ep.data());
    route.connected = (answer.status == UCS_OK);
    return answer;
}

void RouteTable::release(uint32_t id)
{
    if ((id < routes_.size()) && routes_[id].used && (routes_[id].refs > 0)) {
        --routes_[id].refs;
        maybe_free(id);
    }
}

void RouteTable::piece_finished(uint32_t id, ucs_status_t status)
{
    Route &route = routes_[id];
    --route.inflight;
    /* The target or the path to it is gone: new requests get a new ep. */
    if ((status == UCS_ERR_ENDPOINT_TIMEOUT) ||
        (status == UCS_ERR_CONNECTION_RESET) || (status == UCS_ERR_UNREACHABLE) ||
        (status == UCS_ERR_IO_ERROR)) {
        route.failed = true;
    }
    /* Called from the inner transport's completion callback: its ep may
     * not go now, collect() takes it. */
    if (route.inflight == 0) {
        settled_.push_back(id);
    }
}

void RouteTable::ep_failed(uct_ep_h ep, ucs_status_t status)
{
    for (uint32_t id = 0; id < routes_.size(); ++id) {
        Route &route = routes_[id];
        if (route.used && (ep != nullptr) &&
            ((route.ep == ep) || (route.wire_ep == ep)) && !route.failed) {
            ucs_debug("pxn: relay route %u failed: %s", id,
                      ucs_status_string(status));
            route.failed = true;
            /* With a piece in flight, its end settles the route. */
            if (route.inflight == 0) {
                settled_.push_back(id);
            }
        }
    }
}

bool RouteTable::collect()
{
    if (settled_.empty()) {
        return false;
    }
    for (uint32_t id : settled_) {
        Route &route = routes_[id];
        /* A failed route's ep goes as soon as nothing is in flight on it
         * (what the inner transport holds for its target goes with it),
         * even while lanes still hold the id. */
        if (route.used && route.failed && (route.inflight == 0) &&
            ((route.ep != nullptr) || (route.wire_ep != nullptr))) {
            if (closing_) {
                closing_(id, am_ep(id), true);
            }
            wiring_     -= route.wiring;
            route.wiring = false;
            destroy_eps(route);
        }
        maybe_free(id);
    }
    settled_.clear();
    return true;
}

} // namespace uct
} // namespace pxn
