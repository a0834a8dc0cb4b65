#include "pxn_stager_cuda.h"

#include <ucs/debug/log_def.h>
#include <ucs/pxn/seq.h>

#include <algorithm>
#include <cstring>
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

    const size_t table = size_t(geometry.slots) * geometry.max_plan * sizeof(Seg);
    PXN_CU_CHECK(cu_->cuMemHostAlloc(reinterpret_cast<void**>(&s->host_table_),
                                     table, 0),
                 "cuMemHostAlloc (segment tables)");
    PXN_CU_CHECK(cu_->cuMemAlloc(&s->dev_table_, table), "cuMemAlloc (segment tables)");
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
              s->gather_ ? "gather kernel" : "copy engine only");
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

/* Copies into the lane's slots end before the relay may reuse or free
 * their memory. */
void CudaStager::close()
{
    if ((cu_ == nullptr) || (ctx_ == nullptr) || (arena_ == 0)) {
        return;
    }
    ContextScope scope(cu_, ctx_);
    for (CUstream stream : {stream_, doorbell_stream_}) {
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
    PXN_CU_CHECK(cu_->cuModuleGetFunction(&gather_, module_, "pxn_gather"),
                 "finding the gather kernel");
    return UCS_OK;
}

CudaStager::~CudaStager()
{
    if ((cu_ == nullptr) || (ctx_ == nullptr)) {
        return;
    }
    {
        ContextScope scope(cu_, ctx_);
        for (CUstream stream : {stream_, doorbell_stream_}) {
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
        if (module_ != nullptr) {
            cu_->cuModuleUnload(module_);
        }
        if (host_table_ != nullptr) {
            cu_->cuMemFreeHost(host_table_);
        }
        if (dev_table_ != 0) {
            cu_->cuMemFree(dev_table_);
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

bool CudaStager::use_kernel(const Seg *segs, unsigned count,
                            uint64_t average) const
{
    const bool wanted = (options_.policy == CopyChoice::kSm) ?
                        (count > 0) :
                        ((options_.policy == CopyChoice::kAuto) &&
                         (count > 1) && (average < kSmBelow));
    if (!wanted || (gather_ == nullptr)) {
        return false;
    }
    /* The kernel reads device memory only. */
    CUdeviceptr base = 0;
    size_t size      = 0;
    for (unsigned i = 0; i < count; ++i) {
        if (segs[i].src - base < size) {
            continue;
        }
        if (!cu_->is_device_pointer(reinterpret_cast<void*>(segs[i].src))) {
            return false;
        }
        if (cu_->cuMemGetAddressRange(&base, &size, segs[i].src) != CUDA_SUCCESS) {
            size = 0;
        }
    }
    return true;
}

/* The recorded segments of the open piece of `slot` into the slot. */
ucs_status_t CudaStager::copy_piece(uint32_t slot_index)
{
    const CUdeviceptr base = reinterpret_cast<CUdeviceptr>(slot(slot_index));
    const Seg *segs        = host_table_ + size_t(slot_index) * max_plan_;
    unsigned count         = nsegs_[slot_index];
    const uint64_t average = (count > 0) ? bytes_[slot_index] / count : 0;
    nsegs_[slot_index]     = 0;
    bytes_[slot_index]     = 0;
    if (use_kernel(segs, count, average)) {
        const CUdeviceptr dev = dev_table_ +
                                size_t(slot_index) * max_plan_ * sizeof(Seg);
        PXN_CU_CHECK(cu_->cuMemcpyAsync(dev, reinterpret_cast<CUdeviceptr>(segs),
                                        count * sizeof(Seg), stream_),
                     "copying a segment table");
        CUdeviceptr dst          = base;
        unsigned warps           = average < kWarpPerSegmentBelow;
        void *args[]             = {const_cast<CUdeviceptr*>(&dev), &count,
                                    &dst, &warps};
        const unsigned per_block = warps ? kGatherThreads / 32 : 1;
        const unsigned blocks    = std::min<unsigned>(
                (count + per_block - 1) / per_block, options_.gather_ctas);
        PXN_CU_CHECK(cu_->cuLaunchKernel(gather_, blocks, 1, 1, kGatherThreads,
                                         1, 1, 0, stream_, args, nullptr),
                     "launching the gather kernel");
        ++sm_pieces_;
    } else {
        for (unsigned i = 0; i < count; ++i) {
            PXN_CU_CHECK(cu_->cuMemcpyAsync(base + segs[i].offset, segs[i].src,
                                            segs[i].length, stream_),
                         "staging copy (cuMemcpyAsync)");
        }
        ++ce_pieces_;
    }
    return UCS_OK;
}

ucs_status_t CudaStager::commit(uint64_t seq, uint32_t slot_index, abi::Op op)
{
    if (op == abi::kOpGet) {
        /* Nothing to copy in: the relay may fill the slot at once. */
        abi::store_release(producer_->doorbell, seq);
        return UCS_OK;
    }
    ContextScope scope(cu_, ctx_);
    ucs_status_t status = copy_piece(slot_index);
    if (status != UCS_OK) {
        return status;
    }
    if (doorbell_dev_ != 0) {
        PXN_CU_CHECK(cu_->cuEventRecord(copied_, stream_), "cuEventRecord");
        PXN_CU_CHECK(cu_->cuStreamWaitEvent(doorbell_stream_, copied_, 0),
                     "cuStreamWaitEvent");
        PXN_CU_CHECK(cu_->cuStreamWriteValue64(doorbell_stream_, doorbell_dev_,
                                               seq, CU_STREAM_WRITE_VALUE_DEFAULT),
                     "GPU doorbell (cuStreamWriteValue64)");
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

unsigned CudaStager::progress()
{
    if (pending_.empty()) {
        return 0;
    }
    ContextScope scope(cu_, ctx_);
    unsigned rung = 0;
    while (!pending_.empty() &&
           (cu_->cuEventQuery(pending_.front().event) == CUDA_SUCCESS)) {
        abi::store_release(producer_->doorbell, pending_.front().seq);
        events_.push_back(pending_.front().event);
        pending_.pop_front();
        ++rung;
    }
    return rung;
}

ucs_status_t CudaStager::copy_out(uint32_t slot_index, uint64_t offset,
                                  void *dest, uint64_t length)
{
    ContextScope scope(cu_, ctx_);
    PXN_CU_CHECK(cu_->cuMemcpy(reinterpret_cast<CUdeviceptr>(dest),
                               reinterpret_cast<CUdeviceptr>(slot(slot_index)) +
                               offset, length),
                 "copying a GET reply out of its slot");
    return UCS_OK;
}

ucs_status_t CudaStager::unpack(uint32_t slot_index, uint64_t offset,
                                uct_unpack_callback_t unpack, void *arg,
                                uint64_t length)
{
    ucs_status_t status = copy_out(slot_index, offset,
                                   pack_area(slot_index, offset, length), length);
    if (status == UCS_OK) {
        unpack(arg, bounce_.data(), length);
    }
    return status;
}

} // namespace uct
} // namespace pxn
