/*
 * The CUDA driver, loaded at run time.
 *
 * pxn links no CUDA library: a module that needed libcuda.so.1 would not
 * load at all on a host without the driver (UCX's own cuda module shows
 * that on CPU machines). CudaDriver::get() dlopen()s libcuda.so.1 once,
 * resolves the driver API entry points pxn uses, initialises the driver and
 * returns nullptr when any of that fails (a debug line says why); whoever
 * wanted a GPU warns.
 *
 * Threading: get() is thread-safe; the function pointers are immutable
 * afterwards. Driver calls need a current context. pxn never makes a
 * context current on an application thread for good: it pushes the primary
 * context of the process's GPU around its own calls (ContextScope) and pops
 * it again, so that a program that has no context still has none (and a
 * program that chose its GPU keeps its choice). Only pxn's own engine
 * thread sets a current context (use_device()).
 */
#ifndef PXN_UCT_PXN_CUDA_H_
#define PXN_UCT_PXN_CUDA_H_

#include <ucs/memory/memory_type.h>
#include <ucs/type/status.h>

#ifdef PXN_HAVE_CUDA
#include <cuda.h>
#endif

#include <cstddef>
#include <cstdint>
#include <string>

namespace pxn {
namespace uct {

#ifdef PXN_HAVE_CUDA

/* Driver entry points used by pxn; the names are cuda.h's (which maps some
 * to their _v2 symbols). */
#define PXN_CUDA_FUNCTIONS(_) \
    _(cuInit) \
    _(cuDeviceGet) \
    _(cuDeviceGetCount) \
    _(cuDeviceGetAttribute) \
    _(cuDevicePrimaryCtxRetain) \
    _(cuDevicePrimaryCtxRelease) \
    _(cuDeviceGetPCIBusId) \
    _(cuCtxGetCurrent) \
    _(cuCtxSetCurrent) \
    _(cuCtxPushCurrent) \
    _(cuCtxPopCurrent) \
    _(cuCtxGetDevice) \
    _(cuMemAlloc) \
    _(cuMemFree) \
    _(cuMemGetInfo) \
    _(cuMemGetAddressRange) \
    _(cuMemcpy) \
    _(cuMemcpyAsync) \
    _(cuMemsetD8) \
    _(cuMemHostRegister) \
    _(cuMemHostUnregister) \
    _(cuMemHostGetDevicePointer) \
    _(cuMemHostAlloc) \
    _(cuMemFreeHost) \
    _(cuPointerGetAttribute) \
    _(cuIpcGetMemHandle) \
    _(cuIpcOpenMemHandle) \
    _(cuIpcCloseMemHandle) \
    _(cuStreamCreate) \
    _(cuStreamDestroy) \
    _(cuStreamSynchronize) \
    _(cuStreamWaitEvent) \
    _(cuStreamWriteValue64) \
    _(cuEventCreate) \
    _(cuEventRecord) \
    _(cuEventQuery) \
    _(cuEventSynchronize) \
    _(cuEventElapsedTime) \
    _(cuEventDestroy) \
    _(cuModuleLoadData) \
    _(cuModuleGetFunction) \
    _(cuModuleUnload) \
    _(cuLaunchKernel) \
    _(cuGetErrorString)

struct CudaDriver {
#define PXN_CUDA_POINTER(_name) decltype(&::_name) _name;
    PXN_CUDA_FUNCTIONS(PXN_CUDA_POINTER)
#undef PXN_CUDA_POINTER

    int devices = 0;

    /* nullptr when CUDA cannot be used in this process (warned once). */
    static const CudaDriver *get();

    /* Makes the primary context of `device` current on this thread (pxn's
     * own threads only). */
    ucs_status_t use_device(int device) const;
    /* The primary context of `device`, retained (release it with
     * cuDevicePrimaryCtxRelease), or nullptr (logged). */
    CUcontext    retain_primary(int device) const;

    /* Name of a CUresult, for logs. */
    const char *error(CUresult result) const;

    /* Memory type of a pointer: true for device memory (CUDA or managed). */
    bool is_device_pointer(const void *ptr) const;
};

/* `ctx` is current on the calling thread for the scope's lifetime: pushed
 * if another (or none) was current, popped again at the end. */
class ContextScope {
public:
    ContextScope(const CudaDriver *cu, CUcontext ctx) : cu_(cu)
    {
        CUcontext current = nullptr;
        if ((ctx != nullptr) && (cu->cuCtxGetCurrent(&current) == CUDA_SUCCESS) &&
            (current != ctx)) {
            pushed_ = (cu->cuCtxPushCurrent(ctx) == CUDA_SUCCESS);
        }
    }
    ~ContextScope()
    {
        CUcontext popped;
        if (pushed_) {
            cu_->cuCtxPopCurrent(&popped);
        }
    }
    ContextScope(const ContextScope&) = delete;
    ContextScope &operator=(const ContextScope&) = delete;

private:
    const CudaDriver *cu_;
    bool              pushed_ = false;
};

#endif /* PXN_HAVE_CUDA */

/* The functions below exist in every build; without the CUDA backend (or
 * without a usable GPU) they answer as for host memory. */

/* true when this build has the CUDA backend and a GPU is usable now. */
bool cuda_available();

/* GPU of the calling thread's current context; -1 when none. */
int current_gpu();

/* Makes the primary context of `gpu` current on the calling thread: for
 * pxn's own threads only (logs a failure). */
ucs_status_t use_gpu(int gpu);

/* GPU that owns `ptr`; -1 for host memory. */
int gpu_of(const void *ptr);

/* PCI bus id of GPU `device` ("0000:3b:00.0", lower case); "" if unknown. */
std::string gpu_bus_id(int device);

/* Memory type of `ptr` as the driver sees it; UCS_ERR_UNSUPPORTED without
 * a usable GPU. */
ucs_status_t detect_memory_type(const void *ptr, ucs_memory_type_t *type);

/* memcpy between host memory and a buffer that may be GPU memory (the
 * driver copies that, synchronously, in the context that owns it): one
 * pointer query, for the side that may be on a GPU. UCS_ERR_IO_ERROR
 * (logged) when the driver fails the copy. */
ucs_status_t copy_to_host(void *host_dest, const void *src, size_t length);
ucs_status_t copy_from_host(void *dest, const void *host_src, size_t length);

/* The primary context of `gpu` is current on the calling thread for the
 * scope's lifetime (pushed when another or none was, popped at the end);
 * nothing for gpu < 0 or without CUDA. */
class GpuScope {
public:
    explicit GpuScope(int gpu);
    ~GpuScope();
    GpuScope(const GpuScope&) = delete;
    GpuScope &operator=(const GpuScope&) = delete;

private:
    int  gpu_    = -1;
    bool pushed_ = false;
};

/* GPU memory exported by CUDA IPC (the slots of one lane of a relay's
 * arena), allocated in the primary context of its GPU (pushed for the
 * call) and freed with the object. Without the CUDA backend allocate()
 * returns UCS_ERR_UNSUPPORTED. */
class GpuArena {
public:
    GpuArena() = default;
    ~GpuArena();
    GpuArena(const GpuArena&) = delete;
    GpuArena &operator=(const GpuArena&) = delete;

    /* The cause of a failure is a debug line: the caller says what it
     * means. UCS_ERR_NO_MEMORY: the GPU has no room. */
    ucs_status_t allocate(int gpu, size_t size);
    uint8_t     *base() const { return reinterpret_cast<uint8_t*>(ptr_); }
    bool         valid() const { return ptr_ != 0; }
    /* The IPC handle (cudaIpcMemHandle_t) peers open. */
    const uint8_t *handle() const { return handle_; }
    static constexpr size_t kHandleSize = 64;

private:
    uint64_t ptr_ = 0;  /* CUdeviceptr */
    int      gpu_ = -1;
    uint8_t  handle_[kHandleSize] = {};
};

} // namespace uct
} // namespace pxn

#endif
