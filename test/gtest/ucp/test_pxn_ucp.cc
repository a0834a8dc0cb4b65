/*
 * UCP picks pxn: UCX's own ucx_perftest and ucp_rma_check (a NIXL-style UCP
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
#include <apps/locate.h>
#include <apps/peer_process.h>

#include "../common/test_helpers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <sys/mount.h>
#include <unistd.h>
#include <vector>

extern char **environ;

namespace {

using pxn_tools::BackgroundProcess;
using pxn_test::scaled_ms;

/* --deadline of ucp_rma_check (seconds, an alarm()), scaled like the
 * tests' own bounds. */
std::string deadline(unsigned seconds)
{
    return std::to_string(unsigned(pxn_test::scaled_s(seconds)));
}

constexpr const char *kPrefix = "pxnu";

enum class Inner { kCma, kTcp };

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
};

std::string front_ip(Slot s)
{
    return "10.99." + std::to_string(s.node) + "." + std::to_string(s.rail + 1);
}

std::string tail(const std::string &text, size_t lines = 40)
{
    size_t pos = text.size();
    for (size_t n = 0; n <= lines; ++n) {
        pos = (pos == 0) ? std::string::npos : text.rfind('\n', pos - 1);
        if (pos == std::string::npos) {
            return text;
        }
    }
    return text.substr(pos + 1);
}

/* The ep configuration lines of a UCX_LOG_LEVEL=info log, e.g.
 * "ep_cfg[0]: rma(pxn/memory) am(tcp/front) ka(tcp/front)" (UCX 1.13) or
 * "perftest inter-node cfg#0 rma(pxn/memory)" (1.14 on). */
std::vector<std::string> ep_cfg_lines(const std::string &log)
{
    static const std::regex newer("UCX +INFO +(.*\\bcfg#[0-9]+\\b.*)$");
    std::vector<std::string> lines;
    std::istringstream in(log);
    std::smatch m;
    for (std::string line; std::getline(in, line);) {
        const size_t at = line.find("ep_cfg[");
        if (at != std::string::npos) {
            lines.push_back(line.substr(at));
        } else if (std::regex_search(line, m, newer)) {
            lines.push_back(m[1]);
        }
    }
    return lines;
}

bool any_pxn_lane(const std::vector<std::string> &cfgs)
{
    for (const auto &c : cfgs) {
        if (c.find("pxn/") != std::string::npos) {
            return true;
        }
    }
    return false;
}

/* One table of UCX_PROTO_INFO=y (protocols v2): its title lines (the ep
 * configuration, the operation, e.g. "remote memory write by ucp_put* from
 * host memory to host") and the Config cell of each row (the lanes). */
struct ProtoTable {
    std::string              title;
    std::vector<std::string> configs;
};

std::vector<ProtoTable> proto_tables(const std::string &log)
{
    std::vector<ProtoTable> tables;
    std::istringstream in(log);
    bool in_rows = false;
    for (std::string line; std::getline(in, line);) {
        const size_t bar = line.find("| ");
        if ((bar == std::string::npos) || (line.find(" |", bar + 1) == std::string::npos)) {
            continue;
        }
        std::vector<std::string> cells;
        std::istringstream row(line.substr(bar + 1));
        for (std::string cell; std::getline(row, cell, '|');) {
            const size_t b = cell.find_first_not_of(' ');
            const size_t e = cell.find_last_not_of(' ');
            if (b != std::string::npos) {
                cells.push_back(cell.substr(b, e - b + 1));
            }
        }
        const bool title = (cells.size() == 1) ||
                           ((cells.size() == 2) && (cells[0].find("cfg#") !=
                                                    std::string::npos));
        if (title) { /* 1.22: one cell a line; 1.18: "cfg | operation" */
            if (in_rows || tables.empty()) {
                tables.emplace_back();
                in_rows = false;
            }
            for (const auto &cell : cells) {
                tables.back().title += cell + "\n";
            }
        } else if ((cells.size() >= 3) && !tables.empty() && (cells[0] != "Range") &&
                   (cells[1] != "Range")) {
            tables.back().configs.push_back(cells.back());
            in_rows = true;
        }
    }
    return tables;
}

/* Tables about `operation` ("ucp_put", "ucp_get") of host memory, and
 * whether every row of them names a pxn lane. */
struct OpTables {
    size_t      count = 0, rows = 0, pxn_rows = 0;
    std::string text;
};

OpTables op_tables(const std::string &log, const std::string &operation)
{
    OpTables t;
    for (const auto &table : proto_tables(log)) {
        if ((table.title.find(operation) == std::string::npos) ||
            (table.title.find("host memory") == std::string::npos)) {
            continue;
        }
        ++t.count;
        t.text += table.title;
        for (const auto &config : table.configs) {
            ++t.rows;
            t.pxn_rows += (config.find("pxn/") != std::string::npos);
            t.text += "  " + config + "\n";
        }
    }
    return t;
}

/* UCX 1.16 on: protocols v2 are UCP's default (no UCX_PROTO_ENABLE), and
 * UCX_PROTO_INFO=y prints their tables. */
bool new_protocols_by_default()
{
    const auto config = pxn_test::run_program({pxn_test::ucx_prefix() + "/bin/ucx_info",
                                               "-c"});
    return config.output.find("UCX_PROTO_ENABLE=y") != std::string::npos;
}

/* Whether ucp_get on an ep in peer error mode uses an RMA lane (pxn) at
 * all: UCX 1.13's default (legacy) protocols do; of protocols v2, only
 * from UCX 1.19 (configure reads it from the UCX source). UCX 1.18
 * emulates those gets with active messages on the AM lane. */
bool peer_mode_gets_use_rma_lanes()
{
    return !new_protocols_by_default() ||
           (pxn_tools::make_var("PXN_UCP_PEER_GET_OFFLOAD") == "yes");
}

std::string joined(const std::vector<std::string> &lines)
{
    std::string all;
    for (const auto &l : lines) {
        all += l + "\n";
    }
    return all;
}

/* Is `port` listening in the network namespace of process `pid`? */
bool listening(pid_t pid, int port)
{
    std::ifstream in("/proc/" + std::to_string(pid) + "/net/tcp");
    std::string line;
    std::getline(in, line); /* header */
    while (std::getline(in, line)) {
        unsigned local_port = 0, state = 0;
        char local[64];
        if ((sscanf(line.c_str(), " %*d: %63[0-9A-Fa-f:] %*s %x", local, &state) == 2) &&
            (sscanf(strchr(local, ':') + 1, "%x", &local_port) == 1) &&
            (int(local_port) == port) && (state == 0x0A)) {
            return true;
        }
    }
    return false;
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
                               "UCX_NET_DEVICES=front"});
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
        BackgroundProcess *r01 = relay(inner, kRelay01);
        BackgroundProcess *r10 = relay(inner, kRelay10);
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
        expect_protocols(run.client_log, operation, pxn_protocols);
        const RelayStats s01 = stop_relay(r01), s10 = stop_relay(r10);
        const RelayStats &carrier = (via.node == kRelay01.node) ? s01 : s10;
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
                                  const std::vector<std::string> &args = {})
    {
        if (access(rma_check().c_str(), X_OK) != 0) {
            ADD_FAILURE() << rma_check() << " is missing: make check builds it "
                          << "(make test/gtest/ucp/ucp_rma_check)";
            return nullptr;
        }
        std::vector<std::string> argv = {rma_check(), "--target", "-p",
                                         std::to_string(port), "--deadline", deadline(40)};
        argv.insert(argv.end(), args.begin(), args.end());
        BackgroundProcess *t = spawn("target", Inner::kCma, kServer, argv, extra_env);
        if ((t != nullptr) && !t->wait_for_output("listening", scaled_ms(10000))) {
            ADD_FAILURE() << "target did not start:\n" << t->output();
            return nullptr;
        }
        return t;
    }

    BackgroundProcess *rma_initiator(int port, std::vector<std::string> args,
                                     std::vector<std::string> extra_env)
    {
        std::vector<std::string> argv = {rma_check(), "--initiator", front_ip(kServer),
                                         "-p", std::to_string(port)};
        argv.insert(argv.end(), args.begin(), args.end());
        extra_env.push_back("UCX_LOG_LEVEL=info");
        return spawn("initiator", Inner::kCma, kClient, argv, extra_env);
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

    static bool        topology_ok_;
    static std::string topology_log_;
    std::string        group_;
    std::string        initiator_log_; /* of the last rma_check_cross_rail() */
    std::vector<std::string> node_env_;  /* for every process: relays too */
    std::unique_ptr<pxn_test::TempDir>              logs_;
    std::vector<std::unique_ptr<BackgroundProcess>> procs_;
};

bool        PxnUcp::topology_ok_ = false;
std::string PxnUcp::topology_log_;

constexpr uint64_t kMiB = 1ul << 20;

/* No UCX_PROTO_ENABLE: protocols v2 where they are UCP's default (1.16
 * on), whose tables (UCX_PROTO_INFO=y) must name pxn for every size. */
TEST_F(PxnUcp, PerftestPutBwCrossRailCma)
{
    cross_rail_perftest(Inner::kCma, 14101,
                        {"-t", "ucp_put_bw", "-s", "1048576", "-n", "100", "-w", "5"}, {},
                        kRelay01, 100 * kMiB, "ucp_put");
}

TEST_F(PxnUcp, PerftestGetCrossRailCma)
{
    cross_rail_perftest(Inner::kCma, 14102,
                        {"-t", "ucp_get", "-s", "1048576", "-n", "100", "-w", "5"}, {},
                        kRelay01, 100 * kMiB, "ucp_get");
}

/* NIXL's UCP settings: rendezvous off, two RMA rails allowed, no fence.
 * From UCX 1.20, with rendezvous off, UCP needs no memory invalidation from
 * a connect-to-iface lane in peer error mode: the inner md's (cma's) is
 * then left off, to show it. */
std::vector<std::string> nixl_env()
{
    std::vector<std::string> env = {"UCX_RNDV_THRESH=inf", "UCX_MAX_RMA_RAILS=2",
                                    "UCX_RC_FENCE=none"};
    if (pxn_tools::make_var("PXN_UCP_PEER_BW_INVALIDATE") == "rndv") {
        env.push_back("UCX_CMA_MEMORY_INVALIDATE=n");
    }
    return env;
}

TEST_F(PxnUcp, PerftestPutBwCrossRailCmaWithNixlSettings)
{
    cross_rail_perftest(Inner::kCma, 14112,
                        {"-t", "ucp_put_bw", "-e", "-s", "1048576", "-n", "100", "-w",
                         "5"}, nixl_env(), kRelay01, 100 * kMiB, "ucp_put");
}

/* UCX 1.18 emulates gets of an ep in peer error mode with active
 * messages (no RMA lane, no pxn): there, the test checks that. */
TEST_F(PxnUcp, PerftestGetCrossRailCmaWithNixlSettings)
{
    const bool rma = peer_mode_gets_use_rma_lanes();
    cross_rail_perftest(Inner::kCma, 14115,
                        {"-t", "ucp_get", "-e", "-s", "1048576", "-n", "100", "-w",
                         "5"}, nixl_env(), kRelay01, rma ? 100 * kMiB : 0, "ucp_get",
                        rma);
}

/* A pair on one node (client n0r0, server n0r1): not a pxn peer. */
TEST_F(PxnUcp, SameNodePerftestPutBwDoesNotUsePxn)
{
    no_pxn_perftest(Inner::kCma, kRelay01, {{1, 0}, {1, 1}}, 14113,
                    {"-t", "ucp_put_bw", "-s", "1048576", "-n", "20", "-w", "2"}, {},
                    "ucp_put");
}

TEST_F(PxnUcp, SameRailPerftestGetCmaDoesNotUsePxn)
{
    same_rail_perftest(Inner::kCma, 14114,
                       {"-t", "ucp_get", "-s", "1048576", "-n", "20", "-w", "2"}, {},
                       "ucp_get");
}

/* Default rendezvous: the receiver (server, n1r1) gets from the sender's
 * n0r0 buffer through its node's relay of rail 0. */
TEST_F(PxnUcp, PerftestTagBwCrossRailCmaRendezvousGet)
{
    cross_rail_perftest(Inner::kCma, 14103,
                        {"-t", "tag_bw", "-s", "4194304", "-n", "20", "-w", "2"}, {},
                        kRelay10, 20 * 4 * kMiB);
}

TEST_F(PxnUcp, PerftestTagBwCrossRailTcpRendezvousPut)
{
    cross_rail_perftest(Inner::kTcp, 14104,
                        {"-t", "tag_bw", "-s", "4194304", "-n", "10", "-w", "2"},
                        {"UCX_RNDV_SCHEME=put_zcopy"}, kRelay01, 10 * 4 * kMiB);
}

TEST_F(PxnUcp, SameRailPerftestPutBwCmaDoesNotUsePxn)
{
    same_rail_perftest(Inner::kCma, 14105,
                       {"-t", "ucp_put_bw", "-s", "1048576", "-n", "20", "-w", "2"}, {},
                       "ucp_put");
}

TEST_F(PxnUcp, SameRailPerftestTagBwTcpDoesNotUsePxn)
{
    same_rail_perftest(Inner::kTcp, 14106,
                       {"-t", "tag_bw", "-s", "4194304", "-n", "10", "-w", "2"},
                       {"UCX_RNDV_SCHEME=put_zcopy"});
}

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

TEST_F(PxnUcp, RmaCheckRelayKilledDuringPutsFailsTheInitiator)
{
    relay_killed_during_puts(14109, {});
}

TEST_F(PxnUcp, RmaCheckRelayKilledDuringZcopyPutsFailsTheInitiator)
{
    relay_killed_during_puts(14110, {"--min-block", "65537"});
}

} // namespace
