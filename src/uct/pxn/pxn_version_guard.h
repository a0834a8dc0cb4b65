/*
 * The module's check, at load, that the UCX it was compiled for is the UCX
 * of the process that loaded it. UCX has no ABI check between libuct and
 * its modules: pxn implements UCX's internal ops tables and reads and
 * writes UCX's internal structs, whose layout depends on the UCX version
 * (and on snapshots between versions) and on build options, so a module
 * built for another UCX corrupts memory. The module UCX loads
 * (libuct_pxn, pxn_module.cc) runs the check in its constructor and opens
 * the transport (libpxn_transport, which registers the component) only
 * when it passes.
 *
 * What is compared (pxn_version_guard.cc has the details and the limits):
 *  - the version: UCT_VERNO_MAJOR/MINOR/PATCH of the headers pxn was
 *    compiled with against ucp_get_version() of the libucp loaded from the
 *    directory of the libuct in the process (libuct and libucs have no
 *    version function; a process that uses UCT without UCP has no libucp:
 *    then the version is unknown and only the rest is compared);
 *  - the API: the names libuct and libucs export (uc*), recorded by
 *    configure from the libraries it built against, against the dynamic
 *    symbol tables of the libuct and libucs actually loaded. Two snapshots
 *    with the same version numbers but a different internal API differ
 *    here, and so do two minor versions;
 *  - the build options that change the layout of UCX's structs:
 *    ENABLE_STATS (libucs exports ucs_stats_node_alloc only with it),
 *    ENABLE_DEBUG_DATA (libucs's global configuration has MPOOL_FIFO only
 *    with it), ENABLE_MT (ucp_lib_query, when libucp is loaded).
 *
 * Nothing here reads or writes a UCX struct, or calls UCX through a
 * function whose signature differs between versions: this runs before
 * the process's UCX is known to match.
 */
#ifndef UCT_PXN_VERSION_GUARD_H_
#define UCT_PXN_VERSION_GUARD_H_

#include <cstddef>
#include <string>

namespace pxn::uct {

/* What the module was built for (pxn_ucx_identity.cc, from configure).
 * Constant-initialised: valid in the module's constructor. */
struct UcxBuildIdentity {
    unsigned    major;
    unsigned    minor;
    unsigned    patch;
    const char *probes;            /* configure's API probes: "MD_ATTR_V2 ..." */
    int         enable_stats;      /* ENABLE_STATS of that UCX's config.h */
    int         enable_debug_data; /* ENABLE_DEBUG_DATA */
    int         enable_mt;         /* ENABLE_MT */
    const char *exports;           /* sorted "name\0name\0...": uc* of libuct and
                                      libucs, less per-CPU code (see .cc) */
    size_t      exports_size;      /* bytes in exports, the last '\0' included */
    const char *module_base;       /* the module's file name before its suffix
                                      and ".so": "libuct_pxn" */
};

/* The identity this module was built with; a test build of the module
 * (libuct_pxn_skew_*, check only) links a deliberately different one. */
extern const UcxBuildIdentity kUcxBuiltFor;

/* Compares `built` with the UCX of this process, found from the libuct
 * and libucs that `libuct_symbol` and `libucs_symbol` (the addresses of any
 * of their functions) belong to. Returns "" when nothing differs, else one
 * line naming both versions and every difference found. Allocates; safe
 * in a constructor; never throws. */
std::string ucx_mismatch(const UcxBuildIdentity &built, const void *libuct_symbol,
                         const void *libucs_symbol) noexcept;

/* The same for this module's own identity; on a mismatch logs the line
 * (once per call) through libucs's ucs_log_fatal_error, whose signature
 * every UCX shares (to stderr, whatever UCX_LOG_LEVEL says: the process's
 * log configuration cannot be read from a libucs whose layout is not
 * known), and returns false. */
bool ucx_admits_module(const void *libuct_symbol, const void *libucs_symbol) noexcept;

/* Logs `line` the same way (once per call): through the ucs_log_fatal_error
 * of the libucs that `libucs_symbol` belongs to, else to stderr. */
void log_error(const void *libucs_symbol, const std::string &line) noexcept;

} // namespace pxn::uct

#endif
