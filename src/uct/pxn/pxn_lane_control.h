/*
 * The control side of one sender lane: claiming a lane at a relay, waiting
 * for the relay to acknowledge it, renewing it at a sequence wrap, the
 * route mailboxes, the remote key table and the relay's health. The data
 * path (pxn_send_lane.h) runs only while state() is kReady.
 *
 * Nothing here waits. progress() advances a state machine:
 *
 *   kClaiming --claim (registry lock tried, never waited for)--> kAcking
 *   kAcking   --relay wrote consumer.lane_epoch == lane epoch--> kReady
 *   kReady    --renew() (seq wrap, lane drained)--> kRenewing --ack--> kReady
 *   any       --relay unhealthy or dead, no ack within the heartbeat
 *               timeout, fail()--> kFailed (final; the Sender opens a new
 *               lane for later endpoints)
 *
 * Routes (abi.h RouteRequest/RouteReply, encoded by route_codec.h): a
 * request is queued, posted to a free mailbox once the lane is ready, and
 * its answer is handed to the RouteClient that asked, from progress(). A
 * client that goes away cancels; a route granted to a cancelled request is
 * released again. When the lane fails every waiting client is answered
 * with the failure. In the ep-to-ep model the lane keeps a stock of spare
 * unconnected relay eps (kRouteCreateEp) so that an endpoint can pack its
 * address without waiting for the relay (take_spare()).
 *
 * Remote keys: rkey_index() finds or writes a packed inner key in the
 * lane's table; entries in use (rkey_hold) are never rewritten. Every
 * write of an entry takes a generation unique in the process, so that
 * (lane, index, generation) names one key for as long as rkey_current()
 * says so: callers cache it instead of searching the table.
 *
 * Threading: the sender's thread only (one UCT worker).
 */
#ifndef PXN_UCT_PXN_LANE_CONTROL_H_
#define PXN_UCT_PXN_LANE_CONTROL_H_

#include <ucs/pxn/abi.h>
#include <ucs/pxn/control_file.h>
#include <ucs/pxn/identity.h>
#include <ucs/pxn/lane_claim.h>
#include <ucs/pxn/peer_mapping.h>
#include <ucs/pxn/registry.h>
#include <ucs/pxn/route_codec.h>
#include <ucs/pxn/settings.h>
#include <ucs/pxn/wakeup.h>

#include <deque>
#include <functional>
#include <memory>
#include <vector>

namespace pxn {
namespace uct {

/* Receives the answer to a route request (an Ep). */
class RouteClient {
public:
    virtual void route_answered(const RouteAnswer &answer) = 0;

protected:
    ~RouteClient() = default;
};

class LaneControl {
public:
    enum class State { kClaiming, kAcking, kReady, kRenewing, kFailed };
    /* What progress() changed. */
    enum class Event { kNone, kClaimed, kReady, kFailed };

    LaneControl(Registry *registry, std::unique_ptr<PeerMapping> mapping,
                const ProcessIdentity &self, const Settings &settings);
    ~LaneControl();
    LaneControl(const LaneControl&) = delete;
    LaneControl &operator=(const LaneControl&) = delete;

    State        state() const { return state_; }
    bool         ready() const { return state_ == State::kReady; }
    bool         failed() const { return state_ == State::kFailed; }
    ucs_status_t failure() const { return failure_; }
    Event        progress();
    /* Fails the lane (final) with `status`: waiting route clients are
     * answered, the lane is given back. */
    void         fail(ucs_status_t status);
    /* Starts a renewal under a new lane epoch that keeps routes and rkeys
     * (the seq wrap). Precondition: ready(), everything reaped. */
    void         renew();
    /* Runs right before the lane is given back (failure or destruction):
     * whatever still maps its slots lets go of them first. */
    void         on_release(std::function<void()> hook)
    {
        before_release_ = std::move(hook);
    }

    const PeerInfo  &relay() const { return mapping_->info(); }
    PeerMapping     &mapping() const { return *mapping_; }
    const LaneClaim &claim() const { return claim_; }
    uint32_t         index() const { return claim_.index; }
    const LaneBlock &block() const { return block_; }
    void             notify() { wakeup_.notify(); }

    /* Healthy relay (READY, fresh heartbeat) at time `now`
     * (monotonic_ns()). No syscall. */
    bool relay_healthy(uint64_t now) const { return mapping_->is_healthy(now); }
    /* false once the relay is known to have exited: reads its /proc entry
     * (pid and start time), and fails the lane when it is gone. Without
     * `force`, only when neither such a check nor a completion (relay_seen)
     * happened in the last 20 ms: a relay that completes pieces is alive. */
    bool check_relay_alive(uint64_t now, bool force = false);
    /* The relay completed a piece at `now`. */
    void relay_seen(uint64_t now) { next_liveness_ns_ = now + kLivenessPeriodNs; }

    /* --- routes ---------------------------------------------------------- */
    void request_route(const RouteMessage &message, RouteClient *client);
    void cancel(RouteClient *client);
    void release_route(uint32_t route);
    /* Keep `count` spare unconnected relay eps (ep-to-ep model). */
    void want_spares(unsigned count);
    /* A spare, if one is in stock: its route id and relay addresses. */
    bool take_spare(RouteAnswer *spare);

    /* --- remote keys ----------------------------------------------------- */
    /* UCS_ERR_NO_RESOURCE: every entry is in use. *gen: the entry's
     * generation (optional). A linear search: cache the result. */
    ucs_status_t rkey_index(const uint8_t *packed, uint16_t length,
                            uint32_t *index, uint64_t *gen = nullptr);
    /* Entry `index` still holds the key it held at generation `gen`. */
    bool rkey_current(uint32_t index, uint64_t gen) const
    {
        return (index < abi::kMaxRkeys) && (gen != 0) &&
               (rkeys_[index].gen == gen);
    }
    void rkey_hold(uint32_t index) { ++rkeys_[index].users; }
    void rkey_drop(uint32_t index) { --rkeys_[index].users; }
    const uint8_t *rkey_packed(uint32_t index) const { return rkeys_[index].packed; }
    uint16_t rkey_length(uint32_t index) const { return rkeys_[index].length; }

private:
    static constexpr uint64_t kLivenessPeriodNs = 20000000; /* 20 ms */

    struct Pending {
        RouteMessage message;
        RouteClient *client; /* nullptr: a release, or a spare request */
        bool         spare;
    };
    struct Mailbox {
        bool         busy   = false;
        uint64_t     gen    = 0;
        Pending      request;
    };
    struct RkeySlot {
        uint64_t gen    = 0;
        uint32_t users  = 0; /* published or queued pieces using it */
        uint16_t length = 0;
        uint8_t  packed[abi::kRkeyMax];
    };

    Event    try_claim();
    Event    check_ack();
    unsigned serve_mailboxes();
    void     answer(const Pending &request, const RouteAnswer &answer);

    Registry                    *registry_;
    std::unique_ptr<PeerMapping> mapping_;
    ProcessIdentity              self_;
    const Settings              *settings_;
    State                        state_   = State::kClaiming;
    ucs_status_t                 failure_ = UCS_OK;
    LaneClaim                    claim_;
    bool                         held_    = false;
    std::function<void()>        before_release_;
    LaneBlock                    block_;
    SenderWakeup                 wakeup_;
    uint64_t                     deadline_ns_      = 0; /* claim or ack */
    uint64_t                     next_notify_ns_   = 0;
    uint64_t                     next_liveness_ns_ = 0;

    std::deque<Pending>          queued_;
    Mailbox                      mailboxes_[abi::kRouteMailboxes];
    unsigned                     busy_ = 0;
    std::vector<RouteAnswer>     spares_;
    unsigned                     spares_wanted_    = 0;
    unsigned                     spares_requested_ = 0;

    RkeySlot                     rkeys_[abi::kMaxRkeys];
};

} // namespace uct
} // namespace pxn

#endif
