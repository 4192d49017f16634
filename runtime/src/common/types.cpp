#include <charconv>

#include <fmt/format.h>

#include "cubinrt/types.hpp"

namespace cubinrt {

std::string Arch::str() const {
  const char* suffix = variant == Variant::accel ? "a" : variant == Variant::family ? "f" : "";
  return fmt::format("sm_{}{}", sm(), suffix);
}

Result<Arch> Arch::parse(std::string_view text) {
  std::string_view t = text;
  if (t.starts_with("sm_")) t.remove_prefix(3);
  Variant v = Variant::plain;
  if (t.ends_with('a')) v = Variant::accel, t.remove_suffix(1);
  else if (t.ends_with('f')) v = Variant::family, t.remove_suffix(1);
  uint32_t sm = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), sm);
  if (ec != std::errc() || end != t.data() + t.size() || sm < 10 || sm > 999)
    return fail(Errc::invalid_argument, fmt::format("'{}' is not an architecture (expected sm_<major><minor>[a|f], e.g. sm_90 or sm_100a)", text));
  return Arch::from_sm(sm, v);
}

std::string_view dtype_name(Dtype d) {
  switch (d) {
    case Dtype::fp16: return "fp16";
    case Dtype::bf16: return "bf16";
    case Dtype::fp8_e4m3: return "fp8_e4m3";
    case Dtype::fp8_e5m2: return "fp8_e5m2";
    case Dtype::nvfp4: return "nvfp4";
    case Dtype::uint8: return "uint8";
  }
  return "unknown";
}

Result<Dtype> parse_dtype(std::string_view text) {
  for (Dtype d : {Dtype::fp16, Dtype::bf16, Dtype::fp8_e4m3, Dtype::fp8_e5m2, Dtype::nvfp4, Dtype::uint8})
    if (dtype_name(d) == text) return d;
  return fail(Errc::invalid_argument, fmt::format("'{}' is not a dtype (fp16, bf16, fp8_e4m3, fp8_e5m2, nvfp4, uint8)", text));
}

uint32_t dtype_bits(Dtype d) {
  switch (d) {
    case Dtype::fp16:
    case Dtype::bf16: return 16;
    case Dtype::fp8_e4m3:
    case Dtype::fp8_e5m2:
    case Dtype::uint8: return 8;
    case Dtype::nvfp4: return 4;
  }
  return 0;
}

std::string cuda_version_text(int v) { return fmt::format("{}.{}", v / 1000, v % 1000 / 10); }

std::string KernelKey::str() const {
  return fmt::format("head_dim={} q={} kv={} page_size={}", head_dim, dtype_name(q_dtype), dtype_name(kv_dtype), page_size);
}

}  // namespace cubinrt
