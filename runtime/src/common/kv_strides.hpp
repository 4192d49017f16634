// A paged cache's (page, token, head) strides as a launch takes them: the given ones, or, when all
// are zero, the contiguous layout of rows of `row` elements in `layout` (KvCacheDesc's rule, for
// K and V and NVFP4's scales alike; every family that reads or writes the cache resolves it here).
#pragma once

#include <cstdint>

#include "cubinrt/paged_decode.hpp"

namespace cubinrt {

inline KvStrides resolve_kv_strides(KvStrides given, KvLayout layout, int64_t page_size, int64_t heads, int64_t row) {
  if (given.page != 0 || given.token != 0 || given.head != 0) return given;
  return layout == KvLayout::nhd ? KvStrides{page_size * heads * row, heads * row, row} : KvStrides{page_size * heads * row, row, page_size * row};
}

}  // namespace cubinrt
