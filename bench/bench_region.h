/*
 * The memory a UCP benchmark process moves: `size` bytes of host memory,
 * or of GPU memory on `device` (cuMemAlloc in the process's own primary
 * context of that GPU, as an application's cudaMalloc), with a host copy
 * through which the process writes and checks its data: fill() and zero()
 * write the host copy and then the region, mismatch() and load() read the
 * region into the host copy first. With host memory the host copy is the
 * region itself. Offsets and lengths are within [0, size). Owned by one
 * thread; freed by the destructor. A region that cannot be allocated ends
 * the process (bench_fail, kBenchSetup), as does a GPU region in a build
 * without the CUDA backend.
 */
#ifndef PXN_BENCH_BENCH_REGION_H_
#define PXN_BENCH_BENCH_REGION_H_

#include <cstdint>

namespace pxn { namespace uct { class CudaDriver; } }

namespace pxn_tools {

class BenchRegion {
public:
    BenchRegion(bool gpu, int device, uint64_t size);
    ~BenchRegion();
    BenchRegion(const BenchRegion&) = delete;
    BenchRegion &operator=(const BenchRegion&) = delete;

    uint8_t *data() const { return data_; }
    uint8_t *host() const { return host_; }
    uint64_t size() const { return size_; }
    bool     gpu() const { return gpu_; }

    /* [0, len) := the pattern of `seed` (apps/pattern.h), or zeros. */
    void fill(uint64_t seed, uint64_t len);
    void zero(uint64_t len);
    /* The offset of the first byte in [0, len) that is not the pattern of
     * `seed`, or -1. */
    int64_t mismatch(uint64_t seed, uint64_t len);
    /* host()[0, len) := the region's bytes (nothing to do for host memory). */
    void load(uint64_t len);

private:
    /* [0, len) between the host copy and GPU memory: to the GPU (out) or
     * from it; nothing to do for host memory. */
    void copy(bool out, uint64_t len);

    bool     gpu_;
    uint64_t size_;
    uint8_t *host_ = nullptr;
    uint8_t *data_ = nullptr;
    const pxn::uct::CudaDriver *cu_ = nullptr;
};

} // namespace pxn_tools

#endif
