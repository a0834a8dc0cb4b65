/*
 * A sender's mapping of one relay's control file (RAII): access to the
 * relay's header and lane blocks, the lane claim, and the relay's arena file
 * and wakeup FIFO.
 *
 * Contract:
 * - Made by Registry::map_peer() from a PeerInfo; the Registry must outlive
 *   it. One PeerMapping per (sender incarnation, relay): lanes claimed
 *   through it are released when it is destroyed (if still owned by the
 *   identity that claimed them), so endpoints of one sender that go through
 *   the same relay share this object and its lane.
 * - The relay may restart or die at any time; the mapping stays valid (the
 *   file is only unlinked), and is_healthy() / the epoch tell the sender to
 *   stop publishing. A same-uid process truncating the file under the
 *   mapping would make accesses fault (SIGBUS): such a process could ptrace
 *   us anyway.
 * - Claims follow lane_claim.h (rules, reset, relay acknowledgement).
 * - Threading: claim/renew/release are thread-safe (registry lock); lane
 *   accessors are plain memory.
 */
#ifndef PXN_PEER_MAPPING_H_
#define PXN_PEER_MAPPING_H_

#include "control_file.h"
#include "lane_claim.h"
#include "registry.h"
#include "wakeup.h"

#include <mutex>
#include <vector>

namespace pxn {

class PeerMapping {
public:
    ~PeerMapping();
    PeerMapping(const PeerMapping&) = delete;
    PeerMapping &operator=(const PeerMapping&) = delete;

    const PeerInfo &info() const { return info_; }
    const Geometry &geometry() const { return view_.geometry; }

    /* The relay's header: identity fields are those checked at mapping time;
     * read live fields (state, relay_sleeping, heartbeat_ns) with the
     * abi.h helpers. */
    const abi::ProcessHeader &header() const { return view_.header(); }

    /* State READY and heartbeat age <= the registry's heartbeat timeout.
     * No syscall. With `now` (monotonic_ns()), no clock read either. */
    bool is_healthy() const { return is_healthy(monotonic_ns()); }
    bool is_healthy(uint64_t now) const;
    uint64_t heartbeat_age_ns() const { return heartbeat_age_ns(monotonic_ns()); }
    uint64_t heartbeat_age_ns(uint64_t now) const;

    uint32_t lanes() const { return view_.geometry.lanes; }
    /* index < lanes(), unchecked. */
    LaneBlock lane(uint32_t index) const { return view_.lane(index); }

    /* With LockWait::kTry, UCS_ERR_BUSY while another holds the registry
     * lock: try again later. */
    ucs_status_t claim_lane(const ProcessIdentity &sender, LaneClaim *claim,
                            uint64_t initial_seq = 0,
                            Registry::LockWait wait = Registry::LockWait::kBounded);
    ucs_status_t renew_lane(const ProcessIdentity &sender, uint32_t index,
                            LaneClaim *claim, uint64_t initial_seq = 0,
                            bool keep_routes = false,
                            Registry::LockWait wait = Registry::LockWait::kBounded);
    ucs_status_t release_lane(const ProcessIdentity &sender, uint32_t index,
                              Registry::LockWait wait = Registry::LockWait::kBounded);

    /* Opens the relay's host arena file (kArenaHostShm only; its handle must
     * name exactly p<pid>-<epoch>.arena), checked to be a regular file of
     * this uid with arena_size bytes. The caller maps it. */
    ucs_status_t open_host_arena(UniqueFd *fd) const;

    /* Opens the relay's wakeup FIFO, bound to its relay_sleeping. */
    ucs_status_t open_wakeup(SenderWakeup *wakeup) const;

private:
    friend class Registry;
    PeerMapping(Registry *registry, const PeerInfo &info, SharedMapping mapping,
                const Geometry &geometry);

    struct Held {
        ProcessIdentity sender;
        uint32_t        index;
    };

    Registry          *registry_;
    PeerInfo           info_;
    SharedMapping      mapping_;
    ControlView        view_;
    std::mutex         held_mutex_;
    std::vector<Held>  held_;
};

} // namespace pxn

#endif
