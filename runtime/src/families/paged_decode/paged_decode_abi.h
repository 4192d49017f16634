// The parameter ABI of the paged decode attention kernels, version 6. Version 2 added the LSE
// strides (version 1's LSE was [batch, num_q_heads] contiguous); versions 3 to 5 keep version 2's
// parameters and change the launch: a block takes a chunk of up to "heads per block" q heads of
// one kv head, so grid y is num_kv_heads * ceil(group / heads per block). That was 4 in versions
// 1-2, 8 in version 3, 16 at head_dim 128 and 8 elsewhere in version 4; in version 5 it is the
// family's: CUBINRT_PAGED_DECODE_HEADS for paged_decode, CUBINRT_PAGED_DECODE_G16_HEADS for
// paged_decode_g16 (whose kernels the catalog builds with CUBINRT_G16 defined). Version 6 appends
// NVFP4's block scales (k_sf, v_sf and their strides), which every other KV dtype leaves null.
//
// One list of fields (the X-macro below) makes both the host struct the dispatcher fills and
// the kernel's parameter list, so host and device agree by construction. The loader still
// checks every field's offset and size against the cubin (KPARAM_INFO) and the driver
// (cuFuncGetParamInfo), because a cubin built from another version of this header would not.
//
// Plain C types only: this header is compiled by nvcc for the kernels and by g++ for the host.
#ifndef CUBINRT_ABI_PAGED_DECODE_V6_H
#define CUBINRT_ABI_PAGED_DECODE_V6_H

#include <stdint.h>

#define CUBINRT_PAGED_DECODE_ABI_NAME "PagedDecodeParams"
#define CUBINRT_PAGED_DECODE_ABI_VERSION 6

// X(type, name). Order is the ABI; append only, and bump the version when it changes.
#define CUBINRT_PAGED_DECODE_V6_FIELDS(X)                                                       \
  X(const void*, q)              /* [batch, num_q_heads, head_dim], q dtype */                  \
  X(const void*, k_cache)        /* pages, layout given by the strides below (K and V share them) */                 \
  X(const void*, v_cache)                                                                       \
  X(const int32_t*, block_table) /* [batch, block_table_stride] page indices */                 \
  X(const int32_t*, seq_lens)    /* [batch] tokens per sequence */                              \
  X(void*, out)                  /* [batch, num_q_heads, head_dim], q dtype */                  \
  X(float*, lse)                 /* [batch, num_q_heads] natural-log LSE (strided), or null */            \
  X(float*, partial)             /* split-KV workspace: outputs [batch, num_q_heads, splits, D], then LSEs [batch, num_q_heads, splits] */ \
  X(int32_t*, split_counters)    /* [batch, num_kv_heads * head_chunks], zero between launches */ \
  X(int64_t, kv_stride_page)     /* storage elements (bytes for FP8 and NVFP4) between pages */\
  X(int64_t, kv_stride_token)    /* elements between consecutive tokens of a page */            \
  X(int64_t, kv_stride_head)     /* elements between consecutive kv heads */                    \
  X(int64_t, q_stride_batch)                                                                    \
  X(int64_t, q_stride_head)                                                                     \
  X(int64_t, out_stride_batch)                                                                  \
  X(int64_t, out_stride_head)                                                                   \
  X(float, k_scale)              /* K's dequantisation scale: FP8's, NVFP4's global one; 1 for 16-bit */\
  X(float, v_scale)                                                                             \
  X(float, softmax_scale)                                                                       \
  X(int32_t, batch)                                                                             \
  X(int32_t, num_q_heads)                                                                       \
  X(int32_t, num_kv_heads)                                                                      \
  X(int32_t, block_table_stride) /* pages per block-table row */                               \
  X(int32_t, num_splits)         /* KV range split across this many blocks (grid.z) */          \
  X(int32_t, pages_per_split)                                                                   \
  X(int64_t, lse_stride_batch)   /* version 2 */                                                \
  X(int64_t, lse_stride_head)                                                                   \
  X(const uint8_t*, k_sf)        /* version 6, NVFP4 only: e4m3 scale of each 16 elements of a row */ \
  X(const uint8_t*, v_sf)                                                                       \
  X(int64_t, sf_stride_page)     /* bytes, K's and V's scales alike ([page, token, head, head_dim / 16]) */ \
  X(int64_t, sf_stride_token)                                                                   \
  X(int64_t, sf_stride_head)

#define CUBINRT_ABI_FIELD_DECL_(type, name) type name;
typedef struct CubinrtPagedDecodeParamsV6 {
  CUBINRT_PAGED_DECODE_V6_FIELDS(CUBINRT_ABI_FIELD_DECL_)
} CubinrtPagedDecodeParamsV6;
#undef CUBINRT_ABI_FIELD_DECL_

// q heads one block handles. paged_decode: 8, the rows g of the tensor-core q.K tile (whose rows
// g + 8 stay zero) and one 8-column P.V tile. paged_decode_g16: 16, both rows of the q.K tile and
// two P.V tiles, so groups up to 16 (Llama-3-405B: 128 q heads over 8) read each KV page once per
// sequence and kv head. The wider kernels are their own family because a kernel's register count
// is its widest path's: at 16 heads FP8 KV needs more registers than the 4 blocks an SM of the
// common groups allow (H200 run 48: B64 L8192 128q/8kv FP8 408 us capped, 304 with 3 blocks;
// 32q/8kv 264 us with 4 blocks, 314 with 3). Only head_dim 128 has them: at 256 a block's
// partials for 16 heads would not fit beside its pipeline, and head_dim 64 was never measured.
#define CUBINRT_PAGED_DECODE_HEADS 8
#define CUBINRT_PAGED_DECODE_G16_HEADS 16
#define CUBINRT_PAGED_DECODE_G16_HEAD_DIM 128
// The largest head_dim whose kernels' warps split a block's tokens; beyond it (512) they split
// the dims and walk the tokens together, which the planner counts as one stream a block.
#define CUBINRT_PAGED_DECODE_TOKEN_SPLIT_MAX_HEAD_DIM 256
// The fewest threads a paged decode kernel may launch with (its launch bound, from the cubin).
#define CUBINRT_PAGED_DECODE_MIN_THREADS 128
// Threads per block of a paged decode kernel unless its variant chooses otherwise. The host never
// uses this: it launches each kernel with the kernel's launch bound, which the cubin records
// (the manifest's max_threads) and the loader checks (a whole number of warps, at least
// CUBINRT_PAGED_DECODE_MIN_THREADS).
#define CUBINRT_PAGED_DECODE_THREADS 128
// The most splits the dispatcher launches as one thread-block cluster (the portable cluster size);
// the kernel's cluster merge holds every block's share of a dim in registers at once, up to this.
#define CUBINRT_PAGED_DECODE_MAX_CLUSTER_SPLITS 8

#endif
