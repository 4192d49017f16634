// The self-check's order and verdicts without a GPU: a fake driver stands in for the device
// steps, a corrupted bundle must fail at the static step, and each failure says what to do.
#include <gtest/gtest.h>

#include <cstring>

#include <fmt/format.h>

#include "cubinrt/selfcheck.hpp"
#include "support/fake_driver.hpp"
#include "support/gpu.hpp"

namespace cubinrt::test {
namespace {

std::shared_ptr<const Bundle> bundle_from(std::vector<std::byte> bytes) {
  return std::make_shared<const Bundle>(*Bundle::from_bytes(std::make_shared<const std::vector<std::byte>>(std::move(bytes)), "copy"));
}

SelfCheckReport run(std::shared_ptr<DriverApi> driver, std::shared_ptr<const Bundle> bundle, bool known_answer = true) {
  SelfCheckOptions o;
  o.runtime.driver = std::move(driver);
  o.runtime.bundle = std::move(bundle);
  o.known_answer = known_answer;
  return run_selfcheck(o);
}

std::vector<std::string> names(const SelfCheckReport& r) {
  std::vector<std::string> v;
  for (const auto& s : r.steps) v.push_back(s.name);
  return v;
}

TEST(SelfCheck, NoGpuSkipsTheGpuStepsAndStillValidatesEveryCubin) {
  FakeFaults f;
  f.init = CUDA_ERROR_NO_DEVICE;
  const SelfCheckReport r = run(make_fake_driver({}, f), bundle_from(*read_file(CUBINRT_TEST_DEFAULT_BUNDLE)));
  EXPECT_TRUE(r.no_gpu);
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(names(r), (std::vector<std::string>{"bundle", "driver", "device", "static", "load", "abi", "known-answer"}));
  EXPECT_EQ(r.steps[1].status, StepStatus::skipped);
  EXPECT_EQ(r.steps[1].detail, "no GPU: cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)");
  EXPECT_EQ(r.steps[3].status, StepStatus::pass);
  EXPECT_EQ(r.steps[3].detail, "750 (all) kernels: sha256, zstd, ELF, manifest vs cubin, ABI layout");
  for (size_t i : {4u, 5u, 6u}) EXPECT_EQ(r.steps[i].status, StepStatus::skipped);
}

TEST(SelfCheck, CorruptedBundleFailsAtTheStaticStep) {
  auto bytes = *read_file(CUBINRT_TEST_DEFAULT_BUNDLE);
  const Bundle good = *Bundle::open(CUBINRT_TEST_DEFAULT_BUNDLE);
  uint64_t payload = 0;
  std::memcpy(&payload, bytes.data() + 32, 8);
  const ManifestEntry& e = good.manifest().entries[42];
  bytes[payload + e.offset + e.compressed_size / 3] ^= std::byte{0x10};
  FakeFaults f;
  f.init = CUDA_ERROR_NO_DEVICE;
  const SelfCheckReport r = run(make_fake_driver({}, f), bundle_from(bytes));
  EXPECT_FALSE(r.passed);
  ASSERT_EQ(r.steps.back().name, "static");
  EXPECT_EQ(r.steps.back().status, StepStatus::fail);
  // Entry 42's cubin (its arch's unit) holds 72 kernels: all of them fail, the unit's first named.
  size_t sharing = 0;
  const ManifestEntry* first = nullptr;
  for (const ManifestEntry& x : good.manifest().entries)
    if (x.offset == e.offset) ++sharing, first = first ? first : &x;
  EXPECT_EQ(sharing, 72u);
  EXPECT_NE(r.steps.back().detail.find(fmt::format("{} of 750 kernels failed; first: bundle copy: entry {}: ", sharing, first->id)), std::string::npos)
      << r.steps.back().detail;
}

TEST(SelfCheck, OldDriverFailsAtTheDriverStepWithTheVersionNeeded) {
  FakeFaults f;
  f.driver_version = 12080;
  const SelfCheckReport r = run(make_fake_driver({h200()}, f), bundle_from(*read_file(CUBINRT_TEST_DEFAULT_BUNDLE)));
  EXPECT_FALSE(r.passed);
  EXPECT_FALSE(r.no_gpu);
  ASSERT_EQ(names(r), (std::vector<std::string>{"bundle", "driver"}));
  EXPECT_EQ(r.steps[1].detail, "driver supports CUDA 12.8, the bundle needs CUDA 13.0: install an NVIDIA driver for CUDA 13.0 or newer");
}

TEST(SelfCheck, RequiredKernelTheDeviceCannotRunFailsAtTheDeviceStep) {
  SelfCheckOptions o;
  o.runtime.driver = make_fake_driver({h200()});
  o.runtime.bundle = bundle_from(*read_file(CUBINRT_TEST_DEFAULT_BUNDLE));
  o.runtime.required = DecodeRequirements{{512}, {Dtype::fp16}, {Dtype::fp16}, {32}}.keys();
  const SelfCheckReport r = run_selfcheck(o);
  ASSERT_EQ(r.steps.back().name, "device");
  EXPECT_EQ(r.steps.back().status, StepStatus::fail);
  EXPECT_EQ(r.steps.back().detail, "NVIDIA H200 (sm_90) cannot run paged_decode head_dim=512 q_dtype=fp16 kv_dtype=fp16 page_size=32: head_dim=512 is "
                                   "built for sm_100a and sm_103a only; use an SM100 (Blackwell) GPU or head_dim <= 256");
}

TEST(SelfCheck, QuickModeOnAnEmulatedDevicePassesStaticLoadAndAbi) {
  const SelfCheckReport r = run(make_fake_driver({b300()}), bundle_from(*read_file(CUBINRT_TEST_DEFAULT_BUNDLE)), /*known_answer=*/false);
  EXPECT_TRUE(r.passed);
  EXPECT_EQ(names(r), (std::vector<std::string>{"bundle", "driver", "device", "static", "load", "abi"}));
  EXPECT_EQ(r.steps[2].detail, "device 0 'NVIDIA B300' (sm_103), 148 SMs: runs 164 of the bundle's kernels");
  EXPECT_EQ(r.steps[3].detail, "164 selected kernels: sha256, zstd, ELF, manifest vs cubin, ABI layout");
  EXPECT_EQ(fake_state().loads, 6);  // six sm_103a cubins (one a family) hold the 164 kernels
}

}  // namespace
}  // namespace cubinrt::test
