/*
 * The SM gather and scatter kernels: pxn_gather copies the scattered
 * segments of one put piece into its staging slot in a single launch,
 * pxn_scatter copies one GET piece's reply out of its slot to its
 * destinations. What each thread copies, and how (aligned 16-byte stores,
 * shifted loads for sources that disagree with their destination modulo
 * 16, head and tail bytes, large segments cut into parts across workers)
 * is in pxn_gather.h, shared with a CPU test. A worker is a warp when
 * segments are small (a CTA would leave most of its threads idle on a
 * 4 KiB segment), a CTA otherwise. The grid is bounded by the host (a few
 * dozen CTAs) so that staging does not starve the application's kernels.
 *
 * Compiled to a fatbin at build time and loaded through the driver API
 * (pxn links no CUDA library): keep the signatures in sync with
 * CudaStager::launch (pxn_stager_cuda.cc).
 */
#include "pxn_gather.h"

template<bool kScatter>
__device__ void run(const PxnGatherSeg *segs, unsigned count, char *slot,
                    unsigned warp_per_segment)
{
    using namespace pxn::gather;
    const Worker w = gather_worker(threadIdx.x, blockDim.x, blockIdx.x,
                                   gridDim.x, warp_per_segment != 0);
    gather_thread<kScatter, DirectMem>(segs, count,
                                       reinterpret_cast<uint8_t*>(slot), w);
}

extern "C" __global__ void pxn_gather(const PxnGatherSeg *segs, unsigned count,
                                      char *slot, unsigned warp_per_segment)
{
    run<false>(segs, count, slot, warp_per_segment);
}

extern "C" __global__ void pxn_scatter(const PxnGatherSeg *segs, unsigned count,
                                       char *slot, unsigned warp_per_segment)
{
    run<true>(segs, count, slot, warp_per_segment);
}
