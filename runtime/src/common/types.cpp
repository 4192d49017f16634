#include <charconv>

#include <fmt/format.h>

#include "common/version.hpp"
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
#define CUBINRT_DTYPE_NAME_(name, code, bits, kind) \
  case Dtype::name: return #name;
    CUBINRT_DTYPES(CUBINRT_DTYPE_NAME_)
#undef CUBINRT_DTYPE_NAME_
  }
  return "unknown";
}

Result<Dtype> parse_dtype(std::string_view text) {
#define CUBINRT_DTYPE_PARSE_(name, code, bits, kind) \
  if (text == #name) return Dtype::name;
  CUBINRT_DTYPES(CUBINRT_DTYPE_PARSE_)
#undef CUBINRT_DTYPE_PARSE_
  std::string names;
#define CUBINRT_DTYPE_LIST_(name, code, bits, kind) names += fmt::format("{}{}", names.empty() ? "" : ", ", #name);
  CUBINRT_DTYPES(CUBINRT_DTYPE_LIST_)
#undef CUBINRT_DTYPE_LIST_
  return fail(Errc::invalid_argument, fmt::format("'{}' is not a dtype ({})", text, names));
}

uint32_t dtype_bits(Dtype d) { return CUBINRT_DTYPE_BITS(static_cast<int>(d)); }

std::string cuda_version_text(int v) { return fmt::format("{}.{}", v / 1000, v % 1000 / 10); }

std::string_view KernelKey::axis(std::string_view name) const {
  for (const auto& [n, v] : axes)
    if (n == name) return v;
  return {};
}

std::string KernelKey::str() const {
  std::string s;
  for (const auto& [n, v] : axes) s += fmt::format("{}{}={}", s.empty() ? "" : " ", n, v);
  return s;
}

}  // namespace cubinrt
