/*
 * ucx_pxn_first_bench: the first transfer of a fresh sender process against
 * the same transfer repeated, through one long-lived relay, put and get.
 *
 *   sender (node 0, railA) --staging--> relay (node 0, railB) --inner-->
 *   target (node 1, railB)
 *
 * Host memory with inner cma by default (no namespaces, any user); --gpu:
 * GPU memory with inner cuda_ipc, one GPU. Every process is a
 * ucx_pxn_peer. For each run a new sender process starts, connects (its
 * lane is claimed and acknowledged and its route set up: "connect" waits
 * for that), unpacks the target's rkey ("rkey": cuda_ipc maps the first
 * buffer of a peer's GPU there, as UCP's ucp_ep_rkey_unpack would), moves
 * `total` bytes in operations of `chunk` bytes once ("first"), then
 * `repeat` times more ("repeated", median). Puts and gets
 * each get a fresh sender of their own. The target's bytes are verified
 * after the puts, the sender's after the gets. One first transfer is one
 * sample against a median: the slowest repeated transfer beside it ("noise":
 * median / slowest repeated) shows what the machine does to any transfer.
 *
 * --new-target-at K: before run K the target allocates new buffers, which
 * the relay (or any process) has never opened: a first transfer of a
 * fresh sender against a warm relay and a target buffer new to it, as run 1
 * is (the first access of a process to another's GPU buffer maps it).
 *
 * --gap MS: every repeated transfer waits MS milliseconds first, with the
 * sender and the GPU idle, as the first one waits for its process to start:
 * a repeated transfer that then loses what the first one loses is paying
 * for the pause (whatever idles meanwhile), not for being the first.
 *
 * --direct: the same without pxn, sender and target on one rail of the
 * inner transport (cuda_ipc or cma): the baseline of what a first access
 * costs any process, with no relay and no counters.
 *
 * Breakdown from the counters (docs/benchmarks.md): the relay's
 * lane_commit_ns (memory of claimed lanes backed before their
 * acknowledgement) and warm_claims (claims that found their lane's memory
 * still backed), and the sender's lane_open_ns (claim to ready) and
 * lane_map_ns (its mapping of the lane's slots), as deltas per run.
 */
#include <bench/bench_units.h>
#include <apps/locate.h>
#include <apps/peer_process.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using pxn_tools::human;
using pxn_tools::median;
using pxn_tools::parse_size;
using pxn_tools::PeerProcess;
using pxn_tools::split;

namespace {

struct Options {
    std::string              prefix = "pxn";
    unsigned                 runs   = 5;
    unsigned                 repeat = 5;
    uint64_t                 total  = 256ull << 20;
    uint64_t                 chunk  = 8ull << 20;
    bool                     gpu    = false;
    bool                     put    = true;
    bool                     get    = true;
    bool                     direct = false;
    unsigned                 new_target_at = 0; /* run, 0: never */
    unsigned                 gap_ms = 0;        /* pause before each repeat */
    std::vector<std::string> env;
    std::string              peer;
};

[[noreturn]] void die(const std::string &why)
{
    fprintf(stderr, "ucx_pxn_first_bench: %s\n", why.c_str());
    exit(1);
}

double now_ms()
{
    return std::chrono::duration<double, std::milli>(
            std::chrono::steady_clock::now().time_since_epoch()).count();
}

class Rig {
public:
    explicit Rig(const Options &o) : opt_(o) {}

    std::unique_ptr<PeerProcess> start(int node, const std::string &rail) const
    {
        const std::string dev   = opt_.gpu ? "cuda" : "memory";
        const std::string inner = opt_.gpu ? "cuda_ipc" : "cma";
        std::vector<std::string> env = {"PXN_PEER_YIELD=1"};
        if (!opt_.direct) {
            env.insert(env.end(), {"UCX_PXN_NODE_ID=node" + std::to_string(node),
                                   "UCX_PXN_GROUP=" + group(node),
                                   "UCX_PXN_NET_TLS=" + inner,
                                   "UCX_PXN_RAIL_MAP=" + dev + ":" + rail});
        }
        if (opt_.gpu) {
            /* One GPU: the relay's arena, the target and the sender share it
             * (cuda_ipc keeps gets only when told so without NVLink). */
            env.insert(env.end(), {"UCX_PXN_CUDA_DEVICE=0", "PXN_PEER_GPU=0",
                                   "UCX_CUDA_IPC_ENABLE_GET_ZCOPY=y"});
        }
        env.insert(env.end(), opt_.env.begin(), opt_.env.end());
        std::unique_ptr<PeerProcess> p(new PeerProcess());
        std::string error;
        if (!p->start(opt_.peer, "", env, opt_.direct ? inner : "pxn_" + inner,
                      opt_.direct ? inner : "pxn", dev, &error)) {
            die(error);
        }
        return p;
    }

    std::string group(int node) const
    {
        return opt_.prefix + "-first-node" + std::to_string(node);
    }

    std::string where() const { return opt_.gpu ? " cuda" : ""; }

private:
    const Options &opt_;
};

struct Counters {
    pxn::abi::ProcessCounters relay{};
    pxn::abi::ProcessCounters sender{};
};

struct Result {
    double connect_ms = 0, rkey_ms = 0, first_ms = 0, repeat_ms = 0;
    double slowest_ms = 0;
    double commit_ms = 0, open_ms = 0, map_ms = 0;
    uint64_t warm = 0, commits = 0;
    bool   ok = false;
};

/* One fresh sender: connect, the first transfer, the repeated ones. */
Result run_once(const Options &o, const Rig &rig, PeerProcess *relay,
                const std::string &op, const std::vector<std::string> &target,
                const std::vector<std::string> &buffer)
{
    Result r;
    pxn::abi::ProcessCounters before = {}, after = {}, sender = {};
    if (relay != nullptr) {
        pxn_tools::read_counters(rig.group(0), relay->pid(), &before);
    }

    std::unique_ptr<PeerProcess> s = rig.start(0, o.direct ? "railB" : "railA");
    const std::string bytes = std::to_string(o.total);
    if ((split(s->call("alloc " + bytes + rig.where())).size() != 3) ||
        (s->call(op == "put" ? "fill 11" : "fill 12") != "ok")) {
        die("sender setup failed");
    }
    double t = now_ms();
    const std::string connected = s->call("connect " + target[1] + " " + target[2]);
    r.connect_ms = now_ms() - t;
    if (connected != "ok") {
        die("connect failed: " + connected);
    }
    /* The target's rkey, unpacked before the first transfer as an
     * application does (UCP at ucp_ep_rkey_unpack): cuda_ipc maps the
     * first buffer of a peer's GPU there, outside the transfer. */
    const std::string reply  = s->call("rkey " + buffer[2], 60000);
    const auto unpacked      = split(reply);
    if ((unpacked.size() != 2) || (unpacked[0] != "rkey")) {
        die("rkey unpack failed: " + (reply.empty() ? "timeout" : reply));
    }
    r.rkey_ms = std::stod(unpacked[1]) * 1e-6;
    const std::string cmd = op + " zcopy " + buffer[1] + " " + buffer[2] + " " +
                            bytes + " " + std::to_string(o.chunk) + " 0";
    std::vector<double> repeated;
    for (unsigned i = 0; i <= o.repeat; ++i) {
        if ((i > 0) && (o.gap_ms > 0)) {
            std::this_thread::sleep_for(std::chrono::milliseconds(o.gap_ms));
        }
        const std::string answer = s->call(cmd, 120000);
        std::string status;
        const auto words = split(answer);
        if (!pxn_tools::parse_done(answer, &status, nullptr) || (status != "Success")) {
            die(op + " failed: " + (answer.empty() ? "timeout" : answer));
        }
        const double ms = std::stod(words[words.size() - 2]) * 1e-6;
        if (i == 0) {
            r.first_ms = ms;
        } else {
            repeated.push_back(ms);
        }
    }
    r.repeat_ms  = median(repeated);
    r.slowest_ms = *std::max_element(repeated.begin(), repeated.end());
    r.ok        = (op == "put") ||
                  (s->call("check 12 0 " + bytes, 60000) == "ok");
    if (relay != nullptr) {
        pxn_tools::read_counters(rig.group(0), s->pid(), &sender);
    }
    s->send("quit");
    s->wait(10000);
    if (relay == nullptr) {
        return r;
    }
    pxn_tools::read_counters(rig.group(0), relay->pid(), &after);
    r.commit_ms = (after.relay.lane_commit_ns - before.relay.lane_commit_ns) * 1e-6;
    r.commits   = after.relay.lane_commits - before.relay.lane_commits;
    r.warm      = after.relay.warm_claims - before.relay.warm_claims;
    r.open_ms   = sender.sender.lane_open_ns * 1e-6;
    r.map_ms    = sender.sender.lane_map_ns * 1e-6;
    return r;
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
        } else if (a == "--runs") {
            o.runs = std::max(1, atoi(value().c_str()));
        } else if (a == "--repeat") {
            o.repeat = std::max(1, atoi(value().c_str()));
        } else if ((a == "--total") || (a == "--chunk")) {
            uint64_t size;
            if (!parse_size(value(), &size)) {
                die(a + " takes a size like 256M");
            }
            (a == "--total" ? o.total : o.chunk) = size;
        } else if (a == "--gpu") {
            o.gpu = true;
        } else if (a == "--direct") {
            o.direct = true;
        } else if (a == "--ops") {
            const std::string ops = value();
            o.put = ops.find("put") != std::string::npos;
            o.get = ops.find("get") != std::string::npos;
        } else if (a == "--new-target-at") {
            o.new_target_at = unsigned(std::max(0, atoi(value().c_str())));
        } else if (a == "--gap") {
            o.gap_ms = unsigned(std::max(0, atoi(value().c_str())));
        } else if (a == "--env") {
            o.env.push_back(value());
        } else {
            fprintf(stderr,
                    "usage: ucx_pxn_first_bench [--runs N] [--repeat N] "
                    "[--total 256M] [--chunk 8M] [--gpu] [--direct] [--ops put,get]\n"
                    "                           [--new-target-at K] [--gap MS] "
                    "[--prefix P] [--env UCX_PXN_X=v]...\n");
            return 2;
        }
    }

    Rig rig(o);
    std::unique_ptr<PeerProcess> relay  = o.direct ? nullptr : rig.start(0, "railB");
    std::unique_ptr<PeerProcess> target = rig.start(1, "railB");
    /* Target buffer 0 receives the puts, buffer 1 (seed 12) is read. */
    const std::string alloc = "alloc " + std::to_string(o.total) + rig.where();
    const auto info = split(target->call("info"));
    /* Target buffers `first` (receives the puts, current) and `first` + 1
     * (seed 12, read by the gets). */
    std::vector<std::string> put_buf, get_buf;
    auto target_buffers = [&](unsigned first) {
        const bool ok_get = (target->call("buffer " + std::to_string(first + 1)) == "ok");
        get_buf           = split(target->call(alloc));
        const bool filled = (target->call("fill 12") == "ok");
        const bool ok_put = (target->call("buffer " + std::to_string(first)) == "ok");
        put_buf           = split(target->call(alloc));
        if ((info.size() != 4) || (put_buf.size() != 3) || !ok_get || !ok_put ||
            (get_buf.size() != 3) || !filled) {
            die("target setup failed");
        }
    };
    target_buffers(0);
    const std::string check_put = "check 11 0 " + std::to_string(o.total);
    bool ok = true;

    printf("ucx_pxn_first_bench: a fresh sender's first %s transfer vs the same "
           "repeated (median of %u%s), %s operations, %s%s\n",
           human(o.total).c_str(), o.repeat,
           o.gap_ms ? (", each after " + std::to_string(o.gap_ms) + " ms idle").c_str() : "",
           human(o.chunk).c_str(),
           o.gpu ? "GPU memory, inner cuda_ipc, one GPU" :
                   "host memory, inner cma",
           o.direct ? " (--direct: no pxn, the inner transport alone)" : "");
    printf("%4s %4s | %9s %7s %9s %9s | %9s %9s | %6s %6s %6s | %9s %9s %9s %5s\n",
           "run", "op", "connect", "rkey", "first", "repeated", "first",
           "repeated", "ratio", "+conn", "noise", "commit", "open", "map",
           "warm");
    printf("%4s %4s | %9s %7s %9s %9s | %9s %9s | %6s %6s %6s | %9s %9s %9s %5s\n",
           "", "", "ms", "ms", "ms", "ms", "GB/s", "GB/s", "", "", "", "ms", "ms",
           "ms", "");
    double worst[2] = {1e9, 1e9};
    for (unsigned run = 1; run <= o.runs; ++run) {
        if (run == o.new_target_at) {
            ok = ok && (!o.put || (target->call(check_put, 60000) == "ok"));
            target_buffers(2);
            printf("-- the target's buffers are new from here\n");
        }
        for (int k = 0; k < 2; ++k) {
            const std::string op = k ? "get" : "put";
            if ((k == 0) ? !o.put : !o.get) {
                continue;
            }
            const Result r = run_once(o, rig, relay.get(), op, info,
                                      k ? get_buf : put_buf);
            const double ratio = r.repeat_ms / r.first_ms;
            worst[k] = std::min(worst[k], ratio);
            ok       = ok && r.ok;
            printf("%4u %4s | %9.2f %7.2f %9.2f %9.2f | %9.2f %9.2f | %6.2f %6.2f "
                   "%6.2f | %9.2f %9.2f %9.2f %5lu%s\n", run, op.c_str(),
                   r.connect_ms, r.rkey_ms, r.first_ms, r.repeat_ms,
                   o.total / r.first_ms / 1e6, o.total / r.repeat_ms / 1e6, ratio,
                   r.repeat_ms / (r.first_ms + r.connect_ms + r.rkey_ms),
                   r.repeat_ms / r.slowest_ms, r.commit_ms, r.open_ms, r.map_ms,
                   r.warm, r.ok ? "" : "  BAD DATA");
            fflush(stdout);
        }
    }
    if (o.put) {
        ok = ok && (target->call(check_put, 60000) == "ok");
    }
    printf("worst ratio (repeated / first time):");
    if (o.put) {
        printf(" put %.2f", worst[0]);
    }
    if (o.get) {
        printf(" get %.2f", worst[1]);
    }
    printf("\n");
    if (relay != nullptr) {
        pxn::abi::ProcessCounters c = {};
        pxn_tools::read_counters(rig.group(0), relay->pid(), &c);
        printf("relay: %lu pieces, %lu bytes relayed, %lu lane claims acknowledged, "
               "%lu lane memories backed (%.1f ms), %lu claims found theirs warm\n",
               c.relay.pieces, c.relay.bytes, c.relay.lane_resets,
               c.relay.lane_commits, c.relay.lane_commit_ns * 1e-6,
               c.relay.warm_claims);
    }
    printf("data verified: %s\n", ok ? "ok" : "BAD");
    return ok ? 0 : 1;
}
