// The C ABI's cache writer: kv_append plans and launches from DLPack-style tensor descriptors,
// each checked (device, dtype, shape) before the C++ launch checks strides and alignment.
#include <array>
#include <cstddef>
#include <string_view>

#include <fmt/format.h>

#include "c_api/c_handles.hpp"
#include "c_api/c_status.hpp"
#include "c_api/c_tensors.hpp"
#include "common/kv_strides.hpp"
#include "common/try.hpp"

namespace cubinrt::c_api {
namespace {

constexpr size_t kShapeV1 = offsetof(cubinrt_kv_append_shape, overlap);  // the first version ended at layout
constexpr size_t kArgsV1 = sizeof(cubinrt_kv_append_args);
constexpr std::string_view kLaunch = "kv_append launch";

}  // namespace
}  // namespace cubinrt::c_api

using namespace cubinrt;
using namespace cubinrt::c_api;

extern "C" {

cubinrt_status cubinrt_kv_append_plan_create(const cubinrt_runtime* runtime, const cubinrt_kv_append_shape* shape, cubinrt_kv_append_plan** plan) {
  return boundary("cubinrt_kv_append_plan_create", [&]() -> Status {
    if (runtime == nullptr || plan == nullptr) return fail(Errc::invalid_argument, "cubinrt_kv_append_plan_create: runtime and plan must be non-NULL");
    *plan = nullptr;
    const cubinrt_kv_append_shape c = CUBINRT_TRY(read_struct(shape, "cubinrt_kv_append_shape", kShapeV1));
    if (c.layout != CUBINRT_KV_NHD && c.layout != CUBINRT_KV_HND)
      return fail(Errc::invalid_argument, fmt::format("cubinrt_kv_append_shape.layout is {}: CUBINRT_KV_NHD (0) or CUBINRT_KV_HND (1)", c.layout));
    KvAppendShape s;
    s.overlap = CUBINRT_TRY(overlap_of(c.overlap, "cubinrt_kv_append_shape.overlap"));
    s.num_kv_heads = c.num_kv_heads;
    s.head_dim = c.head_dim;
    s.in_dtype = CUBINRT_TRY(dtype_of(c.in_dtype, "cubinrt_kv_append_shape.in_dtype"));
    s.cache_storage = CUBINRT_TRY(dtype_of(c.cache_storage, "cubinrt_kv_append_shape.cache_storage"));
    if (c.cache_declared != 0) s.cache_declared = CUBINRT_TRY(dtype_of(c.cache_declared, "cubinrt_kv_append_shape.cache_declared"));
    s.page_size = c.page_size;
    s.layout = c.layout == CUBINRT_KV_NHD ? KvLayout::nhd : KvLayout::hnd;
    const ScaleOrder order = CUBINRT_TRY(scale_order_of(c.v_sf_order, "cubinrt_kv_append_shape.v_sf_order"));
    KvAppendPlan made = CUBINRT_TRY(KvAppendPlan::create(*runtime->rt, s));
    // Checked now, not at the first launch: the order is the shape's in C.
    CUBINRT_TRY(check_scale_order("cubinrt_kv_append_plan_create", order, made.cache_dtype() == Dtype::nvfp4, s.page_size, s.head_dim));
    *plan = new cubinrt_kv_append_plan{std::move(made), order};
    return {};
  });
}

void cubinrt_kv_append_plan_destroy(cubinrt_kv_append_plan* plan) { delete plan; }

cubinrt_status cubinrt_kv_append_plan_launch(const cubinrt_kv_append_plan* plan, const cubinrt_kv_append_args* args, void* stream) {
  return boundary("cubinrt_kv_append_plan_launch", [&]() -> Status {
    if (plan == nullptr) return fail(Errc::invalid_argument, "cubinrt_kv_append_plan_launch: the plan is NULL");
    const cubinrt_kv_append_args c = CUBINRT_TRY(read_struct(args, "cubinrt_kv_append_args", kArgsV1));
    const KvAppendPlan& p = plan->plan;
    const KvAppendShape& s = p.shape();
    const int ordinal = p.runtime().device().ordinal;
    const int64_t H = s.num_kv_heads, D = s.head_dim, P = s.page_size;
    const bool nhd = s.layout == KvLayout::nhd, nvfp4 = p.cache_dtype() == Dtype::nvfp4;
    const Elem in = elem_of(s.in_dtype);
    // Tokens and pages are the tensors' own; the rest is the plan's.
    const int64_t T = c.k.ndim == 3 ? c.k.shape[0] : 0, pages = c.k_cache.ndim == 4 ? c.k_cache.shape[0] : 0;
    const Strides k = CUBINRT_TRY(check_tensor(kLaunch, "k", c.k, in, std::array<int64_t, 3>{T, H, D}, ordinal, true));
    const Strides v = CUBINRT_TRY(check_tensor(kLaunch, "v", c.v, in, std::array<int64_t, 3>{T, H, D}, ordinal, true));
    const Strides slots = CUBINRT_TRY(check_tensor(kLaunch, "slots", c.slots, Elem::int64, std::array<int64_t, 1>{T}, ordinal));
    if (T > 1 && slots.v[0] != 1) return fail(Errc::invalid_argument, fmt::format("{}: slots has stride {}; it must be contiguous", kLaunch, slots.v[0]));
    // A uint8 cache tensor holds the declared encoding; a typed float8 one must be that encoding
    // (a float8_e5m2 tensor declared e4m3, or any float8 tensor declared nvfp4, is the confusion
    // this library refuses), and is then read as its bytes.
    auto as_bytes = [&](const char* name, cubinrt_tensor t) -> Result<cubinrt_tensor> {
      const Elem e = elem_of(t);
      const bool fp8 = e == Elem::fp8_e4m3 || e == Elem::fp8_e5m2;
      if (fp8 && e != elem_of(p.cache_dtype()))
        return fail(Errc::invalid_argument, fmt::format("{}: {} is a {} tensor, but the cache is declared {}", kLaunch, name, elem_name(e),
                                                        dtype_name(p.cache_dtype())));
      if (fp8 && s.cache_storage == Dtype::uint8) t.dtype_code = CUBINRT_DL_UINT;
      return t;
    };
    const cubinrt_tensor kc = CUBINRT_TRY(as_bytes("k_cache", c.k_cache)), vc = CUBINRT_TRY(as_bytes("v_cache", c.v_cache));
    const int64_t row = nvfp4 ? D / 2 : D;
    const auto cache_shape = [&](int64_t r) { return nhd ? std::array<int64_t, 4>{pages, P, H, r} : std::array<int64_t, 4>{pages, H, P, r}; };
    const Strides ks = CUBINRT_TRY(check_tensor(kLaunch, "k_cache", kc, elem_of(s.cache_storage), cache_shape(row), ordinal, true));
    const Strides vs = CUBINRT_TRY(check_tensor(kLaunch, "v_cache", vc, elem_of(s.cache_storage), cache_shape(row), ordinal, true));
    KvAppendArgs a;
    a.k = c.k.data;
    a.k_strides = {k.v[0], k.v[1]};
    a.v = c.v.data;
    a.v_strides = {v.v[0], v.v[1]};
    a.slots = static_cast<const int64_t*>(c.slots.data);
    a.num_tokens = static_cast<uint32_t>(T);
    a.cache.k = c.k_cache.data;
    a.cache.v = c.v_cache.data;
    a.cache.storage = s.cache_storage;
    if (c.cache_declared != 0) a.cache.declared = CUBINRT_TRY(dtype_of(c.cache_declared, "cubinrt_kv_append_args.cache_declared"));
    a.cache.k_scale = c.k_scale;
    a.cache.v_scale = c.v_scale;
    a.cache.layout = s.layout;
    a.cache.page_size = s.page_size;
    a.cache.num_kv_heads = s.num_kv_heads;
    a.cache.num_pages = pages;
    a.cache.k_strides = kv_strides_in_layout(ks, nhd);
    a.cache.v_strides = kv_strides_in_layout(vs, nhd);
    if (nvfp4) {
      a.cache.sf_strides = CUBINRT_TRY(check_nvfp4_scales(kLaunch, c.k_sf, c.v_sf, cache_shape(D / 16), ordinal, nhd));
      a.cache.k_sf = c.k_sf.data;
      a.cache.v_sf = c.v_sf.data;
      a.cache.v_sf_order = plan->v_sf_order;
    }
    return p.launch(a, static_cast<CUstream_st*>(stream));
  });
}

}  // extern "C"
