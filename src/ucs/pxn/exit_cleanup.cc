#include "exit_cleanup.h"

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
    bool    used = false;
    pid_t   pid  = 0;
    LeaveFn fn   = nullptr;
    void   *arg  = nullptr;
};

EntrySlot      g_entries[kMaxTrackedEntries];
LeaveSlot      g_leaves[kMaxTrackedEntries];
std::mutex     g_mutex; /* track/untrack, and the leave functions at exit */
std::once_flag g_installed;

constexpr const char *kSuffixes[] = {".arena", ".wake", ".ctl", ".init"};

/* Async-signal-safe: atomics, memcpy, getpid, unlink. */
void unlink_tracked()
{
    const pid_t self = getpid();
    char        name[kMaxTrackedPath + 8];
    for (EntrySlot &slot : g_entries) {
        const uint32_t before = slot.gen.load(std::memory_order_acquire);
        if (((before & 1) != 0) || !slot.used.load(std::memory_order_acquire) ||
            (slot.pid != self)) {
            continue;
        }
        const size_t length = slot.length;
        if (length >= kMaxTrackedPath) {
            continue;
        }
        memcpy(name, slot.path, length);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (slot.gen.load(std::memory_order_relaxed) != before) {
            continue; /* rewritten meanwhile: the files are not ours anymore */
        }
        for (const char *suffix : kSuffixes) {
            memcpy(name + length, suffix, strlen(suffix) + 1);
            unlink(name);
        }
    }
}

void on_sigterm(int sig)
{
    const int saved_errno = errno;
    unlink_tracked();
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
    unlink_tracked();
    /* Not waiting: a child forked while another thread held the mutex
     * would wait forever (and has no directories to leave). */
    const pid_t                  self = getpid();
    std::unique_lock<std::mutex> guard(g_mutex, std::try_to_lock);
    if (!guard.owns_lock()) {
        return;
    }
    for (LeaveSlot &slot : g_leaves) {
        if (slot.used && (slot.pid == self)) {
            slot.used = false;
            slot.fn(slot.arg);
        }
    }
}

void install()
{
    atexit(at_exit);
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
        if (slot.used.load(std::memory_order_relaxed)) {
            continue;
        }
        slot.gen.fetch_add(1, std::memory_order_acq_rel); /* odd: writing */
        std::atomic_thread_fence(std::memory_order_release);
        slot.pid    = getpid();
        slot.length = path.size();
        memcpy(slot.path, path.c_str(), path.size() + 1);
        slot.used.store(true, std::memory_order_release);
        slot.gen.fetch_add(1, std::memory_order_release);
        return i;
    }
    return -1;
}

void untrack_entry(int slot)
{
    if ((slot < 0) || (slot >= kMaxTrackedEntries)) {
        return;
    }
    std::lock_guard<std::mutex> guard(g_mutex);
    EntrySlot &s = g_entries[slot];
    s.gen.fetch_add(1, std::memory_order_acq_rel);
    s.used.store(false, std::memory_order_release);
    s.gen.fetch_add(1, std::memory_order_release);
}

int track_leave(LeaveFn fn, void *arg)
{
    std::call_once(g_installed, install);
    std::lock_guard<std::mutex> guard(g_mutex);
    for (int i = 0; i < kMaxTrackedEntries; ++i) {
        if (!g_leaves[i].used) {
            g_leaves[i] = {true, getpid(), fn, arg};
            return i;
        }
    }
    return -1;
}

void untrack_leave(int slot)
{
    if ((slot < 0) || (slot >= kMaxTrackedEntries)) {
        return;
    }
    std::lock_guard<std::mutex> guard(g_mutex);
    g_leaves[slot].used = false;
}

bool exit_cleanup_owns_sigterm()
{
    struct sigaction current = {};
    return (sigaction(SIGTERM, nullptr, &current) == 0) &&
           ((current.sa_flags & SA_SIGINFO) == 0) &&
           (current.sa_handler == on_sigterm);
}

} // namespace pxn
