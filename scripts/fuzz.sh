#!/usr/bin/env bash
# Builds the libFuzzer targets with clang 16 and runs each for FUZZ_SECONDS (default 30) on its
# seed corpus. Exit non-zero on the first crash, leak or sanitizer report.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-30}
B=build-fuzz
# clang 16 implements what libstdc++ 12's <expected> needs (P0848) but still reports
# __cpp_concepts 201907L, which hides std::expected; say what it implements.
cmake -S . -B $B -G Ninja -DCUBINRT_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-16 -DCMAKE_CXX_COMPILER=clang++-16 \
  -DCMAKE_CXX_FLAGS="-Wno-macro-redefined -D__cpp_concepts=202002L" >/dev/null
cmake --build $B
for t in cubin fatbin manifest bundle; do
  mkdir -p $B/corpus/$t
  echo "fuzz_$t: ${secs}s"
  if ! $B/fuzz/fuzz_$t -max_total_time="$secs" -max_len=262144 -rss_limit_mb=2048 -print_final_stats=1 \
      $B/corpus/$t $B/fuzz/seeds/$t >$B/fuzz_$t.log 2>&1; then
    tail -40 $B/fuzz_$t.log
    echo "fuzz_$t failed (log: $B/fuzz_$t.log)"
    exit 1
  fi
  grep -E "^(Done|stat::peak_rss_mb)" $B/fuzz_$t.log
done
echo "fuzz: all targets ran clean"
