/*
 * ucx_pxn_bench: UCT-level put bandwidth and message rate across rails
 * through pxn, against the direct inner transport on the same rail, in one
 * run, on the emulated topology of contrib/topology.sh (which must be up).
 *
 *   direct: node 0 rail 0  --tcp over rail 0-->  node 1 rail 0
 *   pxn:    node 0 rail 0  --shm-->  relay node 0 rail 1  --tcp over rail 1-->
 *           node 1 rail 1
 *
 * Every process is a ucx_pxn_peer. For each message size the two paths run
 * alternately `reps` times (a shared, noisy machine: compare ratios of one
 * run, not absolute figures); medians are reported. Bytes are verified at
 * the end of each path. Relay CPU time is read from /proc.
 *
 * How applications wait for completions (--wait, the same for both paths):
 * yield (default: sched_yield when progress finds nothing to do), spin, or
 * sleep (20 us). On a small machine a spinning sender takes a core that the
 * relay and the target need.
 */
#include <bench/bench_units.h>
#include <apps/locate.h>
#include <apps/peer_process.h>

#include <apps/locate.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

using pxn_tools::human;
using pxn_tools::parse_size;
using pxn_tools::parse_sizes;
using pxn_tools::PeerProcess;
using pxn_tools::split;

namespace {

struct Options {
    std::string              prefix = "pxn";
    std::vector<uint64_t>    sizes;
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

class Path {
public:
    Path(const Options &o, const std::string &name) : opt_(o), name_(name) {}

    PeerProcess *start(int node, int rail, bool pxn)
    {
        std::vector<std::string> env = {"PXN_PEER_YIELD=" +
                                        std::to_string(opt_.wait_mode)};
        std::string md = "tcp", tl = "tcp", dev = "rail" + std::to_string(rail);
        std::string ns = opt_.prefix + "-n" + std::to_string(node) + "r" +
                         std::to_string(rail);
        if (opt_.gpu) {
            md = "cuda_ipc", tl = "cuda_ipc", dev = "cuda", ns = "";
        }
        if (pxn) {
            env.insert(env.end(),
                       {"UCX_PXN_NODE_ID=node" + std::to_string(node),
                        "UCX_PXN_GROUP=" + opt_.prefix + "-bench-node" +
                        std::to_string(node)});
            if (opt_.gpu) {
                env.insert(env.end(), {"UCX_PXN_NET_TLS=cuda_ipc",
                                       "UCX_PXN_RAIL_MAP=cuda:rail" +
                                       std::to_string(rail)});
                md = "pxn_cuda_ipc", tl = "pxn", dev = "cuda";
            } else {
                env.insert(env.end(), {"UCX_PXN_NET_TLS=tcp",
                                       "UCX_PXN_HOME_DEVICE=rail" +
                                       std::to_string(rail)});
                md = "pxn_tcp", tl = "pxn", dev = "front";
            }
            env.insert(env.end(), opt_.env.begin(), opt_.env.end());
        }
        peers_.emplace_back(new PeerProcess());
        std::string error;
        if (!peers_.back()->start(opt_.peer, ns, env, md, tl, dev, &error)) {
            die(name_ + ": " + error + " (is the topology up? contrib/topology.sh up)");
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

    /* Seconds for `bytes` in messages of `size`. */
    double put(size_t bytes, size_t size)
    {
        auto done = split(sender_->call("put zcopy " + addr_ + " " + rkey_ + " " +
                                        std::to_string(bytes) + " " +
                                        std::to_string(size) + " 0", 120000));
        if ((done.size() != 4) || (done[1] != "Success")) {
            die(name_ + ": put failed: " + (done.empty() ? "timeout" : done[1]));
        }
        return std::stod(done[2]) * 1e-9;
    }

    bool verify(size_t bytes)
    {
        return target_->call("check 5 0 " + std::to_string(bytes), 60000) == "ok";
    }

    PeerProcess *target() const { return target_; }

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

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

} // namespace

int main(int argc, char **argv)
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
        } else if (a == "--sizes") {
            if (!parse_sizes(value(), &o.sizes)) {
                die("--sizes takes sizes like 4K,1M,64M");
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
                    "usage: ucx_pxn_bench [--prefix P] [--sizes 4K,1M,...] "
                    "[--reps N] [--total BYTES] [--wait spin|yield|sleep] [--gpu]\n"
                    "                     [--env UCX_PXN_X=v]...\n");
            return 2;
        }
    }
    if (o.sizes.empty()) {
        o.sizes = {4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
    }
    const size_t buffer = std::max(o.total, *std::max_element(o.sizes.begin(),
                                                              o.sizes.end()));

    Path direct(o, "direct"), pxn(o, "pxn");
    direct.connect(direct.start(0, 0, false), direct.start(1, 0, false), buffer);
    PeerProcess *relay = pxn.start(0, 1, true);
    pxn.connect(pxn.start(0, 0, true), pxn.start(1, 1, true), buffer);

    const double idle_before = pxn_tools::process_cpu_seconds(relay->pid());
    sleep(2);
    const double idle_cpu = (pxn_tools::process_cpu_seconds(relay->pid()) -
                             idle_before) / 2;

    static const char *waits[] = {"spinning", "yielding", "sleeping"};
    printf("ucx_pxn_bench: UCT put_zcopy, %s, %u reps, %s applications\n",
           o.gpu ? "GPU memory, cuda_ipc, one GPU" : "tcp over emulated rails",
           o.reps, waits[o.wait_mode]);
    printf("%8s %10s | %10s %10s | %10s %10s | %6s\n", "size", "bytes",
           "direct", "MB/s", "pxn", "MB/s", "ratio");
    printf("%8s %10s | %10s %10s | %10s %10s | %6s\n", "", "", "Kmsg/s", "",
           "Kmsg/s", "", "");
    double relay_cpu = 0, direct_cpu = 0, pxn_cpu = 0;
    size_t relayed   = 0;
    for (size_t size : o.sizes) {
        /* Small messages: fewer bytes, enough operations for a rate. */
        const size_t bytes = std::max(size, std::min(o.total, size * 16384));
        std::vector<double> td, tp;
        for (unsigned r = 0; r < o.reps; ++r) {
            /* The direct tcp target must progress to receive, and only then:
             * the pxn target's application stays idle (its engine thread
             * receives). */
            double cpu0 = direct.cpu();
            direct.target()->send("serve");
            td.push_back(direct.put(bytes, size));
            if (direct.target()->call("stop") != "ok") {
                die("direct target did not stop serving");
            }
            direct_cpu += direct.cpu() - cpu0;
            cpu0 = pxn.cpu();
            const double relay0 = pxn_tools::process_cpu_seconds(relay->pid());
            tp.push_back(pxn.put(bytes, size));
            relay_cpu += pxn_tools::process_cpu_seconds(relay->pid()) - relay0;
            pxn_cpu   += pxn.cpu() - cpu0;
            relayed   += bytes;
        }
        const double d = median(td), p = median(tp);
        const double ops = double((bytes + size - 1) / size);
        printf("%8s %10zu | %10.1f %10.0f | %10.1f %10.0f | %5.0f%%\n",
               human(size).c_str(), bytes, ops / d / 1e3, bytes / d / 1e6,
               ops / p / 1e3, bytes / p / 1e6, 100.0 * d / p);
        fflush(stdout);
    }
    const bool ok_direct = direct.verify(std::min(buffer, o.total));
    const bool ok_pxn    = pxn.verify(std::min(buffer, o.total));

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
