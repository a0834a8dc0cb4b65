/*
 * Where the engine thread runs (UCX_PXN_ENGINE_CPUS): CPU lists in the
 * kernel's form ("0-3,8,10-11", as sysfs local_cpulist and taskset -c
 * write them) and the choice of the engine thread's CPUs.
 *
 * Contract: pure functions over the given lists, no syscalls and no
 * logging; the caller reads its affinity and sysfs and applies the result.
 */
#ifndef PXN_CPU_LIST_H_
#define PXN_CPU_LIST_H_

#include <string>
#include <vector>

namespace pxn {

/* "0-3,8" -> {0,1,2,3,8}, sorted and unique. false (with *error saying
 * where) for anything else: empty items, reversed ranges, junk, CPUs past
 * kMaxCpu. A trailing newline (sysfs) is taken. */
constexpr int kMaxCpu = 8191;
bool parse_cpu_list(const std::string &text, std::vector<int> *cpus,
                    std::string *error);
/* {0,1,2,3,8} -> "0-3,8". */
std::string format_cpu_list(const std::vector<int> &cpus);

/* The engine thread's CPUs for setting `setting` (UCX_PXN_ENGINE_CPUS) in a
 * process allowed `allowed` (its affinity, sorted), whose GPU is local to
 * `gpu_local` (empty: unknown). Empty result: leave the thread where it is
 * (it inherits the process's affinity); *why says what was chosen and why.
 *   "inherit"  the process's affinity;
 *   "auto"     the CPUs of `allowed` local to the GPU, as NCCL places its
 *              proxy thread, when the GPU is known and some are allowed;
 *              else the process's affinity;
 *   a list     the listed CPUs of `allowed`; none allowed: empty, and *why
 *              says so (the setting cannot be honoured in this process). */
std::vector<int> choose_engine_cpus(const std::string &setting,
                                    const std::vector<int> &allowed,
                                    const std::vector<int> &gpu_local,
                                    std::string *why);

} // namespace pxn

#endif
