#include <ucs/pxn/am_frame.h>

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace {

using pxn::AmFrame;
using pxn::Bytes;

std::vector<uint8_t> hello_frame()
{
    std::vector<uint8_t> buf(256);
    const size_t n = pxn::write_am_hello(buf.data(), buf.size(), 0x1234, 7,
                                         0xabcd, Bytes{1, 2, 3},
                                         Bytes{4, 5, 6, 7, 8});
    buf.resize(n);
    return buf;
}

TEST(AmFrame, DataHelloGrantAndByeReadBackAsWritten)
{
    std::vector<uint8_t> data(64);
    ASSERT_EQ(16u, pxn::write_am_data_header(data.data(), data.size(), 99, 3, 31));
    std::memset(&data[16], 0x5a, 48);
    AmFrame f;
    ASSERT_EQ(UCS_OK, pxn::read_am_frame(data.data(), data.size(), &f));
    EXPECT_EQ(pxn::kAmData, f.header.kind);
    EXPECT_EQ(99u, f.header.source);
    EXPECT_EQ(3u, f.header.cookie);
    EXPECT_EQ(31u, f.header.am_id);
    EXPECT_EQ(48u, f.payload_length);
    EXPECT_EQ(&data[16], f.payload);

    const auto hello = hello_frame();
    ASSERT_EQ(UCS_OK, pxn::read_am_frame(hello.data(), hello.size(), &f));
    EXPECT_EQ(pxn::kAmHello, f.header.kind);
    EXPECT_EQ(0xabcdu, f.hello.relay);
    EXPECT_EQ((Bytes{1, 2, 3}), f.relay_dev);
    EXPECT_EQ((Bytes{4, 5, 6, 7, 8}), f.relay_iface);

    std::vector<uint8_t> grant(64);
    grant.resize(pxn::write_am_grant(grant.data(), grant.size(), 0x1234, 1 << 20));
    ASSERT_EQ(UCS_OK, pxn::read_am_frame(grant.data(), grant.size(), &f));
    EXPECT_EQ(pxn::kAmGrant, f.header.kind);
    EXPECT_EQ(0x1234u, f.header.source);
    EXPECT_EQ(1u << 20, f.grant.granted);

    uint8_t bye[16];
    ASSERT_EQ(16u, pxn::write_am_bye(bye, sizeof(bye), 0x1234, 9));
    ASSERT_EQ(UCS_OK, pxn::read_am_frame(bye, sizeof(bye), &f));
    EXPECT_EQ(pxn::kAmBye, f.header.kind);
    EXPECT_EQ(0x1234u, f.header.source);
    EXPECT_EQ(9u, f.header.cookie);
}

TEST(AmFrame, WiringFramesReadBackAsWrittenAndRefuseWhatOverrunsOrTrails)
{
    std::vector<uint8_t> wire(256);
    wire.resize(pxn::write_am_wire(wire.data(), wire.size(), 42, 8, Bytes{1, 2},
                                   Bytes{3, 4, 5}, Bytes{6}));
    ASSERT_EQ(16u + 3 + 2 + 3 + 1, wire.size());
    AmFrame f;
    ASSERT_EQ(UCS_OK, pxn::read_am_frame(wire.data(), wire.size(), &f));
    EXPECT_EQ(pxn::kAmWire, f.header.kind);
    EXPECT_EQ(42u, f.header.source);
    EXPECT_EQ(8u, f.header.cookie);
    EXPECT_EQ((Bytes{1, 2}), f.relay_dev);
    EXPECT_EQ((Bytes{3, 4, 5}), f.ep);
    EXPECT_EQ((Bytes{6}), f.relay_iface);
    /* every cut short of the whole, and one byte more, is refused */
    for (size_t n = 16; n < wire.size(); ++n) {
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::read_am_frame(wire.data(), n, &f)) << n;
    }
    auto longer = wire;
    longer.push_back(0);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::read_am_frame(longer.data(), longer.size(), &f));

    std::vector<uint8_t> wired(64);
    wired.resize(pxn::write_am_wired(wired.data(), wired.size(), 42, 8, Bytes{7, 7}));
    ASSERT_EQ(UCS_OK, pxn::read_am_frame(wired.data(), wired.size(), &f));
    EXPECT_EQ(pxn::kAmWired, f.header.kind);
    EXPECT_EQ((Bytes{7, 7}), f.ep);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              pxn::read_am_frame(wired.data(), wired.size() - 1, &f));

    uint8_t unwire[24] = {};
    ASSERT_EQ(16u + 2 + 2 + 1, pxn::write_am_unwire(unwire, sizeof(unwire), 42, 8,
                                                    Bytes{1, 2}, Bytes{6}));
    ASSERT_EQ(UCS_OK, pxn::read_am_frame(unwire, 21, &f));
    EXPECT_EQ(pxn::kAmUnwire, f.header.kind);
    EXPECT_EQ((Bytes{1, 2}), f.relay_dev);
    EXPECT_EQ((Bytes{6}), f.relay_iface);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::read_am_frame(unwire, 22, &f));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::read_am_frame(unwire, 20, &f));
    /* each names its route (cookie: route id + 1) */
    pxn::write_am_unwire(unwire, sizeof(unwire), 42, 0, Bytes{1, 2}, Bytes{6});
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::read_am_frame(unwire, 21, &f));
    pxn::write_am_wire(wire.data(), wire.size(), 42, 0, Bytes{1, 2},
                       Bytes{3, 4, 5}, Bytes{6});
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::read_am_frame(wire.data(), wire.size(), &f));
    /* an address of 256 bytes cannot be written */
    std::vector<uint8_t> big(1024);
    EXPECT_EQ(0u, pxn::write_am_wired(big.data(), big.size(), 1, 1, Bytes(256, 0)));
}

TEST(AmFrame, AnEmptyMessageIsAFrameOfItsHeaderAlone)
{
    uint8_t data[16];
    ASSERT_EQ(16u, pxn::write_am_data_header(data, sizeof(data), 1, 1, 0));
    AmFrame f;
    ASSERT_EQ(UCS_OK, pxn::read_am_frame(data, sizeof(data), &f));
    EXPECT_EQ(0u, f.payload_length);
}

TEST(AmFrame, WritersRefuseTooSmallABuffer)
{
    uint8_t buf[23];
    EXPECT_EQ(0u, pxn::write_am_data_header(buf, 15, 1, 1, 0));
    EXPECT_EQ(0u, pxn::write_am_grant(buf, sizeof(buf), 1, 1));
    EXPECT_EQ(0u, pxn::write_am_hello(buf, sizeof(buf), 1, 1, 1, Bytes{}, Bytes{}));
}

TEST(AmFrame, RefusesShortFramesUnknownKindsReservedBitsAndBadIds)
{
    AmFrame f;
    std::vector<uint8_t> data(32);
    pxn::write_am_data_header(data.data(), data.size(), 1, 1, 0);
    for (size_t n = 0; n < 16; ++n) {
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::read_am_frame(data.data(), n, &f)) << n;
    }
    auto bad = data;
    bad[0] = 0;  /* kind */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::read_am_frame(bad.data(), bad.size(), &f));
    bad = data;
    bad[0] = pxn::kAmUnwire + 1;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::read_am_frame(bad.data(), bad.size(), &f));
    /* a bye has no body, names its iface and no AM id */
    uint8_t bye[17] = {};
    pxn::write_am_bye(bye, sizeof(bye), 1, 2);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::read_am_frame(bye, 17, &f));
    pxn::write_am_bye(bye, sizeof(bye), 1, 0);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::read_am_frame(bye, 16, &f));
    pxn::write_am_bye(bye, sizeof(bye), 1, 2);
    bye[1] = 3;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::read_am_frame(bye, 16, &f));
    bad = data;
    bad[2] = 1;  /* reserved */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::read_am_frame(bad.data(), bad.size(), &f));
    bad = data;
    bad[1] = pxn::kAmIdCount;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::read_am_frame(bad.data(), bad.size(), &f));
    pxn::write_am_data_header(bad.data(), bad.size(), 1, 0, 0); /* no cookie */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::read_am_frame(bad.data(), bad.size(), &f));

    std::vector<uint8_t> grant(64);
    grant.resize(pxn::write_am_grant(grant.data(), grant.size(), 1, 8));
    auto longer = grant;
    longer.push_back(0);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::read_am_frame(longer.data(), longer.size(), &f));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::read_am_frame(grant.data(), grant.size() - 1, &f));
    grant[4] = 1; /* a cookie on a grant */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::read_am_frame(grant.data(), grant.size(), &f));
}

TEST(AmFrame, RefusesEveryHelloWhoseAddressesOverrunOrLeaveBytesBehind)
{
    const auto hello = hello_frame();
    AmFrame f;
    for (size_t n = 0; n < hello.size(); ++n) {
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::read_am_frame(hello.data(), n, &f)) << n;
    }
    auto longer = hello;
    longer.push_back(0);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::read_am_frame(longer.data(), longer.size(), &f));
    auto lying = hello;
    lying[16 + 8] = 200; /* the device address's length */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::read_am_frame(lying.data(), lying.size(), &f));
}

TEST(AmFrame, PlanAddressKeepsTheCookieAndTheId)
{
    const uint64_t a = pxn::am_plan_address(0xfffffffe, 17);
    EXPECT_EQ(0xfffffffeu, pxn::am_plan_cookie(a));
    EXPECT_EQ(17u, pxn::am_plan_id(a));
    EXPECT_TRUE(pxn::am_plan_address_valid(a));
    EXPECT_FALSE(pxn::am_plan_address_valid(pxn::am_plan_address(0, 1)));
    EXPECT_FALSE(pxn::am_plan_address_valid(pxn::am_plan_address(1, 32)));
    EXPECT_FALSE(pxn::am_plan_address_valid(a | (1ull << 40)));
}

TEST(AmFrame, CostIsTheRecordRoundedToEightBytes)
{
    EXPECT_EQ(16u, pxn::am_cost(0));
    EXPECT_EQ(24u, pxn::am_cost(1));
    EXPECT_EQ(24u, pxn::am_cost(8));
    EXPECT_EQ(32u, pxn::am_cost(9));
}

} // namespace
