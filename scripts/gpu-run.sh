#!/usr/bin/env bash
# Runs on the lent GPU machine (the `device` tool), from the repository root, with the binaries
# built here staged in .device/ (scripts/stage-device.sh). Writes logs under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/cubinrt-out}
mkdir -p "$OUT"
D=.device
export CUBINRT_TEST_HD512_BUNDLE=$PWD/$D/hd512_sm90.bundle
export CUBINRT_TEST_E2M1_CVT_BUNDLE=$PWD/$D/e2m1_cvt_sm90.bundle
export CUBINRT_TEST_COPY_BUNDLE=$PWD/$D/test_copy.bundle
export CUBINRT_TEST_PROBE_SM90=$PWD/$D/probe.sm_90.cubin
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  nvidia-smi topo -m
  uname -r
} 2>&1 | tee "$OUT/machine.txt"
rc=0
for step in "$@"; do
  case "$step" in
    tests)
      CUBINRT_REPORT=$OUT/accuracy.md ./$D/cubinrt_gpu_tests 2>&1 | tee "$OUT/gpu_tests.log"; rc=$((rc | PIPESTATUS[0])) ;;
    multigpu)  # every GPU of the host from one process: 32 threads at first use (lazy and eager), the
      # cross-device refusals, the self-check on each device; then the big-batch decode on each
      # GPU alone and on all at once
      ./$D/cubinrt_multi_gpu_tests 2>&1 | tee "$OUT/multi_gpu_tests.log"; rc=$((rc | PIPESTATUS[0]))
      CUBINRT_BENCH_MD=$OUT/devices.md ./$D/cubinrt_bench --devices 2>&1 | tee "$OUT/devices.log"; rc=$((rc | PIPESTATUS[0])) ;;
    selfcheck)
      ./$D/cubin-manifest selfcheck 2>&1 | tee "$OUT/selfcheck.log"; rc=$((rc | PIPESTATUS[0]))
      ./$D/cubin-manifest selfcheck --quick 2>&1 | tee -a "$OUT/selfcheck.log"; rc=$((rc | PIPESTATUS[0])) ;;
    bench)
      # e5m2 beside e4m3: issue 18 asks both FP8 encodings at the memory limit
      CUBINRT_BENCH_MD=$OUT/bench.md ./$D/cubinrt_bench --e5m2 2>&1 | tee "$OUT/bench.log"; rc=$((rc | PIPESTATUS[0])) ;;
    experiments)  # kernel variants from bench/experiments/build.sh, timed like the default
      for b in $D/*.bundle; do
        [[ $(basename "$b") == hd512_sm90.bundle || $(basename "$b") == e2m1_cvt_sm90.bundle || $(basename "$b") == test_copy.bundle || $(basename "$b") == trace* ]] && continue
        echo "== experiment $(basename "$b" .bundle)"
        ./$D/cubinrt_bench --quick --only "${EXP_ONLY:-}" --bundle "$b" 2>&1; rc=$((rc | $?))
        CUBINRT_TEST_BUNDLE=$b ./$D/cubinrt_gpu_tests --gtest_filter='GpuDecode.EverySelected*' 2>&1 | grep -E "^\||OK|FAILED"; rc=$((rc | PIPESTATUS[0]))
      done 2>&1 | tee "$OUT/experiments.log" ;;
    hd512)  # head_dim 512's sm_90 twin (the test bundle), issue 18's proxy shapes
      CUBINRT_BENCH_MD=$OUT/hd512.md ./$D/cubinrt_bench --quick --only D512 --bundle $D/hd512_sm90.bundle 2>&1 | tee "$OUT/hd512.log"; rc=$((rc | PIPESTATUS[0])) ;;
    grid)  # the regression table: batch x tokens, bf16 and FP8, KV TB/s over the copy ceiling
      CUBINRT_BENCH_MD=$OUT/grid.md ./$D/cubinrt_bench --quick --grid 2>&1 | tee "$OUT/grid.log"; rc=$((rc | PIPESTATUS[0])) ;;
    append)  # kv_append: 64 and 8192 tokens into bf16, FP8 and NVFP4 caches, against the copy ceiling
      CUBINRT_BENCH_MD=$OUT/append.md ./$D/cubinrt_bench --quick --append 2>&1 | tee "$OUT/append.log"; rc=$((rc | PIPESTATUS[0])) ;;
    nvfp4)  # NVFP4 KV beside bf16 and FP8 (issue 17's shapes): KV bytes (codes and scales) over the copy ceiling
      for only in "B64 L8192 32q/8kv D128 p16" "B1 L32768 32q/8kv D128 p16" "B64 L8192 16q/8kv D256 p16" "B64 L8192 64q/8kv D128 p16" "B64 L8192 128q/8kv D128 p16"; do
        ./$D/cubinrt_bench --quick --nvfp4 --only "$only" 2>&1; rc=$((rc | $?))
      done 2>&1 | tee "$OUT/nvfp4.log" ;;
    vsf)  # NVFP4 with V scales in TensorRT-LLM's interleave (the SM100-only readers' sm_90 builds, test bundle)
      # against the linear-order kernels of the default bundle, on the shapes both have (page 16, bf16 q)
      for only in "B64 L8192 32q/8kv D128 p16" "B1 L32768 32q/8kv D128 p16" "B64 L8192 16q/8kv D256 p16" "B16 L8192 32q/4kv D512 p16"; do
        linear=(); [[ $only == *D512* ]] && linear=(--bundle $D/hd512_sm90.bundle)  # head_dim 512's linear reader: the test bundle's too
        ./$D/cubinrt_bench --quick --nvfp4 --only "$only" "${linear[@]}" 2>&1 | grep -E "^\| B.*nvfp4"; rc=$((rc | PIPESTATUS[0]))
        ./$D/cubinrt_bench --quick --nvfp4 --only "$only" --bundle $D/hd512_sm90.bundle --v-sf-order interleaved4 2>&1 | grep -E "^\| B.*nvfp4|interleave"; rc=$((rc | PIPESTATUS[0]))
      done 2>&1 | tee "$OUT/vsf.log" ;;
    replay)  # small batches under CUDA-graph replay, against a bare launch replayed the same way
      CUBINRT_BENCH_MD=$OUT/replay.md ./$D/cubinrt_bench --quick --replay 2>&1 | tee "$OUT/replay.log"; rc=$((rc | PIPESTATUS[0])) ;;
    overlap)  # decode per launch, back to back, overlapping the launch before and in plain stream order,
      # alternating twice; $OVERLAP_ONLY (';'-separated names) picks the shapes
      IFS=';' read -ra shapes <<< "${OVERLAP_ONLY:-B1 L128 ;B1 L32768;B4 L32768;B1 L131072;B64 L8192 32q/8kv D128;B64 L8192 128q/8kv}"
      for i in 1 2; do for mode in allow never; do for shape in "${shapes[@]}"; do
        ./$D/cubinrt_bench --quick --overlap $mode --only "$shape" 2>&1 | grep -E "^\| B|Decode launches"; rc=$((rc | PIPESTATUS[0]))
      done; done; done 2>&1 | tee "$OUT/overlap.log" ;;
    sweep)  # small batches and short sequences: the planner's merge against the workspace's
      CUBINRT_BENCH_MD=$OUT/sweep.md ./$D/cubinrt_bench --quick --sweep 2>&1 | tee "$OUT/sweep.log"; rc=$((rc | PIPESTATUS[0])) ;;
    trace)  # kernels built with -DCUBINRT_TRACE=128 ($D/trace*.bundle): where B1 L128's time goes
      for b in $D/trace*.bundle; do
        echo "== trace $(basename "$b" .bundle)"
        raw=/tmp/$(basename "$b" .bundle).txt  # thousands of lines: not brought back
        ./$D/cubinrt_bench --quick --only "B1 L128 32q/8kv D128 p16" --bundle "$b" > "$raw" 2>&1; rc=$((rc | $?))
        grep -v '^TRACE' "$raw"
        python3 bench/experiments/trace_summary.py "$raw"; rc=$((rc | $?))
      done 2>&1 | tee "$OUT/trace.log" ;;
    ncu)  # hardware counters of one B64 D128 FP8 launch: the default bundle, then each of $NCU_BUNDLES
      for b in default ${NCU_BUNDLES:-}; do
        echo "== ncu $b"
        ncu --clock-control none --kernel-name regex:hd128_bf16_fp8 --launch-skip 5 --launch-count 1 \
          --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats \
          ./$D/cubinrt_bench --quick $([[ $b == default ]] || echo --bundle "$b") 2>&1 | grep -v '^|'
      done 2>&1 | tee "$OUT/ncu.log" ;;
    dram)  # KV bytes the kernel reads from DRAM (Nsight Compute) against the minimum, per shape of
      # $DRAM_SHAPES (default: the head-group shapes), bf16 and FP8, one launch each after warm-up
      IFS=';' read -ra shapes <<< "${DRAM_SHAPES:-B64 L8192 32q/8kv D128;B64 L8192 64q/8kv D128;B64 L8192 128q/8kv D128;B64 L8192 64q/4kv D128;B64 L8192 32q/1kv D128;B64 L8192 32q/4kv D256}"
      for shape in "${shapes[@]}"; do for kv in bf16_bf16 bf16_fp8_e4m3; do
        echo "== dram $shape $kv"
        ncu --metrics dram__bytes_read.sum,gpu__time_duration.sum --kernel-name "regex:paged_decode_(g16_)?hd.*_${kv}_p16" --launch-skip 3 --launch-count 1 \
          ./$D/cubinrt_bench --quick --only "$shape" 2>&1 | grep -E "dram__bytes_read|gpu__time_duration|==ERR|error"
      done; done 2>&1 | tee "$OUT/dram.log" ;;
    versus)  # bf16 rows against PyTorch, alternating, $VERSUS_REPS (3) times each: the run-to-run
      # spread; $VERSUS_ONLY (default the B64 shapes) picks the shapes by name
      only=${VERSUS_ONLY:-B64 L8192}
      for i in $(seq "${VERSUS_REPS:-3}"); do
        ./$D/cubinrt_bench --quick --only "$only" 2>&1 | grep -E "\| bf16 \||read band"
        python3 bench/sdpa_baseline.py --only "$only" 2>&1 | grep -E "flash|cudnn"
      done 2>&1 | tee "$OUT/versus.log" ;;
    python)  # the Python package (a cp312 wheel staged in $D/wheels) with torch: layouts, graph capture,
      # the vLLM-style example, host overhead per call
      python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/cubinrt-site $D/wheels/cubinrt-*.whl; rc=$((rc | $?))
      PYTHONPATH=/tmp/cubinrt-site CUBINRT_OVERHEAD=$OUT/overhead.md PYTHONUNBUFFERED=1 \
        python3 -m unittest discover -s python/tests -v 2>&1 | tee "$OUT/python.log"; rc=$((rc | PIPESTATUS[0])) ;;
    consumers)  # the C and C++17 consumers of the installed library, launching for real
      for c in consumer_c consumer_cpp17; do
        echo "== $c"; CUBINRT_CONSUMER_GPU=1 LD_LIBRARY_PATH=$PWD/$D/lib ./$D/$c; rc=$((rc | $?))
      done 2>&1 | tee "$OUT/consumers.log" ;;
    sdpa)
      PYTHONUNBUFFERED=1 python3 bench/sdpa_baseline.py 2>&1 | tee "$OUT/sdpa.log"; rc=$((rc | PIPESTATUS[0])) ;;
    *) echo "unknown step $step"; rc=1 ;;
  esac
done
echo "gpu-run rc=$rc"
exit $rc
