#!/usr/bin/env bash
# Runs the whole test suite: installs dependencies and builds what is
# missing, then `make check` (GoogleTest), twice: in build/ (with the CUDA
# backend when a toolkit is present) and in build-nocuda/ (configured
# --with-cuda=no, its module installed into a copy of the UCX install,
# .deps/ucx-nocuda). Idempotent.
#
# Select tests with GoogleTest's own variable, e.g.
#   GTEST_FILTER='RailMap.*' bash contrib/test.sh
# PXN_TEST_NOCUDA=0 skips the second build.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PXN_BUILD_DIR:-$top/build}
deps=${PXN_DEPS_DIR:-$top/.deps}
jobs=${PXN_JOBS:-$(nproc)}

check() { # build directory
    cd "$1"
    if ! make -j"$jobs" check >check.out 2>&1; then
        for log in test/gtest/*.log test/fuzz/*.log; do
            [ -f "$log" ] || continue
            echo "==== $log"; tail -n 200 "$log"
        done
        tail -n 40 check.out
        # last, where a CI page's tail shows it: which tests failed, and how
        echo "==== failed tests (${1##*/})"
        grep -hE '^\[  FAILED  \] .+ \([0-9]+ ms\)$' test/gtest/*.log || true
        grep -hA4 ': Failure$' test/gtest/*.log | head -n 40 || true
        exit 1
    fi
    grep -HE '^\[  (PASSED|SKIPPED|FAILED) +\] [0-9]' test/gtest/*.log || true
}

bash "$top/contrib/build.sh"
echo "[test] $build" >&2
check "$build"

if [ "${PXN_TEST_NOCUDA:-1}" != 0 ]; then
    copy=$deps/ucx-nocuda
    bash "$top/contrib/ucx_copy.sh" "$deps/ucx" "$copy"
    PXN_BUILD_DIR=$top/build-nocuda \
    PXN_CONFIGURE_FLAGS="--with-cuda=no --with-ucx=$copy --with-ucx-src=$deps/src/ucx-1.13.1 --with-stock-ucx=$deps/stock/lib" \
        bash "$top/contrib/build.sh"
    echo "[test] $top/build-nocuda (--with-cuda=no)" >&2
    check "$top/build-nocuda"
fi
