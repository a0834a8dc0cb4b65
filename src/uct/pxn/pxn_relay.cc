#include "pxn_relay.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cstring>

namespace pxn {
namespace uct {

ucs_status_t Relay::create(Net *net, RegistryEntry *entry, uint8_t *arena,
                           uct_mem_h arena_memh, const Settings &settings,
                           std::unique_ptr<Relay> *relay_p)
{
    std::unique_ptr<Relay> relay(new Relay());
    relay->net_      = net;
    relay->entry_    = entry;
    relay->arena_    = arena;
    relay->memh_     = arena_memh;
    relay->geometry_ = settings.geometry;
    relay->counters_ = &reinterpret_cast<abi::ProcessCounters*>(
                               entry->view().base + abi::kCountersOffset)->relay;

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

    relay->lanes_.resize(settings.geometry.lanes);
    for (uint32_t i = 0; i < settings.geometry.lanes; ++i) {
        relay->lanes_[i].block = entry->lane(i);
        relay->lanes_[i].tracker.reset(settings.geometry.slots);
    }
    relay->pieces_.resize(settings.inflight_depth);
    for (Piece &piece : relay->pieces_) {
        piece.relay = relay.get();
        status      = piece.snapshot.init(settings.geometry.max_plan);
        if (status != UCS_OK) {
            ucs_error("pxn: out of memory for relay descriptors");
            return status;
        }
    }
    relay->rkey_buf_.resize(abi::kRkeyMax);
    *relay_p = std::move(relay);
    return UCS_OK;
}

Relay::~Relay()
{
    /* The owner drains in-flight pieces (progress until inflight() == 0)
     * before destroying the relay; eps and rkeys go now. */
    for (Lane &lane : lanes_) {
        drop_lane(lane);
    }
}

void Relay::drop_lane(Lane &lane)
{
    for (Route &route : lane.routes) {
        if (route.ep != nullptr) {
            uct_ep_destroy(route.ep);
        }
        route = Route();
    }
    for (Rkey &rkey : lane.rkeys) {
        if (rkey.valid) {
            uct_rkey_release(net_->component(), &rkey.bundle);
        }
        rkey = Rkey();
    }
    lane.epoch = 0;
}

/* Follows the lane's owner block (a seqlock keyed on lane_epoch, see
 * lane_claim.h). Returns 1 when the lane changed hands. */
unsigned Relay::sync_owner(Lane &lane)
{
    abi::LaneOwner &owner = lane.block.owner();
    const uint64_t e1     = abi::load_acquire(owner.lane_epoch);
    const uint32_t state  = abi::load_acquire(owner.state);
    const uint64_t start  = abi::load_relaxed(owner.initial_seq);
    const uint32_t flags  = abi::load_relaxed(owner.flags);
    ProcessIdentity who;
    who.pid        = abi::load_relaxed(owner.owner_pid);
    who.start_time = abi::load_relaxed(owner.owner_start_time);
    who.epoch      = abi::load_relaxed(owner.owner_epoch);
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint64_t e2     = abi::load_relaxed(owner.lane_epoch);

    if ((e1 == 0) || (e1 != e2)) {
        return 0; /* being claimed right now */
    }
    if (state != abi::kLaneClaimed) {
        if ((lane.epoch != 0) && (lane.inflight == 0)) {
            drop_lane(lane);
            return 1;
        }
        return 0;
    }
    if ((e1 == lane.epoch) || (lane.inflight != 0)) {
        return 0; /* current, or waiting for old pieces to finish */
    }

    /* The same owner after a seq wrap keeps its routes and rkeys. */
    if (!(flags & abi::kLaneKeepRoutes) || (lane.epoch == 0) ||
        (who != lane.owner)) {
        drop_lane(lane);
    }
    abi::LaneConsumer &consumer = lane.block.consumer();
    lane.next_seq               = start + 1;
    lane.tracker.reset(geometry_.slots, start);
    abi::store_relaxed(consumer.consumed, start);
    abi::store_relaxed(consumer.completed, start);
    for (uint32_t slot = 0; slot < geometry_.slots; ++slot) {
        abi::store_relaxed(lane.block.completion(slot).seq, uint64_t(0));
    }
    abi::store_release(consumer.lane_epoch, e1);
    lane.epoch = e1;
    lane.owner = who;
    abi::bump(counters_->lane_resets);
    ucs_debug("pxn: relay lane %p now owned by pid %u (lane epoch %lx)",
              lane.block.base(), owner.owner_pid, e1);
    return 1;
}

unsigned Relay::serve_routes(Lane &lane)
{
    unsigned work = 0;
    for (uint32_t i = 0; i < abi::kMaxRoutes; ++i) {
        const uint64_t gen = abi::load_acquire(lane.block.route(i).request.request_gen);
        /* Replacing an ep that pieces may still use waits until the lane
         * is quiet: a sender cannot make us destroy an ep in use. */
        if ((gen != lane.routes[i].gen) &&
            ((lane.routes[i].ep == nullptr) || (lane.inflight == 0) ||
             !lane.routes[i].connected)) {
            serve_route(lane, i, gen);
            ++work;
        }
    }
    return work;
}

void Relay::serve_route(Lane &lane, uint32_t index, uint64_t gen)
{
    abi::RouteEntry &entry = lane.block.route(index);
    Route &route           = lane.routes[index];
    abi::RouteRequest req;
    memcpy(&req, &entry.request, sizeof(req)); /* private copy */
    route.gen = gen;

    ucs_status_t status = UCS_OK;
    std::vector<uint8_t> own_addr;
    const uct_iface_attr_t &attr = net_->attr();
    /* A device address is needed except for the first to-ep round. */
    const bool first_ep_round = (req.flags == abi::kRouteConnectToEp) &&
                                (req.ep_addr_len == 0);
    const bool lengths_ok = (req.iface_addr_len <= abi::kIfaceAddrMax) &&
                            (req.ep_addr_len <= abi::kEpAddrMax) &&
                            (first_ep_round ?
                             (req.dev_addr_len == 0) :
                             (req.dev_addr_len == attr.device_addr_len));

    if (gen == 0) {
        status = UCS_OK; /* reset by a claim */
    } else if (req.flags == 0) {
        /* Released by the sender. */
        if (route.ep != nullptr) {
            uct_ep_destroy(route.ep);
        }
        route  = Route{gen, nullptr, false};
        status = UCS_OK;
    } else if (!lengths_ok) {
        status = UCS_ERR_INVALID_PARAM;
    } else if (req.flags & abi::kRouteConnectToIface) {
        if ((net_->mode() != Net::ConnectMode::kIface) ||
            (req.iface_addr_len != attr.iface_addr_len) ||
            !net_->is_reachable(req.dev_addr, req.iface_addr)) {
            status = UCS_ERR_UNREACHABLE;
        } else {
            if (route.ep != nullptr) {
                uct_ep_destroy(route.ep);
                route = Route{gen, nullptr, false};
            }
            status = net_->ep_create_to_iface(req.dev_addr, req.iface_addr,
                                              &route.ep);
            route.connected = (status == UCS_OK);
        }
    } else if (req.flags & abi::kRouteConnectToEp) {
        if (net_->mode() != Net::ConnectMode::kEp) {
            status = UCS_ERR_UNSUPPORTED;
        } else if (first_ep_round) {
            /* First round: an unconnected ep whose address goes back. */
            if (route.ep != nullptr) {
                uct_ep_destroy(route.ep);
                route = Route{gen, nullptr, false};
            }
            /* Reply: u8 device address length | device address | ep address */
            std::vector<uint8_t> ep_addr;
            status = net_->ep_create_unconnected(&route.ep, &ep_addr);
            const std::vector<uint8_t> dev = net_->device_address();
            own_addr.push_back(static_cast<uint8_t>(dev.size()));
            own_addr.insert(own_addr.end(), dev.begin(), dev.end());
            own_addr.insert(own_addr.end(), ep_addr.begin(), ep_addr.end());
        } else if ((route.ep == nullptr) ||
                   (req.ep_addr_len != attr.ep_addr_len)) {
            status = UCS_ERR_INVALID_PARAM;
        } else {
            status          = net_->ep_connect(route.ep, req.dev_addr,
                                               req.ep_addr);
            route.connected = (status == UCS_OK);
        }
    } else {
        status = UCS_ERR_INVALID_PARAM;
    }

    if (status == UCS_OK) {
        abi::bump(counters_->routes, route.connected);
    } else {
        abi::bump(counters_->route_errors);
        ucs_debug("pxn: relay route %u of lane %p failed: %s", index,
                  lane.block.base(), ucs_status_string(status));
    }
    abi::RouteReply &reply = entry.reply;
    reply.status           = status;
    reply.ep_addr_len      = static_cast<uint16_t>(own_addr.size());
    if (!own_addr.empty() && (own_addr.size() <= abi::kEpAddrMax)) {
        memcpy(reply.ep_addr, own_addr.data(), own_addr.size());
    }
    abi::store_release(reply.reply_gen, gen);
}

/* Makes the cached unpacked rkeys of every rkey index the snapshot uses
 * current; returns the bitmask of valid ones. */
uint64_t Relay::refresh_rkeys(Lane &lane, const DescriptorSnapshot &snapshot)
{
    uint64_t valid = 0;
    for (uint32_t i = 0; i < snapshot.plans_loaded(); ++i) {
        const uint32_t index = snapshot.plans()[i].rkey_index;
        if ((index >= abi::kMaxRkeys) || (valid & (1ull << index))) {
            continue;
        }
        abi::RkeyEntry &entry = lane.block.rkey(index);
        Rkey &rkey            = lane.rkeys[index];
        const uint64_t gen    = abi::load_acquire(entry.gen);
        if ((gen != rkey.gen) || !rkey.valid) {
            if (rkey.valid) {
                uct_rkey_release(net_->component(), &rkey.bundle);
                rkey.valid = false;
            }
            rkey.gen = gen;
            const uint32_t length = abi::load_relaxed(entry.length);
            if ((gen == 0) || (length > abi::kRkeyMax)) {
                continue;
            }
            memcpy(rkey_buf_.data(), entry.packed, length);
            std::atomic_thread_fence(std::memory_order_acquire);
            if (abi::load_relaxed(entry.gen) != gen) {
                continue; /* rewritten while copied */
            }
            rkey.valid = (uct_rkey_unpack(net_->component(), rkey_buf_.data(),
                                          &rkey.bundle) == UCS_OK);
        }
        if (rkey.valid) {
            valid |= 1ull << index;
        }
    }
    return valid;
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

unsigned Relay::start_piece(Lane &lane, uint32_t lane_index)
{
    abi::LaneProducer &producer = lane.block.producer();
    if ((lane.epoch == 0) ||
        (abi::load_relaxed(lane.block.owner().lane_epoch) != lane.epoch) ||
        (abi::load_acquire(producer.doorbell) < lane.next_seq) ||
        (lane.tracker.check(lane.next_seq) != UCS_OK)) {
        return 0;
    }
    Piece *piece = free_piece();
    if (piece == nullptr) {
        return 0;
    }

    const uint64_t seq  = lane.next_seq++;
    const uint32_t slot = slot_of(seq, geometry_.slots);
    abi::store_release(lane.block.consumer().consumed, seq);
    piece->snapshot.load(&lane.block.descriptor(slot));

    uint32_t routes_valid = 0;
    for (uint32_t r = 0; r < abi::kMaxRoutes; ++r) {
        routes_valid |= uint32_t(lane.routes[r].connected) << r;
    }
    const LaneCheck check{seq, lane.epoch, geometry_.slot_size,
                          geometry_.max_plan, routes_valid,
                          refresh_rkeys(lane, piece->snapshot)};
    DescReason reason;
    ucs_status_t status = validate_descriptor(piece->snapshot, check, &reason);
    if ((status == UCS_OK) && (piece->snapshot.header().op == abi::kOpGet) &&
        !net_->has_get()) {
        /* The descriptor comes from another process: a get for an inner
         * transport without get_zcopy (tcp) would call a NULL op. */
        reason = DescReason::kBadOp;
        status = UCS_ERR_UNSUPPORTED;
    }
    if (status != UCS_OK) {
        abi::bump(counters_->rejected);
        ucs_debug("pxn: relay rejected seq %lu of lane %u: %s", seq,
                  lane_index, desc_reason_name(reason));
        complete_piece(&lane.block.completion(0), &lane.block.consumer(),
                       &lane.tracker, seq, status);
        return 1;
    }

    piece->active    = true;
    piece->lane      = &lane;
    piece->seq       = seq;
    piece->epoch     = lane.epoch;
    piece->status    = UCS_OK;
    piece->slot_base = slot_offset(lane_index, slot, geometry_.slots,
                                   geometry_.slot_size);
    piece->ep        = lane.routes[piece->snapshot.header().route].ep;
    piece->has_op    = false;
    piece->slicer.reset(policy_, piece->snapshot.plans(),
                        piece->snapshot.header().plan_count);
    piece->comp.func   = piece_completed;
    piece->comp.count  = 1; /* guard while posting */
    piece->comp.status = UCS_OK;
    ++lane.inflight;
    ++inflight_;
    abi::store_relaxed(counters_->inflight, uint64_t(inflight_));
    post(*piece);
    return 1;
}

/* Posts the piece's inner operations until done, out of resources, or
 * failed. The completion guard is released once everything is posted. */
void Relay::post(Piece &piece)
{
    const Lane &lane = *piece.lane;
    const bool  get  = (piece.snapshot.header().op == abi::kOpGet);

    piece.posting = true;
    while ((piece.status == UCS_OK) &&
           (piece.has_op || piece.slicer.next(&piece.op))) {
        piece.has_op = true;
        uct_iov_t iov;
        iov.buffer   = arena_ + piece.slot_base + piece.op.slot_offset;
        iov.length   = piece.op.length;
        iov.memh     = memh_;
        iov.stride   = 0;
        iov.count    = 1;
        const uct_rkey_t rkey = lane.rkeys[piece.op.rkey_index].bundle.rkey;
        ++piece.comp.count;
        ucs_status_t status =
                get ? uct_ep_get_zcopy(piece.ep, &iov, 1, piece.op.remote_addr,
                                       rkey, &piece.comp) :
                      uct_ep_put_zcopy(piece.ep, &iov, 1, piece.op.remote_addr,
                                       rkey, &piece.comp);
        if (status != UCS_INPROGRESS) {
            --piece.comp.count;
        }
        if (status == UCS_ERR_NO_RESOURCE) {
            break; /* retried in a later round */
        }
        piece.has_op = false;
        if (UCS_STATUS_IS_ERR(status)) {
            piece.status = status;
        }
    }
    piece.posting = false;
    if (!piece.has_op && (--piece.comp.count == 0)) {
        finish(piece);
    }
}

void Relay::piece_completed(uct_completion_t *comp)
{
    Piece *piece = reinterpret_cast<Piece*>(comp);
    if (!piece->posting) {
        piece->relay->finish(*piece);
    }
}

void Relay::finish(Piece &piece)
{
    Lane &lane = *piece.lane;
    ucs_status_t status = (piece.status != UCS_OK) ? piece.status :
                                                     piece.comp.status;
    if (piece.epoch == lane.epoch) {
        abi::store_relaxed(counters_->last_completion_ns, monotonic_ns());
        if (status == UCS_OK) {
            abi::bump(counters_->pieces);
            abi::bump(counters_->bytes, piece.snapshot.header().length);
        } else {
            abi::bump(counters_->failed_pieces);
            ucs_debug("pxn: relay seq %lu failed: %s", piece.seq,
                      ucs_status_string(status));
        }
        complete_piece(&lane.block.completion(0), &lane.block.consumer(),
                       &lane.tracker, piece.seq, status);
    }
    piece.active = false;
    --lane.inflight;
    --inflight_;
    abi::store_relaxed(counters_->inflight, uint64_t(inflight_));
}

unsigned Relay::progress()
{
    unsigned work = 0;

    /* Pieces stopped by NO_RESOURCE go first: they hold slots. */
    for (Piece &piece : pieces_) {
        if (piece.active && piece.has_op && !piece.posting) {
            post(piece); /* the guard taken by start_piece() is still held */
            ++work;
        }
    }

    const uint32_t lanes = static_cast<uint32_t>(lanes_.size());
    for (uint32_t n = 0; n < lanes; ++n) {
        const uint32_t index = (next_lane_ + n) % lanes;
        Lane &lane           = lanes_[index];
        work += sync_owner(lane);
        if (lane.epoch == 0) {
            continue;
        }
        work += serve_routes(lane);
        if (inflight_ < pieces_.size()) {
            work += start_piece(lane, index);
        }
    }
    next_lane_ = (next_lane_ + 1) % lanes;
    return work;
}

bool Relay::has_work() const
{
    for (const Lane &lane : lanes_) {
        const abi::LaneOwner &owner = lane.block.owner();
        if (abi::load_acquire(owner.lane_epoch) != lane.epoch) {
            if ((lane.epoch != 0) ||
                (abi::load_acquire(owner.state) == abi::kLaneClaimed)) {
                return true;
            }
        }
        if (lane.epoch == 0) {
            continue;
        }
        if (abi::load_acquire(lane.block.producer().head) >= lane.next_seq) {
            return true;
        }
        for (uint32_t i = 0; i < abi::kMaxRoutes; ++i) {
            if (abi::load_acquire(lane.block.route(i).request.request_gen) !=
                lane.routes[i].gen) {
                return true;
            }
        }
    }
    return false;
}

} // namespace uct
} // namespace pxn
