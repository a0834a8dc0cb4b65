#include "fork.h"

#include <ucs/debug/log_def.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <pthread.h>
#include <sched.h>

namespace pxn {

namespace {

/* The gate is two counters, not a pthread lock: a lock taken in the
 * prepare handler cannot always be released in the child (a rwlock checks
 * the writer's thread id, which the child's thread does not have). The
 * stores and loads are sequentially consistent: a thread that enters sees
 * a pending fork, or the fork sees it inside. */
std::atomic<uint64_t> g_generation{0};
std::atomic<bool>     g_fork_pending{false};
std::atomic<unsigned> g_inside{0};

void before_fork()
{
    g_fork_pending.store(true);
    while (g_inside.load() != 0) {
        sched_yield(); /* a gated thread finishes its round */
    }
}

void after_fork_in_parent()
{
    g_fork_pending.store(false);
}

void after_fork_in_child()
{
    g_generation.fetch_add(1, std::memory_order_relaxed);
    g_inside.store(0); /* the gated threads are the parent's */
    g_fork_pending.store(false);
}

} // namespace

uint64_t fork_generation()
{
    return g_generation.load(std::memory_order_relaxed);
}

void watch_forks()
{
    static std::once_flag installed;
    std::call_once(installed, [] {
        const int rc = pthread_atfork(before_fork, after_fork_in_parent,
                                      after_fork_in_child);
        if (rc != 0) {
            ucs_warn("pxn: pthread_atfork failed: %s: a forked child would "
                     "take pxn objects of its parent for its own",
                     strerror(rc));
        }
    });
}

ForkBorn::ForkBorn()
{
    watch_forks();
    born_ = fork_generation();
}

void ForkGate::enter()
{
    for (;;) {
        while (g_fork_pending.load()) {
            sched_yield(); /* a fork is under way: it goes first */
        }
        g_inside.fetch_add(1);
        if (!g_fork_pending.load()) {
            return;
        }
        g_inside.fetch_sub(1);
    }
}

void ForkGate::leave()
{
    g_inside.fetch_sub(1);
}

bool ForkGate::fork_pending()
{
    return g_fork_pending.load(std::memory_order_relaxed);
}

} // namespace pxn
