// Every GPU of the host from one process: one runtime per device (Runtime::create_all), first use
// from 32 threads at once with each thread choosing a device, every output against the float64
// reference; a plan refusing another device's tensors and streams; the self-check on each device.
// With one GPU the threads all use it (and say so); the cross-device test needs two.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <latch>
#include <thread>

#include <fmt/format.h>

#include "cubinrt/selfcheck.hpp"
#include "families/paged_decode/reference.hpp"
#include "support/gpu.hpp"

namespace cubinrt::test {
namespace {

Result<std::vector<std::unique_ptr<Runtime>>> all_devices(bool lazy) {
  RuntimeOptions o;
  o.driver = gpu().driver;
  o.lazy = lazy;
  return Runtime::create_all(o);
}

// Thread t's problem: head_dim, q and KV dtypes, group, layout and lengths all vary with t, so the
// 32 threads between them ask for many kernels at once, on both devices.
struct ThreadCase {
  KernelKey key;
  ref::Problem problem;
};
ThreadCase thread_case(int t) {
  const uint32_t head_dim = std::array{64u, 128u, 256u}[t % 3];
  const Dtype q = t % 2 ? Dtype::bf16 : Dtype::fp16;
  const Dtype kv = std::array{q, Dtype::fp8_e4m3, Dtype::fp8_e5m2}[t / 3 % 3];
  const uint32_t group = std::array{1u, 4u, 5u, 8u, 16u}[t % 5];
  DecodeShape s{.batch = 2, .num_q_heads = 2 * group, .num_kv_heads = 2, .head_dim = head_dim, .q_dtype = q, .page_size = 16,
                .layout = t % 2 ? KvLayout::nhd : KvLayout::hnd};
  const std::vector<int32_t> lens{1 + 97 * t % 1500, 700 + 13 * t};
  s.block_table_stride = (static_cast<uint32_t>(std::max(lens[0], lens[1])) + 15) / 16;
  return {decode_key(head_dim, q, kv, 16), ref::make_problem(s, kv, lens, 500 + static_cast<uint64_t>(t))};
}

class MultiGpuFirstUse : public ::testing::TestWithParam<bool> {};

TEST_P(MultiGpuFirstUse, ThirtyTwoThreadsPlanAndLaunchOnEveryDevice) {
  CUBINRT_REQUIRE_GPU();
  const bool lazy = GetParam();
  auto rts = all_devices(lazy);
  CUBINRT_ASSERT_OK(rts);
  const size_t n = rts->size();
  constexpr int kThreads = 32;
  // Threads in contiguous blocks a device, so every device meets every variant of thread_case.
  auto device_of = [&](int t) { return static_cast<size_t>(t) * n / kThreads; };
  std::printf("%zu device(s), %s loading: 32 threads, threads %d at a time on each device\n", n, lazy ? "lazy" : "eager", kThreads / static_cast<int>(n));
  std::vector<ThreadCase> cases;
  for (int t = 0; t < kThreads; ++t) cases.push_back(thread_case(t));
  std::vector<std::string> errors(kThreads);
  std::vector<double> err(kThreads, INFINITY), err_lse(kThreads, INFINITY);
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      const Runtime& rt = *(*rts)[device_of(t)];
      start.arrive_and_wait();  // all at once: first use of each kernel races on every device
      // Uploads, plans (resolving the kernel: a lazy load here), launches on the NULL stream of
      // this device's context (run_on_device binds it on this thread), synchronises, reads back.
      auto r = paged_decode::run_on_device(rt, cases[t].problem);
      if (!r) return void(errors[t] = r.error().message);
      const ref::Answer want = ref::solve(cases[t].problem, cases[t].problem.kv_dtype);
      err[t] = ref::rel_l2(cases[t].problem.shape.q_dtype, r->out, want.out);
      err_lse[t] = ref::rel_l2(r->lse, want.lse);
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    SCOPED_TRACE(fmt::format("thread {} on device {}: {} group {}", t, device_of(t), cases[t].key.str(),
                             cases[t].problem.shape.num_q_heads / 2));
    EXPECT_EQ(errors[t], "");
    EXPECT_LE(err[t], ref::tolerance(cases[t].problem.shape.q_dtype));
    EXPECT_LE(err_lse[t], ref::tolerance(cases[t].problem.shape.q_dtype));
  }
  double worst = 0;
  for (double e : err) worst = std::max(worst, e);
  std::printf("32 threads on %zu device(s): every output matched the float64 reference, worst relative error %.2e\n", n, worst);
  for (const auto& rt : *rts) std::printf("%s: %zu kernels loaded\n", rt->device().str().c_str(), rt->loaded().size());
}

INSTANTIATE_TEST_SUITE_P(Loading, MultiGpuFirstUse, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "Lazy" : "Eager"; });

// cuStreamCreate/Destroy through the same libcuda (the runtime's table has no stream calls).
struct Streams {
  CUresult (*create)(CUstream*, unsigned) = nullptr;
  CUresult (*destroy)(CUstream) = nullptr;
};
Streams stream_api(const DriverApi& d) {
  using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  auto get = reinterpret_cast<GetProc>(dlsym(d.handle, "cuGetProcAddress_v2"));
  Streams s;
  CUdriverProcAddressQueryResult found{};
  if (get) {
    get("cuStreamCreate", reinterpret_cast<void**>(&s.create), 12040, CU_GET_PROC_ADDRESS_DEFAULT, &found);
    get("cuStreamDestroy", reinterpret_cast<void**>(&s.destroy), 12040, CU_GET_PROC_ADDRESS_DEFAULT, &found);
  }
  return s;
}

TEST(MultiGpu, PlanRefusesTensorsAndStreamsOfAnotherDevice) {
  CUBINRT_REQUIRE_GPU();
  auto rts = all_devices(/*lazy=*/true);
  CUBINRT_ASSERT_OK(rts);
  if (rts->size() < 2) GTEST_SKIP() << "needs two devices: the driver sees " << rts->size();
  const Runtime& rt0 = *(*rts)[0];
  const Runtime& rt1 = *(*rts)[1];
  const DriverApi& d = *gpu().driver;
  const KernelKey key = decode_key(128, Dtype::bf16, Dtype::bf16, 16);
  // The same kernel, resolved in each device's own context.
  EXPECT_NE(rt0.kernel(key).value()->function, rt1.kernel(key).value()->function);

  // A problem's buffers on device 1.
  const ref::Problem p = ref::make_problem({.batch = 2, .num_q_heads = 8, .num_kv_heads = 2, .head_dim = 128, .q_dtype = Dtype::bf16,
                                            .page_size = 16, .block_table_stride = 40},
                                           Dtype::bf16, {600, 17}, 9);
  CUBINRT_ASSERT_OK(rt1.bind_context());
  const size_t out_bytes = size_t{2} * 8 * 128 * 2;
  CUdeviceptr q = 0, k = 0, v = 0, table = 0, lens = 0, out = 0;
  for (auto [ptr, bytes] : {std::pair{&q, p.q.size()}, {&k, p.k.size()}, {&v, p.v.size()}, {&table, p.block_table.size() * 4},
                            {&lens, p.seq_lens.size() * 4}, {&out, out_bytes}})
    ASSERT_EQ(d.cuMemAlloc(ptr, bytes), CUDA_SUCCESS);
  ASSERT_EQ(d.cuMemcpyHtoD(q, p.q.data(), p.q.size()), CUDA_SUCCESS);
  ASSERT_EQ(d.cuMemcpyHtoD(k, p.k.data(), p.k.size()), CUDA_SUCCESS);
  ASSERT_EQ(d.cuMemcpyHtoD(v, p.v.data(), p.v.size()), CUDA_SUCCESS);
  ASSERT_EQ(d.cuMemcpyHtoD(table, p.block_table.data(), p.block_table.size() * 4), CUDA_SUCCESS);
  ASSERT_EQ(d.cuMemcpyHtoD(lens, p.seq_lens.data(), p.seq_lens.size() * 4), CUDA_SUCCESS);
  const Streams streams = stream_api(d);
  ASSERT_TRUE(streams.create && streams.destroy);
  CUstream stream1 = nullptr;
  ASSERT_EQ(streams.create(&stream1, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);

  DecodeShape shape = p.shape;
  shape.kv_storage = Dtype::bf16;
  DecodeArgs a;
  a.q = reinterpret_cast<void*>(q);
  a.kv = {reinterpret_cast<void*>(k), reinterpret_cast<void*>(v), Dtype::bf16, std::nullopt, 1.f, 1.f, nullptr, shape.layout, 16, 2, p.num_pages};
  a.block_table = reinterpret_cast<const int32_t*>(table);
  a.seq_lens = reinterpret_cast<const int32_t*>(lens);
  a.out = reinterpret_cast<void*>(out);
  a.softmax_scale = p.softmax_scale;
  auto plan0 = DecodePlan::create(rt0, shape);
  auto plan1 = DecodePlan::create(rt1, shape);
  CUBINRT_ASSERT_OK(plan0);
  CUBINRT_ASSERT_OK(plan1);
  ASSERT_EQ(plan0->workspace_bytes(), 0u);  // 2 x 2 blocks of 600 tokens at most: unsplit or a cluster

  // Device 0's plan, device 1's tensors, on device 0's NULL stream: refused, nothing launched.
  CUBINRT_ASSERT_OK(rt0.bind_context());
  auto refused = plan0->launch(a, nullptr);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, Errc::invalid_argument);
  EXPECT_EQ(refused.error().message,
            fmt::format("paged decode launch: q ({}) is on device 1, but this plan runs on {}; a plan reads the memory of its runtime's device "
                        "only", a.q, rt0.device().str()));
  std::printf("refused: %s\n", refused.error().message.c_str());
  // Device 0's plan on a stream of device 1.
  refused = plan0->launch(a, stream1);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().message,
            fmt::format("paged decode launch: the stream belongs to device 1, but this plan runs on {}; make a plan on a runtime of device 1, or "
                        "launch on a stream of device 0", rt0.device().str()));
  std::printf("refused: %s\n", refused.error().message.c_str());
  // Device 1's plan on its own stream runs, and its answer is right: nothing was poisoned.
  std::vector<uint8_t> poison(out_bytes, 0xff);
  ASSERT_EQ(d.cuMemcpyHtoD(out, poison.data(), out_bytes), CUDA_SUCCESS);
  CUBINRT_ASSERT_OK(plan1->launch(a, stream1));
  CUBINRT_ASSERT_OK(rt1.bind_context());
  ASSERT_EQ(d.cuCtxSynchronize(), CUDA_SUCCESS);
  std::vector<uint8_t> got(out_bytes);
  ASSERT_EQ(d.cuMemcpyDtoH(got.data(), out, out_bytes), CUDA_SUCCESS);
  const ref::Answer want = ref::solve(p, Dtype::bf16);
  EXPECT_LE(ref::rel_l2(Dtype::bf16, got, want.out), ref::tolerance(Dtype::bf16));
  // Device 1's plan on the NULL stream while device 0's context is current: it runs on device 1's
  // default stream, and device 0's context is current again afterwards.
  ASSERT_EQ(d.cuMemcpyHtoD(out, poison.data(), out_bytes), CUDA_SUCCESS);
  CUBINRT_ASSERT_OK(rt0.bind_context());
  CUBINRT_ASSERT_OK(plan1->launch(a, nullptr));
  CUcontext current = nullptr;
  ASSERT_EQ(d.cuCtxGetCurrent(&current), CUDA_SUCCESS);
  EXPECT_EQ(current, rt0.context());
  CUBINRT_ASSERT_OK(rt1.bind_context());
  ASSERT_EQ(d.cuCtxSynchronize(), CUDA_SUCCESS);
  ASSERT_EQ(d.cuMemcpyDtoH(got.data(), out, out_bytes), CUDA_SUCCESS);
  EXPECT_LE(ref::rel_l2(Dtype::bf16, got, want.out), ref::tolerance(Dtype::bf16));
  // And device 0 still answers right after its refusals.
  auto on0 = paged_decode::run_on_device(rt0, p);
  CUBINRT_ASSERT_OK(on0);
  EXPECT_LE(ref::rel_l2(Dtype::bf16, on0->out, want.out), ref::tolerance(Dtype::bf16));
  CUBINRT_ASSERT_OK(rt1.bind_context());
  streams.destroy(stream1);
  for (CUdeviceptr ptr : {q, k, v, table, lens, out}) d.cuMemFree(ptr);
}

TEST(MultiGpu, SelfCheckPassesOnEachDevice) {
  CUBINRT_REQUIRE_GPU();
  int count = 0;
  ASSERT_EQ(gpu().driver->cuDeviceGetCount(&count), CUDA_SUCCESS);
  for (int i = 0; i < count; ++i) {
    SelfCheckOptions o;
    o.runtime.driver = gpu().driver;
    o.runtime.device_ordinal = i;
    const SelfCheckReport r = run_selfcheck(o);
    ASSERT_FALSE(r.steps.empty());
    EXPECT_TRUE(r.passed) << "device " << i;
    EXPECT_EQ(r.steps.back().name, "known-answer");
    EXPECT_EQ(r.steps.back().status, StepStatus::pass) << r.steps.back().detail;
    std::printf("device %d: self-check %s in %.1f ms: %s\n", i, r.passed ? "passed" : "FAILED", r.total_ms, r.steps.back().detail.c_str());
  }
}

}  // namespace
}  // namespace cubinrt::test
