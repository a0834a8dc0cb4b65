/*
 * Registration of the pxn component, md and transport, as UCX's own modules
 * register, but not from a constructor: this library (libpxn_transport) is
 * opened by the module UCX loads (libuct_pxn, pxn_module.cc) once the
 * version guard has found the process's UCX to be the one pxn was built
 * for, and it calls pxn_transport_register(). Opened any other way, it
 * registers nothing.
 */
#include "pxn_compat.h"
#include "pxn_iface.h"
#include "pxn_md.h"

extern "C" {
#include <uct/base/uct_component.h>
}

static ucs_status_t uct_pxn_cm_open(const uct_component_h, uct_worker_h,
                                    const uct_cm_config_t *, uct_cm_h *) noexcept
{
    return UCS_ERR_UNSUPPORTED;
}

static void uct_pxn_md_vfs_init(uct_md_h) noexcept
{
}

/* Positional: uct_component_t has a const name member. */
uct_component_t uct_pxn_component = {
    "pxn",
    uct_pxn_query_md_resources,
    uct_pxn_md_open,
    uct_pxn_cm_open,
    UCT_PXN_COMPONENT_RKEY_OPS,
    {"pxn memory domain", "PXN_", uct_pxn_md_config_table,
     sizeof(uct_pxn_md_config_t), {}},
    UCS_CONFIG_EMPTY_GLOBAL_LIST_ENTRY,
    UCT_COMPONENT_TL_LIST_INITIALIZER(&uct_pxn_component),
    {},
    0,
    uct_pxn_md_vfs_init,
};

static UCS_CLASS_DEFINE_NEW_FUNC(uct_pxn_iface_t, uct_iface_t, uct_md_h,
                                 uct_worker_h, const uct_iface_params_t*,
                                 const uct_iface_config_t*);

UCT_TL_DEFINE_ENTRY(&uct_pxn_component, pxn, uct_pxn_query_devices,
                    uct_pxn_iface_t, "PXN_", uct_pxn_iface_config_table,
                    uct_pxn_iface_config_t);

/* uct_pxn_init() and uct_pxn_cleanup(), as UCX's modules have them, but
 * not as constructor and destructor: they add the component and transport
 * to libuct's lists, which must happen only in the UCX pxn was built for. */
UCT_SINGLE_TL_INIT(&uct_pxn_component, pxn, ,,)

/* Called once, by libuct_pxn's constructor after the version guard. */
extern "C" __attribute__((visibility("default"))) void pxn_transport_register()
{
    uct_pxn_init();
}

/* Called once, by libuct_pxn's destructor, after pxn_transport_register(). */
extern "C" __attribute__((visibility("default"))) void pxn_transport_unregister()
{
    uct_pxn_cleanup();
}
