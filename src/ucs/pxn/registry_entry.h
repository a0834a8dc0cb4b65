/*
 * A relay's own registry entry: its control file, mapped read-write for the
 * entry's lifetime (RAII).
 *
 * Life cycle (the relay's initialisation order):
 *   Registry::create_entry()   p<pid>-<epoch>.init, header written, INIT
 *   create_host_arena() or set_arena()      arena kind + export handle
 *   create_wakeup()            the FIFO p<pid>-<epoch>.wake
 *   publish()                  heartbeat, state READY, then atomic rename
 *                              (no replace) to p<pid>-<epoch>.ctl
 *   heartbeat()                periodically (well within heartbeat_timeout)
 *   begin_close()              state CLOSING: no new claims succeed
 *   close() / destructor       unlink arena, wake, then the control file
 *                              (under the lock), munmap
 * From the creation of the control file until close(), an end of the
 * process that skips close() (exit, SIGTERM) unlinks the files too
 * (exit_cleanup.h).
 * Until publish() nobody can discover the entry; the identity and geometry
 * block of the header is immutable after publish() (set_arena() refuses).
 *
 * Ownership of fields: the relay writes the header's live block (state,
 * relay_sleeping, heartbeat_ns) and each lane's consumer block,
 * completions and route replies; senders write the rest of their lanes
 * (lane_claim.h has the reset rules).
 *
 * Threading: lane accessors and heartbeat() need no lock; publish,
 * begin_close and close must not race with each other.
 */
#ifndef PXN_REGISTRY_ENTRY_H_
#define PXN_REGISTRY_ENTRY_H_

#include "control_file.h"
#include "registry.h"
#include "wakeup.h"

namespace pxn {

class RegistryEntry {
public:
    ~RegistryEntry() { close(); }
    RegistryEntry(const RegistryEntry&) = delete;
    RegistryEntry &operator=(const RegistryEntry&) = delete;

    const ProcessIdentity &identity() const { return identity_; }
    const Geometry &geometry() const { return view_.geometry; }
    bool is_published() const { return published_; }

    /* File names in the registry directory (Registry::dir_fd()). */
    std::string control_name() const;
    std::string arena_name() const;
    std::string wake_name() const;

    /* Creates p<pid>-<epoch>.arena (0600, arena_size bytes, sparse) and
     * records it as this entry's arena (kArenaHostShm, handle = its file
     * name). The caller maps *fd; close() unlinks the file. */
    ucs_status_t create_host_arena(UniqueFd *fd);

    /* Records an arena exported by other means (kArenaCudaIpc: the IPC handle
     * bytes). length <= abi::kHandleMax. Only before publish(). */
    ucs_status_t set_arena(abi::ArenaKind kind, const void *handle, size_t length);

    /* Creates the wakeup FIFO bound to this header's relay_sleeping. */
    ucs_status_t create_wakeup(RelayWakeup *wakeup);

    ucs_status_t publish();

    /* heartbeat_ns = now (CLOCK_MONOTONIC), release. No syscall. */
    void heartbeat()
    {
        abi::store_release(header().heartbeat_ns, monotonic_ns());
    }

    ucs_status_t begin_close();

    /* Idempotent. */
    void close();

    abi::ProcessHeader &header() const { return view_.header(); }
    uint32_t lanes() const { return view_.geometry.lanes; }
    /* index < lanes(), unchecked. */
    LaneBlock lane(uint32_t index) const { return view_.lane(index); }
    const ControlView &view() const { return view_; }

private:
    friend class Registry;
    RegistryEntry(Registry *registry, const ProcessIdentity &identity);

    Registry       *registry_;
    ProcessIdentity identity_;
    SharedMapping   mapping_;
    ControlView     view_;
    bool            created_   = false; /* the .init file exists */
    bool            published_ = false; /* renamed to .ctl */
    bool            closed_    = false;
    int             exit_slot_ = -1;    /* exit_cleanup.h: track_entry() */
};

} // namespace pxn

#endif
