/*
 * ucx_pxn_exporter: serves a node's pxn registries as Prometheus metrics
 * over HTTP (/metrics), through prometheus-cpp's pull exposer, for as long
 * as it runs.
 *
 *   ucx_pxn_exporter [--listen ADDR:PORT] [--group G | --all] [--base DIR]
 *                    [--rails LIST] [--heartbeat-timeout S] [--threads N]
 *
 * Every scrape takes a fresh snapshot (info_snapshot.h: no lock, no
 * cleanup, no write, read-only mappings, unmapped before the answer), so
 * relays that come and go between scrapes simply appear and disappear;
 * nothing is kept from one scrape to the next. The metrics are
 * info_metrics.h's, plus ucx_pxn_build_info and ucx_pxn_scrape_seconds
 * (the time the snapshot took) and prometheus-cpp's own exposer_*.
 *
 * It binds 127.0.0.1:9853 unless --listen says otherwise (civetweb's
 * syntax: "0.0.0.0:9853", "[::1]:9853"; port 0 takes a free one). Once it
 * listens it prints one line, "ucx_pxn_exporter: serving
 * http://<addr>:<port>/metrics ...", with the port it got. Default scope:
 * every registry of its uid (--all); --group G one group. Registries of
 * other uids are not read and not shown: run it as the jobs' user.
 * SIGTERM or SIGINT stops it (exit 0); exit 1 when it cannot listen, 2 on
 * bad usage.
 */
#include "info_metrics.h"
#include "info_snapshot.h"

#include <ucs/pxn/control_file.h>
#include <ucs/pxn/registry.h>
#include <ucs/pxn/settings.h>

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <getopt.h>
#include <memory>
#include <mutex>
#include <string>
#include <unistd.h>

namespace {

using namespace pxn_tools;

struct Options {
    std::string    listen = "127.0.0.1:9853";
    std::string    base   = "/dev/shm";
    std::string    group;
    bool           all    = true;
    size_t         threads = 2;
    MetricsOptions metrics;
};

class RegistryCollector final : public prometheus::Collectable {
public:
    explicit RegistryCollector(const Options &o) : o_(o) {}

    std::vector<prometheus::MetricFamily> Collect() const override
    {
        /* One snapshot at a time: its SIGBUS guard is process-wide. */
        std::lock_guard<std::mutex> guard(mutex_);
        std::vector<prometheus::MetricFamily> families = {build_info_metric()};
        const uint64_t start = pxn::monotonic_ns();
        try {
            std::string message;
            auto regs = snapshot_registries(o_.base, o_.all, o_.group, &message);
            regs.erase(std::remove_if(regs.begin(), regs.end(),
                                      [](const RegistrySnapshot &r) {
                                          return r.uid != uint64_t(geteuid());
                                      }),
                       regs.end());
            auto registry = registry_metrics(regs, pxn::monotonic_ns(), o_.metrics);
            families.insert(families.end(), registry.begin(), registry.end());
        } catch (const std::exception &e) {
            /* Nothing may escape into the HTTP server's C code. */
            fprintf(stderr, "ucx_pxn_exporter: scrape failed: %s\n", e.what());
        }
        prometheus::ClientMetric seconds;
        seconds.gauge.value = double(pxn::monotonic_ns() - start) / 1e9;
        families.push_back({"ucx_pxn_scrape_seconds",
                            "Time this scrape took to read the registries",
                            prometheus::MetricType::Gauge, {seconds}});
        return families;
    }

private:
    Options            o_;
    mutable std::mutex mutex_;
};

int usage(const char *error)
{
    if (error != nullptr) {
        fprintf(stderr, "ucx_pxn_exporter: %s\n", error);
    }
    fprintf((error != nullptr) ? stderr : stdout,
            "usage: ucx_pxn_exporter [--listen ADDR:PORT] [--group G | --all]\n"
            "                        [--base DIR] [--rails LIST]\n"
            "                        [--heartbeat-timeout S] [--threads N]\n"
            "  --listen ADDR:PORT  where to serve /metrics (default 127.0.0.1:9853;\n"
            "                      port 0: any free port)\n"
            "  --group G           one registry group (default: every group of this\n"
            "                      uid, --all)\n"
            "  --base DIR          where registries live (default $UCX_PXN_REGISTRY_DIR,\n"
            "                      else /dev/shm)\n"
            "  --rails LIST        rails expected in every group, comma-separated:\n"
            "                      ucx_pxn_rail_up shows them also with no relay\n"
            "  --heartbeat-timeout S  heartbeat age (seconds) past which a relay is\n"
            "                      not up (default 3)\n"
            "  --threads N         HTTP server threads (default 2)\n");
    return (error != nullptr) ? 2 : 0;
}

} // namespace

int main(int argc, char **argv)
{
    static const struct option long_options[] = {
            {"listen", required_argument, nullptr, 'l'},
            {"base", required_argument, nullptr, 'b'},
            {"group", required_argument, nullptr, 'g'},
            {"all", no_argument, nullptr, 'a'},
            {"rails", required_argument, nullptr, 'r'},
            {"heartbeat-timeout", required_argument, nullptr, 'H'},
            {"threads", required_argument, nullptr, 't'},
            {"help", no_argument, nullptr, 'h'},
            {nullptr, 0, nullptr, 0}};
    Options     o;
    const char *env_base = getenv("UCX_PXN_REGISTRY_DIR");
    if ((env_base != nullptr) && (*env_base != '\0')) {
        o.base = env_base;
    }
    bool all_given = false;
    opterr = 0;
    for (int opt; (opt = getopt_long(argc, argv, "l:b:g:ar:H:t:h", long_options,
                                     nullptr)) != -1;) {
        char *end = nullptr;
        switch (opt) {
        case 'l': o.listen = optarg; break;
        case 'b': o.base = optarg; break;
        case 'g': o.group = optarg; o.all = false; break;
        case 'a': all_given = true; break;
        case 'r': {
            const std::string rails = optarg;
            for (size_t at = 0; at < rails.size();) {
                const size_t comma = std::min(rails.find(',', at), rails.size());
                if (comma > at) {
                    o.metrics.expected_rails.push_back(rails.substr(at, comma - at));
                }
                at = comma + 1;
            }
            break;
        }
        case 'H':
            o.metrics.heartbeat_timeout_s = strtod(optarg, &end);
            if ((*optarg == '\0') || (*end != '\0') ||
                !(o.metrics.heartbeat_timeout_s > 0)) {
                return usage("--heartbeat-timeout needs seconds above 0");
            }
            break;
        case 't':
            o.threads = size_t(strtoul(optarg, &end, 10));
            if ((*optarg == '\0') || (*end != '\0') || (o.threads < 1) ||
                (o.threads > 64)) {
                return usage("--threads needs 1 to 64");
            }
            break;
        case 'h': return usage(nullptr);
        default:
            return usage(strformat("unknown option or missing value: %s",
                                   argv[optind - 1]).c_str());
        }
    }
    if (optind < argc) {
        return usage(strformat("unexpected argument: %s", argv[optind]).c_str());
    } else if (all_given && !o.all) {
        return usage("--all and --group exclude each other");
    } else if (!o.all && !pxn::is_valid_group_name(o.group)) {
        return usage("a group is 1-64 of [A-Za-z0-9_.-], not . or ..");
    }

    /* The server's threads inherit this mask: SIGTERM and SIGINT reach
     * sigwait() below only. A client gone mid-answer must not kill it. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    signal(SIGPIPE, SIG_IGN);

    auto collector = std::make_shared<RegistryCollector>(o);
    std::unique_ptr<prometheus::Exposer> exposer;
    try {
        exposer.reset(new prometheus::Exposer(o.listen, o.threads));
        exposer->RegisterCollectable(collector);
    } catch (const std::exception &e) {
        fprintf(stderr, "ucx_pxn_exporter: cannot listen on %s: %s\n",
                o.listen.c_str(), e.what());
        return 1;
    }
    const auto  ports = exposer->GetListeningPorts();
    std::string host  = o.listen.substr(0, o.listen.rfind(':'));
    printf("ucx_pxn_exporter: serving http://%s:%d/metrics (%s in %s)\n",
           host.c_str(), ports.empty() ? -1 : ports[0],
           o.all ? "every registry of this uid" : ("group " + o.group).c_str(),
           o.base.c_str());
    fflush(stdout);

    int sig = 0;
    sigwait(&stop, &sig);
    exposer.reset();
    return 0;
}
