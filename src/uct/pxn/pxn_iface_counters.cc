/*
 * pxn's counters as UCX shows them for an iface (pxn_iface_counters.h).
 */
#include "pxn_iface_counters.h"

#include "pxn_hub.h"

extern "C" {
#include <ucs/vfs/base/vfs_cb.h>
#include <ucs/vfs/base/vfs_obj.h>
#include <ucs/sys/string.h>
}

#include <algorithm>
#include <cstddef>
#include <string>

using pxn::uct::Hub;

/* In the order of kCounterNames: the relay's of this iface's home rail,
 * then the process's sender counters. */
static constexpr unsigned kNumRelayCounters = 19;
static constexpr unsigned kNumCounters      = 34;
/* and, after them, the age of the last completion of each block */
static constexpr unsigned kNumStats = kNumCounters + 2;
static const char *const kCounterNames[kNumCounters] = {
    "relay/pieces", "relay/bytes", "relay/failed_pieces",
    "relay/rejected_descriptors", "relay/routes", "relay/route_errors",
    "relay/lane_resets", "relay/inflight", "relay/fenced", "relay/rkeys_held",
    "relay/inner_ops", "relay/inner_sgl_ops", "relay/am_pieces",
    "relay/am_messages", "relay/am_bytes", "relay/am_credit_waits",
    "relay/pickup_samples", "relay/pickup_total_ns", "relay/pickup_over_1ms",
    "sender/pieces", "sender/bytes", "sender/credit_stalls", "sender/failed_ops",
    "sender/fallback_ops", "sender/fallback_bytes", "sender/lanes",
    "sender/gather_pieces", "sender/spare_misses", "sender/am_sent",
    "sender/am_received", "sender/am_refused", "sender/completion_samples",
    "sender/completion_total_ns", "sender/completion_over_1ms"};

/* The histogram counters of a block: samples, their sum, those over 1 ms. */
static uint64_t uct_pxn_latency_counter(const pxn::abi::LatencyHistogram &h,
                                        unsigned which)
{
    return (which == 0) ? pxn::abi::load_relaxed(h.count) :
           (which == 1) ? pxn::abi::load_relaxed(h.sum_ns) :
                          pxn::abi::latency_over(h, 1000000);
}

/* Counter `i` of kCounterNames, now. */
static uint64_t uct_pxn_counter(Hub *hub, unsigned i)
{
    constexpr unsigned kPlainRelay  = kNumRelayCounters - 3;
    constexpr unsigned kPlainSender = kNumCounters - kNumRelayCounters - 3;
    if (i < kNumRelayCounters) {
        const pxn::abi::RelayCounters &r = hub->relay_counters().relay;
        const uint64_t *const values[kPlainRelay] = {
            &r.pieces, &r.bytes, &r.failed_pieces, &r.rejected, &r.routes,
            &r.route_errors, &r.lane_resets, &r.inflight, &r.fenced,
            &r.rkeys_held, &r.inner_ops, &r.inner_sgl_ops, &r.am_pieces,
            &r.am_messages, &r.am_bytes, &r.am_credit_waits};
        return (i < kPlainRelay) ? pxn::abi::load_relaxed(*values[i]) :
               uct_pxn_latency_counter(r.pickup, i - kPlainRelay);
    }
    const pxn::abi::SenderCounters &c = hub->sender_counters();
    const uint64_t *const values[kPlainSender] = {
        &c.pieces, &c.bytes, &c.credit_stalls, &c.failed_ops, &c.fallback_ops,
        &c.fallback_bytes, &c.lanes, &c.gather_pieces, &c.spare_misses,
        &c.am_sent, &c.am_received, &c.am_refused};
    i -= kNumRelayCounters;
    return (i < kPlainSender) ? pxn::abi::load_relaxed(*values[i]) :
           uct_pxn_latency_counter(c.completion, i - kPlainSender);
}

/* CLOCK_MONOTONIC of the last completion: 0 relay, 1 sender (0: none). */
static uint64_t uct_pxn_last_completion(Hub *hub, unsigned which)
{
    return pxn::abi::load_relaxed(
            (which == 0) ? hub->relay_counters().relay.last_completion_ns :
                           hub->sender_counters().last_completion_ns);
}

#ifdef ENABLE_STATS
/* ucs_stats_class_t ends in a flexible array, which C++ cannot initialise:
 * the same layout with a fixed one. */
static struct {
    const char *name;
    unsigned    num_counters;
    unsigned    class_id;
    const char *counter_names[kNumStats];
} uct_pxn_stats_class = {"pxn", kNumStats,
                          static_cast<unsigned>(UCS_STATS_CLASS_ID_INVALID), {}};
static_assert(offsetof(decltype(uct_pxn_stats_class), counter_names) ==
              offsetof(ucs_stats_class_t, counter_names),
              "layout of ucs_stats_class_t");

/* The VFS names with '_' for '/', which statistics names may not hold:
 * relay_pieces, sender_bytes, ... */
ucs_stats_class_t *uct_pxn_stats_class_get()
{
    static std::string names[kNumCounters];
    if (uct_pxn_stats_class.counter_names[0] == nullptr) {
        for (unsigned i = 0; i < kNumCounters; ++i) {
            names[i] = kCounterNames[i];
            std::replace(names[i].begin(), names[i].end(), '/', '_');
            uct_pxn_stats_class.counter_names[i] = names[i].c_str();
        }
        uct_pxn_stats_class.counter_names[kNumCounters] =
                "relay_last_completion_age_ms";
        uct_pxn_stats_class.counter_names[kNumCounters + 1] =
                "sender_last_completion_age_ms";
    }
    return reinterpret_cast<ucs_stats_class_t*>(&uct_pxn_stats_class);
}
#endif

void uct_pxn_iface_stats_update(uct_pxn_iface_t *iface)
{
#ifdef ENABLE_STATS
    if ((iface->stats == nullptr) || (iface->hub == nullptr)) {
        return;
    }
    for (unsigned i = 0; i < kNumCounters; ++i) {
        UCS_STATS_SET_COUNTER(iface->stats, i, uct_pxn_counter(iface->hub, i));
    }
    const uint64_t now = pxn::monotonic_ns();
    for (unsigned i = 0; i < 2; ++i) { /* 0: none yet */
        const uint64_t at = uct_pxn_last_completion(iface->hub, i);
        UCS_STATS_SET_COUNTER(iface->stats, kNumCounters + i,
                              (at == 0) ? 0 : (now - at) / 1000000);
    }
#endif
}

/* VFS: counter arg_u64 of the iface (arg_ptr), now. */
static void uct_pxn_vfs_show_counter(void *, ucs_string_buffer_t *strb,
                                     void *arg_ptr, uint64_t arg_u64) noexcept
{
    ucs_string_buffer_appendf(strb, "%lu\n",
                              uct_pxn_counter(static_cast<Hub*>(arg_ptr),
                                              static_cast<unsigned>(arg_u64)));
}

/* VFS: the age of the last completion (arg_u64: 0 relay, 1 sender) of the
 * iface (arg_ptr), or "never". */
static void uct_pxn_vfs_show_age(void *, ucs_string_buffer_t *strb,
                                 void *arg_ptr, uint64_t arg_u64) noexcept
{
    const uint64_t at  = uct_pxn_last_completion(static_cast<Hub*>(arg_ptr),
                                                 static_cast<unsigned>(arg_u64));
    const uint64_t now = pxn::monotonic_ns();
    if (at == 0) {
        ucs_string_buffer_appendf(strb, "never\n");
    } else {
        ucs_string_buffer_appendf(strb, "%.3f s\n",
                                  (now > at) ? (now - at) / 1e9 : 0.0);
    }
}

void uct_pxn_iface_vfs_add(uct_iface_h tl_iface, Hub *hub) noexcept
{
    for (unsigned i = 0; i < kNumCounters; ++i) {
        ucs_vfs_obj_add_ro_file(tl_iface, uct_pxn_vfs_show_counter, hub, i,
                                "pxn/%s", kCounterNames[i]);
    }
    ucs_vfs_obj_add_ro_file(tl_iface, uct_pxn_vfs_show_age, hub, 0,
                            "pxn/relay/last_completion_age");
    ucs_vfs_obj_add_ro_file(tl_iface, uct_pxn_vfs_show_age, hub, 1,
                            "pxn/sender/last_completion_age");
    ucs_vfs_obj_add_ro_file(tl_iface, ucs_vfs_show_primitive,
                            const_cast<char*>(hub->rail().c_str()),
                            UCS_VFS_TYPE_STRING, "pxn/rail");
    ucs_vfs_obj_add_ro_file(tl_iface, ucs_vfs_show_primitive,
                            const_cast<char*>(hub->net().device().c_str()),
                            UCS_VFS_TYPE_STRING, "pxn/home_device");
    ucs_vfs_obj_add_ro_file(tl_iface, ucs_vfs_show_primitive,
                            const_cast<char*>(hub->net().tl_name().c_str()),
                            UCS_VFS_TYPE_STRING, "pxn/inner_tl");
}
