// The paged decode known answer: reference problems through the device (upload, plan, launch,
// read back) against the float64 reference.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "common/try.hpp"
#include "driver/device_memory.hpp"
#include "families/paged_decode/family_parts.hpp"
#include "families/paged_decode/known_answer.hpp"
#include "families/paged_decode/planner.hpp"
#include "loader/loaded_kernel.hpp"

namespace cubinrt::paged_decode {

namespace {

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

// Where one problem's buffers sit in the shared device arena.
struct Placement {
  DecodePlan plan;
  size_t q, k, v, k_sf, v_sf, table, lens, out, lse, ws, end;
};

}  // namespace

DecodeShape launch_shape(const DecodeShape& problem_shape, Dtype kv_dtype, std::optional<Dtype> declare_kv_as, int num_splits,
                         SplitMerge merge) {
  const bool bytes = dtype_bits(kv_dtype) < 16;  // FP8 and NVFP4 live in uint8 storage
  DecodeShape shape = problem_shape;
  shape.kv_storage = bytes ? Dtype::uint8 : kv_dtype;
  shape.kv_declared = bytes ? std::optional<Dtype>(declare_kv_as.value_or(kv_dtype)) : declare_kv_as;
  shape.num_splits = num_splits;
  shape.merge = merge;
  return shape;
}

Result<std::vector<DeviceResult>> run_on_device(const Runtime& runtime, const std::vector<const ref::Problem*>& problems,
                                                std::optional<Dtype> declare_kv_as, int num_splits, SplitMerge merge) {
  const DriverApi& d = runtime.driver();
  // Plan every problem and lay all buffers out in one arena: one allocation, one copy each way,
  // one synchronisation, whatever the number of problems.
  std::vector<Placement> places;
  size_t at = 0;
  for (const ref::Problem* pp : problems) {
    const ref::Problem& p = *pp;
    const DecodeShape shape = launch_shape(p.shape, p.kv_dtype, declare_kv_as, num_splits, merge);
    Placement pl{CUBINRT_TRY(DecodePlan::create(runtime, shape)), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    const size_t out_elems = size_t{p.shape.batch} * p.shape.num_q_heads * p.shape.head_dim;
    pl.q = at;
    pl.k = align256(pl.q + p.q.size());
    pl.v = align256(pl.k + p.k.size());
    pl.k_sf = align256(pl.v + p.v.size());
    pl.v_sf = align256(pl.k_sf + p.k_sf.size());
    pl.table = align256(pl.v_sf + p.v_sf.size());
    pl.lens = align256(pl.table + p.block_table.size() * 4);
    pl.out = align256(pl.lens + p.seq_lens.size() * 4);
    pl.lse = align256(pl.out + out_elems * 2);
    pl.ws = align256(pl.lse + size_t{p.shape.batch} * p.shape.num_q_heads * 4);
    pl.end = at = align256(pl.ws + pl.plan.workspace_bytes());
    places.push_back(std::move(pl));
  }
  // Inputs as made; outputs poisoned (0xff.. is NaN in fp16, bf16 and fp32) so an unwritten
  // element fails; workspaces zeroed.
  std::vector<uint8_t> staging(at, 0);
  for (size_t i = 0; i < problems.size(); ++i) {
    const ref::Problem& p = *problems[i];
    const Placement& pl = places[i];
    std::memcpy(staging.data() + pl.q, p.q.data(), p.q.size());
    std::memcpy(staging.data() + pl.k, p.k.data(), p.k.size());
    std::memcpy(staging.data() + pl.v, p.v.data(), p.v.size());
    if (!p.k_sf.empty()) std::memcpy(staging.data() + pl.k_sf, p.k_sf.data(), p.k_sf.size());
    if (!p.v_sf.empty()) std::memcpy(staging.data() + pl.v_sf, p.v_sf.data(), p.v_sf.size());
    std::memcpy(staging.data() + pl.table, p.block_table.data(), p.block_table.size() * 4);
    std::memcpy(staging.data() + pl.lens, p.seq_lens.data(), p.seq_lens.size() * 4);
    std::memset(staging.data() + pl.out, 0xff, pl.ws - pl.out);
  }
  CUBINRT_TRY(runtime.bind_context());
  const DeviceMemory memory =
      CUBINRT_TRY(DeviceMemory::allocate(d, std::max<size_t>(at, 256), fmt::format("{}: {} bytes for {} paged decode known-answer problems", runtime.device().str(), at, problems.size())));
  const CUdeviceptr arena = memory.get();
  CUBINRT_TRY(d.check(d.cuMemcpyHtoD(arena, staging.data(), at), "cuMemcpyHtoD", "problem inputs"));
  auto dev = [&](size_t off) { return reinterpret_cast<void*>(arena + off); };
  for (size_t i = 0; i < problems.size(); ++i) {
    const ref::Problem& p = *problems[i];
    const Placement& pl = places[i];
    const DecodeShape& s = pl.plan.shape();
    DecodeArgs a;
    a.q = dev(pl.q);
    a.kv.k = dev(pl.k);
    a.kv.v = dev(pl.v);
    a.kv.storage = s.kv_storage;
    a.kv.declared = s.kv_declared;
    a.kv.k_scale = p.k_scale;
    a.kv.v_scale = p.v_scale;
    a.kv.k_sf = p.k_sf.empty() ? nullptr : dev(pl.k_sf);
    a.kv.v_sf = p.v_sf.empty() ? nullptr : dev(pl.v_sf);
    a.kv.v_sf_order = s.v_sf_order;
    a.kv.layout = s.layout;
    a.kv.page_size = s.page_size;
    a.kv.num_kv_heads = s.num_kv_heads;
    a.kv.num_pages = p.num_pages;
    a.block_table = static_cast<const int32_t*>(dev(pl.table));
    a.seq_lens = static_cast<const int32_t*>(dev(pl.lens));
    a.out = dev(pl.out);
    a.lse = static_cast<float*>(dev(pl.lse));
    a.softmax_scale = p.softmax_scale;
    a.workspace = pl.plan.workspace_bytes() ? dev(pl.ws) : nullptr;
    a.workspace_bytes = pl.plan.workspace_bytes();
    CUBINRT_TRY(pl.plan.launch(a, nullptr));
  }
  CUBINRT_TRY(d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", fmt::format("after {} kernel launches", problems.size())));
  CUBINRT_TRY(d.check(d.cuMemcpyDtoH(staging.data(), arena, at), "cuMemcpyDtoH", "results"));
  std::vector<DeviceResult> results;
  for (size_t i = 0; i < problems.size(); ++i) {
    const Placement& pl = places[i];
    const DecodeShape& s = problems[i]->shape;
    const size_t lse_n = size_t{s.batch} * s.num_q_heads, out_bytes = lse_n * s.head_dim * 2;
    DeviceResult r;
    r.out.assign(staging.begin() + static_cast<ptrdiff_t>(pl.out), staging.begin() + static_cast<ptrdiff_t>(pl.out + out_bytes));
    r.lse.resize(lse_n);
    r.kernel = pl.plan.kernel().entry;
    std::memcpy(r.lse.data(), staging.data() + pl.lse, lse_n * 4);
    results.push_back(std::move(r));
  }
  return results;
}

Result<DeviceResult> run_on_device(const Runtime& runtime, const ref::Problem& problem, std::optional<Dtype> declare_kv_as, int num_splits,
                                   SplitMerge merge) {
  auto r = CUBINRT_TRY(run_on_device(runtime, std::vector<const ref::Problem*>{&problem}, declare_kv_as, num_splits, merge));
  return std::move(r.front());
}

namespace {

// Small enough for the host reference to take well under a millisecond, large enough to cross
// pages, group q heads and split the KV range: 2 sequences of ragged lengths. The group is 4 q
// heads per kv head, or 12 for a 16-head kernel (over 8, so the plan takes that kernel, and with
// both rows of its q.K tile in use, the second one partly), or 4 for each of 2 kv heads in NHD
// pages for a kernel that pairs them (both halves of its row); V's scales are in the family's order.
Result<ref::Problem> known_answer_problem(const KernelKey& key) {
  const auto head_dim = CUBINRT_TRY(axis_number(key, "head_dim"));
  const auto page_size = CUBINRT_TRY(axis_number(key, "page_size"));
  DecodeShape s;
  s.batch = 2;
  const bool pairs = key.family == kKvPairFamily;
  s.num_q_heads = is_g16_family(key.family) ? 12 : pairs ? 8 : 4;
  s.num_kv_heads = pairs ? 2 : 1;
  s.layout = KvLayout::nhd;
  s.head_dim = head_dim;
  s.q_dtype = CUBINRT_TRY(parse_dtype(key.axis("q_dtype")));
  s.page_size = page_size;
  s.block_table_stride = 3;
  const auto long_len = static_cast<int32_t>(2 * page_size + 5), short_len = 7;
  ref::Problem p = ref::make_problem(s, CUBINRT_TRY(parse_dtype(key.axis("kv_dtype"))), {long_len, short_len}, 0x5e1fc4ec + head_dim * 131 + page_size);
  if (is_vsf_interleaved_family(key.family)) ref::reorder_v_scales(p, ScaleOrder::interleaved4);
  return p;
}

}  // namespace

Result<std::vector<KnownAnswer>> known_answer_tests(const Runtime& runtime, std::span<const KernelKey> keys,
                                                    std::optional<Dtype> reference_kv_as) {
  std::vector<ref::Problem> problems;
  for (const KernelKey& key : keys) problems.push_back(CUBINRT_TRY(known_answer_problem(key)));
  std::vector<const ref::Problem*> ptrs;
  for (const ref::Problem& p : problems) ptrs.push_back(&p);
  // Both ways of merging the 2 splits where the kernels can cluster (the planner merges up to 8
  // splits in a cluster, more through the workspace); the worse error counts.
  const auto results = CUBINRT_TRY(run_on_device(runtime, ptrs, std::nullopt, /*num_splits=*/2, SplitMerge::workspace));
  const bool cluster = std::ranges::all_of(keys, [&](const KernelKey& key) {
    const ManifestEntry* e = runtime.selected(key);
    return e && supports_cluster_merge(runtime.device(), *e);
  });
  std::vector<DeviceResult> clustered;
  if (cluster) clustered = CUBINRT_TRY(run_on_device(runtime, ptrs, std::nullopt, /*num_splits=*/2, SplitMerge::cluster));
  std::vector<KnownAnswer> answers;
  for (size_t i = 0; i < keys.size(); ++i) {
    const ref::Problem& p = problems[i];
    const ref::Answer want = ref::solve(p, reference_kv_as.value_or(p.kv_dtype));
    double out = ref::rel_l2(p.shape.q_dtype, results[i].out, want.out);
    double lse = ref::rel_l2(results[i].lse, want.lse);
    if (cluster) {
      out = std::max(out, ref::rel_l2(p.shape.q_dtype, clustered[i].out, want.out));
      lse = std::max(lse, ref::rel_l2(clustered[i].lse, want.lse));
    }
    KnownAnswer k;
    // NaN stays NaN through max only when it comes first: a NaN output must fail.
    k.error = std::isnan(out) || std::isnan(lse) ? NAN : std::max(out, lse);
    k.tolerance = ref::tolerance(p.shape.q_dtype);
    k.detail = fmt::format("output {:.3g}, lse {:.3g}, {} output", out, lse, dtype_name(p.shape.q_dtype));
    // An answer counts for the key's kernel only if the plan took that kernel (a plan rule that
    // no longer picks it would otherwise pass another kernel's answer off as its own).
    if (results[i].kernel == nullptr || !(results[i].kernel->key == keys[i])) {
      k.error = NAN;
      k.detail = fmt::format("the plan for this key's problem took kernel {}, not this one", results[i].kernel ? results[i].kernel->id : "none");
    }
    answers.push_back(std::move(k));
  }
  return answers;
}

}  // namespace cubinrt::paged_decode
