/*
 * The engine thread of a process's pxn (one per process, pxn::uct::Node):
 * drives its relays and inner workers without any call from the
 * application, which may be blocked elsewhere.
 *
 * Why a thread and not a UCS async handler: docs/relay-engine.md has the
 * measurements. In short: relay work (inner posts, completion writes) would
 * run on UCX's one global async thread and delay every other context's
 * keepalive, tcp accepts and timers; a thread of our own busy-polls while
 * pieces flow and blocks in poll() when idle.
 *
 * Loop contract: work() is called while it returns work, then again
 * without pause for `spin_ns` (the next piece of a transfer usually comes
 * within it). Then may_sleep() says how long the thread may block (having
 * announced the sleep to senders and re-checked for work, see wakeup.h):
 * not at all (work is pending: a round follows at once), `poll_ns` (work is
 * expected that no fd announces: completions to poll, a doorbell a GPU
 * stream will ring) or `sleep_ms` (every source of work has an fd). The
 * thread blocks in ppoll() on the client's fds for that long and calls
 * woke() afterwards. It never yields its core while runnable: a thread that
 * sched_yield()s to a busy-polling neighbour gets the core back only when
 * the scheduler's tick preempts the neighbour (docs/relay-engine.md), while
 * a thread that blocks is run again as soon as it is woken.
 * The thread holds the ForkGate (fork.h) except while it sleeps and
 * between two rounds when a fork is pending: a fork() of the process never
 * catches it inside a round.
 */
#ifndef PXN_ENGINE_H_
#define PXN_ENGINE_H_

#include <ucs/type/status.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace pxn {

/* How long the engine thread may block (EngineClient::may_sleep). */
enum class Nap {
    kNone,  /* work is pending: another round now */
    kShort, /* work is expected without an fd to announce it: poll_ns */
    kLong   /* every source of work has an fd: sleep_ms */
};

class EngineClient {
public:
    virtual ~EngineClient() = default;
    /* One round of work; returns how much was done. */
    virtual unsigned work() = 0;
    /* Called before blocking; for kShort and kLong the client has announced
     * the sleep to everyone whose work must wake it. */
    virtual Nap may_sleep() = 0;
    /* Called after poll() returned, whatever the reason. */
    virtual void woke() = 0;
    /* The fds to block on (readable = work may be waiting). */
    virtual std::vector<int> wait_fds() = 0;
    /* First thing the thread does (e.g. make a CUDA context current). */
    virtual void thread_init() {}
};

class Engine {
public:
    struct Options {
        uint64_t spin_ns  = 50000; /* idle rounds without pause before a nap */
        uint64_t poll_ns  = 20000; /* a short nap (Nap::kShort) */
        int      sleep_ms = 100;   /* longest sleep (heartbeat period) */
    };

    Engine() = default;
    ~Engine() { stop(); }
    Engine(const Engine&) = delete;
    Engine &operator=(const Engine&) = delete;

    ucs_status_t start(EngineClient *client, const Options &options);
    /* Joins the thread; the client is not called after stop() returns. */
    void stop();
    /* In a forked child, where the thread is the parent's and does not
     * exist: forgets it (leaked, never joined) and closes this process's
     * copies of the fds. */
    void abandon();
    /* Ends a sleep early: the client's work() runs again soon. Any thread. */
    void wake();
    bool running() const { return thread_.joinable(); }

private:
    void loop();
    void close_fds();

    EngineClient     *client_ = nullptr;
    Options           options_;
    std::atomic<bool> stop_{false};
    int               stop_fd_ = -1; /* eventfd: interrupts poll() on stop */
    int               wake_fd_ = -1; /* eventfd: wake() */
    std::thread       thread_;
};

} // namespace pxn

#endif
