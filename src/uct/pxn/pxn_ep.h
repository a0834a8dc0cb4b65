/*
 * The pxn endpoint: a UCX-facing shell (uct_pxn_ep_t) over pxn::uct::Ep,
 * which binds the endpoint to the lane into this node's relay of the
 * target's rail and to a route of that relay to the target.
 *
 * Connection models (UCX_PXN_NET_CONNECT):
 * - to-iface: uct_ep_create() gets the target's device and iface address
 *   and returns at once: the lane (if new) opens and the route request goes
 *   to the relay in the background. Until the relay's answer operations
 *   return UCS_ERR_NO_RESOURCE (UCP queues them with pending_add, and they
 *   go from iface progress once the route is there). A refused route makes
 *   the ep fail (reported through the iface's error handler).
 * - to-ep: uct_ep_create() knows no target, so the ep takes a spare
 *   unconnected relay ep from every lane (the lanes keep a stock from the
 *   iface's start; an empty one is waited for on the lane's control path,
 *   completing nothing, while the relay is healthy and for at most
 *   kSpareWaitNs: a rail still without one is left out, the ep cannot send
 *   there, counted in spare_misses) and creates its own passive inner ep
 *   (the target end of the peer's routes); its ep address carries all of
 *   them.
 *   connect_to_ep() then connects the route of the target's rail to the
 *   target's passive ep (in the background, as above), connects the
 *   passive ep to the peer's relay of this rail, and releases the other
 *   routes.
 *
 * Direct path: an operation that can no longer go through a relay before
 * any of its bytes were published (relay unhealthy, no ring credit for
 * UCX_PXN_CREDIT_TIMEOUT), and a zcopy issued while the target's rail has
 * no healthy relay (one that exited is seen from its pid before work goes
 * on an idle lane; another is looked for every 100 ms), is sent once with
 * this process's own inner transport straight to the target, when the
 * target is reachable from here (a spine) and the ep knows the target's
 * inner address (to-iface model). Otherwise it fails (a rail-only fabric);
 * short and bcopy operations always do.
 *
 * Failure: an operation that ends with a transport error (relay gone,
 * target unreachable, inner error) marks the ep failed; the iface reports
 * it once through uct_iface_handle_ep_err() from its progress, and later
 * operations return that error.
 *
 * Completion: operations of one ep complete in issue order (they share a
 * lane whose pieces complete in seq order), and only from iface progress,
 * never inside the call that posted them. Flush waits for every operation
 * issued before it, and answers UCS_ERR_NO_RESOURCE while requests are
 * pending (they go first), but not when it is itself dispatched from the
 * pending queue; with UCT_FLUSH_FLAG_CANCEL the operations not yet
 * handed to a relay end as UCS_ERR_CANCELED and the ep is unusable after.
 * Fence holds new operations until those have completed. pending_add says
 * UCS_ERR_BUSY when an operation would be accepted now.
 * Threading: the worker's thread only.
 */
#ifndef PXN_UCT_PXN_EP_H_
#define PXN_UCT_PXN_EP_H_

#include "pxn_hub.h"

extern "C" {
#include <uct/base/uct_iface.h>
}

#include <atomic>
#include <deque>
#include <memory>
#include <type_traits>
#include <vector>

namespace pxn {
namespace uct {

class Ep final : public SendOwner, public RouteClient {
public:
    /* `active`: the iface's list of endpoints that its progress must visit
     * (want_progress()); outlives the ep. */
    Ep(Hub *hub, uct_ep_h self, std::vector<Ep*> *active) :
        hub_(hub), self_(self), active_(active) {}
    ~Ep();
    Ep(const Ep&) = delete;
    Ep &operator=(const Ep&) = delete;

    /* `am_cookie`: the peer iface's (its address); 0 where it receives no
     * active messages. */
    ucs_status_t connect_to_iface(const DeviceAddress &peer,
                                  const Bytes &inner_iface_addr,
                                  uint32_t am_cookie = 0);
    ucs_status_t prepare_ep_address();
    size_t       ep_address_size() const;
    void         pack_ep_address(uint8_t *out) const;
    ucs_status_t connect_to_ep(const DeviceAddress &peer, const EpAddress &addr);
    /* Whether this ep is connected to the peer these addresses name (each
     * may be absent: nullptr): its device, and its iface address
     * (to-iface) or ep address (to-ep). */
    bool         is_connected_to(const DeviceAddress *dev, const Bytes *iface,
                                 const EpAddress *ep) const;

    ucs_status_t put_short(const void *buffer, unsigned length,
                           uint64_t remote_addr, uct_rkey_t rkey);
    ssize_t      put_bcopy(uct_pack_callback_t pack, void *arg,
                           uint64_t remote_addr, uct_rkey_t rkey);
    ucs_status_t get_bcopy(uct_unpack_callback_t unpack, void *arg,
                           size_t length, uint64_t remote_addr,
                           uct_rkey_t rkey, uct_completion_t *comp);
    /* Active messages (pxn_ep_am.cc): one message each, staged in the call
     * as a plan of an AM piece (am_frame.h), to the peer iface's handler
     * `id`; order, completion and failure as put_short/put_bcopy. am_zcopy
     * copies too, and so is done (UCS_OK, comp unused) once staged; its
     * message is the header (host memory, at most kAmMaxHeader bytes) and
     * the payload (host or GPU memory, at most am_max_zcopy(), kAmMaxIov
     * elements). */
    static constexpr size_t kAmMaxHeader = 128;
    static constexpr size_t kAmMaxIov    = 16;
    static size_t am_max_zcopy(size_t max_am)
    {
        return (max_am > kAmMaxHeader) ? (max_am - kAmMaxHeader) : 0;
    }
    ucs_status_t am_short(uint8_t id, uint64_t header, const void *payload,
                          unsigned length);
    ucs_status_t am_short_iov(uint8_t id, const uct_iov_t *iov, size_t iovcnt);
    ssize_t      am_bcopy(uint8_t id, uct_pack_callback_t pack, void *arg);
    ucs_status_t am_zcopy(uint8_t id, const void *header,
                          unsigned header_length, const uct_iov_t *iov,
                          size_t iovcnt);
    ucs_status_t zcopy(abi::Op op, const uct_iov_t *iov, size_t iovcnt,
                       uint64_t remote_addr, uct_rkey_t rkey,
                       uct_completion_t *comp);
    /* put/get_sgl_zcopy (pxn_ep_sgl.cc): one request of `count` elements
     * (each `counts[i]` blocks `strides[i]` apart, when given). */
    ucs_status_t sgl(abi::Op op, void *const *buffers, const size_t *lengths,
                     const uint64_t *remote_addrs, const uct_rkey_t *rkeys,
                     const size_t *counts, const size_t *strides, size_t count,
                     uct_completion_t *comp);
    ucs_status_t flush(unsigned flags, uct_completion_t *comp);
    ucs_status_t fence();
    /* UCS_ERR_BUSY (not added) when an operation would go now. */
    ucs_status_t pending_add(uct_pending_req_t *req);
    void         pending_purge(uct_pending_purge_callback_t cb, void *arg);

    /* From iface progress: dispatch pending requests. */
    unsigned     progress_pending();
    bool         idle() const { return issued_ == completed_; }
    /* Iface progress has something to do here: pending requests, direct
     * operations, a failure to report, a lane that failed under the
     * route. */
    bool         needs_progress() const;
    /* Puts the ep on the iface's active list (once). */
    void         want_progress();
    /* After a visit: true (and off the list) when nothing is left. */
    bool         settle();

    /* Made before a fork, in the parent (fork.h). */
    bool         inherited() const { return hub_->inherited(); }
    /* A failure the iface must report through UCT's error handler (peer
     * failure), once: UCS_OK when none. */
    ucs_status_t take_error();
    uct_ep_h     uct_ep() const { return self_; }

    void op_done(ucs_status_t status) override;
    bool fall_back(const SendRequest &req, const uint8_t *rkey,
                   uint16_t rkey_length) override;
    void route_answered(const RouteAnswer &answer) override;

private:
    struct Candidate {
        std::shared_ptr<SendLane> lane;
        uint32_t                  route;
        Bytes                     relay_dev;
        Bytes                     relay_ep;
    };

    /* An operation sent on the direct path (this process's own inner
     * iface to the target) after it could not be published to a relay.
     * Posted and finished on the application thread; its inner completion
     * runs on the engine thread and only sets `done`. */
    struct DirectOp;
    /* The inner completion of a direct operation: standard layout, so that
     * the callback gets back to the operation (ucs_container_of). */
    struct DirectCompletion {
        uct_completion_t comp;
        DirectOp        *op;
    };
    static_assert(std::is_standard_layout<DirectCompletion>::value,
                  "ucs_container_of needs a standard-layout type");

    struct DirectOp {
        DirectCompletion    inner{};
        std::atomic<bool>   done{false};
        SendRequest         req;  /* copy: segments, remote address, op */
        uct_rkey_t          rkey;
        uint32_t            posted = 0; /* segments posted */
    };

    /* The ep's lifecycle, as operations see it. state_ changes only in
     * transition(). The resources stand apart, whatever the state: asked_
     * (the lane a route request is out on: cancelled at destruction) and
     * lane_/route_ (the route held: released at destruction; lane_ is set
     * by the first grant and never cleared). */
    enum class State : uint8_t {
        kUnrouted,  /* no route, none asked: an ep-to-ep ep before
                       connect_to_ep() or whose route was refused; it only
                       receives (sends: UCS_ERR_UNREACHABLE, not latched) */
        kRouting,   /* its first route request is out (NO_RESOURCE) */
        kRouted,    /* a route on lane_; once that lane failed the next
                       operation reroutes, goes direct or fails the ep */
        kRerouting, /* routed, and a request for a route through another
                       relay of the rail is out (NO_RESOURCE) */
        kCanceled,  /* flushed with UCT_FLUSH_FLAG_CANCEL: unusable */
        kFailed,    /* error_: every operation returns it; the iface
                       reports it once (take_error) */
    };
    enum class Event : uint8_t {
        kRouteAsked,   /* request_route() sent a request (asked_) */
        kRouteGranted, /* route_answered(): lane_/route_ are the new route */
        kRouteRefused, /* route_answered(): refused with `status` */
        kCanceled,     /* flush with UCT_FLUSH_FLAG_CANCEL */
        kFailed,       /* an operation failed with `status`, or none can
                          go any more (UCS_ERR_UNREACHABLE) */
    };
    /* The one place state_ changes. kFailed keeps the first error and
     * overrides kCanceled, never the reverse; a refused first route of a
     * to-iface ep fails it (a canceled one too); an ep entering kFailed
     * asks for iface progress (the report). */
    void         transition(Event event, ucs_status_t status = UCS_OK);
    /* The explicit step before an operation (and from progress once the
     * lane failed), of an ep made in this process (not inherited()); does
     * nothing unless kRouted or kUnrouted: checks the relay of an idle
     * lane is alive (a /proc read at most every 20 ms:
     * LaneControl::check_relay_alive) and, once the lane failed (or there
     * is none), asks another relay of the rail for a route (at most every
     * kRerouteNs; an answer at once is checked in turn). With no route to
     * be had the ep fails (UCS_ERR_UNREACHABLE), unless `direct_ok` and
     * the direct path may take the operation, or it is an ep-to-ep ep
     * that never had a route. */
    void         check_route(bool direct_ok);
    /* Pure query (no syscall, no transition) of an ep made in this
     * process: UCS_OK when an operation may go now, through the lane or,
     * where `direct` is given and there is no usable lane, on the direct
     * path (*direct = true); else what it gets: the latched error,
     * UCS_ERR_CANCELED, UCS_ERR_UNREACHABLE (no route: ep-to-ep),
     * UCS_ERR_NO_RESOURCE (a route on its way, the lane renewing, pending
     * requests first, a fence). */
    ucs_status_t send_status(bool *direct = nullptr) const;
    /* What every operation asks first: UCS_ERR_UNREACHABLE for a fork
     * child's ep (fork.h), else check_route() then send_status(). */
    ucs_status_t admit(bool *direct = nullptr);
    /* An active message of `length` bytes (at most `max`) to handler `id`
     * of the peer: the peer receives them and the ep may send (admit()). */
    ucs_status_t admit_am(uint8_t id, size_t length, size_t max);
    ucs_status_t stage_am(const char *what, uint8_t id, const void *header,
                          size_t header_length, const uct_iov_t *iov,
                          size_t iovcnt, size_t max, bool device_payload);
    /* Asks a (new) relay of the target's rail for a route; false when there
     * is none. */
    bool         reroute();
    void         request_route(const std::shared_ptr<SendLane> &lane,
                               const RouteMessage &message);
    /* to-iface: a route to the peer's inner device and iface address. */
    RouteMessage route_to_peer() const;
    bool         can_go_direct() const;
    ucs_status_t zcopy_direct(abi::Op op, const uct_iov_t *iov, size_t iovcnt,
                              uint64_t remote_addr, uct_rkey_t rkey,
                              uct_completion_t *comp);
    ucs_status_t flush_cancel(uct_completion_t *comp);
    bool         has_resources() const;
    ucs_status_t lane_rkey(uct_rkey_t rkey, uint32_t *index);
    ssize_t      pack_without_key(uct_pack_callback_t pack, void *arg);
    bool         post_direct(DirectOp &op);
    unsigned     progress_direct();
    static void  direct_done(uct_completion_t *comp);

    /* The flags below are not the lifecycle (state_) and stay flags:
     * queued_ is the iface's visit list, reported_ the one report of
     * kFailed's error, rkey_starved_ why the last operation was refused,
     * to_iface_ and has_peer_ how and to whom the ep was connected (fixed
     * once set), direct_failed_ the direct path's own fate, dispatching_ a
     * re-entry guard of progress_pending(). */
    Hub                      *hub_;
    uct_ep_h                  self_;
    std::vector<Ep*>         *active_;
    State                     state_    = State::kUnrouted;
    ucs_status_t              error_    = UCS_OK; /* kFailed's cause */
    bool                      queued_   = false; /* on *active_ */
    bool                      reported_ = false; /* error_ went to UCT */
    bool                      rkey_starved_ = false; /* last refusal: no
                                                        free rkey entry */
    std::shared_ptr<SendLane> lane_;      /* the route's lane (if any) */
    uint32_t                  route_ = 0;
    std::shared_ptr<SendLane> asked_;     /* a route request is out on it */
    bool                      to_iface_  = false;
    bool                      has_peer_  = false;
    DeviceAddress             peer_;
    Bytes                     peer_iface_;
    Bytes                     peer_ep_;   /* to-ep: the peer's own inner ep */

    /* to-ep model */
    std::vector<Candidate>    candidates_;
    uct_ep_h                  passive_ = nullptr;
    Bytes                     passive_addr_;

    uint64_t                  issued_    = 0;
    uint32_t                  am_cookie_ = 0; /* the peer iface's */
    uint64_t                  completed_ = 0;
    uint64_t                  fence_at_  = 0;
    std::deque<std::pair<uint64_t, uct_completion_t*>> flushes_;

    /* direct path (fallback) */
    uct_ep_h                  direct_ep_ = nullptr;
    bool                      direct_failed_ = false; /* tried once, no path */
    static constexpr uint64_t kRerouteNs = 100000000; /* looks for a new relay */
    /* the longest uct_ep_create waits for spare relay eps (ep-to-ep) */
    static constexpr uint64_t kSpareWaitNs = 100000000;
    uint64_t                  next_reroute_ns_ = 0;
    std::vector<std::pair<Bytes, uct_rkey_bundle_t>> direct_rkeys_;
    std::vector<std::unique_ptr<DirectOp>> direct_ops_;
    std::deque<uct_pending_req_t*> pending_;
    std::vector<uint8_t>      scratch_; /* pack_without_key() */
    std::vector<ScatterSegment> scatter_; /* sgl()'s elements, reused */
    bool                      dispatching_ = false; /* in a pending callback */
};

/* check_route() and send_status() are inline: every operation runs them
 * (admit()), as one pass. */
inline void Ep::check_route(bool direct_ok)
{
    do { /* again after a route answered at once: a new lane */
        if ((state_ != State::kRouted) && (state_ != State::kUnrouted)) {
            return;
        }
        if ((state_ == State::kRouted) && lane_->idle()) {
            lane_->check_relay_alive();
        }
        if ((state_ == State::kRouted) && !lane_->failed()) {
            return;
        }
    } while (reroute());
    if ((direct_ok && can_go_direct()) ||
        ((state_ == State::kUnrouted) && !to_iface_)) {
        return; /* send_status() says direct, or unreachable (ep-to-ep) */
    }
    transition(Event::kFailed, UCS_ERR_UNREACHABLE);
}

inline ucs_status_t Ep::send_status(bool *direct) const
{
    switch (state_) {
    case State::kFailed:
        return error_;
    case State::kCanceled:
        return UCS_ERR_CANCELED;
    case State::kRouting:
    case State::kRerouting:
        return UCS_ERR_NO_RESOURCE; /* a relay is setting up our route */
    case State::kUnrouted:
    case State::kRouted:
        break;
    }
    if ((state_ == State::kUnrouted) || lane_->failed()) {
        if ((direct == nullptr) || !can_go_direct()) {
            return UCS_ERR_UNREACHABLE; /* ep-to-ep: receive only */
        }
        *direct = true;
    } else if (lane_->opening()) {
        return UCS_ERR_NO_RESOURCE; /* renewing at a seq wrap */
    }
    /* Requests waiting in the pending queue go first, except for the one
     * being dispatched from it. */
    if ((!pending_.empty() && !dispatching_) || (completed_ < fence_at_)) {
        return UCS_ERR_NO_RESOURCE;
    }
    return UCS_OK;
}

} // namespace uct
} // namespace pxn

typedef struct uct_pxn_ep {
    uct_base_ep_t    super;
    pxn::uct::Ep    *impl;
} uct_pxn_ep_t;

UCS_CLASS_DECLARE(uct_pxn_ep_t, const uct_ep_params_t*);
UCS_CLASS_DECLARE_NEW_FUNC(uct_pxn_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DECLARE_DELETE_FUNC(uct_pxn_ep_t, uct_ep_t);

ucs_status_t uct_pxn_ep_put_short(uct_ep_h tl_ep, const void *buffer,
                                  unsigned length, uint64_t remote_addr,
                                  uct_rkey_t rkey) noexcept;
ssize_t      uct_pxn_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack,
                                  void *arg, uint64_t remote_addr,
                                  uct_rkey_t rkey) noexcept;
ucs_status_t uct_pxn_ep_am_short(uct_ep_h tl_ep, uint8_t id, uint64_t header,
                                 const void *payload, unsigned length) noexcept;
ucs_status_t uct_pxn_ep_am_short_iov(uct_ep_h tl_ep, uint8_t id,
                                     const uct_iov_t *iov, size_t iovcnt) noexcept;
ssize_t      uct_pxn_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id,
                                 uct_pack_callback_t pack, void *arg,
                                 unsigned flags) noexcept;
ucs_status_t uct_pxn_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id, const void *header,
                                 unsigned header_length, const uct_iov_t *iov,
                                 size_t iovcnt, unsigned flags,
                                 uct_completion_t *comp) noexcept;
ucs_status_t uct_pxn_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                  size_t iovcnt, uint64_t remote_addr,
                                  uct_rkey_t rkey, uct_completion_t *comp) noexcept;
ucs_status_t uct_pxn_ep_get_bcopy(uct_ep_h tl_ep, uct_unpack_callback_t unpack,
                                  void *arg, size_t length, uint64_t remote_addr,
                                  uct_rkey_t rkey, uct_completion_t *comp) noexcept;
ucs_status_t uct_pxn_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                  size_t iovcnt, uint64_t remote_addr,
                                  uct_rkey_t rkey, uct_completion_t *comp) noexcept;
ucs_status_t uct_pxn_ep_flush(uct_ep_h tl_ep, unsigned flags,
                              uct_completion_t *comp) noexcept;
ucs_status_t uct_pxn_ep_fence(uct_ep_h tl_ep, unsigned flags) noexcept;
ucs_status_t uct_pxn_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req,
                                    unsigned flags) noexcept;
void         uct_pxn_ep_pending_purge(uct_ep_h tl_ep,
                                      uct_pending_purge_callback_t cb,
                                      void *arg) noexcept;
ucs_status_t uct_pxn_ep_get_address(uct_ep_h tl_ep, uct_ep_addr_t *addr) noexcept;
ucs_status_t uct_pxn_ep_connect_to_ep(uct_ep_h tl_ep,
                                      const uct_device_addr_t *dev_addr,
                                      const uct_ep_addr_t *ep_addr) noexcept;
#ifdef PXN_UCX_EP_PUT_SGL_ZCOPY
ucs_status_t uct_pxn_ep_put_sgl_zcopy(uct_ep_h ep, void *const *buffers,
                                      const size_t *lengths, uct_mem_h const *memhs,
                                      const uint64_t *remote_addrs,
                                      uct_rkey_t const *rkeys,
                                      const size_t *counts, const size_t *strides,
                                      size_t count, uct_completion_t *comp) noexcept;
#endif
#ifdef PXN_UCX_EP_GET_SGL_ZCOPY
ucs_status_t uct_pxn_ep_get_sgl_zcopy(uct_ep_h ep, void *const *buffers,
                                      const size_t *lengths, uct_mem_h const *memhs,
                                      const uint64_t *remote_addrs,
                                      uct_rkey_t const *rkeys,
                                      const size_t *counts, const size_t *strides,
                                      size_t count, uct_completion_t *comp) noexcept;
#endif
/* UCT's ep_is_connected with each address optional (nullptr). */
int          uct_pxn_ep_is_connected(uct_ep_h tl_ep,
                                     const uct_device_addr_t *dev_addr,
                                     const uct_iface_addr_t *iface_addr,
                                     const uct_ep_addr_t *ep_addr) noexcept;

#endif
