/*
 * SendLane's data path (pxn_sender.h): requests queued, packed into pieces,
 * staged into slots, published and reaped, and the lane's failure handling.
 * Non-blocking; the control path is in pxn_sender_control.cc.
 */
#include "pxn_sender.h"

#include <ucs/debug/log_def.h>
#include <ucs/pxn/descriptor.h>
#include <ucs/pxn/identity.h>

extern "C" {
#include <uct/base/uct_iface.h>
}

#include <algorithm>
#include <cstring>

namespace pxn {
namespace uct {

namespace {

constexpr size_t   kMaxQueued       = 4096;
constexpr uint64_t kHealthPeriodNs  = 1000000; /* 1 ms */
constexpr uint64_t kLivenessPeriodNs = 20000000; /* 20 ms: reads /proc */
constexpr uint64_t kOpenMaxNs       = 50000;   /* 50 us */

} // namespace

SendLane::~SendLane()
{
    if (mapping_ != nullptr) {
        mapping_->release_lane(self_, lane_index_);
    }
    if (held_) {
        abi::store_relaxed(counters_->lanes, abi::load_relaxed(counters_->lanes) - 1);
    }
}

bool SendLane::usable() const
{
    return !failed_ && mapping_->is_healthy();
}

SendRequest *SendLane::alloc_request(SendOwner *owner, abi::Op op,
                                     uint32_t route, uint32_t rkey,
                                     uint64_t remote_addr,
                                     uct_completion_t *comp)
{
    SendRequest *req;
    if (pool_.empty()) {
        try {
            requests_.emplace_back(new SendRequest());
        } catch (const std::bad_alloc &) {
            return nullptr;
        }
        req = requests_.back().get();
    } else {
        req = pool_.back();
        pool_.pop_back();
    }
    *req             = SendRequest{};
    req->comp        = comp;
    req->owner       = owner;
    req->op          = op;
    req->route       = route;
    req->rkey_index  = rkey;
    req->remote_addr = remote_addr;
    return req;
}

void SendLane::free_request(SendRequest *req)
{
    pool_.push_back(req);
}

bool SendRequest::add_iov(const uct_iov_t *iov, size_t iovcnt)
{
    for (size_t i = 0; i < iovcnt; ++i) {
        const size_t count = std::max<size_t>(iov[i].count, 1);
        for (size_t c = 0; c < count; ++c) {
            if (iov[i].length == 0) {
                continue;
            }
            if (nsegs == kMaxIov) {
                return false;
            }
            segs[nsegs++] = {
                reinterpret_cast<uint64_t>(iov[i].buffer) + c * iov[i].stride,
                iov[i].length, iov[i].memh};
        }
    }
    return true;
}

ucs_status_t SendLane::post(SendOwner *owner, abi::Op op, uint32_t route,
                            uint32_t rkey, uint64_t remote_addr,
                            const uct_iov_t *iov, size_t iovcnt,
                            uct_completion_t *comp)
{
    if (!usable()) {
        return UCS_ERR_UNREACHABLE;
    }
    if (queue_.size() >= kMaxQueued) {
        return UCS_ERR_NO_RESOURCE;
    }
    SendRequest *req = alloc_request(owner, op, route, rkey, remote_addr, comp);
    if (req == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    if (!req->add_iov(iov, iovcnt)) {
        free_request(req);
        return UCS_ERR_INVALID_PARAM;
    }
    ++rkeys_[rkey].users;
    req->queued_ns = 0;
    queue_.push_back(req);
    stage();
    return UCS_INPROGRESS;
}

ucs_status_t SendLane::get_now(SendOwner *owner, uint32_t route, uint32_t rkey,
                               uint64_t remote_addr, size_t length,
                               uct_unpack_callback_t unpack, void *arg,
                               uct_completion_t *comp)
{
    if (!usable()) {
        return UCS_ERR_UNREACHABLE;
    }
    if (!queue_.empty() || (length == 0) || (length > geometry_.slot_size) ||
        (!piece_fits(abi::kOpGet, route, length) &&
         !open_piece(abi::kOpGet, route))) {
        return UCS_ERR_NO_RESOURCE;
    }
    SendRequest *req = alloc_request(owner, abi::kOpGet, route, rkey,
                                     remote_addr, comp);
    if (req == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    req->staged = true;
    ++rkeys_[rkey].users;
    add_to_piece(req, rkey);
    records_[slot_of(open_seq_, geometry_.slots)].get_dest.push_back(
            {0, length, unpack, arg});
    plans_[nplans_++] = abi::Plan{remote_addr, static_cast<uint32_t>(length),
                                  rkey};
    open_len_ += length;
    if ((open_len_ == geometry_.slot_size) || (nplans_ == geometry_.max_plan)) {
        publish();
    }
    return UCS_INPROGRESS;
}

uint8_t *SendLane::slot_ptr(uint64_t seq) const
{
#ifdef PXN_HAVE_CUDA
    if (stager_ != nullptr) {
        return stager_->slot(slot_of(seq, geometry_.slots));
    }
#endif
    return arena_.data() + slot_offset(lane_index_, slot_of(seq, geometry_.slots),
                                       geometry_.slots, geometry_.slot_size);
}

bool SendLane::piece_fits(abi::Op op, uint32_t route, uint64_t length) const
{
    return open_ && (open_op_ == op) && (open_route_ == route) &&
           (open_len_ + length <= geometry_.slot_size) &&
           (nplans_ < geometry_.max_plan);
}

bool SendLane::open_piece(abi::Op op, uint32_t route)
{
    if (open_) {
        publish();
    }
    if (failed_) {
        return false;
    }
    if (window_.needs_reestablish() &&
        (!window_.drained() || (reestablish() != UCS_OK))) {
        return false;
    }
    uint64_t seq;
    if (window_.reserve(&seq) != UCS_OK) {
        if (stall_since_ns_ == 0) {
            stall_since_ns_ = monotonic_ns();
            abi::bump(counters_->credit_stalls);
        }
        return false;
    }
    stall_since_ns_ = 0;
    open_           = true;
    open_since_ns_  = monotonic_ns();
    open_seq_       = seq;
    open_op_        = op;
    open_route_     = route;
    open_len_       = 0;
    nplans_         = 0;
    SlotRecord &record = records_[slot_of(seq, geometry_.slots)];
    record.op    = op;
    record.rkeys = 0;
    record.requests.clear();
    record.get_dest.clear();
    return true;
}

void SendLane::add_to_piece(SendRequest *req, uint32_t rkey)
{
    SlotRecord &record = records_[slot_of(open_seq_, geometry_.slots)];
    if (record.requests.empty() || (record.requests.back() != req)) {
        record.requests.push_back(req);
        ++req->pieces;
    }
    record.rkeys |= 1ull << rkey;
}

/* Copies as much of the request as the open piece takes; returns bytes. */
uint64_t SendLane::append(SendRequest *req)
{
    SlotRecord &record = records_[slot_of(open_seq_, geometry_.slots)];
    uint8_t *slot      = slot_ptr(open_seq_);
    uint64_t total     = 0;

    add_to_piece(req, req->rkey_index);
    while ((req->seg < req->nsegs) && (open_len_ < geometry_.slot_size) &&
           (nplans_ < geometry_.max_plan)) {
        const SendRequest::Seg &seg = req->segs[req->seg];
        const uint64_t n = std::min(seg.length - req->seg_offset,
                                    geometry_.slot_size - open_len_);
        const uint64_t local = seg.addr + req->seg_offset;
        if (req->op == abi::kOpPut) {
            stage_bytes(slot, reinterpret_cast<const void*>(local), n);
        } else {
            record.get_dest.push_back({local, n, nullptr, nullptr});
        }
        plans_[nplans_++] = abi::Plan{req->remote_addr + req->remote_offset,
                                      static_cast<uint32_t>(n),
                                      req->rkey_index};
        open_len_          += n;
        req->seg_offset    += n;
        req->remote_offset += n;
        total              += n;
        if (req->seg_offset == seg.length) {
            ++req->seg;
            req->seg_offset = 0;
        }
    }
    return total;
}

/* Copies `length` source bytes to the open piece's slot at open_len_. */
void SendLane::stage_bytes(uint8_t *slot, const void *src, uint64_t length)
{
#ifdef PXN_HAVE_CUDA
    if (stager_ != nullptr) {
        /* GPU arena: copied when the piece is published. */
        stager_->add(slot_of(open_seq_, geometry_.slots), src, open_len_, length);
        return;
    }
    if ((cu_ != nullptr) && cu_->is_device_pointer(src)) {
        /* GPU source, host arena: the CPU must not read it. */
        cu_->cuMemcpy(reinterpret_cast<CUdeviceptr>(slot + open_len_),
                      reinterpret_cast<CUdeviceptr>(src), length);
        return;
    }
#endif
    memcpy(slot + open_len_, src, length);
}

void SendLane::publish()
{
    const uint32_t slot = slot_of(open_seq_, geometry_.slots);
    write_descriptor(&block_.descriptor(slot), open_seq_, window_.epoch(),
                     open_op_, open_route_, plans_.data(), nplans_);
    abi::LaneProducer &producer = block_.producer();
    abi::store_release(producer.head, open_seq_);
#ifdef PXN_HAVE_CUDA
    if (stager_ != nullptr) {
        /* The copies, then the doorbell, on the lane's stream. Until the
         * doorbell nothing is published: a failure here may still fail
         * over, the lane is quarantined. */
        const uint64_t gathered = stager_->stats().sm_pieces;
        if ((open_op_ == abi::kOpPut) &&
            (stager_->commit(open_seq_, slot) != UCS_OK)) {
            quarantine();
            return;
        }
        abi::bump(counters_->gather_pieces, stager_->stats().sm_pieces - gathered);
        if (open_op_ == abi::kOpGet) {
            abi::store_release(producer.doorbell, open_seq_);
        }
    } else
#endif
    {
        /* Host staging: the copy is complete, the doorbell follows at once. */
        abi::store_release(producer.doorbell, open_seq_);
    }
    published_ = open_seq_;
    open_      = false;
    abi::bump(counters_->pieces);
    abi::bump(counters_->bytes, open_len_);
    wakeup_.notify();
}

void SendLane::publish_open()
{
    if (open_) {
        publish();
    }
}

unsigned SendLane::stage()
{
    unsigned work = 0;
    while (!queue_.empty() && !failed_) {
        SendRequest *req = queue_.front();
        if (!piece_fits(req->op, req->route, 1) &&
            !open_piece(req->op, req->route)) {
            break;
        }
        work += (append(req) != 0);
        if (req->seg == req->nsegs) {
            queue_.pop_front();
            req->staged = true;
        }
        if ((open_len_ == geometry_.slot_size) ||
            (nplans_ == geometry_.max_plan)) {
            publish();
        }
    }

    if (!queue_.empty() && (stall_since_ns_ != 0) &&
        (monotonic_ns() - stall_since_ns_ > credit_timeout_ns_)) {
        /* Not published yet: each may fall back once to a direct path, or
         * fails. */
        ucs_debug("pxn: no ring credit at relay pid %u for %.3f s: %zu queued "
                  "operations leave the lane", relay().identity.pid,
                  credit_timeout_ns_ / 1e9, queue_.size());
        while (!queue_.empty()) {
            SendRequest *req = queue_.front();
            queue_.pop_front();
            give_up(req, UCS_ERR_TIMED_OUT);
        }
        stall_since_ns_ = 0;
        ++work;
    }
    return work;
}

void SendLane::request_piece_done(SendRequest *req, ucs_status_t status)
{
    if ((status != UCS_OK) && (req->status == UCS_OK)) {
        req->status = status;
    }
    if ((--req->pieces == 0) && req->staged) {
        finish_request(req);
    }
}

void SendLane::finish_request(SendRequest *req)
{
    --rkeys_[req->rkey_index].users;
    if (req->status != UCS_OK) {
        abi::bump(counters_->failed_ops);
    }
    if (req->comp != nullptr) {
        uct_invoke_completion(req->comp, req->status);
    }
    req->owner->op_done(req->status);
    free_request(req);
}

unsigned SendLane::reap()
{
    unsigned work = 0;
    while (window_.reaped() < published_) {
        const uint64_t seq  = window_.reaped() + 1;
        const uint32_t slot = slot_of(seq, geometry_.slots);
        ucs_status_t status;
        if (!read_completion(&block_.completion(slot), seq, &status)) {
            break;
        }
        SlotRecord &record = records_[slot];
        if ((record.op == abi::kOpGet) && (status == UCS_OK)) {
            const uint8_t *src = slot_ptr(seq);
            for (const auto &dest : record.get_dest) {
                copy_out(dest, src);
                src += dest.length;
            }
        }
        window_.reap(seq);
        abi::store_release(block_.producer().reaped, seq);
        abi::store_relaxed(counters_->last_completion_ns, monotonic_ns());
        for (SendRequest *req : record.requests) {
            request_piece_done(req, status);
        }
        ++work;
    }
    return work;
}

/* A GET reply from its slot to where it goes. */
void SendLane::copy_out(const SlotRecord::GetDest &dest, const uint8_t *src)
{
#ifdef PXN_HAVE_CUDA
    if (stager_ != nullptr) {
        if (dest.unpack != nullptr) {
            bounce_.resize(std::max<size_t>(bounce_.size(), dest.length));
            stager_->copy_out(bounce_.data(), src, dest.length);
            dest.unpack(dest.arg, bounce_.data(), dest.length);
        } else {
            stager_->copy_out(reinterpret_cast<void*>(dest.addr), src,
                              dest.length);
        }
        return;
    }
    if ((dest.unpack == nullptr) && (cu_ != nullptr) &&
        cu_->is_device_pointer(reinterpret_cast<void*>(dest.addr))) {
        cu_->cuMemcpy(dest.addr, reinterpret_cast<CUdeviceptr>(src), dest.length);
        return;
    }
#endif
    if (dest.unpack != nullptr) {
        dest.unpack(dest.arg, src, dest.length);
    } else {
        memcpy(reinterpret_cast<void*>(dest.addr), src, dest.length);
    }
}

/* A staging copy or doorbell could not be enqueued: the piece was never
 * published. Everything on the lane fails (or falls back), and the lane is
 * given back so that the relay does not wait for the doorbell. */
void SendLane::quarantine()
{
    ucs_warn("pxn: GPU staging into relay pid %u failed: lane quarantined",
             relay().identity.pid);
    fail_all(UCS_ERR_IO_ERROR);
    mapping_->release_lane(self_, lane_index_);
}

void SendLane::fail_all(ucs_status_t status)
{
    if (failed_) {
        return;
    }
    failed_ = true;
    open_   = false; /* never published: dropped with its requests below */
    ucs_debug("pxn: lane to relay pid %u failed: %s", relay().identity.pid,
              ucs_status_string(status));
    /* Published pieces that will never be reaped, then the open one. */
    for (uint64_t seq = window_.reaped() + 1; seq <= open_seq_; ++seq) {
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
}

void SendLane::give_up(SendRequest *req, ucs_status_t status)
{
    const RkeySlot &rkey = rkeys_[req->rkey_index];
    if ((req->pieces == 0) && (req->seg == 0) && (req->seg_offset == 0) &&
        (req->status == UCS_OK) &&
        req->owner->fall_back(*req, rkey.packed, rkey.length)) {
        --rkeys_[req->rkey_index].users;
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
    const uint64_t now = monotonic_ns();
    if (now < next_health_ns_) {
        return;
    }
    next_health_ns_ = now + kHealthPeriodNs;
    if (failed_) {
        return;
    }
    if (!mapping_->is_healthy()) {
        ucs_warn("pxn: relay pid %u (rail %s) is no longer healthy "
                 "(heartbeat age %.3f s): failing its pieces",
                 relay().identity.pid, relay().rail.c_str(),
                 mapping_->heartbeat_age_ns() / 1e9);
        fail_all(UCS_ERR_ENDPOINT_TIMEOUT);
        return;
    }
    /* A relay that died (rather than froze) is noticed long before its
     * heartbeat goes stale; /proc is read only while something waits on it. */
    if (!idle()) {
        check_relay_alive();
    }
}

bool SendLane::check_relay_alive()
{
    const uint64_t now = monotonic_ns();
    if (failed_ || (now < next_liveness_ns_)) {
        return !failed_;
    }
    next_liveness_ns_ = now + kLivenessPeriodNs;
    if (is_alive(relay().identity.pid, relay().identity.start_time)) {
        return true;
    }
    ucs_warn("pxn: relay pid %u (rail %s) died: failing its pieces",
             relay().identity.pid, relay().rail.c_str());
    fail_all(UCS_ERR_ENDPOINT_TIMEOUT);
    return false;
}

unsigned SendLane::progress()
{
    if (failed_) {
        return 0;
    }
    unsigned work = reap();
#ifdef PXN_HAVE_CUDA
    if ((stager_ != nullptr) && !stager_->idle() && (stager_->progress() != 0)) {
        wakeup_.notify();
        ++work;
    }
#endif
    work += stage();
    /* An open piece keeps filling while the relay is busy with earlier
     * ones (small operations then share a slot instead of taking one
     * each); it goes out at once when the relay has nothing else, and
     * after kOpenMaxNs in any case. */
    if (open_ && ((window_.in_flight() <= 1) ||
                  (monotonic_ns() - open_since_ns_ > kOpenMaxNs))) {
        publish();
        ++work;
    }
    check_health();
    return work;
}

bool SendLane::idle() const
{
    return queue_.empty() && !open_ && window_.drained();
}

} // namespace uct
} // namespace pxn
