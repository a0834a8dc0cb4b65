#include <ucs/pxn/route_codec.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace {

namespace abi = pxn::abi;
using pxn::Bytes;
using pxn::RouteAnswer;
using pxn::RouteMessage;

Bytes pattern(size_t length, uint8_t seed)
{
    Bytes b(length);
    for (size_t i = 0; i < length; ++i) {
        b[i] = uint8_t(seed + 7 * i);
    }
    return b;
}

/* Blocks start as garbage, as shared memory another process wrote may. */
abi::RouteRequest dirty_request()
{
    abi::RouteRequest request;
    std::memset(&request, 0xa5, sizeof(request));
    return request;
}

abi::RouteReply dirty_reply()
{
    abi::RouteReply reply;
    std::memset(&reply, 0xa5, sizeof(reply));
    return reply;
}

RouteMessage message(abi::RouteKind kind, uint32_t route, size_t dev,
                     size_t iface, size_t ep)
{
    RouteMessage m;
    m.kind  = kind;
    m.route = route;
    m.dev   = pattern(dev, 1);
    m.iface = pattern(iface, 2);
    m.ep    = pattern(ep, 3);
    return m;
}

/* A well-formed request of `kind`, posted, for tests that then break one
 * field. */
abi::RouteRequest posted(abi::RouteKind kind)
{
    abi::RouteRequest request = dirty_request();
    const RouteMessage m =
            (kind == abi::kRouteToIface)   ? message(kind, 0, 6, 8, 0) :
            (kind == abi::kRouteConnectEp) ? message(kind, 9, 6, 0, 20) :
                                             message(kind, 9, 0, 0, 0);
    EXPECT_EQ(UCS_OK, pxn::post_route_request(&request, 1, m));
    return request;
}

void expect_round_trip(const RouteMessage &m)
{
    abi::RouteRequest request = dirty_request();
    ASSERT_EQ(UCS_OK, pxn::post_route_request(&request, 77, m));
    EXPECT_EQ(77u, pxn::route_request_gen(&request));
    EXPECT_EQ(0u, request.reserved0);

    RouteMessage out;
    out.dev   = pattern(3, 9); /* stale content is replaced */
    out.iface = pattern(3, 9);
    out.ep    = pattern(3, 9);
    ASSERT_EQ(UCS_OK, pxn::read_route_request(&request, &out));
    EXPECT_EQ(m.kind, out.kind);
    EXPECT_EQ(m.route, out.route);
    EXPECT_EQ(m.dev, out.dev);
    EXPECT_EQ(m.iface, out.iface);
    EXPECT_EQ(m.ep, out.ep);
}

ucs_status_t read(const abi::RouteRequest &request)
{
    RouteMessage out;
    return pxn::read_route_request(&request, &out);
}

TEST(RouteCodec, ToIfaceRequestRoundTripsDeviceAndIfaceAddresses)
{
    expect_round_trip(message(abi::kRouteToIface, 0, 12, 20, 0));
    expect_round_trip(message(abi::kRouteToIface, 0, abi::kDevAddrMax,
                              abi::kIfaceAddrMax, 0));
    expect_round_trip(message(abi::kRouteToIface, 0, 1, 1, 0));
}

TEST(RouteCodec, CreateEpRequestRoundTripsWithNoAddress)
{
    expect_round_trip(message(abi::kRouteCreateEp, 0, 0, 0, 0));
}

TEST(RouteCodec, ConnectEpRequestRoundTripsRouteDeviceAndEpAddresses)
{
    expect_round_trip(message(abi::kRouteConnectEp, 0xdeadbeef, 16, 0, 100));
    expect_round_trip(message(abi::kRouteConnectEp, 3, abi::kDevAddrMax, 0,
                              abi::kEpAddrMax));
}

TEST(RouteCodec, ReleaseRequestRoundTripsTheRoute)
{
    expect_round_trip(message(abi::kRouteRelease, 12345, 0, 0, 0));
}

TEST(RouteCodec, PostRefusesAddressesLongerThanTheirArrays)
{
    const RouteMessage too_long[] = {
            message(abi::kRouteToIface, 0, abi::kDevAddrMax + 1, 4, 0),
            message(abi::kRouteToIface, 0, 4, abi::kIfaceAddrMax + 1, 0),
            message(abi::kRouteConnectEp, 1, 4, 0, abi::kEpAddrMax + 1),
            message(abi::kRouteConnectEp, 1, 1000, 0, 4)};
    for (const RouteMessage &m : too_long) {
        abi::RouteRequest request    = dirty_request();
        const abi::RouteRequest orig = request;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM,
                  pxn::post_route_request(&request, 5, m));
        EXPECT_EQ(orig.request_gen, request.request_gen);
        EXPECT_EQ(0, std::memcmp(&orig, &request, sizeof(request)))
                << "nothing is written";
    }
}

TEST(RouteCodec, ReadRefusesUnknownKinds)
{
    for (uint32_t kind : {0u, 5u, 0x80000001u, 0xffffffffu}) {
        SCOPED_TRACE(kind);
        abi::RouteRequest request = posted(abi::kRouteCreateEp);
        request.kind              = kind;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, read(request));
    }
}

TEST(RouteCodec, ReadRefusesNonZeroReserved)
{
    for (abi::RouteKind kind : {abi::kRouteToIface, abi::kRouteCreateEp,
                                abi::kRouteConnectEp, abi::kRouteRelease}) {
        SCOPED_TRACE(kind);
        abi::RouteRequest request = posted(kind);
        ASSERT_EQ(UCS_OK, read(request));
        request.reserved0 = 1;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, read(request));
        request.reserved0 = 0x8000;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, read(request));
    }
}

TEST(RouteCodec, ReadRefusesAnyLengthBeyondItsArray)
{
    abi::RouteRequest request = posted(abi::kRouteToIface);
    for (uint16_t len : {uint16_t(abi::kDevAddrMax + 1), uint16_t(0xffff)}) {
        request.dev_addr_len = len;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, read(request));
    }
    request.dev_addr_len = abi::kDevAddrMax;
    EXPECT_EQ(UCS_OK, read(request));

    for (uint16_t len : {uint16_t(abi::kIfaceAddrMax + 1), uint16_t(0xffff)}) {
        request.iface_addr_len = len;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, read(request));
    }
    request.iface_addr_len = abi::kIfaceAddrMax;
    EXPECT_EQ(UCS_OK, read(request));

    abi::RouteRequest connect = posted(abi::kRouteConnectEp);
    for (uint16_t len : {uint16_t(abi::kEpAddrMax + 1), uint16_t(0xffff)}) {
        connect.ep_addr_len = len;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, read(connect));
    }
    connect.ep_addr_len = abi::kEpAddrMax;
    EXPECT_EQ(UCS_OK, read(connect));
}

TEST(RouteCodec, ReadRefusesToIfaceWithoutDeviceOrWithEp)
{
    abi::RouteRequest no_dev = posted(abi::kRouteToIface);
    no_dev.dev_addr_len      = 0;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, read(no_dev));

    abi::RouteRequest with_ep = posted(abi::kRouteToIface);
    with_ep.ep_addr_len       = 1;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, read(with_ep));
}

TEST(RouteCodec, ReadRefusesConnectEpWithIfaceOrWithoutEpOrDevice)
{
    abi::RouteRequest with_iface = posted(abi::kRouteConnectEp);
    with_iface.iface_addr_len    = 1;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, read(with_iface));

    abi::RouteRequest no_ep = posted(abi::kRouteConnectEp);
    no_ep.ep_addr_len       = 0;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, read(no_ep));

    abi::RouteRequest no_dev = posted(abi::kRouteConnectEp);
    no_dev.dev_addr_len      = 0;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, read(no_dev));
}

TEST(RouteCodec, ReadRefusesCreateEpAndReleaseCarryingAnyAddress)
{
    for (abi::RouteKind kind : {abi::kRouteCreateEp, abi::kRouteRelease}) {
        SCOPED_TRACE(kind);
        abi::RouteRequest dev = posted(kind);
        dev.dev_addr_len      = 1;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, read(dev));

        abi::RouteRequest iface = posted(kind);
        iface.iface_addr_len    = 1;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, read(iface));

        abi::RouteRequest ep = posted(kind);
        ep.ep_addr_len       = 1;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, read(ep));
    }
}

TEST(RouteCodec, PostRefusesNothingTheReaderWouldRefuseForEveryKind)
{
    /* What the sender posts for each kind is what the relay accepts. */
    for (abi::RouteKind kind : {abi::kRouteToIface, abi::kRouteCreateEp,
                                abi::kRouteConnectEp, abi::kRouteRelease}) {
        SCOPED_TRACE(kind);
        EXPECT_EQ(UCS_OK, read(posted(kind)));
    }
}

TEST(RouteCodec, ReplyIsNotYetReadableBeforeItsGenerationIsPosted)
{
    abi::RouteReply reply = dirty_reply();
    reply.reply_gen       = 0;
    RouteAnswer a;
    EXPECT_FALSE(pxn::read_route_reply(&reply, 1, &a));

    RouteAnswer answer;
    answer.status = UCS_OK;
    answer.route  = 4;
    pxn::post_route_reply(&reply, 1, answer);
    EXPECT_FALSE(pxn::read_route_reply(&reply, 2, &a));
    ASSERT_TRUE(pxn::read_route_reply(&reply, 1, &a));
    EXPECT_EQ(UCS_OK, a.status);
    EXPECT_EQ(4u, a.route);
    EXPECT_TRUE(a.relay_dev.empty());
    EXPECT_TRUE(a.relay_ep.empty());
}

TEST(RouteCodec, ReplyWithoutAddressesClearsStaleAnswerAddresses)
{
    abi::RouteReply reply = dirty_reply();
    RouteAnswer answer;
    answer.status = UCS_ERR_UNREACHABLE;
    answer.route  = 8;
    pxn::post_route_reply(&reply, 3, answer);
    EXPECT_EQ(0u, reply.ep_addr_len);

    RouteAnswer a;
    a.relay_dev = pattern(4, 1);
    a.relay_ep  = pattern(4, 2);
    ASSERT_TRUE(pxn::read_route_reply(&reply, 3, &a));
    EXPECT_EQ(UCS_ERR_UNREACHABLE, a.status);
    EXPECT_EQ(8u, a.route);
    EXPECT_TRUE(a.relay_dev.empty());
    EXPECT_TRUE(a.relay_ep.empty());
}

TEST(RouteCodec, ReplyWithRelayAddressesRoundTripsInCountDevEpLayout)
{
    abi::RouteReply reply = dirty_reply();
    RouteAnswer answer;
    answer.status    = UCS_OK;
    answer.route     = 21;
    answer.relay_dev = pattern(10, 0x10);
    answer.relay_ep  = pattern(30, 0x40);
    pxn::post_route_reply(&reply, 9, answer);

    EXPECT_EQ(9u, reply.reply_gen);
    ASSERT_EQ(41u, reply.ep_addr_len);
    EXPECT_EQ(10u, reply.ep_addr[0]);
    EXPECT_EQ(0, std::memcmp(reply.ep_addr + 1, answer.relay_dev.data(), 10));
    EXPECT_EQ(0, std::memcmp(reply.ep_addr + 11, answer.relay_ep.data(), 30));

    RouteAnswer a;
    ASSERT_TRUE(pxn::read_route_reply(&reply, 9, &a));
    EXPECT_EQ(UCS_OK, a.status);
    EXPECT_EQ(21u, a.route);
    EXPECT_EQ(answer.relay_dev, a.relay_dev);
    EXPECT_EQ(answer.relay_ep, a.relay_ep);
}

TEST(RouteCodec, ReplyRoundTripsAtTheLargestAnswerThatFits)
{
    abi::RouteReply reply = dirty_reply();
    RouteAnswer answer;
    answer.relay_dev = pattern(200, 1);
    answer.relay_ep  = pattern(abi::kEpAddrMax - 1 - 200, 2);
    pxn::post_route_reply(&reply, 1, answer);
    RouteAnswer a;
    ASSERT_TRUE(pxn::read_route_reply(&reply, 1, &a));
    EXPECT_EQ(UCS_OK, a.status);
    EXPECT_EQ(answer.relay_dev, a.relay_dev);
    EXPECT_EQ(answer.relay_ep, a.relay_ep);

    /* Only an ep address, or only a device address. */
    answer.relay_dev.clear();
    pxn::post_route_reply(&reply, 2, answer);
    ASSERT_TRUE(pxn::read_route_reply(&reply, 2, &a));
    EXPECT_TRUE(a.relay_dev.empty());
    EXPECT_EQ(answer.relay_ep, a.relay_ep);

    answer.relay_dev = pattern(255, 3);
    answer.relay_ep.clear();
    pxn::post_route_reply(&reply, 3, answer);
    ASSERT_TRUE(pxn::read_route_reply(&reply, 3, &a));
    EXPECT_EQ(UCS_OK, a.status);
    EXPECT_EQ(answer.relay_dev, a.relay_dev);
    EXPECT_TRUE(a.relay_ep.empty());
}

TEST(RouteCodec, ReplyThatDoesNotFitIsPostedAsBufferTooSmallWithoutAddress)
{
    RouteAnswer dev_too_long;
    dev_too_long.status    = UCS_OK;
    dev_too_long.route     = 2;
    dev_too_long.relay_dev = pattern(256, 1);

    RouteAnswer total_too_long;
    total_too_long.status    = UCS_OK;
    total_too_long.route     = 2;
    total_too_long.relay_dev = pattern(100, 1);
    total_too_long.relay_ep  = pattern(abi::kEpAddrMax - 100, 2); /* +1 over */

    for (const RouteAnswer *answer : {&dev_too_long, &total_too_long}) {
        abi::RouteReply reply = dirty_reply();
        pxn::post_route_reply(&reply, 6, *answer);
        EXPECT_EQ(0u, reply.ep_addr_len);
        RouteAnswer a;
        ASSERT_TRUE(pxn::read_route_reply(&reply, 6, &a));
        EXPECT_EQ(UCS_ERR_BUFFER_TOO_SMALL, a.status);
        EXPECT_EQ(2u, a.route);
        EXPECT_TRUE(a.relay_dev.empty());
        EXPECT_TRUE(a.relay_ep.empty());
    }
}

TEST(RouteCodec, ReplyWithCorruptedLengthsReadsAsInvalidAddress)
{
    RouteAnswer answer;
    answer.relay_dev = pattern(10, 1);
    answer.relay_ep  = pattern(10, 2);

    abi::RouteReply too_long = dirty_reply();
    pxn::post_route_reply(&too_long, 1, answer);
    too_long.ep_addr_len = abi::kEpAddrMax + 1;

    abi::RouteReply max_len = dirty_reply();
    pxn::post_route_reply(&max_len, 1, answer);
    max_len.ep_addr_len = 0xffff;

    abi::RouteReply dev_past_end = dirty_reply();
    pxn::post_route_reply(&dev_past_end, 1, answer);
    dev_past_end.ep_addr[0] = 21; /* ep_addr_len - 1 is 20 */

    abi::RouteReply dev_count_max = dirty_reply();
    pxn::post_route_reply(&dev_count_max, 1, answer);
    dev_count_max.ep_addr_len = 5;
    dev_count_max.ep_addr[0]  = 255;

    for (const abi::RouteReply *reply :
         {&too_long, &max_len, &dev_past_end, &dev_count_max}) {
        RouteAnswer a;
        ASSERT_TRUE(pxn::read_route_reply(reply, 1, &a));
        EXPECT_EQ(UCS_ERR_INVALID_ADDR, a.status);
        EXPECT_LE(a.relay_dev.size(), abi::kEpAddrMax);
        EXPECT_LE(a.relay_dev.size() + a.relay_ep.size(), abi::kEpAddrMax);
    }

    /* Device count of exactly ep_addr_len - 1: all device, no ep. */
    abi::RouteReply dev_fills = dirty_reply();
    pxn::post_route_reply(&dev_fills, 1, answer);
    dev_fills.ep_addr[0] = 20;
    RouteAnswer a;
    ASSERT_TRUE(pxn::read_route_reply(&dev_fills, 1, &a));
    EXPECT_EQ(UCS_OK, a.status);
    EXPECT_EQ(20u, a.relay_dev.size());
    EXPECT_TRUE(a.relay_ep.empty());
}

TEST(RouteCodec, ReplyStatusOutsideTheStatusRangeReadsAsIoError)
{
    for (int32_t raw : {5, 1, int32_t(UCS_ERR_LAST), -10000, INT32_MIN,
                        INT32_MAX}) {
        SCOPED_TRACE(raw);
        abi::RouteReply reply = dirty_reply();
        pxn::post_route_reply(&reply, 1, RouteAnswer());
        reply.status = raw;
        RouteAnswer a;
        ASSERT_TRUE(pxn::read_route_reply(&reply, 1, &a));
        EXPECT_EQ(UCS_ERR_IO_ERROR, a.status);
    }
    for (int32_t raw : {int32_t(UCS_OK), int32_t(UCS_ERR_NO_RESOURCE),
                        int32_t(UCS_ERR_LAST) + 1}) {
        SCOPED_TRACE(raw);
        abi::RouteReply reply = dirty_reply();
        pxn::post_route_reply(&reply, 1, RouteAnswer());
        reply.status = raw;
        RouteAnswer a;
        ASSERT_TRUE(pxn::read_route_reply(&reply, 1, &a));
        EXPECT_EQ(raw, int32_t(a.status));
    }
}

TEST(RouteCodec, RandomRequestBytesNeverMakeTheReaderReadOutsideTheBlock)
{
    std::mt19937_64 rng(0xfeedface);
    unsigned accepted = 0;
    for (int i = 0; i < 100000; ++i) {
        abi::RouteRequest request;
        uint8_t *raw = reinterpret_cast<uint8_t*>(&request);
        for (size_t k = 0; k < sizeof(request); ++k) {
            raw[k] = uint8_t(rng());
        }
        /* Bias towards the interesting cases: known kinds, zero reserved,
         * lengths near their limits. */
        if (rng() % 2) {
            request.kind      = 1 + rng() % 4;
            request.reserved0 = 0;
            request.dev_addr_len   = uint16_t(rng() % (abi::kDevAddrMax + 4));
            request.iface_addr_len = (rng() % 2) ? 0 :
                    uint16_t(rng() % (abi::kIfaceAddrMax + 4));
            request.ep_addr_len    = (rng() % 2) ? 0 :
                    uint16_t(rng() % (abi::kEpAddrMax + 4));
            if (rng() % 2) {
                request.dev_addr_len = 0;
            }
        }
        RouteMessage m;
        const ucs_status_t status = pxn::read_route_request(&request, &m);
        ASSERT_TRUE((status == UCS_OK) || (status == UCS_ERR_INVALID_PARAM))
                << status;
        ASSERT_LE(m.dev.size(), abi::kDevAddrMax);
        ASSERT_LE(m.iface.size(), abi::kIfaceAddrMax);
        ASSERT_LE(m.ep.size(), abi::kEpAddrMax);
        if (status == UCS_OK) {
            ++accepted;
            ASSERT_EQ(request.dev_addr_len, m.dev.size());
            ASSERT_EQ(request.iface_addr_len, m.iface.size());
            ASSERT_EQ(request.ep_addr_len, m.ep.size());
            ASSERT_EQ(Bytes(request.dev_addr,
                            request.dev_addr + request.dev_addr_len), m.dev);
            ASSERT_EQ(Bytes(request.iface_addr,
                            request.iface_addr + request.iface_addr_len),
                      m.iface);
            ASSERT_EQ(Bytes(request.ep_addr,
                            request.ep_addr + request.ep_addr_len), m.ep);
        }
    }
    /* The biased half reaches the accepting paths too. */
    EXPECT_GT(accepted, 1000u);
}

} // namespace
