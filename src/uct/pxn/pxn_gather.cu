/*
 * The SM gather kernel: copies the scattered segments of one piece into
 * its staging slot in a single launch. Blocks take segments round-robin;
 * the threads of a block copy one segment with 16-byte accesses where the
 * source and destination allow it, bytes elsewhere. The grid is bounded by
 * the host (a few dozen CTAs) so that staging does not starve the
 * application's kernels.
 *
 * Compiled to a fatbin at build time and loaded through the driver API
 * (pxn links no CUDA library): keep the signature in sync with
 * pxn_stager.cc.
 */
#include <stdint.h>

struct PxnGatherSeg {
    uint64_t src;    /* device-accessible source address */
    uint64_t offset; /* destination offset in the slot */
    uint64_t length;
};

extern "C" __global__ void pxn_gather(const PxnGatherSeg *segs, unsigned count,
                                      char *slot)
{
    for (unsigned s = blockIdx.x; s < count; s += gridDim.x) {
        const PxnGatherSeg seg = segs[s];
        const char *src        = reinterpret_cast<const char*>(seg.src);
        char *dst              = slot + seg.offset;
        uint64_t done          = 0;

        if ((((uintptr_t)src | (uintptr_t)dst) & 15) == 0) {
            const uint64_t vectors = seg.length / 16;
            const uint4 *vsrc      = reinterpret_cast<const uint4*>(src);
            uint4 *vdst            = reinterpret_cast<uint4*>(dst);
            for (uint64_t i = threadIdx.x; i < vectors; i += blockDim.x) {
                vdst[i] = vsrc[i];
            }
            done = vectors * 16;
        }
        for (uint64_t i = done + threadIdx.x; i < seg.length; i += blockDim.x) {
            dst[i] = src[i];
        }
    }
}
