/*
 * Sequence, credit and slot rules of one lane (docs/abi.md, "Sequence
 * rules"). Header-only, no shared memory access: the callers load and store
 * the counters of abi::LaneHeader with the helpers of abi.h.
 *
 * - A lane's counters (head, doorbell, reaped, consumed, completed) start at
 *   LaneOwner::initial_seq (normally 0); the first piece has initial_seq + 1.
 *   Sequence number 0 is never valid.
 * - Slot of sequence number s: (s - 1) % slots. slots need not be a power of
 *   two, so this is a division, never a mask.
 * - Credit: the sender may allocate `next` only while next - reaped <= slots.
 *   Slot reuse depends only on what the sender reaped: seq s + slots reuses
 *   the slot of s after the sender reaped s.
 * - Arena offset of (lane, slot): (lane * slots + slot) * slot_size.
 * - completed advances contiguously: every seq <= completed is done, even if
 *   the relay finished later pieces first (CompletionTracker).
 * - Wrap: a lane never allocates a seq above a limit (kDefaultSeqLimit, far
 *   below UINT64_MAX so that seq + slots never overflows). A sender that
 *   reaches it drains the lane (reaped == next - 1) and claims it again under
 *   a new lane epoch, counting from initial_seq + 1 again (SendWindow).
 * - A new claim may reuse seqs of the previous one; the claim handshake of
 *   lane_claim.h (completions zeroed, old in-flight pieces dropped without
 *   results, tracker reset to initial_seq) keeps them apart.
 *
 * Threading: SendWindow belongs to the lane's sender and CompletionTracker
 * to the lane's relay; neither is shared or synchronised.
 */
#ifndef PXN_SEQ_H_
#define PXN_SEQ_H_

#include "settings.h"

#include <ucs/type/status.h>

#include <bitset>
#include <cstdint>

namespace pxn {

constexpr uint64_t kInvalidSeq = 0;
/* Distance kept below UINT64_MAX: larger than any window (kMaxSlots), so
 * seq + slots and completed + slots never wrap. */
constexpr uint64_t kSeqMargin       = 1ull << 32;
constexpr uint64_t kDefaultSeqLimit = UINT64_MAX - kSeqMargin;

constexpr bool seq_is_valid(uint64_t seq)
{
    return seq != kInvalidSeq;
}

/* seq >= 1, slots >= 1. */
constexpr uint32_t slot_of(uint64_t seq, uint32_t slots)
{
    return static_cast<uint32_t>((seq - 1) % slots);
}

/* May the sender allocate `next` (the seq after its last allocated one)? */
constexpr bool has_credit(uint64_t next, uint64_t reaped, uint32_t slots)
{
    /* next <= reaped (a corrupt pair) wraps to a huge value: no credit. */
    return (next - reaped) <= slots;
}

/* Byte offset of a slot in the relay's arena. */
constexpr uint64_t slot_offset(uint32_t lane, uint32_t slot, uint32_t slots,
                               uint64_t slot_size)
{
    return (uint64_t(lane) * slots + slot) * slot_size;
}

inline void *slot_address(void *arena, uint32_t lane, uint32_t slot,
                          uint32_t slots, uint64_t slot_size)
{
    return static_cast<char*>(arena) + slot_offset(lane, slot, slots, slot_size);
}

/* Must the lane be drained and established again under a new epoch before
 * next_seq may be allocated? */
constexpr bool needs_reestablish(uint64_t next_seq,
                                 uint64_t limit = kDefaultSeqLimit)
{
    return !seq_is_valid(next_seq) || (next_seq > limit);
}

/*
 * The sender's view of a lane: allocation of sequence numbers against
 * credit and the wrap limit, in-order reaping, and re-establishment.
 */
class SendWindow {
public:
    /* UCS_ERR_INVALID_PARAM: slots not 1..kMaxSlots, epoch 0, or
     * initial_seq not below limit. */
    ucs_status_t reset(uint32_t slots, uint64_t lane_epoch,
                       uint64_t initial_seq = 0,
                       uint64_t limit = kDefaultSeqLimit)
    {
        if ((slots < 1) || (slots > kMaxSlots) || (lane_epoch == 0) ||
            (limit > kDefaultSeqLimit) || (initial_seq >= limit)) {
            return UCS_ERR_INVALID_PARAM;
        }
        slots_  = slots;
        epoch_  = lane_epoch;
        limit_  = limit;
        next_   = initial_seq + 1;
        reaped_ = initial_seq;
        return UCS_OK;
    }

    /* Allocates the next seq into *seq.
     * UCS_ERR_EXCEEDS_LIMIT: the lane must be re-established first;
     * UCS_ERR_NO_RESOURCE: no credit until the sender reaps. */
    ucs_status_t reserve(uint64_t *seq)
    {
        if (pxn::needs_reestablish(next_, limit_)) {
            return UCS_ERR_EXCEEDS_LIMIT;
        }
        if (!has_credit(next_, reaped_, slots_)) {
            return UCS_ERR_NO_RESOURCE;
        }
        *seq = next_++;
        return UCS_OK;
    }

    /* Marks seq reaped; only reaped + 1, and only an allocated seq. */
    ucs_status_t reap(uint64_t seq)
    {
        if ((seq != reaped_ + 1) || (seq >= next_)) {
            return UCS_ERR_INVALID_PARAM;
        }
        reaped_ = seq;
        return UCS_OK;
    }

    /* New epoch, counting from initial_seq + 1 again. UCS_ERR_BUSY while
     * pieces are unreaped; UCS_ERR_INVALID_PARAM for epoch 0 or the current
     * epoch (its old descriptors must never match again). */
    ucs_status_t reestablish(uint64_t new_epoch, uint64_t initial_seq = 0)
    {
        if (!drained()) {
            return UCS_ERR_BUSY;
        }
        if (new_epoch == epoch_) {
            return UCS_ERR_INVALID_PARAM;
        }
        return reset(slots_, new_epoch, initial_seq, limit_);
    }

    bool     needs_reestablish() const { return pxn::needs_reestablish(next_, limit_); }
    bool     drained() const { return next_ - 1 == reaped_; }
    uint64_t in_flight() const { return next_ - 1 - reaped_; }
    uint64_t next() const { return next_; }
    uint64_t reaped() const { return reaped_; }
    uint64_t epoch() const { return epoch_; }
    uint32_t slots() const { return slots_; }

private:
    uint32_t slots_  = 1;
    uint64_t epoch_  = 0;
    uint64_t limit_  = kDefaultSeqLimit;
    uint64_t next_   = 1;
    uint64_t reaped_ = 0;
};

/*
 * The relay's record of finished pieces of one lane. Pieces may finish in
 * any order within the window (completed, completed + slots]; completed()
 * advances only over a contiguous run of finished pieces. The relay
 * publishes completed() to LaneConsumer::completed (store-release) after
 * writing the Completion entries it covers.
 */
class CompletionTracker {
public:
    /* UCS_ERR_INVALID_PARAM: slots not 1..kMaxSlots. */
    ucs_status_t reset(uint32_t slots, uint64_t initial_seq = 0)
    {
        if ((slots < 1) || (slots > kMaxSlots)) {
            return UCS_ERR_INVALID_PARAM;
        }
        slots_     = slots;
        completed_ = initial_seq;
        done_.reset();
        return UCS_OK;
    }

    /* May seq be finished now? UCS_ERR_INVALID_PARAM: seq outside the
     * window (including seqs already covered by completed);
     * UCS_ERR_ALREADY_EXISTS: seq finished, waiting for an earlier one. */
    ucs_status_t check(uint64_t seq) const
    {
        const uint64_t distance = seq - completed_;
        if (!seq_is_valid(seq) || (distance == 0) || (distance > slots_)) {
            return UCS_ERR_INVALID_PARAM;
        }
        return done_.test(slot_of(seq, slots_)) ? UCS_ERR_ALREADY_EXISTS :
                                                  UCS_OK;
    }

    /* Records seq as finished; errors as check(), nothing changes then. */
    ucs_status_t finish(uint64_t seq)
    {
        const ucs_status_t status = check(seq);
        if (status != UCS_OK) {
            return status;
        }
        done_.set(slot_of(seq, slots_));
        for (uint32_t next = slot_of(completed_ + 1, slots_); done_.test(next);
             next = slot_of(completed_ + 1, slots_)) {
            done_.reset(next);
            ++completed_;
        }
        return UCS_OK;
    }

    bool is_finished(uint64_t seq) const
    {
        if (!seq_is_valid(seq)) {
            return false;
        }
        if (seq <= completed_) {
            return true;
        }
        return ((seq - completed_) <= slots_) && done_.test(slot_of(seq, slots_));
    }

    uint64_t completed() const { return completed_; }
    uint32_t slots() const { return slots_; }

private:
    uint32_t                 slots_     = 1;
    uint64_t                 completed_ = 0;
    std::bitset<kMaxSlots>   done_;
};

} // namespace pxn

#endif
