#include "registry.h"

#include "control_file.h"
#include "exit_cleanup.h"
#include "lane_claim.h"
#include "peer_mapping.h"
#include "registry_entry.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <csignal>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <map>
#include <sys/file.h>
#include <tuple>
#include <sys/stat.h>
#include <unistd.h>

namespace pxn {

namespace {

bool geometry_is_sane(const Geometry &g)
{
    return (g.lanes >= 1) && (g.lanes <= kMaxLanes) && (g.slots >= 1) &&
           (g.slots <= kMaxSlots) && (g.max_plan >= 1) && (g.max_plan <= kMaxPlan) &&
           (g.slot_size >= 1);
}

} // namespace

Registry::Lock::Lock(Registry *registry) :
    registry_(registry), guard_(registry->lock_mutex_, std::defer_lock)
{
}

Registry::Lock::~Lock()
{
    if (locked_) {
        flock(registry_->lock_fd_.get(), LOCK_UN);
    }
}

ucs_status_t Registry::Lock::acquire(LockWait wait)
{
    if (wait == LockWait::kTry) {
        if (!guard_.try_lock()) {
            return UCS_ERR_BUSY;
        }
    } else {
        guard_.lock();
    }
    /* Non-blocking attempts with a growing pause: a peer stopped (SIGSTOP,
     * debugger) while holding the lock must not hang this process. */
    const uint64_t deadline = monotonic_ns() + uint64_t(kLockTimeoutSec * 1e9);
    long           pause_ns = 20000;
    for (;;) {
        if (flock(registry_->lock_fd_.get(), LOCK_EX | LOCK_NB) == 0) {
            locked_ = true;
            return UCS_OK;
        }
        if ((errno != EWOULDBLOCK) && (errno != EINTR)) {
            ucs_error("pxn: flock of %s/%s failed: %m", registry_->path_.c_str(),
                      kLockName);
            return UCS_ERR_IO_ERROR;
        }
        if ((wait == LockWait::kTry) && (errno == EWOULDBLOCK)) {
            return UCS_ERR_BUSY;
        }
        if (monotonic_ns() > deadline) {
            ucs_warn("pxn: %s/%s is held by another process for more than %.0f "
                     "seconds", registry_->path_.c_str(), kLockName,
                     kLockTimeoutSec);
            return UCS_ERR_TIMED_OUT;
        }
        const struct timespec pause = {0, pause_ns};
        nanosleep(&pause, nullptr);
        pause_ns = std::min(pause_ns * 2, 2000000l);
    }
}

Registry::~Registry() = default;

ucs_status_t Registry::open(const Settings &settings, const std::string &base_dir,
                            std::unique_ptr<Registry> *registry,
                            CleanupStats *cleaned)
{
    if (!is_valid_group_name(settings.group)) {
        ucs_warn("pxn: UCX_PXN_GROUP='%s' is not a valid group name (1-64 "
                 "characters of [A-Za-z0-9_.-], not '.' or '..')",
                 settings.group.c_str());
        return UCS_ERR_INVALID_PARAM;
    }
    if (!geometry_is_sane(settings.geometry)) {
        ucs_error("pxn: invalid registry geometry lanes=%" PRIu32 " slots=%" PRIu32
                  " max_plan=%" PRIu32, settings.geometry.lanes,
                  settings.geometry.slots, settings.geometry.max_plan);
        return UCS_ERR_INVALID_PARAM;
    }
    if (settings.node_id.size() >= abi::kNameMax) {
        ucs_error("pxn: node id '%s' is longer than %zu characters",
                  settings.node_id.c_str(), abi::kNameMax - 1);
        return UCS_ERR_INVALID_PARAM;
    }

    std::unique_ptr<Registry> r(new Registry());
    r->geometry_             = settings.geometry;
    r->heartbeat_timeout_ns_ = uint64_t(settings.heartbeat_timeout * 1e9);
    r->uid_                  = geteuid();
    ucs_status_t status = node_identity(settings.node_id, &r->node_id_);
    if (status != UCS_OK) {
        return status;
    }
    if (r->node_id_.size() >= abi::kNameMax) {
        r->node_id_.resize(abi::kNameMax - 1);
    }

    const std::string name = "ucx-pxn-" + std::to_string(r->uid_) + "-" +
                             settings.group;
    /* Each retry follows the removal of the directory by its last user
     * while this process opened it: a few at most, unless directories are
     * created and removed in a tight loop. */
    status = UCS_ERR_NO_ELEM;
    for (int attempt = 0; (attempt < 100) && (status == UCS_ERR_NO_ELEM);
         ++attempt) {
        r->lock_fd_.reset();
        r->dir_fd_.reset();
        status = r->open_directory(base_dir, name);
        if (status == UCS_OK) {
            status = r->open_lock_file();
        }
        if (status == UCS_OK) {
            status = r->lease_.join(base_dir, name, r->dir_fd_.get(),
                                    r->lock_fd_.get(), r->uid_);
        }
    }
    if (status == UCS_ERR_NO_ELEM) {
        ucs_warn("pxn: the registry %s/%s was removed each time it was opened",
                 base_dir.c_str(), name.c_str());
    }
    if (status != UCS_OK) {
        return status;
    }
    status = r->cleanup(cleaned);
    if (status != UCS_OK) {
        return status;
    }
    *registry = std::move(r);
    return UCS_OK;
}

ucs_status_t Registry::open_directory(const std::string &base_dir,
                                      const std::string &name)
{
    path_ = base_dir + "/" + name;
    /* The base may be a symlink (/dev/shm -> /run/shm); the registry
     * directory itself may not. */
    UniqueFd base(::open(base_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!base.valid()) {
        ucs_warn("pxn: cannot open the registry base directory %s: %m",
                 base_dir.c_str());
        return UCS_ERR_IO_ERROR;
    }
    bool created = (mkdirat(base.get(), name.c_str(), 0700) == 0);
    if (!created && (errno != EEXIST)) {
        ucs_warn("pxn: cannot create the registry directory %s: %m", path_.c_str());
        return UCS_ERR_IO_ERROR;
    }
    UniqueFd dir(openat(base.get(), name.c_str(),
                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dir.valid()) {
        if (errno == ENOENT) {
            return UCS_ERR_NO_ELEM; /* removed since mkdirat() */
        } else if ((errno == ELOOP) || (errno == ENOTDIR)) {
            ucs_warn("pxn: refusing the registry %s: it is a symlink or not a "
                     "directory", path_.c_str());
            return UCS_ERR_REJECTED;
        }
        ucs_warn("pxn: cannot open the registry directory %s: %m", path_.c_str());
        return UCS_ERR_IO_ERROR;
    }
    struct stat st;
    if (fstat(dir.get(), &st) != 0) {
        ucs_warn("pxn: fstat of the registry directory %s failed: %m",
                 path_.c_str());
        return UCS_ERR_IO_ERROR;
    }
    if (st.st_uid != uid_) {
        ucs_warn("pxn: refusing the registry %s: it is owned by uid %u, not by "
                 "this process's uid %u", path_.c_str(), unsigned(st.st_uid),
                 unsigned(uid_));
        return UCS_ERR_REJECTED;
    }
    /* A fresh directory may lack bits because of the umask; an existing
     * one with wrong bits was made or changed by someone else. */
    if (created && ((st.st_mode & 07777) != 0700)) {
        if (fchmod(dir.get(), 0700) != 0) {
            ucs_warn("pxn: chmod 0700 of %s failed: %m", path_.c_str());
            return UCS_ERR_IO_ERROR;
        }
        st.st_mode = (st.st_mode & ~07777) | 0700;
    }
    if ((st.st_mode & 077) || ((st.st_mode & 0700) != 0700)) {
        ucs_warn("pxn: refusing the registry %s: its mode is %04o, expected "
                 "0700", path_.c_str(), unsigned(st.st_mode & 07777));
        return UCS_ERR_REJECTED;
    }
    dir_fd_ = std::move(dir);
    return UCS_OK;
}

ucs_status_t Registry::open_lock_file()
{
    UniqueFd fd(openat(dir_fd_.get(), kLockName,
                       O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd.valid()) {
        if (errno == ENOENT) {
            return UCS_ERR_NO_ELEM; /* the directory was removed */
        }
        ucs_warn("pxn: cannot open %s/%s: %m", path_.c_str(), kLockName);
        return UCS_ERR_IO_ERROR;
    }
    struct stat st;
    if ((fstat(fd.get(), &st) != 0) || !S_ISREG(st.st_mode) ||
        (st.st_uid != uid_)) {
        ucs_warn("pxn: refusing the registry %s: %s is not a regular file of "
                 "uid %u", path_.c_str(), kLockName, unsigned(uid_));
        return UCS_ERR_REJECTED;
    }
    lock_fd_ = std::move(fd);
    return UCS_OK;
}

bool Registry::first_warning(const std::string &name)
{
    std::lock_guard<std::mutex> guard(warn_mutex_);
    return warned_.insert(name).second;
}

ucs_status_t Registry::create_entry(const EntryParams &params,
                                    std::unique_ptr<RegistryEntry> *entry)
{
    if ((params.rail.size() >= abi::kNameMax) ||
        (params.device.size() >= abi::kNameMax) ||
        (params.inner_tl.size() >= abi::kTlNameMax)) {
        ucs_error("pxn: rail '%s', device '%s' or inner transport '%s' is too "
                  "long for the registry", params.rail.c_str(),
                  params.device.c_str(), params.inner_tl.c_str());
        return UCS_ERR_INVALID_PARAM;
    }
    ProcessIdentity self;
    ucs_status_t    status = current_process(&self);
    if (status != UCS_OK) {
        return status;
    }

    /* Declared before the lock: on failure it is destroyed (and removes
     * its file, under the lock) after the lock is released. */
    std::unique_ptr<RegistryEntry> e(new RegistryEntry(this, self));
    const std::string init_name = entry_file_name(self.pid, self.epoch,
                                                  kSuffixInit);
    const uint64_t    size      = control_file_size(geometry_);

    /* Under the lock, so that cleanup never sees a half-written header. */
    Lock lock(this);
    status = lock.acquire();
    if (status != UCS_OK) {
        return status;
    }
    UniqueFd fd(openat(dir_fd_.get(), init_name.c_str(),
                       O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd.valid()) {
        ucs_error("pxn: cannot create %s/%s: %m", path_.c_str(), init_name.c_str());
        return UCS_ERR_IO_ERROR;
    }
    e->created_ = true; /* from here on, its destructor unlinks the file */
    /* and an end of the process that skips the destructor, too */
    e->exit_slot_ = track_entry(path_, entry_stem(self.pid, self.epoch));
    if (fchmod(fd.get(), 0600) != 0) {
        ucs_error("pxn: chmod 0600 of %s/%s failed: %m", path_.c_str(),
                  init_name.c_str());
        return UCS_ERR_IO_ERROR;
    }
    if (ftruncate(fd.get(), off_t(size)) != 0) {
        ucs_error("pxn: cannot size %s/%s to %" PRIu64 " bytes: %m", path_.c_str(),
                  init_name.c_str(), size);
        return UCS_ERR_NO_MEMORY;
    }
    /* Reserve the pages now: a full tmpfs would otherwise show up later as
     * SIGBUS on first touch, in this process or in a peer. */
    const int rc = posix_fallocate(fd.get(), 0, off_t(size));
    if ((rc != 0) && (rc != EOPNOTSUPP) && (rc != EINVAL)) {
        errno = rc;
        ucs_error("pxn: cannot allocate %" PRIu64 " bytes for %s/%s: %m", size,
                  path_.c_str(), init_name.c_str());
        return UCS_ERR_NO_MEMORY;
    }
    status = e->mapping_.map(fd.get(), size, path_ + "/" + init_name);
    if (status != UCS_OK) {
        return status;
    }
    e->view_.base     = e->mapping_.data();
    e->view_.geometry = geometry_;

    const abi::LaneLayout layout = abi::lane_layout(geometry_.slots,
                                                    geometry_.max_plan);
    abi::ProcessHeader   &h      = e->header();
    h.magic       = abi::kMagic;
    h.abi_version = abi::kAbiVersion;
    h.header_size = sizeof(abi::ProcessHeader);
    h.uid         = uint32_t(uid_);
    h.pid         = self.pid;
    h.start_time  = self.start_time;
    h.epoch       = self.epoch;
    strncpy(h.node_id, node_id_.c_str(), sizeof(h.node_id) - 1);
    strncpy(h.rail, params.rail.c_str(), sizeof(h.rail) - 1);
    strncpy(h.device, params.device.c_str(), sizeof(h.device) - 1);
    strncpy(h.inner_tl, params.inner_tl.c_str(), sizeof(h.inner_tl) - 1);
    h.lanes       = geometry_.lanes;
    h.slots       = geometry_.slots;
    h.slot_size   = geometry_.slot_size;
    h.max_plan    = geometry_.max_plan;
    h.arena_kind  = 0;
    h.arena_size  = geometry_.arena_size();
    h.lane_offset = abi::kLaneOffset;
    h.lane_stride = layout.lane_stride;
    h.desc_stride = layout.desc_stride;
    h.file_size   = size;
    abi::store_relaxed(h.relay_sleeping, uint32_t(0));
    abi::store_release(h.state, uint32_t(abi::kProcessInit));
    e->heartbeat();

    *entry = std::move(e);
    return UCS_OK;
}

ucs_status_t Registry::discover(const ProcessIdentity *self,
                                std::vector<PeerInfo> *peers)
{
    std::vector<std::string> names;
    if (!list_names(&names)) {
        return UCS_ERR_IO_ERROR;
    }
    peers->clear();
    const uint64_t now = monotonic_ns();
    for (const std::string &name : names) {
        EntryName parsed;
        if (!parse_entry_name(name.c_str(), &parsed) ||
            (parsed.suffix != kSuffixControl)) {
            continue;
        }
        UniqueFd fd(openat(dir_fd_.get(), name.c_str(),
                           O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
        if (!fd.valid()) {
            ucs_debug("pxn: skipping %s/%s: %m", path_.c_str(), name.c_str());
            continue;
        }
        abi::ProcessHeader h;
        uint64_t           file_bytes = 0;
        std::string        why = read_header(fd.get(), uid_, &h, &file_bytes);
        if (why.empty()) {
            why = check_header(h, file_bytes, parsed, uid_, geometry_);
        }
        if (!why.empty()) {
            if (first_warning(name)) {
                ucs_warn("pxn: ignoring registry entry %s/%s: %s", path_.c_str(),
                         name.c_str(), why.c_str());
            }
            continue;
        }

        PeerInfo info;
        info.identity.pid        = h.pid;
        info.identity.start_time = h.start_time;
        info.identity.epoch      = h.epoch;
        if ((self != nullptr) && (info.identity == *self)) {
            continue;
        }
        info.node_id = fixed_string(h.node_id, sizeof(h.node_id));
        const uint64_t heartbeat = abi::load_relaxed(h.heartbeat_ns);
        const uint64_t age       = (now > heartbeat) ? (now - heartbeat) : 0;
        if (info.node_id != node_id_) {
            why = "node id '" + info.node_id + "' is not '" + node_id_ + "'";
        } else if (h.state != abi::kProcessReady) {
            why = "state " + std::to_string(h.state) + " is not READY";
        } else if (age > heartbeat_timeout_ns_) {
            why = "heartbeat is " + std::to_string(age / 1000000) + " ms old";
        } else if (!is_alive(h.pid, h.start_time)) {
            why = "its process is dead";
        }
        if (!why.empty()) {
            ucs_debug("pxn: skipping registry entry %s/%s: %s", path_.c_str(),
                      name.c_str(), why.c_str());
            continue;
        }

        info.rail       = fixed_string(h.rail, sizeof(h.rail));
        info.device     = fixed_string(h.device, sizeof(h.device));
        info.inner_tl   = fixed_string(h.inner_tl, sizeof(h.inner_tl));
        info.arena_kind = h.arena_kind;
        info.arena_size = h.arena_size;
        memcpy(info.arena_handle.data(), h.arena_handle, sizeof(h.arena_handle));
        info.name = name;
        info.path = path_ + "/" + name;
        peers->push_back(std::move(info));
    }
    /* Oldest first: when a misconfigured rail map gives two relays one rail,
     * every sender picks the same one, and a relay started later never
     * takes the rail over. */
    std::sort(peers->begin(), peers->end(), [](const PeerInfo &a, const PeerInfo &b) {
        return std::tie(a.identity.start_time, a.name) <
               std::tie(b.identity.start_time, b.name);
    });
    return UCS_OK;
}

ucs_status_t Registry::map_peer(const PeerInfo &peer,
                                std::unique_ptr<PeerMapping> *mapping)
{
    EntryName parsed;
    if (!parse_entry_name(peer.name.c_str(), &parsed) ||
        (parsed.suffix != kSuffixControl)) {
        ucs_error("pxn: '%s' is not a registry control file name",
                  peer.name.c_str());
        return UCS_ERR_INVALID_PARAM;
    }
    UniqueFd fd(openat(dir_fd_.get(), peer.name.c_str(),
                       O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (!fd.valid()) {
        ucs_debug("pxn: relay %s/%s has gone: %m", path_.c_str(), peer.name.c_str());
        return UCS_ERR_UNREACHABLE;
    }
    abi::ProcessHeader h;
    uint64_t           file_bytes = 0;
    std::string        why = read_header(fd.get(), uid_, &h, &file_bytes);
    if (why.empty()) {
        why = check_header(h, file_bytes, parsed, uid_, geometry_);
    }
    if (!why.empty()) {
        if (first_warning(peer.name)) {
            ucs_warn("pxn: not mapping registry entry %s/%s: %s", path_.c_str(),
                     peer.name.c_str(), why.c_str());
        }
        return UCS_ERR_UNREACHABLE;
    }
    if (h.start_time != peer.identity.start_time) {
        ucs_debug("pxn: relay %s/%s is another process now", path_.c_str(),
                  peer.name.c_str());
        return UCS_ERR_UNREACHABLE;
    }
    /* Size checked against our own geometry: mapping it never reaches
     * beyond the end of the file. */
    SharedMapping map;
    ucs_status_t  status = map.map(fd.get(), h.file_size, path_ + "/" + peer.name);
    if (status != UCS_OK) {
        return status;
    }
    mapping->reset(new PeerMapping(this, peer, std::move(map), geometry_));
    return UCS_OK;
}

bool Registry::list_names(std::vector<std::string> *names) const
{
    const int fd = fcntl(dir_fd_.get(), F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
        ucs_error("pxn: dup of the registry directory fd failed: %m");
        return false;
    }
    DIR *dir = fdopendir(fd);
    if (dir == nullptr) {
        ucs_error("pxn: fdopendir %s failed: %m", path_.c_str());
        close(fd);
        return false;
    }
    rewinddir(dir);
    while (const struct dirent *de = readdir(dir)) {
        if (de->d_name[0] != '.') {
            names->emplace_back(de->d_name);
        }
    }
    closedir(dir);
    return true;
}

} // namespace pxn
