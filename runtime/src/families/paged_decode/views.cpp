// Strided views of a paged decode launch: what the kernels' accesses need of each tensor.
//
// The kernels read q, K and V rows with 16-byte vector loads, store out four elements (8 bytes) at
// a time and lse one float at a time; so each view's start and each stride it steps over must keep
// those accesses aligned. A view must not overlap itself: two heads (or tokens, or pages) at one
// address are a caller's bug for an input and a write race for an output.
#include "families/paged_decode/views.hpp"

#include <utility>
#include <array>
#include <string_view>

#include <fmt/format.h>

#include "common/kv_strides.hpp"
#include "common/strided_view.hpp"
#include "common/try.hpp"

namespace cubinrt::paged_decode {

namespace {

constexpr std::string_view kLaunch = "paged decode launch";
using Dim = ViewDim;
int64_t used(int64_t extent, int64_t stride) { return used_stride(extent, stride); }

}  // namespace

Result<ViewStrides> resolve_views(const DecodeShape& s, const DecodeArgs& a) {
  const int64_t B = s.batch, Hq = s.num_q_heads, Hkv = s.num_kv_heads, D = s.head_dim, P = s.page_size;
  const int64_t q_bytes = dtype_bits(s.q_dtype) / 8, kv_bytes = dtype_bits(s.kv_storage) / 8;
  auto rows = [&](RowStrides r, int64_t contiguous_head) {
    return r.batch == 0 && r.head == 0 ? RowStrides{Hq * contiguous_head, contiguous_head} : r;
  };
  const RowStrides q = rows(a.q_strides, D), out = rows(a.out_strides, D), lse = rows(a.lse_strides, 1);
  KvStrides k = resolve_kv_strides(a.kv.k_strides, s.layout, P, Hkv, D), v = resolve_kv_strides(a.kv.v_strides, s.layout, P, Hkv, D);
  const int64_t pages = a.kv.num_pages;
  k = {used(pages, k.page), used(P, k.token), used(Hkv, k.head)};
  v = {used(pages, v.page), used(P, v.token), used(Hkv, v.head)};

  CUBINRT_TRY(check_view(kLaunch, "q", a.q, 16, std::array{Dim{"batch", B, q.batch}, Dim{"head", Hq, q.head}}, D, q_bytes, 16));
  CUBINRT_TRY(check_view(kLaunch, "out", a.out, 8, std::array{Dim{"batch", B, out.batch}, Dim{"head", Hq, out.head}}, D, q_bytes, 8));
  if (a.lse)
    CUBINRT_TRY(check_view(kLaunch, "lse", a.lse, 4, std::array{Dim{"batch", B, lse.batch}, Dim{"head", Hq, lse.head}}, 1, 4, 4));
  const auto kv_dims = [&](KvStrides x) { return std::array{Dim{"page", pages, x.page}, Dim{"token", P, x.token}, Dim{"head", Hkv, x.head}}; };
  CUBINRT_TRY(check_view(kLaunch, "K", a.kv.k, 16, kv_dims(k), D, kv_bytes, 16));
  CUBINRT_TRY(check_view(kLaunch, "V", a.kv.v, 16, kv_dims(v), D, kv_bytes, 16));
  if (k.page != v.page || k.token != v.token || k.head != v.head)
    return fail(Errc::invalid_argument,
                fmt::format("paged decode launch: K's strides (page {}, token {}, head {}) differ from V's (page {}, token {}, head {}); the "
                            "kernels address K and V from one offset, so they must be views of one layout (as vLLM's cache[:, 0] and "
                            "cache[:, 1] are)",
                            k.page, k.token, k.head, v.page, v.token, v.head));
  return ViewStrides{used(B, q.batch),   used(Hq, q.head),   used(B, out.batch), used(Hq, out.head), used(B, lse.batch),
                     used(Hq, lse.head), k.page,             k.token,            k.head};
}

}  // namespace cubinrt::paged_decode
