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
    status = create_arena(md);
    if (status != UCS_OK) {
        return status;
    }
    status = entry_->create_wakeup(&wakeup_);
    if (status == UCS_OK) {
        status = Relay::create(net_.get(), entry_.get(), arena_base_,
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
             "to %u senders through a %s arena", home.c_str(), rail_.c_str(),
             device->tl_name.c_str(), registry_->node_id().c_str(),
             settings_.geometry.lanes,
             (cuda_arena_ != 0) ? "GPU" : "host");
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
    free_arena();
    entry_.reset();
}

/* The staging arena: GPU memory exported by CUDA IPC, or a shared-memory
 * file; registered with the inner md either way. */
ucs_status_t Hub::create_arena(const InnerMd &md)
{
    const uint64_t size = settings_.geometry.arena_size();
    bool cuda = false;
#ifdef PXN_HAVE_CUDA
    const bool inner_cuda = md.attr().cap.reg_mem_types &
                            UCS_BIT(UCS_MEMORY_TYPE_CUDA);
    if (settings_.arena == ArenaChoice::kCuda) {
        if (!cuda_available() || !inner_cuda) {
            ucs_error("pxn: UCX_PXN_ARENA=cuda but %s",
                      !cuda_available() ? "no GPU is usable" :
                      "the inner md cannot register GPU memory");
            return UCS_ERR_UNSUPPORTED;
        }
        cuda = true;
    } else if (settings_.arena == ArenaChoice::kAuto) {
        cuda = inner_cuda && cuda_available();
        if (inner_cuda && !cuda) {
            static bool warned = false;
            if (!warned) {
                warned = true;
                ucs_warn("pxn: inner %s registers GPU memory but no GPU is "
                         "usable here: staging in host memory",
                         net_->tl_name().c_str());
            }
        }
    }
    if (cuda || (net_->tl_name() == "cuda_ipc")) {
        const CudaDriver *cu = CudaDriver::get();
        if (cu == nullptr) {
            return UCS_ERR_NO_DEVICE;
        }
        ucs_status_t status =
                (settings_.cuda_device >= 0) ?
                cu->use_device(settings_.cuda_device) :
                cu->ensure_context(0, &cuda_device_);
        if (status != UCS_OK) {
            return status;
        }
        if (settings_.cuda_device >= 0) {
            cuda_device_ = settings_.cuda_device;
        }
    }
    if (cuda) {
        const CudaDriver *cu = CudaDriver::get();
        CUdeviceptr ptr;
        CUresult result = cu->cuMemAlloc(&ptr, size);
        if (result != CUDA_SUCCESS) {
            ucs_error("pxn: cannot allocate the %lu-byte GPU arena on GPU %d: %s",
                      size, cuda_device_, cu->error(result));
            return UCS_ERR_NO_MEMORY;
        }
        cuda_arena_ = ptr;
        CUipcMemHandle handle;
        result = cu->cuIpcGetMemHandle(&handle, ptr);
        if (result != CUDA_SUCCESS) {
            ucs_error("pxn: cannot export the GPU arena: %s", cu->error(result));
            return UCS_ERR_IO_ERROR;
        }
        ucs_status_t status = entry_->set_arena(abi::kArenaCudaIpc, &handle,
                                                sizeof(handle));
        if (status != UCS_OK) {
            return status;
        }
        arena_base_ = reinterpret_cast<uint8_t*>(ptr);
    }
#endif
    if (!cuda) {
        UniqueFd fd;
        ucs_status_t status = entry_->create_host_arena(&fd);
        if (status == UCS_OK) {
            status = arena_.map(fd.get(), size, "staging arena");
        }
        if (status != UCS_OK) {
            return status;
        }
        arena_base_ = arena_.data();
    }
    ucs_status_t status = uct_md_mem_reg(net_->md(), arena_base_, size,
                                         UCT_MD_MEM_ACCESS_ALL, &arena_memh_);
    if (status != UCS_OK) {
        ucs_error("pxn: failed to register the %lu-byte %s arena with inner md "
                  "%s: %s", size, cuda ? "GPU" : "host",
                  md.info().md_name.c_str(), ucs_status_string(status));
        arena_memh_ = UCT_MEM_HANDLE_NULL;
    }
    return status;
}

void Hub::free_arena()
{
    if ((arena_memh_ != UCT_MEM_HANDLE_NULL) && (net_ != nullptr)) {
        uct_md_mem_dereg(net_->md(), arena_memh_);
        arena_memh_ = UCT_MEM_HANDLE_NULL;
    }
#ifdef PXN_HAVE_CUDA
    if (cuda_arena_ != 0) {
        CudaDriver::get()->cuMemFree(cuda_arena_);
        cuda_arena_ = 0;
    }
#endif
    arena_.reset();
}

void Hub::thread_init()
{
#ifdef PXN_HAVE_CUDA
    /* cuda_ipc operations and the GPU arena need a context on this thread. */
    if (cuda_device_ >= 0) {
        CudaDriver::get()->use_device(cuda_device_);
    }
#endif
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
    warn_if_crowded(rail);
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

/* Two relays of one rail on a node: a rail map that is wrong somewhere.
 * Senders use the oldest (discover() sorts so), which this says once. */
void Hub::warn_if_crowded(uint32_t rail)
{
    std::string pids;
    const PeerInfo *chosen = nullptr;
    for (const PeerInfo &p : peers_) {
        if ((pxn::rail_hash(p.rail) == rail) && (p.inner_tl == net_->tl_name())) {
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
