/*
 * The C++ state of one pxn iface: the process's Node (registry, relays,
 * engine thread), the iface's port (the inner iface on its device, shared
 * with the process's other ifaces there), and the Sender of its UCT worker
 * (lanes into the relays of the other rails of the node).
 *
 * Addresses: the device address names the node, the rail of the iface's
 * own device (where it receives), whether that device is the process's
 * home device, and the port's inner device address. A peer iface is
 * reachable when it is on another node, on its process's home device (a
 * process receives on the NIC near its GPU; its other ifaces only send),
 * on a rail other than this iface's home rail, and this node has a healthy
 * relay of the peer's rail.
 *
 * Threading: the worker's thread (UCT's model); the Node is thread-safe.
 * In a forked child an inherited Hub does nothing: progress() does no work
 * and its endpoints' operations fail (UCS_ERR_UNREACHABLE).
 */
#ifndef PXN_UCT_PXN_HUB_H_
#define PXN_UCT_PXN_HUB_H_

#include "pxn_node.h"

#include <ucs/pxn/address.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

namespace pxn {
namespace uct {

class Hub {
public:
    /* Spare relay eps each lane keeps in stock (ep-to-ep model). */
    static constexpr unsigned kSpareRoutes = 4;

    /* The hub of a pxn iface on device `dev_name` of the pxn md whose inner
     * md is `md`, in UCT worker `worker`. */
    static ucs_status_t open(const Settings &settings, const InnerMd &md,
                             const std::string &dev_name, const void *worker,
                             std::unique_ptr<Hub> *hub);
    ~Hub();
    Hub(const Hub&) = delete;
    Hub &operator=(const Hub&) = delete;

    const Settings &settings() const { return node_->settings(); }
    /* Made by fork() in this process's parent: the child neither uses nor
     * destroys it (its owner leaks it, pxn_node.h). */
    bool            inherited() const { return node_->inherited(); }
    /* Largest put_short / put_bcopy: staged in the call itself. */
    size_t          max_short() const { return 1024; }
    size_t          max_bcopy() const
    {
        return std::min<uint64_t>(settings().geometry.slot_size, 65536);
    }
    /* Largest zcopy: pieces of it go through the slots one after another. */
    size_t          max_zcopy() const { return size_t(1) << 30; }
    /* The iface's port: the direct path and passive eps use it. */
    Net            &net() const { return *port_; }
    Node           &node() const { return *node_; }
    uint64_t        node_hash() const { return node_->node_hash(); }
    const std::string &rail() const { return rail_; }
    uint32_t        rail_hash() const { return dev_addr_.rail_hash; }
    /* The rail this iface sends from (its home): peers on it are not ours
     * to relay. The iface's own rail while the home waits for the GPU. */
    uint32_t        home_rail_hash();

    /* Active messages: the longest message this iface sends through a
     * relay (0: none), its cookie in its iface address (0: it receives
     * none: not a target, or no AM on its port) and its received messages,
     * handed to deliver(const AmInbox::Message&) in arrival order. */
    size_t   max_am() const { return am_max_; }
    uint32_t am_cookie() const { return am_cookie_; }
    template<class Deliver> unsigned drain_am(unsigned max, Deliver &&deliver)
    {
        if (inbox_ == nullptr) {
            return 0;
        }
        if (settings().am_poll && inbox_->announced()) {
            receive_here(); /* an iface no relay sends to makes no call */
        }
        const unsigned count = inbox_->drain(max, std::forward<Deliver>(deliver));
        if (count != 0) { /* one add per batch, as pieces on the sender */
            __atomic_fetch_add(&sender_counters_->am_received, count,
                               __ATOMIC_RELAXED);
        }
        if (inbox_->take_wake()) { /* the room again to the sources */
            if (settings().am_poll) {
                grant_here();
            } else {
                node_->wake_engine(); /* no system call of ours here */
            }
        }
        return count;
    }
    const DeviceAddress &device_address() const { return dev_addr_; }
    const Bytes         &inner_iface_address() const { return iface_addr_; }

    /* A peer pxn may carry traffic to: on its process's home device, on
     * another node, on another rail than our home (so never this process
     * itself). No syscall. */
    bool is_target(const DeviceAddress &peer)
    {
        return peer.home && (peer.node_hash != node_hash()) &&
               (peer.rail_hash != home_rail_hash());
    }
    /* is_target() and a healthy relay of the peer's rail on this node
     * (registry, cached 100 ms). */
    bool is_reachable(const DeviceAddress &peer);
    /* ep-to-ep model: open the lanes into every relay of another rail and
     * keep `spares` unconnected relay eps in stock on each, so that an
     * endpoint created later packs its address without waiting. */
    void stock_spares(unsigned spares);

    /* Sender lanes of the peer's rail (UCS_ERR_UNREACHABLE: no relay). */
    ucs_status_t lane_for(uint32_t rail, std::shared_ptr<SendLane> *lane)
    {
        return sender_->lane_for(rail, port_->tl_name(), lane);
    }
    std::vector<std::shared_ptr<SendLane>> all_lanes()
    {
        return sender_->all_lanes(home_rail_hash(), port_->tl_name());
    }

    unsigned progress();
    bool     idle() const { return sender_->idle(); }
    uint64_t lane_failures() const { return sender_->lane_failures(); }

    abi::SenderCounters        &sender_counters() const { return *sender_counters_; }
    /* The relay counters of this iface's home rail (zeros without one). */
    const abi::ProcessCounters &relay_counters() const
    {
        return node_->counters(home_rail_);
    }

private:
    Hub() = default;

    ucs_status_t open_inbox();
    /* Progress of the port on this thread, unless another thread (the
     * engine) progresses it now: frames for the inbox arrive without an
     * engine thread (UCX_PXN_AM_POLL). */
    void         receive_here();
    /* The room the inbox's drain gave back, granted from this thread
     * (AmPort::give_grants), or by the engine, woken, when the port is
     * busy or a grant cannot go now. */
    void         grant_here();

    std::shared_ptr<Node>   node_; /* first: destroyed last */
    std::shared_ptr<Net>    port_;
    std::shared_ptr<Sender> sender_;
    std::string             rail_;
    std::string             home_rail_;
    uint32_t                home_rail_hash_ = 0;
    std::string             device_;
    DeviceAddress           dev_addr_;
    Bytes                   iface_addr_;
    abi::SenderCounters    *sender_counters_ = nullptr;
    uint64_t                next_gpu_check_ns_ = 0;
    size_t                  am_max_ = 0;
    uint32_t                am_cookie_ = 0;
    std::unique_ptr<AmInbox> inbox_; /* after node_: detached first */
    AmPort                 *am_port_ = nullptr; /* inbox_'s, lives with port_ */
};

} // namespace uct
} // namespace pxn

#endif
