#include "ucp_bench_peer.h"

#include "bench_oob.h"
#include "bench_region.h"
#include "ucp_bench_worker.h"
#include <bench/bench_units.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <poll.h>
#include <random>
#include <unistd.h>

namespace pxn_tools {

namespace {

enum Request : uint32_t { kVerify = 1, kFill = 2, kDone = 3 };

struct Message {
    uint32_t op;
    uint32_t pad;
    uint64_t seed;
    uint64_t length;
};

struct Reply {
    uint32_t op, ok;
    int64_t  bad_offset;
};

/* --- target ---------------------------------------------------------------- */

bool serve(int fd, UcpBenchWorker &ucp, BenchRegion &region)
{
    for (;;) {
        /* Moving the bytes needs nothing of the target (pxn, cma and
         * cuda_ipc are one-sided): it progresses once a millisecond for
         * wireup, leaving the cores to the initiator and the relay. */
        ucp_worker_progress(ucp.worker);
        pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, 1) <= 0) {
            continue;
        }
        Message m;
        if (!io_all(fd, &m, sizeof(m), false)) {
            return false; /* the initiator went away */
        }
        Reply reply = {m.op, 1, -1};
        if (m.op == kDone) {
            return io_all(fd, &reply, sizeof(reply), true);
        }
        const uint64_t len = std::min(m.length, region.size());
        if (m.op == kVerify) {
            reply.bad_offset = region.mismatch(m.seed, len);
            reply.ok         = (reply.bad_offset < 0);
        } else if (m.op == kFill) {
            region.fill(m.seed, len);
        }
        if (!io_all(fd, &reply, sizeof(reply), true)) {
            return false;
        }
    }
}

/* --- initiator --------------------------------------------------------------- */

struct Initiator {
    const UcpBenchPeerOptions &o;
    UcpBenchWorker ucp;
    int        fd     = -1;
    ucp_rkey_h rkey   = nullptr;
    uint64_t   remote = 0;

    explicit Initiator(const UcpBenchPeerOptions &options) : o(options) {}

    Reply ask(uint32_t op, uint64_t seed, uint64_t length)
    {
        Message m = {op, 0, seed, length};
        Reply r   = {0, 0, 0};
        if (!io_all(fd, &m, sizeof(m), true) || !io_all(fd, &r, sizeof(r), false) ||
            (r.op != op)) {
            bench_fail(kBenchSetup, "the target did not answer");
        }
        return r;
    }

    /* Every block, at most o.window outstanding, then a flush; seconds. */
    double transfer(bool put, BenchRegion &local, const std::vector<UcpBenchBlock> &list)
    {
        const ucp_request_param_t p = ucp.param(local.gpu() ? UCS_MEMORY_TYPE_CUDA :
                                                              UCS_MEMORY_TYPE_HOST);
        const auto start = std::chrono::steady_clock::now();
        for (const UcpBenchBlock &b : list) {
            while ((ucp.outstanding >= o.window) && (ucp.failed == 0)) {
                ucp_worker_progress(ucp.worker);
            }
            if (ucp.failed > 0) {
                break;
            }
            ucp.track(put ? ucp_put_nbx(ucp.ep, local.data() + b.offset, b.length,
                                        remote + b.offset, rkey, &p) :
                            ucp_get_nbx(ucp.ep, local.data() + b.offset, b.length,
                                        remote + b.offset, rkey, &p));
        }
        ucp.drain();
        ucp.flush();
        if (ucp.failed > 0) {
            bench_fail(kBenchTransfer, std::string(put ? "put" : "get") + " failed: " +
                                       ucs_status_string(ucp.first_failure));
        }
        return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                             start).count();
    }
};

} // namespace

std::vector<UcpBenchBlock> ucp_bench_blocks(const std::string &mode,
                                            uint64_t region, uint64_t seed)
{
    std::vector<UcpBenchBlock> blocks;
    std::mt19937_64 rng(seed);
    uint64_t size = 0;
    if (mode == "random") {
        std::uniform_int_distribution<uint64_t> len(4096, 1 << 20);
        for (uint64_t off = 0; off < region; off += blocks.back().length) {
            blocks.push_back({off, std::min(len(rng), region - off)});
        }
        std::shuffle(blocks.begin(), blocks.end(), rng);
    } else if (parse_size(mode, &size)) {
        for (uint64_t off = 0; off < region; off += size) {
            blocks.push_back({off, std::min(size, region - off)});
        }
    }
    return blocks;
}

uint64_t ucp_bench_region(const std::string &mode, const UcpBenchPeerOptions &o)
{
    uint64_t size = 0;
    return (parse_size(mode, &size) && (size < (64u << 10))) ?
           std::min(o.small_region, o.region) : o.region;
}

int ucp_bench_target(const UcpBenchPeerOptions &o)
{
    alarm(o.deadline);
    const int fd = oob_socket(true, o.port);
    uint64_t size;
    if (!io_all(fd, &size, sizeof(size), false) || (size == 0)) {
        bench_fail(kBenchSetup, "no region size from the initiator");
    }
    BenchRegion region(o.gpu, o.device, size);
    UcpBenchWorker ucp;
    ucp.offer(fd, region, ucp.map(region));
    bench_target_end(serve(fd, ucp, region));
}

int ucp_bench_initiator(const UcpBenchPeerOptions &o)
{
    alarm(o.deadline);
    Initiator in(o);
    in.fd = oob_socket(false, o.port);
    if (!io_all(in.fd, const_cast<uint64_t*>(&o.region), sizeof(o.region), true)) {
        bench_fail(kBenchSetup, "socket send failed");
    }
    BenchRegion local(o.gpu, o.device, o.region);
    ucp_mem_h memh = in.ucp.map(local);
    in.rkey        = in.ucp.accept(in.fd, &in.remote);

    /* Warm-up, not timed: lanes, routes, keys and slots of both directions. */
    const std::vector<UcpBenchBlock> warm = ucp_bench_blocks("1M", o.region, 0);
    in.transfer(true, local, warm);
    in.transfer(false, local, warm);

    int result = kBenchOk;
    for (const std::string &mode : o.modes) {
        const uint64_t region = ucp_bench_region(mode, o);
        for (unsigned rep = 0; rep < o.reps; ++rep) {
            const uint64_t seed = o.seed * 1000003 + rep;
            const std::vector<UcpBenchBlock> blocks = ucp_bench_blocks(mode, region,
                                                                       seed);
            for (const std::string &op : o.ops) {
                const bool put = (op == "put");
                int64_t bad;
                double seconds;
                if (put) {
                    local.fill(seed, region);
                    seconds = in.transfer(true, local, blocks);
                    bad     = in.ask(kVerify, seed, region).bad_offset;
                } else {
                    in.ask(kFill, seed + 7, region);
                    local.zero(region);
                    seconds = in.transfer(false, local, blocks);
                    bad     = local.mismatch(seed + 7, region);
                }
                printf("result mode=%s op=%s rep=%u blocks=%zu bytes=%lu "
                       "seconds=%.6f verified=%s", mode.c_str(), op.c_str(), rep,
                       blocks.size(), region, seconds, (bad < 0) ? "ok" : "mismatch");
                if (bad >= 0) {
                    printf(" first_bad_offset=%ld", bad);
                    result = kBenchMismatch;
                }
                printf("\n");
                fflush(stdout);
            }
        }
    }
    in.ask(kDone, 0, 0);
    ucp_rkey_destroy(in.rkey);
    in.ucp.close_ep();
    close(in.fd);
    in.ucp.unmap(memh);
    return result;
}

} // namespace pxn_tools
