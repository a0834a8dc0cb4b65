/*
 * What can be told about the process's UCX without trusting its layout, and
 * what cannot:
 *
 *  - libuct and libucs have no version function; libucp has
 *    ucp_get_version() and ucp_lib_query(), public API whose ABI UCX keeps
 *    across versions. The libucp taken is the one loaded from libuct's
 *    directory (a wheel's private UCX sits beside the system's). It is
 *    never loaded here: dlopen()ing libucp would run its constructors (and
 *    libucm's memory hooks) in a process that did not ask for UCP. So in a
 *    process that uses UCT alone, the version and ENABLE_MT are unknown.
 *  - The exported names of libuct and libucs are read from their dynamic
 *    symbol tables in memory (the loader's own data, the same in every
 *    version). They tell minor versions apart (each adds or drops
 *    functions) and snapshots whose internal API differs (v1.22.0 and the
 *    v1.22.x branch of 2026-08, both "1.22.0", differ by
 *    uct_md_mem_elem_release); two patch releases with the same exports
 *    are told apart only by the version. Names of per-CPU code are left
 *    out: they follow compiler flags, not the API (compared_name()).
 *  - ENABLE_MT changes only UCP's (and ugni's) structs, none pxn touches;
 *    it is compared where libucp tells it. Other configure options of UCX
 *    that change struct layouts without changing exports or configuration
 *    tables (e.g. assertions, --enable-debug beyond ENABLE_DEBUG_DATA)
 *    cannot be seen at run time; configure compares its header and library
 *    settings, and the module must be built against the UCX it loads into.
 */
#include "pxn_version_guard.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <iterator>
#include <link.h>
#include <vector>

namespace pxn::uct {

namespace {

/* Signatures that every UCX from 1.13 to master shares. */
using ucp_get_version_fn = void (*)(unsigned*, unsigned*, unsigned*);
struct UcpLibAttr { /* ucp_lib_attr_t: public, ABI-stable */
    uint64_t field_mask;
    int      max_thread_level;
};
constexpr uint64_t kUcpLibAttrMaxThreadLevel = 1; /* UCP_LIB_ATTR_FIELD_MAX_THREAD_LEVEL */
constexpr int      kUcsThreadModeMulti       = 2; /* UCS_THREAD_MODE_MULTI */
using ucp_lib_query_fn = int (*)(UcpLibAttr*);
using ucs_global_opts_get_value_fn = int (*)(const char*, char*, size_t);
using ucs_log_fatal_error_fn = void (*)(const char*, ...);

struct LoadedObject {
    std::string              path;
    std::vector<std::string> exports; /* uc*, sorted */
    bool                     found = false;
};

ElfW(Addr) relocated(ElfW(Addr) base, ElfW(Addr) ptr)
{
    /* glibc relocates the d_ptr entries of a loaded object's dynamic
     * section in place on most targets, not on all. */
    return ((ptr != 0) && (ptr < base)) ? (ptr + base) : ptr;
}

/* UCX's names (uc*), less those of its per-CPU code: which of them a
 * libucs exports depends on the compiler flags it was built with (e.g.
 * ucs_x86_nt_buffer_transfer only with AVX, which --enable-optimizations
 * turns on), not on its API. configure leaves out the same
 * (PXN_UCX_ARCH_NAMES in configure.ac). */
bool compared_name(const char *name)
{
    static const char *const arch[] = {"ucs_x86_", "ucs_arch_x86_", "ucs_aarch64_",
                                       "ucs_arch_aarch64_", "ucs_ppc64_", "ucs_rv64_"};
    if (strncmp(name, "uc", 2) != 0) {
        return false;
    }
    for (const char *prefix : arch) {
        if (strncmp(name, prefix, strlen(prefix)) == 0) {
            return false;
        }
    }
    return true;
}

size_t gnu_hash_symbol_count(const uint32_t *table)
{
    const uint32_t nbuckets  = table[0];
    const uint32_t symoffset = table[1];
    const uint32_t bloom     = table[2];
    auto *buckets = reinterpret_cast<const uint32_t*>(
            reinterpret_cast<const ElfW(Addr)*>(table + 4) + bloom);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t last = 0;
    for (uint32_t b = 0; b < nbuckets; ++b) {
        last = std::max(last, buckets[b]);
    }
    if (last < symoffset) {
        return symoffset;
    }
    while ((chain[last - symoffset] & 1) == 0) {
        ++last;
    }
    return last + 1;
}

void read_exports(ElfW(Addr) base, const ElfW(Dyn) *dyn,
                  std::vector<std::string> *names)
{
    ElfW(Addr) symtab = 0, strtab = 0, hash = 0, gnu_hash = 0;
    for (; (dyn != nullptr) && (dyn->d_tag != DT_NULL); ++dyn) {
        switch (dyn->d_tag) {
        case DT_SYMTAB:   symtab   = relocated(base, dyn->d_un.d_ptr); break;
        case DT_STRTAB:   strtab   = relocated(base, dyn->d_un.d_ptr); break;
        case DT_HASH:     hash     = relocated(base, dyn->d_un.d_ptr); break;
        case DT_GNU_HASH: gnu_hash = relocated(base, dyn->d_un.d_ptr); break;
        default:          break;
        }
    }
    if ((symtab == 0) || (strtab == 0) || ((hash == 0) && (gnu_hash == 0))) {
        return;
    }
    const size_t count = (hash != 0) ?
            reinterpret_cast<const uint32_t*>(hash)[1] :
            gnu_hash_symbol_count(reinterpret_cast<const uint32_t*>(gnu_hash));
    auto *syms        = reinterpret_cast<const ElfW(Sym)*>(symtab);
    const char *strs  = reinterpret_cast<const char*>(strtab);
    for (size_t i = 1; i < count; ++i) {
        const ElfW(Sym) &s = syms[i];
        const unsigned bind = ELF64_ST_BIND(s.st_info); /* the same as ELF32_ST_BIND */
        if ((s.st_shndx == SHN_UNDEF) || (s.st_name == 0) ||
            ((bind != STB_GLOBAL) && (bind != STB_WEAK) &&
             (bind != STB_GNU_UNIQUE))) {
            continue;
        }
        const char *name = strs + s.st_name;
        if (compared_name(name)) {
            names->emplace_back(name);
        }
    }
    std::sort(names->begin(), names->end());
    names->erase(std::unique(names->begin(), names->end()), names->end());
}

struct FindArg {
    ElfW(Addr)    address;
    LoadedObject *object;
};

int find_containing(struct dl_phdr_info *info, size_t, void *data)
{
    auto *arg             = static_cast<FindArg*>(data);
    bool contains         = false;
    const ElfW(Dyn) *dyn  = nullptr;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) &ph = info->dlpi_phdr[i];
        const ElfW(Addr) start = info->dlpi_addr + ph.p_vaddr;
        if ((ph.p_type == PT_LOAD) && (arg->address >= start) &&
            (arg->address < start + ph.p_memsz)) {
            contains = true;
        } else if (ph.p_type == PT_DYNAMIC) {
            dyn = reinterpret_cast<const ElfW(Dyn)*>(start);
        }
    }
    if (!contains) {
        return 0;
    }
    arg->object->path  = (info->dlpi_name != nullptr) ? info->dlpi_name : "";
    arg->object->found = true;
    read_exports(info->dlpi_addr, dyn, &arg->object->exports);
    return 1;
}

LoadedObject object_of(const void *symbol)
{
    LoadedObject object;
    FindArg arg = {reinterpret_cast<ElfW(Addr)>(symbol), &object};
    dl_iterate_phdr(find_containing, &arg);
    return object;
}

std::string real_dir(const std::string &path)
{
    const size_t slash = path.rfind('/');
    const std::string dir = (slash == std::string::npos) ? "." : path.substr(0, slash);
    char *real = realpath(dir.c_str(), nullptr);
    if (real == nullptr) {
        return dir;
    }
    std::string result(real);
    free(real);
    return result;
}

struct UcpFindArg {
    std::string dir;  /* libuct's, resolved */
    std::string path; /* out */
};

int find_libucp(struct dl_phdr_info *info, size_t, void *data)
{
    auto *arg = static_cast<UcpFindArg*>(data);
    if ((info->dlpi_name == nullptr) || (info->dlpi_name[0] == '\0')) {
        return 0;
    }
    const std::string path(info->dlpi_name);
    const size_t slash = path.rfind('/');
    const std::string base = path.substr((slash == std::string::npos) ? 0 : slash + 1);
    /* libucp.so.0, libucp-<suffix>.so.0, auditwheel's libucp-<hash>.so.0.0.0 */
    if ((base.compare(0, 6, "libucp") != 0) || (base.size() < 7) ||
        ((base[6] != '.') && (base[6] != '-')) || (real_dir(path) != arg->dir)) {
        return 0;
    }
    arg->path = path;
    return 1;
}

struct RunningUcx {
    std::string  libuct;
    bool         version_known = false;
    unsigned     major = 0, minor = 0, patch = 0;
    int          mt    = -1; /* -1: unknown */
    int          stats = 0;
    int          debug_data = -1;
    std::vector<std::string> exports; /* libuct's and libucs's */
};

void read_libucp(const std::string &libuct, RunningUcx *ucx)
{
    UcpFindArg arg = {real_dir(libuct), ""};
    dl_iterate_phdr(find_libucp, &arg);
    if (arg.path.empty()) {
        return;
    }
    void *ucp = dlopen(arg.path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (ucp == nullptr) {
        return;
    }
    auto get_version = reinterpret_cast<ucp_get_version_fn>(dlsym(ucp, "ucp_get_version"));
    if (get_version != nullptr) {
        get_version(&ucx->major, &ucx->minor, &ucx->patch);
        ucx->version_known = true;
    }
    auto lib_query = reinterpret_cast<ucp_lib_query_fn>(dlsym(ucp, "ucp_lib_query"));
    UcpLibAttr attr = {kUcpLibAttrMaxThreadLevel, 0};
    if ((lib_query != nullptr) && (lib_query(&attr) == 0)) {
        ucx->mt = (attr.max_thread_level == kUcsThreadModeMulti);
    }
    dlclose(ucp);
}

/* MPOOL_FIFO is a row of libucs's global configuration table only in a
 * UCX with ENABLE_DEBUG_DATA; libucs looks it up in its own table
 * (ucs_global_opts_get_value, the same signature from 1.13 to master), so
 * nothing here depends on the table's layout. */
int read_debug_data(const std::string &libucs)
{
    void *ucs = dlopen(libucs.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (ucs == nullptr) {
        return -1;
    }
    auto get_value = reinterpret_cast<ucs_global_opts_get_value_fn>(
            dlsym(ucs, "ucs_global_opts_get_value"));
    const int result = (get_value == nullptr) ? -1 :
                       (get_value("MPOOL_FIFO", nullptr, 0) == 0);
    dlclose(ucs);
    return result;
}

std::vector<std::string> split_exports(const UcxBuildIdentity &built)
{
    std::vector<std::string> names;
    for (size_t i = 0; i < built.exports_size;) {
        const size_t len = strnlen(built.exports + i, built.exports_size - i);
        if (len > 0) {
            names.emplace_back(built.exports + i, len);
        }
        i += len + 1;
    }
    std::sort(names.begin(), names.end());
    return names;
}

std::string version_string(unsigned major, unsigned minor, unsigned patch)
{
    return std::to_string(major) + "." + std::to_string(minor) + "." +
           std::to_string(patch);
}

/* "3 (uct_a, uct_b, ...)" */
std::string some_names(const std::vector<std::string> &names)
{
    std::string text = std::to_string(names.size());
    const size_t shown = std::min<size_t>(names.size(), 3);
    for (size_t i = 0; i < shown; ++i) {
        text += (i ? ", " : " (") + names[i];
    }
    return text + ((names.size() > shown) ? ", ...)" : (shown ? ")" : ""));
}

std::string option_difference(const char *name, int built, int running,
                              const char *how)
{
    if ((running < 0) || ((built != 0) == (running != 0))) {
        return "";
    }
    return std::string("; ") + name + " " + (built ? "1" : "0") +
           " in the build, " + (running ? "1" : "0") + " in this libucs" +
           how;
}

std::string describe(const UcxBuildIdentity &built, const void *libuct_symbol,
                     const void *libucs_symbol)
{
    const LoadedObject uct = object_of(libuct_symbol);
    const LoadedObject ucs = object_of(libucs_symbol);
    if (!uct.found || !ucs.found) {
        return "pxn: libuct or libucs not found among the loaded objects";
    }

    RunningUcx running;
    running.libuct = uct.path;
    read_libucp(uct.path, &running);
    running.stats      = std::binary_search(ucs.exports.begin(), ucs.exports.end(),
                                            std::string("ucs_stats_node_alloc"));
    running.debug_data = read_debug_data(ucs.path);
    std::merge(uct.exports.begin(), uct.exports.end(), ucs.exports.begin(),
               ucs.exports.end(), std::back_inserter(running.exports));

    std::string differences;
    if (running.version_known &&
        ((running.major != built.major) || (running.minor != built.minor) ||
         (running.patch != built.patch))) {
        differences += "; the versions differ";
    }
    differences += option_difference("ENABLE_STATS", built.enable_stats,
                                     running.stats, "");
    differences += option_difference("ENABLE_DEBUG_DATA", built.enable_debug_data,
                                     running.debug_data, "");
    differences += option_difference("ENABLE_MT", built.enable_mt, running.mt,
                                     " (libucp)");
    const std::vector<std::string> expected = split_exports(built);
    std::vector<std::string> missing, added;
    std::set_difference(expected.begin(), expected.end(), running.exports.begin(),
                        running.exports.end(), std::back_inserter(missing));
    std::set_difference(running.exports.begin(), running.exports.end(),
                        expected.begin(), expected.end(), std::back_inserter(added));
    if (!missing.empty() || !added.empty()) {
        differences += "; its libuct and libucs export " + some_names(added) +
                       " names the build's did not and lack " +
                       some_names(missing) + " it exported";
    }
    if (differences.empty()) {
        return "";
    }

    const std::string running_version =
            running.version_known ?
                    version_string(running.major, running.minor, running.patch) :
                    std::string("of unknown version (no libucp loaded beside libuct)");
    return "pxn: not registered: the module was built for UCX " +
           version_string(built.major, built.minor, built.patch) +
           " and this process runs UCX " + running_version + " from " +
           real_dir(uct.path) + differences +
           "; rebuild pxn against this UCX (README, \"Using the module with a "
           "UCX built elsewhere\")";
}

} // namespace

std::string ucx_mismatch(const UcxBuildIdentity &built, const void *libuct_symbol,
                         const void *libucs_symbol) noexcept
{
    try {
        return describe(built, libuct_symbol, libucs_symbol);
    } catch (...) {
        return "pxn: not registered: out of memory while checking the UCX version";
    }
}

void log_error(const void *libucs_symbol, const std::string &line) noexcept
{
    try {
        const LoadedObject ucs = object_of(libucs_symbol);
        void *handle = ucs.found ? dlopen(ucs.path.c_str(), RTLD_LAZY | RTLD_NOLOAD) :
                                   nullptr;
        auto log = (handle != nullptr) ?
                reinterpret_cast<ucs_log_fatal_error_fn>(
                        dlsym(handle, "ucs_log_fatal_error")) :
                nullptr;
        if (log != nullptr) {
            log("pxn_module.cc UCX  ERROR %s", line.c_str());
        } else {
            fprintf(stderr, "UCX  ERROR %s\n", line.c_str());
        }
        if (handle != nullptr) {
            dlclose(handle);
        }
    } catch (...) {
        fprintf(stderr, "UCX  ERROR %s\n", line.c_str());
    }
}

bool ucx_admits_module(const void *libuct_symbol, const void *libucs_symbol) noexcept
{
    const std::string mismatch = ucx_mismatch(kUcxBuiltFor, libuct_symbol,
                                              libucs_symbol);
    if (mismatch.empty()) {
        return true;
    }
    log_error(libucs_symbol, mismatch);
    return false;
}

} // namespace pxn::uct
