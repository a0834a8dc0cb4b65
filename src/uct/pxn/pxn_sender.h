/*
 * The sender side of one lane: this process's channel into the relay that
 * serves one other rail of this node.
 *
 * Pipeline (docs/design.md "One cross-rail put, end to end"):
 *   put -> request queued on the lane -> pieces: ring credit (seq - reaped
 *   <= K), payload copied into slot (seq - 1) % K, descriptor committed
 *   (release), head and doorbell stored (release), relay notified ->
 *   progress() reaps completions in seq order into the requests, then
 *   returns the slot (reaped, release).
 *
 * Pieces are filled across operations: consecutive operations of the same
 * kind (put/get) to the same route share a piece until it is full; an open
 * piece is published by progress() when the relay has nothing else in
 * flight or after 50 us, and by flush. A request completes
 * when all its bytes were staged and every piece carrying them was reaped,
 * so a piece can never complete a request early.
 *
 * Ownership (design.md): before a piece is published it may still fail
 * (relay unhealthy, credit timeout); after publication only the relay's
 * completion, an epoch change of the relay, its heartbeat timeout (a frozen
 * relay) or its death (checked every 20 ms while the lane has work) decide
 * the outcome, and nothing is ever re-sent.
 *
 * Threading: only the application's thread (UCT iface progress, ep ops)
 * touches a SendLane. No syscalls, locks or allocation on the data path
 * once the lane's request pool is warm (the health check reads the relay's
 * /proc entry at most every 20 ms, and only while the lane has work); route setup and lane claim are
 * control-path operations that wait, bounded, for the relay.
 */
#ifndef PXN_UCT_PXN_SENDER_H_
#define PXN_UCT_PXN_SENDER_H_

#include "pxn_stager.h"

#include <ucs/pxn/abi.h>
#include <ucs/pxn/address.h>
#include <ucs/pxn/control_file.h>
#include <ucs/pxn/os_resource.h>
#include <ucs/pxn/peer_mapping.h>
#include <ucs/pxn/registry.h>
#include <ucs/pxn/seq.h>
#include <ucs/pxn/wakeup.h>

#include <uct/api/uct.h>

#include <deque>
#include <memory>
#include <vector>

namespace pxn {
namespace uct {

/* Receives the end of every operation an owner (an ep) issued, in issue
 * order per lane. */
class SendOwner {
public:
    virtual void op_done(ucs_status_t status) = 0;
    /* A request none of whose bytes were published can no longer go
     * through the relay: the owner may send it on a direct path. true: the
     * owner took it over (it completes comp, if any, calls op_done itself
     * and counts the fallback);
     * false: the request fails. `rkey` is the packed pxn rkey blob. */
    virtual bool fall_back(const struct SendRequest &req, const uint8_t *rkey,
                           uint16_t rkey_length) = 0;

protected:
    ~SendOwner() = default;
};

/* One UCT operation. */
struct SendRequest {
    static constexpr uint32_t kMaxIov = 16;

    struct Seg {
        uint64_t  addr;
        uint64_t  length;
        uct_mem_h memh; /* the caller's (inner) memh, for a direct path */
    };

    /* Appends the non-empty elements of a UCT iov as segments; false when
     * they are more than kMaxIov. */
    bool add_iov(const uct_iov_t *iov, size_t iovcnt);

    uct_completion_t *comp;
    SendOwner        *owner;
    abi::Op           op;
    uint32_t          route;
    uint32_t          rkey_index;
    uint64_t          remote_addr;
    Seg               segs[kMaxIov];
    uint32_t          nsegs;
    /* staging cursor */
    uint32_t          seg;
    uint64_t          seg_offset;
    uint64_t          remote_offset;
    /* completion */
    uint64_t          pieces;  /* published pieces carrying it, not reaped */
    bool              staged;  /* every byte is in a piece */
    ucs_status_t      status;
    uint64_t          queued_ns;
};

class SendLane {
public:
    ~SendLane();
    SendLane(const SendLane&) = delete;
    SendLane &operator=(const SendLane&) = delete;

    /* Maps the relay, claims a lane and waits (bounded) for the relay to
     * acknowledge it, maps its arena and wakeup. */
    static ucs_status_t open(Registry *registry, const PeerInfo &relay,
                             const ProcessIdentity &self, const Settings &settings,
                             abi::SenderCounters *counters,
                             std::unique_ptr<SendLane> *lane);

    const PeerInfo &relay() const { return mapping_->info(); }
    uint32_t        rail_hash() const { return rail_hash_; }
    /* Healthy relay and no failure seen. No syscall. */
    bool            usable() const;

    /* Routes: control path, each waits for the relay's reply (bounded by
     * the heartbeat timeout). */
    ucs_status_t route_to_iface(const Bytes &dev_addr, const Bytes &iface_addr,
                                uint32_t *route);
    ucs_status_t route_ep_create(uint32_t *route, Bytes *relay_dev_addr,
                                 Bytes *relay_ep_addr);
    ucs_status_t route_ep_connect(uint32_t route, const Bytes &dev_addr,
                                  const Bytes &ep_addr);
    void         route_release(uint32_t route);

    /* Index of `packed` in the lane's rkey table, writing it if new.
     * UCS_ERR_NO_RESOURCE: every entry is in use by in-flight pieces. */
    ucs_status_t rkey_index(const uint8_t *packed, uint16_t length,
                            uint32_t *index);

    /* Immediate staging (short/bcopy): pack(dest) writes at most
     * max_length bytes into the slot and returns how many; they are staged
     * when this returns UCS_OK. owner->op_done() follows when the relay
     * delivered them (not called for 0 bytes). */
    template<typename Pack>
    ucs_status_t put_now(SendOwner *owner, uint32_t route, uint32_t rkey,
                         uint64_t remote_addr, size_t max_length, Pack &&pack,
                         size_t *length);

    /* get_bcopy: the whole reply lands in one piece; unpack(arg, data,
     * length) runs when it is reaped, then comp completes. UCS_INPROGRESS,
     * or UCS_ERR_NO_RESOURCE without ring credit. */
    ucs_status_t get_now(SendOwner *owner, uint32_t route, uint32_t rkey,
                         uint64_t remote_addr, size_t length,
                         uct_unpack_callback_t unpack, void *arg,
                         uct_completion_t *comp);

    /* Queued operation (zcopy): UCS_INPROGRESS, or UCS_ERR_NO_RESOURCE if
     * the queue is full. The iov stays valid until completion. */
    ucs_status_t post(SendOwner *owner, abi::Op op, uint32_t route,
                      uint32_t rkey, uint64_t remote_addr, const uct_iov_t *iov,
                      size_t iovcnt, uct_completion_t *comp);

    /* Reaps, stages, publishes; returns the work done. */
    unsigned progress();
    /* Publishes the open piece (flush). */
    void     publish_open();
    /* Fails everything not yet completed (relay gone). */
    void     fail_all(ucs_status_t status);
    bool     idle() const;
    /* false once the relay is known to have exited: reads its /proc entry
     * (pid and start time) at most every 20 ms, and fails the lane when it
     * is gone. progress() calls it while the lane has work; an ep calls it
     * before putting work on an idle lane, so that a relay that died
     * meanwhile is known before anything is published to it. */
    bool     check_relay_alive();

private:
    struct SlotRecord {
        abi::Op                   op;
        uint64_t                  rkeys; /* bit i: uses rkey entry i */
        std::vector<SendRequest*> requests;
        /* GET: where the slot's bytes go, in slot order */
        struct GetDest {
            uint64_t              addr;
            uint64_t              length;
            uct_unpack_callback_t unpack; /* get_bcopy; else memcpy to addr */
            void                 *arg;
        };
        std::vector<GetDest> get_dest;
    };

    struct RkeySlot {
        uint64_t  gen    = 0;
        uint32_t  users  = 0; /* published or open pieces using it */
        uint16_t  length = 0;
        uint8_t   packed[abi::kRkeyMax];
    };

    SendLane() = default;

    ucs_status_t map_arena(const PeerInfo &relay, const Settings &settings);
    void         populate_slots();
    void         stage_bytes(uint8_t *slot, const void *src, uint64_t length);
    void         copy_out(const SlotRecord::GetDest &dest,
                          const uint8_t *src);
    void         quarantine();
    ucs_status_t wait_route_reply(uint32_t route, uint64_t gen);
    ucs_status_t reestablish();
    /* A request from the pool, its fields reset and these set. */
    SendRequest *alloc_request(SendOwner *owner, abi::Op op, uint32_t route,
                               uint32_t rkey, uint64_t remote_addr,
                               uct_completion_t *comp);
    void         free_request(SendRequest *req);
    void         request_piece_done(SendRequest *req, ucs_status_t status);
    void         finish_request(SendRequest *req);
    bool         open_piece(abi::Op op, uint32_t route);
    bool         piece_fits(abi::Op op, uint32_t route, uint64_t length) const;
    void         add_to_piece(SendRequest *req, uint32_t rkey);
    uint64_t     append(SendRequest *req);
    void         publish();
    unsigned     stage();
    unsigned     reap();
    uint8_t     *slot_ptr(uint64_t seq) const;
    void         check_health();
    /* Ends a request taken out of the queue unpublished: direct path or
     * failure with `status`. */
    void         give_up(SendRequest *req, ucs_status_t status);

    Registry                     *registry_ = nullptr;
    std::unique_ptr<PeerMapping>  mapping_;
    ProcessIdentity               self_;
    LaneBlock                     block_;
    uint32_t                      lane_index_ = 0;
    uint32_t                      rail_hash_  = 0;
    Geometry                      geometry_;
    uint64_t                      credit_timeout_ns_ = 0;
    SharedMapping                 arena_;     /* host arena */
#ifdef PXN_HAVE_CUDA
    std::unique_ptr<CudaStager>   stager_;    /* GPU arena */
    const CudaDriver             *cu_ = nullptr;
    std::vector<uint8_t>          bounce_;
#endif
    SenderWakeup                  wakeup_;
    SendWindow                    window_;
    uint64_t                      published_ = 0;
    bool                          failed_ = false;
    bool                          held_   = false; /* counted in lanes */

    /* routes */
    uint64_t                      route_gen_[abi::kMaxRoutes] = {};
    bool                          route_used_[abi::kMaxRoutes] = {};

    /* rkeys */
    RkeySlot                      rkeys_[abi::kMaxRkeys];
    uint64_t                      rkey_gen_ = 0;

    /* the open piece */
    bool                          open_       = false;
    uint64_t                      open_seq_   = 0;
    abi::Op                       open_op_    = abi::kOpPut;
    uint32_t                      open_route_ = 0;
    uint64_t                      open_len_   = 0;
    uint64_t                      open_since_ns_ = 0;
    std::vector<abi::Plan>        plans_;
    uint32_t                      nplans_     = 0;

    std::vector<SlotRecord>       records_;
    std::deque<SendRequest*>      queue_;
    std::vector<SendRequest*>     pool_;
    std::vector<std::unique_ptr<SendRequest>> requests_;
    uint64_t                      stall_since_ns_ = 0;
    uint64_t                      next_health_ns_ = 0;
    uint64_t                      next_liveness_ns_ = 0;
    abi::SenderCounters          *counters_ = nullptr; /* shared by the lanes of an iface */
};

template<typename Pack>
ucs_status_t SendLane::put_now(SendOwner *owner, uint32_t route, uint32_t rkey,
                               uint64_t remote_addr, size_t max_length,
                               Pack &&pack, size_t *length)
{
    if (!usable()) {
        return UCS_ERR_UNREACHABLE;
    }
    /* Queued operations go first; a new piece needs ring credit. */
    if (!queue_.empty() || (max_length > geometry_.slot_size) ||
        (!piece_fits(abi::kOpPut, route, max_length) &&
         !open_piece(abi::kOpPut, route))) {
        return UCS_ERR_NO_RESOURCE;
    }
#ifdef PXN_HAVE_CUDA
    if (stager_ != nullptr) {
        /* A GPU slot: pack on the host, then stage it like any source.
         * The bounce buffer is reused at once: copy it now. */
        bounce_.resize(std::max<size_t>(bounce_.size(), max_length));
        *length = pack(bounce_.data());
        if ((*length != 0) &&
            (stager_->copy_now(slot_of(open_seq_, geometry_.slots),
                               bounce_.data(), open_len_, *length) != UCS_OK)) {
            quarantine();
            return UCS_ERR_IO_ERROR;
        }
    } else
#endif
    {
        *length = pack(slot_ptr(open_seq_) + open_len_);
    }
    if (*length == 0) {
        return UCS_OK; /* nothing to deliver */
    }
    SendRequest *req = alloc_request(owner, abi::kOpPut, route, rkey,
                                     remote_addr, nullptr);
    if (req == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    req->staged = true;
    ++rkeys_[rkey].users;
    add_to_piece(req, rkey);
    plans_[nplans_++] = abi::Plan{remote_addr, static_cast<uint32_t>(*length),
                                  rkey};
    open_len_ += *length;
    if ((open_len_ == geometry_.slot_size) || (nplans_ == geometry_.max_plan)) {
        publish();
    }
    return UCS_OK;
}

} // namespace uct
} // namespace pxn

#endif
