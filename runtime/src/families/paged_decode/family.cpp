// The paged decode family as the core sees it: its axes, its ABI and its known answer.
#include <cstddef>

#include "families/paged_decode/family_parts.hpp"
#include "families/paged_decode/known_answer.hpp"
#include "families/paged_decode/paged_decode_abi.h"

namespace cubinrt {

namespace paged_decode {

#define CUBINRT_ABI_FIELD_(type, name)                                                \
  AbiField{#name, static_cast<uint32_t>(offsetof(CubinrtPagedDecodeParamsV6, name)), \
           static_cast<uint32_t>(sizeof(CubinrtPagedDecodeParamsV6::name))},
// Made on first use (a family may be asked for during another file's static initialisation).
const AbiLayout& abi_v6() {
  static const AbiLayout abi =
      make_abi_layout(CUBINRT_PAGED_DECODE_ABI_NAME, CUBINRT_PAGED_DECODE_ABI_VERSION, sizeof(CubinrtPagedDecodeParamsV6),
                      {CUBINRT_PAGED_DECODE_V6_FIELDS(CUBINRT_ABI_FIELD_)}, CUBINRT_PAGED_DECODE_MIN_THREADS);
  return abi;
}
#undef CUBINRT_ABI_FIELD_

DecodeFamily::DecodeFamily(std::string_view name) : name_(name) {}

std::span<const std::string_view> DecodeFamily::axes() const {
  static constexpr std::string_view kAxes[] = {"head_dim", "q_dtype", "kv_dtype", "page_size"};
  return kAxes;
}

std::span<const AbiLayout* const> DecodeFamily::abis() const {
  static const AbiLayout* const abis[1] = {&abi_v6()};
  return abis;
}

Result<std::vector<KnownAnswer>> DecodeFamily::known_answers(const Runtime& runtime, std::span<const KernelKey> keys) const {
  return known_answer_tests(runtime, keys);
}

}  // namespace paged_decode

namespace family_modules {
const Family& paged_decode() {
  static const paged_decode::DecodeFamily family(paged_decode::kFamily);
  return family;
}
}  // namespace family_modules

}  // namespace cubinrt
