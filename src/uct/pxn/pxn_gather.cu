/*
 * The SM gather and scatter kernels: pxn_gather copies the scattered
 * segments of one put piece into its staging slot, pxn_scatter copies one
 * GET piece's reply out of its slot to its destinations. A launch carries
 * its segments in its parameters (PxnGatherBatch), each kernel in three
 * capacities (pxn_gather4, 32 and 253); a piece of more segments than the
 * largest holds takes several launches, on the same stream. What
 * each thread copies, and how (aligned 16-byte stores, shifted loads for
 * sources that disagree with their destination modulo 16, head and tail
 * bytes, large segments cut into parts across workers) is in pxn_gather.h,
 * shared with a CPU test. A worker is a warp when segments are small (a CTA
 * would leave most of its threads idle on a 4 KiB segment), a CTA
 * otherwise. The grid is bounded by the host (a few dozen CTAs) so that
 * staging does not starve the application's kernels.
 *
 * Compiled to a fatbin at build time and loaded through the driver API
 * (pxn links no CUDA library): keep the signatures in sync with
 * CudaStager::launch (pxn_stager_cuda.cc).
 */
#include "pxn_gather.h"

/* The segments are read where the launch put them, in its parameters
 * (__grid_constant__: never copied per thread). */
template<bool kScatter, unsigned N>
__device__ void run(const PxnGatherBatch<N> &batch)
{
    using namespace pxn::gather;
    const Worker w = gather_worker(threadIdx.x, blockDim.x, blockIdx.x,
                                   gridDim.x, batch.warp_per_segment != 0);
    gather_thread<kScatter, DirectMem>(batch.segs, batch.count,
                                       reinterpret_cast<uint8_t*>(batch.slot),
                                       w);
}

/* pxn_gather<N> and pxn_scatter<N> for each of kPxnGatherCapacities. */
#define PXN_GATHER_KERNELS(_n) \
    extern "C" __global__ void pxn_gather##_n( \
            const __grid_constant__ PxnGatherBatch<_n> batch) \
    { \
        run<false>(batch); \
    } \
    extern "C" __global__ void pxn_scatter##_n( \
            const __grid_constant__ PxnGatherBatch<_n> batch) \
    { \
        run<true>(batch); \
    }

PXN_GATHER_KERNELS(4)
PXN_GATHER_KERNELS(32)
PXN_GATHER_KERNELS(253)
static_assert(kPxnGatherVariants == 3 && kPxnGatherCapacities[0] == 4 &&
              kPxnGatherCapacities[1] == 32 && kPxnGatherCapacities[2] == 253,
              "one kernel pair per capacity");
