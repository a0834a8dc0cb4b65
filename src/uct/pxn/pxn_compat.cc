#include "pxn_compat.h"

#include "pxn_cuda.h"
#include "pxn_entry.h"
#include "pxn_ep.h"
#include "pxn_iface.h"
#include "pxn_md.h"

extern "C" {
#include <ucs/sys/string.h>
#include <ucs/type/param.h>
}

#include <cstring>

/* UCX's own "unsupported" op for an op pxn does not have, of any
 * signature (through void(*)(), the one cast GCC does not warn about). */
template <typename Func> static Func uct_pxn_unsupported()
{
    return reinterpret_cast<Func>(
            reinterpret_cast<void(*)()>(ucs_empty_function_return_unsupported));
}

/* --- md --------------------------------------------------------------- */

/* What a pxn md can do is what its registering inner md can, less
 * allocation, rkey_ptr and exported keys: pxn registers, and its packed
 * rkey is the inner one behind a 2-byte length. */
static constexpr uint64_t kPxnMdFlagsKept =
        UCT_MD_FLAG_REG | UCT_MD_FLAG_NEED_MEMH | UCT_MD_FLAG_NEED_RKEY |
        UCT_MD_FLAG_INVALIDATE
#ifdef PXN_UCX_MD_FLAG_INVALIDATE_RMA
        | UCT_MD_FLAG_INVALIDATE_RMA | UCT_MD_FLAG_INVALIDATE_AMO |
        UCT_MD_FLAG_REG_DMABUF
#endif
        ;

#ifndef PXN_UCX_MD_ATTR_V2
/* UCP 1.13 asks every md that detects memory types (detect_memory_type, an
 * op pxn implements; pxn_md.cc): pxn recognises GPU pointers itself. */
static uint64_t uct_pxn_md_detect_mem_types()
{
    return pxn::uct::cuda_available() ? UCS_BIT(UCS_MEMORY_TYPE_CUDA) : 0;
}
#endif

/* An inner md that registers nothing (its peers reach memory without a
 * key: tcp and cma from UCX 1.14/1.15 on): pxn "registers" the memory that
 * md's transport reaches, with nothing to record. Its invalidation flags
 * stay what the inner md claims without a registration (cma's
 * UCX_CMA_MEMORY_INVALIDATE); a deregistration asked to invalidate
 * completes at once (pxn_md.cc), as it does where the inner md is used
 * alone (UCP then has no registration of it to invalidate). */
static void uct_pxn_md_query_access_only(uint64_t *flags, uint64_t *reg_mem_types,
                                         uint64_t access_mem_types)
{
    *flags         &= ~(UCT_MD_FLAG_NEED_MEMH
#ifdef PXN_UCX_MD_FLAG_INVALIDATE_RMA
                        | UCT_MD_FLAG_REG_DMABUF
#endif
                        );
    *reg_mem_types  = access_mem_types;
}

static uct_md_h uct_pxn_md_reg_md(uct_md_h tl_md)
{
    return ucs_derived_of(tl_md, uct_pxn_md_t)->reg->md();
}

#ifdef PXN_UCX_MD_ATTR_V2
static ucs_status_t uct_pxn_md_query(uct_md_h tl_md, uct_md_attr_v2_t *attr) noexcept
{
    uct_md_h inner      = uct_pxn_md_reg_md(tl_md);
    ucs_status_t status = inner->ops->query(inner, attr);
    if (status != UCS_OK) {
        return status;
    }
    if (!(attr->flags & UCT_MD_FLAG_REG)) {
        uct_pxn_md_query_access_only(&attr->flags, &attr->reg_mem_types,
                                     attr->access_mem_types);
        /* Nothing to pin and nothing to go stale: such a registration is
         * non-blocking and may stay in UCP's registration cache (which UCP
         * asserts of every md it registers with on the fly, rendezvous). */
        attr->reg_nonblock_mem_types = attr->reg_mem_types;
        attr->cache_mem_types        = attr->reg_mem_types;
        attr->dmabuf_mem_types       = 0;
    }
    attr->flags                     = (attr->flags & kPxnMdFlagsKept) |
                                      UCT_MD_FLAG_REG | UCT_MD_FLAG_NEED_RKEY;
    attr->max_alloc                 = 0;
    attr->alloc_mem_types           = 0;
    attr->gva_mem_types             = 0;
    attr->exported_mkey_packed_size = 0;
    attr->rkey_packed_size         += kPxnRkeyHeader;
    /* UCP detects memory types with mem_query, which pxn leaves to
     * cuda_copy (it knows the GPU's system device, which pxn would not
     * report: UCX_MAX_HCA_PER_GPU and the lane distances need it). */
    attr->detect_mem_types          = 0;
    ucs_strncpy_zero(attr->component_name, "pxn", sizeof(attr->component_name));
    return UCS_OK;
}
#else
static ucs_status_t uct_pxn_md_query(uct_md_h tl_md, uct_md_attr_t *attr) noexcept
{
    const uct_md_attr_t &inner = ucs_derived_of(tl_md, uct_pxn_md_t)->reg->attr();

    *attr                      = inner;
    if (!(inner.cap.flags & UCT_MD_FLAG_REG)) {
        uct_pxn_md_query_access_only(&attr->cap.flags, &attr->cap.reg_mem_types,
                                     inner.cap.access_mem_types);
    }
    attr->cap.flags            = (attr->cap.flags & kPxnMdFlagsKept) |
                                 UCT_MD_FLAG_REG | UCT_MD_FLAG_NEED_RKEY;
    attr->cap.max_alloc        = 0;
    attr->cap.alloc_mem_types  = 0;
    attr->rkey_packed_size     = kPxnRkeyHeader + inner.rkey_packed_size;
    attr->cap.detect_mem_types = uct_pxn_md_detect_mem_types();
    ucs_strncpy_zero(attr->component_name, "pxn", sizeof(attr->component_name));
    return UCS_OK;
}
#endif

#ifdef PXN_UCX_MEM_ALLOC_SYS_DEV
static ucs_status_t uct_pxn_md_mem_alloc(uct_md_h, size_t*, void**,
                                         ucs_memory_type_t, ucs_sys_device_t,
                                         unsigned, const char*, uct_mem_h*) noexcept
#else
static ucs_status_t uct_pxn_md_mem_alloc(uct_md_h, size_t*, void**,
                                         ucs_memory_type_t, unsigned,
                                         const char*, uct_mem_h*) noexcept
#endif
{
    return UCS_ERR_UNSUPPORTED;
}

/* The memh is the inner md's: the relay never sees it, and the inner md
 * owns its lifetime (and its registration parameters: dmabuf, flags). */
#ifdef PXN_UCX_MEM_REG_PARAMS
static ucs_status_t uct_pxn_md_mem_reg(uct_md_h tl_md, void *address,
                                       size_t length,
                                       const uct_md_mem_reg_params_t *params,
                                       uct_mem_h *memh_p) noexcept
{
    uct_md_h inner = uct_pxn_md_reg_md(tl_md);
    uct_pxn_entry("uct_md_mem_reg", [&] { /* a hint: the registration */
        uct_pxn_md_notice_registration(address); /* goes on without it */
    });
    if (!uct_pxn_md_inner_registers(tl_md)) {
        *memh_p = kPxnMemhNoInner;
        return UCS_OK;
    }
    return inner->ops->mem_reg(inner, address, length, params, memh_p);
}
#else
static ucs_status_t uct_pxn_md_mem_reg(uct_md_h tl_md, void *address,
                                       size_t length, unsigned flags,
                                       uct_mem_h *memh_p) noexcept
{
    uct_md_h inner = uct_pxn_md_reg_md(tl_md);
    uct_pxn_entry("uct_md_mem_reg", [&] { /* a hint: the registration */
        uct_pxn_md_notice_registration(address); /* goes on without it */
    });
    if (!uct_pxn_md_inner_registers(tl_md)) {
        *memh_p = kPxnMemhNoInner;
        return UCS_OK;
    }
    return inner->ops->mem_reg(inner, address, length, flags, memh_p);
}
#endif

#ifdef PXN_UCX_MEM_QUERY_V2
static ucs_status_t uct_pxn_md_mem_query(uct_md_h, const void*, size_t,
                                         uct_md_mem_attr_v2_t*) noexcept
#else
static ucs_status_t uct_pxn_md_mem_query(uct_md_h, const void*, size_t,
                                         uct_md_mem_attr_t*) noexcept
#endif
{
    return UCS_ERR_UNSUPPORTED;
}

/* Packed rkey: u16 length (little-endian) | the inner md's packed rkey
 * (none for a registration that recorded nothing). */
static uint8_t *uct_pxn_md_pack_header(uct_md_h tl_md, uct_mem_h memh,
                                       void *buffer)
{
    auto *out          = static_cast<uint8_t*>(buffer);
    const size_t inner = (memh == kPxnMemhNoInner) ? 0 :
                         ucs_derived_of(tl_md, uct_pxn_md_t)->reg->attr()
                                 .rkey_packed_size;
    out[0] = static_cast<uint8_t>(inner);
    out[1] = static_cast<uint8_t>(inner >> 8);
    return out + kPxnRkeyHeader;
}

#ifdef PXN_UCX_MKEY_PACK_ADDRESS
static ucs_status_t uct_pxn_md_mkey_pack(uct_md_h tl_md, uct_mem_h memh,
                                         void *address, size_t length,
                                         const uct_md_mkey_pack_params_t *params,
                                         void *buffer) noexcept
{
    uct_md_h inner = uct_pxn_md_reg_md(tl_md);
    uint8_t *packed = uct_pxn_md_pack_header(tl_md, memh, buffer);
    if (memh == kPxnMemhNoInner) {
        return UCS_OK; /* an empty inner key */
    }
    return inner->ops->mkey_pack(inner, memh, address, length, params, packed);
}
#else
static ucs_status_t uct_pxn_md_mkey_pack(uct_md_h tl_md, uct_mem_h memh,
                                         const uct_md_mkey_pack_params_t *params,
                                         void *buffer) noexcept
{
    uct_md_h inner = uct_pxn_md_reg_md(tl_md);
    uint8_t *packed = uct_pxn_md_pack_header(tl_md, memh, buffer);
    if (memh == kPxnMemhNoInner) {
        return UCS_OK; /* an empty inner key */
    }
    return inner->ops->mkey_pack(inner, memh, params, packed);
}
#endif

#ifdef PXN_UCX_SOCKADDR_ACCESSIBLE
static int uct_pxn_md_is_sockaddr_accessible(uct_md_h, const ucs_sock_addr_t*,
                                             uct_sockaddr_accessibility_t) noexcept
{
    return 0;
}
#endif

void uct_pxn_compat_md_ops(uct_md_ops_t *ops)
{
    ops->query     = uct_pxn_md_query;
    ops->mem_alloc = uct_pxn_md_mem_alloc;
    ops->mem_reg   = uct_pxn_md_mem_reg;
    ops->mem_query = uct_pxn_md_mem_query;
    ops->mkey_pack = uct_pxn_md_mkey_pack;
#ifdef PXN_UCX_SOCKADDR_ACCESSIBLE
    ops->is_sockaddr_accessible = uct_pxn_md_is_sockaddr_accessible;
#endif
    /* pxn exports no keys and has no device memory elements: UCP does not
     * call these without the md flags that say otherwise, but a NULL op is
     * a crash where a release calls it unconditionally. */
#ifdef PXN_UCX_MEM_ATTACH
    ops->mem_attach = uct_pxn_unsupported<uct_md_mem_attach_func_t>();
#endif
#ifdef PXN_UCX_MEM_ELEM_PACK
    ops->mem_elem_pack = uct_pxn_unsupported<uct_md_mem_elem_pack_func_t>();
#endif
}

/* --- component --------------------------------------------------------- */

ucs_status_t uct_pxn_compat_rkey_ptr(uct_component_t*, uct_rkey_t, void*,
                                     uint64_t, void**) noexcept
{
    return UCS_ERR_UNSUPPORTED;
}

#ifdef PXN_UCX_RKEY_UNPACK_PARAMS
ucs_status_t uct_pxn_compat_rkey_unpack(uct_component_t *component,
                                        const void *rkey_buffer,
                                        const uct_rkey_unpack_params_t*,
                                        uct_rkey_t *rkey_p,
                                        void **handle_p) noexcept
{
    /* The parameters (the memory's system device and type) matter to the
     * relay's inner unpack, which sees the packed inner key only. */
    return uct_pxn_rkey_unpack(component, rkey_buffer, rkey_p, handle_p);
}
#endif

#ifdef PXN_UCX_RKEY_COMPARE
ucs_status_t uct_pxn_compat_rkey_compare(uct_component_t*, uct_rkey_t rkey1,
                                         uct_rkey_t rkey2,
                                         const uct_rkey_compare_params_t *params,
                                         int *result) noexcept
{
    if ((params->field_mask != 0) || (result == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    *result = uct_pxn_rkey_order(rkey1, rkey2);
    return UCS_OK;
}
#endif

/* --- iface internal ops ------------------------------------------------ */

#ifdef PXN_UCX_EP_INVALIDATE_PARAMS
static ucs_status_t uct_pxn_ep_invalidate(uct_ep_h,
                                          const uct_ep_invalidate_params_t*) noexcept
#else
static ucs_status_t uct_pxn_ep_invalidate(uct_ep_h, unsigned) noexcept
#endif
{
    return UCS_ERR_UNSUPPORTED;
}

#ifdef PXN_UCX_IFACE_IS_REACHABLE_V2
/* pxn reaches peers of other nodes on other rails, through a relay: never
 * the same device (UCP's intra-node test), never without a device
 * address. */
static int uct_pxn_iface_is_reachable_v2(const uct_iface_h tl_iface,
                                         const uct_iface_is_reachable_params_t *params) noexcept
{
    if (!uct_iface_is_reachable_params_valid(
                params, UCT_IFACE_IS_REACHABLE_FIELD_DEVICE_ADDR)) {
        return 0;
    }
    const uct_iface_reachability_scope_t scope = UCS_PARAM_VALUE(
            UCT_IFACE_IS_REACHABLE_FIELD, params, scope, SCOPE,
            UCT_IFACE_REACHABILITY_SCOPE_NETWORK);
    if (scope == UCT_IFACE_REACHABILITY_SCOPE_DEVICE) {
        uct_iface_fill_info_str_buf(params, "pxn reaches other nodes only");
        return 0;
    }
    const uct_iface_addr_t *iface_addr = UCS_PARAM_VALUE(
            UCT_IFACE_IS_REACHABLE_FIELD, params, iface_addr, IFACE_ADDR,
            nullptr);
    if (!uct_pxn_iface_is_reachable(tl_iface, params->device_addr, iface_addr)) {
        uct_iface_fill_info_str_buf(params, "not a peer of another rail "
                                            "that a relay of this node reaches");
        return 0;
    }
    return 1;
}
#endif

#ifdef PXN_UCX_EP_CONNECT_TO_EP_V2
static ucs_status_t uct_pxn_ep_connect_to_ep_v2(uct_ep_h ep,
                                                const uct_device_addr_t *device_addr,
                                                const uct_ep_addr_t *ep_addr,
                                                const uct_ep_connect_to_ep_params_t*) noexcept
{
    return uct_pxn_ep_connect_to_ep(ep, device_addr, ep_addr);
}
#endif

#ifdef PXN_UCX_EP_IS_CONNECTED
static int uct_pxn_ep_is_connected_v2(const uct_ep_h ep,
                                      const uct_ep_is_connected_params_t *params) noexcept
{
    const uint64_t mask = params->field_mask;
    return uct_pxn_ep_is_connected(
            ep,
            (mask & UCT_EP_IS_CONNECTED_FIELD_DEVICE_ADDR) ? params->device_addr :
                                                             nullptr,
            (mask & UCT_EP_IS_CONNECTED_FIELD_IFACE_ADDR) ? params->iface_addr :
                                                            nullptr,
            (mask & UCT_EP_IS_CONNECTED_FIELD_EP_ADDR) ? params->ep_addr :
                                                         nullptr);
}
#endif

#if defined(PXN_UCX_IFACE_QUERY_V2) && defined(PXN_UCX_EP_PUT_SGL_ZCOPY)
/* The v2 attributes UCP's SGL protocols look for (1.22: put; master: get
 * too, where the inner transport has gets); the rest as UCT's base. */
static ucs_status_t uct_pxn_iface_query_v2(uct_iface_h tl_iface,
                                           uct_iface_attr_v2_t *attr) noexcept
{
    const ucs_status_t status = uct_iface_base_query_v2(tl_iface, attr);
    const pxn::uct::Hub *hub  = ucs_derived_of(tl_iface, uct_pxn_iface_t)->hub;
    if ((status != UCS_OK) || (hub == nullptr)) {
        return status; /* dormant: nothing */
    }
    const size_t max = pxn::uct::SendRequest::kMaxScatter;
    if (attr->field_mask & UCT_IFACE_ATTR_FIELD_CAP_FLAGS) {
        attr->cap.flags |= UCT_IFACE_FLAG_V2_PUT_SGL_ZCOPY;
#ifdef PXN_UCX_EP_GET_SGL_ZCOPY
        if (hub->net().has_get()) {
            attr->cap.flags |= UCT_IFACE_FLAG_V2_GET_SGL_ZCOPY;
        }
#endif
    }
    if (attr->field_mask & UCT_IFACE_ATTR_FIELD_MAX_PUT_SGL_ZCOPY_COUNT) {
        attr->max_put_sgl_zcopy_count = max;
    }
#ifdef PXN_UCX_EP_GET_SGL_ZCOPY
    if (attr->field_mask & UCT_IFACE_ATTR_FIELD_MAX_GET_SGL_ZCOPY_COUNT) {
        attr->max_get_sgl_zcopy_count = hub->net().has_get() ? max : 0;
    }
#endif
    return UCS_OK;
}
#endif

void uct_pxn_compat_sgl_limits(uct_iface_h iface, size_t *max_put,
                               size_t *max_get)
{
    *max_put = 0;
    *max_get = 0;
#if defined(PXN_UCX_IFACE_QUERY_V2) && defined(PXN_UCX_EP_PUT_SGL_ZCOPY)
    uct_iface_attr_v2_t attr = {};
    attr.field_mask = UCT_IFACE_ATTR_FIELD_CAP_FLAGS |
                      UCT_IFACE_ATTR_FIELD_MAX_PUT_SGL_ZCOPY_COUNT
#ifdef PXN_UCX_EP_GET_SGL_ZCOPY
                      | UCT_IFACE_ATTR_FIELD_MAX_GET_SGL_ZCOPY_COUNT
#endif
                      ;
    if (uct_iface_query_v2(iface, &attr) != UCS_OK) {
        return;
    }
    if (attr.cap.flags & UCT_IFACE_FLAG_V2_PUT_SGL_ZCOPY) {
        *max_put = attr.max_put_sgl_zcopy_count;
    }
#ifdef PXN_UCX_EP_GET_SGL_ZCOPY
    if (attr.cap.flags & UCT_IFACE_FLAG_V2_GET_SGL_ZCOPY) {
        *max_get = attr.max_get_sgl_zcopy_count;
    }
#endif
#else
    (void)iface;
#endif
}

ucs_status_t uct_pxn_compat_sgl_zcopy(bool get, uct_ep_h ep,
                                      void *const *buffers,
                                      const size_t *lengths,
                                      const uct_mem_h *memhs,
                                      const uint64_t *remote_addrs,
                                      const uct_rkey_t *rkeys, size_t count,
                                      uct_completion_t *comp)
{
#ifdef PXN_UCX_EP_GET_SGL_ZCOPY
    if (get) {
        return uct_ep_get_sgl_zcopy(ep, buffers, lengths, memhs, remote_addrs,
                                    rkeys, nullptr, nullptr, count, comp);
    }
#endif
#ifdef PXN_UCX_EP_PUT_SGL_ZCOPY
    if (!get) {
        return uct_ep_put_sgl_zcopy(ep, buffers, lengths, memhs, remote_addrs,
                                    rkeys, nullptr, nullptr, count, comp);
    }
#endif
    (void)get; (void)ep; (void)buffers; (void)lengths; (void)memhs;
    (void)remote_addrs; (void)rkeys; (void)count; (void)comp;
    return UCS_ERR_UNSUPPORTED;
}

void uct_pxn_compat_iface_internal_ops(uct_iface_internal_ops_t *ops)
{
    ops->ep_invalidate = uct_pxn_ep_invalidate;
#if defined(PXN_UCX_IFACE_QUERY_V2) && defined(PXN_UCX_EP_PUT_SGL_ZCOPY)
    ops->iface_query_v2 = uct_pxn_iface_query_v2;
#elif defined(PXN_UCX_IFACE_QUERY_V2)
    ops->iface_query_v2 = uct_iface_base_query_v2;
#endif
#ifdef PXN_UCX_IFACE_IS_REACHABLE_V2
    ops->iface_is_reachable_v2 = uct_pxn_iface_is_reachable_v2;
#endif
#ifdef PXN_UCX_EP_CONNECT_TO_EP_V2
    ops->ep_connect_to_ep_v2 = uct_pxn_ep_connect_to_ep_v2;
#endif
#ifdef PXN_UCX_EP_IS_CONNECTED
    ops->ep_is_connected = uct_pxn_ep_is_connected_v2;
#endif
#ifdef PXN_UCX_EP_PUT_SGL_ZCOPY
    ops->ep_put_sgl_zcopy = uct_pxn_ep_put_sgl_zcopy;
#endif
#ifdef PXN_UCX_EP_GET_SGL_ZCOPY
    ops->ep_get_sgl_zcopy = uct_pxn_ep_get_sgl_zcopy;
#endif
    /* Device endpoints, memory elements: pxn has none. */
#ifdef PXN_UCX_EP_GET_DEVICE_EP
    ops->ep_get_device_ep = uct_pxn_unsupported<uct_ep_get_device_ep_func_t>();
#endif
#ifdef PXN_UCX_EP_OUTSTANDING_PURGE
    ops->ep_outstanding_purge = uct_pxn_unsupported<uct_ep_outstanding_purge_func_t>();
#endif
#ifdef PXN_UCX_IFACE_MEM_ELEMENT_PACK
    ops->iface_mem_element_pack = uct_pxn_unsupported<uct_iface_mem_element_pack_func_t>();
#endif
}
