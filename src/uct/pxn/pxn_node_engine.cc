/*
 * A Node as its engine thread's client (EngineClient, pxn_node.h): each
 * round's progress of the ports, their AM grants and the relays, the check
 * before the thread sleeps and what it sleeps on, and the process's
 * counters folded into the control files.
 */
#include "pxn_node.h"

#include "pxn_cuda.h"
#include "pxn_engine_place.h"

#include <algorithm>

namespace pxn {
namespace uct {

const abi::ProcessCounters &Node::counters(const std::string &rail) const
{
    std::lock_guard<std::mutex> guard(mutex_);
    for (const auto &relay : relays_) {
        if (relay->rail() == rail) {
            return relay->counters();
        }
    }
    return zeros_;
}

abi::SenderCounters *Node::sender_counters()
{
    std::lock_guard<std::mutex> guard(mutex_);
    return sender_block();
}

abi::SenderCounters *Node::sender_block()
{
    if (!relays_.empty()) {
        return &relays_.front()->counters().sender;
    }
    /* No relay yet: added into the file's block once there is one. */
    folding_.store(true, std::memory_order_release);
    return &sender_totals_;
}

/* Refusals are rare and the port counts them anyway: one load per port and
 * round here, nothing more in its receive path. */
void Node::fold_refused(Port &port)
{
    if (port.am == nullptr) {
        return;
    }
    const uint64_t refused = port.am->refused();
    if (refused != port.am_refused_folded) {
        __atomic_fetch_add(&sender_block()->am_refused,
                           refused - port.am_refused_folded, __ATOMIC_RELAXED);
        port.am_refused_folded = refused;
    }
}

/* mutex_ held. */
void Node::fold_counters()
{
    for (Port &port : ports_) {
        fold_refused(port);
    }
    if (!folding_.load(std::memory_order_acquire) || relays_.empty()) {
        return;
    }
    abi::SenderCounters &to = relays_.front()->counters().sender;
    uint64_t *from_fields   = &sender_totals_.pieces;
    uint64_t *to_fields     = &to.pieces;
    /* every field but last_completion_ns is a sum (lanes: a gauge, whose
     * decrements are additions of 2^64 - 1; the completion histogram's
     * fields too) */
    constexpr size_t kFields = sizeof(abi::SenderCounters) / sizeof(uint64_t);
    constexpr size_t kLast   = offsetof(abi::SenderCounters, last_completion_ns) /
                               sizeof(uint64_t);
    for (size_t i = 0; i < kFields; ++i) {
        if (i == kLast) {
            continue;
        }
        const uint64_t v = __atomic_exchange_n(&from_fields[i], 0, __ATOMIC_RELAXED);
        if (v != 0) {
            __atomic_fetch_add(&to_fields[i], v, __ATOMIC_RELAXED);
        }
    }
    const uint64_t at = abi::load_relaxed(sender_totals_.last_completion_ns);
    if (at > abi::load_relaxed(to.last_completion_ns)) {
        abi::store_relaxed(to.last_completion_ns, at);
    }
}

void Node::thread_init()
{
    engine_cpus_ = thread_cpus(); /* what the process allowed it */
    place_engine_thread(settings_, gpu(), engine_cpus_);
    /* cuda_ipc operations and the GPU arena need a context on this thread. */
    if ((gpu() >= 0) && (use_gpu(gpu()) == UCS_OK)) {
        engine_gpu_ = gpu();
    }
}

unsigned Node::work()
{
    Retired retired; /* declared first: dropped after the unlock */
    std::lock_guard<std::mutex> guard(mutex_);
    if (deferred_ready_.load(std::memory_order_acquire)) {
        start_deferred(&retired);
    }
    unsigned work = 0;
    for (const Port &port : ports_) {
        std::lock_guard<std::mutex> net_guard(port.net->lock());
        if (!port.left_to_app || engine_needs(port)) {
            work += port.net->progress();
            port.net->take_engine_work(); /* this round follows it up */
        }
        if (port.am != nullptr) {
            work += port.am->pump(
                    [&](uint64_t source, uint64_t granted) {
                        for (const auto &relay : relays_) {
                            if (&relay->net() == port.net) {
                                relay->am_granted(source, granted);
                            }
                        }
                    },
                    [&](uint32_t id, uint64_t gen, const Bytes &target_ep) {
                        for (const auto &relay : relays_) {
                            if (&relay->net() == port.net) {
                                relay->wired(id, gen, target_ep);
                            }
                        }
                    });
        }
        for (const auto &relay : relays_) {
            if (&relay->net() == port.net) {
                work += relay->progress();
            }
        }
    }
    const uint64_t now = monotonic_ns();
    for (const auto &relay : relays_) {
        relay->heartbeat(now);
    }
    fold_counters();
    return work;
}

Nap Node::may_sleep()
{
    std::lock_guard<std::mutex> guard(mutex_);
    if (deferred_ready_.load(std::memory_order_acquire)) {
        return Nap::kNone;
    }
    fold_counters(); /* the file is current while we sleep */
    for (Port &port : ports_) {
        std::lock_guard<std::mutex> net_guard(port.net->lock());
        port.left_to_app = left_to_app(port);
        if (!port.left_to_app && (port.net->event_fd() >= 0) &&
            (port.net->arm() != UCS_OK)) {
            return Nap::kNone; /* events pending */
        }
        if ((port.am != nullptr) && port.am->pending()) {
            return Nap::kNone; /* grants to give or hand on */
        }
    }
    /* Completions of a port without an event fd must be polled for. */
    Nap nap = std::any_of(relays_.begin(), relays_.end(), [](const auto &r) {
                  return (r->inflight() != 0) && (r->net().event_fd() < 0);
              }) ? Nap::kShort : Nap::kLong;
    for (const auto &relay : relays_) {
        relay->wakeup().prepare_sleep();
    }
    for (const auto &relay : relays_) {
        std::lock_guard<std::mutex> net_guard(relay->net().lock());
        const Relay::Pending pending = relay->pending();
        if (pending == Relay::Pending::kNow) {
            for (const auto &r : relays_) {
                r->wakeup().cancel_sleep();
            }
            return Nap::kNone;
        }
        if (pending == Relay::Pending::kSoon) {
            nap = Nap::kShort;
        }
    }
    return nap;
}

void Node::woke()
{
    std::lock_guard<std::mutex> guard(mutex_);
    for (const auto &relay : relays_) {
        relay->wakeup().cancel_sleep();
        relay->wakeup().drain();
    }
}

std::vector<int> Node::wait_fds()
{
    std::lock_guard<std::mutex> guard(mutex_);
    std::vector<int> fds;
    for (const auto &relay : relays_) {
        fds.push_back(relay->wakeup().fd());
    }
    for (const Port &port : ports_) {
        if ((port.net->event_fd() >= 0) && !port.left_to_app) {
            fds.push_back(port.net->event_fd());
        }
    }
    return fds;
}

/* A port whose frames the application's progress receives (it came to
 * since the engine last looked: UCX_PXN_AM_POLL) needs the engine only for
 * its own business there: while it has none, the engine neither wakes on
 * the port's event fd nor progresses it in its rounds. Either would take
 * the messages from the application, on the application's core when the
 * rank is bound to one, and keep the engine spinning while messages come.
 * The engine looks again at its next sleep (after 100 ms at the latest)
 * and takes the port back once the application stopped: what waits for it
 * meanwhile (a new source's grant, a wire request) is for an application
 * that does not progress. Mutex_ and the port's Net lock held. */
bool Node::left_to_app(Port &port) const
{
    return (port.am != nullptr) && port.am->polled_since_last_look() &&
           !engine_needs(port);
}

/* Its relays' operations in flight or routes wiring, or the AM side's
 * grants and answers waiting to go (a connection to a relay port that
 * completes in progress). */
bool Node::engine_needs(const Port &port) const
{
    return ((port.am != nullptr) && port.am->frames_pending()) ||
           std::any_of(relays_.begin(), relays_.end(), [&](const auto &r) {
               return (&r->net() == port.net) && r->needs_port();
           });
}

} // namespace uct
} // namespace pxn
