/*
 * A ucx_pxn_peer process, for the multi-process tests and the benchmark:
 * started with fork+exec (never sharing UCX state with its parent),
 * optionally inside a network namespace of the emulated topology, driven by
 * lines over pipes. Every wait is bounded; the destructor kills and reaps
 * the process.
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

/* Splits a line at spaces. */
std::vector<std::string> split(const std::string &line);

/* Reads the counters of process `pid` from its registry entry in group
 * `group`; false if it has none. */
bool read_counters(const std::string &group, pid_t pid,
                   pxn::abi::ProcessCounters *counters);

/* CPU time (user + system, all threads) of process `pid`, in seconds. */
double process_cpu_seconds(pid_t pid);

} // namespace pxn_tools

#endif
