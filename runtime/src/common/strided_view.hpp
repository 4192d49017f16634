// A tensor view as a kernel addresses it: a base and (name, extent, stride) dimensions over rows
// of `inner` contiguous elements. Every family's launch checks its views with this before a
// kernel sees them; a message is formatted only when a view is refused.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "cubinrt/error.hpp"

namespace cubinrt {

// Bounds every span a stride times an extent can reach well inside int64_t (2^40 elements: a TiB
// of bytes per step); larger is an uninitialised or hostile value, not a layout.
inline constexpr int64_t kMaxStride = int64_t{1} << 40;

struct ViewDim {
  std::string_view name;  // "batch", "head", "page", "token"
  int64_t extent;
  int64_t stride;         // elements
};

// The base `base_align`-byte aligned, every stride in 0..2^40 and a multiple of `stride_align`
// bytes, and no dimension overlapping the ones inside it. `launch` prefixes the message
// ("paged decode launch"), `tensor` names the view.
template <size_t N>
Status check_view(std::string_view launch, std::string_view tensor, const void* base, size_t base_align, std::array<ViewDim, N> dims,
                  int64_t inner, int64_t elem_bytes, int64_t stride_align) {
  auto bad = [&](std::string m) { return fail(Errc::invalid_argument, fmt::format("{}: {} {}", launch, tensor, m)); };
  if (reinterpret_cast<uintptr_t>(base) % base_align != 0)
    return bad(fmt::format("at {} is not {}-byte aligned (the kernels access it {} bytes at a time)", base, base_align, base_align));
  for (const ViewDim& d : dims) {
    if (d.extent <= 1) continue;
    if (d.stride < 0 || d.stride > kMaxStride)
      return bad(fmt::format("has {} stride {}: strides must be in 0..2^40 elements (cubinrt takes no negative strides)", d.name, d.stride));
    if (d.stride * elem_bytes % stride_align != 0)
      return bad(fmt::format("has {} stride {} elements ({} bytes), not a multiple of {} bytes: every {} must start {}-byte aligned "
                             "for the kernels' vector accesses",
                             d.name, d.stride, d.stride * elem_bytes, stride_align, d.name, stride_align));
  }
  // Non-overlapping: in increasing stride order, each stride clears everything inside it.
  // (Insertion sort: no allocation. Dims come outermost first, so on equal strides the inner one
  // goes first and the outer one is named as overlapping it.)
  for (size_t i = 1; i < N; ++i)
    for (size_t j = i; j > 0 && dims[j].stride <= dims[j - 1].stride; --j) std::swap(dims[j], dims[j - 1]);
  int64_t span = inner;  // elements from a row's first to one past its last, so far
  std::string_view inside = "elements";
  for (const ViewDim& d : dims) {
    if (d.extent <= 1) continue;
    if (d.stride < span)
      return bad(fmt::format("has {} stride {}, which overlaps its {} (they span {} elements): the view overlaps itself", d.name,
                             d.stride, inside, span));
    span += d.stride * (d.extent - 1);  // < 2^40 * 2^32 * 3: no overflow
    inside = d.name;
  }
  return {};
}

// A dimension of extent 1 is never stepped over: its stride is not the kernel's business.
inline int64_t used_stride(int64_t extent, int64_t stride) { return extent > 1 ? stride : 0; }

}  // namespace cubinrt
