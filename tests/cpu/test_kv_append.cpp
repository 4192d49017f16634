// kv_append on the host: the encoders its reference holds the kernel to (ties, saturation, signed
// zero), the reference itself on hand-checked values, and the plan and launch against the driver
// double (dtype rules, views, the parameter block, skipped work).
#include <gtest/gtest.h>

#include <cstring>

#include <fmt/format.h>

#include "common/encodings.hpp"
#include "common/kv_strides.hpp"
#include "cubinrt/kv_append.hpp"
#include "e2m1_encode.cuh"
#include "families/kv_append/kv_append_abi.h"
#include "families/kv_append/reference.hpp"
#include "support/fake_driver.hpp"
#include "support/gpu.hpp"

namespace cubinrt::test {
namespace {

using kv_append::HostCache;
using kv_append::Problem;

TEST(KvAppendEncodings, E2m1RoundsToNearestTiesToEvenAndSaturates) {
  // The midpoints between codes go to the even code: 0.25 -> 0, 0.75 -> 1.0, 1.25 -> 1.0,
  // 1.75 -> 2.0, 2.5 -> 2.0, 3.5 -> 4.0, 5 -> 4.0; past 6 saturates.
  const std::pair<float, uint8_t> cases[] = {{0.f, 0},   {0.25f, 0}, {0.2501f, 1}, {0.5f, 1},  {0.75f, 2}, {0.7499f, 1}, {1.25f, 2}, {1.26f, 3},
                                             {1.75f, 4}, {2.5f, 4},  {2.51f, 5},   {3.5f, 6},  {5.f, 6},   {5.01f, 7},   {6.f, 7},   {1e9f, 7},
                                             {-0.f, 8},  {-0.1f, 8}, {-1.f, 10},   {-7.f, 15}, {INFINITY, 7}, {-INFINITY, 15}};
  for (auto [x, code] : cases) EXPECT_EQ(encode_e2m1(x), code) << x;
  for (uint8_t c = 0; c < 16; ++c) EXPECT_EQ(encode_e2m1(static_cast<float>(e2m1_value(c))), c == 8 ? 8 : c) << int(c);
}

// The kernel's branch-free encoder (cubins/e2m1_encode.cuh, compiled here for the host) against the
// reference's nearest-code search: every sign and exponent (zeros, subnormals, infinities, NaNs),
// every one of the top 11 mantissa bits, and low bits that put each value on, one ulp either side
// of, or halfway between the points a 12-bit grid can hold. The e2m1 thresholds (0.25, 0.75, 1.25,
// 1.75, 2.5, 3.5, 5) and their neighbours are all among them.
TEST(KvAppendEncodings, KernelE2m1EncoderMatchesTheReference) {
  int64_t checked = 0, mismatches = 0;
  for (uint32_t high = 0; high < (1u << 20); ++high) {
    for (uint32_t low : {0x000u, 0x001u, 0x7ffu, 0x800u, 0x801u, 0xfffu}) {
      const uint32_t bits = (high << 12) | low;
      float x;
      std::memcpy(&x, &bits, sizeof x);
      const uint32_t got = cubinrt_e2m1::code(x), want = encode_e2m1(x);
      ++checked;
      if (got != want && ++mismatches <= 5) ADD_FAILURE() << fmt::format("bits {:#010x} ({}): kernel code {}, reference {}", bits, x, got, want);
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(checked, int64_t{6} << 20);
}

TEST(KvAppendEncodings, Fp8RoundsToNearestEvenAndSaturatesFinite) {
  EXPECT_EQ(encode_fp8(Dtype::fp8_e4m3, 1.f), 0x38);
  EXPECT_EQ(encode_fp8(Dtype::fp8_e4m3, 1.0625f), 0x38);  // halfway to 1.125 (0x39): the even code
  EXPECT_EQ(encode_fp8(Dtype::fp8_e4m3, 1.1875f), 0x3a);  // halfway between 0x39 and 0x3a: the even one
  EXPECT_EQ(encode_fp8(Dtype::fp8_e4m3, 448.f), 0x7e);
  EXPECT_EQ(encode_fp8(Dtype::fp8_e4m3, 1e6f), 0x7e);     // saturated, not NaN
  EXPECT_EQ(encode_fp8(Dtype::fp8_e4m3, -1e6f), 0xfe);
  EXPECT_EQ(encode_fp8(Dtype::fp8_e5m2, 1e9f), 0x7b);     // 57344, not infinity
  EXPECT_EQ(encode_fp8(Dtype::fp8_e4m3, INFINITY), 0x7e);  // infinity saturates too
  EXPECT_EQ(encode_fp8(Dtype::fp8_e5m2, -INFINITY), 0xfb);
  EXPECT_EQ(encode_fp8(Dtype::fp8_e4m3, -0.f), 0x80);
  EXPECT_EQ(encode_fp8(Dtype::fp8_e4m3, std::ldexp(1.f, -9)), 0x01);  // the smallest subnormal
  EXPECT_EQ(encode_fp8(Dtype::fp8_e4m3, std::ldexp(1.f, -10)), 0x00); // half of it: ties to even (zero)
  for (uint16_t c = 0; c < 256; ++c) {
    if (c == 0x7f || c == 0xff) continue;  // NaN
    EXPECT_EQ(encode_fp8(Dtype::fp8_e4m3, static_cast<float>(element_value(Dtype::fp8_e4m3, c))), c) << c;
  }
}

// One NVFP4 block by hand: amax 3 with a global scale of 0.5 gives a block scale of 1.0 (0x38),
// so each element is encoded at x / 0.5.
TEST(KvAppendReference, Nvfp4BlockByHand) {
  Problem p;
  p.in_dtype = Dtype::bf16;
  p.cache_dtype = Dtype::nvfp4;
  p.num_kv_heads = 1;
  p.head_dim = 16;
  p.page_size = 1;
  p.num_pages = 2;
  p.cache_strides = {8, 8, 8};
  p.sf_strides = {1, 1, 1};
  p.k_scale = p.v_scale = 0.5f;
  const float x[16] = {3.f, -3.f, 0.5f, 0.25f, 1.f, -0.75f, 2.f, 0.f, 1.5f, 0.1f, -2.5f, 1.25f, 0.6f, -1.f, 2.75f, -0.f};
  for (float v : x) p.k_in.push_back(encode_float16(Dtype::bf16, v)), p.v_in.push_back(encode_float16(Dtype::bf16, v));
  p.slots = {1};
  HostCache c{std::vector<uint8_t>(16, 0xa5), std::vector<uint8_t>(16, 0xa5), std::vector<uint8_t>(2, 0xa5), std::vector<uint8_t>(2, 0xa5)};
  kv_append::append(p, c);
  // x / 0.5: 6, -6, 1, 0.5, 2, -1.5, 4, 0, 3, 0.2, -5, 2.5, 1.2, -2, 5.5, -0
  //   codes: 7, 15, 2, 1, 4, 11, 6, 0, 5, 0, 14 (5 -> 4.0, tie to even), 4 (2.5 -> 2.0), 2, 12, 7 (5.5 -> 6), 8
  const uint8_t want[8] = {0xf7, 0x12, 0xb4, 0x06, 0x05, 0x4e, 0xc2, 0x87};
  EXPECT_EQ(std::vector<uint8_t>(c.k.begin() + 8, c.k.end()), std::vector<uint8_t>(want, want + 8));
  EXPECT_EQ(c.k_sf[1], 0x38);
  EXPECT_EQ(c.k[0], 0xa5);  // page 0 untouched
  EXPECT_EQ(c.k_sf[0], 0xa5);
}

// Where TensorRT-LLM's SM100 order puts block s of token t (docs/formats.md): the rows of t's quad,
// read as one array, hold it at byte 4 s + t % 4. By hand, for 8 blocks a row (head_dim 128).
TEST(KvAppendReference, InterleavedScalePlacesByHand) {
  using Place = std::pair<int64_t, int64_t>;  // (row, byte)
  const auto place = [](int64_t t, int64_t s) {
    const ScalePlace p = scale_place(ScaleOrder::interleaved4, t, s, 8);
    return Place{p.row, p.col};
  };
  EXPECT_EQ(place(0, 0), Place(0, 0));
  EXPECT_EQ(place(1, 0), Place(0, 1));  // the quad's 4 tokens of block 0 side by side
  EXPECT_EQ(place(3, 1), Place(0, 7));
  EXPECT_EQ(place(0, 2), Place(1, 0));  // array byte 8: the quad's second row
  EXPECT_EQ(place(2, 7), Place(3, 6));  // byte 30
  EXPECT_EQ(place(5, 7), Place(7, 5));  // quad 1: rows 4-7, byte 29
  EXPECT_EQ(scale_place(ScaleOrder::linear, 5, 7, 8).row, 5);
  EXPECT_EQ(scale_place(ScaleOrder::linear, 5, 7, 8).col, 7);
}

// An interleaved append writes the same codes and K scales, and each V scale at its interleaved
// place: the linear append's V scales, moved.
TEST(KvAppendReference, InterleavedVScalesAreTheLinearOnesMoved) {
  Problem p = kv_append::make_problem(Dtype::bf16, Dtype::nvfp4, 40, 3);
  HostCache linear{std::vector<uint8_t>(kv_append::cache_bytes(p)), std::vector<uint8_t>(kv_append::cache_bytes(p)),
                   std::vector<uint8_t>(kv_append::sf_bytes(p)), std::vector<uint8_t>(kv_append::sf_bytes(p))};
  HostCache quads = linear;
  kv_append::append(p, linear);
  p.v_sf_order = ScaleOrder::interleaved4;
  kv_append::append(p, quads);
  EXPECT_EQ(quads.k, linear.k);
  EXPECT_EQ(quads.v, linear.v);
  EXPECT_EQ(quads.k_sf, linear.k_sf);
  EXPECT_NE(quads.v_sf, linear.v_sf);
  const int64_t S = p.head_dim / 16;
  std::vector<uint8_t> moved(linear.v_sf.size());
  for (int64_t page = 0; page < p.num_pages; ++page)
    for (int64_t h = 0; h < p.num_kv_heads; ++h)
      for (int64_t t = 0; t < p.page_size; ++t)
        for (int64_t b = 0; b < S; ++b) {
          // The quad's rows as one array: (t / 4) * 4 * S + 4 b + t % 4, then back to (row, byte).
          const int64_t at = (t / 4) * 4 * S + 4 * b + t % 4;
          const auto sf = [&](int64_t row, int64_t col) { return page * p.sf_strides.page + row * p.sf_strides.token + h * p.sf_strides.head + col; };
          moved[sf(at / S, at % S)] = linear.v_sf[sf(t, b)];
        }
  EXPECT_EQ(quads.v_sf, moved);
}

class KvAppendDispatch : public ::testing::Test {
 protected:
  std::unique_ptr<Runtime> rt;
  alignas(16) std::byte k[4096], v[4096], kc[1 << 16], vc[1 << 16], ksf[4096], vsf[4096];
  int64_t slots[8] = {0, 5, -1, 17, 3, 100000, 9, 2};
  void SetUp() override {
    RuntimeOptions o;
    o.driver = make_fake_driver({h200()});
    o.lazy = true;
    rt = std::move(*Runtime::create(o));
    ASSERT_TRUE(rt->bind_context().has_value());
  }
  KvAppendShape shape(Dtype cache) const {
    const bool narrow = cache != Dtype::bf16;
    return {.num_kv_heads = 2, .head_dim = 64, .in_dtype = Dtype::bf16, .cache_storage = narrow ? Dtype::uint8 : Dtype::bf16,
            .cache_declared = narrow ? std::optional<Dtype>(cache) : std::nullopt, .page_size = 16};
  }
  KvAppendArgs args(const KvAppendShape& s) {
    KvAppendArgs a;
    a.k = k;
    a.v = v;
    a.slots = slots;
    a.num_tokens = 8;
    a.cache.k = kc;
    a.cache.v = vc;
    a.cache.storage = s.cache_storage;
    a.cache.declared = s.cache_declared;
    a.cache.k_scale = 0.5f;
    a.cache.v_scale = 0.25f;
    a.cache.page_size = 16;
    a.cache.num_kv_heads = 2;
    a.cache.num_pages = 4;
    a.cache.k_sf = ksf;
    a.cache.v_sf = vsf;
    return a;
  }
};

TEST_F(KvAppendDispatch, LaunchHandsTheDriverTheAbiStruct) {
  const KvAppendShape s = shape(Dtype::nvfp4);
  auto plan = KvAppendPlan::create(*rt, s);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_EQ(plan->kernel().entry->id, "kv_append.sm_90.bf16.nvfp4");
  CUBINRT_ASSERT_OK(plan->launch(args(s), nullptr));
  ASSERT_EQ(fake_state().launches.size(), 1u);
  const LaunchRecord& r = fake_state().launches[0];
  EXPECT_EQ(r.kernel, "cubinrt_kv_append_bf16_nvfp4");
  EXPECT_EQ(r.config.blockDimX, static_cast<unsigned>(CUBINRT_KV_APPEND_THREADS));
  EXPECT_EQ(r.config.gridDimX, 1u);  // 8 tokens x 2 heads x 4 chunks = 64 threads, each a K and a V chunk
  ASSERT_EQ(r.params.size(), offsetof(CubinrtKvAppendParamsV2, v_sf_order) + sizeof(int32_t));
  CubinrtKvAppendParamsV2 p{};
  std::memcpy(&p, r.params.data(), r.params.size());
  EXPECT_EQ(p.k_cache, kc);
  EXPECT_EQ(p.v_sf, reinterpret_cast<uint8_t*>(vsf));
  EXPECT_EQ(p.k_in_stride_token, 2 * 64);
  EXPECT_EQ(p.k_in_stride_head, 64);
  // NHD NVFP4: a row is 32 bytes; a page 16 tokens x 2 heads of them. Scales: 4 bytes a row.
  EXPECT_EQ(p.cache_stride_page, 16 * 2 * 32);
  EXPECT_EQ(p.cache_stride_token, 2 * 32);
  EXPECT_EQ(p.cache_stride_head, 32);
  EXPECT_EQ(p.sf_stride_page, 16 * 2 * 4);
  EXPECT_EQ(p.sf_stride_token, 2 * 4);
  EXPECT_EQ(p.sf_stride_head, 4);
  EXPECT_EQ(p.num_slots, 64);
  EXPECT_FLOAT_EQ(p.k_scale, 0.5f);
  EXPECT_FLOAT_EQ(p.v_scale, 0.25f);
  EXPECT_EQ(p.num_tokens, 8);
  EXPECT_EQ(p.head_dim, 64);
  EXPECT_EQ(p.v_sf_order, CUBINRT_SCALE_ORDER_LINEAR);
  // The sm_90 writer waits for the kernel before it, so its launch may overlap that kernel.
  EXPECT_TRUE(plan->overlaps_previous_kernel());
  ASSERT_NE(r.attr(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION), nullptr);
  KvAppendShape plain = s;
  plain.overlap = LaunchOverlap::never;
  auto ordered = KvAppendPlan::create(*rt, plain);
  CUBINRT_ASSERT_OK(ordered);
  EXPECT_FALSE(ordered->overlaps_previous_kernel());
  CUBINRT_ASSERT_OK(ordered->launch(args(s), nullptr));
  ASSERT_EQ(fake_state().launches.size(), 2u);
  EXPECT_TRUE(fake_state().launches[1].attrs.empty());
  // No tokens: nothing launched.
  KvAppendArgs none = args(s);
  none.num_tokens = 0;
  CUBINRT_ASSERT_OK(plan->launch(none, nullptr));
  EXPECT_EQ(fake_state().launches.size(), 2u);
}

TEST_F(KvAppendDispatch, BadCachesAndArgumentsAreRefusedBeforeLaunch) {
  KvAppendShape s = shape(Dtype::fp8_e4m3);
  s.cache_declared.reset();
  EXPECT_EQ(KvAppendPlan::create(*rt, s).error().message,
            "kv_append: the cache is uint8 storage with no declared dtype; declare fp8_e4m3, fp8_e5m2 or nvfp4 (cubinrt never infers the "
            "encoding from storage)");
  s = shape(Dtype::bf16);
  s.cache_storage = Dtype::fp16;
  EXPECT_EQ(KvAppendPlan::create(*rt, s).error().message, "kv_append: a fp16 cache takes fp16 tokens (bf16 given): 16-bit caches are written as they come");
  s = shape(Dtype::bf16);
  s.head_dim = 72;
  EXPECT_NE(KvAppendPlan::create(*rt, s).error().message.find("head_dim 72 is not a multiple of 16"), std::string::npos);

  const KvAppendShape nv = shape(Dtype::nvfp4);
  auto plan = KvAppendPlan::create(*rt, nv);
  CUBINRT_ASSERT_OK(plan);
  KvAppendArgs a = args(nv);
  a.cache.v_sf = nullptr;
  EXPECT_EQ(plan->launch(a, nullptr).error().message, "kv_append launch: an nvfp4 cache needs its block scales: cache.k_sf and cache.v_sf");
  a = args(nv);
  a.cache.k_scale = 0.f;
  EXPECT_NE(plan->launch(a, nullptr).error().message.find("must be positive and finite for a nvfp4 cache"), std::string::npos);
  a = args(nv);
  a.cache.declared = Dtype::fp8_e4m3;  // the same bytes declared another encoding: not this plan's
  EXPECT_NE(plan->launch(a, nullptr).error().message.find("is not the plan's"), std::string::npos);
  a = args(nv);
  a.k = k + 8;
  EXPECT_EQ(plan->launch(a, nullptr).error().message,
            fmt::format("kv_append launch: k at {} is not 16-byte aligned (the kernels access it 16 bytes at a time)", static_cast<const void*>(k + 8)));
  a = args(nv);
  a.cache.v_strides = {16 * 2 * 32, 32, 16 * 32};  // HND strides for V, NHD for K
  EXPECT_NE(plan->launch(a, nullptr).error().message.find("differ from V's"), std::string::npos);
  // V scales interleaved by 4 tokens need whole quads in a page and whole groups of 4 blocks a row.
  KvAppendShape odd_pages = nv;
  odd_pages.page_size = 6;
  auto odd = KvAppendPlan::create(*rt, odd_pages);
  CUBINRT_ASSERT_OK(odd);
  a = args(odd_pages);
  a.cache.page_size = 6;
  a.cache.v_sf_order = ScaleOrder::interleaved4;
  EXPECT_EQ(odd->launch(a, nullptr).error().message,
            "kv_append launch: v_sf_order interleaved4 keeps 4 tokens' scales together, so it needs a page size that is a multiple of 4, not 6");
  KvAppendShape narrow = nv;
  narrow.head_dim = 48;
  auto small = KvAppendPlan::create(*rt, narrow);
  CUBINRT_ASSERT_OK(small);
  a = args(narrow);
  a.cache.v_sf_order = ScaleOrder::interleaved4;
  EXPECT_EQ(small->launch(a, nullptr).error().message,
            "kv_append launch: v_sf_order interleaved4 needs a head_dim that is a multiple of 64 (rows of whole groups of 4 scales), not 48");
  EXPECT_TRUE(fake_state().launches.empty());
}

}  // namespace
}  // namespace cubinrt::test
