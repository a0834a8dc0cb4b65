/*
 * The two UCP processes of ucx_pxn_kv_bench: a target that exposes one
 * region (host or GPU memory) and fills or checks it on request, and an
 * initiator that moves KV-cache shaped transfers into (put) or out of (get)
 * it. Each holds up to two UCP contexts over the same region:
 *   pxn    UCX_TLS from the environment (pxn on the benchmark's rails,
 *          bench/ucp_bench_rails.h): modes "pxn" and "pxn-sgl";
 *   inner  UCX_TLS = the inner transport alone (`inner_tls`: cuda_ipc,
 *          cuda_copy,tcp with GPU memory, cma,tcp with host memory; no
 *          pxn): modes "inner" and "inner-sgl".
 *
 * A shape NxS is a list of N blocks of S bytes. A transfer posts the whole
 * list at once, as NIXL posts a descriptor list: one ucp_put_nbx /
 * ucp_get_nbx per block (modes "inner", "pxn"), or the list as one call
 * with UCP's SGL datatype (ucp_dt_make_sgl(), UCX 1.22 on: "inner-sgl",
 * "pxn-sgl"); then it flushes the ep (ucp_ep_flush_nbx) and waits for every
 * request. A transfer's time runs from its first post to the flush's
 * completion. The blocks lie in slots of S bytes of [0, 2 N S) of the
 * region on both sides, N of the 2N slots on each side, picked and paired
 * by a seeded shuffle (kv_layout): scattered, unordered, as a KV cache's
 * block tables are.
 *
 * A measurement (per shape, op, mode and rep): `warmup` transfers, then
 * `iters` transfers (or, with iters 0, transfers until `seconds` have
 * passed, at least 3), then the check, untimed: after puts the target
 * checks every slot of [0, 2 N S) (the blocks' slots hold the initiator's
 * pattern for them, every other slot the filler written before the
 * measurement); after gets the initiator checks its own slots likewise
 * (other slots still zero). Output, one line per measurement:
 *   kv op=<put|get> shape=<NxS> mode=<m> rep=<r> transfers=<n>
 *      bytes=<per transfer> gbps=<..> blocks_per_s=<..> p50_us=<..>
 *      p99_us=<..> verified=<ok|mismatch>
 * (gbps and blocks_per_s over the summed time of the timed transfers, p50
 * and p99 of their times), or where a mode does not run:
 *   kv op=.. shape=.. mode=.. rep=<r> status=<n/a|refused|failed> reason=<..>
 * "n/a": this UCX has no such operation (compiled out); "refused": the
 * mode's first post returned an error (UCP's status string), nothing was
 * moved, and the mode is not tried again for that op; "failed": an
 * operation of the measurement completed with an error (the run goes on,
 * its exit status is 3 unless a byte did not match).
 * Each ep's configuration goes first, one "ep mode=<pxn|inner>: <line>"
 * per line of ucp_ep_print_info(), then "inner context: UCX_TLS=<list>".
 *
 * The target progresses its workers once a millisecond (pxn, cma and
 * cuda_ipc need nothing of it), and the inner one without pause while an
 * inner measurement runs: UCX 1.13 has no RMA lane on cma or cuda_ipc and
 * emulates the inner context's puts and gets with active messages.
 *
 * Exit status (bench/bench_oob.h): 0 every transfer completed and every
 * byte matched, 1 a mismatch, 2 a setup error, 3 a failed transfer;
 * alarm(deadline) bounds the process.
 */
#ifndef PXN_BENCH_KV_BENCH_PEER_H_
#define PXN_BENCH_KV_BENCH_PEER_H_

#include "bench_oob.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pxn_tools {

struct KvShape {
    uint64_t count = 0, size = 0;
};

/* "744x45K" <-> {744, 46080}; parse: false for anything else (S a
 * multiple of 8). */
bool        parse_kv_shape(const std::string &text, KvShape *shape);
std::string kv_shape_name(const KvShape &shape);

/* Where block b of a transfer lies: at `local` in the initiator's region,
 * at `remote` in the target's (offsets; both multiples of the size). */
struct KvBlock {
    uint64_t local, remote;
};
std::vector<KvBlock> kv_layout(const KvShape &shape, uint64_t seed);
/* The bytes a shape's slots take on either side: 2 N S. */
uint64_t kv_span(const KvShape &shape);

struct KvBenchPeerOptions {
    bool                     gpu      = false;
    int                      device   = 0;
    int                      port     = 13600;
    unsigned                 deadline = 600; /* seconds, alarm() */
    std::string              inner_tls;     /* "": by memory type (above) */
    /* initiator */
    std::vector<KvShape>     shapes;
    std::vector<std::string> ops   = {"put", "get"};
    std::vector<std::string> modes = {"inner", "inner-sgl", "pxn", "pxn-sgl"};
    unsigned                 reps    = 2;
    unsigned                 iters   = 0;    /* 0: by seconds */
    double                   seconds = 0.25;
    unsigned                 warmup  = 2;
    uint64_t                 seed    = 1;
};

/* The default shapes: 1x64K, 1x1M, 32x1M, 512x64K, 744x45K, 4096x8K. */
std::vector<KvShape> kv_default_shapes();
/* Whether `mode` is one of the four. */
bool kv_known_mode(const std::string &mode);

int kv_bench_target(const KvBenchPeerOptions &o);
int kv_bench_initiator(const KvBenchPeerOptions &o);

} // namespace pxn_tools

#endif
