#include "exit_cleanup.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unistd.h>

namespace pxn {

namespace {

/* A slot is a seqlock: `gen` is odd while the slot is being written or
 * freed, so that the signal handler never uses a half-written path. */
struct EntrySlot {
    std::atomic<uint32_t> gen{0};
    std::atomic<bool>     used{false};
    pid_t                 pid    = 0;
    size_t                length = 0;
    char                  path[kMaxTrackedPath];
};

struct LeaveSlot {
    std::atomic<uint32_t> gen{0};
    std::atomic<bool>     used{false};
    pid_t                 pid = 0;
    LeaseRecord           record;
};

EntrySlot      g_entries[kMaxTrackedEntries];
LeaveSlot      g_leaves[kMaxTrackedEntries];
std::mutex     g_mutex; /* writers of slots */
std::once_flag g_installed;

/* The seqlock's write side, under g_mutex. */
template<typename Slot, typename Fill> void write_slot(Slot &slot, bool used,
                                                       const Fill &fill)
{
    slot.gen.fetch_add(1, std::memory_order_acq_rel); /* odd: writing */
    std::atomic_thread_fence(std::memory_order_release);
    fill();
    slot.used.store(used, std::memory_order_release);
    slot.gen.fetch_add(1, std::memory_order_release);
}

/* A consistent copy of a used slot of this process; false otherwise. */
template<typename Slot, typename Copy> bool read_slot(const Slot &slot, pid_t self,
                                                     const Copy &copy)
{
    const uint32_t before = slot.gen.load(std::memory_order_acquire);
    if (((before & 1) != 0) || !slot.used.load(std::memory_order_acquire) ||
        (slot.pid != self)) {
        return false;
    }
    copy();
    std::atomic_thread_fence(std::memory_order_acquire);
    return slot.gen.load(std::memory_order_relaxed) == before;
}

constexpr const char *kSuffixes[] = {".arena", ".wake", ".ctl", ".init"};

/* Async-signal-safe: atomics, memcpy, getpid, unlink, and
 * leave_registry()'s system calls. Files first: a directory is left only
 * once nothing of this process is in it. */
void leave_tracked()
{
    const pid_t self = getpid();
    char        name[kMaxTrackedPath + 8];
    for (EntrySlot &slot : g_entries) {
        size_t length = 0;
        if (!read_slot(slot, self, [&] {
                length = std::min(slot.length, kMaxTrackedPath - 1);
                memcpy(name, slot.path, length);
            })) {
            continue; /* unused, another process's, or rewritten meanwhile */
        }
        for (const char *suffix : kSuffixes) {
            memcpy(name + length, suffix, strlen(suffix) + 1);
            unlink(name);
        }
    }
    for (LeaveSlot &slot : g_leaves) {
        LeaseRecord record;
        if (read_slot(slot, self, [&] { memcpy(&record, &slot.record,
                                               sizeof(record)); })) {
            leave_registry(record);
        }
    }
}

void on_sigterm(int sig)
{
    const int saved_errno = errno;
    leave_tracked();
    /* The default action once this handler returns (SIGTERM is blocked
     * until then): the process ends by SIGTERM, as it would without pxn. */
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
    raise(sig);
    errno = saved_errno;
}

void at_exit()
{
    leave_tracked();
}

void install()
{
    atexit(at_exit);
    at_quick_exit(at_exit); /* programs that skip every teardown but this */
    struct sigaction old = {};
    if ((sigaction(SIGTERM, nullptr, &old) != 0) ||
        ((old.sa_flags & SA_SIGINFO) != 0) || (old.sa_handler != SIG_DFL)) {
        return; /* the application's choice */
    }
    struct sigaction sa = {};
    sa.sa_handler = on_sigterm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, nullptr);
}

} // namespace

int track_entry(const std::string &dir, const std::string &stem)
{
    const std::string path = dir + "/" + stem;
    if (path.size() >= kMaxTrackedPath) {
        return -1;
    }
    std::call_once(g_installed, install);
    std::lock_guard<std::mutex> guard(g_mutex);
    for (int i = 0; i < kMaxTrackedEntries; ++i) {
        EntrySlot &slot = g_entries[i];
        if (!slot.used.load(std::memory_order_relaxed)) {
            write_slot(slot, true, [&] {
                slot.pid    = getpid();
                slot.length = path.size();
                memcpy(slot.path, path.c_str(), path.size() + 1);
            });
            return i;
        }
    }
    return -1;
}

void untrack_entry(int slot)
{
    if ((slot >= 0) && (slot < kMaxTrackedEntries)) {
        std::lock_guard<std::mutex> guard(g_mutex);
        write_slot(g_entries[slot], false, [] {});
    }
}

int track_leave(const LeaseRecord &record)
{
    std::call_once(g_installed, install);
    std::lock_guard<std::mutex> guard(g_mutex);
    for (int i = 0; i < kMaxTrackedEntries; ++i) {
        LeaveSlot &slot = g_leaves[i];
        if (!slot.used.load(std::memory_order_relaxed)) {
            write_slot(slot, true, [&] {
                slot.pid    = getpid();
                slot.record = record;
            });
            return i;
        }
    }
    return -1;
}

void untrack_leave(int slot)
{
    if ((slot >= 0) && (slot < kMaxTrackedEntries)) {
        std::lock_guard<std::mutex> guard(g_mutex);
        write_slot(g_leaves[slot], false, [] {});
    }
}

bool exit_cleanup_owns_sigterm()
{
    struct sigaction current = {};
    return (sigaction(SIGTERM, nullptr, &current) == 0) &&
           ((current.sa_flags & SA_SIGINFO) == 0) &&
           (current.sa_handler == on_sigterm);
}

} // namespace pxn
