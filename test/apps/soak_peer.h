/*
 * One process slot of the soak (an emulated node and rail): a
 * ucx_pxn_peer process over cma that the soak can kill and start again in
 * the same slot, and that several threads command.
 *
 * Threading: call() serialises whole command sequences (a "buffer <id>"
 * selection and the command that uses it) with a mutex; each start bumps
 * generation(), and call() refuses (kRestarted) a sequence meant for an
 * earlier generation, so that a thread never talks to a new incarnation as
 * if it were the old one. kill() takes no lock (it is what ends a call
 * blocked in a dead process). restart() waits for the lock, so it runs
 * between command sequences.
 *
 * Every wait is bounded: commands by their timeout, start by
 * PeerProcess::start (20 s), quit by its timeout.
 */
#ifndef PXN_TOOLS_SOAK_PEER_H_
#define PXN_TOOLS_SOAK_PEER_H_

#include "peer_process.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace pxn_tools {

/* What /proc says about a process. -1: not read. */
struct ProcSample {
    long rss_kb   = -1; /* VmRSS */
    long anon_kb  = -1; /* RssAnon */
    long shmem_kb = -1; /* RssShmem */
    long threads  = -1;
    long fds      = -1; /* entries of /proc/<pid>/fd */
    /* Mappings of pxn registry files (/dev/shm/ucx-pxn-*: control files,
     * arenas), from smaps: how many, their size, their resident part. */
    long pxn_maps    = -1;
    long pxn_size_kb = -1;
    long pxn_rss_kb  = -1;

    /* VmRSS without the pxn mappings: the process's own memory. */
    long own_kb() const { return rss_kb - pxn_rss_kb; }

    static ProcSample of(pid_t pid);
};

class SoakPeer {
public:
    struct Reply {
        bool                     ok = false;        /* every line answered */
        bool                     restarted = false; /* generation moved on */
        std::vector<std::string> lines;             /* the answers */
    };

    SoakPeer(int node, int rail, const std::string &binary,
             const std::vector<std::string> &env);

    const std::string &name() const { return name_; }
    int      node() const { return node_; }
    int      rail() const { return rail_; }
    uint64_t generation() const { return generation_.load(); }
    pid_t    pid() const;

    /* Starts the first incarnation. */
    bool start(std::string *error);
    /* SIGKILL, no lock; remembers when (last_kill_ns). */
    void kill();
    /* steady_clock time of the last kill(), 0: never. */
    uint64_t last_kill_ns() const { return last_kill_ns_.load(); }
    unsigned kills() const { return kills_.load(); }
    /* Killed, not started again yet. */
    bool     restart_pending() const { return kills_.load() >= generation_.load(); }
    /* After kill(): reaps the old process and starts a new one (new
     * generation). */
    bool restart(std::string *error);

    /* Sends `lines` one after another to incarnation `generation`; stops at
     * the first unanswered line (timeout or death). */
    Reply call(uint64_t generation, const std::vector<std::string> &lines,
               int timeout_ms);

    /* "quit" and a zero exit status within timeout_ms; else kills it. */
    bool quit(int timeout_ms, std::string *error);

    ProcSample sample() const { return ProcSample::of(pid()); }

private:
    bool start_locked(std::string *error);

    int                          node_;
    int                          rail_;
    std::string                  name_;
    std::string                  binary_;
    std::vector<std::string>     env_;
    mutable std::mutex           mutex_;
    std::unique_ptr<PeerProcess> process_;
    std::atomic<pid_t>           pid_{-1};
    std::atomic<uint64_t>        generation_{0};
    std::atomic<uint64_t>        last_kill_ns_{0};
    std::atomic<unsigned>        kills_{0};
};

/* steady_clock now, in ns. */
uint64_t soak_now_ns();

} // namespace pxn_tools

#endif
