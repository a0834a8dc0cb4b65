/*
 * Staging into a relay's GPU arena (CUDA IPC), built with the CUDA backend
 * only: copies a piece's segments into its slot and rings the lane's
 * doorbell from the GPU once the copy is done: the relay sees the doorbell
 * only when the bytes are there, and the CPU never waits for a copy.
 * pxn_stager.h has the contract.
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
 * Memory: each lane of a GPU arena is an allocation of its own, exported by
 * the CUDA IPC handle the relay writes into the lane's LaneMemory block
 * before it acknowledges the claim: open() (at the claim) prepares streams,
 * tables and the kernel; ready() (after the acknowledgement) opens the
 * handle; close() (before the lane is given back) waits for the lane's
 * streams and closes it, so the relay never frees memory still mapped here
 * (undefined behaviour for CUDA IPC).
 *
 * Context: the primary context of this process's GPU (the one current when
 * the lane opens, else the GPU pxn knows the process uses), pushed around
 * each driver call and popped again: the application's own current
 * context, or its lack of one, is never changed. A process with no GPU of
 * its own cannot open such a lane (UCS_ERR_UNSUPPORTED).
 *
 * Failure: a copy or doorbell that cannot be enqueued returns an error from
 * commit(), before anything was published: the sender quarantines the lane.
 */
#ifndef PXN_UCT_PXN_STAGER_CUDA_H_
#define PXN_UCT_PXN_STAGER_CUDA_H_

#include "pxn_cuda.h"
#include "pxn_stager.h"

#include <ucs/debug/assert.h>

#include <deque>
#include <vector>

namespace pxn {
namespace uct {

class CudaStager final : public Stager {
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

    /* Opens lane `lane` of memory exported as `ipc_handle` that holds the
     * slots of lanes 0.. one after another, staging from GPU `gpu`, ready
     * at once (the stage bench uses this directly). */
    static ucs_status_t open(const uint8_t *ipc_handle, int gpu, uint32_t lane,
                             const Geometry &geometry,
                             abi::LaneProducer *producer,
                             const Options &options,
                             std::unique_ptr<CudaStager> *stager);
    /* A claimed lane of a relay's GPU arena; its memory opens in ready(). */
    static ucs_status_t open(const Params &params, std::unique_ptr<Stager> *stager);
    ~CudaStager() override;

    ucs_status_t ready() override;
    void         close() override;

    /* Device address of a slot in this process. */
    uint8_t *slot(uint32_t slot) const
    {
        return reinterpret_cast<uint8_t*>(arena_ + lane_base_ +
                                          uint64_t(slot) * slot_size_);
    }
    bool gpu_doorbell() const { return doorbell_dev_ != 0; }

    /* The open piece of `slot` is `src` at `offset`: at most max_plan
     * segments. The slot is open, so its previous piece completed and the
     * stream work that read this part of the table is done. */
    void add(uint32_t slot, const void *src, uint64_t offset,
             uint64_t length) override
    {
        ucs_assert(nsegs_[slot] < max_plan_);
        host_table_[size_t(slot) * max_plan_ + nsegs_[slot]++] =
                Seg{reinterpret_cast<uint64_t>(src), offset, length};
        bytes_[slot] += length;
    }
    uint8_t *pack_area(uint32_t, uint64_t, size_t max) override;
    /* Enqueues the copy of the pack area now: cuMemcpyAsync from pageable
     * memory returns once it has taken the bytes. */
    ucs_status_t packed(uint32_t slot, uint64_t offset, size_t length) override;
    ucs_status_t commit(uint64_t seq, uint32_t slot, abi::Op op) override;
    unsigned     progress() override;
    bool         idle() const override { return pending_.empty(); }
    ucs_status_t copy_out(uint32_t slot, uint64_t offset, void *dest,
                          uint64_t length) override;
    ucs_status_t unpack(uint32_t slot, uint64_t offset,
                        uct_unpack_callback_t unpack, void *arg,
                        uint64_t length) override;
    uint64_t     gather_pieces() const override { return sm_pieces_; }
    uint64_t     ce_pieces() const { return ce_pieces_; }

private:
    struct Pending {
        uint64_t seq;
        CUevent  event;
    };

    CudaStager() = default;
    /* Everything but the slots' memory. */
    static ucs_status_t create(int gpu, const Geometry &geometry,
                               abi::LaneProducer *producer,
                               const Options &options,
                               std::unique_ptr<CudaStager> *stager);
    /* Maps the memory of `ipc_handle`; slot 0 of the lane at `lane_base`. */
    ucs_status_t open_memory(const uint8_t *ipc_handle, uint64_t lane_base);
    ucs_status_t load_kernel();
    void         try_gpu_doorbell();
    /* Whether the gather kernel copies these segments of a piece. */
    bool         use_kernel(const Seg *segs, unsigned count,
                            uint64_t average) const;
    ucs_status_t copy_piece(uint32_t slot);

    const CudaDriver  *cu_       = nullptr;
    CUcontext          ctx_      = nullptr; /* retained primary context */
    int                gpu_      = -1;
    Options            options_;
    CUdeviceptr        arena_    = 0;    /* the lane's memory, opened */
    uint64_t           lane_base_ = 0; /* offset of slot 0 of our lane */
    const abi::LaneMemory *lane_memory_ = nullptr; /* its handle (relay) */
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
    std::vector<uint8_t>  bounce_;            /* pack area */
    CUmodule           module_     = nullptr;
    CUfunction         gather_     = nullptr;
    std::deque<Pending> pending_;             /* CPU doorbells, seq order */
    std::vector<CUevent> events_;             /* free events */
    uint64_t           ce_pieces_ = 0;
    uint64_t           sm_pieces_ = 0;
};

} // namespace uct
} // namespace pxn

#endif
