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
 *
 * The geometry must be the relay's (the tests': 7 lanes x 4 slots x 64 KiB).
 * Prints "hostile: <actions> actions" and exits 0; 2 on bad use, 1 when no
 * lane could be claimed. "commit": a sender that dies between committing a
 * descriptor and ringing its doorbell: commits one well-formed piece,
 * prints "committed lane <n>" and waits to be killed.
 */
#include <ucs/pxn/descriptor.h>
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

} // namespace

int main(int argc, char **argv)
{
    const bool commit = (argc == 5) && (strcmp(argv[4], "commit") == 0);
    if ((argc != 6) && !commit) {
        fprintf(stderr, "usage: pxn_hostile_sender <group> <node id> <rail> "
                        "<seconds> <seed> | commit\n");
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
