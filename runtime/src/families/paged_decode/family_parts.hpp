// The paged decode families' shared face to the core: paged_decode (8 q heads a block) and
// paged_decode_g16 (16, runtime/src/families/paged_decode_g16), their twins for NVFP4's
// interleaved V scales, and paged_decode_kv_pair (two kv heads a block) differ only in their
// name; their axes, parameter ABI, plan and known answer are one (paged_decode_abi.h says why 16
// heads are a family of their own, common.cuh why the order and why the pairs).
#pragma once

#include <cstdint>
#include <string_view>

#include "family/family.hpp"

namespace cubinrt::paged_decode {

inline constexpr std::string_view kFamily = "paged_decode";
inline constexpr std::string_view kG16Family = "paged_decode_g16";
// The same two for NVFP4 caches whose V scales are interleaved by 4 tokens (ScaleOrder).
inline constexpr std::string_view kVsfInterleavedFamily = "paged_decode_vsf_interleaved";
inline constexpr std::string_view kG16VsfInterleavedFamily = "paged_decode_g16_vsf_interleaved";
// NVFP4 head_dim 128 with two neighbouring kv heads a block (NHD pages: whole 128-byte lines).
inline constexpr std::string_view kKvPairFamily = "paged_decode_kv_pair";
inline constexpr uint32_t kKvPairHeadDim = 128;
inline bool is_g16_family(std::string_view f) { return f == kG16Family || f == kG16VsfInterleavedFamily; }
inline bool is_vsf_interleaved_family(std::string_view f) { return f == kVsfInterleavedFamily || f == kG16VsfInterleavedFamily; }

const AbiLayout& abi_v6();

class DecodeFamily final : public Family {
 public:
  explicit DecodeFamily(std::string_view name);
  std::string_view name() const override { return name_; }
  std::span<const std::string_view> axes() const override;
  std::span<const AbiLayout* const> abis() const override;
  Result<std::vector<KnownAnswer>> known_answers(const Runtime& runtime, std::span<const KernelKey> keys) const override;

 private:
  std::string_view name_;  // a literal: the family outlives every use
};

}  // namespace cubinrt::paged_decode
