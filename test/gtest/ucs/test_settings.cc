#include <ucs/pxn/rail_map.h>
#include <ucs/pxn/seq.h>
#include <ucs/pxn/settings.h>

#include <gtest/gtest.h>

#include <cstdlib>

namespace {

pxn::Settings valid_settings()
{
    pxn::Settings s;
    s.group   = "job";
    s.net_tls = {"tcp"};
    return s;
}

std::string rejection(const pxn::Settings &s)
{
    std::string error;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::validate(s, &error));
    return error;
}

TEST(Settings, DefaultGeometryStagesAtMost224MiBWithEveryLaneClaimed)
{
    EXPECT_EQ(224ull << 20, pxn::Geometry().arena_size());
}

TEST(Settings, AcceptsDefaults)
{
    std::string error;
    EXPECT_EQ(UCS_OK, pxn::validate(valid_settings(), &error)) << error;
}

TEST(Settings, NamesTheVariableOfEachBadField)
{
    pxn::Settings s = valid_settings();
    s.geometry.slots = 0;
    EXPECT_EQ(0u, rejection(s).find("UCX_PXN_SLOTS=0"));

    s = valid_settings();
    s.geometry.lanes = 65;
    EXPECT_EQ(0u, rejection(s).find("UCX_PXN_LANES=65"));

    s = valid_settings();
    s.geometry.slot_size = 4096 + 32;
    EXPECT_EQ(0u, rejection(s).find("UCX_PXN_SLOT_SIZE"));

    s = valid_settings();
    s.geometry.max_plan = 0;
    EXPECT_EQ(0u, rejection(s).find("UCX_PXN_MAX_PLAN"));

    s = valid_settings();
    s.inflight_depth = 65;
    EXPECT_EQ(0u, rejection(s).find("UCX_PXN_INFLIGHT_DEPTH"));

    s = valid_settings();
    s.piece_ops = 65537;
    EXPECT_EQ(0u, rejection(s).find("UCX_PXN_PIECE_OPS=65537"));

    s = valid_settings();
    s.gather_ctas = 0;
    EXPECT_EQ(0u, rejection(s).find("UCX_PXN_GATHER_CTAS=0"));

    s = valid_settings();
    s.initial_seq = pxn::kDefaultSeqLimit;
    EXPECT_EQ(0u, rejection(s).find("UCX_PXN_INITIAL_SEQ"));

    s = valid_settings();
    s.credit_timeout = 0;
    EXPECT_EQ(0u, rejection(s).find("UCX_PXN_CREDIT_TIMEOUT"));

    s = valid_settings();
    s.heartbeat_timeout = -1;
    EXPECT_EQ(0u, rejection(s).find("UCX_PXN_HEARTBEAT_TIMEOUT"));

    s = valid_settings();
    s.warm_lanes = 65;
    EXPECT_EQ(0u, rejection(s).find("UCX_PXN_WARM_LANES=65"));

    s = valid_settings();
    s.lane_linger = -1;
    EXPECT_EQ(0u, rejection(s).find("UCX_PXN_LANE_LINGER"));

    s = valid_settings();
    s.node_id = "a b";
    EXPECT_EQ(0u, rejection(s).find("UCX_PXN_NODE_ID"));

    s = valid_settings();
    s.net_tls.clear();
    EXPECT_EQ(0u, rejection(s).find("UCX_PXN_NET_TLS"));

    s = valid_settings();
    s.relay_slice = 32;
    EXPECT_EQ(0u, rejection(s).find("UCX_PXN_RELAY_SLICE"));

    s = valid_settings();
    s.relay_slice       = 65536;
    s.relay_slice_merge = 65536;
    EXPECT_EQ(0u, rejection(s).find("UCX_PXN_RELAY_SLICE_MERGE"));

    for (const uint64_t bytes : {uint64_t(100), uint64_t(4095), uint64_t(2) << 30}) {
        s = valid_settings();
        s.piece_bytes = bytes;
        EXPECT_EQ(0u, rejection(s).find("UCX_PXN_PIECE_BYTES")) << bytes;
    }

    s = valid_settings();
    s.engine_spin = 0.5;
    EXPECT_EQ(0u, rejection(s).find("UCX_PXN_ENGINE_SPIN"));

    s = valid_settings();
    s.engine_poll = 0;
    EXPECT_EQ(0u, rejection(s).find("UCX_PXN_ENGINE_POLL"));

    s = valid_settings();
    s.engine_cpus = "0-";
    EXPECT_EQ(0u, rejection(s).find("UCX_PXN_ENGINE_CPUS='0-'"));

    for (const char *nice : {"20", "-21", "x", "", "--1", "100"}) {
        s = valid_settings();
        s.engine_nice = nice;
        EXPECT_EQ(0u, rejection(s).find("UCX_PXN_ENGINE_NICE")) << nice;
    }
}

TEST(Settings, PieceBytesAutoCutsPiecesOnlyInAHostArenaAndInfIsOff)
{
    pxn::Settings s = valid_settings();
    EXPECT_EQ(pxn::kPieceBytesAuto, s.piece_bytes); /* the default */
    EXPECT_EQ(256u << 10, pxn::piece_bytes_for(s, true));
    EXPECT_EQ(0u, pxn::piece_bytes_for(s, false));
    for (const uint64_t bytes : {uint64_t(0), uint64_t(4096), uint64_t(1) << 30,
                                 pxn::kPieceBytesInf}) {
        s.piece_bytes = bytes;
        std::string error;
        EXPECT_EQ(UCS_OK, pxn::validate(s, &error)) << bytes << ": " << error;
        const uint64_t expect = (bytes == pxn::kPieceBytesInf) ? 0 : bytes;
        EXPECT_EQ(expect, pxn::piece_bytes_for(s, true)) << bytes;
        EXPECT_EQ(expect, pxn::piece_bytes_for(s, false)) << bytes;
    }
}

TEST(Settings, EngineNiceIsInheritOrANiceValue)
{
    pxn::Settings s = valid_settings();
    int nice = 99;
    EXPECT_FALSE(pxn::engine_nice_value(s, &nice));
    for (const char *text : {"-20", "0", "5", "19"}) {
        s.engine_nice = text;
        EXPECT_TRUE(pxn::engine_nice_value(s, &nice)) << text;
        EXPECT_EQ(atoi(text), nice);
    }
    s.engine_cpus = "0-3,8";
    std::string error;
    EXPECT_EQ(UCS_OK, pxn::validate(s, &error)) << error;
}

TEST(Settings, RejectsArenaLargerThanLimit)
{
    pxn::Settings s      = valid_settings();
    s.geometry.lanes     = 64;
    s.geometry.slots     = 4096;
    s.geometry.slot_size = 1ull << 30;
    EXPECT_NE(std::string::npos, rejection(s).find("arena limit"));
}

TEST(Settings, GroupNameRules)
{
    EXPECT_TRUE(pxn::is_valid_group_name("job-1.A_b"));
    EXPECT_TRUE(pxn::is_valid_group_name(std::string(64, 'x')));
    EXPECT_FALSE(pxn::is_valid_group_name(std::string(65, 'x')));
    EXPECT_FALSE(pxn::is_valid_group_name(""));
    EXPECT_FALSE(pxn::is_valid_group_name("."));
    EXPECT_FALSE(pxn::is_valid_group_name(".."));
    EXPECT_TRUE(pxn::is_valid_group_name("..."));
    EXPECT_FALSE(pxn::is_valid_group_name("a/b"));
    EXPECT_FALSE(pxn::is_valid_group_name("a b"));
    EXPECT_FALSE(pxn::is_valid_group_name("caf\xc3\xa9"));
}

TEST(Settings, UcxTlsNamesPxnOnlyExplicitly)
{
    for (const char *yes : {"pxn", "pxn,rc,cuda_copy,cuda_ipc", "rc, pxn",
                            "tcp,pxn:aux", " pxn "}) {
        EXPECT_TRUE(pxn::tls_names(yes, "pxn")) << "'" << yes << "'";
    }
    for (const char *no : {"", "all", "^pxn", "^tcp", "rc,tcp", "pxnx", "xpxn",
                           "rc_pxn", "pxn_tcp"}) {
        EXPECT_FALSE(pxn::tls_names(no, "pxn")) << "'" << no << "'";
    }
}

TEST(Settings, PxnIsRequestedByUcxTlsOrByEnable)
{
    pxn::Settings s;
    EXPECT_FALSE(pxn::pxn_requested(s, nullptr));
    EXPECT_FALSE(pxn::pxn_requested(s, "all"));
    EXPECT_TRUE(pxn::pxn_requested(s, "pxn,tcp"));
    s.enable = pxn::EnableChoice::kNo;
    EXPECT_FALSE(pxn::pxn_requested(s, "pxn,tcp"));
    s.enable = pxn::EnableChoice::kYes;
    EXPECT_TRUE(pxn::pxn_requested(s, nullptr));
}

TEST(Settings, RawEnvironmentTellsWhetherPxnWasAskedBeforeAnyParsing)
{
    EXPECT_FALSE(pxn::pxn_asked(nullptr, nullptr));
    EXPECT_FALSE(pxn::pxn_asked("", "tcp"));
    EXPECT_FALSE(pxn::pxn_asked("AUTO", "all"));
    EXPECT_TRUE(pxn::pxn_asked(nullptr, "pxn,tcp"));
    EXPECT_TRUE(pxn::pxn_asked("auto", "tcp,pxn:aux"));
    EXPECT_FALSE(pxn::pxn_asked("n", "pxn,tcp"));
    EXPECT_FALSE(pxn::pxn_asked("N", nullptr));
    EXPECT_TRUE(pxn::pxn_asked("y", nullptr));
    /* not a value of the table: asked, so that the parser reports it */
    EXPECT_TRUE(pxn::pxn_asked("yes", "tcp"));
}

TEST(Settings, DefaultGeometryShrinksToAQuarterOfASmallFileSystem)
{
    pxn::Settings s;
    bool changed;
    /* a roomy /dev/shm: nothing changes */
    ASSERT_TRUE(pxn::fit_geometry(&s, 64ull << 30, true, &changed));
    EXPECT_FALSE(changed);
    EXPECT_EQ(pxn::Geometry(), s.geometry);
    /* Docker's 64 MiB: a relay takes at most 16 MiB */
    ASSERT_TRUE(pxn::fit_geometry(&s, 64ull << 20, true, &changed));
    EXPECT_TRUE(changed);
    EXPECT_LE(pxn::relay_footprint(s.geometry, true), 16ull << 20);
    EXPECT_EQ(7u, s.geometry.lanes);
    EXPECT_GE(s.geometry.slot_size, 256ull << 10);
    /* a process with a GPU arena ends with the same geometry: relays and
     * senders of one group must agree */
    pxn::Settings gpu;
    ASSERT_TRUE(pxn::fit_geometry(&gpu, 64ull << 20, false, &changed));
    EXPECT_TRUE(changed);
    EXPECT_EQ(s.geometry, gpu.geometry);
    /* 4 MiB: nothing fits */
    pxn::Settings tiny;
    EXPECT_FALSE(pxn::fit_geometry(&tiny, 4ull << 20, true, &changed));
    /* a geometry the user chose is never changed: it fits or pxn refuses */
    pxn::Settings chosen;
    chosen.geometry.slots = 16;
    EXPECT_FALSE(pxn::fit_geometry(&chosen, 64ull << 20, true, &changed));
    EXPECT_EQ(16u, chosen.geometry.slots);
    /* ... and with a GPU arena only its control file must fit */
    EXPECT_TRUE(pxn::fit_geometry(&chosen, 64ull << 20, false, &changed));
    EXPECT_FALSE(changed);
}

TEST(Settings, RegistryDirMustBeAbsolute)
{
    pxn::Settings s = valid_settings();
    std::string error;
    s.registry_dir = "tmp/x";
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::validate(s, &error));
    EXPECT_EQ(0u, error.find("UCX_PXN_REGISTRY_DIR='tmp/x'")) << error;
    s.registry_dir = "/run/user/1000";
    EXPECT_EQ(UCS_OK, pxn::validate(s, &error)) << error;
}

TEST(RailMap, EmptyMapsEachNicToItself)
{
    pxn::RailMap map;
    std::string error;
    ASSERT_EQ(UCS_OK, pxn::RailMap::parse("", &map, &error));
    EXPECT_EQ("mlx5_0", map.rail_of("mlx5_0:1"));
    EXPECT_EQ("eth0", map.rail_of("eth0"));
}

TEST(RailMap, MapsDevicesWithAndWithoutPort)
{
    pxn::RailMap map;
    std::string error;
    ASSERT_EQ(UCS_OK, pxn::RailMap::parse("mlx5_0:rail0,mlx5_1:1:rail1", &map,
                                          &error)) << error;
    EXPECT_EQ(2u, map.size());
    EXPECT_EQ("rail0", map.rail_of("mlx5_0:1"));
    EXPECT_EQ("rail0", map.rail_of("mlx5_0"));
    EXPECT_EQ("rail1", map.rail_of("mlx5_1:1"));
    EXPECT_EQ("mlx5_2", map.rail_of("mlx5_2:1"));
}

TEST(RailMap, RejectsBadSyntaxAndDuplicates)
{
    pxn::RailMap map;
    std::string error;
    for (const char *bad : {"mlx5_0", ":rail0", "mlx5_0:", ",", "a:b,,c:d",
                            "a:b,", "mlx5_0:rail0,mlx5_0:1:rail1", "a b:c",
                            "a:b c"}) {
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, pxn::RailMap::parse(bad, &map, &error))
                << "'" << bad << "' accepted";
        EXPECT_FALSE(error.empty());
    }
}

} // namespace
