#!/usr/bin/env bash
# Makes (or refreshes) a copy of a UCX install, so that another build of the
# module (sanitized, without CUDA) can be installed into a module directory
# of its own without replacing the normal one:
#
#   bash contrib/ucx_copy.sh <UCX prefix> <copy> [library to preload ...]
#
# UCX finds its modules next to libucs (lib/ucx). UCX's own programs in the
# copy (ucx_info, ucx_perftest) are wrapped so that they load the copy's
# libraries (and the given libraries first, e.g. sanitizer runtimes).
set -euo pipefail

ucx=$1
copy=$2
shift 2
stamp="preload=$*"
if [ -f "$copy/.pxn-copied" ] && [ "$(cat "$copy/.pxn-copied")" = "$stamp" ] &&
   [ ! "$ucx/lib/libucs.so" -nt "$copy/.pxn-copied" ]; then
    exit 0
fi
echo "[ucx-copy] copying $ucx to $copy" >&2
rm -rf "$copy"
cp -a "$ucx" "$copy"
# libtool archives and pkg-config files name their prefix.
find "$copy/lib" \( -name '*.la' -o -name '*.pc' \) -print0 |
    xargs -0 sed -i "s|$ucx|$copy|g"
rm -f "$copy/lib/ucx/libuct_pxn".* "$copy/lib/ucx/libuct_pxn"-* "$copy/lib/ucx/libpxn_transport"* \
      "$copy/bin/ucx_pxn_"* # its own build's
for program in ucx_info ucx_perftest; do
    mv "$copy/bin/$program" "$copy/bin/$program.real"
    cat > "$copy/bin/$program" <<WRAPPER
#!/bin/sh
# contrib/ucx_copy.sh: this copy's libraries (and the pxn module installed
# into it), not those of $ucx.
LD_LIBRARY_PATH="$copy/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" \\
LD_PRELOAD="$*\${LD_PRELOAD:+ \$LD_PRELOAD}" \\
exec "$copy/bin/$program.real" "\$@"
WRAPPER
    chmod +x "$copy/bin/$program"
done
echo "$stamp" > "$copy/.pxn-copied"
