/*
 * Staging into a relay's GPU arena (CUDA IPC), built with the CUDA backend
 * only: copies a piece's segments into its slot and rings the lane's
 * doorbell from the GPU once the copy is done: the relay sees the doorbell
 * only when the bytes are there, and the CPU never waits for a copy.
 * pxn_stager.h has the contract.
 *
 * Copies: per piece, the copy engine (one cuMemcpyAsync per segment) or
 * the SM gather kernel (a bounded grid; one launch per kPxnGatherMaxSegs
 * segments, which travel in its parameters), chosen by
 * plan_copy() (pxn_copy_policy.h) from the piece's segment count, sizes,
 * alignment and source memory types, and from whether the arena is on
 * this GPU or a peer. Host sources always go by copy engine (an SM kernel
 * cannot read pageable host memory). UCX_PXN_COPY=auto|ce|sm.
 *
 * Source memory type: asked of the driver only for pieces the kernel
 * would copy, once per allocation met (cuMemGetAddressRange) and per host
 * segment, not per device segment: the query costs ~0.14 us, which capped
 * 4 KiB blocks at 30 GB/s. A piece with many host segments stops asking
 * and goes by copy engine (always correct). Within a piece every source
 * belongs to a request in flight, so its allocation cannot change under us.
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
 * before it acknowledges the claim: open() (at the claim) prepares streams
 * and the kernel, and allocates no pinned or device memory (pinned segment
 * tables cost ~1-2 ms per lane, docs/gpu.md); ready() (after the
 * acknowledgement) opens the handle; close() (before the lane is given
 * back) waits for the lane's streams and closes it, so the relay never
 * frees memory still mapped here (undefined behaviour for CUDA IPC).
 *
 * Context: the primary context of this process's GPU (the one current when
 * the lane opens, else the GPU pxn knows the process uses), pushed around
 * each driver call and popped again: the application's own current
 * context, or its lack of one, is never changed. A process with no GPU of
 * its own cannot open such a lane (UCS_ERR_UNSUPPORTED).
 *
 * GET doorbells: rung from the CPU at once, unless a put's doorbell is
 * still on its way (GPU write or pending event): then behind it, in the
 * same way, so that the doorbell never runs ahead of an earlier piece's
 * bytes (the relay takes every seq up to the doorbell).
 *
 * GET replies: copy_out() records each destination among the slot's
 * segments (free while the slot holds a GET piece); end_out() copies them on
 * a stream of its own (created on first use), by copy engine or the
 * scatter kernel (the gather kernel's twin, slot -> destinations),
 * chosen as for puts, and records the slot's event behind the copies;
 * out_status() queries that event. The sender keeps the slot, and the
 * requests, until then. unpack() (get_bcopy, at most 64 KiB) copies
 * synchronously into host memory and calls back at once.
 *
 * Failure: a copy or doorbell that cannot be enqueued returns an error from
 * commit(), before anything was published: the sender quarantines the lane.
 */
#ifndef PXN_UCT_PXN_STAGER_CUDA_H_
#define PXN_UCT_PXN_STAGER_CUDA_H_

#include "pxn_copy_policy.h"
#include "pxn_cuda.h"
#include "pxn_gather.h"
#include "pxn_stager.h"

#include <ucs/debug/assert.h>

#include <deque>
#include <memory>
#include <vector>

namespace pxn {
namespace uct {

class CudaStager final : public Stager {
public:
    /* A segment as the gather kernel reads it (pxn_gather.h). */
    using Seg = PxnGatherSeg;
    /* More host segments in a piece: the copy engine copies all of it
     * (no more memory-type queries). */
    static constexpr unsigned kMaxHostQueries = 16;

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
     * segments (recorded here; the copy reads them when it is enqueued). */
    void add(uint32_t slot, const void *src, uint64_t offset,
             uint64_t length) override
    {
        ucs_assert(nsegs_[slot] < max_plan_);
        table_[size_t(slot) * max_plan_ + nsegs_[slot]++] =
                Seg{reinterpret_cast<uint64_t>(src), uint32_t(offset),
                    uint32_t(length)};
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
    ucs_status_t end_out(uint32_t slot) override;
    ucs_status_t out_status(uint32_t slot) override;
    void         wait_out() override;
    uint64_t     gather_pieces() const override { return sm_pieces_; }
    uint64_t     ce_pieces() const { return ce_pieces_; }
    /* GET pieces whose replies the scatter kernel copied out. */
    uint64_t     scatter_pieces() const { return out_pieces_; }

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
    /* The shape of a piece bound for `dst`: memory type of each source
     * (device_[i]); false when there were too many host segments to ask
     * about. */
    bool         classify(const Seg *segs, unsigned count, CUdeviceptr dst,
                          PieceShape *shape);
    const CopyCosts &costs();
    ucs_status_t copy_segments(uint32_t slot, bool out, bool *by_kernel);
    ucs_status_t copy_piece(uint32_t slot);
    /* Launches for `count` segments, kPxnGatherMaxSegs at most each, of
     * the variant of `kernels` (kPxnGatherCapacities) that holds them. */
    ucs_status_t launch(const CUfunction *kernels, CUstream stream,
                        const Seg *segs, unsigned count, uint32_t slot,
                        const CopyPlan &plan);
    /* Rings `seq` once everything enqueued on the copy stream is done. */
    ucs_status_t ring_after_copies(uint64_t seq);

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
    /* Open piece of each slot: its segments (a put's sources, or a GET
     * reply's destinations between copy_out() and end_out()), slot x
     * max_plan; the launches copy them into their parameters. */
    std::unique_ptr<Seg[]> table_;
    std::vector<uint32_t> nsegs_;             /* per slot */
    std::vector<uint64_t> bytes_;             /* per slot */
    std::vector<uint8_t>  bounce_;            /* pack area */
    CUmodule           module_     = nullptr;
    /* by capacity (kPxnGatherCapacities); null without the kernel */
    CUfunction         gather_[kPxnGatherVariants]  = {};
    CUfunction         scatter_[kPxnGatherVariants] = {};
    std::deque<Pending> pending_;             /* CPU doorbells, seq order */
    std::vector<CUevent> events_;             /* free events */
    uint64_t           gpu_rung_ = 0;         /* last seq of a GPU doorbell */
    std::vector<uint8_t> device_;             /* classify(): per segment */
    CopyCosts          costs_{};
    bool               costs_known_ = false;
    /* GET replies: copies slot -> destination, and per slot the event
     * behind its last one (out_pending_[slot]: not yet seen done). */
    CUstream           out_stream_ = nullptr;
    std::vector<CUevent> out_events_;
    std::vector<uint8_t> out_pending_;
    uint64_t           ce_pieces_ = 0;
    uint64_t           sm_pieces_ = 0;
    uint64_t           out_pieces_ = 0;
};

} // namespace uct
} // namespace pxn

#endif
