#include "pxn_sender.h"

#include "pxn_node.h"

#include <ucs/debug/log_def.h>

#include <algorithm>

namespace pxn {
namespace uct {

namespace {

constexpr uint64_t kPeersTtlNs = 100000000; /* discover() at most 10/s */

} // namespace

Sender::Sender(std::shared_ptr<Node> node) : node_(std::move(node))
{
}

Sender::~Sender() = default;

ucs_status_t Sender::create(std::shared_ptr<Node> node,
                            std::unique_ptr<Sender> *sender_p)
{
    std::unique_ptr<Sender> sender(new Sender(std::move(node)));
    ucs_status_t status = current_process(&sender->self_);
    if (status == UCS_OK) {
        status = random_epoch(&sender->self_.epoch);
    }
    if (status == UCS_OK) {
        *sender_p = std::move(sender);
    }
    return status;
}

void Sender::refresh_peers(bool force)
{
    const uint64_t now = monotonic_ns();
    if (!force && (peers_time_ns_ != 0) && (now - peers_time_ns_ < kPeersTtlNs)) {
        return;
    }
    peers_time_ns_ = now;
    node_->registry().discover(nullptr, &peers_);
}

bool Sender::relay_exists(uint32_t rail, const std::string &inner_tl)
{
    auto it = lanes_.find({rail, inner_tl});
    if ((it != lanes_.end()) && !it->second->failed()) {
        return true;
    }
    refresh_peers(false);
    return std::any_of(peers_.begin(), peers_.end(), [&](const PeerInfo &p) {
        return (pxn::rail_hash(p.rail) == rail) && (p.inner_tl == inner_tl);
    });
}

ucs_status_t Sender::lane_for(uint32_t rail, const std::string &inner_tl,
                              std::shared_ptr<SendLane> *lane_p)
{
    const Key key{rail, inner_tl};
    auto it = lanes_.find(key);
    if (it != lanes_.end()) {
        /* a relay that died while the lane was idle: a new lane (control
         * path: the /proc read is fine here) */
        if (it->second->check_relay_alive(true)) {
            *lane_p = it->second;
            return UCS_OK;
        }
        if (!it->second->spent()) {
            retired_.push_back(it->second); /* completions to deliver */
        }
        lanes_.erase(it); /* its endpoints keep it until they move */
    }

    refresh_peers(true);
    warn_if_crowded(rail, inner_tl);
    ucs_status_t status = UCS_ERR_UNREACHABLE;
    for (const PeerInfo &p : peers_) {
        if ((pxn::rail_hash(p.rail) != rail) || (p.inner_tl != inner_tl)) {
            continue;
        }
        std::unique_ptr<PeerMapping> mapping;
        status = node_->registry().map_peer(p, &mapping);
        if (status != UCS_OK) {
            continue;
        }
        try {
            *lane_p = std::make_shared<SendLane>(&node_->registry(),
                                                 std::move(mapping), self_,
                                                 node_->settings(), node_->gpu(),
                                                 node_->sender_counters(),
                                                 &lane_failures_);
        } catch (const std::bad_alloc &) {
            return UCS_ERR_NO_MEMORY;
        }
        lanes_.emplace(key, *lane_p);
        (*lane_p)->progress(); /* starts the claim */
        return UCS_OK;
    }
    return status;
}

/* Two relays of one rail on a node: a rail map that is wrong somewhere.
 * Senders use the oldest (discover() sorts so), which this says once. */
void Sender::warn_if_crowded(uint32_t rail, const std::string &inner_tl)
{
    std::string pids;
    const PeerInfo *chosen = nullptr;
    for (const PeerInfo &p : peers_) {
        if ((pxn::rail_hash(p.rail) == rail) && (p.inner_tl == inner_tl)) {
            chosen = (chosen == nullptr) ? &p : chosen;
            pids  += (pids.empty() ? "" : ", ") + std::to_string(p.identity.pid);
        }
    }
    if ((chosen != nullptr) && (pids.find(',') != std::string::npos) &&
        crowded_rails_.insert(rail).second) {
        ucs_warn("pxn: relays %s all serve rail %s on node %s: using the oldest, "
                 "pid %u (check UCX_PXN_RAIL_MAP)", pids.c_str(),
                 chosen->rail.c_str(), chosen->node_id.c_str(),
                 chosen->identity.pid);
    }
}

std::vector<std::shared_ptr<SendLane>> Sender::all_lanes(uint32_t own_rail,
                                                         const std::string &inner_tl)
{
    std::vector<std::shared_ptr<SendLane>> lanes;
    refresh_peers(false);
    const std::vector<PeerInfo> peers = peers_;
    for (const PeerInfo &p : peers) {
        const uint32_t rail = pxn::rail_hash(p.rail);
        std::shared_ptr<SendLane> lane;
        if ((rail != own_rail) && (p.inner_tl == inner_tl) &&
            (lane_for(rail, inner_tl, &lane) == UCS_OK) &&
            (std::find(lanes.begin(), lanes.end(), lane) == lanes.end())) {
            lanes.push_back(lane);
        }
    }
    return lanes;
}

unsigned Sender::progress()
{
    unsigned work = 0;
    for (auto &entry : lanes_) {
        work += entry.second->progress();
    }
    if (!retired_.empty()) {
        for (auto &lane : retired_) {
            work += lane->progress();
        }
        retired_.erase(std::remove_if(retired_.begin(), retired_.end(),
                                      [](const auto &l) { return l->spent(); }),
                       retired_.end());
    }
    return work;
}

bool Sender::idle() const
{
    return retired_.empty() &&
           std::all_of(lanes_.begin(), lanes_.end(),
                       [](const auto &entry) { return entry.second->idle(); });
}

} // namespace uct
} // namespace pxn
