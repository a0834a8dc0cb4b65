#include "pxn_relay.h"

#include <ucs/debug/log_def.h>
#include <ucs/pxn/am_frame.h>
#include <ucs/pxn/identity.h>
#include <ucs/pxn/lane_claim.h>

#include <algorithm>
#include <cstring>

#include <unistd.h>

namespace pxn {
namespace uct {

ucs_status_t Relay::create(const Params &params, const Settings &settings,
                           std::unique_ptr<Relay> *relay_p)
{
    std::unique_ptr<Relay> relay(new Relay());
    Net *net           = params.net;
    relay->net_        = net;
    relay->entry_      = params.entry;
    relay->registry_   = params.registry;
    relay->geometry_   = settings.geometry;
    relay->counters_   = &reinterpret_cast<abi::ProcessCounters*>(
                                 params.entry->view().base +
                                 abi::kCountersOffset)->relay;
    relay->routes_.reset(new RouteTable(net, settings.routes, params.is_local,
                                        uint64_t(settings.heartbeat_timeout * 1e9)));
    relay->routes_->set_closing([r = relay.get()](uint32_t id, uct_ep_h ep,
                                                  bool failed) {
        r->end_am_flows(id, ep, failed);
    });
    relay->commit_lane_  = params.commit_lane;
    relay->release_lane_ = params.release_lane;

    const uct_iface_attr_t &attr = net->attr();
    /* No inner operation exceeds a slot: clamp "unlimited" inner limits. */
    const uint64_t max_zcopy = std::min<uint64_t>(
            {attr.cap.put.max_zcopy,
             net->has_get() ? attr.cap.get.max_zcopy : attr.cap.put.max_zcopy,
             settings.geometry.slot_size});
    const InnerLimits limits{max_zcopy, 1, attr.cap.put.opt_zcopy_align};
    ucs_status_t status = make_slice_policy(settings.relay_slice,
                                            settings.relay_slice_merge, limits,
                                            &relay->policy_);
    if (status != UCS_OK) {
        ucs_error("pxn: UCX_PXN_RELAY_SLICE=%lu does not fit inner %s limits "
                  "(max_zcopy %lu)", settings.relay_slice,
                  net->tl_name().c_str(), max_zcopy);
        return status;
    }

    /* One inner SGL operation carries up to kBatch slices of a piece. */
    const auto batch = [&](bool get) {
        const size_t max = settings.relay_sgl ? net->max_sgl(get) : 0;
        return (max >= 2) ? std::min(max, kBatch) : size_t(1);
    };
    relay->batch_put_ = batch(false);
    relay->batch_get_ = batch(true);

    const size_t route_words = (settings.routes + 63) / 64;
    relay->lanes_.resize(settings.geometry.lanes);
    for (uint32_t i = 0; i < settings.geometry.lanes; ++i) {
        Lane &lane = relay->lanes_[i];
        lane.block = params.entry->lane(i);
        lane.index = i;
        lane.tracker.reset(settings.geometry.slots);
        lane.held.assign(route_words, 0);
        lane.rkeys.init(net, relay->counters_);
    }
    relay->depth_ = settings.inflight_depth;
    relay->am_max_   = net->am_payload_max(settings.geometry.slot_size);
    relay->slots_gpu_ = params.slots_gpu;
    if ((relay->slots_gpu_ >= 0) && (relay->am_max_ != 0)) {
        try {
            relay->am_bounce_.resize(relay->am_max_);
        } catch (const std::bad_alloc&) {
            ucs_error("pxn: no memory for the relay's %zu-byte AM buffer",
                      relay->am_max_);
            return UCS_ERR_NO_MEMORY;
        }
    }
    relay->am_token_base_ = (uint64_t(getpid()) << 40) ^ monotonic_ns();
    /* a lane's parked AM piece holds a Piece of its own (forward_am) */
    relay->pieces_.resize(relay->depth_ +
                          ((relay->am_max_ != 0) ? settings.geometry.lanes : 0));
    for (Piece &piece : relay->pieces_) {
        piece.relay      = relay.get();
        piece.done.piece = &piece;
        status      = piece.snapshot.init(settings.geometry.max_plan);
        if (status != UCS_OK) {
            ucs_error("pxn: out of memory for relay descriptors");
            return status;
        }
    }
    *relay_p = std::move(relay);
    return UCS_OK;
}

Relay::~Relay()
{
    /* The owner drains in-flight pieces (progress until inflight() == 0)
     * before destroying the relay; routes and rkeys go now. */
    for (Lane &lane : lanes_) {
        drop_lane(lane);
    }
}


/* The time first (LaneConsumer::completed_ns): a sender that reads the
 * entry reads a time at least as new. */
void Relay::complete(Lane &lane, uint64_t seq, ucs_status_t status)
{
    abi::store_relaxed(lane.block.consumer().completed_ns, monotonic_ns());
    complete_piece(&lane.block.completion(0), &lane.block.consumer(), &lane.tracker,
                   seq, status);
}

Relay::Piece *Relay::free_piece()
{
    for (Piece &piece : pieces_) {
        if (!piece.active) {
            return &piece;
        }
    }
    return nullptr;
}

bool Relay::fenced(const Lane &lane) const
{
    const abi::LaneOwner &owner = lane.block.owner();
    return (abi::load_acquire(lane.block.producer().abandoned) == lane.epoch) ||
           (abi::load_relaxed(owner.lane_epoch) != lane.epoch) ||
           (abi::load_relaxed(owner.state) != abi::kLaneClaimed);
}

bool Relay::has_new_piece(const Lane &lane) const
{
    return (lane.epoch != 0) && !lane.refused &&
           (abi::load_acquire(lane.block.producer().doorbell) >= lane.next_seq) &&
           (lane.tracker.check(lane.next_seq) == UCS_OK);
}

void Relay::skip_fenced(Lane &lane)
{
    /* Published before its sender gave up on it: never forwarded. */
    const uint64_t seq = lane.next_seq++;
    abi::store_release(lane.block.consumer().consumed, seq);
    abi::bump(counters_->fenced);
    complete(lane, seq, UCS_ERR_CANCELED);
}

uint64_t Relay::pick_up(Lane &lane, Piece &piece)
{
    /* After the doorbell's acquire: the time of that ring or a later one. */
    abi::record_wait(counters_->pickup,
                     abi::load_relaxed(lane.block.producer().rung_ns),
                     monotonic_ns());
    const uint64_t seq = lane.next_seq++;
    abi::store_release(lane.block.consumer().consumed, seq);
    piece.snapshot.load(&lane.block.descriptor(slot_of(seq, geometry_.slots)));
    return seq;
}

ucs_status_t Relay::check_piece(Lane &lane, const Piece &piece, uint64_t seq,
                                DescReason *reason)
{
    const uint32_t route = piece.snapshot.header().route;
    const bool am = (piece.snapshot.header().op == abi::kOpAm);
    const LaneCheck check{seq, lane.epoch, geometry_.slot_size,
                          geometry_.max_plan, routes_->capacity(),
                          holds(lane, route) && routes_->usable(route),
                          am ? 0 : lane.rkeys.refresh(lane.block,
                                                      piece.snapshot, route),
                          am_max_};
    const ucs_status_t status = validate_descriptor(piece.snapshot, check, reason);
    if ((status == UCS_OK) && (piece.snapshot.header().op == abi::kOpGet) &&
        !net_->has_get()) {
        /* The descriptor comes from another process: a get for an inner
         * transport without get_zcopy (tcp) must not reach it. */
        *reason = DescReason::kBadOp;
        return UCS_ERR_UNSUPPORTED;
    }
    return status;
}

void Relay::refuse_piece(Lane &lane, uint64_t seq, uint32_t route,
                         ucs_status_t status, DescReason reason)
{
    if ((status == UCS_ERR_INVALID_PARAM) && (reason == DescReason::kRouteInvalid) &&
        holds(lane, route)) {
        /* A well-formed piece on a route whose inner ep failed: the target
         * is gone from here (a new route gets a new ep). */
        abi::bump(counters_->failed_pieces);
        complete(lane, seq, UCS_ERR_UNREACHABLE);
        return;
    }
    abi::bump(counters_->rejected);
    ucs_debug("pxn: relay rejected seq %lu of lane %u: %s", seq, lane.index,
              desc_reason_name(reason));
    complete(lane, seq, status);
}

void Relay::begin_piece(Lane &lane, Piece &piece, uint64_t seq)
{
    piece.active    = true;
    piece.lane      = &lane;
    piece.seq       = seq;
    piece.epoch     = lane.epoch;
    piece.status    = UCS_OK;
    piece.route     = piece.snapshot.header().route;
    piece.slot_base = uint64_t(slot_of(seq, geometry_.slots)) *
                      geometry_.slot_size;
    routes_->piece_started(piece.route);
    ++lane.inflight;
    ++inflight_;
    abi::store_relaxed(counters_->inflight, uint64_t(inflight_));
}

void Relay::forward_rma(Lane &lane, Piece &piece)
{
    piece.rkeys = 0;
    for (uint32_t i = 0; i < piece.snapshot.header().plan_count; ++i) {
        piece.rkeys |= 1ull << piece.snapshot.plans()[i].rkey_index;
    }
    lane.rkeys.hold(piece.rkeys);
    piece.has_op  = false;
    piece.ops     = 0;
    piece.sgl_ops = 0;
    piece.slicer.reset(policy_, piece.snapshot.plans(),
                       piece.snapshot.header().plan_count);
    piece.done.comp.func   = piece_completed;
    piece.done.comp.count  = 1; /* guard while posting */
    piece.done.comp.status = UCS_OK;
    post(piece);
}

unsigned Relay::start_piece(Lane &lane)
{
    if (lane.parked) {
        return 0; /* behind its AM piece that waits for credit */
    }
    if (!has_new_piece(lane)) {
        check_stall(lane);
        return 0;
    }
    if (fenced(lane)) {
        skip_fenced(lane);
        return 1;
    }
    lane.stalled_since = 0;
    Piece *piece = free_piece();
    if (piece == nullptr) {
        return 0;
    }
    const uint64_t seq = pick_up(lane, *piece);
    DescReason reason;
    const ucs_status_t status = check_piece(lane, *piece, seq, &reason);
    if (status != UCS_OK) {
        refuse_piece(lane, seq, piece->snapshot.header().route, status, reason);
        return 1;
    }
    begin_piece(lane, *piece, seq);
    if (piece->snapshot.header().op == abi::kOpAm) {
        forward_am(lane, *piece);
    } else {
        forward_rma(lane, *piece);
    }
    return 1;
}

inline bool Relay::fill(Piece &piece, size_t max)
{
    const Lane &lane = *piece.lane;
    Batch &b         = piece.batch;
    InnerOp op;
    b.count = 0;
    while ((b.count < max) && piece.slicer.next(&op)) {
        b.buffers[b.count]      = lane.slots.base + piece.slot_base +
                                  op.slot_offset;
        b.lengths[b.count]      = op.length;
        b.memhs[b.count]        = lane.slots.memh;
        b.remote_addrs[b.count] = op.remote_addr;
        b.rkeys[b.count]        = lane.rkeys.rkey(op.rkey_index);
        ++b.count;
    }
    return b.count > 0;
}

/* Posts the piece's inner operations until done, out of resources, or
 * failed. The completion guard is released once everything is posted. */
void Relay::post(Piece &piece)
{
    if (piece.snapshot.header().op == abi::kOpAm) {
        post_am(piece);
        return;
    }
    const Lane  &lane = *piece.lane;
    const bool   get  = (piece.snapshot.header().op == abi::kOpGet);
    const Batch &b    = piece.batch;
    uct_ep_h     ep   = routes_->ep(piece.route);

    piece.wait_wire = false;
    if (!routes_->wired(piece.route)) {
        if (routes_->usable(piece.route)) {
            piece.wait_wire = true; /* posted once the route is wired */
            return;
        }
        piece.status = UCS_ERR_UNREACHABLE; /* its wiring failed */
    }
    piece.posting = true;
    while ((piece.status == UCS_OK) &&
           (piece.has_op || fill(piece, get ? batch_get_ : batch_put_))) {
        if (fenced(lane)) {
            piece.status = UCS_ERR_CANCELED;
            piece.has_op = false;
            abi::bump(counters_->fenced);
            break;
        }
        piece.has_op = true;
        ++piece.done.comp.count;
        ucs_status_t status;
        if (b.count == 1) {
            uct_iov_t iov = {b.buffers[0], b.lengths[0], b.memhs[0], 0, 1};
            status = get ? net_->get_zcopy(ep, &iov, b.remote_addrs[0],
                                           b.rkeys[0], &piece.done.comp) :
                           net_->put_zcopy(ep, &iov, b.remote_addrs[0],
                                           b.rkeys[0], &piece.done.comp);
        } else {
            const Net::Sgl sgl{b.buffers, b.lengths, b.memhs, b.remote_addrs,
                               b.rkeys, b.count};
            status = net_->sgl_zcopy(get, ep, sgl, &piece.done.comp);
        }
        if (status != UCS_INPROGRESS) {
            --piece.done.comp.count;
        }
        if (status == UCS_ERR_NO_RESOURCE) {
            break; /* retried in a later round */
        }
        piece.has_op = false;
        if (UCS_STATUS_IS_ERR(status)) {
            piece.status = status;
        } else {
            ++piece.ops;
            piece.sgl_ops += (b.count > 1);
        }
    }
    piece.posting = false;
    if (!piece.has_op && (--piece.done.comp.count == 0)) {
        finish(piece);
    }
}

void Relay::piece_completed(uct_completion_t *comp)
{
    Piece *piece = ucs_container_of(comp, PieceCompletion, comp)->piece;
    if (!piece->posting) {
        piece->relay->finish(*piece);
    }
}

void Relay::finish(Piece &piece)
{
    Lane &lane = *piece.lane;
    net_->note_engine_work(); /* the lane's next piece, its completion */
    ucs_status_t status = (piece.status != UCS_OK) ? piece.status :
                                                     piece.done.comp.status;
    lane.rkeys.drop(piece.rkeys);
    abi::bump(counters_->inner_ops, piece.ops);
    abi::bump(counters_->inner_sgl_ops, piece.sgl_ops);
    if (piece.snapshot.header().op == abi::kOpAm) {
        /* what reached the inner transport, whatever became of the rest */
        abi::bump(counters_->am_messages, piece.am_next);
        abi::bump(counters_->am_bytes, piece.am_offset);
    }
    /* a piece for a closed target iface says nothing of its route */
    routes_->piece_finished(piece.route, piece.am_closed ? UCS_OK : status);
    if ((status != UCS_OK) && !routes_->usable(piece.route)) {
        /* its target is gone or unreachable: the keys of its memory too */
        for (Lane &l : lanes_) {
            l.rkeys.release_route(piece.route);
        }
        drop_am_flows(piece.route);
    }
    if (piece.epoch == lane.epoch) {
        abi::store_relaxed(counters_->last_completion_ns, monotonic_ns());
        if (status == UCS_OK) {
            const uint64_t length = piece.snapshot.header().length;
            abi::bump(counters_->pieces);
            abi::bump(counters_->bytes, length);
            if (piece.snapshot.header().op == abi::kOpGet) {
                abi::bump(counters_->get_pieces);
                abi::bump(counters_->get_bytes, length);
            }
            abi::bump(counters_->am_pieces,
                      piece.snapshot.header().op == abi::kOpAm);
        } else {
            abi::bump(counters_->failed_pieces);
            ucs_debug("pxn: relay seq %lu failed: %s", piece.seq,
                      ucs_status_string(status));
        }
        complete(lane, piece.seq, status);
    }
    piece.active = false;
    --lane.inflight;
    --inflight_;
    abi::store_relaxed(counters_->inflight, uint64_t(inflight_));
}

unsigned Relay::progress()
{
    unsigned work = 0;
    if (routes_->collect()) {
        abi::store_relaxed(counters_->routes_active, uint64_t(routes_->active()));
    }

    if (routes_->wiring()) {
        work += routes_->progress_wiring(monotonic_ns());
    }
    /* Pieces stopped by NO_RESOURCE (or waiting for their route's wiring)
     * go first: they hold slots. */
    for (Piece &piece : pieces_) {
        if (piece.active && (piece.has_op || piece.wait_wire) && !piece.posting) {
            post(piece); /* the guard taken by start_piece() is still held */
            ++work;
        }
    }

    const uint32_t lanes = static_cast<uint32_t>(lanes_.size());
    for (uint32_t n = 0; n < lanes; ++n) {
        Lane &lane = lanes_[(next_lane_ + n) % lanes];
        work += sync_owner(lane);
        if (lane.epoch == 0) {
            continue;
        }
        /* Route requests are control traffic: reading a lane's 16
         * mailboxes in every round cost a piece as much as validating it. */
        if ((round_ % kRouteRounds) == 0) {
            work += serve_routes(lane);
        }
        if (inflight_ - parked_ < depth_) {
            work += start_piece(lane);
        }
    }
    next_lane_ = (next_lane_ + 1) % lanes;
    ++round_;
    return work;
}


} // namespace uct
} // namespace pxn
