/*
 * ucx_pxn_contention_bench: the latency of single UCP operations through a
 * relay whose cores are contended on purpose, beside the same two
 * processes' rail path in the same run (docs/relay-engine.md, "A relay
 * beside busy pollers").
 *
 *   ucx_pxn_contention_bench [--settings quiet,busy,bound,quota]
 *       [--ops put,get,window,put-big,get-big,pingpong] [--paths pxn,rail]
 *       [--iters 200] [--size 64K] [--big 1M] [--window 16]
 *       [--pollers N] [--cpu N] [--quota 50] [--idle-s 2] [--port 13600]
 *       [--prefix pxc] [--relay PATH] [--logs DIR] [--env NAME=value]...
 *
 * Processes: bench/ucp_bench_rails.h (initiator node 0 rail 0, target node
 * 1 rail 1, both busy-polling; relays of node 0 rail 1, which carries every
 * put and get, and node 1 rail 0, each a process of its own), inner cma,
 * host memory; bench/contention_peer.h says what is timed and checked.
 * Settings, each with a fresh set of processes:
 *   quiet  nothing else runs;
 *   busy   --pollers processes (default: one per core) spin on every core
 *          beside the initiator's and target's own polling;
 *   bound  each relay's process is bound to core --cpu (default: the last)
 *          with taskset, as mpirun --bind-to core binds a rank, and busy-
 *          polls on its main thread (ucx_pxn_relay -b);
 *   quota  each relay's process busy-polls likewise under a CPU quota of
 *          --quota percent of one core (cgroup v2 cpu.max, or v1
 *          cpu.cfs_quota_us), where this machine lets a cgroup be made.
 *
 * Printed per setting: every op's p50, p90 and p99 per path, pxn's p50 and
 * p90 against the rail path's (ratio), whether pxn's p90 stays under 1 ms
 * (a scheduler slice is 0.75-4 ms), the CPU the relays' engine threads
 * used during the run and how long they waited, runnable, for a CPU (their
 * schedstat: the starvation itself), and, where the relays do not busy-poll,
 * the engine threads' CPU over --idle-s seconds with no traffic (% of one core, both
 * relays together). Exit status 0 when every op of every setting ran and
 * verified, 1 otherwise.
 */
#include <apps/peer_process.h>
#include <bench/bench_units.h>
#include "contention_peer.h"
#include "ucp_bench_rails.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using pxn_tools::BackgroundProcess;
using pxn_tools::ContentionPeerOptions;
using pxn_tools::UcpRails;

namespace {

struct Options {
    ContentionPeerOptions     peer;
    pxn_tools::UcpRailsConfig rails;
    std::vector<std::string>  settings = {"quiet", "busy", "bound", "quota"};
    long                      pollers  = sysconf(_SC_NPROCESSORS_ONLN);
    long                      cpu      = sysconf(_SC_NPROCESSORS_ONLN) - 1;
    unsigned                  quota    = 50;
    double                    idle_s   = 2;
};

[[noreturn]] void usage(const char *why)
{
    fprintf(stderr, "ucx_pxn_contention_bench: %s (see the comment at the top of "
                    "bench/ucx_pxn_contention_bench.cc)\n", why);
    exit(2);
}

std::string join(const std::vector<std::string> &items)
{
    std::string out;
    for (const std::string &s : items) {
        out += (out.empty() ? "" : ",") + s;
    }
    return out;
}

/* What the scheduler says of the threads named ucx-pxn of some processes
 * (/proc/<pid>/task/<tid>/schedstat): seconds on a CPU and seconds runnable
 * but waiting for one. */
struct EngineSched {
    double run_s = 0, wait_s = 0;

    static EngineSched of(std::initializer_list<pid_t> pids)
    {
        EngineSched total;
        for (pid_t pid : pids) {
            const std::string task = pxn_tools::thread_dir(pid, "ucx-pxn");
            std::ifstream stat(task.empty() ? "/dev/null" : task + "/schedstat");
            unsigned long long run = 0, wait = 0;
            if (stat >> run >> wait) {
                total.run_s  += run / 1e9;
                total.wait_s += wait / 1e9;
            }
        }
        return total;
    }
    EngineSched operator-(const EngineSched &o) const
    {
        EngineSched d;
        d.run_s  = run_s - o.run_s;
        d.wait_s = wait_s - o.wait_s;
        return d;
    }
};

/* A cgroup with a CPU quota; empty path when none could be made. */
class Quota {
public:
    Quota(unsigned percent, std::string *why)
    {
        const std::string name = "pxn-contention-" + std::to_string(getpid());
        const std::string quota = std::to_string(percent * 1000);
        if (make("/sys/fs/cgroup", name, "cgroup.controllers") &&
            put(dir_ + "/cpu.max", quota + " 100000")) {
            return;
        }
        drop();
        if (make("/sys/fs/cgroup/cpu", name, "cpu.cfs_quota_us") &&
            put(dir_ + "/cpu.cfs_period_us", "100000") &&
            put(dir_ + "/cpu.cfs_quota_us", quota)) {
            return;
        }
        *why = "no cgroup with a CPU quota could be made (" + error_ + ")";
        drop();
    }
    ~Quota() { drop(); }
    bool ok() const { return !dir_.empty(); }
    bool add(pid_t pid) { return put(dir_ + "/cgroup.procs", std::to_string(pid)); }

private:
    bool make(const std::string &root, const std::string &name, const std::string &probe)
    {
        if (access((root + "/" + probe).c_str(), F_OK) != 0) {
            error_ = root + "/" + probe + ": " + strerror(errno);
            return false;
        }
        dir_ = root + "/" + name;
        if (mkdir(dir_.c_str(), 0755) != 0) {
            error_ = dir_ + ": " + strerror(errno);
            dir_.clear();
            return false;
        }
        return true;
    }
    bool put(const std::string &file, const std::string &value)
    {
        std::ofstream out(file);
        out << value << std::flush;
        if (!out) {
            error_ = "writing " + value + " to " + file + " failed";
        }
        return bool(out);
    }
    void drop()
    {
        if (!dir_.empty()) {
            rmdir(dir_.c_str()); /* its processes have gone (or go to the parent) */
            dir_.clear();
        }
    }

    std::string dir_, error_;
};

/* Processes that spin on every core until destroyed. */
class Pollers {
public:
    explicit Pollers(long count)
    {
        for (long i = 0; i < count; ++i) {
            const pid_t pid = fork();
            if (pid == 0) {
                for (volatile unsigned long n = 0;; n = n + 1) {
                }
            }
            pids_.push_back(pid);
        }
    }
    ~Pollers()
    {
        for (pid_t pid : pids_) {
            kill(pid, SIGKILL);
            waitpid(pid, nullptr, 0);
        }
    }

private:
    std::vector<pid_t> pids_;
};

struct Row {
    double p50 = 0, p90 = 0, p99 = 0;
    bool   ok  = false;
};

/* One setting: fresh relays, target and initiator. */
bool run_setting(const Options &o, const std::string &setting, int port)
{
    pxn_tools::UcpRailsConfig rails = o.rails;
    rails.prefix += "-" + setting;
    const bool busy_relays = (setting == "bound") || (setting == "quota");
    if (busy_relays) {
        rails.relay_args = {"-b"};
    }
    if (setting == "bound") {
        rails.relay_wrap = {"/usr/bin/taskset", "-c", std::to_string(o.cpu)};
    }
    std::string why;
    std::unique_ptr<Quota> quota;
    if (setting == "quota") {
        quota.reset(new Quota(o.quota, &why));
        if (!quota->ok()) {
            printf("\n== setting quota: skipped: %s\n", why.c_str());
            return true;
        }
    }
    std::unique_ptr<Pollers> pollers;
    if (setting == "busy") {
        pollers.reset(new Pollers(o.pollers));
    }
    UcpRails r(rails, "pxn-contention");
    r.start_relays();
    for (int i = 0; (quota != nullptr) && (i < 2); ++i) {
        if (!quota->add(r.relay_pid(i))) {
            printf("\n== setting quota: skipped: cannot move a relay into the cgroup\n");
            return true;
        }
    }
    const auto engines = [&] { return EngineSched::of({r.relay_pid(0), r.relay_pid(1)}); };
    const EngineSched before_run = engines();

    const std::string exe = UcpRails::self_exe();
    std::vector<std::string> common = {
        "--port", std::to_string(port), "--iters", std::to_string(o.peer.iters),
        "--size", std::to_string(o.peer.size), "--big", std::to_string(o.peer.big),
        "--window", std::to_string(o.peer.window), "--ops", join(o.peer.ops),
        "--paths", join(o.peer.paths), "--deadline", std::to_string(o.peer.deadline)};
    std::vector<std::string> target_argv = {exe, "--role", "target"};
    std::vector<std::string> in_argv     = {exe, "--role", "initiator"};
    target_argv.insert(target_argv.end(), common.begin(), common.end());
    in_argv.insert(in_argv.end(), common.begin(), common.end());
    BackgroundProcess target, initiator;
    const std::string log = r.config().logs + "/" + setting;
    if (!target.start("", r.env(1, 1), target_argv, log + "-target.log", &why) ||
        !target.wait_for_output("listening", 30000) ||
        !initiator.start("", r.env(0, 0), in_argv, log + "-initiator.log", &why)) {
        fprintf(stderr, "ucx_pxn_contention_bench: %s: cannot start: %s\n%s",
                setting.c_str(), why.c_str(), target.output().c_str());
        return false;
    }
    const int status  = initiator.wait(int(o.peer.deadline) * 1000 + 10000);
    const int tstatus = target.wait(30000);
    const EngineSched run = engines() - before_run;
    double idle = -1;
    if (!busy_relays && (o.idle_s > 0)) {
        const EngineSched before_idle = engines();
        usleep(useconds_t(o.idle_s * 1e6));
        idle = (engines() - before_idle).run_s / o.idle_s * 100;
    }

    std::map<std::string, std::map<std::string, Row>> rows;
    std::istringstream out(initiator.output());
    for (std::string line; std::getline(out, line);) {
        char op[16], path[8], verified[16];
        Row row;
        if (sscanf(line.c_str(), "lat op=%15s path=%7s bytes=%*u n=%*u p50_us=%lf "
                   "p90_us=%lf p99_us=%lf max_us=%*f verified=%15s", op, path, &row.p50,
                   &row.p90, &row.p99, verified) == 6) {
            row.ok          = (strcmp(verified, "ok") == 0);
            rows[op][path] = row;
        }
    }
    printf("\n== setting %s (logs %s)\n", setting.c_str(), r.config().logs.c_str());
    printf("%-9s %8s %8s %8s %8s %8s %8s %9s %9s %9s %s\n", "op", "pxn p50", "p90", "p99",
           "rail p50", "p90", "p99", "p50 x", "p90 x", "p90<1ms", "verified");
    bool ok = (status == 0) && (tstatus == 0);
    for (const std::string &op : o.peer.ops) {
        const Row &x = rows[op]["pxn"], &y = rows[op]["rail"];
        printf("%-9s %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %9.2f %9.2f %9s %s\n", op.c_str(),
               x.p50, x.p90, x.p99, y.p50, y.p90, y.p99, (y.p50 > 0) ? x.p50 / y.p50 : 0,
               (y.p90 > 0) ? x.p90 / y.p90 : 0, (x.p90 < 1000) ? "yes" : "NO",
               (x.ok && (y.ok || !rows[op].count("rail"))) ? "ok" : "NO");
        ok = ok && x.ok;
    }
    printf("relay engines during the run: %.3f s on a CPU, %.3f s runnable but "
           "waiting for one", run.run_s, run.wait_s);
    if (idle >= 0) {
        printf("; idle over %.1f s: %.3f%% of a core (both relays)", o.idle_s, idle);
    }
    printf("\n");
    r.stop_relays();
    if ((status != 0) || (tstatus != 0)) {
        fprintf(stderr, "ucx_pxn_contention_bench: %s: initiator exit %d, target exit %d\n"
                "--- initiator:\n%s--- target:\n%s", setting.c_str(), status, tstatus,
                initiator.output().c_str(), target.output().c_str());
    }
    return ok;
}

std::vector<std::string> list(const std::string &text)
{
    std::vector<std::string> items;
    std::istringstream in(text);
    for (std::string item; std::getline(in, item, ',');) {
        items.push_back(item);
    }
    return items;
}

} // namespace

int main(int argc, char **argv)
{
    Options o;
    o.rails.prefix = "pxc";
    std::string role;
    for (int i = 1; i < argc; ++i) {
        const std::string name = argv[i];
        if (i + 1 >= argc) {
            usage(("missing value for " + name).c_str());
        }
        const std::string value = argv[++i];
        uint64_t bytes = 0;
        if (name == "--role") {
            role = value;
        } else if (name == "--settings") {
            o.settings = list(value);
        } else if (name == "--ops") {
            o.peer.ops = list(value);
        } else if (name == "--paths") {
            o.peer.paths = list(value);
        } else if ((name == "--size") || (name == "--big")) {
            if (!pxn_tools::parse_size(value, &bytes) || (bytes % 8 != 0)) {
                usage(("bad size " + value).c_str());
            }
            ((name == "--size") ? o.peer.size : o.peer.big) = bytes;
        } else if (name == "--iters") {
            o.peer.iters = unsigned(std::stoul(value));
        } else if (name == "--window") {
            o.peer.window = unsigned(std::stoul(value));
        } else if (name == "--port") {
            o.peer.port = std::stoi(value);
        } else if (name == "--deadline") {
            o.peer.deadline = unsigned(std::stoul(value));
        } else if (name == "--pollers") {
            o.pollers = std::stol(value);
        } else if (name == "--cpu") {
            o.cpu = std::stol(value);
        } else if (name == "--quota") {
            o.quota = unsigned(std::stoul(value));
        } else if (name == "--idle-s") {
            o.idle_s = std::stod(value);
        } else if (!pxn_tools::ucp_rails_option(&o.rails, name, value)) {
            usage(("unknown option " + name).c_str());
        }
    }
    for (const std::string &op : o.peer.ops) {
        if (std::find(pxn_tools::contention_ops().begin(), pxn_tools::contention_ops().end(),
                      op) == pxn_tools::contention_ops().end()) {
            usage(("unknown op " + op).c_str());
        }
    }
    if (role == "target") {
        return pxn_tools::contention_target(o.peer);
    } else if (role == "initiator") {
        return pxn_tools::contention_initiator(o.peer);
    } else if (!role.empty()) {
        usage(("unknown role " + role).c_str());
    }
    if ((o.peer.iters == 0) || (o.peer.window == 0) || (o.quota == 0) || (o.quota > 100)) {
        usage("--iters, --window must be positive, --quota in 1..100");
    }
    signal(SIGPIPE, SIG_IGN);
    printf("ucx_pxn_contention_bench: %u repetitions per op; %s blocks, %s big, window "
           "%u; %ld cores\n", o.peer.iters, pxn_tools::human(o.peer.size).c_str(),
           pxn_tools::human(o.peer.big).c_str(), o.peer.window,
           sysconf(_SC_NPROCESSORS_ONLN));
    bool ok  = true;
    int port = o.peer.port;
    for (const std::string &setting : o.settings) {
        if ((setting != "quiet") && (setting != "busy") && (setting != "bound") &&
            (setting != "quota")) {
            usage(("unknown setting " + setting).c_str());
        }
        ok = run_setting(o, setting, port++) && ok;
        fflush(stdout);
    }
    printf("\nRESULT: %s\n", ok ? "every op verified" : "FAIL");
    return ok ? 0 : 1;
}
