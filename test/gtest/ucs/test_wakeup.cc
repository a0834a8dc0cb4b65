#include <ucs/pxn/wakeup.h>

#include "../common/test_helpers.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

/* Shared-memory stand-in for a relay's header: the flag and, for the
 * multi-process tests, a work counter and the relay's progress. */
struct SharedState {
    uint32_t relay_sleeping;
    uint32_t pad;
    uint64_t work;
    uint64_t seen;
    uint64_t lost;
};

class WakeupTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_FALSE(dir_.path().empty());
        void *mem = mmap(nullptr, sizeof(SharedState), PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(MAP_FAILED, mem);
        shared_ = new (mem) SharedState();
        fifo_   = dir_.path() + "/p1-0000000000000001.wake";
    }

    void TearDown() override
    {
        children_.clear();
        if (shared_ != nullptr) {
            munmap(shared_, sizeof(SharedState));
        }
    }

    static int readable(int fd, int timeout_ms)
    {
        struct pollfd pfd = {fd, POLLIN, 0};
        return poll(&pfd, 1, timeout_ms);
    }

    pxn_test::ForkedChild &child()
    {
        children_.emplace_back(new pxn_test::ForkedChild());
        return *children_.back();
    }

    pxn_test::TempDir                                   dir_;
    SharedState                                        *shared_ = nullptr;
    std::string                                         fifo_;
    std::vector<std::unique_ptr<pxn_test::ForkedChild>> children_;
};

TEST_F(WakeupTest, FifoIsPrivateToItsOwner)
{
    const mode_t old_umask = umask(0);
    pxn::RelayWakeup relay;
    ASSERT_EQ(UCS_OK, relay.create(AT_FDCWD, fifo_, &shared_->relay_sleeping));
    umask(old_umask);
    struct stat st;
    ASSERT_EQ(0, lstat(fifo_.c_str(), &st));
    EXPECT_TRUE(S_ISFIFO(st.st_mode));
    EXPECT_EQ(0600u, st.st_mode & 07777);
}

TEST_F(WakeupTest, NotifyWritesNothingWhileTheRelayIsAwake)
{
    pxn::RelayWakeup  relay;
    pxn::SenderWakeup sender;
    ASSERT_EQ(UCS_OK, relay.create(AT_FDCWD, fifo_, &shared_->relay_sleeping));
    ASSERT_EQ(UCS_OK, sender.open(AT_FDCWD, fifo_, &shared_->relay_sleeping));
    for (int i = 0; i < 100; ++i) {
        EXPECT_EQ(UCS_OK, sender.notify());
    }
    EXPECT_EQ(0, readable(relay.fd(), 0));

    /* prepare + cancel: still nothing to drain */
    relay.prepare_sleep();
    relay.cancel_sleep();
    EXPECT_EQ(UCS_OK, sender.notify());
    EXPECT_EQ(0, readable(relay.fd(), 0));
    EXPECT_EQ(0u, relay.drain());
}

TEST_F(WakeupTest, NotifyWakesASleepingRelayOnceAndDrainClearsTheFlag)
{
    pxn::RelayWakeup  relay;
    pxn::SenderWakeup sender;
    ASSERT_EQ(UCS_OK, relay.create(AT_FDCWD, fifo_, &shared_->relay_sleeping));
    ASSERT_EQ(UCS_OK, sender.open(AT_FDCWD, fifo_, &shared_->relay_sleeping));

    relay.prepare_sleep();
    EXPECT_TRUE(relay.is_sleeping());
    EXPECT_EQ(1u, shared_->relay_sleeping);
    EXPECT_EQ(UCS_OK, sender.notify());
    EXPECT_EQ(1, readable(relay.fd(), pxn_test::scaled_ms(1000)));
    EXPECT_EQ(1u, relay.drain());
    EXPECT_FALSE(relay.is_sleeping());
    EXPECT_EQ(0, readable(relay.fd(), 0));
}

TEST_F(WakeupTest, FullPipeCountsAsAlreadySignalled)
{
    pxn::RelayWakeup  relay;
    pxn::SenderWakeup sender;
    ASSERT_EQ(UCS_OK, relay.create(AT_FDCWD, fifo_, &shared_->relay_sleeping));
    ASSERT_EQ(UCS_OK, sender.open(AT_FDCWD, fifo_, &shared_->relay_sleeping));
    const int capacity = fcntl(relay.fd(), F_GETPIPE_SZ);
    ASSERT_GT(capacity, 0);

    relay.prepare_sleep();
    for (int i = 0; i < capacity + 100; ++i) {
        ASSERT_EQ(UCS_OK, sender.notify()) << i;
    }
    EXPECT_EQ(size_t(capacity), relay.drain());
}

TEST_F(WakeupTest, WakesARelayBlockedInPollInAnotherProcess)
{
    SharedState      *shared = shared_;
    const std::string fifo   = fifo_;
    auto             &relay  = child();
    ASSERT_TRUE(relay.start([shared, fifo](pxn_test::ChildChannel &channel) {
        pxn::RelayWakeup wakeup;
        if (wakeup.create(AT_FDCWD, fifo, &shared->relay_sleeping) != UCS_OK) {
            return 1;
        }
        wakeup.prepare_sleep();
        channel.send("sleeping");
        struct pollfd pfd = {wakeup.fd(), POLLIN, 0};
        const auto    t0  = std::chrono::steady_clock::now();
        const int     rc  = poll(&pfd, 1, pxn_test::scaled_ms(5000));
        const auto    ms  = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::steady_clock::now() - t0).count();
        const size_t drained = wakeup.drain();
        channel.send((rc == 1) ? "woken " + std::to_string(drained) + " " +
                                         std::to_string(ms) :
                                 "timeout");
        return 0;
    }));
    std::string line;
    ASSERT_TRUE(relay.receive(&line));
    ASSERT_EQ("sleeping", line);

    pxn::SenderWakeup sender;
    ASSERT_EQ(UCS_OK, sender.open(AT_FDCWD, fifo_, &shared_->relay_sleeping));
    /* The child blocks in poll(): asleep (nothing else puts it to sleep
     * after "sleeping"), in a poll wait where the kernel tells. */
    ASSERT_TRUE(pxn_test::wait_until([&] {
        if (pxn_test::process_state(relay.pid()) != 'S') {
            return false;
        }
        const std::string wchan = pxn_test::process_wchan(relay.pid());
        return wchan.empty() || (wchan.find("poll") != std::string::npos);
    }, 5)) << "the child does not block in poll(): state "
           << pxn_test::process_state(relay.pid()) << ", wchan '"
           << pxn_test::process_wchan(relay.pid()) << "'";
    EXPECT_EQ(UCS_OK, sender.notify());
    ASSERT_TRUE(relay.receive(&line));
    EXPECT_EQ(0u, line.find("woken 1 ")) << line;
    EXPECT_EQ(0u, shared_->relay_sleeping);
    EXPECT_EQ(0, relay.wait());
}

TEST_F(WakeupTest, NoWakeupIsLostWhenSleepRacesWithNotify)
{
    constexpr uint64_t kRounds = 2000;
    SharedState       *shared  = shared_;
    const std::string  fifo    = fifo_;
    auto              &relay   = child();
    ASSERT_TRUE(relay.start([shared, fifo](pxn_test::ChildChannel &channel) {
        pxn::RelayWakeup wakeup;
        if (wakeup.create(AT_FDCWD, fifo, &shared->relay_sleeping) != UCS_OK) {
            return 1;
        }
        channel.send("ready");
        uint64_t seen = 0;
        while (seen < kRounds) {
            wakeup.prepare_sleep();
            const uint64_t work = __atomic_load_n(&shared->work, __ATOMIC_ACQUIRE);
            if (work != seen) {
                wakeup.cancel_sleep();
                seen = work;
                __atomic_store_n(&shared->seen, seen, __ATOMIC_RELEASE);
                continue;
            }
            struct pollfd pfd = {wakeup.fd(), POLLIN, 0};
            if (poll(&pfd, 1, pxn_test::scaled_ms(2000)) == 0) {
                /* The sender published work and saw us awake, or never
                 * published: either way a wakeup was lost. */
                __atomic_store_n(&shared->lost, seen + 1, __ATOMIC_RELEASE);
                return 2;
            }
            wakeup.drain();
        }
        return 0;
    }));
    std::string line;
    ASSERT_TRUE(relay.receive(&line));

    pxn::SenderWakeup sender;
    ASSERT_EQ(UCS_OK, sender.open(AT_FDCWD, fifo_, &shared_->relay_sleeping));
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(pxn_test::scaled_ms(20000));
    for (uint64_t round = 1; round <= kRounds; ++round) {
        /* Wait until the relay consumed the last round, so that it is going
         * to sleep while this round is published. */
        while ((__atomic_load_n(&shared_->seen, __ATOMIC_ACQUIRE) != round - 1) &&
               (__atomic_load_n(&shared_->lost, __ATOMIC_ACQUIRE) == 0)) {
            ASSERT_LT(std::chrono::steady_clock::now(), deadline);
        }
        ASSERT_EQ(0u, __atomic_load_n(&shared_->lost, __ATOMIC_ACQUIRE))
                << "lost wakeup in round " << round - 1;
        for (volatile unsigned spin = (round * 7919) % 3000; spin > 0; --spin) {
        }
        __atomic_store_n(&shared_->work, round, __ATOMIC_RELEASE);
        ASSERT_EQ(UCS_OK, sender.notify());
    }
    EXPECT_EQ(0, relay.wait(pxn_test::scaled_ms(20000)));
    EXPECT_EQ(0u, shared_->lost);
}

TEST_F(WakeupTest, SenderCannotOpenAMissingOrUnreadFifo)
{
    pxn::SenderWakeup sender;
    EXPECT_EQ(UCS_ERR_UNREACHABLE,
              sender.open(AT_FDCWD, fifo_, &shared_->relay_sleeping));
    /* A FIFO left behind by a dead relay has no reader. */
    ASSERT_EQ(0, mkfifo(fifo_.c_str(), 0600));
    EXPECT_EQ(UCS_ERR_UNREACHABLE,
              sender.open(AT_FDCWD, fifo_, &shared_->relay_sleeping));
    EXPECT_FALSE(sender.valid());
}

TEST_F(WakeupTest, SenderRefusesSomethingThatIsNotAFifo)
{
    const int fd = open(fifo_.c_str(), O_CREAT | O_WRONLY, 0600);
    ASSERT_GE(fd, 0);
    close(fd);
    pxn_test::LogCapture log;
    pxn::SenderWakeup    sender;
    EXPECT_EQ(UCS_ERR_REJECTED,
              sender.open(AT_FDCWD, fifo_, &shared_->relay_sleeping));
    EXPECT_TRUE(log.contains("not a FIFO")) << log.joined();

    ASSERT_EQ(0, unlink(fifo_.c_str()));
    ASSERT_EQ(0, symlink("/dev/null", fifo_.c_str()));
    EXPECT_NE(UCS_OK, sender.open(AT_FDCWD, fifo_, &shared_->relay_sleeping));
}

TEST_F(WakeupTest, RelayRefusesAnExistingFile)
{
    ASSERT_EQ(0, mkfifo(fifo_.c_str(), 0600));
    pxn_test::LogCapture log;
    pxn::RelayWakeup     relay;
    EXPECT_EQ(UCS_ERR_IO_ERROR,
              relay.create(AT_FDCWD, fifo_, &shared_->relay_sleeping));
    EXPECT_FALSE(relay.valid());
    EXPECT_TRUE(log.contains("File exists")) << log.joined();
}

TEST_F(WakeupTest, NotifyAfterTheRelayIsGoneFailsWithoutSigpipe)
{
    pxn::SenderWakeup sender;
    {
        pxn::RelayWakeup relay;
        ASSERT_EQ(UCS_OK, relay.create(AT_FDCWD, fifo_, &shared_->relay_sleeping));
        ASSERT_EQ(UCS_OK, sender.open(AT_FDCWD, fifo_, &shared_->relay_sleeping));
        relay.prepare_sleep(); /* and then the relay dies asleep */
    }
    EXPECT_EQ(UCS_ERR_CONNECTION_RESET, sender.notify());

    sigset_t pending, mask;
    sigpending(&pending);
    EXPECT_FALSE(sigismember(&pending, SIGPIPE));
    pthread_sigmask(SIG_SETMASK, nullptr, &mask);
    EXPECT_FALSE(sigismember(&mask, SIGPIPE));
}

TEST_F(WakeupTest, NotifyKeepsASigpipeThatWasAlreadyPending)
{
    pxn::SenderWakeup sender;
    {
        pxn::RelayWakeup relay;
        ASSERT_EQ(UCS_OK, relay.create(AT_FDCWD, fifo_, &shared_->relay_sleeping));
        ASSERT_EQ(UCS_OK, sender.open(AT_FDCWD, fifo_, &shared_->relay_sleeping));
        relay.prepare_sleep();
    }
    sigset_t pipe_set, old_mask, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
    raise(SIGPIPE);
    EXPECT_EQ(UCS_ERR_CONNECTION_RESET, sender.notify());
    sigpending(&pending);
    EXPECT_TRUE(sigismember(&pending, SIGPIPE));
    const struct timespec zero = {0, 0};
    EXPECT_EQ(SIGPIPE, sigtimedwait(&pipe_set, nullptr, &zero));
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
}

} // namespace
