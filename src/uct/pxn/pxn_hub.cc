#include "pxn_hub.h"

#include <ucs/debug/log_def.h>
#include <ucs/pxn/rail_map.h>

#include <algorithm>

namespace pxn {
namespace uct {

namespace {

constexpr uint64_t kPeersTtlNs      = 100000000; /* discover() at most 10/s */
constexpr uint64_t kDrainTimeoutNs  = 2000000000;

} // namespace

ucs_status_t Hub::open(const Settings &settings, const InnerMd &md,
                       const std::string &dev_name, std::unique_ptr<Hub> *hub_p)
{
    std::unique_ptr<Hub> hub(new Hub());
    hub->settings_ = settings;
    ucs_status_t status = hub->start(md, dev_name);
    if (status == UCS_OK) {
        *hub_p = std::move(hub);
    }
    return status;
}

ucs_status_t Hub::start(const InnerMd &md, const std::string &dev_name)
{
    const std::string home = settings_.home_device.empty() ? dev_name :
                                                             settings_.home_device;
    const InnerDevice *device = md.device(home);
    if (device == nullptr) {
        ucs_error("pxn: UCX_PXN_HOME_DEVICE=%s is not a device of inner md %s",
                  home.c_str(), md.info().md_name.c_str());
        return UCS_ERR_NO_DEVICE;
    }
    RailMap map;
    std::string error;
    RailMap::parse(settings_.rail_map, &map, &error); /* validated by the md */
    rail_      = map.rail_of(home);
    rail_hash_ = pxn::rail_hash(rail_);

    const bool prefer_ep = (settings_.connect_model == ConnectModel::kEp);
    ucs_status_t status  = Net::open(md, device->tl_name, home, prefer_ep, &net_);
    if (status != UCS_OK) {
        return status;
    }
    if ((settings_.connect_model == ConnectModel::kIface) &&
        (net_->mode() != Net::ConnectMode::kIface)) {
        ucs_error("pxn: UCX_PXN_NET_CONNECT=iface but inner %s cannot connect "
                  "to an iface", device->tl_name.c_str());
        return UCS_ERR_UNSUPPORTED;
    }

    status = Registry::open(settings_, &registry_);
    if (status != UCS_OK) {
        return status;
    }
    node_hash_ = name_hash(registry_->node_id());
    dev_addr_  = {node_hash_, rail_hash_, net_->device_address()};
    iface_addr_ = net_->iface_address();
    if ((dev_addr_.packed_size() == 0) ||
        (iface_address_size(iface_addr_.size()) == 0)) {
        ucs_error("pxn: inner %s addresses of %zu/%zu bytes do not fit UCX's "
                  "address limits", device->tl_name.c_str(),
                  dev_addr_.inner.size(), iface_addr_.size());
        return UCS_ERR_UNSUPPORTED;
    }

    status = registry_->create_entry({rail_, home, device->tl_name}, &entry_);
    if (status != UCS_OK) {
        return status;
    }
    UniqueFd fd;
    status = entry_->create_host_arena(&fd);
    if (status == UCS_OK) {
        status = arena_.map(fd.get(), settings_.geometry.arena_size(),
                            "staging arena");
    }
    if (status != UCS_OK) {
        return status;
    }
    status = uct_md_mem_reg(net_->md(), arena_.data(), arena_.length(),
                            UCT_MD_MEM_ACCESS_ALL, &arena_memh_);
    if (status != UCS_OK) {
        ucs_error("pxn: failed to register the %zu-byte staging arena with "
                  "inner md %s: %s", arena_.length(), md.info().md_name.c_str(),
                  ucs_status_string(status));
        return status;
    }
    status = entry_->create_wakeup(&wakeup_);
    if (status == UCS_OK) {
        status = Relay::create(net_.get(), entry_.get(), arena_.data(),
                               arena_memh_, settings_, &relay_);
    }
    if (status == UCS_OK) {
        status = entry_->publish();
    }
    if (status == UCS_OK) {
        status = engine_.start(this, Engine::Options());
    }
    if (status != UCS_OK) {
        return status;
    }
    ucs_info("pxn: active on %s (rail %s, inner %s, node %s), relaying for up "
             "to %u senders", home.c_str(), rail_.c_str(),
             device->tl_name.c_str(), registry_->node_id().c_str(),
             settings_.geometry.lanes);
    return UCS_OK;
}

Hub::~Hub()
{
    if (entry_ != nullptr) {
        entry_->begin_close();
    }
    lanes_.clear();
    engine_.stop();
    if (relay_ != nullptr) {
        /* In-flight inner operations reference the arena: let them end. */
        const uint64_t deadline = monotonic_ns() + kDrainTimeoutNs;
        std::lock_guard<std::mutex> guard(net_->lock());
        while ((relay_->inflight() != 0) && (monotonic_ns() < deadline)) {
            net_->progress();
        }
        relay_.reset();
    }
    if (arena_memh_ != UCT_MEM_HANDLE_NULL) {
        uct_md_mem_dereg(net_->md(), arena_memh_);
    }
    arena_.reset();
    entry_.reset();
}

unsigned Hub::work()
{
    unsigned work;
    {
        std::lock_guard<std::mutex> guard(net_->lock());
        work = net_->progress() + relay_->progress();
    }
    const uint64_t now = monotonic_ns();
    if (now >= next_heartbeat_ns_) {
        entry_->heartbeat();
        next_heartbeat_ns_ = now + registry_->heartbeat_timeout_ns() / 10;
    }
    return work;
}

bool Hub::may_sleep()
{
    std::lock_guard<std::mutex> guard(net_->lock());
    if ((relay_->inflight() != 0) && (net_->event_fd() < 0)) {
        return false; /* completions need polling */
    }
    if ((net_->event_fd() >= 0) && (net_->arm() != UCS_OK)) {
        return false; /* events pending */
    }
    wakeup_.prepare_sleep();
    if (relay_->has_work()) {
        wakeup_.cancel_sleep();
        return false;
    }
    return true;
}

void Hub::woke()
{
    wakeup_.cancel_sleep();
    wakeup_.drain();
}

std::vector<int> Hub::wait_fds()
{
    std::vector<int> fds{wakeup_.fd()};
    if (net_->event_fd() >= 0) {
        fds.push_back(net_->event_fd());
    }
    return fds;
}

ucs_status_t Hub::refresh_peers()
{
    const uint64_t now = monotonic_ns();
    if ((peers_time_ns_ != 0) && (now - peers_time_ns_ < kPeersTtlNs)) {
        return UCS_OK;
    }
    peers_time_ns_ = now;
    return registry_->discover(&entry_->identity(), &peers_);
}

bool Hub::is_reachable(const DeviceAddress &peer)
{
    if ((peer.node_hash == node_hash_) || (peer.rail_hash == rail_hash_)) {
        return false;
    }
    auto it = lanes_.find(peer.rail_hash);
    if ((it != lanes_.end()) && it->second->usable()) {
        return true;
    }
    refresh_peers();
    for (const PeerInfo &p : peers_) {
        if (pxn::rail_hash(p.rail) == peer.rail_hash) {
            return true;
        }
    }
    return false;
}

ucs_status_t Hub::lane_for(uint32_t rail, std::shared_ptr<SendLane> *lane_p)
{
    auto it = lanes_.find(rail);
    if (it != lanes_.end()) {
        if (it->second->usable()) {
            *lane_p = it->second;
            return UCS_OK;
        }
        /* Its relay failed: end what waits on it, look for a new one. */
        it->second->fail_all(UCS_ERR_ENDPOINT_TIMEOUT);
        lanes_.erase(it);
    }

    peers_time_ns_ = 0;
    refresh_peers();
    ucs_status_t status = UCS_ERR_UNREACHABLE;
    for (const PeerInfo &p : peers_) {
        if ((pxn::rail_hash(p.rail) != rail) || (p.inner_tl != net_->tl_name())) {
            continue;
        }
        std::unique_ptr<SendLane> lane;
        status = SendLane::open(registry_.get(), p, entry_->identity(),
                                settings_, &counters().sender, &lane);
        if (status == UCS_OK) {
            *lane_p = std::shared_ptr<SendLane>(std::move(lane));
            lanes_.emplace(rail, *lane_p);
            return UCS_OK;
        }
    }
    return status;
}

std::vector<std::shared_ptr<SendLane>> Hub::all_lanes()
{
    std::vector<std::shared_ptr<SendLane>> lanes;
    refresh_peers();
    for (const PeerInfo &p : peers_) {
        const uint32_t rail = pxn::rail_hash(p.rail);
        std::shared_ptr<SendLane> lane;
        if ((rail != rail_hash_) && (lane_for(rail, &lane) == UCS_OK) &&
            (std::find(lanes.begin(), lanes.end(), lane) == lanes.end())) {
            lanes.push_back(lane);
        }
    }
    return lanes;
}

unsigned Hub::progress()
{
    unsigned work = 0;
    for (auto &entry : lanes_) {
        work += entry.second->progress();
    }
    return work;
}

bool Hub::idle() const
{
    for (const auto &entry : lanes_) {
        if (!entry.second->idle()) {
            return false;
        }
    }
    return true;
}

} // namespace uct
} // namespace pxn
