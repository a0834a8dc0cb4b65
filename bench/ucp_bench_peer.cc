#include "ucp_bench_peer.h"

#include <apps/pattern.h>
#include <bench/bench_units.h>

#ifdef PXN_HAVE_CUDA
#include <uct/pxn/pxn_cuda.h>
#endif

#include <ucp/api/ucp.h>

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <netinet/in.h>
#include <poll.h>
#include <random>
#include <sys/socket.h>
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

[[noreturn]] void fail(int code, const std::string &what)
{
    fprintf(stderr, "ucx_pxn_ucp_bench: %s\n", what.c_str());
    exit(code);
}

void check(ucs_status_t status, const char *what)
{
    if (status != UCS_OK) {
        fail(kBenchSetup, std::string(what) + ": " + ucs_status_string(status));
    }
}

/* --- the region: host or GPU memory, checked through host memory --------- */

class Region {
public:
    Region(bool gpu, int device, uint64_t size) : gpu_(gpu), size_(size)
    {
        host_ = static_cast<uint8_t*>(aligned_alloc(4096, (size + 4095) & ~4095ull));
        if (host_ == nullptr) {
            fail(kBenchSetup, "no memory for the region");
        }
        if (!gpu) {
            data_ = host_;
            return;
        }
#ifdef PXN_HAVE_CUDA
        cu_ = pxn::uct::CudaDriver::get();
        CUdeviceptr ptr;
        if ((cu_ == nullptr) || (cu_->use_device(device) != UCS_OK) ||
            (cu_->cuMemAlloc(&ptr, size) != CUDA_SUCCESS)) {
            fail(kBenchSetup, "no usable GPU " + std::to_string(device));
        }
        data_ = reinterpret_cast<uint8_t*>(ptr);
#else
        (void)device;
        fail(kBenchSetup, "--gpu: this build has no CUDA backend");
#endif
    }

    uint8_t *data() const { return data_; }
    uint64_t size() const { return size_; }
    bool     gpu() const { return gpu_; }

    void fill(uint64_t seed, uint64_t len)
    {
        pxn_tools::fill_pattern(host_, len, seed);
        to_device(len);
    }

    void zero(uint64_t len)
    {
        memset(host_, 0, len);
        to_device(len);
    }

    int64_t mismatch(uint64_t seed, uint64_t len)
    {
#ifdef PXN_HAVE_CUDA
        if (gpu_ && (cu_->cuMemcpy(reinterpret_cast<CUdeviceptr>(host_),
                                   reinterpret_cast<CUdeviceptr>(data_), len) !=
                     CUDA_SUCCESS)) {
            fail(kBenchSetup, "cuMemcpy from the region failed");
        }
#endif
        const uint64_t at = pxn_tools::first_mismatch(host_, len, seed);
        return (at == len) ? -1 : int64_t(at);
    }

private:
    void to_device(uint64_t len)
    {
#ifdef PXN_HAVE_CUDA
        if (gpu_ && (cu_->cuMemcpy(reinterpret_cast<CUdeviceptr>(data_),
                                   reinterpret_cast<CUdeviceptr>(host_), len) !=
                     CUDA_SUCCESS)) {
            fail(kBenchSetup, "cuMemcpy to the region failed");
        }
#else
        (void)len;
#endif
    }

    bool     gpu_;
    uint64_t size_;
    uint8_t *host_ = nullptr; /* the region itself, or its host copy */
    uint8_t *data_ = nullptr;
#ifdef PXN_HAVE_CUDA
    const pxn::uct::CudaDriver *cu_ = nullptr;
#endif
};

/* --- the socket ------------------------------------------------------------ */

bool io_all(int fd, void *buf, size_t len, bool out)
{
    for (char *p = static_cast<char*>(buf); len > 0;) {
        const ssize_t n = out ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
        if (n <= 0) {
            if ((n < 0) && (errno == EINTR)) {
                continue;
            }
            return false;
        }
        p   += n;
        len -= size_t(n);
    }
    return true;
}

void send_blob(int fd, const void *data, size_t len)
{
    uint32_t n = uint32_t(len);
    if (!io_all(fd, &n, sizeof(n), true) ||
        !io_all(fd, const_cast<void*>(data), n, true)) {
        fail(kBenchSetup, "socket send failed");
    }
}

std::vector<uint8_t> recv_blob(int fd)
{
    uint32_t n = 0;
    std::vector<uint8_t> data;
    if (io_all(fd, &n, sizeof(n), false) && (n <= (1u << 20))) {
        data.resize(n);
        if (io_all(fd, data.data(), n, false)) {
            return data;
        }
    }
    fail(kBenchSetup, "socket receive failed (peer gone?)");
}

/* The target listens on 127.0.0.1:port and accepts one connection; the
 * initiator connects, retrying while the target does not listen yet. */
int oob_socket(bool target, int port)
{
    sockaddr_in sa     = {};
    sa.sin_family      = AF_INET;
    sa.sin_port        = htons(uint16_t(port));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (; !target; usleep(20000)) {
        const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) {
            return fd;
        }
        close(fd);
    }
    const int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if ((bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) ||
        (listen(lfd, 1) != 0)) {
        fail(kBenchSetup, "listen on port " + std::to_string(port) + ": " +
                          strerror(errno));
    }
    printf("ucx_pxn_ucp_bench: target listening on port %d\n", port);
    fflush(stdout);
    int fd;
    while (((fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC)) < 0) &&
           (errno == EINTR)) {
    }
    close(lfd);
    if (fd < 0) {
        fail(kBenchSetup, std::string("accept: ") + strerror(errno));
    }
    return fd;
}

/* --- UCP --------------------------------------------------------------------- */

struct Ucp {
    ucp_context_h context = nullptr;
    ucp_worker_h  worker  = nullptr;
    ucp_ep_h      ep      = nullptr;
    size_t        outstanding = 0, failed = 0;
    ucs_status_t  first_failure = UCS_OK;

    Ucp()
    {
        ucp_params_t params = {};
        params.field_mask   = UCP_PARAM_FIELD_FEATURES;
        params.features     = UCP_FEATURE_RMA;
        ucp_config_t *config;
        check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
        check(ucp_init(&params, config, &context), "ucp_init");
        ucp_config_release(config);
        ucp_worker_params_t wp = {};
        wp.field_mask          = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
        wp.thread_mode         = UCS_THREAD_MODE_SINGLE;
        check(ucp_worker_create(context, &wp, &worker), "ucp_worker_create");
    }

    ucp_mem_h map(const Region &r)
    {
        ucp_mem_map_params_t p = {};
        p.field_mask  = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                        UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                        UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
        p.address     = r.data();
        p.length      = r.size();
        p.memory_type = r.gpu() ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
        ucp_mem_h memh;
        check(ucp_mem_map(context, &p, &memh), "ucp_mem_map");
        return memh;
    }

    void note(ucs_status_t status)
    {
        if (status != UCS_OK) {
            first_failure = (failed++ == 0) ? status : first_failure;
        }
    }

    void track(ucs_status_ptr_t r)
    {
        UCS_PTR_IS_PTR(r) ? void(++outstanding) : note(UCS_PTR_STATUS(r));
    }

    static void on_done(void *request, ucs_status_t status, void *user_data)
    {
        Ucp *self = static_cast<Ucp*>(user_data);
        --self->outstanding;
        self->note(status);
        ucp_request_free(request);
    }

    void drain()
    {
        while (outstanding > 0) {
            ucp_worker_progress(worker);
        }
    }
};

/* --- target ---------------------------------------------------------------- */

bool serve(int fd, Ucp &ucp, Region &region)
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
    Ucp        ucp;
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
            fail(kBenchSetup, "the target did not answer");
        }
        return r;
    }

    /* Every block, at most o.window outstanding, then a flush; seconds. */
    double transfer(bool put, Region &local, const std::vector<UcpBenchBlock> &list)
    {
        ucp_request_param_t p = {};
        p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                         UCP_OP_ATTR_FIELD_MEMORY_TYPE;
        p.cb.send      = Ucp::on_done;
        p.user_data    = &ucp;
        p.memory_type  = local.gpu() ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
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
        ucp_request_param_t f = {};
        f.op_attr_mask        = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        f.cb.send             = Ucp::on_done;
        f.user_data           = &ucp;
        ucp.track(ucp_ep_flush_nbx(ucp.ep, &f));
        ucp.drain();
        if (ucp.failed > 0) {
            fail(kBenchTransfer, std::string(put ? "put" : "get") + " failed: " +
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
        fail(kBenchSetup, "no region size from the initiator");
    }
    Region region(o.gpu, o.device, size);
    Ucp ucp;
    ucp_mem_h memh = ucp.map(region);
    ucp_address_t *addr;
    size_t addr_len;
    check(ucp_worker_get_address(ucp.worker, &addr, &addr_len),
          "ucp_worker_get_address");
    send_blob(fd, addr, addr_len);
    ucp_worker_release_address(ucp.worker, addr);
    void *rkey;
    size_t rkey_len;
    check(ucp_rkey_pack(ucp.context, memh, &rkey, &rkey_len), "ucp_rkey_pack");
    const uint64_t base = reinterpret_cast<uintptr_t>(region.data());
    send_blob(fd, &base, sizeof(base));
    send_blob(fd, rkey, rkey_len);
    ucp_rkey_buffer_release(rkey);
    const bool ok = serve(fd, ucp, region);
    printf("ucx_pxn_ucp_bench: target %s\n", ok ? "done" : "lost its initiator");
    fflush(stdout);
    _exit(ok ? kBenchOk : kBenchTransfer); /* no teardown under a gone peer */
}

int ucp_bench_initiator(const UcpBenchPeerOptions &o)
{
    alarm(o.deadline);
    Initiator in(o);
    in.fd = oob_socket(false, o.port);
    if (!io_all(in.fd, const_cast<uint64_t*>(&o.region), sizeof(o.region), true)) {
        fail(kBenchSetup, "socket send failed");
    }
    Region local(o.gpu, o.device, o.region);
    ucp_mem_h memh = in.ucp.map(local);
    {
        const std::vector<uint8_t> address = recv_blob(in.fd);
        ucp_ep_params_t p = {};
        p.field_mask      = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
        p.address         = reinterpret_cast<const ucp_address_t*>(address.data());
        check(ucp_ep_create(in.ucp.worker, &p, &in.ucp.ep), "ucp_ep_create");
    }
    memcpy(&in.remote, recv_blob(in.fd).data(), sizeof(in.remote));
    check(ucp_ep_rkey_unpack(in.ucp.ep, recv_blob(in.fd).data(), &in.rkey),
          "ucp_ep_rkey_unpack");

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
    ucp_request_param_t p = {};
    ucs_status_ptr_t r    = ucp_ep_close_nbx(in.ucp.ep, &p);
    while (UCS_PTR_IS_PTR(r) && (ucp_request_check_status(r) == UCS_INPROGRESS)) {
        ucp_worker_progress(in.ucp.worker);
    }
    if (UCS_PTR_IS_PTR(r)) {
        ucp_request_free(r);
    }
    close(in.fd);
    ucp_mem_unmap(in.ucp.context, memh);
    ucp_worker_destroy(in.ucp.worker);
    ucp_cleanup(in.ucp.context);
    return result;
}

} // namespace pxn_tools
