/*
 * Ep (pxn_ep.h): completion of its operations, flush and fence, the pending
 * queue, and the iface progress's visits (the active list).
 */
#include "pxn_ep.h"

#include <algorithm>

namespace pxn {
namespace uct {

void Ep::op_done(ucs_status_t status)
{
    ++completed_;
    /* A canceled operation (flush with UCT_FLUSH_FLAG_CANCEL) is no failure
     * of the ep, nor of the flushes waiting for it. */
    const bool failed = (status != UCS_OK) && (status != UCS_ERR_CANCELED);
    if (failed) {
        transition(Event::kFailed, status);
    }
    while (!flushes_.empty() && (flushes_.front().first <= completed_)) {
        uct_completion_t *comp = flushes_.front().second;
        flushes_.pop_front();
        if (failed && (comp->status == UCS_OK)) {
            comp->status = status;
        }
        if (--comp->count == 0) {
            comp->func(comp);
        }
    }
}

ucs_status_t Ep::flush(unsigned flags, uct_completion_t *comp)
{
    if (inherited()) {
        return UCS_OK; /* nothing of the parent's completes here */
    }
    if (flags & UCT_FLUSH_FLAG_CANCEL) {
        return flush_cancel(comp);
    }
    /* An ep whose first route is on its way is not connected yet: flush
     * waits for it like for an operation (UCT's NO_RESOURCE: retry, or
     * pending_add), and then reports a refused connection. A canceled ep
     * waits too (its request is out: asked_, and no lane_ yet). Pending
     * requests go first, but not when the flush is one of them, dispatched
     * now: those behind it came after it (UCP's ep flush waited there for
     * ever behind the replies it had queued after itself). */
    if ((!pending_.empty() && !dispatching_) ||
        ((asked_ != nullptr) && (lane_ == nullptr))) {
        return UCS_ERR_NO_RESOURCE;
    }
    if ((state_ == State::kFailed) && (issued_ == completed_)) {
        return error_;
    }
    if (lane_ != nullptr) {
        lane_->publish_open();
    }
    if (issued_ == completed_) {
        return UCS_OK;
    }
    if (comp != nullptr) {
        flushes_.emplace_back(issued_, comp);
    }
    return UCS_INPROGRESS;
}

/* UCT_FLUSH_FLAG_CANCEL: operations none of whose bytes went to a relay
 * end with UCS_ERR_CANCELED (from progress); the others, and direct-path
 * operations, end as the relay or the inner transport completes them. The
 * ep is unusable afterwards (UCT: it must be destroyed). */
ucs_status_t Ep::flush_cancel(uct_completion_t *comp)
{
    transition(Event::kCanceled);
    if (lane_ != nullptr) {
        lane_->cancel(this);
    }
    if (issued_ == completed_) {
        return UCS_OK;
    }
    if (comp != nullptr) {
        flushes_.emplace_back(issued_, comp);
    }
    return UCS_INPROGRESS;
}

/* UCS_ERR_BUSY exactly when an operation of any kind would be accepted
 * now (else UCP would retry it and add again, forever): nothing pending,
 * the route up, a lane with ring credit and nothing queued, and the last
 * refusal not for want of a remote key entry. */
bool Ep::has_resources() const
{
    return pending_.empty() && (state_ == State::kRouted) &&
           (completed_ >= fence_at_) && !rkey_starved_ && lane_->has_room();
}

ucs_status_t Ep::fence()
{
    fence_at_ = issued_;
    return UCS_OK;
}

ucs_status_t Ep::pending_add(uct_pending_req_t *req)
{
    if (has_resources()) {
        return UCS_ERR_BUSY;
    }
    want_progress(); /* first: if the request cannot be added, a visit */
    pending_.push_back(req); /* finds nothing to do */
    return UCS_OK;
}

bool Ep::needs_progress() const
{
    /* a failed ep's pending requests wait for uct_ep_pending_purge() */
    return (!pending_.empty() && (state_ != State::kFailed)) || !direct_ops_.empty() ||
           ((state_ == State::kFailed) && !reported_) ||
           ((state_ == State::kRouted) && lane_->failed());
}

/* Iface progress visits only the eps on this list (and all of them now
 * and then): a process with thousands of endpoints would otherwise pay for
 * every one of them in every progress call. */
void Ep::want_progress()
{
    if (!queued_) {
        active_->push_back(this); /* may throw: then not queued */
        queued_ = true;
    }
}

bool Ep::settle()
{
    if (needs_progress()) {
        return false;
    }
    queued_ = false;
    return true;
}

void Ep::pending_purge(uct_pending_purge_callback_t cb, void *arg)
{
    while (!pending_.empty()) {
        uct_pending_req_t *req = pending_.front();
        pending_.pop_front();
        if (cb != nullptr) {
            cb(req, arg);
        }
    }
}

unsigned Ep::progress_pending()
{
    unsigned work = direct_ops_.empty() ? 0 : progress_direct();
    if ((state_ == State::kRouted) && lane_->failed()) {
        check_route(true); /* routes again, or fails the ep for the iface */
    }
    /* UCT's pending contract: UCS_OK done, UCS_INPROGRESS partly done (call
     * it again), UCS_ERR_NO_RESOURCE not now. A bounded number of rounds:
     * the callbacks may post again and again. A failed ep dispatches none:
     * they stay for the error handler's uct_ep_pending_purge() (a callback
     * whose post failed would count as done, and its request be lost). */
    for (unsigned round = 0; (state_ != State::kFailed) && (round < 1024) &&
                             !pending_.empty(); ++round) {
        uct_pending_req_t *req = pending_.front();
        pending_.pop_front();
        dispatching_              = true;
        const ucs_status_t status = req->func(req);
        dispatching_              = false;
        if ((status == UCS_INPROGRESS) || (status == UCS_ERR_NO_RESOURCE)) {
            pending_.push_front(req);
        }
        if (status == UCS_ERR_NO_RESOURCE) {
            break;
        }
        ++work;
    }
    return work;
}

} // namespace uct
} // namespace pxn
