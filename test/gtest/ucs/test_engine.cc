#include <ucs/pxn/engine.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <ctime>
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

private:
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
 * a piece that comes within UCX_PXN_ENGINE_SPIN costs no wakeup. */
TEST(Engine, SpinsAfterWorkBeforeItSleeps)
{
    Client client(pxn::Nap::kLong);
    pxn::Engine::Options options;
    options.spin_ns  = 200000000; /* 200 ms */
    options.sleep_ms = 60000;
    pxn::Engine engine;
    ASSERT_EQ(UCS_OK, engine.start(&client, options));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const uint64_t spinning = client.rounds.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    const uint64_t after = client.rounds.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    engine.stop();
    EXPECT_GT(spinning, 1000u) << "no rounds while spinning";
    EXPECT_EQ(after, client.rounds.load()) << "still running after the spin";
}
