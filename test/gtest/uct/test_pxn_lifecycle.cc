/*
 * A process's life around pxn, seen from outside: fork() in a relay and in
 * a sender, before and after transfers, with children that exit at once,
 * close what they inherited (as a child calling ucp_cleanup does) or start
 * pxn afresh (their own relay); and what a relay releases for targets that
 * come and go.
 */
#include "pxn_transfer.h"

#include <csignal>
#include <dirent.h>

using pxn_test::PeerProcess;
using pxn_test::PxnTransfer;
using pxn_test::Target;
using pxn_test::scaled_ms;
using pxn_tools::split;

namespace {

class PxnLifecycle : public PxnTransfer {
protected:
    /* fork <mode> in `peer`: the child's pid, after checking that it exited
     * with 0; -1 otherwise. */
    int forked(PeerProcess *peer, const std::string &mode)
    {
        const auto reply = split(peer->call("fork " + mode, scaled_ms(30000)));
        EXPECT_EQ(3u, reply.size()) << mode;
        if ((reply.size() != 3) || (reply[0] != "fork")) {
            return -1;
        }
        EXPECT_EQ("0", reply[2]) << "the child of a fork " << mode;
        return std::stoi(reply[1]);
    }

    /* Open file descriptors of process `pid`. */
    static size_t open_fds(pid_t pid)
    {
        size_t n = 0;
        DIR *d = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
        for (dirent *e; (d != nullptr) && ((e = readdir(d)) != nullptr);) {
            n += (e->d_name[0] != '.');
        }
        if (d != nullptr) {
            closedir(d);
        }
        return n;
    }
};

TEST_F(PxnLifecycle, ForkedChildrenNeverTearDownTheParentsRelayOrLanes)
{
    PeerProcess *relay  = cma_peer(0, "r1");
    PeerProcess *target = cma_peer(1, "r1");
    PeerProcess *sender = cma_peer(0, "r0");
    ASSERT_TRUE(relay && target && sender);
    const std::string entry = entry_path(0, relay->pid());
    ASSERT_FALSE(entry.empty());

    /* before any transfer */
    for (const std::string mode : {"exit", "cleanup", "fresh"}) {
        const int child = forked(relay, mode);
        EXPECT_EQ(entry, entry_path(0, relay->pid())) << "after a fork " << mode;
        /* a child that started pxn afresh had an entry of its own (its exit
         * status says so), gone with it */
        EXPECT_EQ("", entry_path(0, child)) << mode;
    }
    const size_t size = 1 << 20;
    const Target t = target_buffer(target, size);
    source_buffer(sender, size, 81);
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    EXPECT_EQ("Success", put(sender, t, size, 65536));

    /* after transfers, in the relay and in the sender (its lane and ep) */
    for (PeerProcess *parent : {relay, sender}) {
        for (const std::string mode : {"exit", "cleanup", "fresh"}) {
            forked(parent, mode);
        }
    }
    EXPECT_EQ(entry, entry_path(0, relay->pid()));
    const uint64_t relayed = counters(0, relay).relay.bytes;
    EXPECT_EQ("Success", put(sender, t, size, 65536, 0, "zcopy"));
    EXPECT_EQ("ok", target->call("check 81 0 " + std::to_string(size)));
    EXPECT_GE(counters(0, relay).relay.bytes, relayed + size)
            << "the parent's relay stopped carrying its sender's puts";
    EXPECT_EQ(0u, counters(0, relay).relay.failed_pieces);
}

/* A relay serving ten targets that come and go (each exits after one put;
 * the sender's next connect replaces its ep, releasing the route) holds,
 * at the end, what the last one needs: one route, no sockets of the
 * others. (tcp needs no remote keys; the keys' part is
 * RelayLane.KeysOfARouteGoWhenTheLaneReleasesIt.) */
TEST_F(PxnLifecycle, RelayReleasesWhatItHeldForTargetsThatCameAndWent)
{
    PeerProcess *relay  = tcp_peer(0, 1);
    PeerProcess *sender = tcp_peer(0, 0);
    ASSERT_TRUE(relay && sender);
    const size_t size = 1 << 20;
    source_buffer(sender, size, 83);
    size_t fds_after_first = 0;
    for (int i = 0; i < 10; ++i) {
        PeerProcess *target = tcp_peer(1, 1);
        ASSERT_NE(nullptr, target);
        const Target t = target_buffer(target, size);
        ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface)) << i;
        EXPECT_EQ("Success", put(sender, t, size, 65536)) << i;
        EXPECT_EQ("ok", target->call("check 83 0 " + std::to_string(size))) << i;
        target->call("quit", scaled_ms(5000));
        target->wait(scaled_ms(5000));
        if (i == 0) {
            fds_after_first = open_fds(relay->pid());
        }
    }
    /* the last target's route and key stay (the sender still has its ep) */
    ASSERT_TRUE(wait_counters(0, relay, [](const auto &c) {
        return (c.relay.routes_active <= 1) && (c.relay.rkeys_held <= 1);
    }, 5)) << "routes " << counters(0, relay).relay.routes_active << ", keys "
           << counters(0, relay).relay.rkeys_held;
    EXPECT_LE(open_fds(relay->pid()), fds_after_first + 2);
    EXPECT_EQ(0u, counters(0, relay).relay.failed_pieces);
}

/* A sender that dies holding a lane, routes and keys: its relay frees
 * them within a second or two (its sweep of lane owners), without any
 * other pxn process opening the registry. */
TEST_F(PxnLifecycle, RelayFreesWhatADeadSenderHeld)
{
    PeerProcess *relay  = tcp_peer(0, 1);
    PeerProcess *target = tcp_peer(1, 1);
    PeerProcess *sender = tcp_peer(0, 0);
    ASSERT_TRUE(relay && target && sender);
    const Target t = target_buffer(target, 1 << 20);
    source_buffer(sender, 1 << 20, 85);
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    EXPECT_EQ("Success", put(sender, t, 1 << 20, 65536));
    ASSERT_EQ(1u, counters(0, relay).relay.routes_active);
    sender->kill(SIGKILL);
    sender->wait(scaled_ms(5000));
    EXPECT_TRUE(wait_counters(0, relay, [](const auto &c) {
        return (c.relay.routes_active == 0) && (c.relay.rkeys_held == 0);
    }, 5)) << "routes " << counters(0, relay).relay.routes_active << ", keys "
           << counters(0, relay).relay.rkeys_held;
}

/* The UCP program of a Python worker pool started with fork: the child
 * destroys the worker and context it inherited (or then also starts UCP
 * afresh, with a relay of its own); the parent's relay stays registered.
 * (The parent's 'epoll_ctl ... DEL failed' lines at its own cleanup come
 * from UCX's own tcp, whose child removed their registrations from the
 * epoll set both share: ucp_fork --without-pxn shows them too.) */
TEST(PxnFork, UcpChildrenCleaningUpLeaveTheParentsRelayRegistered)
{
    const std::string group = "fork" + std::to_string(getpid());
    for (const std::string mode : {"exit", "cleanup", "fresh"}) {
        const pxn_test::ChildResult r = pxn_test::run_program(
                {pxn_test::app("ucp_fork"), mode},
                {"UCX_TLS=pxn,tcp", "UCX_PXN_ENABLE=", "UCX_PXN_NET_TLS=tcp",
                 "UCX_PXN_GROUP=" + group});
        EXPECT_EQ(0, r.exit_code) << mode << "\n" << r.output;
        EXPECT_NE(std::string::npos, r.output.find("child 0\n")) << mode << "\n"
                                                                << r.output;
        EXPECT_NE(std::string::npos, r.output.find("parent_entry yes"))
                << mode << "\n" << r.output;
        EXPECT_EQ(std::string::npos, r.output.find("pxn:")) << mode << "\n"
                                                            << r.output;
    }
    pxn_test::remove_tree("/dev/shm/ucx-pxn-" + std::to_string(geteuid()) + "-" +
                          group);
}

} // namespace
