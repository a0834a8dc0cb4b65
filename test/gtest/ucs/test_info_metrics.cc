/*
 * pxn's Prometheus metrics (info_metrics.h) from `ucx_pxn_info
 * --prometheus` and from ucx_pxn_exporter over HTTP, against registries
 * made with the real Registry API in a private base directory, read as
 * Prometheus reads them (prometheus_client's parser, prom_client.h): every
 * counter under its name with its value, relays coming and going between
 * scrapes, and broken or hostile files that must neither crash the
 * exporter nor change what it says about the relays that are there.
 */
#include "registry_fixture.h"

#include "../common/prom_client.h"

#include <apps/locate.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace {

using pxn::abi::store_relaxed;
using pxn_test::ChildChannel;
using pxn_test::ForkedChild;
using pxn_test::RegistryTest;
using pxn_test::Samples;
using pxn_test::sample_key;

class InfoMetricsTest : public RegistryTest {
protected:
    void SetUp() override
    {
        RegistryTest::SetUp();
        if (!pxn_test::prometheus_built()) {
            GTEST_SKIP() << "built without prometheus-cpp (configure's summary "
                            "says why)";
        }
        registry_ = open_registry();
        ASSERT_NE(nullptr, registry_);
    }

    std::string relay_key(const std::string &name, const std::string &rail = "rail1",
                          int pid = getpid()) const
    {
        return sample_key(name, {{"group", settings_.group}, {"node", "node-a"},
                                 {"rail", rail}, {"pid", std::to_string(pid)}});
    }

    std::string rail_key(const std::string &rail) const
    {
        return sample_key("ucx_pxn_rail_up", {{"group", settings_.group},
                                              {"rail", rail}});
    }

    Samples prometheus(std::vector<std::string> extra = {})
    {
        std::vector<std::string> argv = {pxn_test::build_dir() +
                                         "/src/tools/ucx_pxn_info", "--prometheus",
                                         "--base", base_.path(), "--group",
                                         settings_.group};
        argv.insert(argv.end(), extra.begin(), extra.end());
        const auto r = pxn_test::run_program(argv, {"UCX_PXN_GROUP="});
        EXPECT_EQ(0, r.exit_code) << r.output;
        Samples     s;
        std::string error;
        EXPECT_TRUE(pxn_test::parse_metrics(r.output, &s, &error)) << error;
        return s;
    }

    /* (le, value) of this process's buckets of `name` (of `rail`; "": the
     * process's, without a rail), sorted by le. */
    std::vector<std::pair<double, double>>
    buckets(const Samples &s, const std::string &name, const std::string &rail) const
    {
        std::vector<std::pair<double, double>> out;
        const std::string pid = "pid=\"" + std::to_string(getpid()) + "\"";
        for (const auto &kv : s) {
            const std::string &k = kv.first;
            if ((k.rfind(name + "{", 0) != 0) || (k.find(pid) == std::string::npos) ||
                (k.find(rail.empty() ? "rail=" : "rail=\"" + rail + "\"") !=
                 std::string::npos) == rail.empty()) {
                continue;
            }
            const size_t le = k.find("le=\"") + 4;
            out.emplace_back(strtod(k.c_str() + le, nullptr), kv.second);
        }
        std::sort(out.begin(), out.end());
        return out;
    }

    std::unique_ptr<pxn::Registry> registry_;
};

/* The name and value of each counter of abi.h, as a scrape shows it: this
 * list is the specification the table of info_metrics.cc must meet. */
TEST_F(InfoMetricsTest, EveryCounterIsExportedUnderItsNameAndParses)
{
    pxn::UniqueFd arena;
    auto relay = published_entry(registry_.get(), &arena);
    ASSERT_NE(nullptr, relay);
    auto *c = reinterpret_cast<pxn::abi::ProcessCounters*>(
            relay->view().base + pxn::abi::kCountersOffset);
    const std::vector<std::pair<const char*, uint64_t*>> relay_counters = {
            {"ucx_pxn_relay_pieces_total", &c->relay.pieces},
            {"ucx_pxn_relay_bytes_total", &c->relay.bytes},
            {"ucx_pxn_relay_failed_pieces_total", &c->relay.failed_pieces},
            {"ucx_pxn_relay_rejected_descriptors_total", &c->relay.rejected},
            {"ucx_pxn_relay_fenced_pieces_total", &c->relay.fenced},
            {"ucx_pxn_relay_routes_granted_total", &c->relay.routes},
            {"ucx_pxn_relay_route_errors_total", &c->relay.route_errors},
            {"ucx_pxn_relay_lane_resets_total", &c->relay.lane_resets},
            {"ucx_pxn_relay_inner_operations_total", &c->relay.inner_ops},
            {"ucx_pxn_relay_inner_sgl_operations_total", &c->relay.inner_sgl_ops},
            {"ucx_pxn_relay_lane_commits_total", &c->relay.lane_commits},
            {"ucx_pxn_relay_warm_claims_total", &c->relay.warm_claims},
            {"ucx_pxn_relay_inflight_pieces", &c->relay.inflight},
            {"ucx_pxn_relay_routes_active", &c->relay.routes_active},
            {"ucx_pxn_relay_rkeys_held", &c->relay.rkeys_held},
            {"ucx_pxn_relay_lanes_backed", &c->relay.lanes_backed},
            {"ucx_pxn_relay_get_pieces_total", &c->relay.get_pieces},
            {"ucx_pxn_relay_get_bytes_total", &c->relay.get_bytes},
            {"ucx_pxn_relay_am_pieces_total", &c->relay.am_pieces},
            {"ucx_pxn_relay_am_messages_total", &c->relay.am_messages},
            {"ucx_pxn_relay_am_bytes_total", &c->relay.am_bytes},
            {"ucx_pxn_relay_am_credit_waits_total", &c->relay.am_credit_waits}};
    const std::vector<std::pair<const char*, uint64_t*>> sender_counters = {
            {"ucx_pxn_sender_pieces_total", &c->sender.pieces},
            {"ucx_pxn_sender_bytes_total", &c->sender.bytes},
            {"ucx_pxn_sender_credit_stalls_total", &c->sender.credit_stalls},
            {"ucx_pxn_sender_failed_operations_total", &c->sender.failed_ops},
            {"ucx_pxn_sender_fallback_operations_total", &c->sender.fallback_ops},
            {"ucx_pxn_sender_fallback_bytes_total", &c->sender.fallback_bytes},
            {"ucx_pxn_sender_gather_pieces_total", &c->sender.gather_pieces},
            {"ucx_pxn_sender_spare_misses_total", &c->sender.spare_misses},
            {"ucx_pxn_sender_lanes_held", &c->sender.lanes},
            {"ucx_pxn_sender_get_pieces_total", &c->sender.get_pieces},
            {"ucx_pxn_sender_get_bytes_total", &c->sender.get_bytes},
            {"ucx_pxn_sender_am_sent_total", &c->sender.am_sent},
            {"ucx_pxn_sender_am_received_total", &c->sender.am_received},
            {"ucx_pxn_sender_am_refused_total", &c->sender.am_refused}};
    uint64_t value = 1000;
    for (const auto &rc : relay_counters) {
        store_relaxed(*rc.second, value++);
    }
    for (const auto &sc : sender_counters) {
        store_relaxed(*sc.second, value++);
    }
    store_relaxed(c->relay.lanes_backed, uint64_t(2));
    store_relaxed(c->relay.lane_commit_ns, uint64_t(4500000000));
    store_relaxed(c->sender.lane_open_ns, uint64_t(7300000));
    store_relaxed(c->sender.lane_map_ns, uint64_t(2000000));
    store_relaxed(c->relay.last_completion_ns, pxn::monotonic_ns() - 2000000000);
    /* abi.h's buckets, not cumulative: <= 10 us, 50 us, 100 us, 500 us,
     * 1 ms, 4 ms, 16 ms, more */
    const uint64_t pickup[pxn::abi::kLatencyBuckets] = {1, 2, 0, 1, 0, 0, 1, 1};
    const uint64_t completion[pxn::abi::kLatencyBuckets] = {0, 0, 0, 0, 1, 1, 0, 0};
    for (uint32_t b = 0; b < pxn::abi::kLatencyBuckets; ++b) {
        store_relaxed(c->relay.pickup.buckets[b], pickup[b]);
        store_relaxed(c->sender.completion.buckets[b], completion[b]);
    }
    store_relaxed(c->relay.pickup.count, uint64_t(6));
    store_relaxed(c->relay.pickup.sum_ns, uint64_t(30000000));
    store_relaxed(c->sender.completion.count, uint64_t(2));
    store_relaxed(c->sender.completion.sum_ns, uint64_t(3000000));

    ForkedChild *sender = start_processes(1)[0]; /* claims a lane of ours */
    ASSERT_EQ("claimed 1", command(sender, "claim"));

    const Samples s = prometheus();
    for (const auto &rc : relay_counters) {
        const auto it = s.find(relay_key(rc.first));
        ASSERT_NE(s.end(), it) << relay_key(rc.first);
        EXPECT_EQ(double(*rc.second), it->second) << rc.first;
    }
    const std::string process = sample_key("", {{"group", settings_.group},
                                                {"node", "node-a"},
                                                {"pid", std::to_string(getpid())}});
    for (const auto &sc : sender_counters) {
        const auto it = s.find(sc.first + process);
        ASSERT_NE(s.end(), it) << sc.first << process;
        EXPECT_EQ(double(*sc.second), it->second) << sc.first;
    }
    EXPECT_DOUBLE_EQ(4.5, s.at(relay_key("ucx_pxn_relay_lane_commit_seconds_total")));
    EXPECT_DOUBLE_EQ(0.0073, s.at("ucx_pxn_sender_lane_open_seconds_total" + process));
    EXPECT_DOUBLE_EQ(0.002, s.at("ucx_pxn_sender_lane_map_seconds_total" + process));
    EXPECT_GE(s.at(relay_key("ucx_pxn_relay_last_completion_age_seconds")), 2.0);
    EXPECT_LT(s.at(relay_key("ucx_pxn_relay_last_completion_age_seconds")), 60.0);
    EXPECT_EQ(0u, s.count("ucx_pxn_sender_last_completion_age_seconds" + process))
            << "none yet";
    /* Histograms as Prometheus has them: cumulative, bounds in seconds. */
    EXPECT_EQ(6, s.at(relay_key("ucx_pxn_relay_pickup_seconds_count")));
    EXPECT_DOUBLE_EQ(0.03, s.at(relay_key("ucx_pxn_relay_pickup_seconds_sum")));
    EXPECT_EQ((std::vector<std::pair<double, double>>{
                      {1e-5, 1}, {5e-5, 3}, {1e-4, 3}, {5e-4, 4}, {1e-3, 4},
                      {4e-3, 4}, {1.6e-2, 5}, {INFINITY, 6}}),
              buckets(s, "ucx_pxn_relay_pickup_seconds_bucket", "rail1"));
    EXPECT_EQ(2, s.at("ucx_pxn_sender_completion_seconds_count" + process));
    EXPECT_DOUBLE_EQ(0.003, s.at("ucx_pxn_sender_completion_seconds_sum" + process));
    EXPECT_EQ((std::vector<std::pair<double, double>>{
                      {1e-5, 0}, {5e-5, 0}, {1e-4, 0}, {5e-4, 0}, {1e-3, 1},
                      {4e-3, 2}, {1.6e-2, 2}, {INFINITY, 2}}),
              buckets(s, "ucx_pxn_sender_completion_seconds_bucket", ""));
    EXPECT_EQ(1, s.at(relay_key("ucx_pxn_relay_up")));
    EXPECT_EQ(1, s.at(relay_key("ucx_pxn_relay_lanes_claimed")));
    EXPECT_EQ(1, s.at(relay_key("ucx_pxn_relay_senders_alive")));
    EXPECT_EQ(7, s.at(relay_key("ucx_pxn_relay_lanes")));
    EXPECT_EQ(2.0 * 4 * 4096, s.at(relay_key("ucx_pxn_relay_staging_bytes")));
    EXPECT_EQ(1, s.at(rail_key("rail1")));
    EXPECT_EQ(1, s.at(sample_key("ucx_pxn_relay_info",
                                 {{"group", settings_.group}, {"node", "node-a"},
                                  {"rail", "rail1"}, {"pid", std::to_string(getpid())},
                                  {"device", "mlx5_1"}, {"inner", "tcp"},
                                  {"arena", "host_shm"}})));
    EXPECT_EQ(1, s.at(sample_key("ucx_pxn_build_info",
                                 {{"version", pxn_tools::make_var("PACKAGE_VERSION")},
                                  {"ucx_version", pxn_tools::make_var("UCX_VERSION")},
                                  {"abi_version",
                                   std::to_string(pxn::abi::kAbiVersion)}})))
            << ::testing::PrintToString(s);
    EXPECT_EQ(2, s.at(sample_key("ucx_pxn_registry_entries",
                                 {{"group", settings_.group}, {"state", "ready"}})));
    /* The sender child is a relay too: its counters under its own pid. */
    EXPECT_EQ(1, s.at(relay_key("ucx_pxn_relay_up", "rail" +
                                std::to_string(sender->pid()), sender->pid())));
}

TEST_F(InfoMetricsTest, ExporterFollowsRelaysComingAndGoingBetweenScrapes)
{
    pxn_test::TempDir   logs;
    pxn_test::Exporter  exporter;
    std::string         error;
    ASSERT_TRUE(exporter.start({"--base", base_.path(), "--group", settings_.group,
                                "--rails", "rail1,rail7"},
                               logs.path() + "/exporter.log", &error))
            << error;
    Samples s;
    ASSERT_TRUE(pxn_test::scrape(exporter.url(), &s, &error)) << error;
    EXPECT_EQ(0, s.at(rail_key("rail1")));
    EXPECT_EQ(0, s.at(rail_key("rail7")));
    EXPECT_EQ(0u, s.count(relay_key("ucx_pxn_relay_up")));

    auto relay = published_entry(registry_.get());
    ASSERT_NE(nullptr, relay);
    s.clear();
    ASSERT_TRUE(pxn_test::scrape(exporter.url(), &s, &error)) << error;
    EXPECT_EQ(1, s.at(rail_key("rail1")));
    EXPECT_EQ(1, s.at(relay_key("ucx_pxn_relay_up")));
    EXPECT_EQ(0, s.at(rail_key("rail7")));

    relay.reset(); /* the relay goes */
    s.clear();
    ASSERT_TRUE(pxn_test::scrape(exporter.url(), &s, &error)) << error;
    EXPECT_EQ(0, s.at(rail_key("rail1")));
    EXPECT_EQ(0u, s.count(relay_key("ucx_pxn_relay_up")));

    relay = published_entry(registry_.get()); /* and another comes */
    s.clear();
    ASSERT_TRUE(pxn_test::scrape(exporter.url(), &s, &error)) << error;
    EXPECT_EQ(1, s.at(rail_key("rail1")));
    EXPECT_EQ(-1000, exporter.process().wait(0)) << "still serving";
    EXPECT_GE(s.at("exposer_scrapes_total{}"), 3);
}

TEST_F(InfoMetricsTest, BrokenOrHostileFilesNeitherCrashTheExporterNorMakeItLie)
{
    const uint64_t start = own_start_time();
    auto relay = published_entry(registry_.get()); /* rail1, up */
    ASSERT_NE(nullptr, relay);
    auto truncated = header(getpid(), start, 2);
    snprintf(truncated.rail, sizeof(truncated.rail), "rail0");
    write_entry(truncated, pxn::kSuffixControl, int64_t(truncated.file_size / 2));
    write_entry(header(getpid(), start, 3), pxn::kSuffixControl, 100, 100);
    uint64_t init_start = 0;
    ASSERT_EQ(UCS_OK, pxn::process_start_time(1, &init_start));
    auto liar = header(1, init_start + 1, 5);
    snprintf(liar.rail, sizeof(liar.rail), "rail0");
    write_entry(liar);
    ASSERT_EQ(0, mkfifo(path(6).c_str(), 0600));
    auto evil = header(getpid(), start, 7);
    snprintf(evil.rail, sizeof(evil.rail), "r\"a\\il\n\x1b\xff}");
    evil.arena_kind = 0;
    write_entry(evil);

    /* A file that keeps changing size under the readers (SIGBUS). */
    const std::string churn = path(pxn::entry_file_name(getpid(), 8,
                                                        pxn::kSuffixControl));
    auto churned = header(getpid(), start, 8);
    ForkedChild &churner = start_child([churn, churned](ChildChannel &channel) {
        for (;;) {
            const int fd = open(churn.c_str(), O_CREAT | O_RDWR, 0600);
            if ((fd < 0) || (write(fd, &churned, sizeof(churned)) < 0) ||
                (ftruncate(fd, off_t(churned.file_size)) != 0) ||
                (ftruncate(fd, off_t(churned.file_size / 3)) != 0)) {
                return 1;
            }
            close(fd);
            std::string line;
            if (channel.receive(&line, 10)) { /* 10: a 1 ms bound may not poll */
                return 0;
            }
        }
    });

    pxn_test::TempDir  logs;
    pxn_test::Exporter exporter;
    std::string        error;
    /* Nobody refreshes the heartbeats written here: no age limit. */
    ASSERT_TRUE(exporter.start({"--base", base_.path(), "--group", settings_.group,
                                "--rails", "rail0,rail1", "--heartbeat-timeout",
                                "3600"},
                               logs.path() + "/exporter.log", &error))
            << error;
    const auto load = pxn_test::run_program(
            pxn_test::prom_script({"load", exporter.url(), "200", "2"}));
    EXPECT_EQ(0, load.exit_code) << load.output;
    churner.send("stop");
    EXPECT_EQ(0, churner.wait());
    EXPECT_EQ(-1000, exporter.process().wait(0)) << exporter.process().output();

    Samples s;
    ASSERT_TRUE(pxn_test::scrape(exporter.url(), &s, &error)) << error;
    EXPECT_EQ(1, s.at(rail_key("rail1")));
    EXPECT_EQ(0, s.at(rail_key("rail0"))) << "no file there is a relay of rail0";
    EXPECT_EQ(0, s.at(relay_key("ucx_pxn_relay_up", "rail0", 1)));
    EXPECT_EQ(1, s.at(relay_key("ucx_pxn_relay_up", "r\"a\\il\\x0a\\x1b\\xff}")))
            << ::testing::PrintToString(s);
    EXPECT_EQ(1, s.at(sample_key("ucx_pxn_registry_entries",
                                 {{"group", settings_.group}, {"state", "stale"}})));
    EXPECT_GE(s.at(sample_key("ucx_pxn_registry_entries",
                              {{"group", settings_.group}, {"state", "unreadable"}})),
              3);
}

TEST_F(InfoMetricsTest, SquattedRegistryIsShownUnreadableAndNotFollowed)
{
    auto relay = published_entry(registry_.get());
    ASSERT_NE(nullptr, relay);
    pxn_test::TempDir elsewhere;
    ASSERT_EQ(0, rename(dir_.c_str(), (elsewhere.path() + "/real").c_str()));
    ASSERT_EQ(0, symlink((elsewhere.path() + "/real").c_str(), dir_.c_str()));
    const Samples s = prometheus({"--rails", "rail1"});
    EXPECT_EQ(0, s.at(sample_key("ucx_pxn_registry_readable",
                                 {{"group", settings_.group}})));
    EXPECT_EQ(0, s.at(rail_key("rail1")));
    EXPECT_EQ(0u, s.count(relay_key("ucx_pxn_relay_up")));
}

} // namespace
