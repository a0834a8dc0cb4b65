/*
 * ucx_pxn_info: what a node's pxn registry holds, read without disturbing
 * it: no lock, no cleanup, no claim, read-only mappings.
 *
 *   ucx_pxn_info [--group G | --all] [--base DIR] [--json]
 *                [--watch SECONDS [--count N]]
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
 * Exit: 0 something shown, 1 no registry or nothing in it, 2 bad usage.
 */
#include "info_report.h"
#include "info_snapshot.h"

#include <ucs/pxn/control_file.h>
#include <ucs/pxn/settings.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <getopt.h>
#include <string>
#include <unistd.h>

namespace {

using namespace pxn_tools;

struct Options {
    std::string base  = "/dev/shm";
    std::string group;
    bool        all   = false;
    bool        json  = false;
    double      watch = 0;
    long        count = 0; /* refreshes with --watch; 0: until interrupted */
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
            "  --group G      registry group (default: $UCX_PXN_GROUP, else "
            "\"default\")\n"
            "  --all          every ucx-pxn-<uid>-* registry of this uid\n"
            "  --base DIR     where registries live (default $UCX_PXN_REGISTRY_DIR,\n"
            "                 else /dev/shm)\n"
            "  --json         one JSON document\n"
            "  --watch S      refresh every S seconds until interrupted\n"
            "  --count N      with --watch: stop after N refreshes\n"
            "exit status: 0 shown, 1 no registry or no entries, 2 bad usage\n");
    return (error != nullptr) ? 2 : 0;
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
            {"help", no_argument, nullptr, 'h'},
            {nullptr, 0, nullptr, 0}};
    Options o;
    const char *env_group = getenv("UCX_PXN_GROUP");
    o.group = ((env_group != nullptr) && (*env_group != '\0')) ? env_group : "default";
    const char *env_base = getenv("UCX_PXN_REGISTRY_DIR");
    if ((env_base != nullptr) && (*env_base != '\0')) {
        o.base = env_base;
    }
    bool group_given = false;
    opterr = 0;
    for (int opt; (opt = getopt_long(argc, argv, "b:g:ajw:n:h", long_options,
                                     nullptr)) != -1;) {
        char *end = nullptr;
        switch (opt) {
        case 'b': o.base = optarg; break;
        case 'g': o.group = optarg; group_given = true; break;
        case 'a': o.all = true; break;
        case 'j': o.json = true; break;
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
