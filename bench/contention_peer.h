/*
 * The two UCP processes of ucx_pxn_contention_bench: an initiator that times
 * single operations one after the other (latency, not bandwidth), and a
 * target that busy-polls its workers, as UCP programs do while they wait.
 *
 * Each holds two UCP contexts (RMA and TAG) over one region of host memory,
 * and so two paths between the same two processes:
 *   pxn   UCX_TLS from the environment (pxn,tcp on the benchmark's rails,
 *         bench/ucp_bench_rails.h): node 0 rail 0 to node 1 rail 1, every
 *         put and get through the relay of node 0 rail 1;
 *   rail  UCX_TLS=tcp: the same two processes over the rail's own
 *         transport, as a peer on the same rail would be reached.
 *
 * Operations (each `iters` times per path, the paths taking turns per op):
 *   put     one block of `size` (ucp_put_nbx), then ucp_ep_flush_nbx;
 *   get     one block of `size` (ucp_get_nbx) into a zeroed buffer;
 *   window  `window` blocks of `size` posted at once, then a flush;
 *   put-big / get-big   as put / get with one block of `big`;
 *   pingpong  `big` bytes tagged to the target and the same bytes back
 *           (ucp_tag_send_nbx / ucp_tag_recv_nbx): UCP's rendezvous, whose
 *           data moves through the path's RMA lanes, as an MPI ping-pong.
 * Every byte is checked, untimed: a get's buffer after each get, a put's
 * destination by the target after the last repetition of an op (each op
 * writes a pattern of its own seed), a ping-pong's echo after the last.
 *
 * The initiator prints one line per op and path:
 *   lat op=<op> path=<pxn|rail> bytes=<per repetition> n=<iters>
 *       p50_us=.. p90_us=.. p99_us=.. max_us=.. verified=<ok|mismatch>
 * Exit status (bench/bench_oob.h): 0 every op completed and every byte
 * matched, 1 a mismatch, 2 setup, 3 a failed operation. alarm(deadline)
 * bounds each process.
 */
#ifndef PXN_BENCH_CONTENTION_PEER_H_
#define PXN_BENCH_CONTENTION_PEER_H_

#include <cstdint>
#include <string>
#include <vector>

namespace pxn_tools {

struct ContentionPeerOptions {
    int                      port     = 13600;
    unsigned                 deadline = 300; /* seconds */
    unsigned                 iters    = 200;
    uint64_t                 size     = 64 << 10;
    uint64_t                 big      = 1 << 20;
    unsigned                 window   = 16;
    std::vector<std::string> ops      = {"put", "get", "window", "put-big",
                                         "get-big", "pingpong"};
    std::vector<std::string> paths    = {"pxn", "rail"};
};

/* The ops the initiator knows, in their usual order. */
const std::vector<std::string> &contention_ops();

int contention_target(const ContentionPeerOptions &o);
int contention_initiator(const ContentionPeerOptions &o);

} // namespace pxn_tools

#endif
