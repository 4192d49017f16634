// kv_append's plan and launch: the kernel resolved once, each launch's tensors checked (dtypes,
// alignment, strides, the device) before a parameter fill and one cuLaunchKernelEx.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "common/kv_strides.hpp"
#include "common/strided_view.hpp"
#include "common/try.hpp"
#include "cubinrt/kv_append.hpp"
#include "driver/driver.hpp"
#include "driver/launch_attributes.hpp"
#include "driver/launch_target.hpp"
#include "families/kv_append/family_parts.hpp"
#include "families/kv_append/kv_append_abi.h"
#include "loader/loaded_kernel.hpp"

namespace cubinrt {

namespace {

constexpr std::string_view kLaunch = "kv_append launch";

// The cache's logical dtype from storage and declaration, never guessed from storage alone.
Result<Dtype> resolve_cache_dtype(const KvAppendShape& s) {
  auto bad = [](std::string m) { return fail(Errc::invalid_argument, "kv_append: " + m); };
  if (s.in_dtype != Dtype::fp16 && s.in_dtype != Dtype::bf16)
    return bad(fmt::format("the new tokens' dtype {} is not supported (fp16 or bf16)", dtype_name(s.in_dtype)));
  if (s.cache_storage == Dtype::uint8) {
    if (!s.cache_declared)
      return bad("the cache is uint8 storage with no declared dtype; declare fp8_e4m3, fp8_e5m2 or nvfp4 (cubinrt never infers the encoding "
                 "from storage)");
    const Dtype d = *s.cache_declared;
    if (d != Dtype::fp8_e4m3 && d != Dtype::fp8_e5m2 && d != Dtype::nvfp4)
      return bad(fmt::format("uint8 storage cannot hold a {} cache", dtype_name(d)));
    return d;
  }
  if (s.cache_declared && *s.cache_declared != s.cache_storage)
    return bad(fmt::format("storage is {} but the declared dtype is {}; FP8 and NVFP4 caches are declared on uint8 storage",
                           dtype_name(s.cache_storage), dtype_name(*s.cache_declared)));
  if (s.cache_storage != s.in_dtype)
    return bad(fmt::format("a {} cache takes {} tokens ({} given): 16-bit caches are written as they come", dtype_name(s.cache_storage),
                           dtype_name(s.cache_storage), dtype_name(s.in_dtype)));
  return s.cache_storage;
}

}  // namespace

KernelKey kv_append_key(Dtype in_dtype, Dtype cache_dtype) {
  return {std::string(kv_append::kFamily), {{"in_dtype", std::string(dtype_name(in_dtype))}, {"cache_dtype", std::string(dtype_name(cache_dtype))}}};
}

Result<KvAppendPlan> KvAppendPlan::create(const Runtime& runtime, const KvAppendShape& s) {
  if (s.num_kv_heads == 0 || s.head_dim == 0 || s.page_size == 0)
    return fail(Errc::invalid_argument, fmt::format("kv_append: num_kv_heads {}, head_dim {} and page_size {} must all be positive", s.num_kv_heads,
                                                    s.head_dim, s.page_size));
  if (s.head_dim % CUBINRT_KV_APPEND_CHUNK != 0 || s.head_dim > 4096)
    return fail(Errc::invalid_argument,
                fmt::format("kv_append: head_dim {} is not a multiple of {} up to 4096 (each thread takes {} elements: one NVFP4 scale block)",
                            s.head_dim, CUBINRT_KV_APPEND_CHUNK, CUBINRT_KV_APPEND_CHUNK));
  if (s.num_kv_heads > 65536 || s.page_size > 65536)
    return fail(Errc::invalid_argument, fmt::format("kv_append: num_kv_heads {} and page_size {} must be at most 65536", s.num_kv_heads, s.page_size));
  KvAppendPlan plan;
  plan.runtime_ = &runtime;
  plan.shape_ = s;
  plan.cache_dtype_ = CUBINRT_TRY(resolve_cache_dtype(s));
  plan.kernel_ = CUBINRT_TRY(runtime.kernel(kv_append_key(s.in_dtype, plan.cache_dtype_)));
  plan.overlap_ = takes_overlap(s.overlap, *plan.kernel_);
  plan.param_bytes_ = kv_append::abi_v2().param_bytes;
  return plan;
}

Status KvAppendPlan::launch(const KvAppendArgs& a, CUstream_st* stream) const {
  const KvAppendShape& s = shape_;
  auto bad = [](std::string m) { return fail(Errc::invalid_argument, fmt::format("{}: {}", kLaunch, m)); };
  if (a.num_tokens == 0) return {};
  // The kernel indexes 16-element chunks in 32 bits (kv_append_abi.h).
  const uint64_t chunks = uint64_t{a.num_tokens} * s.num_kv_heads * 2 * (s.head_dim / CUBINRT_KV_APPEND_CHUNK);
  if (chunks >= (uint64_t{1} << 31))
    return bad(fmt::format("{} tokens of {} kv heads of {} are more than one launch takes (at most 2^31 chunks of 16 elements); split them",
                           a.num_tokens, s.num_kv_heads, s.head_dim));
  const KvCacheDesc& c = a.cache;
  if (!a.k || !a.v || !a.slots || !c.k || !c.v) return bad("k, v, slots, cache.k and cache.v must all be non-null");
  if (c.storage != s.cache_storage || c.declared != s.cache_declared)
    return bad(fmt::format("the cache descriptor's dtype (storage {}, declared {}) is not the plan's (storage {}, declared {})", dtype_name(c.storage),
                           c.declared ? dtype_name(*c.declared) : "none", dtype_name(s.cache_storage),
                           s.cache_declared ? dtype_name(*s.cache_declared) : "none"));
  if (c.page_size != s.page_size || c.num_kv_heads != s.num_kv_heads || c.layout != s.layout)
    return bad(fmt::format("the cache descriptor (page_size {}, {} kv heads) is not the plan's (page_size {}, {} kv heads) or its layout differs",
                           c.page_size, c.num_kv_heads, s.page_size, s.num_kv_heads));
  if (c.num_pages <= 0 || c.num_pages > (int64_t{1} << 40) / s.page_size) return bad(fmt::format("cache.num_pages {} is out of range", c.num_pages));
  const bool nvfp4 = cache_dtype_ == Dtype::nvfp4, fp8 = cache_dtype_ == Dtype::fp8_e4m3 || cache_dtype_ == Dtype::fp8_e5m2;
  if ((fp8 || nvfp4) && !(c.k_scale > 0.f && c.v_scale > 0.f && std::isfinite(c.k_scale) && std::isfinite(c.v_scale)))
    return bad(fmt::format("cache.k_scale {} and cache.v_scale {} must be positive and finite for a {} cache", c.k_scale, c.v_scale,
                           dtype_name(cache_dtype_)));
  if (nvfp4 && (!c.k_sf || !c.v_sf)) return bad("an nvfp4 cache needs its block scales: cache.k_sf and cache.v_sf");
  CUBINRT_TRY(check_scale_order(kLaunch, c.v_sf_order, nvfp4, s.page_size, s.head_dim));

  const int64_t H = s.num_kv_heads, D = s.head_dim, P = s.page_size, T = a.num_tokens, pages = c.num_pages;
  const int64_t in_bytes = 2, store_bytes = nvfp4 || fp8 ? 1 : 2, row = nvfp4 ? D / 2 : D, sf_row = D / CUBINRT_KV_APPEND_CHUNK;
  auto tokens = [&](TokenStrides t) { return t.token == 0 && t.head == 0 ? TokenStrides{H * D, D} : t; };
  const TokenStrides ks = tokens(a.k_strides), vs = tokens(a.v_strides);
  const KvStrides kc = resolve_kv_strides(c.k_strides, s.layout, P, H, row), vc = resolve_kv_strides(c.v_strides, s.layout, P, H, row),
                  sf = resolve_kv_strides(c.sf_strides, s.layout, P, H, sf_row);
  CUBINRT_TRY(check_view(kLaunch, "k", a.k, 16, std::array{ViewDim{"token", T, ks.token}, ViewDim{"head", H, ks.head}}, D, in_bytes, 16));
  CUBINRT_TRY(check_view(kLaunch, "v", a.v, 16, std::array{ViewDim{"token", T, vs.token}, ViewDim{"head", H, vs.head}}, D, in_bytes, 16));
  const size_t cache_align = nvfp4 ? 8 : 16;
  const auto dims = [&](KvStrides x) { return std::array{ViewDim{"page", pages, x.page}, ViewDim{"token", P, x.token}, ViewDim{"head", H, x.head}}; };
  CUBINRT_TRY(check_view(kLaunch, "cache K", c.k, cache_align, dims(kc), row, store_bytes, static_cast<int64_t>(cache_align)));
  CUBINRT_TRY(check_view(kLaunch, "cache V", c.v, cache_align, dims(vc), row, store_bytes, static_cast<int64_t>(cache_align)));
  if (used_stride(pages, kc.page) != used_stride(pages, vc.page) || used_stride(P, kc.token) != used_stride(P, vc.token) ||
      used_stride(H, kc.head) != used_stride(H, vc.head))
    return bad(fmt::format("the cache's K strides (page {}, token {}, head {}) differ from V's (page {}, token {}, head {}); they are views of "
                           "one layout (as vLLM's cache[:, 0] and cache[:, 1] are)",
                           kc.page, kc.token, kc.head, vc.page, vc.token, vc.head));
  if (nvfp4) {
    CUBINRT_TRY(check_view(kLaunch, "cache K scales", c.k_sf, 1, dims(sf), sf_row, 1, 1));
    CUBINRT_TRY(check_view(kLaunch, "cache V scales", c.v_sf, 1, dims(sf), sf_row, 1, 1));
  }
  const LaunchTensor tensors[] = {{a.k, "k"}, {a.v, "v"}, {a.slots, "slots"}, {c.k, "cache.k"}, {c.v, "cache.v"},
                                  {nvfp4 ? c.k_sf : nullptr, "cache.k_sf"}, {nvfp4 ? c.v_sf : nullptr, "cache.v_sf"}};
  ContextGuard on_device = CUBINRT_TRY(enter_launch_target(*runtime_, stream, tensors, kLaunch));

  CubinrtKvAppendParamsV2 p{};
  p.k_in = a.k;
  p.v_in = a.v;
  p.slots = a.slots;
  p.k_cache = const_cast<void*>(c.k);  // the descriptor the decode reads is the one this writes
  p.v_cache = const_cast<void*>(c.v);
  p.k_sf = nvfp4 ? static_cast<uint8_t*>(const_cast<void*>(c.k_sf)) : nullptr;
  p.v_sf = nvfp4 ? static_cast<uint8_t*>(const_cast<void*>(c.v_sf)) : nullptr;
  p.k_in_stride_token = used_stride(T, ks.token);
  p.k_in_stride_head = used_stride(H, ks.head);
  p.v_in_stride_token = used_stride(T, vs.token);
  p.v_in_stride_head = used_stride(H, vs.head);
  p.cache_stride_page = used_stride(pages, kc.page);
  p.cache_stride_token = used_stride(P, kc.token);
  p.cache_stride_head = used_stride(H, kc.head);
  p.sf_stride_page = nvfp4 ? used_stride(pages, sf.page) : 0;
  p.sf_stride_token = nvfp4 ? used_stride(P, sf.token) : 0;
  p.sf_stride_head = nvfp4 ? used_stride(H, sf.head) : 0;
  p.num_slots = pages * P;
  p.k_scale = c.k_scale;
  p.v_scale = c.v_scale;
  p.num_tokens = static_cast<int32_t>(T);
  p.num_kv_heads = static_cast<int32_t>(H);
  p.head_dim = static_cast<int32_t>(D);
  p.page_size = static_cast<int32_t>(P);
  p.v_sf_order = nvfp4 && c.v_sf_order == ScaleOrder::interleaved4 ? CUBINRT_SCALE_ORDER_INTERLEAVED4 : CUBINRT_SCALE_ORDER_LINEAR;

  size_t size = param_bytes_;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &p, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  // One thread a work item (kv_append_abi.h: a chunk, or a chunk of K and of V when quantizing),
  // grid-stride past full waves of the kernel's occupancy.
  const int64_t wave = int64_t{std::max(1, runtime_->device().multiprocessors)} * std::max(1, kernel_->blocks_per_sm);
  CUlaunchConfig config{};
  config.gridDimX = static_cast<unsigned>(std::clamp<int64_t>((static_cast<int64_t>(cache_dtype_ == s.in_dtype ? chunks : chunks / 2) + kernel_->block_threads - 1) / kernel_->block_threads, 1, 4 * wave));
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = kernel_->block_threads;
  config.blockDimY = config.blockDimZ = 1;
  config.sharedMemBytes = kernel_->dynamic_shared;
  config.hStream = stream;
  LaunchAttributes attrs;
  if (overlap_) attrs.overlap_previous_kernel();
  attrs.apply(config);
  const DriverApi& d = runtime_->driver();
  const CUresult r = d.cuLaunchKernelEx(&config, kernel_->function, nullptr, extra);
  if (r == CUDA_SUCCESS) return on_device.leave(kLaunch);
  return d.check(r, "cuLaunchKernelEx", fmt::format("{}: kernel {}", runtime_->device().str(), kernel_->entry->symbol));
}

}  // namespace cubinrt
