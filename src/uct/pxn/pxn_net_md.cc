#include "pxn_net_md.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <mutex>
#include <utility>

namespace pxn {
namespace uct {

namespace {

constexpr const char *kPrefix = "pxn_";

/* Devices of `md` with the first of net_tls that the md offers on each. Any
 * device type: pxn itself always reports NET devices. */
std::vector<InnerDevice> md_devices(uct_md_h md,
                                    const std::vector<std::string> &net_tls)
{
    uct_tl_resource_desc_t *resources;
    unsigned count;
    std::vector<InnerDevice> devices;

    if (uct_md_query_tl_resources(md, &resources, &count) != UCS_OK) {
        return devices;
    }
    for (const std::string &tl : net_tls) {
        for (unsigned i = 0; i < count; ++i) {
            const uct_tl_resource_desc_t &r = resources[i];
            if (tl != r.tl_name) {
                continue;
            }
            const bool taken = std::any_of(devices.begin(), devices.end(),
                                           [&](const InnerDevice &d) {
                                               return d.name == r.dev_name;
                                           });
            if (!taken) {
                devices.push_back({r.dev_name, r.tl_name, r.dev_type,
                                   r.sys_device});
            }
        }
    }
    uct_release_tl_resource_list(resources);
    return devices;
}

/* Every inner md pxn opens stays open, once per component and md name,
 * until the process exits: UCX 1.13.1's cuda_ipc component remembers the
 * md it opened last and uses it in every rkey_unpack (a relay's unpack of
 * its targets' keys, UCP's own cuda_ipc lanes too), so closing one while
 * another is in use leaves that pointer dangling (a crash in
 * uct_cuda_ipc_get_unique_index_for_uuid, seen on the GPU machine). It
 * also spares listing the inner mds from opening each of them again. */
ucs_status_t open_once(uct_component_h component, const std::string &name,
                       uct_md_h *md)
{
    struct Opened {
        uct_component_h component;
        std::string     name;
        uct_md_h        md;
    };
    static std::mutex mutex;
    static auto *opened = new std::vector<Opened>(); /* never freed */

    std::lock_guard<std::mutex> guard(mutex);
    for (const Opened &o : *opened) {
        if ((o.component == component) && (o.name == name)) {
            *md = o.md;
            return UCS_OK;
        }
    }
    uct_md_config_t *config;
    ucs_status_t status = uct_md_config_read(component, NULL, NULL, &config);
    if (status != UCS_OK) {
        return status;
    }
    status = uct_md_open(component, name.c_str(), config, md);
    uct_config_release(config);
    if (status == UCS_OK) {
        opened->push_back({component, name, *md});
    }
    return status;
}

} // namespace

bool md_offers(uct_md_h md, const std::string &tl_name,
               const std::string &device)
{
    for (const InnerDevice &d : md_devices(md, {tl_name})) {
        if (d.name == device) {
            return true;
        }
    }
    return false;
}

std::string pxn_md_name(const std::string &inner_md_name)
{
    std::string name = kPrefix + inner_md_name;
    return (name.size() < UCT_MD_NAME_MAX) ? name : std::string();
}

std::vector<InnerMdInfo> list_inner_mds(const std::vector<std::string> &net_tls)
{
    std::vector<InnerMdInfo> result;
    uct_component_h *components;
    unsigned num_components;

    if (uct_query_components(&components, &num_components) != UCS_OK) {
        return result;
    }
    for (unsigned c = 0; c < num_components; ++c) {
        uct_component_attr_t attr = {};
        /* The name first: counting pxn's own mds would recurse into us. */
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
        if ((uct_component_query(components[c], &attr) != UCS_OK) ||
            (std::string(attr.name) == "pxn")) {
            continue;
        }
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
        if ((uct_component_query(components[c], &attr) != UCS_OK) ||
            (attr.md_resource_count == 0)) {
            continue;
        }
        std::vector<uct_md_resource_desc_t> mds(attr.md_resource_count);
        attr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        attr.md_resources = mds.data();
        if (uct_component_query(components[c], &attr) != UCS_OK) {
            continue;
        }
        for (const auto &m : mds) {
            uct_md_h md;
            const ucs_status_t status = open_once(components[c], m.md_name, &md);
            if (status != UCS_OK) {
                ucs_debug("pxn: inner md %s not usable: %s", m.md_name,
                          ucs_status_string(status));
                continue;
            }
            InnerMdInfo info{components[c], m.md_name, md_devices(md, net_tls)};
            if (!info.devices.empty() && !pxn_md_name(info.md_name).empty()) {
                result.push_back(std::move(info));
            }
        }
    }
    uct_release_component_list(components);
    return result;
}

ucs_status_t InnerMd::open(const std::string &pxn_name,
                           const std::vector<std::string> &net_tls, InnerMd *md)
{
    for (InnerMdInfo &info : list_inner_mds(net_tls)) {
        if (pxn_md_name(info.md_name) != pxn_name) {
            continue;
        }
        InnerMd result;
        ucs_status_t status = open_once(info.component, info.md_name,
                                        &result.md_);
        if (status != UCS_OK) {
            ucs_error("pxn: failed to open inner md %s: %s",
                      info.md_name.c_str(), ucs_status_string(status));
            return status;
        }
        status = uct_md_query(result.md_, &result.attr_);
        if (status != UCS_OK) {
            ucs_error("pxn: failed to query inner md %s: %s",
                      info.md_name.c_str(), ucs_status_string(status));
            return status;
        }
        result.info_ = std::move(info);
        *md          = std::move(result);
        return UCS_OK;
    }
    ucs_error("pxn: md %s has no inner md offering any of UCX_PXN_NET_TLS",
              pxn_name.c_str());
    return UCS_ERR_NO_DEVICE;
}

const InnerDevice *InnerMd::device(const std::string &name) const
{
    for (const InnerDevice &d : info_.devices) {
        if (d.name == name) {
            return &d;
        }
    }
    return nullptr;
}

ucs_status_t InnerMd::open_for_device(const std::string &device,
                                      const std::vector<std::string> &net_tls,
                                      std::unique_ptr<InnerMd> *md)
{
    for (const InnerMdInfo &info : list_inner_mds(net_tls)) {
        for (const InnerDevice &dev : info.devices) {
            if (dev.name == device) {
                std::unique_ptr<InnerMd> opened(new InnerMd());
                ucs_status_t status = open(pxn_md_name(info.md_name), net_tls,
                                           opened.get());
                if (status == UCS_OK) {
                    *md = std::move(opened);
                }
                return status;
            }
        }
    }
    return UCS_ERR_NO_DEVICE;
}

} // namespace uct
} // namespace pxn
