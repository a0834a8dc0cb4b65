#include "piece_builder.h"

#include <new>

namespace pxn {

ucs_status_t PieceBuilder::init(const PlanLimits &limits)
{
    if ((limits.slot_size == 0) || (limits.slot_size > UINT32_MAX) ||
        (limits.max_plan == 0)) {
        return UCS_ERR_INVALID_PARAM;
    }
    try {
        plans_.assign(limits.max_plan, abi::Plan{});
    } catch (const std::bad_alloc &) {
        return UCS_ERR_NO_MEMORY;
    }
    limits_ = limits;
    open_   = false;
    return UCS_OK;
}

void PieceBuilder::open(uint64_t seq, abi::Op op, uint32_t route, uint64_t group,
                        uint64_t size)
{
    size_   = ((size == 0) || (size > limits_.slot_size)) ? limits_.slot_size :
                                                            size;
    open_   = true;
    group_  = group;
    seq_    = seq;
    op_     = op;
    route_  = route;
    length_ = 0;
    count_  = 0;
}

} // namespace pxn
