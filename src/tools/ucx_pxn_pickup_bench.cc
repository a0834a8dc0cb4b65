/*
 * ucx_pxn_pickup_bench: how fast a relay notices a sender's doorbell, what it
 * costs while idle, and how much it delays other UCS async work, for the two
 * ways a relay can run without calls from its application:
 *   engine  pxn::Engine (a thread of our own, default Options) that polls the
 *           doorbell, spins, then blocks in poll() on the wakeup FIFO;
 *   async   a UCS async event handler (UCS_ASYNC_MODE_THREAD_SPINLOCK) on the
 *           FIFO, run by UCX's one global async thread. It only fires
 *           through the FIFO, so this relay announces sleep (relay_sleeping
 *           = 1) whenever it is between events: every doorbell costs the
 *           sender a write() and the relay an epoll wakeup.
 * Results and the choice: docs/relay-engine.md.
 *
 *   ucx_pxn_pickup_bench [--design engine|async|both] [--repeat R]
 *       [--samples N] [--gap-us G] [--work-us W] [--wake-samples M]
 *       [--idle-s S] [--timer-s T] [--spin-rounds R (engine; default: Engine's)]
 *
 * Processes: for every design and repeat the parent forks a relay and a
 * sender (before any thread or UCX context exists; libucs's constructor
 * creates none) sharing one anonymous MAP_SHARED area, and drives both over
 * pipes. The FIFO is made by the real pxn::RelayWakeup in a fresh directory
 * under /dev/shm and opened by the real pxn::SenderWakeup.
 *
 * Doorbell protocol (as on a lane): the sender stores ring_ns[seq - 1] =
 * CLOCK_MONOTONIC, store-releases doorbell = seq, then calls notify(). The
 * relay load-acquires doorbell and records pickup_ns[s - 1] = now -
 * ring_ns[s - 1] for every new s (several doorbells seen at once all count,
 * with the same `now`), then busy-waits work_us per doorbell to stand for
 * relay work, then store-releases picked.
 *
 * Phases, in order, per design:
 *   timer    no doorbells; a 2 ms UCS async timer runs: its jitter floor
 *   active   N doorbells every G us: pickup latency while the relay is busy
 *   work     as active, with W us of relay work per doorbell and the timer
 *            running: interference with other async work
 *   wake     M doorbells 10-20 ms apart (random): wake latency from sleep
 *   idle     nothing for S s: relay CPU while idle
 * Relay CPU is CLOCK_PROCESS_CPUTIME_ID (all threads) over the phase.
 */
#include <ucs/pxn/engine.h>
#include <ucs/pxn/os_resource.h>
#include <ucs/pxn/wakeup.h>

#include <ucs/async/async_fwd.h>
#include <ucs/time/time.h> /* ucs_time_from_usec: UCX source tree */

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <random>
#include <string>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <vector>

namespace {

constexpr uint32_t kTimerPeriodUs  = 2000;  /* below 2 ms the async thread spins */
constexpr uint32_t kTimerCapacity  = 1u << 16;
constexpr uint32_t kWakeGapMinUs   = 10000;
constexpr uint32_t kWakeGapMaxUs   = 20000;
constexpr int      kPickupTimeoutS = 10;    /* a phase's doorbells all seen */

uint64_t now_ns(clockid_t clock = CLOCK_MONOTONIC)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

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

/* The shared area: this header, then ring_ns[capacity] (sender writes, relay
 * reads after the acquire of doorbell), pickup_ns[capacity] (relay writes,
 * parent reads after the phase), timer_ns[kTimerCapacity] (the relay's timer
 * callback writes, parent reads after the timer was removed). */
struct Shared {
    alignas(64) uint64_t doorbell;       /* sender: store-release */
    uint64_t             notify_ns;      /* sender: time spent in notify() */
    alignas(64) uint32_t relay_sleeping; /* RelayWakeup writes, sender reads */
    uint32_t             pad;
    uint64_t             picked;         /* relay: store-release */
    uint64_t             wakeups;        /* relay: FIFO wakeups handled */
    uint64_t             timer_count;    /* relay's timer callback */
    alignas(64) uint32_t work_ns;        /* parent, between phases */
};

struct Area {
    Shared   *shared    = nullptr;
    uint64_t *ring_ns   = nullptr;
    uint64_t *pickup_ns = nullptr;
    uint64_t *timer_ns  = nullptr;
    size_t    capacity  = 0;
    size_t    bytes     = 0;

    bool map(size_t doorbells)
    {
        capacity = doorbells;
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
    ~Area() { if (shared != nullptr) munmap(shared, bytes); }
};

/* The relay's view of the lane: what both designs share. */
class Consumer {
public:
    explicit Consumer(const Area &area) : area_(area) {}

    bool pending() const
    {
        return __atomic_load_n(&area_.shared->doorbell, __ATOMIC_ACQUIRE) != seen_;
    }

    /* Takes every new doorbell; returns how many. */
    unsigned consume()
    {
        const uint64_t bell = __atomic_load_n(&area_.shared->doorbell,
                                              __ATOMIC_ACQUIRE);
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

    void count_wakeup() { __atomic_add_fetch(&area_.shared->wakeups, 1, __ATOMIC_RELAXED); }

private:
    const Area &area_;
    uint64_t    seen_ = 0;
};

/* Design (a): the client of the real pxn::Engine. */
class EngineRelay : public pxn::EngineClient {
public:
    EngineRelay(Consumer &consumer, pxn::RelayWakeup &wake) :
        consumer_(consumer), wake_(wake) {}
    unsigned work() override { return consumer_.consume(); }
    bool may_sleep() override
    {
        wake_.prepare_sleep();
        if (consumer_.pending()) {
            wake_.cancel_sleep();
            return false;
        }
        return true;
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

/* Design (b): one bounded round per event, so the async thread can serve its
 * other handlers and timers in between. drain() clears relay_sleeping, so
 * doorbells rung during consume() write nothing; the re-check after
 * prepare_sleep() catches them, and a byte written to our own FIFO (we hold
 * it O_RDWR) brings the handler back instead of looping here. */
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

void timer_cb(int /*id*/, ucs_event_set_types_t /*events*/, void *arg)
{
    auto *area       = static_cast<Area*>(arg);
    const uint64_t n = area->shared->timer_count;
    if (n < kTimerCapacity) {
        area->timer_ns[n] = now_ns();
        __atomic_store_n(&area->shared->timer_count, n + 1, __ATOMIC_RELEASE);
    }
}

/* Parent -> child commands, one fixed-size record each; every command gets
 * one uint64_t answer. */
enum class Op : uint32_t { kTimerOn, kTimerOff, kCpu, kRing, kQuit };
struct Command {
    Op       op;
    uint32_t count;      /* kRing: doorbells */
    uint32_t gap_min_us; /* kRing: gap before each, uniform in [min, max] */
    uint32_t gap_max_us;
};

struct Child {
    pid_t         pid = -1;
    pxn::UniqueFd to, from;

    bool send(const Command &cmd)
    {
        return write(to.get(), &cmd, sizeof(cmd)) == ssize_t(sizeof(cmd));
    }

    uint64_t call(const Command &cmd)
    {
        uint64_t answer = UINT64_MAX;
        if (!send(cmd) ||
            (read(from.get(), &answer, sizeof(answer)) != ssize_t(sizeof(answer)))) {
            fprintf(stderr, "child %d does not answer: %m\n", int(pid));
            exit(1);
        }
        return answer;
    }
};

/* Forks `body(command fd, answer fd)`; the child _exits with its result. */
template <typename F> bool spawn(Child &child, F body)
{
    int down[2], up[2];
    if ((pipe(down) != 0) || (pipe(up) != 0)) {
        fprintf(stderr, "pipe failed: %m\n");
        return false;
    }
    fflush(nullptr);
    child.pid = fork();
    if (child.pid < 0) {
        fprintf(stderr, "fork failed: %m\n");
        return false;
    }
    if (child.pid == 0) {
        close(down[1]);
        close(up[0]);
        _exit(body(down[0], up[1]));
    }
    close(down[0]);
    close(up[1]);
    child.to.reset(down[1]);
    child.from.reset(up[0]);
    return true;
}

bool answer(int fd, uint64_t value)
{
    return write(fd, &value, sizeof(value)) == ssize_t(sizeof(value));
}

int relay_main(bool use_engine, const pxn::Engine::Options &engine_options,
               Area &area, int dir_fd, const std::string &fifo, int in, int out)
{
    pxn::RelayWakeup wake;
    ucs_async_context_t *async = nullptr;
    if ((wake.create(dir_fd, fifo, &area.shared->relay_sleeping) != UCS_OK) ||
        (ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &async) != UCS_OK)) {
        return 1;
    }
    Consumer    consumer(area);
    EngineRelay engine_relay(consumer, wake);
    AsyncRelay  async_relay{&consumer, &wake};
    pxn::Engine engine;
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
    while (read(in, &cmd, sizeof(cmd)) == ssize_t(sizeof(cmd))) {
        uint64_t value = 0;
        if (cmd.op == Op::kTimerOn) {
            area.shared->timer_count = 0;
            /* One tick over: ucs_time_from_usec() truncates, and the async
             * thread truncates the remaining time to whole ms for epoll, so
             * an exact 2 ms can become a 1 ms wait plus a 1 ms spin (about
             * half the runs, depending on the measured TSC frequency). */
            value = ucs_async_add_timer(UCS_ASYNC_MODE_THREAD_SPINLOCK,
                                        ucs_time_from_usec(kTimerPeriodUs) + 1,
                                        timer_cb, &area, async, &timer_id);
        } else if (cmd.op == Op::kTimerOff) {
            value = ucs_async_remove_handler(timer_id, 1);
        } else if (cmd.op == Op::kCpu) {
            value = now_ns(CLOCK_PROCESS_CPUTIME_ID);
        } else {
            break;
        }
        if (!answer(out, value)) {
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

int sender_main(Area &area, int dir_fd, const std::string &fifo, int in, int out)
{
    pxn::SenderWakeup wake;
    if (wake.open(dir_fd, fifo, &area.shared->relay_sleeping) != UCS_OK) {
        return 1;
    }
    /* The sender sleeps between doorbells (a spinning one would take one of
     * this host's two cores from the relay); without slack a 20 us sleep
     * overshoots by a few us instead of 50. The achieved gap is reported. */
    prctl(PR_SET_TIMERSLACK, 1ul);
    std::mt19937 random(12345);
    uint64_t     last = now_ns();
    Command      cmd;
    while ((read(in, &cmd, sizeof(cmd)) == ssize_t(sizeof(cmd))) &&
           (cmd.op == Op::kRing)) {
        std::uniform_int_distribution<uint32_t> gap_us(cmd.gap_min_us, cmd.gap_max_us);
        for (uint32_t i = 0; i < cmd.count; ++i) {
            sleep_until(last + gap_us(random) * 1000ull);
            const uint64_t seq = area.shared->doorbell + 1; /* sole writer */
            if (seq > area.capacity) {
                return 1;
            }
            last                   = now_ns();
            area.ring_ns[seq - 1] = last;
            __atomic_store_n(&area.shared->doorbell, seq, __ATOMIC_RELEASE);
            if (wake.notify() != UCS_OK) {
                return 1;
            }
            __atomic_store_n(&area.shared->notify_ns,
                             area.shared->notify_ns + (now_ns() - last),
                             __ATOMIC_RELAXED);
        }
        if (!answer(out, area.shared->doorbell)) {
            return 1;
        }
    }
    return 0;
}

struct Options {
    bool     run_engine = true, run_async = true;
    unsigned repeat = 1;
    uint32_t samples = 50000, gap_us = 20, work_us = 10, wake_samples = 200;
    double   idle_s = 5.0, timer_s = 2.0;
    pxn::Engine::Options engine; /* the defaults unless --spin-rounds */
};

struct Phase {
    const char *name;
    uint32_t    count;   /* doorbells (0: wait `seconds` instead) */
    uint32_t    gap_min_us, gap_max_us, work_us;
    double      seconds;
    bool        timer;
};

/* Microseconds at the given fractions of a sorted sample; 0 when empty. */
struct Stats {
    size_t n = 0;
    double p50 = 0, p90 = 0, p99 = 0, max = 0;
};

Stats stats_us(std::vector<uint64_t> ns)
{
    Stats s;
    s.n = ns.size();
    if (ns.empty()) {
        return s;
    }
    std::sort(ns.begin(), ns.end());
    auto at = [&](double q) { return ns[size_t(q * double(ns.size() - 1))] / 1e3; };
    s.p50 = at(0.50);
    s.p90 = at(0.90);
    s.p99 = at(0.99);
    s.max = at(1.0);
    return s;
}

struct Row {
    std::string design, phase;
    Stats       pickup, timer;     /* timer: intervals between firings */
    double      cpu_pct = 0;       /* relay CPU, % of one core */
    double      cpu_us_per_bell = 0;
    double      wakeups_per_bell = 0;
    double      gap_us = 0;        /* achieved mean gap between doorbells */
    double      notify_us = 0;     /* sender: mean cost of release + notify() */
    uint64_t    lost = 0;          /* doorbells not picked up in time */
};

bool run_design(bool use_engine, const Options &opt,
                const std::vector<Phase> &phases, int dir_fd, std::vector<Row> &rows)
{
    const char *design = use_engine ? "engine" : "async";
    const std::string fifo = std::string(design) + ".wake";
    size_t doorbells = 0;
    for (const Phase &p : phases) {
        doorbells += p.count;
    }
    Area area;
    if (!area.map(doorbells)) {
        return false;
    }
    Child relay, sender;
    if (!spawn(relay, [&](int in, int out) {
            return relay_main(use_engine, opt.engine, area, dir_fd, fifo, in, out); })) {
        return false;
    }
    uint64_t ready = UINT64_MAX;
    if (read(relay.from.get(), &ready, sizeof(ready)) != ssize_t(sizeof(ready))) {
        fprintf(stderr, "the %s relay failed to start\n", design);
        return false;
    }
    if (!spawn(sender, [&](int in, int out) {
            return sender_main(area, dir_fd, fifo, in, out); })) {
        return false;
    }

    uint64_t first = 0;
    for (const Phase &p : phases) {
        Row row;
        row.design = design;
        row.phase  = p.name;
        __atomic_store_n(&area.shared->work_ns, p.work_us * 1000, __ATOMIC_RELAXED);
        if (p.timer) {
            relay.call({Op::kTimerOn, 0, 0, 0});
        }
        const uint64_t wakeups0 = __atomic_load_n(&area.shared->wakeups, __ATOMIC_RELAXED);
        const uint64_t notify0  = __atomic_load_n(&area.shared->notify_ns, __ATOMIC_RELAXED);
        const uint64_t cpu0     = relay.call({Op::kCpu, 0, 0, 0});
        const uint64_t t0       = now_ns();
        uint64_t       last     = first;
        if (p.count != 0) {
            last = sender.call({Op::kRing, p.count, p.gap_min_us, p.gap_max_us});
            const uint64_t deadline = now_ns() + kPickupTimeoutS * 1000000000ull;
            while ((__atomic_load_n(&area.shared->picked, __ATOMIC_ACQUIRE) < last) &&
                   (now_ns() < deadline)) {
                usleep(1000);
            }
            row.lost = last - __atomic_load_n(&area.shared->picked, __ATOMIC_ACQUIRE);
        } else {
            usleep(useconds_t(p.seconds * 1e6));
        }
        const uint64_t cpu  = relay.call({Op::kCpu, 0, 0, 0}) - cpu0;
        const uint64_t wall = now_ns() - t0;
        if (p.timer) {
            relay.call({Op::kTimerOff, 0, 0, 0});
            std::vector<uint64_t> intervals;
            const uint64_t n = __atomic_load_n(&area.shared->timer_count, __ATOMIC_ACQUIRE);
            for (uint64_t i = 1; i < n; ++i) {
                intervals.push_back(area.timer_ns[i] - area.timer_ns[i - 1]);
            }
            row.timer = stats_us(intervals);
        }
        row.pickup = stats_us(std::vector<uint64_t>(area.pickup_ns + first,
                                                    area.pickup_ns + last - row.lost));
        row.cpu_pct = 100.0 * double(cpu) / double(wall);
        if (p.count != 0) {
            row.cpu_us_per_bell  = double(cpu) / 1e3 / p.count;
            row.wakeups_per_bell = double(__atomic_load_n(&area.shared->wakeups,
                                                          __ATOMIC_RELAXED) - wakeups0) / p.count;
            row.notify_us = double(__atomic_load_n(&area.shared->notify_ns,
                                                   __ATOMIC_RELAXED) - notify0) / 1e3 / p.count;
            row.gap_us = double(area.ring_ns[last - 1] - area.ring_ns[first]) / 1e3 /
                         std::max<uint64_t>(last - first - 1, 1);
        }
        rows.push_back(row);
        first = last;
    }
    sender.send({Op::kQuit, 0, 0, 0});
    relay.send({Op::kQuit, 0, 0, 0});
    int ok = 1;
    for (pid_t pid : {sender.pid, relay.pid}) {
        int wstatus = 0;
        waitpid(pid, &wstatus, 0);
        ok &= WIFEXITED(wstatus) && (WEXITSTATUS(wstatus) == 0);
    }
    unlinkat(dir_fd, fifo.c_str(), 0);
    return ok != 0;
}

void print_rows(const std::vector<Row> &rows)
{
    printf("%-6s %-6s %7s %7s %6s | %8s %8s %8s %9s | %6s %7s %6s | %7s %7s %7s\n",
           "design", "phase", "samples", "gap us", "ntf us", "p50 us", "p90 us",
           "p99 us", "max us", "cpu %", "us/bell", "wake/b", "tmr p50", "tmr p99",
           "tmr max");
    for (const Row &r : rows) {
        printf("%-6s %-6s %7zu %7.1f %6.2f | %8.1f %8.1f %8.1f %9.1f | %6.2f %7.2f "
               "%6.2f | %7.0f %7.0f %7.0f%s\n",
               r.design.c_str(), r.phase.c_str(), r.pickup.n, r.gap_us,
               r.notify_us, r.pickup.p50,
               r.pickup.p90, r.pickup.p99, r.pickup.max, r.cpu_pct,
               r.cpu_us_per_bell, r.wakeups_per_bell, r.timer.p50, r.timer.p99,
               r.timer.max, r.lost ? "  LOST DOORBELLS" : "");
    }
}

/* Median over repeats of every column, per (design, phase). */
void print_medians(const std::vector<Row> &all, size_t per_run, unsigned repeat)
{
    std::vector<Row> medians;
    for (size_t i = 0; i < per_run; ++i) {
        std::vector<const Row*> same;
        for (unsigned r = 0; r < repeat; ++r) {
            same.push_back(&all[r * per_run + i]);
        }
        auto median = [&](auto field) {
            std::vector<double> v;
            for (const Row *row : same) {
                v.push_back(field(*row));
            }
            std::sort(v.begin(), v.end());
            return v[v.size() / 2];
        };
        Row m = *same[0];
        m.pickup.p50 = median([](const Row &r) { return r.pickup.p50; });
        m.pickup.p90 = median([](const Row &r) { return r.pickup.p90; });
        m.pickup.p99 = median([](const Row &r) { return r.pickup.p99; });
        m.pickup.max = median([](const Row &r) { return r.pickup.max; });
        m.timer.p50  = median([](const Row &r) { return r.timer.p50; });
        m.timer.p99  = median([](const Row &r) { return r.timer.p99; });
        m.timer.max  = median([](const Row &r) { return r.timer.max; });
        m.cpu_pct    = median([](const Row &r) { return r.cpu_pct; });
        m.cpu_us_per_bell  = median([](const Row &r) { return r.cpu_us_per_bell; });
        m.wakeups_per_bell = median([](const Row &r) { return r.wakeups_per_bell; });
        m.gap_us           = median([](const Row &r) { return r.gap_us; });
        m.notify_us        = median([](const Row &r) { return r.notify_us; });
        m.lost = 0;
        for (const Row *row : same) {
            m.lost += row->lost;
        }
        medians.push_back(m);
    }
    printf("\nmedian of %u runs, per column:\n", repeat);
    print_rows(medians);
}

bool parse(int argc, char **argv, Options &opt)
{
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) {
            return false;
        }
        const std::string key   = argv[i];
        const char       *value = argv[i + 1];
        if (key == "--design") {
            opt.run_engine = !strcmp(value, "engine") || !strcmp(value, "both");
            opt.run_async  = !strcmp(value, "async") || !strcmp(value, "both");
        } else if (key == "--repeat") {
            opt.repeat = unsigned(atoi(value));
        } else if (key == "--samples") {
            opt.samples = uint32_t(atoi(value));
        } else if (key == "--gap-us") {
            opt.gap_us = uint32_t(atoi(value));
        } else if (key == "--work-us") {
            opt.work_us = uint32_t(atoi(value));
        } else if (key == "--wake-samples") {
            opt.wake_samples = uint32_t(atoi(value));
        } else if (key == "--idle-s") {
            opt.idle_s = atof(value);
        } else if (key == "--timer-s") {
            opt.timer_s = atof(value);
        } else if (key == "--spin-rounds") {
            opt.engine.spin_rounds = unsigned(atoi(value));
        } else {
            return false;
        }
    }
    return (opt.run_engine || opt.run_async) && (opt.repeat > 0);
}

} // namespace

int main(int argc, char **argv)
{
    Options opt;
    if (!parse(argc, argv, opt)) {
        fprintf(stderr, "usage: %s [--design engine|async|both] [--repeat R] "
                "[--samples N] [--gap-us G] [--work-us W] [--wake-samples M] "
                "[--idle-s S] [--timer-s T] [--spin-rounds R]\n", argv[0]);
        return 2;
    }
    /* A child that died must fail its command, not kill the parent. */
    signal(SIGPIPE, SIG_IGN);

    char dir[] = "/dev/shm/ucx-pxn-pickup-XXXXXX";
    if (mkdtemp(dir) == nullptr) {
        fprintf(stderr, "mkdtemp %s failed: %m\n", dir);
        return 1;
    }
    pxn::UniqueFd dir_fd(open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC));

    const std::vector<Phase> phases = {
        {"timer", 0, 0, 0, 0, opt.timer_s, true},
        {"active", opt.samples, opt.gap_us, opt.gap_us, 0, 0, false},
        {"work", opt.samples, opt.gap_us, opt.gap_us, opt.work_us, 0, true},
        {"wake", opt.wake_samples, kWakeGapMinUs, kWakeGapMaxUs, 0, 0, false},
        {"idle", 0, 0, 0, 0, opt.idle_s, false},
    };
    printf("doorbell every %u us (active, work), %u us of relay work per "
           "doorbell (work), wake gaps %u-%u us, timer period %u us, engine "
           "spin_rounds %u sleep_ms %d\n",
           opt.gap_us, opt.work_us, kWakeGapMinUs, kWakeGapMaxUs, kTimerPeriodUs,
           opt.engine.spin_rounds, opt.engine.sleep_ms);

    std::vector<Row> rows;
    bool ok = dir_fd.valid();
    for (unsigned r = 0; ok && (r < opt.repeat); ++r) {
        /* Designs alternate so that slow drifts of a noisy host hit both. */
        for (bool use_engine : {true, false}) {
            if ((use_engine ? opt.run_engine : opt.run_async) && ok) {
                ok = run_design(use_engine, opt, phases, dir_fd.get(), rows);
            }
        }
    }
    rmdir(dir);
    if (!ok) {
        fprintf(stderr, "a relay or sender failed\n");
        return 1;
    }
    print_rows(rows);
    if (opt.repeat > 1) {
        print_medians(rows, rows.size() / opt.repeat, opt.repeat);
    }
    return 0;
}
