#include "pxn_relay_routes.h"

#include <ucs/debug/log_def.h>

namespace pxn {
namespace uct {

RouteTable::RouteTable(Net *net, uint32_t capacity, LocalCheck is_local) :
    net_(net), is_local_(std::move(is_local)), routes_(capacity)
{
    net_->set_ep_failure([this](uct_ep_h ep, ucs_status_t status) {
        ep_failed(ep, status);
    });
}

RouteTable::~RouteTable()
{
    net_->set_ep_failure(nullptr);
    for (Route &route : routes_) {
        if (route.ep != nullptr) {
            net_->ep_destroy(route.ep);
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
        closing_(id, route.ep, route.failed);
    }
    if (route.ep != nullptr) {
        net_->ep_destroy(route.ep);
    }
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
    if ((net_->mode() != Net::ConnectMode::kIface) ||
        (request.dev.size() != attr.device_addr_len) ||
        (request.iface.size() != attr.iface_addr_len)) {
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
        if (route.used && route.connected && !route.failed &&
            (route.key == key)) {
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
    answer.status = net_->ep_create_to_iface(request.dev.data(),
                                             request.iface.data(), &route.ep);
    if (answer.status != UCS_OK) {
        route.ep = nullptr;
        maybe_free(id);
        return answer;
    }
    route.key       = std::move(key);
    route.connected = true;
    route.refs      = 1;
    answer.route    = id;
    return answer;
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
        if (route.used && (route.ep == ep) && !route.failed) {
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
            (route.ep != nullptr)) {
            if (closing_) {
                closing_(id, route.ep, true);
            }
            net_->ep_destroy(route.ep);
            route.ep = nullptr;
        }
        maybe_free(id);
    }
    settled_.clear();
    return true;
}

} // namespace uct
} // namespace pxn
