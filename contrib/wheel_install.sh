#!/usr/bin/env bash
# Installs pxn into the private UCX of an installed NIXL wheel (`pip install
# nixl`), the way NIXL's wheel build bundles UCX's own modules (NIXL's
# contrib/wheel_add_ucx_plugins.py): the module (libuct_pxn and the
# transport it opens, libpxn_transport) into <pkg>.libs/ucx/, named like the
# wheel's UCX modules, their NEEDED entries rewritten to the wheel's renamed
# UCX libraries (auditwheel: libucp-<hash>.so..., with --with-soname-suffix=S
# libucp-S-<hash>.so...), rpath $ORIGIN/..:$ORIGIN;
# the tools (ucx_pxn_relay, ucx_pxn_info) into <pkg>.libs/bin/, rpath
# $ORIGIN/.. . The files are added to the wheel's RECORD, so that
# `pip uninstall` removes them with the wheel.
#
#   bash contrib/wheel_install.sh [--build DIR] <site-packages>[/<pkg>.libs]
#   bash contrib/wheel_install.sh --uninstall <site-packages>[/<pkg>.libs]
#
# --build: the pxn build tree (default $PXN_BUILD_DIR, else build/), configured
# against a UCX of the wheel's version and soname suffix, with its internal
# headers (README, "Using the module with a UCX built elsewhere"; docs/nixl.md
# says how to get that UCX for a NIXL wheel).
#
# Refused, nothing installed (exit 1): a wheel whose UCX has another version
# (ucp_get_version() of the wheel's libucp) or another soname suffix than the
# build's UCX; then, once installed, the module is loaded through the wheel's
# own UCX (python3, ctypes): unless UCX lists the pxn component (the module's
# version guard also compares the exported API and build options:
# src/uct/pxn/pxn_version_guard.h), the files are removed again and the
# guard's message is printed. Needs patchelf and python3 (the wheel's).
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PXN_BUILD_DIR:-$top/build}
uninstall=no
target=
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --uninstall) uninstall=yes; shift ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    -*) echo "wheel_install: unknown option $1" >&2; exit 2 ;;
    *) target=$1; shift ;;
    esac
done
die() { echo "wheel_install: $*" >&2; exit 1; }
[ -n "$target" ] || die "usage: wheel_install.sh [--build DIR] [--uninstall] <site-packages>[/<pkg>.libs]"
[ -d "$target" ] || die "$target: no such directory"
target=$(cd "$target" && pwd)

# The wheel's library directory: <pkg>.libs holding libucp and ucx/.
has_ucx() { compgen -G "$1/libucp*.so*" >/dev/null && [ -d "$1/ucx" ]; }
if has_ucx "$target"; then
    libs=$target
else
    mapfile -t found < <(for d in "$target"/*.libs; do has_ucx "$d" && echo "$d"; done)
    [ "${#found[@]}" -eq 1 ] ||
        die "$target: expected one <pkg>.libs with libucp*.so* and ucx/ in it, found ${#found[@]}: ${found[*]:-none}"
    libs=${found[0]}
fi
site=$(dirname "$libs")
echo "[wheel] UCX of the wheel: $libs" >&2

# The wheel's UCX libraries: lib<x>[-S][-<hash>].so<ext>
lib_of() {
    local f
    for f in "$libs"/lib"$1".so* "$libs"/lib"$1"-*.so*; do
        [ -f "$f" ] && [ ! -L "$f" ] && { basename "$f"; return; }
    done
    return 0
}
ucs=$(lib_of ucs) ucp=$(lib_of ucp)
[ -n "$ucs" ] && [ -n "$ucp" ] || die "$libs: no libucs/libucp"
ucs_base=${ucs%%.so*}                             # libucs-nixl-1a2b3c4d
ucs_base=$(sed -E 's/-[0-9a-f]{8}$//' <<<"$ucs_base") # libucs-nixl
wheel_suffix=${ucs_base#libucs}                   # -nixl, or empty
ext=${ucs#*.}; ext=.$ext                          # .so.0.0.0: UCX's modules end alike

record_file() { # the RECORD of the distribution that owns $libs
    grep -l "^$(basename "$libs")/" "$site"/*.dist-info/RECORD 2>/dev/null | head -1
}

installed_files() {
    ls -d "$libs"/ucx/libuct_pxn*"$ext" "$libs"/ucx/libpxn_transport*"$ext" \
          "$libs"/bin/ucx_pxn_relay "$libs"/bin/ucx_pxn_info 2>/dev/null || true
}

if [ "$uninstall" = yes ]; then
    mapfile -t old < <(installed_files)
    rm -f "${old[@]}"
    rmdir "$libs/bin" 2>/dev/null || true
    rec=$(record_file)
    if [ -n "$rec" ]; then
        python3 - "$rec" "$(basename "$libs")" <<'EOF'
import sys
rec, libs = sys.argv[1], sys.argv[2]
lines = open(rec).read().splitlines(keepends=True)
drop = (libs + "/ucx/libuct_pxn", libs + "/ucx/libpxn_transport", libs + "/bin/ucx_pxn_")
open(rec, "w").writelines(l for l in lines if not l.startswith(drop))
EOF
    fi
    echo "[wheel] removed ${#old[@]} file(s)" >&2
    exit 0
fi

command -v patchelf >/dev/null || die "patchelf not found (pip install patchelf, or apt-get install patchelf)"
[ -f "$build/Makefile" ] || die "$build: not a configured pxn build tree (--build DIR)"
module_file=$(sed -n 's/^PXN_MODULE_FILE = //p' "$build/Makefile")
build_version=$(sed -n 's/^#define PXN_UCX_BUILT_VERSION "\(.*\)"/\1/p' "$build/pxn_ucx_build.h")
module=$(readlink -f "$build/.libs/$module_file" 2>/dev/null || true)
transport=$(readlink -f "$build/.libs/libpxn_transport${module_file#libuct_pxn}" 2>/dev/null || true)
[ -f "$module" ] && [ -f "$transport" ] ||
    die "$build/.libs/$module_file or its libpxn_transport: not built (make)"
for t in ucx_pxn_relay ucx_pxn_info; do
    [ -x "$build/src/tools/$t" ] || die "$build/src/tools/$t: not built (make)"
done
build_suffix=${module_file#libuct_pxn}; build_suffix=${build_suffix%.so.0}

# The wheel's UCX version, from its own libucp.
wheel_version=$(python3 "$top/contrib/ucx_query.py" "$libs/$ucp" | sed -n 's/^version: //p') ||
    die "could not load $libs/$ucp to read its version"
echo "[wheel] wheel's UCX $wheel_version (module suffix '${wheel_suffix}'), pxn built for UCX $build_version (suffix '${build_suffix}')" >&2
[ "$wheel_version" = "$build_version" ] ||
    die "the wheel's UCX is $wheel_version, pxn in $build was built for UCX $build_version: build pxn against UCX $wheel_version (docs/nixl.md)"
[ "$wheel_suffix" = "$build_suffix" ] ||
    die "the wheel's UCX libraries carry the soname suffix '${wheel_suffix#-}', the UCX pxn was built for '${build_suffix#-}': build pxn against a UCX configured like the wheel's (docs/nixl.md)"

# first_lib <regex>: the first file name in $libs that matches
first_lib() {
    local f
    for f in "$libs"/*; do
        [[ ${f##*/} =~ $1 ]] && { echo "${f##*/}"; return; }
    done
    return 0
}
# patch_needed <file>: NEEDED libuct-S.so.0 -> the wheel's libuct-S-<hash>.so...
patch_needed() {
    local f=$1 needed base renamed
    for needed in $(patchelf --print-needed "$f"); do
        base=${needed%%.so*}
        case $base in libuc[mpst]|libuc[mpst]-*) ;; *) continue ;; esac
        renamed=$(first_lib "^${base}-[0-9a-f]{8}\.so")
        [ -n "$renamed" ] || renamed=$(first_lib "^${base}\.so")
        [ -n "$renamed" ] || die "$f needs $needed: nothing like it in $libs"
        [ "$renamed" = "$needed" ] || patchelf --replace-needed "$needed" "$renamed" "$f"
    done
}
# prepend_rpath <file> <rpath>: as NIXL's script does, before what was there
prepend_rpath() {
    local old
    old=$(patchelf --print-rpath "$1")
    patchelf --set-rpath "$2${old:+:$old}" "$1"
}

dest_module="$libs/ucx/libuct_pxn${wheel_suffix}${ext}"
dest_transport="$libs/ucx/libpxn_transport${wheel_suffix}${ext}"
mkdir -p "$libs/bin"
install -m 755 "$module" "$dest_module"
install -m 755 "$transport" "$dest_transport"
for f in "$dest_module" "$dest_transport"; do
    patch_needed "$f"
    prepend_rpath "$f" '$ORIGIN/..:$ORIGIN'
done
for t in ucx_pxn_relay ucx_pxn_info; do
    install -m 755 "$build/src/tools/$t" "$libs/bin/$t"
    patch_needed "$libs/bin/$t"
    patchelf --set-rpath '$ORIGIN/..' "$libs/bin/$t"
done

# Loaded through the wheel's own UCX: does it list pxn? (libucp first, so
# that the module's guard sees the version; then UCT's component list.)
check=$(python3 "$top/contrib/ucx_query.py" "$libs/$ucp" "$libs/$(lib_of uct)" 2>&1) || true
if ! grep -q '^components:.* pxn\( \|$\)' <<<"$check"; then
    mapfile -t new < <(installed_files)
    rm -f "${new[@]}"
    rmdir "$libs/bin" 2>/dev/null || true
    die "the wheel's UCX did not register pxn; removed again. It said:
$check"
fi
echo "[wheel] $(grep "^components:" <<<"$check")" >&2

rec=$(record_file)
if [ -n "$rec" ]; then
    mapfile -t new < <(installed_files)
    python3 - "$rec" "$site" "${new[@]}" <<'EOF'
import base64, hashlib, os, sys
rec, site, files = sys.argv[1], sys.argv[2], sys.argv[3:]
rels = [os.path.relpath(f, site) for f in files]
lines = [l for l in open(rec).read().splitlines(keepends=True)
         if l.split(",", 1)[0] not in rels]
for f, rel in zip(files, rels):
    digest = base64.urlsafe_b64encode(hashlib.sha256(open(f, "rb").read()).digest())
    lines.append("%s,sha256=%s,%d\n" % (rel, digest.rstrip(b"=").decode(), os.path.getsize(f)))
open(rec, "w").writelines(lines)
EOF
    echo "[wheel] added to $(basename "$(dirname "$rec")")/RECORD" >&2
fi
echo "[wheel] installed $dest_module, $(basename "$dest_transport") and $libs/bin/ucx_pxn_{relay,info}" >&2
