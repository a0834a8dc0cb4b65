/*
 * The per-node registry through which pxn processes find each other:
 * <base>/ucx-pxn-<euid>-<group>/, base UCX_PXN_REGISTRY_DIR (/dev/shm).
 *
 * Files (names in control_file.h, layout in abi.h):
 *   p<pid>-<epoch>.init   a relay's control file while it is being written
 *   p<pid>-<epoch>.ctl    the same file once published (READY)
 *   p<pid>-<epoch>.arena  its host staging arena (ArenaKind kArenaHostShm)
 *   p<pid>-<epoch>.wake   its wakeup FIFO (wakeup.h)
 *   .lock                 flock serialising changes (below)
 *   .users                shared flock of every Registry (registry_lease.h)
 *
 * Lifetime of the directory: open() creates it when missing; the last
 * Registry of the node to go (any process) removes it when nothing but
 * .lock and .users is left in it (registry_lease.h). A process that ends
 * without closing pxn does the same at exit (exit_cleanup.h).
 *
 * Security: the directory is created 0700 and files 0600. Registry::open()
 * refuses, with one warning and UCS_ERR_REJECTED, a directory that is a
 * symlink, not a directory, owned by another uid, or accessible by group or
 * others. Files of another uid inside it are ignored with one warning per
 * file (per Registry object). Nothing read from a file is trusted: headers
 * are checked against this process's own ABI and geometry (check_header)
 * and the file size is checked (fstat) before anything is mapped.
 *
 * Locking: the flock on .lock serialises create/publish/close of entries,
 * lane claim/renew/release and cleanup between processes (and a mutex
 * between threads of one process, since flock does not). It is never taken
 * on the data path: after claiming a lane, sender and relay use the mapped
 * lane blocks directly. Waiting for the lock is bounded (kLockTimeoutSec).
 * discover() takes no lock.
 *
 * Liveness: an entry (or a lane owner) is dead when its pid is gone or a
 * zombie, or when the pid now belongs to a process with another start time
 * (identity.h). cleanup(), run by open() and callable at any time, unlinks
 * dead entries with their arena and wake files, and frees lanes of live
 * relays owned by dead senders. A relay that crashed leaves its files for
 * the next cleanup; a relay that restarts (new process or new entry) has a
 * new random epoch, i.e. new file names.
 *
 * Lifetime: Registry must outlive every RegistryEntry and PeerMapping made
 * from it. Registry objects are not carried across fork(): a child opens its
 * own (flock locks belong to the open file, which fork shares).
 *
 * Threading: all methods are thread-safe.
 */
#ifndef PXN_REGISTRY_H_
#define PXN_REGISTRY_H_

#include "abi.h"
#include "control_file.h"
#include "identity.h"
#include "os_resource.h"
#include "registry_lease.h"
#include "settings.h"

#include <ucs/type/status.h>

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace pxn {

class PeerMapping;
class RegistryEntry;

constexpr const char *kDefaultRegistryBase = "/dev/shm";
constexpr double      kLockTimeoutSec      = 5.0;

/* A published relay found by discover(); a copy of its immutable header
 * fields (strings bounded, never trusted to be NUL-terminated in the file). */
struct PeerInfo {
    ProcessIdentity identity; /* pid, start time, epoch */
    std::string     node_id;
    std::string     rail;
    std::string     device;
    std::string     inner_tl;
    uint32_t        arena_kind = 0; /* abi::ArenaKind; 0: none */
    uint64_t        arena_size = 0;
    std::array<uint8_t, abi::kHandleMax> arena_handle{};
    std::string     name; /* file name of the control file */
    std::string     path; /* full path of the control file */
};

/* What a relay publishes about itself; each string shorter than its
 * ProcessHeader field (rail/device: 63 bytes, inner_tl: 31). */
struct EntryParams {
    std::string rail;
    std::string device;
    std::string inner_tl;
};

struct CleanupStats {
    unsigned entries_removed = 0; /* stale .ctl/.init files */
    unsigned files_removed   = 0; /* all files, arena and wake included */
    unsigned lanes_freed     = 0;
};

class Registry {
public:
    /* How a caller waits for the directory lock: bounded (kLockTimeoutSec,
     * sleeping between attempts: control paths that may wait), or not at
     * all (UCS_ERR_BUSY when another thread or process holds it: progress
     * functions, which try again later). */
    enum class LockWait { kBounded, kTry };

    /* Opens (creating when missing) <base_dir>/ucx-pxn-<euid>-<group>/ for
     * settings.group, settings.geometry, settings.heartbeat_timeout and the
     * node id (settings.node_id, else the boot id), then runs cleanup()
     * (what it did into *cleaned, when given).
     * UCS_ERR_INVALID_PARAM: bad group name or geometry; UCS_ERR_REJECTED:
     * unsafe directory; both logged once. */
    static ucs_status_t open(const Settings &settings, const std::string &base_dir,
                             std::unique_ptr<Registry> *registry,
                             CleanupStats *cleaned = nullptr);
    static ucs_status_t open(const Settings &settings,
                             std::unique_ptr<Registry> *registry)
    {
        return open(settings, settings.registry_dir, registry);
    }

    ~Registry();
    Registry(const Registry&) = delete;
    Registry &operator=(const Registry&) = delete;

    const std::string &path() const { return path_; }
    const std::string &node_id() const { return node_id_; }
    const Geometry &geometry() const { return geometry_; }
    uint64_t heartbeat_timeout_ns() const { return heartbeat_timeout_ns_; }
    uid_t uid() const { return uid_; }
    /* Directory fd, for openat() of registry files. */
    int dir_fd() const { return dir_fd_.get(); }

    /* Starts a relay entry of this process (a fresh epoch): the control file
     * exists as p<pid>-<epoch>.init, fully sized, header written, state
     * INIT. Publish it with RegistryEntry::publish(). */
    ucs_status_t create_entry(const EntryParams &params,
                              std::unique_ptr<RegistryEntry> *entry);

    /* Lists published relays usable by this process: READY, same uid, ABI
     * and geometry, same node id, fresh heartbeat, alive, and not `self`
     * (nullptr: exclude none), oldest process first (then by file name).
     * Everything skipped is logged once per file (warn for foreign or
     * corrupt files, debug for normal states). */
    ucs_status_t discover(const ProcessIdentity *self,
                          std::vector<PeerInfo> *peers);

    /* Maps a discovered relay's control file read-write. Re-checks the file
     * (it may have changed since discover). UCS_ERR_UNREACHABLE: it is gone
     * or no longer the same incarnation. */
    ucs_status_t map_peer(const PeerInfo &peer,
                          std::unique_ptr<PeerMapping> *mapping);

    /* Removes dead entries and frees dead senders' lanes (see above). */
    ucs_status_t cleanup(CleanupStats *stats = nullptr);

    /* Frees the lanes of `view` (a relay's own control file) whose owner is
     * dead; returns how many (0 when the lock was not taken). */
    unsigned free_dead_lanes(const ControlView &view, LockWait wait);

private:
    friend class RegistryEntry;
    friend class PeerMapping;

    /* The directory lock (flock + this object's mutex) for a scope. */
    class Lock {
    public:
        explicit Lock(Registry *registry);
        ~Lock();
        Lock(const Lock&) = delete;
        Lock &operator=(const Lock&) = delete;
        /* kBounded logs a timeout; kTry returns UCS_ERR_BUSY silently. */
        ucs_status_t acquire(LockWait wait = LockWait::kBounded);

    private:
        Registry                    *registry_;
        std::unique_lock<std::mutex> guard_;
        bool                         locked_ = false;
    };

    Registry() = default;
    /* UCS_ERR_NO_ELEM (not logged): a leave() of another process removed
     * the directory meanwhile; open it again. */
    ucs_status_t open_directory(const std::string &base_dir,
                                const std::string &name);
    ucs_status_t open_lock_file();
    /* Once per file name: true the first time. */
    bool first_warning(const std::string &name);
    /* Names in the directory (a private dup of its fd, which keeps its
     * offset and stays open). False on error, which is logged. */
    bool list_names(std::vector<std::string> *names) const;
    void cleanup_locked(CleanupStats *stats);
    /* Unlinks stem.arena, stem.wake, then the control file `name`. */
    unsigned remove_entry_files(const std::string &stem, const std::string &name);

    std::string           path_;
    std::string           node_id_;
    Geometry              geometry_;
    uint64_t              heartbeat_timeout_ns_ = 0;
    uid_t                 uid_                  = 0;
    UniqueFd              dir_fd_;
    UniqueFd              lock_fd_;
    RegistryLease         lease_; /* after the fds: it goes before them */
    std::mutex            lock_mutex_;
    std::mutex            warn_mutex_;
    std::set<std::string> warned_;
};

} // namespace pxn

#endif
