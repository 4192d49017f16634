#!/usr/bin/env bash
# Builds the libFuzzer targets with clang 16 and runs each for FUZZ_SECONDS (default 30) on its
# seed corpus. Exit non-zero on the first crash, leak or sanitizer report.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-30}
B=build-fuzz
# clang 16 implements what libstdc++ 12's <expected> needs (P0848) but still reports
# __cpp_concepts 201907L, which hides std::expected; say what it implements.
# Line tables only: enough for the sanitizers' reports, and a seventh of the compile time less.
cmake -S . -B $B -G Ninja -DCUBINRT_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
  -DCMAKE_C_COMPILER=clang-16 -DCMAKE_CXX_COMPILER=clang++-16 \
  -DCMAKE_CXX_FLAGS="-Wno-macro-redefined -D__cpp_concepts=202002L" >/dev/null
cmake --build $B
# Seeds from the real-toolchain corpus too (scripts/corpus.sh: ptxas 12.9 and 13.5 cubins, objects,
# fatbins), where it was made; files up to the fuzzers' 256 KiB.
mkdir -p $B/seeds-corpus/cubin $B/seeds-corpus/fatbin $B/seeds-corpus/manifest $B/seeds-corpus/bundle
if [[ -d build/corpus/files ]]; then
  find build/corpus/files -maxdepth 1 -type f -name '*.cubin' -size -256k -exec cp {} $B/seeds-corpus/cubin/ \;
  find build/corpus/files -maxdepth 1 -type f \( -name '*.fatbin' -o -name '*.o' \) -size -256k -exec cp {} $B/seeds-corpus/fatbin/ \;
fi
for t in cubin fatbin manifest bundle; do
  mkdir -p $B/corpus/$t
  echo "fuzz_$t: ${secs}s, seeds: $(find $B/fuzz/seeds/$t $B/seeds-corpus/$t -type f | wc -l)"
  if ! $B/fuzz/fuzz_$t -max_total_time="$secs" -max_len=262144 -rss_limit_mb=2048 -print_final_stats=1 \
      $B/corpus/$t $B/fuzz/seeds/$t $B/seeds-corpus/$t >$B/fuzz_$t.log 2>&1; then
    tail -40 $B/fuzz_$t.log
    echo "fuzz_$t failed (log: $B/fuzz_$t.log)"
    exit 1
  fi
  grep -E "^(Done|stat::peak_rss_mb)" $B/fuzz_$t.log
done
echo "fuzz: all targets ran clean"
