/*
 * pxn's counters as UCX shows them for an iface: its statistics node (UCS
 * statistics, builds with --enable-stats) and its files under <iface>/pxn/
 * in UCX's VFS (ucx_vfs): the relay counters of the iface's home rail, the
 * process's sender counters, the age of each one's last completion, and
 * the iface's rail, home device and inner transport. Values are read live
 * from the control files (Hub), never cached here.
 */
#ifndef PXN_UCT_PXN_IFACE_COUNTERS_H_
#define PXN_UCT_PXN_IFACE_COUNTERS_H_

#include "pxn_iface.h"

#ifdef ENABLE_STATS
/* The class of the iface's statistics node: the VFS names with '_'. */
ucs_stats_class_t *uct_pxn_stats_class_get();
#endif

/* Control path: the counters into the iface's statistics node (no-op
 * without statistics, a node or a hub). */
void uct_pxn_iface_stats_update(uct_pxn_iface_t *iface);

/* The iface's files under <iface>/pxn/; existing ones are kept
 * (UCS_ERR_ALREADY_EXISTS), so it may run on every VFS refresh. */
void uct_pxn_iface_vfs_add(uct_iface_h tl_iface, pxn::uct::Hub *hub) noexcept;

#endif
