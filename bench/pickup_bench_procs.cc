/* The relay and sender processes of ucx_pxn_pickup_bench. */
#include "pickup_bench_procs.h"

#include <ucs/pxn/wakeup.h>

#include <ucs/async/async_fwd.h>
#include <ucs/time/time.h> /* ucs_time_from_usec: UCX source tree */

#include <cerrno>
#include <random>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <vector>

namespace pxn_tools {
namespace pickup {

namespace {

void busy_wait_until(uint64_t deadline_ns)
{
    while (now_ns() < deadline_ns) {
    }
}

void sleep_until(uint64_t deadline_ns)
{
    const struct timespec ts = {time_t(deadline_ns / 1000000000ull),
                                long(deadline_ns % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
}

/* The relay's side of the lane, the same for both designs. */
class Consumer {
public:
    explicit Consumer(const Area &area) : area_(area) {}

    bool pending() const { return load(area_.shared->doorbell) != seen_; }

    /* Takes every new doorbell; returns how many. */
    unsigned consume()
    {
        const uint64_t bell = load(area_.shared->doorbell);
        if (bell == seen_) {
            return 0;
        }
        const uint64_t now = now_ns();
        for (uint64_t s = seen_; s < bell; ++s) {
            area_.pickup_ns[s] = now - area_.ring_ns[s];
        }
        const uint64_t work = __atomic_load_n(&area_.shared->work_ns,
                                              __ATOMIC_RELAXED) * (bell - seen_);
        if (work != 0) {
            busy_wait_until(now_ns() + work);
        }
        const unsigned count = unsigned(bell - seen_);
        seen_                = bell;
        __atomic_store_n(&area_.shared->picked, bell, __ATOMIC_RELEASE);
        return count;
    }

    void count_wakeup()
    {
        __atomic_add_fetch(&area_.shared->wakeups, 1, __ATOMIC_RELAXED);
    }

private:
    const Area &area_;
    uint64_t    seen_ = 0;
};

/* Design (a): the client of the real pxn::Engine, as the relay would be. */
class EngineRelay : public pxn::EngineClient {
public:
    EngineRelay(Consumer &consumer, pxn::RelayWakeup &wake) :
        consumer_(consumer), wake_(wake) {}
    unsigned work() override { return consumer_.consume(); }
    pxn::Nap may_sleep() override
    {
        wake_.prepare_sleep();
        if (consumer_.pending()) {
            wake_.cancel_sleep();
            return pxn::Nap::kNone;
        }
        return pxn::Nap::kLong;
    }
    void woke() override
    {
        if (wake_.drain() != 0) {
            consumer_.count_wakeup();
        }
    }
    std::vector<int> wait_fds() override { return {wake_.fd()}; }

private:
    Consumer         &consumer_;
    pxn::RelayWakeup &wake_;
};

/* Design (b): one bounded round per event, so that the async thread serves
 * its other handlers and timers in between. drain() clears relay_sleeping,
 * so doorbells rung during consume() write nothing; the re-check after
 * prepare_sleep() catches them, and a byte written to our own FIFO (held
 * O_RDWR) brings the handler back instead of looping here. */
struct AsyncRelay {
    Consumer         *consumer;
    pxn::RelayWakeup *wake;
};

void async_relay_cb(int /*fd*/, ucs_event_set_types_t /*events*/, void *arg)
{
    auto *relay = static_cast<AsyncRelay*>(arg);
    relay->wake->drain();
    relay->consumer->count_wakeup();
    relay->consumer->consume();
    relay->wake->prepare_sleep();
    if (relay->consumer->pending()) {
        const char byte = 1;
        if (write(relay->wake->fd(), &byte, 1) < 0) {
            /* EAGAIN: the FIFO is full, so an event is pending anyway. */
        }
    }
}

/* Runs on the async thread only; the parent reads after removal (sync). */
void timer_cb(int /*id*/, ucs_event_set_types_t /*events*/, void *arg)
{
    auto *area       = static_cast<Area*>(arg);
    const uint64_t n = area->shared->timer_count;
    if (n < kTimerCapacity) {
        area->timer_ns[n]         = now_ns();
        area->shared->timer_count = n + 1;
    }
}

bool answer(int fd, uint64_t value)
{
    return write(fd, &value, sizeof(value)) == ssize_t(sizeof(value));
}

} // namespace

bool Area::map(size_t doorbells)
{
    bytes = sizeof(Shared) + (2 * doorbells + kTimerCapacity) * sizeof(uint64_t);
    void *mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        fprintf(stderr, "mmap of %zu bytes failed: %m\n", bytes);
        return false;
    }
    shared    = new (mem) Shared();
    ring_ns   = reinterpret_cast<uint64_t*>(shared + 1);
    pickup_ns = ring_ns + doorbells;
    timer_ns  = pickup_ns + doorbells;
    return true;
}

Area::~Area()
{
    if (shared != nullptr) {
        munmap(shared, bytes);
    }
}

int relay_main(bool use_engine, const pxn::Engine::Options &engine_options,
               Area &area, int dir_fd, const char *fifo, int in, int out)
{
    pxn::RelayWakeup wake;
    ucs_async_context_t *async = nullptr;
    if ((wake.create(dir_fd, fifo, &area.shared->relay_sleeping) != UCS_OK) ||
        (ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &async) != UCS_OK)) {
        return 1;
    }
    Consumer     consumer(area);
    EngineRelay  engine_relay(consumer, wake);
    AsyncRelay   async_relay{&consumer, &wake};
    pxn::Engine  engine;
    ucs_status_t status;
    if (use_engine) {
        status = engine.start(&engine_relay, engine_options);
    } else {
        wake.prepare_sleep(); /* nothing to re-check: no sender yet */
        status = ucs_async_set_event_handler(UCS_ASYNC_MODE_THREAD_SPINLOCK,
                                             wake.fd(), UCS_EVENT_SET_EVREAD,
                                             async_relay_cb, &async_relay, async);
    }
    if ((status != UCS_OK) || !answer(out, 0)) {
        return 1;
    }

    int     timer_id = -1;
    Command cmd;
    while ((read(in, &cmd, sizeof(cmd)) == ssize_t(sizeof(cmd))) &&
           (cmd.op != Op::kQuit)) {
        if ((cmd.op == Op::kBegin) && (cmd.count != 0)) {
            area.shared->timer_count = 0;
            /* One tick over: ucs_time_from_usec() truncates, and the async
             * thread truncates the time left to whole ms for epoll, so an
             * exact 2 ms can become a 1 ms wait plus a 1 ms spin (about half
             * the runs here, depending on the measured TSC frequency). */
            status = ucs_async_add_timer(UCS_ASYNC_MODE_THREAD_SPINLOCK,
                                         ucs_time_from_usec(kTimerPeriodUs) + 1,
                                         timer_cb, &area, async, &timer_id);
        } else if ((cmd.op == Op::kEnd) && (timer_id >= 0)) {
            status   = ucs_async_remove_handler(timer_id, 1);
            timer_id = -1;
        }
        if ((status != UCS_OK) || !answer(out, now_ns(CLOCK_PROCESS_CPUTIME_ID))) {
            break;
        }
    }
    if (use_engine) {
        engine.stop();
    } else {
        ucs_async_remove_handler(wake.fd(), 1);
    }
    ucs_async_context_destroy(async);
    return 0;
}

int sender_main(Area &area, int dir_fd, const char *fifo, int in, int out)
{
    pxn::SenderWakeup wake;
    if ((wake.open(dir_fd, fifo, &area.shared->relay_sleeping) != UCS_OK) ||
        !answer(out, 0)) {
        return 1;
    }
    /* The sender sleeps between doorbells (a spinning one would take one of
     * this host's two cores from the relay); with the default 50 us timer
     * slack a 20 us sleep would take 70. The achieved gap is reported. */
    prctl(PR_SET_TIMERSLACK, 1ul);
    std::mt19937 random(12345);
    uint64_t     last = now_ns();
    Command      cmd;
    while ((read(in, &cmd, sizeof(cmd)) == ssize_t(sizeof(cmd))) &&
           (cmd.op == Op::kRing)) {
        std::uniform_int_distribution<uint32_t> gap_us(cmd.gap_min_us, cmd.gap_max_us);
        for (uint32_t i = 0; i < cmd.count; ++i) {
            if ((i % cmd.burst) == 0) {
                sleep_until(last + gap_us(random) * 1000ull);
            }
            const uint64_t seq = area.shared->doorbell + 1; /* sole writer */
            last                  = now_ns();
            area.ring_ns[seq - 1] = last;
            __atomic_store_n(&area.shared->doorbell, seq, __ATOMIC_RELEASE);
            if (wake.notify() != UCS_OK) {
                return 1;
            }
            area.shared->notify_ns += now_ns() - last; /* read after the phase */
        }
        if (!answer(out, area.shared->doorbell)) {
            return 1;
        }
    }
    return 0;
}

} // namespace pickup
} // namespace pxn_tools
