#include "pxn_md.h"

#include "pxn_compat.h"
#include "pxn_cuda.h"
#include "pxn_entry.h"
#include "pxn_log.h"
#include "pxn_node.h"
#include "pxn_relay_service.h"

#include <sys/statvfs.h>

extern "C" {
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/string.h>
}

#include <algorithm>
#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <unistd.h>
#include <vector>

static void uct_pxn_md_close(uct_md_h tl_md) noexcept
{
    uct_pxn_md_t *md = ucs_derived_of(tl_md, uct_pxn_md_t);

    if (md->reg != md->inner) {
        delete md->reg;
    }
    delete md->inner;
    delete md->settings;
    ucs_free(md);
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

static char uct_pxn_memh_no_inner;
const uct_mem_h kPxnMemhNoInner = &uct_pxn_memh_no_inner;

bool uct_pxn_md_inner_registers(uct_md_h tl_md)
{
    return ucs_derived_of(tl_md, uct_pxn_md_t)->reg->attr().cap.flags &
           UCT_MD_FLAG_REG;
}

void uct_pxn_md_notice_registration(const void *address)
{
    /* GPU memory tells which GPU this process uses (a relay may wait for
     * it). */
    pxn::uct::Node::notice_process_gpu(address);
}

static ucs_status_t
uct_pxn_md_mem_dereg(uct_md_h tl_md, const uct_md_mem_dereg_params_t *params) noexcept
{
    uct_pxn_md_t *md = ucs_derived_of(tl_md, uct_pxn_md_t);

    /* The memh is the inner md's: its dereg (invalidation included, where
     * the inner md supports it) is ours. */
    if (!(params->field_mask & UCT_MD_MEM_DEREG_FIELD_MEMH) ||
        (params->memh == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (params->memh == kPxnMemhNoInner) {
        /* Nothing registered, nothing to revoke: invalidation is what the
         * inner md claims without a registration (pxn_compat.cc), checked
         * as UCX's mds check it. */
        const bool invalidate = (params->field_mask & UCT_MD_MEM_DEREG_FIELD_FLAGS) &&
                                (params->flags & UCT_MD_MEM_DEREG_FLAG_INVALIDATE);
        const bool has_comp   = (params->field_mask & UCT_MD_MEM_DEREG_FIELD_COMPLETION) &&
                                (params->comp != nullptr);
        if (!invalidate) {
            return UCS_OK;
        }
        if (!(md->reg->attr().cap.flags & UCT_MD_FLAG_INVALIDATE)) {
            return UCS_ERR_UNSUPPORTED;
        }
        if (!has_comp) {
            return UCS_ERR_INVALID_PARAM;
        }
        uct_invoke_completion(params->comp, UCS_OK);
        return UCS_OK;
    }
    uct_md_h inner = md->reg->md();
    return inner->ops->mem_dereg(inner, params);
}

/* UCP 1.13 labels GPU pointers HOST on some paths: pxn finds out itself. */
static ucs_status_t uct_pxn_md_detect_memory_type(uct_md_h, const void *address,
                                                  size_t,
                                                  ucs_memory_type_t *mem_type) noexcept
{
    return pxn::uct::detect_memory_type(address, mem_type);
}

static uct_md_ops_t *uct_pxn_md_ops()
{
    static uct_md_ops_t ops = [] {
        uct_md_ops_t o;
        memset(&o, 0, sizeof(o));
        o.close              = uct_pxn_md_close;
        o.mem_free           = uct_pxn_md_mem_free;
        o.mem_advise         = uct_pxn_md_mem_advise;
        o.mem_dereg          = uct_pxn_md_mem_dereg;
        o.detect_memory_type = uct_pxn_md_detect_memory_type;
        uct_pxn_compat_md_ops(&o);
        return o;
    }();
    return &ops;
}

/* Everything pxn needs from the registry's directory, checked before UCP
 * counts on pxn (a failing md open only leaves pxn out; a failing iface
 * open would fail UCP's worker): a geometry that fits its file system,
 * room for one relay, and a directory that is ours (Registry::open refuses
 * a squatted or foreign one). */
static ucs_status_t uct_pxn_md_check_room(pxn::Settings *settings,
                                          const pxn::uct::InnerMd &reg)
{
    const bool cuda_md = reg.attr().cap.reg_mem_types &
                         UCS_BIT(UCS_MEMORY_TYPE_CUDA);
    if ((settings->arena == pxn::ArenaChoice::kCuda) &&
        (!pxn::uct::cuda_available() || !cuda_md)) {
        uct_pxn_error_once(std::string("pxn: UCX_PXN_ARENA=cuda but ") +
                           (!pxn::uct::cuda_available() ?
                            "no GPU is usable here" :
                            "inner md " + reg.info().md_name +
                            " cannot register GPU memory") +
                           ": pxn offers nothing");
        return UCS_ERR_UNSUPPORTED;
    }
    const bool host    = !pxn::uct::RelayService::wants_gpu_arena(*settings,
                                                                  cuda_md);
    const std::string &dir = settings->registry_dir;
    struct statvfs fs;
    if (statvfs(dir.c_str(), &fs) != 0) {
        uct_pxn_error_once("pxn: UCX_PXN_REGISTRY_DIR=" + dir + ": " +
                           strerror(errno) + ": pxn offers nothing");
        return UCS_ERR_NO_DEVICE;
    }
    const uint64_t total = uint64_t(fs.f_blocks) * fs.f_frsize;
    const uint64_t avail = uint64_t(fs.f_bavail) * fs.f_frsize;
    bool changed;
    if (!pxn::fit_geometry(settings, total, host, &changed)) {
        uct_pxn_error_once(pxn::strformat("pxn: %s holds %lu MiB in all: a relay of "
                                          "this geometry (%lu MiB) does not fit in a "
                                          "quarter of it; pxn offers nothing "
                                          "(UCX_PXN_REGISTRY_DIR, UCX_PXN_SLOTS, "
                                          "UCX_PXN_SLOT_SIZE)", dir.c_str(),
                                          total >> 20,
                                          pxn::relay_footprint(settings->geometry,
                                                               host) >> 20));
        return UCS_ERR_NO_MEMORY;
    }
    const pxn::Geometry &g = settings->geometry;
    if (changed) {
        uct_pxn_warn_once(pxn::strformat("pxn: %s holds only %lu MiB: staging "
                                         "geometry reduced to UCX_PXN_SLOTS=%u "
                                         "UCX_PXN_SLOT_SIZE=%lu (%lu MiB a relay); "
                                         "set them to choose", dir.c_str(),
                                         total >> 20, g.slots, g.slot_size,
                                         pxn::relay_footprint(g, host) >> 20));
    }
    /* room now for a relay's control file and one lane's slots */
    const uint64_t need = pxn::relay_footprint(g, false) +
                          (host ? uint64_t(g.slots) * g.slot_size : 0);
    if (avail < need) {
        uct_pxn_error_once(pxn::strformat("pxn: %s has %lu MiB free, a relay needs "
                                          "%lu MiB (its control file and a lane's "
                                          "slots); pxn offers nothing "
                                          "(UCX_PXN_REGISTRY_DIR)", dir.c_str(),
                                          avail >> 20, (need + (1 << 20) - 1) >> 20));
        return UCS_ERR_NO_MEMORY;
    }
    std::unique_ptr<pxn::Registry> registry;
    return pxn::Registry::open(*settings, &registry);
}

static ucs_status_t uct_pxn_md_open_impl(uct_component_t *component,
                                         const char *md_name,
                                         const uct_pxn_md_config_t *config,
                                         uct_md_h *md_p)
{
    std::string error;
    auto settings = std::make_unique<pxn::Settings>();
    ucs_status_t status = uct_pxn_md_settings(config, settings.get(), &error);
    if (status != UCS_OK) {
        uct_pxn_error_once("pxn: invalid configuration: " + error);
        return status;
    }
    if (!pxn::pxn_requested(*settings, getenv("UCX_TLS"))) {
        uct_pxn_error_once("pxn: not enabled in this process: UCX_TLS does not "
                           "name pxn and UCX_PXN_ENABLE is not 'y'");
        return UCS_ERR_UNSUPPORTED;
    }

    auto inner = std::make_unique<pxn::uct::InnerMd>();
    status     = pxn::uct::InnerMd::open(md_name, settings->net_tls, inner.get());
    if (status != UCS_OK) {
        return status;
    }
    /* The home device in another inner md: its md registers. */
    std::unique_ptr<pxn::uct::InnerMd> home;
    if (!settings->home_device.empty() &&
        (inner->device(settings->home_device) == nullptr)) {
        status = pxn::uct::InnerMd::open_for_device(settings->home_device,
                                                    settings->net_tls, &home);
        if (status != UCS_OK) {
            uct_pxn_error_once("pxn: UCX_PXN_HOME_DEVICE=" + settings->home_device +
                               " is not a device of any inner md of "
                               "UCX_PXN_NET_TLS: pxn offers nothing");
            return status;
        }
    }

    /* once per configuration: a second md or context of the process
     * neither checks nor logs again */
    {
        static std::mutex   lock;
        static std::string  checked_env;
        static ucs_status_t checked = UCS_ERR_LAST;
        static pxn::Geometry fitted;
        const std::string env = uct_pxn_config_environment() + md_name;
        std::lock_guard<std::mutex> guard(lock);
        if ((checked == UCS_ERR_LAST) || (env != checked_env)) {
            checked     = uct_pxn_md_check_room(settings.get(),
                                                (home != nullptr) ? *home : *inner);
            checked_env = env;
            fitted      = settings->geometry;
        }
        if (checked != UCS_OK) {
            return checked;
        }
        settings->geometry = fitted;
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
    md->inner           = inner.release();
    md->reg             = (home != nullptr) ? home.release() : md->inner;
    *md_p               = &md->super;
    return UCS_OK;
}

ucs_status_t uct_pxn_md_open(uct_component_t *component, const char *md_name,
                             const uct_md_config_t *config,
                             uct_md_h *md_p) noexcept
{
    return uct_pxn_entry("uct_md_open", [&] {
        return uct_pxn_md_open_impl(component, md_name,
                                    ucs_derived_of(config, uct_pxn_md_config_t),
                                    md_p);
    });
}

static ucs_status_t uct_pxn_md_resources(uct_component_t *component,
                                         uct_md_resource_desc_t **resources_p,
                                         unsigned *num_resources_p)
{
    if (!pxn::pxn_asked(getenv("UCX_PXN_ENABLE"), getenv("UCX_TLS"))) {
        /* Decided before the table is read: a job that did not ask for
         * pxn sees none of it, not even its configuration errors. */
        ucs_debug("pxn: not enabled (UCX_TLS does not name pxn, "
                  "UCX_PXN_ENABLE is not 'y')");
        return UCS_OK;
    }
    pxn::Settings settings;
    if (uct_pxn_read_settings(component, &settings) != UCS_OK) {
        /* pxn stays out of the way; the error above says why. */
        return UCS_OK;
    }
    if (!pxn::pxn_requested(settings, getenv("UCX_TLS"))) {
        ucs_debug("pxn: not enabled (UCX_TLS does not name pxn, "
                  "UCX_PXN_ENABLE is not 'y')");
        return UCS_OK;
    }
    const auto mds = pxn::uct::list_inner_mds(settings.net_tls);
    if (mds.empty()) {
        std::string tls;
        for (const auto &tl : settings.net_tls) {
            tls += (tls.empty() ? "" : ",") + tl;
        }
        uct_pxn_warn_once("pxn: none of UCX_PXN_NET_TLS=" + tls +
                          " is usable here: pxn offers no memory domain");
        return UCS_OK;
    }
    std::vector<std::string> names; /* before the C array: it cannot leak */
    for (const auto &md : mds) {
        names.push_back(pxn::uct::pxn_md_name(md.md_name));
    }
    auto *resources = static_cast<uct_md_resource_desc_t*>(
            ucs_calloc(mds.size(), sizeof(uct_md_resource_desc_t),
                       "pxn md resources"));
    if (resources == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < mds.size(); ++i) {
        ucs_strncpy_zero(resources[i].md_name, names[i].c_str(),
                         sizeof(resources[i].md_name));
    }
    *resources_p     = resources;
    *num_resources_p = mds.size();
    return UCS_OK;
}

ucs_status_t uct_pxn_query_md_resources(uct_component_t *component,
                                        uct_md_resource_desc_t **resources_p,
                                        unsigned *num_resources_p) noexcept
{
    *resources_p     = nullptr;
    *num_resources_p = 0;
    return uct_pxn_entry("uct_component_query", [&] {
        return uct_pxn_md_resources(component, resources_p, num_resources_p);
    });
}

ucs_status_t uct_pxn_rkey_unpack(uct_component_t *, const void *rkey_buffer,
                                 uct_rkey_t *rkey_p, void **handle_p) noexcept
{
    auto *in            = static_cast<const uint8_t*>(rkey_buffer);
    const size_t length = in[0] | (size_t(in[1]) << 8);
    auto *rkey          = static_cast<uct_pxn_rkey_t*>(
            ucs_malloc(sizeof(uct_pxn_rkey_t) + length, "pxn rkey"));
    if (rkey == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    rkey->cache_lane  = nullptr;
    rkey->cache_gen   = 0;
    rkey->cache_index = 0;
    rkey->length      = static_cast<uint16_t>(length);
    memcpy(rkey->packed, in + kPxnRkeyHeader, length);
    *rkey_p   = reinterpret_cast<uct_rkey_t>(rkey);
    *handle_p = nullptr;
    return UCS_OK;
}

int uct_pxn_rkey_order(uct_rkey_t rkey1, uct_rkey_t rkey2)
{
    auto *a = reinterpret_cast<const uct_pxn_rkey_t*>(rkey1);
    auto *b = reinterpret_cast<const uct_pxn_rkey_t*>(rkey2);
    if (a->length != b->length) {
        return (a->length < b->length) ? -1 : 1;
    }
    return memcmp(a->packed, b->packed, a->length);
}

ucs_status_t uct_pxn_rkey_release(uct_component_t *, uct_rkey_t rkey,
                                  void *) noexcept
{
    ucs_free(reinterpret_cast<void*>(rkey));
    return UCS_OK;
}
