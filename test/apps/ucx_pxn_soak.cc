/*
 * ucx_pxn_soak: long-running stress of pxn with relay restarts, every byte
 * verified, leaks looked for (docs/soak.md): 2 emulated nodes x 8 rails of
 * ucx_pxn_peer processes over cma on this host, 7 senders into one relay
 * plus traffic the other way, random sizes, puts and gets, a relay killed
 * and started again periodically. What runs and what fails it: soak_run.h.
 *
 *   ucx_pxn_soak [options]          (--help lists them)
 *
 * Exit status: 0 pass, 1 fail, 2 bad usage or registries of the prefix
 * already there. Needs the ucx_pxn_peer of the same build
 * (test/apps of its build tree, or of $PXN_BUILD_DIR) and
 * the pxn module installed in the UCX it links.
 */
#include <bench/bench_units.h>
#include "soak_run.h"
#include "locate.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

using pxn_tools::SoakOptions;
using pxn_tools::SoakRun;

namespace {

void usage()
{
    fprintf(stderr,
"usage: ucx_pxn_soak [--duration S] [--seed N] [--restart-every S] [--warmup S]\n"
"                    [--max-size SIZE] [--progress-every S] [--op-timeout S]\n"
"                    [--reconnect-timeout S] [--drain-timeout S]\n"
"                    [--rss-tolerance MIB,PCT] [--heartbeat-timeout T]\n"
"                    [--wait yield|sleep|spin] [--prefix P] [--env UCX_PXN_X=v]...\n"
"                    [--inject corrupt|leak]\n"
"defaults: 600 s, seed from the clock, a restart every 30 s after a 30 s\n"
"warm-up, sizes 1 B..64M, own RSS growth up to max(16 MiB, 5%%), pxn's\n"
"heartbeat timeout\n");
}

bool parse_seconds(const std::string &text, double *value)
{
    char *end;
    errno = 0;
    const double v = strtod(text.c_str(), &end);
    if (text.empty() || (*end != '\0') || (errno != 0) || !(v >= 0)) {
        return false;
    }
    *value = v;
    return true;
}

/* 0 ok, 2 bad usage (message printed). */
int parse_options(int argc, char **argv, SoakOptions *o)
{
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if ((a == "-h") || (a == "--help")) {
            usage();
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "ucx_pxn_soak: %s needs a value\n", a.c_str());
            return 2;
        }
        const std::string v = argv[++i];
        bool ok = true;
        if (a == "--duration") {
            ok = parse_seconds(v, &o->duration);
        } else if (a == "--restart-every") {
            ok = parse_seconds(v, &o->restart_every);
        } else if (a == "--warmup") {
            ok = parse_seconds(v, &o->warmup);
        } else if (a == "--progress-every") {
            ok = parse_seconds(v, &o->progress_every) && (o->progress_every > 0);
        } else if (a == "--op-timeout") {
            ok = parse_seconds(v, &o->op_timeout) && (o->op_timeout >= 1);
        } else if (a == "--reconnect-timeout") {
            ok = parse_seconds(v, &o->reconnect_timeout);
        } else if (a == "--drain-timeout") {
            ok = parse_seconds(v, &o->drain_timeout);
        } else if (a == "--seed") {
            char *end;
            o->seed = strtoull(v.c_str(), &end, 0);
            ok      = !v.empty() && (*end == '\0');
        } else if (a == "--max-size") {
            ok = pxn_tools::parse_size(v, &o->max_size) &&
                 (o->max_size <= (1ull << 30));
        } else if (a == "--rss-tolerance") {
            ok = sscanf(v.c_str(), "%lf,%lf", &o->rss_tolerance_mb,
                        &o->rss_tolerance_pct) == 2;
        } else if (a == "--heartbeat-timeout") {
            o->heartbeat = v;
        } else if (a == "--wait") {
            o->wait_mode = (v == "spin") ? 0 : (v == "yield") ? 1 :
                           (v == "sleep") ? 2 : -1;
            ok = (o->wait_mode >= 0);
        } else if (a == "--prefix") {
            o->prefix = v;
        } else if (a == "--inject") {
            /* self-tests of the checks: a target buffer overwritten before
             * the final check, a stray file in a registry before its check */
            o->inject = v;
            ok        = (v == "corrupt") || (v == "leak");
        } else if (a == "--env") {
            ok = (v.find('=') != std::string::npos);
            o->env.push_back(v);
        } else {
            usage();
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "ucx_pxn_soak: bad value for %s: '%s'\n", a.c_str(),
                    v.c_str());
            return 2;
        }
    }
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    setvbuf(stdout, nullptr, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    SoakOptions o;
    o.peer = pxn_tools::build_dir() + "/test/apps/ucx_pxn_peer";
    const int parsed = parse_options(argc, argv, &o);
    if (parsed != 0) {
        return parsed;
    }
    SoakRun run(o);
    return run.run();
}
