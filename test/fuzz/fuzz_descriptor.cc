/*
 * libFuzzer target: the relay's view of a hostile descriptor.
 *
 * Input: a Params block (below, little-endian, zero-padded when short), then
 * the raw bytes of a descriptor as they would sit in the lane (header, then
 * plans). The bytes are placed in an aligned buffer, snapshotted with
 * DescriptorSnapshot::load() and validated against the relay's lane state
 * from Params. Must never crash or hit UB; on acceptance the invariants the
 * relay relies on are asserted (plans tile [0, length) of the slot, every
 * index is in range, nothing wraps), the slicer's ops are checked against
 * the plans, and the writer must reproduce a descriptor that validates
 * again. Completion status sanitising is checked on the same bytes.
 *
 * Built by test/fuzz/run.sh. With -DPXN_FUZZ_SEED_WRITER it is instead a
 * program that writes a seed corpus into the directory given as argv[1].
 */
#include "fuzz_check.h"

#include <ucs/pxn/descriptor.h>
#include <ucs/pxn/slicer.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

namespace abi = pxn::abi;

struct Params {
    uint64_t expected_seq;
    uint64_t lane_epoch;
    uint64_t rkeys_valid;
    uint32_t routes_valid; /* bit r: route r usable by the lane (r < 32) */
    uint32_t slot_size;    /* 0 -> 1 */
    uint32_t relay_slice;
    uint32_t merge;
    uint32_t max_zcopy;    /* 0 -> 1 */
    int32_t  completion_status;
    uint16_t max_plan;     /* % 64 + 1 */
    uint8_t  capacity;     /* % 64 + 1 */
    uint8_t  mode;         /* bit 0: expect the header's seq, bit 1: its epoch */
    uint8_t  pad[4];
};
static_assert(sizeof(Params) == 56, "seed format");

constexpr size_t kMaxCapacity = 64;

struct alignas(64) DescBuffer {
    abi::DescriptorHeader header;
    abi::Plan             plans[kMaxCapacity];
};

void check_slices(const pxn::DescriptorSnapshot &snap, const Params &p)
{
    pxn::SlicePolicy policy;
    const pxn::InnerLimits limits = {uint64_t(p.max_zcopy ? p.max_zcopy : 1),
                                     1, uint64_t(p.merge & 0xff)};
    FUZZ_CHECK(pxn::make_slice_policy(p.relay_slice, p.merge, limits,
                                      &policy) == UCS_OK);
    FUZZ_CHECK((policy.slice >= 1) && (policy.slice <= limits.max_zcopy));
    FUZZ_CHECK(policy.slice + policy.merge <= limits.max_zcopy);

    const uint32_t count = snap.header().plan_count;
    pxn::Slicer    slicer;
    pxn::InnerOp   op;
    uint64_t       covered = 0, ops = 0;
    slicer.reset(policy, snap.plans(), count);
    while (slicer.next(&op)) {
        FUZZ_CHECK(op.plan < count);
        const abi::Plan &plan = snap.plans()[op.plan];
        FUZZ_CHECK(op.length >= 1);
        FUZZ_CHECK(op.length <= limits.max_zcopy);
        FUZZ_CHECK(op.slot_offset == covered);       /* in order, no gap */
        FUZZ_CHECK(op.slot_offset + op.length <= snap.header().length);
        FUZZ_CHECK(op.rkey_index == plan.rkey_index);
        FUZZ_CHECK(op.remote_addr >= plan.remote_addr);
        FUZZ_CHECK(op.remote_addr - plan.remote_addr + op.length <= plan.length);
        covered += op.length;
        /* A plan of 4 GiB - 1 at slice 1 would take long: bound the work. */
        if (++ops > 4096) {
            return;
        }
    }
    FUZZ_CHECK(covered == snap.header().length);
    FUZZ_CHECK(ops == pxn::Slicer::count_ops(policy, snap.plans(), count));
}

void check_accepted(const pxn::DescriptorSnapshot &snap,
                    const pxn::LaneCheck &lane, const Params &p)
{
    const abi::DescriptorHeader &h = snap.header();
    FUZZ_CHECK(h.seq == lane.expected_seq && h.seq != 0);
    FUZZ_CHECK(h.lane_epoch == lane.lane_epoch);
    FUZZ_CHECK(h.op == abi::kOpPut || h.op == abi::kOpGet);
    FUZZ_CHECK(h.flags == 0);
    FUZZ_CHECK(h.plan_count >= 1 && h.plan_count <= lane.max_plan &&
               h.plan_count <= snap.capacity());
    FUZZ_CHECK(snap.plans_loaded() == h.plan_count);
    FUZZ_CHECK(h.length <= lane.slot_size);
    FUZZ_CHECK(h.route < lane.routes && lane.route_usable);

    uint64_t offset = 0;
    for (uint32_t i = 0; i < h.plan_count; ++i) {
        const abi::Plan &plan = snap.plans()[i];
        FUZZ_CHECK(plan.length > 0);
        FUZZ_CHECK(plan.rkey_index < abi::kMaxRkeys &&
                   (lane.rkeys_valid >> plan.rkey_index) & 1);
        FUZZ_CHECK(plan.remote_addr + plan.length > plan.remote_addr);
        /* Within the slot: [offset, offset + length) inside [0, length). */
        FUZZ_CHECK(offset + plan.length <= h.length);
        offset += plan.length;
    }
    FUZZ_CHECK(offset == h.length);

    /* The writer reproduces a descriptor that validates the same way. */
    static DescBuffer copy;
    pxn::write_descriptor(&copy.header, h.seq, h.lane_epoch, abi::Op(h.op),
                          h.route, snap.plans(), h.plan_count);
    pxn::DescriptorSnapshot again;
    FUZZ_CHECK(again.init(snap.capacity()) == UCS_OK);
    again.load(&copy.header);
    pxn::DescReason reason;
    FUZZ_CHECK(pxn::validate_descriptor(again, lane, &reason) == UCS_OK);
    FUZZ_CHECK(again.header().length == h.length);

    check_slices(snap, p);
}

void check_completion(int32_t raw, uint64_t seq)
{
    abi::Completion c = {};
    ucs_status_t    status;
    c.seq    = seq;
    c.status = raw;
    if (pxn::read_completion(&c, seq, &status)) {
        FUZZ_CHECK(seq != 0);
        FUZZ_CHECK(status <= UCS_OK && status > UCS_ERR_LAST);
        FUZZ_CHECK((status == raw) || (status == UCS_ERR_IO_ERROR));
    } else {
        FUZZ_CHECK(seq == 0);
    }
}

void run_one(const uint8_t *data, size_t size)
{
    Params p = {};
    std::memcpy(&p, data, std::min(size, sizeof(p)));
    const size_t body = (size > sizeof(p)) ? size - sizeof(p) : 0;

    static DescBuffer buf;
    std::memset(&buf, 0, sizeof(buf));
    std::memcpy(&buf, data + std::min(size, sizeof(p)),
                std::min(body, sizeof(buf)));

    pxn::LaneCheck lane;
    lane.expected_seq = (p.mode & 1) ? buf.header.seq : p.expected_seq;
    lane.lane_epoch   = (p.mode & 2) ? buf.header.lane_epoch : p.lane_epoch;
    lane.slot_size    = p.slot_size ? p.slot_size : 1;
    lane.max_plan     = p.max_plan % kMaxCapacity + 1;
    lane.routes       = 32;
    lane.rkeys_valid  = p.rkeys_valid;

    static pxn::DescriptorSnapshot snaps[kMaxCapacity + 1];
    const uint32_t capacity = p.capacity % kMaxCapacity + 1;
    pxn::DescriptorSnapshot &snap = snaps[capacity];
    if (snap.capacity() == 0) {
        FUZZ_CHECK(snap.init(capacity) == UCS_OK);
    }
    snap.load(&buf.header);
    /* the relay's verdict on the route, from the same snapshot */
    const uint32_t route = snap.header().route;
    lane.route_usable    = (route < 32) && ((p.routes_valid >> route) & 1);

    pxn::DescReason    reason = pxn::DescReason::kOk;
    const ucs_status_t status = pxn::validate_descriptor(snap, lane, &reason);
    FUZZ_CHECK(unsigned(reason) < pxn::kDescReasonCount);
    FUZZ_CHECK(pxn::desc_reason_name(reason) != nullptr);
    FUZZ_CHECK((status == UCS_OK) == (reason == pxn::DescReason::kOk));
    if (status == UCS_OK) {
        check_accepted(snap, lane, p);
    }
    check_completion(p.completion_status, buf.header.seq);
}

} // namespace

#ifndef PXN_FUZZ_SEED_WRITER

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run_one(data, size);
    return 0;
}

#else

namespace {

void write_seed(const std::string &dir, const char *name, const Params &p,
                const DescBuffer &d, uint32_t plans)
{
    const std::string path = dir + "/" + name;
    FILE *f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) {
        std::perror(path.c_str());
        std::exit(1);
    }
    std::fwrite(&p, sizeof(p), 1, f);
    std::fwrite(&d, sizeof(d.header) + plans * sizeof(abi::Plan), 1, f);
    std::fclose(f);
}

} // namespace

int main(int argc, char **argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
        return 2;
    }
    Params p = {};
    p.expected_seq = 5;
    p.lane_epoch   = 0xE0;
    p.rkeys_valid  = 0xf;
    p.routes_valid = 0x3;
    p.slot_size    = 1 << 20;
    p.relay_slice  = 64 << 10;
    p.merge        = 4 << 10;
    p.max_zcopy    = 1 << 20;
    p.max_plan     = 7;  /* -> 8 */
    p.capacity     = 15; /* -> 16 */

    static DescBuffer d;
    const abi::Plan plans[] = {{0x1000, 300 << 10, 0}, {0x900000, 200, 3},
                               {0x20000, 1, 1}};
    pxn::write_descriptor(&d.header, 5, 0xE0, abi::kOpPut, 1, plans, 3);
    write_seed(argv[1], "put_valid", p, d, 3);
    pxn::write_descriptor(&d.header, 5, 0xE0, abi::kOpGet, 0, plans, 1);
    write_seed(argv[1], "get_valid", p, d, 1);

    d.plans[1].remote_addr = UINT64_MAX - 10;
    pxn::write_descriptor(&d.header, 5, 0xE0, abi::kOpPut, 1, d.plans, 3);
    d.plans[1].remote_addr = UINT64_MAX - 10;
    write_seed(argv[1], "address_wrap", p, d, 3);

    pxn::write_descriptor(&d.header, 4, 0xE0, abi::kOpPut, 1, plans, 3);
    write_seed(argv[1], "stale_seq", p, d, 3);

    p.mode = 3;
    pxn::write_descriptor(&d.header, 77, 0x1234, abi::kOpPut, 0, plans, 2);
    d.header.length += 1;
    write_seed(argv[1], "sum_mismatch", p, d, 2);

    p.completion_status = -3;
    p.relay_slice       = 0;
    pxn::write_descriptor(&d.header, 9, 0x99, abi::kOpGet, 1, plans, 3);
    write_seed(argv[1], "self_keyed", p, d, 3);
    return 0;
}

#endif
