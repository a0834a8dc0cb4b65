/*
 * ucx_pxn_footprint: the memory a process's pxn relay takes as this one
 * process opens pxn and lanes of its relay are claimed and released
 * (docs/gpu.md, docs/benchmarks.md): GPU memory from the device's free
 * memory (cuMemGetInfo), or with --host the blocks of its host arena file.
 *
 *   ucx_pxn_footprint [--gpu 0 | --host] [--linger 2] [--env UCX_PXN_X=v]...
 *
 * The process makes the primary context of its GPU current first (a
 * context costs memory of its own, measured before anything else), then
 * opens a pxn iface (inner cuda_ipc, UCX_PXN_ARENA=cuda; --host: inner cma,
 * UCX_PXN_ARENA=host, no GPU needed) and waits for its
 * relay to be published and its warm lanes to be backed. Claims come from
 * this process too, as other sender identities through the registry (the
 * lane protocol of lane_claim.h, the relay's acknowledgement awaited), so
 * no other process's context muddies the figures: 1 lane, then all of
 * them; then every lane is given back, and the free memory is read again
 * at once (warm lanes keep their memory) and after the linger time.
 * "pxn" is the free memory before opening pxn minus the free memory now.
 * Other processes on the GPU change the free memory too: run it alone.
 */
#include <bench/bench_units.h>
#include <apps/peer_process.h>

#include <uct/pxn/pxn_cuda.h>

#include <ucs/pxn/control_file.h>
#include <ucs/pxn/identity.h>
#include <ucs/pxn/peer_mapping.h>
#include <ucs/pxn/registry.h>
#include <uct/api/uct.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <memory>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

using pxn::uct::CudaDriver;

namespace {

[[noreturn]] void die(const std::string &why)
{
    fprintf(stderr, "ucx_pxn_footprint: %s\n", why.c_str());
    exit(1);
}

double now_s()
{
    return std::chrono::duration<double>(
            std::chrono::steady_clock::now().time_since_epoch()).count();
}

/* Polls until done() or `seconds`. */
template<typename F> bool wait_for(F done, double seconds)
{
    const double end = now_s() + seconds;
    while (!done()) {
        if (now_s() > end) {
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

/* Bytes the registry's file system holds for this process's arena file. */
uint64_t arena_file_bytes(const std::string &group)
{
    const std::string dir = "/dev/shm/ucx-pxn-" + std::to_string(geteuid()) +
                            "-" + group;
    const std::string prefix = "p" + std::to_string(getpid()) + "-";
    DIR *d = opendir(dir.c_str());
    uint64_t bytes = 0;
    for (dirent *e; (d != nullptr) && ((e = readdir(d)) != nullptr);) {
        const std::string name = e->d_name;
        struct stat st;
        if ((name.rfind(prefix, 0) == 0) && (name.size() > 6) &&
            (name.compare(name.size() - 6, 6, ".arena") == 0) &&
            (stat((dir + "/" + name).c_str(), &st) == 0)) {
            bytes = uint64_t(st.st_blocks) * 512;
        }
    }
    if (d != nullptr) {
        closedir(d);
    }
    return bytes;
}

/* Free memory: of the GPU, or (host) "1 TiB less the arena file's blocks",
 * so that both read the same way. */
struct Probe {
    const CudaDriver *cu = nullptr;
    std::string       group;

    double free_bytes() const
    {
        if (cu == nullptr) {
            return double(1ull << 40) - double(arena_file_bytes(group));
        }
        size_t free = 0, total = 0;
        if (cu->cuMemGetInfo(&free, &total) != CUDA_SUCCESS) {
            die("cuMemGetInfo failed");
        }
        return double(free);
    }
};

/* A pxn iface of this process (its relay comes with it). */
struct PxnIface {
    ucs_async_context_t *async  = nullptr;
    uct_worker_h         worker = nullptr;
    uct_md_h             md     = nullptr;
    uct_iface_h          iface  = nullptr;

    void open(const char *md_name, const char *device)
    {
        uct_component_h *components;
        unsigned count;
        if (uct_query_components(&components, &count) != UCS_OK) {
            die("uct_query_components");
        }
        for (unsigned i = 0; (i < count) && (md == nullptr); ++i) {
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
                const ucs_status_t status = uct_md_open(components[i], m.md_name,
                                                        config, &md);
                uct_config_release(config);
                if (status != UCS_OK) {
                    die(std::string("uct_md_open: ") + ucs_status_string(status));
                }
            }
        }
        uct_release_component_list(components);
        if (md == nullptr) {
            die(std::string("no md ") + md_name +
                " (is the module installed, a GPU usable?)");
        }
        uct_iface_config_t *config;
        if ((ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &async) !=
             UCS_OK) ||
            (uct_worker_create(async, UCS_THREAD_MODE_SINGLE, &worker) != UCS_OK) ||
            (uct_md_iface_config_read(md, "pxn", NULL, NULL, &config) != UCS_OK)) {
            die("worker or iface configuration");
        }
        uct_iface_params_t params   = {};
        params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                      UCT_IFACE_PARAM_FIELD_DEVICE;
        params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
        params.mode.device.tl_name  = "pxn";
        params.mode.device.dev_name = device;
        const ucs_status_t status = uct_iface_open(md, worker, &params, config,
                                                   &iface);
        uct_config_release(config);
        if (status != UCS_OK) {
            die(std::string("uct_iface_open: ") + ucs_status_string(status));
        }
    }

    void close()
    {
        uct_iface_close(iface);
        uct_worker_destroy(worker);
        ucs_async_context_destroy(async);
        uct_md_close(md);
    }
};

/* Geometry of this process's published relay, from its control file. */
bool own_geometry(const std::string &group, pxn::Geometry *geometry)
{
    const std::string dir = "/dev/shm/ucx-pxn-" + std::to_string(geteuid()) +
                            "-" + group;
    const std::string prefix = "p" + std::to_string(getpid()) + "-";
    DIR *d = opendir(dir.c_str());
    std::string path;
    for (dirent *e; (d != nullptr) && ((e = readdir(d)) != nullptr);) {
        const std::string name = e->d_name;
        if ((name.rfind(prefix, 0) == 0) && (name.size() > 4) &&
            (name.compare(name.size() - 4, 4, ".ctl") == 0)) {
            path = dir + "/" + name;
        }
    }
    if (d != nullptr) {
        closedir(d);
    }
    pxn::abi::ProcessHeader header;
    const int fd = path.empty() ? -1 : ::open(path.c_str(), O_RDONLY);
    const bool ok = (fd >= 0) && (pread(fd, &header, sizeof(header), 0) ==
                                  ssize_t(sizeof(header)));
    if (fd >= 0) {
        ::close(fd);
    }
    if (ok) {
        *geometry = pxn::header_geometry(header);
    }
    return ok;
}

uint64_t lanes_backed(const std::string &group)
{
    pxn::abi::ProcessCounters c = {};
    pxn_tools::read_counters(group, getpid(), &c);
    return c.relay.lanes_backed;
}

} // namespace

int main(int argc, char **argv)
{
    int    gpu    = 0;
    bool   host   = false;
    double linger = 2;
    const std::string group = "footprint-" + std::to_string(getpid());
    std::vector<std::string> env;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const char *v = (i + 1 < argc) ? argv[i + 1] : nullptr;
        if (a == "--host") {
            host = true;
            continue;
        } else if ((a == "--gpu") && v) {
            gpu = atoi(v);
        } else if ((a == "--linger") && v) {
            linger = atof(v);
        } else if ((a == "--env") && v && strchr(v, '=')) {
            env.push_back(v);
        } else {
            fprintf(stderr, "usage: ucx_pxn_footprint [--gpu 0 | --host] "
                            "[--linger 2] [--env UCX_PXN_X=v]...\n");
            return 2;
        }
        ++i;
    }
    setenv("UCX_PXN_ENABLE", "y", 1);
    setenv("UCX_PXN_NET_TLS", host ? "cma" : "cuda_ipc", 1);
    setenv("UCX_PXN_ARENA", host ? "host" : "cuda", 1);
    setenv("UCX_PXN_RAIL_MAP", host ? "memory:railB" : "cuda:railB", 1);
    setenv("UCX_PXN_NODE_ID", "node0", 1);
    setenv("UCX_PXN_GROUP", group.c_str(), 1);
    if (!host) {
        setenv("UCX_PXN_CUDA_DEVICE", std::to_string(gpu).c_str(), 1);
    }
    setenv("UCX_PXN_LANE_LINGER", (std::to_string(linger) + "s").c_str(), 1);
    for (const auto &e : env) {
        const size_t eq = e.find('=');
        setenv(e.substr(0, eq).c_str(), e.substr(eq + 1).c_str(), 1);
    }

    Probe g;
    g.group = group;
    if (host) {
        printf("ucx_pxn_footprint: host arena, blocks of its file as this "
               "process's pxn relay opens and its lanes are claimed\n");
    } else {
        g.cu = CudaDriver::get();
        if ((g.cu == nullptr) || (g.cu->use_device(gpu) != UCS_OK)) {
            die("no usable GPU " + std::to_string(gpu));
        }
        size_t free = 0, total = 0;
        g.cu->cuMemGetInfo(&free, &total);
        printf("ucx_pxn_footprint: GPU %d, %.1f GiB, free memory (cuMemGetInfo) "
               "as this process's pxn relay opens and its lanes are claimed\n",
               gpu, total / double(1ull << 30));
    }
    const double before = g.free_bytes();
    printf("%-32s %12s %10s %6s\n", "", host ? "" : "free MiB", "pxn MiB",
           "lanes");
    auto row = [&](const char *what, uint64_t lanes) {
        const double free = g.free_bytes();
        printf("%-32s %12s %10.1f %6lu\n", what,
               host ? "" : std::to_string(int64_t(free / 1048576.0)).c_str(),
               (before - free) / 1048576.0, lanes);
        fflush(stdout);
    };
    row("before opening pxn", 0);

    PxnIface pxn_iface;
    pxn_iface.open(host ? "pxn_cma" : "pxn_cuda_ipc", host ? "memory" : "cuda");
    pxn::Geometry geometry;
    if (!wait_for([&] { return own_geometry(group, &geometry); }, 20)) {
        die("the relay was not published (a GPU arena needs UCX_PXN_ARENA=cuda "
            "to work: see the UCX log)");
    }
    row("pxn open, relay published", lanes_backed(group));
    pxn::Settings settings;
    settings.group    = group;
    settings.node_id  = "node0";
    settings.net_tls  = {host ? "cma" : "cuda_ipc"};
    settings.geometry = geometry;
    const char *warm  = getenv("UCX_PXN_WARM_LANES");
    const uint64_t warm_lanes = std::min<uint64_t>(warm ? atoi(warm) : 1,
                                                   geometry.lanes);
    printf("geometry %u lanes x %u slots x %s (%s per lane, %s with every lane "
           "claimed), %lu warm lane(s), linger %.1f s\n", geometry.lanes,
           geometry.slots, pxn_tools::human(geometry.slot_size).c_str(),
           pxn_tools::human(uint64_t(geometry.slots) * geometry.slot_size).c_str(),
           pxn_tools::human(geometry.arena_size()).c_str(), warm_lanes, linger);
    /* the warm lanes are backed once the relay has been quiet for a while */
    wait_for([&] { return lanes_backed(group) >= warm_lanes; }, 10);
    row("pxn open, warm lanes backed", lanes_backed(group));

    std::unique_ptr<pxn::Registry> registry;
    std::vector<pxn::PeerInfo> peers;
    std::unique_ptr<pxn::PeerMapping> mapping;
    if ((pxn::Registry::open(settings, &registry) != UCS_OK) ||
        (registry->discover(nullptr, &peers) != UCS_OK) || (peers.size() != 1) ||
        (registry->map_peer(peers[0], &mapping) != UCS_OK)) {
        die("cannot map this process's relay");
    }
    pxn::SenderWakeup wakeup;
    mapping->open_wakeup(&wakeup);

    std::vector<pxn::ProcessIdentity> senders;
    for (uint32_t n = 1; n <= geometry.lanes; ++n) {
        pxn::ProcessIdentity self;
        pxn::LaneClaim claim;
        if ((pxn::current_process(&self) != UCS_OK) ||
            (pxn::random_epoch(&self.epoch) != UCS_OK) ||
            (mapping->claim_lane(self, &claim) != UCS_OK)) {
            die("claim failed");
        }
        senders.push_back(self);
        const pxn::abi::LaneConsumer &consumer = mapping->lane(claim.index).consumer();
        if (!wait_for([&] {
                wakeup.notify();
                return pxn::abi::load_acquire(consumer.lane_epoch) ==
                       claim.lane_epoch;
            }, 20)) {
            die("the relay did not acknowledge a claim");
        }
        if (pxn::abi::load_relaxed(consumer.ack_status) != UCS_OK) {
            die(std::string("the relay refused a lane: ") +
                ucs_status_string(ucs_status_t(consumer.ack_status)));
        }
        if ((n == 1) || (n == geometry.lanes)) {
            row(n == 1 ? "1 lane claimed" : "every lane claimed",
                lanes_backed(group));
        }
    }
    for (uint32_t i = 0; i < geometry.lanes; ++i) {
        for (const auto &s : senders) {
            mapping->release_lane(s, i);
        }
    }
    wakeup.notify();
    /* the relay notices the free lanes in its next rounds */
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    row("every lane released (warm)", lanes_backed(group));
    wait_for([&] { return lanes_backed(group) <= warm_lanes; }, linger + 10);
    row("after the linger time", lanes_backed(group));

    mapping.reset();
    registry.reset();
    pxn_iface.close();
    row("pxn closed", 0);
    return 0;
}
