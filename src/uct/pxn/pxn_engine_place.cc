#include "pxn_engine_place.h"

#include "pxn_cuda.h"
#include "pxn_log.h"

#include <ucs/debug/log_def.h>
#include <ucs/pxn/cpu_list.h>
#include <ucs/pxn/topology.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace pxn {
namespace uct {

namespace {

/* The CPUs local to GPU `gpu` (sysfs local_cpulist); empty if unknown. */
std::vector<int> gpu_local_cpus(int gpu)
{
    if (gpu < 0) {
        return {};
    }
    const PciPlace place = gpu_place("/sys", gpu_bus_id(gpu));
    std::ifstream file(place.path + "/local_cpulist");
    const std::string text((std::istreambuf_iterator<char>(file)), {});
    std::vector<int> cpus;
    std::string error;
    return (!place.path.empty() && parse_cpu_list(text, &cpus, &error)) ? cpus :
                                                                          std::vector<int>();
}

void set_nice(const Settings &settings)
{
    int nice;
    if (!engine_nice_value(settings, &nice)) {
        return; /* inherit */
    }
    const pid_t tid = pid_t(syscall(SYS_gettid));
    if (setpriority(PRIO_PROCESS, id_t(tid), nice) != 0) {
        warn_once(strformat("pxn: UCX_PXN_ENGINE_NICE=%d refused (%m; a value below "
                            "the process's needs CAP_SYS_NICE or RLIMIT_NICE): the "
                            "engine thread keeps the process's", nice));
    }
}

} // namespace

std::vector<int> thread_cpus()
{
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> cpus;
    if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) == 0) {
        for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
            if (CPU_ISSET(cpu, &set)) {
                cpus.push_back(cpu);
            }
        }
    }
    return cpus;
}

void place_engine_thread(const Settings &settings, int gpu,
                         const std::vector<int> &allowed)
{
    set_nice(settings);
    std::string why;
    const std::vector<int> cpus = choose_engine_cpus(settings.engine_cpus, allowed,
                                                     gpu_local_cpus(gpu), &why);
    const bool explicit_list = (settings.engine_cpus != "auto") &&
                               (settings.engine_cpus != "inherit");
    if (cpus.empty()) {
        if (explicit_list) {
            warn_once("pxn: the engine thread stays on " + why);
        }
        /* back to everything the process allows (a placement for an
         * earlier GPU no longer holds) */
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu : cpus.empty() ? allowed : cpus) {
        if (cpu < CPU_SETSIZE) {
            CPU_SET(cpu, &set);
        }
    }
    const int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    if (rc != 0) {
        warn_once(strformat("pxn: the engine thread cannot be bound to %s: %s",
                            format_cpu_list(cpus.empty() ? allowed : cpus).c_str(),
                            strerror(rc)));
        return;
    }
    ucs_debug("pxn: engine thread on %s", why.c_str());
}

} // namespace uct
} // namespace pxn
