/*
 * GPU staging of one lane (sender side): copies a piece's segments into its
 * slot of a relay's CUDA arena and rings the lane's doorbell from the GPU
 * once the copy is done: the relay sees the doorbell only when the bytes
 * are there, and the CPU never waits for a copy.
 *
 *   add(slot, src, offset, length)   record a segment of the open piece
 *   commit(seq, slot)                enqueue its copies, then the doorbell
 *   progress()                       CPU doorbells (see below), in order
 *
 * Copies: the copy engine (one cuMemcpyAsync per segment) for few large
 * segments and for host sources (an SM kernel cannot read pageable host
 * memory); the SM gather kernel (one launch, a bounded grid) for many or
 * small device segments, where the copy engine pays ~4 us per segment
 * (docs/gpu.md). UCX_PXN_COPY=auto|ce|sm; auto uses the kernel when a
 * piece has more than one device segment and segments average under
 * kSmBelow bytes.
 *
 * Source memory type: asked of the driver only for pieces the kernel would
 * copy, once per allocation and piece (cuMemGetAddressRange), not per
 * segment: the query costs ~0.14 us, which capped 4 KiB blocks at 30 GB/s.
 * Within a piece every source belongs to a request in flight, so its
 * allocation cannot change under us.
 *
 * Doorbell: cuStreamWriteValue64 into the lane's producer block in shared
 * memory (registered with cuMemHostRegister), on a second stream that
 * waits for an event recorded after the copy: on the copy stream itself the
 * write held the next copy back by ~2 us per piece (docs/gpu.md). Support
 * is found by trying it at open (the V1 stream-memop attribute reads 0 on
 * H200 although it works); without it, progress() stores the doorbell from
 * the CPU once cuEventQuery says the copy is done.
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

#include <ucs/debug/assert.h>

#include <ucs/pxn/abi.h>
#include <ucs/pxn/settings.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

namespace pxn {
namespace uct {

#ifdef PXN_HAVE_CUDA

class CudaStager {
public:
    static constexpr uint64_t kSmBelow = 1ull << 20;
    /* Gather grid: bounded CTAs leave the GPU to the application's kernels
     * (their effect on a matrix multiply: docs/gpu.md). */
    static constexpr unsigned kGatherThreads   = 512;
    /* Segments averaging less: a warp copies each, else a block. */
    static constexpr uint64_t kWarpPerSegmentBelow = 64ull << 10;

    /* A segment as the gather kernel reads it (pxn_gather.cu). */
    struct Seg {
        uint64_t src;
        uint64_t offset;
        uint64_t length;
    };

    struct Options {
        CopyChoice policy       = CopyChoice::kAuto;
        bool       gpu_doorbell = true;
        unsigned   gather_ctas  = 32; /* grid bound of a gather launch */
    };

    ~CudaStager();
    CudaStager(const CudaStager&) = delete;
    CudaStager &operator=(const CudaStager&) = delete;

    /* Opens the relay's arena from its IPC handle and prepares the lane:
     * stream, segment tables, doorbell registration. */
    static ucs_status_t open(const uint8_t *ipc_handle, uint32_t lane,
                             const Geometry &geometry,
                             abi::LaneProducer *producer,
                             const Options &options,
                             std::unique_ptr<CudaStager> *stager);

    /* Address of a slot in this process. */
    uint8_t *slot(uint32_t slot) const;
    bool     gpu_doorbell() const { return doorbell_dev_ != 0; }

    /* Records a segment of the open piece of `slot`: at most max_plan per
     * piece (the sender's plan limit). The slot is open, so its previous
     * piece completed and the stream work that read this part of the
     * table is done. */
    void add(uint32_t slot, const void *src, uint64_t offset, uint64_t length)
    {
        ucs_assert(nsegs_[slot] < max_plan_);
        host_table_[size_t(slot) * max_plan_ + nsegs_[slot]++] =
                Seg{reinterpret_cast<uint64_t>(src), offset, length};
        bytes_[slot] += length;
    }
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
    struct Pending {
        uint64_t seq;
        CUevent  event;
    };

    CudaStager() = default;
    ucs_status_t load_kernel();
    /* Whether the gather kernel copies these segments of a piece. */
    bool         use_kernel(const Seg *segs, unsigned count,
                            uint64_t average) const;

    const CudaDriver  *cu_       = nullptr;
    Options            options_;
    CUdeviceptr        arena_    = 0;
    uint64_t           lane_base_ = 0; /* offset of slot 0 of our lane */
    uint64_t           slot_size_ = 0;
    uint32_t           max_plan_  = 0;
    CUstream           stream_   = nullptr;
    CUstream           doorbell_stream_ = nullptr; /* GPU doorbells */
    CUevent            copied_   = nullptr;   /* last piece's copies done */
    abi::LaneProducer *producer_ = nullptr;
    void              *registered_ = nullptr; /* page(s) of the producer */
    CUdeviceptr        doorbell_dev_ = 0;
    /* Open piece of each slot: its segments, written straight into the
     * pinned table the gather kernel's copy reads (slot x max_plan). */
    Seg               *host_table_ = nullptr;
    CUdeviceptr        dev_table_  = 0;
    std::vector<uint32_t> nsegs_;             /* per slot */
    std::vector<uint64_t> bytes_;             /* per slot */
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
