/*
 * The pxn memory domain (UCX-facing shell).
 *
 * The md owns the validated settings of every UCX_PXN_* variable: all of
 * them live in the md configuration table so that a bad value fails at
 * uct_md_open with a message naming the variable, before any iface exists.
 * ifaces read the settings from their md.
 */
#ifndef UCT_PXN_MD_H_
#define UCT_PXN_MD_H_

extern "C" {
#include <uct/base/uct_md.h>
}

#include <ucs/pxn/settings.h>

#include <memory>

typedef struct uct_pxn_md_config {
    uct_md_config_t          super;
    char                     *group;
    char                     *node_id;
    char                     *rail_map;
    ucs_config_names_array_t net_tls;
    char                     *home_device;
    unsigned                 lanes;
    unsigned                 slots;
    size_t                   slot_size;
    unsigned                 max_plan;
    unsigned                 inflight_depth;
    double                   credit_timeout;
    double                   heartbeat_timeout;
    size_t                   relay_slice;
    size_t                   relay_slice_merge;
} uct_pxn_md_config_t;

/* Standard layout, allocated by UCX; C++ state lives behind settings. */
typedef struct uct_pxn_md {
    uct_md_t       super;
    pxn::Settings *settings;
} uct_pxn_md_t;

extern uct_component_t    uct_pxn_component;
extern ucs_config_field_t uct_pxn_md_config_table[];

ucs_status_t uct_pxn_md_open(uct_component_t *component, const char *md_name,
                             const uct_md_config_t *config,
                             uct_md_h *md_p) noexcept;

/* Converts the parsed table into settings; validates nothing. */
pxn::Settings uct_pxn_md_settings(const uct_pxn_md_config_t *config);

#endif
