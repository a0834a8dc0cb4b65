/*
 * The two UCP processes of ucx_pxn_ucp_bench: a target that exposes a
 * region (host or GPU memory) and checks or fills it on request, and an
 * initiator that puts and gets the region in blocks through whatever UCP
 * chose (pxn, on the benchmark's rails), timing each transfer and checking
 * every byte.
 *
 * They talk over one TCP socket (127.0.0.1): the initiator sends the region
 * size and its requests, the target answers with its worker address,
 * {address, packed rkey}, and one Reply per request. Only the initiator
 * creates an ep; the target progresses its worker while it waits.
 *
 * The initiator prints one line per measurement:
 *   result mode=<m> op=<put|get> rep=<r> blocks=<n> bytes=<b> seconds=<s>
 *          verified=<ok|mismatch>
 * and exits 0 when every transfer completed and every byte matched, 1 on a
 * mismatch, 2 on a setup error, 3 when a transfer failed; the target exits
 * like it. Every wait is bounded by alarm(deadline).
 */
#ifndef PXN_BENCH_UCP_BENCH_PEER_H_
#define PXN_BENCH_UCP_BENCH_PEER_H_

#include "bench_oob.h" /* UcpBenchExit */

#include <cstdint>
#include <string>
#include <vector>

namespace pxn_tools {

struct UcpBenchPeerOptions {
    bool                  gpu      = false; /* buffers in GPU memory */
    int                   device   = 0;     /* which GPU */
    int                   port     = 13500;
    unsigned              deadline = 300;   /* seconds, alarm() */
    /* initiator */
    uint64_t              region       = 256ull << 20;
    uint64_t              small_region = 64ull << 20; /* modes under 64 KiB */
    std::vector<std::string> modes = {"random", "4K", "64K", "1M", "8M"};
    std::vector<std::string> ops   = {"put", "get"};
    unsigned              reps     = 2;
    uint64_t              seed     = 1;
    unsigned              window   = 256; /* outstanding operations */
};

/* A block of a transfer: same offset in the local and the remote region. */
struct UcpBenchBlock {
    uint64_t offset, length;
};

/* The blocks of mode `mode` over [0, region): "random" (sizes uniform in
 * [4 KiB, 1 MiB], so offsets are unaligned; in random order, seeded) or a
 * fixed size ("4K", "64K", ...; in order). Empty for an unknown mode. */
std::vector<UcpBenchBlock> ucp_bench_blocks(const std::string &mode,
                                            uint64_t region, uint64_t seed);

/* Bytes a mode moves: `small_region` for fixed sizes under 64 KiB. */
uint64_t ucp_bench_region(const std::string &mode, const UcpBenchPeerOptions &o);

int ucp_bench_target(const UcpBenchPeerOptions &o);
int ucp_bench_initiator(const UcpBenchPeerOptions &o);

} // namespace pxn_tools

#endif
