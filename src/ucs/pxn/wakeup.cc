#include "wakeup.h"

#include <ucs/debug/log_def.h>

#include <cerrno>
#include <csignal>
#include <ctime>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pxn {

ucs_status_t RelayWakeup::create(int dir_fd, const std::string &name,
                                 uint32_t *sleeping)
{
    if (mkfifoat(dir_fd, name.c_str(), 0600) != 0) {
        ucs_error("pxn: mkfifo %s failed: %m", name.c_str());
        return UCS_ERR_IO_ERROR;
    }
    /* O_RDWR: the relay is a writer of its own FIFO, so it never sees EOF
     * and a sender's non-blocking open finds a reader. */
    UniqueFd fd(openat(dir_fd, name.c_str(),
                       O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW));
    if (!fd.valid()) {
        ucs_error("pxn: open of the wakeup FIFO %s failed: %m", name.c_str());
        unlinkat(dir_fd, name.c_str(), 0);
        return UCS_ERR_IO_ERROR;
    }
    /* The umask may have taken bits we need (or left some we refuse). */
    if (fchmod(fd.get(), 0600) != 0) {
        ucs_error("pxn: chmod 0600 of %s failed: %m", name.c_str());
        unlinkat(dir_fd, name.c_str(), 0);
        return UCS_ERR_IO_ERROR;
    }
    fd_       = std::move(fd);
    sleeping_ = sleeping;
    cancel_sleep();
    return UCS_OK;
}

size_t RelayWakeup::drain()
{
    size_t total = 0;
    char   buf[256];
    for (;;) {
        const ssize_t n = read(fd_.get(), buf, sizeof(buf));
        if (n > 0) {
            total += size_t(n);
            continue;
        }
        if ((n < 0) && (errno == EINTR)) {
            continue;
        }
        /* EAGAIN: empty. EOF cannot happen: this process holds a writer. */
        break;
    }
    cancel_sleep();
    return total;
}

ucs_status_t SenderWakeup::open(int dir_fd, const std::string &name,
                                const uint32_t *sleeping)
{
    UniqueFd fd(openat(dir_fd, name.c_str(),
                       O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW));
    if (!fd.valid()) {
        /* ENXIO: a FIFO nobody reads, i.e. its relay is gone. */
        ucs_debug("pxn: cannot open the relay wakeup FIFO %s: %m", name.c_str());
        return ((errno == ENOENT) || (errno == ENXIO)) ? UCS_ERR_UNREACHABLE :
                                                         UCS_ERR_IO_ERROR;
    }
    struct stat st;
    if ((fstat(fd.get(), &st) != 0) || !S_ISFIFO(st.st_mode) ||
        (st.st_uid != geteuid())) {
        ucs_warn("pxn: %s is not a FIFO of this user: ignoring that relay",
                 name.c_str());
        return UCS_ERR_REJECTED;
    }
    fd_       = std::move(fd);
    sleeping_ = sleeping;
    name_     = name;
    return UCS_OK;
}

ucs_status_t SenderWakeup::signal()
{
    /* A write to a FIFO without readers raises SIGPIPE, whose default action
     * would kill this process because a relay died. Block it in this thread
     * for the write and consume the one the write raised, if any. This is
     * the slow path: the relay was about to block in a syscall anyway. */
    sigset_t pipe_set, old_set, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
    sigpending(&pending);
    const bool was_pending = sigismember(&pending, SIGPIPE);

    const char byte = 1;
    ssize_t    n;
    do {
        n = write(fd_.get(), &byte, 1);
    } while ((n < 0) && (errno == EINTR));
    const int error = errno;

    if ((n < 0) && (error == EPIPE) && !was_pending) {
        const struct timespec zero = {0, 0};
        sigtimedwait(&pipe_set, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_set, nullptr);

    if ((n == 1) || (error == EAGAIN)) {
        /* EAGAIN: the pipe is full, so a wakeup is already pending. */
        return UCS_OK;
    }
    errno = error;
    if (error == EPIPE) {
        ucs_debug("pxn: relay of %s has gone (EPIPE)", name_.c_str());
        return UCS_ERR_CONNECTION_RESET;
    }
    ucs_error("pxn: write to the wakeup FIFO %s failed: %m", name_.c_str());
    return UCS_ERR_IO_ERROR;
}

} // namespace pxn
