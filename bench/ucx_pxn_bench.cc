/*
 * ucx_pxn_bench: UCT-level bandwidth and message rate across rails through
 * pxn, against the direct inner transport on the same rail, in one run.
 *
 *   direct: node 0 rail 0  --inner-->  node 1 rail 0
 *   pxn:    node 0 rail 0  --shm-->  relay node 0 rail 1  --inner-->
 *           node 1 rail 1
 *
 * Inner transports (--inner):
 *   tcp  over the emulated rails of contrib/topology.sh (which must be up,
 *        --prefix names it): put only;
 *   cma  on this host without namespaces (rails told apart by
 *        UCX_PXN_RAIL_MAP, nodes by UCX_PXN_GROUP): put and get;
 *   --gpu: GPU buffers, cuda_ipc, one GPU (GPU 0 for every process,
 *        UCX_CUDA_IPC_ENABLE_GET_ZCOPY=y for gets), no namespaces.
 * --ops put,get measures both kinds on both paths (get needs cma or GPU);
 * the last column is then pxn's get/put ratio.
 *
 * Every process is a ucx_pxn_peer. For each message size the paths run
 * alternately `reps` times (a shared, noisy machine: compare ratios of one
 * run, not absolute figures); medians are reported. Size "rand": operations
 * of random sizes, 4 KiB to 1 MiB (the same sequence for every path and
 * kind). Bytes are verified at the end of each path. Relay CPU time is read
 * from /proc.
 *
 * How applications wait for completions (--wait, the same for both paths):
 * yield (default: sched_yield when progress finds nothing to do), spin, or
 * sleep (20 us). On a small machine a spinning sender takes a core that the
 * relay and the target need.
 */
#include <bench/bench_units.h>
#include <apps/locate.h>
#include <apps/peer_process.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

using pxn_tools::human;
using pxn_tools::median;
using pxn_tools::parse_size;
using pxn_tools::PeerProcess;
using pxn_tools::split;

namespace {

constexpr uint64_t kRandom    = 0; /* the "rand" size */
constexpr uint64_t kRandomMin = 4096;
constexpr uint64_t kRandomMax = 1 << 20;

struct Options {
    std::string              prefix = "pxn";
    std::string              inner  = "tcp";
    std::vector<uint64_t>    sizes;
    std::vector<std::string> ops    = {"put"};
    unsigned                 reps   = 3;
    size_t                   total  = 256ul << 20; /* bytes per measurement */
    int                      wait_mode = 1; /* PXN_PEER_YIELD */
    bool                     gpu = false;   /* GPU buffers, cuda_ipc, no netns */
    std::vector<std::string> env;
    std::string              peer;
};

[[noreturn]] void die(const std::string &why)
{
    fprintf(stderr, "ucx_pxn_bench: %s\n", why.c_str());
    exit(1);
}

std::string size_name(uint64_t size)
{
    return (size == kRandom) ? "rand" : human(size);
}

/* The peer's chunk argument. */
std::string chunk_arg(uint64_t size)
{
    return (size == kRandom) ?
           std::to_string(kRandomMin) + "-" + std::to_string(kRandomMax) :
           std::to_string(size);
}

class Path {
public:
    Path(const Options &o, const std::string &name) : opt_(o), name_(name) {}

    PeerProcess *start(int node, int rail, bool pxn)
    {
        const std::string r = std::to_string(rail), n = std::to_string(node);
        std::vector<std::string> env = {"PXN_PEER_YIELD=" +
                                        std::to_string(opt_.wait_mode)};
        std::string md = "tcp", tl = "tcp", dev = "rail" + r;
        std::string ns = opt_.prefix + "-n" + n + "r" + r;
        if (opt_.gpu) {
            md = "cuda_ipc", tl = "cuda_ipc", dev = "cuda", ns = "";
            /* one GPU, no NVLink: cuda_ipc offers get_zcopy only when told */
            env.push_back("UCX_CUDA_IPC_ENABLE_GET_ZCOPY=y");
        } else if (opt_.inner == "cma") {
            md = "cma", tl = "cma", dev = "memory", ns = "";
        }
        if (pxn) {
            env.insert(env.end(), {"UCX_PXN_NODE_ID=node" + n,
                                   "UCX_PXN_GROUP=" + opt_.prefix + "-bench-node" + n});
            if (opt_.gpu) {
                /* one GPU: every process's, the relay's arena included */
                env.insert(env.end(), {"UCX_PXN_NET_TLS=cuda_ipc",
                                       "UCX_PXN_RAIL_MAP=cuda:rail" + r,
                                       "UCX_PXN_CUDA_DEVICE=0"});
                md = "pxn_cuda_ipc", tl = "pxn", dev = "cuda";
            } else if (opt_.inner == "cma") {
                env.insert(env.end(), {"UCX_PXN_NET_TLS=cma",
                                       "UCX_PXN_RAIL_MAP=memory:rail" + r});
                md = "pxn_cma", tl = "pxn", dev = "memory";
            } else {
                env.insert(env.end(), {"UCX_PXN_NET_TLS=tcp",
                                       "UCX_PXN_HOME_DEVICE=rail" + r});
                md = "pxn_tcp", tl = "pxn", dev = "front";
            }
            env.insert(env.end(), opt_.env.begin(), opt_.env.end());
        }
        peers_.emplace_back(new PeerProcess());
        std::string error;
        if (!peers_.back()->start(opt_.peer, ns, env, md, tl, dev, &error)) {
            die(name_ + ": " + error +
                (ns.empty() ? "" : " (is the topology up? contrib/topology.sh up)"));
        }
        return peers_.back().get();
    }

    void connect(PeerProcess *sender, PeerProcess *target, size_t buffer)
    {
        sender_ = sender;
        target_ = target;
        auto info  = split(target->call("info"));
        const std::string where = opt_.gpu ? " cuda" : "";
        auto alloc = split(target->call("alloc " + std::to_string(buffer) + where));
        if ((info.size() != 4) || (alloc.size() != 3)) {
            die(name_ + ": target setup failed");
        }
        addr_ = alloc[1];
        rkey_ = alloc[2];
        if ((sender->call("alloc " + std::to_string(buffer) + where).compare(0, 5,
                                                                      "alloc") != 0) ||
            (sender->call("fill 5") != "ok")) {
            die(name_ + ": sender setup failed");
        }
        /* A plain tcp target completes the connection in its progress. */
        target->send("serve");
        const std::string connected = sender->call("connect " + info[1] + " " +
                                                   info[2]);
        if (target->call("stop") != "ok") {
            die(name_ + ": target did not stop serving");
        }
        if (connected != "ok") {
            die(name_ + ": connect failed: " + connected);
        }
    }

    /* `op` ("put" or "get") of `bytes` in messages of `size`: seconds, and
     * the number of operations. */
    double move(const std::string &op, size_t bytes, uint64_t size, double *ops)
    {
        /* A direct tcp target must progress to receive, and only then: the
         * pxn target's application stays idle (its engine thread
         * receives); cma and cuda_ipc need nothing of a target. */
        const bool serve = !pxn_path() && (opt_.inner == "tcp") && !opt_.gpu;
        if (serve) {
            target_->send("serve");
        }
        auto done = split(sender_->call(op + " zcopy " + addr_ + " " + rkey_ +
                                        " " + std::to_string(bytes) + " " +
                                        chunk_arg(size) + " 0", 120000));
        if (serve && (target_->call("stop") != "ok")) {
            die(name_ + ": target did not stop serving");
        }
        if ((done.size() != 4) || (done[1] != "Success")) {
            die(name_ + ": " + op + " failed: " +
                (done.empty() ? "timeout" : done[1]));
        }
        *ops = std::stod(done[3]);
        return std::stod(done[2]) * 1e-9;
    }

    /* The target holds the sender's pattern (the puts); with `get`, the
     * sender overwrites its buffer, gets the target's back and must find
     * the pattern again. */
    bool verify(size_t bytes, bool get)
    {
        const std::string check = "check 5 0 " + std::to_string(bytes);
        if (target_->call(check, 60000) != "ok") {
            return false;
        }
        if (!get) {
            return true;
        }
        double ops;
        return (sender_->call("fill 6") == "ok") &&
               (move("get", bytes, 1 << 20, &ops) > 0) &&
               (sender_->call(check, 60000) == "ok");
    }

    bool pxn_path() const { return name_ == "pxn"; }

    /* CPU seconds of every process of the path so far. */
    double cpu() const
    {
        double total = 0;
        for (const auto &p : peers_) {
            total += pxn_tools::process_cpu_seconds(p->pid());
        }
        return total;
    }

private:
    const Options &opt_;
    std::string    name_;
    std::vector<std::unique_ptr<PeerProcess>> peers_;
    PeerProcess   *sender_ = nullptr;
    PeerProcess   *target_ = nullptr;
    std::string    addr_, rkey_;
};

Options parse(int argc, char **argv)
{
    Options o;
    o.peer = pxn_tools::build_dir() + "/test/apps/ucx_pxn_peer";
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                die(a + " needs a value");
            }
            return argv[++i];
        };
        if (a == "--prefix") {
            o.prefix = value();
        } else if (a == "--inner") {
            o.inner = value();
            if ((o.inner != "tcp") && (o.inner != "cma")) {
                die("--inner takes tcp or cma");
            }
        } else if (a == "--ops") {
            o.ops = split(value(), ',');
            for (const auto &op : o.ops) {
                if ((op != "put") && (op != "get")) {
                    die("--ops takes put, get or put,get");
                }
            }
        } else if (a == "--sizes") {
            o.sizes.clear();
            for (const auto &s : split(value(), ',')) {
                uint64_t size;
                if (s == "rand") {
                    o.sizes.push_back(kRandom);
                } else if (parse_size(s, &size)) {
                    o.sizes.push_back(size);
                } else {
                    die("--sizes takes sizes like 4K,1M,64M and rand");
                }
            }
        } else if (a == "--reps") {
            o.reps = std::max(1, atoi(value().c_str()));
        } else if (a == "--total") {
            uint64_t total;
            if (!parse_size(value(), &total)) {
                die("--total takes a size like 256M");
            }
            o.total = total;
        } else if (a == "--wait") {
            const std::string mode = value();
            o.wait_mode = (mode == "spin") ? 0 : (mode == "yield") ? 1 :
                          (mode == "sleep") ? 2 : -1;
            if (o.wait_mode < 0) {
                die("--wait takes spin, yield or sleep");
            }
        } else if (a == "--gpu") {
            o.gpu = true;
        } else if (a == "--env") {
            o.env.push_back(value());
        } else {
            fprintf(stderr,
                    "usage: ucx_pxn_bench [--inner tcp|cma] [--ops put,get] "
                    "[--prefix P] [--sizes 4K,1M,rand,...]\n"
                    "                     [--reps N] [--total BYTES] "
                    "[--wait spin|yield|sleep] [--gpu] [--env UCX_PXN_X=v]...\n");
            exit(2);
        }
    }
    if (o.sizes.empty()) {
        o.sizes = {4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
    }
    if ((std::find(o.ops.begin(), o.ops.end(), "get") != o.ops.end()) &&
        (o.inner == "tcp") && !o.gpu) {
        die("get needs --inner cma or --gpu (tcp has no get_zcopy)");
    }
    return o;
}

} // namespace

int main(int argc, char **argv)
{
    const Options o = parse(argc, argv);
    uint64_t largest = kRandomMax;
    for (uint64_t s : o.sizes) {
        largest = std::max(largest, s);
    }
    const size_t buffer = std::max<size_t>(o.total, largest);

    Path direct(o, "direct"), pxn(o, "pxn");
    direct.connect(direct.start(0, 0, false), direct.start(1, 0, false), buffer);
    PeerProcess *relay = pxn.start(0, 1, true);
    pxn.connect(pxn.start(0, 0, true), pxn.start(1, 1, true), buffer);

    const double idle_before = pxn_tools::process_cpu_seconds(relay->pid());
    sleep(2);
    const double idle_cpu = (pxn_tools::process_cpu_seconds(relay->pid()) -
                             idle_before) / 2;

    static const char *waits[] = {"spinning", "yielding", "sleeping"};
    const std::string inner = o.gpu ? "GPU memory, cuda_ipc, one GPU" :
                              (o.inner == "cma") ? "cma on this host" :
                                                   "tcp over emulated rails";
    printf("ucx_pxn_bench: UCT zcopy, %s, %u reps, %s applications\n",
           inner.c_str(), o.reps, waits[o.wait_mode]);
    printf("%8s %10s", "size", "bytes");
    for (const auto &op : o.ops) {
        /* the path over its two columns, the units under them */
        printf(" | %-25s | %-25s | %5s", (op + " direct").c_str(),
               (op + " through pxn").c_str(), "ratio");
    }
    printf("%s\n", (o.ops.size() == 2) ? " | pxn get/put" : "");
    printf("%8s %10s", "", "");
    for (size_t k = 0; k < o.ops.size(); ++k) {
        printf(" | %6s %10s %7s | %6s %10s %7s | %5s", "", "Kmsg/s", "MB/s",
               "", "Kmsg/s", "MB/s", "");
    }
    printf("\n");
    double relay_cpu = 0, direct_cpu = 0, pxn_cpu = 0;
    size_t relayed   = 0;
    for (uint64_t size : o.sizes) {
        /* Small messages: fewer bytes, enough operations for a rate. */
        const size_t bytes = (size == kRandom) ? o.total :
                             std::max<size_t>(size, std::min<size_t>(o.total,
                                                                     size * 16384));
        printf("%8s %10zu", size_name(size).c_str(), bytes);
        std::vector<double> pxn_rate;
        for (const auto &op : o.ops) {
            std::vector<double> td, tp;
            double ops = 0;
            for (unsigned r = 0; r < o.reps; ++r) {
                double cpu0 = direct.cpu();
                td.push_back(direct.move(op, bytes, size, &ops));
                direct_cpu += direct.cpu() - cpu0;
                cpu0 = pxn.cpu();
                const double relay0 = pxn_tools::process_cpu_seconds(relay->pid());
                tp.push_back(pxn.move(op, bytes, size, &ops));
                relay_cpu += pxn_tools::process_cpu_seconds(relay->pid()) - relay0;
                pxn_cpu   += pxn.cpu() - cpu0;
                relayed   += bytes;
            }
            const double d = median(td), p = median(tp);
            pxn_rate.push_back(bytes / p);
            printf(" | %6s %10.1f %7.0f | %6s %10.1f %7.0f | %4.0f%%", "",
                   ops / d / 1e3, bytes / d / 1e6, "", ops / p / 1e3,
                   bytes / p / 1e6, 100.0 * d / p);
        }
        if (pxn_rate.size() == 2) {
            printf(" | %10.2f", pxn_rate[1] / pxn_rate[0]);
        }
        printf("\n");
        fflush(stdout);
    }
    const bool got       = std::find(o.ops.begin(), o.ops.end(), "get") != o.ops.end();
    const bool ok_direct = direct.verify(std::min(buffer, o.total), got);
    const bool ok_pxn    = pxn.verify(std::min(buffer, o.total), got);

    pxn::abi::ProcessCounters c = {};
    pxn_tools::read_counters(o.prefix + "-bench-node0", relay->pid(), &c);
    printf("relay: %lu pieces, %lu bytes relayed, %.3f CPU s per GB relayed, "
           "idle CPU %.2f%% of a core\n", c.relay.pieces, c.relay.bytes,
           relay_cpu / (relayed / 1e9), 100.0 * idle_cpu);
    printf("CPU s per GB moved, all processes of the path: direct %.3f, pxn %.3f "
           "(%u cores here)\n", direct_cpu / (relayed / 1e9),
           pxn_cpu / (relayed / 1e9), unsigned(sysconf(_SC_NPROCESSORS_ONLN)));
    printf("data verified: direct %s, pxn %s\n", ok_direct ? "ok" : "BAD",
           ok_pxn ? "ok" : "BAD");
    return (ok_direct && ok_pxn) ? 0 : 1;
}
