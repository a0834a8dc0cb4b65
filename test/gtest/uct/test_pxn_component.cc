/*
 * The pxn component as any UCX user sees it, through UCT's public API only:
 * discovery, md open/query, configuration defaults and rejection of invalid
 * configuration, loading: into a stock UCX of the same version with LD_PRELOAD
 * or UCX_PLUGIN_PATH, and by the suite's own UCX without either.
 */
#include "../common/test_helpers.h"

#include <apps/locate.h>

#include <uct/api/uct.h>
#ifdef PXN_UCX_RKEY_COMPARE
#include <uct/api/v2/uct_v2.h>
#endif

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <string>
#include <vector>
#include <unistd.h>

using pxn_test::LogCapture;
using pxn_test::ScopedEnv;

namespace {

class PxnComponent : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_EQ(UCS_OK, uct_query_components(&components_, &count_));
        for (unsigned i = 0; i < count_; ++i) {
            uct_component_attr_t attr = {};
            attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
            ASSERT_EQ(UCS_OK, uct_component_query(components_[i], &attr));
            if (std::string(attr.name) == "pxn") {
                pxn_ = components_[i];
            }
        }
        ASSERT_NE(nullptr, pxn_) << "UCX did not load the pxn module";
    }

    void TearDown() override { uct_release_component_list(components_); }

    /* Reads the md configuration from the environment and opens the md. */
    ucs_status_t open_md(uct_md_h *md)
    {
        uct_md_config_t *config;
        ucs_status_t status = uct_md_config_read(pxn_, NULL, NULL, &config);
        if (status != UCS_OK) {
            return status;
        }
        status = uct_md_open(pxn_, "pxn_tcp", config, md);
        uct_config_release(config);
        return status;
    }

    std::string config_value(const char *name)
    {
        uct_md_config_t *config;
        EXPECT_EQ(UCS_OK, uct_md_config_read(pxn_, NULL, NULL, &config));
        char value[256] = {};
        EXPECT_EQ(UCS_OK, uct_config_get(config, name, value, sizeof(value)))
                << name;
        uct_config_release(config);
        return value;
    }

    /* Expects md open to fail with a logged message naming the variable:
     * its full name for values pxn rejects, the table field name (e.g.
     * "SLOTS") for values UCX's own parser rejects. */
    void expect_rejected(const char *var, const char *value,
                         const char *named = nullptr)
    {
        if (named == nullptr) {
            named = var;
        }
        ScopedEnv env(var, value);
        LogCapture log;
        uct_md_h md;
        ucs_status_t status = open_md(&md);
        EXPECT_NE(UCS_OK, status) << var << "=" << value << " was accepted";
        if (status == UCS_OK) {
            uct_md_close(md);
        }
        EXPECT_TRUE(log.contains(named) && log.contains(value))
                << "log does not name " << named << " and '" << value
                << "':\n" << log.joined();
    }

    uct_component_h *components_ = nullptr;
    unsigned         count_      = 0;
    uct_component_h  pxn_        = nullptr;
};

TEST_F(PxnComponent, ListsOneMdPerInnerMdOfTheInnerTransports)
{
    ScopedEnv tls("UCX_PXN_NET_TLS", "tcp,cma");
    uct_component_attr_t attr = {};
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    ASSERT_EQ(UCS_OK, uct_component_query(pxn_, &attr));
    ASSERT_EQ(2u, attr.md_resource_count);

    std::vector<uct_md_resource_desc_t> resources(attr.md_resource_count);
    attr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    attr.md_resources = resources.data();
    ASSERT_EQ(UCS_OK, uct_component_query(pxn_, &attr));
    std::set<std::string> names;
    for (const auto &r : resources) {
        names.insert(r.md_name);
    }
    EXPECT_EQ((std::set<std::string>{"pxn_tcp", "pxn_cma"}), names);
}

TEST_F(PxnComponent, ListsNoMdWhenNoInnerTransportExists)
{
    ScopedEnv tls("UCX_PXN_NET_TLS", "no_such_tl");
    uct_component_attr_t attr = {};
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    ASSERT_EQ(UCS_OK, uct_component_query(pxn_, &attr));
    EXPECT_EQ(0u, attr.md_resource_count);
}

TEST_F(PxnComponent, OpensAndQueriesMdWithDefaults)
{
    uct_md_h md;
    ASSERT_EQ(UCS_OK, open_md(&md));
    uct_md_attr_t attr;
    EXPECT_EQ(UCS_OK, uct_md_query(md, &attr));
    EXPECT_STREQ("pxn", attr.component_name);
    EXPECT_TRUE(attr.cap.flags & UCT_MD_FLAG_REG);
    uct_md_close(md);
}

/* UCX 1.16 on compares remote keys (ucp_rkey_compare): pxn keys are equal
 * when their packed inner keys are, and ordered consistently otherwise. */
TEST_F(PxnComponent, ComparesRemoteKeysByTheirPackedInnerKeys)
{
#ifndef PXN_UCX_RKEY_COMPARE
    GTEST_SKIP() << "this UCX compares no remote keys (UCX 1.16 on)";
#else
    /* pxn's packed key: u16 length | the inner md's packed key */
    const std::vector<std::vector<uint8_t>> packed = {
            {2, 0, 'a', 'b'}, {2, 0, 'a', 'b'}, {2, 0, 'a', 'c'}, {1, 0, 'a'}, {0, 0}};
    std::vector<uct_rkey_bundle_t> keys(packed.size());
    for (size_t i = 0; i < packed.size(); ++i) {
        ASSERT_EQ(UCS_OK, uct_rkey_unpack(pxn_, packed[i].data(), &keys[i]));
    }
    uct_rkey_compare_params_t params = {};
    auto compare = [&](size_t a, size_t b) {
        int result = 42;
        EXPECT_EQ(UCS_OK, uct_rkey_compare(pxn_, keys[a].rkey, keys[b].rkey,
                                           &params, &result));
        return (result > 0) - (result < 0);
    };
    EXPECT_EQ(0, compare(0, 1));
    EXPECT_EQ(0, compare(4, 4));
    for (size_t a = 0; a < keys.size(); ++a) {
        for (size_t b = 0; b < keys.size(); ++b) {
            EXPECT_EQ(-compare(b, a), compare(a, b)) << a << " " << b;
            if (packed[a] != packed[b]) {
                EXPECT_NE(0, compare(a, b)) << a << " " << b;
            }
        }
    }
    EXPECT_LT(compare(0, 2), 0);
    params.field_mask = 1;
    int result;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_rkey_compare(pxn_, keys[0].rkey, keys[1].rkey, &params, &result));
    for (auto &key : keys) {
        EXPECT_EQ(UCS_OK, uct_rkey_release(pxn_, &key));
    }
#endif
}

/* pxn registers memory with its inner md; where that md registers nothing
 * (tcp from UCX 1.14 on: it reaches memory without a key), pxn still
 * offers registration and a remote key, with an empty inner key inside,
 * for the memory the inner transport reaches. */
TEST_F(PxnComponent, RegistersAndPacksKeysWhateverTheInnerMdRegisters)
{
    uct_md_h md;
    ASSERT_EQ(UCS_OK, open_md(&md));
    uct_md_attr_t attr;
    ASSERT_EQ(UCS_OK, uct_md_query(md, &attr));
    EXPECT_TRUE(attr.cap.flags & UCT_MD_FLAG_REG);
    EXPECT_TRUE(attr.cap.flags & UCT_MD_FLAG_NEED_RKEY);
    EXPECT_TRUE(attr.cap.reg_mem_types & UCS_BIT(UCS_MEMORY_TYPE_HOST));
    ASSERT_GE(attr.rkey_packed_size, 2u);

    std::vector<uint8_t> buffer(65536);
    uct_mem_h memh;
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(md, buffer.data(), buffer.size(),
                                     UCT_MD_MEM_ACCESS_ALL, &memh));
    std::vector<uint8_t> packed(attr.rkey_packed_size);
    EXPECT_EQ(UCS_OK, uct_md_mkey_pack(md, memh, packed.data()));
    const size_t inner = packed[0] | (size_t(packed[1]) << 8);
    EXPECT_LE(inner + 2, attr.rkey_packed_size);
    uct_rkey_bundle_t key;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(pxn_, packed.data(), &key));
    EXPECT_EQ(UCS_OK, uct_rkey_release(pxn_, &key));
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(md, memh));
    uct_md_close(md);
}

TEST_F(PxnComponent, ReadsDocumentedDefaults)
{
    EXPECT_EQ("default", config_value("GROUP"));
    EXPECT_EQ("", config_value("NODE_ID"));
    EXPECT_EQ("", config_value("RAIL_MAP"));
    EXPECT_EQ("rc_mlx5,rc_verbs,dc_mlx5,tcp", config_value("NET_TLS"));
    EXPECT_EQ("7", config_value("LANES"));
    EXPECT_EQ("4", config_value("SLOTS"));
    EXPECT_EQ("8M", config_value("SLOT_SIZE"));
    EXPECT_EQ("4096", config_value("MAX_PLAN"));
    EXPECT_EQ("1", config_value("WARM_LANES"));
    EXPECT_EQ("4", config_value("INFLIGHT_DEPTH"));
    EXPECT_EQ("64", config_value("PIECE_OPS"));
    EXPECT_EQ("auto", config_value("PIECE_BYTES"));
    /* UCX prints times in microseconds. */
    EXPECT_EQ("1000000.00us", config_value("CREDIT_TIMEOUT"));
    EXPECT_EQ("3000000.00us", config_value("HEARTBEAT_TIMEOUT"));
    EXPECT_EQ("10000000.00us", config_value("LANE_LINGER"));
}

TEST_F(PxnComponent, ReadsValuesFromEnvironment)
{
    ScopedEnv slots("UCX_PXN_SLOTS", "5");
    ScopedEnv map("UCX_PXN_RAIL_MAP", "mlx5_0:rail0,mlx5_1:rail1");
    EXPECT_EQ("5", config_value("SLOTS"));
    EXPECT_EQ("mlx5_0:rail0,mlx5_1:rail1", config_value("RAIL_MAP"));

    uct_md_h md;
    ASSERT_EQ(UCS_OK, open_md(&md));
    uct_md_close(md);
}

TEST_F(PxnComponent, RejectsZeroSlots)
{
    expect_rejected("UCX_PXN_SLOTS", "0");
}

TEST_F(PxnComponent, RejectsNonNumericSlots)
{
    expect_rejected("UCX_PXN_SLOTS", "many", "Invalid value for SLOTS");
}

TEST_F(PxnComponent, RejectsMalformedRailMap)
{
    expect_rejected("UCX_PXN_RAIL_MAP", "mlx5_0");
    expect_rejected("UCX_PXN_RAIL_MAP", "mlx5_0:rail0,mlx5_0:rail1");
    expect_rejected("UCX_PXN_RAIL_MAP", "mlx5_0:rail0,");
}

TEST_F(PxnComponent, RejectsBadGroupNames)
{
    expect_rejected("UCX_PXN_GROUP", "..");
    expect_rejected("UCX_PXN_GROUP", ".");
    expect_rejected("UCX_PXN_GROUP", "a/b");
    expect_rejected("UCX_PXN_GROUP", std::string(65, 'g').c_str());
}

TEST_F(PxnComponent, AcceptsLongestGroupName)
{
    ScopedEnv group("UCX_PXN_GROUP", std::string(64, 'g').c_str());
    uct_md_h md;
    ASSERT_EQ(UCS_OK, open_md(&md));
    uct_md_close(md);
}

/* auto, 0 and a size within 4K..1G are taken; inf means 0 (a size above
 * 1G is refused: RejectsOutOfRangeGeometry). */
TEST_F(PxnComponent, AcceptsPieceBytesAutoZeroInfOrASize)
{
    for (const char *value : {"auto", "0", "inf", "4K", "256K", "1G"}) {
        ScopedEnv bytes("UCX_PXN_PIECE_BYTES", value);
        uct_md_h md;
        ASSERT_EQ(UCS_OK, open_md(&md)) << value;
        uct_md_close(md);
    }
}

TEST_F(PxnComponent, RejectsOutOfRangeGeometry)
{
    expect_rejected("UCX_PXN_LANES", "0");
    expect_rejected("UCX_PXN_LANES", "65");
    expect_rejected("UCX_PXN_SLOT_SIZE", "100");
    expect_rejected("UCX_PXN_SLOT_SIZE", "4097");
    expect_rejected("UCX_PXN_MAX_PLAN", "0");
    expect_rejected("UCX_PXN_INFLIGHT_DEPTH", "0");
    expect_rejected("UCX_PXN_PIECE_OPS", "65537");
    expect_rejected("UCX_PXN_PIECE_BYTES", "100");
    expect_rejected("UCX_PXN_PIECE_BYTES", "2147483648");
}

TEST_F(PxnComponent, RejectsEmptyInnerTransportList)
{
    expect_rejected("UCX_PXN_NET_TLS", "");
}

TEST_F(PxnComponent, UcxInfoShowsComponentAndEveryVariable)
{
    const std::string info = pxn_test::ucx_prefix() + "/bin/ucx_info";
    auto devices = pxn_test::run_program({info, "-d"});
    ASSERT_EQ(0, devices.exit_code) << devices.output;
    EXPECT_NE(std::string::npos, devices.output.find("Component: pxn"));
    EXPECT_NE(std::string::npos, devices.output.find("Transport: pxn"));

    auto config = pxn_test::run_program({info, "-cf"});
    ASSERT_EQ(0, config.exit_code);
    for (const char *var : {"GROUP", "NODE_ID", "RAIL_MAP", "NET_TLS",
                            "HOME_DEVICE", "NET_CONNECT", "FALLBACK", "ARENA", "COPY",
                            "CUDA_DEVICE", "GPU_DOORBELL", "LANES", "SLOTS", "SLOT_SIZE",
                            "MAX_PLAN", "INFLIGHT_DEPTH", "PIECE_OPS", "PIECE_BYTES", "CREDIT_TIMEOUT",
                            "HEARTBEAT_TIMEOUT", "RELAY_SLICE",
                            "RELAY_SLICE_MERGE", "GATHER_CTAS", "INITIAL_SEQ"}) {
        EXPECT_NE(std::string::npos,
                  config.output.find(std::string("UCX_PXN_") + var + "="))
                << var;
    }
}

TEST_F(PxnComponent, EveryVariableIsDocumentedInConfigurationMd)
{
    auto config = pxn_test::run_program({pxn_test::ucx_prefix() + "/bin/ucx_info",
                                         "-cf"});
    ASSERT_EQ(0, config.exit_code);
    std::ifstream file(pxn_test::source_dir() + "/docs/configuration.md");
    const std::string docs((std::istreambuf_iterator<char>(file)),
                           std::istreambuf_iterator<char>());
    ASSERT_FALSE(docs.empty());
    const std::regex variable("UCX_PXN_[A-Z_]+(?==)");
    size_t count = 0;
    for (std::sregex_iterator it(config.output.begin(), config.output.end(),
                                 variable), end; it != end; ++it, ++count) {
        EXPECT_NE(std::string::npos, docs.find("`" + it->str() + "`"))
                << it->str() << " is not in docs/configuration.md";
    }
    EXPECT_GE(count, 20u);
}

/* The UCX's module directory holds pxn, or pxn is compiled into its
 * module list: then nothing the tests below do can keep it out. */
bool ucx_has_pxn_without_loading_it(const std::string &libdir)
{
    return access((libdir + "/ucx/libuct_pxn.so.0").c_str(), F_OK) == 0;
}

/* Whether that UCX scans for plugins (UCX_PLUGIN_PATH, module directory):
 * configure's probe of this UCX's headers. */
bool ucx_scans_plugins()
{
    return pxn_tools::make_var("PXN_UCX_COMPAT_CPPFLAGS").find(
                   "-DPXN_UCX_PLUGIN_PATH=1") != std::string::npos;
}

/* stock_ucx_probe against the stock UCX of this version (--with-stock-ucx),
 * with `env` and neither LD_PRELOAD nor UCX_PLUGIN_PATH of the suite. */
pxn_test::ChildResult probe_stock(const std::vector<std::string> &env)
{
    std::vector<std::string> all = {"LD_LIBRARY_PATH=" +
                                            pxn_tools::make_var("STOCK_UCX_LIBDIR"),
                                    "LD_PRELOAD=", "UCX_PLUGIN_PATH="};
    all.insert(all.end(), env.begin(), env.end());
    return pxn_test::run_program({pxn_test::app("stock_ucx_probe")}, all);
}

class PxnStockUcx : public ::testing::Test {
protected:
    void SetUp() override
    {
        const std::string stock = pxn_tools::make_var("STOCK_UCX_LIBDIR");
        if (stock.empty()) {
            GTEST_SKIP() << "no stock UCX of this version configured (--with-stock-ucx)";
        }
        if (ucx_has_pxn_without_loading_it(stock)) {
            GTEST_SKIP() << stock << "/ucx holds libuct_pxn.so.0: not a stock UCX";
        }
        auto plain = probe_stock({});
        ASSERT_EQ(0, plain.exit_code) << plain.output;
        ASSERT_NE(std::string::npos, plain.output.find("components:"));
        ASSERT_EQ(std::string::npos, plain.output.find(" pxn")) << plain.output;
    }

    const std::string module_ = pxn_test::build_dir() + "/.libs/libuct_pxn.so.0";
};

TEST_F(PxnStockUcx, LoadsIntoStockUcxWithLdPreload)
{
    auto preloaded = probe_stock({"LD_PRELOAD=" + module_});
    ASSERT_EQ(0, preloaded.exit_code) << preloaded.output;
    EXPECT_NE(std::string::npos, preloaded.output.find(" pxn (md opened)"))
            << preloaded.output;
}

/* UCX 1.22 on: a directory in UCX_PLUGIN_PATH is enough. Before, UCX
 * ignores the variable and only LD_PRELOAD works: tested as well, so that
 * the documentation's "LD_PRELOAD on 1.18-1.21" stays true. */
TEST_F(PxnStockUcx, LoadsFromPluginPathOnlyWhereUcxScansForPlugins)
{
    pxn_test::TempDir dir("/tmp/pxn-plugins-");
    ASSERT_FALSE(dir.path().empty());
    /* The module and, beside it, the transport it opens (pxn_module.cc). */
    for (const char *file : {"libuct_pxn.so.0", "libpxn_transport.so.0"}) {
        const std::string from = pxn_test::build_dir() + "/.libs/" + file;
        const std::string copy = dir.path() + "/" + file;
        std::ifstream in(from, std::ios::binary);
        std::ofstream out(copy, std::ios::binary);
        out << in.rdbuf();
        ASSERT_TRUE(in.good() && out.good()) << from << " -> " << copy;
    }
    auto found = probe_stock({"UCX_PLUGIN_PATH=" + dir.path()});
    ASSERT_EQ(0, found.exit_code) << found.output;
    if (ucx_scans_plugins()) {
        EXPECT_NE(std::string::npos, found.output.find(" pxn (md opened)"))
                << found.output;
    } else {
        EXPECT_EQ(std::string::npos, found.output.find(" pxn")) << found.output;
    }
}

/* ucx_info of the suite's own UCX, with the module installed as `make
 * install` does and nothing in the environment that loads it: pxn is there
 * exactly where the UCX loads modules by name or scans its module
 * directory (configure's PXN_MODULE_LOAD name or dir), else not. */
TEST(PxnModuleLoading, UcxInfoListsTheInstalledModuleWithoutPreloadOnlyWhereUcxLoadsIt)
{
    const std::string moduledir = pxn_test::ucx_prefix() + "/lib/ucx";
    const std::string configured = pxn_tools::make_var("PXN_MODULE_LOAD");
    if (access((moduledir + "/libuct_pxn.so.0").c_str(), F_OK) != 0) {
        GTEST_SKIP() << "the module is not installed in " << moduledir;
    }
    pxn_test::TempDir registry("/tmp/pxn-info-");
    auto info = pxn_test::run_program({pxn_test::ucx_prefix() + "/bin/ucx_info", "-d"},
                                      {"LD_PRELOAD=", "UCX_PLUGIN_PATH=",
                                       "UCX_PXN_REGISTRY_DIR=" + registry.path()});
    ASSERT_EQ(0, info.exit_code) << info.output;
    const bool listed = info.output.find("Transport: pxn") != std::string::npos;
    if ((configured == "name") || (configured == "dir")) {
        EXPECT_TRUE(listed) << info.output;
    } else {
        EXPECT_EQ("preload", configured);
        EXPECT_FALSE(listed) << info.output;
    }
}

} // namespace
