#include "pxn_cuda.h"

#include <ucs/debug/log_def.h>

#ifdef PXN_HAVE_CUDA
#include <dlfcn.h>
#include <mutex>
#endif

namespace pxn {
namespace uct {

#ifdef PXN_HAVE_CUDA

#define PXN_STRINGIFY_(_x) #_x
#define PXN_STRINGIFY(_x)  PXN_STRINGIFY_(_x)

namespace {

const CudaDriver *load()
{
    static CudaDriver driver;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        ucs_debug("pxn: no CUDA driver: %s", dlerror());
        return nullptr;
    }
#define PXN_CUDA_RESOLVE(_name) \
    driver._name = reinterpret_cast<decltype(&::_name)>( \
            dlsym(lib, PXN_STRINGIFY(_name))); \
    if (driver._name == nullptr) { \
        ucs_debug("pxn: CUDA driver has no %s", PXN_STRINGIFY(_name)); \
        return nullptr; \
    }
    PXN_CUDA_FUNCTIONS(PXN_CUDA_RESOLVE)
#undef PXN_CUDA_RESOLVE

    CUresult result = driver.cuInit(0);
    if ((result != CUDA_SUCCESS) ||
        (driver.cuDeviceGetCount(&driver.devices) != CUDA_SUCCESS) ||
        (driver.devices < 1)) {
        ucs_debug("pxn: CUDA driver found but no usable GPU (cuInit: %s)",
                  driver.error(result));
        return nullptr;
    }
    /* The library stays loaded for the life of the process. */
    return &driver;
}

} // namespace

const CudaDriver *CudaDriver::get()
{
    static std::once_flag once;
    static const CudaDriver *driver = nullptr;
    std::call_once(once, [] { driver = load(); });
    return driver;
}

ucs_status_t CudaDriver::ensure_context(int fallback, int *device) const
{
    CUcontext ctx = nullptr;
    if ((cuCtxGetCurrent(&ctx) == CUDA_SUCCESS) && (ctx != nullptr)) {
        CUdevice dev;
        if (cuCtxGetDevice(&dev) == CUDA_SUCCESS) {
            *device = dev;
            return UCS_OK;
        }
    }
    ucs_status_t status = use_device(fallback);
    if (status == UCS_OK) {
        *device = fallback;
    }
    return status;
}

ucs_status_t CudaDriver::use_device(int device) const
{
    CUdevice dev;
    CUcontext ctx;
    CUresult result = cuDeviceGet(&dev, device);
    if (result == CUDA_SUCCESS) {
        result = cuDevicePrimaryCtxRetain(&ctx, dev);
    }
    if (result == CUDA_SUCCESS) {
        result = cuCtxSetCurrent(ctx);
    }
    if (result != CUDA_SUCCESS) {
        ucs_error("pxn: cannot use GPU %d: %s", device, error(result));
        return UCS_ERR_NO_DEVICE;
    }
    return UCS_OK;
}

const char *CudaDriver::error(CUresult result) const
{
    const char *text = nullptr;
    if ((cuGetErrorString == nullptr) ||
        (cuGetErrorString(result, &text) != CUDA_SUCCESS) || (text == nullptr)) {
        return "unknown CUDA error";
    }
    return text;
}

bool CudaDriver::is_device_pointer(const void *ptr) const
{
    unsigned type = 0;
    return (cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                  reinterpret_cast<CUdeviceptr>(ptr)) ==
            CUDA_SUCCESS) &&
           (type == CU_MEMORYTYPE_DEVICE);
}

bool cuda_available()
{
    return CudaDriver::get() != nullptr;
}

#else

bool cuda_available()
{
    return false;
}

#endif /* PXN_HAVE_CUDA */

} // namespace uct
} // namespace pxn
