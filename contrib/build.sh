#!/usr/bin/env bash
# Builds ucx-pxn (and, first, everything it depends on) and installs the
# module into the UCX install's module directory. Idempotent.
#
# Environment: PXN_BUILD_DIR (default <repo>/build), PXN_CONFIGURE_FLAGS
# (extra configure flags), CXXFLAGS, LDFLAGS and LIBS (for configure; a
# change configures again), plus contrib/deps.sh's variables.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PXN_BUILD_DIR:-$top/build}
jobs=${PXN_JOBS:-$(nproc)}

bash "$top/contrib/deps.sh"

cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt Makefile.in ]; then
    echo "[build] autogen" >&2
    ./autogen.sh >/dev/null 2>&1 || { ./autogen.sh; exit 1; }
fi
mkdir -p "$build"
cd "$build"
stamp="configure ${PXN_CONFIGURE_FLAGS:-} CXXFLAGS=${CXXFLAGS:-} LDFLAGS=${LDFLAGS:-} LIBS=${LIBS:-}"
if [ ! -f Makefile ] || [ "$top/configure" -nt Makefile ] || [ "$(cat .pxn-configure 2>/dev/null)" != "$stamp" ]; then
    echo "[build] configure ${PXN_CONFIGURE_FLAGS:-}" >&2
    # shellcheck disable=SC2086
    "$top/configure" ${PXN_CONFIGURE_FLAGS:-} >configure.out 2>&1 || { cat configure.out; exit 1; }
    echo "$stamp" > .pxn-configure
fi
echo "[build] make" >&2
make -j"$jobs" all >make.out 2>&1 || { cat make.out; exit 1; }
make install >install.out 2>&1 || { cat install.out; exit 1; }
echo "[build] module installed: $(sed -n 's/^UCX_MODULEDIR = //p' Makefile)/$(sed -n 's/^PXN_MODULE_FILE = //p' Makefile)" >&2
