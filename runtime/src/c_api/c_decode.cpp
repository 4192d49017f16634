// The C ABI's paged decode: keys, plans, and launches from DLPack-style tensor descriptors.
//
// A launch checks each descriptor (device, dtype, shape, innermost stride) against the plan and
// turns it into the C++ DecodeArgs, whose launch then checks strides and alignment. Nothing is
// allocated or formatted unless a check fails.
#include <array>
#include <cstddef>
#include <span>
#include <string_view>

#include "c_api/c_handles.hpp"
#include "c_api/c_status.hpp"
#include "c_api/c_tensors.hpp"
#include "family/family.hpp"
#include "common/try.hpp"
#include "loader/loaded_kernel.hpp"
#include "bundle/manifest.hpp"

namespace cubinrt::c_api {

namespace {

constexpr size_t kShapeV1 = offsetof(cubinrt_decode_shape, overlap);  // the first version ended at merge
constexpr size_t kPlanInfoV1 = offsetof(cubinrt_decode_plan_info, overlaps_previous_kernel);  // it ended at kernel
constexpr size_t kArgsV1 = offsetof(cubinrt_decode_args, k_sf);  // the first version ended at workspace_bytes
constexpr std::string_view kLaunch = "paged decode launch";

}  // namespace

Result<Dtype> dtype_of(int32_t code, const char* what) {
  switch (code) {
#define CUBINRT_DTYPE_CASE_(name, c, bits, kind) case c: return Dtype::name;
    CUBINRT_DTYPES(CUBINRT_DTYPE_CASE_)
#undef CUBINRT_DTYPE_CASE_
  }
  return fail(Errc::invalid_argument, fmt::format("{} is {}, not a CUBINRT_DTYPE_* code", what, code));
}

Result<LaunchOverlap> overlap_of(int32_t code, const char* what) {
  if (code == CUBINRT_OVERLAP_ALLOW) return LaunchOverlap::allow;
  if (code == CUBINRT_OVERLAP_NEVER) return LaunchOverlap::never;
  return fail(Errc::invalid_argument, fmt::format("{} is {}: a cubinrt_launch_overlap (0 or 1)", what, code));
}

Result<ScaleOrder> scale_order_of(int32_t code, const char* what) {
  if (code == CUBINRT_SCALE_ORDER_LINEAR) return ScaleOrder::linear;
  if (code == CUBINRT_SCALE_ORDER_INTERLEAVED4) return ScaleOrder::interleaved4;
  return fail(Errc::invalid_argument, fmt::format("{} is {}: CUBINRT_SCALE_ORDER_LINEAR (0) or CUBINRT_SCALE_ORDER_INTERLEAVED4 (1)", what, code));
}

Result<KernelKey> decode_key_of(const cubinrt_decode_key& k) {
  return decode_key(k.head_dim, CUBINRT_TRY(dtype_of(k.q_dtype, "cubinrt_decode_key.q_dtype")),
                    CUBINRT_TRY(dtype_of(k.kv_dtype, "cubinrt_decode_key.kv_dtype")), k.page_size);
}

std::optional<cubinrt_decode_key> c_decode_key(const KernelKey& key) {
  if (key.family != "paged_decode") return std::nullopt;
  auto q = parse_dtype(key.axis("q_dtype"));
  auto kv = parse_dtype(key.axis("kv_dtype"));
  auto head_dim = axis_number(key, "head_dim");
  auto page_size = axis_number(key, "page_size");
  if (!q || !kv || !head_dim || !page_size) return std::nullopt;
  return cubinrt_decode_key{*head_dim, static_cast<int32_t>(*q), static_cast<int32_t>(*kv), *page_size};
}

}  // namespace cubinrt::c_api

using namespace cubinrt;
using namespace cubinrt::c_api;

extern "C" {

cubinrt_status cubinrt_decode_plan_create(const cubinrt_runtime* runtime, const cubinrt_decode_shape* shape, cubinrt_decode_plan** plan) {
  return boundary("cubinrt_decode_plan_create", [&]() -> Status {
    if (runtime == nullptr || plan == nullptr) return fail(Errc::invalid_argument, "cubinrt_decode_plan_create: runtime and plan must be non-NULL");
    *plan = nullptr;
    const cubinrt_decode_shape c = CUBINRT_TRY(read_struct(shape, "cubinrt_decode_shape", kShapeV1));
    if (c.layout != CUBINRT_KV_NHD && c.layout != CUBINRT_KV_HND)
      return fail(Errc::invalid_argument, fmt::format("cubinrt_decode_shape.layout is {}: CUBINRT_KV_NHD (0) or CUBINRT_KV_HND (1)", c.layout));
    if (c.merge < CUBINRT_MERGE_CHOOSE || c.merge > CUBINRT_MERGE_CLUSTER)
      return fail(Errc::invalid_argument, fmt::format("cubinrt_decode_shape.merge is {}: a cubinrt_split_merge (0, 1 or 2)", c.merge));
    DecodeShape s;
    s.overlap = CUBINRT_TRY(overlap_of(c.overlap, "cubinrt_decode_shape.overlap"));
    s.batch = c.batch;
    s.num_q_heads = c.num_q_heads;
    s.num_kv_heads = c.num_kv_heads;
    s.head_dim = c.head_dim;
    s.q_dtype = CUBINRT_TRY(dtype_of(c.q_dtype, "cubinrt_decode_shape.q_dtype"));
    s.kv_storage = CUBINRT_TRY(dtype_of(c.kv_storage, "cubinrt_decode_shape.kv_storage"));
    if (c.kv_declared != 0) s.kv_declared = CUBINRT_TRY(dtype_of(c.kv_declared, "cubinrt_decode_shape.kv_declared"));
    s.page_size = c.page_size;
    s.layout = c.layout == CUBINRT_KV_NHD ? KvLayout::nhd : KvLayout::hnd;
    s.block_table_stride = c.block_table_stride;
    s.max_seq_len = c.max_seq_len;
    s.num_splits = c.num_splits;
    s.merge = static_cast<SplitMerge>(c.merge);
    s.v_sf_order = CUBINRT_TRY(scale_order_of(c.v_sf_order, "cubinrt_decode_shape.v_sf_order"));
    *plan = new cubinrt_decode_plan{CUBINRT_TRY(DecodePlan::create(*runtime->rt, s))};
    return {};
  });
}

void cubinrt_decode_plan_destroy(cubinrt_decode_plan* plan) { delete plan; }

cubinrt_status cubinrt_decode_plan_info_get(const cubinrt_decode_plan* plan, cubinrt_decode_plan_info* info) {
  return boundary("cubinrt_decode_plan_info_get", [&]() -> Status {
    if (plan == nullptr) return fail(Errc::invalid_argument, "cubinrt_decode_plan_info_get: the plan is NULL");
    cubinrt_decode_plan_info v{};
    v.struct_size = sizeof v;
    v.workspace_bytes = plan->plan.workspace_bytes();
    v.num_splits = plan->plan.num_splits();
    v.merge = plan->plan.merge() == SplitMerge::cluster ? CUBINRT_MERGE_CLUSTER : CUBINRT_MERGE_WORKSPACE;
    copy_text(v.kernel, sizeof v.kernel, plan->plan.kernel().entry->id);
    v.overlaps_previous_kernel = plan->plan.overlaps_previous_kernel() ? 1 : 0;
    return write_struct(info, v, "cubinrt_decode_plan_info", kPlanInfoV1);
  });
}

cubinrt_status cubinrt_decode_plan_launch(const cubinrt_decode_plan* plan, const cubinrt_decode_args* args, void* stream) {
  return boundary("cubinrt_decode_plan_launch", [&]() -> Status {
    if (plan == nullptr) return fail(Errc::invalid_argument, "cubinrt_decode_plan_launch: the plan is NULL");
    const cubinrt_decode_args c = CUBINRT_TRY(read_struct(args, "cubinrt_decode_args", kArgsV1));
    const DecodePlan& p = plan->plan;
    const DecodeShape& s = p.shape();
    const int ordinal = p.runtime().device().ordinal;
    const int64_t B = s.batch, Hq = s.num_q_heads, Hkv = s.num_kv_heads, D = s.head_dim, P = s.page_size;
    const Elem q_elem = elem_of(s.q_dtype), kv_elem = elem_of(s.kv_storage);
    const bool nvfp4 = s.kv_declared == Dtype::nvfp4;

    DecodeArgs a;
    const std::array<int64_t, 3> q_shape{B, Hq, D};
    const Strides q = CUBINRT_TRY(check_tensor(kLaunch, "q", c.q, q_elem, q_shape, ordinal, true));
    const Strides out = CUBINRT_TRY(check_tensor(kLaunch, "out", c.out, q_elem, q_shape, ordinal, true));
    // K and V: the page count is theirs (the cache's size); the rest is the plan's.
    const int64_t pages = c.k.ndim == 4 ? c.k.shape[0] : 0;
    const bool nhd = s.layout == KvLayout::nhd;
    // Rows of head_dim elements, NVFP4's of head_dim / 2 bytes and its scales' of head_dim / 16.
    const auto kv_shape = [&](int64_t row) { return nhd ? std::array<int64_t, 4>{pages, P, Hkv, row} : std::array<int64_t, 4>{pages, Hkv, P, row}; };
    const Strides k = CUBINRT_TRY(check_tensor(kLaunch, "k", c.k, kv_elem, kv_shape(nvfp4 ? D / 2 : D), ordinal, true));
    const Strides v = CUBINRT_TRY(check_tensor(kLaunch, "v", c.v, kv_elem, kv_shape(nvfp4 ? D / 2 : D), ordinal, true));
    if (nvfp4) {
      a.kv.sf_strides = CUBINRT_TRY(check_nvfp4_scales(kLaunch, c.k_sf, c.v_sf, kv_shape(D / 16), ordinal, nhd));
      a.kv.k_sf = c.k_sf.data;
      a.kv.v_sf = c.v_sf.data;
      a.kv.v_sf_order = s.v_sf_order;
    }
    const Strides table = CUBINRT_TRY(check_tensor(kLaunch, "block_table", c.block_table, Elem::int32, std::array<int64_t, 2>{B, s.block_table_stride}, ordinal));
    if ((B > 1 && table.v[0] != s.block_table_stride) || (s.block_table_stride > 1 && table.v[1] != 1))
      return fail(Errc::invalid_argument, fmt::format("paged decode launch: block_table has strides ({}, {}); its rows must be contiguous "
                                                      "and {} entries apart (the plan's block_table_stride)",
                                                      table.v[0], table.v[1], s.block_table_stride));
    const Strides lens = CUBINRT_TRY(check_tensor(kLaunch, "seq_lens", c.seq_lens, Elem::int32, std::array<int64_t, 1>{B}, ordinal));
    if (B > 1 && lens.v[0] != 1)
      return fail(Errc::invalid_argument, fmt::format("paged decode launch: seq_lens has stride {}; it must be contiguous", lens.v[0]));
    if (c.lse.data != nullptr) {
      const Strides lse = CUBINRT_TRY(check_tensor(kLaunch, "lse", c.lse, Elem::float32, std::array<int64_t, 2>{B, Hq}, ordinal));
      a.lse = static_cast<float*>(c.lse.data);
      a.lse_strides = {lse.v[0], lse.v[1]};
    }
    a.q = c.q.data;
    a.q_strides = {q.v[0], q.v[1]};
    a.out = c.out.data;
    a.out_strides = {out.v[0], out.v[1]};
    a.kv.k = c.k.data;
    a.kv.v = c.v.data;
    a.kv.storage = s.kv_storage;
    if (c.kv_declared != 0) a.kv.declared = CUBINRT_TRY(dtype_of(c.kv_declared, "cubinrt_decode_args.kv_declared"));
    a.kv.k_scale = c.k_scale != 0.f ? c.k_scale : 1.f;
    a.kv.v_scale = c.v_scale != 0.f ? c.v_scale : 1.f;
    a.kv.layout = s.layout;
    a.kv.page_size = s.page_size;
    a.kv.num_kv_heads = s.num_kv_heads;
    a.kv.num_pages = pages;
    a.kv.k_strides = kv_strides_in_layout(k, nhd);
    a.kv.v_strides = kv_strides_in_layout(v, nhd);
    a.block_table = static_cast<const int32_t*>(c.block_table.data);
    a.seq_lens = static_cast<const int32_t*>(c.seq_lens.data);
    a.softmax_scale = c.softmax_scale;
    a.workspace = c.workspace;
    a.workspace_bytes = c.workspace_bytes;
    return p.launch(a, static_cast<CUstream_st*>(stream));
  });
}

}  // extern "C"
