#include "contention_peer.h"

#include "bench_oob.h"
#include "bench_region.h"
#include "bench_units.h"
#include "ucp_bench_worker.h"
#include <apps/pattern.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <poll.h>
#include <unistd.h>

namespace pxn_tools {

namespace {

enum Path : uint32_t { kPxn = 0, kRail = 1, kPaths = 2 };
const char *const kPathName[kPaths] = {"pxn", "rail"};
const char *const kRailTls          = "tcp";
constexpr uint64_t kFeatures        = UCP_FEATURE_RMA | UCP_FEATURE_TAG;
constexpr ucp_tag_t kPing = 1, kPong = 2;

enum Cmd : uint32_t { kCheck = 1, kDone = 2 };

struct Request {
    uint32_t cmd, path;
    uint64_t seed, length;
};

struct Reply {
    int64_t mismatch; /* -1: every byte matched */
};

uint64_t region_size(const ContentionPeerOptions &o)
{
    return std::max<uint64_t>(o.size * o.window, o.big);
}

Path path_of(const std::string &name)
{
    return (name == "rail") ? kRail : kPxn;
}

/* Both paths of a process: a context and worker each, over a region each. */
struct Side {
    std::unique_ptr<UcpBenchWorker> ucp[kPaths];
    std::unique_ptr<BenchRegion>    region[kPaths];
    ucp_mem_h                       memh[kPaths] = {};

    explicit Side(const ContentionPeerOptions &o)
    {
        for (uint32_t p = 0; p < kPaths; ++p) {
            ucp[p].reset(new UcpBenchWorker((p == kRail) ? kRailTls : nullptr, kFeatures));
            region[p].reset(new BenchRegion(false, 0, region_size(o)));
            memh[p] = ucp[p]->map(*region[p]);
        }
    }
    ~Side()
    {
        for (uint32_t p = 0; p < kPaths; ++p) {
            ucp[p]->close_ep();
            ucp[p]->unmap(memh[p]);
        }
    }
};

void send_address(int fd, UcpBenchWorker &u)
{
    ucp_address_t *addr;
    size_t len;
    bench_check(ucp_worker_get_address(u.worker, &addr, &len), "ucp_worker_get_address");
    send_blob(fd, addr, len);
    ucp_worker_release_address(u.worker, addr);
}

void connect_back(int fd, UcpBenchWorker &u)
{
    const std::vector<uint8_t> address = recv_blob(fd);
    ucp_ep_params_t p = {};
    p.field_mask      = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    p.address         = reinterpret_cast<const ucp_address_t*>(address.data());
    bench_check(ucp_ep_create(u.worker, &p, &u.ep), "ucp_ep_create");
}

/* The initiator's half of a ping-pong: the pong's receive posted, then
 * the ping sent, both waited for. */
void ping(UcpBenchWorker &u, uint8_t *out, uint8_t *in, uint64_t len)
{
    ucp_request_param_t r = u.param();
    r.cb.recv             = [](void *req, ucs_status_t status,
                               const ucp_tag_recv_info_t*, void *user) {
        UcpBenchWorker::on_done(req, status, user);
    };
    u.track(ucp_tag_recv_nbx(u.worker, in, len, kPong, ~ucp_tag_t(0), &r));
    ucp_request_param_t s = u.param();
    u.track(ucp_tag_send_nbx(u.ep, out, len, kPing, &s));
    u.drain();
}

/* The target's half, driven from its polling loop: a receive of a ping is
 * always posted; once it arrived, the same bytes go back as the pong and
 * the next receive is posted. */
class Echo {
public:
    Echo(UcpBenchWorker &u, uint8_t *buf, uint64_t len) : u_(u), buf_(buf), len_(len)
    {
        post();
    }

    void progress()
    {
        if (!arrived_) {
            return;
        }
        arrived_ = false;
        ucp_request_param_t s = u_.param();
        u_.track(ucp_tag_send_nbx(u_.ep, buf_, len_, kPong, &s));
        u_.drain();
        post();
    }

private:
    void post()
    {
        ucp_request_param_t r = {};
        r.op_attr_mask        = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        r.user_data           = this;
        r.cb.recv             = [](void *req, ucs_status_t status,
                                   const ucp_tag_recv_info_t*, void *user) {
            Echo *self = static_cast<Echo*>(user);
            self->u_.note(status);
            self->arrived_ = true;
            ucp_request_free(req);
        };
        ucs_status_ptr_t req = ucp_tag_recv_nbx(u_.worker, buf_, len_, kPing,
                                                ~ucp_tag_t(0), &r);
        if (!UCS_PTR_IS_PTR(req)) {
            u_.note(UCS_PTR_STATUS(req));
            arrived_ = (UCS_PTR_STATUS(req) == UCS_OK);
        }
    }

    UcpBenchWorker &u_;
    uint8_t        *buf_;
    uint64_t        len_;
    bool            arrived_ = false;
};

/* A check request: answers where the region first differs from the
 * pattern of req.seed over [0, req.length), or -1. */
void serve(int fd, Side &side, const Request &req)
{
    Reply reply = {side.region[req.path % kPaths]->mismatch(req.seed, req.length)};
    if (!io_all(fd, &reply, sizeof(reply), true)) {
        bench_target_end(false);
    }
}

bool readable(int fd)
{
    pollfd pfd = {fd, POLLIN, 0};
    return poll(&pfd, 1, 0) > 0;
}

class Initiator {
public:
    Initiator(const ContentionPeerOptions &o, int fd) : o_(o), fd_(fd), side_(o)
    {
        for (uint32_t p = 0; p < kPaths; ++p) {
            rkey_[p] = side_.ucp[p]->accept(fd_, &remote_[p]);
            send_address(fd_, *side_.ucp[p]);
        }
        echo_.reset(new BenchRegion(false, 0, o.big));
    }
    ~Initiator()
    {
        for (uint32_t p = 0; p < kPaths; ++p) {
            ucp_rkey_destroy(rkey_[p]);
        }
    }

    int run()
    {
        for (const std::string &op : o_.ops) {
            ++seed_;
            for (const std::string &path : o_.paths) {
                measure(op, path_of(path));
            }
        }
        Request done = {kDone, 0, 0, 0};
        io_all(fd_, &done, sizeof(done), true);
        return (mismatches_ != 0) ? kBenchMismatch : (failed_ != 0) ? kBenchTransfer :
                                                                      kBenchOk;
    }

private:
    using Clock = std::chrono::steady_clock;

    int64_t ask(uint32_t cmd, Path p, uint64_t seed, uint64_t length)
    {
        Request req = {cmd, p, seed, length};
        Reply reply;
        if (!io_all(fd_, &req, sizeof(req), true) ||
            !io_all(fd_, &reply, sizeof(reply), false)) {
            bench_fail(kBenchSetup, "the target went away");
        }
        return reply.mismatch;
    }

    void rma(Path p, bool put, uint64_t offset, uint64_t len)
    {
        UcpBenchWorker &u    = *side_.ucp[p];
        ucp_request_param_t r = u.param();
        void *local           = side_.region[p]->data() + offset;
        const uint64_t remote = remote_[p] + offset;
        u.track(put ? ucp_put_nbx(u.ep, local, len, remote, rkey_[p], &r) :
                      ucp_get_nbx(u.ep, local, len, remote, rkey_[p], &r));
    }

    /* One repetition of `op`; true when its bytes are right so far. */
    bool once(const std::string &op, Path p)
    {
        UcpBenchWorker &u = *side_.ucp[p];
        BenchRegion &mine = *side_.region[p];
        if ((op == "put") || (op == "put-big")) {
            rma(p, true, 0, (op == "put") ? o_.size : o_.big);
            u.flush();
        } else if (op == "window") {
            for (unsigned b = 0; b < o_.window; ++b) {
                rma(p, true, b * o_.size, o_.size);
            }
            u.flush();
        } else if ((op == "get") || (op == "get-big")) {
            rma(p, false, 0, (op == "get") ? o_.size : o_.big);
            u.drain();
        } else { /* pingpong */
            ping(u, mine.data(), echo_->data(), o_.big);
        }
        return u.failed == 0;
    }

    uint64_t bytes(const std::string &op) const
    {
        return (op == "window") ? o_.size * o_.window :
               ((op == "put") || (op == "get")) ? o_.size : o_.big;
    }

    void measure(const std::string &op, Path p)
    {
        UcpBenchWorker &u  = *side_.ucp[p];
        BenchRegion &mine  = *side_.region[p];
        const bool is_get  = (op == "get") || (op == "get-big");
        const uint64_t len = bytes(op);
        if (is_get) {
            /* the target's region holds the pattern of this op's seed */
            mine.fill(seed_, len);
            rma(p, true, 0, len);
            u.flush();
        } else {
            mine.fill(seed_, len);
        }
        std::vector<double> us;
        bool ok = true;
        for (unsigned i = 0; (i < o_.iters) && (u.failed == 0); ++i) {
            if (is_get) {
                mine.zero(len);
            }
            const Clock::time_point t0 = Clock::now();
            once(op, p);
            us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0)
                                 .count());
            ok = ok && (!is_get || (mine.mismatch(seed_, len) < 0));
        }
        if (op == "pingpong") {
            ok = ok && (first_mismatch(echo_->data(), len, seed_) == len);
        } else if (!is_get) {
            ok = ok && (ask(kCheck, p, seed_, len) < 0);
        }
        if (u.failed != 0) {
            ++failed_;
            printf("lat op=%s path=%s status=failed reason=%s\n", op.c_str(),
                   kPathName[p], ucs_status_string(u.first_failure));
            u.failed = 0;
            fflush(stdout);
            return;
        }
        mismatches_ += ok ? 0 : 1;
        std::sort(us.begin(), us.end());
        auto at = [&](double q) { return us[std::min(us.size() - 1, size_t(q * us.size()))]; };
        printf("lat op=%s path=%s bytes=%lu n=%zu p50_us=%.1f p90_us=%.1f p99_us=%.1f "
               "max_us=%.1f verified=%s\n", op.c_str(), kPathName[p], len, us.size(),
               at(0.5), at(0.9), at(0.99), us.back(), ok ? "ok" : "mismatch");
        fflush(stdout);
    }

    const ContentionPeerOptions &o_;
    int                          fd_;
    Side                         side_;
    std::unique_ptr<BenchRegion> echo_;
    ucp_rkey_h                   rkey_[kPaths]   = {};
    uint64_t                     remote_[kPaths] = {};
    uint64_t                     seed_           = 0x5EED;
    unsigned                     mismatches_ = 0, failed_ = 0;
};

} // namespace

const std::vector<std::string> &contention_ops()
{
    static const std::vector<std::string> ops = ContentionPeerOptions().ops;
    return ops;
}

int contention_target(const ContentionPeerOptions &o)
{
    alarm(o.deadline);
    Side side(o);
    const int fd = oob_socket(true, o.port);
    for (uint32_t p = 0; p < kPaths; ++p) {
        side.ucp[p]->offer(fd, *side.region[p], side.memh[p]);
        connect_back(fd, *side.ucp[p]);
    }
    std::unique_ptr<Echo> echo[kPaths];
    for (uint32_t p = 0; p < kPaths; ++p) {
        echo[p].reset(new Echo(*side.ucp[p], side.region[p]->data(), o.big));
    }
    /* Busy-polls, as a UCP program waiting for its peer does: the rail
     * path's emulated puts and gets need it; pxn's need nothing of it. */
    for (unsigned round = 0;; ++round) {
        for (uint32_t p = 0; p < kPaths; ++p) {
            ucp_worker_progress(side.ucp[p]->worker);
            echo[p]->progress();
        }
        if (((round % 64) != 0) || !readable(fd)) {
            continue;
        }
        Request req;
        if (!io_all(fd, &req, sizeof(req), false)) {
            bench_target_end(false);
        }
        if (req.cmd == kDone) {
            bench_target_end(true);
        }
        serve(fd, side, req);
    }
}

int contention_initiator(const ContentionPeerOptions &o)
{
    alarm(o.deadline);
    const int fd = oob_socket(false, o.port);
    Initiator initiator(o, fd);
    const int code = initiator.run();
    close(fd);
    return code;
}

} // namespace pxn_tools
