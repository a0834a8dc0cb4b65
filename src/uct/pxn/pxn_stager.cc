#include "pxn_stager.h"

#include <ucs/debug/log_def.h>
#include <ucs/pxn/seq.h>

#include <algorithm>
#include <cstring>
#include <unistd.h>

#ifdef PXN_HAVE_CUDA

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

ucs_status_t CudaStager::open(const uint8_t *ipc_handle, uint32_t lane,
                              const Geometry &geometry,
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
    s->lane_base_ = slot_offset(lane, 0, geometry.slots, geometry.slot_size);
    if (s->cu_ == nullptr) {
        return UCS_ERR_UNSUPPORTED;
    }
    const CudaDriver *cu_ = s->cu_;
    int device;
    ucs_status_t status = cu_->ensure_context(0, &device);
    if (status != UCS_OK) {
        return status;
    }

    CUipcMemHandle handle;
    memcpy(&handle, ipc_handle, sizeof(handle));
    PXN_CU_CHECK(cu_->cuIpcOpenMemHandle(&s->arena_, handle,
                                         CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                 "opening the relay's arena (cuIpcOpenMemHandle)");
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

    /* GPU doorbell: register the page of the producer block and try one
     * write of the current value (support is not advertised reliably). */
    const uintptr_t page = sysconf(_SC_PAGESIZE);
    void *first          = reinterpret_cast<void*>(
            reinterpret_cast<uintptr_t>(&producer->doorbell) & ~(page - 1));
    CUdeviceptr mapped;
    if (options.gpu_doorbell &&
        (cu_->cuMemHostRegister(first, page, CU_MEMHOSTREGISTER_DEVICEMAP |
                                             CU_MEMHOSTREGISTER_PORTABLE) ==
         CUDA_SUCCESS)) {
        s->registered_ = first;
        if (cu_->cuMemHostGetDevicePointer(&mapped, first, 0) == CUDA_SUCCESS) {
            const CUdeviceptr doorbell = mapped +
                    (reinterpret_cast<uintptr_t>(&producer->doorbell) -
                     reinterpret_cast<uintptr_t>(first));
            if ((cu_->cuStreamCreate(&s->doorbell_stream_,
                                     CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS) &&
                (cu_->cuEventCreate(&s->copied_, CU_EVENT_DISABLE_TIMING) ==
                 CUDA_SUCCESS) &&
                (cu_->cuStreamWriteValue64(s->doorbell_stream_, doorbell,
                                           abi::load_acquire(producer->doorbell),
                                           CU_STREAM_WRITE_VALUE_DEFAULT) ==
                 CUDA_SUCCESS) &&
                (cu_->cuStreamSynchronize(s->doorbell_stream_) == CUDA_SUCCESS)) {
                s->doorbell_dev_ = doorbell;
            }
        }
    }
    ucs_debug("pxn: GPU staging on device %d, %s doorbell, %s", device,
              s->doorbell_dev_ ? "GPU" : "CPU (event)",
              s->gather_ ? "gather kernel" : "copy engine only");
    *stager_p = std::move(s);
    return UCS_OK;
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
    if (cu_ == nullptr) {
        return;
    }
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
    }
}

uint8_t *CudaStager::slot(uint32_t slot) const
{
    return reinterpret_cast<uint8_t*>(arena_ + lane_base_ +
                                      uint64_t(slot) * slot_size_);
}

ucs_status_t CudaStager::copy_now(uint32_t slot, const void *src,
                                  uint64_t offset, uint64_t length)
{
    const CUdeviceptr dst = arena_ + lane_base_ + uint64_t(slot) * slot_size_ +
                            offset;
    PXN_CU_CHECK(cu_->cuMemcpyAsync(dst, reinterpret_cast<CUdeviceptr>(src),
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

ucs_status_t CudaStager::commit(uint64_t seq, uint32_t slot)
{
    const CUdeviceptr base = arena_ + lane_base_ + uint64_t(slot) * slot_size_;
    const Seg *segs        = host_table_ + size_t(slot) * max_plan_;
    unsigned count         = nsegs_[slot];
    const uint64_t average = (count > 0) ? bytes_[slot] / count : 0;
    nsegs_[slot]           = 0;
    bytes_[slot]           = 0;
    if (use_kernel(segs, count, average)) {
        const CUdeviceptr dev = dev_table_ + size_t(slot) * max_plan_ * sizeof(Seg);
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
        ++stats_.sm_pieces;
    } else {
        for (unsigned i = 0; i < count; ++i) {
            PXN_CU_CHECK(cu_->cuMemcpyAsync(base + segs[i].offset, segs[i].src,
                                            segs[i].length, stream_),
                         "staging copy (cuMemcpyAsync)");
        }
        ++stats_.ce_pieces;
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

ucs_status_t CudaStager::copy_out(void *dest, const void *src, uint64_t length)
{
    PXN_CU_CHECK(cu_->cuMemcpy(reinterpret_cast<CUdeviceptr>(dest),
                               reinterpret_cast<CUdeviceptr>(src), length),
                 "copying a GET reply out of its slot");
    return UCS_OK;
}

} // namespace uct
} // namespace pxn

#endif /* PXN_HAVE_CUDA */
