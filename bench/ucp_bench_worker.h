/*
 * One UCP context with RMA (or the given features), one single-threaded worker on it and at most
 * one ep, as the UCP benchmarks' processes use them; a process may hold
 * several (ucx_pxn_kv_bench: one through pxn, one on the inner transport
 * alone). `tls`, when given, replaces UCX_TLS for this context only
 * (ucp_config_modify); everything else comes from the environment.
 *
 * Requests: every operation posted with param() completes through
 * on_done(), which counts it out of `outstanding`, notes its status and
 * frees it; track() counts a posted operation in (or notes an immediate
 * status). drain() progresses until none is outstanding; flush() flushes
 * the ep and drains. The first failure is kept in first_failure; failed
 * counts them. Setup failures end the process (bench_fail, kBenchSetup).
 * The destructor closes the ep and destroys the worker and the context;
 * memory handles from map() must be unmapped (unmap()) before.
 */
#ifndef PXN_BENCH_UCP_BENCH_WORKER_H_
#define PXN_BENCH_UCP_BENCH_WORKER_H_

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pxn_tools {

class BenchRegion;

void bench_check(ucs_status_t status, const char *what);

struct UcpBenchWorker {
    ucp_context_h context = nullptr;
    ucp_worker_h  worker  = nullptr;
    ucp_ep_h      ep      = nullptr;
    size_t        outstanding = 0, failed = 0;
    ucs_status_t  first_failure = UCS_OK;

    explicit UcpBenchWorker(const char *tls = nullptr,
                            uint64_t features = UCP_FEATURE_RMA);
    ~UcpBenchWorker();
    UcpBenchWorker(const UcpBenchWorker&) = delete;
    UcpBenchWorker &operator=(const UcpBenchWorker&) = delete;

    ucp_mem_h map(const BenchRegion &region);
    void      unmap(ucp_mem_h memh);
    /* The target's side of the out-of-band exchange (bench/bench_oob.h):
     * sends this worker's address, the region's address and the packed
     * rkey of `memh` (its mapping of the region). */
    void offer(int fd, const BenchRegion &region, ucp_mem_h memh) const;
    /* The initiator's side: an ep to the offered worker; the offered
     * region's address in *remote; its rkey (ucp_rkey_destroy it before
     * close_ep()). */
    ucp_rkey_h accept(int fd, uint64_t *remote);
    /* Closes the ep (flushing), if there is one. */
    void close_ep();

    /* Callback and user data of a tracked operation; `mem` (when given:
     * UCS_MEMORY_TYPE_HOST or _CUDA) as the local memory type. */
    ucp_request_param_t param(int mem = -1);
    void note(ucs_status_t status);
    void track(ucs_status_ptr_t request);
    static void on_done(void *request, ucs_status_t status, void *user_data);
    void drain();
    void flush();
};

} // namespace pxn_tools

#endif
