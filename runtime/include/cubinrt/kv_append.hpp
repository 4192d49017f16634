// The cache writer engines call every step: new K and V tokens into the paged KV cache, in the
// cache's dtype: the tokens' own 16-bit dtype, FP8 (x / the per-layer scale, rounded to nearest
// and saturated, as vLLM writes it) or NVFP4 (an e4m3 scale a 16 elements from their absolute
// maximum and the per-layer global scale; docs/formats.md). Each token goes to its slot
// (page * page_size + offset, int64 as vLLM's slot_mapping); a negative slot is a padding token
// and is skipped, as is a slot past the cache. The cache is the KvCacheDesc the decode reads.
#pragma once

#include <cstdint>
#include <optional>

#include "cubinrt/error.hpp"
#include "cubinrt/paged_decode.hpp"
#include "cubinrt/runtime.hpp"
#include "cubinrt/types.hpp"

namespace cubinrt {

// What stays fixed across calls: the plan is made from this (any number of tokens a launch).
struct KvAppendShape {
  uint32_t num_kv_heads = 0;
  uint32_t head_dim = 0;                  // a multiple of 16 (an NVFP4 scale block)
  Dtype in_dtype = Dtype::bf16;           // the new tokens': fp16 or bf16
  Dtype cache_storage = Dtype::bf16;      // as KvCacheDesc::storage: in_dtype, or uint8
  std::optional<Dtype> cache_declared;    // uint8 storage: fp8_e4m3, fp8_e5m2 or nvfp4, said, never guessed
  uint32_t page_size = 0;
  KvLayout layout = KvLayout::nhd;
  LaunchOverlap overlap = LaunchOverlap::allow;  // with the kernel before it on the stream (types.hpp)
};

struct TokenStrides {  // new K or V: [num_tokens, num_kv_heads, head_dim], in elements; zero: contiguous
  int64_t token = 0;
  int64_t head = 0;
};

// Alignment the kernels' vector accesses need (checked at launch, naming the tensor and stride):
// K and V inputs start 16-byte aligned with strides of whole 16 bytes; the cache the same for
// 16-bit and FP8 storage, 8 bytes for NVFP4.
struct KvAppendArgs {
  const void* k = nullptr;
  TokenStrides k_strides;
  const void* v = nullptr;
  TokenStrides v_strides;
  const int64_t* slots = nullptr;         // [num_tokens], device memory
  uint32_t num_tokens = 0;                // 0: nothing is launched
  KvCacheDesc cache;                      // written: k and v (and for NVFP4 k_sf and v_sf)
};

// The key of a kv_append kernel (family "kv_append", axes in_dtype and cache_dtype: the logical
// cache dtype, fp8_e4m3 rather than uint8).
KernelKey kv_append_key(Dtype in_dtype, Dtype cache_dtype);

class KvAppendPlan {
 public:
  static Result<KvAppendPlan> create(const Runtime& runtime, const KvAppendShape& shape);
  const KvAppendShape& shape() const { return shape_; }
  Dtype cache_dtype() const { return cache_dtype_; }
  const LoadedKernel& kernel() const { return *kernel_; }
  const Runtime& runtime() const { return *runtime_; }
  bool overlaps_previous_kernel() const { return overlap_; }  // LaunchOverlap::allow taken on this device
  // Checks the arguments against the plan, then launches on `stream` (NULL: the device's default
  // stream, as for the decode).
  Status launch(const KvAppendArgs& args, CUstream_st* stream) const;

 private:
  KvAppendPlan() = default;
  const Runtime* runtime_ = nullptr;
  const LoadedKernel* kernel_ = nullptr;
  KvAppendShape shape_;
  Dtype cache_dtype_ = Dtype::bf16;
  size_t param_bytes_ = 0;
  bool overlap_ = false;
};

}  // namespace cubinrt
