/*
 * ucx_pxn_op_cost: what one operation costs a pxn sender's CPU, counted in
 * instructions by callgrind (stable run to run, unlike time on a shared
 * machine), beside the same operations timed natively.
 *
 *   ucx_pxn_op_cost [--ops N] [--big-ops N] [--single N] [--sgls N] [--eps N]
 *                   [--valgrind PATH] [--no-valgrind] [--keep DIR]
 *                   [--profile N] [--env UCX_PXN_X=v]...
 *
 * --eps N: N more endpoints to the same target, idle (an application with
 * many peers); --profile N: the N costliest functions of each row;
 * --sgls N: the SGL rows' operations (built against a UCX with
 * uct_ep_put_sgl_zcopy, 1.22 on, and uct_ep_get_sgl_zcopy, master): N
 * SGLs of 64 blocks of 8 KiB each, the blocks a block apart, counted per
 * block.
 *
 * Three processes on this host, no network namespaces, inner transport cma
 * (rails told apart by UCX_PXN_RAIL_MAP, nodes by UCX_PXN_GROUP):
 *   sender  node 0 rail 0 (this program, under callgrind, then natively)
 *   relay   node 0 rail 1 (this program, idle: its engine thread relays)
 *   target  node 1 rail 1 (this program, idle: cma needs nothing of it)
 * Only the UCT API is used, so the same file builds against older trees
 * of the project (docs/benchmarks.md says how).
 *
 * What is counted: the sender's own thread, inside the UCT calls of the
 * measured operations (uct_ep_put_short, uct_ep_put_zcopy,
 * uct_ep_get_zcopy, uct_ep_flush, and the uct_worker_progress calls that
 * reap them), and nothing else: the waits for the relay happen outside
 * the counted regions, reading the relay's counters from the registry (so
 * progress is called once the pieces are done, and a call that finds
 * nothing shows in the "idle calls" column). The sender process's own
 * engine thread (it relays for others) is not counted.
 *
 * Patterns:
 *   stream  N operations back to back, then one flush: pieces fill up
 *           (many operations share a slot), the cost per operation is
 *           what a busy sender pays;
 *   single  each operation alone (post, flush, its completion): one piece
 *           per operation, what a sender pays when the relay is idle.
 * Every measured pattern runs once uncounted first (pools, keys, lanes warm).
 */
#include "callgrind_dump.h"
#include "op_cost_uct.h"

#include <ucs/pxn/abi.h>
#include <uct/api/uct.h>
#ifdef PXN_UCX_EP_PUT_SGL_ZCOPY
#include <uct/api/v2/uct_v2.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <signal.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace pxn_bench;

namespace {

/* Waits until the parent closes our stdin (relay and target roles). */
void idle_until_eof(const std::string &line)
{
    printf("%s\n", line.c_str());
    fflush(stdout);
    char c;
    while (read(0, &c, 1) > 0) {
    }
}

/* --- the sender ------------------------------------------------------------ */

enum class OpKind { kShort, kPutZcopy, kGetZcopy, kPutSgl, kGetSgl };

struct Phase {
    const char *name;
    OpKind      kind;
    size_t      size;
    bool        single;
    unsigned    ops;
    unsigned    blocks = 1; /* an SGL's elements: the row counts per block */
};

struct Result {
    unsigned ops = 0;
    uint64_t ns  = 0;          /* inside the counted regions */
    uint64_t pieces = 0;       /* published by the sender */
    unsigned idle_calls = 0;   /* progress calls that found nothing */
    unsigned retries = 0;      /* operations answered UCS_ERR_NO_RESOURCE */
};

class Sender {
public:
    /* `extra_eps` more eps to the same target, idle: what an application
     * with many peers has. */
    Sender(Uct &u, const std::vector<std::string> &target, const std::string &group,
           pid_t relay_pid, unsigned extra_eps) : u_(u)
    {
        const auto dev = unhex(target[0]), iface = unhex(target[1]);
        remote_ = std::stoull(target[2]);
        auto packed = unhex(target[3]);
        check(uct_rkey_unpack(u.component, packed.data(), &rkey_), "uct_rkey_unpack");
        uct_ep_params_t params = {};
        params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                            UCT_EP_PARAM_FIELD_IFACE_ADDR;
        params.iface      = u.iface;
        params.dev_addr   = reinterpret_cast<const uct_device_addr_t*>(dev.data());
        params.iface_addr = reinterpret_cast<const uct_iface_addr_t*>(iface.data());
        for (unsigned i = 0; i < extra_eps; ++i) {
            uct_ep_h idle;
            check(uct_ep_create(&params, &idle), "uct_ep_create");
            idle_eps_.push_back(idle);
        }
        check(uct_ep_create(&params, &ep_), "uct_ep_create");
        ucs_status_t status;
        while (((status = uct_ep_flush(ep_, 0, nullptr)) == UCS_ERR_NO_RESOURCE) ||
               (status == UCS_INPROGRESS)) {
            uct_worker_progress(u.worker);
        }
        check(status, "connecting the ep");
        std::string unused;
        buffer_ = u.alloc(kBuffer, &memh_, &unused);
        relay_.map(group, relay_pid);
        self_.map(group, getpid());
    }

    /* Counted unless `warm` (a first run: pools, keys, slots). */
    Result run(const Phase &p, bool warm = false)
    {
        counting_ = !warm;
        Result r;
        if (p.single) {
            for (unsigned i = 0; i < p.ops; ++i) {
                batch(p, i, 1, &r);
            }
        } else {
            batch(p, 0, p.ops, &r);
        }
        return r;
    }

    /* Progress calls with nothing to do. */
    Result idle(unsigned calls)
    {
        counting_ = true;
        Result r;
        r.ops = calls;
        on();
        const auto t0 = clock();
        for (unsigned i = 0; i < calls; ++i) {
            r.idle_calls += (uct_worker_progress(u_.worker) == 0);
        }
        r.ns += clock() - t0;
        off();
        return r;
    }

    static constexpr size_t kBuffer = 64ul << 20;

private:
    /* Not under callgrind: its instructions are no operation's. */
    static uint64_t clock()
    {
        if (RUNNING_ON_VALGRIND) {
            return 0;
        }
        return std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::steady_clock::now().time_since_epoch()).count();
    }
    void on()
    {
        if (counting_ && !collecting_) {
            CALLGRIND_TOGGLE_COLLECT;
            collecting_ = true;
        }
    }
    void off()
    {
        if (collecting_) {
            CALLGRIND_TOGGLE_COLLECT;
            collecting_ = false;
        }
    }

    struct Op {
        uct_completion_t comp;
        unsigned        *done;
    };
    static void op_done(uct_completion_t *comp)
    {
        ++*reinterpret_cast<Op*>(comp)->done;
    }

    ucs_status_t post(const Phase &p, unsigned i, Op *op)
    {
        const size_t offset = (size_t(i) * p.size) % (kBuffer / 2);
        uint8_t *local      = buffer_ + offset;
        switch (p.kind) {
        case OpKind::kShort:
            return uct_ep_put_short(ep_, local, unsigned(p.size), remote_ + offset,
                                    rkey_.rkey);
        case OpKind::kPutZcopy:
        case OpKind::kGetZcopy: {
            uct_iov_t iov = {local, p.size, memh_, 0, 1};
            return (p.kind == OpKind::kPutZcopy) ?
                   uct_ep_put_zcopy(ep_, &iov, 1, remote_ + offset, rkey_.rkey,
                                    &op->comp) :
                   uct_ep_get_zcopy(ep_, &iov, 1, remote_ + offset, rkey_.rkey,
                                    &op->comp);
        }
        case OpKind::kPutSgl:
        case OpKind::kGetSgl:
            return post_sgl(p, i, op);
        }
        return UCS_ERR_INVALID_PARAM;
    }

    /* The elements of the SGLs [first, first + count): blocks a block
     * apart (a plan each, as KV-cache blocks are), made before counting
     * (the application's part). */
    void prepare_sgl(const Phase &p, unsigned first, unsigned count)
    {
        const size_t n = size_t(count) * p.blocks;
        sgl_first_ = first;
        sgl_buffers_.resize(n);
        sgl_lengths_.assign(n, p.size);
        sgl_memhs_.assign(n, memh_);
        sgl_remote_.resize(n);
        sgl_rkeys_.assign(n, rkey_.rkey);
        for (size_t k = 0; k < n; ++k) {
            const size_t offset = ((first * size_t(p.blocks) + k) * 2 * p.size) %
                                  (kBuffer / 2);
            sgl_buffers_[k] = buffer_ + offset;
            sgl_remote_[k]  = remote_ + offset;
        }
    }

    ucs_status_t post_sgl(const Phase &p, unsigned i, Op *op)
    {
        const size_t k = size_t(i - sgl_first_) * p.blocks;
#ifdef PXN_UCX_EP_PUT_SGL_ZCOPY
        if (p.kind == OpKind::kPutSgl) {
            return uct_ep_put_sgl_zcopy(ep_, &sgl_buffers_[k], &sgl_lengths_[k],
                                        &sgl_memhs_[k], &sgl_remote_[k],
                                        &sgl_rkeys_[k], nullptr, nullptr,
                                        p.blocks, &op->comp);
        }
#endif
#ifdef PXN_UCX_EP_GET_SGL_ZCOPY
        if (p.kind == OpKind::kGetSgl) {
            return uct_ep_get_sgl_zcopy(ep_, &sgl_buffers_[k], &sgl_lengths_[k],
                                        &sgl_memhs_[k], &sgl_remote_[k],
                                        &sgl_rkeys_[k], nullptr, nullptr,
                                        p.blocks, &op->comp);
        }
#endif
        (void)k; (void)op;
        return UCS_ERR_UNSUPPORTED;
    }

    /* Operations [first, first + count) of phase p, then a flush; counted
     * except for the wait for the relay. */
    void batch(const Phase &p, unsigned first, unsigned count, Result *r)
    {
        ops_.resize(count);
        if ((p.kind == OpKind::kPutSgl) || (p.kind == OpKind::kGetSgl)) {
            prepare_sgl(p, first, count);
        }
        unsigned done = 0, expected = 0;
        const uint64_t sent0 = self_.sent(), relayed0 = relay_.relay_done();
        on();
        uint64_t t0 = clock();
        for (unsigned i = 0; i < count; ++i) {
            ops_[i].comp = {op_done, 1, UCS_OK};
            ops_[i].done = &done;
            ucs_status_t status;
            while ((status = post(p, first + i, &ops_[i])) == UCS_ERR_NO_RESOURCE) {
                ++r->retries;
                r->idle_calls += (uct_worker_progress(u_.worker) == 0);
            }
            if (UCS_STATUS_IS_ERR(status)) {
                die(std::string(p.name) + ": " + ucs_status_string(status));
            }
            expected += (status == UCS_INPROGRESS);
        }
        Op flush;
        unsigned flushed = 0;
        flush.comp = {op_done, 1, UCS_OK};
        flush.done = &flushed;
        ucs_status_t status;
        while ((status = uct_ep_flush(ep_, 0, &flush.comp)) == UCS_ERR_NO_RESOURCE) {
            ++r->retries;
            r->idle_calls += (uct_worker_progress(u_.worker) == 0);
        }
        if (UCS_STATUS_IS_ERR(status)) {
            die(std::string(p.name) + ": flush: " + ucs_status_string(status));
        }
        r->ns += clock() - t0;
        off();

        /* Not counted: the relay forwards what was published. */
        const uint64_t pieces = self_.sent() - sent0;
        r->pieces += pieces;
        while (relay_.relay_done() - relayed0 < pieces) {
            std::this_thread::yield();
        }
        /* A relay counts a piece just before it writes its completion. */
        std::this_thread::sleep_for(std::chrono::microseconds(50));

        on();
        t0 = clock();
        while ((done < expected) || ((status == UCS_INPROGRESS) && (flushed == 0))) {
            r->idle_calls += (uct_worker_progress(u_.worker) == 0);
        }
        r->ns += clock() - t0;
        off();
        r->ops += count * p.blocks;
    }

    Uct               &u_;
    uct_ep_h           ep_ = nullptr;
    std::vector<uct_ep_h> idle_eps_;
    uct_rkey_bundle_t  rkey_{};
    uint64_t           remote_ = 0;
    uint8_t           *buffer_ = nullptr;
    uct_mem_h          memh_ = nullptr;
    Counters           relay_, self_;
    std::vector<Op>    ops_;
    unsigned           sgl_first_ = 0;
    std::vector<void*>     sgl_buffers_;
    std::vector<size_t>    sgl_lengths_;
    std::vector<uct_mem_h> sgl_memhs_;
    std::vector<uint64_t>  sgl_remote_;
    std::vector<uct_rkey_t> sgl_rkeys_;
    bool               collecting_ = false;
    bool               counting_   = true;
};

struct Options {
    unsigned ops = 2000, big_ops = 32, single = 200, extra_eps = 0;
    unsigned sgls = 32; /* SGLs of 64 blocks of 8 KiB (UCX >= 1.22) */
    std::string valgrind = "valgrind";
    bool use_valgrind = true;
    std::string keep;
    unsigned profile = 0;
    std::vector<std::string> env;
};

std::vector<Phase> phases(const Options &o)
{
    return {
        {"put_short 8 B", OpKind::kShort, 8, false, o.ops},
        {"put_zcopy 4 KiB", OpKind::kPutZcopy, 4096, false, o.ops},
        {"get_zcopy 4 KiB", OpKind::kGetZcopy, 4096, false, o.ops},
        {"put_zcopy 1 MiB", OpKind::kPutZcopy, 1 << 20, false, o.big_ops},
        {"get_zcopy 1 MiB", OpKind::kGetZcopy, 1 << 20, false, o.big_ops},
        {"put_short 8 B", OpKind::kShort, 8, true, o.single},
        {"put_zcopy 4 KiB", OpKind::kPutZcopy, 4096, true, o.single},
        {"get_zcopy 4 KiB", OpKind::kGetZcopy, 4096, true, o.single},
        {"put_zcopy 1 MiB", OpKind::kPutZcopy, 1 << 20, true, o.big_ops},
        {"get_zcopy 1 MiB", OpKind::kGetZcopy, 1 << 20, true, o.big_ops},
#ifdef PXN_UCX_EP_PUT_SGL_ZCOPY
        {"put_sgl 64x8 KiB", OpKind::kPutSgl, 8192, false, o.sgls, 64},
#endif
#ifdef PXN_UCX_EP_GET_SGL_ZCOPY
        {"get_sgl 64x8 KiB", OpKind::kGetSgl, 8192, false, o.sgls, 64},
#endif
    };
}

int run_sender(const Options &o, const std::vector<std::string> &target,
               const std::string &group, pid_t relay_pid)
{
    Uct u;
    u.open("pxn_cma", "pxn", "memory");
    Sender s(u, target, group, relay_pid, o.extra_eps);
    const std::vector<Phase> list = phases(o);
    for (size_t i = 0; i < list.size(); ++i) {
        s.run(list[i], true);
        const Result r = s.run(list[i]);
        CALLGRIND_DUMP_STATS_AT(("phase" + std::to_string(i)).c_str());
        printf("phase %zu %u %lu %lu %u %u\n", i, r.ops, r.ns, r.pieces,
               r.idle_calls, r.retries);
    }
    const Result r = s.idle(1000);
    CALLGRIND_DUMP_STATS_AT("idle");
    printf("idle %u %lu\n", r.ops, r.ns);
    fflush(stdout);
    return 0;
}

/* --- the driver ------------------------------------------------------------ */

struct Child {
    pid_t pid = -1;
    FILE *out = nullptr; /* its stdout */
    int   in  = -1;      /* its stdin: closing it ends relay and target */
};

Child spawn(const std::vector<std::string> &argv, const std::vector<std::string> &env)
{
    int to[2], from[2];
    if ((pipe(to) != 0) || (pipe(from) != 0)) {
        die("pipe failed");
    }
    Child c;
    c.pid = fork();
    if (c.pid == 0) {
        dup2(to[0], 0);
        dup2(from[1], 1);
        close(to[0]); close(to[1]); close(from[0]); close(from[1]);
        for (const auto &e : env) {
            putenv(strdup(e.c_str()));
        }
        std::vector<char*> args;
        for (const auto &a : argv) {
            args.push_back(strdup(a.c_str()));
        }
        args.push_back(nullptr);
        execvp(args[0], args.data());
        fprintf(stderr, "ucx_pxn_op_cost: cannot run %s: %s\n", args[0],
                strerror(errno));
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    c.in  = to[1];
    c.out = fdopen(from[0], "r");
    return c;
}

std::string read_line(Child &c)
{
    char line[8192];
    if (fgets(line, sizeof(line), c.out) == nullptr) {
        return "";
    }
    std::string s(line);
    while (!s.empty() && (s.back() == '\n')) {
        s.pop_back();
    }
    return s;
}

int finish(Child &c)
{
    if (c.in >= 0) {
        close(c.in);
    }
    int status = 0;
    waitpid(c.pid, &status, 0);
    if (c.out != nullptr) {
        fclose(c.out);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::vector<std::string> node_env(int node, int rail, const std::string &tag,
                                  const Options &o)
{
    std::vector<std::string> env = {
        "UCX_PXN_ENABLE=y", "UCX_PXN_NET_TLS=cma",
        "UCX_PXN_GROUP=" + tag + "-node" + std::to_string(node),
        "UCX_PXN_NODE_ID=node" + std::to_string(node),
        "UCX_PXN_RAIL_MAP=memory:rail" + std::to_string(rail)};
    env.insert(env.end(), o.env.begin(), o.env.end());
    return env;
}

std::vector<std::map<std::string, std::string>> parse_sender(Child &c)
{
    std::vector<std::map<std::string, std::string>> rows;
    for (std::string line; !(line = read_line(c)).empty();) {
        auto w = words(line);
        if ((w[0] == "phase") && (w.size() == 7)) {
            rows.push_back({{"ops", w[2]}, {"ns", w[3]}, {"pieces", w[4]},
                            {"idle", w[5]}, {"retries", w[6]}});
        } else if ((w[0] == "idle") && (w.size() == 3)) {
            rows.push_back({{"ops", w[1]}, {"ns", w[2]}, {"pieces", "0"},
                            {"idle", w[1]}, {"retries", "0"}});
        }
    }
    return rows;
}

int drive(const char *self, const Options &o)
{
    const std::string tag = "opcost" + std::to_string(getpid());
    const std::string dir = o.keep.empty() ?
                            "/tmp/pxn-opcost." + std::to_string(getpid()) : o.keep;
    if (system(("mkdir -p " + dir).c_str()) != 0) {
        die("cannot create " + dir);
    }
    Child target = spawn({self, "--role", "target"}, node_env(1, 1, tag, o));
    const auto t = words(read_line(target));
    if ((t.size() != 5) || (t[0] != "target")) {
        die("the target did not start");
    }
    Child relay = spawn({self, "--role", "relay"}, node_env(0, 1, tag, o));
    if (read_line(relay) != "ready") {
        die("the relay did not start");
    }
    std::vector<std::string> args = {self, "--role", "sender",
                                     "--ops", std::to_string(o.ops),
                                     "--big-ops", std::to_string(o.big_ops),
                                     "--single", std::to_string(o.single),
                                     "--sgls", std::to_string(o.sgls),
                                     "--eps", std::to_string(o.extra_eps),
                                     "--relay-pid", std::to_string(relay.pid),
                                     t[1], t[2], t[3], t[4]};
    Child native = spawn(args, node_env(0, 0, tag, o));
    const auto timed = parse_sender(native);
    if (finish(native) != 0) {
        die("the native sender failed");
    }
    std::map<std::string, Dump> ir;
    if (o.use_valgrind) {
        args.insert(args.begin(), {o.valgrind, "--tool=callgrind",
                                   "--collect-atstart=no",
                                   "--compress-strings=no", "--compress-pos=no",
                                   "--callgrind-out-file=" + dir + "/callgrind.out"});
        Child cg = spawn(args, node_env(0, 0, tag, o));
        parse_sender(cg);
        if (finish(cg) != 0) {
            die("the sender under callgrind failed (logs in " + dir + ")");
        }
        ir = read_dumps(dir, "ucx_pxn_op_cost"); /* not our own code */
    }
    finish(relay);
    finish(target);
    for (int node = 0; node < 2; ++node) {
        const char *base      = getenv("UCX_PXN_REGISTRY_DIR");
        const std::string reg = std::string((base && *base) ? base : "/dev/shm") +
                                "/ucx-pxn-" + std::to_string(geteuid()) +
                                "-" + tag + "-node" + std::to_string(node);
        if (system(("rm -rf " + reg).c_str()) != 0) {
            fprintf(stderr, "ucx_pxn_op_cost: could not remove %s\n", reg.c_str());
        }
    }

    const std::vector<Phase> list = phases(o);
    printf("ucx_pxn_op_cost: pxn sender CPU per operation (per block of an "
           "SGL), inner cma, host memory\n");
    printf("%-16s %-7s %5s %9s | %9s %9s %9s | %9s | %5s %5s\n", "operation",
           "pattern", "ops", "ops/piece", "instr/op", "copy", "other", "ns/op",
           "idle", "retry");
    for (size_t i = 0; i <= list.size() && i < timed.size(); ++i) {
        const bool idle = (i == list.size());
        const auto &row = timed[i];
        const double ops = std::stod(row.at("ops"));
        const double pieces = std::stod(row.at("pieces"));
        const auto it = ir.find(idle ? "idle" : "phase" + std::to_string(i));
        char irs[3][32] = {"-", "-", "-"};
        if (it != ir.end()) {
            const double copy = double(copy_cost(it->second));
            snprintf(irs[0], sizeof(irs[0]), "%.0f", it->second.total / ops);
            snprintf(irs[1], sizeof(irs[1]), "%.0f", copy / ops);
            snprintf(irs[2], sizeof(irs[2]), "%.0f",
                     (double(it->second.total) - copy) / ops);
        }
        char opp[32] = "-";
        if (pieces > 0) {
            snprintf(opp, sizeof(opp), "%.1f", ops / pieces);
        }
        printf("%-16s %-7s %5.0f %9s | %9s %9s %9s | %9.0f | %5s %5s\n",
               idle ? "progress, idle" : list[i].name,
               idle ? "-" : (list[i].single ? "single" : "stream"), ops, opp,
               irs[0], irs[1], irs[2], std::stod(row.at("ns")) / ops,
               row.at("idle").c_str(), row.at("retries").c_str());
    }
    printf("instr/op: callgrind, the sender's thread inside the UCT calls "
           "(each pattern ran once uncounted first); copy: of which memcpy "
           "(callgrind counts 'rep movsb' once per byte); ns/op: the same "
           "regions timed natively, in a separate run; idle: counted "
           "progress calls that found nothing\n");
    if (o.profile > 0) {
        for (size_t i = 0; i <= list.size(); ++i) {
            const bool idle = (i == list.size());
            const auto it = ir.find(idle ? "idle" : "phase" + std::to_string(i));
            if ((it == ir.end()) || (i >= timed.size())) {
                continue;
            }
            const double ops = std::stod(timed[i].at("ops"));
            std::vector<std::pair<uint64_t, std::string>> top;
            for (const auto &f : it->second.self) {
                top.emplace_back(f.second, f.first);
            }
            std::sort(top.rbegin(), top.rend());
            printf("\n%s %s: instructions per operation by function (own)\n",
                   idle ? "progress, idle" : list[i].name,
                   idle ? "" : (list[i].single ? "single" : "stream"));
            for (size_t k = 0; (k < top.size()) && (k < o.profile); ++k) {
                printf("%9.1f  %.110s\n", top[k].first / ops, top[k].second.c_str());
            }
        }
    }
    if (o.keep.empty()) {
        if (system(("rm -rf " + dir).c_str()) != 0) {
            fprintf(stderr, "ucx_pxn_op_cost: could not remove %s\n", dir.c_str());
        }
    }
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    Options o;
    std::string role;
    pid_t relay_pid = 0;
    std::vector<std::string> rest;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                die(a + " needs a value");
            }
            return argv[++i];
        };
        if (a == "--role") {
            role = value();
        } else if (a == "--ops") {
            o.ops = std::max(1, atoi(value().c_str()));
        } else if (a == "--big-ops") {
            o.big_ops = std::max(1, atoi(value().c_str()));
        } else if (a == "--single") {
            o.single = std::max(1, atoi(value().c_str()));
        } else if (a == "--sgls") {
            o.sgls = std::max(1, atoi(value().c_str()));
        } else if (a == "--eps") {
            o.extra_eps = std::max(0, atoi(value().c_str()));
        } else if (a == "--relay-pid") {
            relay_pid = atoi(value().c_str());
        } else if (a == "--valgrind") {
            o.valgrind = value();
        } else if (a == "--no-valgrind") {
            o.use_valgrind = false;
        } else if (a == "--profile") {
            o.profile = std::max(0, atoi(value().c_str()));
        } else if (a == "--keep") {
            o.keep = value();
        } else if (a == "--env") {
            o.env.push_back(value());
        } else if ((a[0] != '-') && (role == "sender")) {
            rest.push_back(a);
        } else {
            fprintf(stderr, "usage: ucx_pxn_op_cost [--ops N] [--big-ops N] "
                    "[--single N] [--sgls N] [--eps N] [--valgrind PATH] [--no-valgrind] [--keep DIR] "
                    "[--profile N] "
                    "[--env UCX_PXN_X=v]...\n");
            return 2;
        }
    }
    /* UCX logs to stdout by default: keep it for the answers. */
    setenv("UCX_LOG_FILE", "stderr", 0);
    if (role.empty()) {
        signal(SIGPIPE, SIG_IGN);
        return drive(argv[0], o);
    }
    if (role == "sender") {
        if (rest.size() != 4) {
            die("--role sender needs the target's dev, iface, address and rkey");
        }
        const char *group = getenv("UCX_PXN_GROUP");
        return run_sender(o, rest, group ? group : "default", relay_pid);
    }
    Uct u;
    u.open("pxn_cma", "pxn", "memory");
    if (role == "relay") {
        idle_until_eof("ready");
    } else if (role == "target") {
        std::vector<uint8_t> dev(u.attr.device_addr_len), iface(u.attr.iface_addr_len);
        check(uct_iface_get_device_address(u.iface,
                                           (uct_device_addr_t*)dev.data()),
              "device address");
        check(uct_iface_get_address(u.iface, (uct_iface_addr_t*)iface.data()),
              "iface address");
        uct_mem_h memh;
        std::string rkey;
        uint8_t *buffer = u.alloc(Sender::kBuffer, &memh, &rkey);
        idle_until_eof("target " + hex(dev.data(), dev.size()) + " " +
                       hex(iface.data(), iface.size()) + " " +
                       std::to_string(reinterpret_cast<uintptr_t>(buffer)) + " " +
                       rkey);
    } else {
        die("unknown role " + role);
    }
    return 0;
}
