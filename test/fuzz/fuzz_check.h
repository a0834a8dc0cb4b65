/*
 * An invariant of a fuzz target: abort (a finding) with the condition's
 * text when it does not hold.
 */
#ifndef PXN_FUZZ_CHECK_H_
#define PXN_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(_cond) \
    do { \
        if (!(_cond)) { \
            std::fprintf(stderr, "invariant failed: %s (%s:%d)\n", #_cond, \
                         __FILE__, __LINE__); \
            std::abort(); \
        } \
    } while (0)

#endif
