/*
 * The data path of one sender lane: this sender's channel into the relay
 * that serves one other rail of this node (control: pxn_lane_control.h).
 *
 * Pipeline (docs/transport.md, "Data path"):
 *   put -> request queued on the lane -> pieces (PieceBuilder): ring credit
 *   (seq - reaped <= K), payload into slot (seq - 1) % K (Stager),
 *   descriptor committed (release), head stored (release), doorbell rung
 *   by the stager once the bytes are there, relay notified -> progress()
 *   reads completions in seq order (a GET piece's copies out of its slot
 *   start then), and once a slot's copies out are done completes its
 *   requests and returns the slot (reaped, release), in seq order.
 *
 * Pieces are filled across operations: consecutive operations of the same
 * kind (put/get) to the same route share a piece until it is full or holds
 * UCX_PXN_PIECE_OPS segments with a slot free for the next; an open piece
 * is published by progress() when the relay has nothing else in flight or
 * after 50 us, and by flush. A request completes when all its
 * bytes were staged and every piece carrying them was reaped, so a piece
 * can never complete a request early.
 *
 * Ownership (docs/transport.md, "Failure semantics"): before a piece is published it may still fail
 * (relay unhealthy, credit timeout); after publication only the relay's
 * completion, an epoch change of the relay, its heartbeat timeout (a frozen
 * relay) or its death (checked every 20 ms while the lane has work) decide
 * the outcome, and nothing is ever re-sent.
 *
 * Operations on a lane that is still opening (or renewing at a seq wrap)
 * return UCS_ERR_NO_RESOURCE: the caller retries or queues them (UCT's
 * pending queue) and they go once the lane is ready.
 *
 * Threading: only the sender's thread (its UCT worker) touches a SendLane.
 * No locks or allocation on the data path once the request pool is warm;
 * the only syscall is the relay's liveness check (its /proc entry, at most
 * every 20 ms and only while the lane has work).
 */
#ifndef PXN_UCT_PXN_SEND_LANE_H_
#define PXN_UCT_PXN_SEND_LANE_H_

#include "pxn_lane_control.h"
#include "pxn_stager.h"

#include <ucs/pxn/piece_builder.h>
#include <ucs/pxn/seq.h>

#include <algorithm>
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
     * and counts the fallback); false: the request fails. `rkey` is the
     * packed inner rkey. */
    virtual bool fall_back(const struct SendRequest &req, const uint8_t *rkey,
                           uint16_t rkey_length) = 0;

protected:
    ~SendOwner() = default;
};

/* The bytes a UCT iov names, as SendRequest::add_iov() counts them (each
 * element `count` times; a count of 0 is once). */
inline size_t iov_bytes(const uct_iov_t *iov, size_t iovcnt)
{
    size_t total = 0;
    for (size_t i = 0; i < iovcnt; ++i) {
        total += iov[i].length * std::max<size_t>(iov[i].count, 1);
    }
    return total;
}

/* One UCT operation: an iov to one contiguous remote range, or a
 * scatter-gather list (put/get_sgl_zcopy) whose segments each have their
 * remote address and key. */
struct SendRequest {
    static constexpr uint32_t kMaxIov     = 16;
    static constexpr uint32_t kMaxScatter = 4096; /* segments of an SGL */

    /* Appends the non-empty elements of a UCT iov as segments; false when
     * they are more than kMaxIov. */
    bool add_iov(const uct_iov_t *iov, size_t iovcnt);
    uint64_t bytes() const;

    uct_completion_t *comp;
    SendOwner        *owner;
    abi::Op           op;
    uint32_t          route;
    uint32_t          rkey_index;  /* the contiguous remote range's key */
    uint64_t          rkeys;       /* bit i: holds the lane's rkey entry i */
    uint64_t          remote_addr;
    IoSegment         segs[kMaxIov];
    uct_mem_h         memh[kMaxIov]; /* the caller's (inner) memh, direct path */
    bool              scattered;   /* an SGL: its segments are in scatter */
    std::vector<ScatterSegment> scatter;
    uint32_t          nsegs;
    OpCursor          cursor;  /* how far it is staged */
    uint64_t          pieces;  /* published pieces carrying it, not reaped */
    bool              staged;  /* every byte is in a piece */
    ucs_status_t      status;
};

/* What tells the kinds of operation apart on the sender, as data: one
 * staging path serves them all, and a new kind (active messages) adds a
 * row, not a path. Indexed by abi::Op. */
struct OpKind {
    bool         packs;  /* its payload goes sender -> slot in the posting
                            call (put); else the slot takes the target's
                            reply, copied out when reaped (get) */
    ucs_status_t staged; /* what stage_now() returns once it is staged:
                            UCS_OK (nothing left for the caller to wait
                            for) or UCS_INPROGRESS (its comp follows) */
    bool         keyed;  /* names a remote key (the lane's rkey entry) */
    bool         empty;  /* a zero-length one still goes (a message) */
    bool         prompt; /* its piece is published in the posting call:
                            a message must reach its receiver with no more
                            progress of the sender, as with UCX's own
                            transports (an application may send one and
                            then wait for its answer elsewhere: NIXL's
                            notification before nixlbench's barrier); RMA
                            waits for a flush, which publishes */
};

inline constexpr OpKind kOpKinds[] = {
    {false, UCS_ERR_INVALID_PARAM, false, false, false}, /* 0: no operation */
    {true,  UCS_OK,                true,  false, false}, /* abi::kOpPut */
    {false, UCS_INPROGRESS,        true,  false, false}, /* abi::kOpGet */
    {true,  UCS_OK,                false, true,  true},  /* abi::kOpAm */
};
static_assert((abi::kOpPut == 1) && (abi::kOpGet == 2) && (abi::kOpAm == 3),
              "kOpKinds' rows");

/* An operation staged whole in the posting call (SendLane::stage_now):
 * one segment to one remote range, on the lane's rkey entry `rkey`. */
struct ImmediateOp {
    abi::Op               op;
    uint32_t              route;
    uint32_t              rkey;
    uint64_t              remote_addr;
    size_t                length;  /* packing kinds: the most pack() may
                                      write; others: the reply's length */
    uct_completion_t     *comp   = nullptr; /* completed after op_done() */
    uct_unpack_callback_t unpack = nullptr; /* non-packing kinds: gets the
                                               reply, with arg */
    void                 *arg    = nullptr;
    uint64_t              group  = 0; /* PieceBuilder's: an AM's target
                                         iface (its cookie) */
};

/* stage_now()'s pack for kinds that pack nothing: never called. */
struct NoPack {
    ssize_t operator()(uint8_t *) const { return 0; }
};

class SendLane {
public:
    /* The lane opens in the background (LaneControl); `counters` is shared
     * by the lanes of the process and updated atomically; `failures`
     * (optional, the sender's thread's) counts lanes that failed. */
    SendLane(Registry *registry, std::unique_ptr<PeerMapping> mapping,
             const ProcessIdentity &self, const Settings &settings, int gpu,
             abi::SenderCounters *counters, uint64_t *failures = nullptr);
    ~SendLane();
    SendLane(const SendLane&) = delete;
    SendLane &operator=(const SendLane&) = delete;

    LaneControl    &control() { return control_; }
    const PeerInfo &relay() const { return control_.relay(); }
    uint32_t        rail_hash() const { return rail_hash_; }
    /* Ready, healthy relay, no failure seen. No syscall. */
    bool            usable() const { return usable_at(monotonic_ns()); }
    /* Opening or renewing: operations will go later. */
    bool            opening() const
    {
        return !control_.failed() && !control_.ready();
    }
    bool            failed() const { return control_.failed(); }

    /* Immediate staging (put_short, put_bcopy, get_bcopy): the operation
     * goes whole into the open piece (or a new one) in the call, and
     * *length says how many bytes. A kind that packs (kOpKinds) has
     * pack(dest) write at most op.length bytes into the slot and return
     * how many (ssize_t), or a negative ucs_status_t that this returns;
     * other kinds take op.length bytes of reply into the slot, handed to
     * op.unpack when the piece is reaped (pack is not called). Returns the
     * kind's `staged` status once staged, UCS_OK for 0 bytes (nothing
     * staged, nothing delivered), UCS_ERR_NO_RESOURCE while operations are
     * queued, the lane opens or has no ring credit, UCS_ERR_UNREACHABLE on
     * a failed lane. Once staged, owner->op_done() (and op.comp) follow
     * when the relay delivered the piece. Inline: no allocation once the
     * request pool is warm, no indirect call but pack's own. */
    template<typename Pack = NoPack>
    ucs_status_t stage_now(SendOwner *owner, const ImmediateOp &op,
                           size_t *length, Pack &&pack = Pack());

    /* Queued operation (zcopy): UCS_INPROGRESS, or UCS_ERR_NO_RESOURCE if
     * the queue is full. The iov stays valid until completion. */
    ucs_status_t post(SendOwner *owner, abi::Op op, uint32_t route,
                      uint32_t rkey, uint64_t remote_addr, const uct_iov_t *iov,
                      size_t iovcnt, uct_completion_t *comp);
    /* A queued scatter-gather operation (segments copied; their memory
     * stays valid until completion), whose keys (the rkey entries of
     * `rkeys`) the caller already holds (rkey_hold): the request takes the
     * holds over when it returns UCS_INPROGRESS. No direct path. */
    ucs_status_t post_scattered(SendOwner *owner, abi::Op op, uint32_t route,
                                const ScatterSegment *segs, size_t count,
                                uint64_t rkeys, uct_completion_t *comp);

    /* Ends the requests of `owner` none of whose bytes were staged yet
     * with UCS_ERR_CANCELED (delivered from progress). */
    void     cancel(SendOwner *owner);
    /* Any operation would be accepted now (UCT's pending_add BUSY): ready,
     * nothing queued, ring credit for a new piece. No syscall. */
    bool     has_room() const
    {
        return usable_at(monotonic_ns()) && !failed_ && queue_.empty() &&
               !window_.needs_reestablish() &&
               (window_.in_flight() < geometry_.slots);
    }
    /* The control path only: claim, acknowledgement, route mailboxes and
     * spares; nothing is reaped, staged or completed (the bounded wait of
     * an ep-to-ep uct_ep_create for a spare relay ep). */
    unsigned progress_control();
    /* Opens, reaps, stages, publishes, and delivers the completions of
     * requests that ended (the only place they are delivered: never inside
     * a posting call, UCT's rule); returns the work done. */
    unsigned progress();
    /* Publishes the open piece (flush). */
    void     publish_open();
    /* Fails everything not yet completed (relay gone); the completions go
     * from progress(). */
    void     fail_all(ucs_status_t status);
    /* Nothing queued, open, in flight or waiting for delivery. */
    bool     idle() const;
    /* Failed, and every completion delivered: nothing left to progress. */
    bool     spent() const { return failed_ && finished_.empty(); }
    /* See LaneControl::check_relay_alive(); fails the lane's work when the
     * relay is gone. */
    bool     check_relay_alive(bool force = false);

private:
    /* Counters shared by the lanes of every worker of the process. */
    static void count(uint64_t &counter, uint64_t by = 1)
    {
        __atomic_fetch_add(&counter, by, __ATOMIC_RELAXED);
    }
    struct SlotRecord {
        abi::Op                   op;
        ucs_status_t              status; /* its completion's, once read */
        std::vector<SendRequest*> requests;
        /* GET: where the slot's bytes go, in slot order */
        struct GetDest {
            uint64_t              addr;
            uint64_t              length;
            uct_unpack_callback_t unpack; /* get_bcopy; else a copy to addr */
            void                 *arg;
        };
        std::vector<GetDest> get_dest;
    };

    bool         usable_at(uint64_t now) const
    {
        return control_.ready() && control_.relay_healthy(now);
    }
    /* The clock, read once per operation or progress call: every check of
     * that call uses now_ns_. */
    uint64_t     tick() { return now_ns_ = monotonic_ns(); }
    bool         alive(bool force);
    /* The lane became usable: window, records, stager. */
    ucs_status_t start(bool renewed);
    /* progress_control() of an open lane; *data: the data path may run. */
    unsigned     advance_control(bool *data);
    /* A request from the pool, its fields reset and these set; the pool
     * grows by one when empty (std::bad_alloc when it cannot, nothing
     * changed). */
    SendRequest *alloc_request(SendOwner *owner, abi::Op op, uint32_t route,
                               uint32_t rkey, uint64_t remote_addr,
                               uct_completion_t *comp);
    void         free_request(SendRequest *req);
    /* Queues a request taken from the pool (given back if the queue cannot
     * grow: std::bad_alloc, nothing held), holds the lane keys `hold` and
     * stages what fits: UCS_INPROGRESS. */
    ucs_status_t enqueue(SendRequest *req, uint64_t hold);
    void         request_piece_done(SendRequest *req, ucs_status_t status);
    /* The request ended: its completion waits for deliver(). */
    void         finish_request(SendRequest *req) { finished_.push_back(req); }
    unsigned     deliver();
    /* A new piece of (op, route, group) for `large` (the request to stage,
     * nullptr for a whole operation) once the open one is published; false
     * while the lane cannot take one (no ring credit, opening, failed). */
    bool         open_piece(abi::Op op, uint32_t route, uint64_t group = 0,
                            const SendRequest *large = nullptr);
    SlotRecord  &open_record()
    {
        return records_[slot_of(builder_.seq(), geometry_.slots)];
    }
    void         add_to_piece(SendRequest *req);
    /* Room in the open piece's record for `req` (and a GET destination),
     * so that staging it cannot fail half-way; on std::bad_alloc `req`
     * goes back to the pool and the exception goes on. */
    void         make_record_room(SendRequest *req, bool get_dest);
    void         hold_rkeys(uint64_t rkeys);
    void         drop_rkeys(uint64_t rkeys);
    uint64_t     append(SendRequest *req);
    void         publish();
    bool         piece_due() const;
    unsigned     stage();
    unsigned     reap();
    /* A GET piece's bytes to their destinations (may still run). */
    ucs_status_t copy_out(uint32_t slot, const SlotRecord &record);
    void         check_health();
    /* What a posting call answers when the lane is not usable now:
     * UCS_ERR_NO_RESOURCE while it opens, else UCS_ERR_UNREACHABLE. A
     * relay found unhealthy here fails the lane first, as check_health()
     * would at the next progress: its published pieces are fenced and
     * fail, so that nothing accepted earlier can still go out through a
     * relay that thaws before the sender progresses again. */
    ucs_status_t refuse_post();
    /* The relay's heartbeat went stale: one warning, the lane fails. */
    void         fail_unhealthy();
    void         quarantine();
    /* Ends a request taken out of the queue unpublished: direct path or
     * failure with `status`. */
    void         give_up(SendRequest *req, ucs_status_t status);

    LaneControl                   control_;
    const Settings               *settings_;
    Geometry                      geometry_;
    int                           gpu_;
    uint32_t                      rail_hash_ = 0;
    uint64_t                      credit_timeout_ns_ = 0;
    std::unique_ptr<Stager>       stager_;
    SendWindow                    window_;
    uint64_t                      published_ = 0;
    uint64_t                      read_ = 0; /* completions read, <= published_ */
    bool                          failed_ = false; /* data path gave up */
    bool                          counted_ = false; /* in counters->lanes */

    PieceBuilder                  builder_;
    uint64_t                      piece_bytes_ = 0; /* piece_bytes_for() */
    uint64_t                      open_since_ns_ = 0;
    uint64_t                      open_start_ns_ = 0; /* the lane's claim */

    std::vector<SlotRecord>       records_;
    std::deque<SendRequest*>      queue_;
    std::vector<SendRequest*>     finished_;   /* ended, not yet delivered */
    std::vector<SendRequest*>     delivering_; /* deliver()'s batch */
    std::vector<SendRequest*>     pool_;
    std::vector<std::unique_ptr<SendRequest>> requests_;
    uint64_t                      now_ns_ = 0; /* see tick() */
    uint64_t                      stall_since_ns_ = 0;
    uint64_t                      next_health_ns_ = 0;
    abi::SenderCounters          *counters_ = nullptr;
    uint64_t                     *failures_ = nullptr;
};

template<typename Pack>
ucs_status_t SendLane::stage_now(SendOwner *owner, const ImmediateOp &op,
                                 size_t *length, Pack &&pack)
{
    const OpKind &kind = kOpKinds[op.op];
    *length            = 0;
    if (!usable_at(tick())) {
        return refuse_post();
    }
    if ((op.length == 0) && !kind.empty) {
        return UCS_OK;
    }
    /* Queued operations go first; a new piece needs ring credit. */
    if (!queue_.empty() || (op.length > geometry_.slot_size) ||
        (!builder_.accepts(op.op, op.route, op.length, op.group) &&
         !open_piece(op.op, op.route, op.group))) {
        return UCS_ERR_NO_RESOURCE;
    }
    size_t bytes = op.length;
    if (kind.packs) {
        const uint32_t slot   = slot_of(builder_.seq(), geometry_.slots);
        const uint64_t offset = builder_.length();
        const ssize_t packed  = pack(stager_->pack_area(slot, offset, bytes));
        if ((packed < 0) || ((packed == 0) && !kind.empty)) {
            /* nothing was added: an error, or nothing to deliver */
            return (packed < 0) ? static_cast<ucs_status_t>(packed) : UCS_OK;
        }
        bytes = static_cast<size_t>(packed);
        if ((bytes != 0) && (stager_->packed(slot, offset, bytes) != UCS_OK)) {
            quarantine();
            return UCS_ERR_IO_ERROR;
        }
    }
    SendRequest *req = alloc_request(owner, op.op, op.route, op.rkey,
                                     op.remote_addr, op.comp);
    make_record_room(req, !kind.packs);
    if (!kind.keyed) {
        req->rkeys = 0;
    }
    req->staged = true;
    hold_rkeys(req->rkeys);
    add_to_piece(req);
    if (!kind.packs) {
        open_record().get_dest.push_back({0, bytes, op.unpack, op.arg});
    }
    builder_.add(op.remote_addr, bytes, op.rkey);
    if (kind.prompt || piece_due()) {
        publish();
    }
    *length = bytes;
    return kind.staged;
}

} // namespace uct
} // namespace pxn

#endif
