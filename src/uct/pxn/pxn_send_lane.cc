extern "C" {
#include <uct/base/uct_iface.h> /* UCX's config.h first: log levels */
}

#include "pxn_send_lane.h"

#include <ucs/debug/log_def.h>
#include <ucs/pxn/descriptor.h>

#include <algorithm>

namespace pxn {
namespace uct {

namespace {

/* Capacity for `size` elements, growing as push_back would: a list made
 * ready before a change that must not fail half-way. */
template <typename T> void make_room(std::vector<T> &list, size_t size)
{
    if (list.capacity() < size) {
        list.reserve(std::max(size, 2 * list.capacity()));
    }
}

constexpr size_t   kMaxQueued      = 4096;
constexpr uint64_t kOpenMaxNs      = 50000;   /* 50 us */

} // namespace

bool SendRequest::add_iov(const uct_iov_t *iov, size_t iovcnt)
{
    for (size_t i = 0; i < iovcnt; ++i) {
        const size_t n = std::max<size_t>(iov[i].count, 1);
        for (size_t c = 0; c < n; ++c) {
            if (iov[i].length == 0) {
                continue;
            }
            if (nsegs == kMaxIov) {
                return false;
            }
            segs[nsegs] = {reinterpret_cast<uint64_t>(iov[i].buffer) +
                           c * iov[i].stride, iov[i].length};
            memh[nsegs++] = iov[i].memh;
        }
    }
    return true;
}

uint64_t SendRequest::bytes() const
{
    uint64_t total = 0;
    for (uint32_t i = 0; i < nsegs; ++i) {
        total += scattered ? scatter[i].length : segs[i].length;
    }
    return total;
}

SendLane::SendLane(Registry *registry, std::unique_ptr<PeerMapping> mapping,
                   const ProcessIdentity &self, const Settings &settings,
                   int gpu, abi::SenderCounters *counters, uint64_t *failures) :
    control_(registry, std::move(mapping), self, settings),
    settings_(&settings), geometry_(settings.geometry), gpu_(gpu),
    credit_timeout_ns_(uint64_t(settings.credit_timeout * 1e9)),
    counters_(counters), failures_(failures)
{
    rail_hash_    = pxn::rail_hash(control_.relay().rail);
    open_start_ns_ = monotonic_ns();
    /* The relay may reuse or free the slots' memory once the lane is free:
     * copies into it end, and its mapping goes, before that. */
    control_.on_release([this] {
        if (stager_ != nullptr) {
            stager_->close();
        }
    });
}

SendLane::~SendLane()
{
    if (counted_) {
        count(counters_->lanes, uint64_t(-1));
    }
    /* The stager (GPU streams, the lane's memory) goes before the lane is
     * released; the hook would outlive it. */
    control_.on_release(nullptr);
    stager_.reset();
}

ucs_status_t SendLane::start(bool renewed)
{
    const LaneClaim &claim = control_.claim();
    if (renewed) {
        ucs_debug("pxn: lane %u at relay pid %u re-established at seq %lu "
                  "(lane epoch %lx)", claim.index, relay().identity.pid,
                  claim.initial_seq, claim.lane_epoch);
        published_ = claim.initial_seq;
        read_      = claim.initial_seq;
        return window_.reestablish(claim.lane_epoch, claim.initial_seq);
    }
    ucs_status_t status = window_.reset(geometry_.slots, claim.lane_epoch,
                                        claim.initial_seq);
    if ((status == UCS_OK) && (builder_.init(PlanLimits::of(geometry_)) != UCS_OK)) {
        status = UCS_ERR_NO_MEMORY;
    }
    if (status != UCS_OK) {
        return status;
    }
    published_ = claim.initial_seq;
    read_      = claim.initial_seq;
    piece_bytes_ = piece_bytes_for(*settings_, control_.mapping().info().arena_kind ==
                                               abi::kArenaHostShm);
    records_.resize(geometry_.slots);
    const uint64_t map_start = monotonic_ns();
    status = stager_->ready();
    if (status != UCS_OK) {
        return status;
    }
    const uint64_t now = monotonic_ns();
    count(counters_->lane_map_ns, now - map_start);
    count(counters_->lane_open_ns, now - open_start_ns_);
    counted_ = true;
    count(counters_->lanes);
    return UCS_OK;
}

SendRequest *SendLane::alloc_request(SendOwner *owner, abi::Op op,
                                     uint32_t route, uint32_t rkey,
                                     uint64_t remote_addr,
                                     uct_completion_t *comp)
{
    SendRequest *req;
    if (pool_.empty()) {
        /* Every list a request can be on grows with the pool, here, before
         * anything changed: once posted, a request never allocates (an
         * allocation that fails throws out of this call alone). */
        auto fresh       = std::make_unique<SendRequest>();
        const size_t all = requests_.size() + 1;
        for (auto *list : {&pool_, &finished_, &delivering_}) {
            make_room(*list, all);
        }
        requests_.push_back(std::move(fresh));
        req = requests_.back().get();
    } else {
        req = pool_.back();
        pool_.pop_back();
    }
    req->comp        = comp;
    req->owner       = owner;
    req->op          = op;
    req->route       = route;
    req->rkey_index  = rkey;
    req->rkeys       = 1ull << rkey;
    req->remote_addr = remote_addr;
    req->scattered   = false;
    req->nsegs       = 0;
    req->cursor      = OpCursor();
    req->pieces      = 0;
    req->staged      = false;
    req->status      = UCS_OK;
    return req;
}

void SendLane::free_request(SendRequest *req)
{
    pool_.push_back(req);
}

ucs_status_t SendLane::post(SendOwner *owner, abi::Op op, uint32_t route,
                            uint32_t rkey, uint64_t remote_addr,
                            const uct_iov_t *iov, size_t iovcnt,
                            uct_completion_t *comp)
{
    if (!usable_at(tick())) {
        return refuse_post();
    }
    if (queue_.size() >= kMaxQueued) {
        return UCS_ERR_NO_RESOURCE;
    }
    SendRequest *req = alloc_request(owner, op, route, rkey, remote_addr, comp);
    if (!req->add_iov(iov, iovcnt)) {
        free_request(req);
        return UCS_ERR_INVALID_PARAM;
    }
    return enqueue(req, req->rkeys);
}

ucs_status_t SendLane::post_scattered(SendOwner *owner, abi::Op op,
                                      uint32_t route, const ScatterSegment *segs,
                                      size_t count, uint64_t rkeys,
                                      uct_completion_t *comp)
{
    if (!usable_at(tick())) {
        return refuse_post();
    }
    if (count > SendRequest::kMaxScatter) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (queue_.size() >= kMaxQueued) {
        return UCS_ERR_NO_RESOURCE;
    }
    SendRequest *req = alloc_request(owner, op, route, 0, 0, comp);
    try {
        req->scatter.assign(segs, segs + count); /* capacity kept in the pool */
    } catch (const std::bad_alloc &) {
        free_request(req);
        throw;
    }
    req->scattered = true;
    req->rkeys     = rkeys;
    req->nsegs     = static_cast<uint32_t>(count);
    return enqueue(req, 0); /* the caller holds them, the request takes them */
}

ucs_status_t SendLane::enqueue(SendRequest *req, uint64_t hold)
{
    try {
        queue_.push_back(req);
    } catch (const std::bad_alloc &) {
        free_request(req); /* the pool has room for it (alloc_request) */
        throw;
    }
    hold_rkeys(hold);
    try {
        stage();
    } catch (const std::bad_alloc &) {
        /* Staging allocates only before it changes a piece (add_to_piece,
         * append): the request waits in the queue for progress. */
        ucs_debug("pxn: lane %p: out of memory staging: progress stages it",
                  this);
    }
    return UCS_INPROGRESS;
}

void SendLane::hold_rkeys(uint64_t rkeys)
{
    for (; rkeys != 0; rkeys &= rkeys - 1) {
        control_.rkey_hold(__builtin_ctzll(rkeys));
    }
}

void SendLane::drop_rkeys(uint64_t rkeys)
{
    for (; rkeys != 0; rkeys &= rkeys - 1) {
        control_.rkey_drop(__builtin_ctzll(rkeys));
    }
}

bool SendLane::open_piece(abi::Op op, uint32_t route, uint64_t group,
                          const SendRequest *large)
{
    if (builder_.is_open()) {
        publish();
    }
    if (failed_ || !control_.ready()) {
        return false;
    }
    if (window_.needs_reestablish()) {
        if (window_.drained()) {
            control_.renew(); /* ready again after the relay's ack */
        }
        return false;
    }
    uint64_t seq;
    if (window_.reserve(&seq) != UCS_OK) {
        if (stall_since_ns_ == 0) {
            stall_since_ns_ = now_ns_;
            count(counters_->credit_stalls);
        }
        return false;
    }
    stall_since_ns_ = 0;
    open_since_ns_  = now_ns_;
    /* UCX_PXN_PIECE_BYTES: a piece is full at that size and goes out at
     * once, so that the relay forwards the first part of a large operation
     * while the sender copies the rest, instead of the two taking turns
     * slot by slot. The ring's last slot (in_flight() counts this one)
     * fills up, so that small operations keep finding room in it while the
     * relay works, unless the piece is for an operation with at least that
     * much left: that one goes on in pieces of the size as slots come back. */
    uint64_t size = piece_bytes_;
    if ((size != 0) && (window_.in_flight() == geometry_.slots) &&
        ((large == nullptr) || (large->bytes() - large->cursor.remote_offset < size))) {
        size = 0;
    }
    builder_.open(seq, op, route, group, size);
    SlotRecord &record = open_record();
    record.op    = op;
    record.requests.clear();
    record.get_dest.clear();
    return true;
}

void SendLane::add_to_piece(SendRequest *req)
{
    SlotRecord &record = open_record();
    if (record.requests.empty() || (record.requests.back() != req)) {
        record.requests.push_back(req);
        ++req->pieces;
    }
}

void SendLane::make_record_room(SendRequest *req, bool get_dest)
{
    SlotRecord &record = open_record();
    try {
        make_room(record.requests, record.requests.size() + 1);
        if (get_dest) {
            make_room(record.get_dest, record.get_dest.size() + 1);
        }
    } catch (const std::bad_alloc &) {
        free_request(req);
        throw;
    }
}

/* Places as much of the request as the open piece takes; returns bytes. */
uint64_t SendLane::append(SendRequest *req)
{
    SlotRecord &record  = open_record();
    const uint32_t slot = slot_of(builder_.seq(), geometry_.slots);
    if (req->op == abi::kOpGet) {
        /* a place for each of its segments first: fill() cannot stop */
        make_room(record.get_dest,
                  record.get_dest.size() + (req->nsegs - req->cursor.seg));
    }
    add_to_piece(req);
    const auto place = [&](const Placement &p) {
        if (kOpKinds[req->op].packs) {
            stager_->add(slot, reinterpret_cast<const void*>(p.addr),
                         p.slot_offset, p.length);
        } else {
            record.get_dest.push_back({p.addr, p.length, nullptr, nullptr});
        }
    };
    return req->scattered ?
           builder_.fill(req->scatter.data(), req->nsegs, &req->cursor, place) :
           builder_.fill(req->segs, req->nsegs, req->remote_addr,
                         req->rkey_index, &req->cursor, place);
}

void SendLane::publish()
{
    const uint64_t seq  = builder_.seq();
    const uint32_t slot = slot_of(seq, geometry_.slots);
    const LaneBlock &block = control_.block();
    write_descriptor(&block.descriptor(slot), seq, window_.epoch(),
                     builder_.op(), builder_.route(), builder_.plans(),
                     builder_.count());
    abi::store_release(block.producer().head, seq);
    const uint64_t gathered = stager_->gather_pieces();
    if (stager_->commit(seq, slot, builder_.op()) != UCS_OK) {
        /* Nothing is published until the doorbell: the lane is quarantined
         * and the piece's requests may still fail over. */
        quarantine();
        return;
    }
    count(counters_->gather_pieces, stager_->gather_pieces() - gathered);
    published_ = seq;
    builder_.close();
    count(counters_->pieces);
    count(counters_->bytes, builder_.length());
    if (builder_.op() == abi::kOpGet) {
        count(counters_->get_pieces);
        count(counters_->get_bytes, builder_.length());
    } else if (builder_.op() == abi::kOpAm) {
        count(counters_->am_sent, builder_.count()); /* a message per plan */
    }
    control_.notify();
}

/* A full piece goes out; so does one of UCX_PXN_PIECE_OPS segments while
 * the ring has a slot for the next piece: the relay starts on it while the
 * application posts more, instead of the two taking turns (an application
 * that waits for its gets posts only as they complete). With the ring full
 * the open piece keeps filling. */
bool SendLane::piece_due() const
{
    const uint32_t ops = settings_->piece_ops;
    return builder_.full() ||
           ((ops != 0) && (builder_.count() >= ops) &&
            (window_.in_flight() < geometry_.slots));
}

void SendLane::publish_open()
{
    if (builder_.is_open()) {
        publish();
    }
}

unsigned SendLane::stage()
{
    unsigned work = 0;
    while (!queue_.empty() && !failed_) {
        SendRequest *req = queue_.front();
        if (!builder_.accepts(req->op, req->route, 1) &&
            !open_piece(req->op, req->route, 0, req)) {
            break;
        }
        work += (append(req) != 0);
        if (req->cursor.seg == req->nsegs) {
            queue_.pop_front();
            req->staged = true;
        }
        if (piece_due()) {
            publish();
        }
    }

    if (!queue_.empty() && (stall_since_ns_ != 0) &&
        (now_ns_ - stall_since_ns_ > credit_timeout_ns_)) {
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

unsigned SendLane::advance_control(bool *data)
{
    *data = false;
    if (failed_) {
        return 0;
    }
    tick();
    unsigned work = 0;
    if (!control_.ready()) {
        const bool renewing = (control_.state() == LaneControl::State::kRenewing);
        switch (control_.progress()) {
        case LaneControl::Event::kClaimed: {
            Stager::Params params{&control_.mapping(), control_.index(),
                                  &control_.block().producer(), settings_, gpu_};
            const ucs_status_t status = Stager::open(params, &stager_);
            if (status != UCS_OK) {
                fail_all(status);
            }
            return 1;
        }
        case LaneControl::Event::kReady: {
            const ucs_status_t status = start(renewing);
            if (status != UCS_OK) {
                fail_all(status);
                return 1;
            }
            ++work;
            break;
        }
        case LaneControl::Event::kFailed:
            fail_all(control_.failure());
            return 1;
        case LaneControl::Event::kNone:
            if (!control_.ready()) {
                return 0;
            }
            break;
        }
    } else {
        control_.progress();
        if (control_.failed()) {
            fail_all(control_.failure()); /* its stager is closed */
            return 1;
        }
    }
    *data = !failed_;
    return work;
}

unsigned SendLane::progress_control()
{
    bool data;
    return advance_control(&data);
}

unsigned SendLane::progress()
{
    bool data;
    unsigned work = deliver();
    work         += advance_control(&data);
    if (!data) {
        return work + deliver();
    }
    work += reap();
    if (!stager_->idle() && (stager_->progress() != 0)) {
        control_.notify();
        ++work;
    }
    work += stage();
    /* An open piece keeps filling while the relay is busy with earlier
     * ones (small operations then share a slot instead of taking one
     * each); it goes out at once when the relay has nothing else, and
     * after kOpenMaxNs in any case. */
    if (builder_.is_open() &&
        ((window_.in_flight() <= 1) ||
         (now_ns_ - open_since_ns_ > kOpenMaxNs))) {
        publish();
        ++work;
    }
    check_health();
    return work + deliver();
}

bool SendLane::idle() const
{
    if (!finished_.empty()) {
        return false;
    }
    return failed_ ||
           (queue_.empty() && !builder_.is_open() &&
            (records_.empty() || window_.drained()));
}

} // namespace uct
} // namespace pxn
