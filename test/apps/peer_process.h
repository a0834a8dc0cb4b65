/*
 * A ucx_pxn_peer process, for the multi-process tests and the benchmark:
 * started with fork+exec (never sharing UCX state with its parent),
 * optionally inside a network namespace of the emulated topology, driven by
 * lines over pipes. Every wait is bounded; the destructor ends the process
 * as a user would, so that it leaves nothing behind: end of input (its
 * loop ends, it closes UCT), then SIGTERM, then SIGKILL, each after
 * kQuitMs / kTermMs without an exit; it reaps it.
 */
#ifndef PXN_TOOLS_PEER_PROCESS_H_
#define PXN_TOOLS_PEER_PROCESS_H_

#include <ucs/pxn/abi.h>

#include <map>
#include <string>
#include <sys/types.h>
#include <vector>

namespace pxn_tools {

class PeerProcess {
public:
    PeerProcess() = default;
    ~PeerProcess();
    PeerProcess(const PeerProcess&) = delete;
    PeerProcess &operator=(const PeerProcess&) = delete;

    static constexpr int kQuitMs = 2000;
    static constexpr int kTermMs = 2000;

    /* Starts `<binary> md tl device` with `env` added, in network namespace
     * `netns` (empty: this one); waits for "ready". */
    bool start(const std::string &binary, const std::string &netns,
               const std::vector<std::string> &env,
               const std::string &md, const std::string &tl,
               const std::string &device, std::string *error);

    /* Sends a command and returns its one-line answer ("" on timeout or
     * if the process died). */
    std::string call(const std::string &line, int timeout_ms = 30000);
    bool        send(const std::string &line);
    std::string receive(int timeout_ms);

    pid_t pid() const { return pid_; }
    void  kill(int sig);
    /* SIGSTOP, then waits until every thread is stopped. */
    bool  stop();
    /* Exit status (or -signal); -1000 on timeout. */
    int   wait(int timeout_ms);

private:
    pid_t       pid_      = -1;
    int         to_fd_    = -1;
    int         from_fd_  = -1;
    std::string buffered_;
};

/*
 * Any command, started with fork+exec like PeerProcess (optionally inside
 * network namespace `netns`, with `env` entries "NAME=value" added and
 * "NAME=" unset), its stdout and stderr going to the file `log_path`. Dies
 * with its parent (PR_SET_PDEATHSIG); the destructor ends a process still
 * running with SIGTERM (SIGKILL after PeerProcess::kTermMs) and reaps it. `ip netns exec` execs the command, so
 * pid() is the command's own pid.
 */
class BackgroundProcess {
public:
    BackgroundProcess() = default;
    ~BackgroundProcess();
    BackgroundProcess(const BackgroundProcess&) = delete;
    BackgroundProcess &operator=(const BackgroundProcess&) = delete;

    bool start(const std::string &netns, const std::vector<std::string> &env,
               const std::vector<std::string> &argv, const std::string &log_path,
               std::string *error);

    pid_t pid() const { return pid_; }
    void  kill(int sig);
    /* Exit status (or -signal), also when called again after the exit;
     * -1000 if still running after timeout_ms. */
    int   wait(int timeout_ms);
    /* What it wrote so far. */
    std::string output() const;
    /* Waits until its output contains `text`; false on timeout or exit. */
    bool  wait_for_output(const std::string &text, int timeout_ms);

private:
    pid_t       pid_    = -1;
    bool        exited_ = false;
    int         status_ = -1000;
    std::string log_path_;
};

/* Splits a line at spaces. */
std::vector<std::string> split(const std::string &line);
/* `text` cut at `separator`, empty parts dropped. */
std::vector<std::string> split(const std::string &text, char separator);

/* A peer's answer to put/get, "done <status, maybe several words> <ns>
 * <ops>" -> status and ops (ops may be nullptr); false for anything else. */
bool parse_done(const std::string &line, std::string *status, uint64_t *ops);

/* Reads the counters of process `pid` from its registry entry in group
 * `group`; false if it has none. */
bool read_counters(const std::string &group, pid_t pid,
                   pxn::abi::ProcessCounters *counters);

/* CPU time (user + system, all threads) of process `pid`, in seconds. */
double process_cpu_seconds(pid_t pid);

/* /proc/<pid>/task/<tid> of the thread of `pid` named `comm` (pxn's engine
 * thread is "ucx-pxn"); "" when there is none. */
std::string thread_dir(pid_t pid, const std::string &comm);

} // namespace pxn_tools

#endif
