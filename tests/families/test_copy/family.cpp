// The test-only family test_copy, defined outside runtime/src/families: it plugs into the core
// through register_family alone (a static registration in this object library), which is what
// proves that a family needs no edit of the core.
#include <cstddef>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "bundle/manifest.hpp"
#include "common/try.hpp"
#include "cubinrt/runtime.hpp"
#include "driver/device_memory.hpp"
#include "common/encodings.hpp"
#include "family/family.hpp"
#include "loader/loaded_kernel.hpp"
#include "test_copy_abi.h"

namespace cubinrt::test {

namespace {

#define CUBINRT_ABI_FIELD_(type, name) \
  AbiField{#name, static_cast<uint32_t>(offsetof(CubinrtTestCopyParamsV1, name)), static_cast<uint32_t>(sizeof(CubinrtTestCopyParamsV1::name))},
const AbiLayout& abi_v1() {
  static const AbiLayout abi = make_abi_layout(CUBINRT_TEST_COPY_ABI_NAME, CUBINRT_TEST_COPY_ABI_VERSION, sizeof(CubinrtTestCopyParamsV1),
                                               {CUBINRT_TEST_COPY_V1_FIELDS(CUBINRT_ABI_FIELD_)}, 32);
  return abi;
}
#undef CUBINRT_ABI_FIELD_

constexpr int64_t kElements = 1000;  // not a multiple of any block's share: the tail is tested

// One key: random finite inputs in [-1, 1), doubled on the device, compared bit for bit with the
// host's doubling (exact in fp16 and bf16 at these magnitudes).
Result<KnownAnswer> run_one(const Runtime& runtime, const KernelKey& key) {
  const LoadedKernel& k = *CUBINRT_TRY(runtime.kernel(key));
  const Dtype dtype = CUBINRT_TRY(parse_dtype(key.axis("dtype")));
  const uint32_t vector = CUBINRT_TRY(axis_number(key, "vector"));
  if (vector == 0) return fail(Errc::invalid_argument, fmt::format("test_copy key '{}': vector must be positive", key.str()));
  std::mt19937 rng(0xc0b1 + static_cast<int>(dtype) * 7 + vector);
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  std::vector<uint16_t> x(kElements), y(kElements, 0xffff), want(kElements);
  for (int64_t i = 0; i < kElements; ++i) {
    x[i] = encode_float16(dtype, unit(rng));
    want[i] = encode_float16(dtype, static_cast<float>(2 * element_value(dtype, x[i])));
  }
  const DriverApi& d = runtime.driver();
  CUBINRT_TRY(runtime.bind_context());
  const size_t bytes = kElements * 2;
  const DeviceMemory memory = CUBINRT_TRY(DeviceMemory::allocate(d, 2 * bytes, "test_copy known answer"));
  const CUdeviceptr buf = memory.get();
  CUBINRT_TRY(d.check(d.cuMemcpyHtoD(buf, x.data(), bytes), "cuMemcpyHtoD", "test_copy known answer"));
  CUBINRT_TRY(d.check(d.cuMemcpyHtoD(buf + bytes, y.data(), bytes), "cuMemcpyHtoD", "test_copy known answer"));
  CubinrtTestCopyParamsV1 p{reinterpret_cast<const void*>(buf), reinterpret_cast<void*>(buf + bytes), kElements};
  size_t size = abi_v1().param_bytes;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &p, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  CUlaunchConfig config{};
  const int64_t per_block = int64_t{k.block_threads} * vector;
  config.gridDimX = static_cast<unsigned>((kElements + per_block - 1) / per_block);
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = k.block_threads;
  config.blockDimY = config.blockDimZ = 1;
  CUBINRT_TRY(d.check(d.cuLaunchKernelEx(&config, k.function, nullptr, extra), "cuLaunchKernelEx", k.entry->symbol));
  CUBINRT_TRY(d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", k.entry->symbol));
  CUBINRT_TRY(d.check(d.cuMemcpyDtoH(y.data(), buf + bytes, bytes), "cuMemcpyDtoH", "test_copy known answer"));
  int64_t wrong = 0;
  for (int64_t i = 0; i < kElements; ++i) wrong += y[i] != want[i];
  return KnownAnswer{static_cast<double>(wrong) / kElements, 0.0, fmt::format("{} of {} elements differ", wrong, kElements)};
}

class TestCopy final : public Family {
 public:
  std::string_view name() const override { return "test_copy"; }
  std::span<const std::string_view> axes() const override { return kAxes; }
  std::span<const AbiLayout* const> abis() const override { return abis_; }
  Result<std::vector<KnownAnswer>> known_answers(const Runtime& runtime, std::span<const KernelKey> keys) const override {
    std::vector<KnownAnswer> out;
    for (const KernelKey& key : keys) out.push_back(CUBINRT_TRY(run_one(runtime, key)));
    return out;
  }

 private:
  static constexpr std::string_view kAxes[] = {"dtype", "vector"};
  const AbiLayout* abis_[1] = {&abi_v1()};
};

const TestCopy& instance() {
  static const TestCopy family;
  return family;
}

[[maybe_unused]] const bool registered = register_family(instance()).has_value();

}  // namespace

}  // namespace cubinrt::test
