/*
 * Descriptors and completions of a lane: the sender's writer, the relay's
 * snapshot and validation, the completion writer (relay) and reader
 * (sender), and the relay's way to end a piece, failed or not.
 *
 * Ordering (abi.h rules, docs/abi.md):
 * - Sender: write_descriptor() stores every header field and plan, then
 *   store-releases DescriptorHeader::seq (the commit). The payload copy and
 *   the doorbell follow (callers).
 * - Relay: only for a seq it knows committed (it load-acquired
 *   LaneProducer::doorbell >= seq), DescriptorSnapshot::load() copies the
 *   header and at most `capacity` plans into private memory, reading
 *   plan_count exactly once. validate_descriptor() checks only that copy,
 *   and the relay uses only that copy afterwards: the sender may change
 *   the shared bytes at any time without affecting the relay.
 * - Relay: write_completion() stores status, then store-releases seq.
 *   Sender: read_completion() load-acquires seq and reads status only if
 *   seq is the one it waits for.
 *
 * Validation rules (first failure wins, in this order; the reason is
 * machine-readable for counters and tests):
 *   seq == expected seq (never 0); lane_epoch == the lane's epoch;
 *   op in {PUT, GET}, or AM where the relay forwards AM (max_am > 0);
 *   flags == 0 and reserved bytes == 0 (room for later ABI versions, which
 *   a v1 relay refuses rather than misreads);
 *   1 <= plan_count <= min(max_plan, snapshot capacity);
 *   length <= slot_size; route < routes and usable by the lane;
 *   every plan of PUT and GET: length > 0, rkey_index < kMaxRkeys and
 *   unpacked, remote_addr + length <= 2^64 - 1 (no wrap); of AM (a message
 *   each, am_frame.h): am_plan_address_valid(remote_addr), rkey_index 0,
 *   length <= max_am (0 allowed); every plan: running sum <= length;
 *   sum of plan lengths == length.
 * An accepted descriptor's plans therefore tile [0, length) of its slot,
 * and length <= slot_size.
 *
 * An invalid descriptor ends like any piece: the relay calls
 * complete_piece() with the *expected* seq (the descriptor's own seq is
 * untrusted) and desc_reason_status(reason). The sender then sees a failed
 * completion for that seq, reaps it and gets the slot back; the lane goes on.
 */
#ifndef PXN_DESCRIPTOR_H_
#define PXN_DESCRIPTOR_H_

#include "abi.h"
#include "seq.h"

#include <ucs/type/status.h>

#include <cstdint>
#include <vector>

namespace pxn {

/* --- addressing inside a lane block ------------------------------------- */
inline abi::DescriptorHeader *descriptor_at(void *lane,
                                            const abi::LaneLayout &layout,
                                            uint32_t slot)
{
    return reinterpret_cast<abi::DescriptorHeader*>(
            static_cast<char*>(lane) + layout.descriptors +
            uint64_t(slot) * layout.desc_stride);
}

inline abi::Completion *completions_of(void *lane,
                                       const abi::LaneLayout &layout)
{
    return reinterpret_cast<abi::Completion*>(static_cast<char*>(lane) +
                                              layout.completions);
}

/* Plans follow the header directly. */
inline abi::Plan *plans_of(abi::DescriptorHeader *desc)
{
    return reinterpret_cast<abi::Plan*>(desc + 1);
}

inline const abi::Plan *plans_of(const abi::DescriptorHeader *desc)
{
    return reinterpret_cast<const abi::Plan*>(desc + 1);
}

/* --- sender: descriptor writer ------------------------------------------ */
/* Fills the descriptor at `desc` (in the lane's descriptor array) and
 * commits it with a store-release of seq. length is the sum of the plans'
 * lengths. Preconditions (the sender's own planning): 1 <= count <=
 * max_plan of the lane, the plans fit the slot. */
void write_descriptor(abi::DescriptorHeader *desc, uint64_t seq,
                      uint64_t lane_epoch, abi::Op op, uint32_t route,
                      const abi::Plan *plans, uint32_t count);

/* --- relay: snapshot and validation ------------------------------------- */
class DescriptorSnapshot {
public:
    /* Allocates room for `capacity` plans (once, at relay setup).
     * UCS_ERR_INVALID_PARAM for 0; UCS_ERR_NO_MEMORY. */
    ucs_status_t init(uint32_t capacity);

    /* Copies the descriptor at `desc` (seq load-acquired first). Copies the
     * plans only if plan_count <= capacity; otherwise plans_loaded() is 0
     * and validation refuses the descriptor. */
    void load(const abi::DescriptorHeader *desc);

    const abi::DescriptorHeader &header() const { return header_; }
    const abi::Plan *plans() const { return plans_.data(); }
    uint32_t plans_loaded() const { return loaded_; }
    uint32_t capacity() const { return static_cast<uint32_t>(plans_.size()); }

private:
    abi::DescriptorHeader  header_ = {};
    std::vector<abi::Plan> plans_;
    uint32_t               loaded_ = 0;
};

/* What the relay itself knows about the lane; nothing here comes from the
 * shared descriptor. */
struct LaneCheck {
    uint64_t expected_seq; /* consumed + 1 */
    uint64_t lane_epoch;   /* LaneOwner::lane_epoch read at claim time */
    uint64_t slot_size;
    uint32_t max_plan;
    uint32_t routes;       /* route ids are below this (the relay's table) */
    bool     route_usable; /* the descriptor's route: held by this lane and
                              connected (the relay's verdict, computed from
                              the same snapshot) */
    uint64_t rkeys_valid;  /* bit k: rkey k is unpacked and current */
    uint64_t max_am = 0;   /* the longest AM message the relay forwards;
                              0: it forwards none (kOpAm is a bad op) */
};
static_assert(abi::kMaxRkeys <= 64, "rkeys_valid has 64 bits");

enum class DescReason : uint8_t {
    kOk = 0,
    kBadSeq,            /* seq != expected (stale, ahead, or 0) */
    kBadEpoch,          /* lane_epoch of another lane incarnation */
    kBadOp,
    kFlagsSet,
    kReservedSet,
    kNoPlans,           /* plan_count == 0 */
    kTooManyPlans,      /* plan_count > max_plan */
    kTooLong,           /* length > slot_size */
    kRouteOutOfRange,   /* route >= the relay's route capacity */
    kRouteInvalid,      /* route not held by the lane, or not connected */
    kEmptyPlan,         /* a plan of length 0 */
    kRkeyOutOfRange,    /* rkey_index >= kMaxRkeys */
    kRkeyInvalid,       /* rkey not unpacked / stale */
    kAddressOverflow,   /* remote_addr + length wraps */
    kPlansExceedLength, /* running sum of plan lengths > length */
    kPlanSumMismatch,   /* sum of plan lengths < length */
    kBadAmTarget,       /* kOpAm: a plan's remote_addr is no
                           am_plan_address() or its rkey_index is not 0 */
    kAmTooLong          /* kOpAm: a message longer than max_am */
};
constexpr unsigned kDescReasonCount =
        static_cast<unsigned>(DescReason::kAmTooLong) + 1;

/* UCS_OK with kOk, or desc_reason_status(*reason). Reads only the snapshot
 * and `lane`; never fails to return. */
ucs_status_t validate_descriptor(const DescriptorSnapshot &snapshot,
                                 const LaneCheck &lane, DescReason *reason);

/* Stable short name ("bad seq", ...) for logs and counters. */
const char *desc_reason_name(DescReason reason);

/* Completion status for a refused descriptor: UCS_ERR_CANCELED for an old
 * epoch (its lane incarnation is gone), UCS_ERR_INVALID_PARAM otherwise. */
ucs_status_t desc_reason_status(DescReason reason);

/* --- completions -------------------------------------------------------- */
/* Relay: status first, then seq (release). */
void write_completion(abi::Completion *completion, uint64_t seq,
                      ucs_status_t status);

/* Sender: true if the entry holds seq; *status is then UCS_OK or an error
 * status; a value no ucs_status_t error can have (written by a broken
 * relay) reads as UCS_ERR_IO_ERROR. */
bool read_completion(const abi::Completion *completion, uint64_t seq,
                     ucs_status_t *status);

/* Relay: ends piece seq with status: writes the completion into its slot
 * of `completions` (slots = tracker->slots()), records it in the tracker and
 * store-releases the new contiguous completed into consumer->completed.
 * Returns the tracker's verdict (UCS_ERR_INVALID_PARAM outside the window,
 * UCS_ERR_ALREADY_EXISTS twice); on error nothing is written. */
ucs_status_t complete_piece(abi::Completion *completions,
                            abi::LaneConsumer *consumer,
                            CompletionTracker *tracker, uint64_t seq,
                            ucs_status_t status);

} // namespace pxn

#endif
