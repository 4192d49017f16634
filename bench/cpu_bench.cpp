// Host-side costs with Google Benchmark (CPU only, no GPU needed): parsing and verifying a cubin,
// selection, and what a launch costs the host before the driver (on the fake driver, so the
// figure is cubinrt's own work: argument checks, parameter fill, one cuLaunchKernelEx call).
#include <benchmark/benchmark.h>

#include "cubinrt/paged_decode.hpp"
#include "select/select.hpp"
#include "bundle/verify.hpp"
#include "support/fake_driver.hpp"

namespace {

using namespace cubinrt;

const Bundle& bundle() {
  static const Bundle b = *Bundle::embedded();
  return b;
}
const ManifestEntry& entry() { return *bundle().manifest().find("paged_decode.sm_90.hd128.bf16.fp8_e4m3.p16"); }

void BM_ReadCubin(benchmark::State& state) {
  const auto bytes = *bundle().cubin(entry());
  for (auto _ : state) benchmark::DoNotOptimize(read_cubin(bytes));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes.size()));
}
BENCHMARK(BM_ReadCubin);

void BM_VerifyEntry(benchmark::State& state) {  // zstd + sha256 + ELF + manifest + ABI
  for (auto _ : state) benchmark::DoNotOptimize(verify_entry(bundle(), entry()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * entry().size));
}
BENCHMARK(BM_VerifyEntry);

void BM_SelectEntry(benchmark::State& state) {
  const KernelKey key = entry().key;
  for (auto _ : state) benchmark::DoNotOptimize(select_entry(bundle().manifest(), Arch::from_sm(90), key, /*explain=*/state.range(0) != 0));
}
BENCHMARK(BM_SelectEntry)->Arg(0)->Arg(1);

void BM_LaunchHostSide(benchmark::State& state) {
  RuntimeOptions o;
  o.driver = test::make_fake_driver({test::h200()});
  o.bundle = std::make_shared<const Bundle>(*Bundle::embedded());
  o.lazy = true;
  auto rt = std::move(*Runtime::create(o));
  const DecodeShape s{.batch = 64, .num_q_heads = 32, .num_kv_heads = 8, .head_dim = 128, .q_dtype = Dtype::bf16,
                      .kv_storage = Dtype::uint8, .kv_declared = Dtype::fp8_e4m3, .page_size = 16, .block_table_stride = 512};
  const DecodePlan plan = *DecodePlan::create(*rt, s);
  alignas(16) static std::byte buf[1024];
  DecodeArgs a;
  a.q = a.out = buf;
  a.kv = {buf, buf, Dtype::uint8, Dtype::fp8_e4m3, 1.f, 1.f, nullptr, KvLayout::nhd, 16, 8, 1};
  a.block_table = a.seq_lens = reinterpret_cast<const int32_t*>(buf);
  for (auto _ : state) {
    benchmark::DoNotOptimize(plan.launch(a, nullptr));
    if (test::fake_state().launches.size() > 4096) {
      state.PauseTiming();
      test::fake_state().launches.clear();
      state.ResumeTiming();
    }
  }
}
BENCHMARK(BM_LaunchHostSide);

}  // namespace

BENCHMARK_MAIN();
