#include "slicer.h"

namespace pxn {

namespace {

/* Length of the op that starts `remaining` bytes before a plan's end.
 * Written without slice + merge, which a hand-made policy could overflow; a
 * slice of 0 would never end, so it means "unsliced". */
uint64_t op_length(const SlicePolicy &policy, uint64_t remaining)
{
    if ((policy.slice == 0) || (remaining <= policy.slice) ||
        (remaining - policy.slice <= policy.merge)) {
        return remaining;
    }
    return policy.slice;
}

} // namespace

ucs_status_t make_slice_policy(uint64_t relay_slice, uint64_t relay_slice_merge,
                               const InnerLimits &limits, SlicePolicy *policy)
{
    if ((limits.max_zcopy == 0) || (limits.max_iov == 0)) {
        return UCS_ERR_INVALID_PARAM;
    }

    uint64_t slice = ((relay_slice == 0) || (relay_slice > limits.max_zcopy)) ?
                     limits.max_zcopy : relay_slice;
    /* Full slices keep the alignment the inner transport prefers, so that
     * every op but a plan's last starts aligned if the plan does. */
    if ((limits.align > 1) && (slice >= limits.align)) {
        slice -= slice % limits.align;
    }

    uint64_t merge = (relay_slice == 0) ? 0 : relay_slice_merge;
    if (merge > limits.max_zcopy - slice) {
        merge = limits.max_zcopy - slice;
    }

    policy->slice = slice;
    policy->merge = merge;
    return UCS_OK;
}

void Slicer::reset(const SlicePolicy &policy, const abi::Plan *plans,
                   uint32_t count)
{
    policy_      = policy;
    plans_       = plans;
    count_       = (plans == nullptr) ? 0 : count;
    plan_        = 0;
    offset_      = 0;
    slot_offset_ = 0;
}

bool Slicer::next(InnerOp *op)
{
    if (done()) {
        return false;
    }

    const abi::Plan &plan = plans_[plan_];
    const uint64_t   len  = op_length(policy_, plan.length - offset_);

    op->slot_offset = slot_offset_ + offset_;
    op->length      = len;
    op->remote_addr = plan.remote_addr + offset_;
    op->rkey_index  = plan.rkey_index;
    op->plan        = plan_;

    offset_ += len;
    if (offset_ >= plan.length) {
        slot_offset_ += plan.length;
        offset_       = 0;
        ++plan_;
    }
    return true;
}

uint64_t Slicer::count_ops(const SlicePolicy &policy, const abi::Plan *plans,
                           uint32_t count)
{
    uint64_t ops = 0;

    for (uint32_t i = 0; i < count; ++i) {
        for (uint64_t remaining = plans[i].length; remaining > 0; ++ops) {
            remaining -= op_length(policy, remaining);
        }
    }
    return ops;
}

} // namespace pxn
