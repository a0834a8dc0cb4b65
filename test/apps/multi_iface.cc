/*
 * A UCT process with several workers, each opening a pxn iface on every
 * device of every pxn md, as a UCP program that pins no device does:
 *
 *   multi_iface <workers>
 *
 * Prints "ready <ifaces opened> <device>,<device>,..." (the devices of one
 * worker; or "error <what>") and keeps everything
 * open until SIGTERM or SIGINT. The test then reads the node's registry:
 * however many ifaces, one relay per home rail.
 */
#include <uct/api/uct.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Md {
    uct_component_h component;
    uct_md_h        md;
    std::vector<uct_tl_resource_desc_t> pxn_resources;
};

int fail(const std::string &what)
{
    printf("error %s\n", what.c_str());
    fflush(stdout);
    return 1;
}

} // namespace

int main(int argc, char **argv)
{
    /* A UCT program that opens pxn by name asks for it (UCX_PXN_ENABLE=auto
     * would only enable it where UCX_TLS names pxn); an explicit 'n' stays. */
    setenv("UCX_PXN_ENABLE", "y", 0);
    /* before any thread: the signals are waited for, not delivered */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    const int workers = (argc > 1) ? atoi(argv[1]) : 2;
    uct_component_h *components;
    unsigned count;
    if (uct_query_components(&components, &count) != UCS_OK) {
        return fail("uct_query_components");
    }
    std::vector<Md> mds;
    for (unsigned c = 0; c < count; ++c) {
        uct_component_attr_t attr = {};
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME |
                          UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
        uct_component_query(components[c], &attr);
        if (strcmp(attr.name, "pxn") != 0) {
            continue;
        }
        std::vector<uct_md_resource_desc_t> resources(attr.md_resource_count);
        attr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        attr.md_resources = resources.data();
        uct_component_query(components[c], &attr);
        for (const auto &r : resources) {
            uct_md_config_t *config;
            Md md{components[c], nullptr, {}};
            if ((uct_md_config_read(components[c], NULL, NULL, &config) != UCS_OK) ||
                (uct_md_open(components[c], r.md_name, config, &md.md) != UCS_OK)) {
                return fail(std::string("md ") + r.md_name);
            }
            uct_config_release(config);
            uct_tl_resource_desc_t *tls;
            unsigned ntls;
            if (uct_md_query_tl_resources(md.md, &tls, &ntls) != UCS_OK) {
                return fail("tl resources");
            }
            md.pxn_resources.assign(tls, tls + ntls);
            uct_release_tl_resource_list(tls);
            mds.push_back(md);
        }
    }

    ucs_async_context_t *async;
    if (ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &async) != UCS_OK) {
        return fail("async");
    }
    std::vector<uct_worker_h> uct_workers;
    std::vector<uct_iface_h> ifaces;
    std::string devices;
    for (int w = 0; w < workers; ++w) {
        uct_worker_h worker;
        if (uct_worker_create(async, UCS_THREAD_MODE_SINGLE, &worker) != UCS_OK) {
            return fail("worker");
        }
        uct_workers.push_back(worker);
        for (const Md &md : mds) {
            for (const auto &tl : md.pxn_resources) {
                uct_iface_config_t *config;
                if (uct_md_iface_config_read(md.md, tl.tl_name, NULL, NULL,
                                             &config) != UCS_OK) {
                    return fail("iface config");
                }
                uct_iface_params_t params = {};
                params.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                    UCT_IFACE_PARAM_FIELD_DEVICE;
                params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
                params.mode.device.tl_name  = tl.tl_name;
                params.mode.device.dev_name = tl.dev_name;
                uct_iface_h iface;
                const ucs_status_t status = uct_iface_open(md.md, worker, &params,
                                                           config, &iface);
                uct_config_release(config);
                if (status != UCS_OK) {
                    return fail(std::string("iface on ") + tl.dev_name + ": " +
                                ucs_status_string(status));
                }
                ifaces.push_back(iface);
                if (w == 0) {
                    devices += (devices.empty() ? "" : ",") +
                               std::string(tl.dev_name);
                }
            }
        }
    }
    printf("ready %zu %s\n", ifaces.size(), devices.c_str());
    fflush(stdout);
    int sig;
    sigwait(&stop, &sig);
    for (uct_iface_h iface : ifaces) {
        uct_iface_close(iface);
    }
    for (uct_worker_h worker : uct_workers) {
        uct_worker_destroy(worker);
    }
    ucs_async_context_destroy(async);
    for (const Md &md : mds) {
        uct_md_close(md.md);
    }
    uct_release_component_list(components);
    return 0;
}
