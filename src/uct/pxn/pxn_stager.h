/*
 * GPU staging of one lane (sender side): copies a piece's segments into its
 * slot of a relay's CUDA arena and rings the lane's doorbell from the GPU,
 * after the copy, on the same stream: the relay sees the doorbell only when
 * the bytes are there, and the CPU never waits for a copy.
 *
 *   add(slot, src, offset, length)   record a segment of the open piece
 *   commit(seq, slot)                enqueue its copies, then the doorbell
 *   progress()                       CPU doorbells (see below), in order
 *
 * Copies: the copy engine (one cuMemcpyAsync per segment) for few large
 * segments and for host sources (an SM kernel cannot read pageable host
 * memory); the SM gather kernel (one launch, a bounded grid) for many or
 * small device segments, where the copy engine pays ~4 us per segment
 * (docs/benchmarks.md). UCX_PXN_COPY=auto|ce|sm; auto uses the kernel when a
 * piece has more than one device segment and segments average under
 * kSmBelow bytes.
 *
 * Doorbell: cuStreamWriteValue64 into the lane's producer block in shared
 * memory (registered with cuMemHostRegister). Support is found by trying it
 * at open (the V1 stream-memop attribute reads 0 on H200 although it works);
 * without it, an event is recorded after the copy and progress() stores the
 * doorbell from the CPU once cuEventQuery succeeds.
 *
 * Failure: a copy or doorbell that cannot be enqueued returns an error from
 * commit(), before anything was published: the sender quarantines the lane.
 *
 * Threading: the application thread only; it needs a CUDA context, made
 * current on open when the thread has none.
 */
#ifndef PXN_UCT_PXN_STAGER_H_
#define PXN_UCT_PXN_STAGER_H_

#include "pxn_cuda.h"

#include <ucs/pxn/abi.h>
#include <ucs/pxn/settings.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

namespace pxn {
namespace uct {

enum class CopyPolicy { kAuto, kCopyEngine, kSm };

#ifdef PXN_HAVE_CUDA

class CudaStager {
public:
    static constexpr uint64_t kSmBelow = 1ull << 20;

    ~CudaStager();
    CudaStager(const CudaStager&) = delete;
    CudaStager &operator=(const CudaStager&) = delete;

    /* Opens the relay's arena from its IPC handle and prepares the lane:
     * stream, segment tables, doorbell registration. */
    static ucs_status_t open(const uint8_t *ipc_handle, uint32_t lane,
                             const Geometry &geometry,
                             abi::LaneProducer *producer, CopyPolicy policy,
                             bool gpu_doorbell,
                             std::unique_ptr<CudaStager> *stager);

    /* Address of a slot in this process. */
    uint8_t *slot(uint32_t slot) const;
    bool     gpu_doorbell() const { return doorbell_dev_ != 0; }

    void         add(uint32_t slot, const void *src, uint64_t offset,
                     uint64_t length);
    /* Enqueues the copy now (a host source the caller reuses at once:
     * cuMemcpyAsync from pageable memory returns once it has taken it). */
    ucs_status_t copy_now(uint32_t slot, const void *src, uint64_t offset,
                          uint64_t length);
    ucs_status_t commit(uint64_t seq, uint32_t slot);
    /* Rings CPU doorbells whose copies finished; returns how many. */
    unsigned     progress();
    bool         idle() const { return pending_.empty(); }

    /* slot -> dest after a GET (dest host or device). */
    ucs_status_t copy_out(void *dest, const void *src, uint64_t length);

    struct Stats {
        uint64_t ce_pieces = 0;
        uint64_t sm_pieces = 0;
    };
    const Stats &stats() const { return stats_; }

private:
    struct Seg {
        uint64_t src;
        uint64_t offset;
        uint64_t length;
    };
    struct Pending {
        uint64_t seq;
        CUevent  event;
    };

    CudaStager() = default;
    ucs_status_t load_kernel();

    const CudaDriver  *cu_       = nullptr;
    CopyPolicy         policy_   = CopyPolicy::kAuto;
    CUdeviceptr        arena_    = 0;
    uint64_t           lane_base_ = 0; /* offset of slot 0 of our lane */
    uint64_t           slot_size_ = 0;
    uint32_t           max_plan_  = 0;
    CUstream           stream_   = nullptr;
    abi::LaneProducer *producer_ = nullptr;
    void              *registered_ = nullptr; /* page(s) of the producer */
    CUdeviceptr        doorbell_dev_ = 0;
    std::vector<std::vector<Seg>> segs_;      /* per slot, open piece */
    std::vector<bool>  device_only_;          /* per slot: no host source */
    Seg               *host_table_ = nullptr; /* pinned, slots x max_plan */
    CUdeviceptr        dev_table_  = 0;
    CUmodule           module_     = nullptr;
    CUfunction         gather_     = nullptr;
    std::deque<Pending> pending_;             /* CPU doorbells, seq order */
    std::vector<CUevent> events_;             /* free events */
    Stats              stats_;
};

#endif /* PXN_HAVE_CUDA */

} // namespace uct
} // namespace pxn

#endif
