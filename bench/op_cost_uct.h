/*
 * The UCT side of ucx_pxn_op_cost (bench/ucx_pxn_op_cost.cc): one pxn
 * process (md, worker, iface, registered buffers) through the UCT API only,
 * and the pxn counters of a process read from its registry entries, so
 * that the benchmark builds against older trees of the project too.
 */
#ifndef PXN_BENCH_OP_COST_UCT_H_
#define PXN_BENCH_OP_COST_UCT_H_

#include <ucs/pxn/abi.h>
#include <uct/api/uct.h>

#include <string>
#include <sys/types.h>
#include <vector>

namespace pxn_bench {

[[noreturn]] void die(const std::string &why);
/* Dies with `what` unless UCS_OK. */
void check(ucs_status_t status, const char *what);
std::string hex(const void *data, size_t length);
std::vector<uint8_t> unhex(const std::string &text);

/* One UCT md, worker and iface (single-threaded worker, progress enabled).
 * Every failure is fatal: a benchmark has nothing to fall back to. */
struct Uct {
    ucs_async_context_t *async  = nullptr;
    uct_worker_h         worker = nullptr;
    uct_component_h      component = nullptr;
    uct_md_h             md     = nullptr;
    uct_md_attr_t        md_attr{};
    uct_iface_h          iface  = nullptr;
    uct_iface_attr_t     attr{};

    void open(const char *md_name, const char *tl, const char *dev);
    /* `size` bytes, page-aligned, populated and registered (never freed:
     * the process exits); *rkey: the packed rkey in hex. */
    uint8_t *alloc(size_t size, uct_mem_h *memh, std::string *rkey);
};

/* The pxn counters (abi.h) of every registry entry of one process, mapped
 * read-only once the entries exist: summed, each read relaxed. */
class Counters {
public:
    /* Dies when `pid` has no entry in `group`. */
    void map(const std::string &group, pid_t pid);
    /* Pieces the process's relays finished, whatever their outcome. */
    uint64_t relay_done() const;
    /* Pieces the process's senders published. */
    uint64_t sent() const;

private:
    std::vector<const pxn::abi::ProcessCounters*> blocks_;
};

} // namespace pxn_bench

#endif
