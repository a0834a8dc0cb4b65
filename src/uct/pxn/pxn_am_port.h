/*
 * Active messages at one port (one inner iface of the process, Net): the
 * receiving end of what relays forward to the process's ifaces there, and
 * the grants those relays get back.
 *
 * - receive() takes every frame of pxn's inner AM id (am_frame.h), checked
 *   whole first: a data frame goes into the inbox of its cookie (the iface,
 *   AmInbox::push), a hello registers its route as a source of that inbox
 *   and records where the route's relay port is, a bye (the route ended,
 *   its relay lives on) gives the route's credit back to the inbox
 *   (AmInbox::bye) and owes it no more grants, a grant is kept for the
 *   next pump(), which hands it to the relays on this port. What fails a
 *   check, names no attached iface or exceeds its credit is dropped and
 *   counted (`refused`), never delivered.
 * - pump() hands the grants received to `granted`, then asks every inbox
 *   for the grants it can give (AmInbox::grants; give_grants() alone, from
 *   the thread that drained an inbox) and sends them to the
 *   relay ports the hellos named, on inner eps made for them once
 *   (to-iface inner transports). A grant that cannot go now
 *   (UCS_ERR_NO_RESOURCE) is kept, the latest value per source, and sent
 *   in a later pump(): grants are cumulative.
 * - attach()/detach() make an iface's inbox reachable by its cookie
 *   (unique in the process, never 0).
 * - Wired ports (Net::ConnectMode::kWired): a relay's wire request
 *   (kAmWire) makes pump() create an inner ep, connect it to the relay's
 *   and answer with its address (kAmWired) on the ep to the relay port;
 *   the ep lives until that route's kAmUnwire, the inner transport
 *   declares it failed, or the port closes. An answer that arrives for a
 *   relay on this port goes to `wired` at the next pump().
 *
 * Threading: receive(), pump() and give_grants() run inside the port's
 * progress, the engine's round or an iface's drain, with the Net lock
 * held; attach() and detach() on the iface's thread. The cookie table has
 * a mutex of its own: receive() may run in any thread that progresses the
 * port.
 */
#ifndef PXN_UCT_PXN_AM_PORT_H_
#define PXN_UCT_PXN_AM_PORT_H_

#include "pxn_net.h"

#include <ucs/pxn/am_inbox.h>

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace pxn {
namespace uct {

class AmPort {
public:
    /* A grant for a route of a relay on this port: (source, granted). */
    using OnGrant = std::function<void(uint64_t source, uint64_t granted)>;
    /* A wiring answer for route `id` (generation `gen`) of a relay on
     * this port: the target's ep address. */
    using OnWired = std::function<void(uint32_t id, uint64_t gen,
                                       const Bytes &target_ep)>;

    explicit AmPort(Net *net);
    ~AmPort();
    AmPort(const AmPort&) = delete;
    AmPort &operator=(const AmPort&) = delete;

    /* `inbox` receives what comes for the returned cookie until detach(). */
    uint32_t attach(AmInbox *inbox);
    void     detach(uint32_t cookie);

    void     receive(const void *data, size_t length);
    /* pump() has work: frames_pending(), or an inbox with room to grant. */
    bool     pending();
    /* pump() has work that frames brought: grants or wiring answers for
     * the relays on this port, wire requests and unwires, new sources to
     * grant, grants and answers that wait to go. Not the room an inbox's
     * drain gives back: its consumer grants that itself (give_grants). */
    bool     frames_pending();
    unsigned pump(const OnGrant &granted, const OnWired &wired);
    /* pump()'s grants alone: what the inboxes can give and what waits to
     * go, sent now. An iface's own thread calls it when its drain gave
     * room back (Hub::grant_here), so that no engine thread is woken for
     * it. */
    unsigned give_grants();

    /* The application's progress came to receive on this port
     * (UCX_PXN_AM_POLL, Hub::receive_here), whether or not the engine held
     * it at that moment: plain stores, any thread. True when the engine
     * asked to be woken by it: it sleeps watching the port, and each
     * message would wake it until it looks again. */
    bool     note_polled()
    {
        __atomic_store_n(&polls_, __atomic_load_n(&polls_, __ATOMIC_RELAXED) + 1,
                         __ATOMIC_RELAXED);
        return __atomic_load_n(&watched_, __ATOMIC_RELAXED) &&
               __atomic_exchange_n(&watched_, false, __ATOMIC_RELAXED);
    }
    /* Engine thread: the application came to receive since the last call,
     * so it takes the port's frames itself and the engine need not wake
     * for each of them. When it did not, its next poll will wake the
     * engine (note_polled()). */
    bool     polled_since_last_look()
    {
        const uint64_t polls = __atomic_load_n(&polls_, __ATOMIC_RELAXED);
        const bool     polled = (polls != polls_seen_);
        polls_seen_           = polls;
        __atomic_store_n(&watched_, !polled, __ATOMIC_RELAXED);
        return polled;
    }

    /* Frames dropped: malformed, no such iface, beyond credit. */
    uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

private:
    struct Sink {
        AmInbox *inbox;
        /* source -> the relay port that sent its hello */
        std::unordered_map<uint64_t, Bytes> relays;
    };
    struct Owed {
        uint64_t granted;
        Bytes    relay; /* dev | iface key into eps_ */
    };

    /* A relay's wiring: its route (id, generation) at one relay port. */
    struct Wire {
        Bytes    relay;   /* dev | iface key into eps_ */
        Bytes    relay_ep;
        uint32_t id  = 0;
        uint64_t gen = 0;
        bool operator<(const Wire &o) const
        {
            return std::tie(relay, id, gen) < std::tie(o.relay, o.id, o.gen);
        }
    };
    struct WiredEp {
        uct_ep_h ep;
        Bytes    address;  /* what the answer carries */
        bool     answered;
    };
    struct Answer {
        uint32_t id;
        uint64_t gen;
        Bytes    ep;
    };

    /* pending() and frames_pending(): work of the port's own, or an inbox
     * whose `grant` says it has room to give. */
    bool inboxes_pending(bool (AmInbox::*grant)() const);
    /* give_grants() with mutex_ held. */
    unsigned grant_room();
    /* One frame to the relay port `relay`, on the ep made for it once. */
    bool send_to_relay(const Bytes &relay, const void *frame, size_t length);
    bool send_grant(uint64_t source, const Owed &owed);
    /* pump()'s wiring work: answers, new wires, unwires, failed eps. */
    unsigned pump_wiring(const OnWired &wired);
    bool     answer_wire(const Wire &wire, const WiredEp &ep);

    Net                                *net_;
    std::vector<std::pair<uint64_t, uint64_t>> granted_; /* received */
    std::mutex                          mutex_;
    std::map<uint32_t, Sink>            sinks_;
    std::map<uint64_t, Owed>            owed_;  /* source -> grant to send */
    std::map<Bytes, uct_ep_h>           eps_;   /* relay port -> inner ep */
    /* wired ports */
    std::vector<Answer>                 answers_;  /* received, for relays */
    std::vector<Wire>                   wires_;    /* requests received */
    std::vector<Wire>                   unwires_;  /* routes that ended */
    /* eps the transport failed (the Net lock guards it: the failure
     * observer runs with it held, as pump() does) */
    std::vector<uct_ep_h>               failed_;
    std::map<Wire, WiredEp>             wired_;    /* this port's eps */
    size_t                              unanswered_ = 0; /* of wired_ */
    uint64_t                            polls_      = 0; /* note_polled() */
    uint64_t                            polls_seen_ = 0; /* engine's last look */
    bool                                watched_    = false; /* wake at a poll */
    std::atomic<uint64_t>               refused_{0};
    static std::atomic<uint32_t>        next_cookie_;
};

} // namespace uct
} // namespace pxn

#endif
