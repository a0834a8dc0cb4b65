#include "peer_mapping.h"

#include <ucs/debug/log_def.h>

#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pxn {

PeerMapping::PeerMapping(Registry *registry, const PeerInfo &info,
                         SharedMapping mapping, const Geometry &geometry) :
    registry_(registry), info_(info), mapping_(std::move(mapping))
{
    view_.base     = mapping_.data();
    view_.geometry = geometry;
}

PeerMapping::~PeerMapping()
{
    if (held_.empty()) {
        return;
    }
    Registry::Lock lock(registry_);
    if (lock.acquire() != UCS_OK) {
        return; /* the lanes stay claimed until this process exits */
    }
    for (const Held &held : held_) {
        release_lane_locked(view_, held.sender, held.index);
    }
}

uint64_t PeerMapping::heartbeat_age_ns(uint64_t now) const
{
    const uint64_t heartbeat = abi::load_acquire(header().heartbeat_ns);
    return (now > heartbeat) ? (now - heartbeat) : 0;
}

bool PeerMapping::is_healthy(uint64_t now) const
{
    return (abi::load_acquire(header().state) == abi::kProcessReady) &&
           (heartbeat_age_ns(now) <= registry_->heartbeat_timeout_ns());
}

ucs_status_t PeerMapping::claim_lane(const ProcessIdentity &sender,
                                     LaneClaim *claim, uint64_t initial_seq,
                                     Registry::LockWait wait)
{
    Registry::Lock lock(registry_);
    ucs_status_t   status = lock.acquire(wait);
    if (status != UCS_OK) {
        return status;
    }
    if (!is_alive(info_.identity.pid, info_.identity.start_time)) {
        ucs_debug("pxn: relay %s is dead: no lane claimed", info_.name.c_str());
        return UCS_ERR_UNREACHABLE;
    }
    status = claim_lane_locked(view_, sender, initial_seq, claim);
    if (status != UCS_OK) {
        return status;
    }
    std::lock_guard<std::mutex> guard(held_mutex_);
    for (const Held &held : held_) {
        if ((held.index == claim->index) && (held.sender == sender)) {
            return UCS_OK;
        }
    }
    held_.push_back({sender, claim->index});
    return UCS_OK;
}

ucs_status_t PeerMapping::renew_lane(const ProcessIdentity &sender, uint32_t index,
                                     LaneClaim *claim, uint64_t initial_seq,
                                     bool keep_routes, Registry::LockWait wait)
{
    Registry::Lock     lock(registry_);
    const ucs_status_t status = lock.acquire(wait);
    if (status != UCS_OK) {
        return status;
    }
    return renew_lane_locked(view_, sender, index, initial_seq, keep_routes,
                             claim);
}

ucs_status_t PeerMapping::release_lane(const ProcessIdentity &sender,
                                       uint32_t index, Registry::LockWait wait)
{
    Registry::Lock lock(registry_);
    ucs_status_t   status = lock.acquire(wait);
    if (status != UCS_OK) {
        return status;
    }
    status = release_lane_locked(view_, sender, index);
    std::lock_guard<std::mutex> guard(held_mutex_);
    for (auto it = held_.begin(); it != held_.end(); ++it) {
        if ((it->index == index) && (it->sender == sender)) {
            held_.erase(it);
            break;
        }
    }
    return status;
}

ucs_status_t PeerMapping::open_host_arena(UniqueFd *fd) const
{
    const std::string name = entry_file_name(info_.identity.pid,
                                             info_.identity.epoch, kSuffixArena);
    /* The handle is only compared, never used as a path. */
    if ((info_.arena_kind != abi::kArenaHostShm) ||
        (memcmp(info_.arena_handle.data(), name.c_str(), name.size() + 1) != 0)) {
        ucs_warn("pxn: relay %s does not publish a host arena named %s",
                 info_.name.c_str(), name.c_str());
        return UCS_ERR_UNSUPPORTED;
    }
    UniqueFd file(openat(registry_->dir_fd(), name.c_str(),
                         O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (!file.valid()) {
        ucs_debug("pxn: cannot open %s/%s: %m", registry_->path().c_str(),
                  name.c_str());
        return UCS_ERR_UNREACHABLE;
    }
    struct stat st;
    if ((fstat(file.get(), &st) != 0) || !S_ISREG(st.st_mode) ||
        (st.st_uid != registry_->uid()) ||
        (uint64_t(st.st_size) != view_.geometry.arena_size())) {
        ucs_warn("pxn: refusing %s/%s: not a regular file of uid %u with %" PRIu64
                 " bytes", registry_->path().c_str(), name.c_str(),
                 unsigned(registry_->uid()), view_.geometry.arena_size());
        return UCS_ERR_REJECTED;
    }
    *fd = std::move(file);
    return UCS_OK;
}

ucs_status_t PeerMapping::open_wakeup(SenderWakeup *wakeup) const
{
    return wakeup->open(registry_->dir_fd(),
                        entry_file_name(info_.identity.pid, info_.identity.epoch,
                                        kSuffixWake),
                        &header().relay_sleeping);
}

} // namespace pxn
