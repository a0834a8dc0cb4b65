#include "descriptor.h"

#include "am_frame.h"

#include <new>

namespace pxn {

namespace {

/* Shared fields are stored and loaded one by one through the abi helpers:
 * the other process may touch them at any time, and a plain memcpy would
 * be a data race the compiler is free to miscompile (double fetches). */
template<typename Source>
void write_descriptor_impl(abi::DescriptorHeader *desc, uint64_t seq,
                           uint64_t lane_epoch, abi::Op op, uint32_t route,
                           const Source *source, uint32_t count)
{
    abi::Plan *plans  = plans_of(desc);
    uint64_t   length = 0;

    for (uint32_t i = 0; i < count; ++i) {
        abi::store_relaxed(plans[i].remote_addr, source[i].remote_addr);
        abi::store_relaxed(plans[i].length, uint32_t(source[i].length));
        abi::store_relaxed(plans[i].rkey_index, source[i].rkey_index);
        length += source[i].length;
    }
    abi::store_relaxed(desc->lane_epoch, lane_epoch);
    abi::store_relaxed(desc->op, uint32_t(op));
    abi::store_relaxed(desc->plan_count, count);
    abi::store_relaxed(desc->length, length);
    abi::store_relaxed(desc->route, route);
    abi::store_relaxed(desc->flags, uint32_t(0));
    for (uint8_t &byte : desc->reserved) {
        abi::store_relaxed(byte, uint8_t(0));
    }
    abi::store_release(desc->seq, seq);
}

bool range_wraps(uint64_t addr, uint64_t length)
{
    return length > UINT64_MAX - addr;
}

DescReason check_header(const abi::DescriptorHeader &h, uint32_t max_plan,
                        const LaneCheck &lane)
{
    if (!seq_is_valid(h.seq) || (h.seq != lane.expected_seq)) {
        return DescReason::kBadSeq;
    }
    if (h.lane_epoch != lane.lane_epoch) {
        return DescReason::kBadEpoch;
    }
    if ((h.op != abi::kOpPut) && (h.op != abi::kOpGet) &&
        ((h.op != abi::kOpAm) || (lane.max_am == 0))) {
        return DescReason::kBadOp;
    }
    if (h.flags != 0) {
        return DescReason::kFlagsSet;
    }
    for (uint8_t byte : h.reserved) {
        if (byte != 0) {
            return DescReason::kReservedSet;
        }
    }
    if (h.plan_count == 0) {
        return DescReason::kNoPlans;
    }
    if (h.plan_count > max_plan) {
        return DescReason::kTooManyPlans;
    }
    if (h.length > lane.slot_size) {
        return DescReason::kTooLong;
    }
    if (h.route >= lane.routes) {
        return DescReason::kRouteOutOfRange;
    }
    if (!lane.route_usable) {
        return DescReason::kRouteInvalid;
    }
    return DescReason::kOk;
}

/* An AM plan: one message to one target iface. */
DescReason check_am_plan(const abi::Plan &p, const LaneCheck &lane)
{
    if (!am_plan_address_valid(p.remote_addr) || (p.rkey_index != 0)) {
        return DescReason::kBadAmTarget;
    }
    return (p.length > lane.max_am) ? DescReason::kAmTooLong : DescReason::kOk;
}

DescReason check_plans(const abi::Plan *plans, uint32_t count, uint32_t op,
                       uint64_t length, const LaneCheck &lane)
{
    uint64_t sum = 0;

    for (uint32_t i = 0; i < count; ++i) {
        const abi::Plan &p = plans[i];
        if (op == abi::kOpAm) {
            const DescReason reason = check_am_plan(p, lane);
            if (reason != DescReason::kOk) {
                return reason;
            }
        } else if (p.length == 0) {
            return DescReason::kEmptyPlan;
        } else if (p.rkey_index >= abi::kMaxRkeys) {
            return DescReason::kRkeyOutOfRange;
        } else if (!(lane.rkeys_valid & (uint64_t(1) << p.rkey_index))) {
            return DescReason::kRkeyInvalid;
        } else if (range_wraps(p.remote_addr, p.length)) {
            return DescReason::kAddressOverflow;
        }
        /* Checked before adding: sum <= length <= slot_size, so the sum
         * can never wrap, whatever plan_count is. */
        if (p.length > length - sum) {
            return DescReason::kPlansExceedLength;
        }
        sum += p.length;
    }
    return (sum == length) ? DescReason::kOk : DescReason::kPlanSumMismatch;
}

} // namespace

void write_descriptor(abi::DescriptorHeader *desc, uint64_t seq,
                      uint64_t lane_epoch, abi::Op op, uint32_t route,
                      const abi::Plan *plans, uint32_t count)
{
    write_descriptor_impl(desc, seq, lane_epoch, op, route, plans, count);
}

ucs_status_t DescriptorSnapshot::init(uint32_t capacity)
{
    if (capacity == 0) {
        return UCS_ERR_INVALID_PARAM;
    }
    try {
        plans_.assign(capacity, abi::Plan{});
    } catch (const std::exception &) {
        return UCS_ERR_NO_MEMORY;
    }
    loaded_ = 0;
    return UCS_OK;
}

void DescriptorSnapshot::load(const abi::DescriptorHeader *desc)
{
    /* seq first (acquire): if it is the committed one, the rest is at least
     * as new. Each field is read exactly once; validation sees only these
     * copies. */
    header_.seq        = abi::load_acquire(desc->seq);
    header_.lane_epoch = abi::load_relaxed(desc->lane_epoch);
    header_.op         = abi::load_relaxed(desc->op);
    header_.plan_count = abi::load_relaxed(desc->plan_count);
    header_.length     = abi::load_relaxed(desc->length);
    header_.route      = abi::load_relaxed(desc->route);
    header_.flags      = abi::load_relaxed(desc->flags);
    for (size_t i = 0; i < sizeof(header_.reserved); ++i) {
        header_.reserved[i] = abi::load_relaxed(desc->reserved[i]);
    }

    loaded_ = (header_.plan_count <= capacity()) ? header_.plan_count : 0;
    const abi::Plan *plans = plans_of(desc);
    for (uint32_t i = 0; i < loaded_; ++i) {
        plans_[i].remote_addr = abi::load_relaxed(plans[i].remote_addr);
        plans_[i].length      = abi::load_relaxed(plans[i].length);
        plans_[i].rkey_index  = abi::load_relaxed(plans[i].rkey_index);
    }
}

ucs_status_t validate_descriptor(const DescriptorSnapshot &snapshot,
                                 const LaneCheck &lane, DescReason *reason)
{
    const abi::DescriptorHeader &h = snapshot.header();
    /* A snapshot smaller than max_plan has not copied larger plan sets. */
    const uint32_t max_plan = (lane.max_plan < snapshot.capacity()) ?
                              lane.max_plan : snapshot.capacity();

    /* plan_count <= max_plan <= capacity here, so load() copied them all. */
    *reason = check_header(h, max_plan, lane);
    if (*reason == DescReason::kOk) {
        *reason = check_plans(snapshot.plans(), h.plan_count, h.op, h.length,
                              lane);
    }
    return desc_reason_status(*reason);
}

const char *desc_reason_name(DescReason reason)
{
    switch (reason) {
    case DescReason::kOk:                return "ok";
    case DescReason::kBadSeq:            return "bad seq";
    case DescReason::kBadEpoch:          return "bad lane epoch";
    case DescReason::kBadOp:             return "bad op";
    case DescReason::kFlagsSet:          return "flags set";
    case DescReason::kReservedSet:       return "reserved bytes set";
    case DescReason::kNoPlans:           return "no plans";
    case DescReason::kTooManyPlans:      return "too many plans";
    case DescReason::kTooLong:           return "length exceeds slot size";
    case DescReason::kRouteOutOfRange:   return "route out of range";
    case DescReason::kRouteInvalid:      return "route not usable";
    case DescReason::kEmptyPlan:         return "empty plan";
    case DescReason::kRkeyOutOfRange:    return "rkey index out of range";
    case DescReason::kRkeyInvalid:       return "rkey not available";
    case DescReason::kAddressOverflow:   return "remote address overflow";
    case DescReason::kPlansExceedLength: return "plans exceed length";
    case DescReason::kPlanSumMismatch:   return "plans short of length";
    case DescReason::kBadAmTarget:       return "bad AM target";
    case DescReason::kAmTooLong:         return "AM message too long";
    }
    return "unknown";
}

ucs_status_t desc_reason_status(DescReason reason)
{
    switch (reason) {
    case DescReason::kOk:
        return UCS_OK;
    case DescReason::kBadEpoch:
        return UCS_ERR_CANCELED;
    default:
        return UCS_ERR_INVALID_PARAM;
    }
}

void write_completion(abi::Completion *completion, uint64_t seq,
                      ucs_status_t status)
{
    abi::store_relaxed(completion->status, int32_t(status));
    abi::store_relaxed(completion->reserved, uint32_t(0));
    abi::store_release(completion->seq, seq);
}

bool read_completion(const abi::Completion *completion, uint64_t seq,
                     ucs_status_t *status)
{
    if (!seq_is_valid(seq) || (abi::load_acquire(completion->seq) != seq)) {
        return false;
    }
    const int32_t raw = abi::load_relaxed(completion->status);
    /* Casting a value outside the enum's range would be undefined; a relay
     * may write anything, including UCS_INPROGRESS. */
    *status = ((raw <= UCS_OK) && (raw > UCS_ERR_LAST)) ?
              static_cast<ucs_status_t>(raw) : UCS_ERR_IO_ERROR;
    return true;
}

ucs_status_t complete_piece(abi::Completion *completions,
                            abi::LaneConsumer *consumer,
                            CompletionTracker *tracker, uint64_t seq,
                            ucs_status_t status)
{
    ucs_status_t verdict = tracker->check(seq);
    if (verdict != UCS_OK) {
        return verdict;
    }
    /* The entry before completed: a sender that reads completed may read
     * the entries it covers. */
    write_completion(&completions[slot_of(seq, tracker->slots())], seq, status);
    verdict = tracker->finish(seq);
    abi::store_release(consumer->completed, tracker->completed());
    return verdict;
}

} // namespace pxn
