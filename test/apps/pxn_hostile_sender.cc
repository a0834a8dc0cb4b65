/*
 * pxn_hostile_sender: a same-uid process that claims a lane at a relay like
 * a sender and then, for a bounded time, writes what it likes into that
 * lane: random descriptors (some well-formed apart from one field), random
 * route requests, random packed rkeys, counters that jump or go backwards,
 * random bytes over the lane block (relay-owned fields included), and
 * doorbells for all of it, waking the relay each time. Used by the fault
 * tests (test_pxn_faults.cc): the relay must keep serving its other lanes,
 * reject what is invalid, and never crash.
 *
 *   pxn_hostile_sender <group> <node id> <rail> <seconds> <seed>
 *   pxn_hostile_sender <group> <node id> <rail> commit
 *   pxn_hostile_sender <group> <node id> <rail> am <dev addr> <iface addr>
 *
 * The geometry must be the relay's (the tests': 7 lanes x 4 slots x 64 KiB).
 * Prints "hostile: <actions> actions" and exits 0; 2 on bad use, 1 when no
 * lane could be claimed. "commit": a sender that dies between committing a
 * descriptor and ringing its doorbell: commits one well-formed piece,
 * prints "committed lane <n>" and waits to be killed.
 * "am": asks the relay for a route to the pxn iface at <dev addr> <iface
 * addr> (hex, as ucx_pxn_peer's "info" prints them), then publishes one
 * at a time AM pieces that lie in one field each (header length, plan
 * length, an AM id >= 32, a cookie of 0, address bits above the cookie, an
 * rkey_index of 1, a message longer than the relay's limit, alone or
 * behind a good one) and waits (bounded) for each one's completion; prints
 * "hostile am: <refused> of <sent> refused" and exits 0 when every one
 * completed with an error, 3 otherwise (1: no route).
 */
#include <ucs/pxn/address.h>
#include <ucs/pxn/am_frame.h>
#include <ucs/pxn/descriptor.h>
#include <ucs/pxn/route_codec.h>
#include <ucs/pxn/identity.h>
#include <ucs/pxn/peer_mapping.h>
#include <ucs/pxn/registry.h>
#include <ucs/pxn/wakeup.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <unistd.h>

namespace {

namespace abi = pxn::abi;

class Hostile {
public:
    Hostile(pxn::LaneBlock block, uint64_t epoch, uint64_t seed) :
        block_(block), epoch_(epoch), rnd_(seed)
    {
    }

    /* One random attack on the lane, then a doorbell. */
    void act()
    {
        switch (rnd_() % 6) {
        case 0: descriptor(); break;
        case 1: route(); break;
        case 2: rkey(); break;
        case 3: counters(); break;
        case 4: scribble(0, block_.layout().lane_stride); break;
        default: scribble(block_.layout().completions, block_.layout().descriptors);
        }
        const uint64_t head = abi::load_relaxed(block_.producer().head);
        abi::store_release(block_.producer().doorbell,
                           chance(8) ? uint64_t(rnd_()) : head);
    }

private:
    bool chance(unsigned one_in) { return rnd_() % one_in == 0; }

    /* Mostly plausible: right epoch, next seq, small lengths; one field at a
     * time may be wild. */
    void descriptor()
    {
        const uint64_t seq  = abi::load_relaxed(block_.producer().head) + 1;
        const uint32_t slot = uint32_t((seq - 1) % block_.slots());
        abi::DescriptorHeader &d = block_.descriptor(slot);
        const uint32_t count = uint32_t(rnd_() % 4 + (chance(16) ? block_.max_plan() : 0));
        d.lane_epoch = chance(8) ? rnd_() : epoch_;
        d.op         = chance(8) ? uint32_t(rnd_()) : uint32_t(rnd_() % 2 + 1);
        d.plan_count = count;
        d.route      = uint32_t(chance(4) ? rnd_() : rnd_() % 64);
        d.flags      = uint32_t(rnd_());
        uint64_t total = 0;
        for (uint32_t i = 0; i < std::min(count, block_.max_plan()); ++i) {
            abi::Plan &p  = block_.plans(slot)[i];
            p.remote_addr = rnd_();
            p.length      = uint32_t(chance(4) ? rnd_() : rnd_() % 4096);
            p.rkey_index  = uint32_t(chance(4) ? rnd_() : rnd_() % abi::kMaxRkeys);
            total        += p.length;
        }
        d.length = chance(8) ? rnd_() : total;
        abi::store_release(d.seq, chance(8) ? uint64_t(rnd_()) : seq);
        abi::store_release(block_.producer().head, seq);
    }

    void route()
    {
        abi::RouteEntry &r = block_.route(uint32_t(rnd_() % abi::kRouteMailboxes));
        fill(&r.request.kind, sizeof(r.request) - sizeof(r.request.request_gen));
        abi::store_release(r.request.request_gen, r.request.request_gen + 1);
    }

    void rkey()
    {
        abi::RkeyEntry &k = block_.rkey(uint32_t(rnd_() % abi::kMaxRkeys));
        fill(&k.length, sizeof(k) - sizeof(k.gen));
        abi::store_release(k.gen, k.gen + 1);
    }

    void counters()
    {
        abi::LaneProducer &p = block_.producer();
        abi::store_release(p.head, chance(2) ? rnd_() : p.head - rnd_() % 8);
        abi::store_release(p.reaped, chance(2) ? rnd_() : p.head);
    }

    void scribble(uint64_t from, uint64_t to)
    {
        const uint64_t at  = from + rnd_() % (to - from);
        const uint64_t len = std::min<uint64_t>(rnd_() % 256 + 1, to - at);
        fill(block_.base() + at, len);
    }

    void fill(void *dest, size_t length)
    {
        auto *bytes = static_cast<uint8_t*>(dest);
        for (size_t i = 0; i < length; ++i) {
            bytes[i] = uint8_t(rnd_());
        }
    }

    pxn::LaneBlock  block_;
    uint64_t        epoch_;
    std::mt19937_64 rnd_;
};

pxn::Bytes unhex(const char *text)
{
    pxn::Bytes bytes;
    for (size_t i = 0; text[i] && text[i + 1]; i += 2) {
        bytes.push_back(uint8_t(std::stoul(std::string(text + i, 2), nullptr, 16)));
    }
    return bytes;
}

/* The "am" mode: one lane, one route, one malformed AM piece at a time. */
class HostileAm {
public:
    HostileAm(pxn::LaneBlock block, const pxn::LaneClaim &claim,
              pxn::SenderWakeup &wakeup) :
        block_(block), epoch_(claim.lane_epoch), seq_(claim.initial_seq),
        wakeup_(wakeup)
    {
    }

    /* The route to the target at pxn addresses `dev`, `iface`; false when
     * the relay does not grant one within 10 s. */
    bool route_to(const pxn::Bytes &dev, const pxn::Bytes &iface)
    {
        pxn::DeviceAddress device;
        pxn::RouteMessage request;
        if (!pxn::DeviceAddress::unpack(dev.data(), dev.size(), &device) ||
            !pxn::unpack_iface_address(iface.data(), iface.size(), &request.iface,
                                       &cookie_) || (cookie_ == 0)) {
            fprintf(stderr, "hostile: not a pxn address of an AM target\n");
            return false;
        }
        request.kind = abi::kRouteToIface;
        request.dev  = device.inner;
        abi::RouteEntry &entry = block_.route(0);
        const uint64_t gen = abi::load_acquire(entry.request.request_gen) + 1;
        if (pxn::post_route_request(&entry.request, gen, request) != UCS_OK) {
            return false;
        }
        pxn::RouteAnswer answer;
        for (int i = 0; i < 10000; ++i) {
            wakeup_.notify();
            if (pxn::read_route_reply(&entry.reply, gen, &answer)) {
                route_ = answer.route;
                return answer.status == UCS_OK;
            }
            usleep(1000);
        }
        return false;
    }

    /* Every lie in turn; the number refused (completed with an error). */
    unsigned run(unsigned *sent)
    {
        const uint64_t good = pxn::am_plan_address(cookie_, 3);
        struct Lie {
            const char *name;
            abi::Plan   plans[2];
            uint32_t    count;
            int64_t     length_delta; /* header length less the plans' sum */
            abi::Op     op;
        };
        const Lie lies[] = {
            {"header longer than its plans", {{good, 64, 0}}, 1, 8, abi::kOpAm},
            {"header shorter than its plans", {{good, 64, 0}}, 1, -8, abi::kOpAm},
            {"header longer than a slot", {{good, 64, 0}}, 1, 1 << 20, abi::kOpAm},
            {"plan past the header", {{good, 64, 0}, {good, 4096, 0}}, 2, -4096,
             abi::kOpAm},
            {"AM id 32", {{pxn::am_plan_address(cookie_, 32), 64, 0}}, 1, 0,
             abi::kOpAm},
            {"AM id 255", {{pxn::am_plan_address(cookie_, 255), 64, 0}}, 1, 0,
             abi::kOpAm},
            {"cookie 0", {{pxn::am_plan_address(0, 3), 64, 0}}, 1, 0, abi::kOpAm},
            {"bits above the cookie", {{good | (1ull << 45), 64, 0}}, 1, 0,
             abi::kOpAm},
            {"rkey_index 1", {{good, 64, 1}}, 1, 0, abi::kOpAm},
            {"message past the relay's limit", {{good, 9000, 0}}, 1, 0,
             abi::kOpAm},
            {"limit lie after a good message", {{good, 64, 0}, {good, 60000, 0}},
             2, 0, abi::kOpAm},
        };
        unsigned refused = 0;
        *sent = 0;
        for (const Lie &lie : lies) {
            ucs_status_t status;
            if (!publish(lie.plans, lie.count, lie.length_delta, lie.op, &status)) {
                fprintf(stderr, "hostile: no completion for '%s'\n", lie.name);
                continue;
            }
            ++*sent;
            if (status != UCS_OK) {
                ++refused;
            } else {
                fprintf(stderr, "hostile: '%s' was accepted\n", lie.name);
            }
        }
        return refused;
    }

private:
    /* Writes the piece by hand (the lie in it), rings, waits for its
     * completion (5 s at most) and reaps it. */
    bool publish(const abi::Plan *plans, uint32_t count, int64_t length_delta,
                 abi::Op op, ucs_status_t *status)
    {
        const uint64_t seq  = ++seq_;
        const uint32_t slot = uint32_t((seq - 1) % block_.slots());
        abi::DescriptorHeader &d = block_.descriptor(slot);
        uint64_t sum = 0;
        for (uint32_t i = 0; i < count; ++i) {
            block_.plans(slot)[i] = plans[i];
            sum += plans[i].length;
        }
        d.lane_epoch = epoch_;
        d.op         = op;
        d.plan_count = count;
        d.route      = route_;
        d.flags      = 0;
        std::memset(d.reserved, 0, sizeof(d.reserved));
        d.length     = uint64_t(int64_t(sum) + length_delta);
        abi::store_release(d.seq, seq);
        abi::store_release(block_.producer().head, seq);
        abi::store_release(block_.producer().doorbell, seq);
        for (int i = 0; i < 5000; ++i) {
            wakeup_.notify();
            if (pxn::read_completion(&block_.completion(slot), seq, status)) {
                abi::store_release(block_.producer().reaped, seq);
                return true;
            }
            usleep(1000);
        }
        return false;
    }

    pxn::LaneBlock     block_;
    uint64_t           epoch_;
    uint64_t           seq_;
    pxn::SenderWakeup &wakeup_;
    uint32_t           cookie_ = 0;
    uint32_t           route_  = 0;
};

} // namespace

int main(int argc, char **argv)
{
    const bool commit = (argc == 5) && (strcmp(argv[4], "commit") == 0);
    const bool am     = (argc == 7) && (strcmp(argv[4], "am") == 0);
    if ((argc != 6) && !commit && !am) {
        fprintf(stderr, "usage: pxn_hostile_sender <group> <node id> <rail> "
                        "<seconds> <seed> | commit | am <dev> <iface>\n");
        return 2;
    }
    pxn::Settings settings;
    settings.group              = argv[1];
    settings.node_id            = argv[2];
    settings.geometry.slot_size = 65536;
    settings.geometry.slots     = 4;
    settings.heartbeat_timeout  = 1.0;
    const std::string rail = argv[3];
    const double seconds   = atof(argv[4]);

    std::unique_ptr<pxn::Registry> registry;
    pxn::ProcessIdentity self;
    std::vector<pxn::PeerInfo> peers;
    if ((pxn::Registry::open(settings, &registry) != UCS_OK) ||
        (pxn::current_process(&self) != UCS_OK) ||
        (registry->discover(&self, &peers) != UCS_OK)) {
        fprintf(stderr, "hostile: cannot read the registry\n");
        return 1;
    }
    const pxn::PeerInfo *relay = nullptr;
    for (const pxn::PeerInfo &p : peers) {
        relay = ((relay == nullptr) && (p.rail == rail)) ? &p : relay;
    }
    std::unique_ptr<pxn::PeerMapping> mapping;
    pxn::LaneClaim claim;
    pxn::SenderWakeup wakeup;
    if ((relay == nullptr) || (registry->map_peer(*relay, &mapping) != UCS_OK) ||
        (mapping->claim_lane(self, &claim) != UCS_OK) ||
        (mapping->open_wakeup(&wakeup) != UCS_OK)) {
        fprintf(stderr, "hostile: no lane at a relay of rail %s (%zu relays)\n",
                rail.c_str(), peers.size());
        return 1;
    }
    pxn::LaneBlock block = mapping->lane(claim.index);
    for (int i = 0; (i < 5000) &&
                    (abi::load_acquire(block.consumer().lane_epoch) != claim.lane_epoch);
         ++i) {
        wakeup.notify();
        usleep(1000);
    }

    if (am) {
        HostileAm hostile(block, claim, wakeup);
        if (!hostile.route_to(unhex(argv[5]), unhex(argv[6]))) {
            fprintf(stderr, "hostile: no route to the target\n");
            return 1;
        }
        unsigned sent = 0;
        const unsigned refused = hostile.run(&sent);
        printf("hostile am: %u of %u refused\n", refused, sent);
        return (refused == sent) && (sent > 0) ? 0 : 3;
    }

    if (commit) {
        /* one plan of 8 bytes at an address nobody will read: the relay
         * never gets the doorbell */
        const uint64_t seq = claim.initial_seq + 1;
        const abi::Plan plan = {0x1000, 8, 0};
        pxn::write_descriptor(&block.descriptor(uint32_t((seq - 1) % block.slots())),
                              seq, claim.lane_epoch, abi::kOpPut, 0, &plan, 1);
        abi::store_release(block.producer().head, seq);
        wakeup.notify();
        printf("committed lane %u\n", claim.index);
        fflush(stdout);
        for (;;) {
            pause();
        }
    }

    Hostile hostile(block, claim.lane_epoch, strtoull(argv[5], nullptr, 10));
    const auto end = std::chrono::steady_clock::now() +
                     std::chrono::duration<double>(seconds);
    uint64_t actions = 0;
    while (std::chrono::steady_clock::now() < end) {
        hostile.act();
        wakeup.notify();
        if (++actions % 64 == 0) {
            usleep(200); /* let the relay and the honest sender run */
        }
    }
    printf("hostile: %lu actions on lane %u\n", actions, claim.index);
    return 0;
}
