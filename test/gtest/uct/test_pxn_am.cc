/*
 * Active messages through pxn across emulated rails (inner tcp): a sender on
 * node 0 rail 0, the relay of rail 1 on node 0, a target on node 1 rail 1
 * whose handlers check every message (ucx_pxn_peer's "am" commands).
 */
#include "pxn_transfer.h"

#include <chrono>
#include <fstream>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>

namespace pxn_test {
namespace {

/* One thread of a child process stopped by ptrace while its other threads
 * run on (SIGSTOP would stop them all). It runs again when this ends. */
class StoppedThread {
public:
    StoppedThread() = default;
    ~StoppedThread()
    {
        if (tid_ > 0) {
            ptrace(PTRACE_DETACH, tid_, nullptr, nullptr);
        }
    }
    StoppedThread(const StoppedThread&) = delete;
    StoppedThread &operator=(const StoppedThread&) = delete;

    /* Stops the thread of `pid` named `comm` while it sleeps in ppoll (so it
     * holds no lock of the process); false and *why when it cannot. */
    bool stop(pid_t pid, const std::string &comm, std::string *why)
    {
        const std::string task = pxn_tools::thread_dir(pid, comm);
        tid_ = task.empty() ? -1 : atoi(task.c_str() + task.rfind('/') + 1);
        if ((tid_ <= 0) || (ptrace(PTRACE_SEIZE, tid_, nullptr, nullptr) != 0)) {
            *why = "no thread " + comm + " of " + std::to_string(pid) +
                   " to trace: " + strerror(errno);
            tid_ = -1;
            return false;
        }
        for (int attempt = 0; attempt < 1000; ++attempt) {
            int status = 0;
            if ((ptrace(PTRACE_INTERRUPT, tid_, nullptr, nullptr) != 0) ||
                (waitpid(tid_, &status, __WALL) != tid_)) {
                *why = std::string("PTRACE_INTERRUPT: ") + strerror(errno);
                return false;
            }
            long nr = -1;
            std::ifstream(task + "/syscall") >> nr;
            if (nr == SYS_ppoll) {
                return true;
            }
            ptrace(PTRACE_CONT, tid_, nullptr, nullptr);
            usleep(1000);
        }
        *why = "thread " + comm + " never stopped asleep";
        return false;
    }

private:
    pid_t tid_ = -1;
};

/* How often the thread of `pid` named `comm` went to sleep and was woken
 * (voluntary context switches); 0 when there is no such thread. */
uint64_t thread_wakeups(pid_t pid, const std::string &comm)
{
    const std::string task = pxn_tools::thread_dir(pid, comm);
    uint64_t switches = 0;
    std::ifstream status(task.empty() ? "/dev/null" : task + "/status");
    for (std::string key; status >> key;) {
        if (key == "voluntary_ctxt_switches:") {
            status >> switches;
        }
    }
    return switches;
}

class PxnAm : public PxnTransfer {
protected:
    /* PXN_TEST_AM_POLL=n: the test of UCX_PXN_AM_POLL shows what it checks
     * by failing without it */
    static std::string am_poll()
    {
        const char *v = getenv("PXN_TEST_AM_POLL");
        return (v != nullptr) ? v : "y";
    }

    /* "am <received> <bad> <out of order> <bytes>" as numbers */
    std::vector<uint64_t> stats(PeerProcess *peer)
    {
        std::vector<uint64_t> n;
        for (const auto &field : split(peer->call("am stats"))) {
            if (field != "am") {
                n.push_back(std::stoull(field));
            }
        }
        return n;
    }

    /* After `ms` more of the target's progress: it received `messages`,
     * none corrupted or out of order. */
    void expect_received_intact(PeerProcess *target, uint64_t messages,
                                int ms = 200)
    {
        EXPECT_EQ("ok", target->call("progress " + std::to_string(ms)));
        const auto n = stats(target);
        ASSERT_EQ(4u, n.size());
        EXPECT_EQ(messages, n[0]);
        EXPECT_EQ(0u, n[1]) << "corrupted messages";
        EXPECT_EQ(0u, n[2]) << "messages out of order";
    }

    /* The target progresses ("serve") while the sender sends, then stops. */
    std::string send_served(CrossRail &c, const std::string &what)
    {
        EXPECT_TRUE(c.target->send("serve"));
        const std::string done = c.sender->call(what, 60000);
        EXPECT_EQ("ok", c.target->call("stop"));
        return done;
    }

    /* The target listens, and a first message has gone through with the
     * flow's hello and first grant (which only the target's engine gives). */
    void open_flow(CrossRail &c)
    {
        ASSERT_EQ("ok", c.target->call("am listen"));
        ASSERT_EQ("0", status_of(send_served(c, "am send short 5 1 8")));
        ASSERT_EQ(1u, stats(c.target).at(0));
    }
};

TEST_F(PxnAm, IfaceOffersShortBcopyAndZcopyMessagesWithTruthfulLimits)
{
    CrossRail c = cross_rail(4096, 1);
    ASSERT_NE(nullptr, c.sender);
    const auto caps = split(c.sender->call("am caps"));
    ASSERT_EQ(7u, caps.size());
    EXPECT_EQ("7", caps[1]);                  /* short, bcopy and zcopy */
    const size_t max_short = std::stoul(caps[2]);
    const size_t max_bcopy = std::stoul(caps[3]);
    const size_t max_zcopy = std::stoul(caps[4]);
    const size_t max_hdr   = std::stoul(caps[5]);
    EXPECT_LE(max_short, 1024u);              /* staged in the call */
    /* inner tcp's am_bcopy less pxn's frame header: pxn sizes tcp's send
     * segments as its receive segments (64 KiB), so UCP's 8 KiB eager
     * messages with their headers go as one message */
    EXPECT_GT(max_bcopy, 8192u + 64);
    EXPECT_LT(max_bcopy, 65536u);
    /* a zcopy's header and payload are one message */
    EXPECT_GE(max_hdr, 64u);
    EXPECT_EQ(max_bcopy, max_zcopy + max_hdr);
    EXPECT_GE(std::stoul(caps[6]), 2u);
    /* one byte more than a limit is the caller's error */
    EXPECT_EQ("0", status_of(c.sender->call("am send short 0 1 " + caps[2])));
    EXPECT_NE("0", status_of(c.sender->call(
                      "am send short 0 1 " + std::to_string(max_short + 1))));
    /* "am send zcopy" sends an 8-byte header and <bytes> - 8 of payload */
    EXPECT_EQ("0", status_of(c.sender->call(
                      "am send zcopy 1 1 " + std::to_string(max_zcopy + 8))));
    EXPECT_NE("0", status_of(c.sender->call(
                      "am send zcopy 1 1 " + std::to_string(max_zcopy + 9))));
}

TEST_F(PxnAm, MessagesReachTheTargetsHandlersIntactAndInOrder)
{
    CrossRail c = cross_rail(4096, 1);
    ASSERT_NE(nullptr, c.sender);
    ASSERT_EQ("ok", c.target->call("am listen"));
    /* within one route's credit: the target need not progress meanwhile */
    EXPECT_EQ("0", status_of(c.sender->call("am send short 5 100 200")));
    EXPECT_EQ("0", status_of(c.sender->call("am send bcopy 7 20 4000")));
    EXPECT_EQ("0", status_of(c.sender->call("am send bcopy 31 10 8")));
    EXPECT_EQ("0", status_of(c.sender->call("am send iov 9 30 300")));
    EXPECT_EQ("0", status_of(c.sender->call("am send zcopy 9 20 5000")));
    EXPECT_EQ("0", status_of(c.sender->call("am send zcopy 12 5 8")));
    expect_received_intact(c.target, 185, 500);
    EXPECT_EQ(100u * 200 + 20 * 4000 + 10 * 8 + 30 * 300 + 20 * 5000 + 5 * 8,
              stats(c.target)[3]);
}

/* UCX_PXN_NET_CONNECT=wired, rc's way to reach a cross-rail peer without a
 * second network (tcp stands in for rc and for the to-iface transport
 * beside it): towards UCT pxn connects to ifaces and carries active
 * messages, and each relay wires its own ep-to-ep inner connection to the
 * target's port before its first put goes. */
TEST_F(PxnAm, WiredRelayConnectsItsOwnEpToEpRouteAndCarriesPutsAndMessages)
{
    const size_t size = 3 * kSlot + 123;
    const std::string log = "/tmp/pxn-wired-" + group(0) + ".%p";
    CrossRail c = cross_rail(size, 13, {"UCX_PXN_NET_CONNECT=wired",
                                        "UCX_LOG_LEVEL=debug",
                                        "UCX_LOG_FILE=" + log});
    ASSERT_NE(nullptr, c.sender);
    EXPECT_EQ("0", split(c.sender->call("info"))[3]) << "not to-iface";
    ASSERT_EQ("ok", c.target->call("am listen"));
    EXPECT_EQ("0", status_of(c.sender->call("am send bcopy 7 20 4000")));
    EXPECT_EQ("Success", put(c.sender, c.t, size, 10000));
    EXPECT_EQ("0", status_of(c.sender->call("am send zcopy 9 20 5000")));
    EXPECT_EQ("ok", c.target->call("check 13 0 " + std::to_string(size)));
    expect_received_intact(c.target, 40, 500);
    expect_healthy(0, c.relay, size + 20 * 4000 + 20 * 5000);
    /* a new ep: the old one's route ends (the target's port lets its ep
     * go), the new one is wired again */
    ASSERT_EQ("ok", c.sender->call("connect " + c.t.dev + " " + c.t.iface));
    source_buffer(c.sender, size, 14);
    EXPECT_EQ("Success", put(c.sender, c.t, size, 10000));
    EXPECT_EQ("ok", c.target->call("check 14 0 " + std::to_string(size)));

    /* UCX's debug log, one file per process, written out when it ends */
    const std::vector<PeerProcess*> order = {c.relay, c.target, c.sender};
    std::vector<pid_t> pids;
    for (PeerProcess *p : order) {
        pids.push_back(p->pid());
    }
    peers_.clear();
    std::vector<std::string> logs;
    for (pid_t pid : pids) {
        std::string path = log;
        path.replace(path.find("%p"), 2, std::to_string(pid));
        std::ifstream in(path);
        logs.emplace_back(std::istreambuf_iterator<char>(in),
                          std::istreambuf_iterator<char>());
        std::remove(path.c_str());
    }
    const auto count = [](const std::string &text, const std::string &what) {
        size_t n = 0;
        for (size_t at = text.find(what); at != std::string::npos;
             at = text.find(what, at + 1)) {
            ++n;
        }
        return n;
    };
    EXPECT_EQ(2u, count(logs[0], " wired\n")) << "routes wired by the relay";
    EXPECT_EQ(0u, count(logs[0], "wiring failed"));
    /* at the target: the first route's ep when the sender's first ep
     * went, the second's when the relay closed */
    EXPECT_EQ(1u, count(logs[1], "(gen 1) unwired")) << logs[1];
    EXPECT_EQ(1u, count(logs[1], "(gen 2) unwired"));
}

/* A target that never answers a relay's wire request (stopped before the
 * sender connects): the put waiting for that route fails once the wiring
 * times out (UCX_PXN_HEARTBEAT_TIMEOUT), instead of waiting for ever, and
 * the relay stays up. */
TEST_F(PxnAm, WiredRouteWhoseTargetNeverAnswersFailsItsPutInsteadOfHanging)
{
    const std::vector<std::string> wired = {"UCX_PXN_NET_CONNECT=wired"};
    PeerProcess *relay  = tcp_peer(0, 1, wired);
    PeerProcess *target = tcp_peer(1, 1, wired);
    PeerProcess *sender = tcp_peer(0, 0, wired);
    ASSERT_TRUE(relay && target && sender);
    const Target t = target_buffer(target, kSlot);
    source_buffer(sender, kSlot, 17);
    ASSERT_TRUE(target->stop());
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    const auto start = std::chrono::steady_clock::now();
    EXPECT_NE("Success", put(sender, t, kSlot, kSlot));
    const double waited = std::chrono::duration<double>(
            std::chrono::steady_clock::now() - start).count();
    target->kill(SIGCONT);
    EXPECT_LT(waited, kHeartbeatTimeout + 10.0);
    const auto r = counters(0, relay);
    EXPECT_EQ(0u, r.relay.rejected);
    EXPECT_GE(r.relay.failed_pieces, 1u);
    EXPECT_NE("", relay->call("info")) << "the relay went down";
}

TEST_F(PxnAm, ManyMoreMessagesThanOneCreditWindowAllArrive)
{
    CrossRail c = cross_rail(4096, 1);
    ASSERT_NE(nullptr, c.sender);
    ASSERT_EQ("ok", c.target->call("am listen"));
    /* 16 MB: the route's credit (256 KiB) comes back again and again */
    const std::string done = send_served(c, "am send bcopy 3 4000 4000");
    EXPECT_EQ("0", status_of(done)) << done;
    expect_received_intact(c.target, 4000);
}

/* A message goes out in the posting call: an application may send one and
 * then wait for its answer elsewhere, never progressing its worker again
 * (nixlbench sends NIXL's notification, then waits in its own barrier). */
TEST_F(PxnAm, AMessageReachesItsTargetWithNoMoreProgressOfTheSender)
{
    CrossRail c = cross_rail(4096, 1);
    ASSERT_NE(nullptr, c.sender);
    ASSERT_EQ("ok", c.target->call("am listen"));
    /* lane, route and the flow's first grant (from the target's engine),
     * then one message at a time: "nopending" neither flushes nor
     * progresses after posting, and the sender is not called again */
    ASSERT_EQ("0", status_of(c.sender->call("am send short 3 1 64")));
    uint64_t expected = 1;
    for (const std::string kind : {"short", "bcopy", "zcopy"}) {
        ASSERT_EQ("0", status_of(c.sender->call("am send " + kind + " 3 1 64 nopending")));
        ++expected;
        EXPECT_TRUE(wait_until([&] {
            return (c.target->call("progress 50") == "ok") &&
                   (stats(c.target)[0] == expected);
        }, 5)) << kind << ": the message waits for the sender's progress";
        expected = stats(c.target)[0];
    }
    EXPECT_EQ(4u, expected);
}

/* UCP queues its ep flush as a pending request when the ep has pending
 * requests, and more behind it: dispatched, the flush must not wait for
 * those that came after it (it did, for ever: ucx_perftest's ucp_put_bw
 * over UCP's RMA emulation hung on the target's replies). "flushpending"
 * adds, at each UCS_ERR_NO_RESOURCE, a request that flushes the ep, then
 * the message's own, and waits for both. */
TEST_F(PxnAm, AFlushDispatchedFromPendingDoesNotWaitForTheRequestsBehindIt)
{
    CrossRail c = cross_rail(4096, 1);
    ASSERT_NE(nullptr, c.sender);
    ASSERT_EQ("ok", c.target->call("am listen"));
    ASSERT_TRUE(c.target->send("serve"));
    const std::string done = c.sender->call("am send bcopy 3 2000 4000 flushpending",
                                            scaled_ms(60000));
    EXPECT_EQ("ok", c.target->call("stop"));
    /* done <status> <ns> <sent> <dispatches> */
    const auto f = split(done);
    ASSERT_EQ(5u, f.size()) << done;
    EXPECT_EQ("0", f[1]) << done;
    EXPECT_EQ("2000", f[3]);
    EXPECT_NE("0", f[4]) << "never queued: the case was not made";
}

/* A sender's eps come and go (UCP's, a test's): each new ep of the worker
 * gets a new route at the relay, so a new flow with credit of its own. A
 * route that ends says so (a bye), and the target takes back the credit
 * that flow held: else every 16th route (a 4 MiB inbox, 256 KiB windows)
 * would find no room left and wait for ever (UCX's
 * test_uct_ep.disconnect_after_send hung at the 17th). */
TEST_F(PxnAm, EpsMadeAndDestroyedAgainAndAgainLeaveTheTargetsCreditWhole)
{
    CrossRail c = cross_rail(4096, 1);
    ASSERT_NE(nullptr, c.sender);
    ASSERT_EQ("ok", c.target->call("am listen"));
    ASSERT_TRUE(c.target->send("serve"));
    for (int i = 0; i < 40; ++i) {
        ASSERT_EQ("ok", c.sender->call("connect " + c.t.dev + " " + c.t.iface))
                << "ep " << i;
        const std::string done = c.sender->call("am send bcopy 3 10 4000", 30000);
        ASSERT_EQ("0", status_of(done)) << "ep " << i << ": " << done;
    }
    EXPECT_EQ("ok", c.target->call("stop"));
    expect_received_intact(c.target, 400);
}

/* The target's engine thread stopped (ptrace), asleep, once the flow has
 * its first grant: the target's own progress takes the relay's frames off
 * the port (UCX_PXN_AM_POLL), so a rank bound to one core waits for no
 * engine thread sharing that core. (With UCX_PXN_AM_POLL=n nothing arrives
 * until the engine runs again.) */
TEST_F(PxnAm, TargetsOwnProgressReceivesWhileItsEngineThreadIsStopped)
{
    CrossRail c = cross_rail(4096, 1, {"UCX_PXN_AM_POLL=" + am_poll()});
    ASSERT_NE(nullptr, c.sender);
    ASSERT_NO_FATAL_FAILURE(open_flow(c));
    StoppedThread engine;
    std::string why;
    ASSERT_TRUE(engine.stop(c.target->pid(), "ucx-pxn", &why)) << why;
    /* 100 x (200 + 16) bytes: within the first grant (256 KiB) */
    EXPECT_EQ("0", status_of(c.sender->call("am send short 5 100 200")));
    EXPECT_EQ("ok", c.target->call("progress 500"));
    const auto n = stats(c.target);
    EXPECT_EQ(101u, n.at(0)) << "with the target's engine thread stopped";
    EXPECT_EQ(0u, n.at(1));
    EXPECT_EQ(0u, n.at(2));
}

/* The room a target's drain gives back goes back to its sources from the
 * draining thread (AmPort::give_grants), not from a woken engine thread:
 * with the target's engine stopped, a flow of three credit windows still
 * arrives whole. (Before, the drain woke the engine for each quarter
 * window, and the flow stopped after its first window.) */
TEST_F(PxnAm, TargetsOwnProgressGrantsTheRoomItDrainsWhileItsEngineIsStopped)
{
    CrossRail c = cross_rail(4096, 1);
    ASSERT_NE(nullptr, c.sender);
    ASSERT_NO_FATAL_FAILURE(open_flow(c));
    StoppedThread engine;
    std::string why;
    ASSERT_TRUE(engine.stop(c.target->pid(), "ucx-pxn", &why)) << why;
    ASSERT_TRUE(c.target->send("serve"));
    /* 200 x (4000 + 16) bytes: three windows of 256 KiB */
    const std::string done = c.sender->call("am send bcopy 7 200 4000", 60000);
    EXPECT_EQ("ok", c.target->call("stop"));
    EXPECT_EQ("0", status_of(done)) << done;
    expect_received_intact(c.target, 201);
}

/* A target that keeps progressing (a rank polling for its next message)
 * receives the relay's frames itself, and its engine thread is not woken
 * for them: before, the engine woke for each message (its sleep watched
 * the port), and on a rank bound to one core each wakeup took that core
 * from the rank (run 17: 8 B latency 3-5x same-rail, bound). It still
 * wakes for what only it does (a new source's grant), once when the target
 * starts polling, and as an idle engine does (every 100 ms) to see whether
 * the target still polls. */
TEST_F(PxnAm, MessagesToATargetThatKeepsPollingWakeNoEngineThreadEach)
{
    CrossRail c = cross_rail(4096, 1);
    ASSERT_NE(nullptr, c.sender);
    ASSERT_NO_FATAL_FAILURE(open_flow(c));
    ASSERT_TRUE(c.target->send("serve"));
    usleep(50000);

    const uint64_t woken = thread_wakeups(c.target->pid(), "ucx-pxn");
    ASSERT_NE(0u, woken) << "no engine thread found in the target";
    const auto     start = std::chrono::steady_clock::now();
    constexpr int  kMessages = 500;
    for (int i = 0; i < kMessages; ++i) { /* one at a time, as ping-pong */
        ASSERT_EQ("0", status_of(c.sender->call("am send short 5 1 8")));
    }
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - start).count();
    const uint64_t wakeups = thread_wakeups(c.target->pid(), "ucx-pxn") - woken;
    EXPECT_EQ("ok", c.target->call("stop"));
    expect_received_intact(c.target, kMessages + 1);
    /* a look every 100 ms and a grant or two (a slow machine's run may
     * take seconds: a look every 8 ms allowed); before: one or more per
     * message */
    EXPECT_LT(wakeups, uint64_t(kMessages / 10 + ms / 8 + 10))
            << kMessages << " messages in " << ms << " ms";
}

/* A relay whose lanes are all held by live senders refuses a new sender's
 * claim: that sender's ep fails with UCS_ERR_UNREACHABLE, never with
 * UCS_ERR_NO_RESOURCE, which asks the caller to retry (it would retry for
 * ever: UCX's test_many2one_am did). */
TEST_F(PxnAm, SenderThatFindsEveryLaneTakenFailsAndIsNotToldToRetry)
{
    const std::vector<std::string> one_lane = {"UCX_PXN_LANES=1"};
    CrossRail c = cross_rail(4096, 1, one_lane);
    ASSERT_NE(nullptr, c.sender);
    ASSERT_EQ("ok", c.target->call("am listen"));
    ASSERT_TRUE(c.target->send("serve"));
    EXPECT_EQ("0", status_of(c.sender->call("am send short 5 1 8"))) << "holds the lane";
    PeerProcess *second = tcp_peer(0, 2, one_lane);
    ASSERT_NE(nullptr, second);
    /* "connect" flushes the new ep until its route is answered */
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ("err Destination is unreachable",
              second->call("connect " + c.t.dev + " " + c.t.iface, 30000));
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
              pxn_test::scaled_s(5.0));
    EXPECT_EQ("ok", c.target->call("stop"));
    EXPECT_EQ(1u, stats(c.target).at(0));
}

/* Every message counted once where it passed: staged by the sender,
 * forwarded by the relay of rail 1 (the first message of a flow waits for
 * the target's first grant), handed to the target's handler. */
TEST_F(PxnAm, CountersShowEachMessageAtTheSenderTheRelayAndTheTarget)
{
    constexpr uint64_t kMessages = 50, kBytes = 1000; /* within one window */
    CrossRail c = cross_rail(4096, 1);
    ASSERT_NE(nullptr, c.sender);
    ASSERT_EQ("ok", c.target->call("am listen"));
    pxn::abi::ProcessCounters relay = {}, sender = {}, target = {};
    ASSERT_TRUE(pxn_tools::read_counters(group(0), c.relay->pid(), &relay));
    ASSERT_TRUE(pxn_tools::read_counters(group(0), c.sender->pid(), &sender));
    ASSERT_TRUE(pxn_tools::read_counters(group(1), c.target->pid(), &target));

    EXPECT_EQ("0", status_of(c.sender->call("am send bcopy 4 " +
                                            std::to_string(kMessages) + " " +
                                            std::to_string(kBytes))));
    EXPECT_EQ("ok", c.target->call("progress 500"));
    EXPECT_EQ(kMessages, stats(c.target).at(0));
    /* the engines fold the processes' counters into their files */
    EXPECT_TRUE(wait_counters(0, c.relay, [&](const auto &now) {
        return now.relay.am_messages == relay.relay.am_messages + kMessages;
    }));
    EXPECT_TRUE(wait_counters(0, c.sender, [&](const auto &now) {
        return now.sender.am_sent == sender.sender.am_sent + kMessages;
    }));
    EXPECT_TRUE(wait_counters(1, c.target, [&](const auto &now) {
        return now.sender.am_received == target.sender.am_received + kMessages;
    }));

    pxn::abi::ProcessCounters after = {};
    ASSERT_TRUE(pxn_tools::read_counters(group(0), c.relay->pid(), &after));
    EXPECT_EQ(kMessages, after.relay.am_messages - relay.relay.am_messages);
    EXPECT_EQ(kMessages * kBytes, after.relay.am_bytes - relay.relay.am_bytes);
    const uint64_t pieces = after.relay.am_pieces - relay.relay.am_pieces;
    EXPECT_GE(pieces, 1u);
    EXPECT_LE(pieces, kMessages);
    EXPECT_EQ(pieces, after.relay.pieces - relay.relay.pieces) << "puts counted";
    EXPECT_GE(after.relay.am_credit_waits - relay.relay.am_credit_waits, 1u);
    ASSERT_TRUE(pxn_tools::read_counters(group(0), c.sender->pid(), &after));
    EXPECT_EQ(kMessages, after.sender.am_sent - sender.sender.am_sent);
    EXPECT_EQ(0u, after.sender.am_received - sender.sender.am_received);
    ASSERT_TRUE(pxn_tools::read_counters(group(1), c.target->pid(), &after));
    EXPECT_EQ(kMessages, after.sender.am_received - target.sender.am_received);
    EXPECT_EQ(0u, after.sender.am_sent - target.sender.am_sent);
    EXPECT_EQ(0u, after.sender.am_refused - target.sender.am_refused);
}

/* A sender whose address of the target names an iface the target does not
 * have (its AM cookie, the address's last 4 bytes, changed): the target's
 * port drops the relay's hello and counts it, the message waits for a
 * credit that never comes and reaches no handler. */
TEST_F(PxnAm, FramesForNoSuchIfaceAreRefusedAndCounted)
{
    CrossRail c;
    c.relay  = tcp_peer(0, 1);
    c.target = tcp_peer(1, 1);
    c.sender = tcp_peer(0, 0);
    ASSERT_TRUE(c.relay && c.target && c.sender);
    c.t = target_buffer(c.target, 4096);
    ASSERT_GT(c.t.iface.size(), 8u);
    ASSERT_EQ("ok", c.target->call("am listen"));
    const std::string wrong = c.t.iface.substr(0, c.t.iface.size() - 8) +
                              "f0ffff7f";
    ASSERT_NE(wrong, c.t.iface);
    ASSERT_EQ("ok", c.sender->call("connect " + c.t.dev + " " + wrong));
    pxn::abi::ProcessCounters relay = {}, target = {};
    ASSERT_TRUE(pxn_tools::read_counters(group(0), c.relay->pid(), &relay));
    ASSERT_TRUE(pxn_tools::read_counters(group(1), c.target->pid(), &target));

    /* staged, then flushed for ever: the reply never comes (TearDown ends it) */
    ASSERT_TRUE(c.sender->send("am send bcopy 2 1 64"));
    EXPECT_TRUE(wait_counters(1, c.target, [&](const auto &now) {
        return now.sender.am_refused > target.sender.am_refused;
    }));
    EXPECT_TRUE(wait_counters(0, c.relay, [&](const auto &now) {
        return now.relay.am_credit_waits > relay.relay.am_credit_waits;
    }));
    EXPECT_EQ("ok", c.target->call("progress 200"));
    EXPECT_EQ(0u, stats(c.target).at(0));
    pxn::abi::ProcessCounters after = {};
    ASSERT_TRUE(pxn_tools::read_counters(group(0), c.relay->pid(), &after));
    EXPECT_EQ(relay.relay.am_messages, after.relay.am_messages);
    ASSERT_TRUE(pxn_tools::read_counters(group(1), c.target->pid(), &after));
    EXPECT_EQ(target.sender.am_received, after.sender.am_received);
}

} // namespace
} // namespace pxn_test
