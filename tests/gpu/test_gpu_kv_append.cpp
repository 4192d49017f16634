// kv_append on a real GPU: every kernel the device selects writes exactly the reference's bytes
// (data, NVFP4 block scales, and nothing at skipped slots), and NVFP4's quantization error against
// the float64 input, reported.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <fmt/format.h>

#include "common/encodings.hpp"
#include "cubinrt/kv_append.hpp"
#include "families/kv_append/known_answer.hpp"
#include "support/gpu.hpp"

namespace cubinrt::test {
namespace {

std::unique_ptr<Runtime> lazy_runtime() {
  RuntimeOptions o;
  o.driver = gpu().driver;
  o.lazy = true;
  auto r = Runtime::create(o);
  return r ? std::move(*r) : nullptr;
}

TEST(GpuKvAppend, EveryKernelWritesTheReferencesBytes) {
  CUBINRT_REQUIRE_GPU();
  auto rt = lazy_runtime();
  ASSERT_TRUE(rt);
  std::vector<KernelKey> keys;
  for (const KernelKey& k : rt->available())
    if (k.family == "kv_append") keys.push_back(k);
  ASSERT_EQ(keys.size(), 8u);
  auto answers = kv_append::known_answer_tests(*rt, keys);
  CUBINRT_ASSERT_OK(answers);
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_TRUE((*answers)[i].passed()) << keys[i].str() << ": " << (*answers)[i].detail;
    std::printf("%s: %s\n", keys[i].str().c_str(), (*answers)[i].detail.c_str());
  }
}

// 65536 tokens of 2 heads of 128: more work items than 4 waves of threads (the launch's most) on
// an H100 or H200, so threads walk the grid-stride loop over several items (the quantizing writers
// 1-2 items a thread, the copying ones up to 4).
TEST(GpuKvAppend, GridStrideWritesTheReferencesBytes) {
  CUBINRT_REQUIRE_GPU();
  auto rt = lazy_runtime();
  ASSERT_TRUE(rt);
  int checked = 0;
  for (const KernelKey& k : rt->available()) {
    if (k.family != "kv_append") continue;
    auto in = parse_dtype(k.axis("in_dtype"));
    auto cache = parse_dtype(k.axis("cache_dtype"));
    CUBINRT_ASSERT_OK(in);
    CUBINRT_ASSERT_OK(cache);
    auto c = kv_append::check_against_reference(*rt, kv_append::make_problem(*in, *cache, 65536, 0x51 + static_cast<uint64_t>(*cache)));
    CUBINRT_ASSERT_OK(c);
    EXPECT_EQ(c->wrong, 0u) << k.str() << ": " << c->wrong << " of " << c->total << " cache bytes differ";
    EXPECT_GT(c->total, 65536u * 2 * 128 / 2) << k.str();
    std::printf("%s: %zu of %zu cache bytes differ\n", k.str().c_str(), c->wrong, c->total);
    ++checked;
  }
  EXPECT_EQ(checked, 8);
}

// dequant(x) = e2m1(code) * e4m3(block scale) * global scale, against the float64 input, over
// 512 tokens of 2 heads of 128.
TEST(GpuKvAppend, Nvfp4QuantizationErrorAgainstFloat64) {
  CUBINRT_REQUIRE_GPU();
  auto rt = lazy_runtime();
  ASSERT_TRUE(rt);
  std::string report;
  for (Dtype in : {Dtype::bf16, Dtype::fp16}) {
    const kv_append::Problem p = kv_append::make_problem(in, Dtype::nvfp4, 512, 7);
    auto got = kv_append::run_on_device(*rt, p);
    CUBINRT_ASSERT_OK(got);
    double err2 = 0, ref2 = 0, worst_block = 0;
    int64_t written = 0;
    for (int t = 0; t < p.num_tokens(); ++t) {
      const int64_t slot = p.slots[t];
      if (slot < 0 || slot >= p.num_pages * p.page_size) continue;
      const int64_t page = slot / p.page_size, offset = slot % p.page_size;
      for (int side = 0; side < 2; ++side)
        for (int h = 0; h < p.num_kv_heads; ++h)
          for (int j = 0; j < p.head_dim / 16; ++j) {
            const int64_t at = page * p.cache_strides.page + offset * p.cache_strides.token + h * p.cache_strides.head + j * 8;
            const uint8_t sf = (side ? got->v_sf : got->k_sf)[page * p.sf_strides.page + offset * p.sf_strides.token + h * p.sf_strides.head + j];
            const double scale = element_value(Dtype::fp8_e4m3, sf) * (side ? p.v_scale : p.k_scale);
            double amax = 0, block_err = 0;
            for (int i = 0; i < 16; ++i) {
              const uint8_t byte = (side ? got->v : got->k)[at + i / 2];
              const double d = e2m1_value(i % 2 ? byte >> 4 : byte & 15) * scale;
              const double x = element_value(in, (side ? p.v_in : p.k_in)[(int64_t{t} * p.num_kv_heads + h) * p.head_dim + j * 16 + i]);
              err2 += (d - x) * (d - x);
              ref2 += x * x;
              amax = std::max(amax, std::fabs(x));
              block_err = std::max(block_err, std::fabs(d - x));
              ++written;
            }
            if (amax > 0) worst_block = std::max(worst_block, block_err / amax);
          }
    }
    const double rel = std::sqrt(err2 / ref2);
    // e2m1 keeps 1 mantissa bit: the largest step, between 4 and 6, is a third of a block's
    // maximum, and rounding to nearest errs by at most half of it; the block scale's own e4m3
    // rounding (3 mantissa bits) may stretch that by 1/16.
    EXPECT_LT(rel, 0.12) << dtype_name(in);
    EXPECT_LE(worst_block, (1.0 / 6) * (1 + 1.0 / 16) + 1e-6) << dtype_name(in);
    report += fmt::format("| {} -> nvfp4 | {} elements | {:.4f} | {:.4f} |\n", dtype_name(in), written, rel, worst_block);
  }
  std::printf("| append | written | relative L2 error | worst error / block amax |\n|---|---|---|---|\n%s", report.c_str());
  if (const char* path = std::getenv("CUBINRT_REPORT")) std::ofstream(path, std::ios::app) << report;
}

}  // namespace
}  // namespace cubinrt::test
