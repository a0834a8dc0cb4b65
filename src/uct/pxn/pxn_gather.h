/*
 * The gather and scatter kernels' work, thread by thread: which part of
 * which segment a thread copies and how. Shared by the kernels
 * (pxn_gather.cu, compiled by nvcc) and a CPU test
 * (test/gtest/transport/test_gather.cc, plain C++) that runs every thread
 * of a simulated grid in turn over host buffers and checks each destination
 * byte, the bytes around it and every load. No thread reads what another
 * wrote and none waits for another, so running them one after the other is
 * exactly what the GPU computes.
 *
 * A segment is `length` bytes between `addr` and `slot + offset`: gather
 * copies addr -> slot (a put's sources into its slot), scatter copies
 * slot -> addr (a GET's reply to its destinations). Its layout
 * (split_segment(), from the source and destination of the copy):
 *   head  bytes until the destination is 16-byte aligned (< 16, and at
 *         most `length`), copied byte by byte;
 *   body  `vectors` 16-byte vectors stored aligned;
 *   tail  the last < 16 bytes, byte by byte.
 * The body's first source byte lies `shift` bytes past a 16-byte boundary.
 * shift 0: one aligned 16-byte load per vector. Otherwise each vector is
 * joined (funnel shifts) from the two aligned 16-byte source blocks that
 * hold its bytes, so loads are aligned too and a thread reads 32 bytes per
 * 16 it writes (neighbouring threads read the same blocks: the second
 * reads hit L1). Every block loaded holds at least one byte of the
 * segment: loads touch at most 15 bytes before and after it, never another
 * 16-byte granule (so never another allocation: the driver aligns those to
 * at least 256 bytes).
 *
 * Workers (gather_worker()): a warp or a CTA. Segments go round-robin to
 * workers; when there are fewer segments than workers, each segment is cut
 * into `parts` parts of whole vectors (gather_parts(): workers / segments,
 * but no part under 4 vectors per thread), so that one large segment still
 * spreads over the grid. Part 0 also copies the head, the last part the
 * tail.
 *
 * Memory accesses go through a `Mem` policy (DirectMem on the GPU; the test
 * checks bounds and counts stores with its own).
 */
#ifndef PXN_UCT_PXN_GATHER_H_
#define PXN_UCT_PXN_GATHER_H_

#include <stdint.h>

#if defined(__CUDACC__)
#define PXN_GATHER_FN __host__ __device__ __forceinline__
#define PXN_GATHER_UNROLL _Pragma("unroll")
typedef uint4 PxnVec16;
#else
#define PXN_GATHER_FN inline
#define PXN_GATHER_UNROLL
struct alignas(16) PxnVec16 {
    uint32_t x, y, z, w;
};
#endif

/* A segment as the kernels read it (CudaStager::Seg). Offsets and lengths
 * lie within one slot (at most 1 GiB, settings.h). */
struct PxnGatherSeg {
    uint64_t addr;   /* device memory outside the slot: gather's source,
                      * scatter's destination */
    uint32_t offset; /* offset in the slot */
    uint32_t length;
};

/* A launch's whole argument: `count` segments of the slot at `slot`, in
 * its parameters (no table to copy to the GPU first). The driver copies a
 * launch's parameters whole, so each kernel comes in capacities
 * (kPxnGatherCapacities, the largest within the 4 KiB every CUDA driver
 * accepts): a piece takes the smallest that holds it, a piece of more
 * segments several launches of the largest. Every capacity's layout begins
 * with the same fields, so a PxnGatherBatch<kPxnGatherMaxSegs> passes for
 * any of them. */
template<unsigned N>
struct PxnGatherBatch {
    uint64_t     slot;
    uint32_t     count;
    uint32_t     warp_per_segment; /* else a CTA per segment */
    PxnGatherSeg segs[N];
};

constexpr unsigned kPxnGatherCapacities[] = {4, 32, 253}; /* ascending */
constexpr unsigned kPxnGatherVariants =
        sizeof(kPxnGatherCapacities) / sizeof(kPxnGatherCapacities[0]);
constexpr unsigned kPxnGatherMaxSegs = kPxnGatherCapacities[kPxnGatherVariants - 1];
static_assert(sizeof(PxnGatherBatch<kPxnGatherMaxSegs>) <= 4096,
              "a kernel's parameters");

namespace pxn {
namespace gather {

constexpr unsigned kWarp          = 32;
constexpr unsigned kUnroll        = 8; /* aligned loads in flight per thread */
constexpr unsigned kShiftedUnroll = 4; /* vectors (2 loads each) in flight */
constexpr unsigned kMinPartVectorsPerThread = 4;

struct Layout {
    uint64_t head;    /* bytes before the aligned body */
    uint64_t vectors; /* 16-byte vectors of the body */
    uint64_t tail;    /* bytes after it */
    unsigned shift;   /* (src + head) % 16 */
};

PXN_GATHER_FN Layout split_segment(uint64_t src, uint64_t dst, uint64_t length)
{
    Layout l;
    l.head    = (16 - (dst & 15)) & 15;
    l.head    = (l.head < length) ? l.head : length;
    l.vectors = (length - l.head) / 16;
    l.tail    = length - l.head - l.vectors * 16;
    l.shift   = unsigned((src + l.head) & 15);
    return l;
}

/* This thread's place: `lane` of `lanes` threads of worker `worker` of
 * `workers`. */
struct Worker {
    unsigned lane, lanes, worker, workers;
};

PXN_GATHER_FN Worker gather_worker(unsigned thread, unsigned threads,
                                   unsigned block, unsigned blocks,
                                   bool warp_per_segment)
{
    Worker w;
    if (warp_per_segment) {
        w.lane    = thread % kWarp;
        w.lanes   = kWarp;
        w.worker  = block * (threads / kWarp) + thread / kWarp;
        w.workers = blocks * (threads / kWarp);
    } else {
        w.lane    = thread;
        w.lanes   = threads;
        w.worker  = block;
        w.workers = blocks;
    }
    return w;
}

/* Parts per segment: every segment is cut into this many work items. */
PXN_GATHER_FN unsigned gather_parts(unsigned count, unsigned workers)
{
    return (count >= workers) ? 1u : workers / count;
}

/* How many of a segment's `parts` items carry vectors: none under
 * kMinPartVectorsPerThread vectors per thread (the others do nothing). */
PXN_GATHER_FN uint64_t used_parts(uint64_t vectors, unsigned parts,
                                  unsigned lanes)
{
    const uint64_t most = vectors / (uint64_t(lanes) * kMinPartVectorsPerThread);
    return (most < 1) ? 1 : ((most < parts) ? most : parts);
}

/* Plain stores, and loads through the read-only data cache (sources do
 * not change while a piece is staged): what the kernel does. */
struct DirectMem {
    static PXN_GATHER_FN PxnVec16 load(const PxnVec16 *p)
    {
#if defined(__CUDA_ARCH__)
        return __ldg(p);
#else
        return *p;
#endif
    }
    static PXN_GATHER_FN void store(PxnVec16 *p, const PxnVec16 &v) { *p = v; }
    static PXN_GATHER_FN uint8_t load_byte(const uint8_t *p) { return *p; }
    static PXN_GATHER_FN void store_byte(uint8_t *p, uint8_t v) { *p = v; }
};

PXN_GATHER_FN uint32_t funnel_right(uint32_t lo, uint32_t hi, unsigned bits)
{
#if defined(__CUDA_ARCH__)
    return __funnelshift_r(lo, hi, bits);
#else
    return uint32_t(((uint64_t(hi) << 32) | lo) >> (bits & 31));
#endif
}

/* The 16 bytes starting 4 * Q + bits / 8 bytes into the 32 bytes a:b
 * (little endian). Q is a template argument so that the word indices are
 * constants and the words stay in registers. */
template<unsigned Q>
PXN_GATHER_FN PxnVec16 join(const PxnVec16 &a, const PxnVec16 &b, unsigned bits)
{
    const uint32_t w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    PxnVec16 v;
    v.x = funnel_right(w[Q], w[Q + 1], bits);
    v.y = funnel_right(w[Q + 1], w[Q + 2], bits);
    v.z = funnel_right(w[Q + 2], w[Q + 3], bits);
    v.w = funnel_right(w[Q + 3], w[Q + 4], bits);
    return v;
}

/* Vectors [begin, end) of an aligned body: `src` and `dst` at vector 0. */
template<typename Mem>
PXN_GATHER_FN void copy_aligned(const PxnVec16 *src, PxnVec16 *dst,
                                uint64_t begin, uint64_t end, unsigned lane,
                                unsigned lanes)
{
    uint64_t i = begin + lane;
    for (; i + (kUnroll - 1) * uint64_t(lanes) < end; i += kUnroll * lanes) {
        PxnVec16 v[kUnroll];
        PXN_GATHER_UNROLL
        for (unsigned u = 0; u < kUnroll; ++u) {
            v[u] = Mem::load(src + i + u * lanes);
        }
        PXN_GATHER_UNROLL
        for (unsigned u = 0; u < kUnroll; ++u) {
            Mem::store(dst + i + u * lanes, v[u]);
        }
    }
    for (; i < end; i += lanes) {
        Mem::store(dst + i, Mem::load(src + i));
    }
}

/* Vectors [begin, end) of a shifted body: `blocks` is the aligned source
 * block holding vector 0's first byte, which is 4 * Q + bits / 8 bytes
 * into it. */
template<unsigned Q, typename Mem>
PXN_GATHER_FN void copy_shifted(const PxnVec16 *blocks, PxnVec16 *dst,
                                uint64_t begin, uint64_t end, unsigned bits,
                                unsigned lane, unsigned lanes)
{
    uint64_t i = begin + lane;
    for (; i + (kShiftedUnroll - 1) * uint64_t(lanes) < end;
         i += kShiftedUnroll * lanes) {
        PxnVec16 a[kShiftedUnroll], b[kShiftedUnroll];
        PXN_GATHER_UNROLL
        for (unsigned u = 0; u < kShiftedUnroll; ++u) {
            a[u] = Mem::load(blocks + i + u * lanes);
            b[u] = Mem::load(blocks + i + u * lanes + 1);
        }
        PXN_GATHER_UNROLL
        for (unsigned u = 0; u < kShiftedUnroll; ++u) {
            Mem::store(dst + i + u * lanes, join<Q>(a[u], b[u], bits));
        }
    }
    for (; i < end; i += lanes) {
        Mem::store(dst + i, join<Q>(Mem::load(blocks + i),
                                    Mem::load(blocks + i + 1), bits));
    }
}

/* Part `part` of `parts` of one segment, as thread `lane` of `lanes`;
 * kScatter: slot -> addr, else addr -> slot. */
template<bool kScatter, typename Mem>
PXN_GATHER_FN void copy_part(const PxnGatherSeg &seg, uint8_t *slot,
                             unsigned part, unsigned parts, unsigned lane,
                             unsigned lanes)
{
    uint8_t *in_slot   = slot + seg.offset;
    uint8_t *outside   = reinterpret_cast<uint8_t*>(seg.addr);
    const uint8_t *src = kScatter ? in_slot : outside;
    uint8_t *dst       = kScatter ? outside : in_slot;
    const Layout l     = split_segment(uint64_t(src), uint64_t(dst), seg.length);
    const uint64_t used = used_parts(l.vectors, parts, lanes);
    if (part >= used) {
        return;
    }
    for (uint64_t b = lane; (part == 0) && (b < l.head); b += lanes) {
        Mem::store_byte(dst + b, Mem::load_byte(src + b));
    }
    const uint64_t body = l.head + l.vectors * 16;
    for (uint64_t b = body + lane; (part == used - 1) && (b < seg.length);
         b += lanes) {
        Mem::store_byte(dst + b, Mem::load_byte(src + b));
    }
    const uint64_t begin = l.vectors * part / used;
    const uint64_t end   = l.vectors * (part + 1) / used;
    PxnVec16 *vdst       = reinterpret_cast<PxnVec16*>(dst + l.head);
    const uint8_t *first = src + l.head;
    if (l.shift == 0) {
        copy_aligned<Mem>(reinterpret_cast<const PxnVec16*>(first), vdst, begin,
                          end, lane, lanes);
        return;
    }
    const PxnVec16 *blocks = reinterpret_cast<const PxnVec16*>(first - l.shift);
    const unsigned bits    = 8 * (l.shift & 3);
    switch (l.shift >> 2) {
    case 0:
        copy_shifted<0, Mem>(blocks, vdst, begin, end, bits, lane, lanes);
        break;
    case 1:
        copy_shifted<1, Mem>(blocks, vdst, begin, end, bits, lane, lanes);
        break;
    case 2:
        copy_shifted<2, Mem>(blocks, vdst, begin, end, bits, lane, lanes);
        break;
    default:
        copy_shifted<3, Mem>(blocks, vdst, begin, end, bits, lane, lanes);
        break;
    }
}

/* Everything one thread of the launch copies. */
template<bool kScatter, typename Mem>
PXN_GATHER_FN void gather_thread(const PxnGatherSeg *segs, unsigned count,
                                 uint8_t *slot, const Worker &w)
{
    const unsigned parts = gather_parts(count, w.workers);
    const unsigned items = count * parts;
    for (unsigned item = w.worker; item < items; item += w.workers) {
        copy_part<kScatter, Mem>(segs[item / parts], slot, item % parts, parts,
                                 w.lane, w.lanes);
    }
}

} // namespace gather
} // namespace pxn

#endif
