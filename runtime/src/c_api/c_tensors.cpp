#include "c_api/c_tensors.hpp"

#include "common/try.hpp"

#include <string>

#include <fmt/format.h>

namespace cubinrt::c_api {

Elem elem_of(const cubinrt_tensor& t) {
  if (t.dtype_lanes != 1) return Elem::other;
  switch (t.dtype_code) {
    case CUBINRT_DL_FLOAT: return t.dtype_bits == 16 ? Elem::fp16 : t.dtype_bits == 32 ? Elem::float32 : Elem::other;
    case CUBINRT_DL_BFLOAT: return t.dtype_bits == 16 ? Elem::bf16 : Elem::other;
    case CUBINRT_DL_UINT: return t.dtype_bits == 8 ? Elem::uint8 : Elem::other;
    case CUBINRT_DL_INT: return t.dtype_bits == 32 ? Elem::int32 : t.dtype_bits == 64 ? Elem::int64 : Elem::other;
    case CUBINRT_DL_FLOAT8_E4M3FN: return t.dtype_bits == 8 ? Elem::fp8_e4m3 : Elem::other;
    case CUBINRT_DL_FLOAT8_E5M2: return t.dtype_bits == 8 ? Elem::fp8_e5m2 : Elem::other;
    default: return Elem::other;
  }
}

Elem elem_of(Dtype d) {
  switch (d) {
    case Dtype::fp16: return Elem::fp16;
    case Dtype::bf16: return Elem::bf16;
    case Dtype::fp8_e4m3: return Elem::fp8_e4m3;
    case Dtype::fp8_e5m2: return Elem::fp8_e5m2;
    case Dtype::uint8: return Elem::uint8;
    case Dtype::nvfp4: return Elem::other;
  }
  return Elem::other;
}

std::string_view elem_name(Elem e) {
  switch (e) {
    case Elem::fp16: return "float16";
    case Elem::bf16: return "bfloat16";
    case Elem::fp8_e4m3: return "float8_e4m3fn";
    case Elem::fp8_e5m2: return "float8_e5m2";
    case Elem::uint8: return "uint8";
    case Elem::int32: return "int32";
    case Elem::int64: return "int64";
    case Elem::float32: return "float32";
    case Elem::other: break;
  }
  return "another dtype";
}

namespace {
std::string shape_text(const int64_t* v, int n) {
  std::string s = "[";
  for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

Result<Strides> check_tensor(std::string_view launch, const char* name, const cubinrt_tensor& t, Elem want, std::span<const int64_t> shape, int ordinal,
                             bool rows) {
  auto bad = [&](std::string m) { return fail(Errc::invalid_argument, fmt::format("{}: {} {}", launch, name, m)); };
  if (t.data == nullptr) return bad("is missing (its data pointer is NULL)");
  if (t.device_type != CUBINRT_DL_CUDA && t.device_type != CUBINRT_DL_CUDA_MANAGED)
    return bad(fmt::format("is on DLPack device type {}{}, not CUDA: cubinrt reads device memory of CUDA device {}", t.device_type,
                           t.device_type == CUBINRT_DL_CPU ? " (CPU)" : "", ordinal));
  if (t.device_id != ordinal) return bad(fmt::format("is on CUDA device {}, but this runtime runs on device {}", t.device_id, ordinal));
  if (elem_of(t) != want)
    return bad(fmt::format("has dtype {} (DLPack code {}, {} bits, {} lanes); the plan takes {}", elem_name(elem_of(t)), t.dtype_code,
                           t.dtype_bits, t.dtype_lanes, elem_name(want)));
  const int n = static_cast<int>(shape.size());
  if (t.ndim != n) return bad(fmt::format("has {} dimensions; the plan takes {}: {}", t.ndim, n, shape_text(shape.data(), n)));
  bool mismatch = false;
  for (int i = 0; i < n; ++i) mismatch |= t.shape[i] != shape[i];
  if (mismatch) return bad(fmt::format("has shape {}; the plan takes {}", shape_text(t.shape, n), shape_text(shape.data(), n)));
  Strides s;
  bool all_zero = true;
  for (int i = 0; i < n; ++i) all_zero &= t.strides[i] == 0;
  if (all_zero) {
    int64_t step = 1;
    for (int i = n - 1; i >= 0; --i) s.v[i] = step, step *= t.shape[i];
    return s;
  }
  for (int i = 0; i < n; ++i) s.v[i] = t.strides[i];
  if (rows && t.shape[n - 1] > 1 && s.v[n - 1] != 1)
    return bad(fmt::format("has innermost stride {}; its last dimension must be contiguous (stride 1)", s.v[n - 1]));
  return s;
}

KvStrides kv_strides_in_layout(const Strides& s, bool nhd) {
  return nhd ? KvStrides{s.v[0], s.v[1], s.v[2]} : KvStrides{s.v[0], s.v[2], s.v[1]};
}

Result<KvStrides> check_nvfp4_scales(std::string_view launch, const cubinrt_tensor& k_sf, const cubinrt_tensor& v_sf,
                                     std::span<const int64_t> shape, int ordinal, bool nhd) {
  cubinrt_tensor k = k_sf, v = v_sf;
  if (elem_of(k) == Elem::fp8_e4m3) k.dtype_code = CUBINRT_DL_UINT;  // e4m3 scales as uint8 or float8_e4m3fn
  if (elem_of(v) == Elem::fp8_e4m3) v.dtype_code = CUBINRT_DL_UINT;
  const KvStrides ks = kv_strides_in_layout(CUBINRT_TRY(check_tensor(launch, "k_sf", k, Elem::uint8, shape, ordinal, true)), nhd);
  const KvStrides vs = kv_strides_in_layout(CUBINRT_TRY(check_tensor(launch, "v_sf", v, Elem::uint8, shape, ordinal, true)), nhd);
  if (ks.page != vs.page || ks.token != vs.token || ks.head != vs.head)
    return fail(Errc::invalid_argument, fmt::format("{}: k_sf and v_sf have different strides; they are views of one layout", launch));
  return ks;
}

}  // namespace cubinrt::c_api
