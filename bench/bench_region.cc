#include "bench_region.h"

#include "bench_oob.h"
#include <apps/pattern.h>

#ifdef PXN_HAVE_CUDA
#include <uct/pxn/pxn_cuda.h>
#endif

#include <cstdlib>
#include <cstring>
#include <string>

namespace pxn_tools {

BenchRegion::BenchRegion(bool gpu, int device, uint64_t size) : gpu_(gpu), size_(size)
{
    host_ = static_cast<uint8_t*>(aligned_alloc(4096, (size + 4095) & ~4095ull));
    if (host_ == nullptr) {
        bench_fail(kBenchSetup, "no memory for the region");
    }
    if (!gpu) {
        data_ = host_;
        return;
    }
#ifdef PXN_HAVE_CUDA
    cu_ = pxn::uct::CudaDriver::get();
    CUdeviceptr ptr;
    if ((cu_ == nullptr) || (cu_->use_device(device) != UCS_OK) ||
        (cu_->cuMemAlloc(&ptr, size) != CUDA_SUCCESS)) {
        bench_fail(kBenchSetup, "no usable GPU " + std::to_string(device));
    }
    data_ = reinterpret_cast<uint8_t*>(ptr);
#else
    (void)device;
    bench_fail(kBenchSetup, "--gpu: this build has no CUDA backend");
#endif
}

BenchRegion::~BenchRegion()
{
#ifdef PXN_HAVE_CUDA
    if (gpu_ && (data_ != nullptr)) {
        cu_->cuMemFree(reinterpret_cast<CUdeviceptr>(data_));
    }
#endif
    free(host_);
}

void BenchRegion::fill(uint64_t seed, uint64_t len)
{
    fill_pattern(host_, len, seed);
    copy(true, len);
}

void BenchRegion::zero(uint64_t len)
{
    memset(host_, 0, len);
    copy(true, len);
}

int64_t BenchRegion::mismatch(uint64_t seed, uint64_t len)
{
    load(len);
    const uint64_t at = first_mismatch(host_, len, seed);
    return (at == len) ? -1 : int64_t(at);
}

void BenchRegion::load(uint64_t len)
{
    copy(false, len);
}

void BenchRegion::copy(bool out, uint64_t len)
{
#ifdef PXN_HAVE_CUDA
    const CUdeviceptr host = reinterpret_cast<CUdeviceptr>(host_),
                      gpu  = reinterpret_cast<CUdeviceptr>(data_);
    if (gpu_ && (cu_->cuMemcpy(out ? gpu : host, out ? host : gpu, len) != CUDA_SUCCESS)) {
        bench_fail(kBenchSetup, std::string("cuMemcpy ") + (out ? "to" : "from") +
                                " the region failed");
    }
#else
    (void)out;
    (void)len;
#endif
}

} // namespace pxn_tools
