/*
 * Piece planner: splits the segments of one or more requests toward one
 * lane into pieces, each staged in one slot and described by one
 * descriptor. Used by the sender; knows nothing of shared memory.
 *
 * Contract
 * - Input: an array of Segment {local address, final remote address,
 *   length, rkey index, request index}. For PUT the local address is the
 *   source, for GET the destination; the op travels in the descriptor, the
 *   planning is the same.
 * - Pieces are filled greedily in input order. A piece closes when it holds
 *   slot_size bytes or max_plan planned segments, or when the input ends. A
 *   segment that does not fit in the space left is split by address, so a
 *   segment may straddle pieces (and a segment larger than slot_size always
 *   does); one piece may carry segments of several requests. Zero-length
 *   segments are skipped.
 * - A planned segment's bytes sit in the slot at slot_offset, the sum of
 *   the lengths of the piece's earlier planned segments (abi::Plan rule).
 * - Completion credits: every planned segment carries its request index;
 *   `credit` is set on the first planned segment of each run of one request
 *   within a piece. When a piece completes, the sender takes one credit off
 *   the request of every planned segment with `credit` set; a request is
 *   done when its credits reach 0 (a request without bytes has 0 credits:
 *   complete it at once). Credits of every request are computed before the
 *   first piece is emitted. When a request's segments are consecutive in the
 *   input, its credits equal the number of pieces carrying its bytes.
 * - reset()/plan() reject (UCS_ERR_INVALID_PARAM) slot_size 0 or above
 *   UINT32_MAX, max_plan 0, a request index >= request_count, an rkey index
 *   >= abi::kMaxRkeys, or an address range that wraps around 2^64. Nothing
 *   is planned then.
 *
 * Allocation: PieceCursor never allocates; it emits one piece at a time into
 * a caller buffer of max_plan entries, so a sender can plan a 5 GiB request
 * while only `slots` pieces are in flight. Planner plans a whole batch into
 * member vectors that keep their capacity: after reserve() or a first batch
 * of the same size, plan() does not allocate.
 */
#ifndef PXN_PLANNER_H_
#define PXN_PLANNER_H_

#include "settings.h"

#include <ucs/type/status.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pxn {

struct Segment {
    uint64_t local_addr;  /* PUT: source; GET: destination */
    uint64_t remote_addr; /* final address at the target */
    uint64_t length;
    uint32_t rkey_index;  /* index in the lane's rkey table */
    uint32_t request;     /* the caller's request index, < request_count */
};

struct PlanLimits {
    uint64_t slot_size;
    uint32_t max_plan;

    static PlanLimits of(const Geometry &g) { return {g.slot_size, g.max_plan}; }
};

struct PlannedSegment {
    uint64_t local_addr;
    uint64_t remote_addr;
    uint32_t length;
    uint32_t slot_offset;
    uint32_t rkey_index;
    uint32_t request;
    bool     credit;      /* take one credit off `request` on completion */
};

struct PlanTotals {
    uint64_t pieces;
    uint64_t segments;    /* planned segments of all pieces */
};

/* Streams the pieces of one batch; the segments must stay valid and
 * unchanged until the cursor is reset or dropped. */
class PieceCursor {
public:
    ucs_status_t reset(const PlanLimits &limits, const Segment *segments,
                       size_t count, uint32_t request_count);

    /* Pre-pass over the whole batch; the cursor does not move.
     * credits[0 .. request_count) is overwritten; credits may be nullptr. */
    PlanTotals count(uint64_t *credits) const;

    bool done() const { return pos_.index >= count_; }

    /* Emits the next piece into out[0 .. max_plan) and its byte count into
     * *length; returns the number of planned segments, 0 when done. */
    uint32_t next(PlannedSegment *out, uint64_t *length);

private:
    struct Position {
        size_t   index;  /* current input segment */
        uint64_t offset; /* bytes of it already planned */
    };

    uint32_t step(Position *pos, PlannedSegment *out, uint64_t *length,
                  uint64_t *credits) const;
    void skip_empty(Position *pos) const;

    PlanLimits     limits_   = {0, 0};
    const Segment *segments_ = nullptr;
    size_t         count_    = 0;
    uint32_t       requests_ = 0;
    Position       pos_      = {0, 0};
};

/* Plans a whole batch. Results stay valid until the next plan(). */
class Planner {
public:
    struct Piece {
        uint64_t length;
        size_t   first;   /* index of its first planned segment */
        uint32_t count;   /* planned segments */
    };

    /* UCS_ERR_INVALID_PARAM as PieceCursor::reset; UCS_ERR_NO_MEMORY if the
     * vectors cannot grow. */
    ucs_status_t plan(const PlanLimits &limits, const Segment *segments,
                      size_t count, uint32_t request_count);
    ucs_status_t reserve(size_t pieces, size_t segments, uint32_t requests);

    const std::vector<Piece> &pieces() const { return pieces_; }
    const std::vector<PlannedSegment> &segments() const { return segments_; }
    /* credits()[r]: completion credits of request r. */
    const std::vector<uint64_t> &credits() const { return credits_; }

private:
    PieceCursor                 cursor_;
    std::vector<Piece>          pieces_;
    std::vector<PlannedSegment> segments_;
    std::vector<uint64_t>       credits_;
};

} // namespace pxn

#endif
