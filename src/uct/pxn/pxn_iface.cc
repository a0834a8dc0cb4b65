#include "pxn_iface.h"

#include "pxn_md.h"

extern "C" {
#include <ucs/debug/log.h>
}

ucs_config_field_t uct_pxn_iface_config_table[] = {
    {"", "", NULL, ucs_offsetof(uct_pxn_iface_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},

    {NULL}
};

ucs_status_t uct_pxn_query_devices(uct_md_h, uct_tl_device_resource_t **devices_p,
                                   unsigned *num_devices_p) noexcept
{
    /* No devices until the relay engine exists. */
    *devices_p     = nullptr;
    *num_devices_p = 0;
    return UCS_OK;
}

UCS_CLASS_INIT_FUNC(uct_pxn_iface_t, uct_md_h md, uct_worker_h worker,
                           const uct_iface_params_t *params,
                           const uct_iface_config_t *tl_config)
{
    return UCS_ERR_UNSUPPORTED;
}

UCS_CLASS_CLEANUP_FUNC(uct_pxn_iface_t)
{
}

UCS_CLASS_DEFINE(uct_pxn_iface_t, uct_base_iface_t);
