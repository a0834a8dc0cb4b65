/*
 * The SM gather kernel: copies the scattered segments of one piece into
 * its staging slot in a single launch. A worker copies whole segments,
 * taking them round-robin: a warp per segment when segments are small (a
 * block would leave most of its threads idle on a 4 KiB segment), a block
 * per segment otherwise. Workers copy with 16-byte accesses, eight in flight
 * per thread, where source and destination allow it, bytes elsewhere. The
 * grid is bounded by the host (a few dozen CTAs) so that staging does not
 * starve the application's kernels.
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

constexpr unsigned kWarp   = 32;
constexpr unsigned kUnroll = 8;

/* Copies one segment with `lanes` threads; this thread is `lane`. */
__device__ void copy_segment(const PxnGatherSeg &seg, char *slot,
                             unsigned lane, unsigned lanes)
{
    const char *src = reinterpret_cast<const char*>(seg.src);
    char *dst       = slot + seg.offset;
    uint64_t done   = 0;

    if ((((uintptr_t)src | (uintptr_t)dst) & 15) == 0) {
        const uint64_t vectors = seg.length / 16;
        const uint4 *vsrc      = reinterpret_cast<const uint4*>(src);
        uint4 *vdst            = reinterpret_cast<uint4*>(dst);
        uint64_t i             = lane;
        for (; i + (kUnroll - 1) * lanes < vectors; i += kUnroll * lanes) {
            uint4 v[kUnroll];
#pragma unroll
            for (unsigned u = 0; u < kUnroll; ++u) {
                v[u] = vsrc[i + u * lanes];
            }
#pragma unroll
            for (unsigned u = 0; u < kUnroll; ++u) {
                vdst[i + u * lanes] = v[u];
            }
        }
        for (; i < vectors; i += lanes) {
            vdst[i] = vsrc[i];
        }
        done = vectors * 16;
    }
    for (uint64_t i = done + lane; i < seg.length; i += lanes) {
        dst[i] = src[i];
    }
}

extern "C" __global__ void pxn_gather(const PxnGatherSeg *segs, unsigned count,
                                      char *slot, unsigned warp_per_segment)
{
    unsigned lane = threadIdx.x, lanes = blockDim.x;
    unsigned worker = blockIdx.x, workers = gridDim.x;
    if (warp_per_segment) {
        lane    = threadIdx.x % kWarp;
        lanes   = kWarp;
        worker  = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
        workers = gridDim.x * (blockDim.x / kWarp);
    }
    for (unsigned s = worker; s < count; s += workers) {
        copy_segment(segs[s], slot, lane, lanes);
    }
}
