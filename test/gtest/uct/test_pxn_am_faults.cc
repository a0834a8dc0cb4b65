/*
 * Active messages when something fails (issue 32): a relay killed or
 * frozen under queued or flowing messages, a target that exits with
 * messages queued for it at the relay, a hostile process publishing
 * malformed AM pieces, and a receiver that never progresses. Inner tcp
 * over the emulated rails (own prefix "pxnf": PxnAm's and PxnTransfer's
 * suites may run beside it); every wait is bounded, every message the
 * receivers are handed is checked (ucx_pxn_peer's "am" commands).
 */
#include "pxn_transfer.h"

#include <fstream>

namespace pxn_test {
namespace {

using pxn_tools::BackgroundProcess;

/* "done <status> <ns> <sent> [<dispatches>]" of "am send" */
struct Sent {
    int      status     = 1; /* not a ucs_status_t: no answer */
    uint64_t sent       = 0;
    uint64_t dispatches = 0;
};

/* "am <received> <bad> <out of order> <bytes>" */
struct Received {
    uint64_t messages = 0, bad = 0, out_of_order = 0, bytes = 0;
};

class PxnAmFaults : public PxnTransfer {
protected:
    static void SetUpTestSuite() { up("pxnf", 8, false); }
    static void TearDownTestSuite() { down("pxnf"); }

    /* Where a dead or frozen relay must be noticed by its pid or heartbeat:
     * the credit timeout would otherwise race it for queued operations. */
    static inline const std::vector<std::string> kHeartbeatDecides = {
            "UCX_PXN_CREDIT_TIMEOUT=20s"};
    static constexpr size_t kBytes = 4000; /* per message */
    /* Messages one route's credit window holds (am_inbox.h) */
    static constexpr uint64_t kWindow = (256 << 10) / ((kBytes + 16 + 7) / 8 * 8);

    static Sent parse_sent(const std::string &done)
    {
        Sent s;
        const auto f = split(done);
        if ((f.size() >= 4) && (f[0] == "done")) {
            s.status     = std::stoi(f[1]);
            s.sent       = std::stoull(f[3]);
            s.dispatches = (f.size() >= 5) ? std::stoull(f[4]) : 0;
        }
        return s;
    }

    static Received stats(PeerProcess *peer)
    {
        Received r;
        const auto f = split(peer->call("am stats"));
        if ((f.size() == 5) && (f[0] == "am")) {
            r = {std::stoull(f[1]), std::stoull(f[2]), std::stoull(f[3]),
                 std::stoull(f[4])};
        }
        return r;
    }

    /* Calls of the iface's error handler at `peer` */
    static unsigned ep_errors(PeerProcess *peer)
    {
        const auto f = split(peer->call("ep_errors"));
        return ((f.size() >= 2) && (f[0] == "ep_errors")) ? std::stoul(f[1]) : 0;
    }

    /* Until `sender`'s ring has run out of credit: its relay holds its
     * lane's messages (parked for credit, or in its ring). */
    bool wait_ring_full(PeerProcess *sender)
    {
        return wait_counters(0, sender, [](const auto &c) {
            return c.sender.credit_stalls >= 1;
        });
    }

    static std::string am_send(uint8_t id, uint64_t count,
                               const std::string &mode = "")
    {
        return "am send bcopy " + std::to_string(id) + " " +
               std::to_string(count) + " " + std::to_string(kBytes) +
               (mode.empty() ? "" : " " + mode);
    }

    /* VmRSS of `pid` in KiB; 0 if unreadable. */
    static uint64_t rss_kib(pid_t pid)
    {
        std::ifstream status("/proc/" + std::to_string(pid) + "/status");
        for (std::string line; std::getline(status, line);) {
            if (line.rfind("VmRSS:", 0) == 0) {
                return std::stoull(line.substr(6));
            }
        }
        return 0;
    }

    /* The receiver's messages so far, all intact and in order. */
    static Received expect_intact(PeerProcess *target)
    {
        const Received r = stats(target);
        EXPECT_EQ(0u, r.bad) << "corrupted messages";
        EXPECT_EQ(0u, r.out_of_order) << "messages out of order";
        EXPECT_EQ(r.messages * kBytes, r.bytes);
        return r;
    }
};

TEST_F(PxnAmFaults, RelayKilledWithMessagesQueuedFailsTheSenderAndDeliversNothingAfter)
{
    CrossRail c = cross_rail(4096, 1, kHeartbeatDecides);
    ASSERT_NE(nullptr, c.sender);
    ASSERT_EQ("ok", c.target->call("am listen"));
    /* The target does not progress: the relay's flow uses up its credit
     * and parks, the sender's ring fills behind it. */
    ASSERT_TRUE(c.sender->send(am_send(3, 100000)));
    ASSERT_TRUE(wait_ring_full(c.sender)) << "the sender's ring never filled";
    kill_relay(0, c.relay);

    const std::string done = c.sender->receive(scaled_ms(10000));
    ASSERT_FALSE(done.empty()) << "sender hung behind a dead relay";
    const Sent s = parse_sent(done);
    EXPECT_EQ(int(UCS_ERR_ENDPOINT_TIMEOUT), s.status) << done;
    EXPECT_LT(s.sent, 100000u);
    EXPECT_GE(ep_errors(c.sender), 1u) << "the ep's failure was not reported";

    /* What the target gets now came out of the relay before it died:
     * never more than the sender had accepted, nor than one credit
     * window; and nothing comes later. */
    EXPECT_EQ("ok", c.target->call("progress 500"));
    const Received first = expect_intact(c.target);
    EXPECT_LE(first.messages, s.sent);
    EXPECT_LE(first.messages, kWindow);
    EXPECT_EQ("ok", c.target->call("progress 500"));
    EXPECT_EQ(first.messages, stats(c.target).messages);
}

TEST_F(PxnAmFaults, RelayFrozenUnderFlowingMessagesFailsTheSenderAndThawedSendsNothingMore)
{
    CrossRail c = cross_rail(4096, 1, kHeartbeatDecides);
    ASSERT_NE(nullptr, c.sender);
    ASSERT_EQ("ok", c.target->call("am listen"));
    ASSERT_TRUE(c.target->send("serve"));
    ASSERT_TRUE(c.sender->send(am_send(3, 1000000)));
    ASSERT_TRUE(wait_counters(0, c.relay, [](const auto &r) {
        return r.relay.pieces >= 8;
    })) << "the messages did not start";
    ASSERT_TRUE(c.relay->stop());

    /* Heartbeat timeout kHeartbeatTimeout, credit timeout 20 s. */
    const std::string done = c.sender->receive(scaled_ms(10000));
    ASSERT_FALSE(done.empty()) << "sender hung behind a frozen relay";
    const Sent s = parse_sent(done);
    /* the pieces fail with UCS_ERR_ENDPOINT_TIMEOUT; a message posted
     * once the relay is seen unhealthy gets UCS_ERR_UNREACHABLE */
    EXPECT_TRUE((s.status == UCS_ERR_ENDPOINT_TIMEOUT) ||
                (s.status == UCS_ERR_UNREACHABLE)) << done;
    EXPECT_EQ("ok", c.sender->call("progress 100")); /* the handler's turn */
    EXPECT_GE(ep_errors(c.sender), 1u) << "the ep's failure was not reported";
    /* The target keeps serving a while: what the relay handed to tcp
     * before it froze has long arrived. */
    hold_for(0.5, "the target drains what reached it before the freeze");
    ASSERT_EQ("ok", c.target->call("stop"));
    const Received before = expect_intact(c.target);
    EXPECT_GT(before.messages, 0u);
    EXPECT_LE(before.messages, s.sent);

    /* Thawed, the relay forwards nothing the sender was told failed. */
    const uint64_t beat = heartbeat_ns(0, c.relay->pid());
    c.relay->kill(SIGCONT);
    ASSERT_TRUE(wait_until([&] {
        return heartbeat_ns(0, c.relay->pid()) > beat;
    }, 5)) << "no heartbeat after SIGCONT";
    ASSERT_TRUE(c.target->send("serve"));
    hold_for(0.5, "a thawed relay forwards what it holds within milliseconds");
    ASSERT_EQ("ok", c.target->call("stop"));
    /* At most the one message the relay had begun to send when it was
     * stopped (past its last check of the fence: the operator guide's
     * "a frozen relay resumes"); nothing of the pieces behind it. */
    EXPECT_LE(expect_intact(c.target).messages, before.messages + 1)
            << "messages arrived after the sender was told they failed";
    EXPECT_TRUE(wait_counters(0, c.relay, [](const auto &r) {
        return r.relay.inflight == 0;
    }, 5)) << "the thawed relay still holds pieces";
}

TEST_F(PxnAmFaults, TargetGoneWithMessagesQueuedFailsItsSenderAndTheRelayServesOthers)
{
    PeerProcess *relay   = tcp_peer(0, 1, kHeartbeatDecides);
    PeerProcess *doomed  = tcp_peer(1, 1);
    PeerProcess *healthy = tcp_peer(1, 1);
    PeerProcess *first   = tcp_peer(0, 0, kHeartbeatDecides);
    PeerProcess *second  = tcp_peer(0, 2, kHeartbeatDecides);
    ASSERT_TRUE(relay && doomed && healthy && first && second);
    const Target a = target_buffer(doomed, 4096);
    const Target b = target_buffer(healthy, 1 << 20);
    source_buffer(second, 1 << 20, 43);
    ASSERT_EQ("ok", doomed->call("am listen"));
    ASSERT_EQ("ok", healthy->call("am listen"));
    ASSERT_EQ("ok", first->call("connect " + a.dev + " " + a.iface));
    ASSERT_EQ("ok", second->call("connect " + b.dev + " " + b.iface));

    /* The doomed target never progresses: first's messages wait at the
     * relay for its credit, the rest in first's ring. */
    ASSERT_TRUE(first->send(am_send(3, 100000)));
    ASSERT_TRUE(wait_ring_full(first)) << "first's ring never filled";
    ASSERT_TRUE(wait_counters(0, relay, [](const auto &r) {
        return r.relay.inflight >= 1;
    })) << "the relay holds none of first's messages";
    /* Meanwhile second's go through the same relay. */
    EXPECT_EQ(0, parse_sent(second->call(am_send(5, 50))).status);
    doomed->kill(SIGKILL);
    EXPECT_NE(-1000, doomed->wait(scaled_ms(5000))) << "not reaped";

    /* The relay's inner ep to it fails, and with it the route: first's
     * messages end with an error in bounded time. */
    const std::string done = first->receive(scaled_ms(15000));
    ASSERT_FALSE(done.empty()) << "sender hung behind a target that went";
    const Sent s = parse_sent(done);
    EXPECT_NE(0, s.status) << done;
    EXPECT_NE(1, s.status) << done;
    /* not the sender's own 10 s bound on UCS_ERR_NO_RESOURCE */
    EXPECT_NE(int(UCS_ERR_TIMED_OUT), s.status) << done;
    EXPECT_EQ("ok", first->call("progress 100")); /* the handler's turn */
    EXPECT_GE(ep_errors(first), 1u) << "the ep's failure was not reported";
    EXPECT_EQ(0u, ep_errors(second));
    EXPECT_GE(counters(0, relay).relay.failed_pieces, 1u);
    EXPECT_EQ(0u, counters(0, relay).relay.rejected);
    /* It frees what it held for it: the piece, and the route once first
     * lets it go (a new connect destroys the failed ep). */
    EXPECT_TRUE(wait_counters(0, relay, [](const auto &r) {
        return r.relay.inflight == 0;
    }, 5)) << "the relay still holds first's piece";
    ASSERT_EQ("ok", first->call("connect " + b.dev + " " + b.iface));
    EXPECT_TRUE(wait_counters(0, relay, [](const auto &r) {
        return r.relay.routes_active == 1; /* healthy's, shared */
    }, 5)) << "routes held: " << counters(0, relay).relay.routes_active;

    /* The relay serves on: messages of both senders and a put. */
    ASSERT_TRUE(healthy->send("serve"));
    EXPECT_EQ(0, parse_sent(second->call(am_send(5, 500))).status);
    EXPECT_EQ(0, parse_sent(first->call(am_send(7, 500))).status);
    EXPECT_EQ("Success", put(second, b, 1 << 20, 65536));
    ASSERT_EQ("ok", healthy->call("stop"));
    EXPECT_EQ("ok", healthy->call("check 43 0 1048576"));
    EXPECT_EQ("ok", healthy->call("progress 300"));
    EXPECT_EQ(1050u, expect_intact(healthy).messages);
}

/* A target that closes its iface and lives on with another (the process's
 * inner tcp iface and connection stay up, so no transport error says it
 * went): its port ends the flows
 * into that iface at their relays (kAmGrantGone), and a sender whose
 * messages wait for its credit fails in bounded time instead of waiting
 * for ever (UCX's test_uct_peer_failure.purge_failed_peer hung there). */
TEST_F(PxnAmFaults, TargetIfaceClosedInALiveProcessFailsItsSenderInsteadOfHanging)
{
    PeerProcess *relay  = tcp_peer(0, 1, kHeartbeatDecides);
    PeerProcess *target = tcp_peer(1, 1);
    PeerProcess *sender = tcp_peer(0, 0, kHeartbeatDecides);
    ASSERT_TRUE(relay && target && sender);
    const Target t = target_buffer(target, 4096);
    ASSERT_EQ("ok", target->call("am listen"));
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    ASSERT_TRUE(target->send("serve"));
    EXPECT_EQ(0, parse_sent(sender->call(am_send(3, 10))).status) << "the flow's grant";
    ASSERT_EQ("ok", target->call("stop"));
    ASSERT_EQ("ok", target->call("am close keep"));

    /* More than one credit window: some messages must wait for a grant */
    const auto start = std::chrono::steady_clock::now();
    const std::string done = sender->call(am_send(3, 4 * kWindow), scaled_ms(20000));
    ASSERT_FALSE(done.empty()) << "sender hung behind a closed iface";
    EXPECT_EQ(int(UCS_ERR_CONNECTION_RESET), parse_sent(done).status) << done;
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
              scaled_s(5.0));
    EXPECT_EQ("ok", sender->call("progress 100")); /* the handler's turn */
    EXPECT_GE(ep_errors(sender), 1u) << "the ep's failure was not reported";
    EXPECT_TRUE(wait_counters(0, relay, [](const auto &r) {
        return r.relay.inflight == 0;
    }, 5)) << "the relay still holds the sender's piece";
    EXPECT_EQ("ok", target->call("progress 100")); /* still alive */
}

TEST_F(PxnAmFaults, MalformedAmPiecesAreRefusedAndTheRelayServesOthers)
{
    /* tcp's send segments as the user sets them (pxn sizes them only where
     * nobody did): the relay's limit for a message (8168 bytes) is then well
     * inside a slot (64 KiB), so pieces can lie past it */
    CrossRail c = cross_rail(1 << 20, 47, {"UCX_TCP_TX_SEG_SIZE=8k"});
    ASSERT_NE(nullptr, c.sender);
    ASSERT_EQ("ok", c.target->call("am listen"));
    EXPECT_EQ(0, parse_sent(c.sender->call(am_send(3, 20))).status);

    BackgroundProcess hostile;
    std::string error;
    ASSERT_TRUE(hostile.start("", {},
                              {app("pxn_hostile_sender"), group(0), "node0",
                               "rail1", "am", c.t.dev, c.t.iface},
                              "/tmp/pxn-hostile-am-" + group(0) + ".log", &error))
            << error;
    EXPECT_EQ(0, hostile.wait(scaled_ms(60000))) << hostile.output();
    EXPECT_NE(std::string::npos, hostile.output().find("hostile am: 11 of 11 refused"))
            << hostile.output();
    const auto r = counters(0, c.relay).relay;
    EXPECT_EQ(11u, r.rejected);
    EXPECT_EQ(0u, r.failed_pieces);

    /* Nothing of them reached the target; the relay serves on. */
    EXPECT_EQ(0, parse_sent(c.sender->call(am_send(3, 20))).status);
    EXPECT_EQ("Success", put(c.sender, c.t, 1 << 20, 65536));
    EXPECT_EQ("ok", c.target->call("check 47 0 1048576"));
    EXPECT_EQ("ok", c.target->call("progress 300"));
    EXPECT_EQ(40u, expect_intact(c.target).messages);
}

TEST_F(PxnAmFaults, ReceiverThatNeverProgressesStopsTheSenderAndPendingResumesIt)
{
    CrossRail c = cross_rail(4096, 1);
    ASSERT_NE(nullptr, c.sender);
    ASSERT_EQ("ok", c.target->call("am listen"));

    /* Credit, then the relay's hold (one parked piece) and the sender's
     * ring: then UCS_ERR_NO_RESOURCE, however often the sender tries. */
    const Sent s = parse_sent(c.sender->call(am_send(3, 100000, "nopending")));
    EXPECT_EQ(int(UCS_ERR_NO_RESOURCE), s.status);
    EXPECT_GT(s.sent, 0u);
    uint64_t sent = s.sent;
    /* That first one may be the ring waiting for the relay to take its
     * pieces: the sender goes on trying (and progressing) until the relay
     * has parked. */
    const std::string busy = "busy 100000";
    const Sent filled = parse_sent(c.sender->call(am_send(3, 100000, busy),
                                                  scaled_ms(60000)));
    ASSERT_EQ(int(UCS_ERR_NO_RESOURCE), filled.status);
    sent += filled.sent;
    ASSERT_TRUE(wait_counters(0, c.relay, [](const auto &r) {
        return r.relay.inflight >= 1;
    })) << "the relay holds no piece";
    const uint64_t rss = rss_kib(c.relay->pid());
    ASSERT_NE(0u, rss);
    /* 10^5 attempts more, the sender progressing between them */
    const Sent more = parse_sent(c.sender->call(am_send(3, 100000, busy),
                                                scaled_ms(60000)));
    ASSERT_EQ(int(UCS_ERR_NO_RESOURCE), more.status);
    sent += more.sent;
    /* Bounded by the credit window and the slots, not by the attempts. */
    const uint64_t per_slot = kSlot / ((kBytes + 7) / 8 * 8);
    EXPECT_LE(sent, kWindow + (kSlots + 1) * per_slot);
    const auto r = counters(0, c.relay).relay;
    EXPECT_LE(r.inflight, kSlots);
    EXPECT_EQ(0u, r.failed_pieces);
    EXPECT_LE(rss_kib(c.relay->pid()), rss + 2048) << "the relay grew";

    /* pending_add: the callback comes once the receiver progresses. */
    ASSERT_TRUE(c.sender->send(am_send(3, 500, "pending")));
    EXPECT_EQ("", c.sender->receive(500)) << "done without the receiver";
    ASSERT_TRUE(c.target->send("serve"));
    const Sent p = parse_sent(c.sender->receive(scaled_ms(30000)));
    ASSERT_EQ("ok", c.target->call("stop"));
    EXPECT_EQ(0, p.status);
    EXPECT_EQ(500u, p.sent);
    EXPECT_GE(p.dispatches, 1u);
    EXPECT_EQ(0u, ep_errors(c.sender));
    EXPECT_EQ("ok", c.target->call("progress 300"));
    EXPECT_EQ(sent + 500, expect_intact(c.target).messages);
}

} // namespace
} // namespace pxn_test
