#include "pxn_relay_arena.h"

#include <ucs/debug/log_def.h>
#include <ucs/pxn/seq.h>

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

namespace pxn {
namespace uct {

ucs_status_t RelayArena::open(const Params &params,
                              std::unique_ptr<RelayArena> *arena_p)
{
    std::unique_ptr<RelayArena> a(new RelayArena());
    const Geometry &g = params.entry->geometry();
    a->net_        = params.net;
    a->entry_      = params.entry;
    a->counters_   = &reinterpret_cast<abi::ProcessCounters*>(
                             params.entry->view().base +
                             abi::kCountersOffset)->relay;
    a->gpu_        = params.gpu;
    a->gpu_index_  = params.gpu_index;
    a->slots_      = g.slots;
    a->slot_size_  = g.slot_size;
    a->linger_ns_  = params.linger_ns;
    a->warm_lanes_ = std::min(params.warm_lanes, g.lanes);
    a->lanes_.resize(g.lanes);

    ucs_status_t status;
    if (a->gpu_) {
        if (a->gpu_index_ < 0) {
            ucs_error("pxn: a GPU arena needs the process's GPU, which is not "
                      "known (set UCX_PXN_CUDA_DEVICE)");
            return UCS_ERR_NO_DEVICE;
        }
        if (!cuda_available()) {
            ucs_error("pxn: a GPU arena needs a usable GPU");
            return UCS_ERR_NO_DEVICE;
        }
        /* Each lane exports its own memory (LaneMemory.handle). */
        const uint8_t none[1] = {0};
        status = a->entry_->set_arena(abi::kArenaCudaIpc, none, 0);
    } else {
        status = a->entry_->create_host_arena(&a->fd_);
        if (status == UCS_OK) {
            status = a->mapping_.map(a->fd_.get(), g.arena_size(), "staging arena");
        }
    }
    if (status != UCS_OK) {
        return status;
    }
    *arena_p = std::move(a);
    return UCS_OK;
}

RelayArena::~RelayArena()
{
    for (uint32_t lane = 0; lane < lanes_.size(); ++lane) {
        if (lanes_[lane].backed || (lanes_[lane].reserved != 0)) {
            free_lane(lane);
        }
    }
}

uint32_t RelayArena::backed_lanes() const
{
    return static_cast<uint32_t>(std::count_if(lanes_.begin(), lanes_.end(),
                                               [](const Lane &l) {
                                                   return l.backed;
                                               }));
}

void RelayArena::count_commit(uint64_t start_ns)
{
    abi::bump(counters_->lane_commit_ns, monotonic_ns() - start_ns);
}

ucs_status_t RelayArena::acquire(uint32_t index, LaneSlots *slots)
{
    Lane &lane = lanes_[index];
    if (lane.backed) {
        abi::bump(counters_->warm_claims, !lane.in_use);
    } else {
        const uint64_t start = monotonic_ns();
        const ucs_status_t status = gpu_ ? back_gpu(index, true) :
                                           back_host(index, ~uint64_t(0), true);
        count_commit(start);
        if (status != UCS_OK) {
            return status;
        }
    }
    lane.in_use = true;
    *slots      = lane.slots;
    return UCS_OK;
}

void RelayArena::release(uint32_t index, uint64_t now_ns)
{
    Lane &lane = lanes_[index];
    if (lane.in_use) {
        lane.in_use     = false;
        lane.free_since = now_ns;
    }
}

unsigned RelayArena::tend(uint64_t now_ns)
{
    uint32_t warm = 0;
    int oldest = -1, cold = -1;
    for (uint32_t i = 0; i < lanes_.size(); ++i) {
        const Lane &lane = lanes_[i];
        if (lane.backed) {
            if (!lane.in_use) {
                ++warm;
                if ((oldest < 0) ||
                    (lane.free_since < lanes_[oldest].free_since)) {
                    oldest = int(i);
                }
            }
        } else if (((cold < 0) || ((lane.reserved != 0) &&
                                   (lanes_[cold].reserved == 0))) &&
                   (abi::load_acquire(entry_->lane(i).owner().state) !=
                    abi::kLaneClaimed)) {
            /* A free lane only: a claimed one is backed by acquire() (one
             * that is being claimed right now, too). A lane partly backed
             * by earlier steps goes on first. */
            cold = int(i);
        }
    }
    /* A lane claimed a moment ago (not acknowledged yet) keeps its memory:
     * the claimer chose it for that. */
    if ((warm > warm_lanes_) && (now_ns - lanes_[oldest].free_since >= linger_ns_) &&
        (abi::load_acquire(entry_->lane(uint32_t(oldest)).owner().state) !=
         abi::kLaneClaimed)) {
        ucs_debug("pxn: relay lane %d unused for %.1f s: its memory goes back",
                  oldest, (now_ns - lanes_[oldest].free_since) / 1e9);
        free_lane(uint32_t(oldest));
        return 1;
    }
    if ((warm >= warm_lanes_) || (cold < 0) || (now_ns < next_spare_ns_)) {
        return 0;
    }
    const uint64_t start = monotonic_ns();
    const ucs_status_t status = gpu_ ? back_gpu(uint32_t(cold), false) :
                                       back_host(uint32_t(cold), kBackingStep,
                                                 false);
    count_commit(start);
    if (status != UCS_OK) {
        /* No room now: a warm lane is an optimisation, so give the room
         * back and try again only after a linger time. */
        free_lane(uint32_t(cold));
        next_spare_ns_ = now_ns + std::max<uint64_t>(linger_ns_, 1000000000ull);
    } else if (lanes_[cold].backed) {
        lanes_[cold].free_since = now_ns;
    }
    return 1;
}

ucs_status_t RelayArena::back_host(uint32_t index, uint64_t bytes, bool claim)
{
    Lane &lane           = lanes_[index];
    const uint64_t start = slot_offset(index, 0, slots_, slot_size_);
    const uint64_t step  = std::min(bytes, lane_bytes() - lane.reserved);
    const int rc = posix_fallocate(fd_.get(), off_t(start + lane.reserved),
                                   off_t(step));
    if (rc != 0) {
        ucs_log(claim ? UCS_LOG_LEVEL_WARN : UCS_LOG_LEVEL_DEBUG,
                "pxn: no room in the registry's file system for lane %u's "
                "slots (%lu MiB): %s", index, lane_bytes() >> 20, strerror(rc));
        return UCS_ERR_NO_MEMORY;
    }
    /* The pages exist now; mapping them here, off the data path, spares
     * the inner transport a page fault per page on the lane's first
     * pieces. */
    if (madvise(mapping_.data() + start + lane.reserved, step,
                MADV_POPULATE_WRITE) != 0) {
        ucs_debug("pxn: MADV_POPULATE_WRITE of lane %u's slots: %m", index);
    }
    lane.reserved += step;
    lane.slots.base = mapping_.data() + start;
    return (lane.reserved == lane_bytes()) ? finish_backing(index) : UCS_OK;
}

ucs_status_t RelayArena::back_gpu(uint32_t index, bool claim)
{
    Lane &lane = lanes_[index];
    lane.gpu.reset(new GpuArena());
    const ucs_status_t status = lane.gpu->allocate(gpu_index_, lane_bytes());
    if (status != UCS_OK) {
        ucs_log(claim ? UCS_LOG_LEVEL_WARN : UCS_LOG_LEVEL_DEBUG,
                "pxn: no GPU memory for lane %u's slots (%lu MiB) on GPU %d: %s",
                index, lane_bytes() >> 20, gpu_index_, ucs_status_string(status));
        lane.gpu.reset();
        return UCS_ERR_NO_MEMORY;
    }
    lane.slots.base = lane.gpu->base();
    return finish_backing(index);
}

ucs_status_t RelayArena::finish_backing(uint32_t index)
{
    Lane &lane = lanes_[index];
    ucs_status_t status = net_->mem_reg(lane.slots.base, lane_bytes(),
                                        &lane.slots.memh);
    if (status != UCS_OK) {
        free_lane(index);
        return status;
    }
    abi::LaneMemory &memory = entry_->lane(index).memory();
    memset(memory.handle, 0, sizeof(memory.handle));
    if (lane.gpu != nullptr) {
        memcpy(memory.handle, lane.gpu->handle(), GpuArena::kHandleSize);
    }
    abi::store_relaxed(memory.size, lane_bytes());
    abi::store_relaxed(memory.gen, ++gen_);
    abi::store_release(memory.backed, uint32_t(1));
    lane.backed = true;
    abi::bump(counters_->lane_commits);
    abi::store_relaxed(counters_->lanes_backed, uint64_t(backed_lanes()));
    return UCS_OK;
}

void RelayArena::free_lane(uint32_t index)
{
    Lane &lane = lanes_[index];
    abi::store_release(entry_->lane(index).memory().backed, uint32_t(0));
    if (lane.slots.memh != UCT_MEM_HANDLE_NULL) {
        net_->mem_dereg(lane.slots.memh);
    }
    lane.gpu.reset();
    if (fd_.valid() && (lane.reserved != 0)) {
        /* the pages go back to the file system; the file keeps its size */
        if (fallocate(fd_.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                      off_t(slot_offset(index, 0, slots_, slot_size_)),
                      off_t(lane_bytes())) != 0) {
            ucs_debug("pxn: freeing lane %u's slots failed: %m", index);
        }
    }
    lane = Lane();
    abi::store_relaxed(counters_->lanes_backed, uint64_t(backed_lanes()));
}

} // namespace uct
} // namespace pxn
