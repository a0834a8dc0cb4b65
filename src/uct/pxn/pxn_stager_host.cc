#include "pxn_stager_host.h"

#include "pxn_cuda.h"

#include <ucs/debug/log_def.h>
#include <ucs/pxn/control_file.h>
#include <ucs/pxn/seq.h>

#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

namespace pxn {
namespace uct {

ucs_status_t HostStager::open(const Params &params, std::unique_ptr<Stager> *stager)
{
    std::unique_ptr<HostStager> s(new HostStager());
    const Geometry &g = params.settings->geometry;
    UniqueFd fd;
    ucs_status_t status = params.mapping->open_host_arena(&fd);
    if (status == UCS_OK) {
        status = s->arena_.map(fd.get(), g.arena_size(), "relay arena");
    }
    if (status != UCS_OK) {
        return status;
    }
    s->slot_size_   = g.slot_size;
    s->slots_       = g.slots;
    s->lane_base_   = s->arena_.data() + slot_offset(params.lane, 0, g.slots,
                                                     g.slot_size);
    s->producer_    = params.producer;
    s->gpu_sources_ = cuda_available();
    *stager = std::move(s);
    return UCS_OK;
}

/* Maps this lane's slots once, on the control path. The relay reserved
 * their pages before it acknowledged the lane, so nothing here (or in the
 * data path) can meet a full file system: a first touch only maps a page
 * that exists. A kernel without MADV_POPULATE_WRITE (< 5.14) maps them on
 * first use instead. */
ucs_status_t HostStager::ready()
{
    const size_t bytes = size_t(slots_) * slot_size_;
    if (madvise(lane_base_, bytes, MADV_POPULATE_WRITE) != 0) {
        ucs_debug("pxn: MADV_POPULATE_WRITE of a lane's slots: %m");
    }
    return UCS_OK;
}

void HostStager::add(uint32_t slot, const void *src, uint64_t offset,
                     uint64_t length)
{
    if (!gpu_sources_) {
        memcpy(slot_ptr(slot) + offset, src, length);
        return;
    }
    const ucs_status_t status = copy_to_host(slot_ptr(slot) + offset, src,
                                             length);
    add_status_ = (status != UCS_OK) ? status : add_status_;
}

ucs_status_t HostStager::commit(uint64_t seq, uint32_t, abi::Op)
{
    if (add_status_ != UCS_OK) {
        return add_status_; /* not published: the lane is quarantined */
    }
    abi::store_relaxed(producer_->rung_ns, monotonic_ns());
    abi::store_release(producer_->doorbell, seq);
    return UCS_OK;
}

ucs_status_t HostStager::copy_out(uint32_t slot, uint64_t offset, void *dest,
                                  uint64_t length)
{
    if (gpu_sources_) {
        return copy_from_host(dest, slot_ptr(slot) + offset, length);
    }
    memcpy(dest, slot_ptr(slot) + offset, length);
    return UCS_OK;
}

ucs_status_t HostStager::unpack(uint32_t slot, uint64_t offset,
                                uct_unpack_callback_t unpack, void *arg,
                                uint64_t length)
{
    unpack(arg, slot_ptr(slot) + offset, length);
    return UCS_OK;
}

} // namespace uct
} // namespace pxn
