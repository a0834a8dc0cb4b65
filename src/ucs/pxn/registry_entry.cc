#include "registry_entry.h"

#include "exit_cleanup.h"

#include <ucs/debug/log_def.h>

#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pxn {

RegistryEntry::RegistryEntry(Registry *registry, const ProcessIdentity &identity) :
    registry_(registry), identity_(identity)
{
}

std::string RegistryEntry::control_name() const
{
    return entry_file_name(identity_.pid, identity_.epoch,
                           published_ ? kSuffixControl : kSuffixInit);
}

std::string RegistryEntry::arena_name() const
{
    return entry_file_name(identity_.pid, identity_.epoch, kSuffixArena);
}

std::string RegistryEntry::wake_name() const
{
    return entry_file_name(identity_.pid, identity_.epoch, kSuffixWake);
}

ucs_status_t RegistryEntry::create_host_arena(UniqueFd *fd)
{
    const std::string name = arena_name();
    const std::string path = registry_->path() + "/" + name;
    if (published_) {
        ucs_error("pxn: %s: the arena must be created before publication",
                  path.c_str());
        return UCS_ERR_INVALID_PARAM;
    }
    UniqueFd file(openat(registry_->dir_fd(), name.c_str(),
                         O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!file.valid()) {
        ucs_error("pxn: cannot create %s: %m", path.c_str());
        return UCS_ERR_IO_ERROR;
    }
    /* Sparse: pages are allocated when staged into. */
    if ((fchmod(file.get(), 0600) != 0) ||
        (ftruncate(file.get(), off_t(geometry().arena_size())) != 0)) {
        ucs_error("pxn: cannot set up %s (%" PRIu64 " bytes): %m", path.c_str(),
                  geometry().arena_size());
        unlinkat(registry_->dir_fd(), name.c_str(), 0);
        return UCS_ERR_NO_MEMORY;
    }
    const ucs_status_t status = set_arena(abi::kArenaHostShm, name.c_str(),
                                          name.size() + 1);
    if (status != UCS_OK) {
        unlinkat(registry_->dir_fd(), name.c_str(), 0);
        return status;
    }
    *fd = std::move(file);
    return UCS_OK;
}

ucs_status_t RegistryEntry::set_arena(abi::ArenaKind kind, const void *handle,
                                      size_t length)
{
    abi::ProcessHeader &h = header();
    if (published_ || (length > sizeof(h.arena_handle))) {
        ucs_error("pxn: arena handle of %zu bytes %s", length,
                  published_ ? "after publication" : "is too long");
        return UCS_ERR_INVALID_PARAM;
    }
    h.arena_kind = kind;
    memset(h.arena_handle, 0, sizeof(h.arena_handle));
    memcpy(h.arena_handle, handle, length);
    return UCS_OK;
}

ucs_status_t RegistryEntry::create_wakeup(RelayWakeup *wakeup)
{
    return wakeup->create(registry_->dir_fd(), wake_name(),
                          &header().relay_sleeping);
}

ucs_status_t RegistryEntry::publish()
{
    if (published_ || closed_) {
        ucs_error("pxn: registry entry %s published twice or after close",
                  control_name().c_str());
        return UCS_ERR_INVALID_PARAM;
    }
    Registry::Lock lock(registry_);
    ucs_status_t   status = lock.acquire();
    if (status != UCS_OK) {
        return status;
    }
    heartbeat();
    abi::store_release(header().state, uint32_t(abi::kProcessReady));
    status = rename_no_replace(registry_->dir_fd(),
                               entry_file_name(identity_.pid, identity_.epoch,
                                               kSuffixInit),
                               entry_file_name(identity_.pid, identity_.epoch,
                                               kSuffixControl));
    if (status != UCS_OK) {
        abi::store_release(header().state, uint32_t(abi::kProcessInit));
        return status;
    }
    published_ = true;
    return UCS_OK;
}

ucs_status_t RegistryEntry::begin_close()
{
    if (!mapping_.valid()) {
        return UCS_OK;
    }
    /* Under the lock: a claim in progress either completes before CLOSING
     * is visible or sees it and fails. */
    Registry::Lock     lock(registry_);
    const ucs_status_t status = lock.acquire();
    abi::store_release(header().state, uint32_t(abi::kProcessClosing));
    return status;
}

void RegistryEntry::close()
{
    if (closed_) {
        return;
    }
    closed_ = true;
    if (created_) {
        if (mapping_.valid()) {
            abi::store_release(header().state, uint32_t(abi::kProcessClosing));
        }
        /* Best effort under the lock, so that cleanup never sees the arena
         * or FIFO without its control file; without the lock (timeout) the
         * files still go. */
        Registry::Lock lock(registry_);
        lock.acquire();
        const int dir = registry_->dir_fd();
        for (const char *suffix : {kSuffixArena, kSuffixWake, kSuffixControl,
                                   kSuffixInit}) {
            const std::string name = entry_file_name(identity_.pid,
                                                     identity_.epoch, suffix);
            if ((unlinkat(dir, name.c_str(), 0) != 0) && (errno != ENOENT)) {
                ucs_warn("pxn: cannot remove %s/%s: %m",
                         registry_->path().c_str(), name.c_str());
            }
        }
        untrack_entry(exit_slot_);
        exit_slot_ = -1;
    }
    mapping_.reset();
    view_ = ControlView();
}

} // namespace pxn
