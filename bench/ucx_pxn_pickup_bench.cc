/*
 * ucx_pxn_pickup_bench: how fast a relay notices a sender's doorbell, what it
 * costs while idle, and how much it delays other UCS async work, for the two
 * ways a relay can run without calls from its application:
 *   engine  the real pxn::Engine (a thread of our own) polls the doorbell,
 *           spins, then blocks in poll() on the wakeup FIFO;
 *   async   a UCS async event handler (UCS_ASYNC_MODE_THREAD_SPINLOCK) on the
 *           FIFO, run by UCX's one global async thread. It only fires
 *           through the FIFO, so this relay announces sleep (relay_sleeping
 *           = 1) whenever it is between events: every doorbell costs the
 *           sender a write() and the relay an epoll wakeup.
 * Results and the choice: docs/relay-engine.md. The two child processes
 * are in pickup_bench_procs.{h,cc}.
 *
 *   ucx_pxn_pickup_bench [--design engine|async|both] [--repeat R]
 *       [--samples N] [--gap-us G] [--burst B] [--work-us W]
 *       [--wake-samples M] [--idle-s S] [--timer-s T]
 *       [--spin-us U (engine; default: Engine::Options)]
 *
 * Processes: for every design and repeat the parent forks a relay and a
 * sender (before any thread or UCX context exists; libucs's constructor
 * starts none) sharing one anonymous MAP_SHARED area, and drives both over
 * pipes. The FIFO is made by the real pxn::RelayWakeup in a fresh directory
 * under /dev/shm, opened by the real pxn::SenderWakeup, then unlinked.
 *
 * Doorbell protocol (as on a lane): the sender stores ring_ns[seq - 1] =
 * CLOCK_MONOTONIC, store-releases doorbell = seq, then calls notify(). The
 * relay load-acquires doorbell and records pickup_ns[s - 1] = now -
 * ring_ns[s - 1] for every new s (doorbells seen together share `now`), then
 * busy-waits work_us per doorbell to stand for relay work (inner posts,
 * completion writes), then store-releases picked.
 *
 * Phases, in order, per design:
 *   timer   no doorbells; a 2 ms UCS async timer runs: its jitter floor
 *   active  N doorbells, in bursts of B (default 1) G us apart: pickup
 *           latency while the relay is busy
 *   work    as active, with W us of relay work per doorbell and the timer
 *           running: interference with other async work
 *   wake    M doorbells 10-20 ms apart (random): wake latency from sleep
 *   idle    nothing for S s: relay CPU while idle
 */
#include "pickup_bench_procs.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace {

using namespace pxn_tools::pickup;

constexpr uint32_t kWakeGapMinUs   = 10000;
constexpr uint32_t kWakeGapMaxUs   = 20000;
constexpr int      kPickupTimeoutS = 10;   /* for a phase's doorbells to be seen */

struct Options {
    bool     run_engine = true, run_async = true;
    uint32_t repeat = 1, samples = 50000, gap_us = 20, burst = 1, work_us = 10,
             wake_samples = 200;
    double   idle_s = 5.0, timer_s = 2.0;
    pxn::Engine::Options engine; /* the defaults unless --spin-us */
    uint32_t             spin_us = uint32_t(pxn::Engine::Options().spin_ns / 1000);
};

struct Phase {
    const char *name;
    uint32_t    count; /* doorbells (0: wait `seconds` instead) */
    uint32_t    gap_min_us, gap_max_us, burst, work_us;
    double      seconds;
    bool        timer;
};

/* Result columns, kept as doubles so that the median over repeats is one
 * loop. Latencies and timer intervals in us. */
enum Col { kGap, kNotify, kP50, kP90, kP99, kMax, kCpu, kCpuPerBell, kWakePerBell,
           kTimerP50, kTimerP99, kTimerMax, kCols };
const struct { const char *head; int precision; } kColumns[kCols] = {
    {"gap", 1}, {"notify", 2}, {"p50", 1}, {"p90", 1}, {"p99", 1}, {"max", 1},
    {"cpu%", 2}, {"cpu/bell", 2}, {"wake/bell", 2}, {"tmr p50", 0},
    {"tmr p99", 0}, {"tmr max", 0}};
const char *const kLegend =
    "gap: achieved mean us between doorbells; notify: sender us per doorbell in\n"
    "release + notify(); p50..max: pickup latency us (ring -> relay sees it);\n"
    "cpu%: relay process CPU, % of one core; cpu/bell: relay CPU us per doorbell;\n"
    "wake/bell: FIFO wakeups per doorbell; tmr: 2 ms timer interval us.\n";

struct Row {
    std::string design, phase;
    size_t      samples = 0;
    uint64_t    lost    = 0; /* doorbells not seen within kPickupTimeoutS */
    double      col[kCols] = {};
};

/* p50, p90, p99, max in us into out[0..3]; zeros when empty. */
void percentiles_us(std::vector<uint64_t> ns, double *out)
{
    std::sort(ns.begin(), ns.end());
    const double q[] = {0.50, 0.90, 0.99, 1.0};
    for (int i = 0; i < 4; ++i) {
        out[i] = ns.empty() ? 0 : ns[size_t(q[i] * double(ns.size() - 1))] / 1e3;
    }
}

bool run_phase(Child &relay, Child &sender, Area &area, const Phase &p,
                uint64_t &first, Row &row)
{
    Shared &sh = *area.shared;
    __atomic_store_n(&sh.work_ns, p.work_us * 1000, __ATOMIC_RELAXED);
    uint64_t cpu0, cpu1, last = first;
    const uint64_t wakeups0 = load(sh.wakeups), notify0 = load(sh.notify_ns);
    if (!relay.call({Op::kBegin, p.timer, 0, 0, 0}, &cpu0)) {
        return false;
    }
    const uint64_t t0 = now_ns();
    if (p.count != 0) {
        if (!sender.call({Op::kRing, p.count, p.gap_min_us, p.gap_max_us, p.burst},
                         &last)) {
            return false;
        }
        const uint64_t deadline = now_ns() + kPickupTimeoutS * 1000000000ull;
        while ((load(sh.picked) < last) && (now_ns() < deadline)) {
            usleep(1000);
        }
        row.lost = last - load(sh.picked);
    } else {
        usleep(useconds_t(p.seconds * 1e6));
    }
    if (!relay.call({Op::kEnd, 0, 0, 0, 0}, &cpu1)) {
        return false;
    }
    const double cpu_us = double(cpu1 - cpu0) / 1e3;
    row.col[kCpu]       = 100.0 * cpu_us * 1e3 / double(now_ns() - t0);
    if (p.timer) {
        std::vector<uint64_t> intervals;
        for (uint64_t i = 1; i < sh.timer_count; ++i) {
            intervals.push_back(area.timer_ns[i] - area.timer_ns[i - 1]);
        }
        double t[4];
        percentiles_us(intervals, t);
        row.col[kTimerP50] = t[0];
        row.col[kTimerP99] = t[2];
        row.col[kTimerMax] = t[3];
    }
    if (p.count != 0) {
        row.samples = last - row.lost - first;
        percentiles_us(std::vector<uint64_t>(area.pickup_ns + first,
                                             area.pickup_ns + first + row.samples),
                       &row.col[kP50]);
        row.col[kGap] = double(area.ring_ns[last - 1] - area.ring_ns[first]) / 1e3 /
                        double(p.count - 1);
        row.col[kNotify]      = double(load(sh.notify_ns) - notify0) / 1e3 / p.count;
        row.col[kCpuPerBell]  = cpu_us / p.count;
        row.col[kWakePerBell] = double(load(sh.wakeups) - wakeups0) / p.count;
    }
    first = last;
    return true;
}

bool run_design(bool use_engine, const Options &opt, const std::vector<Phase> &phases,
                std::vector<Row> &rows)
{
    const char *design = use_engine ? "engine" : "async";
    const char *fifo   = "relay.wake";
    size_t doorbells   = 0;
    for (const Phase &p : phases) {
        doorbells += p.count;
    }
    /* The FIFO lives only until the sender has opened it: nothing is left
     * behind in /dev/shm whatever happens next. */
    char dir[] = "/dev/shm/ucx-pxn-pickup-XXXXXX";
    Area area;
    if (!area.map(doorbells)) {
        return false;
    }
    if (mkdtemp(dir) == nullptr) {
        fprintf(stderr, "mkdtemp %s failed: %m\n", dir);
        return false;
    }
    pxn::UniqueFd dir_fd(open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    Child relay, sender;
    bool  ok = dir_fd.valid() &&
              relay.spawn([&](int in, int out) {
                  return relay_main(use_engine, opt.engine, area, dir_fd.get(),
                                    fifo, in, out); }) &&
              sender.spawn([&](int in, int out) {
                  return sender_main(area, dir_fd.get(), fifo, in, out); });
    unlinkat(dir_fd.get(), fifo, 0);
    rmdir(dir);

    uint64_t first = 0;
    for (size_t i = 0; ok && (i < phases.size()); ++i) {
        rows.push_back({design, phases[i].name});
        ok = run_phase(relay, sender, area, phases[i], first, rows.back());
    }
    ok = sender.finish() && ok;
    ok = relay.finish() && ok;
    if (!ok) {
        fprintf(stderr, "the %s relay or its sender failed\n", design);
    }
    return ok;
}

void print_rows(const char *title, const std::vector<Row> &rows)
{
    printf("\n%s\n%-6s %-6s %7s", title, "design", "phase", "samples");
    for (const auto &c : kColumns) {
        printf(" %9s", c.head);
    }
    printf("\n");
    for (const Row &r : rows) {
        printf("%-6s %-6s %7zu", r.design.c_str(), r.phase.c_str(), r.samples);
        for (int c = 0; c < kCols; ++c) {
            printf(" %9.*f", kColumns[c].precision, r.col[c]);
        }
        printf("%s\n", r.lost ? "  LOST DOORBELLS" : "");
    }
}

/* Per (design, phase), the median over repeats of every column. */
std::vector<Row> medians(const std::vector<Row> &all, unsigned repeat)
{
    const size_t     per_run = all.size() / repeat;
    std::vector<Row> out(all.begin(), all.begin() + long(per_run));
    for (size_t i = 0; i < per_run; ++i) {
        out[i].lost = 0;
        for (unsigned r = 0; r < repeat; ++r) {
            out[i].lost += all[r * per_run + i].lost;
        }
        for (int c = 0; c < kCols; ++c) {
            std::vector<double> v;
            for (unsigned r = 0; r < repeat; ++r) {
                v.push_back(all[r * per_run + i].col[c]);
            }
            std::sort(v.begin(), v.end());
            out[i].col[c] = (v[(v.size() - 1) / 2] + v[v.size() / 2]) / 2;
        }
    }
    return out;
}

bool parse(int argc, char **argv, Options &opt)
{
    const struct { const char *key; uint32_t *number; double *real; } keys[] = {
        {"--repeat", &opt.repeat, nullptr}, {"--samples", &opt.samples, nullptr},
        {"--gap-us", &opt.gap_us, nullptr}, {"--burst", &opt.burst, nullptr},
        {"--work-us", &opt.work_us, nullptr},
        {"--wake-samples", &opt.wake_samples, nullptr},
        {"--spin-us", &opt.spin_us, nullptr},
        {"--idle-s", nullptr, &opt.idle_s}, {"--timer-s", nullptr, &opt.timer_s}};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *value = argv[i + 1];
        bool        known = !strcmp(argv[i], "--design");
        if (known) {
            opt.run_engine = !strcmp(value, "engine") || !strcmp(value, "both");
            opt.run_async  = !strcmp(value, "async") || !strcmp(value, "both");
        }
        for (const auto &k : keys) {
            if (!strcmp(argv[i], k.key)) {
                known = true;
                if (k.number != nullptr) {
                    *k.number = uint32_t(strtoul(value, nullptr, 0));
                } else {
                    *k.real = atof(value);
                }
            }
        }
        if (!known) {
            return false;
        }
    }
    opt.engine.spin_ns = uint64_t(opt.spin_us) * 1000;
    return ((argc % 2) == 1) && (opt.run_engine || opt.run_async) &&
           (opt.repeat > 0) && (opt.samples > 1) && (opt.wake_samples > 1) &&
           (opt.burst > 0);
}

} // namespace

int main(int argc, char **argv)
{
    Options opt;
    if (!parse(argc, argv, opt)) {
        fprintf(stderr, "usage: %s [--design engine|async|both] [--repeat R] "
                "[--samples N] [--gap-us G] [--burst B] [--work-us W] "
                "[--wake-samples M] [--idle-s S] [--timer-s T] [--spin-rounds R]\n",
                argv[0]);
        return 2;
    }
    /* A child that died must fail its command, not kill the parent. */
    signal(SIGPIPE, SIG_IGN);

    const std::vector<Phase> phases = {
        {"timer", 0, 0, 0, 1, 0, opt.timer_s, true},
        {"active", opt.samples, opt.gap_us, opt.gap_us, opt.burst, 0, 0, false},
        {"work", opt.samples, opt.gap_us, opt.gap_us, opt.burst, opt.work_us, 0, true},
        {"wake", opt.wake_samples, kWakeGapMinUs, kWakeGapMaxUs, 1, 0, 0, false},
        {"idle", 0, 0, 0, 1, 0, opt.idle_s, false},
    };
    printf("bursts of %u doorbells %u us apart (active, work), %u us of relay "
           "work per doorbell (work), %u-%u us apart (wake); timer %u us; engine "
           "spin %lu us sleep_ms %d\n%s",
           opt.burst, opt.gap_us, opt.work_us, kWakeGapMinUs, kWakeGapMaxUs,
           kTimerPeriodUs, opt.engine.spin_ns / 1000, opt.engine.sleep_ms, kLegend);

    std::vector<Row> rows;
    bool ok = true;
    for (unsigned r = 0; ok && (r < opt.repeat); ++r) {
        /* Designs alternate so that slow drifts of a noisy host hit both. */
        for (bool use_engine : {true, false}) {
            if (ok && (use_engine ? opt.run_engine : opt.run_async)) {
                ok = run_design(use_engine, opt, phases, rows);
            }
        }
    }
    if (!ok) {
        return 1;
    }
    print_rows("every run:", rows);
    if (opt.repeat > 1) {
        const std::string title = "median of " + std::to_string(opt.repeat) +
                                  " runs, per column:";
        print_rows(title.c_str(), medians(rows, opt.repeat));
    }
    return 0;
}
