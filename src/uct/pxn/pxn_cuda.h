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
 * afterwards. Driver calls need a current context: ensure_context() makes
 * the primary context of `device` current on the calling thread when no
 * context is current (an application's own current context is left alone).
 */
#ifndef PXN_UCT_PXN_CUDA_H_
#define PXN_UCT_PXN_CUDA_H_

#include <ucs/type/status.h>

#ifdef PXN_HAVE_CUDA
#include <cuda.h>
#endif

#include <cstddef>
#include <cstdint>

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
    _(cuCtxGetCurrent) \
    _(cuCtxSetCurrent) \
    _(cuCtxGetDevice) \
    _(cuMemAlloc) \
    _(cuMemFree) \
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

    /* The device of the calling thread's current context, else `fallback`
     * with its primary context made current. */
    ucs_status_t ensure_context(int fallback, int *device) const;
    /* Makes the primary context of `device` current on this thread. */
    ucs_status_t use_device(int device) const;

    /* Name of a CUresult, for logs. */
    const char *error(CUresult result) const;

    /* Memory type of a pointer: true for device memory (CUDA or managed). */
    bool is_device_pointer(const void *ptr) const;
};

#endif /* PXN_HAVE_CUDA */

/* true when this build has the CUDA backend and a GPU is usable now. */
bool cuda_available();

} // namespace uct
} // namespace pxn

#endif
