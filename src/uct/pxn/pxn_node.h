/*
 * pxn in one process: everything the process's pxn ifaces share, for one
 * registry group. Created when the first iface opens, destroyed when the
 * last one closes.
 *
 * It owns:
 * - the registry (/dev/shm/ucx-pxn-<uid>-<group>/);
 * - the ports: one inner iface (Net) per device that an iface or a relay
 *   uses, shared by every iface of the process on that device;
 * - the relays (RelayService), one per home rail: the home device is
 *   UCX_PXN_HOME_DEVICE, else the NIC nearest to the process's GPU by PCIe
 *   topology, else (no GPU) the device of the iface (topology.h
 *   choose_home()). While the GPU is not known yet but matters (for the
 *   choice of NIC or for a GPU arena), the relay waits for it: it starts
 *   on the engine thread once the process registers GPU memory with pxn,
 *   makes a CUDA context current on a thread that progresses pxn, or when
 *   UCX_PXN_CUDA_DEVICE names it. Until then the process only sends;
 * - the engine thread: it drives every relay and every port (a tcp target
 *   must receive while its application is busy), and sleeps when there is
 *   nothing to do (engine.h);
 * - the senders' counters: one block per process, added to atomically by
 *   every lane and shown in the control file of the process's first relay.
 *
 * Failures: a relay that cannot start (no room in /dev/shm, GPU out of
 * memory, ...) is logged once; the process keeps sending through others.
 *
 * fork(): a child's copy of the Node is the parent's (inherited(), fork.h):
 * acquire() makes the child a Node of its own (a relay of its own), and
 * the copy is never torn down in the child (no join of the parent's
 * thread, no unlink of its registry entry, no close of its ports): its
 * owners leak it there.
 *
 * Threading: attach()/detach() and sender_for() from any thread (a mutex);
 * the engine thread holds the same mutex for each round. Never take the
 * mutex while holding a Net lock.
 */
#ifndef PXN_UCT_PXN_NODE_H_
#define PXN_UCT_PXN_NODE_H_

#include "pxn_am_port.h"
#include "pxn_net.h"
#include "pxn_relay_service.h"
#include "pxn_sender.h"

#include <ucs/pxn/engine.h>
#include <ucs/pxn/fork.h>
#include <ucs/pxn/registry.h>
#include <ucs/pxn/settings.h>
#include <ucs/pxn/topology.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace pxn {
namespace uct {

class Node final : public EngineClient, public std::enable_shared_from_this<Node> {
public:
    /* The node of this process for settings.group, created on first use
     * (with these settings; later callers share it). */
    static ucs_status_t acquire(const Settings &settings, std::shared_ptr<Node> *node);
    ~Node() override;
    Node(const Node&) = delete;
    Node &operator=(const Node&) = delete;

    const Settings &settings() const { return settings_; }
    /* A copy made by fork(): the parent's (fork.h). */
    bool            inherited() const { return born_.inherited(); }
    Registry       &registry() const { return *registry_; }
    uint64_t        node_hash() const { return node_hash_; }

    /* An iface on `device` of inner md `md` joins: its port, and the relay
     * of its home rail (started now, or once the GPU is known).
     * *home_rail: the rail of that home ("" while it waits for the GPU);
     * *is_home: `device` is the home device (or the home is not known yet),
     * so the iface is a target of pxn. */
    ucs_status_t attach(const InnerMd &md, const std::string &device,
                        std::shared_ptr<Net> *port, std::string *home_rail,
                        bool *is_home);
    /* The home rail chosen for an iface on `device`; "" while deferred. */
    std::string  home_rail(const std::string &device);
    /* Active messages for an iface on `port` go into `inbox` (AmPort):
     * *cookie names it in the iface's address, *am is the port's AmPort (it
     * lives as long as the port). UCS_ERR_UNSUPPORTED where the port
     * carries no AM. */
    ucs_status_t attach_inbox(Net *port, AmInbox *inbox, uint32_t *cookie,
                              AmPort **am);
    void         detach_inbox(Net *port, uint32_t cookie);
    /* An inbox drained room its sources wait for: the engine grants it
     * (ends its sleep). Any thread. */
    void         wake_engine() { engine_.wake(); }
    /* The sender of UCT worker `worker`, shared by its ifaces. */
    ucs_status_t sender_for(const void *worker, std::shared_ptr<Sender> *sender);

    /* The process's GPU: -1 until known. */
    int  gpu() const { return gpu_.load(std::memory_order_acquire); }
    /* This process uses GPU `gpu` (a registration, a current context): the
     * first GPU noticed is the process's; a waiting relay starts. */
    void notice_gpu(int gpu);
    /* notice_gpu() on every node of the process that waits for its GPU,
     * when `ptr` is GPU memory (a registration). */
    static void notice_process_gpu(const void *ptr);

    /* Counters of this process's relay of `rail`, or zeros. */
    const abi::ProcessCounters &counters(const std::string &rail) const;
    abi::SenderCounters *sender_counters();

    /* EngineClient (engine thread) */
    unsigned work() override;
    Nap      may_sleep() override;
    void     woke() override;
    std::vector<int> wait_fds() override;
    void     thread_init() override;

private:
    struct Port {
        std::string tl;
        std::string device;
        Net        *net;
        Bytes       dev_addr;
        Bytes       iface_addr;
        AmPort     *am; /* where the port carries AM; owned by the port's
                           deleter, which ends it before the Net */
        uint64_t    am_refused_folded; /* am->refused() already in the
                                          process's am_refused */
        bool        left_to_app = false; /* at the last may_sleep() */
    };

    explicit Node(const Settings &settings) : settings_(settings) {}
    /* Destructor of an inherited copy: leaks what is the parent's. */
    void         abandon();
    ucs_status_t start();
    /* Caller holds mutex_. */
    ucs_status_t port_for(const InnerMd &md, const std::string &device,
                          std::shared_ptr<Net> *port);
    void         drop_port(Net *net);
    const InnerMd *md_of(const std::string &device);
    HomeChoice   choose(const std::string &device) const;
    /* Ports the caller must drop once it released mutex_: closing a port
     * takes mutex_ (drop_port). */
    using Retired = std::vector<std::shared_ptr<Net>>;
    /* Caller holds mutex_. UCS_INPROGRESS: it waits for the process's GPU.
     * A port opened for a relay that then failed goes to *retired. */
    ucs_status_t start_relay(const std::string &device, const InnerMd *md,
                             Retired *retired);
    void         start_deferred(Retired *retired);
    void         fold_counters();
    /* Engine thread: the application receives on `port`, which the
     * engine then leaves to it, unless the engine has business there
     * (pxn_node_engine.cc). */
    bool         left_to_app(Port &port) const;
    bool         engine_needs(const Port &port) const;
    /* Caller holds mutex_. What `port`'s AmPort refused since the last
     * call, into the process's am_refused. */
    void         fold_refused(Port &port);
    /* Caller holds mutex_. The process's sender block (sender_counters()). */
    abi::SenderCounters *sender_block();
    /* A route to (dev, iface) would reach this process (relay check).
     * Engine thread, mutex_ held. */
    bool         is_local(const Bytes &dev, const Bytes &iface) const;

    ForkBorn                                born_;
    Settings                                settings_;
    std::unique_ptr<Registry>               registry_;
    uint64_t                                node_hash_ = 0;
    std::vector<std::string>                candidates_; /* inner devices */
    std::atomic<int>                        gpu_{-1};

    mutable std::mutex                      mutex_;
    std::vector<Port>                       ports_;
    std::map<std::string, std::weak_ptr<Net>> port_refs_; /* by tl/device */
    std::vector<std::unique_ptr<InnerMd>>   mds_;         /* for relays */
    std::vector<std::unique_ptr<RelayService>> relays_;
    std::map<std::string, std::string>      homes_;       /* device -> rail */
    std::vector<std::string>                deferred_;    /* iface devices */
    std::atomic<bool>                       deferred_ready_{false};
    std::vector<std::string>                failed_rails_; /* warned */
    std::map<const void*, std::weak_ptr<Sender>> senders_;

    abi::SenderCounters                     sender_totals_{};
    std::atomic<bool>                       folding_{false};
    abi::ProcessCounters                    zeros_{};
    Engine                                  engine_;
    int                                     engine_gpu_ = -1;
    std::vector<int>                        engine_cpus_; /* inherited */
};

} // namespace uct
} // namespace pxn

#endif
