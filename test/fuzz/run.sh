#!/bin/bash
#
# Builds the libFuzzer targets of test/fuzz with clang++ (ASan + UBSan,
# straight from the sources, no automake; the route target links UCX's
# libucs for pxn's logging) and runs each for a bounded time.
#
# Usage: test/fuzz/run.sh [SECONDS_PER_TARGET [TARGET...]]
#   SECONDS_PER_TARGET  default 10
#   TARGET              descriptor, rail_map, route (default: all)
# Environment:
#   UCX_PREFIX      UCX install whose include/ has ucs/type/status.h; default:
#                   the `UCX_PREFIX =` line of $PXN_BUILDDIR/Makefile, else
#                   <source>/.deps/ucx
#   PXN_BUILDDIR    build tree (default: the current directory)
#   FUZZ_BUILD_DIR  objects, corpora and findings
#                   (default: $PXN_BUILDDIR/test/fuzz/build)
#   CLANGXX         default: clang++, else clang++-14
#
# Exit status: 0 no finding; 1 a finding or a build error (the crashing
# input is under $FUZZ_BUILD_DIR/artifacts/); 77 clang++ or its libFuzzer
# runtime is missing (automake: skipped).
set -eu

seconds=${1:-10}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(descriptor rail_map route)

srcdir=$(cd "$(dirname "$0")/../.." && pwd)
builddir=${PXN_BUILDDIR:-$PWD}
fuzzdir=${FUZZ_BUILD_DIR:-$builddir/test/fuzz/build}

if [ -z "${UCX_PREFIX:-}" ] && [ -f "$builddir/Makefile" ]; then
    UCX_PREFIX=$(sed -n 's/^UCX_PREFIX = //p' "$builddir/Makefile" | head -n 1)
fi
UCX_PREFIX=${UCX_PREFIX:-$srcdir/.deps/ucx}
if [ ! -f "$UCX_PREFIX/include/ucs/type/status.h" ]; then
    echo "fuzz: no UCX headers under $UCX_PREFIX (set UCX_PREFIX)" >&2
    exit 1
fi

cxx=${CLANGXX:-}
if [ -z "$cxx" ]; then
    for candidate in clang++ clang++-14; do
        if command -v "$candidate" >/dev/null 2>&1; then
            cxx=$candidate
            break
        fi
    done
fi
if [ -z "$cxx" ]; then
    echo "fuzz: SKIP: clang++ not found (apt-get install clang)" >&2
    exit 77
fi

mkdir -p "$fuzzdir/artifacts"
probe="$fuzzdir/probe"
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char *, unsigned long) { return 0; }' \
    > "$probe.cc"
if ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe.cc" -o "$probe" \
        >"$probe.log" 2>&1; then
    echo "fuzz: SKIP: $cxx cannot link -fsanitize=fuzzer,address,undefined" \
         "(libFuzzer runtime missing?):" >&2
    cat "$probe.log" >&2
    exit 77
fi

cxxflags=(-std=c++17 -g -O1 -Wall -Wextra -Werror
          -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
          -I "$srcdir/src" -I "$UCX_PREFIX/include")
core="$srcdir/src/ucs/pxn"

build() {
    local name=$1
    shift
    echo "fuzz: building fuzz_$name"
    "$cxx" "${cxxflags[@]}" "$@" -o "$fuzzdir/fuzz_$name"
}

status=0
for target in "${targets[@]}"; do
    corpus="$fuzzdir/corpus/$target"
    mkdir -p "$corpus"
    extra=()
    case $target in
    descriptor)
        build descriptor "$srcdir/test/fuzz/fuzz_descriptor.cc" \
              "$core/descriptor.cc" "$core/slicer.cc"
        # Seeds come from the target's own writer, so they follow its format.
        "$cxx" -std=c++17 -O1 -DPXN_FUZZ_SEED_WRITER \
               -I "$srcdir/src" -I "$UCX_PREFIX/include" \
               "$srcdir/test/fuzz/fuzz_descriptor.cc" "$core/descriptor.cc" \
               "$core/slicer.cc" -o "$fuzzdir/seed_writer"
        "$fuzzdir/seed_writer" "$corpus"
        extra=(-max_len=1200)
        ;;
    route)
        build route "$srcdir/test/fuzz/fuzz_route.cc" "$core/route_codec.cc" \
              "$core/am_frame.cc" \
              "$srcdir/src/uct/pxn/pxn_relay_routes.cc" \
              -L "$UCX_PREFIX/lib" -Wl,-rpath,"$UCX_PREFIX/lib" -lucs
        extra=(-max_len=4096)
        ;;
    rail_map)
        build rail_map "$srcdir/test/fuzz/fuzz_rail_map.cc" "$core/rail_map.cc"
        extra=(-max_len=512 "-dict=$srcdir/test/fuzz/rail_map.dict"
               "$srcdir/test/fuzz/corpus/rail_map")
        ;;
    *)
        echo "fuzz: unknown target '$target'" >&2
        exit 1
        ;;
    esac

    # libFuzzer's own exit code for a finding is 77, which automake would
    # read as "skipped": make every finding exit 1.
    echo "fuzz: running fuzz_$target for ${seconds}s"
    if "$fuzzdir/fuzz_$target" -max_total_time="$seconds" -timeout=10 \
            -rss_limit_mb=2048 -error_exitcode=1 -timeout_exitcode=1 \
            -print_final_stats=1 \
            -artifact_prefix="$fuzzdir/artifacts/$target-" \
            "$corpus" "${extra[@]}" \
            >"$fuzzdir/$target.log" 2>&1; then
        grep -E '^stat::(number_of_executed_units|new_units_added)|^Done ' \
             "$fuzzdir/$target.log" || true
        echo "fuzz: fuzz_$target: no finding"
    else
        tail -n 40 "$fuzzdir/$target.log"
        echo "fuzz: fuzz_$target: FINDING (log $fuzzdir/$target.log," \
             "inputs $fuzzdir/artifacts/)" >&2
        status=1
    fi
done
exit $status
