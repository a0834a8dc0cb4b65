#include "lane_fixture.h"

#include <ucs/pxn/identity.h>

namespace pxn_test {

void LaneFixture::SetUp()
{
    settings_.group              = "unit";
    settings_.node_id            = "n0";
    settings_.net_tls            = {"fake"};
    settings_.geometry.lanes     = 4;
    settings_.geometry.slots     = 4;
    settings_.geometry.slot_size = 65536;
    settings_.geometry.max_plan  = 64;
    /* A sender or relay that waited for the other side would wait this
     * long: far beyond any bound a test asserts. */
    settings_.heartbeat_timeout  = 30;
    settings_.routes             = 64;
    dir_.reset(new TempDir("/tmp/pxn-transport-"));
    net_      = std::make_shared<FakeNet>();
    is_local_ = [](const pxn::Bytes&, const pxn::Bytes&) { return false; };
}

void LaneFixture::TearDown()
{
    lanes_.clear();
    relay_.reset();
    registry_.reset();
    dir_.reset();
}

void LaneFixture::start_relay()
{
    ASSERT_EQ(UCS_OK, pxn::Registry::open(settings_, dir_->path(), &registry_));
    pxn::uct::RelayService::Params params;
    params.registry          = registry_.get();
    params.net               = net_;
    params.md_registers_cuda = false;
    params.rail              = "rail1";
    params.device            = "fake0";
    params.gpu               = -1;
    params.is_local          = [this](const pxn::Bytes &d, const pxn::Bytes &i) {
        return is_local_(d, i);
    };
    ASSERT_EQ(UCS_OK, pxn::uct::RelayService::open(params, settings_, &relay_));
}

std::unique_ptr<pxn::uct::SendLane> LaneFixture::open_lane()
{
    std::vector<pxn::PeerInfo> peers;
    EXPECT_EQ(UCS_OK, registry_->discover(nullptr, &peers));
    EXPECT_EQ(1u, peers.size());
    if (peers.empty()) {
        return nullptr;
    }
    std::unique_ptr<pxn::PeerMapping> mapping;
    EXPECT_EQ(UCS_OK, registry_->map_peer(peers[0], &mapping));
    pxn::ProcessIdentity self;
    EXPECT_EQ(UCS_OK, pxn::current_process(&self));
    EXPECT_EQ(UCS_OK, pxn::random_epoch(&self.epoch));
    std::unique_ptr<pxn::uct::SendLane> lane(
            new pxn::uct::SendLane(registry_.get(), std::move(mapping), self,
                                   settings_, -1, &sender_counters_));
    lanes_.push_back(lane.get());
    return lane;
}

void LaneFixture::round()
{
    if (relay_ != nullptr) {
        std::lock_guard<std::mutex> guard(net_->lock());
        net_->progress();
        relay_->progress();
        relay_->heartbeat(pxn::monotonic_ns());
    }
    for (pxn::uct::SendLane *lane : lanes_) {
        lane->progress();
    }
}

bool LaneFixture::drive(const std::function<bool()> &done, unsigned max_rounds)
{
    for (unsigned i = 0; i < max_rounds; ++i) {
        if (done()) {
            return true;
        }
        round();
    }
    return done();
}

bool LaneFixture::make_ready(pxn::uct::SendLane &lane)
{
    return drive([&] { return lane.usable() || lane.failed(); }) && lane.usable();
}

pxn::RouteAnswer LaneFixture::route_to(pxn::uct::SendLane &lane, uint64_t index)
{
    TestClient client;
    pxn::RouteMessage m;
    m.kind  = pxn::abi::kRouteToIface;
    m.dev   = net_->device_addr();
    m.iface = FakeNet::target_iface(index);
    lane.control().request_route(m, &client);
    EXPECT_TRUE(drive([&] { return client.answered; }));
    return client.answer;
}

} // namespace pxn_test
