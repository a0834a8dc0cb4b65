/*
 * ucx_pxn_relay: a pxn relay without an application, for NICs/GPUs whose
 * slot runs no UCX program, and for demos where a two-process tool (such
 * as ucx_perftest) needs a third process on the target's rail.
 *
 *   ucx_pxn_relay [-d <device>] [-m <pxn md>] [-b]
 *
 * -b: the main thread busy-polls until the signal instead of sleeping, as
 * an application's progress loop would (ucx_pxn_contention_bench: a relay
 * that shares its process's cores with a thread that never blocks).
 *
 * Opens one pxn interface (its presence in the node's registry makes it the
 * relay of its rail) with the usual UCX_PXN_* settings, then relays until
 * SIGTERM or SIGINT: the interface is closed (in-flight pieces drained,
 * registry entry removed) and the relay's counters are printed.
 * Without -d: the first device of the first pxn md (with
 * UCX_PXN_HOME_DEVICE naming the rail's NIC, any device will do).
 * A relay with a GPU arena needs its GPU: UCX_PXN_CUDA_DEVICE (this program
 * makes no CUDA context of its own). A relay not in the registry 5 s after
 * the interface opened (its GPU unknown, or it failed to start: the lines
 * above say why) is an error: exit status 1.
 */
#include <ucs/pxn/abi.h>

#include <uct/api/uct.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

namespace {

[[noreturn]] void die(const char *what, ucs_status_t status)
{
    fprintf(stderr, "ucx_pxn_relay: %s: %s\n", what, ucs_status_string(status));
    exit(1);
}

/* The relay's own counters, from its registry entry. */
bool read_counters(pxn::abi::ProcessCounters *c)
{
    const char *group      = getenv("UCX_PXN_GROUP");
    const char *base       = getenv("UCX_PXN_REGISTRY_DIR");
    const std::string dir  = std::string((base && *base) ? base : "/dev/shm") +
                             "/ucx-pxn-" + std::to_string(geteuid()) +
                             "-" + (group ? group : "default");
    const std::string mine = "p" + std::to_string(getpid()) + "-";
    DIR *d = opendir(dir.c_str());
    if (d == nullptr) {
        return false;
    }
    bool found = false;
    for (dirent *e; !found && ((e = readdir(d)) != nullptr);) {
        const std::string name = e->d_name;
        if ((name.rfind(mine, 0) != 0) || (name.size() < 4) ||
            (name.compare(name.size() - 4, 4, ".ctl") != 0)) {
            continue;
        }
        const int fd = openat(dirfd(d), name.c_str(), O_RDONLY);
        void *map    = (fd < 0) ? MAP_FAILED :
                       mmap(nullptr, pxn::abi::kLaneOffset, PROT_READ,
                            MAP_SHARED, fd, 0);
        if (fd >= 0) {
            close(fd);
        }
        if (map != MAP_FAILED) {
            memcpy(c, static_cast<uint8_t*>(map) + pxn::abi::kCountersOffset,
                   sizeof(*c));
            munmap(map, pxn::abi::kLaneOffset);
            found = true;
        }
    }
    closedir(d);
    return found;
}

/* Spins (a pause loop, never a syscall for about a millisecond at a time)
 * until one of `stop` is pending; returns it. */
int busy_wait(const sigset_t &stop)
{
    const timespec zero = {0, 0};
    for (;;) {
        for (unsigned i = 0; i < 100000; ++i) {
#if defined(__x86_64__)
            __builtin_ia32_pause();
#else
            __asm__ __volatile__("" ::: "memory");
#endif
        }
        const int sig = sigtimedwait(&stop, nullptr, &zero);
        if (sig > 0) {
            return sig;
        }
    }
}

} // namespace

int main(int argc, char **argv)
{
    /* A UCT program that opens pxn by name asks for it (UCX_PXN_ENABLE=auto
     * would only enable it where UCX_TLS names pxn); an explicit 'n' stays. */
    setenv("UCX_PXN_ENABLE", "y", 0);
    std::string device, md_name;
    bool busy = false;
    for (int opt; (opt = getopt(argc, argv, "d:m:bh")) != -1;) {
        switch (opt) {
        case 'd': device = optarg; break;
        case 'm': md_name = optarg; break;
        case 'b': busy = true; break;
        default:
            fprintf(stderr, "usage: ucx_pxn_relay [-d <device>] [-m <pxn md>] [-b]\n");
            return 2;
        }
    }

    /* Signals are taken with sigwait() below: block them before any UCX
     * thread exists, so that every thread inherits the mask. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);

    uct_component_h *components;
    unsigned count;
    ucs_status_t status = uct_query_components(&components, &count);
    if (status != UCS_OK) {
        die("uct_query_components", status);
    }
    uct_component_h pxn = nullptr;
    for (unsigned i = 0; i < count; ++i) {
        uct_component_attr_t attr = {};
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
        uct_component_query(components[i], &attr);
        if (strcmp(attr.name, "pxn") == 0) {
            pxn = components[i];
        }
    }
    if (pxn == nullptr) {
        fprintf(stderr, "ucx_pxn_relay: UCX did not load the pxn module "
                        "(ucx_info -d | grep pxn; LD_PRELOAD it into a stock UCX)\n");
        return 1;
    }

    uct_component_attr_t attr = {};
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    uct_component_query(pxn, &attr);
    std::vector<uct_md_resource_desc_t> mds(attr.md_resource_count);
    attr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    attr.md_resources = mds.data();
    uct_component_query(pxn, &attr);

    ucs_async_context_t *async;
    uct_worker_h worker;
    if ((ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &async) != UCS_OK) ||
        (uct_worker_create(async, UCS_THREAD_MODE_SINGLE, &worker) != UCS_OK)) {
        die("worker", UCS_ERR_NO_MEMORY);
    }

    uct_md_h md         = nullptr;
    uct_iface_h iface   = nullptr;
    std::string opened;
    for (const auto &m : mds) {
        if (!md_name.empty() && (md_name != m.md_name)) {
            continue;
        }
        uct_md_config_t *md_config;
        uct_md_config_read(pxn, NULL, NULL, &md_config);
        status = uct_md_open(pxn, m.md_name, md_config, &md);
        uct_config_release(md_config);
        if (status != UCS_OK) {
            die("uct_md_open", status);
        }
        uct_tl_resource_desc_t *tls;
        unsigned num_tls;
        uct_md_query_tl_resources(md, &tls, &num_tls);
        for (unsigned t = 0; (t < num_tls) && (iface == nullptr); ++t) {
            if (!device.empty() && (device != tls[t].dev_name)) {
                continue;
            }
            uct_iface_config_t *config;
            uct_md_iface_config_read(md, "pxn", NULL, NULL, &config);
            uct_iface_params_t params   = {};
            params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                          UCT_IFACE_PARAM_FIELD_DEVICE;
            params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
            params.mode.device.tl_name  = "pxn";
            params.mode.device.dev_name = tls[t].dev_name;
            status = uct_iface_open(md, worker, &params, config, &iface);
            uct_config_release(config);
            if (status != UCS_OK) {
                die("uct_iface_open", status);
            }
            opened = std::string(m.md_name) + "/" + tls[t].dev_name;
        }
        uct_release_tl_resource_list(tls);
        if (iface != nullptr) {
            break;
        }
        uct_md_close(md);
        md = nullptr;
    }
    uct_release_component_list(components);
    if (iface == nullptr) {
        fprintf(stderr, "ucx_pxn_relay: no pxn device%s%s found (ucx_info -d)\n",
                device.empty() ? "" : " ", device.c_str());
        return 1;
    }

    pxn::abi::ProcessCounters c = {};
    bool published = read_counters(&c);
    for (int i = 0; (i < 50) && !published; ++i) {
        usleep(100000);
        published = read_counters(&c);
    }
    if (!published) {
        fprintf(stderr, "ucx_pxn_relay: no relay of %s in the registry after 5 s: "
                        "a GPU arena needs the relay's GPU (set UCX_PXN_CUDA_DEVICE, "
                        "or UCX_PXN_ARENA=host); other causes are logged above\n",
                opened.c_str());
        uct_iface_close(iface);
        uct_worker_destroy(worker);
        ucs_async_context_destroy(async);
        uct_md_close(md);
        return 1;
    }
    printf("ucx_pxn_relay: pid %d relaying on %s (group %s); SIGTERM stops\n",
           getpid(), opened.c_str(),
           getenv("UCX_PXN_GROUP") ? getenv("UCX_PXN_GROUP") : "default");
    fflush(stdout);

    int sig = busy ? busy_wait(stop) : 0;
    if (!busy) {
        sigwait(&stop, &sig);
    }

    const bool have = read_counters(&c);
    uct_iface_close(iface); /* drains in-flight pieces, removes the entry */
    uct_worker_destroy(worker);
    ucs_async_context_destroy(async);
    uct_md_close(md);
    if (have) {
        const pxn::abi::LatencyHistogram &p = c.relay.pickup;
        printf("ucx_pxn_relay: stopped by signal %d: relayed %lu pieces, %lu "
               "bytes, %lu failed, %lu rejected, %lu lanes served; doorbell to "
               "pickup mean %.1f us, %lu of %lu over 1 ms; am %lu messages, %lu "
               "credit waits\n", sig,
               c.relay.pieces, c.relay.bytes, c.relay.failed_pieces,
               c.relay.rejected, c.relay.lane_resets,
               p.count ? p.sum_ns / 1e3 / p.count : 0.0,
               pxn::abi::latency_over(p, 1000000), p.count, c.relay.am_messages,
               c.relay.am_credit_waits);
    }
    return 0;
}
