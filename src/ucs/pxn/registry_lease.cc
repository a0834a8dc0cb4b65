#include "registry_lease.h"

#include "control_file.h"
#include "exit_cleanup.h"
#include "registry.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * Why removing a directory that others may be opening is safe.
 *
 * A remover holds .users exclusively (so no process that passed join()'s
 * check uses the directory), and .lock exclusively (no entry is being
 * created), finds nothing but the two, then unlinks .lock, then .users,
 * then the directory. A joiner's last step is its check, under its shared
 * lock on .users, that the directory is linked and names the very .lock
 * and .users it opened:
 * - its .users is the one the remover holds: its shared lock waits until
 *   the remover is done, and the check then finds the name gone;
 * - its .users is newer (created after the remover unlinked the old one):
 *   the remover had unlinked .lock before, so the joiner's .lock is either
 *   the old one, which the check finds no longer named, or one created
 *   after, which stays; the remover's rmdir then fails (not empty);
 * - the directory went before the joiner created anything in it: its
 *   openat() fails with ENOENT, and it opens everything again.
 * So a joiner that passed the check holds a .lock and a .users that no
 * leave() in progress removes, and every later leave() needs its shared
 * lock gone. Without the check, two processes could lock two different
 * .lock files, or publish into a directory nobody else sees.
 */

namespace pxn {

namespace {

bool same_file(int dir_fd, const char *name, int fd)
{
    struct stat by_name, by_fd;
    return (fstatat(dir_fd, name, &by_name, AT_SYMLINK_NOFOLLOW) == 0) &&
           (fstat(fd, &by_fd) == 0) && (by_name.st_ino == by_fd.st_ino) &&
           (by_name.st_dev == by_fd.st_dev);
}

/* strcmp() == 0, spelled out: async-signal-safe without doubt. */
bool same_name(const char *a, const char *b)
{
    while ((*a != '\0') && (*a == *b)) {
        ++a;
        ++b;
    }
    return *a == *b;
}

/* Nothing in the directory but .lock and .users (false on error). With
 * getdents64 on a fresh descriptor: readdir() allocates. */
bool holds_only_lock_files(int dir_fd)
{
    const int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return false;
    }
    alignas(8) char buf[2048];
    bool            only = true;
    for (long n; only && ((n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) != 0);) {
        if (n < 0) {
            only = false;
            break;
        }
        for (long at = 0; at < n;) {
            /* struct linux_dirent64: ino, off, reclen, type, name */
            const auto *reclen = reinterpret_cast<const unsigned short*>(buf + at + 16);
            const char *name   = buf + at + 19;
            if (!same_name(name, ".") && !same_name(name, "..") &&
                !same_name(name, kLockName) && !same_name(name, kUsersName)) {
                only = false;
                break;
            }
            at += *reclen;
        }
    }
    close(fd);
    return only;
}

void copy_name(char *to, size_t size, const std::string &from)
{
    const size_t n = std::min(from.size(), size - 1);
    memcpy(to, from.data(), n);
    to[n] = '\0';
}

} // namespace

bool leave_registry(const LeaseRecord &r)
{
    flock(r.users_fd, LOCK_UN);
    if (flock(r.users_fd, LOCK_EX | LOCK_NB) != 0) {
        return false; /* another user */
    }
    /* A new open file description: its lock conflicts with every other
     * holder, this process's own Registry::Lock included. */
    const int lock = openat(r.dir_fd, kLockName, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (lock < 0) {
        return false;
    }
    bool removed = false;
    if ((flock(lock, LOCK_EX | LOCK_NB) == 0) && holds_only_lock_files(r.dir_fd)) {
        unlinkat(r.dir_fd, kLockName, 0);
        unlinkat(r.dir_fd, kUsersName, 0);
        const int base = open(r.base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (base >= 0) {
            removed = same_file(base, r.name, r.dir_fd) &&
                      (unlinkat(base, r.name, AT_REMOVEDIR) == 0);
            close(base);
        }
    }
    close(lock); /* and its lock */
    return removed;
}

RegistryLease::~RegistryLease()
{
    leave();
}

ucs_status_t RegistryLease::join(const std::string &base, const std::string &name,
                                 int dir_fd, int lock_fd, uid_t uid)
{
    const std::string path = base + "/" + name + "/" + kUsersName;
    if ((base.size() >= sizeof(record_.base)) ||
        (name.size() >= sizeof(record_.name))) {
        ucs_warn("pxn: the registry path %s/%s is too long", base.c_str(),
                 name.c_str());
        return UCS_ERR_INVALID_PARAM;
    }
    UniqueFd users(openat(dir_fd, kUsersName,
                          O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!users.valid()) {
        if (errno == ENOENT) {
            return UCS_ERR_NO_ELEM; /* the directory went meanwhile */
        }
        ucs_warn("pxn: cannot open %s: %m", path.c_str());
        return UCS_ERR_IO_ERROR;
    }
    struct stat st;
    if ((fstat(users.get(), &st) != 0) || !S_ISREG(st.st_mode) ||
        (st.st_uid != uid)) {
        ucs_warn("pxn: refusing the registry %s/%s: %s is not a regular file "
                 "of uid %u", base.c_str(), name.c_str(), kUsersName,
                 unsigned(uid));
        return UCS_ERR_REJECTED;
    }
    /* A remover holds it exclusively for a few system calls; a peer
     * stopped in between must not hang this process. */
    const uint64_t deadline = monotonic_ns() + uint64_t(kLockTimeoutSec * 1e9);
    long           pause_ns = 20000;
    while (flock(users.get(), LOCK_SH | LOCK_NB) != 0) {
        if ((errno != EWOULDBLOCK) && (errno != EINTR)) {
            ucs_warn("pxn: flock of %s failed: %m", path.c_str());
            return UCS_ERR_IO_ERROR;
        }
        if (monotonic_ns() > deadline) {
            ucs_warn("pxn: %s is held exclusively by another process for more "
                     "than %.0f seconds", path.c_str(), kLockTimeoutSec);
            return UCS_ERR_TIMED_OUT;
        }
        const struct timespec pause = {0, pause_ns};
        nanosleep(&pause, nullptr);
        pause_ns = std::min(pause_ns * 2, 2000000l);
    }
    struct stat dir_st;
    if ((fstat(dir_fd, &dir_st) != 0) || (dir_st.st_nlink == 0) ||
        !same_file(dir_fd, kUsersName, users.get()) ||
        !same_file(dir_fd, kLockName, lock_fd)) {
        return UCS_ERR_NO_ELEM;
    }
    record_.dir_fd   = dir_fd;
    record_.lock_fd  = lock_fd;
    record_.users_fd = users.get();
    copy_name(record_.base, sizeof(record_.base), base);
    copy_name(record_.name, sizeof(record_.name), name);
    users_fd_  = std::move(users);
    joined_    = true;
    exit_slot_ = track_leave(record_);
    return UCS_OK;
}

bool RegistryLease::leave()
{
    if (!joined_) {
        return false;
    }
    joined_ = false;
    untrack_leave(exit_slot_);
    exit_slot_ = -1;
    const bool removed = leave_registry(record_);
    users_fd_.reset(); /* releases whatever lock it still holds */
    if (removed) {
        ucs_debug("pxn: removed the registry %s/%s: no other user, no entry",
                  record_.base, record_.name);
    }
    return removed;
}

} // namespace pxn
