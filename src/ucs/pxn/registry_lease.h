/*
 * A process's use of a registry directory, so that the last user removes
 * it: a node where every pxn process of a group has ended keeps no
 * directory of that group.
 *
 * Every Registry holds a shared flock on <dir>/.users (0600) for its
 * lifetime. leave() drops it and, when nobody else holds it and the
 * directory holds nothing but .lock and .users, removes .lock, then
 * .users, then the directory, holding both files' flocks exclusively.
 * join() (Registry::open) checks, once it holds its shared lock, that the
 * directory it opened is still linked and that the .lock and .users it
 * opened are the files the directory names now; otherwise a leave()
 * removed them meanwhile and the caller opens the registry afresh
 * (UCS_ERR_NO_ELEM). Why that order is enough: registry_lease.cc.
 *
 * A process of an older pxn build (no .users) is not counted as a user;
 * its published entries still keep the directory (it is not empty).
 *
 * leave() never waits: any lock held by another process or Registry means
 * the directory is in use. It is idempotent, and is what ~Registry does;
 * when a process ends without closing pxn (exit, SIGTERM), exit_cleanup.h
 * runs leave_registry() with the Registry's descriptors, still open then.
 * (Should another thread destroy that Registry at that very moment, its
 * descriptor numbers may already name other files: the removal then fails
 * its checks, or concerns a directory of this process's own uid.)
 *
 * Not thread-safe: the owning Registry calls join() before anyone else uses
 * it, and leave() from its destructor.
 */
#ifndef PXN_REGISTRY_LEASE_H_
#define PXN_REGISTRY_LEASE_H_

#include "os_resource.h"

#include <ucs/type/status.h>

#include <sys/types.h>

#include <string>

namespace pxn {

constexpr const char *kUsersName = ".users";

/* What leaving a registry directory needs, by value (a signal handler
 * uses it: exit_cleanup.h). The descriptors are the Registry's. */
struct LeaseRecord {
    int  dir_fd   = -1;
    int  lock_fd  = -1;
    int  users_fd = -1;
    char base[1024] = {}; /* <base>/<name> is the directory */
    char name[256]  = {};
};

/* Drops users_fd's shared lock and removes the directory if nobody else
 * holds .users and nothing but .lock and .users is in it (above). Never
 * waits. Async-signal-safe: system calls only, no allocation, no log.
 * True when it removed the directory. */
bool leave_registry(const LeaseRecord &record);

class RegistryLease {
public:
    RegistryLease() = default;
    ~RegistryLease();
    RegistryLease(const RegistryLease&) = delete;
    RegistryLease &operator=(const RegistryLease&) = delete;

    /* dir_fd and lock_fd: the Registry's open directory and .lock; both
     * must stay open until leave(). `base` and `name`: where the directory
     * is (<base>/<name>). UCS_ERR_NO_ELEM: open everything again (not
     * logged); UCS_ERR_REJECTED: .users is not a regular file of `uid`;
     * other errors logged once. Waits at most kLockTimeoutSec (registry.h)
     * for a leave() in progress. */
    ucs_status_t join(const std::string &base, const std::string &name,
                      int dir_fd, int lock_fd, uid_t uid);

    /* True when it removed the directory. */
    bool leave();

private:
    LeaseRecord record_;       /* dir_fd and lock_fd not owned */
    UniqueFd    users_fd_;
    bool        joined_    = false;
    int         exit_slot_ = -1;
};

} // namespace pxn

#endif
