// The kv_append family as the core sees it: its axes, its ABI and its known answer.
#include <cstddef>

#include "families/kv_append/family_parts.hpp"
#include "families/kv_append/known_answer.hpp"
#include "families/kv_append/kv_append_abi.h"

namespace cubinrt {

namespace kv_append {

#define CUBINRT_ABI_FIELD_(type, name) \
  AbiField{#name, static_cast<uint32_t>(offsetof(CubinrtKvAppendParamsV2, name)), static_cast<uint32_t>(sizeof(CubinrtKvAppendParamsV2::name))},
const AbiLayout& abi_v2() {
  static const AbiLayout abi = make_abi_layout(CUBINRT_KV_APPEND_ABI_NAME, CUBINRT_KV_APPEND_ABI_VERSION, sizeof(CubinrtKvAppendParamsV2),
                                               {CUBINRT_KV_APPEND_V2_FIELDS(CUBINRT_ABI_FIELD_)}, CUBINRT_KV_APPEND_THREADS);
  return abi;
}
#undef CUBINRT_ABI_FIELD_

namespace {

class KvAppendFamily final : public Family {
 public:
  std::string_view name() const override { return kFamily; }
  std::span<const std::string_view> axes() const override {
    static constexpr std::string_view kAxes[] = {"in_dtype", "cache_dtype"};
    return kAxes;
  }
  std::span<const AbiLayout* const> abis() const override {
    static const AbiLayout* const abis[1] = {&abi_v2()};
    return abis;
  }
  Result<std::vector<KnownAnswer>> known_answers(const Runtime& runtime, std::span<const KernelKey> keys) const override {
    return known_answer_tests(runtime, keys);
  }
};

}  // namespace

}  // namespace kv_append

namespace family_modules {
const Family& kv_append() {
  static const kv_append::KvAppendFamily family;
  return family;
}
}  // namespace family_modules

}  // namespace cubinrt
