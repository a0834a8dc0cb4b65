#include "soak_flow.h"

#include <chrono>
#include <sstream>
#include <unistd.h>

namespace pxn_tools {

namespace {

std::string buffer_cmd(unsigned id)
{
    return "buffer " + std::to_string(id);
}

} // namespace

void SoakStats::failure(const std::string &status, const std::string &flow)
{
    std::lock_guard<std::mutex> guard(mutex_);
    auto it = failures_.find(status);
    if (it == failures_.end()) {
        failures_.emplace(status, std::make_pair(uint64_t(1), flow));
    } else {
        ++it->second.first;
    }
}

std::vector<std::string> SoakStats::failures() const
{
    std::lock_guard<std::mutex> guard(mutex_);
    std::vector<std::string> out;
    for (const auto &f : failures_) {
        out.push_back(f.first + ": " + std::to_string(f.second.first) +
                      " (first: " + f.second.second + ")");
    }
    return out;
}

void SoakVerdict::fail(const std::string &why)
{
    std::lock_guard<std::mutex> guard(mutex_);
    errors_.push_back(why);
    failed_ = true;
}

std::vector<std::string> SoakVerdict::errors() const
{
    std::lock_guard<std::mutex> guard(mutex_);
    return errors_;
}

SoakFlow::SoakFlow(SoakPeer *sender, SoakPeer *target, unsigned target_buffer,
                   SoakPeer *via, const SoakFlowConfig &config,
                   SoakStats *stats, SoakVerdict *verdict) :
    name_(sender->name() + " -> " + target->name() + " via " + via->name()),
    sender_(sender), target_(target), target_buffer_(target_buffer), via_(via),
    config_(config), stats_(stats), verdict_(verdict), rng_(config.seed)
{
}

SoakFlow::~SoakFlow()
{
    stop_ = true;
    join();
}

bool SoakFlow::prepare_target(std::string *error)
{
    target_generation_ = target_->generation();
    auto r = target_->call(target_generation_,
                           {"info", buffer_cmd(target_buffer_),
                            "alloc " + std::to_string(config_.buffer_size)},
                           config_.op_timeout_ms);
    const auto info  = r.ok ? split(r.lines[0]) : std::vector<std::string>();
    const auto alloc = r.ok ? split(r.lines[2]) : std::vector<std::string>();
    if ((info.size() != 4) || (alloc.size() != 3) || (alloc[0] != "alloc")) {
        *error = name_ + ": target buffer not allocated (" +
                 (r.ok ? r.lines[0] + " / " + r.lines[2] : "no answer") + ")";
        return false;
    }
    dev_   = info[1];
    iface_ = info[2];
    raddr_ = alloc[1];
    rkey_  = alloc[2];
    return true;
}

void SoakFlow::start()
{
    thread_ = std::thread([this] { run(); });
}

void SoakFlow::join()
{
    if (thread_.joinable()) {
        thread_.join();
    }
}

SoakFlow::Result SoakFlow::fatal(const std::string &why)
{
    verdict_->fail(name_ + ": " + why);
    return Result::kFatal;
}

bool SoakFlow::near_restart() const
{
    const uint64_t killed = via_->last_kill_ns();
    return (killed != 0) && (soak_now_ns() - killed < config_.restart_window_ns);
}

SoakFlow::Result SoakFlow::on_sender(const std::vector<std::string> &lines,
                                     int timeout_ms,
                                     std::vector<std::string> *answers)
{
    SoakPeer::Reply r = sender_->call(generation_, lines, timeout_ms);
    if (r.restarted || (!r.ok && ((sender_->generation() != generation_) ||
                                  sender_->restart_pending()))) {
        /* killed by the soak: restart() is on its way */
        return Result::kRestarted;
    }
    if (!r.ok) {
        return fatal("sender " + sender_->name() + " (pid " +
                     std::to_string(sender_->pid()) + ") did not answer '" +
                     lines[r.lines.size()] + "' within " +
                     std::to_string(timeout_ms / 1000) + " s (hung or died)");
    }
    *answers = std::move(r.lines);
    return Result::kOk;
}

void SoakFlow::run()
{
    while (!verdict_->failed() && !(stop_ && consistent_)) {
        if (sender_->restart_pending()) {
            usleep(100000);
            continue;
        }
        if (generation_ != sender_->generation()) {
            const Result r = setup();
            if (r == Result::kFatal) {
                break;
            }
            if (r == Result::kRestarted) {
                generation_ = 0; /* set up again on the next incarnation */
                usleep(100000);
                continue;
            }
        }
        consistent_    = false;
        const Result r = round();
        if (r == Result::kOk) {
            consistent_ = true;
            ++rounds_;
            ++stats_->rounds;
        } else if (r == Result::kRestarted) {
            ++stats_->rounds_abandoned;
            usleep(100000);
        } else {
            break;
        }
    }
    finished_ = true;
}

SoakFlow::Result SoakFlow::setup()
{
    generation_ = sender_->generation();
    std::vector<std::string> a;
    Result r = on_sender({buffer_cmd(0),
                          "alloc " + std::to_string(config_.buffer_size), "caps"},
                         config_.op_timeout_ms, &a);
    if (r != Result::kOk) {
        return r;
    }
    if ((split(a[1]).size() != 3) || !SoakCaps::parse(a[2], &caps_)) {
        return fatal("sender setup failed: '" + a[1] + "', '" + a[2] + "'");
    }
    return reconnect();
}

SoakFlow::Result SoakFlow::reconnect()
{
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(config_.reconnect_timeout_ms);
    for (;;) {
        std::vector<std::string> a;
        const Result r = on_sender({"connect " + dev_ + " " + iface_},
                                   config_.op_timeout_ms, &a);
        if (r != Result::kOk) {
            return r;
        }
        if (a[0] == "ok") {
            ++stats_->reconnects;
            return Result::kOk;
        }
        if (std::chrono::steady_clock::now() > deadline) {
            return fatal("no ep to the target within " +
                         std::to_string(config_.reconnect_timeout_ms / 1000) +
                         " s, last answer '" + a[0] + "'");
        }
        if (verdict_->failed()) {
            return Result::kFatal;
        }
        usleep(200000);
    }
}

SoakFlow::Result SoakFlow::run_op(const SoakOp &op)
{
    const std::string cmd = op.command(raddr_, rkey_);
    for (unsigned attempt = 1; attempt <= kMaxAttempts; ++attempt) {
        if (verdict_->failed()) {
            return Result::kFatal;
        }
        if (attempt > 1) {
            ++stats_->ops_retried;
        }
        std::vector<std::string> a;
        Result r = on_sender({buffer_cmd(0), cmd}, config_.op_timeout_ms, &a);
        if (r != Result::kOk) {
            return r;
        }
        std::string status;
        uint64_t uct_ops;
        if (!parse_done(a[1], &status, &uct_ops)) {
            return fatal("'" + cmd + "' answered '" + a[1] + "'");
        }
        if (status == "Success") {
            ++stats_->ops_ok;
            stats_->uct_ops += uct_ops;
            (op.get ? stats_->bytes_got : stats_->bytes_put) += op.bytes;
            return Result::kOk;
        }
        ++stats_->ops_failed;
        stats_->failure(status, name_);
        if (!near_restart()) {
            ++stats_->ops_unexplained;
            return fatal("'" + cmd + "' failed (" + status + ") with no restart "
                         "of its relay in the " +
                         std::to_string(config_.restart_window_ns / 1000000000) +
                         " s before");
        }
        r = reconnect();
        if (r != Result::kOk) {
            return r;
        }
    }
    return fatal("'" + cmd + "' failed " + std::to_string(kMaxAttempts) +
                 " times in a row");
}

SoakFlow::Result SoakFlow::round()
{
    SoakPlanner planner(caps_, config_.buffer_size, config_.max_op);
    const uint64_t seed    = rng_() >> 1;
    const uint64_t garbage = seed ^ 0x5a5a5a5a5a5a5a5aull;
    const std::string size = std::to_string(config_.buffer_size);
    std::vector<std::string> a;

    Result r = on_sender({buffer_cmd(0), "fill " + std::to_string(seed)},
                         config_.op_timeout_ms, &a);
    for (const SoakOp &op : planner.pass(false, rng_)) {
        if (r != Result::kOk) {
            return r;
        }
        r = run_op(op);
    }
    if (r != Result::kOk) {
        return r;
    }

    /* Every byte of the target, and its canaries. */
    auto check = target_->call(target_generation_,
                               {buffer_cmd(target_buffer_),
                                "check " + std::to_string(seed) + " 0 " + size},
                               config_.op_timeout_ms);
    if (!check.ok || (check.lines[1] != "ok")) {
        return fatal("target " + target_->name() + " buffer " +
                     std::to_string(target_buffer_) + " after the put pass: " +
                     (check.ok ? "check answered '" + check.lines[1] + "'" :
                                 "no answer to check"));
    }
    stats_->bytes_checked += config_.buffer_size;
    verified_seed_ = seed;
    verified_      = true;

    if (!planner.can(true)) {
        return Result::kOk;
    }
    r = on_sender({buffer_cmd(0), "fill " + std::to_string(garbage)},
                  config_.op_timeout_ms, &a);
    for (const SoakOp &op : planner.pass(true, rng_)) {
        if (r == Result::kOk) {
            r = run_op(op);
        }
        if (r == Result::kOk) {
            r = on_sender({buffer_cmd(0), "check " + std::to_string(seed) + " " +
                           std::to_string(op.offset) + " " +
                           std::to_string(op.bytes)},
                          config_.op_timeout_ms, &a);
        }
        if (r != Result::kOk) {
            return r;
        }
        if (a[1] != "ok") {
            return fatal("'" + op.command(raddr_, rkey_) +
                         "' brought wrong data: check answered '" + a[1] + "'");
        }
        stats_->bytes_checked += op.bytes;
    }
    return Result::kOk;
}

std::string SoakFlow::final_check()
{
    if (!verified_) {
        return "no round completed";
    }
    if (!consistent_) {
        return "its last round was cut short by a failure";
    }
    auto check = target_->call(target_generation_,
                               {buffer_cmd(target_buffer_),
                                "check " + std::to_string(verified_seed_.load()) +
                                " 0 " + std::to_string(config_.buffer_size)},
                               config_.op_timeout_ms);
    if (!check.ok) {
        return "no answer to the final check";
    }
    return (check.lines[1] == "ok") ? "" : "final check answered '" +
                                           check.lines[1] + "'";
}

} // namespace pxn_tools
