// The host truth itself: exact encodings and a reference that agrees with attention by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "families/paged_decode/reference.hpp"

namespace cubinrt::test {
namespace {

TEST(Reference, Fp8DecodesExactly) {
  EXPECT_EQ(element_value(Dtype::fp8_e4m3, 0x7e), 448.0);
  EXPECT_TRUE(std::isnan(element_value(Dtype::fp8_e4m3, 0x7f)));
  EXPECT_EQ(element_value(Dtype::fp8_e4m3, 0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(element_value(Dtype::fp8_e4m3, 0x38), 1.0);
  EXPECT_EQ(element_value(Dtype::fp8_e4m3, 0xc0), -2.0);
  EXPECT_EQ(element_value(Dtype::fp8_e5m2, 0x7b), 57344.0);
  EXPECT_TRUE(std::isinf(element_value(Dtype::fp8_e5m2, 0x7c)));
  EXPECT_EQ(element_value(Dtype::fp8_e5m2, 0x3c), 1.0);
  EXPECT_EQ(element_value(Dtype::fp8_e5m2, 0x01), std::ldexp(1.0, -16));
  // The same byte is a different number in each encoding.
  EXPECT_EQ(element_value(Dtype::fp8_e4m3, 0x44), 3.0);
  EXPECT_EQ(element_value(Dtype::fp8_e5m2, 0x44), 4.0);
}

TEST(Reference, SixteenBitRoundTripsEveryCode) {
  for (Dtype d : {Dtype::fp16, Dtype::bf16})
    for (uint32_t c = 0; c < 65536; ++c) {
      const double x = element_value(d, static_cast<uint16_t>(c));
      if (std::isnan(x)) continue;
      ASSERT_EQ(encode_float16(d, static_cast<float>(x)), c) << dtype_name(d) << " code " << c;
    }
  // Round half to even.
  EXPECT_EQ(encode_float16(Dtype::fp16, 1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(encode_float16(Dtype::fp16, 1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(encode_float16(Dtype::bf16, 1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(encode_float16(Dtype::fp16, 70000.f), 0x7c00);
}

TEST(Reference, SolveMatchesAttentionByHand) {
  DecodeShape s{.batch = 1, .num_q_heads = 2, .num_kv_heads = 1, .head_dim = 64, .q_dtype = Dtype::bf16, .page_size = 16, .block_table_stride = 2};
  ref::Problem p = ref::make_problem(s, Dtype::bf16, {17}, 5);
  ASSERT_EQ(p.block_table.size(), 2u);
  const ref::Answer a = ref::solve(p, Dtype::bf16);
  // Recompute head 1 directly from the encodings.
  auto at = [](const std::vector<uint8_t>& v, size_t i) {
    uint16_t x;
    std::memcpy(&x, v.data() + 2 * i, 2);
    return element_value(Dtype::bf16, x);
  };
  std::vector<double> w(17);
  double mx = -INFINITY, sum = 0;
  for (int t = 0; t < 17; ++t) {
    const size_t row = (static_cast<size_t>(p.block_table[t / 16]) * 16 + t % 16) * 64;
    double dot = 0;
    for (int d = 0; d < 64; ++d) dot += at(p.q, 64 + d) * at(p.k, row + d);
    w[t] = dot / 8.0;
    mx = std::max(mx, w[t]);
  }
  for (double& x : w) sum += (x = std::exp(x - mx));
  for (int d = 0; d < 64; ++d) {
    double o = 0;
    for (int t = 0; t < 17; ++t) o += w[t] / sum * at(p.v, (static_cast<size_t>(p.block_table[t / 16]) * 16 + t % 16) * 64 + d);
    EXPECT_NEAR(a.out[64 + d], o, 1e-12);
  }
  EXPECT_NEAR(a.lse[1], mx + std::log(sum), 1e-12);
}

TEST(Reference, ProblemsAreRandomNotZero) {
  DecodeShape s{.batch = 2, .num_q_heads = 4, .num_kv_heads = 2, .head_dim = 128, .q_dtype = Dtype::fp16, .page_size = 16, .block_table_stride = 8};
  const ref::Problem p = ref::make_problem(s, Dtype::fp8_e5m2, {100, 3}, 9);
  size_t zeros = 0;
  for (uint8_t b : p.k) zeros += (b & 0x7f) == 0;
  EXPECT_EQ(zeros, 0u);
  EXPECT_FLOAT_EQ(p.k_scale, 0.75f);
  // Pages are handed out shuffled, never in order.
  EXPECT_FALSE(p.block_table[0] == 0 && p.block_table[1] == 1 && p.block_table[2] == 2);
  EXPECT_EQ(p.block_table[8 + 1], -1);  // past the second sequence's one page
}

// An NVFP4 problem whose V scales are reordered into TensorRT-LLM's 4-token interleave is the same
// cache: solve reads the scales back in that order (bit for bit the same answer), and reading them
// as if linear gives another answer, so the order is what a kernel must follow.
TEST(Reference, InterleavedVScalesAreTheSameCache) {
  for (KvLayout layout : {KvLayout::nhd, KvLayout::hnd}) {
    DecodeShape s{.batch = 2, .num_q_heads = 8, .num_kv_heads = 2, .head_dim = 128, .q_dtype = Dtype::bf16, .page_size = 16,
                  .layout = layout, .block_table_stride = 4};
    const ref::Problem linear = ref::make_problem(s, Dtype::nvfp4, {50, 13}, 5);
    ref::Problem quads = linear;
    ref::reorder_v_scales(quads, ScaleOrder::interleaved4);
    EXPECT_NE(quads.v_sf, linear.v_sf);
    EXPECT_EQ(quads.k_sf, linear.k_sf);
    // Block 1 of token 0 of each page and head moves to byte 4 of its row; token 1's block 0 to byte 1.
    const size_t S = 8, row0 = layout == KvLayout::nhd ? 2 * S : S;  // token 1's row in page 0, head 0
    EXPECT_EQ(quads.v_sf[4], linear.v_sf[1]);
    EXPECT_EQ(quads.v_sf[1], linear.v_sf[row0]);
    const ref::Answer want = ref::solve(linear, Dtype::nvfp4), got = ref::solve(quads, Dtype::nvfp4);
    EXPECT_EQ(got.out, want.out);
    EXPECT_EQ(got.lse, want.lse);
    ref::Problem misread = quads;
    misread.shape.v_sf_order = ScaleOrder::linear;
    const std::vector<double> wrong = ref::solve(misread, Dtype::nvfp4).out;
    EXPECT_GT(ref::rel_l2(std::vector<float>(wrong.begin(), wrong.end()), want.out), 0.1);
    ref::reorder_v_scales(quads, ScaleOrder::linear);
    EXPECT_EQ(quads.v_sf, linear.v_sf);
  }
}

}  // namespace
}  // namespace cubinrt::test
