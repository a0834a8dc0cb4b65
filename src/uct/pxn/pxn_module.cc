/*
 * libuct_pxn.so.0, the file UCX loads (by name, from its module directory
 * or UCX_PLUGIN_PATH, or through LD_PRELOAD): a loader that needs from UCX
 * only two functions every UCX since 1.13 exports. Its constructor runs the
 * version guard (pxn_version_guard.h) and only then opens the transport,
 * libpxn_transport.so.0 beside it, and calls its pxn_transport_register().
 *
 * Why two files: the transport references UCX's internal API of the UCX it
 * was built for. Loaded into a UCX that lacks one of those functions, its
 * relocations fail before any code of it runs: under LD_PRELOAD the process
 * dies ("symbol lookup error", exit 127), from UCX's loader the module is
 * dropped without a word. The loader's constructor always runs, says why,
 * and leaves the transport unopened.
 *
 * The transport's file name is the loader's own with "libpxn_transport" in
 * place of the module's base name (libuct_pxn.so.0 -> libpxn_transport.so.0,
 * libuct_pxn-nixl.so.0.0.0 -> libpxn_transport-nixl.so.0.0.0: a wheel's
 * names), looked for in the directory the loader was opened from, then in
 * the one its real path lies in (a link to it elsewhere).
 */
#include "pxn_version_guard.h"

#include "pxn_ucx_build.h"

#include <ucs/config/parser.h>
#include <uct/api/uct.h>

#include <climits>
#include <cstdlib>
#include <dlfcn.h>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using transport_fn = void (*)();

transport_fn g_unregister = nullptr;

const void *libuct_symbol()
{
    return reinterpret_cast<const void*>(&uct_query_components);
}

const void *libucs_symbol()
{
    return reinterpret_cast<const void*>(&ucs_config_parser_get_value);
}

std::string dir_of(const std::string &path)
{
    const size_t slash = path.rfind('/');
    return (slash == std::string::npos) ? "." : path.substr(0, slash);
}

std::string base_of(const std::string &path)
{
    const size_t slash = path.rfind('/');
    return (slash == std::string::npos) ? path : path.substr(slash + 1);
}

/* Where the transport should be; none when the loader's own file name
 * does not start with its base name. */
std::vector<std::string> transport_candidates()
{
    Dl_info info;
    if ((dladdr(reinterpret_cast<const void*>(&transport_candidates), &info) == 0) ||
        (info.dli_fname == nullptr)) {
        return {};
    }
    const std::string own  = info.dli_fname;
    const std::string base = base_of(own);
    const std::string mine = pxn::uct::kUcxBuiltFor.module_base;
    if (base.compare(0, mine.size(), mine) != 0) {
        return {};
    }
    const std::string file = "libpxn_transport" + base.substr(mine.size());
    std::vector<std::string> paths = {dir_of(own) + "/" + file};
    char *real = realpath(own.c_str(), nullptr);
    if (real != nullptr) {
        const std::string other = dir_of(real) + "/" + file;
        free(real);
        if (other != paths[0]) {
            paths.push_back(other);
        }
    }
    return paths;
}

/* The UCX built with --enable-module-deepbind loads its modules with
 * RTLD_DEEPBIND so that a private UCX (a wheel's) binds to its own
 * libraries even where another UCX is global; the transport follows. */
int transport_dlopen_mode()
{
    int mode = RTLD_NOW | RTLD_LOCAL;
#if defined(PXN_UCX_BUILT_MODULE_DEEPBIND) && defined(RTLD_DEEPBIND)
    mode |= RTLD_DEEPBIND;
#endif
    return mode;
}

void open_transport()
{
    std::string tried, error;
    for (const std::string &path : transport_candidates()) {
        tried += (tried.empty() ? "" : ", ") + path;
        if (access(path.c_str(), F_OK) != 0) {
            continue;
        }
        void *transport = dlopen(path.c_str(), transport_dlopen_mode());
        if (transport == nullptr) {
            const char *e = dlerror();
            error = path + ": " + (e ? e : "dlopen failed");
            break;
        }
        auto reg = reinterpret_cast<transport_fn>(dlsym(transport, "pxn_transport_register"));
        auto unreg = reinterpret_cast<transport_fn>(dlsym(transport, "pxn_transport_unregister"));
        if ((reg == nullptr) || (unreg == nullptr)) {
            error = path + ": no pxn_transport_register/unregister";
            break;
        }
        reg();
        g_unregister = unreg; /* the transport stays open, as UCX's modules do */
        return;
    }
    if (error.empty()) {
        error = "the transport library is missing (looked for " +
                (tried.empty() ? std::string("nothing: the module's file name does not start with ") +
                                         pxn::uct::kUcxBuiltFor.module_base :
                                 tried) +
                "); install it beside the module";
    }
    pxn::uct::log_error(libucs_symbol(), "pxn: not registered: " + error);
}

__attribute__((constructor)) void pxn_module_load()
{
    if (pxn::uct::ucx_admits_module(libuct_symbol(), libucs_symbol())) {
        open_transport();
    }
}

__attribute__((destructor)) void pxn_module_unload()
{
    if (g_unregister != nullptr) {
        g_unregister();
    }
}

} // namespace
