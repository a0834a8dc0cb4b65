#include "ucp_bench_rails.h"

#include "bench_oob.h"
#include <apps/locate.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

namespace pxn_tools {

bool ucp_rails_option(UcpRailsConfig *config, const std::string &name,
                      const std::string &value)
{
    if (name == "--prefix") {
        config->prefix = value;
    } else if (name == "--relay") {
        config->relay = value;
    } else if (name == "--logs") {
        config->logs = value;
    } else if (name == "--env") {
        config->env.push_back(value);
    } else {
        return false;
    }
    return true;
}

UcpRails::UcpRails(const UcpRailsConfig &config, const std::string &tag) : c_(config)
{
    if (c_.relay.empty()) {
        const char *prefix = getenv("PXN_UCX_PREFIX");
        c_.relay = ((prefix && *prefix) ? std::string(prefix) : make_var("UCX_PREFIX")) +
                   "/bin/ucx_pxn_relay";
    }
    if (access(c_.relay.c_str(), X_OK) != 0) {
        bench_fail(kBenchSetup, "no relay program at " + c_.relay + " (--relay PATH)");
    }
    if (c_.logs.empty()) {
        std::string tmpl = "/tmp/" + tag + "-XXXXXX";
        if (mkdtemp(&tmpl[0]) == nullptr) {
            bench_fail(kBenchSetup, "mkdtemp failed");
        }
        c_.logs = tmpl;
    } else if ((mkdir(c_.logs.c_str(), 0755) != 0) && (errno != EEXIST)) {
        bench_fail(kBenchSetup, "cannot make " + c_.logs + ": " + strerror(errno));
    }
}

UcpRails::~UcpRails()
{
    if (started_) {
        stop_relays();
    }
}

std::vector<std::string> UcpRails::env(int node, int rail) const
{
    const std::string dev = c_.gpu ? "cuda" : "memory";
    std::vector<std::string> env = {
        "UCX_PXN_NODE_ID=node" + std::to_string(node),
        "UCX_PXN_GROUP=" + c_.prefix + "-node" + std::to_string(node),
        "UCX_PXN_RAIL_MAP=" + dev + ":rail" + std::to_string(rail),
        std::string("UCX_PXN_NET_TLS=") + (c_.gpu ? "cuda_ipc" : "cma"),
        std::string("UCX_TLS=") + (c_.gpu ? "pxn,tcp,cuda_copy" : "pxn,tcp")};
    if (c_.gpu) {
        env.insert(env.end(), {"UCX_PROTO_ENABLE=y", "UCX_CUDA_IPC_ENABLE_GET_ZCOPY=y",
                               "UCX_PXN_CUDA_DEVICE=" + std::to_string(c_.device)});
    }
    env.insert(env.end(), c_.env.begin(), c_.env.end());
    return env;
}

void UcpRails::start_relays()
{
    const int slots[2][2] = {{0, 1}, {1, 0}};
    std::vector<std::string> argv = c_.relay_wrap;
    argv.push_back(c_.relay);
    argv.insert(argv.end(), c_.relay_args.begin(), c_.relay_args.end());
    for (int i = 0; i < 2; ++i) {
        std::string error;
        if (!relays_[i].start("", env(slots[i][0], slots[i][1]), argv,
                              c_.logs + "/relay" + std::to_string(i) + ".log", &error) ||
            !relays_[i].wait_for_output("relaying on", 30000)) {
            bench_fail(kBenchSetup, "relay did not start: " + error + "\n" +
                                    relays_[i].output());
        }
    }
    started_ = true;
}

void UcpRails::stop_relays()
{
    started_ = false;
    for (BackgroundProcess &r : relays_) {
        r.kill(SIGTERM);
        r.wait(10000);
        const std::string out = r.output();
        const size_t at = out.find("relayed ");
        printf("relay: %s", (at == std::string::npos) ? "no counters\n" :
                                out.substr(at, out.find('\n', at) - at + 1).c_str());
    }
}

std::string UcpRails::self_exe()
{
    char exe[4096];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
        bench_fail(kBenchSetup, "cannot find this program (/proc/self/exe)");
    }
    exe[n] = '\0';
    return exe;
}

} // namespace pxn_tools
