#!/usr/bin/env bash
# Installs what ucx-pxn builds against, on Debian 12 as root:
#   - build tools and libraries from Debian's archive (prometheus-cpp for
#     the metrics, python3-prometheus-client for their tests);
#   - UCX 1.13.1 from Debian's *source* package, built with CUDA (when a
#     toolkit is present), verbs, mlx5dv and rdmacm, with `pxn` added to its
#     compiled-in UCT module list;
#   - Debian's binary libucx0 (a stock UCX without pxn), unpacked, not
#     installed, for the LD_PRELOAD test.
# Idempotent: a second run with an unchanged configuration takes seconds.
#
# Environment:
#   PXN_DEPS_DIR   where everything goes (default: <repo>/.deps, git-ignored)
#   PXN_CUDA_DIR   CUDA toolkit (default: /usr/local/cuda if it has nvcc);
#                  "no" builds UCX without CUDA
#   PXN_JOBS       parallel make jobs (default: nproc)
#   PXN_UCX_FLAGS  more UCX configure flags, e.g. --enable-stats
#                  (contrib/stats.sh; use another PXN_DEPS_DIR for them)
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deps=${PXN_DEPS_DIR:-$top/.deps}
jobs=${PXN_JOBS:-$(nproc)}
ucx_version=1.13.1-1
ucx_upstream=1.13.1

log() { printf '[deps] %s\n' "$*" >&2; }
die() { printf '[deps] error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (installs Debian packages)"
command -v apt-get >/dev/null || die "apt-get not found: this script targets Debian 12"

# --- Debian packages -------------------------------------------------------
pkgs=(build-essential autoconf automake libtool pkg-config dpkg-dev
      libibverbs-dev librdmacm-dev libnuma-dev libgtest-dev valgrind
      iproute2 clang libclang-rt-dev procps psmisc
      prometheus-cpp-dev python3-prometheus-client openmpi-bin libopenmpi-dev)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' \
        || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- CUDA ------------------------------------------------------------------
cuda_dir=${PXN_CUDA_DIR:-}
if [ -z "$cuda_dir" ]; then
    if [ -x /usr/local/cuda/bin/nvcc ]; then cuda_dir=/usr/local/cuda; else cuda_dir=no; fi
fi
[ "$cuda_dir" = no ] || [ -f "$cuda_dir/include/cuda.h" ] \
    || die "PXN_CUDA_DIR=$cuda_dir has no include/cuda.h"

# --- UCX configuration and cache stamp -------------------------------------
# Debian's own flags (debian/rules) so that struct layouts match libucx0,
# plus CUDA, mlx5dv and rdmacm.
ucx_flags=(--enable-mt --with-verbs --with-mlx5-dv --with-rdmacm --enable-cma
           --disable-backtrace-detail --enable-devel-headers
           --without-java --without-go --disable-doxygen-doc)
if [ "$cuda_dir" != no ]; then
    ucx_flags+=(--with-cuda="$cuda_dir")
else
    ucx_flags+=(--without-cuda)
fi
# shellcheck disable=SC2206
ucx_flags+=(${PXN_UCX_FLAGS:-})
stamp_text="ucx=$ucx_version modules=+pxn flags=${ucx_flags[*]} script=3"
src=$deps/src/ucx-$ucx_upstream
prefix=$deps/ucx
stamp=$prefix/.pxn-build-stamp

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$stamp_text" ] \
   && [ -x "$prefix/bin/ucx_info" ] && [ -d "$deps/stock/lib" ]; then
    log "UCX $ucx_version up to date in $prefix"
    exit 0
fi

# --- A private apt configuration with source packages and non-free ---------
# The archive URIs come from the machine's own apt configuration, so no host
# name is written anywhere; the system's apt configuration is not changed.
apt_dir=$deps/apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
apt-get indextargets --format '$(REPO_URI) $(RELEASE)' | sort -u |
while read -r uri release; do
    for type in deb deb-src; do
        echo "$type [signed-by=$keyring] $uri $release main contrib non-free"
    done
done > "$apt_dir/sources.list"
[ -s "$apt_dir/sources.list" ] || die "no Debian archive found in apt's configuration"
apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list"
          -o "Dir::Etc::SourceParts=/nonexistent"
          -o "Dir::State::Lists=$apt_dir/lists"
          -o "Dir::Cache=$apt_dir/cache"
          -o "APT::Sandbox::User=root")
log "updating private package lists"
apt-get "${apt_opts[@]}" update -q >/dev/null

fetch_deb() { # name -> path of the downloaded .deb in $deps/debs
    mkdir -p "$deps/debs"
    (cd "$deps/debs" && apt-get "${apt_opts[@]}" download -q "$1" >/dev/null)
    ls -t "$deps/debs/$1"_*.deb | head -1
}

# --- NVML header and link-time library (never installed) -------------------
ucx_cppflags=""
ucx_ldflags=""
if [ "$cuda_dir" != no ]; then
    nvml=$deps/nvml
    if [ ! -f "$nvml/lib/libnvidia-ml.so" ]; then
        log "extracting NVML header and link library"
        rm -rf "$nvml"; mkdir -p "$nvml/lib"
        dpkg -x "$(fetch_deb libnvidia-ml-dev)" "$nvml/root"
        dpkg -x "$(fetch_deb libnvidia-ml1)" "$nvml/root"
        so=$(find "$nvml/root" -name 'libnvidia-ml.so.1*' -type f -o -name 'libnvidia-ml.so.1' -type l | head -1)
        [ -n "$so" ] || die "libnvidia-ml.so.1 not found in libnvidia-ml1"
        cp -L "$so" "$nvml/lib/libnvidia-ml.so"
        hdr=$(find "$nvml/root" -name nvml.h | head -1)
        [ -n "$hdr" ] || die "nvml.h not found in libnvidia-ml-dev"
        mkdir -p "$nvml/include"; cp "$hdr" "$nvml/include/"
    fi
    ucx_cppflags="-I$nvml/include"
    # -L only: the library is found at link time, never at run time.
    ucx_ldflags="-L$nvml/lib"
fi

# --- Stock UCX (Debian's binary package) ------------------------------------
if [ ! -d "$deps/stock/lib" ]; then
    log "unpacking Debian's libucx0 as the stock UCX"
    rm -rf "$deps/stock"; mkdir -p "$deps/stock/root"
    dpkg -x "$(fetch_deb libucx0)" "$deps/stock/root"
    dpkg -x "$(fetch_deb ucx-utils)" "$deps/stock/root"
    ln -s root/usr/lib/x86_64-linux-gnu "$deps/stock/lib"
    ln -s root/usr/bin "$deps/stock/bin"
fi

# --- UCX source ------------------------------------------------------------
if [ ! -f "$src/.pxn-extracted" ]; then
    log "fetching Debian source package ucx $ucx_version"
    rm -rf "$deps/src"; mkdir -p "$deps/src"
    (cd "$deps/src" && apt-get "${apt_opts[@]}" source -q --download-only "ucx=$ucx_version" >/dev/null \
        && dpkg-source -x "ucx_$ucx_version.dsc" >/dev/null 2>&1)
    # apt checked the files against the archive's signed index; dpkg-source
    # only warns that it has no key for the maintainer's own signature.
    # autogen needs the upstream packaging templates beside Debian's.
    cp -rn "$src/debian.upstream/." "$src/debian/"
    touch "$src/.pxn-extracted"
fi

# --- Build (in the source tree: internal headers and config.h side by side) --
log "building UCX $ucx_version (${ucx_flags[*]})"
cd "$src"
[ -x configure ] || ./autogen.sh >"$deps/ucx-autogen.log" 2>&1 \
    || die "autogen failed, see $deps/ucx-autogen.log"
[ ! -f Makefile ] || make distclean >/dev/null 2>&1 || true
: >"$deps/ucx-make.log"
./configure --prefix="$prefix" "${ucx_flags[@]}" \
    CPPFLAGS="$ucx_cppflags" LDFLAGS="$ucx_ldflags" \
    >"$deps/ucx-configure.log" 2>&1 || die "configure failed, see $deps/ucx-configure.log"
if [ "$cuda_dir" != no ]; then
    grep -q '^#define HAVE_CUDA 1' config.h || die "UCX configured without CUDA, see $deps/ucx-configure.log"
fi
# Let every UCX tool load libuct_pxn.so.0 from the module directory.
grep -q '^#define uct_MODULES ".*:pxn' config.h || \
    sed -i 's/^#define uct_MODULES "\(.*\)"$/#define uct_MODULES "\1:pxn"/' config.h
grep -q '^#define uct_MODULES ".*:pxn' config.h || die "could not add pxn to uct_MODULES"
# src/ only: the test apps do not compile against CUDA 13.
ucx_dirs=(src/ucm src/ucs src/uct src/ucp src/tools/vfs src/tools/info src/tools/perf)
for d in "${ucx_dirs[@]}"; do
    make -C "$d" -j"$jobs" >>"$deps/ucx-make.log" 2>&1 || die "make in $d failed, see $deps/ucx-make.log"
done
rm -rf "$prefix"
for d in "${ucx_dirs[@]}"; do
    make -C "$d" install >>"$deps/ucx-make.log" 2>&1 || die "make install in $d failed, see $deps/ucx-make.log"
done
make install-pkgconfigDATA >>"$deps/ucx-make.log" 2>&1 || die "installing ucx.pc failed"
echo "$stamp_text" > "$stamp"
log "UCX installed in $prefix ($(grep '^#define uct_MODULES' config.h))"
