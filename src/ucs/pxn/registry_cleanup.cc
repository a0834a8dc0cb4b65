/*
 * Registry cleanup: entries of dead processes (files removed, lanes of
 * dead owners freed) and files left without their control file.
 */
#include "registry.h"

#include "control_file.h"
#include "lane_claim.h"
#include "registry_entry.h"

#include <ucs/debug/log_def.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <fcntl.h>
#include <map>
#include <unistd.h>

namespace pxn {

namespace {

bool process_gone(uint32_t pid)
{
    if ((pid == 0) || (pid > uint32_t(INT_MAX))) {
        return true;
    }
    if ((kill(pid_t(pid), 0) != 0) && (errno == ESRCH)) {
        return true;
    }
    uint64_t start_time;
    return process_start_time(pid_t(pid), &start_time) == UCS_ERR_NO_ELEM;
}

bool header_abi_matches(const abi::ProcessHeader &h)
{
    return (h.magic == abi::kMagic) && (h.abi_version == abi::kAbiVersion) &&
           (h.header_size == sizeof(abi::ProcessHeader));
}

} // namespace

ucs_status_t Registry::cleanup(CleanupStats *stats)
{
    CleanupStats local;
    Lock         lock(this);
    ucs_status_t status = lock.acquire();
    if (status != UCS_OK) {
        return status;
    }
    cleanup_locked(&local);
    if (stats != nullptr) {
        *stats = local;
    }
    return UCS_OK;
}

unsigned Registry::remove_entry_files(const std::string &stem,
                                      const std::string &name)
{
    /* Control file last: if this process dies half-way, the next cleanup
     * still finds the entry and finishes. */
    unsigned removed = 0;
    for (const char *suffix : {kSuffixArena, kSuffixWake}) {
        const std::string file = stem + "." + suffix;
        if (unlinkat(dir_fd_.get(), file.c_str(), 0) == 0) {
            ++removed;
        } else if (errno != ENOENT) {
            ucs_warn("pxn: cannot remove %s/%s: %m", path_.c_str(), file.c_str());
        }
    }
    if (!name.empty()) {
        if (unlinkat(dir_fd_.get(), name.c_str(), 0) == 0) {
            ++removed;
        } else if (errno != ENOENT) {
            ucs_warn("pxn: cannot remove %s/%s: %m", path_.c_str(), name.c_str());
        }
    }
    return removed;
}

void Registry::cleanup_locked(CleanupStats *stats)
{
    std::vector<std::string> names;
    if (!list_names(&names)) {
        return;
    }
    /* stem -> has a control (.ctl/.init) file */
    std::map<std::string, bool> stems;
    for (const std::string &name : names) {
        EntryName parsed;
        if (!parse_entry_name(name.c_str(), &parsed)) {
            continue;
        }
        const std::string stem = entry_stem(parsed.pid, parsed.epoch);
        const bool control = (parsed.suffix == kSuffixControl) ||
                             (parsed.suffix == kSuffixInit);
        stems[stem] = stems[stem] || control;
        if (!control) {
            continue;
        }

        UniqueFd fd(openat(dir_fd_.get(), name.c_str(),
                           O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
        if (!fd.valid()) {
            continue; /* removed meanwhile, or not ours to open */
        }
        abi::ProcessHeader h;
        uint64_t           file_bytes = 0;
        const std::string  why = read_header(fd.get(), uid_, &h, &file_bytes);
        if (why.rfind("owned by", 0) == 0) {
            if (first_warning(name)) {
                ucs_warn("pxn: ignoring %s/%s: %s", path_.c_str(), name.c_str(),
                         why.c_str());
            }
            continue;
        }

        /* Without a trustworthy header, only the pid of the name can tell;
         * with one, the start time also catches a reused pid. */
        bool stale = process_gone(parsed.pid);
        if (!stale && why.empty() && header_abi_matches(h) &&
            (h.pid == parsed.pid)) {
            stale = !is_alive(h.pid, h.start_time);
        }
        if (stale) {
            ucs_debug("pxn: removing stale registry entry %s/%s", path_.c_str(),
                      name.c_str());
            stats->files_removed += remove_entry_files(stem, name);
            ++stats->entries_removed;
            continue;
        }

        if ((parsed.suffix != kSuffixControl) || !why.empty() ||
            !check_header(h, file_bytes, parsed, uid_, geometry_).empty() ||
            (abi::load_acquire(h.state) != abi::kProcessReady)) {
            continue;
        }
        SharedMapping map;
        if (map.map(fd.get(), h.file_size, path_ + "/" + name) != UCS_OK) {
            continue;
        }
        ControlView view;
        view.base     = map.data();
        view.geometry = geometry_;
        stats->lanes_freed += free_dead_lanes_locked(view);
    }

    /* Arena or FIFO left without a control file (a relay killed while it
     * was removing its files). */
    for (const auto &stem : stems) {
        EntryName parsed;
        if (!stem.second &&
            parse_entry_name((stem.first + "." + kSuffixWake).c_str(), &parsed) &&
            process_gone(parsed.pid)) {
            stats->files_removed += remove_entry_files(stem.first, "");
        }
    }
}

unsigned Registry::free_dead_lanes(const ControlView &view, LockWait wait)
{
    Lock lock(this);
    return (lock.acquire(wait) == UCS_OK) ? free_dead_lanes_locked(view) : 0;
}

} // namespace pxn
