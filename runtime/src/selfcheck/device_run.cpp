// Moves a reference problem through the device: upload, plan, launch, read back.
#include <cstring>

#include <fmt/format.h>

#include "common/try.hpp"
#include "cubinrt/driver.hpp"
#include "cubinrt/selfcheck.hpp"

namespace cubinrt {

namespace {

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

// Where one problem's buffers sit in the shared device arena.
struct Placement {
  DecodePlan plan;
  size_t q, k, v, table, lens, out, lse, ws, end;
};

}  // namespace

Result<std::vector<DeviceResult>> run_on_device(const Runtime& runtime, const std::vector<const ref::Problem*>& problems,
                                                std::optional<Dtype> declare_kv_as, int num_splits, SplitMerge merge) {
  const DriverApi& d = runtime.driver();
  // Plan every problem and lay all buffers out in one arena: one allocation, one copy each way,
  // one synchronisation, whatever the number of problems.
  std::vector<Placement> places;
  size_t at = 0;
  for (const ref::Problem* pp : problems) {
    const ref::Problem& p = *pp;
    const bool fp8 = dtype_bits(p.kv_dtype) == 8;
    DecodeShape shape = p.shape;
    shape.kv_storage = fp8 ? Dtype::uint8 : p.kv_dtype;
    shape.kv_declared = fp8 ? std::optional<Dtype>(declare_kv_as.value_or(p.kv_dtype)) : declare_kv_as;
    shape.num_splits = num_splits;
    shape.merge = merge;
    Placement pl{CUBINRT_TRY(DecodePlan::create(runtime, shape)), 0, 0, 0, 0, 0, 0, 0, 0, 0};
    const size_t out_elems = size_t{p.shape.batch} * p.shape.num_q_heads * p.shape.head_dim;
    pl.q = at;
    pl.k = align256(pl.q + p.q.size());
    pl.v = align256(pl.k + p.k.size());
    pl.table = align256(pl.v + p.v.size());
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
    std::memcpy(staging.data() + pl.table, p.block_table.data(), p.block_table.size() * 4);
    std::memcpy(staging.data() + pl.lens, p.seq_lens.data(), p.seq_lens.size() * 4);
    std::memset(staging.data() + pl.out, 0xff, pl.ws - pl.out);
  }
  CUBINRT_TRY(runtime.bind_context());
  CUdeviceptr arena = 0;
  CUBINRT_TRY(d.check(d.cuMemAlloc(&arena, std::max<size_t>(at, 256)), "cuMemAlloc", fmt::format("{} bytes for {} problems", at, problems.size())));
  struct Free {
    const DriverApi& d;
    CUdeviceptr p;
    ~Free() { d.cuMemFree(p); }
  } free_arena{d, arena};
  CUBINRT_TRY(d.check(d.cuMemcpyHtoD(arena, staging.data(), at), "cuMemcpyHtoD", "problem inputs"));
  auto dev = [&](size_t off) { return reinterpret_cast<void*>(arena + off); };
  for (size_t i = 0; i < problems.size(); ++i) {
    const ref::Problem& p = *problems[i];
    const Placement& pl = places[i];
    const DecodeShape& s = pl.plan.shape();
    DecodeArgs a;
    a.q = dev(pl.q);
    a.kv = {dev(pl.k), dev(pl.v), s.kv_storage, s.kv_declared, p.k_scale, p.v_scale, nullptr, s.layout, s.page_size, s.num_kv_heads, p.num_pages};
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

}  // namespace cubinrt
