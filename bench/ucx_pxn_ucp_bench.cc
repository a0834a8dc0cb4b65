/*
 * ucx_pxn_ucp_bench: UCP puts and gets of one region through pxn, in blocks
 * of random size and in fixed size classes, for each UCX_PXN_COPY policy
 * side by side, every byte checked (docs/gpu.md, "UCP puts and gets").
 *
 *   ucx_pxn_ucp_bench [--gpu] [--device 0] [--region 256M] [--small-region 64M]
 *       [--modes random,4K,64K,1M,8M] [--copies auto,ce,sm] [--ops put,get]
 *       [--reps 2] [--rounds 1] [--seed 1] [--window 256] [--port 13500]
 *       [--prefix pxnub]
 *       [--relay PATH] [--env NAME=value]... [--logs DIR]
 *
 * Processes and their environment: bench/ucp_bench_rails.h (initiator node
 * 0 rail 0 and target node 1 rail 1, a fresh pair per policy and round;
 * the relays of node 0 rail 1, which carries every put and get, and node 1
 * rail 0, started once). Inner transport: cuda_ipc with --gpu (buffers in
 * GPU memory), cma otherwise (host memory).
 *
 * Modes: "random" covers the region in blocks of uniform random size in
 * [4 KiB, 1 MiB] (offsets unaligned), in random order (--seed); a size
 * ("4K", "8M") covers it in blocks of that size, in order; sizes under
 * 64 KiB cover --small-region only. Each initiator first puts and gets the
 * region once in 1 MiB blocks (not timed), then runs every mode --reps
 * times; a round is one such pair per policy, one policy after the other,
 * and --rounds interleaves the policies that many times (a GPU's or a
 * machine's drift then falls on every policy alike). A round's figure is
 * the best of its reps; printed are the medians over the rounds of GB/s and
 * thousands of operations per second per policy, auto's median against the
 * higher median of ce and sm (and the lowest and highest of the rounds'
 * own auto / better-of-the-two), and the median of the rounds' GET / PUT.
 */
#include <apps/peer_process.h>
#include <bench/bench_units.h>
#include "ucp_bench_peer.h"
#include "ucp_bench_rails.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

using pxn_tools::BackgroundProcess;
using pxn_tools::UcpBenchPeerOptions;
using pxn_tools::UcpRails;

namespace {

struct Options {
    UcpBenchPeerOptions        peer;
    pxn_tools::UcpRailsConfig  rails;
    unsigned                   rounds = 1;
    std::vector<std::string>   copies = {"auto", "ce", "sm"};
};

[[noreturn]] void die(const std::string &why)
{
    pxn_tools::bench_fail(pxn_tools::kBenchSetup, why);
}

std::vector<std::string> list(const std::string &text)
{
    return pxn_tools::split(text, ',');
}

struct Figure {
    double   gbps = 0, kops = 0;
    bool     ok   = false;
};

/* mode -> op -> copy policy -> round -> best figure of its reps */
using Results = std::map<std::string,
        std::map<std::string, std::map<std::string, std::vector<Figure>>>>;

/* Bytes the initiators moved (warm-ups included): the relay of node 0
 * rail 1 should have carried them all. */
uint64_t g_moved = 0;

/* One initiator and target pair under UCX_PXN_COPY=copy, round `round`;
 * false if either failed (its log is printed). */
bool run_policy(const Options &o, const UcpRails &rails, const std::string &copy,
                unsigned round, int port, Results *results)
{
    const std::string exe = UcpRails::self_exe();
    std::vector<std::string> common = {"--port", std::to_string(port), "--device",
                                       std::to_string(o.peer.device), "--deadline",
                                       std::to_string(o.peer.deadline)};
    if (o.peer.gpu) {
        common.push_back("--gpu");
    }
    std::vector<std::string> target_argv = {exe, "--role", "target"};
    target_argv.insert(target_argv.end(), common.begin(), common.end());
    std::ostringstream modes, ops;
    for (size_t i = 0; i < o.peer.modes.size(); ++i) {
        modes << (i ? "," : "") << o.peer.modes[i];
    }
    for (size_t i = 0; i < o.peer.ops.size(); ++i) {
        ops << (i ? "," : "") << o.peer.ops[i];
    }
    std::vector<std::string> in_argv = {
        exe, "--role", "initiator", "--region", std::to_string(o.peer.region),
        "--small-region", std::to_string(o.peer.small_region), "--modes", modes.str(),
        "--ops", ops.str(), "--reps", std::to_string(o.peer.reps), "--seed",
        std::to_string(o.peer.seed), "--window", std::to_string(o.peer.window)};
    in_argv.insert(in_argv.end(), common.begin(), common.end());

    std::vector<std::string> in_env = rails.env(0, 0);
    /* UCP's protocol choices go to the initiator's log */
    in_env.insert(in_env.end(), {"UCX_PXN_COPY=" + copy, "UCX_PROTO_INFO=y"});
    BackgroundProcess target, initiator;
    std::string error;
    const std::string log = rails.config().logs + "/" + copy +
                            ((o.rounds > 1) ? "-r" + std::to_string(round) : "");
    if (!target.start("", rails.env(1, 1), target_argv, log + "-target.log", &error) ||
        !target.wait_for_output("listening", 30000) ||
        !initiator.start("", in_env, in_argv, log + "-initiator.log", &error)) {
        fprintf(stderr, "ucx_pxn_ucp_bench: %s: cannot start: %s\n%s", copy.c_str(),
                error.c_str(), target.output().c_str());
        return false;
    }
    const int status = initiator.wait(int(o.peer.deadline) * 1000 + 10000);
    const int tstatus = target.wait(30000);
    std::istringstream out(initiator.output());
    for (std::string line; std::getline(out, line);) {
        char mode[32], op[8], verified[16];
        unsigned rep;
        size_t blocks;
        uint64_t bytes;
        double seconds;
        if ((sscanf(line.c_str(), "result mode=%31s op=%7s rep=%u blocks=%zu "
                    "bytes=%lu seconds=%lf verified=%15s", mode, op, &rep, &blocks,
                    &bytes, &seconds, verified) == 7) && (seconds > 0)) {
            g_moved += bytes;
            std::vector<Figure> &rounds = (*results)[mode][op][copy];
            rounds.resize(o.rounds);
            Figure &f = rounds[round];
            const double gbps = bytes / seconds / 1e9;
            if (gbps > f.gbps) {
                f.gbps = gbps;
                f.kops = blocks / seconds / 1e3;
            }
            f.ok = (rep == 0) ? (strcmp(verified, "ok") == 0) :
                   (f.ok && (strcmp(verified, "ok") == 0));
        }
    }
    if (status == 0) {
        g_moved += 2 * o.peer.region; /* the warm-up's put and get */
    }
    if ((status != 0) || (tstatus != 0)) {
        fprintf(stderr, "ucx_pxn_ucp_bench: %s: initiator exit %d, target exit %d\n"
                "--- initiator:\n%s--- target:\n%s", copy.c_str(), status, tstatus,
                initiator.output().c_str(), target.output().c_str());
        return false;
    }
    return true;
}

/* f(round) over the rounds, skipping rounds where it is not defined (<= 0) */
template <typename F> std::vector<double> per_round(const Options &o, F f)
{
    std::vector<double> values;
    for (unsigned r = 0; r < o.rounds; ++r) {
        const double v = f(r);
        if (v > 0) {
            values.push_back(v);
        }
    }
    return values;
}

void print(const Options &o, Results &results)
{
    printf("\n%-7s %-4s", "mode", "op");
    for (const std::string &c : o.copies) {
        printf(" %9s %8s", (c + " GB/s").c_str(), "kop/s");
    }
    printf(" %10s %11s %s\n", "auto/best", "(rounds)", "verified");
    for (const std::string &mode : o.peer.modes) {
        for (const std::string &op : o.peer.ops) {
            auto &row = results[mode][op];
            printf("%-7s %-4s", mode.c_str(), op.c_str());
            bool ok = true;
            for (const std::string &c : o.copies) {
                auto &f = row[c];
                f.resize(o.rounds); /* a failed pair gave no figures */
                printf(" %9.2f %8.1f",
                       pxn_tools::median(per_round(o, [&](unsigned r) { return f[r].gbps; })),
                       pxn_tools::median(per_round(o, [&](unsigned r) { return f[r].kops; })));
                ok = std::all_of(f.begin(), f.end(), [&](const Figure &x) { return x.ok; }) &&
                     ok;
            }
            /* The better policy is the one of the higher median (the
             * better of two noisy figures per round would favour it). */
            std::vector<double> ratios;
            double best = 0;
            if (row.count("auto") && row.count("ce") && row.count("sm")) {
                ratios = per_round(o, [&](unsigned r) {
                    const double b = std::max(row["ce"][r].gbps, row["sm"][r].gbps);
                    return (b > 0) ? row["auto"][r].gbps / b : 0.0;
                });
                for (const char *c : {"ce", "sm"}) {
                    best = std::max(best, pxn_tools::median(per_round(
                            o, [&](unsigned r) { return row[c][r].gbps; })));
                }
            }
            if (ratios.empty() || (best <= 0)) {
                printf(" %10s %11s", "-", "");
            } else {
                const auto range = std::minmax_element(ratios.begin(), ratios.end());
                printf(" %10.2f %5.2f-%-5.2f",
                       pxn_tools::median(per_round(
                               o, [&](unsigned r) { return row["auto"][r].gbps; })) / best,
                       *range.first, *range.second);
            }
            printf(" %s\n", ok ? "ok" : "NO");
        }
    }
    if (std::count(o.peer.ops.begin(), o.peer.ops.end(), "get") &&
        std::count(o.peer.ops.begin(), o.peer.ops.end(), "put")) {
        printf("\nGET/PUT bandwidth ratio\n%-7s", "mode");
        for (const std::string &c : o.copies) {
            printf(" %8s", c.c_str());
        }
        printf("\n");
        for (const std::string &mode : o.peer.modes) {
            printf("%-7s", mode.c_str());
            for (const std::string &c : o.copies) {
                auto &put = results[mode]["put"][c], &get = results[mode]["get"][c];
                put.resize(o.rounds);
                get.resize(o.rounds);
                printf(" %8.2f", pxn_tools::median(per_round(o, [&](unsigned r) {
                    return (put[r].gbps > 0) ? get[r].gbps / put[r].gbps : 0.0;
                })));
            }
            printf("\n");
        }
    }
}

int launch(Options &o)
{
    o.rails.gpu    = o.peer.gpu;
    o.rails.device = o.peer.device;
    UcpRails rails(o.rails, "pxn-ucp-bench");
    printf("ucx_pxn_ucp_bench: %s of %s memory per transfer (sizes under 64K: %s), "
           "inner %s, median of %u round(s) of the best of %u, logs in %s\n",
           pxn_tools::human(o.peer.region).c_str(), o.peer.gpu ? "GPU" : "host",
           pxn_tools::human(o.peer.small_region).c_str(), o.peer.gpu ? "cuda_ipc" : "cma",
           o.rounds, o.peer.reps, rails.config().logs.c_str());
    rails.start_relays();
    Results results;
    bool ok = true;
    for (unsigned r = 0; r < o.rounds; ++r) {
        for (size_t i = 0; i < o.copies.size(); ++i) {
            ok = run_policy(o, rails, o.copies[i], r,
                            o.peer.port + int(r * o.copies.size() + i), &results) && ok;
        }
    }
    print(o, results);
    printf("initiators moved %lu bytes (warm-ups included)\n", g_moved);
    rails.stop_relays();
    return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv)
{
    setvbuf(stdout, nullptr, _IOLBF, 0);
    Options o;
    o.rails.prefix = "pxnub";
    std::string role;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--gpu") {
            o.peer.gpu = true;
            continue;
        }
        if (i + 1 >= argc) {
            die(a + ": a value is missing (see the comment at the top of "
                "bench/ucx_pxn_ucp_bench.cc)");
        }
        const std::string v = argv[++i];
        uint64_t size = 0;
        if (a == "--role") {
            role = v;
        } else if (a == "--device") {
            o.peer.device = atoi(v.c_str());
        } else if ((a == "--region") && pxn_tools::parse_size(v, &size)) {
            o.peer.region = size;
        } else if ((a == "--small-region") && pxn_tools::parse_size(v, &size)) {
            o.peer.small_region = size;
        } else if (a == "--modes") {
            o.peer.modes = list(v);
        } else if (a == "--copies") {
            o.copies = list(v);
        } else if (a == "--ops") {
            o.peer.ops = list(v);
        } else if (a == "--reps") {
            o.peer.reps = std::max(1, atoi(v.c_str()));
        } else if (a == "--rounds") {
            o.rounds = unsigned(std::max(1, atoi(v.c_str())));
        } else if (a == "--seed") {
            o.peer.seed = strtoull(v.c_str(), nullptr, 0);
        } else if (a == "--window") {
            o.peer.window = std::max(1, atoi(v.c_str()));
        } else if (a == "--port") {
            o.peer.port = atoi(v.c_str());
        } else if (a == "--deadline") {
            o.peer.deadline = std::max(1, atoi(v.c_str()));
        } else if (!pxn_tools::ucp_rails_option(&o.rails, a, v)) {
            die("unknown or bad option " + a + " " + v);
        }
    }
    for (const std::string &mode : o.peer.modes) {
        if (pxn_tools::ucp_bench_blocks(mode, 1 << 20, 0).empty()) {
            die("unknown mode " + mode + " (random or a size)");
        }
    }
    if (role == "target") {
        return pxn_tools::ucp_bench_target(o.peer);
    }
    if (role == "initiator") {
        return pxn_tools::ucp_bench_initiator(o.peer);
    }
    return launch(o);
}
