/*
 * Reading callgrind's output files (bench/ucx_pxn_op_cost.cc): the dumps a
 * program asked for with CALLGRIND_DUMP_STATS_AT(name), written with
 * --compress-strings=no --compress-pos=no. Also callgrind's client requests,
 * which do nothing where valgrind's header is not installed.
 */
#ifndef PXN_BENCH_CALLGRIND_DUMP_H_
#define PXN_BENCH_CALLGRIND_DUMP_H_

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define PXN_HAVE_CALLGRIND 1
#endif
#endif
#ifndef PXN_HAVE_CALLGRIND
#define CALLGRIND_TOGGLE_COLLECT
#define CALLGRIND_DUMP_STATS_AT(name) ((void)(name))
#define RUNNING_ON_VALGRIND 0
#endif

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace pxn_bench {

/* One dump: its instructions, and each function's own share. */
struct Dump {
    uint64_t                        total = 0;
    std::map<std::string, uint64_t> self;
};

/* The dumps of `dir`/callgrind.out*, by the name given to the dump,
 * without the functions of an object whose path contains `skip_object`
 * or whose name contains `skip_function` (empty: none). */
std::map<std::string, Dump> read_dumps(const std::string &dir,
                                       const std::string &skip_object,
                                       const std::string &skip_function = "");

/* Instructions of the C library's memcpy/memmove: large copies run as
 * "rep movsb", which callgrind counts once per byte. */
uint64_t copy_cost(const Dump &dump);

/* Space-separated words. */
std::vector<std::string> words(const std::string &s);

} // namespace pxn_bench

#endif
