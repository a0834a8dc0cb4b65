/*
 * The staging memory of one relay: which lanes have memory for their
 * slots, when they get it and when it goes back (docs/transport.md,
 * "Staging memory").
 *
 * Host arena: one sparse file p<pid>-<epoch>.arena of LANES x SLOTS x
 * SLOT_SIZE bytes, mapped whole here and by senders. Backing lane l
 * reserves its block (posix_fallocate, so no touch of it can meet a full
 * file system), maps it into this process (MADV_POPULATE_WRITE: the inner
 * transport then never faults on it) and registers that block with the
 * inner md. Freeing it deregisters and punches the block out again.
 * GPU arena: no file; backing lane l allocates SLOTS x SLOT_SIZE bytes on
 * the process's GPU (cuMemAlloc in its primary context), exports them with
 * a CUDA IPC handle of their own (written into the lane's LaneMemory block)
 * and registers them with the inner md; freeing deregisters and frees.
 *
 * A lane's memory:
 *   cold --acquire() (a claim is acknowledged), or tend() (spare)--> backed
 *   acquire()d: in use until release(); then warm: kept for UCX_PXN_LANE_LINGER
 *   so that the next claim (which prefers warm lanes, lane_claim.h) finds it;
 *   UCX_PXN_WARM_LANES lanes stay warm however long they wait, and tend()
 *   backs cold lanes ahead of any claim until that many are warm.
 * At most LANES lanes are backed: the arena's footprint never exceeds
 * LANES x SLOTS x SLOT_SIZE.
 *
 * The LaneMemory block of every lane (abi.h) is written here only: gen,
 * size and handle before `backed` is set (release); `backed` is cleared
 * (release) before the memory goes. A claimer reads `backed` as a hint;
 * the lane's owner reads the handle after the relay acknowledged its claim
 * (the acknowledgement follows acquire() in the relay's program order).
 *
 * Why GPU memory is not freed at once: cuMemFree may synchronise the
 * device, stalling the engine thread behind the application's kernels;
 * a warm lane is reused instead, and only a lane unused for the linger
 * time is freed, from tend(), off the data path.
 *
 * Threading: open() and the destructor on the RelayService's thread, the
 * rest on the engine thread (Net lock held).
 */
#ifndef PXN_UCT_PXN_RELAY_ARENA_H_
#define PXN_UCT_PXN_RELAY_ARENA_H_

#include "pxn_cuda.h"
#include "pxn_net.h"

#include <ucs/pxn/os_resource.h>
#include <ucs/pxn/registry_entry.h>

#include <memory>
#include <vector>

namespace pxn {
namespace uct {

/* Where the relay's inner operations find a lane's slots: slot k at
 * base + k * slot_size, registered as memh. */
struct LaneSlots {
    uint8_t  *base = nullptr;
    uct_mem_h memh = UCT_MEM_HANDLE_NULL;
};

class RelayArena {
public:
    /* Bytes a host lane is backed by per tend() step: bounds how long one
     * step keeps the engine thread from a doorbell. */
    static constexpr uint64_t kBackingStep = 1ull << 20;

    struct Params {
        Net           *net;
        RegistryEntry *entry;      /* arena kind and handle, lane blocks */
        bool           gpu;        /* GPU arena, else host */
        int            gpu_index;  /* the process's GPU (GPU arena) */
        uint64_t       linger_ns;  /* UCX_PXN_LANE_LINGER */
        uint32_t       warm_lanes; /* UCX_PXN_WARM_LANES */
    };

    /* Records the arena in the entry (before its publication); backs
     * nothing yet. Logs the cause of a failure. */
    static ucs_status_t open(const Params &params,
                             std::unique_ptr<RelayArena> *arena);
    ~RelayArena();
    RelayArena(const RelayArena&) = delete;
    RelayArena &operator=(const RelayArena&) = delete;

    /* A claim of `lane` is about to be acknowledged: its memory, backed
     * now if it is cold. UCS_ERR_NO_MEMORY: no room (file system full, GPU
     * out of memory), the lane stays cold. */
    ucs_status_t acquire(uint32_t lane, LaneSlots *slots);
    /* The lane is free (or changes hands): its memory stays, warm. */
    void         release(uint32_t lane, uint64_t now_ns);
    /* One bounded step off the data path: frees one lane warm for longer
     * than the linger time (beyond the warm lanes kept), or backs part of
     * a cold lane while fewer than UCX_PXN_WARM_LANES are warm. Returns 1
     * if it did something. */
    unsigned     tend(uint64_t now_ns);

    bool     gpu() const { return gpu_; }
    bool     backed(uint32_t lane) const { return lanes_[lane].backed; }
    /* Lanes with memory now. */
    uint32_t backed_lanes() const;

private:
    struct Lane {
        bool            backed   = false;
        bool            in_use   = false;
        uint64_t        free_since = 0; /* warm: released at */
        uint64_t        reserved = 0;   /* host: bytes backed so far */
        LaneSlots       slots;
        std::unique_ptr<GpuArena> gpu;
    };

    RelayArena() = default;
    uint64_t     lane_bytes() const { return uint64_t(slots_) * slot_size_; }
    /* Host: backs up to `bytes` more of the lane (all of it: ~0). A
     * failure is warned about for a claim, not for a spare (`claim`). */
    ucs_status_t back_host(uint32_t lane, uint64_t bytes, bool claim);
    ucs_status_t back_gpu(uint32_t lane, bool claim);
    /* The lane's memory is all there: register it, publish it. */
    ucs_status_t finish_backing(uint32_t lane);
    void         free_lane(uint32_t lane);
    void         count_commit(uint64_t start_ns);

    Net                *net_       = nullptr;
    RegistryEntry      *entry_     = nullptr;
    abi::RelayCounters *counters_  = nullptr;
    bool                gpu_       = false;
    int                 gpu_index_ = -1;
    uint32_t            slots_     = 0;
    uint64_t            slot_size_ = 0;
    uint64_t            linger_ns_ = 0;
    uint32_t            warm_lanes_ = 0;
    uint64_t            gen_       = 0;
    uint64_t            next_spare_ns_ = 0; /* after a failed spare */
    UniqueFd            fd_;           /* host arena file */
    SharedMapping       mapping_;      /* all of it */
    std::vector<Lane>   lanes_;
};

} // namespace uct
} // namespace pxn

#endif
