// A paged cache's (page, token, head) strides as a launch takes them: the given ones, or, when all
// are zero, the contiguous layout of rows of `row` elements in `layout` (KvCacheDesc's rule, for
// K and V and NVFP4's scales alike; every family that reads or writes the cache resolves it here).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "cubinrt/error.hpp"
#include "cubinrt/paged_decode.hpp"

namespace cubinrt {

inline KvStrides resolve_kv_strides(KvStrides given, KvLayout layout, int64_t page_size, int64_t heads, int64_t row) {
  if (given.page != 0 || given.token != 0 || given.head != 0) return given;
  return layout == KvLayout::nhd ? KvStrides{page_size * heads * row, heads * row, row} : KvStrides{page_size * heads * row, row, page_size * row};
}

// Where an NVFP4 block scale of (token `t` of its page, block `s` of head_dim / 16 = `blocks`)
// sits among its page's and head's scale rows, as (row, column): the row is a token of the page,
// stepped by the scale strides; the column is a byte of that row. linear: (t, s). interleaved4:
// the rows of 4 tokens, read as one array, hold each block's 4 scales side by side (ScaleOrder).
struct ScalePlace {
  int64_t row;
  int64_t col;
};
static_assert(static_cast<int>(ScaleOrder::linear) == CUBINRT_SCALE_ORDER_LINEAR &&
              static_cast<int>(ScaleOrder::interleaved4) == CUBINRT_SCALE_ORDER_INTERLEAVED4, "ScaleOrder is the kernels' codes");
inline ScalePlace scale_place(ScaleOrder order, int64_t t, int64_t s, int64_t blocks) {
  if (order == ScaleOrder::linear) return {t, s};
  const int64_t at = 4 * s + t % 4;  // within the 4 rows of t's quad
  return {t - t % 4 + at / blocks, at % blocks};
}

// A cache's V-scale order as a launch of `what` takes it: an order this build knows, kept by an
// NVFP4 cache whose pages hold whole quads and whose rows whole groups of 4 blocks (where vLLM's
// and FlashInfer's writers, which require both, agree with TensorRT-LLM's); anything else is the
// caller's mistake, said here.
inline Status check_scale_order(std::string_view what, ScaleOrder order, bool nvfp4, int64_t page_size, int64_t head_dim) {
  if (order == ScaleOrder::linear) return {};
  const auto bad = [&](std::string why) { return fail(Errc::invalid_argument, std::string(what) + ": " + why); };
  if (order != ScaleOrder::interleaved4)
    return bad("v_sf_order " + std::to_string(static_cast<int>(order)) + " is not a scale order (0 linear, 1 interleaved4)");
  if (!nvfp4) return bad("v_sf_order interleaved4 orders NVFP4's V block scales, and this cache is not NVFP4");
  if (page_size % 4 != 0)
    return bad("v_sf_order interleaved4 keeps 4 tokens' scales together, so it needs a page size that is a multiple of 4, not " +
               std::to_string(page_size));
  if (head_dim % 64 != 0)
    return bad("v_sf_order interleaved4 needs a head_dim that is a multiple of 64 (rows of whole groups of 4 scales), not " +
               std::to_string(head_dim));
  return {};
}

}  // namespace cubinrt
