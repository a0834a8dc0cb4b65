/*
 * The UCX this module is built for, as pxn_version_guard compares it at
 * load: the version of the headers it is compiled with, and what configure
 * found in that UCX (pxn_ucx_build.h and pxn_ucx_exports.inc, generated
 * into the build tree by configure: its API probes, the build options of
 * its config.h, the names its libuct and libucs export).
 *
 * The suite's test builds of the module (libuct_pxn_skew_*.la, built by
 * `make check`, never installed) compile this file alone again with
 * PXN_UCX_IDENTITY_SKEW set, so that a module claiming another UCX exists
 * on a machine with one UCX (they open the same libpxn_transport):
 *   1  another minor version (minor + 1), the same API;
 *   2  one more exported name (another snapshot of the same version);
 *   3  ENABLE_DEBUG_DATA flipped.
 */
#include "pxn_version_guard.h"

#include "pxn_ucx_build.h"

#include <uct/api/version.h>

#ifndef PXN_UCX_IDENTITY_SKEW
#define PXN_UCX_IDENTITY_SKEW 0
#endif

namespace pxn::uct {

namespace {

constexpr char kExports[] =
#include "pxn_ucx_exports.inc"
#if PXN_UCX_IDENTITY_SKEW == 2
        "uct_pxn_skew_only_in_another_snapshot\0"
#endif
        "";

} // namespace

extern const UcxBuildIdentity kUcxBuiltFor = {
    UCT_VERNO_MAJOR,
    UCT_VERNO_MINOR + ((PXN_UCX_IDENTITY_SKEW == 1) ? 1 : 0),
    UCT_VERNO_PATCH,
    PXN_UCX_BUILT_PROBES,
    PXN_UCX_BUILT_ENABLE_STATS,
    (PXN_UCX_IDENTITY_SKEW == 3) ? !PXN_UCX_BUILT_ENABLE_DEBUG_DATA :
                                   PXN_UCX_BUILT_ENABLE_DEBUG_DATA,
    PXN_UCX_BUILT_ENABLE_MT,
    kExports,
    sizeof(kExports),
#if PXN_UCX_IDENTITY_SKEW == 1
    "libuct_pxn_skew_version",
#elif PXN_UCX_IDENTITY_SKEW == 2
    "libuct_pxn_skew_api",
#elif PXN_UCX_IDENTITY_SKEW == 3
    "libuct_pxn_skew_options",
#else
    "libuct_pxn",
#endif
};

} // namespace pxn::uct
