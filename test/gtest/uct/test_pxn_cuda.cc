/*
 * GPU memory through pxn (the CUDA staging backend), at the UCT level:
 * sender, relay and target are processes on the same host (the relay's
 * inner transport is cuda_ipc, which reads and writes GPU memory across
 * processes); emulated nodes and rails by UCX_PXN_NODE_ID and
 * UCX_PXN_RAIL_MAP. As on a real node, the GPU of rail X is X's index
 * modulo the GPUs present: on one GPU everything shares it; with two or
 * more, the staging hop crosses devices (senders on railA use GPU 0, the
 * relay and the target of railB GPU 1). Every byte is verified, canaries
 * around target buffers too. Skipped (with a message) where no GPU is
 * usable.
 *
 * On the GPU machine: contrib/gpu/run.sh tests (docs/gpu.md).
 */
#include <apps/peer_process.h>
#include <uct/pxn/pxn_cuda.h>
#include <uct/pxn/pxn_gather.h>

#include "../common/test_helpers.h"

#include <gtest/gtest.h>

#include <csignal>
#include <iostream>
#include <memory>
#include <string>
#include <unistd.h>

using pxn_tools::PeerProcess;
using pxn_tools::split;

namespace {

constexpr size_t kSlot  = 1 << 20; /* UCX_PXN_SLOT_SIZE here */
constexpr size_t kSlots = 4;       /* UCX_PXN_SLOTS here */

struct Target {
    std::string dev, iface, addr, rkey;
};

/* GPUs present (1 in a build without CUDA, where the tests skip). */
int gpu_count()
{
#ifdef PXN_HAVE_CUDA
    return pxn::uct::CudaDriver::get()->devices;
#else
    return 1;
#endif
}

class PxnCuda : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (!pxn::uct::cuda_available()) {
            GTEST_SKIP() << "no usable GPU here (CUDA driver and a device are "
                            "needed; run on the GPU machine)";
        }
        const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
        group_ = std::string("g") +
                 std::to_string(std::hash<std::string>()(info->name()) % 100000);
    }

    void TearDown() override
    {
        peers_.clear();
        for (int node = 0; node < 2; ++node) {
            pxn_test::run_program({"/bin/rm", "-rf", "/dev/shm/ucx-pxn-" +
                                   std::to_string(geteuid()) + "-" + group(node)});
        }
    }

    std::string group(int node) const
    {
        return group_ + "-node" + std::to_string(node);
    }

    /* A pxn process of node `node` whose GPU NIC is on `rail`. */
    PeerProcess *peer(int node, const std::string &rail,
                      std::vector<std::string> env = {},
                      const std::string &inner = "cuda_ipc")
    {
        const std::string device = (inner == "cma") ? "memory" :
                                   (inner == "tcp") ? "lo" : "cuda";
        env.insert(env.begin(), "UCX_PXN_CUDA_DEVICE=" +
                                std::to_string((rail.back() - 'A') % gpu_count()));
        if (inner == "tcp") {
            /* lo is no GPU's nearest NIC: without this a process with a
             * GPU would not be at home on it, and so no target. */
            env.insert(env.begin(), "UCX_PXN_HOME_DEVICE=lo");
        }
        env.insert(env.begin(),
                   {"UCX_PXN_NODE_ID=node" + std::to_string(node),
                    "UCX_PXN_GROUP=" + group(node),
                    "UCX_PXN_NET_TLS=" + inner,
                    "UCX_PXN_RAIL_MAP=" + device + ":" + rail,
                    "UCX_PXN_SLOT_SIZE=" + std::to_string(kSlot),
                    "UCX_PXN_SLOTS=" + std::to_string(kSlots),
                    "UCX_PXN_HEARTBEAT_TIMEOUT=2s"});
        peers_.emplace_back(new PeerProcess());
        std::string error;
        if (!peers_.back()->start(pxn_test::app("ucx_pxn_peer"),
                                  "", env, "pxn_" + inner, "pxn", device,
                                  &error)) {
            ADD_FAILURE() << error;
            return nullptr;
        }
        return peers_.back().get();
    }

    Target target_buffer(PeerProcess *p, size_t size, bool gpu = true)
    {
        auto info  = split(p->call("info"));
        auto alloc = split(p->call("alloc " + std::to_string(size) +
                                   (gpu ? " cuda" : "")));
        EXPECT_EQ(4u, info.size());
        EXPECT_EQ(3u, alloc.size()) << (alloc.empty() ? "" : alloc[0]);
        Target t;
        if ((info.size() == 4) && (alloc.size() == 3)) {
            t = {info[1], info[2], alloc[1], alloc[2]};
        }
        return t;
    }

    void source_buffer(PeerProcess *p, size_t size, int seed, bool gpu = true)
    {
        EXPECT_EQ("alloc", split(p->call("alloc " + std::to_string(size) +
                                         (gpu ? " cuda" : "")))[0]);
        EXPECT_EQ("ok", p->call("fill " + std::to_string(seed)));
    }

    static std::string status_of(const std::string &done)
    {
        std::string status;
        return pxn_tools::parse_done(done, &status, nullptr) ? status : done;
    }

    std::string move(PeerProcess *s, const std::string &op, const Target &t,
                     size_t bytes, size_t chunk, size_t offset = 0)
    {
        return status_of(s->call(op + " " + t.addr + " " + t.rkey + " " +
                                 std::to_string(bytes) + " " +
                                 std::to_string(chunk) + " " +
                                 std::to_string(offset),
                                 pxn_test::scaled_ms(60000)));
    }

    std::string put(PeerProcess *s, const Target &t, size_t bytes, size_t chunk,
                    size_t offset = 0)
    {
        return move(s, "put zcopy", t, bytes, chunk, offset);
    }

    pxn::abi::ProcessCounters counters(int node, PeerProcess *p)
    {
        pxn::abi::ProcessCounters c = {};
        EXPECT_TRUE(pxn_tools::read_counters(group(node), p->pid(), &c));
        return c;
    }

    void expect_healthy(PeerProcess *relay, size_t bytes)
    {
        const auto c = counters(0, relay);
        EXPECT_GE(c.relay.bytes, bytes);
        EXPECT_EQ(0u, c.relay.rejected);
        EXPECT_EQ(0u, c.relay.failed_pieces);
        EXPECT_EQ(0u, c.sender.fallback_bytes);
    }

    /* relay node 0 rail B, target node 1 rail B, sender node 0 rail A */
    bool trio(PeerProcess **relay, PeerProcess **target, PeerProcess **sender,
              const std::vector<std::string> &env = {})
    {
        *relay  = peer(0, "railB", env);
        *target = peer(1, "railB", env);
        *sender = peer(0, "railA", env);
        return *relay && *target && *sender;
    }

    /* A trio whose cuda_ipc does gets (without NVLink, one GPU, it does
     * not unless told), a target buffer of `size` bytes filled with `seed`
     * and a GPU buffer of the sender, connected to it. */
    bool get_trio(size_t size, unsigned seed, PeerProcess **relay,
                  PeerProcess **sender, Target *t)
    {
        PeerProcess *target;
        if (!trio(relay, &target, sender, {"UCX_CUDA_IPC_ENABLE_GET_ZCOPY=y"})) {
            return false;
        }
        *t = target_buffer(target, size);
        return (target->call("fill " + std::to_string(seed)) == "ok") &&
               ((*sender)->call("alloc " + std::to_string(size) + " cuda")
                        .rfind("alloc ", 0) == 0) &&
               ((*sender)->call("connect " + t->dev + " " + t->iface) == "ok");
    }

    std::string group_;
    std::vector<std::unique_ptr<PeerProcess>> peers_;
};

TEST_F(PxnCuda, GpuToGpu10KiBGoesThroughTheGpuArena)
{
    PeerProcess *relay, *target, *sender;
    ASSERT_TRUE(trio(&relay, &target, &sender));
    const size_t size = 10240;
    Target t = target_buffer(target, size);
    source_buffer(sender, size, 7);
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    EXPECT_EQ("Success", put(sender, t, size, size));
    EXPECT_EQ("ok", target->call("check 7 0 " + std::to_string(size)));
    expect_healthy(relay, size);
}

TEST_F(PxnCuda, PiecesAroundTheSlotSizeArriveIntact)
{
    PeerProcess *relay, *target, *sender;
    ASSERT_TRUE(trio(&relay, &target, &sender));
    const size_t size = 4 * kSlot;
    Target t = target_buffer(target, size);
    source_buffer(sender, size, 3);
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    size_t offset = 0;
    for (size_t bytes : {kSlot - 1, kSlot, kSlot + 1}) {
        EXPECT_EQ("Success", put(sender, t, bytes, bytes, offset)) << bytes;
        EXPECT_EQ("ok", target->call("check 3 " + std::to_string(offset) + " " +
                                     std::to_string(bytes))) << bytes;
        offset += bytes;
    }
    expect_healthy(relay, 3 * kSlot);
}

TEST_F(PxnCuda, FullRingMakesThePieceAfterKWaitForSlotZero)
{
    const std::vector<std::string> slow = {"UCX_PXN_HEARTBEAT_TIMEOUT=20s",
                                           "UCX_PXN_CREDIT_TIMEOUT=20s"};
    PeerProcess *relay, *target, *sender;
    ASSERT_TRUE(trio(&relay, &target, &sender, slow));
    const size_t size = (kSlots + 1) * kSlot;
    Target t = target_buffer(target, size);
    source_buffer(sender, size, 11);
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    ASSERT_TRUE(relay->stop());
    ASSERT_TRUE(sender->send("put zcopy " + t.addr + " " + t.rkey + " " +
                             std::to_string(size) + " " + std::to_string(size) +
                             " 0"));
    /* K pieces fill the ring; the K+1-th waits for credit. */
    const std::string registry   = group(0);
    const pid_t       sender_pid = sender->pid();
    EXPECT_TRUE(pxn_test::wait_until([&] {
        pxn::abi::ProcessCounters c = {};
        return pxn_tools::read_counters(registry, sender_pid, &c) &&
               (c.sender.pieces >= kSlots) && (c.sender.credit_stalls >= 1);
    }, 3)) << "the ring did not fill";
    /* The negative: no event says that something will not happen, so it
     * gets a short while to (it would within microseconds). */
    pxn_test::hold_for(0.2, "a stopped relay: piece K+1 must stay unpublished "
                            "and the put incomplete");
    EXPECT_EQ(kSlots, counters(0, sender).sender.pieces);
    EXPECT_EQ("", sender->receive(10)) << "completed without the relay";
    relay->kill(SIGCONT);
    EXPECT_EQ("Success", status_of(sender->receive(pxn_test::scaled_ms(30000))));
    EXPECT_EQ(kSlots + 1, counters(0, relay).relay.pieces);
    EXPECT_EQ("ok", target->call("check 11 0 " + std::to_string(size)));
}

TEST_F(PxnCuda, SixtyFourSlotsOfDataTakeManyRingRounds)
{
    PeerProcess *relay, *target, *sender;
    ASSERT_TRUE(trio(&relay, &target, &sender));
    const size_t size = 64 * kSlot + 777;
    Target t = target_buffer(target, size);
    source_buffer(sender, size, 13);
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    EXPECT_EQ("Success", put(sender, t, size, 3 * kSlot + 5));
    EXPECT_EQ("ok", target->call("check 13 0 " + std::to_string(size)));
    expect_healthy(relay, size);
}

TEST_F(PxnCuda, ScatteredBlocksAreGatheredIntoPieces)
{
    PeerProcess *relay, *target, *sender;
    ASSERT_TRUE(trio(&relay, &target, &sender));
    const size_t size = 8 * kSlot;
    Target t = target_buffer(target, size);
    source_buffer(sender, size, 17);
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    EXPECT_EQ("Success", put(sender, t, size / 2, 4096));
    EXPECT_EQ("Success", put(sender, t, size / 2, 65536, size / 2));
    EXPECT_EQ("ok", target->call("check 17 0 " + std::to_string(size)));
    expect_healthy(relay, size);
    /* Many small GPU segments per piece: the gather kernel staged them. */
    EXPECT_GT(counters(0, sender).sender.gather_pieces, 0u);
}

TEST_F(PxnCuda, MisalignedBlocksAreGatheredExactlyByEveryPolicy)
{
    /* Blocks of odd sizes at odd offsets: sources and slot offsets disagree
     * modulo 16 (the kernel's shifted path), with the kernel forced (sm)
     * and chosen (auto), and the copy engine (ce) for comparison. */
    for (const char *copy : {"sm", "auto", "ce"}) {
        SCOPED_TRACE(copy);
        TearDown(); /* the previous policy's processes and registry */
        PeerProcess *relay, *target, *sender;
        ASSERT_TRUE(trio(&relay, &target, &sender,
                         {std::string("UCX_PXN_COPY=") + copy}));
        const size_t size = 6 * kSlot + 13;
        Target t = target_buffer(target, size);
        source_buffer(sender, size, 37);
        ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
        const size_t half = 3 * kSlot + 3;
        EXPECT_EQ("Success", put(sender, t, half - 3, 4099, 3));
        EXPECT_EQ("Success", put(sender, t, size - half, 70001, half));
        EXPECT_EQ("ok", target->call("check 37 3 " + std::to_string(size - 3)));
        expect_healthy(relay, size - 3);
        const uint64_t gathered = counters(0, sender).sender.gather_pieces;
        if (std::string(copy) == "ce") {
            EXPECT_EQ(0u, gathered);
        } else {
            EXPECT_GT(gathered, 0u);
        }
    }
}

TEST_F(PxnCuda, PiecesOfMoreSegmentsThanOneLaunchCarriesArriveIntact)
{
    /* The kernel forced, pieces that fill their slot (PIECE_OPS=0): 1000-
     * and 1001-byte operations at odd offsets put ~1000 segments into each
     * 1 MiB piece, several launches of kPxnGatherMaxSegs, each segment
     * misaligned; a put, then GETs of the same shape into another pattern. */
    PeerProcess *relay, *target, *sender;
    ASSERT_TRUE(trio(&relay, &target, &sender,
                     {"UCX_PXN_COPY=sm", "UCX_PXN_PIECE_OPS=0",
                      "UCX_CUDA_IPC_ENABLE_GET_ZCOPY=y"}));
    const size_t size = 8 * kSlot;
    const size_t puts = (size - 3 + 999) / 1000, gets = (size - 5 + 1000) / 1001;
    Target t = target_buffer(target, size);
    source_buffer(sender, size, 47);
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    EXPECT_EQ("Success", put(sender, t, size - 3, 1000, 3));
    EXPECT_EQ("ok", target->call("check 47 3 " + std::to_string(size - 3)));
    const uint64_t put_pieces = counters(0, relay).relay.pieces;
    /* some piece held more segments than one launch carries */
    EXPECT_LT(put_pieces, puts / kPxnGatherMaxSegs);
    EXPECT_GT(counters(0, sender).sender.gather_pieces, 0u);

    EXPECT_EQ("ok", target->call("fill 53"));
    EXPECT_EQ("ok", sender->call("fill 59"));
    EXPECT_EQ("Success", move(sender, "get zcopy", t, size - 5, 1001, 5));
    EXPECT_EQ("ok", sender->call("check 53 5 " + std::to_string(size - 5)));
    EXPECT_LT(counters(0, relay).relay.pieces - put_pieces,
              gets / kPxnGatherMaxSegs);
    expect_healthy(relay, 2 * size - 8);
}

TEST_F(PxnCuda, ThreeSendersShareOneRelay)
{
    PeerProcess *relay  = peer(0, "railD");
    PeerProcess *target = peer(1, "railD");
    ASSERT_TRUE(relay && target);
    const size_t part = 4 * kSlot, size = 3 * part;
    Target t = target_buffer(target, size);
    std::vector<PeerProcess*> senders;
    for (const char *rail : {"railA", "railB", "railC"}) {
        senders.push_back(peer(0, rail));
        ASSERT_NE(nullptr, senders.back());
        source_buffer(senders.back(), size, 19);
        ASSERT_EQ("ok", senders.back()->call("connect " + t.dev + " " + t.iface));
    }
    for (size_t i = 0; i < senders.size(); ++i) {
        ASSERT_TRUE(senders[i]->send("put zcopy " + t.addr + " " + t.rkey + " " +
                                     std::to_string(part) + " 262144 " +
                                     std::to_string(i * part)));
    }
    for (size_t i = 0; i < senders.size(); ++i) {
        EXPECT_EQ("Success", status_of(senders[i]->receive(pxn_test::scaled_ms(60000))))
                << i;
    }
    EXPECT_EQ("ok", target->call("check 19 0 " + std::to_string(size)));
    expect_healthy(relay, size);
    EXPECT_EQ(3u, counters(0, relay).relay.lane_resets);
}

TEST_F(PxnCuda, HostSourceIntoTheGpuArena)
{
    PeerProcess *relay, *target, *sender;
    ASSERT_TRUE(trio(&relay, &target, &sender));
    const size_t size = 3 * kSlot + 99;
    Target t = target_buffer(target, size);
    source_buffer(sender, size, 23, false);
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    EXPECT_EQ("Success", put(sender, t, size, 100000));
    EXPECT_EQ("ok", target->call("check 23 0 " + std::to_string(size)));
    expect_healthy(relay, size);
}

TEST_F(PxnCuda, GpuSourceIntoAHostArena)
{
    /* cma: a host arena and host targets, a GPU source buffer. */
    PeerProcess *relay  = peer(0, "railB", {}, "cma");
    PeerProcess *target = peer(1, "railB", {}, "cma");
    PeerProcess *sender = peer(0, "railA", {}, "cma");
    ASSERT_TRUE(relay && target && sender);
    const size_t size = 2 * kSlot + 5;
    Target t = target_buffer(target, size, false);
    source_buffer(sender, size, 29, true);
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    EXPECT_EQ("Success", put(sender, t, size, 70000));
    EXPECT_EQ("ok", target->call("check 29 0 " + std::to_string(size)));
    expect_healthy(relay, size);
}

/* am_zcopy's payload in GPU memory: copied into the slot of a host arena
 * by the driver (inner tcp on lo, which carries active messages). */
TEST_F(PxnCuda, AmZcopyOfAGpuPayloadArrivesIntact)
{
    PeerProcess *relay  = peer(0, "railB", {}, "tcp");
    PeerProcess *target = peer(1, "railB", {}, "tcp");
    PeerProcess *sender = peer(0, "railA", {}, "tcp");
    ASSERT_TRUE(relay && target && sender);
    const Target t = target_buffer(target, 4096, false);
    ASSERT_EQ("ok", target->call("am listen"));
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    ASSERT_TRUE(target->send("serve"));
    const std::string done = sender->call("am send zcopy-cuda 3 50 6000",
                                          pxn_test::scaled_ms(60000));
    EXPECT_EQ("ok", target->call("stop"));
    EXPECT_EQ("0", status_of(done)) << done;
    EXPECT_EQ("ok", target->call("progress 200"));
    /* am <received> <bad> <out of order> <bytes> */
    EXPECT_EQ("am 50 0 0 300000", target->call("am stats"));
    const auto c = counters(0, relay);
    EXPECT_EQ(50u, c.relay.am_messages);
    EXPECT_EQ(300000u, c.relay.am_bytes);
    EXPECT_EQ(0u, c.relay.rejected);
}

TEST_F(PxnCuda, GetCopiesTheSlotIntoAGpuBuffer)
{
    PeerProcess *relay, *sender;
    Target t;
    const size_t size = 2 * kSlot + 4096;
    ASSERT_TRUE(get_trio(size, 31, &relay, &sender, &t));
    EXPECT_EQ("Success", move(sender, "get zcopy", t, size, 300000));
    EXPECT_EQ("ok", sender->call("check 31 0 " + std::to_string(size)));
    expect_healthy(relay, size);
}

TEST_F(PxnCuda, GetOfManyRingRoundsCopiesEverySlotOutBeforeItsReuse)
{
    /* 16 slots' worth through a ring of 4: the copies out of the slots run
     * asynchronously (copy engine or scatter kernel), and a slot refilled
     * before its copy ended would show up as wrong bytes. */
    PeerProcess *relay, *sender;
    Target t;
    const size_t size = 16 * kSlot + 123;
    ASSERT_TRUE(get_trio(size, 41, &relay, &sender, &t));
    EXPECT_EQ("Success", move(sender, "get zcopy", t, size, 300001));
    EXPECT_EQ("ok", sender->call("check 41 0 " + std::to_string(size)));
    /* again in 4099-byte replies at odd offsets (hundreds per piece, the
     * scatter kernel's shifted path), over another pattern */
    EXPECT_EQ("ok", sender->call("fill 43"));
    EXPECT_EQ("Success", move(sender, "get zcopy", t, size - 3, 4099, 3));
    EXPECT_EQ("ok", sender->call("check 41 3 " + std::to_string(size - 3)));
    expect_healthy(relay, 2 * size - 3);
    EXPECT_GE(counters(0, relay).relay.pieces, 32u);
}

/* UCT's SGL operations (UCX 1.22 on) with GPU memory on both ends: 512
 * blocks of 1-64 KiB in one put_sgl_zcopy, 8 KiB blocks in one
 * get_sgl_zcopy (master), every byte checked. Where the relay's inner
 * cuda_ipc has put_sgl_zcopy (master's does), each piece goes as one inner
 * SGL operation; the counts are printed either way. */
TEST_F(PxnCuda, SglPutsAndGetsOfGpuBlocksArriveIntact)
{
#ifndef PXN_UCX_EP_PUT_SGL_ZCOPY
    GTEST_SKIP() << "this UCX has no put_sgl_zcopy (UCX 1.22 on)";
#else
    PeerProcess *relay, *target, *sender;
    ASSERT_TRUE(trio(&relay, &target, &sender, {"UCX_CUDA_IPC_ENABLE_GET_ZCOPY=y"}));
    const size_t size = 8 * kSlot + 3 * 4096 + 11;
    const Target t    = target_buffer(target, size);
    source_buffer(sender, size, 53);
    ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface));
    EXPECT_EQ("Success",
              status_of(sender->call("put sgl " + t.addr + " " + t.rkey + " " +
                                     std::to_string(size) + " 1024-65536 0",
                                     pxn_test::scaled_ms(60000))));
    EXPECT_EQ("ok", target->call("check 53 0 " + std::to_string(size)));
    expect_healthy(relay, size);
    auto c = counters(0, relay).relay;
    EXPECT_LT(c.pieces, size / 1024) << "blocks share pieces";
    std::cout << "put sgl: " << c.pieces << " pieces, " << c.inner_ops
              << " inner operations (" << c.inner_sgl_ops << " sgl)\n";
#ifdef PXN_UCX_EP_GET_SGL_ZCOPY
    /* master: cuda_ipc has put_sgl_zcopy and get_sgl_zcopy */
    EXPECT_GT(c.inner_sgl_ops, 0u);
    ASSERT_EQ("ok", target->call("fill 57"));
    EXPECT_EQ("Success",
              status_of(sender->call("get sgl " + t.addr + " " + t.rkey + " " +
                                     std::to_string(size) + " 8192 0",
                                     pxn_test::scaled_ms(60000))));
    EXPECT_EQ("ok", sender->call("check 57 0 " + std::to_string(size)));
    c = counters(0, relay).relay;
    std::cout << "and get sgl: " << c.pieces << " pieces, " << c.inner_ops
              << " inner operations (" << c.inner_sgl_ops << " sgl)\n";
#endif
#endif
}

/* GPU memory used on the device now, in MiB (nvidia-smi, which needs no
 * context); -1 when it cannot tell. */
long device_mib_used()
{
    const auto r = pxn_test::run_program(
            {"/bin/sh", "-c", "nvidia-smi --query-gpu=memory.used "
                              "--format=csv,noheader,nounits -i 0"}, {});
    return (r.exit_code == 0) ? strtol(r.output.c_str(), nullptr, 10) : -1;
}

/* Ten targets of 256 MiB come and go through one relay: after each has
 * exited the device holds what the relay and sender held after the first
 * (within 64 MiB). The relay's inner cuda_ipc runs without its mapping
 * cache here (UCX_CUDA_IPC_CACHE=n): what it would keep of the dead
 * targets' buffers otherwise is UCX's cache, which pxn cannot release
 * (UCX 1.13-1.21, 1.22.x, master: a process-wide cache per peer pid); the
 * growth with the cache on is printed beside, for docs/gpu.md. */
TEST_F(PxnCuda, RelaysGpuMemoryStaysFlatAcrossTargetsThatCameAndWent)
{
    if (device_mib_used() < 0) {
        GTEST_SKIP() << "nvidia-smi cannot tell the device's memory here";
    }
    const size_t size = 256 << 20;
    for (const std::string cache : {"n", "y"}) {
        peers_.clear();
        PeerProcess *relay  = peer(0, "railB", {"UCX_CUDA_IPC_CACHE=" + cache});
        PeerProcess *sender = peer(0, "railA");
        ASSERT_TRUE(relay && sender);
        source_buffer(sender, size, 13);
        long first = -1, last = -1;
        for (int i = 0; i < 10; ++i) {
            PeerProcess *target = peer(1, "railB");
            ASSERT_NE(nullptr, target);
            const Target t = target_buffer(target, size);
            ASSERT_EQ("ok", sender->call("connect " + t.dev + " " + t.iface)) << i;
            ASSERT_EQ("Success", put(sender, t, size, 8 << 20)) << i;
            EXPECT_EQ("ok", target->call("check 13 0 " + std::to_string(size))) << i;
            target->call("quit", pxn_test::scaled_ms(10000));
            target->wait(pxn_test::scaled_ms(10000));
            pxn_test::hold_for(0.5, "the device frees a dead process's memory");
            last  = device_mib_used();
            first = (i == 0) ? last : first;
        }
        std::cout << "[ pxn      ] relay with UCX_CUDA_IPC_CACHE=" << cache
                  << ": device memory " << first << " MiB after the first "
                  << "target, " << last << " MiB after the tenth ("
                  << (last - first) << " MiB more)" << std::endl;
        if (cache == "n") {
            EXPECT_LE(last - first, 64) << "the relay kept dead targets' memory";
        }
        const auto c = counters(0, relay).relay;
        EXPECT_LE(c.routes_active, 1u);
        EXPECT_LE(c.rkeys_held, 1u);
    }
}

} // namespace
