#include <ucs/pxn/engine.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <pthread.h>
#include <sched.h>
#include <cstdio>
#include <sys/eventfd.h>
#include <thread>
#include <unistd.h>

namespace {

double thread_cpu_s()
{
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A client with no work, whose may_sleep() answers `nap`; it counts its
 * rounds and the engine thread's CPU time, and finds work once `fd` is
 * readable (then drains it). */
class Client : public pxn::EngineClient {
public:
    explicit Client(pxn::Nap nap) : nap_(nap), fd_(eventfd(0, EFD_NONBLOCK)) {}
    ~Client() override { close(fd_); }

    unsigned work() override
    {
        ++rounds;
        cpu_s.store(thread_cpu_s());
        unsigned long long run = 0, wait = 0;
        FILE *stat = fopen("/proc/thread-self/schedstat", "r");
        if ((stat != nullptr) && (fscanf(stat, "%llu %llu", &run, &wait) == 2)) {
            first_wait_ = (first_wait_ == 0) ? wait : first_wait_;
            waited_ns.store(wait - first_wait_);
        }
        if (stat != nullptr) {
            fclose(stat);
        }
        uint64_t value;
        if (read(fd_, &value, sizeof(value)) == sizeof(value)) {
            ++woken;
            return 1;
        }
        return 0;
    }
    pxn::Nap may_sleep() override { return nap_; }
    void woke() override {}
    std::vector<int> wait_fds() override { return {fd_}; }

    void ring()
    {
        const uint64_t one = 1;
        EXPECT_EQ(ssize_t(sizeof(one)), write(fd_, &one, sizeof(one)));
    }

    std::atomic<uint64_t> rounds{0}, woken{0};
    std::atomic<double>   cpu_s{0};
    std::atomic<uint64_t> waited_ns{0}; /* the engine thread, for a CPU */

private:
    unsigned long long first_wait_ = 0;
    pxn::Nap nap_;
    int      fd_;
};

} // namespace

/* The engine of a relay whose work is expected but unannounced (inner
 * completions to poll) naps between rounds: it leaves its core to others
 * instead of spinning or yielding it (a yielding thread beside a busy
 * poller waits a scheduler slice per round). */
TEST(Engine, NapsBetweenRoundsWhileWorkIsOnlyExpected)
{
    Client client(pxn::Nap::kShort);
    pxn::Engine::Options options;
    options.spin_ns = 0;
    options.poll_ns = 1000000; /* 1 ms */
    pxn::Engine engine;
    ASSERT_EQ(UCS_OK, engine.start(&client, options));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    engine.stop();
    /* about 500 rounds of 1 ms naps; a spinning loop makes millions */
    EXPECT_GT(client.rounds.load(), 50u);
    EXPECT_LT(client.rounds.load(), 5000u);
    EXPECT_LT(client.cpu_s.load(), 0.25) << "of 0.5 s: the engine did not nap";
}

/* With nothing to do and every source of work behind an fd, the engine
 * blocks; the fd's event wakes it at once, not at the end of its sleep. */
TEST(Engine, SleepsUntilAnFdWakesIt)
{
    Client client(pxn::Nap::kLong);
    pxn::Engine::Options options;
    options.spin_ns  = 0;
    options.sleep_ms = 60000;
    pxn::Engine engine;
    ASSERT_EQ(UCS_OK, engine.start(&client, options));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const uint64_t asleep = client.rounds.load();
    EXPECT_LT(asleep, 100u) << "it kept running instead of sleeping";
    client.ring();
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while ((client.woken.load() == 0) && (std::chrono::steady_clock::now() < until)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    engine.stop();
    EXPECT_EQ(1u, client.woken.load()) << "the fd did not end the 60 s sleep";
}

/* While it spins after work, the engine runs rounds without blocking:
 * a piece that comes within UCX_PXN_ENGINE_SPIN costs no wakeup (unless
 * the scheduler took its CPU meanwhile: then it stops spinning, below). */
TEST(Engine, SpinsAfterWorkBeforeItSleeps)
{
    /* the engine on the last CPU, this thread elsewhere: nothing of the
     * test's own takes the engine's CPU */
    cpu_set_t old, engine_cpu, others;
    ASSERT_EQ(0, pthread_getaffinity_np(pthread_self(), sizeof(old), &old));
    CPU_ZERO(&engine_cpu);
    others = old;
    for (int cpu = CPU_SETSIZE - 1; cpu >= 0; --cpu) {
        if (CPU_ISSET(cpu, &old)) {
            CPU_SET(cpu, &engine_cpu);
            CPU_CLR(cpu, &others);
            break;
        }
    }
    if (CPU_COUNT(&others) == 0) {
        GTEST_SKIP() << "needs two CPUs";
    }
    ASSERT_EQ(0, pthread_setaffinity_np(pthread_self(), sizeof(engine_cpu), &engine_cpu));
    Client client(pxn::Nap::kLong);
    pxn::Engine::Options options;
    options.spin_ns  = 200000000; /* 200 ms */
    options.sleep_ms = 60000;
    pxn::Engine engine;
    ASSERT_EQ(UCS_OK, engine.start(&client, options));
    ASSERT_EQ(0, pthread_setaffinity_np(pthread_self(), sizeof(others), &others));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const uint64_t spinning = client.rounds.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    const uint64_t after = client.rounds.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    engine.stop();
    ASSERT_EQ(0, pthread_setaffinity_np(pthread_self(), sizeof(old), &old));
    if (client.waited_ns.load() >= 200000) {
        GTEST_SKIP() << "another process took the engine's CPU: it rightly stopped "
                        "spinning";
    }
    EXPECT_GT(spinning, 1000u) << "no rounds while spinning";
    EXPECT_EQ(after, client.rounds.load()) << "still running after the spin";
}

/* On a CPU that another thread keeps busy the engine does not spin: each
 * round of spinning would spend the share of the CPU that lets its next
 * wakeup run at once. Here it shares one CPU with a spinning thread and
 * is woken every 20 ms; with a 200 ms spin it would never stop running. */
TEST(Engine, StopsSpinningOnACpuItShares)
{
    cpu_set_t cpu0, old;
    CPU_ZERO(&cpu0);
    CPU_SET(0, &cpu0);
    ASSERT_EQ(0, pthread_getaffinity_np(pthread_self(), sizeof(old), &old));
    ASSERT_EQ(0, pthread_setaffinity_np(pthread_self(), sizeof(cpu0), &cpu0));
    std::atomic<bool> stop{false};
    std::thread spinner([&] { /* inherits CPU 0 */
        while (!stop.load(std::memory_order_relaxed)) {
        }
    });
    Client client(pxn::Nap::kLong);
    pxn::Engine::Options options;
    options.spin_ns  = 200000000; /* 200 ms */
    options.sleep_ms = 60000;
    pxn::Engine engine;
    ASSERT_EQ(UCS_OK, engine.start(&client, options)); /* inherits CPU 0 */
    ASSERT_EQ(0, pthread_setaffinity_np(pthread_self(), sizeof(old), &old));
    uint64_t rounds_before = 0;
    for (int i = 0; i < 100; ++i) { /* 2 s */
        client.ring();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (i == 49) {
            rounds_before = client.rounds.load();
        }
    }
    const uint64_t rounds = client.rounds.load() - rounds_before;
    engine.stop();
    stop = true;
    spinner.join();
    EXPECT_GT(client.waited_ns.load(), 0u);
    EXPECT_LT(rounds, 10000u) << "rounds in the last second: it kept spinning";
}
