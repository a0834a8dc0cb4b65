/*
 * Staging of one lane (sender side): how a sender's bytes get into its
 * slots of a relay's arena, and GET replies out of them. The sender knows
 * only this interface; open() picks the implementation from the relay's
 * arena kind:
 *   host arena (shared-memory file): HostStager (pxn_stager_host.cc),
 *     copies at once, rings the doorbell from the CPU;
 *   GPU arena (CUDA IPC): CudaStager (pxn_stager_cuda.h), records a
 *     piece's segments, copies them at commit on a stream (copy engine or
 *     gather kernel) and rings the doorbell from the GPU after the copy.
 *
 * Contract, per lane: open() when the lane is claimed (no slot memory yet),
 * ready() once the relay acknowledged the claim (the lane's slots have
 * memory then: map it), close() before the lane is given back (nothing may
 * touch the slots afterwards: the relay reuses or frees their memory).
 *
 * Contract, per slot (the sender holds the slot's ring credit):
 *   add()/pack_area()+packed()   the bytes of the open piece, in order
 *   commit(seq, slot, op)        the doorbell of seq is rung once the
 *                                bytes are in the slot; before commit()
 *                                returns UCS_OK nothing is published, and
 *                                an error leaves the piece unpublished
 *   copy_out()/unpack()          after the sender read a GET piece's
 *                                completion, for each destination in
 *                                slot order, then end_out(slot);
 *   out_status(slot)             UCS_INPROGRESS while copies out of the
 *                                slot may still read it: the sender gives
 *                                the slot back (and completes the piece's
 *                                requests) only after it answered
 *                                otherwise. Slots finish in end_out() order.
 * Sources and destinations may be host or GPU memory; a zcopy source stays
 * valid until its piece completes, a pack area only until packed().
 *
 * Threading: the lane's sender thread only.
 */
#ifndef PXN_UCT_PXN_STAGER_H_
#define PXN_UCT_PXN_STAGER_H_

#include <ucs/pxn/abi.h>
#include <ucs/pxn/peer_mapping.h>
#include <ucs/pxn/settings.h>

#include <uct/api/uct.h>

#include <cstdint>
#include <memory>

namespace pxn {
namespace uct {

class Stager {
public:
    struct Params {
        PeerMapping       *mapping;  /* the relay (arena kind and handle) */
        uint32_t           lane;     /* the claimed lane's index */
        abi::LaneProducer *producer; /* its doorbell */
        const Settings    *settings;
        int                gpu;      /* this process's GPU, -1 unknown */
    };

    /* UCS_ERR_UNSUPPORTED: an arena this process cannot stage into (a GPU
     * arena without the CUDA backend, or without a GPU of its own). */
    static ucs_status_t open(const Params &params, std::unique_ptr<Stager> *stager);

    virtual ~Stager() = default;

    /* The relay acknowledged the lane (its slots' memory is committed):
     * map what the data path will touch, on the control path. An error
     * fails the lane. */
    virtual ucs_status_t ready() { return UCS_OK; }
    /* The lane is about to be given back: let copies into its slots end
     * and unmap what only this lane used. Idempotent. */
    virtual void close() {}

    /* `length` bytes of `src` at `offset` of the open piece of `slot`. */
    virtual void add(uint32_t slot, const void *src, uint64_t offset,
                     uint64_t length) = 0;
    /* Host memory where a pack callback writes up to `max` bytes that go
     * to `offset` of `slot`; packed() says how many it wrote. */
    virtual uint8_t *pack_area(uint32_t slot, uint64_t offset, size_t max) = 0;
    virtual ucs_status_t packed(uint32_t slot, uint64_t offset,
                                size_t length) = 0;
    virtual ucs_status_t commit(uint64_t seq, uint32_t slot, abi::Op op) = 0;
    /* Rings doorbells whose copies finished (CPU doorbells of GPU copies);
     * returns how many. */
    virtual unsigned progress() { return 0; }
    virtual bool     idle() const { return true; }

    /* GET replies, `length` bytes at `offset` of `slot`: copy_out() may
     * only enqueue the copy; unpack() has called `unpack` when it returns. */
    virtual ucs_status_t copy_out(uint32_t slot, uint64_t offset, void *dest,
                                  uint64_t length) = 0;
    virtual ucs_status_t unpack(uint32_t slot, uint64_t offset,
                                uct_unpack_callback_t unpack, void *arg,
                                uint64_t length) = 0;
    /* The last copy out of `slot` for its piece was issued. An error: the
     * caller waits with wait_out(). */
    virtual ucs_status_t end_out(uint32_t slot) { return UCS_OK; }
    /* UCS_INPROGRESS until every copy out of `slot` finished; then UCS_OK
     * or the error that ended one. */
    virtual ucs_status_t out_status(uint32_t slot) { return UCS_OK; }
    /* Blocks until every copy out finished (a failing lane: its requests
     * complete, so nothing may write their buffers afterwards). */
    virtual void         wait_out() {}

    /* Pieces copied by the GPU gather kernel so far. */
    virtual uint64_t gather_pieces() const { return 0; }

    /* Tests only: every stager open() makes from now on is passed through
     * `wrap` (nullptr: none). Set while no lane opens. */
    using Wrapper = std::unique_ptr<Stager> (*)(std::unique_ptr<Stager> inner);
    static void wrap_for_tests(Wrapper wrap);
};

} // namespace uct
} // namespace pxn

#endif
