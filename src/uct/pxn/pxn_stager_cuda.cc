#include "pxn_stager_cuda.h"

#include <ucs/debug/log_def.h>
#include <ucs/pxn/control_file.h>
#include <ucs/pxn/seq.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <unistd.h>

/* The gather kernel as a fatbin (generated from pxn_gather.cu). */
extern "C" const unsigned char pxn_gather_fatbin[];

namespace pxn {
namespace uct {

#define PXN_CU_CHECK(_call, _what) \
    do { \
        CUresult _r = (_call); \
        if (_r != CUDA_SUCCESS) { \
            ucs_error("pxn: %s failed: %s", _what, cu_->error(_r)); \
            return UCS_ERR_IO_ERROR; \
        } \
    } while (0)

ucs_status_t CudaStager::open(const Params &params, std::unique_ptr<Stager> *stager)
{
    int gpu = current_gpu();
    if (gpu < 0) {
        gpu = params.gpu;
    }
    if (gpu < 0) {
        ucs_debug("pxn: relay pid %u stages in GPU memory, but this process "
                  "uses no GPU that pxn knows of: no lane",
                  params.mapping->info().identity.pid);
        return UCS_ERR_UNSUPPORTED;
    }
    const Settings &s = *params.settings;
    Options options;
    options.policy       = s.copy;
    options.gpu_doorbell = s.gpu_doorbell;
    options.gather_ctas  = s.gather_ctas;
    std::unique_ptr<CudaStager> cuda;
    ucs_status_t status = create(gpu, s.geometry, params.producer, options,
                                 &cuda);
    if (status == UCS_OK) {
        cuda->lane_memory_ = &params.mapping->lane(params.lane).memory();
        *stager = std::move(cuda);
    }
    return status;
}

ucs_status_t CudaStager::open(const uint8_t *ipc_handle, int gpu, uint32_t lane,
                              const Geometry &geometry,
                              abi::LaneProducer *producer,
                              const Options &options,
                              std::unique_ptr<CudaStager> *stager_p)
{
    std::unique_ptr<CudaStager> s;
    ucs_status_t status = create(gpu, geometry, producer, options, &s);
    if (status == UCS_OK) {
        status = s->open_memory(ipc_handle, slot_offset(lane, 0, geometry.slots,
                                                        geometry.slot_size));
    }
    if (status == UCS_OK) {
        *stager_p = std::move(s);
    }
    return status;
}

ucs_status_t CudaStager::create(int gpu, const Geometry &geometry,
                                abi::LaneProducer *producer,
                                const Options &options,
                                std::unique_ptr<CudaStager> *stager_p)
{
    std::unique_ptr<CudaStager> s(new CudaStager());
    s->cu_        = CudaDriver::get();
    s->options_   = options;
    s->producer_  = producer;
    s->slot_size_ = geometry.slot_size;
    s->max_plan_  = geometry.max_plan;
    s->gpu_       = gpu;
    if (s->cu_ == nullptr) {
        return UCS_ERR_UNSUPPORTED;
    }
    const CudaDriver *cu_ = s->cu_;
    s->ctx_ = cu_->retain_primary(gpu);
    if (s->ctx_ == nullptr) {
        return UCS_ERR_NO_DEVICE;
    }
    ContextScope scope(cu_, s->ctx_);

    PXN_CU_CHECK(cu_->cuStreamCreate(&s->stream_, CU_STREAM_NON_BLOCKING),
                 "cuStreamCreate");

    /* Not value-initialised: pages are touched as pieces fill them. */
    s->table_.reset(new Seg[size_t(geometry.slots) * geometry.max_plan]);
    s->nsegs_.assign(geometry.slots, 0);
    s->bytes_.assign(geometry.slots, 0);
    if (s->load_kernel() != UCS_OK) {
        ucs_debug("pxn: no gather kernel: copy engine only");
    }
    if (options.gpu_doorbell) {
        s->try_gpu_doorbell();
    }
    ucs_debug("pxn: GPU staging from GPU %d, %s doorbell, %s", gpu,
              s->doorbell_dev_ ? "GPU" : "CPU (event)",
              s->gather_[0] ? "gather kernel" : "copy engine only");
    *stager_p = std::move(s);
    return UCS_OK;
}

ucs_status_t CudaStager::open_memory(const uint8_t *ipc_handle,
                                     uint64_t lane_base)
{
    ContextScope scope(cu_, ctx_);
    CUipcMemHandle handle;
    memcpy(&handle, ipc_handle, sizeof(handle));
    PXN_CU_CHECK(cu_->cuIpcOpenMemHandle(&arena_, handle,
                                         CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                 "opening a relay lane's memory (cuIpcOpenMemHandle)");
    lane_base_ = lane_base;
    return UCS_OK;
}

/* The relay wrote the handle before its acknowledgement, which the lane
 * load-acquired: a private copy is current. */
ucs_status_t CudaStager::ready()
{
    if ((lane_memory_ == nullptr) || (arena_ != 0)) {
        return UCS_OK;
    }
    uint8_t handle[sizeof(CUipcMemHandle)];
    static_assert(sizeof(handle) <= sizeof(lane_memory_->handle), "IPC handle");
    memcpy(handle, lane_memory_->handle, sizeof(handle));
    if (abi::load_relaxed(lane_memory_->size) <
        uint64_t(nsegs_.size()) * slot_size_) {
        ucs_error("pxn: a relay lane's memory is smaller than its slots");
        return UCS_ERR_INVALID_PARAM;
    }
    return open_memory(handle, 0);
}

/* Copies into and out of the lane's slots end before the relay may reuse
 * or free their memory. */
void CudaStager::close()
{
    if ((cu_ == nullptr) || (ctx_ == nullptr) || (arena_ == 0)) {
        return;
    }
    ContextScope scope(cu_, ctx_);
    for (CUstream stream : {stream_, doorbell_stream_, out_stream_}) {
        if (stream != nullptr) {
            cu_->cuStreamSynchronize(stream);
        }
    }
    cu_->cuIpcCloseMemHandle(arena_);
    arena_ = 0;
}

/* Registers the page of the producer block and tries one write of the
 * current value: support is not advertised reliably. */
void CudaStager::try_gpu_doorbell()
{
    const uintptr_t page = sysconf(_SC_PAGESIZE);
    void *first          = reinterpret_cast<void*>(
            reinterpret_cast<uintptr_t>(&producer_->doorbell) & ~(page - 1));
    CUdeviceptr mapped;
    if (cu_->cuMemHostRegister(first, page, CU_MEMHOSTREGISTER_DEVICEMAP |
                                            CU_MEMHOSTREGISTER_PORTABLE) !=
        CUDA_SUCCESS) {
        return;
    }
    registered_ = first;
    if (cu_->cuMemHostGetDevicePointer(&mapped, first, 0) != CUDA_SUCCESS) {
        return;
    }
    const CUdeviceptr doorbell = mapped +
            (reinterpret_cast<uintptr_t>(&producer_->doorbell) -
             reinterpret_cast<uintptr_t>(first));
    if ((cu_->cuStreamCreate(&doorbell_stream_, CU_STREAM_NON_BLOCKING) ==
         CUDA_SUCCESS) &&
        (cu_->cuEventCreate(&copied_, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS) &&
        (cu_->cuStreamWriteValue64(doorbell_stream_, doorbell,
                                   abi::load_acquire(producer_->doorbell),
                                   CU_STREAM_WRITE_VALUE_DEFAULT) == CUDA_SUCCESS) &&
        (cu_->cuStreamSynchronize(doorbell_stream_) == CUDA_SUCCESS)) {
        doorbell_dev_ = doorbell;
    }
}

ucs_status_t CudaStager::load_kernel()
{
    PXN_CU_CHECK(cu_->cuModuleLoadData(&module_, pxn_gather_fatbin),
                 "loading the gather kernel");
    CUfunction gather[kPxnGatherVariants], scatter[kPxnGatherVariants];
    for (unsigned v = 0; v < kPxnGatherVariants; ++v) {
        const std::string n = std::to_string(kPxnGatherCapacities[v]);
        PXN_CU_CHECK(cu_->cuModuleGetFunction(&gather[v], module_,
                                              ("pxn_gather" + n).c_str()),
                     "finding the gather kernel");
        PXN_CU_CHECK(cu_->cuModuleGetFunction(&scatter[v], module_,
                                              ("pxn_scatter" + n).c_str()),
                     "finding the scatter kernel");
    }
    std::copy(gather, gather + kPxnGatherVariants, gather_);
    std::copy(scatter, scatter + kPxnGatherVariants, scatter_);
    return UCS_OK;
}

CudaStager::~CudaStager()
{
    if ((cu_ == nullptr) || (ctx_ == nullptr)) {
        return;
    }
    {
        ContextScope scope(cu_, ctx_);
        for (CUstream stream : {stream_, doorbell_stream_, out_stream_}) {
            if (stream != nullptr) {
                cu_->cuStreamSynchronize(stream);
                cu_->cuStreamDestroy(stream);
            }
        }
        if (copied_ != nullptr) {
            cu_->cuEventDestroy(copied_);
        }
        for (const Pending &p : pending_) {
            cu_->cuEventDestroy(p.event);
        }
        for (CUevent e : events_) {
            cu_->cuEventDestroy(e);
        }
        for (CUevent e : out_events_) {
            if (e != nullptr) {
                cu_->cuEventDestroy(e);
            }
        }
        if (module_ != nullptr) {
            cu_->cuModuleUnload(module_);
        }
        if (registered_ != nullptr) {
            cu_->cuMemHostUnregister(registered_);
        }
        if (arena_ != 0) {
            cu_->cuIpcCloseMemHandle(arena_);
            arena_ = 0;
        }
    }
    CUdevice dev;
    if (cu_->cuDeviceGet(&dev, gpu_) == CUDA_SUCCESS) {
        cu_->cuDevicePrimaryCtxRelease(dev);
    }
}

uint8_t *CudaStager::pack_area(uint32_t, uint64_t, size_t max)
{
    if (bounce_.size() < max) {
        bounce_.resize(max);
    }
    return bounce_.data();
}

ucs_status_t CudaStager::packed(uint32_t slot_index, uint64_t offset,
                                size_t length)
{
    ContextScope scope(cu_, ctx_);
    const CUdeviceptr dst = reinterpret_cast<CUdeviceptr>(slot(slot_index)) +
                            offset;
    PXN_CU_CHECK(cu_->cuMemcpyAsync(dst, reinterpret_cast<CUdeviceptr>(
                                                 bounce_.data()),
                                    length, stream_),
                 "staging copy (cuMemcpyAsync)");
    return UCS_OK;
}

/* Which arena this is decides what a copy costs; asked once, on the data
 * path's first piece (the arena's device does not change). */
const CopyCosts &CudaStager::costs()
{
    if (!costs_known_) {
        int device      = -1;
        const bool peer = (cu_->cuPointerGetAttribute(
                                   &device, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                   arena_) != CUDA_SUCCESS) ||
                          (device != gpu_);
        costs_       = peer ? CopyCosts::peer_gpu() : CopyCosts::same_gpu();
        costs_known_ = true;
        ucs_debug("pxn: staging from GPU %d into an arena on %s GPU", gpu_,
                  peer ? "a peer" : "the same");
    }
    return costs_;
}

bool CudaStager::classify(const Seg *segs, unsigned count, CUdeviceptr dst,
                          PieceShape *shape)
{
    if (device_.size() < max_plan_) {
        device_.assign(max_plan_, 0); /* once */
    }
    *shape = PieceShape();
    CUdeviceptr base  = 0;
    size_t size       = 0;
    unsigned queries  = 0;
    for (unsigned i = 0; i < count; ++i) {
        const Seg &seg = segs[i];
        bool device    = (seg.addr - base < size);
        if (!device) {
            device = cu_->is_device_pointer(reinterpret_cast<void*>(seg.addr));
            if (!device && (++queries > kMaxHostQueries)) {
                return false;
            }
            if (device && (cu_->cuMemGetAddressRange(&base, &size, seg.addr) !=
                           CUDA_SUCCESS)) {
                size = 0;
            }
        }
        device_[i] = device;
        if (device) {
            ++shape->device_segs;
            shape->device_bytes  += seg.length;
            shape->shifted_bytes += ((seg.addr ^ (dst + seg.offset)) & 15) ?
                                    seg.length : 0;
        } else {
            ++shape->host_segs;
            shape->host_bytes += seg.length;
        }
    }
    return true;
}

/* cuLaunchKernel copies the parameters (as many bytes as the variant
 * takes) before it returns: one batch on the stack serves every launch. */
ucs_status_t CudaStager::launch(const CUfunction *kernels, CUstream stream,
                                const Seg *segs, unsigned count,
                                uint32_t slot_index, const CopyPlan &plan)
{
    PxnGatherBatch<kPxnGatherMaxSegs> batch;
    void *args[]           = {&batch};
    batch.slot             = reinterpret_cast<uint64_t>(slot(slot_index));
    batch.warp_per_segment = plan.warp_per_segment;
    for (unsigned first = 0; first < count; first += batch.count) {
        batch.count = std::min(count - first, kPxnGatherMaxSegs);
        unsigned v  = 0;
        while (kPxnGatherCapacities[v] < batch.count) {
            ++v;
        }
        memcpy(batch.segs, segs + first, batch.count * sizeof(Seg));
        PXN_CU_CHECK(cu_->cuLaunchKernel(kernels[v], plan.blocks, 1, 1,
                                         kGatherThreads, 1, 1, 0, stream, args,
                                         nullptr),
                     "launching the gather or scatter kernel");
    }
    return UCS_OK;
}

/* The segments recorded for `slot` between it and the outside: into the
 * slot (a put piece, on the copy stream) or out of it (a GET reply, on the
 * reply stream). *by_kernel: whether a kernel copied some of them. */
ucs_status_t CudaStager::copy_segments(uint32_t slot_index, bool out,
                                       bool *by_kernel)
{
    const CUdeviceptr base    = reinterpret_cast<CUdeviceptr>(slot(slot_index));
    Seg *segs                 = table_.get() + size_t(slot_index) * max_plan_;
    const unsigned count      = nsegs_[slot_index];
    const CUfunction *kernels = out ? scatter_ : gather_;
    CUstream stream           = out ? out_stream_ : stream_;
    PieceShape shape;
    shape.device_segs  = count;
    shape.device_bytes = bytes_[slot_index];
    nsegs_[slot_index] = 0;
    bytes_[slot_index] = 0;
    /* First as if every outside address were device memory and aligned: a
     * piece the kernel would not copy even then costs no driver query. */
    CopyPlan plan = plan_copy(options_.policy, shape, costs(),
                              options_.gather_ctas, kernels[0] != nullptr);
    if (plan.kernel) {
        plan = classify(segs, count, base, &shape) ?
               plan_copy(options_.policy, shape, costs(), options_.gather_ctas,
                         true) :
               CopyPlan();
    }
    unsigned kernel_segs = 0;
    for (unsigned i = 0; i < count; ++i) {
        if (plan.kernel && device_[i]) {
            segs[kernel_segs++] = segs[i]; /* the kernel's segments, in front */
            continue;
        }
        const CUdeviceptr in_slot = base + segs[i].offset;
        PXN_CU_CHECK(cu_->cuMemcpyAsync(out ? segs[i].addr : in_slot,
                                        out ? in_slot : segs[i].addr,
                                        segs[i].length, stream),
                     out ? "copying a GET reply out of its slot (cuMemcpyAsync)" :
                           "staging copy (cuMemcpyAsync)");
    }
    *by_kernel = (kernel_segs > 0);
    return (kernel_segs == 0) ? UCS_OK :
           launch(kernels, stream, segs, kernel_segs, slot_index, plan);
}

/* The recorded segments of the open piece of `slot` into the slot. */
ucs_status_t CudaStager::copy_piece(uint32_t slot_index)
{
    bool by_kernel = false;
    const ucs_status_t status = copy_segments(slot_index, false, &by_kernel);
    if (status == UCS_OK) {
        ++(by_kernel ? sm_pieces_ : ce_pieces_);
    }
    return status;
}

/* The relay takes every seq up to the doorbell: a doorbell rung after
 * another must also land after it. */
ucs_status_t CudaStager::ring_after_copies(uint64_t seq)
{
    if (doorbell_dev_ != 0) {
        /* its time is the GPU's: no pickup sample for it */
        abi::store_relaxed(producer_->rung_ns, uint64_t(0));
        PXN_CU_CHECK(cu_->cuEventRecord(copied_, stream_), "cuEventRecord");
        PXN_CU_CHECK(cu_->cuStreamWaitEvent(doorbell_stream_, copied_, 0),
                     "cuStreamWaitEvent");
        PXN_CU_CHECK(cu_->cuStreamWriteValue64(doorbell_stream_, doorbell_dev_,
                                               seq, CU_STREAM_WRITE_VALUE_DEFAULT),
                     "GPU doorbell (cuStreamWriteValue64)");
        gpu_rung_ = seq;
        return UCS_OK;
    }
    CUevent event;
    if (events_.empty()) {
        PXN_CU_CHECK(cu_->cuEventCreate(&event, CU_EVENT_DISABLE_TIMING),
                     "cuEventCreate");
    } else {
        event = events_.back();
        events_.pop_back();
    }
    PXN_CU_CHECK(cu_->cuEventRecord(event, stream_), "cuEventRecord");
    pending_.push_back({seq, event});
    return UCS_OK;
}

ucs_status_t CudaStager::commit(uint64_t seq, uint32_t slot_index, abi::Op op)
{
    if (op == abi::kOpGet) {
        /* Nothing to copy in: the relay may fill the slot at once, unless
         * an earlier doorbell is still on its way (the GPU's last write
         * has landed when the doorbell holds its value: we are its only
         * writer). */
        if (pending_.empty() &&
            ((gpu_rung_ == 0) ||
             (abi::load_acquire(producer_->doorbell) == gpu_rung_))) {
            gpu_rung_ = 0;
            abi::store_relaxed(producer_->rung_ns, monotonic_ns());
            abi::store_release(producer_->doorbell, seq);
            return UCS_OK;
        }
        ContextScope scope(cu_, ctx_);
        return ring_after_copies(seq);
    }
    ContextScope scope(cu_, ctx_);
    ucs_status_t status = copy_piece(slot_index);
    if (status != UCS_OK) {
        return status;
    }
    return ring_after_copies(seq);
}

unsigned CudaStager::progress()
{
    if (pending_.empty()) {
        return 0;
    }
    ContextScope scope(cu_, ctx_);
    unsigned rung = 0;
    while (!pending_.empty() &&
           (cu_->cuEventQuery(pending_.front().event) == CUDA_SUCCESS)) {
        abi::store_relaxed(producer_->rung_ns, monotonic_ns());
        abi::store_release(producer_->doorbell, pending_.front().seq);
        events_.push_back(pending_.front().event);
        pending_.pop_front();
        ++rung;
    }
    return rung;
}

/* A reply's destinations are recorded like a put's sources (in the
 * slot's list of segments, free while the slot holds a GET piece) and copied
 * by end_out(): one kernel launch for up to kPxnGatherMaxSegs GPU
 * destinations, instead of a copy-engine copy (~4 us) each. */
ucs_status_t CudaStager::copy_out(uint32_t slot_index, uint64_t offset,
                                  void *dest, uint64_t length)
{
    if (out_stream_ == nullptr) {
        ContextScope scope(cu_, ctx_);
        PXN_CU_CHECK(cu_->cuStreamCreate(&out_stream_, CU_STREAM_NON_BLOCKING),
                     "cuStreamCreate (GET replies)");
    }
    if (nsegs_[slot_index] == max_plan_) {
        ContextScope scope(cu_, ctx_);
        PXN_CU_CHECK(cu_->cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dest),
                                        reinterpret_cast<CUdeviceptr>(
                                                slot(slot_index)) + offset,
                                        length, out_stream_),
                     "copying a GET reply out of its slot (cuMemcpyAsync)");
        return UCS_OK;
    }
    add(slot_index, dest, offset, length);
    return UCS_OK;
}

ucs_status_t CudaStager::end_out(uint32_t slot_index)
{
    if (out_stream_ == nullptr) {
        return UCS_OK; /* nothing was recorded */
    }
    ContextScope scope(cu_, ctx_);
    bool by_kernel = false;
    ucs_status_t status = copy_segments(slot_index, true, &by_kernel);
    if (status != UCS_OK) {
        return status;
    }
    out_pieces_ += by_kernel;
    if (out_events_.empty()) {
        out_events_.assign(nsegs_.size(), nullptr); /* once */
        out_pending_.assign(nsegs_.size(), 0);
    }
    CUevent &event = out_events_[slot_index];
    if (event == nullptr) {
        PXN_CU_CHECK(cu_->cuEventCreate(&event, CU_EVENT_DISABLE_TIMING),
                     "cuEventCreate");
    }
    PXN_CU_CHECK(cu_->cuEventRecord(event, out_stream_), "cuEventRecord");
    out_pending_[slot_index] = 1;
    return UCS_OK;
}

ucs_status_t CudaStager::out_status(uint32_t slot_index)
{
    if (out_pending_.empty() || !out_pending_[slot_index]) {
        return UCS_OK;
    }
    ContextScope scope(cu_, ctx_);
    const CUresult result = cu_->cuEventQuery(out_events_[slot_index]);
    if (result == CUDA_ERROR_NOT_READY) {
        return UCS_INPROGRESS;
    }
    out_pending_[slot_index] = 0;
    if (result != CUDA_SUCCESS) {
        ucs_error("pxn: copying a GET reply out of its slot failed: %s",
                  cu_->error(result));
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}

void CudaStager::wait_out()
{
    if (out_stream_ == nullptr) {
        return;
    }
    ContextScope scope(cu_, ctx_);
    cu_->cuStreamSynchronize(out_stream_);
    std::fill(out_pending_.begin(), out_pending_.end(), 0);
}

/* get_bcopy's callback reads host memory: a synchronous copy into the pack
 * area (at most 64 KiB). */
ucs_status_t CudaStager::unpack(uint32_t slot_index, uint64_t offset,
                                uct_unpack_callback_t unpack, void *arg,
                                uint64_t length)
{
    uint8_t *host = pack_area(slot_index, offset, length);
    ContextScope scope(cu_, ctx_);
    PXN_CU_CHECK(cu_->cuMemcpy(reinterpret_cast<CUdeviceptr>(host),
                               reinterpret_cast<CUdeviceptr>(slot(slot_index)) +
                               offset, length),
                 "copying a GET reply out of its slot");
    unpack(arg, host, length);
    return UCS_OK;
}

} // namespace uct
} // namespace pxn
