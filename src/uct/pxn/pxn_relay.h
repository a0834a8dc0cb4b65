/*
 * The relay engine: serves the inbound lanes of one registry entry. For
 * each lane it follows the owner (claims, restarts), answers route requests
 * from the relay-wide route table, picks up published pieces in seq order,
 * validates a private copy of each descriptor, forwards the piece from its
 * slot with the inner transport (put_zcopy for PUT, get_zcopy into the slot
 * for GET; its slices together as one put/get_sgl_zcopy where the inner
 * transport has those), forwards an AM piece's messages to their target
 * ifaces within the credit those grant (pxn_relay_am.cc) and writes
 * completions in seq order.
 *
 * Threading: progress() and everything else run on the engine thread with
 * the Net lock held; inner completion callbacks run inside Net::progress()
 * on that same thread. Nothing here blocks: route requests are served in
 * their own phase of a round, and creating an inner ep does not wait on
 * the network (pxn_net.h).
 *
 * Rules kept (docs/transport.md, "Failure semantics"):
 * - a malformed descriptor or route request gets a failed answer and the
 *   lane goes on;
 * - at most one new piece per lane per round, round-robin over lanes, at
 *   most UCX_PXN_INFLIGHT_DEPTH pieces forwarded at once over all lanes;
 * - route mailboxes are read every kRouteRounds rounds (control traffic;
 *   pending() still sees a request at once);
 * - a lane without a published piece or without credit is skipped, never
 *   waited for;
 * - a new lane incarnation (lane_epoch) is acknowledged only after every
 *   piece of the old one finished; results of old pieces are not written;
 * - an unpacked remote key stays alive while a piece that uses it is in
 *   flight: a descriptor that names a key rewritten meanwhile is refused;
 *   it goes with its route (released by the lane, or failed: the target is
 *   gone) and with the lane (pxn_relay_rkeys.h);
 * - the owners of claimed lanes are checked every kOwnerSweepNs (their
 *   /proc entries): a dead sender's lane is freed, and with it everything
 *   the relay held for it (routes, keys, slots);
 * - a lane whose sender committed a descriptor but never rang its doorbell
 *   keeps the relay polling for at most kStallNs; then the owner's
 *   liveness is checked every kStallNs and a dead owner's lane is freed;
 * - the fence: no inner operation of a piece is posted (first or any later
 *   slice, or a retry) once its sender gave up on the lane incarnation
 *   (LaneProducer::abandoned, written before the sender reports the
 *   failure) or let go of the lane: such pieces end as UCS_ERR_CANCELED
 *   and count as `fenced`. What was posted before stays with the inner
 *   transport.
 */
#ifndef PXN_UCT_PXN_RELAY_H_
#define PXN_UCT_PXN_RELAY_H_

#include "pxn_relay_arena.h"
#include "pxn_relay_rkeys.h"
#include "pxn_relay_routes.h"

#include <ucs/pxn/control_file.h>
#include <ucs/pxn/descriptor.h>
#include <ucs/pxn/registry_entry.h>
#include <ucs/pxn/seq.h>
#include <ucs/pxn/settings.h>
#include <ucs/pxn/slicer.h>

#include <functional>
#include <memory>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace pxn {
namespace uct {

class Relay {
public:
    static constexpr uint64_t kStallNs = 100000000; /* 100 ms */
    static constexpr uint64_t kOwnerSweepNs = 1000000000; /* 1 s */
    static constexpr unsigned kRouteRounds = 8;

    /* The memory of a lane's slots (pxn_relay_arena.h): committed before a
     * new claim is acknowledged (an error becomes the acknowledgement's
     * status, and the sender gives the lane back), released when the lane
     * is free again or changes hands. */
    using CommitLane  = std::function<ucs_status_t(uint32_t lane,
                                                   LaneSlots *slots)>;
    using ReleaseLane = std::function<void(uint32_t lane)>;

    struct Params {
        Net                   *net;
        RegistryEntry         *entry;
        Registry              *registry; /* frees lanes of dead owners */
        RouteTable::LocalCheck is_local;
        CommitLane             commit_lane;
        ReleaseLane            release_lane;
        /* The GPU whose memory holds the slots (a GPU arena), -1 for a
         * host arena: an AM piece's messages go out through inner
         * am_bcopy, which the CPU packs, so from a GPU arena each is first
         * copied into a host buffer (copy_to_host, in that GPU's primary
         * context). */
        int                    slots_gpu = -1;
    };

    /* Everything in `params` must outlive the relay. */
    static ucs_status_t create(const Params &params, const Settings &settings,
                               std::unique_ptr<Relay> *relay);
    ~Relay();
    Relay(const Relay&) = delete;
    Relay &operator=(const Relay&) = delete;

    /* One round over all lanes; returns the work done. */
    unsigned progress();
    /* Pieces forwarded right now. */
    unsigned inflight() const { return inflight_; }
    /* Cheap check for work that appeared, used after announcing sleep:
     * kNow for a doorbell rung with a piece free to take it, a route
     * request or a new owner; kSoon for a committed descriptor whose
     * doorbell has not come (for at most kStallNs: a GPU stream rings it
     * without notifying, so it must be polled for); kNone otherwise. */
    enum class Pending { kNone, kSoon, kNow };
    Pending pending() const;
    /* Frees the lanes of senders that died (at most every kOwnerSweepNs;
     * `now`: monotonic_ns()). */
    void sweep_owners(uint64_t now);
    const RouteTable &routes() const { return *routes_; }

    /* Active messages (pxn_relay_am.cc). The longest message the relay
     * forwards: what one inner AM carries after its frame header, within a
     * slot; 0 where the inner transport has no AM or connects ep to ep
     * (not wired). */
    size_t max_am() const { return am_max_; }
    /* A target's grant for route token `source` (AmPort, this relay's
     * port): credit for AM pieces waiting on it. Unknown tokens (a route
     * gone since) are ignored. */
    void   am_granted(uint64_t source, uint64_t granted);
    /* A target port's answer to the wire request of route `id`
     * (RouteTable::wired_answer). */
    void   wired(uint32_t id, uint64_t gen, const Bytes &target_ep)
    {
        routes_->wired_answer(id, gen, target_ep);
    }

private:
    struct Lane {
        LaneBlock             block;
        uint32_t              index    = 0;
        uint64_t              epoch    = 0; /* acknowledged incarnation */
        ProcessIdentity       owner;        /* of that incarnation */
        uint64_t              next_seq = 1;
        CompletionTracker     tracker;
        unsigned              inflight = 0;
        uint64_t              mailbox_gen[abi::kRouteMailboxes] = {};
        std::vector<uint64_t> held;   /* bit r: holds route r */
        LaneRkeys             rkeys;
        uint64_t              stalled_since = 0; /* head > doorbell since */
        uint64_t              next_owner_check = 0;
        LaneSlots             slots;             /* while committed */
        bool                  committed = false; /* slots' memory */
        bool                  refused   = false; /* acknowledged unusable */
        bool                  parked    = false; /* its AM piece waits for
                                                    credit: no new piece */
    };

    struct Piece;
    /* The completion of a piece's inner operations: standard layout, so
     * that the callback gets back to the piece (ucs_container_of). */
    struct PieceCompletion {
        uct_completion_t comp;
        Piece           *piece;
    };
    static_assert(std::is_standard_layout<PieceCompletion>::value,
                  "ucs_container_of needs a standard-layout type");

    /* The inner operations of one post: one zcopy, or one scatter-gather
     * operation of up to kBatch slices where the inner transport has them
     * (Net::max_sgl, UCX_PXN_RELAY_SGL). */
    static constexpr size_t kBatch = 64;
    struct Batch {
        void      *buffers[kBatch];
        size_t     lengths[kBatch];
        uct_mem_h  memhs[kBatch];
        uint64_t   remote_addrs[kBatch];
        uct_rkey_t rkeys[kBatch];
        size_t     count = 0;
    };

    struct Piece {
        PieceCompletion    done{};
        Relay             *relay  = nullptr;
        Lane              *lane   = nullptr;
        uint64_t           seq    = 0;
        uint64_t           epoch  = 0;
        uint64_t           slot_base = 0; /* offset of the slot in the lane's
                                             memory */
        uint32_t           route  = 0;
        uint64_t           rkeys  = 0;    /* bit k: holds lane rkey k */
        DescriptorSnapshot snapshot;
        Slicer             slicer;
        Batch              batch;
        uint32_t           ops     = 0;    /* inner operations posted */
        uint32_t           sgl_ops = 0;    /* of which scatter-gather */
        bool               has_op = false; /* batch not yet posted, or an
                                              AM message not yet sent */
        bool               wait_wire = false; /* RMA: its route is wiring */
        uint32_t           am_next   = 0; /* AM: next plan (message) */
        uint64_t           am_offset = 0; /* AM: its bytes in the slot */
        bool               am_closed = false; /* AM: its target iface closed
                                                 (the route is sound) */
        bool               am_waiting = false; /* AM: stopped for credit
                                                  (am_credit_waits counted) */
        bool               posting = false;
        bool               active = false;
        ucs_status_t       status = UCS_OK;
    };

    Relay() = default;

    unsigned sync_owner(Lane &lane);
    void     drop_lane(Lane &lane);
    unsigned serve_routes(Lane &lane);
    bool     holds(const Lane &lane, uint32_t route) const
    {
        return (route < routes_->capacity()) &&
               (lane.held[route / 64] & (1ull << (route % 64)));
    }
    void     set_held(Lane &lane, uint32_t route, bool held);
    /* Picks up the lane's next piece, if any, and forwards it: the steps
     * below in this order. Returns 1 when a seq was consumed (forwarded,
     * refused or fenced), 0 when the lane had nothing or no Piece is
     * free. */
    unsigned start_piece(Lane &lane);
    /* The lane is acknowledged and usable, its next seq's doorbell rang
     * (acquire: the descriptor is visible) and that seq's completion slot
     * is free. Reads only. */
    bool     has_new_piece(const Lane &lane) const;
    /* The next seq of a fenced lane: consumed and completed
     * UCS_ERR_CANCELED, counted as `fenced`; nothing reaches the inner
     * transport. */
    void     skip_fenced(Lane &lane);
    /* Consumes the next seq (stamps the pickup wait, releases `consumed`
     * to the sender) and copies its descriptor into `piece`'s snapshot,
     * which everything after reads instead of shared memory. Returns the
     * seq. `piece` stays inactive. */
    uint64_t pick_up(Lane &lane, Piece &piece);
    /* Validates the snapshot against the lane (routes held, geometry,
     * keys: refreshes the lane's unpacked keys it names) and the inner
     * transport (no get without get_zcopy). UCS_OK, or the status to
     * complete with and `*reason`. */
    ucs_status_t check_piece(Lane &lane, const Piece &piece, uint64_t seq,
                             DescReason *reason);
    /* Completes a seq that check_piece() refused: UCS_ERR_UNREACHABLE for a
     * well-formed piece on a held route whose inner ep failed (counted as
     * failed), else `status` (counted as rejected). */
    void     refuse_piece(Lane &lane, uint64_t seq, uint32_t route,
                          ucs_status_t status, DescReason reason);
    /* Makes `piece` the active piece of (lane, seq): route and slot from its
     * snapshot, counted in flight on the lane, the relay and its route.
     * Whatever forwards it ends in finish(). Kind-independent. */
    void     begin_piece(Lane &lane, Piece &piece, uint64_t seq);
    /* RMA forwarding of a begun piece: holds the lane keys its plans name
     * (until finish()), slices its plans and posts them (post()). */
    void     forward_rma(Lane &lane, Piece &piece);
    /* AM forwarding of a begun piece: its messages in plan order, each as
     * one inner AM to the route's target, once the flow (route, target
     * iface) announced itself and has the credit (am_frame.h). A message
     * without credit or inner resources parks the piece (and its lane: no
     * new piece behind it) until a grant or a later round; parked pieces
     * do not count against UCX_PXN_INFLIGHT_DEPTH. A parked piece whose
     * route fails (its inner ep declared failed: RouteTable::ep_failed)
     * ends with UCS_ERR_UNREACHABLE at its next round. */
    void     forward_am(Lane &lane, Piece &piece);
    void     post_am(Piece &piece);
    void     park(Piece &piece, bool parked);
    /* Forgets the AM flows (credit, tokens) of a failed route. */
    void     drop_am_flows(uint32_t route);
    /* A route's inner ep goes (RouteTable::set_closing): a healthy one
     * first carries a bye for each of its flows, so that the target takes
     * back their credit (a bye that cannot go at once is not sent: that
     * credit stays given, as to a relay that died); then its flows are
     * forgotten. */
    void     end_am_flows(uint32_t route, uct_ep_h ep, bool failed);
    /* The fence (above): nothing more of this incarnation goes out. */
    bool     fenced(const Lane &lane) const;
    void     post(Piece &piece);
    /* The piece's next slices into its batch; false when none are left. */
    bool     fill(Piece &piece, size_t max);
    void     finish(Piece &piece);
    Piece   *free_piece();
    /* Writes the completion of `seq` (complete_piece), stamped. */
    void     complete(Lane &lane, uint64_t seq, ucs_status_t status);
    /* A committed descriptor whose doorbell does not come: is its owner
     * still there? */
    void     check_stall(Lane &lane);

    static void piece_completed(uct_completion_t *comp);

    Net                        *net_      = nullptr;
    RegistryEntry              *entry_    = nullptr;
    Registry                   *registry_ = nullptr;
    Geometry                    geometry_;
    SlicePolicy                 policy_{};
    size_t                      batch_put_ = 1; /* slices per inner put */
    size_t                      batch_get_ = 1;
    std::unique_ptr<RouteTable> routes_;
    std::vector<Lane>           lanes_;
    std::vector<Piece>          pieces_;
    unsigned                    inflight_  = 0;
    unsigned                    depth_     = 0; /* UCX_PXN_INFLIGHT_DEPTH */
    unsigned                    parked_    = 0; /* AM pieces waiting */
    /* AM flows: (route << 32 | cookie) -> credit, and token -> that key */
    struct AmFlow {
        uint64_t route_gen  = 0;
        uint64_t token      = 0;
        uint64_t granted    = 0; /* kAmGrantGone: the target iface closed */
        uint64_t sent       = 0;
        bool     hello_sent = false;
    };
    std::unordered_map<uint64_t, AmFlow>   am_flows_;
    std::unordered_map<uint64_t, uint64_t> am_tokens_;
    uint64_t                    am_token_base_ = 0;
    uint64_t                    am_next_token_ = 0;
    size_t                      am_max_ = 0;
    int                         slots_gpu_ = -1;
    std::vector<uint8_t>        am_bounce_; /* GPU arena: one message */
    uint32_t                    next_lane_ = 0;
    uint64_t                    round_     = 0; /* progress() calls */
    uint64_t                    next_sweep_ns_ = 0;
    abi::RelayCounters         *counters_  = nullptr; /* in the control file */
    CommitLane                  commit_lane_;
    ReleaseLane                 release_lane_;
};

} // namespace uct
} // namespace pxn

#endif
