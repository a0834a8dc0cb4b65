#include "op_cost_uct.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace pxn_bench {

[[noreturn]] void die(const std::string &why)
{
    fprintf(stderr, "ucx_pxn_op_cost: %s\n", why.c_str());
    exit(1);
}

void check(ucs_status_t status, const char *what)
{
    if (status != UCS_OK) {
        die(std::string(what) + ": " + ucs_status_string(status));
    }
}

std::string hex(const void *data, size_t length)
{
    static const char digits[] = "0123456789abcdef";
    std::string out;
    for (size_t i = 0; i < length; ++i) {
        const uint8_t b = static_cast<const uint8_t*>(data)[i];
        out += digits[b >> 4];
        out += digits[b & 15];
    }
    return out;
}

std::vector<uint8_t> unhex(const std::string &text)
{
    std::vector<uint8_t> out;
    for (size_t i = 0; i + 1 < text.size(); i += 2) {
        out.push_back(uint8_t(std::stoul(text.substr(i, 2), nullptr, 16)));
    }
    return out;
}

void Uct::open(const char *md_name, const char *tl, const char *dev)
{
    uct_component_h *components;
    unsigned count;
    check(uct_query_components(&components, &count), "uct_query_components");
    for (unsigned i = 0; (i < count) && (md == nullptr); ++i) {
        uct_component_attr_t ca = {};
        ca.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
        uct_component_query(components[i], &ca);
        std::vector<uct_md_resource_desc_t> mds(ca.md_resource_count);
        ca.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        ca.md_resources = mds.data();
        uct_component_query(components[i], &ca);
        for (const auto &m : mds) {
            if (strcmp(m.md_name, md_name) == 0) {
                uct_md_config_t *config;
                check(uct_md_config_read(components[i], NULL, NULL, &config),
                      "uct_md_config_read");
                check(uct_md_open(components[i], md_name, config, &md),
                      "uct_md_open");
                uct_config_release(config);
                component = components[i];
                break;
            }
        }
    }
    uct_release_component_list(components);
    if (md == nullptr) {
        die(std::string("no md named ") + md_name + " (is pxn installed?)");
    }
    check(uct_md_query(md, &md_attr), "uct_md_query");
    check(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &async),
          "async");
    check(uct_worker_create(async, UCS_THREAD_MODE_SINGLE, &worker), "worker");
    uct_iface_config_t *config;
    check(uct_md_iface_config_read(md, tl, NULL, NULL, &config),
          "uct_md_iface_config_read");
    uct_iface_params_t params   = {};
    params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                  UCT_IFACE_PARAM_FIELD_DEVICE;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = tl;
    params.mode.device.dev_name = dev;
    check(uct_iface_open(md, worker, &params, config, &iface), "uct_iface_open");
    uct_config_release(config);
    check(uct_iface_query(iface, &attr), "uct_iface_query");
    uct_iface_progress_enable(iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
}

uint8_t *Uct::alloc(size_t size, uct_mem_h *memh, std::string *rkey)
{
    void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) {
        die("mmap of the buffer failed");
    }
    memset(p, 0x5a, size);
    check(uct_md_mem_reg(md, p, size, UCT_MD_MEM_ACCESS_ALL, memh),
          "uct_md_mem_reg");
    std::vector<uint8_t> packed(md_attr.rkey_packed_size);
    check(uct_md_mkey_pack(md, *memh, packed.data()), "uct_md_mkey_pack");
    *rkey = hex(packed.data(), packed.size());
    return static_cast<uint8_t*>(p);
}

void Counters::map(const std::string &group, pid_t pid)
{
    const char *base      = getenv("UCX_PXN_REGISTRY_DIR");
    const std::string dir = std::string((base && *base) ? base : "/dev/shm") +
                            "/ucx-pxn-" + std::to_string(geteuid()) +
                            "-" + group;
    const std::string prefix = "p" + std::to_string(pid) + "-";
    DIR *d = opendir(dir.c_str());
    for (dirent *e; (d != nullptr) && ((e = readdir(d)) != nullptr);) {
        const std::string name = e->d_name;
        if ((name.rfind(prefix, 0) != 0) || (name.size() < 5) ||
            (name.compare(name.size() - 4, 4, ".ctl") != 0)) {
            continue;
        }
        const int fd = open((dir + "/" + name).c_str(), O_RDONLY);
        void *m = (fd < 0) ? MAP_FAILED :
                  mmap(nullptr, pxn::abi::kLaneOffset, PROT_READ, MAP_SHARED,
                       fd, 0);
        if (fd >= 0) {
            close(fd);
        }
        if (m != MAP_FAILED) {
            blocks_.push_back(reinterpret_cast<const pxn::abi::ProcessCounters*>(
                    static_cast<uint8_t*>(m) + pxn::abi::kCountersOffset));
        }
    }
    if (d != nullptr) {
        closedir(d);
    }
    if (blocks_.empty()) {
        die("no registry entry of pid " + std::to_string(pid) + " in group " +
            group);
    }
}

uint64_t Counters::relay_done() const
{
    uint64_t n = 0;
    for (auto *c : blocks_) {
        n += pxn::abi::load_relaxed(c->relay.pieces) +
             pxn::abi::load_relaxed(c->relay.failed_pieces) +
             pxn::abi::load_relaxed(c->relay.rejected);
    }
    return n;
}

uint64_t Counters::sent() const
{
    uint64_t n = 0;
    for (auto *c : blocks_) {
        n += pxn::abi::load_relaxed(c->sender.pieces);
    }
    return n;
}

} // namespace pxn_bench
