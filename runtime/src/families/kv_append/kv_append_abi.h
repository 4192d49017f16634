// The parameter ABI of the kv_append kernels, version 2: new K and V tokens written into a paged
// cache, converted or quantized to its dtype (version 2 appends the order of NVFP4's V scales).
// One X-macro list makes the host struct and the kernel's parameter list, as for every family;
// the loader checks it against the cubin and the driver. Plain C types only (nvcc and g++ both
// compile it).
//
// Launch: 1-D grid of blocks of CUBINRT_KV_APPEND_THREADS threads, walking work items
// grid-stride: for a quantized cache (FP8, NVFP4) an item is a 16-element chunk of a token's head
// of K and the same chunk of V (num_tokens * num_kv_heads * head_dim / 16 items); for a 16-bit
// cache one chunk of K or of V (twice as many). Fewer than 2^31 chunks a launch (the plan refuses
// more). head_dim is a multiple of 16 (an NVFP4 scale block).
#ifndef CUBINRT_ABI_KV_APPEND_V2_H
#define CUBINRT_ABI_KV_APPEND_V2_H

#include <stdint.h>

#define CUBINRT_KV_APPEND_ABI_NAME "KvAppendParams"
#define CUBINRT_KV_APPEND_ABI_VERSION 2
#define CUBINRT_KV_APPEND_THREADS 256
#define CUBINRT_KV_APPEND_CHUNK 16  // elements a thread takes: one NVFP4 scale block

// X(type, name). Order is the ABI; append only, and bump the version when it changes.
#define CUBINRT_KV_APPEND_V2_FIELDS(X)                                                              \
  X(const void*, k_in)          /* [num_tokens, num_kv_heads, head_dim], the input dtype */        \
  X(const void*, v_in)                                                                              \
  X(const int64_t*, slots)      /* [num_tokens]: page * page_size + offset; negative: skipped */    \
  X(void*, k_cache)             /* pages in the cache dtype's storage (NVFP4: two codes a byte) */   \
  X(void*, v_cache)                                                                                 \
  X(uint8_t*, k_sf)             /* NVFP4 only: one e4m3 scale a 16 elements, else null */           \
  X(uint8_t*, v_sf)                                                                                 \
  X(int64_t, k_in_stride_token) /* elements */                                                      \
  X(int64_t, k_in_stride_head)                                                                      \
  X(int64_t, v_in_stride_token)                                                                     \
  X(int64_t, v_in_stride_head)                                                                      \
  X(int64_t, cache_stride_page) /* storage elements (bytes for FP8 and NVFP4), K and V alike */     \
  X(int64_t, cache_stride_token)                                                                    \
  X(int64_t, cache_stride_head)                                                                     \
  X(int64_t, sf_stride_page)    /* bytes, K and V scales alike */                                   \
  X(int64_t, sf_stride_token)                                                                       \
  X(int64_t, sf_stride_head)                                                                        \
  X(int64_t, num_slots)         /* pages * page_size: a slot at or past it is skipped */           \
  X(float, k_scale)             /* FP8: stored = x / scale, saturated; NVFP4: the global decode scale */ \
  X(float, v_scale)                                                                                 \
  X(int32_t, num_tokens)                                                                            \
  X(int32_t, num_kv_heads)                                                                          \
  X(int32_t, head_dim)                                                                              \
  X(int32_t, page_size)                                                                             \
  X(int32_t, v_sf_order)        /* version 2, NVFP4 only: V's CUBINRT_SCALE_ORDER_* (dtypes.h) */

#define CUBINRT_ABI_FIELD_DECL_(type, name) type name;
typedef struct CubinrtKvAppendParamsV2 {
  CUBINRT_KV_APPEND_V2_FIELDS(CUBINRT_ABI_FIELD_DECL_)
} CubinrtKvAppendParamsV2;
#undef CUBINRT_ABI_FIELD_DECL_

#endif
