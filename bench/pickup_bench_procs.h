/*
 * The two child processes of ucx_pxn_pickup_bench (a relay and a sender),
 * the area they share and the command channel the parent drives them
 * with; the protocol and the phases are described in
 * ucx_pxn_pickup_bench.cc. Benchmark code: one header for the tool's two
 * files.
 */
#ifndef PXN_TOOLS_PICKUP_BENCH_PROCS_H_
#define PXN_TOOLS_PICKUP_BENCH_PROCS_H_

#include <ucs/pxn/engine.h>
#include <ucs/pxn/os_resource.h>

#include <cstdint>
#include <cstdio>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

namespace pxn_tools {
namespace pickup {

constexpr uint32_t kTimerPeriodUs = 2000; /* below 2 ms the async thread spins */
constexpr uint32_t kTimerCapacity = 1u << 16;

inline uint64_t now_ns(clockid_t clock = CLOCK_MONOTONIC)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

inline uint64_t load(const uint64_t &field)
{
    return __atomic_load_n(&field, __ATOMIC_ACQUIRE);
}

/* The shared area: this header, then ring_ns[capacity] (sender writes, relay
 * reads after its acquire of doorbell), pickup_ns[capacity] (relay writes,
 * parent reads after picked), timer_ns[kTimerCapacity] (the relay's timer
 * callback writes, parent reads after the timer was removed). */
struct Shared {
    alignas(64) uint64_t doorbell;       /* sender: store-release */
    uint64_t             notify_ns;      /* sender: time in release + notify() */
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
    size_t    bytes     = 0;

    /* Maps room for `doorbells` doorbells, MAP_SHARED, before fork. */
    bool map(size_t doorbells);
    ~Area();
};

/* Parent -> child commands, one fixed-size record each; each command but
 * kQuit gets one uint64_t answer. A child answers 0 once when it is ready.
 * Relay: kBegin (count 1: start the timer) and kEnd (stop it) of a phase
 * answer the process CPU time. Sender: kRing answers the last doorbell. */
enum class Op : uint32_t { kBegin, kEnd, kRing, kQuit };
struct Command {
    Op       op;
    uint32_t count;      /* kRing: doorbells; kBegin: timer on */
    uint32_t gap_min_us; /* kRing: gap before each burst, uniform in */
    uint32_t gap_max_us; /*        [min, max] */
    uint32_t burst;      /* kRing: doorbells rung back to back */
};

class Child {
public:
    /* Forks body(command fd, answer fd), whose result is the exit code, and
     * waits for its first answer. */
    template <typename F> bool spawn(F body)
    {
        int down[2], up[2];
        if ((pipe(down) != 0) || (pipe(up) != 0)) {
            fprintf(stderr, "pipe failed: %m\n");
            return false;
        }
        fflush(nullptr);
        pid_ = fork();
        if (pid_ == 0) {
            close(down[1]);
            close(up[0]);
            _exit(body(down[0], up[1]));
        }
        close(down[0]);
        close(up[1]);
        to_.reset(down[1]);
        from_.reset(up[0]);
        uint64_t ready;
        return (pid_ > 0) && receive(&ready);
    }

    bool call(const Command &cmd, uint64_t *answer = nullptr)
    {
        uint64_t value;
        return send(cmd) && receive(answer ? answer : &value);
    }

    /* Asks the child to quit; true if it exited with 0. */
    bool finish()
    {
        int status = 0;
        send({Op::kQuit, 0, 0, 0, 0});
        return (pid_ > 0) && (waitpid(pid_, &status, 0) == pid_) &&
               WIFEXITED(status) && (WEXITSTATUS(status) == 0);
    }

private:
    bool send(const Command &cmd)
    {
        return write(to_.get(), &cmd, sizeof(cmd)) == ssize_t(sizeof(cmd));
    }
    bool receive(uint64_t *value)
    {
        return read(from_.get(), value, sizeof(*value)) == ssize_t(sizeof(*value));
    }

    pid_t         pid_ = -1;
    pxn::UniqueFd to_, from_;
};

/* The children's bodies: exit codes, 0 on success. */
int relay_main(bool use_engine, const pxn::Engine::Options &engine_options,
               Area &area, int dir_fd, const char *fifo, int in, int out);
int sender_main(Area &area, int dir_fd, const char *fifo, int in, int out);

} // namespace pickup
} // namespace pxn_tools

#endif
