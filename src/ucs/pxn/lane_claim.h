/*
 * Ownership of a relay's inbound lanes: claim, renewal, release, and the
 * freeing of lanes whose owner died. These functions operate on a mapped
 * control file and MUST be called with the registry directory lock held
 * (PeerMapping and Registry::cleanup do so); the lock is what makes "find a
 * free lane, write its owner" atomic between processes.
 *
 * Identity: a sender is {pid, start time, epoch}. The same triple is the same
 * sender; the same process with another epoch (a second pxn instance in one
 * process) is another sender and gets a lane of its own. A relay never
 * gives a lane to its own incarnation (pid, start time and epoch of the
 * control file's header).
 *
 * Claim rules, in order:
 * 1. The sender already owns a lane: the same lane is returned (`resumed`),
 *    with its lane epoch and counters unchanged, so that every endpoint of
 *    one sender incarnation through one relay shares that lane.
 * 2. Else the first FREE lane whose memory the relay still keeps
 *    (LaneMemory.backed, a hint: the relay backs the lane anyway before it
 *    acknowledges), else the first FREE lane, else the first lane whose
 *    owner is dead (pid gone, zombie, or pid reused: start time differs) is
 *    reset for the sender. A sender that restarted is a new process, so its
 *    old lane is dead-owned and it gets a fresh lane epoch and reset
 *    counters. A claim never writes the LaneMemory block.
 * 3. Else UCS_ERR_NO_RESOURCE: every lane is owned by a live sender.
 * renew_lane() gives the owner a new lane epoch on the lane it holds (the
 * seq wrap of seq.h, or recovery after an epoch mismatch). A renewal that
 * keeps routes (the wrap: the owner drained the lane and still uses its
 * routes and rkeys) leaves route and rkey generations alone and sets
 * owner.flags = kLaneKeepRoutes.
 *
 * What a reset writes (the claimer is the only writer of the whole lane
 * while it holds the lock and the lane is not CLAIMED):
 *   owner.state = FREE (release), owner.lane_epoch = 0 (release)
 *   producer.{head, doorbell, reaped} = initial_seq
 *   consumer.{consumed, completed} = initial_seq, consumer.lane_epoch = 0
 *   every completion.seq and descriptor.seq = 0, every route request_gen /
 *   reply_gen = 0, every rkey gen = 0 (unless routes are kept)
 *   owner.{owner_pid, owner_start_time, owner_epoch, initial_seq, flags}
 *   owner.lane_epoch = new random != 0 (release), owner.state = CLAIMED
 *   (release)
 *
 * Relay side (reader of the owner block): lane_epoch is the sequence of a
 * seqlock. Read e1 = load_acquire(lane_epoch) (0: being claimed, skip the
 * lane), state == CLAIMED (acquire), owner fields and initial_seq, then an
 * acquire fence and e2 = load_relaxed(lane_epoch): if e1 != e2, retry later.
 * A relay that sees a lane epoch it does not know drops every cache of that
 * lane (routes, unpacked rkeys, in-flight pieces of the old epoch, whose
 * results it never writes) -- except routes and rkeys when owner.flags has
 * kLaneKeepRoutes and the owner is the one it acknowledged before --
 * writes consumer.{consumed, completed} =
 * initial_seq and every completion.seq = 0, commits the memory of the
 * lane's slots (an error goes into consumer.ack_status: the lane is
 * acknowledged but unusable), then acknowledges with
 * store_release(consumer.lane_epoch, lane_epoch). Its stale writes all
 * precede the acknowledgement in its own program order, so they are
 * overwritten.
 *
 * Sender side: after a claim that is not `resumed`, the sender notifies the
 * relay (wakeup.h) and, bounded by a timeout, waits until
 * load_acquire(consumer.lane_epoch) == lane_epoch before it publishes
 * anything or reads any completion; consumer.ack_status then says whether
 * it may (a failure gives the lane back).
 *
 * release_lane(): the owner gives the lane back (state FREE, owner fields
 * cleared, lane_epoch kept, so the relay sees FREE and drops the lane). The
 * owner must have reaped everything it published, or accept that the relay
 * still finishes in-flight pieces.
 */
#ifndef PXN_LANE_CLAIM_H_
#define PXN_LANE_CLAIM_H_

#include "control_file.h"
#include "identity.h"

#include <ucs/type/status.h>

namespace pxn {

struct LaneClaim {
    uint32_t index       = 0;
    uint64_t lane_epoch  = 0;
    uint64_t initial_seq = 0;
    bool     resumed     = false; /* rule 1: nothing was reset */
};

/* UCS_ERR_UNREACHABLE: the relay is not READY; UCS_ERR_INVALID_PARAM: the
 * sender is the relay's own incarnation; UCS_ERR_NO_RESOURCE: full. */
ucs_status_t claim_lane_locked(const ControlView &file,
                               const ProcessIdentity &sender,
                               uint64_t initial_seq, LaneClaim *claim);

/* UCS_ERR_NO_ELEM: `index` is not a lane owned by `sender`. keep_routes:
 * the routes and rkeys of the lane stay (owner.flags kLaneKeepRoutes). */
ucs_status_t renew_lane_locked(const ControlView &file,
                               const ProcessIdentity &sender, uint32_t index,
                               uint64_t initial_seq, bool keep_routes,
                               LaneClaim *claim);

/* UCS_ERR_NO_ELEM: `index` is not a lane owned by `sender`. */
ucs_status_t release_lane_locked(const ControlView &file,
                                 const ProcessIdentity &sender, uint32_t index);

/* Frees every CLAIMED lane whose owner is dead; returns how many. */
unsigned free_dead_lanes_locked(const ControlView &file);

/* Owner identity of a lane as stored (for inspection and tests). */
ProcessIdentity lane_owner(const LaneBlock &lane);

} // namespace pxn

#endif
