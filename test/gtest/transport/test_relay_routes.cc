/*
 * The relay's route table as senders see it through their lanes: routes
 * belong to the relay (keyed by target, inner eps shared by every sender
 * reaching that target), their capacity is UCX_PXN_ROUTES, and nothing a
 * sender writes into its mailboxes can make the relay misbehave.
 */
#include "lane_fixture.h"

#include <ucs/pxn/am_frame.h>
#include <ucs/pxn/route_codec.h>
#include <uct/pxn/pxn_am_port.h>
#include <uct/pxn/pxn_relay_routes.h>

#include <cstring>

namespace pxn_test {

using pxn::uct::SendLane;

class RelayRoutes : public LaneFixture {
protected:
    void SetUp() override
    {
        LaneFixture::SetUp();
        start_relay();
        lane_ = open_lane();
        ASSERT_TRUE(make_ready(*lane_));
    }

    void TearDown() override
    {
        lane_.reset();
        LaneFixture::TearDown();
    }

    uint64_t routes_active() const
    {
        return pxn::abi::load_relaxed(relay_counters().routes_active);
    }

    std::unique_ptr<SendLane> lane_;
};

TEST_F(RelayRoutes, OneLaneReachesMoreThan32TargetsOfOneRail)
{
    std::vector<std::vector<uint8_t>> targets(40, std::vector<uint8_t>(64, 0));
    std::vector<uint32_t> routes;
    for (uint64_t t = 0; t < targets.size(); ++t) {
        const pxn::RouteAnswer a = route_to(*lane_, t);
        ASSERT_EQ(UCS_OK, a.status) << "target " << t;
        EXPECT_EQ(routes.end(), std::find(routes.begin(), routes.end(), a.route));
        routes.push_back(a.route);
    }
    EXPECT_EQ(40u, routes_active());
    EXPECT_EQ(40u, net_->stats().eps_created);

    TestOwner owner;
    std::vector<Completion> comps(targets.size());
    const uint8_t src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (size_t t = 0; t < targets.size(); ++t) {
        const pxn::Bytes key = net_->register_remote(targets[t].data(), 64);
        uint32_t rkey;
        ASSERT_EQ(UCS_OK, lane_->control().rkey_index(key.data(), uint16_t(key.size()),
                                                      &rkey));
        const uct_iov_t iov = {const_cast<uint8_t*>(src), sizeof(src), nullptr, 0, 1};
        ucs_status_t status;
        ASSERT_TRUE(drive([&] {
            status = lane_->post(&owner, pxn::abi::kOpPut, routes[t], rkey,
                                 reinterpret_cast<uint64_t>(targets[t].data()) + t,
                                 &iov, 1, &comps[t].comp);
            return status != UCS_ERR_NO_RESOURCE;
        }));
        ASSERT_EQ(UCS_INPROGRESS, status);
    }
    ASSERT_TRUE(drive([&] { return owner.done.size() == targets.size(); }));
    for (size_t t = 0; t < targets.size(); ++t) {
        EXPECT_EQ(UCS_OK, comps[t].comp.status) << t;
        EXPECT_EQ(0, memcmp(targets[t].data() + t, src, sizeof(src))) << t;
    }
}

TEST_F(RelayRoutes, SendersReachingOneTargetShareOneInnerEp)
{
    auto other = open_lane();
    ASSERT_TRUE(make_ready(*other));
    const pxn::RouteAnswer a = route_to(*lane_, 5);
    const pxn::RouteAnswer b = route_to(*other, 5);
    ASSERT_EQ(UCS_OK, a.status);
    ASSERT_EQ(UCS_OK, b.status);
    EXPECT_EQ(a.route, b.route);
    EXPECT_EQ(1u, net_->stats().eps_created);
    EXPECT_EQ(1u, routes_active());

    /* the ep lives until its last holder lets go */
    lane_->control().release_route(a.route);
    ASSERT_TRUE(drive([&] { return lane_->idle(); }, 1000));
    drive([] { return false; }, 100);
    EXPECT_EQ(0u, net_->stats().eps_destroyed);
    other->control().release_route(b.route);
    ASSERT_TRUE(drive([&] { return net_->stats().eps_destroyed == 1; }));
    EXPECT_EQ(0u, routes_active());
}

TEST_F(RelayRoutes, RouteWhoseInnerEpTheTransportDeclaresFailedGetsANewOne)
{
    const pxn::RouteAnswer a = route_to(*lane_, 5);
    ASSERT_EQ(UCS_OK, a.status);
    /* nothing in flight on it (an AM flow waiting for credit has nothing):
     * the ep goes at the relay's next round, the id with its holder */
    net_->fail_newest_ep(UCS_ERR_ENDPOINT_TIMEOUT);
    ASSERT_TRUE(drive([&] { return net_->stats().eps_destroyed == 1; }));
    EXPECT_EQ(1u, routes_active());
    const pxn::RouteAnswer b = route_to(*lane_, 5);
    ASSERT_EQ(UCS_OK, b.status);
    EXPECT_NE(a.route, b.route);
    EXPECT_EQ(2u, net_->stats().eps_created);
    lane_->control().release_route(a.route);
    ASSERT_TRUE(drive([&] { return routes_active() == 1; }));
}

TEST_F(RelayRoutes, FullRouteTableRefusesNewTargetsUntilOneIsReleased)
{
    lane_.reset();
    lanes_.clear();
    relay_.reset();
    registry_.reset();
    settings_.routes = 4;
    start_relay();
    lane_ = open_lane();
    ASSERT_TRUE(make_ready(*lane_));
    std::vector<uint32_t> routes;
    for (uint64_t t = 0; t < 4; ++t) {
        const pxn::RouteAnswer a = route_to(*lane_, t);
        ASSERT_EQ(UCS_OK, a.status);
        routes.push_back(a.route);
    }
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, route_to(*lane_, 4).status);
    EXPECT_EQ(1u, relay_counters().route_errors);
    /* an existing target still gets its route */
    EXPECT_EQ(routes[2], route_to(*lane_, 2).route);
    lane_->control().release_route(routes[0]);
    EXPECT_EQ(UCS_OK, route_to(*lane_, 4).status);
}

TEST_F(RelayRoutes, RouteToTheRelaysOwnProcessIsRefused)
{
    const pxn::Bytes own = FakeNet::target_iface(9);
    is_local_ = [&](const pxn::Bytes &, const pxn::Bytes &iface) {
        return iface == own;
    };
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, route_to(*lane_, 9).status);
    EXPECT_EQ(0u, net_->stats().eps_created);
    EXPECT_EQ(UCS_OK, route_to(*lane_, 10).status);
}

TEST_F(RelayRoutes, ReleasedRouteLivesUntilItsPiecesComplete)
{
    std::vector<uint8_t> target(4096, 0);
    const pxn::Bytes key = net_->register_remote(target.data(), target.size());
    const pxn::RouteAnswer a = route_to(*lane_, 1);
    ASSERT_EQ(UCS_OK, a.status);
    uint32_t rkey;
    ASSERT_EQ(UCS_OK, lane_->control().rkey_index(key.data(), uint16_t(key.size()),
                                                  &rkey));
    net_->hold(true);
    const uint8_t src[64] = {9};
    const uct_iov_t iov = {const_cast<uint8_t*>(src), sizeof(src), nullptr, 0, 1};
    TestOwner owner;
    Completion comp;
    ASSERT_EQ(UCS_INPROGRESS,
              lane_->post(&owner, pxn::abi::kOpPut, a.route, rkey,
                          reinterpret_cast<uint64_t>(target.data()), &iov, 1,
                          &comp.comp));
    ASSERT_TRUE(drive([&] { return net_->inflight() == 1; }));
    lane_->control().release_route(a.route);
    drive([] { return false; }, 1000);
    EXPECT_EQ(0u, net_->stats().eps_destroyed) << "ep destroyed under a piece";
    EXPECT_EQ(0u, comp.calls);
    net_->hold(false);
    ASSERT_TRUE(drive([&] { return comp.calls == 1; }));
    EXPECT_EQ(UCS_OK, comp.comp.status);
    ASSERT_TRUE(drive([&] { return net_->stats().eps_destroyed == 1; }));
}

TEST_F(RelayRoutes, GrantToACancelledRequestIsReleased)
{
    TestClient client;
    pxn::RouteMessage m;
    m.kind  = pxn::abi::kRouteToIface;
    m.dev   = net_->device_addr();
    m.iface = FakeNet::target_iface(3);
    lane_->control().request_route(m, &client);
    lane_->control().cancel(&client);
    ASSERT_TRUE(drive([&] { return net_->stats().eps_created == 1; }));
    ASSERT_TRUE(drive([&] { return net_->stats().eps_destroyed == 1; }));
    EXPECT_FALSE(client.answered);
    EXPECT_EQ(0u, routes_active());
}

TEST_F(RelayRoutes, MalformedRequestIsAnsweredWithAnErrorAndTheLaneGoesOn)
{
    /* a sender writing its mailbox by hand: unknown kind, oversized length */
    pxn::abi::RouteEntry &mailbox = lane_->control().block().route(15);
    mailbox.request.kind         = 99;
    mailbox.request.dev_addr_len = 60000;
    pxn::abi::store_release(mailbox.request.request_gen, uint64_t(1000));
    lane_->control().notify();
    pxn::RouteAnswer answer;
    ASSERT_TRUE(drive([&] {
        return pxn::read_route_reply(&mailbox.reply, 1000, &answer);
    }));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, answer.status);
    EXPECT_EQ(1u, relay_counters().route_errors);
    /* a hold it never had cannot be released */
    pxn::RouteMessage release;
    release.kind  = pxn::abi::kRouteRelease;
    release.route = 3;
    ASSERT_EQ(UCS_OK, pxn::post_route_request(&mailbox.request, 1001, release));
    ASSERT_TRUE(drive([&] {
        return pxn::read_route_reply(&mailbox.reply, 1001, &answer);
    }));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, answer.status);
    EXPECT_EQ(UCS_OK, route_to(*lane_, 1).status);
}

TEST_F(RelayRoutes, KeyInUseByAPieceInFlightIsNeverReleased)
{
    std::vector<uint8_t> target(4096, 0);
    const pxn::Bytes key = net_->register_remote(target.data(), target.size());
    const pxn::RouteAnswer a = route_to(*lane_, 1);
    uint32_t rkey;
    ASSERT_EQ(UCS_OK, lane_->control().rkey_index(key.data(), uint16_t(key.size()),
                                                  &rkey));
    net_->hold(true);
    const uint8_t src[64] = {7};
    const uct_iov_t iov = {const_cast<uint8_t*>(src), sizeof(src), nullptr, 0, 1};
    TestOwner owner;
    Completion first, second;
    ASSERT_EQ(UCS_INPROGRESS,
              lane_->post(&owner, pxn::abi::kOpPut, a.route, rkey,
                          reinterpret_cast<uint64_t>(target.data()), &iov, 1,
                          &first.comp));
    ASSERT_TRUE(drive([&] { return net_->inflight() == 1; }));
    EXPECT_EQ(1u, net_->stats().rkeys_unpacked);

    /* the entry is rewritten under the piece (a hostile or buggy sender):
     * the next descriptor that names it is refused, the old key stays */
    pxn::abi::RkeyEntry &entry = lane_->control().block().rkey(rkey);
    pxn::abi::store_release(entry.gen, pxn::abi::load_relaxed(entry.gen) + 100);
    ASSERT_EQ(UCS_INPROGRESS,
              lane_->post(&owner, pxn::abi::kOpPut, a.route, rkey,
                          reinterpret_cast<uint64_t>(target.data()) + 64, &iov, 1,
                          &second.comp));
    ASSERT_TRUE(drive([&] { return relay_counters().rejected == 1; }));
    EXPECT_EQ(0u, net_->stats().rkeys_released);
    net_->hold(false);
    /* completions are reaped in order */
    ASSERT_TRUE(drive([&] { return second.calls == 1; }));
    EXPECT_EQ(UCS_OK, first.comp.status);
    EXPECT_NE(UCS_OK, second.comp.status);
    EXPECT_EQ(0, target[64]);
}

/* The wired model's route table (Net::ConnectMode::kWired), alone: what it
 * sends to the target's port and what it makes of the answers. */
class RouteWiring : public ::testing::Test {
protected:
    static constexpr uint64_t kTimeoutNs = 1000000;

    RouteWiring() :
        net_(pxn::uct::Net::ConnectMode::kWired),
        table_(&net_, 4, [](const pxn::Bytes&, const pxn::Bytes&) { return false; },
               kTimeoutNs)
    {
    }

    pxn::RouteAnswer route_to(uint64_t target)
    {
        pxn::RouteMessage m;
        m.kind  = pxn::abi::kRouteToIface;
        m.dev   = FakeNet(pxn::uct::Net::ConnectMode::kWired, 100 + target)
                          .device_address();
        m.iface = FakeNet::target_iface(target);
        return table_.serve(m);
    }

    /* The last frame sent, read. */
    pxn::AmFrame last_frame()
    {
        pxn::AmFrame f;
        EXPECT_FALSE(net_.frames().empty());
        if (!net_.frames().empty()) {
            const pxn::Bytes &b = net_.frames().back();
            EXPECT_EQ(UCS_OK, pxn::read_am_frame(b.data(), b.size(), &f));
        }
        return f;
    }

    FakeNet                  net_;
    pxn::uct::RouteTable     table_;
};

TEST_F(RouteWiring, ARouteIsUsableAtOnceAndWiredOnlyByItsTargetsAnswer)
{
    const pxn::RouteAnswer a = route_to(1);
    ASSERT_EQ(UCS_OK, a.status);
    EXPECT_TRUE(table_.usable(a.route)) << "pieces wait, they do not fail";
    EXPECT_FALSE(table_.wired(a.route));
    EXPECT_TRUE(table_.wiring());
    /* two eps: the wiring one carries frames, the other waits for RMA */
    EXPECT_EQ(2u, net_.stats().eps_created);
    EXPECT_NE(table_.ep(a.route), table_.am_ep(a.route));
    EXPECT_FALSE(FakeNet::connected(table_.ep(a.route)));

    const pxn::AmFrame wire = last_frame();
    ASSERT_EQ(pxn::kAmWire, wire.header.kind);
    EXPECT_EQ(a.route + 1, wire.header.cookie);
    EXPECT_EQ(net_.device_address(), wire.relay_dev);
    EXPECT_EQ(net_.iface_address(), wire.relay_iface);
    EXPECT_EQ(8u, wire.ep.size());

    /* an answer for another generation of the id, or another id, is not
     * this route's */
    const pxn::Bytes target_ep(8, 0x42);
    table_.wired_answer(a.route, wire.header.source + 1, target_ep);
    table_.wired_answer(a.route + 1, wire.header.source, target_ep);
    EXPECT_FALSE(table_.wired(a.route));
    table_.wired_answer(a.route, wire.header.source, target_ep);
    EXPECT_TRUE(table_.wired(a.route));
    EXPECT_FALSE(table_.wiring());
    EXPECT_TRUE(FakeNet::connected(table_.ep(a.route)));

    /* a second request for the same target shares the route */
    const pxn::RouteAnswer b = route_to(1);
    ASSERT_EQ(UCS_OK, b.status);
    EXPECT_EQ(a.route, b.route);
    EXPECT_EQ(1u, net_.frames().size());
}

TEST_F(RouteWiring, ARouteThatEndsTellsTheTargetsPortAndDestroysBothEps)
{
    const pxn::RouteAnswer a = route_to(2);
    ASSERT_EQ(UCS_OK, a.status);
    const pxn::AmFrame wire = last_frame();
    table_.wired_answer(a.route, wire.header.source, pxn::Bytes(8, 1));
    table_.release(a.route);
    const pxn::AmFrame unwire = last_frame();
    EXPECT_EQ(pxn::kAmUnwire, unwire.header.kind);
    EXPECT_EQ(wire.header.source, unwire.header.source);
    EXPECT_EQ(wire.header.cookie, unwire.header.cookie);
    EXPECT_EQ(wire.relay_dev, unwire.relay_dev);
    EXPECT_EQ(wire.relay_iface, unwire.relay_iface);
    EXPECT_EQ(2u, net_.stats().eps_destroyed);
    EXPECT_EQ(0u, table_.active());
}

TEST_F(RouteWiring, AWireRequestThatCannotGoYetGoesInALaterRound)
{
    net_.fail_am_send(UCS_ERR_NO_RESOURCE);
    const pxn::RouteAnswer a = route_to(3);
    ASSERT_EQ(UCS_OK, a.status);
    EXPECT_TRUE(net_.frames().empty());
    EXPECT_FALSE(table_.progress_wiring(1000));
    net_.fail_am_send(UCS_OK);
    EXPECT_TRUE(table_.progress_wiring(2000));
    EXPECT_EQ(pxn::kAmWire, last_frame().header.kind);
    EXPECT_FALSE(table_.progress_wiring(3000)) << "sent once";
    EXPECT_EQ(1u, net_.frames().size());
}

TEST_F(RouteWiring, ARouteNotWiredInTimeFailsAndANewRequestGetsANewRoute)
{
    const pxn::RouteAnswer a = route_to(4);
    ASSERT_EQ(UCS_OK, a.status);
    const uint64_t gen = last_frame().header.source;
    EXPECT_FALSE(table_.progress_wiring(1000)); /* its clock starts */
    EXPECT_FALSE(table_.progress_wiring(1000 + kTimeoutNs));
    EXPECT_TRUE(table_.usable(a.route));
    EXPECT_TRUE(table_.progress_wiring(1001 + kTimeoutNs));
    EXPECT_FALSE(table_.usable(a.route));
    EXPECT_TRUE(table_.collect());
    EXPECT_EQ(2u, net_.stats().eps_destroyed);
    EXPECT_FALSE(table_.wiring());
    /* a late answer changes nothing */
    table_.wired_answer(a.route, gen, pxn::Bytes(8, 1));
    EXPECT_FALSE(table_.wired(a.route));
    const pxn::RouteAnswer b = route_to(4);
    ASSERT_EQ(UCS_OK, b.status);
    EXPECT_NE(a.route, b.route) << "the failed id is held by its lane";
}

/* The target's side of the wiring: a port (AmPort) over the fake net. */
class PortWiring : public ::testing::Test {
protected:
    explicit PortWiring(pxn::uct::Net::ConnectMode mode =
                                pxn::uct::Net::ConnectMode::kWired) :
        net_(mode, 7), port_(&net_)
    {
    }

    /* A relay's frame of `kind` for its route (id, gen), as RouteTable
     * writes it. */
    void from_relay(pxn::AmFrameKind kind, uint32_t id, uint64_t gen)
    {
        uint8_t frame[256];
        const size_t n = (kind == pxn::kAmWire) ?
                pxn::write_am_wire(frame, sizeof(frame), gen, id + 1, relay_dev_,
                                   relay_ep_, relay_iface_) :
                pxn::write_am_unwire(frame, sizeof(frame), gen, id + 1,
                                     relay_dev_, relay_iface_);
        ASSERT_NE(0u, n);
        port_.receive(frame, n);
    }

    unsigned pump()
    {
        return port_.pump([](uint64_t, uint64_t) {},
                          [this](uint32_t id, uint64_t gen, const pxn::Bytes &ep) {
                              answers_.push_back({id, gen, ep});
                          });
    }

    struct Answer {
        uint32_t   id;
        uint64_t   gen;
        pxn::Bytes ep;
    };

    const pxn::Bytes    relay_dev_   = pxn::Bytes(8, 0xd1);
    const pxn::Bytes    relay_ep_    = pxn::Bytes(8, 0xe1);
    const pxn::Bytes    relay_iface_ = pxn::Bytes(8, 0xf1);
    FakeNet             net_;
    pxn::uct::AmPort    port_;
    std::vector<Answer> answers_;
};

TEST_F(PortWiring, AWireRequestGetsAConnectedEpAndItsAddressBackOnce)
{
    from_relay(pxn::kAmWire, 3, 11);
    EXPECT_TRUE(port_.pending());
    EXPECT_NE(0u, pump());
    /* its ep, connected to the relay's, and one to the relay port for the
     * answer */
    EXPECT_EQ(2u, net_.stats().eps_created);
    ASSERT_EQ(1u, net_.frames().size());
    pxn::AmFrame answer;
    ASSERT_EQ(UCS_OK, pxn::read_am_frame(net_.frames()[0].data(),
                                         net_.frames()[0].size(), &answer));
    EXPECT_EQ(pxn::kAmWired, answer.header.kind);
    EXPECT_EQ(4u, answer.header.cookie);
    EXPECT_EQ(11u, answer.header.source);
    EXPECT_EQ(8u, answer.ep.size());
    /* a repeated request is answered by the ep it has */
    from_relay(pxn::kAmWire, 3, 11);
    pump();
    EXPECT_EQ(2u, net_.stats().eps_created);
    EXPECT_FALSE(port_.pending());
    EXPECT_EQ(0u, port_.refused());
}

TEST_F(PortWiring, AnAnswerThatCannotGoYetGoesAtALaterPump)
{
    net_.fail_am_send(UCS_ERR_NO_RESOURCE);
    from_relay(pxn::kAmWire, 0, 1);
    pump();
    EXPECT_TRUE(net_.frames().empty());
    EXPECT_TRUE(port_.pending()) << "the answer is still owed";
    net_.fail_am_send(UCS_OK);
    pump();
    EXPECT_EQ(1u, net_.frames().size());
    EXPECT_FALSE(port_.pending());
}

TEST_F(PortWiring, UnwireOrAFailureLetsTheEpGoAndOnlyThatRoutesEp)
{
    from_relay(pxn::kAmWire, 1, 5);
    from_relay(pxn::kAmWire, 2, 6);
    pump();
    ASSERT_EQ(3u, net_.stats().eps_created); /* two routes, one answer ep */
    /* another generation of the id, or another relay's, is not that ep */
    from_relay(pxn::kAmUnwire, 1, 4);
    pump();
    EXPECT_EQ(0u, net_.stats().eps_destroyed);
    from_relay(pxn::kAmUnwire, 1, 5);
    pump();
    EXPECT_EQ(1u, net_.stats().eps_destroyed);
    /* a third route's ep, the newest, fails in the inner transport */
    from_relay(pxn::kAmWire, 9, 9);
    pump();
    ASSERT_EQ(4u, net_.stats().eps_created);
    net_.fail_newest_ep(UCS_ERR_CONNECTION_RESET);
    EXPECT_EQ(1u, net_.stats().eps_destroyed) << "not inside the failure";
    pump(); /* the next, whenever the engine or the iface's progress comes */
    EXPECT_EQ(2u, net_.stats().eps_destroyed);
}

TEST_F(PortWiring, AnswersForThisPortsRelaysGoToThemAtThePump)
{
    uint8_t frame[64];
    const size_t n = pxn::write_am_wired(frame, sizeof(frame), 21, 5,
                                         pxn::Bytes(8, 0x42));
    port_.receive(frame, n);
    pump();
    ASSERT_EQ(1u, answers_.size());
    EXPECT_EQ(4u, answers_[0].id);
    EXPECT_EQ(21u, answers_[0].gen);
    EXPECT_EQ(pxn::Bytes(8, 0x42), answers_[0].ep);
}

class PortNotWired : public PortWiring {
protected:
    PortNotWired() : PortWiring(pxn::uct::Net::ConnectMode::kIface) {}
};

TEST_F(PortNotWired, RefusesAndCountsWireRequests)
{
    from_relay(pxn::kAmWire, 0, 1);
    pump();
    EXPECT_EQ(1u, port_.refused());
    EXPECT_EQ(0u, net_.stats().eps_created);
    EXPECT_TRUE(net_.frames().empty());
}

} // namespace pxn_test
