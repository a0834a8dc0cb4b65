#include "pxn_cuda.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#ifdef PXN_HAVE_CUDA
#include <dlfcn.h>
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

/* A function-local static, not std::call_once: the data path asks on every
 * host copy (copy_to_host, copy_from_host), and call_once goes through
 * thread-local storage and pthread_once each time. */
const CudaDriver *CudaDriver::get()
{
    static const CudaDriver *const driver = load();
    return driver;
}

CUcontext CudaDriver::retain_primary(int device) const
{
    CUdevice dev;
    CUcontext ctx  = nullptr;
    CUresult result = cuDeviceGet(&dev, device);
    if (result == CUDA_SUCCESS) {
        result = cuDevicePrimaryCtxRetain(&ctx, dev);
    }
    if (result != CUDA_SUCCESS) {
        ucs_error("pxn: cannot use GPU %d: %s", device, error(result));
        return nullptr;
    }
    return ctx;
}

ucs_status_t CudaDriver::use_device(int device) const
{
    CUcontext ctx = retain_primary(device);
    if (ctx == nullptr) {
        return UCS_ERR_NO_DEVICE;
    }
    const CUresult result = cuCtxSetCurrent(ctx);
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

int current_gpu()
{
    const CudaDriver *cu = CudaDriver::get();
    CUcontext ctx        = nullptr;
    CUdevice dev;
    if ((cu == nullptr) || (cu->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS) ||
        (ctx == nullptr) || (cu->cuCtxGetDevice(&dev) != CUDA_SUCCESS)) {
        return -1;
    }
    return dev;
}

ucs_status_t use_gpu(int gpu)
{
    const CudaDriver *cu = CudaDriver::get();
    return (cu == nullptr) ? UCS_ERR_UNSUPPORTED : cu->use_device(gpu);
}

int gpu_of(const void *ptr)
{
    const CudaDriver *cu = CudaDriver::get();
    int ordinal          = -1;
    if ((cu == nullptr) || !cu->is_device_pointer(ptr) ||
        (cu->cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                   reinterpret_cast<CUdeviceptr>(ptr)) !=
         CUDA_SUCCESS)) {
        return -1;
    }
    return ordinal;
}

std::string gpu_bus_id(int device)
{
    const CudaDriver *cu = CudaDriver::get();
    char id[32]          = {};
    CUdevice dev;
    if ((cu == nullptr) || (cu->cuDeviceGet(&dev, device) != CUDA_SUCCESS) ||
        (cu->cuDeviceGetPCIBusId(id, sizeof(id) - 1, dev) != CUDA_SUCCESS)) {
        return "";
    }
    std::string text = id;
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    return text;
}

ucs_status_t detect_memory_type(const void *ptr, ucs_memory_type_t *type)
{
    const CudaDriver *cu = CudaDriver::get();
    if (cu == nullptr) {
        return UCS_ERR_UNSUPPORTED;
    }
    *type = cu->is_device_pointer(ptr) ? UCS_MEMORY_TYPE_CUDA :
                                         UCS_MEMORY_TYPE_HOST;
    return UCS_OK;
}

/* `gpu_side` is the buffer that may be GPU memory. */
static ucs_status_t copy_with_host(void *dest, const void *src, size_t length,
                                   const void *gpu_side)
{
    const CudaDriver *cu = CudaDriver::get();
    if ((cu == nullptr) || !cu->is_device_pointer(gpu_side)) {
        memcpy(dest, src, length);
        return UCS_OK;
    }
    /* Unified addressing: the driver finds the GPU side's context. */
    const CUresult result = cu->cuMemcpy(reinterpret_cast<CUdeviceptr>(dest),
                                         reinterpret_cast<CUdeviceptr>(src),
                                         length);
    if (result != CUDA_SUCCESS) {
        const char *text = nullptr;
        cu->cuGetErrorString(result, &text);
        ucs_error("pxn: cuMemcpy of %zu bytes %p -> %p failed: %s", length,
                  src, dest, (text != nullptr) ? text : "unknown error");
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}

ucs_status_t copy_to_host(void *host_dest, const void *src, size_t length)
{
    return copy_with_host(host_dest, src, length, src);
}

ucs_status_t copy_from_host(void *dest, const void *host_src, size_t length)
{
    return copy_with_host(dest, host_src, length, dest);
}

GpuScope::GpuScope(int gpu)
{
    const CudaDriver *cu = CudaDriver::get();
    CUcontext ctx, current = nullptr;
    if ((gpu < 0) || (cu == nullptr) || ((ctx = cu->retain_primary(gpu)) == nullptr)) {
        return;
    }
    gpu_ = gpu;
    if ((cu->cuCtxGetCurrent(&current) == CUDA_SUCCESS) && (current != ctx)) {
        pushed_ = (cu->cuCtxPushCurrent(ctx) == CUDA_SUCCESS);
    }
}

GpuScope::~GpuScope()
{
    const CudaDriver *cu = CudaDriver::get();
    CUcontext popped;
    CUdevice dev;
    if (gpu_ < 0) {
        return;
    }
    if (pushed_) {
        cu->cuCtxPopCurrent(&popped);
    }
    if (cu->cuDeviceGet(&dev, gpu_) == CUDA_SUCCESS) {
        cu->cuDevicePrimaryCtxRelease(dev);
    }
}

ucs_status_t GpuArena::allocate(int gpu, size_t size)
{
    const CudaDriver *cu = CudaDriver::get();
    if (cu == nullptr) {
        ucs_debug("pxn: GPU memory for staging needs a usable GPU");
        return UCS_ERR_NO_DEVICE;
    }
    CUcontext ctx = cu->retain_primary(gpu);
    if (ctx == nullptr) {
        return UCS_ERR_NO_DEVICE;
    }
    gpu_ = gpu;
    ContextScope scope(cu, ctx);
    CUdeviceptr ptr;
    CUresult result = cu->cuMemAlloc(&ptr, size);
    if (result != CUDA_SUCCESS) {
        ucs_debug("pxn: cannot allocate %zu bytes of staging memory on GPU %d: "
                  "%s", size, gpu, cu->error(result));
        return UCS_ERR_NO_MEMORY;
    }
    ptr_ = ptr;
    static_assert(sizeof(CUipcMemHandle) == kHandleSize, "IPC handle size");
    CUipcMemHandle handle;
    result = cu->cuIpcGetMemHandle(&handle, ptr);
    if (result != CUDA_SUCCESS) {
        ucs_debug("pxn: cannot export staging memory on GPU %d "
                  "(cuIpcGetMemHandle): %s", gpu, cu->error(result));
        return UCS_ERR_IO_ERROR;
    }
    memcpy(handle_, &handle, sizeof(handle));
    return UCS_OK;
}

GpuArena::~GpuArena()
{
    const CudaDriver *cu = CudaDriver::get();
    CUdevice dev;
    if ((gpu_ < 0) || (cu == nullptr) || (cu->cuDeviceGet(&dev, gpu_) != CUDA_SUCCESS)) {
        return;
    }
    if (ptr_ != 0) {
        CUcontext ctx;
        if (cu->cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS) {
            {
                ContextScope scope(cu, ctx);
                cu->cuMemFree(ptr_);
            }
            cu->cuDevicePrimaryCtxRelease(dev);
        }
    }
    cu->cuDevicePrimaryCtxRelease(dev); /* allocate()'s retain */
}

#else

bool cuda_available()
{
    return false;
}

GpuScope::GpuScope(int)
{
}

GpuScope::~GpuScope() = default;

ucs_status_t GpuArena::allocate(int, size_t)
{
    ucs_debug("pxn: GPU staging memory needs a build with the CUDA backend");
    return UCS_ERR_UNSUPPORTED;
}

GpuArena::~GpuArena() = default;

int current_gpu()
{
    return -1;
}

ucs_status_t use_gpu(int)
{
    return UCS_ERR_UNSUPPORTED;
}

int gpu_of(const void *)
{
    return -1;
}

std::string gpu_bus_id(int)
{
    return "";
}

ucs_status_t detect_memory_type(const void *, ucs_memory_type_t *)
{
    return UCS_ERR_UNSUPPORTED;
}

ucs_status_t copy_to_host(void *host_dest, const void *src, size_t length)
{
    memcpy(host_dest, src, length);
    return UCS_OK;
}

ucs_status_t copy_from_host(void *dest, const void *host_src, size_t length)
{
    memcpy(dest, host_src, length);
    return UCS_OK;
}

#endif /* PXN_HAVE_CUDA */

} // namespace uct
} // namespace pxn
