/*
 * The pxn interface (UCX-facing shell over pxn::uct::Hub). One iface is one
 * process's presence on its home rail: it sends through the relays of other
 * rails of its node and relays for their senders.
 */
#ifndef UCT_PXN_IFACE_H_
#define UCT_PXN_IFACE_H_

extern "C" {
#include <uct/base/uct_iface.h>
}

#include <deque>
#include <utility>
#include <vector>

namespace pxn {
namespace uct {
class Ep;
class Hub;
} // namespace uct
} // namespace pxn

typedef struct uct_pxn_iface_config {
    uct_iface_config_t super;
} uct_pxn_iface_config_t;

/* Standard layout, allocated by UCX; C++ state lives behind pointers. */
typedef struct uct_pxn_iface {
    uct_base_iface_t            super;
    pxn::uct::Hub              *hub;
    std::vector<pxn::uct::Ep*> *eps;
    /* eps that progress must visit (Ep::want_progress); all of them when a
     * lane failed (lane_failures changed) and every 256th call */
    std::vector<pxn::uct::Ep*> *active;
    uint64_t                    lane_failures;
    unsigned                    rounds;
    /* iface flushes waiting for every ep to be idle */
    std::deque<uct_completion_t*> *flushes;
    /* pxn's counters as a UCS statistics node "pxn" under the iface's (UCX
     * built with --enable-stats only): copied from the control file at most
     * every 100 ms by progress, and when the iface closes. */
    UCS_STATS_NODE_DECLARE(stats)
    ucs_time_t                  stats_next;
} uct_pxn_iface_t;

extern ucs_config_field_t uct_pxn_iface_config_table[];

ucs_status_t uct_pxn_query_devices(uct_md_h md,
                                   uct_tl_device_resource_t **devices_p,
                                   unsigned *num_devices_p) noexcept;

/* Whether this iface reaches the peer iface of `dev_addr`: a home device of
 * another rail (or node) that a relay of this node reaches. */
int uct_pxn_iface_is_reachable(const uct_iface_h tl_iface,
                               const uct_device_addr_t *dev_addr,
                               const uct_iface_addr_t *iface_addr) noexcept;

UCS_CLASS_DECLARE(uct_pxn_iface_t, uct_md_h, uct_worker_h,
                  const uct_iface_params_t*, const uct_iface_config_t*);

#endif
