/*
 * Where the engine thread runs and at what priority (UCX_PXN_ENGINE_CPUS,
 * UCX_PXN_ENGINE_NICE): applied by the engine thread to itself, when it
 * starts and again once the process's GPU is known.
 *
 * Contract: never leaves the CPUs the process was allowed when the thread
 * started (`allowed`: a cpuset or taskset stays honoured), never a
 * privileged scheduling class. A setting that cannot be honoured is
 * warned about once; the thread then keeps what it inherited.
 */
#ifndef PXN_UCT_PXN_ENGINE_PLACE_H_
#define PXN_UCT_PXN_ENGINE_PLACE_H_

#include <ucs/pxn/settings.h>

#include <vector>

namespace pxn {
namespace uct {

/* The calling thread's CPUs now (sorted). */
std::vector<int> thread_cpus();

/* Engine thread: binds itself to the CPUs the setting chooses among
 * `allowed` for GPU `gpu` (-1: unknown) and sets its nice value. */
void place_engine_thread(const Settings &settings, int gpu,
                         const std::vector<int> &allowed);

} // namespace uct
} // namespace pxn

#endif
