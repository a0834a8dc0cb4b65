#include "pxn_iface.h"
#include "pxn_iface_counters.h"

#include "pxn_compat.h"
#include "pxn_entry.h"
#include "pxn_ep.h"
#include "pxn_hub.h"
#include "pxn_md.h"

extern "C" {
#include <ucs/debug/log.h>
#include <ucs/vfs/base/vfs_cb.h>
#include <ucs/vfs/base/vfs_obj.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/string.h>
#include <ucs/time/time.h>
}

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <memory>
#include <string>

using pxn::uct::Hub;

ucs_config_field_t uct_pxn_iface_config_table[] = {
    {"", "", NULL, ucs_offsetof(uct_pxn_iface_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},

    {NULL}
};

/* pxn devices are the inner md's devices, under the same names, so that
 * pinning UCX_NET_DEVICES to this GPU's NIC keeps pxn. Always NET type:
 * UCP keeps only NET devices in inter-node worker addresses. */
ucs_status_t uct_pxn_query_devices(uct_md_h tl_md,
                                   uct_tl_device_resource_t **devices_p,
                                   unsigned *num_devices_p) noexcept
{
    uct_pxn_md_t *md = ucs_derived_of(tl_md, uct_pxn_md_t);
    const auto &devices = md->inner->info().devices;

    *devices_p     = nullptr;
    *num_devices_p = 0;
    if (devices.empty()) {
        return UCS_OK;
    }
    auto *out = static_cast<uct_tl_device_resource_t*>(
            ucs_calloc(devices.size(), sizeof(uct_tl_device_resource_t),
                       "pxn devices"));
    if (out == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < devices.size(); ++i) {
        ucs_strncpy_zero(out[i].name, devices[i].name.c_str(),
                         sizeof(out[i].name));
        out[i].type       = UCT_DEVICE_TYPE_NET;
        out[i].sys_device = devices[i].sys_device;
    }
    *devices_p     = out;
    *num_devices_p = devices.size();
    return UCS_OK;
}

static Hub *hub_of(uct_iface_h tl_iface)
{
    return ucs_derived_of(tl_iface, uct_pxn_iface_t)->hub;
}

static ucs_status_t uct_pxn_iface_query(uct_iface_h tl_iface,
                                        uct_iface_attr_t *attr) noexcept
{
    uct_pxn_iface_t *iface = ucs_derived_of(tl_iface, uct_pxn_iface_t);
    Hub *hub               = iface->hub;
    if (hub == nullptr) {
        /* dormant: no capability, reaches nobody (UCP never picks it) */
        uct_base_iface_query(&iface->super, attr);
        attr->cap.flags          = 0;
        attr->device_addr_len    = 1;
        attr->iface_addr_len     = 0;
        attr->ep_addr_len        = 0;
        attr->latency.c          = 1;
        attr->bandwidth.shared   = 1;
        attr->priority           = 0;
        return UCS_OK;
    }
    const uct_iface_attr_t &inner = hub->net().attr();
    const bool to_iface = hub->net().to_iface();

    uct_base_iface_query(&iface->super, attr);
    attr->cap.flags = UCT_IFACE_FLAG_PUT_SHORT | UCT_IFACE_FLAG_PUT_BCOPY |
                      UCT_IFACE_FLAG_PUT_ZCOPY | UCT_IFACE_FLAG_PENDING |
                      UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE |
                      UCT_PXN_IFACE_FLAG_INTER_NODE |
                      (to_iface ? UCT_IFACE_FLAG_CONNECT_TO_IFACE :
                                  UCT_IFACE_FLAG_CONNECT_TO_EP);
    if (hub->net().has_get()) {
        attr->cap.flags |= UCT_IFACE_FLAG_GET_ZCOPY | UCT_IFACE_FLAG_GET_BCOPY;
    }
    attr->cap.put.max_short       = hub->max_short();
    attr->cap.put.max_bcopy       = hub->max_bcopy();
    attr->cap.put.min_zcopy       = 0;
    attr->cap.put.max_zcopy       = hub->max_zcopy();
    attr->cap.put.opt_zcopy_align = 1;
    attr->cap.put.align_mtu       = 1;
    attr->cap.put.max_iov         = pxn::uct::SendRequest::kMaxIov;
    if (hub->net().has_get()) {
        attr->cap.get.max_bcopy       = hub->max_bcopy();
        attr->cap.get.min_zcopy       = 0;
        attr->cap.get.max_zcopy       = hub->max_zcopy();
        attr->cap.get.opt_zcopy_align = 1;
        attr->cap.get.align_mtu       = 1;
        attr->cap.get.max_iov         = pxn::uct::SendRequest::kMaxIov;
    }
    if ((hub->max_am() != 0) && to_iface) {
        /* through relays; UCT's sync callbacks, from iface progress */
        attr->cap.flags |= UCT_IFACE_FLAG_AM_SHORT | UCT_IFACE_FLAG_AM_BCOPY |
                           UCT_IFACE_FLAG_AM_ZCOPY | UCT_IFACE_FLAG_CB_SYNC;
        attr->cap.am.max_short       = std::min(hub->max_am(), hub->max_short());
        attr->cap.am.max_bcopy       = hub->max_am();
        attr->cap.am.min_zcopy       = 0;
        attr->cap.am.max_zcopy       = pxn::uct::Ep::am_max_zcopy(hub->max_am());
        attr->cap.am.opt_zcopy_align = 1;
        attr->cap.am.align_mtu       = 1;
        attr->cap.am.max_hdr         = pxn::uct::Ep::kAmMaxHeader;
        attr->cap.am.max_iov         = pxn::uct::Ep::kAmMaxIov;
    }
    attr->device_addr_len = hub->device_address().packed_size();
    attr->iface_addr_len  = to_iface ?
                            pxn::iface_address_size(hub->inner_iface_address().size()) :
                            0;
    attr->ep_addr_len     = to_iface ? 0 : pxn::kMaxEpAddress;
    attr->max_conn_priv   = 0;
    /* The inner transport's own figures, and one more priority: pxn is only
     * reachable for cross-rail peers, for which a transport that also
     * claims reachability (rc through the spine, tcp over the frontend)
     * reports the same figures but crosses the spine. Equal scores go to
     * the higher priority, so UCP takes the rail-aligned path. The staging
     * copy overlaps with the network hop. */
    attr->latency         = inner.latency;
    attr->bandwidth       = inner.bandwidth;
    attr->overhead        = inner.overhead;
    attr->priority        = inner.priority + 1;
    return UCS_OK;
}

static ucs_status_t uct_pxn_iface_get_device_address(uct_iface_h tl_iface,
                                                     uct_device_addr_t *addr) noexcept
{
    if (hub_of(tl_iface) == nullptr) {
        *reinterpret_cast<uint8_t*>(addr) = 0;
        return UCS_OK;
    }
    hub_of(tl_iface)->device_address().pack(reinterpret_cast<uint8_t*>(addr));
    return UCS_OK;
}

static ucs_status_t uct_pxn_iface_get_address(uct_iface_h tl_iface,
                                              uct_iface_addr_t *addr) noexcept
{
    Hub *hub = hub_of(tl_iface);
    if ((hub != nullptr) &&
        hub->net().to_iface()) {
        pxn::pack_iface_address(hub->inner_iface_address(), hub->am_cookie(),
                                reinterpret_cast<uint8_t*>(addr));
    }
    return UCS_OK;
}

int uct_pxn_iface_is_reachable(const uct_iface_h tl_iface,
                               const uct_device_addr_t *dev_addr,
                               const uct_iface_addr_t *) noexcept
{
    pxn::DeviceAddress peer;
    if ((hub_of(tl_iface) == nullptr) ||
        !pxn::DeviceAddress::unpack(reinterpret_cast<const uint8_t*>(dev_addr),
                                    pxn::kMaxDeviceAddress, &peer)) {
        return 0;
    }
    return uct_pxn_entry("uct_iface_is_reachable", [&] {
        return hub_of(tl_iface)->is_reachable(peer) ? 1 : 0;
    });
}

/* Every endpoint is looked at once in this many progress calls. */
static constexpr unsigned kScanRounds = 256;

/* Messages handed to AM handlers per progress call at most. */
static constexpr unsigned kAmBatch = 16;

static unsigned uct_pxn_iface_progress_impl(uct_iface_h tl_iface)
{
    uct_pxn_iface_t *iface = ucs_derived_of(tl_iface, uct_pxn_iface_t);
    if ((iface->hub == nullptr) || iface->hub->inherited()) {
        return 0;
    }
    unsigned work          = iface->hub->progress();
    /* Active messages that relays forwarded here, to their handlers */
    work += iface->hub->drain_am(kAmBatch, [&](const pxn::AmInbox::Message &m) {
        uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_RECV, m.am_id,
                           m.data, m.length, "pxn iface %p: RX", iface);
        const ucs_status_t status =
                uct_iface_invoke_am(&iface->super, m.am_id,
                                    const_cast<void*>(m.data), m.length, 0);
        ucs_assertv(status == UCS_OK, "AM handler %u kept a message it was "
                    "not given (UCT_CB_PARAM_FLAG_DESC): %s", m.am_id,
                    ucs_status_string(status));
    });
#ifdef ENABLE_STATS
    if ((iface->stats != nullptr) && (ucs_get_time() > iface->stats_next)) {
        iface->stats_next = ucs_get_time() + ucs_time_from_msec(100);
        uct_pxn_iface_stats_update(iface);
    }
#endif

    /* Endpoints on the active list, and every endpoint when one of the
     * worker's lanes failed (its endpoints route again or fail) and now and
     * then (a safety net): not all of them in every call. */
    const uint64_t failures = iface->hub->lane_failures();
    if ((failures != iface->lane_failures) ||
        ((++iface->rounds % kScanRounds) == 0)) {
        iface->lane_failures = failures;
        for (pxn::uct::Ep *ep : *iface->eps) {
            if (ep->needs_progress()) {
                ep->want_progress();
            }
        }
    }
    std::vector<std::pair<uct_ep_h, ucs_status_t>> failed;
    auto &active = *iface->active;
    /* By index: a pending callback may add eps to the list. */
    for (size_t i = 0; i < active.size(); ++i) {
        pxn::uct::Ep *ep = active[i];
        work += ep->progress_pending();
        const ucs_status_t status = ep->take_error();
        if (status != UCS_OK) {
            failed.emplace_back(ep->uct_ep(), status);
        }
    }
    active.erase(std::remove_if(active.begin(), active.end(),
                                [](pxn::uct::Ep *ep) { return ep->settle(); }),
                 active.end());
    /* The handler may destroy eps: call it outside the loop above, and only
     * for eps that still exist. */
    for (const auto &f : failed) {
        const auto &eps = *iface->eps;
        if (std::any_of(eps.begin(), eps.end(), [&](pxn::uct::Ep *ep) {
                return ep->uct_ep() == f.first;
            })) {
            uct_iface_handle_ep_err(tl_iface, f.first, f.second);
            ++work;
        }
    }
    while (!iface->flushes->empty() && iface->hub->idle() &&
           std::all_of(iface->eps->begin(), iface->eps->end(),
                       [](pxn::uct::Ep *ep) { return ep->idle(); })) {
        uct_completion_t *comp = iface->flushes->front();
        iface->flushes->pop_front();
        if (--comp->count == 0) {
            comp->func(comp);
        }
        ++work;
    }
    return work;
}

/* An allocation that fails in a round ends that round: what it did not do
 * waits for the next one. */
static unsigned uct_pxn_iface_progress(uct_iface_h tl_iface) noexcept
{
    return uct_pxn_entry("uct_iface_progress", [&] {
        return uct_pxn_iface_progress_impl(tl_iface);
    });
}

/* Every operation issued on the iface before the call: an ep that failed
 * (its operations ended) or waits for its route (none issued) is flushed.
 * UCT_FLUSH_FLAG_CANCEL is an ep flag only. */
static ucs_status_t uct_pxn_iface_flush_impl(uct_iface_h tl_iface,
                                             unsigned flags,
                                             uct_completion_t *comp)
{
    uct_pxn_iface_t *iface = ucs_derived_of(tl_iface, uct_pxn_iface_t);
    bool idle              = (iface->hub == nullptr) || iface->hub->inherited() ||
                             iface->hub->idle();
    for (pxn::uct::Ep *ep : *iface->eps) {
        if (ep->flush(flags & ~UCT_FLUSH_FLAG_CANCEL, nullptr) == UCS_INPROGRESS) {
            idle = false;
        }
    }
    if (idle) {
        return UCS_OK;
    }
    if (comp != nullptr) {
        iface->flushes->push_back(comp);
    }
    return UCS_INPROGRESS;
}

static ucs_status_t uct_pxn_iface_flush(uct_iface_h tl_iface, unsigned flags,
                                        uct_completion_t *comp) noexcept
{
    return uct_pxn_entry("uct_iface_flush", [&] {
        return uct_pxn_iface_flush_impl(tl_iface, flags, comp);
    });
}

static ucs_status_t uct_pxn_iface_fence(uct_iface_h tl_iface, unsigned) noexcept
{
    return uct_pxn_entry("uct_iface_fence", [&] {
        for (pxn::uct::Ep *ep : *ucs_derived_of(tl_iface, uct_pxn_iface_t)->eps) {
            ep->fence();
        }
        return UCS_OK;
    });
}

static ucs_status_t uct_pxn_iface_event_fd_get(uct_iface_h, int *) noexcept
{
    return UCS_ERR_UNSUPPORTED;
}

static ucs_status_t uct_pxn_iface_event_arm(uct_iface_h, unsigned) noexcept
{
    return UCS_ERR_UNSUPPORTED;
}

static void uct_pxn_iface_progress_disable(uct_iface_h tl_iface,
                                           unsigned flags) noexcept
{
    uct_base_iface_progress_disable(tl_iface, flags);
}

static void uct_pxn_iface_progress_enable(uct_iface_h tl_iface,
                                          unsigned flags) noexcept
{
    uct_base_iface_progress_enable(tl_iface, flags);
}

static ucs_status_t uct_pxn_ep_check(uct_ep_h, unsigned,
                                     uct_completion_t *) noexcept
{
    return UCS_ERR_UNSUPPORTED;
}

static ucs_status_t uct_pxn_iface_estimate_perf(uct_iface_h tl_iface,
                                                uct_perf_attr_t *perf_attr) noexcept
{
    return uct_base_iface_estimate_perf(tl_iface, perf_attr);
}

/* The iface's counters (live values from its control file) and identity,
 * under <iface>/pxn/ in UCX's VFS (ucx_vfs). Called again on every refresh:
 * existing files are kept (UCS_ERR_ALREADY_EXISTS). */
static void uct_pxn_iface_vfs_refresh(uct_iface_h tl_iface) noexcept
{
    Hub *hub = hub_of(tl_iface);
    if (hub == nullptr) {
        return;
    }
    uct_pxn_iface_vfs_add(tl_iface, hub);
}

static ucs_status_t uct_pxn_ep_query(uct_ep_h, uct_ep_attr_t *) noexcept
{
    return UCS_ERR_UNSUPPORTED;
}

static UCS_CLASS_DECLARE_DELETE_FUNC(uct_pxn_iface_t, uct_iface_t);

static uct_iface_ops_t *uct_pxn_iface_ops()
{
    static uct_iface_ops_t ops = [] {
        uct_iface_ops_t o;
        memset(&o, 0, sizeof(o));
        o.ep_put_short             = uct_pxn_ep_put_short;
        o.ep_am_short              = uct_pxn_ep_am_short;
        o.ep_am_short_iov          = uct_pxn_ep_am_short_iov;
        o.ep_am_bcopy              = uct_pxn_ep_am_bcopy;
        o.ep_am_zcopy              = uct_pxn_ep_am_zcopy;
        o.ep_put_bcopy             = uct_pxn_ep_put_bcopy;
        o.ep_put_zcopy             = uct_pxn_ep_put_zcopy;
        o.ep_get_bcopy             = uct_pxn_ep_get_bcopy;
        o.ep_get_zcopy             = uct_pxn_ep_get_zcopy;
        o.ep_pending_add           = uct_pxn_ep_pending_add;
        o.ep_pending_purge         = uct_pxn_ep_pending_purge;
        o.ep_flush                 = uct_pxn_ep_flush;
        o.ep_fence                 = uct_pxn_ep_fence;
        o.ep_check                 = uct_pxn_ep_check;
        o.ep_create                = UCS_CLASS_NEW_FUNC_NAME(uct_pxn_ep_t);
        o.ep_destroy               = UCS_CLASS_DELETE_FUNC_NAME(uct_pxn_ep_t);
        o.ep_get_address           = uct_pxn_ep_get_address;
        o.ep_connect_to_ep         = uct_pxn_ep_connect_to_ep;
        o.iface_flush              = uct_pxn_iface_flush;
        o.iface_fence              = uct_pxn_iface_fence;
        o.iface_progress_enable    = uct_pxn_iface_progress_enable;
        o.iface_progress_disable   = uct_pxn_iface_progress_disable;
        o.iface_progress           = uct_pxn_iface_progress;
        o.iface_event_fd_get       = uct_pxn_iface_event_fd_get;
        o.iface_event_arm          = uct_pxn_iface_event_arm;
        o.iface_close              = UCS_CLASS_DELETE_FUNC_NAME(uct_pxn_iface_t);
        o.iface_query              = uct_pxn_iface_query;
        o.iface_get_device_address = uct_pxn_iface_get_device_address;
        o.iface_get_address        = uct_pxn_iface_get_address;
        o.iface_is_reachable       = uct_pxn_iface_is_reachable;
        return o;
    }();
    return &ops;
}

static uct_iface_internal_ops_t *uct_pxn_iface_internal_ops()
{
    static uct_iface_internal_ops_t ops = [] {
        uct_iface_internal_ops_t o;
        memset(&o, 0, sizeof(o));
        o.iface_estimate_perf = uct_pxn_iface_estimate_perf;
        o.iface_vfs_refresh   = uct_pxn_iface_vfs_refresh;
        o.ep_query            = uct_pxn_ep_query;
        uct_pxn_compat_iface_internal_ops(&o);
        return o;
    }();
    return &ops;
}

/* The iface's C++ side: its Hub (none: dormant), lists and statistics
 * node; nothing of them stays behind on failure. */
static ucs_status_t uct_pxn_iface_start(uct_pxn_iface_t *self, uct_pxn_md_t *md,
                                        uct_worker_h worker,
                                        const uct_iface_params_t *params)
{
    std::unique_ptr<Hub> hub;
    ucs_status_t status = Hub::open(*md->settings, *md->inner,
                                    params->mode.device.dev_name, worker, &hub);
    if (status != UCS_OK) {
        /* pxn never takes UCP down: the iface opens dormant (no
         * capability, reaches nobody) and UCP goes on without it. */
        uct_pxn_warn_once(std::string("pxn: not usable on ") +
                          params->mode.device.dev_name + ": " +
                          ucs_status_string(status) + " (the line above "
                          "says why); UCX goes on with its other transports");
    }
    auto eps     = std::make_unique<std::vector<pxn::uct::Ep*>>();
    auto active  = std::make_unique<std::vector<pxn::uct::Ep*>>();
    auto flushes = std::make_unique<std::deque<uct_completion_t*>>();
#ifdef ENABLE_STATS
    /* Without statistics configured at run time the node is NULL. */
    status = UCS_STATS_NODE_ALLOC(&self->stats, uct_pxn_stats_class_get(),
                                  self->super.stats, "");
    if (status != UCS_OK) {
        return status;
    }
#endif
    self->eps     = eps.release();
    self->active  = active.release();
    self->flushes = flushes.release();
    self->hub     = hub.release();
    return UCS_OK;
}

UCS_CLASS_INIT_FUNC(uct_pxn_iface_t, uct_md_h tl_md, uct_worker_h worker,
                    const uct_iface_params_t *params,
                    const uct_iface_config_t *tl_config)
{
    uct_pxn_md_t *md = ucs_derived_of(tl_md, uct_pxn_md_t);

    UCS_CLASS_CALL_SUPER_INIT(uct_base_iface_t, uct_pxn_iface_ops(),
                              uct_pxn_iface_internal_ops(), tl_md, worker,
                              params, tl_config
                              UCS_STATS_ARG(params->stats_root)
                              UCS_STATS_ARG("pxn"));

    if (!(params->field_mask & UCT_IFACE_PARAM_FIELD_OPEN_MODE) ||
        !(params->open_mode & UCT_IFACE_OPEN_MODE_DEVICE)) {
        ucs_error("pxn: only device open mode is supported");
        return UCS_ERR_UNSUPPORTED;
    }

    /* UCT's checks of the AM alignment parameters (pxn hands messages
     * to handlers without descriptors: no alignment to keep) */
    if (!(params->field_mask & UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT) &&
        (params->field_mask & UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET)) {
        ucs_error("pxn: alignment offset has no effect without alignment");
        return UCS_ERR_INVALID_PARAM;
    }
    if ((params->field_mask & UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT) &&
        !ucs_is_pow2(params->am_alignment)) {
        ucs_error("pxn: AM alignment (%zu) must be a power of 2",
                  params->am_alignment);
        return UCS_ERR_INVALID_PARAM;
    }

    self->hub        = nullptr;
    self->eps        = nullptr;
    self->active     = nullptr;
    self->lane_failures = 0;
    self->rounds     = 0;
    self->flushes    = nullptr;
    self->stats_next = 0;
    UCS_STATS_NODE_RESET(&self->stats);
    return uct_pxn_entry("uct_iface_open", [&] {
        return uct_pxn_iface_start(self, md, worker, params);
    });
}

UCS_CLASS_CLEANUP_FUNC(uct_pxn_iface_t)
{
    uct_base_iface_progress_disable(&self->super.super,
                                    UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    uct_pxn_iface_stats_update(self); /* the final values */
    UCS_STATS_NODE_FREE(self->stats);
    if ((self->hub != nullptr) && self->hub->inherited()) {
        self->hub = nullptr; /* the parent's relay and lanes: leaked (fork.h) */
    }
    delete self->hub;
    delete self->eps;
    delete self->active;
    delete self->flushes;
}

UCS_CLASS_DEFINE(uct_pxn_iface_t, uct_base_iface_t);

static UCS_CLASS_DEFINE_DELETE_FUNC(uct_pxn_iface_t, uct_iface_t);
