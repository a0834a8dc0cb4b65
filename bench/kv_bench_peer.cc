#include "kv_bench_peer.h"

#include "bench_region.h"
#include "ucp_bench_worker.h"
#include <apps/pattern.h>
#include <apps/ucp_sgl.h>
#include <bench/bench_units.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <poll.h>
#include <random>
#include <unistd.h>

namespace pxn_tools {

namespace {

enum Context : unsigned { kPxnCtx = 0, kInnerCtx = 1, kContexts = 2 };

enum Request : uint32_t { kFillJunk = 1, kCheckPut = 2, kFillData = 3, kIdle = 4,
                          kDone = 5 };

/* Initiator -> target. Every request is answered with a Reply. `spin`
 * (1 + a Context, or 0) says which worker the target progresses without
 * pause from then on: the inner context's during its measurements, where
 * UCP may emulate RMA with active messages, which need the target (UCX
 * 1.13 has no RMA lane on cma or cuda_ipc). */
struct Message {
    uint32_t op, spin;
    uint64_t count, size;       /* the shape */
    uint64_t layout_seed, data_seed, junk_seed;
};

struct Reply {
    uint32_t op, ok;
    int64_t  bad_offset;
};

/* What the initiator asks for first: the region's size, which contexts. */
struct Hello {
    uint64_t region;
    uint32_t contexts; /* bit per Context */
    uint32_t pad;
};

std::string inner_tls(const KvBenchPeerOptions &o)
{
    return !o.inner_tls.empty() ? o.inner_tls :
           o.gpu ? "cuda_ipc,cuda_copy,tcp" : "cma,tcp";
}

Context context_of(const std::string &mode)
{
    return (mode.compare(0, 5, "inner") == 0) ? kInnerCtx : kPxnCtx;
}

bool is_sgl(const std::string &mode)
{
    return (mode.size() > 4) && (mode.compare(mode.size() - 4, 4, "-sgl") == 0);
}

/* The offset in [0, span) of the first wrong byte of `host` (one side's
 * slots of `shape`), or -1: the slot of each block on this side (`remote`:
 * the target's) holds the pattern of `seed` as it stands at the block's
 * offset on the other side; every other slot the pattern of `rest_seed`
 * at its own offset, or zeros when rest_seed is 0. */
int64_t check_slots(const uint8_t *host, const KvShape &shape,
                    const std::vector<KvBlock> &layout, bool remote, uint64_t seed,
                    uint64_t rest_seed)
{
    const uint64_t S = shape.size;
    std::vector<int64_t> from(2 * shape.count, -1); /* slot -> other side's offset */
    for (const KvBlock &b : layout) {
        from[(remote ? b.remote : b.local) / S] = int64_t(remote ? b.local : b.remote);
    }
    for (uint64_t j = 0; j < from.size(); ++j) {
        const uint8_t *p = host + j * S;
        uint64_t at      = S;
        if (from[j] >= 0) {
            at = first_mismatch(p, S, seed, uint64_t(from[j]) / 8);
        } else if (rest_seed != 0) {
            at = first_mismatch(p, S, rest_seed, j * S / 8);
        } else {
            at = std::find_if(p, p + S, [](uint8_t c) { return c != 0; }) - p;
        }
        if (at < S) {
            return int64_t(j * S + at);
        }
    }
    return -1;
}

/* --- target ------------------------------------------------------------------ */

bool serve(int fd, std::unique_ptr<UcpBenchWorker> *ucp, BenchRegion &region)
{
    unsigned spin = 0;
    for (;;) {
        /* pxn, cma and cuda_ipc move the bytes without the target: unless
         * told to spin, it progresses once a millisecond for wireup,
         * leaving the cores to the initiator and the relay. */
        if ((spin > 0) && ucp[spin - 1]) {
            for (int i = 0; i < 256; ++i) {
                ucp_worker_progress(ucp[spin - 1]->worker);
            }
        } else {
            for (unsigned c = 0; c < kContexts; ++c) {
                if (ucp[c]) {
                    ucp_worker_progress(ucp[c]->worker);
                }
            }
        }
        pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, (spin > 0) ? 0 : 1) <= 0) {
            continue;
        }
        Message m;
        if (!io_all(fd, &m, sizeof(m), false)) {
            return false; /* the initiator went away */
        }
        spin        = m.spin;
        Reply reply = {m.op, 1, -1};
        if (m.op == kDone) {
            return io_all(fd, &reply, sizeof(reply), true);
        }
        const KvShape shape = {m.count, m.size};
        const uint64_t span = std::min(kv_span(shape), region.size());
        if (m.op == kFillJunk) {
            region.fill(m.junk_seed, span);
        } else if (m.op == kFillData) {
            region.fill(m.data_seed, span);
        } else if (m.op == kIdle) {
            /* what it changes is `spin` (above) */
        } else if ((m.op == kCheckPut) && (kv_span(shape) <= region.size())) {
            region.load(span);
            reply.bad_offset = check_slots(region.host(), shape,
                                           kv_layout(shape, m.layout_seed), true,
                                           m.data_seed, m.junk_seed);
            reply.ok         = (reply.bad_offset < 0);
        } else {
            reply.ok = 0;
        }
        if (!io_all(fd, &reply, sizeof(reply), true)) {
            return false;
        }
    }
}

/* --- initiator --------------------------------------------------------------- */

/* One context's ep to the target's region. */
struct Path {
    std::unique_ptr<UcpBenchWorker> ucp;
    ucp_mem_h  memh   = nullptr;
    ucp_rkey_h rkey   = nullptr;
    uint64_t   remote = 0;
    /* [sgl][get]: UCP refused the mode's first post (nothing was moved),
     * or a transfer of the mode failed; the status */
    ucs_status_t refused[2][2] = {{UCS_OK, UCS_OK}, {UCS_OK, UCS_OK}};
    ucs_status_t failed[2][2]  = {{UCS_OK, UCS_OK}, {UCS_OK, UCS_OK}};
    /* an operation on this ep failed: a post refused since is a failure
     * too (UCP refuses posts on a failed ep), not the mode's refusal */
    bool         broken = false;

    void refuse(bool sgl, bool put, ucs_status_t status)
    {
        (broken ? failed : refused)[sgl][!put] = status;
    }
};

struct Initiator {
    const KvBenchPeerOptions &o;
    int         fd = -1;
    std::unique_ptr<BenchRegion> local;
    Path        path[kContexts];
    int         result = kBenchOk;

    explicit Initiator(const KvBenchPeerOptions &options) : o(options) {}

    Reply ask(uint32_t op, const KvShape &shape, uint64_t layout_seed,
              uint64_t data_seed, uint64_t junk_seed, unsigned spin = 0)
    {
        Message m = {op, spin, shape.count, shape.size, layout_seed, data_seed,
                     junk_seed};
        Reply r   = {0, 0, 0};
        if (!io_all(fd, &m, sizeof(m), true) || !io_all(fd, &r, sizeof(r), false) ||
            (r.op != op)) {
            bench_fail(kBenchSetup, "the target did not answer");
        }
        return r;
    }

    /* One transfer, one post per block; seconds, or -1 when UCP refused
     * the first post (p.refused; nothing was posted) or an operation
     * failed (p.failed). */
    double transfer(Path &p, bool put, const KvShape &shape,
                    const std::vector<KvBlock> &layout)
    {
        UcpBenchWorker &u = *p.ucp;
        const ucp_request_param_t param = u.param(local->gpu() ? UCS_MEMORY_TYPE_CUDA :
                                                                 UCS_MEMORY_TYPE_HOST);
        const auto start = std::chrono::steady_clock::now();
        for (const KvBlock &b : layout) {
            uint8_t *buf = local->data() + b.local;
            const ucs_status_ptr_t req =
                    put ? ucp_put_nbx(u.ep, buf, shape.size, p.remote + b.remote, p.rkey,
                                      &param) :
                          ucp_get_nbx(u.ep, buf, shape.size, p.remote + b.remote, p.rkey,
                                      &param);
            if (UCS_PTR_IS_ERR(req) && (&b == &layout[0]) && (u.outstanding == 0)) {
                p.refuse(false, put, UCS_PTR_STATUS(req));
                return -1;
            }
            u.track(req);
        }
        u.flush();
        return finish(p, false, put, start);
    }

    /* One transfer, the whole list in one SGL call; seconds, or -1 as
     * transfer(). Puts only: UCP has no SGL get (apps/ucp_sgl.h),
     * not_here() says so before. */
    double transfer_sgl(Path &p, bool put, const UcpSglList &list)
    {
#ifdef PXN_APPS_UCP_SGL
        UcpBenchWorker &u = *p.ucp;
        const auto start  = std::chrono::steady_clock::now();
        const ucs_status_ptr_t req =
                list.post(u.ep, put, u.param(local->gpu() ? UCS_MEMORY_TYPE_CUDA :
                                                            UCS_MEMORY_TYPE_HOST));
        if (UCS_PTR_IS_ERR(req)) {
            p.refuse(true, put, UCS_PTR_STATUS(req));
            return -1;
        }
        u.track(req);
        u.flush();
        return finish(p, true, put, start);
#else
        (void)p; (void)put; (void)list;
        return -1;
#endif
    }

    /* A transfer's seconds since `start`, or -1 when an operation failed:
     * the mode's failure is kept (every request has completed: the worker
     * starts clean for the next mode). */
    double finish(Path &p, bool sgl, bool put, std::chrono::steady_clock::time_point start)
    {
        const double seconds = std::chrono::duration<double>(
                std::chrono::steady_clock::now() - start).count();
        UcpBenchWorker &u = *p.ucp;
        if (u.failed == 0) {
            return seconds;
        }
        p.failed[sgl][!put] = u.first_failure;
        p.broken            = true;
        u.failed            = 0;
        u.first_failure     = UCS_OK;
        return -1;
    }

    /* Why `mode` cannot run `op` here, or "" when it can. */
    std::string not_here(const std::string &mode, bool put)
    {
        const bool sgl = is_sgl(mode);
#ifndef PXN_APPS_UCP_SGL
        if (sgl) {
            return "status=n/a reason=UCX < 1.22 (no UCP SGL datatype)";
        }
#endif
        if (sgl && !put) {
            return "status=n/a reason=UCP has no SGL get (ucp_get_nbx: contiguous "
                   "buffers only)";
        }
        const Path &p = path[context_of(mode)];
        if (p.failed[sgl][!put] != UCS_OK) {
            return std::string("status=failed reason=") +
                   ucs_status_string(p.failed[sgl][!put]);
        }
        return (p.refused[sgl][!put] == UCS_OK) ? "" :
               std::string("status=refused reason=") +
               ucs_status_string(p.refused[sgl][!put]) +
               " (UCP's error is in the initiator's log)";
    }

    /* One measurement; prints its line (built whole: UCX may log to the
     * same stdout meanwhile). */
    void measure(const KvShape &shape, const std::string &op, const std::string &mode,
                 unsigned rep, uint64_t layout_seed, const std::vector<KvBlock> &layout,
                 const UcpSglList &sgl)
    {
        const bool put      = (op == "put");
        const uint64_t span = kv_span(shape);
        Path &p             = path[context_of(mode)];
        p.failed[is_sgl(mode)][!put] = UCS_OK; /* each measurement tries again */
        char head[160];
        snprintf(head, sizeof(head), "kv op=%s shape=%s mode=%s rep=%u", op.c_str(),
                 kv_shape_name(shape).c_str(), mode.c_str(), rep);
        std::string why = not_here(mode, put);
        if (!why.empty()) {
            printf("%s %s\n", head, why.c_str());
            return;
        }
        const uint64_t data_seed = layout_seed * 31 + rep * 7 + (put ? 1 : 2) +
                                   context_of(mode) * 3 + (is_sgl(mode) ? 5 : 0);
        const uint64_t junk_seed = data_seed ^ 0x5a5a5a5aull;
        const unsigned spin      = (context_of(mode) == kInnerCtx) ? 1 + kInnerCtx : 0;
        if (put) {
            local->fill(data_seed, span);
            ask(kFillJunk, shape, layout_seed, data_seed, junk_seed, spin);
        } else {
            ask(kFillData, shape, layout_seed, data_seed, junk_seed, spin);
            local->zero(span);
        }
        auto one = [&]() {
            return is_sgl(mode) ? transfer_sgl(p, put, sgl) :
                                  transfer(p, put, shape, layout);
        };
        std::vector<double> times;
        double total = 0;
        for (unsigned w = 0; w < o.warmup; ++w) {
            if (one() < 0) {
                break; /* refused or failed: not_here() says so below */
            }
        }
        const auto begin = std::chrono::steady_clock::now();
        for (unsigned t = 0; not_here(mode, put).empty(); ++t) {
            const double since = std::chrono::duration<double>(
                    std::chrono::steady_clock::now() - begin).count();
            if ((o.iters > 0) ? (t >= o.iters) : ((t >= 3) && (since >= o.seconds))) {
                break;
            }
            const double s = one();
            if (s >= 0) {
                times.push_back(s);
                total += s;
            }
        }
        why = not_here(mode, put);
        if (!why.empty()) {
            ask(kIdle, shape, 0, 0, 0);
            printf("%s %s\n", head, why.c_str());
            if (why.compare(0, 13, "status=failed") == 0) {
                result = (result == kBenchOk) ? kBenchTransfer : result;
            }
            return;
        }
        int64_t bad;
        if (put) {
            bad = ask(kCheckPut, shape, layout_seed, data_seed, junk_seed).bad_offset;
        } else {
            ask(kIdle, shape, 0, 0, 0);
            local->load(span);
            bad = check_slots(local->host(), shape, layout, false, data_seed, 0);
        }
        std::sort(times.begin(), times.end());
        auto pct = [&](double q) { return times[size_t(q * double(times.size() - 1))]; };
        const double bytes = double(shape.count * shape.size);
        printf("%s transfers=%zu bytes=%.0f gbps=%.3f blocks_per_s=%.0f p50_us=%.1f "
               "p99_us=%.1f verified=%s", head, times.size(), bytes,
               bytes * double(times.size()) / total / 1e9,
               double(shape.count * times.size()) / total, pct(0.5) * 1e6,
               pct(0.99) * 1e6, (bad < 0) ? "ok" : "mismatch");
        if (bad >= 0) {
            printf(" first_bad_offset=%ld", bad);
            result = kBenchMismatch; /* before a failed transfer's status */
        }
        printf("\n");
    }
};

void print_ep(const char *name, ucp_ep_h ep)
{
    char *text   = nullptr;
    size_t len   = 0;
    FILE *stream = open_memstream(&text, &len);
    if (stream == nullptr) {
        return;
    }
    ucp_ep_print_info(ep, stream);
    fclose(stream);
    for (char *line = strtok(text, "\n"); line != nullptr; line = strtok(nullptr, "\n")) {
        printf("ep mode=%s: %s\n", name, line);
    }
    free(text);
}

} // namespace

bool parse_kv_shape(const std::string &text, KvShape *shape)
{
    const size_t x = text.find('x');
    char *end;
    if ((x == std::string::npos) || (x == 0)) {
        return false;
    }
    const uint64_t n = strtoull(text.c_str(), &end, 10);
    uint64_t size;
    if ((end != text.c_str() + x) || (n == 0) || !parse_size(text.substr(x + 1), &size) ||
        (size % 8 != 0)) {
        return false;
    }
    *shape = {n, size};
    return true;
}

std::string kv_shape_name(const KvShape &shape)
{
    return std::to_string(shape.count) + "x" + human(shape.size);
}

std::vector<KvBlock> kv_layout(const KvShape &shape, uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::vector<uint64_t> mine(2 * shape.count), theirs(2 * shape.count);
    std::iota(mine.begin(), mine.end(), 0);
    std::iota(theirs.begin(), theirs.end(), 0);
    std::shuffle(mine.begin(), mine.end(), rng);
    std::shuffle(theirs.begin(), theirs.end(), rng);
    std::vector<KvBlock> layout(shape.count);
    for (uint64_t b = 0; b < shape.count; ++b) {
        layout[b] = {mine[b] * shape.size, theirs[b] * shape.size};
    }
    return layout;
}

uint64_t kv_span(const KvShape &shape)
{
    return 2 * shape.count * shape.size;
}

std::vector<KvShape> kv_default_shapes()
{
    return {{1, 64 << 10}, {1, 1 << 20}, {32, 1 << 20}, {512, 64 << 10},
            {744, 45 << 10}, {4096, 8 << 10}};
}

bool kv_known_mode(const std::string &mode)
{
    return (mode == "inner") || (mode == "inner-sgl") || (mode == "pxn") ||
           (mode == "pxn-sgl");
}

int kv_bench_target(const KvBenchPeerOptions &o)
{
    alarm(o.deadline);
    const int fd = oob_socket(true, o.port);
    Hello hello;
    if (!io_all(fd, &hello, sizeof(hello), false) || (hello.region == 0)) {
        bench_fail(kBenchSetup, "no region size from the initiator");
    }
    BenchRegion region(o.gpu, o.device, hello.region);
    std::unique_ptr<UcpBenchWorker> ucp[kContexts];
    for (unsigned c = 0; c < kContexts; ++c) {
        if (hello.contexts & (1u << c)) {
            ucp[c].reset(new UcpBenchWorker((c == kInnerCtx) ? inner_tls(o).c_str() :
                                                               nullptr));
            ucp[c]->offer(fd, region, ucp[c]->map(region));
        }
    }
    bench_target_end(serve(fd, ucp, region));
}

int kv_bench_initiator(const KvBenchPeerOptions &o)
{
    alarm(o.deadline);
    Initiator in(o);
    Hello hello = {0, 0, 0};
    for (const KvShape &s : o.shapes) {
        hello.region = std::max<uint64_t>(hello.region, (kv_span(s) + 4095) & ~4095ull);
    }
    for (const std::string &m : o.modes) {
        hello.contexts |= 1u << context_of(m);
    }
    in.fd = oob_socket(false, o.port);
    if (!io_all(in.fd, &hello, sizeof(hello), true)) {
        bench_fail(kBenchSetup, "socket send failed");
    }
    in.local.reset(new BenchRegion(o.gpu, o.device, hello.region));
    for (unsigned c = 0; c < kContexts; ++c) {
        if (!(hello.contexts & (1u << c))) {
            continue;
        }
        Path &p = in.path[c];
        p.ucp.reset(new UcpBenchWorker((c == kInnerCtx) ? inner_tls(o).c_str() : nullptr));
        p.memh = p.ucp->map(*in.local);
        p.rkey = p.ucp->accept(in.fd, &p.remote);
        print_ep((c == kInnerCtx) ? "inner" : "pxn", p.ucp->ep);
    }
    if (hello.contexts & (1u << kInnerCtx)) {
        printf("inner context: UCX_TLS=%s\n", inner_tls(o).c_str());
    }
    fflush(stdout);

    for (size_t si = 0; si < o.shapes.size(); ++si) {
        const KvShape &shape       = o.shapes[si];
        const uint64_t layout_seed = o.seed * 1000003 + si;
        const std::vector<KvBlock> layout = kv_layout(shape, layout_seed);
        UcpSglList sgl[kContexts];
        for (unsigned c = 0; c < kContexts; ++c) {
            const Path &p = in.path[c];
            for (const KvBlock &b : layout) {
                if (p.ucp) {
                    sgl[c].add(in.local->data() + b.local, shape.size, p.memh,
                               p.remote + b.remote, p.rkey);
                }
            }
        }
        for (const std::string &op : o.ops) {
            for (unsigned rep = 0; rep < o.reps; ++rep) {
                for (const std::string &mode : o.modes) {
                    in.measure(shape, op, mode, rep, layout_seed, layout,
                               sgl[context_of(mode)]);
                    fflush(stdout);
                }
            }
        }
    }
    in.ask(kDone, KvShape(), 0, 0, 0);
    for (Path &p : in.path) {
        if (p.ucp) {
            ucp_rkey_destroy(p.rkey);
            p.ucp->close_ep();
            p.ucp->unmap(p.memh);
        }
    }
    close(in.fd);
    return in.result;
}

} // namespace pxn_tools
