/*
 * Ep's scatter-gather operations (UCX 1.22's put_sgl_zcopy, master's
 * get_sgl_zcopy; pxn_ep.h): one call of many (local, remote, key) elements
 * becomes one request of the lane, whose elements fill pieces as the slots
 * allow (a piece carries up to UCX_PXN_MAX_PLAN of them), staged in one
 * launch per piece on a GPU arena.
 *
 * An SGL goes through the relay or fails: it has no direct path. Its keys
 * are held (LaneControl::rkey_hold) as they are resolved, so that resolving
 * a later element never rewrites the lane's entry of an earlier one; an SGL
 * that needs more keys than a lane's table holds is refused.
 */
#include "pxn_ep.h"

#include "pxn_compat.h"
#include "pxn_entry.h"

#include <ucs/debug/log_def.h>

#include <algorithm>

namespace pxn {
namespace uct {

ucs_status_t Ep::sgl(abi::Op op, void *const *buffers, const size_t *lengths,
                     const uint64_t *remote_addrs, const uct_rkey_t *rkeys,
                     const size_t *counts, const size_t *strides, size_t count,
                     uct_completion_t *comp)
{
    if ((op == abi::kOpGet) && !hub_->net().has_get()) {
        return UCS_ERR_UNSUPPORTED;
    }
    ucs_trace_data("pxn ep %p: %s of %zu elements", this,
                   (op == abi::kOpGet) ? "get_sgl_zcopy" : "put_sgl_zcopy", count);
    if (count > SendRequest::kMaxScatter) {
        ucs_error("Invalid sgl count: %zu (expected: <= %zu)", count,
                  size_t(SendRequest::kMaxScatter));
        return UCS_ERR_INVALID_PARAM;
    }
    ucs_status_t status = admit();
    if (status != UCS_OK) {
        return status;
    }
    /* Room for every segment before any key is held: an allocation that
     * fails leaves nothing held (pxn_entry.h). */
    size_t segments = 0;
    for (size_t i = 0; i < count; ++i) {
        segments += (lengths[i] == 0) ? 0 : (counts != nullptr) ? counts[i] : 1;
    }
    scatter_.clear();
    scatter_.reserve(std::min<size_t>(segments, SendRequest::kMaxScatter));
    LaneControl &control = lane_->control();
    uint64_t held        = 0;
    const auto drop_held = [&] {
        for (uint64_t bits = held; bits != 0; bits &= bits - 1) {
            control.rkey_drop(__builtin_ctzll(bits));
        }
    };
    for (size_t i = 0; (i < count) && (status == UCS_OK); ++i) {
        const size_t repeat = (counts != nullptr) ? counts[i] : 1;
        const size_t stride = (strides != nullptr) ? strides[i] : 0;
        if ((lengths[i] == 0) || (repeat == 0)) {
            continue; /* nothing to move: its key may be UCT_INVALID_RKEY */
        }
        uint32_t index;
        status = lane_rkey(rkeys[i], &index);
        if (status != UCS_OK) {
            break;
        }
        if (!(held & (1ull << index))) {
            control.rkey_hold(index);
            held |= 1ull << index;
        }
        if (scatter_.size() + repeat > SendRequest::kMaxScatter) {
            status = UCS_ERR_INVALID_PARAM;
            break;
        }
        const uint64_t local = reinterpret_cast<uint64_t>(buffers[i]);
        for (size_t c = 0; c < repeat; ++c) {
            scatter_.push_back({local + c * stride, lengths[i],
                                remote_addrs[i] + c * stride, index});
        }
    }
    if ((status == UCS_ERR_NO_RESOURCE) &&
        (__builtin_popcountll(held) == int(abi::kMaxRkeys))) {
        ucs_debug("pxn: ep %p: an SGL of more than %u remote keys", self_,
                  abi::kMaxRkeys);
        status = UCS_ERR_INVALID_PARAM; /* would never fit */
    }
    if ((status == UCS_OK) && scatter_.empty()) {
        status = UCS_OK; /* zero bytes: complete at once, nothing posted */
    } else if (status == UCS_OK) {
        try {
            status = lane_->post_scattered(this, op, route_, scatter_.data(),
                                           scatter_.size(), held, comp);
        } catch (const std::bad_alloc &) {
            drop_held(); /* the request never took them */
            throw;
        }
        if (status == UCS_INPROGRESS) {
            ++issued_;
            return status; /* the request holds the keys now */
        }
    }
    drop_held();
    return status;
}

} // namespace uct
} // namespace pxn

#ifdef PXN_UCX_EP_PUT_SGL_ZCOPY /* a UCX with get_sgl_zcopy has put_sgl_zcopy */
ucs_status_t uct_pxn_ep_put_sgl_zcopy(uct_ep_h ep, void *const *buffers,
                                      const size_t *lengths, uct_mem_h const *,
                                      const uint64_t *remote_addrs,
                                      uct_rkey_t const *rkeys,
                                      const size_t *counts, const size_t *strides,
                                      size_t count, uct_completion_t *comp) noexcept
{
    return uct_pxn_entry("uct_ep_put_sgl_zcopy", [&] {
        return ucs_derived_of(ep, uct_pxn_ep_t)->impl->sgl(
                pxn::abi::kOpPut, buffers, lengths, remote_addrs, rkeys, counts,
                strides, count, comp);
    });
}

#ifdef PXN_UCX_EP_GET_SGL_ZCOPY
ucs_status_t uct_pxn_ep_get_sgl_zcopy(uct_ep_h ep, void *const *buffers,
                                      const size_t *lengths, uct_mem_h const *,
                                      const uint64_t *remote_addrs,
                                      uct_rkey_t const *rkeys,
                                      const size_t *counts, const size_t *strides,
                                      size_t count, uct_completion_t *comp) noexcept
{
    return uct_pxn_entry("uct_ep_get_sgl_zcopy", [&] {
        return ucs_derived_of(ep, uct_pxn_ep_t)->impl->sgl(
                pxn::abi::kOpGet, buffers, lengths, remote_addrs, rkeys, counts,
                strides, count, comp);
    });
}
#endif
#endif /* PXN_UCX_EP_PUT_SGL_ZCOPY */
