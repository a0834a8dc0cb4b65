/*
 * Ep (pxn_ep.h): state and operations through the lane; the route and
 * connection are in pxn_ep_connect.cc, completion,
 * flush, fence and pending are in pxn_ep_progress.cc, the direct path in
 * pxn_ep_direct.cc.
 */
#include "pxn_ep.h"

#include "pxn_cuda.h"
#include "pxn_entry.h"
#include "pxn_iface.h"
#include "pxn_md.h"

extern "C" {
#include <ucs/debug/log.h>
}

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <memory>
#include <sched.h>

namespace pxn {
namespace uct {

Ep::~Ep()
{
    if (queued_) {
        active_->erase(std::remove(active_->begin(), active_->end(), this),
                       active_->end());
    }
    if ((direct_ep_ != nullptr) || !direct_rkeys_.empty()) {
        std::lock_guard<std::mutex> guard(hub_->net().lock());
        /* Destroying the ep cancels what is still in flight on it. */
        if (direct_ep_ != nullptr) {
            hub_->net().ep_destroy(direct_ep_);
        }
        for (auto &r : direct_rkeys_) {
            hub_->net().rkey_release(&r.second);
        }
    }
    if (asked_ != nullptr) {
        asked_->control().cancel(this); /* a late grant is released */
    }
    if (lane_ != nullptr) {
        lane_->control().release_route(route_);
    }
    for (Candidate &c : candidates_) {
        c.lane->control().release_route(c.route);
    }
    if (passive_ != nullptr) {
        std::lock_guard<std::mutex> guard(hub_->net().lock());
        hub_->net().ep_destroy(passive_);
    }
}

ucs_status_t Ep::take_error()
{
    if ((state_ != State::kFailed) || reported_) {
        return UCS_OK;
    }
    reported_ = true;
    return error_;
}

void Ep::transition(Event event, ucs_status_t status)
{
    switch (event) {
    case Event::kRouteAsked:
        if (state_ == State::kUnrouted) {
            state_ = State::kRouting;
        } else if (state_ == State::kRouted) {
            state_ = State::kRerouting;
        }
        return;
    case Event::kRouteGranted:
        if ((state_ == State::kRouting) || (state_ == State::kRerouting)) {
            state_ = State::kRouted;
        }
        return;
    case Event::kRouteRefused:
        /* A first route that fails fails a to-iface ep; a refused reroute
         * leaves the direct path, or the error, to the next operation; an
         * ep-to-ep ep whose outbound route fails may still receive. */
        if ((lane_ == nullptr) && to_iface_) {
            transition(Event::kFailed, status);
        } else if (state_ == State::kRouting) {
            state_ = State::kUnrouted;
        } else if (state_ == State::kRerouting) {
            state_ = State::kRouted;
        }
        return;
    case Event::kCanceled:
        if (state_ != State::kFailed) {
            state_ = State::kCanceled;
        }
        return;
    case Event::kFailed:
        if (state_ != State::kFailed) {
            state_ = State::kFailed;
            /* A failed ep answers its error to every operation for ever, so
             * it must be one: not a status that asks the caller to retry
             * (a lane whose claim found the relay's lanes all taken fails
             * with UCS_ERR_NO_RESOURCE, and a caller that retries on it
             * would spin for ever). */
            error_ = ((status == UCS_ERR_NO_RESOURCE) || !UCS_STATUS_IS_ERR(status)) ?
                     UCS_ERR_UNREACHABLE : status;
            want_progress(); /* reported from iface progress */
        }
        return;
    }
}

ucs_status_t Ep::admit(bool *direct)
{
    if (hub_->inherited()) {
        return UCS_ERR_UNREACHABLE; /* the parent's lane: fork.h */
    }
    check_route(direct != nullptr);
    return send_status(direct);
}

/* The table search compares the packed key with every entry: an
 * operation would pay it each time. The key remembers where our lane keeps
 * it; another lane (or ep thread) that uses the key overwrites that. */
ucs_status_t Ep::lane_rkey(uct_rkey_t rkey, uint32_t *index)
{
    if ((rkey == UCT_INVALID_RKEY) || (rkey == 0)) {
        /* only zero-length operations have none; pxn's md needs a key
         * (UCT_MD_FLAG_NEED_RKEY), so 0 is none of its own either */
        return UCS_ERR_INVALID_PARAM;
    }
    auto *key            = reinterpret_cast<uct_pxn_rkey_t*>(rkey);
    LaneControl &control = lane_->control();
    if (__atomic_load_n(&key->cache_lane, __ATOMIC_RELAXED) == &control) {
        const uint32_t cached = __atomic_load_n(&key->cache_index, __ATOMIC_RELAXED);
        if (control.rkey_current(cached,
                                 __atomic_load_n(&key->cache_gen, __ATOMIC_RELAXED))) {
            *index = cached;
            return UCS_OK;
        }
    }
    uint64_t gen;
    const ucs_status_t status = control.rkey_index(key->packed, key->length,
                                                   index, &gen);
    rkey_starved_ = (status == UCS_ERR_NO_RESOURCE);
    if (status == UCS_OK) {
        __atomic_store_n(&key->cache_lane, static_cast<const void*>(&control),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&key->cache_index, *index, __ATOMIC_RELAXED);
        __atomic_store_n(&key->cache_gen, gen, __ATOMIC_RELAXED);
    }
    return status;
}

/* As UCX's transports do: every operation leaves a TRACE_DATA line (UCX's
 * own tests count them; compiled out where UCX's build caps its log level
 * lower), and a length beyond what the iface advertises is the caller's
 * error, said where it happens. */
static inline void trace_op(const void *ep, const char *op, size_t length,
                            uint64_t remote_addr, uct_rkey_t rkey)
{
    ucs_trace_data("pxn ep %p: %s %zu bytes remote 0x%" PRIx64 " rkey 0x%lx",
                   ep, op, length, remote_addr, static_cast<unsigned long>(rkey));
}

static ucs_status_t check_length(const char *what, size_t length, size_t max)
{
    if (ucs_likely(length <= max)) {
        return UCS_OK;
    }
    ucs_error("Invalid %s: %zu (expected: <= %zu)", what, length, max);
    return UCS_ERR_INVALID_PARAM;
}

/* A put_bcopy without a remote key may only pack nothing. */
ssize_t Ep::pack_without_key(uct_pack_callback_t pack, void *arg)
{
    if (scratch_.size() < hub_->max_bcopy()) {
        scratch_.resize(hub_->max_bcopy());
    }
    return (pack(scratch_.data(), arg) == 0) ? 0 : UCS_ERR_INVALID_PARAM;
}


ucs_status_t Ep::put_short(const void *buffer, unsigned length,
                           uint64_t remote_addr, uct_rkey_t rkey)
{
    trace_op(this, "put_short", length, remote_addr, rkey);
    uint32_t index;
    ucs_status_t status = check_length("put_short length", length, hub_->max_short());
    if (status == UCS_OK) {
        status = admit();
    }
    if ((status == UCS_OK) && (length == 0)) {
        return UCS_OK; /* nothing to move; its rkey may be UCT_INVALID_RKEY */
    }
    if (status == UCS_OK) {
        status = lane_rkey(rkey, &index);
    }
    if (status != UCS_OK) {
        return status;
    }
    size_t packed = 0;
    status = lane_->stage_now(this, {abi::kOpPut, route_, index, remote_addr,
                                     length},
                              &packed, [&](uint8_t *dest) {
                                  /* UCP 1.13 may hand a GPU pointer to
                                   * put_short as host memory: the CPU
                                   * must not read it. */
                                  const ucs_status_t copied =
                                          copy_to_host(dest, buffer, length);
                                  return (copied == UCS_OK) ? ssize_t(length) :
                                                              ssize_t(copied);
                              });
    issued_ += (status == UCS_OK) && (packed != 0);
    return status;
}

ssize_t Ep::put_bcopy(uct_pack_callback_t pack, void *arg, uint64_t remote_addr,
                      uct_rkey_t rkey)
{
    uint32_t index;
    ucs_status_t status = admit();
    if ((status == UCS_OK) && (rkey == UCT_INVALID_RKEY)) {
        trace_op(this, "put_bcopy", 0, remote_addr, rkey);
        return pack_without_key(pack, arg);
    }
    if (status == UCS_OK) {
        status = lane_rkey(rkey, &index);
    }
    if (status != UCS_OK) {
        return status;
    }
    size_t packed = 0;
    status = lane_->stage_now(this, {abi::kOpPut, route_, index, remote_addr,
                                     hub_->max_bcopy()},
                              &packed, [&](uint8_t *dest) {
                                  return ssize_t(pack(dest, arg));
                              });
    if (status != UCS_OK) {
        return status;
    }
    trace_op(this, "put_bcopy", packed, remote_addr, rkey);
    issued_ += (packed != 0);
    return static_cast<ssize_t>(packed);
}

ucs_status_t Ep::get_bcopy(uct_unpack_callback_t unpack, void *arg,
                           size_t length, uint64_t remote_addr, uct_rkey_t rkey,
                           uct_completion_t *comp)
{
    if (!hub_->net().has_get()) {
        return UCS_ERR_UNSUPPORTED; /* GET_BCOPY not advertised */
    }
    trace_op(this, "get_bcopy", length, remote_addr, rkey);
    uint32_t index;
    ucs_status_t status = check_length("get_bcopy length", length, hub_->max_bcopy());
    if (status == UCS_OK) {
        status = admit();
    }
    if ((status == UCS_OK) && (length == 0)) {
        return UCS_OK;
    }
    if (status == UCS_OK) {
        status = lane_rkey(rkey, &index);
    }
    if (status != UCS_OK) {
        return status;
    }
    size_t staged = 0;
    status = lane_->stage_now(this, {abi::kOpGet, route_, index, remote_addr,
                                     length, comp, unpack, arg},
                              &staged);
    issued_ += (status == UCS_INPROGRESS);
    return status;
}

ucs_status_t Ep::zcopy(abi::Op op, const uct_iov_t *iov, size_t iovcnt,
                       uint64_t remote_addr, uct_rkey_t rkey,
                       uct_completion_t *comp)
{
    if ((op == abi::kOpGet) && !hub_->net().has_get()) {
        return UCS_ERR_UNSUPPORTED; /* GET_ZCOPY not advertised */
    }
    const bool get     = (op == abi::kOpGet);
    const size_t bytes = iov_bytes(iov, iovcnt);
    trace_op(this, get ? "get_zcopy" : "put_zcopy", bytes, remote_addr, rkey);
    uint32_t index;
    bool direct         = false;
    ucs_status_t status = check_length(get ? "get_zcopy length" : "put_zcopy length",
                                       bytes, hub_->max_zcopy());
    if (status == UCS_OK) {
        status = check_length("iov count", iovcnt, SendRequest::kMaxIov);
    }
    if (status == UCS_OK) {
        status = admit(&direct);
    }
    if ((status == UCS_OK) && (bytes == 0)) {
        return UCS_OK; /* nothing to move; its rkey may be UCT_INVALID_RKEY */
    }
    if ((status == UCS_OK) && direct) {
        return zcopy_direct(op, iov, iovcnt, remote_addr, rkey, comp);
    }
    if (status == UCS_OK) {
        status = lane_rkey(rkey, &index);
    }
    if (status != UCS_OK) {
        return status;
    }
    status = lane_->post(this, op, route_, index, remote_addr, iov, iovcnt,
                         comp);
    issued_ += (status == UCS_INPROGRESS);
    return status;
}

} // namespace uct
} // namespace pxn

/* --- UCX-facing shell --------------------------------------------------- */

using pxn::uct::Ep;

static Ep *impl(uct_ep_h ep)
{
    return ucs_derived_of(ep, uct_pxn_ep_t)->impl;
}

/* The ep's C++ side: its Ep connected (to-iface) or ready to give its
 * address (to-ep), on the iface's list. Nothing stays behind on failure. */
static ucs_status_t uct_pxn_ep_start(uct_pxn_ep_t *self, uct_pxn_iface_t *iface,
                                     const uct_ep_params_t *params)
{
    auto ep = std::make_unique<Ep>(iface->hub, &self->super.super,
                                   iface->active);
    self->impl = ep.get();
    ucs_status_t status;
    if (params->field_mask & UCT_EP_PARAM_FIELD_DEV_ADDR) {
        pxn::DeviceAddress dev;
        pxn::Bytes inner_iface;
        uint32_t am_cookie;
        if (!(params->field_mask & UCT_EP_PARAM_FIELD_IFACE_ADDR) ||
            !pxn::DeviceAddress::unpack(
                    reinterpret_cast<const uint8_t*>(params->dev_addr),
                    pxn::kMaxDeviceAddress, &dev) ||
            !pxn::unpack_iface_address(
                    reinterpret_cast<const uint8_t*>(params->iface_addr),
                    pxn::kMaxIfaceAddress, &inner_iface, &am_cookie)) {
            status = UCS_ERR_INVALID_ADDR;
        } else {
            status = ep->connect_to_iface(dev, inner_iface, am_cookie);
        }
    } else {
        status = ep->prepare_ep_address();
    }
    if (status != UCS_OK) {
        return status;
    }
    iface->eps->push_back(ep.get());
    ep.release();
    return UCS_OK;
}

UCS_CLASS_INIT_FUNC(uct_pxn_ep_t, const uct_ep_params_t *params)
{
    uct_pxn_iface_t *iface = ucs_derived_of(params->iface, uct_pxn_iface_t);

    UCS_CLASS_CALL_SUPER_INIT(uct_base_ep_t, &iface->super);
    if (iface->hub == nullptr) {
        return UCS_ERR_UNREACHABLE; /* a dormant iface */
    }
    return uct_pxn_entry("uct_ep_create", [&] {
        return uct_pxn_ep_start(self, iface, params);
    });
}

UCS_CLASS_CLEANUP_FUNC(uct_pxn_ep_t)
{
    uct_pxn_iface_t *iface = ucs_derived_of(self->super.super.iface,
                                            uct_pxn_iface_t);
    auto &eps = *iface->eps;
    eps.erase(std::remove(eps.begin(), eps.end(), self->impl), eps.end());
    if (!self->impl->inherited()) {
        delete self->impl;
    } /* else its routes and inner eps are the parent's: leaked (fork.h) */
}

UCS_CLASS_DEFINE(uct_pxn_ep_t, uct_base_ep_t);
UCS_CLASS_DEFINE_NEW_FUNC(uct_pxn_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DEFINE_DELETE_FUNC(uct_pxn_ep_t, uct_ep_t);

ucs_status_t uct_pxn_ep_put_short(uct_ep_h ep, const void *buffer,
                                  unsigned length, uint64_t remote_addr,
                                  uct_rkey_t rkey) noexcept
{
    return uct_pxn_entry("uct_ep_put_short", [&] {
        return impl(ep)->put_short(buffer, length, remote_addr, rkey);
    });
}

ssize_t uct_pxn_ep_put_bcopy(uct_ep_h ep, uct_pack_callback_t pack, void *arg,
                             uint64_t remote_addr, uct_rkey_t rkey) noexcept
{
    return uct_pxn_entry("uct_ep_put_bcopy", [&] {
        return impl(ep)->put_bcopy(pack, arg, remote_addr, rkey);
    });
}

ucs_status_t uct_pxn_ep_put_zcopy(uct_ep_h ep, const uct_iov_t *iov,
                                  size_t iovcnt, uint64_t remote_addr,
                                  uct_rkey_t rkey, uct_completion_t *comp) noexcept
{
    return uct_pxn_entry("uct_ep_put_zcopy", [&] {
        return impl(ep)->zcopy(pxn::abi::kOpPut, iov, iovcnt, remote_addr,
                               rkey, comp);
    });
}

ucs_status_t uct_pxn_ep_get_bcopy(uct_ep_h ep, uct_unpack_callback_t unpack,
                                  void *arg, size_t length, uint64_t remote_addr,
                                  uct_rkey_t rkey, uct_completion_t *comp) noexcept
{
    return uct_pxn_entry("uct_ep_get_bcopy", [&] {
        return impl(ep)->get_bcopy(unpack, arg, length, remote_addr, rkey, comp);
    });
}

ucs_status_t uct_pxn_ep_get_zcopy(uct_ep_h ep, const uct_iov_t *iov,
                                  size_t iovcnt, uint64_t remote_addr,
                                  uct_rkey_t rkey, uct_completion_t *comp) noexcept
{
    return uct_pxn_entry("uct_ep_get_zcopy", [&] {
        return impl(ep)->zcopy(pxn::abi::kOpGet, iov, iovcnt, remote_addr,
                               rkey, comp);
    });
}

ucs_status_t uct_pxn_ep_flush(uct_ep_h ep, unsigned flags,
                              uct_completion_t *comp) noexcept
{
    return uct_pxn_entry("uct_ep_flush", [&] {
        return impl(ep)->flush(flags, comp);
    });
}

ucs_status_t uct_pxn_ep_fence(uct_ep_h ep, unsigned) noexcept
{
    return uct_pxn_entry("uct_ep_fence", [&] { return impl(ep)->fence(); });
}

ucs_status_t uct_pxn_ep_pending_add(uct_ep_h ep, uct_pending_req_t *req,
                                    unsigned) noexcept
{
    return uct_pxn_entry("uct_ep_pending_add", [&] {
        return impl(ep)->pending_add(req);
    });
}

void uct_pxn_ep_pending_purge(uct_ep_h ep, uct_pending_purge_callback_t cb,
                              void *arg) noexcept
{
    uct_pxn_entry("uct_ep_pending_purge", [&] {
        impl(ep)->pending_purge(cb, arg);
    });
}

ucs_status_t uct_pxn_ep_get_address(uct_ep_h ep, uct_ep_addr_t *addr) noexcept
{
    return uct_pxn_entry("uct_ep_get_address", [&] {
        impl(ep)->pack_ep_address(reinterpret_cast<uint8_t*>(addr));
        return UCS_OK;
    });
}

ucs_status_t uct_pxn_ep_connect_to_ep(uct_ep_h ep,
                                      const uct_device_addr_t *dev_addr,
                                      const uct_ep_addr_t *ep_addr) noexcept
{
    return uct_pxn_entry("uct_ep_connect_to_ep", [&] {
        pxn::DeviceAddress dev;
        pxn::EpAddress addr;
        if (!pxn::DeviceAddress::unpack(reinterpret_cast<const uint8_t*>(dev_addr),
                                        pxn::kMaxDeviceAddress, &dev) ||
            !pxn::EpAddress::unpack(reinterpret_cast<const uint8_t*>(ep_addr),
                                    pxn::kMaxEpAddress, &addr)) {
            return UCS_ERR_INVALID_ADDR;
        }
        return impl(ep)->connect_to_ep(dev, addr);
    });
}

int uct_pxn_ep_is_connected(uct_ep_h ep, const uct_device_addr_t *dev_addr,
                            const uct_iface_addr_t *iface_addr,
                            const uct_ep_addr_t *ep_addr) noexcept
{
    return uct_pxn_entry("uct_ep_is_connected", [&] {
        pxn::DeviceAddress dev;
        pxn::Bytes iface;
        pxn::EpAddress addr;
        if ((dev_addr != nullptr) &&
            !pxn::DeviceAddress::unpack(reinterpret_cast<const uint8_t*>(dev_addr),
                                        pxn::kMaxDeviceAddress, &dev)) {
            return 0;
        }
        if ((iface_addr != nullptr) &&
            !pxn::unpack_iface_address(reinterpret_cast<const uint8_t*>(iface_addr),
                                       pxn::kMaxIfaceAddress, &iface)) {
            return 0;
        }
        if ((ep_addr != nullptr) &&
            !pxn::EpAddress::unpack(reinterpret_cast<const uint8_t*>(ep_addr),
                                    pxn::kMaxEpAddress, &addr)) {
            return 0;
        }
        return impl(ep)->is_connected_to((dev_addr != nullptr) ? &dev : nullptr,
                                         (iface_addr != nullptr) ? &iface : nullptr,
                                         (ep_addr != nullptr) ? &addr : nullptr) ?
               1 : 0;
    });
}
