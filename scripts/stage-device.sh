#!/usr/bin/env bash
# Copies what a GPU run needs from the build folder into .device/ (git-ignored), to be carried.
set -euo pipefail
B=${1:-build}
mkdir -p .device
cp "$B/tests/cubinrt_gpu_tests" "$B/tests/cubinrt_multi_gpu_tests" "$B/tools/cubin-manifest" "$B/tests/hd512_sm90.bundle" "$B/tests/e2m1_cvt_sm90.bundle" "$B/tests/test_copy.bundle" .device/
cp "$B/bench/cubinrt_bench" "$B/bench/bench_kernels.fatbin" "$B/tests/probe/probe.sm_90.cubin" .device/
strip .device/cubinrt_gpu_tests .device/cubinrt_multi_gpu_tests .device/cubin-manifest .device/cubinrt_bench
# The C ABI consumers and the shared library they load; the Python package as a cp312 wheel (the
# GPU machine's python3 is 3.12) built against this build's installed library.
mkdir -p .device/lib .device/wheels
cp "$B/tests/install_test/consumer/consumer_c" "$B/tests/install_test/consumer/consumer_cpp17" .device/
cp -P "$B"/tests/install_test/prefix/lib/libcubinrt.so* .device/lib/
rm -f .device/wheels/*.whl
${PYTHON312:-/root/.pyenv/versions/3.12.1/bin/python} -m pip wheel -q --no-deps -w .device/wheels ./python \
  -Ccmake.define.CUBINRT_PREFIX="$PWD/$B/tests/install_test/prefix" -Cbuild-dir=build/py312
du -sh .device
