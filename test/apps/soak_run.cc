#include "soak_run.h"

#include <bench/bench_units.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <dirent.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pxn_tools {

namespace {

sigset_t g_stop_signals;

/* SIGINT or SIGTERM arrived (they are blocked: polled, not handled). */
bool interrupted()
{
    static bool seen = false;
    const timespec now = {0, 0};
    seen = seen || (sigtimedwait(&g_stop_signals, nullptr, &now) > 0);
    return seen;
}

double elapsed_s(std::chrono::steady_clock::time_point since)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         since).count();
}

std::string gib(uint64_t bytes)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%.2f GiB", bytes / double(1ull << 30));
    return buf;
}

std::string registry_dir(const std::string &group)
{
    return "/dev/shm/ucx-pxn-" + std::to_string(geteuid()) + "-" + group;
}

/* File names in a registry directory other than "." and "..". */
std::vector<std::string> registry_files(const std::string &dir)
{
    std::vector<std::string> names;
    DIR *d = opendir(dir.c_str());
    for (dirent *e; (d != nullptr) && ((e = readdir(d)) != nullptr);) {
        const std::string name = e->d_name;
        if ((name != ".") && (name != "..")) {
            names.push_back(name);
        }
    }
    if (d != nullptr) {
        closedir(d);
    }
    std::sort(names.begin(), names.end());
    return names;
}

} // namespace

SoakRun::SoakRun(const SoakOptions &options) : opt_(options)
{
    if (opt_.seed == 0) {
        opt_.seed = uint64_t(time(nullptr)) ^ (uint64_t(getpid()) << 20);
    }
    if (opt_.prefix.empty()) {
        opt_.prefix = "soak" + std::to_string(getpid());
    }
    for (int node = 0; node < kNodes; ++node) {
        groups_[node] = opt_.prefix + "-node" + std::to_string(node);
    }
}

bool SoakRun::long_lived(const SoakPeer *p) const
{
    return std::find(victims_.begin(), victims_.end(), p) == victims_.end();
}

std::vector<std::string> SoakRun::peer_env(int node, int rail) const
{
    std::vector<std::string> env = {
        "UCX_PXN_NODE_ID=node" + std::to_string(node),
        "UCX_PXN_GROUP=" + groups_[node], "UCX_PXN_NET_TLS=cma",
        "UCX_PXN_RAIL_MAP=memory:rail" + std::to_string(rail),
        /* A rail-only fabric: no direct path around a dead relay (cma would
         * reach every process of this host). */
        "UCX_PXN_FALLBACK=n",
        "PXN_PEER_YIELD=" + std::to_string(opt_.wait_mode)};
    if (!opt_.heartbeat.empty()) {
        env.push_back("UCX_PXN_HEARTBEAT_TIMEOUT=" + opt_.heartbeat);
    }
    env.insert(env.end(), opt_.env.begin(), opt_.env.end());
    return env;
}

bool SoakRun::start_peers()
{
    for (int node = 0; node < kNodes; ++node) {
        for (int rail = 0; rail < kRails; ++rail) {
            peers_.emplace_back(new SoakPeer(node, rail, opt_.peer,
                                             peer_env(node, rail)));
            std::string error;
            if (!peers_.back()->start(&error)) {
                verdict_.fail("start: " + error);
                return false;
            }
        }
    }
    victims_ = {peer(0, kMainRelayRail), peer(1, kCrossRelayRail)};
    return true;
}

bool SoakRun::make_flows()
{
    SoakFlowConfig config;
    config.buffer_size          = opt_.max_size;
    config.max_op               = opt_.max_size;
    config.op_timeout_ms        = int(opt_.op_timeout * 1000);
    config.reconnect_timeout_ms = int(opt_.reconnect_timeout * 1000);
    config.restart_window_ns    = uint64_t(kRestartWindowS * 1e9);
    auto add = [&](SoakPeer *sender, SoakPeer *target, unsigned buffer,
                   SoakPeer *via) {
        config.seed = opt_.seed * 1000003ull + flows_.size() + 1;
        flows_.emplace_back(new SoakFlow(sender, target, buffer, via, config,
                                         &stats_, &verdict_));
    };
    for (int rail = 0; rail < kRails; ++rail) {
        if (rail != kMainRelayRail) {
            add(peer(0, rail), peer(1, kMainRelayRail), 1 + rail,
                peer(0, kMainRelayRail));
        }
    }
    for (int rail = 0; rail < kRails; ++rail) {
        if (rail != kCrossRelayRail) {
            add(peer(1, rail), peer(0, kCrossRelayRail), 1 + rail,
                peer(1, kCrossRelayRail));
        }
    }
    add(peer(0, kMainRelayRail), peer(1, kSideRail), 1, peer(0, kSideRail));
    add(peer(1, kCrossRelayRail), peer(0, kSideRail), 1, peer(1, kSideRail));
    for (auto &f : flows_) {
        std::string error;
        if (!f->prepare_target(&error)) {
            verdict_.fail(error);
            return false;
        }
    }
    for (auto &f : flows_) {
        f->start();
    }
    return true;
}

void SoakRun::progress_line()
{
    const double t = elapsed_s(start_);
    const uint64_t moved = stats_.bytes_put + stats_.bytes_got;
    printf("[soak %5.0fs] ops %lu ok, %lu failed (%lu unexplained), %lu retried"
           " | rounds %lu, %lu abandoned | put %s, get %s, %.0f MB/s"
           " | relay restarts %u\n",
           t, stats_.ops_ok.load(), stats_.ops_failed.load(),
           stats_.ops_unexplained.load(), stats_.ops_retried.load(),
           stats_.rounds.load(), stats_.rounds_abandoned.load(),
           gib(stats_.bytes_put).c_str(), gib(stats_.bytes_got).c_str(),
           moved / std::max(t, 1e-3) / 1e6, restarts_);
    fflush(stdout);
}

void SoakRun::restart_next()
{
    SoakPeer *victim = victims_[restarts_ % victims_.size()];
    const pid_t old  = victim->pid();
    victim->kill();
    std::string error;
    if (!victim->restart(&error)) {
        verdict_.fail("relay restart: " + error);
        return;
    }
    ++restarts_;
    /* The new incarnation opened the registry: its cleanup removes the
     * killed process's files (registry.h). */
    const std::string prefix = "p" + std::to_string(old) + "-";
    const std::string dir = registry_dir(groups_[victim->node()]);
    for (const std::string &name : registry_files(dir)) {
        if (name.rfind(prefix, 0) == 0) {
            ++stale_after_restart_;
            printf("[soak %5.0fs] note: %s still there after the restart of %s\n",
                   elapsed_s(start_), name.c_str(), victim->name().c_str());
        }
    }
    printf("[soak %5.0fs] restarted relay %s: pid %d -> %d\n", elapsed_s(start_),
           victim->name().c_str(), int(old), int(victim->pid()));
    fflush(stdout);
}

void SoakRun::take_baseline()
{
    for (auto &p : peers_) {
        baseline_.push_back(p->sample());
    }
    have_baseline_ = true;
    baseline_at_   = elapsed_s(start_);
    printf("[soak %5.0fs] warm-up done: RSS and fds of the %zu long-lived "
           "processes sampled\n", baseline_at_, peers_.size() - victims_.size());
    fflush(stdout);
}

void SoakRun::drain()
{
    for (auto &f : flows_) {
        f->request_stop();
    }
    const auto drain_start = std::chrono::steady_clock::now();
    double next_progress   = opt_.progress_every;
    for (;;) {
        bool all = true;
        for (auto &f : flows_) {
            all = all && f->finished();
        }
        if (all) {
            break;
        }
        if (elapsed_s(drain_start) > opt_.drain_timeout) {
            std::string which;
            for (auto &f : flows_) {
                if (!f->finished()) {
                    which += " [" + f->name() + "]";
                }
            }
            verdict_.fail("flows did not finish their round within " +
                          std::to_string(int(opt_.drain_timeout)) +
                          " s of the stop:" + which);
            for (auto &p : peers_) {
                p->kill(); /* ends their commands; the flows see it */
            }
            break;
        }
        if (elapsed_s(drain_start) > next_progress) {
            progress_line();
            next_progress += opt_.progress_every;
        }
        usleep(100000);
    }
    for (auto &f : flows_) {
        f->join();
    }
    drain_s_ = elapsed_s(drain_start);
}

bool SoakRun::check_targets()
{
    unsigned ok = 0;
    for (auto &f : flows_) {
        const std::string problem = f->final_check();
        if (problem.empty()) {
            ++ok;
        } else {
            verdict_.fail(f->name() + ": " + problem);
        }
    }
    printf("final check: %u/%zu target buffers hold their last verified pattern "
           "(every byte, canaries included)\n", ok, flows_.size());
    return ok == flows_.size();
}

bool SoakRun::check_processes(const std::vector<ProcSample> &final_samples)
{
    bool ok = true;
    printf("memory and fds after the warm-up -> at the end (KiB; own = VmRSS "
           "without the pxn registry mappings):\n");
    printf("%-12s %6s | %-23s | %-23s | %-27s | %-7s | %s\n", "process", "pid",
           "VmRSS", "own RSS", "pxn mappings: n, size, rss", "fds", "threads");
    for (size_t i = 0; i < peers_.size(); ++i) {
        const SoakPeer *p   = peers_[i].get();
        const ProcSample &b = baseline_[i], &e = final_samples[i];
        const bool lives    = long_lived(p);
        const long growth   = e.own_kb() - b.own_kb();
        const double limit  = std::max(opt_.rss_tolerance_mb * 1024,
                                       b.own_kb() * opt_.rss_tolerance_pct / 100);
        std::string note;
        auto fail = [&](const std::string &what, const std::string &why) {
            note += " " + what;
            verdict_.fail(p->name() + ": " + why);
            ok = false;
        };
        if (!lives) {
            note = " (restarted: not compared)";
        } else if ((e.rss_kb < 0) || (e.fds < 0) || (e.pxn_maps < 0)) {
            fail("GONE", "/proc not readable at the end");
        } else {
            if (growth > limit) {
                fail("RSS-GREW", "own RSS grew by " + std::to_string(growth) +
                     " KiB, more than the tolerance " + std::to_string(long(limit)) +
                     " KiB");
            }
            if (e.fds > b.fds) {
                fail("FDS-GREW", "open fds " + std::to_string(b.fds) +
                     " after the warm-up, " + std::to_string(e.fds) + " at the end");
            }
            if ((e.pxn_maps > b.pxn_maps) || (e.pxn_size_kb > b.pxn_size_kb)) {
                fail("MAPS-GREW", "pxn registry mappings " +
                     std::to_string(b.pxn_maps) + " (" +
                     std::to_string(b.pxn_size_kb) + " KiB) after the warm-up, " +
                     std::to_string(e.pxn_maps) + " (" +
                     std::to_string(e.pxn_size_kb) + " KiB) at the end");
            }
        }
        printf("%-12s %6d | %7ld %7ld %+7ld | %7ld %7ld %+7ld | %2ld %2ld %7ld %7ld %+7ld "
               "| %3ld %3ld | %2ld %2ld%s\n",
               p->name().c_str(), int(p->pid()), b.rss_kb, e.rss_kb,
               e.rss_kb - b.rss_kb, b.own_kb(), e.own_kb(), growth, b.pxn_maps,
               e.pxn_maps, e.pxn_size_kb, e.pxn_rss_kb, e.pxn_rss_kb - b.pxn_rss_kb,
               b.fds, e.fds, b.threads, e.threads, note.c_str());
    }
    return ok;
}

void SoakRun::print_counters()
{
    pxn::abi::ProcessCounters total = {};
    for (auto &p : peers_) {
        pxn::abi::ProcessCounters c = {};
        if (!pxn_tools::read_counters(groups_[p->node()], p->pid(), &c)) {
            continue;
        }
        total.relay.pieces        += c.relay.pieces;
        total.relay.bytes         += c.relay.bytes;
        total.relay.failed_pieces += c.relay.failed_pieces;
        total.relay.rejected      += c.relay.rejected;
        total.relay.route_errors  += c.relay.route_errors;
        total.sender.failed_ops   += c.sender.failed_ops;
        total.sender.credit_stalls += c.sender.credit_stalls;
        total.sender.fallback_ops += c.sender.fallback_ops;
    }
    printf("relay counters of the processes alive now (killed incarnations' "
           "are gone): %lu pieces, %s relayed, failed_pieces %lu, rejected %lu, "
           "route_errors %lu; senders: failed_ops %lu, credit_stalls %lu, "
           "fallback_ops %lu\n", total.relay.pieces, gib(total.relay.bytes).c_str(),
           total.relay.failed_pieces, total.relay.rejected,
           total.relay.route_errors, total.sender.failed_ops,
           total.sender.credit_stalls, total.sender.fallback_ops);
}

bool SoakRun::quit_peers()
{
    bool ok = true;
    for (auto &p : peers_) {
        std::string error;
        if (!p->quit(20000, &error)) {
            verdict_.fail("quit: " + error);
            ok = false;
        }
    }
    return ok;
}

bool SoakRun::check_registries()
{
    bool ok = true;
    /* The last process to quit removes the directory (registry_lease.h). */
    for (const std::string &group : groups_) {
        const std::string dir = registry_dir(group);
        std::string left;
        for (const std::string &name : registry_files(dir)) {
            left += " " + name;
        }
        struct stat st;
        if (!left.empty() || (stat(dir.c_str(), &st) == 0)) {
            verdict_.fail("left in " + dir + " after every process quit:" +
                          (left.empty() ? std::string(" the directory") : left));
            ok = false;
            continue;
        }
        printf("registry %s: removed by the last process to quit\n", dir.c_str());
    }
    return ok;
}

int SoakRun::run()
{
    for (const std::string &group : groups_) {
        struct stat st;
        if (stat(registry_dir(group).c_str(), &st) == 0) {
            fprintf(stderr, "ucx_pxn_soak: %s exists: another soak of this prefix "
                    "runs or left it; use --prefix or remove it\n",
                    registry_dir(group).c_str());
            return 2;
        }
    }
    sigemptyset(&g_stop_signals);
    sigaddset(&g_stop_signals, SIGINT);
    sigaddset(&g_stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &g_stop_signals, nullptr);
    printf("ucx_pxn_soak: %.0f s, seed %lu, sizes 1 B..%s, relay restart every "
           "%.0f s after a %.0f s warm-up, heartbeat timeout %s, groups %s-node0/1\n",
           opt_.duration, opt_.seed, human(opt_.max_size).c_str(),
           opt_.restart_every, opt_.warmup,
           opt_.heartbeat.empty() ? "default" : opt_.heartbeat.c_str(),
           opt_.prefix.c_str());

    start_ = std::chrono::steady_clock::now();
    if (start_peers() && make_flows()) {
        printf("ucx_pxn_soak: %zu processes, %zu flows (7 into relay node0/rail%d, "
               "7 the other way into relay node1/rail%d, 2 from the relays), "
               "started in %.1f s\n",
               peers_.size(), flows_.size(), kMainRelayRail, kCrossRelayRail,
               elapsed_s(start_));
        /* The duration is the traffic's: starting the processes takes from
         * 0.3 s (UCX 1.13) to 7 s (UCX 1.22, whose libucs spends 0.4 s in
         * each process patching mmap and its kin, a 50 ms grace apiece). */
        start_ = std::chrono::steady_clock::now();
        traffic();
        drain();
        progress_line();
        printf("traffic for %.1f s, drained in %.1f s\n", traffic_s_, drain_s_);
        if (opt_.inject == "corrupt") {
            SoakPeer *t = peer(1, kMainRelayRail);
            t->call(t->generation(), {"buffer 1", "fill 4242"}, 60000);
        }
        if (have_baseline_) {
            check_targets();
            print_counters();
            std::vector<ProcSample> final_samples;
            for (auto &p : peers_) {
                final_samples.push_back(p->sample());
            }
            check_processes(final_samples);
        }
    }
    const bool quit_ok = quit_peers();
    if (opt_.inject == "leak") {
        /* The directory went with its last process: planted there again. */
        mkdir(registry_dir(groups_[0]).c_str(), 0700);
        const std::string stray = registry_dir(groups_[0]) +
                                  "/p1-0000000000000001.arena";
        if (FILE *f = fopen(stray.c_str(), "w")) {
            fclose(f);
        }
    }
    if (quit_ok) {
        check_registries();
    }
    print_summary();
    return verdict_.failed() ? 1 : 0;
}

void SoakRun::traffic()
{
    double next_progress = opt_.progress_every, next_restart = 0;
    while (!verdict_.failed() && !interrupted() &&
           (elapsed_s(start_) < opt_.duration)) {
        const double t = elapsed_s(start_);
        bool all_rounds = true;
        for (auto &f : flows_) {
            all_rounds = all_rounds && (f->rounds() > 0);
        }
        if (!have_baseline_ && (t >= opt_.warmup) && all_rounds) {
            take_baseline();
            next_restart = t + opt_.restart_every;
        }
        if (have_baseline_ && (opt_.restart_every > 0) && (t >= next_restart) &&
            (t < opt_.duration - opt_.restart_every / 2)) {
            restart_next();
            next_restart += opt_.restart_every;
        }
        if (t >= next_progress) {
            progress_line();
            next_progress += opt_.progress_every;
        }
        usleep(100000);
    }
    if (interrupted()) {
        printf("[soak %5.0fs] interrupted: stopping the traffic\n",
               elapsed_s(start_));
    }
    if (!have_baseline_ && !verdict_.failed()) {
        verdict_.fail("not every flow completed a round before the end: no "
                      "warm-up sample (run longer or with a smaller --max-size)");
    }
    traffic_s_ = elapsed_s(start_);
}

void SoakRun::print_summary()
{
    const double t = std::max(traffic_s_, 1e-3);
    printf("\nsummary\n");
    printf("  traffic: %.1f s (drained in %.1f s), seed %lu\n", traffic_s_,
           drain_s_, opt_.seed);
    printf("  operations: %lu ok (%lu UCT operations), %lu failed, %lu of them "
           "with no relay restart in the %.0f s before, %lu retried\n",
           stats_.ops_ok.load(), stats_.uct_ops.load(), stats_.ops_failed.load(),
           stats_.ops_unexplained.load(), kRestartWindowS,
           stats_.ops_retried.load());
    for (const std::string &line : stats_.failures()) {
        printf("    failed with %s\n", line.c_str());
    }
    printf("  rounds: %lu completed, %lu abandoned (their sender was restarted)\n",
           stats_.rounds.load(), stats_.rounds_abandoned.load());
    printf("  bytes: put %s, got %s (%.0f MB/s together), verified %s\n",
           gib(stats_.bytes_put).c_str(), gib(stats_.bytes_got).c_str(),
           (stats_.bytes_put + stats_.bytes_got) / t / 1e6,
           gib(stats_.bytes_checked).c_str());
    printf("  relay restarts: %u; killed incarnations' files still there right "
           "after a restart: %u; reconnects %lu\n", restarts_,
           stale_after_restart_, stats_.reconnects.load());
    for (const std::string &e : verdict_.errors()) {
        printf("  FAILURE: %s\n", e.c_str());
    }
    printf("RESULT: %s\n", verdict_.failed() ? "FAIL" : "PASS");
}

} // namespace pxn_tools
