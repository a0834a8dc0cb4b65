/*
 * UCP across emulated rails with ucp_rma_check, a NIXL-style one-sided
 * program that checks every byte (pxn_ucp.h): puts and gets through pxn,
 * NIXL's own configuration, pxn's counters in UCX's VFS and statistics, a
 * small registry file system, a relay killed under the puts.
 */
#include "pxn_ucp.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sys/mount.h>

namespace pxn_test {
namespace {

/* 4 x (64 MiB of puts + 64 MiB of gets) in blocks of 4 KiB..512 KiB: about
 * 2500 puts and 2500 gets, all requests of a phase posted at once. */
TEST_F(PxnUcp, RmaCheckPutsAndGetsCrossRail)
{
    rma_check_cross_rail(14107, 4, {});
}

/* NIXL's own UCP configuration on both sides (ucp_rma_check --nixl:
 * RNDV_THRESH=inf, MAX_RMA_RAILS=2, RC_FENCE=none, MAX_HCA_PER_GPU=auto
 * from 1.21, ...), peer error mode (from UCX 1.20 with an inner md without
 * memory invalidation): pxn is the lane of every put and get protocol
 * (gets: where UCP offloads them in peer error mode, 1.19 on). */
TEST_F(PxnUcp, RmaCheckPutsAndGetsCrossRailWithNixlSettings)
{
    std::vector<std::string> env = {"UCX_PROTO_INFO=y"};
    if (pxn_tools::make_var("PXN_UCP_PEER_BW_INVALIDATE") == "rndv") {
        env.push_back("UCX_CMA_MEMORY_INVALIDATE=n"); /* see nixl_env() */
    }
    rma_check_cross_rail(14120, 2, {"--nixl"}, env);
    EXPECT_NE(std::string::npos, initiator_log_.find("nixl config: RNDV_THRESH=inf "
                                                     "MAX_RMA_RAILS=2"))
            << tail(initiator_log_);
    expect_protocols(initiator_log_, "ucp_put", true);
    expect_protocols(initiator_log_, "ucp_get", peer_mode_gets_use_rma_lanes());
}

/* The initiator's pxn counters in UCX's VFS (what ucx_vfs shows under each
 * worker's pxn iface): one round of 64 MiB of puts and 64 MiB of gets (the
 * gets where peer-mode gets use RMA lanes) went
 * out through pxn. */
TEST_F(PxnUcp, RmaCheckShowsThePxnCountersInUcxVfs)
{
    rma_check_cross_rail(14117, 1, {"--vfs"});
    const std::string key = "/pxn/sender/bytes = ";
    const size_t at       = initiator_log_.find(key);
    ASSERT_NE(std::string::npos, at) << tail(initiator_log_);
    EXPECT_GE(strtoull(initiator_log_.c_str() + at + key.size(), nullptr, 10),
              (peer_mode_gets_use_rma_lanes() ? 128ull : 64ull) << 20)
            << tail(initiator_log_);
    EXPECT_NE(std::string::npos, initiator_log_.find("/pxn/rail = ")) << tail(initiator_log_);
    EXPECT_NE(std::string::npos, initiator_log_.find("/pxn/sender/failed_ops = 0"))
            << tail(initiator_log_);
    /* the active-message counters beside them */
    for (const char *name : {"relay/am_pieces", "relay/am_messages", "relay/am_bytes",
                             "relay/am_credit_waits", "sender/am_sent",
                             "sender/am_received", "sender/am_refused"}) {
        EXPECT_TRUE(std::regex_search(initiator_log_, std::regex(
                std::string("/pxn/") + name + " = [0-9]+\n")))
                << name << "\n" << tail(initiator_log_);
    }
    /* Its last reaped completion: seconds ago, not "never". */
    EXPECT_TRUE(std::regex_search(initiator_log_, std::regex(
            "/pxn/sender/last_completion_age = [0-9]+\\.[0-9]{3} s")))
            << tail(initiator_log_);
}

/* The initiator's pxn counters in a UCS statistics dump: a node "pxn"
 * under each pxn iface, counters named as in the VFS with '_' for '/'. Needs a UCX built with --enable-stats
 * (contrib/stats.sh builds one and runs this test); skipped otherwise. */
TEST_F(PxnUcp, RmaCheckWritesThePxnCountersToUcsStats)
{
    const auto build = pxn_test::run_program({pxn_test::ucx_prefix() + "/bin/ucx_info",
                                              "-b"});
    if (build.output.find("#define ENABLE_STATS") == std::string::npos) {
        GTEST_SKIP() << "this UCX has no statistics (--enable-stats): "
                        "bash contrib/stats.sh builds one and runs this test";
    }
    pxn_test::TempDir dir("/tmp/pxn-stats-");
    rma_check_cross_rail(14118, 1, {},
                         {"UCX_STATS_DEST=file:" + dir.path() + "/stats.%p",
                          "UCX_STATS_TRIGGER=exit"});
    uint64_t sent = 0, failed = 1;
    std::string dumps, node; /* node: the pxn node of the busiest dump */
    for (const auto &entry : std::filesystem::directory_iterator(dir.path())) {
        std::ifstream file(entry.path());
        const std::string text((std::istreambuf_iterator<char>(file)),
                               std::istreambuf_iterator<char>());
        dumps += text;
        std::smatch m;
        if (std::regex_search(text, m, std::regex("sender_bytes: ([0-9]+)")) &&
            (std::stoull(m[1]) > sent)) {
            sent = std::stoull(m[1]);
            const size_t at = text.rfind("pxn", m.position(0));
            node = text.substr((at == std::string::npos) ? 0 : at, 600);
            std::regex_search(text, m, std::regex("sender_failed_ops: ([0-9]+)"));
            failed = m.empty() ? 1 : std::stoull(m[1]);
        }
    }
    std::cout << "the initiator's pxn statistics node:\n" << node << "\n";
    EXPECT_GE(sent, (peer_mode_gets_use_rma_lanes() ? 128ull : 64ull) << 20)
            << dumps.substr(0, 4000);
    EXPECT_NE(std::string::npos, node.find("sender_last_completion_age_ms: "))
            << node;
    EXPECT_EQ(0u, failed) << dumps.substr(0, 4000);
}

/* The same with blocks above pxn's max_bcopy (64 KiB): only put/get_zcopy,
 * no put_bcopy waiting in the ep's pending queue. */
TEST_F(PxnUcp, RmaCheckZcopySizedBlocksCrossRail)
{
    rma_check_cross_rail(14108, 2, {"--min-block", "65537"});
}

/* Every put and get as bcopy (UCX_ZCOPY_THRESH=inf): blocks above pxn's
 * max_bcopy (64 KiB) go in several fragments, so a request waiting in the
 * ep's pending queue needs more than one dispatch (UCS_INPROGRESS). */
TEST_F(PxnUcp, RmaCheckBcopyFragmentsCrossRail)
{
    rma_check_cross_rail(14111, 1, {}, {"UCX_ZCOPY_THRESH=inf"});
}

/* Docker's default --shm-size: a 64 MiB tmpfs holds the registry of every
 * process of both nodes. The default geometry shrinks to fit (one warning
 * per process) and every byte of the puts and gets still goes through the
 * relay, verified, with no signal. */
TEST_F(PxnUcp, RmaCheckCrossRailWithA64MiBRegistryFileSystem)
{
    struct Tmpfs {
        pxn_test::TempDir dir{"/tmp/pxn-shm64-"};
        bool              mounted = false;
        ~Tmpfs()
        {
            if (mounted) {
                umount2(dir.path().c_str(), MNT_DETACH);
            }
        }
    } shm;
    ASSERT_FALSE(shm.dir.path().empty());
    ASSERT_EQ(0, mount("tmpfs", shm.dir.path().c_str(), "tmpfs", 0,
                       "size=64m,mode=0700")) << strerror(errno);
    shm.mounted = true;
    node_env_ = {"UCX_PXN_REGISTRY_DIR=" + shm.dir.path()};
    rma_check_cross_rail(14119, 1, {});
    EXPECT_EQ(1u, pxn_test::count_of(initiator_log_, "staging geometry reduced"))
            << tail(initiator_log_);
}

/* UCP's SGL datatype (UCX 1.22 on), as NIXL's UCX backend sends a
 * descriptor list with NIXL_UCX_SGL_ENABLE=y: 64 blocks of 8-64 KiB per
 * ucp_put_nbx, one put_sgl_zcopy of the pxn lane each; every byte checked
 * by the target, every byte through the relay. Puts only: UCP takes the SGL
 * datatype in ucp_put_nbx alone (master too, though its UCT has
 * get_sgl_zcopy); pxn's SGL gets are UCT's (test_pxn_sgl.cc). */
TEST_F(PxnUcp, RmaCheckSglPutsCrossRail)
{
#ifndef PXN_UCX_EP_PUT_SGL_ZCOPY
    GTEST_SKIP() << "this UCX has no SGL operations (UCX 1.22 on)";
#else
    std::vector<std::string> args = {"--sgl", "64", "--min-block", "8192",
                                     "--max-block", "65536", "--no-get"};
    rma_check_cross_rail(14140, 2, args, {"UCX_PROTO_INFO=y"});
    const OpTables t = op_tables(initiator_log_, "ucp_put");
    std::cout << "UCX_PROTO_INFO, ucp_put:\n" << t.text;
    EXPECT_NE(std::string::npos, t.text.find("sgl")) << t.text;
    EXPECT_GT(t.pxn_rows, 0u) << t.text;
#endif
}

/* With short credit timeouts and no fallback, 8 KiB gets and puts that
 * find the ring full end in errors UCP reports (exit status 3), never in
 * UCP's abort on a completion inside the posting call. */
TEST_F(PxnUcp, RmaCheckCreditTimeoutsEndInErrorsNeverInAnAbort)
{
    int port   = 14130;
    int failed = 0;
    for (const std::string timeout : {"1us", "1ms"}) {
        const std::vector<std::string> env = {"UCX_PXN_CREDIT_TIMEOUT=" + timeout,
                                              "UCX_PXN_FALLBACK=n"};
        BackgroundProcess *r01 = relay(Inner::kCma, kRelay01, env);
        BackgroundProcess *r10 = relay(Inner::kCma, kRelay10, env);
        BackgroundProcess *target = rma_target(port, env);
        ASSERT_TRUE(r01 && r10 && target);
        BackgroundProcess *in = rma_initiator(
                port++, {"--min-block", "8192", "--max-block", "8192", "--rounds",
                         "1", "--deadline", deadline(15)}, env);
        ASSERT_NE(nullptr, in);
        const int status = in->wait(scaled_ms(25000));
        const std::string log = in->output();
        EXPECT_TRUE((status == 0) || (status == 3)) << timeout << ": " << status
                                                    << "\n" << tail(log);
        EXPECT_EQ(std::string::npos, log.find("Assertion")) << tail(log);
        failed += (status == 3);
        target->wait(scaled_ms(10000));
        stop_relay(r01);
        stop_relay(r10);
    }
    EXPECT_GE(failed, 1) << "no credit timeout happened: nothing was tested";
}

TEST_F(PxnUcp, RmaCheckRelayKilledDuringPutsFailsTheInitiator)
{
    relay_killed_during_puts(14109, {});
}

TEST_F(PxnUcp, RmaCheckRelayKilledDuringZcopyPutsFailsTheInitiator)
{
    relay_killed_during_puts(14110, {"--min-block", "65537"});
}

} // namespace
} // namespace pxn_test
