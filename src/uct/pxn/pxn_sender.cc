#include "pxn_sender.h"

#include <ucs/debug/log_def.h>
#include <ucs/pxn/descriptor.h>

#include <algorithm>
#include <cstring>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>

namespace pxn {
namespace uct {

namespace {

constexpr size_t   kMaxQueued       = 4096;
constexpr uint64_t kHealthPeriodNs  = 1000000; /* 1 ms */
constexpr uint64_t kOpenMaxNs       = 50000;   /* 50 us */

/* Waits, sleeping briefly, until done() or the deadline; control path. */
template<typename Done>
bool wait_until(uint64_t timeout_ns, Done &&done)
{
    const uint64_t deadline = monotonic_ns() + timeout_ns;
    while (!done()) {
        if (monotonic_ns() > deadline) {
            return false;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    return true;
}

void invoke_completion(uct_completion_t *comp, ucs_status_t status)
{
    if ((status != UCS_OK) && (comp->status == UCS_OK)) {
        comp->status = status;
    }
    if (--comp->count == 0) {
        comp->func(comp);
    }
}

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

ucs_status_t SendLane::open(Registry *registry, const PeerInfo &relay,
                            const ProcessIdentity &self, const Settings &settings,
                            abi::SenderCounters *counters,
                            std::unique_ptr<SendLane> *lane_p)
{
    std::unique_ptr<SendLane> lane(new SendLane());
    lane->counters_          = counters;
    lane->registry_          = registry;
    lane->self_              = self;
    lane->geometry_          = settings.geometry;
    lane->credit_timeout_ns_ = uint64_t(settings.credit_timeout * 1e9);
    lane->rail_hash_         = pxn::rail_hash(relay.rail);

    ucs_status_t status = registry->map_peer(relay, &lane->mapping_);
    if (status != UCS_OK) {
        return status;
    }
    LaneClaim claim;
    status = lane->mapping_->claim_lane(self, &claim, settings.initial_seq);
    if ((status == UCS_OK) && claim.resumed) {
        /* A previous SendLane of ours may have left pieces behind: start a
         * new incarnation rather than guess its counters. */
        status = lane->mapping_->renew_lane(self, claim.index, &claim,
                                            settings.initial_seq);
    }
    if (status != UCS_OK) {
        ucs_debug("pxn: no lane at relay pid %u (rail %s): %s",
                  relay.identity.pid, relay.rail.c_str(),
                  ucs_status_string(status));
        lane->mapping_.reset();
        return status;
    }
    lane->lane_index_ = claim.index;
    lane->block_      = lane->mapping_->lane(claim.index);

    status = lane->map_arena(relay, settings);
    if (status == UCS_OK) {
        status = lane->mapping_->open_wakeup(&lane->wakeup_);
    }
    if (status != UCS_OK) {
        return status;
    }

    /* The relay acknowledges a new lane incarnation once it dropped every
     * state of the previous owner (lane_claim.h). */
    lane->wakeup_.notify();
    const uint64_t epoch = claim.lane_epoch;
    abi::LaneConsumer &consumer = lane->block_.consumer();
    if (!wait_until(registry->heartbeat_timeout_ns(), [&] {
            lane->wakeup_.notify();
            return abi::load_acquire(consumer.lane_epoch) == epoch;
        })) {
        ucs_warn("pxn: relay pid %u (rail %s) did not acknowledge lane %u",
                 relay.identity.pid, relay.rail.c_str(), claim.index);
        return UCS_ERR_TIMED_OUT;
    }
    status = lane->window_.reset(settings.geometry.slots, epoch,
                                 claim.initial_seq);
    if (status != UCS_OK) {
        return status;
    }
    if (lane->stager_ == nullptr) {
        lane->populate_slots();
    }
    lane->published_ = claim.initial_seq;
    lane->records_.resize(settings.geometry.slots);
    lane->plans_.resize(settings.geometry.max_plan);
    lane->held_ = true;
    abi::bump(lane->counters_->lanes);
    ucs_debug("pxn: claimed lane %u at relay pid %u (rail %s, lane epoch %lx)",
              claim.index, relay.identity.pid, relay.rail.c_str(), epoch);
    *lane_p = std::move(lane);
    return UCS_OK;
}

ucs_status_t SendLane::map_arena(const PeerInfo &relay, const Settings &settings)
{
#ifdef PXN_HAVE_CUDA
    cu_ = CudaDriver::get();
#endif
    if (relay.arena_kind == abi::kArenaHostShm) {
        UniqueFd fd;
        ucs_status_t status = mapping_->open_host_arena(&fd);
        if (status == UCS_OK) {
            status = arena_.map(fd.get(), settings.geometry.arena_size(),
                                "relay arena");
        }
        return status;
    }
#ifdef PXN_HAVE_CUDA
    if (relay.arena_kind == abi::kArenaCudaIpc) {
        CudaStager::Options options;
        options.policy       = settings.copy;
        options.gpu_doorbell = settings.gpu_doorbell;
        options.gather_ctas  = settings.gather_ctas;
        bounce_.resize(65536);
        return CudaStager::open(relay.arena_handle.data(), lane_index_,
                                settings.geometry, &block_.producer(), options,
                                &stager_);
    }
#endif
    ucs_debug("pxn: relay pid %u has an arena this process cannot use (kind %u)",
              relay.identity.pid, relay.arena_kind);
    return UCS_ERR_UNSUPPORTED;
}

/* Faults in this lane's slots once, on the control path: a first touch of a
 * tmpfs page in the data path costs ~25 ms per 8 MiB slot on a VM, which
 * would stall the first round of the ring. The lane is ours and idle. */
void SendLane::populate_slots()
{
    uint8_t *first     = arena_.data() + slot_offset(lane_index_, 0,
                                                     geometry_.slots,
                                                     geometry_.slot_size);
    const size_t bytes = size_t(geometry_.slots) * geometry_.slot_size;
    if (madvise(first, bytes, MADV_POPULATE_WRITE) == 0) {
        return;
    }
    const size_t page = sysconf(_SC_PAGESIZE);
    for (size_t offset = 0; offset < bytes; offset += page) {
        volatile uint8_t *p = first + offset;
        *p = *p; /* older kernels: touch every page */
    }
}

bool SendLane::usable() const
{
    return !failed_ && mapping_->is_healthy();
}

ucs_status_t SendLane::wait_route_reply(uint32_t route, uint64_t gen)
{
    const abi::RouteReply &reply = block_.route(route).reply;
    if (!wait_until(registry_->heartbeat_timeout_ns(), [&] {
            return (abi::load_acquire(reply.reply_gen) == gen) ||
                   !mapping_->is_healthy();
        }) || (abi::load_acquire(reply.reply_gen) != gen)) {
        ucs_debug("pxn: relay pid %u gave no route reply",
                  relay().identity.pid);
        return UCS_ERR_UNREACHABLE;
    }
    return static_cast<ucs_status_t>(reply.status);
}

static bool find_free_route(const bool *used, uint32_t *route)
{
    for (uint32_t i = 0; i < abi::kMaxRoutes; ++i) {
        if (!used[i]) {
            *route = i;
            return true;
        }
    }
    return false;
}

ucs_status_t SendLane::route_to_iface(const Bytes &dev_addr,
                                      const Bytes &iface_addr, uint32_t *route)
{
    if ((dev_addr.size() > abi::kDevAddrMax) ||
        (iface_addr.size() > abi::kIfaceAddrMax)) {
        return UCS_ERR_INVALID_PARAM;
    }
    uint32_t index;
    if (!usable() || !find_free_route(route_used_, &index)) {
        return usable() ? UCS_ERR_NO_RESOURCE : UCS_ERR_UNREACHABLE;
    }
    abi::RouteRequest &req = block_.route(index).request;
    req.flags          = abi::kRouteConnectToIface;
    req.dev_addr_len   = static_cast<uint16_t>(dev_addr.size());
    req.iface_addr_len = static_cast<uint16_t>(iface_addr.size());
    req.ep_addr_len    = 0;
    memcpy(req.dev_addr, dev_addr.data(), dev_addr.size());
    memcpy(req.iface_addr, iface_addr.data(), iface_addr.size());
    const uint64_t gen = ++route_gen_[index];
    abi::store_release(req.request_gen, gen);
    wakeup_.notify();

    ucs_status_t status = wait_route_reply(index, gen);
    if (status == UCS_OK) {
        route_used_[index] = true;
        *route             = index;
    }
    return status;
}

ucs_status_t SendLane::route_ep_create(uint32_t *route, Bytes *relay_dev_addr,
                                       Bytes *relay_ep_addr)
{
    uint32_t index;
    if (!usable() || !find_free_route(route_used_, &index)) {
        return usable() ? UCS_ERR_NO_RESOURCE : UCS_ERR_UNREACHABLE;
    }
    abi::RouteRequest &req = block_.route(index).request;
    req.flags          = abi::kRouteConnectToEp;
    req.dev_addr_len   = 0;
    req.iface_addr_len = 0;
    req.ep_addr_len    = 0;
    const uint64_t gen = ++route_gen_[index];
    abi::store_release(req.request_gen, gen);
    wakeup_.notify();

    ucs_status_t status = wait_route_reply(index, gen);
    if (status != UCS_OK) {
        return status;
    }
    /* u8 device address length | device address | ep address */
    const abi::RouteReply &reply = block_.route(index).reply;
    const size_t length          = reply.ep_addr_len;
    if ((length < 2) || (length > abi::kEpAddrMax) ||
        (size_t(reply.ep_addr[0]) + 2 > length)) {
        return UCS_ERR_INVALID_ADDR;
    }
    const uint8_t *dev = reply.ep_addr + 1;
    relay_dev_addr->assign(dev, dev + reply.ep_addr[0]);
    relay_ep_addr->assign(dev + reply.ep_addr[0], reply.ep_addr + length);
    route_used_[index] = true;
    *route             = index;
    return UCS_OK;
}

ucs_status_t SendLane::route_ep_connect(uint32_t route, const Bytes &dev_addr,
                                        const Bytes &ep_addr)
{
    if ((route >= abi::kMaxRoutes) || !route_used_[route] ||
        (dev_addr.size() > abi::kDevAddrMax) || ep_addr.empty() ||
        (ep_addr.size() > abi::kEpAddrMax)) {
        return UCS_ERR_INVALID_PARAM;
    }
    abi::RouteRequest &req = block_.route(route).request;
    req.flags        = abi::kRouteConnectToEp;
    req.dev_addr_len = static_cast<uint16_t>(dev_addr.size());
    req.ep_addr_len  = static_cast<uint16_t>(ep_addr.size());
    memcpy(req.dev_addr, dev_addr.data(), dev_addr.size());
    memcpy(req.ep_addr, ep_addr.data(), ep_addr.size());
    const uint64_t gen = ++route_gen_[route];
    abi::store_release(req.request_gen, gen);
    wakeup_.notify();
    return wait_route_reply(route, gen);
}

void SendLane::route_release(uint32_t route)
{
    if ((route >= abi::kMaxRoutes) || !route_used_[route]) {
        return;
    }
    route_used_[route] = false;
    if (failed_) {
        return;
    }
    /* flags 0: the relay destroys its ep once no piece uses it. */
    abi::RouteRequest &req = block_.route(route).request;
    req.flags = 0;
    abi::store_release(req.request_gen, ++route_gen_[route]);
    wakeup_.notify();
}

ucs_status_t SendLane::rkey_index(const uint8_t *packed, uint16_t length,
                                  uint32_t *index)
{
    if (length > abi::kRkeyMax) {
        return UCS_ERR_INVALID_PARAM;
    }
    int free = -1;
    for (uint32_t i = 0; i < abi::kMaxRkeys; ++i) {
        const RkeySlot &slot = rkeys_[i];
        if ((slot.gen != 0) && (slot.length == length) &&
            (memcmp(slot.packed, packed, length) == 0)) {
            *index = i;
            return UCS_OK;
        }
        if ((slot.users == 0) && ((free < 0) || (slot.gen == 0))) {
            free = static_cast<int>(i);
        }
    }
    if (free < 0) {
        return UCS_ERR_NO_RESOURCE;
    }
    RkeySlot &slot = rkeys_[free];
    slot.length    = length;
    memcpy(slot.packed, packed, length);
    slot.gen = ++rkey_gen_;
    abi::RkeyEntry &entry = block_.rkey(free);
    memcpy(entry.packed, packed, length);
    abi::store_relaxed(entry.length, uint32_t(length));
    abi::store_release(entry.gen, slot.gen);
    *index = static_cast<uint32_t>(free);
    return UCS_OK;
}

SendRequest *SendLane::alloc_request()
{
    if (pool_.empty()) {
        try {
            requests_.emplace_back(new SendRequest());
        } catch (const std::bad_alloc &) {
            return nullptr;
        }
        return requests_.back().get();
    }
    SendRequest *req = pool_.back();
    pool_.pop_back();
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
    SendRequest *req = alloc_request();
    if (req == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    *req             = SendRequest{};
    req->comp        = comp;
    req->owner       = owner;
    req->op          = op;
    req->route       = route;
    req->rkey_index  = rkey;
    req->remote_addr = remote_addr;
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
    SendRequest *req = alloc_request();
    if (req == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    *req             = SendRequest{};
    req->comp        = comp;
    req->owner       = owner;
    req->op          = abi::kOpGet;
    req->route       = route;
    req->rkey_index  = rkey;
    req->remote_addr = remote_addr;
    req->staged      = true;
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
        invoke_completion(req->comp, req->status);
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

ucs_status_t SendLane::reestablish()
{
    LaneClaim claim;
    /* The lane is drained; its routes and rkeys stay (lane_claim.h). */
    ucs_status_t status = mapping_->renew_lane(self_, lane_index_, &claim, 0,
                                               true);
    if (status != UCS_OK) {
        return status;
    }
    abi::LaneConsumer &consumer = block_.consumer();
    if (!wait_until(registry_->heartbeat_timeout_ns(), [&] {
            wakeup_.notify();
            return abi::load_acquire(consumer.lane_epoch) == claim.lane_epoch;
        })) {
        return UCS_ERR_TIMED_OUT;
    }
    ucs_debug("pxn: lane %u at relay pid %u re-established at seq %lu "
              "(lane epoch %lx)", lane_index_, relay().identity.pid,
              claim.initial_seq, claim.lane_epoch);
    published_ = claim.initial_seq;
    return window_.reestablish(claim.lane_epoch, claim.initial_seq);
}

void SendLane::check_health()
{
    const uint64_t now = monotonic_ns();
    if (now < next_health_ns_) {
        return;
    }
    next_health_ns_ = now + kHealthPeriodNs;
    if (!failed_ && !mapping_->is_healthy()) {
        ucs_warn("pxn: relay pid %u (rail %s) is no longer healthy "
                 "(heartbeat age %.3f s): failing its pieces",
                 relay().identity.pid, relay().rail.c_str(),
                 mapping_->heartbeat_age_ns() / 1e9);
        fail_all(UCS_ERR_ENDPOINT_TIMEOUT);
    }
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
