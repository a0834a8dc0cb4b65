/*
 * The C++ state of one pxn iface: this process's presence on its home rail.
 * It owns the inner transport (Net), the registry entry through which
 * others find this process as the relay of its rail, the staging arena, the
 * relay engine and its thread, and the sender lanes into the relays of the
 * other rails of this node.
 *
 * Start-up order: inner iface, registry, arena (registered with the inner
 * md), wakeup, publication (READY), engine thread. Shutdown is the reverse:
 * CLOSING, thread stopped, in-flight relay work drained (bounded), entry
 * removed. Any failure before publication leaves nothing behind.
 *
 * Threading: the engine thread runs work()/may_sleep()/woke(); everything
 * else runs on the application's thread. They share only the Net (under
 * its lock) and the shared-memory ABI.
 */
#ifndef PXN_UCT_PXN_HUB_H_
#define PXN_UCT_PXN_HUB_H_

#include <ucs/pxn/engine.h>
#include "pxn_cuda.h"
#include "pxn_net.h"
#include "pxn_relay.h"
#include "pxn_sender.h"

#include <ucs/pxn/address.h>
#include <ucs/pxn/registry.h>
#include <ucs/pxn/registry_entry.h>
#include <ucs/pxn/wakeup.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>

namespace pxn {
namespace uct {

class Hub : public EngineClient {
public:
    /* Opens the hub of a pxn iface on device `dev_name` of the pxn md. */
    static ucs_status_t open(const Settings &settings, const InnerMd &md,
                             const std::string &dev_name,
                             std::unique_ptr<Hub> *hub);
    ~Hub() override;

    const Settings &settings() const { return settings_; }
    /* Largest put_short / put_bcopy: staged in the call itself. */
    size_t          max_short() const { return 1024; }
    size_t          max_bcopy() const
    {
        return std::min<uint64_t>(settings_.geometry.slot_size, 65536);
    }
    Net            &net() { return *net_; }
    uint64_t        node_hash() const { return node_hash_; }
    uint32_t        rail_hash() const { return rail_hash_; }
    const std::string &rail() const { return rail_; }

    const DeviceAddress &device_address() const { return dev_addr_; }
    const Bytes         &inner_iface_address() const { return iface_addr_; }

    /* True for a peer on another node and another rail for which a healthy
     * relay of this node exists. */
    bool is_reachable(const DeviceAddress &peer);

    /* The lane into this node's relay of `rail`, opened on first use and
     * replaced when its relay failed; the oldest relay of the rail first
     * (two relays of one rail: a misconfigured rail map, warned once).
     * UCS_ERR_UNREACHABLE: no healthy relay for that rail. */
    ucs_status_t lane_for(uint32_t rail, std::shared_ptr<SendLane> *lane);
    /* Lanes into every healthy relay of another rail (for ep addresses). */
    std::vector<std::shared_ptr<SendLane>> all_lanes();

    /* Application thread: reap, stage and publish on every lane. */
    unsigned progress();
    bool     idle() const;

    /* EngineClient (engine thread) */
    unsigned work() override;
    bool     may_sleep() override;
    void     woke() override;
    std::vector<int> wait_fds() override;
    void     thread_init() override;

    abi::ProcessCounters &counters() const
    {
        return *reinterpret_cast<abi::ProcessCounters*>(entry_->view().base +
                                                        abi::kCountersOffset);
    }

private:
    Hub() = default;
    ucs_status_t start(const InnerMd &md, const std::string &dev_name);
    ucs_status_t create_arena(const InnerMd &md);
    void         free_arena();
    ucs_status_t refresh_peers();
    void         warn_if_crowded(uint32_t rail);

    Settings                       settings_;
    std::string                    rail_;
    uint64_t                       node_hash_ = 0;
    uint32_t                       rail_hash_ = 0;
    DeviceAddress                  dev_addr_;
    Bytes                          iface_addr_;

    std::unique_ptr<Net>           net_;
    std::unique_ptr<Registry>      registry_;
    std::unique_ptr<RegistryEntry> entry_;
    SharedMapping                  arena_;        /* host arena */
    uint8_t                       *arena_base_ = nullptr;
    uint64_t                       cuda_arena_ = 0; /* CUdeviceptr; 0: host */
    int                            cuda_device_ = -1; /* -1: no CUDA used */
    uct_mem_h                      arena_memh_ = UCT_MEM_HANDLE_NULL;
    RelayWakeup                    wakeup_;
    std::unique_ptr<Relay>         relay_;
    Engine                         engine_;
    uint64_t                       next_heartbeat_ns_ = 0;

    /* sender side (application thread) */
    /* Eps share their lane; a failed lane leaves the map and lives on until
     * its last ep moved to a new one. */
    std::map<uint32_t, std::shared_ptr<SendLane>> lanes_;
    std::vector<PeerInfo>          peers_;
    uint64_t                       peers_time_ns_ = 0;
    std::set<uint32_t>             crowded_rails_; /* warned: >1 relay */
};

} // namespace uct
} // namespace pxn

#endif
