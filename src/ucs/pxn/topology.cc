#include "topology.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <dirent.h>
#include <fstream>

namespace pxn {

namespace {

PciPlace place_of(const std::string &link)
{
    PciPlace place;
    char resolved[PATH_MAX];
    if (realpath(link.c_str(), resolved) == nullptr) {
        return place;
    }
    place.path = resolved;
    std::ifstream numa(place.path + "/numa_node");
    if (!(numa >> place.numa_node)) {
        place.numa_node = -1;
    }
    return place;
}

std::vector<std::string> components(const std::string &path)
{
    std::vector<std::string> parts;
    size_t start = 0;
    while (start < path.size()) {
        const size_t end = std::min(path.find('/', start), path.size());
        if (end > start) {
            parts.push_back(path.substr(start, end - start));
        }
        start = end + 1;
    }
    return parts;
}

} // namespace

/* "00000000:3B:00.0" (8-digit domain, as nvidia-smi prints it) -> sysfs's
 * "0000:3b:00.0" */
std::string normalize_bus_id(const std::string &bus_id)
{
    std::string id = bus_id;
    std::transform(id.begin(), id.end(), id.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    const size_t colon = id.find(':');
    if ((colon != std::string::npos) && (colon > 4)) {
        id.erase(0, colon - 4);
    }
    return id;
}

namespace {

/* "dddd:bb:dd.f" in hex digits, nothing else (no path can hide in it). */
bool is_bus_id(const std::string &id)
{
    static const char kShape[] = "hhhh:hh:hh.h";
    if (id.size() != sizeof(kShape) - 1) {
        return false;
    }
    for (size_t i = 0; i < id.size(); ++i) {
        if ((kShape[i] == 'h') ? !isxdigit(static_cast<unsigned char>(id[i])) :
                                 (id[i] != kShape[i])) {
            return false;
        }
    }
    return true;
}

} // namespace

PciPlace gpu_place(const std::string &sysfs_root, const std::string &bus_id)
{
    const std::string id = normalize_bus_id(bus_id);
    if (!is_bus_id(id)) {
        return PciPlace();
    }
    return place_of(sysfs_root + "/bus/pci/devices/" + id);
}

PciPlace nic_place(const std::string &sysfs_root, const std::string &device)
{
    const std::string name = device.substr(0, device.find(':'));
    for (const char *cls : {"infiniband", "net"}) {
        PciPlace place = place_of(sysfs_root + "/class/" + cls + "/" + name +
                                  "/device");
        if (!place.path.empty()) {
            return place;
        }
    }
    return PciPlace();
}

unsigned pci_distance(const PciPlace &a, const PciPlace &b)
{
    const std::vector<std::string> pa = components(a.path);
    const std::vector<std::string> pb = components(b.path);
    size_t common = 0;
    while ((common < pa.size()) && (common < pb.size()) &&
           (pa[common] == pb[common])) {
        ++common;
    }
    unsigned hops = static_cast<unsigned>((pa.size() - common) +
                                          (pb.size() - common));
    if ((a.numa_node >= 0) && (b.numa_node >= 0) &&
        (a.numa_node != b.numa_node)) {
        hops += kCrossSocket;
    }
    return hops;
}

std::vector<std::string> list_gpus(const std::string &sysfs_root)
{
    std::vector<std::string> gpus;
    const std::string dir = sysfs_root + "/bus/pci/devices";
    DIR *d                = opendir(dir.c_str());
    if (d == nullptr) {
        return gpus;
    }
    for (dirent *e; (e = readdir(d)) != nullptr;) {
        const std::string name = e->d_name;
        std::ifstream vendor(dir + "/" + name + "/vendor");
        std::ifstream cls(dir + "/" + name + "/class");
        std::string v, c;
        /* NVIDIA; VGA (0x0300xx) or 3D (0x0302xx) controller */
        if ((vendor >> v) && (cls >> c) && (v == "0x10de") &&
            ((c.rfind("0x0300", 0) == 0) || (c.rfind("0x0302", 0) == 0))) {
            gpus.push_back(name);
        }
    }
    closedir(d);
    std::sort(gpus.begin(), gpus.end());
    return gpus;
}

namespace {

/* Indices of the placed devices nearest to `gpu`, in `devices` order. */
std::vector<size_t> nearest_set(const PciPlace &gpu,
                                const std::vector<PciPlace> &nics,
                                unsigned *distance)
{
    std::vector<size_t> best;
    unsigned best_dist = 0;
    for (size_t i = 0; i < nics.size(); ++i) {
        if (nics[i].path.empty()) {
            continue;
        }
        const unsigned d = pci_distance(gpu, nics[i]);
        if (best.empty() || (d < best_dist)) {
            best      = {i};
            best_dist = d;
        } else if (d == best_dist) {
            best.push_back(i);
        }
    }
    *distance = best_dist;
    return best;
}

} // namespace

int nearest_device(const std::string &sysfs_root, const std::string &gpu_bus_id,
                   const std::vector<std::string> &devices, unsigned *distance)
{
    const PciPlace gpu = gpu_place(sysfs_root, gpu_bus_id);
    if (gpu.path.empty()) {
        return -1;
    }
    std::vector<PciPlace> nics;
    for (const std::string &dev : devices) {
        nics.push_back(nic_place(sysfs_root, dev));
    }
    unsigned dist;
    std::vector<size_t> mine = nearest_set(gpu, nics, &dist);
    if (mine.empty()) {
        return -1;
    }
    /* Ties: this GPU's rank among the GPUs with the same nearest set. */
    size_t rank = 0;
    const std::string me = normalize_bus_id(gpu_bus_id);
    for (const std::string &other : list_gpus(sysfs_root)) {
        if (other >= me) {
            continue;
        }
        unsigned d;
        const PciPlace place = gpu_place(sysfs_root, other);
        if (!place.path.empty() && (nearest_set(place, nics, &d) == mine)) {
            ++rank;
        }
    }
    std::sort(mine.begin(), mine.end(), [&](size_t a, size_t b) {
        return devices[a] < devices[b];
    });
    if (distance != nullptr) {
        *distance = dist;
    }
    return static_cast<int>(mine[rank % mine.size()]);
}

HomeChoice choose_home(const HomeQuery &q)
{
    HomeChoice choice;
    if (!q.explicit_device.empty()) {
        choice.device = q.explicit_device;
        choice.reason = "UCX_PXN_HOME_DEVICE";
        return choice;
    }
    unsigned placed = 0;
    for (const std::string &dev : q.candidates) {
        placed += !nic_place(q.sysfs_root, dev).path.empty();
    }
    if (!q.gpu_bus_id.empty() && (placed > 0)) {
        unsigned distance = 0;
        const int i = nearest_device(q.sysfs_root, q.gpu_bus_id, q.candidates,
                                     &distance);
        if (i >= 0) {
            choice.device = q.candidates[i];
            choice.reason = "nearest to GPU " + q.gpu_bus_id + " (" +
                            std::to_string(distance) + " PCI hops)";
            return choice;
        }
    }
    if (q.gpu_bus_id.empty() && q.gpu_possible && (placed >= 2)) {
        choice.deferred = true;
        choice.reason   = "waiting for the process's GPU";
        return choice;
    }
    choice.device = q.iface_device;
    choice.reason = q.gpu_bus_id.empty() ? "the interface's device (no GPU known)" :
                                           "the interface's device (GPU not placed)";
    return choice;
}

} // namespace pxn
