/*
 * ucx_pxn_kv_bench: KV-cache shaped transfers, the traffic NIXL carries for
 * vLLM and Dynamo, through pxn against the inner transport alone, between
 * the same two processes, every byte checked (docs/benchmarks.md,
 * "KV-cache shapes").
 *
 *   ucx_pxn_kv_bench [--gpu] [--device 0]
 *       [--shapes 1x64K,1x1M,32x1M,512x64K,744x45K,4096x8K]
 *       [--ops put,get] [--modes inner,inner-sgl,pxn,pxn-sgl]
 *       [--reps 2] [--seconds 0.25 | --iters N] [--warmup 2] [--seed 1]
 *       [--inner-tls LIST] [--label TEXT] [--port 13600] [--deadline 600]
 *       [--prefix pxnkv] [--relay PATH] [--env NAME=value]... [--logs DIR]
 *
 * A shape NxS is N blocks of S bytes moved as one transfer: posted
 * together, then the ep flushed and waited for (bench/kv_bench_peer.h).
 * Modes: "pxn" one ucp_put_nbx / ucp_get_nbx per block through pxn;
 * "pxn-sgl" the whole list as one call with UCP's SGL datatype (UCX 1.22
 * on; UCP has puts only); "inner" and "inner-sgl" the same through a second
 * UCP context of the same two processes whose UCX_TLS names the inner
 * transport alone (--inner-tls; cuda_ipc,cuda_copy,tcp with --gpu,
 * cma,tcp without). Processes (bench/ucp_bench_rails.h): initiator node 0
 * rail 0, target node 1 rail 1, one pair for the whole run; the relays of
 * node 0 rail 1 (which carries every pxn byte) and node 1 rail 0. --gpu:
 * GPU memory allocated by each process in its own CUDA context, inner
 * cuda_ipc; otherwise host memory, inner cma (no root, no namespaces).
 *
 * Each shape runs its ops in turn, each op --reps times, the modes
 * interleaved within a rep (drift falls on every mode alike). A
 * measurement is --warmup untimed transfers, then --iters transfers or as
 * many as --seconds allow (at least 3), then its check. Printed: the
 * initiator's line per measurement ("kv op=... shape=... mode=... gbps=...
 * blocks_per_s=... p50_us=... p99_us=... verified=..."), then per op two
 * tables, each cell the figures of the rep of median bandwidth (of two,
 * the better): GB/s and thousands of blocks a second per mode with the
 * bandwidth ratios pxn/inner and pxn-sgl/inner, and the p50 and p99 time
 * per transfer (the latency of the single-block shapes) with the same
 * ratios of p50. A mode that cannot run says why ("n/a": not in this UCX;
 * "refused": UCP's status for its first post; "failed": an operation's
 * status). Exit status: 0, or 1 when a byte did not match, 2 setup, 3 a
 * failed transfer (the processes' own).
 */
#include <apps/peer_process.h>
#include <bench/bench_units.h>
#include "kv_bench_peer.h"
#include "ucp_bench_rails.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using pxn_tools::BackgroundProcess;
using pxn_tools::KvBenchPeerOptions;
using pxn_tools::KvShape;
using pxn_tools::UcpRails;

namespace {

struct Options {
    KvBenchPeerOptions        peer;
    pxn_tools::UcpRailsConfig rails;
    std::string               label;
    std::vector<std::string>  args; /* the command line, for the roles */
};

[[noreturn]] void die(const std::string &why)
{
    pxn_tools::bench_fail(pxn_tools::kBenchSetup, why);
}

/* One "kv ..." line of the initiator: its key=value fields (reason: the
 * rest of the line). */
using Fields = std::map<std::string, std::string>;

Fields parse_fields(const std::string &line)
{
    Fields f;
    std::istringstream in(line.substr(3));
    for (std::string word; in >> word;) {
        const size_t eq = word.find('=');
        if (eq == std::string::npos) {
            continue;
        }
        const std::string key = word.substr(0, eq);
        if (key == "reason") {
            std::string rest;
            std::getline(in, rest);
            f[key] = word.substr(eq + 1) + rest;
            break;
        }
        f[key] = word.substr(eq + 1);
    }
    return f;
}

/* One measurement's figures. */
struct Rep {
    double gbps, kblocks, p50, p99;
};

struct Cell {
    std::vector<Rep> reps;
    std::string      status; /* "" measured; else "n/a", "refused" or "failed" */

    /* The rep of the median bandwidth (the upper middle one of an even
     * count, as pxn_tools::median), so that a cell's figures are those of
     * one measurement. */
    const Rep &pick() const
    {
        std::vector<size_t> order(reps.size());
        for (size_t i = 0; i < order.size(); ++i) {
            order[i] = i;
        }
        std::sort(order.begin(), order.end(),
                  [&](size_t a, size_t b) { return reps[a].gbps < reps[b].gbps; });
        return reps[order[order.size() / 2]];
    }
};

/* op -> shape -> mode */
using Results = std::map<std::string, std::map<std::string, std::map<std::string, Cell>>>;

std::string ratio(const Cell &a, const Cell &b, bool by_p50)
{
    if (!a.status.empty() || !b.status.empty() || a.reps.empty() || b.reps.empty()) {
        return "-";
    }
    char text[32];
    snprintf(text, sizeof(text), "%.2f", by_p50 ? a.pick().p50 / b.pick().p50 :
                                                  a.pick().gbps / b.pick().gbps);
    return text;
}

void print_op(const Options &o, const std::string &op,
              std::map<std::string, std::map<std::string, Cell>> &rows,
              const std::map<std::string, std::string> &notes)
{
    const std::vector<std::string> &modes = o.peer.modes;
    auto has = [&](const char *m) { return std::count(modes.begin(), modes.end(), m) > 0; };
    /* ratio columns: {numerator, denominator} of the modes present */
    std::vector<std::pair<std::string, std::string>> ratios;
    for (const char *m : {"pxn", "pxn-sgl"}) {
        if (has(m) && has("inner")) {
            ratios.push_back({m, "inner"});
        }
    }
    for (int table = 0; table < 2; ++table) {
        printf("\n%s, %s: %s (the rep of median bandwidth of %u)\n", op.c_str(),
               o.peer.gpu ? "GPU memory" : "host memory",
               table ? "time per transfer, p50 / p99 us" :
                       "GB/s and thousands of blocks a second",
               o.peer.reps);
        printf("%-9s", "shape");
        for (const std::string &m : modes) {
            printf(" | %19s", m.c_str());
        }
        printf(" |");
        for (const auto &r : ratios) {
            printf("  %14s", (r.first + "/" + r.second + (table ? " p50" : "")).c_str());
        }
        printf("\n");
        for (const KvShape &s : o.peer.shapes) {
            const std::string name = pxn_tools::kv_shape_name(s);
            auto &row = rows[name];
            printf("%-9s", name.c_str());
            for (const std::string &m : modes) {
                const Cell &c = row[m];
                if (!c.status.empty() || c.reps.empty()) {
                    printf(" | %19s", c.status.empty() ? "-" : c.status.c_str());
                } else if (table) {
                    printf(" | %9.1f %9.1f", c.pick().p50, c.pick().p99);
                } else {
                    printf(" | %9.2f %9.1f", c.pick().gbps, c.pick().kblocks);
                }
            }
            printf(" |");
            for (const auto &r : ratios) {
                printf("  %14s", ratio(row[r.first], row[r.second], table).c_str());
            }
            printf("\n");
        }
    }
    for (const auto &n : notes) {
        printf("  %s: %s\n", n.first.c_str(), n.second.c_str());
    }
}

int launch(Options &o)
{
    o.rails.gpu    = o.peer.gpu;
    o.rails.device = o.peer.device;
    UcpRails rails(o.rails, "pxn-kv-bench");
    const std::string exe = UcpRails::self_exe();
    std::ostringstream run;
    if (o.peer.iters > 0) {
        run << o.peer.iters << " transfers";
    } else {
        run << o.peer.seconds << " s of transfers";
    }
    printf("ucx_pxn_kv_bench: %s memory, inner %s, %s; %u rep(s) of %s (after %u "
           "untimed) per shape, op and mode, modes interleaved; logs in %s\n",
           o.peer.gpu ? "GPU" : "host", o.peer.gpu ? "cuda_ipc" : "cma",
           o.label.empty() ? "no label" : o.label.c_str(), o.peer.reps,
           run.str().c_str(), o.peer.warmup, rails.config().logs.c_str());
    rails.start_relays();
    std::vector<std::string> target_argv = {exe, "--role", "target"},
                             in_argv     = {exe, "--role", "initiator"};
    target_argv.insert(target_argv.end(), o.args.begin(), o.args.end());
    in_argv.insert(in_argv.end(), o.args.begin(), o.args.end());
    std::vector<std::string> in_env = rails.env(0, 0);
    in_env.push_back("UCX_PROTO_INFO=y"); /* UCP's protocol choices to its log */
    BackgroundProcess target, initiator;
    std::string error;
    const std::string log = rails.config().logs + "/kv";
    if (!target.start("", rails.env(1, 1), target_argv, log + "-target.log", &error) ||
        !target.wait_for_output("listening", 30000) ||
        !initiator.start("", in_env, in_argv, log + "-initiator.log", &error)) {
        die("cannot start: " + error + "\n" + target.output());
    }
    const int status  = initiator.wait(int(o.peer.deadline) * 1000 + 10000);
    const int tstatus = target.wait(30000);

    Results results;
    std::map<std::string, std::map<std::string, std::string>> notes; /* op -> mode */
    size_t measured = 0, matched = 0;
    std::istringstream out(initiator.output());
    for (std::string line; std::getline(out, line);) {
        if (line.compare(0, 14, "inner context:") == 0) {
            printf("%s\n", line.c_str());
            continue;
        }
        if (line.compare(0, 3, "ep ") == 0) {
            /* the lanes each context chose, and (UCX 1.13) its RMA ranges */
            if ((line.find("lane[") != std::string::npos) ||
                (line.find("put[") != std::string::npos) ||
                (line.find("get[") != std::string::npos)) {
                printf("%s\n", line.c_str());
            }
            continue;
        }
        if (line.compare(0, 3, "kv ") != 0) {
            continue;
        }
        printf("%s\n", line.c_str());
        Fields f   = parse_fields(line);
        Cell &cell = results[f["op"]][f["shape"]][f["mode"]];
        if (f.count("status")) {
            cell.status = f["status"];
            notes[f["op"]][f["mode"]] = f["status"] + ": " + f["reason"];
            continue;
        }
        cell.reps.push_back({atof(f["gbps"].c_str()), atof(f["blocks_per_s"].c_str()) / 1e3,
                             atof(f["p50_us"].c_str()), atof(f["p99_us"].c_str())});
        ++measured;
        matched += (f["verified"] == "ok");
    }
    for (const std::string &op : o.peer.ops) {
        print_op(o, op, results[op], notes[op]);
    }
    printf("\ndata verified: %zu of %zu measurements matched%s\n", matched, measured,
           (matched == measured) ? "" : " (MISMATCH: see the kv lines)");
    rails.stop_relays();
    if ((status != 0) || (tstatus != 0)) {
        /* the initiator's last lines other than its measurements (above) */
        std::vector<std::string> tail;
        std::istringstream in_out(initiator.output());
        for (std::string line; std::getline(in_out, line);) {
            if ((line.compare(0, 3, "kv ") != 0) && (line.compare(0, 3, "ep ") != 0)) {
                tail.push_back(line);
            }
        }
        fprintf(stderr, "ucx_pxn_kv_bench: initiator exit %d, target exit %d; the "
                "initiator's last lines:\n", status, tstatus);
        for (size_t i = tail.size() - std::min<size_t>(30, tail.size()); i < tail.size(); ++i) {
            fprintf(stderr, "  %s\n", tail[i].c_str());
        }
        fprintf(stderr, "--- target:\n%s", target.output().c_str());
        return (status > 0) ? status : pxn_tools::kBenchTransfer;
    }
    return (matched == measured) ? 0 : pxn_tools::kBenchMismatch;
}

} // namespace

int main(int argc, char **argv)
{
    setvbuf(stdout, nullptr, _IOLBF, 0);
    Options o;
    o.rails.prefix = "pxnkv";
    o.peer.shapes  = pxn_tools::kv_default_shapes();
    std::string role;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--gpu") {
            o.peer.gpu = true;
            o.args.push_back(a);
            continue;
        }
        if (i + 1 >= argc) {
            die(a + ": a value is missing (see the comment at the top of "
                "bench/ucx_pxn_kv_bench.cc)");
        }
        const std::string v = argv[++i];
        if (a != "--role") {
            o.args.insert(o.args.end(), {a, v});
        }
        if (a == "--role") {
            role = v;
        } else if (a == "--device") {
            o.peer.device = atoi(v.c_str());
        } else if (a == "--shapes") {
            o.peer.shapes.clear();
            for (const std::string &t : pxn_tools::split(v, ',')) {
                KvShape s;
                if (!pxn_tools::parse_kv_shape(t, &s)) {
                    die("bad shape " + t + " (NxS: N blocks of S bytes, S a multiple "
                        "of 8, e.g. 744x45K)");
                }
                o.peer.shapes.push_back(s);
            }
        } else if (a == "--ops") {
            o.peer.ops = pxn_tools::split(v, ',');
        } else if (a == "--modes") {
            o.peer.modes = pxn_tools::split(v, ',');
        } else if (a == "--reps") {
            o.peer.reps = unsigned(std::max(1, atoi(v.c_str())));
        } else if (a == "--iters") {
            o.peer.iters = unsigned(std::max(1, atoi(v.c_str())));
        } else if (a == "--seconds") {
            o.peer.seconds = atof(v.c_str());
        } else if (a == "--warmup") {
            o.peer.warmup = unsigned(std::max(0, atoi(v.c_str())));
        } else if (a == "--seed") {
            o.peer.seed = strtoull(v.c_str(), nullptr, 0);
        } else if (a == "--inner-tls") {
            o.peer.inner_tls = v;
        } else if (a == "--port") {
            o.peer.port = atoi(v.c_str());
        } else if (a == "--deadline") {
            o.peer.deadline = unsigned(std::max(1, atoi(v.c_str())));
        } else if (a == "--label") {
            o.label = v;
        } else if (!pxn_tools::ucp_rails_option(&o.rails, a, v)) {
            die("unknown option " + a);
        }
    }
    for (const std::string &m : o.peer.modes) {
        if (!pxn_tools::kv_known_mode(m)) {
            die("unknown mode " + m + " (inner, inner-sgl, pxn, pxn-sgl)");
        }
    }
    for (const std::string &op : o.peer.ops) {
        if ((op != "put") && (op != "get")) {
            die("unknown op " + op + " (put, get)");
        }
    }
    if (o.peer.shapes.empty() || o.peer.modes.empty() || o.peer.ops.empty()) {
        die("nothing to measure (--shapes, --modes, --ops)");
    }
    if (role == "target") {
        return pxn_tools::kv_bench_target(o.peer);
    }
    if (role == "initiator") {
        return pxn_tools::kv_bench_initiator(o.peer);
    }
    return launch(o);
}
