#include "planner.h"

#include "abi.h"

#include <algorithm>
#include <new>

namespace pxn {

namespace {

bool range_wraps(uint64_t addr, uint64_t length)
{
    return addr + length < addr;
}

} // namespace

ucs_status_t PieceCursor::reset(const PlanLimits &limits,
                                const Segment *segments, size_t count,
                                uint32_t request_count)
{
    /* A failed reset leaves an empty cursor, never a half-checked one. */
    segments_ = nullptr;
    count_    = 0;
    pos_      = {0, 0};

    /* Plan lengths and slot offsets are 32-bit in the ABI. */
    if ((limits.slot_size == 0) || (limits.slot_size > UINT32_MAX) ||
        (limits.max_plan == 0) || ((count != 0) && (segments == nullptr))) {
        return UCS_ERR_INVALID_PARAM;
    }
    for (size_t i = 0; i < count; ++i) {
        const Segment &s = segments[i];
        if ((s.request >= request_count) || (s.rkey_index >= abi::kMaxRkeys) ||
            range_wraps(s.local_addr, s.length) ||
            range_wraps(s.remote_addr, s.length)) {
            return UCS_ERR_INVALID_PARAM;
        }
    }

    limits_   = limits;
    segments_ = segments;
    count_    = count;
    requests_ = request_count;
    skip_empty(&pos_);
    return UCS_OK;
}

void PieceCursor::skip_empty(Position *pos) const
{
    while ((pos->index < count_) && (segments_[pos->index].length == 0)) {
        ++pos->index;
    }
}

/* The one place that decides piece boundaries and credits: count() and
 * next() both run it, so the pre-pass can never disagree with what is
 * emitted. */
uint32_t PieceCursor::step(Position *pos, PlannedSegment *out,
                           uint64_t *length, uint64_t *credits) const
{
    uint64_t used         = 0;
    uint32_t planned      = 0;
    uint32_t last_request = 0;

    while ((pos->index < count_) && (planned < limits_.max_plan) &&
           (used < limits_.slot_size)) {
        const Segment &s    = segments_[pos->index];
        const uint64_t take = std::min(s.length - pos->offset,
                                       limits_.slot_size - used);
        const bool credit   = (planned == 0) || (s.request != last_request);

        if (out != nullptr) {
            PlannedSegment &p = out[planned];
            p.local_addr      = s.local_addr + pos->offset;
            p.remote_addr     = s.remote_addr + pos->offset;
            p.length          = static_cast<uint32_t>(take);
            p.slot_offset     = static_cast<uint32_t>(used);
            p.rkey_index      = s.rkey_index;
            p.request         = s.request;
            p.credit          = credit;
        }
        if (credit && (credits != nullptr)) {
            ++credits[s.request];
        }

        last_request = s.request;
        used        += take;
        pos->offset += take;
        ++planned;
        if (pos->offset == s.length) {
            ++pos->index;
            pos->offset = 0;
            skip_empty(pos);
        }
    }
    *length = used;
    return planned;
}

PlanTotals PieceCursor::count(uint64_t *credits) const
{
    PlanTotals totals = {0, 0};
    Position   pos    = pos_;
    uint64_t   length;

    if (credits != nullptr) {
        std::fill(credits, credits + requests_, 0);
    }
    while (pos.index < count_) {
        totals.segments += step(&pos, nullptr, &length, credits);
        ++totals.pieces;
    }
    return totals;
}

uint32_t PieceCursor::next(PlannedSegment *out, uint64_t *length)
{
    return step(&pos_, out, length, nullptr);
}

ucs_status_t Planner::reserve(size_t pieces, size_t segments,
                              uint32_t requests)
{
    try {
        pieces_.reserve(pieces);
        segments_.reserve(segments);
        credits_.reserve(requests);
    } catch (const std::exception &) {
        return UCS_ERR_NO_MEMORY;
    }
    return UCS_OK;
}

ucs_status_t Planner::plan(const PlanLimits &limits, const Segment *segments,
                           size_t count, uint32_t request_count)
{
    pieces_.clear();
    segments_.clear();
    credits_.clear();

    ucs_status_t status = cursor_.reset(limits, segments, count,
                                        request_count);
    if (status != UCS_OK) {
        return status;
    }

    try {
        credits_.resize(request_count);
        const PlanTotals totals = cursor_.count(credits_.data());
        /* Sized exactly by the pre-pass, so next() writes in place. */
        segments_.resize(totals.segments);
        pieces_.resize(totals.pieces);
    } catch (const std::exception &) {
        pieces_.clear();
        segments_.clear();
        credits_.clear();
        return UCS_ERR_NO_MEMORY;
    }

    size_t first = 0;
    for (Piece &piece : pieces_) {
        piece.first = first;
        piece.count = cursor_.next(segments_.data() + first, &piece.length);
        first      += piece.count;
    }
    return UCS_OK;
}

} // namespace pxn
