/*
 * Staging into a relay's host arena (a shared-memory file mapped here):
 * bytes are copied when they are added (the CPU copies host sources, the
 * driver GPU sources), so a piece is complete when commit() rings its
 * doorbell with a release store. A copy the driver failed fails the
 * piece's commit (the doorbell is not rung). pxn_stager.h has the
 * contract.
 */
#ifndef PXN_UCT_PXN_STAGER_HOST_H_
#define PXN_UCT_PXN_STAGER_HOST_H_

#include "pxn_stager.h"

#include <ucs/pxn/os_resource.h>

namespace pxn {
namespace uct {

class HostStager final : public Stager {
public:
    static ucs_status_t open(const Params &params, std::unique_ptr<Stager> *stager);

    ucs_status_t ready() override;
    void add(uint32_t slot, const void *src, uint64_t offset,
             uint64_t length) override;
    uint8_t *pack_area(uint32_t slot, uint64_t offset, size_t) override
    {
        return slot_ptr(slot) + offset;
    }
    ucs_status_t packed(uint32_t, uint64_t, size_t) override { return UCS_OK; }
    ucs_status_t commit(uint64_t seq, uint32_t slot, abi::Op op) override;
    ucs_status_t copy_out(uint32_t slot, uint64_t offset, void *dest,
                          uint64_t length) override;
    ucs_status_t unpack(uint32_t slot, uint64_t offset,
                        uct_unpack_callback_t unpack, void *arg,
                        uint64_t length) override;

private:
    HostStager() = default;
    uint8_t *slot_ptr(uint32_t slot) const
    {
        return lane_base_ + uint64_t(slot) * slot_size_;
    }

    SharedMapping      arena_;
    uint8_t           *lane_base_ = nullptr; /* slot 0 of our lane */
    uint64_t           slot_size_ = 0;
    uint32_t           slots_     = 0;
    bool               gpu_sources_ = false; /* sources may be GPU memory */
    ucs_status_t       add_status_  = UCS_OK; /* a failed copy of the piece */
    abi::LaneProducer *producer_  = nullptr;
};

} // namespace uct
} // namespace pxn

#endif
