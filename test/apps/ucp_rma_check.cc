/*
 * ucp_rma_check: one-sided UCP transfers checked byte by byte, driven the way
 * NIXL's UCX backend drives UCP: context with RMA | AM, one worker, worker
 * addresses and {address, packed rkey} exchanged over a TCP socket, eps in
 * UCP_ERR_HANDLING_MODE_PEER with an error handler, many nbx operations in
 * flight, ep flush, then an active-message notification. Put phase, --rounds
 * times: scattered blocks (log-uniform sizes in [--min-block, --max-block],
 * 4..512 KiB, random order, covering the region once; at most --window
 * outstanding, 0: no limit; --sgl N: N blocks per ucp_put_nbx of UCP's SGL
 * datatype, UCX 1.22 on), flush, AM VERIFY: the target checks every byte
 * and the canaries around its region and answers over the socket. Get phase,
 * --rounds times: AM FILL (the target writes another pattern), scattered
 * gets into a zeroed buffer with canaries, flush, every byte checked.
 * Exit status: 0 all verified; 1 mismatch; 2 setup error; 3 a transfer
 * failed (request error or ep error handler; target: the initiator went
 * away); 4 --deadline (default 60 s) passed. One summary line per side.
 * --notify N (initiator): after the put and get phases, N NIXL-style
 * notifications, one at a time: a put of --notify-block bytes, an ep flush,
 * then the AM NOTIFY carrying the CLOCK_MONOTONIC times of the put's post
 * and of the flush's completion; the target's AM handler takes its own time
 * when it runs (one host: the emulated rails share the clock) and prints
 * the medians and 90th percentiles of notify_us (flush done -> handler)
 * and write_notify_us (put posted -> handler) in its summary line.
 * --busy (target): progress without pause, as NIXL's progress thread does
 * (by default the target waits up to 1 ms for its socket when progress
 * found nothing to do); --notify's figures need it.
 * --nixl: the UCP configuration NIXL's UCX backend sets (RNDV_THRESH=inf,
 * MAX_RMA_RAILS=2, RC_FENCE=none, MAX_HCA_PER_GPU=auto from 1.21, ...),
 * each where the environment does not set it, as NIXL does.
 */
#include "pattern.h"
#include "ucp_sgl.h"
#include "vfs_dump.h"

#include <ucp/api/ucp.h>

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <random>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace {

enum Exit { kOk = 0, kMismatch = 1, kSetup = 2, kTransfer = 3, kDeadline = 4 };
const char *const kResult[] = {"ok", "mismatch", "setup-error", "transfer-failed"};
enum Op : uint32_t { kVerify = 1, kFill = 2, kDone = 3, kNotify = 4 };

uint64_t monotonic_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

/* "p50=<us> p90=<us>" of samples in ns. */
std::string percentiles(std::vector<uint64_t> ns)
{
    if (ns.empty()) {
        return "p50=- p90=-";
    }
    std::sort(ns.begin(), ns.end());
    char text[64];
    snprintf(text, sizeof(text), "p50=%.1f p90=%.1f", ns[ns.size() / 2] / 1e3,
             ns[std::min(ns.size() - 1, ns.size() * 9 / 10)] / 1e3);
    return text;
}

constexpr unsigned kAmId       = 7;
constexpr size_t   kCanary     = 4096;
constexpr uint64_t kCanarySeed = 0xCA11AB1Eull;

struct Options {
    bool        target = false, get = true, vfs = false, busy = false;
    std::string host;
    int         port      = 13400;
    size_t      region    = 64ul << 20;
    unsigned    rounds    = 1;
    uint64_t    seed      = 1;
    unsigned    deadline  = 60;
    size_t      min_block = 4096, max_block = 512 * 1024;
    size_t      window    = 0;
    size_t      sgl       = 0; /* blocks per SGL operation (0: one nbx each) */
    unsigned    notify    = 0; /* NOTIFY rounds after the phases */
    size_t      notify_block = 4096;
};

/* Initiator -> target: the AM header. Target -> initiator: over the socket,
 * bad_offset from the region start (the canaries lie outside it). */
struct AmMsg {
    uint32_t op, round;
    uint64_t seed;
    uint64_t posted_ns, flushed_ns; /* NOTIFY: CLOCK_MONOTONIC */
};
/* What the target's handler got, and when. */
struct Arrival { AmMsg msg; uint64_t at_ns; };
struct Reply { uint32_t op, ok; int64_t bad_offset; };

const char *g_role = "?";
bool        g_nixl = false;

/* NIXL's UCX backend (src/plugins/ucx/ucx_utils.cpp, nixl::ucx::config):
 * a variable the environment sets is left alone, a failure is ignored (the
 * variable may not exist in this UCX). RC_GDA_NUM_CHANNELS (1.21 on) is
 * left out: it matters to GPU-initiated transfers only. */
void apply_nixl_config(ucp_config_t *config)
{
    unsigned major, minor, release;
    ucp_get_version(&major, &minor, &release);
    std::vector<std::pair<std::string, std::string>> vars = {
            {"RNDV_THRESH", "inf"}, {"MAX_RMA_RAILS", "2"},
            {"IB_PCI_RELAXED_ORDERING", "try"}, {"RC_FENCE", "none"}};
    if (UCP_VERSION(major, minor) >= UCP_VERSION(1, 21)) {
        vars.emplace_back("MAX_HCA_PER_GPU", "auto");
    }
    if (UCP_VERSION(major, minor) >= UCP_VERSION(1, 22)) {
        vars.emplace_back("RNDV_PIPELINE_ERROR_HANDLING", "y");
    }
    std::string applied;
    for (const auto &v : vars) {
        if ((getenv(("UCX_" + v.first).c_str()) == nullptr) &&
            (ucp_config_modify(config, v.first.c_str(), v.second.c_str()) == UCS_OK)) {
            applied += " " + v.first + "=" + v.second;
        }
    }
    printf("ucp_rma_check: %s nixl config:%s\n", g_role, applied.c_str());
}

void on_alarm(int)
{
    char msg[128];
    (void)!write(2, msg, snprintf(msg, sizeof(msg), "ucp_rma_check: %s result=deadline"
                                  " (a wait did not end in time)\n", g_role));
    _exit(kDeadline);
}

[[noreturn]] void fail_setup(const std::string &what)
{
    fprintf(stderr, "ucp_rma_check: %s result=setup-error: %s\n", g_role,
            what.c_str());
    exit(kSetup);
}

void check(ucs_status_t status, const char *what)
{
    if (status != UCS_OK) {
        fail_setup(std::string(what) + ": " + ucs_status_string(status));
    }
}

using pxn_tools::fill_pattern;
using pxn_tools::first_mismatch;

/* A page-aligned region with kCanary bytes of fixed patterns on each side. */
struct Guarded {
    std::vector<uint8_t> storage;
    uint8_t *data = nullptr;
    size_t   len  = 0;

    explicit Guarded(size_t n)
    {
        storage.assign(n + 2 * kCanary + 4096, 0);
        const uintptr_t base = reinterpret_cast<uintptr_t>(storage.data());
        data = reinterpret_cast<uint8_t*>((base + kCanary + 4095) & ~uintptr_t(4095));
        len  = n;
        fill_pattern(data - kCanary, kCanary, kCanarySeed);
        fill_pattern(data + len, kCanary, kCanarySeed + 1);
    }

    /* kOk, or kMismatch with *offset of the first bad byte (< 0: before). */
    int verify(uint64_t seed, int64_t *offset) const
    {
        const size_t before = first_mismatch(data - kCanary, kCanary, kCanarySeed);
        const size_t after  = first_mismatch(data + len, kCanary, kCanarySeed + 1);
        const size_t inside = first_mismatch(data, len, seed);
        *offset = (before != kCanary) ? int64_t(before) - int64_t(kCanary) :
                  (inside != len)     ? int64_t(inside) : int64_t(len + after);
        return ((before == kCanary) && (inside == len) && (after == kCanary)) ?
               kOk : kMismatch;
    }
};

/* --- out-of-band socket (every wait is bounded by the alarm) ------------- */
bool io_all(int fd, void *buf, size_t len, bool out)
{
    for (char *p = static_cast<char*>(buf); len > 0;) {
        const ssize_t n = out ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
        if ((n <= 0) && ((n == 0) || (errno != EINTR))) {
            return false;
        }
        p   += std::max<ssize_t>(n, 0);
        len -= size_t(std::max<ssize_t>(n, 0));
    }
    return true;
}

void send_blob(int fd, const void *data, size_t len)
{
    uint32_t n = uint32_t(len);
    if (!io_all(fd, &n, sizeof(n), true) || !io_all(fd, const_cast<void*>(data), n, true)) {
        fail_setup("socket send failed");
    }
}

std::vector<uint8_t> recv_blob(int fd, size_t expect = 0)
{
    uint32_t n = 0;
    std::vector<uint8_t> data;
    if (io_all(fd, &n, sizeof(n), false) && (n <= (1u << 20)) &&
        ((expect == 0) || (n == expect)) &&
        (data.resize(n), io_all(fd, data.data(), n, false))) {
        return data;
    }
    fail_setup("socket receive failed (peer gone or bad message)");
}

/* The target accepts one connection on 0.0.0.0:port; the initiator
 * connects, retrying while the target does not listen yet. */
int oob_socket(const Options &o)
{
    sockaddr_in sa = {};
    sa.sin_family  = AF_INET;
    sa.sin_port    = htons(uint16_t(o.port));
    if (!o.target && (inet_pton(AF_INET, o.host.c_str(), &sa.sin_addr) != 1)) {
        fail_setup("not an IPv4 address: " + o.host);
    }
    for (; !o.target; usleep(50000)) {
        const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (connect(fd, (sockaddr*)&sa, sizeof(sa)) == 0) {
            return fd;
        }
        close(fd);
    }
    const int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if ((bind(lfd, (sockaddr*)&sa, sizeof(sa)) != 0) || (listen(lfd, 1) != 0)) {
        fail_setup("listen on port " + std::to_string(o.port) + ": " + strerror(errno));
    }
    printf("ucp_rma_check: target listening on port %d\n", o.port);
    fflush(stdout);
    int fd;
    while (((fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC)) < 0) && (errno == EINTR)) {
    }
    if (fd < 0) {
        fail_setup(std::string("accept: ") + strerror(errno));
    }
    close(lfd);
    return fd;
}

/* --- UCP: context, worker, one ep, request accounting -------------------- */
struct Ucp {
    ucp_context_h context = nullptr;
    ucp_worker_h  worker  = nullptr;
    ucp_ep_h      ep      = nullptr;
    unsigned      err_handler_calls = 0;
    size_t        outstanding = 0, failed_requests = 0;
    ucs_status_t  ep_status = UCS_OK, first_failure = UCS_OK;
    std::deque<Arrival> inbox;

    Ucp()
    {
        ucp_params_t params = {};
        params.field_mask   = UCP_PARAM_FIELD_FEATURES;
        params.features     = UCP_FEATURE_RMA | UCP_FEATURE_AM;
        ucp_config_t *config;
        check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
        if (g_nixl) {
            apply_nixl_config(config);
        }
        check(ucp_init(&params, config, &context), "ucp_init");
        ucp_config_release(config);
        ucp_worker_params_t wp = {};
        wp.field_mask          = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
        wp.thread_mode         = UCS_THREAD_MODE_SINGLE;
        check(ucp_worker_create(context, &wp, &worker), "ucp_worker_create");
    }

    /* Both sides send their worker address (small: the socket buffers it),
     * then read the peer's and create the ep to it. */
    void connect(int fd)
    {
        ucp_address_t *addr;
        size_t len;
        check(ucp_worker_get_address(worker, &addr, &len), "ucp_worker_get_address");
        send_blob(fd, addr, len);
        const std::vector<uint8_t> remote = recv_blob(fd);
        ucp_worker_release_address(worker, addr);
        ucp_ep_params_t p = {};
        p.field_mask      = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                            UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                            UCP_EP_PARAM_FIELD_ERR_HANDLER;
        p.address         = reinterpret_cast<const ucp_address_t*>(remote.data());
        p.err_mode        = UCP_ERR_HANDLING_MODE_PEER;
        p.err_handler.cb  = on_error;
        p.err_handler.arg = this;
        check(ucp_ep_create(worker, &p, &ep), "ucp_ep_create");
    }

    ucp_mem_h map(void *addr, size_t len)
    {
        ucp_mem_map_params_t p = {};
        p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
        p.address    = addr;
        p.length     = len;
        ucp_mem_h memh;
        check(ucp_mem_map(context, &p, &memh), "ucp_mem_map");
        return memh;
    }

    ucp_request_param_t param()
    {
        ucp_request_param_t p = {};
        p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        p.cb.send      = on_done;
        p.user_data    = this;
        return p;
    }

    /* Accounts for what an nbx call returned. */
    void track(ucs_status_ptr_t r)
    {
        UCS_PTR_IS_PTR(r) ? void(++outstanding) : note(UCS_PTR_STATUS(r));
    }

    void drain() /* bounded by the alarm */
    {
        while (outstanding > 0) {
            ucp_worker_progress(worker);
        }
    }

    bool failed() const { return (failed_requests > 0) || (err_handler_calls > 0); }

    void note(ucs_status_t status)
    {
        first_failure    = (failed_requests == 0) ? status : first_failure;
        failed_requests += (status != UCS_OK);
    }

    static void on_done(void *request, ucs_status_t status, void *user_data)
    {
        Ucp *self = static_cast<Ucp*>(user_data);
        --self->outstanding;
        self->note(status);
        ucp_request_free(request);
    }

    static void on_error(void *arg, ucp_ep_h, ucs_status_t status)
    {
        Ucp *self = static_cast<Ucp*>(arg);
        ++self->err_handler_calls;
        self->ep_status = status;
        fprintf(stderr, "ucp_rma_check: %s: ep error handler: %s\n", g_role,
                ucs_status_string(status));
    }

    static ucs_status_t on_am(void *arg, const void *header, size_t header_length,
                              void *, size_t, const ucp_am_recv_param_t *)
    {
        if (header_length == sizeof(AmMsg)) {
            AmMsg msg;
            memcpy(&msg, header, sizeof(msg));
            static_cast<Ucp*>(arg)->inbox.push_back({msg, monotonic_ns()});
        }
        return UCS_OK;
    }
};

/* --- target ------------------------------------------------------------- */
int run_target(const Options &o)
{
    const int fd = oob_socket(o);
    Ucp ucp;
    ucp_am_handler_param_t am = {};
    am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG;
    am.id  = kAmId;
    am.cb  = Ucp::on_am;
    am.arg = &ucp;
    check(ucp_worker_set_am_recv_handler(ucp.worker, &am), "am handler");
    ucp.connect(fd);

    Guarded buf(*reinterpret_cast<const size_t*>(recv_blob(fd, sizeof(size_t)).data()));
    ucp_mem_h memh = ucp.map(buf.data, buf.len);
    void *rkey;
    size_t rkey_len;
    check(ucp_rkey_pack(ucp.context, memh, &rkey, &rkey_len), "ucp_rkey_pack");
    const uint64_t addr = reinterpret_cast<uintptr_t>(buf.data);
    send_blob(fd, &addr, sizeof(addr));
    send_blob(fd, rkey, rkey_len);
    ucp_rkey_buffer_release(rkey);

    int result = -1;
    unsigned verified = 0, mismatches = 0;
    std::vector<uint64_t> notify_ns, write_notify_ns;
    while (result < 0) {
        if (ucp_worker_progress(ucp.worker) == 0) {
            /* The initiator writes nothing more: readable means it is gone. */
            pollfd pfd = {fd, POLLIN, 0};
            char c;
            if ((poll(&pfd, 1, o.busy ? 0 : 1) > 0) &&
                (recv(fd, &c, 1, MSG_DONTWAIT) <= 0)) {
                fprintf(stderr, "ucp_rma_check: target: the initiator went away\n");
                result = kTransfer;
            }
        }
        while (!ucp.inbox.empty() && (result < 0)) {
            const AmMsg msg  = ucp.inbox.front().msg;
            const uint64_t at = ucp.inbox.front().at_ns;
            ucp.inbox.pop_front();
            Reply reply = {msg.op, 1, 0};
            if (msg.op == kVerify) {
                reply.ok = (buf.verify(msg.seed, &reply.bad_offset) == kOk);
                ++verified;
                mismatches += !reply.ok;
            } else if (msg.op == kFill) {
                fill_pattern(buf.data, buf.len, msg.seed);
            } else if (msg.op == kNotify) {
                notify_ns.push_back(at - msg.flushed_ns);
                write_notify_ns.push_back(at - msg.posted_ns);
            } else if (msg.op == kDone) {
                result   = (mismatches > 0) ? kMismatch : kOk;
                reply.ok = (mismatches == 0);
            }
            if (!io_all(fd, &reply, sizeof(reply), true)) {
                result = kTransfer;
            }
        }
    }
    result = (mismatches > 0) ? kMismatch :
             ((result == kOk) && (ucp.err_handler_calls > 0)) ? kTransfer : result;
    printf("ucp_rma_check: target result=%s verified=%u mismatches=%u "
           "err_handler_calls=%u", kResult[result], verified, mismatches,
           ucp.err_handler_calls);
    if (!notify_ns.empty()) {
        printf(" notifications=%zu notify_us %s write_notify_us %s", notify_ns.size(),
               percentiles(notify_ns).c_str(), percentiles(write_notify_ns).c_str());
    }
    printf("\n");
    fflush(stdout);
    /* No UCP teardown: the initiator may be gone and its ep with it. */
    _exit(result);
}

/* --- initiator ---------------------------------------------------------- */
struct Block { size_t offset, length; };

/* Random sizes (log-uniform) covering [0, region) once, in random order. */
std::vector<Block> make_blocks(const Options &o, std::mt19937_64 &rng)
{
    std::vector<Block> blocks;
    std::uniform_real_distribution<double> log_size(std::log(double(o.min_block)),
                                                    std::log(double(o.max_block)));
    for (size_t off = 0; off < o.region; off += blocks.back().length) {
        const size_t len = std::max(size_t(std::exp(log_size(rng))), o.min_block);
        blocks.push_back({off, std::min(len, o.region - off)});
    }
    std::shuffle(blocks.begin(), blocks.end(), rng);
    return blocks;
}

struct Initiator {
    Ucp        ucp;
    int        fd     = -1;
    ucp_rkey_h rkey   = nullptr;
    uint64_t   remote = 0;
    size_t     blocks = 0, bytes = 0;
    double     seconds = 0;

    /* Puts or gets every block, then flushes the ep. false: a failure. */
    bool transfer(bool put, uint8_t *local, const std::vector<Block> &list,
                  size_t window, size_t sgl, ucp_mem_h memh)
    {
        if (sgl > 0) {
            return transfer_sgl(put, local, list, sgl, memh);
        }
        const auto start = std::chrono::steady_clock::now();
        for (const Block &b : list) {
            while ((window > 0) && (ucp.outstanding >= window) && !ucp.failed()) {
                ucp_worker_progress(ucp.worker);
            }
            if (ucp.failed()) {
                break;
            }
            ucp_request_param_t p = ucp.param();
            ucp.track(put ? ucp_put_nbx(ucp.ep, local + b.offset, b.length,
                                        remote + b.offset, rkey, &p) :
                            ucp_get_nbx(ucp.ep, local + b.offset, b.length,
                                        remote + b.offset, rkey, &p));
            ++blocks;
            bytes += b.length;
            ucp_worker_progress(ucp.worker);
        }
        return finish(start);
    }

    /* The end of a transfer: what was posted completes, then the ep is
     * flushed; the time since `start` counts. */
    bool finish(std::chrono::steady_clock::time_point start)
    {
        ucp.drain();
        if (!ucp.failed()) {
            ucp_request_param_t p = ucp.param();
            ucp.track(ucp_ep_flush_nbx(ucp.ep, &p));
            ucp.drain();
        }
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                 start).count();
        return !ucp.failed();
    }

    /* transfer() in SGL operations of `per` blocks each (UCP's SGL
     * datatype, UCX 1.22 on: one ucp_put_nbx / ucp_get_nbx per list, as
     * NIXL's UCX backend sends a descriptor list with
     * NIXL_UCX_SGL_ENABLE=y). */
    bool transfer_sgl(bool put, uint8_t *local, const std::vector<Block> &list,
                      size_t per, ucp_mem_h memh)
    {
#ifdef PXN_APPS_UCP_SGL
        const auto start = std::chrono::steady_clock::now();
        std::vector<pxn_tools::UcpSglList> calls((list.size() + per - 1) / per);
        for (size_t i = 0, k = 0; (i < list.size()) && !ucp.failed(); i += per, ++k) {
            pxn_tools::UcpSglList &c = calls[k];
            for (size_t j = i; j < std::min(list.size(), i + per); ++j) {
                c.add(local + list[j].offset, list[j].length, memh,
                      remote + list[j].offset, rkey);
                bytes += list[j].length;
            }
            ucp.track(c.post(ucp.ep, put, ucp.param()));
            blocks += c.size();
            ucp_worker_progress(ucp.worker);
        }
        return finish(start);
#else
        (void)put; (void)local; (void)list; (void)per; (void)memh;
        fprintf(stderr, "ucp_rma_check: --sgl needs UCX 1.22 or newer\n");
        return false;
#endif
    }

    /* AM to the target, then its answer over the socket. */
    bool notify(const AmMsg &msg, Reply *reply)
    {
        ucp_request_param_t p = ucp.param();
        ucp.track(ucp_am_send_nbx(ucp.ep, kAmId, &msg, sizeof(msg), nullptr, 0, &p));
        ucp.drain();
        for (pollfd pfd = {fd, POLLIN, 0}; !ucp.failed(); ucp_worker_progress(ucp.worker)) {
            if (poll(&pfd, 1, 0) > 0) {
                return io_all(fd, reply, sizeof(*reply), false) && (reply->op == msg.op);
            }
        }
        return false;
    }
};

int run_initiator(const Options &o)
{
    Initiator in;
    in.fd = oob_socket(o);
    in.ucp.connect(in.fd);
    send_blob(in.fd, &o.region, sizeof(o.region));
    memcpy(&in.remote, recv_blob(in.fd, sizeof(in.remote)).data(), sizeof(in.remote));
    check(ucp_ep_rkey_unpack(in.ucp.ep, recv_blob(in.fd).data(), &in.rkey),
          "ucp_ep_rkey_unpack");

    Guarded local(o.region);
    ucp_mem_h memh = in.ucp.map(local.data, local.len);
    std::mt19937_64 rng(o.seed);
    int result        = kOk;
    int64_t bad_at    = 0;
    const char *phase = "put";
    Reply reply;
    for (unsigned round = 0; (round < o.rounds) && (result == kOk); ++round) {
        const uint64_t seed = o.seed * 1000003 + round;
        fill_pattern(local.data, local.len, seed);
        if (!in.transfer(true, local.data, make_blocks(o, rng), o.window, o.sgl,
                         memh) ||
            !in.notify({kVerify, round, seed}, &reply)) {
            result = kTransfer;
        } else if (!reply.ok) {
            result = kMismatch;
            bad_at = reply.bad_offset;
        }
    }
    for (unsigned round = 0; o.get && (round < o.rounds) && (result == kOk); ++round) {
        const uint64_t seed = o.seed * 1000003 + 500000 + round;
        phase = "get";
        memset(local.data, 0, local.len);
        if (!in.notify({kFill, round, seed}, &reply) ||
            !in.transfer(false, local.data, make_blocks(o, rng), o.window,
                         o.sgl, memh)) {
            result = kTransfer;
        } else {
            result = local.verify(seed, &bad_at);
        }
    }
    for (unsigned round = 0; (round < o.notify) && (result == kOk); ++round) {
        phase = "notify";
        const size_t length = std::min(o.notify_block, local.len);
        AmMsg msg = {kNotify, round, 0, monotonic_ns(), 0};
        if (!in.transfer(true, local.data, {{0, length}}, 0, 0, memh)) {
            result = kTransfer;
            break;
        }
        msg.flushed_ns = monotonic_ns();
        if (!in.notify(msg, &reply)) {
            result = kTransfer;
        }
    }
    if ((result == kOk) && !in.notify({kDone, 0, 0, 0, 0}, &reply)) {
        result = kTransfer;
    }

    printf("ucp_rma_check: initiator result=%s blocks=%zu bytes=%zu seconds=%.3f "
           "GBps=%.2f err_handler_calls=%u failed_requests=%zu", kResult[result],
           in.blocks, in.bytes, in.seconds,
           (in.seconds > 0) ? in.bytes / in.seconds / 1e9 : 0.0,
           in.ucp.err_handler_calls, in.ucp.failed_requests);
    const std::string detail = (result == kMismatch) ?
            " first_bad_offset=" + std::to_string(bad_at) :
            std::string(" error=\"") + ucs_status_string((in.ucp.ep_status != UCS_OK) ?
                                        in.ucp.ep_status : in.ucp.first_failure) + "\"";
    printf("%s%s%s\n", (result == kOk) ? "" : " phase=", (result == kOk) ? "" : phase,
           (result == kOk) ? "" : detail.c_str());
    fflush(stdout);
    if (o.vfs) { /* pxn's counters as ucx_vfs would show them */
        print_vfs_files("/pxn/", stdout);
    }
    /* Teardown, still under the alarm: a hang here is reported too. */
    ucp_rkey_destroy(in.rkey);
    ucp_request_param_t p = {};
    p.op_attr_mask        = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags               = (result == kTransfer) ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t r    = ucp_ep_close_nbx(in.ucp.ep, &p);
    while (UCS_PTR_IS_PTR(r) && (ucp_request_check_status(r) == UCS_INPROGRESS)) {
        ucp_worker_progress(in.ucp.worker);
    }
    UCS_PTR_IS_PTR(r) ? ucp_request_free(r) : void();
    close(in.fd);
    ucp_mem_unmap(in.ucp.context, memh);
    ucp_worker_destroy(in.ucp.worker);
    ucp_cleanup(in.ucp.context);
    return result;
}

} // namespace

int main(int argc, char **argv)
{
    static const option longopts[] = {
        {"target", no_argument, nullptr, 't'},
        {"initiator", required_argument, nullptr, 'i'},
        {"port", required_argument, nullptr, 'p'},
        {"region", required_argument, nullptr, 'r'},
        {"rounds", required_argument, nullptr, 'n'},
        {"seed", required_argument, nullptr, 's'},
        {"no-get", no_argument, nullptr, 'G'},
        {"deadline", required_argument, nullptr, 'd'},
        {"min-block", required_argument, nullptr, 'b'},
        {"max-block", required_argument, nullptr, 'B'},
        {"window", required_argument, nullptr, 'w'},
        {"sgl", required_argument, nullptr, 'S'},
        {"vfs", no_argument, nullptr, 'V'},
        {"nixl", no_argument, nullptr, 'N'},
        {"notify", required_argument, nullptr, 'y'},
        {"notify-block", required_argument, nullptr, 'Y'},
        {"busy", no_argument, nullptr, 'u'},
        {nullptr, 0, nullptr, 0}};
    Options o;
    bool    usage = false;
    for (int c; (c = getopt_long(argc, argv, "ti:p:r:n:s:Gd:b:B:w:S:VNy:Y:u", longopts,
                                 nullptr)) != -1;) {
        const size_t num = optarg ? strtoull(optarg, nullptr, 0) : 0;
        switch (c) {
        case 't': o.target = true; break;
        case 'i': o.host = optarg; break;
        case 'p': o.port = int(num); break;
        case 'r': o.region = num; break;
        case 'n': o.rounds = unsigned(num); break;
        case 's': o.seed = num; break;
        case 'G': o.get = false; break;
        case 'd': o.deadline = unsigned(num); break;
        case 'b': o.min_block = num; break;
        case 'B': o.max_block = num; break;
        case 'w': o.window = num; break;
        case 'S': o.sgl = num; break;
        case 'V': o.vfs = true; break;
        case 'N': g_nixl = true; break;
        case 'y': o.notify = unsigned(num); break;
        case 'Y': o.notify_block = num; break;
        case 'u': o.busy = true; break;
        default: usage = true; break;
        }
    }
    if (usage || (o.target == !o.host.empty()) || (o.region == 0) ||
        (o.deadline == 0) || (o.min_block == 0) || (o.min_block > o.max_block) ||
        (o.notify_block == 0) ||
        (optind != argc)) {
        fprintf(stderr,
                "usage: ucp_rma_check --target [-p PORT] [--deadline S] [--nixl] [--busy]\n"
                "       ucp_rma_check --initiator HOST [-p PORT] [--region BYTES]\n"
                "           [--rounds N] [--seed N] [--no-get] [--min-block B]\n"
                "           [--max-block B] [--window N] [--deadline S] [--vfs]\n"
                "           [--nixl] [--sgl N] [--notify N] [--notify-block B]\n"
                "exit: 0 verified, 1 mismatch, 2 setup error, 3 transfer failed,\n"
                "      4 deadline passed (default 60 s)\n");
        return kSetup;
    }
    g_role = o.target ? "target" : "initiator";
    setvbuf(stdout, nullptr, _IOLBF, 0); /* UCX logs there: keep it if the alarm hits */
    signal(SIGALRM, on_alarm);
    alarm(o.deadline);
    return o.target ? run_target(o) : run_initiator(o);
}
