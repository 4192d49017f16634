#!/usr/bin/env bash
# Copies what a GPU run needs from the build folder into .device/ (git-ignored), to be carried.
set -euo pipefail
B=${1:-build}
mkdir -p .device
cp "$B/tests/cubinrt_gpu_tests" "$B/tools/cubin-manifest" "$B/tests/hd512_sm90.bundle" "$B/tests/test_copy.bundle" .device/
cp "$B/bench/cubinrt_bench" "$B/bench/bench_kernels.fatbin" .device/
strip .device/cubinrt_gpu_tests .device/cubin-manifest .device/cubinrt_bench
du -sh .device
