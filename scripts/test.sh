#!/usr/bin/env bash
# The whole test suite: install what is missing, build, run every test (GPU tests report
# themselves skipped where there is no GPU), then the ASan+UBSan build of the suite, the
# real-toolchain corpus, the ThreadSanitizer build of the CPU tests and a short fuzz run of every
# parser. CUBINRT_QUICK=1 stops after the first ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
export PATH=$PATH:/usr/local/cuda/bin
jobs=$(nproc)
t0=$(date +%s)
# Line tables only (-g1): the sanitizers' and a crash's stack traces need no more, and full debug
# information took a quarter of the C++ compile time (this suite builds the C++ four times).
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" >/dev/null
cmake --build build -j "$jobs"
echo "build: $(( $(date +%s) - t0 )) s"
ctest --test-dir build --output-on-failure -j "$jobs"
# GPU tests (label gpu) report themselves skipped where no GPU answers; say why, once.
reason=$(build/tests/cubinrt_gpu_tests --gtest_filter=GpuRuntime.DefaultBundleLoadsEveryCompatibleEntry 2>&1 | grep -m1 "no GPU:" || true)
[[ -n $reason ]] && echo "GPU tests (ctest -L gpu) skipped: $reason"

# The Python package, against this build's installed library (its cubins are not compiled again):
# scikit-build-core and nanobind (pinned in python/pyproject.toml) come from PyPI into a venv.
# Its CPU tests run against a stand-in libcuda.so.1 (an emulated H200); test_gpu.py skips here.
t2=$(date +%s)
cmake --install build --prefix build/install >/dev/null
python3 -m venv build/pyenv
build/pyenv/bin/python -m pip install -q --disable-pip-version-check "./python[test]" -Ccmake.define.CUBINRT_PREFIX="$PWD/build/install"
(cd build && LD_LIBRARY_PATH="$PWD/tests/fake_libcuda" pyenv/bin/python -m unittest discover -s ../python/tests -v 2>&1 | tail -n 25)
(cd build && pyenv/bin/python -m unittest discover -s ../python/tests 2>&1 | tail -n 3)
echo "python package: $(( $(date +%s) - t2 )) s"
[[ ${CUBINRT_QUICK:-0} == 1 ]] && exit 0

t1=$(date +%s)
# The same cubins as the first build (same checkout): packed again, not compiled again.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCUBINRT_SANITIZE=ON -DCUBINRT_BUILD_BENCHMARKS=OFF \
  -DCUBINRT_REUSE_CUBINS_FROM="$PWD/build" >/dev/null
cmake --build build-asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs" -E install_and_consume
echo "asan+ubsan: $(( $(date +%s) - t1 )) s"

# The real-toolchain corpus (docs/corpus.md): every file read by both builds' cubin-manifest (the
# second under ASan+UBSan), compared with cuobjdump; pinned NVIDIA wheels come from PyPI.
t4=$(date +%s)
./scripts/corpus.sh build build-asan | grep -E "^(corpus|Corpus|Against|Entries)|UNEXPLAINED"
echo "corpus: $(( $(date +%s) - t4 )) s"

t3=$(date +%s)
# ThreadSanitizer over the CPU tests that start threads (cubinrt_tsan_tests: concurrent first
# use, 32 threads planning and launching on two emulated devices, lazy loading), all against the
# driver double (same cubins, packed again).
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCUBINRT_TSAN=ON -DCUBINRT_BUILD_BENCHMARKS=OFF \
  -DCUBINRT_REUSE_CUBINS_FROM="$PWD/build" >/dev/null
cmake --build build-tsan -j "$jobs" --target cubinrt_tsan_tests
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 build-tsan/tests/cubinrt_tsan_tests --gtest_brief=1
echo "tsan: $(( $(date +%s) - t3 )) s"

FUZZ_SECONDS=${FUZZ_SECONDS:-20} ./scripts/fuzz.sh
echo "test.sh: all passed in $(( $(date +%s) - t0 )) s"
