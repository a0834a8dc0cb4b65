#include "fork.h"

#include <ucs/debug/log_def.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <pthread.h>

namespace pxn {

namespace {

std::atomic<uint64_t> g_generation{0};

void child_forked()
{
    g_generation.fetch_add(1, std::memory_order_relaxed);
}

} // namespace

uint64_t fork_generation()
{
    return g_generation.load(std::memory_order_relaxed);
}

ForkBorn::ForkBorn()
{
    static std::once_flag installed;
    std::call_once(installed, [] {
        const int rc = pthread_atfork(nullptr, nullptr, child_forked);
        if (rc != 0) {
            ucs_warn("pxn: pthread_atfork failed: %s: a forked child would "
                     "take pxn objects of its parent for its own",
                     strerror(rc));
        }
    });
    born_ = fork_generation();
}

} // namespace pxn
