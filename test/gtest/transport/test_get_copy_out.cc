/*
 * GET replies copied out of their slots asynchronously (the GPU stager's
 * stream copies), with the rules the sender keeps around them: a GET
 * completes only after its bytes are out, a slot goes back to the relay
 * only after every copy out of it finished, copies of later pieces start
 * before earlier ones end, and a failing lane waits for copies in flight
 * before it fails their requests. The real host stager is wrapped by one
 * that holds every copy out until the test lets it run (the copy then
 * reads the slot: had the slot gone back early, the relay would have
 * refilled it and the bytes would differ).
 */
#include "lane_fixture.h"

#include <cstring>
#include <deque>
#include <random>

namespace pxn_test {
namespace {

using pxn::uct::SendLane;
using pxn::uct::Stager;

class DeferredStager : public Stager {
public:
    explicit DeferredStager(std::unique_ptr<Stager> inner) :
        inner_(std::move(inner))
    {
    }

    ucs_status_t ready() override { return inner_->ready(); }
    void         close() override { inner_->close(); }
    void add(uint32_t slot, const void *src, uint64_t offset,
             uint64_t length) override
    {
        inner_->add(slot, src, offset, length);
    }
    uint8_t *pack_area(uint32_t slot, uint64_t offset, size_t max) override
    {
        return inner_->pack_area(slot, offset, max);
    }
    ucs_status_t packed(uint32_t slot, uint64_t offset, size_t length) override
    {
        return inner_->packed(slot, offset, length);
    }
    ucs_status_t commit(uint64_t seq, uint32_t slot, pxn::abi::Op op) override
    {
        return inner_->commit(seq, slot, op);
    }
    unsigned progress() override { return inner_->progress(); }
    bool     idle() const override { return inner_->idle(); }
    ucs_status_t unpack(uint32_t slot, uint64_t offset,
                        uct_unpack_callback_t unpack, void *arg,
                        uint64_t length) override
    {
        return inner_->unpack(slot, offset, unpack, arg, length);
    }

    ucs_status_t copy_out(uint32_t slot, uint64_t offset, void *dest,
                          uint64_t length) override
    {
        open_.push_back({slot, offset, dest, length});
        return UCS_OK;
    }
    ucs_status_t end_out(uint32_t slot) override
    {
        batches_.push_back({slot, std::move(open_)});
        open_.clear();
        return UCS_OK;
    }
    ucs_status_t out_status(uint32_t slot) override
    {
        for (const Batch &b : batches_) {
            if (b.slot == slot) {
                return UCS_INPROGRESS;
            }
        }
        return UCS_OK;
    }
    void wait_out() override
    {
        ++waits;
        finish(batches_.size());
    }

    /* Runs the oldest `n` pieces' copies (a stream runs them in order). */
    void finish(size_t n)
    {
        for (; (n > 0) && !batches_.empty(); --n) {
            for (const Copy &c : batches_.front().copies) {
                ASSERT_EQ(UCS_OK, inner_->copy_out(c.slot, c.offset, c.dest,
                                                   c.length));
            }
            batches_.pop_front();
        }
    }
    size_t pending() const { return batches_.size(); }

    unsigned waits = 0;

private:
    struct Copy {
        uint32_t slot;
        uint64_t offset;
        void    *dest;
        uint64_t length;
    };
    struct Batch {
        uint32_t          slot;
        std::vector<Copy> copies;
    };

    std::unique_ptr<Stager> inner_;
    std::vector<Copy>       open_;
    std::deque<Batch>       batches_;
};

DeferredStager *g_stager = nullptr;

std::unique_ptr<Stager> defer(std::unique_ptr<Stager> inner)
{
    g_stager = new DeferredStager(std::move(inner));
    return std::unique_ptr<Stager>(g_stager);
}

/* A completion that notes how many copies were still held when it ran. */
struct HeldAtCompletion {
    HeldAtCompletion() { comp = {on_done, 1, UCS_OK}; }
    static void on_done(uct_completion_t *c)
    {
        auto *self = reinterpret_cast<HeldAtCompletion*>(c);
        ++self->calls;
        self->held = g_stager->pending();
    }
    uct_completion_t comp; /* first */
    unsigned         calls = 0;
    size_t           held  = 0;
};

class GetCopyOut : public LaneFixture {
protected:
    void SetUp() override
    {
        LaneFixture::SetUp();
        Stager::wrap_for_tests(defer);
        start_relay();
        target_.resize(1 << 20);
        std::mt19937_64 rng(21);
        for (uint8_t &b : target_) {
            b = uint8_t(rng());
        }
        rkey_ = net_->register_remote(target_.data(), target_.size());
        lane_ = open_lane();
        ASSERT_TRUE(make_ready(*lane_));
        ASSERT_NE(nullptr, g_stager);
        const pxn::RouteAnswer route = route_to(*lane_, 9);
        ASSERT_EQ(UCS_OK, route.status);
        route_ = route.route;
        ASSERT_EQ(UCS_OK, lane_->control().rkey_index(rkey_.data(),
                                                      uint16_t(rkey_.size()),
                                                      &rkey_index_));
    }

    void TearDown() override
    {
        lane_.reset();
        Stager::wrap_for_tests(nullptr);
        g_stager = nullptr;
        LaneFixture::TearDown();
    }

    ucs_status_t get(std::vector<uint8_t> &local, uint64_t remote_offset,
                     uct_completion_t *comp)
    {
        const uct_iov_t iov = {local.data(), local.size(), nullptr, 0, 1};
        return lane_->post(&owner_, pxn::abi::kOpGet, route_, rkey_index_,
                           reinterpret_cast<uint64_t>(target_.data()) +
                           remote_offset, &iov, 1, comp);
    }

    uint64_t reaped() const
    {
        return pxn::abi::load_acquire(lane_->control().block().producer().reaped);
    }

    uint64_t head() const
    {
        return pxn::abi::load_acquire(lane_->control().block().producer().head);
    }

    std::vector<uint8_t>      target_;
    pxn::Bytes                rkey_;
    std::unique_ptr<SendLane> lane_;
    uint32_t                  route_ = 0, rkey_index_ = 0;
    TestOwner                 owner_;
};

TEST_F(GetCopyOut, GetCompletesOnlyAfterItsBytesAreCopiedOut)
{
    std::vector<uint8_t> local(1000, 0);
    HeldAtCompletion comp;
    const uint64_t before = reaped();
    ASSERT_EQ(UCS_INPROGRESS, get(local, 77, &comp.comp));
    ASSERT_TRUE(drive([&] { return g_stager->pending() == 1; }));
    for (int i = 0; i < 100; ++i) {
        round();
    }
    EXPECT_EQ(0u, comp.calls);
    EXPECT_EQ(before, reaped()) << "the slot went back under a copy";
    g_stager->finish(1);
    ASSERT_TRUE(drive([&] { return comp.calls == 1; }));
    EXPECT_EQ(UCS_OK, comp.comp.status);
    EXPECT_EQ(before + 1, reaped());
    EXPECT_EQ(0, memcmp(local.data(), target_.data() + 77, local.size()));
}

TEST_F(GetCopyOut, LaterPiecesAreCopiedOutWhileEarlierOnesStillAre)
{
    /* three slots' worth: three pieces, all read before any copy ends */
    std::vector<uint8_t> local(3 * 65536, 0);
    HeldAtCompletion comp;
    const uint64_t before = reaped();
    ASSERT_EQ(UCS_INPROGRESS, get(local, 5, &comp.comp));
    ASSERT_TRUE(drive([&] { return g_stager->pending() == 3; }));
    EXPECT_EQ(before, reaped());
    /* each finished copy gives back exactly its slot, in order */
    for (uint64_t n = 1; n <= 3; ++n) {
        g_stager->finish(1);
        ASSERT_TRUE(drive([&] { return reaped() == before + n; }));
        for (int i = 0; i < 20; ++i) {
            round();
        }
        EXPECT_EQ(before + n, reaped());
        EXPECT_EQ((n == 3) ? 1u : 0u, comp.calls);
    }
    EXPECT_EQ(0u, comp.held);
    EXPECT_EQ(0, memcmp(local.data(), target_.data() + 5, local.size()));
}

TEST_F(GetCopyOut, SlotsRefilledByTheRelayAreNeverReadByAnEarlierCopy)
{
    /* 12 slots' worth through a ring of 4, copies let out at random
     * moments: every byte lands once its own piece was read. */
    std::vector<uint8_t> local(12 * 65536 + 333, 0);
    HeldAtCompletion comp;
    ASSERT_EQ(UCS_INPROGRESS, get(local, 1001, &comp.comp));
    std::mt19937 rng(3);
    ASSERT_TRUE(drive([&] {
        if (rng() % 7 == 0) {
            g_stager->finish(1 + rng() % 2);
        }
        return comp.calls == 1;
    }));
    EXPECT_EQ(UCS_OK, comp.comp.status);
    EXPECT_EQ(0u, comp.held);
    EXPECT_EQ(0, memcmp(local.data(), target_.data() + 1001, local.size()));
    EXPECT_GE(relay_counters().pieces, 13u);
}

TEST_F(GetCopyOut, PutsStillGoWhileAGetWaitsForItsCopyOut)
{
    std::vector<uint8_t> local(4096, 0);
    HeldAtCompletion get_comp;
    ASSERT_EQ(UCS_INPROGRESS, get(local, 0, &get_comp.comp));
    ASSERT_TRUE(drive([&] { return g_stager->pending() == 1; }));
    std::vector<uint8_t> src(8192, 0x5a);
    const uct_iov_t iov = {src.data(), src.size(), nullptr, 0, 1};
    Completion put_comp;
    ASSERT_EQ(UCS_INPROGRESS,
              lane_->post(&owner_, pxn::abi::kOpPut, route_, rkey_index_,
                          reinterpret_cast<uint64_t>(target_.data()) + 65536,
                          &iov, 1, &put_comp.comp));
    /* the put's piece is delivered by the relay, but completes after the
     * GET before it: requests complete in piece order */
    ASSERT_TRUE(drive([&] { return relay_counters().pieces == 2; }));
    for (int i = 0; i < 50; ++i) {
        round();
    }
    EXPECT_EQ(0u, put_comp.calls);
    EXPECT_EQ(0, memcmp(target_.data() + 65536, src.data(), src.size()));
    g_stager->finish(1);
    ASSERT_TRUE(drive([&] { return put_comp.calls == 1; }));
    EXPECT_EQ(1u, get_comp.calls);
    EXPECT_EQ(UCS_OK, put_comp.comp.status);
}

TEST_F(GetCopyOut, FailingLaneWaitsForCopiesOutBeforeFailingTheirRequests)
{
    std::vector<uint8_t> local(2 * 65536, 0);
    HeldAtCompletion comp;
    ASSERT_EQ(UCS_INPROGRESS, get(local, 0, &comp.comp));
    ASSERT_TRUE(drive([&] { return g_stager->pending() == 2; }));
    lane_->fail_all(UCS_ERR_ENDPOINT_TIMEOUT);
    EXPECT_EQ(0u, comp.calls) << "completed inside the failing call";
    lane_->progress(); /* completions go from progress only */
    ASSERT_EQ(1u, comp.calls);
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, comp.comp.status);
    EXPECT_EQ(1u, g_stager->waits);
    EXPECT_EQ(0u, comp.held) << "a request failed while a copy could still "
                                "write its buffer";
}

} // namespace
} // namespace pxn_test
