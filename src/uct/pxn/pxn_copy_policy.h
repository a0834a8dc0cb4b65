/*
 * How a sender copies one piece into its slot of a GPU arena (CudaStager):
 * the copy engine (one cuMemcpyAsync per segment) or the SM gather kernel
 * (pxn_gather.cu: a launch per kPxnGatherMaxSegs of a piece's device
 * segments), and the kernel's grid. A pure function of the piece's shape,
 * so that the choice is tested on the CPU
 * (test/gtest/transport/test_copy_policy.cc).
 *
 * Cost model, per piece of n segments and B bytes (the figures behind the
 * constants: docs/gpu.md, "Copy policy"):
 *   copy engine    ce_piece_ns + max(n * ce_segment_ns, B / ce_gbps)
 *                  each cuMemcpyAsync costs ~4 us of issue whatever its
 *                  size; large copies run at the engine's bandwidth; a
 *                  piece by copy engine takes longer to complete than one
 *                  by kernel, which small pieces (one 4 KiB put each) feel;
 *   gather kernel  max(L * sm_launch_ns, n * sm_segment_ns + B' / rate)
 *                  L = ceil(n / kPxnGatherMaxSegs) launches, each carrying
 *                  its segments in its parameters; the rate grows with
 *                  the CTAs the piece gets, up to sm_gbps;
 *                  B' counts the bytes of shifted segments (source and
 *                  destination disagree modulo 16: two loads per 16-byte
 *                  store) 1 / shifted_factor times.
 * Host sources always go by copy engine (the kernel reads device memory
 * only); the choice above is for the piece's device segments.
 *
 * UCX_PXN_COPY: auto takes the cheaper; ce never launches the kernel; sm
 * uses it for every device segment. Without the kernel (not loaded): the
 * copy engine.
 */
#ifndef PXN_UCT_PXN_COPY_POLICY_H_
#define PXN_UCT_PXN_COPY_POLICY_H_

#include "pxn_gather.h"

#include <ucs/pxn/settings.h>

#include <cstdint>

namespace pxn {
namespace uct {

/* What the segments of one piece look like. */
struct PieceShape {
    uint32_t device_segs   = 0;
    uint32_t host_segs     = 0;
    uint64_t device_bytes  = 0;
    uint64_t host_bytes    = 0;
    uint64_t shifted_bytes = 0; /* device bytes whose src % 16 != dst % 16 */
};

/* Cost constants of one sender -> arena pairing. */
struct CopyCosts {
    double ce_piece_ns;    /* extra completion time of a copy-engine piece */
    double ce_segment_ns;  /* issue cost of one copy-engine copy */
    double ce_gbps;        /* copy-engine bandwidth into the arena */
    double sm_launch_ns;   /* one launch */
    double sm_segment_ns;  /* per segment (recording, a worker's start) */
    double sm_cta_gbps;    /* what one CTA of the kernel copies */
    double sm_gbps;        /* the kernel's bound with the whole grid */
    double shifted_factor; /* rate of shifted bytes vs aligned ones */

    /* Arena on the sender's own GPU, or on a peer GPU (NVLink). */
    static CopyCosts same_gpu();
    static CopyCosts peer_gpu();
};

struct CopyPlan {
    bool     kernel = false;           /* device segments by the kernel */
    bool     warp_per_segment = false; /* a warp per segment, else a CTA */
    unsigned blocks = 0;               /* CTAs of the launch */
};

/* Threads of a gather CTA, and the kernel's work split (pxn_gather.h). */
constexpr unsigned kGatherThreads = 512;
/* Segments averaging less: a warp copies each, else a CTA. */
constexpr uint64_t kWarpPerSegmentBelow = 64ull << 10;
/* A CTA per this many bytes of a piece (up to the grid bound). */
constexpr uint64_t kGatherBytesPerCta = 64ull << 10;

/* The grid for `segs` device segments of `bytes` bytes, at most `max_ctas`
 * CTAs. */
CopyPlan gather_grid(uint32_t segs, uint64_t bytes, unsigned max_ctas);

/* Estimated nanoseconds of each way for the device segments of `shape`. */
double ce_cost_ns(const PieceShape &shape, const CopyCosts &costs);
double sm_cost_ns(const PieceShape &shape, const CopyPlan &grid,
                  const CopyCosts &costs);

/* The copy of one piece's device segments. */
CopyPlan plan_copy(CopyChoice choice, const PieceShape &shape,
                   const CopyCosts &costs, unsigned max_ctas, bool have_kernel);

} // namespace uct
} // namespace pxn

#endif
