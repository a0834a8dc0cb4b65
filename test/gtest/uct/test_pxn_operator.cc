/*
 * What an operator sees of pxn on the emulated cluster (2 nodes x 2 rails,
 * prefix "pxno", inner tcp): ucx_pxn_exporter scraped over HTTP while
 * traffic runs, read with prometheus_client's parser (prom_client.h);
 * `ucx_pxn_info --check` as a readiness probe runs it; a relay killed
 * under traffic; and what a load of scrapes costs the relays (measured and
 * printed, never asserted).
 */
#include "pxn_transfer.h"

#include "../common/prom_client.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <sys/stat.h>

namespace {

using pxn_test::Samples;
using pxn_test::sample_key;
using pxn_test::scaled_ms;
using pxn_tools::BackgroundProcess;
using pxn_tools::PeerProcess;

class PxnOperator : public pxn_test::PxnTransfer {
protected:
    static void SetUpTestSuite() { up("pxno", 2, false); }
    static void TearDownTestSuite() { down("pxno"); }

    void SetUp() override
    {
        PxnTransfer::SetUp();
        if (!IsSkipped() && !pxn_test::prometheus_built()) {
            GTEST_SKIP() << "built without prometheus-cpp (configure's summary "
                            "says why)";
        }
    }

    /* The exporter of node 0's group; rails 0 and 1 expected. */
    void start_exporter()
    {
        std::string error;
        ASSERT_TRUE(exporter_.start({"--group", group(0), "--rails", "rail0,rail1",
                                     "--heartbeat-timeout",
                                     std::to_string(pxn_test::kHeartbeatTimeout)},
                                    logs_.path() + "/exporter.log", &error))
                << error;
    }

    std::string relay_key(const std::string &name, PeerProcess *relay,
                          const std::string &rail) const
    {
        return sample_key(name, {{"group", group(0)}, {"node", "node0"},
                                 {"rail", rail},
                                 {"pid", std::to_string(relay->pid())}});
    }

    std::string process_key(const std::string &name, PeerProcess *p) const
    {
        return sample_key(name, {{"group", group(0)}, {"node", "node0"},
                                 {"pid", std::to_string(p->pid())}});
    }

    std::string rail_key(const std::string &rail) const
    {
        return sample_key("ucx_pxn_rail_up", {{"group", group(0)}, {"rail", rail}});
    }

    Samples scrape()
    {
        Samples     s;
        std::string error;
        EXPECT_TRUE(pxn_test::scrape(exporter_.url(), &s, &error)) << error;
        return s;
    }

    pxn_test::ChildResult check()
    {
        return pxn_test::run_program(
                {pxn_test::build_dir() + "/src/tools/ucx_pxn_info", "--check",
                 "--group", group(0), "--rails", "rail0,rail1",
                 "--heartbeat-timeout", std::to_string(pxn_test::kHeartbeatTimeout),
                 "--timeout", std::to_string(kCheckBound)},
                {"UCX_PXN_GROUP=", "UCX_PXN_REGISTRY_DIR="});
    }

    /* The samples of node 0's group, for the log. */
    std::string group_lines(const Samples &s) const
    {
        std::string out;
        for (const auto &kv : s) {
            if (kv.first.find("group=\"" + group(0) + "\"") != std::string::npos) {
                char value[64];
                snprintf(value, sizeof(value), " %.15g\n", kv.second);
                out += kv.first + value;
            }
        }
        return out;
    }

    /* MB/s of one put of `bytes` from "done <status> <ns> <ops>". */
    double put_rate(PeerProcess *sender, const pxn_test::Target &t, size_t bytes)
    {
        const std::string done = sender->call(
                "put zcopy " + t.addr + " " + t.rkey + " " + std::to_string(bytes) +
                " 1048576 0", scaled_ms(60000));
        std::string status;
        uint64_t    ops = 0;
        EXPECT_TRUE(pxn_tools::parse_done(done, &status, &ops)) << done;
        EXPECT_EQ("Success", status) << done;
        const auto fields = pxn_tools::split(done);
        const double ns = (fields.size() >= 3) ? atof(fields[2].c_str()) : 0;
        return (ns > 0) ? double(bytes) / ns * 1e3 : 0;
    }

    static double median(std::vector<double> v)
    {
        std::sort(v.begin(), v.end());
        return v.empty() ? 0 : v[v.size() / 2];
    }

    static constexpr int kCheckBound = 5; /* seconds: --check --timeout */
    pxn_test::TempDir  logs_;
    pxn_test::Exporter exporter_;
};

TEST_F(PxnOperator, ScrapedCountersMoveByTheBytesMovedWhileTrafficRuns)
{
    const size_t size = 128 << 20;
    auto [relay, target, sender, t] = cross_rail(size, 41);
    ASSERT_TRUE(relay && target && sender);
    start_exporter();
    const std::string bytes = relay_key("ucx_pxn_relay_bytes_total", relay, "rail1");
    Samples before = scrape();
    ASSERT_EQ(1u, before.count(bytes)) << group_lines(before);
    EXPECT_EQ(1, before.at(rail_key("rail0")));
    EXPECT_EQ(1, before.at(rail_key("rail1")));

    /* A scrape every 5 ms from before the put until the counter is still. */
    BackgroundProcess watcher;
    std::string       error;
    ASSERT_TRUE(watcher.start("", {}, pxn_test::prom_script(
                                      {"watch", exporter_.url(), bytes, "60", "0.005"}),
                              logs_.path() + "/watch.log", &error))
            << error;
    ASSERT_TRUE(watcher.wait_for_output("\n", scaled_ms(10000))) << watcher.output();
    EXPECT_EQ("Success", put(sender, t, size, 65536));
    ASSERT_EQ(0, watcher.wait(scaled_ms(60000))) << watcher.output();

    std::vector<double> seen;
    std::istringstream  lines(watcher.output());
    for (std::string line; std::getline(lines, line);) {
        const auto f = pxn_tools::split(line);
        ASSERT_EQ(2u, f.size()) << line;
        seen.push_back(atof(f[1].c_str()));
    }
    ASSERT_GE(seen.size(), 2u);
    EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end())) << watcher.output();
    EXPECT_EQ(before.at(bytes) + double(size), seen.back()) << watcher.output();
    const size_t between = size_t(std::count_if(seen.begin(), seen.end(),
            [&](double v) { return (v > before.at(bytes)) && (v < seen.back()); }));
    std::cout << "[ scrapes  ] " << seen.size() << " scrapes while " << size
              << " bytes moved, " << between
              << " of them with the transfer under way" << std::endl;

    const Samples after = scrape();
    EXPECT_EQ(double(size), after.at(process_key("ucx_pxn_sender_bytes_total", sender)) -
                            before.at(process_key("ucx_pxn_sender_bytes_total", sender)));
    EXPECT_EQ(after.at(relay_key("ucx_pxn_relay_pieces_total", relay, "rail1")),
              after.at(process_key("ucx_pxn_sender_pieces_total", sender)));
    EXPECT_EQ(0, after.at(relay_key("ucx_pxn_relay_failed_pieces_total", relay,
                                    "rail1")));
    const auto r = check();
    EXPECT_EQ(0, r.exit_code) << r.output;
}

TEST_F(PxnOperator, KilledRelayFailsTheCheckWithinItsBoundAndTheExporterShowsIt)
{
    const size_t size = 256 << 20;
    auto [relay, target, sender, t] = cross_rail(size, 43);
    ASSERT_TRUE(relay && target && sender);
    start_exporter();
    auto r = check();
    ASSERT_EQ(0, r.exit_code) << r.output;

    ASSERT_TRUE(sender->send("put zcopy " + t.addr + " " + t.rkey + " " +
                             std::to_string(size) + " 65536 0"));
    ASSERT_TRUE(wait_counters(0, relay, [&](const auto &c) {
        return c.relay.bytes >= size / 4;
    })) << "the put did not get under way";
    const Samples under_way = scrape();
    /* and killed halfway (or as soon as it is past half) */
    ASSERT_TRUE(wait_counters(0, relay, [&](const auto &c) {
        return c.relay.bytes >= size / 2;
    }));
    const uint64_t at    = counters(0, relay).relay.bytes;
    const pid_t   killed = relay->pid();
    kill_relay(0, relay);
    const std::string done = sender->receive(scaled_ms(20000));
    ASSERT_FALSE(done.empty()) << "sender hung";
    std::cout << "[ put      ] " << done << " (relay " << killed << " killed once "
              << at << " of " << size << " bytes had gone through it)" << std::endl;

    const auto start = std::chrono::steady_clock::now();
    r = check();
    const double took = std::chrono::duration<double>(
            std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(1, r.exit_code) << r.output;
    EXPECT_LT(took, pxn_test::scaled_s(kCheckBound)) << "its own bound";
    EXPECT_EQ(0u, r.output.find("FAIL rail1: no relay is up: "))
            << r.output;
    EXPECT_EQ(std::string::npos, r.output.find("FAIL rail0")) << r.output;
    std::cout << "[ check    ] exit " << r.exit_code << " after " << took
              << " s:\n" << r.output;

    /* The sender's counters reach its relay's control file when that
     * relay's engine folds them: at its next round, within its 100 ms
     * sleep. */
    const std::string failed = process_key("ucx_pxn_sender_failed_operations_total",
                                           sender);
    /* A relay fast enough to forward the whole put before the kill lands
     * (seen: all 256 MiB through at the kill) fails no operation; else
     * the put's requests fail and are counted. */
    const bool put_failed = (done.rfind("done Success", 0) != 0);
    Samples after;
    pxn_test::wait_until([&] {
        after = scrape(); /* it still serves */
        return !put_failed || ((after.count(failed) != 0) && (after.at(failed) >= 1));
    }, 2, 0.05);
    EXPECT_EQ(-1000, exporter_.process().wait(0));
    EXPECT_EQ(0, after.at(rail_key("rail1")));
    EXPECT_EQ(1, after.at(rail_key("rail0")));
    const std::string up = sample_key("ucx_pxn_relay_up",
                                      {{"group", group(0)}, {"node", "node0"},
                                       {"rail", "rail1"},
                                       {"pid", std::to_string(killed)}});
    /* Its entry stays (stale) until a pxn process of the group cleans up. */
    EXPECT_TRUE((after.count(up) == 0) || (after.at(up) == 0)) << group_lines(after);
    if (put_failed) {
        EXPECT_GE(after.at(failed), 1);
    } else {
        EXPECT_EQ(0, after.count(failed) ? after.at(failed) : 0)
                << "a put that succeeded failed nothing";
    }
    std::cout << "[ scrape   ] under way:\n" << group_lines(under_way)
              << "[ scrape   ] after the kill:\n" << group_lines(after);
}

TEST_F(PxnOperator, ScrapeLoadCostsTheRelaysNoThroughputBeyondNoise)
{
    const size_t size = 64 << 20;
    auto [relay, target, sender, t] = cross_rail(size, 47);
    ASSERT_TRUE(relay && target && sender);
    start_exporter();
    /* The same load against a copy of one scrape served as a file (Python's
     * http.server): what the client side costs this 2-core machine (fetch
     * and parse the same text), apart from the exporter reading the
     * registry. */
    const std::string copy = logs_.path() + "/static";
    ASSERT_EQ(0, mkdir(copy.c_str(), 0700));
    {
        const auto r = pxn_test::run_program({"/usr/bin/curl", "-sfo",
                                              copy + "/metrics", exporter_.url()});
        ASSERT_EQ(0, r.exit_code) << r.output;
    }
    BackgroundProcess files;
    std::string       error;
    ASSERT_TRUE(files.start("", {}, {"/usr/bin/python3", "-u", "-m", "http.server",
                                     "0", "--bind", "127.0.0.1", "--directory", copy},
                            logs_.path() + "/static.log", &error))
            << error;
    ASSERT_TRUE(files.wait_for_output(" port ", scaled_ms(10000))) << files.output();
    const std::string out = files.output();
    const std::string static_url = "http://127.0.0.1:" +
            std::to_string(atoi(out.c_str() + out.find(" port ") + 6)) + "/metrics";

    /* puts of `size` for as long as a load of 150 scrapes a second for 10 s
     * on `url` runs: their MB/s, and the CPU seconds the exporter used */
    struct Phase {
        std::vector<double> rates;
        double              exporter_cpu = 0;
        std::string         load;
    };
    auto under_load = [&](const std::string &url, pid_t exporter) {
        Phase             p;
        BackgroundProcess load;
        std::string       err;
        const double      cpu0 = pxn_tools::process_cpu_seconds(exporter);
        EXPECT_TRUE(load.start("", {}, pxn_test::prom_script({"load", url, "150", "10"}),
                               logs_.path() + "/load.log", &err))
                << err;
        while (load.wait(0) == -1000) {
            p.rates.push_back(put_rate(sender, t, size));
        }
        EXPECT_EQ(0, load.wait(0)) << load.output(); /* every scrape answered, parsed */
        p.exporter_cpu = pxn_tools::process_cpu_seconds(exporter) - cpu0;
        p.load         = load.output();
        return p;
    };

    std::vector<double> quiet;
    for (int i = 0; i < 5; ++i) {
        quiet.push_back(put_rate(sender, t, size));
    }
    const Phase control = under_load(static_url, files.pid());
    const Phase loaded  = under_load(exporter_.url(), exporter_.process().pid());
    for (int i = 0; i < 5; ++i) {
        quiet.push_back(put_rate(sender, t, size));
    }
    std::cout << "[ load     ] ucx_pxn_exporter: " << loaded.load
              << "[ load     ] a copy served as a file: " << control.load
              << "[ relay    ] MB/s through the relay, median of puts of " << size
              << " B: quiet " << median(quiet) << " (" << quiet.size()
              << " puts, before and after), scraping a copy served as a file "
              << median(control.rates) << " (" << control.rates.size()
              << " puts), scraping ucx_pxn_exporter " << median(loaded.rates)
              << " (" << loaded.rates.size() << " puts)\n"
              << "[ servers  ] CPU seconds for 10 s of scrapes: ucx_pxn_exporter "
              << loaded.exporter_cpu << ", the file server " << control.exporter_cpu
              << std::endl;
    EXPECT_FALSE(loaded.rates.empty());
}

} // namespace
