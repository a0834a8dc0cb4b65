#include "pxn_md.h"

extern "C" {
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
}

#include <memory>
#include <new>

/* Every UCX_PXN_* variable. Defaults here are the documented defaults. */
ucs_config_field_t uct_pxn_md_config_table[] = {
    {"", "", NULL, ucs_offsetof(uct_pxn_md_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_md_config_table)},

    {"GROUP", "default",
     "Name of the job on this node: processes that relay for each other use the\n"
     "same group. 1-64 characters of [A-Za-z0-9_.-]. Selects the registry\n"
     "directory /dev/shm/ucx-pxn-<uid>-<group>.",
     ucs_offsetof(uct_pxn_md_config_t, group), UCS_CONFIG_TYPE_STRING},

    {"NODE_ID", "",
     "Identity of this node within the group. Empty: derived from the host's\n"
     "boot id. Set it to emulate several nodes on one host.",
     ucs_offsetof(uct_pxn_md_config_t, node_id), UCS_CONFIG_TYPE_STRING},

    {"RAIL_MAP", "",
     "Canonical rail of each network device, as <device>:<rail>,... (for\n"
     "example mlx5_0:rail0,mlx5_1:rail1). Empty: every device is its own rail.\n"
     "Devices with a port suffix (mlx5_0:1) match their NIC.",
     ucs_offsetof(uct_pxn_md_config_t, rail_map), UCS_CONFIG_TYPE_STRING},

    {"NET_TLS", "rc_mlx5,rc_verbs,dc_mlx5,tcp",
     "Inner transports for the network hop, in order of preference: the first\n"
     "one available on the home device is used.",
     ucs_offsetof(uct_pxn_md_config_t, net_tls), UCS_CONFIG_TYPE_STRING_ARRAY},

    {"HOME_DEVICE", "",
     "Network device of this process's own rail, used by the relay for the\n"
     "network hop. Empty: the device the pxn interface is opened on.",
     ucs_offsetof(uct_pxn_md_config_t, home_device), UCS_CONFIG_TYPE_STRING},

    {"LANES", "7",
     "Inbound lanes of a relay: how many senders of this node can stage into\n"
     "it at once (one per other GPU of an 8-GPU node). 1..64.",
     ucs_offsetof(uct_pxn_md_config_t, lanes), UCS_CONFIG_TYPE_UINT},

    {"SLOTS", "18",
     "Staging slots per lane (K): pieces a sender may have in flight on one\n"
     "lane. 1..4096.",
     ucs_offsetof(uct_pxn_md_config_t, slots), UCS_CONFIG_TYPE_UINT},

    {"SLOT_SIZE", "8M",
     "Bytes per staging slot (S), the largest piece. The staging arena is\n"
     "LANES x SLOTS x SLOT_SIZE bytes (1008 MiB by default). 4K..1G, a\n"
     "multiple of 64.",
     ucs_offsetof(uct_pxn_md_config_t, slot_size), UCS_CONFIG_TYPE_MEMUNITS},

    {"MAX_PLAN", "4096",
     "Most segments one piece may carry. 1..65536.",
     ucs_offsetof(uct_pxn_md_config_t, max_plan), UCS_CONFIG_TYPE_UINT},

    {"INFLIGHT_DEPTH", "4",
     "Pieces a relay forwards at once over its network hop, over all lanes.\n"
     "1..64.",
     ucs_offsetof(uct_pxn_md_config_t, inflight_depth), UCS_CONFIG_TYPE_UINT},

    {"CREDIT_TIMEOUT", "1s",
     "How long an unpublished piece waits for ring credit before it falls\n"
     "back to a direct path (or fails where there is none).",
     ucs_offsetof(uct_pxn_md_config_t, credit_timeout), UCS_CONFIG_TYPE_TIME},

    {"HEARTBEAT_TIMEOUT", "3s",
     "A relay whose heartbeat is older than this is unhealthy: no new pieces\n"
     "are published to it and its published pieces fail.",
     ucs_offsetof(uct_pxn_md_config_t, heartbeat_timeout), UCS_CONFIG_TYPE_TIME},

    {"RELAY_SLICE", "0",
     "The relay splits each piece into network operations of at most this\n"
     "size. 0: split only where the inner transport requires it.",
     ucs_offsetof(uct_pxn_md_config_t, relay_slice), UCS_CONFIG_TYPE_MEMUNITS},

    {"RELAY_SLICE_MERGE", "4K",
     "A tail shorter than this is merged into the previous slice instead of\n"
     "being sent alone. Must be smaller than RELAY_SLICE.",
     ucs_offsetof(uct_pxn_md_config_t, relay_slice_merge),
     UCS_CONFIG_TYPE_MEMUNITS},

    {NULL}
};

pxn::Settings uct_pxn_md_settings(const uct_pxn_md_config_t *config)
{
    pxn::Settings s;
    s.group       = config->group;
    s.node_id     = config->node_id;
    s.rail_map    = config->rail_map;
    s.home_device = config->home_device;
    for (unsigned i = 0; i < config->net_tls.count; ++i) {
        s.net_tls.emplace_back(config->net_tls.names[i]);
    }
    s.geometry.lanes     = config->lanes;
    s.geometry.slots     = config->slots;
    s.geometry.slot_size = config->slot_size;
    s.geometry.max_plan  = config->max_plan;
    s.inflight_depth     = config->inflight_depth;
    s.credit_timeout     = config->credit_timeout;
    s.heartbeat_timeout  = config->heartbeat_timeout;
    s.relay_slice        = config->relay_slice;
    s.relay_slice_merge  = config->relay_slice_merge;
    return s;
}

static void uct_pxn_md_close(uct_md_h tl_md) noexcept
{
    uct_pxn_md_t *md = ucs_derived_of(tl_md, uct_pxn_md_t);

    delete md->settings;
    ucs_free(md);
}

static ucs_status_t uct_pxn_md_query(uct_md_h, uct_md_attr_t *attr) noexcept
{
    attr->cap.flags            = 0;
    attr->cap.max_alloc        = 0;
    attr->cap.max_reg          = 0;
    attr->cap.reg_mem_types    = 0;
    attr->cap.detect_mem_types = 0;
    attr->cap.alloc_mem_types  = 0;
    attr->cap.access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    attr->reg_cost             = ucs_linear_func_make(0, 0);
    attr->rkey_packed_size     = 0;
    memset(&attr->local_cpus, 0xff, sizeof(attr->local_cpus));
    return UCS_OK;
}

static ucs_status_t uct_pxn_md_mem_alloc(uct_md_h, size_t *, void **,
                                         ucs_memory_type_t, unsigned,
                                         const char *, uct_mem_h *) noexcept
{
    return UCS_ERR_UNSUPPORTED;
}

static ucs_status_t uct_pxn_md_mem_free(uct_md_h, uct_mem_h) noexcept
{
    return UCS_ERR_UNSUPPORTED;
}

static ucs_status_t uct_pxn_md_mem_advise(uct_md_h, uct_mem_h, void *, size_t,
                                          unsigned) noexcept
{
    return UCS_ERR_UNSUPPORTED;
}

static ucs_status_t uct_pxn_md_mem_reg(uct_md_h, void *, size_t, unsigned,
                                       uct_mem_h *) noexcept
{
    return UCS_ERR_UNSUPPORTED;
}

static ucs_status_t
uct_pxn_md_mem_dereg(uct_md_h, const uct_md_mem_dereg_params_t *) noexcept
{
    return UCS_ERR_UNSUPPORTED;
}

static ucs_status_t uct_pxn_md_mem_query(uct_md_h, const void *, size_t,
                                         uct_md_mem_attr_t *) noexcept
{
    return UCS_ERR_UNSUPPORTED;
}

static ucs_status_t uct_pxn_md_mkey_pack(uct_md_h, uct_mem_h,
                                         const uct_md_mkey_pack_params_t *,
                                         void *) noexcept
{
    return UCS_ERR_UNSUPPORTED;
}

static int uct_pxn_md_is_sockaddr_accessible(uct_md_h, const ucs_sock_addr_t *,
                                             uct_sockaddr_accessibility_t) noexcept
{
    return 0;
}

static ucs_status_t uct_pxn_md_detect_memory_type(uct_md_h, const void *,
                                                  size_t,
                                                  ucs_memory_type_t *) noexcept
{
    return UCS_ERR_UNSUPPORTED;
}

static uct_md_ops_t *uct_pxn_md_ops()
{
    static uct_md_ops_t ops = [] {
        uct_md_ops_t o;
        memset(&o, 0, sizeof(o));
        o.close                  = uct_pxn_md_close;
        o.query                  = uct_pxn_md_query;
        o.mem_alloc              = uct_pxn_md_mem_alloc;
        o.mem_free               = uct_pxn_md_mem_free;
        o.mem_advise             = uct_pxn_md_mem_advise;
        o.mem_reg                = uct_pxn_md_mem_reg;
        o.mem_dereg              = uct_pxn_md_mem_dereg;
        o.mem_query              = uct_pxn_md_mem_query;
        o.mkey_pack              = uct_pxn_md_mkey_pack;
        o.is_sockaddr_accessible = uct_pxn_md_is_sockaddr_accessible;
        o.detect_memory_type     = uct_pxn_md_detect_memory_type;
        return o;
    }();
    return &ops;
}

static ucs_status_t uct_pxn_md_open_impl(uct_component_t *component,
                                         const uct_pxn_md_config_t *config,
                                         uct_md_h *md_p)
{
    std::string error;
    auto settings = std::make_unique<pxn::Settings>(uct_pxn_md_settings(config));
    ucs_status_t status = pxn::validate(*settings, &error);
    if (status != UCS_OK) {
        ucs_error("pxn: invalid configuration: %s", error.c_str());
        return status;
    }

    auto *md = static_cast<uct_pxn_md_t*>(ucs_malloc(sizeof(uct_pxn_md_t),
                                                     "uct_pxn_md_t"));
    if (md == nullptr) {
        ucs_error("pxn: failed to allocate md");
        return UCS_ERR_NO_MEMORY;
    }

    md->super.ops       = uct_pxn_md_ops();
    md->super.component = component;
    md->settings        = settings.release();
    *md_p               = &md->super;
    return UCS_OK;
}

ucs_status_t uct_pxn_md_open(uct_component_t *component, const char *,
                             const uct_md_config_t *config,
                             uct_md_h *md_p) noexcept
{
    try {
        return uct_pxn_md_open_impl(component,
                                    ucs_derived_of(config, uct_pxn_md_config_t),
                                    md_p);
    } catch (const std::bad_alloc &) {
        ucs_error("pxn: out of memory opening the md");
        return UCS_ERR_NO_MEMORY;
    }
}
