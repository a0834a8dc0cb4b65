/*
 * One traffic flow of the soak: a sender process moving data to and from
 * one buffer of a target process through pxn (the relay of the target's
 * rail on the sender's node), in rounds, on a thread of its own.
 *
 * A round: a fresh seed; the sender's buffer 0 is filled with its pattern;
 * one put pass (soak_plan.h) covers every byte of the target buffer; the
 * target checks its whole buffer and canaries against the seed (the round's
 * verified seed from then on); the sender's buffer is overwritten with
 * another pattern, one get pass brings every byte back, each get is checked
 * in the sender's buffer right after it completed.
 *
 * Failures: an operation answered with an error status is expected when
 * its relay died: the flow makes a new ep ("connect", retried until the
 * relay of that rail is back, bounded) and issues the same operation again.
 * An error with no kill of that relay in restart_window_ns before is not
 * expected: it is fatal.
 * A sender process killed by the soak abandons its round; the flow starts
 * over on the new incarnation (new buffer, caps, ep) with a new round. Data
 * that does not match, a command not answered within its timeout (a hang),
 * an operation failing kMaxAttempts times, or no ep within the reconnect
 * timeout are fatal: they go to the SoakVerdict and the flow stops.
 *
 * Stop: request_stop() ends the flow after a completed round, never in the
 * middle, so that every target buffer holds the pattern of its verified
 * seed when all flows have stopped.
 *
 * Threading: the flow's own thread runs the rounds; the accessors are
 * atomic and may be read from any thread. Targets are shared by several
 * flows; SoakPeer serialises their commands.
 */
#ifndef PXN_TOOLS_SOAK_FLOW_H_
#define PXN_TOOLS_SOAK_FLOW_H_

#include "soak_peer.h"
#include "soak_plan.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace pxn_tools {

/* Counters of all flows together. */
struct SoakStats {
    std::atomic<uint64_t> ops_ok{0};
    std::atomic<uint64_t> ops_failed{0};      /* answered with an error */
    std::atomic<uint64_t> ops_unexplained{0}; /* ... with no relay restart near */
    std::atomic<uint64_t> ops_retried{0};
    std::atomic<uint64_t> uct_ops{0};         /* UCT operations in ops_ok */
    std::atomic<uint64_t> bytes_put{0};
    std::atomic<uint64_t> bytes_got{0};
    std::atomic<uint64_t> bytes_checked{0};
    std::atomic<uint64_t> rounds{0};
    std::atomic<uint64_t> rounds_abandoned{0};
    std::atomic<uint64_t> reconnects{0};

    void failure(const std::string &status, const std::string &flow);
    /* "status: count (first: flow)" lines */
    std::vector<std::string> failures() const;

private:
    mutable std::mutex mutex_;
    std::map<std::string, std::pair<uint64_t, std::string>> failures_;
};

/* Fatal findings of the soak; the first one stops all flows. */
class SoakVerdict {
public:
    void fail(const std::string &why);
    bool failed() const { return failed_.load(); }
    std::vector<std::string> errors() const;

private:
    std::atomic<bool>        failed_{false};
    mutable std::mutex       mutex_;
    std::vector<std::string> errors_;
};

struct SoakFlowConfig {
    uint64_t buffer_size          = 0;
    uint64_t max_op               = 0;
    int      op_timeout_ms        = 120000;
    int      reconnect_timeout_ms = 60000;
    /* A failure within this long after its relay was killed counts as
     * explained by the restart. */
    uint64_t restart_window_ns    = 30000000000ull;
    uint64_t seed                 = 1;
};

class SoakFlow {
public:
    static constexpr unsigned kMaxAttempts = 50;

    /* `via`: the relay this flow's traffic crosses (for the failure
     * statistics); `target_buffer`: the buffer id on the target (not 0,
     * which every process uses as sender). */
    SoakFlow(SoakPeer *sender, SoakPeer *target, unsigned target_buffer,
             SoakPeer *via, const SoakFlowConfig &config, SoakStats *stats,
             SoakVerdict *verdict);
    ~SoakFlow();
    SoakFlow(const SoakFlow&) = delete;
    SoakFlow &operator=(const SoakFlow&) = delete;

    const std::string &name() const { return name_; }
    SoakPeer *sender() const { return sender_; }
    SoakPeer *via() const { return via_; }

    /* Allocates the target buffer (before start(), from one thread). */
    bool prepare_target(std::string *error);
    void start();
    void request_stop() { stop_ = true; }
    bool finished() const { return finished_.load(); }
    /* Joins the thread; call once finished() or after killing the peers. */
    void join();

    uint64_t rounds() const { return rounds_.load(); }
    /* After the flow stopped: checks the whole target buffer against the
     * last verified seed. "" when it matches, else what is wrong. */
    std::string final_check();

private:
    enum class Result { kOk, kRestarted, kFatal };

    void   run();
    Result setup();
    Result round();
    Result reconnect();
    Result run_op(const SoakOp &op);
    /* A command sequence on the sender; !ok and not restarted: fatal. */
    Result on_sender(const std::vector<std::string> &lines, int timeout_ms,
                     std::vector<std::string> *answers);
    Result fatal(const std::string &why);
    bool   near_restart() const;

    std::string           name_;
    SoakPeer             *sender_;
    SoakPeer             *target_;
    unsigned              target_buffer_;
    SoakPeer             *via_;
    SoakFlowConfig        config_;
    SoakStats            *stats_;
    SoakVerdict          *verdict_;
    std::mt19937_64       rng_;

    /* target buffer, fixed for the whole soak */
    std::string           dev_, iface_, raddr_, rkey_;
    uint64_t              target_generation_ = 0;

    /* the sender incarnation the flow is set up on */
    uint64_t              generation_ = 0;
    SoakCaps              caps_;

    std::thread           thread_;
    std::atomic<bool>     stop_{false};
    std::atomic<bool>     finished_{false};
    std::atomic<uint64_t> rounds_{0};
    std::atomic<bool>     verified_{false};
    /* the target holds the verified seed's pattern (no round under way) */
    std::atomic<bool>     consistent_{true};
    std::atomic<uint64_t> verified_seed_{0};
};

} // namespace pxn_tools

#endif
