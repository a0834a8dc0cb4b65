/*
 * In-process fixture of the transport tests: a relay (RelayService) and
 * senders (SendLane) of one node in this one process, over FakeNet, with
 * the registry in a private directory. Nothing runs in the background: the
 * test drives relay and senders round by round (drive()), so every
 * interleaving is the test's choice and a call that waited for the other
 * side would never return.
 */
#ifndef PXN_TEST_TRANSPORT_LANE_FIXTURE_H_
#define PXN_TEST_TRANSPORT_LANE_FIXTURE_H_

#include "fake_net.h"

#include "../common/test_helpers.h"

#include <uct/pxn/pxn_relay_service.h>
#include <uct/pxn/pxn_send_lane.h>

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

namespace pxn_test {

/* Records what a SendLane reports to its endpoint. */
class TestOwner : public pxn::uct::SendOwner {
public:
    void op_done(ucs_status_t status) override { done.push_back(status); }
    bool fall_back(const pxn::uct::SendRequest &, const uint8_t *,
                   uint16_t) override
    {
        ++fallbacks;
        return false;
    }

    std::vector<ucs_status_t> done;
    unsigned                  fallbacks = 0;
};

/* Records the answer to a route request. */
class TestClient : public pxn::uct::RouteClient {
public:
    void route_answered(const pxn::RouteAnswer &a) override
    {
        answered = true;
        answer   = a;
    }

    bool              answered = false;
    pxn::RouteAnswer  answer;
};

/* A uct_completion_t that counts its calls. */
struct Completion {
    Completion() { comp = {on_done, 1, UCS_OK}; }
    static void on_done(uct_completion_t *c)
    {
        ++reinterpret_cast<Completion*>(c)->calls;
    }
    uct_completion_t comp; /* first */
    unsigned         calls = 0;
};

class LaneFixture : public ::testing::Test {
protected:
    void SetUp() override;
    void TearDown() override;

    /* Starts the relay on net_ (settings_ as the test left them). */
    void start_relay();
    /* A sender lane into the relay, as a sender of its own identity. */
    std::unique_ptr<pxn::uct::SendLane> open_lane();
    /* Rounds of relay + net + lanes until done() or max_rounds. */
    bool drive(const std::function<bool()> &done, unsigned max_rounds = 100000);
    /* One round. */
    void round();
    /* Opens `lane` (claim, ack) by driving. */
    bool make_ready(pxn::uct::SendLane &lane);
    /* A route to fake target `index` through `lane`, driven to its answer. */
    pxn::RouteAnswer route_to(pxn::uct::SendLane &lane, uint64_t index);

    const pxn::abi::RelayCounters &relay_counters() const
    {
        return relay_->counters().relay;
    }

    pxn::Settings                       settings_;
    std::unique_ptr<TempDir>            dir_;
    std::unique_ptr<pxn::Registry>      registry_;
    std::shared_ptr<FakeNet>            net_;
    std::unique_ptr<pxn::uct::RelayService> relay_;
    std::function<bool(const pxn::Bytes&, const pxn::Bytes&)> is_local_;
    std::vector<pxn::uct::SendLane*>    lanes_; /* driven by round() */
    pxn::abi::SenderCounters            sender_counters_{};
};

} // namespace pxn_test

#endif
