// The tensors of a paged decode launch as the kernel addresses them: strides resolved (zero:
// contiguous) and checked against the kernels' vector accesses before anything is launched.
#pragma once

#include <cstdint>

#include "cubinrt/error.hpp"
#include "cubinrt/paged_decode.hpp"

namespace cubinrt::paged_decode {

// Element strides as the kernel takes them (a dimension of extent 1 gets 0: never stepped over).
struct ViewStrides {
  int64_t q_batch = 0, q_head = 0;
  int64_t out_batch = 0, out_head = 0;
  int64_t lse_batch = 0, lse_head = 0;
  int64_t kv_page = 0, kv_token = 0, kv_head = 0;
  int64_t sf_page = 0, sf_token = 0, sf_head = 0;  // NVFP4's block scales (bytes); 0 for other dtypes
};

// Checks every view of `args` against `shape` (alignment, non-negative strides that keep each view
// from overlapping itself, K and V of one layout, NVFP4's scale tensors present) and resolves
// their strides. `kv_dtype` is the plan's resolved logical KV dtype. Formats a message only
// when it refuses, so a launch that passes allocates nothing.
Result<ViewStrides> resolve_views(const DecodeShape& shape, Dtype kv_dtype, const DecodeArgs& args);

}  // namespace cubinrt::paged_decode
