#include "engine.h"

#include "fork.h"

#include <ucs/debug/log_def.h>

#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <ctime>
#include <poll.h>
#include <sys/prctl.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

namespace pxn {

namespace {
constexpr char kThreadName[] = "ucx-pxn"; /* what ucx_pxn_info and tests look for */
constexpr uint64_t kShareWaitNs = 200000;    /* waited for a CPU: it is shared */
constexpr uint64_t kShareNs     = 1000000000; /* then no spin for this long */
constexpr unsigned kSpinCheck   = 256;        /* spin rounds between two looks */
}

ucs_status_t Engine::start(EngineClient *client, const Options &options)
{
    client_  = client;
    options_ = options;
    stop_    = false;
    stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if ((stop_fd_ < 0) || (wake_fd_ < 0)) {
        ucs_error("pxn: eventfd failed: %m");
        close_fds();
        return UCS_ERR_IO_ERROR;
    }
    watch_forks();
    try {
        thread_ = std::thread(&Engine::loop, this);
        /* Named before start() returns: whoever lists the process's
         * threads after that sees "ucx-pxn", however late it is scheduled. */
        pthread_setname_np(thread_.native_handle(), kThreadName);
    } catch (const std::exception &e) {
        ucs_error("pxn: failed to start the engine thread: %s", e.what());
        close_fds();
        return UCS_ERR_NO_RESOURCE;
    }
    return UCS_OK;
}

void Engine::stop()
{
    if (!thread_.joinable()) {
        return;
    }
    stop_.store(true, std::memory_order_release);
    uint64_t one = 1;
    if (write(stop_fd_, &one, sizeof(one)) < 0) {
        /* The counter cannot overflow here; the flag alone still stops the
         * thread at its next wakeup. */
    }
    thread_.join();
    close_fds();
}

void Engine::abandon()
{
    if (thread_.joinable()) {
        (void)new std::thread(std::move(thread_)); /* never joined: leaked */
    }
    close_fds();
}

void Engine::close_fds()
{
    for (int *fd : {&stop_fd_, &wake_fd_}) {
        if (*fd >= 0) {
            close(*fd);
            *fd = -1;
        }
    }
}

void Engine::wake()
{
    uint64_t one = 1;
    if ((wake_fd_ >= 0) && (write(wake_fd_, &one, sizeof(one)) < 0)) {
        /* EAGAIN: the counter is full, a wakeup is pending anyway. */
    }
}

namespace {

inline void cpu_relax()
{
#if defined(__x86_64__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

uint64_t now_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

/* How long the calling thread has waited, runnable, for a CPU (its
 * schedstat, opened as `fd`); 0 when the kernel does not say. */
uint64_t waited_ns(int fd)
{
    char text[96];
    const ssize_t n = (fd < 0) ? -1 : pread(fd, text, sizeof(text) - 1, 0);
    if (n <= 0) {
        return 0;
    }
    text[n] = '\0';
    unsigned long long run = 0, wait = 0;
    return (sscanf(text, "%llu %llu", &run, &wait) == 2) ? wait : 0;
}

} // namespace

void Engine::loop()
{
    /* Short naps end when asked, not up to 50 us later (the default slack). */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    client_->thread_init();
    std::vector<pollfd> fds;
    uint64_t idle_since = 0; /* 0: the last round did work */
    /* Spinning is free only on a CPU nobody else wants: once the thread
     * waited kShareWaitNs for a CPU since the last look, it blocks at once
     * for kShareNs (a spin would spend the fair share that lets its next
     * wakeup preempt a busy poller at once). A kernel thread's short turn
     * does not count; a busy poller's tick does. */
    const int sched_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    uint64_t waited       = waited_ns(sched_fd);
    uint64_t shared_until = 0;
    unsigned spins        = 0;

    ForkGate::enter();
    while (!stop_.load(std::memory_order_acquire)) {
        if (ForkGate::fork_pending()) {
            ForkGate::leave(); /* the fork goes between two rounds */
            ForkGate::enter();
        }
        if (client_->work() != 0) {
            idle_since = 0;
            continue;
        }
        const uint64_t now = now_ns();
        if (idle_since == 0) {
            idle_since = now;
        }
        /* Looked at when a spin starts, every kSpinCheck rounds of it and
         * before a nap: a read of /proc each. */
        if ((idle_since == now) || ((++spins % kSpinCheck) == 0) ||
            (now - idle_since >= options_.spin_ns)) {
            const uint64_t total = waited_ns(sched_fd);
            if (total - waited >= kShareWaitNs) {
                shared_until = now + kShareNs;
            }
            waited = total;
        }
        if ((now - idle_since < options_.spin_ns) && (now >= shared_until)) {
            cpu_relax();
            continue;
        }
        const Nap nap = client_->may_sleep();
        if (nap == Nap::kNone) {
            continue;
        }
        fds.clear();
        fds.push_back({stop_fd_, POLLIN, 0});
        fds.push_back({wake_fd_, POLLIN, 0});
        for (int fd : client_->wait_fds()) {
            fds.push_back({fd, POLLIN, 0});
        }
        const uint64_t ns = (nap == Nap::kShort) ? options_.poll_ns :
                            uint64_t(options_.sleep_ms) * 1000000ull;
        const timespec timeout = {time_t(ns / 1000000000ull), long(ns % 1000000000ull)};
        ForkGate::leave();
        const int ready = ppoll(fds.data(), fds.size(), &timeout, nullptr);
        ForkGate::enter();
        if ((ready < 0) && (errno != EINTR)) {
            ucs_warn("pxn: engine poll failed: %m");
        }
        uint64_t drained;
        if (read(wake_fd_, &drained, sizeof(drained)) < 0) {
            /* EAGAIN: no wake() since the last sleep */
        }
        client_->woke();
        /* Woken by an fd: spin again after the work it brought (pieces come
         * in bursts). A nap that timed out (a heartbeat, or polling for
         * completions) does one round and naps again without spinning, so
         * that an idle relay costs nothing and a polling one leaves the
         * core to others between its rounds. */
        idle_since = (ready > 0) ? 0 : idle_since;
    }
    ForkGate::leave();
    if (sched_fd >= 0) {
        close(sched_fd);
    }
}

} // namespace pxn
