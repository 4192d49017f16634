#!/usr/bin/env bash
# Builds kv_append writers (sm_90, bf16 tokens into bf16, FP8 e4m3 and NVFP4 caches) with extra
# nvcc defines, or from another source file, into a bundle, for a writer experiment:
#   bench/experiments/build_append.sh NAME "-DCUBINRT_KV_APPEND_MIN_BLOCKS=4" [source] [build dir]
# Writes .device/NAME.bundle (timed on the GPU by: cubinrt_bench --quick --append --bundle
# .device/NAME.bundle; the launch's grid follows the bundle's kernels' occupancy).
set -euo pipefail
name=$1; defines=$2; src=${3:-cubins/kv_append.cu}; B=${4:-build}
out=$B/experiments/$name; mkdir -p "$out" .device
pids=()
for cache in bf16 fp8_e4m3 nvfp4; do
  nvcc -cubin -std=c++17 -O3 -gencode=arch=compute_90,code=sm_90 -Iruntime/include -Iruntime/src/families/kv_append -Icubins \
    -DCUBINRT_IN_DTYPE=CUBINRT_DTYPE_BF16 -DCUBINRT_CACHE_DTYPE="CUBINRT_DTYPE_${cache^^}" -DCUBINRT_KERNEL="cubinrt_kv_append_bf16_$cache" \
    "-DCUBINRT_VARIANT_KEY=\"in_dtype=bf16 cache_dtype=$cache\"" $defines "$src" -o "$out/kv_append.sm_90.bf16.$cache.cubin" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done  # a failed compile stops the script (set -e)
"$B/tools/cubin-manifest" pack --catalog bench/experiments/catalog_sm90_append.json --cubin-dir "$out" --output ".device/$name.bundle"
