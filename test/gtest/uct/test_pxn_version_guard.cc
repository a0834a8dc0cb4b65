/*
 * The module's version guard (src/uct/pxn/pxn_version_guard.h): loaded into
 * a UCX other than the one it was built for, the module logs one error
 * naming both versions and what differs, registers nothing, and UCP carries
 * on without it; loaded into its own UCX it says nothing.
 *
 * A machine with one UCX (CI: 1.13.1) has no module of another UCX, so the
 * suite links the module's own objects with a deliberately different
 * identity (.libs/libuct_pxn_skew_*.so.0, pxn_ucx_identity.cc; they open
 * the build's libpxn_transport beside them when they pass):
 * another minor version, one more exported name (another snapshot), a
 * flipped ENABLE_DEBUG_DATA. They are preloaded into the stock UCX of this
 * version (--with-stock-ucx: no pxn of its own, so nothing else registers
 * pxn). PXN_TEST_FOREIGN_UCX=<prefix of a UCX of another version> adds the
 * real module preloaded into that UCX (docs/versions.md).
 */
#include "../common/test_helpers.h"

#include <apps/locate.h>
#include <uct/pxn/pxn_version_guard.h>

#include <uct/api/uct.h>
#include <ucs/config/parser.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>
#include <unistd.h>

using pxn::uct::kUcxBuiltFor;
using pxn::uct::UcxBuildIdentity;

namespace {

const std::string kRefused = "pxn: not registered";

std::string mismatch(const UcxBuildIdentity &identity)
{
    return pxn::uct::ucx_mismatch(identity,
                                  reinterpret_cast<const void*>(&uct_query_components),
                                  reinterpret_cast<const void*>(&ucs_config_parser_get_value));
}

std::string version_of(const UcxBuildIdentity &identity)
{
    return std::to_string(identity.major) + "." + std::to_string(identity.minor) +
           "." + std::to_string(identity.patch);
}

size_t count_lines_with(const std::string &text, const std::string &what)
{
    std::istringstream in(text);
    size_t count = 0;
    for (std::string line; std::getline(in, line);) {
        count += (line.find(what) != std::string::npos);
    }
    return count;
}

std::string line_with(const std::string &text, const std::string &what)
{
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.find(what) != std::string::npos) {
            return line;
        }
    }
    return "";
}

/* The identity's exports with `extra` added ("name\0" list). */
struct EditedExports {
    explicit EditedExports(const std::string &extra, const std::string &drop = "")
    {
        for (size_t i = 0; i < kUcxBuiltFor.exports_size;) {
            const std::string name(kUcxBuiltFor.exports + i);
            if (!name.empty() && (name != drop)) {
                list.append(name).push_back('\0');
            }
            i += name.size() + 1;
        }
        if (!extra.empty()) {
            list.append(extra).push_back('\0');
        }
        identity              = kUcxBuiltFor;
        identity.exports      = list.data();
        identity.exports_size = list.size();
    }
    std::string      list;
    UcxBuildIdentity identity;
};

TEST(PxnVersionGuard, FindsNothingToSayAboutTheUcxItWasBuiltFor)
{
    EXPECT_EQ("", mismatch(kUcxBuiltFor));
    EXPECT_GT(kUcxBuiltFor.exports_size, 1000u) << "configure recorded too few exports";
}

TEST(PxnVersionGuard, NamesTheExportsOfAnotherSnapshotBothWays)
{
    EditedExports edited("uct_only_in_the_build", "uct_query_components");
    const std::string line = mismatch(edited.identity);
    EXPECT_EQ(0u, line.find(kRefused)) << line;
    EXPECT_NE(std::string::npos, line.find("export 1 (uct_query_components) names the build's did not"))
            << line;
    EXPECT_NE(std::string::npos, line.find("lack 1 (uct_only_in_the_build)")) << line;
    EXPECT_NE(std::string::npos, line.find("built for UCX " + version_of(kUcxBuiltFor)))
            << line;
    EXPECT_EQ(std::string::npos, line.find('\n')) << "one line: " << line;
}

TEST(PxnVersionGuard, NamesEachBuildOptionThatDiffersFromLibucs)
{
    UcxBuildIdentity stats = kUcxBuiltFor;
    stats.enable_stats     = !stats.enable_stats;
    const std::string stats_line = mismatch(stats);
    EXPECT_NE(std::string::npos, stats_line.find("ENABLE_STATS")) << stats_line;
    EXPECT_EQ(std::string::npos, stats_line.find("ENABLE_DEBUG_DATA")) << stats_line;

    UcxBuildIdentity debug  = kUcxBuiltFor;
    debug.enable_debug_data = !debug.enable_debug_data;
    const std::string debug_line = mismatch(debug);
    EXPECT_NE(std::string::npos, debug_line.find("ENABLE_DEBUG_DATA")) << debug_line;
    EXPECT_EQ(std::string::npos, debug_line.find("ENABLE_STATS")) << debug_line;
}

/* uct_gtest links no libucp: the version of this process's UCX is unknown
 * to the guard, and a module differing from it in version alone (the
 * same exports) is admitted. The processes below that load libucp tell. */
TEST(PxnVersionGuard, VersionAloneIsUnknownInAProcessWithoutLibucp)
{
    UcxBuildIdentity next = kUcxBuiltFor;
    ++next.minor;
    EXPECT_EQ("", mismatch(next));
}

/* --- The module loaded into a UCX not built for ----------------------------- */

class PxnVersionGuardStock : public ::testing::Test {
protected:
    void SetUp() override
    {
        stock_ = pxn_tools::make_var("STOCK_UCX_LIBDIR");
        if (stock_.empty()) {
            GTEST_SKIP() << "no stock UCX of this version configured (--with-stock-ucx)";
        }
        if (access((stock_ + "/ucx/" + pxn_tools::make_var("PXN_MODULE_FILE")).c_str(),
                   F_OK) == 0) {
            GTEST_SKIP() << stock_ << "/ucx holds pxn: not a stock UCX";
        }
        registry_ = std::make_unique<pxn_test::TempDir>("/tmp/pxn-guard-");
    }

    std::string skew(const char *what) const
    {
        return pxn_test::build_dir() + "/.libs/libuct_pxn_skew_" + what + ".so.0";
    }

    /* `argv` run on the stock UCX with `preload` and nothing else that loads pxn. */
    pxn_test::ChildResult run(std::vector<std::string> argv, const std::string &preload)
    {
        return pxn_test::run_program(argv, {"LD_LIBRARY_PATH=" + stock_,
                                            "LD_PRELOAD=" + preload, "UCX_PLUGIN_PATH=",
                                            "UCX_PXN_REGISTRY_DIR=" + registry_->path()});
    }

    /* The stock's programs are in ../bin of its libraries, that path
     * taken as written (lib may be a link). */
    pxn_test::ChildResult ucx_info(const std::string &preload)
    {
        return run({stock_.substr(0, stock_.rfind('/')) + "/bin/ucx_info", "-d"},
                   preload);
    }

    std::string                        stock_;
    std::unique_ptr<pxn_test::TempDir> registry_;
};

TEST_F(PxnVersionGuardStock, ModuleOfAnotherVersionLogsOneErrorAndUcxInfoListsNoPxn)
{
    auto info = ucx_info(skew("version"));
    ASSERT_EQ(0, info.exit_code) << info.output;
    EXPECT_EQ(1u, count_lines_with(info.output, kRefused)) << info.output;
    UcxBuildIdentity claimed = kUcxBuiltFor;
    ++claimed.minor;
    EXPECT_NE(std::string::npos,
              info.output.find("built for UCX " + version_of(claimed) +
                               " and this process runs UCX " + version_of(kUcxBuiltFor)))
            << info.output;
    EXPECT_NE(std::string::npos, info.output.find("the versions differ")) << info.output;
    EXPECT_EQ(std::string::npos, info.output.find("Transport: pxn")) << info.output;
    EXPECT_EQ(std::string::npos, info.output.find("Component: pxn")) << info.output;
    EXPECT_NE(std::string::npos, info.output.find("Transport: ")) << info.output;
}

TEST_F(PxnVersionGuardStock, UcpCarriesOnWithItsOtherTransportsAfterTheRefusal)
{
    auto idle = run({pxn_test::app("ucp_idle")}, skew("version"));
    ASSERT_EQ(0, idle.exit_code) << idle.output;
    EXPECT_NE(std::string::npos, idle.output.find("worker ok")) << idle.output;
    EXPECT_EQ(1u, count_lines_with(idle.output, kRefused)) << idle.output;
    EXPECT_EQ(0u, count_lines_with(idle.output, "ucx-pxn")) << idle.output;
}

/* Another snapshot of the same version: only the exports tell, and they
 * are read without libucp, so a UCT-only program refuses it too. */
TEST_F(PxnVersionGuardStock, ModuleOfAnotherSnapshotIsRefusedWhereOnlyUctIsLoaded)
{
    auto probe = run({pxn_test::app("stock_ucx_probe")}, skew("api"));
    ASSERT_EQ(0, probe.exit_code) << probe.output;
    EXPECT_NE(std::string::npos, probe.output.find("components:")) << probe.output;
    EXPECT_EQ(std::string::npos, line_with(probe.output, "components:").find(" pxn"))
            << probe.output;
    EXPECT_EQ(1u, count_lines_with(probe.output, kRefused)) << probe.output;
    EXPECT_NE(std::string::npos,
              probe.output.find("lack 1 (uct_pxn_skew_only_in_another_snapshot)"))
            << probe.output;
    EXPECT_NE(std::string::npos, probe.output.find("UCX of unknown version")) << probe.output;
}

TEST_F(PxnVersionGuardStock, ModuleBuiltWithOtherOptionsNamesTheOption)
{
    auto info = ucx_info(skew("options"));
    ASSERT_EQ(0, info.exit_code) << info.output;
    EXPECT_EQ(1u, count_lines_with(info.output, kRefused)) << info.output;
    EXPECT_NE(std::string::npos, info.output.find("ENABLE_DEBUG_DATA")) << info.output;
    EXPECT_EQ(std::string::npos, info.output.find("Transport: pxn")) << info.output;
}

/* The limit, pinned: a UCT-only process has no libucp to tell the version,
 * and a module differing in version alone (same exports) registers. */
TEST_F(PxnVersionGuardStock, VersionAloneGoesUnseenWhereOnlyUctIsLoaded)
{
    auto probe = run({pxn_test::app("stock_ucx_probe")}, skew("version"));
    ASSERT_EQ(0, probe.exit_code) << probe.output;
    EXPECT_EQ(0u, count_lines_with(probe.output, kRefused)) << probe.output;
    EXPECT_NE(std::string::npos, line_with(probe.output, "components:").find(" pxn"))
            << probe.output;
}

TEST_F(PxnVersionGuardStock, RealModuleLoadsIntoTheStockUcxOfItsVersionSilently)
{
    auto info = ucx_info(pxn_test::build_dir() + "/.libs/" +
                         pxn_tools::make_var("PXN_MODULE_FILE"));
    ASSERT_EQ(0, info.exit_code) << info.output;
    EXPECT_EQ(0u, count_lines_with(info.output, kRefused)) << info.output;
    EXPECT_NE(std::string::npos, info.output.find("Component: pxn")) << info.output;
}

/* PXN_TEST_FOREIGN_UCX: the real module, preloaded into a UCX of another
 * version (e.g. 1.22.0 for a 1.13.1 build and the reverse). */
TEST(PxnVersionGuardForeign, RealModuleIsRefusedByAUcxOfAnotherVersion)
{
    const char *foreign = getenv("PXN_TEST_FOREIGN_UCX");
    if ((foreign == nullptr) || (foreign[0] == '\0')) {
        GTEST_SKIP() << "PXN_TEST_FOREIGN_UCX (a UCX install of another version) not set";
    }
    pxn_test::TempDir registry("/tmp/pxn-guard-");
    const std::string module = pxn_test::build_dir() + "/.libs/" +
                               pxn_tools::make_var("PXN_MODULE_FILE");
    auto info = pxn_test::run_program({std::string(foreign) + "/bin/ucx_info", "-d"},
                                      {"LD_LIBRARY_PATH=" + std::string(foreign) + "/lib",
                                       "LD_PRELOAD=" + module, "UCX_PLUGIN_PATH=",
                                       "UCX_PXN_REGISTRY_DIR=" + registry.path()});
    ASSERT_EQ(0, info.exit_code) << info.output;
    EXPECT_EQ(1u, count_lines_with(info.output, kRefused)) << info.output;
    EXPECT_NE(std::string::npos, info.output.find("built for UCX " + version_of(kUcxBuiltFor)))
            << info.output;
    EXPECT_EQ(std::string::npos, info.output.find("Component: pxn")) << info.output;
    EXPECT_NE(std::string::npos, info.output.find("Transport: ")) << info.output;
}

} // namespace
