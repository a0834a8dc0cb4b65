/*
 * A list of blocks moved by one UCP operation of UCP's SGL datatype
 * (ucp_dt_make_sgl(), UCX 1.22 on), as NIXL's UCX backend posts a
 * descriptor list (ucp_rma_check --sgl, ucx_pxn_kv_bench): element i is
 * buffers[i], lengths[i] bytes registered as memhs[i], to or from
 * remote[i] under rkeys[i]. UCP copies the two descriptors, not the arrays:
 * the list must stay unchanged until the operation completes.
 *
 * post() exists where this UCX has the datatype (PXN_APPS_UCP_SGL defined);
 * the list itself everywhere. UCX 1.22.0 has SGL puts only: its
 * ucp_get_nbx takes the rkey of the call, not of the list, so a get is
 * for a UCX that has them (not 1.22.0, not master of 2026-08-21).
 */
#ifndef PXN_APPS_UCP_SGL_H_
#define PXN_APPS_UCP_SGL_H_

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#ifdef ucp_dt_make_sgl
#define PXN_APPS_UCP_SGL 1
#endif

namespace pxn_tools {

struct UcpSglList {
    std::vector<void*>      buffers;
    std::vector<size_t>     lengths;
    std::vector<ucp_mem_h>  memhs;
    std::vector<uint64_t>   remote;
    std::vector<ucp_rkey_h> rkeys;

    void add(void *buffer, size_t length, ucp_mem_h memh, uint64_t remote_addr,
             ucp_rkey_h rkey)
    {
        buffers.push_back(buffer);
        lengths.push_back(length);
        memhs.push_back(memh);
        remote.push_back(remote_addr);
        rkeys.push_back(rkey);
    }

    size_t size() const { return buffers.size(); }

#ifdef PXN_APPS_UCP_SGL
    /* ucp_put_nbx (put) or ucp_get_nbx of the whole list; `param` brings
     * the callback, user data and memory type, the datatypes are added. */
    ucs_status_ptr_t post(ucp_ep_h ep, bool put, ucp_request_param_t param) const
    {
        ucp_dt_local_sgl_t l  = {};
        l.field_mask          = UCP_DT_LOCAL_SGL_FIELD_BUFFERS |
                                UCP_DT_LOCAL_SGL_FIELD_LENGTHS |
                                UCP_DT_LOCAL_SGL_FIELD_MEMHS;
        l.buffers             = buffers.data();
        l.lengths             = lengths.data();
        l.memhs               = memhs.data();
        ucp_dt_remote_sgl_t r = {};
        r.field_mask          = UCP_DT_REMOTE_SGL_FIELD_REMOTE_ADDRS |
                                UCP_DT_REMOTE_SGL_FIELD_LENGTHS |
                                UCP_DT_REMOTE_SGL_FIELD_RKEYS;
        r.remote_addrs        = remote.data();
        r.lengths             = lengths.data();
        r.rkeys               = rkeys.data();
        param.op_attr_mask   |= UCP_OP_ATTR_FIELD_DATATYPE |
                                UCP_OP_ATTR_FIELD_REMOTE_DATATYPE |
                                UCP_OP_ATTR_FIELD_REMOTE | UCP_OP_ATTR_FIELD_REMOTE_COUNT;
        param.datatype        = ucp_dt_make_sgl();
        param.remote_datatype = ucp_dt_make_sgl();
        param.remote          = &r;
        param.remote_count    = size();
        return put ? ucp_put_nbx(ep, &l, size(), UCP_REMOTE_ADDR_INVALID, UCP_RKEY_INVALID,
                                 &param) :
                     ucp_get_nbx(ep, &l, size(), UCP_REMOTE_ADDR_INVALID, UCP_RKEY_INVALID,
                                 &param);
    }
#endif
};

} // namespace pxn_tools

#endif
