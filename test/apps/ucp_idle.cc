/*
 * A UCP program that does nothing but start: context (RMA and TAG) and one
 * worker with whatever configuration the environment gives, then reports
 * what it has and exits:
 *
 *   ucp_idle [repeat]
 *
 *   time_ns <context + worker creation, the fastest of `repeat` runs>
 *   threads <count> <comm,comm,...>
 *   pxn_threads <threads named ucx-pxn>
 *   registry yes|no   <$UCX_PXN_REGISTRY_DIR or /dev/shm>/ucx-pxn-<uid>-<
 *                     $UCX_PXN_GROUP or default> while the worker exists
 *   worker ok | worker failed <status>
 *
 * The opt-in test and the startup benchmark (bench/opt_in.sh) compare it
 * with pxn installed, asked for or not, and with the module not loaded.
 */
#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace {

bool registry_exists()
{
    const char *base  = getenv("UCX_PXN_REGISTRY_DIR");
    const char *group = getenv("UCX_PXN_GROUP");
    const std::string dir = std::string((base && *base) ? base : "/dev/shm") +
                            "/ucx-pxn-" + std::to_string(geteuid()) + "-" +
                            ((group && *group) ? group : "default");
    struct stat st;
    return stat(dir.c_str(), &st) == 0;
}

std::string thread_names(unsigned *count, unsigned *pxn)
{
    std::string names;
    *count = *pxn = 0;
    DIR *d = opendir("/proc/self/task");
    if (d == nullptr) {
        return names;
    }
    for (dirent *e; (e = readdir(d)) != nullptr;) {
        if (e->d_name[0] == '.') {
            continue;
        }
        std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
        std::string name;
        std::getline(comm, name);
        names += (names.empty() ? "" : ",") + name;
        ++*count;
        *pxn += (name == "ucx-pxn");
    }
    closedir(d);
    return names;
}

} // namespace

int main(int argc, char **argv)
{
    const int repeat = (argc > 1) ? std::max(1, atoi(argv[1])) : 1;
    long best_ns     = -1;
    ucs_status_t status = UCS_OK;
    for (int r = 0; (r < repeat) && (status == UCS_OK); ++r) {
        const auto start = std::chrono::steady_clock::now();
        ucp_config_t *config;
        ucp_context_h context;
        ucp_worker_h worker;
        ucp_params_t params       = {};
        params.field_mask         = UCP_PARAM_FIELD_FEATURES;
        params.features           = UCP_FEATURE_RMA | UCP_FEATURE_TAG;
        ucp_worker_params_t wparams = {};
        status = ucp_config_read(NULL, NULL, &config);
        if (status == UCS_OK) {
            status = ucp_init(&params, config, &context);
            ucp_config_release(config);
        }
        if (status != UCS_OK) {
            printf("worker failed %s\n", ucs_status_string(status));
            return 1;
        }
        status = ucp_worker_create(context, &wparams, &worker);
        const long ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::steady_clock::now() - start).count();
        best_ns = ((best_ns < 0) || (ns < best_ns)) ? ns : best_ns;
        if ((status == UCS_OK) && (r == repeat - 1)) {
            unsigned count, pxn;
            const std::string names = thread_names(&count, &pxn);
            printf("time_ns %ld\nthreads %u %s\npxn_threads %u\nregistry %s\n",
                   best_ns, count, names.c_str(), pxn,
                   registry_exists() ? "yes" : "no");
        }
        if (status == UCS_OK) {
            ucp_worker_destroy(worker);
        }
        ucp_cleanup(context);
    }
    if (status != UCS_OK) {
        printf("worker failed %s\n", ucs_status_string(status));
        return 1;
    }
    printf("worker ok\n");
    return 0;
}
