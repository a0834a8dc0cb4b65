#include "engine.h"

#include "fork.h"

#include <ucs/debug/log_def.h>

#include <cerrno>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

namespace pxn {

namespace {
constexpr char kThreadName[] = "ucx-pxn"; /* what ucx_pxn_info and tests look for */
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

void Engine::loop()
{
    client_->thread_init();
    std::vector<pollfd> fds;
    unsigned idle = 0;

    ForkGate::enter();
    while (!stop_.load(std::memory_order_acquire)) {
        if (ForkGate::fork_pending()) {
            ForkGate::leave(); /* the fork goes between two rounds */
            ForkGate::enter();
        }
        if (client_->work() != 0) {
            idle = 0;
            continue;
        }
        if (++idle < options_.spin_rounds) {
            /* Stay responsive without starving others on a busy machine
             * (the target's receive, the application's own threads). */
            sched_yield();
            continue;
        }
        idle = 0;
        if (!client_->may_sleep()) {
            continue;
        }
        fds.clear();
        fds.push_back({stop_fd_, POLLIN, 0});
        fds.push_back({wake_fd_, POLLIN, 0});
        for (int fd : client_->wait_fds()) {
            fds.push_back({fd, POLLIN, 0});
        }
        ForkGate::leave();
        const int ready = poll(fds.data(), fds.size(), options_.sleep_ms);
        ForkGate::enter();
        if ((ready < 0) && (errno != EINTR)) {
            ucs_warn("pxn: engine poll failed: %m");
        }
        uint64_t drained;
        if (read(wake_fd_, &drained, sizeof(drained)) < 0) {
            /* EAGAIN: no wake() since the last sleep */
        }
        client_->woke();
        if (ready == 0) {
            /* A periodic wakeup (heartbeat): one round of work, then back
             * to sleep without spinning, so an idle relay costs nothing. */
            idle = options_.spin_rounds - 1;
        }
    }
    ForkGate::leave();
}

} // namespace pxn
