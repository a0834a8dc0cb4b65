/*
 * Fixture of the UCP tests (test_pxn_ucp.cc: ucx_perftest;
 * test_pxn_ucp_rma.cc: ucp_rma_check). UCP picks pxn: UCX's own ucx_perftest and ucp_rma_check (a NIXL-style UCP
 * program, ucp_rma_check.cc next to this file) run between processes of the
 * emulated rail-only topology (contrib/topology.sh, prefix "pxnu", 2 nodes x
 * 2 rails), with ucx_pxn_relay processes in the other slots. The tests read
 * which lanes UCP chose from the client's UCX_LOG_LEVEL=info output (its
 * "ep_cfg[N]: ..." lines) and how many bytes went through pxn from the
 * relays' counters (printed when they stop on SIGTERM, or read from their
 * registry entries while they run).
 *
 * Inner transports: cma (same host; rails told apart by UCX_PXN_RAIL_MAP,
 * pxn device "memory"; puts and gets) or tcp over the rail interfaces
 * (UCX_PXN_HOME_DEVICE=rail<r>, pxn device "front"; no GET, so pxn is no
 * RMA lane there and serves rendezvous puts). UCP's own tcp stays on the
 * frontend (UCX_NET_DEVICES, docs/topology.md).
 */
#ifndef PXN_TEST_PXN_UCP_H_
#define PXN_TEST_PXN_UCP_H_

#include <apps/locate.h>
#include <apps/peer_process.h>

#include "../common/test_helpers.h"
#include "ucp_output.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

extern char **environ;

namespace pxn_test {


using pxn_tools::BackgroundProcess;

/* --deadline of ucp_rma_check (seconds, an alarm()), scaled like the
 * tests' own bounds. */
inline std::string deadline(unsigned seconds)
{
    return std::to_string(unsigned(pxn_test::scaled_s(seconds)));
}

constexpr const char *kPrefix = "pxnu";

/* kRailOnly: inner tcp, and UCX of every process limited to its own rail
 * NIC (UCX_NET_DEVICES=rail<r>): nothing of UCP's own reaches another
 * rail, the frontend carries only the programs' out-of-band exchange. */
enum class Inner { kCma, kTcp, kRailOnly };

struct Slot {
    int node, rail;
};

/* The cross-rail pair and its relays: the initiator's node relays towards
 * rail 1 (puts, and the initiator's gets), the target's node towards rail 0
 * (the target's own operations: rendezvous gets of a receiver). */
constexpr Slot kClient = {0, 0}, kServer = {1, 1};
constexpr Slot kRelay01 = {0, 1}, kRelay10 = {1, 0};

struct RelayStats {
    bool     found = false;
    uint64_t pieces = 0, bytes = 0, failed = 0, rejected = 0;
    uint64_t am_messages = 0, am_credit_waits = 0;
};

inline std::string front_ip(Slot s)
{
    return "10.99." + std::to_string(s.node) + "." + std::to_string(s.rail + 1);
}

class PxnUcp : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        if (geteuid() != 0) {
            return;
        }
        auto r = pxn_test::run_program({"/bin/bash", script(), "up", "--nodes", "2",
                                        "--rails", "2", "--prefix", kPrefix});
        topology_ok_  = (r.exit_code == 0);
        topology_log_ = r.output;
    }

    static void TearDownTestSuite()
    {
        if (geteuid() == 0) {
            pxn_test::run_program({"/bin/bash", script(), "down", "--prefix", kPrefix});
        }
    }

    void SetUp() override
    {
        if (geteuid() != 0) {
            GTEST_SKIP() << "needs root: the rail topology uses network namespaces";
        }
        ASSERT_TRUE(topology_ok_) << topology_log_;
        const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
        group_ = "u" + std::to_string(getpid() % 1000) + "x" +
                 std::to_string(std::hash<std::string>()(info->name()) % 100000);
        logs_.reset(new pxn_test::TempDir("/tmp/pxn-ucp-"));
        ASSERT_FALSE(logs_->path().empty());
    }

    void TearDown() override
    {
        procs_.clear(); /* kills and reaps what still runs */
        for (int node = 0; node < 2; ++node) {
            pxn_test::remove_tree("/dev/shm/ucx-pxn-" + std::to_string(geteuid()) +
                                  "-" + group(node));
        }
    }

    static std::string script()
    {
        return pxn_test::source_dir() + "/contrib/topology.sh";
    }

    static std::string ucx_bin(const std::string &name)
    {
        return pxn_test::ucx_prefix() + "/bin/" + name;
    }

    static std::string rma_check()
    {
        return pxn_test::app("ucp_rma_check");
    }

    std::string group(int node) const
    {
        return group_ + "-node" + std::to_string(node);
    }

    /* The environment of a UCP process or relay in slot s: the UCX_*
     * variables of the test's own environment are unset first, except
     * UCX_PLUGIN_PATH (how the suite may load the module). */
    std::vector<std::string> env(Inner inner, Slot s,
                                 const std::vector<std::string> &extra) const
    {
        std::vector<std::string> e;
        for (char **v = environ; *v != nullptr; ++v) {
            const std::string var = *v;
            if ((var.rfind("UCX_", 0) == 0) &&
                (var.rfind("UCX_PLUGIN_PATH=", 0) != 0)) {
                e.push_back(var.substr(0, var.find('=') + 1));
            }
        }
        const std::string rail = "rail" + std::to_string(s.rail);
        e.insert(e.end(), {"UCX_PXN_NODE_ID=node" + std::to_string(s.node),
                           "UCX_PXN_GROUP=" + group(s.node), "UCX_TLS=pxn,tcp"});
        if (inner == Inner::kCma) {
            e.insert(e.end(), {"UCX_PXN_NET_TLS=cma", "UCX_PXN_RAIL_MAP=memory:" + rail,
                               "UCX_NET_DEVICES=front,memory"});
#ifdef PXN_UCX_MD_FLAG_INVALIDATE_RMA
            /* UCX 1.15 on takes a connect-to-iface transport as a bulk
             * (RMA_BW) lane of an ep in peer error mode only if its md
             * invalidates memory (from 1.20: only with rendezvous on);
             * pxn's md does where its inner md does: cma when told so, as
             * rc/dc of mlx5 do with KSM. nixl_env() unsets it where UCP
             * does without. */
            e.push_back("UCX_CMA_MEMORY_INVALIDATE=y");
#endif
        } else {
            e.insert(e.end(), {"UCX_PXN_NET_TLS=tcp", "UCX_PXN_HOME_DEVICE=" + rail,
                               (inner == Inner::kRailOnly) ?
                               "UCX_NET_DEVICES=" + rail : "UCX_NET_DEVICES=front"});
        }
        e.insert(e.end(), node_env_.begin(), node_env_.end());
        e.insert(e.end(), extra.begin(), extra.end());
        return e;
    }

    BackgroundProcess *spawn(const std::string &name, Inner inner, Slot s,
                             const std::vector<std::string> &argv,
                             const std::vector<std::string> &extra_env = {})
    {
        const std::string ns = std::string(kPrefix) + "-n" + std::to_string(s.node) +
                               "r" + std::to_string(s.rail);
        procs_.emplace_back(new BackgroundProcess());
        std::string error;
        if (!procs_.back()->start(ns, env(inner, s, extra_env), argv,
                                  logs_->path() + "/" + name + ".log", &error)) {
            ADD_FAILURE() << name << ": " << error;
            return nullptr;
        }
        return procs_.back().get();
    }

    BackgroundProcess *relay(Inner inner, Slot s,
                             const std::vector<std::string> &extra_env = {})
    {
        std::vector<std::string> argv = {ucx_bin("ucx_pxn_relay")};
        if (inner == Inner::kTcp) {
            argv.insert(argv.end(), {"-d", "front"});
        }
        const std::string name = "relay-n" + std::to_string(s.node) + "r" +
                                 std::to_string(s.rail);
        BackgroundProcess *p = spawn(name, inner, s, argv, extra_env);
        if ((p != nullptr) && !p->wait_for_output("relaying on", scaled_ms(10000))) {
            ADD_FAILURE() << name << " did not start:\n" << p->output();
            return nullptr;
        }
        return p;
    }

    /* SIGTERM: the relay prints its counters and exits. */
    RelayStats stop_relay(BackgroundProcess *p)
    {
        RelayStats st;
        p->kill(SIGTERM);
        EXPECT_EQ(0, p->wait(scaled_ms(10000))) << p->output();
        const std::string out = p->output();
        const size_t at = out.find("relayed ");
        st.found = (at != std::string::npos) &&
                   (sscanf(out.c_str() + at, "relayed %lu pieces, %lu bytes, %lu "
                           "failed, %lu rejected", &st.pieces, &st.bytes, &st.failed,
                           &st.rejected) == 4);
        const size_t am = out.find("; am ", at);
        st.found = st.found && (am != std::string::npos) &&
                   (sscanf(out.c_str() + am, "; am %lu messages, %lu credit waits",
                           &st.am_messages, &st.am_credit_waits) == 2);
        EXPECT_TRUE(st.found) << out;
        return st;
    }

    struct PerftestRun {
        int         client = -1000, server = -1000;
        std::string client_log, server_log;
    };

    /* ucx_perftest server in `server`, client in kClient with
     * UCX_LOG_LEVEL=info; each bounded in time. */
    PerftestRun perftest(Inner inner, Slot server, int port,
                         const std::vector<std::string> &args,
                         const std::vector<std::string> &extra_env = {})
    {
        PerftestRun run;
        const std::string p = std::to_string(port);
        BackgroundProcess *srv = spawn("server", inner, server,
                                       {ucx_bin("ucx_perftest"), "-p", p}, extra_env);
        if (srv == nullptr) {
            return run;
        }
        /* Not asserted: a client that finds no server says so. */
        pxn_test::wait_until([&] {
            return listening(srv->pid(), port) || (srv->wait(0) != -1000);
        }, 10, 0.01);
        std::vector<std::string> argv = {ucx_bin("ucx_perftest"), front_ip(server),
                                         "-p", p};
        argv.insert(argv.end(), args.begin(), args.end());
        std::vector<std::string> client_env = extra_env;
        client_env.push_back("UCX_LOG_LEVEL=info");
        BackgroundProcess *cli = spawn("client", inner, kClient, argv, client_env);
        if (cli != nullptr) {
            run.client     = cli->wait(scaled_ms(30000));
            run.client_log = cli->output();
        }
        run.server     = srv->wait((run.client == 0) ? scaled_ms(10000) : 0);
        run.server_log = srv->output();
        return run;
    }

    /* The UCX_PROTO_INFO=y tables of `operation` in a client's log: where
     * protocols v2 are the default, there are some, and pxn is in all of
     * their rows (`pxn` true) or in none; printed, so that the test log
     * shows which lanes UCP chose. */
    void expect_protocols(const std::string &log, const char *operation, bool pxn)
    {
        if ((operation == nullptr) || !new_protocols_by_default()) {
            return;
        }
        const OpTables t = op_tables(log, operation);
        std::cout << "UCX_PROTO_INFO, " << operation << ":\n" << t.text;
        EXPECT_GT(t.count, 0u) << "no protocol table of " << operation << ":\n"
                               << tail(log);
        EXPECT_GT(t.rows, 0u);
        EXPECT_EQ(pxn ? t.rows : 0u, t.pxn_rows) << t.text;
    }

    /* Cross-rail perftest: client exits 0 with a "Final:" line, a pxn lane
     * in its ep configuration (and in every protocol of `operation`), and
     * at least `bytes` through `via`. */
    void cross_rail_perftest(Inner inner, int port, const std::vector<std::string> &args,
                             const std::vector<std::string> &extra_env, Slot via,
                             uint64_t bytes, const char *operation = nullptr,
                             bool pxn_protocols = true)
    {
        /* pxn's own settings go to the relays too (every node alike); a
         * wired relay says so when it starts and logs each route it wires
         * (debug level) */
        std::vector<std::string> relay_env;
        for (const std::string &e : extra_env) {
            if (e.rfind("UCX_PXN_", 0) == 0) {
                relay_env.push_back(e);
            }
        }
        const bool wired = std::find(extra_env.begin(), extra_env.end(),
                                     "UCX_PXN_NET_CONNECT=wired") != extra_env.end();
        if (wired) {
            relay_env.push_back("UCX_LOG_LEVEL=debug");
        }
        BackgroundProcess *r01 = relay(inner, kRelay01, relay_env);
        BackgroundProcess *r10 = relay(inner, kRelay10, relay_env);
        ASSERT_TRUE(r01 && r10);
        std::vector<std::string> env = extra_env;
        env.push_back("UCX_PROTO_INFO=y");
        const PerftestRun run = perftest(inner, kServer, port, args, env);
        ASSERT_EQ(0, run.client) << "client:\n" << tail(run.client_log)
                                 << "\nserver:\n" << tail(run.server_log);
        EXPECT_NE(std::string::npos, run.client_log.find("Final:")) << run.client_log;
        EXPECT_EQ(0, run.server) << tail(run.server_log);
        const auto cfgs = ep_cfg_lines(run.client_log);
        EXPECT_TRUE(any_pxn_lane(cfgs)) << "no pxn lane:\n" << joined(cfgs)
                                        << tail(run.client_log);
        if (inner == Inner::kRailOnly) {
            /* no lane on a rail NIC that cannot reach the peer */
            EXPECT_TRUE(only_pxn_lanes(cfgs)) << joined(cfgs);
        }
        expect_protocols(run.client_log, operation, pxn_protocols);
        const RelayStats s01 = stop_relay(r01), s10 = stop_relay(r10);
        const RelayStats &carrier = (via.node == kRelay01.node) ? s01 : s10;
        if (wired) {
            BackgroundProcess *r = (via.node == kRelay01.node) ? r01 : r10;
            EXPECT_NE(std::string::npos, r->output().find("inner tcp wired over tcp"))
                    << r->output();
            EXPECT_NE(std::string::npos, r->output().find("route 0 wired"))
                    << "relay n" << via.node << "r" << via.rail << " wired no route";
        }
        EXPECT_GE(carrier.bytes, bytes) << "relay n" << via.node << "r" << via.rail;
        for (const RelayStats *s : {&s01, &s10}) {
            EXPECT_EQ(0u, s->failed);
            EXPECT_EQ(0u, s->rejected);
        }
    }

    /* Same-rail perftest (client n0r0, server n1r0, relays of rail 1 on
     * both nodes): no pxn lane, in the ep configuration or in any protocol
     * of `operation`, and not a byte through a relay. */
    void same_rail_perftest(Inner inner, int port, const std::vector<std::string> &args,
                            const std::vector<std::string> &extra_env,
                            const char *operation = nullptr)
    {
        no_pxn_perftest(inner, {1, 0}, {kRelay01, {1, 1}}, port, args, extra_env,
                        operation);
    }

    /* A perftest pair that pxn must stay out of: client n0r0, server in
     * `server`, relays in `relays`. */
    void no_pxn_perftest(Inner inner, Slot server, const std::vector<Slot> &relays,
                         int port, const std::vector<std::string> &args,
                         const std::vector<std::string> &extra_env,
                         const char *operation)
    {
        BackgroundProcess *r01 = relay(inner, relays[0]);
        BackgroundProcess *r11 = relay(inner, relays[1]);
        ASSERT_TRUE(r01 && r11);
        std::vector<std::string> env = extra_env;
        env.push_back("UCX_PROTO_INFO=y");
        const PerftestRun run = perftest(inner, server, port, args, env);
        ASSERT_EQ(0, run.client) << "client:\n" << tail(run.client_log)
                                 << "\nserver:\n" << tail(run.server_log);
        EXPECT_NE(std::string::npos, run.client_log.find("Final:")) << run.client_log;
        const auto cfgs = ep_cfg_lines(run.client_log);
        EXPECT_FALSE(cfgs.empty()) << "no ep_cfg line:\n" << tail(run.client_log);
        EXPECT_FALSE(any_pxn_lane(cfgs)) << joined(cfgs);
        expect_protocols(run.client_log, operation, false);
        for (BackgroundProcess *r : {r01, r11}) {
            const RelayStats s = stop_relay(r);
            EXPECT_EQ(0u, s.bytes);
            EXPECT_EQ(0u, s.pieces);
        }
    }

    /* ucp_rma_check: target in kServer, initiator in kClient (cma inner). */
    BackgroundProcess *rma_target(int port, const std::vector<std::string> &extra_env,
                                  const std::vector<std::string> &args = {},
                                  Inner inner = Inner::kCma)
    {
        if (access(rma_check().c_str(), X_OK) != 0) {
            ADD_FAILURE() << rma_check() << " is missing: make check builds it "
                          << "(make test/gtest/ucp/ucp_rma_check)";
            return nullptr;
        }
        std::vector<std::string> argv = {rma_check(), "--target", "-p",
                                         std::to_string(port), "--deadline", deadline(40)};
        argv.insert(argv.end(), args.begin(), args.end());
        BackgroundProcess *t = spawn("target", inner, kServer, argv, extra_env);
        if ((t != nullptr) && !t->wait_for_output("listening", scaled_ms(10000))) {
            ADD_FAILURE() << "target did not start:\n" << t->output();
            return nullptr;
        }
        return t;
    }

    BackgroundProcess *rma_initiator(int port, std::vector<std::string> args,
                                     std::vector<std::string> extra_env,
                                     Inner inner = Inner::kCma)
    {
        std::vector<std::string> argv = {rma_check(), "--initiator", front_ip(kServer),
                                         "-p", std::to_string(port)};
        argv.insert(argv.end(), args.begin(), args.end());
        extra_env.push_back("UCX_LOG_LEVEL=info");
        return spawn("initiator", inner, kClient, argv, extra_env);
    }

    /* Puts and gets, every byte verified; all of them through the relay
     * of rail 1 on the initiator's node. */
    void rma_check_cross_rail(int port, unsigned rounds, std::vector<std::string> args,
                              const std::vector<std::string> &extra_env = {})
    {
        constexpr uint64_t kRegion = 64ul << 20;
        BackgroundProcess *r01 = relay(Inner::kCma, kRelay01);
        BackgroundProcess *r10 = relay(Inner::kCma, kRelay10);
        const bool nixl = std::find(args.begin(), args.end(), "--nixl") != args.end();
        BackgroundProcess *target = rma_target(port, extra_env,
                                               nixl ? std::vector<std::string>{"--nixl"} :
                                                      std::vector<std::string>{});
        ASSERT_TRUE(r01 && r10 && target);
        args.insert(args.end(), {"--rounds", std::to_string(rounds), "--deadline",
                                 deadline(15)});
        BackgroundProcess *in = rma_initiator(port, args, extra_env);
        ASSERT_NE(nullptr, in);
        const int status = in->wait(scaled_ms(25000));
        const std::string log = in->output();
        initiator_log_ = log;
        EXPECT_EQ(0, status) << tail(log) << "\ntarget:\n" << tail(target->output());
        EXPECT_NE(std::string::npos, log.find("initiator result=ok"));
        EXPECT_NE(std::string::npos, log.find("err_handler_calls=0"));
        const auto cfgs = ep_cfg_lines(log);
        EXPECT_NE(std::string::npos, joined(cfgs).find("rma(pxn/"))
                << "no pxn RMA lane:\n" << joined(cfgs);
        EXPECT_EQ(0, target->wait(scaled_ms(10000))) << tail(target->output());
        EXPECT_NE(std::string::npos, target->output().find("target result=ok"));
        const RelayStats s01 = stop_relay(r01), s10 = stop_relay(r10);
        const bool no_get = std::find(args.begin(), args.end(), "--no-get") != args.end();
        const bool gets   = !no_get && peer_mode_gets_use_rma_lanes();
        EXPECT_GE(s01.bytes, (gets ? 2 : 1) * rounds * kRegion)
                << (gets ? "puts and gets via n0r1" : "puts via n0r1");
        EXPECT_EQ(0u, s01.failed + s01.rejected + s10.failed + s10.rejected);
    }

    /* A long put loop; the relay of rail 1 on the initiator's node is
     * killed once it carries bytes: the initiator ends in bounded time with
     * exit status 3 (failed requests, ep error handler called). */
    void relay_killed_during_puts(int port, std::vector<std::string> args)
    {
        const std::vector<std::string> fast = {"UCX_PXN_HEARTBEAT_TIMEOUT=1s"};
        BackgroundProcess *r01 = relay(Inner::kCma, kRelay01, fast);
        BackgroundProcess *r10 = relay(Inner::kCma, kRelay10, fast);
        BackgroundProcess *target = rma_target(port, fast);
        ASSERT_TRUE(r01 && r10 && target);
        args.insert(args.end(), {"--rounds", "100000", "--no-get", "--deadline",
                                 deadline(30)});
        BackgroundProcess *in = rma_initiator(port, args, fast);
        ASSERT_NE(nullptr, in);

        /* Well inside the put loop: past its first two rounds of kRegion
         * bytes (connection setup, first rkeys), puts still going. */
        constexpr uint64_t kRegion = 64ul << 20;
        pxn::abi::ProcessCounters c = {};
        pxn_test::wait_until([&] {
            return (pxn_tools::read_counters(group(0), r01->pid(), &c) &&
                    (c.relay.bytes > 2 * kRegion)) || (in->wait(0) != -1000);
        }, 10);
        ASSERT_GT(c.relay.bytes, 2 * kRegion) << "the puts did not go through the "
                                                 "relay:\n" << tail(in->output());
        ASSERT_EQ(-1000, in->wait(0)) << "the put loop ended:\n" << tail(in->output());
        r01->kill(SIGKILL);
        const auto killed = std::chrono::steady_clock::now();
        const int status  = in->wait(scaled_ms(15000));
        const double took = std::chrono::duration<double>(
                std::chrono::steady_clock::now() - killed).count();
        const std::string log = in->output();
        ASSERT_NE(-1000, status) << "initiator hung: still running "
                                 << pxn_test::scaled_s(15) << " s after the "
                                    "relay's SIGKILL\n" << tail(log);
        EXPECT_EQ(3, status) << tail(log);
        EXPECT_EQ(std::string::npos, log.find("result=ok")) << tail(log);
        EXPECT_NE(std::string::npos, log.find("result=transfer-failed")) << tail(log);
        EXPECT_EQ(std::string::npos, log.find("err_handler_calls=0")) << tail(log);
        EXPECT_LT(took, pxn_test::scaled_s(15.0));
        EXPECT_NE(-1000, target->wait(scaled_ms(10000))) << "target still running";
        EXPECT_NE(0, target->wait(0)) << tail(target->output());
        stop_relay(r10);
    }

    static inline bool        topology_ok_ = false;
    static inline std::string topology_log_;
    std::string        group_;
    std::string        initiator_log_; /* of the last rma_check_cross_rail() */
    std::vector<std::string> node_env_;  /* for every process: relays too */
    std::unique_ptr<pxn_test::TempDir>              logs_;
    std::vector<std::unique_ptr<BackgroundProcess>> procs_;
};

constexpr uint64_t kMiB = 1ul << 20;

} // namespace pxn_test

#endif
