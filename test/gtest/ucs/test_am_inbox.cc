#include <ucs/pxn/am_inbox.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

namespace {

using pxn::AmInbox;
using pxn::am_cost;

struct Granted {
    std::map<uint64_t, uint64_t> total; /* source -> cumulative grant */
    void operator()(uint64_t source, uint64_t granted) { total[source] = granted; }
};

std::vector<uint8_t> payload(uint32_t length, uint8_t seed)
{
    std::vector<uint8_t> p(length);
    for (uint32_t i = 0; i < length; ++i) {
        p[i] = uint8_t(seed + i * 7);
    }
    return p;
}

TEST(AmInbox, ASourceHasNoCreditUntilItsHelloIsGranted)
{
    AmInbox inbox;
    ASSERT_EQ(UCS_OK, inbox.init(4096, 256, 1024, 4));
    const auto p = payload(8, 1);
    EXPECT_EQ(UCS_ERR_NO_ELEM, inbox.push(5, 0, p.data(), 8));
    ASSERT_EQ(UCS_OK, inbox.hello(5));
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, inbox.push(5, 0, p.data(), 8));
    Granted g;
    inbox.grants(std::ref(g));
    ASSERT_EQ(1u, g.total.size());
    EXPECT_EQ(1024u, g.total[5]);
    EXPECT_EQ(UCS_OK, inbox.push(5, 0, p.data(), 8));
    EXPECT_EQ(2u, inbox.counters().refused);
}

/* What the iface's progress asks before it polls the port for messages
 * (UCX_PXN_AM_POLL): nothing comes before a source's hello. */
TEST(AmInbox, IsAnnouncedFromTheFirstHelloOn)
{
    AmInbox inbox;
    ASSERT_EQ(UCS_OK, inbox.init(4096, 256, 1024, 1));
    const auto p = payload(8, 1);
    EXPECT_FALSE(inbox.announced());
    EXPECT_EQ(UCS_ERR_NO_ELEM, inbox.push(7, 1, p.data(), 8));
    EXPECT_FALSE(inbox.announced()) << "a push of an unknown source";
    ASSERT_EQ(UCS_OK, inbox.hello(7));
    EXPECT_TRUE(inbox.announced());
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, inbox.hello(8));
    EXPECT_TRUE(inbox.announced());
}

TEST(AmInbox, MessagesComeOutInPushOrderIntact)
{
    AmInbox inbox;
    ASSERT_EQ(UCS_OK, inbox.init(1 << 16, 1000, 1 << 16, 4));
    ASSERT_EQ(UCS_OK, inbox.hello(1));
    Granted g;
    inbox.grants(std::ref(g));
    for (uint32_t i = 0; i < 40; ++i) {
        const auto p = payload(i * 25, uint8_t(i));
        ASSERT_EQ(UCS_OK, inbox.push(1, uint8_t(i % 32), p.data(), uint32_t(p.size())));
    }
    uint32_t next = 0;
    EXPECT_EQ(40u, inbox.drain(100, [&](const AmInbox::Message &m) {
        const auto p = payload(next * 25, uint8_t(next));
        EXPECT_EQ(next % 32, m.am_id);
        EXPECT_EQ(1u, m.source);
        ASSERT_EQ(p.size(), m.length);
        EXPECT_TRUE(p.empty() || (std::memcmp(p.data(), m.data, p.size()) == 0))
                << next;
        ++next;
    }));
    EXPECT_TRUE(inbox.empty());
    EXPECT_EQ(40u, inbox.counters().messages);
}

TEST(AmInbox, RefusesAMessageOverItsCreditOrItsLargestSize)
{
    AmInbox inbox;
    ASSERT_EQ(UCS_OK, inbox.init(4096, 256, am_cost(256), 4));
    ASSERT_EQ(UCS_OK, inbox.hello(1));
    Granted g;
    inbox.grants(std::ref(g));
    const auto p = payload(257, 0);
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, inbox.push(1, 0, p.data(), 257));
    EXPECT_EQ(UCS_OK, inbox.push(1, 0, p.data(), 256));
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, inbox.push(1, 0, p.data(), 0));
    EXPECT_EQ(2u, inbox.counters().refused);
}

TEST(AmInbox, GrantsNeverGiveOutMoreThanItsCapacity)
{
    AmInbox inbox;
    const uint64_t capacity = 10000, window = 4096;
    ASSERT_EQ(UCS_OK, inbox.init(capacity, 512, window, 8));
    Granted g;
    for (uint64_t s = 1; s <= 8; ++s) {
        ASSERT_EQ(UCS_OK, inbox.hello(s));
    }
    inbox.grants(std::ref(g));
    uint64_t sum = 0;
    for (auto &e : g.total) {
        sum += e.second;
    }
    EXPECT_LE(sum, capacity);
    EXPECT_GE(sum, capacity - am_cost(512));
    /* nothing consumed: no more grants */
    Granted again;
    inbox.grants(std::ref(again));
    EXPECT_TRUE(again.total.empty());
}

/* A 2048-byte inbox whose source 1 holds all its credit and whose source
 * 2 got none (no room left for it). */
void fill_with_source_1(AmInbox &inbox, Granted &g, uint32_t max_sources)
{
    ASSERT_EQ(UCS_OK, inbox.init(2048, 256, 2048, max_sources));
    ASSERT_EQ(UCS_OK, inbox.hello(1));
    inbox.grants(std::ref(g));
    ASSERT_EQ(2048u, g.total[1]);
    ASSERT_EQ(UCS_OK, inbox.hello(2));
    inbox.grants(std::ref(g));
    ASSERT_EQ(0u, g.total.count(2));
}

TEST(AmInbox, ConsumedRoomIsGrantedAgainToSourcesThatWaited)
{
    AmInbox inbox;
    Granted g;
    ASSERT_NO_FATAL_FAILURE(fill_with_source_1(inbox, g, 4));
    const auto p = payload(256, 3);
    uint64_t sent = 0;
    while (sent + am_cost(256) <= 2048) {
        ASSERT_EQ(UCS_OK, inbox.push(1, 0, p.data(), 256));
        sent += am_cost(256);
    }
    inbox.drain(100, [](const AmInbox::Message&) {});
    inbox.grants(std::ref(g));
    EXPECT_GT(g.total[2], 0u);
    EXPECT_LE(g.total[1] - sent + g.total[2], 2048u);
}

TEST(AmInbox, HelloAgainStartsTheSourceOverAndBeyondMaxSourcesIsRefused)
{
    AmInbox inbox;
    ASSERT_EQ(UCS_OK, inbox.init(4096, 64, 1024, 2));
    Granted g;
    ASSERT_EQ(UCS_OK, inbox.hello(1));
    ASSERT_EQ(UCS_OK, inbox.hello(2));
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, inbox.hello(3));
    inbox.grants(std::ref(g));
    ASSERT_EQ(UCS_OK, inbox.hello(1));
    const auto p = payload(8, 0);
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, inbox.push(1, 0, p.data(), 8));
    Granted again;
    inbox.grants(std::ref(again));
    EXPECT_EQ(1024u, again.total[1]);
    EXPECT_EQ(1u, inbox.counters().hellos_refused);
}

TEST(AmInbox, ASourcesByeGivesItsCreditToTheOthersAndItsMessagesAreRefusedAfter)
{
    AmInbox inbox;
    Granted g;
    ASSERT_NO_FATAL_FAILURE(fill_with_source_1(inbox, g, 2));
    const auto p = payload(256, 3);
    ASSERT_EQ(UCS_OK, inbox.push(1, 0, p.data(), 256));
    /* 1 ends with a message queued: what it did not use is room again,
     * what it queued stays until it is drained */
    EXPECT_EQ(UCS_OK, inbox.bye(1));
    EXPECT_EQ(UCS_ERR_NO_ELEM, inbox.bye(1));
    EXPECT_EQ(UCS_ERR_NO_ELEM, inbox.push(1, 0, p.data(), 256));
    inbox.grants(std::ref(g));
    EXPECT_EQ(2048u - am_cost(256), g.total[2]);
    unsigned drained = 0;
    inbox.drain(10, [&](const AmInbox::Message &m) {
        EXPECT_EQ(1u, m.source);
        ++drained;
    });
    EXPECT_EQ(1u, drained);
    /* a source place is free again too */
    EXPECT_EQ(UCS_OK, inbox.hello(3));
    EXPECT_EQ(1u, inbox.counters().byes);
}

TEST(AmInbox, RefusesInconsistentSizes)
{
    AmInbox inbox;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, inbox.init(4096, 0, 1024, 1));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, inbox.init(4096, 2048, 1024, 1));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, inbox.init(512, 64, 1024, 1));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, inbox.init(4096, 64, 1024, 0));
}

/* A relay and an iface on two threads: the relay sends within its credit
 * only, messages of every size wrap the ring many times, every byte and
 * the order are checked, and the ring never holds more than its capacity
 * of credit. */
TEST(AmInbox, ProducerAndConsumerThreadsMoveEveryMessageIntactThroughWraps)
{
    AmInbox inbox;
    const uint32_t max_message = 1000;
    ASSERT_EQ(UCS_OK, inbox.init(8192, max_message, 4096, 2));
    const unsigned count = 20000;
    std::atomic<bool> done{false};
    std::thread consumer([&] {
        unsigned next[3] = {0, 0, 0};
        while (!done.load() || !inbox.empty()) {
            inbox.drain(16, [&](const AmInbox::Message &m) {
                ASSERT_TRUE((m.source == 1) || (m.source == 2));
                unsigned &n = next[m.source];
                const uint32_t length = (n * 37 + uint32_t(m.source)) % (max_message + 1);
                ASSERT_EQ(length, m.length);
                const auto p = payload(length, uint8_t(n + m.source));
                ASSERT_TRUE((length == 0) || (std::memcmp(p.data(), m.data, length) == 0))
                        << n;
                ++n;
            });
        }
        EXPECT_EQ(count, next[1]);
        EXPECT_EQ(count, next[2]);
    });
    ASSERT_EQ(UCS_OK, inbox.hello(1));
    ASSERT_EQ(UCS_OK, inbox.hello(2));
    uint64_t credit[3] = {0, 0, 0}, sent[3] = {0, 0, 0};
    unsigned n[3] = {0, 0, 0};
    while ((n[1] < count) || (n[2] < count)) {
        inbox.grants([&](uint64_t s, uint64_t granted) { credit[s] = granted; });
        for (uint64_t s = 1; s <= 2; ++s) {
            if (n[s] == count) {
                continue;
            }
            const uint32_t length = (n[s] * 37 + uint32_t(s)) % (max_message + 1);
            if (sent[s] + am_cost(length) > credit[s]) {
                continue;
            }
            const auto p = payload(length, uint8_t(n[s] + s));
            ASSERT_EQ(UCS_OK, inbox.push(s, 0, p.data(), length));
            sent[s] += am_cost(length);
            ++n[s];
        }
    }
    done = true;
    consumer.join();
    EXPECT_EQ(0u, inbox.counters().refused);
    EXPECT_EQ(2u * count, inbox.counters().messages);
}

} // namespace
