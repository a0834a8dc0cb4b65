#!/usr/bin/env bash
# Builds a second UCX with statistics (--enable-stats) in .deps-stats, the
# module, tools and tests against it in build-stats, and runs the test that
# reads pxn's counters from a UCS statistics dump (PxnUcp.*Stats*; in the
# normal build, whose UCX has no statistics, it skips). Idempotent; the
# first run builds UCX again (a few minutes).
#
#   bash contrib/stats.sh
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deps=${PXN_STATS_DEPS_DIR:-$top/.deps-stats}
build=${PXN_STATS_BUILD_DIR:-$top/build-stats}

export PXN_DEPS_DIR=$deps PXN_UCX_FLAGS=--enable-stats
PXN_BUILD_DIR="$build" \
PXN_CONFIGURE_FLAGS="--with-ucx=$deps/ucx --with-ucx-src=$deps/src/ucx-1.13.1 --with-stock-ucx=$deps/stock/lib" \
    bash "$top/contrib/build.sh"
# grep reads it all (no -q): an early exit would fail the pipe (pipefail).
"$deps/ucx/bin/ucx_info" -b | grep '^#define ENABLE_STATS' >/dev/null ||
    { echo "stats.sh: $deps/ucx has no statistics" >&2; exit 1; }

cd "$build"
export GTEST_FILTER="${GTEST_FILTER:-PxnUcp.*Stats*}"
status=0
make -j"${PXN_JOBS:-$(nproc)}" check >check.out 2>&1 || status=$?
grep -HE '^\[  (PASSED|SKIPPED|FAILED) +\] [0-9]' test/gtest/*.log || true
[ "$status" -eq 0 ] || grep -hE '^\[  FAILED|Failure' -A6 test/gtest/*.log | head -n 60
exit "$status"
