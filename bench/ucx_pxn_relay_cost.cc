/*
 * ucx_pxn_relay_cost: what one piece costs the relay's CPU, counted in
 * instructions by callgrind: the relay engine (pxn_relay.cc) and a sender
 * lane in this one process over FakeNet (the inner transport of the
 * transport tests), driven round by round, so that the count is the same
 * on every run.
 *
 *   ucx_pxn_relay_cost [--pieces N] [--valgrind PATH] [--keep DIR]
 *
 * Run without arguments, it runs itself under callgrind and prints the
 * table. What is counted: the relay's progress rounds and the inner
 * completions they lead to, from the moment the sender published the
 * pieces until the relay completed the last one; not counted: the sender,
 * FakeNet's own functions and its data copy (a real inner transport moves
 * the bytes in the kernel or the NIC). Default geometry (7 lanes, one of
 * them in use, 18 slots of 8 MiB). The SGL rows: FakeNet offers
 * scatter-gather operations of 64 elements, and the relay posts the 64
 * operations of a piece as one (UCX_PXN_RELAY_SGL).
 */
#include "callgrind_dump.h"

#include <test/gtest/transport/fake_net.h>
#include <uct/pxn/pxn_relay_service.h>
#include <uct/pxn/pxn_send_lane.h>
#include <ucs/pxn/identity.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

using namespace pxn_bench;

namespace {

[[noreturn]] void die(const std::string &why)
{
    fprintf(stderr, "ucx_pxn_relay_cost: %s\n", why.c_str());
    exit(1);
}

class Owner : public pxn::uct::SendOwner {
public:
    void op_done(ucs_status_t status) override
    {
        ++done;
        failed += (status != UCS_OK);
    }
    bool fall_back(const pxn::uct::SendRequest&, const uint8_t*, uint16_t) override
    {
        return false;
    }
    unsigned done = 0, failed = 0;
};

class Route : public pxn::uct::RouteClient {
public:
    void route_answered(const pxn::RouteAnswer &a) override
    {
        answered = true;
        answer   = a;
    }
    bool             answered = false;
    pxn::RouteAnswer answer;
};

struct Phase {
    const char *name;
    pxn::abi::Op op;
    size_t       size;     /* of each operation */
    unsigned     per_piece; /* operations in one piece, not contiguous */
    bool         inner_sgl = false; /* FakeNet offers put/get_sgl_zcopy */
};

class Rig {
public:
    Rig(const std::string &dir, bool inner_sgl)
    {
        settings_.group   = "relaycost";
        settings_.node_id = "n0";
        settings_.net_tls = {"fake"};
        /* callgrind slows everything down fifty-fold: no heartbeat may
         * look stale meanwhile */
        settings_.heartbeat_timeout = 60;
        if (pxn::Registry::open(settings_, dir, &registry_) != UCS_OK) {
            die("cannot open a registry in " + dir);
        }
        net_ = std::make_shared<pxn_test::FakeNet>();
        if (inner_sgl) {
            net_->offer_sgl(64, 64);
        }
        pxn::uct::RelayService::Params params;
        params.registry          = registry_.get();
        params.net               = net_;
        params.md_registers_cuda = false;
        params.rail              = "rail1";
        params.device            = "fake0";
        params.gpu               = -1;
        params.is_local          = [](const pxn::Bytes&, const pxn::Bytes&) {
            return false;
        };
        if (pxn::uct::RelayService::open(params, settings_, &relay_) != UCS_OK) {
            die("cannot open the relay");
        }
        std::vector<pxn::PeerInfo> peers;
        std::unique_ptr<pxn::PeerMapping> mapping;
        pxn::ProcessIdentity self;
        if ((registry_->discover(nullptr, &peers) != UCS_OK) || peers.empty() ||
            (registry_->map_peer(peers[0], &mapping) != UCS_OK) ||
            (pxn::current_process(&self) != UCS_OK) ||
            (pxn::random_epoch(&self.epoch) != UCS_OK)) {
            die("cannot map the relay");
        }
        lane_.reset(new pxn::uct::SendLane(registry_.get(), std::move(mapping), self,
                                           settings_, -1, &counters_));
        if (!drive([&] { return lane_->usable() || lane_->failed(); }) ||
            !lane_->usable()) {
            die("the lane did not open");
        }
        Route route;
        pxn::RouteMessage m;
        m.kind  = pxn::abi::kRouteToIface;
        m.dev   = net_->device_addr();
        m.iface = pxn_test::FakeNet::target_iface(1);
        lane_->control().request_route(m, &route);
        if (!drive([&] { return route.answered; }) || (route.answer.status != UCS_OK)) {
            die("no route");
        }
        route_ = route.answer.route;
        target_.assign(kTarget, 0);
        source_.assign(kTarget, 7);
        const pxn::Bytes key = net_->register_remote(target_.data(), target_.size());
        if (lane_->control().rkey_index(key.data(), uint16_t(key.size()), &rkey_) !=
            UCS_OK) {
            die("no rkey entry");
        }
    }

    ~Rig()
    {
        lane_.reset();
        relay_.reset();
    }

    /* `pieces` pieces of the phase, one after the other; returns the
     * relay's progress rounds. Counted (with `count`): the relay's part. */
    unsigned run(const Phase &p, unsigned pieces, bool count)
    {
        Owner owner;
        std::vector<uct_iov_t> iov(p.per_piece);
        size_t offset   = 0;
        unsigned rounds = 0;
        for (unsigned k = 0; k < pieces; ++k) {
            const uint64_t done0 = relay_->counters().relay.pieces;
            relay_->heartbeat(pxn::monotonic_ns());
            for (unsigned i = 0; i < p.per_piece; ++i) {
                /* a gap between operations: one plan and one inner
                 * operation each */
                iov[i] = {source_.data() + offset, p.size, nullptr, 0, 1};
                const ucs_status_t status =
                        lane_->post(&owner, p.op, route_, rkey_,
                                    reinterpret_cast<uint64_t>(target_.data()) +
                                    offset, &iov[i], 1, nullptr);
                if (status != UCS_INPROGRESS) {
                    die(std::string(p.name) + ": post: " +
                        ucs_status_string(status));
                }
                offset = (offset + p.size + 64) % (kTarget / 2);
            }
            lane_->publish_open();
            std::unique_lock<std::mutex> guard(net_->lock());
            while (relay_->counters().relay.pieces == done0) {
                if (count) {
                    CALLGRIND_TOGGLE_COLLECT;
                }
                relay_->progress();
                net_->progress();
                if (count) {
                    CALLGRIND_TOGGLE_COLLECT;
                }
                if (++rounds > 100000u * (k + 1)) {
                    die(std::string(p.name) + ": the relay completes nothing");
                }
            }
            guard.unlock();
            /* the sender reaps (its ring has 18 slots) */
            drive([&] { return owner.done == (k + 1) * p.per_piece; });
        }
        if (owner.failed != 0) {
            die(std::string(p.name) + ": operations failed");
        }
        return rounds;
    }

    /* Relay rounds with nothing to do. */
    void idle(unsigned rounds)
    {
        std::lock_guard<std::mutex> guard(net_->lock());
        CALLGRIND_TOGGLE_COLLECT;
        for (unsigned i = 0; i < rounds; ++i) {
            relay_->progress();
        }
        CALLGRIND_TOGGLE_COLLECT;
    }

private:
    static constexpr size_t kTarget = 64ul << 20;

    template<typename Done> bool drive(Done &&done)
    {
        for (unsigned i = 0; i < 1000000; ++i) {
            if (done()) {
                return true;
            }
            {
                std::lock_guard<std::mutex> guard(net_->lock());
                net_->progress();
                relay_->progress();
                relay_->heartbeat(pxn::monotonic_ns());
            }
            lane_->progress();
        }
        return done();
    }

    pxn::Settings                            settings_;
    std::unique_ptr<pxn::Registry>           registry_;
    std::shared_ptr<pxn_test::FakeNet>       net_;
    std::unique_ptr<pxn::uct::RelayService>  relay_;
    std::unique_ptr<pxn::uct::SendLane>      lane_;
    pxn::abi::SenderCounters                 counters_{};
    uint32_t                                 route_ = 0, rkey_ = 0;
    std::vector<uint8_t>                     target_, source_;
};

const std::vector<Phase> &phases()
{
    static const std::vector<Phase> list = {
        {"put, 1 x 4 KiB", pxn::abi::kOpPut, 4096, 1},
        {"put, 64 x 4 KiB", pxn::abi::kOpPut, 4096, 64},
        {"put, 1 x 1 MiB", pxn::abi::kOpPut, 1 << 20, 1},
        {"get, 1 x 4 KiB", pxn::abi::kOpGet, 4096, 1},
        {"get, 64 x 4 KiB", pxn::abi::kOpGet, 4096, 64},
        {"get, 1 x 1 MiB", pxn::abi::kOpGet, 1 << 20, 1},
        {"put, 64 x 4 KiB, SGL", pxn::abi::kOpPut, 4096, 64, true},
        {"get, 64 x 4 KiB, SGL", pxn::abi::kOpGet, 4096, 64, true},
    };
    return list;
}

int measure(unsigned pieces)
{
    char dir[] = "/dev/shm/pxn-relaycost.XXXXXX";
    if (mkdtemp(dir) == nullptr) {
        die("mkdtemp failed");
    }
    for (const bool sgl : {false, true}) {
        Rig rig(dir, sgl);
        for (size_t i = 0; i < phases().size(); ++i) {
            if (phases()[i].inner_sgl != sgl) {
                continue;
            }
            rig.run(phases()[i], pieces, false); /* warm */
            const unsigned rounds = rig.run(phases()[i], pieces, true);
            CALLGRIND_DUMP_STATS_AT(("phase" + std::to_string(i)).c_str());
            printf("phase %zu %u %u\n", i, pieces, rounds);
        }
        if (!sgl) {
            rig.idle(1000);
            CALLGRIND_DUMP_STATS_AT("idle");
        }
    }
    if (system((std::string("rm -rf ") + dir).c_str()) != 0) {
        fprintf(stderr, "ucx_pxn_relay_cost: could not remove %s\n", dir);
    }
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    unsigned pieces = 100;
    std::string valgrind = "valgrind", keep;
    bool child = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if ((a == "--pieces") && (i + 1 < argc)) {
            pieces = std::max(1, atoi(argv[++i]));
        } else if ((a == "--valgrind") && (i + 1 < argc)) {
            valgrind = argv[++i];
        } else if ((a == "--keep") && (i + 1 < argc)) {
            keep = argv[++i];
        } else if (a == "--measure") {
            child = true;
        } else {
            fprintf(stderr, "usage: ucx_pxn_relay_cost [--pieces N] "
                    "[--valgrind PATH] [--keep DIR]\n");
            return 2;
        }
    }
    if (child || RUNNING_ON_VALGRIND) {
        return measure(pieces);
    }
    const std::string dir = keep.empty() ?
                            "/tmp/pxn-relaycost." + std::to_string(getpid()) : keep;
    const std::string cmd = "mkdir -p " + dir + " && " + valgrind +
                            " --tool=callgrind --collect-atstart=no"
                            " --compress-strings=no --compress-pos=no"
                            " --callgrind-out-file=" + dir + "/callgrind.out " +
                            argv[0] + " --measure --pieces " +
                            std::to_string(pieces) + " > " + dir + "/rounds 2> " +
                            dir + "/log";
    if (system(cmd.c_str()) != 0) {
        die("the run under callgrind failed (see " + dir + "/log)");
    }
    std::vector<unsigned> rounds(phases().size(), 0);
    FILE *f = fopen((dir + "/rounds").c_str(), "r");
    for (unsigned i, n, r; (f != nullptr) && (fscanf(f, "phase %u %u %u\n", &i, &n, &r) == 3);) {
        if (i < rounds.size()) {
            rounds[i] = r;
        }
    }
    if (f != nullptr) {
        fclose(f);
    }
    const auto dumps = read_dumps(dir, "", "FakeNet");
    printf("ucx_pxn_relay_cost: relay instructions per piece (callgrind), "
           "FakeNet inner transport, %u pieces each\n", pieces);
    printf("%-22s | %9s %9s | %8s %12s\n", "pieces", "instr", "per op",
           "rounds", "copy (fake)");
    for (size_t i = 0; i < phases().size() && i < rounds.size(); ++i) {
        const auto it = dumps.find("phase" + std::to_string(i));
        if (it == dumps.end()) {
            continue;
        }
        const double copy  = double(copy_cost(it->second));
        const double per   = (double(it->second.total) - copy) / pieces;
        printf("%-22s | %9.0f %9.0f | %8.1f %12.0f\n", phases()[i].name, per,
               per / phases()[i].per_piece, double(rounds[i]) / pieces,
               copy / pieces);
    }
    const auto idle = dumps.find("idle");
    if (idle != dumps.end()) {
        printf("%-22s | %9.0f %9s | %8s %12s\n", "idle round", idle->second.total / 1000.0,
               "-", "-", "-");
    }
    printf("instr: the relay's rounds from publication to the last completion, "
           "per piece, without FakeNet's own functions and copy; per op: per "
           "operation (plan) of the piece; rounds: relay rounds per piece; "
           "SGL: FakeNet offers put/get_sgl_zcopy (64 elements), the relay "
           "posts a piece's 64 operations as one; "
           "idle round: one round over 7 lanes with nothing to do\n");
    if (keep.empty() && (system(("rm -rf " + dir).c_str()) != 0)) {
        fprintf(stderr, "ucx_pxn_relay_cost: could not remove %s\n", dir.c_str());
    }
    return 0;
}
