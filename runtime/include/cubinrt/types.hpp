// The vocabulary of kernel keys: architectures, dtypes and the catalog key of a kernel.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

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

// Logical element types. KV's dtype is always declared, never inferred from storage.
enum class Dtype : uint8_t { fp16 = 1, bf16 = 2, fp8_e4m3 = 3, fp8_e5m2 = 4, nvfp4 = 5, uint8 = 6 };
std::string_view dtype_name(Dtype d);
Result<Dtype> parse_dtype(std::string_view text);
uint32_t dtype_bits(Dtype d);

// A CUDA API version as the driver reports it (13000) in its usual form ("13.0").
std::string cuda_version_text(int version);

// What an engine asks for; one catalog variant serves one key per architecture.
struct KernelKey {
  std::string family = "paged_decode";
  uint32_t head_dim = 0;
  Dtype q_dtype = Dtype::bf16;
  Dtype kv_dtype = Dtype::bf16;
  uint32_t page_size = 0;

  std::string str() const;  // "head_dim=128 q=bf16 kv=fp8_e4m3 page_size=16"
  friend bool operator==(const KernelKey&, const KernelKey&) = default;
};

}  // namespace cubinrt
