// Strided views of a paged decode launch: what the kernels' accesses need of each tensor.
//
// The kernels read q, K and V rows with 16-byte vector loads (NVFP4 at head_dim 64: 8-byte ones)
// and NVFP4's scale rows whole (head_dim / 16 bytes, up to 16), store out four elements (8 bytes)
// at a time and lse one float at a time; so each view's start and each stride it steps over must
// keep those accesses aligned. A view must not overlap itself: two heads (or tokens, or pages) at
// one address are a caller's bug for an input and a write race for an output.
#include "families/paged_decode/views.hpp"

#include <algorithm>
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

Result<ViewStrides> resolve_views(const DecodeShape& s, Dtype kv_dtype, const DecodeArgs& a) {
  const int64_t B = s.batch, Hq = s.num_q_heads, Hkv = s.num_kv_heads, D = s.head_dim, P = s.page_size;
  const int64_t q_bytes = dtype_bits(s.q_dtype) / 8, kv_bytes = dtype_bits(s.kv_storage) / 8;
  // A row of K or V in storage elements: NVFP4 packs two codes a byte.
  const bool nvfp4 = kv_dtype == Dtype::nvfp4;
  const int64_t kv_row = nvfp4 ? D / 2 : D, kv_align = nvfp4 && D < 128 ? 8 : 16;
  auto rows = [&](RowStrides r, int64_t contiguous_head) {
    return r.batch == 0 && r.head == 0 ? RowStrides{Hq * contiguous_head, contiguous_head} : r;
  };
  const RowStrides q = rows(a.q_strides, D), out = rows(a.out_strides, D), lse = rows(a.lse_strides, 1);
  KvStrides k = resolve_kv_strides(a.kv.k_strides, s.layout, P, Hkv, kv_row), v = resolve_kv_strides(a.kv.v_strides, s.layout, P, Hkv, kv_row);
  const int64_t pages = a.kv.num_pages;
  k = {used(pages, k.page), used(P, k.token), used(Hkv, k.head)};
  v = {used(pages, v.page), used(P, v.token), used(Hkv, v.head)};

  CUBINRT_TRY(check_view(kLaunch, "q", a.q, 16, std::array{Dim{"batch", B, q.batch}, Dim{"head", Hq, q.head}}, D, q_bytes, 16));
  CUBINRT_TRY(check_view(kLaunch, "out", a.out, 8, std::array{Dim{"batch", B, out.batch}, Dim{"head", Hq, out.head}}, D, q_bytes, 8));
  if (a.lse)
    CUBINRT_TRY(check_view(kLaunch, "lse", a.lse, 4, std::array{Dim{"batch", B, lse.batch}, Dim{"head", Hq, lse.head}}, 1, 4, 4));
  const auto kv_dims = [&](KvStrides x) { return std::array{Dim{"page", pages, x.page}, Dim{"token", P, x.token}, Dim{"head", Hkv, x.head}}; };
  CUBINRT_TRY(check_view(kLaunch, "K", a.kv.k, kv_align, kv_dims(k), kv_row, kv_bytes, kv_align));
  CUBINRT_TRY(check_view(kLaunch, "V", a.kv.v, kv_align, kv_dims(v), kv_row, kv_bytes, kv_align));
  if (k.page != v.page || k.token != v.token || k.head != v.head)
    return fail(Errc::invalid_argument,
                fmt::format("paged decode launch: K's strides (page {}, token {}, head {}) differ from V's (page {}, token {}, head {}); the "
                            "kernels address K and V from one offset, so they must be views of one layout (as vLLM's cache[:, 0] and "
                            "cache[:, 1] are)",
                            k.page, k.token, k.head, v.page, v.token, v.head));
  ViewStrides r{used(B, q.batch), used(Hq, q.head), used(B, out.batch), used(Hq, out.head), used(B, lse.batch), used(Hq, lse.head),
                k.page,          k.token,          k.head};
  if (nvfp4) {
    // One e4m3 scale a 16 elements: rows of D / 16 bytes, K's and V's with one set of strides.
    if (!a.kv.k_sf || !a.kv.v_sf)
      return fail(Errc::invalid_argument, "paged decode launch: an nvfp4 cache needs its block scales: kv.k_sf and kv.v_sf must be non-null");
    KvStrides sf = resolve_kv_strides(a.kv.sf_strides, s.layout, P, Hkv, D / 16);
    sf = {used(pages, sf.page), used(P, sf.token), used(Hkv, sf.head)};
    // A scale row is copied whole (up to 16 bytes), so its rows are aligned to their size.
    const int64_t sf_align = std::min<int64_t>(D / 16, 16);
    CUBINRT_TRY(check_view(kLaunch, "K scales", a.kv.k_sf, sf_align, kv_dims(sf), D / 16, 1, sf_align));
    CUBINRT_TRY(check_view(kLaunch, "V scales", a.kv.v_sf, sf_align, kv_dims(sf), D / 16, 1, sf_align));
    r.sf_page = sf.page, r.sf_token = sf.token, r.sf_head = sf.head;
  }
  return r;
}

}  // namespace cubinrt::paged_decode
