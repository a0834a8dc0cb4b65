/*
 * A relay of this process: its presence on one home rail of its node. It
 * owns the registry entry through which senders of the node find it, the
 * staging arena, the wakeup FIFO and the relay engine (pxn_relay.h); the
 * inner transport is the port of the home device (a Net shared with
 * ifaces opened on that device). The process's Node creates one per home
 * rail and drives it from its engine thread.
 *
 * Start-up order: registry entry (INIT), arena (pxn_relay_arena.h: lanes
 * get memory only when claimed, or as warm spares), wakeup, relay engine,
 * publication (READY). Shutdown is the reverse: CLOSING, in-flight inner
 * operations drained (bounded), lane memory freed, entry removed. Any
 * failure before publication leaves nothing behind.
 *
 * Arena: a shared-memory file, or GPU memory exported by CUDA IPC per lane
 * (on the process's own GPU: UCX_PXN_ARENA=cuda, or auto with an inner md
 * that registers GPU memory). GPU allocations run in the primary context
 * of that GPU, pushed for the call, so no thread's current context changes.
 *
 * Threading: open() and the destructor run on whichever thread the Node
 * uses (an iface's, or its engine thread); progress() and heartbeat() on
 * the engine thread with the Net lock held.
 */
#ifndef PXN_UCT_PXN_RELAY_SERVICE_H_
#define PXN_UCT_PXN_RELAY_SERVICE_H_

#include "pxn_relay.h"
#include "pxn_relay_arena.h"

#include <ucs/pxn/os_resource.h>
#include <ucs/pxn/registry.h>
#include <ucs/pxn/registry_entry.h>
#include <ucs/pxn/wakeup.h>

#include <memory>
#include <string>

namespace pxn {
namespace uct {

class RelayService {
public:
    struct Params {
        Registry              *registry;
        std::shared_ptr<Net>   net;         /* the home device's port */
        bool                   md_registers_cuda;
        bool                   md_reaches_host = true; /* host arena usable */
        std::string            rail;
        std::string            device;
        int                    gpu;         /* the process's GPU, -1 none */
        RouteTable::LocalCheck is_local;
    };

    /* The arena the settings ask for on this process: GPU memory or not. */
    static bool wants_gpu_arena(const Settings &settings, bool md_registers_cuda);

    static ucs_status_t open(const Params &params, const Settings &settings,
                             std::unique_ptr<RelayService> *relay);
    ~RelayService();
    RelayService(const RelayService&) = delete;
    RelayService &operator=(const RelayService&) = delete;

    const std::string &rail() const { return rail_; }
    const std::string &device() const { return device_; }
    Net               &net() const { return *net_; }
    bool               gpu_arena() const { return arena_->gpu(); }
    const RelayArena  &arena() const { return *arena_; }
    abi::ProcessCounters &counters() const
    {
        return *reinterpret_cast<abi::ProcessCounters*>(entry_->view().base +
                                                        abi::kCountersOffset);
    }
    const RegistryEntry &entry() const { return *entry_; }

    /* Relay work must have paused this long before the arena's upkeep
     * (warm lanes backed ahead of claims, lingering ones freed) takes the
     * engine thread: never between the pieces of a transfer. */
    static constexpr uint64_t kQuietNs = 50000000; /* 50 ms */

    /* Engine thread, Net lock held. */
    unsigned progress()
    {
        const unsigned work = relay_->progress();
        const uint64_t now  = monotonic_ns();
        relay_->sweep_owners(now);
        if (work != 0) {
            last_work_ns_ = now;
            return work;
        }
        return (now - last_work_ns_ >= kQuietNs) ? arena_->tend(now) : 0;
    }
    Relay::Pending pending() const { return relay_->pending(); }
    /* A grant for one of its AM routes (AmPort, Relay::am_granted). */
    void am_granted(uint64_t source, uint64_t granted)
    {
        relay_->am_granted(source, granted);
    }
    /* A target port's wiring answer (AmPort, Relay::wired). */
    void wired(uint32_t id, uint64_t gen, const Bytes &target_ep)
    {
        relay_->wired(id, gen, target_ep);
    }
    unsigned inflight() const { return relay_->inflight(); }
    /* Its port must be progressed for it: operations in flight (their
     * completions, grants for the messages among them) or a route wiring.
     * Net lock held. */
    bool     needs_port() const
    {
        return (relay_->inflight() != 0) || relay_->routes().wiring();
    }
    void     heartbeat(uint64_t now_ns);
    RelayWakeup &wakeup() { return wakeup_; }

private:
    RelayService() = default;

    std::string                    rail_;
    std::string                    device_;
    std::shared_ptr<Net>           net_;
    Registry                      *registry_ = nullptr;
    std::unique_ptr<RegistryEntry> entry_;
    std::unique_ptr<RelayArena>    arena_;
    int                            gpu_        = -1;
    RelayWakeup                    wakeup_;
    std::unique_ptr<Relay>         relay_;
    uint64_t                       next_heartbeat_ns_ = 0;
    uint64_t                       last_work_ns_      = 0; /* relay work */
};

} // namespace uct
} // namespace pxn

#endif
