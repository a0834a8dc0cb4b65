/*
 * Cross-process wakeup of a relay: a FIFO (<registry>/p<pid>-<epoch>.wake)
 * plus the relay_sleeping flag of the relay's ProcessHeader.
 *
 * Files and lifetime:
 * - The relay creates the FIFO (mode 0600, before its entry is published)
 *   and keeps it open O_RDWR | O_NONBLOCK: it is its own writer, so it never
 *   reads EOF, and senders can always open it while the relay lives.
 *   RegistryEntry::close() unlinks the FIFO; RelayWakeup only closes its fd.
 * - A sender opens it O_WRONLY | O_NONBLOCK once per relay (the open fails
 *   with UCS_ERR_UNREACHABLE when no relay holds it open) and keeps it for
 *   the lifetime of its PeerMapping.
 * - `sleeping` points at ProcessHeader::relay_sleeping in the mapped control
 *   file: the mapping must outlive the wakeup object.
 *
 * Protocol (no lost wakeup; a store-load pair on each side, Dekker style):
 *
 *   relay                                  sender
 *   -----                                  ------
 *   prepare_sleep():                       publish work (store-release of a
 *     store relay_sleeping = 1               doorbell / head / request_gen)
 *     fence(seq_cst)                       notify():
 *   re-check every lane for work             fence(seq_cst)
 *   work found -> cancel_sleep()             if load(relay_sleeping) == 1:
 *   none       -> poll(fd(), timeout)            write 1 byte to the FIFO
 *                 drain()
 *
 * With a seq_cst fence between the store and the load on both sides, at
 * least one side sees the other's store: either the relay's re-check sees
 * the work, or the sender sees relay_sleeping == 1 and writes the byte that
 * ends the poll. "Work" is whatever the sender stored before notify(); a
 * doorbell that a GPU stream writes later is not covered, so a relay must
 * treat committed-but-not-rung descriptors (head > consumed) as work, or
 * sleep with a bounded timeout while any exist.
 *
 * Cost: when the relay is awake, notify() is a fence and one load: no
 * syscall. When it sleeps, one write(); EAGAIN (pipe full) means a wakeup is
 * already pending and counts as success. Spurious wakeups are possible
 * (a byte written just after drain()): the relay re-checks and sleeps again.
 *
 * Threading: RelayWakeup belongs to the relay's progress thread;
 * SenderWakeup::notify() may be called by one thread at a time.
 */
#ifndef PXN_WAKEUP_H_
#define PXN_WAKEUP_H_

#include "os_resource.h"

#include <ucs/type/status.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace pxn {

class RelayWakeup {
public:
    RelayWakeup() = default;
    RelayWakeup(RelayWakeup&&) = default;
    RelayWakeup &operator=(RelayWakeup&&) = default;

    /* Creates the FIFO `name` in the directory dir_fd (AT_FDCWD: name is a
     * path) with mode 0600, failing if it exists, and opens it. */
    ucs_status_t create(int dir_fd, const std::string &name, uint32_t *sleeping);

    /* Readable when a sender has notified; for poll/epoll or
     * ucs_async_set_event_handler(). */
    int fd() const { return fd_.get(); }
    bool valid() const { return fd_.valid(); }

    /* Announces that the relay is about to block; it must then re-check for
     * work and call cancel_sleep() or block on fd(). */
    void prepare_sleep()
    {
        __atomic_store_n(sleeping_, 1u, __ATOMIC_RELAXED);
        std::atomic_thread_fence(std::memory_order_seq_cst);
    }

    void cancel_sleep() { __atomic_store_n(sleeping_, 0u, __ATOMIC_RELAXED); }

    /* After the wait: empties the FIFO and clears relay_sleeping. Returns the
     * number of bytes drained (0 for a timeout). */
    size_t drain();

    bool is_sleeping() const
    {
        return __atomic_load_n(sleeping_, __ATOMIC_RELAXED) != 0;
    }

private:
    UniqueFd  fd_;
    uint32_t *sleeping_ = nullptr;
};

class SenderWakeup {
public:
    SenderWakeup() = default;
    SenderWakeup(SenderWakeup&&) = default;
    SenderWakeup &operator=(SenderWakeup&&) = default;

    /* Opens the relay's FIFO `name` in dir_fd (AT_FDCWD: name is a path).
     * UCS_ERR_UNREACHABLE: it does not exist or no relay holds it open.
     * `sleeping` is the relay's ProcessHeader::relay_sleeping. */
    ucs_status_t open(int dir_fd, const std::string &name, const uint32_t *sleeping);

    bool valid() const { return fd_.valid(); }

    /* Call after publishing work. Fast path (relay awake): a fence and a
     * load. UCS_ERR_CONNECTION_RESET: the relay has gone (no reader left);
     * SIGPIPE is never delivered for it. */
    ucs_status_t notify()
    {
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (__atomic_load_n(sleeping_, __ATOMIC_RELAXED) == 0) {
            return UCS_OK;
        }
        return signal();
    }

private:
    ucs_status_t signal();

    UniqueFd        fd_;
    const uint32_t *sleeping_ = nullptr;
    std::string     name_;
};

} // namespace pxn

#endif
