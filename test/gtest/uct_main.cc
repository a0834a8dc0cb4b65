/*
 * gtest entry point. The pxn module is loaded by UCX the way a user's UCX
 * loads it (pxn_test::module_load(): by name or from the module directory,
 * from UCX_PLUGIN_PATH, or with LD_PRELOAD), never from the build tree
 * behind UCX's back: refuse to run against a stale install.
 */
#include "common/test_helpers.h"

#include <apps/locate.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>

static std::string read_file(const std::string &path)
{
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

/* LD_PRELOAD and UCX_PLUGIN_PATH act when a process starts (the dynamic
 * linker, libucs's constructor): this process starts again with them, and
 * every process it starts inherits them. */
static void apply_module_load(char **argv)
{
    const std::string mode = pxn_test::module_load();
    if ((mode != "name") && (mode != "dir") && (mode != "plugin-path") &&
        (mode != "preload")) {
        fprintf(stderr, "uct_gtest: PXN_MODULE_LOAD=%s: expected name, dir, "
                        "plugin-path or preload\n", mode.c_str());
        exit(1);
    }
    const char *applied = getenv("PXN_MODULE_LOAD_APPLIED");
    if ((applied != nullptr) && (mode == applied)) {
        return;
    }
    const std::string in_ucx = pxn_test::ucx_prefix() + "/lib/ucx/libuct_pxn.so.0";
    if ((mode == "plugin-path") && (access(in_ucx.c_str(), F_OK) == 0)) {
        /* Found there, the module would not come from the plugin path. */
        fprintf(stderr, "uct_gtest: PXN_MODULE_LOAD=plugin-path, but %s "
                        "exists: UCX would load that one (remove it)\n",
                in_ucx.c_str());
        exit(1);
    }
    const auto env = pxn_test::module_load_env();
    if (env.empty()) {
        return;
    }
    for (const auto &e : env) {
        setenv(e.first.c_str(), e.second.c_str(), 1);
    }
    setenv("PXN_MODULE_LOAD", mode.c_str(), 1);
    setenv("PXN_MODULE_LOAD_APPLIED", mode.c_str(), 1);
    execv("/proc/self/exe", argv);
    fprintf(stderr, "uct_gtest: exec /proc/self/exe: %s\n", strerror(errno));
    exit(1);
}

int main(int argc, char **argv)
{
    /* $PXN_MODULE_INSTALLED: a copy of the build run elsewhere (the GPU
     * machine), or a plugin directory. */
    const std::string built = pxn_tools::build_dir() + "/.libs/libuct_pxn.so.0.0.0";
    const std::string installed = pxn_test::module_file();
    const std::string a = read_file(built), b = read_file(installed);
    if (a.empty() || (a != b)) {
        fprintf(stderr,
                "uct_gtest: %s is missing or differs from %s: "
                "run 'make install' first (contrib/test.sh does)\n",
                installed.c_str(), built.c_str());
        return 1;
    }
    apply_module_load(argv);
    /* pxn is opt-in (UCX_PXN_ENABLE=auto: only where UCX_TLS names it):
     * the UCT-level tests and their processes ask for it; tests of the
     * opt-in itself set their own value. */
    setenv("UCX_PXN_ENABLE", "y", 0);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
