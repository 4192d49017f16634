#include "families/kv_append/known_answer.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "common/try.hpp"
#include "cubinrt/kv_append.hpp"
#include "driver/device_memory.hpp"

namespace cubinrt::kv_append {

namespace {

constexpr uint8_t kPoison = 0xa5;
size_t align256(size_t n) { return (n + 255) / 256 * 256; }

}  // namespace

Result<HostCache> run_on_device(const Runtime& runtime, const Problem& p) {
  const DriverApi& d = runtime.driver();
  const bool nvfp4 = p.cache_dtype == Dtype::nvfp4, narrow = nvfp4 || p.cache_dtype == Dtype::fp8_e4m3 || p.cache_dtype == Dtype::fp8_e5m2;
  KvAppendShape shape{.num_kv_heads = static_cast<uint32_t>(p.num_kv_heads), .head_dim = static_cast<uint32_t>(p.head_dim), .in_dtype = p.in_dtype,
                      .cache_storage = narrow ? Dtype::uint8 : p.cache_dtype, .cache_declared = narrow ? std::optional<Dtype>(p.cache_dtype) : std::nullopt,
                      .page_size = static_cast<uint32_t>(p.page_size)};
  const KvAppendPlan plan = CUBINRT_TRY(KvAppendPlan::create(runtime, shape));
  // One arena: inputs, slots, then the four cache buffers (poisoned, so a byte written where it
  // should not be, or not written where it should, shows).
  const size_t in_bytes = p.k_in.size() * 2, data = cache_bytes(p), sf = sf_bytes(p);
  const size_t k_at = 0, v_at = align256(in_bytes), slots_at = v_at + align256(in_bytes), kc_at = slots_at + align256(p.slots.size() * 8);
  const size_t vc_at = kc_at + align256(data), ks_at = vc_at + align256(data), vs_at = ks_at + align256(sf), end = vs_at + align256(sf);
  std::vector<uint8_t> staging(end, kPoison);
  std::memcpy(staging.data() + k_at, p.k_in.data(), in_bytes);
  std::memcpy(staging.data() + v_at, p.v_in.data(), in_bytes);
  std::memcpy(staging.data() + slots_at, p.slots.data(), p.slots.size() * 8);
  CUBINRT_TRY(runtime.bind_context());
  const DeviceMemory memory = CUBINRT_TRY(DeviceMemory::allocate(d, end, fmt::format("{}: {} bytes for a kv_append known answer", runtime.device().str(), end)));
  const CUdeviceptr base = memory.get();
  CUBINRT_TRY(d.check(d.cuMemcpyHtoD(base, staging.data(), end), "cuMemcpyHtoD", "kv_append inputs"));
  auto dev = [&](size_t off) { return reinterpret_cast<void*>(base + off); };
  KvAppendArgs a;
  a.k = dev(k_at);
  a.v = dev(v_at);
  a.slots = static_cast<const int64_t*>(dev(slots_at));
  a.num_tokens = static_cast<uint32_t>(p.num_tokens());
  a.cache.k = dev(kc_at);
  a.cache.v = dev(vc_at);
  a.cache.storage = shape.cache_storage;
  a.cache.declared = shape.cache_declared;
  a.cache.k_scale = p.k_scale;
  a.cache.v_scale = p.v_scale;
  a.cache.page_size = shape.page_size;
  a.cache.num_kv_heads = shape.num_kv_heads;
  a.cache.num_pages = p.num_pages;
  a.cache.k_strides = a.cache.v_strides = p.cache_strides;
  if (nvfp4) {
    a.cache.k_sf = dev(ks_at);
    a.cache.v_sf = dev(vs_at);
    a.cache.sf_strides = p.sf_strides;
    a.cache.v_sf_order = p.v_sf_order;
  }
  CUBINRT_TRY(plan.launch(a, nullptr));
  CUBINRT_TRY(d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", "after a kv_append launch"));
  CUBINRT_TRY(d.check(d.cuMemcpyDtoH(staging.data(), base, end), "cuMemcpyDtoH", "kv_append results"));
  HostCache out;
  out.k.assign(staging.begin() + kc_at, staging.begin() + kc_at + data);
  out.v.assign(staging.begin() + vc_at, staging.begin() + vc_at + data);
  out.k_sf.assign(staging.begin() + ks_at, staging.begin() + ks_at + sf);
  out.v_sf.assign(staging.begin() + vs_at, staging.begin() + vs_at + sf);
  return out;
}

Result<ByteCheck> check_against_reference(const Runtime& runtime, Problem p) {
  ByteCheck out;
  // NVFP4 writes its V scales in either order (ScaleOrder): both are checked.
  for (const ScaleOrder order : {ScaleOrder::linear, ScaleOrder::interleaved4}) {
    if (order != ScaleOrder::linear && p.cache_dtype != Dtype::nvfp4) break;
    p.v_sf_order = order;
    const HostCache got = CUBINRT_TRY(run_on_device(runtime, p));
    HostCache want{std::vector<uint8_t>(cache_bytes(p), kPoison), std::vector<uint8_t>(cache_bytes(p), kPoison),
                   std::vector<uint8_t>(sf_bytes(p), kPoison), std::vector<uint8_t>(sf_bytes(p), kPoison)};
    append(p, want);
    for (auto [g, w] : {std::pair{&got.k, &want.k}, {&got.v, &want.v}, {&got.k_sf, &want.k_sf}, {&got.v_sf, &want.v_sf}}) {
      out.total += w->size();
      for (size_t i = 0; i < w->size(); ++i) out.wrong += (*g)[i] != (*w)[i];
    }
  }
  return out;
}

Result<std::vector<KnownAnswer>> known_answer_tests(const Runtime& runtime, std::span<const KernelKey> keys) {
  std::vector<KnownAnswer> out;
  for (const KernelKey& key : keys) {
    const Dtype in = CUBINRT_TRY(parse_dtype(key.axis("in_dtype")));
    const Dtype cache = CUBINRT_TRY(parse_dtype(key.axis("cache_dtype")));
    const ByteCheck c = CUBINRT_TRY(check_against_reference(runtime, make_problem(in, cache, 37, 0x4b56 + static_cast<uint64_t>(cache))));
    out.push_back({static_cast<double>(c.wrong) / static_cast<double>(std::max<size_t>(c.total, 1)), 0.0,
                   fmt::format("{} of {} cache bytes differ from the reference's", c.wrong, c.total)});
  }
  return out;
}

}  // namespace cubinrt::kv_append
