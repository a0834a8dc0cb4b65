#include "pxn_lane_control.h"

#include <ucs/debug/log_def.h>

#include <atomic>
#include <cstring>

namespace pxn {
namespace uct {

namespace {

constexpr uint64_t kNotifyPeriodNs   = 1000000;  /* while waiting for an ack */

/* Generations of rkey entries, unique in the process: a cached (lane,
 * index, generation) can never match an entry written for another key,
 * even in a lane allocated where a released one was. */
std::atomic<uint64_t> g_rkey_gen{0};

} // namespace

LaneControl::LaneControl(Registry *registry, std::unique_ptr<PeerMapping> mapping,
                         const ProcessIdentity &self, const Settings &settings) :
    registry_(registry), mapping_(std::move(mapping)), self_(self),
    settings_(&settings)
{
    deadline_ns_ = monotonic_ns() + uint64_t(kLockTimeoutSec * 1e9);
}

LaneControl::~LaneControl()
{
    if (held_) {
        if (before_release_) {
            before_release_();
        }
        mapping_->release_lane(self_, claim_.index);
    }
}

LaneControl::Event LaneControl::progress()
{
    switch (state_) {
    case State::kClaiming:
        return try_claim();
    case State::kAcking:
    case State::kRenewing:
        return check_ack();
    case State::kReady:
        serve_mailboxes();
        return Event::kNone;
    case State::kFailed:
        return Event::kNone;
    }
    return Event::kNone;
}

LaneControl::Event LaneControl::try_claim()
{
    if (!mapping_->is_healthy()) {
        fail(UCS_ERR_UNREACHABLE);
        return Event::kFailed;
    }
    ucs_status_t status = mapping_->claim_lane(self_, &claim_,
                                               settings_->initial_seq,
                                               Registry::LockWait::kTry);
    if ((status == UCS_OK) && claim_.resumed) {
        /* A previous lane of ours may have left pieces behind: start a new
         * incarnation rather than guess its counters. */
        status = mapping_->renew_lane(self_, claim_.index, &claim_,
                                      settings_->initial_seq, false,
                                      Registry::LockWait::kTry);
        held_ = true;
    }
    if (status == UCS_ERR_BUSY) {
        if (monotonic_ns() > deadline_ns_) {
            ucs_warn("pxn: the registry lock stayed busy for %.0f s: no lane at "
                     "relay pid %u", kLockTimeoutSec, relay().identity.pid);
            fail(UCS_ERR_TIMED_OUT);
            return Event::kFailed;
        }
        return Event::kNone; /* another process or thread has it: later */
    }
    if (status == UCS_OK) {
        held_  = true;
        status = mapping_->open_wakeup(&wakeup_);
    }
    if (status != UCS_OK) {
        ucs_debug("pxn: no lane at relay pid %u (rail %s): %s",
                  relay().identity.pid, relay().rail.c_str(),
                  ucs_status_string(status));
        fail(status);
        return Event::kFailed;
    }
    block_       = mapping_->lane(claim_.index);
    state_       = State::kAcking;
    deadline_ns_ = monotonic_ns() + registry_->heartbeat_timeout_ns();
    next_notify_ns_ = 0;
    return Event::kClaimed;
}

/* The relay acknowledges a new lane incarnation once it dropped every state
 * of the previous one (lane_claim.h). */
LaneControl::Event LaneControl::check_ack()
{
    const uint64_t now = monotonic_ns();
    if (abi::load_acquire(block_.consumer().lane_epoch) == claim_.lane_epoch) {
        const int32_t raw = abi::load_relaxed(block_.consumer().ack_status);
        if (raw != UCS_OK) {
            const ucs_status_t status = ((raw < 0) && (raw > UCS_ERR_LAST)) ?
                                        static_cast<ucs_status_t>(raw) :
                                        UCS_ERR_IO_ERROR;
            ucs_warn("pxn: relay pid %u (rail %s) cannot take lane %u: %s",
                     relay().identity.pid, relay().rail.c_str(), claim_.index,
                     ucs_status_string(status));
            fail(status);
            return Event::kFailed;
        }
        if (state_ == State::kAcking) {
            ucs_debug("pxn: claimed lane %u at relay pid %u (rail %s, lane "
                      "epoch %lx)", claim_.index, relay().identity.pid,
                      relay().rail.c_str(), claim_.lane_epoch);
        }
        state_ = State::kReady;
        serve_mailboxes();
        return Event::kReady;
    }
    if ((now > deadline_ns_) || !mapping_->is_healthy()) {
        ucs_warn("pxn: relay pid %u (rail %s) did not acknowledge lane %u",
                 relay().identity.pid, relay().rail.c_str(), claim_.index);
        fail(UCS_ERR_TIMED_OUT);
        return Event::kFailed;
    }
    if (now >= next_notify_ns_) {
        next_notify_ns_ = now + kNotifyPeriodNs;
        wakeup_.notify();
    }
    return Event::kNone;
}

void LaneControl::renew()
{
    LaneClaim claim;
    /* The lane is drained; its routes and rkeys stay (lane_claim.h). A busy
     * registry lock is retried by the caller's next attempt. */
    const ucs_status_t status = mapping_->renew_lane(self_, claim_.index, &claim,
                                                     0, true,
                                                     Registry::LockWait::kTry);
    if (status == UCS_ERR_BUSY) {
        return;
    }
    if (status != UCS_OK) {
        fail(status);
        return;
    }
    claim_          = claim;
    state_          = State::kRenewing;
    deadline_ns_    = monotonic_ns() + registry_->heartbeat_timeout_ns();
    next_notify_ns_ = 0;
}

void LaneControl::fail(ucs_status_t status)
{
    if (state_ == State::kFailed) {
        return;
    }
    state_   = State::kFailed;
    failure_ = status;
    /* The relay must not wait for doorbells that will never come; a busy
     * registry lock leaves the release to the destructor. */
    if (held_ && before_release_) {
        before_release_();
    }
    if (held_ && (mapping_->release_lane(self_, claim_.index,
                                         Registry::LockWait::kTry) == UCS_OK)) {
        held_ = false;
    }
    std::vector<Pending> waiting;
    for (Mailbox &mailbox : mailboxes_) {
        if (mailbox.busy) {
            waiting.push_back(mailbox.request);
            mailbox.busy = false;
        }
    }
    busy_ = 0;
    waiting.insert(waiting.end(), queued_.begin(), queued_.end());
    queued_.clear();
    spares_.clear();
    RouteAnswer failed;
    failed.status = status;
    for (const Pending &p : waiting) {
        if (p.client != nullptr) {
            p.client->route_answered(failed);
        }
    }
}

bool LaneControl::check_relay_alive(uint64_t now, bool force)
{
    if (failed() || (!force && (now < next_liveness_ns_))) {
        return !failed();
    }
    next_liveness_ns_ = now + kLivenessPeriodNs;
    if (is_alive(relay().identity.pid, relay().identity.start_time)) {
        return true;
    }
    ucs_warn("pxn: relay pid %u (rail %s) died: failing its pieces",
             relay().identity.pid, relay().rail.c_str());
    fail(UCS_ERR_ENDPOINT_TIMEOUT);
    return false;
}

void LaneControl::request_route(const RouteMessage &message, RouteClient *client)
{
    if (failed()) {
        RouteAnswer answer;
        answer.status = failure_;
        if (client != nullptr) {
            client->route_answered(answer);
        }
        return;
    }
    queued_.push_back({message, client, false});
    if (ready()) {
        serve_mailboxes();
    }
}

void LaneControl::cancel(RouteClient *client)
{
    for (Pending &p : queued_) {
        if (p.client == client) {
            p.client = nullptr; /* posted anyway: a grant is released */
        }
    }
    for (Mailbox &mailbox : mailboxes_) {
        if (mailbox.busy && (mailbox.request.client == client)) {
            mailbox.request.client = nullptr;
        }
    }
}

void LaneControl::release_route(uint32_t route)
{
    if (failed()) {
        return; /* the relay drops the lane's routes with the lane */
    }
    RouteMessage release;
    release.kind  = abi::kRouteRelease;
    release.route = route;
    request_route(release, nullptr);
}

void LaneControl::want_spares(unsigned count)
{
    spares_wanted_ = count;
    while (!failed() &&
           (spares_.size() + spares_requested_ < spares_wanted_)) {
        RouteMessage create;
        create.kind = abi::kRouteCreateEp;
        queued_.push_back({create, nullptr, true});
        ++spares_requested_;
    }
    if (ready()) {
        serve_mailboxes();
    }
}

bool LaneControl::take_spare(RouteAnswer *spare)
{
    if (spares_.empty()) {
        return false;
    }
    *spare = std::move(spares_.back());
    spares_.pop_back();
    want_spares(spares_wanted_); /* replenish */
    return true;
}

/* Posts queued requests into free mailboxes and collects replies. */
unsigned LaneControl::serve_mailboxes()
{
    unsigned work = 0;
    for (uint32_t i = 0; (busy_ > 0) && (i < abi::kRouteMailboxes); ++i) {
        Mailbox &mailbox = mailboxes_[i];
        RouteAnswer reply;
        if (!mailbox.busy ||
            !read_route_reply(&block_.route(i).reply, mailbox.gen, &reply)) {
            continue;
        }
        mailbox.busy = false;
        --busy_;
        ++work;
        const Pending request = mailbox.request;
        answer(request, reply);
        if (failed()) {
            return work; /* answer() may fail the lane */
        }
    }
    for (uint32_t i = 0; !queued_.empty() && (i < abi::kRouteMailboxes); ++i) {
        Mailbox &mailbox = mailboxes_[i];
        if (mailbox.busy) {
            continue;
        }
        mailbox.request = queued_.front();
        queued_.pop_front();
        if (post_route_request(&block_.route(i).request, mailbox.gen + 1,
                               mailbox.request.message) != UCS_OK) {
            RouteAnswer bad;
            bad.status = UCS_ERR_INVALID_PARAM;
            answer(mailbox.request, bad);
            continue;
        }
        ++mailbox.gen;
        mailbox.busy = true;
        ++busy_;
        ++work;
    }
    if (work != 0) {
        wakeup_.notify();
    }
    return work;
}

void LaneControl::answer(const Pending &request, const RouteAnswer &reply)
{
    const bool grants = (reply.status == UCS_OK) &&
                        (request.message.kind != abi::kRouteRelease) &&
                        (request.message.kind != abi::kRouteConnectEp);
    if (request.spare) {
        --spares_requested_;
        if (grants) {
            spares_.push_back(reply);
        }
        return;
    }
    if (request.client != nullptr) {
        request.client->route_answered(reply);
    } else if (grants) {
        release_route(reply.route); /* its endpoint went away meanwhile */
    }
}

ucs_status_t LaneControl::rkey_index(const uint8_t *packed, uint16_t length,
                                     uint32_t *index, uint64_t *gen)
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
            if (gen != nullptr) {
                *gen = slot.gen;
            }
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
    slot.gen = g_rkey_gen.fetch_add(1, std::memory_order_relaxed) + 1;
    abi::RkeyEntry &entry = block_.rkey(free);
    for (uint16_t b = 0; b < length; ++b) {
        abi::store_relaxed(entry.packed[b], packed[b]);
    }
    abi::store_relaxed(entry.length, uint32_t(length));
    abi::store_release(entry.gen, slot.gen);
    *index = static_cast<uint32_t>(free);
    if (gen != nullptr) {
        *gen = slot.gen;
    }
    return UCS_OK;
}

} // namespace uct
} // namespace pxn
