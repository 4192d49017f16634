#!/usr/bin/env bash
# Builds the benchmark's kernels with extra nvcc defines into a bundle, for a kernel experiment:
#   bench/experiments/build.sh NAME "-DCUBINRT_MMA_TILES=2" [build dir]
# The defines apply to every variant; EXP_hd<D>_<kv> (e.g. EXP_hd128_fp8_e4m3="-DCUBINRT_MMA_STAGES=3")
# adds defines for one variant only (EXP_g16_<kv> for the 16-head kernels, EXP_pair_nvfp4 for the
# kv-pair kernel). Writes
# .device/NAME.bundle (timed on the GPU by: cubinrt_bench --quick --bundle .device/NAME.bundle).
set -euo pipefail
name=$1; defines=$2; B=${3:-build}
out=$B/experiments/$name; mkdir -p "$out" .device
dtype() { echo "CUBINRT_DTYPE_${1^^}"; }  # the dtype table's macro (cubinrt/dtypes.h)
pids=()
# Each variant of the experiment catalog: family:head_dim (paged_decode_g16 is built with CUBINRT_G16,
# paged_decode_kv_pair, NVFP4 only, with CUBINRT_KV_PAIR).
for fh in paged_decode:128 paged_decode:256 paged_decode_g16:128 paged_decode_kv_pair:128; do for kv in bf16 fp8_e4m3 nvfp4; do
  fam=${fh%:*}; hd=${fh#*:}
  [[ $fam == paged_decode_kv_pair && $kv != nvfp4 ]] && continue
  id=$fam.sm_90.hd$hd.bf16.$kv.p16
  extra_var=EXP_hd${hd}_${kv} fam_def= sym=$fam
  [[ $fam == paged_decode_g16 ]] && extra_var=EXP_g16_${kv} fam_def=-DCUBINRT_G16=1
  [[ $fam == paged_decode_kv_pair ]] && extra_var=EXP_pair_${kv} fam_def=-DCUBINRT_KV_PAIR=1 sym=paged_decode_kvpair
  nvcc -cubin -std=c++17 -O3 -gencode=arch=compute_90,code=sm_90 -Iruntime/include -Iruntime/src/families/paged_decode -DCUBINRT_HEAD_DIM=$hd \
    -DCUBINRT_Q_DTYPE=CUBINRT_DTYPE_BF16 -DCUBINRT_KV_DTYPE=$(dtype $kv) -DCUBINRT_PAGE_SIZE=16 $fam_def \
    -DCUBINRT_KERNEL=cubinrt_${sym}_hd${hd}_bf16_${kv}_p16 \
    "-DCUBINRT_VARIANT_KEY=\"head_dim=$hd q_dtype=bf16 kv_dtype=$kv page_size=16\"" $defines ${!extra_var:-} cubins/paged_decode.cu -o "$out/$id.cubin" &
  pids+=($!)
done; done
for pid in "${pids[@]}"; do wait "$pid"; done  # a failed compile stops the script (set -e)
"$B/tools/cubin-manifest" pack --catalog bench/experiments/catalog_sm90_decode.json --cubin-dir "$out" --output ".device/$name.bundle"
