#!/usr/bin/env bash
# Runs the test suite under AddressSanitizer and UndefinedBehaviorSanitizer:
# the module, the tools and the tests are built with
# -fsanitize=address,undefined in build-asan, against a copy of the UCX
# install (.deps/ucx-asan), so that the sanitized module never replaces the
# normal one (contrib/ucx_copy.sh). UCX's own programs in the copy
# (ucx_info, ucx_perftest) get a wrapper that preloads the sanitizer
# runtimes, which must come first in a process that loads the module.
# Idempotent.
#
#   bash contrib/sanitize.sh
#   GTEST_FILTER='PxnFaults.*' bash contrib/sanitize.sh
#
# Leak checking is off: the suite ends most of its processes with SIGKILL.
# PxnStockUcx, PxnVersionGuardStock and PxnVersionGuardForeign are left
# out: they preload the module into an unsanitized stock
# UCX program, which ASan refuses by design. A report fails the test that
# caused it (halt_on_error); reports also go to build-asan/sanitizer/.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PXN_ASAN_BUILD_DIR:-$top/build-asan}
ucx=${PXN_UCX_PREFIX:-$top/.deps/ucx}
copy=${PXN_ASAN_UCX_PREFIX:-$top/.deps/ucx-asan}
jobs=${PXN_JOBS:-$(nproc)}

bash "$top/contrib/build.sh" # dependencies, and the normal build's checks

# UCX's programs in the copy are not sanitized, the pxn module they load
# is: the sanitizer runtimes must be loaded first.
bash "$top/contrib/ucx_copy.sh" "$ucx" "$copy" \
    "$(gcc -print-file-name=libasan.so)" "$(gcc -print-file-name=libubsan.so)"

# -Wno-maybe-uninitialized: GCC 12 warns falsely inside <regex> and
# <functional> under the sanitizers.
flags="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer"
flags+=" -fno-sanitize-recover=undefined -Wno-maybe-uninitialized"
# A build tree configured for another install starts over.
if [ -f "$build/Makefile" ] &&
   ! grep -qs -- "--with-ucx=$copy " "$build/.pxn-configure"; then
    rm -rf "$build"
fi
# libtool drops -fsanitize when it links the module (-Wl,--no-undefined):
# the runtimes are named in LIBS too.
CXXFLAGS="$flags" LDFLAGS="-fsanitize=address,undefined" LIBS="-lasan -lubsan" \
    PXN_BUILD_DIR="$build" PXN_CONFIGURE_FLAGS="--with-ucx=$copy" \
    bash "$top/contrib/build.sh"

rm -rf "$build/sanitizer" # reports of this run only
mkdir -p "$build/sanitizer"
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:log_path=$build/sanitizer/asan"
# Everything runs slower: the tests stretch their time bounds.
export PXN_TEST_TIME_SCALE=${PXN_TEST_TIME_SCALE:-4}
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$build/sanitizer/ubsan"
filter=${GTEST_FILTER:-*}
if [[ "$filter" == *-* ]]; then
    export GTEST_FILTER="$filter:PxnStockUcx.*:PxnVersionGuardStock.*:PxnVersionGuardForeign.*"
else
    export GTEST_FILTER="$filter-PxnStockUcx.*:PxnVersionGuardStock.*:PxnVersionGuardForeign.*"
fi
cd "$build"
status=0
make -j"$jobs" check >check.out 2>&1 || status=$?
grep -HE '^\[  (PASSED|SKIPPED|FAILED) +\] [0-9]' test/gtest/*.log || true
if ls sanitizer/* >/dev/null 2>&1; then
    echo "[sanitize] reports:" >&2
    head -n 40 sanitizer/* >&2
    status=1
fi
if [ "$status" -ne 0 ]; then
    for log in test/gtest/*.log; do
        echo "==== $log"; grep -E '^\[  FAILED|Failure|ERROR' "$log" | head -n 40
    done
fi
exit "$status"
