/*
 * An ep's active messages: am_short, am_bcopy and am_zcopy to a peer on
 * another rail, staged in the call into the lane of the relay of the
 * peer's rail as plans of an AM piece (am_frame.h), forwarded by that
 * relay to the peer iface's port within the credit its inbox grants
 * (pxn_relay_am.cc, pxn_am_port.h) and handed to its handler by its
 * progress.
 */
#include "pxn_ep.h"

#include "pxn_cuda.h"
#include "pxn_entry.h"
#include "pxn_hub.h"
#include "pxn_send_lane.h"

#include <ucs/pxn/am_frame.h>

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cstring>

namespace pxn {
namespace uct {

namespace {

/* A message pxn cannot carry to this peer: the peer receives none (a
 * sender-only iface, a port without AM), or the id is UCT's to refuse. */
ucs_status_t check_am(uint8_t id, uint32_t cookie, size_t length, size_t max)
{
    if ((cookie == 0) || (max == 0)) {
        return UCS_ERR_UNSUPPORTED;
    }
    /* UCT's own wording (UCT_CHECK_AM_ID, UCT_CHECK_LENGTH) */
    if (id >= kAmIdCount) {
        ucs_error("Invalid active message id %u (valid range: 0..%u)", id,
                  kAmIdCount - 1);
        return UCS_ERR_INVALID_PARAM;
    }
    if (length > max) {
        ucs_error("Invalid am length: %zu (expected: <= %zu)", length, max);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

ucs_status_t copy_host(void *dest, const void *src, size_t length)
{
    std::memcpy(dest, src, length);
    return UCS_OK;
}

/* Writes the elements of a UCT iov (each `count` times at `stride`) one
 * after another at dest with `copy`; the first error it returns. */
template<typename Copy>
ucs_status_t pack_iov(uint8_t *dest, const uct_iov_t *iov, size_t iovcnt,
                      Copy &&copy)
{
    for (size_t i = 0; i < iovcnt; ++i) {
        if (iov[i].length == 0) {
            continue; /* its buffer may be NULL */
        }
        const auto *src = static_cast<const uint8_t*>(iov[i].buffer);
        for (unsigned c = 0; c < std::max<unsigned>(iov[i].count, 1); ++c) {
            const ucs_status_t status = copy(dest, src + c * iov[i].stride,
                                             iov[i].length);
            if (status != UCS_OK) {
                return status;
            }
            dest += iov[i].length;
        }
    }
    return UCS_OK;
}

/* am_zcopy's limits as the iface gives them (max_hdr, max_zcopy,
 * max_iov), in UCT's wording (UCT_CHECK_LENGTH, UCT_CHECK_IOV_SIZE). */
ucs_status_t check_am_zcopy(size_t header_length, size_t payload,
                            size_t iovcnt, size_t max_zcopy)
{
    if (header_length > Ep::kAmMaxHeader) {
        ucs_error("Invalid am_zcopy header length: %zu (expected: <= %zu)",
                  header_length, Ep::kAmMaxHeader);
        return UCS_ERR_INVALID_PARAM;
    }
    if (payload > max_zcopy) {
        ucs_error("Invalid am_zcopy length: %zu (expected: <= %zu)", payload,
                  max_zcopy);
        return UCS_ERR_INVALID_PARAM;
    }
    if (iovcnt > Ep::kAmMaxIov) {
        ucs_error("iovcnt(%zu) should be limited by %zu in am_zcopy", iovcnt,
                  Ep::kAmMaxIov);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

/* An active message's ImmediateOp: its piece holds messages for its
 * target iface only (PieceBuilder's group), so that a target iface that
 * goes fails no other iface's messages. */
ImmediateOp am_op(uint32_t route, uint32_t cookie, uint8_t id, size_t length)
{
    ImmediateOp op{abi::kOpAm, route, 0, am_plan_address(cookie, id), length};
    op.group = cookie;
    return op;
}

/* The message as UCT's AM tracer sees it (uct_iface_set_am_tracer), once
 * staged: header and payload in one buffer. */
void trace_am_send(uct_ep_h ep, uint8_t id, const void *data, size_t length)
{
    uct_iface_trace_am(ucs_derived_of(ep->iface, uct_base_iface_t),
                       UCT_AM_TRACE_TYPE_SEND, id, data, length,
                       "pxn ep %p: TX", ep);
}

} // namespace

ucs_status_t Ep::admit_am(uint8_t id, size_t length, size_t max)
{
    const ucs_status_t status = check_am(id, am_cookie_, length, max);
    return (status == UCS_OK) ? admit() : status;
}

ucs_status_t Ep::am_short(uint8_t id, uint64_t header, const void *payload,
                          unsigned length)
{
    /* UCT delivers the header first, then the payload: two elements */
    const uct_iov_t iov[2] = {
            {&header, sizeof(header), UCT_MEM_HANDLE_NULL, 0, 1},
            {const_cast<void*>(payload), length, UCT_MEM_HANDLE_NULL, 0, 1}};
    return am_short_iov(id, iov, (length != 0) ? 2 : 1);
}

/* One message: `header` (host memory) then the iov's elements, copied with
 * memcpy, or by the driver where the payload may be GPU memory. */
ucs_status_t Ep::stage_am(const char *what, uint8_t id, const void *header,
                          size_t header_length, const uct_iov_t *iov,
                          size_t iovcnt, size_t max, bool device_payload)
{
    const size_t total  = header_length + iov_bytes(iov, iovcnt);
    ucs_status_t status = admit_am(id, total, max);
    if (status != UCS_OK) {
        return status;
    }
    size_t packed = 0;
    status = lane_->stage_now(this, am_op(route_, am_cookie_, id, total),
                              &packed, [&](uint8_t *dest) {
        if (header_length != 0) {
            std::memcpy(dest, header, header_length);
        }
        const ucs_status_t copied =
                device_payload ? pack_iov(dest + header_length, iov, iovcnt,
                                          copy_to_host) :
                                 pack_iov(dest + header_length, iov, iovcnt,
                                          copy_host);
        if (copied != UCS_OK) {
            return ssize_t(copied);
        }
        trace_am_send(self_, id, dest, total);
        return ssize_t(total);
    });
    ucs_trace_data("pxn ep %p: %s id %u %zu bytes: %s", this, what, id, total,
                   ucs_status_string(status));
    issued_ += (status == UCS_OK);
    return status;
}

ucs_status_t Ep::am_short_iov(uint8_t id, const uct_iov_t *iov, size_t iovcnt)
{
    return stage_am("am_short_iov", id, nullptr, 0, iov, iovcnt,
                    std::min(hub_->max_am(), hub_->max_short()), false);
}

/* UCS_OK once staged, as am_bcopy: the caller's buffers are free again
 * (UCT's "completed", comp not called; tcp's am_zcopy does the same when
 * its bytes left at once). The payload may be GPU memory that this
 * process's md registered. */
ucs_status_t Ep::am_zcopy(uint8_t id, const void *header, unsigned header_length,
                          const uct_iov_t *iov, size_t iovcnt)
{
    const ucs_status_t status = check_am_zcopy(header_length,
                                               iov_bytes(iov, iovcnt), iovcnt,
                                               am_max_zcopy(hub_->max_am()));
    return (status != UCS_OK) ? status :
           stage_am("am_zcopy", id, header, header_length, iov, iovcnt,
                    hub_->max_am(), true);
}

ssize_t Ep::am_bcopy(uint8_t id, uct_pack_callback_t pack, void *arg)
{
    ucs_status_t status = admit_am(id, 0, hub_->max_am());
    if (status != UCS_OK) {
        return status;
    }
    size_t packed = 0;
    status = lane_->stage_now(this, am_op(route_, am_cookie_, id, hub_->max_am()),
                              &packed, [&](uint8_t *dest) {
                                  const size_t length = pack(dest, arg);
                                  trace_am_send(self_, id, dest, length);
                                  return ssize_t(length);
                              });
    ucs_trace_data("pxn ep %p: am_bcopy id %u %zu bytes: %s", this, id, packed,
                   ucs_status_string(status));
    if (status != UCS_OK) {
        return status;
    }
    ++issued_;
    return static_cast<ssize_t>(packed);
}

} // namespace uct
} // namespace pxn

using pxn::uct::Ep;

ucs_status_t uct_pxn_ep_am_short(uct_ep_h ep, uint8_t id, uint64_t header,
                                 const void *payload, unsigned length) noexcept
{
    return uct_pxn_entry("uct_ep_am_short", [&] {
        return ucs_derived_of(ep, uct_pxn_ep_t)->impl->am_short(id, header,
                                                               payload, length);
    });
}

ucs_status_t uct_pxn_ep_am_short_iov(uct_ep_h ep, uint8_t id,
                                     const uct_iov_t *iov, size_t iovcnt) noexcept
{
    return uct_pxn_entry("uct_ep_am_short_iov", [&] {
        return ucs_derived_of(ep, uct_pxn_ep_t)->impl->am_short_iov(id, iov,
                                                                   iovcnt);
    });
}

ssize_t uct_pxn_ep_am_bcopy(uct_ep_h ep, uint8_t id, uct_pack_callback_t pack,
                            void *arg, unsigned) noexcept
{
    return uct_pxn_entry("uct_ep_am_bcopy", [&] {
        return ucs_derived_of(ep, uct_pxn_ep_t)->impl->am_bcopy(id, pack, arg);
    });
}

ucs_status_t uct_pxn_ep_am_zcopy(uct_ep_h ep, uint8_t id, const void *header,
                                 unsigned header_length, const uct_iov_t *iov,
                                 size_t iovcnt, unsigned,
                                 uct_completion_t *) noexcept
{
    return uct_pxn_entry("uct_ep_am_zcopy", [&] {
        return ucs_derived_of(ep, uct_pxn_ep_t)->impl->am_zcopy(
                id, header, header_length, iov, iovcnt);
    });
}
