/*
 * PCIe topology: which network device is nearest to a GPU, read from sysfs
 * the way NCCL chooses its PXN proxy and UCX its topology distances.
 *
 * Contract
 * - A device's place is its path in the PCI hierarchy: the resolved
 *   /sys/bus/pci/devices/<bus id> link (a GPU, from its PCI bus id) or
 *   /sys/class/{infiniband,net}/<name>/device link (a NIC, from its UCX
 *   device name, a ":<port>" suffix ignored), e.g.
 *   /sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0.
 * - Distance between two places: the PCI hops from each up to their
 *   deepest common ancestor, summed (a GPU and a NIC behind one PCIe switch
 *   are 4 apart: up to the switch's downstream ports and its upstream
 *   port). Devices on different NUMA nodes (sysfs numa_node, when both are
 *   known) are kCrossSocket further apart than any path within a socket.
 * - nearest_device(): the candidate with the smallest distance. Several
 *   GPUs may share the same nearest NICs (two GPUs and two NICs behind one
 *   PCIe switch): the GPUs that share a set of nearest NICs, in bus id
 *   order, take those NICs, in name order, round-robin, so that GPU i of
 *   the switch gets NIC i, as NCCL pairs them. Candidates whose place
 *   cannot be found are skipped. -1 when none (or the GPU) can be placed.
 * - choose_home(): the process's home device (docs/topology.md, "Home
 *   rail"): UCX_PXN_HOME_DEVICE when set; else the candidate nearest to the
 *   process's GPU; else, while the GPU is not known yet but may become
 *   known and the choice matters (two or more candidates with a PCI
 *   place), "deferred"; else the device the interface is opened on.
 * - `sysfs_root` is "/sys" in production; tests pass a fake tree. Reads
 *   sysfs only (no allocation beyond strings); never logs.
 */
#ifndef PXN_TOPOLOGY_H_
#define PXN_TOPOLOGY_H_

#include <string>
#include <vector>

namespace pxn {

constexpr unsigned kCrossSocket = 1000;

struct PciPlace {
    std::string path;      /* resolved sysfs path, "" if unknown */
    int         numa_node = -1;
};

/* "0000:3B:00.0" or "00000000:3b:00.0" -> "0000:3b:00.0" (sysfs's form). */
std::string normalize_bus_id(const std::string &bus_id);

/* A GPU's PCI bus id (any case, 4- or 8-digit domain) -> its place. */
PciPlace gpu_place(const std::string &sysfs_root, const std::string &bus_id);
/* "mlx5_0:1", "eth0" -> its place. */
PciPlace nic_place(const std::string &sysfs_root, const std::string &device);

unsigned pci_distance(const PciPlace &a, const PciPlace &b);

/* PCI bus ids of the GPUs in the tree (NVIDIA display and 3D
 * controllers), sorted. */
std::vector<std::string> list_gpus(const std::string &sysfs_root);

/* Index into `devices` (UCX device names) of the one nearest to the GPU of
 * PCI bus id `gpu_bus_id`, -1 if none; *distance gets its distance. */
int nearest_device(const std::string &sysfs_root, const std::string &gpu_bus_id,
                   const std::vector<std::string> &devices,
                   unsigned *distance = nullptr);

struct HomeQuery {
    std::string              explicit_device; /* UCX_PXN_HOME_DEVICE */
    std::vector<std::string> candidates;      /* inner network devices */
    std::string              iface_device;    /* the iface being opened */
    std::string              gpu_bus_id;      /* the process's GPU, "" unknown */
    bool                     gpu_possible = false; /* may become known later */
    std::string              sysfs_root   = "/sys";
};

struct HomeChoice {
    bool        deferred = false; /* wait until the GPU is known */
    std::string device;
    std::string reason;           /* for the log */
};

HomeChoice choose_home(const HomeQuery &query);

} // namespace pxn

#endif
