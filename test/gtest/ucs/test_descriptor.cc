#include <ucs/pxn/am_frame.h>
#include <ucs/pxn/descriptor.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace {

namespace abi = pxn::abi;
using pxn::DescReason;

constexpr uint32_t kMaxPlan  = 8;
constexpr uint64_t kEpoch    = 0xE0E0;
constexpr uint64_t kSlotSize = 4096;

/* One descriptor as it sits in a lane: header, then max_plan plans. */
struct DescBuffer {
    abi::DescriptorHeader header;
    abi::Plan             plans[kMaxPlan];
};

pxn::LaneCheck lane_check(uint64_t expected_seq = 5)
{
    pxn::LaneCheck lane;
    lane.expected_seq = expected_seq;
    lane.lane_epoch   = kEpoch;
    lane.slot_size    = kSlotSize;
    lane.max_plan     = kMaxPlan;
    lane.routes       = 32;   /* the relay's route table */
    lane.route_usable = true; /* the descriptor's route: held and connected */
    lane.rkeys_valid  = 0x7 | (1ull << 63);
    return lane;
}

const std::vector<abi::Plan> &good_plans()
{
    static const std::vector<abi::Plan> plans = {{0x1000, 100, 0},
                                                 {0x9000, 200, 2}};
    return plans;
}

void write_good(DescBuffer *buf, uint64_t seq = 5, abi::Op op = abi::kOpPut)
{
    std::memset(buf, 0xa5, sizeof(*buf));
    pxn::write_descriptor(&buf->header, seq, kEpoch, op, 3,
                          good_plans().data(), uint32_t(good_plans().size()));
}

DescReason validate(const DescBuffer &buf, const pxn::LaneCheck &lane,
                    ucs_status_t *status = nullptr)
{
    pxn::DescriptorSnapshot snap;
    EXPECT_EQ(UCS_OK, snap.init(kMaxPlan));
    snap.load(&buf.header);
    DescReason reason;
    const ucs_status_t s = pxn::validate_descriptor(snap, lane, &reason);
    EXPECT_EQ(pxn::desc_reason_status(reason), s);
    if (status != nullptr) {
        *status = s;
    }
    return reason;
}

TEST(Descriptor, WriterFillsEveryFieldAndCommitsSeq)
{
    DescBuffer buf;
    write_good(&buf, 42, abi::kOpGet);
    EXPECT_EQ(42u, buf.header.seq);
    EXPECT_EQ(kEpoch, buf.header.lane_epoch);
    EXPECT_EQ(uint32_t(abi::kOpGet), buf.header.op);
    EXPECT_EQ(2u, buf.header.plan_count);
    EXPECT_EQ(300u, buf.header.length);
    EXPECT_EQ(3u, buf.header.route);
    EXPECT_EQ(0u, buf.header.flags);
    for (uint8_t byte : buf.header.reserved) {
        EXPECT_EQ(0, byte);
    }
    EXPECT_EQ(0x9000u, buf.plans[1].remote_addr);
    EXPECT_EQ(200u, buf.plans[1].length);
    EXPECT_EQ(2u, buf.plans[1].rkey_index);
    EXPECT_EQ(&buf.plans[0], pxn::plans_of(&buf.header));
}

TEST(Descriptor, AcceptsWellFormedPutAndGet)
{
    DescBuffer buf;
    ucs_status_t status;
    write_good(&buf);
    EXPECT_EQ(DescReason::kOk, validate(buf, lane_check(), &status));
    EXPECT_EQ(UCS_OK, status);
    write_good(&buf, 5, abi::kOpGet);
    EXPECT_EQ(DescReason::kOk, validate(buf, lane_check()));
}

struct Corruption {
    const char                        *what;
    std::function<void(DescBuffer*)>   apply;
    DescReason                         reason;
};

TEST(Descriptor, RejectsEachCorruptedField)
{
    const std::vector<Corruption> cases = {
        {"stale seq", [](DescBuffer *b) { b->header.seq = 4; }, DescReason::kBadSeq},
        {"seq ahead", [](DescBuffer *b) { b->header.seq = 6; }, DescReason::kBadSeq},
        {"seq 0", [](DescBuffer *b) { b->header.seq = 0; }, DescReason::kBadSeq},
        {"old epoch", [](DescBuffer *b) { b->header.lane_epoch = kEpoch - 1; },
         DescReason::kBadEpoch},
        {"op 0", [](DescBuffer *b) { b->header.op = 0; }, DescReason::kBadOp},
        {"op 3", [](DescBuffer *b) { b->header.op = 3; }, DescReason::kBadOp},
        {"flags", [](DescBuffer *b) { b->header.flags = 0x80000000u; },
         DescReason::kFlagsSet},
        {"reserved", [](DescBuffer *b) { b->header.reserved[23] = 1; },
         DescReason::kReservedSet},
        {"no plans", [](DescBuffer *b) { b->header.plan_count = 0; },
         DescReason::kNoPlans},
        {"max_plan + 1", [](DescBuffer *b) { b->header.plan_count = kMaxPlan + 1; },
         DescReason::kTooManyPlans},
        {"huge plan count", [](DescBuffer *b) { b->header.plan_count = UINT32_MAX; },
         DescReason::kTooManyPlans},
        {"longer than slot", [](DescBuffer *b) { b->header.length = kSlotSize + 1; },
         DescReason::kTooLong},
        {"route >= routes", [](DescBuffer *b) { b->header.route = 32; },
         DescReason::kRouteOutOfRange},
        {"route huge", [](DescBuffer *b) { b->header.route = UINT32_MAX; },
         DescReason::kRouteOutOfRange},
        {"empty plan", [](DescBuffer *b) { b->plans[1].length = 0; },
         DescReason::kEmptyPlan},
        {"rkey >= kMaxRkeys", [](DescBuffer *b) { b->plans[0].rkey_index = abi::kMaxRkeys; },
         DescReason::kRkeyOutOfRange},
        {"rkey unpacked", [](DescBuffer *b) { b->plans[1].rkey_index = 5; },
         DescReason::kRkeyInvalid},
        {"address wraps", [](DescBuffer *b) { b->plans[1].remote_addr = UINT64_MAX - 100; },
         DescReason::kAddressOverflow},
        {"address ends at 2^64", [](DescBuffer *b) { b->plans[1].remote_addr = 0ull - 200; },
         DescReason::kAddressOverflow},
        {"length > plan sum", [](DescBuffer *b) { b->header.length = 301; },
         DescReason::kPlanSumMismatch},
        {"length < plan sum", [](DescBuffer *b) { b->header.length = 299; },
         DescReason::kPlansExceedLength},
        {"plan beyond length", [](DescBuffer *b) { b->plans[0].length = 4000; },
         DescReason::kPlansExceedLength},
        {"plan beyond length, bad rkey after", [](DescBuffer *b) {
             b->plans[0].length = 4000;
             b->plans[1].rkey_index = 5;
         }, DescReason::kPlansExceedLength},
        {"plan count short", [](DescBuffer *b) { b->header.plan_count = 1; },
         DescReason::kPlanSumMismatch},
        {"plan count long", [](DescBuffer *b) {
             b->header.plan_count = 3;
             b->plans[2] = {0x20000, 1, 0};
         }, DescReason::kPlansExceedLength},
    };

    for (const Corruption &c : cases) {
        DescBuffer buf;
        write_good(&buf);
        c.apply(&buf);
        ucs_status_t status;
        EXPECT_EQ(c.reason, validate(buf, lane_check(), &status))
                << c.what << ": " << pxn::desc_reason_name(validate(buf, lane_check()));
        EXPECT_NE(UCS_OK, status) << c.what;
    }
}

/* An AM piece: a message per plan, empty ones too, no remote key. */
void write_am(DescBuffer *buf, const std::vector<abi::Plan> &plans)
{
    std::memset(buf, 0xa5, sizeof(*buf));
    pxn::write_descriptor(&buf->header, 5, kEpoch, abi::kOpAm, 3, plans.data(),
                          uint32_t(plans.size()));
}

TEST(Descriptor, AcceptsAmPiecesOnlyWhereTheRelayForwardsAm)
{
    const std::vector<abi::Plan> plans = {
            {pxn::am_plan_address(7, 0), 100, 0},
            {pxn::am_plan_address(7, 31), 0, 0},
            {pxn::am_plan_address(9, 3), 256, 0}};
    DescBuffer buf;
    write_am(&buf, plans);
    pxn::LaneCheck lane = lane_check();
    lane.rkeys_valid    = 0; /* AM names no key */
    EXPECT_EQ(DescReason::kBadOp, validate(buf, lane));
    lane.max_am = 256;
    EXPECT_EQ(DescReason::kOk, validate(buf, lane));
}

TEST(Descriptor, RejectsAmPlansWithBadTargetsKeysOrLengths)
{
    const std::vector<abi::Plan> good = {{pxn::am_plan_address(7, 1), 100, 0},
                                         {pxn::am_plan_address(8, 2), 200, 0}};
    pxn::LaneCheck lane = lane_check();
    lane.max_am         = 200;
    const std::vector<Corruption> cases = {
        {"cookie 0", [](DescBuffer *b) { b->plans[0].remote_addr = pxn::am_plan_address(0, 1); },
         DescReason::kBadAmTarget},
        {"id 32", [](DescBuffer *b) { b->plans[1].remote_addr = pxn::am_plan_address(8, 32); },
         DescReason::kBadAmTarget},
        {"high bits", [](DescBuffer *b) { b->plans[1].remote_addr |= 1ull << 50; },
         DescReason::kBadAmTarget},
        {"a key", [](DescBuffer *b) { b->plans[0].rkey_index = 1; },
         DescReason::kBadAmTarget},
        {"too long", [](DescBuffer *b) {
             b->plans[1].length = 201;
             b->header.length   = 301;
         }, DescReason::kAmTooLong},
        {"plans beyond length", [](DescBuffer *b) { b->header.length = 299; },
         DescReason::kPlansExceedLength},
    };
    for (const Corruption &c : cases) {
        DescBuffer buf;
        write_am(&buf, good);
        c.apply(&buf);
        EXPECT_EQ(c.reason, validate(buf, lane)) << c.what;
    }
}

TEST(Descriptor, OldEpochFailsAsCanceled)
{
    DescBuffer buf;
    write_good(&buf);
    pxn::LaneCheck lane = lane_check();
    lane.lane_epoch     = kEpoch + 1;
    ucs_status_t status;
    EXPECT_EQ(DescReason::kBadEpoch, validate(buf, lane, &status));
    EXPECT_EQ(UCS_ERR_CANCELED, status);
}

TEST(Descriptor, RejectsARouteTheLaneDoesNotHoldOrThatFailed)
{
    DescBuffer buf;
    write_good(&buf);
    pxn::LaneCheck lane = lane_check();
    lane.route_usable   = false; /* the relay's verdict on header.route */
    ucs_status_t status;
    EXPECT_EQ(DescReason::kRouteInvalid, validate(buf, lane, &status));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, status);
}

TEST(Descriptor, AcceptsFullSlotAndBoundaryIndexes)
{
    DescBuffer buf;
    const abi::Plan plans[] = {{0, 1, 63}, {0ull - 2, 1, 0},
                               {0x100, uint32_t(kSlotSize - 2), 1}};
    pxn::write_descriptor(&buf.header, 5, kEpoch, abi::kOpPut, 31, plans, 3);
    EXPECT_EQ(kSlotSize, buf.header.length);
    EXPECT_EQ(DescReason::kOk, validate(buf, lane_check()));
}

TEST(Descriptor, SnapshotIgnoresChangesAfterLoad)
{
    DescBuffer buf;
    write_good(&buf);
    pxn::DescriptorSnapshot snap;
    ASSERT_EQ(UCS_OK, snap.init(kMaxPlan));
    snap.load(&buf.header);

    /* The hostile sender rewrites everything after the copy. */
    buf.header.plan_count = UINT32_MAX;
    buf.header.length     = UINT64_MAX;
    buf.plans[0].length   = UINT32_MAX;
    buf.plans[1].rkey_index = 999;

    DescReason reason;
    EXPECT_EQ(UCS_OK, pxn::validate_descriptor(snap, lane_check(), &reason));
    EXPECT_EQ(2u, snap.plans_loaded());
    EXPECT_EQ(100u, snap.plans()[0].length);
    EXPECT_EQ(2u, snap.plans()[1].rkey_index);
}

TEST(Descriptor, SnapshotCopiesNoMoreThanItsCapacity)
{
    /* The lane allows 8 plans but this snapshot holds 2: a descriptor with
     * 3 must be refused without reading a third plan. */
    DescBuffer buf;
    write_good(&buf);
    buf.header.plan_count = 3;
    pxn::DescriptorSnapshot snap;
    ASSERT_EQ(UCS_OK, snap.init(2));
    snap.load(&buf.header);
    EXPECT_EQ(0u, snap.plans_loaded());
    DescReason reason;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              pxn::validate_descriptor(snap, lane_check(), &reason));
    EXPECT_EQ(DescReason::kTooManyPlans, reason);

    pxn::DescriptorSnapshot empty;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, empty.init(0));
    empty.load(&buf.header);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              pxn::validate_descriptor(empty, lane_check(), &reason));
}

TEST(Descriptor, RefusesMorePlansThanLaneMaxPlanEvenIfSnapshotHoldsThem)
{
    /* A snapshot sized above the lane's max_plan copies 3 plans, which are
     * well formed; the lane allows 2. */
    DescBuffer buf;
    const abi::Plan plans[] = {{0x1000, 10, 0}, {0x2000, 10, 0}, {0x3000, 10, 0}};
    pxn::write_descriptor(&buf.header, 5, kEpoch, abi::kOpPut, 3, plans, 3);
    pxn::DescriptorSnapshot snap;
    ASSERT_EQ(UCS_OK, snap.init(kMaxPlan));
    snap.load(&buf.header);
    EXPECT_EQ(3u, snap.plans_loaded());

    pxn::LaneCheck lane = lane_check();
    DescReason     reason;
    lane.max_plan = 3;
    EXPECT_EQ(UCS_OK, pxn::validate_descriptor(snap, lane, &reason));
    lane.max_plan = 2;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::validate_descriptor(snap, lane, &reason));
    EXPECT_EQ(DescReason::kTooManyPlans, reason);
}

TEST(Descriptor, ReasonsHaveDistinctNames)
{
    std::set<std::string> names;
    for (unsigned r = 0; r < pxn::kDescReasonCount; ++r) {
        const std::string name = pxn::desc_reason_name(DescReason(r));
        EXPECT_NE("unknown", name);
        names.insert(name);
        EXPECT_EQ(r == 0, pxn::desc_reason_status(DescReason(r)) == UCS_OK);
    }
    EXPECT_EQ(pxn::kDescReasonCount, names.size());
}

TEST(Descriptor, CompletionReaderWaitsForItsSeqAndSanitisesStatus)
{
    abi::Completion c = {};
    ucs_status_t status = UCS_OK;
    EXPECT_FALSE(pxn::read_completion(&c, 0, &status)); /* never seq 0 */

    pxn::write_completion(&c, 7, UCS_ERR_IO_ERROR);
    EXPECT_EQ(7u, c.seq);
    EXPECT_FALSE(pxn::read_completion(&c, 8, &status));
    ASSERT_TRUE(pxn::read_completion(&c, 7, &status));
    EXPECT_EQ(UCS_ERR_IO_ERROR, status);

    pxn::write_completion(&c, 8, UCS_OK);
    ASSERT_TRUE(pxn::read_completion(&c, 8, &status));
    EXPECT_EQ(UCS_OK, status);

    for (int32_t raw : {1, 100, int32_t(UCS_ERR_LAST), -1000, INT32_MIN}) {
        c.status = raw;
        ASSERT_TRUE(pxn::read_completion(&c, 8, &status));
        EXPECT_EQ(UCS_ERR_IO_ERROR, status) << raw;
    }
    c.status = UCS_ERR_CANCELED;
    ASSERT_TRUE(pxn::read_completion(&c, 8, &status));
    EXPECT_EQ(UCS_ERR_CANCELED, status);
}

/* A lane block in private memory, laid out as in the control file. */
class LaneBlock {
public:
    LaneBlock(uint32_t slots, uint32_t max_plan)
        : layout_(abi::lane_layout(slots, max_plan)),
          mem_(std::aligned_alloc(4096, layout_.lane_stride), &std::free)
    {
        std::memset(mem_.get(), 0, layout_.lane_stride);
    }

    abi::LaneHeader *header() { return static_cast<abi::LaneHeader*>(mem_.get()); }
    abi::DescriptorHeader *desc(uint64_t seq, uint32_t slots)
    {
        return pxn::descriptor_at(mem_.get(), layout_, pxn::slot_of(seq, slots));
    }
    abi::Completion *completions() { return pxn::completions_of(mem_.get(), layout_); }

private:
    abi::LaneLayout                          layout_;
    std::unique_ptr<void, decltype(&std::free)> mem_;
};

TEST(Descriptor, InvalidDescriptorGetsFailedCompletionAndLaneGoesOn)
{
    constexpr uint32_t kSlots = 3;
    LaneBlock lane(kSlots, kMaxPlan);
    pxn::SendWindow         window;
    pxn::CompletionTracker  tracker;
    pxn::DescriptorSnapshot snap;
    ASSERT_EQ(UCS_OK, window.reset(kSlots, kEpoch));
    ASSERT_EQ(UCS_OK, tracker.reset(kSlots));
    ASSERT_EQ(UCS_OK, snap.init(kMaxPlan));

    /* Sender: seq 1 good, seq 2 with an unknown rkey, seq 3 with garbage
     * in its seq field. */
    for (int i = 0; i < 3; ++i) {
        uint64_t seq = 0;
        ASSERT_EQ(UCS_OK, window.reserve(&seq));
        pxn::write_descriptor(lane.desc(seq, kSlots), seq, kEpoch, abi::kOpPut,
                              3, good_plans().data(), 2);
    }
    pxn::plans_of(lane.desc(2, kSlots))[0].rkey_index = 9;
    lane.desc(3, kSlots)->seq = 12345;
    uint64_t seq = 0;
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, window.reserve(&seq));

    /* Relay: validate in order, fail what is invalid, complete the rest. */
    std::vector<DescReason> reasons;
    for (uint64_t expected = 1; expected <= 3; ++expected) {
        snap.load(lane.desc(expected, kSlots));
        DescReason reason;
        const ucs_status_t status = pxn::validate_descriptor(
                snap, lane_check(expected), &reason);
        reasons.push_back(reason);
        ASSERT_EQ(UCS_OK, pxn::complete_piece(lane.completions(),
                                              &lane.header()->consumer,
                                              &tracker, expected, status));
    }
    EXPECT_EQ(std::vector<DescReason>({DescReason::kOk, DescReason::kRkeyInvalid,
                                       DescReason::kBadSeq}),
              reasons);
    EXPECT_EQ(3u, abi::load_acquire(lane.header()->consumer.completed));

    /* Sender: every seq has a completion; failed ones carry an error. */
    const ucs_status_t expected_status[] = {UCS_OK, UCS_ERR_INVALID_PARAM,
                                            UCS_ERR_INVALID_PARAM};
    for (uint64_t s = 1; s <= 3; ++s) {
        ucs_status_t status;
        ASSERT_TRUE(pxn::read_completion(
                &lane.completions()[pxn::slot_of(s, kSlots)], s, &status));
        EXPECT_EQ(expected_status[s - 1], status) << s;
        ASSERT_EQ(UCS_OK, window.reap(s));
    }

    /* The lane keeps working: seq 4 reuses slot 0 and is accepted. */
    ASSERT_EQ(UCS_OK, window.reserve(&seq));
    EXPECT_EQ(4u, seq);
    pxn::write_descriptor(lane.desc(seq, kSlots), seq, kEpoch, abi::kOpPut, 3,
                          good_plans().data(), 2);
    snap.load(lane.desc(4, kSlots));
    DescReason reason;
    EXPECT_EQ(UCS_OK, pxn::validate_descriptor(snap, lane_check(4), &reason));
    ASSERT_EQ(UCS_OK, pxn::complete_piece(lane.completions(),
                                          &lane.header()->consumer, &tracker,
                                          4, UCS_OK));
    EXPECT_EQ(4u, lane.header()->consumer.completed);
}

TEST(Descriptor, OutOfOrderCompletionsPublishOnlyContiguousCompleted)
{
    LaneBlock lane(4, 2);
    pxn::CompletionTracker tracker;
    ASSERT_EQ(UCS_OK, tracker.reset(4));
    abi::LaneConsumer *consumer = &lane.header()->consumer;

    ASSERT_EQ(UCS_OK, pxn::complete_piece(lane.completions(), consumer,
                                          &tracker, 2, UCS_OK));
    EXPECT_EQ(0u, consumer->completed);
    ucs_status_t status;
    /* seq 2's entry is already readable by its slot, completed is not. */
    EXPECT_TRUE(pxn::read_completion(&lane.completions()[1], 2, &status));
    ASSERT_EQ(UCS_OK, pxn::complete_piece(lane.completions(), consumer,
                                          &tracker, 1, UCS_ERR_IO_ERROR));
    EXPECT_EQ(2u, consumer->completed);
}

TEST(Descriptor, CompletePieceOutsideWindowWritesNothing)
{
    LaneBlock lane(4, 2);
    pxn::CompletionTracker tracker;
    ASSERT_EQ(UCS_OK, tracker.reset(4));
    abi::LaneConsumer *consumer = &lane.header()->consumer;

    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              pxn::complete_piece(lane.completions(), consumer, &tracker, 5,
                                  UCS_OK));
    EXPECT_EQ(0u, lane.completions()[0].seq);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              pxn::complete_piece(lane.completions(), consumer, &tracker, 0,
                                  UCS_OK));
    ASSERT_EQ(UCS_OK, pxn::complete_piece(lane.completions(), consumer,
                                          &tracker, 3, UCS_OK));
    EXPECT_EQ(UCS_ERR_ALREADY_EXISTS,
              pxn::complete_piece(lane.completions(), consumer, &tracker, 3,
                                  UCS_ERR_IO_ERROR));
    ucs_status_t status;
    ASSERT_TRUE(pxn::read_completion(&lane.completions()[2], 3, &status));
    EXPECT_EQ(UCS_OK, status); /* the first verdict stands */
}

TEST(Descriptor, RefusesCompletionAtOrBelowTrackerStart)
{
    /* Seqs 1..5 done, 6 still at the inner transport, when the relay resets
     * its tracker to initial_seq 6 (a new lane epoch): the late 6 must not
     * land in the slot that the new epoch's pieces use. */
    LaneBlock lane(3, 2);
    pxn::CompletionTracker tracker;
    abi::LaneConsumer *consumer = &lane.header()->consumer;
    ASSERT_EQ(UCS_OK, tracker.reset(3));
    for (uint64_t s = 1; s <= 5; ++s) {
        ASSERT_EQ(UCS_OK, pxn::complete_piece(lane.completions(), consumer,
                                              &tracker, s, UCS_OK));
    }
    ASSERT_EQ(UCS_OK, tracker.reset(3, 6));

    /* The new epoch's seq 7 completes in slot 0 ... */
    ASSERT_EQ(UCS_OK, pxn::complete_piece(lane.completions(), consumer,
                                          &tracker, 7, UCS_ERR_IO_ERROR));
    /* ... and the late seq 6 of the old epoch must not land anywhere. */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              pxn::complete_piece(lane.completions(), consumer, &tracker, 6,
                                  UCS_OK));
    EXPECT_EQ(3u, lane.completions()[2].seq); /* slot of 6 untouched */
    ucs_status_t status;
    ASSERT_TRUE(pxn::read_completion(&lane.completions()[0], 7, &status));
    EXPECT_EQ(UCS_ERR_IO_ERROR, status);
    EXPECT_EQ(7u, consumer->completed);
    /* An old entry never answers another seq. */
    EXPECT_FALSE(pxn::read_completion(&lane.completions()[1], 8, &status));
}

} // namespace
