#include "pxn_copy_policy.h"

#include <algorithm>

namespace pxn {
namespace uct {

/* One H200 (docs/gpu.md): a copy-engine copy costs ~4 us of issue up to
 * ~1 MiB and contiguous 8 MiB pieces stage at 1.1-1.5 TB/s; one launch
 * cost the sender ~7 us with the segment-table copy that went before it
 * then (launches carry their segments now); 32 CTAs of the kernel
 * gathered 0.76 TB/s of one 8 MiB segment and of eight 1 MiB ones. UCP
 * puts of 4 KiB, a piece each, ran at 8.7 us per operation by kernel and
 * 14.2 us by copy engine: ~5 us more per copy-engine piece. */
CopyCosts CopyCosts::same_gpu()
{
    return {5000, 4000, 1500, 7000, 10, 40, 760, 0.7};
}

/* Two H200s over NVLink: copy-engine peer copies 350 GB/s, the kernel's
 * stores 250-295 GB/s (its 32 CTAs fill the link). A shifted segment's
 * second loads are local and hit L1: the link, not they, bounds it. */
CopyCosts CopyCosts::peer_gpu()
{
    return {0, 4000, 350, 7000, 10, 50, 290, 0.95}; /* piece time: not measured */
}

CopyPlan gather_grid(uint32_t segs, uint64_t bytes, unsigned max_ctas)
{
    CopyPlan plan;
    if (segs == 0) {
        return plan;
    }
    plan.warp_per_segment = (bytes / segs) < kWarpPerSegmentBelow;
    const uint64_t per_cta = plan.warp_per_segment ? kGatherThreads / 32 : 1;
    const uint64_t for_segs  = (segs + per_cta - 1) / per_cta;
    const uint64_t for_bytes = (bytes + kGatherBytesPerCta - 1) / kGatherBytesPerCta;
    plan.blocks = unsigned(std::max<uint64_t>(
            1, std::min<uint64_t>(std::max(for_segs, for_bytes), max_ctas)));
    return plan;
}

double ce_cost_ns(const PieceShape &shape, const CopyCosts &costs)
{
    return costs.ce_piece_ns + std::max(shape.device_segs * costs.ce_segment_ns,
                                        shape.device_bytes / costs.ce_gbps);
}

double sm_cost_ns(const PieceShape &shape, const CopyPlan &grid,
                  const CopyCosts &costs)
{
    const double rate  = std::min(costs.sm_gbps,
                                  costs.sm_cta_gbps * std::max(1u, grid.blocks));
    const double bytes = double(shape.device_bytes - shape.shifted_bytes) +
                         shape.shifted_bytes / costs.shifted_factor;
    const unsigned launches = (shape.device_segs + kPxnGatherMaxSegs - 1) /
                              kPxnGatherMaxSegs;
    return std::max(std::max(1u, launches) * costs.sm_launch_ns,
                    shape.device_segs * costs.sm_segment_ns + bytes / rate);
}

CopyPlan plan_copy(CopyChoice choice, const PieceShape &shape,
                   const CopyCosts &costs, unsigned max_ctas, bool have_kernel)
{
    if (!have_kernel || (shape.device_segs == 0) || (choice == CopyChoice::kCe)) {
        return CopyPlan();
    }
    CopyPlan grid = gather_grid(shape.device_segs, shape.device_bytes, max_ctas);
    grid.kernel   = (choice == CopyChoice::kSm) ||
                    (sm_cost_ns(shape, grid, costs) < ce_cost_ns(shape, costs));
    return grid.kernel ? grid : CopyPlan();
}

} // namespace uct
} // namespace pxn
