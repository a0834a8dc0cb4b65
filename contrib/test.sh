#!/usr/bin/env bash
# Runs the whole test suite: installs dependencies and builds what is
# missing, then `make check` (GoogleTest). Idempotent.
#
# Select tests with GoogleTest's own variable, e.g.
#   GTEST_FILTER='RailMap.*' bash contrib/test.sh
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PXN_BUILD_DIR:-$top/build}

bash "$top/contrib/build.sh"
cd "$build"
if ! make -j"${PXN_JOBS:-$(nproc)}" check; then
    for log in test/gtest/*.log; do
        echo "==== $log"; tail -n 200 "$log"
    done
    exit 1
fi
grep -HE '^\[  (PASSED|SKIPPED|FAILED) +\] [0-9]' test/gtest/*.log || true
