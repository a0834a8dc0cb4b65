#!/usr/bin/env bash
# Packs an installed NIXL (nixlbench and its UCX plugin), the UCX install it
# runs on (with the pxn module built against it, CUDA included) and the
# shared libraries they need beyond the C/C++ runtime into gpu-carry-nixl/
# (git-ignored), stripped, for contrib/gpu/nixl.sh on the GPU machine.
# Builds nothing.
#
#   NIXL_PREFIX=/opt/nixl NIXL_UCX=/opt/ucx-1.22 bash contrib/gpu/nixl_pack.sh
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$top/gpu-carry-nixl
: "${NIXL_PREFIX:?the prefix of an installed NIXL with nixlbench}"
: "${NIXL_UCX:?the UCX install NIXL runs on, with libuct_pxn.so in lib/ucx}"
nixlbench=${NIXLBENCH:-$NIXL_PREFIX/bin/nixlbench}
libdir=$(dirname "$(find "$NIXL_PREFIX" -name libnixl.so -print -quit)")
[ -f "$libdir/plugins/libplugin_UCX.so" ] || { echo "no UCX plugin in $libdir/plugins" >&2; exit 1; }
[ -f "$NIXL_UCX/lib/ucx/libuct_pxn.so.0" ] || { echo "no pxn module in $NIXL_UCX/lib/ucx" >&2; exit 1; }

rm -rf "$out"
mkdir -p "$out/nixl/lib/plugins" "$out/nixl/bin" "$out/ucx/lib/ucx" "$out/ucx/bin" "$out/lib"
cp -L "$nixlbench" "$out/nixl/bin/"
for f in "$libdir"/lib*.so; do cp -L "$f" "$out/nixl/lib/"; done
cp -L "$libdir/plugins/libplugin_UCX.so" "$out/nixl/lib/plugins/"
for lib in ucs uct ucp ucm; do cp -L "$NIXL_UCX/lib/lib$lib.so.0" "$out/ucx/lib/"; done
# the modules this check uses: cma and cuda (cuda_copy, cuda_ipc), pxn, ucm's cuda hooks
for m in uct_cma uct_cuda uct_pxn pxn_transport ucm_cuda; do cp -L "$NIXL_UCX/lib/ucx/lib$m.so.0" "$out/ucx/lib/ucx/"; done
for p in ucx_info ucx_pxn_relay ucx_pxn_info; do
    src=$NIXL_UCX/bin/$p
    [ -x "$src.real" ] && src=$src.real # a contrib/ucx_copy.sh copy
    cp -L "$src" "$out/ucx/bin/$p"
done

# Shared libraries outside the C/C++ runtime and the driver, as this
# machine resolves them (abseil, gflags, numa, ...).
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libstdc\+\+|libgcc_s|libcuda\.|libnvidia-ml|libucs|libuct|libucp|libucm|libnixl|libserdes|libstream|libfile_utils)'
find "$out" -type f \( -name '*.so*' -o -perm -u+x \) -print0 |
    xargs -0 ldd 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
    while read -r name path; do
        [[ $name =~ $skip ]] || cp -Ln "$path" "$out/lib/$name"
    done
cp -Ln /usr/local/cuda/lib64/libcudart.so.13 "$out/lib/" 2>/dev/null || true
find "$out" -type f \( -name '*.so*' -o -perm -u+x \) -exec strip --strip-unneeded {} + 2>/dev/null || true
du -sh "$out"
