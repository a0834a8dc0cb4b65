/*
 * Relay slice policy for the network hop: cuts the plans of one validated
 * piece (a DescriptorSnapshot that passed validate_descriptor) into inner
 * operations, each one inner put_zcopy (PUT) or get_zcopy (GET).
 *
 * Contract
 * - An inner op moves one contiguous range of the slot to or from one
 *   contiguous remote range with one rkey. An inner zcopy op has a single
 *   remote address, and a plan is contiguous both in the slot and at the
 *   target, so an op covers part of exactly one plan, its local side is one
 *   iov entry {slot offset, length}, and ops of different plans are never
 *   merged. max_iov therefore only has to be >= 1.
 * - Slice size: Settings::relay_slice, or the inner max_zcopy when 0,
 *   clamped to max_zcopy and, when the inner transport reports an
 *   alignment, rounded down to a multiple of it (if that leaves anything).
 * - Tail merge (the 003 seed's 64 KiB + 4 KiB rule): a plan is cut into
 *   slice-sized ops, except that a remainder of at most slice + merge bytes
 *   goes as one op, so no op is a tail of <= merge bytes after a full
 *   slice. merge is Settings::relay_slice_merge, reduced so that slice +
 *   merge <= max_zcopy, and 0 when relay_slice is 0.
 * - Ops come in plan order and, within a plan, in address order; together
 *   they cover every plan exactly once.
 *
 * Allocation: none. A Slicer refers to the caller's plans (the snapshot),
 * which must stay unchanged until it is done; it emits one op at a time, so
 * the relay can stop when its in-flight cap is reached and resume later.
 */
#ifndef PXN_SLICER_H_
#define PXN_SLICER_H_

#include "abi.h"

#include <ucs/type/status.h>

#include <cstddef>
#include <cstdint>

namespace pxn {

/* What the inner iface reports for the op (uct_iface_attr_t cap.put or
 * cap.get). */
struct InnerLimits {
    uint64_t max_zcopy;
    size_t   max_iov;
    uint64_t align;     /* opt_zcopy_align; 0 or 1: none */
};

struct SlicePolicy {
    uint64_t slice;     /* >= 1, <= max_zcopy */
    uint64_t merge;     /* slice + merge <= max_zcopy */
};

/* UCS_ERR_INVALID_PARAM when the inner transport cannot take zcopy ops at
 * all (max_zcopy 0 or max_iov 0). */
ucs_status_t make_slice_policy(uint64_t relay_slice, uint64_t relay_slice_merge,
                               const InnerLimits &limits, SlicePolicy *policy);

struct InnerOp {
    uint64_t slot_offset; /* local side: slot + slot_offset, length bytes */
    uint64_t length;
    uint64_t remote_addr;
    uint32_t rkey_index;
    uint32_t plan;        /* index of the plan it belongs to */
};

class Slicer {
public:
    void reset(const SlicePolicy &policy, const abi::Plan *plans,
               uint32_t count);

    bool done() const { return plan_ >= count_; }

    /* The next op; false when done. */
    bool next(InnerOp *op);

    /* Number of ops the plans give; does not touch any Slicer. */
    static uint64_t count_ops(const SlicePolicy &policy,
                              const abi::Plan *plans, uint32_t count);

private:
    SlicePolicy      policy_      = {1, 0};
    const abi::Plan *plans_       = nullptr;
    uint32_t         count_       = 0;
    uint32_t         plan_        = 0; /* current plan */
    uint64_t         offset_      = 0; /* bytes of it already emitted */
    uint64_t         slot_offset_ = 0; /* slot offset of the current plan */
};

} // namespace pxn

#endif
