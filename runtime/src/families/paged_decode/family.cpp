// The paged decode family as the core sees it: its axes, its ABI and its known answer.
#include <cstddef>

#include "families/paged_decode/known_answer.hpp"
#include "families/paged_decode/paged_decode_abi.h"
#include "family/family.hpp"

namespace cubinrt {

namespace {

#define CUBINRT_ABI_FIELD_(type, name)                                                \
  AbiField{#name, static_cast<uint32_t>(offsetof(CubinrtPagedDecodeParamsV4, name)), \
           static_cast<uint32_t>(sizeof(CubinrtPagedDecodeParamsV4::name))},
// Made on first use (a family may be asked for during another file's static initialisation).
const AbiLayout& abi_v4() {
  static const AbiLayout abi =
      make_abi_layout(CUBINRT_PAGED_DECODE_ABI_NAME, CUBINRT_PAGED_DECODE_ABI_VERSION, sizeof(CubinrtPagedDecodeParamsV4),
                      {CUBINRT_PAGED_DECODE_V4_FIELDS(CUBINRT_ABI_FIELD_)}, CUBINRT_PAGED_DECODE_MIN_THREADS);
  return abi;
}
#undef CUBINRT_ABI_FIELD_

class PagedDecode final : public Family {
 public:
  std::string_view name() const override { return "paged_decode"; }
  std::span<const std::string_view> axes() const override { return kAxes; }
  std::span<const AbiLayout* const> abis() const override { return abis_; }
  Result<std::vector<KnownAnswer>> known_answers(const Runtime& runtime, std::span<const KernelKey> keys) const override {
    return paged_decode::known_answer_tests(runtime, keys);
  }

 private:
  static constexpr std::string_view kAxes[] = {"head_dim", "q_dtype", "kv_dtype", "page_size"};
  const AbiLayout* abis_[1] = {&abi_v4()};
};

}  // namespace

namespace family_modules {
const Family& paged_decode() {
  static const PagedDecode family;
  return family;
}
}  // namespace family_modules

}  // namespace cubinrt
