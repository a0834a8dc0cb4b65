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

#include "pxn_net_md.h"

#include <ucs/pxn/settings.h>

#include <memory>
#include <string>

/* Counts are read wide (unsigned long, decimal digits only: no silent
 * wrap-around) and range-checked when they become pxn::Settings. */
typedef struct uct_pxn_md_config {
    uct_md_config_t          super;
    int                      enable;        /* pxn::EnableChoice */
    char                     *registry_dir;
    char                     *group;
    char                     *node_id;
    char                     *rail_map;
    ucs_config_names_array_t net_tls;
    char                     *home_device;
    int                      connect_model; /* pxn::ConnectModel */
    int                      direct_fallback;
    int                      arena;         /* pxn::ArenaChoice */
    int                      copy;          /* pxn::CopyChoice */
    int                      cuda_device;
    int                      gpu_doorbell;
    unsigned long            gather_ctas;
    unsigned long            lanes;
    unsigned long            slots;
    size_t                   slot_size;
    unsigned long            max_plan;
    unsigned long            warm_lanes;
    double                   lane_linger;
    unsigned long            inflight_depth;
    unsigned long            piece_ops;
    size_t                   piece_bytes;
    unsigned long            routes;
    double                   credit_timeout;
    double                   heartbeat_timeout;
    size_t                   relay_slice;
    size_t                   relay_slice_merge;
    int                      relay_sgl;
    int                      am_poll;
    unsigned long            initial_seq;
    double                   engine_spin;
    double                   engine_poll;
    char                     *engine_cpus;
    char                     *engine_nice;
} uct_pxn_md_config_t;

/*
 * One pxn md per inner md ("pxn_<inner md>"). Memory registered here is
 * registered with the inner md of the process's receiving NIC, so that a
 * relay's inner transport can reach it: the md's own inner md, or, with
 * UCX_PXN_HOME_DEVICE naming a device of another inner md (one md per HCA
 * with rc), that device's md. The packed rkey is the inner one behind a
 * 2-byte length, which the sender copies without interpreting it and the
 * relay unpacks.
 * Standard layout, allocated by UCX; C++ state lives behind pointers.
 */
typedef struct uct_pxn_md {
    uct_md_t              super;
    pxn::Settings        *settings;
    pxn::uct::InnerMd    *inner; /* devices of this md */
    pxn::uct::InnerMd    *reg;   /* registers memory: inner, or the home's */
} uct_pxn_md_t;

/* Remote key as unpacked on the sender: the packed inner key, opaque, and
 * where the last lane that took it keeps it in its key table (a cache, so
 * that an operation does not search the table; Ep::lane_rkey()). The
 * cache's fields are read and written with relaxed atomics by the threads
 * of the eps that use the key: a mix of two writers' fields never passes
 * LaneControl::rkey_current(), whose generations are unique in the process. */
struct uct_pxn_rkey_t {
    const void *cache_lane;  /* the LaneControl, nullptr: none */
    uint64_t    cache_gen;   /* generation of its table entry */
    uint32_t    cache_index; /* the entry */
    uint16_t    length;
    uint8_t     packed[1];   /* length bytes */
};

/* Packed rkey: u16 length (little-endian) | inner packed rkey. */
constexpr size_t kPxnRkeyHeader = 2;

extern uct_component_t    uct_pxn_component;
extern ucs_config_field_t uct_pxn_md_config_table[];

ucs_status_t uct_pxn_md_open(uct_component_t *component, const char *md_name,
                             const uct_md_config_t *config,
                             uct_md_h *md_p) noexcept;

ucs_status_t uct_pxn_query_md_resources(uct_component_t *component,
                                        uct_md_resource_desc_t **resources_p,
                                        unsigned *num_resources_p) noexcept;
ucs_status_t uct_pxn_rkey_unpack(uct_component_t *component,
                                 const void *rkey_buffer, uct_rkey_t *rkey_p,
                                 void **handle_p) noexcept;
ucs_status_t uct_pxn_rkey_release(uct_component_t *component, uct_rkey_t rkey,
                                  void *handle) noexcept;

/* Orders two unpacked pxn rkeys (<0, 0, >0): equal when their packed inner
 * keys are. */
int uct_pxn_rkey_order(uct_rkey_t rkey1, uct_rkey_t rkey2);

/* Called for each registration with a pxn md, before the inner md
 * registers: GPU memory tells pxn which GPU the process uses. */
void uct_pxn_md_notice_registration(const void *address);

/* Whether the md's registering inner md registers memory at all. tcp and
 * cma stopped doing so in UCX 1.14-1.15 (their peers reach any host memory
 * without a key): a pxn registration then records nothing on the inner
 * md, its memh is kPxnMemhNoInner and its packed rkey carries an empty
 * inner key, which relays do not unpack (pxn_net.h). */
bool uct_pxn_md_inner_registers(uct_md_h tl_md);
extern const uct_mem_h kPxnMemhNoInner;

/* Reads the md configuration from the environment and validates it; a
 * reason is logged once per process (the same error again is silent). */
ucs_status_t uct_pxn_read_settings(uct_component_t *component,
                                   pxn::Settings *settings);

/* Converts the parsed table into validated settings. UCS_ERR_INVALID_PARAM
 * with *error naming the variable (not logged). */
ucs_status_t uct_pxn_md_settings(const uct_pxn_md_config_t *config,
                                 pxn::Settings *settings, std::string *error);

/* Logs `text` as an error (a warning), once per process for the same text. */
/* The UCX_PXN_* and UCX_TLS variables of the environment, sorted: what a
 * configuration read depends on. */
std::string uct_pxn_config_environment();

void uct_pxn_error_once(const std::string &text);
void uct_pxn_warn_once(const std::string &text);

#endif
