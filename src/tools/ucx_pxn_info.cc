/*
 * ucx_pxn_info: what a node's pxn registry holds, read without disturbing
 * it: no lock, no cleanup, no claim, read-only mappings.
 *
 *   ucx_pxn_info [--group G | --all] [--base DIR] [--json]
 *                [--watch SECONDS [--count N]]
 *   ucx_pxn_info --clean [--group G | --all] [--base DIR]
 *   ucx_pxn_info --prometheus [--group G | --all] [--base DIR] [--rails LIST]
 *                [--heartbeat-timeout S]
 *   ucx_pxn_info --check [--group G] [--base DIR] [--rails LIST |
 *                --rail-map MAP] [--sysfs DIR] [--heartbeat-timeout S]
 *                [--timeout S]
 *
 * --prometheus prints the registry as Prometheus's text format
 * (info_metrics.h; node_exporter's textfile collector reads it), when
 * built with prometheus-cpp. --check exits 0 only when every expected rail
 * has a relay that is up (health_check.h); the rails come from --rails,
 * else from this node's RDMA ports (sysfs) mapped by --rail-map
 * ($UCX_PXN_RAIL_MAP); it prints one line per problem and ends within
 * --timeout seconds (default 5) whatever happens: past it, one line and
 * exit status 1.
 *
 * --clean does what every pxn process does when it opens a registry, on
 * demand: under the registry's lock it removes the entries of dead
 * processes (control file, arena, wakeup FIFO; such files left without
 * their control file) and frees the lanes that dead senders still held in
 * live relays; it prints each entry it removed. It never removes a live
 * process's entry, and never creates a registry; a directory left empty
 * and unused goes (registry_lease.h).
 *
 * Registry: <base>/ucx-pxn-<euid>-<group>/ (base $UCX_PXN_REGISTRY_DIR or
 * /dev/shm, group $UCX_PXN_GROUP or "default"); --all: every ucx-pxn-<euid>-* directory,
 * and the other uids' directories listed but not read.
 * Per entry (p<pid>-<epoch>.ctl, .init): liveness of its process (pid and
 * start time), header, counters, and per lane its owner, counters, routes
 * and rkeys in use. Files it cannot or must not read are listed with the
 * reason. A file is mapped only after its header passed check_header()
 * against the header's own geometry, which must be within pxn's limits,
 * and after fstat showed it has exactly the size that geometry gives; a
 * file truncated while it is read (SIGBUS) is reported, not fatal. Values
 * are snapshots of memory other processes write.
 * Exit: 0 something shown (--clean: cleaned, also when nothing was stale;
 * --check: healthy), 1 no registry or nothing in it (--clean: none, or not
 * cleaned; --check: unhealthy, or out of time), 2 bad usage.
 */
#include "health_check.h"
#include "info_report.h"
#include "info_snapshot.h"
#ifdef PXN_HAVE_PROMETHEUS
#include "info_metrics.h"
#endif

#include <ucs/pxn/control_file.h>
#include <ucs/pxn/rail_map.h>
#include <ucs/pxn/registry.h>
#include <ucs/pxn/settings.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <getopt.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <string>
#include <unistd.h>

namespace {

using namespace pxn_tools;

struct Options {
    std::string base  = "/dev/shm";
    std::string group;
    bool        all   = false;
    bool        json  = false;
    bool        clean = false;
    bool        prometheus = false;
    bool        check = false;
    double      watch = 0;
    long        count = 0; /* refreshes with --watch; 0: until interrupted */
    std::string rails;     /* --rails: comma-separated; "" from sysfs */
    std::string rail_map;  /* --rail-map, else $UCX_PXN_RAIL_MAP */
    std::string sysfs = "/sys";
    double      heartbeat_timeout = pxn::Settings().heartbeat_timeout;
    double      timeout = 5.0; /* --check's bound, seconds */
};

volatile sig_atomic_t g_stop = 0;

void on_stop(int)
{
    g_stop = 1;
}

int usage(const char *error)
{
    if (error != nullptr) {
        fprintf(stderr, "ucx_pxn_info: %s\n", error);
    }
    fprintf((error != nullptr) ? stderr : stdout,
            "usage: ucx_pxn_info [--group G | --all] [--base DIR] [--json]\n"
            "                    [--watch SECONDS [--count N]]\n"
            "       ucx_pxn_info --clean [--group G | --all] [--base DIR]\n"
            "       ucx_pxn_info --prometheus [--group G | --all] [--base DIR]\n"
            "                    [--rails LIST] [--heartbeat-timeout S]\n"
            "       ucx_pxn_info --check [--group G] [--base DIR] [--rails LIST |\n"
            "                    --rail-map MAP] [--heartbeat-timeout S] [--timeout S]\n"
            "  --group G      registry group (default: $UCX_PXN_GROUP, else "
            "\"default\")\n"
            "  --all          every ucx-pxn-<uid>-* registry of this uid\n"
            "  --base DIR     where registries live (default $UCX_PXN_REGISTRY_DIR,\n"
            "                 else /dev/shm)\n"
            "  --json         one JSON document\n"
            "  --watch S      refresh every S seconds until interrupted\n"
            "  --count N      with --watch: stop after N refreshes\n"
            "  --clean        remove dead processes' entries (and free the lanes\n"
            "                 dead senders held), as a starting pxn process does\n"
            "  --prometheus   Prometheus's text format (node_exporter's textfile\n"
            "                 collector)%s\n"
            "  --check        health check: exit 0 only when every expected rail has\n"
            "                 a READY relay, alive, with a fresh heartbeat\n"
            "  --rails LIST   expected rails, comma-separated (default: this node's\n"
            "                 RDMA ports, mapped by --rail-map)\n"
            "  --rail-map MAP device-to-rail map, as UCX_PXN_RAIL_MAP (default: its value)\n"
            "  --sysfs DIR    where sysfs is mounted (default /sys)\n"
            "  --heartbeat-timeout S  heartbeat age (seconds) past which a relay is\n"
            "                 not up (default 3, UCX_PXN_HEARTBEAT_TIMEOUT's default)\n"
            "  --timeout S    --check ends within S seconds (default 5)\n"
            "exit status: 0 shown (or cleaned, or healthy), 1 no registry or no\n"
            "             entries (or not cleaned, or unhealthy), 2 bad usage\n",
#ifdef PXN_HAVE_PROMETHEUS
            "");
#else
            " [not in this build: see configure's summary]");
#endif
    return (error != nullptr) ? 2 : 0;
}

/* --clean: each registry of `o` opened (so cleaned) as a pxn process opens
 * it, and what that removed, from snapshots before and after. */
int clean(const Options &o)
{
    std::string message;
    const auto before = snapshot_registries(o.base, o.all, o.group, &message);
    int rc = 0;
    for (const RegistrySnapshot &reg : before) {
        if (reg.uid != uint64_t(geteuid())) {
            continue; /* another uid's: not ours to clean */
        }
        if (!reg.reason.empty()) {
            printf("%s: not cleaned: %s\n", reg.path.c_str(), reg.reason.c_str());
            rc = 1;
            continue;
        }
        pxn::Settings settings;
        settings.group = reg.group;
        std::unique_ptr<pxn::Registry> registry;
        pxn::CleanupStats cleaned;
        if (pxn::Registry::open(settings, o.base, &registry, &cleaned) != UCS_OK) {
            printf("%s: not cleaned (the line above says why)\n", reg.path.c_str());
            rc = 1;
            continue;
        }
        std::string unused;
        const auto after = snapshot_registries(o.base, false, reg.group, &unused);
        for (const EntrySnapshot &e : reg.entries) {
            if (!is_stale(e.liveness) || ((e.kind != "ctl") && (e.kind != "init"))) {
                continue;
            }
            const bool gone = after.empty() ||
                              std::none_of(after[0].entries.begin(),
                                           after[0].entries.end(),
                                           [&](const EntrySnapshot &a) {
                                               return a.name == e.name;
                                           });
            std::string files;
            for (const std::string &f : e.files) {
                files += (files.empty() ? ", with its " : " and ") + f + " file";
            }
            printf("%s %s: %s%s\n", gone ? "removed" : "still there:",
                   e.name.c_str(), e.liveness.c_str(), files.c_str());
        }
        printf("%s: %u stale entries removed (%u files), %u lanes of dead "
               "senders freed\n", reg.path.c_str(), cleaned.entries_removed,
               cleaned.files_removed, cleaned.lanes_freed);
        /* Leaving it as its last user removes an empty directory. */
        registry.reset();
        struct stat st;
        if (lstat(reg.path.c_str(), &st) != 0) {
            printf("%s: no process uses it any more: removed\n", reg.path.c_str());
        }
    }
    if (before.empty()) {
        fprintf(stderr, "ucx_pxn_info: %s\n", message.c_str());
        return 1;
    }
    return rc;
}

volatile sig_atomic_t g_check_timeout_ms = 0;

void on_check_timeout(int)
{
    char line[160];
    const int n = snprintf(line, sizeof(line), "UNHEALTHY: the check did not "
                           "finish within %d ms (--timeout)\n",
                           int(g_check_timeout_ms));
    (void)!write(STDOUT_FILENO, line, size_t(std::max(n, 0)));
    _exit(1);
}

/* --check: exit 0 only when every expected rail has a relay that is up. */
int check(const Options &o)
{
    /* The bound holds whatever the file system does: a timer ends the
     * process. */
    g_check_timeout_ms = int(o.timeout * 1000);
    struct sigaction sa = {};
    sa.sa_handler = on_check_timeout;
    sigaction(SIGALRM, &sa, nullptr);
    struct itimerval bound = {};
    bound.it_value.tv_sec  = time_t(o.timeout);
    bound.it_value.tv_usec = suseconds_t((o.timeout - double(time_t(o.timeout))) *
                                         1e6);
    setitimer(ITIMER_REAL, &bound, nullptr);

    std::vector<std::string> rails, nic_problems;
    if (!o.rails.empty()) {
        for (size_t at = 0; at <= o.rails.size();) {
            const size_t comma = std::min(o.rails.find(',', at), o.rails.size());
            if (comma > at) {
                rails.push_back(o.rails.substr(at, comma - at));
            }
            at = comma + 1;
        }
    } else {
        pxn::RailMap map;
        std::string  error;
        if ((pxn::RailMap::parse(o.rail_map, &map, &error) != UCS_OK) ||
            !rails_from_sysfs(o.sysfs, map, &rails, &nic_problems, &error)) {
            printf("UNHEALTHY: %s\n", error.c_str());
            return 1;
        }
    }
    std::string message;
    const auto  regs = snapshot_registries(o.base, false, o.group, &message);
    const CheckReport report = check_rails(regs.at(0), rails, nic_problems,
                                           pxn::monotonic_ns(),
                                           o.heartbeat_timeout);
    for (const std::string &line : report.lines) {
        printf("%s\n", line.c_str());
    }
    return report.healthy ? 0 : 1;
}

int print_prometheus(const Options &o)
{
#ifdef PXN_HAVE_PROMETHEUS
    std::string    message;
    const auto     regs = snapshot_registries(o.base, o.all, o.group, &message);
    MetricsOptions mo;
    mo.heartbeat_timeout_s = o.heartbeat_timeout;
    for (size_t at = 0; at < o.rails.size();) {
        const size_t comma = std::min(o.rails.find(',', at), o.rails.size());
        if (comma > at) {
            mo.expected_rails.push_back(o.rails.substr(at, comma - at));
        }
        at = comma + 1;
    }
    auto families = registry_metrics(regs, pxn::monotonic_ns(), mo);
    families.insert(families.begin(), build_info_metric());
    fputs(prometheus_text(families).c_str(), stdout);
    return 0;
#else
    (void)o;
    fprintf(stderr, "ucx_pxn_info: --prometheus is not in this build (configure's "
            "summary line 'Prometheus:' says why; with Debian's "
            "prometheus-cpp-dev installed, configure again)\n");
    return 2;
#endif
}

} // namespace

int main(int argc, char **argv)
{
    static const struct option long_options[] = {
            {"base", required_argument, nullptr, 'b'},
            {"group", required_argument, nullptr, 'g'},
            {"all", no_argument, nullptr, 'a'},
            {"json", no_argument, nullptr, 'j'},
            {"watch", required_argument, nullptr, 'w'},
            {"count", required_argument, nullptr, 'n'},
            {"clean", no_argument, nullptr, 'c'},
            {"prometheus", no_argument, nullptr, 'P'},
            {"check", no_argument, nullptr, 'C'},
            {"rails", required_argument, nullptr, 'r'},
            {"rail-map", required_argument, nullptr, 'm'},
            {"sysfs", required_argument, nullptr, 's'},
            {"heartbeat-timeout", required_argument, nullptr, 'H'},
            {"timeout", required_argument, nullptr, 't'},
            {"help", no_argument, nullptr, 'h'},
            {nullptr, 0, nullptr, 0}};
    Options o;
    const char *env_group = getenv("UCX_PXN_GROUP");
    o.group = ((env_group != nullptr) && (*env_group != '\0')) ? env_group : "default";
    const char *env_base = getenv("UCX_PXN_REGISTRY_DIR");
    if ((env_base != nullptr) && (*env_base != '\0')) {
        o.base = env_base;
    }
    const char *env_map = getenv("UCX_PXN_RAIL_MAP");
    o.rail_map = (env_map != nullptr) ? env_map : "";
    bool group_given = false, map_given = false;
    opterr = 0;
    for (int opt; (opt = getopt_long(argc, argv, "b:g:ajw:n:chPCr:m:s:H:t:",
                                     long_options,
                                     nullptr)) != -1;) {
        char *end = nullptr;
        switch (opt) {
        case 'b': o.base = optarg; break;
        case 'g': o.group = optarg; group_given = true; break;
        case 'a': o.all = true; break;
        case 'j': o.json = true; break;
        case 'c': o.clean = true; break;
        case 'P': o.prometheus = true; break;
        case 'C': o.check = true; break;
        case 'r': o.rails = optarg; break;
        case 'm': o.rail_map = optarg; map_given = true; break;
        case 's': o.sysfs = optarg; break;
        case 'H':
        case 't': {
            double &value = (opt == 'H') ? o.heartbeat_timeout : o.timeout;
            value = strtod(optarg, &end);
            if ((*optarg == '\0') || (*end != '\0') || !(value > 0) ||
                (value > 3600)) {
                return usage("--heartbeat-timeout and --timeout need seconds in "
                             "(0, 3600]");
            }
            break;
        }
        case 'w':
            o.watch = strtod(optarg, &end);
            if ((*optarg == '\0') || (*end != '\0') || !(o.watch > 0) ||
                (o.watch > 86400)) {
                return usage("--watch needs seconds in (0, 86400]");
            }
            break;
        case 'n':
            o.count = strtol(optarg, &end, 10);
            if ((*optarg == '\0') || (*end != '\0') || (o.count < 1)) {
                return usage("--count needs a positive number");
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
    } else if (o.all && group_given) {
        return usage("--all and --group exclude each other");
    } else if (!o.all && !pxn::is_valid_group_name(o.group)) {
        return usage("a group is 1-64 of [A-Za-z0-9_.-], not . or ..");
    } else if ((o.count != 0) && (o.watch == 0)) {
        return usage("--count needs --watch");
    } else if (o.clean && (o.json || (o.watch > 0))) {
        return usage("--clean goes with neither --json nor --watch");
    } else if (int(o.clean) + int(o.prometheus) + int(o.check) > 1) {
        return usage("--clean, --prometheus and --check exclude each other");
    } else if ((o.prometheus || o.check) && (o.json || (o.watch > 0))) {
        return usage("--prometheus and --check go with neither --json nor --watch");
    } else if (o.check && o.all) {
        return usage("--check judges one group: --group G");
    } else if (!o.check && (map_given || (o.sysfs != "/sys"))) {
        return usage("--rail-map goes with --check");
    } else if (o.check && !o.rails.empty() && map_given) {
        return usage("--rails and --rail-map exclude each other");
    } else if (!o.check && !o.prometheus && !o.rails.empty()) {
        return usage("--rails goes with --check or --prometheus");
    }
    if (o.clean) {
        return clean(o);
    } else if (o.check) {
        return check(o);
    } else if (o.prometheus) {
        return print_prometheus(o);
    }

    struct sigaction sa = {};
    sa.sa_handler = on_stop; /* no SA_RESTART: the sleep ends at once */
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    const bool tty = isatty(STDOUT_FILENO);
    int rc = 1;
    for (long round = 1; !g_stop; ++round) {
        std::string message, out;
        const auto regs = snapshot_registries(o.base, o.all, o.group, &message);
        const uint64_t now = pxn::monotonic_ns();
        if (o.watch > 0) {
            const time_t t = time(nullptr);
            char when[64];
            strftime(when, sizeof(when), "%F %T", localtime(&t));
            out += tty ? "\033[H\033[2J" : "";
            out += o.json ? "" : strformat("ucx_pxn_info every %gs, %s\n", o.watch,
                                           when);
        }
        if (o.json) {
            json_report(regs, now, message, &out);
        } else {
            text_report(regs, now, &out);
            if (!message.empty() && (o.watch > 0)) {
                out += message + "\n";
            }
        }
        fputs(out.c_str(), stdout);
        fflush(stdout);
        if (!message.empty() && (o.watch == 0)) {
            fprintf(stderr, "ucx_pxn_info: %s\n", message.c_str());
        }
        rc = message.empty() ? 0 : 1;
        if ((o.watch == 0) || ((o.count != 0) && (round >= o.count))) {
            break;
        }
        struct timespec ts;
        ts.tv_sec  = time_t(o.watch);
        ts.tv_nsec = long((o.watch - double(ts.tv_sec)) * 1e9);
        nanosleep(&ts, nullptr);
    }
    return rc;
}
