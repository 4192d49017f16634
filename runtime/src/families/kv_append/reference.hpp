// The kv_append reference: the cache bytes an append must leave, computed on the host with the
// kernel's float32 operations (same roundings), so the device's bytes can be held to it exactly.
#pragma once

#include <cstdint>
#include <vector>

#include "cubinrt/paged_decode.hpp"
#include "cubinrt/types.hpp"

namespace cubinrt::kv_append {

// A cache's four buffers as host bytes, in the layout the strides describe.
struct HostCache {
  std::vector<uint8_t> k, v, k_sf, v_sf;
};

struct Problem {
  Dtype in_dtype = Dtype::bf16;
  Dtype cache_dtype = Dtype::bf16;           // logical: bf16, fp16, fp8_e4m3, fp8_e5m2 or nvfp4
  int num_kv_heads = 0, head_dim = 0, page_size = 0;
  int64_t num_pages = 0;
  std::vector<uint16_t> k_in, v_in;          // [tokens, heads, head_dim] contiguous 16-bit codes
  std::vector<int64_t> slots;                // [tokens]
  float k_scale = 1.f, v_scale = 1.f;
  KvStrides cache_strides;                   // storage elements
  KvStrides sf_strides;                      // bytes
  ScaleOrder v_sf_order = ScaleOrder::linear;  // NVFP4: where V's scales go (K's are linear)
  int num_tokens() const { return static_cast<int>(slots.size()); }
};

// Bytes a cache buffer of `p` takes (data in storage bytes, and scales).
size_t cache_bytes(const Problem& p);
size_t sf_bytes(const Problem& p);

// Applies the append to `cache` (each buffer of cache_bytes / sf_bytes, prefilled by the caller):
// exactly the bytes the kernel writes, and nothing at skipped slots.
void append(const Problem& p, HostCache& cache);

// A problem for a key's dtypes: `tokens` tokens of random values (some blocks all zero, some past
// FP8's range) at distinct shuffled slots, a padding slot (-1) and one past the cache.
Problem make_problem(Dtype in_dtype, Dtype cache_dtype, int tokens, uint64_t seed);

}  // namespace cubinrt::kv_append
