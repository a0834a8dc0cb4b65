/*
 * Piece builder: fills the open piece of one lane with the operations a
 * sender stages, in issue order. The sender's one way of turning operations
 * into descriptors; knows nothing of shared memory or copies.
 *
 * Contract
 * - A piece is one slot: at most slot_size bytes and max_plan plans, of one
 *   op (PUT, GET or AM), one route and one group (the caller's: an AM
 *   piece's target iface, so that one gone target fails only its own
 *   messages; 0 for PUT and GET). Plans tile the slot: a plan's bytes sit
 *   at the sum of the lengths of the plans before it (abi::Plan rule).
 * - A piece may be opened with a smaller size: fill() stops there, and the
 *   piece is full() and accepts() nothing more once it holds that much. A
 *   whole plan (add()) may still take it past that size, up to the slot.
 * - fill() appends as much of an operation as the open piece takes, one
 *   plan per contiguous part (an operation's segment, or the part of it
 *   that fits), and reports every part to the caller (who copies it, or
 *   records where a GET reply goes). The operation's cursor moves past what
 *   was placed; an operation larger than a slot straddles pieces. Its
 *   remote side is contiguous from one address (IoSegment) or given per
 *   segment with its own key (ScatterSegment: an SGL operation).
 *   Zero-length segments are skipped and never planned.
 * - add() appends one plan the caller fills itself (short/bcopy packing):
 *   the caller checked accepts() for its length.
 * - A piece with no plan is never published (the caller's rule: it opens a
 *   piece only with something to put in it).
 *
 * Allocation: init() sizes the plan array once; nothing else allocates.
 * Threading: one owner (the lane's sender).
 */
#ifndef PXN_PIECE_BUILDER_H_
#define PXN_PIECE_BUILDER_H_

#include "abi.h"
#include "settings.h"

#include <ucs/type/status.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace pxn {

/* The local side of an operation: its source (PUT) or destination (GET)
 * ranges, in order; remote bytes are contiguous from the op's address. */
struct IoSegment {
    uint64_t addr;
    uint64_t length;
};

/* One element of a scatter-gather operation (UCT's put/get_sgl_zcopy):
 * a local range and the remote range of the same length it goes to or
 * comes from, with its own remote key. */
struct ScatterSegment {
    uint64_t addr;
    uint64_t length;
    uint64_t remote_addr;
    uint32_t rkey;
};

/* How far an operation has been placed into pieces. */
struct OpCursor {
    uint32_t seg           = 0; /* current segment */
    uint64_t seg_offset    = 0; /* bytes of it already placed */
    uint64_t remote_offset = 0; /* bytes of the op already placed
                                   (contiguous remote side) */

    bool started() const { return (seg != 0) || (seg_offset != 0); }
};

/* One contiguous part of an operation placed in the open piece. */
struct Placement {
    uint64_t addr;        /* local address of the part */
    uint64_t slot_offset; /* where its bytes sit in the slot */
    uint64_t length;
};

struct PlanLimits {
    uint64_t slot_size;
    uint32_t max_plan;

    static PlanLimits of(const Geometry &g) { return {g.slot_size, g.max_plan}; }
};

class PieceBuilder {
public:
    /* UCS_ERR_INVALID_PARAM: slot_size 0 or above UINT32_MAX (a plan's
     * length is 32 bits), max_plan 0; UCS_ERR_NO_MEMORY. */
    ucs_status_t init(const PlanLimits &limits);

    bool     is_open() const { return open_; }
    /* size: where the piece is full, 0 or above slot_size: at slot_size. */
    void     open(uint64_t seq, abi::Op op, uint32_t route, uint64_t group = 0,
                  uint64_t size = 0);
    /* Ends the open piece; its fields stay readable until the next open(). */
    void     close() { open_ = false; }

    /* The open piece is of (op, route, group) and has room for `length`
     * more bytes in one more plan. */
    bool accepts(abi::Op op, uint32_t route, uint64_t length,
                 uint64_t group = 0) const
    {
        return open_ && (op_ == op) && (route_ == route) && (group_ == group) &&
               (length_ < size_) && (length <= limits_.slot_size - length_) &&
               (count_ < limits_.max_plan);
    }
    bool full() const
    {
        return (length_ >= size_) || (count_ == limits_.max_plan);
    }

    /* One plan of `length` bytes for remote_addr with `rkey`; returns its
     * slot offset. Precondition: accepts(op(), route(), length). */
    uint64_t add(uint64_t remote_addr, uint64_t length, uint32_t rkey)
    {
        const uint64_t offset = length_;
        plans_[count_++]      = abi::Plan{remote_addr,
                                          static_cast<uint32_t>(length), rkey};
        length_              += length;
        return offset;
    }

    /* Places the operation (segments `segs`, remote bytes from
     * remote_addr, `rkey`) from `cursor` on until it is done or the piece is
     * full; place(const Placement&) is called for each part. Returns the
     * bytes placed. Precondition: the piece is open and of the op's kind. */
    template<typename Place>
    uint64_t fill(const IoSegment *segs, uint32_t nsegs, uint64_t remote_addr,
                  uint32_t rkey, OpCursor *cursor, Place &&place)
    {
        return fill_with(segs, nsegs, cursor, [&](const IoSegment &) {
            return abi::Plan{remote_addr + cursor->remote_offset, 0, rkey};
        }, place);
    }

    /* The same for a scatter-gather operation: each segment has its own
     * remote address and key. */
    template<typename Place>
    uint64_t fill(const ScatterSegment *segs, uint32_t nsegs, OpCursor *cursor,
                  Place &&place)
    {
        return fill_with(segs, nsegs, cursor, [&](const ScatterSegment &seg) {
            return abi::Plan{seg.remote_addr + cursor->seg_offset, 0, seg.rkey};
        }, place);
    }

    uint64_t         seq() const { return seq_; }
    abi::Op          op() const { return op_; }
    uint32_t         route() const { return route_; }
    uint64_t         length() const { return length_; }
    uint64_t         size() const { return size_; }
    uint32_t         count() const { return count_; }
    const abi::Plan *plans() const { return plans_.data(); }
    const PlanLimits &limits() const { return limits_; }

private:
    /* fill()'s loop; remote(seg) gives the remote address and key of the
     * segment's next byte. */
    template<typename Seg, typename Remote, typename Place>
    uint64_t fill_with(const Seg *segs, uint32_t nsegs, OpCursor *cursor,
                       Remote &&remote, Place &&place)
    {
        uint64_t placed = 0;
        while ((cursor->seg < nsegs) && !full()) {
            const Seg &seg   = segs[cursor->seg];
            const uint64_t n = std::min(seg.length - cursor->seg_offset,
                                        size_ - length_);
            if (n != 0) {
                const abi::Plan to    = remote(seg);
                const uint64_t offset = add(to.remote_addr, n, to.rkey_index);
                place(Placement{seg.addr + cursor->seg_offset, offset, n});
                cursor->seg_offset    += n;
                cursor->remote_offset += n;
                placed                += n;
            }
            if (cursor->seg_offset == seg.length) {
                ++cursor->seg;
                cursor->seg_offset = 0;
            }
        }
        /* A full piece leaves trailing empty segments behind: skip them, so
         * that an operation with no bytes left is done. */
        while ((cursor->seg < nsegs) && (segs[cursor->seg].length == 0)) {
            ++cursor->seg;
        }
        return placed;
    }

    PlanLimits             limits_ = {0, 0};
    std::vector<abi::Plan> plans_;
    bool                   open_   = false;
    uint64_t               seq_    = 0;
    abi::Op                op_     = abi::kOpPut;
    uint32_t               route_  = 0;
    uint64_t               group_  = 0;
    uint64_t               size_   = 0; /* full at this length */
    uint64_t               length_ = 0;
    uint32_t               count_  = 0;
};

} // namespace pxn

#endif
