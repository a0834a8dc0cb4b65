/*
 * The operations of one soak pass: a list of ucx_pxn_peer "put"/"get"
 * commands that together cover every byte of a buffer at least once, with
 * random sizes (log-uniform), random offsets, random kinds and random chunk
 * sizes within what the transport offers (Caps, from the peer's "caps").
 *
 * A pass starts with up to kRandomOps operations at random offsets (they
 * may overlap), then fills each byte range they left uncovered with
 * operations of random size that end exactly at the gap's end. Every
 * command is at most kMaxChunks UCT operations (a chunk is one UCT
 * operation), so that its duration stays bounded by its bytes.
 *
 * Pure logic: no I/O, deterministic for a given generator state.
 */
#ifndef PXN_TOOLS_SOAK_PLAN_H_
#define PXN_TOOLS_SOAK_PLAN_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace pxn_tools {

/* Largest operation of each kind; 0: the transport does not offer it. */
struct SoakCaps {
    uint64_t put_short = 0;
    uint64_t put_bcopy = 0;
    uint64_t put_zcopy = 0;
    uint64_t get_bcopy = 0;
    uint64_t get_zcopy = 0;

    /* From a peer's "caps <5 numbers>" answer; false if malformed. */
    static bool parse(const std::string &line, SoakCaps *caps);
};

struct SoakOp {
    bool        get;    /* else put */
    std::string kind;   /* peer command kind: short, bcopy, zcopy */
    uint64_t    offset; /* the same offset in the local and remote buffer */
    uint64_t    bytes;
    uint64_t    chunk;  /* bytes per UCT operation */

    /* The ucx_pxn_peer command line for a remote buffer at raddr. */
    std::string command(const std::string &raddr, const std::string &rkey) const;
};

class SoakPlanner {
public:
    static constexpr unsigned kRandomOps = 8;
    static constexpr uint64_t kMaxChunks = 4096;

    /* Sizes are drawn from [1, max_op] (max_op clamped to buffer_size). */
    SoakPlanner(const SoakCaps &caps, uint64_t buffer_size, uint64_t max_op);

    /* The operations of one pass over the whole buffer; empty if the
     * direction has no usable kind (no get on this transport). */
    std::vector<SoakOp> pass(bool get, std::mt19937_64 &rng) const;

    /* Whether a direction has any kind at all. */
    bool can(bool get) const;

private:
    uint64_t log_uniform(uint64_t lo, uint64_t hi, std::mt19937_64 &rng) const;
    /* One operation of `bytes` at `offset`: kind and chunk. */
    SoakOp   make_op(bool get, uint64_t offset, uint64_t bytes,
                     std::mt19937_64 &rng) const;

    SoakCaps caps_;
    uint64_t buffer_size_;
    uint64_t max_op_;
};

/* Sorted, merged byte ranges [begin, end). */
class ByteCoverage {
public:
    void add(uint64_t begin, uint64_t end);
    /* The ranges of [0, size) not covered, in order. */
    std::vector<std::pair<uint64_t, uint64_t>> gaps(uint64_t size) const;

private:
    std::vector<std::pair<uint64_t, uint64_t>> ranges_;
};

} // namespace pxn_tools

#endif
