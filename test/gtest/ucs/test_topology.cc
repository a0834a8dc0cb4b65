#include <ucs/pxn/topology.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <ftw.h>
#include <map>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace {

using pxn::HomeChoice;
using pxn::HomeQuery;
using pxn::PciPlace;

std::string bdf(unsigned bus, unsigned dev = 0, unsigned fn = 0)
{
    char id[32];
    snprintf(id, sizeof(id), "0000:%02x:%02x.%x", bus, dev, fn);
    return id;
}

std::string host_bridge(unsigned bus)
{
    char id[32];
    snprintf(id, sizeof(id), "pci0000:%02x", bus);
    return id;
}

int remove_entry(const char *path, const struct stat *, int, struct FTW *)
{
    return ::remove(path);
}

/*
 * A fake sysfs tree laid out as Linux lays it out:
 *   devices/pci0000:00/0000:00:01.0/.../<bus id>/{vendor,class,numa_node}
 *   bus/pci/devices/<bus id> -> ../../../devices/.../<bus id>
 *   devices/.../<bus id>/infiniband/mlx5_0/device -> ../../../<bus id>
 *   class/infiniband/mlx5_0 -> ../../devices/.../<bus id>/infiniband/mlx5_0
 * (net likewise; virtual net devices under devices/virtual/net without a
 * device link).
 */
class Topology : public ::testing::Test {
protected:
    static constexpr const char *kNvidia   = "0x10de";
    static constexpr const char *kMellanox = "0x15b3";
    static constexpr const char *kPlx      = "0x10b5";

    void SetUp() override
    {
        char dir[] = "/tmp/pxn-topology-XXXXXX";
        ASSERT_NE(nullptr, mkdtemp(dir));
        root_ = dir;
    }

    void TearDown() override
    {
        if (!root_.empty()) {
            EXPECT_EQ(0, nftw(root_.c_str(), remove_entry, 16,
                              FTW_DEPTH | FTW_PHYS));
        }
    }

    void mkdirs(const std::string &path)
    {
        for (size_t pos = root_.size() + 1; pos != std::string::npos;) {
            pos = path.find('/', pos + 1);
            const std::string prefix = path.substr(0, pos);
            if ((mkdir(prefix.c_str(), 0755) != 0) && (errno != EEXIST)) {
                ADD_FAILURE() << "mkdir " << prefix;
                return;
            }
        }
    }

    void write(const std::string &path, const std::string &content)
    {
        std::ofstream f(path);
        f << content << "\n";
        EXPECT_TRUE(f.good()) << path;
    }

    void link(const std::string &target, const std::string &path)
    {
        EXPECT_EQ(0, symlink(target.c_str(), path.c_str())) << path;
    }

    /* A PCI function under devices/<parent>; returns its path under
     * devices/, the parent of what hangs below it. */
    std::string add_pci(const std::string &parent, const std::string &bus_id,
                        const std::string &vendor, const std::string &cls,
                        int numa)
    {
        const std::string rel = parent + "/" + bus_id;
        const std::string dir = root_ + "/devices/" + rel;
        mkdirs(dir);
        write(dir + "/vendor", vendor);
        write(dir + "/class", cls);
        write(dir + "/numa_node", std::to_string(numa));
        mkdirs(root_ + "/bus/pci/devices");
        link("../../../devices/" + rel, root_ + "/bus/pci/devices/" + bus_id);
        pci_[bus_id] = rel;
        return rel;
    }

    std::string add_bridge(const std::string &parent, const std::string &bus_id,
                           int numa)
    {
        return add_pci(parent, bus_id, kPlx, "0x060400", numa);
    }

    std::string add_gpu(const std::string &parent, const std::string &bus_id,
                        int numa)
    {
        return add_pci(parent, bus_id, kNvidia, "0x030200", numa);
    }

    std::string add_nic_function(const std::string &parent,
                                 const std::string &bus_id, int numa)
    {
        return add_pci(parent, bus_id, kMellanox, "0x020700", numa);
    }

    /* <kind> "infiniband" or "net": the class device `name` of PCI function
     * `bus_id`. */
    void add_nic(const std::string &kind, const std::string &name,
                 const std::string &bus_id)
    {
        const std::string rel = pci_.at(bus_id) + "/" + kind + "/" + name;
        mkdirs(root_ + "/devices/" + rel);
        link("../../../" + bus_id, root_ + "/devices/" + rel + "/device");
        mkdirs(root_ + "/class/" + kind);
        link("../../devices/" + rel, root_ + "/class/" + kind + "/" + name);
    }

    /* A net device with no PCI function (lo, veth). */
    void add_virtual_net(const std::string &name)
    {
        const std::string rel = "virtual/net/" + name;
        mkdirs(root_ + "/devices/" + rel);
        mkdirs(root_ + "/class/net");
        link("../../devices/" + rel, root_ + "/class/net/" + name);
    }

    /* A root port of host bridge `host` with a PCIe switch behind it
     * (upstream port <bus+1>:00.0, downstream ports <bus+2>:<i>.0); returns
     * the downstream ports. */
    std::vector<std::string> add_switch(unsigned bus, unsigned ports, int numa)
    {
        const std::string rp = add_bridge(host_bridge(bus), bdf(bus, 1), numa);
        const std::string up = add_bridge(rp, bdf(bus + 1), numa);
        std::vector<std::string> downs;
        for (unsigned i = 0; i < ports; ++i) {
            downs.push_back(add_bridge(up, bdf(bus + 2, i), numa));
        }
        return downs;
    }

    HomeQuery query(const std::vector<std::string> &candidates,
                    const std::string &gpu = "")
    {
        HomeQuery q;
        q.candidates   = candidates;
        q.iface_device = "iface0";
        q.gpu_bus_id   = gpu;
        q.sysfs_root   = root_;
        return q;
    }

    std::string nearest(const std::string &gpu,
                        const std::vector<std::string> &devices,
                        unsigned *distance = nullptr)
    {
        const int i = pxn::nearest_device(root_, gpu, devices, distance);
        return (i < 0) ? "<none>" : devices.at(size_t(i));
    }

    /* Every GPU's nearest device and home device. */
    void expect_homes(const std::vector<std::string> &gpus,
                      const std::vector<std::string> &devices,
                      const std::vector<std::string> &expected)
    {
        ASSERT_EQ(gpus.size(), expected.size());
        EXPECT_EQ(gpus, pxn::list_gpus(root_));
        for (size_t g = 0; g < gpus.size(); ++g) {
            SCOPED_TRACE("GPU " + std::to_string(g) + " " + gpus[g]);
            EXPECT_EQ(expected[g], nearest(gpus[g], devices));
            HomeQuery q        = query(devices, gpus[g]);
            q.gpu_possible     = true;
            const HomeChoice c = pxn::choose_home(q);
            EXPECT_FALSE(c.deferred);
            EXPECT_EQ(expected[g], c.device);
            EXPECT_NE(std::string::npos, c.reason.find(gpus[g])) << c.reason;
        }
    }

    /* 8 switches, each with one GPU and one NIC; 4 per NUMA node. */
    std::vector<std::string> build_one_nic_per_gpu()
    {
        std::vector<std::string> gpus;
        for (unsigned s = 0; s < 8; ++s) {
            const unsigned bus = 0x10 + 0x20 * s;
            const int numa     = int(s / 4);
            const auto downs   = add_switch(bus, 2, numa);
            add_gpu(downs[0], bdf(bus + 3), numa);
            add_nic_function(downs[1], bdf(bus + 4), numa);
            add_nic("infiniband", "mlx5_" + std::to_string(s), bdf(bus + 4));
            gpus.push_back(bdf(bus + 3));
        }
        return gpus;
    }

    std::string                        root_;
    std::map<std::string, std::string> pci_; /* bus id -> path under devices */
};

std::vector<std::string> mlx5(unsigned n)
{
    std::vector<std::string> names;
    for (unsigned i = 0; i < n; ++i) {
        names.push_back("mlx5_" + std::to_string(i));
    }
    return names;
}

std::vector<std::string> reversed(std::vector<std::string> v)
{
    return std::vector<std::string>(v.rbegin(), v.rend());
}

TEST(TopologyBusId, NormalizesCaseAndEightDigitDomain)
{
    EXPECT_EQ("0000:3b:00.0", pxn::normalize_bus_id("0000:3B:00.0"));
    EXPECT_EQ("0000:3b:00.0", pxn::normalize_bus_id("00000000:3B:00.0"));
    EXPECT_EQ("0000:3b:00.0", pxn::normalize_bus_id("00000000:3b:00.0"));
    EXPECT_EQ("0000:3b:00.0", pxn::normalize_bus_id("0000:3b:00.0"));
    EXPECT_EQ("0001:af:1f.7", pxn::normalize_bus_id("00000001:AF:1F.7"));
}

TEST(TopologyDistance, CountsHopsToTheDeepestCommonAncestor)
{
    PciPlace gpu{"/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/"
                 "0000:02:00.0/0000:03:00.0", 0};
    PciPlace nic{"/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/"
                 "0000:02:01.0/0000:04:00.0", 0};
    PciPlace far{"/sys/devices/pci0000:40/0000:40:01.0/0000:41:00.0", 0};
    EXPECT_EQ(4u, pxn::pci_distance(gpu, nic));
    EXPECT_EQ(4u, pxn::pci_distance(nic, gpu));
    EXPECT_EQ(0u, pxn::pci_distance(gpu, gpu));
    EXPECT_EQ(8u, pxn::pci_distance(gpu, far));
    /* A device and the bridge above it. */
    PciPlace up{"/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", 0};
    EXPECT_EQ(2u, pxn::pci_distance(gpu, up));
}

TEST(TopologyDistance, DifferentNumaNodesAddCrossSocketOnlyWhenBothKnown)
{
    PciPlace a{"/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", 0};
    PciPlace b{"/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0", 1};
    EXPECT_EQ(6u + pxn::kCrossSocket, pxn::pci_distance(a, b));
    b.numa_node = 0;
    EXPECT_EQ(6u, pxn::pci_distance(a, b));
    b.numa_node = -1;
    EXPECT_EQ(6u, pxn::pci_distance(a, b));
    a.numa_node = -1;
    b.numa_node = 1;
    EXPECT_EQ(6u, pxn::pci_distance(a, b));
}

TEST_F(Topology, OneNicPerGpuBehindASharedSwitchPairsGpuIWithNicI)
{
    const std::vector<std::string> gpus = build_one_nic_per_gpu();
    expect_homes(gpus, mlx5(8), mlx5(8));
    /* The candidates' order does not matter. */
    expect_homes(gpus, reversed(mlx5(8)), mlx5(8));
    unsigned distance = 0;
    EXPECT_EQ("mlx5_5", nearest(gpus[5], mlx5(8), &distance));
    EXPECT_EQ(4u, distance);
}

TEST_F(Topology, TwoGpusAndTwoNicsPerSwitchTieBreakGivesGpuIOfTheSwitchNicI)
{
    /* DGX A100 style: 4 switches of GPU 2k, 2k+1, mlx5_2k, mlx5_2k+1. The
     * NICs' bus ids run opposite to their names: name order decides. */
    std::vector<std::string> gpus;
    for (unsigned s = 0; s < 4; ++s) {
        const unsigned bus = 0x10 + 0x40 * s;
        const int numa     = int(s / 2);
        const auto downs   = add_switch(bus, 4, numa);
        add_gpu(downs[0], bdf(bus + 3), numa);
        add_gpu(downs[1], bdf(bus + 4), numa);
        add_nic_function(downs[2], bdf(bus + 5), numa);
        add_nic_function(downs[3], bdf(bus + 6), numa);
        add_nic("infiniband", "mlx5_" + std::to_string(2 * s + 1), bdf(bus + 5));
        add_nic("infiniband", "mlx5_" + std::to_string(2 * s), bdf(bus + 6));
        gpus.push_back(bdf(bus + 3));
        gpus.push_back(bdf(bus + 4));
    }
    expect_homes(gpus, mlx5(8), mlx5(8));
    expect_homes(gpus, reversed(mlx5(8)), mlx5(8));
}

TEST_F(Topology, TwoGpusPerNicBothTakeTheirSwitchNic)
{
    std::vector<std::string> gpus;
    for (unsigned s = 0; s < 4; ++s) {
        const unsigned bus = 0x10 + 0x40 * s;
        const int numa     = int(s / 2);
        const auto downs   = add_switch(bus, 3, numa);
        add_gpu(downs[0], bdf(bus + 3), numa);
        add_gpu(downs[1], bdf(bus + 4), numa);
        add_nic_function(downs[2], bdf(bus + 5), numa);
        add_nic("infiniband", "mlx5_" + std::to_string(s), bdf(bus + 5));
        gpus.push_back(bdf(bus + 3));
        gpus.push_back(bdf(bus + 4));
    }
    expect_homes(gpus, mlx5(4),
                 {"mlx5_0", "mlx5_0", "mlx5_1", "mlx5_1", "mlx5_2", "mlx5_2",
                  "mlx5_3", "mlx5_3"});
}

/* openucx/ucx#11259: 8 x A100 and 2 x CX7, one NIC per socket, on root
 * ports of their own; GPUs behind switches. mlx5_1 sits directly on a root
 * port, fewer hops from every GPU than mlx5_0 behind its switch: only the
 * cross-socket penalty keeps GPUs 0-3 on mlx5_0. */
TEST_F(Topology, EightGpusTwoNicsEachGpuTakesTheNicOfItsSocket)
{
    std::vector<std::string> gpus;
    for (unsigned half = 0; half < 2; ++half) {
        const int numa      = int(half);
        const unsigned base = 0x80 * half;
        /* Two GPUs behind one switch. */
        auto downs = add_switch(base + 0x00, 2, numa);
        add_gpu(downs[0], bdf(base + 0x03), numa);
        add_gpu(downs[1], bdf(base + 0x04), numa);
        gpus.push_back(bdf(base + 0x03));
        gpus.push_back(bdf(base + 0x04));
        /* One GPU behind a switch, one behind a second level switch. */
        downs = add_switch(base + 0x20, 2, numa);
        add_gpu(downs[0], bdf(base + 0x23), numa);
        const std::string up2 = add_bridge(downs[1], bdf(base + 0x25), numa);
        const std::string dn2 = add_bridge(up2, bdf(base + 0x26), numa);
        add_gpu(dn2, bdf(base + 0x27), numa);
        gpus.push_back(bdf(base + 0x23));
        gpus.push_back(bdf(base + 0x27));
        /* An NVIDIA device that is no GPU: an NVSwitch bridge. */
        add_pci(host_bridge(base + 0x60), bdf(base + 0x61), kNvidia,
                "0x068000", numa);
    }
    /* mlx5_0: NUMA 0, behind a switch of its own. */
    auto downs = add_switch(0x40, 1, 0);
    add_nic_function(downs[0], bdf(0x43), 0);
    add_nic("infiniband", "mlx5_0", bdf(0x43));
    /* mlx5_1: NUMA 1, straight on a root port. */
    const std::string rp = add_bridge(host_bridge(0xc0), bdf(0xc0, 1), 1);
    add_nic_function(rp, bdf(0xc1), 1);
    add_nic("infiniband", "mlx5_1", bdf(0xc1));

    expect_homes(gpus, mlx5(2),
                 {"mlx5_0", "mlx5_0", "mlx5_0", "mlx5_0", "mlx5_1", "mlx5_1",
                  "mlx5_1", "mlx5_1"});

    /* The layout does what it claims: without NUMA, GPU 0 is nearer to
     * mlx5_1. */
    PciPlace gpu0          = pxn::gpu_place(root_, gpus[0]);
    PciPlace nic0          = pxn::nic_place(root_, "mlx5_0");
    PciPlace nic1          = pxn::nic_place(root_, "mlx5_1");
    EXPECT_EQ(0, gpu0.numa_node);
    EXPECT_EQ(0, nic0.numa_node);
    EXPECT_EQ(1, nic1.numa_node);
    gpu0.numa_node = nic0.numa_node = nic1.numa_node = -1;
    EXPECT_LT(pxn::pci_distance(gpu0, nic1), pxn::pci_distance(gpu0, nic0));
}

TEST_F(Topology, GpuPlaceIsTheResolvedDeviceDirectoryWithItsNumaNode)
{
    const auto downs = add_switch(0x30, 1, 1);
    const std::string rel = add_gpu(downs[0], bdf(0x33), 1);
    char resolved[PATH_MAX];
    ASSERT_NE(nullptr, realpath((root_ + "/devices/" + rel).c_str(), resolved));
    const PciPlace place = pxn::gpu_place(root_, bdf(0x33));
    EXPECT_EQ(std::string(resolved), place.path);
    EXPECT_EQ(1, place.numa_node);
    EXPECT_TRUE(pxn::gpu_place(root_, bdf(0x34)).path.empty());
}

TEST_F(Topology, GpuBusIdInUpperCaseWithEightDigitDomainResolves)
{
    std::vector<std::string> gpus;
    for (unsigned s = 0; s < 2; ++s) {
        const unsigned bus = 0x3a + 0x40 * s;
        const auto downs   = add_switch(bus, 4, 0);
        add_gpu(downs[0], bdf(bus + 3), 0);
        add_gpu(downs[1], bdf(bus + 4), 0);
        add_nic_function(downs[2], bdf(bus + 5), 0);
        add_nic_function(downs[3], bdf(bus + 6), 0);
        add_nic("infiniband", "mlx5_" + std::to_string(2 * s), bdf(bus + 5));
        add_nic("infiniband", "mlx5_" + std::to_string(2 * s + 1),
                bdf(bus + 6));
    }
    /* 0000:3d:00.0 and 0000:3e:00.0 share mlx5_0/mlx5_1; the second is
     * rank 1 of its switch also when named the nvidia-smi way. */
    EXPECT_EQ(pxn::gpu_place(root_, "0000:3d:00.0").path,
              pxn::gpu_place(root_, "00000000:3D:00.0").path);
    EXPECT_FALSE(pxn::gpu_place(root_, "0000:3D:00.0").path.empty());
    EXPECT_EQ("mlx5_0", nearest("00000000:3D:00.0", mlx5(4)));
    EXPECT_EQ("mlx5_1", nearest("00000000:3E:00.0", mlx5(4)));
    EXPECT_EQ("mlx5_1", nearest("0000:3E:00.0", mlx5(4)));
    EXPECT_EQ("mlx5_3", nearest("00000000:7E:00.0", mlx5(4)));
    const HomeChoice c = pxn::choose_home(query(mlx5(4), "00000000:7E:00.0"));
    EXPECT_EQ("mlx5_3", c.device);
}

TEST_F(Topology, NicPlaceIgnoresThePortSuffix)
{
    const auto downs = add_switch(0x10, 1, 0);
    add_nic_function(downs[0], bdf(0x13), 0);
    add_nic("infiniband", "mlx5_3", bdf(0x13));
    const PciPlace plain = pxn::nic_place(root_, "mlx5_3");
    const PciPlace port  = pxn::nic_place(root_, "mlx5_3:1");
    ASSERT_FALSE(plain.path.empty());
    EXPECT_EQ(plain.path, port.path);
    EXPECT_EQ(plain.path, pxn::gpu_place(root_, bdf(0x13)).path);
    EXPECT_EQ(0, port.numa_node);
    EXPECT_TRUE(pxn::nic_place(root_, "mlx5_4:1").path.empty());
}

TEST_F(Topology, NearestDeviceTakesNamesWithPortSuffixes)
{
    const std::vector<std::string> gpus = build_one_nic_per_gpu();
    std::vector<std::string> devices;
    for (const std::string &name : mlx5(8)) {
        devices.push_back(name + ":1");
    }
    for (size_t g = 0; g < gpus.size(); ++g) {
        EXPECT_EQ("mlx5_" + std::to_string(g) + ":1",
                  nearest(gpus[g], devices));
        EXPECT_EQ("mlx5_" + std::to_string(g) + ":1",
                  pxn::choose_home(query(devices, gpus[g])).device);
    }
}

TEST_F(Topology, NetClassDevicesArePlaced)
{
    std::vector<std::string> gpus;
    for (unsigned s = 0; s < 4; ++s) {
        const unsigned bus = 0x10 + 0x20 * s;
        const auto downs   = add_switch(bus, 2, 0);
        add_gpu(downs[0], bdf(bus + 3), 0);
        add_nic_function(downs[1], bdf(bus + 4), 0);
        add_nic("net", "eth" + std::to_string(s), bdf(bus + 4));
        gpus.push_back(bdf(bus + 3));
    }
    EXPECT_FALSE(pxn::nic_place(root_, "eth2").path.empty());
    EXPECT_EQ(pxn::gpu_place(root_, bdf(0x54)).path,
              pxn::nic_place(root_, "eth2").path);
    expect_homes(gpus, {"eth0", "eth1", "eth2", "eth3"},
                 {"eth0", "eth1", "eth2", "eth3"});
}

TEST_F(Topology, InfinibandAndItsIpoibNetDeviceShareOnePlace)
{
    const auto downs = add_switch(0x10, 2, 0);
    add_gpu(downs[0], bdf(0x13), 0);
    add_nic_function(downs[1], bdf(0x14), 0);
    add_nic("infiniband", "mlx5_0", bdf(0x14));
    add_nic("net", "ib0", bdf(0x14));
    EXPECT_EQ(pxn::nic_place(root_, "mlx5_0").path,
              pxn::nic_place(root_, "ib0").path);
    unsigned distance = 0;
    EXPECT_EQ("ib0", nearest(bdf(0x13), {"lo", "ib0"}, &distance));
    EXPECT_EQ(4u, distance);
}

TEST_F(Topology, CandidatesWithoutAPciPlaceAreSkipped)
{
    const std::vector<std::string> gpus = build_one_nic_per_gpu();
    add_virtual_net("lo");
    add_virtual_net("veth0");
    EXPECT_TRUE(pxn::nic_place(root_, "lo").path.empty());
    EXPECT_TRUE(pxn::nic_place(root_, "veth0").path.empty());
    EXPECT_TRUE(pxn::nic_place(root_, "nosuch").path.empty());

    const std::vector<std::string> devices = {"lo", "veth0", "mlx5_6", "nosuch",
                                              "mlx5_2"};
    EXPECT_EQ(2, pxn::nearest_device(root_, gpus[6], devices));
    EXPECT_EQ(4, pxn::nearest_device(root_, gpus[2], devices));
    /* GPU 0's own NIC is not a candidate: the nearest on its socket. */
    EXPECT_EQ("mlx5_2", nearest(gpus[0], devices));
    /* None placed. */
    EXPECT_EQ(-1, pxn::nearest_device(root_, gpus[0], {"lo", "veth0"}));
    EXPECT_EQ(-1, pxn::nearest_device(root_, gpus[0], {}));
}

TEST_F(Topology, NearestDeviceIsMinusOneForAGpuThatCannotBePlaced)
{
    build_one_nic_per_gpu();
    EXPECT_EQ(-1, pxn::nearest_device(root_, "0000:99:00.0", mlx5(8)));
    EXPECT_EQ(-1, pxn::nearest_device(root_ + "/nosuch", bdf(0x13), mlx5(8)));
}

TEST_F(Topology, BusIdsThatAreNotPciAddressesArePlacedNowhere)
{
    build_one_nic_per_gpu();
    for (const char *id : {"", ".", "..", "../../devices", "0000:13:00.0/..",
                           "0000:13:00", "0000:1g:00.0"}) {
        EXPECT_TRUE(pxn::gpu_place(root_, id).path.empty()) << "'" << id << "'";
        EXPECT_EQ(-1, pxn::nearest_device(root_, id, mlx5(8))) << "'" << id << "'";
    }
}

TEST_F(Topology, ListGpusFindsOnlyNvidiaDisplayAnd3dControllersSorted)
{
    const auto downs = add_switch(0x10, 8, 0);
    add_pci(downs[0], bdf(0x9a), kNvidia, "0x030200", 0); /* 3D */
    add_pci(downs[1], bdf(0x1b), kNvidia, "0x030000", 0); /* VGA */
    add_pci(downs[2], bdf(0x1b, 0, 1), kNvidia, "0x040300", 0); /* audio */
    add_pci(downs[3], bdf(0x1c), kNvidia, "0x068000", 0); /* NVSwitch */
    add_pci(downs[4], bdf(0x1d), "0x1a03", "0x030000", 0); /* BMC VGA */
    add_pci(downs[5], bdf(0x1e), "0x1002", "0x038000", 0); /* other GPU */
    add_pci(downs[6], bdf(0x1f), kMellanox, "0x020700", 0);
    add_pci(downs[7], bdf(0x5f), kNvidia, "0x030201", 0);
    EXPECT_EQ((std::vector<std::string>{bdf(0x1b), bdf(0x5f), bdf(0x9a)}),
              pxn::list_gpus(root_));
}

TEST_F(Topology, ListGpusOfATreeWithoutPciDevicesIsEmpty)
{
    EXPECT_TRUE(pxn::list_gpus(root_).empty());
    EXPECT_TRUE(pxn::list_gpus(root_ + "/nosuch").empty());
}

TEST_F(Topology, ExplicitHomeDeviceWinsOverEverything)
{
    const std::vector<std::string> gpus = build_one_nic_per_gpu();
    HomeQuery q       = query(mlx5(8), gpus[0]);
    q.explicit_device = "mlx5_7:1";
    q.gpu_possible    = true;
    HomeChoice c      = pxn::choose_home(q);
    EXPECT_FALSE(c.deferred);
    EXPECT_EQ("mlx5_7:1", c.device);
    EXPECT_NE(std::string::npos, c.reason.find("UCX_PXN_HOME_DEVICE"))
            << c.reason;

    /* Also where it would otherwise be deferred. */
    q.gpu_bus_id = "";
    c            = pxn::choose_home(q);
    EXPECT_FALSE(c.deferred);
    EXPECT_EQ("mlx5_7:1", c.device);
}

TEST_F(Topology, HomeIsTheNicNearestToTheGpu)
{
    const std::vector<std::string> gpus = build_one_nic_per_gpu();
    const HomeChoice c = pxn::choose_home(query(mlx5(8), gpus[3]));
    EXPECT_FALSE(c.deferred);
    EXPECT_EQ("mlx5_3", c.device);
    EXPECT_NE(std::string::npos, c.reason.find("4 PCI hops")) << c.reason;
}

TEST_F(Topology, HomeIsDeferredWhileTheGpuMayBecomeKnown)
{
    build_one_nic_per_gpu();
    HomeQuery q          = query({"mlx5_0", "mlx5_1"});
    q.gpu_possible       = true;
    const HomeChoice c   = pxn::choose_home(q);
    EXPECT_TRUE(c.deferred);
    EXPECT_TRUE(c.device.empty());
}

TEST_F(Topology, HomeIsTheIfaceDeviceWhenNoGpuIsPossible)
{
    build_one_nic_per_gpu();
    HomeQuery q        = query(mlx5(8));
    q.gpu_possible     = false;
    const HomeChoice c = pxn::choose_home(q);
    EXPECT_FALSE(c.deferred);
    EXPECT_EQ("iface0", c.device);
}

TEST_F(Topology, HomeIsTheIfaceDeviceWithFewerThanTwoPlacedCandidates)
{
    /* Emulated rails: veth devices with no PCI function, and one real NIC. */
    build_one_nic_per_gpu();
    add_virtual_net("veth0");
    add_virtual_net("veth1");
    for (const std::vector<std::string> &candidates :
         {std::vector<std::string>{"veth0", "veth1"},
          std::vector<std::string>{"veth0", "mlx5_0", "veth1"},
          std::vector<std::string>{}}) {
        HomeQuery q        = query(candidates);
        q.gpu_possible     = true;
        const HomeChoice c = pxn::choose_home(q);
        EXPECT_FALSE(c.deferred);
        EXPECT_EQ("iface0", c.device);
    }
}

TEST_F(Topology, HomeIsTheIfaceDeviceForAGpuThatCannotBePlaced)
{
    build_one_nic_per_gpu();
    HomeQuery q        = query(mlx5(8), "0000:99:00.0");
    q.gpu_possible     = true;
    const HomeChoice c = pxn::choose_home(q);
    EXPECT_FALSE(c.deferred);
    EXPECT_EQ("iface0", c.device);
}

TEST_F(Topology, HomeIsTheIfaceDeviceForAGpuWithNoPlacedCandidate)
{
    const std::vector<std::string> gpus = build_one_nic_per_gpu();
    add_virtual_net("veth0");
    HomeQuery q        = query({"veth0", "lo"}, gpus[0]);
    q.gpu_possible     = true;
    const HomeChoice c = pxn::choose_home(q);
    EXPECT_FALSE(c.deferred);
    EXPECT_EQ("iface0", c.device);
}

} // namespace
