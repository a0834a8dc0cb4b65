/*
 * The relay's routes: one table for all its lanes, so that every sender of
 * the node that reaches one target shares one inner ep to it.
 *
 * Contract
 * - A route is an inner ep to one target. to-iface routes are keyed by the
 *   target's inner device and iface address: a request for a key that has
 *   a healthy route gets that route. ep-to-ep routes (rc) are one per
 *   request: each connects to the passive ep its target made for that
 *   sender's endpoint.
 * - Ids are indices below the capacity (UCX_PXN_ROUTES). A route lives
 *   while a lane holds it (refs, one per lane, counted by the relay) or a
 *   piece uses it (inflight); then its inner ep is destroyed and the id is
 *   free. Past the capacity a request is refused with
 *   UCS_ERR_EXCEEDS_LIMIT (logged once per relay).
 * - A piece that ends with a transport error marks its route failed:
 *   later requests for that target get a new inner ep; the failed ep is
 *   destroyed once no piece is in flight on it, its id when its last
 *   holder releases it. So does an inner ep that the inner transport
 *   declares failed (Net::set_ep_failure), with or without a piece on it:
 *   an AM flow waiting for credit from a target that died has none.
 * - Routes to this process itself are refused (UCS_ERR_INVALID_PARAM): no
 *   sender can make the relay write into its own memory through an inner
 *   transport that checks no remote key. `is_local` answers for an address.
 * - Creating an inner ep never waits on the network (pxn_net.h).
 * - Wired (Net::ConnectMode::kWired: rc): a to-iface route is two inner
 *   eps, a to-iface ep of the wiring iface (active-message frames, and the
 *   wiring) and an ep-to-ep ep of the inner transport (RMA). The route is
 *   *wiring* until the target's port answers the wire request (kAmWire,
 *   am_frame.h) sent on the first ep with the second one's address:
 *   wired() tells when RMA may go, usable() is already true, so that
 *   pieces wait for the wiring rather than fail. A route not wired within
 *   `wire_timeout_ns` fails. A route that ends tells the target's port its
 *   ep may go (kAmUnwire).
 *
 * Threading: the engine thread, with the Net lock held.
 */
#ifndef PXN_UCT_PXN_RELAY_ROUTES_H_
#define PXN_UCT_PXN_RELAY_ROUTES_H_

#include "pxn_net.h"

#include <ucs/pxn/route_codec.h>

#include <functional>
#include <vector>

namespace pxn {
namespace uct {

class RouteTable {
public:
    /* Is (device address, iface address) an inner address of this
     * process? */
    using LocalCheck = std::function<bool(const Bytes &dev, const Bytes &iface)>;

    RouteTable(Net *net, uint32_t capacity, LocalCheck is_local,
               uint64_t wire_timeout_ns);
    ~RouteTable();
    RouteTable(const RouteTable&) = delete;
    RouteTable &operator=(const RouteTable&) = delete;

    /* Serves a kRouteToIface, kRouteCreateEp or kRouteConnectEp request
     * (validated by read_route_request). On success the answer's route is
     * held once more (a new route: once); kRouteConnectEp holds nothing new
     * (the lane holds it since kRouteCreateEp). */
    RouteAnswer serve(const RouteMessage &request);
    /* Drops one hold of `id`. */
    void        release(uint32_t id);
    /* `closing(id, ep, failed)` runs just before a route's inner ep is
     * destroyed (ep nullptr when it went before), never inside an inner
     * callback: the last moment to send on it. */
    using Closing = std::function<void(uint32_t id, uct_ep_h ep, bool failed)>;
    void        set_closing(Closing closing) { closing_ = std::move(closing); }

    uint32_t capacity() const { return static_cast<uint32_t>(routes_.size()); }
    /* Has a connected (or wiring) inner ep, not failed. */
    bool     usable(uint32_t id) const
    {
        return (id < routes_.size()) && routes_[id].used &&
               (routes_[id].connected || routes_[id].wiring) &&
               !routes_[id].failed;
    }
    /* RMA may go: connected, not failed. */
    bool     wired(uint32_t id) const
    {
        return usable(id) && routes_[id].connected;
    }
    /* The ep for RMA, and the one for active-message frames. */
    uct_ep_h ep(uint32_t id) const { return routes_[id].ep; }
    uct_ep_h am_ep(uint32_t id) const
    {
        return (routes_[id].wire_ep != nullptr) ? routes_[id].wire_ep :
                                                  routes_[id].ep;
    }
    /* A target port's answer to route `id`'s wire request (kAmWired). */
    void     wired_answer(uint32_t id, uint64_t gen, const Bytes &target_ep);
    /* Sends wire requests that could not go yet and fails routes whose
     * wiring took too long (`now`: monotonic ns; a wiring's clock starts
     * at the first call after it began); true when it did something. */
    bool     progress_wiring(uint64_t now);
    /* Which use of id `id` this is: a new number each time it is given to
     * a target (what the relay keeps per route goes with it). */
    uint64_t gen(uint32_t id) const { return routes_[id].gen; }
    void     piece_started(uint32_t id) { ++routes_[id].inflight; }
    /* May be called from an inner completion callback: nothing is
     * destroyed before collect(). */
    void     piece_finished(uint32_t id, ucs_status_t status);
    /* The inner transport declared `ep` failed (from inside its progress:
     * nothing is destroyed before collect()). */
    void     ep_failed(uct_ep_h ep, ucs_status_t status);
    /* Destroys what piece_finished() left to go (never inside an inner
     * callback: the relay's round calls it first); true when there was
     * something to look at. */
    bool     collect();
    /* Some route is wiring (its relay polls for the answer). */
    bool     wiring() const { return wiring_ != 0; }
    /* Routes in use (for counters and tests). */
    uint32_t active() const { return active_; }

private:
    struct Route {
        Bytes    key;  /* dev | iface (to-iface); empty for ep-to-ep */
        uct_ep_h ep        = nullptr;
        uct_ep_h wire_ep   = nullptr; /* wired: frames and wiring */
        Bytes    wire_request;        /* wired: until it went */
        uint64_t wire_deadline = 0;   /* wired: monotonic ns (0: not set) */
        bool     used      = false;
        bool     wiring    = false;
        bool     connected = false;
        bool     failed    = false;
        uint32_t refs      = 0;
        uint32_t inflight  = 0;
        uint64_t gen       = 0;
    };

    ucs_status_t allocate(uint32_t *id);
    void         maybe_free(uint32_t id);
    RouteAnswer  to_iface(const RouteMessage &request);
    /* wired: the route's RMA ep and its wire request */
    ucs_status_t wire(uint32_t id);
    /* The route's wire request, if it has not gone yet; true if it went. */
    bool         send_wire(Route &route);
    void         destroy_eps(Route &route);
    RouteAnswer  create_ep();
    RouteAnswer  connect_ep(const RouteMessage &request);

    Net               *net_;
    LocalCheck         is_local_;
    Closing            closing_;
    std::vector<Route> routes_;
    std::vector<uint32_t> settled_; /* routes that had their last piece end */
    uint64_t           wire_timeout_ns_;
    uint32_t           wiring_ = 0; /* routes wiring */
    uint32_t           active_ = 0;
    uint64_t           next_gen_ = 0;
    bool               warned_full_ = false;
};

} // namespace uct
} // namespace pxn

#endif
