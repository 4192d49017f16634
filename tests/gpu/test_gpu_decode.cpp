// Numerics of every kernel this GPU selects from the default bundle, against the float64 reference:
// random data, ragged lengths from 1 past 8K that are not page multiples, shuffled block tables,
// both cache layouts, GQA, with and without a split KV range.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "families/paged_decode/family_parts.hpp"
#include "families/paged_decode/known_answer.hpp"
#include "families/paged_decode/reference.hpp"
#include "cubinrt/selfcheck.hpp"
#include "support/gpu.hpp"

namespace cubinrt::test {
namespace {

std::shared_ptr<Runtime> default_runtime() {
  static std::shared_ptr<Runtime> rt = [] {
    RuntimeOptions o;
    o.driver = gpu().driver;
    o.lazy = true;
    // CUBINRT_TEST_BUNDLE: check another bundle's kernels (bench/experiments) the same way.
    if (const char* b = std::getenv("CUBINRT_TEST_BUNDLE"); b && *b) o.bundle_path = b;
    auto r = Runtime::create(o);
    return r ? std::shared_ptr<Runtime>(std::move(*r)) : nullptr;
  }();
  return rt;
}

DecodeShape shape_for(const KernelKey& key, uint32_t batch, uint32_t hq, uint32_t hk, uint32_t max_len, KvLayout layout) {
  DecodeShape s;
  s.batch = batch;
  s.num_q_heads = hq;
  s.num_kv_heads = hk;
  s.head_dim = decode_axes(key).head_dim;
  s.q_dtype = decode_axes(key).q_dtype;
  s.page_size = decode_axes(key).page_size;
  s.layout = layout;
  s.block_table_stride = (max_len + decode_axes(key).page_size - 1) / decode_axes(key).page_size;
  return s;
}

struct Case {
  uint32_t batch, hq, hk;
  std::vector<int32_t> lens;
  KvLayout layout;
  int splits;  // 0: the plan's choice
  SplitMerge merge = SplitMerge::choose;
};

// Runs one case and returns the output's relative error (and the LSE's in *lse_err); NVFP4's V
// scales in `v_sf_order`.
double run_case(const Runtime& rt, const KernelKey& key, const Case& c, uint64_t seed, double* lse_err,
                ScaleOrder v_sf_order = ScaleOrder::linear) {
  int32_t max_len = 0;
  for (int32_t l : c.lens) max_len = std::max(max_len, l);
  ref::Problem p = ref::make_problem(shape_for(key, c.batch, c.hq, c.hk, static_cast<uint32_t>(max_len), c.layout), decode_axes(key).kv_dtype, c.lens, seed);
  if (v_sf_order != ScaleOrder::linear) ref::reorder_v_scales(p, v_sf_order);
  auto r = paged_decode::run_on_device(rt, p, std::nullopt, c.splits, c.merge);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
  if (!r) return INFINITY;
  // The case tests the key's kernel only if the plan took it (serves() and the twins' cases choose).
  EXPECT_EQ(r->kernel->key, key) << r->kernel->id;
  const ref::Answer want = ref::solve(p, decode_axes(key).kv_dtype);
  *lse_err = ref::rel_l2(r->lse, want.lse);
  return ref::rel_l2(decode_axes(key).q_dtype, r->out, want.out);
}

// Whether a plan for this case takes `key`'s kernel, asked of the planner itself: groups over 8
// take the 16-head family's where the bundle has it for this device; NVFP4 head_dim 128 in NHD
// pages with groups up to 4 over an even number of kv heads, the family that pairs kv heads, where
// the split count is forced or the unpaired grid fills the GPU unsplit (plan.cpp; the CPU dispatch
// tests check those rules, run_case that the launch took the kernel).
bool serves(const Runtime& rt, const KernelKey& key, const Case& c) {
  const DecodeShape s = shape_for(key, c.batch, c.hq, c.hk, static_cast<uint32_t>(*std::ranges::max_element(c.lens)), c.layout);
  auto plan = DecodePlan::create(rt, paged_decode::launch_shape(s, decode_axes(key).kv_dtype, std::nullopt, c.splits, c.merge));
  EXPECT_TRUE(plan.has_value()) << key.str() << ": " << (plan ? "" : plan.error().message);
  return plan && plan->kernel().entry->key == key;
}

TEST(GpuDecode, EverySelectedVariantMatchesFloat64Reference) {
  CUBINRT_REQUIRE_GPU();
  auto rt = default_runtime();
  ASSERT_TRUE(rt) << "runtime creation failed";
  std::vector<KernelKey> keys;  // the decode families' (the bundle holds kv_append's too)
  for (const KernelKey& k : rt->available())
    if (k.family == "paged_decode" || k.family == "paged_decode_g16" || k.family == paged_decode::kKvPairFamily) keys.push_back(k);
  ASSERT_FALSE(keys.empty());
  std::string report = "| variant | max rel. error (out) | max rel. error (lse) | tolerance |\n|---|---|---|---|\n";
  for (const KernelKey& key : keys) {
    // Ragged lengths, none a multiple of the page size; one past 8K; GQA ratios of 1, 4, 5, 8,
    // 12 and 16 (at head_dim 128 the 16-head kernels: one chunk, rows 0-7 then 8-15 of the q.K
    // tile; at 64 and 256 two chunks of 8) and 32 (two chunks of 16, or four of 8); both
    // layouts; splits forced and chosen, merged through the workspace and (sm_90 and later: the
    // planner's choice where the workspace would take 2 to 8 splits) by a cluster, with a split
    // past a sequence's end. Each kernel runs the cases whose group its family serves.
    std::vector<Case> cases = {
        {4, 8, 2, {1, 77, 1000, 8197}, KvLayout::nhd, 0},
        {3, 16, 2, {513, 9, 2049}, KvLayout::hnd, 3},
        {2, 4, 4, {1, 8200}, KvLayout::nhd, 1},
        {3, 8, 2, {600, 33, 517}, KvLayout::hnd, 0},
        {2, 10, 2, {300, 1031}, KvLayout::nhd, 2},
        {2, 32, 2, {129, 700}, KvLayout::hnd, 0},
        {2, 24, 2, {1500, 77}, KvLayout::hnd, 3},
        {2, 64, 2, {260, 1100}, KvLayout::nhd, 0},
        // The workspace merge reads a head's LSEs 32 to a warp and 256 to a chunk: 40 splits
        // (two per lane), and 300 (past the first chunk), a sequence's last ones empty; groups for both
        // families.
        {2, 8, 2, {1300, 613}, KvLayout::hnd, 40},
        {2, 24, 2, {1300, 613}, KvLayout::nhd, 40},
        {2, 16, 2, {8200, 3001}, KvLayout::nhd, 300},
        {2, 32, 2, {8200, 3001}, KvLayout::hnd, 300},
    };
    if (key.family == paged_decode::kKvPairFamily) {
      // Groups of 1 to 4 over 2 to 6 kv heads (every pair's second head's q heads in rows group..),
      // through the workspace with 3, 40 and 300 splits (small batches pair where the split count
      // is forced).
      cases.push_back({2, 8, 4, {1300, 613}, KvLayout::nhd, 40});
      cases.push_back({2, 4, 2, {8200, 3001}, KvLayout::nhd, 300});
      cases.push_back({3, 18, 6, {700, 300, 17}, KvLayout::nhd, 3});
    }
    if (paged_decode::supports_cluster_merge(rt->device(), *rt->selected(key))) {
      cases.push_back({2, 16, 2, {100, 45}, KvLayout::nhd, 2, SplitMerge::cluster});
      cases.push_back({2, 28, 2, {100, 45}, KvLayout::hnd, 2, SplitMerge::cluster});
      // The largest cluster the dispatcher launches (every block's share in registers at once), and
      // one of 5 blocks, most of the short sequence's empty.
      cases.push_back({2, 8, 2, {1100, 45}, KvLayout::hnd, 8, SplitMerge::cluster});
      cases.push_back({2, 20, 2, {1100, 45}, KvLayout::nhd, 8, SplitMerge::cluster});
      cases.push_back({3, 12, 2, {700, 300, 17}, KvLayout::nhd, 5, SplitMerge::cluster});
      cases.push_back({3, 32, 2, {700, 300, 17}, KvLayout::hnd, 5, SplitMerge::cluster});
      if (key.family == paged_decode::kKvPairFamily) cases.push_back({3, 12, 6, {700, 300, 17}, KvLayout::nhd, 5, SplitMerge::cluster});
    }
    double worst = 0, worst_lse = 0;
    uint64_t seed = 1000 + decode_axes(key).head_dim;
    int ran = 0;
    for (const Case& c : cases) {
      if (!serves(*rt, key, c)) continue;
      ++ran;
      double lse_err = 0;
      const double err = run_case(*rt, key, c, seed++, &lse_err);
      worst = std::max(worst, err);
      worst_lse = std::max(worst_lse, lse_err);
    }
    const auto* k = rt->kernel(key).value();
    EXPECT_GE(ran, 3) << k->entry->id;  // the 16-head kernels: groups 12, 16 and 32 (and 14 in a cluster)
    EXPECT_LE(worst, ref::tolerance(decode_axes(key).q_dtype)) << k->entry->id;
    EXPECT_LE(worst_lse, ref::tolerance(decode_axes(key).q_dtype)) << k->entry->id;
    report += fmt::format("| {} | {:.2e} | {:.2e} | {:.0e} |\n", k->entry->id, worst, worst_lse, ref::tolerance(decode_axes(key).q_dtype));
  }
  if (const char* path = std::getenv("CUBINRT_REPORT")) std::ofstream(path, std::ios::app) << report;
  std::printf("%s", report.c_str());
}

// The same uint8 buffer declared e4m3 and declared e5m2: two different answers, each correct for
// its encoding. A dispatcher that inferred the encoding would get one of them wrong.
TEST(GpuDecode, DeclaredFp8EncodingSelectsTheKernel) {
  CUBINRT_REQUIRE_GPU();
  auto rt = default_runtime();
  ASSERT_TRUE(rt);
  const KernelKey e4m3 = decode_key(128, Dtype::bf16, Dtype::fp8_e4m3, 16);
  const ref::Problem p = ref::make_problem(shape_for(e4m3, 2, 8, 2, 700, KvLayout::nhd), Dtype::fp8_e4m3, {700, 333}, 42);
  auto as_e4m3 = paged_decode::run_on_device(*rt, p, Dtype::fp8_e4m3);
  auto as_e5m2 = paged_decode::run_on_device(*rt, p, Dtype::fp8_e5m2);
  CUBINRT_ASSERT_OK(as_e4m3);
  CUBINRT_ASSERT_OK(as_e5m2);
  const ref::Answer want4 = ref::solve(p, Dtype::fp8_e4m3), want5 = ref::solve(p, Dtype::fp8_e5m2);
  const double tol = ref::tolerance(Dtype::bf16);
  EXPECT_LE(ref::rel_l2(Dtype::bf16, as_e4m3->out, want4.out), tol);
  EXPECT_LE(ref::rel_l2(Dtype::bf16, as_e5m2->out, want5.out), tol);
  // The two references differ by far more than the tolerance, so the declaration decided.
  EXPECT_GT(ref::rel_l2(Dtype::bf16, as_e4m3->out, want5.out), 10 * tol);
  EXPECT_GT(ref::rel_l2(Dtype::bf16, as_e5m2->out, want4.out), 10 * tol);
}

// head_dim 512 is SM100-only in the default bundle; its numerics are checked here from the same
// source built for sm_90 into a test-only bundle.
TEST(GpuDecode, HeadDim512FromTestBundle) {
  CUBINRT_REQUIRE_GPU();
  RuntimeOptions o;
  o.driver = gpu().driver;
  o.bundle_path = build_file("CUBINRT_TEST_HD512_BUNDLE", CUBINRT_TEST_HD512_BUNDLE);
  o.required = DecodeRequirements{{512}, {Dtype::bf16, Dtype::fp16}, {Dtype::fp8_e4m3}, {16}}.keys();
  auto rt = Runtime::create(o);
  CUBINRT_ASSERT_OK(rt);
  std::string report;
  for (const KernelKey& key : (*rt)->available()) {
    if (key.family != "paged_decode") continue;  // the bundle's interleaved-scale readers: their own test below
    double worst = 0, worst_lse = 0;
    // GQA 4, 6 and 8 (a chunk of 8 heads: rows 0-7 of the q.K tile in each of the 4 dim-split warps),
    // ragged lengths, forced and chosen splits.
    const std::vector<Case> cases = {{3, 8, 2, {5, 1500, 8201}, KvLayout::nhd, 0}, {2, 4, 1, {300, 17}, KvLayout::hnd, 2},
                                     {2, 12, 2, {700, 65}, KvLayout::nhd, 0}, {2, 16, 2, {1000, 3}, KvLayout::hnd, 3}};
    uint64_t seed = 77;
    for (const Case& c : cases) {
      double lse_err = 0;
      worst = std::max(worst, run_case(**rt, key, c, seed++, &lse_err));
      worst_lse = std::max(worst_lse, lse_err);
    }
    EXPECT_LE(worst, ref::tolerance(decode_axes(key).q_dtype)) << key.str();
    EXPECT_LE(worst_lse, ref::tolerance(decode_axes(key).q_dtype)) << key.str();
    report += fmt::format("| {} (test bundle, sm_90) | {:.2e} | {:.2e} | {:.0e} |\n", (*rt)->kernel(key).value()->entry->id, worst, worst_lse,
                          ref::tolerance(decode_axes(key).q_dtype));
  }
  if (const char* path = std::getenv("CUBINRT_REPORT")) std::ofstream(path, std::ios::app) << report;
  std::printf("%s", report.c_str());
}

// Test-bundle twins of SM100-only NVFP4 kernels, each against the float64 reference: three cases
// of ragged lengths, both layouts, forced and chosen splits, whose groups route to the key's kernel
// (over 8 q heads a kv head for the 16-head families), with V's scales in the order its family
// reads. Reports a row a kernel, `what` saying what the twin is.
void check_nvfp4_twins(const Runtime& rt, const std::vector<KernelKey>& keys, std::string_view what) {
  std::string report;
  for (const KernelKey& key : keys) {
    const bool wide = paged_decode::is_g16_family(key.family);
    const ScaleOrder order = paged_decode::is_vsf_interleaved_family(key.family) ? ScaleOrder::interleaved4 : ScaleOrder::linear;
    // The 8-head kernels' NHD case has an odd number of kv heads, which the pairing kernel leaves them.
    std::vector<Case> cases = {{3, wide ? 24u : 12u, wide ? 2u : 3u, {5, 1500, 4099}, KvLayout::nhd, 0},
                               {2, wide ? 12u : 4u, 1, {300, 17}, KvLayout::hnd, 2}, {2, wide ? 32u : 12u, 2, {700, 66}, KvLayout::hnd, 0}};
    // The pairing kernel's: NHD over even kv heads, splits forced (these small batches pair only so).
    if (key.family == paged_decode::kKvPairFamily)
      cases = {{3, 8, 2, {5, 1500, 4099}, KvLayout::nhd, 4}, {2, 4, 4, {300, 17}, KvLayout::nhd, 2}, {2, 6, 6, {700, 66}, KvLayout::nhd, 1}};
    double worst = 0, worst_lse = 0;
    uint64_t seed = 91;
    for (const Case& c : cases) {
      double lse_err = 0;
      worst = std::max(worst, run_case(rt, key, c, seed++, &lse_err, order));
      worst_lse = std::max(worst_lse, lse_err);
    }
    EXPECT_LE(worst, ref::tolerance(decode_axes(key).q_dtype)) << key.family << " " << key.str();
    EXPECT_LE(worst_lse, ref::tolerance(decode_axes(key).q_dtype)) << key.family << " " << key.str();
    report += fmt::format("| {} {} (test bundle, sm_90, {}) | {:.2e} | {:.2e} | {:.0e} |\n", key.family, rt.kernel(key).value()->entry->id, what,
                          worst, worst_lse, ref::tolerance(decode_axes(key).q_dtype));
  }
  if (const char* path = std::getenv("CUBINRT_REPORT")) std::ofstream(path, std::ios::app) << report;
  std::printf("%s", report.c_str());
}

// NVFP4 caches with V scales in TensorRT-LLM's 4-token interleave are read by SM100-only kernels;
// their numerics are checked here from the same source built for sm_90 into the test-only bundle:
// head_dim 64 (the register loop), 128, 256 and 512 (the dim-split loop, whose warps copy a
// quad's row each), and the 16-head kernel.
TEST(GpuDecode, Nvfp4InterleavedVScalesFromTestBundle) {
  CUBINRT_REQUIRE_GPU();
  RuntimeOptions o;
  o.driver = gpu().driver;
  o.bundle_path = build_file("CUBINRT_TEST_HD512_BUNDLE", CUBINRT_TEST_HD512_BUNDLE);
  for (uint32_t hd : {64u, 128u, 256u, 512u}) o.required.push_back(decode_vsf_interleaved_key(hd, Dtype::bf16, 16));
  o.required.push_back(decode_vsf_interleaved_key(128, Dtype::fp16, 32, /*sixteen_heads=*/true));
  auto rt = Runtime::create(o);
  CUBINRT_ASSERT_OK(rt);
  check_nvfp4_twins(**rt, o.required, "V scales interleaved");
}

// The SM100 NVFP4 kernels widen e2m1 with the hardware conversion (neighbouring dims paired, exact
// values): their twins, the same source built for sm_90 with cuda_fp4.h's software conversion in
// the instruction's place (tests/catalogs/e2m1_cvt_sm90.json), check everything but the
// instruction on the H200: each loop (head_dim 64 to 512), the 16-head kernels, both V-scale
// orders, the kernel that pairs kv heads.
TEST(GpuDecode, Nvfp4HardwareConversionTwinsFromTestBundle) {
  CUBINRT_REQUIRE_GPU();
  RuntimeOptions o;
  o.driver = gpu().driver;
  o.bundle_path = build_file("CUBINRT_TEST_E2M1_CVT_BUNDLE", CUBINRT_TEST_E2M1_CVT_BUNDLE);
  for (uint32_t hd : {64u, 128u, 256u, 512u}) o.required.push_back(decode_key(hd, Dtype::bf16, Dtype::nvfp4, 16));
  o.required.push_back(decode_key(128, Dtype::fp16, Dtype::nvfp4, 32));
  o.required.push_back(decode_g16_key(128, Dtype::bf16, Dtype::nvfp4, 16));
  for (uint32_t hd : {128u, 512u}) o.required.push_back(decode_vsf_interleaved_key(hd, Dtype::bf16, 16));
  o.required.push_back(decode_vsf_interleaved_key(128, Dtype::fp16, 32, /*sixteen_heads=*/true));
  o.required.push_back(decode_kv_pair_key(Dtype::bf16, 16));
  auto rt = Runtime::create(o);
  CUBINRT_ASSERT_OK(rt);
  ASSERT_EQ((*rt)->available().size(), o.required.size()) << "the twin bundle holds exactly these kernels";
  check_nvfp4_twins(**rt, o.required, "hardware e2m1 conversion's pairing");
}

}  // namespace
}  // namespace cubinrt::test
