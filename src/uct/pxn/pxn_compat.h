/*
 * Where pxn meets UCX's internal UCT API, which changes between releases:
 * the md ops, the component's rkey ops and the iface's internal ops, in the
 * shape of the UCX this module is compiled against. configure probes that
 * UCX's headers and passes what it found as -DPXN_UCX_<NAME>=1; every
 * #if on those names in the transport lives here and in pxn_compat.cc,
 * nowhere else (test programs use them to test what this UCX has).
 *
 * Everything version-independent (what a registration, a packed rkey or a
 * reachability answer *is*) stays in pxn_md.cc, pxn_iface.cc and
 * pxn_ep.cc; the functions here only adapt signatures and fill fields that
 * exist in one release and not in another.
 */
#ifndef UCT_PXN_COMPAT_H_
#define UCT_PXN_COMPAT_H_

extern "C" {
#include <uct/base/uct_component.h>
#include <uct/base/uct_iface.h>
#include <uct/base/uct_md.h>
}

/* UCT_IFACE_FLAG_INTER_NODE (UCX 1.18 on): without it, UCP takes an
 * endpoint with a pxn lane for an intra-node one, and leaves pxn out of
 * network-only worker addresses. */
#ifdef PXN_UCX_IFACE_FLAG_INTER_NODE
#define UCT_PXN_IFACE_FLAG_INTER_NODE UCT_IFACE_FLAG_INTER_NODE
#else
#define UCT_PXN_IFACE_FLAG_INTER_NODE 0
#endif

/* The md's version-specific ops (query, mem_alloc, mem_reg, mem_query,
 * mkey_pack and the ops only some releases have); the caller sets the
 * others. */
void uct_pxn_compat_md_ops(uct_md_ops_t *ops);

/* The iface's internal ops that only some releases have (v2 reachability,
 * ep-to-ep v2 connection, ep_is_connected, iface_query_v2, device eps,
 * ...) and ep_invalidate, whose signature changed. */
void uct_pxn_compat_iface_internal_ops(uct_iface_internal_ops_t *ops);

/* An inner iface's scatter-gather operations (put_sgl_zcopy from UCX 1.22,
 * get_sgl_zcopy from master): the most elements of one (0: it has none,
 * or this UCX does not know them), and the operation itself
 * (UCS_ERR_UNSUPPORTED where this UCX has none). */
void uct_pxn_compat_sgl_limits(uct_iface_h iface, size_t *max_put,
                               size_t *max_get);
ucs_status_t uct_pxn_compat_sgl_zcopy(bool get, uct_ep_h ep,
                                      void *const *buffers,
                                      const size_t *lengths,
                                      const uct_mem_h *memhs,
                                      const uint64_t *remote_addrs,
                                      const uct_rkey_t *rkeys, size_t count,
                                      uct_completion_t *comp);

/* The component's rkey_unpack, and rkey_compare where the component has
 * it, as the positional initializer of uct_component_t lists them between
 * rkey_ptr and md_config. */
ucs_status_t uct_pxn_compat_rkey_ptr(uct_component_t *component, uct_rkey_t rkey,
                                     void *handle, uint64_t remote_addr,
                                     void **local_addr_p) noexcept;
#ifdef PXN_UCX_RKEY_UNPACK_PARAMS
ucs_status_t uct_pxn_compat_rkey_unpack(uct_component_t *component,
                                        const void *rkey_buffer,
                                        const uct_rkey_unpack_params_t *params,
                                        uct_rkey_t *rkey_p,
                                        void **handle_p) noexcept;
#define UCT_PXN_COMPONENT_RKEY_UNPACK uct_pxn_compat_rkey_unpack
#else
#define UCT_PXN_COMPONENT_RKEY_UNPACK uct_pxn_rkey_unpack
#endif
#ifdef PXN_UCX_RKEY_COMPARE
ucs_status_t uct_pxn_compat_rkey_compare(uct_component_t *component,
                                         uct_rkey_t rkey1, uct_rkey_t rkey2,
                                         const uct_rkey_compare_params_t *params,
                                         int *result) noexcept;
#define UCT_PXN_COMPONENT_RKEY_OPS \
    UCT_PXN_COMPONENT_RKEY_UNPACK, uct_pxn_compat_rkey_ptr, \
    uct_pxn_rkey_release, uct_pxn_compat_rkey_compare
#else
#define UCT_PXN_COMPONENT_RKEY_OPS \
    UCT_PXN_COMPONENT_RKEY_UNPACK, uct_pxn_compat_rkey_ptr, uct_pxn_rkey_release
#endif

#endif
