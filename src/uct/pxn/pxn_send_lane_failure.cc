/*
 * SendLane when its relay fails: health checks (heartbeat, the relay's
 * process), failing or falling back every request the lane holds, and
 * giving the lane back.
 */
extern "C" {
#include <uct/base/uct_iface.h> /* UCX's config.h first: log levels */
}

#include "pxn_send_lane.h"

#include <ucs/debug/log_def.h>

namespace pxn {
namespace uct {

namespace {

constexpr uint64_t kHealthPeriodNs = 1000000; /* 1 ms */

} // namespace

/* A staging copy or doorbell could not be enqueued: the piece was never
 * published. Everything on the lane fails (or falls back), and the lane is
 * given back so that the relay does not wait for the doorbell. */
void SendLane::quarantine()
{
    ucs_warn("pxn: staging into relay pid %u failed: lane quarantined",
             relay().identity.pid);
    fail_all(UCS_ERR_IO_ERROR);
}

void SendLane::fail_all(ucs_status_t status)
{
    if (failed_) {
        return;
    }
    failed_ = true;
    if (failures_ != nullptr) {
        ++*failures_;
    }
    ucs_debug("pxn: lane to relay pid %u failed: %s", relay().identity.pid,
              ucs_status_string(status));
    if (records_.empty()) {
        control_.fail(status); /* never became ready */
        return;
    }
    /* The fence: a relay that resumes (a stopped one, declared dead) must
     * not forward what its sender reports as failed below. */
    abi::store_seq_cst(control_.block().producer().abandoned, window_.epoch());
    /* Copies out of slots not yet returned end before their requests do. */
    if (read_ > window_.reaped()) {
        stager_->wait_out();
    }
    /* Published pieces that will never be reaped, then the open one. */
    const uint64_t last = builder_.is_open() ? builder_.seq() : published_;
    builder_.close();
    for (uint64_t seq = window_.reaped() + 1; seq <= last; ++seq) {
        SlotRecord &record = records_[slot_of(seq, geometry_.slots)];
        for (SendRequest *req : record.requests) {
            request_piece_done(req, status);
        }
        record.requests.clear();
    }
    while (!queue_.empty()) {
        SendRequest *req = queue_.front();
        queue_.pop_front();
        give_up(req, status);
    }
    control_.fail(status);
}

void SendLane::cancel(SendOwner *owner)
{
    for (auto it = queue_.begin(); it != queue_.end();) {
        SendRequest *req = *it;
        if ((req->owner != owner) || req->cursor.started() || (req->pieces != 0)) {
            ++it;
            continue;
        }
        it          = queue_.erase(it);
        req->status = UCS_ERR_CANCELED;
        req->staged = true;
        finish_request(req);
    }
}

void SendLane::give_up(SendRequest *req, ucs_status_t status)
{
    const uint32_t rkey = req->rkey_index;
    if ((req->pieces == 0) && !req->cursor.started() &&
        (req->status == UCS_OK) && !req->scattered &&
        req->owner->fall_back(*req, control_.rkey_packed(rkey),
                              control_.rkey_length(rkey))) {
        drop_rkeys(req->rkeys);
        free_request(req);
        return;
    }
    if (req->status == UCS_OK) {
        req->status = status;
    }
    req->staged = true;
    if (req->pieces == 0) {
        finish_request(req);
    }
}

void SendLane::check_health()
{
    if (now_ns_ < next_health_ns_) {
        return;
    }
    next_health_ns_ = now_ns_ + kHealthPeriodNs;
    if (failed_) {
        return;
    }
    if (!control_.relay_healthy(now_ns_)) {
        fail_unhealthy();
        return;
    }
    /* A relay that died (rather than froze) is noticed long before its
     * heartbeat goes stale; /proc is read only while something waits on it
     * and nothing completed for a while. */
    if (!idle()) {
        alive(false);
    }
}

void SendLane::fail_unhealthy()
{
    ucs_warn("pxn: relay pid %u (rail %s) is no longer healthy "
             "(heartbeat age %.3f s): failing its pieces",
             relay().identity.pid, relay().rail.c_str(),
             control_.mapping().heartbeat_age_ns(now_ns_) / 1e9);
    fail_all(UCS_ERR_ENDPOINT_TIMEOUT);
}

ucs_status_t SendLane::refuse_post()
{
    if (opening()) {
        return UCS_ERR_NO_RESOURCE;
    }
    /* A posting loop that never progresses would otherwise get this answer
     * while the pieces it had published stay unfenced in the ring. */
    if (!failed_ && control_.ready() && !control_.relay_healthy(now_ns_)) {
        fail_unhealthy();
    }
    return UCS_ERR_UNREACHABLE;
}

bool SendLane::check_relay_alive(bool force)
{
    tick();
    return alive(force);
}

bool SendLane::alive(bool force)
{
    if (failed_) {
        return false;
    }
    if (!control_.relay_healthy(now_ns_) && !control_.failed() &&
        control_.ready()) {
        fail_all(UCS_ERR_ENDPOINT_TIMEOUT);
        return false;
    }
    if (!control_.check_relay_alive(now_ns_, force)) {
        fail_all(control_.failure());
        return false;
    }
    return true;
}

} // namespace uct
} // namespace pxn
