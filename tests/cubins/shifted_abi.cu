// Test only: a paged decode entry point whose parameters disagree with PagedDecodeParams v6.
// An int32 sits where k_cache should be, pushing the (FP8) KV pointer 8 bytes later; the last
// field is dropped so the count still matches. Verification must catch it by layout.
#include "paged_decode_abi.h"

// It states the key it claims, as every built kernel does, so that only its layout is wrong.
extern "C" __device__ const char cubinrt_key_cubinrt_paged_decode_hd128_bf16_fp8_e4m3_p16[] =
    "head_dim=128 q_dtype=bf16 kv_dtype=fp8_e4m3 page_size=16";

extern "C" __global__ void cubinrt_paged_decode_hd128_bf16_fp8_e4m3_p16(
    const void* q, int32_t inserted, const void* k_cache, const void* v_cache, const int32_t* block_table,
    const int32_t* seq_lens, void* out, float* lse, float* partial, int32_t* split_counters, int64_t kv_stride_page,
    int64_t kv_stride_token, int64_t kv_stride_head, int64_t q_stride_batch, int64_t q_stride_head,
    int64_t out_stride_batch, int64_t out_stride_head, float k_scale, float v_scale, float softmax_scale,
    int32_t batch, int32_t num_q_heads, int32_t num_kv_heads, int32_t block_table_stride, int32_t num_splits,
    int32_t pages_per_split, int64_t lse_stride_batch, int64_t lse_stride_head, const uint8_t* k_sf, const uint8_t* v_sf,
    int64_t sf_stride_page, int64_t sf_stride_token) {
  if (out) static_cast<float*>(out)[0] = k_scale + inserted + (k_cache != nullptr);
}
