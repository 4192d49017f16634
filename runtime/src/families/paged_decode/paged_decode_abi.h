// The parameter ABI of the paged decode attention kernels, version 4. Version 2 added the LSE
// strides (version 1's LSE was [batch, num_q_heads] contiguous); versions 3 and 4 keep version
// 2's parameters and change the launch: a block takes up to CUBINRT_PAGED_DECODE_MAX_GROUP(head_dim)
// q heads of a kv head (4 in versions 1-2, 8 in version 3), so grid y is
// num_kv_heads * ceil(group / CUBINRT_PAGED_DECODE_MAX_GROUP(head_dim)).
//
// One list of fields (the X-macro below) makes both the host struct the dispatcher fills and
// the kernel's parameter list, so host and device agree by construction. The loader still
// checks every field's offset and size against the cubin (KPARAM_INFO) and the driver
// (cuFuncGetParamInfo), because a cubin built from another version of this header would not.
//
// Plain C types only: this header is compiled by nvcc for the kernels and by g++ for the host.
#ifndef CUBINRT_ABI_PAGED_DECODE_V4_H
#define CUBINRT_ABI_PAGED_DECODE_V4_H

#include <stdint.h>

#define CUBINRT_PAGED_DECODE_ABI_NAME "PagedDecodeParams"
#define CUBINRT_PAGED_DECODE_ABI_VERSION 4

// X(type, name). Order is the ABI; append only, and bump the version when it changes.
#define CUBINRT_PAGED_DECODE_V4_FIELDS(X)                                                       \
  X(const void*, q)              /* [batch, num_q_heads, head_dim], q dtype */                  \
  X(const void*, k_cache)        /* pages, layout given by the strides below (K and V share them) */                 \
  X(const void*, v_cache)                                                                       \
  X(const int32_t*, block_table) /* [batch, block_table_stride] page indices */                 \
  X(const int32_t*, seq_lens)    /* [batch] tokens per sequence */                              \
  X(void*, out)                  /* [batch, num_q_heads, head_dim], q dtype */                  \
  X(float*, lse)                 /* [batch, num_q_heads] natural-log LSE (strided), or null */            \
  X(float*, partial)             /* split-KV workspace: outputs [batch, num_q_heads, splits, D], then LSEs [batch, num_q_heads, splits] */ \
  X(int32_t*, split_counters)    /* [batch, num_kv_heads * head_chunks], zero between launches */ \
  X(int64_t, kv_stride_page)     /* elements between consecutive pages */                      \
  X(int64_t, kv_stride_token)    /* elements between consecutive tokens of a page */            \
  X(int64_t, kv_stride_head)     /* elements between consecutive kv heads */                    \
  X(int64_t, q_stride_batch)                                                                    \
  X(int64_t, q_stride_head)                                                                     \
  X(int64_t, out_stride_batch)                                                                  \
  X(int64_t, out_stride_head)                                                                   \
  X(float, k_scale)              /* dequantisation scale of K (1 for 16-bit KV) */              \
  X(float, v_scale)                                                                             \
  X(float, softmax_scale)                                                                       \
  X(int32_t, batch)                                                                             \
  X(int32_t, num_q_heads)                                                                       \
  X(int32_t, num_kv_heads)                                                                      \
  X(int32_t, block_table_stride) /* pages per block-table row */                               \
  X(int32_t, num_splits)         /* KV range split across this many blocks (grid.z) */          \
  X(int32_t, pages_per_split)                                                                   \
  X(int64_t, lse_stride_batch)   /* version 2 */                                                \
  X(int64_t, lse_stride_head)

#define CUBINRT_ABI_FIELD_DECL_(type, name) type name;
typedef struct CubinrtPagedDecodeParamsV4 {
  CUBINRT_PAGED_DECODE_V4_FIELDS(CUBINRT_ABI_FIELD_DECL_)
} CubinrtPagedDecodeParamsV4;
#undef CUBINRT_ABI_FIELD_DECL_

// q heads one block handles: a kv head's group is split into chunks of this many. At head_dim
// 128, 16: the 16 rows of the tensor-core q.K tile and two 8-column P.V tiles, so groups up to 16
// (Llama-3-405B: 128 q heads over 8) read each KV page once per sequence and kv head. Elsewhere
// 8: at 256 a block's partials for 16 heads would not fit beside its pipeline, and at 64 the
// second row's registers (the kernel's register count is its widest path's) cost the common
// groups their occupancy (120 -> 163 registers for bf16, measured with ptxas -v).
#define CUBINRT_PAGED_DECODE_MAX_GROUP(head_dim) ((head_dim) == 128 ? 16 : 8)
// The fewest threads a paged decode kernel may launch with (its launch bound, from the cubin).
#define CUBINRT_PAGED_DECODE_MIN_THREADS 128
// Threads per block of a paged decode kernel unless its variant chooses otherwise. The host never
// uses this: it launches each kernel with the kernel's launch bound, which the cubin records
// (the manifest's max_threads) and the loader checks (a whole number of warps, at least
// CUBINRT_PAGED_DECODE_MIN_THREADS).
#define CUBINRT_PAGED_DECODE_THREADS 128

#endif
