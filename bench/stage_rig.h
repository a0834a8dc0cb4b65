/*
 * The lane rig of ucx_pxn_stage_bench: one lane of a CUDA arena between two
 * processes, driven by the real pxn::uct::CudaStager.
 *
 * start_relay() forks the relay before the caller touches CUDA. The relay
 * allocates the arena (SLOTS x SLOT_SIZE) on its GPU (another one than the
 * sender's: the NVLink hop of real PXN), exports it by CUDA IPC and, in a
 * loop, load-acquires the lane's doorbell, stamps every new seq with
 * CLOCK_MONOTONIC and store-releases `completed`: the pickup of a real relay
 * without its inner transport. The caller owns the lane's producer block in
 * the MAP_SHARED area, as a sender does in /dev/shm.
 *
 * Errors end the process with a message (a benchmark has nothing to save).
 */
#ifndef PXN_TOOLS_STAGE_RIG_H_
#define PXN_TOOLS_STAGE_RIG_H_

#include <uct/pxn/pxn_stager_cuda.h>

#include <ucs/pxn/abi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <sys/types.h>
#include <vector>

namespace pxn_tools {

constexpr uint64_t kRigRing = 1u << 16; /* pickup stamps, by seq */

/* One anonymous MAP_SHARED area, mapped before fork. The producer block
 * starts the area: the GPU doorbell registers its page. */
struct RigShared {
    pxn::abi::LaneProducer producer;
    alignas(64) uint64_t completed; /* relay: last seq picked up */
    alignas(64) uint64_t ready;     /* relay: 1 = handle valid, 2 = failed */
    uint64_t stop;                  /* caller: relay exits */
    uint8_t  handle[sizeof(CUipcMemHandle)];
    alignas(64) uint64_t submit_ns[kRigRing]; /* caller, latency samples */
    uint64_t pickup_ns[kRigRing];             /* relay, every seq */
};

struct RigOptions {
    uint64_t slot_size  = 8ull << 20;
    uint32_t slots      = 18;
    double   seconds    = 1.0; /* per stream() */
    int      relay_gpu  = 0;   /* the arena's device */
    int      sender_gpu = 0;   /* the source buffer's and the stager's */
};

/* A segment of a piece: offset in the rig's source buffer, length. */
struct Block {
    uint64_t src_offset;
    uint64_t length;
};

/* Every other block of the source buffer, one slot's worth. */
std::vector<Block> scattered(uint64_t block, uint64_t slot_size);
/* One slot's worth of `length`-byte blocks (the last one cut) from source
 * offsets 2 * i * length + shift: with `shift` % 16 != 0 every source is
 * misaligned against its destination; a `length` that is not a multiple of
 * 16 misaligns the destinations too. */
std::vector<Block> shifted(uint64_t length, uint64_t shift, uint64_t slot_size);
/* One slot's worth of blocks of uniform random size in [4 KiB, 1 MiB] from
 * random source offsets (seeded): most start and end unaligned. */
std::vector<Block> random_blocks(uint64_t seed, uint64_t slot_size);

uint64_t now_ns();
double   seconds_since(uint64_t start_ns);
[[noreturn]] void die(const char *what);
void     check_cu(const pxn::uct::CudaDriver *cu, CUresult result,
                  const char *call);
#define RIG_CHECK_CU(_cu, _call) pxn_tools::check_cu(_cu, (_call), #_call)

/* Forks the relay and waits until its arena is exported. */
pid_t start_relay(RigShared *shared, const RigOptions &options);
/* Stops it; false if it failed. */
bool  stop_relay(RigShared *shared, pid_t relay);

class Rig {
public:
    struct Rate {
        double gbps;    /* payload */
        double host_us; /* per piece, in add() and commit() */
    };

    Rig(RigShared *shared, const RigOptions &options);

    /* CUDA context, source buffer (2 x SLOT_SIZE, a pattern), stream. */
    void init();
    /* (Re)opens the lane's stager. */
    void open(pxn::CopyChoice policy, bool gpu_doorbell, unsigned ctas = 32);

    /* Pushes pieces of `blocks` through the lane for `seconds` (at least
     * 2 x SLOTS pieces), or while `more(pieces)` says so; the last piece is
     * read back and compared. */
    Rate   stream(const std::vector<Block> &blocks,
                  const std::function<bool(uint64_t)> &more = nullptr);
    /* The same copies as stream() of one contiguous block, without the
     * lane: enqueued back to back, one synchronisation at the end. */
    double raw(uint64_t length);
    /* Commit-to-pickup latency of single pieces; p50 and p99 in us. */
    void   latency(uint64_t length, unsigned samples, double *p50, double *p99);

    const pxn::uct::CudaDriver *cu() const { return cu_; }
    int                         sms() const { return sms_; }
    pxn::uct::CudaStager       &stager() const { return *stager_; }
    uint64_t                    source_size() const { return 2 * opt_.slot_size; }

private:
    void wait_completed(uint64_t seq);
    void verify(uint32_t slot, const std::vector<Block> &blocks);

    RigShared                            *sh_;
    const RigOptions                      opt_;
    const pxn::uct::CudaDriver           *cu_ = nullptr;
    int                                   sms_ = 0;
    CUdeviceptr                           src_ = 0;
    std::vector<uint8_t>                  host_src_;
    CUstream                              stream_ = nullptr;
    std::unique_ptr<pxn::uct::CudaStager> stager_;
    uint64_t                              seq_ = 0;
};

} // namespace pxn_tools

#endif
