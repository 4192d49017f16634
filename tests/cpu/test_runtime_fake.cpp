// The whole loader against a test double of the driver: emulated devices of every supported arch,
// and faults, with the exact error texts engines see.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <set>
#include <thread>

#include "cubinrt/paged_decode.hpp"
#include "cubinrt/runtime.hpp"
#include "select/select.hpp"
#include "support/fake_driver.hpp"
#include "support/gpu.hpp"

namespace cubinrt::test {
namespace {

std::shared_ptr<const Bundle> bundle() {
  static auto b = std::make_shared<const Bundle>(*Bundle::embedded());
  return b;
}

Result<std::unique_ptr<Runtime>> create(std::vector<FakeDevice> devices, FakeFaults faults = {}, RuntimeOptions o = {}) {
  o.driver = make_fake_driver(std::move(devices), faults);
  if (!o.bundle) o.bundle = bundle();
  return Runtime::create(std::move(o));
}

struct DeviceCase {
  FakeDevice device;
  const char* arch;  // of the cubins it selects
  size_t kernels;
};

class EveryArch : public ::testing::TestWithParam<DeviceCase> {};

TEST_P(EveryArch, LoadsExactlyTheCubinsItsArchRuns) {
  const DeviceCase& c = GetParam();
  auto rt = create({c.device});
  CUBINRT_ASSERT_OK(rt);
  EXPECT_EQ((*rt)->device().name, c.device.name);
  EXPECT_EQ((*rt)->device().arch.major, static_cast<uint32_t>(c.device.major));
  const auto loaded = (*rt)->loaded();
  EXPECT_EQ(loaded.size(), c.kernels);
  // Its arch's kernels are one cubin a family (3 families, 4 on sm_90, 6 on SM100), each loaded once.
  EXPECT_EQ(fake_state().loads, c.device.major == 10 ? 6 : c.device.major == 9 ? 4 : 3);
  for (const LoadedKernel* k : loaded) EXPECT_EQ(k->entry->arch.str(), c.arch) << k->entry->id;
  const KernelKey hd512 = decode_key(512, Dtype::bf16, Dtype::fp8_e4m3, 16);
  EXPECT_EQ((*rt)->supports(hd512).ok, c.device.major == 10) << (*rt)->supports(hd512).reason;
}

INSTANTIATE_TEST_SUITE_P(Devices, EveryArch,
                         // 72 paged_decode kernels (96 with head_dim 512 on SM100), 24 paged_decode_g16, 8 kv_append;
                         // on SM100 also 24 + 6 of NVFP4's interleaved V scales; on sm_90 and SM100, 6 that pair kv heads.
                         ::testing::Values(DeviceCase{a100(), "sm_80", 104}, DeviceCase{{"NVIDIA A10", 8, 6, 72, 101376, 7}, "sm_80", 104},
                                           DeviceCase{l40s(), "sm_89", 104}, DeviceCase{h200(), "sm_90", 110},
                                           DeviceCase{b200(), "sm_100a", 164}, DeviceCase{b300(), "sm_103a", 164},
                                           DeviceCase{rtx5090(), "sm_120", 104}),
                         [](const auto& p) { return "sm_" + std::to_string(p.param.device.major * 10 + p.param.device.minor); });

TEST(FakeRuntime, Hd512RequiredOnH200IsOneSentence) {
  RuntimeOptions o;
  o.required = DecodeRequirements{{128, 512}, {Dtype::bf16}, {Dtype::fp8_e4m3}, {16}}.keys();
  auto rt = create({h200()}, {}, o);
  ASSERT_FALSE(rt);
  EXPECT_EQ(rt.error().code, Errc::unsupported);
  EXPECT_EQ(rt.error().message,
            "NVIDIA H200 (sm_90) cannot run paged_decode head_dim=512 q_dtype=bf16 kv_dtype=fp8_e4m3 page_size=16: head_dim=512 is built for "
            "sm_100a and sm_103a only; use an SM100 (Blackwell) GPU or head_dim <= 256");
  EXPECT_EQ(fake_state().loads, 0);  // refused before anything was loaded
}

TEST(FakeRuntime, DynamicSharedMemoryIsRaisedOrRefused) {
  RuntimeOptions o;
  o.required = DecodeRequirements{{256}, {Dtype::bf16}, {Dtype::bf16}, {16}}.keys();
  // 16-bit head_dim 256 keeps a 96 KiB ring. The H200 gives a block up to 227 KiB: the loader
  // raises the kernel's limit to what it states.
  auto rt = create({h200()}, {}, o);
  CUBINRT_ASSERT_OK(rt);
  const LoadedKernel* k = (*rt)->loaded().front();
  EXPECT_EQ(k->dynamic_shared, 98304u);
  EXPECT_EQ(k->dynamic_shared, k->entry->dynamic_shared);
  // A GPU that gives a block 64 KiB is told why, at init, before anything runs.
  FakeDevice small = h200();
  small.name = "Small GPU";
  small.shared_optin = 65536;
  auto refused = create({small}, {}, o);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Errc::unsupported);
  EXPECT_NE(refused.error().message.find(fmt::format("needs {} bytes of shared memory a block (0 static, {} dynamic), the device allows 65536",
                                                     k->dynamic_shared, k->dynamic_shared)),
            std::string::npos)
      << refused.error().message;
}

TEST(FakeRuntime, Hd512RequiredOnB200Loads) {
  RuntimeOptions o;
  o.required = DecodeRequirements{{512}, {Dtype::bf16}, {Dtype::fp8_e4m3, Dtype::fp8_e5m2}, {16}}.keys();
  auto rt = create({b200()}, {}, o);
  CUBINRT_ASSERT_OK(rt);
  EXPECT_EQ((*rt)->loaded().size(), 2u);  // eager loads only what is required
  EXPECT_EQ((*rt)->selected(decode_key(512, Dtype::bf16, Dtype::fp8_e4m3, 16))->id, "paged_decode.sm_100a.hd512.bf16.fp8_e4m3.p16");
}

TEST(FakeRuntime, DriverTooOld) {
  FakeFaults f;
  f.driver_version = 12040;
  auto rt = create({h200()}, f);
  ASSERT_FALSE(rt);
  EXPECT_EQ(rt.error().code, Errc::driver_too_old);
  EXPECT_EQ(rt.error().message,
            "the CUDA driver supports CUDA 12.4 (cuDriverGetVersion 12040), but bundle <embedded default bundle> needs CUDA 13.0 "
            "(13000): install an NVIDIA driver for CUDA 13.0 or newer");
}

TEST(FakeRuntime, NoDevice) {
  FakeFaults f;
  f.init = CUDA_ERROR_NO_DEVICE;
  auto rt = create({}, f);
  ASSERT_FALSE(rt);
  EXPECT_EQ(rt.error().code, Errc::no_device);
  EXPECT_EQ(rt.error().message,
            "CUDA driver (fake driver): no CUDA device is present (cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected))");
  RuntimeOptions o;
  o.device_ordinal = 3;
  auto missing = create({h200()}, {}, o);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message, "device 3 was asked for, but the driver sees 1 device(s) (0 to 0)");
}

TEST(FakeRuntime, LoadFailureNamesDeviceCubinKernelAndCall) {
  FakeFaults f;
  f.load = CUDA_ERROR_INVALID_IMAGE;
  f.load_only_for = "hd256_bf16_fp8_e5m2_p32";
  auto rt = create({h200()}, f);
  ASSERT_FALSE(rt);
  EXPECT_EQ(rt.error().code, Errc::driver);
  EXPECT_EQ(rt.error().driver_status, CUDA_ERROR_INVALID_IMAGE);
  // The kernel is in the sm_90 cubin with 53 others: the first of them to load meets the failure.
  EXPECT_EQ(rt.error().message,
            "device 0 'NVIDIA H200' (sm_90): cubin paged_decode.sm_90.hd128.bf16.bf16.p16 kernel "
            "cubinrt_paged_decode_hd128_bf16_bf16_p16: cuLibraryLoadData failed: CUDA_ERROR_INVALID_IMAGE (device kernel image is invalid)");
}

TEST(FakeRuntime, OutOfMemoryAtLoad) {
  FakeFaults f;
  f.load = CUDA_ERROR_OUT_OF_MEMORY;
  auto rt = create({h200()}, f);
  ASSERT_FALSE(rt);
  EXPECT_NE(rt.error().message.find("cuLibraryLoadData failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)"), std::string::npos) << rt.error().message;
}

TEST(FakeRuntime, NoBinaryForGpuAtResolutionFailsInit) {
  // What the H200 does with an sm_100 cubin: the library loads, the kernel does not resolve.
  FakeFaults f;
  f.get_kernel = CUDA_ERROR_NO_BINARY_FOR_GPU;
  auto rt = create({h200()}, f);
  ASSERT_FALSE(rt);
  EXPECT_EQ(rt.error().driver_status, CUDA_ERROR_NO_BINARY_FOR_GPU);
  EXPECT_NE(rt.error().message.find("cuLibraryGetKernel failed: CUDA_ERROR_NO_BINARY_FOR_GPU (no kernel image is available for execution on the device)"),
            std::string::npos) << rt.error().message;
  EXPECT_EQ(fake_state().unloads, 1);  // the library it loaded was unloaded again
}

TEST(FakeRuntime, MissingEntryPoint) {
  auto d = make_fake_driver({h200()});
  d->cuFuncGetParamInfo = nullptr;
  d->cuKernelSetAttribute = nullptr;
  RuntimeOptions o;
  o.driver = d;
  o.bundle = bundle();
  auto rt = Runtime::create(o);
  ASSERT_FALSE(rt);
  EXPECT_EQ(rt.error().code, Errc::no_driver);
  EXPECT_EQ(rt.error().message, "the driver table (fake driver) lacks cuKernelSetAttribute, cuFuncGetParamInfo");
}

TEST(FakeRuntime, OnlyTheBenchmarksEntryPointsAreOptional) {
  auto d = make_fake_driver({h200()});
  d->cuEventCreate = nullptr;  // the benchmark's and GPU tests' calls: not the runtime's
  d->cuLaunchKernel = nullptr;
  d->cuMemsetD8 = nullptr;
  EXPECT_TRUE(d->validate().has_value());
  d->cuMemAlloc = nullptr;  // the self-check's known answers need it
  const auto s = d->validate();
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "the driver table (fake driver) lacks cuMemAlloc");
}

// A failed load is not kept: once the fault passes, the same key loads (and is then kept).
TEST(FakeRuntime, LazyLoadFailureIsRetriedNotCached) {
  FakeFaults f;
  f.load = CUDA_ERROR_OUT_OF_MEMORY;
  RuntimeOptions o;
  o.lazy = true;
  auto rt = create({h200()}, f, o);
  CUBINRT_ASSERT_OK(rt);
  const KernelKey key = decode_key(128, Dtype::bf16, Dtype::fp8_e4m3, 16);
  auto first = (*rt)->kernel(key);
  ASSERT_FALSE(first);
  EXPECT_EQ(first.error().driver_status, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_TRUE((*rt)->loaded().empty());
  fake_state().faults.load = CUDA_SUCCESS;
  auto second = (*rt)->kernel(key);
  CUBINRT_ASSERT_OK(second);
  EXPECT_EQ((*second)->entry->id, "paged_decode.sm_90.hd128.bf16.fp8_e4m3.p16");
  auto third = (*rt)->kernel(key);
  CUBINRT_ASSERT_OK(third);
  EXPECT_EQ(*third, *second);
  EXPECT_EQ(fake_state().loads, 1);
}

TEST(FakeRuntime, NoLibcuda) {
  auto d = open_driver("libcuda-that-does-not-exist.so.1");
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, Errc::no_driver);
  EXPECT_EQ(d.error().message.rfind("no CUDA driver: cannot open libcuda-that-does-not-exist.so.1 (", 0), 0u) << d.error().message;
}

TEST(FakeRuntime, DriverDisagreesWithAbi) {
  FakeFaults f;
  f.param_offset_skew = 8;
  auto rt = create({h200()}, f);
  ASSERT_FALSE(rt);
  EXPECT_EQ(rt.error().code, Errc::mismatch);
  // The first kernel loaded (keys in order: kv_append's come first) names its ABI's first field.
  EXPECT_NE(rt.error().message.find("the driver puts parameter 0 at offset 8 size 8, ABI KvAppendParams v2 field 'k_in' is at offset 0 size 8"),
            std::string::npos) << rt.error().message;
}

TEST(FakeRuntime, LazyLoadsOnceUnderConcurrentFirstUse) {
  RuntimeOptions o;
  o.lazy = true;
  auto rt = create({h200()}, {}, o);
  CUBINRT_ASSERT_OK(rt);
  EXPECT_EQ(fake_state().loads, 0);
  const std::vector<KernelKey> keys = (*rt)->available();
  ASSERT_EQ(keys.size(), 110u);  // 72 paged_decode, 24 paged_decode_g16, 6 paged_decode_kv_pair, 8 kv_append
  std::vector<std::vector<const LoadedKernel*>> seen(16);
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&, t] {
      for (size_t i = 0; i < keys.size(); ++i) {
        const KernelKey& key = keys[(i + static_cast<size_t>(t) * 5) % keys.size()];
        auto k = (*rt)->kernel(key);
        seen[t].push_back(k ? *k : nullptr);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(fake_state().loads, 4);  // the four sm_90 cubins (one a family), each loaded once for its kernels
  std::set<const LoadedKernel*> distinct;
  for (const auto& v : seen)
    for (const LoadedKernel* k : v) {
      ASSERT_NE(k, nullptr);
      EXPECT_NE(k->function, nullptr);  // never half-initialised
      distinct.insert(k);
    }
  EXPECT_EQ(distinct.size(), 110u);
}

TEST(FakeRuntime, SeveralDevicesEachGetTheirOwnCubins) {
  auto d = make_fake_driver({h200(), a100(), b300()});
  std::vector<std::unique_ptr<Runtime>> rts;
  for (int i = 0; i < 3; ++i) {
    RuntimeOptions o;
    o.driver = d;
    o.bundle = bundle();
    o.device_ordinal = i;
    o.lazy = true;
    rts.push_back(std::move(*Runtime::create(o)));
  }
  const KernelKey key = decode_key(128, Dtype::bf16, Dtype::fp8_e4m3, 16);
  EXPECT_EQ((*rts[0]->kernel(key))->entry->arch.str(), "sm_90");
  EXPECT_EQ((*rts[1]->kernel(key))->entry->arch.str(), "sm_80");
  EXPECT_EQ((*rts[2]->kernel(key))->entry->arch.str(), "sm_103a");
  // By UUID: the fake's UUIDs end in the device's tail byte.
  RuntimeOptions o;
  o.driver = d;
  o.bundle = bundle();
  o.device_uuid = "GPU-abababab-abab-abab-abab-ababababab05";
  auto by_uuid = Runtime::create(o);
  CUBINRT_ASSERT_OK(by_uuid);
  EXPECT_EQ((*by_uuid)->device().name, "NVIDIA B300");
  EXPECT_EQ((*by_uuid)->device().ordinal, 2);
  o.device_uuid = "GPU-00000000-0000-0000-0000-000000000000";
  auto none = Runtime::create(o);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().message, "no device has UUID GPU-00000000-0000-0000-0000-000000000000 (the driver sees 3 device(s))");
}

TEST(FakeRuntime, CreateAllMakesOneRuntimePerDeviceSharingOneBundle) {
  RuntimeOptions o;
  o.driver = make_fake_driver({h200(), a100(), b300()});
  o.bundle = bundle();
  o.lazy = true;
  auto rts = Runtime::create_all(o);
  CUBINRT_ASSERT_OK(rts);
  ASSERT_EQ(rts->size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ((*rts)[i]->device().ordinal, i);
    EXPECT_EQ(&(*rts)[i]->bundle(), bundle().get());  // opened once
  }
  EXPECT_EQ((*rts)[2]->device().name, "NVIDIA B300");
  EXPECT_NE((*rts)[0]->context(), (*rts)[1]->context());
  o.device_ordinal = 1;
  EXPECT_EQ(Runtime::create_all(o).error().message,
            "Runtime::create_all makes a runtime for every device: leave device_ordinal and device_uuid unset");
  o.device_ordinal = 0;
  o.bundle = nullptr;
  o.bundle_path = "/nonexistent/cubinrt.bundle";
  EXPECT_FALSE(Runtime::create_all(o).has_value());
}

// First use from 32 threads at once over two devices (ThreadSanitizer runs this in test.sh): each
// thread binds its device, plans (loading lazily) and launches; every launch lands on the thread's
// device, and each device loads each of its cubins once.
TEST(FakeRuntime, ThirtyTwoThreadsPlanAndLaunchOnTwoDevices) {
  RuntimeOptions o;
  o.driver = make_fake_driver({h200(), a100()});
  o.bundle = bundle();
  o.lazy = true;
  auto rts = Runtime::create_all(o);
  CUBINRT_ASSERT_OK(rts);
  alignas(16) static std::byte mem[1 << 16];
  std::vector<std::string> errors(32);
  std::vector<std::thread> threads;
  for (int t = 0; t < 32; ++t)
    threads.emplace_back([&, t] {
      const Runtime& rt = *(*rts)[t % 2];
      if (auto s = rt.bind_context(); !s) return void(errors[t] = s.error().message);
      const uint32_t group = std::array{1u, 4u, 8u, 16u}[t / 2 % 4];
      const DecodeShape shape{.batch = 2, .num_q_heads = 2 * group, .num_kv_heads = 2, .head_dim = t % 3 == 0 ? 64u : 128u,
                              .q_dtype = Dtype::bf16, .kv_storage = t % 4 < 2 ? Dtype::bf16 : Dtype::uint8,
                              .kv_declared = t % 4 < 2 ? std::nullopt : std::optional<Dtype>(Dtype::fp8_e4m3), .page_size = 16,
                              .block_table_stride = 4, .num_splits = 1};
      auto plan = DecodePlan::create(rt, shape);
      if (!plan) return void(errors[t] = plan.error().message);
      DecodeArgs a;
      a.q = mem;
      a.kv = {mem, mem, shape.kv_storage, shape.kv_declared, 1.f, 1.f, nullptr, KvLayout::nhd, 16, 2, 8};
      a.block_table = reinterpret_cast<const int32_t*>(mem);
      a.seq_lens = reinterpret_cast<const int32_t*>(mem);
      a.out = mem;
      if (auto s = plan->launch(a, nullptr); !s) errors[t] = s.error().message;
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 32; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
  ASSERT_EQ(fake_state().launches.size(), 32u);
  int per_device[2] = {0, 0};
  for (const LaunchRecord& r : fake_state().launches) {
    ASSERT_TRUE(r.device == 0 || r.device == 1);
    ++per_device[r.device];
  }
  EXPECT_EQ(per_device[0], 16);
  EXPECT_EQ(per_device[1], 16);
  // Each device loaded the cubins its kernels come from once: paged_decode and paged_decode_g16
  // for sm_90 and for sm_80.
  EXPECT_EQ(fake_state().loads, 4);
}

TEST(FakeRuntime, TeardownUnloadsEveryLibrary) {
  {
    auto rt = create({h200()});
    CUBINRT_ASSERT_OK(rt);
    EXPECT_EQ(fake_state().unloads, 0);
  }
  EXPECT_EQ(fake_state().unloads, 4);  // the four libraries its 110 kernels came from (one a family)
}

TEST(FakeRuntime, SupportsExplainsWithoutLoading) {
  RuntimeOptions o;
  o.lazy = true;
  auto rt = create({l40s()}, {}, o);
  CUBINRT_ASSERT_OK(rt);
  const Support yes = (*rt)->supports(decode_key(256, Dtype::fp16, Dtype::fp8_e5m2, 64));
  EXPECT_TRUE(yes.ok);
  EXPECT_EQ(yes.reason, "device 0 'NVIDIA L40S' (sm_89) runs paged_decode.sm_89.hd256.fp16.fp8_e5m2.p64");
  const Support no = (*rt)->supports(decode_key(80, Dtype::fp16, Dtype::fp16, 16));
  EXPECT_FALSE(no.ok);
  EXPECT_EQ(no.reason, "NVIDIA L40S (sm_89) cannot run paged_decode head_dim=80 q_dtype=fp16 kv_dtype=fp16 page_size=16: the bundle has no paged_decode kernel with head_dim=80 for any GPU");
  EXPECT_EQ(fake_state().loads, 0);
}

}  // namespace
}  // namespace cubinrt::test
