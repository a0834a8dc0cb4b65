#include "peer_uct.h"

#include "peer_process.h"

#include <cstdio>
#include <cstring>
#include <sched.h>
#include <unistd.h>
#include <vector>

namespace pxn_tools {

int g_yield = 0;

void progress(Peer &p)
{
    if ((uct_worker_progress(p.worker) == 0) && (g_yield != 0)) {
        if (g_yield == 1) {
            sched_yield();
        } else {
            usleep(20);
        }
    }
}

/* A new connection replaces the ep (a failed one stays failed). */
void destroy_ep(Peer &p)
{
    if (p.ep != nullptr) {
        uct_ep_destroy(p.ep);
        p.ep = nullptr;
    }
}

/* The ep stays failed: the user destroys it (a new connect does). */
static ucs_status_t ep_error(void *arg, uct_ep_h, ucs_status_t status)
{
    auto *p = static_cast<Peer*>(arg);
    ++p->ep_errors;
    p->last_ep_error = status;
    return UCS_OK;
}

static int fail(const char *what, ucs_status_t status)
{
    fprintf(stderr, "ucx_pxn_peer: %s: %s\n", what, ucs_status_string(status));
    return 1;
}

int open_peer(Peer &p, const char *md_name, const char *tl_name, const char *dev)
{
    p.md_name = md_name;
    p.tl_name = tl_name;
    p.dev     = dev;
    uct_component_h *components;
    unsigned count;
    ucs_status_t status = uct_query_components(&components, &count);
    if (status != UCS_OK) {
        return fail("uct_query_components", status);
    }
    for (unsigned i = 0; (i < count) && (p.md == nullptr); ++i) {
        uct_component_attr_t attr = {};
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
        uct_component_query(components[i], &attr);
        std::vector<uct_md_resource_desc_t> mds(attr.md_resource_count);
        attr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        attr.md_resources = mds.data();
        uct_component_query(components[i], &attr);
        for (const auto &m : mds) {
            if (strcmp(m.md_name, md_name) != 0) {
                continue;
            }
            uct_md_config_t *config;
            uct_md_config_read(components[i], NULL, NULL, &config);
            status = uct_md_open(components[i], md_name, config, &p.md);
            uct_config_release(config);
            if (status != UCS_OK) {
                return fail("uct_md_open", status);
            }
            p.component = components[i];
        }
    }
    uct_release_component_list(components);
    if (p.md == nullptr) {
        fprintf(stderr, "ucx_pxn_peer: no md named %s\n", md_name);
        return 1;
    }
    uct_md_query(p.md, &p.md_attr);

    status = ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &p.async);
    if (status == UCS_OK) {
        status = uct_worker_create(p.async, UCS_THREAD_MODE_SINGLE, &p.worker);
    }
    if (status != UCS_OK) {
        return fail("worker", status);
    }
    status = open_iface(p, &p.iface);
    if (status != UCS_OK) {
        return fail("uct_iface_open", status);
    }
    uct_iface_query(p.iface, &p.attr);
    uct_iface_progress_enable(p.iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    return 0;
}

ucs_status_t open_iface(Peer &p, uct_iface_h *iface)
{
    const char *tl_name = p.tl_name.c_str(), *dev = p.dev.c_str();
    uct_iface_config_t *config;
    ucs_status_t status = uct_md_iface_config_read(p.md, tl_name, NULL, NULL,
                                                   &config);
    if (status != UCS_OK) {
        return status;
    }
    uct_iface_params_t params   = {};
    params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                  UCT_IFACE_PARAM_FIELD_DEVICE |
                                  UCT_IFACE_PARAM_FIELD_ERR_HANDLER |
                                  UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                                  UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.err_handler          = ep_error;
    params.err_handler_arg      = &p;
    params.err_handler_flags    = 0; /* pxn calls it from progress */
    params.mode.device.tl_name  = tl_name;
    params.mode.device.dev_name = dev;
    status = uct_iface_open(p.md, p.worker, &params, config, iface);
    uct_config_release(config);
    return status;
}

void close_peer(Peer &p)
{
    for (auto &entry : p.rkeys) {
        if (entry.second.rkey != 0) {
            uct_rkey_release(p.component, &entry.second);
        }
    }
    p.rkeys.clear();
    destroy_ep(p);
    for (auto &entry : p.buffers) {
        entry.second.release(p.md);
    }
    for (uct_iface_h iface : {p.iface, p.spare}) {
        if (iface != nullptr) { /* "am close" closes the first */
            uct_iface_close(iface);
        }
    }
    uct_worker_destroy(p.worker);
    ucs_async_context_destroy(p.async);
    uct_md_close(p.md);
}

bool   g_posting = false;
size_t g_inside  = 0;

void op_done(uct_completion_t *comp)
{
    g_inside += g_posting;
    ++*ucs_container_of(comp, Op, comp)->done;
}

size_t completions_inside_posting_calls()
{
    return g_inside;
}

uct_rkey_t unpack_rkey(Peer &p, const std::string &text, ucs_status_t *status)
{
    auto it = p.rkeys.find(text);
    if (it != p.rkeys.end()) {
        return it->second.rkey;
    }
    std::vector<uint8_t> packed = unhex(text);
    uct_rkey_bundle_t bundle    = {};
    if (!packed.empty()) {
        const ucs_status_t s = uct_rkey_unpack(p.component, packed.data(),
                                               &bundle);
        if (status != nullptr) {
            *status = s;
        }
        if (s != UCS_OK) {
            return UCT_INVALID_RKEY;
        }
    }
    p.rkeys.emplace(text, bundle);
    return bundle.rkey;
}

ucs_status_t wait_connected(Peer &p)
{
    ucs_status_t status;
    while (((status = uct_ep_flush(p.ep, 0, nullptr)) == UCS_ERR_NO_RESOURCE) ||
           (status == UCS_INPROGRESS)) {
        progress(p);
    }
    return status;
}

} // namespace pxn_tools
