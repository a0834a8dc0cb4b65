/*
 * The relay engine: serves the inbound lanes of this process's registry
 * entry. For each lane it follows the owner (claims, restarts), answers
 * route requests by creating inner eps, picks up published pieces in seq
 * order, validates a private copy of each descriptor, forwards the piece
 * from its slot with the inner transport (put_zcopy for PUT, get_zcopy into
 * the slot for GET) and writes completions in seq order.
 *
 * Threading: progress() and everything else run on the engine thread with
 * the Net lock held; inner completion callbacks run inside Net::progress()
 * on that same thread. Nothing here blocks.
 *
 * Rules kept (docs/design.md "Ownership and failure rules"):
 * - a malformed descriptor gets a failed completion and its slot back;
 * - at most one new piece per lane per round, round-robin over lanes, at
 *   most UCX_PXN_INFLIGHT_DEPTH pieces forwarded at once over all lanes;
 * - a lane without a published piece or without credit is skipped, never
 *   waited for;
 * - a new lane incarnation (lane_epoch) is acknowledged only after every
 *   piece of the old one finished; results of old pieces are not written.
 */
#ifndef PXN_UCT_PXN_RELAY_H_
#define PXN_UCT_PXN_RELAY_H_

#include "pxn_net.h"

#include <ucs/pxn/control_file.h>
#include <ucs/pxn/descriptor.h>
#include <ucs/pxn/registry_entry.h>
#include <ucs/pxn/seq.h>
#include <ucs/pxn/settings.h>
#include <ucs/pxn/slicer.h>

#include <memory>
#include <vector>

namespace pxn {
namespace uct {

class Relay {
public:
    /* `arena` of geometry.arena_size() bytes, registered with the inner md
     * (`arena_memh`). Everything must outlive the relay. */
    static ucs_status_t create(Net *net, RegistryEntry *entry, uint8_t *arena,
                               uct_mem_h arena_memh, const Settings &settings,
                               std::unique_ptr<Relay> *relay);
    ~Relay();
    Relay(const Relay&) = delete;
    Relay &operator=(const Relay&) = delete;

    /* One round over all lanes; returns the work done. */
    unsigned progress();
    /* Pieces forwarded right now. */
    unsigned inflight() const { return inflight_; }
    /* Cheap check for work that appeared (doorbells, routes, owners), used
     * after announcing sleep. */
    bool has_work() const;
    const abi::RelayCounters &counters() const { return *counters_; }

private:
    struct Route {
        uint64_t gen       = 0;
        uct_ep_h ep        = nullptr;
        bool     connected = false;
    };

    struct Rkey {
        uint64_t          gen = 0;
        uct_rkey_bundle_t bundle{};
        bool              valid = false;
    };

    struct Lane {
        LaneBlock         block;
        uint64_t          epoch    = 0; /* acknowledged incarnation; 0: none */
        ProcessIdentity   owner;        /* of the acknowledged incarnation */
        uint64_t          next_seq = 1;
        CompletionTracker tracker;
        unsigned          inflight = 0;
        Route             routes[abi::kMaxRoutes];
        Rkey              rkeys[abi::kMaxRkeys];
    };

    struct Piece {
        uct_completion_t   comp; /* first: the callback casts back */
        Relay             *relay  = nullptr;
        Lane              *lane   = nullptr;
        uint64_t           seq    = 0;
        uint64_t           epoch  = 0;
        uint64_t           slot_base = 0; /* offset of the slot in the arena */
        uct_ep_h           ep     = nullptr;
        DescriptorSnapshot snapshot;
        Slicer             slicer;
        InnerOp            op{};
        bool               has_op = false; /* op not yet posted */
        bool               posting = false;
        bool               active = false;
        ucs_status_t       status = UCS_OK;
    };

    Relay() = default;

    unsigned sync_owner(Lane &lane);
    void     drop_lane(Lane &lane);
    unsigned serve_routes(Lane &lane);
    void     serve_route(Lane &lane, uint32_t index, uint64_t gen);
    unsigned start_piece(Lane &lane, uint32_t lane_index);
    uint64_t refresh_rkeys(Lane &lane, const DescriptorSnapshot &snapshot);
    void     post(Piece &piece);
    void     finish(Piece &piece);
    Piece   *free_piece();

    static void piece_completed(uct_completion_t *comp);

    Net                *net_   = nullptr;
    RegistryEntry      *entry_ = nullptr;
    uint8_t            *arena_ = nullptr;
    uct_mem_h           memh_  = nullptr;
    Geometry            geometry_;
    SlicePolicy         policy_{};
    std::vector<Lane>   lanes_;
    std::vector<Piece>  pieces_;
    std::vector<uint8_t> rkey_buf_;
    unsigned            inflight_ = 0;
    uint32_t            next_lane_ = 0;
    abi::RelayCounters *counters_ = nullptr; /* in the control file */
};

} // namespace uct
} // namespace pxn

#endif
