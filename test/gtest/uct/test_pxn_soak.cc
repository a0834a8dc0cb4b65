/*
 * The soak (test/apps/ucx_pxn_soak.cc, docs/soak.md) in its short CI mode:
 * 16 cma processes, 7 senders into one relay plus traffic the other way,
 * relay restarts, every byte verified, no file left in the registries, no
 * growth of fds or memory. The self-tests show that its checks can fail.
 */
#include <apps/peer_process.h>

#include "../common/test_helpers.h"

#include <gtest/gtest.h>

#include <csignal>
#include <regex>
#include <cmath>
#include <string>
#include <unistd.h>

namespace {

class PxnSoak : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (geteuid() != 0) {
            GTEST_SKIP() << "needs root, like the other multi-process tests "
                            "(cma between processes)";
        }
        prefix_ = "soakt" + std::to_string(getpid());
    }

    void TearDown() override
    {
        for (int node = 0; node < 2; ++node) {
            pxn_test::remove_tree("/dev/shm/ucx-pxn-" + std::to_string(geteuid()) +
                                  "-" + prefix_ + "-node" + std::to_string(node));
        }
    }

    /* Runs the soak; its exit status, output in *output. */
    int soak(std::vector<std::string> args, int timeout_s, std::string *output)
    {
        args.insert(args.begin(),
                    {pxn_test::app("ucx_pxn_soak"),
                     "--prefix", prefix_});
        pxn_tools::BackgroundProcess p;
        std::string error;
        const std::string log = dir_.path() + "/soak.log";
        if (!p.start("", {}, args, log, &error)) {
            ADD_FAILURE() << error;
            return -1;
        }
        int status = p.wait(timeout_s * 1000);
        if (status == -1000) {
            p.kill(SIGKILL);
            p.wait(10000);
            ADD_FAILURE() << "the soak ran past " << timeout_s << " s";
        }
        *output = p.output();
        return status;
    }

    /* The first number after `label` in the output, -1 if none. */
    static long number_after(const std::string &output, const std::string &label)
    {
        const size_t at = output.find(label);
        return (at == std::string::npos) ? -1 :
               strtol(output.c_str() + at + label.size(), nullptr, 10);
    }

    std::string       prefix_;
    pxn_test::TempDir dir_{"/tmp/pxn-soak-test-"};
};

TEST_F(PxnSoak, ShortRunVerifiesEveryByteThroughRelayRestarts)
{
    /* The warm-up ends once every flow completed a round (10 s or more on
     * a loaded machine); a restart every 10 s after it leaves room for
     * three. A slower run (PXN_TEST_TIME_SCALE) gets a longer one. */
    const long duration = std::lround(pxn_test::scaled_s(60));
    std::vector<std::string> args = {"--duration", std::to_string(duration),
                                     "--max-size", "4M", "--warmup", "10",
                                     "--restart-every", "10",
                                     "--progress-every", "10"};
#ifdef __SANITIZE_ADDRESS__
    /* ASan's quarantine keeps freed memory resident (up to 256 MiB a
     * process), and its shadow and per-size caches come on top: RSS growth
     * says nothing about leaks there (a 240 s run grew 310-324 MiB). */
    args.insert(args.end(), {"--rss-tolerance", "512,100"});
#endif
    std::string out;
    const int status = soak(args, 360 + duration, &out);
    EXPECT_EQ(0, status) << out;
    EXPECT_NE(std::string::npos, out.find("\nRESULT: PASS\n")) << out;
    EXPECT_NE(std::string::npos, out.find("final check: 16/16 target buffers"))
            << out;
    EXPECT_GE(number_after(out, "relay restarts: "), 3) << out;
    EXPECT_GT(number_after(out, "rounds: "), 16) << out;
    EXPECT_GT(number_after(out, "operations: "), 1000) << out;
    /* Relay restarts fail the operations in flight through them; each was
     * issued again. */
    const long failed = number_after(out, "UCT operations), ");
    EXPECT_GE(failed, 1) << out;
    EXPECT_EQ(failed, number_after(out, "before, ")) << "retried" << out;
    EXPECT_EQ(std::string::npos, out.find("FAILURE")) << out;
    EXPECT_NE(std::string::npos,
              out.find("-node0: removed by the last process to quit")) << out;
    EXPECT_NE(std::string::npos,
              out.find("-node1: removed by the last process to quit")) << out;
}

TEST_F(PxnSoak, SelfTestACorruptedTargetBufferFailsTheSoak)
{
    std::string out;
    EXPECT_EQ(1, soak({"--duration", "8", "--max-size", "256K", "--warmup", "2",
                       "--restart-every", "0", "--inject", "corrupt"}, 240, &out))
            << out;
    EXPECT_NE(std::string::npos, out.find("final check: 15/16")) << out;
    EXPECT_TRUE(std::regex_search(out, std::regex(
            "FAILURE: node0/rail0 -> node1/rail1 via node0/rail1: final check "
            "answered 'bad [0-9]+'"))) << out;
    EXPECT_NE(std::string::npos, out.find("\nRESULT: FAIL\n")) << out;
}

TEST_F(PxnSoak, SelfTestAFileLeftInARegistryFailsTheSoak)
{
    std::string out;
    EXPECT_EQ(1, soak({"--duration", "8", "--max-size", "256K", "--warmup", "2",
                       "--restart-every", "0", "--inject", "leak"}, 240, &out))
            << out;
    EXPECT_NE(std::string::npos, out.find("after every process quit: "
                                          "p1-0000000000000001.arena")) << out;
    EXPECT_NE(std::string::npos, out.find("\nRESULT: FAIL\n")) << out;
}

} // namespace
