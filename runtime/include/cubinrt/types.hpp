// The vocabulary of kernel keys: architectures, dtypes and the key of a kernel.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cubinrt/dtypes.h"
#include "cubinrt/error.hpp"

namespace cubinrt {

// A GPU architecture as a cubin targets it: sm_<major><minor>[a|f].
struct Arch {
  enum class Variant : uint8_t { plain, accel /* 'a' */, family /* 'f' */ };
  uint32_t major = 0;
  uint32_t minor = 0;
  Variant variant = Variant::plain;

  uint32_t sm() const { return major * 10 + minor; }
  std::string str() const;  // "sm_90", "sm_100a"
  static Result<Arch> parse(std::string_view text);
  static Arch from_sm(uint32_t sm, Variant v = Variant::plain) { return {sm / 10, sm % 10, v}; }
  friend bool operator==(const Arch&, const Arch&) = default;
};

// Logical element types, from the one table kernels and host share (cubinrt/dtypes.h). KV's
// dtype is always declared, never inferred from storage.
enum class Dtype : uint8_t {
#define CUBINRT_DTYPE_ENUM_(name, code, bits, kind) name = code,
  CUBINRT_DTYPES(CUBINRT_DTYPE_ENUM_)
#undef CUBINRT_DTYPE_ENUM_
};
std::string_view dtype_name(Dtype d);
Result<Dtype> parse_dtype(std::string_view text);
uint32_t dtype_bits(Dtype d);

// Whether a family's launch may overlap the kernel before it on the same stream (programmatic
// dependent launch, compute capability 9.0 and later): its launch, block scheduling and set-up then
// run during that kernel's tail, and it waits for that kernel's end and writes before it reads or
// writes memory, so what it computes is the same either way. allow (the default) takes the overlap
// where the device and the kernel support it (the kernel says so in its cubin; sm_80 and sm_89
// builds do not), and is plain stream order elsewhere; never keeps plain stream order everywhere.
enum class LaunchOverlap : uint8_t { allow, never };

// What an engine asks for: a kernel family and the values of its named axes, in the catalog's
// order ("paged_decode": head_dim, q_dtype, kv_dtype, page_size). Values are the catalog's text
// ("128", "bf16"). Each family offers typed helpers that make its keys (paged_decode.hpp).
struct KernelKey {
  std::string family;
  std::vector<std::pair<std::string, std::string>> axes;

  // The value of an axis, or "" when the key has no such axis.
  std::string_view axis(std::string_view name) const;
  std::string str() const;  // "head_dim=128 q_dtype=bf16 kv_dtype=fp8_e4m3 page_size=16"
  friend bool operator==(const KernelKey&, const KernelKey&) = default;
  friend auto operator<=>(const KernelKey&, const KernelKey&) = default;
};

}  // namespace cubinrt
