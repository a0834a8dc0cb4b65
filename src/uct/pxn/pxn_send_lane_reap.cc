/*
 * SendLane's completions: the relay's completion of each published piece
 * read in order (reap), the copies out of a GET piece's slot, and the
 * requests whose pieces all ended handed back to their owners (deliver).
 */
extern "C" {
#include <uct/base/uct_iface.h> /* UCX's config.h first: log levels */
}

#include "pxn_send_lane.h"

#include <ucs/pxn/descriptor.h>

namespace pxn {
namespace uct {

void SendLane::request_piece_done(SendRequest *req, ucs_status_t status)
{
    if ((status != UCS_OK) && (req->status == UCS_OK)) {
        req->status = status;
    }
    if ((--req->pieces == 0) && req->staged) {
        finish_request(req);
    }
}

/* A completion callback may post again (and so end requests): each call
 * delivers the batch that ended before it. */
unsigned SendLane::deliver()
{
    if (!delivering_.empty()) {
        return 0; /* called from a completion callback */
    }
    delivering_.swap(finished_);
    /* By index: a callback that posts may grow the request pool, and
     * alloc_request() makes room in delivering_ too (a reallocation). */
    for (size_t i = 0; i < delivering_.size(); ++i) {
        SendRequest *req = delivering_[i];
        drop_rkeys(req->rkeys);
        if (req->status != UCS_OK) {
            count(counters_->failed_ops);
        }
        if (req->comp != nullptr) {
            uct_invoke_completion(req->comp, req->status);
        }
        req->owner->op_done(req->status);
        free_request(req);
    }
    const unsigned work = static_cast<unsigned>(delivering_.size());
    delivering_.clear();
    return work;
}

/* Completions are read ahead of returning slots: a GET piece's copies out
 * run while later completions are read, and its slot goes back (its
 * requests complete) only when they are done. */
unsigned SendLane::reap()
{
    unsigned work          = 0;
    uint64_t reaped_at     = 0;
    const LaneBlock &block = control_.block();
    while (read_ < published_) {
        const uint64_t seq  = read_ + 1;
        const uint32_t slot = slot_of(seq, geometry_.slots);
        SlotRecord &record  = records_[slot];
        if (!read_completion(&block.completion(slot), seq, &record.status)) {
            break;
        }
        /* After the entry's acquire: the time of that write or a later one
         * (the clock read here, after it: tick()'s may be older). */
        reaped_at = (reaped_at == 0) ? monotonic_ns() : reaped_at;
        abi::record_wait(counters_->completion,
                         abi::load_relaxed(block.consumer().completed_ns), reaped_at);
        if (!kOpKinds[record.op].packs && (record.status == UCS_OK)) {
            record.status = copy_out(slot, record);
        }
        read_ = seq;
        ++work;
    }
    while (window_.reaped() < read_) {
        const uint64_t seq  = window_.reaped() + 1;
        const uint32_t slot = slot_of(seq, geometry_.slots);
        SlotRecord &record  = records_[slot];
        if (!kOpKinds[record.op].packs) {
            const ucs_status_t out = stager_->out_status(slot);
            if (out == UCS_INPROGRESS) {
                break;
            }
            record.status = (record.status == UCS_OK) ? out : record.status;
        }
        window_.reap(seq);
        abi::store_release(block.producer().reaped, seq);
        for (SendRequest *req : record.requests) {
            request_piece_done(req, record.status);
        }
        ++work;
    }
    if (work != 0) {
        abi::store_relaxed(counters_->last_completion_ns, now_ns_);
        control_.relay_seen(now_ns_);
    }
    return work;
}

ucs_status_t SendLane::copy_out(uint32_t slot, const SlotRecord &record)
{
    ucs_status_t status = UCS_OK;
    uint64_t offset     = 0;
    for (const auto &dest : record.get_dest) {
        const ucs_status_t copied =
                (dest.unpack != nullptr) ?
                stager_->unpack(slot, offset, dest.unpack, dest.arg, dest.length) :
                stager_->copy_out(slot, offset, reinterpret_cast<void*>(dest.addr),
                                  dest.length);
        status  = (copied != UCS_OK) ? copied : status;
        offset += dest.length;
    }
    const ucs_status_t ended = stager_->end_out(slot);
    if (ended != UCS_OK) {
        stager_->wait_out(); /* the slot must not go back under a copy */
        status = (status == UCS_OK) ? ended : status;
    }
    return status;
}

} // namespace uct
} // namespace pxn
