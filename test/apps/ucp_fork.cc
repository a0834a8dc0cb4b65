/*
 * ucp_fork: a UCP program with pxn (its relay registered) that forks, as a
 * Python worker pool started with fork does, and reports what the parent
 * still has afterwards:
 *
 *   ucp_fork <exit|cleanup|fresh> [--without-pxn]
 *
 * The child exits at once (exit), or destroys the worker and context it
 * inherited and exits (cleanup), or does that and then starts UCP afresh
 * and exits 0 once its own relay is in the registry, 2 if it is not within
 * 5 s (fresh). The parent then prints
 *
 *   child <exit status>
 *   parent_entry <yes|no>   (its relay's registry entry, after the child)
 *
 * and destroys its own worker and context. UCX_PXN_GROUP names the registry
 * group (default "default"). --without-pxn: the same with UCX_TLS as it is
 * and no relay expected (parent_entry no), to tell UCX's own transports'
 * behaviour across fork from pxn's.
 */
#include "peer_process.h"

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace {

struct Ucp {
    ucp_context_h context = nullptr;
    ucp_worker_h  worker  = nullptr;
};

ucs_status_t start(Ucp *u)
{
    ucp_config_t *config;
    ucp_params_t params       = {};
    params.field_mask         = UCP_PARAM_FIELD_FEATURES;
    params.features           = UCP_FEATURE_RMA;
    ucp_worker_params_t wparams = {};
    ucs_status_t status = ucp_config_read(NULL, NULL, &config);
    if (status != UCS_OK) {
        return status;
    }
    status = ucp_init(&params, config, &u->context);
    ucp_config_release(config);
    if (status == UCS_OK) {
        status = ucp_worker_create(u->context, &wparams, &u->worker);
    }
    return status;
}

void stop(Ucp *u)
{
    if (u->worker != nullptr) {
        ucp_worker_destroy(u->worker);
    }
    if (u->context != nullptr) {
        ucp_cleanup(u->context);
    }
    *u = Ucp();
}

/* Whether process `pid` has a relay in the registry, polling for up to
 * `seconds`. */
bool has_entry(pid_t pid, double seconds)
{
    const char *group = getenv("UCX_PXN_GROUP");
    const auto end    = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(seconds);
    pxn::abi::ProcessCounters c;
    do {
        if (pxn_tools::read_counters(group ? group : "default", pid, &c)) {
            return true;
        }
        usleep(1000);
    } while (std::chrono::steady_clock::now() < end);
    return false;
}

} // namespace

int main(int argc, char **argv)
{
    const std::string mode = (argc > 1) ? argv[1] : "";
    const bool pxn         = (argc < 3) || (std::string(argv[2]) != "--without-pxn");
    if ((mode != "exit") && (mode != "cleanup") && (mode != "fresh")) {
        fprintf(stderr, "usage: ucp_fork <exit|cleanup|fresh> [--without-pxn]\n");
        return 2;
    }
    Ucp parent;
    ucs_status_t status = start(&parent);
    if ((status != UCS_OK) || (pxn && !has_entry(getpid(), 5))) {
        printf("setup failed: %s\n", (status != UCS_OK) ?
               ucs_status_string(status) : "no relay in the registry");
        return 2;
    }
    fflush(stdout);
    const pid_t child = fork();
    if (child == 0) {
        if (mode != "exit") {
            stop(&parent);
        }
        if (mode == "fresh") {
            Ucp fresh;
            const bool ok = (start(&fresh) == UCS_OK) &&
                            (!pxn || has_entry(getpid(), 5));
            stop(&fresh);
            _exit(ok ? 0 : 2);
        }
        _exit(0);
    }
    int wstatus = 0;
    waitpid(child, &wstatus, 0);
    printf("child %d\n", WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) :
                         128 + WTERMSIG(wstatus));
    printf("parent_entry %s\n", has_entry(getpid(), 0) ? "yes" : "no");
    fflush(stdout);
    stop(&parent);
    return 0;
}
