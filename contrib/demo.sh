#!/usr/bin/env bash
# The main job. Builds everything that is missing, then shows the pxn
# transport as UCX sees it. (The cross-rail transfer over an emulated rail
# topology replaces this once the relay exists.)
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$top/contrib/build.sh"
ucx=$(sed -n 's/^UCX_PREFIX = //p' "${PXN_BUILD_DIR:-$top/build}/Makefile")

echo "== ucx_info -d (pxn)"
"$ucx/bin/ucx_info" -d | awk '/Memory domain: pxn/{p=1} p&&/^# *Memory domain:/&&!/pxn/{p=0} p'
echo "== UCX_PXN_* settings"
"$ucx/bin/ucx_info" -c | grep '^UCX_PXN_'
