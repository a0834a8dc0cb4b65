#!/bin/bash
# `make check` entry: a short bounded run of every fuzz target (5 s each,
# PXN_FUZZ_SECONDS overrides). Skips (77) without clang++ or libFuzzer.
exec bash "$(dirname "$0")/run.sh" "${PXN_FUZZ_SECONDS:-5}"
