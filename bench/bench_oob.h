/*
 * The out-of-band channel of the UCP benchmarks' processes
 * (ucx_pxn_ucp_bench, ucx_pxn_kv_bench) and how those processes end.
 *
 * One TCP connection on 127.0.0.1: the target listens on the port, prints
 * "<program>: target listening on port <port>" (what the launcher waits
 * for) and accepts one initiator; the initiator connects, retrying while
 * the target does not listen yet. Over it go fixed-size messages
 * (io_all) and length-prefixed blobs (worker addresses, packed rkeys; at
 * most 1 MiB each).
 *
 * A process of these benchmarks exits with a UcpBenchExit. bench_fail()
 * prints "<program>: <what>" on stderr and exits; the blob functions and
 * oob_socket() end the process with kBenchSetup when the channel cannot be
 * set up or breaks; io_all() returns false instead, so that a target can
 * tell that its initiator went away.
 */
#ifndef PXN_BENCH_BENCH_OOB_H_
#define PXN_BENCH_BENCH_OOB_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pxn_tools {

enum UcpBenchExit { kBenchOk = 0, kBenchMismatch = 1, kBenchSetup = 2,
                    kBenchTransfer = 3 };

[[noreturn]] void bench_fail(int code, const std::string &what);
/* How a target ends once its initiator said done (`served`) or went away:
 * "<program>: target done" or "... lost its initiator", then quick_exit()
 * with kBenchOk or kBenchTransfer (no UCX teardown under a gone peer; pxn
 * removes its registry files, exit_cleanup.h). */
[[noreturn]] void bench_target_end(bool served);

/* Sends (out) or receives exactly len bytes; false if the peer went away. */
bool io_all(int fd, void *buf, size_t len, bool out);

void                 send_blob(int fd, const void *data, size_t len);
std::vector<uint8_t> recv_blob(int fd);

/* The connected socket (the target's accepted one). */
int oob_socket(bool target, int port);

} // namespace pxn_tools

#endif
