/*
 * gtest entry point. The pxn module is loaded by UCX from its module
 * directory, not from the build tree: refuse to run against a stale install.
 */
#include <apps/locate.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

static std::string read_file(const std::string &path)
{
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

int main(int argc, char **argv)
{
    /* $PXN_MODULE_INSTALLED: a copy of the build run elsewhere (the GPU
     * machine). */
    const char *module_env = getenv("PXN_MODULE_INSTALLED");
    const std::string built = pxn_tools::build_dir() + "/.libs/libuct_pxn.so.0.0.0";
    const std::string installed = module_env ? module_env :
                                  pxn_tools::make_var("UCX_MODULEDIR") +
                                  "/libuct_pxn.so.0";
    const std::string a = read_file(built), b = read_file(installed);
    if (a.empty() || (a != b)) {
        fprintf(stderr,
                "uct_gtest: %s is missing or differs from %s: "
                "run 'make install' first (contrib/test.sh does)\n",
                installed.c_str(), built.c_str());
        return 1;
    }
    /* pxn is opt-in (UCX_PXN_ENABLE=auto: only where UCX_TLS names it):
     * the UCT-level tests and their processes ask for it; tests of the
     * opt-in itself set their own value. */
    setenv("UCX_PXN_ENABLE", "y", 0);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
